// Device memory and result checks shared by the on-device gtests
// (test_*_cuda_device.cc): a gpu::Result as a gtest assertion, ASSERT_CUDA,
// DeviceBuffer, whose uploads have landed before a non-blocking stream
// can read them, and StreamTest, the fixture that gives a test its stream.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include "gpu/gpu.hpp"
#include "gpu/result.hpp"

namespace cc_coll::detail::device_test {

inline ::testing::AssertionResult ok(const gpu::Result &r)
{
    if (r.ok()) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << r.call << " failed (" << (r.library ? r.library : "?") << " " << r.code
                                         << ": " << (r.text ? r.text : "") << ")";
}

#define ASSERT_CUDA(expr)                                                              \
    do {                                                                               \
        const cudaError_t cuda_e_ = (expr);                                            \
        ASSERT_EQ(cuda_e_, cudaSuccess) << #expr << ": " << cudaGetErrorString(cuda_e_); \
    } while (0)

// ---------------------------------------------------------------- device memory

// n elements of T in device memory. Uploads are blocking copies from pageable
// memory followed by a device synchronisation (cudaMemcpy may return before
// the DMA lands, and the tests' non-blocking stream does not wait for the
// legacy stream); read() waits for the test's stream first.
template <typename T>
class DeviceBuffer {
public:
    explicit DeviceBuffer(std::size_t n) : n_(n)
    {
        if (cudaMalloc(reinterpret_cast<void **>(&ptr_), std::max<std::size_t>(n, 1) * sizeof(T)) != cudaSuccess)
            ptr_ = nullptr;
    }
    explicit DeviceBuffer(const std::vector<T> &v) : DeviceBuffer(v.size()) { status_ = upload(v); }
    DeviceBuffer(const DeviceBuffer &) = delete;
    DeviceBuffer &operator=(const DeviceBuffer &) = delete;
    ~DeviceBuffer()
    {
        if (ptr_ != nullptr) (void)cudaFree(ptr_);
    }
    T *get() const { return ptr_; }
    std::size_t size() const { return n_; }
    // cudaSuccess when allocated (and uploaded, for the vector constructor).
    cudaError_t status() const { return ptr_ == nullptr ? cudaErrorMemoryAllocation : status_; }

    cudaError_t upload(const std::vector<T> &v)
    {
        if (ptr_ == nullptr || v.size() > n_) return cudaErrorInvalidValue;
        const cudaError_t e = cudaMemcpy(ptr_, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice);
        return e != cudaSuccess ? e : cudaDeviceSynchronize();
    }
    // Every byte set to `byte`, in stream order.
    cudaError_t fill(unsigned char byte, cudaStream_t stream)
    {
        return cudaMemsetAsync(ptr_, byte, std::max<std::size_t>(n_, 1) * sizeof(T), stream);
    }
    cudaError_t read(std::vector<T> *out, cudaStream_t stream) const
    {
        const cudaError_t e = cudaStreamSynchronize(stream);
        if (e != cudaSuccess) return e;
        out->assign(n_, T{});
        return cudaMemcpy(out->data(), ptr_, n_ * sizeof(T), cudaMemcpyDeviceToHost);
    }

private:
    T *ptr_ = nullptr;
    std::size_t n_;
    cudaError_t status_ = cudaSuccess;
};

// ---------------------------------------------------------------- fixture

// A test on its own non-blocking stream, skipped without a CUDA device; the
// stream must be idle and error-free at the end.
class StreamTest : public ::testing::Test {
protected:
    void SetUp() override
    {
        if (gpu::device_count() == 0) GTEST_SKIP() << "no CUDA device";
        ASSERT_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    }
    void TearDown() override
    {
        if (stream_ != nullptr) {
            EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess) << "work left on the stream failed";
            (void)cudaStreamDestroy(stream_);
        }
    }
    cudaStream_t stream_ = nullptr;
};

inline constexpr unsigned char kFill = 0xa5;  // garbage a result must overwrite
inline constexpr std::size_t kGuard = 64;     // elements past a result that must stay kFill

}  // namespace cc_coll::detail::device_test
