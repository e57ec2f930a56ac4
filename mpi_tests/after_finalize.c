/* Calls after MPI_Finalize are refused cleanly, also once the library has
 * seen MPI up and answers later liveness checks without asking MPI: every
 * collective and point-to-point entry point returns
 * CC_COLL_ERR_MPI_NOT_INITIALIZED naming the finalisation, nothing crashes,
 * and the communicator can still be destroyed. */
#include <stdio.h>
#include <string.h>

#include <mpi.h>

#include "cc_coll.h"

/* The communicator is destroyed after MPI_Finalize on purpose, when MPI can
 * no longer free the library's duplicate of MPI_COMM_WORLD (MPI_Finalize
 * frees no object the program created), so that duplicate is never freed.
 * In an ASan build LeakSanitizer is told not to count what
 * cc_coll_comm_create allocates; every other allocation still counts. */
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#define LEAKED_BY_DESIGN_BEGIN() __lsan_disable()
#define LEAKED_BY_DESIGN_END() __lsan_enable()
#else
#define LEAKED_BY_DESIGN_BEGIN() ((void)0)
#define LEAKED_BY_DESIGN_END() ((void)0)
#endif

static int failures = 0;

static void expect_finalised(const char *what, cc_coll_status_t st)
{
    if (st != CC_COLL_ERR_MPI_NOT_INITIALIZED || strstr(cc_coll_last_error(), "finalised") == NULL) {
        fprintf(stderr, "FAIL %s: %s (%s)\n", what, cc_coll_status_string(st), cc_coll_last_error());
        ++failures;
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    cc_coll_comm_h comm = NULL;
    LEAKED_BY_DESIGN_BEGIN();
    const cc_coll_status_t created = cc_coll_comm_create(MPI_COMM_WORLD, &comm);
    LEAKED_BY_DESIGN_END();
    if (created != CC_COLL_OK) {
        fprintf(stderr, "cc_coll_comm_create: %s\n", cc_coll_last_error());
        return 1;
    }
    float x[4] = {1, 2, 3, 4};
    /* Several calls while MPI is up (the later ones take the fast check). */
    for (int i = 0; i < 3; ++i) {
        x[0] = 1;
        if (cc_coll_allreduce(x, x, 4, CC_COLL_F32, CC_COLL_SUM, NULL, comm, NULL) != CC_COLL_OK ||
            x[0] != (float)size) {
            fprintf(stderr, "allreduce before finalize: %s\n", cc_coll_last_error());
            ++failures;
        }
    }
    MPI_Finalize();

    expect_finalised("cc_coll_allreduce", cc_coll_allreduce(x, x, 4, CC_COLL_F32, CC_COLL_SUM, NULL, comm, NULL));
    const void *sends[1] = {x};
    void *recvs[1] = {x};
    const size_t counts[1] = {4};
    const cc_coll_dtype_t dtypes[1] = {CC_COLL_F32};
    expect_finalised("cc_coll_allreduce_group",
                     cc_coll_allreduce_group(1, sends, recvs, counts, dtypes, CC_COLL_SUM, NULL, comm, NULL));
    expect_finalised("cc_coll_reduce_scatter",
                     cc_coll_reduce_scatter(x, x, 1, CC_COLL_F32, CC_COLL_SUM, NULL, comm, NULL));
    expect_finalised("cc_coll_send", cc_coll_send(x, 4, CC_COLL_F32, (rank + 1) % 2, 0, 0, NULL, comm, NULL));
    if (cc_coll_comm_destroy(comm) != CC_COLL_OK) {
        fprintf(stderr, "FAIL cc_coll_comm_destroy after finalize: %s\n", cc_coll_last_error());
        ++failures;
    }
    if (failures == 0) printf("after_finalize: rank %d OK\n", rank);
    return failures == 0 ? 0 : 1;
}
