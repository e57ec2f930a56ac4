// The predictions of CC_COLL_METHOD=auto's cost model (methods/auto/cost_model.hpp,
// docs/algorithms.md section 8) on models with known curves, without MPI:
// each method's exchanges, the dense cases, groups, one rank, and the
// interpolation of the measured curves.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "compressors/sketch/sketch_backend.hpp"
#include "compressors/topk/topk_select.hpp"
#include "core/config.hpp"
#include "core/params.hpp"
#include "methods/auto/cost_model.hpp"
#include "methods/auto/decision_cache.hpp"
#include "methods/auto/online.hpp"
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
    m.ranks = ranks;
    m.candidates = 1;
    m.candidate[0].method = lossy;
    const double lb[kLinkPoints] = {4, 4096, 65536, 1 << 20, 4 << 20, 32 << 20};
    const double cb[kComputePoints] = {4096, 32768, 262144, 2097152, 16777216};
    for (int i = 0; i < kLinkPoints; ++i) {
        m.link_bytes[i] = lb[i];
        m.link_seconds[i] = link(lb[i]);
    }
    for (int i = 0; i < kComputePoints; ++i) {
        m.candidate[0].compute_bytes[i] = cb[i];
        m.candidate[0].compute_seconds[i] = work(cb[i]);
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
        expect_near_rel(compute_seconds(m.candidate[0], b), work(b));  // a straight line stays one
    EXPECT_EQ(compute_seconds(m.candidate[0], 1.0), work(4096.0));     // below the first point: the first point
    for (double b : {4.0, 5000.0, 3e6, 1e8}) expect_near_rel(link_seconds(m, b), link(b));
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

    // SKETCH: at density 0.01 on 4 ranks the coded support (auto): 4 messages
    // of the expected size gathered, and the exchange of sizes; with the
    // bitmap, the bitmap's allreduce.
    const CostModel sm = model(CC_COLL_METHOD_SKETCH, 4);
    c = predict(sm, {CostTensor{n, CC_COLL_F32}}, p);
    const double k = static_cast<double>(topk::k_for(0.01, n));
    const double support = std::fmin(static_cast<double>(n), 4.0 * k);
    const double coded = 24.0 + 4.0 + k * (std::log2(static_cast<double>(n) / k) + 2.0) / 8.0;
    expect_near_rel(c.predicted_lossy, work(4.0 * n) + link(4.0 * coded / 2.0) + link(1.15 * support / 0.77 * 4) +
                                           link_seconds(sm, sizeof(float)));
    CallParams bitmap = p;
    bitmap.method_options[CC_COLL_METHOD_SKETCH] = kSketchSupportBitmap;
    c = predict(sm, {CostTensor{n, CC_COLL_F32}}, bitmap);
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
    for (int i = 0; i < kComputePoints; ++i)
        m.candidate[0].compute_seconds[i] = 1e-6 + m.candidate[0].compute_bytes[i] * 1e-9;  // 1 GB/s
    EXPECT_EQ(predict(m, {CostTensor{1 << 22, CC_COLL_F32}}, params()).method, CC_COLL_METHOD_NONE);
    for (int i = 0; i < kLinkPoints; ++i) m.link_seconds[i] = 5e-6 + m.link_bytes[i] / 1e7;  // 10 MB/s
    EXPECT_EQ(predict(m, {CostTensor{1 << 22, CC_COLL_F32}}, params()).method, CC_COLL_METHOD_TOPK);
}

// A hierarchical communicator (2 nodes of 2 ranks): the node's exchanges
// of the whole call, then on the rails what a flat 2-rank communicator would
// do with the largest shard, each method sharded by its own rule (TOPK by
// elements, LOWRANK with a shape by rows).
TEST(CostModel, HierarchicalPredictsTheShardOnTheRails)
{
    const auto node = [](double b) { return 5e-6 + b / 4e9; };
    const CallParams p = params();
    for (cc_coll_method_t method : {CC_COLL_METHOD_TOPK, CC_COLL_METHOD_LOWRANK}) {
        CostModel h = model(method, 4);
        h.nodes = 2;
        h.shards = 2;
        for (int i = 0; i < kLinkPoints; ++i) {
            h.node_bytes[i] = h.link_bytes[i];
            h.node_seconds[i] = node(h.node_bytes[i]);
        }
        const CostModel rails = model(method, 2);
        const std::size_t rows = 1001, cols = 4096, n = rows * cols;  // an odd row count: shard 0 is the larger
        const bool shaped = method == CC_COLL_METHOD_LOWRANK;
        const CostTensor t{n, CC_COLL_F32, shaped, shaped ? rows : 0, shaped ? cols : 0};
        const CostTensor shard{shaped ? 501 * cols : (n + 1) / 2, CC_COLL_F32, shaped, shaped ? 501u : 0u,
                               shaped ? cols : 0};
        const AutoChoice c = predict(h, {t}, p), r = predict(rails, {shard}, p);
        EXPECT_TRUE(std::isfinite(r.predicted_lossy));
        expect_near_rel(c.predicted_lossy, node(4.0 * n) + r.predicted_lossy);
        // NONE shards by elements whatever the candidate.
        expect_near_rel(c.predicted_none, node(4.0 * n) + link(4.0 * static_cast<double>((n + 1) / 2)));
        // The rails carry half the node's bytes: cheaper than the flat 4-rank link's NONE.
        EXPECT_LT(c.predicted_none - node(4.0 * n), predict(model(method, 4), {t}, p).predicted_none);
    }
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
    EXPECT_EQ(cfg.auto_candidates, 1u << CC_COLL_METHOD_LOWRANK);
    ASSERT_EQ(load_config(env("CC_COLL_AUTO_METHOD", " TopK, half ,topk"), &cfg, &why), CC_COLL_OK) << why;
    EXPECT_EQ(cfg.auto_candidates, (1u << CC_COLL_METHOD_TOPK) | (1u << CC_COLL_METHOD_HALF));
    EXPECT_EQ(auto_candidates(cfg.auto_candidates),
              (std::vector<cc_coll_method_t>{CC_COLL_METHOD_TOPK, CC_COLL_METHOD_HALF}));
    ASSERT_EQ(load_config(env("CC_COLL_AUTO_CHECK", "off"), &cfg, &why), CC_COLL_OK) << why;
    EXPECT_FALSE(cfg.auto_check);
    why.clear();
    EXPECT_EQ(load_config(env("CC_COLL_AUTO_CHECK", "sometimes"), &cfg, &why), CC_COLL_ERR_CONFIG);
    EXPECT_NE(why.find("CC_COLL_AUTO_CHECK"), std::string::npos) << why;
    ASSERT_EQ(load_config(env("CC_COLL_LINK", " 2.5,40 "), &cfg, &why), CC_COLL_OK) << why;
    EXPECT_EQ(cfg.link_gbits, 2.5);
    EXPECT_EQ(cfg.link_latency_us, 40.0);
    ASSERT_EQ(load_config(env("CC_COLL_LINK", "measure"), &cfg, &why), CC_COLL_OK) << why;
    EXPECT_EQ(cfg.link_gbits, 0.0);
    for (const char *bad : {"none", "auto", "dense", "", "topk,none", "topk,,half", "topk,"}) {
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

TEST(CostModel, SeveralCandidatesTheFastestWins)
{
    // TOPK and HALF on one model: HALF's compute is half TOPK's here, but
    // it sends half the bytes; on a slow link TOPK wins, on a fast one HALF
    // (NONE's link is fast there but HALF's compute is cheaper than the
    // difference), on a very fast one NONE.
    CostModel m = model(CC_COLL_METHOD_TOPK, 2);
    m.candidates = 2;
    m.candidate[1] = m.candidate[0];
    m.candidate[1].method = CC_COLL_METHOD_HALF;
    for (int i = 0; i < kComputePoints; ++i) m.candidate[1].compute_seconds[i] = 0.5 * m.candidate[0].compute_seconds[i];
    const std::size_t n = 1 << 22;
    AutoChoice c = predict(m, {CostTensor{n, CC_COLL_F32}}, params());
    EXPECT_EQ(c.method, CC_COLL_METHOD_TOPK);
    EXPECT_EQ(c.best_candidate, 0);
    EXPECT_LT(c.predicted[0], c.predicted[1]);
    EXPECT_EQ(c.predicted_lossy, c.predicted[0]);
    expect_near_rel(c.predicted[1], 0.5 * work(4.0 * n) + link(2.0 * n));
    for (int i = 0; i < kLinkPoints; ++i) m.link_seconds[i] = 1e-6 + m.link_bytes[i] / 4e9;
    c = predict(m, {CostTensor{n, CC_COLL_F32}}, params());
    EXPECT_EQ(c.method, CC_COLL_METHOD_NONE);
    EXPECT_LT(c.predicted_none, c.predicted_lossy);
}

// Two ranks' online checks, their agreement simulated as MPI_MAX does it.
void agree_both(OnlineCheck &a, OnlineCheck &b)
{
    std::vector<std::uint64_t> wa = a.agreement_words(), wb = b.agreement_words();
    for (std::size_t i = 0; i < wa.size(); ++i) wa[i] = std::max(wa[i], wb[i]);
    EXPECT_TRUE(a.apply_agreement(wa));
    EXPECT_TRUE(b.apply_agreement(wa));
}

// Runs `calls` calls of `bytes` on two ranks whose real times are
// none_s/lossy_s (rank b 10% slower), the ranks agreeing when due;
// returns how many ran the lossy method in the last `tail` calls.
int run_calls(const CostModel &m, OnlineCheck &a, OnlineCheck &b, std::size_t n, int calls, double none_s,
              double lossy_s, int tail, int *explored = nullptr, double *explored_seconds = nullptr,
              double *seconds = nullptr)
{
    int lossy = 0;
    for (int i = 0; i < calls; ++i) {
        if (a.agreement_due(m)) {
            EXPECT_TRUE(b.agreement_due(m));
            agree_both(a, b);
        }
        const AutoChoice c = predict(m, {CostTensor{n, CC_COLL_F32}}, params());
        const Decision da = a.decide(m, c, 4.0 * n), db = b.decide(m, c, 4.0 * n);
        EXPECT_EQ(da.choice, db.choice) << "call " << i;  // the same choice on every rank
        EXPECT_EQ(da.explored, db.explored);
        const double t = da.choice == 0 ? none_s : lossy_s;
        a.observe(da, t);
        b.observe(db, 1.1 * t);
        if (i >= calls - tail && da.choice != 0) ++lossy;
        if (explored != nullptr && da.explored) ++*explored;
        if (explored_seconds != nullptr && da.explored) *explored_seconds += 1.1 * t;
        if (seconds != nullptr) *seconds += 1.1 * t;
    }
    return lossy;
}

// The prediction for n elements with the link scaled so that NONE is
// predicted `ratio` times TOPK (in rounds: TOPK's exchange moves with it).
AutoChoice scale_none_over_topk(CostModel &m, std::size_t n, double ratio)
{
    AutoChoice c = predict(m, {CostTensor{n, CC_COLL_F32}}, params());
    for (int round = 0; round < 4; ++round) {
        for (int i = 0; i < kLinkPoints; ++i) m.link_seconds[i] *= ratio * c.predicted_lossy / c.predicted_none;
        c = predict(m, {CostTensor{n, CC_COLL_F32}}, params());
    }
    return c;
}

TEST(OnlineCheck, AWrongModelIsCorrected)
{
    // The model believes a 400 MB/s link: TOPK is predicted 7 times faster
    // than NONE. The calls say NONE takes 1 ms and TOPK 5 ms (one node's
    // shared memory): after NONE's first look AUTO runs NONE.
    CostModel m = model(CC_COLL_METHOD_TOPK, 2);
    for (int i = 0; i < kLinkPoints; ++i) m.link_seconds[i] = 1e-5 + m.link_bytes[i] / 4e8;
    const std::size_t n = 1 << 20;
    const AutoChoice c = predict(m, {CostTensor{n, CC_COLL_F32}}, params());
    ASSERT_EQ(c.method, CC_COLL_METHOD_TOPK);
    OnlineCheck a, b;
    int explored = 0;
    // TOPK at calls 1 and 2, NONE's first look at calls 3 and 4 (the
    // second is the sample), then NONE: TOPK, measured 5x slower, is not
    // rechecked at call 53.
    EXPECT_EQ(run_calls(m, a, b, n, 60, 1e-3, 5e-3, 56, &explored), 0);
    EXPECT_EQ(explored, 2);
    EXPECT_GT(a.agreements(), 0u);
    // The corrections are the slowest rank's ratios, the same on both.
    const int k = size_class(4.0 * n);
    EXPECT_EQ(a.correction(0, k), b.correction(0, k));
    expect_near_rel(a.correction(0, k), 1.1e-3 / c.predicted_none);
    // cc_coll_auto_predict's view: corrected, NONE first.
    double none = 0, lossy = 0;
    int best = -1;
    a.corrected(m, c, 4.0 * n, &none, &lossy, &best);
    EXPECT_LT(none, lossy);
    EXPECT_EQ(best, 0);
}

TEST(OnlineCheck, AFirstLookSamplesTheSecondCall)
{
    // The model predicts NONE 2x faster than TOPK; in truth TOPK's first
    // call on a tensor takes 10 ms (it allocates its residual and touches
    // its pages) and every later one 0.5 ms, NONE 1 ms. A look that took the
    // first call as its sample would keep NONE; the second call is the
    // sample, and AUTO moves to TOPK.
    CostModel m = model(CC_COLL_METHOD_TOPK, 2);
    const std::size_t n = 1 << 20;
    AutoChoice c = predict(m, {CostTensor{n, CC_COLL_F32}}, params());
    for (int i = 0; i < kLinkPoints; ++i) m.link_seconds[i] = 0.5 * c.predicted_lossy * m.link_seconds[i] / c.predicted_none;
    c = predict(m, {CostTensor{n, CC_COLL_F32}}, params());
    ASSERT_EQ(c.method, CC_COLL_METHOD_NONE);
    ASSERT_LT(c.predicted_lossy, kFirstLookFactor * c.predicted_none);
    OnlineCheck a, b;
    bool topk_ran = false;
    int warmups = 0, tail_topk = 0;
    for (int i = 0; i < 200; ++i) {
        if (a.agreement_due(m)) agree_both(a, b);
        const Decision da = a.decide(m, c, 4.0 * n), db = b.decide(m, c, 4.0 * n);
        ASSERT_EQ(da.choice, db.choice);
        ASSERT_EQ(da.warmup, db.warmup);
        if (da.warmup) {
            ++warmups;
            EXPECT_EQ(da.choice, i == 0 ? 0 : 1);  // the class's first call, then TOPK's look
        }
        const double t = da.choice == 0 ? 1e-3 : topk_ran ? 0.5e-3 : 10e-3;
        if (da.choice != 0) topk_ran = true;
        a.observe(da, t);
        b.observe(db, 1.1 * t);
        if (i >= 100 && da.choice != 0) ++tail_topk;
    }
    EXPECT_EQ(warmups, 2);  // the class's first call (NONE) and TOPK's look
    EXPECT_GE(tail_topk, 98);  // TOPK but for NONE's rechecks
}

TEST(OnlineCheck, AChoicesFirstCallInAClassIsNoSample)
{
    // The model is right: TOPK 3x faster than NONE, so NONE gets a first
    // look (calls 3 and 4), and the calls are long enough that the first
    // agreement comes after those 4 calls. TOPK's first call at the new
    // size takes 40x its later ones (it allocates its residual and touches
    // its pages). Were that call a sample, TOPK's median of two would put
    // it far above NONE, and AUTO would run NONE until its next check.
    CostModel m = model(CC_COLL_METHOD_TOPK, 2);
    const std::size_t n = 1 << 20;
    AutoChoice c = predict(m, {CostTensor{n, CC_COLL_F32}}, params());
    for (int i = 0; i < kLinkPoints; ++i) m.link_seconds[i] *= 3 * c.predicted_lossy / c.predicted_none;
    c = predict(m, {CostTensor{n, CC_COLL_F32}}, params());
    ASSERT_EQ(c.method, CC_COLL_METHOD_TOPK);
    ASSERT_LT(c.predicted_none, kFirstLookFactor * c.predicted_lossy);
    ASSERT_GE(4 * c.predicted_lossy, kAgreeCostFactor * 2 * m.latency);
    OnlineCheck a, b;
    int none_calls = 0, warmups = 0;
    bool topk_ran = false;
    for (int i = 0; i < 200; ++i) {
        if (a.agreement_due(m)) agree_both(a, b);
        const Decision da = a.decide(m, c, 4.0 * n), db = b.decide(m, c, 4.0 * n);
        ASSERT_EQ(da.choice, db.choice);
        ASSERT_EQ(da.warmup, db.warmup);
        if (da.warmup) ++warmups;
        const double t = da.choice == 0 ? c.predicted_none : topk_ran ? c.predicted_lossy : 40 * c.predicted_lossy;
        if (da.choice != 0) topk_ran = true;
        if (da.choice == 0 && !da.explored) ++none_calls;
        a.observe(da, t);
        b.observe(db, t);
    }
    EXPECT_EQ(warmups, 2);  // TOPK's first call and NONE's first look
    EXPECT_EQ(none_calls, 0);
    expect_near_rel(a.correction(1, size_class(4.0 * n)), 1.0);
}

TEST(OnlineCheck, ChecksOfABurstingLinkCannotOutweighSustainedCalls)
{
    // A shaped link whose bucket lets a few calls through at the wire's
    // speed: NONE takes 0.15 ms a call when it runs call after call (as the
    // model measured it) but 0.05 ms in the first two calls after a TOPK
    // call, which takes 0.11 ms (the model: 0.09 ms). NONE is close, so it
    // is checked every 50 calls, and every check samples a burst. After the
    // first switch to NONE, whose sustained calls read 0.15 ms, single
    // bursting samples must not outweigh them (nor count as a drift), or
    // AUTO switches back to NONE after every other check (moving halfway
    // towards each sample, AUTO took 1.10x TOPK's time here).
    CostModel m = model(CC_COLL_METHOD_TOPK, 2);
    const std::size_t n = 1 << 14;
    AutoChoice c = predict(m, {CostTensor{n, CC_COLL_F32}}, params());
    const double none_s = 0.15e-3, burst_s = 0.05e-3, topk_s = 0.11e-3;
    for (int i = 0; i < kLinkPoints; ++i) m.link_seconds[i] *= none_s / c.predicted_none;
    m.latency = 25e-6;
    c = predict(m, {CostTensor{n, CC_COLL_F32}}, params());
    const double compute = compute_seconds(m.candidate[0], 4.0 * n), exchange = c.predicted_lossy - compute;
    ASSERT_LT(exchange, 0.05e-3);
    for (int i = 0; i < kComputePoints; ++i) m.candidate[0].compute_seconds[i] *= (0.09e-3 - exchange) / compute;
    c = predict(m, {CostTensor{n, CC_COLL_F32}}, params());
    expect_near_rel(c.predicted_lossy, 0.09e-3);
    ASSERT_EQ(c.method, CC_COLL_METHOD_TOPK);
    OnlineCheck a, b;
    int none_run = 0;  // NONE calls in a row
    const int calls = 2000;
    double seconds = 0;
    for (int i = 0; i < calls; ++i) {
        if (a.agreement_due(m)) agree_both(a, b);
        const Decision da = a.decide(m, c, 4.0 * n), db = b.decide(m, c, 4.0 * n);
        ASSERT_EQ(da.choice, db.choice);
        none_run = da.choice == 0 ? none_run + 1 : 0;
        const double t = da.choice != 0 ? topk_s : none_run <= 2 ? burst_s : none_s;
        seconds += t;
        a.observe(da, t);
        b.observe(db, t);
    }
    EXPECT_LE(seconds, 1.05 * calls * topk_s);
}

TEST(OnlineCheck, ALookAtABurstGivesWayToTheFirstCallsInARow)
{
    // A shaped link whose bucket lets a call after a pause through at the
    // wire's speed (the emulated 100 Mbit/s link at 4 KiB): NONE's first
    // look (calls 3 and 4, the second its sample) reads 0.25 times NONE's
    // prediction, while TOPK takes 3 times its own, so AUTO switches to
    // NONE, which takes 8 times its prediction call after call. The first
    // window of NONE's calls in a row replaces the correction the look made
    // (a mean weighted with the look's sample gave 4.0, not 8), and AUTO is
    // back on TOPK after that one window.
    CostModel m = model(CC_COLL_METHOD_TOPK, 2);
    const std::size_t n = 1 << 20;
    const AutoChoice c = scale_none_over_topk(m, n, 1.2);  // NONE about 1.2 times TOPK
    ASSERT_EQ(c.method, CC_COLL_METHOD_TOPK);
    ASSERT_LT(c.predicted_none, 1.5 * c.predicted_lossy);
    ASSERT_GE(4 * c.predicted_lossy, kAgreeCostFactor * 2 * m.latency);  // windows of 4 calls
    const double topk_s = 3 * c.predicted_lossy, burst_s = 0.25 * c.predicted_none, none_s = 8 * c.predicted_none;
    const int k = size_class(4.0 * n);
    OnlineCheck a, b;
    int none_run = 0, none_in_a_row = 0, tail_topk = 0;
    for (int i = 0; i < 200; ++i) {
        if (a.agreement_due(m)) {
            agree_both(a, b);
            // The window of NONE's calls in a row sets its correction.
            if (none_in_a_row >= static_cast<int>(kDriftMinSamples)) {
                expect_near_rel(a.correction(0, k), 8.0);
                none_in_a_row = -1000;
            }
        }
        const Decision da = a.decide(m, c, 4.0 * n), db = b.decide(m, c, 4.0 * n);
        ASSERT_EQ(da.choice, db.choice);
        none_run = da.choice == 0 ? none_run + 1 : 0;
        if (da.choice == 0 && !da.explored) ++none_in_a_row;
        const double t = da.choice != 0 ? topk_s : none_run <= 2 ? burst_s : none_s;
        a.observe(da, t);
        b.observe(db, t);
        if (i >= 100 && da.choice != 0) ++tail_topk;
    }
    EXPECT_LT(none_in_a_row, 0) << "AUTO never ran NONE in a row after the look";
    EXPECT_GE(tail_topk, 98);  // TOPK but for NONE's rechecks
}

TEST(OnlineCheck, ANewSizesLookIsAgreedWithinItsFirstCalls)
{
    // After a communicator's first agreements, windows of small calls close
    // after 64 calls. A size met later has its look at NONE at its calls 3
    // and 4; that sample is agreed within 8 calls of it, not up to 64 calls
    // later (where, on a link that bursts, a misleading look cost 8 calls
    // of the slower choice long after the size's first calls).
    CostModel m = model(CC_COLL_METHOD_TOPK, 2);
    const std::size_t n1 = 1 << 16, n2 = 1 << 18;
    const AutoChoice c2 = scale_none_over_topk(m, n2, 1.2);
    const AutoChoice c1 = predict(m, {CostTensor{n1, CC_COLL_F32}}, params());
    ASSERT_EQ(c2.method, CC_COLL_METHOD_TOPK);
    ASSERT_LT(c2.predicted_none, kFirstLookFactor * c2.predicted_lossy);
    m.latency = 1e-3;  // windows close by their count of calls alone
    ASSERT_LT(kAgreeMaxCalls * std::max(c2.predicted_none, c2.predicted_lossy), kAgreeCostFactor * 2 * m.latency);
    OnlineCheck a, b;
    const auto call = [&](const AutoChoice &c, std::size_t n) {
        if (a.agreement_due(m)) {
            EXPECT_TRUE(b.agreement_due(m));
            agree_both(a, b);
        }
        const Decision da = a.decide(m, c, 4.0 * n), db = b.decide(m, c, 4.0 * n);
        EXPECT_EQ(da.choice, db.choice);
        const double t = da.choice == 0 ? c.predicted_none : c.predicted_lossy;  // the model is right
        a.observe(da, t);
        b.observe(db, t);
        return da;
    };
    // The first size until a window of 64 calls has just been agreed.
    std::uint64_t seen = 0;
    for (int i = 0; i < 1000 && !(a.agreements() > seen && a.agreements() >= 5); ++i) {
        seen = a.agreements();
        call(c1, n1);
    }
    ASSERT_GE(a.agreements(), 5u);
    const std::uint64_t before = a.agreements();
    const int k2 = size_class(4.0 * n2);
    int look_call = -1, agreed_call = -1;
    for (int i = 1; i <= 40 && agreed_call < 0; ++i) {
        const std::uint64_t agreements = a.agreements();
        const Decision d = call(c2, n2);
        if (d.explored && d.choice == 0 && !d.warmup) look_call = i;  // the look's sample
        if (look_call > 0 && a.agreements() > agreements) agreed_call = i;
    }
    EXPECT_EQ(look_call, 4);
    ASSERT_GT(agreed_call, 0) << "the look was not agreed within 40 calls";
    EXPECT_LE(agreed_call, look_call + 1 + kAgreeFirstCalls);
    EXPECT_EQ(a.agreements(), before + 1);
    expect_near_rel(a.correction(0, k2), 1.0);  // the look's sample, agreed
}

TEST(OnlineCheck, ARightModelStaysAndExplorationIsBounded)
{
    // Here the model is right (TOPK 15x faster than NONE): AUTO keeps TOPK.
    // NONE is too slow for a first look; it is checked once the checks'
    // budget (2% of the predicted time) pays for it, then about every 1000
    // calls: the checks take at most 2% of the time.
    const CostModel m = model(CC_COLL_METHOD_TOPK, 2);
    const std::size_t n = 1 << 20;
    const AutoChoice c = predict(m, {CostTensor{n, CC_COLL_F32}}, params());
    ASSERT_EQ(c.method, CC_COLL_METHOD_TOPK);
    ASSERT_GT(c.predicted_none, kFirstLookFactor * c.predicted_lossy);
    OnlineCheck a, b;
    int explored = 0;
    double explored_seconds = 0, seconds = 0;
    const int calls = 5000;
    const int lossy = run_calls(m, a, b, n, calls, c.predicted_none, c.predicted_lossy, calls, &explored,
                                &explored_seconds, &seconds);
    EXPECT_GE(explored, 1);
    EXPECT_LE(explored, 5);
    EXPECT_EQ(lossy, calls - explored);
    EXPECT_LE(explored_seconds, kExploreBudget * seconds);
}

TEST(OnlineCheck, CloseChoicesAreRecheckedAndDriftIsFollowed)
{
    // A model that predicts both about 1.1 ms; the calls take 1.0 ms
    // (NONE) and 0.9 ms (TOPK): close. NONE has only run in its first
    // look (two calls), so once the look is agreed it gets a trial, 5
    // calls in a row, which confirm TOPK; then, close and measured in a
    // row, it is rechecked every 50 calls. Then TOPK's calls become 4x slower
    // (another job on the node): the model follows and runs NONE.
    CostModel m = model(CC_COLL_METHOD_TOPK, 2);
    for (int i = 0; i < kLinkPoints; ++i) m.link_seconds[i] = 1e-5 + m.link_bytes[i] / 4e9;
    const std::size_t n = 1 << 20;
    OnlineCheck a, b;
    int explored = 0;
    EXPECT_GE(run_calls(m, a, b, n, 500, 1e-3, 0.9e-3, 100, &explored), 98);
    EXPECT_EQ(explored, 16);  // the look twice, the trial 5 times, then 9 checks 50 calls apart
    explored = 0;
    EXPECT_EQ(run_calls(m, a, b, n, 300, 1e-3, 3.6e-3, 100, &explored), 0);
    // NONE's check after TOPK's correction jumped to the new ratio (the
    // class drifted); no more.
    EXPECT_LE(explored, 2);
}

TEST(OnlineCheck, CloseChoicesAreDecidedByCallsInARow)
{
    // The model predicts NONE a little slower than TOPK; the calls take
    // 1.0 ms (NONE) and 1.1 ms (TOPK): NONE is faster. But NONE's first
    // look (its second call, the sample) met a busy moment and took 1.5 ms
    // (4 ranks on 2 cores). With single checks every 200 calls, each one
    // sample against the look's, AUTO ran TOPK, lossy and slower, for more
    // than 600 calls. A close runner-up that only single calls measured
    // gets a trial as soon as its look is agreed, whose window of calls in
    // a row replaces the look's correction: AUTO runs NONE.
    CostModel m = model(CC_COLL_METHOD_TOPK, 2);
    const std::size_t n = 1 << 20;
    const AutoChoice c = scale_none_over_topk(m, n, 1.05);  // NONE predicted 1.05 times TOPK
    ASSERT_EQ(c.method, CC_COLL_METHOD_TOPK);
    ASSERT_LT(c.predicted_none, 1.1 * c.predicted_lossy);
    const double none_s = 1.0e-3, topk_s = 1.1e-3, busy_s = 1.5e-3;
    OnlineCheck a, b;
    int none_calls = 0, tail_none = 0, explored = 0, trial_calls = 0, run = 0, trial_end = -1;
    for (int i = 0; i < 600; ++i) {
        if (a.agreement_due(m)) agree_both(a, b);
        const Decision da = a.decide(m, c, 4.0 * n), db = b.decide(m, c, 4.0 * n);
        ASSERT_EQ(da.choice, db.choice);
        ASSERT_EQ(da.explored, db.explored);
        if (da.choice == 0) ++none_calls;
        run = da.choice == 0 && da.explored ? run + 1 : 0;
        trial_calls = std::max(trial_calls, run);
        if (run == kTrialCalls && trial_end < 0) trial_end = i;
        // NONE's look: its first call (no sample) and the busy second.
        const double t = da.choice != 0 ? topk_s : none_calls == 2 ? busy_s : none_s;
        a.observe(da, t);
        b.observe(db, t);
        if (da.explored) ++explored;
        if (i >= 200 && da.choice == 0) ++tail_none;
    }
    EXPECT_EQ(trial_calls, kTrialCalls);  // the look ran twice; the trial 5 in a row
    EXPECT_GE(trial_end, 0);
    EXPECT_LE(trial_end, 4 + kAgreeFirstCalls + kTrialCalls + 2);  // right after the look's agreement
    EXPECT_GE(tail_none, 390);            // NONE but for checks of TOPK
    expect_near_rel(a.correction(0, size_class(4.0 * n)) * c.predicted_none, none_s);
    EXPECT_LE(explored, 20);
}

TEST(OnlineCheck, APassingSlowdownDoesNotKeepAChoiceOff)
{
    // The model is right: NONE takes its prediction, TOPK 1.8 times NONE's.
    // Then, for a while, a busy process shares a rank's core and NONE's
    // calls take 4 times as long, till AUTO switches to TOPK (which the
    // slowdown leaves as soon as it runs: it passes). NONE's correction,
    // about 4, put it more than 1.5x behind TOPK, so only the checks after
    // the drift and every 1000 calls saw it again, each one sample against
    // the window that set it: AUTO ran TOPK for about 2200 calls. The
    // first check that finds NONE at its prediction starts a trial, whose
    // window replaces the correction: AUTO is back on NONE.
    CostModel m = model(CC_COLL_METHOD_TOPK, 2);
    const std::size_t n = 1 << 20;
    AutoChoice c = predict(m, {CostTensor{n, CC_COLL_F32}}, params());
    const double scale = 1.8 * c.predicted_none / c.predicted_lossy;
    for (int i = 0; i < kComputePoints; ++i) m.candidate[0].compute_seconds[i] *= scale;
    c = predict(m, {CostTensor{n, CC_COLL_F32}}, params());
    ASSERT_EQ(c.method, CC_COLL_METHOD_NONE);
    ASSERT_LT(c.predicted_lossy, 2.0 * c.predicted_none);
    const double none_s = c.predicted_none, topk_s = 1.8 * c.predicted_none;
    const int k = size_class(4.0 * n);
    OnlineCheck a, b;
    bool slow = false, switched = false;
    int calls = 0, tail_none = 0, explored = 0;
    double seconds = 0, explored_seconds = 0;
    for (int i = 0; i < 3000; ++i) {
        if (i == 200) slow = true;
        if (a.agreement_due(m)) agree_both(a, b);
        const Decision da = a.decide(m, c, 4.0 * n), db = b.decide(m, c, 4.0 * n);
        ASSERT_EQ(da.choice, db.choice);
        ASSERT_EQ(da.explored, db.explored);
        if (slow && da.choice != 0 && !da.explored) {
            slow = false;  // the slowdown passes as AUTO switches
            switched = true;
            EXPECT_GT(a.correction(0, k), 2.7);  // more than 1.5x behind TOPK
        }
        const double t = da.choice != 0 ? topk_s : slow ? 4 * none_s : none_s;
        a.observe(da, t);
        b.observe(db, t);
        ++calls;
        seconds += t;
        if (da.explored) {
            ++explored;
            explored_seconds += t;
        }
        if (i >= 2000 && da.choice == 0) ++tail_none;
    }
    ASSERT_TRUE(switched);
    EXPECT_GE(tail_none, 990);  // NONE but for checks of TOPK
    expect_near_rel(a.correction(0, k), 1.0);
    EXPECT_LE(explored, 20);
    EXPECT_EQ(calls, 3000);
}

TEST(OnlineCheck, RanksThatDisagreeOnTheWindowLearnNothing)
{
    const CostModel m = model(CC_COLL_METHOD_TOPK, 2);
    const AutoChoice c = predict(m, {CostTensor{1 << 20, CC_COLL_F32}}, params());
    OnlineCheck a, b;
    const Decision da = a.decide(m, c, 4.0 * (1 << 20));
    a.observe(da, 1e-3);
    const Decision db = b.decide(m, c, 4096);  // another size class
    b.observe(db, 1e-3);
    std::vector<std::uint64_t> wa = a.agreement_words(), wb = b.agreement_words();
    for (std::size_t i = 0; i < wa.size(); ++i) wa[i] = std::max(wa[i], wb[i]);
    EXPECT_FALSE(a.apply_agreement(wa));
    EXPECT_EQ(a.correction(da.choice, da.size_class), 0.0);
    EXPECT_EQ(a.agreements(), 0u);
}

TEST(OnlineCheck, OneRankNeitherExploresNorAgrees)
{
    const CostModel m = model(CC_COLL_METHOD_TOPK, 1);
    OnlineCheck a;
    for (int i = 0; i < 200; ++i) {
        const Decision d = a.decide(m, predict(m, {CostTensor{1 << 20, CC_COLL_F32}}, params()), 4.0 * (1 << 20));
        EXPECT_EQ(d.choice, 0);
        EXPECT_FALSE(d.explored);
        a.observe(d, 1e-3);
        EXPECT_FALSE(a.agreement_due(m));
    }
}

TEST(OnlineCheck, SizeClassesAreHalfOctaves)
{
    EXPECT_EQ(size_class(0), 0);
    EXPECT_EQ(size_class(1), 0);
    EXPECT_EQ(size_class(4096), 24);
    EXPECT_EQ(size_class(5792), 24);
    EXPECT_EQ(size_class(5793), 25);
    EXPECT_EQ(size_class(1e300), kSizeClasses - 1);
}

// AUTO's cache of its decisions (decision_cache.hpp): a call is found only
// when its tensor and every parameter match, the oldest entry gives way,
// and a new epoch marks every entry's decision as stale.
TEST(DecisionCache, FindsOnlyTheSameCall)
{
    DecisionCache cache;
    const CostTensor t{1024, CC_COLL_F32};
    const CallParams p = params();
    EXPECT_EQ(cache.find(t, p), nullptr);
    CachedCall *e = cache.insert(t, p);
    e->epoch = cache.epoch();
    EXPECT_EQ(cache.find(t, p), e);
    // Any difference in the tensor or the params is another call.
    CostTensor t2 = t;
    t2.count = 1025;
    EXPECT_EQ(cache.find(t2, p), nullptr);
    t2 = t;
    t2.dtype = CC_COLL_F64;
    EXPECT_EQ(cache.find(t2, p), nullptr);
    t2 = t;
    t2.has_shape = true;
    EXPECT_EQ(cache.find(t2, p), nullptr);
    CallParams p2 = p;
    p2.density = 0.02;
    EXPECT_EQ(cache.find(t, p2), nullptr);
    p2 = p;
    p2.rank = 8;
    EXPECT_EQ(cache.find(t, p2), nullptr);
    p2 = p;
    p2.method_options[3] = 1;
    EXPECT_EQ(cache.find(t, p2), nullptr);
    p2 = p;
    p2.seed = 7;
    EXPECT_EQ(cache.find(t, p2), nullptr);
}

TEST(DecisionCache, TheOldestGivesWayAndANewEpochMarksEveryDecisionStale)
{
    DecisionCache cache;
    const CallParams p = params();
    for (int i = 0; i < kCachedCalls + 1; ++i) {
        CachedCall *e = cache.insert(CostTensor{1024u + static_cast<unsigned>(i), CC_COLL_F32}, p);
        e->epoch = cache.epoch();
    }
    EXPECT_EQ(cache.find(CostTensor{1024, CC_COLL_F32}, p), nullptr);
    for (int i = 1; i < kCachedCalls + 1; ++i) {
        const CachedCall *e = cache.find(CostTensor{1024u + static_cast<unsigned>(i), CC_COLL_F32}, p);
        ASSERT_NE(e, nullptr);
        EXPECT_EQ(e->epoch, cache.epoch());
    }
    const std::uint64_t before = cache.epoch();
    cache.new_epoch();
    EXPECT_NE(cache.epoch(), before);
    const CachedCall *e = cache.find(CostTensor{1025, CC_COLL_F32}, p);
    ASSERT_NE(e, nullptr);  // its predictions still hold
    EXPECT_NE(e->epoch, cache.epoch());
}

}  // namespace
