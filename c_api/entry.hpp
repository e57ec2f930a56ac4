// Helpers every extern "C" entry point uses: the exception guard, handle
// lookup, the MPI liveness check, the collective preamble and where the
// buffers live. Included only by the c_api sources.
#pragma once

#include <atomic>
#include <climits>
#include <cstddef>
#include <mutex>
#include <exception>
#include <memory>
#include <new>
#include <vector>

#include "cc_coll.h"
#include "core/comm.hpp"
#include "core/dtype.hpp"
#include "core/ef_store.hpp"
#include "core/error.hpp"
#include "core/params.hpp"
#include "gpu/gpu.hpp"
#include "dispatch/dispatch.hpp"
#include "progress/engine.hpp"
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

// Whether MPI is up, cheaply on every call: once MPI has been seen
// initialised, an attribute on MPI_COMM_SELF whose delete callback MPI runs
// at the start of MPI_Finalize marks the end, so later answers are one
// atomic load instead of MPI_Initialized and MPI_Finalized (each takes a
// lock in Open MPI).
namespace mpi_watch {
enum Phase : int { Unknown = 0, Up = 1, Finalizing = 2 };
inline std::atomic<int> &phase()
{
    static std::atomic<int> p{Unknown};
    return p;
}
inline int on_finalize(MPI_Comm, int, void *, void *)
{
    // MPI still works here: requests in flight complete, and the progress
    // thread stops, before MPI goes away.
    progress::at_finalize();
    phase().store(Finalizing, std::memory_order_release);
    return MPI_SUCCESS;
}
// Installs the watcher (MPI initialised and not finalised); leaves Unknown
// when MPI refuses, so every call keeps asking MPI.
inline void install()
{
    static std::mutex mutex;
    std::lock_guard<std::mutex> lock(mutex);
    if (phase().load(std::memory_order_acquire) != Unknown) return;
    int keyval = MPI_KEYVAL_INVALID;
    if (MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, on_finalize, &keyval, nullptr) != MPI_SUCCESS) return;
    const int set = MPI_Comm_set_attr(MPI_COMM_SELF, keyval, nullptr);
    // Freeing the key leaves the attribute set: MPI releases the key when
    // it deletes the attribute (at MPI_Finalize), instead of never.
    MPI_Comm_free_keyval(&keyval);
    if (set != MPI_SUCCESS) return;
    int expected = Unknown;
    phase().compare_exchange_strong(expected, Up);
}
}  // namespace mpi_watch

inline cc_coll_status_t check_mpi_alive(const char *fn)
{
    const int phase = mpi_watch::phase().load(std::memory_order_acquire);
    if (phase == mpi_watch::Up) return CC_COLL_OK;
    if (phase == mpi_watch::Finalizing)
        return fail(CC_COLL_ERR_MPI_NOT_INITIALIZED, "%s: MPI is already finalised", fn);
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (!initialized)
        return fail(CC_COLL_ERR_MPI_NOT_INITIALIZED, "%s: MPI is not initialised (call MPI_Init first)", fn);
    if (finalized) return fail(CC_COLL_ERR_MPI_NOT_INITIALIZED, "%s: MPI is already finalised", fn);
    mpi_watch::install();
    return CC_COLL_OK;
}

// Adds the wall time from its construction (an entry point's first line)
// to its destruction to the communicator's time_total, once the call has
// found its communicator: every call on a live communicator counts, failed
// ones included, and so does the time spent before the algorithm runs
// (argument checks, locating the buffers).
class CallTimer {
public:
    CallTimer() : t0_(now_seconds()) {}
    CallTimer(const CallTimer &) = delete;
    CallTimer &operator=(const CallTimer &) = delete;
    ~CallTimer()
    {
        if (comm_) comm_->stats().add_total(now_seconds() - t0_);
    }
    void attach(const std::shared_ptr<Comm> &comm) { comm_ = comm; }
    // A posted request counts its own time, from its first step to its last.
    void detach() { comm_.reset(); }

private:
    double t0_;
    std::shared_ptr<Comm> comm_;
};

// The start of every collective: a live communicator (whose time_total
// `timer`, when given, then counts the call), MPI still up, and the call's
// params merged over the communicator's configuration.
inline cc_coll_status_t begin_call(const char *fn, cc_coll_comm_h comm, const cc_coll_params_t *params,
                            std::shared_ptr<Comm> *c, CallParams *p, CallTimer *timer = nullptr)
{
    cc_coll_status_t st = lookup(fn, comm, c);
    if (timer != nullptr && *c) timer->attach(*c);
    if (st != CC_COLL_OK || (st = check_mpi_alive(fn)) != CC_COLL_OK) return st;
    return resolve_params(params, (*c)->config(), p);
}

// A collective's hold on its communicator (docs/api.md, "Threads"): at
// most one collective runs on a communicator at a time (MPI orders the
// collectives of a communicator, and they share its scratch), so a second
// one meanwhile is CC_COLL_ERR_INVALID_ARG, never a wait that could hang;
// the collective then holds Comm::collective_mutex, which the local calls
// on residuals and LOWRANK state take too.
class CollectiveHold {
public:
    CollectiveHold() = default;
    CollectiveHold(const CollectiveHold &) = delete;
    CollectiveHold &operator=(const CollectiveHold &) = delete;
    ~CollectiveHold()
    {
        if (comm_ == nullptr) return;
        lock_.unlock();
        comm_->in_collective().store(false, std::memory_order_release);
    }
    cc_coll_status_t enter(const char *fn, Comm &c)
    {
        if (c.in_collective().exchange(true, std::memory_order_acq_rel))
            return fail(CC_COLL_ERR_INVALID_ARG,
                        "%s: another thread is in a collective on this communicator; collectives on one "
                        "communicator must be issued one at a time (use one communicator per thread)",
                        fn);
        comm_ = &c;
        lock_ = std::unique_lock<CollectiveLock>(c.collective_mutex());
        return CC_COLL_OK;
    }

private:
    Comm *comm_ = nullptr;
    std::unique_lock<CollectiveLock> lock_;
};

// The calls that read or change a communicator's residuals and method state
// from outside a collective: not while non-blocking requests hold them.
inline cc_coll_status_t check_no_requests(const char *fn, const Comm &c)
{
    const std::size_t n = progress::in_flight(c);
    if (n == 0) return CC_COLL_OK;
    return fail(CC_COLL_ERR_INVALID_ARG,
                "%s: %zu non-blocking request%s in flight on this communicator and hold%s its residuals and state; "
                "complete %s first (cc_coll_wait)",
                fn, n, n == 1 ? " is" : "s are", n == 1 ? "s" : "", n == 1 ? "it" : "them");
}

// A buffer of `bytes` bytes as a request's range (progress/engine.hpp).
inline progress::Range byte_range(const void *p, std::size_t bytes)
{
    const auto lo = reinterpret_cast<std::uintptr_t>(p);
    return progress::Range{lo, lo + (p == nullptr ? 0 : bytes)};
}

// Runs a collective whose arguments the entry point has checked: at once
// when `request` is NULL (the blocking form: requests in flight on the
// communicator complete first), else posted as a request. `run` does the
// algorithm; it is called under the communicator's CollectiveHold, with the
// thread's current CUDA device set to `device` (>= 0) for device buffers.
template <typename Run>
cc_coll_status_t launch(const char *fn, const std::shared_ptr<Comm> &c, CallTimer &timer, cc_coll_request_h *request,
                        std::vector<progress::Range> reads, std::vector<progress::Range> writes, int device, Run run)
{
    if (request == nullptr) {
        if (progress::in_flight(*c) > 0) progress::drain(*c);
        CollectiveHold hold;
        CC_COLL_TRY(hold.enter(fn, *c));
        return run();
    }
    timer.detach();
    return progress::post(fn, c, std::move(reads), std::move(writes),
                          [fn, c, device, run = std::move(run)]() -> cc_coll_status_t {
                              CallTimer t;
                              t.attach(c);
                              if (device >= 0 && gpu::current_device() != device)
                                  CC_COLL_TRY(gpu::set_device(device, fn));
                              CollectiveHold hold;
                              CC_COLL_TRY(hold.enter(fn, *c));
                              return run();
                          },
                          request);
}

// A non-blocking entry point's output: NULL until a request is posted.
inline cc_coll_status_t check_request_out(const char *fn, cc_coll_request_h *request)
{
    if (request == nullptr) return fail(CC_COLL_ERR_INVALID_ARG, "%s: request (the output pointer) is NULL", fn);
    *request = nullptr;
    return CC_COLL_OK;
}

// Where a call's buffers live (see "Device buffers and streams" in
// cc_coll.h): *on_device when they are device memory. Buffers in different
// kinds of memory, or on another device than the current one, are
// CC_COLL_ERR_INVALID_ARG; a CUDA context broken by an earlier error is
// CC_COLL_ERR_CUDA. With host buffers a stream is synchronised here
// (work on it may still be producing sendbuf); device algorithms order their
// kernels after it instead. nullptr buffers are not examined.
inline cc_coll_status_t locate_buffers(const char *fn, const void *sendbuf, const void *recvbuf, std::size_t count,
                                       void *stream, bool *on_device)
{
    *on_device = false;
    if (!(cc_coll_build_flags() & CC_COLL_BUILD_CUDA) && stream != nullptr)
        return fail(CC_COLL_ERR_NOT_SUPPORTED, "%s: stream is not NULL but this build has no CUDA support", fn);
    if (count > 0 && gpu::device_memory_possible()) {
        gpu::Location send_at = gpu::Location::Host, recv_at = gpu::Location::Host;
        cc_coll_status_t st = gpu::locate_checked(sendbuf, &send_at, fn);
        if (st != CC_COLL_OK || (st = gpu::locate_checked(recvbuf, &recv_at, fn)) != CC_COLL_OK) return st;
        const bool send_dev = send_at == gpu::Location::Device;
        const bool recv_dev = recv_at == gpu::Location::Device;
        if (sendbuf != nullptr && recvbuf != nullptr && send_dev != recv_dev)
            return fail(CC_COLL_ERR_INVALID_ARG,
                        "%s: sendbuf is %s memory but recvbuf is %s memory; a call's buffers must both be host or "
                        "both be device memory",
                        fn, send_dev ? "device" : "host", recv_dev ? "device" : "host");
        *on_device = send_dev || recv_dev;
        if (*on_device) {
            const int dev = gpu::device_of(send_dev ? sendbuf : recvbuf), cur = gpu::current_device();
            if (dev != cur)
                return fail(CC_COLL_ERR_INVALID_ARG,
                            "%s: the buffers are on CUDA device %d but the calling thread's current device is %d "
                            "(cudaSetDevice(%d) first)",
                            fn, dev, cur, dev);
            if (send_dev && recv_dev && gpu::device_of(recvbuf) != dev)
                return fail(CC_COLL_ERR_INVALID_ARG, "%s: sendbuf is on CUDA device %d but recvbuf on device %d", fn,
                            dev, gpu::device_of(recvbuf));
            return CC_COLL_OK;
        }
    }
    return stream != nullptr ? gpu::synchronize(stream, fn) : CC_COLL_OK;
}

// The residual key a call with these arguments would use. A count no
// collective accepts (above INT_MAX, MPI's count type) is
// CC_COLL_ERR_COUNT_OVERFLOW, before any caller memory is touched. dtype is
// taken by reference and read through enum_value until it is known valid: a
// caller's value outside the enum must not be loaded as a cc_coll_dtype_t.
inline cc_coll_status_t ef_key_of(const char *fn, const Comm &c, const cc_coll_params_t *params, const void *recvbuf,
                           size_t count, const cc_coll_dtype_t &dtype, EfKey *key, CallParams *resolved = nullptr)
{
    CallParams local;
    CallParams &p = resolved != nullptr ? *resolved : local;
    cc_coll_status_t st = resolve_params(params, c.config(), &p);
    if (st != CC_COLL_OK) return st;
    const int d = enum_value(dtype);
    if (!dtype_valid(d))
        return fail(CC_COLL_ERR_INVALID_DTYPE, "%s: dtype = %d is not a cc_coll_dtype_t value", fn, d);
    if (count > static_cast<std::size_t>(INT_MAX))
        return fail(CC_COLL_ERR_COUNT_OVERFLOW,
                    "%s: count = %zu exceeds MPI's count type (int, at most %d elements per call), so no "
                    "collective has such a tensor",
                    fn, count, INT_MAX);
    *key = EfKey::from(p.has_ef_key, p.ef_key, recvbuf, count, dtype);
    return CC_COLL_OK;
}

// The calls that do not cover a hierarchical communicator's shard state
// (LOWRANK's factors, whose shapes are the shards'): CC_COLL_ERR_NOT_SUPPORTED
// there.
inline cc_coll_status_t refuse_hierarchical(const char *fn, const Comm &c)
{
    if (c.topology() == nullptr) return CC_COLL_OK;
    return fail(CC_COLL_ERR_NOT_SUPPORTED,
                "%s: not supported on a hierarchical communicator (CC_COLL_HIERARCHY=on or auto at its creation), "
                "whose shards' state lives per node; create it with CC_COLL_HIERARCHY=off",
                fn);
}

}  // namespace cc_coll::detail
