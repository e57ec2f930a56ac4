// Element-wise device kernels the GPU algorithms share: the device
// counterparts of core/dtype.hpp's load_as/store_as/divide_in_place and of
// the error-feedback steps in exec/host_kernels.hpp. Elements are
// converted by the same functions as on the host (core/half.hpp), so a
// device result rounds exactly like the host's. Every function enqueues its
// work on `stream` and returns the launch status.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

#include "cc_coll.h"
#include "gpu/result.hpp"

namespace cc_coll::detail::gpu {

// g[i] = src[i] (accumulate == false) or g[i] += src[i] (accumulate == true,
// the error-feedback input g' = g + e), src a dtype buffer, g work type W.
template <typename W>
Result load_input(const void *src, cc_coll_dtype_t dtype, std::size_t n, W *g, bool accumulate, cudaStream_t stream);

// g[i] -= src[i]: takes a call's input back out of its residual.
template <typename W>
Result undo_input(W *g, const void *src, cc_coll_dtype_t dtype, std::size_t n, cudaStream_t stream);

// dst[i] = g[i] rounded to the dtype; with ef, g[i] keeps the rounding
// (g - dst, or 0 when that is not finite), as round_to_dtype on the host.
template <typename W>
Result round_to_dtype(W *g, bool ef, std::size_t n, cc_coll_dtype_t dtype, void *dst, cudaStream_t stream);

// dst[i] = alpha * src[i] rounded to the dtype (alpha == 1 is a plain store).
template <typename W>
Result store_scaled(const W *src, std::size_t n, W alpha, cc_coll_dtype_t dtype, void *dst, cudaStream_t stream);

// buf[i] /= divisor in the element type (binary32 for F16/BF16, rounded to
// nearest even), as divide_in_place on the host.
Result divide_in_place(void *buf, std::size_t n, cc_coll_dtype_t dtype, int divisor, cudaStream_t stream);

// *flag (device memory) is set to 1 when any of g[0..n) is NaN or infinite;
// left as it is otherwise (the caller zeroes it).
template <typename W>
Result flag_nonfinite(const W *g, std::size_t n, std::uint32_t *flag, cudaStream_t stream);

// e = g - sent[j] at g[idx[j]] for j < k (0 when not finite): the residual
// after a sparse send, as keep_unsent on the host.
template <typename W>
Result keep_unsent(W *g, const std::uint32_t *idx, const W *sent, std::size_t k, cudaStream_t stream);

// g[idx[j]] = 0 for j < k (elements sent exactly).
template <typename W>
Result zero_at(W *g, const std::uint32_t *idx, std::size_t k, cudaStream_t stream);

// LOWRANK's last step for the n elements of a tensor: with e != nullptr,
// e[i] = e[i] - mhat[i] (0 when not finite); dst[i] = alpha * mhat[i]
// rounded to the dtype.
template <typename W>
Result residual_and_store(W *e, const W *mhat, std::size_t n, W alpha, cc_coll_dtype_t dtype, void *dst,
                          cudaStream_t stream);

}  // namespace cc_coll::detail::gpu
