// PowerSGD's linear algebra (docs/algorithms.md section 4): the matrix view of a
// tensor, the compression test, the seeded Gaussian start, the
// orthogonalisation of P and Q, and the three products of a step. No MPI
// here: the collectives layer sums P and Q between the products.
//
// Matrices are row-major, like torch's tensor.view(rows, -1): M is
// rows x cols, P is rows x r, Q is cols x r. Products go through CBLAS and QR
// through LAPACKE; nothing here is a hand-written GEMM.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "cc_coll.h"
#include "core/params.hpp"

namespace cc_coll::detail::lowrank {

struct Shape {
    std::size_t rows = 0;
    std::size_t cols = 0;
    int rank = 0;  // r = min(rows, cols, requested rank)

    std::size_t elements() const { return rows * cols; }
    // Elements of P and Q together.
    std::size_t factor_elements() const { return (rows + cols) * static_cast<std::size_t>(rank); }
};

// The matrix view of `count` elements. With has_shape and rows >= 1:
// rows x cols, cols == 0 meaning count / rows; the product must equal count.
// With has_shape and rows = cols = 0, or without has_shape: near-square,
// rows = ceil(sqrt(count)), cols = ceil(count / rows), rows x cols >= count
// (the tail of the last row is zero padding); rows = 0 with cols != 0 is
// refused. (An allreduce sends a LOWRANK tensor without a shape densely and
// never asks for its view; point-to-point uses the near-square view.) On
// failure returns false and says why: count 0 has no view; any other size_t
// count is answered without overflow, a near-square view whose rows x cols
// would not fit in size_t being refused.
bool resolve_shape(std::size_t count, bool has_shape, std::uint64_t rows, std::uint64_t cols, int rank, Shape *out,
                   std::string *why);

// PyTorch's _should_compress: (rows + cols) r rate < rows cols.
bool should_compress(const Shape &s, double min_compression_rate);

// How an allreduce's summed factors travel (CC_COLL_LOWRANK_FACTORS, the
// method's word of options): in the work type, or as bfloat16 or binary16
// codes (HALF's codec, summed in the work type).
enum class Factors : std::uint32_t { Work = 0, Bf16 = 1, Fp16 = 2 };
inline Factors factors_of(std::uint32_t options)
{
    return options == 1 ? Factors::Bf16 : options == 2 ? Factors::Fp16 : Factors::Work;
}
// A call's: its params' word of LOWRANK's options.
inline Factors factors_of(const CallParams &p) { return factors_of(p.method_options[CC_COLL_METHOD_LOWRANK]); }

// The 64-bit key a Gaussian start draws from: splitmix64(seed ^
// splitmix64(stream)), a pure function of (seed, stream), so identical on
// every rank. gaussian_fill counts from it; the device start seeds cuRAND
// with it.
std::uint64_t gaussian_seed(std::uint64_t seed, std::uint64_t stream);

// n standard-normal values, a pure function of (seed, stream, i): the same on
// every rank and every platform (splitmix64 counters from gaussian_seed,
// Box-Muller).
template <typename W>
void gaussian_fill(std::uint64_t seed, std::uint64_t stream, W *out, std::size_t n);

// Orthonormalises the r columns of the row-major rows x r matrix `a` in
// place: Gram-Schmidt (with re-orthogonalisation) when r <= 2 or
// use_gram_schmidt, else Householder QR (LAPACK geqrf + orgqr), as PyTorch's
// _orthogonalize. On the Gram-Schmidt path an all-zero column stays zero
// (PyTorch with epsilon 0 would produce NaN); QR completes it to an
// orthonormal column.
template <typename W>
void orthogonalize(W *a, std::size_t rows, int r, bool use_gram_schmidt);

// The orthonormal Q (cols x r) a step starts from: `previous` (the last
// step's Q, may equal q) when it is given and has no all-zero column, else a
// Gaussian from (seed, stream). An all-zero step leaves Q = 0; starting again
// from it would keep every later P zero.
template <typename W>
void start_q(const W *previous, std::uint64_t seed, std::uint64_t stream, const Shape &s, bool use_gram_schmidt,
             W *q);

// P = M Q (rows x r).
template <typename W>
void multiply_mq(const W *m, const Shape &s, const W *q, W *p);

// Q = M^T P (cols x r).
template <typename W>
void multiply_mtp(const W *m, const Shape &s, const W *p, W *q);

// out = alpha P Q^T (rows x cols).
template <typename W>
void reconstruct(const W *p, const W *q, const Shape &s, W alpha, W *out);
// Rows [row, row + rows) of it: out (rows x cols) = alpha P[row..] Q^T, the
// same values reconstruct writes there.
template <typename W>
void reconstruct_rows(const W *p, const W *q, const Shape &s, std::size_t row, std::size_t rows, W alpha, W *out);

// Scales n values by alpha (Q's division by the communicator size).
template <typename W>
void scale(W *x, std::size_t n, W alpha);

}  // namespace cc_coll::detail::lowrank
