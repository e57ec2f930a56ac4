// Software binary16 / bfloat16 conversions (src/core/half.hpp) and the
// element-wise helpers built on them (src/core/dtype.hpp).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include <gtest/gtest.h>

#include "cc_coll.h"
#include "core/dtype.hpp"
#include "core/half.hpp"

namespace {

using cc_coll::detail::bf16_to_float;
using cc_coll::detail::f16_to_float;
using cc_coll::detail::float_to_bf16;
using cc_coll::detail::float_to_f16;

bool f16_is_nan(std::uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x03ffu) != 0; }
bool bf16_is_nan(std::uint16_t h) { return (h & 0x7f80u) == 0x7f80u && (h & 0x007fu) != 0; }

// ---------------------------------------------------------------- exhaustive round trips

TEST(Half, F16RoundTripsEveryPattern)
{
    int nans = 0;
    for (std::uint32_t i = 0; i <= 0xffffu; ++i) {
        const auto h = static_cast<std::uint16_t>(i);
        const float f = f16_to_float(h);
        const std::uint16_t back = float_to_f16(f);
        if (f16_is_nan(h)) {
            ++nans;
            ASSERT_TRUE(std::isnan(f)) << std::hex << "0x" << i;
            ASSERT_TRUE(f16_is_nan(back)) << std::hex << "0x" << i << " -> 0x" << back;
            ASSERT_EQ(back & 0x8000u, h & 0x8000u) << std::hex << "NaN sign lost for 0x" << i;
        } else {
            ASSERT_FALSE(std::isnan(f)) << std::hex << "0x" << i;
            ASSERT_EQ(back, h) << std::hex << "0x" << i << " -> " << f << " -> 0x" << back;
        }
    }
    EXPECT_EQ(nans, 2 * 1023);
}

TEST(Half, Bf16RoundTripsEveryPattern)
{
    int nans = 0;
    for (std::uint32_t i = 0; i <= 0xffffu; ++i) {
        const auto h = static_cast<std::uint16_t>(i);
        const float f = bf16_to_float(h);
        const std::uint16_t back = float_to_bf16(f);
        if (bf16_is_nan(h)) {
            ++nans;
            ASSERT_TRUE(std::isnan(f)) << std::hex << "0x" << i;
            ASSERT_TRUE(bf16_is_nan(back)) << std::hex << "0x" << i << " -> 0x" << back;
            ASSERT_EQ(back & 0x8000u, h & 0x8000u) << std::hex << "NaN sign lost for 0x" << i;
        } else {
            ASSERT_FALSE(std::isnan(f)) << std::hex << "0x" << i;
            ASSERT_EQ(back, h) << std::hex << "0x" << i << " -> " << f << " -> 0x" << back;
        }
    }
    EXPECT_EQ(nans, 2 * 127);
}

// f16_to_float must give the exact value of every finite pattern:
// (-1)^s * 2^(e-15) * (1 + m/1024), or m * 2^-24 for subnormals.
TEST(Half, F16ToFloatIsExact)
{
    for (std::uint32_t i = 0; i <= 0xffffu; ++i) {
        const auto h = static_cast<std::uint16_t>(i);
        const int e = (h >> 10) & 0x1f;
        const int m = h & 0x3ff;
        if (e == 0x1f) continue;
        const double mag = e == 0 ? std::ldexp(static_cast<double>(m), -24) : std::ldexp(1.0 + m / 1024.0, e - 15);
        const double expected = (h & 0x8000u) ? -mag : mag;
        ASSERT_EQ(static_cast<double>(f16_to_float(h)), expected) << std::hex << "0x" << i;
        ASSERT_EQ(std::signbit(f16_to_float(h)), (h & 0x8000u) != 0) << std::hex << "0x" << i;
    }
    EXPECT_TRUE(std::isinf(f16_to_float(0x7c00)));
    EXPECT_GT(f16_to_float(0x7c00), 0.0f);
    EXPECT_TRUE(std::isinf(f16_to_float(0xfc00)));
    EXPECT_LT(f16_to_float(0xfc00), 0.0f);
}

// ---------------------------------------------------------------- hand-checked rounding points

TEST(Half, FloatToF16HandCheckedPoints)
{
    EXPECT_EQ(float_to_f16(0.0f), 0x0000);
    EXPECT_EQ(float_to_f16(-0.0f), 0x8000);
    EXPECT_EQ(float_to_f16(1.0f), 0x3c00);
    EXPECT_EQ(float_to_f16(-2.0f), 0xc000);
    EXPECT_EQ(float_to_f16(65504.0f), 0x7bff);   // largest finite half
    EXPECT_EQ(float_to_f16(-65504.0f), 0xfbff);
    EXPECT_EQ(float_to_f16(65519.0f), 0x7bff);   // below the midpoint to infinity
    EXPECT_EQ(float_to_f16(65520.0f), 0x7c00);   // the midpoint ties to even: infinity
    EXPECT_EQ(float_to_f16(-65520.0f), 0xfc00);
    EXPECT_EQ(float_to_f16(1.0e6f), 0x7c00);
    EXPECT_EQ(float_to_f16(std::numeric_limits<float>::infinity()), 0x7c00);
    EXPECT_EQ(float_to_f16(-std::numeric_limits<float>::infinity()), 0xfc00);
    EXPECT_EQ(float_to_f16(std::numeric_limits<float>::max()), 0x7c00);

    EXPECT_EQ(float_to_f16(std::ldexp(1.0f, -14)), 0x0400);         // smallest normal
    EXPECT_EQ(float_to_f16(std::ldexp(1.0f, -24)), 0x0001);         // smallest subnormal
    EXPECT_EQ(float_to_f16(-std::ldexp(1.0f, -24)), 0x8001);
    EXPECT_EQ(float_to_f16(std::ldexp(1.0f, -25)), 0x0000);         // tie, to even: zero
    EXPECT_EQ(float_to_f16(-std::ldexp(1.0f, -25)), 0x8000);
    EXPECT_EQ(float_to_f16(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);  // just above the tie
    EXPECT_EQ(float_to_f16(3.0f * std::ldexp(1.0f, -25)), 0x0002);  // 1.5 * 2^-24 ties to 2 * 2^-24
    EXPECT_EQ(float_to_f16(5.0f * std::ldexp(1.0f, -25)), 0x0002);  // 2.5 * 2^-24 ties to 2 * 2^-24
    EXPECT_EQ(float_to_f16(std::ldexp(1.0f, -26)), 0x0000);
    EXPECT_EQ(float_to_f16(std::numeric_limits<float>::denorm_min()), 0x0000);
    // Largest subnormal rounding up into the smallest normal.
    EXPECT_EQ(float_to_f16(std::ldexp(1023.5f, -24)), 0x0400);
    EXPECT_EQ(float_to_f16(std::ldexp(1023.0f, -24)), 0x03ff);

    // Normal range: 1 + 2^-11 is halfway between 1 and 1 + 2^-10.
    EXPECT_EQ(float_to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);                          // tie to even
    EXPECT_EQ(float_to_f16(1.0f + 3.0f * std::ldexp(1.0f, -11)), 0x3c02);                   // tie to even
    EXPECT_EQ(float_to_f16(std::nextafter(1.0f + std::ldexp(1.0f, -11), 2.0f)), 0x3c01);    // above the tie
    EXPECT_EQ(float_to_f16(2047.0f / 1024.0f + std::ldexp(1.0f, -11)), 0x4000);             // carries into exponent
    EXPECT_EQ(float_to_f16(0.1f), 0x2e66);
    EXPECT_EQ(float_to_f16(1.0f / 3.0f), 0x3555);

    EXPECT_TRUE(f16_is_nan(float_to_f16(std::numeric_limits<float>::quiet_NaN())));
    EXPECT_TRUE(f16_is_nan(float_to_f16(-std::numeric_limits<float>::quiet_NaN())));
    // A NaN whose payload lives only in the low float bits must stay NaN.
    EXPECT_TRUE(f16_is_nan(float_to_f16(cc_coll::detail::bits_float(0x7f800001u))));
}

TEST(Half, FloatToBf16HandCheckedPoints)
{
    EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
    EXPECT_EQ(float_to_bf16(-1.0f), 0xbf80);
    EXPECT_EQ(float_to_bf16(-0.0f), 0x8000);
    EXPECT_EQ(float_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);           // tie to even
    EXPECT_EQ(float_to_bf16(1.0f + 3.0f * std::ldexp(1.0f, -8)), 0x3f82);    // tie to even
    EXPECT_EQ(float_to_bf16(std::nextafter(1.0f + std::ldexp(1.0f, -8), 2.0f)), 0x3f81);
    EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::max()), 0x7f80);     // rounds to infinity
    EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::infinity()), 0x7f80);
    EXPECT_EQ(float_to_bf16(-std::numeric_limits<float>::infinity()), 0xff80);
    EXPECT_EQ(float_to_bf16(cc_coll::detail::bits_float(0x7f7f0000u)), 0x7f7f);     // largest finite bf16
    EXPECT_TRUE(bf16_is_nan(float_to_bf16(std::numeric_limits<float>::quiet_NaN())));
    EXPECT_TRUE(bf16_is_nan(float_to_bf16(cc_coll::detail::bits_float(0x7f800001u))));  // payload below bit 16
    EXPECT_TRUE(bf16_is_nan(float_to_bf16(cc_coll::detail::bits_float(0xff800001u))));
}

// ---------------------------------------------------------------- divide_in_place

TEST(Dtype, DivideInPlaceF32AndF64)
{
    float f[] = {2.0f, -4.0f, 6.0f, 1.0f};
    cc_coll::detail::divide_in_place(f, 3, CC_COLL_F32, 2);
    EXPECT_EQ(f[0], 1.0f);
    EXPECT_EQ(f[1], -2.0f);
    EXPECT_EQ(f[2], 3.0f);
    EXPECT_EQ(f[3], 1.0f);  // beyond count: untouched

    float third[] = {1.0f};
    cc_coll::detail::divide_in_place(third, 1, CC_COLL_F32, 3);
    EXPECT_EQ(third[0], 1.0f / 3.0f);  // computed in binary32

    double d[] = {1.0, 9.0, -7.5};
    cc_coll::detail::divide_in_place(d, 3, CC_COLL_F64, 3);
    EXPECT_EQ(d[0], 1.0 / 3.0);  // computed in binary64, not binary32
    EXPECT_NE(d[0], static_cast<double>(1.0f / 3.0f));
    EXPECT_EQ(d[1], 3.0);
    EXPECT_EQ(d[2], -2.5);

    cc_coll::detail::divide_in_place(nullptr, 0, CC_COLL_F32, 4);  // count 0: nothing touched
}

TEST(Dtype, DivideInPlaceF16AndBf16)
{
    std::uint16_t h[] = {float_to_f16(3.0f), float_to_f16(1.0f), 0xfc00 /* -inf */, 0x7bff, 0x3c00};
    cc_coll::detail::divide_in_place(h, 4, CC_COLL_F16, 3);
    EXPECT_EQ(h[0], 0x3c00);  // 1.0
    EXPECT_EQ(h[1], 0x3555);  // 1/3 rounded to nearest
    EXPECT_EQ(h[2], 0xfc00);  // -inf / 3
    EXPECT_EQ(h[3], float_to_f16(65504.0f / 3.0f));
    EXPECT_EQ(h[4], 0x3c00);  // beyond count

    std::uint16_t b[] = {0x4040 /* 3.0 */, 0x3f80 /* 1.0 */, 0x0001};
    cc_coll::detail::divide_in_place(b, 3, CC_COLL_BF16, 2);
    EXPECT_EQ(b[0], 0x3fc0);  // 1.5
    EXPECT_EQ(b[1], 0x3f00);  // 0.5
    EXPECT_EQ(b[2], float_to_bf16(bf16_to_float(0x0001) / 2.0f));

    std::uint16_t odd[] = {0x3c01};  // (1 + 2^-10) / 2 is exact in f16
    cc_coll::detail::divide_in_place(odd, 1, CC_COLL_F16, 2);
    EXPECT_EQ(odd[0], 0x3801);
}

// ---------------------------------------------------------------- sum_f16 / sum_bf16

TEST(Dtype, SumF16RoundsToNearestEven)
{
    const std::uint16_t in[] = {0x3c00, 0x3c01, 0x3c00, 0x7bff, 0x0001, 0x3c00, 0x7c00, 0x3c00};
    std::uint16_t io[] = {0x1000, 0x1000, 0xbc00, 0x7bff, 0x0001, 0x7e00, 0xfc00, 0x4000, 0x1234};
    //                    +2^-11  +2^-11  -1      max+max  sub+sub +NaN    inf-inf  1+2    (beyond count)
    cc_coll::detail::sum_f16(in, io, 8);
    EXPECT_EQ(io[0], 0x3c00);  // 1 + 2^-11: tie, stays at even 1.0
    EXPECT_EQ(io[1], 0x3c02);  // (1 + 2^-10) + 2^-11: tie, rounds up to even
    EXPECT_EQ(io[2], 0x0000);  // 1 - 1 = +0
    EXPECT_EQ(io[3], 0x7c00);  // overflow to +inf
    EXPECT_EQ(io[4], 0x0002);  // subnormals add exactly
    EXPECT_TRUE(f16_is_nan(io[5]));
    EXPECT_TRUE(f16_is_nan(io[6]));
    EXPECT_EQ(io[7], 0x4200);  // 3.0
    EXPECT_EQ(io[8], 0x1234);
}

TEST(Dtype, SumBf16RoundsToNearestEven)
{
    const std::uint16_t in[] = {0x3f80, 0x3f81, 0x3f80, 0x7f7f, 0x4000};
    std::uint16_t io[] = {0x3b80, 0x3b80, 0xbf80, 0x7f7f, 0x3f80, 0x5555};
    //                    +2^-8   +2^-8   -1      max+max  2+1   (beyond count)
    cc_coll::detail::sum_bf16(in, io, 5);
    EXPECT_EQ(io[0], 0x3f80);  // tie, stays at even 1.0
    EXPECT_EQ(io[1], 0x3f82);  // tie, rounds up to even
    EXPECT_EQ(io[2], 0x0000);
    EXPECT_EQ(io[3], 0x7f80);  // overflow to +inf
    EXPECT_EQ(io[4], 0x4040);  // 3.0
    EXPECT_EQ(io[5], 0x5555);
}

TEST(Dtype, SizesAndNames)
{
    EXPECT_EQ(cc_coll::detail::dtype_size(CC_COLL_F32), 4u);
    EXPECT_EQ(cc_coll::detail::dtype_size(CC_COLL_F64), 8u);
    EXPECT_EQ(cc_coll::detail::dtype_size(CC_COLL_F16), 2u);
    EXPECT_EQ(cc_coll::detail::dtype_size(CC_COLL_BF16), 2u);
    EXPECT_EQ(cc_coll::detail::dtype_size(static_cast<cc_coll_dtype_t>(9)), 0u);
    EXPECT_STREQ(cc_coll::detail::dtype_name(CC_COLL_F16), "f16");
    EXPECT_STREQ(cc_coll::detail::dtype_name(CC_COLL_BF16), "bf16");
    EXPECT_STREQ(cc_coll::detail::dtype_name(static_cast<cc_coll_dtype_t>(9)), "?");
    EXPECT_TRUE(cc_coll::detail::dtype_valid(CC_COLL_F32));
    EXPECT_TRUE(cc_coll::detail::dtype_valid(CC_COLL_BF16));
    EXPECT_FALSE(cc_coll::detail::dtype_valid(-1));
    EXPECT_FALSE(cc_coll::detail::dtype_valid(4));
    EXPECT_TRUE(cc_coll::detail::op_valid(CC_COLL_SUM));
    EXPECT_TRUE(cc_coll::detail::op_valid(CC_COLL_AVG));
    EXPECT_FALSE(cc_coll::detail::op_valid(2));
    EXPECT_FALSE(cc_coll::detail::op_valid(-1));
}

}  // namespace
