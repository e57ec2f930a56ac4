// Method TOPK: the sparse allreduce of ALGORITHMS.md section 2.
//
//  1. g' = g + e (e: this tensor's residual; without EF, g' = g).
//  2. Select the k = ceil(density n) largest |g'| exactly; encode
//     (index, value) pairs in the call's dtype.
//  3. One MPI_Allgather of the fixed-size payloads (O(k P) bytes per rank).
//  4. Every rank zeroes recvbuf and scatter-adds the P payloads in rank
//     order, so all ranks get bit-identical results; AVG divides by P.
//  5. e = g' - transmitted at the kept indices, g' elsewhere.
//
// Dense fallback, decided from values identical on every rank: when
// P x payload > n x element size (the pairs would outweigh the buffer), or
// when any rank's header says its non-finite elements did not fit in k, the
// call allreduces g' densely and the residual keeps only the rounding to the
// dtype. Non-finite elements rank above all finite ones in the selection, so
// otherwise they are all sent and propagate as MPI_SUM would; they are never
// kept in a residual.
#include <climits>
#include <cmath>
#include <cstring>

#include "collectives/allreduce.hpp"
#include "collectives/lossy_common.hpp"
#include "collectives/workspace.hpp"
#include "wire/topk_payload.hpp"
#include "compressors/topk/topk_select.hpp"
#include "core/dtype.hpp"
#include "core/error.hpp"
#include "transport/mpi_transport.hpp"

namespace cc_coll::detail {

namespace {

template <typename W>
cc_coll_status_t sparse_allgather(Comm &comm, const AllreduceArgs &a, const CallParams &p, StatsSnapshot *stats)
{
    const std::size_t n = a.count;
    const std::size_t es = dtype_size(a.dtype);
    const std::size_t P = static_cast<std::size_t>(comm.size());
    Workspace &ws = workspace_of(comm);
    const double t0 = now_seconds();

    const std::size_t k = topk::k_for(p.density, n);
    const std::size_t bytes = topk::payload_bytes(k, a.dtype);
    const bool dense_only = bytes * P > n * es || bytes * P > static_cast<std::size_t>(INT_MAX);

    // 1. g' = g + e. A dense F32/F64 call leaves nothing behind, so it uses
    //    an existing residual but never creates one (no memory, nothing
    //    counted against the cap).
    const bool lossless_dense = dense_only && (a.dtype == CC_COLL_F32 || a.dtype == CC_COLL_F64);
    W *g = nullptr;
    Residual *res = nullptr;
    cc_coll_status_t st = load_input<W>(comm, p, a.send, a.recv, n, a.dtype, !lossless_dense, &g, &res);
    if (st != CC_COLL_OK) return st;

    if (dense_only) {
        stats->time_compress += now_seconds() - t0;
        return dense_allreduce<W>(comm, a, g, res != nullptr, stats);
    }

    // 2. Select and encode.
    ws.indices.resize(k);
    topk::select<W>(g, n, k, ws.indices.data(), &ws.select);
    const std::uint32_t flags = topk::nonfinite_overflow<W>(g, n, ws.indices.data(), k);
    ws.send_bytes.resize(bytes);
    std::vector<W> sent(k);
    std::memset(ws.send_bytes.data(), 0, bytes);
    topk::encode<W>(g, n, ws.indices.data(), k, flags, a.dtype, ws.send_bytes.data(), sent.data());
    const double t1 = now_seconds();
    stats->time_compress += t1 - t0;

    // 3. Gather every rank's payload.
    ws.recv_bytes.resize(bytes * P);
    // A failed call leaves the residual as it was: take this call's input
    // back out of it (recvbuf, which may be the input, is untouched so far).
    st = allgather_bytes(ws.send_bytes.data(), bytes, ws.recv_bytes.data(), comm.mpi());
    const double t2 = now_seconds();
    stats->time_communicate += t2 - t1;
    if (st != CC_COLL_OK) {
        undo_input<W>(g, res, a.send, n, a.dtype);
        return st;
    }

    // Every rank sees the same headers, so every rank takes the same branch.
    bool overflow = false;
    std::size_t bad = 0;
    topk::PayloadHeader h{};
    if (!topk::headers_agree(ws.recv_bytes.data(), P, bytes, n, k, &bad, &h, &overflow)) {
        undo_input<W>(g, res, a.send, n, a.dtype);
        return fail(CC_COLL_ERR_MISMATCH,
                    "cc_coll_allreduce (topk): rank %zu sent count %llu / k %u but this rank has count %zu / "
                    "k %zu; every rank must pass the same count, dtype and density",
                    bad, static_cast<unsigned long long>(h.n), h.k, n, k);
    }
    if (overflow) {
        stats->bytes_wire += bytes;
        return dense_allreduce<W>(comm, a, g, res != nullptr, stats);
    }

    // 4. Decode: scatter-add in rank order.
    std::memset(a.recv, 0, n * es);
    for (std::size_t r = 0; r < P; ++r) topk::scatter_add(ws.recv_bytes.data() + r * bytes, a.dtype, a.recv);
    if (a.op == CC_COLL_AVG) divide_in_place(a.recv, n, a.dtype, comm.size());

    // 5. Residual: what was not transmitted.
    if (res != nullptr) keep_unsent<W>(g, 0, ws.indices.data(), sent.data(), k);
    stats->time_decompress += now_seconds() - t2;
    stats->bytes_wire += bytes;
    return CC_COLL_OK;
}

}  // namespace

cc_coll_status_t allreduce_sparse_allgather(Comm &comm, const AllreduceArgs &args, const CallParams &params,
                                            StatsSnapshot *stats)
{
    if (args.count == 0) return CC_COLL_OK;
    return with_work_type(args.dtype,
                          [&](auto w) { return sparse_allgather<decltype(w)>(comm, args, params, stats); });
}

}  // namespace cc_coll::detail
