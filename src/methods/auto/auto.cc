// Method AUTO (docs/algorithms.md section 8): a selecting method. Per
// allreduce it runs NONE or one of the communicator's candidates
// (CC_COLL_AUTO_METHOD), whichever the cost model (cost_model.hpp),
// corrected by what the calls took (online.hpp), predicts fastest;
// reduce-scatter and point-to-point calls run NONE. The dispatchers call
// `select` before they route a call and `observe` after it, so no entry
// point knows AUTO.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "collectives/common/agreement.hpp"
#include "core/comm.hpp"
#include "core/config.hpp"
#include "core/dtype.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/method.hpp"
#include "core/stats.hpp"
#include "methods/auto/cost_model.hpp"
#include "methods/auto/decision_cache.hpp"
#include "methods/auto/online.hpp"
#include "transport/mpi_transport.hpp"

namespace cc_coll::detail {

namespace {

// A communicator's AUTO: its model, the online check, and the decision of
// the call in progress (calls on a communicator run one at a time).
struct AutoState {
    CostModel model;
    OnlineCheck online;
    DecisionCache cache;  // a new epoch whenever `online`'s corrections change
    CachedCall group;     // a group's call (decided afresh every time)
    Decision pending;
    bool has_pending = false;  // a call `select` routed, not yet observed
    bool pending_checked = false;  // ... and the online check decided it
    // Per size class, 1 + the choice its last call preferred (0: no call
    // yet): CC_COLL_LOG_LEVEL=info logs a call only when that changes.
    unsigned char preferred[kSizeClasses] = {};
};

AutoState *state_of(Comm &comm) { return static_cast<AutoState *>(comm.cost_model_slot().get()); }

// The communicator's AUTO, its model measured now if it has none yet.
// Collective the first time.
cc_coll_status_t ensure_state(Comm &comm, AutoState **out)
{
    if (AutoState *s = state_of(comm)) {
        *out = s;
        return CC_COLL_OK;
    }
    auto s = std::make_shared<AutoState>();
    CC_COLL_TRY(calibrate(comm, &s->model));
    comm.cost_model_slot() = s;
    *out = s.get();
    return CC_COLL_OK;
}

double call_bytes(const std::vector<CostTensor> &tensors)
{
    double bytes = 0;
    for (const CostTensor &t : tensors) bytes += static_cast<double>(t.count) * dtype_size(t.dtype);
    return bytes;
}

const char *choice_name(const CostModel &m, int choice)
{
    return find_method(choice == 0 ? CC_COLL_METHOD_NONE : m.candidate[choice - 1].method)->name;
}

// A size class as its smallest size ("64 KiB", "1.4 MiB").
std::string class_text(int k)
{
    const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double b = std::pow(2.0, k / 2.0);
    int u = 0;
    while (b >= 1024 && u < 4) {
        b /= 1024;
        ++u;
    }
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3g %s", b, units[u]);
    return buf;
}

// The choice of the model alone (no check of the runner-up), its
// predictions corrected by the samples so far when the check is on.
Decision model_decision(const Comm &comm, const AutoState &st, const AutoChoice &c, double bytes)
{
    int best = st.model.candidates > 0 ? c.best_candidate : -1;
    double none = c.predicted_none, lossy = c.predicted_lossy;
    if (comm.config().auto_check) st.online.corrected(st.model, c, bytes, &none, &lossy, &best);
    Decision d;
    d.choice = best >= 0 && lossy < none ? 1 + best : 0;
    d.predicted = d.choice == 0 ? c.predicted_none : c.predicted[best];
    d.corrected = d.choice == 0 ? none : lossy;
    d.corrected_none = none;
    d.corrected_best_lossy = lossy;
    return d;
}

// The model's predictions and decision for a call, from the cache when a
// call like it was decided before (a group's calls are decided afresh).
const CachedCall &decided(const Comm &comm, AutoState &st, const std::vector<CostTensor> &tensors,
                          const CallParams &p)
{
    CachedCall *e = &st.group;
    bool predicted = false;
    if (tensors.size() == 1) {
        e = st.cache.find(tensors[0], p);
        if (e != nullptr && e->epoch == st.cache.epoch()) return *e;
        predicted = e != nullptr;  // then only the corrections changed
        if (e == nullptr) e = st.cache.insert(tensors[0], p);
    }
    if (!predicted) {
        e->choice = predict(st.model, tensors, p);
        e->bytes = call_bytes(tensors);
    }
    e->decision = model_decision(comm, st, e->choice, e->bytes);
    e->epoch = st.cache.epoch();
    return *e;
}

// The ranks' agreement on the samples since the last one (online.hpp): an
// exchange in the agreement's format (every rank checks that every other
// one is making it, on the same window), then the values.
cc_coll_status_t agree_samples(Comm &comm, AutoState &s)
{
    const std::vector<std::uint64_t> words = s.online.agreement_words();
    CallSignature sig;
    using F = CallSignature::Field;
    sig.v[F::kVersion] = kAgreementVersion;
    sig.v[F::kCollective] = static_cast<std::uint64_t>(Collective::AutoCheck);
    sig.v[F::kMethod] = static_cast<std::uint64_t>(CC_COLL_METHOD_AUTO);
    sig.v[F::kParameters] = words[0];
    sig.v[F::kReady] = 1;
    s.cache.new_epoch();  // the corrections change (or are forgotten) below
    const cc_coll_status_t st = agree(comm, "cc_coll_allreduce", sig, CC_COLL_OK);
    if (st != CC_COLL_OK) {
        s.online = OnlineCheck();  // forget: the next check starts afresh on every rank
        return st;
    }
    // The window's pairs only: the exchange above found every rank's window
    // the same (its hash covers the pairs), so every rank sends as many.
    const std::size_t pairs = std::min(s.online.window_keys().size(), words.size() - 2);
    std::vector<std::uint64_t> values(words.begin() + 2, words.begin() + 2 + static_cast<std::ptrdiff_t>(pairs));
    if (!values.empty())
        CC_COLL_TRY(allreduce_max_u64(values.data(), comm.mpi(), static_cast<int>(values.size())));
    std::vector<std::uint64_t> agreed = words;
    for (std::size_t i = 0; i < values.size(); ++i) agreed[2 + i] = values[i];
    // The log's view of the window, taken before the update (only when
    // logging: the agreement itself reads none of it).
    const bool log = log_enabled(LogLevel::Info);
    std::vector<int> keys;
    std::vector<double> before;
    if (log) {
        keys = s.online.window_keys();
        for (int key : keys) before.push_back(s.online.correction(key / kSizeClasses, key % kSizeClasses));
    }
    s.online.apply_agreement(agreed);
    if (log) {
        // One line per agreement: each sampled choice's agreed ratio
        // (measured over the model's prediction, the slowest rank's median)
        // and its correction before and after.
        std::string text;
        for (std::size_t i = 0; i < keys.size(); ++i) {
            const int j = keys[i] / kSizeClasses, k = keys[i] % kSizeClasses;
            double r = 0;
            std::memcpy(&r, &agreed[2 + i], sizeof r);
            char buf[160];
            std::snprintf(buf, sizeof buf, "%s%s at %s: ratio %.3g, correction %.3g -> %.3g", i == 0 ? "" : "; ",
                          choice_name(s.model, j), class_text(k).c_str(), r, before[i], s.online.correction(j, k));
            text += buf;
        }
        log_message(LogLevel::Info, "auto: agreement %llu on the samples: %s",
                    static_cast<unsigned long long>(s.online.agreements()), text.c_str());
    }
    return CC_COLL_OK;
}

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
    AutoState *st = nullptr;
    CC_COLL_TRY(ensure_state(comm, &st));
    bool check = comm.config().auto_check && comm.size() > 1;
    if (check && st->online.agreement_due(st->model)) CC_COLL_TRY(agree_samples(comm, *st));
    const CachedCall &call = decided(comm, *st, tensors, *p);
    const AutoChoice &c = call.choice;
    const double bytes = call.bytes;
    Decision d = call.decision;
    // Calls predicted under kCheckMinSeconds are not checked (their choice
    // is the corrected model's): the check's own cost would be a visible
    // share of them, and a wrong choice among them costs microseconds.
    check = check && std::min(d.corrected_none, d.corrected_best_lossy) >= kCheckMinSeconds;
    if (check) d = st->online.decide(st->model, c, bytes);
    st->pending = d;
    st->has_pending = true;
    st->pending_checked = check;
    const cc_coll_method_t ran = d.choice == 0 ? CC_COLL_METHOD_NONE : st->model.candidate[d.choice - 1].method;
    p->method = ran;
    *chosen = find_method(ran);
    s.auto_lossy_calls = ran == CC_COLL_METHOD_NONE ? 0 : 1;
    s.auto_explored_calls = d.explored ? 1 : 0;
    s.auto_predicted = d.corrected;
    comm.stats().add(s);
    // Info logs a call when it checks the runner-up or when its class's
    // preferred choice changed; debug logs every call. A line per call would
    // delay the ranks unevenly, and the wait would land in the samples.
    bool changed = false;
    if (log_enabled(LogLevel::Info)) {
        const int k = size_class(bytes);
        const int preferred = d.explored ? st->preferred[k] - 1 : d.choice;
        changed = preferred != st->preferred[k] - 1;
        st->preferred[k] = static_cast<unsigned char>(1 + preferred);
    }
    if (log_enabled(LogLevel::Debug) || (log_enabled(LogLevel::Info) && (changed || d.explored))) {
        std::string cands;
        for (int i = 0; i < st->model.candidates; ++i)
            cands += std::string(", ") + choice_name(st->model, 1 + i) + " " +
                     std::to_string(c.predicted[i] * 1e3).substr(0, 8) + " ms";
        log_message(LogLevel::Info,
                    "auto: %.0f bytes in %zu tensor(s): %s%s (corrected: none %.3f ms, best lossy %.3f ms; "
                    "model: none %.3f ms%s)",
                    bytes, tensors.size(), (*chosen)->name, d.explored ? ", the runner-up, to check the model" : "",
                    d.corrected_none * 1e3, d.corrected_best_lossy * 1e3, c.predicted_none * 1e3, cands.c_str());
    }
    return CC_COLL_OK;
}

void observe(Comm &comm, double seconds, cc_coll_status_t status)
{
    AutoState *st = state_of(comm);
    if (st == nullptr || !st->has_pending) return;
    st->has_pending = false;
    if (status != CC_COLL_OK) {
        // A failed call (its status is the same on every rank): every rank
        // forgets its samples and corrections alike.
        if (st->pending_checked) {
            st->online = OnlineCheck();
            st->cache.new_epoch();
        }
        return;
    }
    if (st->pending_checked) st->online.observe(st->pending, seconds);
    StatsSnapshot s;
    s.auto_measured = seconds;
    comm.stats().add(s);
}

// Under CC_COLL_METHOD=auto the model is measured when the communicator is
// created, by every rank at once.
cc_coll_status_t comm_created(Comm &comm)
{
    AutoState *st = nullptr;
    return ensure_state(comm, &st);
}

cc_coll_status_t predict_call(Comm &comm, const CostTensor &t, const CallParams &p, cc_coll_method_t *chosen,
                              double *predicted_none, double *predicted_lossy)
{
    AutoState *st = nullptr;
    CC_COLL_TRY(ensure_state(comm, &st));
    const Decision d = model_decision(comm, *st, predict(st->model, {t}, p), call_bytes({t}));
    *chosen = d.choice == 0 ? CC_COLL_METHOD_NONE : st->model.candidate[d.choice - 1].method;
    *predicted_none = d.corrected_none;
    *predicted_lossy = d.corrected_best_lossy;
    return CC_COLL_OK;
}

// The method's own settings (Method::settings: rows of the settings table).
bool apply_auto_method(const std::string &text, Config *cfg, std::string *why)
{
    std::uint32_t mask = 0;
    std::size_t start = 0;
    int n = 0;
    while (start <= text.size()) {
        const std::size_t comma = text.find(',', start);
        const std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        cc_coll_method_t m = CC_COLL_METHOD_NONE;
        if (!parse_method(item, &m) || !find_method(m)->auto_candidate) {
            *why = "expected a lossy method or a comma-separated list of them (" + auto_candidate_names() +
                   "); \"" + trim_lower(item) + "\" is none";
            return false;
        }
        if (!(mask >> static_cast<unsigned>(m) & 1u)) ++n;
        mask |= 1u << static_cast<unsigned>(m);
        if (comma == std::string::npos) break;
        start = comma + 1;
    }
    if (n > kMaxCandidates) {
        *why = "at most " + std::to_string(kMaxCandidates) + " candidates";
        return false;
    }
    cfg->auto_candidates = mask;
    return true;
}

bool apply_auto_check(const std::string &text, Config *cfg, std::string *why)
{
    if (parse_bool(text, &cfg->auto_check)) return true;
    *why = "expected on or off";
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
     "The candidates of CC_COLL_METHOD=auto besides none: a lossy method, or a comma-separated list of them "
     "(methods whose caps include CC_COLL_METHOD_CAP_AUTO_CANDIDATE; cc_coll_info lists them), such as "
     "topk,half. Per call auto runs the one the communicator's cost model predicts fastest, "
     "none included (docs/algorithms.md, \"The cost model\"). Every rank must use the same value.",
     apply_auto_method},
    {"AUTO_CHECK", "CC_COLL_AUTO_CHECK", "on",
     "Whether CC_COLL_METHOD=auto checks its cost model against the calls it makes (on: it times them, the "
     "ranks agree on the times now and then, the predictions are corrected, and at most two calls in 50 run "
     "the runner-up to measure it, and 5 in a row when it is close and only single calls measured it, or such a "
     "check finds it faster than the best; off: the model as measured at creation decides alone, so the same "
     "call always gets the same choice). docs/algorithms.md, \"Checked online\". Every rank must use the same value.",
     apply_auto_check},
    {"LINK", "CC_COLL_LINK", "measure",
     "The link of CC_COLL_METHOD=auto's cost model: measure (the none allreduce timed at six sizes from 4 B to "
     "one taking about 30 ms, on every rank, when the model is built, the slowest rank's times taken), or "
     "<Gbit/s>,<latency in microseconds> (such as 10,25) to give it (on a hierarchical communicator: the rails' link "
     "between nodes; the node's exchanges are still measured). The candidates' compute is always measured.",
     apply_link},
};

}  // namespace

const Method &auto_method()
{
    static const Method m = {
        .id = CC_COLL_METHOD_AUTO,
        .name = "auto",
        .summary = "per call, none or a candidate of CC_COLL_AUTO_METHOD, whichever the cost model, checked "
                   "against the calls, predicts fastest (reduce-scatter and point-to-point: none)",
        .homomorphic = false,
        .select = select,
        .comm_created = comm_created,
        .observe = observe,
        .predict = predict_call,
        .settings = kSettings,
        .settings_count = sizeof kSettings / sizeof kSettings[0],
        .p2p = P2pCompression::None,
    };
    return m;
}

}  // namespace cc_coll::detail
