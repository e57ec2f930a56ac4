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
#include "exec/host_exec.hpp"
#include "transport/mpi_transport.hpp"

namespace cc_coll::detail {

namespace {

// Rows of the tensor's matrix view, when the shards must split it by rows
// (LOWRANK with an explicit shape); 0 when shards split elements.
std::uint64_t row_split(std::size_t n, const CallParams &p, std::uint64_t *cols)
{
    const Method *m = find_method(p.method);
    if (m == nullptr || !m->matrix_view || !p.has_shape || p.rows == 0) return 0;
    *cols = p.cols != 0 ? p.cols : n / p.rows;
    return p.rows;
}

// out[i] += in[i] for n elements of T; `in` need not be aligned for T (a
// group's packed blocks).
template <typename T>
void add_unaligned(const unsigned char *in, std::size_t n, void *out)
{
    T *o = static_cast<T *>(out);
    for (std::size_t i = 0; i < n; ++i) {
        T v;
        std::memcpy(&v, in + i * sizeof v, sizeof v);
        o[i] += v;
    }
}

// out = block 0 + block 1 + ... + block L-1 (each of n elements of dtype,
// `stride` bytes apart), added in that order, one rounding per addition as
// MPI's sum does (F16/BF16: in binary32, rounded to the dtype after each
// addition).
void sum_blocks(const unsigned char *blocks, std::size_t stride, std::size_t L, std::size_t n, cc_coll_dtype_t dtype,
                void *out)
{
    std::memcpy(out, blocks, n * dtype_size(dtype));
    for (std::size_t j = 1; j < L; ++j) {
        const unsigned char *b = blocks + j * stride;
        switch (dtype) {
        case CC_COLL_F32: add_unaligned<float>(b, n, out); break;
        case CC_COLL_F64: add_unaligned<double>(b, n, out); break;
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

bool runs_hierarchical(const Comm &comm, const std::vector<GroupTensor> &tensors)
{
    const NodeTopology *t = comm.topology();
    if (t == nullptr || tensors.empty()) return false;
    std::uint64_t bytes = 0;
    for (const GroupTensor &g : tensors) {
        HierarchicalShard s;
        if (g.args.on_device || find_method(g.params.method) == nullptr ||
            !hierarchical_shard(*t, g.args.count, g.args.dtype, g.params, 0, &s))
            return false;
        bytes += s.count * dtype_size(g.args.dtype);
    }
    return bytes <= static_cast<std::uint64_t>(INT_MAX);  // one packed block per rank
}

cc_coll_status_t allreduce_hierarchical(Comm &comm, const std::vector<GroupTensor> &tensors, Collective kind,
                                        StatsSnapshot *stats)
{
    const NodeTopology &t = *comm.topology();
    const std::size_t T = tensors.size(), L = static_cast<std::size_t>(t.node_size);
    const bool single = kind == Collective::Allreduce;
    const char *fn = single ? "cc_coll_allreduce" : "cc_coll_allreduce_group";
    Comm *rail = t.rail.get();

    // Every tensor's shards: shard[t * L + j] is node rank j's (count 0 for
    // j >= S). A rank's block in the node's exchanges packs its shards of
    // every tensor, in tensor order.
    std::vector<HierarchicalShard> shard(T * L);
    std::vector<std::size_t> es(T), at(T, 0);  // at: tensor t's place in this rank's packed block
    std::vector<int> bytes(L, 0);               // node rank j's packed block
    std::size_t mine_bytes = 0;
    for (std::size_t i = 0; i < T; ++i) {
        es[i] = dtype_size(tensors[i].args.dtype);
        for (std::size_t j = 0; j < L; ++j) {
            hierarchical_shard(t, tensors[i].args.count, tensors[i].args.dtype, tensors[i].params,
                               static_cast<int>(j), &shard[i * L + j]);
            bytes[j] += static_cast<int>(shard[i * L + j].count * es[i]);
        }
        at[i] = mine_bytes;
        mine_bytes += shard[i * L + static_cast<std::size_t>(t.node_rank)].count * es[i];
    }
    auto mine = [&](std::size_t i) -> const HierarchicalShard & {
        return shard[i * L + static_cast<std::size_t>(t.node_rank)];
    };
    auto shard_ptr = [&](std::size_t i) {
        return static_cast<char *>(tensors[i].args.recv) + mine(i).offset * es[i];
    };

    // The rail's residuals are checked before any data moves, and the result
    // joins the agreement of the whole communicator.
    cc_coll_status_t ready = CC_COLL_OK;
    CallSignature sig = single ? CallSignature::single(Collective::Allreduce, *find_method(tensors[0].params.method),
                                                       tensors[0].args.count, tensors[0].args.dtype,
                                                       tensors[0].args.op, false, tensors[0].params)
                               : CallSignature::group(kind, T, tensors[0].args.op, false);
    for (std::size_t i = 0; i < T; ++i) {
        const GroupTensor &g = tensors[i];
        const Method *m = find_method(g.params.method);
        if (!single) sig.add_tensor(m, g.args.count, g.args.dtype, g.params, kHierarchicalRoute, nullptr, 0);
        if (ready != CC_COLL_OK || rail == nullptr || mine(i).count == 0 || m->creates_residual == nullptr) continue;
        const bool create = m->creates_residual(false, mine(i).count, g.args.dtype, mine(i).params, rail->size());
        ready = residual_preflight(*rail, mine(i).params, shard_ptr(i), mine(i).count, g.args.dtype, false, create);
    }
    CC_COLL_TRY(agree(comm, fn, sig, ready));

    // 1. The node's reduce-scatter: every rank sends its shards for node
    //    rank j to rank j (one MPI_Alltoallv), and the owner adds the node's
    //    blocks in node-rank order into its shards of recv. (Open MPI's own
    //    MPI_Reduce_scatter took twice as long as an MPI_Allreduce of the
    //    whole buffer on two ranks; see docs/performance.md.) One tensor is
    //    sent from its buffer; several are packed first.
    const double t0 = now_seconds();
    HostExec x(comm);
    unsigned char *blocks = nullptr, *packed = nullptr;
    std::vector<int> sdispls(L, 0), rbytes(L, static_cast<int>(mine_bytes)), rdispls(L, 0);
    for (std::size_t j = 0; j < L; ++j) rdispls[j] = static_cast<int>(j * mine_bytes);
    CC_COLL_TRY(x.buffer<unsigned char>(Buf::RecvBytes, std::max<std::size_t>(L * mine_bytes, 1), &blocks));
    const void *send = tensors[0].args.send;
    if (T == 1) {
        for (std::size_t j = 0; j < L; ++j) sdispls[j] = static_cast<int>(shard[j].offset * es[0]);
    } else {
        std::size_t total = 0;
        for (std::size_t j = 0; j < L; ++j) total += static_cast<std::size_t>(bytes[j]);
        CC_COLL_TRY(x.buffer<unsigned char>(Buf::SendBytes, std::max<std::size_t>(total, 1), &packed));
        for (std::size_t j = 0, pos = 0; j < L; ++j) {
            sdispls[j] = static_cast<int>(pos);
            for (std::size_t i = 0; i < T; ++i) {
                const HierarchicalShard &b = shard[i * L + j];
                std::memcpy(packed + pos, static_cast<const char *>(tensors[i].args.send) + b.offset * es[i],
                            b.count * es[i]);
                pos += b.count * es[i];
            }
        }
        send = packed;
    }
    CC_COLL_TRY(alltoallv_bytes(send, bytes.data(), sdispls.data(), blocks, rbytes.data(), rdispls.data(), t.node));
    for (std::size_t i = 0; i < T; ++i)
        if (mine(i).count > 0)
            sum_blocks(blocks + at[i], mine_bytes, L, mine(i).count, tensors[i].args.dtype, shard_ptr(i));
    const double t1 = now_seconds();

    // 2. The rail: the method's flat allreduce of this rank's shards.
    cc_coll_status_t st = CC_COLL_OK;
    StatsSnapshot before, after;
    if (rail != nullptr && mine_bytes > 0) {
        std::vector<GroupTensor> inner(T);
        for (std::size_t i = 0; i < T; ++i)
            inner[i] = GroupTensor{AllreduceArgs{shard_ptr(i), shard_ptr(i), mine(i).count, tensors[i].args.dtype,
                                                 CC_COLL_SUM, false, nullptr},
                                   mine(i).params};
        before = rail->stats().snapshot();
        st = single ? allreduce(*rail, inner[0].args, inner[0].params) : allreduce_group(*rail, inner);
        after = rail->stats().snapshot();
    }
    // 3. A rail that failed failed on every node (its own agreement); the
    //    node's ranks learn it here, so that every rank returns an error.
    std::uint64_t failed = st != CC_COLL_OK ? 1 : 0;
    const cc_coll_status_t told = allreduce_max_u64(&failed, t.node);
    if (st != CC_COLL_OK) return st;
    if (told != CC_COLL_OK) return told;
    if (failed != 0)
        return fail(CC_COLL_ERR_MISMATCH,
                    "%s (hierarchical): another rank of this node could not run its shard's allreduce; recvbuf is "
                    "undefined",
                    fn);
    const double t2 = now_seconds();
    // 4. AVG: each owner divides its shards.
    for (std::size_t i = 0; i < T; ++i)
        if (tensors[i].args.op == CC_COLL_AVG && mine(i).count > 0)
            CC_COLL_TRY(x.divide(shard_ptr(i), mine(i).count, tensors[i].args.dtype, comm.size()));
    const double t3 = now_seconds();
    // 5. The node's allgather: in place for one tensor, packed for several.
    std::vector<int> displs(L, 0);
    if (T == 1) {
        for (std::size_t j = 0; j < L; ++j) displs[j] = static_cast<int>(shard[j].offset * es[0]);
        CC_COLL_TRY(allgatherv_bytes_in_place(tensors[0].args.recv, bytes.data(), displs.data(), t.node));
    } else {
        std::size_t total = 0;
        for (std::size_t j = 0; j < L; ++j) {
            displs[j] = static_cast<int>(total);
            total += static_cast<std::size_t>(bytes[j]);
        }
        CC_COLL_TRY(x.buffer<unsigned char>(Buf::SendBytes, std::max<std::size_t>(total, 1), &packed));
        unsigned char *own = packed + displs[static_cast<std::size_t>(t.node_rank)];
        for (std::size_t i = 0; i < T; ++i) std::memcpy(own + at[i], shard_ptr(i), mine(i).count * es[i]);
        CC_COLL_TRY(allgatherv_bytes_in_place(packed, bytes.data(), displs.data(), t.node));
        for (std::size_t j = 0; j < L; ++j) {
            if (j == static_cast<std::size_t>(t.node_rank)) continue;
            const unsigned char *from = packed + displs[j];
            for (std::size_t i = 0; i < T; ++i) {
                const HierarchicalShard &b = shard[i * L + j];
                std::memcpy(static_cast<char *>(tensors[i].args.recv) + b.offset * es[i], from, b.count * es[i]);
                from += b.count * es[i];
            }
        }
    }
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
