// The host-testable parts of the device top-k and threshold ladder
// (topk_cuda.cu, threshold_cuda.cu): the shared host/device functions of
// topk_keys.hpp and threshold_bins.hpp, run on the host.
//
// The device radix select is replayed here step by step with the same
// functions its kernels call (digit passes, the digit choice as the
// one-block kernel scans its bins, the tie list, the ~index passes, the
// final compaction) and must give exactly topk::select's indices. The
// payload is written as the device kernels write it and must match
// topk::encode byte for byte; scatter-add and the ladder's bins likewise.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "cc_coll.h"
#include "compressors/threshold/threshold_bins.hpp"
#include "compressors/threshold/threshold_ladder.hpp"
#include "compressors/topk/topk_keys.hpp"
#include "wire/topk_payload.hpp"
#include "compressors/topk/topk_select.hpp"
#include "core/dtype.hpp"

namespace cc_coll::detail {
namespace {

namespace keys = topk::keys;

// ---------------------------------------------------------------- magnitude keys

template <typename W>
void key_order_cases()
{
    using K = keys::MagnitudeKey<W>;
    const W inf = std::numeric_limits<W>::infinity();
    const W nan = std::numeric_limits<W>::quiet_NaN();
    EXPECT_EQ(K::of(W(-0.0)), K::of(W(0.0)));
    EXPECT_EQ(K::of(W(0.0)), 0u);
    EXPECT_EQ(K::of(-inf), K::of(inf));
    EXPECT_EQ(K::of(inf), K::kInfinity);
    EXPECT_GT(K::of(nan), K::of(inf));
    EXPECT_GT(K::of(-nan), K::of(inf));
    EXPECT_GT(K::of(inf), K::of(std::numeric_limits<W>::max()));
    EXPECT_GT(K::of(std::numeric_limits<W>::denorm_min()), K::of(W(0)));
    EXPECT_TRUE(keys::is_nonfinite(nan));
    EXPECT_TRUE(keys::is_nonfinite(-inf));
    EXPECT_FALSE(keys::is_nonfinite(std::numeric_limits<W>::max()));
    EXPECT_FALSE(keys::is_nonfinite(W(-0.0)));

    std::mt19937_64 rng(7);
    std::normal_distribution<double> normal(0.0, 1.0);
    std::uniform_int_distribution<int> scale(-60, 60);
    for (int t = 0; t < 20000; ++t) {
        const W a = static_cast<W>(std::ldexp(normal(rng), scale(rng)));
        const W b = t % 7 == 0 ? -a : static_cast<W>(std::ldexp(normal(rng), scale(rng)));
        const W ma = std::fabs(a), mb = std::fabs(b);
        EXPECT_EQ(ma < mb, K::of(a) < K::of(b));
        EXPECT_EQ(ma == mb, K::of(a) == K::of(b));
    }
}

TEST(TopkCudaKeys, MagnitudeOrderFloat) { key_order_cases<float>(); }
TEST(TopkCudaKeys, MagnitudeOrderDouble) { key_order_cases<double>(); }

// Every key bit, then every ~index bit, is covered by exactly one digit, the
// widest first, and each pass's masks are the bits of the passes before it.
template <typename W>
void schedule_cases()
{
    constexpr int kKeyBits = keys::MagnitudeKey<W>::kBits;
    std::uint64_t key_seen = 0;
    std::uint64_t index_seen = 0;
    int previous_width = keys::kMaxDigitBits;
    bool on_index = false;
    for (int p = 0; p < keys::total_passes<W>(); ++p) {
        const keys::DigitPass d = keys::digit_pass<W>(p);
        SCOPED_TRACE(p);
        EXPECT_EQ(d.on_index, p >= keys::key_passes<W>());
        if (d.on_index != on_index) previous_width = keys::kMaxDigitBits;
        on_index = d.on_index;
        EXPECT_GE(d.width, 1);
        EXPECT_LE(d.width, keys::kMaxDigitBits);
        EXPECT_LE(d.width, previous_width);
        previous_width = d.width;
        const std::uint64_t digit_bits = ((1ull << d.width) - 1ull) << d.shift;
        if (!d.on_index) {
            EXPECT_EQ(d.key_mask, key_seen);
            EXPECT_EQ(d.index_mask, 0u);
            EXPECT_EQ(key_seen & digit_bits, 0u);
            key_seen |= digit_bits;
        } else {
            EXPECT_EQ(d.key_mask, (1ull << kKeyBits) - 1ull);
            EXPECT_EQ(d.index_mask, index_seen);
            EXPECT_EQ(index_seen & digit_bits, 0u);
            index_seen |= digit_bits;
        }
    }
    EXPECT_EQ(key_seen, (1ull << kKeyBits) - 1ull);
    EXPECT_EQ(index_seen, 0xffffffffull);
}

TEST(TopkCudaKeys, DigitScheduleFloat)
{
    schedule_cases<float>();
    EXPECT_EQ(keys::key_passes<float>(), 3);
}
TEST(TopkCudaKeys, DigitScheduleDouble)
{
    schedule_cases<double>();
    EXPECT_EQ(keys::key_passes<double>(), 6);
}

// ---------------------------------------------------------------- radix select replayed

struct ReplayInfo {
    int histogram_passes = 0;  // passes that ran (the device skips the rest)
    bool listed_ties = false;  // the tie list ended the search
    bool index_passes = false; // the ~index passes ran
};

// The one-block digit choice of topk_cuda.cu: thread t holds bins
// kBins-1-2t and kBins-2-2t, an exclusive scan over the threads' sums gives
// `above`; exactly one thread must find the needed element in its bins.
void choose_like_device(keys::RadixState *s, const keys::DigitPass &pass, const std::vector<std::uint32_t> &hist,
                        std::uint32_t k)
{
    const std::uint32_t need = k - s->taken;
    std::uint32_t prefix = 0;
    int choosers = 0;
    keys::RadixState next = *s;
    for (unsigned t = 0; t < keys::kBins / 2; ++t) {
        const unsigned high = keys::kBins - 1 - 2 * t;
        const std::uint32_t above = prefix;
        prefix += hist[high] + hist[high - 1];
        if (keys::holds_needed(above, hist[high], need)) {
            keys::choose_digit(&next, pass, high, above, hist[high], k);
            ++choosers;
        } else if (keys::holds_needed(above + hist[high], hist[high - 1], need)) {
            keys::choose_digit(&next, pass, high - 1, above + hist[high], hist[high - 1], k);
            ++choosers;
        }
    }
    ASSERT_EQ(choosers, 1) << "the digit choice must have exactly one writer";
    *s = next;
}

template <typename W>
std::vector<std::uint32_t> radix_select_replay(const std::vector<W> &x, std::size_t k, std::uint32_t tie_capacity,
                                               ReplayInfo *info, std::uint64_t list_order_seed = 1)
{
    using K = keys::MagnitudeKey<W>;
    const std::size_t n = x.size();
    *info = ReplayInfo{};
    std::vector<std::uint32_t> out;
    if (k == 0) return out;
    if (k == n) {
        out.resize(n);
        std::iota(out.begin(), out.end(), 0u);
        return out;
    }
    const auto k32 = static_cast<std::uint32_t>(k);
    keys::RadixState s{};
    auto run_pass = [&](int p) {
        if (s.done) return;
        ++info->histogram_passes;
        const keys::DigitPass pass = keys::digit_pass<W>(p);
        std::vector<std::uint32_t> hist(keys::kBins, 0);
        for (std::size_t i = 0; i < n; ++i) {
            const std::uint64_t key = K::of(x[i]);
            const std::uint32_t nidx = keys::inverted_index(i);
            if (keys::matches_prefix(key, nidx, pass, s)) ++hist[keys::digit_of(key, nidx, pass)];
        }
        for (unsigned b = 1u << pass.width; b < keys::kBins; ++b) EXPECT_EQ(hist[b], 0u);
        choose_like_device(&s, pass, hist, k32);
    };
    for (int p = 0; p < keys::key_passes<W>(); ++p) run_pass(p);

    // The tie list, in an arbitrary order (the device appends atomically).
    if (!s.done && s.bucket <= tie_capacity) {
        std::vector<std::uint32_t> list;
        for (std::size_t i = 0; i < n; ++i)
            if (K::of(x[i]) == s.key_prefix) list.push_back(static_cast<std::uint32_t>(i));
        EXPECT_EQ(list.size(), s.bucket);
        std::shuffle(list.begin(), list.end(), std::mt19937_64(list_order_seed));
        const std::uint32_t need = k32 - s.taken;
        int resolvers = 0;
        keys::RadixState next = s;
        for (std::uint32_t mine : list) {
            std::uint32_t rank = 0;
            for (std::uint32_t other : list) rank += other < mine ? 1u : 0u;
            if (rank == need - 1) {
                keys::resolve_ties(&next, mine);
                ++resolvers;
            }
        }
        EXPECT_EQ(resolvers, 1);
        s = next;
        info->listed_ties = true;
    }
    const int before = info->histogram_passes;
    for (int p = keys::key_passes<W>(); p < keys::total_passes<W>(); ++p) run_pass(p);
    info->index_passes = info->histogram_passes > before;
    EXPECT_EQ(s.done, 1u) << "the search must end within its passes";

    for (std::size_t i = 0; i < n; ++i)
        if (keys::kept(K::of(x[i]), keys::inverted_index(i), s)) out.push_back(static_cast<std::uint32_t>(i));
    return out;
}

template <typename W>
std::vector<std::uint32_t> host_select(const std::vector<W> &x, std::size_t k)
{
    topk::SelectScratch scratch;
    std::vector<std::uint32_t> idx(k);
    topk::select<W>(x.data(), x.size(), k, idx.data(), &scratch);
    return idx;
}

// The replay, with the device's tie list and with the ~index passes forced
// (no list), against topk::select.
template <typename W>
void expect_replay_matches(const std::vector<W> &x, std::size_t k, ReplayInfo *with_list = nullptr)
{
    SCOPED_TRACE(::testing::Message() << "n = " << x.size() << ", k = " << k);
    const std::vector<std::uint32_t> expected = host_select(x, k);
    ReplayInfo info;
    EXPECT_EQ(radix_select_replay(x, k, keys::kTieCapacity, &info), expected);
    if (with_list != nullptr) *with_list = info;
    ReplayInfo forced;
    EXPECT_EQ(radix_select_replay(x, k, 0, &forced), expected) << "~index passes";
    if (info.listed_ties) {
        ReplayInfo reordered;
        EXPECT_EQ(radix_select_replay(x, k, keys::kTieCapacity, &reordered, 99), expected) << "tie list reordered";
    }
}

template <typename W>
std::vector<W> gaussian(std::size_t n, std::uint64_t seed, double scale = 1.0)
{
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> normal(0.0, scale);
    std::vector<W> x(n);
    for (W &v : x) v = static_cast<W>(normal(rng));
    return x;
}

template <typename W>
void random_cases()
{
    for (std::size_t n : {1u, 2u, 3u, 17u, 100u, 1000u, 40000u}) {
        const std::vector<W> x = gaussian<W>(n, 11 + n);
        std::vector<std::size_t> ks = {0, 1, n / 100, n / 10, n / 2, n - 1, n};
        for (std::size_t k : ks)
            if (k <= n) expect_replay_matches(x, k);
    }
}

TEST(TopkCudaReplay, RandomFloat) { random_cases<float>(); }
TEST(TopkCudaReplay, RandomDouble) { random_cases<double>(); }

// Large enough for the host's sampled path, k = 1% as in the benchmark.
TEST(TopkCudaReplay, LargeFloatOnePercent)
{
    const std::vector<float> x = gaussian<float>(300000, 5, 1e-3);
    expect_replay_matches(x, topk::k_for(0.01, x.size()));
}

TEST(TopkCudaReplay, LargeDoubleOnePercent)
{
    const std::vector<double> x = gaussian<double>(200000, 6);
    expect_replay_matches(x, topk::k_for(0.01, x.size()));
}

template <typename W>
void tie_cases()
{
    // All equal (with signs and -0 mixed in): the ties exceed the list, so the
    // ~index passes decide; the lowest indices win.
    for (W value : {W(0.5), W(0), W(-0.0)}) {
        std::vector<W> x(5000, value);
        for (std::size_t i = 0; i < x.size(); i += 3) x[i] = -x[i];
        for (std::size_t k : {std::size_t{1}, std::size_t{2}, std::size_t{2500}, std::size_t{4999}}) {
            ReplayInfo info;
            expect_replay_matches(x, k, &info);
            EXPECT_TRUE(info.index_passes);
        }
    }
    // Few distinct magnitudes: ties at the threshold within the list.
    std::mt19937_64 rng(3);
    std::uniform_int_distribution<int> level(0, 40);
    std::vector<W> x(30000);
    for (W &v : x) v = static_cast<W>(level(rng)) * W(0.25) * (rng() & 1 ? W(1) : W(-1));
    for (std::size_t k : {std::size_t{1}, std::size_t{700}, std::size_t{10000}, std::size_t{29999}})
        expect_replay_matches(x, k);
    // Exactly one pair ties at the k-th magnitude: one of the two is kept.
    std::vector<W> y = gaussian<W>(3000, 8);
    std::vector<W> sorted(y.size());
    std::transform(y.begin(), y.end(), sorted.begin(), [](W v) { return std::fabs(v); });
    std::sort(sorted.begin(), sorted.end(), std::greater<W>());
    y[2999] = -sorted[99];  // ties with the 100th largest magnitude
    ReplayInfo info;
    expect_replay_matches(y, 100, &info);
    EXPECT_TRUE(info.listed_ties);
    EXPECT_FALSE(info.index_passes);
}

TEST(TopkCudaReplay, TiesFloat) { tie_cases<float>(); }
TEST(TopkCudaReplay, TiesDouble) { tie_cases<double>(); }

// Ties at the k-th magnitude exactly filling the device's tie list, and one
// more: the list decides the first, the ~index passes the second.
template <typename W>
void tie_capacity_cases()
{
    for (std::uint32_t tied : {keys::kTieCapacity, keys::kTieCapacity + 1}) {
        std::vector<W> x = gaussian<W>(3 * keys::kTieCapacity, 17, 1e-3);
        for (std::size_t i = 0; i < 50; ++i) x[i * 7 + 1] = W(8) + static_cast<W>(i);  // 50 above the ties
        std::size_t placed = 0;
        for (std::size_t i = 2; placed < tied; i += 1 + (i % 2)) {
            if (std::fabs(x[i]) >= W(8)) continue;
            x[i] = placed % 2 ? W(-2) : W(2);
            ++placed;
        }
        for (std::size_t k : {std::size_t{51}, std::size_t{50} + tied / 2, std::size_t{49} + tied}) {
            ReplayInfo info;
            expect_replay_matches(x, k, &info);
            EXPECT_EQ(info.listed_ties, tied <= keys::kTieCapacity) << "tied " << tied << ", k " << k;
            EXPECT_EQ(info.index_passes, tied > keys::kTieCapacity) << "tied " << tied << ", k " << k;
        }
    }
}

TEST(TopkCudaReplay, TieListCapacityFloat) { tie_capacity_cases<float>(); }
TEST(TopkCudaReplay, TieListCapacityDouble) { tie_capacity_cases<double>(); }

template <typename W>
void adversarial_cases()
{
    const W inf = std::numeric_limits<W>::infinity();
    const W nan = std::numeric_limits<W>::quiet_NaN();
    const W tiny = std::numeric_limits<W>::denorm_min();
    std::vector<W> x = gaussian<W>(20000, 21);
    // Non-finite values, denormals, extremes and signed zeros spread around.
    for (std::size_t i = 0; i < x.size(); i += 97) x[i] = (i / 97) % 2 ? inf : -inf;
    for (std::size_t i = 5; i < x.size(); i += 331) x[i] = (i / 331) % 2 ? nan : -nan;
    for (std::size_t i = 7; i < x.size(); i += 13) x[i] = tiny * static_cast<W>(i % 5);
    for (std::size_t i = 9; i < x.size(); i += 29) x[i] = W(-0.0);
    x[11] = std::numeric_limits<W>::max();
    x[12] = -std::numeric_limits<W>::max();
    for (std::size_t k : {std::size_t{1}, std::size_t{60}, std::size_t{206}, std::size_t{267}, std::size_t{400},
                          std::size_t{5000}, std::size_t{19000}, std::size_t{19999}})
        expect_replay_matches(x, k);
    // Only zeros and denormals: keys differ in the lowest digit only.
    std::vector<W> small(4096);
    for (std::size_t i = 0; i < small.size(); ++i) small[i] = tiny * static_cast<W>(i % 37) * (i % 2 ? 1 : -1);
    for (std::size_t k : {std::size_t{1}, std::size_t{100}, std::size_t{4000}}) expect_replay_matches(small, k);
    // Every element NaN with different payloads, or every one infinite.
    std::vector<W> nans(3000, nan);
    for (std::size_t i = 0; i < nans.size(); i += 2) nans[i] = -nan;
    expect_replay_matches(nans, 10);
    std::vector<W> infs(3000, inf);
    expect_replay_matches(infs, 2999);
}

TEST(TopkCudaReplay, AdversarialFloat) { adversarial_cases<float>(); }
TEST(TopkCudaReplay, AdversarialDouble) { adversarial_cases<double>(); }

TEST(TopkCudaReplay, NaNPayloadsOrderByBits)
{
    std::vector<float> x(64, 1.0f);
    std::uint32_t bits = 0x7fc00001u;
    std::memcpy(&x[40], &bits, sizeof bits);
    bits = 0xffc00002u;  // larger payload, negative sign
    std::memcpy(&x[50], &bits, sizeof bits);
    x[3] = std::numeric_limits<float>::infinity();
    expect_replay_matches(x, 1);
    expect_replay_matches(x, 2);
    expect_replay_matches(x, 3);
    expect_replay_matches(x, 4);
}

// ---------------------------------------------------------------- payload

// The payload as the device kernels write it: into a buffer holding garbage,
// pairs by write_pairs, the non-finite counts as flag_kept_finite and
// count_nonfinite find them, then header and padding.
template <typename W>
std::vector<unsigned char> device_like_payload(const std::vector<W> &x, const std::vector<std::uint32_t> &idx,
                                               cc_coll_dtype_t dtype, std::vector<W> *sent)
{
    const std::size_t k = idx.size();
    std::vector<unsigned char> payload(keys::padded_bytes(k, dtype), 0xa5);
    unsigned char *values = payload.data() + keys::value_offset(k, 0, dtype);
    sent->assign(k, W(0));
    bool kept_finite = false;
    for (std::size_t j = 0; j < k; ++j) {
        std::memcpy(payload.data() + keys::index_offset(j), &idx[j], sizeof idx[j]);
        (*sent)[j] = keys::store_value<W>(values, j, dtype, x[idx[j]]);
        kept_finite |= !keys::is_nonfinite(x[idx[j]]);
    }
    std::uint64_t nonfinite = 0;
    if (!kept_finite)
        for (W v : x) nonfinite += keys::is_nonfinite(v) ? 1 : 0;
    keys::write_header(payload.data(), x.size(), static_cast<std::uint32_t>(k),
                       keys::overflow_flag(k, kept_finite, nonfinite), dtype);
    return payload;
}

template <typename W>
void expect_payload_matches(const std::vector<W> &x, std::size_t k, cc_coll_dtype_t dtype)
{
    SCOPED_TRACE(::testing::Message() << "dtype " << dtype_name(dtype) << ", n = " << x.size() << ", k = " << k);
    const std::vector<std::uint32_t> idx = host_select(x, k);
    const std::uint32_t flags = topk::nonfinite_overflow(x.data(), x.size(), idx.data(), k);
    std::vector<unsigned char> expected(topk::payload_bytes(k, dtype), 0);
    std::vector<W> expected_sent(k);
    topk::encode<W>(x.data(), x.size(), idx.data(), k, flags, dtype, expected.data(), expected_sent.data());

    std::vector<W> sent;
    const std::vector<unsigned char> got = device_like_payload(x, idx, dtype, &sent);
    ASSERT_EQ(got.size(), expected.size());
    EXPECT_EQ(std::memcmp(got.data(), expected.data(), got.size()), 0);
    ASSERT_EQ(sent.size(), expected_sent.size());
    EXPECT_EQ(std::memcmp(sent.data(), expected_sent.data(), sent.size() * sizeof(W)), 0);
    EXPECT_EQ(topk::header_of(got.data()).flags, flags);
}

TEST(TopkCudaPayload, LayoutMatchesHost)
{
    for (cc_coll_dtype_t dtype : {CC_COLL_F32, CC_COLL_F64, CC_COLL_F16, CC_COLL_BF16}) {
        EXPECT_EQ(keys::value_bytes(dtype), dtype_size(dtype));
        for (std::size_t k : {0u, 1u, 2u, 3u, 5u, 8u, 1001u}) {
            EXPECT_EQ(keys::padded_bytes(k, dtype), topk::payload_bytes(k, dtype));
            EXPECT_EQ(keys::value_offset(k, 0, dtype) % 4, 0u);
            EXPECT_EQ(keys::value_offset(k, k, dtype), 16 + k * (4 + dtype_size(dtype)));
        }
    }
}

TEST(TopkCudaPayload, BytesMatchEncode)
{
    std::vector<float> xf = gaussian<float>(3001, 31, 1e3);
    xf[17] = 70000.0f;   // beyond F16: rounds to inf
    xf[18] = 1e-7f;      // F16 subnormal
    xf[19] = -3e38f;     // BF16 rounds to -inf
    xf[20] = -0.0f;
    std::vector<double> xd = gaussian<double>(3001, 32, 1e10);
    xd[5] = 1e300;  // beyond F32
    for (std::size_t k : {0u, 1u, 2u, 3u, 7u, 500u, 3001u}) {
        for (cc_coll_dtype_t dtype : {CC_COLL_F32, CC_COLL_F16, CC_COLL_BF16}) expect_payload_matches(xf, k, dtype);
        expect_payload_matches(xd, k, CC_COLL_F64);  // odd k: doubles at 4-byte aligned offsets
        expect_payload_matches(xd, k, CC_COLL_F32);
    }
}

template <typename W>
void overflow_cases(cc_coll_dtype_t dtype)
{
    const W inf = std::numeric_limits<W>::infinity();
    const W nan = std::numeric_limits<W>::quiet_NaN();
    std::vector<W> x = gaussian<W>(1000, 41);
    for (std::size_t i = 0; i < 12; ++i) x[i * 50 + 3] = i % 3 ? inf : (i % 2 ? -nan : nan);
    // 12 non-finite: k < 12 overflows, k >= 12 does not; k = 0 never.
    for (std::size_t k : {0u, 1u, 11u, 12u, 13u, 400u, 1000u}) {
        const std::vector<std::uint32_t> idx = host_select(x, k);
        const std::uint32_t host = topk::nonfinite_overflow(x.data(), x.size(), idx.data(), k);
        EXPECT_EQ(host, k > 0 && k < 12 ? topk::kFlagNonFiniteOverflow : 0u) << "k = " << k;
        expect_payload_matches(x, k, dtype);
    }
}

TEST(TopkCudaPayload, NonFiniteOverflowFloat) { overflow_cases<float>(CC_COLL_F32); }
TEST(TopkCudaPayload, NonFiniteOverflowHalf) { overflow_cases<float>(CC_COLL_F16); }
TEST(TopkCudaPayload, NonFiniteOverflowDouble) { overflow_cases<double>(CC_COLL_F64); }

// scatter_pairs' per-pair add against topk::scatter_add, over three
// payloads added in order into the same output.
template <typename W>
void scatter_cases(cc_coll_dtype_t dtype)
{
    SCOPED_TRACE(dtype_name(dtype));
    const std::size_t n = 777;
    std::vector<std::vector<unsigned char>> payloads;
    for (std::uint64_t r = 0; r < 3; ++r) {
        std::vector<W> x = gaussian<W>(n, 50 + r, 10.0);
        if (r == 1) x[3] = std::numeric_limits<W>::infinity();
        const std::size_t k = 101 + r * 50;  // odd and even k
        const std::vector<std::uint32_t> idx = host_select(x, k);
        std::vector<W> sent;
        payloads.push_back(device_like_payload(x, idx, dtype, &sent));
    }
    const std::size_t bytes = n * dtype_size(dtype);
    std::vector<unsigned char> start(bytes);
    {
        const std::vector<W> init = gaussian<W>(n, 60, 3.0);
        for (std::size_t i = 0; i < n; ++i) store_element<W>(start.data(), i, dtype, init[i]);
    }
    std::vector<unsigned char> expected = start, got = start;
    for (const auto &p : payloads) {
        topk::scatter_add(p.data(), dtype, expected.data());
        const std::size_t k = topk::header_of(p.data()).k;
        const unsigned char *values = p.data() + keys::value_offset(k, 0, dtype);
        for (std::size_t j = 0; j < k; ++j) {
            std::uint32_t i;
            std::memcpy(&i, p.data() + keys::index_offset(j), sizeof i);
            keys::add_value(values, j, dtype, got.data(), i);
        }
    }
    EXPECT_EQ(std::memcmp(got.data(), expected.data(), bytes), 0);
}

TEST(TopkCudaPayload, ScatterAddMatchesHost)
{
    scatter_cases<float>(CC_COLL_F32);
    scatter_cases<double>(CC_COLL_F64);
    scatter_cases<float>(CC_COLL_F16);
    scatter_cases<float>(CC_COLL_BF16);
}

// ---------------------------------------------------------------- threshold ladder

std::vector<double> ladder()
{
    std::vector<double> tau(threshold::kRungs);
    for (int r = 0; r < threshold::kRungs; ++r) tau[r] = threshold::rung(r);
    return tau;
}

// Bin b holds the elements below rung r exactly when b <= r.
void expect_bin_consistent(const std::vector<double> &tau, double v)
{
    const int b = threshold::rungs_at_or_below(tau.data(), v);
    ASSERT_GE(b, 0);
    ASSERT_LE(b, threshold::kRungs);
    for (int r = 0; r < threshold::kRungs; ++r)
        ASSERT_EQ(b <= r, threshold::count_below(&v, 1, tau[r]) == 1) << "v = " << v << ", rung " << r;
}

TEST(ThresholdCudaBins, BinsAgreeWithCountBelow)
{
    const std::vector<double> tau = ladder();
    const double inf = std::numeric_limits<double>::infinity();
    for (double v : {0.0, -0.0, inf, -inf, std::numeric_limits<double>::quiet_NaN(),
                     std::numeric_limits<double>::denorm_min(), std::numeric_limits<double>::max(), 1.0, -0.75})
        expect_bin_consistent(tau, v);
    for (double t : tau)
        for (double v : {t, -t, std::nextafter(t, 0.0), std::nextafter(t, inf), -std::nextafter(t, inf)})
            expect_bin_consistent(tau, v);
    std::mt19937_64 rng(9);
    std::uniform_real_distribution<double> exponent(-75.0, 3.0);
    for (int t = 0; t < 20000; ++t) {
        const double v = std::pow(10.0, exponent(rng)) * (t % 2 ? 1 : -1);
        expect_bin_consistent(tau, v);
        expect_bin_consistent(tau, static_cast<float>(v));
    }
}

// The device pick: bins by rungs_at_or_below, then the host's rule.
template <typename W>
void pick_and_collect_cases()
{
    const std::vector<double> tau = ladder();
    std::mt19937_64 rng(13);
    std::uniform_real_distribution<double> exponent(-25.0, 1.0);
    std::vector<W> x(50000);
    for (W &v : x) v = static_cast<W>(std::pow(10.0, exponent(rng)) * (rng() & 1 ? 1 : -1));
    for (std::size_t i = 0; i < x.size(); i += 101) x[i] = W(0);
    for (std::size_t i = 3; i < x.size(); i += 997) x[i] = std::numeric_limits<W>::quiet_NaN();
    for (std::size_t i = 5; i < x.size(); i += 991) x[i] = -std::numeric_limits<W>::infinity();
    x[7] = static_cast<W>(tau[40]);  // exactly on a rung
    std::vector<std::size_t> hist(threshold::kRungs + 1, 0);
    for (W v : x) ++hist[threshold::rungs_at_or_below(tau.data(), static_cast<double>(v))];
    for (double fraction : {0.0, 0.01, 0.2, 0.5, 0.8, 0.95, 0.999, 1.0}) {
        const double device = threshold::pick_from_histogram(hist.data(), x.size(), fraction);
        EXPECT_EQ(device, threshold::pick(x.data(), x.size(), fraction)) << "zero fraction " << fraction;
        std::vector<std::uint32_t> expected;
        threshold::collect(x.data(), x.size(), device, &expected);
        std::vector<std::uint32_t> got;
        for (std::size_t i = 0; i < x.size(); ++i)
            if (!threshold::below(x[i], device)) got.push_back(static_cast<std::uint32_t>(i));
        EXPECT_EQ(got, expected) << "zero fraction " << fraction;
    }
    EXPECT_EQ(threshold::pick_from_histogram(hist.data(), 0, 0.8), threshold::kHighest);
}

TEST(ThresholdCudaBins, PickAndCollectFloat) { pick_and_collect_cases<float>(); }
TEST(ThresholdCudaBins, PickAndCollectDouble) { pick_and_collect_cases<double>(); }

}  // namespace
}  // namespace cc_coll::detail
