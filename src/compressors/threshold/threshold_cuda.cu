// The threshold ladder on the device (threshold_cuda.hpp). pick builds the
// histogram of threshold::pick in one pass (the rungs come from the host's
// threshold::rung, so both sides compare against the same doubles) and
// applies the host's rule to it; collect is one stable compaction.
#include "compressors/threshold/threshold_cuda.hpp"

#include <cstdint>

#include <cub/device/device_select.cuh>
#include <thrust/iterator/counting_iterator.h>

#include "compressors/threshold/threshold_bins.hpp"
#include "compressors/threshold/threshold_ladder.hpp"

namespace cc_coll::detail::threshold::cuda {

namespace {

constexpr unsigned kThreads = 256;
constexpr unsigned kBlocksPerSm = 8;
constexpr int kBins = kRungs + 1;  // bin b: b rungs at or below |x|

// The ladder as a kernel argument.
struct Rungs {
    double tau[kRungs];
};

gpu::Result invalid(const char *call, const char *why)
{
    return gpu::Result{call, "CUDA", static_cast<int>(cudaErrorInvalidValue), why};
}

// Blocks for a grid-stride pass over n elements; each block sees fewer than
// 2^31 elements, so its 32-bit shared counters cannot wrap.
gpu::Result stream_grid(std::size_t n, unsigned *blocks)
{
    int device = 0;
    int sms = 0;
    CC_COLL_CUDA_TRY(cudaGetDevice(&device));
    CC_COLL_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    std::size_t grid = static_cast<std::size_t>(sms > 0 ? sms : 1) * kBlocksPerSm;
    const std::size_t need = (n + kThreads - 1) / kThreads;
    if (grid > need) grid = need;
    const std::size_t least = (n >> 31) + 1;
    if (grid < least) grid = least;
    *blocks = static_cast<unsigned>(grid);
    return gpu::Result::success();
}

template <typename W>
__global__ void __launch_bounds__(kThreads)
    ladder_histogram(const W *__restrict__ x, std::uint64_t n, Rungs rungs, unsigned long long *__restrict__ hist)
{
    __shared__ double tau[kRungs];
    __shared__ std::uint32_t bins[kBins];
    for (unsigned r = threadIdx.x; r < kRungs; r += blockDim.x) tau[r] = rungs.tau[r];
    for (unsigned b = threadIdx.x; b < kBins; b += blockDim.x) bins[b] = 0;
    __syncthreads();
    const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
    for (std::uint64_t i = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
        atomicAdd(&bins[rungs_at_or_below(tau, static_cast<double>(x[i]))], 1u);
    __syncthreads();
    for (unsigned b = threadIdx.x; b < kBins; b += blockDim.x)
        if (bins[b] != 0) atomicAdd(&hist[b], static_cast<unsigned long long>(bins[b]));
}

template <typename W>
struct NotBelow {
    const W *x;
    double tau;
    __device__ bool operator()(std::uint32_t i) const { return !below(x[i], tau); }
};

}  // namespace

template <typename W>
gpu::Result pick(const W *x, std::size_t n, double zero_fraction, double *tau, Scratch *scratch,
                 cudaStream_t stream)
{
    if (n == 0) {
        *tau = kHighest;
        return gpu::Result::success();
    }
    Rungs rungs;
    for (int r = 0; r < kRungs; ++r) rungs.tau[r] = rung(r);
    CC_COLL_GPU_TRY(scratch->temp.reserve(kBins * sizeof(unsigned long long)));
    CC_COLL_GPU_TRY(scratch->host.reserve(kBins));
    auto *hist = reinterpret_cast<unsigned long long *>(scratch->temp.data());
    CC_COLL_CUDA_TRY(cudaMemsetAsync(hist, 0, kBins * sizeof(unsigned long long), stream));
    unsigned blocks = 1;
    CC_COLL_GPU_TRY(stream_grid(n, &blocks));
    ladder_histogram<W><<<blocks, kThreads, 0, stream>>>(x, n, rungs, hist);
    CC_COLL_GPU_TRY(gpu::launch_result("threshold::cuda::ladder_histogram"));
    CC_COLL_CUDA_TRY(cudaMemcpyAsync(scratch->host.data(), hist, kBins * sizeof(unsigned long long),
                                     cudaMemcpyDeviceToHost, stream));
    CC_COLL_CUDA_TRY(cudaStreamSynchronize(stream));
    std::size_t counts[kBins];
    for (int b = 0; b < kBins; ++b) counts[b] = static_cast<std::size_t>(scratch->host.data()[b]);
    *tau = pick_from_histogram(counts, n, zero_fraction);
    return gpu::Result::success();
}

template <typename W>
gpu::Result collect(const W *x, std::size_t n, double tau, std::uint32_t *idx, std::size_t *count, Scratch *scratch,
                    cudaStream_t stream)
{
    if (n > 0xffffffffull) return invalid("threshold::cuda::collect", "n must be below 2^32");
    if (n == 0) {
        *count = 0;
        return gpu::Result::success();
    }
    const NotBelow<W> keep{x, tau};
    const thrust::counting_iterator<std::uint32_t> indices(0u);
    std::size_t cub_bytes = 0;
    CC_COLL_CUDA_TRY(cub::DeviceSelect::If(nullptr, cub_bytes, indices, idx, static_cast<std::int64_t *>(nullptr),
                                           static_cast<std::int64_t>(n), keep, stream));
    // The selected count first, CUB's temporary storage after it (aligned).
    constexpr std::size_t kCubOffset = 256;
    CC_COLL_GPU_TRY(scratch->temp.reserve(kCubOffset + cub_bytes));
    CC_COLL_GPU_TRY(scratch->host.reserve(1));
    auto *selected = reinterpret_cast<std::int64_t *>(scratch->temp.data());
    CC_COLL_CUDA_TRY(cub::DeviceSelect::If(scratch->temp.data() + kCubOffset, cub_bytes, indices, idx, selected,
                                           static_cast<std::int64_t>(n), keep, stream));
    CC_COLL_CUDA_TRY(
        cudaMemcpyAsync(scratch->host.data(), selected, sizeof(std::int64_t), cudaMemcpyDeviceToHost, stream));
    CC_COLL_CUDA_TRY(cudaStreamSynchronize(stream));
    *count = static_cast<std::size_t>(scratch->host.data()[0]);
    return gpu::Result::success();
}

template gpu::Result pick<float>(const float *, std::size_t, double, double *, Scratch *, cudaStream_t);
template gpu::Result pick<double>(const double *, std::size_t, double, double *, Scratch *, cudaStream_t);
template gpu::Result collect<float>(const float *, std::size_t, double, std::uint32_t *, std::size_t *, Scratch *,
                                    cudaStream_t);
template gpu::Result collect<double>(const double *, std::size_t, double, std::uint32_t *, std::size_t *,
                                     Scratch *, cudaStream_t);

}  // namespace cc_coll::detail::threshold::cuda
