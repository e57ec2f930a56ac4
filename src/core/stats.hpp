// Per-communicator counters behind cc_coll_comm_get_stats().
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>

#include "cc_coll.h"

namespace cc_coll::detail {

struct StatsSnapshot {
    std::uint64_t calls = 0;
    std::uint64_t bytes_uncompressed = 0;
    std::uint64_t bytes_wire = 0;
    double time_compress = 0;
    double time_communicate = 0;
    double time_decompress = 0;
    std::uint64_t sketch_elements = 0;
    std::uint64_t sketch_peeled = 0;
    double time_total = 0;  // entry to return of every call (CallTimer)
    std::uint64_t auto_calls = 0;        // calls with method AUTO (methods/auto/cost_model.hpp)
    std::uint64_t auto_lossy_calls = 0;  // of those, sent with the lossy method
    double auto_predicted = 0;           // the model's predicted seconds of those choices
    std::uint64_t auto_explored_calls = 0;  // of those, run with the runner-up to check the model
    double auto_measured = 0;            // this rank's seconds in those calls, as AUTO timed them
};

class Stats {
public:
    // Adds one call's figures.
    void add(const StatsSnapshot &call);
    // Adds to time_total without taking the lock (once per call).
    void add_total(double seconds)
    {
        total_ns_.fetch_add(static_cast<std::uint64_t>(seconds * 1e9), std::memory_order_relaxed);
    }
    StatsSnapshot snapshot() const;
    void reset();

private:
    mutable std::mutex mutex_;
    StatsSnapshot total_;
    std::atomic<std::uint64_t> total_ns_{0};
};

// Copies the fields `out->mask` asks for; unknown mask bits are an error.
cc_coll_status_t fill_stats(const StatsSnapshot &s, cc_coll_stats_t *out);

// The clock of the statistics: the x86 time-stamp counter where the kernel
// itself keeps time with it (its clocksource is "tsc": invariant and
// synchronised across cores), calibrated once against the monotonic clock,
// else the monotonic clock. A read costs about half a clock_gettime, and a
// call reads it a few times.
struct StatsClock {
    bool tsc = false;
    double seconds_per_tick = 0;
    std::uint64_t tsc0 = 0;
    double t0 = 0;
};
const StatsClock &stats_clock();  // calibrated on first use (a few ms, once)

inline double monotonic_seconds()
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Seconds on a monotonic clock, for phase timings.
inline double now_seconds()
{
#if defined(__x86_64__) || defined(__i386__)
    const StatsClock &c = stats_clock();
    if (c.tsc) return c.t0 + static_cast<double>(__builtin_ia32_rdtsc() - c.tsc0) * c.seconds_per_tick;
#endif
    return monotonic_seconds();
}

}  // namespace cc_coll::detail
