#include "collectives/allreduce.hpp"

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "core/log.hpp"

namespace cc_coll::detail {

cc_coll_status_t allreduce(Comm &comm, const AllreduceArgs &args, const CallParams &params)
{
    log_message(LogLevel::Debug, "allreduce rank %d/%d: count=%zu dtype=%s op=%s method=%s in_place=%d device=%d",
                comm.rank(), comm.size(), args.count, dtype_name(args.dtype),
                args.op == CC_COLL_SUM ? "sum" : "avg", cc_coll_method_name(params.method),
                args.send == args.recv ? 1 : 0, args.on_device ? 1 : 0);
    if (params.method == CC_COLL_METHOD_LOWRANK) return allreduce_group(comm, {GroupTensor{args, params}});
    StatsSnapshot call;
    cc_coll_status_t st = CC_COLL_ERR_INTERNAL;
    switch (params.method) {
    case CC_COLL_METHOD_NONE:
        st = args.on_device ? allreduce_passthrough_device(comm, args, &call) : allreduce_passthrough(comm, args, &call);
        break;
    case CC_COLL_METHOD_TOPK:
        st = args.on_device ? allreduce_sparse_allgather_device(comm, args, params, &call)
                            : allreduce_sparse_allgather(comm, args, params, &call);
        break;
    case CC_COLL_METHOD_SKETCH:
        st = args.on_device ? allreduce_sketch_device(comm, args, params, &call)
                            : allreduce_sketch(comm, args, params, &call);
        break;
    default:
        return fail(CC_COLL_ERR_INVALID_METHOD, "cc_coll_allreduce: method %d has no allreduce algorithm",
                    static_cast<int>(params.method));
    }
    if (st != CC_COLL_OK) return st;
    call.calls = 1;
    call.bytes_uncompressed = args.count * dtype_size(args.dtype);
    comm.stats().add(call);
    return CC_COLL_OK;
}

}  // namespace cc_coll::detail
