#include "compressors/half/half_cuda.hpp"

#include "gpu/cuda_util.hpp"

namespace cc_coll::detail::half::cuda {

namespace {

constexpr unsigned kThreads = 256;

unsigned blocks_for(std::size_t n)
{
    const std::size_t b = (n + kThreads - 1) / kThreads;
    return static_cast<unsigned>(b < 65535 * 32 ? (b > 0 ? b : 1) : 65535 * 32);
}

cudaStream_t as_stream(void *s) { return static_cast<cudaStream_t>(s); }

template <typename W>
__global__ void encode_kernel(const W *v, std::size_t n, Format f, std::uint16_t *out, W *error, bool accumulate)
{
    for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
        const W value = v[i];
        const std::uint16_t c = encode_one(value, f);
        out[i] = c;
        if (error != nullptr) {
            const W err = value - static_cast<W>(decode_one(c, f));
            error[i] = kept_error(accumulate ? error[i] + err : err);
        }
    }
}

template <typename W>
__global__ void decode_sum_kernel(const std::uint16_t *in, std::size_t blocks, std::size_t n, Format f, W *sum)
{
    for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
        W s = 0;
        for (std::size_t r = 0; r < blocks; ++r) s += static_cast<W>(decode_one(in[r * n + i], f));
        sum[i] = s;
    }
}

__global__ void decode_store_kernel(const std::uint16_t *in, std::size_t n, Format f, cc_coll_dtype_t dtype,
                                    void *dst)
{
    for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
        const float v = decode_one(in[i], f);
        switch (dtype) {
        case CC_COLL_F64: static_cast<double *>(dst)[i] = v; break;
        case CC_COLL_F16: static_cast<std::uint16_t *>(dst)[i] = float_to_f16(v); break;
        case CC_COLL_BF16: static_cast<std::uint16_t *>(dst)[i] = float_to_bf16(v); break;
        default: static_cast<float *>(dst)[i] = v; break;
        }
    }
}

}  // namespace

template <typename W>
gpu::Result encode(const W *v, std::size_t n, Format f, unsigned char *out, W *error, bool accumulate, void *stream)
{
    if (n == 0) return gpu::Result::success();
    encode_kernel<W><<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(
        v, n, f, reinterpret_cast<std::uint16_t *>(out), error, accumulate);
    return gpu::launch_result("half::encode_kernel");
}

template <typename W>
gpu::Result decode_sum(const unsigned char *in, std::size_t blocks, std::size_t n, Format f, W *sum, void *stream)
{
    if (n == 0) return gpu::Result::success();
    decode_sum_kernel<W><<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(
        reinterpret_cast<const std::uint16_t *>(in), blocks, n, f, sum);
    return gpu::launch_result("half::decode_sum_kernel");
}

gpu::Result decode_store(const unsigned char *in, std::size_t n, Format f, cc_coll_dtype_t dtype, void *dst,
                         void *stream)
{
    if (n == 0) return gpu::Result::success();
    decode_store_kernel<<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(
        reinterpret_cast<const std::uint16_t *>(in), n, f, dtype, dst);
    return gpu::launch_result("half::decode_store_kernel");
}

template gpu::Result encode<float>(const float *, std::size_t, Format, unsigned char *, float *, bool, void *);
template gpu::Result encode<double>(const double *, std::size_t, Format, unsigned char *, double *, bool, void *);
template gpu::Result decode_sum<float>(const unsigned char *, std::size_t, std::size_t, Format, float *, void *);
template gpu::Result decode_sum<double>(const unsigned char *, std::size_t, std::size_t, Format, double *, void *);

}  // namespace cc_coll::detail::half::cuda
