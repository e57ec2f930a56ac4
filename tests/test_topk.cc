// Method TOPK without MPI: the exact top-k selection (sampled and full
// paths) against a sort-based reference, k_for, the (index, value) payload,
// the error-feedback store, and the density / EF parameters and settings.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include <gtest/gtest.h>

#include "map_env.hpp"

#include "cc_coll.h"
#include "wire/topk_payload.hpp"
#include "compressors/topk/topk_backend.hpp"
#include "compressors/topk/topk_select.hpp"
#include "core/config.hpp"
#include "core/dtype.hpp"
#include "core/ef_store.hpp"
#include "core/error.hpp"
#include "core/half.hpp"
#include "core/method.hpp"
#include "core/params.hpp"

namespace cc_coll::detail {
namespace {

// ---------------------------------------------------------------- reference selection

// Magnitude class: NaN above +-inf above every finite value.
template <typename W>
int magnitude_class(W v)
{
    if (std::isnan(v)) return 2;
    if (std::isinf(v)) return 1;
    return 0;
}

// The k largest |x| (ties: lower index first), as ascending indices. Written
// from the documented rule only: sort every index, take k, sort the k.
template <typename W>
std::vector<std::uint32_t> reference_topk(const std::vector<W> &x, std::size_t k)
{
    std::vector<std::uint32_t> order(x.size());
    std::iota(order.begin(), order.end(), 0u);
    std::sort(order.begin(), order.end(), [&x](std::uint32_t a, std::uint32_t b) {
        const int ca = magnitude_class(x[a]), cb = magnitude_class(x[b]);
        if (ca != cb) return ca > cb;
        if (ca == 0) {
            const W ma = std::fabs(x[a]), mb = std::fabs(x[b]);
            if (ma != mb) return ma > mb;
        }
        return a < b;
    });
    order.resize(std::min(k, x.size()));
    std::sort(order.begin(), order.end());
    return order;
}

template <typename W>
std::vector<std::uint32_t> run_select(const std::vector<W> &x, std::size_t k, topk::SelectInfo *info)
{
    topk::SelectScratch scratch;
    // Canaries after the k slots: select must write exactly k indices.
    std::vector<std::uint32_t> idx(k + 4, 0xdeadbeefu);
    topk::select<W>(x.data(), x.size(), k, idx.data(), &scratch, info);
    for (std::size_t j = k; j < k + 4; ++j) EXPECT_EQ(idx[j], 0xdeadbeefu) << "select wrote past k = " << k;
    idx.resize(k);
    return idx;
}

template <typename W>
std::vector<std::uint32_t> run_select_full(const std::vector<W> &x, std::size_t k)
{
    topk::SelectScratch scratch;
    std::vector<std::uint32_t> idx(k);
    topk::select_full<W>(x.data(), x.size(), k, idx.data(), &scratch);
    return idx;
}

// First position where two index lists differ, for readable failures.
std::string first_difference(const std::vector<std::uint32_t> &got, const std::vector<std::uint32_t> &want)
{
    if (got.size() != want.size())
        return "sizes differ: " + std::to_string(got.size()) + " vs " + std::to_string(want.size());
    for (std::size_t j = 0; j < got.size(); ++j)
        if (got[j] != want[j])
            return "at j=" + std::to_string(j) + ": got " + std::to_string(got[j]) + ", want " +
                   std::to_string(want[j]);
    return "equal";
}

enum class Dist { Uniform, Normal, LogNormal, SmallInts, Exponents };

template <typename W>
std::vector<W> random_vector(std::size_t n, Dist dist, std::uint64_t seed)
{
    std::mt19937_64 rng(seed);
    std::vector<W> x(n);
    std::uniform_real_distribution<double> uni(-1.0, 1.0);
    std::normal_distribution<double> normal(0.0, 1.0);
    std::uniform_int_distribution<int> ints(-5, 5);
    std::uniform_int_distribution<int> expo(-60, 60);
    for (std::size_t i = 0; i < n; ++i) {
        switch (dist) {
        case Dist::Uniform: x[i] = static_cast<W>(uni(rng)); break;
        case Dist::Normal: x[i] = static_cast<W>(normal(rng)); break;
        case Dist::LogNormal: x[i] = static_cast<W>((uni(rng) < 0 ? -1 : 1) * std::exp(3.0 * normal(rng))); break;
        case Dist::SmallInts: x[i] = static_cast<W>(ints(rng)); break;
        case Dist::Exponents: x[i] = static_cast<W>(uni(rng) * std::ldexp(1.0, expo(rng))); break;
        }
    }
    return x;
}

// The reference order of all n indices, sorted once per input and cut to
// each k (prefix, then ascending).
template <typename W>
struct ReferenceOrder {
    std::vector<std::uint32_t> all;
    explicit ReferenceOrder(const std::vector<W> &x)
    {
        all = reference_topk_unsorted(x);
    }
    std::vector<std::uint32_t> top(std::size_t k) const
    {
        std::vector<std::uint32_t> v(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(std::min(k, all.size())));
        std::sort(v.begin(), v.end());
        return v;
    }
    static std::vector<std::uint32_t> reference_topk_unsorted(const std::vector<W> &x)
    {
        std::vector<std::uint32_t> order(x.size());
        std::iota(order.begin(), order.end(), 0u);
        std::sort(order.begin(), order.end(), [&x](std::uint32_t a, std::uint32_t b) {
            const int ca = magnitude_class(x[a]), cb = magnitude_class(x[b]);
            if (ca != cb) return ca > cb;
            if (ca == 0) {
                const W ma = std::fabs(x[a]), mb = std::fabs(x[b]);
                if (ma != mb) return ma > mb;
            }
            return a < b;
        });
        return order;
    }
};

template <typename W>
void expect_select_matches(const std::vector<W> &x, std::size_t k, const char *what, topk::SelectInfo *info = nullptr,
                           const ReferenceOrder<W> *order = nullptr)
{
    const std::vector<std::uint32_t> want = order ? order->top(k) : reference_topk(x, k);
    topk::SelectInfo local;
    const std::vector<std::uint32_t> got = run_select(x, k, info ? info : &local);
    ASSERT_EQ(got, want) << what << " n=" << x.size() << " k=" << k << ": " << first_difference(got, want);
    const std::vector<std::uint32_t> full = run_select_full(x, k);
    ASSERT_EQ(full, want) << what << " (select_full) n=" << x.size() << " k=" << k << ": "
                          << first_difference(full, want);
    // The same indices on several threads (ranges joined in order, one
    // range falling back or not), and from load_select, which loads g from
    // x block by block during the pass: g must end up equal to x (or to
    // g + x = x from a zero residual) bit for bit.
    for (int threads : {2, 3, 5}) {
        topk::SelectScratch scratch;
        std::vector<std::uint32_t> idx(k + 4, 0xdeadbeefu);
        topk::select<W>(x.data(), x.size(), k, idx.data(), &scratch, nullptr, threads);
        for (std::size_t j = k; j < k + 4; ++j) ASSERT_EQ(idx[j], 0xdeadbeefu) << "select wrote past k";
        idx.resize(k);
        ASSERT_EQ(idx, want) << what << " threads=" << threads << " n=" << x.size() << " k=" << k << ": "
                             << first_difference(idx, want);
        for (bool accumulate : {false, true}) {
            std::vector<W> g(x.size(), accumulate ? W(0) : std::numeric_limits<W>::quiet_NaN());
            std::vector<std::uint32_t> lidx(k);
            topk::load_select<W>(x.data(), std::is_same_v<W, float> ? CC_COLL_F32 : CC_COLL_F64, accumulate,
                                 g.data(), x.size(), k, lidx.data(), &scratch, threads);
            ASSERT_EQ(lidx, want) << what << " (load_select) threads=" << threads << " accumulate=" << accumulate
                                  << " n=" << x.size() << " k=" << k << ": " << first_difference(lidx, want);
            ASSERT_EQ(std::memcmp(g.data(), x.data(), x.size() * sizeof(W)), 0)
                << what << " (load_select) left g different from x";
        }
    }
}

// The reference itself, on a hand-checked case, so a broken reference
// cannot agree with a broken library.
TEST(TopkReference, HandCheckedCase)
{
    const std::vector<float> x = {1.0f, -3.0f, 2.0f, 3.0f, -0.5f, std::numeric_limits<float>::infinity(), 0.0f};
    EXPECT_EQ(reference_topk(x, 1), (std::vector<std::uint32_t>{5}));
    EXPECT_EQ(reference_topk(x, 2), (std::vector<std::uint32_t>{1, 5}));  // |-3| == |3|: index 1 first
    EXPECT_EQ(reference_topk(x, 3), (std::vector<std::uint32_t>{1, 3, 5}));
    EXPECT_EQ(reference_topk(x, 4), (std::vector<std::uint32_t>{1, 2, 3, 5}));
    EXPECT_EQ(reference_topk(x, 7), (std::vector<std::uint32_t>{0, 1, 2, 3, 4, 5, 6}));
}

// ---------------------------------------------------------------- select: small n (full path)

template <typename W>
void small_n_cases()
{
    const std::size_t ns[] = {1, 2, 3, 5, 16, 17, 100, 1000, 4097, 32767};
    const Dist dists[] = {Dist::Uniform, Dist::Normal, Dist::LogNormal, Dist::SmallInts, Dist::Exponents};
    std::uint64_t seed = 1;
    for (std::size_t n : ns) {
        std::vector<std::size_t> ks = {0, 1, 2, n / 3, n / 2, n - 1, n};
        for (Dist d : dists) {
            const std::vector<W> x = random_vector<W>(n, d, seed++);
            for (std::size_t k : ks) {
                if (k > n) continue;
                topk::SelectInfo info;
                expect_select_matches(x, k, "small n", &info);
                EXPECT_FALSE(info.sampled) << "n=" << n << " is below the sampling size";
            }
        }
    }
}

TEST(TopkSelect, SmallNFloat) { small_n_cases<float>(); }
TEST(TopkSelect, SmallNDouble) { small_n_cases<double>(); }

// ---------------------------------------------------------------- select: sampled path

template <typename W>
void sampled_cases()
{
    const std::size_t ns[] = {std::size_t{1} << 15, (std::size_t{1} << 16) + 7, (std::size_t{1} << 20) + 3};
    const double fractions[] = {1e-4, 1e-3, 1e-2, 5e-2};
    const Dist dists[] = {Dist::Uniform, Dist::Normal, Dist::LogNormal, Dist::Exponents};
    std::uint64_t seed = 1000;
    int runs = 0, fallbacks = 0;
    for (std::size_t n : ns) {
        for (Dist d : dists) {
            const std::vector<W> x = random_vector<W>(n, d, seed++);
            const ReferenceOrder<W> order(x);
            for (double f : fractions) {
                const std::size_t k = topk::k_for(f, n);
                ASSERT_GE(k, 1u);
                topk::SelectInfo info;
                expect_select_matches(x, k, "sampled", &info, &order);
                EXPECT_TRUE(info.sampled) << "n=" << n << " k=" << k << ": the sampled path did not run";
                if (!info.fell_back) {
                    EXPECT_GE(info.candidates, k) << "no fallback but fewer candidates than k";
                }
                ++runs;
                fallbacks += info.fell_back ? 1 : 0;
            }
        }
    }
    // Continuous random data with distinct magnitudes: the estimate must
    // nearly always hold (the fallback is for adversarial inputs).
    EXPECT_LE(fallbacks * 10, runs) << fallbacks << " of " << runs << " sampled selections fell back";
}

TEST(TopkSelect, SampledFloat) { sampled_cases<float>(); }
TEST(TopkSelect, SampledDouble) { sampled_cases<double>(); }

// Small integers: massive ties at the threshold, sampled or not.
TEST(TopkSelect, SampledWithManyTies)
{
    const std::size_t n = (std::size_t{1} << 16) + 1;
    const std::vector<float> xf = random_vector<float>(n, Dist::SmallInts, 77);
    const std::vector<double> xd = random_vector<double>(n, Dist::SmallInts, 78);
    for (double f : {1e-4, 1e-3, 1e-2, 5e-2}) {
        expect_select_matches(xf, topk::k_for(f, n), "small ints f32");
        expect_select_matches(xd, topk::k_for(f, n), "small ints f64");
    }
}

// ---------------------------------------------------------------- select: ties and zeros

template <typename W>
void tie_cases()
{
    for (std::size_t n : {std::size_t{10}, std::size_t{1000}, std::size_t{1} << 15, (std::size_t{1} << 17) + 5}) {
        // Equal magnitudes, mixed signs (and signed zeros): lower index wins.
        std::vector<W> same(n), zeros(n);
        for (std::size_t i = 0; i < n; ++i) {
            same[i] = (i * 2654435761u) % 3 == 0 ? W(-2.5) : W(2.5);
            zeros[i] = i % 2 ? W(-0.0) : W(0.0);
        }
        for (std::size_t k : {std::size_t{1}, std::size_t{2}, n / 1000 + 1, n / 100 + 1, n / 20 + 1, n / 2, n}) {
            if (k > n) continue;
            std::vector<std::uint32_t> first(k);
            std::iota(first.begin(), first.end(), 0u);
            topk::SelectInfo info;
            EXPECT_EQ(run_select(same, k, &info), first) << "equal magnitudes n=" << n << " k=" << k;
            // Every element ties with the threshold, so all n are candidates:
            // past the candidate cap (4k) the sampled path must fall back.
            if (info.sampled && 4 * k < n) {
                EXPECT_TRUE(info.fell_back) << "all ties cannot be resolved by a threshold: n=" << n << " k=" << k
                                            << " candidates=" << info.candidates;
            }
            EXPECT_EQ(run_select(zeros, k, &info), first) << "all zeros n=" << n << " k=" << k;
            EXPECT_EQ(run_select_full(same, k), first);
            EXPECT_EQ(run_select_full(zeros, k), first);
        }
    }
}

TEST(TopkSelect, TiesFloat) { tie_cases<float>(); }
TEST(TopkSelect, TiesDouble) { tie_cases<double>(); }

// A small group of values above a sea of ties: the group plus the lowest
// tied indices.
TEST(TopkSelect, GroupAboveTies)
{
    const std::size_t n = std::size_t{1} << 16;
    std::vector<float> x(n, 1.0f);
    x[n - 1] = -4.0f;
    x[n / 2] = 3.0f;
    x[7] = 2.0f;
    const std::vector<std::uint32_t> want = {0, 1, 2, 7, static_cast<std::uint32_t>(n / 2),
                                             static_cast<std::uint32_t>(n - 1)};
    EXPECT_EQ(run_select(x, 6, nullptr), want);
    expect_select_matches(x, 6, "group above ties");
    expect_select_matches(x, 700, "group above ties");
}

// Many elements tied exactly at the estimated threshold, but few enough to
// fit the candidate buffer: the elements equal to the threshold are
// candidates, so the sampled path resolves this without a fallback.
TEST(TopkSelect, TiesAtThresholdDoNotFallBack)
{
    const std::size_t n = std::size_t{1} << 20;
    const std::size_t k = 1000;
    std::mt19937_64 rng(31337);
    std::uniform_real_distribution<double> small(0.0, 0.5);
    std::vector<float> x(n);
    for (auto &v : x) v = static_cast<float>(small(rng));
    // 500 distinct huge values, 5000 copies of 1.0 (about 78 of them in a
    // 16 Ki sample, so the estimated threshold lands on 1.0), spread out.
    std::vector<std::uint32_t> pos(n);
    std::iota(pos.begin(), pos.end(), 0u);
    std::shuffle(pos.begin(), pos.end(), rng);
    for (std::size_t j = 0; j < 500; ++j) x[pos[j]] = static_cast<float>(1000.0 + static_cast<double>(j));
    for (std::size_t j = 500; j < 5500; ++j) x[pos[j]] = (j % 2) ? 1.0f : -1.0f;
    topk::SelectInfo info;
    expect_select_matches(x, k, "ties at the threshold", &info);
    EXPECT_TRUE(info.sampled);
    EXPECT_FALSE(info.fell_back) << "candidates " << info.candidates
                                 << ": elements equal to the threshold must be candidates";
    EXPECT_EQ(info.candidates, 5500u);
}

// ---------------------------------------------------------------- select: adversarial

// The library's sample positions, reproduced from topk_select.cc (a
// deterministic LCG seeded with n), so the test can build data that defeats
// the estimate. If the sampler changes these inputs still must select
// exactly; only the fallback expectation is tied to this sampler.
std::vector<std::size_t> library_sample_positions(std::size_t n)
{
    std::vector<std::size_t> pos(std::size_t{1} << 14);
    std::uint64_t state = 0x9e3779b97f4a7c15ull ^ n;
    for (std::size_t s = 0; s < pos.size(); ++s) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        pos[s] = static_cast<std::size_t>((state >> 33) % n);
    }
    return pos;
}

template <typename W>
void adversarial_cases()
{
    const std::size_t n = (std::size_t{1} << 20) + 11;
    std::mt19937_64 rng(4242);
    std::uniform_real_distribution<double> uni(0.0, 1.0);

    // 1. Huge values packed in one contiguous region (the sample may skip it).
    for (double f : {1e-4, 1e-3, 1e-2}) {
        const std::size_t k = topk::k_for(f, n);
        std::vector<W> x(n);
        for (auto &v : x) v = static_cast<W>(uni(rng));
        const std::size_t start = n / 3 + 17;
        for (std::size_t i = 0; i < k / 2 + 1; ++i) x[start + i] = static_cast<W>(1e6 + static_cast<double>(i));
        expect_select_matches(x, k, "huge values in one region");
    }

    // 2. Sorted ascending and descending data.
    {
        std::vector<W> up(n), down(n);
        for (std::size_t i = 0; i < n; ++i) {
            up[i] = static_cast<W>(i) * W(0.5);
            down[i] = static_cast<W>(n - i) * W(-0.25);
        }
        for (double f : {1e-4, 1e-3, 1e-2, 5e-2}) {
            const std::size_t k = topk::k_for(f, n);
            expect_select_matches(up, k, "sorted ascending");
            expect_select_matches(down, k, "sorted descending (negative)");
        }
    }

    // 3. The sampled positions hold the largest values: the estimated
    //    threshold is far too high, so fewer than k candidates pass it.
    {
        const std::vector<std::size_t> pos = library_sample_positions(n);
        std::vector<W> x(n);
        for (auto &v : x) v = static_cast<W>(uni(rng));
        for (std::size_t s = 0; s < pos.size(); ++s) x[pos[s]] = static_cast<W>(100.0 + static_cast<double>(s % 9973));
        const std::size_t k = topk::k_for(5e-2, n);  // far more than the ~16k sampled positions can hold above
        topk::SelectInfo info;
        expect_select_matches(x, k, "sample hits only large values", &info);
        EXPECT_TRUE(info.sampled);
        EXPECT_TRUE(info.fell_back) << "expected the estimate to miss (candidates " << info.candidates << ", k " << k
                                    << ")";
        const std::size_t k2 = topk::k_for(1e-3, n);
        expect_select_matches(x, k2, "sample hits only large values, small k", &info);
    }

    // 4. The sampled positions hold the smallest values: the threshold is
    //    too low, candidates overflow the cap.
    {
        const std::vector<std::size_t> pos = library_sample_positions(n);
        std::vector<W> x(n);
        for (auto &v : x) v = static_cast<W>(1.0 + uni(rng));
        for (std::size_t p : pos) x[p] = static_cast<W>(1e-3 * uni(rng));
        const std::size_t k = topk::k_for(1e-3, n);
        topk::SelectInfo info;
        expect_select_matches(x, k, "sample hits only small values", &info);
        EXPECT_TRUE(info.sampled);
        EXPECT_TRUE(info.fell_back) << "expected too many candidates (" << info.candidates << ", k " << k << ")";
    }
}

TEST(TopkSelect, AdversarialFloat) { adversarial_cases<float>(); }
TEST(TopkSelect, AdversarialDouble) { adversarial_cases<double>(); }

// ---------------------------------------------------------------- select: non-finite values

template <typename W>
void nonfinite_cases()
{
    const W nan = std::numeric_limits<W>::quiet_NaN();
    const W inf = std::numeric_limits<W>::infinity();
    const W big = std::numeric_limits<W>::max();
    for (std::size_t n : {std::size_t{50}, (std::size_t{1} << 16) + 3}) {
        std::vector<W> x = random_vector<W>(n, Dist::LogNormal, 99 + n);
        x[n - 2] = inf;
        x[3] = -inf;
        x[n / 2] = nan;
        x[n / 3] = -nan;
        x[5] = big;
        x[6] = -big;
        x[n - 1] = inf;
        // NaN (2) first, then infinities (3, n-1, n-2 — lowest index first),
        // then the largest finite values.
        EXPECT_EQ(run_select(x, 1, nullptr), (std::vector<std::uint32_t>{static_cast<std::uint32_t>(n / 3)}));
        {
            std::vector<std::uint32_t> want = {static_cast<std::uint32_t>(n / 3), static_cast<std::uint32_t>(n / 2)};
            std::sort(want.begin(), want.end());
            EXPECT_EQ(run_select(x, 2, nullptr), want);
        }
        {
            std::vector<std::uint32_t> want = {3, static_cast<std::uint32_t>(n / 3), static_cast<std::uint32_t>(n / 2)};
            std::sort(want.begin(), want.end());
            EXPECT_EQ(run_select(x, 3, nullptr), want) << "inf must rank above every finite value";
        }
        {
            std::vector<std::uint32_t> want = {3, 5, 6, static_cast<std::uint32_t>(n / 3),
                                               static_cast<std::uint32_t>(n / 2), static_cast<std::uint32_t>(n - 2),
                                               static_cast<std::uint32_t>(n - 1)};
            std::sort(want.begin(), want.end());
            EXPECT_EQ(run_select(x, 7, nullptr), want) << "+-max must come right after the infinities";
        }
        for (std::size_t k : {std::size_t{1}, std::size_t{4}, std::size_t{8}, n / 100 + 1, n / 20 + 1})
            expect_select_matches(x, k, "with NaN/inf");
    }
}

TEST(TopkSelect, NonFiniteFloat) { nonfinite_cases<float>(); }
TEST(TopkSelect, NonFiniteDouble) { nonfinite_cases<double>(); }

// Scratch memory reused across calls of different sizes gives the same
// results as fresh scratch.
TEST(TopkSelect, ScratchReuse)
{
    topk::SelectScratch scratch;
    std::uint64_t seed = 5;
    for (std::size_t n : {std::size_t{1} << 17, std::size_t{100}, (std::size_t{1} << 15) + 1, std::size_t{1} << 18}) {
        const std::vector<float> x = random_vector<float>(n, Dist::Normal, seed++);
        for (double f : {1e-3, 5e-2}) {
            const std::size_t k = topk::k_for(f, n);
            std::vector<std::uint32_t> idx(k);
            topk::select<float>(x.data(), n, k, idx.data(), &scratch);
            EXPECT_EQ(idx, reference_topk(x, k)) << "n=" << n << " k=" << k;
        }
    }
}

// ---------------------------------------------------------------- k_for

TEST(TopkKFor, CeilAndClamps)
{
    EXPECT_EQ(topk::k_for(0.01, 0), 0u);
    EXPECT_EQ(topk::k_for(1.0, 0), 0u);
    EXPECT_EQ(topk::k_for(0.01, 100), 1u);
    EXPECT_EQ(topk::k_for(0.01, 101), 2u);   // ceil(1.01)
    EXPECT_EQ(topk::k_for(0.01, 199), 2u);   // ceil(1.99)
    EXPECT_EQ(topk::k_for(0.01, 1), 1u);     // ceil(0.01): at least one element
    EXPECT_EQ(topk::k_for(1e-12, 1000), 1u);
    EXPECT_EQ(topk::k_for(0.5, 3), 2u);
    EXPECT_EQ(topk::k_for(0.25, 8), 2u);     // exact product: no rounding up
    EXPECT_EQ(topk::k_for(0.999, 10), 10u);
    EXPECT_EQ(topk::k_for(1.0, 1), 1u);
    EXPECT_EQ(topk::k_for(1.0, 12345), 12345u);
    EXPECT_EQ(topk::k_for(1.0, std::size_t{1} << 31), std::size_t{1} << 31);
    // Out of domain (the API rejects these first; k_for still clamps).
    EXPECT_EQ(topk::k_for(1.5, 10), 10u);
    EXPECT_EQ(topk::k_for(0.0, 10), 0u);
    EXPECT_EQ(topk::k_for(-0.5, 10), 0u);
    EXPECT_EQ(topk::k_for(std::numeric_limits<double>::quiet_NaN(), 10), 0u);
    // The rule itself over a grid.
    for (std::size_t n : {std::size_t{1}, std::size_t{7}, std::size_t{1000}, std::size_t{65537}, std::size_t{1} << 24})
        for (double d : {1e-6, 1e-4, 1e-3, 0.01, 0.05, 0.1, 0.3333, 0.5, 0.9999}) {
            const double want = std::min(static_cast<double>(n), std::ceil(d * static_cast<double>(n)));
            EXPECT_EQ(topk::k_for(d, n), static_cast<std::size_t>(want)) << "d=" << d << " n=" << n;
        }
}

// ---------------------------------------------------------------- payload

const cc_coll_dtype_t kAllDtypes[] = {CC_COLL_F32, CC_COLL_F64, CC_COLL_F16, CC_COLL_BF16};

TEST(TopkPayload, BytesArePaddedToEight)
{
    for (cc_coll_dtype_t d : kAllDtypes) {
        const std::size_t es = dtype_size(d);
        for (std::size_t k = 0; k < 100; ++k) {
            const std::size_t raw = 16 + k * (4 + es);
            const std::size_t b = topk::payload_bytes(k, d);
            EXPECT_EQ(b % 8, 0u) << "k=" << k << " dtype=" << dtype_name(d);
            EXPECT_GE(b, raw);
            EXPECT_LT(b, raw + 8);
        }
    }
    EXPECT_EQ(topk::payload_bytes(0, CC_COLL_F32), 16u);
    EXPECT_EQ(topk::payload_bytes(1, CC_COLL_F32), 24u);
    EXPECT_EQ(topk::payload_bytes(1, CC_COLL_F16), 24u);   // 22 -> 24
    EXPECT_EQ(topk::payload_bytes(3, CC_COLL_F64), 56u);   // 52 -> 56
    EXPECT_EQ(topk::payload_bytes(5, CC_COLL_BF16), 48u);  // 46 -> 48
}

// x[i] as the dtype's bits and back, independently of encode.
template <typename W>
W round_to(W v, cc_coll_dtype_t d)
{
    switch (d) {
    case CC_COLL_F32: return static_cast<W>(static_cast<float>(v));
    case CC_COLL_F64: return v;
    case CC_COLL_F16: return static_cast<W>(f16_to_float(float_to_f16(static_cast<float>(v))));
    case CC_COLL_BF16: return static_cast<W>(bf16_to_float(float_to_bf16(static_cast<float>(v))));
    }
    return v;
}

template <typename W>
void payload_round_trip(cc_coll_dtype_t d)
{
    std::mt19937_64 rng(static_cast<std::uint64_t>(d) + 11);
    std::normal_distribution<double> normal(0.0, 1.0);
    const std::size_t es = dtype_size(d);
    for (std::size_t n : {std::size_t{1}, std::size_t{9}, std::size_t{1000}}) {
        std::vector<W> x(n);
        for (auto &v : x) v = static_cast<W>(normal(rng) * 37.0);
        for (std::size_t k : {std::size_t{0}, std::size_t{1}, n / 3, n}) {
            // Distinct ascending indices.
            std::vector<std::uint32_t> idx(n);
            std::iota(idx.begin(), idx.end(), 0u);
            std::shuffle(idx.begin(), idx.end(), rng);
            idx.resize(k);
            std::sort(idx.begin(), idx.end());

            const std::size_t bytes = topk::payload_bytes(k, d);
            std::vector<unsigned char> payload(bytes + 8, 0xEE);
            std::vector<W> sent(k + 1, W(-777));
            // Flags are written as given (bits 1-4 stay 0: they would name
            // the coded layout, which scatter_add would then read).
            topk::encode<W>(x.data(), n, idx.data(), k, 0x10001u, d, payload.data(), sent.data());
            // Padding is the caller's (the allreduce zeroes it): only check
            // that nothing was written after the payload.
            for (std::size_t b = bytes; b < bytes + 8; ++b) ASSERT_EQ(payload[b], 0xEE) << "written past the payload";
            EXPECT_EQ(sent[k], W(-777)) << "sent written past k";

            const topk::PayloadHeader h = topk::header_of(payload.data());
            EXPECT_EQ(h.n, n);
            EXPECT_EQ(h.k, k);
            EXPECT_EQ(h.flags, 0x10001u);
            // Indices in place, right after the header.
            for (std::size_t j = 0; j < k; ++j) {
                std::uint32_t i;
                std::memcpy(&i, payload.data() + 16 + 4 * j, 4);
                ASSERT_EQ(i, idx[j]);
            }
            // Values rounded to the dtype (nearest even), and `sent` is what
            // was written.
            for (std::size_t j = 0; j < k; ++j) {
                const W want = round_to<W>(x[idx[j]], d);
                ASSERT_EQ(sent[j], want) << dtype_name(d) << " j=" << j;
                ASSERT_EQ(load_element_unaligned<W>(payload.data() + 16 + 4 * k, j, d), want);
            }

            // scatter_add into zeros reproduces the kept values, zero elsewhere.
            std::vector<unsigned char> out(n * es, 0);
            topk::scatter_add(payload.data(), d, out.data());
            std::vector<bool> kept(n, false);
            for (std::uint32_t i : idx) kept[i] = true;
            for (std::size_t i = 0; i < n; ++i) {
                const W got = load_element<W>(out.data(), i, d);
                const W want = kept[i] ? round_to<W>(x[i], d) : W(0);
                ASSERT_EQ(got, want) << dtype_name(d) << " n=" << n << " k=" << k << " i=" << i;
            }
            // A second scatter_add adds in the dtype's arithmetic.
            topk::scatter_add(payload.data(), d, out.data());
            for (std::size_t i = 0; i < n; ++i) {
                const W once = kept[i] ? round_to<W>(x[i], d) : W(0);
                const W want = round_to<W>(once + once, d);
                ASSERT_EQ(load_element<W>(out.data(), i, d), want) << dtype_name(d) << " i=" << i;
            }
        }
    }
}

TEST(TopkPayload, RoundTripF32) { payload_round_trip<float>(CC_COLL_F32); }
TEST(TopkPayload, RoundTripF64) { payload_round_trip<double>(CC_COLL_F64); }
TEST(TopkPayload, RoundTripF16) { payload_round_trip<float>(CC_COLL_F16); }
TEST(TopkPayload, RoundTripBf16) { payload_round_trip<float>(CC_COLL_BF16); }

// Ties to even in encode and in scatter_add, with hand-computed bits.
TEST(TopkPayload, HalfRoundingIsNearestEven)
{
    struct Case {
        cc_coll_dtype_t d;
        float value;           // encoded
        std::uint16_t bits;    // its expected bits
        std::uint16_t start;   // out before scatter_add
        std::uint16_t result;  // out after
    };
    const Case cases[] = {
        // f16: 1 + 2^-11 is halfway between 1 and 1 + 2^-10 -> 1 (even).
        {CC_COLL_F16, 1.0f + 1.0f / 2048, 0x3c00, 0x0000, 0x3c00},
        // f16: 1 + 3*2^-11 -> 1 + 2^-9 (even mantissa 2).
        {CC_COLL_F16, 1.0f + 3.0f / 2048, 0x3c02, 0x0000, 0x3c02},
        // f16 addition: 1 (0x3c00) + 2^-11 (exact in f16) = tie -> 1.
        {CC_COLL_F16, 1.0f / 2048, 0x1000, 0x3c00, 0x3c00},
        // f16 addition: (1 + 2^-10) + 2^-11 = tie -> 1 + 2^-9.
        {CC_COLL_F16, 1.0f / 2048, 0x1000, 0x3c01, 0x3c02},
        // bf16: 1 + 2^-8 -> 1; 1 + 3*2^-8 -> 1 + 2^-6.
        {CC_COLL_BF16, 1.0f + 1.0f / 256, 0x3f80, 0x0000, 0x3f80},
        {CC_COLL_BF16, 1.0f + 3.0f / 256, 0x3f82, 0x0000, 0x3f82},
        // bf16 addition: (1 + 2^-7) + 2^-8 = tie -> 1 + 2^-6.
        {CC_COLL_BF16, 1.0f / 256, 0x3b80, 0x3f81, 0x3f82},
        {CC_COLL_BF16, 1.0f / 256, 0x3b80, 0x3f80, 0x3f80},
    };
    for (const Case &c : cases) {
        const std::uint32_t idx = 1;
        std::vector<float> x = {0.0f, c.value};
        std::vector<unsigned char> payload(topk::payload_bytes(1, c.d));
        float sent = 0;
        topk::encode<float>(x.data(), 2, &idx, 1, 0, c.d, payload.data(), &sent);
        std::uint16_t bits;
        std::memcpy(&bits, payload.data() + 16 + 4, 2);
        EXPECT_EQ(bits, c.bits) << std::hex << "value " << c.value;
        std::uint16_t out[2] = {0x1234, c.start};
        topk::scatter_add(payload.data(), c.d, out);
        EXPECT_EQ(out[0], 0x1234) << "untouched element changed";
        EXPECT_EQ(out[1], c.result) << std::hex << "start 0x" << c.start << " + 0x" << c.bits;
    }
}

// ---------------------------------------------------------------- EfStore

EfKey derived(const void *p, std::size_t count, cc_coll_dtype_t d) { return EfKey::from(false, 0, p, count, d); }
EfKey explicit_key(std::uint64_t k) { return EfKey::from(true, k, nullptr, 0, CC_COLL_F32); }

TEST(EfStore, AcquireCreatesZeroedAccountedResiduals)
{
    EfStore store(0);
    EXPECT_EQ(store.bytes(), 0u);
    EXPECT_EQ(store.max_bytes(), 0u);
    int buf[4] = {};
    std::uint64_t expected = 0;
    const struct {
        cc_coll_dtype_t d;
        std::size_t count;
        std::size_t per;
    } cases[] = {{CC_COLL_F32, 10, 4}, {CC_COLL_F64, 10, 8}, {CC_COLL_F16, 10, 4}, {CC_COLL_BF16, 10, 4},
                 {CC_COLL_F32, 1, 4},  {CC_COLL_F64, 1000, 8}};
    int n = 0;
    for (const auto &c : cases) {
        Residual *r = nullptr;
        ASSERT_EQ(store.acquire(derived(&buf[n % 4], c.count, c.d), c.count, c.d, &r), CC_COLL_OK);
        ++n;
        ASSERT_NE(r, nullptr);
        EXPECT_EQ(r->count, c.count);
        EXPECT_EQ(r->dtype, c.d);
        EXPECT_EQ(r->bytes(), c.count * c.per);
        if (c.d == CC_COLL_F64) {
            ASSERT_EQ(r->f64.size(), c.count);
            EXPECT_TRUE(r->f32.empty());
            for (double v : r->f64) EXPECT_EQ(v, 0.0);
        } else {
            ASSERT_EQ(r->f32.size(), c.count);
            EXPECT_TRUE(r->f64.empty());
            for (float v : r->f32) EXPECT_EQ(v, 0.0f);
        }
        expected += c.count * c.per;
        EXPECT_EQ(store.bytes(), expected) << dtype_name(c.d) << " x" << c.count;
    }
}

TEST(EfStore, SameKeyReturnsSameResidual)
{
    EfStore store(0);
    float a[8] = {}, b[8] = {};
    Residual *r1 = nullptr, *r2 = nullptr, *r3 = nullptr;
    ASSERT_EQ(store.acquire(derived(a, 8, CC_COLL_F32), 8, CC_COLL_F32, &r1), CC_COLL_OK);
    r1->data<float>()[3] = 1.5f;
    ASSERT_EQ(store.acquire(derived(a, 8, CC_COLL_F32), 8, CC_COLL_F32, &r2), CC_COLL_OK);
    EXPECT_EQ(r1, r2);
    EXPECT_EQ(r2->f32[3], 1.5f) << "re-acquiring must not zero the residual";
    EXPECT_EQ(store.bytes(), 32u) << "re-acquiring must not count the bytes again";
    // Another address, or the same address with another count or dtype, is
    // another tensor.
    ASSERT_EQ(store.acquire(derived(b, 8, CC_COLL_F32), 8, CC_COLL_F32, &r3), CC_COLL_OK);
    EXPECT_NE(r3, r1);
    ASSERT_EQ(store.acquire(derived(a, 4, CC_COLL_F32), 4, CC_COLL_F32, &r3), CC_COLL_OK);
    EXPECT_NE(r3, r1);
    ASSERT_EQ(store.acquire(derived(a, 8, CC_COLL_F16), 8, CC_COLL_F16, &r3), CC_COLL_OK);
    EXPECT_NE(r3, r1);
    EXPECT_EQ(store.bytes(), 32u + 32u + 16u + 32u);
    EXPECT_EQ(store.find(derived(a, 8, CC_COLL_F32)), r1);
    EXPECT_EQ(store.find(derived(a, 9, CC_COLL_F32)), nullptr);

    // Derived keys compare address, count and dtype.
    EXPECT_TRUE(derived(a, 8, CC_COLL_F32) == derived(a, 8, CC_COLL_F32));
    EXPECT_FALSE(derived(a, 8, CC_COLL_F32) == derived(a, 4, CC_COLL_F32));
    EXPECT_FALSE(derived(a, 8, CC_COLL_F32) == derived(a, 8, CC_COLL_F16));
    EXPECT_FALSE(derived(a, 8, CC_COLL_F32) == derived(b, 8, CC_COLL_F32));

    // Explicit keys ignore the address; derived and explicit never collide.
    EXPECT_TRUE(EfKey::from(true, 42, a, 8, CC_COLL_F32) == EfKey::from(true, 42, b, 3, CC_COLL_F64));
    EXPECT_FALSE(EfKey::from(true, 42, a, 8, CC_COLL_F32) == EfKey::from(true, 43, a, 8, CC_COLL_F32));
    EXPECT_FALSE(EfKey::from(true, 0, nullptr, 0, CC_COLL_F32) == EfKey::from(false, 0, nullptr, 0, CC_COLL_F32));
    Residual *e1 = nullptr, *e2 = nullptr;
    ASSERT_EQ(store.acquire(EfKey::from(true, 42, a, 8, CC_COLL_F32), 8, CC_COLL_F32, &e1), CC_COLL_OK);
    ASSERT_EQ(store.acquire(EfKey::from(true, 42, b, 8, CC_COLL_F32), 8, CC_COLL_F32, &e2), CC_COLL_OK);
    EXPECT_EQ(e1, e2) << "two buffers with the same ef_key must share one residual";
    EXPECT_NE(e1, r1);
}

TEST(EfStore, ExplicitKeyWithAnotherShapeIsMismatch)
{
    EfStore store(0);
    Residual *r = nullptr;
    ASSERT_EQ(store.acquire(explicit_key(7), 100, CC_COLL_F32, &r), CC_COLL_OK);
    r->f32[0] = 3.0f;
    Residual *other = reinterpret_cast<Residual *>(0x1);
    clear_error();
    EXPECT_EQ(store.acquire(explicit_key(7), 101, CC_COLL_F32, &other), CC_COLL_ERR_MISMATCH);
    EXPECT_NE(std::string(last_error()).find("7"), std::string::npos) << last_error();
    EXPECT_EQ(other, reinterpret_cast<Residual *>(0x1)) << "out must not be set on failure";
    EXPECT_EQ(store.acquire(explicit_key(7), 100, CC_COLL_F64, &other), CC_COLL_ERR_MISMATCH);
    EXPECT_EQ(store.acquire(explicit_key(7), 100, CC_COLL_F16, &other), CC_COLL_ERR_MISMATCH);
    EXPECT_EQ(store.bytes(), 400u);
    // The original residual is intact and still usable.
    ASSERT_EQ(store.acquire(explicit_key(7), 100, CC_COLL_F32, &other), CC_COLL_OK);
    EXPECT_EQ(other, r);
    EXPECT_EQ(other->f32[0], 3.0f);
    // After a reset the key may take another shape.
    store.reset(explicit_key(7));
    EXPECT_EQ(store.bytes(), 0u);
    ASSERT_EQ(store.acquire(explicit_key(7), 50, CC_COLL_F64, &other), CC_COLL_OK);
    EXPECT_EQ(store.bytes(), 400u);
}

TEST(EfStore, CapRefusesNewResidualsAndEvictsNothing)
{
    EfStore store(100);
    EXPECT_EQ(store.max_bytes(), 100u);
    Residual *a = nullptr, *b = nullptr, *c = nullptr;
    ASSERT_EQ(store.acquire(explicit_key(1), 10, CC_COLL_F32, &a), CC_COLL_OK);  // 40
    a->f32[9] = -2.0f;
    ASSERT_EQ(store.acquire(explicit_key(2), 5, CC_COLL_F64, &b), CC_COLL_OK);   // 80
    b->f64[4] = 9.0;
    clear_error();
    EXPECT_EQ(store.acquire(explicit_key(3), 6, CC_COLL_F32, &c), CC_COLL_ERR_EF_LIMIT);  // 104 > 100
    const std::string msg = last_error();
    EXPECT_NE(msg.find("CC_COLL_EF_MAX_BYTES"), std::string::npos) << msg;
    EXPECT_NE(msg.find("100"), std::string::npos) << "the message should give the cap: " << msg;
    EXPECT_EQ(c, nullptr);
    EXPECT_EQ(store.bytes(), 80u);
    EXPECT_EQ(store.find(explicit_key(3)), nullptr);
    // Nothing evicted: both residuals still there with their values.
    ASSERT_NE(store.find(explicit_key(1)), nullptr);
    ASSERT_NE(store.find(explicit_key(2)), nullptr);
    EXPECT_EQ(store.find(explicit_key(1))->f32[9], -2.0f);
    EXPECT_EQ(store.find(explicit_key(2))->f64[4], 9.0);
    // Existing residuals are still handed out at the cap.
    Residual *again = nullptr;
    ASSERT_EQ(store.acquire(explicit_key(1), 10, CC_COLL_F32, &again), CC_COLL_OK);
    EXPECT_EQ(again, a);
    // Exactly reaching the cap is allowed.
    ASSERT_EQ(store.acquire(explicit_key(4), 5, CC_COLL_F16, &c), CC_COLL_OK);  // 100
    EXPECT_EQ(store.bytes(), 100u);
    EXPECT_EQ(store.acquire(explicit_key(5), 1, CC_COLL_BF16, &c), CC_COLL_ERR_EF_LIMIT);
    // Freed bytes can be reused.
    store.reset(explicit_key(2));
    EXPECT_EQ(store.bytes(), 60u);
    ASSERT_EQ(store.acquire(explicit_key(5), 10, CC_COLL_BF16, &c), CC_COLL_OK);
    EXPECT_EQ(store.bytes(), 100u);
}

TEST(EfStore, ResetAndResetAllFreeBytes)
{
    EfStore store(0);
    float buf[2] = {};
    Residual *r = nullptr;
    ASSERT_EQ(store.acquire(derived(buf, 1000, CC_COLL_F32), 1000, CC_COLL_F32, &r), CC_COLL_OK);
    r->f32[0] = 5.0f;
    ASSERT_EQ(store.acquire(derived(buf + 1, 300, CC_COLL_F64), 300, CC_COLL_F64, &r), CC_COLL_OK);
    ASSERT_EQ(store.acquire(explicit_key(9), 7, CC_COLL_BF16, &r), CC_COLL_OK);
    EXPECT_EQ(store.bytes(), 4000u + 2400u + 28u);
    store.reset(derived(buf, 999, CC_COLL_F32));  // no such residual: nothing happens
    EXPECT_EQ(store.bytes(), 6428u);
    store.reset(derived(buf, 1000, CC_COLL_F32));
    EXPECT_EQ(store.bytes(), 2428u);
    EXPECT_EQ(store.find(derived(buf, 1000, CC_COLL_F32)), nullptr);
    // Re-created zeroed.
    ASSERT_EQ(store.acquire(derived(buf, 1000, CC_COLL_F32), 1000, CC_COLL_F32, &r), CC_COLL_OK);
    EXPECT_EQ(r->f32[0], 0.0f);
    EXPECT_EQ(store.bytes(), 6428u);
    store.reset(explicit_key(9));
    EXPECT_EQ(store.bytes(), 6400u);
    store.reset_all();
    EXPECT_EQ(store.bytes(), 0u);
    EXPECT_EQ(store.find(derived(buf + 1, 300, CC_COLL_F64)), nullptr);
    EXPECT_EQ(store.find(derived(buf, 1000, CC_COLL_F32)), nullptr);
    // A capped store is usable again after reset_all.
    EfStore capped(64);
    ASSERT_EQ(capped.acquire(explicit_key(1), 16, CC_COLL_F32, &r), CC_COLL_OK);
    EXPECT_EQ(capped.acquire(explicit_key(2), 1, CC_COLL_F32, &r), CC_COLL_ERR_EF_LIMIT);
    capped.reset_all();
    EXPECT_EQ(capped.acquire(explicit_key(2), 16, CC_COLL_F32, &r), CC_COLL_OK);
}

// ---------------------------------------------------------------- resolve_params

cc_coll_params_t topk_params()
{
    cc_coll_params_t p;
    std::memset(&p, 0, sizeof p);
    p.mask = CC_COLL_PARAMS_FIELD_METHOD;
    p.method = CC_COLL_METHOD_TOPK;
    return p;
}

TEST(TopkParams, BadDensityIsInvalidArg)
{
    const Config cfg;
    const double bad[] = {0.0, -0.0, -1.0, -1e-300, 1.0000001, 1.5, 2.0,
                          std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
                          -std::numeric_limits<double>::infinity()};
    for (double d : bad) {
        cc_coll_params_t p = topk_params();
        p.mask |= CC_COLL_PARAMS_FIELD_DENSITY;
        p.density = d;
        CallParams out;
        out.density = 0.123;
        clear_error();
        EXPECT_EQ(resolve_params(&p, cfg, &out), CC_COLL_ERR_INVALID_ARG) << "density " << d;
        EXPECT_NE(std::string(last_error()).find("density"), std::string::npos) << last_error();
        EXPECT_EQ(out.density, 0.123) << "out must not change on failure";
    }
    // Without the DENSITY bit the field is ignored.
    cc_coll_params_t p = topk_params();
    p.density = std::numeric_limits<double>::quiet_NaN();
    CallParams out;
    ASSERT_EQ(resolve_params(&p, cfg, &out), CC_COLL_OK);
    EXPECT_EQ(out.density, cfg.density);
    EXPECT_EQ(out.method, CC_COLL_METHOD_TOPK);
}

TEST(TopkParams, GoodDensityEfAndKeyAreTaken)
{
    Config cfg;
    cfg.density = 0.25;
    cfg.ef = true;
    for (double d : {1.0, 0.5, 1e-300, std::numeric_limits<double>::min(), 0.9999999999}) {
        cc_coll_params_t p = topk_params();
        p.mask |= CC_COLL_PARAMS_FIELD_DENSITY;
        p.density = d;
        CallParams out;
        ASSERT_EQ(resolve_params(&p, cfg, &out), CC_COLL_OK) << d;
        EXPECT_EQ(out.density, d);
    }
    CallParams out;
    ASSERT_EQ(resolve_params(nullptr, cfg, &out), CC_COLL_OK);
    EXPECT_EQ(out.density, 0.25) << "NULL params take the configuration";
    EXPECT_TRUE(out.ef);
    EXPECT_FALSE(out.has_ef_key);

    cc_coll_params_t p = topk_params();
    p.mask |= CC_COLL_PARAMS_FIELD_EF | CC_COLL_PARAMS_FIELD_EF_KEY;
    p.ef = 0;
    p.ef_key = 0xfeedfacecafebeefull;
    ASSERT_EQ(resolve_params(&p, cfg, &out), CC_COLL_OK);
    EXPECT_FALSE(out.ef);
    EXPECT_TRUE(out.has_ef_key);
    EXPECT_EQ(out.ef_key, 0xfeedfacecafebeefull);
    EXPECT_EQ(out.density, 0.25);

    cfg.ef = false;
    p.ef = 1;
    ASSERT_EQ(resolve_params(&p, cfg, &out), CC_COLL_OK);
    EXPECT_TRUE(out.ef) << "params EF = 1 overrides a configuration with EF off";

    // EF_KEY 0 is a key like any other.
    p.mask = CC_COLL_PARAMS_FIELD_EF_KEY;
    p.ef_key = 0;
    ASSERT_EQ(resolve_params(&p, cfg, &out), CC_COLL_OK);
    EXPECT_TRUE(out.has_ef_key);
    EXPECT_EQ(out.ef_key, 0u);
}

TEST(TopkParams, BadEfIsInvalidArg)
{
    const Config cfg;
    for (int ef : {2, -1, 100}) {
        cc_coll_params_t p = topk_params();
        p.mask |= CC_COLL_PARAMS_FIELD_EF;
        p.ef = ef;
        CallParams out;
        clear_error();
        EXPECT_EQ(resolve_params(&p, cfg, &out), CC_COLL_ERR_INVALID_ARG) << "ef " << ef;
        EXPECT_NE(std::string(last_error()).find("ef"), std::string::npos) << last_error();
    }
}

// ---------------------------------------------------------------- settings

using cc_coll::test::MapEnv;

TEST(TopkConfig, DefaultsAndGoodValues)
{
    MapEnv env;
    Config cfg;
    std::string why;
    ASSERT_EQ(load_config(env.lookup(), &cfg, &why), CC_COLL_OK) << why;
    EXPECT_EQ(cfg.density, 0.01);
    EXPECT_TRUE(cfg.ef);
    EXPECT_EQ(cfg.ef_max_bytes, 0u);

    const struct {
        const char *density;
        double want;
    } densities[] = {{"0.25", 0.25}, {"1", 1.0}, {" 1.0 ", 1.0}, {"1e-3", 1e-3}, {"0.5\n", 0.5}};
    for (const auto &c : densities) {
        env.vars = {{"CC_COLL_DENSITY", c.density}};
        ASSERT_EQ(load_config(env.lookup(), &cfg, &why), CC_COLL_OK) << c.density << ": " << why;
        EXPECT_EQ(cfg.density, c.want) << c.density;
    }
    const struct {
        const char *text;
        bool want;
    } efs[] = {{"0", false}, {"off", false}, {"no", false}, {"false", false}, {"FALSE", false},
               {"1", true},  {"on", true},   {"yes", true}, {"true", true},   {" On ", true}};
    for (const auto &c : efs) {
        env.vars = {{"CC_COLL_EF", c.text}};
        ASSERT_EQ(load_config(env.lookup(), &cfg, &why), CC_COLL_OK) << c.text << ": " << why;
        EXPECT_EQ(cfg.ef, c.want) << c.text;
    }
    const struct {
        const char *text;
        std::uint64_t want;
    } caps[] = {{"0", 0}, {"4096", 4096}, {"1K", 1024}, {"512M", 512ull << 20}, {"2G", 2ull << 30}, {"64KiB", 65536}};
    for (const auto &c : caps) {
        env.vars = {{"CC_COLL_EF_MAX_BYTES", c.text}};
        ASSERT_EQ(load_config(env.lookup(), &cfg, &why), CC_COLL_OK) << c.text << ": " << why;
        EXPECT_EQ(cfg.ef_max_bytes, c.want) << c.text;
    }
    // All together, with the method.
    env.vars = {{"CC_COLL_METHOD", "topk"},
                {"CC_COLL_DENSITY", "0.125"},
                {"CC_COLL_EF", "0"},
                {"CC_COLL_EF_MAX_BYTES", "3M"}};
    ASSERT_EQ(load_config(env.lookup(), &cfg, &why), CC_COLL_OK) << why;
    EXPECT_EQ(cfg.method, CC_COLL_METHOD_TOPK);
    EXPECT_EQ(cfg.density, 0.125);
    EXPECT_FALSE(cfg.ef);
    EXPECT_EQ(cfg.ef_max_bytes, 3ull << 20);
    // ... and resolve_params takes them when params do not override.
    CallParams p;
    ASSERT_EQ(resolve_params(nullptr, cfg, &p), CC_COLL_OK);
    EXPECT_EQ(p.method, CC_COLL_METHOD_TOPK);
    EXPECT_EQ(p.density, 0.125);
    EXPECT_FALSE(p.ef);
}

// CC_COLL_TOPK_VALUE_BITS and CC_COLL_TOPK_INDEX_CODING write TOPK's word of
// options; the default word 0 is the uncoded payload.
TEST(TopkConfig, PayloadFormatSettings)
{
    const struct {
        const char *bits, *coding;
        unsigned value_bits;
        bool coded;
    } cases[] = {{"full", "auto", 0, false}, {"full", "delta", 0, true}, {"16", "auto", 16, true},
                 {" 8 ", "auto", 8, true},   {"4", "DELTA", 4, true}};
    for (const auto &c : cases) {
        MapEnv env;
        env.vars = {{"CC_COLL_TOPK_VALUE_BITS", c.bits}, {"CC_COLL_TOPK_INDEX_CODING", c.coding}};
        Config cfg;
        std::string why;
        ASSERT_EQ(load_config(env.lookup(), &cfg, &why), CC_COLL_OK) << c.bits << "/" << c.coding << ": " << why;
        CallParams p;
        p.method_options[CC_COLL_METHOD_TOPK] = cfg.method_options[CC_COLL_METHOD_TOPK];
        const topk::Format f = topk_format(p);
        EXPECT_EQ(f.value_bits, c.value_bits) << c.bits;
        EXPECT_EQ(f.coded, c.coded) << c.bits << "/" << c.coding;
    }
    MapEnv env;
    Config cfg;
    std::string why;
    ASSERT_EQ(load_config(env.lookup(), &cfg, &why), CC_COLL_OK) << why;
    EXPECT_EQ(cfg.method_options[CC_COLL_METHOD_TOPK], 0u);
    for (const char *bad : {"32", "2", "", "half"}) {
        env.vars = {{"CC_COLL_TOPK_VALUE_BITS", bad}};
        EXPECT_EQ(load_config(env.lookup(), &cfg, &why), CC_COLL_ERR_CONFIG) << bad;
        EXPECT_NE(why.find("CC_COLL_TOPK_VALUE_BITS"), std::string::npos) << why;
    }
    env.vars = {{"CC_COLL_TOPK_INDEX_CODING", "rice"}};
    EXPECT_EQ(load_config(env.lookup(), &cfg, &why), CC_COLL_ERR_CONFIG);
    EXPECT_NE(why.find("CC_COLL_TOPK_INDEX_CODING"), std::string::npos) << why;
}

// AUTO's cost model predicts the coded payload's bytes: against a payload
// the encoder writes for top-k-like indices (uniformly spread) at density
// 0.05 of 200000 elements, within 10%, for every value width.
TEST(TopkCost, CodedPayloadBytesMatchTheEncoder)
{
    const Method *m = find_method(CC_COLL_METHOD_TOPK);
    ASSERT_NE(m, nullptr);
    const std::size_t n = 200000;
    const double density = 0.05;
    const std::size_t k = topk::k_for(density, n);
    std::mt19937 rng(7);
    std::vector<std::uint32_t> all(n);
    std::iota(all.begin(), all.end(), 0u);
    std::shuffle(all.begin(), all.end(), rng);
    std::vector<std::uint32_t> idx(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(k));
    std::sort(idx.begin(), idx.end());
    std::vector<float> x(n);
    std::normal_distribution<float> normal;
    for (auto &v : x) v = normal(rng);
    for (unsigned bits : {0u, 16u, 8u, 4u}) {
        CallParams p;
        p.density = density;
        p.method_options[CC_COLL_METHOD_TOPK] = bits | (bits == 0 ? kTopkOptionDelta : 0u);
        const topk::Format fmt = topk_format(p);
        std::vector<unsigned char> payload(topk::coded_capacity(k, CC_COLL_F32, fmt), 0);
        std::vector<float> sent(k);
        const std::size_t bytes =
            topk::encode_coded<float>(x.data(), n, idx.data(), k, 0, CC_COLL_F32, fmt, payload.data(), sent.data());
        CostTensor t;
        t.count = n;
        t.dtype = CC_COLL_F32;
        ExchangeCost cost;
        const int ranks = 4;
        ASSERT_TRUE(m->exchange_cost(t, p, ranks, &cost));
        const double predicted = cost.bytes[0] * 2.0 / ranks;  // an allgather of P payloads as an allreduce
        EXPECT_NEAR(predicted, static_cast<double>(bytes), 0.1 * static_cast<double>(bytes)) << bits;
        EXPECT_GE(cost.latencies, 1.0);
        // The uncoded payload, for comparison: the default word.
        if (bits == 4) {
            EXPECT_GT(static_cast<double>(topk::payload_bytes(k, CC_COLL_F32)), 6.0 * bytes);
        }
    }
}

TEST(TopkConfig, BadValuesAreConfigErrorsNamingTheVariable)
{
    const struct {
        const char *var;
        const char *text;
    } bad[] = {
        {"CC_COLL_DENSITY", "0"},      {"CC_COLL_DENSITY", "-0.1"}, {"CC_COLL_DENSITY", "1.5"},
        {"CC_COLL_DENSITY", "nan"},    {"CC_COLL_DENSITY", "inf"},  {"CC_COLL_DENSITY", "abc"},
        {"CC_COLL_DENSITY", ""},       {"CC_COLL_DENSITY", "0.1x"}, {"CC_COLL_EF", "2"},
        {"CC_COLL_EF", "maybe"},       {"CC_COLL_EF", ""},          {"CC_COLL_EF_MAX_BYTES", "-1"},
        {"CC_COLL_EF_MAX_BYTES", "x"}, {"CC_COLL_EF_MAX_BYTES", "1.5G"}, {"CC_COLL_EF_MAX_BYTES", "12Q"},
    };
    for (const auto &c : bad) {
        MapEnv env;
        env.vars = {{c.var, c.text}};
        Config cfg;
        cfg.density = 0.77;
        std::string why;
        EXPECT_EQ(load_config(env.lookup(), &cfg, &why), CC_COLL_ERR_CONFIG) << c.var << "=" << c.text;
        EXPECT_NE(why.find(c.var), std::string::npos) << why;
        EXPECT_EQ(cfg.density, 0.77) << "cfg must not change on failure";
    }
}

}  // namespace
}  // namespace cc_coll::detail
