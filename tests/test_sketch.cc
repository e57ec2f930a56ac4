// The count sketch of docs/algorithms.md section 3 without MPI: hashing layout,
// support bitmaps, sizing, linearity of the encoder, the peeling decoder
// (lossless, degenerate and overloaded cases, sums of several "ranks"), and
// TAGC's threshold ladder.
//
// Lossless cases use small-integer data (every sum and difference is exact
// in float and double, so peeling must return x bit for bit) or random
// floats with a tolerance relative to the largest magnitude (peeling
// subtracts, so values pick up rounding of their cell mates).
//
// Layout facts the tests rely on (count_sketch.hpp): hash j puts element
// (b, t) in sub-table j, at row j*m + (h_j(b) * m >> 32) and at column t
// rotated by a per-block offset within its group of rotation_columns(m)
// columns (kRotation = 64 for large m, the whole block for small m).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "compressors/sketch/count_sketch.hpp"
#include "compressors/threshold/threshold_ladder.hpp"

namespace cc_coll::detail {
namespace {

using sketch::DecodeInfo;
using sketch::DecodeScratch;
using sketch::Hit;
using sketch::kBlock;
using sketch::Layout;

// ---------------------------------------------------------------- helpers

// Ascending positions in [0, n), each kept with probability `density`.
std::vector<std::uint32_t> random_support(std::size_t n, double density, std::uint64_t seed)
{
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> u(0.0, 1.0);
    std::vector<std::uint32_t> idx;
    for (std::size_t i = 0; i < n; ++i)
        if (density >= 1.0 || u(rng) < density) idx.push_back(static_cast<std::uint32_t>(i));
    return idx;
}

std::vector<std::uint8_t> bitmap_of(std::size_t n, const std::vector<std::uint32_t> &idx)
{
    std::vector<std::uint8_t> bm(sketch::bitmap_bytes(n), 0);
    sketch::bitmap_set(bm.data(), idx.data(), idx.size());
    return bm;
}

enum class Values { SmallInts, Zeros, Floats };

// Dense x of length n, non-zero (for SmallInts: in [-8, 8] \ {0}) only on idx.
template <typename W>
std::vector<W> values_on(std::size_t n, const std::vector<std::uint32_t> &idx, Values kind, std::uint64_t seed)
{
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<int> ints(1, 8);
    std::normal_distribution<double> normal(0.0, 1.0);
    std::uniform_real_distribution<double> expo(-3.0, 3.0);
    std::vector<W> x(n, W(0));
    for (std::uint32_t i : idx) {
        switch (kind) {
        case Values::SmallInts: x[i] = static_cast<W>((rng() & 1 ? 1 : -1) * ints(rng)); break;
        case Values::Zeros: x[i] = W(0); break;
        case Values::Floats: x[i] = static_cast<W>(normal(rng) * std::pow(10.0, expo(rng))); break;
        }
    }
    return x;
}

template <typename W>
std::vector<W> encode_dense(const Layout &layout, const std::vector<W> &x, const std::vector<std::uint32_t> &idx)
{
    std::vector<W> sk(layout.cells(), W(0));
    sketch::encode<W>(layout, x.data(), idx.data(), idx.size(), sk.data());
    return sk;
}

template <typename W>
struct Decoded {
    std::vector<W> out;
    DecodeInfo info;
    std::vector<W> sketch_after;
};

template <typename W>
Decoded<W> decode_fresh(const Layout &layout, const std::vector<std::uint8_t> &bm, std::vector<W> sk,
                        DecodeScratch *scratch = nullptr)
{
    DecodeScratch local;
    Decoded<W> d;
    // Garbage in out: decode must write every position.
    d.out.assign(layout.n, static_cast<W>(12345.0));
    d.info = sketch::decode<W>(layout, bm.data(), sk.data(), d.out.data(), scratch ? scratch : &local);
    d.sketch_after = std::move(sk);
    return d;
}

Layout layout_for(std::size_t n, const std::vector<std::uint8_t> &bm, double load, std::uint64_t seed)
{
    Layout l;
    l.n = n;
    l.seed = seed;
    l.m = sketch::rows_per_table(bm.data(), n, load);
    return l;
}

// Positions where got != want (exact), with the first for messages.
template <typename W>
std::size_t mismatches(const std::vector<W> &got, const std::vector<W> &want, std::string *first = nullptr)
{
    std::size_t bad = 0;
    for (std::size_t i = 0; i < want.size(); ++i) {
        const bool same = (got[i] == want[i]) || (std::isnan(got[i]) && std::isnan(want[i]));
        if (!same) {
            if (bad == 0 && first)
                *first = "i=" + std::to_string(i) + " got " + std::to_string(got[i]) + " want " + std::to_string(want[i]);
            ++bad;
        }
    }
    return bad;
}

// Full lossless check: exact on the support, zero elsewhere, everything
// peeled, and the sketch emptied (every peeled value was subtracted).
template <typename W>
void expect_lossless(std::size_t n, const std::vector<std::uint32_t> &idx, Values kind, double load,
                     std::uint64_t seed, const std::string &what)
{
    SCOPED_TRACE(what + " n=" + std::to_string(n) + " k=" + std::to_string(idx.size()));
    const std::vector<std::uint8_t> bm = bitmap_of(n, idx);
    const Layout layout = layout_for(n, bm, load, seed);
    const std::vector<W> x = values_on<W>(n, idx, kind, seed * 31 + 7);
    const Decoded<W> d = decode_fresh<W>(layout, bm, encode_dense<W>(layout, x, idx));
    EXPECT_EQ(d.info.support, idx.size());
    EXPECT_EQ(d.info.peeled, idx.size());
    EXPECT_EQ(d.info.estimated, 0u);
    if (kind == Values::Floats) {
        // Peeling carries each cell's rounding to every value derived from
        // it, so errors grow along peeling chains: measured max <= ~6 and
        // mean <= ~0.2 units of eps * max|x| on these sizes. Bounds with a
        // margin of ~20x.
        double maxabs = 0;
        for (W v : x) maxabs = std::max(maxabs, static_cast<double>(std::fabs(v)));
        const double unit = std::numeric_limits<W>::epsilon() * maxabs;
        double max_err = 0, sum_err = 0;
        for (std::size_t i = 0; i < n; ++i) {
            const double e = std::fabs(static_cast<double>(d.out[i]) - static_cast<double>(x[i]));
            ASSERT_FALSE(std::isnan(e)) << "i=" << i;
            max_err = std::max(max_err, e);
            sum_err += e;
        }
        EXPECT_LE(max_err, 128 * unit);
        EXPECT_LE(sum_err / static_cast<double>(std::max<std::size_t>(idx.size(), 1)), 4 * unit);
        // Zero outside the support, exactly.
        std::vector<bool> in(n, false);
        for (std::uint32_t i : idx) in[i] = true;
        for (std::size_t i = 0; i < n; ++i)
            if (!in[i]) {
                ASSERT_EQ(d.out[i], W(0)) << "i=" << i;
            }
    } else {
        std::string first;
        EXPECT_EQ(mismatches(d.out, x, &first), 0u) << first;
        std::string first_cell;
        EXPECT_EQ(mismatches(d.sketch_after, std::vector<W>(layout.cells(), W(0)), &first_cell), 0u)
            << "sketch not emptied: " << first_cell;
    }
}

// ---------------------------------------------------------------- hits

TEST(SketchHits, ThreeDistinctCellsOnePerSubTable)
{
    for (std::uint32_t m : {1u, 2u, 7u, 1000u}) {
        for (std::uint64_t seed : {0ull, 1ull, 0xdeadbeefcafef00dull}) {
            Layout l;
            l.n = 1u << 22;
            l.m = m;
            l.seed = seed;
            std::mt19937_64 rng(seed + m);
            for (int trial = 0; trial < 2000; ++trial) {
                const std::size_t i = rng() % l.n;
                Hit h[3];
                sketch::hits(l, i, h);
                for (int j = 0; j < 3; ++j) {
                    ASSERT_LT(h[j].cell, l.cells());
                    const std::size_t R = sketch::rotation_columns(m);
                    EXPECT_EQ(h[j].cell % kBlock / R, i % kBlock / R) << "the column stays in i's rotation group";
                    EXPECT_EQ(h[j].cell / kBlock / m, static_cast<std::uint32_t>(j)) << "hash j in sub-table j";
                    EXPECT_TRUE(h[j].sign == 1 || h[j].sign == -1);
                }
                EXPECT_NE(h[0].cell, h[1].cell);
                EXPECT_NE(h[0].cell, h[2].cell);
                EXPECT_NE(h[1].cell, h[2].cell);
            }
        }
    }
}

void deterministic_per_block(std::uint32_t m)
{
    SCOPED_TRACE("m=" + std::to_string(m));
    Layout l;
    l.n = 1u << 20;
    l.m = m;
    l.seed = 42;
    const std::size_t R = sketch::rotation_columns(l.m);
    std::set<std::size_t> offsets[3];
    for (std::size_t b = 0; b < l.n / kBlock; b += 13) {
        Hit first[3];
        sketch::hits(l, b * kBlock, first);
        for (int j = 0; j < 3; ++j) offsets[j].insert(first[j].cell % kBlock);  // t = 0: the offset itself
        for (std::size_t t : {std::size_t{1}, std::size_t{63}, std::size_t{500}, kBlock - 1}) {
            Hit h[3], again[3];
            sketch::hits(l, b * kBlock + t, h);
            sketch::hits(l, b * kBlock + t, again);
            for (int j = 0; j < 3; ++j) {
                EXPECT_EQ(h[j].cell, again[j].cell);
                EXPECT_EQ(h[j].sign, again[j].sign);
                // Same block: same row and sign; column t rotated by the
                // block's offset within its group of R columns.
                const std::size_t o = first[j].cell % kBlock;
                const std::size_t row_start = first[j].cell - o;
                EXPECT_EQ(h[j].cell, row_start + (t / R) * R + (t + o) % R) << "b=" << b << " t=" << t;
                EXPECT_EQ(h[j].sign, first[j].sign);
            }
        }
    }
    // The offsets vary from block to block (79 blocks sampled).
    for (int j = 0; j < 3; ++j) EXPECT_GE(offsets[j].size(), std::min<std::size_t>(R, 30)) << "j=" << j;
}

TEST(SketchHits, DeterministicAndPerBlock)
{
    // Both rotation regimes: whole-block rotation up to kFullRotationRows
    // rows, kRotation columns beyond.
    EXPECT_EQ(sketch::rotation_columns(sketch::kFullRotationRows), kBlock);
    EXPECT_EQ(sketch::rotation_columns(sketch::kFullRotationRows + 1), sketch::kRotation);
    deterministic_per_block(1);
    deterministic_per_block(sketch::kFullRotationRows);
    deterministic_per_block(sketch::kFullRotationRows + 1);
    deterministic_per_block(1000);
}

// Row of block b in sub-table j (0 .. m-1) and its sign.
std::pair<std::uint32_t, int> row_of(const Layout &l, std::size_t b, int j)
{
    Hit h[3];
    sketch::hits(l, b * kBlock, h);
    return {static_cast<std::uint32_t>(h[j].cell / kBlock - static_cast<std::size_t>(j) * l.m), h[j].sign};
}

TEST(SketchHits, SeedsGiveDifferentLayouts)
{
    Layout a, b;
    a.n = b.n = 4096 * kBlock;
    a.m = b.m = 64;
    a.seed = 1;
    b.seed = 2;
    std::size_t same_row = 0, same_sign = 0, total = 0;
    for (std::size_t blk = 0; blk < 4096; ++blk)
        for (int j = 0; j < 3; ++j) {
            const auto ra = row_of(a, blk, j), rb = row_of(b, blk, j);
            same_row += ra.first == rb.first;
            same_sign += ra.second == rb.second;
            ++total;
        }
    // Independent layouts: rows agree ~1/64 of the time, signs ~1/2.
    EXPECT_LT(same_row, total / 16);
    EXPECT_GT(same_sign, total * 4 / 10);
    EXPECT_LT(same_sign, total * 6 / 10);
}

TEST(SketchHits, RowsAndSignsSpreadAndSubTablesIndependent)
{
    Layout l;
    const std::size_t blocks = 16384;
    l.n = blocks * kBlock;
    l.m = 16;
    l.seed = 7;
    std::vector<std::size_t> per_row(3 * l.m, 0);
    std::size_t negative = 0, equal01 = 0, equal12 = 0, sign01 = 0;
    for (std::size_t blk = 0; blk < blocks; ++blk) {
        std::pair<std::uint32_t, int> r[3];
        for (int j = 0; j < 3; ++j) {
            r[j] = row_of(l, blk, j);
            ++per_row[static_cast<std::size_t>(j) * l.m + r[j].first];
            negative += r[j].second < 0;
        }
        equal01 += r[0].first == r[1].first;
        equal12 += r[1].first == r[2].first;
        sign01 += r[0].second == r[1].second;
    }
    // Uniform rows: expected blocks / m = 1024 per row (sd ~31).
    for (std::size_t c : per_row) {
        EXPECT_GT(c, 850u);
        EXPECT_LT(c, 1200u);
    }
    EXPECT_NEAR(static_cast<double>(negative) / (3.0 * blocks), 0.5, 0.03);
    // Each hash has its own seed: rows of different sub-tables agree ~1/m.
    EXPECT_NEAR(static_cast<double>(equal01) / blocks, 1.0 / 16, 0.02);
    EXPECT_NEAR(static_cast<double>(equal12) / blocks, 1.0 / 16, 0.02);
    EXPECT_NEAR(static_cast<double>(sign01) / blocks, 0.5, 0.03);
}

// ---------------------------------------------------------------- bitmaps and sizing

TEST(SketchBitmap, SetAndCount)
{
    for (std::size_t n : {1u, 7u, 8u, 9u, 63u, 64u, 65u, 1000u, 4099u, 100000u}) {
        std::mt19937_64 rng(n);
        std::vector<std::uint32_t> idx;
        for (std::size_t q = 0; q < n / 3 + 1; ++q) idx.push_back(static_cast<std::uint32_t>(rng() % n));  // repeats
        std::vector<std::uint8_t> bm(sketch::bitmap_bytes(n) + 8, 0);
        sketch::bitmap_set(bm.data(), idx.data(), idx.size());
        const std::set<std::uint32_t> uniq(idx.begin(), idx.end());
        EXPECT_EQ(sketch::bitmap_count(bm.data(), n), uniq.size()) << "n=" << n;
        for (std::size_t i = 0; i < n; ++i)
            ASSERT_EQ((bm[i / 8] >> (i % 8)) & 1, uniq.count(static_cast<std::uint32_t>(i)) ? 1 : 0) << i;
        for (std::size_t q = sketch::bitmap_bytes(n); q < bm.size(); ++q) EXPECT_EQ(bm[q], 0) << "wrote past the bitmap";
        // Bits past n in the last byte are not counted.
        if (n % 8) {
            bm[n / 8] |= static_cast<std::uint8_t>(0xffu << (n % 8));
            EXPECT_EQ(sketch::bitmap_count(bm.data(), n), uniq.size()) << "n=" << n;
        }
    }
    EXPECT_EQ(sketch::bitmap_bytes(0), 0u);
    EXPECT_EQ(sketch::bitmap_bytes(8), 1u);
    EXPECT_EQ(sketch::bitmap_bytes(9), 2u);
    EXPECT_EQ(sketch::bitmap_count(nullptr, 0), 0u);
}

std::uint32_t max_column(const std::vector<std::uint32_t> &idx)
{
    std::vector<std::uint32_t> col(kBlock, 0);
    for (std::uint32_t i : idx) ++col[i % kBlock];
    return *std::max_element(col.begin(), col.end());
}

void expect_smallest_m(std::size_t n, const std::vector<std::uint32_t> &idx, double load)
{
    const std::vector<std::uint8_t> bm = bitmap_of(n, idx);
    const std::uint32_t m = sketch::rows_per_table(bm.data(), n, load);
    const double maxcol = max_column(idx);
    SCOPED_TRACE("n=" + std::to_string(n) + " k=" + std::to_string(idx.size()) + " load=" + std::to_string(load));
    ASSERT_GE(m, 1u);
    EXPECT_LE(maxcol, load * 3.0 * m);
    if (m > 1) {
        EXPECT_GT(maxcol, load * 3.0 * (m - 1));
    }
}

TEST(SketchSizing, RowsPerTableIsSmallestM)
{
    for (double load : {0.5, 0.75, 0.77, 1.0, 2.5}) {
        expect_smallest_m(1 << 20, random_support(1 << 20, 0.1, 1), load);
        expect_smallest_m(1 << 20, random_support(1 << 20, 0.001, 2), load);
        expect_smallest_m(123457, random_support(123457, 0.5, 3), load);
        expect_smallest_m(5000, random_support(5000, 1.0, 4), load);
    }
    // Exact values: 2000 elements all in column 0, load 0.75: m = ceil(2000 / 2.25) = 889.
    std::vector<std::uint32_t> col0;
    for (std::uint32_t b = 0; b < 2000; ++b) col0.push_back(b * kBlock);
    EXPECT_EQ(sketch::rows_per_table(bitmap_of(2000 * kBlock, col0).data(), 2000 * kBlock, 0.75), 889u);
    // 9 in one column at load 0.75: 9 <= 2.25 m -> m = 4 exactly on the boundary.
    std::vector<std::uint32_t> nine;
    for (std::uint32_t b = 0; b < 9; ++b) nine.push_back(b * kBlock + 5);
    EXPECT_EQ(sketch::rows_per_table(bitmap_of(9 * kBlock, nine).data(), 9 * kBlock, 0.75), 4u);
    // Empty support -> 1.
    std::vector<std::uint8_t> empty(sketch::bitmap_bytes(10000), 0);
    EXPECT_EQ(sketch::rows_per_table(empty.data(), 10000, 0.75), 1u);
    EXPECT_EQ(sketch::rows_per_table(nullptr, 0, 0.75), 1u);
}

TEST(SketchSizing, IgnoresBitsPastN)
{
    // n = 1025 with only bit 1024 set (column 0); garbage past n in the last
    // byte must not count (it would land in columns 1..7).
    const std::size_t n = 1025;
    std::vector<std::uint8_t> bm(sketch::bitmap_bytes(n), 0);
    bm[1024 / 8] = 0xff;  // bits 1024..1031, only 1024 < n
    std::vector<std::uint8_t> one = bitmap_of(n, {1024});
    EXPECT_EQ(sketch::rows_per_table(bm.data(), n, 0.1), sketch::rows_per_table(one.data(), n, 0.1));
    EXPECT_EQ(sketch::bitmap_count(bm.data(), n), 1u);
    Layout l;
    l.n = n;
    l.m = 1;
    std::vector<float> sk(l.cells(), 0.0f);
    std::vector<float> x(n, 0.0f);
    x[1024] = 3.0f;
    const std::vector<std::uint32_t> idx = {1024};
    sketch::encode<float>(l, x.data(), idx.data(), 1, sk.data());
    std::vector<float> out(n, -1.0f);
    DecodeScratch s;
    const DecodeInfo info = sketch::decode<float>(l, bm.data(), sk.data(), out.data(), &s);
    EXPECT_EQ(info.support, 1u);
    EXPECT_EQ(info.peeled, 1u);
    EXPECT_EQ(out[1024], 3.0f);
    EXPECT_EQ(std::count(out.begin(), out.end(), 0.0f), static_cast<std::ptrdiff_t>(n - 1));
}

// ---------------------------------------------------------------- encode

template <typename W>
void linearity_case(std::size_t n, double da, double db, std::uint64_t seed)
{
    SCOPED_TRACE("n=" + std::to_string(n));
    const std::vector<std::uint32_t> ia = random_support(n, da, seed), ib = random_support(n, db, seed + 1);
    std::vector<std::uint32_t> iu;
    std::set_union(ia.begin(), ia.end(), ib.begin(), ib.end(), std::back_inserter(iu));
    const std::vector<W> a = values_on<W>(n, ia, Values::SmallInts, seed + 2);
    const std::vector<W> b = values_on<W>(n, ib, Values::SmallInts, seed + 3);
    std::vector<W> sum(n);
    for (std::size_t i = 0; i < n; ++i) sum[i] = a[i] + b[i];
    Layout l;
    l.n = n;
    l.m = 5;
    l.seed = seed;
    const std::vector<W> sa = encode_dense(l, a, ia), sb = encode_dense(l, b, ib), su = encode_dense(l, sum, iu);
    std::size_t nonzero = 0;
    for (std::size_t c = 0; c < l.cells(); ++c) {
        const W s = sa[c] + sb[c];
        ASSERT_EQ(std::memcmp(&s, &su[c], sizeof(W)), 0) << "cell " << c << ": " << s << " vs " << su[c];
        nonzero += su[c] != W(0);
    }
    EXPECT_GT(nonzero, 0u);
}

TEST(SketchEncode, LinearFloat)
{
    linearity_case<float>(100000, 0.05, 0.2, 1);
    linearity_case<float>(3000, 0.5, 0.5, 2);
}
TEST(SketchEncode, LinearDouble)
{
    linearity_case<double>(100000, 0.05, 0.2, 3);
    linearity_case<double>(1025, 1.0, 0.3, 4);
}

// The encoder against its definition, written with hits() alone; unsorted
// and sorted positions give the same sketch.
template <typename W>
void encode_reference_case()
{
    const std::size_t n = 50000;
    const std::vector<std::uint32_t> idx = random_support(n, 0.2, 9);
    const std::vector<W> x = values_on<W>(n, idx, Values::SmallInts, 10);
    Layout l;
    l.n = n;
    l.m = 3;
    l.seed = 77;
    std::vector<W> want(l.cells(), W(0));
    for (std::uint32_t i : idx) {
        Hit h[3];
        sketch::hits(l, i, h);
        for (int j = 0; j < 3; ++j) want[h[j].cell] += static_cast<W>(h[j].sign) * x[i];
    }
    EXPECT_EQ(mismatches(encode_dense(l, x, idx), want), 0u);
    std::vector<std::uint32_t> shuffled = idx;
    std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937_64(5));
    EXPECT_EQ(mismatches(encode_dense(l, x, shuffled), want), 0u);
    // Accumulates into what is there (the caller zeroes).
    std::vector<W> twice = encode_dense(l, x, idx);
    sketch::encode<W>(l, x.data(), idx.data(), idx.size(), twice.data());
    for (W &v : want) v *= 2;
    EXPECT_EQ(mismatches(twice, want), 0u);
}
TEST(SketchEncode, MatchesHitsFloat) { encode_reference_case<float>(); }
TEST(SketchEncode, MatchesHitsDouble) { encode_reference_case<double>(); }

// ---------------------------------------------------------------- lossless decode

TEST(SketchDecode, LosslessLargeRandomSupports)
{
    // Large enough columns that m is in the hundreds (see the note on top).
    const std::size_t n = (1u << 20) + 37;  // not a multiple of kBlock
    expect_lossless<float>(n, random_support(n, 0.5, 11), Values::SmallInts, 0.75, 1, "ints d=0.5");
    expect_lossless<double>(n, random_support(n, 0.5, 12), Values::SmallInts, 0.75, 2, "ints d=0.5 double");
    expect_lossless<float>(n, random_support(n, 0.5, 13), Values::Floats, 0.75, 3, "floats d=0.5");
    expect_lossless<double>(n, random_support(n, 0.5, 14), Values::Floats, 0.75, 4, "floats d=0.5 double");
    expect_lossless<float>(n, random_support(n, 0.3, 15), Values::SmallInts, 0.5, 5, "ints d=0.3 load 0.5");
    // m ~ 110 (> kFullRotationRows: rotation groups of kRotation columns).
    // Without rotation, ~16 colliding pairs would be expected here.
    const std::size_t n4 = (4u << 20) + 5;
    const std::vector<std::uint32_t> idx4 = random_support(n4, 0.05, 16);
    EXPECT_GT(sketch::rows_per_table(bitmap_of(n4, idx4).data(), n4, 0.75), sketch::kFullRotationRows);
    expect_lossless<float>(n4, idx4, Values::SmallInts, 0.75, 6, "ints d=0.05, m > kFullRotationRows");
}

TEST(SketchDecode, LosslessFullSupport)
{
    const std::size_t n = (1u << 20) + 1000;
    std::vector<std::uint32_t> all(n);
    std::iota(all.begin(), all.end(), 0u);
    expect_lossless<float>(n, all, Values::SmallInts, 0.75, 21, "full ints");
    expect_lossless<float>(n, all, Values::Floats, 0.75, 22, "full floats");
}

TEST(SketchDecode, LosslessSingleBlockLengths)
{
    // Within one block every column holds at most one element: always pure.
    for (std::size_t n : {1u, 3u, 100u, 1023u, 1024u}) {
        std::vector<std::uint32_t> all(n);
        std::iota(all.begin(), all.end(), 0u);
        expect_lossless<float>(n, all, Values::SmallInts, 0.75, n, "full");
        expect_lossless<double>(n, all, Values::Floats, 0.75, n + 1, "full floats");
        expect_lossless<float>(n, random_support(n, 0.5, n), Values::SmallInts, 0.75, n + 2, "half");
    }
}

TEST(SketchDecode, LosslessConcentratedColumn)
{
    // Every support element at t = 0 of 3000 blocks: one column carries the
    // whole load; rows_per_table sizes for it.
    const std::size_t blocks = 3000, n = blocks * kBlock;
    std::vector<std::uint32_t> col0;
    for (std::uint32_t b = 0; b < blocks; ++b) col0.push_back(b * kBlock);
    expect_lossless<float>(n, col0, Values::SmallInts, 0.75, 31, "column 0");
    expect_lossless<float>(n, col0, Values::Floats, 0.75, 32, "column 0 floats");
    // The same column plus a sparse background elsewhere.
    std::vector<std::uint32_t> mixed = random_support(n, 0.001, 33);
    mixed.insert(mixed.end(), col0.begin(), col0.end());
    std::sort(mixed.begin(), mixed.end());
    mixed.erase(std::unique(mixed.begin(), mixed.end()), mixed.end());
    expect_lossless<double>(n, mixed, Values::SmallInts, 0.75, 34, "column 0 + background");
}

TEST(SketchDecode, ZeroValuesOnSupport)
{
    const std::size_t n = (1u << 20) + 5;
    expect_lossless<float>(n, random_support(n, 0.5, 41), Values::Zeros, 0.75, 41, "zeros");
}

TEST(SketchDecode, EmptySupport)
{
    for (std::size_t n : {0u, 1u, 1025u, 100000u}) {
        const std::vector<std::uint8_t> bm(sketch::bitmap_bytes(n), 0);
        const Layout l = layout_for(n, bm, 0.75, 1);
        EXPECT_EQ(l.m, 1u);
        std::vector<float> sk(l.cells(), 0.0f);
        std::vector<float> out(n, 7.0f);
        DecodeScratch s;
        const DecodeInfo info = sketch::decode<float>(l, bm.data(), sk.data(), out.data(), &s);
        EXPECT_EQ(info.support, 0u);
        EXPECT_EQ(info.peeled, 0u);
        EXPECT_EQ(info.estimated, 0u);
        EXPECT_EQ(std::count(out.begin(), out.end(), 0.0f), static_cast<std::ptrdiff_t>(n));
    }
}

TEST(SketchDecode, SeedDoesNotChangeLosslessResult)
{
    const std::size_t n = (1u << 20) + 3;
    const std::vector<std::uint32_t> idx = random_support(n, 0.4, 51);
    const std::vector<std::uint8_t> bm = bitmap_of(n, idx);
    const std::vector<float> x = values_on<float>(n, idx, Values::SmallInts, 52);
    std::vector<float> first;
    DecodeScratch scratch;  // reused across seeds
    for (std::uint64_t seed : {1ull, 2ull, 3ull, 0x123456789abcdefull}) {
        const Layout l = layout_for(n, bm, 0.75, seed);
        const Decoded<float> d = decode_fresh<float>(l, bm, encode_dense(l, x, idx), &scratch);
        ASSERT_EQ(d.info.peeled, idx.size()) << "seed " << seed;
        if (first.empty())
            first = d.out;
        else
            EXPECT_EQ(mismatches(d.out, first), 0u) << "seed " << seed;
    }
    EXPECT_EQ(mismatches(first, x), 0u);
}

TEST(SketchDecode, SumOfRankSketches)
{
    // Four "ranks": own supports, OR of the bitmaps, m from the union, sum of
    // the sketches (what the allreduces do), one decode.
    const std::size_t n = (1u << 20) + 11, ranks = 4;
    std::vector<std::vector<std::uint32_t>> idx(ranks);
    std::vector<std::vector<float>> x(ranks);
    std::vector<std::uint8_t> uni(sketch::bitmap_bytes(n), 0);
    std::vector<float> want(n, 0.0f);
    for (std::size_t r = 0; r < ranks; ++r) {
        idx[r] = random_support(n, 0.12, 60 + r);
        x[r] = values_on<float>(n, idx[r], Values::SmallInts, 70 + r);
        const std::vector<std::uint8_t> bm = bitmap_of(n, idx[r]);
        for (std::size_t q = 0; q < uni.size(); ++q) uni[q] |= bm[q];
        for (std::size_t i = 0; i < n; ++i) want[i] += x[r][i];
    }
    Layout l = layout_for(n, uni, 0.75, 99);
    std::vector<float> total(l.cells(), 0.0f);
    for (std::size_t r = 0; r < ranks; ++r) {
        const std::vector<float> sk = encode_dense(l, x[r], idx[r]);
        for (std::size_t c = 0; c < sk.size(); ++c) total[c] += sk[c];
    }
    const std::size_t union_count = sketch::bitmap_count(uni.data(), n);
    EXPECT_GT(union_count, idx[0].size());
    const Decoded<float> d = decode_fresh<float>(l, uni, total);
    EXPECT_EQ(d.info.support, union_count);
    EXPECT_EQ(d.info.peeled, union_count);
    std::string first;
    EXPECT_EQ(mismatches(d.out, want, &first), 0u) << first;
}

// Two "ranks" sending x and -x: every sum is exactly zero, and like a dense
// MPI_SUM (x + -x = +0) the decoded zeros are +0, never -0.
TEST(SketchDecode, ExactZeroSumsArePositiveZero)
{
    const std::size_t n = 100003;
    const std::vector<std::uint32_t> idx = random_support(n, 0.2, 81);
    const std::vector<std::uint8_t> bm = bitmap_of(n, idx);
    const std::vector<double> x = values_on<double>(n, idx, Values::SmallInts, 82);
    std::vector<double> neg(n);
    for (std::size_t i = 0; i < n; ++i) neg[i] = -x[i];
    const Layout l = layout_for(n, bm, 0.75, 83);
    std::vector<double> sum = encode_dense(l, x, idx);
    const std::vector<double> other = encode_dense(l, neg, idx);
    for (std::size_t c = 0; c < sum.size(); ++c) sum[c] += other[c];
    const Decoded<double> d = decode_fresh<double>(l, bm, sum);
    EXPECT_EQ(d.info.peeled, idx.size());
    std::size_t negative_zeros = 0;
    for (double v : d.out) {
        ASSERT_EQ(v, 0.0);
        negative_zeros += std::signbit(v);
    }
    EXPECT_EQ(negative_zeros, 0u);
}

TEST(SketchDecode, ScratchReusedAcrossSizes)
{
    DecodeScratch scratch;
    for (std::size_t n : {(1u << 20) + 1u, 1000u, 3u, (1u << 19) + 9u}) {
        const std::vector<std::uint32_t> idx = n < kBlock ? random_support(n, 1.0, n) : random_support(n, 0.6, n);
        const std::vector<std::uint8_t> bm = bitmap_of(n, idx);
        const Layout l = layout_for(n, bm, 0.75, n);
        const std::vector<float> x = values_on<float>(n, idx, Values::SmallInts, n + 1);
        const Decoded<float> d = decode_fresh<float>(l, bm, encode_dense(l, x, idx), &scratch);
        EXPECT_EQ(d.info.peeled, idx.size()) << "n=" << n;
        EXPECT_EQ(mismatches(d.out, x), 0u) << "n=" << n;
    }
}

// ---------------------------------------------------------------- beyond lossless

// Two elements that share all three cells can never peel. Find such a
// pair by searching layout seeds (m = 1, one row per sub-table: element
// (0, 0) and the element of block 1 on the same cell of sub-table 0 share
// the other two cells when the blocks' rotations differ by the same amount
// in all three sub-tables, about 1 seed in R^2 = 2^20), then decode a
// support of those two plus a few others: exactly 2 estimated, each
// estimate x_self +- x_other, the rest exact.
TEST(SketchDecode, CollidingPairIsEstimated)
{
    const std::size_t n = 2 * kBlock;
    Layout l;
    l.n = n;
    l.m = 1;
    const std::size_t R = sketch::rotation_columns(1);
    std::uint32_t b = 0;
    for (std::uint64_t seed = 1; seed < 64000000 && b == 0; ++seed) {
        l.seed = seed;
        Hit h0[3], h1[3];
        sketch::hits(l, 0, h0);       // (block 0, t = 0): column = its offset
        sketch::hits(l, kBlock, h1);  // (block 1, t = 0)
        const std::size_t t = (h0[0].cell + R - h1[0].cell) % R;
        if ((h1[1].cell + t) % R == h0[1].cell % R && (h1[2].cell + t) % R == h0[2].cell % R)
            b = static_cast<std::uint32_t>(kBlock + t);
    }
    ASSERT_NE(b, 0u) << "no colliding pair found";
    Hit ha[3], hb[3];
    sketch::hits(l, 0, ha);
    sketch::hits(l, b, hb);
    for (int j = 0; j < 3; ++j) ASSERT_EQ(ha[j].cell, hb[j].cell);
    // Others at columns no other element reaches (each alone in its cells).
    std::vector<std::uint32_t> idx = {0, b};
    for (std::uint32_t c : {200u, 300u, static_cast<std::uint32_t>(kBlock + 700)}) {
        Hit hc[3];
        sketch::hits(l, c, hc);
        bool alone = true;
        for (int j = 0; j < 3; ++j) alone = alone && hc[j].cell != ha[j].cell;
        if (alone) idx.push_back(c);
    }
    std::sort(idx.begin(), idx.end());
    const std::vector<std::uint8_t> bm = bitmap_of(n, idx);
    const std::vector<float> x = values_on<float>(n, idx, Values::SmallInts, 3);
    const Decoded<float> d = decode_fresh<float>(l, bm, encode_dense(l, x, idx));
    EXPECT_EQ(d.info.support, idx.size());
    EXPECT_EQ(d.info.estimated, 2u);
    EXPECT_EQ(d.info.peeled, idx.size() - 2);
    for (std::uint32_t i : idx) {
        if (i != 0 && i != b) {
            EXPECT_EQ(d.out[i], x[i]) << i;
        }
    }
    EXPECT_TRUE(d.out[0] == x[0] + x[b] || d.out[0] == x[0] - x[b]) << d.out[0];
    EXPECT_TRUE(d.out[b] == x[b] + x[0] || d.out[b] == x[b] - x[0]) << d.out[b];
}

// Small and odd lengths, sized at load 0.75: lossless (the per-block column
// rotation is what makes these work at small m).
TEST(SketchDecode, LosslessSmallLengths)
{
    for (std::size_t n : {1025u, 3000u, 65553u, 100003u}) {
        for (double density : {0.01, 0.1, 0.5}) {
            expect_lossless<float>(n, random_support(n, density, n + 1), Values::SmallInts, 0.75, n,
                                   "d=" + std::to_string(density));
            expect_lossless<double>(n, random_support(n, density, n + 2), Values::Floats, 0.75, n + 1,
                                    "floats d=" + std::to_string(density));
        }
    }
    std::vector<std::uint32_t> all(1025);
    std::iota(all.begin(), all.end(), 0u);
    expect_lossless<float>(1025, all, Values::SmallInts, 0.75, 7, "full 1025");
}

// Overloaded: every element not peeled is estimated, peeled ones are still
// exact (integers), nothing is NaN, and decode terminates.
template <typename W>
void overloaded_case(std::size_t n, double density, std::uint32_t m, std::uint64_t seed, bool expect_none_peeled)
{
    SCOPED_TRACE("n=" + std::to_string(n) + " m=" + std::to_string(m));
    const std::vector<std::uint32_t> idx = random_support(n, density, seed);
    const std::vector<std::uint8_t> bm = bitmap_of(n, idx);
    Layout l;
    l.n = n;
    l.m = m;
    l.seed = seed;
    const std::vector<W> x = values_on<W>(n, idx, Values::SmallInts, seed + 1);
    const Decoded<W> d = decode_fresh<W>(l, bm, encode_dense(l, x, idx));
    EXPECT_EQ(d.info.support, idx.size());
    EXPECT_LT(d.info.peeled, d.info.support);
    EXPECT_EQ(d.info.estimated, d.info.support - d.info.peeled);
    if (expect_none_peeled) {
        // Nothing peeled, so the sketch is untouched and every output is
        // the count-sketch estimate: the median of the three signed cells.
        EXPECT_EQ(d.info.peeled, 0u);
        const std::vector<W> sk = encode_dense(l, x, idx);
        std::size_t checked = 0;
        for (std::uint32_t i : idx) {
            Hit h[3];
            sketch::hits(l, i, h);
            W e[3];
            for (int j = 0; j < 3; ++j) e[j] = static_cast<W>(h[j].sign) * sk[h[j].cell];
            std::sort(e, e + 3);
            ASSERT_EQ(d.out[i], e[1]) << "i=" << i;
            ++checked;
        }
        EXPECT_EQ(checked, idx.size());
    }
    for (std::size_t i = 0; i < n; ++i) ASSERT_FALSE(std::isnan(d.out[i])) << i;
    EXPECT_LE(mismatches(d.out, x), d.info.estimated) << "a peeled element is wrong";
    std::vector<bool> in(n, false);
    for (std::uint32_t i : idx) in[i] = true;
    for (std::size_t i = 0; i < n; ++i)
        if (!in[i]) {
            ASSERT_EQ(d.out[i], W(0)) << i;
        }
}

TEST(SketchDecode, OverloadedTerminatesWithEstimates)
{
    // m = 1 and 64 full blocks: every column has 64 elements in 3 cells.
    overloaded_case<float>(64 * kBlock, 1.0, 1, 1, true);
    // Load ~ 1.3: part peels, the rest is estimated.
    overloaded_case<float>(1u << 20, 0.5, 130, 2, false);
    overloaded_case<double>(1u << 20, 0.5, 130, 3, false);
    // Small m, load ~1.8.
    overloaded_case<float>(100000, 0.5, 9, 4, false);
}

// ---------------------------------------------------------------- threshold ladder

TEST(ThresholdLadder, Rungs)
{
    EXPECT_EQ(threshold::rung(0), 1e-20);
    EXPECT_EQ(threshold::rung(threshold::kRungs - 1), 0.5);
    const double ratio = std::pow(0.5 / 1e-20, 1.0 / (threshold::kRungs - 1));
    for (int r = 1; r < threshold::kRungs; ++r) {
        EXPECT_GT(threshold::rung(r), threshold::rung(r - 1));
        EXPECT_NEAR(threshold::rung(r) / threshold::rung(r - 1), ratio, ratio * 1e-9) << r;
    }
}

// Reference pick: scan every rung from the top.
template <typename W>
double reference_pick(const std::vector<W> &x, double zero_fraction)
{
    for (int r = threshold::kRungs - 1; r >= 0; --r) {
        const double tau = threshold::rung(r);
        std::size_t below = 0;
        for (W v : x) below += static_cast<double>(std::fabs(v)) < tau;
        if (static_cast<double>(below) / static_cast<double>(x.size()) <= zero_fraction) return tau;
    }
    return 0.0;
}

template <typename W>
void pick_cases()
{
    std::mt19937_64 rng(5);
    std::normal_distribution<double> normal(0.0, 1.0);
    std::uniform_real_distribution<double> expo(-22.0, 1.0);
    for (std::size_t n : {1u, 10u, 1000u, 100003u}) {
        std::vector<W> x(n);
        for (W &v : x) v = static_cast<W>(normal(rng) * std::pow(10.0, expo(rng)));
        for (double target : {0.0, 0.1, 0.5, 0.8, 0.95, 0.99, 1.0}) {
            SCOPED_TRACE("n=" + std::to_string(n) + " target=" + std::to_string(target));
            const double tau = threshold::pick(x.data(), n, target);
            EXPECT_EQ(tau, reference_pick(x, target));
            const double zeroed = static_cast<double>(threshold::count_below(x.data(), n, tau)) / static_cast<double>(n);
            EXPECT_LE(zeroed, target);
            // Largest such rung: the next one up zeroes too much.
            int r = 0;
            while (r < threshold::kRungs && threshold::rung(r) != tau) ++r;
            if (tau != 0.0) {
                ASSERT_LT(r, threshold::kRungs) << "not a rung: " << tau;
                if (r + 1 < threshold::kRungs) {
                    EXPECT_GT(static_cast<double>(threshold::count_below(x.data(), n, threshold::rung(r + 1))) /
                                  static_cast<double>(n),
                              target);
                }
            } else {
                EXPECT_GT(static_cast<double>(threshold::count_below(x.data(), n, threshold::rung(0))) /
                              static_cast<double>(n),
                          target);
            }
            // collect keeps exactly the complement, ascending.
            std::vector<std::uint32_t> idx = {12345678u};  // appends after what is there
            const std::size_t kept = threshold::collect(x.data(), n, tau, &idx);
            EXPECT_EQ(kept, n - threshold::count_below(x.data(), n, tau));
            ASSERT_EQ(idx.size(), kept + 1);
            EXPECT_EQ(idx[0], 12345678u);
            EXPECT_TRUE(std::is_sorted(idx.begin() + 1, idx.end()));
            EXPECT_EQ(std::adjacent_find(idx.begin() + 1, idx.end()), idx.end());
            for (std::size_t q = 1; q < idx.size(); ++q) ASSERT_GE(std::fabs(x[idx[q]]), tau);
        }
    }
}
TEST(ThresholdLadder, PickFloat) { pick_cases<float>(); }
TEST(ThresholdLadder, PickDouble) { pick_cases<double>(); }

TEST(ThresholdLadder, KnownData)
{
    // 80 tiny values (1e-30, below every rung) and 20 of magnitude 0.25.
    // Target 0.8: the top rung 0.5 would zero all 100; the largest rung
    // <= 0.25 zeroes exactly the 80 tiny ones.
    std::vector<float> x(100, 1e-30f);
    for (int i = 0; i < 20; ++i) x[static_cast<std::size_t>(i) * 5] = (i % 2 ? -0.25f : 0.25f);
    const double tau = threshold::pick(x.data(), x.size(), 0.8);
    EXPECT_GT(tau, 0.1);
    EXPECT_LE(tau, 0.25);
    EXPECT_EQ(threshold::count_below(x.data(), x.size(), tau), 80u);
    // Target just under 0.8: even the lowest rung zeroes 80% -> 0, keep all.
    EXPECT_EQ(threshold::pick(x.data(), x.size(), 0.79), 0.0);
    std::vector<std::uint32_t> idx;
    EXPECT_EQ(threshold::collect(x.data(), x.size(), 0.0, &idx), 100u);
    // Target 1: the top rung.
    EXPECT_EQ(threshold::pick(x.data(), x.size(), 1.0), 0.5);
    // All zeros: nothing survives any rung.
    std::vector<double> zeros(1000, 0.0);
    EXPECT_EQ(threshold::pick(zeros.data(), zeros.size(), 0.8), 0.0);
    EXPECT_EQ(threshold::pick(zeros.data(), 0, 0.8), 0.5);
}

// Magnitudes on and around every rung, powers of two (binade edges),
// subnormals, zeros and non-finite values: pick must equal the reference
// scan for every target.
template <typename W>
void boundary_pick_cases()
{
    std::vector<W> x;
    for (int r = 0; r < threshold::kRungs; ++r) {
        const W t = static_cast<W>(threshold::rung(r));
        x.push_back(t);
        x.push_back(-std::nextafter(t, W(0)));
        x.push_back(std::nextafter(t, W(1)));
    }
    for (int e = -80; e <= 2; ++e) x.push_back(static_cast<W>(std::ldexp(1.0, e)));
    x.push_back(std::numeric_limits<W>::denorm_min());
    x.push_back(W(0));
    x.push_back(-W(0));
    x.push_back(std::numeric_limits<W>::infinity());
    x.push_back(std::numeric_limits<W>::quiet_NaN());
    x.push_back(std::numeric_limits<W>::max());
    for (double target = 0.0; target <= 1.0; target += 1.0 / 64) {
        EXPECT_EQ(threshold::pick(x.data(), x.size(), target), reference_pick(x, target)) << "target " << target;
    }
}
TEST(ThresholdLadder, PickAtBoundariesFloat) { boundary_pick_cases<float>(); }
TEST(ThresholdLadder, PickAtBoundariesDouble) { boundary_pick_cases<double>(); }

TEST(ThresholdLadder, BoundaryIsKept)
{
    // |x| == tau is kept (and not counted as zeroed).
    const double tau = threshold::rung(40);
    std::vector<double> x = {tau, -tau, std::nextafter(tau, 0.0), 0.0, tau * 2};
    EXPECT_EQ(threshold::count_below(x.data(), x.size(), tau), 2u);
    std::vector<std::uint32_t> idx;
    EXPECT_EQ(threshold::collect(x.data(), x.size(), tau, &idx), 3u);
    EXPECT_EQ(idx, (std::vector<std::uint32_t>{0, 1, 4}));
    // Rung 40 zeroes 2 of 5, rung 41 (~2.08 tau) all 5, rung 39 (~tau / 2.08) 1.
    EXPECT_EQ(threshold::pick(x.data(), x.size(), 0.4), threshold::rung(40));
    EXPECT_EQ(threshold::pick(x.data(), x.size(), 0.99), threshold::rung(40));
    EXPECT_EQ(threshold::pick(x.data(), x.size(), 0.39), threshold::rung(39));
}

TEST(ThresholdLadder, NonFiniteKept)
{
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    std::vector<float> x = {0.0f, nan, 1e-3f, -inf, 0.0f, -nan, 2.0f, 0.0f, 0.0f, 0.0f};
    // NaN is never below a threshold.
    EXPECT_EQ(threshold::count_below(x.data(), x.size(), 0.5), 6u);
    const double tau = threshold::pick(x.data(), x.size(), 0.6);  // 6 of 10 below 0.5: top rung ok
    EXPECT_EQ(tau, 0.5);
    std::vector<std::uint32_t> idx;
    threshold::collect(x.data(), x.size(), tau, &idx);
    EXPECT_EQ(idx, (std::vector<std::uint32_t>{1, 3, 5, 6}));
    idx.clear();
    threshold::collect(x.data(), x.size(), 1e-3, &idx);
    EXPECT_EQ(idx, (std::vector<std::uint32_t>{1, 2, 3, 5, 6}));
}

}  // namespace
}  // namespace cc_coll::detail
