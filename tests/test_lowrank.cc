// Method LOWRANK's linear algebra without MPI (docs/algorithms.md section 4,
// src/compressors/lowrank/powersgd.hpp): the matrix view, the compression
// test, the seeded Gaussian, the orthogonalisation, the three products
// against naive loops written here, single-process PowerSGD steps, and the
// CC_COLL_LOWRANK_FACTORS setting (its word, the agreement, the cost model).
//
// Matrices are row-major, as in the library: M is rows x cols, P rows x r,
// Q cols x r. The references below loop; the library must not (it calls
// CBLAS / LAPACKE), which is why they are here and not there.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "compressors/lowrank/powersgd.hpp"
#include "core/config.hpp"
#include "core/method.hpp"
#include "core/params.hpp"
#include "map_env.hpp"

namespace cc_coll::detail::lowrank {
namespace {

// ---------------------------------------------------------------- helpers

template <typename W>
struct Tol;
template <>
struct Tol<float> {
    static constexpr double ortho = 1e-5;   // |Q^T Q - I|, max entry
    static constexpr double product = 1e-5;  // per entry, relative to sum |a_ik b_kj|
    static constexpr double span = 1e-5;    // |QR - A| and lower(R), relative to the largest column norm
    static constexpr double recover = 1e-4; // ||M - M^||_F / ||M||_F for an exactly rank-k M
};
template <>
struct Tol<double> {
    static constexpr double ortho = 1e-12;
    static constexpr double product = 5e-14;
    static constexpr double span = 1e-12;
    static constexpr double recover = 1e-10;
};

template <typename W>
std::vector<W> gaussian_matrix(std::size_t rows, std::size_t cols, std::uint64_t seed)
{
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> normal(0.0, 1.0);
    std::vector<W> a(rows * cols);
    for (W &x : a) x = static_cast<W>(normal(rng));
    return a;
}

// Q^T Q for row-major rows x r Q, in double.
template <typename W>
std::vector<double> gram(const std::vector<W> &q, std::size_t rows, int r)
{
    const std::size_t ld = static_cast<std::size_t>(r);
    std::vector<double> g(ld * ld, 0.0);
    for (std::size_t i = 0; i < ld; ++i)
        for (std::size_t j = 0; j < ld; ++j) {
            double s = 0;
            for (std::size_t k = 0; k < rows; ++k) s += static_cast<double>(q[k * ld + i]) * q[k * ld + j];
            g[i * ld + j] = s;
        }
    return g;
}

// Largest |Q^T Q - I| entry over the columns listed in `cols` (all when empty).
template <typename W>
double orthonormality_error(const std::vector<W> &q, std::size_t rows, int r, std::vector<int> cols = {})
{
    if (cols.empty())
        for (int i = 0; i < r; ++i) cols.push_back(i);
    const std::vector<double> g = gram(q, rows, r);
    double worst = 0;
    for (int i : cols)
        for (int j : cols) {
            const double want = i == j ? 1.0 : 0.0;
            worst = std::max(worst, std::fabs(g[static_cast<std::size_t>(i * r + j)] - want));
        }
    return worst;
}

template <typename W>
bool all_finite(const std::vector<W> &x)
{
    return std::all_of(x.begin(), x.end(), [](W v) { return std::isfinite(v); });
}

template <typename W>
double frobenius(const std::vector<W> &a)
{
    double s = 0;
    for (W v : a) s += static_cast<double>(v) * v;
    return std::sqrt(s);
}

template <typename W>
double frobenius_diff(const std::vector<W> &a, const std::vector<W> &b)
{
    double s = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
        const double d = static_cast<double>(a[i]) - b[i];
        s += d * d;
    }
    return std::sqrt(s);
}

// C = op(A) op(B) reference, all row-major, accumulated in double; also
// returns sum |a_ik b_kj| per entry, the scale of the rounding error.
struct Reference {
    std::vector<double> c;
    std::vector<double> scale;
};

// C (m x n) = sum_k A(i, k) B(k, j) with element accessors.
template <typename FA, typename FB>
Reference reference_product(std::size_t m, std::size_t n, std::size_t kk, FA a, FB b)
{
    Reference ref{std::vector<double>(m * n), std::vector<double>(m * n)};
    for (std::size_t i = 0; i < m; ++i)
        for (std::size_t j = 0; j < n; ++j) {
            double s = 0, abs_s = 0;
            for (std::size_t k = 0; k < kk; ++k) {
                const double t = a(i, k) * b(k, j);
                s += t;
                abs_s += std::fabs(t);
            }
            ref.c[i * n + j] = s;
            ref.scale[i * n + j] = abs_s;
        }
    return ref;
}

// Largest |got - want| / (sum |terms| + tiny) over all entries; NaN anywhere is reported as infinity.
template <typename W>
double product_error(const std::vector<W> &got, const Reference &want)
{
    double worst = 0;
    for (std::size_t i = 0; i < want.c.size(); ++i) {
        if (!std::isfinite(got[i])) return std::numeric_limits<double>::infinity();
        worst = std::max(worst, std::fabs(got[i] - want.c[i]) / (want.scale[i] + 1e-300));
    }
    return worst;
}

// An orthonormal rows x k basis (row-major), built in double by the test
// itself (modified Gram-Schmidt, twice), so the PowerSGD tests do not rely on
// the code under test to make their inputs.
std::vector<double> reference_orthonormal(std::size_t rows, std::size_t k, std::uint64_t seed)
{
    std::vector<double> a = gaussian_matrix<double>(rows, k, seed);
    for (int pass = 0; pass < 2; ++pass)
        for (std::size_t i = 0; i < k; ++i) {
            for (std::size_t j = 0; j < i; ++j) {
                double d = 0;
                for (std::size_t t = 0; t < rows; ++t) d += a[t * k + i] * a[t * k + j];
                for (std::size_t t = 0; t < rows; ++t) a[t * k + i] -= d * a[t * k + j];
            }
            double n2 = 0;
            for (std::size_t t = 0; t < rows; ++t) n2 += a[t * k + i] * a[t * k + i];
            const double n = std::sqrt(n2);
            for (std::size_t t = 0; t < rows; ++t) a[t * k + i] /= n;
        }
    return a;
}

// M = U diag(sigma) V^T (rows x cols), U and V orthonormal.
template <typename W>
std::vector<W> matrix_with_singular_values(std::size_t rows, std::size_t cols, const std::vector<double> &sigma,
                                           std::uint64_t seed)
{
    const std::size_t k = sigma.size();
    const std::vector<double> u = reference_orthonormal(rows, k, seed);
    const std::vector<double> v = reference_orthonormal(cols, k, seed + 1);
    std::vector<W> m(rows * cols);
    for (std::size_t i = 0; i < rows; ++i)
        for (std::size_t j = 0; j < cols; ++j) {
            double s = 0;
            for (std::size_t t = 0; t < k; ++t) s += u[i * k + t] * sigma[t] * v[j * k + t];
            m[i * cols + j] = static_cast<W>(s);
        }
    return m;
}

// One PowerSGD step on one process (docs/algorithms.md section 4 with W = 1):
// Q orthogonalised; P = M Q; P orthogonalised; Q = M^T P; M^ = P Q^T.
// q holds the starting Q (cols x r) and receives the new one (the warm start
// of the next step); returns M^.
template <typename W>
std::vector<W> powersgd_step(const std::vector<W> &m, const Shape &s, std::vector<W> &q, bool use_gram_schmidt = false)
{
    std::vector<W> p(s.rows * static_cast<std::size_t>(s.rank));
    std::vector<W> mhat(s.elements());
    start_q<W>(q.data(), /*seed=*/1, /*stream=*/2, s, use_gram_schmidt, q.data());
    multiply_mq<W>(m.data(), s, q.data(), p.data());
    orthogonalize<W>(p.data(), s.rows, s.rank, use_gram_schmidt);
    multiply_mtp<W>(m.data(), s, p.data(), q.data());
    reconstruct<W>(p.data(), q.data(), s, W(1), mhat.data());
    return mhat;
}

template <typename W>
std::vector<W> gaussian_q(const Shape &s, std::uint64_t seed)
{
    std::vector<W> q(s.cols * static_cast<std::size_t>(s.rank));
    gaussian_fill<W>(seed, /*stream=*/7, q.data(), q.size());
    return q;
}

Shape shape_of(std::size_t rows, std::size_t cols, int rank)
{
    Shape s;
    std::string why;
    EXPECT_TRUE(resolve_shape(rows * cols, true, rows, cols, rank, &s, &why)) << why;
    return s;
}

template <typename T>
class LowRankTyped : public ::testing::Test {};
using WorkTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(LowRankTyped, WorkTypes);

// ---------------------------------------------------------------- resolve_shape

TEST(LowRankShape, GivenShapeIsUsed)
{
    Shape s;
    std::string why;
    ASSERT_TRUE(resolve_shape(768 * 3072, true, 768, 3072, 4, &s, &why)) << why;
    EXPECT_EQ(s.rows, 768u);
    EXPECT_EQ(s.cols, 3072u);
    EXPECT_EQ(s.rank, 4);
    EXPECT_EQ(s.elements(), 768u * 3072u);
    EXPECT_EQ(s.factor_elements(), (768u + 3072u) * 4u);
    // Row and column vectors are shapes too.
    ASSERT_TRUE(resolve_shape(10, true, 1, 10, 1, &s, &why)) << why;
    EXPECT_EQ(s.rows, 1u);
    EXPECT_EQ(s.cols, 10u);
    ASSERT_TRUE(resolve_shape(10, true, 10, 1, 1, &s, &why)) << why;
    EXPECT_EQ(s.rows, 10u);
    EXPECT_EQ(s.cols, 1u);
}

TEST(LowRankShape, ColsZeroMeansCountOverRows)
{
    Shape s;
    std::string why;
    ASSERT_TRUE(resolve_shape(12, true, 4, 0, 1, &s, &why)) << why;
    EXPECT_EQ(s.rows, 4u);
    EXPECT_EQ(s.cols, 3u);
    ASSERT_TRUE(resolve_shape(12, true, 12, 0, 1, &s, &why)) << why;
    EXPECT_EQ(s.cols, 1u);
    ASSERT_TRUE(resolve_shape(12, true, 1, 0, 1, &s, &why)) << why;
    EXPECT_EQ(s.cols, 12u);
}

TEST(LowRankShape, RejectsWithReason)
{
    const Shape untouched{123, 456, 7};
    struct Case {
        std::size_t count;
        std::uint64_t rows, cols;
        const char *what;
    };
    const Case cases[] = {
        {10, 3, 0, "rows not dividing count (cols = 0)"},
        {4, 8, 0, "rows > count (cols = 0)"},
        {12, 3, 5, "rows x cols > count"},
        {12, 3, 3, "rows x cols < count"},
        {12, 24, 1, "rows > count"},
        {12, 0, 12, "rows = 0 with cols != 0"},
        {12, 0, 1, "rows = 0 with cols = 1"},
    };
    for (const Case &c : cases) {
        Shape s = untouched;
        std::string why;
        EXPECT_FALSE(resolve_shape(c.count, true, c.rows, c.cols, 2, &s, &why)) << c.what;
        EXPECT_FALSE(why.empty()) << c.what << ": no reason given";
        EXPECT_EQ(s.rows, untouched.rows) << c.what << ": *out written on failure";
        EXPECT_EQ(s.cols, untouched.cols) << c.what;
        EXPECT_EQ(s.rank, untouched.rank) << c.what;
    }
    std::string why;
    Shape s;
    ASSERT_FALSE(resolve_shape(10, true, 3, 0, 1, &s, &why));
    EXPECT_NE(why.find("10"), std::string::npos) << "reason should name the count: " << why;
    EXPECT_NE(why.find("3"), std::string::npos) << "reason should name the rows: " << why;
}

// SHAPE with rows = cols = 0 asks for the near-square view: the same
// matrix as no shape (which point-to-point uses; an allreduce sends a tensor
// without a shape densely and never resolves a view for it).
TEST(LowRankShape, RowsZeroIsTheNearSquareView)
{
    for (std::size_t count : {1u, 2u, 12u, 1000u, 1073u, 1024u, 999999u}) {
        for (int rank : {1, 3, 64}) {
            Shape a, b;
            std::string why;
            ASSERT_TRUE(resolve_shape(count, true, 0, 0, rank, &a, &why)) << count << ": " << why;
            ASSERT_TRUE(resolve_shape(count, false, 0, 0, rank, &b, &why)) << count << ": " << why;
            EXPECT_EQ(a.rows, b.rows) << count;
            EXPECT_EQ(a.cols, b.cols) << count;
            EXPECT_EQ(a.rank, b.rank) << count;
        }
    }
    Shape s;
    std::string why;
    ASSERT_TRUE(resolve_shape(1073, true, 0, 0, 2, &s, &why)) << why;
    EXPECT_EQ(s.rows, 33u);
    EXPECT_EQ(s.cols, 33u);
    EXPECT_EQ(s.rank, 2);
    ASSERT_FALSE(resolve_shape(1073, true, 0, 7, 2, &s, &why));
    EXPECT_NE(why.find("cols = 0"), std::string::npos) << why;
}

// The smallest rows x cols >= count over near-square shapes (|rows - cols|
// <= 1, rows >= cols), found by search.
std::uint64_t min_near_square_cover(std::uint64_t count)
{
    std::uint64_t k = 1;
    while (k * k < count) ++k;  // k = ceil(sqrt(count))
    // Candidates: (k-1) x (k-1) < count always; (k) x (k-1) and k x k.
    return k * (k - 1) >= count ? k * (k - 1) : k * k;
}

TEST(LowRankShape, DefaultIsNearSquareWithMinimalPadding)
{
    std::vector<std::uint64_t> counts;
    for (std::uint64_t c = 1; c <= 3000; ++c) counts.push_back(c);
    for (std::uint64_t k : {1000ull, 4096ull, 46340ull, 46341ull, 65535ull, 65536ull, 1000003ull})
        for (std::uint64_t c : {k * k - 1, k * k, k * k + 1, k * (k + 1) - 1, k * (k + 1), k * (k + 1) + 1})
            counts.push_back(c);
    counts.push_back(768ull * 3072ull);
    counts.push_back(2147483647ull);  // INT_MAX, the collectives' largest count
    counts.push_back((1ull << 52) + 1);  // sqrt in double is inexact here
    for (std::uint64_t count : counts) {
        Shape s;
        std::string why;
        ASSERT_TRUE(resolve_shape(static_cast<std::size_t>(count), false, 0, 0, 1, &s, &why)) << count << ": " << why;
        const std::uint64_t cover = static_cast<std::uint64_t>(s.rows) * s.cols;
        ASSERT_GE(cover, count) << "count " << count << ": " << s.rows << " x " << s.cols << " does not cover it";
        EXPECT_EQ(cover, min_near_square_cover(count))
            << "count " << count << ": " << s.rows << " x " << s.cols << " is not the smallest near-square cover";
        EXPECT_TRUE(s.rows == s.cols || s.rows == s.cols + 1) << "count " << count << ": " << s.rows << " x "
                                                              << s.cols;
        // The padding (the tail of the last row) never fills a whole row.
        EXPECT_LT(cover - count, s.cols) << "count " << count;
        // rows = ceil(sqrt(count)), as documented.
        EXPECT_GE(static_cast<std::uint64_t>(s.rows) * s.rows, count) << count;
        EXPECT_LT(static_cast<std::uint64_t>(s.rows - 1) * (s.rows - 1), count) << count;
    }
}

TEST(LowRankShape, RankClampedToMinRowsCols)
{
    struct Case {
        std::size_t count;
        bool has_shape;
        std::uint64_t rows, cols;
        int rank, want;
    };
    const Case cases[] = {
        {12, true, 3, 4, 1, 1},       {12, true, 3, 4, 3, 3},       {12, true, 3, 4, 4, 3},
        {12, true, 4, 3, 32, 3},      {12, true, 12, 1, 4, 1},      {12, true, 1, 12, 4, 1},
        {768 * 3072, true, 768, 0, 32, 32}, {768 * 3072, true, 3072, 768, 1000, 768},
        {10, false, 0, 0, 8, 3},  // 4 x 3 default view (padding 2): r <= 3
        {1, false, 0, 0, 4, 1},
    };
    for (const Case &c : cases) {
        Shape s;
        std::string why;
        ASSERT_TRUE(resolve_shape(c.count, c.has_shape, c.rows, c.cols, c.rank, &s, &why)) << why;
        EXPECT_EQ(s.rank, c.want) << c.count << " as " << s.rows << " x " << s.cols << ", rank " << c.rank;
        EXPECT_EQ(s.rank, std::min<int>(c.rank, static_cast<int>(std::min(s.rows, s.cols))));
    }
}

// ---------------------------------------------------------------- should_compress

// PyTorch's _should_compress (torch/distributed/algorithms/ddp_comm_hooks/
// powerSGD_hook.py): compressed_size * min_compression_rate < uncompressed_size,
// with compressed_size = (rows + cols) * rank, uncompressed_size = rows * cols.
bool pytorch_should_compress(std::uint64_t rows, std::uint64_t cols, int rank, double rate)
{
    const std::uint64_t uncompressed = rows * cols;
    const std::uint64_t compressed = (rows + cols) * static_cast<std::uint64_t>(rank);
    return static_cast<double>(compressed) * rate < static_cast<double>(uncompressed);
}

TEST(LowRankShouldCompress, MatchesPyTorchRule)
{
    const double rates[] = {0.5, 1.0, 1.5, 2.0, 3.0, 10.0};
    int compress = 0, skip = 0;
    for (std::uint64_t rows : {1ull, 2ull, 3ull, 4ull, 5ull, 8ull, 16ull, 100ull, 768ull, 3072ull})
        for (std::uint64_t cols : {1ull, 2ull, 3ull, 4ull, 7ull, 16ull, 1000ull, 3072ull})
            for (int rank : {1, 2, 4, 32})
                for (double rate : rates) {
                    Shape s;
                    std::string why;
                    ASSERT_TRUE(resolve_shape(rows * cols, true, rows, cols, rank, &s, &why)) << why;
                    const bool want = pytorch_should_compress(rows, cols, s.rank, rate);
                    EXPECT_EQ(should_compress(s, rate), want)
                        << rows << " x " << cols << " rank " << s.rank << " rate " << rate;
                    (want ? compress : skip)++;
                }
    EXPECT_GT(compress, 0);
    EXPECT_GT(skip, 0);
}

TEST(LowRankShouldCompress, BoundaryIsStrict)
{
    // (4 + 4) * 1 * 2 = 16 = 4 * 4: not compressed (strict <).
    EXPECT_FALSE(should_compress(shape_of(4, 4, 1), 2.0));
    EXPECT_TRUE(should_compress(shape_of(5, 5, 1), 2.0));   // 20 < 25
    EXPECT_FALSE(should_compress(shape_of(4, 4, 2), 1.0));  // 16 < 16 is false
    EXPECT_TRUE(should_compress(shape_of(4, 4, 1), 1.0));   // 8 < 16
    // A bias vector (1 x n) never pays at rate >= 1: (1 + n) r >= n.
    EXPECT_FALSE(should_compress(shape_of(1, 1000, 1), 1.0));
    // The clamped rank decides: 3 x 1000 at requested rank 32 is rank 3, 1003 * 3 * 2 > 3000.
    EXPECT_FALSE(should_compress(shape_of(3, 1000, 32), 2.0));
    EXPECT_TRUE(should_compress(shape_of(768, 3072, 32), 2.0));  // 3840 * 32 * 2 = 245760 < 2359296
    EXPECT_FALSE(should_compress(shape_of(768, 3072, 32), 20.0));  // 2457600 > 2359296
}

// ---------------------------------------------------------------- gaussian_fill

TYPED_TEST(LowRankTyped, GaussianFillDeterministicAndPrefixStable)
{
    using W = TypeParam;
    std::vector<W> a(1001), b(1001);
    gaussian_fill<W>(42, 3, a.data(), a.size());
    gaussian_fill<W>(42, 3, b.data(), b.size());
    EXPECT_EQ(a, b);
    // A pure function of (seed, stream, i): a shorter fill, even or odd
    // length, is a prefix of a longer one.
    for (std::size_t n : {1u, 2u, 7u, 10u, 1000u}) {
        std::vector<W> c(n);
        gaussian_fill<W>(42, 3, c.data(), n);
        EXPECT_TRUE(std::equal(c.begin(), c.end(), a.begin())) << "n = " << n;
    }
    EXPECT_TRUE(all_finite(a));
    // n = 0 writes nothing.
    W canary = W(12345);
    gaussian_fill<W>(42, 3, &canary, 0);
    EXPECT_EQ(canary, W(12345));
}

TYPED_TEST(LowRankTyped, GaussianFillSeedAndStreamSensitive)
{
    using W = TypeParam;
    const std::size_t n = 4096;
    std::vector<W> base(n), other(n);
    gaussian_fill<W>(42, 3, base.data(), n);
    auto same_count = [&](std::uint64_t seed, std::uint64_t stream) {
        gaussian_fill<W>(seed, stream, other.data(), n);
        std::size_t same = 0;
        for (std::size_t i = 0; i < n; ++i) same += base[i] == other[i];
        return same;
    };
    // Independent values coincide essentially never.
    EXPECT_LE(same_count(43, 3), 2u) << "seed + 1";
    EXPECT_LE(same_count(42, 4), 2u) << "stream + 1";
    EXPECT_LE(same_count(3, 42), 2u) << "seed and stream swapped";
    EXPECT_LE(same_count(42 ^ (1ull << 63), 3), 2u) << "seed's top bit";
    EXPECT_LE(same_count(0, 0), 2u);
}

TYPED_TEST(LowRankTyped, GaussianFillIsStandardNormal)
{
    using W = TypeParam;
    const std::size_t n = 100000;
    std::vector<W> x(n);
    for (std::uint64_t seed : {1ull, 0x5eedull}) {
        gaussian_fill<W>(seed, 11, x.data(), n);
        ASSERT_TRUE(all_finite(x));
        double sum = 0, sum2 = 0, lag = 0;
        std::size_t within1 = 0, within2 = 0;
        for (std::size_t i = 0; i < n; ++i) {
            const double v = x[i];
            sum += v;
            sum2 += v * v;
            if (i + 1 < n) lag += v * x[i + 1];
            within1 += std::fabs(v) < 1.0;
            within2 += std::fabs(v) < 2.0;
        }
        const double mean = sum / n;
        const double var = sum2 / n - mean * mean;
        // Standard errors: mean 1/sqrt(n) = 0.0032, variance sqrt(2/n) = 0.0045,
        // lag-1 correlation 0.0032; the bounds are about 5 of them.
        EXPECT_NEAR(mean, 0.0, 0.016) << "seed " << seed;
        EXPECT_NEAR(var, 1.0, 0.025) << "seed " << seed;
        // Box-Muller pairs (x[2i], x[2i + 1]) must be independent too.
        EXPECT_NEAR(lag / n, 0.0, 0.016) << "seed " << seed;
        // Shape, not only moments: P(|x| < 1) = 0.6827, P(|x| < 2) = 0.9545.
        EXPECT_NEAR(static_cast<double>(within1) / n, 0.6827, 0.0075) << "seed " << seed;
        EXPECT_NEAR(static_cast<double>(within2) / n, 0.9545, 0.0035) << "seed " << seed;
    }
}

// ---------------------------------------------------------------- orthogonalize

struct OrthoCase {
    std::size_t rows;
    int r;
    bool gs;
};

template <typename W>
void check_orthogonalize(const OrthoCase &c, std::uint64_t seed)
{
    SCOPED_TRACE(testing::Message() << "rows " << c.rows << ", r " << c.r << (c.gs ? ", Gram-Schmidt forced" : ""));
    const std::vector<W> a = gaussian_matrix<W>(c.rows, static_cast<std::size_t>(c.r), seed);
    std::vector<W> q = a;
    orthogonalize<W>(q.data(), c.rows, c.r, c.gs);
    ASSERT_TRUE(all_finite(q));
    EXPECT_LE(orthonormality_error(q, c.rows, c.r), Tol<W>::ortho) << "Q^T Q != I";

    // Span kept: R = Q^T A is upper triangular and Q R = A.
    const std::size_t r = static_cast<std::size_t>(c.r);
    double scale = 0;
    for (std::size_t j = 0; j < r; ++j) {
        double n2 = 0;
        for (std::size_t k = 0; k < c.rows; ++k) n2 += static_cast<double>(a[k * r + j]) * a[k * r + j];
        scale = std::max(scale, std::sqrt(n2));
    }
    std::vector<double> rr(r * r);
    for (std::size_t i = 0; i < r; ++i)
        for (std::size_t j = 0; j < r; ++j) {
            double s = 0;
            for (std::size_t k = 0; k < c.rows; ++k) s += static_cast<double>(q[k * r + i]) * a[k * r + j];
            rr[i * r + j] = s;
        }
    double lower = 0;
    for (std::size_t i = 0; i < r; ++i)
        for (std::size_t j = 0; j < i; ++j) lower = std::max(lower, std::fabs(rr[i * r + j]));
    EXPECT_LE(lower, Tol<W>::span * scale) << "Q^T A is not upper triangular: Q_i has A_j in it for j < i";
    double diff = 0;
    for (std::size_t k = 0; k < c.rows; ++k)
        for (std::size_t j = 0; j < r; ++j) {
            double s = 0;
            for (std::size_t i = 0; i <= j; ++i) s += static_cast<double>(q[k * r + i]) * rr[i * r + j];
            diff = std::max(diff, std::fabs(s - a[k * r + j]));
        }
    EXPECT_LE(diff, Tol<W>::span * scale) << "Q R != A: the span changed";
    for (std::size_t i = 0; i < r; ++i)
        EXPECT_GT(std::fabs(rr[i * r + i]), 1e-3 * scale) << "R is singular at " << i;
}

TYPED_TEST(LowRankTyped, OrthogonalizeGramSchmidtPath)
{
    // r <= 2 goes through Gram-Schmidt whatever the flag.
    for (std::size_t rows : {2u, 3u, 100u, 4096u})
        for (int r : {1, 2})
            for (bool gs : {false, true}) check_orthogonalize<TypeParam>({rows, r, gs}, 100 + rows + r);
    check_orthogonalize<TypeParam>({1, 1, false}, 5);
}

TYPED_TEST(LowRankTyped, OrthogonalizeQrPath)
{
    for (std::size_t rows : {32u, 100u, 3072u})
        for (int r : {3, 8, 32}) check_orthogonalize<TypeParam>({rows, r, false}, 200 + rows + r);
    // Square: r = rows.
    check_orthogonalize<TypeParam>({3, 3, false}, 7);
    check_orthogonalize<TypeParam>({8, 8, false}, 8);
}

TYPED_TEST(LowRankTyped, OrthogonalizeGramSchmidtForced)
{
    // As the library does for half-precision dtypes, at any r.
    for (std::size_t rows : {32u, 100u, 3072u})
        for (int r : {3, 8, 32}) check_orthogonalize<TypeParam>({rows, r, true}, 300 + rows + r);
}

TYPED_TEST(LowRankTyped, OrthogonalizeDoesNotTouchOtherMemory)
{
    using W = TypeParam;
    for (int r : {2, 8}) {
        const std::size_t rows = 50, n = rows * static_cast<std::size_t>(r);
        std::vector<W> buf = gaussian_matrix<W>(1, n + 8, 9);
        const std::vector<W> before = buf;
        orthogonalize<W>(buf.data() + 4, rows, r, false);
        for (std::size_t i : {0u, 1u, 2u, 3u}) EXPECT_EQ(buf[i], before[i]) << "r " << r;
        for (std::size_t i = n + 4; i < n + 8; ++i) EXPECT_EQ(buf[i], before[i]) << "r " << r;
    }
}

// The columns that are not exactly zero, and whether those are orthonormal.
template <typename W>
std::vector<int> nonzero_columns(const std::vector<W> &q, std::size_t rows, int r)
{
    const std::size_t ld = static_cast<std::size_t>(r);
    std::vector<int> nonzero;
    for (int j = 0; j < r; ++j) {
        bool any = false;
        for (std::size_t k = 0; k < rows; ++k) any = any || q[k * ld + static_cast<std::size_t>(j)] != W(0);
        if (any) nonzero.push_back(j);
    }
    return nonzero;
}

// An all-zero column gives no NaN, and the result is orthonormal apart from
// columns that are exactly zero. With stays_zero (the Gram-Schmidt path, as
// the header says: "A column that is zero after projection stays zero
// (PyTorch with epsilon 0 would produce NaN)") the zero column must be the
// one that is still zero.
template <typename W>
void check_zero_column(std::size_t rows, int r, int zero_col, bool gs, bool stays_zero)
{
    SCOPED_TRACE(testing::Message() << "rows " << rows << ", r " << r << ", zero column " << zero_col
                                    << (gs ? ", Gram-Schmidt forced" : ""));
    std::vector<W> q = gaussian_matrix<W>(rows, static_cast<std::size_t>(r), 17);
    for (std::size_t k = 0; k < rows; ++k) q[k * static_cast<std::size_t>(r) + static_cast<std::size_t>(zero_col)] = 0;
    orthogonalize<W>(q.data(), rows, r, gs);
    ASSERT_TRUE(all_finite(q)) << "NaN or Inf from a zero column";
    const std::vector<int> nonzero = nonzero_columns(q, rows, r);
    if (!nonzero.empty()) {
        EXPECT_LE(orthonormality_error(q, rows, r, nonzero), Tol<W>::ortho);
    }
    if (stays_zero) {
        std::vector<int> want;
        for (int j = 0; j < r; ++j)
            if (j != zero_col) want.push_back(j);
        EXPECT_EQ(nonzero, want) << "the zero column became nonzero";
    } else {
        EXPECT_GE(nonzero.size(), static_cast<std::size_t>(r - 1)) << "a nonzero column was lost";
    }
}

TYPED_TEST(LowRankTyped, OrthogonalizeZeroColumnStaysZeroGramSchmidt)
{
    check_zero_column<TypeParam>(64, 1, 0, false, true);
    check_zero_column<TypeParam>(64, 2, 0, false, true);
    check_zero_column<TypeParam>(64, 2, 1, false, true);
    check_zero_column<TypeParam>(64, 8, 0, true, true);
    check_zero_column<TypeParam>(64, 8, 5, true, true);
    // All columns zero (M = 0: P = M Q = 0).
    for (int r : {1, 2}) {
        std::vector<TypeParam> z(64 * static_cast<std::size_t>(r), TypeParam(0));
        orthogonalize<TypeParam>(z.data(), 64, r, false);
        EXPECT_TRUE(std::all_of(z.begin(), z.end(), [](TypeParam v) { return v == TypeParam(0); })) << "r " << r;
    }
}

// The same through Householder QR (r >= 3): no NaN, the others stay
// orthonormal. LAPACK's orgqr returns a full orthonormal Q, so the zero
// column comes back as a unit vector orthogonal to the rest (as
// torch.linalg.qr in PyTorch's QR path); either that or zero is accepted.
TYPED_TEST(LowRankTyped, OrthogonalizeZeroColumnQr)
{
    check_zero_column<TypeParam>(64, 3, 1, false, false);
    check_zero_column<TypeParam>(64, 8, 0, false, false);
    check_zero_column<TypeParam>(64, 8, 7, false, false);
    std::vector<TypeParam> z(64 * 4, TypeParam(0));
    orthogonalize<TypeParam>(z.data(), 64, 4, false);
    ASSERT_TRUE(all_finite(z));
    const std::vector<int> nonzero = nonzero_columns(z, 64, 4);
    if (!nonzero.empty()) {
        EXPECT_LE(orthonormality_error(z, 64, 4, nonzero), Tol<TypeParam>::ortho);
    }
}

// A column that is an exact multiple of an earlier one is zero after
// projection in exact arithmetic; what is left in floating point is rounding
// noise, which must not come back as a unit column that overlaps the
// earlier ones (Q^T Q must stay I on whatever columns are nonzero).
template <typename W>
void check_dependent_column(std::size_t rows, int r, bool gs)
{
    SCOPED_TRACE(testing::Message() << "rows " << rows << ", r " << r << (gs ? ", Gram-Schmidt forced" : ""));
    const std::size_t ld = static_cast<std::size_t>(r);
    std::vector<W> q = gaussian_matrix<W>(rows, ld, 23);
    for (std::size_t k = 0; k < rows; ++k) q[k * ld + ld - 1] = W(3) * q[k * ld];  // last = 3 x first
    orthogonalize<W>(q.data(), rows, r, gs);
    ASSERT_TRUE(all_finite(q));
    const std::vector<int> nonzero = nonzero_columns(q, rows, r);
    EXPECT_GE(nonzero.size(), static_cast<std::size_t>(r - 1)) << "an independent column was lost";
    EXPECT_LE(orthonormality_error(q, rows, r, nonzero), Tol<W>::ortho)
        << "the dependent column came back overlapping the others";
}

TYPED_TEST(LowRankTyped, OrthogonalizeDependentColumnQr)
{
    check_dependent_column<TypeParam>(200, 3, false);
    check_dependent_column<TypeParam>(200, 8, false);
}

// ---------------------------------------------------------------- products

struct ProductCase {
    std::size_t rows, cols;
    int rank;
};
const ProductCase kProductCases[] = {{1, 1, 1}, {1, 17, 1}, {17, 1, 1}, {37, 53, 1}, {37, 53, 3},
                                     {53, 37, 7}, {64, 64, 32}, {5, 200, 5}, {300, 20, 16}};

TYPED_TEST(LowRankTyped, MultiplyMqMatchesNaive)
{
    using W = TypeParam;
    for (const ProductCase &c : kProductCases) {
        SCOPED_TRACE(testing::Message() << c.rows << " x " << c.cols << " rank " << c.rank);
        const Shape s = shape_of(c.rows, c.cols, c.rank);
        const std::size_t r = static_cast<std::size_t>(s.rank);
        const std::vector<W> m = gaussian_matrix<W>(s.rows, s.cols, 1);
        const std::vector<W> q = gaussian_matrix<W>(s.cols, r, 2);
        std::vector<W> p(s.rows * r + 3, std::numeric_limits<W>::quiet_NaN());  // beta = 0: NaN must not leak
        p[s.rows * r] = p[s.rows * r + 1] = p[s.rows * r + 2] = W(-7);
        multiply_mq<W>(m.data(), s, q.data(), p.data());
        const Reference want = reference_product(
            s.rows, r, s.cols, [&](std::size_t i, std::size_t k) { return static_cast<double>(m[i * s.cols + k]); },
            [&](std::size_t k, std::size_t j) { return static_cast<double>(q[k * r + j]); });
        EXPECT_LE(product_error(p, want), Tol<W>::product);
        EXPECT_EQ(p[s.rows * r], W(-7)) << "wrote past P";
        EXPECT_EQ(p[s.rows * r + 2], W(-7)) << "wrote past P";
    }
}

TYPED_TEST(LowRankTyped, MultiplyMtpMatchesNaive)
{
    using W = TypeParam;
    for (const ProductCase &c : kProductCases) {
        SCOPED_TRACE(testing::Message() << c.rows << " x " << c.cols << " rank " << c.rank);
        const Shape s = shape_of(c.rows, c.cols, c.rank);
        const std::size_t r = static_cast<std::size_t>(s.rank);
        const std::vector<W> m = gaussian_matrix<W>(s.rows, s.cols, 3);
        const std::vector<W> p = gaussian_matrix<W>(s.rows, r, 4);
        std::vector<W> q(s.cols * r + 3, std::numeric_limits<W>::quiet_NaN());
        q[s.cols * r] = q[s.cols * r + 1] = q[s.cols * r + 2] = W(-7);
        multiply_mtp<W>(m.data(), s, p.data(), q.data());
        const Reference want = reference_product(
            s.cols, r, s.rows, [&](std::size_t j, std::size_t k) { return static_cast<double>(m[k * s.cols + j]); },
            [&](std::size_t k, std::size_t t) { return static_cast<double>(p[k * r + t]); });
        EXPECT_LE(product_error(q, want), Tol<W>::product);
        EXPECT_EQ(q[s.cols * r], W(-7)) << "wrote past Q";
        EXPECT_EQ(q[s.cols * r + 2], W(-7)) << "wrote past Q";
    }
}

TYPED_TEST(LowRankTyped, ReconstructMatchesNaive)
{
    using W = TypeParam;
    for (const ProductCase &c : kProductCases)
        for (W alpha : {W(1), W(0.25), W(-3)}) {
            SCOPED_TRACE(testing::Message() << c.rows << " x " << c.cols << " rank " << c.rank << " alpha " << alpha);
            const Shape s = shape_of(c.rows, c.cols, c.rank);
            const std::size_t r = static_cast<std::size_t>(s.rank);
            const std::vector<W> p = gaussian_matrix<W>(s.rows, r, 5);
            const std::vector<W> q = gaussian_matrix<W>(s.cols, r, 6);
            std::vector<W> out(s.elements() + 3, std::numeric_limits<W>::quiet_NaN());
            out[s.elements()] = out[s.elements() + 1] = out[s.elements() + 2] = W(-7);
            reconstruct<W>(p.data(), q.data(), s, alpha, out.data());
            const Reference want = reference_product(
                s.rows, s.cols, r,
                [&](std::size_t i, std::size_t k) { return static_cast<double>(alpha) * p[i * r + k]; },
                [&](std::size_t k, std::size_t j) { return static_cast<double>(q[j * r + k]); });
            EXPECT_LE(product_error(out, want), Tol<W>::product);
            EXPECT_EQ(out[s.elements()], W(-7)) << "wrote past M^";
            EXPECT_EQ(out[s.elements() + 2], W(-7)) << "wrote past M^";
        }
}

TYPED_TEST(LowRankTyped, ScaleMultipliesEveryElement)
{
    using W = TypeParam;
    std::vector<W> x = gaussian_matrix<W>(1, 1001, 12);
    const std::vector<W> before = x;
    scale<W>(x.data(), 1000, W(0.5));
    for (std::size_t i = 0; i < 1000; ++i) EXPECT_EQ(x[i], before[i] * W(0.5)) << i;
    EXPECT_EQ(x[1000], before[1000]) << "scaled past n";
}

// ---------------------------------------------------------------- PowerSGD steps

// An exactly rank-k M is recovered by one step at any rank r >= k: P = M Q
// spans M's column space, and P P^T M = M.
template <typename W>
void check_exact_recovery(std::size_t rows, std::size_t cols, int k, int r, bool gs)
{
    SCOPED_TRACE(testing::Message() << rows << " x " << cols << ", true rank " << k << ", r " << r
                                    << (gs ? ", Gram-Schmidt forced" : ""));
    std::vector<double> sigma;
    for (int i = 0; i < k; ++i) sigma.push_back(10.0 / (1 + i));
    const std::vector<W> m = matrix_with_singular_values<W>(rows, cols, sigma, 31 + k);
    const Shape s = shape_of(rows, cols, r);
    ASSERT_EQ(s.rank, r);
    std::vector<W> q = gaussian_q<W>(s, 99);
    const std::vector<W> mhat = powersgd_step(m, s, q, gs);
    ASSERT_TRUE(all_finite(mhat));
    EXPECT_LE(frobenius_diff(m, mhat) / frobenius(m), Tol<W>::recover);
}

TYPED_TEST(LowRankTyped, StepRecoversExactlyLowRankAtEqualRank)
{
    check_exact_recovery<TypeParam>(64, 48, 1, 1, false);
    check_exact_recovery<TypeParam>(64, 48, 2, 2, false);
    check_exact_recovery<TypeParam>(64, 48, 3, 3, false);
    check_exact_recovery<TypeParam>(48, 64, 8, 8, false);
    check_exact_recovery<TypeParam>(200, 300, 4, 4, true);
}

TYPED_TEST(LowRankTyped, StepRecoversExactlyLowRankAtHigherRankQr)
{
    check_exact_recovery<TypeParam>(64, 48, 1, 4, false);
    check_exact_recovery<TypeParam>(64, 48, 2, 3, false);
    check_exact_recovery<TypeParam>(48, 64, 3, 8, false);
    check_exact_recovery<TypeParam>(300, 200, 4, 32, false);
}

// Warm start on a fixed M is subspace iteration: the error of M^ falls step
// after step towards the best rank-r error sqrt(sum_{i > r} sigma_i^2).
template <typename W>
void check_warm_start(int r, bool gs)
{
    SCOPED_TRACE(testing::Message() << "r " << r << (gs ? ", Gram-Schmidt forced" : ""));
    const std::size_t rows = 120, cols = 90;
    std::vector<double> sigma;
    for (int i = 0; i < 40; ++i) sigma.push_back(std::pow(0.8, i));
    const std::vector<W> m = matrix_with_singular_values<W>(rows, cols, sigma, 77);
    double best2 = 0;
    for (std::size_t i = static_cast<std::size_t>(r); i < sigma.size(); ++i) best2 += sigma[i] * sigma[i];
    const double best = std::sqrt(best2);
    const Shape s = shape_of(rows, cols, r);
    std::vector<W> q = gaussian_q<W>(s, 5);
    std::vector<double> err;
    for (int step = 0; step < 60; ++step) {
        const std::vector<W> mhat = powersgd_step(m, s, q, gs);  // q: the warm start of the next step
        ASSERT_TRUE(all_finite(mhat)) << "step " << step;
        err.push_back(frobenius_diff(m, mhat));
    }
    std::string trace;
    for (std::size_t i = 0; i < err.size(); i += 5) trace += " " + std::to_string(err[i]);
    SCOPED_TRACE("errors every 5 steps:" + trace + "; best rank-r error " + std::to_string(best));
    for (std::size_t t = 1; t < err.size(); ++t)
        EXPECT_LE(err[t], err[t - 1] * (1 + 1e-5) + 1e-6) << "error rose at step " << t;
    EXPECT_LT(err.back(), 0.9 * err.front()) << "warm start did not improve on the first step";
    EXPECT_GE(err.back(), best * (1 - 1e-6)) << "better than the best rank-r approximation?";
    EXPECT_LE(err.back(), best * 1.01) << "did not converge to the best rank-r approximation";
}

TYPED_TEST(LowRankTyped, WarmStartErrorFallsOnFixedMatrix)
{
    check_warm_start<TypeParam>(1, false);
    check_warm_start<TypeParam>(2, false);
    check_warm_start<TypeParam>(4, false);
    check_warm_start<TypeParam>(4, true);
}

// A step whose M is all zero (a tensor whose gradient was zero everywhere for
// one step: an unused parameter, a frozen layer) gives P = 0 and so Q = M^T P
// = 0, which the warm start then carries into the next step. The steps after
// it must still compress the nonzero M, as the cold first step would; on the
// library's step sequence (collectives/allreduce/lowrank.cc: the warm Q, orthogonalised,
// then P = M Q) a zero Q that orthogonalisation leaves zero gives P = 0 and
// M^ = 0 for ever, and error feedback keeps all of every later gradient.
template <typename W>
void check_recovers_after_zero_step(int r, bool gs)
{
    SCOPED_TRACE(testing::Message() << "r " << r << (gs ? ", Gram-Schmidt forced" : ""));
    const std::size_t rows = 64, cols = 48;
    const Shape s = shape_of(rows, cols, r);
    const std::vector<W> zero(s.elements(), W(0));
    std::vector<double> sigma;
    for (int i = 0; i < r; ++i) sigma.push_back(4.0 / (1 + i));
    const std::vector<W> m = matrix_with_singular_values<W>(rows, cols, sigma, 55);  // exactly rank r
    std::vector<W> q = gaussian_q<W>(s, 3);
    const std::vector<W> first = powersgd_step(zero, s, q, gs);
    ASSERT_TRUE(all_finite(first));
    EXPECT_EQ(frobenius(first), 0.0);
    double err = 1;
    for (int step = 1; step <= 3; ++step) {
        const std::vector<W> mhat = powersgd_step(m, s, q, gs);
        ASSERT_TRUE(all_finite(mhat)) << "step " << step;
        err = frobenius_diff(m, mhat) / frobenius(m);
    }
    EXPECT_LE(err, 1e-3) << "relative error of M^ three steps after an all-zero step (1 = M^ is zero)";
}

TYPED_TEST(LowRankTyped, WarmStartRecoversAfterZeroStepQr)
{
    check_recovers_after_zero_step<TypeParam>(3, false);
    check_recovers_after_zero_step<TypeParam>(8, false);
}

// Cold start (a fresh Gaussian Q every step) does not converge: the warm
// start is what makes the error fall.
TEST(LowRankStep, ColdStartDoesNotImproveLikeWarmStart)
{
    const std::size_t rows = 120, cols = 90;
    std::vector<double> sigma;
    for (int i = 0; i < 40; ++i) sigma.push_back(std::pow(0.8, i));
    const std::vector<double> m = matrix_with_singular_values<double>(rows, cols, sigma, 77);
    const Shape s = shape_of(rows, cols, 2);
    std::vector<double> warm = gaussian_q<double>(s, 5);
    double warm_err = 0, cold_err = 0;
    for (int step = 0; step < 30; ++step) {
        warm_err = frobenius_diff(m, powersgd_step(m, s, warm));
        std::vector<double> cold(s.cols * 2);
        gaussian_fill<double>(5, 100 + static_cast<std::uint64_t>(step), cold.data(), cold.size());
        cold_err = frobenius_diff(m, powersgd_step(m, s, cold));
    }
    EXPECT_LT(warm_err, cold_err);
}

// ------------------------------------------------- regressions found in review
//
// The MPI-level tests of the two Gram-Schmidt cases are in
// mpi_tests/lowrank.c.

// resolve_shape must not compare rows * cols with count in std::size_t, which
// wraps: 2^33 x (2^31 + 1) = 2^64 + 2^33 is 2^33 = count modulo 2^64.
// (Unreachable through the collectives, which cap count at INT_MAX;
// cc_coll_lowrank_set_q and direct callers pass any size_t.)
TEST(LowRankRegression, ResolveShapeRejectsProductThatOverflows)
{
    if (sizeof(std::size_t) < 8) GTEST_SKIP() << "needs a 64-bit size_t";
    const std::uint64_t count = std::uint64_t{1} << 33;
    const std::uint64_t rows = std::uint64_t{1} << 33;
    const std::uint64_t cols = (std::uint64_t{1} << 31) + 1;
    Shape s;
    std::string why;
    const bool ok = resolve_shape(static_cast<std::size_t>(count), true, rows, cols, 1, &s, &why);
    EXPECT_FALSE(ok) << "accepted " << s.rows << " x " << s.cols << " for count " << count
                     << " (the product overflows std::size_t and wraps to count)";
    // A second wrap: 2^32 x (2^32 + 1) = 2^64 + 2^32 -> 2^32.
    const bool ok2 = resolve_shape(static_cast<std::size_t>(std::uint64_t{1} << 32), true, std::uint64_t{1} << 32,
                                   (std::uint64_t{1} << 32) + 1, 1, &s, &why);
    EXPECT_FALSE(ok2) << "accepted " << s.rows << " x " << s.cols << " for count 2^32";
}

// The near-square view of any size_t count ends (r * r wrapped to 0 for
// counts above (2^32 - 1)^2 and `while (r * r < count) ++r` never did) and is
// the smallest r with r * r >= count; one whose rows x cols would overflow
// size_t is refused.
TEST(LowRankRegression, NearSquareViewOfAnyCount)
{
    Shape s;
    std::string why;
    for (std::size_t count = 1; count <= 5000; ++count) {
        ASSERT_TRUE(resolve_shape(count, false, 0, 0, 1, &s, &why)) << count << ": " << why;
        ASSERT_GE(s.rows * s.rows, count) << count;
        ASSERT_LT((s.rows - 1) * (s.rows - 1), count) << count;
        ASSERT_EQ(s.cols, (count + s.rows - 1) / s.rows) << count;
    }
    if (sizeof(std::size_t) < 8) GTEST_SKIP() << "needs a 64-bit size_t";
    const std::uint64_t m = (std::uint64_t{1} << 32) - 1;
    // (2^32 - 1)^2: a perfect square, the largest that fits.
    ASSERT_TRUE(resolve_shape(static_cast<std::size_t>(m * m), false, 0, 0, 1, &s, &why)) << why;
    EXPECT_EQ(s.rows, m);
    EXPECT_EQ(s.cols, m);
    // One more: 2^32 rows of 2^32 - 1, 2^64 - 2^32 elements, still fits.
    ASSERT_TRUE(resolve_shape(static_cast<std::size_t>(m * m + 1), false, 0, 0, 1, &s, &why)) << why;
    EXPECT_EQ(s.rows, std::uint64_t{1} << 32);
    EXPECT_EQ(s.cols, m);
    // SIZE_MAX needs 2^32 x 2^32 = 2^64 elements: refused, with a reason.
    for (const std::size_t count : {std::numeric_limits<std::size_t>::max(),
                                    std::numeric_limits<std::size_t>::max() - 1}) {
        why.clear();
        EXPECT_FALSE(resolve_shape(count, false, 0, 0, 1, &s, &why)) << count;
        EXPECT_NE(why.find("too large"), std::string::npos) << why;
        why.clear();
        EXPECT_FALSE(resolve_shape(count, true, 0, 0, 1, &s, &why)) << count;
    }
}

template <typename T>
class LowRankRegressionTyped : public ::testing::Test {};
TYPED_TEST_SUITE(LowRankRegressionTyped, WorkTypes);

// Gram-Schmidt (r <= 2, and every r for F16/BF16) with a single projection
// left a column that depended on the earlier ones as rounding noise that is
// not orthogonal to them (Q^T Q off-diagonal 0.89 in fp32, 0.96 in fp64), so
// P P^T was no projection. It now projects twice ("twice is enough").
TYPED_TEST(LowRankRegressionTyped, GramSchmidtDependentColumnStaysOrthogonal)
{
    check_dependent_column<TypeParam>(200, 2, false);
    check_dependent_column<TypeParam>(200, 8, true);
}

// The consequence for a step: at r > k the extra columns of P = M Q are
// dependent; an exactly rank-k M must still be recovered (single projection:
// relative error 0.13 to 0.68). Rank 2 on a rank-1 gradient (batch size 1,
// an outer product) is the common case.
TYPED_TEST(LowRankRegressionTyped, GramSchmidtStepRecoversRankAboveData)
{
    check_exact_recovery<TypeParam>(64, 48, 1, 2, false);
    check_exact_recovery<TypeParam>(200, 300, 2, 8, true);
}

// An all-zero M gives P = 0 and Q = M^T P = 0; Gram-Schmidt leaves a zero Q
// zero, so a warm start from it would give M^ = 0 at every later step.
// start_q redraws a Q with an all-zero column from the seeded Gaussian.
TYPED_TEST(LowRankRegressionTyped, GramSchmidtWarmStartRecoversAfterZeroStep)
{
    check_recovers_after_zero_step<TypeParam>(1, false);
    check_recovers_after_zero_step<TypeParam>(2, false);
    check_recovers_after_zero_step<TypeParam>(4, true);
}

// The fused decompress of the host backend (HostExec::lr_reconstruct_store)
// computes M^ in blocks of rows: each block must hold exactly the values the
// whole product gives there, for every block size, so the fused step
// changes no bit of a LOWRANK result.
TEST(LowRankProducts, RowBlocksEqualTheWholeProduct)
{
    std::mt19937_64 rng(31);
    std::normal_distribution<double> dist;
    for (auto dims : {std::pair<std::size_t, std::size_t>{257, 4096}, {1000, 1537}, {768, 3072}})
        for (int r : {1, 4, 16, 32}) {
            Shape s;
            s.rows = dims.first;
            s.cols = dims.second;
            s.rank = r;
            std::vector<float> p(s.rows * r), q(s.cols * r), whole(s.rows * s.cols);
            for (float &v : p) v = static_cast<float>(dist(rng));
            for (float &v : q) v = static_cast<float>(dist(rng));
            reconstruct<float>(p.data(), q.data(), s, 1.0f, whole.data());
            for (std::size_t block : {std::size_t{1}, std::size_t{7}, std::size_t{64}, std::size_t{300}}) {
                std::vector<float> part(block * s.cols);
                for (std::size_t row = 0; row < s.rows; row += block) {
                    const std::size_t rows = std::min(block, s.rows - row);
                    reconstruct_rows<float>(p.data(), q.data(), s, row, rows, 1.0f, part.data());
                    ASSERT_EQ(std::memcmp(part.data(), whole.data() + row * s.cols, rows * s.cols * sizeof(float)), 0)
                        << s.rows << " x " << s.cols << " rank " << r << ", block " << block << ", row " << row;
                }
            }
        }
}

}  // namespace
}  // namespace cc_coll::detail::lowrank

// ---------------------------------------------------------------- CC_COLL_LOWRANK_FACTORS

namespace cc_coll::detail {
namespace {

using cc_coll::test::MapEnv;

// The factors' format of a communicator created with `value` (nullptr:
// unset), as a call's params carry it.
lowrank::Factors factors_for(const char *value)
{
    MapEnv env;
    if (value != nullptr) env.vars["CC_COLL_LOWRANK_FACTORS"] = value;
    Config cfg;
    std::string why;
    EXPECT_EQ(load_config(env.lookup(), &cfg, &why), CC_COLL_OK) << why;
    CallParams p;
    EXPECT_EQ(resolve_params(nullptr, cfg, &p), CC_COLL_OK);
    return lowrank::factors_of(p.method_options[CC_COLL_METHOD_LOWRANK]);
}

TEST(LowRankFactors, SettingGoesIntoTheOptionsWord)
{
    EXPECT_EQ(factors_for(nullptr), lowrank::Factors::Work);
    EXPECT_EQ(factors_for("work"), lowrank::Factors::Work);
    EXPECT_EQ(factors_for("bf16"), lowrank::Factors::Bf16);
    EXPECT_EQ(factors_for(" FP16 "), lowrank::Factors::Fp16);
}

TEST(LowRankFactors, BadValuesNameTheSettingAndWhatIsAllowed)
{
    for (const char *value : {"fp8", "", "half", "bf16,fp16"}) {
        MapEnv env;
        env.vars["CC_COLL_LOWRANK_FACTORS"] = value;
        Config cfg;
        std::string why;
        EXPECT_EQ(load_config(env.lookup(), &cfg, &why), CC_COLL_ERR_CONFIG) << value;
        EXPECT_NE(why.find("CC_COLL_LOWRANK_FACTORS=\"" + std::string(value) + "\""), std::string::npos) << why;
        EXPECT_NE(why.find("expected one of: work, bf16, fp16"), std::string::npos) << why;
    }
}

// The format shapes the exchange: three formats, three agreement hashes;
// work's is the hash without the setting.
TEST(LowRankFactors, AgreementHashFollowsTheSetting)
{
    const Method *m = find_method(CC_COLL_METHOD_LOWRANK);
    ASSERT_NE(m, nullptr);
    ASSERT_NE(m->agreement_params, nullptr);
    CallParams p;
    const std::uint64_t work = m->agreement_params(p);
    p.method_options[CC_COLL_METHOD_LOWRANK] = static_cast<std::uint32_t>(lowrank::Factors::Bf16);
    const std::uint64_t bf16 = m->agreement_params(p);
    p.method_options[CC_COLL_METHOD_LOWRANK] = static_cast<std::uint32_t>(lowrank::Factors::Fp16);
    const std::uint64_t fp16 = m->agreement_params(p);
    EXPECT_NE(work, bf16);
    EXPECT_NE(work, fp16);
    EXPECT_NE(bf16, fp16);
    // Other methods' words do not enter LOWRANK's hash.
    CallParams q;
    q.method_options[CC_COLL_METHOD_HALF] = 1;
    EXPECT_EQ(m->agreement_params(q), work);
}

// AUTO's price of the two exchanges: rows r e' and cols r e', e' the work
// size (4, 8 for F64) or 2 for 16-bit codes.
TEST(LowRankFactors, CostModelPricesTheCodes)
{
    const Method *m = find_method(CC_COLL_METHOD_LOWRANK);
    ASSERT_NE(m, nullptr);
    ASSERT_NE(m->exchange_cost, nullptr);
    for (lowrank::Factors f : {lowrank::Factors::Work, lowrank::Factors::Bf16, lowrank::Factors::Fp16})
        for (cc_coll_dtype_t d : {CC_COLL_F32, CC_COLL_F64, CC_COLL_BF16}) {
            CallParams p;
            p.rank = 4;
            p.method_options[CC_COLL_METHOD_LOWRANK] = static_cast<std::uint32_t>(f);
            CostTensor t;
            t.count = 1024 * 4096;
            t.dtype = d;
            t.has_shape = true;
            t.rows = 1024;
            t.cols = 4096;
            ExchangeCost ex;
            ASSERT_TRUE(m->exchange_cost(t, p, 4, &ex));
            const double e = f != lowrank::Factors::Work ? 2.0 : d == CC_COLL_F64 ? 8.0 : 4.0;
            EXPECT_EQ(ex.bytes[0], 1024.0 * 4 * e);
            EXPECT_EQ(ex.bytes[1], 4096.0 * 4 * e);
        }
}

}  // namespace
}  // namespace cc_coll::detail
