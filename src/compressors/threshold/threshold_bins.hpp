// The per-element rules of the threshold ladder that host and device code
// share (threshold_ladder.cc, threshold_cuda.cu): which elements a threshold
// zeroes, and in which histogram bin of the ladder an element falls.
#pragma once

#include <cmath>

#include "compressors/threshold/threshold_ladder.hpp"
#include "core/half.hpp"

namespace cc_coll::detail::threshold {

// |v| < tau compared in double (exact for float and double v; false for
// NaN), the rule of count_below, pick and collect.
template <typename W>
CC_COLL_HD inline bool below(W v, double tau)
{
    return ::fabs(static_cast<double>(v)) < tau;
}

// Number of the ladder's rungs tau[0..kRungs) (ascending) that are <= |v|;
// kRungs for +-inf and NaN. An element of bin b is below rung r exactly when
// b <= r, so count_below(rung(r)) is the sum of bins 0..r.
CC_COLL_HD inline int rungs_at_or_below(const double *tau, double v)
{
    static_assert(kRungs == 64, "the search below steps through 64 rungs");
    const double a = ::fabs(v);
    if (a != a) return kRungs;  // NaN
    int r = 0;
    for (int step = kRungs; step > 0; step >>= 1)
        if (r + step <= kRungs && tau[r + step - 1] <= a) r += step;
    return r;
}

}  // namespace cc_coll::detail::threshold
