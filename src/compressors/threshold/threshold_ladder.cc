#include "compressors/threshold/threshold_ladder.hpp"

#include <cmath>

namespace cc_coll::detail::threshold {

namespace {

// The ladder, computed once.
struct Ladder {
    double tau[kRungs];
    Ladder()
    {
        const double ratio = std::log(kHighest / kLowest);
        for (int r = 0; r < kRungs; ++r) tau[r] = kLowest * std::exp(ratio * r / (kRungs - 1));
        tau[0] = kLowest;
        tau[kRungs - 1] = kHighest;
    }
};

const Ladder &ladder()
{
    static const Ladder l;
    return l;
}

// |v| < tau compared in double (exact for float and double v; false for
// NaN), so pick() and collect() agree exactly with the documented rule.
template <typename W>
inline bool below(W v, double tau)
{
    return static_cast<double>(std::fabs(v)) < tau;
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

template <typename W>
double pick(const W *x, std::size_t n, double zero_fraction)
{
    if (n == 0) return kHighest;
    const double dn = static_cast<double>(n);
    auto ok = [&](int r) { return static_cast<double>(count_below<W>(x, n, rung(r))) / dn <= zero_fraction; };
    // The zeroed fraction grows with the rung: find the last rung that is ok.
    if (!ok(0)) return 0.0;
    int lo = 0, hi = kRungs;  // ok(lo); every rung >= hi is not ok (or past the end)
    while (hi - lo > 1) {
        const int mid = lo + (hi - lo) / 2;
        if (ok(mid))
            lo = mid;
        else
            hi = mid;
    }
    return rung(lo);
}

template <typename W>
std::size_t collect(const W *x, std::size_t n, double tau, std::vector<std::uint32_t> *idx)
{
    const std::size_t before = idx->size();
    for (std::size_t i = 0; i < n; ++i)
        if (!below(x[i], tau)) idx->push_back(static_cast<std::uint32_t>(i));
    return idx->size() - before;
}

template std::size_t count_below<float>(const float *, std::size_t, double);
template std::size_t count_below<double>(const double *, std::size_t, double);
template double pick<float>(const float *, std::size_t, double);
template double pick<double>(const double *, std::size_t, double);
template std::size_t collect<float>(const float *, std::size_t, double, std::vector<std::uint32_t> *);
template std::size_t collect<double>(const double *, std::size_t, double, std::vector<std::uint32_t> *);

}  // namespace cc_coll::detail::threshold
