// Device buffers to MPI: the transport's half for CUDA memory. Knows nothing
// of compression. Two modes:
//  - Direct: device pointers go straight to MPI (a CUDA-aware MPI, as
//    MPIX_Query_cuda_support() reports). F16/BF16 sums still go staged: their
//    MPI reduction is a user-defined op that runs on the host.
//  - Staged: data moves through pinned host buffers in chunks of
//    CC_COLL_CUDA_STAGING_CHUNK bytes. A dense sum is a pipeline: while chunk
//    c is being summed by MPI on the host, chunk c+1 is copied down and chunk
//    c-1 copied back up, on the transport's own copy streams.
// The caller has finished (synchronised) the work that produces the device
// data; every function returns once the result is in device memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include <mpi.h>

#include "cc_coll.h"
#include "core/config.hpp"

namespace cc_coll::detail {

enum class DeviceTransportMode { Direct, Staged };

// The mode of CC_COLL_CUDA_TRANSPORT for this MPI: Auto resolves to Direct
// when MPI reports CUDA-aware support, else Staged. Direct without a
// CUDA-aware MPI is CC_COLL_ERR_NOT_SUPPORTED, saying so.
cc_coll_status_t resolve_device_transport(CudaTransport setting, DeviceTransportMode *out);

const char *device_transport_name(DeviceTransportMode mode);  // "direct", "staged"

// What a staged transfer needs from the copy engine. The CUDA implementation
// uses cudaMemcpyAsync on copy streams and events; tests substitute a host
// implementation (memcpy) to exercise the chunk pipeline without a GPU.
class StagingCopier {
public:
    virtual ~StagingCopier() = default;
    // Starts copying `bytes` from device `src` into host `dst` as slot `slot`.
    virtual cc_coll_status_t to_host(void *dst, const void *src, std::size_t bytes, int slot) = 0;
    // Starts copying `bytes` from host `src` to device `dst` as slot `slot`.
    virtual cc_coll_status_t to_device(void *dst, const void *src, std::size_t bytes, int slot) = 0;
    // Waits until slot `slot`'s last to_host copy has landed.
    virtual cc_coll_status_t wait_to_host(int slot) = 0;
    // Waits until slot `slot`'s last to_device copy has finished reading its
    // host buffer.
    virtual cc_coll_status_t wait_to_device(int slot) = 0;
    // Waits for every copy started so far.
    virtual cc_coll_status_t wait_all() = 0;
};

// The staged pipelines, over any copier and any host staging memory: `host`
// holds kStagingSlots x chunk_bytes bytes. Exposed for tests.
constexpr int kStagingSlots = 3;
// recv (device) = sum over ranks of send (device), count elements of dtype,
// in chunks of chunk_bytes (rounded down to whole elements). In place when
// send == recv. Results are bit-identical to allreduce_sum on host buffers
// with the same data for F32/F64 when every rank uses the same chunk size
// (each chunk is one MPI_Allreduce).
cc_coll_status_t staged_allreduce_sum(StagingCopier &copier, unsigned char *host, std::size_t chunk_bytes,
                                      const void *send, void *recv, std::size_t count, cc_coll_dtype_t dtype,
                                      MPI_Comm comm);

// The device data paths of one communicator: owns the pinned staging memory,
// the copy streams and events. Not thread-safe.
class DeviceTransport {
public:
    static cc_coll_status_t create(DeviceTransportMode mode, std::size_t chunk_bytes,
                                   std::unique_ptr<DeviceTransport> *out);
    ~DeviceTransport();
    DeviceTransport(const DeviceTransport &) = delete;
    DeviceTransport &operator=(const DeviceTransport &) = delete;

    DeviceTransportMode mode() const { return mode_; }

    // Element-wise sum over `comm` of count elements (device), like
    // allreduce_sum. In place when send == recv.
    cc_coll_status_t allreduce_sum(const void *send, void *recv, std::size_t count, cc_coll_dtype_t dtype,
                                   MPI_Comm comm);
    // Bitwise OR of `bytes` bytes (device) over the ranks, in place.
    cc_coll_status_t allreduce_bor(void *buf, std::size_t bytes, MPI_Comm comm);
    // Every rank's `bytes` bytes of `send` (device), in rank order, into
    // `recv` (device, P x bytes).
    cc_coll_status_t allgather_bytes(const void *send, std::size_t bytes, void *recv, MPI_Comm comm);

    struct Impl;

private:
    DeviceTransport() = default;
    DeviceTransportMode mode_ = DeviceTransportMode::Staged;
    std::unique_ptr<Impl> impl_;
};

}  // namespace cc_coll::detail
