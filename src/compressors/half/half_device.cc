// HALF's codec on CudaExec: the kernels of half_cuda.cu on the caller's
// stream. Built only with CUDA.
#ifdef CC_COLL_HAVE_CUDA
#include "compressors/half/half_codec.hpp"
#include "compressors/half/half_cuda.hpp"
#include "core/error.hpp"
#include "gpu/gpu.hpp"

namespace cc_coll::detail {

namespace {
constexpr const char *kFn = "cc_coll (device, half)";
}

template <typename W>
cc_coll_status_t HalfCodec::encode(CudaExec &x, const CallParams &p, const W *v, std::size_t n, unsigned char *out,
                                   W *error, bool accumulate)
{
    return gpu::check(half::cuda::encode<W>(v, n, format(p), out, error, accumulate, x.stream()), kFn);
}

template <typename W>
cc_coll_status_t HalfCodec::decode_sum(CudaExec &x, const CallParams &p, const unsigned char *in, std::size_t blocks,
                                       std::size_t n, W *sum)
{
    return gpu::check(half::cuda::decode_sum<W>(in, blocks, n, format(p), sum, x.stream()), kFn);
}

cc_coll_status_t HalfCodec::decode_store(CudaExec &x, const CallParams &p, const unsigned char *in, std::size_t n,
                                         cc_coll_dtype_t dtype, void *dst)
{
    return gpu::check(half::cuda::decode_store(in, n, format(p), dtype, dst, x.stream()), kFn);
}

template cc_coll_status_t HalfCodec::encode<float>(CudaExec &, const CallParams &, const float *, std::size_t,
                                                   unsigned char *, float *, bool);
template cc_coll_status_t HalfCodec::encode<double>(CudaExec &, const CallParams &, const double *, std::size_t,
                                                    unsigned char *, double *, bool);
template cc_coll_status_t HalfCodec::decode_sum<float>(CudaExec &, const CallParams &, const unsigned char *,
                                                       std::size_t, std::size_t, float *);
template cc_coll_status_t HalfCodec::decode_sum<double>(CudaExec &, const CallParams &, const unsigned char *,
                                                        std::size_t, std::size_t, double *);

}  // namespace cc_coll::detail
#endif
