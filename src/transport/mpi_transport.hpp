// The MPI transport: the only place that issues MPI data-movement calls.
// It knows element types and how MPI sums them; it knows nothing of
// compression.
#pragma once

#include <cstddef>

#include <mpi.h>

#include "cc_coll.h"

namespace cc_coll::detail {

// CC_COLL_OK when rc == MPI_SUCCESS, else CC_COLL_ERR_MPI with `call`, the
// MPI error class and MPI's own error string in the message.
cc_coll_status_t check_mpi(int rc, const char *call);

// Element-wise sum of `count` elements over `comm` into `recv`
// (MPI_Allreduce). In place when send == recv. F32/F64 use MPI_FLOAT /
// MPI_DOUBLE with MPI_SUM; F16/BF16 use 16-bit elements with a commutative
// user-defined op that adds in binary32 and rounds to nearest even.
cc_coll_status_t allreduce_sum(const void *send, void *recv, std::size_t count, cc_coll_dtype_t dtype,
                               MPI_Comm comm);

// Every rank's `bytes` bytes of `send`, in rank order, into `recv`
// (P x bytes), with MPI_Allgather on MPI_BYTE. bytes must fit an int.
cc_coll_status_t allgather_bytes(const void *send, std::size_t bytes, void *recv, MPI_Comm comm);

// True when `ptr` is device (or managed) memory; false for host memory and
// in builds without CUDA.
bool is_device_memory(const void *ptr);

}  // namespace cc_coll::detail
