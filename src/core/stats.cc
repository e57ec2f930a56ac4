#include "core/stats.hpp"

#include "core/error.hpp"

#include <cstdio>
#include <cstring>

namespace cc_coll::detail {

namespace {

bool kernel_uses_tsc()
{
    std::FILE *f = std::fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "r");
    if (f == nullptr) return false;
    char name[32] = {0};
    const bool ok = std::fgets(name, sizeof name, f) != nullptr;
    std::fclose(f);
    return ok && std::strncmp(name, "tsc", 3) == 0 && (name[3] == '\n' || name[3] == '\0');
}

StatsClock calibrate()
{
    StatsClock c;
#if defined(__x86_64__) || defined(__i386__)
    if (!kernel_uses_tsc()) return c;
    // Ticks against the monotonic clock over 5 ms: a clock read's own
    // uncertainty (tens of ns) is then a few parts per million of the rate.
    const double a = monotonic_seconds();
    const std::uint64_t ta = __builtin_ia32_rdtsc();
    double b = a;
    while (b - a < 5e-3) b = monotonic_seconds();
    const std::uint64_t tb = __builtin_ia32_rdtsc();
    if (tb <= ta) return c;
    c.seconds_per_tick = (b - a) / static_cast<double>(tb - ta);
    c.tsc0 = tb;
    c.t0 = b;
    c.tsc = true;
#endif
    return c;
}

}  // namespace

const StatsClock &stats_clock()
{
    static const StatsClock clock = calibrate();
    return clock;
}

void Stats::add(const StatsSnapshot &call)
{
    std::lock_guard<std::mutex> lock(mutex_);
    total_.calls += call.calls;
    total_.bytes_uncompressed += call.bytes_uncompressed;
    total_.bytes_wire += call.bytes_wire;
    total_.time_compress += call.time_compress;
    total_.time_communicate += call.time_communicate;
    total_.time_decompress += call.time_decompress;
    total_.sketch_elements += call.sketch_elements;
    total_.sketch_peeled += call.sketch_peeled;
    total_.time_total += call.time_total;
    total_.auto_calls += call.auto_calls;
    total_.auto_lossy_calls += call.auto_lossy_calls;
    total_.auto_predicted += call.auto_predicted;
    total_.auto_explored_calls += call.auto_explored_calls;
    total_.auto_measured += call.auto_measured;
}

StatsSnapshot Stats::snapshot() const
{
    std::lock_guard<std::mutex> lock(mutex_);
    StatsSnapshot s = total_;
    s.time_total += static_cast<double>(total_ns_.load(std::memory_order_relaxed)) * 1e-9;
    return s;
}

void Stats::reset()
{
    std::lock_guard<std::mutex> lock(mutex_);
    total_ = StatsSnapshot{};
    total_ns_.store(0, std::memory_order_relaxed);
}

cc_coll_status_t fill_stats(const StatsSnapshot &s, cc_coll_stats_t *out)
{
    const std::uint64_t known = CC_COLL_STATS_FIELD_CALLS | CC_COLL_STATS_FIELD_BYTES_UNCOMPRESSED |
                                CC_COLL_STATS_FIELD_BYTES_WIRE | CC_COLL_STATS_FIELD_TIME_COMPRESS |
                                CC_COLL_STATS_FIELD_TIME_COMMUNICATE | CC_COLL_STATS_FIELD_TIME_DECOMPRESS |
                                CC_COLL_STATS_FIELD_SKETCH_ELEMENTS | CC_COLL_STATS_FIELD_SKETCH_PEELED |
                                CC_COLL_STATS_FIELD_TIME_TOTAL | CC_COLL_STATS_FIELD_AUTO_CALLS |
                                CC_COLL_STATS_FIELD_AUTO_LOSSY_CALLS | CC_COLL_STATS_FIELD_AUTO_PREDICTED |
                                CC_COLL_STATS_FIELD_AUTO_EXPLORED_CALLS | CC_COLL_STATS_FIELD_AUTO_MEASURED;
    if (out->mask & ~known)
        return fail(CC_COLL_ERR_INVALID_PARAMS, "cc_coll_comm_get_stats: stats->mask has unknown bits 0x%llx (known: 0x%llx)",
                    static_cast<unsigned long long>(out->mask & ~known), static_cast<unsigned long long>(known));
    if (out->mask & CC_COLL_STATS_FIELD_CALLS) out->calls = s.calls;
    if (out->mask & CC_COLL_STATS_FIELD_BYTES_UNCOMPRESSED) out->bytes_uncompressed = s.bytes_uncompressed;
    if (out->mask & CC_COLL_STATS_FIELD_BYTES_WIRE) out->bytes_wire = s.bytes_wire;
    if (out->mask & CC_COLL_STATS_FIELD_TIME_COMPRESS) out->time_compress = s.time_compress;
    if (out->mask & CC_COLL_STATS_FIELD_TIME_COMMUNICATE) out->time_communicate = s.time_communicate;
    if (out->mask & CC_COLL_STATS_FIELD_TIME_DECOMPRESS) out->time_decompress = s.time_decompress;
    if (out->mask & CC_COLL_STATS_FIELD_SKETCH_ELEMENTS) out->sketch_elements = s.sketch_elements;
    if (out->mask & CC_COLL_STATS_FIELD_SKETCH_PEELED) out->sketch_peeled = s.sketch_peeled;
    if (out->mask & CC_COLL_STATS_FIELD_TIME_TOTAL) out->time_total = s.time_total;
    if (out->mask & CC_COLL_STATS_FIELD_AUTO_CALLS) out->auto_calls = s.auto_calls;
    if (out->mask & CC_COLL_STATS_FIELD_AUTO_LOSSY_CALLS) out->auto_lossy_calls = s.auto_lossy_calls;
    if (out->mask & CC_COLL_STATS_FIELD_AUTO_PREDICTED) out->auto_predicted = s.auto_predicted;
    if (out->mask & CC_COLL_STATS_FIELD_AUTO_EXPLORED_CALLS) out->auto_explored_calls = s.auto_explored_calls;
    if (out->mask & CC_COLL_STATS_FIELD_AUTO_MEASURED) out->auto_measured = s.auto_measured;
    return CC_COLL_OK;
}

}  // namespace cc_coll::detail
