// QUANT's and ONEBIT's CUDA kernels (quant_cuda.cu), launched on `stream` (a
// cudaStream_t): the device forms of quant.cc's loops, chunk for chunk and
// element for element the same bytes and values (quant_kernels.hpp).
#pragma once

#include <cstddef>
#include <cstdint>

#include "cc_coll.h"
#include "compressors/quant/quant_kernels.hpp"
#include "gpu/result.hpp"

namespace cc_coll::detail::quant::cuda {

template <typename W>
gpu::Result encode(const Options &o, std::uint64_t seed, unsigned stage, const W *v, std::size_t n,
                   unsigned char *out, W *error, bool accumulate, void *stream);
template <typename W>
gpu::Result decode_sum(const Options &o, const unsigned char *in, std::size_t blocks, std::size_t n, W *sum,
                       void *stream);
gpu::Result decode_store(const Options &o, const unsigned char *in, std::size_t n, cc_coll_dtype_t dtype, void *dst,
                         void *stream);

}  // namespace cc_coll::detail::quant::cuda
