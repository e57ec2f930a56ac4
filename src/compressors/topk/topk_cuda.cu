// Top-k on the device (topk_cuda.hpp). The selection is a radix select over
// the composite key (magnitude key, ~index) of topk_keys.hpp:
//
//   1. key passes: one histogram of an 11- or 10-bit digit per pass over the
//      elements matching the prefix chosen so far (shared-memory bins, one
//      global add per non-empty bin and block), then a one-block kernel that
//      picks the digit holding the need-th element from the top;
//   2. ties at the k-th magnitude, when some must be left out: their indices
//      are listed (up to keys::kTieCapacity) and the lowest ones kept; above
//      that capacity, three more digit passes over ~index do the same;
//   3. one stable compaction (cub::DeviceSelect::If) keeps, in index order,
//      the elements whose composite key is at or above the final prefix:
//      exactly k of them.
//
// The search state lives in device memory, so no pass waits for the host;
// a kernel launched after the search is done returns at once.
#include "compressors/topk/topk_cuda.hpp"

#include <cstdint>

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_select.cuh>
#include <thrust/iterator/counting_iterator.h>

#include "compressors/topk/topk_keys.hpp"
#include "wire/topk_payload.hpp"

namespace cc_coll::detail::topk::cuda {

namespace {

constexpr unsigned kThreads = 256;           // streaming kernels
constexpr unsigned kUnroll = 4;              // loads in flight per thread
constexpr unsigned kBlocksPerSm = 8;         // 8 x 256 threads fill an SM
constexpr unsigned kChooseThreads = keys::kBins / 2;  // two bins per thread
static_assert(keys::kBins == 2 * kChooseThreads, "the digit choice covers every bin");

gpu::Result invalid(const char *call, const char *why)
{
    return gpu::Result{call, "CUDA", static_cast<int>(cudaErrorInvalidValue), why};
}

// Blocks for a grid-stride pass over n elements: enough to fill the device,
// no more than the elements need.
gpu::Result stream_grid(std::size_t n, unsigned *blocks)
{
    int device = 0;
    int sms = 0;
    CC_COLL_CUDA_TRY(cudaGetDevice(&device));
    CC_COLL_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    const std::size_t cap = static_cast<std::size_t>(sms > 0 ? sms : 1) * kBlocksPerSm;
    const std::size_t need = (n + kThreads * kUnroll - 1) / (kThreads * kUnroll);
    *blocks = static_cast<unsigned>(need < 1 ? 1 : (need < cap ? need : cap));
    return gpu::Result::success();
}

constexpr std::size_t align_up(std::size_t v, std::size_t a) { return (v + a - 1) / a * a; }

// Byte offsets of the selection's pieces in SelectScratch::temp. The part
// up to `cleared` is zeroed at the start of every selection.
struct SelectLayout {
    std::size_t state = 0;
    std::size_t hist = 0;
    std::size_t tie_count = 0;
    std::size_t cleared = 0;
    std::size_t tie_list = 0;
    std::size_t selected = 0;
    std::size_t cub = 0;

    explicit SelectLayout(int passes)
    {
        hist = align_up(sizeof(keys::RadixState), 256);
        tie_count = hist + static_cast<std::size_t>(passes) * keys::kBins * sizeof(std::uint32_t);
        cleared = tie_count + sizeof(std::uint32_t);
        tie_list = align_up(cleared, 256);
        selected = tie_list + keys::kTieCapacity * sizeof(std::uint32_t);
        cub = align_up(selected + sizeof(std::int64_t), 256);
    }
};

// Grid-stride loop over x[0..n) with kUnroll loads issued before use;
// f(value, index).
template <typename W, typename F>
__device__ __forceinline__ void for_each_element(const W *__restrict__ x, std::uint64_t n, F &&f)
{
    const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
    std::uint64_t i = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    for (; i + (kUnroll - 1) * stride < n; i += kUnroll * stride) {
        W v[kUnroll];
#pragma unroll
        for (unsigned u = 0; u < kUnroll; ++u) v[u] = x[i + u * stride];
#pragma unroll
        for (unsigned u = 0; u < kUnroll; ++u) f(v[u], i + u * stride);
    }
    for (; i < n; i += stride) f(x[i], i);
}

// Histogram of the pass's digit over the elements matching the prefix.
template <typename W>
__global__ void __launch_bounds__(kThreads)
    digit_histogram(const W *__restrict__ x, std::uint64_t n, keys::DigitPass pass,
                    const keys::RadixState *__restrict__ state, std::uint32_t *__restrict__ hist)
{
    __shared__ std::uint32_t bins[keys::kBins];
    const keys::RadixState s = *state;
    if (s.done) return;  // the same for every thread: no barrier is skipped by some only
    const unsigned nbins = 1u << pass.width;
    for (unsigned b = threadIdx.x; b < nbins; b += blockDim.x) bins[b] = 0;
    __syncthreads();
    for_each_element(x, n, [&](W v, std::uint64_t i) {
        const std::uint64_t key = keys::MagnitudeKey<W>::of(v);
        const std::uint32_t nidx = keys::inverted_index(i);
        if (keys::matches_prefix(key, nidx, pass, s)) atomicAdd(&bins[keys::digit_of(key, nidx, pass)], 1u);
    });
    __syncthreads();
    for (unsigned b = threadIdx.x; b < nbins; b += blockDim.x)
        if (bins[b] != 0) atomicAdd(&hist[b], bins[b]);
}

// Picks the digit of the pass from its histogram: the bins are scanned from
// the highest digit down (thread t holds bins 2047-2t and 2046-2t), and the
// one thread whose bin holds the need-th element updates the state.
__global__ void __launch_bounds__(kChooseThreads)
    choose_pass_digit(keys::RadixState *state, const std::uint32_t *__restrict__ hist, keys::DigitPass pass,
                 std::uint32_t k)
{
    using Scan = cub::BlockScan<std::uint32_t, kChooseThreads>;
    __shared__ typename Scan::TempStorage scan_storage;
    keys::RadixState s = *state;
    if (s.done) return;  // uniform
    const std::uint32_t need = k - s.taken;
    const unsigned high = keys::kBins - 1 - 2 * threadIdx.x;
    const std::uint32_t count_high = hist[high];
    const std::uint32_t count_low = hist[high - 1];
    std::uint32_t above = 0;  // matching elements in higher digits; at most n < 2^32
    Scan(scan_storage).ExclusiveSum(count_high + count_low, above);
    // Every thread read the state before the scan's barriers; one writes it.
    if (keys::holds_needed(above, count_high, need)) {
        keys::choose_digit(&s, pass, high, above, count_high, k);
        *state = s;
    } else if (keys::holds_needed(above + count_high, count_low, need)) {
        keys::choose_digit(&s, pass, high - 1, above + count_high, count_low, k);
        *state = s;
    }
}

// Lists the indices of the elements at the k-th magnitude (unordered),
// when the search is not done and at most keys::kTieCapacity of them tie.
template <typename W>
__global__ void __launch_bounds__(kThreads)
    list_ties(const W *__restrict__ x, std::uint64_t n, const keys::RadixState *__restrict__ state,
              std::uint32_t *__restrict__ tie_count, std::uint32_t *__restrict__ tie_list)
{
    const keys::RadixState s = *state;
    if (s.done || s.bucket > keys::kTieCapacity) return;
    for_each_element(x, n, [&](W v, std::uint64_t i) {
        if (keys::MagnitudeKey<W>::of(v) == s.key_prefix) {
            const std::uint32_t at = atomicAdd(tie_count, 1u);
            if (at < keys::kTieCapacity) tie_list[at] = static_cast<std::uint32_t>(i);
        }
    });
}

// Keeps the needed lowest indices of the listed ties: the tie of rank
// need - 1 among them (indices are distinct) ends the search.
__global__ void __launch_bounds__(kChooseThreads)
    resolve_listed_ties(keys::RadixState *state, const std::uint32_t *__restrict__ tie_count,
                        const std::uint32_t *__restrict__ tie_list, std::uint32_t k)
{
    __shared__ std::uint32_t list[keys::kTieCapacity];
    keys::RadixState s = *state;
    if (s.done || s.bucket > keys::kTieCapacity) return;  // uniform
    const std::uint32_t listed = *tie_count;
    const std::uint32_t count = listed < keys::kTieCapacity ? listed : keys::kTieCapacity;
    for (std::uint32_t t = threadIdx.x; t < count; t += blockDim.x) list[t] = tie_list[t];
    __syncthreads();
    const std::uint32_t need = k - s.taken;
    for (std::uint32_t t = threadIdx.x; t < count; t += blockDim.x) {
        const std::uint32_t mine = list[t];
        std::uint32_t rank = 0;
        for (std::uint32_t u = 0; u < count; ++u) rank += list[u] < mine ? 1u : 0u;
        if (rank == need - 1) {
            keys::resolve_ties(&s, mine);
            *state = s;
        }
    }
}

template <typename W>
struct KeptByRadix {
    const W *x;
    const keys::RadixState *state;
    __device__ bool operator()(std::uint32_t i) const
    {
        return keys::kept(keys::MagnitudeKey<W>::of(x[i]), keys::inverted_index(i), *state);
    }
};

__global__ void __launch_bounds__(kThreads) iota(std::uint32_t *__restrict__ idx, std::uint64_t n)
{
    const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
    for (std::uint64_t i = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
        idx[i] = static_cast<std::uint32_t>(i);
}

// ---------------------------------------------------------------- encode kernels

// flags[0] = 1 when some kept element is finite: one store per block (not
// one per finite element, which would queue up to k stores on one address).
template <typename W>
__global__ void __launch_bounds__(kThreads)
    flag_kept_finite(const W *__restrict__ x, const std::uint32_t *__restrict__ idx, std::uint64_t k,
                     std::uint32_t *flags)
{
    const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
    int finite = 0;
    for (std::uint64_t j = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < k; j += stride)
        finite |= keys::is_nonfinite(x[idx[j]]) ? 0 : 1;
    // Every thread reaches the barrier; every writer stores the same value.
    if (__syncthreads_or(finite) != 0 && threadIdx.x == 0) flags[0] = 1u;
}

// flags[1] = number of non-finite elements of x, counted only when no kept
// element is finite (flags[0] == 0), as topk::nonfinite_overflow does.
template <typename W>
__global__ void __launch_bounds__(kThreads)
    count_nonfinite(const W *__restrict__ x, std::uint64_t n, std::uint32_t *flags)
{
    using Reduce = cub::BlockReduce<std::uint32_t, kThreads>;
    __shared__ typename Reduce::TempStorage reduce_storage;
    if (flags[0] != 0) return;  // uniform: written by the previous kernel
    std::uint32_t mine = 0;
    for_each_element(x, n, [&](W v, std::uint64_t) { mine += keys::is_nonfinite(v) ? 1u : 0u; });
    const std::uint32_t block = Reduce(reduce_storage).Sum(mine);
    if (threadIdx.x == 0 && block != 0) atomicAdd(&flags[1], block);
}

template <typename W>
__global__ void __launch_bounds__(kThreads)
    write_pairs(const W *__restrict__ x, const std::uint32_t *__restrict__ idx, std::uint64_t k,
                cc_coll_dtype_t dtype, unsigned char *__restrict__ payload, W *__restrict__ sent)
{
    unsigned char *values = payload + keys::value_offset(k, 0, dtype);
    const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
    for (std::uint64_t j = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < k; j += stride) {
        const std::uint32_t i = idx[j];
        *reinterpret_cast<std::uint32_t *>(payload + keys::index_offset(j)) = i;
        sent[j] = keys::store_value<W>(values, j, dtype, x[i]);
    }
}

__global__ void write_payload_header(unsigned char *payload, std::uint64_t n, std::uint32_t k, cc_coll_dtype_t dtype,
                                     const std::uint32_t *flags)
{
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    keys::write_header(payload, n, k, keys::overflow_flag(k, flags[0] != 0, flags[1]), dtype);
}

__global__ void __launch_bounds__(kThreads)
    scatter_pairs(const unsigned char *__restrict__ payload, std::uint64_t k, cc_coll_dtype_t dtype, void *out)
{
    const unsigned char *values = payload + keys::value_offset(k, 0, dtype);
    const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
    for (std::uint64_t j = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < k; j += stride) {
        const std::uint32_t i = *reinterpret_cast<const std::uint32_t *>(payload + keys::index_offset(j));
        keys::add_value(values, j, dtype, out, i);
    }
}

}  // namespace

template <typename W>
gpu::Result select(const W *x, std::size_t n, std::size_t k, std::uint32_t *idx, SelectScratch *scratch,
                   cudaStream_t stream)
{
    if (n > 0xffffffffull) return invalid("topk::cuda::select", "n must be below 2^32");
    if (k > n) return invalid("topk::cuda::select", "k must not exceed n");
    if (k == 0) return gpu::Result::success();
    unsigned blocks = 1;
    CC_COLL_GPU_TRY(stream_grid(n, &blocks));
    if (k == n) {
        iota<<<blocks, kThreads, 0, stream>>>(idx, n);
        return gpu::launch_result("topk::cuda::iota");
    }

    constexpr int kPasses = keys::total_passes<W>();
    const SelectLayout layout(kPasses);
    const KeptByRadix<W> kept_op{x, nullptr};
    const thrust::counting_iterator<std::uint32_t> indices(0u);
    std::size_t cub_bytes = 0;
    CC_COLL_CUDA_TRY(cub::DeviceSelect::If(nullptr, cub_bytes, indices, idx, static_cast<std::int64_t *>(nullptr),
                                           static_cast<std::int64_t>(n), kept_op, stream));
    CC_COLL_GPU_TRY(scratch->temp.reserve(layout.cub + cub_bytes));
    unsigned char *temp = scratch->temp.data();
    auto *state = reinterpret_cast<keys::RadixState *>(temp + layout.state);
    auto *hist = reinterpret_cast<std::uint32_t *>(temp + layout.hist);
    auto *tie_count = reinterpret_cast<std::uint32_t *>(temp + layout.tie_count);
    auto *tie_list = reinterpret_cast<std::uint32_t *>(temp + layout.tie_list);
    auto *selected = reinterpret_cast<std::int64_t *>(temp + layout.selected);
    CC_COLL_CUDA_TRY(cudaMemsetAsync(temp, 0, layout.cleared, stream));

    const auto k32 = static_cast<std::uint32_t>(k);
    auto run_pass = [&](int p) -> gpu::Result {
        const keys::DigitPass pass = keys::digit_pass<W>(p);
        std::uint32_t *pass_hist = hist + static_cast<std::size_t>(p) * keys::kBins;
        digit_histogram<W><<<blocks, kThreads, 0, stream>>>(x, n, pass, state, pass_hist);
        CC_COLL_GPU_TRY(gpu::launch_result("topk::cuda::digit_histogram"));
        choose_pass_digit<<<1, kChooseThreads, 0, stream>>>(state, pass_hist, pass, k32);
        return gpu::launch_result("topk::cuda::choose_pass_digit");
    };
    for (int p = 0; p < keys::key_passes<W>(); ++p) CC_COLL_GPU_TRY(run_pass(p));
    list_ties<W><<<blocks, kThreads, 0, stream>>>(x, n, state, tie_count, tie_list);
    CC_COLL_GPU_TRY(gpu::launch_result("topk::cuda::list_ties"));
    resolve_listed_ties<<<1, kChooseThreads, 0, stream>>>(state, tie_count, tie_list, k32);
    CC_COLL_GPU_TRY(gpu::launch_result("topk::cuda::resolve_listed_ties"));
    for (int p = keys::key_passes<W>(); p < kPasses; ++p) CC_COLL_GPU_TRY(run_pass(p));

    const KeptByRadix<W> kept{x, state};
    CC_COLL_CUDA_TRY(cub::DeviceSelect::If(temp + layout.cub, cub_bytes, indices, idx, selected,
                                           static_cast<std::int64_t>(n), kept, stream));
    return gpu::Result::success();
}

template <typename W>
gpu::Result encode(const W *x, std::size_t n, const std::uint32_t *idx, std::size_t k, cc_coll_dtype_t dtype,
                   unsigned char *payload, W *sent, SelectScratch *scratch, cudaStream_t stream)
{
    if (n > 0xffffffffull) return invalid("topk::cuda::encode", "n must be below 2^32");
    if (k > n) return invalid("topk::cuda::encode", "k must not exceed n");
    if (keys::value_bytes(dtype) == 0) return invalid("topk::cuda::encode", "unknown dtype");
    CC_COLL_GPU_TRY(scratch->counter.reserve(2));
    std::uint32_t *flags = scratch->counter.data();
    CC_COLL_CUDA_TRY(cudaMemsetAsync(flags, 0, 2 * sizeof(std::uint32_t), stream));
    if (k > 0) {
        unsigned blocks = 1;
        CC_COLL_GPU_TRY(stream_grid(k, &blocks));
        flag_kept_finite<W><<<blocks, kThreads, 0, stream>>>(x, idx, k, flags);
        CC_COLL_GPU_TRY(gpu::launch_result("topk::cuda::flag_kept_finite"));
        CC_COLL_GPU_TRY(stream_grid(n, &blocks));
        count_nonfinite<W><<<blocks, kThreads, 0, stream>>>(x, n, flags);
        CC_COLL_GPU_TRY(gpu::launch_result("topk::cuda::count_nonfinite"));
        CC_COLL_GPU_TRY(stream_grid(k, &blocks));
        write_pairs<W><<<blocks, kThreads, 0, stream>>>(x, idx, k, dtype, payload, sent);
        CC_COLL_GPU_TRY(gpu::launch_result("topk::cuda::write_pairs"));
    }
    write_payload_header<<<1, 32, 0, stream>>>(payload, n, static_cast<std::uint32_t>(k), dtype, flags);
    return gpu::launch_result("topk::cuda::write_payload_header");
}

gpu::Result scatter_add(const unsigned char *payload, std::size_t k, cc_coll_dtype_t dtype, void *out,
                        cudaStream_t stream)
{
    if (keys::value_bytes(dtype) == 0) return invalid("topk::cuda::scatter_add", "unknown dtype");
    if (k == 0) return gpu::Result::success();
    unsigned blocks = 1;
    CC_COLL_GPU_TRY(stream_grid(k, &blocks));
    scatter_pairs<<<blocks, kThreads, 0, stream>>>(payload, k, dtype, out);
    return gpu::launch_result("topk::cuda::scatter_pairs");
}

template gpu::Result select<float>(const float *, std::size_t, std::size_t, std::uint32_t *, SelectScratch *,
                                   cudaStream_t);
template gpu::Result select<double>(const double *, std::size_t, std::size_t, std::uint32_t *, SelectScratch *,
                                    cudaStream_t);
template gpu::Result encode<float>(const float *, std::size_t, const std::uint32_t *, std::size_t, cc_coll_dtype_t,
                                   unsigned char *, float *, SelectScratch *, cudaStream_t);
template gpu::Result encode<double>(const double *, std::size_t, const std::uint32_t *, std::size_t,
                                    cc_coll_dtype_t, unsigned char *, double *, SelectScratch *, cudaStream_t);

}  // namespace cc_coll::detail::topk::cuda
