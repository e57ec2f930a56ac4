// PowerSGD's linear algebra (powersgd.hpp) on the device: products through
// cuBLAS, orthogonalisation on the device (Gram-Schmidt with
// re-orthogonalisation for r <= 2 and half dtypes, else cuSOLVER's
// Householder QR, as the host), and the Gaussian start from cuRAND. Knows
// nothing of MPI. Matrices are row-major as on the host; all pointers are
// device memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include <cuda_runtime_api.h>

#include "compressors/lowrank/powersgd.hpp"
#include "gpu/result.hpp"

namespace cc_coll::detail::lowrank::cuda {

// The library handles (cuBLAS, cuSOLVER, cuRAND) and device workspace of one
// device; create once, reuse across calls. Not thread-safe.
class Context {
public:
    // Creates the handles on the current device.
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

// n standard-normal values from cuRAND (Philox4x32-10) seeded with a pure
// function of (seed, stream): the host's seed rule, identical on every rank;
// the numbers differ from the host's gaussian_fill.
template <typename W>
gpu::Result gaussian_fill(Context &ctx, std::uint64_t seed, std::uint64_t stream_id, W *out, std::size_t n,
                          cudaStream_t stream);

// Orthonormalises the r columns of the row-major rows x r matrix `a` in
// place, as lowrank::orthogonalize (an all-zero column stays zero on the
// Gram-Schmidt path).
template <typename W>
gpu::Result orthogonalize(Context &ctx, W *a, std::size_t rows, int r, bool use_gram_schmidt, cudaStream_t stream);

// lowrank::start_q: q = `previous` (device, may be nullptr or equal q) when
// given and free of all-zero columns, else gaussian_fill(seed, stream_id);
// then orthogonalised.
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

}  // namespace cc_coll::detail::lowrank::cuda
