// The LD_PRELOAD shim's settings: their table entries and the shim's lookup
// (core/preload_settings.hpp).
#include "core/preload_settings.hpp"

#include <fnmatch.h>

#include <cctype>
#include <cstdlib>

#include "core/config.hpp"

namespace cc_coll::detail {

namespace {

constexpr const char *kPatternForms =
    "expected comma-separated entries comm:NAME, site:SYMBOL or site:OBJECT+0xSTART-0xEND";

std::string trimmed(const std::string &text)
{
    std::size_t b = 0, e = text.size();
    while (b < e && std::isspace(static_cast<unsigned char>(text[b]))) ++b;
    while (e > b && std::isspace(static_cast<unsigned char>(text[e - 1]))) --e;
    return text.substr(b, e - b);
}

// "0x" and at least one hexadecimal digit, nothing else.
bool parse_hex(const std::string &text, std::uint64_t *out)
{
    if (text.size() < 3 || text.size() > 18 || text[0] != '0' || (text[1] != 'x' && text[1] != 'X')) return false;
    std::uint64_t v = 0;
    for (std::size_t i = 2; i < text.size(); ++i) {
        const char c = static_cast<char>(std::tolower(static_cast<unsigned char>(text[i])));
        if (c >= '0' && c <= '9') v = v * 16 + static_cast<std::uint64_t>(c - '0');
        else if (c >= 'a' && c <= 'f') v = v * 16 + static_cast<std::uint64_t>(c - 'a' + 10);
        else return false;
    }
    *out = v;
    return true;
}

bool parse_pattern(const std::string &entry, PreloadPattern *out, std::string *why)
{
    PreloadPattern p;
    p.text = entry;
    std::string rest;
    if (entry.compare(0, 5, "comm:") == 0) {
        p.kind = PreloadPattern::Kind::Comm;
        rest = entry.substr(5);
    } else if (entry.compare(0, 5, "site:") == 0) {
        p.kind = PreloadPattern::Kind::SiteSymbol;
        rest = entry.substr(5);
    } else {
        *why = "entry \"" + entry + "\" starts with neither comm: nor site: (" + kPatternForms + ")";
        return false;
    }
    if (rest.empty()) {
        *why = "entry \"" + entry + "\" names nothing after the colon (" + kPatternForms + ")";
        return false;
    }
    const std::size_t plus = rest.find("+0");
    if (p.kind == PreloadPattern::Kind::SiteSymbol && plus != std::string::npos) {
        p.kind = PreloadPattern::Kind::SiteRange;
        p.glob = rest.substr(0, plus);
        const std::string range = rest.substr(plus + 1);
        const std::size_t dash = range.find('-');
        if (p.glob.empty() || dash == std::string::npos || !parse_hex(range.substr(0, dash), &p.start) ||
            !parse_hex(range.substr(dash + 1), &p.end) || p.start >= p.end) {
            *why = "entry \"" + entry +
                   "\" is not site:OBJECT+0xSTART-0xEND with hexadecimal offsets, START below END";
            return false;
        }
    } else {
        p.glob = rest;
    }
    *out = p;
    return true;
}

bool apply_min_repeats(const std::string &text, PreloadSettings *s, std::string *why)
{
    const std::string t = trimmed(text);
    bool ok = !t.empty() && t.size() <= 12;
    for (const char c : t) ok = ok && c >= '0' && c <= '9';
    if (ok) {
        s->min_repeats = std::strtoull(t.c_str(), nullptr, 10);
        return true;
    }
    *why = "expected a whole number of calls from 0 to 999999999999, such as 0, 10 or 100";
    return false;
}

bool apply_allow(const std::string &text, PreloadSettings *s, std::string *why)
{
    return parse_preload_patterns(text, &s->allow, why);
}

bool apply_deny(const std::string &text, PreloadSettings *s, std::string *why)
{
    return parse_preload_patterns(text, &s->deny, why);
}

bool apply_quiet(const std::string &text, PreloadSettings *s, std::string *why)
{
    if (parse_bool(text, &s->quiet)) return true;
    *why = "expected 1/0, true/false, yes/no or on/off";
    return false;
}

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

bool apply_advise(const std::string &text, PreloadSettings *s, std::string *why)
{
    if (parse_bool(text, &s->advise)) return true;
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
     "least this many bytes (K/M/G/T suffixes, powers of 1024); smaller calls go to MPI untouched.",
     check<apply_min_bytes>},
    {"MIN_REPEATS", "CC_COLL_MIN_REPEATS", "100",
     "LD_PRELOAD interception: a call is compressed only once the same (communicator, call site, "
     "receive buffer, count, type) has been reduced this many times before on every rank; those first "
     "calls, and every reduction that does not recur, go to MPI untouched. 0 compresses from the first "
     "call.",
     check<apply_min_repeats>},
    {"ALLOW", "CC_COLL_ALLOW", "",
     "LD_PRELOAD interception: when set, opt-in mode: only calls matching one of these comma-separated "
     "entries can be compressed (comm:NAME matches MPI_Comm_get_name, site:SYMBOL the calling function, "
     "site:OBJECT+0xSTART-0xEND a range of return addresses; shell patterns). Empty: no restriction.",
     check<apply_allow>},
    {"DENY", "CC_COLL_DENY", "",
     "LD_PRELOAD interception: calls matching one of these comma-separated entries (the forms of "
     "CC_COLL_ALLOW) are never compressed.",
     check<apply_deny>},
    {"QUIET", "CC_COLL_QUIET", "0",
     "LD_PRELOAD interception: 1 silences the line rank 0 prints at MPI_Init and MPI_Finalize while "
     "compression is on.",
     check<apply_quiet>},
    {"STATS", "CC_COLL_STATS", "0",
     "LD_PRELOAD interception: 1 prints, at MPI_Finalize on rank 0, one summary reduced over the "
     "ranks: calls seen, compressed and passed through (and why), bytes, time, and the call sites "
     "compressed most.",
     check<apply_stats>},
    {"ADVISE", "CC_COLL_ADVISE", "0",
     "LD_PRELOAD interception: 1 is advice mode: nothing is compressed (every call goes to MPI unchanged), "
     "and at MPI_Finalize rank 0 lists, reduced over the ranks, each call site the rule in force would "
     "compress, with its calls and bytes and the time CC_COLL_METHOD=auto's cost model predicts "
     "compression would save.",
     check<apply_advise>},
};

// The parser of each entry above, in the same order.
const PreloadApply kPreloadApply[] = {apply_min_bytes, apply_min_repeats, apply_allow, apply_deny,
                                      apply_quiet,     apply_stats,       apply_advise};

static_assert(sizeof kPreloadSettings / sizeof kPreloadSettings[0] == sizeof kPreloadApply / sizeof kPreloadApply[0],
              "one parser per shim setting");

}  // namespace

bool parse_preload_patterns(const std::string &text, std::vector<PreloadPattern> *out, std::string *why)
{
    std::vector<PreloadPattern> list;
    std::size_t at = 0;
    while (at <= text.size()) {
        std::size_t comma = text.find(',', at);
        if (comma == std::string::npos) comma = text.size();
        const std::string entry = trimmed(text.substr(at, comma - at));
        at = comma + 1;
        if (entry.empty()) continue;
        PreloadPattern p;
        if (!parse_pattern(entry, &p, why)) return false;
        list.push_back(p);
    }
    *out = list;
    return true;
}

bool preload_pattern_matches(const PreloadPattern &p, const std::string &comm_name, const PreloadCallSite &site)
{
    switch (p.kind) {
    case PreloadPattern::Kind::Comm:
        return fnmatch(p.glob.c_str(), comm_name.c_str(), 0) == 0;
    case PreloadPattern::Kind::SiteSymbol:
        return !site.symbol.empty() && fnmatch(p.glob.c_str(), site.symbol.c_str(), 0) == 0;
    case PreloadPattern::Kind::SiteRange:
        return !site.object.empty() && fnmatch(p.glob.c_str(), site.object.c_str(), 0) == 0 &&
               site.offset >= p.start && site.offset < p.end;
    }
    return false;
}

bool preload_patterns_match(const std::vector<PreloadPattern> &list, const std::string &comm_name,
                            const PreloadCallSite &site)
{
    for (const PreloadPattern &p : list)
        if (preload_pattern_matches(p, comm_name, site)) return true;
    return false;
}

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
