// The wire format of one rank's top-k contribution and its decoding.
// Knows nothing of MPI: the allreduce moves these bytes.
//
//   header  (16 bytes): uint64 n, uint32 k, uint32 flags
//   indices (k x uint32, ascending)
//   values  (k x element of the call's dtype: f32, f64, or 16-bit bits)
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

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
// threads > 1 splits the pairs among that many threads (core/parallel.hpp).
template <typename W>
void encode(const W *x, std::size_t n, const std::uint32_t *idx, std::size_t k, std::uint32_t flags,
            cc_coll_dtype_t dtype, unsigned char *payload, W *sent, int threads = 1);

// Reads a payload's header.
PayloadHeader header_of(const unsigned char *payload);

// kFlagNonFiniteOverflow when x[0..n) holds more NaN/Inf than the k kept at
// idx, else 0. NaN/Inf outrank every finite value in the selection, so one
// can be left out only when every kept element is NaN/Inf: only then are
// they counted.
template <typename W>
std::uint32_t nonfinite_overflow(const W *x, std::size_t n, const std::uint32_t *idx, std::size_t k);

// --- The receiver's checks (docs/wire.md, "What a TOPK receiver checks") ---
//
// A collective's receiver holds `count` payloads (one per sending rank) of
// the size its own call gives, and checks every field it is going to use
// against its own call before the scatter-add writes a byte. The checks
// read the header and the indices only (values are data: any bit pattern,
// NaN and Inf included, is added as it is; the padding is never read).

// The field a check found wrong.
enum class Field : std::uint8_t {
    None,
    N,           // header n differs from the receiver's element count
    K,           // header k differs from the receiver's k
    Flags,       // a flag bit other than kFlagNonFiniteOverflow is set
    IndexRange,  // an index is not below n
    IndexOrder,  // an index does not exceed the one before (repeated or descending)
};

// The first fault of a set of payloads, in sender order.
struct Fault {
    Field field = Field::None;
    std::size_t sender = 0;     // which payload: the sending rank in a collective
    std::size_t position = 0;   // IndexRange, IndexOrder: the position j of the index
    std::uint64_t found = 0;    // the value in the payload (n, k, flags, or the index)
    std::uint64_t expected = 0; // N: the receiver's n; K: its k; Flags: the defined bits;
                                // IndexRange: n; IndexOrder: the index before
    std::uint64_t header_n = 0; // N, K: the header's n and k
    std::uint64_t header_k = 0;
    std::uint64_t own_n = 0;    // the receiver's n and k the payloads were checked against
    std::uint64_t own_k = 0;
};

// What the receiver does with a checked set of payloads.
enum class Verdict {
    Decode,  // every header and every index passed: scatter-add them
    Dense,   // every header passed and a sender flagged overflow: dense fallback
             // (the indices are not used, so not read)
    Reject,  // *fault says which sender's field is wrong: CC_COLL_ERR_MISMATCH
};

// Bytes at the start of a payload that the checks read: the header and the
// k indices (what a device receiver copies to the host for them).
inline std::size_t checked_bytes(std::size_t k) { return sizeof(PayloadHeader) + k * sizeof(std::uint32_t); }

// Checks one header against the receiver's (n, k): n, k, then flags.
bool check_header(const PayloadHeader &h, std::uint64_t n, std::size_t k, Fault *fault);

// Checks the k indices at `indices` (any alignment): each below n and above
// the one before. On failure fault->field, position, found and expected.
bool check_indices(const unsigned char *indices, std::uint64_t n, std::size_t k, Fault *fault);

// The receiver's whole check of `count` payloads whose first
// checked_bytes(k) bytes lie `stride` bytes apart at `records` (in place in
// the gathered buffer, or a host copy of just those bytes): every header in
// sender order (n, k, flags); then, unless a sender flagged overflow, every
// payload's indices in sender order. A pure function of the bytes, so ranks
// that hold the same payloads reach the same verdict and the same fault.
Verdict check_payloads(const unsigned char *records, std::size_t count, std::size_t stride, std::uint64_t n,
                       std::size_t k, Fault *fault);

// The fault as text naming the sender's rank, the field and both values;
// `count_name` is the receiver's argument that n stands for ("count",
// "recvcount"). Empty for Field::None.
std::string describe(const Fault &fault, const char *count_name);

// out[idx[j]] += value[j] for every pair of the payload, in the dtype's
// arithmetic (binary32 with rounding to nearest even for F16/BF16). Trusts
// the payload: call it only on one that passed check_payloads (or
// check_header and check_indices) against out's n elements.
void scatter_add(const unsigned char *payload, cc_coll_dtype_t dtype, void *out);
// The same restricted to the indices in [lo, hi) (payload indices are
// ascending, as check_payloads verified): disjoint ranges may run on
// different threads, with the same sums as one scatter_add.
void scatter_add_range(const unsigned char *payload, cc_coll_dtype_t dtype, void *out, std::uint64_t lo,
                       std::uint64_t hi);

}  // namespace topk
}  // namespace cc_coll::detail
