// The settings of the LD_PRELOAD shim (libcc_coll_preload.so,
// c_api/preload/), and the one lookup the shim makes for them.
//
// This is the only internal header the shim includes: everything else it
// does goes through the public C ABI (include/cc_coll.h). It therefore
// depends on nothing in src/ and declares only what the shim reads.
//
// The shim's own settings (CC_COLL_MIN_BYTES, CC_COLL_MIN_REPEATS,
// CC_COLL_ALLOW, CC_COLL_DENY, CC_COLL_QUIET, CC_COLL_STATS,
// CC_COLL_ADVISE) belong to it
// alone: the library's
// Config does not carry them and no collective reads them. They are still
// entries of the library's settings table (preload_settings.cc defines them;
// settings() in config.cc lists them after the library's own), so
// cc_coll_setting_count(), cc_coll_setting_get() and cc_coll_info list,
// document and validate them like every other setting, and
// cc_coll_comm_create() rejects a bad value of them as of any CC_COLL_*
// variable.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cc_coll.h"

namespace cc_coll::detail {

// One entry of CC_COLL_ALLOW / CC_COLL_DENY (docs/preload.md, "Targeting"):
//   comm:NAME                   a communicator whose MPI_Comm_get_name matches
//   site:SYMBOL                 a call made from a function whose dynamic
//                               symbol matches
//   site:OBJECT+0xSTART-0xEND   a call whose return address lies in
//                               [START, END) from the load address of the
//                               loaded object whose file name matches OBJECT
// NAME, SYMBOL and OBJECT are shell patterns (*, ?, [...]); OBJECT is
// matched against the file name without its directory.
struct PreloadPattern {
    enum class Kind { Comm, SiteSymbol, SiteRange };
    Kind kind = Kind::Comm;
    std::string glob;
    std::uint64_t start = 0, end = 0;  // SiteRange only
    std::string text;                  // the entry as written, blanks trimmed
};

// Where an intercepted call came from: its return address resolved with
// dladdr. Any field may be empty (object "" and offset 0 when unknown).
struct PreloadCallSite {
    std::string object;   // file name of the loaded object, no directory
    std::uint64_t offset = 0;  // return address minus the object's load address
    std::string symbol;   // the dynamic symbol containing it, "" if none
};

// Parses a CC_COLL_ALLOW / CC_COLL_DENY value: entries separated by commas,
// blanks around each ignored, empty entries skipped (so "" is the empty
// list). False on a malformed entry, with *why naming it.
bool parse_preload_patterns(const std::string &text, std::vector<PreloadPattern> *out, std::string *why);

// Whether `p` matches a call on a communicator named `comm_name` from `site`.
bool preload_pattern_matches(const PreloadPattern &p, const std::string &comm_name, const PreloadCallSite &site);

// Whether any entry of `list` matches.
bool preload_patterns_match(const std::vector<PreloadPattern> &list, const std::string &comm_name,
                            const PreloadCallSite &site);

// What the shim acts on, resolved from the defaults and the environment.
struct PreloadSettings {
    // Library settings the shim passes to every compressed call and reports
    // in its summary (CC_COLL_METHOD, _DENSITY, _EF, _EF_MAX_BYTES), parsed
    // by the library's own table.
    cc_coll_method_t method = CC_COLL_METHOD_NONE;
    double density = 0.01;
    bool ef = true;
    std::uint64_t ef_max_bytes = 0;
    // The shim's own.
    std::uint64_t min_bytes = 1 << 20;  // CC_COLL_MIN_BYTES: smallest call compressed
    // CC_COLL_MIN_REPEATS: a (communicator, call site, buffer, count, type)
    // is compressed only after this many exact calls of it; 0 = at once.
    std::uint64_t min_repeats = 100;
    std::vector<PreloadPattern> allow;  // CC_COLL_ALLOW: non-empty = opt-in
    std::vector<PreloadPattern> deny;   // CC_COLL_DENY: never compressed
    bool quiet = false;                 // CC_COLL_QUIET: no line at MPI_Init / MPI_Finalize
    bool stats = false;                 // CC_COLL_STATS: summary at MPI_Finalize
    // CC_COLL_ADVISE: compress nothing; at MPI_Finalize, the calls that
    // would be compressed and the time AUTO's cost model predicts saved.
    bool advise = false;
};

// Looks up an environment variable: false when unset (the same type as
// core/config.hpp's EnvLookup).
using PreloadEnv = std::function<bool(const char *name, std::string *value)>;

// Defaults, then the environment `env`, for every setting of the table (the
// shim's and the library's: a bad value of any of them turns compression
// off). Each invalid variable adds one message to *errors, in the form
// `CC_COLL_NAME="value" is invalid: <what is accepted>`, and leaves its
// field at the default. Records no last error.
PreloadSettings load_preload_settings(const PreloadEnv &env, std::vector<std::string> *errors);

// The same from the process environment.
PreloadSettings load_preload_settings(std::vector<std::string> *errors);

}  // namespace cc_coll::detail
