#include "compressors/topk/topk_select.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "compressors/topk/topk_keys.hpp"

namespace cc_coll::detail {
namespace topk {

namespace {

// The magnitude order as an unsigned integer (keys::MagnitudeKey, shared
// with the device select): the IEEE bits with the sign cleared order
// non-negative values correctly, and NaN patterns sit above the infinity
// pattern. Packed = magnitude << 32 | ~index is then unique per
// element and orders exactly like (magnitude desc... index asc) reversed:
// a larger packed value is a larger magnitude, or the same magnitude at a
// lower index. Selecting on packed values never touches x again.
template <typename W>
struct Key;

template <>
struct Key<float> {
    using U = std::uint32_t;
    using Packed = std::uint64_t;
    static U of(float v) { return keys::MagnitudeKey<float>::of(v); }
    static std::vector<Packed> &packed(SelectScratch *s) { return s->packed64; }
};

template <>
struct Key<double> {
    using U = std::uint64_t;
    using Packed = uint128_t;
    static U of(double v) { return keys::MagnitudeKey<double>::of(v); }
    static std::vector<Packed> &packed(SelectScratch *s) { return s->packed128; }
};

template <typename W>
typename Key<W>::Packed pack(const W *x, std::uint32_t i)
{
    using P = typename Key<W>::Packed;
    return (static_cast<P>(Key<W>::of(x[i])) << 32) | static_cast<P>(~i);
}

// Below these sizes sampling does not pay; select over everything.
constexpr std::size_t kMinSampledN = 1u << 15;
constexpr std::size_t kSampleSize = 1u << 14;
constexpr std::size_t kBlock = 4096;

// Top k of the elements at `pos[0..m)` (ascending indices) into idx,
// ascending: find the k-th largest packed value, then keep, in index order,
// the elements at or above it (exactly k, packed values being unique).
template <typename W>
void select_among(const W *x, const std::uint32_t *pos, std::size_t m, std::size_t k, std::uint32_t *idx,
                  SelectScratch *scratch)
{
    using P = typename Key<W>::Packed;
    std::vector<P> &packed = Key<W>::packed(scratch);
    packed.resize(m);
    for (std::size_t j = 0; j < m; ++j) packed[j] = pack(x, pos[j]);
    std::nth_element(packed.begin(), packed.begin() + (k - 1), packed.end(), std::greater<P>());
    const P boundary = packed[k - 1];
    std::size_t out = 0;
    for (std::size_t j = 0; j < m && out < k; ++j)
        if (pack(x, pos[j]) >= boundary) idx[out++] = pos[j];
}

}  // namespace

std::size_t k_for(double density, std::size_t n)
{
    if (n == 0 || !(density > 0.0)) return 0;
    if (density >= 1.0) return n;
    const double k = std::ceil(density * static_cast<double>(n));
    return k >= static_cast<double>(n) ? n : static_cast<std::size_t>(k);
}

template <typename W>
void select_full(const W *x, std::size_t n, std::size_t k, std::uint32_t *idx, SelectScratch *scratch)
{
    if (k == 0) return;
    if (k >= n) {
        std::iota(idx, idx + n, 0u);
        return;
    }
    std::vector<std::uint32_t> &all = scratch->candidates;
    all.resize(n);
    std::iota(all.begin(), all.end(), 0u);
    select_among(x, all.data(), n, k, idx, scratch);
}

template <typename W>
void select(const W *x, std::size_t n, std::size_t k, std::uint32_t *idx, SelectScratch *scratch, SelectInfo *info)
{
    using U = typename Key<W>::U;
    SelectInfo local;
    SelectInfo &inf = info ? *info : local;
    inf = SelectInfo{};
    if (k == 0) return;
    if (n < kMinSampledN || k >= n) {
        select_full(x, n, k, idx, scratch);
        return;
    }
    inf.sampled = true;

    // 1. Sample magnitudes at deterministic pseudo-random positions.
    std::vector<std::uint64_t> &sample = scratch->sample;
    sample.resize(kSampleSize);
    std::uint64_t state = 0x9e3779b97f4a7c15ull ^ n;
    for (std::size_t s = 0; s < kSampleSize; ++s) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        sample[s] = Key<W>::of(x[(state >> 33) % n]);
    }
    // 2. Threshold: the sample order statistic that leaves ~1.25 k expected
    //    candidates plus three standard deviations of margin.
    const double expected = static_cast<double>(k) * kSampleSize / static_cast<double>(n);
    const std::size_t rank = static_cast<std::size_t>(std::ceil(1.25 * expected + 3.0 * std::sqrt(expected) + 1.0));
    if (rank >= kSampleSize) {
        select_full(x, n, k, idx, scratch);
        inf.fell_back = true;
        return;
    }
    std::nth_element(sample.begin(), sample.begin() + rank, sample.end(), std::greater<std::uint64_t>());
    const U threshold = static_cast<U>(sample[rank]);

    // 3. One pass collecting candidates, branch-free inside a block; give up
    //    when there are far more than expected (heavy ties at the threshold).
    const std::size_t cap = std::max<std::size_t>(4 * k, k + 2 * kBlock);
    std::vector<std::uint32_t> &cand = scratch->candidates;
    cand.resize(cap + kBlock);
    std::uint32_t *c = cand.data();
    std::size_t count = 0;
    for (std::size_t b = 0; b < n; b += kBlock) {
        const std::size_t e = std::min(n, b + kBlock);
        for (std::size_t i = b; i < e; ++i) {
            c[count] = static_cast<std::uint32_t>(i);
            count += Key<W>::of(x[i]) >= threshold ? 1 : 0;
        }
        if (count > cap) break;
    }
    inf.candidates = count;
    // 4. Exact selection among the candidates: every element outside them
    //    has a smaller key than every candidate, so the top k are in here.
    if (count < k || count > cap) {
        inf.fell_back = true;
        select_full(x, n, k, idx, scratch);
        return;
    }
    select_among(x, c, count, k, idx, scratch);
}

template void select<float>(const float *, std::size_t, std::size_t, std::uint32_t *, SelectScratch *, SelectInfo *);
template void select<double>(const double *, std::size_t, std::size_t, std::uint32_t *, SelectScratch *,
                             SelectInfo *);
template void select_full<float>(const float *, std::size_t, std::size_t, std::uint32_t *, SelectScratch *);
template void select_full<double>(const double *, std::size_t, std::size_t, std::uint32_t *, SelectScratch *);

}  // namespace topk
}  // namespace cc_coll::detail
