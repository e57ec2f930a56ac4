#include "collectives/reduce_scatter/reduce_scatter.hpp"

#include <vector>

#include "collectives/common/agreement.hpp"
#include "collectives/common/host_staging.hpp"
#include "core/dtype.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "gpu/gpu.hpp"
#include "core/method.hpp"

namespace cc_coll::detail {

namespace {

// The algorithm on host memory; device buffers go through host copies
// (recvbuf keeps naming the residual, as a direct call would).
cc_coll_status_t run(Comm &comm, const Method &m, const ReduceScatterArgs &args, const CallParams &params,
                     StatsSnapshot *stats)
{
    if (!args.on_device) return m.reduce_scatter(comm, args, params, stats);
    const char *fn = "cc_coll_reduce_scatter";
    const std::size_t es = dtype_size(args.dtype);
    const std::size_t total = args.recvcount * static_cast<std::size_t>(comm.size()) * es;
    HostStaging staged;
    CC_COLL_TRY(staged.stage(args.send, total, args.recv, args.recvcount * es, args.stream, fn));
    ReduceScatterArgs host = args;
    host.on_device = false;
    host.stream = nullptr;
    host.send = staged.send();
    host.recv = staged.recv();
    host.key_buf = args.recv;
    CC_COLL_TRY(m.reduce_scatter(comm, host, params, stats));
    return staged.write_back(args.recv, args.recvcount * es, fn);
}

}  // namespace

cc_coll_status_t reduce_scatter(Comm &comm, const ReduceScatterArgs &args, const CallParams &params)
{
    const Method *m = find_method(params.method);
    if (m == nullptr)
        return fail(CC_COLL_ERR_INVALID_METHOD, "cc_coll_reduce_scatter: method %d is not a registered method",
                    static_cast<int>(params.method));
    if (log_enabled(LogLevel::Debug))
        log_message(LogLevel::Debug, "reduce_scatter rank %d/%d: recvcount=%zu dtype=%s op=%s method=%s in_place=%d",
                    comm.rank(), comm.size(), args.recvcount, dtype_name(args.dtype),
                    args.op == CC_COLL_SUM ? "sum" : "avg", m->name, args.send == args.recv ? 1 : 0);
    // A method without reduce-scatter still takes part in the agreement, so
    // that ranks calling it with another method get an error, not a hang.
    const std::size_t n = args.recvcount * static_cast<std::size_t>(comm.size());
    cc_coll_status_t ready = CC_COLL_OK;
    if (m->reduce_scatter == nullptr)
        ready = fail(CC_COLL_ERR_NOT_SUPPORTED, "cc_coll_reduce_scatter: %s", m->why_no_reduce_scatter);
    else if (m->creates_residual != nullptr)
        // The algorithms keep host residuals, device buffers included.
        ready = residual_preflight(comm, params, args.key(), n, args.dtype, false,
                                   m->creates_residual(true, n, args.dtype, params, comm.size()));
    CC_COLL_TRY(agree(comm, "cc_coll_reduce_scatter",
                      CallSignature::single(Collective::ReduceScatter, *m, args.recvcount, args.dtype, args.op,
                                            args.on_device, params),
                      ready));
    StatsSnapshot call;
    const cc_coll_status_t st = run(comm, *m, args, params, &call);
    if (st != CC_COLL_OK) return st;
    call.calls = 1;
    call.bytes_uncompressed = args.recvcount * static_cast<std::size_t>(comm.size()) * dtype_size(args.dtype);
    comm.stats().add(call);
    return CC_COLL_OK;
}

}  // namespace cc_coll::detail
