// The device transport with CUDA: the copy engine of the staged pipelines
// (cudaMemcpyAsync on two copy streams, events per slot) and the direct or
// staged paths of DeviceTransport. Built only with CUDA.
#include "transport/device_transport.hpp"

#include <cstddef>
#include <limits>
#include <memory>
#include <new>

#include <cuda_runtime_api.h>

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "gpu/cuda_util.hpp"
#include "gpu/gpu.hpp"
#include "transport/mpi_transport.hpp"

namespace cc_coll::detail {

namespace {

// CC_COLL_OK, or CC_COLL_ERR_CUDA naming the failed runtime call.
cc_coll_status_t cuda_status(cudaError_t e, const char *call)
{
    return gpu::check(gpu::cuda_result(e, call), "device transport");
}

// The staged pipelines' copy engine on one device: copies down (device to
// host) on one non-blocking stream, copies up on another, so the two
// directions overlap; an event per slot and direction marks each copy's end.
class CudaStagingCopier final : public StagingCopier {
public:
    CudaStagingCopier() = default;
    CudaStagingCopier(const CudaStagingCopier &) = delete;
    CudaStagingCopier &operator=(const CudaStagingCopier &) = delete;
    ~CudaStagingCopier() override
    {
        // Every staged path waits for its copies before returning, so
        // nothing is in flight here.
        for (int s = 0; s < kStagingSlots; ++s) {
            if (down_done_[s] != nullptr) (void)cudaEventDestroy(down_done_[s]);
            if (up_done_[s] != nullptr) (void)cudaEventDestroy(up_done_[s]);
        }
        if (down_ != nullptr) (void)cudaStreamDestroy(down_);
        if (up_ != nullptr) (void)cudaStreamDestroy(up_);
    }

    // Creates the streams and events on the current device.
    cc_coll_status_t init()
    {
        cc_coll_status_t st = cuda_status(cudaStreamCreateWithFlags(&down_, cudaStreamNonBlocking),
                                          "cudaStreamCreateWithFlags (copies to host)");
        if (st == CC_COLL_OK)
            st = cuda_status(cudaStreamCreateWithFlags(&up_, cudaStreamNonBlocking),
                             "cudaStreamCreateWithFlags (copies to device)");
        for (int s = 0; st == CC_COLL_OK && s < kStagingSlots; ++s) {
            st = cuda_status(cudaEventCreateWithFlags(&down_done_[s], cudaEventDisableTiming),
                             "cudaEventCreateWithFlags");
            if (st == CC_COLL_OK)
                st = cuda_status(cudaEventCreateWithFlags(&up_done_[s], cudaEventDisableTiming),
                                 "cudaEventCreateWithFlags");
        }
        return st;
    }

    cc_coll_status_t to_host(void *dst, const void *src, std::size_t bytes, int slot) override
    {
        // cudaMemcpyDefault: the source may be device or managed memory.
        cc_coll_status_t st = cuda_status(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, down_),
                                          "cudaMemcpyAsync (device to host)");
        if (st != CC_COLL_OK) return st;
        return cuda_status(cudaEventRecord(down_done_[slot], down_), "cudaEventRecord (copy to host)");
    }

    cc_coll_status_t to_device(void *dst, const void *src, std::size_t bytes, int slot) override
    {
        cc_coll_status_t st = cuda_status(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, up_),
                                          "cudaMemcpyAsync (host to device)");
        if (st != CC_COLL_OK) return st;
        return cuda_status(cudaEventRecord(up_done_[slot], up_), "cudaEventRecord (copy to device)");
    }

    // An event never recorded counts as complete, so a slot not used yet
    // needs no special case.
    cc_coll_status_t wait_to_host(int slot) override
    {
        return cuda_status(cudaEventSynchronize(down_done_[slot]), "cudaEventSynchronize (copy to host)");
    }

    cc_coll_status_t wait_to_device(int slot) override
    {
        return cuda_status(cudaEventSynchronize(up_done_[slot]), "cudaEventSynchronize (copy to device)");
    }

    cc_coll_status_t wait_all() override
    {
        // Both streams are waited for even when the first wait fails.
        const cc_coll_status_t down = cuda_status(cudaStreamSynchronize(down_), "cudaStreamSynchronize (copies to host)");
        const cc_coll_status_t up = cuda_status(cudaStreamSynchronize(up_), "cudaStreamSynchronize (copies to device)");
        return down != CC_COLL_OK ? down : up;
    }

private:
    cudaStream_t down_ = nullptr;
    cudaStream_t up_ = nullptr;
    cudaEvent_t down_done_[kStagingSlots] = {};
    cudaEvent_t up_done_[kStagingSlots] = {};
};

}  // namespace

struct DeviceTransport::Impl {
    std::size_t chunk_bytes = 0;
    int device = -1;  // the device the copier and pinned memory belong to; -1: none yet
    std::unique_ptr<CudaStagingCopier> copier;
    std::unique_ptr<gpu::PinnedArray<unsigned char>> pinned;

    // The copier and at least `host_bytes` of pinned memory, on the calling
    // thread's current device (where the call's buffers are).
    cc_coll_status_t prepare(std::size_t host_bytes)
    {
        int current = 0;
        cc_coll_status_t st = cuda_status(cudaGetDevice(&current), "cudaGetDevice");
        if (st != CC_COLL_OK) return st;
        if (current != device || copier == nullptr) {
            copier.reset();
            pinned.reset();
            device = -1;
            auto fresh = std::unique_ptr<CudaStagingCopier>(new (std::nothrow) CudaStagingCopier());
            auto memory = std::unique_ptr<gpu::PinnedArray<unsigned char>>(new (std::nothrow)
                                                                                gpu::PinnedArray<unsigned char>());
            if (fresh == nullptr || memory == nullptr)
                return fail(CC_COLL_ERR_NO_MEMORY, "device transport: out of host memory");
            if ((st = fresh->init()) != CC_COLL_OK) return st;
            copier = std::move(fresh);
            pinned = std::move(memory);
            device = current;
        }
        return gpu::check(pinned->reserve(host_bytes), "device transport (pinned staging memory)");
    }
};

cc_coll_status_t DeviceTransport::create(DeviceTransportMode mode, std::size_t chunk_bytes,
                                         std::unique_ptr<DeviceTransport> *out)
{
    if (out == nullptr) return fail(CC_COLL_ERR_INVALID_ARG, "DeviceTransport::create: out is NULL");
    out->reset();
    if (chunk_bytes < sizeof(double) || chunk_bytes > std::numeric_limits<std::size_t>::max() / kStagingSlots)
        return fail(CC_COLL_ERR_INVALID_ARG, "DeviceTransport::create: staging chunk of %zu bytes is out of range",
                    chunk_bytes);
    std::unique_ptr<DeviceTransport> t(new (std::nothrow) DeviceTransport());
    if (t == nullptr || (t->impl_ = std::unique_ptr<Impl>(new (std::nothrow) Impl())) == nullptr)
        return fail(CC_COLL_ERR_NO_MEMORY, "DeviceTransport::create: out of host memory");
    t->mode_ = mode;
    t->impl_->chunk_bytes = chunk_bytes;
    *out = std::move(t);
    return CC_COLL_OK;
}

DeviceTransport::~DeviceTransport() = default;

cc_coll_status_t DeviceTransport::allreduce_sum(const void *send, void *recv, std::size_t count,
                                                cc_coll_dtype_t dtype, MPI_Comm comm)
{
    // F16/BF16 are summed by a user-defined MPI op, which runs on the host.
    if (mode_ == DeviceTransportMode::Direct && !is_half(dtype))
        return detail::allreduce_sum(send, recv, count, dtype, comm);
    if (count == 0) return CC_COLL_OK;
    cc_coll_status_t st = impl_->prepare(kStagingSlots * impl_->chunk_bytes);
    if (st != CC_COLL_OK) return st;
    return staged_allreduce_sum(*impl_->copier, impl_->pinned->data(), impl_->chunk_bytes, send, recv, count, dtype,
                                comm);
}

cc_coll_status_t DeviceTransport::allreduce_bor(void *buf, std::size_t bytes, MPI_Comm comm)
{
    if (mode_ == DeviceTransportMode::Direct) return detail::allreduce_bor(buf, bytes, comm);
    if (bytes == 0) return CC_COLL_OK;
    cc_coll_status_t st = impl_->prepare(bytes);
    if (st != CC_COLL_OK) return st;
    return staged_allreduce_bor(*impl_->copier, impl_->pinned->data(), buf, bytes, comm);
}

cc_coll_status_t DeviceTransport::allgather_bytes(const void *send, std::size_t bytes, void *recv, MPI_Comm comm)
{
    if (mode_ == DeviceTransportMode::Direct) return detail::allgather_bytes(send, bytes, recv, comm);
    if (bytes == 0) return CC_COLL_OK;
    int nranks = 0;
    cc_coll_status_t st = check_mpi(MPI_Comm_size(comm, &nranks), "MPI_Comm_size");
    if (st != CC_COLL_OK) return st;
    const std::size_t slots = static_cast<std::size_t>(nranks) + 1;  // own block, then everyone's
    if (bytes > std::numeric_limits<std::size_t>::max() / slots)
        return fail(CC_COLL_ERR_COUNT_OVERFLOW, "allgather_bytes: %zu bytes from each of %d ranks overflow", bytes,
                    nranks);
    if ((st = impl_->prepare(slots * bytes)) != CC_COLL_OK) return st;
    return staged_allgather_bytes(*impl_->copier, impl_->pinned->data(), send, bytes, recv, comm);
}

cc_coll_status_t DeviceTransport::alltoall_bytes(const void *send, std::size_t bytes_per_rank, void *recv,
                                                 MPI_Comm comm)
{
    if (mode_ == DeviceTransportMode::Direct) return detail::alltoall_bytes(send, bytes_per_rank, recv, comm);
    int nranks = 0;
    cc_coll_status_t st = check_mpi(MPI_Comm_size(comm, &nranks), "MPI_Comm_size");
    if (st != CC_COLL_OK || bytes_per_rank == 0) return st;
    const std::size_t slots = 2 * static_cast<std::size_t>(nranks);  // the sent blocks, then the received
    if (bytes_per_rank > std::numeric_limits<std::size_t>::max() / slots)
        return fail(CC_COLL_ERR_COUNT_OVERFLOW, "alltoall_bytes: %zu bytes to each of %d ranks overflow",
                    bytes_per_rank, nranks);
    if ((st = impl_->prepare(slots * bytes_per_rank)) != CC_COLL_OK) return st;
    return staged_alltoall_bytes(*impl_->copier, impl_->pinned->data(), send, bytes_per_rank, nranks, recv, comm);
}

}  // namespace cc_coll::detail
