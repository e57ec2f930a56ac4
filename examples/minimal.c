/* The minimal C usage of libcc_coll shown in README.md. */
#include <stdio.h>

#include <mpi.h>

#include "cc_coll.h"

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);

    cc_coll_comm_h comm;
    if (cc_coll_comm_create(MPI_COMM_WORLD, &comm) != CC_COLL_OK) {
        fprintf(stderr, "cc_coll_comm_create: %s\n", cc_coll_last_error());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }

    float grad[4] = {1.0f, 2.0f, 3.0f, 4.0f};
    cc_coll_params_t params = {.mask = CC_COLL_PARAMS_FIELD_METHOD, .method = CC_COLL_METHOD_NONE};
    cc_coll_status_t st = cc_coll_allreduce(grad, grad, 4, CC_COLL_F32, CC_COLL_AVG, &params, comm, NULL);
    if (st != CC_COLL_OK) {
        fprintf(stderr, "cc_coll_allreduce: %s (%s)\n", cc_coll_status_string(st), cc_coll_last_error());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    printf("average: %g %g %g %g\n", grad[0], grad[1], grad[2], grad[3]);

    cc_coll_comm_destroy(comm);
    MPI_Finalize();
    return 0;
}
