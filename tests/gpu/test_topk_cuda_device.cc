// The device top-k (src/compressors/topk/topk_cuda.hpp) and threshold
// ladder (src/compressors/threshold/threshold_cuda.hpp) run on a GPU and
// compared with their host counterparts on the same data, bit for bit as
// docs/gpu.md promises for TOPK: the selected indices (topk::select), the
// payload bytes padding included (topk::encode) and the transmitted values,
// the scatter-add of several payloads in rank order (topk::scatter_add), the
// residual after the error-feedback step as the device allreduce runs it
// (gpu::load_input, select, encode, gpu::keep_unsent against load_as,
// select, encode, keep_unsent), and the threshold's pick and collect.
//
// A kernel bug shows here as the first index or byte that differs, not as a
// distributed mismatch of the mpirun suite. Every test skips without a
// CUDA device.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include "cc_coll.h"
#include "exec/host_kernels.hpp"
#include "compressors/threshold/threshold_cuda.hpp"
#include "compressors/threshold/threshold_ladder.hpp"
#include "compressors/topk/topk_cuda.hpp"
#include "compressors/topk/topk_keys.hpp"
#include "wire/topk_payload.hpp"
#include "compressors/topk/topk_select.hpp"
#include "core/dtype.hpp"
#include "gpu/elementwise.hpp"
#include "gpu/gpu.hpp"
#include "device_test_util.hpp"

namespace cc_coll::detail {
namespace {

// ---------------------------------------------------------------- inputs

constexpr std::size_t kLarge = 3 * (std::size_t{1} << 20) + 17;  // several blocks per SM, odd tail
constexpr std::uint32_t kTieCapacity = topk::keys::kTieCapacity;

template <typename W>
std::vector<W> gaussian(std::size_t n, std::uint64_t seed, double scale = 1.0)
{
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> normal(0.0, scale);
    std::vector<W> x(n);
    for (W &v : x) v = static_cast<W>(normal(rng));
    return x;
}

// x rounded to a 16-bit dtype and back: F16/BF16 data as the allreduce
// loads it into its float work buffer (many ties at every magnitude).
std::vector<float> rounded_to(const std::vector<float> &x, cc_coll_dtype_t dtype)
{
    std::vector<float> out(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
        alignas(8) unsigned char element[8] = {};  // room for any dtype
        store_element<float>(element, 0, dtype, x[i]);
        out[i] = load_element<float>(element, 0, dtype);
    }
    return out;
}

// Non-finite values, NaN payloads of both signs, denormals, extremes and
// signed zeros spread over Gaussian data.
template <typename W>
std::vector<W> with_specials(std::size_t n, std::uint64_t seed)
{
    const W inf = std::numeric_limits<W>::infinity();
    const W nan = std::numeric_limits<W>::quiet_NaN();
    const W tiny = std::numeric_limits<W>::denorm_min();
    std::vector<W> x = gaussian<W>(n, seed);
    for (std::size_t i = 0; i < n; i += 97) x[i] = (i / 97) % 2 ? inf : -inf;
    for (std::size_t i = 5; i < n; i += 331) x[i] = (i / 331) % 2 ? nan : -nan;
    for (std::size_t i = 7; i < n; i += 13) x[i] = tiny * static_cast<W>(i % 5);
    for (std::size_t i = 9; i < n; i += 29) x[i] = W(-0.0);
    if (n > 12) {
        x[11] = std::numeric_limits<W>::max();
        x[12] = -std::numeric_limits<W>::max();
    }
    // Quiet NaNs with distinct payloads: the larger payload ranks first.
    if (n > 60) {
        using U = typename topk::keys::MagnitudeKey<W>::U;
        const U quiet = sizeof(W) == 4 ? U(0x7fc00000u) : U(0x7ff8000000000000ull);
        const U sign = sizeof(W) == 4 ? U(0x80000000u) : U(0x8000000000000000ull);
        U bits = quiet | U(1);
        std::memcpy(&x[40], &bits, sizeof bits);
        bits = quiet | U(2) | sign;
        std::memcpy(&x[50], &bits, sizeof bits);
        bits = quiet | U(3);
        std::memcpy(&x[60], &bits, sizeof bits);
    }
    return x;
}

// `tied` elements of magnitude 2 (both signs) among 3 * kTieCapacity small
// ones, 50 above them: k in (50, 50 + tied) cuts through the ties.
template <typename W>
std::vector<W> tie_input(std::uint32_t tied, std::size_t n = 3 * kTieCapacity)
{
    std::vector<W> x = gaussian<W>(n, 17, 1e-3);
    for (std::size_t i = 0; i < 50; ++i) x[i * 7 + 1] = W(8) + static_cast<W>(i);
    std::size_t placed = 0;
    for (std::size_t i = 2; placed < tied; i += 1 + (i % 2)) {
        if (std::fabs(x[i]) >= W(8)) continue;
        x[i] = placed % 2 ? W(-2) : W(2);
        ++placed;
    }
    return x;
}

// k = 0, 1, 1%, n - 1, n, without repeats.
std::vector<std::size_t> standard_ks(std::size_t n)
{
    std::vector<std::size_t> ks = {0, 1, topk::k_for(0.01, n), n > 0 ? n - 1 : 0, n};
    std::sort(ks.begin(), ks.end());
    ks.erase(std::unique(ks.begin(), ks.end()), ks.end());
    ks.erase(std::remove_if(ks.begin(), ks.end(), [n](std::size_t k) { return k > n; }), ks.end());
    return ks;
}

template <typename W>
std::vector<std::uint32_t> host_select(const std::vector<W> &x, std::size_t k)
{
    topk::SelectScratch scratch;
    std::vector<std::uint32_t> idx(k);
    topk::select<W>(x.data(), x.size(), k, idx.data(), &scratch);
    return idx;
}

// ---------------------------------------------------------------- comparisons

template <typename T>
std::string hex_of(const T &v)
{
    unsigned char b[sizeof(T)];
    std::memcpy(b, &v, sizeof v);
    std::string s = "0x";
    char digits[3];
    for (std::size_t i = sizeof(T); i-- > 0;) {  // little-endian: most significant byte last
        std::snprintf(digits, sizeof digits, "%02x", b[i]);
        s += digits;
    }
    return s;
}

// got[0..count) equals expected[0..count) bit for bit; names the first
// element that differs.
template <typename T>
::testing::AssertionResult same_bits(const T *got, const T *expected, std::size_t count, const char *what)
{
    if (count == 0 || std::memcmp(got, expected, count * sizeof(T)) == 0) return ::testing::AssertionSuccess();
    std::size_t j = 0;
    while (std::memcmp(got + j, expected + j, sizeof(T)) == 0) ++j;
    std::size_t differing = 0;
    for (std::size_t i = j; i < count; ++i) differing += std::memcmp(got + i, expected + i, sizeof(T)) != 0 ? 1 : 0;
    return ::testing::AssertionFailure() << what << ": " << differing << " of " << count
                                         << " elements differ, the first at " << j << ": device "
                                         << hex_of(got[j]) << ", host " << hex_of(expected[j]);
}

template <typename T>
::testing::AssertionResult same_bits(const std::vector<T> &got, const std::vector<T> &expected, const char *what)
{
    if (got.size() != expected.size())
        return ::testing::AssertionFailure() << what << ": device has " << got.size() << " elements, host "
                                             << expected.size();
    return same_bits(got.data(), expected.data(), got.size(), what);
}

// Every byte of buf[from..to) still holds `fill` (nothing written past the
// end of a result).
template <typename T>
::testing::AssertionResult untouched(const std::vector<T> &buf, std::size_t from, unsigned char fill, const char *what)
{
    const auto *bytes = reinterpret_cast<const unsigned char *>(buf.data());
    for (std::size_t b = from * sizeof(T); b < buf.size() * sizeof(T); ++b)
        if (bytes[b] != fill)
            return ::testing::AssertionFailure() << what << ": element " << b / sizeof(T) << " (past the "
                                                 << from << " expected) was written: " << hex_of(buf[b / sizeof(T)]);
    return ::testing::AssertionSuccess();
}

using device_test::DeviceBuffer;
using device_test::kFill;
using device_test::ok;
constexpr std::uint32_t kNoIndex = 0xffffffffu;  // never a valid index (n < 2^32)

// ---------------------------------------------------------------- fixtures

using DeviceFixture = device_test::StreamTest;

class DeviceTopk : public DeviceFixture {
protected:
    // The device selection of x (uploaded as dx) against topk::select: the
    // same k indices in the same order, and nothing written past idx[k - 1]
    // (idx has room for n + 1, prefilled with kNoIndex).
    template <typename W>
    void expect_select(const std::vector<W> &x, const DeviceBuffer<W> &dx, std::size_t k)
    {
        const std::size_t n = x.size();
        SCOPED_TRACE(::testing::Message() << (sizeof(W) == 4 ? "float" : "double") << ", n = " << n << ", k = " << k);
        const std::vector<std::uint32_t> expected = host_select(x, k);
        DeviceBuffer<std::uint32_t> didx(n + 1);
        ASSERT_CUDA(didx.status());
        ASSERT_CUDA(didx.fill(0xff, stream_));
        ASSERT_TRUE(ok(topk::cuda::select<W>(dx.get(), n, k, didx.get(), &scratch_, stream_)));
        std::vector<std::uint32_t> got;
        ASSERT_CUDA(didx.read(&got, stream_));
        EXPECT_TRUE(same_bits(got.data(), expected.data(), k, "selected indices"));
        EXPECT_TRUE(untouched(got, k, 0xff, "index array"));
    }

    template <typename W>
    void expect_select_all(const std::vector<W> &x, const std::vector<std::size_t> &ks)
    {
        DeviceBuffer<W> dx(x);
        ASSERT_CUDA(dx.status());
        for (std::size_t k : ks) {
            expect_select(x, dx, k);
            if (HasFatalFailure()) return;
        }
    }

    // The device payload of x at the host's indices against topk::encode:
    // every byte of payload_bytes(k, dtype) (the buffer starts as garbage,
    // the host's as zeros, so the padding must be written as zeros), nothing
    // past it, and the transmitted values.
    template <typename W>
    void expect_encode(const std::vector<W> &x, std::size_t k, cc_coll_dtype_t dtype)
    {
        const std::size_t n = x.size();
        SCOPED_TRACE(::testing::Message() << "dtype " << dtype_name(dtype) << ", n = " << n << ", k = " << k);
        const std::vector<std::uint32_t> idx = host_select(x, k);
        const std::uint32_t flags = topk::nonfinite_overflow(x.data(), n, idx.data(), k);
        const std::size_t bytes = topk::payload_bytes(k, dtype);
        std::vector<unsigned char> expected(bytes, 0);
        std::vector<W> expected_sent(k);
        topk::encode<W>(x.data(), n, idx.data(), k, flags, dtype, expected.data(), expected_sent.data());

        constexpr std::size_t kGuard = 64;
        DeviceBuffer<W> dx(x);
        DeviceBuffer<std::uint32_t> didx(idx);
        DeviceBuffer<unsigned char> payload(bytes + kGuard);
        DeviceBuffer<W> sent(k + 1);
        ASSERT_CUDA(dx.status());
        ASSERT_CUDA(didx.status());
        ASSERT_CUDA(payload.status());
        ASSERT_CUDA(sent.status());
        ASSERT_CUDA(payload.fill(kFill, stream_));
        ASSERT_CUDA(sent.fill(kFill, stream_));
        ASSERT_TRUE(ok(topk::cuda::encode<W>(dx.get(), n, didx.get(), k, dtype, payload.get(), sent.get(), &scratch_,
                                             stream_)));
        std::vector<unsigned char> got;
        std::vector<W> got_sent;
        ASSERT_CUDA(payload.read(&got, stream_));
        ASSERT_CUDA(sent.read(&got_sent, stream_));
        EXPECT_TRUE(same_bits(got.data(), expected.data(), bytes, "payload bytes"));
        EXPECT_TRUE(untouched(got, bytes, kFill, "payload buffer"));
        EXPECT_EQ(topk::header_of(got.data()).flags, flags);
        EXPECT_TRUE(same_bits(got_sent.data(), expected_sent.data(), k, "sent values"));
        EXPECT_TRUE(untouched(got_sent, k, kFill, "sent array"));
    }

    topk::cuda::SelectScratch scratch_;  // reused across calls, as the allreduce does
};

class DeviceThreshold : public DeviceFixture {
protected:
    // threshold::cuda::collect at tau against threshold::collect: the count
    // and the indices, nothing written past them (idx has room for n + 1).
    template <typename W>
    void expect_collect(const std::vector<W> &x, const DeviceBuffer<W> &dx, double tau)
    {
        const std::size_t n = x.size();
        SCOPED_TRACE(::testing::Message() << "n = " << n << ", tau = " << tau);
        std::vector<std::uint32_t> expected;
        const std::size_t expected_count = threshold::collect<W>(x.data(), n, tau, &expected);
        DeviceBuffer<std::uint32_t> didx(n + 1);
        ASSERT_CUDA(didx.status());
        ASSERT_CUDA(didx.fill(0xff, stream_));
        std::size_t count = kNoIndex;
        ASSERT_TRUE(ok(threshold::cuda::collect<W>(dx.get(), n, tau, didx.get(), &count, &scratch_, stream_)));
        ASSERT_EQ(count, expected_count);
        std::vector<std::uint32_t> got;
        ASSERT_CUDA(didx.read(&got, stream_));
        EXPECT_TRUE(same_bits(got.data(), expected.data(), count, "collected indices"));
        EXPECT_TRUE(untouched(got, count, 0xff, "index array"));
    }

    // pick for a range of zero fractions (the same rung as threshold::pick,
    // compared as bits), then collect at the picked threshold.
    template <typename W>
    void expect_pick_and_collect(const std::vector<W> &x)
    {
        DeviceBuffer<W> dx(x);
        ASSERT_CUDA(dx.status());
        for (double fraction : {0.0, 0.01, 0.2, 0.5, 0.8, 0.95, 0.999, 1.0}) {
            SCOPED_TRACE(::testing::Message() << "zero fraction " << fraction);
            const double expected = threshold::pick<W>(x.data(), x.size(), fraction);
            double tau = -1.0;
            ASSERT_TRUE(ok(threshold::cuda::pick<W>(dx.get(), x.size(), fraction, &tau, &scratch_, stream_)));
            EXPECT_TRUE(same_bits(&tau, &expected, 1, "picked threshold")) << tau << " vs " << expected;
            expect_collect(x, dx, expected);
            if (HasFatalFailure()) return;
        }
    }

    threshold::cuda::Scratch scratch_;
};

// ---------------------------------------------------------------- select

TEST_F(DeviceTopk, SelectRandomFloat)
{
    for (std::size_t n : {std::size_t{1}, std::size_t{2}, std::size_t{17}, std::size_t{1000}, kLarge}) {
        expect_select_all(gaussian<float>(n, 11 + n), standard_ks(n));
        if (HasFatalFailure()) return;
    }
}

TEST_F(DeviceTopk, SelectRandomDouble)
{
    for (std::size_t n : {std::size_t{1}, std::size_t{2}, std::size_t{17}, std::size_t{1000}, kLarge}) {
        expect_select_all(gaussian<double>(n, 12 + n, 1e-3), standard_ks(n));
        if (HasFatalFailure()) return;
    }
}

// F16 / BF16 data in the float work buffer: few distinct magnitudes, so many
// elements tie at the k-th (well past the tie list at the large size).
TEST_F(DeviceTopk, SelectHalfAndBfloatInputs)
{
    for (cc_coll_dtype_t dtype : {CC_COLL_F16, CC_COLL_BF16}) {
        SCOPED_TRACE(dtype_name(dtype));
        for (std::size_t n : {std::size_t{1000}, kLarge}) {
            expect_select_all(rounded_to(gaussian<float>(n, 21 + n, 0.1), dtype), standard_ks(n));
            if (HasFatalFailure()) return;
        }
    }
}

// All elements of one magnitude (signs and -0 mixed in): the ~index passes
// decide, lowest indices first.
TEST_F(DeviceTopk, SelectAllEqual)
{
    for (std::size_t n : {std::size_t{5000}, kLarge}) {
        for (float value : {0.5f, 0.0f}) {
            std::vector<float> x(n, value);
            for (std::size_t i = 0; i < n; i += 3) x[i] = -x[i];
            expect_select_all(x, standard_ks(n));
            if (HasFatalFailure()) return;
            std::vector<double> y(x.begin(), x.end());
            expect_select_all(y, standard_ks(n));
            if (HasFatalFailure()) return;
        }
    }
}

// Ties at the k-th magnitude one short of the device's tie list, exactly
// filling it (the list decides) and one more (the ~index passes decide);
// k = 50 + tied keeps every tie (the key passes end the search).
TEST_F(DeviceTopk, SelectTiesAtListCapacity)
{
    for (std::uint32_t tied : {kTieCapacity - 1, kTieCapacity, kTieCapacity + 1}) {
        SCOPED_TRACE(::testing::Message() << tied << " tied");
        const std::vector<std::size_t> ks = {51, 50 + tied / 2, 49 + tied, 50 + tied};
        expect_select_all(tie_input<float>(tied), ks);
        if (HasFatalFailure()) return;
        expect_select_all(tie_input<double>(tied), ks);
        if (HasFatalFailure()) return;
        // The same ties among many more elements (several blocks list them).
        expect_select_all(tie_input<float>(tied, 1u << 20), ks);
        if (HasFatalFailure()) return;
    }
}

TEST_F(DeviceTopk, SelectSpecialValues)
{
    const std::vector<std::size_t> ks = {1, 3, 60, 206, 267, 400, 5000, 19000, 19999};
    expect_select_all(with_specials<float>(20000, 31), ks);
    if (HasFatalFailure()) return;
    expect_select_all(with_specials<double>(20000, 32), ks);
    if (HasFatalFailure()) return;
    expect_select_all(with_specials<float>(kLarge, 33), standard_ks(kLarge));
    if (HasFatalFailure()) return;

    // Only zeros and denormals: keys differ in the lowest digit only.
    std::vector<float> small(4096);
    for (std::size_t i = 0; i < small.size(); ++i)
        small[i] = std::numeric_limits<float>::denorm_min() * static_cast<float>(i % 37) * (i % 2 ? 1.0f : -1.0f);
    expect_select_all(small, {1, 100, 4000});
    if (HasFatalFailure()) return;
    // Every element NaN (both signs), or every one infinite.
    std::vector<double> nans(3000, std::numeric_limits<double>::quiet_NaN());
    for (std::size_t i = 0; i < nans.size(); i += 2) nans[i] = -nans[i];
    expect_select_all(nans, {1, 10, 2999});
    if (HasFatalFailure()) return;
    std::vector<float> infs(3000, std::numeric_limits<float>::infinity());
    expect_select_all(infs, {1, 2048, 2049, 2999});
}

TEST_F(DeviceTopk, SelectRejectsBadArguments)
{
    DeviceBuffer<float> dx(std::vector<float>(10, 1.0f));
    DeviceBuffer<std::uint32_t> didx(11);
    ASSERT_CUDA(dx.status());
    ASSERT_CUDA(didx.status());
    const gpu::Result r = topk::cuda::select<float>(dx.get(), 10, 11, didx.get(), &scratch_, stream_);
    EXPECT_FALSE(r.ok());
    EXPECT_EQ(r.code, static_cast<int>(cudaErrorInvalidValue));
    // The failure was not a launch: the next call on the context works.
    EXPECT_TRUE(ok(topk::cuda::select<float>(dx.get(), 10, 3, didx.get(), &scratch_, stream_)));
}

// ---------------------------------------------------------------- encode

TEST_F(DeviceTopk, EncodeMatchesHost)
{
    std::vector<float> xf = gaussian<float>(3001, 41, 1e3);
    xf[17] = 70000.0f;  // beyond F16: rounds to inf
    xf[18] = 1e-7f;     // F16 subnormal
    xf[19] = -3e38f;    // BF16 rounds to -inf
    xf[20] = -0.0f;
    std::vector<double> xd = gaussian<double>(3001, 42, 1e10);
    xd[5] = 1e300;  // beyond F32
    for (std::size_t k : {0u, 1u, 2u, 3u, 7u, 500u, 3000u, 3001u}) {
        for (cc_coll_dtype_t dtype : {CC_COLL_F32, CC_COLL_F16, CC_COLL_BF16}) {
            expect_encode(xf, k, dtype);
            if (HasFatalFailure()) return;
        }
        expect_encode(xd, k, CC_COLL_F64);  // odd k: doubles at 4-byte aligned offsets
        if (HasFatalFailure()) return;
    }
}

TEST_F(DeviceTopk, EncodeLargeAndSpecial)
{
    const std::vector<float> xf = with_specials<float>(kLarge, 43);
    const std::vector<double> xd = with_specials<double>(kLarge, 44);
    for (std::size_t k : {topk::k_for(0.01, kLarge), topk::k_for(0.01, kLarge) + 1}) {
        for (cc_coll_dtype_t dtype : {CC_COLL_F32, CC_COLL_F16, CC_COLL_BF16}) {
            expect_encode(xf, k, dtype);
            if (HasFatalFailure()) return;
        }
        expect_encode(xd, k, CC_COLL_F64);
        if (HasFatalFailure()) return;
    }
}

// 12 non-finite values: k < 12 sets kFlagNonFiniteOverflow, k >= 12 does not.
TEST_F(DeviceTopk, EncodeNonFiniteOverflowFlag)
{
    const auto inputs = [](auto zero) {
        using W = decltype(zero);
        const W inf = std::numeric_limits<W>::infinity();
        const W nan = std::numeric_limits<W>::quiet_NaN();
        std::vector<W> x = gaussian<W>(1000, 45);
        for (std::size_t i = 0; i < 12; ++i) x[i * 50 + 3] = i % 3 ? inf : (i % 2 ? -nan : nan);
        return x;
    };
    const std::vector<float> xf = inputs(0.0f);
    const std::vector<double> xd = inputs(0.0);
    for (std::size_t k : {0u, 1u, 11u, 12u, 13u, 400u, 1000u}) {
        expect_encode(xf, k, CC_COLL_F32);
        expect_encode(xf, k, CC_COLL_F16);
        expect_encode(xd, k, CC_COLL_F64);
        if (HasFatalFailure()) return;
    }
    // Everything non-finite, more of it than k: the flag from a count over
    // all n elements (several blocks).
    std::vector<float> all(kLarge, std::numeric_limits<float>::infinity());
    expect_encode(all, 1000, CC_COLL_BF16);
}

// ---------------------------------------------------------------- scatter-add

// P payloads of the same (n, k) gathered at a stride of payload_bytes, added
// in rank order into one output as the allreduce does, against
// topk::scatter_add. The payloads are the host's, so a difference is the
// scatter's.
template <typename W>
void scatter_case(cudaStream_t stream, std::size_t n, std::size_t k, cc_coll_dtype_t dtype, bool zero_start)
{
    SCOPED_TRACE(::testing::Message() << "dtype " << dtype_name(dtype) << ", n = " << n << ", k = " << k
                                      << (zero_start ? ", from zeros" : ", onto data"));
    constexpr std::size_t kRanks = 4;
    const std::size_t bytes = topk::payload_bytes(k, dtype);
    std::vector<unsigned char> gathered(bytes * kRanks, 0);
    for (std::size_t r = 0; r < kRanks; ++r) {
        std::vector<W> x = gaussian<W>(n, 50 + r, 10.0);
        if (r == 1) x[3 % n] = std::numeric_limits<W>::infinity();
        if (r == 2) x[5 % n] = W(1e6);  // beyond F16 after a few sums
        const std::vector<std::uint32_t> idx = host_select(x, k);
        std::vector<W> sent(k);
        topk::encode<W>(x.data(), n, idx.data(), k, topk::nonfinite_overflow(x.data(), n, idx.data(), k), dtype,
                        gathered.data() + r * bytes, sent.data());
    }
    const std::size_t out_bytes = n * dtype_size(dtype);
    std::vector<unsigned char> start(out_bytes, 0);
    if (!zero_start) {
        const std::vector<W> init = gaussian<W>(n, 60, 3.0);
        for (std::size_t i = 0; i < n; ++i) store_element<W>(start.data(), i, dtype, init[i]);
    }
    std::vector<unsigned char> expected = start;
    for (std::size_t r = 0; r < kRanks; ++r) topk::scatter_add(gathered.data() + r * bytes, dtype, expected.data());

    DeviceBuffer<unsigned char> dgathered(gathered);
    DeviceBuffer<unsigned char> out(start);
    ASSERT_CUDA(dgathered.status());
    ASSERT_CUDA(out.status());
    for (std::size_t r = 0; r < kRanks; ++r)
        ASSERT_TRUE(ok(topk::cuda::scatter_add(dgathered.get() + r * bytes, k, dtype, out.get(), stream)));
    std::vector<unsigned char> got;
    ASSERT_CUDA(out.read(&got, stream));
    switch (dtype_size(dtype)) {
    case 8:
        EXPECT_TRUE(same_bits(reinterpret_cast<const std::uint64_t *>(got.data()),
                              reinterpret_cast<const std::uint64_t *>(expected.data()), n, "sums"));
        break;
    case 4:
        EXPECT_TRUE(same_bits(reinterpret_cast<const std::uint32_t *>(got.data()),
                              reinterpret_cast<const std::uint32_t *>(expected.data()), n, "sums"));
        break;
    default:
        EXPECT_TRUE(same_bits(reinterpret_cast<const std::uint16_t *>(got.data()),
                              reinterpret_cast<const std::uint16_t *>(expected.data()), n, "sums"));
    }
}

TEST_F(DeviceTopk, ScatterAddMatchesHost)
{
    for (bool zero_start : {true, false}) {
        for (std::size_t k : {std::size_t{0}, std::size_t{1}, std::size_t{101}, std::size_t{150}, std::size_t{777}}) {
            scatter_case<float>(stream_, 777, k, CC_COLL_F32, zero_start);
            scatter_case<double>(stream_, 777, k, CC_COLL_F64, zero_start);
            scatter_case<float>(stream_, 777, k, CC_COLL_F16, zero_start);
            scatter_case<float>(stream_, 777, k, CC_COLL_BF16, zero_start);
            if (HasFatalFailure()) return;
        }
    }
}

TEST_F(DeviceTopk, ScatterAddLarge)
{
    const std::size_t k = topk::k_for(0.01, kLarge);
    scatter_case<float>(stream_, kLarge, k, CC_COLL_F32, true);
    scatter_case<double>(stream_, kLarge, k + 1, CC_COLL_F64, true);
    scatter_case<float>(stream_, kLarge, k, CC_COLL_F16, false);
    scatter_case<float>(stream_, kLarge, k + 1, CC_COLL_BF16, false);
}

// ---------------------------------------------------------------- error feedback

// Rewrites every NaN among a payload's k values to one pattern. Device
// arithmetic returns the canonical NaN where the host keeps the input's NaN
// payload (docs/gpu.md: NaN payloads may differ, which elements are NaN may
// not), so payloads are compared after this.
void canonical_nans(std::vector<unsigned char> *payload, std::size_t k, cc_coll_dtype_t dtype)
{
    const std::size_t es = dtype_size(dtype);
    unsigned char *v = payload->data() + sizeof(topk::PayloadHeader) + k * sizeof(std::uint32_t);
    for (std::size_t j = 0; j < k; ++j, v += es) {
        bool nan = false;
        if (dtype == CC_COLL_F32) {
            float x;
            std::memcpy(&x, v, sizeof x);
            nan = std::isnan(x);
        } else if (dtype == CC_COLL_F64) {
            double x;
            std::memcpy(&x, v, sizeof x);
            nan = std::isnan(x);
        } else {
            std::uint16_t b;
            std::memcpy(&b, v, sizeof b);
            const std::uint16_t exp = dtype == CC_COLL_F16 ? 0x7c00 : 0x7f80;
            nan = (b & exp) == exp && (b & static_cast<std::uint16_t>(~exp & 0x7fff)) != 0;
        }
        if (nan) std::memset(v, 0x7f, es);
    }
}

// The device allreduce's TOPK steps on one rank (collectives/allreduce/sparse_allgather.cc on CudaExec): g' =
// e + input in the residual (gpu::load_input), select, encode, then the
// residual at the sent positions (gpu::keep_unsent); against the host's
// load_as, select, encode and keep_unsent. The residual and the payload must
// agree bit for bit (NaN values: in which elements, not in their payload),
// over several steps that carry the residual on.
template <typename W>
void ef_case(cudaStream_t stream, topk::cuda::SelectScratch *scratch, std::size_t n, cc_coll_dtype_t dtype)
{
    SCOPED_TRACE(::testing::Message() << "dtype " << dtype_name(dtype) << ", n = " << n);
    const std::size_t k = topk::k_for(0.01, n);
    const std::size_t es = dtype_size(dtype);
    const std::size_t bytes = topk::payload_bytes(k, dtype);
    std::vector<W> e = gaussian<W>(n, 70, 1e-2);  // the host's residual
    DeviceBuffer<W> de(e);
    DeviceBuffer<unsigned char> src(n * es);
    DeviceBuffer<std::uint32_t> idx(k);
    DeviceBuffer<W> sent(k);
    DeviceBuffer<unsigned char> payload(bytes);
    ASSERT_CUDA(de.status());
    ASSERT_CUDA(src.status());
    ASSERT_CUDA(idx.status());
    ASSERT_CUDA(sent.status());
    ASSERT_CUDA(payload.status());
    topk::SelectScratch host_scratch;
    for (int step = 0; step < 3; ++step) {
        SCOPED_TRACE(::testing::Message() << "step " << step);
        // The input in the call's dtype, with non-finite values at step 1.
        const std::vector<W> values = gaussian<W>(n, 80 + static_cast<std::uint64_t>(step), 0.5);
        std::vector<unsigned char> input(n * es);
        for (std::size_t i = 0; i < n; ++i) store_element<W>(input.data(), i, dtype, values[i]);
        if (step == 1) {
            store_element<W>(input.data(), 7, dtype, std::numeric_limits<W>::infinity());
            store_element<W>(input.data(), n / 2, dtype, -std::numeric_limits<W>::infinity());
            store_element<W>(input.data(), n - 1, dtype, std::numeric_limits<W>::quiet_NaN());
        }
        ASSERT_CUDA(src.upload(input));

        load_as<W>(input.data(), dtype, n, e.data(), true);
        std::vector<std::uint32_t> host_idx(k);
        topk::select<W>(e.data(), n, k, host_idx.data(), &host_scratch);
        std::vector<unsigned char> expected(bytes, 0);
        std::vector<W> host_sent(k);
        topk::encode<W>(e.data(), n, host_idx.data(), k, topk::nonfinite_overflow(e.data(), n, host_idx.data(), k),
                        dtype, expected.data(), host_sent.data());
        host::keep_unsent<W>(e.data(), 0, host_idx.data(), host_sent.data(), k);

        ASSERT_CUDA(payload.fill(kFill, stream));
        ASSERT_TRUE(ok(gpu::load_input<W>(src.get(), dtype, n, de.get(), true, stream)));
        ASSERT_TRUE(ok(topk::cuda::select<W>(de.get(), n, k, idx.get(), scratch, stream)));
        ASSERT_TRUE(ok(topk::cuda::encode<W>(de.get(), n, idx.get(), k, dtype, payload.get(), sent.get(), scratch,
                                             stream)));
        ASSERT_TRUE(ok(gpu::keep_unsent<W>(de.get(), idx.get(), sent.get(), k, stream)));
        std::vector<unsigned char> got;
        std::vector<W> residual;
        ASSERT_CUDA(payload.read(&got, stream));
        ASSERT_CUDA(de.read(&residual, stream));
        canonical_nans(&got, k, dtype);
        canonical_nans(&expected, k, dtype);
        EXPECT_TRUE(same_bits(got, expected, "payload bytes"));
        ASSERT_TRUE(same_bits(residual, e, "residual"));
        // The residual is finite wherever a sent value was subtracted.
        for (std::size_t j = 0; j < k; ++j) ASSERT_TRUE(std::isfinite(residual[host_idx[j]])) << "at " << host_idx[j];
    }
}

TEST_F(DeviceTopk, ErrorFeedbackResidualMatchesHost)
{
    for (std::size_t n : {std::size_t{1000}, std::size_t{100003}, kLarge}) {
        ef_case<float>(stream_, &scratch_, n, CC_COLL_F32);
        ef_case<double>(stream_, &scratch_, n, CC_COLL_F64);
        ef_case<float>(stream_, &scratch_, n, CC_COLL_F16);
        ef_case<float>(stream_, &scratch_, n, CC_COLL_BF16);
        if (HasFatalFailure()) return;
    }
}

// ---------------------------------------------------------------- threshold

// Magnitudes spread over the whole ladder, zeros, NaN, -inf, and values
// exactly on rungs and next to them.
template <typename W>
std::vector<W> ladder_input(std::size_t n, std::uint64_t seed)
{
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> exponent(-25.0, 1.0);
    std::vector<W> x(n);
    for (W &v : x) v = static_cast<W>(std::pow(10.0, exponent(rng)) * (rng() & 1 ? 1 : -1));
    for (std::size_t i = 0; i < n; i += 101) x[i] = W(0);
    for (std::size_t i = 3; i < n; i += 997) x[i] = std::numeric_limits<W>::quiet_NaN();
    for (std::size_t i = 5; i < n; i += 991) x[i] = -std::numeric_limits<W>::infinity();
    for (std::size_t i = 9; i < n; i += 127) x[i] = std::numeric_limits<W>::denorm_min();
    for (int r = 0; r < threshold::kRungs && 20 + 4 * static_cast<std::size_t>(r) + 3 < n; ++r) {
        const double t = threshold::rung(r);
        const std::size_t at = 20 + 4 * static_cast<std::size_t>(r);
        x[at] = static_cast<W>(t);
        x[at + 1] = static_cast<W>(-t);
        x[at + 2] = static_cast<W>(std::nextafter(t, 0.0));
        x[at + 3] = static_cast<W>(std::nextafter(t, 1.0));
    }
    return x;
}

TEST_F(DeviceThreshold, PickAndCollectFloat)
{
    for (std::size_t n : {std::size_t{1}, std::size_t{1000}, std::size_t{50000}, kLarge}) {
        SCOPED_TRACE(::testing::Message() << "n = " << n);
        expect_pick_and_collect(ladder_input<float>(n, 13 + n));
        if (HasFatalFailure()) return;
    }
}

TEST_F(DeviceThreshold, PickAndCollectDouble)
{
    for (std::size_t n : {std::size_t{1}, std::size_t{1000}, std::size_t{50000}, kLarge}) {
        SCOPED_TRACE(::testing::Message() << "n = " << n);
        expect_pick_and_collect(ladder_input<double>(n, 14 + n));
        if (HasFatalFailure()) return;
    }
}

// Gaussian gradients as the allreduce sees them (most mass between rungs).
TEST_F(DeviceThreshold, PickAndCollectGaussian)
{
    expect_pick_and_collect(gaussian<float>(kLarge, 15, 1e-4));
    if (HasFatalFailure()) return;
    expect_pick_and_collect(rounded_to(gaussian<float>(kLarge, 16, 1e-2), CC_COLL_F16));
    if (HasFatalFailure()) return;
    expect_pick_and_collect(gaussian<double>(kLarge, 17, 1e-6));
}

// collect at thresholds of its own: every rung, 0 (all kept), an element's
// own magnitude (kept: not below), +inf (only +-inf and NaN kept).
TEST_F(DeviceThreshold, CollectAtGivenThresholds)
{
    const std::vector<float> x = ladder_input<float>(50000, 18);
    DeviceBuffer<float> dx(x);
    ASSERT_CUDA(dx.status());
    std::vector<double> taus = {0.0, std::fabs(static_cast<double>(x[1000])), std::numeric_limits<double>::infinity()};
    for (int r = 0; r < threshold::kRungs; r += 7) taus.push_back(threshold::rung(r));
    for (double tau : taus) {
        expect_collect(x, dx, tau);
        if (HasFatalFailure()) return;
    }
}

TEST_F(DeviceThreshold, EmptyInput)
{
    double tau = -1.0;
    ASSERT_TRUE(ok(threshold::cuda::pick<float>(nullptr, 0, 0.5, &tau, &scratch_, stream_)));
    EXPECT_EQ(tau, threshold::pick<float>(nullptr, 0, 0.5));
    std::size_t count = 1;
    ASSERT_TRUE(ok(threshold::cuda::collect<float>(nullptr, 0, tau, nullptr, &count, &scratch_, stream_)));
    EXPECT_EQ(count, 0u);
}

}  // namespace
}  // namespace cc_coll::detail
