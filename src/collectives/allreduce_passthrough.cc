// Method NONE: exactly MPI_Allreduce, so results are bit-identical to it.
#include "collectives/allreduce.hpp"
#include "core/dtype.hpp"
#include "transport/mpi_transport.hpp"

namespace cc_coll::detail {

cc_coll_status_t allreduce_passthrough(Comm &comm, const AllreduceArgs &args, StatsSnapshot *stats)
{
    if (args.count == 0) return CC_COLL_OK;  // every rank has count 0: nothing to move
    const double t0 = now_seconds();
    const cc_coll_status_t st = allreduce_sum(args.send, args.recv, args.count, args.dtype, comm.mpi());
    const double t1 = now_seconds();
    if (st != CC_COLL_OK) return st;
    if (args.op == CC_COLL_AVG) divide_in_place(args.recv, args.count, args.dtype, comm.size());
    stats->time_communicate = t1 - t0;
    stats->time_decompress = now_seconds() - t1;
    stats->bytes_wire = args.count * dtype_size(args.dtype);
    return CC_COLL_OK;
}

}  // namespace cc_coll::detail
