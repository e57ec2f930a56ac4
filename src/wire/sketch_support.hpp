// The SKETCH support message (docs/wire.md): what each rank contributes to
// the bitwise-OR allreduce that gives every rank the global support.
//
//   bytes [0, bitmap_bytes(n))   bit (i % 8) of byte i / 8 set when this
//                                rank keeps element i
//   byte  flag_offset(n)         1 when this rank's g' holds NaN or Inf, else 0
//
// message_bytes(n) = bitmap_bytes(n) + 1 travel. Buffers are allocated with
// buffer_bytes(n), rounded up to 4 bytes so that device kernels may set bits
// with 32-bit atomics; the padding is zero and never sent. The reduce-scatter
// form lays out one such message per shard, shard by shard.
//
// The receiver's checks (docs/wire.md, "What a SKETCH receiver checks"):
// every rank holds the OR of the ranks' messages, so a malformed one can be
// seen but not traced to its sender. Any bit pattern of the first n bits is
// a valid support; the check_tail() below covers the rest of the message.
// The reduce-scatter also sends the rows per table of each rank's shard
// (MPI_MAX of one uint64), which check_rows() covers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "compressors/sketch/count_sketch_hash.hpp"

namespace cc_coll::detail::sketch_support {

inline std::size_t bitmap_bytes(std::size_t n) { return (n + 7) / 8; }
inline std::size_t flag_offset(std::size_t n) { return bitmap_bytes(n); }
inline std::size_t message_bytes(std::size_t n) { return bitmap_bytes(n) + 1; }
inline std::size_t buffer_bytes(std::size_t n) { return (message_bytes(n) + 3) / 4 * 4; }

// The field a check found wrong.
enum class Field : std::uint8_t {
    None,
    PaddingBits,  // a bit at or beyond n of the bitmap's last byte is set
    Flag,         // the flag byte is neither 0 nor 1
    Rows,         // the rows per table is outside [1, kMaxRowsPerTable]
    // The coded message (check_coded), traced to its sender:
    CodedN,          // header n differs from the receiver's count
    CodedCount,      // more indices than n
    CodedFlags,      // a flag bit outside bit 0, the gap code (1 or 2) and its parameter's range
    CodedBytes,      // the index stream's length is not what its codes take, or it overruns the record
    CodedIndex,      // an index not below n
};

struct Fault {
    Field field = Field::None;
    std::uint64_t found = 0;     // PaddingBits: the last bitmap byte; Flag: the flag byte; Rows: m;
                                 // Coded*: n, the count, the flags, the stream's bytes, the index
    std::uint64_t expected = 0;  // PaddingBits: the mask of its bits below n; Flag: 1; Rows: the largest m;
                                 // CodedN, CodedCount, CodedIndex: n; CodedBytes: what the codes take
    std::size_t n = 0;           // the elements the message covers (PaddingBits, Flag)
    std::size_t sender = 0;      // Coded*: the sending rank
    std::size_t position = 0;    // CodedIndex: the index's position
};

// What check_tail reads: kTailBytes bytes from tail_offset(n), the bitmap's
// last byte and the flag byte (n >= 1; a call of n = 0 sends nothing).
constexpr std::size_t kTailBytes = 2;
inline std::size_t tail_offset(std::size_t n) { return flag_offset(n) - 1; }

// The OR-ed message's tail: no bit at or beyond n set in the bitmap's last
// byte (no rank sets one), a flag byte of 0 or 1.
bool check_tail(const unsigned char *tail, std::size_t n, Fault *fault);

// What a reduce-scatter rank whose shard's support failed check_tail
// contributes to the MPI_MAX of the rows, so that every rank fails
// check_rows and returns with it instead of waiting for the next message.
constexpr std::uint64_t kRowsMalformed = ~std::uint64_t{0};

// The rows per table every rank received: 1 .. sketch::kMaxRowsPerTable
// (what rows_per_table can give).
bool check_rows(std::uint64_t m, Fault *fault);

// --- The coded support message (docs/wire.md, "The coded SKETCH support") ---
//
// Instead of the bitmap, each rank may send its kept indices gap-coded
// (wire/gap_code.hpp), and every rank ORs the P messages it gathers into the
// bitmap above:
//
//   uint64 n, uint32 count, uint32 flags (bit 0: NaN/Inf in g'; bits 3-4
//   the gap code, 1 packed or 2 Rice; bits 8-15 its width or parameter),
//   uint32 I (the index stream's bytes), uint32 the first index (0 when the
//   count is 0), the stream, zero padding to a multiple of 8.
constexpr std::size_t kCodedHeaderBytes = 24;
constexpr std::uint32_t kCodedFlagNonFinite = 1u, kCodedCodeShift = 3, kCodedCodeMask = 3u << kCodedCodeShift;
constexpr std::uint32_t kCodedParamShift = 8, kCodedParamMask = 0xffu << kCodedParamShift;
// The largest coded message of `count` indices (packed at width 32): what a
// sender allocates, and the bound a receiver holds every size to (count <= n).
inline std::size_t coded_capacity(std::size_t count)
{
    return (kCodedHeaderBytes + 4 * (count > 0 ? count - 1 : 0) + 7) / 8 * 8;
}
// The expected size of a message of `kept` indices spread over n elements:
// about log2(n / kept) + 2 bits per Rice-coded gap, 4 bytes of padding.
double coded_estimate(std::size_t n, double kept);
// Writes the message of the `count` ascending indices idx (each below n)
// and the non-finite flag into out (coded_capacity(count) bytes, zeroed by
// the caller); returns its size, a multiple of 8.
std::size_t encode_coded(const std::uint32_t *idx, std::size_t count, std::size_t n, bool nonfinite,
                         unsigned char *out);
// Checks the message `sender` sent, at most `record` bytes, against the
// receiver's n: the header (n, count <= n, flags), the stream's length
// within the record and as its codes take, every index below n (ascending
// by construction). Reads nothing past the record.
bool check_coded(const unsigned char *msg, std::size_t record, std::size_t n, std::size_t sender, Fault *fault);
// ORs a checked message's indices into `bitmap` (bitmap_bytes(n) bytes);
// returns its non-finite flag.
bool or_coded(const unsigned char *msg, unsigned char *bitmap);

// The fault as text naming the field and its value. Empty for Field::None.
std::string describe(const Fault &fault);

}  // namespace cc_coll::detail::sketch_support
