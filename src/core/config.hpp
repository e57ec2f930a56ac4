// The settings table: every tunable of libcc_coll, its default and its
// documentation, each readable from a CC_COLL_<NAME> environment variable.
// Precedence: default < environment < what the caller sets in params.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cc_coll.h"
#include "core/log.hpp"

namespace cc_coll::detail {

// The resolved configuration a communicator snapshots at creation.
// TOPK's allreduce algorithm (CC_COLL_TOPK_ALGORITHM; docs/algorithms.md 2.6).
enum class TopkAlgorithm {
    Auto,       // split from kTopkSplitAutoRanks ranks on, else allgather
    Allgather,  // every rank's pairs to every rank
    Split,      // regions: sparse reduce-scatter, top-k per region, allgather
};

// Whether allreduces of host tensors (single or grouped) run node by node
// (CC_COLL_HIERARCHY; collectives/allreduce/hierarchical.cc).
enum class HierarchyMode {
    Off,   // every rank compresses to every other (the flat algorithms)
    On,    // hierarchical wherever some node holds two or more ranks
    Auto,  // hierarchical when there are two or more nodes of two or more ranks each
};

// How device buffers reach MPI (CC_COLL_CUDA_TRANSPORT).
enum class CudaTransport {
    Auto,    // direct when MPI reports CUDA-aware support, else staged
    Direct,  // device pointers straight to MPI (needs a CUDA-aware MPI)
    Staged,  // through pinned host buffers in chunks
};

// Who advances non-blocking collectives (CC_COLL_PROGRESS; progress/engine.hpp).
enum class ProgressMode {
    Auto,    // Thread when MPI provides MPI_THREAD_MULTIPLE, else Caller
    Thread,  // a library progress thread (needs MPI_THREAD_MULTIPLE)
    Caller,  // the caller, inside cc_coll_test / cc_coll_wait
};

// The registry's bound on method ids (Comm keeps one state slot per id, and
// each method one word of options below).
constexpr int kMaxMethods = 16;

struct Config {
    cc_coll_method_t method = CC_COLL_METHOD_NONE;
    // One word of options per method id, written by the method's own
    // settings rows (Method::settings) and read by its algorithms through
    // CallParams::method_options; core gives them no meaning.
    std::uint32_t method_options[kMaxMethods] = {};
    LogLevel log_level = LogLevel::None;
    double density = 0.01;              // TOPK: fraction of elements kept
    bool ef = true;                     // error feedback for lossy methods
    std::uint64_t ef_max_bytes = 0;     // cap on residual memory, 0 = none
    std::uint64_t state_max_bytes = 0;  // cap on the methods' other per-tensor state, 0 = none
    cc_coll_sparsifier_t sparsifier = CC_COLL_SPARSIFY_TOPK;  // SKETCH
    double zero_fraction = 0.80;        // SKETCH with THRESHOLD
    double load_factor = 0.77;          // SKETCH sizing
    std::uint64_t seed = 0x5eed5eedull; // SKETCH hash seed, LOWRANK Q seed
    int lowrank_rank = 1;               // LOWRANK: target rank
    bool warm_start = true;             // LOWRANK: reuse the previous Q
    std::uint64_t start_iter = 0;       // LOWRANK: plain calls before compressing
    double min_compression_rate = 2.0;  // LOWRANK: compress only above this rate
    CudaTransport cuda_transport = CudaTransport::Auto;  // device buffers' path to MPI
    std::uint64_t cuda_chunk_bytes = 1 << 20;           // staged transport: bytes per chunk
    ProgressMode progress = ProgressMode::Auto;         // non-blocking collectives
    HierarchyMode hierarchy = HierarchyMode::Auto;      // node-by-node allreduce
    TopkAlgorithm topk_algorithm = TopkAlgorithm::Auto; // TOPK allreduce: allgather or split
    int threads = 0;         // CC_COLL_THREADS: host kernel threads, 0 = auto
    std::uint64_t pipeline_bytes = 0;  // CC_COLL_PIPELINE_BYTES: part size of pipelined calls, 0 = off
    // METHOD=auto: its candidates besides NONE (bit m: method id m), and
    // whether it checks its model against the calls (CC_COLL_AUTO_CHECK).
    std::uint32_t auto_candidates = 1u << CC_COLL_METHOD_TOPK;
    bool auto_check = true;
    double link_gbits = 0;       // CC_COLL_LINK: 0 = measure, else the link's Gbit/s
    double link_latency_us = 0;  // CC_COLL_LINK: its latency
    std::string node_sizes;  // CC_COLL_NODES: "" = MPI's shared-memory nodes, else sizes "2,2"
};

// Parses CC_COLL_NODES: a comma-separated list of node sizes (each >= 1),
// or one size k for nodes of k ranks (the last one possibly smaller).
// Fills `sizes` for a communicator of `ranks` ranks; false with `why` when
// malformed or when the sizes do not add up to `ranks`.
bool parse_node_sizes(const std::string &text, int ranks, std::vector<int> *sizes, std::string *why);

// Looks up an environment variable: returns false when unset.
using EnvLookup = std::function<bool(const char *name, std::string *value)>;

// The real process environment.
EnvLookup process_env();

struct SettingDef {
    const char *name;           // NAME
    const char *env_var;        // CC_COLL_NAME, where the environment sets it
    const char *default_value;  // textual default, parsed like an env value
    const char *doc;
    // Parses `text` into `cfg`; on failure returns false and says why.
    bool (*apply)(const std::string &text, Config *cfg, std::string *why);
};

// The table, in the order cc_coll_info prints it: the library's settings,
// then the LD_PRELOAD shim's (preload_setting_defs()).
const SettingDef *settings(std::size_t *count);

// The shim's entries (CC_COLL_MIN_BYTES, CC_COLL_STATS and its eligibility
// and targeting settings), defined with the
// shim's settings in core/preload_settings.cc. Config does not carry them:
// their apply validates the value and leaves the Config alone.
const SettingDef *preload_setting_defs(std::size_t *count);

// Defaults, then every CC_COLL_* variable `env` holds. On a bad value returns
// CC_COLL_ERR_CONFIG and, when `why` is non-NULL, a message naming the
// variable, the value and what is accepted. Never records a last error.
cc_coll_status_t load_config(const EnvLookup &env, Config *cfg, std::string *why);

// Helpers of the settings' parsers (core's rows and the methods' own rows,
// Method::settings): the text trimmed and in lower case; an unsigned
// integer (decimal, or 0x hexadecimal); one of a list of names.
std::string trim_lower(const std::string &text);
bool parse_u64(const std::string &text, std::uint64_t *out);
// Sets *out to values[i] when the text, trimmed and in any case, is
// names[i]; else says what is accepted.
template <typename E, std::size_t N>
bool apply_choice(const std::string &text, const char *const (&names)[N], const E (&values)[N], E *out,
                  std::string *why)
{
    const std::string s = trim_lower(text);
    for (std::size_t i = 0; i < N; ++i)
        if (s == names[i]) {
            *out = values[i];
            return true;
        }
    *why = "expected one of: ";
    for (std::size_t i = 0; i < N; ++i) *why += std::string(i ? ", " : "") + names[i];
    return false;
}

// Parsers shared by the settings (and tested on their own). Each returns
// false for text it does not accept. Leading/trailing blanks are ignored.
bool parse_method(const std::string &text, cc_coll_method_t *out);
bool parse_log_level(const std::string &text, LogLevel *out);
// A byte count: digits with an optional K, M, G or T suffix (powers of 1024,
// case-insensitive, optional trailing "B" or "iB"), e.g. "1M", "64KiB".
bool parse_bytes(const std::string &text, std::uint64_t *out);
bool parse_bool(const std::string &text, bool *out);  // 1/0, true/false, yes/no, on/off
bool parse_double(const std::string &text, double *out);  // finite values only
// A density: a finite number in (0, 1].
bool density_valid(double density);
// A zeroed fraction: finite, in [0, 1).
bool zero_fraction_valid(double f);
// A load factor: finite, in (0, kMaxLoadFactor]. Above ~0.8 peeling stops
// being complete; values above 1 deliberately overload the sketch (more
// support elements than cells) and trade exactness for size.
constexpr double kMaxLoadFactor = 16.0;
inline bool load_factor_valid(double f) { return std::isfinite(f) && f > 0.0 && f <= kMaxLoadFactor; }
bool parse_sparsifier(const std::string &text, cc_coll_sparsifier_t *out);
// LOWRANK: a target rank in [1, kMaxLowRank].
constexpr int kMaxLowRank = 65536;
inline bool lowrank_rank_valid(long long r) { return r >= 1 && r <= kMaxLowRank; }
// LOWRANK: a minimum compression rate, finite and >= 1.
inline bool min_compression_rate_valid(double r) { return std::isfinite(r) && r >= 1.0; }

}  // namespace cc_coll::detail
