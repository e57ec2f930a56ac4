// Method LOWRANK's device linear algebra
// (src/compressors/lowrank/powersgd_cuda.hpp), the parts a host can check:
// the cuBLAS / cuSOLVER argument sets are interpreted here by naive
// column-major loops (what cuBLAS computes from those op/m/n/k/ld/inc
// arguments, with every access bounds-checked and every leading dimension
// checked against cuBLAS's rules) and must reproduce the host's CBLAS
// products, Gram-Schmidt and LAPACK QR; the Gaussian seed rule, the
// Gram-Schmidt / QR choice and the workspace layouts are checked as
// functions.
//
// The DeviceLowrank tests run the device functions against the host ones
// and skip where there is no GPU.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <set>
#include <type_traits>
#include <vector>

#include <gtest/gtest.h>
#include <lapacke.h>

#include <cuda_runtime_api.h>

#include "compressors/lowrank/powersgd.hpp"
#include "compressors/lowrank/powersgd_cuda.hpp"
#include "gpu/gpu.hpp"

namespace cc_coll::detail::lowrank::cuda {
namespace {

// ------------------------------------------------------------ interpreters

// A buffer and where an argument starts in it: every access is checked
// against the buffer's end.
template <typename T>
struct View {
    T *base;
    std::size_t size;
    std::size_t offset = 0;

    T &at(std::size_t i) const
    {
        static T dummy{};
        if (offset + i >= size) {
            ADD_FAILURE() << "access " << offset + i << " past a buffer of " << size;
            return dummy;
        }
        return base[offset + i];
    }
};

template <typename T>
View<T> view(std::vector<T> &v, std::size_t offset = 0)
{
    return View<T>{v.data(), v.size(), offset};
}

template <typename T>
View<const T> cview(const std::vector<T> &v, std::size_t offset = 0)
{
    return View<const T>{v.data(), v.size(), offset};
}

// What cublas<t>gemm computes: C = alpha op(A) op(B) + beta C, column-major,
// with beta = 0 (C not read). Checks cuBLAS's argument rules first.
template <typename T>
void cm_gemm(const GemmArgs &g, T alpha, View<const T> a, View<const T> b, View<T> c)
{
    ASSERT_GE(g.m, 0);
    ASSERT_GE(g.n, 0);
    ASSERT_GE(g.k, 0);
    ASSERT_GE(g.lda, std::max(1, g.trans_a ? g.k : g.m)) << "lda";
    ASSERT_GE(g.ldb, std::max(1, g.trans_b ? g.n : g.k)) << "ldb";
    ASSERT_GE(g.ldc, std::max(1, g.m)) << "ldc";
    const auto ld = [](int x) { return static_cast<std::size_t>(x); };
    for (int j = 0; j < g.n; ++j)
        for (int i = 0; i < g.m; ++i) {
            double sum = 0;
            for (int l = 0; l < g.k; ++l) {
                const T av = g.trans_a ? a.at(l + i * ld(g.lda)) : a.at(i + l * ld(g.lda));
                const T bv = g.trans_b ? b.at(j + l * ld(g.ldb)) : b.at(l + j * ld(g.ldb));
                sum += static_cast<double>(av) * bv;
            }
            c.at(i + j * ld(g.ldc)) = static_cast<T>(alpha * sum);
        }
}

// What cublas<t>gemv computes: y = alpha op(A) x + beta y, A column-major
// m x n before op, positive increments.
template <typename T>
void cm_gemv(const GemvArgs &g, T alpha, View<const T> a, View<const T> x, T beta, View<T> y)
{
    ASSERT_GE(g.m, 0);
    ASSERT_GE(g.n, 0);
    ASSERT_GE(g.lda, std::max(1, g.m)) << "lda";
    ASSERT_GT(g.incx, 0);
    ASSERT_GT(g.incy, 0);
    const auto u = [](int v) { return static_cast<std::size_t>(v); };
    const int ylen = g.trans ? g.n : g.m;
    const int xlen = g.trans ? g.m : g.n;
    for (int i = 0; i < ylen; ++i) {
        double sum = 0;
        for (int l = 0; l < xlen; ++l) {
            const T av = g.trans ? a.at(l + u(i) * u(g.lda)) : a.at(u(i) + u(l) * u(g.lda));
            sum += static_cast<double>(av) * x.at(u(l) * u(g.incx));
        }
        T &yi = y.at(u(i) * u(g.incy));
        yi = static_cast<T>(beta == T(0) ? alpha * sum : alpha * sum + static_cast<double>(beta) * yi);
    }
}

// What cublas<t>geam with transa = T, beta = 0 computes: C = A^T, C m x n.
template <typename T>
void cm_transpose(const TransposeArgs &t, View<const T> a, View<T> c)
{
    ASSERT_GE(t.lda, std::max(1, t.n)) << "lda";  // op(A) = A^T: A is n x m
    ASSERT_GE(t.ldc, std::max(1, t.m)) << "ldc";
    const auto u = [](int v) { return static_cast<std::size_t>(v); };
    for (int j = 0; j < t.n; ++j)
        for (int i = 0; i < t.m; ++i) c.at(u(i) + u(j) * u(t.ldc)) = a.at(u(j) + u(i) * u(t.lda));
}

// ----------------------------------------------------------------- helpers

template <typename W>
std::vector<W> gaussian_matrix(std::size_t rows, std::size_t cols, std::uint64_t seed)
{
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> normal(0.0, 1.0);
    std::vector<W> a(rows * cols);
    for (W &x : a) x = static_cast<W>(normal(rng));
    return a;
}

template <typename W>
double tolerance()
{
    return std::is_same<W, float>::value ? 1e-5 : 1e-12;
}

// max |a - b| / max(1, max |b|).
template <typename W>
double max_rel_diff(const std::vector<W> &a, const std::vector<W> &b)
{
    double diff = 0, scale = 1;
    for (std::size_t i = 0; i < a.size(); ++i) {
        diff = std::max(diff, std::abs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
        scale = std::max(scale, std::abs(static_cast<double>(b[i])));
    }
    return diff / scale;
}

// max_rel_diff after flipping each column of the row-major a (rows x r) to
// the sign of b's: a Householder QR is unique only up to column signs, and
// P Q^T does not depend on them.
template <typename W>
double max_rel_diff_up_to_column_sign(std::vector<W> a, const std::vector<W> &b, std::size_t r)
{
    const std::size_t rows = a.size() / r;
    for (std::size_t j = 0; j < r; ++j) {
        double dot = 0;
        for (std::size_t k = 0; k < rows; ++k)
            dot += static_cast<double>(a[k * r + j]) * static_cast<double>(b[k * r + j]);
        if (dot < 0)
            for (std::size_t k = 0; k < rows; ++k) a[k * r + j] = -a[k * r + j];
    }
    return max_rel_diff(a, b);
}


// The operand a GemmArgs names.
template <typename W>
View<const W> pick(Operand o, const std::vector<W> &m, const std::vector<W> &p, const std::vector<W> &q)
{
    return cview(o == Operand::M ? m : o == Operand::P ? p : q);
}

// Shapes with r = min(rows, cols, rank): tall, wide, square, rank 1 (the
// gemv path), rank = min dimension, a single row or column.
std::vector<Shape> shapes()
{
    return {Shape{5, 3, 1}, Shape{7, 4, 2}, Shape{6, 9, 3}, Shape{12, 5, 5}, Shape{1, 8, 1},
            Shape{8, 1, 1}, Shape{33, 17, 4}, Shape{4, 40, 4}};
}

// Orthonormalisation by the device's Gram-Schmidt steps, interpreted: two
// gemv passes per column, the norm, the division that leaves a zero column.
template <typename W>
void interpreted_gram_schmidt(std::vector<W> &a, std::size_t rows, int r)
{
    std::vector<W> dots(static_cast<std::size_t>(r));
    const std::size_t stride = static_cast<std::size_t>(r);
    for (int i = 0; i < r; ++i) {
        const std::size_t col = static_cast<std::size_t>(i);
        for (int pass = 0; pass < 2 && i > 0; ++pass) {
            cm_gemv(gs_dots_gemv(rows, r, i), W(1), cview(a), cview(a, col), W(0), view(dots));
            cm_gemv(gs_update_gemv(rows, r, i), W(-1), cview(a), cview(dots), W(1), view(a, col));
        }
        double norm2 = 0;
        for (std::size_t k = 0; k < rows; ++k) norm2 += static_cast<double>(a[k * stride + col]) * a[k * stride + col];
        const W norm = static_cast<W>(std::sqrt(norm2));
        if (norm > W(0) && std::isfinite(norm))
            for (std::size_t k = 0; k < rows; ++k) a[k * stride + col] /= norm;
    }
}

lapack_int geqrf_cm(lapack_int m, lapack_int n, float *a, lapack_int lda, float *tau)
{
    return LAPACKE_sgeqrf(LAPACK_COL_MAJOR, m, n, a, lda, tau);
}
lapack_int geqrf_cm(lapack_int m, lapack_int n, double *a, lapack_int lda, double *tau)
{
    return LAPACKE_dgeqrf(LAPACK_COL_MAJOR, m, n, a, lda, tau);
}
lapack_int orgqr_cm(lapack_int m, lapack_int n, float *a, lapack_int lda, const float *tau)
{
    return LAPACKE_sorgqr(LAPACK_COL_MAJOR, m, n, n, a, lda, tau);
}
lapack_int orgqr_cm(lapack_int m, lapack_int n, double *a, lapack_int lda, const double *tau)
{
    return LAPACKE_dorgqr(LAPACK_COL_MAJOR, m, n, n, a, lda, tau);
}

// The device's QR path, interpreted: transpose into the column-major copy,
// geqrf + orgqr with the same m, n, lda as the cuSOLVER calls (LAPACK's
// column-major routines, whose arguments cuSOLVER's mirror), transpose back.
template <typename W>
void interpreted_householder(std::vector<W> &a, std::size_t rows, int r)
{
    std::vector<W> t(rows * static_cast<std::size_t>(r)), tau(static_cast<std::size_t>(r));
    const TransposeArgs to = qr_to_column_major(rows, r);
    cm_transpose(to, cview(a), view(t));
    const auto m = static_cast<lapack_int>(rows);
    ASSERT_EQ(geqrf_cm(m, r, t.data(), to.ldc, tau.data()), 0);
    ASSERT_EQ(orgqr_cm(m, r, t.data(), to.ldc, tau.data()), 0);
    cm_transpose(qr_from_column_major(rows, r), cview(t), view(a));
}

template <typename W>
class LowrankCudaArgs : public ::testing::Test {};
using WorkTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(LowrankCudaArgs, WorkTypes);

// ------------------------------------------------------------------ products

TYPED_TEST(LowrankCudaArgs, MqGemmReproducesHost)
{
    using W = TypeParam;
    for (const Shape &s : shapes()) {
        SCOPED_TRACE(::testing::Message() << s.rows << " x " << s.cols << " r " << s.rank);
        const auto m = gaussian_matrix<W>(s.rows, s.cols, 1);
        const auto q = gaussian_matrix<W>(s.cols, static_cast<std::size_t>(s.rank), 2);
        std::vector<W> host(s.rows * static_cast<std::size_t>(s.rank)), dev(host.size());
        lowrank::multiply_mq(m.data(), s, q.data(), host.data());
        const GemmArgs g = mq_gemm(s);
        const std::vector<W> none;
        cm_gemm(g, W(1), pick(g.a, m, none, q), pick(g.b, m, none, q), view(dev));
        EXPECT_LE(max_rel_diff(dev, host), tolerance<W>());
        if (s.rank == 1) {
            std::fill(dev.begin(), dev.end(), W(0));
            cm_gemv(mq_gemv(s), W(1), cview(m), cview(q), W(0), view(dev));
            EXPECT_LE(max_rel_diff(dev, host), tolerance<W>());
        }
    }
}

TYPED_TEST(LowrankCudaArgs, MtpGemmReproducesHost)
{
    using W = TypeParam;
    for (const Shape &s : shapes()) {
        SCOPED_TRACE(::testing::Message() << s.rows << " x " << s.cols << " r " << s.rank);
        const auto m = gaussian_matrix<W>(s.rows, s.cols, 3);
        const auto p = gaussian_matrix<W>(s.rows, static_cast<std::size_t>(s.rank), 4);
        std::vector<W> host(s.cols * static_cast<std::size_t>(s.rank)), dev(host.size());
        lowrank::multiply_mtp(m.data(), s, p.data(), host.data());
        const GemmArgs g = mtp_gemm(s);
        const std::vector<W> none;
        cm_gemm(g, W(1), pick(g.a, m, p, none), pick(g.b, m, p, none), view(dev));
        EXPECT_LE(max_rel_diff(dev, host), tolerance<W>());
        if (s.rank == 1) {
            std::fill(dev.begin(), dev.end(), W(0));
            cm_gemv(mtp_gemv(s), W(1), cview(m), cview(p), W(0), view(dev));
            EXPECT_LE(max_rel_diff(dev, host), tolerance<W>());
        }
    }
}

TYPED_TEST(LowrankCudaArgs, ReconstructGemmReproducesHost)
{
    using W = TypeParam;
    for (const Shape &s : shapes()) {
        SCOPED_TRACE(::testing::Message() << s.rows << " x " << s.cols << " r " << s.rank);
        const auto p = gaussian_matrix<W>(s.rows, static_cast<std::size_t>(s.rank), 5);
        const auto q = gaussian_matrix<W>(s.cols, static_cast<std::size_t>(s.rank), 6);
        std::vector<W> host(s.elements()), dev(host.size());
        const W alpha = W(0.25);
        lowrank::reconstruct(p.data(), q.data(), s, alpha, host.data());
        const GemmArgs g = reconstruct_gemm(s);
        const std::vector<W> none;
        cm_gemm(g, alpha, pick(g.a, none, p, q), pick(g.b, none, p, q), view(dev));
        EXPECT_LE(max_rel_diff(dev, host), tolerance<W>());
    }
}

// The products never name M twice or leave an operand out.
TEST(LowrankCudaArgs, ProductOperands)
{
    constexpr Shape s{6, 9, 3};
    static_assert(mq_gemm(s).a == Operand::Q && mq_gemm(s).b == Operand::M);
    static_assert(mtp_gemm(s).a == Operand::P && mtp_gemm(s).b == Operand::M);
    static_assert(reconstruct_gemm(s).a == Operand::Q && reconstruct_gemm(s).b == Operand::P);
    // C's leading dimension is the row length of the row-major output.
    static_assert(mq_gemm(s).ldc == 3 && mtp_gemm(s).ldc == 3 && reconstruct_gemm(s).ldc == 9);
    static_assert(mq_gemv(Shape{6, 9, 1}).lda == 9 && mtp_gemv(Shape{6, 9, 1}).lda == 9);
    SUCCEED();
}

// --------------------------------------------------------- orthogonalisation

TYPED_TEST(LowrankCudaArgs, GramSchmidtStepsReproduceHost)
{
    using W = TypeParam;
    struct Case {
        std::size_t rows;
        int r;
    };
    for (const Case c : {Case{10, 1}, Case{10, 2}, Case{9, 4}, Case{40, 6}, Case{3, 3}}) {
        SCOPED_TRACE(::testing::Message() << c.rows << " x " << c.r);
        auto dev = gaussian_matrix<W>(c.rows, static_cast<std::size_t>(c.r), 7);
        auto host = dev;
        lowrank::orthogonalize(host.data(), c.rows, c.r, true);
        interpreted_gram_schmidt(dev, c.rows, c.r);
        EXPECT_LE(max_rel_diff(dev, host), 100 * tolerance<W>());
    }
}

TYPED_TEST(LowrankCudaArgs, GramSchmidtStepsKeepAZeroColumn)
{
    using W = TypeParam;
    const std::size_t rows = 8;
    const int r = 3;
    auto a = gaussian_matrix<W>(rows, static_cast<std::size_t>(r), 8);
    for (std::size_t k = 0; k < rows; ++k) a[k * 3 + 1] = W(0);
    auto host = a;
    lowrank::orthogonalize(host.data(), rows, r, true);
    interpreted_gram_schmidt(a, rows, r);
    for (std::size_t k = 0; k < rows; ++k) EXPECT_EQ(a[k * 3 + 1], W(0));
    EXPECT_LE(max_rel_diff(a, host), 100 * tolerance<W>());
}

TYPED_TEST(LowrankCudaArgs, QrStepsReproduceHost)
{
    using W = TypeParam;
    struct Case {
        std::size_t rows;
        int r;
    };
    for (const Case c : {Case{9, 3}, Case{40, 6}, Case{4, 4}, Case{17, 5}}) {
        SCOPED_TRACE(::testing::Message() << c.rows << " x " << c.r);
        ASSERT_FALSE(uses_gram_schmidt(c.rows, c.r, false));
        auto dev = gaussian_matrix<W>(c.rows, static_cast<std::size_t>(c.r), 9);
        auto host = dev;
        lowrank::orthogonalize(host.data(), c.rows, c.r, false);
        interpreted_householder(dev, c.rows, c.r);
        EXPECT_LE(max_rel_diff(dev, host), 100 * tolerance<W>());
    }
}

TEST(LowrankCudaArgs, QrTransposesAreInverse)
{
    const std::size_t rows = 7;
    const int r = 3;
    std::vector<double> a(rows * 3), t(a.size()), back(a.size());
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<double>(i);
    cm_transpose(qr_to_column_major(rows, r), cview(a), view(t));
    for (std::size_t k = 0; k < rows; ++k)
        for (std::size_t j = 0; j < 3; ++j) EXPECT_EQ(t[k + j * rows], a[k * 3 + j]);
    cm_transpose(qr_from_column_major(rows, r), cview(t), view(back));
    EXPECT_EQ(back, a);
}

TEST(LowrankCudaArgs, GramSchmidtOrQrAsTheHost)
{
    EXPECT_TRUE(uses_gram_schmidt(100, 1, false));
    EXPECT_TRUE(uses_gram_schmidt(100, 2, false));
    EXPECT_FALSE(uses_gram_schmidt(100, 3, false));
    EXPECT_TRUE(uses_gram_schmidt(100, 3, true));
    EXPECT_TRUE(uses_gram_schmidt(2, 3, false));  // the host falls back when rows < r
    EXPECT_FALSE(uses_gram_schmidt(3, 3, false));
}

// ------------------------------------------------------- seed and workspace

TEST(LowrankCudaSeed, PureFunctionOfSeedAndStream)
{
    EXPECT_EQ(gaussian_seed(42, 3), gaussian_seed(42, 3));
    // Pinned: the rule every rank (and every library version) must share.
    EXPECT_EQ(gaussian_seed(0, 0), 0xa706dd2f4d197e6full);
    EXPECT_EQ(gaussian_seed(12345, 7), 0x19bd65d14c45ecf7ull);
    std::set<std::uint64_t> seen;
    for (std::uint64_t seed = 0; seed < 16; ++seed)
        for (std::uint64_t stream = 0; stream < 4096; ++stream) seen.insert(gaussian_seed(seed, stream));
    EXPECT_EQ(seen.size(), 16u * 4096u);
}

TEST(LowrankCudaSeed, HostGaussianFollowsTheSeed)
{
    // Equal keys, equal draws: gaussian_fill depends on (seed, stream) only
    // through gaussian_seed.
    std::vector<double> a(9), b(9), c(9);
    lowrank::gaussian_fill(5, 1, a.data(), a.size());
    lowrank::gaussian_fill(5, 1, b.data(), b.size());
    lowrank::gaussian_fill(5, 2, c.data(), c.size());
    EXPECT_EQ(a, b);
    EXPECT_NE(a, c);
}

TEST(LowrankCudaWorkspace, NormalCountIsEven)
{
    for (std::size_t n : {0u, 1u, 2u, 3u, 17u, 1024u, 1025u}) {
        EXPECT_EQ(normal_count(n) % 2, 0u);
        EXPECT_GE(normal_count(n), n);
        EXPECT_LT(normal_count(n), n + 2);
    }
}

TEST(LowrankCudaWorkspace, LayoutsAreAlignedAndDisjoint)
{
    const auto aligned = [](std::size_t x) { return x % workspace_alignment == 0; };
    for (std::size_t elem : {sizeof(float), sizeof(double)})
        for (const Shape &s : shapes()) {
            const std::size_t r = static_cast<std::size_t>(s.rank);
            const std::size_t n = s.cols * r;

            const GaussianLayout g = gaussian_layout(n, elem);
            EXPECT_GE(g.bytes, normal_count(n) * elem);

            const StartLayout st = start_layout(s, elem);
            EXPECT_TRUE(aligned(st.flags));
            EXPECT_GE(st.flags, normal_count(n) * elem);
            EXPECT_GE(st.bytes - st.flags, r * sizeof(int));

            const GramSchmidtLayout gs = gram_schmidt_layout(s.rank, elem);
            EXPECT_TRUE(aligned(gs.norm));
            EXPECT_GE(gs.norm, r * elem);
            EXPECT_GE(gs.bytes - gs.norm, elem);

            const QrMatrixLayout qm = qr_matrix_layout(s.rows, s.rank, elem);
            EXPECT_TRUE(aligned(qm.tau));
            EXPECT_GE(qm.tau, s.rows * r * elem);
            EXPECT_GE(qm.bytes - qm.tau, r * elem);

            for (int lwork : {0, 1, 333, 4096}) {
                const QrWorkLayout qw = qr_work_layout(lwork, elem);
                EXPECT_TRUE(aligned(qw.work));
                EXPECT_GE(qw.work, sizeof(int));
                EXPECT_GE(qw.bytes - qw.work, static_cast<std::size_t>(std::max(lwork, 1)) * elem);
            }
        }
}

TEST(LowrankCudaWorkspace, FitsInt)
{
    constexpr std::size_t max = static_cast<std::size_t>(std::numeric_limits<int>::max());
    EXPECT_TRUE(fits_int(Shape{max, 1, 1}));
    EXPECT_FALSE(fits_int(Shape{max + 1, 1, 1}));
    EXPECT_FALSE(fits_int(Shape{1, max + 1, 1}));
}

// ------------------------------------------------------ on a GPU, if any

template <typename W>
class DeviceBuffer {
public:
    explicit DeviceBuffer(std::size_t n) : n_(n)
    {
        if (cudaMalloc(reinterpret_cast<void **>(&ptr_), std::max<std::size_t>(n, 1) * sizeof(W)) != cudaSuccess)
            ptr_ = nullptr;
    }
    explicit DeviceBuffer(const std::vector<W> &v) : DeviceBuffer(v.size())
    {
        if (ptr_ == nullptr) return;
        (void)cudaMemcpy(ptr_, v.data(), v.size() * sizeof(W), cudaMemcpyHostToDevice);
        // From pageable memory cudaMemcpy may return before the DMA has
        // landed, and the tests' non-blocking stream does not wait for the
        // legacy stream: wait here.
        (void)cudaDeviceSynchronize();
    }
    DeviceBuffer(const DeviceBuffer &) = delete;
    DeviceBuffer &operator=(const DeviceBuffer &) = delete;
    ~DeviceBuffer()
    {
        if (ptr_ != nullptr) (void)cudaFree(ptr_);
    }
    W *get() const { return ptr_; }
    std::vector<W> read() const
    {
        std::vector<W> v(n_);
        (void)cudaMemcpy(v.data(), ptr_, n_ * sizeof(W), cudaMemcpyDeviceToHost);
        return v;
    }

private:
    W *ptr_ = nullptr;
    std::size_t n_;
};

template <typename W>
class DeviceLowrank : public ::testing::Test {
protected:
    void SetUp() override
    {
        if (gpu::device_count() == 0) GTEST_SKIP() << "no CUDA device";
        const gpu::Result r = Context::create(&ctx_);
        ASSERT_TRUE(r.ok()) << r.call << " (" << r.library << " " << r.code << ")";
        ASSERT_EQ(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), cudaSuccess);
    }
    void TearDown() override
    {
        if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
    }
    void expect_ok(const gpu::Result &r)
    {
        EXPECT_TRUE(r.ok()) << r.call << " (" << r.library << " " << r.code << ": " << (r.text ? r.text : "") << ")";
    }
    void sync() { ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess); }

    std::unique_ptr<Context> ctx_;
    cudaStream_t stream_ = nullptr;
};
TYPED_TEST_SUITE(DeviceLowrank, WorkTypes);

TYPED_TEST(DeviceLowrank, ProductsMatchHost)
{
    using W = TypeParam;
    for (const Shape &s : shapes()) {
        SCOPED_TRACE(::testing::Message() << s.rows << " x " << s.cols << " r " << s.rank);
        const std::size_t r = static_cast<std::size_t>(s.rank);
        const auto m = gaussian_matrix<W>(s.rows, s.cols, 11);
        const auto q = gaussian_matrix<W>(s.cols, r, 12);
        std::vector<W> p(s.rows * r), qt(s.cols * r), out(s.elements());
        lowrank::multiply_mq(m.data(), s, q.data(), p.data());
        lowrank::multiply_mtp(m.data(), s, p.data(), qt.data());
        lowrank::reconstruct(p.data(), qt.data(), s, W(0.5), out.data());

        DeviceBuffer<W> dm(m), dq(q), dp(p.size()), dqt(qt.size()), dout(out.size());
        this->expect_ok(multiply_mq(*this->ctx_, dm.get(), s, dq.get(), dp.get(), this->stream_));
        this->expect_ok(multiply_mtp(*this->ctx_, dm.get(), s, dp.get(), dqt.get(), this->stream_));
        this->expect_ok(reconstruct(*this->ctx_, dp.get(), dqt.get(), s, W(0.5), dout.get(), this->stream_));
        this->sync();
        EXPECT_LE(max_rel_diff(dp.read(), p), 10 * tolerance<W>());
        EXPECT_LE(max_rel_diff(dqt.read(), qt), 100 * tolerance<W>());
        EXPECT_LE(max_rel_diff(dout.read(), out), 1000 * tolerance<W>());
    }
}

TYPED_TEST(DeviceLowrank, OrthogonalizeMatchesHost)
{
    using W = TypeParam;
    struct Case {
        std::size_t rows;
        int r;
        bool gs;
    };
    for (const Case c : {Case{50, 1, false}, Case{50, 2, false}, Case{50, 4, true}, Case{50, 4, false},
                         Case{300, 8, false}, Case{6, 6, false}}) {
        SCOPED_TRACE(::testing::Message() << c.rows << " x " << c.r << (c.gs ? " gram-schmidt" : " qr"));
        auto host = gaussian_matrix<W>(c.rows, static_cast<std::size_t>(c.r), 13);
        DeviceBuffer<W> da(host);
        lowrank::orthogonalize(host.data(), c.rows, c.r, c.gs);
        this->expect_ok(orthogonalize(*this->ctx_, da.get(), c.rows, c.r, c.gs, this->stream_));
        this->sync();
        EXPECT_LE(max_rel_diff_up_to_column_sign(da.read(), host, static_cast<std::size_t>(c.r)),
                  1000 * tolerance<W>());
    }
}

TYPED_TEST(DeviceLowrank, GramSchmidtKeepsAZeroColumn)
{
    using W = TypeParam;
    const std::size_t rows = 20;
    auto a = gaussian_matrix<W>(rows, 2, 14);
    for (std::size_t k = 0; k < rows; ++k) a[k * 2 + 1] = W(0);
    DeviceBuffer<W> da(a);
    this->expect_ok(orthogonalize(*this->ctx_, da.get(), rows, 2, false, this->stream_));
    this->sync();
    const auto out = da.read();
    for (std::size_t k = 0; k < rows; ++k) EXPECT_EQ(out[k * 2 + 1], W(0));
}

TYPED_TEST(DeviceLowrank, GaussianIsAPureFunctionOfSeedAndStream)
{
    using W = TypeParam;
    const std::size_t n = 1001;  // odd: the tail of cuRAND's pairs is dropped
    DeviceBuffer<W> a(n), b(n), c(n);
    this->expect_ok(gaussian_fill(*this->ctx_, 7, 3, a.get(), n, this->stream_));
    this->expect_ok(gaussian_fill(*this->ctx_, 7, 4, c.get(), n, this->stream_));
    this->expect_ok(gaussian_fill(*this->ctx_, 7, 3, b.get(), n, this->stream_));
    this->sync();
    const auto va = a.read();
    EXPECT_EQ(va, b.read());
    EXPECT_NE(va, c.read());
    double mean = 0, var = 0;
    for (W x : va) mean += static_cast<double>(x) / n;
    for (W x : va) var += (static_cast<double>(x) - mean) * (static_cast<double>(x) - mean) / n;
    EXPECT_LT(std::abs(mean), 0.15);
    EXPECT_LT(std::abs(var - 1.0), 0.2);
}

TYPED_TEST(DeviceLowrank, StartQRedrawsOnAZeroColumn)
{
    using W = TypeParam;
    const Shape s{10, 30, 3};
    const std::size_t n = s.cols * 3;
    DeviceBuffer<W> fresh(n), warm(n), redrawn(n);
    this->expect_ok(start_q<W>(*this->ctx_, nullptr, 9, 1, s, false, fresh.get(), this->stream_));

    // A usable previous Q: q = orthogonalize(previous), in place.
    auto previous = gaussian_matrix<W>(s.cols, 3, 15);
    auto expected = previous;
    lowrank::orthogonalize(expected.data(), s.cols, 3, false);
    DeviceBuffer<W> dprev(previous);
    this->expect_ok(start_q<W>(*this->ctx_, dprev.get(), 9, 1, s, false, dprev.get(), this->stream_));

    // A zero column: the Gaussian start, as without a previous Q.
    for (std::size_t k = 0; k < s.cols; ++k) previous[k * 3 + 2] = W(0);
    DeviceBuffer<W> dzero(previous);
    this->expect_ok(start_q<W>(*this->ctx_, dzero.get(), 9, 1, s, false, redrawn.get(), this->stream_));
    this->sync();
    EXPECT_LE(max_rel_diff_up_to_column_sign(dprev.read(), expected, 3), 1000 * tolerance<W>());
    EXPECT_EQ(redrawn.read(), fresh.read());
}

TYPED_TEST(DeviceLowrank, Scale)
{
    using W = TypeParam;
    std::vector<W> x{1, -2, 3, 0, 5};
    DeviceBuffer<W> dx(x);
    this->expect_ok(scale(*this->ctx_, dx.get(), x.size(), W(0.5), this->stream_));
    this->sync();
    EXPECT_EQ(dx.read(), (std::vector<W>{W(0.5), W(-1), W(1.5), W(0), W(2.5)}));
}

}  // namespace
}  // namespace cc_coll::detail::lowrank::cuda
