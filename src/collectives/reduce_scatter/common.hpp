// Steps the reduce-scatter algorithms share (host memory): the dense
// fallback and the decode of a shard's summed sketch.
#pragma once

#include <cstddef>
#include <vector>

#include "exec/workspace.hpp"
#include "collectives/reduce_scatter/reduce_scatter.hpp"
#include "compressors/sketch/count_sketch.hpp"
#include "core/dtype.hpp"
#include "exec/host_kernels.hpp"
#include "transport/mpi_transport.hpp"

namespace cc_coll::detail {

// Dense reduce-scatter of g' (recvcount x P elements): this rank's shard of
// the sum over ranks of g' rounded to the dtype; the residual (ef) keeps the
// rounding.
template <typename W>
cc_coll_status_t dense_reduce_scatter(Comm &comm, const ReduceScatterArgs &a, W *g, bool ef, StatsSnapshot *stats)
{
    const std::size_t n = a.recvcount * static_cast<std::size_t>(comm.size());
    const std::size_t es = dtype_size(a.dtype);
    std::vector<unsigned char> &rounded = workspace_of(comm).send_bytes;
    const double t0 = now_seconds();
    rounded.resize(n * es);
    host::round_to_dtype<W>(g, ef, n, a.dtype, rounded.data());
    const double t1 = now_seconds();
    stats->time_compress += t1 - t0;
    const cc_coll_status_t st = reduce_scatter_sum(rounded.data(), a.recv, a.recvcount, a.dtype, comm.mpi());
    const double t2 = now_seconds();
    stats->time_communicate += t2 - t1;
    if (st != CC_COLL_OK) return st;
    if (a.op == CC_COLL_AVG) divide_in_place(a.recv, a.recvcount, a.dtype, comm.size());
    stats->time_decompress += now_seconds() - t2;
    stats->bytes_wire += n * es;
    return CC_COLL_OK;
}

// Decodes a summed sketch into out[0..n) (work type), rounds it into `dst`
// (n elements of dtype), applies AVG over `ranks`, and records the decode.
template <typename W>
void decode_sketch_into(const sketch::Layout &layout, const std::uint8_t *support, W *cells, W *out, void *dst,
                        cc_coll_dtype_t dtype, cc_coll_op_t op, int ranks, sketch::DecodeScratch *scratch,
                        StatsSnapshot *stats)
{
    const sketch::DecodeInfo info = sketch::decode<W>(layout, support, cells, out, scratch);
    store_as<W>(out, layout.n, dtype, dst);
    if (op == CC_COLL_AVG) divide_in_place(dst, layout.n, dtype, ranks);
    stats->sketch_elements += info.support;
    stats->sketch_peeled += info.peeled;
}

}  // namespace cc_coll::detail
