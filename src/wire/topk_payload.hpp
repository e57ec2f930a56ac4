// The wire format of one rank's top-k contribution and its decoding.
// Knows nothing of MPI: the allreduce moves these bytes.
//
//   header  (16 bytes): uint64 n, uint32 k, uint32 flags
//   indices (k x uint32, ascending)
//   values  (k x element of the call's dtype: f32, f64, or 16-bit bits)
#pragma once

#include <cstddef>
#include <cstdint>

#include "cc_coll.h"

namespace cc_coll::detail {
namespace topk {

// Header flag: this rank had more non-finite elements than k, so its
// payload cannot carry them all; every rank then falls back to dense.
constexpr std::uint32_t kFlagNonFiniteOverflow = 1u;

struct PayloadHeader {
    std::uint64_t n;
    std::uint32_t k;
    std::uint32_t flags;
};
static_assert(sizeof(PayloadHeader) == 16, "payload header must be 16 bytes");

// Bytes of one payload with k pairs of `dtype` (padded to a multiple of 8).
std::size_t payload_bytes(std::size_t k, cc_coll_dtype_t dtype);

// Writes the payload: x (work type W) at the k ascending indices idx,
// rounded to dtype. Also writes the transmitted values back as W into
// `sent[0..k)` (what the receivers will add), for the error-feedback update.
template <typename W>
void encode(const W *x, std::size_t n, const std::uint32_t *idx, std::size_t k, std::uint32_t flags,
            cc_coll_dtype_t dtype, unsigned char *payload, W *sent);

// Reads a payload's header.
PayloadHeader header_of(const unsigned char *payload);

// kFlagNonFiniteOverflow when x[0..n) holds more NaN/Inf than the k kept at
// idx, else 0. NaN/Inf outrank every finite value in the selection, so one
// can be left out only when every kept element is NaN/Inf: only then are
// they counted.
template <typename W>
std::uint32_t nonfinite_overflow(const W *x, std::size_t n, const std::uint32_t *idx, std::size_t k);

// Checks the `count` payloads of `bytes` bytes each in `gathered` against
// (n, k). Returns false with *bad set to the first payload that disagrees
// (and *bad_header to its header); else true, with *overflow telling whether
// any sender set kFlagNonFiniteOverflow.
bool headers_agree(const unsigned char *gathered, std::size_t count, std::size_t bytes, std::uint64_t n,
                   std::size_t k, std::size_t *bad, PayloadHeader *bad_header, bool *overflow);

// out[idx[j]] += value[j] for every pair of the payload, in the dtype's
// arithmetic (binary32 with rounding to nearest even for F16/BF16).
void scatter_add(const unsigned char *payload, cc_coll_dtype_t dtype, void *out);

}  // namespace topk
}  // namespace cc_coll::detail
