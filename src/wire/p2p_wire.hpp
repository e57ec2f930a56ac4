// The wire format of compressed point-to-point (cc_coll_send / cc_coll_recv).
//
// One cc_coll_send is one MPI message from the sender to the receiver on
// MPI tag 2 tag, then one acknowledgement from the receiver back to the
// sender on MPI tag 2 tag + 1, both on the communicator's private duplicate.
// Byte order and type sizes are the machine's own (the ranks of one job are
// assumed homogeneous, as MPI_BYTE transfers require).
//
// Message = WireHeader (48 bytes) + payload (payload_bytes bytes):
//
//   kind RAW      count elements of dtype (what the receiver stores)
//   kind TOPK     topk_payload.hpp's payload: 16-byte header (uint64 n,
//                 uint32 k, uint32 flags), k uint32 ascending indices, k
//                 values of dtype, zero padded to a multiple of 8 bytes
//   kind LOWRANK  P (rows x r) then Q (cols x r), row-major, in the work
//                 type (binary64 for F64, binary32 for F32, F16 and BF16);
//                 the receiver stores the first count elements of P Q^T
//
// Ack = WireAck (256 bytes): whether the receiver took the message, what it
// expected, and, on a rejection, its explanation naming both sides' values.
#pragma once

#include <cstddef>
#include <cstdint>

namespace cc_coll::detail::p2p_wire {

constexpr std::uint32_t kMagic = 0x50324343u;     // "CC2P" read as little-endian bytes
constexpr std::uint32_t kAckMagic = 0x4b434143u;  // "CACK"
constexpr std::uint16_t kVersion = 1;

enum Kind : std::uint8_t {
    kRaw = 0,
    kTopk = 1,
    kLowRank = 2,
};

struct WireHeader {
    std::uint32_t magic;          // kMagic
    std::uint16_t version;        // kVersion
    std::uint8_t kind;            // Kind
    std::uint8_t dtype;           // cc_coll_dtype_t of the caller's buffer
    std::uint64_t count;          // elements of the caller's buffer
    std::uint64_t rows;           // LOWRANK: rows of M; else 0
    std::uint64_t cols;           // LOWRANK: columns of M; else 0
    std::uint64_t rank_or_k;      // LOWRANK: r; TOPK: k; RAW: 0
    std::uint64_t payload_bytes;  // bytes after the header
};
static_assert(sizeof(WireHeader) == 48, "p2p wire header must be 48 bytes");

enum AckStatus : std::uint32_t {
    kAccepted = 0,
    kRejected = 1,
};

constexpr std::size_t kReasonBytes = 208;

// The receiver's answer. The expectation fields are those of the message's
// kind: method LOWRANK with rows/cols/rank, TOPK with k, else zeros; they
// are informative (the sender reports `reason`).
struct WireAck {
    std::uint32_t magic;      // kAckMagic
    std::uint32_t status;     // AckStatus
    std::uint32_t method;     // the receiver's cc_coll_method_t
    std::uint32_t dtype;      // the receiver's dtype
    std::uint64_t count;      // the receiver's count
    std::uint64_t rows;       // the receiver's LOWRANK shape (0 if unresolved)
    std::uint64_t cols;
    std::uint64_t rank_or_k;  // the receiver's r (LOWRANK) or k (TOPK)
    char reason[kReasonBytes];  // NUL-terminated; "" when accepted
};
static_assert(sizeof(WireAck) == 256, "p2p ack must be 256 bytes");

}  // namespace cc_coll::detail::p2p_wire
