// The predictions of CC_COLL_METHOD=auto's cost model (methods/auto/cost_model.hpp,
// docs/algorithms.md section 8) on models with known curves, without MPI:
// each method's exchanges, the dense cases, groups, one rank, and the
// interpolation of the measured curves.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "compressors/topk/topk_select.hpp"
#include "core/config.hpp"
#include "core/params.hpp"
#include "methods/auto/cost_model.hpp"
#include "wire/topk_payload.hpp"

namespace {

using namespace cc_coll::detail;

// Link: 10 us + bytes / 1e8 (a ring allreduce at 100 MB/s); compute:
// 2 us + 0.25 ns per byte.
double link(double b) { return 10e-6 + b / 1e8; }
double work(double b) { return 2e-6 + b * 0.25e-9; }

CostModel model(cc_coll_method_t lossy, int ranks)
{
    CostModel m;
    m.lossy = lossy;
    m.ranks = ranks;
    const double lb[kLinkPoints] = {4, 4096, 65536, 1 << 20, 32 << 20};
    const double cb[kComputePoints] = {4096, 32768, 262144, 2097152, 16777216};
    for (int i = 0; i < kLinkPoints; ++i) {
        m.link_bytes[i] = lb[i];
        m.link_seconds[i] = link(lb[i]);
    }
    for (int i = 0; i < kComputePoints; ++i) {
        m.compute_bytes[i] = cb[i];
        m.compute_seconds[i] = work(cb[i]);
    }
    m.latency = m.link_seconds[0];
    m.bandwidth = 1e8;
    return m;
}

CallParams params()
{
    CallParams p;
    p.density = 0.01;
    p.load_factor = 0.77;
    p.rank = 4;
    return p;
}

void expect_near_rel(double got, double want)
{
    EXPECT_NEAR(got, want, 1e-9 * std::fabs(want)) << "got " << got << ", want " << want;
}

TEST(CostModel, CurvesInterpolateAndExtrapolateLinearly)
{
    const CostModel m = model(CC_COLL_METHOD_TOPK, 2);
    for (double b : {4096.0, 10000.0, 300000.0, 16777216.0, 1e9})
        expect_near_rel(compute_seconds(m, b), work(b));  // a straight line stays one
    EXPECT_EQ(compute_seconds(m, 1.0), work(4096.0));     // below the first point: the first point
}

TEST(CostModel, TopkAllgatherAgainstNone)
{
    const CostModel m = model(CC_COLL_METHOD_TOPK, 4);
    const CallParams p = params();
    const std::size_t n = 1 << 20;
    const AutoChoice c = predict(m, {CostTensor{n, CC_COLL_F32}}, p);
    const double bytes = 4.0 * n;
    const double payload = static_cast<double>(topk::payload_bytes(topk::k_for(p.density, n), CC_COLL_F32));
    expect_near_rel(c.predicted_none, link(bytes));
    expect_near_rel(c.predicted_lossy, work(bytes) + link(4 * payload / 2));  // the allgather as an allreduce
    EXPECT_EQ(c.method, CC_COLL_METHOD_TOPK);
}

TEST(CostModel, TopkSplitFromEightRanks)
{
    const CostModel m = model(CC_COLL_METHOD_TOPK, 8);
    const CallParams p = params();
    const std::size_t n = 1 << 20;
    const AutoChoice c = predict(m, {CostTensor{n, CC_COLL_F32}}, p);
    const double payload = static_cast<double>(topk::payload_bytes(topk::k_for(p.density, n), CC_COLL_F32));
    expect_near_rel(c.predicted_lossy, work(4.0 * n) + link(8.0 / 7.0 * payload) + 2 * m.latency);
}

TEST(CostModel, DenseCallsAreNone)
{
    CallParams p = params();
    p.density = 0.6;  // two ranks' payloads outweigh the buffer: TOPK would send densely
    AutoChoice c = predict(model(CC_COLL_METHOD_TOPK, 2), {CostTensor{4096, CC_COLL_F32}}, p);
    EXPECT_TRUE(std::isinf(c.predicted_lossy));
    EXPECT_EQ(c.method, CC_COLL_METHOD_NONE);
    // LOWRANK: a tensor without a shape is 1-D (dense); one under the
    // minimum compression rate too.
    c = predict(model(CC_COLL_METHOD_LOWRANK, 2), {CostTensor{1 << 20, CC_COLL_F32}}, params());
    EXPECT_TRUE(std::isinf(c.predicted_lossy));
    EXPECT_EQ(c.method, CC_COLL_METHOD_NONE);
    c = predict(model(CC_COLL_METHOD_LOWRANK, 2), {CostTensor{64, CC_COLL_F32, true, 8, 8}}, params());
    EXPECT_TRUE(std::isinf(c.predicted_lossy));
}

TEST(CostModel, LowrankAndSketchExchanges)
{
    const CallParams p = params();
    const std::size_t n = 1024 * 4096;
    AutoChoice c = predict(model(CC_COLL_METHOD_LOWRANK, 4), {CostTensor{n, CC_COLL_F32, true, 1024, 4096}}, p);
    expect_near_rel(c.predicted_lossy, work(4.0 * n) + link(1024.0 * 4 * 4) + link(4096.0 * 4 * 4));
    EXPECT_EQ(c.method, CC_COLL_METHOD_LOWRANK);
    // f64 factors are 8 bytes.
    c = predict(model(CC_COLL_METHOD_LOWRANK, 4), {CostTensor{n, CC_COLL_F64, true, 1024, 4096}}, p);
    expect_near_rel(c.predicted_lossy, work(8.0 * n) + link(1024.0 * 4 * 8) + link(4096.0 * 4 * 8));

    c = predict(model(CC_COLL_METHOD_SKETCH, 4), {CostTensor{n, CC_COLL_F32}}, p);
    const double support = std::fmin(static_cast<double>(n), 4.0 * static_cast<double>(topk::k_for(0.01, n)));
    expect_near_rel(c.predicted_lossy,
                    work(4.0 * n) + link(static_cast<double>(n) / 8 + 1) + link(1.15 * support / 0.77 * 4));
}

TEST(CostModel, GroupIsOneBucket)
{
    const CostModel m = model(CC_COLL_METHOD_TOPK, 2);
    const CallParams p = params();
    const std::size_t a = 1 << 18, b = 1 << 16;
    const AutoChoice c = predict(m, {CostTensor{a, CC_COLL_F32}, CostTensor{b, CC_COLL_F32}}, p);
    const double pa = static_cast<double>(topk::payload_bytes(topk::k_for(0.01, a), CC_COLL_F32));
    const double pb = static_cast<double>(topk::payload_bytes(topk::k_for(0.01, b), CC_COLL_F32));
    expect_near_rel(c.predicted_none, link(4.0 * (a + b)));
    expect_near_rel(c.predicted_lossy, work(4.0 * (a + b)) + link(pa + pb));
    // One dense tensor makes the whole group NONE.
    CallParams dense = p;
    dense.density = 0.9;
    EXPECT_EQ(predict(m, {CostTensor{a, CC_COLL_F32}, CostTensor{b, CC_COLL_F32}}, dense).method,
              CC_COLL_METHOD_NONE);
}

TEST(CostModel, OneRankNeverCompresses)
{
    const CostModel m = model(CC_COLL_METHOD_TOPK, 1);
    const AutoChoice c = predict(m, {CostTensor{1 << 24, CC_COLL_F32}}, params());
    EXPECT_EQ(c.predicted_none, 0.0);
    EXPECT_GT(c.predicted_lossy, 0.0);
    EXPECT_EQ(c.method, CC_COLL_METHOD_NONE);
}

TEST(CostModel, ChoiceFollowsTheLink)
{
    // Small messages on this link: latency-bound, compression does not
    // pay; large ones: bandwidth-bound, it does. The choice switches once.
    CostModel m = model(CC_COLL_METHOD_TOPK, 2);
    for (int i = 0; i < kLinkPoints; ++i) m.link_seconds[i] = 5e-6 + m.link_bytes[i] / 1e10;  // 10 GB/s
    for (int i = 0; i < kComputePoints; ++i) m.compute_seconds[i] = 1e-6 + m.compute_bytes[i] * 1e-9;  // 1 GB/s
    EXPECT_EQ(predict(m, {CostTensor{1 << 22, CC_COLL_F32}}, params()).method, CC_COLL_METHOD_NONE);
    for (int i = 0; i < kLinkPoints; ++i) m.link_seconds[i] = 5e-6 + m.link_bytes[i] / 1e7;  // 10 MB/s
    EXPECT_EQ(predict(m, {CostTensor{1 << 22, CC_COLL_F32}}, params()).method, CC_COLL_METHOD_TOPK);
}

TEST(CostModel, Settings)
{
    Config cfg;
    std::string why;
    auto env = [](const char *name, const char *value) {
        return [name, value](const char *n, std::string *out) {
            if (std::string(n) != name) return false;
            *out = value;
            return true;
        };
    };
    ASSERT_EQ(load_config(env("CC_COLL_METHOD", "auto"), &cfg, &why), CC_COLL_OK) << why;
    EXPECT_EQ(cfg.method, CC_COLL_METHOD_AUTO);
    ASSERT_EQ(load_config(env("CC_COLL_AUTO_METHOD", "lowrank"), &cfg, &why), CC_COLL_OK) << why;
    EXPECT_EQ(cfg.auto_method, CC_COLL_METHOD_LOWRANK);
    ASSERT_EQ(load_config(env("CC_COLL_LINK", " 2.5,40 "), &cfg, &why), CC_COLL_OK) << why;
    EXPECT_EQ(cfg.link_gbits, 2.5);
    EXPECT_EQ(cfg.link_latency_us, 40.0);
    ASSERT_EQ(load_config(env("CC_COLL_LINK", "measure"), &cfg, &why), CC_COLL_OK) << why;
    EXPECT_EQ(cfg.link_gbits, 0.0);
    for (const char *bad : {"none", "auto", "dense", ""}) {
        why.clear();
        EXPECT_EQ(load_config(env("CC_COLL_AUTO_METHOD", bad), &cfg, &why), CC_COLL_ERR_CONFIG) << bad;
        EXPECT_NE(why.find("CC_COLL_AUTO_METHOD"), std::string::npos) << why;
    }
    for (const char *bad : {"10", "0,5", "-1,5", "10,-1", "x,y", "10,5,3", "nan,1"}) {
        why.clear();
        EXPECT_EQ(load_config(env("CC_COLL_LINK", bad), &cfg, &why), CC_COLL_ERR_CONFIG) << bad;
        EXPECT_NE(why.find("CC_COLL_LINK"), std::string::npos) << why;
    }
    // Params: AUTO is a method value; its params are checked against the
    // lossy method's rules.
    cc_coll_params_t prm{};
    prm.mask = CC_COLL_PARAMS_FIELD_METHOD;
    prm.method = CC_COLL_METHOD_AUTO;
    CallParams out;
    Config base;
    ASSERT_EQ(resolve_params(&prm, base, &out), CC_COLL_OK);
    EXPECT_EQ(out.method, CC_COLL_METHOD_AUTO);
    prm.method = static_cast<cc_coll_method_t>(kMaxMethods);  // no method has this id
    EXPECT_EQ(resolve_params(&prm, base, &out), CC_COLL_ERR_INVALID_METHOD);
}

}  // namespace
