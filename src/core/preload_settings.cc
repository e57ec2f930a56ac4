// The LD_PRELOAD shim's settings: their table entries and the shim's lookup
// (core/preload_settings.hpp).
#include "core/preload_settings.hpp"

#include "core/config.hpp"

namespace cc_coll::detail {

namespace {

bool apply_min_bytes(const std::string &text, PreloadSettings *s, std::string *why)
{
    if (parse_bytes(text, &s->min_bytes)) return true;
    *why = "expected a byte count such as 0, 65536, 64K or 1M";
    return false;
}

bool apply_stats(const std::string &text, PreloadSettings *s, std::string *why)
{
    if (parse_bool(text, &s->stats)) return true;
    *why = "expected 1/0, true/false, yes/no or on/off";
    return false;
}

using PreloadApply = bool (*)(const std::string &, PreloadSettings *, std::string *);

// SettingDef::apply of a shim setting: validates, stores nothing in Config.
template <PreloadApply Apply>
bool check(const std::string &text, Config *, std::string *why)
{
    PreloadSettings scratch;
    return Apply(text, &scratch, why);
}

const SettingDef kPreloadSettings[] = {
    {"MIN_BYTES", "CC_COLL_MIN_BYTES", "1M",
     "LD_PRELOAD interception: an intercepted MPI_Allreduce is compressed only if its buffer has at "
     "least this many bytes (K/M/G suffixes, powers of 1024); smaller calls go to MPI untouched.",
     check<apply_min_bytes>},
    {"STATS", "CC_COLL_STATS", "0",
     "LD_PRELOAD interception: 1 prints, at MPI_Finalize on rank 0, one summary reduced over the "
     "ranks: calls seen, calls compressed, uncompressed bytes, wire bytes, time.",
     check<apply_stats>},
};

// The parser of each entry above, in the same order.
const PreloadApply kPreloadApply[] = {apply_min_bytes, apply_stats};

static_assert(sizeof kPreloadSettings / sizeof kPreloadSettings[0] == sizeof kPreloadApply / sizeof kPreloadApply[0],
              "one parser per shim setting");

}  // namespace

const SettingDef *preload_setting_defs(std::size_t *count)
{
    *count = sizeof kPreloadSettings / sizeof kPreloadSettings[0];
    return kPreloadSettings;
}

PreloadSettings load_preload_settings(const PreloadEnv &env, std::vector<std::string> *errors)
{
    // Every setting of the table, validated the way cc_coll_comm_create
    // reads them; the library's land in a Config, of which the shim keeps
    // the four it uses.
    std::size_t n = 0;
    const SettingDef *table = settings(&n);
    Config cfg;
    std::string why;
    for (std::size_t i = 0; i < n; ++i) {
        table[i].apply(table[i].default_value, &cfg, &why);
        std::string value;
        if (!env(table[i].env_var, &value)) continue;
        if (!table[i].apply(value, &cfg, &why))
            errors->push_back(std::string(table[i].env_var) + "=\"" + value + "\" is invalid: " + why);
    }
    PreloadSettings out;
    out.method = cfg.method;
    out.density = cfg.density;
    out.ef = cfg.ef;
    out.ef_max_bytes = cfg.ef_max_bytes;
    // The shim's own (a bad value was reported above and keeps the default).
    for (std::size_t i = 0; i < sizeof kPreloadApply / sizeof kPreloadApply[0]; ++i) {
        kPreloadApply[i](kPreloadSettings[i].default_value, &out, &why);
        std::string value;
        if (env(kPreloadSettings[i].env_var, &value)) {
            PreloadSettings parsed = out;
            if (kPreloadApply[i](value, &parsed, &why)) out = parsed;
        }
    }
    return out;
}

PreloadSettings load_preload_settings(std::vector<std::string> *errors)
{
    return load_preload_settings(process_env(), errors);
}

}  // namespace cc_coll::detail
