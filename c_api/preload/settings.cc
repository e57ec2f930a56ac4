// The shim core's process state and settings: CC_COLL_* read once after
// MPI_Init, whether the run compresses, and the line rank 0 prints then.

#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

#include <mpi.h>

#include "cc_coll.h"
#include "core/preload_settings.hpp"
#include "state.hpp"

namespace cc_coll_preload {

State &state()
{
    static State *s = new State;  // never destroyed: safe during exit
    return *s;
}

bool method_compresses(cc_coll_method_t method)
{
    return (cc_coll_method_caps(method) & (CC_COLL_METHOD_CAP_LOSSY | CC_COLL_METHOD_CAP_SELECTS)) != 0;
}

std::string density_setting(cc_coll_method_t method, double density)
{
    if ((cc_coll_method_caps(method) & (CC_COLL_METHOD_CAP_DENSITY | CC_COLL_METHOD_CAP_SELECTS)) == 0) return "";
    char text[64];
    std::snprintf(text, sizeof text, "density %g, ", density);
    return text;
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

std::string pattern_list(const std::vector<PreloadPattern> &list)
{
    std::string out;
    for (const PreloadPattern &p : list) out += (out.empty() ? "" : ",") + p.text;
    return out;
}

namespace {

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

}  // namespace

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
    const bool advise = s.settings_valid && cfg.advise;
    bool active = s.settings_valid && !advise && method_compresses(cfg.method);
    if (active || advise) {
        const int rc = PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_entry, &s.keyval, nullptr);
        if (rc != MPI_SUCCESS) {
            if (s.world_rank == 0)
                std::fprintf(stderr,
                             "[cc_coll] preload: MPI_Comm_create_keyval failed (error %d): %s is off for this run\n",
                             rc, active ? "compression" : "advice mode");
            active = false;
            s.keyval = MPI_KEYVAL_INVALID;
        }
    }
    s.ef_cap = !advise && cfg.ef && method_compresses(cfg.method) && cfg.ef_max_bytes != 0;
    s.preflight_device = (cc_coll_build_flags() & CC_COLL_BUILD_CUDA) != 0 && cc_coll_mpi_cuda_aware() != 0;
    if (active && !cfg.quiet && s.world_rank == 0) {
        // The parameters the shim passes with every compressed call
        // (compress_params); the density only where the method takes it.
        std::fprintf(stderr,
                     "[cc_coll] preload: compressing MPI_Allreduce with method %s (%serror feedback %s): "
                     "%s; every other call passes through to MPI unchanged (CC_COLL_QUIET=1 silences this line)\n",
                     cc_coll_method_name(cfg.method), density_setting(cfg.method, cfg.density).c_str(),
                     cfg.ef ? "on" : "off", eligibility_rule(cfg).c_str());
    }
    if (advise && s.keyval != MPI_KEYVAL_INVALID && !cfg.quiet && s.world_rank == 0)
        std::fprintf(stderr,
                     "[cc_coll] preload: advice mode (CC_COLL_ADVISE=1): nothing is compressed, every call goes to "
                     "MPI unchanged; at MPI_Finalize rank 0 lists the calls the rule in force would "
                     "compress (%s) and the time CC_COLL_METHOD=auto's cost model predicts compression would save "
                     "(CC_COLL_QUIET=1 silences this line)\n",
                     eligibility_rule(cfg).c_str());
    s.active = active;
    s.advise = advise && s.keyval != MPI_KEYVAL_INVALID;
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

void after_init()
{
    int initialized = 0;
    PMPI_Initialized(&initialized);
    if (!initialized) return;
    int level = MPI_THREAD_SINGLE;
    PMPI_Query_thread(&level);
    setup(level);
}
}  // namespace cc_coll_preload
