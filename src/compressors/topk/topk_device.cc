// TOPK's device steps (topk_backend.hpp): the kernels of topk_cuda.cu on
// the caller's stream. Built only with CUDA.
#ifdef CC_COLL_HAVE_CUDA
#include "compressors/topk/topk_backend.hpp"
#include "compressors/topk/topk_cuda.hpp"
#include "core/error.hpp"
#include "gpu/gpu.hpp"

namespace cc_coll::detail {

namespace {
constexpr const char *kFn = "cc_coll (device)";
cc_coll_status_t check(const gpu::Result &r) { return gpu::check(r, kFn); }
}  // namespace

template <typename W>
cc_coll_status_t topk_select(CudaExec &x, const W *g, std::size_t n, std::size_t k, std::uint32_t *idx)
{
    topk::cuda::SelectScratch *scratch = nullptr;
    CC_COLL_TRY(x.state(&scratch));
    return check(topk::cuda::select<W>(g, n, k, idx, scratch, static_cast<cudaStream_t>(x.stream())));
}

template <typename W>
cc_coll_status_t topk_encode(CudaExec &x, const W *g, std::size_t n, const std::uint32_t *idx, std::size_t k,
                             cc_coll_dtype_t dtype, unsigned char *payload, W *sent)
{
    topk::cuda::SelectScratch *scratch = nullptr;
    CC_COLL_TRY(x.state(&scratch));
    return check(topk::cuda::encode<W>(g, n, idx, k, dtype, payload, sent, scratch, static_cast<cudaStream_t>(x.stream())));
}

cc_coll_status_t topk_scatter_add(CudaExec &x, const unsigned char *payload, std::size_t k, cc_coll_dtype_t dtype,
                                  void *out)
{
    return check(topk::cuda::scatter_add(payload, k, dtype, out, static_cast<cudaStream_t>(x.stream())));
}

#define CC_TOPK_DEVICE(W)                                                                                        \
    template cc_coll_status_t topk_select<W>(CudaExec &, const W *, std::size_t, std::size_t, std::uint32_t *); \
    template cc_coll_status_t topk_encode<W>(CudaExec &, const W *, std::size_t, const std::uint32_t *,        \
                                             std::size_t, cc_coll_dtype_t, unsigned char *, W *);
CC_TOPK_DEVICE(float)
CC_TOPK_DEVICE(double)

}  // namespace cc_coll::detail
#endif
