// HALF's CUDA kernels (half_cuda.cu), launched on `stream` (a cudaStream_t):
// the device forms of half.cc's loops, element for element the same values.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cc_coll.h"
#include "compressors/half/half_kernels.hpp"
#include "gpu/result.hpp"

namespace cc_coll::detail::half::cuda {

template <typename W>
gpu::Result encode(const W *v, std::size_t n, Format f, unsigned char *out, W *error, bool accumulate, void *stream);
template <typename W>
gpu::Result decode_sum(const unsigned char *in, std::size_t blocks, std::size_t n, Format f, W *sum, void *stream);
gpu::Result decode_store(const unsigned char *in, std::size_t n, Format f, cc_coll_dtype_t dtype, void *dst,
                         void *stream);

}  // namespace cc_coll::detail::half::cuda
