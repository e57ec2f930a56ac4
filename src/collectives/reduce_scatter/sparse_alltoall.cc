// Reduce-scatter method TOPK: the top k of each shard, k = ceil(density x
// recvcount), sent to the shard's owner as fixed-size (index, value)
// payloads with one MPI_Alltoall; the owner scatter-adds the P payloads it
// receives. Each rank sends P payloads and receives P: O(k P) bytes, against
// (P - 1) / P x the buffer for a dense reduce-scatter. Coded payloads
// (CC_COLL_TOPK_VALUE_BITS, CC_COLL_TOPK_INDEX_CODING) vary in size: the
// blocks take the largest of any rank's (one MPI_Allgather of sizes).
//
// Dense fallback (MPI_Reduce_scatter_block of g'), decided from values
// identical on every rank: when one payload outweighs one shard, or when any
// rank had more NaN/Inf in a shard than that shard's k (every payload header
// carries its sender's flag, so every rank sees every sender's).
//
// Each rank checks the P payloads it received field by field before its
// scatter-add (topk::check_payloads, as the allreduce). The payloads differ
// from rank to rank, so the ranks compare their verdicts in the outcome
// exchange (collectives/common/outcome.hpp): a malformed payload on any rank
// is CC_COLL_ERR_MISMATCH on every rank, and a dense verdict on any rank
// sends every rank to the dense fallback.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <vector>

#include "collectives/common/outcome.hpp"
#include "collectives/common/steps.hpp"
#include "exec/workspace.hpp"
#include "collectives/reduce_scatter/common.hpp"
#include "collectives/reduce_scatter/reduce_scatter.hpp"
#include "exec/host_exec.hpp"
#include "wire/topk_payload.hpp"
#include "compressors/topk/topk_backend.hpp"
#include "compressors/topk/topk_select.hpp"
#include "core/dtype.hpp"
#include "core/error.hpp"
#include "transport/mpi_transport.hpp"

namespace cc_coll::detail {

namespace {

template <typename W>
cc_coll_status_t sparse_alltoall(Comm &comm, const ReduceScatterArgs &a, const CallParams &p, StatsSnapshot *stats)
{
    const std::size_t rc = a.recvcount;
    const std::size_t P = static_cast<std::size_t>(comm.size());
    const std::size_t n = rc * P;
    const std::size_t es = dtype_size(a.dtype);
    Workspace &ws = workspace_of(comm);
    const double t0 = now_seconds();

    const std::size_t k = topk::k_for(p.density, rc);
    const bool dense_only = topk_reduce_scatter_dense(rc, a.dtype, p.density, comm.size());
    const bool lossless_dense = dense_only && (a.dtype == CC_COLL_F32 || a.dtype == CC_COLL_F64);
    HostExec x(comm);
    W *g = nullptr;
    Residual *res = nullptr;
    cc_coll_status_t st = load_input<HostExec, W>(x, p, a.send, a.key(), n, a.dtype, !lossless_dense, &g, &res);
    if (st != CC_COLL_OK) return st;
    if (dense_only) {
        stats->time_compress += now_seconds() - t0;
        return dense_reduce_scatter<W>(comm, a, g, res != nullptr, stats);
    }

    // Select per shard; flag this rank if a shard has more NaN/Inf than k.
    ws.indices.resize(k * P);
    std::uint32_t flags = 0;
    for (std::size_t s = 0; s < P; ++s) {
        const W *shard = g + s * rc;
        std::uint32_t *idx = ws.indices.data() + s * k;
        topk::select<W>(shard, rc, k, idx, &ws.select);
        flags |= topk::nonfinite_overflow<W>(shard, rc, idx, k);
    }
    std::vector<W> sent(k * P);
    const topk::Format fmt = topk_format(p);
    std::size_t bytes = topk::payload_bytes(k, a.dtype), size_bytes = 0;
    if (!fmt.coded) {
        ws.send_bytes.assign(bytes * P, 0);
        for (std::size_t s = 0; s < P; ++s)
            topk::encode<W>(g + s * rc, rc, ws.indices.data() + s * k, k, flags, a.dtype,
                            ws.send_bytes.data() + s * bytes, sent.data() + s * k);
    } else {
        // Coded payloads (docs/wire.md, "TOPK reduce-scatter"): a kept
        // NaN/Inf has no level, so it flags every payload of this rank;
        // each shard coded at capacity, then all moved to the largest size
        // of any payload of any rank (one allgather of sizes).
        if (fmt.value_bits != 0)
            for (std::size_t j = 0; j < k * P; ++j)
                if (!std::isfinite(g[(j / k) * rc + ws.indices[j]])) flags |= topk::kFlagNonFiniteOverflow;
        const std::size_t capacity = topk::coded_capacity(k, a.dtype, fmt);
        std::vector<std::size_t> size(P);
        ws.send_bytes.assign(capacity * P, 0);
        std::uint64_t largest = 0;
        for (std::size_t s = 0; s < P; ++s) {
            size[s] = topk::encode_coded<W>(g + s * rc, rc, ws.indices.data() + s * k, k, flags, a.dtype, fmt,
                                            ws.send_bytes.data() + s * capacity, sent.data() + s * k);
            largest = std::max<std::uint64_t>(largest, size[s]);
        }
        std::vector<std::uint64_t> sizes(P);
        st = allgather_bytes(&largest, sizeof largest, sizes.data(), comm.mpi());
        if (st != CC_COLL_OK) {
            if (res != nullptr) host::undo_input<W>(g, a.send, n, a.dtype);
            return st;
        }
        bytes = 0;
        for (std::size_t r = 0; r < P; ++r) {
            if (sizes[r] > capacity || sizes[r] % 8 != 0) {
                if (res != nullptr) host::undo_input<W>(g, a.send, n, a.dtype);
                return fail(CC_COLL_ERR_MISMATCH,
                            "cc_coll_reduce_scatter (topk): rank %zu announced a coded payload of %llu bytes; a "
                            "payload of k %zu pairs takes at most %zu, in multiples of 8 (malformed size)",
                            r, static_cast<unsigned long long>(sizes[r]), k, capacity);
            }
            bytes = std::max<std::size_t>(bytes, static_cast<std::size_t>(sizes[r]));
        }
        for (std::size_t s = 1; s < P; ++s) {  // bytes <= capacity: every move goes down
            std::memmove(ws.send_bytes.data() + s * bytes, ws.send_bytes.data() + s * capacity, size[s]);
            std::memset(ws.send_bytes.data() + s * bytes + size[s], 0, bytes - size[s]);
        }
        size_bytes = sizeof largest;
    }
    const double t1 = now_seconds();
    stats->time_compress += t1 - t0;

    ws.recv_bytes.resize(bytes * P);
    st = alltoall_bytes(ws.send_bytes.data(), bytes, ws.recv_bytes.data(), comm.mpi());
    const double t2 = now_seconds();
    stats->time_communicate += t2 - t1;
    if (st != CC_COLL_OK) {
        if (res != nullptr) host::undo_input<W>(g, a.send, n, a.dtype);
        return st;
    }
    stats->bytes_wire += bytes * P + size_bytes;

    // The P payloads this rank received, checked field by field before the
    // scatter-add (topk::check_payloads): every header, then, unless a
    // sender flagged overflow, every payload's indices. What each rank found
    // and the dense fallback go through the outcome exchange
    // (collectives/common/outcome.hpp): a fault on any rank is an error on
    // every rank, and all fall back together.
    Outcome out(comm, "cc_coll_reduce_scatter (topk)");
    topk::Fault fault;
    const topk::Verdict verdict = topk::check_payloads(ws.recv_bytes.data(), P, bytes, rc, k, &fault, fmt, a.dtype);
    if (verdict == topk::Verdict::Reject)
        out.fault(fail(CC_COLL_ERR_MISMATCH, "%s: %s", out.name(), topk::describe(fault, "recvcount").c_str()),
                  FaultKind::Payload, static_cast<std::uint32_t>(1 + fault.sender));
    const int dense = out.max(verdict == topk::Verdict::Dense ? 1 : 0);
    st = out.exchange();
    if (st != CC_COLL_OK) {
        if (res != nullptr) host::undo_input<W>(g, a.send, n, a.dtype);
        return st;
    }
    if (out.max_of(dense) != 0) return dense_reduce_scatter<W>(comm, a, g, res != nullptr, stats);

    std::memset(a.recv, 0, rc * es);
    for (std::size_t r = 0; r < P; ++r) topk::scatter_add(ws.recv_bytes.data() + r * bytes, a.dtype, a.recv);
    if (a.op == CC_COLL_AVG) divide_in_place(a.recv, rc, a.dtype, comm.size());
    if (res != nullptr)
        for (std::size_t s = 0; s < P; ++s) host::keep_unsent<W>(g, s * rc, ws.indices.data() + s * k, sent.data() + s * k, k);
    stats->time_decompress += now_seconds() - t2;
    return CC_COLL_OK;
}

}  // namespace

bool topk_reduce_scatter_dense(std::size_t recvcount, cc_coll_dtype_t dtype, double density, int ranks)
{
    const std::size_t bytes = topk::payload_bytes(topk::k_for(density, recvcount), dtype);
    return bytes > recvcount * dtype_size(dtype) ||
           bytes * static_cast<std::size_t>(ranks) > static_cast<std::size_t>(INT_MAX);
}

cc_coll_status_t reduce_scatter_sparse_alltoall(Comm &comm, const ReduceScatterArgs &args, const CallParams &params,
                                                StatsSnapshot *stats)
{
    if (args.recvcount == 0) return CC_COLL_OK;
    return with_work_type(args.dtype,
                          [&](auto w) { return sparse_alltoall<decltype(w)>(comm, args, params, stats); });
}

}  // namespace cc_coll::detail
