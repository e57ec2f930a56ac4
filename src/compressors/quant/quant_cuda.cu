#include "compressors/quant/quant_cuda.hpp"

#include "gpu/cuda_util.hpp"

namespace cc_coll::detail::quant::cuda {

namespace {

constexpr unsigned kThreads = 256;
constexpr unsigned kFull = 0xffffffffu;

unsigned blocks_for(std::size_t n)
{
    const std::size_t b = (n + kThreads - 1) / kThreads;
    return static_cast<unsigned>(b < 65535 * 32 ? (b > 0 ? b : 1) : 65535 * 32);
}

cudaStream_t as_stream(void *s) { return static_cast<cudaStream_t>(s); }

// One warp per chunk (quant_kernels.hpp's device encoder): lane l's
// statistics, the shuffle tree, then lane l codes the groups of 8 elements
// l, l + 32, ...
template <typename W>
__global__ void encode_kernel(Options o, std::uint64_t seed, unsigned stage, const W *v, std::size_t n,
                              unsigned char *out, W *error, bool accumulate)
{
    const unsigned lane = threadIdx.x % kLanes;
    const std::size_t warps = static_cast<std::size_t>(gridDim.x) * (blockDim.x / kLanes);
    const std::size_t chunks = (n + o.chunk - 1) / o.chunk;
    const std::size_t S = stride(o.chunk, o.bits);
    for (std::size_t c = (blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x) / kLanes; c < chunks;
         c += warps) {
        const std::size_t lo_i = c * o.chunk;
        const std::size_t len = n - lo_i < o.chunk ? n - lo_i : o.chunk;
        const W *x = v + lo_i;
        W *e = error != nullptr ? error + lo_i : nullptr;
        unsigned char *chunk = out + c * S;
        LaneStats s = lane_stats(x, len, lane);
        for (unsigned off = kLanes / 2; off > 0; off /= 2) {
            LaneStats other;
            other.lo = __shfl_down_sync(kFull, s.lo, off);
            other.hi = __shfl_down_sync(kFull, s.hi, off);
            other.abs_sum = __shfl_down_sync(kFull, s.abs_sum, off);
            other.amax_bits = __shfl_down_sync(kFull, s.amax_bits, off);
            if (lane < off) merge_stats(s, other);
        }
        s.lo = __shfl_sync(kFull, s.lo, 0);
        s.hi = __shfl_sync(kFull, s.hi, 0);
        s.abs_sum = __shfl_sync(kFull, s.abs_sum, 0);
        s.amax_bits = __shfl_sync(kFull, s.amax_bits, 0);
        const Header h = stats_header(o, s, len);
        if (lane == 0) {
            reinterpret_cast<float *>(chunk)[0] = h.offset;
            reinterpret_cast<float *>(chunk)[1] = h.step;
        }
        const std::uint32_t key = o.rounding == Rounding::Stochastic ? chunk_key(seed, stage, c, h) : 0u;
        unsigned char *codes = chunk + kHeaderBytes;
        for (std::size_t g = lane; g < (len + 7) / 8; g += kLanes)
            encode_group(o, h, key, x, len, g, codes, e, accumulate);
        if (lane == 0) zero_code_tail(codes, len, o.bits);
        __syncwarp();
    }
}

// One thread per group of 8 elements (quant_kernels.hpp's decode_group),
// the blocks added in block order.
template <typename W>
__global__ void decode_sum_kernel(Options o, const unsigned char *in, std::size_t blocks, std::size_t n,
                                  std::size_t block_bytes, W *sum)
{
    const std::size_t groups = group_count(o, n);
    for (std::size_t t = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; t < groups;
         t += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
        const GroupAt a = group_at(o, n, t);
        W s[8] = {};
        float v[8];
        for (std::size_t r = 0; r < blocks; ++r) {
            decode_group(o, in + r * block_bytes, a, v);
            for (unsigned j = 0; j < a.count; ++j) s[j] += static_cast<W>(v[j]);
        }
        for (unsigned j = 0; j < a.count; ++j) sum[a.first + j] = s[j];
    }
}

__global__ void decode_store_kernel(Options o, const unsigned char *in, std::size_t n, cc_coll_dtype_t dtype,
                                    void *dst)
{
    const std::size_t groups = group_count(o, n);
    for (std::size_t t = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; t < groups;
         t += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
        const GroupAt a = group_at(o, n, t);
        float v[8];
        decode_group(o, in, a, v);
        for (unsigned j = 0; j < a.count; ++j) {
            const std::size_t i = a.first + j;
            switch (dtype) {
            case CC_COLL_F64: static_cast<double *>(dst)[i] = v[j]; break;
            case CC_COLL_F16: static_cast<std::uint16_t *>(dst)[i] = float_to_f16(v[j]); break;
            case CC_COLL_BF16: static_cast<std::uint16_t *>(dst)[i] = float_to_bf16(v[j]); break;
            default: static_cast<float *>(dst)[i] = v[j]; break;
            }
        }
    }
}

}  // namespace

template <typename W>
gpu::Result encode(const Options &o, std::uint64_t seed, unsigned stage, const W *v, std::size_t n,
                   unsigned char *out, W *error, bool accumulate, void *stream)
{
    if (n == 0) return gpu::Result::success();
    const std::size_t chunks = (n + o.chunk - 1) / o.chunk;
    encode_kernel<W><<<blocks_for(chunks * kLanes), kThreads, 0, as_stream(stream)>>>(o, seed, stage, v, n, out,
                                                                                       error, accumulate);
    return gpu::launch_result("quant::encode_kernel");
}

template <typename W>
gpu::Result decode_sum(const Options &o, const unsigned char *in, std::size_t blocks, std::size_t n, W *sum,
                       void *stream)
{
    if (n == 0) return gpu::Result::success();
    decode_sum_kernel<W><<<blocks_for(group_count(o, n)), kThreads, 0, as_stream(stream)>>>(o, in, blocks, n,
                                                                            coded_size(n, o.chunk, o.bits), sum);
    return gpu::launch_result("quant::decode_sum_kernel");
}

gpu::Result decode_store(const Options &o, const unsigned char *in, std::size_t n, cc_coll_dtype_t dtype, void *dst,
                         void *stream)
{
    if (n == 0) return gpu::Result::success();
    decode_store_kernel<<<blocks_for(group_count(o, n)), kThreads, 0, as_stream(stream)>>>(o, in, n, dtype, dst);
    return gpu::launch_result("quant::decode_store_kernel");
}

template gpu::Result encode<float>(const Options &, std::uint64_t, unsigned, const float *, std::size_t,
                                   unsigned char *, float *, bool, void *);
template gpu::Result encode<double>(const Options &, std::uint64_t, unsigned, const double *, std::size_t,
                                    unsigned char *, double *, bool, void *);
template gpu::Result decode_sum<float>(const Options &, const unsigned char *, std::size_t, std::size_t, float *,
                                       void *);
template gpu::Result decode_sum<double>(const Options &, const unsigned char *, std::size_t, std::size_t, double *,
                                        void *);

}  // namespace cc_coll::detail::quant::cuda
