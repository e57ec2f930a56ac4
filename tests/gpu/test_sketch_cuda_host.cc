// The device count sketch's host-testable parts (count_sketch_hash.hpp),
// without a GPU:
//  - the shared hashing against the host's hits() (and against a checksum
//    of hits() taken before the hashing moved into the shared header, so
//    host sketches stay bit for bit what they were);
//  - the device's bitmap word reads;
//  - the device decoder's round-based peeling, emulated on the host with
//    the very per-cell steps the kernels run (claim pass, peel pass, then
//    subtraction and bid passes, per round; plain memory operations instead
//    of atomics, and each pass visiting the round's entries in a shuffled
//    order, as threads may run them), against sketch::decode and an
//    independent peeling of the support, and bit for bit against itself
//    under other thread orders;
//  - rows_for_loads, the sizing rule the device applies to column loads.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "compressors/sketch/count_sketch.hpp"
#include "compressors/sketch/count_sketch_hash.hpp"

namespace cc_coll::detail {
namespace {

using sketch::DecodeInfo;
using sketch::kBlock;
using sketch::Layout;

// ---------------------------------------------------------------- hashing

// SplitMix64 over a counter: a generator whose sequence is fixed by this
// file alone.
struct Counter64 {
    std::uint64_t state;
    std::uint64_t operator()()
    {
        state += 0x9e3779b97f4a7c15ull;
        std::uint64_t z = state;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
};

TEST(SketchCudaHash, ElementHitsMatchHostHits)
{
    Counter64 next{7};
    for (int it = 0; it < 200000; ++it) {
        Layout layout;
        layout.seed = next();
        const std::uint64_t r = next();
        layout.m = static_cast<std::uint32_t>(it % 4 == 0 ? 1398101 - r % 8 : 1 + r % 4000);
        layout.n = std::size_t{1} << 32;
        const std::size_t i = it % 3 == 0 ? (std::size_t{1} << 32) - 1 - next() % 5000 : next() & 0xffffffffull;
        sketch::Hit h[3];
        sketch::hits(layout, i, h);
        const sketch::Hasher hasher(layout.seed, layout.m);
        const sketch::ElementHits e = sketch::element_hits(hasher, i);
        const sketch::BlockHash b = hasher.block(static_cast<std::uint32_t>(i / kBlock));
        for (std::uint32_t j = 0; j < 3; ++j) {
            ASSERT_EQ(e.cell[j], h[j].cell) << "seed " << layout.seed << " m " << layout.m << " i " << i;
            ASSERT_EQ(e.neg[j] ? -1 : 1, h[j].sign);
            ASSERT_EQ(hasher.cell(b, j, static_cast<std::uint32_t>(i % kBlock)), h[j].cell);
            ASSERT_EQ(b.neg[j], e.neg[j]);
            ASSERT_LT(b.rot[j], sketch::rotation_columns(layout.m));
            ASSERT_EQ(b.base[j] % kBlock, 0u);
            ASSERT_EQ(b.base[j] / kBlock / layout.m, j);  // row in sub-table j
        }
    }
}

// FNV-1a over hits() of 100000 (seed, m, i), recorded from the host
// implementation before its hashing became shared host/device code.
TEST(SketchCudaHash, HostHitsUnchanged)
{
    std::uint64_t acc = 1469598103934665603ull;
    const auto mix = [&acc](std::uint64_t v) {
        acc ^= v;
        acc *= 1099511628211ull;
    };
    Counter64 next{12345};
    for (int it = 0; it < 100000; ++it) {
        Layout layout;
        layout.seed = next();
        const std::uint64_t r = next();
        layout.m = static_cast<std::uint32_t>(it % 5 == 0 ? 1398101 - r % 8 : 1 + r % 3000);
        layout.n = std::size_t{1} << 32;
        const std::size_t i = next() & 0xffffffffull;
        sketch::Hit h[3];
        sketch::hits(layout, i, h);
        for (int j = 0; j < 3; ++j) {
            mix(h[j].cell);
            mix(static_cast<std::uint64_t>(h[j].sign + 2));
        }
    }
    EXPECT_EQ(acc, 0x2ff7b11127048d0cull);
}

TEST(SketchCudaHash, BlockCellsStayInRotationGroups)
{
    for (std::uint32_t m : {1u, 5u, 96u, 97u, 1000u}) {
        const sketch::Hasher hasher(99, m);
        const std::size_t group = sketch::rotation_columns(m);
        for (std::uint32_t b = 0; b < 50; ++b) {
            const sketch::BlockHash h = hasher.block(b);
            for (std::uint32_t j = 0; j < 3; ++j) {
                std::vector<std::uint8_t> seen(kBlock, 0);
                for (std::uint32_t t = 0; t < kBlock; ++t) {
                    const std::uint32_t c = hasher.cell(h, j, t);
                    ASSERT_EQ(c - h.base[j] < kBlock, true);
                    const std::uint32_t col = c - h.base[j];
                    ASSERT_EQ(col / group, t / group);  // rotated within its group
                    ASSERT_FALSE(seen[col]);            // a permutation of the row
                    seen[col] = 1;
                }
            }
        }
    }
}

TEST(SketchCudaHash, BitmapWord32)
{
    std::mt19937_64 rng(3);
    for (std::size_t n : {std::size_t{1}, std::size_t{7}, std::size_t{8}, std::size_t{31}, std::size_t{32},
                          std::size_t{33}, std::size_t{63}, std::size_t{100}, std::size_t{1024}, std::size_t{1029}}) {
        // Bytes past bitmap_bytes(n) are poisoned: they must not be read
        // into the word (and, with the offset, the bitmap is misaligned).
        for (std::size_t offset : {0, 1, 3}) {
            std::vector<std::uint8_t> storage(offset + sketch::bitmap_bytes(n) + 8, 0xff);
            std::uint8_t *bm = storage.data() + offset;
            for (std::size_t b = 0; b < sketch::bitmap_bytes(n); ++b) bm[b] = static_cast<std::uint8_t>(rng());
            for (std::size_t w = 0; w < (n + 31) / 32; ++w) {
                std::uint32_t expect = 0;
                for (std::size_t k = 0; k < 32 && 32 * w + k < n; ++k) {
                    const std::size_t i = 32 * w + k;
                    expect |= static_cast<std::uint32_t>((bm[i / 8] >> (i % 8)) & 1u) << k;
                }
                ASSERT_EQ(sketch::bitmap_word32(bm, n, w), expect) << "n " << n << " w " << w;
            }
        }
    }
}

// ---------------------------------------------------------------- peeling

struct HostOps {
    static void add(std::uint32_t *p, std::uint32_t v) { *p += v; }
    static void bit_xor(std::uint32_t *p, std::uint32_t v) { *p ^= v; }
    static void bit_or(std::uint32_t *p, std::uint32_t v)
    {
        EXPECT_EQ(*p & v, 0u) << "an element claimed twice";
        *p |= v;
    }
    // The device's peel pass reads a claimed cell (count kClaimed) without
    // atomics: it is safe only because no other entry's element is left in
    // it, so no decrement (nor the xor and bid beside it) ever reaches it,
    // nor a peeled cell with subtractions pending; nor an emptied cell (the
    // count would wrap).
    static std::uint32_t decrement(std::uint32_t *p)
    {
        EXPECT_LT(*p, sketch::kPending) << "a peel reached a claimed or peeled cell";
        EXPECT_NE(*p, 0u) << "a peel reached an empty cell";
        return (*p)--;
    }
    static void min(std::uint32_t *p, std::uint32_t v) { *p = std::min(*p, v); }
};

struct EmulationStats {
    std::size_t rounds = 0;
    std::size_t lost_claims = 0;    // pure cells whose element a lower hash's pure cell claimed in the same round
    std::size_t max_passes = 0;     // most subtraction passes of one round
    std::size_t estimated = 0;      // support elements left to the estimate, over all cases
    std::uint32_t max_m = 0;        // largest rows per table seen
};

// The device decoder (count_sketch_cuda.cu, decode) step by step: counts
// and keys from the support words, the first worklist, rounds of a claim
// pass, a peel pass and subtraction passes (a bid pass between two) over the
// round's entries (each pass in shuffled order), the output pass.
// `decoded` receives the peeled bits.
template <typename W>
DecodeInfo emulate_device_decode(const Layout &layout, const std::uint8_t *bitmap, W *sketch, W *out,
                                 std::vector<std::uint32_t> *decoded, std::mt19937_64 &rng, EmulationStats *stats)
{
    DecodeInfo info;
    const std::size_t n = layout.n;
    if (n == 0) return info;
    const std::size_t cells = layout.m == 0 ? 0 : layout.cells();
    const std::size_t words = (n + 31) / 32;
    std::vector<std::uint32_t> count(cells, 0), key(cells, 0), owner(cells, sketch::kNoCell), work;
    decoded->assign(words, 0);
    sketch::PeelState<W> s;
    s.hasher = sketch::Hasher(layout.seed, layout.m);
    s.value = sketch;
    s.count = count.data();
    s.key = key.data();
    s.owner = owner.data();
    s.decoded = decoded->data();
    s.out = out;
    if (cells > 0) {
        for (std::size_t w = 0; w < words; ++w) {  // count_kernel
            std::uint32_t v = sketch::bitmap_word32(bitmap, n, w);
            if (v == 0) continue;
            const sketch::BlockHash h = s.hasher.block(static_cast<std::uint32_t>(w >> 5));
            while (v) {
                const std::uint32_t bit = static_cast<std::uint32_t>(__builtin_ctz(v));
                v &= v - 1;
                sketch::count_element<HostOps>(s, h, static_cast<std::uint32_t>(32 * w + bit));
            }
        }
        for (std::size_t c = 0; c < cells; ++c)  // queue_pure_kernel
            if (count[c] == 1) work.push_back(static_cast<std::uint32_t>(c));
        std::shuffle(work.begin(), work.end(), rng);  // appended by warps in any order
        // Each cell enters the worklist at most once (its capacity is one
        // slot per cell), so no round holds a cell twice.
        std::vector<std::uint8_t> queued(cells, 0);
        for (std::uint32_t c : work) queued[c] = 1;
        std::size_t head = 0;
        std::vector<std::uint32_t> order, next_round;
        while (head < work.size()) {  // claim, peel, subtract and bid kernels (or small_rounds_kernel)
            const std::size_t tail = work.size();
            ++stats->rounds;
            order.assign(work.begin() + static_cast<std::ptrdiff_t>(head), work.end());
            // The claim rule's premise: a cell with count 1 at the start of a
            // round is in the round's worklist.
            std::vector<std::uint8_t> in_round(cells, 0);
            for (std::uint32_t c : order) in_round[c] = 1;
            std::size_t pure_elsewhere = 0;
            for (std::size_t c = 0; c < cells; ++c) pure_elsewhere += count[c] == 1 && !in_round[c];
            EXPECT_EQ(pure_elsewhere, 0u);
            std::shuffle(order.begin(), order.end(), rng);
            for (std::uint32_t c : order) {
                const bool pure = count[c] == 1;
                if (!sketch::claim_cell<HostOps>(s, c) && pure) ++stats->lost_claims;
            }
            std::shuffle(order.begin(), order.end(), rng);
            next_round.clear();
            for (std::uint32_t c : order) {
                std::uint32_t next[2];
                sketch::peel_cell<HostOps>(s, c, next);
                for (std::uint32_t nc : next)
                    if (nc != sketch::kNoCell) {
                        EXPECT_FALSE(queued[nc]) << "cell " << nc << " queued twice";
                        queued[nc] = 1;
                        next_round.push_back(nc);
                    }
            }
            std::size_t passes = 0;
            for (bool left = true; left;) {
                ++passes;
                left = false;
                std::shuffle(order.begin(), order.end(), rng);
                for (std::uint32_t c : order) left = sketch::subtract_cell(s, c) || left;
                if (!left) break;
                std::shuffle(order.begin(), order.end(), rng);
                for (std::uint32_t c : order) sketch::bid_cell<HostOps>(s, c);
            }
            stats->max_passes = std::max(stats->max_passes, passes);
            // A round leaves no bid, and its peeled cells empty.
            for (std::uint32_t c : order) {
                EXPECT_LT(count[c], sketch::kPending) << "cell " << c << " left peeled";
                EXPECT_EQ(owner[c], sketch::kNoCell);
            }
            for (std::uint32_t c : next_round) EXPECT_EQ(owner[c], sketch::kNoCell);
            std::shuffle(next_round.begin(), next_round.end(), rng);
            work.insert(work.end(), next_round.begin(), next_round.end());
            head = tail;
            EXPECT_LE(work.size(), cells);  // the worklist's capacity
        }
        EXPECT_EQ(static_cast<std::size_t>(std::count(owner.begin(), owner.end(), sketch::kNoCell)), cells);
    }
    for (std::size_t i = 0; i < n; ++i) {  // output_kernel
        const std::uint32_t sw = sketch::bitmap_word32(bitmap, n, i >> 5);
        const std::uint32_t dw = (*decoded)[i >> 5];
        if ((i & 31u) == 0) {
            info.support += static_cast<std::size_t>(__builtin_popcount(sw));
            info.peeled += static_cast<std::size_t>(__builtin_popcount(sw & dw));
        }
        const std::uint32_t bit = 1u << (i & 31u);
        if (!(sw & bit))
            out[i] = W(0);
        else if (!(dw & bit))
            out[i] = cells > 0 ? sketch::estimate_element(s, i) : W(0);
    }
    info.estimated = info.support - info.peeled;
    return info;
}

// The peelable elements of the support, by plain sequential peeling over
// hits() (the peeled set does not depend on the order).
std::vector<std::uint8_t> reference_peeled(const Layout &layout, const std::vector<std::uint32_t> &support)
{
    const std::size_t cells = layout.cells();
    std::vector<std::uint32_t> cnt(cells, 0), kx(cells, 0), queue;
    std::vector<std::array<std::uint32_t, 3>> cell_of(support.size());
    for (std::size_t p = 0; p < support.size(); ++p) {
        sketch::Hit h[3];
        sketch::hits(layout, support[p], h);
        for (int j = 0; j < 3; ++j) {
            cell_of[p][j] = h[j].cell;
            ++cnt[h[j].cell];
            kx[h[j].cell] ^= static_cast<std::uint32_t>(p);
        }
    }
    for (std::size_t c = 0; c < cells; ++c)
        if (cnt[c] == 1) queue.push_back(static_cast<std::uint32_t>(c));
    std::vector<std::uint8_t> peeled(support.size(), 0);
    for (std::size_t q = 0; q < queue.size(); ++q) {
        const std::uint32_t c = queue[q];
        if (cnt[c] != 1) continue;
        const std::uint32_t p = kx[c];
        peeled[p] = 1;
        for (std::uint32_t cj : cell_of[p]) {
            kx[cj] ^= p;
            if (--cnt[cj] == 1) queue.push_back(cj);
        }
    }
    return peeled;
}

enum class Data { SmallInts, Floats };

struct Case {
    std::size_t n;
    double density;
    double load_factor;
    std::uint64_t seed;
};

// A case's support, values, layout and host-encoded sketch.
template <typename W>
struct Input {
    std::vector<std::uint32_t> support;
    std::vector<std::uint8_t> bitmap;
    std::vector<W> x;
    W scale = W(0);  // largest |x|
    Layout layout;
    std::vector<W> sketch;
    std::string where;
};

template <typename W>
Input<W> make_input(const Case &cs, Data data, std::mt19937_64 &rng)
{
    Input<W> in;
    std::bernoulli_distribution keep(std::min(cs.density, 1.0));
    for (std::size_t i = 0; i < cs.n; ++i)
        if (cs.density >= 1.0 || keep(rng)) in.support.push_back(static_cast<std::uint32_t>(i));
    in.bitmap.assign(sketch::bitmap_bytes(cs.n), 0);
    sketch::bitmap_set(in.bitmap.data(), in.support.data(), in.support.size());

    in.x.assign(cs.n, W(0));
    std::uniform_int_distribution<int> ints(-8, 8);
    std::normal_distribution<double> normal(0.0, 1.0);
    for (std::uint32_t i : in.support) {
        in.x[i] = data == Data::SmallInts ? static_cast<W>(ints(rng)) : static_cast<W>(normal(rng));
        in.scale = std::max(in.scale, std::abs(in.x[i]));
    }

    in.layout.n = cs.n;
    in.layout.seed = rng();
    in.layout.m = sketch::rows_per_table(in.bitmap.data(), cs.n, cs.load_factor);
    in.sketch.assign(in.layout.cells(), W(0));
    sketch::encode<W>(in.layout, in.x.data(), in.support.data(), in.support.size(), in.sketch.data());
    in.where = "n " + std::to_string(cs.n) + " density " + std::to_string(cs.density) + " load " +
               std::to_string(cs.load_factor) + " m " + std::to_string(in.layout.m);
    return in;
}

template <typename W>
void check_emulation(const Case &cs, Data data, EmulationStats *stats)
{
    std::mt19937_64 rng(cs.seed);
    const Input<W> in = make_input<W>(cs, data, rng);
    const std::vector<std::uint32_t> &support = in.support;
    const Layout &layout = in.layout;
    const std::string &where = in.where;
    std::vector<W> host_sketch = in.sketch;
    std::vector<W> dev_sketch = in.sketch;

    std::vector<W> host_out(cs.n, W(7)), dev_out(cs.n, W(7));
    sketch::DecodeScratch scratch;
    const DecodeInfo host_info =
        sketch::decode<W>(layout, in.bitmap.data(), host_sketch.data(), host_out.data(), &scratch);
    std::vector<std::uint32_t> decoded;
    const DecodeInfo dev_info =
        emulate_device_decode<W>(layout, in.bitmap.data(), dev_sketch.data(), dev_out.data(), &decoded, rng, stats);

    ASSERT_EQ(dev_info.support, support.size()) << where;
    ASSERT_EQ(dev_info.support, host_info.support) << where;
    ASSERT_EQ(dev_info.peeled, host_info.peeled) << where;
    ASSERT_EQ(dev_info.estimated, host_info.estimated) << where;
    stats->estimated += dev_info.estimated;
    stats->max_m = std::max(stats->max_m, layout.m);

    // The peeled set: that of plain sequential peeling, and nothing off the
    // support.
    const std::vector<std::uint8_t> ref = reference_peeled(layout, support);
    std::size_t ref_count = 0;
    for (std::size_t p = 0; p < support.size(); ++p) {
        const std::uint32_t i = support[p];
        ASSERT_EQ((decoded[i >> 5] >> (i & 31u)) & 1u, ref[p]) << where << " i " << i;
        ref_count += ref[p];
    }
    ASSERT_EQ(ref_count, dev_info.peeled) << where;

    // Values: small integers make every sum exact in any order, so both
    // decoders agree bit for bit (estimates included: the residual cells
    // are the same exact sums); random floats agree up to rounding.
    const W tol = data == Data::SmallInts ? W(0) : W(64) * std::numeric_limits<W>::epsilon() * in.scale;
    for (std::size_t i = 0; i < cs.n; ++i) {
        if (data == Data::SmallInts) {
            ASSERT_EQ(std::memcmp(&dev_out[i], &host_out[i], sizeof(W)), 0)
                << where << " i " << i << ": " << dev_out[i] << " vs " << host_out[i];
        } else {
            ASSERT_NEAR(dev_out[i], host_out[i], tol) << where << " i " << i;
        }
    }
    for (std::size_t p = 0; p < support.size(); ++p) {
        if (ref[p]) {
            ASSERT_NEAR(dev_out[support[p]], in.x[support[p]], tol) << where;
        }
    }
    if (data == Data::SmallInts) {
        for (std::size_t c = 0; c < host_sketch.size(); ++c)
            ASSERT_EQ(std::memcmp(&dev_sketch[c], &host_sketch[c], sizeof(W)), 0) << where << " residual cell " << c;
    }
}

// Decodes one sketch of random floats `runs` times, each with its own
// thread order (rng), and counts the runs whose output or residual sketch
// differs from the first run's in any bit.
template <typename W>
std::size_t differing_runs(const Case &cs, int runs, EmulationStats *stats)
{
    std::mt19937_64 rng(cs.seed);
    const Input<W> in = make_input<W>(cs, Data::Floats, rng);
    std::vector<W> first_out, first_sketch;
    std::size_t differing = 0;
    for (int r = 0; r < runs; ++r) {
        std::vector<W> sk = in.sketch, out(cs.n, W(7));
        std::vector<std::uint32_t> decoded;
        const DecodeInfo info =
            emulate_device_decode<W>(in.layout, in.bitmap.data(), sk.data(), out.data(), &decoded, rng, stats);
        if (r == 0) {
            stats->estimated += info.estimated;
            first_out = out;
            first_sketch = sk;
            continue;
        }
        const bool same = std::memcmp(out.data(), first_out.data(), out.size() * sizeof(W)) == 0 &&
                          std::memcmp(sk.data(), first_sketch.data(), sk.size() * sizeof(W)) == 0;
        differing += !same;
    }
    return differing;
}

std::vector<Case> emulation_cases()
{
    std::vector<Case> cases = {
        {1, 1.0, 0.8, 1},          {31, 1.0, 0.8, 2},         {33, 0.5, 0.8, 3},         {1000, 0.3, 0.8, 4},
        {1024, 1.0, 0.75, 5},      {5000, 1.0, 0.75, 6},      {70000, 0.01, 0.75, 7},    {65553, 0.01, 0.75, 8},
        {200000, 0.05, 0.8, 9},    {300000, 1.0, 0.8, 10},    {300000, 0.9, 0.8, 11},    {120000, 0.2, 0.9, 12},
        {150000, 0.1, 1.0, 13},    {100000, 0.3, 1.3, 14},    {100000, 0.0, 0.8, 15},    {4096, 0.02, 2.0, 16},
        {250000, 0.4, 0.82, 17},   {99999, 0.15, 0.7, 18},
    };
    std::mt19937_64 rng(2024);
    for (int k = 0; k < 16; ++k) {
        Case cs;
        cs.n = 1 + rng() % 250000;
        cs.density = std::uniform_real_distribution<double>(0.001, 1.0)(rng);
        cs.load_factor = std::uniform_real_distribution<double>(0.5, 1.2)(rng);
        cs.seed = rng();
        cases.push_back(cs);
    }
    return cases;
}

TEST(SketchCudaPeel, MatchesHostDecodeSmallIntsFloat)
{
    EmulationStats stats;
    for (const Case &cs : emulation_cases()) check_emulation<float>(cs, Data::SmallInts, &stats);
    // The cases reach elements pure in two cells of a round (the lower hash's
    // claims), cells given several subtractions in a round (one per pass),
    // and overloaded sketches (estimates).
    EXPECT_GT(stats.lost_claims, 0u);
    EXPECT_GE(stats.max_passes, 2u);
    EXPECT_GT(stats.rounds, 0u);
    EXPECT_GT(stats.estimated, 0u);
}

TEST(SketchCudaPeel, MatchesHostDecodeSmallIntsDouble)
{
    EmulationStats stats;
    for (const Case &cs : emulation_cases()) check_emulation<double>(cs, Data::SmallInts, &stats);
}

TEST(SketchCudaPeel, MatchesHostDecodeFloatsFloat)
{
    EmulationStats stats;
    for (const Case &cs : emulation_cases()) check_emulation<float>(cs, Data::Floats, &stats);
}

TEST(SketchCudaPeel, MatchesHostDecodeFloatsDouble)
{
    EmulationStats stats;
    for (const Case &cs : emulation_cases()) check_emulation<double>(cs, Data::Floats, &stats);
}

// Every rank decodes the same summed sketch and must get the same bits: the
// decode of random (non-integer) floats is bit for bit the same whatever
// order the threads run each pass in. (A replay of the earlier rule, the
// first pure cell to get there claiming and every subtraction made at once
// in the peel pass, differed in all 7 reruns of every case here, for float
// and double, with either half of that rule alone.)
template <typename W>
void check_thread_order_independent()
{
    const Case cases[] = {{70000, 0.05, 0.75, 31}, {200000, 0.1, 0.8, 32}, {120000, 1.0, 0.8, 33},
                          {150000, 0.2, 0.95, 34}, {400000, 0.5, 0.8, 35}};
    EmulationStats stats;
    for (const Case &cs : cases)
        EXPECT_EQ(differing_runs<W>(cs, 8, &stats), 0u) << "case seed " << cs.seed;
    // The cases reach both choices that threads could make differently:
    // elements pure in two cells of a round, and cells that receive several
    // subtractions in a round; and estimates, which read the residuals.
    EXPECT_GT(stats.lost_claims, 0u);
    EXPECT_GE(stats.max_passes, 3u);
    EXPECT_GT(stats.estimated, 0u);
}

TEST(SketchCudaPeel, ThreadOrderIndependentFloat) { check_thread_order_independent<float>(); }

TEST(SketchCudaPeel, ThreadOrderIndependentDouble) { check_thread_order_independent<double>(); }

// Large m (beyond kFullRotationRows: rotation groups of kRotation columns).
TEST(SketchCudaPeel, MatchesHostDecodeManyRows)
{
    EmulationStats stats;
    check_emulation<float>(Case{400000, 1.0, 0.8, 21}, Data::SmallInts, &stats);
    check_emulation<float>(Case{400000, 0.95, 0.95, 22}, Data::SmallInts, &stats);
    EXPECT_GT(stats.max_m, sketch::kFullRotationRows);
}

// ---------------------------------------------------------------- sizing

TEST(SketchCudaSizing, RowsForLoadsIsRowsPerTable)
{
    std::mt19937_64 rng(11);
    const double factors[] = {0.8, 0.5, 1.0, 0.1, 2.5, 1e-9, 0.0, -1.0, std::numeric_limits<double>::quiet_NaN()};
    for (int it = 0; it < 60; ++it) {
        const std::size_t n = it == 0 ? 0 : 1 + rng() % 400000;
        const double density = it % 5 == 0 ? 1.0 : std::uniform_real_distribution<double>(0.0, 1.0)(rng);
        std::vector<std::uint8_t> bitmap(sketch::bitmap_bytes(n) + 1, 0);
        std::bernoulli_distribution keep(density);
        std::vector<std::uint32_t> loads(kBlock, 0);
        for (std::size_t i = 0; i < n; ++i)
            if (keep(rng)) {
                bitmap[i / 8] |= static_cast<std::uint8_t>(1u << (i % 8));
                ++loads[i % kBlock];
            }
        if (n % 8) bitmap[n / 8] |= static_cast<std::uint8_t>(0xffu << (n % 8));  // bits past n: ignored
        for (double f : factors)
            ASSERT_EQ(sketch::rows_for_loads(loads.data(), f), sketch::rows_per_table(bitmap.data(), n, f))
                << "n " << n << " load factor " << f;
    }
    std::vector<std::uint32_t> loads(kBlock, 0);
    EXPECT_EQ(sketch::rows_for_loads(loads.data(), 0.8), 1u);
    loads[17] = 0xffffffffu;  // beyond any sketch: the largest m with 32-bit cells
    EXPECT_EQ(sketch::rows_for_loads(loads.data(), 0.8), 1398101u);
}

}  // namespace
}  // namespace cc_coll::detail
