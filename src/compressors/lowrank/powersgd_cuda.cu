#include "compressors/lowrank/powersgd_cuda.hpp"

#include <cublas_v2.h>
#include <curand.h>
#include <cusolverDn.h>

#include <algorithm>

#include "gpu/cuda_util.hpp"

namespace cc_coll::detail::lowrank::cuda {

namespace {

gpu::Result blas_result(cublasStatus_t s, const char *call)
{
    if (s == CUBLAS_STATUS_SUCCESS) return gpu::Result::success();
    return gpu::Result{call, "cuBLAS", static_cast<int>(s), cublasGetStatusString(s)};
}

gpu::Result solver_result(cusolverStatus_t s, const char *call)
{
    if (s == CUSOLVER_STATUS_SUCCESS) return gpu::Result::success();
    return gpu::Result{call, "cuSOLVER", static_cast<int>(s), nullptr};
}

gpu::Result rand_result(curandStatus_t s, const char *call)
{
    if (s == CURAND_STATUS_SUCCESS) return gpu::Result::success();
    return gpu::Result{call, "cuRAND", static_cast<int>(s), nullptr};
}

// A shape beyond cuBLAS's int dimensions, reported as cuBLAS would.
gpu::Result too_large(const char *call)
{
    return gpu::Result{call, "cuBLAS", static_cast<int>(CUBLAS_STATUS_INVALID_VALUE),
                       "a matrix dimension exceeds the 32-bit int range of cuBLAS/cuSOLVER"};
}

#define CC_COLL_CUBLAS_TRY(expr, name) CC_COLL_GPU_TRY(blas_result((expr), (name)))
#define CC_COLL_CUSOLVER_TRY(expr, name) CC_COLL_GPU_TRY(solver_result((expr), (name)))
#define CC_COLL_CURAND_TRY(expr, name) CC_COLL_GPU_TRY(rand_result((expr), (name)))

cublasOperation_t op(bool trans) { return trans ? CUBLAS_OP_T : CUBLAS_OP_N; }

// The typed cuBLAS / cuSOLVER / cuRAND entry points, with their names for a
// Result.
template <typename W>
struct Lib;

template <>
struct Lib<float> {
    static constexpr const char *gemm_name = "cublasSgemm";
    static constexpr const char *gemv_name = "cublasSgemv";
    static constexpr const char *geam_name = "cublasSgeam";
    static constexpr const char *nrm2_name = "cublasSnrm2";
    static constexpr const char *geqrf_size_name = "cusolverDnSgeqrf_bufferSize";
    static constexpr const char *orgqr_size_name = "cusolverDnSorgqr_bufferSize";
    static constexpr const char *geqrf_name = "cusolverDnSgeqrf";
    static constexpr const char *orgqr_name = "cusolverDnSorgqr";
    static constexpr const char *normal_name = "curandGenerateNormal";

    static cublasStatus_t gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                               const float *alpha, const float *a, int lda, const float *b, int ldb,
                               const float *beta, float *c, int ldc)
    {
        return cublasSgemm(h, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    }
    static cublasStatus_t gemv(cublasHandle_t h, cublasOperation_t t, int m, int n, const float *alpha,
                               const float *a, int lda, const float *x, int incx, const float *beta, float *y,
                               int incy)
    {
        return cublasSgemv(h, t, m, n, alpha, a, lda, x, incx, beta, y, incy);
    }
    static cublasStatus_t geam(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                               const float *alpha, const float *a, int lda, const float *beta, const float *b,
                               int ldb, float *c, int ldc)
    {
        return cublasSgeam(h, ta, tb, m, n, alpha, a, lda, beta, b, ldb, c, ldc);
    }
    static cublasStatus_t nrm2(cublasHandle_t h, int n, const float *x, int incx, float *result)
    {
        return cublasSnrm2(h, n, x, incx, result);
    }
    static cusolverStatus_t geqrf_size(cusolverDnHandle_t h, int m, int n, float *a, int lda, int *lwork)
    {
        return cusolverDnSgeqrf_bufferSize(h, m, n, a, lda, lwork);
    }
    static cusolverStatus_t orgqr_size(cusolverDnHandle_t h, int m, int n, int k, const float *a, int lda,
                                       const float *tau, int *lwork)
    {
        return cusolverDnSorgqr_bufferSize(h, m, n, k, a, lda, tau, lwork);
    }
    static cusolverStatus_t geqrf(cusolverDnHandle_t h, int m, int n, float *a, int lda, float *tau, float *work,
                                  int lwork, int *info)
    {
        return cusolverDnSgeqrf(h, m, n, a, lda, tau, work, lwork, info);
    }
    static cusolverStatus_t orgqr(cusolverDnHandle_t h, int m, int n, int k, float *a, int lda, const float *tau,
                                  float *work, int lwork, int *info)
    {
        return cusolverDnSorgqr(h, m, n, k, a, lda, tau, work, lwork, info);
    }
    static curandStatus_t normal(curandGenerator_t g, float *out, std::size_t n)
    {
        return curandGenerateNormal(g, out, n, 0.0f, 1.0f);
    }
};

template <>
struct Lib<double> {
    static constexpr const char *gemm_name = "cublasDgemm";
    static constexpr const char *gemv_name = "cublasDgemv";
    static constexpr const char *geam_name = "cublasDgeam";
    static constexpr const char *nrm2_name = "cublasDnrm2";
    static constexpr const char *geqrf_size_name = "cusolverDnDgeqrf_bufferSize";
    static constexpr const char *orgqr_size_name = "cusolverDnDorgqr_bufferSize";
    static constexpr const char *geqrf_name = "cusolverDnDgeqrf";
    static constexpr const char *orgqr_name = "cusolverDnDorgqr";
    static constexpr const char *normal_name = "curandGenerateNormalDouble";

    static cublasStatus_t gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                               const double *alpha, const double *a, int lda, const double *b, int ldb,
                               const double *beta, double *c, int ldc)
    {
        return cublasDgemm(h, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    }
    static cublasStatus_t gemv(cublasHandle_t h, cublasOperation_t t, int m, int n, const double *alpha,
                               const double *a, int lda, const double *x, int incx, const double *beta, double *y,
                               int incy)
    {
        return cublasDgemv(h, t, m, n, alpha, a, lda, x, incx, beta, y, incy);
    }
    static cublasStatus_t geam(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                               const double *alpha, const double *a, int lda, const double *beta, const double *b,
                               int ldb, double *c, int ldc)
    {
        return cublasDgeam(h, ta, tb, m, n, alpha, a, lda, beta, b, ldb, c, ldc);
    }
    static cublasStatus_t nrm2(cublasHandle_t h, int n, const double *x, int incx, double *result)
    {
        return cublasDnrm2(h, n, x, incx, result);
    }
    static cusolverStatus_t geqrf_size(cusolverDnHandle_t h, int m, int n, double *a, int lda, int *lwork)
    {
        return cusolverDnDgeqrf_bufferSize(h, m, n, a, lda, lwork);
    }
    static cusolverStatus_t orgqr_size(cusolverDnHandle_t h, int m, int n, int k, const double *a, int lda,
                                       const double *tau, int *lwork)
    {
        return cusolverDnDorgqr_bufferSize(h, m, n, k, a, lda, tau, lwork);
    }
    static cusolverStatus_t geqrf(cusolverDnHandle_t h, int m, int n, double *a, int lda, double *tau,
                                  double *work, int lwork, int *info)
    {
        return cusolverDnDgeqrf(h, m, n, a, lda, tau, work, lwork, info);
    }
    static cusolverStatus_t orgqr(cusolverDnHandle_t h, int m, int n, int k, double *a, int lda,
                                  const double *tau, double *work, int lwork, int *info)
    {
        return cusolverDnDorgqr(h, m, n, k, a, lda, tau, work, lwork, info);
    }
    static curandStatus_t normal(curandGenerator_t g, double *out, std::size_t n)
    {
        return curandGenerateNormalDouble(g, out, n, 0.0, 1.0);
    }
};

constexpr unsigned kThreads = 256;

// Divides the strided column x[k * stride], k < rows, by *norm unless the
// norm is 0 or not finite (the host's rule: an all-zero column stays zero).
template <typename W>
__global__ void divide_by_norm(W *x, std::size_t rows, std::size_t stride, const W *norm)
{
    const W d = *norm;
    if (!(d > W(0)) || !isfinite(d)) return;
    for (std::size_t k = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; k < rows;
         k += static_cast<std::size_t>(gridDim.x) * blockDim.x)
        x[k * stride] /= d;
}

// nonzero[j] = 1 for every column j of the row-major n / r x r `a` holding a
// nonzero element (NaN counts as nonzero, as on the host); the caller zeroes
// `nonzero` first. Every writer stores the same value.
template <typename W>
__global__ void mark_nonzero_columns(const W *a, std::size_t n, int r, int *nonzero)
{
    for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
        if (a[i] != W(0)) nonzero[i % static_cast<std::size_t>(r)] = 1;
}

// q = previous when every column of it holds a nonzero element, else the
// Gaussian; previous may equal q (each element is read before it is
// written, by the same thread).
template <typename W>
__global__ void choose_start(const W *previous, const W *gaussian, const int *nonzero, std::size_t n, int r, W *q)
{
    __shared__ int usable;
    if (threadIdx.x == 0) {
        int all = 1;
        for (int j = 0; j < r; ++j) all &= nonzero[j] != 0 ? 1 : 0;
        usable = all;
    }
    __syncthreads();
    const W *src = usable ? previous : gaussian;
    for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
        q[i] = src[i];
}

template <typename W>
__global__ void scale_kernel(W *x, std::size_t n, W alpha)
{
    for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
        x[i] *= alpha;
}

}  // namespace

struct Context::Impl {
    cublasHandle_t blas = nullptr;
    cusolverDnHandle_t solver = nullptr;
    curandGenerator_t rng = nullptr;

    // One workspace per use, so no call reallocates one another call of the
    // same entry point still reads (start_q's Gaussian stays valid while
    // orthogonalize grows its own).
    gpu::DeviceArray<unsigned char> gaussian;      // gaussian_fill: even-sized draw
    gpu::DeviceArray<unsigned char> start;         // start_q: draw + column flags
    gpu::DeviceArray<unsigned char> gram_schmidt;  // projections + norm
    gpu::DeviceArray<unsigned char> qr_matrix;     // column-major copy + tau
    gpu::DeviceArray<unsigned char> qr_work;       // devInfo + cuSOLVER workspace

    // cuSOLVER's workspace size for the last QR shape (geqrf and orgqr).
    struct {
        bool valid = false;
        bool is_double = false;
        std::size_t rows = 0;
        int r = 0;
        int lwork = 0;
    } qr_query;

    Impl() = default;
    Impl(const Impl &) = delete;
    Impl &operator=(const Impl &) = delete;
    ~Impl()
    {
        // May fail at exit, after the CUDA context is gone; nothing to report to.
        if (rng != nullptr) (void)curandDestroyGenerator(rng);
        if (solver != nullptr) (void)cusolverDnDestroy(solver);
        if (blas != nullptr) (void)cublasDestroy(blas);
    }

    // cuBLAS on `stream`, scalars (alpha, beta, results) in host memory.
    gpu::Result bind_blas(cudaStream_t stream)
    {
        CC_COLL_CUBLAS_TRY(cublasSetStream(blas, stream), "cublasSetStream");
        CC_COLL_CUBLAS_TRY(cublasSetPointerMode(blas, CUBLAS_POINTER_MODE_HOST), "cublasSetPointerMode");
        return gpu::Result::success();
    }
};

gpu::Result Context::create(std::unique_ptr<Context> *out)
{
    std::unique_ptr<Context> ctx(new Context());
    ctx->impl_ = std::make_unique<Impl>();
    Impl &c = *ctx->impl_;
    CC_COLL_CUBLAS_TRY(cublasCreate(&c.blas), "cublasCreate");
    CC_COLL_CUBLAS_TRY(cublasSetMathMode(c.blas, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
    CC_COLL_CUSOLVER_TRY(cusolverDnCreate(&c.solver), "cusolverDnCreate");
    CC_COLL_CURAND_TRY(curandCreateGenerator(&c.rng, CURAND_RNG_PSEUDO_PHILOX4_32_10), "curandCreateGenerator");
    CC_COLL_CURAND_TRY(curandSetGeneratorOrdering(c.rng, CURAND_ORDERING_PSEUDO_LEGACY),
                       "curandSetGeneratorOrdering");
    *out = std::move(ctx);
    return gpu::Result::success();
}

Context::~Context() = default;

namespace {

// normal_count(n) normals from (seed, stream_id) into `dst`, which must hold
// that many (cudaMalloc-aligned workspace).
template <typename W>
gpu::Result draw_normals(Context::Impl &c, std::uint64_t seed, std::uint64_t stream_id, W *dst, std::size_t n,
                         cudaStream_t stream)
{
    CC_COLL_CURAND_TRY(curandSetStream(c.rng, stream), "curandSetStream");
    CC_COLL_CURAND_TRY(curandSetPseudoRandomGeneratorSeed(c.rng, gaussian_seed(seed, stream_id)),
                       "curandSetPseudoRandomGeneratorSeed");
    CC_COLL_CURAND_TRY(curandSetGeneratorOffset(c.rng, 0), "curandSetGeneratorOffset");
    CC_COLL_CURAND_TRY(Lib<W>::normal(c.rng, dst, normal_count(n)), Lib<W>::normal_name);
    return gpu::Result::success();
}

// Gram-Schmidt with one re-orthogonalisation, as the host's gram_schmidt
// (its sums are cuBLAS's in W, not double).
template <typename W>
gpu::Result gram_schmidt(Context::Impl &c, W *a, std::size_t rows, int r, cudaStream_t stream)
{
    const GramSchmidtLayout layout = gram_schmidt_layout(r, sizeof(W));
    CC_COLL_GPU_TRY(c.gram_schmidt.reserve(layout.bytes));
    W *dots = reinterpret_cast<W *>(c.gram_schmidt.data());
    W *norm = reinterpret_cast<W *>(c.gram_schmidt.data() + layout.norm);
    CC_COLL_GPU_TRY(c.bind_blas(stream));
    const W one = 1, zero = 0, minus_one = -1;
    const int n = static_cast<int>(rows);
    for (int i = 0; i < r; ++i) {
        for (int pass = 0; pass < 2 && i > 0; ++pass) {
            const GemvArgs d = gs_dots_gemv(rows, r, i);
            CC_COLL_CUBLAS_TRY(Lib<W>::gemv(c.blas, op(d.trans), d.m, d.n, &one, a, d.lda, a + i, d.incx, &zero,
                                            dots, d.incy),
                               Lib<W>::gemv_name);
            const GemvArgs u = gs_update_gemv(rows, r, i);
            CC_COLL_CUBLAS_TRY(Lib<W>::gemv(c.blas, op(u.trans), u.m, u.n, &minus_one, a, u.lda, dots, u.incx,
                                            &one, a + i, u.incy),
                               Lib<W>::gemv_name);
        }
        // The norm stays on the device: DEVICE pointer mode for this call only.
        CC_COLL_CUBLAS_TRY(cublasSetPointerMode(c.blas, CUBLAS_POINTER_MODE_DEVICE), "cublasSetPointerMode");
        const cublasStatus_t s = Lib<W>::nrm2(c.blas, n, a + i, r, norm);
        const cublasStatus_t back = cublasSetPointerMode(c.blas, CUBLAS_POINTER_MODE_HOST);
        CC_COLL_CUBLAS_TRY(s, Lib<W>::nrm2_name);
        CC_COLL_CUBLAS_TRY(back, "cublasSetPointerMode");
        divide_by_norm<W><<<gpu::grid_for(rows, kThreads), kThreads, 0, stream>>>(a + i, rows,
                                                                                   static_cast<std::size_t>(r), norm);
        CC_COLL_GPU_TRY(gpu::launch_result("divide_by_norm"));
    }
    return gpu::Result::success();
}

// Householder QR: a (row-major rows x r) -> column-major copy -> geqrf +
// orgqr -> back into a.
template <typename W>
gpu::Result householder(Context::Impl &c, W *a, std::size_t rows, int r, cudaStream_t stream)
{
    const int m = static_cast<int>(rows);
    const QrMatrixLayout ml = qr_matrix_layout(rows, r, sizeof(W));
    CC_COLL_GPU_TRY(c.qr_matrix.reserve(ml.bytes));
    W *t = reinterpret_cast<W *>(c.qr_matrix.data());
    W *tau = reinterpret_cast<W *>(c.qr_matrix.data() + ml.tau);

    const bool is_double = sizeof(W) == sizeof(double);
    auto &q = c.qr_query;
    if (!q.valid || q.is_double != is_double || q.rows != rows || q.r != r) {
        int lwork_geqrf = 0, lwork_orgqr = 0;
        CC_COLL_CUSOLVER_TRY(Lib<W>::geqrf_size(c.solver, m, r, t, m, &lwork_geqrf), Lib<W>::geqrf_size_name);
        CC_COLL_CUSOLVER_TRY(Lib<W>::orgqr_size(c.solver, m, r, r, t, m, tau, &lwork_orgqr),
                             Lib<W>::orgqr_size_name);
        q.valid = true;
        q.is_double = is_double;
        q.rows = rows;
        q.r = r;
        q.lwork = std::max(lwork_geqrf, lwork_orgqr);
    }
    const QrWorkLayout wl = qr_work_layout(q.lwork, sizeof(W));
    CC_COLL_GPU_TRY(c.qr_work.reserve(wl.bytes));
    int *info = reinterpret_cast<int *>(c.qr_work.data());
    W *work = reinterpret_cast<W *>(c.qr_work.data() + wl.work);

    CC_COLL_GPU_TRY(c.bind_blas(stream));
    CC_COLL_CUSOLVER_TRY(cusolverDnSetStream(c.solver, stream), "cusolverDnSetStream");
    const W one = 1, zero = 0;
    const TransposeArgs to = qr_to_column_major(rows, r);
    CC_COLL_CUBLAS_TRY(Lib<W>::geam(c.blas, CUBLAS_OP_T, CUBLAS_OP_N, to.m, to.n, &one, a, to.lda, &zero, t, to.ldc,
                                    t, to.ldc),
                       Lib<W>::geam_name);
    // The copy is column-major rows x r with leading dimension to.ldc == rows.
    CC_COLL_CUSOLVER_TRY(Lib<W>::geqrf(c.solver, m, r, t, to.ldc, tau, work, q.lwork, info), Lib<W>::geqrf_name);
    CC_COLL_CUSOLVER_TRY(Lib<W>::orgqr(c.solver, m, r, r, t, to.ldc, tau, work, q.lwork, info),
                         Lib<W>::orgqr_name);
    const TransposeArgs back = qr_from_column_major(rows, r);
    CC_COLL_CUBLAS_TRY(Lib<W>::geam(c.blas, CUBLAS_OP_T, CUBLAS_OP_N, back.m, back.n, &one, t, back.lda, &zero, a,
                                    back.ldc, a, back.ldc),
                       Lib<W>::geam_name);
    return gpu::Result::success();
}

template <typename W>
const W *operand(Operand o, const W *m, const W *p, const W *q)
{
    return o == Operand::M ? m : o == Operand::P ? p : q;
}

template <typename W>
gpu::Result gemm(Context::Impl &c, const GemmArgs &g, W alpha, const W *m, const W *p, const W *q, W *out,
                 cudaStream_t stream)
{
    CC_COLL_GPU_TRY(c.bind_blas(stream));
    const W beta = 0;
    CC_COLL_CUBLAS_TRY(Lib<W>::gemm(c.blas, op(g.trans_a), op(g.trans_b), g.m, g.n, g.k, &alpha,
                                    operand(g.a, m, p, q), g.lda, operand(g.b, m, p, q), g.ldb, &beta, out, g.ldc),
                       Lib<W>::gemm_name);
    return gpu::Result::success();
}

template <typename W>
gpu::Result gemv(Context::Impl &c, const GemvArgs &g, const W *a, const W *x, W *y, cudaStream_t stream)
{
    CC_COLL_GPU_TRY(c.bind_blas(stream));
    const W one = 1, zero = 0;
    CC_COLL_CUBLAS_TRY(Lib<W>::gemv(c.blas, op(g.trans), g.m, g.n, &one, a, g.lda, x, g.incx, &zero, y, g.incy),
                       Lib<W>::gemv_name);
    return gpu::Result::success();
}

}  // namespace

template <typename W>
gpu::Result gaussian_fill(Context &ctx, std::uint64_t seed, std::uint64_t stream_id, W *out, std::size_t n,
                          cudaStream_t stream)
{
    if (n == 0) return gpu::Result::success();
    Context::Impl &c = ctx.impl();
    CC_COLL_GPU_TRY(c.gaussian.reserve(gaussian_layout(n, sizeof(W)).bytes));
    W *draw = reinterpret_cast<W *>(c.gaussian.data());
    CC_COLL_GPU_TRY(draw_normals(c, seed, stream_id, draw, n, stream));
    CC_COLL_CUDA_TRY(cudaMemcpyAsync(out, draw, n * sizeof(W), cudaMemcpyDeviceToDevice, stream));
    return gpu::Result::success();
}

template <typename W>
gpu::Result orthogonalize(Context &ctx, W *a, std::size_t rows, int r, bool use_gram_schmidt, cudaStream_t stream)
{
    if (r <= 0 || rows == 0) return gpu::Result::success();
    if (!fits_int(Shape{rows, 1, r})) return too_large("orthogonalize");
    Context::Impl &c = ctx.impl();
    if (uses_gram_schmidt(rows, r, use_gram_schmidt)) return gram_schmidt(c, a, rows, r, stream);
    return householder(c, a, rows, r, stream);
}

template <typename W>
gpu::Result start_q(Context &ctx, const W *previous, std::uint64_t seed, std::uint64_t stream_id, const Shape &s,
                    bool use_gram_schmidt, W *q, cudaStream_t stream)
{
    const std::size_t n = s.cols * static_cast<std::size_t>(s.rank);
    if (n == 0) return gpu::Result::success();
    if (previous == nullptr) {
        CC_COLL_GPU_TRY(gaussian_fill(ctx, seed, stream_id, q, n, stream));
    } else {
        Context::Impl &c = ctx.impl();
        const StartLayout layout = start_layout(s, sizeof(W));
        CC_COLL_GPU_TRY(c.start.reserve(layout.bytes));
        W *draw = reinterpret_cast<W *>(c.start.data());
        int *nonzero = reinterpret_cast<int *>(c.start.data() + layout.flags);
        CC_COLL_GPU_TRY(draw_normals(c, seed, stream_id, draw, n, stream));
        CC_COLL_CUDA_TRY(cudaMemsetAsync(nonzero, 0, static_cast<std::size_t>(s.rank) * sizeof(int), stream));
        const unsigned grid = gpu::grid_for(n, kThreads);
        mark_nonzero_columns<W><<<grid, kThreads, 0, stream>>>(previous, n, s.rank, nonzero);
        CC_COLL_GPU_TRY(gpu::launch_result("mark_nonzero_columns"));
        choose_start<W><<<grid, kThreads, 0, stream>>>(previous, draw, nonzero, n, s.rank, q);
        CC_COLL_GPU_TRY(gpu::launch_result("choose_start"));
    }
    return orthogonalize(ctx, q, s.cols, s.rank, use_gram_schmidt, stream);
}

template <typename W>
gpu::Result multiply_mq(Context &ctx, const W *m, const Shape &s, const W *q, W *p, cudaStream_t stream)
{
    if (s.rank <= 0 || s.elements() == 0) return gpu::Result::success();
    if (!fits_int(s)) return too_large("multiply_mq");
    if (s.rank == 1) return gemv(ctx.impl(), mq_gemv(s), m, q, p, stream);
    return gemm(ctx.impl(), mq_gemm(s), W(1), m, static_cast<const W *>(nullptr), q, p, stream);
}

template <typename W>
gpu::Result multiply_mtp(Context &ctx, const W *m, const Shape &s, const W *p, W *q, cudaStream_t stream)
{
    if (s.rank <= 0 || s.elements() == 0) return gpu::Result::success();
    if (!fits_int(s)) return too_large("multiply_mtp");
    if (s.rank == 1) return gemv(ctx.impl(), mtp_gemv(s), m, p, q, stream);
    return gemm(ctx.impl(), mtp_gemm(s), W(1), m, p, static_cast<const W *>(nullptr), q, stream);
}

template <typename W>
gpu::Result reconstruct(Context &ctx, const W *p, const W *q, const Shape &s, W alpha, W *out, cudaStream_t stream)
{
    if (s.rank <= 0 || s.elements() == 0) return gpu::Result::success();
    if (!fits_int(s)) return too_large("reconstruct");
    return gemm(ctx.impl(), reconstruct_gemm(s), alpha, static_cast<const W *>(nullptr), p, q, out, stream);
}

template <typename W>
gpu::Result scale(Context &ctx, W *x, std::size_t n, W alpha, cudaStream_t stream)
{
    (void)ctx;
    if (n == 0) return gpu::Result::success();
    scale_kernel<W><<<gpu::grid_for(n, kThreads), kThreads, 0, stream>>>(x, n, alpha);
    return gpu::launch_result("scale_kernel");
}

#define CC_COLL_LOWRANK_CUDA_INSTANTIATE(W)                                                                      \
    template gpu::Result gaussian_fill<W>(Context &, std::uint64_t, std::uint64_t, W *, std::size_t,            \
                                          cudaStream_t);                                                         \
    template gpu::Result orthogonalize<W>(Context &, W *, std::size_t, int, bool, cudaStream_t);                 \
    template gpu::Result start_q<W>(Context &, const W *, std::uint64_t, std::uint64_t, const Shape &, bool, W *, \
                                    cudaStream_t);                                                               \
    template gpu::Result multiply_mq<W>(Context &, const W *, const Shape &, const W *, W *, cudaStream_t);      \
    template gpu::Result multiply_mtp<W>(Context &, const W *, const Shape &, const W *, W *, cudaStream_t);     \
    template gpu::Result reconstruct<W>(Context &, const W *, const W *, const Shape &, W, W *, cudaStream_t);   \
    template gpu::Result scale<W>(Context &, W *, std::size_t, W, cudaStream_t);

CC_COLL_LOWRANK_CUDA_INSTANTIATE(float)
CC_COLL_LOWRANK_CUDA_INSTANTIATE(double)

}  // namespace cc_coll::detail::lowrank::cuda
