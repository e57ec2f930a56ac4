// Element types: sizes, names, and element-wise helpers every layer shares.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "cc_coll.h"
#include "core/half.hpp"

namespace cc_coll::detail {

inline bool dtype_valid(int dtype) { return dtype >= CC_COLL_F32 && dtype <= CC_COLL_BF16; }
// The 16-bit types, which travel and round differently from F32/F64.
inline bool is_half(cc_coll_dtype_t d) { return d == CC_COLL_F16 || d == CC_COLL_BF16; }
inline bool op_valid(int op) { return op == CC_COLL_SUM || op == CC_COLL_AVG; }

std::size_t dtype_size(cc_coll_dtype_t dtype);  // 0 for an unknown dtype
const char *dtype_name(cc_coll_dtype_t dtype);  // "f32", ...; "?" if unknown

// buf[i] = buf[i] / divisor for count elements, computed in the element type
// (binary32 for F16/BF16, then rounded to nearest even).
void divide_in_place(void *buf, std::size_t count, cc_coll_dtype_t dtype, int divisor);

// inout[i] = inout[i] + in[i] for 16-bit formats, computed in binary32 and
// rounded to nearest even (the rule the F16/BF16 MPI reduction uses).
void sum_f16(const void *in, void *inout, std::size_t count);
void sum_bf16(const void *in, void *inout, std::size_t count);

// The arithmetic ("work") type of a dtype's lossy methods and residuals:
// double for F64, float for F32, F16 and BF16.
template <cc_coll_dtype_t D>
struct WorkType {
    using type = float;
};
template <>
struct WorkType<CC_COLL_F64> {
    using type = double;
};

// The dtype whose elements are the work type W (to move W buffers over MPI).
template <typename W>
constexpr cc_coll_dtype_t dtype_of_work()
{
    return sizeof(W) == sizeof(double) ? CC_COLL_F64 : CC_COLL_F32;
}

// Element i of a dtype buffer as the work type W (host and device code).
template <typename W>
CC_COLL_HD inline W load_element(const void *buf, std::size_t i, cc_coll_dtype_t dtype)
{
    switch (dtype) {
    case CC_COLL_F32: return static_cast<W>(static_cast<const float *>(buf)[i]);
    case CC_COLL_F64: return static_cast<W>(static_cast<const double *>(buf)[i]);
    case CC_COLL_F16: return static_cast<W>(f16_to_float(static_cast<const std::uint16_t *>(buf)[i]));
    case CC_COLL_BF16: return static_cast<W>(bf16_to_float(static_cast<const std::uint16_t *>(buf)[i]));
    }
    return W(0);
}

// Stores v into element i of a dtype buffer (rounded to nearest even).
template <typename W>
CC_COLL_HD inline void store_element(void *buf, std::size_t i, cc_coll_dtype_t dtype, W v)
{
    switch (dtype) {
    case CC_COLL_F32: static_cast<float *>(buf)[i] = static_cast<float>(v); break;
    case CC_COLL_F64: static_cast<double *>(buf)[i] = static_cast<double>(v); break;
    case CC_COLL_F16: static_cast<std::uint16_t *>(buf)[i] = float_to_f16(static_cast<float>(v)); break;
    case CC_COLL_BF16: static_cast<std::uint16_t *>(buf)[i] = float_to_bf16(static_cast<float>(v)); break;
    }
}

// load_element and store_element for a buffer with no alignment beyond a
// byte (the values of a TOPK payload start at 16 + 4k bytes), through
// memcpy, which compiles to a plain load or store. Host code.
template <typename W>
inline W load_element_unaligned(const void *buf, std::size_t i, cc_coll_dtype_t dtype)
{
    const auto *p = static_cast<const unsigned char *>(buf);
    switch (dtype) {
    case CC_COLL_F32: {
        float v;
        std::memcpy(&v, p + i * sizeof v, sizeof v);
        return static_cast<W>(v);
    }
    case CC_COLL_F64: {
        double v;
        std::memcpy(&v, p + i * sizeof v, sizeof v);
        return static_cast<W>(v);
    }
    case CC_COLL_F16:
    case CC_COLL_BF16: {
        std::uint16_t v;
        std::memcpy(&v, p + i * sizeof v, sizeof v);
        return static_cast<W>(dtype == CC_COLL_F16 ? f16_to_float(v) : bf16_to_float(v));
    }
    }
    return W(0);
}

template <typename W>
inline void store_element_unaligned(void *buf, std::size_t i, cc_coll_dtype_t dtype, W v)
{
    auto *p = static_cast<unsigned char *>(buf);
    switch (dtype) {
    case CC_COLL_F32: {
        const float e = static_cast<float>(v);
        std::memcpy(p + i * sizeof e, &e, sizeof e);
        break;
    }
    case CC_COLL_F64: {
        const double e = static_cast<double>(v);
        std::memcpy(p + i * sizeof e, &e, sizeof e);
        break;
    }
    case CC_COLL_F16:
    case CC_COLL_BF16: {
        const std::uint16_t e =
            dtype == CC_COLL_F16 ? float_to_f16(static_cast<float>(v)) : float_to_bf16(static_cast<float>(v));
        std::memcpy(p + i * sizeof e, &e, sizeof e);
        break;
    }
    }
}

// dst[i] = src[i] (add == false) or dst[i] += src[i] (add == true), with src
// a dtype buffer and dst in the work type W.
template <typename W>
void load_as(const void *src, cc_coll_dtype_t dtype, std::size_t n, W *dst, bool add);

// dst (dtype buffer)[i] = src[i], rounded to the dtype.
template <typename W>
void store_as(const W *src, std::size_t n, cc_coll_dtype_t dtype, void *dst);

}  // namespace cc_coll::detail
