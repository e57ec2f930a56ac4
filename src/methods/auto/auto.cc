// Method AUTO (docs/algorithms.md section 8): a selecting method. Per
// allreduce it runs NONE or the communicator's lossy method
// (CC_COLL_AUTO_METHOD), whichever the cost model (cost_model.hpp) predicts
// faster; reduce-scatter and point-to-point calls run NONE. The dispatchers
// call `select` before they route a call, so no entry point knows AUTO.
#include <string>

#include "core/comm.hpp"
#include "core/dtype.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/config.hpp"
#include "core/method.hpp"
#include "core/stats.hpp"
#include "methods/auto/cost_model.hpp"

namespace cc_coll::detail {

namespace {

// Counts the choice in the statistics and logs it (CC_COLL_LOG_LEVEL=info).
cc_coll_status_t select(Comm &comm, CallKind kind, const std::vector<CostTensor> &tensors, CallParams *p,
                        const Method **chosen)
{
    StatsSnapshot s;
    s.auto_calls = 1;
    if (kind != CallKind::Allreduce) {
        p->method = CC_COLL_METHOD_NONE;
        *chosen = find_method(CC_COLL_METHOD_NONE);
        comm.stats().add(s);
        return CC_COLL_OK;
    }
    const CostModel *model = nullptr;
    CC_COLL_TRY(ensure_cost_model(comm, &model));
    const AutoChoice c = predict(*model, tensors, *p);
    p->method = c.method;
    *chosen = find_method(c.method);
    s.auto_lossy_calls = c.method == CC_COLL_METHOD_NONE ? 0 : 1;
    s.auto_predicted = c.method == CC_COLL_METHOD_NONE ? c.predicted_none : c.predicted_lossy;
    comm.stats().add(s);
    if (log_enabled(LogLevel::Info)) {
        std::size_t bytes = 0;
        for (const CostTensor &t : tensors) bytes += t.count * dtype_size(t.dtype);
        log_message(LogLevel::Info, "auto: %zu bytes in %zu tensor(s): %s (predicted none %.3f ms, %s %.3f ms)",
                    bytes, tensors.size(), (*chosen)->name, c.predicted_none * 1e3, find_method(model->lossy)->name,
                    c.predicted_lossy * 1e3);
    }
    return CC_COLL_OK;
}

// Under CC_COLL_METHOD=auto the model is measured when the communicator is
// created, by every rank at once.
cc_coll_status_t comm_created(Comm &comm)
{
    const CostModel *model = nullptr;
    return ensure_cost_model(comm, &model);
}

cc_coll_status_t predict_call(Comm &comm, const CostTensor &t, const CallParams &p, cc_coll_method_t *chosen,
                              double *predicted_none, double *predicted_lossy)
{
    const CostModel *model = nullptr;
    CC_COLL_TRY(ensure_cost_model(comm, &model));
    const AutoChoice c = predict(*model, {t}, p);
    *chosen = c.method;
    *predicted_none = c.predicted_none;
    *predicted_lossy = c.predicted_lossy;
    return CC_COLL_OK;
}


// The method's own settings (Method::settings: rows of the settings table).
bool apply_auto_method(const std::string &text, Config *cfg, std::string *why)
{
    cc_coll_method_t m = CC_COLL_METHOD_NONE;
    if (parse_method(text, &m) && find_method(m)->auto_candidate) {
        cfg->auto_method = m;
        return true;
    }
    *why = "expected a lossy method: " + auto_candidate_names();
    return false;
}

bool apply_link(const std::string &text, Config *cfg, std::string *why)
{
    const std::string s = trim_lower(text);
    if (s == "measure") {
        cfg->link_gbits = 0;
        cfg->link_latency_us = 0;
        return true;
    }
    const std::size_t comma = s.find(',');
    double g = 0, us = 0;
    if (comma != std::string::npos && parse_double(s.substr(0, comma), &g) && g > 0 && g <= 1e6 &&
        parse_double(s.substr(comma + 1), &us) && us >= 0 && us <= 1e7) {
        cfg->link_gbits = g;
        cfg->link_latency_us = us;
        return true;
    }
    *why = "expected measure, or <Gbit/s>,<latency in microseconds> such as 10,25";
    return false;
}

const SettingDef kSettings[] = {
    {"AUTO_METHOD", "CC_COLL_AUTO_METHOD", "topk",
     "The lossy method of CC_COLL_METHOD=auto (a method whose caps include CC_COLL_METHOD_CAP_AUTO_CANDIDATE: "
     "topk, sketch, lowrank or half in this release). Auto compresses a call with it "
     "when the communicator's cost model predicts it faster than NONE (docs/algorithms.md, \"The cost "
     "model\"). Every rank must use the same value.",
     apply_auto_method},
    {"LINK", "CC_COLL_LINK", "measure",
     "The link of CC_COLL_METHOD=auto's cost model: measure (an 8-byte and a 2 MiB MPI_Allreduce, timed "
     "on every rank when the model is built, the slowest rank's times taken), or <Gbit/s>,<latency in "
     "microseconds> (such as 10,25) to give it. The lossy method's compute is always measured.",
     apply_link},
};

}  // namespace

const Method &auto_method()
{
    static const Method m = {
        .id = CC_COLL_METHOD_AUTO,
        .name = "auto",
        .summary = "per call, none or the lossy method of CC_COLL_AUTO_METHOD, whichever the cost model predicts "
                   "faster (reduce-scatter and point-to-point: none)",
        .homomorphic = false,
        .select = select,
        .comm_created = comm_created,
        .predict = predict_call,
        .settings = kSettings,
        .settings_count = sizeof kSettings / sizeof kSettings[0],
        .p2p = P2pCompression::None,
    };
    return m;
}

}  // namespace cc_coll::detail
