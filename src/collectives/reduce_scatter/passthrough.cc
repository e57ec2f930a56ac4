// Reduce-scatter method NONE: exactly MPI_Reduce_scatter_block.
#include "collectives/reduce_scatter/reduce_scatter.hpp"
#include "core/dtype.hpp"
#include "transport/mpi_transport.hpp"

namespace cc_coll::detail {

cc_coll_status_t reduce_scatter_passthrough(Comm &comm, const ReduceScatterArgs &args, const CallParams &,
                                            StatsSnapshot *stats)
{
    if (args.recvcount == 0) return CC_COLL_OK;
    const double t0 = now_seconds();
    const cc_coll_status_t st = reduce_scatter_sum(args.send, args.recv, args.recvcount, args.dtype, comm.mpi());
    const double t1 = now_seconds();
    if (st != CC_COLL_OK) return st;
    if (args.op == CC_COLL_AVG) divide_in_place(args.recv, args.recvcount, args.dtype, comm.size());
    stats->time_communicate = t1 - t0;
    stats->time_decompress = now_seconds() - t1;
    stats->bytes_wire = args.recvcount * static_cast<std::size_t>(comm.size()) * dtype_size(args.dtype);
    return CC_COLL_OK;
}

}  // namespace cc_coll::detail
