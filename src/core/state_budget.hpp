// The memory of the methods' per-tensor state other than residuals (today
// LOWRANK's call counts and factors, of collective tensors and of
// point-to-point channels alike) on one communicator and rank, with an
// optional cap (CC_COLL_STATE_MAX_BYTES). Residuals have their own stores
// and cap (core/ef_store.hpp, CC_COLL_EF_MAX_BYTES).
//
// A method charges an entry before it creates it (or lets it grow) and
// releases the charge when it drops it; cc_coll_state_bytes reports the sum.
// The collective and the point-to-point stores charge it under different
// locks (Comm::collective_mutex, Comm::p2p_mutex), so the count is atomic.
#pragma once

#include <atomic>
#include <cstdint>

#include "cc_coll.h"

namespace cc_coll::detail {

class StateBudget {
public:
    explicit StateBudget(std::uint64_t max_bytes) : max_bytes_(max_bytes) {}
    StateBudget(const StateBudget &) = delete;
    StateBudget &operator=(const StateBudget &) = delete;

    // Counts `bytes` more. CC_COLL_ERR_EF_LIMIT, nothing counted, when that
    // would pass the cap; the message names `what` (the state and its
    // tensor or channel), the bytes in use and needed, and the setting.
    cc_coll_status_t reserve(std::uint64_t bytes, const char *what);
    // Gives back `bytes` counted by reserve() or charge().
    void release(std::uint64_t bytes);
    // Counts `bytes` more without the cap check, which the caller has made
    // (a checkpoint's import, after it checked the whole state it installs).
    void charge(std::uint64_t bytes) { bytes_.fetch_add(bytes, std::memory_order_relaxed); }

    std::uint64_t bytes() const { return bytes_.load(std::memory_order_relaxed); }
    std::uint64_t max_bytes() const { return max_bytes_; }

private:
    const std::uint64_t max_bytes_;  // 0: no cap
    std::atomic<std::uint64_t> bytes_{0};
};

}  // namespace cc_coll::detail
