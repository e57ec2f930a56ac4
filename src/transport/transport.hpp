// The one interface the collective algorithms move data through. Two
// implementations: HostTransport (host memory, MPI calls of
// mpi_transport.hpp) and DeviceTransport (device memory, CUDA-aware MPI or
// staged through pinned host memory, device_transport.hpp). A transport
// knows element types and MPI; it knows nothing of compression.
#pragma once

#include <cstddef>

#include <mpi.h>

#include "cc_coll.h"

namespace cc_coll::detail {

class Transport {
public:
    virtual ~Transport() = default;
    // Element-wise sum of `count` elements over the ranks into `recv`, in
    // place when send == recv (see allreduce_sum in mpi_transport.hpp).
    virtual cc_coll_status_t allreduce_sum(const void *send, void *recv, std::size_t count, cc_coll_dtype_t dtype,
                                           MPI_Comm comm) = 0;
    // Bitwise OR of `bytes` bytes over the ranks, in place.
    virtual cc_coll_status_t allreduce_bor(void *buf, std::size_t bytes, MPI_Comm comm) = 0;
    // Every rank's `bytes` bytes of `send`, in rank order, into `recv`
    // (P x bytes).
    virtual cc_coll_status_t allgather_bytes(const void *send, std::size_t bytes, void *recv, MPI_Comm comm) = 0;
    // Block r of `send` (P blocks of bytes_per_rank) to rank r; block r of
    // `recv` from rank r.
    virtual cc_coll_status_t alltoall_bytes(const void *send, std::size_t bytes_per_rank, void *recv,
                                            MPI_Comm comm) = 0;
};

// Host buffers: the MPI calls themselves.
class HostTransport final : public Transport {
public:
    cc_coll_status_t allreduce_sum(const void *send, void *recv, std::size_t count, cc_coll_dtype_t dtype,
                                   MPI_Comm comm) override;
    cc_coll_status_t allreduce_bor(void *buf, std::size_t bytes, MPI_Comm comm) override;
    cc_coll_status_t allgather_bytes(const void *send, std::size_t bytes, void *recv, MPI_Comm comm) override;
    cc_coll_status_t alltoall_bytes(const void *send, std::size_t bytes_per_rank, void *recv, MPI_Comm comm) override;
};

}  // namespace cc_coll::detail
