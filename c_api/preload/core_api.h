/* The interface between the two halves of the LD_PRELOAD shim:
 *
 *  - libcc_coll_preload.so (front.c, built_mpi.c): what is preloaded. It
 *    exports the interposed MPI entry points, depends on no MPI library, and
 *    at the first wrapped call looks at the MPI libraries in the process.
 *    Where they are of the MPI the shim was built for it loads the core and
 *    hands every call to it; otherwise it forwards every call to the
 *    program's MPI untouched.
 *  - libcc_coll_preload_core.so (preload.cc): the decision, libcc_coll and
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
#define CC_COLL_PRELOAD_CORE_API 1

/* The MPI's own Fortran entries a wrapper forwards to (pmpi_allreduce_,
 * ...): every argument by reference. */
typedef void (*cc_coll_preload_f_allreduce_fn)(void *sendbuf, void *recvbuf, int *count, int *datatype, int *op,
                                               int *comm, int *ierror);
typedef void (*cc_coll_preload_f_init_fn)(int *ierror);
typedef void (*cc_coll_preload_f_init_thread_fn)(int *required, int *provided, int *ierror);
typedef void (*cc_coll_preload_f_finalize_fn)(int *ierror);

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
