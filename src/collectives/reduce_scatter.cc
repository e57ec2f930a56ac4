#include "collectives/reduce_scatter.hpp"

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "core/log.hpp"

namespace cc_coll::detail {

cc_coll_status_t reduce_scatter(Comm &comm, const ReduceScatterArgs &args, const CallParams &params)
{
    log_message(LogLevel::Debug, "reduce_scatter rank %d/%d: recvcount=%zu dtype=%s op=%s method=%s in_place=%d",
                comm.rank(), comm.size(), args.recvcount, dtype_name(args.dtype),
                args.op == CC_COLL_SUM ? "sum" : "avg", cc_coll_method_name(params.method),
                args.send == args.recv ? 1 : 0);
    StatsSnapshot call;
    cc_coll_status_t st = CC_COLL_ERR_INTERNAL;
    switch (params.method) {
    case CC_COLL_METHOD_NONE: st = reduce_scatter_passthrough(comm, args, &call); break;
    case CC_COLL_METHOD_TOPK: st = reduce_scatter_sparse_alltoall(comm, args, params, &call); break;
    case CC_COLL_METHOD_SKETCH: st = reduce_scatter_sketch(comm, args, params, &call); break;
    case CC_COLL_METHOD_LOWRANK:
        return fail(CC_COLL_ERR_NOT_SUPPORTED,
                    "cc_coll_reduce_scatter: method lowrank has no reduce-scatter (PowerSGD's factors span the "
                    "whole matrix); use cc_coll_allreduce, or none, topk or sketch");
    default:
        return fail(CC_COLL_ERR_INVALID_METHOD, "cc_coll_reduce_scatter: method %d has no reduce-scatter algorithm",
                    static_cast<int>(params.method));
    }
    if (st != CC_COLL_OK) return st;
    call.calls = 1;
    call.bytes_uncompressed = args.recvcount * static_cast<std::size_t>(comm.size()) * dtype_size(args.dtype);
    comm.stats().add(call);
    return CC_COLL_OK;
}

}  // namespace cc_coll::detail
