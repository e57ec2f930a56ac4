// The shim core's process state: the re-entry guard, the settings in
// effect, the libcc_coll communicator cached on each MPI communicator (an
// Entry) and the counters of the summary. Internal to the core
// (libcc_coll_preload_core.so); core.cc says how the core's files divide
// the work.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <mpi.h>

#include "cc_coll.h"
#include "core/preload_settings.hpp"

namespace cc_coll_preload {

using cc_coll::detail::load_preload_settings;
using cc_coll::detail::preload_patterns_match;
using cc_coll::detail::PreloadCallSite;
using cc_coll::detail::PreloadPattern;
using cc_coll::detail::PreloadSettings;

// ---------------------------------------------------------------------------
// Re-entry guard: > 0 while this thread is inside a wrapper, so that MPI
// calls reaching the front from inside a call the shim forwards (MPICH's
// Fortran bindings call the C functions) go straight to PMPI. libcc_coll's
// own MPI calls never reach the front (mpi_forward.cc).
extern thread_local int t_depth;  // core.cc

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

// What AUTO's cost model predicts for one call of a (count, dtype) on a
// communicator (cc_coll_auto_predict): the method it would run and the
// seconds of NONE and of the lossy method. `known` false: no prediction
// (the model could not be measured, or the library did not answer).
struct Prediction {
    bool known = false;
    cc_coll_method_t chosen = CC_COLL_METHOD_NONE;
    double none = 0;
    double lossy = 0;
};

// What hangs off a user communicator (the attribute value).
struct Entry {
    MPI_Comm user = MPI_COMM_NULL;    // the communicator it is cached on
    cc_coll_comm_h handle = nullptr;  // nullptr when creation failed
    int rank = 0;                     // in the user communicator
    int size = 0;                     // of the user communicator
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

    // MPI_Iallreduce (see requests.hpp); the fields up to
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

    // AUTO's cost model on `handle`: measured when the entry was made (in
    // advice mode, or when some rank has CC_COLL_STATS=1), after which each
    // prediction is local; the predictions by (count, dtype).
    bool model = false;
    std::map<std::pair<std::size_t, int>, Prediction> predictions;
    std::mutex predictions_mutex;
};

// A compressed call site in the summary: (return address, count, dtype).
using SiteKey = std::tuple<const void *, std::size_t, int>;
struct SiteTotals {
    std::uint64_t calls = 0;
    std::uint64_t bytes = 0;
    std::string comm;  // the communicator's name at the last call
};

// A call site in the advice report (CC_COLL_ADVISE): (return address,
// count, dtype, communicator name, communicator size), and what it saw.
using AdviceKey = std::tuple<const void *, std::size_t, int, std::string, int>;
struct AdviceTotals {
    std::uint64_t calls = 0;
    std::uint64_t bytes = 0;
    Prediction prediction;  // of one call
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
    // Of the compressed MPI_Allreduce calls (blocking), those with a
    // prediction of NONE's time: their measured seconds and NONE's
    // predicted seconds; and the number of those without one.
    std::uint64_t predicted_calls = 0;
    double predicted_seconds = 0;
    double predicted_none = 0;
    std::uint64_t unpredicted_calls = 0;
};

struct State {
    std::mutex mutex;  // guards everything but the atomics
    std::atomic<bool> set_up{false};
    std::atomic<bool> torn_down{false};
    std::atomic<bool> active{false};  // compress eligible calls
    std::atomic<bool> advise{false};  // CC_COLL_ADVISE: compress nothing, report what would be
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
    std::map<AdviceKey, AdviceTotals> advice_sites;  // CC_COLL_ADVISE
};

// The process state (settings.cc). Never destroyed: safe during exit.
State &state();

// ---------------------------------------------------------------------------
// Settings and activation (settings.cc).

// Whether calls with `method` change what MPI_Allreduce gives, so that the
// shim has something to do: a lossy method, or one that picks a method per
// call (cc_coll_method_caps). False for none and for an unknown value.
bool method_compresses(cc_coll_method_t method);
// "density <d>, " for a method that takes a density, or passes it to the
// method it picks (cc_coll_method_caps); "" for the others.
std::string density_setting(cc_coll_method_t method, double density);

// Reads and validates every CC_COLL_* setting once, right after MPI is
// initialised, with the thread level MPI provides.
void setup(int thread_level);
// Setup for a program whose MPI initialisation the shim did not see.
void ensure_setup();
// Setup after the program's MPI_Init (thread level from MPI).
void after_init();
// CC_COLL_ALLOW / CC_COLL_DENY as written, comma-separated.
std::string pattern_list(const std::vector<PreloadPattern> &list);
// The name of an MPI thread level ("multiple").
const char *thread_level_name(int level);

// ---------------------------------------------------------------------------
// The libcc_coll communicators (comm_entries.cc).

// The entry cached on `comm`, created at the communicator's first eligible
// call (collective: every rank makes that call). nullptr: pass through.
Entry *entry_for(MPI_Comm comm);
// Attribute delete callback of the entries' keyval (no MPI call inside).
int delete_entry(MPI_Comm comm, int keyval, void *value, void *extra);
// Destroys the communicators whose user communicator was freed, once their
// requests have completed. Runs outside attribute callbacks.
void destroy_zombies();
// Destroys entries and their libcc_coll communicators, counting their wire
// bytes. Called without State::mutex.
void retire_all(const std::vector<Entry *> &entries);

// ---------------------------------------------------------------------------
// The summary (report.cc).

// Before PMPI_Finalize: completes the shim's requests, destroys every
// libcc_coll communicator, reduces the counters over MPI_COMM_WORLD and
// (rank 0) prints them.
void teardown();

}  // namespace cc_coll_preload
