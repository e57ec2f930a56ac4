// The device count sketch (src/compressors/sketch/count_sketch_cuda.hpp) run
// on a GPU and compared with the host's (count_sketch.hpp) on the same data:
//  - bitmap_set: the bytes of the host's bitmap, in any index order;
//  - column_loads and rows_per_table: the host's column loads and rows per
//    table, bits at or beyond n ignored, the bitmap at any alignment;
//  - encode: bit for bit on integer-valued data (every order of additions
//    gives the same sums), within the rounding of the cell's additions in
//    some order on random data (atomics; float atomics flush subnormals);
//  - decode: on integer-valued data the host's output, residual sketch and
//    peeling statistics bit for bit; on random data the same bits on every
//    one of ten decodes of one sketch (every rank decodes the summed sketch
//    and must get the same result), and the host's output within the
//    tolerance of the mpirun suite (tests/gpu/gpu_allreduce.c, sketch_tol).
//    Cases cover the median fallback (sketches overloaded so that peeling
//    stalls), a first worklist just at and just above the size the single-
//    block small-rounds kernel takes, far above it, and a small-rounds run
//    that hands a grown round back to the grid-wide kernels.
//
// A kernel bug shows here as the first cell or element that differs, not as
// a distributed mismatch of the mpirun suite. Every test skips without a
// CUDA device.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include "compressors/sketch/count_sketch.hpp"
#include "compressors/sketch/count_sketch_cuda.hpp"
#include "compressors/sketch/count_sketch_hash.hpp"
#include "gpu/cuda_util.hpp"
#include "gpu/gpu.hpp"
#include "device_test_util.hpp"

namespace cc_coll::detail {
namespace {

using sketch::DecodeInfo;
using sketch::kBlock;
using sketch::Layout;

// 16 MiB of float and an odd tail: the mpirun suite's large tensors.
constexpr std::size_t kLarge = 4 * (std::size_t{1} << 20) + 17;
// The device decoder's round sizes (count_sketch_cuda.cu): a worklist of at
// most kSmallRound entries goes to the single-block kernel, which runs
// rounds until one grows beyond kLargeRound.
constexpr std::size_t kSmallRound = 4096;
constexpr std::size_t kLargeRound = 4 * kSmallRound;
// Decodes of one sketch that must give the same bits.
constexpr int kRuns = 10;

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

template <typename T>
std::string value_of(const T &v)
{
    if constexpr (std::is_floating_point_v<T>) {
        char text[40];
        std::snprintf(text, sizeof text, " (%.17g)", static_cast<double>(v));
        return hex_of(v) + text;
    } else {
        return hex_of(v);
    }
}

// got[0..count) equals expected[0..count) bit for bit; names the first
// element that differs.
template <typename T>
::testing::AssertionResult same_bits(const T *got, const T *expected, std::size_t count, const char *what,
                                     const char *other = "host")
{
    if (count == 0 || std::memcmp(got, expected, count * sizeof(T)) == 0) return ::testing::AssertionSuccess();
    std::size_t j = 0;
    while (std::memcmp(got + j, expected + j, sizeof(T)) == 0) ++j;
    std::size_t differing = 0;
    for (std::size_t i = j; i < count; ++i) differing += std::memcmp(got + i, expected + i, sizeof(T)) != 0 ? 1 : 0;
    return ::testing::AssertionFailure() << what << ": " << differing << " of " << count
                                         << " elements differ, the first at " << j << ": device "
                                         << value_of(got[j]) << ", " << other << " " << value_of(expected[j]);
}

template <typename T>
::testing::AssertionResult same_bits(const std::vector<T> &got, const std::vector<T> &expected, const char *what,
                                     const char *other = "host")
{
    if (got.size() != expected.size())
        return ::testing::AssertionFailure() << what << ": device has " << got.size() << " elements, " << other
                                             << " " << expected.size();
    return same_bits(got.data(), expected.data(), got.size(), what, other);
}

// |got[i] - want[i]| <= tol * (|want[i]| + max |want|) for every i, as the
// mpirun suite compares device and host results (expect_close_to_host).
template <typename W>
::testing::AssertionResult close_to(const std::vector<W> &got, const std::vector<W> &want, double tol,
                                    const char *what)
{
    if (got.size() != want.size())
        return ::testing::AssertionFailure() << what << ": device has " << got.size() << " elements, host "
                                             << want.size();
    double scale = 0;
    for (W w : want) scale = std::max(scale, std::fabs(static_cast<double>(w)));
    std::size_t first = got.size(), failing = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
        const double g = got[i], w = want[i];
        if (!(std::fabs(g - w) <= tol * (std::fabs(w) + scale))) {
            if (failing++ == 0) first = i;
        }
    }
    if (failing == 0) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << what << ": " << failing << " of " << got.size()
                                         << " elements beyond tolerance " << tol << " x (|host| + " << scale
                                         << "), the first at " << first << ": device " << value_of(got[first])
                                         << ", host " << value_of(want[first]);
}

// |got[c] - want[c]| <= bound[c] for every c.
template <typename W>
::testing::AssertionResult within(const std::vector<W> &got, const std::vector<W> &want,
                                  const std::vector<double> &bound, const char *what)
{
    std::size_t first = got.size(), failing = 0;
    for (std::size_t c = 0; c < got.size(); ++c)
        if (!(std::fabs(static_cast<double>(got[c]) - static_cast<double>(want[c])) <= bound[c])) {
            if (failing++ == 0) first = c;
        }
    if (failing == 0) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << what << ": " << failing << " of " << got.size()
                                         << " beyond the rounding of their sums, the first at " << first
                                         << ": device " << value_of(got[first]) << ", host " << value_of(want[first])
                                         << ", bound " << bound[first];
}

// Every byte of buf[from..) still holds `fill` (nothing written past the end
// of a result).
template <typename T>
::testing::AssertionResult untouched(const std::vector<T> &buf, std::size_t from, unsigned char fill, const char *what)
{
    const auto *bytes = reinterpret_cast<const unsigned char *>(buf.data());
    for (std::size_t b = from * sizeof(T); b < buf.size() * sizeof(T); ++b)
        if (bytes[b] != fill)
            return ::testing::AssertionFailure() << what << ": element " << b / sizeof(T) << " (past the " << from
                                                 << " expected) was written: " << hex_of(buf[b / sizeof(T)]);
    return ::testing::AssertionSuccess();
}

::testing::AssertionResult same_info(const DecodeInfo &got, const DecodeInfo &want, const char *other = "host")
{
    if (got.support == want.support && got.peeled == want.peeled && got.estimated == want.estimated)
        return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "decode info: device support " << got.support << " peeled " << got.peeled
                                         << " estimated " << got.estimated << ", " << other << " support "
                                         << want.support << " peeled " << want.peeled << " estimated "
                                         << want.estimated;
}

using device_test::DeviceBuffer;
using device_test::kFill;
using device_test::ok;
using device_test::kGuard;

// ---------------------------------------------------------------- inputs

enum class Data { SmallInts, Floats };

struct Case {
    std::size_t n;
    double density;
    double load_factor;
    std::uint64_t seed;
};

std::string case_name(const Case &cs)
{
    return "n " + std::to_string(cs.n) + " density " + std::to_string(cs.density) + " load " +
           std::to_string(cs.load_factor) + " seed " + std::to_string(cs.seed);
}

// A case's support (ascending), its bitmap, values at the support (small
// integers, whose sums are exact in any order, or Gaussian), the layout the
// sizing rule gives, and the host-encoded sketch.
template <typename W>
struct Input {
    std::vector<std::uint32_t> support;
    std::vector<std::uint8_t> bitmap;  // bitmap_bytes(n)
    std::vector<W> x;                  // n values, 0 off the support
    Layout layout;
    std::vector<W> sketch;
    std::string where;
};

std::vector<std::uint32_t> random_support(std::size_t n, double density, std::mt19937_64 &rng)
{
    std::vector<std::uint32_t> support;
    std::bernoulli_distribution keep(std::min(std::max(density, 0.0), 1.0));
    for (std::size_t i = 0; i < n; ++i)
        if (density >= 1.0 || keep(rng)) support.push_back(static_cast<std::uint32_t>(i));
    return support;
}

template <typename W>
std::vector<W> values_at(std::size_t n, const std::vector<std::uint32_t> &support, Data data, std::mt19937_64 &rng)
{
    std::vector<W> x(n, W(0));
    std::uniform_int_distribution<int> ints(-8, 8);
    std::normal_distribution<double> normal(0.0, 1.0);
    for (std::uint32_t i : support) x[i] = data == Data::SmallInts ? static_cast<W>(ints(rng)) : static_cast<W>(normal(rng));
    return x;
}

// The support and the layout seed come first from the case's generator, so a
// case has the same support and layout for every data kind and work type.
template <typename W>
Input<W> input_for(const std::vector<std::uint32_t> &support, const Layout &layout, Data data, std::mt19937_64 &rng,
                   const std::string &where)
{
    Input<W> in;
    in.support = support;
    in.bitmap.assign(sketch::bitmap_bytes(layout.n), 0);
    sketch::bitmap_set(in.bitmap.data(), support.data(), support.size());
    in.x = values_at<W>(layout.n, support, data, rng);
    in.layout = layout;
    in.sketch.assign(layout.cells(), W(0));
    sketch::encode<W>(layout, in.x.data(), support.data(), support.size(), in.sketch.data());
    in.where = where + " m " + std::to_string(layout.m) + (data == Data::SmallInts ? ", small integers" : ", Gaussian") +
               (sizeof(W) == 4 ? ", float" : ", double");
    return in;
}

template <typename W>
Input<W> make_input(const Case &cs, Data data)
{
    std::mt19937_64 rng(cs.seed);
    const std::vector<std::uint32_t> support = random_support(cs.n, cs.density, rng);
    std::vector<std::uint8_t> bitmap(sketch::bitmap_bytes(cs.n), 0);
    sketch::bitmap_set(bitmap.data(), support.data(), support.size());
    Layout layout;
    layout.n = cs.n;
    layout.seed = rng();
    layout.m = sketch::rows_per_table(bitmap.data(), cs.n, cs.load_factor);
    return input_for<W>(support, layout, data, rng, case_name(cs));
}

// The bitmap as the device gets it: `offset` bytes of 0xff before it (a
// misaligned bitmap for offset % 4 != 0), then its bytes, then a 0xff byte
// (the allreduce's non-finite flag byte sits there) and 0xff up to a
// multiple of 4 bytes and beyond. With `poison_tail`, the bits at and beyond
// n in its last byte are set too. None of it may count.
std::vector<std::uint8_t> device_bitmap(const std::vector<std::uint8_t> &bitmap, std::size_t n, std::size_t offset,
                                        bool poison_tail)
{
    std::vector<std::uint8_t> bytes(offset + (bitmap.size() + 1 + 3) / 4 * 4 + 8, 0xff);
    std::copy(bitmap.begin(), bitmap.end(), bytes.begin() + static_cast<std::ptrdiff_t>(offset));
    if (poison_tail && n % 8) bytes[offset + n / 8] |= static_cast<std::uint8_t>(0xffu << (n % 8));
    return bytes;
}

// The host's column loads of a support: elements at each offset of a block.
std::vector<std::uint32_t> host_loads(const std::vector<std::uint32_t> &support)
{
    std::vector<std::uint32_t> loads(kBlock, 0);
    for (std::uint32_t i : support) ++loads[i % kBlock];
    return loads;
}

// Per cell, the bound on |device - host| of its sum over the positions
// idx[0..k): two sums of the same `count` terms in different orders differ
// by at most (count - 1) eps sum |terms| (first order), and the device's
// float atomics may also flush a subnormal term or partial sum each time
// (less than the smallest normal, for each of `count` additions).
template <typename W>
std::vector<double> sum_bounds(const Layout &layout, const std::vector<W> &x, const std::vector<std::uint32_t> &idx)
{
    const std::size_t cells = layout.cells();
    std::vector<double> count(cells, 0), magnitude(cells, 0);
    const sketch::Hasher hasher(layout.seed, layout.m);
    for (std::uint32_t i : idx) {
        const sketch::ElementHits e = sketch::element_hits(hasher, i);
        for (std::uint32_t j = 0; j < 3; ++j) {
            count[e.cell[j]] += 1;
            magnitude[e.cell[j]] += std::fabs(static_cast<double>(x[i]));
        }
    }
    const double eps = std::numeric_limits<W>::epsilon(), tiny = std::numeric_limits<W>::min();
    std::vector<double> bound(cells);
    for (std::size_t c = 0; c < cells; ++c) bound[c] = count[c] * eps * magnitude[c] + 2 * count[c] * tiny;
    return bound;
}

// The device decoder's worklist, round by round (the entries of each round:
// the cells pure at the start, then those whose count dropped from 2 to 1 in
// the previous round, emptied ones included), by the claim rule of
// count_sketch_hash.hpp on plain counts.
std::vector<std::size_t> round_sizes(const Layout &layout, const std::vector<std::uint32_t> &support)
{
    const std::size_t cells = layout.cells();
    const sketch::Hasher hasher(layout.seed, layout.m);
    std::vector<std::uint32_t> count(cells, 0), key(cells, 0), work, next, claimed;
    for (std::uint32_t i : support) {
        const sketch::ElementHits e = sketch::element_hits(hasher, i);
        for (std::uint32_t j = 0; j < 3; ++j) {
            ++count[e.cell[j]];
            key[e.cell[j]] ^= i;
        }
    }
    for (std::size_t c = 0; c < cells; ++c)
        if (count[c] == 1) work.push_back(static_cast<std::uint32_t>(c));
    std::vector<std::size_t> sizes;
    while (!work.empty()) {
        sizes.push_back(work.size());
        claimed.clear();
        for (std::uint32_t c : work) {
            if (count[c] != 1) continue;
            const sketch::ElementHits e = sketch::element_hits(hasher, key[c]);
            bool lowest = true;
            for (std::uint32_t j = 0; j < 3 && e.cell[j] != c; ++j) lowest = lowest && count[e.cell[j]] != 1;
            if (lowest) claimed.push_back(c);
        }
        next.clear();
        for (std::uint32_t c : claimed) {
            const std::uint32_t i = key[c];
            const sketch::ElementHits e = sketch::element_hits(hasher, i);
            count[c] = 0;
            key[c] = 0;
            for (std::uint32_t j = 0; j < 3; ++j) {
                const std::uint32_t cj = e.cell[j];
                if (cj == c) continue;
                key[cj] ^= i;
                if (count[cj]-- == 2) next.push_back(cj);
            }
        }
        work.swap(next);
    }
    return sizes;
}

// Which of the decoder's paths a worklist of these round sizes takes.
struct Paths {
    bool small_first = false;  // the first round goes to the small-rounds kernel
    bool grid = false;         // a round runs on the grid-wide kernels
    bool small = false;        // the small-rounds kernel runs
    bool handback = false;     // the small-rounds kernel gives a grown round back to the grid
};

Paths paths_of(const std::vector<std::size_t> &sizes)
{
    Paths p;
    p.small_first = !sizes.empty() && sizes[0] <= kSmallRound;
    for (std::size_t r = 0; r < sizes.size();) {
        if (sizes[r] > kSmallRound) {
            p.grid = true;
            ++r;
            continue;
        }
        p.small = true;
        while (r < sizes.size() && sizes[r] <= kLargeRound) ++r;
        if (r < sizes.size()) p.handback = true;
    }
    return p;
}

std::string sizes_text(const std::vector<std::size_t> &sizes)
{
    std::string s = std::to_string(sizes.size()) + " rounds:";
    for (std::size_t r = 0; r < sizes.size() && r < 40; ++r) s += " " + std::to_string(sizes[r]);
    return s;
}

// A support of n positions (drawn at random, one at a time) and layout
// (n, m, some seed) whose first worklist (cells holding one element) has at
// most `target` entries, and the same support with one more position, whose
// first worklist has more. Seeds are tried until the first worklist of the
// smaller one is exactly `target` long.
struct AroundTarget {
    Layout layout;
    std::vector<std::uint32_t> below, above;  // ascending
    std::size_t pure_below = 0, pure_above = 0;
};

AroundTarget around_target(std::size_t n, std::uint32_t m, std::size_t target)
{
    AroundTarget best;
    for (std::uint64_t seed = 1; seed <= 64; ++seed) {
        AroundTarget a;
        a.layout.n = n;
        a.layout.m = m;
        a.layout.seed = 0x5eed0000 + seed;
        const sketch::Hasher hasher(a.layout.seed, m);
        std::mt19937_64 rng(seed);
        std::vector<std::uint8_t> used(n, 0);
        std::vector<std::uint32_t> count(a.layout.cells(), 0), order;
        std::size_t pure = 0;
        while (order.size() < n) {
            const auto i = static_cast<std::uint32_t>(rng() % n);
            if (used[i]) continue;
            used[i] = 1;
            order.push_back(i);
            const std::size_t before = pure;
            const sketch::ElementHits e = sketch::element_hits(hasher, i);
            for (std::uint32_t j = 0; j < 3; ++j) {
                const std::uint32_t c = e.cell[j];
                if (count[c] == 0) ++pure;
                else if (count[c] == 1) --pure;
                ++count[c];
            }
            if (pure > target) {
                a.pure_below = before;
                a.pure_above = pure;
                break;
            }
        }
        if (a.pure_above == 0) continue;  // never more than target
        a.above = order;
        a.below.assign(order.begin(), order.end() - 1);
        std::sort(a.above.begin(), a.above.end());
        std::sort(a.below.begin(), a.below.end());
        if (best.above.empty() || a.pure_below == target) best = std::move(a);
        if (best.pure_below == target) break;
    }
    return best;
}

// ---------------------------------------------------------------- fixture

class DeviceSketch : public device_test::StreamTest {
protected:
    // bitmap_set of idx (any order, repeats allowed) into a zeroed device
    // bitmap of bitmap_bytes(n) rounded up to 4 bytes, against the host's.
    void expect_bitmap(std::size_t n, const std::vector<std::uint32_t> &idx)
    {
        SCOPED_TRACE(::testing::Message() << "bitmap_set, n = " << n << ", k = " << idx.size());
        const std::size_t bytes = sketch::bitmap_bytes(n), padded = (bytes + 3) / 4 * 4;
        std::vector<std::uint8_t> expected(padded, 0);
        sketch::bitmap_set(expected.data(), idx.data(), idx.size());
        DeviceBuffer<std::uint32_t> didx(idx);
        DeviceBuffer<std::uint8_t> bitmap(padded + kGuard);
        ASSERT_CUDA(didx.status());
        ASSERT_CUDA(bitmap.status());
        ASSERT_CUDA(bitmap.fill(kFill, stream_));
        ASSERT_CUDA(cudaMemsetAsync(bitmap.get(), 0, padded, stream_));
        ASSERT_TRUE(ok(sketch::cuda::bitmap_set(bitmap.get(), didx.get(), idx.size(), stream_)));
        std::vector<std::uint8_t> got;
        ASSERT_CUDA(bitmap.read(&got, stream_));
        EXPECT_TRUE(same_bits(got.data(), expected.data(), padded, "bitmap bytes"));
        EXPECT_TRUE(untouched(got, padded, kFill, "bitmap buffer"));
    }

    // column_loads and rows_per_table of a support's bitmap (copied to the
    // device at `offset`, poisoned around, see device_bitmap) against the
    // host's loads and rows_per_table at several load factors.
    void expect_sizing(std::size_t n, const std::vector<std::uint32_t> &support, std::size_t offset)
    {
        SCOPED_TRACE(::testing::Message() << "sizing, n = " << n << ", support " << support.size() << ", offset "
                                          << offset);
        std::vector<std::uint8_t> bitmap(sketch::bitmap_bytes(n), 0);
        sketch::bitmap_set(bitmap.data(), support.data(), support.size());
        const std::vector<std::uint32_t> expected = host_loads(support);
        DeviceBuffer<std::uint8_t> dbm(device_bitmap(bitmap, n, offset, true));
        DeviceBuffer<std::uint32_t> loads(kBlock + kGuard);
        ASSERT_CUDA(dbm.status());
        ASSERT_CUDA(loads.status());
        ASSERT_CUDA(loads.fill(kFill, stream_));
        ASSERT_TRUE(ok(sketch::cuda::column_loads(dbm.get() + offset, n, loads.get(), stream_)));
        std::vector<std::uint32_t> got;
        ASSERT_CUDA(loads.read(&got, stream_));
        EXPECT_TRUE(same_bits(got.data(), expected.data(), kBlock, "column loads"));
        EXPECT_TRUE(untouched(got, kBlock, kFill, "loads buffer"));

        gpu::PinnedArray<std::uint32_t> host;
        ASSERT_TRUE(ok(host.reserve(kBlock)));
        for (double f : {0.8, 0.5, 1.0, 2.5, 1e-9, 0.0, std::numeric_limits<double>::quiet_NaN()}) {
            std::fill(host.data(), host.data() + kBlock, 0xa5a5a5a5u);
            ASSERT_CUDA(loads.fill(kFill, stream_));
            std::uint32_t m = 0;
            ASSERT_TRUE(ok(sketch::cuda::rows_per_table(dbm.get() + offset, n, f, loads.get(), host.data(), &m,
                                                        stream_)));
            EXPECT_EQ(m, sketch::rows_per_table(bitmap.data(), n, f)) << "load factor " << f;
            EXPECT_TRUE(same_bits(host.data(), expected.data(), kBlock, "rows_per_table's host loads"));
        }
    }

    // encode over idx (in its order) into a zeroed device sketch against the
    // host's encode: bit for bit for small integers, within the rounding of
    // each cell's sum otherwise; nothing written past the cells.
    template <typename W>
    void expect_encode(const Input<W> &in, const std::vector<std::uint32_t> &idx, Data data)
    {
        SCOPED_TRACE(::testing::Message() << "encode, " << in.where << ", k = " << idx.size());
        const std::size_t cells = in.layout.cells();
        std::vector<W> expected(cells, W(0));
        sketch::encode<W>(in.layout, in.x.data(), idx.data(), idx.size(), expected.data());
        DeviceBuffer<W> dx(in.x);
        DeviceBuffer<std::uint32_t> didx(idx);
        DeviceBuffer<W> dsk(cells + kGuard);
        ASSERT_CUDA(dx.status());
        ASSERT_CUDA(didx.status());
        ASSERT_CUDA(dsk.status());
        ASSERT_CUDA(dsk.fill(kFill, stream_));
        ASSERT_CUDA(cudaMemsetAsync(dsk.get(), 0, cells * sizeof(W), stream_));
        ASSERT_TRUE(ok(sketch::cuda::encode<W>(in.layout, dx.get(), didx.get(), idx.size(), dsk.get(), stream_)));
        std::vector<W> got;
        ASSERT_CUDA(dsk.read(&got, stream_));
        EXPECT_TRUE(untouched(got, cells, kFill, "sketch buffer"));
        got.resize(cells);
        if (data == Data::SmallInts)
            EXPECT_TRUE(same_bits(got, expected, "sketch cells"));
        else
            EXPECT_TRUE(within(got, expected, sum_bounds(in.layout, in.x, idx), "sketch cells"));
    }

    // Decodes in.sketch on the device `runs` times (the last with a decoder
    // scratch of its own, the others with the fixture's, reused as the
    // allreduce reuses it, over garbage-filled outputs) and checks: every
    // decode gives the first one's output, residual sketch and statistics bit
    // for bit; the first one gives sketch::decode's statistics, and its
    // output (bit for bit with the residual sketch for small integers, within
    // the mpirun suite's tolerance otherwise); nothing is written past out[n
    // - 1]. The bitmap is read at `offset` from an aligned buffer. Returns
    // the device's statistics.
    template <typename W>
    DecodeInfo expect_decode(const Input<W> &in, Data data, int runs, std::size_t offset = 0)
    {
        const std::size_t n = in.layout.n;
        SCOPED_TRACE(::testing::Message() << "decode, " << in.where << ", bitmap offset " << offset);
        std::vector<W> host_sketch = in.sketch, host_out(n, W(7));
        sketch::DecodeScratch host_scratch;
        const DecodeInfo host_info =
            sketch::decode<W>(in.layout, in.bitmap.data(), host_sketch.data(), host_out.data(), &host_scratch);
        EXPECT_EQ(host_info.support, in.support.size());

        DecodeInfo first_info;
        DeviceBuffer<std::uint8_t> dbm(device_bitmap(in.bitmap, n, offset, offset != 0));
        DeviceBuffer<W> dsk(in.sketch.size());
        DeviceBuffer<W> dout(n + kGuard);
        EXPECT_EQ(dbm.status(), cudaSuccess);
        EXPECT_EQ(dsk.status(), cudaSuccess);
        EXPECT_EQ(dout.status(), cudaSuccess);
        if (dbm.status() != cudaSuccess || dsk.status() != cudaSuccess || dout.status() != cudaSuccess)
            return first_info;
        const double tol = sizeof(W) == 4 ? 1e-5 : 1e-12;  // tests/gpu/gpu_allreduce.c, sketch_tol
        std::vector<W> first_out, first_sketch;
        for (int r = 0; r < runs; ++r) {
            SCOPED_TRACE(::testing::Message() << "run " << r);
            sketch::cuda::DecodeScratch own;
            sketch::cuda::DecodeScratch *scratch = r == runs - 1 && r > 0 ? &own : &scratch_;
            EXPECT_EQ(dsk.upload(in.sketch), cudaSuccess);
            EXPECT_EQ(dout.fill(kFill, stream_), cudaSuccess);
            DecodeInfo info;
            info.support = info.peeled = info.estimated = 12345;
            const gpu::Result res =
                sketch::cuda::decode<W>(in.layout, dbm.get() + offset, dsk.get(), dout.get(), scratch, &info, stream_);
            EXPECT_TRUE(ok(res));
            if (!res.ok()) return first_info;
            std::vector<W> out, residual;
            EXPECT_EQ(dout.read(&out, stream_), cudaSuccess);
            EXPECT_EQ(dsk.read(&residual, stream_), cudaSuccess);
            EXPECT_TRUE(untouched(out, n, kFill, "output buffer"));
            out.resize(n);
            if (r == 0) {
                first_info = info;
                first_out = out;
                first_sketch = residual;
                EXPECT_TRUE(same_info(info, host_info));
                if (data == Data::SmallInts) {
                    EXPECT_TRUE(same_bits(out, host_out, "decoded values"));
                    EXPECT_TRUE(same_bits(residual, host_sketch, "residual sketch"));
                } else {
                    EXPECT_TRUE(close_to(out, host_out, tol, "decoded values"));
                }
            } else {
                // Any difference here is a race in the decoder.
                EXPECT_TRUE(same_info(info, first_info, "first run"));
                EXPECT_TRUE(same_bits(out, first_out, "decoded values, against the first run", "first run"));
                EXPECT_TRUE(same_bits(residual, first_sketch, "residual sketch, against the first run", "first run"));
            }
            if (HasFailure()) break;
        }
        return first_info;
    }

    template <typename W>
    DecodeInfo expect_decode(const Case &cs, Data data, int runs, std::size_t offset = 0)
    {
        return expect_decode<W>(make_input<W>(cs, data), data, runs, offset);
    }

    sketch::cuda::DecodeScratch scratch_;  // reused across calls, as the allreduce does
};

// ---------------------------------------------------------------- bitmap and sizing

const std::size_t kSizes[] = {1, 7, 31, 32, 33, 1000, 1023, 1024, 1025, 65553, 300007, kLarge};

TEST_F(DeviceSketch, BitmapSetMatchesHost)
{
    std::mt19937_64 rng(1);
    for (std::size_t n : kSizes) {
        for (double density : {0.01, 0.3, 1.0}) {
            std::vector<std::uint32_t> idx = random_support(n, density, rng);
            expect_bitmap(n, idx);
            if (HasFatalFailure()) return;
            // Any order, with repeats (atomic ors).
            std::shuffle(idx.begin(), idx.end(), rng);
            for (std::size_t r = 0; r < idx.size() / 7; ++r) idx.push_back(idx[r * 5 % idx.size()]);
            expect_bitmap(n, idx);
            if (HasFatalFailure()) return;
        }
    }
    // The last position of a bitmap whose size is not a multiple of 4 bytes.
    expect_bitmap(8 * 4 * 3 + 9, {8 * 4 * 3 + 8});
}

TEST_F(DeviceSketch, BitmapSetEmptyAndMisaligned)
{
    // k == 0 launches nothing and reads nothing.
    ASSERT_TRUE(ok(sketch::cuda::bitmap_set(nullptr, nullptr, 0, stream_)));
    DeviceBuffer<std::uint8_t> bitmap(16);
    DeviceBuffer<std::uint32_t> idx(std::vector<std::uint32_t>{3});
    ASSERT_CUDA(bitmap.status());
    ASSERT_CUDA(idx.status());
    ASSERT_CUDA(bitmap.fill(0, stream_));
    const gpu::Result r = sketch::cuda::bitmap_set(bitmap.get() + 1, idx.get(), 1, stream_);
    EXPECT_FALSE(r.ok());
    EXPECT_EQ(r.code, static_cast<int>(cudaErrorMisalignedAddress));
    // The failure was not a launch: the next call on the context works.
    ASSERT_TRUE(ok(sketch::cuda::bitmap_set(bitmap.get() + 4, idx.get(), 1, stream_)));
    std::vector<std::uint8_t> got;
    ASSERT_CUDA(bitmap.read(&got, stream_));
    const std::vector<std::uint8_t> expected = {0, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    EXPECT_TRUE(same_bits(got, expected, "bitmap bytes"));
}

TEST_F(DeviceSketch, ColumnLoadsAndRowsMatchHost)
{
    std::mt19937_64 rng(2);
    expect_sizing(0, {}, 0);
    if (HasFatalFailure()) return;
    for (std::size_t n : kSizes) {
        for (double density : {0.0, 0.02, 0.5, 1.0}) {
            const std::vector<std::uint32_t> support = random_support(n, density, rng);
            for (std::size_t offset : {std::size_t{0}, std::size_t{1}, std::size_t{3}}) {
                expect_sizing(n, support, offset);
                if (HasFatalFailure()) return;
            }
        }
    }
    // One column far fuller than the others: m from the maximum, large.
    std::vector<std::uint32_t> column;
    for (std::size_t b = 0; b < kLarge / kBlock; ++b) column.push_back(static_cast<std::uint32_t>(b * kBlock + 517));
    expect_sizing(kLarge, column, 0);
}

// ---------------------------------------------------------------- encode

std::vector<Case> encode_cases()
{
    return {
        {1, 1.0, 0.8, 1},           {33, 0.5, 0.8, 2},          {1000, 0.3, 0.8, 3},      {1025, 1.0, 0.75, 4},
        {65553, 0.01, 0.75, 5},     {300007, 0.2, 0.8, 6},      {400000, 1.0, 0.8, 7},    // m > kFullRotationRows
        {kLarge, 0.01, 0.8, 8},     {kLarge, 0.0005, 0.8, 9},   // tiles beyond the hashed window
        {kLarge, 0.3, 0.8, 10},
    };
}

class DeviceSketchEncode : public DeviceSketch {
public:
    template <typename W>
    void run(Data data)
    {
        for (const Case &cs : encode_cases()) {
            const Input<W> in = make_input<W>(cs, data);
            expect_encode(in, in.support, data);
            if (HasFatalFailure()) return;
            // Unsorted positions (tiles spanning any blocks: hashed per
            // position), and descending ones.
            std::vector<std::uint32_t> order = in.support;
            std::mt19937_64 rng(cs.seed + 100);
            std::shuffle(order.begin(), order.end(), rng);
            expect_encode(in, order, data);
            if (HasFatalFailure()) return;
            std::sort(order.rbegin(), order.rend());
            expect_encode(in, order, data);
            if (HasFatalFailure()) return;
        }
    }
};

TEST_F(DeviceSketchEncode, SmallIntsExactFloat) { run<float>(Data::SmallInts); }

TEST_F(DeviceSketchEncode, SmallIntsExactDouble) { run<double>(Data::SmallInts); }

TEST_F(DeviceSketchEncode, GaussianWithinRoundingFloat) { run<float>(Data::Floats); }

TEST_F(DeviceSketchEncode, GaussianWithinRoundingDouble) { run<double>(Data::Floats); }

// Subnormal values and values whose sums fall below the normal range: float
// atomics may flush them, by less than the smallest normal per addition.
TEST_F(DeviceSketchEncode, SubnormalsFloat)
{
    Input<float> in = make_input<float>(Case{65553, 0.3, 0.8, 11}, Data::Floats);
    const float tiny = std::numeric_limits<float>::min();
    for (std::size_t p = 0; p < in.support.size(); ++p) {
        float &v = in.x[in.support[p]];
        if (p % 3 == 0) v = std::numeric_limits<float>::denorm_min() * static_cast<float>(p % 1000);
        else if (p % 3 == 1) v = tiny * (p % 2 ? 1.5f : -1.25f);
    }
    expect_encode(in, in.support, Data::Floats);
}

TEST_F(DeviceSketchEncode, EmptyAndAccumulating)
{
    // k == 0 launches nothing and reads nothing.
    Layout layout;
    layout.n = 10;
    ASSERT_TRUE(ok(sketch::cuda::encode<float>(layout, nullptr, nullptr, 0, nullptr, stream_)));
    // Three ranks' values on one support encoded into one sketch: the sum of
    // the host's three encodes (the sketch is added to, not overwritten).
    Input<double> in = make_input<double>(Case{300007, 0.1, 0.8, 12}, Data::SmallInts);
    std::vector<double> expected(in.layout.cells(), 0.0);
    DeviceBuffer<double> dsk(in.layout.cells());
    DeviceBuffer<std::uint32_t> didx(in.support);
    ASSERT_CUDA(dsk.status());
    ASSERT_CUDA(didx.status());
    ASSERT_CUDA(dsk.fill(0, stream_));
    std::mt19937_64 rng(13);
    for (int rank = 0; rank < 3; ++rank) {
        const std::vector<double> x = values_at<double>(in.layout.n, in.support, Data::SmallInts, rng);
        sketch::encode<double>(in.layout, x.data(), in.support.data(), in.support.size(), expected.data());
        DeviceBuffer<double> dx(x);
        ASSERT_CUDA(dx.status());
        ASSERT_TRUE(ok(sketch::cuda::encode<double>(in.layout, dx.get(), didx.get(), in.support.size(), dsk.get(),
                                                    stream_)));
        ASSERT_CUDA(cudaStreamSynchronize(stream_));  // before dx is freed
    }
    std::vector<double> got;
    ASSERT_CUDA(dsk.read(&got, stream_));
    EXPECT_TRUE(same_bits(got, expected, "summed sketch cells"));
}

// ---------------------------------------------------------------- decode

std::vector<Case> decode_cases()
{
    return {
        {1, 1.0, 0.8, 21},         {1, 0.0, 0.8, 22},          {31, 1.0, 0.8, 23},       {33, 0.5, 0.8, 24},
        {1000, 0.3, 0.8, 25},      {1024, 1.0, 0.75, 26},      {5000, 1.0, 0.75, 27},    {65553, 0.01, 0.75, 28},
        {200000, 0.05, 0.8, 29},   {300000, 0.9, 0.8, 30},     {120000, 0.2, 0.9, 31},   {400000, 1.0, 0.8, 32},
        {100000, 0.0, 0.8, 33},    {kLarge, 0.01, 0.8, 34},    {kLarge, 0.3, 0.8, 35},
    };
}

TEST_F(DeviceSketch, DecodeSmallIntsMatchesHostFloat)
{
    for (const Case &cs : decode_cases()) {
        expect_decode<float>(cs, Data::SmallInts, 1);
        if (HasFailure()) return;
    }
}

TEST_F(DeviceSketch, DecodeSmallIntsMatchesHostDouble)
{
    for (const Case &cs : decode_cases()) {
        expect_decode<double>(cs, Data::SmallInts, 1);
        if (HasFailure()) return;
    }
}

// Random values: every decode of one sketch gives the same bits, close to
// the host's.
TEST_F(DeviceSketch, DecodeGaussianDeterministicFloat)
{
    for (const Case &cs : decode_cases()) {
        expect_decode<float>(cs, Data::Floats, kRuns);
        if (HasFailure()) return;
    }
}

TEST_F(DeviceSketch, DecodeGaussianDeterministicDouble)
{
    for (const Case &cs : decode_cases()) {
        expect_decode<double>(cs, Data::Floats, kRuns);
        if (HasFailure()) return;
    }
}

// A misaligned bitmap with set bits past n (read byte by byte at its end).
TEST_F(DeviceSketch, DecodeMisalignedBitmap)
{
    for (const Case &cs : {Case{65553, 0.05, 0.8, 41}, Case{1029, 1.0, 0.8, 42}}) {
        expect_decode<float>(cs, Data::SmallInts, 1, 1);
        expect_decode<double>(cs, Data::Floats, 2, 3);
        if (HasFailure()) return;
    }
}

// Overloaded sketches: peeling stalls and the rest gets the median of three.
TEST_F(DeviceSketch, DecodeMedianFallback)
{
    // Dense blocks at the load limit; sparse supports far beyond it; m just
    // beyond kFullRotationRows.
    const Case cases[] = {{5000, 1.0, 0.75, 27}, {200000, 0.3, 1.5, 52}, {300007, 1.0, 1.0, 55},
                          {kLarge, 0.05, 2.0, 54}};
    for (const Case &cs : cases) {
        DecodeInfo info = expect_decode<float>(cs, Data::SmallInts, 1);
        EXPECT_GT(info.estimated, 0u) << "test setup: " << case_name(cs) << " must leave estimates";
        info = expect_decode<double>(cs, Data::SmallInts, 1);
        EXPECT_GT(info.estimated, 0u) << "test setup: " << case_name(cs) << " must leave estimates";
        expect_decode<float>(cs, Data::Floats, kRuns);
        expect_decode<double>(cs, Data::Floats, kRuns);
        if (HasFailure()) return;
    }
}

// First worklists at kSmallRound entries or fewer (the small-rounds kernel
// from the start) and one more (a grid-wide round first).
TEST_F(DeviceSketch, DecodeAroundSmallRoundThreshold)
{
    const AroundTarget a = around_target(std::size_t{1} << 20, 8, kSmallRound);
    ASSERT_FALSE(a.above.empty()) << "test setup: no support with a first worklist beyond " << kSmallRound;
    const std::vector<std::size_t> below = round_sizes(a.layout, a.below), above = round_sizes(a.layout, a.above);
    SCOPED_TRACE(::testing::Message() << "first worklists " << a.pure_below << " and " << a.pure_above);
    ASSERT_FALSE(below.empty());
    ASSERT_FALSE(above.empty());
    EXPECT_EQ(below[0], a.pure_below);
    EXPECT_EQ(above[0], a.pure_above);
    EXPECT_TRUE(paths_of(below).small_first) << sizes_text(below);
    EXPECT_FALSE(paths_of(above).small_first) << sizes_text(above);
    EXPECT_TRUE(paths_of(above).small) << sizes_text(above);
    std::mt19937_64 rng(61);
    for (const std::vector<std::uint32_t> *support : {&a.below, &a.above}) {
        const std::string where = "support " + std::to_string(support->size()) + " of n " + std::to_string(a.layout.n);
        expect_decode(input_for<float>(*support, a.layout, Data::SmallInts, rng, where), Data::SmallInts, 1);
        expect_decode(input_for<double>(*support, a.layout, Data::SmallInts, rng, where), Data::SmallInts, 1);
        expect_decode(input_for<float>(*support, a.layout, Data::Floats, rng, where), Data::Floats, kRuns);
        expect_decode(input_for<double>(*support, a.layout, Data::Floats, rng, where), Data::Floats, kRuns);
        if (HasFailure()) return;
    }
}

// Far above the threshold: large rounds on the grid-wide kernels (several
// subtraction passes each), then the small-rounds kernel; and a run of the
// small-rounds kernel whose rounds grow beyond kLargeRound (near the
// peeling threshold, rounds shrink to a bottleneck and grow again), back to
// the grid.
TEST_F(DeviceSketch, DecodeLargeRoundsAndHandback)
{
    const Case cases[] = {{kLarge, 0.95, 0.8, 71}, {300000, 1.0, 0.8, 72}};
    for (int k = 0; k < 2; ++k) {
        const Case &cs = cases[k];
        const bool handback = k == 1;
        const Input<float> probe = make_input<float>(cs, Data::SmallInts);
        const std::vector<std::size_t> sizes = round_sizes(probe.layout, probe.support);
        const Paths p = paths_of(sizes);
        EXPECT_TRUE(p.grid && p.small) << "test setup: " << case_name(cs) << ": " << sizes_text(sizes);
        if (handback) EXPECT_TRUE(p.handback) << "test setup: " << case_name(cs) << ": " << sizes_text(sizes);
        else EXPECT_GT(sizes[0], 100 * kSmallRound) << sizes_text(sizes);
        expect_decode(probe, Data::SmallInts, 1);
        expect_decode<double>(cs, Data::SmallInts, 1);
        expect_decode<float>(cs, Data::Floats, kRuns);
        expect_decode<double>(cs, Data::Floats, kRuns);
        if (HasFailure()) return;
    }
}

// n == 0 returns at once; a support of one element.
TEST_F(DeviceSketch, DecodeTiny)
{
    Layout layout;
    layout.n = 0;
    DecodeInfo info;
    info.support = info.peeled = info.estimated = 9;
    ASSERT_TRUE(ok(sketch::cuda::decode<float>(layout, nullptr, nullptr, nullptr, &scratch_, &info, stream_)));
    EXPECT_TRUE(same_info(info, DecodeInfo{}, "empty"));
    for (std::size_t n : {std::size_t{1}, std::size_t{2}, std::size_t{1025}}) {
        std::mt19937_64 rng(80 + n);
        Layout one;
        one.n = n;
        one.m = 1;
        one.seed = rng();
        const std::string where = "one element of n " + std::to_string(n);
        const std::vector<std::uint32_t> support = {static_cast<std::uint32_t>(n - 1)};
        const DecodeInfo got = expect_decode(input_for<float>(support, one, Data::Floats, rng, where), Data::Floats, 2);
        EXPECT_EQ(got.peeled, 1u);
        expect_decode(input_for<double>(support, one, Data::SmallInts, rng, where), Data::SmallInts, 1);
        if (HasFailure()) return;
    }
}

}  // namespace
}  // namespace cc_coll::detail
