#include "core/state_budget.hpp"

#include "core/error.hpp"

namespace cc_coll::detail {

cc_coll_status_t StateBudget::reserve(std::uint64_t need, const char *what)
{
    std::uint64_t held = bytes_.load(std::memory_order_relaxed);
    do {
        if (max_bytes_ != 0 && (need > max_bytes_ || held > max_bytes_ - need))
            return fail(CC_COLL_ERR_EF_LIMIT,
                        "%s needs %llu bytes of method state, which would raise this communicator's method-state "
                        "memory on this rank from %llu to %llu bytes, over CC_COLL_STATE_MAX_BYTES = %llu; nothing "
                        "was changed: raise the cap, or free state with cc_coll_ef_reset, cc_coll_ef_reset_all or "
                        "cc_coll_lep_reset",
                        what, static_cast<unsigned long long>(need), static_cast<unsigned long long>(held),
                        static_cast<unsigned long long>(held + need), static_cast<unsigned long long>(max_bytes_));
    } while (!bytes_.compare_exchange_weak(held, held + need, std::memory_order_relaxed));
    return CC_COLL_OK;
}

void StateBudget::release(std::uint64_t bytes)
{
    std::uint64_t held = bytes_.load(std::memory_order_relaxed);
    while (!bytes_.compare_exchange_weak(held, held - (bytes < held ? bytes : held), std::memory_order_relaxed)) {
    }
}

}  // namespace cc_coll::detail
