#include "methods/auto/online.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace cc_coll::detail {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// A non-negative double's bits: ordered as the doubles are, so that an
// MPI_MAX on the words is the maximum of the values.
std::uint64_t bits_of(double d)
{
    std::uint64_t u;
    std::memcpy(&u, &d, sizeof u);
    return u;
}

double double_of(std::uint64_t u)
{
    double d;
    std::memcpy(&d, &u, sizeof d);
    return d;
}

std::uint64_t mix(std::uint64_t h, std::uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdull;
}

}  // namespace

int size_class(double bytes)
{
    if (!(bytes >= 1)) return 0;
    const int k = static_cast<int>(std::floor(2.0 * std::log2(bytes)));
    return std::clamp(k, 0, kSizeClasses - 1);
}

double OnlineCheck::factor_of(int j, int k, bool *found) const
{
    if (found != nullptr) *found = true;
    if (factor_[j][k] > 0) return factor_[j][k];
    for (int d = 1; d <= 4; ++d) {  // the nearest class within two octaves
        if (k - d >= 0 && factor_[j][k - d] > 0) return factor_[j][k - d];
        if (k + d < kSizeClasses && factor_[j][k + d] > 0) return factor_[j][k + d];
    }
    if (found != nullptr) *found = false;
    return 1.0;
}

double OnlineCheck::class_factor(int k) const
{
    double log_sum = 0;
    int n = 0;
    for (int j = 0; j < kChoices; ++j)
        if (factor_[j][k] > 0) {
            log_sum += std::log(factor_[j][k]);
            ++n;
        }
    return n == 0 ? 1.0 : std::exp(log_sum / n);
}

void OnlineCheck::corrected(const CostModel &model, const AutoChoice &c, double bytes, double *none,
                            double *best_lossy, int *best) const
{
    const int k = size_class(bytes);
    *none = c.predicted_none * factor_of(0, k);
    *best_lossy = kInf;
    *best = -1;
    for (int i = 0; i < model.candidates; ++i) {
        const double e = c.predicted[i] * factor_of(1 + i, k);
        if (e < *best_lossy) {
            *best_lossy = e;
            *best = i;
        }
    }
}

void OnlineCheck::start_trial(int k, std::uint64_t calls)
{
    trial_left_[k] = kTrialCalls;
    ++trials_running_;
    last_explore_[k] = calls;
}

Decision OnlineCheck::decide(const CostModel &model, const AutoChoice &c, double bytes)
{
    Decision d;
    const int k = size_class(bytes);
    d.size_class = k;
    // Every choice's corrected prediction; the best and the runner-up.
    double est[kChoices];
    est[0] = c.predicted_none * factor_of(0, k);
    for (int i = 0; i < model.candidates; ++i) est[1 + i] = c.predicted[i] * factor_of(1 + i, k);
    const int n = 1 + model.candidates;
    int best = 0, runner = -1;
    for (int j = 1; j < n; ++j)
        if (est[j] < est[best]) best = j;
    for (int j = 0; j < n; ++j)
        if (j != best && std::isfinite(est[j]) && (runner < 0 || est[j] < est[runner])) runner = j;
    const std::uint64_t calls = ++calls_[k];
    if (preferred_[k] != 0 && preferred_[k] - 1 != best) switched_ = true;
    preferred_[k] = static_cast<signed char>(1 + best);
    d.corrected_none = est[0];
    d.corrected_best_lossy = kInf;
    for (int j = 1; j < n; ++j) d.corrected_best_lossy = std::min(d.corrected_best_lossy, est[j]);
    int ran = best;
    if (std::isfinite(est[best])) total_ += est[best];
    // The second call of a look at a choice never run in the class: the one
    // that is measured (the first paid for the choice's new state).
    const int again = look_again_[k] - 1;
    look_again_[k] = 0;
    if (again >= 0 && again < n && again != best && std::isfinite(est[again])) {
        ran = again;
        d.explored = true;
        looked_ = true;
        spent_ += std::max(0.0, est[again] - est[best]);
    }
    // A close runner-up that only single calls measured in the class (its
    // first look, checks): a trial, so that a window of its calls in a row,
    // not one call that may have met a busy moment, decides between two
    // close choices. The first one as soon as the look is agreed, whatever
    // the budget (as the look); later ones 50 calls after the last check,
    // within it.
    const bool first_close = runner >= 0 && !close_tried_[runner][k];
    if (!d.explored && trial_[k] == 0 && model.ranks > 1 && runner >= 0 && factor_[runner][k] > 0 &&
        !sustained_[runner][k] && est[runner] < kCloseFactor * est[best] &&
        calls - last_explore_[k] >= static_cast<std::uint64_t>(first_close ? kAgreeFirstCalls : kExplorePeriod) &&
        (first_close || spent_ + kTrialCalls * std::max(0.0, est[runner] - est[best]) <= kExploreBudget * total_)) {
        close_tried_[runner][k] = true;
        trial_[k] = static_cast<unsigned char>(1 + runner);
        start_trial(k, calls);
    }
    // A trial (a check found the choice faster than its correction, and
    // faster than the best; or a close runner-up, above): its calls in a
    // row, once the checks' budget pays for all of them; none if the class
    // prefers the choice meanwhile or the check's time no longer beats the
    // best's.
    const int trial = trial_[k] - 1;
    if (!d.explored && trial >= 0) {
        const double extra = trial < n && std::isfinite(est[trial]) ? std::max(0.0, est[trial] - est[best]) : kInf;
        if (trial_left_[k] == 0) {
            const double raw = trial == 0 ? c.predicted_none : trial < n ? c.predicted[trial - 1] : kInf;
            const double seen = raw * trial_ratio_[k];  // the check's time
            if (trial == best || !std::isfinite(extra) || !(seen < est[best])) {
                trial_[k] = 0;
            } else if (spent_ + kTrialCalls * extra <= kExploreBudget * total_) {
                start_trial(k, calls);
            }
        }
        if (trial_left_[k] > 0) {
            ran = trial;
            d.explored = true;
            spent_ += extra;
            if (--trial_left_[k] == 0) {
                trial_[k] = 0;
                --trials_running_;
            }
        }
    }
    const bool allowed = !d.explored && model.ranks > 1 && runner >= 0 &&
                         calls >= static_cast<std::uint64_t>(kExploreAt) &&
                         (last_explore_[k] == 0 || calls - last_explore_[k] >= static_cast<std::uint64_t>(kExplorePeriod));
    if (allowed) {
        const bool unseen = factor_[runner][k] <= 0;
        const double extra = std::max(0.0, est[runner] - est[best]);
        // A first look judges a choice never measured near this size as
        // wrong as the measured ones of its class (the geometric mean of
        // their corrections): a link given wrongly misleads them all alike.
        bool found = false;
        const double raw = runner == 0 ? c.predicted_none : c.predicted[runner - 1];
        factor_of(runner, k, &found);
        const double looked = found ? est[runner] : raw * class_factor(k);
        const bool first_look = unseen && last_explore_[k] == 0 && looked <= kFirstLookFactor * est[best];
        // A runner-up that only checks measured (single calls after a
        // pause, which a shaped link lets through faster than calls in a
        // row) may seem closer than it is: rechecked 4 times less often.
        const std::uint64_t period = static_cast<std::uint64_t>(
            sustained_[runner][k] ? kExplorePeriod : kChecksOnlyPeriod);
        const bool close = est[runner] < kCloseFactor * est[best] && calls - last_explore_[k] >= period;
        const bool refresh = calls - last_explore_[k] >= static_cast<std::uint64_t>(kExploreRefresh);
        const bool affordable = spent_ + extra <= kExploreBudget * total_;
        if (first_look || ((unseen || close || drift_[k] || refresh) && affordable)) {
            ran = runner;
            d.explored = true;
            drift_[k] = false;
            last_explore_[k] = calls;
            spent_ += extra;
            // A choice never run in the class runs twice: its first call is
            // no sample (below), the second is.
            if (!ran_[runner][k]) look_again_[k] = static_cast<unsigned char>(1 + runner);
        }
    }
    // A choice's first call in the class may pay for what the next ones
    // reuse (a residual, scratch buffers, the pages they touch): no sample.
    if (!ran_[ran][k]) {
        ran_[ran][k] = true;
        d.warmup = true;
    }
    d.choice = ran;
    d.predicted = ran == 0 ? c.predicted_none : c.predicted[ran - 1];
    d.corrected = est[ran];
    if (model.ranks > 1) {
        const int key = ran * kSizeClasses + k;
        auto it = std::find_if(window_.begin(), window_.end(), [key](const Pending &p) { return p.key == key; });
        if (it == window_.end()) window_.push_back(Pending{key, {}});
        ++window_calls_;
        window_predicted_ += std::isfinite(d.predicted) ? d.predicted : 0;
    }
    return d;
}

void OnlineCheck::observe(const Decision &d, double seconds)
{
    if (d.warmup) return;
    if (!(d.predicted > 0) || !std::isfinite(d.predicted) || !(seconds >= 0)) return;
    const int key = d.choice * kSizeClasses + d.size_class;
    for (Pending &p : window_)
        if (p.key == key) {
            p.ratios.push_back(seconds / d.predicted);
            return;
        }
}

bool OnlineCheck::agreement_due(const CostModel &model) const
{
    if (window_.empty()) return false;
    // A trial's calls wait for one window (but a full one, or 64 calls).
    if (trials_running_ > 0 && static_cast<int>(window_.size()) < kAgreeSlots && window_calls_ < kAgreeMaxCalls)
        return false;
    // The first agreements come sooner (8, 16, 32 calls), so that a
    // communicator's first sizes are corrected within their first calls.
    // After a look's sample, or after a class's best choice changed, the
    // next one comes as soon: a new size's look acts within its class's
    // first calls, and a switch on a misleading sample is undone within a
    // few calls.
    const int max_calls = switched_ || looked_ ? kAgreeFirstCalls
                          : agreements_ >= 3 ? kAgreeMaxCalls
                                             : kAgreeFirstCalls << agreements_;
    return static_cast<int>(window_.size()) >= kAgreeSlots || window_calls_ >= max_calls ||
           (window_calls_ >= kAgreeMinCalls && window_predicted_ >= kAgreeCostFactor * 2 * model.latency);
}

std::vector<int> OnlineCheck::window_keys() const
{
    std::vector<int> keys;
    for (const Pending &p : window_) keys.push_back(p.key);
    std::sort(keys.begin(), keys.end());
    if (keys.size() > static_cast<std::size_t>(kAgreeSlots)) keys.resize(kAgreeSlots);
    return keys;
}

std::vector<std::uint64_t> OnlineCheck::agreement_words() const
{
    std::vector<Pending> sorted = window_;
    std::sort(sorted.begin(), sorted.end(), [](const Pending &a, const Pending &b) { return a.key < b.key; });
    std::vector<std::uint64_t> w(2 + kAgreeSlots, 0);
    std::uint64_t h = mix(0, sorted.size());
    for (std::size_t i = 0; i < sorted.size() && i < static_cast<std::size_t>(kAgreeSlots); ++i) {
        h = mix(h, static_cast<std::uint64_t>(sorted[i].key));
        w[2 + i] = sorted[i].ratios.empty() ? 0 : bits_of(median(sorted[i].ratios));
    }
    w[0] = h;
    w[1] = ~h;
    return w;
}

bool OnlineCheck::apply_agreement(const std::vector<std::uint64_t> &max_words)
{
    std::vector<Pending> sorted = window_;
    std::sort(sorted.begin(), sorted.end(), [](const Pending &a, const Pending &b) { return a.key < b.key; });
    window_.clear();
    window_calls_ = 0;
    window_predicted_ = 0;
    switched_ = false;
    looked_ = false;
    if (max_words.size() != static_cast<std::size_t>(2 + kAgreeSlots) || max_words[0] != ~max_words[1])
        return false;  // the ranks' windows differ: learn nothing
    ++agreements_;
    for (std::size_t i = 0; i < sorted.size() && i < static_cast<std::size_t>(kAgreeSlots); ++i) {
        const double r = double_of(max_words[2 + i]);
        if (!(r > 0) || !std::isfinite(r)) continue;
        const int j = sorted[i].key / kSizeClasses, k = sorted[i].key % kSizeClasses;
        // The window's samples of the pair: the same count on every rank
        // (the decisions are), so the weights are too.
        const double m = static_cast<double>(sorted[i].ratios.size());
        if (!(m > 0)) continue;
        double &f = factor_[j][k];
        double &w = weight_[j][k];
        signed char &off = off_[j][k];
        // A window of fewer than kDriftMinSamples samples (a check of the
        // runner-up) moves the correction by its weight only: one call can
        // be the exception (a burst a shaped link lets through).
        const bool sustained = m >= kDriftMinSamples;
        const signed char dir = f <= 0 ? 0 : r > kDriftFactor * f ? 1 : r * kDriftFactor < f ? -1 : 0;
        const signed char now = sustained ? dir : 0;
        // A correction that only checks made (single calls after a pause,
        // which a bursting link lets through at the wire's speed) gives way
        // to the first window of calls in a row.
        const bool first_sustained = sustained && !sustained_[j][k];
        if (sustained) sustained_[j][k] = true;
        if (f <= 0 || (now != 0 && now == off) || first_sustained) {
            if (f > 0 && !first_sustained) drift_[k] = true;
            f = r;
            w = std::min(m, kMaxWeight);
            off = 0;
        } else {
            f = std::exp((w * std::log(f) + m * std::log(r)) / (w + m));
            w = std::min(w + m, kMaxWeight);
            off = now;
        }
        // A check that finds a choice the class does not prefer more than
        // 1.5x faster than its correction: a trial of it (if the check's
        // time beats the best's, decide), whose window, as far off, replaces
        // the correction (the second off running).
        if (!sustained && dir < 0 && j != preferred_[k] - 1 && trial_[k] == 0) {
            trial_[k] = static_cast<unsigned char>(1 + j);
            trial_ratio_[k] = r;
            off = -1;
        }
    }
    return true;
}

}  // namespace cc_coll::detail
