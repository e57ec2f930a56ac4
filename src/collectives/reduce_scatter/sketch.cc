// Reduce-scatter method SKETCH (TAGC's sharded compression, with the
// library's sketch): the buffer is P shards of recvcount elements.
//
//  1. g' = g + e; the kept elements are chosen over the whole buffer.
//  2. Per-shard bitmaps (plus a flag byte "this rank has NaN/Inf" in every
//     shard) laid out shard by shard: one MPI_Reduce_scatter_block(MPI_BOR)
//     gives each rank the union support of its own shard.
//  3. The outcome exchange (collectives/common/outcome.hpp, one
//     MPI_Allreduce(MAX)) of the rows each shard needs, so that every
//     shard's sketch gets the same layout, as the block form requires, of
//     the non-finite flags, and of what each rank found when it checked its
//     received support's tail (sketch_support::check_tail) and its rows
//     (check_rows): a fault on any rank is CC_COLL_ERR_MISMATCH on every
//     rank.
//  4. Per-shard sketches laid out shard by shard: one
//     MPI_Reduce_scatter_block(MPI_SUM) gives each rank its shard's sketch.
//  5. Each rank peels its shard.
//
// Shards of any length (not a multiple of 1024) are fine: a shard's last
// block is short, and its bitmap is padded to whole bytes. Dense fallback
// (MPI_Reduce_scatter_block of g') from values identical on every rank
// after step 3: a NaN/Inf anywhere, or a sketch plus bitmap larger than a
// dense shard.
#include <algorithm>
#include <cstring>
#include <vector>

#include "collectives/common/outcome.hpp"
#include "collectives/common/steps.hpp"
#include "exec/workspace.hpp"
#include "collectives/reduce_scatter/common.hpp"
#include "compressors/sketch/sketch_backend.hpp"
#include "collectives/reduce_scatter/reduce_scatter.hpp"
#include "exec/host_exec.hpp"
#include "compressors/sketch/count_sketch.hpp"
#include "core/dtype.hpp"
#include "core/error.hpp"
#include "wire/sketch_support.hpp"
#include "transport/mpi_transport.hpp"

namespace cc_coll::detail {

namespace {

template <typename W>
cc_coll_status_t sketch_reduce_scatter(Comm &comm, const ReduceScatterArgs &a, const CallParams &p,
                                       StatsSnapshot *stats)
{
    const std::size_t rc = a.recvcount;
    const std::size_t P = static_cast<std::size_t>(comm.size());
    const std::size_t n = rc * P;
    const std::size_t es = dtype_size(a.dtype);
    Workspace &ws = workspace_of(comm);
    const double t0 = now_seconds();

    HostExec x(comm);
    W *g = nullptr;
    Residual *res = nullptr;
    cc_coll_status_t st = load_input<HostExec, W>(x, p, a.send, a.key(), n, a.dtype, true, &g, &res);
    if (st != CC_COLL_OK) return st;

    // 1-2. Select; per-shard bitmaps with the non-finite flag.
    host::sparsify<W>(g, n, p, &ws.select, &ws.indices);
    const std::vector<std::uint32_t> &idx = ws.indices;
    std::vector<std::size_t> first(P + 1);  // idx[first[s] .. first[s+1]) lie in shard s
    for (std::size_t s = 0; s <= P; ++s)
        first[s] = static_cast<std::size_t>(
            std::lower_bound(idx.begin(), idx.end(), static_cast<std::uint32_t>(std::min(s * rc, n))) - idx.begin());
    std::vector<std::uint32_t> local(idx.size());
    for (std::size_t s = 0; s < P; ++s)
        for (std::size_t j = first[s]; j < first[s + 1]; ++j) local[j] = idx[j] - static_cast<std::uint32_t>(s * rc);

    const std::size_t bb = sketch_support::message_bytes(rc);
    const std::uint8_t nonfinite = host::any_nonfinite(g, n) ? 1 : 0;
    ws.send_bytes.assign(bb * P, 0);
    for (std::size_t s = 0; s < P; ++s) {
        std::uint8_t *bitmap = ws.send_bytes.data() + s * bb;
        sketch::bitmap_set(bitmap, local.data() + first[s], first[s + 1] - first[s]);
        bitmap[sketch_support::flag_offset(rc)] = nonfinite;
    }
    const double t1 = now_seconds();
    stats->time_compress += t1 - t0;
    ws.recv_bytes.assign(bb, 0);
    st = reduce_scatter_bor(ws.send_bytes.data(), ws.recv_bytes.data(), bb, comm.mpi());
    if (st != CC_COLL_OK) {
        stats->time_communicate += now_seconds() - t1;
        if (res != nullptr) host::undo_input<W>(g, a.send, n, a.dtype);
        return st;
    }
    // 3. The same layout for every shard: the most rows any shard needs, and
    //    the dense fallback if any rank's shard carries the non-finite flag,
    //    both reduced by the outcome exchange (collectives/common/outcome.hpp),
    //    which also carries a fault found in a received support: then every
    //    rank fails.
    Outcome out(comm, "cc_coll_reduce_scatter (sketch)");
    const std::uint8_t *support = ws.recv_bytes.data();
    sketch_support::Fault fault;
    std::uint64_t m = 0;
    if (!sketch_support::check_tail(support + sketch_support::tail_offset(rc), rc, &fault))
        out.fault(fail(CC_COLL_ERR_MISMATCH, "%s: %s", out.name(), sketch_support::describe(fault).c_str()),
                  FaultKind::Support);
    else
        m = sketch::rows_per_table(support, rc, p.load_factor);
    if (out.ok() && !sketch_support::check_rows(m, &fault))
        out.fault(fail(CC_COLL_ERR_MISMATCH, "%s: %s", out.name(), sketch_support::describe(fault).c_str()),
                  FaultKind::Rows);
    const int rows = out.max(out.ok() ? m : 0);
    const int flagged = out.max(support[sketch_support::flag_offset(rc)] != 0 ? 1 : 0);
    st = out.exchange();
    stats->time_communicate += now_seconds() - t1;
    stats->bytes_wire += bb * P + sizeof m;
    if (st != CC_COLL_OK) {
        if (res != nullptr) host::undo_input<W>(g, a.send, n, a.dtype);
        return st;
    }
    // The agreed maximum is the same on every rank: so is this verdict.
    if (!sketch_support::check_rows(out.max_of(rows), &fault)) {
        if (res != nullptr) host::undo_input<W>(g, a.send, n, a.dtype);
        return fail(CC_COLL_ERR_MISMATCH, "%s: %s", out.name(), sketch_support::describe(fault).c_str());
    }
    sketch::Layout layout;
    layout.n = rc;
    layout.m = static_cast<std::uint32_t>(out.max_of(rows));
    layout.seed = p.seed;
    if (out.max_of(flagged) != 0 || layout.cells() * sizeof(W) + bb > rc * es)
        return dense_reduce_scatter<W>(comm, a, g, res != nullptr, stats);

    // 4. Per-shard sketches, shard by shard, summed and scattered at once.
    const double t2 = now_seconds();
    const std::size_t cells = layout.cells();
    std::vector<W> sketches(cells * P, W(0));
    for (std::size_t s = 0; s < P; ++s)
        sketch::encode<W>(layout, g + s * rc, local.data() + first[s], first[s + 1] - first[s],
                          sketches.data() + s * cells);
    W *mine = ws.work_other<W>(cells);
    const double t3 = now_seconds();
    stats->time_compress += t3 - t2;
    st = reduce_scatter_sum(sketches.data(), mine, cells, dtype_of_work<W>(), comm.mpi());
    const double t4 = now_seconds();
    stats->time_communicate += t4 - t3;
    stats->bytes_wire += cells * P * sizeof(W);
    if (st != CC_COLL_OK) {
        if (res != nullptr) host::undo_input<W>(g, a.send, n, a.dtype);
        return st;
    }
    // The kept values went exactly: the residual is zero there (only now, so
    // that a failed sum leaves the residual as it was).
    if (res != nullptr)
        for (std::uint32_t i : idx) g[i] = W(0);

    // 5. Decode this rank's shard.
    std::vector<W> decoded(rc);
    decode_sketch_into<W>(layout, support, mine, decoded.data(), a.recv, a.dtype, a.op, comm.size(), &ws.decode, stats);
    stats->time_decompress += now_seconds() - t4;
    return CC_COLL_OK;
}

}  // namespace

cc_coll_status_t reduce_scatter_sketch(Comm &comm, const ReduceScatterArgs &args, const CallParams &params,
                                       StatsSnapshot *stats)
{
    if (args.recvcount == 0) return CC_COLL_OK;
    return with_work_type(args.dtype,
                          [&](auto w) { return sketch_reduce_scatter<decltype(w)>(comm, args, params, stats); });
}

}  // namespace cc_coll::detail
