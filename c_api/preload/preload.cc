// libcc_coll_preload_core.so: the core of the LD_PRELOAD shim (a PMPI
// tool) that routes an unmodified MPI program's eligible MPI_Allreduce calls
// through libcc_coll. See docs/preload.md for the user's view.
//
//  - What is preloaded is libcc_coll_preload.so (front.c): it exports the
//    interposed entry points, checks that the process runs the MPI this
//    core was built for, loads this core (RTLD_LOCAL) and hands it every
//    call through the table of core_api.h. The core exports nothing else.
//  - Wrapped: MPI_Init, MPI_Init_thread, MPI_Finalize, MPI_Allreduce (C);
//    the Fortran entry points of the same four in their four manglings
//    (Open MPI's Fortran bindings call PMPI_* directly, so a C-only shim
//    never sees a Fortran program; MPICH's call the C MPI_* functions, but
//    from inside MPI, so the program's call site would be lost), and the
//    mpi_f08 entries mpi_{init,init_thread,finalize,allreduce}_f08_ (Open
//    MPI's; MPICH's mpi_f08 has the init and finalize ones, and its
//    MPI_Allreduce reaches the C entry point). Each Fortran wrapper forwards
//    what it does not compress to the MPI's entry the front found (pmpi_...,
//    or where the MPI has none, as for MPICH's mpi_f08, the entry itself).
//  - Every MPI call the core makes itself is a PMPI_* call. The library's
//    objects are linked in statically and call MPI_Allreduce by name, which
//    resolves to the front's; a thread-local depth counter sends those
//    nested calls straight to PMPI_Allreduce.
//  - Eligible, in two stages. First, from values identical on every rank
//    (count, datatype, op, communicator kind and size, the environment):
//    MPI_SUM of a predefined MPI_FLOAT / MPI_REAL / MPI_REAL4 (binary32) or
//    MPI_DOUBLE / MPI_DOUBLE_PRECISION / MPI_REAL8 (binary64), count x size
//    >= CC_COLL_MIN_BYTES, on an intra-communicator of two or more ranks,
//    no MPI_BOTTOM. Then, from values that may differ between ranks (buffer
//    addresses, call site, communicator name): the call's key (call site,
//    receive buffer, count, type) has been seen CC_COLL_MIN_REPEATS times
//    before on this communicator, CC_COLL_DENY does not match and
//    CC_COLL_ALLOW, if set, does. The ranks agree on the second stage with
//    one 4-byte MPI_BOR PMPI_Allreduce on the shim's private duplicate of
//    the communicator: a call is compressed only where it is ready on every
//    rank. Everything else goes to PMPI_Allreduce (or the Fortran PMPI
//    entry) untouched.
//  - Per MPI communicator one libcc_coll communicator, created at the first
//    eligible call and cached as an attribute; its delete callback queues it
//    for destruction (no MPI call inside the callback), done at the next
//    intercepted call or at MPI_Finalize.
//  - Dependencies: libcc_coll's public C ABI (cc_coll.h) and, for its
//    settings, core/preload_settings.hpp, and the front's table
//    (core_api.h); nothing else of the library's internals. The one thing the C ABI does not answer, whether a buffer is
//    device memory, the shim asks the CUDA runtime itself (CUDA builds).
#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <exception>
#include <map>
#include <mutex>
#include <new>
#include <set>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include <mpi.h>

#include "cc_coll.h"
#include "core/preload_settings.hpp"
#include "core_api.h"


// The front passes a Fortran integer as an int (core_api.h).
static_assert(sizeof(MPI_Fint) == sizeof(int), "MPI_Fint is not an int: core_api.h does not fit this MPI");

// Open MPI's Fortran sentinels: common blocks whose addresses Fortran passes
// for MPI_IN_PLACE and MPI_BOTTOM. Weak, so that the shim loads where they
// do not exist; an absent one has address NULL.
extern "C" {
extern int mpi_fortran_in_place __attribute__((weak, visibility("default")));
extern int mpi_fortran_in_place_ __attribute__((weak, visibility("default")));
extern int mpi_fortran_in_place__ __attribute__((weak, visibility("default")));
extern int MPI_FORTRAN_IN_PLACE __attribute__((weak, visibility("default")));
extern int mpi_fortran_bottom __attribute__((weak, visibility("default")));
extern int mpi_fortran_bottom_ __attribute__((weak, visibility("default")));
extern int mpi_fortran_bottom__ __attribute__((weak, visibility("default")));
extern int MPI_FORTRAN_BOTTOM __attribute__((weak, visibility("default")));
// MPICH's (and its ABI's): pointers, set when MPI's Fortran layer first runs
// (MPIR_F_NeedInit is then cleared), to the addresses Fortran passes for
// MPI_IN_PLACE and MPI_BOTTOM (mpif.h and `use mpi`).
extern void *MPIR_F_MPI_IN_PLACE __attribute__((weak, visibility("default")));
extern void *MPIR_F_MPI_BOTTOM __attribute__((weak, visibility("default")));
extern int MPIR_F_NeedInit __attribute__((weak, visibility("default")));
}

namespace {

using cc_coll::detail::load_preload_settings;
using cc_coll::detail::preload_patterns_match;
using cc_coll::detail::PreloadCallSite;
using cc_coll::detail::PreloadPattern;
using cc_coll::detail::PreloadSettings;

// ---------------------------------------------------------------------------
// Re-entry guard: > 0 while this thread is inside a wrapper, so the
// library's own MPI_Allreduce calls go straight to PMPI.
thread_local int t_depth = 0;

struct Guard {
    Guard() { ++t_depth; }
    ~Guard() { --t_depth; }
    Guard(const Guard &) = delete;
    Guard &operator=(const Guard &) = delete;
};

// ---------------------------------------------------------------------------
// Process state.

// A residual's name as libcc_coll gives it to a call without an ef_key:
// (recvbuf address, count, dtype).
using ResidualKey = std::tuple<const void *, std::size_t, int>;

// What CC_COLL_MIN_REPEATS counts: (return address of the MPI_Allreduce
// call, receive buffer, count, dtype), per communicator and rank.
using RepeatKey = std::tuple<const void *, const void *, std::size_t, int>;

// At most this many keys are remembered per communicator; past it the
// counts start over (so a program that reduces into a new buffer at every
// call cannot grow the shim's memory without bound).
constexpr std::size_t kMaxRepeatKeys = 1 << 16;

// Bits of the agreement (preflight): a condition on some rank that makes
// every rank pass the call through.
constexpr int kBitEfCap = 1;      // a new residual would pass CC_COLL_EF_MAX_BYTES
constexpr int kBitDevice = 2;     // device memory on this rank
constexpr int kBitHost = 4;       // host memory on this rank
constexpr int kBitTargeting = 8;  // CC_COLL_DENY matches, or CC_COLL_ALLOW does not
constexpr int kBitRepeats = 16;   // seen fewer than CC_COLL_MIN_REPEATS times

// What hangs off a user communicator (the attribute value).
struct Entry {
    MPI_Comm user = MPI_COMM_NULL;    // the communicator it is cached on
    cc_coll_comm_h handle = nullptr;  // nullptr when creation failed
    int rank = 0;                     // in the user communicator
    // The shim's own duplicate of `user` (MPI_ERRORS_RETURN) for the
    // preflight's agreement; MPI_COMM_NULL when no preflight can happen.
    MPI_Comm agree = MPI_COMM_NULL;
    // With an EF cap: the residuals this rank's calls created (seen as growth
    // of cc_coll_ef_bytes). Only the shim calls on `handle`, and nothing
    // drops a residual before the communicator is destroyed.
    std::set<ResidualKey> residuals;
    // CC_COLL_MIN_REPEATS: how often each key was seen on this rank.
    std::map<RepeatKey, std::uint64_t> repeats;
};

// A compressed call site in the summary: (return address, count, dtype).
using SiteKey = std::tuple<const void *, std::size_t, int>;
struct SiteTotals {
    std::uint64_t calls = 0;
    std::uint64_t bytes = 0;
    std::string comm;  // the communicator's name at the last call
};

struct Totals {
    std::uint64_t compressed = 0;
    std::uint64_t bytes_uncompressed = 0;
    std::uint64_t bytes_wire = 0;
    double seconds = 0;
    // Calls passed through by the second stage of the decision, by the
    // first reason that applied, and calls on a one-rank communicator.
    std::uint64_t pass_targeting = 0;
    std::uint64_t pass_repeats = 0;
    std::uint64_t pass_one_rank = 0;
};

struct State {
    std::mutex mutex;  // guards everything but the atomics
    std::atomic<bool> set_up{false};
    std::atomic<bool> torn_down{false};
    std::atomic<bool> active{false};  // compress eligible calls
    std::atomic<bool> have_zombies{false};
    std::atomic<std::uint64_t> seen{0};
    PreloadSettings cfg;
    bool settings_valid = true;
    bool ef_cap = false;            // EF on, a lossy method, CC_COLL_EF_MAX_BYTES set
    bool preflight_device = false;  // CUDA build with a CUDA-aware MPI
    int world_rank = 0;
    int world_size = 1;
    int thread_level = MPI_THREAD_SINGLE;
    int keyval = MPI_KEYVAL_INVALID;
    std::set<Entry *> live;       // attached to a user communicator
    std::vector<Entry *> zombies; // user communicator freed: destroy later
    std::set<int> reported;       // statuses already reported (print once)
    Totals totals;
    std::map<const void *, PreloadCallSite> sites;  // resolved return addresses
    std::map<SiteKey, SiteTotals> compressed_sites;
};

State &state()
{
    static State *s = new State;  // never destroyed: safe during exit
    return *s;
}

const char *thread_level_name(int level)
{
    switch (level) {
    case MPI_THREAD_SINGLE: return "single";
    case MPI_THREAD_FUNNELED: return "funneled";
    case MPI_THREAD_SERIALIZED: return "serialized";
    case MPI_THREAD_MULTIPLE: return "multiple";
    }
    return "unknown";
}

// Destroys an entry's libcc_coll communicator (MPI_Comm_free of its private
// duplicate) and the entry; returns the wire bytes it counted. Called without
// the mutex: MPI may take its own locks in there, and delete_entry, which
// takes the mutex, runs under them.
std::uint64_t retire(Entry *e)
{
    std::uint64_t wire = 0;
    if (e->handle != nullptr) {
        cc_coll_stats_t st{};
        st.mask = CC_COLL_STATS_FIELD_BYTES_WIRE;
        if (cc_coll_comm_get_stats(e->handle, &st) == CC_COLL_OK) wire = st.bytes_wire;
        cc_coll_comm_destroy(e->handle);
    }
    if (e->agree != MPI_COMM_NULL) PMPI_Comm_free(&e->agree);
    delete e;
    return wire;
}

void retire_all(const std::vector<Entry *> &entries)
{
    std::uint64_t wire = 0;
    for (Entry *e : entries) wire += retire(e);
    State &s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    s.totals.bytes_wire += wire;
}

// Destroys the communicators whose user communicator was freed. Runs
// outside attribute callbacks.
void destroy_zombies()
{
    State &s = state();
    if (!s.have_zombies.load()) return;
    std::vector<Entry *> zombies;
    {
        std::lock_guard<std::mutex> lock(s.mutex);
        zombies.swap(s.zombies);
        s.have_zombies = false;
    }
    retire_all(zombies);
}

// Attribute delete callback: the user freed the communicator (or the shim
// deletes the attribute at MPI_Finalize). No MPI call in here.
int delete_entry(MPI_Comm, int, void *value, void *)
{
    State &s = state();
    Entry *e = static_cast<Entry *>(value);
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.live.erase(e) == 0) return MPI_SUCCESS;  // not ours any more
    s.zombies.push_back(e);
    s.have_zombies = true;
    return MPI_SUCCESS;
}

std::string pattern_list(const std::vector<PreloadPattern> &list)
{
    std::string out;
    for (const PreloadPattern &p : list) out += (out.empty() ? "" : ",") + p.text;
    return out;
}

// The decision rule in words, as the line at MPI_Init and the summary say it.
std::string eligibility_rule(const PreloadSettings &c)
{
    std::string rule = "MPI_SUM of float or double, >= " + std::to_string(c.min_bytes) +
                       " bytes, on communicators of 2 or more ranks";
    if (c.min_repeats > 0)
        rule += ", once the same call site, buffer, count and type has been reduced " +
                std::to_string(c.min_repeats) + " times exactly on every rank";
    else
        rule += ", from the first call (CC_COLL_MIN_REPEATS=0)";
    if (!c.allow.empty()) rule += "; opt-in: only CC_COLL_ALLOW=" + pattern_list(c.allow);
    if (!c.deny.empty()) rule += "; never CC_COLL_DENY=" + pattern_list(c.deny);
    return rule;
}

// Reads and validates every CC_COLL_* setting once, right after MPI is
// initialised (core/preload_settings.hpp). A bad value: one message from
// rank 0 per variable, and compression stays off for the whole run.
void setup(int thread_level)
{
    State &s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.set_up.load()) return;
    PMPI_Comm_rank(MPI_COMM_WORLD, &s.world_rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &s.world_size);
    s.thread_level = thread_level;

    std::vector<std::string> errors;
    const PreloadSettings cfg = load_preload_settings(&errors);
    s.cfg = cfg;
    s.settings_valid = errors.empty();
    if (!errors.empty() && s.world_rank == 0) {
        for (const std::string &e : errors) std::fprintf(stderr, "[cc_coll] preload: %s\n", e.c_str());
        std::fprintf(stderr,
                     "[cc_coll] preload: compression is off for this run: every MPI_Allreduce passes through "
                     "to MPI unchanged\n");
    }
    bool active = s.settings_valid && cfg.method != CC_COLL_METHOD_NONE;
    if (active) {
        const int rc = PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_entry, &s.keyval, nullptr);
        if (rc != MPI_SUCCESS) {
            active = false;
            if (s.world_rank == 0)
                std::fprintf(stderr,
                             "[cc_coll] preload: MPI_Comm_create_keyval failed (error %d): compression is off "
                             "for this run\n",
                             rc);
        }
    }
    s.ef_cap = cfg.ef && cfg.method != CC_COLL_METHOD_NONE && cfg.ef_max_bytes != 0;
    s.preflight_device = (cc_coll_build_flags() & CC_COLL_BUILD_CUDA) != 0 && cc_coll_mpi_cuda_aware() != 0;
    if (active && !cfg.quiet && s.world_rank == 0) {
        char density[64] = "";  // the one method parameter the shim passes itself
        if (cfg.method == CC_COLL_METHOD_TOPK) std::snprintf(density, sizeof density, "density %g, ", cfg.density);
        std::fprintf(stderr,
                     "[cc_coll] preload: compressing MPI_Allreduce with method %s (%serror feedback %s): %s; "
                     "every other call passes through to MPI unchanged (CC_COLL_QUIET=1 silences this line)\n",
                     cc_coll_method_name(cfg.method), density, cfg.ef ? "on" : "off", eligibility_rule(cfg).c_str());
    }
    s.active = active;
    s.set_up = true;
}

// Setup for a program whose MPI initialisation the shim did not see.
void ensure_setup()
{
    if (state().set_up.load()) return;
    int initialized = 0, finalized = 0;
    PMPI_Initialized(&initialized);
    PMPI_Finalized(&finalized);
    if (!initialized || finalized) return;
    int level = MPI_THREAD_SINGLE;
    PMPI_Query_thread(&level);
    setup(level);
}

// The counters reduced over MPI_COMM_WORLD for the summary.
enum Counter { kSeen, kCompressed, kBytes, kWire, kPassTargeting, kPassRepeats, kPassOneRank, kCounters };

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

void print_summary(State &s, const std::uint64_t sum[kCounters], const std::uint64_t max[2], double t_max,
                   double t_sum)
{
    const PreloadSettings &c = s.cfg;
    std::fprintf(stderr, "[cc_coll] preload summary: %d rank%s, thread level %s, %s\n", s.world_size,
                 s.world_size == 1 ? "" : "s", thread_level_name(s.thread_level),
                 !s.settings_valid ? "compression off (invalid CC_COLL_* settings)"
                 : c.method == CC_COLL_METHOD_NONE ? "method none (no compression)"
                                                    : "compression on");
    std::fprintf(stderr,
                 "[cc_coll] settings: method %s, density %g, ef %d, ef_max_bytes %" PRIu64 ", min_bytes %" PRIu64
                 ", min_repeats %" PRIu64 ", allow \"%s\", deny \"%s\"\n",
                 cc_coll_method_name(c.method), c.density, c.ef ? 1 : 0, c.ef_max_bytes, c.min_bytes,
                 c.min_repeats, pattern_list(c.allow).c_str(), pattern_list(c.deny).c_str());
    std::fprintf(stderr,
                 "[cc_coll] allreduce calls seen %" PRIu64 ", compressed %" PRIu64
                 " (per rank, max over ranks; summed over ranks: %" PRIu64 " seen, %" PRIu64 " compressed)\n",
                 max[0], max[1], sum[kSeen], sum[kCompressed]);
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

// Before PMPI_Finalize: destroy every libcc_coll communicator, then reduce
// the counters over MPI_COMM_WORLD (every rank takes part, whatever its
// CC_COLL_STATS says); rank 0 prints them when CC_COLL_STATS is on.
void teardown()
{
    State &s = state();
    if (!s.set_up.load() || s.torn_down.exchange(true)) return;
    s.active = false;
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
    const std::uint64_t local_sum[kCounters] = {s.seen.load(),    t.compressed,   t.bytes_uncompressed,
                                                t.bytes_wire,      t.pass_targeting, t.pass_repeats,
                                                t.pass_one_rank};
    std::uint64_t local_max[2] = {local_sum[kSeen], local_sum[kCompressed]};
    std::uint64_t sum[kCounters] = {}, max[2] = {0, 0};
    double t_max = 0, t_sum = 0;
    PMPI_Reduce(local_sum, sum, kCounters, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
    PMPI_Reduce(local_max, max, 2, MPI_UINT64_T, MPI_MAX, 0, MPI_COMM_WORLD);
    PMPI_Reduce(&t.seconds, &t_max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    PMPI_Reduce(&t.seconds, &t_sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    if (s.world_rank != 0) return;
    if (s.cfg.stats) {
        print_summary(s, sum, max, t_max, t_sum);
    } else if (s.settings_valid && s.cfg.method != CC_COLL_METHOD_NONE && !s.cfg.quiet) {
        std::fprintf(stderr,
                     "[cc_coll] preload: compressed %" PRIu64 " of %" PRIu64 " MPI_Allreduce calls (per rank, max "
                     "over ranks), %" PRIu64 " bytes before compression (summed over ranks); CC_COLL_STATS=1 "
                     "lists the call sites\n",
                     max[1], max[0], sum[kBytes]);
    }
}

// ---------------------------------------------------------------------------
// The decision and the compressed call.

// A predefined binary32 or binary64 type: the dtype and its size.
bool eligible_type(MPI_Datatype dt, cc_coll_dtype_t *dtype, int *size)
{
    const bool fp = dt == MPI_FLOAT || dt == MPI_REAL || dt == MPI_REAL4 || dt == MPI_DOUBLE ||
                    dt == MPI_DOUBLE_PRECISION || dt == MPI_REAL8;
    if (!fp || PMPI_Type_size(dt, size) != MPI_SUCCESS) return false;
    if (*size == 4) *dtype = CC_COLL_F32;
    else if (*size == 8) *dtype = CC_COLL_F64;
    else return false;
    return true;
}

// Prints `message` once per process and status, from rank 0 of the
// communicator (the statuses reported here happen on every rank together).
void report_once(int key, int comm_rank, const char *message, const char *detail)
{
    State &s = state();
    if (comm_rank != 0) return;
    {
        std::lock_guard<std::mutex> lock(s.mutex);
        if (!s.reported.insert(key).second) return;
    }
    std::fprintf(stderr, "[cc_coll] %s: %s; this call and later ones that meet the same condition pass through "
                 "to MPI uncompressed (reported once)\n",
                 message, detail);
}

// Whether a call's second-stage conditions can differ between ranks, so that
// the ranks must agree on each call (over the entry's `agree` duplicate).
bool needs_agreement(const State &s)
{
    return s.ef_cap || s.preflight_device || s.cfg.min_repeats > 0 || !s.cfg.allow.empty() || !s.cfg.deny.empty();
}

// The object, offset and symbol of a return address (dladdr), cached.
PreloadCallSite site_for(const void *ret)
{
    State &s = state();
    {
        std::lock_guard<std::mutex> lock(s.mutex);
        const auto it = s.sites.find(ret);
        if (it != s.sites.end()) return it->second;
    }
    PreloadCallSite site;
    Dl_info info{};
    if (ret != nullptr && dladdr(ret, &info) != 0) {
        std::string path = info.dli_fname != nullptr ? info.dli_fname : "";
        if (path.empty()) {  // the main program, on some C libraries
            char exe[4096];
            const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
            if (n > 0) path.assign(exe, static_cast<std::size_t>(n));
        }
        const std::size_t slash = path.rfind('/');
        site.object = slash == std::string::npos ? path : path.substr(slash + 1);
        site.offset = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(ret) -
                                                 reinterpret_cast<std::uintptr_t>(info.dli_fbase));
        if (info.dli_sname != nullptr) site.symbol = info.dli_sname;
    }
    std::lock_guard<std::mutex> lock(s.mutex);
    return s.sites.emplace(ret, site).first->second;
}

std::string comm_name(MPI_Comm comm)
{
    char name[MPI_MAX_OBJECT_NAME] = {0};
    int len = 0;
    if (PMPI_Comm_get_name(comm, name, &len) != MPI_SUCCESS) return "";
    return std::string(name, static_cast<std::size_t>(std::max(0, std::min(len, MPI_MAX_OBJECT_NAME))));
}

// The entry cached on `comm`, created at the communicator's first eligible
// call (collective: every rank makes that call). nullptr: pass through.
Entry *entry_for(MPI_Comm comm)
{
    State &s = state();
    void *value = nullptr;
    int flag = 0;
    if (PMPI_Comm_get_attr(comm, s.keyval, &value, &flag) != MPI_SUCCESS) return nullptr;
    if (flag) return static_cast<Entry *>(value);
    Entry *e = new Entry;
    e->user = comm;
    PMPI_Comm_rank(comm, &e->rank);
    const cc_coll_status_t st = cc_coll_comm_create(comm, &e->handle);
    const char *why = nullptr;
    if (st != CC_COLL_OK) {
        e->handle = nullptr;
        why = cc_coll_last_error();
    } else if (needs_agreement(s)) {
        int rc = PMPI_Comm_dup(comm, &e->agree);
        if (rc != MPI_SUCCESS) e->agree = MPI_COMM_NULL;
        else rc = PMPI_Comm_set_errhandler(e->agree, MPI_ERRORS_RETURN);
        if (rc != MPI_SUCCESS) {
            why = "MPI_Comm_dup of the communicator failed";
            if (e->agree != MPI_COMM_NULL) PMPI_Comm_free(&e->agree);
            cc_coll_comm_destroy(e->handle);
            e->handle = nullptr;
        }
    }
    if (why != nullptr && e->rank == 0)
        std::fprintf(stderr,
                     "[cc_coll] preload: cannot set up compression on a communicator: %s; its MPI_Allreduce "
                     "calls pass through to MPI uncompressed\n",
                     why);
    {
        std::lock_guard<std::mutex> lock(s.mutex);
        s.live.insert(e);
    }
    if (PMPI_Comm_set_attr(comm, s.keyval, e) != MPI_SUCCESS) {
        {
            std::lock_guard<std::mutex> lock(s.mutex);
            s.live.erase(e);
        }
        retire_all({e});
        return nullptr;
    }
    return e;
}

// Whether `p` is device (or managed) memory, as the collectives will decide
// it (cc_coll_buffer_on_device: it never starts CUDA, and costs tens of
// nanoseconds for host memory in a process without CUDA); a failure counts
// as host memory, and the library reports it on the call itself.
bool on_device(const void *p) { return cc_coll_buffer_on_device(p) == 1; }

// Bytes of a new residual for `count` elements of `dtype`: binary64 for F64,
// binary32 otherwise (cc_coll.h, "Error-feedback store").
std::uint64_t residual_bytes(std::size_t count, cc_coll_dtype_t dtype)
{
    return static_cast<std::uint64_t>(count) * (dtype == CC_COLL_F64 ? sizeof(double) : sizeof(float));
}

// Conditions that may hold on some ranks only: `bits`, the second stage of
// the decision taken by the caller (kBitTargeting, kBitRepeats), and those
// the library would detect before any communication: a new residual over
// CC_COLL_EF_MAX_BYTES (kBitEfCap), and ranks that disagree on where the
// buffers are (kBitDevice: device memory on some rank, kBitHost: host memory
// on some rank). Agreed on (MPI_BOR) over the shim's private duplicate so
// that every rank passes the call through together. Runs only when such a
// condition can arise (needs_agreement). *ef_held: this rank's residual bytes before the call when
// the call may create a residual, else UINT64_MAX.
int preflight(const Entry &e, const void *src, void *recv, std::size_t count, cc_coll_dtype_t dtype, int bits,
              std::uint64_t *ef_held)
{
    const State &s = state();
    *ef_held = UINT64_MAX;
    if (e.agree == MPI_COMM_NULL) return 0;
    if (s.ef_cap && e.residuals.count(ResidualKey{recv, count, dtype}) == 0) {
        std::uint64_t held = 0;
        // Should the count be unknown, the call passes through on every rank.
        if (cc_coll_ef_bytes(e.handle, &held) != CC_COLL_OK ||
            held + residual_bytes(count, dtype) > s.cfg.ef_max_bytes)
            bits |= kBitEfCap;
        else
            *ef_held = held;
    }
    if (s.preflight_device) bits |= on_device(src) || on_device(recv) ? kBitDevice : kBitHost;
    // Should the agreement itself fail, every rank passes the call through.
    if (PMPI_Allreduce(MPI_IN_PLACE, &bits, 1, MPI_INT, MPI_BOR, e.agree) != MPI_SUCCESS) return kBitTargeting;
    return bits;
}

// After a compressed call that could create a residual: remembers its key
// when it did (this rank's residual bytes grew).
void note_residual(Entry *e, void *recv, std::size_t count, cc_coll_dtype_t dtype, std::uint64_t held_before)
{
    if (held_before == UINT64_MAX) return;
    std::uint64_t held = 0;
    if (cc_coll_ef_bytes(e->handle, &held) == CC_COLL_OK && held > held_before)
        e->residuals.insert(ResidualKey{recv, count, dtype});
}

// Reports a failure seen on this rank only and hands MPI_ERR_* to the
// communicator's error handler, as a failing MPI call would.
int local_failure(MPI_Comm comm, int err, const char *what, const char *detail)
{
    std::fprintf(stderr,
                 "[cc_coll] rank %d: compressed MPI_Allreduce failed: %s: %s; returning %s through the "
                 "communicator's error handler\n",
                 state().world_rank, what, detail, err == MPI_ERR_NO_MEM ? "MPI_ERR_NO_MEM" : "MPI_ERR_OTHER");
    PMPI_Comm_call_errhandler(comm, err);
    return err;
}

// True when the call was handled here (MPI's return code in *rc); false:
// the caller passes it to MPI unchanged.
// `ret`: the return address of the program's MPI_Allreduce call (its call
// site).
bool intercept(const void *send, void *recv, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm, const void *ret,
               int *rc) noexcept
{
    State &s = state();
    if (!s.active.load() || s.torn_down.load()) return false;
    try {
        destroy_zombies();
        if (count <= 0 || op != MPI_SUM || comm == MPI_COMM_NULL) return false;
        cc_coll_dtype_t dtype = CC_COLL_F32;
        int size = 0;
        if (!eligible_type(dt, &dtype, &size)) return false;
        const std::uint64_t bytes = static_cast<std::uint64_t>(count) * static_cast<std::uint64_t>(size);
        if (bytes < s.cfg.min_bytes) return false;
        if (send == MPI_BOTTOM || recv == MPI_BOTTOM) return false;
        int inter = 0;
        if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS || inter) return false;
        // One rank: nothing moves, and MPI's result is the input itself.
        int comm_size = 0;
        if (PMPI_Comm_size(comm, &comm_size) != MPI_SUCCESS || comm_size < 2) {
            std::lock_guard<std::mutex> lock(s.mutex);
            s.totals.pass_one_rank += 1;
            return false;
        }
        Entry *e = entry_for(comm);
        if (e == nullptr || e->handle == nullptr) return false;

        // The second stage: this rank's view, agreed on in preflight.
        const std::size_t n = static_cast<std::size_t>(count);
        int local = 0;
        std::string name;
        const bool targeting = !s.cfg.allow.empty() || !s.cfg.deny.empty();
        if (targeting) {
            name = comm_name(comm);
            const PreloadCallSite site = site_for(ret);
            if (preload_patterns_match(s.cfg.deny, name, site) ||
                (!s.cfg.allow.empty() && !preload_patterns_match(s.cfg.allow, name, site)))
                local |= kBitTargeting;
        }
        if (s.cfg.min_repeats > 0) {
            if (e->repeats.size() >= kMaxRepeatKeys) e->repeats.clear();
            std::uint64_t &seen_before = e->repeats[RepeatKey{ret, recv, n, dtype}];
            if (seen_before < s.cfg.min_repeats) local |= kBitRepeats;
            if (seen_before < UINT64_MAX) ++seen_before;
        }

        const void *src = send == MPI_IN_PLACE ? recv : send;
        std::uint64_t ef_held = UINT64_MAX;
        const int bits = preflight(*e, src, recv, n, dtype, local, &ef_held);
        if (bits & (kBitTargeting | kBitRepeats)) {
            std::lock_guard<std::mutex> lock(s.mutex);
            if (bits & kBitTargeting) s.totals.pass_targeting += 1;
            else s.totals.pass_repeats += 1;
            return false;
        }
        if (bits & kBitEfCap)
            report_once(CC_COLL_ERR_EF_LIMIT, e->rank, "CC_COLL_EF_MAX_BYTES reached",
                        "a new error-feedback residual would pass the cap on some rank");
        const bool mixed = (bits & (kBitDevice | kBitHost)) == (kBitDevice | kBitHost);
        if (mixed)
            report_once(CC_COLL_ERR_MISMATCH, e->rank, "device buffers",
                        "some ranks pass device memory and others host memory to this MPI_Allreduce");
        if ((bits & kBitEfCap) != 0 || mixed) return false;

        cc_coll_params_t p{};
        p.mask = CC_COLL_PARAMS_FIELD_METHOD | CC_COLL_PARAMS_FIELD_DENSITY | CC_COLL_PARAMS_FIELD_EF;
        p.method = s.cfg.method;
        p.density = s.cfg.density;
        p.ef = s.cfg.ef ? 1 : 0;
        if (p.method == CC_COLL_METHOD_LOWRANK) {
            // An MPI_Allreduce buffer has no tensor shape (it is often a
            // whole bucket): LOWRANK's near-square view (rows = cols = 0),
            // not the dense sending of a tensor without a shape.
            p.mask |= CC_COLL_PARAMS_FIELD_SHAPE;
            p.rows = 0;
            p.cols = 0;
        }
        const double t0 = PMPI_Wtime();
        const cc_coll_status_t st = cc_coll_allreduce(src, recv, n, dtype, CC_COLL_SUM, &p, e->handle, nullptr);
        const double seconds = PMPI_Wtime() - t0;
        if (st == CC_COLL_OK) {
            note_residual(e, recv, n, dtype, ef_held);
            if (s.cfg.stats) {
                site_for(ret);  // resolved now, for the summary
                if (!targeting) name = comm_name(comm);
            }
            std::lock_guard<std::mutex> lock(s.mutex);
            if (s.cfg.stats) {
                SiteTotals &site = s.compressed_sites[SiteKey{ret, n, dtype}];
                site.calls += 1;
                site.bytes += bytes;
                site.comm = name.empty() ? "an unnamed communicator" : name;
            }
            s.totals.compressed += 1;
            s.totals.bytes_uncompressed += bytes;
            s.totals.seconds += seconds;
            *rc = MPI_SUCCESS;
            return true;
        }
        // Seen by every rank together (MISMATCH comes from the gathered
        // headers; the others cannot happen after the preflight, but are
        // consistent where they do): pass the call through.
        if (st == CC_COLL_ERR_MISMATCH || st == CC_COLL_ERR_EF_LIMIT || st == CC_COLL_ERR_NOT_SUPPORTED) {
            report_once(st, e->rank, cc_coll_status_string(st), cc_coll_last_error());
            return false;
        }
        *rc = local_failure(comm, st == CC_COLL_ERR_NO_MEMORY ? MPI_ERR_NO_MEM : MPI_ERR_OTHER,
                            cc_coll_status_string(st), cc_coll_last_error());
        return true;
    } catch (const std::bad_alloc &) {
        *rc = local_failure(comm, MPI_ERR_NO_MEM, "out of memory", "in the LD_PRELOAD shim");
    } catch (const std::exception &ex) {
        *rc = local_failure(comm, MPI_ERR_OTHER, "unexpected exception", ex.what());
    } catch (...) {
        *rc = local_failure(comm, MPI_ERR_OTHER, "unexpected exception", "non-standard");
    }
    return true;
}

// ---------------------------------------------------------------------------
// Fortran.

using FAllreduce = cc_coll_preload_f_allreduce_fn;
using FInit = cc_coll_preload_f_init_fn;
using FInitThread = cc_coll_preload_f_init_thread_fn;
using FFinalize = cc_coll_preload_f_finalize_fn;

// Whether MPICH's Fortran sentinels are not known yet: MPI's Fortran layer
// has not run, so the call goes to it as it is.
bool mpich_fortran_uninitialised() { return &MPIR_F_NeedInit != nullptr && MPIR_F_NeedInit != 0; }

bool is_fortran_in_place(const void *p)
{
    if (p == nullptr) return false;
    if (p == &mpi_fortran_in_place || p == &mpi_fortran_in_place_ || p == &mpi_fortran_in_place__ ||
        p == &MPI_FORTRAN_IN_PLACE)
        return true;
    return &MPIR_F_MPI_IN_PLACE != nullptr && MPIR_F_MPI_IN_PLACE != nullptr && p == MPIR_F_MPI_IN_PLACE;
}

bool is_fortran_bottom(const void *p)
{
    if (p == nullptr) return false;
    if (p == &mpi_fortran_bottom || p == &mpi_fortran_bottom_ || p == &mpi_fortran_bottom__ ||
        p == &MPI_FORTRAN_BOTTOM)
        return true;
    return &MPIR_F_MPI_BOTTOM != nullptr && MPIR_F_MPI_BOTTOM != nullptr && p == MPIR_F_MPI_BOTTOM;
}

void fortran_allreduce(FAllreduce real, void *s, void *r, MPI_Fint *count, MPI_Fint *dt, MPI_Fint *op,
                       MPI_Fint *comm, MPI_Fint *ierr, const void *ret)
{
    if (real != nullptr && mpich_fortran_uninitialised()) {
        Guard guard;
        real(s, r, count, dt, op, comm, ierr);
        return;
    }
    const void *cs = is_fortran_in_place(s) ? MPI_IN_PLACE : is_fortran_bottom(s) ? MPI_BOTTOM : s;
    void *cr = is_fortran_bottom(r) ? MPI_BOTTOM : r;
    if (t_depth == 0) {
        Guard guard;
        ensure_setup();
        state().seen++;
        int rc = MPI_SUCCESS;
        if (intercept(cs, cr, *count, PMPI_Type_f2c(*dt), PMPI_Op_f2c(*op), PMPI_Comm_f2c(*comm), ret, &rc)) {
            if (ierr) *ierr = static_cast<MPI_Fint>(rc);
            return;
        }
    }
    Guard guard;
    if (real) {
        real(s, r, count, dt, op, comm, ierr);
        return;
    }
    const int rc = PMPI_Allreduce(cs, cr, *count, PMPI_Type_f2c(*dt), PMPI_Op_f2c(*op), PMPI_Comm_f2c(*comm));
    if (ierr) *ierr = static_cast<MPI_Fint>(rc);
}

void after_init()
{
    int initialized = 0;
    PMPI_Initialized(&initialized);
    if (!initialized) return;
    int level = MPI_THREAD_SINGLE;
    PMPI_Query_thread(&level);
    setup(level);
}

void fortran_init(FInit real, MPI_Fint *ierr)
{
    Guard guard;
    if (real) {
        real(ierr);
    } else {
        const int rc = PMPI_Init(nullptr, nullptr);
        if (ierr) *ierr = static_cast<MPI_Fint>(rc);
    }
    after_init();
}

void fortran_init_thread(FInitThread real, MPI_Fint *required, MPI_Fint *provided, MPI_Fint *ierr)
{
    Guard guard;
    if (real) {
        real(required, provided, ierr);
    } else {
        int p = MPI_THREAD_SINGLE;
        const int rc = PMPI_Init_thread(nullptr, nullptr, *required, &p);
        *provided = static_cast<MPI_Fint>(p);
        if (ierr) *ierr = static_cast<MPI_Fint>(rc);
    }
    after_init();
}

void fortran_finalize(FFinalize real, MPI_Fint *ierr)
{
    Guard guard;
    teardown();
    if (real) {
        real(ierr);
    } else {
        const int rc = PMPI_Finalize();
        if (ierr) *ierr = static_cast<MPI_Fint>(rc);
    }
}

// ---------------------------------------------------------------------------
// The entry points, called by the front (core_api.h).

int core_init(int *argc, char ***argv)
{
    if (t_depth > 0) return PMPI_Init(argc, argv);
    Guard guard;
    const int rc = PMPI_Init(argc, argv);
    if (rc == MPI_SUCCESS) after_init();
    return rc;
}

int core_init_thread(int *argc, char ***argv, int required, int *provided)
{
    if (t_depth > 0) return PMPI_Init_thread(argc, argv, required, provided);
    Guard guard;
    const int rc = PMPI_Init_thread(argc, argv, required, provided);
    if (rc == MPI_SUCCESS) setup(*provided);
    return rc;
}

int core_finalize()
{
    if (t_depth > 0) return PMPI_Finalize();
    Guard guard;
    teardown();
    return PMPI_Finalize();
}

// A handle of this MPI from its register-wide form: the pointer itself, or
// the low bits of an integer handle.
template <typename Handle>
Handle from_wide(std::uintptr_t v)
{
    static_assert(sizeof(Handle) <= sizeof(std::uintptr_t), "an MPI handle wider than a register");
    if constexpr (std::is_pointer_v<Handle>) return reinterpret_cast<Handle>(v);
    else return static_cast<Handle>(static_cast<std::uint32_t>(v));
}

int core_allreduce(const void *sendbuf, void *recvbuf, int count, std::uintptr_t datatype, std::uintptr_t op,
                   std::uintptr_t comm, const void *ret)
{
    const MPI_Datatype dt = from_wide<MPI_Datatype>(datatype);
    const MPI_Op o = from_wide<MPI_Op>(op);
    const MPI_Comm c = from_wide<MPI_Comm>(comm);
    if (t_depth > 0) return PMPI_Allreduce(sendbuf, recvbuf, count, dt, o, c);
    Guard guard;
    ensure_setup();
    state().seen++;
    int rc = MPI_SUCCESS;
    if (intercept(sendbuf, recvbuf, count, dt, o, c, ret, &rc)) return rc;
    return PMPI_Allreduce(sendbuf, recvbuf, count, dt, o, c);
}

const cc_coll_preload_core kCore = {
    core_init,       core_init_thread, core_finalize,       core_allreduce,
    fortran_allreduce, fortran_init,   fortran_init_thread, fortran_finalize,
};

}  // namespace

extern "C" __attribute__((visibility("default"))) const cc_coll_preload_core *cc_coll_preload_core_get(int api)
{
    return api == CC_COLL_PRELOAD_CORE_API ? &kCore : nullptr;
}
