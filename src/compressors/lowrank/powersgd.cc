#include "compressors/lowrank/powersgd.hpp"

#include <cblas.h>
#include <lapacke.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace cc_coll::detail::lowrank {

namespace {

std::uint64_t splitmix64(std::uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

// A double in (0, 1] from 53 random bits.
double unit_open(std::uint64_t bits) { return (static_cast<double>(bits >> 11) + 1.0) * 0x1.0p-53; }

void gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, float alpha, const float *a, int lda,
          const float *b, int ldb, float *c, int ldc)
{
    cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, 0.0f, c, ldc);
}

void gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, double alpha, const double *a, int lda,
          const double *b, int ldb, double *c, int ldc)
{
    cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, 0.0, c, ldc);
}

// y = op(A) x for a row-major rows x cols A (rank-1 products: gemv is
// several times faster than a one-column gemm).
void gemv(CBLAS_TRANSPOSE t, int rows, int cols, const float *a, const float *x, float *y)
{
    cblas_sgemv(CblasRowMajor, t, rows, cols, 1.0f, a, cols, x, 1, 0.0f, y, 1);
}

void gemv(CBLAS_TRANSPOSE t, int rows, int cols, const double *a, const double *x, double *y)
{
    cblas_dgemv(CblasRowMajor, t, rows, cols, 1.0, a, cols, x, 1, 0.0, y, 1);
}

lapack_int geqrf(lapack_int m, lapack_int n, float *a, lapack_int lda, float *tau)
{
    return LAPACKE_sgeqrf(LAPACK_ROW_MAJOR, m, n, a, lda, tau);
}
lapack_int geqrf(lapack_int m, lapack_int n, double *a, lapack_int lda, double *tau)
{
    return LAPACKE_dgeqrf(LAPACK_ROW_MAJOR, m, n, a, lda, tau);
}
lapack_int orgqr(lapack_int m, lapack_int n, float *a, lapack_int lda, const float *tau)
{
    return LAPACKE_sorgqr(LAPACK_ROW_MAJOR, m, n, n, a, lda, tau);
}
lapack_int orgqr(lapack_int m, lapack_int n, double *a, lapack_int lda, const double *tau)
{
    return LAPACKE_dorgqr(LAPACK_ROW_MAJOR, m, n, n, a, lda, tau);
}

template <typename W>
void gram_schmidt(W *a, std::size_t rows, int r)
{
    // Classical Gram-Schmidt with one re-orthogonalisation ("twice is
    // enough"): a column that depends on the earlier ones is rounding noise
    // after one projection, and that noise is not orthogonal to them; the
    // second pass makes it so. Sums in double: binary32 sums of long
    // columns lose digits.
    const std::size_t ld = static_cast<std::size_t>(r);
    std::vector<double> dots(ld);
    for (int i = 0; i < r; ++i) {
        for (int pass = 0; pass < 2 && i > 0; ++pass) {
            for (int j = 0; j < i; ++j) {
                double dot = 0;
                for (std::size_t k = 0; k < rows; ++k) dot += static_cast<double>(a[k * ld + j]) * a[k * ld + i];
                dots[static_cast<std::size_t>(j)] = dot;
            }
            for (std::size_t k = 0; k < rows; ++k) {
                double v = a[k * ld + i];
                for (int j = 0; j < i; ++j) v -= dots[static_cast<std::size_t>(j)] * a[k * ld + j];
                a[k * ld + i] = static_cast<W>(v);
            }
        }
        double norm2 = 0;
        for (std::size_t k = 0; k < rows; ++k) norm2 += static_cast<double>(a[k * ld + i]) * a[k * ld + i];
        const double norm = std::sqrt(norm2);
        if (norm > 0 && std::isfinite(norm))
            for (std::size_t k = 0; k < rows; ++k) a[k * ld + i] = static_cast<W>(a[k * ld + i] / norm);
    }
}

}  // namespace

bool resolve_shape(std::size_t count, bool has_shape, std::uint64_t rows, std::uint64_t cols, int rank, Shape *out,
                   std::string *why)
{
    Shape s;
    if (count == 0) {
        *why = "count 0 has no matrix view";
        return false;
    }
    if (has_shape && rows == 0 && cols != 0) {
        *why = "rows = 0 with cols = " + std::to_string(cols) +
               " (rows = 0 asks for the near-square view and needs cols = 0)";
        return false;
    }
    if (has_shape && rows != 0) {
        if (cols == 0) {
            if (count % rows != 0) {
                *why = "rows = " + std::to_string(rows) + " does not divide count = " + std::to_string(count);
                return false;
            }
            cols = count / rows;
        }
        if (rows > count || cols > count || count % rows != 0 || count / rows != cols) {
            *why = "rows x cols = " + std::to_string(rows) + " x " + std::to_string(cols) +
                   " does not equal count = " + std::to_string(count);
            return false;
        }
        s.rows = rows;
        s.cols = cols;
    } else {
        if (count == 0) {
            *why = "count = 0 has no matrix view";
            return false;
        }
        // r = ceil(sqrt(count)) in integers, with no product that can wrap:
        // for r >= 1, r * r <= count exactly when r <= count / r.
        std::size_t r = static_cast<std::size_t>(std::sqrt(static_cast<double>(count)));
        if (r == 0) r = 1;
        while (r > 1 && r > count / r) --r;          // now r * r <= count
        while (r + 1 <= count / (r + 1)) ++r;        // now r = floor(sqrt(count))
        if (!(count % r == 0 && count / r == r)) ++r;  // ceil
        const std::size_t cols = count / r + (count % r != 0 ? 1 : 0);
        if (cols > std::numeric_limits<std::size_t>::max() / r) {
            *why = "count = " + std::to_string(count) + " is too large for a near-square view (" +
                   std::to_string(r) + " x " + std::to_string(cols) + " elements overflow size_t)";
            return false;
        }
        s.rows = r;
        s.cols = cols;
    }
    std::size_t k = static_cast<std::size_t>(rank < 1 ? 1 : rank);
    if (k > s.rows) k = s.rows;
    if (k > s.cols) k = s.cols;
    s.rank = static_cast<int>(k);
    *out = s;
    return true;
}

bool should_compress(const Shape &s, double min_compression_rate)
{
    const double uncompressed = static_cast<double>(s.rows) * static_cast<double>(s.cols);
    const double compressed = static_cast<double>(s.rows + s.cols) * s.rank;
    return compressed * min_compression_rate < uncompressed;
}

std::uint64_t gaussian_seed(std::uint64_t seed, std::uint64_t stream) { return splitmix64(seed ^ splitmix64(stream)); }

template <typename W>
void gaussian_fill(std::uint64_t seed, std::uint64_t stream, W *out, std::size_t n)
{
    const std::uint64_t base = gaussian_seed(seed, stream);
    const double two_pi = 6.283185307179586476925286766559;
    for (std::size_t i = 0; i < n; i += 2) {
        const std::uint64_t pair = static_cast<std::uint64_t>(i / 2);
        const double u1 = unit_open(splitmix64(base + 2 * pair));
        const double u2 = unit_open(splitmix64(base + 2 * pair + 1));
        const double radius = std::sqrt(-2.0 * std::log(u1));
        out[i] = static_cast<W>(radius * std::cos(two_pi * u2));
        if (i + 1 < n) out[i + 1] = static_cast<W>(radius * std::sin(two_pi * u2));
    }
}

template <typename W>
void orthogonalize(W *a, std::size_t rows, int r, bool use_gram_schmidt)
{
    if (r <= 0 || rows == 0) return;
    if (r <= 2 || use_gram_schmidt) {
        gram_schmidt(a, rows, r);
        return;
    }
    std::vector<W> tau(static_cast<std::size_t>(r));
    const std::vector<W> original(a, a + rows * static_cast<std::size_t>(r));
    const auto m = static_cast<lapack_int>(rows);
    const auto n = static_cast<lapack_int>(r);
    if (rows < static_cast<std::size_t>(r) || geqrf(m, n, a, n, tau.data()) != 0 || orgqr(m, n, a, n, tau.data()) != 0) {
        std::copy(original.begin(), original.end(), a);
        gram_schmidt(a, rows, r);
    }
}

template <typename W>
void start_q(const W *previous, std::uint64_t seed, std::uint64_t stream, const Shape &s, bool use_gram_schmidt, W *q)
{
    const std::size_t n = s.cols * static_cast<std::size_t>(s.rank);
    bool usable = previous != nullptr;
    // A zero column (an all-zero step leaves Q = M^T P = 0) would stay zero
    // under Gram-Schmidt and the tensor would never be sent again: redraw.
    for (int j = 0; usable && j < s.rank; ++j) {
        bool zero = true;
        for (std::size_t k = 0; zero && k < s.cols; ++k) zero = previous[k * static_cast<std::size_t>(s.rank) + j] == W(0);
        usable = !zero;
    }
    if (usable) {
        if (previous != q) std::copy(previous, previous + n, q);
    } else {
        gaussian_fill<W>(seed, stream, q, n);
    }
    orthogonalize<W>(q, s.cols, s.rank, use_gram_schmidt);
}

template <typename W>
void multiply_mq(const W *m, const Shape &s, const W *q, W *p)
{
    if (s.rank == 1) {
        gemv(CblasNoTrans, static_cast<int>(s.rows), static_cast<int>(s.cols), m, q, p);
        return;
    }
    gemm(CblasNoTrans, CblasNoTrans, static_cast<int>(s.rows), s.rank, static_cast<int>(s.cols), W(1), m,
         static_cast<int>(s.cols), q, s.rank, p, s.rank);
}

template <typename W>
void multiply_mtp(const W *m, const Shape &s, const W *p, W *q)
{
    if (s.rank == 1) {
        gemv(CblasTrans, static_cast<int>(s.rows), static_cast<int>(s.cols), m, p, q);
        return;
    }
    gemm(CblasTrans, CblasNoTrans, static_cast<int>(s.cols), s.rank, static_cast<int>(s.rows), W(1), m,
         static_cast<int>(s.cols), p, s.rank, q, s.rank);
}

// M^ = alpha P Q^T, row by row: out[i][j] = p[i][0] q[j][0] + ... + p[i][r-1]
// q[j][r-1], added in k order, then scaled. Every element goes through the
// same operations whichever block of rows holds it, so a block of rows is
// bit-identical to those rows of the whole product and the result does not
// depend on how the thread pool cuts the rows (a BLAS gemm's edge tiles add
// in other orders on some CPUs). Q is transposed once per call so that the
// inner loop runs over contiguous columns.
template <typename W>
void reconstruct_rows(const W *p, const W *q, const Shape &s, std::size_t row, std::size_t rows, W alpha, W *out)
{
    const std::size_t cols = s.cols, r = static_cast<std::size_t>(s.rank);
    thread_local std::vector<W> qt_storage;
    qt_storage.resize(cols * r);
    W *qt = qt_storage.data();
    for (std::size_t j = 0; j < cols; ++j)
        for (std::size_t k = 0; k < r; ++k) qt[k * cols + j] = q[j * r + k];
    for (std::size_t i = 0; i < rows; ++i) {
        const W *pi = p + (row + i) * r;
        W *o = out + i * cols;
        const W p0 = pi[0];
        for (std::size_t j = 0; j < cols; ++j) o[j] = p0 * qt[j];
        for (std::size_t k = 1; k < r; ++k) {
            const W pk = pi[k];
            const W *qk = qt + k * cols;
            for (std::size_t j = 0; j < cols; ++j) o[j] += pk * qk[j];
        }
        if (alpha != W(1))
            for (std::size_t j = 0; j < cols; ++j) o[j] *= alpha;
    }
}

template <typename W>
void reconstruct(const W *p, const W *q, const Shape &s, W alpha, W *out)
{
    reconstruct_rows(p, q, s, 0, s.rows, alpha, out);
}

template <typename W>
void scale(W *x, std::size_t n, W alpha)
{
    for (std::size_t i = 0; i < n; ++i) x[i] *= alpha;
}

#define CC_COLL_LOWRANK_INSTANTIATE(W)                                                   \
    template void gaussian_fill<W>(std::uint64_t, std::uint64_t, W *, std::size_t);      \
    template void orthogonalize<W>(W *, std::size_t, int, bool);                         \
    template void start_q<W>(const W *, std::uint64_t, std::uint64_t, const Shape &, bool, W *); \
    template void multiply_mq<W>(const W *, const Shape &, const W *, W *);              \
    template void multiply_mtp<W>(const W *, const Shape &, const W *, W *);             \
    template void reconstruct<W>(const W *, const W *, const Shape &, W, W *);           \
    template void reconstruct_rows<W>(const W *, const W *, const Shape &, std::size_t, std::size_t, W, W *); \
    template void scale<W>(W *, std::size_t, W);

CC_COLL_LOWRANK_INSTANTIATE(float)
CC_COLL_LOWRANK_INSTANTIATE(double)

}  // namespace cc_coll::detail::lowrank
