// What the core's table (core.cc, kCore) hands the front: the C and
// Fortran entry points of core_api.h, defined by the file of their concern.
#pragma once

#include <cstdint>
#include <type_traits>

#include <mpi.h>

#include "core_api.h"

// The front passes a Fortran integer as an int (core_api.h).
static_assert(sizeof(MPI_Fint) == sizeof(int), "MPI_Fint is not an int: core_api.h does not fit this MPI");

namespace cc_coll_preload {

using FAllreduce = cc_coll_preload_f_allreduce_fn;
using FInit = cc_coll_preload_f_init_fn;
using FInitThread = cc_coll_preload_f_init_thread_fn;
using FFinalize = cc_coll_preload_f_finalize_fn;
using FIallreduce = cc_coll_preload_f_iallreduce_fn;
using FWait = cc_coll_preload_f_wait_fn;
using FTest = cc_coll_preload_f_test_fn;
using FWaitall = cc_coll_preload_f_waitall_fn;
using FTestall = cc_coll_preload_f_testall_fn;
using FWaitany = cc_coll_preload_f_waitany_fn;
using FTestany = cc_coll_preload_f_testany_fn;
using FWaitsome = cc_coll_preload_f_waitsome_fn;
using FTestsome = cc_coll_preload_f_testsome_fn;

// A handle of this MPI from its register-wide form: the pointer itself, or
// the low bits of an integer handle.
template <typename Handle>
Handle from_wide(std::uintptr_t v)
{
    static_assert(sizeof(Handle) <= sizeof(std::uintptr_t), "an MPI handle wider than a register");
    if constexpr (std::is_pointer_v<Handle>) return reinterpret_cast<Handle>(v);
    else return static_cast<Handle>(static_cast<std::uint32_t>(v));
}

// MPI_Allreduce (allreduce.cc). True when the call was handled here (MPI's
// return code in *rc); false: the caller passes it to MPI unchanged.
bool intercept(const void *send, void *recv, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm, const void *ret,
               int *rc) noexcept;
// MPI_Iallreduce (iallreduce.cc). True when the call was handled here:
// *request is the program's request and *rc MPI_SUCCESS, or *rc an error;
// false: the caller passes the call to MPI unchanged.
bool intercept_nonblocking(const void *send, void *recv, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm,
                           const void *ret, MPI_Request *request, int *rc) noexcept;

// The completion functions (completion.cc).
int core_wait(void *request, void *status);
int core_test(void *request, int *flag, void *status);
int core_waitall(int count, void *requests, void *statuses);
int core_testall(int count, void *requests, int *flag, void *statuses);
int core_waitany(int count, void *requests, int *index, void *status);
int core_testany(int count, void *requests, int *index, int *flag, void *status);
int core_waitsome(int incount, void *requests, int *outcount, int *indices, void *statuses);
int core_testsome(int incount, void *requests, int *outcount, int *indices, void *statuses);
int core_request_get_status(std::uintptr_t request, int *flag, void *status);
void fortran_wait(FWait next, FTest test, MPI_Fint *request, void *status, MPI_Fint *ierr);
void fortran_test(FTest next, MPI_Fint *request, MPI_Fint *flag, void *status, MPI_Fint *ierr);
void fortran_waitall(FWaitall next, FTestall test, MPI_Fint *count, MPI_Fint *requests, void *statuses,
                     MPI_Fint *ierr);
void fortran_testall(FTestall next, MPI_Fint *count, MPI_Fint *requests, MPI_Fint *flag, void *statuses,
                     MPI_Fint *ierr);
void fortran_waitany(FWaitany next, FTestany test, MPI_Fint *count, MPI_Fint *requests, MPI_Fint *index,
                     void *status, MPI_Fint *ierr);
void fortran_testany(FTestany next, MPI_Fint *count, MPI_Fint *requests, MPI_Fint *index, MPI_Fint *flag,
                     void *status, MPI_Fint *ierr);
void fortran_waitsome(FWaitsome next, FTestsome test, MPI_Fint *incount, MPI_Fint *requests, MPI_Fint *outcount,
                      MPI_Fint *indices, void *statuses, MPI_Fint *ierr);
void fortran_testsome(FTestsome next, MPI_Fint *incount, MPI_Fint *requests, MPI_Fint *outcount,
                      MPI_Fint *indices, void *statuses, MPI_Fint *ierr);

// The Fortran entry points of MPI_Allreduce, MPI_Iallreduce, MPI_Init,
// MPI_Init_thread and MPI_Finalize (fortran.cc).
void fortran_allreduce(FAllreduce real, void *s, void *r, MPI_Fint *count, MPI_Fint *dt, MPI_Fint *op,
                       MPI_Fint *comm, MPI_Fint *ierr, const void *ret);
void fortran_iallreduce(FIallreduce real, void *s, void *r, MPI_Fint *count, MPI_Fint *dt, MPI_Fint *op,
                        MPI_Fint *comm, MPI_Fint *request, MPI_Fint *ierr, const void *ret);
void fortran_init(FInit real, MPI_Fint *ierr);
void fortran_init_thread(FInitThread real, MPI_Fint *required, MPI_Fint *provided, MPI_Fint *ierr);
void fortran_finalize(FFinalize real, MPI_Fint *ierr);

}  // namespace cc_coll_preload
