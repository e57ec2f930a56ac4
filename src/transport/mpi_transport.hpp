// The MPI transport: the only place that issues MPI data-movement calls.
// It knows element types and how MPI sums them; it knows nothing of
// compression.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

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

// Reduce-scatter of recvcount x P elements, like MPI_Reduce_scatter_block
// with the element-wise sum of allreduce_sum(). In place when send == recv
// (recv then holds recvcount x P elements on entry).
cc_coll_status_t reduce_scatter_sum(const void *send, void *recv, std::size_t recvcount, cc_coll_dtype_t dtype,
                                    MPI_Comm comm);

// Every rank sends scounts[r] bytes at sdispls[r] of `send` to rank r and
// receives rcounts[r] bytes from rank r at rdispls[r] of `recv`
// (MPI_Alltoallv on MPI_BYTE).
cc_coll_status_t alltoallv_bytes(const void *send, const int *scounts, const int *sdispls, void *recv,
                                 const int *rcounts, const int *rdispls, MPI_Comm comm);

// Allgather of counts[r] bytes from each rank r into `recv` at displs[r]
// bytes (MPI_Allgatherv on MPI_BYTE), in place: this rank's block already
// lies at its displacement in `recv`.
cc_coll_status_t allgatherv_bytes_in_place(void *recv, const int *counts, const int *displs, MPI_Comm comm);

// Bitwise OR of `bytes` bytes over the ranks, in place (MPI_UINT8_T, MPI_BOR).
cc_coll_status_t allreduce_bor(void *buf, std::size_t bytes, MPI_Comm comm);

// Reduce-scatter of bytes_per_rank x P bytes with MPI_BOR on MPI_UINT8_T.
cc_coll_status_t reduce_scatter_bor(const void *send, void *recv, std::size_t bytes_per_rank, MPI_Comm comm);

// The element-wise maximum of `count` unsigned 64-bit values over the
// ranks, in place (MPI_Allreduce, MPI_UINT64_T, MPI_MAX).
cc_coll_status_t allreduce_max_u64(std::uint64_t *values, MPI_Comm comm, int count = 1);

// Every rank sends block r (bytes_per_rank bytes) of `send` to rank r and
// receives rank r's block for it at block r of `recv` (MPI_Alltoall).
// The element-wise maximum of `count` doubles over comm, in place.
cc_coll_status_t allreduce_max_f64(double *values, int count, MPI_Comm comm);

// A duplicate of `comm` whose errors return (collective on comm): a
// communicator for measurements that must not meet the caller's messages.
// The caller frees it.
cc_coll_status_t dup_comm(MPI_Comm comm, MPI_Comm *out);

cc_coll_status_t alltoall_bytes(const void *send, std::size_t bytes_per_rank, void *recv, MPI_Comm comm);

// Every rank's `bytes` bytes of `send`, in rank order, into `recv`
// (P x bytes), with MPI_Allgather on MPI_BYTE. bytes must fit an int.
cc_coll_status_t allgather_bytes(const void *send, std::size_t bytes, void *recv, MPI_Comm comm);

// The same (and alltoall_bytes) started, not finished (a pipelined
// algorithm's messages): *req
// completes with wait_request; test_requests between (on the thread that
// computes) lets MPI move them meanwhile.
cc_coll_status_t start_allgather_bytes(const void *send, std::size_t bytes, void *recv, MPI_Comm comm,
                                       MPI_Request *req);
cc_coll_status_t start_alltoall_bytes(const void *send, std::size_t bytes_per_rank, void *recv, MPI_Comm comm,
                                      MPI_Request *req);
// MPI_Testall of the first `count` requests (completed ones become
// MPI_REQUEST_NULL); errors surface in wait_request.
void test_requests(MPI_Request *reqs, std::size_t count);
// Waits for *req (inside a request's fiber: suspending it between tests).
cc_coll_status_t wait_request(MPI_Request *req, const char *what);

// Waits, on the way out, for every request still in flight in the vectors
// it watches (a pipelined algorithm that fails half-way: MPI reads and
// writes the buffers until its requests complete); their errors are
// dropped, the call's own failure is what it returns.
class RequestsDrain {
public:
    RequestsDrain(std::vector<MPI_Request> *a, std::vector<MPI_Request> *b, const char *what)
        : a_(a), b_(b), what_(what)
    {
    }
    RequestsDrain(const RequestsDrain &) = delete;
    RequestsDrain &operator=(const RequestsDrain &) = delete;
    ~RequestsDrain()
    {
        for (std::vector<MPI_Request> *v : {a_, b_})
            if (v != nullptr)
                for (MPI_Request &q : *v) (void)wait_request(&q, what_);
    }

private:
    std::vector<MPI_Request> *a_, *b_;
    const char *what_;
};

}  // namespace cc_coll::detail
