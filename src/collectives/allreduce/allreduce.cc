#include "collectives/allreduce/allreduce.hpp"

#include "collectives/common/agreement.hpp"

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "collectives/common/host_staging.hpp"
#include "core/method.hpp"

namespace cc_coll::detail {

bool residual_on_device(const Method &m, const AllreduceArgs &args, const CallParams &params)
{
    return args.on_device && !(m.stages_device != nullptr && m.stages_device(params));
}

cc_coll_status_t allreduce_single(Comm &comm, const Method &m, const AllreduceArgs &args, const CallParams &params,
                                  StatsSnapshot *stats)
{
    if (!args.on_device || residual_on_device(m, args, params)) return m.allreduce(comm, args, params, stats);
    const char *fn = "cc_coll_allreduce";
    const std::size_t bytes = args.count * dtype_size(args.dtype);
    HostStaging staged;
    CC_COLL_TRY(staged.stage(args.send, bytes, args.recv, bytes, args.stream, fn));
    AllreduceArgs host = args;
    host.on_device = false;
    host.stream = nullptr;
    host.send = staged.send();
    host.recv = staged.recv();
    host.key_buf = args.recv;
    CC_COLL_TRY(m.allreduce(comm, host, params, stats));
    return staged.write_back(args.recv, bytes, fn);
}

cc_coll_status_t allreduce(Comm &comm, const AllreduceArgs &args, const CallParams &params)
{
    const Method *m = find_method(params.method);
    if (m == nullptr)
        return fail(CC_COLL_ERR_INVALID_METHOD, "cc_coll_allreduce: method %d is not a registered method",
                    static_cast<int>(params.method));
    if (log_enabled(LogLevel::Debug))
        log_message(LogLevel::Debug, "allreduce rank %d/%d: count=%zu dtype=%s op=%s method=%s in_place=%d device=%d",
                    comm.rank(), comm.size(), args.count, dtype_name(args.dtype),
                    args.op == CC_COLL_SUM ? "sum" : "avg", m->name, args.send == args.recv ? 1 : 0,
                    args.on_device ? 1 : 0);
    if (runs_hierarchical(comm, args, params)) {
        StatsSnapshot call;
        const cc_coll_status_t st =
            allreduce_hierarchical(comm, {GroupTensor{args, params}}, Collective::Allreduce, &call);
        if (st != CC_COLL_OK) return st;
        call.calls = 1;
        call.bytes_uncompressed = args.count * dtype_size(args.dtype);
        comm.stats().add(call);
        return CC_COLL_OK;
    }
    // A method without a single-tensor algorithm runs the call as a group of
    // one (its batch algorithm, its planning and state).
    if (m->allreduce == nullptr)
        return allreduce_group(comm, {GroupTensor{args, params}}, Collective::Allreduce);
    const bool create = m->creates_residual != nullptr &&
                        m->creates_residual(false, args.count, args.dtype, params, comm.size());
    const cc_coll_status_t ready =
        m->creates_residual == nullptr
            ? CC_COLL_OK
            : residual_preflight(comm, params, args.recv, args.count, args.dtype,
                                 residual_on_device(*m, args, params), create);
    CC_COLL_TRY(agree(comm, "cc_coll_allreduce",
                      CallSignature::single(Collective::Allreduce, *m, args.count, args.dtype, args.op,
                                            args.on_device, params),
                      ready));
    StatsSnapshot call;
    const cc_coll_status_t st = allreduce_single(comm, *m, args, params, &call);
    if (st != CC_COLL_OK) return st;
    call.calls = 1;
    call.bytes_uncompressed = args.count * dtype_size(args.dtype);
    comm.stats().add(call);
    return CC_COLL_OK;
}

}  // namespace cc_coll::detail
