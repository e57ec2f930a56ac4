// AUTO's model checked against the calls it makes (docs/algorithms.md
// section 8, "Checked online").
//
// Every call AUTO routes is timed on every rank; the time over the model's
// prediction for what ran is a sample of that choice (NONE or a candidate)
// in the call's size class (a half-octave of its bytes), except a choice's
// first call in a class, which may pay for state the next ones reuse
// (TOPK's residual, scratch buffers, the pages they touch). The ranks agree
// on the samples every so often, at the same AUTO call on every rank (an
// exchange in the agreement's format, then one MPI_Allreduce (MPI_MAX) of
// a word per pair of the window, at most 32), once the calls since the last
// one are 4 or more and were predicted to take 100 times its two
// latencies, or after 64 calls
// (8, 16 and 32 for a communicator's first three agreements, and 8 again
// after a look's sample, so that a new size's look acts within its first
// calls, and after a class's preferred choice changed, so that a wrong
// switch is undone within a few calls).
// What they agree on is each choice's median ratio, the slowest rank's.
// The choice's correction in that class is the weighted geometric mean of
// its history and the window's ratio, each sample one unit of weight and
// the history's weight capped at 64 (one outlying sample, such as a look
// at the runner-up on a link that bursts, cannot outweigh a window of
// sustained calls, nor one noisy window a long history); it takes the
// window's ratio alone when the ratio is off by more than 1.5x, in the same
// direction, for the second agreement running, each window with 3 or more
// samples of the choice (the class has drifted), and when the window is the
// first with 3 or more samples of the choice in the class (till then only
// single checks, calls after a pause, made the correction). A
// prediction is multiplied by its correction (the class's, else the
// nearest class's within two octaves, else 1).
//
// Exploration: AUTO runs the runner-up instead of the best now and then,
// from the 3rd call of a size class on, and never twice within 50 calls of
// the class: once early when the runner-up has no sample in the class yet
// and is predicted at most 10 times slower (a first look; a choice never
// measured near this size is taken to be as far off as the measured
// choices of its class, on average), and otherwise
// when it has no sample, is within 1.5x of the best (and then, if it has
// only run as a check, not in a window of 3 or more calls, a trial, below,
// or where the budget cannot pay for one, a check 200 calls after the last
// one), when the class has drifted, or when it was last checked
// 1000 calls ago; these later checks
// only while the predicted extra time of all checks stays within 2% of the
// predicted time of all AUTO calls. So at most two calls in 50 run a
// choice the model does not prefer, and 5 more in a row in a trial
// (below); but for the first looks and a class's first trial of a close
// runner-up, the checks cost at most 2% of the time. A look at a choice
// never run in the class runs it twice in a row, so that the second call
// is a sample.
//
// Trials: a runner-up within 1.5x of the best that only single calls
// measured in the class (its first look, checks) runs 5 calls in a row:
// the first time as soon as its look is agreed, whatever the budget (as
// the look; at most 2.5 of the best's calls), later 50 calls after the
// last check, within it. So two close choices are told apart by calls in
// a row (whose window, the choice's first of 3 or more samples, replaces
// the correction), not by one call that met a busy moment. And a
// check (a window of fewer than 3 samples of the choice) that finds a
// choice the class does not prefer more than 1.5x faster than its
// correction says, and faster than the best's corrected prediction, makes
// the class's next 5 calls run that choice in a row (once the checks'
// budget pays for them). The agreement is held back till a trial's calls
// are done (up to 64 calls), so that one window holds them; that window
// counts as the second agreement running off in the same direction, so
// when it confirms the check it replaces the correction. Without trials, a
// correction that a passing slowdown set (a busy process on the rank's
// core for a while) kept that choice off for as long as single checks took
// to outweigh it, up to thousands of calls; a single check cannot switch
// on its own (a shaped link lets one call after a pause through at the
// wire's speed), and 5 calls outlast such a burst.
//
// Everything a decision reads (the model, the corrections, the call
// counts) is the same on every rank: rank-local clocks enter only through
// the agreement.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "cc_coll.h"
#include "methods/auto/cost_model.hpp"

namespace cc_coll::detail {

constexpr int kSizeClasses = 80;      // half-octaves of bytes: 1 B .. 2^40 B
constexpr int kChoices = kMaxCandidates + 1;  // NONE, then the model's candidates
constexpr int kAgreeSlots = 32;       // distinct (choice, class) pairs per agreement
constexpr int kAgreeMinCalls = 4;
constexpr int kAgreeMaxCalls = 64;
constexpr int kAgreeFirstCalls = 8;  // the first agreement's calls, doubling up to kAgreeMaxCalls
constexpr double kAgreeCostFactor = 100;  // the window's predicted time over the agreement's (2 latencies)
constexpr int kExplorePeriod = 50;
constexpr int kChecksOnlyPeriod = 200;  // close runner-ups that only checks measured
constexpr int kExploreAt = 3;
constexpr int kExploreRefresh = 1000;  // calls of a class after which a choice is re-checked
constexpr double kFirstLookFactor = 10;
constexpr double kExploreBudget = 0.02;
constexpr double kCloseFactor = 1.5;
constexpr double kDriftFactor = 1.5;
constexpr double kCheckMinSeconds = 20e-6;  // calls predicted shorter are not checked (auto.cc)
constexpr double kMaxWeight = 64;  // samples a correction's history weighs at most
constexpr double kDriftMinSamples = 3;  // a window's samples of a choice that can tell a drift
constexpr int kTrialCalls = 5;  // calls in a row of a choice a check found faster than its correction

int size_class(double bytes);

struct Decision {
    int choice = 0;             // 0 NONE, 1 + i: the model's candidate i
    int size_class = 0;
    double predicted = 0;       // the model's prediction (uncorrected) of `choice`
    double corrected = 0;       // as corrected by the samples
    double corrected_none = 0;  // NONE, corrected
    double corrected_best_lossy = 0;
    bool explored = false;      // ran the runner-up to check the model
    bool warmup = false;        // the choice's first call in the class: not a sample
};

class OnlineCheck {
public:
    // The decision for a call with the model's predictions `c` of `bytes`
    // bytes (counts the call in its class). Pure given the agreed state.
    Decision decide(const CostModel &model, const AutoChoice &c, double bytes);
    // The predictions as corrected, without deciding (cc_coll_auto_predict).
    void corrected(const CostModel &model, const AutoChoice &c, double bytes, double *none, double *best_lossy,
                   int *best) const;
    // This rank's time of the call `d` routed.
    void observe(const Decision &d, double seconds);
    // Whether the ranks should agree before the next decision (identical on
    // every rank).
    bool agreement_due(const CostModel &model) const;
    // The words this rank contributes (2 + kAgreeSlots), and the update from
    // the element-wise maximum over the ranks. Returns false when the ranks'
    // windows differ (then nothing is learnt).
    std::vector<std::uint64_t> agreement_words() const;
    bool apply_agreement(const std::vector<std::uint64_t> &max_words);

    // The (choice, class) keys of the samples the next agreement decides,
    // in the order of its words (choice * kSizeClasses + class).
    std::vector<int> window_keys() const;
    // The samples behind the correction of choice j in class k (capped).
    double weight(int j, int k) const { return weight_[j][k]; }
    // The agreed correction of choice j in class k (0: none yet).
    double correction(int j, int k) const { return factor_[j][k]; }
    std::uint64_t agreements() const { return agreements_; }

private:
    double factor_of(int j, int k, bool *found = nullptr) const;
    double class_factor(int k) const;
    void start_trial(int k, std::uint64_t calls);  // class k's trial (trial_[k]) runs from this call
    struct Pending {
        int key;  // choice * kSizeClasses + class
        std::vector<double> ratios;
    };
    double factor_[kChoices][kSizeClasses] = {};
    double weight_[kChoices][kSizeClasses] = {};
    bool sustained_[kChoices][kSizeClasses] = {};     // a window of kDriftMinSamples or more has been agreed
    bool ran_[kChoices][kSizeClasses] = {};           // the choice has run in the class
    bool close_tried_[kChoices][kSizeClasses] = {};   // the choice has had a trial as a close runner-up
    signed char preferred_[kSizeClasses] = {};        // 1 + the class's last best choice (0: none yet)
    bool switched_ = false;  // a class's best choice changed since the last agreement
    bool looked_ = false;    // a look's sample (its second call) ran since the last agreement
    bool drift_[kSizeClasses] = {};
    signed char off_[kChoices][kSizeClasses] = {};  // the last agreement's direction when off by > 1.5x
    std::uint64_t calls_[kSizeClasses] = {};
    std::uint64_t last_explore_[kSizeClasses] = {};  // the class's call that last explored (0: none)
    unsigned char look_again_[kSizeClasses] = {};    // 1 + the choice the class's next call runs again (0: none)
    unsigned char trial_[kSizeClasses] = {};         // 1 + the choice of the class's trial (0: none)
    double trial_ratio_[kSizeClasses] = {};          // the agreed ratio of the check that called it
    int trial_left_[kSizeClasses] = {};              // calls left of the class's trial once it started
    int trials_running_ = 0;                         // classes whose trial has calls left
    double spent_ = 0;  // the predicted extra seconds of the checks
    double total_ = 0;  // the predicted seconds of every call decided
    std::vector<Pending> window_;
    int window_calls_ = 0;
    double window_predicted_ = 0;
    std::uint64_t agreements_ = 0;
};

}  // namespace cc_coll::detail
