#include "compressors/topk/topk_select.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <type_traits>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "compressors/topk/topk_keys.hpp"
#include "core/dtype.hpp"
#include "core/parallel.hpp"

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
    static std::vector<U> &keys(SelectScratch *s) { return s->keys32; }
    static std::vector<std::vector<U>> &part_keys(SelectScratch *s) { return s->part_keys32; }
};

template <>
struct Key<double> {
    using U = std::uint64_t;
    using Packed = uint128_t;
    static U of(double v) { return keys::MagnitudeKey<double>::of(v); }
    static std::vector<Packed> &packed(SelectScratch *s) { return s->packed128; }
    static std::vector<U> &keys(SelectScratch *s) { return s->keys64; }
    static std::vector<std::vector<U>> &part_keys(SelectScratch *s) { return s->part_keys64; }
};

// Below these sizes sampling does not pay; select over everything.
constexpr std::size_t kMinSampledN = 1u << 15;
constexpr std::size_t kSampleSize = 1u << 14;  // from 256Ki elements on; n / 16 below
constexpr std::size_t kBlock = 4096;

}  // namespace

std::size_t k_for(double density, std::size_t n)
{
    if (n == 0 || !(density > 0.0)) return 0;
    if (density >= 1.0) return n;
    const double k = std::ceil(density * static_cast<double>(n));
    return k >= static_cast<double>(n) ? n : static_cast<std::size_t>(k);
}

namespace {

#if defined(__x86_64__) && defined(__GNUC__)
// 16 keys per instruction: compare, compress the hits' indices and keys to
// the front of a register, store all 16 lanes (the buffers have a block of
// slack), advance by the hit count. No branch depends on the data.
__attribute__((target("avx512f"))) std::size_t scan_f32_avx512(const float *x, std::size_t i, std::size_t e,
                                                                std::uint32_t threshold, std::uint32_t *c,
                                                                std::uint32_t *keys, std::size_t *count)
{
    const __m512i magnitude = _mm512_set1_epi32(0x7fffffff);
    const __m512i limit = _mm512_set1_epi32(static_cast<int>(threshold));
    const __m512i lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    std::size_t n = *count;
    for (; i + 16 <= e; i += 16) {
        const __m512i key = _mm512_and_si512(_mm512_loadu_si512(x + i), magnitude);
        const __mmask16 hit = _mm512_cmpge_epu32_mask(key, limit);
        const __m512i index = _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(i)), lanes);
        _mm512_storeu_si512(c + n, _mm512_maskz_compress_epi32(hit, index));
        _mm512_storeu_si512(keys + n, _mm512_maskz_compress_epi32(hit, key));
        n += static_cast<std::size_t>(__builtin_popcount(hit));
    }
    *count = n;
    return i;
}

bool have_avx512()
{
    static const bool yes = __builtin_cpu_supports("avx512f");
    return yes;
}
#endif

// The fp32 candidate scan from i up to (about) e, vectorised where the CPU
// allows; returns where the caller's scalar loop continues.
std::size_t scan_f32(const float *x, std::size_t i, std::size_t e, std::uint32_t threshold, std::uint32_t *c,
                     std::uint32_t *keys, std::size_t *count)
{
#if defined(__x86_64__) && defined(__GNUC__)
    if (have_avx512()) return scan_f32_avx512(x, i, e, threshold, c, keys, count);
#endif
#if defined(__SSE2__)
    // 16 keys per step: compare as signed 32-bit integers (keys are below
    // 2^31), a 16-bit mask of the hits, then one store per hit.
    const __m128i magnitude = _mm_set1_epi32(0x7fffffff);
    const __m128i below = _mm_set1_epi32(static_cast<int>(threshold) - 1);
    std::size_t n = *count;
    for (; i + 16 <= e; i += 16) {
        const __m128i *v = reinterpret_cast<const __m128i *>(x + i);
        unsigned bits = 0;
        for (int q = 0; q < 4; ++q) {
            const __m128i key = _mm_and_si128(_mm_loadu_si128(v + q), magnitude);
            bits |= static_cast<unsigned>(_mm_movemask_ps(_mm_castsi128_ps(_mm_cmpgt_epi32(key, below)))) << (4 * q);
        }
        while (bits != 0) {
            const std::size_t j = i + static_cast<std::size_t>(__builtin_ctz(bits));
            c[n] = static_cast<std::uint32_t>(j);
            keys[n] = Key<float>::of(x[j]);
            ++n;
            bits &= bits - 1;
        }
    }
    *count = n;
#else
    (void)x, (void)e, (void)threshold, (void)c, (void)keys, (void)count;
#endif
    return i;
}

// The candidate pass over x[b, e): the indices whose key is at or above
// `threshold`, ascending, into c and their keys into keys (each with room
// for cap + kBlock); stops after the block where more than cap were found.
// Returns the count.
//
// prepare(bb, ee) runs on each block before it is read (load_select writes
// the block of x there, so that the pass reads it from the cache), also
// after the collection gave up.
template <typename W, typename Prepare>
std::size_t collect_candidates(const W *x, std::size_t b, std::size_t e, typename Key<W>::U threshold,
                               std::size_t cap, std::uint32_t *c, typename Key<W>::U *keys, Prepare &prepare)
{
    std::size_t count = 0;
    for (std::size_t bb = b; bb < e; bb += kBlock) {
        const std::size_t ee = std::min(e, bb + kBlock);
        prepare(bb, ee);
        if (count > cap) continue;
        std::size_t i = bb;
        if constexpr (std::is_same_v<W, float>) i = scan_f32(x, i, ee, threshold, c, keys, &count);
        for (; i < ee; ++i) {
            const typename Key<W>::U key = Key<W>::of(x[i]);
            c[count] = static_cast<std::uint32_t>(i);
            keys[count] = key;
            count += key >= threshold ? 1 : 0;
        }
    }
    return count;
}

// Top k of the m candidates (indices c, keys keys; ascending indices) into
// idx, ascending, as select_among does, without reading x again and without
// a selection over all m: a histogram of the keys' top bits finds the
// bucket that holds the k-th largest, an nth_element among that bucket's
// packed values finds the k-th itself, and one pass keeps those at or above
// it (exactly k, packed values being unique).
template <typename W>
void select_among_keys(const std::uint32_t *c, const typename Key<W>::U *keys, std::size_t m, std::size_t k,
                       std::uint32_t *idx, SelectScratch *scratch)
{
    using U = typename Key<W>::U;
    using P = typename Key<W>::Packed;
    // Buckets: about one per candidate, 2^8 to 2^16 of them (the choice
    // changes the time, never the result).
    int bucket_bits = 8;
    while (bucket_bits < 16 && (std::size_t{1} << (bucket_bits + 1)) <= m) ++bucket_bits;
    const int kShift = static_cast<int>(sizeof(U) * 8) - 1 - bucket_bits;  // keys have one bit clear on top
    std::vector<std::uint32_t> &hist = scratch->histogram;
    hist.assign(std::size_t{1} << bucket_bits, 0);
    for (std::size_t j = 0; j < m; ++j) ++hist[static_cast<std::size_t>(keys[j] >> kShift)];
    std::size_t bucket = hist.size(), above = 0;
    while (bucket > 0 && above + hist[bucket - 1] < k) above += hist[--bucket];
    --bucket;  // holds the k-th largest: (k - above)-th largest within it
    std::vector<P> &packed = Key<W>::packed(scratch);
    packed.clear();
    for (std::size_t j = 0; j < m; ++j)
        if (static_cast<std::size_t>(keys[j] >> kShift) == bucket)
            packed.push_back((static_cast<P>(keys[j]) << 32) | static_cast<P>(~c[j]));
    const std::size_t r = k - above;
    std::nth_element(packed.begin(), packed.begin() + static_cast<std::ptrdiff_t>(r - 1), packed.end(),
                     std::greater<P>());
    const P boundary = packed[r - 1];
    std::size_t out = 0;
    for (std::size_t j = 0; j < m && out < k; ++j)
        if (((static_cast<P>(keys[j]) << 32) | static_cast<P>(~c[j])) >= boundary) idx[out++] = c[j];
}

// select, with x written block by block by prepare(b, e) during the pass
// (prepare_all(): all of it, where there is no pass) and the sample read
// through value_at(i), the value x[i] will hold.
template <typename W, typename Prepare, typename PrepareAll, typename ValueAt>
void select_impl(W *x, std::size_t n, std::size_t k, std::uint32_t *idx, SelectScratch *scratch, SelectInfo *info,
                 int threads, Prepare &&prepare, PrepareAll &&prepare_all, ValueAt &&value_at)
{
    using U = typename Key<W>::U;
    SelectInfo local;
    SelectInfo &inf = info ? *info : local;
    inf = SelectInfo{};
    if (k == 0 || n < kMinSampledN || k >= n) {
        prepare_all();
        if (k > 0) select_full(x, n, k, idx, scratch);
        return;
    }
    inf.sampled = true;

    // 1. Sample magnitudes at deterministic pseudo-random positions.
    //    n / 16 of them up to kSampleSize: a sample's cost is its random
    //    reads and its nth_element, which a small n does not repay.
    const std::size_t samples = std::min<std::size_t>(kSampleSize, n / 16);
    std::vector<std::uint64_t> &sample = scratch->sample;
    sample.resize(samples);
    std::uint64_t state = 0x9e3779b97f4a7c15ull ^ n;
    for (std::size_t s = 0; s < samples; ++s) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        sample[s] = Key<W>::of(value_at((state >> 33) % n));
    }
    // 2. Threshold: the sample order statistic that leaves ~1.25 k expected
    //    candidates plus three standard deviations of margin.
    const double expected = static_cast<double>(k) * static_cast<double>(samples) / static_cast<double>(n);
    const std::size_t rank = static_cast<std::size_t>(std::ceil(1.25 * expected + 3.0 * std::sqrt(expected) + 1.0));
    if (rank >= samples) {
        prepare_all();
        select_full(x, n, k, idx, scratch);
        inf.fell_back = true;
        return;
    }
    std::nth_element(sample.begin(), sample.begin() + rank, sample.end(), std::greater<std::uint64_t>());
    const U threshold = static_cast<U>(sample[rank]);

    // 3. One pass collecting candidates, branch-free inside a block; stop
    //    collecting when there are far more than expected (heavy ties at
    //    the threshold).
    const std::size_t cap = std::max<std::size_t>(4 * k, k + 2 * kBlock);
    std::vector<std::uint32_t> &cand = scratch->candidates;
    std::vector<U> &ckeys = Key<W>::keys(scratch);
    std::size_t count = 0;
    const std::size_t parts = parallel_parts(n, threads, kMinSampledN);
    if (parts == 1) {
        cand.resize(cap + kBlock);
        ckeys.resize(cap + kBlock);
        count = collect_candidates(x, 0, n, threshold, cap, cand.data(), ckeys.data(), prepare);
    } else {
        // Each range collects on its own (its count, or more than cap when
        // it gave up), then the ranges are joined in order.
        std::vector<std::vector<std::uint32_t>> &pc = scratch->part_candidates;
        std::vector<std::vector<U>> &pk = Key<W>::part_keys(scratch);
        if (pc.size() < parts) pc.resize(parts);
        if (pk.size() < parts) pk.resize(parts);
        std::vector<std::size_t> counts(parts, 0);
        run_parts(parts, [&](std::size_t part) {
            std::size_t b = 0, e = 0;
            part_bounds(n, parts, part, &b, &e);
            // Room for every index of the range, or for more than cap.
            const std::size_t room = std::min(e - b, cap + 1) + kBlock;
            if (pc[part].size() < room) pc[part].resize(room);
            if (pk[part].size() < room) pk[part].resize(room);
            counts[part] = collect_candidates(x, b, e, threshold, cap, pc[part].data(), pk[part].data(), prepare);
        });
        for (std::size_t p = 0; p < parts; ++p) count += counts[p];
        if (count <= cap) {
            cand.resize(count + kBlock);
            ckeys.resize(count + kBlock);
            std::size_t at = 0;
            for (std::size_t p = 0; p < parts; ++p) {
                std::copy(pc[p].begin(), pc[p].begin() + static_cast<std::ptrdiff_t>(counts[p]),
                          cand.begin() + static_cast<std::ptrdiff_t>(at));
                std::copy(pk[p].begin(), pk[p].begin() + static_cast<std::ptrdiff_t>(counts[p]),
                          ckeys.begin() + static_cast<std::ptrdiff_t>(at));
                at += counts[p];
            }
        }
    }
    inf.candidates = count;
    // 4. Exact selection among the candidates: every element outside them
    //    has a smaller key than every candidate, so the top k are in here.
    if (count < k || count > cap) {
        inf.fell_back = true;
        select_full(x, n, k, idx, scratch);
        return;
    }
    select_among_keys<W>(cand.data(), ckeys.data(), count, k, idx, scratch);
}

}  // namespace

template <typename W>
void select_full(const W *x, std::size_t n, std::size_t k, std::uint32_t *idx, SelectScratch *scratch)
{
    if (k == 0) return;
    if (k >= n) {
        std::iota(idx, idx + n, 0u);
        return;
    }
    // Every element is a candidate: the keys in one pass, then the
    // histogram selection of select_among_keys.
    using U = typename Key<W>::U;
    std::vector<std::uint32_t> &all = scratch->candidates;
    std::vector<U> &keys = Key<W>::keys(scratch);
    all.resize(n);
    keys.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
        all[i] = static_cast<std::uint32_t>(i);
        keys[i] = Key<W>::of(x[i]);
    }
    select_among_keys<W>(all.data(), keys.data(), n, k, idx, scratch);
}

template <typename W>
void select(const W *x, std::size_t n, std::size_t k, std::uint32_t *idx, SelectScratch *scratch, SelectInfo *info,
            int threads)
{
    auto nothing = [](std::size_t, std::size_t) {};
    select_impl<W>(const_cast<W *>(x), n, k, idx, scratch, info, threads, nothing, [] {},
                   [&](std::size_t i) { return x[i]; });
}

template <typename W>
void load_select(const void *src, cc_coll_dtype_t dtype, bool accumulate, W *g, std::size_t n, std::size_t k,
                 std::uint32_t *idx, SelectScratch *scratch, int threads, SelectInfo *info,
                 const std::function<void()> *poll)
{
    const std::size_t es = dtype_size(dtype);
    const auto *bytes = static_cast<const unsigned char *>(src);
    // Blocks start at multiples of kBlock from 0 (the first range's) or from
    // a range's start: poll on the calling thread's range only.
    const std::size_t first_range_end = parallel_parts(n, threads, kMinSampledN) == 1
                                            ? n
                                            : n / parallel_parts(n, threads, kMinSampledN);
    auto load = [&](std::size_t b, std::size_t e) {
        load_as<W>(bytes + b * es, dtype, e - b, g + b, accumulate);
        if (poll != nullptr && b < first_range_end && (b / kBlock) % kPollBlocks == 0) (*poll)();
    };
    auto load_all = [&] { parallel_for(n, threads, kElementwiseGrain, load); };
    auto value_at = [&](std::size_t i) {
        const W v = load_element<W>(src, i, dtype);
        return accumulate ? g[i] + v : v;
    };
    select_impl<W>(g, n, k, idx, scratch, info, threads, load, load_all, value_at);
}

template void select<float>(const float *, std::size_t, std::size_t, std::uint32_t *, SelectScratch *, SelectInfo *,
                           int);
template void load_select<float>(const void *, cc_coll_dtype_t, bool, float *, std::size_t, std::size_t,
                                 std::uint32_t *, SelectScratch *, int, SelectInfo *, const std::function<void()> *);
template void load_select<double>(const void *, cc_coll_dtype_t, bool, double *, std::size_t, std::size_t,
                                  std::uint32_t *, SelectScratch *, int, SelectInfo *, const std::function<void()> *);
template void select<double>(const double *, std::size_t, std::size_t, std::uint32_t *, SelectScratch *,
                             SelectInfo *, int);
template void select_full<float>(const float *, std::size_t, std::size_t, std::uint32_t *, SelectScratch *);
template void select_full<double>(const double *, std::size_t, std::size_t, std::uint32_t *, SelectScratch *);

}  // namespace topk
}  // namespace cc_coll::detail
