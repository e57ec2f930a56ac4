// The hierarchical allreduce (docs/algorithms.md, "Hierarchical allreduce"):
// a dense reduce-scatter inside each node puts the node's sum of shard s on
// the node's rank s; the ranks that own shard s on every node (a rail)
// allreduce it with the call's method, each keeping the error-feedback
// residual of its own shard; an allgather inside each node gives every rank
// the whole result. Only the rails cross node boundaries, so only compressed
// bytes travel between nodes, and each rank compresses 1/S of the tensor.
#include <algorithm>
#include <climits>
#include <cstring>
#include <vector>

#include "collectives/allreduce/allreduce.hpp"
#include "collectives/common/agreement.hpp"
#include "core/dtype.hpp"
#include "core/error.hpp"
#include "core/method.hpp"
#include "exec/exec.hpp"
#include "transport/mpi_transport.hpp"

namespace cc_coll::detail {

namespace {

// Rows of the tensor's matrix view, when the shards must split it by rows
// (LOWRANK with an explicit shape); 0 when shards split elements.
std::uint64_t row_split(std::size_t n, const CallParams &p, std::uint64_t *cols)
{
    if (p.method != CC_COLL_METHOD_LOWRANK || !p.has_shape || p.rows == 0) return 0;
    *cols = p.cols != 0 ? p.cols : n / p.rows;
    return p.rows;
}

// out = block 0 + block 1 + ... + block L-1 (each of n elements of dtype),
// added in that order, one rounding per addition as MPI's sum does
// (F16/BF16: in binary32, rounded to the dtype after each addition).
void sum_blocks(const unsigned char *blocks, std::size_t L, std::size_t n, cc_coll_dtype_t dtype, void *out)
{
    const std::size_t bytes = n * dtype_size(dtype);
    std::memcpy(out, blocks, bytes);
    for (std::size_t j = 1; j < L; ++j) {
        const unsigned char *b = blocks + j * bytes;
        switch (dtype) {
        case CC_COLL_F32: {
            float *o = static_cast<float *>(out);
            const float *in = reinterpret_cast<const float *>(b);
            for (std::size_t i = 0; i < n; ++i) o[i] += in[i];
            break;
        }
        case CC_COLL_F64: {
            double *o = static_cast<double *>(out);
            const double *in = reinterpret_cast<const double *>(b);
            for (std::size_t i = 0; i < n; ++i) o[i] += in[i];
            break;
        }
        case CC_COLL_F16: sum_f16(b, out, n); break;
        case CC_COLL_BF16: sum_bf16(b, out, n); break;
        }
    }
}

}  // namespace

bool hierarchical_shard(const NodeTopology &t, std::size_t n, cc_coll_dtype_t dtype, const CallParams &p, int shard,
                        HierarchicalShard *out)
{
    *out = HierarchicalShard{};
    if (shard >= t.shards) return true;  // owns no shard
    std::uint64_t cols = 1;
    const std::uint64_t rows = row_split(n, p, &cols);
    const std::uint64_t units = rows != 0 ? rows : n;
    const std::uint64_t unit = rows != 0 ? cols : 1;
    const std::uint64_t S = static_cast<std::uint64_t>(t.shards);
    const std::uint64_t s = static_cast<std::uint64_t>(shard);
    const std::uint64_t base = units / S, rem = units % S;
    out->offset = static_cast<std::size_t>((s * base + std::min(s, rem)) * unit);
    out->count = static_cast<std::size_t>((base + (s < rem ? 1 : 0)) * unit);
    out->rows = rows != 0 ? base + (s < rem ? 1 : 0) : 0;
    out->params = p;
    if (rows != 0) {
        out->params.rows = out->rows;
        out->params.cols = cols;
    }
    // Every block of the node's reduce-scatter and allgather is an int count
    // of bytes.
    const std::uint64_t biggest = (base + (rem != 0 ? 1 : 0)) * unit * dtype_size(dtype);
    return biggest <= static_cast<std::uint64_t>(INT_MAX);
}

bool runs_hierarchical(const Comm &comm, const AllreduceArgs &a, const CallParams &p)
{
    const NodeTopology *t = comm.topology();
    if (t == nullptr || a.on_device || a.count == 0) return false;
    HierarchicalShard s;
    return hierarchical_shard(*t, a.count, a.dtype, p, 0, &s);
}

cc_coll_status_t allreduce_hierarchical(Comm &comm, const Method &m, const AllreduceArgs &a, const CallParams &p,
                                        StatsSnapshot *stats)
{
    const NodeTopology &t = *comm.topology();
    const std::size_t es = dtype_size(a.dtype);
    HierarchicalShard mine;
    hierarchical_shard(t, a.count, a.dtype, p, t.node_rank, &mine);
    char *recv = static_cast<char *>(a.recv);
    char *shard = recv + mine.offset * es;
    Comm *rail = t.rail.get();

    // The rail's residual is checked before any data moves, and the result
    // joins the agreement of the whole communicator.
    cc_coll_status_t ready = CC_COLL_OK;
    if (rail != nullptr && mine.count > 0 && m.creates_residual != nullptr) {
        const bool create = m.creates_residual(false, mine.count, a.dtype, mine.params, rail->size());
        ready = residual_preflight(*rail, mine.params, shard, mine.count, a.dtype, false, create);
    }
    CC_COLL_TRY(agree(comm, "cc_coll_allreduce",
                      CallSignature::single(Collective::Allreduce, m, a.count, a.dtype, a.op, false, p), ready));

    // Blocks of the node's ranks: shard j on rank j < S, nothing on the others.
    const std::size_t L = static_cast<std::size_t>(t.node_size);
    std::vector<int> bytes(L, 0), displs(L, 0), rbytes(L, 0), rdispls(L, 0);
    for (std::size_t j = 0; j < L; ++j) {
        HierarchicalShard b;
        hierarchical_shard(t, a.count, a.dtype, p, static_cast<int>(j), &b);
        bytes[j] = static_cast<int>(b.count * es);
        displs[j] = static_cast<int>(b.offset * es);
        rbytes[j] = static_cast<int>(mine.count * es);
        rdispls[j] = static_cast<int>(j * mine.count * es);
    }

    // 1. The node's reduce-scatter: every rank sends shard j of its input to
    //    rank j (one MPI_Alltoallv), and the owner adds the node's blocks in
    //    node-rank order into its shard of recv. (Open MPI's own
    //    MPI_Reduce_scatter took twice as long as an MPI_Allreduce of the
    //    whole buffer on two ranks; see docs/performance.md.)
    const double t0 = now_seconds();
    unsigned char *blocks = nullptr;
    CC_COLL_TRY(with_exec(comm, false, nullptr, [&](auto &x) {
        return x.template buffer<unsigned char>(Buf::RecvBytes, std::max<std::size_t>(L * mine.count * es, 1),
                                                &blocks);
    }));
    CC_COLL_TRY(alltoallv_bytes(a.send, bytes.data(), displs.data(), blocks, rbytes.data(), rdispls.data(), t.node));
    if (mine.count > 0) sum_blocks(blocks, L, mine.count, a.dtype, shard);
    const double t1 = now_seconds();

    cc_coll_status_t st = CC_COLL_OK;
    StatsSnapshot before, after;
    if (rail != nullptr && mine.count > 0) {
        before = rail->stats().snapshot();
        const AllreduceArgs inner{shard, shard, mine.count, a.dtype, CC_COLL_SUM, false, nullptr};
        st = allreduce(*rail, inner, mine.params);
        after = rail->stats().snapshot();
    }
    // A rail that failed failed on every node (its own agreement); the
    // node's ranks learn it here, so that every rank returns an error.
    std::uint64_t failed = st != CC_COLL_OK ? 1 : 0;
    const cc_coll_status_t told = allreduce_max_u64(&failed, t.node);
    if (st != CC_COLL_OK) return st;
    if (told != CC_COLL_OK) return told;
    if (failed != 0)
        return fail(CC_COLL_ERR_MISMATCH,
                    "cc_coll_allreduce (hierarchical): another rank of this node could not run its shard's "
                    "allreduce; recvbuf is undefined");
    const double t2 = now_seconds();
    if (a.op == CC_COLL_AVG && mine.count > 0)
        CC_COLL_TRY(with_exec(comm, false, nullptr,
                              [&](auto &x) { return x.divide(shard, mine.count, a.dtype, comm.size()); }));
    const double t3 = now_seconds();
    CC_COLL_TRY(allgatherv_bytes_in_place(recv, bytes.data(), displs.data(), t.node));
    const double t4 = now_seconds();

    stats->bytes_wire = after.bytes_wire - before.bytes_wire;
    stats->time_compress = after.time_compress - before.time_compress;
    stats->time_decompress = (after.time_decompress - before.time_decompress) + (t3 - t2);
    stats->time_communicate = (after.time_communicate - before.time_communicate) + (t1 - t0) + (t4 - t3);
    stats->sketch_elements = after.sketch_elements - before.sketch_elements;
    stats->sketch_peeled = after.sketch_peeled - before.sketch_peeled;
    return CC_COLL_OK;
}

}  // namespace cc_coll::detail
