// libcc_coll_preload_core.so: the core of the LD_PRELOAD shim (a PMPI
// tool) that routes an unmodified MPI program's eligible MPI_Allreduce and
// MPI_Iallreduce calls through libcc_coll. See docs/preload.md for the
// user's view.
//
//  - What is preloaded is libcc_coll_preload.so (front.c): it exports the
//    interposed entry points, checks that the process runs the MPI this
//    core was built for, loads this core (RTLD_LOCAL) and hands it every
//    call through the table of core_api.h. The core exports nothing else.
//  - Wrapped: MPI_Init, MPI_Init_thread, MPI_Finalize, MPI_Allreduce,
//    MPI_Iallreduce and the completion functions of requests (MPI_Wait,
//    MPI_Test and their -all, -any and -some forms, MPI_Request_get_status)
//    (C); the Fortran entry points of the same in their four manglings
//    (Open MPI's Fortran bindings call PMPI_* directly, so a C-only shim
//    never sees a Fortran program; MPICH's call the C MPI_* functions, but
//    from inside MPI, so the program's call site would be lost), and their
//    mpi_f08 entries (mpi_allreduce_f08_, ...: Open MPI's; MPICH's mpi_f08
//    has the same names but for MPI_Allreduce and MPI_Iallreduce, which
//    reach the C entry points). Each Fortran wrapper forwards what it does
//    not handle to the MPI's entry the front found (pmpi_..., or where the
//    MPI has none, as for MPICH's mpi_f08, the entry itself).
//  - Every MPI call the core makes itself is a PMPI_* call, and so is every
//    MPI call of the library's objects, linked in statically: the core
//    defines, locally, the interposed MPI functions they call, forwarding
//    to PMPI (mpi_forward.cc). A thread-local depth counter sends MPI
//    calls made from inside a forwarded call (MPICH's Fortran bindings)
//    straight to PMPI.
//  - Eligible, in two stages. First, from values identical on every rank
//    (count, datatype, op, communicator kind and size, the environment):
//    MPI_SUM of a predefined MPI_FLOAT / MPI_REAL / MPI_REAL4 (binary32) or
//    MPI_DOUBLE / MPI_DOUBLE_PRECISION / MPI_REAL8 (binary64), count x size
//    >= CC_COLL_MIN_BYTES, on an intra-communicator of two or more ranks,
//    no MPI_BOTTOM. Then, from values that may differ between ranks (buffer
//    addresses, call site, communicator name): the call's key (call site,
//    receive buffer, count, type) has been seen CC_COLL_MIN_REPEATS times
//    before on this communicator, CC_COLL_DENY does not match and
//    CC_COLL_ALLOW, if set, does. The ranks agree on the second stage with
//    one 4-byte MPI_BOR reduction on the shim's private duplicate of the
//    communicator (for MPI_Iallreduce a non-blocking one): a call is
//    compressed only where it is ready on every rank. Everything else goes
//    to PMPI_Allreduce / PMPI_Iallreduce (or the Fortran PMPI entry)
//    untouched. consider() holds the decision both share.
//  - An MPI_Iallreduce that is not passed through at once returns a
//    generalized request, completed when its collective completes (see
//    "MPI_Iallreduce: what a shim request is").
//  - Per MPI communicator one libcc_coll communicator, created at the first
//    eligible call and cached as an attribute; its delete callback queues it
//    for destruction (no MPI call inside the callback), done at the next
//    intercepted call once its requests have completed, or at MPI_Finalize.
//  - Dependencies: libcc_coll's public C ABI (cc_coll.h) and, for its
//    settings, core/preload_settings.hpp, and the front's table
//    (core_api.h); nothing else of the library's internals.
//
// The core's files, one concern each:
//  - core.cc (this file): the table the front asks for, and the C entry
//    points of MPI_Init, MPI_Init_thread, MPI_Finalize, MPI_Allreduce and
//    MPI_Iallreduce.
//  - settings.cc: the process state, the CC_COLL_* settings and whether
//    the run compresses (state.hpp).
//  - comm_entries.cc: the libcc_coll communicator cached on each MPI
//    communicator, and its destruction.
//  - decision.cc: the decision and the pieces of a compressed call
//    (decision.hpp).
//  - allreduce.cc: MPI_Allreduce.
//  - iallreduce.cc: MPI_Iallreduce and the steps of its requests
//    (requests.hpp).
//  - request_progress.cc: the table of requests in flight and what
//    advances them (completion functions, blocking calls, MPI_Finalize,
//    the progress thread).
//  - completion.cc: MPI_Wait, MPI_Test and the rest.
//  - fortran.cc: the Fortran entry points.
//  - report.cc: the summary at MPI_Finalize, and advice mode's report.
//  - mpi_forward.cc: libcc_coll's own MPI calls, kept off the front.

#include <cstdint>

#include <mpi.h>

#include "core_api.h"
#include "entry_points.hpp"
#include "requests.hpp"
#include "state.hpp"

namespace cc_coll_preload {

thread_local int t_depth = 0;

namespace {

int core_init(int *argc, char ***argv)
{
    if (t_depth > 0) return PMPI_Init(argc, argv);
    Guard guard;
    const int rc = PMPI_Init(argc, argv);
    if (rc == MPI_SUCCESS) after_init();
    return rc;
}

int core_init_thread(int *argc, char ***argv, int required, int *provided)
{
    if (t_depth > 0) return PMPI_Init_thread(argc, argv, required, provided);
    Guard guard;
    const int rc = PMPI_Init_thread(argc, argv, required, provided);
    if (rc == MPI_SUCCESS) setup(*provided);
    return rc;
}

int core_finalize()
{
    if (t_depth > 0) return PMPI_Finalize();
    Guard guard;
    teardown();
    return PMPI_Finalize();
}

int core_allreduce(const void *sendbuf, void *recvbuf, int count, std::uintptr_t datatype, std::uintptr_t op,
                   std::uintptr_t comm, const void *ret)
{
    const MPI_Datatype dt = from_wide<MPI_Datatype>(datatype);
    const MPI_Op o = from_wide<MPI_Op>(op);
    const MPI_Comm c = from_wide<MPI_Comm>(comm);
    if (t_depth > 0) return PMPI_Allreduce(sendbuf, recvbuf, count, dt, o, c);
    Guard guard;
    ensure_setup();
    state().seen++;
    int rc = MPI_SUCCESS;
    if (intercept(sendbuf, recvbuf, count, dt, o, c, ret, &rc)) return rc;
    return PMPI_Allreduce(sendbuf, recvbuf, count, dt, o, c);
}

int core_iallreduce(const void *sendbuf, void *recvbuf, int count, std::uintptr_t datatype, std::uintptr_t op,
                    std::uintptr_t comm, void *request, const void *ret)
{
    const MPI_Datatype dt = from_wide<MPI_Datatype>(datatype);
    const MPI_Op o = from_wide<MPI_Op>(op);
    const MPI_Comm c = from_wide<MPI_Comm>(comm);
    MPI_Request *req = static_cast<MPI_Request *>(request);
    if (t_depth > 0) return PMPI_Iallreduce(sendbuf, recvbuf, count, dt, o, c, req);
    Guard guard;
    ensure_setup();
    state().seen++;
    state().seen_nonblocking++;
    int rc = MPI_SUCCESS;
    if (intercept_nonblocking(sendbuf, recvbuf, count, dt, o, c, ret, req, &rc)) return rc;
    return PMPI_Iallreduce(sendbuf, recvbuf, count, dt, o, c, req);
}


const cc_coll_preload_core kCore = {
    core_init,
    core_init_thread,
    core_finalize,
    core_allreduce,
    fortran_allreduce,
    fortran_init,
    fortran_init_thread,
    fortran_finalize,
    core_iallreduce,
    core_wait,
    core_test,
    core_waitall,
    core_testall,
    core_waitany,
    core_testany,
    core_waitsome,
    core_testsome,
    core_request_get_status,
    fortran_iallreduce,
    fortran_wait,
    fortran_test,
    fortran_waitall,
    fortran_testall,
    fortran_waitany,
    fortran_testany,
    fortran_waitsome,
    fortran_testsome,
};

}  // namespace

extern "C" __attribute__((visibility("default"))) const cc_coll_preload_core *cc_coll_preload_core_get(int api)
{
    return api == CC_COLL_PRELOAD_CORE_API ? &kCore : nullptr;
}

}  // namespace cc_coll_preload
