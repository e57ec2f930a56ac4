#include "transport/mpi_transport.hpp"

#include "progress/engine.hpp"
#include "transport/transport.hpp"

#include <climits>
#include <cstring>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>


#include "core/dtype.hpp"
#include "core/error.hpp"

namespace cc_coll::detail {

cc_coll_status_t check_mpi(int rc, const char *call)
{
    if (rc == MPI_SUCCESS) return CC_COLL_OK;
    char text[MPI_MAX_ERROR_STRING] = {0};
    int len = 0, cls = 0;
    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) text[0] = '\0';
    if (MPI_Error_class(rc, &cls) != MPI_SUCCESS) cls = rc;
    return fail(CC_COLL_ERR_MPI, "%s failed: error code %d (class %d): %s", call, rc, cls, text);
}

namespace {

struct HalfOps {
    MPI_Op f16 = MPI_OP_NULL;
    MPI_Op bf16 = MPI_OP_NULL;
    int rc = MPI_SUCCESS;
    const char *failed_call = nullptr;
};

void reduce_f16(void *in, void *inout, int *len, MPI_Datatype *) { sum_f16(in, inout, static_cast<std::size_t>(*len)); }
void reduce_bf16(void *in, void *inout, int *len, MPI_Datatype *) { sum_bf16(in, inout, static_cast<std::size_t>(*len)); }

// Frees the user ops when MPI_Finalize destroys MPI_COMM_SELF's attributes.
int free_half_ops(MPI_Comm, int, void *attr, void *)
{
    auto *ops = static_cast<HalfOps *>(attr);
    if (ops->f16 != MPI_OP_NULL) MPI_Op_free(&ops->f16);
    if (ops->bf16 != MPI_OP_NULL) MPI_Op_free(&ops->bf16);
    return MPI_SUCCESS;
}

HalfOps &half_ops()
{
    static HalfOps ops;
    static std::once_flag once;
    std::call_once(once, [] {
        if ((ops.rc = MPI_Op_create(reduce_f16, 1, &ops.f16)) != MPI_SUCCESS) {
            ops.failed_call = "MPI_Op_create (f16 sum)";
            return;
        }
        if ((ops.rc = MPI_Op_create(reduce_bf16, 1, &ops.bf16)) != MPI_SUCCESS) {
            ops.failed_call = "MPI_Op_create (bf16 sum)";
            return;
        }
        int keyval = MPI_KEYVAL_INVALID;
        if ((ops.rc = MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, free_half_ops, &keyval, nullptr)) !=
            MPI_SUCCESS) {
            ops.failed_call = "MPI_Comm_create_keyval";
            return;
        }
        if ((ops.rc = MPI_Comm_set_attr(MPI_COMM_SELF, keyval, &ops)) != MPI_SUCCESS)
            ops.failed_call = "MPI_Comm_set_attr (MPI_COMM_SELF)";
        // The attribute keeps the key alive: MPI releases it when it deletes
        // the attribute (at MPI_Finalize), instead of never.
        MPI_Comm_free_keyval(&keyval);
    });
    return ops;
}

}  // namespace

namespace {

// The MPI datatype and op that sum `dtype` (user ops for the 16-bit formats).
cc_coll_status_t sum_type_op(cc_coll_dtype_t dtype, MPI_Datatype *type, MPI_Op *op)
{
    *op = MPI_SUM;
    switch (dtype) {
    case CC_COLL_F32: *type = MPI_FLOAT; break;
    case CC_COLL_F64: *type = MPI_DOUBLE; break;
    case CC_COLL_F16:
    case CC_COLL_BF16: {
        HalfOps &ops = half_ops();
        if (ops.failed_call != nullptr) return check_mpi(ops.rc, ops.failed_call);
        *type = MPI_UINT16_T;
        *op = dtype == CC_COLL_F16 ? ops.f16 : ops.bf16;
        break;
    }
    }
    return CC_COLL_OK;
}

cc_coll_status_t check_int_count(std::size_t count, const char *what)
{
    if (count > static_cast<std::size_t>(INT_MAX))
        return fail(CC_COLL_ERR_COUNT_OVERFLOW, "%s: count %zu exceeds INT_MAX", what, count);
    return CC_COLL_OK;
}

// One collective: the blocking MPI call, or inside a non-blocking request
// (progress/engine.hpp) its non-blocking form, awaited by suspending the
// request so that the thread driving it goes on with others.
template <typename Blocking, typename Start>
cc_coll_status_t run_mpi(const char *what, Blocking blocking, Start start)
{
    if (!progress::in_request()) return check_mpi(blocking(), what);
    MPI_Request req = MPI_REQUEST_NULL;
    int rc = start(&req);
    if (rc == MPI_SUCCESS) rc = progress::await(&req);
    return check_mpi(rc, what);
}

}  // namespace

namespace {

#if defined(OPEN_MPI)
// Open MPI's MPI_Iallreduce (coll/libnbc) sums an in-place buffer, and any
// buffer on fewer than 4 ranks, with a binomial tree unless told otherwise
// (--mca coll_libnbc_iallreduce_algorithm): the whole buffer goes up to
// rank 0 and back down, twice the time of a reduce-scatter + allgather on
// two ranks. From kSplitSumBytes on (libnbc's own bound for its tree), a
// request sums as a reduce-scatter (MPI_Ialltoallv of the P blocks, each
// rank adding the P pieces of its block in the order of libnbc's binomial
// tree, so the bits are those the tree gives) and an MPI_Iallgatherv.
constexpr std::size_t kSplitSumBytes = 64 * 1024;

cc_coll_status_t split_allreduce_sum(const void *send, void *recv, std::size_t count, std::size_t es,
                                     MPI_Datatype type, MPI_Op op, MPI_Comm comm, int p, int rank)
{
    std::vector<int> counts(p), displs(p), scounts(p), rcounts(p), rdispls(p);
    for (int r = 0; r < p; ++r) {
        const std::size_t lo = count * r / p, hi = count * (r + 1) / p;
        counts[r] = static_cast<int>((hi - lo) * es);
        displs[r] = static_cast<int>(lo * es);
    }
    // Rank r's piece of this rank's block lands at slot r of `others` (none
    // from itself: its own piece stays in recv).
    const std::size_t mine = static_cast<std::size_t>(counts[rank]);
    for (int r = 0; r < p; ++r) {
        scounts[r] = r == rank ? 0 : counts[r];
        rcounts[r] = r == rank ? 0 : counts[rank];
        rdispls[r] = static_cast<int>(mine * r);
    }
    unsigned char *const own = static_cast<unsigned char *>(recv) + displs[rank];
    if (send != recv) std::memcpy(own, static_cast<const unsigned char *>(send) + displs[rank], mine);
    std::unique_ptr<unsigned char[]> others(new unsigned char[mine * p]);
    CC_COLL_TRY(alltoallv_bytes(send, scounts.data(), displs.data(), others.get(), rcounts.data(), rdispls.data(),
                                comm));
    // The binomial tree: in round `step`, piece v += piece v + step. The sum
    // of two is commutative (MPI_SUM, and the 16-bit ops), so it goes into
    // whichever of the two is this rank's own block: the total ends there.
    std::vector<unsigned char *> piece(p);
    for (int r = 0; r < p; ++r) piece[r] = r == rank ? own : others.get() + mine * r;
    const int n = static_cast<int>(mine / es);
    for (int step = 1; step < p; step *= 2)
        for (int v = 0; v + step < p; v += 2 * step) {
            unsigned char *in = piece[v + step], *inout = piece[v];
            if (in == own) std::swap(in, inout);
            CC_COLL_TRY(check_mpi(MPI_Reduce_local(in, inout, n, type, op), "MPI_Reduce_local"));
            piece[v] = inout;
        }
    return allgatherv_bytes_in_place(recv, counts.data(), displs.data(), comm);
}
#endif

}  // namespace

cc_coll_status_t allreduce_sum(const void *send, void *recv, std::size_t count, cc_coll_dtype_t dtype,
                               MPI_Comm comm)
{
    MPI_Datatype type = MPI_DATATYPE_NULL;
    MPI_Op op = MPI_SUM;
    cc_coll_status_t st = check_int_count(count, "allreduce_sum");
    if (st != CC_COLL_OK || (st = sum_type_op(dtype, &type, &op)) != CC_COLL_OK) return st;
#if defined(OPEN_MPI)
    const std::size_t es = dtype_size(dtype);
    if (progress::in_request() && count * es >= kSplitSumBytes && count * es <= static_cast<std::size_t>(INT_MAX)) {
        int p = 1, rank = 0;
        CC_COLL_TRY(check_mpi(MPI_Comm_size(comm, &p), "MPI_Comm_size"));
        CC_COLL_TRY(check_mpi(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank"));
        if (p > 1 && count >= static_cast<std::size_t>(p))
            return split_allreduce_sum(send, recv, count, es, type, op, comm, p, rank);
    }
#endif
    const void *sendarg = send == recv ? MPI_IN_PLACE : send;
    const int n = static_cast<int>(count);
    return run_mpi(
        "MPI_Allreduce", [&] { return MPI_Allreduce(sendarg, recv, n, type, op, comm); },
        [&](MPI_Request *r) { return MPI_Iallreduce(sendarg, recv, n, type, op, comm, r); });
}

cc_coll_status_t reduce_scatter_sum(const void *send, void *recv, std::size_t recvcount, cc_coll_dtype_t dtype,
                                    MPI_Comm comm)
{
    MPI_Datatype type = MPI_DATATYPE_NULL;
    MPI_Op op = MPI_SUM;
    cc_coll_status_t st = check_int_count(recvcount, "reduce_scatter_sum");
    if (st != CC_COLL_OK || (st = sum_type_op(dtype, &type, &op)) != CC_COLL_OK) return st;
    const void *sendarg = send == recv ? MPI_IN_PLACE : send;
    const int n = static_cast<int>(recvcount);
    return run_mpi(
        "MPI_Reduce_scatter_block", [&] { return MPI_Reduce_scatter_block(sendarg, recv, n, type, op, comm); },
        [&](MPI_Request *r) { return MPI_Ireduce_scatter_block(sendarg, recv, n, type, op, comm, r); });
}

cc_coll_status_t alltoallv_bytes(const void *send, const int *scounts, const int *sdispls, void *recv,
                                 const int *rcounts, const int *rdispls, MPI_Comm comm)
{
    return run_mpi(
        "MPI_Alltoallv",
        [&] { return MPI_Alltoallv(send, scounts, sdispls, MPI_BYTE, recv, rcounts, rdispls, MPI_BYTE, comm); },
        [&](MPI_Request *r) {
            return MPI_Ialltoallv(send, scounts, sdispls, MPI_BYTE, recv, rcounts, rdispls, MPI_BYTE, comm, r);
        });
}

cc_coll_status_t allgatherv_bytes_in_place(void *recv, const int *counts, const int *displs, MPI_Comm comm)
{
    return run_mpi(
        "MPI_Allgatherv",
        [&] { return MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, counts, displs, MPI_BYTE, comm); },
        [&](MPI_Request *r) {
            return MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, counts, displs, MPI_BYTE, comm, r);
        });
}

cc_coll_status_t allreduce_bor(void *buf, std::size_t bytes, MPI_Comm comm)
{
    cc_coll_status_t st = check_int_count(bytes, "allreduce_bor");
    if (st != CC_COLL_OK) return st;
    const int n = static_cast<int>(bytes);
    return run_mpi(
        "MPI_Allreduce (MPI_BOR)", [&] { return MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_UINT8_T, MPI_BOR, comm); },
        [&](MPI_Request *r) { return MPI_Iallreduce(MPI_IN_PLACE, buf, n, MPI_UINT8_T, MPI_BOR, comm, r); });
}

cc_coll_status_t reduce_scatter_bor(const void *send, void *recv, std::size_t bytes_per_rank, MPI_Comm comm)
{
    cc_coll_status_t st = check_int_count(bytes_per_rank, "reduce_scatter_bor");
    if (st != CC_COLL_OK) return st;
    const int n = static_cast<int>(bytes_per_rank);
    return run_mpi(
        "MPI_Reduce_scatter_block (MPI_BOR)",
        [&] { return MPI_Reduce_scatter_block(send, recv, n, MPI_UINT8_T, MPI_BOR, comm); },
        [&](MPI_Request *r) { return MPI_Ireduce_scatter_block(send, recv, n, MPI_UINT8_T, MPI_BOR, comm, r); });
}

cc_coll_status_t allreduce_max_u64(std::uint64_t *values, MPI_Comm comm, int count)
{
    return run_mpi(
        "MPI_Allreduce (MPI_MAX)",
        [&] { return MPI_Allreduce(MPI_IN_PLACE, values, count, MPI_UINT64_T, MPI_MAX, comm); },
        [&](MPI_Request *r) { return MPI_Iallreduce(MPI_IN_PLACE, values, count, MPI_UINT64_T, MPI_MAX, comm, r); });
}

cc_coll_status_t allreduce_max_f64(double *values, int count, MPI_Comm comm)
{
    return run_mpi(
        "MPI_Allreduce (MPI_MAX)",
        [&] { return MPI_Allreduce(MPI_IN_PLACE, values, count, MPI_DOUBLE, MPI_MAX, comm); },
        [&](MPI_Request *r) { return MPI_Iallreduce(MPI_IN_PLACE, values, count, MPI_DOUBLE, MPI_MAX, comm, r); });
}

cc_coll_status_t dup_comm(MPI_Comm comm, MPI_Comm *out)
{
    *out = MPI_COMM_NULL;
    CC_COLL_TRY(check_mpi(MPI_Comm_dup(comm, out), "MPI_Comm_dup"));
    MPI_Comm_set_errhandler(*out, MPI_ERRORS_RETURN);
    return CC_COLL_OK;
}

cc_coll_status_t alltoall_bytes(const void *send, std::size_t bytes_per_rank, void *recv, MPI_Comm comm)
{
    cc_coll_status_t st = check_int_count(bytes_per_rank, "alltoall_bytes");
    if (st != CC_COLL_OK) return st;
    const int n = static_cast<int>(bytes_per_rank);
    return run_mpi(
        "MPI_Alltoall", [&] { return MPI_Alltoall(send, n, MPI_BYTE, recv, n, MPI_BYTE, comm); },
        [&](MPI_Request *r) { return MPI_Ialltoall(send, n, MPI_BYTE, recv, n, MPI_BYTE, comm, r); });
}

cc_coll_status_t allgather_bytes(const void *send, std::size_t bytes, void *recv, MPI_Comm comm)
{
    if (bytes > static_cast<std::size_t>(INT_MAX))
        return fail(CC_COLL_ERR_COUNT_OVERFLOW, "allgather_bytes: %zu bytes exceed INT_MAX", bytes);
    const int n = static_cast<int>(bytes);
    return run_mpi(
        "MPI_Allgather", [&] { return MPI_Allgather(send, n, MPI_BYTE, recv, n, MPI_BYTE, comm); },
        [&](MPI_Request *r) { return MPI_Iallgather(send, n, MPI_BYTE, recv, n, MPI_BYTE, comm, r); });
}

cc_coll_status_t start_allgather_bytes(const void *send, std::size_t bytes, void *recv, MPI_Comm comm,
                                       MPI_Request *req)
{
    if (bytes > static_cast<std::size_t>(INT_MAX))
        return fail(CC_COLL_ERR_COUNT_OVERFLOW, "start_allgather_bytes: %zu bytes exceed INT_MAX", bytes);
    const int n = static_cast<int>(bytes);
    return check_mpi(MPI_Iallgather(send, n, MPI_BYTE, recv, n, MPI_BYTE, comm, req), "MPI_Iallgather");
}

cc_coll_status_t start_alltoall_bytes(const void *send, std::size_t bytes_per_rank, void *recv, MPI_Comm comm,
                                      MPI_Request *req)
{
    if (bytes_per_rank > static_cast<std::size_t>(INT_MAX))
        return fail(CC_COLL_ERR_COUNT_OVERFLOW, "start_alltoall_bytes: %zu bytes per rank exceed INT_MAX",
                    bytes_per_rank);
    const int n = static_cast<int>(bytes_per_rank);
    return check_mpi(MPI_Ialltoall(send, n, MPI_BYTE, recv, n, MPI_BYTE, comm, req), "MPI_Ialltoall");
}

void test_requests(MPI_Request *reqs, std::size_t count)
{
    int done = 0;
    if (count > 0) MPI_Testall(static_cast<int>(count), reqs, &done, MPI_STATUSES_IGNORE);
}

cc_coll_status_t wait_request(MPI_Request *req, const char *what)
{
    if (*req == MPI_REQUEST_NULL) return CC_COLL_OK;
    return check_mpi(progress::await(req), what);
}

cc_coll_status_t HostTransport::allreduce_sum(const void *send, void *recv, std::size_t count, cc_coll_dtype_t dtype,
                                              MPI_Comm comm)
{
    return detail::allreduce_sum(send, recv, count, dtype, comm);
}

cc_coll_status_t HostTransport::allreduce_bor(void *buf, std::size_t bytes, MPI_Comm comm)
{
    return detail::allreduce_bor(buf, bytes, comm);
}

cc_coll_status_t HostTransport::allgather_bytes(const void *send, std::size_t bytes, void *recv, MPI_Comm comm)
{
    return detail::allgather_bytes(send, bytes, recv, comm);
}

}  // namespace cc_coll::detail

namespace cc_coll::detail {

cc_coll_status_t HostTransport::alltoall_bytes(const void *send, std::size_t bytes_per_rank, void *recv, MPI_Comm comm)
{
    return detail::alltoall_bytes(send, bytes_per_rank, recv, comm);
}

}  // namespace cc_coll::detail
