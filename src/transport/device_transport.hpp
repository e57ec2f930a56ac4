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
#include "transport/transport.hpp"

namespace cc_coll::detail {

enum class DeviceTransportMode { Direct, Staged };

// True when the MPI library reports CUDA-aware support at run time
// (MPIX_Query_cuda_support() where <mpi-ext.h> declares it), else false.
bool mpi_reports_cuda_aware();

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

// The staged pipelines, over any copier and any host staging memory.
// Exposed for tests. Each returns once every copy it started has finished,
// also when it fails: a copier's or MPI's failure is returned as is, after
// wait_all().
constexpr int kStagingSlots = 3;
// recv (device) = sum over ranks of send (device), count elements of dtype.
// `host` holds kStagingSlots x chunk_bytes bytes. The data moves in chunks
// of chunk_bytes rounded down to whole elements (a chunk_bytes smaller than
// one element is CC_COLL_ERR_INVALID_ARG); slot c % kStagingSlots carries
// chunk c. While MPI sums chunk c on the host, chunk c+1 is copied down and
// chunk c-1 copied up. In place when send == recv.
// What is guaranteed: chunk c is one allreduce_sum (one MPI_Allreduce, in
// place on the host slot) of the chunk's elements, chunks in order, so the
// result is bit-identical to allreduce_sum applied chunk by chunk, in place,
// to host buffers holding the same data with the same chunk size, for every
// dtype, provided MPI returns the same result for the same call (the MPI
// standard recommends this; Open MPI's choice of algorithm depends only on
// the count, datatype and communicator). Every rank must pass the same
// chunk_bytes: each chunk is a collective call. Against one allreduce_sum of
// the whole buffer the result is bit-identical when every sum is exact (such
// as integer-valued data well inside the format's precision) or with at most
// 2 ranks (a single rounded addition is commutative); with 3 or more ranks
// and inexact sums it may differ in the last bits, because MPI may combine
// the ranks' values in an order that depends on the message size (recursive
// doubling for small messages, a ring for large ones).
cc_coll_status_t staged_allreduce_sum(StagingCopier &copier, unsigned char *host, std::size_t chunk_bytes,
                                      const void *send, void *recv, std::size_t count, cc_coll_dtype_t dtype,
                                      MPI_Comm comm);
// Bitwise OR over the ranks of `bytes` bytes of device `buf`, in place:
// copied down into `host` (at least `bytes` bytes, slot 0), allreduce_bor on
// the host, copied back up.
cc_coll_status_t staged_allreduce_bor(StagingCopier &copier, unsigned char *host, void *buf, std::size_t bytes,
                                      MPI_Comm comm);
// Every rank's `bytes` bytes of device `send`, in rank order, into device
// `recv` (P x bytes): `send` is copied down into the first `bytes` bytes of
// `host`, allgather_bytes gathers into the P x bytes after them, and those
// are copied up. `host` holds at least (P + 1) x bytes.
// The same for alltoall: P x bytes_per_rank to `host`, exchanged into the
// P x bytes_per_rank after them, then to the device.
cc_coll_status_t staged_alltoall_bytes(StagingCopier &copier, unsigned char *host, const void *send,
                                       std::size_t bytes_per_rank, int nranks, void *recv, MPI_Comm comm);
cc_coll_status_t staged_allgather_bytes(StagingCopier &copier, unsigned char *host, const void *send,
                                        std::size_t bytes, void *recv, MPI_Comm comm);

// The device data paths of one communicator: owns the pinned staging memory,
// the copy streams and events. Device buffers are on the calling thread's
// current device; the streams, events and pinned memory are made on first
// use on that device, and made again on the new current device when a later
// call finds another one current. Not thread-safe. Built only with CUDA.
class DeviceTransport final : public Transport {
public:
    // No CUDA call here: resources come on first use. chunk_bytes (the
    // staged chunk, CC_COLL_CUDA_STAGING_CHUNK) must be at least 8 bytes, one
    // element of every dtype.
    static cc_coll_status_t create(DeviceTransportMode mode, std::size_t chunk_bytes,
                                   std::unique_ptr<DeviceTransport> *out);
    ~DeviceTransport() override;
    DeviceTransport(const DeviceTransport &) = delete;
    DeviceTransport &operator=(const DeviceTransport &) = delete;

    DeviceTransportMode mode() const { return mode_; }

    // Element-wise sum over `comm` of count elements (device), like
    // allreduce_sum. In place when send == recv.
    cc_coll_status_t allreduce_sum(const void *send, void *recv, std::size_t count, cc_coll_dtype_t dtype,
                                   MPI_Comm comm) override;
    // Bitwise OR of `bytes` bytes (device) over the ranks, in place. Staged:
    // in one piece, the pinned memory grown to fit.
    cc_coll_status_t allreduce_bor(void *buf, std::size_t bytes, MPI_Comm comm) override;
    // Every rank's `bytes` bytes of `send` (device), in rank order, into
    // `recv` (device, P x bytes). Staged: in one piece, the pinned memory
    // grown to fit.
    cc_coll_status_t allgather_bytes(const void *send, std::size_t bytes, void *recv, MPI_Comm comm) override;
    cc_coll_status_t alltoall_bytes(const void *send, std::size_t bytes_per_rank, void *recv, MPI_Comm comm) override;

    struct Impl;

private:
    DeviceTransport() = default;
    DeviceTransportMode mode_ = DeviceTransportMode::Staged;
    std::unique_ptr<Impl> impl_;
};

}  // namespace cc_coll::detail
