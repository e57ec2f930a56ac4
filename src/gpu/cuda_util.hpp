// CUDA-only helpers for the GPU code of every layer: a Result from a CUDA
// runtime status, and growable device and pinned host arrays. Included only
// by sources built when CUDA is on.
#pragma once

#include <cstddef>

#include <cuda_runtime_api.h>

#include "gpu/result.hpp"

namespace cc_coll::detail::gpu {

// A Result for the CUDA runtime call `call` that returned `e`.
inline Result cuda_result(cudaError_t e, const char *call)
{
    if (e == cudaSuccess) return Result::success();
    (void)cudaGetLastError();  // clear a sticky-free error so later calls start clean
    return Result{call, "CUDA", static_cast<int>(e), cudaGetErrorString(e)};
}

// The launch status of the last kernel (cudaGetLastError) as a Result.
inline Result launch_result(const char *kernel) { return cuda_result(cudaGetLastError(), kernel); }

// Evaluates a CUDA runtime call and returns its Result from the enclosing
// function when it failed.
#define CC_COLL_CUDA_TRY(expr)                                                          \
    do {                                                                                \
        const ::cc_coll::detail::gpu::Result cc_coll_r_ = ::cc_coll::detail::gpu::cuda_result((expr), #expr); \
        if (!cc_coll_r_.ok()) return cc_coll_r_;                                       \
    } while (0)

// Returns a failed Result from the enclosing function.
#define CC_COLL_GPU_TRY(expr)                                   \
    do {                                                        \
        const ::cc_coll::detail::gpu::Result cc_coll_r_ = (expr); \
        if (!cc_coll_r_.ok()) return cc_coll_r_;               \
    } while (0)

// Memory of at least n elements of T that only grows, so a steady stream of
// same-sized calls does not allocate: device memory (cudaMalloc) or
// page-locked host memory for asynchronous copies (cudaMallocHost). Not
// copyable.
template <typename T, bool Pinned>
class GrowableArray {
public:
    GrowableArray() = default;
    GrowableArray(const GrowableArray &) = delete;
    GrowableArray &operator=(const GrowableArray &) = delete;
    ~GrowableArray() { release(); }  // may fail at exit, after the context is gone

    // Makes room for n elements; the contents are not kept when it grows.
    Result reserve(std::size_t n)
    {
        if (n <= size_) return Result::success();
        release();
        void *p = nullptr;
        const std::size_t bytes = (n > 0 ? n : 1) * sizeof(T);
        if (Pinned) CC_COLL_CUDA_TRY(cudaMallocHost(&p, bytes));
        else CC_COLL_CUDA_TRY(cudaMalloc(&p, bytes));
        ptr_ = static_cast<T *>(p);
        size_ = n;
        return Result::success();
    }
    T *data() const { return ptr_; }
    std::size_t size() const { return size_; }

private:
    void release()
    {
        if (ptr_ != nullptr) (void)(Pinned ? cudaFreeHost(ptr_) : cudaFree(ptr_));
        ptr_ = nullptr;
        size_ = 0;
    }
    T *ptr_ = nullptr;
    std::size_t size_ = 0;
};

template <typename T>
using DeviceArray = GrowableArray<T, false>;
template <typename T>
using PinnedArray = GrowableArray<T, true>;

// Grid size for n elements at `threads` per block, capped for grid-stride
// loops.
inline unsigned grid_for(std::size_t n, unsigned threads, unsigned cap = 65535u * 8u)
{
    const std::size_t blocks = (n + threads - 1) / threads;
    if (blocks == 0) return 1;
    return blocks > cap ? cap : static_cast<unsigned>(blocks);
}

}  // namespace cc_coll::detail::gpu
