// TAGC's dynamic sparsification (docs/algorithms.md section 3.2): per tensor and
// step, pick a magnitude threshold tau from a fixed geometric ladder so that
// the fraction of elements zeroed (|x| < tau) stays at or just below a
// target, then keep the elements with |x| >= tau. Knows nothing of MPI.
//
// NaN is never "below" a threshold: pick() does not count it as zeroed and
// collect() keeps it, so non-finite values travel like they would in a
// dense MPI_SUM.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace cc_coll::detail::threshold {

// The ladder: kRungs thresholds geometric from kLowest to kHighest.
constexpr int kRungs = 64;
constexpr double kLowest = 1e-20;
constexpr double kHighest = 0.5;

// Rung r in [0, kRungs): kLowest * (kHighest / kLowest)^(r / (kRungs - 1));
// rung(0) == kLowest and rung(kRungs - 1) == kHighest exactly.
double rung(int r);

// Elements of x[0..n) with |x| < tau (NaN never counts).
template <typename W>
std::size_t count_below(const W *x, std::size_t n, double tau);

// The largest rung tau with count_below(x, n, tau) / n <= zero_fraction;
// 0 when even the lowest rung zeroes too much (keep everything). n == 0
// gives the highest rung. One pass over x (a histogram over the ladder):
// the result of a bisection over the rungs without its ~7 passes.
template <typename W>
double pick(const W *x, std::size_t n, double zero_fraction);

// pick's rule on its histogram: hist[b] (b in [0, kRungs]) counts the
// elements with b rungs at or below their magnitude (kRungs for +-inf and
// NaN), n is their total. Shared with the device pick.
double pick_from_histogram(const std::size_t *hist, std::size_t n, double zero_fraction);

// Appends to idx, ascending, the indices i with |x[i]| >= tau or x[i] NaN;
// returns how many were appended. n must be < 2^32.
template <typename W>
std::size_t collect(const W *x, std::size_t n, double tau, std::vector<std::uint32_t> *idx);

}  // namespace cc_coll::detail::threshold
