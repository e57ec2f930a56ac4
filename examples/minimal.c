/* The minimal C usage of libcc_coll shown in README.md: ten steps of a
 * compressed gradient average, then what compression saved. */
#include <stdio.h>

#include <mpi.h>

#include "cc_coll.h"

enum { N = 1 << 20, STEPS = 10 };
static float grad[N];

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);

    cc_coll_comm_h comm;
    if (cc_coll_comm_create(MPI_COMM_WORLD, &comm) != CC_COLL_OK) {
        fprintf(stderr, "cc_coll_comm_create: %s\n", cc_coll_last_error());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }

    /* TOPK: each rank sends its 1% largest elements; error feedback (on by
     * default) carries the rest of this buffer into its next call. */
    cc_coll_params_t params = {.mask = CC_COLL_PARAMS_FIELD_METHOD | CC_COLL_PARAMS_FIELD_DENSITY,
                               .method = CC_COLL_METHOD_TOPK, .density = 0.01};
    for (int step = 0; step < STEPS; step++) {
        for (int i = 0; i < N; i++) /* this rank's gradient */
            grad[i] = (float)(((unsigned)i * 7919u + (unsigned)step * 104729u + (unsigned)rank) % 1000u) / 1000.0f - 0.5f;
        cc_coll_status_t st = cc_coll_allreduce(grad, grad, N, CC_COLL_F32, CC_COLL_AVG, &params, comm, NULL);
        if (st != CC_COLL_OK) {
            fprintf(stderr, "cc_coll_allreduce: %s (%s)\n", cc_coll_status_string(st), cc_coll_last_error());
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }

    cc_coll_stats_t s = {.mask = CC_COLL_STATS_FIELD_CALLS | CC_COLL_STATS_FIELD_BYTES_UNCOMPRESSED |
                                 CC_COLL_STATS_FIELD_BYTES_WIRE};
    cc_coll_comm_get_stats(comm, &s);
    if (rank == 0)
        printf("%llu allreduce calls: %llu bytes dense, %llu bytes sent (%.1fx less)\n",
               (unsigned long long)s.calls, (unsigned long long)s.bytes_uncompressed,
               (unsigned long long)s.bytes_wire, (double)s.bytes_uncompressed / (double)s.bytes_wire);

    cc_coll_comm_destroy(comm);
    MPI_Finalize();
    return s.bytes_wire < s.bytes_uncompressed ? 0 : 1;
}
