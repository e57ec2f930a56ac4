// The wire format of one rank's top-k contribution and its decoding.
// Knows nothing of MPI: the allreduce moves these bytes.
//
//   header  (16 bytes): uint64 n, uint32 k, uint32 flags
//   indices (k x uint32, ascending)
//   values  (k x element of the call's dtype: f32, f64, or 16-bit bits)
//
// or, when the flags name a coded format (docs/wire.md, "The coded TOPK
// payload"): header, a 16-byte section (uint32 index bytes, uint32 first
// index, f64 value step), the delta-coded indices, the values (the dtype,
// or b-bit signed levels times the step), zero padding to 8 bytes.
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

// Flag bits 1-2: the values' format (0: the dtype's element; 1, 2, 3:
// signed levels of 16, 8, 4 bits times a step; value_code below).
constexpr std::uint32_t kValueShift = 1, kValueMask = 3u << kValueShift;
// Flag bits 3-4: the indices' format (0 with bits 1-2 also 0: the uncoded
// payload's uint32 array; kIndexPacked: gaps bit-packed at one width;
// kIndexRice: gaps Rice-coded). Bits 8-15: the width or the Rice parameter.
constexpr std::uint32_t kIndexShift = 3, kIndexMask = 3u << kIndexShift;
constexpr std::uint32_t kParamShift = 8, kParamMask = 0xffu << kParamShift;
constexpr std::uint32_t kIndexPacked = 1, kIndexRice = 2;

// What a rank's settings ask for (CC_COLL_TOPK_VALUE_BITS,
// CC_COLL_TOPK_INDEX_CODING): value_bits 0 (the dtype's element), 16, 8 or
// 4; coded: the coded layout (delta-coded indices). Default: today's layout.
struct Format {
    unsigned value_bits = 0;
    bool coded = false;
};
// The flag bits 1-2 for value_bits (0 for the dtype's element).
std::uint32_t value_code(unsigned value_bits);
// The levels of b-bit values: 2^(b-1) - 1 (symmetric: -L .. L).
inline std::int32_t value_levels(unsigned bits) { return (std::int32_t{1} << (bits - 1)) - 1; }
// A level times the step, as every receiver adds it (and the sender keeps
// it for the residual): rounded once from binary64 to W.
template <typename W>
inline W level_value(std::int32_t q, double step)
{
    return static_cast<W>(static_cast<double>(q) * step);
}

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

// The coded layout: the largest payload of k pairs (indices packed at
// width 32), padded to 8 bytes; what a sender allocates.
std::size_t coded_capacity(std::size_t k, cc_coll_dtype_t dtype, const Format &fmt);
// Writes the coded payload of the k pairs (indices ascending, each < n)
// into payload (coded_capacity bytes, zeroed by the caller): values rounded
// to fmt.value_bits levels of one step = max |value| / levels (or to the
// dtype), the index code chosen by size (packed or Rice). Writes the values
// the receivers will add to sent[0..k). A kept NaN/Inf cannot be a level:
// with value_bits set, it sets kFlagNonFiniteOverflow (the dense fallback),
// as do `flags`. Returns the payload's bytes (a multiple of 8).
template <typename W>
std::size_t encode_coded(const W *x, std::size_t n, const std::uint32_t *idx, std::size_t k, std::uint32_t flags,
                         cc_coll_dtype_t dtype, const Format &fmt, unsigned char *payload, W *sent);
// The coded section after the header.
struct CodedSection {
    std::uint32_t index_bytes;  // bytes of the index stream
    std::uint32_t first;        // the first index (0 when k is 0)
    double step;                // value step (0 with the dtype's element values)
};
static_assert(sizeof(CodedSection) == 16, "coded section must be 16 bytes");
// Whether a header's flags name the coded layout.
inline bool is_coded(std::uint32_t flags) { return (flags & (kValueMask | kIndexMask)) != 0; }

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
    Format,      // the flags name another value or index format than the receiver's settings
    IndexBytes,  // a coded payload's index stream has another length than its codes take
                 // (truncated or over-long), or the payload exceeds the record
};

// The first fault of a set of payloads, in sender order.
struct Fault {
    Field field = Field::None;
    std::size_t sender = 0;     // which payload: the sending rank in a collective
    std::size_t position = 0;   // IndexRange, IndexOrder: the position j of the index
    std::uint64_t found = 0;    // the value in the payload (n, k, flags, or the index)
    std::uint64_t expected = 0; // N: the receiver's n; K: its k; Flags: the defined bits;
                                // IndexRange: n; IndexOrder: the index before;
                                // Format: the value bits 1-2 this receiver expects;
                                // IndexBytes: the bytes the codes take (or the record)
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
// With fmt: also the format bits against the receiver's settings (and the
// coded parameter's range).
bool check_header(const PayloadHeader &h, std::uint64_t n, std::size_t k, Fault *fault, const Format &fmt = {});

// Checks the k indices at `indices` (any alignment): each below n and above
// the one before. On failure fault->field, position, found and expected.
bool check_indices(const unsigned char *indices, std::uint64_t n, std::size_t k, Fault *fault);

// The receiver's whole check of `count` payloads whose first
// checked_bytes(k) bytes lie `stride` bytes apart at `records` (in place in
// the gathered buffer, or a host copy of just those bytes): every header in
// sender order (n, k, flags); then, unless a sender flagged overflow, every
// payload's indices in sender order. A pure function of the bytes, so ranks
// that hold the same payloads reach the same verdict and the same fault.
// With a coded fmt, stride is the record's size and the check decodes each
// payload's index stream (check_coded; dtype sizes element values).
Verdict check_payloads(const unsigned char *records, std::size_t count, std::size_t stride, std::uint64_t n,
                       std::size_t k, Fault *fault, const Format &fmt = {}, cc_coll_dtype_t dtype = CC_COLL_F32);

// Checks one coded payload of at most `record` bytes whose header passed
// check_header: the index stream's length, that the payload fits the
// record (header, section, stream and the values of `dtype` or levels), and
// every decoded index below n (ascending by construction: gaps minus 1).
// On failure the fault is IndexRange (position, found index) or IndexBytes.
bool check_coded(const unsigned char *payload, std::size_t record, std::uint64_t n, std::size_t k,
                 cc_coll_dtype_t dtype, Fault *fault);

// The k pairs of a payload that passed the receiver's checks (coded or
// not): idx[j] its indices, val[j] its values as receivers add them, in W
// (the dtype's element, or the level times the step). Trusts the payload
// as scatter_add does.
template <typename W>
void decode_pairs(const unsigned char *payload, cc_coll_dtype_t dtype, std::uint32_t *idx, W *val);

// The fault as text naming the sender's rank, the field and both values;
// `count_name` is the receiver's argument that n stands for ("count",
// "recvcount"). Empty for Field::None.
std::string describe(const Fault &fault, const char *count_name);

// out[idx[j]] += value[j] for every pair of the payload, in the dtype's
// arithmetic (binary32 with rounding to nearest even for F16/BF16). Trusts
// the payload: call it only on one that passed check_payloads (or
// check_header and check_indices) against out's n elements.
// Coded payloads too (checked by check_payloads with their format).
void scatter_add(const unsigned char *payload, cc_coll_dtype_t dtype, void *out);
// The same restricted to the indices in [lo, hi) (payload indices are
// ascending, as check_payloads verified): disjoint ranges may run on
// different threads, with the same sums as one scatter_add.
void scatter_add_range(const unsigned char *payload, cc_coll_dtype_t dtype, void *out, std::uint64_t lo,
                       std::uint64_t hi);

}  // namespace topk
}  // namespace cc_coll::detail
