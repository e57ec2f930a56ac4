#include "compressors/threshold/threshold_ladder.hpp"

#include <cmath>
#include <cstring>

#include "compressors/threshold/threshold_bins.hpp"

namespace cc_coll::detail::threshold {

namespace {

// The ladder, computed once, and a table that places a magnitude among the
// rungs from its binary exponent. The rungs grow by a factor
// (kHighest / kLowest)^(1 / (kRungs - 1)) ~ 2.08 > 2, so a binade
// [2^e, 2^(e+1)) holds at most one rung: the number of rungs <= a is
// first[e] + (a >= next[e]), with first[e] the number of rungs <= 2^e and
// next[e] the rung after those (NaN when none, so that no a, +inf included,
// counts one more).
struct Ladder {
    double tau[kRungs];
    std::uint8_t first[2048];
    double next[2048];

    Ladder()
    {
        const double ratio = std::log(kHighest / kLowest);
        for (int r = 0; r < kRungs; ++r) tau[r] = kLowest * std::exp(ratio * r / (kRungs - 1));
        tau[0] = kLowest;
        tau[kRungs - 1] = kHighest;
        for (int e = 0; e < 2048; ++e) {
            // Smallest double with biased exponent e (0: zero and subnormals).
            const double low = e == 0 ? 0.0 : (e == 2047 ? HUGE_VAL : std::ldexp(1.0, e - 1023));
            int r = 0;
            while (r < kRungs && tau[r] <= low) ++r;
            first[e] = static_cast<std::uint8_t>(r);
            next[e] = r < kRungs ? tau[r] : std::nan("");  // no rung left: never >=
        }
    }

    // Number of rungs <= |v| (kRungs for +-inf and NaN).
    int rungs_at_or_below(double v) const
    {
        std::uint64_t u;
        std::memcpy(&u, &v, sizeof u);
        u &= 0x7fffffffffffffffull;
        const unsigned e = static_cast<unsigned>(u >> 52);
        double a;
        std::memcpy(&a, &u, sizeof a);
        return first[e] + (a >= next[e] ? 1 : 0);  // NaN: e = 2047, first = kRungs
    }
};

const Ladder &ladder()
{
    static const Ladder l;
    return l;
}

}  // namespace

double rung(int r)
{
    if (r < 0) r = 0;
    if (r >= kRungs) r = kRungs - 1;
    return ladder().tau[r];
}

template <typename W>
std::size_t count_below(const W *x, std::size_t n, double tau)
{
    std::size_t c = 0;
    for (std::size_t i = 0; i < n; ++i) c += below(x[i], tau) ? 1 : 0;
    return c;
}

// One pass: a histogram of how many rungs lie at or below each |x|. The
// elements below rung r are those with at most r rungs at or below them,
// so count_below(rung(r)) is a prefix sum of the histogram; the answer is
// the last rung whose prefix stays within the target. The same result as a
// bisection over the ladder with count_below, in one pass over x instead
// of ~log2(kRungs) + 1 (x is usually far larger than the caches).
template <typename W>
double pick(const W *x, std::size_t n, double zero_fraction)
{
    if (n == 0) return kHighest;
    const Ladder &l = ladder();
    // Four histograms, so that runs of elements in the same bucket do not
    // chain their increments through memory.
    std::size_t h4[4][kRungs + 1] = {};
    std::size_t i = 0;
    for (; i + 4 <= n; i += 4)
        for (std::size_t k = 0; k < 4; ++k) ++h4[k][l.rungs_at_or_below(static_cast<double>(x[i + k]))];
    for (; i < n; ++i) ++h4[0][l.rungs_at_or_below(static_cast<double>(x[i]))];
    std::size_t hist[kRungs + 1];
    for (int r = 0; r <= kRungs; ++r) hist[r] = h4[0][r] + h4[1][r] + h4[2][r] + h4[3][r];
    return pick_from_histogram(hist, n, zero_fraction);
}

double pick_from_histogram(const std::size_t *hist, std::size_t n, double zero_fraction)
{
    if (n == 0) return kHighest;
    const double dn = static_cast<double>(n);
    std::size_t below_r = 0;  // count_below(rung(r))
    int best = -1;
    for (int r = 0; r < kRungs; ++r) {
        below_r += hist[r];
        if (static_cast<double>(below_r) / dn <= zero_fraction)
            best = r;
        else
            break;  // the zeroed fraction only grows with the rung
    }
    return best < 0 ? 0.0 : ladder().tau[best];
}

// Branch-free appends in chunks: every index is written, and the end
// advances only past the kept ones (which of them are kept is data, and a
// branch on it would mispredict often).
template <typename W>
std::size_t collect(const W *x, std::size_t n, double tau, std::vector<std::uint32_t> *idx)
{
    constexpr std::size_t kChunk = 4096;
    const std::size_t before = idx->size();
    std::size_t end = before;
    for (std::size_t i0 = 0; i0 < n; i0 += kChunk) {
        const std::size_t len = n - i0 < kChunk ? n - i0 : kChunk;
        idx->resize(end + len);
        std::uint32_t *out = idx->data() + end;
        std::size_t k = 0;
        for (std::size_t i = i0; i < i0 + len; ++i) {
            out[k] = static_cast<std::uint32_t>(i);
            k += below(x[i], tau) ? 0 : 1;
        }
        end += k;
    }
    idx->resize(end);
    return end - before;
}

template std::size_t count_below<float>(const float *, std::size_t, double);
template std::size_t count_below<double>(const double *, std::size_t, double);
template double pick<float>(const float *, std::size_t, double);
template double pick<double>(const double *, std::size_t, double);
template std::size_t collect<float>(const float *, std::size_t, double, std::vector<std::uint32_t> *);
template std::size_t collect<double>(const double *, std::size_t, double, std::vector<std::uint32_t> *);

}  // namespace cc_coll::detail::threshold
