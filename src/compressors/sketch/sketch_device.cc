// SKETCH's device steps (sketch_backend.hpp): the kernels of
// count_sketch_cuda.cu and the threshold ladder's on the caller's stream.
// Built only with CUDA.
#ifdef CC_COLL_HAVE_CUDA
#include "compressors/sketch/sketch_backend.hpp"

#include <cuda_runtime_api.h>

#include "compressors/sketch/count_sketch_cuda.hpp"
#include "compressors/threshold/threshold_cuda.hpp"
#include "compressors/topk/topk_cuda.hpp"
#include "gpu/cuda_util.hpp"
#include "gpu/elementwise.hpp"
#include "core/error.hpp"
#include "gpu/gpu.hpp"

namespace cc_coll::detail {

namespace {

constexpr const char *kFn = "cc_coll (device)";
cc_coll_status_t check(const gpu::Result &r) { return gpu::check(r, kFn); }
cc_coll_status_t check_cuda(cudaError_t e, const char *call) { return gpu::check(gpu::cuda_result(e, call), kFn); }
cudaStream_t as_stream(void *s) { return static_cast<cudaStream_t>(s); }

template <typename T>
cc_coll_status_t room(gpu::DeviceArray<T> &a, std::size_t n, T **out)
{
    const cc_coll_status_t st = gpu::check(a.reserve(n), "device workspace");
    *out = a.data();
    return st;
}

}  // namespace

// SKETCH's scratch on one device (CudaExec::state).
struct SketchDeviceState {
    threshold::cuda::Scratch threshold;
    sketch::cuda::DecodeScratch decode;
    gpu::DeviceArray<std::uint32_t> indices, flags, loads;
    gpu::PinnedArray<unsigned char> host_bytes;
};

template <typename W>
cc_coll_status_t sketch_sparsify(CudaExec &x, const W *g, std::size_t n, const CallParams &p, std::uint32_t **idx,
                                 std::size_t *kept)
{
    const cudaStream_t s = as_stream(x.stream());
    SketchDeviceState *st = nullptr;
    CC_COLL_TRY(x.state(&st));
    if (p.sparsifier == CC_COLL_SPARSIFY_THRESHOLD) {
        double tau = 0;
        CC_COLL_TRY(room(st->indices, n, idx));
        CC_COLL_TRY(check(threshold::cuda::pick<W>(g, n, p.zero_fraction, &tau, &st->threshold, s)));
        return check(threshold::cuda::collect<W>(g, n, tau, *idx, kept, &st->threshold, s));
    }
    *kept = topk::k_for(p.density, n);
    CC_COLL_TRY(room(st->indices, *kept, idx));
    topk::cuda::SelectScratch *select = nullptr;
    CC_COLL_TRY(x.state(&select));
    return check(topk::cuda::select<W>(g, n, *kept, *idx, select, s));
}

template <typename W>
cc_coll_status_t sketch_support_message(CudaExec &x, const W *g, std::size_t n, const std::uint32_t *idx,
                                        std::size_t kept, unsigned char *msg)
{
    const cudaStream_t s = as_stream(x.stream());
    SketchDeviceState *st = nullptr;
    CC_COLL_TRY(x.state(&st));
    std::uint32_t *flag = nullptr;
    CC_COLL_TRY(room(st->flags, 1, &flag));
    CC_COLL_TRY(x.zero(msg, sketch_support::buffer_bytes(n)));
    CC_COLL_TRY(x.zero(flag, sizeof(std::uint32_t)));
    CC_COLL_TRY(check(sketch::cuda::bitmap_set(msg, idx, kept, s)));
    CC_COLL_TRY(check(gpu::flag_nonfinite<W>(g, n, flag, s)));
    // The flag's low byte (little-endian) is the message's flag byte.
    return check_cuda(cudaMemcpyAsync(msg + sketch_support::flag_offset(n), flag, 1, cudaMemcpyDeviceToDevice, s),
                      "cudaMemcpyAsync");
}

cc_coll_status_t sketch_rows(CudaExec &x, const unsigned char *msg, std::size_t n, double load_factor,
                             std::uint32_t *m, bool *nonfinite)
{
    const cudaStream_t s = as_stream(x.stream());
    SketchDeviceState *st = nullptr;
    CC_COLL_TRY(x.state(&st));
    std::uint32_t *loads = nullptr;
    CC_COLL_TRY(room(st->loads, sketch::kBlock, &loads));
    CC_COLL_TRY(check(sketch::cuda::column_loads(msg, n, loads, s)));
    const std::size_t lb = sketch::kBlock * sizeof(std::uint32_t);
    CC_COLL_TRY(check(st->host_bytes.reserve(lb + 1)));
    unsigned char *host = st->host_bytes.data();
    CC_COLL_TRY(check_cuda(cudaMemcpyAsync(host, loads, lb, cudaMemcpyDeviceToHost, s), "cudaMemcpyAsync"));
    CC_COLL_TRY(check_cuda(
        cudaMemcpyAsync(host + lb, msg + sketch_support::flag_offset(n), 1, cudaMemcpyDeviceToHost, s),
        "cudaMemcpyAsync"));
    CC_COLL_TRY(x.sync());
    std::vector<std::uint32_t> column(sketch::kBlock);
    std::memcpy(column.data(), host, lb);
    *m = sketch::rows_for_loads(column.data(), load_factor);
    *nonfinite = host[lb] != 0;
    return CC_COLL_OK;
}

template <typename W>
cc_coll_status_t sketch_encode(CudaExec &x, const sketch::Layout &layout, const W *g, const std::uint32_t *idx,
                               std::size_t kept, W *cells)
{
    return check(sketch::cuda::encode<W>(layout, g, idx, kept, cells, as_stream(x.stream())));
}

template <typename W>
cc_coll_status_t sketch_decode(CudaExec &x, const sketch::Layout &layout, const unsigned char *support, W *cells,
                               W *out, sketch::DecodeInfo *info)
{
    SketchDeviceState *st = nullptr;
    CC_COLL_TRY(x.state(&st));
    return check(sketch::cuda::decode<W>(layout, support, cells, out, &st->decode, info, as_stream(x.stream())));
}

#define CC_SKETCH_DEVICE(W)                                                                                     \
    template cc_coll_status_t sketch_sparsify<W>(CudaExec &, const W *, std::size_t, const CallParams &,      \
                                                 std::uint32_t **, std::size_t *);                            \
    template cc_coll_status_t sketch_support_message<W>(CudaExec &, const W *, std::size_t,                   \
                                                        const std::uint32_t *, std::size_t, unsigned char *); \
    template cc_coll_status_t sketch_encode<W>(CudaExec &, const sketch::Layout &, const W *,                 \
                                               const std::uint32_t *, std::size_t, W *);                      \
    template cc_coll_status_t sketch_decode<W>(CudaExec &, const sketch::Layout &, const unsigned char *, W *, \
                                               W *, sketch::DecodeInfo *);
CC_SKETCH_DEVICE(float)
CC_SKETCH_DEVICE(double)

}  // namespace cc_coll::detail
#endif
