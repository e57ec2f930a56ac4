// CudaExec (exec/cuda_exec.hpp): the steps of the collective algorithms on
// device buffers. Kernels go on the caller's stream, so they follow the work
// that produced sendbuf; the algorithms synchronise before each transfer
// (MPI reads the data from the host's side) and before returning.
#include "exec/cuda_exec.hpp"

#include <cstring>
#include <map>
#include <memory>
#include <typeindex>

#include <cuda_runtime_api.h>

#include "core/error.hpp"
#include "gpu/cuda_util.hpp"
#include "gpu/elementwise.hpp"
#include "gpu/gpu.hpp"
#include "transport/device_transport.hpp"

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
    gpu::DeviceArray<unsigned char> slots[static_cast<int>(Buf::Count)];
    gpu::DeviceArray<std::uint32_t> flags;
    gpu::PinnedArray<unsigned char> host_bytes;  // read_records
    // The compressors' own scratch, by type (CudaExec::state).
    std::map<std::type_index, std::shared_ptr<void>> states;
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

std::shared_ptr<void> &CudaExec::state_slot(const std::type_info &type) { return ctx_->states[std::type_index(type)]; }

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
                                                     const std::vector<std::size_t> &, std::vector<std::uint8_t> *);
CC_EXEC_INSTANTIATE(float)
CC_EXEC_INSTANTIATE(double)

}  // namespace cc_coll::detail
