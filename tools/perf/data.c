/* The benchmark's data: element types and input values. */
#include "data.h"

#include <math.h>
#include <stdint.h>
#include <string.h>


/* binary16 / bfloat16 <-> binary32, round to nearest even (as libcc_coll). */
static uint32_t float_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float bits_float(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static float bf16_to_float(uint16_t h) { return bits_float((uint32_t)h << 16); }

static uint16_t float_to_bf16(float f)
{
    const uint32_t u = float_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u); /* quiet NaN */
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

static float f16_to_float(uint16_t h)
{
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    if (exp == 0x1f) return bits_float(sign | 0x7f800000u | (mant << 13));
    if (exp != 0) return bits_float(sign | ((exp + 112u) << 23) | (mant << 13));
    if (mant == 0) return bits_float(sign);
    int e = -1; /* subnormal: normalise the mantissa */
    do {
        ++e;
        mant <<= 1;
    } while ((mant & 0x400u) == 0);
    return bits_float(sign | ((uint32_t)(112 - e) << 23) | ((mant & 0x3ffu) << 13));
}

static uint16_t float_to_f16(float f)
{
    const uint32_t u = float_bits(f);
    const uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    const uint32_t abs = u & 0x7fffffffu;
    if (abs > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));
    if (abs >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);
    if (abs >= 0x38800000u) return (uint16_t)(sign | ((abs + 0xfffu + ((abs >> 13) & 1u) - 0x38000000u) >> 13));
    if (abs < 0x33000000u) return sign;
    const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    const unsigned shift = 126u - (abs >> 23);
    uint32_t result = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1u), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (result & 1u))) ++result;
    return (uint16_t)(sign | result);
}

double element_load(const void *buf, size_t i, cc_coll_dtype_t dtype)
{
    switch (dtype) {
    case CC_COLL_F32: return ((const float *)buf)[i];
    case CC_COLL_F64: return ((const double *)buf)[i];
    case CC_COLL_F16: return f16_to_float(((const uint16_t *)buf)[i]);
    case CC_COLL_BF16: return bf16_to_float(((const uint16_t *)buf)[i]);
    }
    return NAN;
}

void element_store(void *buf, size_t i, cc_coll_dtype_t dtype, double v)
{
    switch (dtype) {
    case CC_COLL_F32: ((float *)buf)[i] = (float)v; break;
    case CC_COLL_F64: ((double *)buf)[i] = v; break;
    case CC_COLL_F16: ((uint16_t *)buf)[i] = float_to_f16((float)v); break;
    case CC_COLL_BF16: ((uint16_t *)buf)[i] = float_to_bf16((float)v); break;
    }
}

/* AVG after the sum, as libcc_coll documents it: divide in the element type
 * (binary32 for the 16-bit types, then round). */
void divide_by_ranks(void *buf, size_t n, cc_coll_dtype_t dtype, int ranks)
{
    for (size_t i = 0; i < n; ++i) {
        switch (dtype) {
        case CC_COLL_F32: ((float *)buf)[i] /= (float)ranks; break;
        case CC_COLL_F64: ((double *)buf)[i] /= (double)ranks; break;
        case CC_COLL_F16: ((uint16_t *)buf)[i] = float_to_f16(f16_to_float(((uint16_t *)buf)[i]) / (float)ranks); break;
        case CC_COLL_BF16:
            ((uint16_t *)buf)[i] = float_to_bf16(bf16_to_float(((uint16_t *)buf)[i]) / (float)ranks);
            break;
        }
    }
}

/* MPI has no 16-bit float types: sum pairs in binary32 and round. */
void sum_f16(void *in, void *inout, int *len, MPI_Datatype *type)
{
    (void)type;
    const uint16_t *a = in;
    uint16_t *b = inout;
    for (int i = 0; i < *len; ++i) b[i] = float_to_f16(f16_to_float(a[i]) + f16_to_float(b[i]));
}

void sum_bf16(void *in, void *inout, int *len, MPI_Datatype *type)
{
    (void)type;
    const uint16_t *a = in;
    uint16_t *b = inout;
    for (int i = 0; i < *len; ++i) b[i] = float_to_bf16(bf16_to_float(a[i]) + bf16_to_float(b[i]));
}

/* The verifiable input of nccl-tests: small integers, exact in every dtype. */
int input_value(int rank, size_t i) { return (int)(((size_t)rank + i) % 7) - 3; }

/* Gradient-like input for lossy methods (-r normal): approximately standard
 * normal (sum of four uniforms, centred and scaled), deterministic per rank
 * and element, every magnitude distinct in practice. */
double normal_value(int rank, size_t i)
{
    uint64_t s = ((uint64_t)i * 0x9e3779b97f4a7c15ull) ^ ((uint64_t)(rank + 1) * 0xd1b54a32d192ed03ull);
    double acc = 0.0;
    for (int j = 0; j < 4; ++j) {
        s ^= s >> 30;
        s *= 0xbf58476d1ce4e5b9ull;
        s ^= s >> 27;
        s *= 0x94d049bb133111ebull;
        s ^= s >> 31;
        acc += (double)(s >> 11) / 9007199254740992.0;
    }
    return (acc - 2.0) * 1.7320508075688772;
}
