// libcc_coll_preload_core.so: the core of the LD_PRELOAD shim (a PMPI
// tool) that routes an unmodified MPI program's eligible MPI_Allreduce and
// MPI_Iallreduce calls through libcc_coll. See docs/preload.md for the
// user's view.
//
//  - What is preloaded is libcc_coll_preload.so (front.c): it exports the
//    interposed entry points, checks that the process runs the MPI this
//    core was built for, loads this core (RTLD_LOCAL) and hands it every
//    call through the table of core_api.h. The core exports nothing else.
//  - Wrapped: MPI_Init, MPI_Init_thread, MPI_Finalize, MPI_Allreduce,
//    MPI_Iallreduce and the completion functions of requests (MPI_Wait,
//    MPI_Test and their -all, -any and -some forms, MPI_Request_get_status)
//    (C); the Fortran entry points of the same in their four manglings
//    (Open MPI's Fortran bindings call PMPI_* directly, so a C-only shim
//    never sees a Fortran program; MPICH's call the C MPI_* functions, but
//    from inside MPI, so the program's call site would be lost), and their
//    mpi_f08 entries (mpi_allreduce_f08_, ...: Open MPI's; MPICH's mpi_f08
//    has the same names but for MPI_Allreduce and MPI_Iallreduce, which
//    reach the C entry points). Each Fortran wrapper forwards what it does
//    not handle to the MPI's entry the front found (pmpi_..., or where the
//    MPI has none, as for MPICH's mpi_f08, the entry itself).
//  - Every MPI call the core makes itself is a PMPI_* call, and so is every
//    MPI call of the library's objects, linked in statically: the core
//    defines, locally, the interposed MPI functions they call, forwarding
//    to PMPI ("libcc_coll's MPI calls", at the end). A thread-local depth
//    counter sends MPI calls made from inside a forwarded call (MPICH's
//    Fortran bindings) straight to PMPI.
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
//    one 4-byte MPI_BOR reduction on the shim's private duplicate of the
//    communicator (for MPI_Iallreduce a non-blocking one): a call is
//    compressed only where it is ready on every rank. Everything else goes
//    to PMPI_Allreduce / PMPI_Iallreduce (or the Fortran PMPI entry)
//    untouched. consider() holds the decision both share.
//  - An MPI_Iallreduce that is not passed through at once returns a
//    generalized request, completed when its collective completes (see
//    "MPI_Iallreduce: what a shim request is").
//  - Per MPI communicator one libcc_coll communicator, created at the first
//    eligible call and cached as an attribute; its delete callback queues it
//    for destruction (no MPI call inside the callback), done at the next
//    intercepted call once its requests have completed, or at MPI_Finalize.
//  - Dependencies: libcc_coll's public C ABI (cc_coll.h) and, for its
//    settings, core/preload_settings.hpp, and the front's table
//    (core_api.h); nothing else of the library's internals.
#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <condition_variable>
#include <deque>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <set>
#include <string>
#include <thread>
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
// Re-entry guard: > 0 while this thread is inside a wrapper, so that MPI
// calls reaching the front from inside a call the shim forwards (MPICH's
// Fortran bindings call the C functions) go straight to PMPI. libcc_coll's
// own MPI calls never reach the front (see "libcc_coll's MPI calls" at the
// end of this file).
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

// What CC_COLL_MIN_REPEATS counts: (return address of the MPI_Allreduce or
// MPI_Iallreduce call, receive buffer, count, dtype), per communicator and
// rank.
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

struct ShimRequest;

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
    // Guards `residuals`, which the thread that advances MPI_Iallreduce
    // requests also changes.
    std::mutex residuals_mutex;

    // MPI_Iallreduce (see "MPI_Iallreduce" below); the fields up to
    // in_flight are under Requests::drive.
    // Calls whose agreement has not been looked at yet, in posting order.
    std::deque<ShimRequest *> undecided;
    // The shim's duplicate of `agree` for the calls the agreement passes
    // through, made at the first MPI_Iallreduce that needs an agreement
    // (set before any request of the entry exists).
    MPI_Comm pass = MPI_COMM_NULL;
    bool pass_made = false;
    // Its requests that have not completed (the entry is destroyed only
    // without any).
    std::atomic<int> in_flight{0};
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
    // Of the compressed calls, those of MPI_Iallreduce (their time is not
    // in `seconds`: it runs while the program computes).
    std::uint64_t compressed_nonblocking = 0;
};

struct State {
    std::mutex mutex;  // guards everything but the atomics
    std::atomic<bool> set_up{false};
    std::atomic<bool> torn_down{false};
    std::atomic<bool> active{false};  // compress eligible calls
    std::atomic<bool> have_zombies{false};
    std::atomic<std::uint64_t> seen{0};
    std::atomic<std::uint64_t> seen_nonblocking{0};  // MPI_Iallreduce calls (in `seen` too)
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

// ---------------------------------------------------------------------------
// MPI_Iallreduce: what a shim request is (the machinery is further down,
// under "MPI_Iallreduce").
//
// An eligible MPI_Iallreduce gives the program a generalized request
// (MPI_Grequest_start) whose extra state is a ShimRequest. The shim
// completes it (MPI_Grequest_complete) once the collective behind it has
// completed: libcc_coll's request (cc_coll_iallreduce), or, where the ranks'
// agreement passes the call through, MPI's own MPI_Iallreduce on the shim's
// duplicate `pass`. Until then the program's completion functions (MPI_Wait,
// MPI_Test, ...) advance it, as does, under MPI_THREAD_MULTIPLE, the shim's
// progress thread.

struct ShimRequest {
    enum class Step {
        kAgreeing,     // the agreement (4-byte MPI_Iallreduce on `agree`) in flight
        kPassing,      // MPI_Iallreduce on `pass` in flight
        kCompressing,  // libcc_coll's request in flight
    };
    // Two owners: MPI (until it calls the free callback) and the shim (until
    // it has called MPI_Grequest_complete); the last one deletes it.
    std::atomic<int> refs{2};
    // The request's MPI error, set before MPI_Grequest_complete and read by
    // the query callback.
    std::atomic<int> error{MPI_SUCCESS};
    MPI_Request user = MPI_REQUEST_NULL;  // the generalized request
    Step step = Step::kAgreeing;
    Entry *e = nullptr;
    // The call, as the program made it (sendbuf may be MPI_IN_PLACE) and as
    // libcc_coll takes it.
    const void *send = nullptr;
    void *recv = nullptr;
    int count = 0;
    MPI_Datatype datatype = MPI_DATATYPE_NULL;
    const void *src = nullptr;
    std::size_t n = 0;
    cc_coll_dtype_t dtype = CC_COLL_F32;
    std::uint64_t bytes = 0;
    const void *ret = nullptr;  // call site
    std::string comm;           // the communicator's name, for the summary
    int bits = 0;               // the agreement's buffer
    MPI_Request agree = MPI_REQUEST_NULL;
    MPI_Request pass = MPI_REQUEST_NULL;
    cc_coll_request_h lib = nullptr;
    bool reserved = false;  // put its residual's key in e->residuals ahead of the call
};

void release(ShimRequest *r)
{
    if (r->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete r;
}

// After this many rounds of the progress thread in a row that move nothing,
// it sleeps kIdleSleep between rounds instead of yielding.
constexpr int kSpinRounds = 64;
constexpr auto kIdleSleep = std::chrono::microseconds(50);

struct Requests {
    // Held while advancing requests, and guards every field up to
    // `pending` and each Entry's `undecided`.
    // MPI may be called under it; the generalized requests' callbacks,
    // which MPI runs under its own locks, never take it.
    std::mutex drive;
    std::vector<Entry *> deciding;        // entries with undecided calls
    std::vector<ShimRequest *> running;   // kPassing and kCompressing
    // Requests not completed yet: while 0 the completion functions go
    // straight to MPI.
    std::atomic<std::size_t> pending{0};
    // The progress thread (MPI_THREAD_MULTIPLE only).
    std::mutex thread_mutex;
    std::condition_variable wake;
    std::thread thread;
    bool stop = false;  // under thread_mutex
};

Requests &requests()
{
    static Requests *q = new Requests;  // never destroyed: its thread may outlive static destructors
    return *q;
}

bool shim_pending() { return requests().pending.load(std::memory_order_acquire) != 0; }

void finish_requests();

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
    if (e->pass != MPI_COMM_NULL) PMPI_Comm_free(&e->pass);
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

// Whether an entry has nothing of MPI_Iallreduce in flight (the user
// communicator may be freed with requests pending: they complete first).
// Under Requests::drive.
bool idle_locked(const Entry *e) { return e->in_flight.load() == 0 && e->undecided.empty(); }

// Destroys the communicators whose user communicator was freed, once their
// requests have completed. Runs outside attribute callbacks.
void destroy_zombies()
{
    State &s = state();
    if (!s.have_zombies.load()) return;
    std::vector<Entry *> zombies, ready, later;
    {
        std::lock_guard<std::mutex> lock(s.mutex);
        zombies.swap(s.zombies);
        s.have_zombies = false;
    }
    {
        std::lock_guard<std::mutex> lock(requests().drive);
        for (Entry *e : zombies) (idle_locked(e) ? ready : later).push_back(e);
    }
    if (!later.empty()) {
        std::lock_guard<std::mutex> lock(s.mutex);
        s.zombies.insert(s.zombies.end(), later.begin(), later.end());
        s.have_zombies = true;
    }
    retire_all(ready);
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

// This rank's residual bytes on the entry's communicator, in *held: the
// library's count, or, while MPI_Iallreduce requests are in flight on it
// (the library then does not answer), the bytes of every residual the
// shim's calls may have created (e.residuals: observed, or reserved ahead
// of a request), which is never less. *estimated says which. False when
// neither is known.
bool held_bytes(Entry &e, std::uint64_t *held, bool *estimated)
{
    *estimated = false;
    if (cc_coll_ef_bytes(e.handle, held) == CC_COLL_OK) return true;
    if (e.in_flight.load() == 0) return false;
    std::uint64_t sum = 0;
    for (const ResidualKey &k : e.residuals)
        sum += residual_bytes(std::get<1>(k), static_cast<cc_coll_dtype_t>(std::get<2>(k)));
    *held = sum;
    *estimated = true;
    return true;
}

// What the shim knows of a call's residual under CC_COLL_EF_MAX_BYTES.
struct EfCheck {
    std::uint64_t held = UINT64_MAX;  // this rank's residual bytes before the call; UINT64_MAX: no new residual
    bool estimated = false;           // held is the shim's bound (held_bytes)
};

// The conditions of this rank that the library would detect before any
// communication: a new residual over CC_COLL_EF_MAX_BYTES (kBitEfCap), and
// where the buffers are (kBitDevice, kBitHost). With `reserve`, a call that
// may create a residual puts its key in e.residuals at once (*reserved),
// so that the calls posted after it, before it runs, count its bytes.
int local_bits(Entry &e, const void *src, void *recv, std::size_t count, cc_coll_dtype_t dtype, EfCheck *ef,
               bool reserve, bool *reserved)
{
    const State &s = state();
    int bits = 0;
    if (s.ef_cap) {
        std::lock_guard<std::mutex> lock(e.residuals_mutex);
        const ResidualKey key{recv, count, dtype};
        if (e.residuals.count(key) == 0) {
            std::uint64_t held = 0;
            bool estimated = false;
            // Should the count be unknown, the call passes through on every rank.
            if (!held_bytes(e, &held, &estimated) || held + residual_bytes(count, dtype) > s.cfg.ef_max_bytes) {
                bits |= kBitEfCap;
            } else {
                ef->held = held;
                ef->estimated = estimated;
                if (reserve) *reserved = e.residuals.insert(key).second;
            }
        }
    }
    if (s.preflight_device) bits |= on_device(src) || on_device(recv) ? kBitDevice : kBitHost;
    return bits;
}

// Conditions that may hold on some ranks only: `bits`, the second stage of
// the decision taken by the caller (kBitTargeting, kBitRepeats), and
// local_bits'. Agreed on (MPI_BOR) over the shim's private duplicate so
// that every rank passes the call through together. Runs only when such a
// condition can arise (needs_agreement).
int preflight(Entry &e, const void *src, void *recv, std::size_t count, cc_coll_dtype_t dtype, int bits,
              EfCheck *ef)
{
    *ef = EfCheck{};
    if (e.agree == MPI_COMM_NULL) return 0;
    bits |= local_bits(e, src, recv, count, dtype, ef, false, nullptr);
    // Should the agreement itself fail, every rank passes the call through.
    if (PMPI_Allreduce(MPI_IN_PLACE, &bits, 1, MPI_INT, MPI_BOR, e.agree) != MPI_SUCCESS) return kBitTargeting;
    return bits;
}

// After a compressed call that could create a residual: remembers its key
// when it did (this rank's residual bytes grew), or may have (the count
// before it was the shim's bound).
void note_residual(Entry *e, void *recv, std::size_t count, cc_coll_dtype_t dtype, const EfCheck &ef)
{
    if (ef.held == UINT64_MAX) return;
    std::uint64_t held = 0;
    const bool known = cc_coll_ef_bytes(e->handle, &held) == CC_COLL_OK;
    if (ef.estimated || !known || held > ef.held) {
        std::lock_guard<std::mutex> lock(e->residuals_mutex);
        e->residuals.insert(ResidualKey{recv, count, dtype});
    }
}

// The verdict on agreed bits: true to compress; otherwise every rank passes
// the call through (counted, and reported once where it is a cap or the
// buffers' place).
bool agreed_to_compress(const Entry &e, int bits)
{
    State &s = state();
    if (bits & (kBitTargeting | kBitRepeats)) {
        std::lock_guard<std::mutex> lock(s.mutex);
        if (bits & kBitTargeting) s.totals.pass_targeting += 1;
        else s.totals.pass_repeats += 1;
        return false;
    }
    if (bits & kBitEfCap)
        report_once(CC_COLL_ERR_EF_LIMIT, e.rank, "CC_COLL_EF_MAX_BYTES reached",
                    "a new error-feedback residual would pass the cap on some rank");
    const bool mixed = (bits & (kBitDevice | kBitHost)) == (kBitDevice | kBitHost);
    if (mixed)
        report_once(CC_COLL_ERR_MISMATCH, e.rank, "device buffers",
                    "some ranks pass device memory and others host memory to this MPI_Allreduce");
    return (bits & kBitEfCap) == 0 && !mixed;
}

// Whether libcc_coll's status is one that every rank sees together, so that
// every rank can pass the call through (MISMATCH comes from the gathered
// headers; the others cannot happen after the agreement, but are
// consistent where they do).
bool failed_together(cc_coll_status_t st)
{
    return st == CC_COLL_ERR_MISMATCH || st == CC_COLL_ERR_EF_LIMIT || st == CC_COLL_ERR_NOT_SUPPORTED;
}

// The parameters of every compressed call, from the settings.
cc_coll_params_t compress_params()
{
    const State &s = state();
    cc_coll_params_t p{};
    p.mask = CC_COLL_PARAMS_FIELD_METHOD | CC_COLL_PARAMS_FIELD_DENSITY | CC_COLL_PARAMS_FIELD_EF;
    p.method = s.cfg.method;
    p.density = s.cfg.density;
    p.ef = s.cfg.ef ? 1 : 0;
    if (p.method == CC_COLL_METHOD_LOWRANK || p.method == CC_COLL_METHOD_AUTO) {
        // An MPI_Allreduce buffer has no tensor shape (it is often a
        // whole bucket): LOWRANK's near-square view (rows = cols = 0),
        // not the dense sending of a tensor without a shape.
        p.mask |= CC_COLL_PARAMS_FIELD_SHAPE;
        p.rows = 0;
        p.cols = 0;
    }
    return p;
}

// Counts a compressed call that completed (`seconds`: its time, blocking
// calls only).
void count_compressed(const void *ret, std::size_t n, cc_coll_dtype_t dtype, std::uint64_t bytes,
                      const std::string &comm, double seconds, bool nonblocking)
{
    State &s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.cfg.stats) {
        SiteTotals &site = s.compressed_sites[SiteKey{ret, n, dtype}];
        site.calls += 1;
        site.bytes += bytes;
        site.comm = comm.empty() ? "an unnamed communicator" : comm;
    }
    s.totals.compressed += 1;
    s.totals.bytes_uncompressed += bytes;
    s.totals.seconds += seconds;
    if (nonblocking) s.totals.compressed_nonblocking += 1;
}

const char *mpi_error_name(int err) { return err == MPI_ERR_NO_MEM ? "MPI_ERR_NO_MEM" : "MPI_ERR_OTHER"; }

// Reports a failure seen on this rank only and hands MPI_ERR_* to the
// communicator's error handler, as a failing MPI call would. `fn`: the MPI
// function the program called.
int local_failure(const char *fn, MPI_Comm comm, int err, const char *what, const char *detail)
{
    std::fprintf(stderr,
                 "[cc_coll] rank %d: compressed %s failed: %s: %s; returning %s through the communicator's error "
                 "handler\n",
                 state().world_rank, fn, what, detail, mpi_error_name(err));
    PMPI_Comm_call_errhandler(comm, err);
    return err;
}

// A call that passed stage 1 and has its entry, with this rank's stage 2.
struct Candidate {
    Entry *e = nullptr;
    const void *src = nullptr;  // sendbuf, or recvbuf for MPI_IN_PLACE
    std::size_t n = 0;
    cc_coll_dtype_t dtype = CC_COLL_F32;
    std::uint64_t bytes = 0;
    int local = 0;           // kBitTargeting, kBitRepeats on this rank
    bool targeting = false;  // CC_COLL_ALLOW or CC_COLL_DENY set
    std::string name;        // the communicator's name when targeting
};

// The decision up to the agreement, the same for MPI_Allreduce and
// MPI_Iallreduce: stage 1, the communicator's entry, and this rank's stage
// 2 (its key counted for CC_COLL_MIN_REPEATS). False: the call passes
// through to MPI unchanged. `ret`: the return address of the program's call
// (its call site).
bool consider(const void *send, void *recv, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm, const void *ret,
              Candidate *c)
{
    State &s = state();
    destroy_zombies();
    if (count <= 0 || op != MPI_SUM || comm == MPI_COMM_NULL) return false;
    int size = 0;
    if (!eligible_type(dt, &c->dtype, &size)) return false;
    c->bytes = static_cast<std::uint64_t>(count) * static_cast<std::uint64_t>(size);
    if (c->bytes < s.cfg.min_bytes) return false;
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
    c->e = entry_for(comm);
    if (c->e == nullptr || c->e->handle == nullptr) return false;

    // The second stage: this rank's view, agreed on by the caller.
    c->n = static_cast<std::size_t>(count);
    c->targeting = !s.cfg.allow.empty() || !s.cfg.deny.empty();
    if (c->targeting) {
        c->name = comm_name(comm);
        const PreloadCallSite site = site_for(ret);
        if (preload_patterns_match(s.cfg.deny, c->name, site) ||
            (!s.cfg.allow.empty() && !preload_patterns_match(s.cfg.allow, c->name, site)))
            c->local |= kBitTargeting;
    }
    if (s.cfg.min_repeats > 0) {
        Entry *e = c->e;
        if (e->repeats.size() >= kMaxRepeatKeys) e->repeats.clear();
        std::uint64_t &seen_before = e->repeats[RepeatKey{ret, recv, c->n, c->dtype}];
        if (seen_before < s.cfg.min_repeats) c->local |= kBitRepeats;
        if (seen_before < UINT64_MAX) ++seen_before;
    }
    c->src = send == MPI_IN_PLACE ? recv : send;
    return true;
}

// Before a blocking call on an entry's communicator: the MPI_Iallreduce
// calls posted on it before are decided and handed to libcc_coll or MPI
// first, so that every rank hands libcc_coll its collectives in the same
// order. Every rank posted their agreements before this call, so this waits
// for nothing that is not already on its way.
void settle(Entry *e);

// True when the call was handled here (MPI's return code in *rc); false:
// the caller passes it to MPI unchanged.
bool intercept(const void *send, void *recv, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm, const void *ret,
               int *rc) noexcept
{
    State &s = state();
    if (!s.active.load() || s.torn_down.load()) return false;
    try {
        Candidate c;
        if (!consider(send, recv, count, dt, op, comm, ret, &c)) return false;
        Entry *e = c.e;
        settle(e);
        EfCheck ef;
        const int bits = preflight(*e, c.src, recv, c.n, c.dtype, c.local, &ef);
        if (!agreed_to_compress(*e, bits)) return false;

        const cc_coll_params_t p = compress_params();
        const double t0 = PMPI_Wtime();
        const cc_coll_status_t st = cc_coll_allreduce(c.src, recv, c.n, c.dtype, CC_COLL_SUM, &p, e->handle, nullptr);
        const double seconds = PMPI_Wtime() - t0;
        if (st == CC_COLL_OK) {
            note_residual(e, recv, c.n, c.dtype, ef);
            if (s.cfg.stats) {
                site_for(ret);  // resolved now, for the summary
                if (!c.targeting) c.name = comm_name(comm);
            }
            count_compressed(ret, c.n, c.dtype, c.bytes, c.name, seconds, false);
            *rc = MPI_SUCCESS;
            return true;
        }
        // Seen by every rank together: pass the call through.
        if (failed_together(st)) {
            report_once(st, e->rank, cc_coll_status_string(st), cc_coll_last_error());
            return false;
        }
        *rc = local_failure("MPI_Allreduce", comm, st == CC_COLL_ERR_NO_MEMORY ? MPI_ERR_NO_MEM : MPI_ERR_OTHER,
                            cc_coll_status_string(st), cc_coll_last_error());
        return true;
    } catch (const std::bad_alloc &) {
        *rc = local_failure("MPI_Allreduce", comm, MPI_ERR_NO_MEM, "out of memory", "in the LD_PRELOAD shim");
    } catch (const std::exception &ex) {
        *rc = local_failure("MPI_Allreduce", comm, MPI_ERR_OTHER, "unexpected exception", ex.what());
    } catch (...) {
        *rc = local_failure("MPI_Allreduce", comm, MPI_ERR_OTHER, "unexpected exception", "non-standard");
    }
    return true;
}

// ---------------------------------------------------------------------------
// MPI_Iallreduce.
//
// The same decision as MPI_Allreduce (consider), but nothing in the call
// waits for the other ranks, as MPI_Iallreduce must not: where the ranks
// must agree (needs_agreement), the call posts its 4-byte agreement as an
// MPI_Iallreduce on the entry's `agree` duplicate, in the program's order,
// and returns its generalized request. Once the agreement has completed the
// call is decided, in posting order per communicator: compressed
// (cc_coll_iallreduce on the entry's libcc_coll communicator) or passed
// through (MPI_Iallreduce with the program's own arguments on the entry's
// `pass` duplicate, which only these calls use, so that their order there
// is the same on every rank whenever each rank gets to decide them). The
// first such call on a communicator makes `pass` (MPI_Comm_dup, collective:
// MPI_Comm_idup's context-id agreement, run from MPI's progress, was seen to
// hang beside the shim's own collectives on `agree`). Where nothing can
// differ between ranks there is no agreement: the call is compressed at
// once. Calls that stage 1 passes through go to PMPI_Iallreduce and the
// program gets MPI's own request.
//
// Requests advance in advance_locked: from the completion functions and
// MPI_Iallreduce, from a blocking call on the same communicator (settle),
// from MPI_Finalize (finish_requests), and under MPI_THREAD_MULTIPLE from
// the shim's progress thread, so that they also complete while the program
// waits in a call the shim does not see.

// The generalized request's callbacks. MPI may run them under its own
// locks: they take none of the shim's.
int query_request(void *extra, MPI_Status *status)
{
    const ShimRequest *r = static_cast<const ShimRequest *>(extra);
    const int err = r->error.load(std::memory_order_acquire);
    // A collective's status: empty, but for the error.
    PMPI_Status_set_elements(status, MPI_BYTE, 0);
    PMPI_Status_set_cancelled(status, 0);
    status->MPI_SOURCE = MPI_ANY_SOURCE;
    status->MPI_TAG = MPI_ANY_TAG;
    status->MPI_ERROR = err;
    return err;
}

int free_request(void *extra)
{
    release(static_cast<ShimRequest *>(extra));
    return MPI_SUCCESS;
}

// A collective cannot be cancelled (the other ranks take part in it): the
// request runs to its end and its status says it was not cancelled.
int cancel_request(void *, int) { return MPI_SUCCESS; }

// A failure of one request, seen on this rank: reported, and the request's
// MPI error.
void fail_request(ShimRequest *r, int err, const char *what, const char *detail)
{
    char code[48];
    if (err == MPI_ERR_NO_MEM || err == MPI_ERR_OTHER) std::snprintf(code, sizeof code, "%s", mpi_error_name(err));
    else std::snprintf(code, sizeof code, "MPI's error code %d", err);
    std::fprintf(stderr, "[cc_coll] rank %d: compressed MPI_Iallreduce failed: %s: %s; its request completes with %s\n",
                 state().world_rank, what, detail, code);
    r->error.store(err, std::memory_order_release);
}

// Gives back the residual key a request reserved, when it does not run
// compressed.
void unreserve(ShimRequest *r)
{
    if (!r->reserved) return;
    r->reserved = false;
    std::lock_guard<std::mutex> lock(r->e->residuals_mutex);
    r->e->residuals.erase(ResidualKey{r->recv, r->n, r->dtype});
}

// Hands a request to libcc_coll. kPosted; kPassThrough: a status every
// rank sees together, so every rank passes the call through; kFailed: this
// rank's failure, libcc_coll's status in *st (its message in
// cc_coll_last_error()).
enum class Posting { kPosted, kPassThrough, kFailed };
Posting post_compressed(ShimRequest *r, cc_coll_status_t *st)
{
    const cc_coll_params_t p = compress_params();
    cc_coll_request_h h = nullptr;
    *st = cc_coll_iallreduce(r->src, r->recv, r->n, r->dtype, CC_COLL_SUM, &p, r->e->handle, nullptr, &h);
    if (*st == CC_COLL_OK) {
        r->lib = h;
        r->step = ShimRequest::Step::kCompressing;
        return Posting::kPosted;
    }
    if (failed_together(*st)) {
        report_once(*st, r->e->rank, cc_coll_status_string(*st), cc_coll_last_error());
        return Posting::kPassThrough;
    }
    return Posting::kFailed;
}

int mpi_error_of(cc_coll_status_t st) { return st == CC_COLL_ERR_NO_MEMORY ? MPI_ERR_NO_MEM : MPI_ERR_OTHER; }

// Decides and posts the undecided calls of an entry whose agreement has
// completed, in order; stops at the first whose agreement has not. Failed
// requests go to *done. Returns whether a call moved. Under
// Requests::drive.
bool decide_locked(Entry *e, std::vector<ShimRequest *> *done)
{
    Requests &q = requests();
    bool moved = false;
    while (!e->undecided.empty()) {
        ShimRequest *r = e->undecided.front();
        int flag = 0;
        const int rc = PMPI_Test(&r->agree, &flag, MPI_STATUS_IGNORE);
        if (rc == MPI_SUCCESS && flag == 0) return moved;
        // Should the agreement itself fail, every rank passes the call
        // through.
        if (rc != MPI_SUCCESS) r->bits = kBitTargeting;
        moved = true;
        e->undecided.pop_front();
        if (agreed_to_compress(*e, r->bits)) {
            cc_coll_status_t st = CC_COLL_OK;
            const Posting posting = post_compressed(r, &st);
            if (posting == Posting::kPosted) {
                q.running.push_back(r);
                continue;
            }
            if (posting == Posting::kFailed) {
                fail_request(r, mpi_error_of(st), cc_coll_status_string(st), cc_coll_last_error());
                unreserve(r);
                done->push_back(r);
                continue;
            }
        }
        // Passed through, on `pass`.
        unreserve(r);
        const int err = e->pass == MPI_COMM_NULL
                            ? MPI_ERR_COMM
                            : PMPI_Iallreduce(r->send, r->recv, r->count, r->datatype, MPI_SUM, e->pass, &r->pass);
        if (err != MPI_SUCCESS) {
            fail_request(r, err, "MPI_Iallreduce",
                         e->pass == MPI_COMM_NULL ? "the shim could not duplicate the communicator"
                                                  : "MPI failed to start the uncompressed call");
            done->push_back(r);
            continue;
        }
        r->step = ShimRequest::Step::kPassing;
        q.running.push_back(r);
    }
    return moved;
}

// Whether a running request has completed (advancing libcc_coll's requests
// when the caller drives them). Under Requests::drive.
bool finished_locked(ShimRequest *r)
{
    if (r->step == ShimRequest::Step::kPassing) {
        int flag = 0;
        const int rc = PMPI_Test(&r->pass, &flag, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) {
            r->error.store(rc, std::memory_order_release);
            return true;
        }
        return flag != 0;
    }
    int done = 0;
    const cc_coll_status_t st = cc_coll_test(r->lib, &done);
    if (done == 0 && st == CC_COLL_OK) return false;
    if (st == CC_COLL_OK) {
        count_compressed(r->ret, r->n, r->dtype, r->bytes, r->comm, 0.0, true);
    } else {
        const char *message = "";
        if (done == 0 || cc_coll_request_status(r->lib, nullptr, nullptr, &message) != CC_COLL_OK)
            message = cc_coll_last_error();
        fail_request(r, mpi_error_of(st), cc_coll_status_string(st), message);
    }
    cc_coll_request_free(r->lib);
    r->lib = nullptr;
    return true;
}

// Completes a request: MPI_Grequest_complete, then the shim lets go of it.
void complete(ShimRequest *r)
{
    Requests &q = requests();
    r->e->in_flight.fetch_sub(1);
    PMPI_Grequest_complete(r->user);
    q.pending.fetch_sub(1, std::memory_order_acq_rel);
    release(r);
}

// Advances every request once. Returns whether any moved. Under
// Requests::drive.
bool advance_locked()
{
    Requests &q = requests();
    bool moved = false;
    std::vector<ShimRequest *> done;
    for (std::size_t i = 0; i < q.deciding.size();) {
        Entry *e = q.deciding[i];
        moved = decide_locked(e, &done) || moved;
        if (e->undecided.empty()) {
            q.deciding.erase(q.deciding.begin() + static_cast<std::ptrdiff_t>(i));
        } else {
            ++i;
        }
    }
    for (std::size_t i = 0; i < q.running.size();) {
        ShimRequest *r = q.running[i];
        if (finished_locked(r)) {
            done.push_back(r);
            q.running.erase(q.running.begin() + static_cast<std::ptrdiff_t>(i));
        } else {
            ++i;
        }
    }
    for (ShimRequest *r : done) complete(r);
    return moved || !done.empty();
}

// One round from a completion function: advances the requests unless
// another thread is doing so.
bool poke()
{
    std::unique_lock<std::mutex> lock(requests().drive, std::try_to_lock);
    return lock.owns_lock() && advance_locked();
}

void settle(Entry *e)
{
    Requests &q = requests();
    for (;;) {
        {
            std::lock_guard<std::mutex> lock(q.drive);
            if (e->undecided.empty()) return;
            if (advance_locked()) continue;
        }
        std::this_thread::yield();
    }
}

// The shim's progress thread (MPI_THREAD_MULTIPLE): advances the requests
// while there are any.
void progress_main()
{
    Requests &q = requests();
    int idle = 0;
    for (;;) {
        {
            std::unique_lock<std::mutex> lock(q.thread_mutex);
            q.wake.wait(lock, [&] { return q.stop || q.pending.load() != 0; });
            if (q.stop) return;
        }
        if (poke()) {
            idle = 0;
        } else if (++idle < kSpinRounds) {
            std::this_thread::yield();
        } else {
            std::this_thread::sleep_for(kIdleSleep);
        }
    }
}

// Counts a new request as pending, and wakes (or starts) the progress
// thread under MPI_THREAD_MULTIPLE.
void add_pending()
{
    Requests &q = requests();
    if (q.pending.fetch_add(1, std::memory_order_acq_rel) != 0) return;
    if (state().thread_level != MPI_THREAD_MULTIPLE) return;
    {
        std::lock_guard<std::mutex> lock(q.thread_mutex);
        if (q.stop) return;
        if (!q.thread.joinable()) q.thread = std::thread(progress_main);
    }
    q.wake.notify_one();
}

// At MPI_Finalize: every request runs to its end (every rank does the same
// in its MPI_Finalize), and the progress thread stops.
void finish_requests()
{
    Requests &q = requests();
    for (;;) {
        {
            std::lock_guard<std::mutex> lock(q.drive);
            advance_locked();
            if (q.pending.load() == 0) break;
        }
        std::this_thread::yield();
    }
    std::thread t;
    {
        std::lock_guard<std::mutex> lock(q.thread_mutex);
        q.stop = true;
        t = std::move(q.thread);
    }
    q.wake.notify_all();
    if (t.joinable()) t.join();
}

// True when the call was handled here: *request is the program's request
// and *rc MPI_SUCCESS, or *rc an error; false: the caller passes the call to
// MPI unchanged.
bool intercept_nonblocking(const void *send, void *recv, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm,
                           const void *ret, MPI_Request *request, int *rc) noexcept
{
    State &s = state();
    if (!s.active.load() || s.torn_down.load()) return false;
    // Until a request is handed out, a failure leaves the program none.
    *request = MPI_REQUEST_NULL;
    std::unique_ptr<ShimRequest> owned;
    try {
        Candidate c;
        if (!consider(send, recv, count, dt, op, comm, ret, &c)) return false;
        Entry *e = c.e;
        owned = std::make_unique<ShimRequest>();
        ShimRequest *r = owned.get();
        r->e = e;
        r->send = send;
        r->recv = recv;
        r->count = count;
        r->datatype = dt;
        r->src = c.src;
        r->n = c.n;
        r->dtype = c.dtype;
        r->bytes = c.bytes;
        r->ret = ret;
        if (s.cfg.stats) {
            site_for(ret);  // resolved now, for the summary
            r->comm = c.targeting ? c.name : comm_name(comm);
        }
        const bool agree = e->agree != MPI_COMM_NULL;
        if (agree && !e->pass_made) {
            // Collective, like the creation of the entry: every rank makes
            // this call, the first of its kind on the communicator.
            e->pass_made = true;
            if (PMPI_Comm_dup(e->agree, &e->pass) != MPI_SUCCESS) e->pass = MPI_COMM_NULL;
        }
        if (agree) {
            EfCheck ef;
            r->bits = c.local | local_bits(*e, c.src, recv, c.n, c.dtype, &ef, true, &r->reserved);
        } else {
            cc_coll_status_t st = CC_COLL_OK;
            const Posting posting = post_compressed(r, &st);
            if (posting == Posting::kPassThrough) return false;
            if (posting == Posting::kFailed) {
                *rc = local_failure("MPI_Iallreduce", comm, mpi_error_of(st), cc_coll_status_string(st),
                                    cc_coll_last_error());
                return true;
            }
        }
        int err = PMPI_Grequest_start(query_request, free_request, cancel_request, r, &r->user);
        if (err != MPI_SUCCESS) {
            // Nothing of it is on the wire, but for a compressed request.
            if (r->lib != nullptr) cc_coll_request_free(r->lib);
            unreserve(r);
            *rc = local_failure("MPI_Iallreduce", comm, MPI_ERR_OTHER, "MPI_Grequest_start failed",
                                "no request for the program");
            return true;
        }
        // The agreement is posted by the thread that makes the call, in the
        // program's order on the communicator (MPI has the program make a
        // communicator's collectives from one thread at a time).
        if (agree && (err = PMPI_Iallreduce(MPI_IN_PLACE, &r->bits, 1, MPI_INT, MPI_BOR, e->agree, &r->agree)) !=
                         MPI_SUCCESS) {
            // The generalized request goes back to MPI, completed and freed.
            unreserve(r);
            r->refs.store(1);
            MPI_Request user = r->user;
            PMPI_Grequest_complete(user);
            PMPI_Request_free(&user);
            (void)owned.release();  // free_request deletes it
            *rc = local_failure("MPI_Iallreduce", comm, MPI_ERR_OTHER, "the agreement failed",
                                "MPI_Iallreduce of the shim's agreement could not start");
            return true;
        }
        Requests &q = requests();
        std::lock_guard<std::mutex> lock(q.drive);
        if (agree) {
            if (e->undecided.empty()) q.deciding.push_back(e);
            e->undecided.push_back(r);
        } else {
            q.running.push_back(r);
        }
        e->in_flight.fetch_add(1);
        *request = r->user;
        owned.release();
        add_pending();
        advance_locked();
        *rc = MPI_SUCCESS;
        return true;
    } catch (const std::bad_alloc &) {
        // A generalized request already started stays MPI's (leaked).
        if (owned && owned->user != MPI_REQUEST_NULL) (void)owned.release();
        *rc = local_failure("MPI_Iallreduce", comm, MPI_ERR_NO_MEM, "out of memory", "in the LD_PRELOAD shim");
    } catch (const std::exception &ex) {
        if (owned && owned->user != MPI_REQUEST_NULL) (void)owned.release();
        *rc = local_failure("MPI_Iallreduce", comm, MPI_ERR_OTHER, "unexpected exception", ex.what());
    } catch (...) {
        if (owned && owned->user != MPI_REQUEST_NULL) (void)owned.release();
        *rc = local_failure("MPI_Iallreduce", comm, MPI_ERR_OTHER, "unexpected exception", "non-standard");
    }
    return true;
}

// ---------------------------------------------------------------------------
// Fortran.

using FAllreduce = cc_coll_preload_f_allreduce_fn;
using FInit = cc_coll_preload_f_init_fn;
using FInitThread = cc_coll_preload_f_init_thread_fn;
using FFinalize = cc_coll_preload_f_finalize_fn;
using FIallreduce = cc_coll_preload_f_iallreduce_fn;
using FWait = cc_coll_preload_f_wait_fn;
using FTest = cc_coll_preload_f_test_fn;
using FWaitall = cc_coll_preload_f_waitall_fn;
using FTestall = cc_coll_preload_f_testall_fn;
using FWaitany = cc_coll_preload_f_waitany_fn;
using FTestany = cc_coll_preload_f_testany_fn;
using FWaitsome = cc_coll_preload_f_waitsome_fn;
using FTestsome = cc_coll_preload_f_testsome_fn;

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

void fortran_iallreduce(FIallreduce real, void *s, void *r, MPI_Fint *count, MPI_Fint *dt, MPI_Fint *op,
                        MPI_Fint *comm, MPI_Fint *request, MPI_Fint *ierr, const void *ret)
{
    if (real != nullptr && mpich_fortran_uninitialised()) {
        Guard guard;
        real(s, r, count, dt, op, comm, request, ierr);
        return;
    }
    const void *cs = is_fortran_in_place(s) ? MPI_IN_PLACE : is_fortran_bottom(s) ? MPI_BOTTOM : s;
    void *cr = is_fortran_bottom(r) ? MPI_BOTTOM : r;
    if (t_depth == 0) {
        Guard guard;
        ensure_setup();
        state().seen++;
        state().seen_nonblocking++;
        int rc = MPI_SUCCESS;
        MPI_Request req = MPI_REQUEST_NULL;
        if (intercept_nonblocking(cs, cr, *count, PMPI_Type_f2c(*dt), PMPI_Op_f2c(*op), PMPI_Comm_f2c(*comm), ret,
                                  &req, &rc)) {
            *request = PMPI_Request_c2f(req);  // MPI_REQUEST_NULL's after a failure
            if (ierr) *ierr = static_cast<MPI_Fint>(rc);
            return;
        }
    }
    Guard guard;
    if (real) {
        real(s, r, count, dt, op, comm, request, ierr);
        return;
    }
    MPI_Request req = MPI_REQUEST_NULL;
    const int rc =
        PMPI_Iallreduce(cs, cr, *count, PMPI_Type_f2c(*dt), PMPI_Op_f2c(*op), PMPI_Comm_f2c(*comm), &req);
    if (rc == MPI_SUCCESS) *request = PMPI_Request_c2f(req);
    if (ierr) *ierr = static_cast<MPI_Fint>(rc);
}

// The completion functions. While the shim has requests in flight, a test
// advances them first, and a wait becomes a loop of advancing them and the
// MPI's test of the same kind, so that nothing blocks inside MPI on a
// generalized request no one would complete (nor on a request of the
// program's whose peer waits for a shim request of this rank). Otherwise
// the call goes to MPI as it is. MPICH's Fortran functions call the C ones,
// which the guard sends straight to MPI.

// Loops `test` (which sets *done and returns MPI's code) while advancing
// the shim's requests; once none is left, `wait` blocks in MPI.
template <typename Test, typename Wait>
int wait_advancing(Test test, Wait wait)
{
    Guard guard;
    for (;;) {
        const bool moved = poke();
        bool done = false;
        const int rc = test(&done);
        if (rc != MPI_SUCCESS || done) return rc;
        if (!shim_pending()) return wait();
        if (!moved) std::this_thread::yield();
    }
}

// Whether a completion function must advance the shim's requests.
bool must_advance() { return t_depth == 0 && shim_pending(); }

// A test: one round of advancing, then `call`.
template <typename Call>
auto test_advancing(Call call)
{
    if (must_advance()) {
        Guard guard;
        poke();
    }
    return call();
}

void fortran_wait(FWait next, FTest test, MPI_Fint *request, void *status, MPI_Fint *ierr)
{
    if (!must_advance()) {
        Guard guard;
        next(request, status, ierr);
        return;
    }
    MPI_Fint rc = MPI_SUCCESS;
    wait_advancing(
        [&](bool *done) {
            MPI_Fint flag = 0;
            test(request, &flag, status, &rc);
            *done = flag != 0;
            return static_cast<int>(rc);
        },
        [&] {
            next(request, status, &rc);
            return static_cast<int>(rc);
        });
    if (ierr) *ierr = rc;
}

void fortran_test(FTest next, MPI_Fint *request, MPI_Fint *flag, void *status, MPI_Fint *ierr)
{
    test_advancing([&] {
        Guard guard;
        next(request, flag, status, ierr);
        return 0;
    });
}

void fortran_waitall(FWaitall next, FTestall test, MPI_Fint *count, MPI_Fint *requests, void *statuses,
                     MPI_Fint *ierr)
{
    if (!must_advance()) {
        Guard guard;
        next(count, requests, statuses, ierr);
        return;
    }
    MPI_Fint rc = MPI_SUCCESS;
    wait_advancing(
        [&](bool *done) {
            MPI_Fint flag = 0;
            test(count, requests, &flag, statuses, &rc);
            *done = flag != 0;
            return static_cast<int>(rc);
        },
        [&] {
            next(count, requests, statuses, &rc);
            return static_cast<int>(rc);
        });
    if (ierr) *ierr = rc;
}

void fortran_testall(FTestall next, MPI_Fint *count, MPI_Fint *requests, MPI_Fint *flag, void *statuses,
                     MPI_Fint *ierr)
{
    test_advancing([&] {
        Guard guard;
        next(count, requests, flag, statuses, ierr);
        return 0;
    });
}

void fortran_waitany(FWaitany next, FTestany test, MPI_Fint *count, MPI_Fint *requests, MPI_Fint *index,
                     void *status, MPI_Fint *ierr)
{
    if (!must_advance()) {
        Guard guard;
        next(count, requests, index, status, ierr);
        return;
    }
    MPI_Fint rc = MPI_SUCCESS;
    wait_advancing(
        [&](bool *done) {
            MPI_Fint flag = 0;
            test(count, requests, index, &flag, status, &rc);
            *done = flag != 0;
            return static_cast<int>(rc);
        },
        [&] {
            next(count, requests, index, status, &rc);
            return static_cast<int>(rc);
        });
    if (ierr) *ierr = rc;
}

void fortran_testany(FTestany next, MPI_Fint *count, MPI_Fint *requests, MPI_Fint *index, MPI_Fint *flag,
                     void *status, MPI_Fint *ierr)
{
    test_advancing([&] {
        Guard guard;
        next(count, requests, index, flag, status, ierr);
        return 0;
    });
}

void fortran_waitsome(FWaitsome next, FTestsome test, MPI_Fint *incount, MPI_Fint *requests, MPI_Fint *outcount,
                      MPI_Fint *indices, void *statuses, MPI_Fint *ierr)
{
    if (!must_advance()) {
        Guard guard;
        next(incount, requests, outcount, indices, statuses, ierr);
        return;
    }
    MPI_Fint rc = MPI_SUCCESS;
    wait_advancing(
        [&](bool *done) {
            test(incount, requests, outcount, indices, statuses, &rc);
            *done = *outcount != 0;  // MPI_UNDEFINED when no request is active
            return static_cast<int>(rc);
        },
        [&] {
            next(incount, requests, outcount, indices, statuses, &rc);
            return static_cast<int>(rc);
        });
    if (ierr) *ierr = rc;
}

void fortran_testsome(FTestsome next, MPI_Fint *incount, MPI_Fint *requests, MPI_Fint *outcount,
                      MPI_Fint *indices, void *statuses, MPI_Fint *ierr)
{
    test_advancing([&] {
        Guard guard;
        next(incount, requests, outcount, indices, statuses, ierr);
        return 0;
    });
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

int core_iallreduce(const void *sendbuf, void *recvbuf, int count, std::uintptr_t datatype, std::uintptr_t op,
                    std::uintptr_t comm, void *request, const void *ret)
{
    const MPI_Datatype dt = from_wide<MPI_Datatype>(datatype);
    const MPI_Op o = from_wide<MPI_Op>(op);
    const MPI_Comm c = from_wide<MPI_Comm>(comm);
    MPI_Request *req = static_cast<MPI_Request *>(request);
    if (t_depth > 0) return PMPI_Iallreduce(sendbuf, recvbuf, count, dt, o, c, req);
    Guard guard;
    ensure_setup();
    state().seen++;
    state().seen_nonblocking++;
    int rc = MPI_SUCCESS;
    if (intercept_nonblocking(sendbuf, recvbuf, count, dt, o, c, ret, req, &rc)) return rc;
    return PMPI_Iallreduce(sendbuf, recvbuf, count, dt, o, c, req);
}

int core_wait(void *request, void *status)
{
    MPI_Request *req = static_cast<MPI_Request *>(request);
    MPI_Status *st = static_cast<MPI_Status *>(status);
    if (!must_advance()) return PMPI_Wait(req, st);
    return wait_advancing(
        [&](bool *done) {
            int flag = 0;
            const int rc = PMPI_Test(req, &flag, st);
            *done = flag != 0;
            return rc;
        },
        [&] { return PMPI_Wait(req, st); });
}

int core_test(void *request, int *flag, void *status)
{
    return test_advancing(
        [&] { return PMPI_Test(static_cast<MPI_Request *>(request), flag, static_cast<MPI_Status *>(status)); });
}

int core_waitall(int count, void *requests, void *statuses)
{
    MPI_Request *reqs = static_cast<MPI_Request *>(requests);
    MPI_Status *sts = static_cast<MPI_Status *>(statuses);
    if (!must_advance()) return PMPI_Waitall(count, reqs, sts);
    return wait_advancing(
        [&](bool *done) {
            int flag = 0;
            const int rc = PMPI_Testall(count, reqs, &flag, sts);
            *done = flag != 0;
            return rc;
        },
        [&] { return PMPI_Waitall(count, reqs, sts); });
}

int core_testall(int count, void *requests, int *flag, void *statuses)
{
    return test_advancing([&] {
        return PMPI_Testall(count, static_cast<MPI_Request *>(requests), flag, static_cast<MPI_Status *>(statuses));
    });
}

int core_waitany(int count, void *requests, int *index, void *status)
{
    MPI_Request *reqs = static_cast<MPI_Request *>(requests);
    MPI_Status *st = static_cast<MPI_Status *>(status);
    if (!must_advance()) return PMPI_Waitany(count, reqs, index, st);
    return wait_advancing(
        [&](bool *done) {
            int flag = 0;
            const int rc = PMPI_Testany(count, reqs, index, &flag, st);
            *done = flag != 0;
            return rc;
        },
        [&] { return PMPI_Waitany(count, reqs, index, st); });
}

int core_testany(int count, void *requests, int *index, int *flag, void *status)
{
    return test_advancing([&] {
        return PMPI_Testany(count, static_cast<MPI_Request *>(requests), index, flag,
                            static_cast<MPI_Status *>(status));
    });
}

int core_waitsome(int incount, void *requests, int *outcount, int *indices, void *statuses)
{
    MPI_Request *reqs = static_cast<MPI_Request *>(requests);
    MPI_Status *sts = static_cast<MPI_Status *>(statuses);
    if (!must_advance()) return PMPI_Waitsome(incount, reqs, outcount, indices, sts);
    return wait_advancing(
        [&](bool *done) {
            const int rc = PMPI_Testsome(incount, reqs, outcount, indices, sts);
            *done = *outcount != 0;  // MPI_UNDEFINED when no request is active
            return rc;
        },
        [&] { return PMPI_Waitsome(incount, reqs, outcount, indices, sts); });
}

int core_testsome(int incount, void *requests, int *outcount, int *indices, void *statuses)
{
    return test_advancing([&] {
        return PMPI_Testsome(incount, static_cast<MPI_Request *>(requests), outcount, indices,
                             static_cast<MPI_Status *>(statuses));
    });
}

int core_request_get_status(std::uintptr_t request, int *flag, void *status)
{
    return test_advancing([&] {
        return PMPI_Request_get_status(from_wide<MPI_Request>(request), flag, static_cast<MPI_Status *>(status));
    });
}

const cc_coll_preload_core kCore = {
    core_init,
    core_init_thread,
    core_finalize,
    core_allreduce,
    fortran_allreduce,
    fortran_init,
    fortran_init_thread,
    fortran_finalize,
    core_iallreduce,
    core_wait,
    core_test,
    core_waitall,
    core_testall,
    core_waitany,
    core_testany,
    core_waitsome,
    core_testsome,
    core_request_get_status,
    fortran_iallreduce,
    fortran_wait,
    fortran_test,
    fortran_waitall,
    fortran_testall,
    fortran_waitany,
    fortran_testany,
    fortran_waitsome,
    fortran_testsome,
};

}  // namespace

extern "C" __attribute__((visibility("default"))) const cc_coll_preload_core *cc_coll_preload_core_get(int api)
{
    return api == CC_COLL_PRELOAD_CORE_API ? &kCore : nullptr;
}

// ---------------------------------------------------------------------------
// libcc_coll's MPI calls.
//
// libcc_coll's objects, linked into this core, call MPI by name: among
// others MPI_Allreduce, MPI_Iallreduce and MPI_Test, which the front
// interposes. Those calls must go straight to MPI, on any thread: the
// library's progress thread runs requests outside every wrapper of the
// shim, and a caller-driven request runs inside the program's MPI_Wait. So
// the core defines each MPI function the front interposes and the library
// may call, forwarding to PMPI. The version script (preload_core.map) keeps
// them local, so the link binds the library's references to them here and
// the dynamic linker never sends those calls to the front; the test
// preload_core_binds_locally checks that the core imports none of the
// front's symbols.
extern "C" {

int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm)
{
    return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
}

int MPI_Iallreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                   MPI_Request *request)
{
    return PMPI_Iallreduce(sendbuf, recvbuf, count, datatype, op, comm, request);
}

int MPI_Wait(MPI_Request *request, MPI_Status *status) { return PMPI_Wait(request, status); }

int MPI_Test(MPI_Request *request, int *flag, MPI_Status *status) { return PMPI_Test(request, flag, status); }

int MPI_Waitall(int count, MPI_Request requests[], MPI_Status statuses[])
{
    return PMPI_Waitall(count, requests, statuses);
}

int MPI_Testall(int count, MPI_Request requests[], int *flag, MPI_Status statuses[])
{
    return PMPI_Testall(count, requests, flag, statuses);
}

int MPI_Waitany(int count, MPI_Request requests[], int *index, MPI_Status *status)
{
    return PMPI_Waitany(count, requests, index, status);
}

int MPI_Testany(int count, MPI_Request requests[], int *index, int *flag, MPI_Status *status)
{
    return PMPI_Testany(count, requests, index, flag, status);
}

int MPI_Waitsome(int incount, MPI_Request requests[], int *outcount, int indices[], MPI_Status statuses[])
{
    return PMPI_Waitsome(incount, requests, outcount, indices, statuses);
}

int MPI_Testsome(int incount, MPI_Request requests[], int *outcount, int indices[], MPI_Status statuses[])
{
    return PMPI_Testsome(incount, requests, outcount, indices, statuses);
}

int MPI_Request_get_status(MPI_Request request, int *flag, MPI_Status *status)
{
    return PMPI_Request_get_status(request, flag, status);
}

}  // extern "C"
