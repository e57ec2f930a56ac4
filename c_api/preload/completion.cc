// The completion functions of requests (MPI_Wait, MPI_Test, their -all,
// -any and -some forms, MPI_Request_get_status), C and Fortran.

#include <cstdint>
#include <thread>

#include <mpi.h>

#include "entry_points.hpp"
#include "requests.hpp"
#include "state.hpp"

namespace cc_coll_preload {

namespace {

// The completion functions. While the shim has requests in flight, a test
// advances them first, and a wait becomes a loop of advancing them and the
// MPI's test of the same kind, so that nothing blocks inside MPI on a
// generalized request no one would complete (nor on a request of the
// program's whose peer waits for a shim request of this rank). Otherwise
// the call goes to MPI as it is. MPICH's Fortran functions call the C ones,
// which the guard sends straight to MPI.

// Loops `test` (which sets *done and returns MPI's code) while advancing
// the shim's requests; once none is left, `wait` blocks in MPI.
template <typename Test, typename Wait>
int wait_advancing(Test test, Wait wait)
{
    Guard guard;
    for (;;) {
        const bool moved = poke();
        bool done = false;
        const int rc = test(&done);
        if (rc != MPI_SUCCESS || done) return rc;
        if (!shim_pending()) return wait();
        if (!moved) std::this_thread::yield();
    }
}

// Whether a completion function must advance the shim's requests.
bool must_advance() { return t_depth == 0 && shim_pending(); }

// A test: one round of advancing, then `call`.
template <typename Call>
auto test_advancing(Call call)
{
    if (must_advance()) {
        Guard guard;
        poke();
    }
    return call();
}

}  // namespace

void fortran_wait(FWait next, FTest test, MPI_Fint *request, void *status, MPI_Fint *ierr)
{
    if (!must_advance()) {
        Guard guard;
        next(request, status, ierr);
        return;
    }
    MPI_Fint rc = MPI_SUCCESS;
    wait_advancing(
        [&](bool *done) {
            MPI_Fint flag = 0;
            test(request, &flag, status, &rc);
            *done = flag != 0;
            return static_cast<int>(rc);
        },
        [&] {
            next(request, status, &rc);
            return static_cast<int>(rc);
        });
    if (ierr) *ierr = rc;
}

void fortran_test(FTest next, MPI_Fint *request, MPI_Fint *flag, void *status, MPI_Fint *ierr)
{
    test_advancing([&] {
        Guard guard;
        next(request, flag, status, ierr);
        return 0;
    });
}

void fortran_waitall(FWaitall next, FTestall test, MPI_Fint *count, MPI_Fint *requests, void *statuses,
                     MPI_Fint *ierr)
{
    if (!must_advance()) {
        Guard guard;
        next(count, requests, statuses, ierr);
        return;
    }
    MPI_Fint rc = MPI_SUCCESS;
    wait_advancing(
        [&](bool *done) {
            MPI_Fint flag = 0;
            test(count, requests, &flag, statuses, &rc);
            *done = flag != 0;
            return static_cast<int>(rc);
        },
        [&] {
            next(count, requests, statuses, &rc);
            return static_cast<int>(rc);
        });
    if (ierr) *ierr = rc;
}

void fortran_testall(FTestall next, MPI_Fint *count, MPI_Fint *requests, MPI_Fint *flag, void *statuses,
                     MPI_Fint *ierr)
{
    test_advancing([&] {
        Guard guard;
        next(count, requests, flag, statuses, ierr);
        return 0;
    });
}

void fortran_waitany(FWaitany next, FTestany test, MPI_Fint *count, MPI_Fint *requests, MPI_Fint *index,
                     void *status, MPI_Fint *ierr)
{
    if (!must_advance()) {
        Guard guard;
        next(count, requests, index, status, ierr);
        return;
    }
    MPI_Fint rc = MPI_SUCCESS;
    wait_advancing(
        [&](bool *done) {
            MPI_Fint flag = 0;
            test(count, requests, index, &flag, status, &rc);
            *done = flag != 0;
            return static_cast<int>(rc);
        },
        [&] {
            next(count, requests, index, status, &rc);
            return static_cast<int>(rc);
        });
    if (ierr) *ierr = rc;
}

void fortran_testany(FTestany next, MPI_Fint *count, MPI_Fint *requests, MPI_Fint *index, MPI_Fint *flag,
                     void *status, MPI_Fint *ierr)
{
    test_advancing([&] {
        Guard guard;
        next(count, requests, index, flag, status, ierr);
        return 0;
    });
}

void fortran_waitsome(FWaitsome next, FTestsome test, MPI_Fint *incount, MPI_Fint *requests, MPI_Fint *outcount,
                      MPI_Fint *indices, void *statuses, MPI_Fint *ierr)
{
    if (!must_advance()) {
        Guard guard;
        next(incount, requests, outcount, indices, statuses, ierr);
        return;
    }
    MPI_Fint rc = MPI_SUCCESS;
    wait_advancing(
        [&](bool *done) {
            test(incount, requests, outcount, indices, statuses, &rc);
            *done = *outcount != 0;  // MPI_UNDEFINED when no request is active
            return static_cast<int>(rc);
        },
        [&] {
            next(incount, requests, outcount, indices, statuses, &rc);
            return static_cast<int>(rc);
        });
    if (ierr) *ierr = rc;
}

void fortran_testsome(FTestsome next, MPI_Fint *incount, MPI_Fint *requests, MPI_Fint *outcount,
                      MPI_Fint *indices, void *statuses, MPI_Fint *ierr)
{
    test_advancing([&] {
        Guard guard;
        next(incount, requests, outcount, indices, statuses, ierr);
        return 0;
    });
}

int core_wait(void *request, void *status)
{
    MPI_Request *req = static_cast<MPI_Request *>(request);
    MPI_Status *st = static_cast<MPI_Status *>(status);
    if (!must_advance()) return PMPI_Wait(req, st);
    return wait_advancing(
        [&](bool *done) {
            int flag = 0;
            const int rc = PMPI_Test(req, &flag, st);
            *done = flag != 0;
            return rc;
        },
        [&] { return PMPI_Wait(req, st); });
}

int core_test(void *request, int *flag, void *status)
{
    return test_advancing(
        [&] { return PMPI_Test(static_cast<MPI_Request *>(request), flag, static_cast<MPI_Status *>(status)); });
}

int core_waitall(int count, void *requests, void *statuses)
{
    MPI_Request *reqs = static_cast<MPI_Request *>(requests);
    MPI_Status *sts = static_cast<MPI_Status *>(statuses);
    if (!must_advance()) return PMPI_Waitall(count, reqs, sts);
    return wait_advancing(
        [&](bool *done) {
            int flag = 0;
            const int rc = PMPI_Testall(count, reqs, &flag, sts);
            *done = flag != 0;
            return rc;
        },
        [&] { return PMPI_Waitall(count, reqs, sts); });
}

int core_testall(int count, void *requests, int *flag, void *statuses)
{
    return test_advancing([&] {
        return PMPI_Testall(count, static_cast<MPI_Request *>(requests), flag, static_cast<MPI_Status *>(statuses));
    });
}

int core_waitany(int count, void *requests, int *index, void *status)
{
    MPI_Request *reqs = static_cast<MPI_Request *>(requests);
    MPI_Status *st = static_cast<MPI_Status *>(status);
    if (!must_advance()) return PMPI_Waitany(count, reqs, index, st);
    return wait_advancing(
        [&](bool *done) {
            int flag = 0;
            const int rc = PMPI_Testany(count, reqs, index, &flag, st);
            *done = flag != 0;
            return rc;
        },
        [&] { return PMPI_Waitany(count, reqs, index, st); });
}

int core_testany(int count, void *requests, int *index, int *flag, void *status)
{
    return test_advancing([&] {
        return PMPI_Testany(count, static_cast<MPI_Request *>(requests), index, flag,
                            static_cast<MPI_Status *>(status));
    });
}

int core_waitsome(int incount, void *requests, int *outcount, int *indices, void *statuses)
{
    MPI_Request *reqs = static_cast<MPI_Request *>(requests);
    MPI_Status *sts = static_cast<MPI_Status *>(statuses);
    if (!must_advance()) return PMPI_Waitsome(incount, reqs, outcount, indices, sts);
    return wait_advancing(
        [&](bool *done) {
            const int rc = PMPI_Testsome(incount, reqs, outcount, indices, sts);
            *done = *outcount != 0;  // MPI_UNDEFINED when no request is active
            return rc;
        },
        [&] { return PMPI_Waitsome(incount, reqs, outcount, indices, sts); });
}

int core_testsome(int incount, void *requests, int *outcount, int *indices, void *statuses)
{
    return test_advancing([&] {
        return PMPI_Testsome(incount, static_cast<MPI_Request *>(requests), outcount, indices,
                             static_cast<MPI_Status *>(statuses));
    });
}

int core_request_get_status(std::uintptr_t request, int *flag, void *status)
{
    return test_advancing([&] {
        return PMPI_Request_get_status(from_wide<MPI_Request>(request), flag, static_cast<MPI_Status *>(status));
    });
}
}  // namespace cc_coll_preload
