#include "collectives/common/outcome.hpp"

#include <climits>
#include <cstdio>
#include <cstring>

#include "transport/mpi_transport.hpp"

namespace cc_coll::detail {

namespace {

constexpr std::uint64_t kFaultBit = 1ull << 63;

// Fault words: the lowest faulty rank has the largest (INT_MAX - rank), so
// the maximum over the ranks is that rank's fault. Word 0: the flag, the
// rank, the status (negated) and the kind; word 1: the rank and the detail
// (0 on ranks without a fault).
std::uint64_t fault_word(int rank, cc_coll_status_t st, FaultKind kind)
{
    return kFaultBit | (static_cast<std::uint64_t>(INT_MAX - rank) << 32) |
           (static_cast<std::uint64_t>(-st & 0xffff) << 16) | static_cast<std::uint64_t>(kind);
}

const char *kind_text(FaultKind kind)
{
    switch (kind) {
    case FaultKind::Payload: return "found a malformed payload in the bytes it received";
    case FaultKind::Support: return "found a malformed SKETCH support in the bytes it received";
    case FaultKind::Rows: return "found a SKETCH row count out of range";
    case FaultKind::Local: return "failed after the data exchange began";
    default: return "found a fault";
    }
}

std::uint64_t mix(std::uint64_t h, std::uint64_t w)
{
    h ^= w;
    h *= 0x9e3779b97f4a7c15ull;
    return h ^ (h >> 29);
}

}  // namespace

std::uint64_t digest_bytes(const void *data, std::size_t bytes)
{
    const auto *p = static_cast<const unsigned char *>(data);
    // Four independent lanes over 32-byte blocks, then the tail word by word.
    std::uint64_t lane[4] = {0x243f6a8885a308d3ull, 0x13198a2e03707344ull, 0xa4093822299f31d0ull,
                             0x082efa98ec4e6c89ull};
    std::size_t i = 0;
    for (; i + 32 <= bytes; i += 32)
        for (int l = 0; l < 4; ++l) {
            std::uint64_t w;
            std::memcpy(&w, p + i + 8 * l, sizeof w);
            lane[l] = mix(lane[l], w);
        }
    std::uint64_t h = mix(mix(mix(mix(bytes, lane[0]), lane[1]), lane[2]), lane[3]);
    for (; i + 8 <= bytes; i += 8) {
        std::uint64_t w;
        std::memcpy(&w, p + i, sizeof w);
        h = mix(h, w);
    }
    if (i < bytes) {
        std::uint64_t w = 0;
        std::memcpy(&w, p + i, bytes - i);
        h = mix(h, w ^ 0xff);
    }
    return mix(h, 0x5851f42d4c957f2dull);
}

cc_coll_status_t Outcome::fault(cc_coll_status_t st, FaultKind kind, std::uint32_t detail)
{
    if (status_ == CC_COLL_OK) {
        status_ = st;
        message_ = last_error();
        kind_ = kind;
        detail_ = detail;
    }
    return st;
}

void Outcome::same(std::uint64_t v, const char *what)
{
    same_[nsame_] = v;
    same_what_[nsame_] = what;
    ++nsame_;
}

int Outcome::max(std::uint64_t v)
{
    max_[nmax_] = v;
    return nmax_++;
}

cc_coll_status_t Outcome::exchange()
{
    const int nsame = nsame_, nmax = nmax_;
    nsame_ = 0;
    nmax_ = 0;
    if (comm_.size() < 2) {
        if (status_ != CC_COLL_OK) return fail(status_, "%s", message_.c_str());
        return CC_COLL_OK;
    }
    std::uint64_t w[kMaxWords] = {};
    const int n = 2 + nmax + 2 * nsame;
    if (n > kMaxWords) return fail(CC_COLL_ERR_INTERNAL, "%s: an outcome exchange of %d words", fn_, n);
    const int rank = comm_.rank();
    if (status_ != CC_COLL_OK) {
        w[0] = fault_word(rank, status_, kind_);
        w[1] = (static_cast<std::uint64_t>(INT_MAX - rank) << 32) | detail_;
    }
    for (int i = 0; i < nmax; ++i) w[2 + i] = max_[i];
    for (int i = 0; i < nsame; ++i) {
        w[2 + nmax + 2 * i] = same_[i];
        w[2 + nmax + 2 * i + 1] = ~same_[i];
    }
    const cc_coll_status_t st = allreduce_max_u64(w, comm_.mpi(), n);
    if (status_ != CC_COLL_OK) return fail(status_, "%s", message_.c_str());
    if (st != CC_COLL_OK) return st;
    for (int i = 0; i < nmax; ++i) max_[i] = w[2 + i];
    if ((w[0] & kFaultBit) != 0) {
        const int who = INT_MAX - static_cast<int>((w[0] >> 32) & 0x7fffffff);
        const auto status = static_cast<cc_coll_status_t>(-static_cast<int>((w[0] >> 16) & 0xffff));
        const auto kind = static_cast<FaultKind>(w[0] & 0xffff);
        const auto detail = static_cast<std::uint32_t>(w[1] & 0xffffffffu);
        char from[48] = "";
        if (kind == FaultKind::Payload && detail != 0) std::snprintf(from, sizeof from, " (from rank %u)", detail - 1);
        return fail(status == CC_COLL_OK ? CC_COLL_ERR_INTERNAL : status,
                    "%s: rank %d %s%s (%s there); every rank fails this call (docs/wire.md, \"Fault "
                    "containment\")",
                    fn_, who, kind_text(kind), from, status_string(status));
    }
    for (int i = 0; i < nsame; ++i) {
        const std::uint64_t hi = w[2 + nmax + 2 * i], lo = ~w[2 + nmax + 2 * i + 1];
        if (hi != lo)
            return fail(CC_COLL_ERR_MISMATCH,
                        "%s: the ranks hold different %s, which every rank received alike: data was corrupted in "
                        "transit or in memory on some rank; every rank fails this call (docs/wire.md, \"Fault "
                        "containment\")",
                        fn_, same_what_[i]);
    }
    return CC_COLL_OK;
}

}  // namespace cc_coll::detail
