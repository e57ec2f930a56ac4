// The host-side parts of the GPU path that run without a GPU: the
// CUDA_TRANSPORT and CUDA_STAGING_CHUNK settings, device residuals in the EF
// store (with a host allocator standing in for cudaMalloc), the LOWRANK
// state's device factors, and buffer location.
#include <gtest/gtest.h>

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cc_coll.h"
#include "core/config.hpp"
#include "core/ef_store.hpp"
#include "core/error.hpp"
#include "compressors/lowrank/lowrank_state.hpp"
#include "gpu/gpu.hpp"

namespace {

using cc_coll::detail::Config;
using cc_coll::detail::CudaTransport;
using cc_coll::detail::EfKey;
using cc_coll::detail::EfStore;
using cc_coll::detail::Residual;

cc_coll_status_t load(const std::map<std::string, std::string> &vars, Config *cfg, std::string *why)
{
    return cc_coll::detail::load_config(
        [&](const char *name, std::string *value) {
            auto it = vars.find(name);
            if (it == vars.end()) return false;
            *value = it->second;
            return true;
        },
        cfg, why);
}

TEST(CudaSettings, DefaultsAreAutoAndOneMebibyte)
{
    Config cfg;
    std::string why;
    ASSERT_EQ(load({}, &cfg, &why), CC_COLL_OK) << why;
    EXPECT_EQ(cfg.cuda_transport, CudaTransport::Auto);
    EXPECT_EQ(cfg.cuda_chunk_bytes, 1u << 20);
}

TEST(CudaSettings, TransportAcceptsTheThreeModesInAnyCase)
{
    const std::pair<const char *, CudaTransport> cases[] = {
        {"auto", CudaTransport::Auto}, {"Direct", CudaTransport::Direct}, {" STAGED ", CudaTransport::Staged}};
    for (const auto &c : cases) {
        Config cfg;
        std::string why;
        ASSERT_EQ(load({{"CC_COLL_CUDA_TRANSPORT", c.first}}, &cfg, &why), CC_COLL_OK) << c.first << ": " << why;
        EXPECT_EQ(cfg.cuda_transport, c.second) << c.first;
    }
}

TEST(CudaSettings, BadTransportIsAConfigErrorNamingTheChoices)
{
    Config cfg;
    std::string why;
    EXPECT_EQ(load({{"CC_COLL_CUDA_TRANSPORT", "nvlink"}}, &cfg, &why), CC_COLL_ERR_CONFIG);
    EXPECT_NE(why.find("CC_COLL_CUDA_TRANSPORT"), std::string::npos) << why;
    EXPECT_NE(why.find("auto, direct, staged"), std::string::npos) << why;
}

TEST(CudaSettings, ChunkBytesBetween4KAnd1G)
{
    const std::pair<const char *, std::uint64_t> ok[] = {{"4K", 4096}, {"256K", 262144}, {"4M", 4u << 20}, {"1G", 1u << 30}};
    for (const auto &c : ok) {
        Config cfg;
        std::string why;
        ASSERT_EQ(load({{"CC_COLL_CUDA_STAGING_CHUNK", c.first}}, &cfg, &why), CC_COLL_OK) << c.first << ": " << why;
        EXPECT_EQ(cfg.cuda_chunk_bytes, c.second) << c.first;
    }
    for (const char *bad : {"0", "1K", "4095", "2G", "fast"}) {
        Config cfg;
        std::string why;
        EXPECT_EQ(load({{"CC_COLL_CUDA_STAGING_CHUNK", bad}}, &cfg, &why), CC_COLL_ERR_CONFIG) << bad;
    }
}

// A host allocation standing in for cudaMalloc, counting its calls.
int g_allocations = 0;
std::shared_ptr<void> fake_device(std::size_t bytes, cc_coll_status_t *st)
{
    ++g_allocations;
    *st = CC_COLL_OK;
    void *p = std::calloc(bytes > 0 ? bytes : 1, 1);
    return std::shared_ptr<void>(p, [](void *q) { std::free(q); });
}

EfKey explicit_key(std::uint64_t k) { return EfKey::from(true, k, nullptr, 0, CC_COLL_F32); }

TEST(DeviceResidual, LivesInAllocatorMemoryAndIsAccounted)
{
    EfStore store(0);
    Residual *r = nullptr;
    g_allocations = 0;
    ASSERT_EQ(store.acquire(explicit_key(1), 100, CC_COLL_F32, &r, fake_device), CC_COLL_OK);
    ASSERT_NE(r, nullptr);
    EXPECT_TRUE(r->on_device());
    EXPECT_EQ(g_allocations, 1);
    EXPECT_TRUE(r->f32.empty());
    EXPECT_EQ(r->data<float>(), static_cast<float *>(r->device.get()));
    EXPECT_EQ(r->bytes(), 100 * sizeof(float));
    EXPECT_EQ(store.bytes(), 100 * sizeof(float));
    // A second acquire finds it, without allocating again.
    Residual *again = nullptr;
    ASSERT_EQ(store.acquire(explicit_key(1), 100, CC_COLL_F32, &again, fake_device), CC_COLL_OK);
    EXPECT_EQ(again, r);
    EXPECT_EQ(g_allocations, 1);
    // F64 residuals are binary64 on the device too.
    ASSERT_EQ(store.acquire(explicit_key(2), 10, CC_COLL_F64, &r, fake_device), CC_COLL_OK);
    EXPECT_EQ(r->bytes(), 10 * sizeof(double));
    store.reset(explicit_key(1));
    EXPECT_EQ(store.bytes(), 10 * sizeof(double));
}

TEST(DeviceResidual, HostCallOnADeviceResidualIsAMismatchAndViceVersa)
{
    EfStore store(0);
    Residual *r = nullptr;
    ASSERT_EQ(store.acquire(explicit_key(3), 8, CC_COLL_F32, &r, fake_device), CC_COLL_OK);
    cc_coll::detail::clear_error();
    EXPECT_EQ(store.acquire(explicit_key(3), 8, CC_COLL_F32, &r), CC_COLL_ERR_MISMATCH);
    EXPECT_NE(std::string(cc_coll::detail::last_error()).find("device memory"), std::string::npos)
        << cc_coll::detail::last_error();
    EXPECT_EQ(store.find_matching(explicit_key(3), 8, CC_COLL_F32, &r, false), CC_COLL_ERR_MISMATCH);
    EXPECT_EQ(store.find_matching(explicit_key(3), 8, CC_COLL_F32, &r, true), CC_COLL_OK);
    EXPECT_NE(r, nullptr);

    ASSERT_EQ(store.acquire(explicit_key(4), 8, CC_COLL_F32, &r), CC_COLL_OK);
    EXPECT_EQ(store.acquire(explicit_key(4), 8, CC_COLL_F32, &r, fake_device), CC_COLL_ERR_MISMATCH);
}

TEST(DeviceResidual, CapIsCheckedBeforeAllocating)
{
    EfStore store(64);
    Residual *r = nullptr;
    g_allocations = 0;
    EXPECT_EQ(store.acquire(explicit_key(5), 17, CC_COLL_F32, &r, fake_device), CC_COLL_ERR_EF_LIMIT);
    EXPECT_EQ(g_allocations, 0);
    EXPECT_EQ(store.acquire(explicit_key(5), 16, CC_COLL_F32, &r, fake_device), CC_COLL_OK);
    EXPECT_EQ(g_allocations, 1);
}

TEST(DeviceLowRankState, DeviceFactorsMatchOnlyTheirShapeAndWorkType)
{
    cc_coll::detail::LowRankState s;
    EXPECT_FALSE(s.has_device_q<float>(4, 3, 2));
    cc_coll_status_t st = CC_COLL_OK;
    s.device = fake_device((4 + 3) * 2 * sizeof(float), &st);
    s.device_work = sizeof(float);
    s.rows = 4;
    s.cols = 3;
    s.rank = 2;
    EXPECT_TRUE(s.has_device_q<float>(4, 3, 2));
    EXPECT_FALSE(s.has_device_q<double>(4, 3, 2));
    EXPECT_FALSE(s.has_device_q<float>(4, 3, 1));
    EXPECT_FALSE(s.has_device_q<float>(3, 4, 2));
    EXPECT_EQ(s.bytes(), (4 + 3) * 2 * sizeof(float));
}

TEST(BufferLocation, HostMemoryAndNullAreHost)
{
    std::vector<float> v(16);
    EXPECT_EQ(cc_coll::detail::gpu::locate(v.data()), cc_coll::detail::gpu::Location::Host);
    EXPECT_EQ(cc_coll::detail::gpu::locate(nullptr), cc_coll::detail::gpu::Location::Host);
    EXPECT_EQ(cc_coll::detail::gpu::device_of(v.data()), -1);
    EXPECT_EQ(cc_coll::detail::gpu::device_count(), cc_coll_cuda_device_count());
    EXPECT_GE(cc_coll_cuda_device_count(), 0);
    if (!(cc_coll_build_flags() & CC_COLL_BUILD_CUDA)) {
        EXPECT_EQ(cc_coll_cuda_device_count(), 0);
    }
}

// The public query agrees with the collectives' rule, and stays right when
// the process loads other shared objects after a first answer (the loader's
// object count invalidates the remembered "no CUDA driver").
TEST(BufferLocation, PublicQueryAnswersHostBeforeAndAfterOtherLibrariesLoad)
{
    std::vector<double> v(8);
    EXPECT_EQ(cc_coll_buffer_on_device(v.data()), 0);
    EXPECT_EQ(cc_coll_buffer_on_device(nullptr), 0);
    EXPECT_EQ(cc_coll_buffer_on_device(v.data()), 0);  // the remembered answer
    void *other = dlopen("libz.so.1", RTLD_NOW | RTLD_LOCAL);
    EXPECT_EQ(cc_coll_buffer_on_device(v.data()), 0);
    if (other != nullptr) dlclose(other);
    if (cc_coll_cuda_device_count() == 0) {
        // Without a usable GPU no buffer is device memory, whatever is loaded.
        std::unique_ptr<float[]> heap(new float[4]);
        EXPECT_EQ(cc_coll_buffer_on_device(heap.get()), 0);
    }
}

// The checked form the C API uses: host memory is Host and no error, with a
// GPU or without one (no driver, no device: CUDA unusable, not a failure).
TEST(BufferLocation, CheckedLocateCallsHostMemoryHostWithoutError)
{
    using cc_coll::detail::gpu::Location;
    std::vector<float> v(16);
    Location where = Location::Device;
    EXPECT_EQ(cc_coll::detail::gpu::locate_checked(v.data(), &where, "test"), CC_COLL_OK)
        << cc_coll::detail::last_error();
    EXPECT_EQ(where, Location::Host);
    where = Location::Device;
    EXPECT_EQ(cc_coll::detail::gpu::locate_checked(nullptr, &where, "test"), CC_COLL_OK);
    EXPECT_EQ(where, Location::Host);
}

// Locating host buffers must not start CUDA: in a process that has not used
// it, the driver library stays unloaded (no context, no GPU memory taken on
// device 0 by every rank of a host-only program). Checked in a fresh process
// (threadsafe death-test style re-runs only this test), since other tests of
// this program query the device count, which loads the driver.
TEST(BufferLocation, LocatingHostBuffersDoesNotStartCuda)
{
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_EXIT(
        {
            using cc_coll::detail::gpu::Location;
            const bool before = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD) != nullptr;
            std::vector<float> v(16);
            Location where = Location::Device;
            const bool host = cc_coll::detail::gpu::locate(v.data()) == Location::Host &&
                              cc_coll::detail::gpu::locate_checked(v.data(), &where, "test") == CC_COLL_OK &&
                              where == Location::Host;
            const bool after = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD) != nullptr;
            std::fprintf(stderr, "host=%d driver loaded before=%d after=%d\n", host, before, after);
            std::exit(host && (before || !after) ? 0 : 1);
        },
        ::testing::ExitedWithCode(0), "host=1");
}

}  // namespace
