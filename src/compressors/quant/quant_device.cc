// QUANT's and ONEBIT's codec on CudaExec: the kernels of quant_cuda.cu on the
// caller's stream. Built only with CUDA.
#ifdef CC_COLL_HAVE_CUDA
#include "compressors/quant/quant_codec.hpp"
#include "compressors/quant/quant_cuda.hpp"
#include "core/error.hpp"
#include "gpu/gpu.hpp"

namespace cc_coll::detail {

namespace {
constexpr const char *kFn = "cc_coll (device, quant)";
}

template <cc_coll_method_t Id>
template <typename W>
cc_coll_status_t ChunkCodec<Id>::encode(CudaExec &x, const CallParams &p, const W *v, std::size_t n,
                                        unsigned char *out, W *error, bool accumulate)
{
    return gpu::check(
        quant::cuda::encode<W>(options(p), p.seed, accumulate ? 2 : 1, v, n, out, error, accumulate, x.stream()), kFn);
}

template <cc_coll_method_t Id>
template <typename W>
cc_coll_status_t ChunkCodec<Id>::decode_sum(CudaExec &x, const CallParams &p, const unsigned char *in,
                                            std::size_t blocks, std::size_t n, W *sum)
{
    return gpu::check(quant::cuda::decode_sum<W>(options(p), in, blocks, n, sum, x.stream()), kFn);
}

template <cc_coll_method_t Id>
cc_coll_status_t ChunkCodec<Id>::decode_store(CudaExec &x, const CallParams &p, const unsigned char *in,
                                              std::size_t n, cc_coll_dtype_t dtype, void *dst)
{
    return gpu::check(quant::cuda::decode_store(options(p), in, n, dtype, dst, x.stream()), kFn);
}

#define CC_COLL_QUANT_INSTANTIATE(Id)                                                                                 \
    template cc_coll_status_t ChunkCodec<Id>::encode<float>(CudaExec &, const CallParams &, const float *,            \
                                                            std::size_t, unsigned char *, float *, bool);             \
    template cc_coll_status_t ChunkCodec<Id>::encode<double>(CudaExec &, const CallParams &, const double *,          \
                                                             std::size_t, unsigned char *, double *, bool);           \
    template cc_coll_status_t ChunkCodec<Id>::decode_sum<float>(CudaExec &, const CallParams &,                       \
                                                                const unsigned char *, std::size_t, std::size_t,      \
                                                                float *);                                             \
    template cc_coll_status_t ChunkCodec<Id>::decode_sum<double>(CudaExec &, const CallParams &,                      \
                                                                 const unsigned char *, std::size_t, std::size_t,     \
                                                                 double *);                                           \
    template cc_coll_status_t ChunkCodec<Id>::decode_store(CudaExec &, const CallParams &, const unsigned char *,     \
                                                           std::size_t, cc_coll_dtype_t, void *);
CC_COLL_QUANT_INSTANTIATE(CC_COLL_METHOD_QUANT)
CC_COLL_QUANT_INSTANTIATE(CC_COLL_METHOD_ONEBIT)
#undef CC_COLL_QUANT_INSTANTIATE

}  // namespace cc_coll::detail
#endif
