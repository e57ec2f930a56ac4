/* The interface between the two halves of the LD_PRELOAD shim:
 *
 *  - libcc_coll_preload.so (front.c, built_mpi.c): what is preloaded. It
 *    exports the interposed MPI entry points, depends on no MPI library, and
 *    at the first wrapped call looks at the MPI libraries in the process.
 *    Where they are of the MPI the shim was built for it loads the core and
 *    hands every call to it; otherwise it forwards every call to the
 *    program's MPI untouched.
 *  - libcc_coll_preload_core.so (core.cc and the files it lists): the decision, libcc_coll and
 *    its MPI calls, linked with the MPI; loaded RTLD_LOCAL by the front.
 *
 * Only C types cross: the front is built without mpi.h. Handles are passed
 * register-wide (uintptr_t: an Open MPI pointer or an MPICH-ABI int); a
 * Fortran integer (MPI_Fint) is an int in both ABIs, which the core checks
 * at compile time. */
#ifndef CC_COLL_PRELOAD_CORE_API_H
#define CC_COLL_PRELOAD_CORE_API_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped when the table below changes: the front refuses another core. */
#define CC_COLL_PRELOAD_CORE_API 2

/* The MPI's own Fortran entries a wrapper forwards to (pmpi_allreduce_,
 * ...): every argument by reference. */
typedef void (*cc_coll_preload_f_allreduce_fn)(void *sendbuf, void *recvbuf, int *count, int *datatype, int *op,
                                               int *comm, int *ierror);
typedef void (*cc_coll_preload_f_init_fn)(int *ierror);
typedef void (*cc_coll_preload_f_init_thread_fn)(int *required, int *provided, int *ierror);
typedef void (*cc_coll_preload_f_finalize_fn)(int *ierror);
typedef void (*cc_coll_preload_f_iallreduce_fn)(void *sendbuf, void *recvbuf, int *count, int *datatype, int *op,
                                                int *comm, int *request, int *ierror);
/* The completion functions (flag: a Fortran LOGICAL, an int; status and
 * statuses: the MPI's Fortran status, passed on untouched). MPI_Test's
 * type is also MPI_Request_get_status's. */
typedef void (*cc_coll_preload_f_wait_fn)(int *request, void *status, int *ierror);
typedef void (*cc_coll_preload_f_test_fn)(int *request, int *flag, void *status, int *ierror);
typedef void (*cc_coll_preload_f_waitall_fn)(int *count, int *requests, void *statuses, int *ierror);
typedef void (*cc_coll_preload_f_testall_fn)(int *count, int *requests, int *flag, void *statuses, int *ierror);
typedef void (*cc_coll_preload_f_waitany_fn)(int *count, int *requests, int *index, void *status, int *ierror);
typedef void (*cc_coll_preload_f_testany_fn)(int *count, int *requests, int *index, int *flag, void *status,
                                             int *ierror);
typedef void (*cc_coll_preload_f_waitsome_fn)(int *incount, int *requests, int *outcount, int *indices,
                                              void *statuses, int *ierror);
typedef cc_coll_preload_f_waitsome_fn cc_coll_preload_f_testsome_fn;

struct cc_coll_preload_core {
    int (*init)(int *argc, char ***argv);
    int (*init_thread)(int *argc, char ***argv, int required, int *provided);
    int (*finalize)(void);
    /* call_site: the return address of the program's call. */
    int (*allreduce)(const void *sendbuf, void *recvbuf, int count, uintptr_t datatype, uintptr_t op, uintptr_t comm,
                     const void *call_site);
    /* next: the MPI's entry (may be NULL: the core then calls the C one). */
    void (*f_allreduce)(cc_coll_preload_f_allreduce_fn next, void *sendbuf, void *recvbuf, int *count, int *datatype,
                        int *op, int *comm, int *ierror, const void *call_site);
    void (*f_init)(cc_coll_preload_f_init_fn next, int *ierror);
    void (*f_init_thread)(cc_coll_preload_f_init_thread_fn next, int *required, int *provided, int *ierror);
    void (*f_finalize)(cc_coll_preload_f_finalize_fn next, int *ierror);

    /* MPI_Iallreduce and the completion functions of its requests. A
     * request (MPI_Request *) is a pointer to the program's handle, arrays
     * and statuses are passed as they are; MPI_Request_get_status takes
     * its handle register-wide. */
    int (*iallreduce)(const void *sendbuf, void *recvbuf, int count, uintptr_t datatype, uintptr_t op,
                      uintptr_t comm, void *request, const void *call_site);
    int (*wait)(void *request, void *status);
    int (*test)(void *request, int *flag, void *status);
    int (*waitall)(int count, void *requests, void *statuses);
    int (*testall)(int count, void *requests, int *flag, void *statuses);
    int (*waitany)(int count, void *requests, int *index, void *status);
    int (*testany)(int count, void *requests, int *index, int *flag, void *status);
    int (*waitsome)(int incount, void *requests, int *outcount, int *indices, void *statuses);
    int (*testsome)(int incount, void *requests, int *outcount, int *indices, void *statuses);
    int (*request_get_status)(uintptr_t request, int *flag, void *status);
    /* Fortran. next: the MPI's entry, never NULL for the completion
     * functions; a wait also gets the MPI's matching test (`test`), which
     * it calls in a loop while the shim has requests in flight. */
    void (*f_iallreduce)(cc_coll_preload_f_iallreduce_fn next, void *sendbuf, void *recvbuf, int *count,
                         int *datatype, int *op, int *comm, int *request, int *ierror, const void *call_site);
    void (*f_wait)(cc_coll_preload_f_wait_fn next, cc_coll_preload_f_test_fn test, int *request, void *status,
                   int *ierror);
    void (*f_test)(cc_coll_preload_f_test_fn next, int *request, int *flag, void *status, int *ierror);
    void (*f_waitall)(cc_coll_preload_f_waitall_fn next, cc_coll_preload_f_testall_fn test, int *count,
                      int *requests, void *statuses, int *ierror);
    void (*f_testall)(cc_coll_preload_f_testall_fn next, int *count, int *requests, int *flag, void *statuses,
                      int *ierror);
    void (*f_waitany)(cc_coll_preload_f_waitany_fn next, cc_coll_preload_f_testany_fn test, int *count,
                      int *requests, int *index, void *status, int *ierror);
    void (*f_testany)(cc_coll_preload_f_testany_fn next, int *count, int *requests, int *index, int *flag,
                      void *status, int *ierror);
    void (*f_waitsome)(cc_coll_preload_f_waitsome_fn next, cc_coll_preload_f_testsome_fn test, int *incount,
                       int *requests, int *outcount, int *indices, void *statuses, int *ierror);
    void (*f_testsome)(cc_coll_preload_f_testsome_fn next, int *incount, int *requests, int *outcount,
                       int *indices, void *statuses, int *ierror);
};

/* The core's one export: its table when `api` is CC_COLL_PRELOAD_CORE_API,
 * else NULL. */
const struct cc_coll_preload_core *cc_coll_preload_core_get(int api);

/* built_mpi.c: the MPI the shim was built for, from its mpi.h. abi: 1 Open
 * MPI, 2 the MPICH ABI, 0 unknown; name: e.g. "Open MPI 4.1.4". */
extern const int cc_coll_preload_built_abi;
extern const char cc_coll_preload_built_mpi[];

#ifdef __cplusplus
}
#endif

#endif
