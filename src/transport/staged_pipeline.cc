// The staged device transport's pipelines over an abstract copy engine, and
// the choice between direct and staged. No CUDA here: built in every build,
// so the chunk pipeline is tested with a host copy engine on any machine.
#include <algorithm>
#include <cstddef>

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "transport/device_transport.hpp"
#include "transport/mpi_transport.hpp"

#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif

namespace cc_coll::detail {

bool mpi_reports_cuda_aware()
{
#if defined(MPIX_CUDA_AWARE_SUPPORT)
    return MPIX_Query_cuda_support() != 0;
#else
    return false;
#endif
}

cc_coll_status_t resolve_device_transport(CudaTransport setting, DeviceTransportMode *out)
{
    if (out == nullptr) return fail(CC_COLL_ERR_INVALID_ARG, "resolve_device_transport: out is NULL");
    switch (setting) {
    case CudaTransport::Auto:
        *out = mpi_reports_cuda_aware() ? DeviceTransportMode::Direct : DeviceTransportMode::Staged;
        return CC_COLL_OK;
    case CudaTransport::Direct:
        if (!mpi_reports_cuda_aware())
            return fail(CC_COLL_ERR_NOT_SUPPORTED,
                        "CC_COLL_CUDA_TRANSPORT=direct needs a CUDA-aware MPI, and this MPI reports no CUDA "
                        "support (MPIX_Query_cuda_support); use staged or auto");
        *out = DeviceTransportMode::Direct;
        return CC_COLL_OK;
    case CudaTransport::Staged:
        *out = DeviceTransportMode::Staged;
        return CC_COLL_OK;
    }
    return fail(CC_COLL_ERR_INTERNAL, "resolve_device_transport: unknown setting %d", static_cast<int>(setting));
}

const char *device_transport_name(DeviceTransportMode mode)
{
    return mode == DeviceTransportMode::Direct ? "direct" : "staged";
}

namespace {

// The first failure of `st` and the wait for every copy: what every staged
// path returns, so no copy is still running when it returns.
cc_coll_status_t drain(StagingCopier &copier, cc_coll_status_t st)
{
    const cc_coll_status_t drained = copier.wait_all();
    return st != CC_COLL_OK ? st : drained;
}

}  // namespace

cc_coll_status_t staged_allreduce_sum(StagingCopier &copier, unsigned char *host, std::size_t chunk_bytes,
                                      const void *send, void *recv, std::size_t count, cc_coll_dtype_t dtype,
                                      MPI_Comm comm)
{
    if (!dtype_valid(dtype))
        return fail(CC_COLL_ERR_INVALID_DTYPE, "staged_allreduce_sum: dtype %d is not a cc_coll_dtype_t",
                    static_cast<int>(dtype));
    const std::size_t esize = dtype_size(dtype);
    const std::size_t chunk_elems = chunk_bytes / esize;
    if (chunk_elems == 0)
        return fail(CC_COLL_ERR_INVALID_ARG, "staged_allreduce_sum: chunk of %zu bytes holds no %s element",
                    chunk_bytes, dtype_name(dtype));
    if (count == 0) return CC_COLL_OK;
    if (host == nullptr) return fail(CC_COLL_ERR_INVALID_ARG, "staged_allreduce_sum: no host staging memory");

    const std::size_t slot_bytes = chunk_elems * esize;
    const std::size_t nchunks = count / chunk_elems + (count % chunk_elems != 0 ? 1 : 0);
    const auto *src = static_cast<const unsigned char *>(send);
    auto *dst = static_cast<unsigned char *>(recv);
    auto slot_of = [](std::size_t c) { return static_cast<int>(c % kStagingSlots); };
    auto slot_mem = [&](std::size_t c) { return host + static_cast<std::size_t>(slot_of(c)) * slot_bytes; };
    auto elems_of = [&](std::size_t c) { return std::min(chunk_elems, count - c * chunk_elems); };

    // Chunk c's device range is read (to_host) before its result is written
    // back (to_device is started only after wait_to_host of the same chunk),
    // and chunks are disjoint, so send == recv needs no special case.
    cc_coll_status_t st = copier.to_host(slot_mem(0), src, elems_of(0) * esize, slot_of(0));
    for (std::size_t c = 0; st == CC_COLL_OK && c < nchunks; ++c) {
        const std::size_t offset = c * slot_bytes;
        if (c + 1 < nchunks) {
            // Chunk c+1 goes into the slot that carried chunk c-2 back up:
            // that copy must have finished reading it first.
            const int next = slot_of(c + 1);
            if ((st = copier.wait_to_device(next)) != CC_COLL_OK) break;
            if ((st = copier.to_host(slot_mem(c + 1), src + offset + slot_bytes, elems_of(c + 1) * esize, next)) !=
                CC_COLL_OK)
                break;
        }
        const int slot = slot_of(c);
        unsigned char *mem = slot_mem(c);
        if ((st = copier.wait_to_host(slot)) != CC_COLL_OK) break;
        if ((st = allreduce_sum(mem, mem, elems_of(c), dtype, comm)) != CC_COLL_OK) break;
        st = copier.to_device(dst + offset, mem, elems_of(c) * esize, slot);
    }
    return drain(copier, st);
}

cc_coll_status_t staged_allreduce_bor(StagingCopier &copier, unsigned char *host, void *buf, std::size_t bytes,
                                      MPI_Comm comm)
{
    if (bytes == 0) return CC_COLL_OK;
    if (host == nullptr) return fail(CC_COLL_ERR_INVALID_ARG, "staged_allreduce_bor: no host staging memory");
    cc_coll_status_t st = copier.to_host(host, buf, bytes, 0);
    if (st == CC_COLL_OK) st = copier.wait_to_host(0);
    if (st == CC_COLL_OK) st = allreduce_bor(host, bytes, comm);
    if (st == CC_COLL_OK) st = copier.to_device(buf, host, bytes, 0);
    return drain(copier, st);
}

cc_coll_status_t staged_allgather_bytes(StagingCopier &copier, unsigned char *host, const void *send,
                                        std::size_t bytes, void *recv, MPI_Comm comm)
{
    if (bytes == 0) return CC_COLL_OK;
    if (host == nullptr) return fail(CC_COLL_ERR_INVALID_ARG, "staged_allgather_bytes: no host staging memory");
    int nranks = 0;
    cc_coll_status_t st = check_mpi(MPI_Comm_size(comm, &nranks), "MPI_Comm_size");
    if (st != CC_COLL_OK) return st;
    unsigned char *gathered = host + bytes;
    st = copier.to_host(host, send, bytes, 0);
    if (st == CC_COLL_OK) st = copier.wait_to_host(0);
    if (st == CC_COLL_OK) st = allgather_bytes(host, bytes, gathered, comm);
    if (st == CC_COLL_OK) st = copier.to_device(recv, gathered, static_cast<std::size_t>(nranks) * bytes, 0);
    return drain(copier, st);
}

cc_coll_status_t staged_alltoall_bytes(StagingCopier &copier, unsigned char *host, const void *send,
                                       std::size_t bytes_per_rank, int nranks, void *recv, MPI_Comm comm)
{
    const std::size_t total = bytes_per_rank * static_cast<std::size_t>(nranks);
    if (total == 0) return CC_COLL_OK;
    if (host == nullptr) return fail(CC_COLL_ERR_INVALID_ARG, "staged_alltoall_bytes: no host staging memory");
    unsigned char *exchanged = host + total;
    cc_coll_status_t st = copier.to_host(host, send, total, 0);
    if (st == CC_COLL_OK) st = copier.wait_to_host(0);
    if (st == CC_COLL_OK) st = alltoall_bytes(host, bytes_per_rank, exchanged, comm);
    if (st == CC_COLL_OK) st = copier.to_device(recv, exchanged, total, 0);
    return drain(copier, st);
}

}  // namespace cc_coll::detail
