#include "core/dtype.hpp"

#include <cstdint>

#include "core/half.hpp"

namespace cc_coll::detail {

std::size_t dtype_size(cc_coll_dtype_t dtype)
{
    switch (dtype) {
    case CC_COLL_F32: return 4;
    case CC_COLL_F64: return 8;
    case CC_COLL_F16:
    case CC_COLL_BF16: return 2;
    }
    return 0;
}

const char *dtype_name(cc_coll_dtype_t dtype)
{
    switch (dtype) {
    case CC_COLL_F32: return "f32";
    case CC_COLL_F64: return "f64";
    case CC_COLL_F16: return "f16";
    case CC_COLL_BF16: return "bf16";
    }
    return "?";
}

namespace {

template <typename T>
void divide_typed(T *p, std::size_t count, T divisor)
{
    for (std::size_t i = 0; i < count; ++i) p[i] = p[i] / divisor;
}

template <float (*ToFloat)(std::uint16_t), std::uint16_t (*FromFloat)(float)>
void divide_half(std::uint16_t *p, std::size_t count, float divisor)
{
    for (std::size_t i = 0; i < count; ++i) p[i] = FromFloat(ToFloat(p[i]) / divisor);
}

template <float (*ToFloat)(std::uint16_t), std::uint16_t (*FromFloat)(float)>
void sum_half(const void *in, void *inout, std::size_t count)
{
    const auto *a = static_cast<const std::uint16_t *>(in);
    auto *b = static_cast<std::uint16_t *>(inout);
    for (std::size_t i = 0; i < count; ++i) b[i] = FromFloat(ToFloat(a[i]) + ToFloat(b[i]));
}

}  // namespace

void divide_in_place(void *buf, std::size_t count, cc_coll_dtype_t dtype, int divisor)
{
    switch (dtype) {
    case CC_COLL_F32: divide_typed(static_cast<float *>(buf), count, static_cast<float>(divisor)); break;
    case CC_COLL_F64: divide_typed(static_cast<double *>(buf), count, static_cast<double>(divisor)); break;
    case CC_COLL_F16:
        divide_half<f16_to_float, float_to_f16>(static_cast<std::uint16_t *>(buf), count,
                                                static_cast<float>(divisor));
        break;
    case CC_COLL_BF16:
        divide_half<bf16_to_float, float_to_bf16>(static_cast<std::uint16_t *>(buf), count,
                                                  static_cast<float>(divisor));
        break;
    }
}

template <typename W>
void load_as(const void *src, cc_coll_dtype_t dtype, std::size_t n, W *dst, bool add)
{
    if (dtype == CC_COLL_F32 || dtype == CC_COLL_F64) {
        if (dtype == CC_COLL_F32) {
            const float *s = static_cast<const float *>(src);
            if (add) for (std::size_t i = 0; i < n; ++i) dst[i] += static_cast<W>(s[i]);
            else for (std::size_t i = 0; i < n; ++i) dst[i] = static_cast<W>(s[i]);
        } else {
            const double *s = static_cast<const double *>(src);
            if (add) for (std::size_t i = 0; i < n; ++i) dst[i] += static_cast<W>(s[i]);
            else for (std::size_t i = 0; i < n; ++i) dst[i] = static_cast<W>(s[i]);
        }
        return;
    }
    if (add) for (std::size_t i = 0; i < n; ++i) dst[i] += load_element<W>(src, i, dtype);
    else for (std::size_t i = 0; i < n; ++i) dst[i] = load_element<W>(src, i, dtype);
}

template <typename W>
void store_as(const W *src, std::size_t n, cc_coll_dtype_t dtype, void *dst)
{
    switch (dtype) {
    case CC_COLL_F32: {
        float *d = static_cast<float *>(dst);
        for (std::size_t i = 0; i < n; ++i) d[i] = static_cast<float>(src[i]);
        break;
    }
    case CC_COLL_F64: {
        double *d = static_cast<double *>(dst);
        for (std::size_t i = 0; i < n; ++i) d[i] = static_cast<double>(src[i]);
        break;
    }
    default:
        for (std::size_t i = 0; i < n; ++i) store_element<W>(dst, i, dtype, src[i]);
    }
}

template void load_as<float>(const void *, cc_coll_dtype_t, std::size_t, float *, bool);
template void load_as<double>(const void *, cc_coll_dtype_t, std::size_t, double *, bool);
template void store_as<float>(const float *, std::size_t, cc_coll_dtype_t, void *);
template void store_as<double>(const double *, std::size_t, cc_coll_dtype_t, void *);

void sum_f16(const void *in, void *inout, std::size_t count) { sum_half<f16_to_float, float_to_f16>(in, inout, count); }
void sum_bf16(const void *in, void *inout, std::size_t count) { sum_half<bf16_to_float, float_to_bf16>(in, inout, count); }

}  // namespace cc_coll::detail
