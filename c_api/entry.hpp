// Helpers every extern "C" entry point uses: the exception guard, handle
// lookup, the MPI liveness check, the collective preamble and the
// host-buffer check. Included only by the c_api sources.
#pragma once

#include <cstddef>
#include <exception>
#include <memory>
#include <new>

#include "cc_coll.h"
#include "core/comm.hpp"
#include "core/dtype.hpp"
#include "core/ef_store.hpp"
#include "core/error.hpp"
#include "core/params.hpp"
#include "transport/mpi_transport.hpp"

namespace cc_coll::detail {

// Runs `body` with a fresh last-error and turns any escaping exception into a
// status code.
template <typename F>
inline cc_coll_status_t guarded(const char *fn, F &&body) noexcept
{
    try {
        clear_error();
        return body();
    } catch (const std::bad_alloc &) {
        return fail(CC_COLL_ERR_NO_MEMORY, "%s: out of memory", fn);
    } catch (const std::exception &e) {
        return fail(CC_COLL_ERR_INTERNAL, "%s: unexpected exception: %s", fn, e.what());
    } catch (...) {
        return fail(CC_COLL_ERR_INTERNAL, "%s: unexpected non-standard exception", fn);
    }
}

inline cc_coll_status_t lookup(const char *fn, cc_coll_comm_h handle, std::shared_ptr<Comm> *out)
{
    if (handle == nullptr) return fail(CC_COLL_ERR_INVALID_COMM, "%s: comm is NULL", fn);
    *out = find_comm(handle);
    if (!*out)
        return fail(CC_COLL_ERR_INVALID_COMM, "%s: comm %p is not a live communicator (already destroyed?)", fn,
                    static_cast<void *>(handle));
    return CC_COLL_OK;
}

inline cc_coll_status_t check_mpi_alive(const char *fn)
{
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (!initialized)
        return fail(CC_COLL_ERR_MPI_NOT_INITIALIZED, "%s: MPI is not initialised (call MPI_Init first)", fn);
    if (finalized) return fail(CC_COLL_ERR_MPI_NOT_INITIALIZED, "%s: MPI is already finalised", fn);
    return CC_COLL_OK;
}

// The start of every collective: a live communicator, MPI still up, and the
// call's params merged over the communicator's configuration.
inline cc_coll_status_t begin_call(const char *fn, cc_coll_comm_h comm, const cc_coll_params_t *params,
                            std::shared_ptr<Comm> *c, CallParams *p)
{
    cc_coll_status_t st = lookup(fn, comm, c);
    if (st != CC_COLL_OK || (st = check_mpi_alive(fn)) != CC_COLL_OK) return st;
    return resolve_params(params, (*c)->config(), p);
}

// Device buffers and streams are not supported yet.
inline cc_coll_status_t check_host_buffers(const char *fn, const void *sendbuf, const void *recvbuf, std::size_t count,
                                    void *stream)
{
    if (stream != nullptr)
        return fail(CC_COLL_ERR_NOT_SUPPORTED, "%s: stream must be NULL (device buffers are not supported yet)", fn);
    if (count > 0 && (is_device_memory(sendbuf) || is_device_memory(recvbuf)))
        return fail(CC_COLL_ERR_NOT_SUPPORTED, "%s: %s is device memory, which this version does not support", fn,
                    is_device_memory(sendbuf) ? "sendbuf" : "recvbuf");
    return CC_COLL_OK;
}

// The residual key a call with these arguments would use.
inline cc_coll_status_t ef_key_of(const char *fn, const Comm &c, const cc_coll_params_t *params, const void *recvbuf,
                           size_t count, cc_coll_dtype_t dtype, EfKey *key)
{
    CallParams p;
    cc_coll_status_t st = resolve_params(params, c.config(), &p);
    if (st != CC_COLL_OK) return st;
    if (!dtype_valid(dtype))
        return fail(CC_COLL_ERR_INVALID_DTYPE, "%s: dtype = %d is not a cc_coll_dtype_t value", fn, static_cast<int>(dtype));
    *key = EfKey::from(p.has_ef_key, p.ef_key, recvbuf, count, dtype);
    return CC_COLL_OK;
}

}  // namespace cc_coll::detail
