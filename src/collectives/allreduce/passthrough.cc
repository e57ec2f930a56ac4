// Method NONE: exactly MPI_Allreduce (through the backend's transport), so
// results on host buffers are bit-identical to it.
#include "collectives/allreduce/allreduce.hpp"
#include "collectives/common/steps.hpp"
#include "core/dtype.hpp"
#include "exec/exec.hpp"

namespace cc_coll::detail {

namespace {

template <typename X>
cc_coll_status_t passthrough(X &x, const AllreduceArgs &a, StatsSnapshot *stats)
{
    Comm &comm = x.comm();
    CC_COLL_TRY(x.sync());  // the caller's stream may still be producing sendbuf
    const double t0 = now_seconds();
    CC_COLL_TRY(x.transport().allreduce_sum(a.send, a.recv, a.count, a.dtype, comm.mpi()));
    const double t1 = now_seconds();
    stats->time_communicate = t1 - t0;
    if (a.op == CC_COLL_AVG) {  // SUM has nothing after the sum (and skips a clock read)
        CC_COLL_TRY(x.divide(a.recv, a.count, a.dtype, comm.size()));
        CC_COLL_TRY(x.sync());
        stats->time_decompress = now_seconds() - t1;
    }
    stats->bytes_wire = a.count * dtype_size(a.dtype);
    return CC_COLL_OK;
}

}  // namespace

cc_coll_status_t allreduce_passthrough(Comm &comm, const AllreduceArgs &args, const CallParams &, StatsSnapshot *stats)
{
    if (args.count == 0) return CC_COLL_OK;  // every rank has count 0: nothing to move
    return with_exec(comm, args.on_device, args.stream, [&](auto &x) { return passthrough(x, args, stats); });
}

}  // namespace cc_coll::detail
