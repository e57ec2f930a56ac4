// The settings of the LD_PRELOAD shim (libcc_coll_preload.so,
// c_api/preload/), and the one lookup the shim makes for them.
//
// This is the only internal header the shim includes: everything else it
// does goes through the public C ABI (include/cc_coll.h). It therefore
// depends on nothing in src/ and declares only what the shim reads.
//
// CC_COLL_MIN_BYTES and CC_COLL_STATS belong to the shim alone: the library's
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
    bool stats = false;                 // CC_COLL_STATS: summary at MPI_Finalize
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
