// The outcome exchange: how a lossy collective keeps every rank on the same
// sequence of MPI calls, and ends with the same status on every rank, when
// what one rank received is not what the others received (a payload
// corrupted in transit or in memory, a peer's bug, a fault of this rank's).
//
// Once an algorithm's first data exchange has started, no rank leaves it or
// changes its next MPI call on what it found alone. Each check of received
// data records what it found here (Outcome::fault) and the algorithm goes
// on; before the next step whose MPI calls depend on data (a dense
// fallback, a size taken from received bytes) and before it writes recvbuf,
// the algorithm calls Outcome::exchange: one MPI_Allreduce(MAX) of at most
// kMaxWords 64-bit words (160 bytes, the agreement's size), which carries
//
//  - this rank's fault, if any: its status, its kind and a detail (the
//    sending rank), the lowest faulty rank winning, so that every rank
//    returns an error naming that rank and what it saw;
//  - values every rank must hold alike (Outcome::same): digests of data
//    that every rank received identically (an allgather's payloads, an
//    allreduce's result), and decisions taken from such data; a value that
//    differs between ranks is CC_COLL_ERR_MISMATCH on every rank, since
//    some rank's copy was corrupted;
//  - values reduced by their maximum (Outcome::max): flags every rank must
//    act on alike (a dense fallback) and sizes (the rows of a sketch).
//
// The small exchanges (the agreement, this one) are the trust anchor: they
// are not checked themselves. The format and its cost: docs/wire.md,
// "Fault containment".
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "cc_coll.h"
#include "core/comm.hpp"
#include "core/error.hpp"

namespace cc_coll::detail {

// What a rank found, for the message the other ranks return.
enum class FaultKind : std::uint16_t {
    None = 0,
    Payload = 1,  // a malformed payload (detail: 1 + the sending rank, or 0)
    Support = 2,  // a malformed SKETCH support (bits past n, a bad flag)
    Rows = 3,     // a SKETCH row count out of range
    Local = 4,    // a failure of this rank's own after the exchange began
};

// A 64-bit digest of `bytes` bytes (host memory): equal bytes give equal
// digests on every rank; any change of a byte changes it but for a chance
// of 2^-64. Not cryptographic.
std::uint64_t digest_bytes(const void *data, std::size_t bytes);

// The digest of `bytes` bytes in the backend's memory (X::read_records
// brings device bytes to the host first).
template <typename X>
cc_coll_status_t digest_of(X &x, const void *data, std::size_t bytes, std::uint64_t *out)
{
    const unsigned char *host = nullptr;
    std::size_t stride = 0;
    const cc_coll_status_t st =
        x.read_records(static_cast<const unsigned char *>(data), 1, bytes, bytes, &host, &stride);
    if (st != CC_COLL_OK) return st;
    *out = digest_bytes(host, bytes);
    return CC_COLL_OK;
}

class Outcome {
public:
    // Words of one exchange: the fault (2), then max and same values.
    static constexpr int kMaxWords = 20;

    Outcome(Comm &comm, const char *fn) : comm_(comm), fn_(fn) {}
    Outcome(const Outcome &) = delete;
    Outcome &operator=(const Outcome &) = delete;

    // Records this rank's first fault: `st` with last_error()'s message.
    // Returns st, so that `return out.fault(...)` reads naturally where a
    // rank may leave (before any exchange).
    cc_coll_status_t fault(cc_coll_status_t st, FaultKind kind, std::uint32_t detail = 0);
    // Records the failure of a step when st != CC_COLL_OK (FaultKind::Local).
    // True when st is CC_COLL_OK.
    bool check(cc_coll_status_t st)
    {
        if (st == CC_COLL_OK) return true;
        fault(st, FaultKind::Local);
        return false;
    }
    bool ok() const { return status_ == CC_COLL_OK; }
    // The call's name for messages ("cc_coll_allreduce (topk)").
    const char *name() const { return fn_; }

    // A value every rank must hold alike; `what` names it in the message
    // ("the gathered payloads"). Slots are cleared by each exchange.
    void same(std::uint64_t v, const char *what);
    // A value reduced by its maximum over the ranks; the index for max_of.
    int max(std::uint64_t v);
    // The agreed maximum of slot i, after exchange().
    std::uint64_t max_of(int i) const { return max_[i]; }

    // The exchange. CC_COLL_OK when no rank found a fault and every `same`
    // value agrees; else the same error on every rank: this rank's own
    // (message as it was) when it found one, the lowest faulty rank's status
    // naming that rank and what it saw, or CC_COLL_ERR_MISMATCH naming the
    // value that differs. A communicator of one rank exchanges nothing.
    cc_coll_status_t exchange();

private:
    Comm &comm_;
    const char *fn_;
    cc_coll_status_t status_ = CC_COLL_OK;
    std::string message_;
    FaultKind kind_ = FaultKind::None;
    std::uint32_t detail_ = 0;
    int nmax_ = 0, nsame_ = 0;
    std::uint64_t max_[kMaxWords] = {};
    std::uint64_t same_[kMaxWords] = {};
    const char *same_what_[kMaxWords] = {};
};

}  // namespace cc_coll::detail
