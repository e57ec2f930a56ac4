// The host kernels' thread pool (core/parallel.hpp) and the kernels built on
// it: ranges that cover [0, n) exactly, every part run once, a second
// concurrent region run inline, and results that do not depend on the
// thread count (the scatter-add by output range, the multi-threaded
// encode, the settings' parser).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "compressors/topk/topk_select.hpp"
#include "core/config.hpp"
#include "core/dtype.hpp"
#include "core/parallel.hpp"
#include "wire/topk_payload.hpp"

namespace {

using namespace cc_coll::detail;

TEST(Parallel, PartsCoverTheRangeInOrder)
{
    for (std::size_t n : {std::size_t{1}, std::size_t{7}, std::size_t{1000}, std::size_t{1} << 20}) {
        for (int threads : {1, 2, 3, 8, 300}) {
            const std::size_t parts = parallel_parts(n, threads, 64);
            ASSERT_GE(parts, 1u);
            ASSERT_LE(parts, static_cast<std::size_t>(threads < 1 ? 1 : threads));
            ASSERT_LE(parts, (n + 63) / 64);
            std::size_t expect = 0;
            for (std::size_t p = 0; p < parts; ++p) {
                std::size_t b = 0, e = 0;
                part_bounds(n, parts, p, &b, &e);
                ASSERT_EQ(b, expect) << "n=" << n << " parts=" << parts << " part " << p;
                ASSERT_LE(e - b, n / parts + 1);
                expect = e;
            }
            ASSERT_EQ(expect, n);
        }
    }
}

TEST(Parallel, EveryElementVisitedOnce)
{
    const std::size_t n = (std::size_t{1} << 20) + 13;
    std::vector<std::atomic<int>> hits(n);
    for (int threads : {1, 2, 4, 7}) {
        for (auto &h : hits) h.store(0);
        parallel_for(n, threads, 1000, [&](std::size_t b, std::size_t e) {
            for (std::size_t i = b; i < e; ++i) hits[i].fetch_add(1);
        });
        for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "element " << i << " threads " << threads;
    }
}

TEST(Parallel, ConcurrentRegionsFromTwoThreadsBothComplete)
{
    // Two callers at once: one region runs on the pool, the other inline;
    // both must cover their ranges, many times over, without deadlock.
    const std::size_t n = std::size_t{1} << 18;
    std::vector<std::uint64_t> a(n), b(n);
    auto work = [n](std::vector<std::uint64_t> *v, std::uint64_t salt) {
        for (int round = 0; round < 200; ++round)
            parallel_for(n, 4, 1024, [&](std::size_t lo, std::size_t hi) {
                for (std::size_t i = lo; i < hi; ++i) (*v)[i] = i * salt + static_cast<std::uint64_t>(round);
            });
    };
    std::thread t1(work, &a, 3), t2(work, &b, 5);
    t1.join();
    t2.join();
    for (std::size_t i = 0; i < n; ++i) {
        ASSERT_EQ(a[i], i * 3 + 199);
        ASSERT_EQ(b[i], i * 5 + 199);
    }
}

TEST(Parallel, NestedRegionsRunInline)
{
    const std::size_t n = 1 << 16;
    std::vector<std::atomic<int>> hits(n * 4);
    for (auto &h : hits) h.store(0);
    parallel_for(4, 4, 1, [&](std::size_t b, std::size_t e) {
        for (std::size_t outer = b; outer < e; ++outer)
            parallel_for(n, 4, 1024, [&](std::size_t lo, std::size_t hi) {
                for (std::size_t i = lo; i < hi; ++i) hits[outer * n + i].fetch_add(1);
            });
    });
    for (std::size_t i = 0; i < hits.size(); ++i) ASSERT_EQ(hits[i].load(), 1) << "element " << i;
}

TEST(Parallel, DefaultThreadsDividesTheCpus)
{
    const int all = default_threads(1);
    EXPECT_GE(all, 1);
    EXPECT_EQ(default_threads(0), all);
    EXPECT_EQ(default_threads(all * 4), 1);  // never below one
    if (all >= 2) {
        EXPECT_EQ(default_threads(2), all / 2);
    }
}

TEST(Parallel, ThreadsSetting)
{
    Config cfg;
    std::string why;
    auto env = [](const char *value) {
        return [value](const char *name, std::string *out) {
            if (std::strcmp(name, "CC_COLL_THREADS") != 0) return false;
            *out = value;
            return true;
        };
    };
    ASSERT_EQ(load_config(env("auto"), &cfg, &why), CC_COLL_OK) << why;
    EXPECT_EQ(cfg.threads, 0);
    ASSERT_EQ(load_config(env(" 6 "), &cfg, &why), CC_COLL_OK) << why;
    EXPECT_EQ(cfg.threads, 6);
    for (const char *bad : {"0", "-1", "257", "two", "1.5", ""}) {
        why.clear();
        EXPECT_EQ(load_config(env(bad), &cfg, &why), CC_COLL_ERR_CONFIG) << bad;
        EXPECT_NE(why.find("CC_COLL_THREADS"), std::string::npos) << why;
    }
}

// The scatter-add by output ranges and the multi-threaded encode give the
// bytes of the one-thread versions, for every dtype.
TEST(Parallel, ScatterAddAndEncodeDoNotDependOnThreads)
{
    const std::size_t n = (std::size_t{1} << 20) + 5;
    std::mt19937_64 rng(9);
    std::normal_distribution<float> dist;
    for (cc_coll_dtype_t dtype : {CC_COLL_F32, CC_COLL_F64, CC_COLL_F16, CC_COLL_BF16}) {
        const std::size_t es = dtype_size(dtype);
        std::vector<std::vector<unsigned char>> payloads;
        std::vector<float> x(n);
        const std::size_t k = topk::k_for(0.02, n);
        for (int r = 0; r < 3; ++r) {
            for (float &v : x) v = dist(rng);
            std::vector<std::uint32_t> idx(k);
            topk::SelectScratch scratch;
            topk::select<float>(x.data(), n, k, idx.data(), &scratch);
            std::vector<unsigned char> one(topk::payload_bytes(k, dtype)), many(one.size());
            std::vector<float> sent1(k), sentn(k);
            topk::encode<float>(x.data(), n, idx.data(), k, 0, dtype, one.data(), sent1.data(), 1);
            topk::encode<float>(x.data(), n, idx.data(), k, 0, dtype, many.data(), sentn.data(), 3);
            ASSERT_EQ(one, many) << "encode, dtype " << dtype;
            ASSERT_EQ(std::memcmp(sent1.data(), sentn.data(), k * sizeof(float)), 0);
            payloads.push_back(one);
        }
        std::vector<unsigned char> whole(n * es, 0), ranged(n * es, 0);
        for (const auto &p : payloads) topk::scatter_add(p.data(), dtype, whole.data());
        for (const auto &p : payloads)
            parallel_for(n, 4, 1000, [&](std::size_t b, std::size_t e) {
                topk::scatter_add_range(p.data(), dtype, ranged.data(), b, e);
            });
        ASSERT_EQ(whole, ranged) << "scatter_add by ranges, dtype " << dtype;
    }
}

}  // namespace
