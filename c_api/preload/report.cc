// The summary at MPI_Finalize: the counters reduced over MPI_COMM_WORLD,
// printed by rank 0 (CC_COLL_STATS=1: every line and the compressed call
// sites; otherwise one line unless CC_COLL_QUIET=1).

#include <algorithm>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <mpi.h>

#include "cc_coll.h"
#include "core/preload_settings.hpp"
#include "requests.hpp"
#include "state.hpp"

namespace cc_coll_preload {

namespace {

// The counters reduced over MPI_COMM_WORLD for the summary.
enum Counter {
    kSeen,
    kCompressed,
    kBytes,
    kWire,
    kPassTargeting,
    kPassRepeats,
    kPassOneRank,
    kSeenNonblocking,
    kCompressedNonblocking,
    kCounters
};
// The counters also reduced with MPI_MAX: calls seen and compressed, of
// every kind and of MPI_Iallreduce.
constexpr int kMaxCounters = 4;

const char *dtype_name(int dtype) { return dtype == CC_COLL_F64 ? "double" : "float"; }

// A call site as the summary prints it: object+0xOFFSET (symbol), the form
// CC_COLL_ALLOW / CC_COLL_DENY accept.
std::string site_label(const PreloadCallSite &site)
{
    char offset[32];
    std::snprintf(offset, sizeof offset, "+0x%" PRIx64, site.offset);
    std::string label = (site.object.empty() ? std::string("?") : site.object) + offset;
    if (!site.symbol.empty()) label += " (" + site.symbol + ")";
    return label;
}

// The compressed call sites of this rank, most bytes first.
void print_sites(State &s)
{
    std::vector<std::pair<SiteKey, SiteTotals>> sites;
    std::map<const void *, PreloadCallSite> where;
    {
        std::lock_guard<std::mutex> lock(s.mutex);
        sites.assign(s.compressed_sites.begin(), s.compressed_sites.end());
        where = s.sites;
    }
    std::stable_sort(sites.begin(), sites.end(),
                     [](const auto &a, const auto &b) { return a.second.bytes > b.second.bytes; });
    const std::size_t shown = std::min<std::size_t>(sites.size(), 8);
    std::fprintf(stderr,
                 "[cc_coll] compressed call sites on rank 0 (every rank compresses the same calls): %zu, "
                 "%s%zu by bytes\n",
                 sites.size(), shown < sites.size() ? "top " : "all ", shown);
    for (std::size_t i = 0; i < shown; ++i) {
        const SiteKey &k = sites[i].first;
        const SiteTotals &t = sites[i].second;
        std::fprintf(stderr, "[cc_coll]   %s: %zu x %s on %s: %" PRIu64 " calls, %" PRIu64 " bytes\n",
                     site_label(where[std::get<0>(k)]).c_str(), std::get<1>(k), dtype_name(std::get<2>(k)),
                     t.comm.c_str(), t.calls, t.bytes);
    }
}

void print_summary(State &s, const std::uint64_t sum[kCounters], const std::uint64_t max[kMaxCounters],
                   double t_max, double t_sum)
{
    const PreloadSettings &c = s.cfg;
    const std::string mode = !s.settings_valid           ? std::string("compression off (invalid CC_COLL_* settings)")
                             : method_compresses(c.method) ? std::string("compression on")
                                                           : std::string("method ") + cc_coll_method_name(c.method) +
                                                                 " (no compression)";
    std::fprintf(stderr, "[cc_coll] preload summary: %d rank%s, thread level %s, %s\n", s.world_size,
                 s.world_size == 1 ? "" : "s", thread_level_name(s.thread_level), mode.c_str());
    std::fprintf(stderr,
                 "[cc_coll] settings: method %s, density %g, ef %d, ef_max_bytes %" PRIu64 ", min_bytes %" PRIu64
                 ", min_repeats %" PRIu64 ", allow \"%s\", deny \"%s\"\n",
                 cc_coll_method_name(c.method), c.density, c.ef ? 1 : 0, c.ef_max_bytes, c.min_bytes,
                 c.min_repeats, pattern_list(c.allow).c_str(), pattern_list(c.deny).c_str());
    std::fprintf(stderr,
                 "[cc_coll] allreduce calls seen %" PRIu64 ", compressed %" PRIu64
                 " (per rank, max over ranks; summed over ranks: %" PRIu64 " seen, %" PRIu64 " compressed)\n",
                 max[0], max[1], sum[kSeen], sum[kCompressed]);
    if (sum[kSeenNonblocking] > 0)
        std::fprintf(stderr,
                     "[cc_coll] of these, MPI_Iallreduce calls seen %" PRIu64 ", compressed %" PRIu64
                     " (per rank, max over ranks; summed over ranks: %" PRIu64 " seen, %" PRIu64 " compressed)\n",
                     max[2], max[3], sum[kSeenNonblocking], sum[kCompressedNonblocking]);
    std::fprintf(stderr,
                 "[cc_coll] passed through exactly (summed over ranks): %" PRIu64 " not yet repeated "
                 "CC_COLL_MIN_REPEATS times on every rank, %" PRIu64 " by CC_COLL_ALLOW/CC_COLL_DENY, %" PRIu64
                 " on one-rank communicators, %" PRIu64 " other (type, op, size, ...)\n",
                 sum[kPassRepeats], sum[kPassTargeting], sum[kPassOneRank],
                 sum[kSeen] - sum[kCompressed] - sum[kPassRepeats] - sum[kPassTargeting] - sum[kPassOneRank]);
    const double ratio = sum[kWire] > 0 ? static_cast<double>(sum[kBytes]) / static_cast<double>(sum[kWire]) : 0.0;
    std::fprintf(stderr,
                 "[cc_coll] compressed calls: bytes uncompressed %" PRIu64 ", bytes on the wire %" PRIu64
                 " (summed over ranks; %.1fx less)\n",
                 sum[kBytes], sum[kWire], ratio);
    std::fprintf(stderr, "[cc_coll] time in compressed calls: %.6f s (max over ranks), %.6f s (summed over ranks)\n",
                 t_max, t_sum);
    print_sites(s);
}

}  // namespace

// Before PMPI_Finalize: destroy every libcc_coll communicator, then reduce
// the counters over MPI_COMM_WORLD (every rank takes part, whatever its
// CC_COLL_STATS says); rank 0 prints them when CC_COLL_STATS is on.
void teardown()
{
    State &s = state();
    if (!s.set_up.load() || s.torn_down.exchange(true)) return;
    s.active = false;
    // MPI_Iallreduce requests still in flight (freed ones, or ones the
    // program never completed) run to their end first, on every rank.
    finish_requests();
    std::vector<Entry *> live;
    {
        std::lock_guard<std::mutex> lock(s.mutex);
        live.assign(s.live.begin(), s.live.end());
    }
    // Deleting the attribute runs delete_entry, which queues the entry.
    for (Entry *e : live) PMPI_Comm_delete_attr(e->user, s.keyval);
    s.have_zombies = true;
    destroy_zombies();
    {
        std::lock_guard<std::mutex> lock(s.mutex);
        live.assign(s.live.begin(), s.live.end());  // attribute deletion failed: destroy anyway
        s.live.clear();
    }
    retire_all(live);
    if (s.keyval != MPI_KEYVAL_INVALID) PMPI_Comm_free_keyval(&s.keyval);

    Totals t;
    {
        std::lock_guard<std::mutex> lock(s.mutex);
        t = s.totals;
    }
    const std::uint64_t local_sum[kCounters] = {s.seen.load(),       t.compressed,
                                                t.bytes_uncompressed, t.bytes_wire,
                                                t.pass_targeting,     t.pass_repeats,
                                                t.pass_one_rank,      s.seen_nonblocking.load(),
                                                t.compressed_nonblocking};
    const std::uint64_t local_max[kMaxCounters] = {local_sum[kSeen], local_sum[kCompressed],
                                                   local_sum[kSeenNonblocking], local_sum[kCompressedNonblocking]};
    std::uint64_t sum[kCounters] = {}, max[kMaxCounters] = {};
    double t_max = 0, t_sum = 0;
    PMPI_Reduce(local_sum, sum, kCounters, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
    PMPI_Reduce(local_max, max, kMaxCounters, MPI_UINT64_T, MPI_MAX, 0, MPI_COMM_WORLD);
    PMPI_Reduce(&t.seconds, &t_max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    PMPI_Reduce(&t.seconds, &t_sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    if (s.world_rank != 0) return;
    if (s.cfg.stats) {
        print_summary(s, sum, max, t_max, t_sum);
    } else if (s.settings_valid && method_compresses(s.cfg.method) && !s.cfg.quiet) {
        std::fprintf(stderr,
                     "[cc_coll] preload: compressed %" PRIu64 " of %" PRIu64 " MPI_Allreduce calls (per rank, max "
                     "over ranks), %" PRIu64 " bytes before compression (summed over ranks); CC_COLL_STATS=1 "
                     "lists the call sites\n",
                     max[1], max[0], sum[kBytes]);
    }
}
}  // namespace cc_coll_preload
