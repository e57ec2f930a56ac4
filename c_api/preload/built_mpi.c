/* Which MPI libcc_coll_preload.so was built for, from that MPI's mpi.h (its
 * macros only: nothing here refers to the MPI library, which the front does
 * not link). */
#include <mpi.h>

#include "core_api.h"

#define CC_PRELOAD_STR2(x) #x
#define CC_PRELOAD_STR(x) CC_PRELOAD_STR2(x)

#if defined(OPEN_MPI)
const int cc_coll_preload_built_abi = 1;
const char cc_coll_preload_built_mpi[] = "Open MPI " CC_PRELOAD_STR(OMPI_MAJOR_VERSION) "." CC_PRELOAD_STR(
    OMPI_MINOR_VERSION) "." CC_PRELOAD_STR(OMPI_RELEASE_VERSION);
#elif defined(MPICH_VERSION)
const int cc_coll_preload_built_abi = 2;
const char cc_coll_preload_built_mpi[] = "MPICH " MPICH_VERSION;
#elif defined(I_MPI_VERSION) || defined(MPICH) || defined(MPICH2) || defined(MVAPICH2_VERSION)
const int cc_coll_preload_built_abi = 2;
const char cc_coll_preload_built_mpi[] = "an MPI of the MPICH ABI";
#else
const int cc_coll_preload_built_abi = 0;
const char cc_coll_preload_built_mpi[] = "an unidentified MPI";
#endif
