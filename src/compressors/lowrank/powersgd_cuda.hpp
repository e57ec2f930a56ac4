// PowerSGD's linear algebra (powersgd.hpp) on the device: products through
// cuBLAS, orthogonalisation on the device (Gram-Schmidt with
// re-orthogonalisation for r <= 2 and half dtypes, else cuSOLVER's
// Householder QR, as the host), and the Gaussian start from cuRAND. Knows
// nothing of MPI. Matrices are row-major as on the host; all pointers are
// device memory.
//
// cuBLAS and cuSOLVER are column-major. A row-major a x b matrix with leading
// dimension b is, byte for byte, the column-major b x a matrix X^T with
// leading dimension b; so no product copies its operands: each one is
// rewritten as a product of the transposes (C = A B  <=>  C^T = B^T A^T).
// The argument sets below are that derivation, written once: the device code
// passes them to cuBLAS as they are, and the host unit test
// (tests/test_lowrank_cuda_host.cc) interprets them with naive column-major
// loops against the host's CBLAS results.
//
// Every function enqueues its work on `stream` and returns without waiting;
// none synchronises the device. Every entry point binds the handles it uses
// to `stream` (cublasSetStream, cusolverDnSetStream, curandSetStream) before
// its first call on them, and sets cuBLAS's pointer mode to HOST (alpha and
// beta are host scalars); the Gram-Schmidt norm alone switches it to DEVICE
// (its result stays on the device) and back. A workspace that grows
// is freed and allocated again (cudaFree / cudaMalloc, which synchronise):
// the first call of a larger shape, never a steady stream of same-sized ones.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>

#include <cuda_runtime_api.h>

#include "compressors/lowrank/powersgd.hpp"
#include "gpu/result.hpp"

namespace cc_coll::detail::lowrank::cuda {

// The library handles (cuBLAS, cuSOLVER, cuRAND) and device workspace of one
// device; create once, reuse across calls on the device that was current at
// create(). Not thread-safe.
class Context {
public:
    // Creates the handles on the current device: cuBLAS in default math mode
    // (no TF32, so binary32 products round like the host's), cuRAND
    // Philox4x32-10 with the legacy ordering.
    static gpu::Result create(std::unique_ptr<Context> *out);
    ~Context();
    Context(const Context &) = delete;
    Context &operator=(const Context &) = delete;

    struct Impl;
    Impl &impl() { return *impl_; }

private:
    Context() = default;
    std::unique_ptr<Impl> impl_;
};

// n standard-normal values from cuRAND's Philox4x32-10, seeded with
// gaussian_seed(seed, stream_id) at offset 0 and CURAND_ORDERING_PSEUDO_LEGACY
// (the sequence cuRAND guarantees to keep in every release): the
// host's seed rule, so identical on every rank and every call with the same
// (seed, stream_id); the numbers differ from the host's gaussian_fill. cuRAND
// draws normals in pairs, so normal_count(n) values are drawn into the
// Context's workspace and the first n copied to `out` (any alignment).
template <typename W>
gpu::Result gaussian_fill(Context &ctx, std::uint64_t seed, std::uint64_t stream_id, W *out, std::size_t n,
                          cudaStream_t stream);

// Orthonormalises the r columns of the row-major rows x r matrix `a` in
// place, as lowrank::orthogonalize (an all-zero column stays zero on the
// Gram-Schmidt path). Gram-Schmidt: two projection passes per column (cuBLAS
// gemv), the norm by cublas<t>nrm2 into device memory and a kernel that
// divides by it unless it is 0 or not finite; nothing is read back. QR:
// cusolverDn<t>geqrf + orgqr on a column-major copy (cublas<t>geam), with
// the workspace size queried once per shape and kept; devInfo stays on the
// device (it reports only invalid arguments, which these calls do not pass).
template <typename W>
gpu::Result orthogonalize(Context &ctx, W *a, std::size_t rows, int r, bool use_gram_schmidt, cudaStream_t stream);

// lowrank::start_q: q = `previous` (device, may be nullptr or equal q) when
// given and free of all-zero columns (exact comparison with 0: NaN counts as
// nonzero, as on the host), else gaussian_fill(seed, stream_id); then
// orthogonalised. With `previous`, the test for an all-zero column and
// the choice are made on the device, without a read-back: the Gaussian is
// drawn into the workspace on every such call (cols x r normals) and a kernel
// copies either it or `previous` into q.
template <typename W>
gpu::Result start_q(Context &ctx, const W *previous, std::uint64_t seed, std::uint64_t stream_id, const Shape &s,
                    bool use_gram_schmidt, W *q, cudaStream_t stream);

// P = M Q (rows x r).
template <typename W>
gpu::Result multiply_mq(Context &ctx, const W *m, const Shape &s, const W *q, W *p, cudaStream_t stream);

// Q = M^T P (cols x r).
template <typename W>
gpu::Result multiply_mtp(Context &ctx, const W *m, const Shape &s, const W *p, W *q, cudaStream_t stream);

// out = alpha P Q^T (rows x cols).
template <typename W>
gpu::Result reconstruct(Context &ctx, const W *p, const W *q, const Shape &s, W alpha, W *out, cudaStream_t stream);

// x[0..n) *= alpha.
template <typename W>
gpu::Result scale(Context &ctx, W *x, std::size_t n, W alpha, cudaStream_t stream);

// ---------------------------------------------------------------------------
// The cuBLAS / cuSOLVER arguments of the functions above and their workspace
// layout: pure functions of the shape, shared with the host unit test.

// Whether a shape fits cuBLAS's and cuSOLVER's 32-bit int dimensions (rows,
// cols and r; the functions above refuse others with
// CUBLAS_STATUS_INVALID_VALUE).
constexpr bool fits_int(const Shape &s)
{
    constexpr std::size_t max = static_cast<std::size_t>(std::numeric_limits<int>::max());
    return s.rows <= max && s.cols <= max && s.rank >= 0;
}

// The operands of a product: M (rows x cols), P (rows x r), Q (cols x r),
// each given to cuBLAS as the column-major transpose it is in memory.
enum class Operand { M, P, Q };

// C = alpha op(A) op(B) + beta C, column-major, op(A) m x k, op(B) k x n,
// C m x n (cublas<t>gemm).
struct GemmArgs {
    Operand a;
    Operand b;
    bool trans_a;
    bool trans_b;
    int m;
    int n;
    int k;
    int lda;
    int ldb;
    int ldc;
};

// y = alpha op(A) x + beta y, column-major A of m x n (before op), leading
// dimension lda (cublas<t>gemv).
struct GemvArgs {
    bool trans;
    int m;
    int n;
    int lda;
    int incx;
    int incy;
};

// P = M Q. In memory P is P^T (r x rows, ld r), Q is Q^T (r x cols, ld r),
// M is M^T (cols x rows, ld cols); P^T = Q^T M^T is
// gemm(N, N, m = r, n = rows, k = cols, A = q (ld r), B = m (ld cols), C = p (ld r)).
constexpr GemmArgs mq_gemm(const Shape &s)
{
    const int r = s.rank, rows = static_cast<int>(s.rows), cols = static_cast<int>(s.cols);
    return GemmArgs{Operand::Q, Operand::M, false, false, r, rows, cols, r, cols, r};
}

// Q = M^T P. Q^T (r x cols, ld r) = P^T M, with P^T = p (r x rows, ld r) and
// M = op T of m (cols x rows, ld cols):
// gemm(N, T, m = r, n = cols, k = rows, A = p (ld r), B = m (ld cols), C = q (ld r)).
constexpr GemmArgs mtp_gemm(const Shape &s)
{
    const int r = s.rank, rows = static_cast<int>(s.rows), cols = static_cast<int>(s.cols);
    return GemmArgs{Operand::P, Operand::M, false, true, r, cols, rows, r, cols, r};
}

// out = alpha P Q^T. out^T (cols x rows, ld cols) = alpha Q P^T, with Q = op T
// of q (r x cols, ld r) and P^T = p (r x rows, ld r):
// gemm(T, N, m = cols, n = rows, k = r, A = q (ld r), B = p (ld r), C = out (ld cols)).
constexpr GemmArgs reconstruct_gemm(const Shape &s)
{
    const int r = s.rank, rows = static_cast<int>(s.rows), cols = static_cast<int>(s.cols);
    return GemmArgs{Operand::Q, Operand::P, true, false, cols, rows, r, r, r, cols};
}

// Rank 1, p = M q: A = m as stored (cols x rows, ld cols) is M^T, so
// M q = op T: gemv(T, m = cols, n = rows, A = m, x = q, y = p).
constexpr GemvArgs mq_gemv(const Shape &s)
{
    const int rows = static_cast<int>(s.rows), cols = static_cast<int>(s.cols);
    return GemvArgs{true, cols, rows, cols, 1, 1};
}

// Rank 1, q = M^T p: gemv(N, m = cols, n = rows, A = m, x = p, y = q).
constexpr GemvArgs mtp_gemv(const Shape &s)
{
    const int rows = static_cast<int>(s.rows), cols = static_cast<int>(s.cols);
    return GemvArgs{false, cols, rows, cols, 1, 1};
}

// Gram-Schmidt on the row-major rows x r `a`, seen as the column-major
// r x rows A^T (ld r): the matrix's column i is A^T's row i, at a + i with
// stride r. dots[0..i) = (columns 0..i)^T column i:
// gemv(N, m = i, n = rows, A = a (ld r), x = a + i (inc r), y = dots (inc 1)).
constexpr GemvArgs gs_dots_gemv(std::size_t rows, int r, int i)
{
    return GemvArgs{false, i, static_cast<int>(rows), r, r, 1};
}

// column i -= (columns 0..i) dots, alpha = -1, beta = 1:
// gemv(T, m = i, n = rows, A = a (ld r), x = dots (inc 1), y = a + i (inc r)).
// A's rows 0..i and y are disjoint elements of the same buffer.
constexpr GemvArgs gs_update_gemv(std::size_t rows, int r, int i)
{
    return GemvArgs{true, i, static_cast<int>(rows), r, 1, r};
}

// C = op(A) (cublas<t>geam with transa = T, transb = N, beta = 0 and B = C,
// ldb = ldc: cuBLAS's in-place form for B), C m x n.
struct TransposeArgs {
    int m;
    int n;
    int lda;
    int ldc;
};

// The row-major rows x r `a` (column-major r x rows, ld r) into the
// column-major rows x r copy (ld rows) that geqrf/orgqr factor.
constexpr TransposeArgs qr_to_column_major(std::size_t rows, int r)
{
    return TransposeArgs{static_cast<int>(rows), r, r, static_cast<int>(rows)};
}

// The column-major rows x r Q factor (ld rows) back into the row-major `a`.
constexpr TransposeArgs qr_from_column_major(std::size_t rows, int r)
{
    return TransposeArgs{r, static_cast<int>(rows), static_cast<int>(rows), r};
}

// Whether orthogonalize takes the Gram-Schmidt path (else QR), as the host:
// r <= 2, use_gram_schmidt, or fewer rows than columns.
constexpr bool uses_gram_schmidt(std::size_t rows, int r, bool use_gram_schmidt)
{
    return r <= 2 || use_gram_schmidt || rows < static_cast<std::size_t>(r);
}

// cuRAND draws normals in pairs: the count drawn for n values.
constexpr std::size_t normal_count(std::size_t n) { return n + (n & 1u); }

// Workspace regions start at multiples of this many bytes (cudaMalloc's
// alignment), so every region is aligned for any element type.
constexpr std::size_t workspace_alignment = 256;

constexpr std::size_t align_up(std::size_t bytes)
{
    return (bytes + workspace_alignment - 1) / workspace_alignment * workspace_alignment;
}

// Byte offsets of a workspace's regions and its total size.
struct GaussianLayout {  // gaussian_fill: normal_count(n) elements
    std::size_t bytes;
};
struct StartLayout {  // start_q with `previous`: the Gaussian, one int flag per column
    std::size_t flags;
    std::size_t bytes;
};
struct GramSchmidtLayout {  // r projections, the norm
    std::size_t norm;
    std::size_t bytes;
};
struct QrMatrixLayout {  // the column-major rows x r copy, tau (r)
    std::size_t tau;
    std::size_t bytes;
};
struct QrWorkLayout {  // devInfo, lwork elements of cuSOLVER workspace
    std::size_t work;
    std::size_t bytes;
};

constexpr GaussianLayout gaussian_layout(std::size_t n, std::size_t elem)
{
    return GaussianLayout{align_up(normal_count(n) * elem)};
}

constexpr StartLayout start_layout(const Shape &s, std::size_t elem)
{
    const std::size_t flags = align_up(normal_count(s.cols * static_cast<std::size_t>(s.rank)) * elem);
    return StartLayout{flags, flags + align_up(static_cast<std::size_t>(s.rank) * sizeof(int))};
}

constexpr GramSchmidtLayout gram_schmidt_layout(int r, std::size_t elem)
{
    const std::size_t norm = align_up(static_cast<std::size_t>(r) * elem);
    return GramSchmidtLayout{norm, norm + align_up(elem)};
}

constexpr QrMatrixLayout qr_matrix_layout(std::size_t rows, int r, std::size_t elem)
{
    const std::size_t tau = align_up(rows * static_cast<std::size_t>(r) * elem);
    return QrMatrixLayout{tau, tau + align_up(static_cast<std::size_t>(r) * elem)};
}

constexpr QrWorkLayout qr_work_layout(int lwork, std::size_t elem)
{
    const std::size_t work = align_up(sizeof(int));
    return QrWorkLayout{work, work + align_up(static_cast<std::size_t>(lwork > 0 ? lwork : 1) * elem)};
}

}  // namespace cc_coll::detail::lowrank::cuda
