// Grouped allreduce: several tensors in one call, in as few messages as the
// methods allow (see cc_coll_allreduce_group in cc_coll.h), on host and
// device buffers alike.
//
//  1. Plan: each tensor's method routes it (core/method.hpp: group_plan)
//     into the dense batch of its dtype, into the method's batch, or alone.
//  2. One 16-byte MPI_Allreduce checks that every rank has the same plan
//     (counts, dtypes, op, methods, routes and the methods' layouts).
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
#include "transport/mpi_transport.hpp"

namespace cc_coll::detail {

namespace {

std::uint64_t mix(std::uint64_t h, std::uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdull;
}

cc_coll_status_t make_plan(Comm &comm, const std::vector<GroupTensor> &tensors, std::vector<TensorPlan> *plans,
                           std::uint64_t *signature)
{
    const std::size_t n = tensors.size();
    plans->assign(n, TensorPlan{});
    std::uint64_t h = mix(0x67726f7570ull, n);  // "group"
    for (std::size_t i = 0; i < n; ++i) {
        const GroupTensor &t = tensors[i];
        TensorPlan &plan = (*plans)[i];
        h = mix(h, t.args.count);
        h = mix(h, static_cast<std::uint64_t>(t.args.dtype));
        h = mix(h, static_cast<std::uint64_t>(t.args.op));
        h = mix(h, static_cast<std::uint64_t>(t.params.method));
        h = mix(h, t.args.on_device ? 1u : 0u);
        if (t.args.count == 0) continue;
        const Method *m = find_method(t.params.method);
        if (m == nullptr)
            return fail(CC_COLL_ERR_INVALID_METHOD, "cc_coll_allreduce_group: tensor %zu has method %d, which is not "
                        "a registered method", i, static_cast<int>(t.params.method));
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
        for (std::uint64_t v : plan.layout) h = mix(h, v);
        h = mix(h, static_cast<std::uint64_t>(plan.route));
    }
    *signature = h;
    return CC_COLL_OK;
}

}  // namespace

cc_coll_status_t allreduce_group(Comm &comm, const std::vector<GroupTensor> &tensors)
{
    if (log_enabled(LogLevel::Debug))
        log_message(LogLevel::Debug, "allreduce_group rank %d/%d: %zu tensors", comm.rank(), comm.size(), tensors.size());
    if (tensors.empty()) return CC_COLL_OK;
    std::vector<TensorPlan> plans;
    std::uint64_t signature = 0;
    const cc_coll_status_t plan_st = make_plan(comm, tensors, &plans, &signature);
    // A rank whose layout is invalid still takes part in the agreement, with
    // a signature no valid plan has, so the other ranks get MISMATCH instead
    // of waiting for it for ever; it returns its own error.
    const std::string plan_error = plan_st == CC_COLL_OK ? std::string() : std::string(last_error());
    bool agree = false;
    cc_coll_status_t st = signatures_agree(plan_st == CC_COLL_OK ? signature : mix(signature, 0x696e76616c6964ull),
                                           comm.mpi(), &agree);
    if (plan_st != CC_COLL_OK) return fail(plan_st, "%s", plan_error.c_str());
    if (st != CC_COLL_OK) return st;
    if (!agree)
        return fail(CC_COLL_ERR_MISMATCH,
                    "cc_coll_allreduce_group: the ranks disagree on the group (number of tensors, counts, dtypes, "
                    "op, methods, LOWRANK shapes, ranks or call counts); every rank must pass the same tensors "
                    "in the same order");

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
        if ((st = find_method(t.params.method)->allreduce(comm, t.args, t.params, &call)) != CC_COLL_OK) return st;
    }
    for (const GroupTensor &t : tensors) {
        call.calls += 1;
        call.bytes_uncompressed += t.args.count * dtype_size(t.args.dtype);
    }
    comm.stats().add(call);
    return CC_COLL_OK;
}

}  // namespace cc_coll::detail
