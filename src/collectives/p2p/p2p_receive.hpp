// The two checks of compressed point-to-point that read a peer's bytes,
// without MPI: the receiver's check and decoding of a message, and the
// sender's reading of the receiver's answer. cc_coll_recv / cc_coll_send call
// them around the transport; the unit tests and the fuzz driver
// (tests/fuzz/) call them directly.
//
// Every field of a message is untrusted: each is checked against the
// received size and the receiver's own call before it is used (the order is
// docs/wire.md, "What the receiver checks, in order").
#pragma once

#include <cstddef>
#include <string>

#include "exec/workspace.hpp"
#include "collectives/p2p/p2p.hpp"
#include "core/params.hpp"
#include "wire/p2p_wire.hpp"

namespace cc_coll::detail {

// Checks the `bytes` bytes at `msg` (a whole received message, header and
// payload; 4-byte aligned, as vector and new storage are) against the
// receiver's call: a.count, a.dtype, the host buffer a.buf of a.count
// elements, and p (method, density, LOWRANK shape and rank). Fills *ack
// (zeroed, then magic, status, the receiver's expectation and, on a
// rejection, a reason naming the field and its value).
// Accepted: a.buf[0 .. count) is written whole; returns true.
// Rejected: a.buf is not touched; returns false.
// ws: scratch for the LOWRANK factors and product.
bool p2p_receive_message(Workspace &ws, const unsigned char *msg, std::size_t bytes, const RecvArgs &a,
                         const CallParams &p, p2p_wire::WireAck *ack);

enum class AckVerdict {
    Accepted,   // the receiver took the message
    Rejected,   // the receiver refused it; *why is its reason
    Malformed,  // not a well-formed answer; *why says what is wrong
};

// Reads the receiver's answer of `size` bytes at `bytes` (any alignment).
// A rejection's reason is copied with non-printable bytes replaced by '?'.
AckVerdict p2p_read_ack(const unsigned char *bytes, std::size_t size, std::string *why);

}  // namespace cc_coll::detail
