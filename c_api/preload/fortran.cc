// The Fortran entry points of MPI_Allreduce, MPI_Iallreduce, MPI_Init,
// MPI_Init_thread and MPI_Finalize, in the four manglings and mpi_f08's
// (the front hands each to these with the MPI's own entry): MPI_IN_PLACE
// and MPI_BOTTOM as Fortran passes them, then the C path.

#include <mpi.h>

#include "entry_points.hpp"
#include "requests.hpp"
#include "state.hpp"


// Open MPI's Fortran sentinels: common blocks whose addresses Fortran passes
// for MPI_IN_PLACE and MPI_BOTTOM. Weak, so that the shim loads where they
// do not exist; an absent one has address NULL.
extern "C" {
extern int mpi_fortran_in_place __attribute__((weak, visibility("default")));
extern int mpi_fortran_in_place_ __attribute__((weak, visibility("default")));
extern int mpi_fortran_in_place__ __attribute__((weak, visibility("default")));
extern int MPI_FORTRAN_IN_PLACE __attribute__((weak, visibility("default")));
extern int mpi_fortran_bottom __attribute__((weak, visibility("default")));
extern int mpi_fortran_bottom_ __attribute__((weak, visibility("default")));
extern int mpi_fortran_bottom__ __attribute__((weak, visibility("default")));
extern int MPI_FORTRAN_BOTTOM __attribute__((weak, visibility("default")));
// MPICH's (and its ABI's): pointers, set when MPI's Fortran layer first runs
// (MPIR_F_NeedInit is then cleared), to the addresses Fortran passes for
// MPI_IN_PLACE and MPI_BOTTOM (mpif.h and `use mpi`).
extern void *MPIR_F_MPI_IN_PLACE __attribute__((weak, visibility("default")));
extern void *MPIR_F_MPI_BOTTOM __attribute__((weak, visibility("default")));
extern int MPIR_F_NeedInit __attribute__((weak, visibility("default")));
}

namespace cc_coll_preload {

namespace {

// Whether MPICH's Fortran sentinels are not known yet: MPI's Fortran layer
// has not run, so the call goes to it as it is.
bool mpich_fortran_uninitialised() { return &MPIR_F_NeedInit != nullptr && MPIR_F_NeedInit != 0; }

bool is_fortran_in_place(const void *p)
{
    if (p == nullptr) return false;
    if (p == &mpi_fortran_in_place || p == &mpi_fortran_in_place_ || p == &mpi_fortran_in_place__ ||
        p == &MPI_FORTRAN_IN_PLACE)
        return true;
    return &MPIR_F_MPI_IN_PLACE != nullptr && MPIR_F_MPI_IN_PLACE != nullptr && p == MPIR_F_MPI_IN_PLACE;
}

bool is_fortran_bottom(const void *p)
{
    if (p == nullptr) return false;
    if (p == &mpi_fortran_bottom || p == &mpi_fortran_bottom_ || p == &mpi_fortran_bottom__ ||
        p == &MPI_FORTRAN_BOTTOM)
        return true;
    return &MPIR_F_MPI_BOTTOM != nullptr && MPIR_F_MPI_BOTTOM != nullptr && p == MPIR_F_MPI_BOTTOM;
}

}  // namespace

void fortran_allreduce(FAllreduce real, void *s, void *r, MPI_Fint *count, MPI_Fint *dt, MPI_Fint *op,
                       MPI_Fint *comm, MPI_Fint *ierr, const void *ret)
{
    if (real != nullptr && mpich_fortran_uninitialised()) {
        Guard guard;
        real(s, r, count, dt, op, comm, ierr);
        return;
    }
    const void *cs = is_fortran_in_place(s) ? MPI_IN_PLACE : is_fortran_bottom(s) ? MPI_BOTTOM : s;
    void *cr = is_fortran_bottom(r) ? MPI_BOTTOM : r;
    if (t_depth == 0) {
        Guard guard;
        ensure_setup();
        state().seen++;
        int rc = MPI_SUCCESS;
        if (intercept(cs, cr, *count, PMPI_Type_f2c(*dt), PMPI_Op_f2c(*op), PMPI_Comm_f2c(*comm), ret, &rc)) {
            if (ierr) *ierr = static_cast<MPI_Fint>(rc);
            return;
        }
    }
    Guard guard;
    if (real) {
        real(s, r, count, dt, op, comm, ierr);
        return;
    }
    const int rc = PMPI_Allreduce(cs, cr, *count, PMPI_Type_f2c(*dt), PMPI_Op_f2c(*op), PMPI_Comm_f2c(*comm));
    if (ierr) *ierr = static_cast<MPI_Fint>(rc);
}

void fortran_iallreduce(FIallreduce real, void *s, void *r, MPI_Fint *count, MPI_Fint *dt, MPI_Fint *op,
                        MPI_Fint *comm, MPI_Fint *request, MPI_Fint *ierr, const void *ret)
{
    if (real != nullptr && mpich_fortran_uninitialised()) {
        Guard guard;
        real(s, r, count, dt, op, comm, request, ierr);
        return;
    }
    const void *cs = is_fortran_in_place(s) ? MPI_IN_PLACE : is_fortran_bottom(s) ? MPI_BOTTOM : s;
    void *cr = is_fortran_bottom(r) ? MPI_BOTTOM : r;
    if (t_depth == 0) {
        Guard guard;
        ensure_setup();
        state().seen++;
        state().seen_nonblocking++;
        int rc = MPI_SUCCESS;
        MPI_Request req = MPI_REQUEST_NULL;
        if (intercept_nonblocking(cs, cr, *count, PMPI_Type_f2c(*dt), PMPI_Op_f2c(*op), PMPI_Comm_f2c(*comm), ret,
                                  &req, &rc)) {
            *request = PMPI_Request_c2f(req);  // MPI_REQUEST_NULL's after a failure
            if (ierr) *ierr = static_cast<MPI_Fint>(rc);
            return;
        }
    }
    Guard guard;
    if (real) {
        real(s, r, count, dt, op, comm, request, ierr);
        return;
    }
    MPI_Request req = MPI_REQUEST_NULL;
    const int rc =
        PMPI_Iallreduce(cs, cr, *count, PMPI_Type_f2c(*dt), PMPI_Op_f2c(*op), PMPI_Comm_f2c(*comm), &req);
    if (rc == MPI_SUCCESS) *request = PMPI_Request_c2f(req);
    if (ierr) *ierr = static_cast<MPI_Fint>(rc);
}

void fortran_init(FInit real, MPI_Fint *ierr)
{
    Guard guard;
    if (real) {
        real(ierr);
    } else {
        const int rc = PMPI_Init(nullptr, nullptr);
        if (ierr) *ierr = static_cast<MPI_Fint>(rc);
    }
    after_init();
}

void fortran_init_thread(FInitThread real, MPI_Fint *required, MPI_Fint *provided, MPI_Fint *ierr)
{
    Guard guard;
    if (real) {
        real(required, provided, ierr);
    } else {
        int p = MPI_THREAD_SINGLE;
        const int rc = PMPI_Init_thread(nullptr, nullptr, *required, &p);
        *provided = static_cast<MPI_Fint>(p);
        if (ierr) *ierr = static_cast<MPI_Fint>(rc);
    }
    after_init();
}

void fortran_finalize(FFinalize real, MPI_Fint *ierr)
{
    Guard guard;
    teardown();
    if (real) {
        real(ierr);
    } else {
        const int rc = PMPI_Finalize();
        if (ierr) *ierr = static_cast<MPI_Fint>(rc);
    }
}
}  // namespace cc_coll_preload
