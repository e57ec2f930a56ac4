// The method registry (core/method.hpp, src/methods/): ids dense from 0,
// names unique and round-tripping through every lookup (the C ABI's
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

TEST(Registry, IdsAreDenseFromZeroAndFitTheStateSlots)
{
    const auto &all = methods();
    ASSERT_GE(all.size(), 4u);
    ASSERT_LE(all.size(), static_cast<std::size_t>(kMaxMethods));
    for (std::size_t i = 0; i < all.size(); ++i) {
        ASSERT_NE(all[i], nullptr);
        EXPECT_EQ(static_cast<std::size_t>(all[i]->id), i) << all[i]->name;
        EXPECT_EQ(find_method(static_cast<int>(i)), all[i]);
    }
    EXPECT_EQ(find_method(-1), nullptr);
    EXPECT_EQ(find_method(static_cast<int>(all.size())), nullptr);
}

TEST(Registry, TheHeaderEnumeratorsAreRegisteredUnderTheirNames)
{
    EXPECT_STREQ(find_method(CC_COLL_METHOD_NONE)->name, "none");
    EXPECT_STREQ(find_method(CC_COLL_METHOD_TOPK)->name, "topk");
    EXPECT_STREQ(find_method(CC_COLL_METHOD_SKETCH)->name, "sketch");
    EXPECT_STREQ(find_method(CC_COLL_METHOD_LOWRANK)->name, "lowrank");
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
    // AUTO follows the registered methods (it resolves to one of them per
    // call); the enumerators stay dense, and the next value names nothing.
    EXPECT_EQ(static_cast<std::size_t>(CC_COLL_METHOD_AUTO), methods().size());
    EXPECT_STREQ(cc_coll_method_name(CC_COLL_METHOD_AUTO), "auto");
    EXPECT_EQ(find_method(CC_COLL_METHOD_AUTO), nullptr);
    ASSERT_TRUE(parse_method(" Auto", &parsed_auto));
    EXPECT_EQ(parsed_auto, CC_COLL_METHOD_AUTO);
    EXPECT_EQ(cc_coll_method_name(static_cast<cc_coll_method_t>(methods().size() + 1)), nullptr);
    cc_coll_method_t parsed = CC_COLL_METHOD_TOPK;
    EXPECT_FALSE(parse_method("quantise", &parsed));
    EXPECT_EQ(parsed, CC_COLL_METHOD_TOPK);  // untouched on failure
    EXPECT_EQ(find_method_by_name(""), nullptr);
}

TEST(Registry, EveryMethodHasAnAllreduceAndAReasonForWhatItRefuses)
{
    for (const Method *m : methods()) {
        // A single tensor runs through `allreduce`, or as a group of one
        // through the method's batch.
        EXPECT_TRUE(m->allreduce != nullptr || (m->group_plan != nullptr && m->group_batch != nullptr)) << m->name;
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
    EXPECT_EQ(why, "expected one of: " + method_names() + ", auto");
    EXPECT_EQ(method_names(), "none, topk, sketch, lowrank");
}

TEST(Registry, ResolveParamsRejectsAnUnregisteredMethod)
{
    Config config;
    cc_coll_params_t params{};
    params.mask = CC_COLL_PARAMS_FIELD_METHOD;
    params.method = static_cast<cc_coll_method_t>(methods().size() + 1);  // past AUTO
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
