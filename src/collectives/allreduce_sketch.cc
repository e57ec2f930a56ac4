// Method SKETCH: the homomorphic count-sketch allreduce of ALGORITHMS.md
// section 3.
//
//  1. g' = g + e; each rank keeps its top k (or the threshold ladder's pick).
//  2. Global support: a bitmap (1 bit per element, plus one flag byte saying
//     "this rank has NaN/Inf") combined with MPI_Allreduce(MPI_BOR, MPI_UINT8_T).
//  3. Sketch rows sized from the global support so that its fullest column
//     stays under the load factor; every rank computes the same layout.
//  4. Each rank sketches its kept values; one MPI_Allreduce(MPI_SUM) of the
//     sketch in the work type (binary64 for F64, binary32 otherwise).
//  5. Peeling decode over the global support (identical on every rank), then
//     median-of-3 estimates for anything that did not peel.
//  6. Residual: zero at the kept elements (sent exactly in the work type).
//
// Dense fallback, from values every rank shares after step 2: when a rank
// has NaN/Inf (a sketch cell cannot carry them without poisoning its
// neighbours), or when the sketch plus bitmap would outweigh the buffer.
#include <cstring>

#include "collectives/allreduce.hpp"
#include "collectives/lossy_common.hpp"
#include "collectives/workspace.hpp"
#include "compressors/sketch/count_sketch.hpp"
#include "core/dtype.hpp"
#include "transport/mpi_transport.hpp"

namespace cc_coll::detail {

namespace {

template <typename W>
cc_coll_status_t sketch_allreduce(Comm &comm, const AllreduceArgs &a, const CallParams &p, StatsSnapshot *stats)
{
    const std::size_t n = a.count;
    const std::size_t es = dtype_size(a.dtype);
    Workspace &ws = workspace_of(comm);
    const double t0 = now_seconds();

    W *g = nullptr;
    Residual *res = nullptr;
    cc_coll_status_t st = load_input<W>(comm, p, a.send, a.recv, n, a.dtype, true, &g, &res);
    if (st != CC_COLL_OK) return st;

    // 1-2. Select, then the global support and the non-finite flag.
    sparsify<W>(g, n, p, &ws.select, &ws.indices);
    const std::size_t bitmap_bytes = sketch::bitmap_bytes(n);
    ws.send_bytes.assign(bitmap_bytes + 1, 0);
    sketch::bitmap_set(ws.send_bytes.data(), ws.indices.data(), ws.indices.size());
    ws.send_bytes[bitmap_bytes] = any_nonfinite(g, n) ? 1 : 0;
    const double t1 = now_seconds();
    stats->time_compress += t1 - t0;
    st = allreduce_bor(ws.send_bytes.data(), bitmap_bytes + 1, comm.mpi());
    stats->time_communicate += now_seconds() - t1;
    stats->bytes_wire += bitmap_bytes + 1;
    if (st != CC_COLL_OK) {
        undo_input<W>(g, res, a.send, n, a.dtype);
        return st;
    }
    const std::uint8_t *support = ws.send_bytes.data();

    // 3. Layout from the global support; dense when it does not pay.
    sketch::Layout layout;
    layout.n = n;
    layout.m = sketch::rows_per_table(support, n, p.load_factor);
    layout.seed = p.seed;
    if (ws.send_bytes[bitmap_bytes] != 0 || layout.cells() * sizeof(W) + bitmap_bytes + 1 > n * es)
        return dense_allreduce<W>(comm, a, g, res != nullptr, stats);

    // 4. Sketch this rank's kept values and sum the sketches.
    const double t2 = now_seconds();
    W *cells = ws.work_other<W>(layout.cells());
    std::memset(cells, 0, layout.cells() * sizeof(W));
    sketch::encode<W>(layout, g, ws.indices.data(), ws.indices.size(), cells);
    if (res != nullptr)
        for (std::uint32_t i : ws.indices) g[i] = W(0);  // sent exactly
    const double t3 = now_seconds();
    stats->time_compress += t3 - t2;
    st = allreduce_sum(cells, cells, layout.cells(), dtype_of_work<W>(), comm.mpi());
    const double t4 = now_seconds();
    stats->time_communicate += t4 - t3;
    stats->bytes_wire += layout.cells() * sizeof(W);
    if (st != CC_COLL_OK) return st;

    // 5. Decode into the work buffer, then round to the dtype.
    W *out = res != nullptr ? ws.work<W>(n) : g;  // without EF, g' is no longer needed
    decode_sketch_into<W>(layout, support, cells, out, a.recv, a.dtype, a.op, comm.size(), &ws.decode, stats);
    stats->time_decompress += now_seconds() - t4;
    return CC_COLL_OK;
}

}  // namespace

cc_coll_status_t allreduce_sketch(Comm &comm, const AllreduceArgs &args, const CallParams &params,
                                  StatsSnapshot *stats)
{
    if (args.count == 0) return CC_COLL_OK;
    return with_work_type(args.dtype,
                          [&](auto w) { return sketch_allreduce<decltype(w)>(comm, args, params, stats); });
}

}  // namespace cc_coll::detail
