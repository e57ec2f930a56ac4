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
};

struct Fault {
    Field field = Field::None;
    std::uint64_t found = 0;     // PaddingBits: the last bitmap byte; Flag: the flag byte; Rows: m
    std::uint64_t expected = 0;  // PaddingBits: the mask of its bits below n; Flag: 1; Rows: the largest m
    std::size_t n = 0;           // the elements the message covers (PaddingBits, Flag)
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

// The fault as text naming the field and its value. Empty for Field::None.
std::string describe(const Fault &fault);

}  // namespace cc_coll::detail::sketch_support
