#include "gpu/elementwise.hpp"

#include "core/dtype.hpp"
#include "gpu/cuda_util.hpp"

namespace cc_coll::detail::gpu {

namespace {

constexpr unsigned kThreads = 256;

template <typename W>
__device__ inline bool is_finite(W v)
{
    return isfinite(v);
}

// Grid-stride loop over [0, n).
#define CC_COLL_FOR_EACH(i, n)                                                                      \
    for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < (n); \
         i += static_cast<std::size_t>(gridDim.x) * blockDim.x)

template <typename W>
__global__ void load_input_kernel(const void *src, cc_coll_dtype_t dtype, std::size_t n, W *g, bool accumulate)
{
    CC_COLL_FOR_EACH(i, n)
    {
        const W v = load_element<W>(src, i, dtype);
        g[i] = accumulate ? g[i] + v : v;
    }
}

template <typename W>
__global__ void undo_input_kernel(W *g, const void *src, cc_coll_dtype_t dtype, std::size_t n)
{
    CC_COLL_FOR_EACH(i, n) g[i] -= load_element<W>(src, i, dtype);
}

template <typename W>
__global__ void round_to_dtype_kernel(W *g, bool ef, std::size_t n, cc_coll_dtype_t dtype, void *dst)
{
    CC_COLL_FOR_EACH(i, n)
    {
        store_element<W>(dst, i, dtype, g[i]);
        if (ef) {
            const W r = g[i] - load_element<W>(dst, i, dtype);
            g[i] = is_finite(r) ? r : W(0);
        }
    }
}

template <typename W>
__global__ void store_scaled_kernel(const W *src, std::size_t n, W alpha, cc_coll_dtype_t dtype, void *dst)
{
    CC_COLL_FOR_EACH(i, n) store_element<W>(dst, i, dtype, alpha == W(1) ? src[i] : alpha * src[i]);
}

__global__ void divide_kernel(void *buf, std::size_t n, cc_coll_dtype_t dtype, int divisor)
{
    CC_COLL_FOR_EACH(i, n)
    {
        if (dtype == CC_COLL_F64) {
            static_cast<double *>(buf)[i] /= static_cast<double>(divisor);
        } else {
            // F32 in binary32; F16/BF16 in binary32, then rounded (the host rule).
            const float v = load_element<float>(buf, i, dtype);
            store_element<float>(buf, i, dtype, v / static_cast<float>(divisor));
        }
    }
}

template <typename W>
__global__ void flag_nonfinite_kernel(const W *g, std::size_t n, std::uint32_t *flag)
{
    bool bad = false;
    CC_COLL_FOR_EACH(i, n) bad = bad || !is_finite(g[i]);
    if (__syncthreads_or(bad) && threadIdx.x == 0) *flag = 1u;
}

template <typename W>
__global__ void keep_unsent_kernel(W *g, const std::uint32_t *idx, const W *sent, std::size_t k)
{
    CC_COLL_FOR_EACH(j, k)
    {
        W &e = g[idx[j]];
        const W r = e - sent[j];
        e = is_finite(r) ? r : W(0);
    }
}

template <typename W>
__global__ void zero_at_kernel(W *g, const std::uint32_t *idx, std::size_t k)
{
    CC_COLL_FOR_EACH(j, k) g[idx[j]] = W(0);
}

template <typename W>
__global__ void residual_and_store_kernel(W *e, const W *mhat, std::size_t n, W alpha, cc_coll_dtype_t dtype,
                                          void *dst)
{
    CC_COLL_FOR_EACH(i, n)
    {
        const W m = mhat[i];
        if (e != nullptr) {
            const W r = e[i] - m;
            e[i] = is_finite(r) ? r : W(0);
        }
        store_element<W>(dst, i, dtype, alpha == W(1) ? m : alpha * m);
    }
}

}  // namespace

template <typename W>
Result load_input(const void *src, cc_coll_dtype_t dtype, std::size_t n, W *g, bool accumulate, cudaStream_t stream)
{
    if (n == 0) return Result::success();
    load_input_kernel<W><<<grid_for(n, kThreads), kThreads, 0, stream>>>(src, dtype, n, g, accumulate);
    return launch_result("load_input_kernel");
}

template <typename W>
Result undo_input(W *g, const void *src, cc_coll_dtype_t dtype, std::size_t n, cudaStream_t stream)
{
    if (n == 0) return Result::success();
    undo_input_kernel<W><<<grid_for(n, kThreads), kThreads, 0, stream>>>(g, src, dtype, n);
    return launch_result("undo_input_kernel");
}

template <typename W>
Result round_to_dtype(W *g, bool ef, std::size_t n, cc_coll_dtype_t dtype, void *dst, cudaStream_t stream)
{
    if (n == 0) return Result::success();
    round_to_dtype_kernel<W><<<grid_for(n, kThreads), kThreads, 0, stream>>>(g, ef, n, dtype, dst);
    return launch_result("round_to_dtype_kernel");
}

template <typename W>
Result store_scaled(const W *src, std::size_t n, W alpha, cc_coll_dtype_t dtype, void *dst, cudaStream_t stream)
{
    if (n == 0) return Result::success();
    store_scaled_kernel<W><<<grid_for(n, kThreads), kThreads, 0, stream>>>(src, n, alpha, dtype, dst);
    return launch_result("store_scaled_kernel");
}

Result divide_in_place(void *buf, std::size_t n, cc_coll_dtype_t dtype, int divisor, cudaStream_t stream)
{
    if (n == 0) return Result::success();
    divide_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(buf, n, dtype, divisor);
    return launch_result("divide_kernel");
}

template <typename W>
Result flag_nonfinite(const W *g, std::size_t n, std::uint32_t *flag, cudaStream_t stream)
{
    if (n == 0) return Result::success();
    flag_nonfinite_kernel<W><<<grid_for(n, kThreads), kThreads, 0, stream>>>(g, n, flag);
    return launch_result("flag_nonfinite_kernel");
}

template <typename W>
Result keep_unsent(W *g, const std::uint32_t *idx, const W *sent, std::size_t k, cudaStream_t stream)
{
    if (k == 0) return Result::success();
    keep_unsent_kernel<W><<<grid_for(k, kThreads), kThreads, 0, stream>>>(g, idx, sent, k);
    return launch_result("keep_unsent_kernel");
}

template <typename W>
Result zero_at(W *g, const std::uint32_t *idx, std::size_t k, cudaStream_t stream)
{
    if (k == 0) return Result::success();
    zero_at_kernel<W><<<grid_for(k, kThreads), kThreads, 0, stream>>>(g, idx, k);
    return launch_result("zero_at_kernel");
}

template <typename W>
Result residual_and_store(W *e, const W *mhat, std::size_t n, W alpha, cc_coll_dtype_t dtype, void *dst,
                          cudaStream_t stream)
{
    if (n == 0) return Result::success();
    residual_and_store_kernel<W><<<grid_for(n, kThreads), kThreads, 0, stream>>>(e, mhat, n, alpha, dtype, dst);
    return launch_result("residual_and_store_kernel");
}

#define CC_COLL_INSTANTIATE(W)                                                                                   \
    template Result load_input<W>(const void *, cc_coll_dtype_t, std::size_t, W *, bool, cudaStream_t);          \
    template Result undo_input<W>(W *, const void *, cc_coll_dtype_t, std::size_t, cudaStream_t);                \
    template Result round_to_dtype<W>(W *, bool, std::size_t, cc_coll_dtype_t, void *, cudaStream_t);            \
    template Result store_scaled<W>(const W *, std::size_t, W, cc_coll_dtype_t, void *, cudaStream_t);           \
    template Result flag_nonfinite<W>(const W *, std::size_t, std::uint32_t *, cudaStream_t);                    \
    template Result keep_unsent<W>(W *, const std::uint32_t *, const W *, std::size_t, cudaStream_t);            \
    template Result zero_at<W>(W *, const std::uint32_t *, std::size_t, cudaStream_t);                           \
    template Result residual_and_store<W>(W *, const W *, std::size_t, W, cc_coll_dtype_t, void *, cudaStream_t);
CC_COLL_INSTANTIATE(float)
CC_COLL_INSTANTIATE(double)
#undef CC_COLL_INSTANTIATE

}  // namespace cc_coll::detail::gpu
