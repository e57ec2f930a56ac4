// Grouped allreduce: several tensors in one call, in as few messages as the
// methods allow (see cc_coll_allreduce_group in cc_coll.h), on host and
// device buffers alike.
//
//  1. Plan: each tensor's method routes it (core/method.hpp: group_plan)
//     into the dense batch of its dtype, into the method's batch, or alone.
//  2. The agreement exchange (collectives/common/agreement.hpp) checks that
//     every rank has the same plan (counts, dtypes, op, methods, their
//     params, routes and the methods' layouts).
//  3. The dense batch: one MPI_Allreduce per dtype over the packed tensors.
//  4. Each method's batch (LOWRANK: every P in one allreduce, every Q in
//     another).
//  5. The other tensors one by one, through their method's allreduce.
#include <string>

#include "collectives/allreduce/allreduce.hpp"
#include "core/dtype.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/method.hpp"

namespace cc_coll::detail {

namespace {

// Plans every tensor and folds the plan into the call's signature. A rank
// that cannot plan (or could not acquire a planned tensor's residual) returns
// the error; allreduce_group still takes part in the agreement with it.
cc_coll_status_t make_plan(Comm &comm, const std::vector<GroupTensor> &tensors, std::vector<TensorPlan> *plans,
                           CallSignature *sig)
{
    const std::size_t n = tensors.size();
    plans->assign(n, TensorPlan{});
    for (std::size_t i = 0; i < n; ++i) {
        const GroupTensor &t = tensors[i];
        TensorPlan &plan = (*plans)[i];
        const Method *m = find_method(t.params.method);
        if (m == nullptr)
            return fail(CC_COLL_ERR_INVALID_METHOD, "cc_coll_allreduce_group: tensor %zu has method %d, which is not "
                        "a registered method", i, static_cast<int>(t.params.method));
        if (t.args.count > 0) {
            if (m->group_plan != nullptr) {
                const cc_coll_status_t st = m->group_plan(comm, i, t, &plan);
                if (st != CC_COLL_OK) return st;
            } else if (m->allreduce != nullptr) {
                plan.route = Route::Single;
            } else {
                return fail(CC_COLL_ERR_NOT_SUPPORTED, "cc_coll_allreduce_group: method %s has no group algorithm",
                            m->name);
            }
            if (plan.route == Route::Batch && m->group_batch == nullptr)
                return fail(CC_COLL_ERR_INTERNAL, "method %s planned a batch it has no algorithm for", m->name);
        }
        sig->add_tensor(m, t.args.count, t.args.dtype, t.params, static_cast<std::uint64_t>(plan.route), plan.layout,
                        sizeof plan.layout / sizeof plan.layout[0]);
        // The residual each route uses: the dense batch only an existing
        // one, the method's batch and single calls what the method creates.
        if (plan.route == Route::Skip || m->creates_residual == nullptr) continue;
        const bool create = plan.route != Route::Dense &&
                            m->creates_residual(false, t.args.count, t.args.dtype, t.params, comm.size());
        const cc_coll_status_t st =
            residual_preflight(comm, t.params, t.args.recv, t.args.count, t.args.dtype,
                               residual_on_device(*m, t.args, t.params), create);
        if (st != CC_COLL_OK) {
            const std::string why = last_error();
            return fail(st, "cc_coll_allreduce_group: tensor %zu: %s", i, why.c_str());
        }
    }
    return CC_COLL_OK;
}

}  // namespace

cc_coll_status_t allreduce_group(Comm &comm, const std::vector<GroupTensor> &tensors, Collective kind)
{
    if (log_enabled(LogLevel::Debug))
        log_message(LogLevel::Debug, "allreduce_group rank %d/%d: %zu tensors", comm.rank(), comm.size(), tensors.size());
    const char *fn = kind == Collective::Allreduce ? "cc_coll_allreduce" : "cc_coll_allreduce_group";
    if (kind == Collective::AllreduceGroup && runs_hierarchical(comm, tensors)) {
        StatsSnapshot call;
        const cc_coll_status_t st = allreduce_hierarchical(comm, tensors, kind, &call);
        if (st != CC_COLL_OK) return st;
        for (const GroupTensor &t : tensors) {
            call.calls += 1;
            call.bytes_uncompressed += t.args.count * dtype_size(t.args.dtype);
        }
        comm.stats().add(call);
        return CC_COLL_OK;
    }
    std::vector<TensorPlan> plans;
    CallSignature sig = CallSignature::group(kind, tensors.size(), tensors.empty() ? CC_COLL_SUM : tensors[0].args.op,
                                             !tensors.empty() && tensors[0].args.on_device);
    const cc_coll_status_t plan_st = make_plan(comm, tensors, &plans, &sig);
    if (kind == Collective::Allreduce && tensors.size() == 1) {
        // A single allreduce names its method, count and dtype as such.
        sig.v[CallSignature::kMethod] = static_cast<std::uint64_t>(tensors[0].params.method);
        sig.v[CallSignature::kCount] = tensors[0].args.count;
        sig.v[CallSignature::kDtype] = static_cast<std::uint64_t>(tensors[0].args.dtype);
    }
    cc_coll_status_t st = agree(comm, fn, sig, plan_st);
    if (st != CC_COLL_OK) {
        for (const Method *m : methods())
            if (m->group_abort != nullptr) m->group_abort(comm);
        return st;
    }
    if (tensors.empty()) return st;

    StatsSnapshot call;
    // 3. Dense batch, one allreduce per dtype.
    for (int d = CC_COLL_F32; d <= CC_COLL_BF16; ++d) {
        std::vector<std::size_t> idx;
        for (std::size_t i = 0; i < tensors.size(); ++i)
            if (plans[i].route == Route::Dense && tensors[i].args.dtype == d) idx.push_back(i);
        if (idx.empty()) continue;
        if ((st = dense_batch(comm, tensors, idx, static_cast<cc_coll_dtype_t>(d), &call)) != CC_COLL_OK) return st;
    }
    // 4. Each method's batch.
    for (const Method *m : methods()) {
        std::vector<std::size_t> idx;
        for (std::size_t i = 0; i < tensors.size(); ++i)
            if (plans[i].route == Route::Batch && tensors[i].params.method == m->id) idx.push_back(i);
        if (idx.empty()) continue;
        if ((st = m->group_batch(comm, tensors, idx, plans, &call)) != CC_COLL_OK) return st;
    }
    for (std::size_t i = 0; i < tensors.size(); ++i) {
        if (plans[i].route == Route::Skip) continue;
        const Method *m = find_method(tensors[i].params.method);
        if (m->group_done != nullptr) m->group_done(plans[i]);
    }
    // 5. The other tensors one by one.
    for (std::size_t i = 0; i < tensors.size(); ++i) {
        if (plans[i].route != Route::Single) continue;
        const GroupTensor &t = tensors[i];
        if ((st = allreduce_single(comm, *find_method(t.params.method), t.args, t.params, &call)) != CC_COLL_OK)
            return st;
    }
    for (const GroupTensor &t : tensors) {
        call.calls += 1;
        call.bytes_uncompressed += t.args.count * dtype_size(t.args.dtype);
    }
    comm.stats().add(call);
    return CC_COLL_OK;
}

}  // namespace cc_coll::detail
