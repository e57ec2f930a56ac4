// The extern "C" boundary: argument checks, handle lookup, and the guard
// that keeps C++ exceptions from crossing into C callers.
#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <mutex>
#include <new>
#include <string>
#include <type_traits>

#include "cc_coll.h"
#include "entry.hpp"
#include "collectives/allreduce/allreduce.hpp"
#include "collectives/reduce_scatter/reduce_scatter.hpp"
#include "dispatch/checkpoint.hpp"
#include "dispatch/dispatch.hpp"
#include "dispatch/residuals.hpp"
#include "core/comm.hpp"
#include "core/config.hpp"
#include "core/dtype.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/params.hpp"
#include "gpu/gpu.hpp"
#include "core/method.hpp"
#include "transport/mpi_transport.hpp"

#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif

using namespace cc_coll::detail;

namespace {


cc_coll_status_t create_comm(const char *fn, MPI_Comm mpi_comm, cc_coll_comm_h *out, int major, int minor)
{
    if (out == nullptr) return fail(CC_COLL_ERR_INVALID_ARG, "%s: comm (the output pointer) is NULL", fn);
    *out = nullptr;
    cc_coll_status_t st = cc_coll_check_version_numbers(major, minor);
    if (st != CC_COLL_OK) return st;
    if ((st = check_mpi_alive(fn)) != CC_COLL_OK) return st;
    if (mpi_comm == MPI_COMM_NULL) return fail(CC_COLL_ERR_INVALID_ARG, "%s: mpi_comm is MPI_COMM_NULL", fn);
    int inter = 0;
    if ((st = check_mpi(MPI_Comm_test_inter(mpi_comm, &inter), "MPI_Comm_test_inter")) != CC_COLL_OK) return st;
    if (inter) return fail(CC_COLL_ERR_NOT_SUPPORTED, "%s: mpi_comm is an inter-communicator", fn);

    Config config;
    std::string why;
    if (load_config(process_env(), &config, &why) != CC_COLL_OK)
        return fail(CC_COLL_ERR_CONFIG, "%s: %s", fn, why.c_str());

    std::shared_ptr<Comm> comm;
    if ((st = create_comm(mpi_comm, config, &comm)) != CC_COLL_OK) return st;
    *out = register_comm(std::move(comm));
    log_message(LogLevel::Info, "comm %p created: rank %d of %d, method %s", static_cast<void *>(*out),
                find_comm(*out)->rank(), find_comm(*out)->size(), cc_coll_method_name(config.method));
    return CC_COLL_OK;
}

thread_local std::string t_setting_value;

// Whether an MPI handle is a null pointer: what MPI_Comm_f2c returns for a
// Fortran handle that names no communicator in MPI libraries whose handles
// are pointers (Open MPI; the standard has MPI_Comm_f2c return an invalid
// handle rather than raise an error). Integer handles have no such value.
template <typename Handle>
bool null_pointer_handle(Handle h)
{
    if constexpr (std::is_pointer_v<Handle>) return h == nullptr;
    else return false;
}

// Whether MPI knows `c` as a communicator, asked without letting an invalid
// handle reach a fatal error handler. Where handles are integers (MPICH and
// its ABI: Intel MPI, MVAPICH, Cray MPICH), MPI_Comm_f2c is a cast, so any
// integer comes back as a "communicator"; MPI reports an invalid one through
// the error handler of MPI_COMM_WORLD (MPICH 4.0) or MPI_COMM_SELF (MPI-4),
// fatal by default: both are set to MPI_ERRORS_RETURN for one
// MPI_Comm_test_inter and restored (one thread at a time). Pointer handles
// that are not null are valid (the null case is null_pointer_handle's).
template <typename Handle>
bool mpi_knows_comm(Handle c)
{
    if constexpr (std::is_pointer_v<Handle>) {
        return c != nullptr;
    } else {
        static std::mutex m;
        std::lock_guard<std::mutex> lock(m);
        MPI_Errhandler world = MPI_ERRHANDLER_NULL, self = MPI_ERRHANDLER_NULL;
        if (MPI_Comm_get_errhandler(MPI_COMM_WORLD, &world) != MPI_SUCCESS ||
            MPI_Comm_get_errhandler(MPI_COMM_SELF, &self) != MPI_SUCCESS)
            return false;
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
        int inter = 0;
        const bool known = MPI_Comm_test_inter(c, &inter) == MPI_SUCCESS;
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, world);
        MPI_Comm_set_errhandler(MPI_COMM_SELF, self);
        MPI_Errhandler_free(&world);
        MPI_Errhandler_free(&self);
        return known;
    }
}

// dtype and op by reference: a caller's value outside the enum must not be
// loaded as the enum type before it is known valid (enum_value reads it).
cc_coll_status_t allreduce_entry(const char *fn, const void *sendbuf, void *recvbuf, size_t count,
                                 const cc_coll_dtype_t &dtype, const cc_coll_op_t &op, const cc_coll_params_t *params,
                                 cc_coll_comm_h comm, void *stream, cc_coll_request_h *request)
{
    CallTimer timer;
    std::shared_ptr<Comm> c;
    CallParams p;
    cc_coll_status_t st = begin_call(fn, comm, params, &c, &p, &timer);
    if (st != CC_COLL_OK) return st;
    if ((st = validate_reduction_args(fn, sendbuf, recvbuf, count, enum_value(dtype), enum_value(op))) != CC_COLL_OK)
        return st;
    bool on_device = false;
    if ((st = locate_buffers(fn, sendbuf, recvbuf, count, stream, &on_device)) != CC_COLL_OK) return st;
    const std::size_t bytes = count * dtype_size(dtype);
    std::vector<progress::Range> reads;
    if (sendbuf != recvbuf) reads.push_back(byte_range(sendbuf, bytes));
    const AllreduceArgs args{sendbuf, recvbuf, count, dtype, op, on_device, stream};
    Comm *raw = c.get();
    return launch(fn, c, timer, request, std::move(reads), {byte_range(recvbuf, bytes)},
                  on_device ? gpu::device_of(recvbuf) : -1,
                  [raw, args, p] { return run_allreduce(*raw, args, p); });
}

cc_coll_status_t reduce_scatter_entry(const char *fn, const void *sendbuf, void *recvbuf, size_t recvcount,
                                      const cc_coll_dtype_t &dtype, const cc_coll_op_t &op, const cc_coll_params_t *params,
                                      cc_coll_comm_h comm, void *stream, cc_coll_request_h *request)
{
    CallTimer timer;
    std::shared_ptr<Comm> c;
    CallParams p;
    cc_coll_status_t st = begin_call(fn, comm, params, &c, &p, &timer);
    if (st != CC_COLL_OK) return st;
    const std::size_t P = static_cast<std::size_t>(c->size());
    const int d = enum_value(dtype), o = enum_value(op);
    if (dtype_valid(d) && op_valid(o) && recvcount > static_cast<std::size_t>(INT_MAX) / P)
        return fail(CC_COLL_ERR_COUNT_OVERFLOW,
                    "%s: recvcount = %zu times %zu ranks exceeds MPI's count type (int, at most %d elements)", fn,
                    recvcount, P, INT_MAX);
    if ((st = validate_reduction_args(fn, sendbuf, recvbuf, recvcount, d, o)) != CC_COLL_OK) return st;
    const std::size_t es = dtype_size(dtype);
    if (recvcount > 0 && sendbuf != recvbuf) {
        const auto s = reinterpret_cast<std::uintptr_t>(sendbuf);
        const auto r = reinterpret_cast<std::uintptr_t>(recvbuf);
        if (s < r + recvcount * es && r < s + recvcount * P * es)
            return fail(CC_COLL_ERR_INVALID_ARG,
                        "%s: sendbuf (recvcount x %zu elements) and recvbuf overlap without being equal (pass "
                        "the same pointer for in-place)",
                        fn, P);
    }
    bool on_device = false;
    if ((st = locate_buffers(fn, sendbuf, recvbuf, recvcount, stream, &on_device)) != CC_COLL_OK) return st;
    ReduceScatterArgs args{sendbuf, recvbuf, recvcount, dtype, op};
    args.on_device = on_device;
    args.stream = stream;
    std::vector<progress::Range> reads;
    if (sendbuf != recvbuf) reads.push_back(byte_range(sendbuf, recvcount * P * es));
    const std::size_t written = sendbuf == recvbuf ? recvcount * P * es : recvcount * es;
    Comm *raw = c.get();
    return launch(fn, c, timer, request, std::move(reads), {byte_range(recvbuf, written)},
                  on_device ? gpu::device_of(recvbuf) : -1,
                  [raw, args, p] { return run_reduce_scatter(*raw, args, p); });
}

}  // namespace

extern "C" {

const char *cc_coll_status_string(cc_coll_status_t status) { return status_string(status); }

const char *cc_coll_last_error(void) { return last_error(); }

void cc_coll_get_version(int *major, int *minor, int *patch)
{
    if (major) *major = CC_COLL_VERSION_MAJOR;
    if (minor) *minor = CC_COLL_VERSION_MINOR;
    if (patch) *patch = CC_COLL_VERSION_PATCH;
}

const char *cc_coll_version_string(void)
{
#define CC_COLL_STR2(x) #x
#define CC_COLL_STR(x) CC_COLL_STR2(x)
    return CC_COLL_STR(CC_COLL_VERSION_MAJOR) "." CC_COLL_STR(CC_COLL_VERSION_MINOR) "." CC_COLL_STR(
        CC_COLL_VERSION_PATCH);
}

cc_coll_status_t cc_coll_check_version_numbers(int header_major, int header_minor)
{
    clear_error();
    if (header_major != CC_COLL_VERSION_MAJOR || header_minor > CC_COLL_VERSION_MINOR)
        return fail(CC_COLL_ERR_VERSION_MISMATCH,
                    "program compiled against cc_coll.h %d.%d but runs with libcc_coll %s (needs the same major "
                    "version and a library minor version >= the header's)",
                    header_major, header_minor, cc_coll_version_string());
    return CC_COLL_OK;
}

size_t cc_coll_dtype_size(cc_coll_dtype_t dtype)
{
    const int d = enum_value(dtype);
    return dtype_valid(d) ? dtype_size(static_cast<cc_coll_dtype_t>(d)) : 0;
}

const char *cc_coll_method_name(cc_coll_method_t method)
{
    const Method *m = find_method(enum_value(method));
    return m != nullptr ? m->name : nullptr;
}

int cc_coll_method_count(void) { return static_cast<int>(methods().size()); }

cc_coll_status_t cc_coll_method_at(int index, cc_coll_method_t *method)
{
    clear_error();
    if (method == nullptr) return fail(CC_COLL_ERR_INVALID_ARG, "cc_coll_method_at: method (the output) is NULL");
    if (index < 0 || index >= static_cast<int>(methods().size()))
        return fail(CC_COLL_ERR_INVALID_ARG, "cc_coll_method_at: index %d is not in [0, %zu)", index,
                    methods().size());
    *method = methods()[static_cast<std::size_t>(index)]->id;
    return CC_COLL_OK;
}

unsigned cc_coll_method_caps(cc_coll_method_t method)
{
    const Method *m = find_method(enum_value(method));
    return m != nullptr ? method_caps(*m) : 0u;
}

const char *cc_coll_method_summary(cc_coll_method_t method)
{
    const Method *m = find_method(enum_value(method));
    return m != nullptr ? m->summary : nullptr;
}

cc_coll_status_t cc_coll_method_from_name(const char *name, cc_coll_method_t *method)
{
    return guarded("cc_coll_method_from_name", [&] {
        if (method == nullptr)
            return fail(CC_COLL_ERR_INVALID_ARG, "cc_coll_method_from_name: method (the output) is NULL");
        if (name == nullptr) return fail(CC_COLL_ERR_INVALID_ARG, "cc_coll_method_from_name: name is NULL");
        if (!parse_method(name, method))
            return fail(CC_COLL_ERR_INVALID_METHOD, "cc_coll_method_from_name: \"%s\" is not a method (%s)", name,
                        method_names().c_str());
        return CC_COLL_OK;
    });
}

cc_coll_status_t cc_coll_comm_create_versioned(MPI_Comm mpi_comm, cc_coll_comm_h *comm, int header_major,
                                               int header_minor)
{
    return guarded("cc_coll_comm_create", [&] {
        return create_comm("cc_coll_comm_create", mpi_comm, comm, header_major, header_minor);
    });
}

cc_coll_status_t cc_coll_comm_create_fint_versioned(MPI_Fint mpi_comm, cc_coll_comm_h *comm, int header_major,
                                                    int header_minor)
{
    return guarded("cc_coll_comm_create_fint", [&] {
        const char *fn = "cc_coll_comm_create_fint";
        if (comm != nullptr) *comm = nullptr;
        cc_coll_status_t st = cc_coll_check_version_numbers(header_major, header_minor);
        if (st != CC_COLL_OK || (st = check_mpi_alive(fn)) != CC_COLL_OK) return st;
        // Only a handle MPI knows may reach an MPI call: any error on an
        // invalid communicator goes to MPI_COMM_WORLD's handler, fatal by
        // default, and no error handler can be set on an invalid handle.
        const MPI_Comm c = MPI_Comm_f2c(mpi_comm);
        if (null_pointer_handle(c))
            return fail(CC_COLL_ERR_INVALID_ARG,
                        "%s: mpi_comm = %d is not the Fortran handle of a communicator (MPI_Comm_f2c finds none)",
                        fn, static_cast<int>(mpi_comm));
        if (c == MPI_COMM_NULL)
            return fail(CC_COLL_ERR_INVALID_ARG, "%s: mpi_comm = %d is the Fortran handle of MPI_COMM_NULL", fn,
                        static_cast<int>(mpi_comm));
        if (!mpi_knows_comm(c))
            return fail(CC_COLL_ERR_INVALID_ARG,
                        "%s: mpi_comm = %d is not the Fortran handle of a communicator (MPI reports it invalid)",
                        fn, static_cast<int>(mpi_comm));
        return create_comm(fn, c, comm, header_major, header_minor);
    });
}

cc_coll_status_t cc_coll_comm_destroy(cc_coll_comm_h comm)
{
    return guarded("cc_coll_comm_destroy", [&] {
        if (comm == nullptr) return fail(CC_COLL_ERR_INVALID_COMM, "cc_coll_comm_destroy: comm is NULL");
        // Requests in flight (freed ones included) complete first: the
        // other ranks take part in them.
        if (std::shared_ptr<Comm> live = find_comm(comm); live && progress::in_flight(*live) > 0)
            progress::drain(*live);
        if (!unregister_comm(comm))
            return fail(CC_COLL_ERR_INVALID_COMM,
                        "cc_coll_comm_destroy: comm %p is not a live communicator (already destroyed?)",
                        static_cast<void *>(comm));
        return CC_COLL_OK;
    });
}

cc_coll_status_t cc_coll_comm_rank(cc_coll_comm_h comm, int *rank)
{
    return guarded("cc_coll_comm_rank", [&] {
        std::shared_ptr<Comm> c;
        cc_coll_status_t st = lookup("cc_coll_comm_rank", comm, &c);
        if (st != CC_COLL_OK) return st;
        if (rank == nullptr) return fail(CC_COLL_ERR_INVALID_ARG, "cc_coll_comm_rank: rank is NULL");
        *rank = c->rank();
        return CC_COLL_OK;
    });
}

cc_coll_status_t cc_coll_comm_size(cc_coll_comm_h comm, int *size)
{
    return guarded("cc_coll_comm_size", [&] {
        std::shared_ptr<Comm> c;
        cc_coll_status_t st = lookup("cc_coll_comm_size", comm, &c);
        if (st != CC_COLL_OK) return st;
        if (size == nullptr) return fail(CC_COLL_ERR_INVALID_ARG, "cc_coll_comm_size: size is NULL");
        *size = c->size();
        return CC_COLL_OK;
    });
}

cc_coll_status_t cc_coll_allreduce(const void *sendbuf, void *recvbuf, size_t count, cc_coll_dtype_t dtype,
                                   cc_coll_op_t op, const cc_coll_params_t *params, cc_coll_comm_h comm,
                                   void *stream)
{
    return guarded("cc_coll_allreduce", [&] {
        return allreduce_entry("cc_coll_allreduce", sendbuf, recvbuf, count, dtype, op, params, comm, stream, nullptr);
    });
}

cc_coll_status_t cc_coll_iallreduce(const void *sendbuf, void *recvbuf, size_t count, cc_coll_dtype_t dtype,
                                    cc_coll_op_t op, const cc_coll_params_t *params, cc_coll_comm_h comm,
                                    void *stream, cc_coll_request_h *request)
{
    return guarded("cc_coll_iallreduce", [&] {
        const char *fn = "cc_coll_iallreduce";
        CC_COLL_TRY(check_request_out(fn, request));
        return allreduce_entry(fn, sendbuf, recvbuf, count, dtype, op, params, comm, stream, request);
    });
}

cc_coll_status_t cc_coll_reduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount, cc_coll_dtype_t dtype,
                                        cc_coll_op_t op, const cc_coll_params_t *params, cc_coll_comm_h comm,
                                        void *stream)
{
    return guarded("cc_coll_reduce_scatter", [&] {
        return reduce_scatter_entry("cc_coll_reduce_scatter", sendbuf, recvbuf, recvcount, dtype, op, params, comm,
                                    stream, nullptr);
    });
}

cc_coll_status_t cc_coll_ireduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount, cc_coll_dtype_t dtype,
                                         cc_coll_op_t op, const cc_coll_params_t *params, cc_coll_comm_h comm,
                                         void *stream, cc_coll_request_h *request)
{
    return guarded("cc_coll_ireduce_scatter", [&] {
        const char *fn = "cc_coll_ireduce_scatter";
        CC_COLL_TRY(check_request_out(fn, request));
        return reduce_scatter_entry(fn, sendbuf, recvbuf, recvcount, dtype, op, params, comm, stream, request);
    });
}

cc_coll_status_t cc_coll_test(cc_coll_request_h request, int *done)
{
    return guarded("cc_coll_test", [&] { return progress::test("cc_coll_test", request, done); });
}

cc_coll_status_t cc_coll_wait(cc_coll_request_h request)
{
    return guarded("cc_coll_wait", [&] { return progress::wait("cc_coll_wait", request); });
}

cc_coll_status_t cc_coll_waitall(size_t n, const cc_coll_request_h *requests, cc_coll_status_t *statuses)
{
    return guarded("cc_coll_waitall", [&] {
        const char *fn = "cc_coll_waitall";
        if (n > 0 && requests == nullptr) return fail(CC_COLL_ERR_INVALID_ARG, "%s: requests is NULL with n = %zu", fn, n);
        cc_coll_status_t first = CC_COLL_OK;
        std::string message;
        for (std::size_t i = 0; i < n; ++i) {
            cc_coll_status_t st = CC_COLL_OK;
            if (requests[i] != nullptr) {
                st = progress::wait(fn, requests[i]);
                if (st != CC_COLL_OK && first == CC_COLL_OK) {
                    first = st;
                    message = last_error();
                }
            }
            if (statuses != nullptr) statuses[i] = st;
        }
        if (first == CC_COLL_OK) {
            clear_error();
            return CC_COLL_OK;
        }
        return fail(first, "%s", message.c_str());
    });
}

cc_coll_status_t cc_coll_request_status(cc_coll_request_h request, int *done, cc_coll_status_t *status,
                                        const char **message)
{
    return guarded("cc_coll_request_status", [&] {
        return progress::query("cc_coll_request_status", request, done, status, message);
    });
}

cc_coll_status_t cc_coll_request_free(cc_coll_request_h request)
{
    return guarded("cc_coll_request_free", [&] { return progress::release("cc_coll_request_free", request); });
}

cc_coll_status_t cc_coll_comm_get_stats(cc_coll_comm_h comm, cc_coll_stats_t *stats)
{
    return guarded("cc_coll_comm_get_stats", [&] {
        std::shared_ptr<Comm> c;
        cc_coll_status_t st = lookup("cc_coll_comm_get_stats", comm, &c);
        if (st != CC_COLL_OK) return st;
        if (stats == nullptr) return fail(CC_COLL_ERR_INVALID_ARG, "cc_coll_comm_get_stats: stats is NULL");
        return fill_stats(c->stats().snapshot(), stats);
    });
}

cc_coll_status_t cc_coll_auto_predict(cc_coll_comm_h comm, size_t count, cc_coll_dtype_t dtype,
                                      const cc_coll_params_t *params, cc_coll_method_t *chosen, double *predicted_none,
                                      double *predicted_lossy)
{
    return guarded("cc_coll_auto_predict", [&] {
        const char *fn = "cc_coll_auto_predict";
        std::shared_ptr<Comm> c;
        CallParams p;
        cc_coll_status_t st = begin_call(fn, comm, params, &c, &p);
        if (st != CC_COLL_OK) return st;
        const int d = enum_value(dtype);
        if (!dtype_valid(d))
            return fail(CC_COLL_ERR_INVALID_DTYPE, "%s: dtype = %d is not a cc_coll_dtype_t value (F32, F64, F16, BF16)",
                        fn, d);
        CC_COLL_TRY(check_no_requests(fn, *c));
        CollectiveHold hold;
        CC_COLL_TRY(hold.enter(fn, *c));
        Prediction choice;
        CC_COLL_TRY(predict_selection(*c, CostTensor{count, static_cast<cc_coll_dtype_t>(d), p.has_shape, p.rows, p.cols},
                                      p, &choice));
        if (chosen != nullptr) *chosen = choice.chosen;
        if (predicted_none != nullptr) *predicted_none = choice.predicted_none;
        if (predicted_lossy != nullptr) *predicted_lossy = choice.predicted_lossy;
        return CC_COLL_OK;
    });
}

cc_coll_status_t cc_coll_comm_reset_stats(cc_coll_comm_h comm)
{
    return guarded("cc_coll_comm_reset_stats", [&] {
        std::shared_ptr<Comm> c;
        cc_coll_status_t st = lookup("cc_coll_comm_reset_stats", comm, &c);
        if (st != CC_COLL_OK) return st;
        c->stats().reset();
        return CC_COLL_OK;
    });
}

cc_coll_status_t cc_coll_ef_bytes(cc_coll_comm_h comm, uint64_t *bytes)
{
    return guarded("cc_coll_ef_bytes", [&] {
        std::shared_ptr<Comm> c;
        cc_coll_status_t st = lookup("cc_coll_ef_bytes", comm, &c);
        if (st != CC_COLL_OK) return st;
        if (bytes == nullptr) return fail(CC_COLL_ERR_INVALID_ARG, "cc_coll_ef_bytes: bytes is NULL");
        CC_COLL_TRY(check_no_requests("cc_coll_ef_bytes", *c));
        std::lock_guard<CollectiveLock> collective(c->collective_mutex());
        std::lock_guard<std::mutex> p2p(c->p2p_mutex());
        *bytes = c->ef().bytes() + c->lep().bytes();
        if (const NodeTopology *t = c->topology(); t != nullptr && t->rail != nullptr) *bytes += t->rail->ef().bytes();
        return CC_COLL_OK;
    });
}

cc_coll_status_t cc_coll_state_bytes(cc_coll_comm_h comm, uint64_t *bytes)
{
    return guarded("cc_coll_state_bytes", [&] {
        std::shared_ptr<Comm> c;
        cc_coll_status_t st = lookup("cc_coll_state_bytes", comm, &c);
        if (st != CC_COLL_OK) return st;
        if (bytes == nullptr) return fail(CC_COLL_ERR_INVALID_ARG, "cc_coll_state_bytes: bytes is NULL");
        CC_COLL_TRY(check_no_requests("cc_coll_state_bytes", *c));
        // As cc_coll_ef_bytes: not in the middle of a collective's update.
        std::lock_guard<CollectiveLock> collective(c->collective_mutex());
        std::lock_guard<std::mutex> p2p(c->p2p_mutex());
        *bytes = c->state_budget().bytes();
        if (const NodeTopology *t = c->topology(); t != nullptr && t->rail != nullptr)
            *bytes += t->rail->state_budget().bytes();
        return CC_COLL_OK;
    });
}

cc_coll_status_t cc_coll_ef_get_residual(cc_coll_comm_h comm, const cc_coll_params_t *params, const void *recvbuf,
                                         size_t count, cc_coll_dtype_t dtype, double *out)
{
    return guarded("cc_coll_ef_get_residual", [&] {
        const char *fn = "cc_coll_ef_get_residual";
        std::shared_ptr<Comm> c;
        EfKey key;
        CallParams p;
        cc_coll_status_t st = lookup(fn, comm, &c);
        if (st != CC_COLL_OK || (st = ef_key_of(fn, *c, params, recvbuf, count, dtype, &key, &p)) != CC_COLL_OK)
            return st;
        if (out == nullptr && count > 0) return fail(CC_COLL_ERR_NULL_BUFFER, "%s: out is NULL with count = %zu", fn, count);
        CC_COLL_TRY(check_no_requests(fn, *c));
        std::lock_guard<CollectiveLock> lock(c->collective_mutex());
        return read_residual(*c, p, key, recvbuf, count, dtype, out, fn);
    });
}

cc_coll_status_t cc_coll_ef_reset(cc_coll_comm_h comm, const cc_coll_params_t *params, const void *recvbuf,
                                  size_t count, cc_coll_dtype_t dtype)
{
    return guarded("cc_coll_ef_reset", [&] {
        std::shared_ptr<Comm> c;
        EfKey key;
        CallParams p;
        cc_coll_status_t st = lookup("cc_coll_ef_reset", comm, &c);
        if (st != CC_COLL_OK ||
            (st = ef_key_of("cc_coll_ef_reset", *c, params, recvbuf, count, dtype, &key, &p)) != CC_COLL_OK)
            return st;
        CC_COLL_TRY(check_no_requests("cc_coll_ef_reset", *c));
        std::lock_guard<CollectiveLock> lock(c->collective_mutex());
        reset_residual(*c, p, key, recvbuf, count, dtype);
        return CC_COLL_OK;
    });
}

cc_coll_status_t cc_coll_ef_reset_all(cc_coll_comm_h comm)
{
    return guarded("cc_coll_ef_reset_all", [&] {
        std::shared_ptr<Comm> c;
        cc_coll_status_t st = lookup("cc_coll_ef_reset_all", comm, &c);
        if (st != CC_COLL_OK) return st;
        CC_COLL_TRY(check_no_requests("cc_coll_ef_reset_all", *c));
        std::lock_guard<CollectiveLock> collective(c->collective_mutex());
        std::lock_guard<std::mutex> p2p(c->p2p_mutex());
        reset_all_residuals(*c);
        return CC_COLL_OK;
    });
}

cc_coll_status_t cc_coll_state_export(cc_coll_comm_h comm, void *buf, size_t *size)
{
    return guarded("cc_coll_state_export", [&] {
        const char *fn = "cc_coll_state_export";
        std::shared_ptr<Comm> c;
        cc_coll_status_t st = lookup(fn, comm, &c);
        if (st != CC_COLL_OK) return st;
        if (size == nullptr) return fail(CC_COLL_ERR_INVALID_ARG, "%s: size is NULL", fn);
        CC_COLL_TRY(check_no_requests(fn, *c));
        std::lock_guard<CollectiveLock> collective(c->collective_mutex());
        std::lock_guard<std::mutex> p2p(c->p2p_mutex());
        bool too_small = false;
        return export_state(*c, buf, size, &too_small, fn);
    });
}

cc_coll_status_t cc_coll_state_import(cc_coll_comm_h comm, const void *buf, size_t size)
{
    return guarded("cc_coll_state_import", [&] {
        const char *fn = "cc_coll_state_import";
        std::shared_ptr<Comm> c;
        cc_coll_status_t st = lookup(fn, comm, &c);
        if (st != CC_COLL_OK) return st;
        if (buf == nullptr && size > 0)
            return fail(CC_COLL_ERR_NULL_BUFFER, "%s: buf is NULL with size = %zu", fn, size);
        CC_COLL_TRY(check_no_requests(fn, *c));
        std::lock_guard<CollectiveLock> collective(c->collective_mutex());
        std::lock_guard<std::mutex> p2p(c->p2p_mutex());
        return import_state(*c, buf, size, fn);
    });
}

size_t cc_coll_setting_count(void)
{
    std::size_t n = 0;
    settings(&n);
    return n;
}

cc_coll_status_t cc_coll_setting_get(size_t index, cc_coll_setting_t *out)
{
    return guarded("cc_coll_setting_get", [&] {
        std::size_t n = 0;
        const SettingDef *table = settings(&n);
        if (index >= n)
            return fail(CC_COLL_ERR_INVALID_ARG, "cc_coll_setting_get: index %zu is out of range (%zu settings)",
                        index, n);
        if (out == nullptr) return fail(CC_COLL_ERR_INVALID_ARG, "cc_coll_setting_get: out is NULL");
        const SettingDef &s = table[index];
        out->name = s.name;
        out->env_var = s.env_var;
        out->default_value = s.default_value;
        out->doc = s.doc;
        out->value = s.default_value;
        out->from_env = 0;
        std::string value;
        if (!process_env()(s.env_var, &value)) return CC_COLL_OK;
        Config scratch;
        std::string why;
        if (!s.apply(value, &scratch, &why))
            return fail(CC_COLL_ERR_CONFIG, "%s=\"%s\" is invalid: %s", s.env_var, value.c_str(), why.c_str());
        t_setting_value = value;
        out->value = t_setting_value.c_str();
        out->from_env = 1;
        return CC_COLL_OK;
    });
}

unsigned cc_coll_build_flags(void)
{
    unsigned flags = 0;
#ifdef CC_COLL_HAVE_CUDA
    flags |= CC_COLL_BUILD_CUDA;
#endif
#ifdef CC_COLL_HAVE_FORTRAN
    flags |= CC_COLL_BUILD_FORTRAN;
#endif
    return flags;
}

int cc_coll_cuda_device_count(void) { return gpu::device_count(); }

int cc_coll_buffer_on_device(const void *ptr)
{
    return guarded("cc_coll_buffer_on_device", [&]() -> cc_coll_status_t {
        gpu::Location where = gpu::Location::Host;
        const cc_coll_status_t st = gpu::locate_checked(ptr, &where, "cc_coll_buffer_on_device");
        if (st != CC_COLL_OK) return st;
        return static_cast<cc_coll_status_t>(where == gpu::Location::Device ? 1 : 0);
    });
}

int cc_coll_mpi_cuda_aware(void)
{
#if defined(MPIX_CUDA_AWARE_SUPPORT)
    return MPIX_Query_cuda_support() ? 1 : 0;
#else
    return 0;
#endif
}

}  // extern "C"
