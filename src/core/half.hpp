// Software conversions between binary32 and the 16-bit float formats.
// Round to nearest, ties to even; NaN stays NaN, infinities stay infinite.
#pragma once

// The same functions run in CUDA kernels (src/gpu/), so a device result
// rounds exactly like the host's.
#include <cstdint>
#include <cstring>

#ifdef __CUDACC__
#define CC_COLL_HD __host__ __device__
#else
#define CC_COLL_HD
#endif

namespace cc_coll::detail {

CC_COLL_HD inline std::uint32_t float_bits(float f)
{
#ifdef __CUDA_ARCH__
    return __float_as_uint(f);
#else
    std::uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    return u;
#endif
}

CC_COLL_HD inline float bits_float(std::uint32_t u)
{
#ifdef __CUDA_ARCH__
    return __uint_as_float(u);
#else
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
#endif
}

CC_COLL_HD inline float bf16_to_float(std::uint16_t h) { return bits_float(static_cast<std::uint32_t>(h) << 16); }

CC_COLL_HD inline std::uint16_t float_to_bf16(float f)
{
    const std::uint32_t u = float_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x0040u);  // quiet NaN
    const std::uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
    return static_cast<std::uint16_t>((u + rounding) >> 16);
}

CC_COLL_HD inline float f16_to_float(std::uint16_t h)
{
    const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
    const std::uint32_t exp = (h >> 10) & 0x1fu;
    std::uint32_t mant = h & 0x3ffu;
    if (exp == 0x1f) return bits_float(sign | 0x7f800000u | (mant << 13));  // inf / NaN
    if (exp != 0) return bits_float(sign | ((exp + 112u) << 23) | (mant << 13));
    if (mant == 0) return bits_float(sign);  // signed zero
    // Subnormal: value = mant * 2^-24.
    int e = -1;
    do {
        ++e;
        mant <<= 1;
    } while ((mant & 0x400u) == 0);
    mant &= 0x3ffu;
    return bits_float(sign | (static_cast<std::uint32_t>(112 - e) << 23) | (mant << 13));
}

CC_COLL_HD inline std::uint16_t float_to_f16(float f)
{
    const std::uint32_t u = float_bits(f);
    const std::uint16_t sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
    const std::uint32_t abs = u & 0x7fffffffu;
    if (abs > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));  // NaN
    if (abs >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // rounds to >= 65520: inf
    if (abs >= 0x38800000u) {  // normal half
        const std::uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);
        return static_cast<std::uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
    }
    if (abs < 0x33000000u) return sign;  // below half the smallest subnormal: zero
    // Subnormal half: shift the full mantissa right and round to nearest even.
    const std::uint32_t exp = abs >> 23;
    const std::uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    const unsigned shift = 126u - exp;  // 14..24
    std::uint32_t result = mant >> shift;
    const std::uint32_t rem = mant & ((1u << shift) - 1u);
    const std::uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (result & 1u))) ++result;
    return static_cast<std::uint16_t>(sign | result);
}

}  // namespace cc_coll::detail
