/* A plain MPI program with no libcc_coll in it, built with mpicc alone: the
 * README's LD_PRELOAD quickstart runs it under libcc_coll_preload.so. Like a
 * training loop, it sums a 4 MiB float gradient over the ranks at every
 * step, always from the same call site and buffer. */
#include <stdio.h>

#include <mpi.h>

enum { N = 1 << 20, STEPS = 200 };
static float grad[N];

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (int step = 0; step < STEPS; step++) {
        for (int i = 0; i < N; i++) /* this rank's gradient */
            grad[i] = (float)(((unsigned)i * 7919u + (unsigned)step * 104729u + (unsigned)rank) % 1000u) / 1000.0f - 0.5f;
        MPI_Allreduce(MPI_IN_PLACE, grad, N, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    }
    if (rank == 0) printf("plain_mpi: %d steps of MPI_Allreduce on %d floats\n", STEPS, N);
    MPI_Finalize();
    return 0;
}
