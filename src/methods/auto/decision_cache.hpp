// AUTO's decisions of the last few calls (auto.cc). The model's predictions
// are pure in a call's tensor and parameters, and its corrected choice
// changes only when the online check's corrections do (an agreement, or a
// failed call that forgets them), so a call like a recent one skips both:
// a tenth of a microsecond, a visible share of a 4 KiB call on one node.
// A training loop repeats a few buckets' sizes, so a few entries suffice.
#pragma once

#include <cstdint>

#include "core/method.hpp"
#include "core/params.hpp"
#include "methods/auto/cost_model.hpp"
#include "methods/auto/online.hpp"

namespace cc_coll::detail {

constexpr int kCachedCalls = 4;

struct CachedCall {
    CostTensor tensor;
    CallParams params;
    AutoChoice choice;        // the model's predictions: valid while the entry is
    double bytes = 0;
    Decision decision;        // the corrected choice: valid while `epoch` is current
    std::uint64_t epoch = 0;  // 0: an empty entry
};

inline bool same_tensor(const CostTensor &a, const CostTensor &b)
{
    return a.count == b.count && a.dtype == b.dtype && a.has_shape == b.has_shape && a.rows == b.rows &&
           a.cols == b.cols;
}

class DecisionCache {
public:
    // The corrections changed: every entry's decision is to be made again
    // (its predictions still hold).
    void new_epoch() { ++epoch_; }
    std::uint64_t epoch() const { return epoch_; }

    // The entry of a call of tensor `t` with params `p`, or nullptr.
    CachedCall *find(const CostTensor &t, const CallParams &p)
    {
        for (CachedCall &e : entries_)
            if (e.epoch != 0 && same_tensor(e.tensor, t) && same_params(e.params, p)) return &e;
        return nullptr;
    }
    // A new entry for the call (its predictions and decision are the
    // caller's to fill in), in place of the oldest.
    CachedCall *insert(const CostTensor &t, const CallParams &p)
    {
        CachedCall &e = entries_[next_];
        next_ = (next_ + 1) % kCachedCalls;
        e = CachedCall();
        e.tensor = t;
        e.params = p;
        return &e;
    }

private:
    CachedCall entries_[kCachedCalls];
    int next_ = 0;
    std::uint64_t epoch_ = 1;
};

}  // namespace cc_coll::detail
