// The method registry (core/method.hpp, src/methods/): ids stable (the
// public enumerators, pinned here) and ascending, names unique and round-tripping through every lookup (the C ABI's
// cc_coll_method_name, the settings parser, resolve_params), every method
// reachable by allreduce, and a reason for every collective it refuses.
#include <cctype>
#include <cstring>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "cc_coll.h"
#include "core/config.hpp"
#include "core/error.hpp"
#include "core/method.hpp"
#include "core/params.hpp"

namespace {

using namespace cc_coll::detail;

TEST(Registry, PublicEnumeratorsKeepTheirValues)
{
    // Values a compiled program holds: never renumbered. A new method takes
    // the next value after the last one.
    EXPECT_EQ(CC_COLL_METHOD_NONE, 0);
    EXPECT_EQ(CC_COLL_METHOD_TOPK, 1);
    EXPECT_EQ(CC_COLL_METHOD_SKETCH, 2);
    EXPECT_EQ(CC_COLL_METHOD_LOWRANK, 3);
    EXPECT_EQ(CC_COLL_METHOD_AUTO, 4);
    EXPECT_EQ(CC_COLL_METHOD_HALF, 5);
    EXPECT_EQ(CC_COLL_METHOD_QUANT, 6);
    EXPECT_EQ(CC_COLL_METHOD_ONEBIT, 7);
    EXPECT_EQ(CC_COLL_F32, 0);
    EXPECT_EQ(CC_COLL_F64, 1);
    EXPECT_EQ(CC_COLL_F16, 2);
    EXPECT_EQ(CC_COLL_BF16, 3);
    EXPECT_EQ(CC_COLL_SUM, 0);
    EXPECT_EQ(CC_COLL_AVG, 1);
    EXPECT_EQ(CC_COLL_SPARSIFY_TOPK, 0);
    EXPECT_EQ(CC_COLL_SPARSIFY_THRESHOLD, 1);
    EXPECT_EQ(CC_COLL_METHOD_CAP_LOSSY, 1);
    EXPECT_EQ(CC_COLL_METHOD_CAP_REDUCE_SCATTER, 2);
    EXPECT_EQ(CC_COLL_METHOD_CAP_P2P, 4);
    EXPECT_EQ(CC_COLL_METHOD_CAP_MATRIX, 8);
    EXPECT_EQ(CC_COLL_METHOD_CAP_STATE, 16);
    EXPECT_EQ(CC_COLL_METHOD_CAP_SELECTS, 32);
    EXPECT_EQ(CC_COLL_METHOD_CAP_AUTO_CANDIDATE, 64);
    EXPECT_EQ(CC_COLL_METHOD_CAP_DENSITY, 128);
}

TEST(Registry, IdsAscendAndFitTheStateSlots)
{
    const auto &all = methods();
    ASSERT_GE(all.size(), 5u);
    ASSERT_LE(all.size(), static_cast<std::size_t>(kMaxMethods));
    for (std::size_t i = 0; i < all.size(); ++i) {
        ASSERT_NE(all[i], nullptr);
        if (i > 0) {
            EXPECT_GT(all[i]->id, all[i - 1]->id) << all[i]->name;
        }
        EXPECT_LT(static_cast<int>(all[i]->id), kMaxMethods) << all[i]->name;
        EXPECT_EQ(find_method(static_cast<int>(all[i]->id)), all[i]);
    }
    EXPECT_EQ(find_method(-1), nullptr);
    EXPECT_EQ(find_method(kMaxMethods), nullptr);
}

TEST(Registry, TheCAbiListsEveryMethodWithItsCaps)
{
    ASSERT_EQ(cc_coll_method_count(), static_cast<int>(methods().size()));
    for (int i = 0; i < cc_coll_method_count(); ++i) {
        cc_coll_method_t id{};
        ASSERT_EQ(cc_coll_method_at(i, &id), CC_COLL_OK);
        const Method *m = methods()[static_cast<std::size_t>(i)];
        EXPECT_EQ(id, m->id);
        EXPECT_EQ(cc_coll_method_caps(id), method_caps(*m)) << m->name;
        EXPECT_STREQ(cc_coll_method_summary(id), m->summary);
        cc_coll_method_t named{};
        ASSERT_EQ(cc_coll_method_from_name(m->name, &named), CC_COLL_OK);
        EXPECT_EQ(named, id);
    }
    cc_coll_method_t id{};
    EXPECT_EQ(cc_coll_method_at(-1, &id), CC_COLL_ERR_INVALID_ARG);
    EXPECT_EQ(cc_coll_method_at(cc_coll_method_count(), &id), CC_COLL_ERR_INVALID_ARG);
    EXPECT_NE(std::string(cc_coll_last_error()).find("index"), std::string::npos);
    EXPECT_EQ(cc_coll_method_at(0, nullptr), CC_COLL_ERR_INVALID_ARG);
    EXPECT_EQ(cc_coll_method_from_name("quantise", &id), CC_COLL_ERR_INVALID_METHOD);
    EXPECT_NE(std::string(cc_coll_last_error()).find("none, topk"), std::string::npos) << cc_coll_last_error();
    EXPECT_EQ(cc_coll_method_from_name(nullptr, &id), CC_COLL_ERR_INVALID_ARG);
    EXPECT_EQ(cc_coll_method_caps(static_cast<cc_coll_method_t>(kMaxMethods)), 0u);
    EXPECT_EQ(cc_coll_method_summary(static_cast<cc_coll_method_t>(-1)), nullptr);
    // What the bindings read instead of naming methods.
    EXPECT_EQ(cc_coll_method_caps(CC_COLL_METHOD_NONE) & CC_COLL_METHOD_CAP_LOSSY, 0u);
    EXPECT_NE(cc_coll_method_caps(CC_COLL_METHOD_LOWRANK) & CC_COLL_METHOD_CAP_MATRIX, 0u);
    EXPECT_NE(cc_coll_method_caps(CC_COLL_METHOD_LOWRANK) & CC_COLL_METHOD_CAP_STATE, 0u);
    EXPECT_EQ(cc_coll_method_caps(CC_COLL_METHOD_LOWRANK) & CC_COLL_METHOD_CAP_REDUCE_SCATTER, 0u);
    EXPECT_NE(cc_coll_method_caps(CC_COLL_METHOD_AUTO) & CC_COLL_METHOD_CAP_SELECTS, 0u);
    EXPECT_EQ(cc_coll_method_caps(CC_COLL_METHOD_AUTO) & CC_COLL_METHOD_CAP_AUTO_CANDIDATE, 0u);
    EXPECT_EQ(cc_coll_method_caps(CC_COLL_METHOD_SKETCH) & CC_COLL_METHOD_CAP_P2P, 0u);
    EXPECT_NE(cc_coll_method_caps(CC_COLL_METHOD_TOPK) & CC_COLL_METHOD_CAP_AUTO_CANDIDATE, 0u);
    // Density: the sparsifiers take it; the dense codecs and LOWRANK do not.
    EXPECT_NE(cc_coll_method_caps(CC_COLL_METHOD_TOPK) & CC_COLL_METHOD_CAP_DENSITY, 0u);
    EXPECT_NE(cc_coll_method_caps(CC_COLL_METHOD_SKETCH) & CC_COLL_METHOD_CAP_DENSITY, 0u);
    for (cc_coll_method_t m : {CC_COLL_METHOD_NONE, CC_COLL_METHOD_LOWRANK, CC_COLL_METHOD_HALF, CC_COLL_METHOD_QUANT,
                               CC_COLL_METHOD_ONEBIT})
        EXPECT_EQ(cc_coll_method_caps(m) & CC_COLL_METHOD_CAP_DENSITY, 0u) << m;
    for (cc_coll_method_t m : {CC_COLL_METHOD_QUANT, CC_COLL_METHOD_ONEBIT}) {
        EXPECT_EQ(cc_coll_method_caps(m), static_cast<unsigned>(CC_COLL_METHOD_CAP_LOSSY |
                                                                 CC_COLL_METHOD_CAP_REDUCE_SCATTER |
                                                                 CC_COLL_METHOD_CAP_AUTO_CANDIDATE))
            << m;
    }
}

TEST(Registry, NamesAreUniqueLowerCaseAndRoundTrip)
{
    std::set<std::string> seen;
    for (const Method *m : methods()) {
        const std::string name = m->name;
        ASSERT_FALSE(name.empty());
        EXPECT_TRUE(seen.insert(name).second) << "duplicate name " << name;
        for (char c : name) EXPECT_TRUE(std::islower(static_cast<unsigned char>(c)) || std::isdigit(c)) << name;
        EXPECT_EQ(find_method_by_name(name), m);
        // The C ABI and the settings parser read the same table.
        EXPECT_STREQ(cc_coll_method_name(m->id), m->name);
        cc_coll_method_t parsed = CC_COLL_METHOD_NONE;
        std::string upper = name;
        for (char &c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
        ASSERT_TRUE(parse_method("  " + upper + " ", &parsed)) << name;
        EXPECT_EQ(parsed, m->id);
        ASSERT_NE(m->summary, nullptr);
        EXPECT_GT(std::strlen(m->summary), 10u) << name;
    }
    cc_coll_method_t parsed_auto = CC_COLL_METHOD_NONE;
    // AUTO is a registry entry like any other (a selecting one).
    EXPECT_STREQ(cc_coll_method_name(CC_COLL_METHOD_AUTO), "auto");
    ASSERT_NE(find_method(CC_COLL_METHOD_AUTO), nullptr);
    EXPECT_NE(find_method(CC_COLL_METHOD_AUTO)->select, nullptr);
    ASSERT_TRUE(parse_method(" Auto", &parsed_auto));
    EXPECT_EQ(parsed_auto, CC_COLL_METHOD_AUTO);
    EXPECT_EQ(cc_coll_method_name(static_cast<cc_coll_method_t>(kMaxMethods)), nullptr);
    cc_coll_method_t parsed = CC_COLL_METHOD_TOPK;
    EXPECT_FALSE(parse_method("quantise", &parsed));
    EXPECT_EQ(parsed, CC_COLL_METHOD_TOPK);  // untouched on failure
    EXPECT_EQ(find_method_by_name(""), nullptr);
}

TEST(Registry, EveryMethodHasAnAllreduceAndAReasonForWhatItRefuses)
{
    for (const Method *m : methods()) {
        // A single tensor runs through `allreduce`, or as a group of one
        // through the method's batch; a selecting method runs another one.
        EXPECT_TRUE(m->allreduce != nullptr || (m->group_plan != nullptr && m->group_batch != nullptr) ||
                    m->select != nullptr)
            << m->name;
        // AUTO's candidates tell the cost model what they exchange.
        if (m->auto_candidate) {
            EXPECT_NE(m->exchange_cost, nullptr) << m->name;
            EXPECT_TRUE(m->lossy) << m->name;
        }
        if (m->select != nullptr) continue;
        if (m->group_batch != nullptr) {
            EXPECT_NE(m->group_plan, nullptr) << m->name;
        }
        if (m->reduce_scatter == nullptr) {
            ASSERT_NE(m->why_no_reduce_scatter, nullptr) << m->name;
            EXPECT_NE(std::string(m->why_no_reduce_scatter).find(m->name), std::string::npos) << m->name;
        }
        if (m->p2p == P2pCompression::Refused) {
            ASSERT_NE(m->why_no_p2p, nullptr) << m->name;
        }
    }
}

TEST(Registry, HomomorphicFlagsFollowThePayloads)
{
    // Dense data, the count sketch and PowerSGD's factors add under MPI_SUM;
    // top-k (index, value) pairs do not.
    EXPECT_TRUE(find_method(CC_COLL_METHOD_NONE)->homomorphic);
    EXPECT_FALSE(find_method(CC_COLL_METHOD_TOPK)->homomorphic);
    EXPECT_TRUE(find_method(CC_COLL_METHOD_SKETCH)->homomorphic);
    EXPECT_TRUE(find_method(CC_COLL_METHOD_LOWRANK)->homomorphic);
}

TEST(Registry, TheMethodSettingDocumentsAndAcceptsEveryMethod)
{
    std::size_t n = 0;
    const SettingDef *table = settings(&n);
    const SettingDef *method = nullptr;
    for (std::size_t i = 0; i < n; ++i)
        if (std::string(table[i].name) == "METHOD") method = &table[i];
    ASSERT_NE(method, nullptr);
    ASSERT_NE(method->doc, nullptr);
    const std::string doc = method->doc;
    for (const Method *m : methods()) {
        EXPECT_NE(doc.find(std::string(m->name) + " ("), std::string::npos) << m->name;
        Config cfg;
        std::string why;
        EXPECT_TRUE(method->apply(m->name, &cfg, &why)) << why;
        EXPECT_EQ(cfg.method, m->id);
    }
    Config cfg;
    std::string why;
    EXPECT_FALSE(method->apply("quantise", &cfg, &why));
    EXPECT_EQ(why, "expected one of: " + method_names());
    EXPECT_EQ(method_names().rfind("none, topk, sketch, lowrank, auto", 0), 0u) << method_names();
}

TEST(Registry, ResolveParamsRejectsAnUnregisteredMethod)
{
    Config config;
    cc_coll_params_t params{};
    params.mask = CC_COLL_PARAMS_FIELD_METHOD;
    params.method = static_cast<cc_coll_method_t>(kMaxMethods);  // past every method
    CallParams out;
    EXPECT_EQ(resolve_params(&params, config, &out), CC_COLL_ERR_INVALID_METHOD);
    EXPECT_NE(std::string(last_error()).find("not a cc_coll_method_t value"), std::string::npos) << last_error();
    for (const Method *m : methods()) {
        params.method = m->id;
        ASSERT_EQ(resolve_params(&params, config, &out), CC_COLL_OK) << m->name << ": " << last_error();
        EXPECT_EQ(out.method, m->id);
    }
}

}  // namespace
