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
#pragma once

#include <cstddef>

namespace cc_coll::detail::sketch_support {

inline std::size_t bitmap_bytes(std::size_t n) { return (n + 7) / 8; }
inline std::size_t flag_offset(std::size_t n) { return bitmap_bytes(n); }
inline std::size_t message_bytes(std::size_t n) { return bitmap_bytes(n) + 1; }
inline std::size_t buffer_bytes(std::size_t n) { return (message_bytes(n) + 3) / 4 * 4; }

}  // namespace cc_coll::detail::sketch_support
