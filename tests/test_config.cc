// Configuration parsing, the settings table, load_config and the LD_PRELOAD
// shim's load_preload_settings with an injected environment, and the
// precedence default < environment < explicit params.
#include <cstdint>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cc_coll.h"
#include "core/config.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/params.hpp"
#include "core/preload_settings.hpp"

namespace {

using cc_coll::detail::Config;
using cc_coll::detail::EnvLookup;
using cc_coll::detail::LogLevel;

// An EnvLookup over a map, recording every name it is asked for.
struct FakeEnv {
    std::map<std::string, std::string> vars;
    std::vector<std::string> queried;

    EnvLookup lookup()
    {
        return [this](const char *name, std::string *value) {
            queried.emplace_back(name);
            auto it = vars.find(name);
            if (it == vars.end()) return false;
            *value = it->second;
            return true;
        };
    }
};

// ---------------------------------------------------------------- parse_bytes

struct BytesCase {
    const char *text;
    std::uint64_t value;
};

TEST(ParseBytes, AcceptsDigitsAndSuffixes)
{
    const std::uint64_t K = 1024;
    const BytesCase cases[] = {
        {"0", 0},
        {"7", 7},
        {"123456789", 123456789},
        {"1K", K},
        {"1k", K},
        {"2M", 2 * K * K},
        {"2m", 2 * K * K},
        {"3G", 3 * K * K * K},
        {"3g", 3 * K * K * K},
        {"4T", 4 * K * K * K * K},
        {"4t", 4 * K * K * K * K},
        {"64KiB", 64 * K},
        {"64kib", 64 * K},
        {"64KIB", 64 * K},
        {"64KB", 64 * K},
        {"64kb", 64 * K},
        {"1MiB", K * K},
        {"1GB", K * K * K},
        {"1TiB", K * K * K * K},
        {"10B", 10},
        {"10b", 10},
        {"0K", 0},
        {"  1M  ", K * K},
        {"\t8k\n", 8 * K},
        {"64 KiB", 64 * K},
        {"18446744073709551615", UINT64_MAX},
        {"16777215T", ((std::uint64_t{1} << 24) - 1) << 40},
        {"17179869183G", ((std::uint64_t{1} << 34) - 1) << 30},
    };
    for (const BytesCase &c : cases) {
        std::uint64_t v = 12345;
        EXPECT_TRUE(cc_coll::detail::parse_bytes(c.text, &v)) << "text: \"" << c.text << "\"";
        EXPECT_EQ(v, c.value) << "text: \"" << c.text << "\"";
    }
}

TEST(ParseBytes, RejectsOverflow)
{
    const char *cases[] = {
        "18446744073709551616",         // UINT64_MAX + 1
        "99999999999999999999",         // far beyond
        "184467440737095516150",        // one digit too many
        "16777216T",                    // 2^24 * 2^40 = 2^64
        "17179869184G",                 // 2^34 * 2^30 = 2^64
        "17592186044416M",              // 2^44 * 2^20 = 2^64
        "18014398509481984K",           // 2^54 * 2^10 = 2^64
        "18446744073709551615K",        // UINT64_MAX KiB
    };
    for (const char *text : cases) {
        std::uint64_t v = 0;
        EXPECT_FALSE(cc_coll::detail::parse_bytes(text, &v)) << "text: \"" << text << "\" parsed as " << v;
    }
}

TEST(ParseBytes, RejectsGarbageAndEmpty)
{
    const char *cases[] = {
        "",      "   ",   "\t",    "abc",  "K",     "KiB",  "-1",   "+1",    "1.5K", "1,024",
        "0x10",  "1X",    "1KX",   "1KK",  "1KiBB", "1KBB", "1Bi",  "1BB",   "1iB",  "1 2",
        "1K 2",  "1P",    "1E",    "M1",   "1 K B", "1Kb x", "one", "1e3",
    };
    for (const char *text : cases) {
        std::uint64_t v = 0;
        EXPECT_FALSE(cc_coll::detail::parse_bytes(text, &v)) << "text: \"" << text << "\" parsed as " << v;
    }
}

// ---------------------------------------------------------------- parse_bool

TEST(ParseBool, AcceptsAllSpellings)
{
    const char *truthy[] = {"1", "true", "TRUE", "True", "yes", "YES", "on", "On", "  true  "};
    const char *falsy[] = {"0", "false", "FALSE", "no", "No", "off", "OFF", " off\t"};
    for (const char *t : truthy) {
        bool v = false;
        EXPECT_TRUE(cc_coll::detail::parse_bool(t, &v)) << t;
        EXPECT_TRUE(v) << t;
    }
    for (const char *t : falsy) {
        bool v = true;
        EXPECT_TRUE(cc_coll::detail::parse_bool(t, &v)) << t;
        EXPECT_FALSE(v) << t;
    }
}

TEST(ParseBool, RejectsOthers)
{
    const char *cases[] = {"", "  ", "2", "-1", "y", "n", "t", "f", "truee", "enable", "o n", "10"};
    for (const char *t : cases) {
        bool v = false;
        EXPECT_FALSE(cc_coll::detail::parse_bool(t, &v)) << "text: \"" << t << "\"";
    }
}

// ---------------------------------------------------------------- parse_double

TEST(ParseDouble, AcceptsFiniteValues)
{
    struct Case {
        const char *text;
        double value;
    } cases[] = {
        {"0", 0.0}, {"1.5", 1.5}, {" -2.25 ", -2.25}, {"1e3", 1000.0}, {"1E-2", 0.01}, {".5", 0.5}, {"+3", 3.0},
        {"1.7976931348623157e308", 1.7976931348623157e308},
    };
    for (const Case &c : cases) {
        double v = -999;
        EXPECT_TRUE(cc_coll::detail::parse_double(c.text, &v)) << c.text;
        EXPECT_DOUBLE_EQ(v, c.value) << c.text;
    }
}

TEST(ParseDouble, RejectsNanInfAndGarbage)
{
    const char *cases[] = {"",     "   ",       "nan",  "NaN",   "-nan", "nan(0x1)", "inf",  "-inf", "INF",
                           "infinity", "Infinity", "1e400", "-1e400", "abc", "1.5x", "1.5 2", "--1", "1e", "e3"};
    for (const char *t : cases) {
        double v = 0;
        EXPECT_FALSE(cc_coll::detail::parse_double(t, &v)) << "text: \"" << t << "\" parsed as " << v;
    }
}

// ---------------------------------------------------------------- parse_method / parse_log_level

TEST(ParseMethod, AcceptsNone)
{
    const char *cases[] = {"none", "NONE", "None", "  none\t"};
    for (const char *t : cases) {
        cc_coll_method_t m = static_cast<cc_coll_method_t>(77);
        EXPECT_TRUE(cc_coll::detail::parse_method(t, &m)) << t;
        EXPECT_EQ(m, CC_COLL_METHOD_NONE) << t;
    }
}

TEST(ParseMethod, RejectsOthers)
{
    const char *cases[] = {"", " ", "bogus", "0", "nonee", "no ne", "none x", "zfp"};
    for (const char *t : cases) {
        cc_coll_method_t m = CC_COLL_METHOD_NONE;
        EXPECT_FALSE(cc_coll::detail::parse_method(t, &m)) << "text: \"" << t << "\"";
    }
}

TEST(ParseLogLevel, AcceptsTheFourLevels)
{
    struct Case {
        const char *text;
        LogLevel level;
    } cases[] = {
        {"none", LogLevel::None},   {"error", LogLevel::Error}, {"info", LogLevel::Info},
        {"debug", LogLevel::Debug}, {"DEBUG", LogLevel::Debug}, {" Error ", LogLevel::Error},
    };
    for (const Case &c : cases) {
        LogLevel l = static_cast<LogLevel>(99);
        EXPECT_TRUE(cc_coll::detail::parse_log_level(c.text, &l)) << c.text;
        EXPECT_EQ(l, c.level) << c.text;
    }
}

TEST(ParseLogLevel, RejectsOthers)
{
    const char *cases[] = {"", "warn", "warning", "2", "verbose", "errors", "in fo"};
    for (const char *t : cases) {
        LogLevel l = LogLevel::None;
        EXPECT_FALSE(cc_coll::detail::parse_log_level(t, &l)) << "text: \"" << t << "\"";
    }
}

// ---------------------------------------------------------------- settings table

TEST(Settings, EveryEntryIsWellFormedAndItsDefaultParses)
{
    std::size_t n = 0;
    const cc_coll::detail::SettingDef *table = cc_coll::detail::settings(&n);
    ASSERT_NE(table, nullptr);
    ASSERT_GT(n, 0u);
    std::set<std::string> names;
    for (std::size_t i = 0; i < n; ++i) {
        const cc_coll::detail::SettingDef &s = table[i];
        ASSERT_NE(s.name, nullptr) << "entry " << i;
        ASSERT_NE(s.env_var, nullptr) << "entry " << i;
        ASSERT_NE(s.default_value, nullptr) << s.name;
        ASSERT_NE(s.doc, nullptr) << s.name;
        ASSERT_NE(s.apply, nullptr) << s.name;
        EXPECT_STRNE(s.name, "") << "entry " << i;
        EXPECT_EQ(std::string(s.env_var), "CC_COLL_" + std::string(s.name));
        EXPECT_STRNE(s.doc, "") << s.name;
        EXPECT_TRUE(names.insert(s.name).second) << "duplicate setting " << s.name;
        Config cfg;
        std::string why;
        EXPECT_TRUE(s.apply(s.default_value, &cfg, &why)) << s.name << " default \"" << s.default_value
                                                          << "\" does not parse: " << why;
        // A value that no setting accepts must be rejected, with a reason.
        why.clear();
        EXPECT_FALSE(s.apply("\x01not-a-valid-value\x01", &cfg, &why)) << s.name;
        EXPECT_FALSE(why.empty()) << s.name;
    }
    EXPECT_EQ(names.count("METHOD"), 1u);
    EXPECT_EQ(names.count("LOG_LEVEL"), 1u);
}

TEST(Settings, CApiMatchesTheTable)
{
    std::size_t n = 0;
    const cc_coll::detail::SettingDef *table = cc_coll::detail::settings(&n);
    ASSERT_EQ(cc_coll_setting_count(), n);
    for (std::size_t i = 0; i < n; ++i) {
        cc_coll_setting_t out{};
        const cc_coll_status_t st = cc_coll_setting_get(i, &out);
        // The process environment may legitimately hold a CC_COLL_* value;
        // the static fields must match the table regardless.
        EXPECT_TRUE(st == CC_COLL_OK || st == CC_COLL_ERR_CONFIG) << cc_coll_status_string(st);
        EXPECT_STREQ(out.name, table[i].name);
        EXPECT_STREQ(out.env_var, table[i].env_var);
        EXPECT_STREQ(out.default_value, table[i].default_value);
        EXPECT_STREQ(out.doc, table[i].doc);
        ASSERT_NE(out.value, nullptr);
    }
    cc_coll_setting_t out{};
    EXPECT_EQ(cc_coll_setting_get(n, &out), CC_COLL_ERR_INVALID_ARG);
    EXPECT_NE(std::string(cc_coll_last_error()).find("index"), std::string::npos) << cc_coll_last_error();
}

// ---------------------------------------------------------------- load_config

TEST(LoadConfig, DefaultsWhenEnvironmentIsEmpty)
{
    FakeEnv env;
    Config cfg;
    cfg.method = static_cast<cc_coll_method_t>(77);
    cfg.log_level = LogLevel::Debug;
    std::string why = "untouched";
    ASSERT_EQ(cc_coll::detail::load_config(env.lookup(), &cfg, &why), CC_COLL_OK) << why;
    EXPECT_EQ(cfg.method, CC_COLL_METHOD_NONE);
    EXPECT_EQ(cfg.log_level, LogLevel::None);

    // Every setting's variable was looked up, by its exact name.
    std::size_t n = 0;
    const cc_coll::detail::SettingDef *table = cc_coll::detail::settings(&n);
    for (std::size_t i = 0; i < n; ++i) {
        bool seen = false;
        for (const std::string &q : env.queried) seen = seen || q == table[i].env_var;
        EXPECT_TRUE(seen) << table[i].env_var << " was never looked up";
    }
}

TEST(LoadConfig, EnvironmentOverridesDefault)
{
    FakeEnv env;
    env.vars["CC_COLL_LOG_LEVEL"] = "debug";
    env.vars["CC_COLL_METHOD"] = " NONE ";
    env.vars["CC_COLL_UNRELATED"] = "whatever";  // unknown variables are ignored
    Config cfg;
    std::string why;
    ASSERT_EQ(cc_coll::detail::load_config(env.lookup(), &cfg, &why), CC_COLL_OK) << why;
    EXPECT_EQ(cfg.log_level, LogLevel::Debug);
    EXPECT_EQ(cfg.method, CC_COLL_METHOD_NONE);

    env.vars["CC_COLL_LOG_LEVEL"] = "Info";
    ASSERT_EQ(cc_coll::detail::load_config(env.lookup(), &cfg, &why), CC_COLL_OK) << why;
    EXPECT_EQ(cfg.log_level, LogLevel::Info);
}

TEST(LoadConfig, BadValueNamesVariableAndValue)
{
    struct Case {
        const char *var;
        const char *value;
    } cases[] = {
        {"CC_COLL_METHOD", "bogus"},
        {"CC_COLL_METHOD", ""},
        {"CC_COLL_LOG_LEVEL", "loud"},
    };
    for (const Case &c : cases) {
        FakeEnv env;
        env.vars[c.var] = c.value;
        Config cfg;
        std::string why;
        EXPECT_EQ(cc_coll::detail::load_config(env.lookup(), &cfg, &why), CC_COLL_ERR_CONFIG) << c.var << "=" << c.value;
        EXPECT_NE(why.find(c.var), std::string::npos) << why;
        EXPECT_NE(why.find(std::string("\"") + c.value + "\""), std::string::npos) << why;
    }
}

TEST(LoadConfig, BadValueWithNullWhyAndNoLastError)
{
    FakeEnv env;
    env.vars["CC_COLL_METHOD"] = "bogus";
    Config cfg;
    cc_coll::detail::clear_error();
    EXPECT_EQ(cc_coll::detail::load_config(env.lookup(), &cfg, nullptr), CC_COLL_ERR_CONFIG);
    // load_config never records a last error.
    EXPECT_STREQ(cc_coll::detail::last_error(), "");
}

// ---------------------------------------------------------------- LD_PRELOAD shim settings

using cc_coll::detail::PreloadSettings;

// The index of setting `name` in the table, or the table's size.
std::size_t setting_index(const char *name)
{
    std::size_t n = 0;
    const cc_coll::detail::SettingDef *table = cc_coll::detail::settings(&n);
    for (std::size_t i = 0; i < n; ++i)
        if (std::string(table[i].name) == name) return i;
    return n;
}

TEST(PreloadSettings, ShimSettingsCloseTheTable)
{
    std::size_t n = 0, m = 0;
    const cc_coll::detail::SettingDef *table = cc_coll::detail::settings(&n);
    const cc_coll::detail::SettingDef *shim = cc_coll::detail::preload_setting_defs(&m);
    ASSERT_EQ(m, 7u);
    ASSERT_GE(n, m);
    for (std::size_t i = 0; i < m; ++i) {
        const cc_coll::detail::SettingDef &s = table[n - m + i];
        EXPECT_STREQ(s.name, shim[i].name);
        EXPECT_STREQ(s.env_var, shim[i].env_var);
        EXPECT_STREQ(s.default_value, shim[i].default_value);
        EXPECT_STREQ(s.doc, shim[i].doc);
        EXPECT_EQ(s.apply, shim[i].apply);
    }
    const char *expected[][2] = {{"CC_COLL_MIN_BYTES", "1M"}, {"CC_COLL_MIN_REPEATS", "100"},
                                 {"CC_COLL_ALLOW", ""},        {"CC_COLL_DENY", ""},
                                 {"CC_COLL_QUIET", "0"},       {"CC_COLL_STATS", "0"},
                                 {"CC_COLL_ADVISE", "0"}};
    for (std::size_t i = 0; i < m; ++i) {
        EXPECT_STREQ(shim[i].env_var, expected[i][0]);
        EXPECT_STREQ(shim[i].default_value, expected[i][1]);
    }
}

TEST(PreloadSettings, ShimEntriesValidateButLeaveConfigAlone)
{
    std::size_t m = 0;
    const cc_coll::detail::SettingDef *shim = cc_coll::detail::preload_setting_defs(&m);
    for (std::size_t i = 0; i < m; ++i) {
        Config cfg;
        cfg.method = CC_COLL_METHOD_LOWRANK;
        cfg.density = 0.5;
        cfg.ef = false;
        cfg.ef_max_bytes = 12345;
        cfg.cuda_chunk_bytes = 8192;
        std::string why;
        // A valid value of each: "1" for the numbers and switches, an entry
        // for the lists.
        const bool list = std::string(shim[i].name) == "ALLOW" || std::string(shim[i].name) == "DENY";
        EXPECT_TRUE(shim[i].apply(list ? "comm:x" : "1", &cfg, &why)) << shim[i].name << ": " << why;
        EXPECT_EQ(cfg.method, CC_COLL_METHOD_LOWRANK);
        EXPECT_EQ(cfg.density, 0.5);
        EXPECT_FALSE(cfg.ef);
        EXPECT_EQ(cfg.ef_max_bytes, 12345u);
        EXPECT_EQ(cfg.cuda_chunk_bytes, 8192u);
        EXPECT_FALSE(shim[i].apply("plenty", &cfg, &why)) << shim[i].name;
        EXPECT_FALSE(why.empty()) << shim[i].name;
    }
}

TEST(PreloadSettings, DefaultsWhenEnvironmentIsEmpty)
{
    FakeEnv env;
    std::vector<std::string> errors;
    const PreloadSettings s = cc_coll::detail::load_preload_settings(env.lookup(), &errors);
    EXPECT_TRUE(errors.empty());
    EXPECT_EQ(s.method, CC_COLL_METHOD_NONE);
    EXPECT_EQ(s.density, 0.01);
    EXPECT_TRUE(s.ef);
    EXPECT_EQ(s.ef_max_bytes, 0u);
    EXPECT_EQ(s.min_bytes, std::uint64_t{1} << 20);
    EXPECT_EQ(s.min_repeats, 100u);
    EXPECT_TRUE(s.allow.empty());
    EXPECT_TRUE(s.deny.empty());
    EXPECT_FALSE(s.quiet);
    EXPECT_FALSE(s.stats);

    // Every setting of the table is read (and so validated), not only these.
    std::size_t n = 0;
    const cc_coll::detail::SettingDef *table = cc_coll::detail::settings(&n);
    for (std::size_t i = 0; i < n; ++i) {
        bool seen = false;
        for (const std::string &q : env.queried) seen = seen || q == table[i].env_var;
        EXPECT_TRUE(seen) << table[i].env_var << " was never looked up";
    }
}

TEST(PreloadSettings, EnvironmentOverridesDefault)
{
    FakeEnv env;
    env.vars["CC_COLL_METHOD"] = "topk";
    env.vars["CC_COLL_DENSITY"] = "0.25";
    env.vars["CC_COLL_EF"] = "off";
    env.vars["CC_COLL_EF_MAX_BYTES"] = "2M";
    env.vars["CC_COLL_MIN_BYTES"] = " 64KiB ";
    env.vars["CC_COLL_STATS"] = "Yes";
    env.vars["CC_COLL_MIN_REPEATS"] = " 7 ";
    env.vars["CC_COLL_ALLOW"] = "comm:grad*, site:train_step";
    env.vars["CC_COLL_DENY"] = "site:lmp+0x1000-0x2000";
    env.vars["CC_COLL_QUIET"] = "on";
    env.vars["CC_COLL_ADVISE"] = " TRUE ";
    std::vector<std::string> errors;
    const PreloadSettings s = cc_coll::detail::load_preload_settings(env.lookup(), &errors);
    EXPECT_TRUE(errors.empty()) << errors.front();
    EXPECT_EQ(s.min_repeats, 7u);
    ASSERT_EQ(s.allow.size(), 2u);
    EXPECT_EQ(s.allow[0].text, "comm:grad*");
    EXPECT_EQ(s.allow[1].text, "site:train_step");
    ASSERT_EQ(s.deny.size(), 1u);
    EXPECT_EQ(s.deny[0].kind, cc_coll::detail::PreloadPattern::Kind::SiteRange);
    EXPECT_TRUE(s.quiet);
    EXPECT_EQ(s.method, CC_COLL_METHOD_TOPK);
    EXPECT_EQ(s.density, 0.25);
    EXPECT_FALSE(s.ef);
    EXPECT_EQ(s.ef_max_bytes, std::uint64_t{2} << 20);
    EXPECT_EQ(s.min_bytes, std::uint64_t{64} << 10);
    EXPECT_TRUE(s.stats);
    EXPECT_TRUE(s.advise);

    env.vars["CC_COLL_MIN_BYTES"] = "0";
    env.vars["CC_COLL_STATS"] = "0";
    env.vars["CC_COLL_MIN_REPEATS"] = "0";
    env.vars["CC_COLL_ALLOW"] = " , ";
    const PreloadSettings t = cc_coll::detail::load_preload_settings(env.lookup(), &errors);
    EXPECT_TRUE(errors.empty());
    EXPECT_EQ(t.min_bytes, 0u);
    EXPECT_FALSE(t.stats);
    EXPECT_EQ(t.min_repeats, 0u);
    EXPECT_TRUE(t.allow.empty());
}

TEST(PreloadSettings, BadRepeatsAndPatternsAreNamed)
{
    FakeEnv env;
    env.vars["CC_COLL_MIN_REPEATS"] = "-1";
    env.vars["CC_COLL_ALLOW"] = "comm:world,thermo";
    env.vars["CC_COLL_DENY"] = "site:lmp+0x2000-0x1000";
    env.vars["CC_COLL_QUIET"] = "hush";
    std::vector<std::string> errors;
    const PreloadSettings s = cc_coll::detail::load_preload_settings(env.lookup(), &errors);
    ASSERT_EQ(errors.size(), 4u);
    EXPECT_EQ(errors[0], "CC_COLL_MIN_REPEATS=\"-1\" is invalid: expected a whole number of calls from 0 to "
                         "999999999999, such as 0, 10 or 100");
    EXPECT_EQ(errors[1], "CC_COLL_ALLOW=\"comm:world,thermo\" is invalid: entry \"thermo\" starts with neither "
                         "comm: nor site: (expected comma-separated entries comm:NAME, site:SYMBOL or "
                         "site:OBJECT+0xSTART-0xEND)");
    EXPECT_EQ(errors[2], "CC_COLL_DENY=\"site:lmp+0x2000-0x1000\" is invalid: entry \"site:lmp+0x2000-0x1000\" is "
                         "not site:OBJECT+0xSTART-0xEND with hexadecimal offsets, START below END");
    EXPECT_EQ(errors[3], "CC_COLL_QUIET=\"hush\" is invalid: expected 1/0, true/false, yes/no or on/off");
    EXPECT_EQ(s.min_repeats, 100u);
    EXPECT_TRUE(s.allow.empty());
    EXPECT_TRUE(s.deny.empty());
    EXPECT_FALSE(s.quiet);

    std::vector<cc_coll::detail::PreloadPattern> list;
    std::string why;
    for (const char *bad : {"comm:", "site:", "site:a+0x10", "site:+0x1-0x2", "site:a+0x-0x2", "site:a+0x1-0xg",
                            "node:3", "world"}) {
        EXPECT_FALSE(cc_coll::detail::parse_preload_patterns(bad, &list, &why)) << bad;
        EXPECT_NE(why.find(std::string("\"") + bad + "\""), std::string::npos) << why;
    }
}

TEST(PreloadSettings, PatternsMatchCommunicatorNamesAndCallSites)
{
    using cc_coll::detail::PreloadCallSite;
    using cc_coll::detail::PreloadPattern;
    std::vector<PreloadPattern> list;
    std::string why;
    ASSERT_TRUE(cc_coll::detail::parse_preload_patterns(
        "comm:MPI COMM * SPLIT FROM *, site:fix_ave_chunk_*, site:lmp_*+0x1000-0x1100", &list, &why))
        << why;
    ASSERT_EQ(list.size(), 3u);
    EXPECT_EQ(list[0].kind, PreloadPattern::Kind::Comm);
    EXPECT_EQ(list[1].kind, PreloadPattern::Kind::SiteSymbol);
    EXPECT_EQ(list[2].kind, PreloadPattern::Kind::SiteRange);
    EXPECT_EQ(list[2].glob, "lmp_*");
    EXPECT_EQ(list[2].start, 0x1000u);
    EXPECT_EQ(list[2].end, 0x1100u);

    PreloadCallSite none;
    PreloadCallSite in_fix{"liblammps.so.0", 0x5000, "fix_ave_chunk_end_of_step"};
    PreloadCallSite in_range{"lmp_mpi", 0x10ff, ""};
    PreloadCallSite past_range{"lmp_mpi", 0x1100, "main"};
    auto matches = [](const PreloadPattern &p, const char *comm, const PreloadCallSite &site) {
        return cc_coll::detail::preload_pattern_matches(p, comm, site);
    };
    EXPECT_TRUE(matches(list[0], "MPI COMM 4 SPLIT FROM 0", none));
    EXPECT_FALSE(matches(list[0], "MPI COMM 3 DUP FROM 0", none));
    EXPECT_FALSE(matches(list[0], "MPI_COMM_WORLD", none));
    EXPECT_TRUE(matches(list[1], "MPI_COMM_WORLD", in_fix));
    EXPECT_FALSE(matches(list[1], "MPI_COMM_WORLD", none));  // no symbol: no match
    EXPECT_TRUE(matches(list[2], "", in_range));
    EXPECT_FALSE(matches(list[2], "", past_range));  // the end is exclusive
    EXPECT_FALSE(matches(list[2], "", in_fix));
    EXPECT_TRUE(cc_coll::detail::preload_patterns_match(list, "MPI_COMM_WORLD", in_range));
    EXPECT_FALSE(cc_coll::detail::preload_patterns_match(list, "MPI_COMM_WORLD", past_range));
    EXPECT_FALSE(cc_coll::detail::preload_patterns_match({}, "MPI_COMM_WORLD", in_fix));
}

TEST(PreloadSettings, EveryBadValueIsReportedInTableOrderAndKeepsTheDefault)
{
    FakeEnv env;
    env.vars["CC_COLL_STATS"] = "maybe";
    env.vars["CC_COLL_MIN_BYTES"] = "lots";
    env.vars["CC_COLL_DENSITY"] = "2";
    env.vars["CC_COLL_SEED"] = "-1";  // a setting the shim does not use still counts
    env.vars["CC_COLL_ADVISE"] = "sometimes";
    std::vector<std::string> errors;
    const PreloadSettings s = cc_coll::detail::load_preload_settings(env.lookup(), &errors);
    ASSERT_EQ(errors.size(), 5u);
    const std::size_t density = setting_index("DENSITY"), seed = setting_index("SEED");
    EXPECT_EQ(errors[density < seed ? 0 : 1], "CC_COLL_DENSITY=\"2\" is invalid: expected a number in (0, 1]");
    EXPECT_EQ(errors[density < seed ? 1 : 0].rfind("CC_COLL_SEED=\"-1\" is invalid: ", 0), 0u) << errors[1];
    EXPECT_EQ(errors[2], "CC_COLL_MIN_BYTES=\"lots\" is invalid: expected a byte count such as 0, 65536, 64K or 1M");
    EXPECT_EQ(errors[3], "CC_COLL_STATS=\"maybe\" is invalid: expected 1/0, true/false, yes/no or on/off");
    EXPECT_EQ(errors[4], "CC_COLL_ADVISE=\"sometimes\" is invalid: expected 1/0, true/false, yes/no or on/off");
    EXPECT_EQ(s.density, 0.01);
    EXPECT_EQ(s.min_bytes, std::uint64_t{1} << 20);
    EXPECT_FALSE(s.stats);
    EXPECT_FALSE(s.advise);
}

TEST(PreloadSettings, BadShimValueStillFailsLoadConfig)
{
    // cc_coll_comm_create rejects every invalid CC_COLL_* value, the shim's
    // included, as before they left Config.
    const char *vars[] = {"CC_COLL_MIN_BYTES", "CC_COLL_MIN_REPEATS", "CC_COLL_ALLOW",
                          "CC_COLL_DENY",      "CC_COLL_QUIET",       "CC_COLL_STATS",
                          "CC_COLL_ADVISE"};
    for (const char *var : vars) {
        FakeEnv env;
        env.vars[var] = "plenty";
        Config cfg;
        std::string why;
        EXPECT_EQ(cc_coll::detail::load_config(env.lookup(), &cfg, &why), CC_COLL_ERR_CONFIG) << var;
        EXPECT_EQ(why.rfind(std::string(var) + "=\"plenty\" is invalid: ", 0), 0u) << why;
    }
}

// Sets an environment variable for one scope, restoring it afterwards.
class ScopedEnv {
public:
    ScopedEnv(const char *name, const char *value) : name_(name)
    {
        const char *old = std::getenv(name);
        had_ = old != nullptr;
        if (had_) old_ = old;
        setenv(name, value, 1);
    }
    ~ScopedEnv()
    {
        if (had_) setenv(name_, old_.c_str(), 1);
        else unsetenv(name_);
    }
    ScopedEnv(const ScopedEnv &) = delete;
    ScopedEnv &operator=(const ScopedEnv &) = delete;

private:
    const char *name_;
    bool had_ = false;
    std::string old_;
};

TEST(PreloadSettings, CApiReadsAndValidatesShimSettings)
{
    const std::size_t i = setting_index("MIN_BYTES");
    ASSERT_LT(i, cc_coll_setting_count());
    {
        ScopedEnv env("CC_COLL_MIN_BYTES", "64K");
        cc_coll_setting_t out{};
        ASSERT_EQ(cc_coll_setting_get(i, &out), CC_COLL_OK) << cc_coll_last_error();
        EXPECT_STREQ(out.env_var, "CC_COLL_MIN_BYTES");
        EXPECT_STREQ(out.default_value, "1M");
        EXPECT_STREQ(out.value, "64K");
        EXPECT_EQ(out.from_env, 1);
    }
    {
        ScopedEnv env("CC_COLL_MIN_BYTES", "lots");
        cc_coll_setting_t out{};
        EXPECT_EQ(cc_coll_setting_get(i, &out), CC_COLL_ERR_CONFIG);
        EXPECT_STREQ(out.value, "1M");
        EXPECT_EQ(out.from_env, 0);
        EXPECT_NE(std::string(cc_coll_last_error()).find("CC_COLL_MIN_BYTES=\"lots\" is invalid"), std::string::npos)
            << cc_coll_last_error();
    }
}

// ---------------------------------------------------------------- precedence

TEST(ResolveParams, NullParamsTakesConfigMethod)
{
    Config cfg;
    cfg.method = CC_COLL_METHOD_NONE;
    cc_coll::detail::CallParams out;
    out.method = static_cast<cc_coll_method_t>(55);
    ASSERT_EQ(cc_coll::detail::resolve_params(nullptr, cfg, &out), CC_COLL_OK);
    EXPECT_EQ(out.method, CC_COLL_METHOD_NONE);

    // The configuration's value is taken verbatim (LOWRANK stands for "not
    // the default"; a value outside the enum would be undefined behaviour).
    cfg.method = CC_COLL_METHOD_LOWRANK;
    ASSERT_EQ(cc_coll::detail::resolve_params(nullptr, cfg, &out), CC_COLL_OK);
    EXPECT_EQ(out.method, CC_COLL_METHOD_LOWRANK);
}

TEST(ResolveParams, MaskZeroIgnoresMethodField)
{
    Config cfg;
    cfg.method = CC_COLL_METHOD_LOWRANK;
    cc_coll_params_t params{};
    params.mask = 0;
    params.method = static_cast<cc_coll_method_t>(42);  // invalid, but not selected by the mask
    cc_coll::detail::CallParams out;
    ASSERT_EQ(cc_coll::detail::resolve_params(&params, cfg, &out), CC_COLL_OK) << cc_coll::detail::last_error();
    EXPECT_EQ(out.method, CC_COLL_METHOD_LOWRANK);

    cfg.method = CC_COLL_METHOD_NONE;
    ASSERT_EQ(cc_coll::detail::resolve_params(&params, cfg, &out), CC_COLL_OK);
    EXPECT_EQ(out.method, CC_COLL_METHOD_NONE);
}

TEST(ResolveParams, ExplicitMethodWins)
{
    Config cfg;
    cfg.method = CC_COLL_METHOD_LOWRANK;
    cc_coll_params_t params{};
    params.mask = CC_COLL_PARAMS_FIELD_METHOD;
    params.method = CC_COLL_METHOD_NONE;
    cc_coll::detail::CallParams out;
    out.method = static_cast<cc_coll_method_t>(55);
    ASSERT_EQ(cc_coll::detail::resolve_params(&params, cfg, &out), CC_COLL_OK);
    EXPECT_EQ(out.method, CC_COLL_METHOD_NONE);
}

TEST(ResolveParams, ExplicitInvalidMethodIsRejected)
{
    Config cfg;
    cc_coll_params_t params{};
    params.mask = CC_COLL_PARAMS_FIELD_METHOD;
    params.method = static_cast<cc_coll_method_t>(42);
    cc_coll::detail::CallParams out;
    cc_coll::detail::clear_error();
    EXPECT_EQ(cc_coll::detail::resolve_params(&params, cfg, &out), CC_COLL_ERR_INVALID_METHOD);
    EXPECT_NE(std::string(cc_coll::detail::last_error()).find("method"), std::string::npos) << cc_coll::detail::last_error();

    params.method = static_cast<cc_coll_method_t>(-1);
    EXPECT_EQ(cc_coll::detail::resolve_params(&params, cfg, &out), CC_COLL_ERR_INVALID_METHOD);
}

TEST(ResolveParams, UnknownMaskBitsAreRejected)
{
    Config cfg;
    const std::uint64_t bad_masks[] = {std::uint64_t{1} << 40, std::uint64_t{1} << 63,
                                       CC_COLL_PARAMS_FIELD_METHOD | (std::uint64_t{1} << 20),
                                       cc_coll::detail::kKnownParamsFields + 1 + cc_coll::detail::kKnownParamsFields};
    for (std::uint64_t mask : bad_masks) {
        cc_coll_params_t params{};
        params.mask = mask;
        params.method = CC_COLL_METHOD_NONE;
        cc_coll::detail::CallParams out;
        cc_coll::detail::clear_error();
        EXPECT_EQ(cc_coll::detail::resolve_params(&params, cfg, &out), CC_COLL_ERR_INVALID_PARAMS) << std::hex << mask;
        EXPECT_NE(std::string(cc_coll::detail::last_error()).find("mask"), std::string::npos) << cc_coll::detail::last_error();
    }
}

}  // namespace
