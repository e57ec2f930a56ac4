// CudaExec (exec/cuda_exec.hpp): the steps of the collective algorithms on
// device buffers. Kernels go on the caller's stream, so they follow the work
// that produced sendbuf; the algorithms synchronise before each transfer
// (MPI reads the data from the host's side) and before returning.
#include "exec/cuda_exec.hpp"

#include <cstring>
#include <memory>

#include <cuda_runtime_api.h>

#include "compressors/lowrank/powersgd_cuda.hpp"
#include "compressors/sketch/count_sketch_cuda.hpp"
#include "compressors/threshold/threshold_cuda.hpp"
#include "compressors/topk/topk_cuda.hpp"
#include "core/error.hpp"
#include "gpu/cuda_util.hpp"
#include "gpu/elementwise.hpp"
#include "gpu/gpu.hpp"
#include "transport/device_transport.hpp"
#include "wire/sketch_support.hpp"

namespace cc_coll::detail {

namespace {
constexpr const char *kFn = "cc_coll (device)";

template <typename W>
struct TypedScratch {
    std::vector<std::unique_ptr<gpu::DeviceArray<W>>> mats;
};
}  // namespace

// What a communicator keeps for its calls on device buffers, on one device.
struct DeviceContext {
    int device = -1;
    std::unique_ptr<DeviceTransport> transport;
    std::unique_ptr<lowrank::cuda::Context> blas;  // created on the first LOWRANK call
    topk::cuda::SelectScratch select;
    threshold::cuda::Scratch threshold;
    sketch::cuda::DecodeScratch decode;
    gpu::DeviceArray<unsigned char> slots[static_cast<int>(Buf::Count)];
    gpu::DeviceArray<std::uint32_t> indices, flags, loads;
    gpu::PinnedArray<unsigned char> host_bytes;
    TypedScratch<float> f32;
    TypedScratch<double> f64;

    template <typename W>
    TypedScratch<W> &typed();
};
template <>
TypedScratch<float> &DeviceContext::typed<float>() { return f32; }
template <>
TypedScratch<double> &DeviceContext::typed<double>() { return f64; }

namespace {

cudaStream_t as_stream(void *s) { return static_cast<cudaStream_t>(s); }

cc_coll_status_t check(const gpu::Result &r) { return gpu::check(r, kFn); }
cc_coll_status_t check_cuda(cudaError_t e, const char *call) { return gpu::check(gpu::cuda_result(e, call), kFn); }

template <typename T>
cc_coll_status_t room(gpu::DeviceArray<T> &a, std::size_t n, T **out)
{
    const cc_coll_status_t st = gpu::check(a.reserve(n), "device workspace");
    *out = a.data();
    return st;
}


}  // namespace

cc_coll_status_t CudaExec::create(Comm &comm, void *stream, CudaExec *out)
{
    std::shared_ptr<void> &slot = comm.device_slot();
    const int dev = gpu::current_device();
    auto *ctx = static_cast<DeviceContext *>(slot.get());
    if (ctx == nullptr || ctx->device != dev) {
        auto fresh = std::make_shared<DeviceContext>();
        fresh->device = dev;
        DeviceTransportMode mode = DeviceTransportMode::Staged;
        CC_COLL_TRY(resolve_device_transport(comm.config().cuda_transport, &mode));
        CC_COLL_TRY(DeviceTransport::create(mode, comm.config().cuda_chunk_bytes, &fresh->transport));
        slot = fresh;
        ctx = fresh.get();
    }
    out->comm_ = &comm;
    out->ctx_ = ctx;
    out->stream_ = stream;
    return CC_COLL_OK;
}

Transport &CudaExec::transport() { return *ctx_->transport; }

cc_coll_status_t CudaExec::sync() { return gpu::synchronize(stream_, kFn); }

template <typename T>
cc_coll_status_t CudaExec::buffer(Buf b, std::size_t n, T **out)
{
    unsigned char *p = nullptr;
    const cc_coll_status_t st = room(ctx_->slots[static_cast<int>(b)], n * sizeof(T), &p);
    *out = reinterpret_cast<T *>(p);
    return st;
}

template <typename W>
cc_coll_status_t CudaExec::matrix(std::size_t j, std::size_t n, W **out)
{
    auto &mats = ctx_->typed<W>().mats;
    if (mats.size() <= j) mats.resize(j + 1);
    if (!mats[j]) mats[j] = std::make_unique<gpu::DeviceArray<W>>();
    return room(*mats[j], n, out);
}

cc_coll_status_t CudaExec::zero(void *buf, std::size_t bytes)
{
    if (bytes == 0) return CC_COLL_OK;
    return check_cuda(cudaMemsetAsync(buf, 0, bytes, as_stream(stream_)), "cudaMemsetAsync");
}

cc_coll_status_t CudaExec::copy(void *dst, const void *src, std::size_t bytes)
{
    if (bytes == 0 || dst == src) return CC_COLL_OK;
    return check_cuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, as_stream(stream_)),
                      "cudaMemcpyAsync");
}

cc_coll_status_t CudaExec::read_records(const unsigned char *src, std::size_t count, std::size_t stride,
                                        std::size_t record, const unsigned char **host, std::size_t *host_stride)
{
    const cudaStream_t s = as_stream(stream_);
    CC_COLL_TRY(check(ctx_->host_bytes.reserve(record * count)));
    CC_COLL_TRY(check_cuda(
        cudaMemcpy2DAsync(ctx_->host_bytes.data(), record, src, stride, record, count, cudaMemcpyDeviceToHost, s),
        "cudaMemcpy2DAsync"));
    CC_COLL_TRY(sync());
    *host = ctx_->host_bytes.data();
    *host_stride = record;
    return CC_COLL_OK;
}

cc_coll_status_t CudaExec::residual(const EfKey &key, std::size_t n, cc_coll_dtype_t dtype, bool create,
                                    Residual **res)
{
    return create ? comm_->ef().acquire(key, n, dtype, res, gpu::device_zeroed)
                  : comm_->ef().find_matching(key, n, dtype, res, true);
}

template <typename W>
cc_coll_status_t CudaExec::load_input(const void *src, cc_coll_dtype_t dtype, std::size_t n, W *g, bool accumulate)
{
    return check(gpu::load_input<W>(src, dtype, n, g, accumulate, as_stream(stream_)));
}

template <typename W>
void CudaExec::undo_input(W *g, const void *src, cc_coll_dtype_t dtype, std::size_t n)
{
    (void)gpu::undo_input<W>(g, src, dtype, n, as_stream(stream_));
    (void)cudaStreamSynchronize(as_stream(stream_));
}

template <typename W>
cc_coll_status_t CudaExec::round_to_dtype(W *g, bool ef, std::size_t n, cc_coll_dtype_t dtype, void *dst)
{
    return check(gpu::round_to_dtype<W>(g, ef, n, dtype, dst, as_stream(stream_)));
}

template <typename W>
cc_coll_status_t CudaExec::store(const W *src, std::size_t n, cc_coll_dtype_t dtype, void *dst)
{
    return check(gpu::store_scaled<W>(src, n, W(1), dtype, dst, as_stream(stream_)));
}

cc_coll_status_t CudaExec::divide(void *buf, std::size_t n, cc_coll_dtype_t dtype, int divisor)
{
    return check(gpu::divide_in_place(buf, n, dtype, divisor, as_stream(stream_)));
}

template <typename W>
cc_coll_status_t CudaExec::keep_unsent(W *g, const std::uint32_t *idx, const W *sent, std::size_t k)
{
    return check(gpu::keep_unsent<W>(g, idx, sent, k, as_stream(stream_)));
}

template <typename W>
cc_coll_status_t CudaExec::zero_at(W *g, const std::uint32_t *idx, std::size_t k)
{
    return check(gpu::zero_at<W>(g, idx, k, as_stream(stream_)));
}

template <typename W>
cc_coll_status_t CudaExec::residual_and_store(W *e, W *mhat, std::size_t n, W alpha, cc_coll_dtype_t dtype,
                                              void *dst)
{
    return check(gpu::residual_and_store<W>(e, mhat, n, alpha, dtype, dst, as_stream(stream_)));
}

template <typename W>
cc_coll_status_t CudaExec::nonfinite(const std::vector<const W *> &bufs, const std::vector<std::size_t> &ns,
                                     std::vector<std::uint8_t> *flags)
{
    const cudaStream_t s = as_stream(stream_);
    const std::size_t count = bufs.size();
    flags->assign(count, 0);
    if (count == 0) return CC_COLL_OK;
    std::uint32_t *dev = nullptr;
    CC_COLL_TRY(room(ctx_->flags, count, &dev));
    CC_COLL_TRY(zero(dev, count * sizeof(std::uint32_t)));
    for (std::size_t j = 0; j < count; ++j) CC_COLL_TRY(check(gpu::flag_nonfinite<W>(bufs[j], ns[j], dev + j, s)));
    std::vector<std::uint32_t> host(count);
    CC_COLL_TRY(check_cuda(cudaMemcpyAsync(host.data(), dev, count * sizeof(std::uint32_t), cudaMemcpyDeviceToHost, s),
                           "cudaMemcpyAsync"));
    CC_COLL_TRY(sync());
    for (std::size_t j = 0; j < count; ++j) (*flags)[j] = host[j] != 0 ? 1 : 0;
    return CC_COLL_OK;
}

template <typename W>
cc_coll_status_t CudaExec::topk_select(const W *g, std::size_t n, std::size_t k, std::uint32_t *idx)
{
    return check(topk::cuda::select<W>(g, n, k, idx, &ctx_->select, as_stream(stream_)));
}

template <typename W>
cc_coll_status_t CudaExec::topk_encode(const W *g, std::size_t n, const std::uint32_t *idx, std::size_t k,
                                       cc_coll_dtype_t dtype, unsigned char *payload, W *sent)
{
    return check(topk::cuda::encode<W>(g, n, idx, k, dtype, payload, sent, &ctx_->select, as_stream(stream_)));
}

cc_coll_status_t CudaExec::topk_scatter_add(const unsigned char *payload, std::size_t k, cc_coll_dtype_t dtype,
                                            void *out)
{
    return check(topk::cuda::scatter_add(payload, k, dtype, out, as_stream(stream_)));
}

template <typename W>
cc_coll_status_t CudaExec::sparsify(const W *g, std::size_t n, const CallParams &p, std::uint32_t **idx,
                                    std::size_t *kept)
{
    const cudaStream_t s = as_stream(stream_);
    if (p.sparsifier == CC_COLL_SPARSIFY_THRESHOLD) {
        double tau = 0;
        CC_COLL_TRY(room(ctx_->indices, n, idx));
        CC_COLL_TRY(check(threshold::cuda::pick<W>(g, n, p.zero_fraction, &tau, &ctx_->threshold, s)));
        return check(threshold::cuda::collect<W>(g, n, tau, *idx, kept, &ctx_->threshold, s));
    }
    *kept = topk::k_for(p.density, n);
    CC_COLL_TRY(room(ctx_->indices, *kept, idx));
    return check(topk::cuda::select<W>(g, n, *kept, *idx, &ctx_->select, s));
}

template <typename W>
cc_coll_status_t CudaExec::support_message(const W *g, std::size_t n, const std::uint32_t *idx, std::size_t kept,
                                           unsigned char *msg)
{
    const cudaStream_t s = as_stream(stream_);
    std::uint32_t *flag = nullptr;
    CC_COLL_TRY(room(ctx_->flags, 1, &flag));
    CC_COLL_TRY(zero(msg, sketch_support::buffer_bytes(n)));
    CC_COLL_TRY(zero(flag, sizeof(std::uint32_t)));
    CC_COLL_TRY(check(sketch::cuda::bitmap_set(msg, idx, kept, s)));
    CC_COLL_TRY(check(gpu::flag_nonfinite<W>(g, n, flag, s)));
    // The flag's low byte (little-endian) is the message's flag byte.
    return check_cuda(cudaMemcpyAsync(msg + sketch_support::flag_offset(n), flag, 1, cudaMemcpyDeviceToDevice, s),
                      "cudaMemcpyAsync");
}

cc_coll_status_t CudaExec::sketch_rows(const unsigned char *msg, std::size_t n, double load_factor, std::uint32_t *m,
                                       bool *nonfinite)
{
    const cudaStream_t s = as_stream(stream_);
    std::uint32_t *loads = nullptr;
    CC_COLL_TRY(room(ctx_->loads, sketch::kBlock, &loads));
    CC_COLL_TRY(check(sketch::cuda::column_loads(msg, n, loads, s)));
    const std::size_t lb = sketch::kBlock * sizeof(std::uint32_t);
    CC_COLL_TRY(check(ctx_->host_bytes.reserve(lb + 1)));
    unsigned char *host = ctx_->host_bytes.data();
    CC_COLL_TRY(check_cuda(cudaMemcpyAsync(host, loads, lb, cudaMemcpyDeviceToHost, s), "cudaMemcpyAsync"));
    CC_COLL_TRY(check_cuda(
        cudaMemcpyAsync(host + lb, msg + sketch_support::flag_offset(n), 1, cudaMemcpyDeviceToHost, s),
        "cudaMemcpyAsync"));
    CC_COLL_TRY(sync());
    std::vector<std::uint32_t> column(sketch::kBlock);
    std::memcpy(column.data(), host, lb);
    *m = sketch::rows_for_loads(column.data(), load_factor);
    *nonfinite = host[lb] != 0;
    return CC_COLL_OK;
}

template <typename W>
cc_coll_status_t CudaExec::sketch_encode(const sketch::Layout &layout, const W *g, const std::uint32_t *idx,
                                         std::size_t kept, W *cells)
{
    return check(sketch::cuda::encode<W>(layout, g, idx, kept, cells, as_stream(stream_)));
}

template <typename W>
cc_coll_status_t CudaExec::sketch_decode(const sketch::Layout &layout, const unsigned char *support, W *cells, W *out,
                                         sketch::DecodeInfo *info)
{
    return check(sketch::cuda::decode<W>(layout, support, cells, out, &ctx_->decode, info, as_stream(stream_)));
}

namespace {
cc_coll_status_t blas_of(DeviceContext &ctx, lowrank::cuda::Context **out)
{
    if (!ctx.blas) CC_COLL_TRY(gpu::check(lowrank::cuda::Context::create(&ctx.blas), "LOWRANK (device)"));
    *out = ctx.blas.get();
    return CC_COLL_OK;
}
}  // namespace

template <typename W>
cc_coll_status_t CudaExec::lr_start_q(const W *previous, std::uint64_t seed, std::uint64_t stream,
                                      const lowrank::Shape &s, bool half, W *q)
{
    lowrank::cuda::Context *blas = nullptr;
    CC_COLL_TRY(blas_of(*ctx_, &blas));
    return check(lowrank::cuda::start_q<W>(*blas, previous, seed, stream, s, half, q, as_stream(stream_)));
}

template <typename W>
cc_coll_status_t CudaExec::lr_multiply_mq(const W *m, const lowrank::Shape &s, const W *q, W *p)
{
    lowrank::cuda::Context *blas = nullptr;
    CC_COLL_TRY(blas_of(*ctx_, &blas));
    return check(lowrank::cuda::multiply_mq<W>(*blas, m, s, q, p, as_stream(stream_)));
}

template <typename W>
cc_coll_status_t CudaExec::lr_orthogonalize(W *a, std::size_t rows, int r, bool half)
{
    lowrank::cuda::Context *blas = nullptr;
    CC_COLL_TRY(blas_of(*ctx_, &blas));
    return check(lowrank::cuda::orthogonalize<W>(*blas, a, rows, r, half, as_stream(stream_)));
}

template <typename W>
cc_coll_status_t CudaExec::lr_multiply_mtp(const W *m, const lowrank::Shape &s, const W *p, W *q)
{
    lowrank::cuda::Context *blas = nullptr;
    CC_COLL_TRY(blas_of(*ctx_, &blas));
    return check(lowrank::cuda::multiply_mtp<W>(*blas, m, s, p, q, as_stream(stream_)));
}

template <typename W>
cc_coll_status_t CudaExec::lr_scale(W *x, std::size_t n, W alpha)
{
    lowrank::cuda::Context *blas = nullptr;
    CC_COLL_TRY(blas_of(*ctx_, &blas));
    return check(lowrank::cuda::scale<W>(*blas, x, n, alpha, as_stream(stream_)));
}

template <typename W>
cc_coll_status_t CudaExec::lr_reconstruct(const W *p, const W *q, const lowrank::Shape &s, W *out)
{
    lowrank::cuda::Context *blas = nullptr;
    CC_COLL_TRY(blas_of(*ctx_, &blas));
    return check(lowrank::cuda::reconstruct<W>(*blas, p, q, s, W(1), out, as_stream(stream_)));
}

template <typename W>
const W *CudaExec::lr_stored_q(LowRankState &state, const lowrank::Shape &s)
{
    if (!state.has_device_q<W>(s.rows, s.cols, s.rank)) return nullptr;
    return static_cast<const W *>(state.device.get()) + s.rows * static_cast<std::size_t>(s.rank);
}

template <typename W>
cc_coll_status_t CudaExec::lr_keep_factors(LowRankState &state, const lowrank::Shape &s, const W *p, const W *q)
{
    const std::size_t pn = s.rows * static_cast<std::size_t>(s.rank);
    const std::size_t qn = s.cols * static_cast<std::size_t>(s.rank);
    if (!state.has_device_q<W>(s.rows, s.cols, s.rank)) {
        cc_coll_status_t st = CC_COLL_OK;
        state.device = gpu::device_zeroed((pn + qn) * sizeof(W), &st);
        if (state.device == nullptr) return st;
    }
    W *factors = static_cast<W *>(state.device.get());
    CC_COLL_TRY(copy(factors, p, pn * sizeof(W)));
    CC_COLL_TRY(copy(factors + pn, q, qn * sizeof(W)));
    state.rows = s.rows;
    state.cols = s.cols;
    state.rank = s.rank;
    state.device_work = sizeof(W);
    state.p_f32.clear();
    state.q_f32.clear();
    state.p_f64.clear();
    state.q_f64.clear();
    return CC_COLL_OK;
}

#define CC_EXEC_BUFFER(T) template cc_coll_status_t CudaExec::buffer<T>(Buf, std::size_t, T **);
CC_EXEC_BUFFER(unsigned char)
CC_EXEC_BUFFER(std::uint32_t)
CC_EXEC_BUFFER(float)
CC_EXEC_BUFFER(double)

#define CC_EXEC_INSTANTIATE(W)                                                                                   \
    template cc_coll_status_t CudaExec::matrix<W>(std::size_t, std::size_t, W **);                             \
    template cc_coll_status_t CudaExec::load_input<W>(const void *, cc_coll_dtype_t, std::size_t, W *, bool);  \
    template void CudaExec::undo_input<W>(W *, const void *, cc_coll_dtype_t, std::size_t);                    \
    template cc_coll_status_t CudaExec::round_to_dtype<W>(W *, bool, std::size_t, cc_coll_dtype_t, void *);    \
    template cc_coll_status_t CudaExec::store<W>(const W *, std::size_t, cc_coll_dtype_t, void *);             \
    template cc_coll_status_t CudaExec::keep_unsent<W>(W *, const std::uint32_t *, const W *, std::size_t);    \
    template cc_coll_status_t CudaExec::zero_at<W>(W *, const std::uint32_t *, std::size_t);                   \
    template cc_coll_status_t CudaExec::residual_and_store<W>(W *, W *, std::size_t, W, cc_coll_dtype_t, void *); \
    template cc_coll_status_t CudaExec::nonfinite<W>(const std::vector<const W *> &,                           \
                                                     const std::vector<std::size_t> &, std::vector<std::uint8_t> *); \
    template cc_coll_status_t CudaExec::topk_select<W>(const W *, std::size_t, std::size_t, std::uint32_t *);  \
    template cc_coll_status_t CudaExec::topk_encode<W>(const W *, std::size_t, const std::uint32_t *,         \
                                                       std::size_t, cc_coll_dtype_t, unsigned char *, W *);    \
    template cc_coll_status_t CudaExec::sparsify<W>(const W *, std::size_t, const CallParams &,              \
                                                    std::uint32_t **, std::size_t *);                         \
    template cc_coll_status_t CudaExec::support_message<W>(const W *, std::size_t, const std::uint32_t *,     \
                                                           std::size_t, unsigned char *);                     \
    template cc_coll_status_t CudaExec::sketch_encode<W>(const sketch::Layout &, const W *,                   \
                                                         const std::uint32_t *, std::size_t, W *);            \
    template cc_coll_status_t CudaExec::sketch_decode<W>(const sketch::Layout &, const unsigned char *, W *,  \
                                                         W *, sketch::DecodeInfo *);                           \
    template cc_coll_status_t CudaExec::lr_start_q<W>(const W *, std::uint64_t, std::uint64_t,                \
                                                      const lowrank::Shape &, bool, W *);                      \
    template cc_coll_status_t CudaExec::lr_multiply_mq<W>(const W *, const lowrank::Shape &, const W *, W *); \
    template cc_coll_status_t CudaExec::lr_orthogonalize<W>(W *, std::size_t, int, bool);                     \
    template cc_coll_status_t CudaExec::lr_multiply_mtp<W>(const W *, const lowrank::Shape &, const W *, W *);\
    template cc_coll_status_t CudaExec::lr_scale<W>(W *, std::size_t, W);                                     \
    template cc_coll_status_t CudaExec::lr_reconstruct<W>(const W *, const W *, const lowrank::Shape &, W *); \
    template const W *CudaExec::lr_stored_q<W>(LowRankState &, const lowrank::Shape &);                       \
    template cc_coll_status_t CudaExec::lr_keep_factors<W>(LowRankState &, const lowrank::Shape &, const W *, \
                                                           const W *);
CC_EXEC_INSTANTIATE(float)
CC_EXEC_INSTANTIATE(double)

}  // namespace cc_coll::detail
