#include "dispatch/dispatch.hpp"

#include "collectives/allreduce/allreduce.hpp"
#include "collectives/reduce_scatter/reduce_scatter.hpp"
#include "core/comm.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/stats.hpp"
#include "transport/mpi_transport.hpp"

namespace cc_coll::detail {

cc_coll_status_t create_comm(MPI_Comm mpi_comm, const Config &config, std::shared_ptr<Comm> *out)
{
    MPI_Comm dup = MPI_COMM_NULL;
    cc_coll_status_t st = check_mpi(MPI_Comm_dup(mpi_comm, &dup), "MPI_Comm_dup");
    if (st != CC_COLL_OK) return st;
    int rank = 0, size = 0;
    if ((st = check_mpi(MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler")) == CC_COLL_OK &&
        (st = check_mpi(MPI_Comm_rank(dup, &rank), "MPI_Comm_rank")) == CC_COLL_OK)
        st = check_mpi(MPI_Comm_size(dup, &size), "MPI_Comm_size");
    if (st != CC_COLL_OK) {
        MPI_Comm_free(&dup);
        return st;
    }
    auto comm = std::make_shared<Comm>(dup, rank, size, config);
    CC_COLL_TRY(build_topology(*comm));  // on failure the destructor frees dup
    const Method *m = find_method(config.method);
    if (m != nullptr && m->comm_created != nullptr) CC_COLL_TRY(m->comm_created(*comm));
    *out = std::move(comm);
    return CC_COLL_OK;
}

cc_coll_status_t select_method(Comm &comm, CallKind kind, const std::vector<CostTensor> &tensors, CallParams *p)
{
    const Method *m = find_method(p->method);
    if (m == nullptr || m->select == nullptr) return CC_COLL_OK;
    const Method *chosen = nullptr;
    CC_COLL_TRY(m->select(comm, kind, tensors, p, &chosen));
    p->method = chosen->id;
    return CC_COLL_OK;
}

namespace {

// Runs `call` and, when `selecting` has an observe hook, tells it the
// seconds this rank spent and the status.
template <class F>
cc_coll_status_t run_observed(Comm &comm, const Method *selecting, F &&call)
{
    if (selecting == nullptr || selecting->observe == nullptr) return call();
    const double t0 = now_seconds();
    const cc_coll_status_t st = call();
    selecting->observe(comm, now_seconds() - t0, st);
    return st;
}

const Method *selecting_method(cc_coll_method_t id)
{
    const Method *m = find_method(id);
    return m != nullptr && m->select != nullptr ? m : nullptr;
}

}  // namespace

cc_coll_status_t run_allreduce(Comm &comm, const AllreduceArgs &args, const CallParams &params)
{
    const Method *selecting = selecting_method(params.method);
    if (selecting == nullptr) return allreduce(comm, args, params);
    CallParams p = params;
    CC_COLL_TRY(select_method(comm, CallKind::Allreduce,
                              {CostTensor{args.count, args.dtype, p.has_shape, p.rows, p.cols}}, &p));
    return run_observed(comm, selecting, [&] { return allreduce(comm, args, p); });
}

cc_coll_status_t run_allreduce_group(Comm &comm, std::vector<GroupTensor> tensors)
{
    // The tensors of one selecting method are chosen for together (one
    // bucket: their exchanges batched) and all get the one choice. A group
    // whose tensors all had one selecting method is observed as its call.
    const Method *observed = tensors.empty() ? nullptr : selecting_method(tensors.front().params.method);
    for (const GroupTensor &t : tensors)
        if (t.params.method != tensors.front().params.method) observed = nullptr;
    for (const Method *m : methods()) {
        if (m->select == nullptr) continue;
        std::vector<CostTensor> picked;
        const GroupTensor *first = nullptr;
        for (const GroupTensor &t : tensors)
            if (t.params.method == m->id) {
                picked.push_back(CostTensor{t.args.count, t.args.dtype, t.params.has_shape, t.params.rows,
                                            t.params.cols});
                if (first == nullptr) first = &t;
            }
        if (first == nullptr) continue;
        CallParams p = first->params;
        CC_COLL_TRY(select_method(comm, CallKind::Allreduce, picked, &p));
        for (GroupTensor &t : tensors)
            if (t.params.method == m->id) t.params.method = p.method;
    }
    return run_observed(comm, observed, [&] { return allreduce_group(comm, tensors); });
}

cc_coll_status_t run_reduce_scatter(Comm &comm, const ReduceScatterArgs &args, const CallParams &params)
{
    CallParams p = params;
    CC_COLL_TRY(select_method(comm, CallKind::ReduceScatter, {}, &p));
    return reduce_scatter(comm, args, p);
}

cc_coll_status_t predict_selection(Comm &comm, const CostTensor &tensor, const CallParams &p, Prediction *out)
{
    const Method *m = nullptr;  // the selecting method that predicts (AUTO)
    for (const Method *candidate : methods())
        if (candidate->predict != nullptr && m == nullptr) m = candidate;
    if (m == nullptr)
        return fail(CC_COLL_ERR_NOT_SUPPORTED, "cc_coll_auto_predict: this library has no selecting method");
    return m->predict(comm, tensor, p, &out->chosen, &out->predicted_none, &out->predicted_lossy);
}

}  // namespace cc_coll::detail
