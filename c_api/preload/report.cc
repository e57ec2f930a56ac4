// The summary at MPI_Finalize: the counters reduced over MPI_COMM_WORLD,
// printed by rank 0 (CC_COLL_STATS=1: every line and the compressed call
// sites; otherwise one line unless CC_COLL_QUIET=1), and in advice mode
// (CC_COLL_ADVISE=1) the calls that would be compressed, gathered from every
// rank, with what AUTO's cost model predicts of them.

#include <algorithm>
#include <cmath>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
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
    kPredictedCalls,
    kUnpredictedCalls,
    kCounters
};
// The seconds reduced (MPI_SUM and MPI_MAX) for the summary and the advice.
enum Seconds {
    kTimeCompressed,      // in compressed MPI_Allreduce calls
    kTimePredictedCalls,  // in those of them with a prediction
    kTimePredictedNone,   // NONE's predicted time of the same calls
    kAdviceNone,          // advice: NONE's predicted time of the calls that would be compressed
    kAdviceAuto,          // advice: AUTO's choice's predicted time of them
    kAdviceSaved,         // advice: the difference
    kSeconds
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

// ---------------------------------------------------------------------------
// Advice mode (CC_COLL_ADVISE): each rank's call sites that would be
// compressed, gathered on rank 0 and merged by (call site, count, type,
// communicator name and size).

constexpr char kField = '\x1f', kRecord = '\x1e';

struct AdviceRow {
    std::uint64_t calls = 0;
    std::uint64_t bytes = 0;
    int ranks = 0;  // that made such calls
    Prediction prediction;
};
// (site label, count, dtype, communicator name, communicator size)
using AdviceRowKey = std::tuple<std::string, std::size_t, int, std::string, int>;

// The seconds compression saves on one call, as AUTO would choose: 0 where
// it would not compress (or without a prediction).
double saving(const Prediction &p) { return p.known && p.chosen != CC_COLL_METHOD_NONE ? p.none - p.lossy : 0.0; }

// This rank's advice sites, one record each; the predicted seconds of its
// calls (NONE's, and those of AUTO's choice) added to t[].
std::string advice_records(State &s, double t[kSeconds])
{
    std::map<AdviceKey, AdviceTotals> sites;
    std::map<const void *, PreloadCallSite> where;
    {
        std::lock_guard<std::mutex> lock(s.mutex);
        sites = s.advice_sites;
        where = s.sites;
    }
    std::string out;
    char num[256];
    for (const auto &[k, a] : sites) {
        const Prediction &p = a.prediction;
        std::snprintf(num, sizeof num, "%c%zu%c%d%c", kField, std::get<1>(k), kField, std::get<2>(k), kField);
        out += site_label(where[std::get<0>(k)]) + num + std::get<3>(k);
        std::snprintf(num, sizeof num, "%c%d%c%" PRIu64 "%c%" PRIu64 "%c%d%c%d%c%a%c%a%c", kField, std::get<4>(k),
                      kField, a.calls, kField, a.bytes, kField, p.known ? 1 : 0, kField, static_cast<int>(p.chosen),
                      kField, p.none, kField, p.lossy, kRecord);
        out += num;
        if (p.known) {
            t[kAdviceNone] += static_cast<double>(a.calls) * p.none;
            t[kAdviceAuto] += static_cast<double>(a.calls) * (p.none - saving(p));
            t[kAdviceSaved] += static_cast<double>(a.calls) * saving(p);
        }
    }
    return out;
}

// Merges one rank's records into *rows.
void merge_advice(const std::string &text, std::map<AdviceRowKey, AdviceRow> *rows)
{
    std::size_t at = 0;
    while (at < text.size()) {
        std::size_t end = text.find(kRecord, at);
        if (end == std::string::npos) end = text.size();
        std::vector<std::string> f;
        for (std::size_t b = at;;) {
            const std::size_t e = text.find(kField, b);
            if (e == std::string::npos || e > end) {
                f.push_back(text.substr(b, end - b));
                break;
            }
            f.push_back(text.substr(b, e - b));
            b = e + 1;
        }
        at = end + 1;
        if (f.size() != 11) continue;
        const AdviceRowKey key{f[0], std::strtoull(f[1].c_str(), nullptr, 10), std::atoi(f[2].c_str()), f[3],
                               std::atoi(f[4].c_str())};
        AdviceRow &row = (*rows)[key];
        row.calls += std::strtoull(f[5].c_str(), nullptr, 10);
        row.bytes += std::strtoull(f[6].c_str(), nullptr, 10);
        row.ranks += 1;
        if (f[7] == "1" && !row.prediction.known) {
            row.prediction.known = true;
            row.prediction.chosen = static_cast<cc_coll_method_t>(std::atoi(f[8].c_str()));
            row.prediction.none = std::strtod(f[9].c_str(), nullptr);
            row.prediction.lossy = std::strtod(f[10].c_str(), nullptr);
        }
    }
}

// Every rank's advice records, gathered on rank 0 (collective over
// MPI_COMM_WORLD, whatever this rank's settings: a rank without records
// sends none).
std::map<AdviceRowKey, AdviceRow> gather_advice(State &s, const std::string &mine)
{
    std::map<AdviceRowKey, AdviceRow> rows;
    int len = static_cast<int>(mine.size());
    std::vector<int> lens(s.world_rank == 0 ? s.world_size : 0), at(lens.size());
    PMPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
    std::size_t total = 0;
    for (std::size_t r = 0; r < lens.size(); ++r) {
        at[r] = static_cast<int>(total);
        total += static_cast<std::size_t>(lens[r]);
    }
    std::vector<char> all(total + 1);
    PMPI_Gatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), at.data(), MPI_CHAR, 0, MPI_COMM_WORLD);
    for (std::size_t r = 0; r < lens.size(); ++r)
        merge_advice(std::string(all.data() + at[r], static_cast<std::size_t>(lens[r])), &rows);
    return rows;
}

std::string ms(double seconds)
{
    char text[48];
    std::snprintf(text, sizeof text, "%.3f ms", seconds * 1e3);
    return text;
}

// What AUTO's cost model says of one call of a site, and of its calls.
std::string advice_verdict(const AdviceRow &row)
{
    const Prediction &p = row.prediction;
    if (!p.known) return "no prediction";
    const double calls = static_cast<double>(row.calls);
    char text[256];
    if (std::isinf(p.lossy))
        std::snprintf(text, sizeof text, "NONE %s per call, compressed: sent densely; AUTO picks none",
                      ms(p.none).c_str());
    else if (p.chosen == CC_COLL_METHOD_NONE)
        std::snprintf(text, sizeof text, "NONE %s, compressed %s per call; AUTO picks none (compressing would lose %.6f s)",
                      ms(p.none).c_str(), ms(p.lossy).c_str(), calls * (p.lossy - p.none));
    else
        std::snprintf(text, sizeof text, "NONE %s, %s %s per call; AUTO picks %s, saving %.6f s", ms(p.none).c_str(),
                      cc_coll_method_name(p.chosen), ms(p.lossy).c_str(), cc_coll_method_name(p.chosen),
                      calls * saving(p));
    return text;
}

void print_advice(const std::map<AdviceRowKey, AdviceRow> &merged, const double t_sum[kSeconds],
                  const double t_max[kSeconds])
{
    std::vector<std::pair<AdviceRowKey, AdviceRow>> rows(merged.begin(), merged.end());
    std::uint64_t calls = 0, bytes = 0, unpredicted = 0;
    for (const auto &[k, r] : rows) {
        calls += r.calls;
        bytes += r.bytes;
        if (!r.prediction.known) unpredicted += r.calls;
    }
    std::stable_sort(rows.begin(), rows.end(), [](const auto &a, const auto &b) {
        const double sa = static_cast<double>(a.second.calls) * saving(a.second.prediction);
        const double sb = static_cast<double>(b.second.calls) * saving(b.second.prediction);
        return sa != sb ? sa > sb : a.second.bytes > b.second.bytes;
    });
    std::fprintf(stderr,
                 "[cc_coll] advice (CC_COLL_ADVISE=1): nothing was compressed; the rule in force would compress %" PRIu64
                 " calls, %" PRIu64 " bytes (summed over ranks), at %zu call sites\n",
                 calls, bytes, rows.size());
    std::fprintf(stderr,
                 "[cc_coll] advice: CC_COLL_METHOD=auto's cost model predicts these calls take %.6f s uncompressed "
                 "and %.6f s with its choice per call: %.6f s saved (summed over ranks; %.6f s on the rank that "
                 "saves most)%s\n",
                 t_sum[kAdviceNone], t_sum[kAdviceAuto], t_sum[kAdviceSaved], t_max[kAdviceSaved],
                 unpredicted > 0 ? "; some calls have no prediction" : "");
    const std::size_t shown = std::min<std::size_t>(rows.size(), 8);
    std::fprintf(stderr,
                 "[cc_coll] advice: call sites that would be compressed, most predicted saving first (calls and "
                 "bytes summed over ranks, times predicted): %zu, %s%zu\n",
                 rows.size(), shown < rows.size() ? "top " : "all ", shown);
    for (std::size_t i = 0; i < shown; ++i) {
        const AdviceRowKey &k = rows[i].first;
        const AdviceRow &r = rows[i].second;
        std::fprintf(stderr,
                     "[cc_coll]   %s: %zu x %s on %s (%d ranks): %" PRIu64 " calls, %" PRIu64
                     " bytes, from %d rank%s; %s\n",
                     std::get<0>(k).c_str(), std::get<1>(k), dtype_name(std::get<2>(k)), std::get<3>(k).c_str(),
                     std::get<4>(k), r.calls, r.bytes, r.ranks, r.ranks == 1 ? "" : "s", advice_verdict(r).c_str());
    }
}

void print_summary(State &s, const std::uint64_t sum[kCounters], const std::uint64_t max[kMaxCounters],
                   const double t_sum[kSeconds], const double t_max[kSeconds])
{
    const PreloadSettings &c = s.cfg;
    const std::string mode = !s.settings_valid           ? std::string("compression off (invalid CC_COLL_* settings)")
                             : s.advise.load()             ? std::string("advice mode (CC_COLL_ADVISE=1, no compression)")
                             : method_compresses(c.method) ? std::string("compression on")
                                                           : std::string("method ") + cc_coll_method_name(c.method) +
                                                                 " (no compression)";
    std::fprintf(stderr, "[cc_coll] preload summary: %d rank%s, thread level %s, %s\n", s.world_size,
                 s.world_size == 1 ? "" : "s", thread_level_name(s.thread_level), mode.c_str());
    std::fprintf(stderr,
                 "[cc_coll] settings: method %s, %sef %d, ef_max_bytes %" PRIu64 ", min_bytes %" PRIu64
                 ", min_repeats %" PRIu64 ", allow \"%s\", deny \"%s\"\n",
                 cc_coll_method_name(c.method), density_setting(c.method, c.density).c_str(), c.ef ? 1 : 0,
                 c.ef_max_bytes, c.min_bytes,
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
                 t_max[kTimeCompressed], t_sum[kTimeCompressed]);
    if (sum[kCompressed] > sum[kCompressedNonblocking]) {
        const double saved = t_sum[kTimePredictedNone] - t_sum[kTimePredictedCalls];
        char unpredicted[96] = "";
        if (sum[kUnpredictedCalls] > 0)
            std::snprintf(unpredicted, sizeof unpredicted, "; %" PRIu64 " calls without a prediction left out",
                          sum[kUnpredictedCalls]);
        std::fprintf(stderr,
                     "[cc_coll] time %s by compression: %.6f s (summed over ranks): %" PRIu64
                     " compressed MPI_Allreduce calls took %.6f s, measured; uncompressed (NONE) they would take "
                     "%.6f s, predicted by CC_COLL_METHOD=auto's cost model, not measured%s\n",
                     saved >= 0 ? "saved" : "lost", saved >= 0 ? saved : -saved, sum[kPredictedCalls],
                     t_sum[kTimePredictedCalls], t_sum[kTimePredictedNone], unpredicted);
    }
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
                                                t.compressed_nonblocking, t.predicted_calls,
                                                t.unpredicted_calls};
    double local_t[kSeconds] = {t.seconds, t.predicted_seconds, t.predicted_none, 0, 0, 0};
    const std::string advice = advice_records(s, local_t);
    const std::uint64_t local_max[kMaxCounters] = {local_sum[kSeen], local_sum[kCompressed],
                                                   local_sum[kSeenNonblocking], local_sum[kCompressedNonblocking]};
    std::uint64_t sum[kCounters] = {}, max[kMaxCounters] = {};
    double t_max[kSeconds] = {}, t_sum[kSeconds] = {};
    PMPI_Reduce(local_sum, sum, kCounters, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
    PMPI_Reduce(local_max, max, kMaxCounters, MPI_UINT64_T, MPI_MAX, 0, MPI_COMM_WORLD);
    PMPI_Reduce(local_t, t_max, kSeconds, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    PMPI_Reduce(local_t, t_sum, kSeconds, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    const std::map<AdviceRowKey, AdviceRow> rows = gather_advice(s, advice);
    if (s.world_rank != 0) return;
    if (s.cfg.stats) print_summary(s, sum, max, t_sum, t_max);
    // The advice report, whatever CC_COLL_STATS and CC_COLL_QUIET say.
    if (s.advise.load()) print_advice(rows, t_sum, t_max);
    if (!s.cfg.stats && !s.advise.load() && s.settings_valid && method_compresses(s.cfg.method) && !s.cfg.quiet) {
        std::fprintf(stderr,
                     "[cc_coll] preload: compressed %" PRIu64 " of %" PRIu64 " MPI_Allreduce calls (per rank, max "
                     "over ranks), %" PRIu64 " bytes before compression (summed over ranks); CC_COLL_STATS=1 "
                     "lists the call sites\n",
                     max[1], max[0], sum[kBytes]);
    }
}
}  // namespace cc_coll_preload
