// Element types: sizes, names, and element-wise helpers every layer shares.
#pragma once

#include <cstddef>

#include "cc_coll.h"

namespace cc_coll {

inline bool dtype_valid(int dtype) { return dtype >= CC_COLL_F32 && dtype <= CC_COLL_BF16; }
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

}  // namespace cc_coll
