// HALF's element kernels: binary32/binary64 work values to and from 16-bit
// codes (bfloat16 or IEEE binary16, round to nearest even: core/half.hpp),
// written once for the host loops (half.cc) and the CUDA kernels
// (half_cuda.cu).
#pragma once

#include <cstdint>

#include "core/half.hpp"

namespace cc_coll::detail::half {

enum class Format : std::uint32_t { Bf16 = 0, Fp16 = 1 };

template <typename W>
CC_COLL_HD inline std::uint16_t encode_one(W v, Format f)
{
    const float x = static_cast<float>(v);
    return f == Format::Bf16 ? float_to_bf16(x) : float_to_f16(x);
}

CC_COLL_HD inline float decode_one(std::uint16_t c, Format f)
{
    return f == Format::Bf16 ? bf16_to_float(c) : f16_to_float(c);
}

// A residual element as kept: a NaN or infinite one (a non-finite input,
// or a finite one past binary16's range) is 0, as every method keeps them
// (docs/algorithms.md 1.3). e - e is 0 exactly when e is finite.
template <typename W>
CC_COLL_HD inline W kept_error(W e)
{
    return e - e == W(0) ? e : W(0);
}

}  // namespace cc_coll::detail::half
