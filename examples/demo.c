/* cc_coll_demo: MPI_Allreduce beside every libcc_coll method on one buffer.
 *
 *   mpirun -np 2 cc_coll_demo [--mib N] [--iters N]
 *
 * Each rank fills a float buffer (64 MiB by default) with random values in
 * [-1, 1). For MPI_Allreduce and for each method the library offers (with
 * its default parameters; TOPK keeps density 0.01), it runs an in-place SUM
 * allreduce `iters` times and rank 0 prints:
 *   time      median over the iterations of the slowest rank's time
 *   wire      payload bytes one rank handed to MPI per call (cc_coll stats;
 *             for MPI_Allreduce, the buffer size)
 *   ratio     buffer bytes / wire bytes
 *   rel.err   ||result - MPI_Allreduce result||_2 / ||MPI_Allreduce result||_2
 *             for one call on fresh data (error-feedback residuals are reset
 *             before every iteration, so this is the single-step error that
 *             error feedback then carries into later steps)
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "cc_coll.h"

static void die(const char *what, cc_coll_status_t st)
{
    fprintf(stderr, "cc_coll_demo: %s: %s (%s)\n", what, cc_coll_status_string(st), cc_coll_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median over iterations of the slowest rank's time. */
static double median_max(double *times, int iters)
{
    MPI_Allreduce(MPI_IN_PLACE, times, iters, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    qsort(times, (size_t)iters, sizeof *times, cmp_double);
    return times[iters / 2];
}

/* Relative L2 error of `x` against `ref`, over all ranks. */
static double relative_error(const float *x, const float *ref, size_t n)
{
    double acc[2] = {0.0, 0.0};
    for (size_t i = 0; i < n; ++i) {
        double d = (double)x[i] - (double)ref[i];
        acc[0] += d * d;
        acc[1] += (double)ref[i] * (double)ref[i];
    }
    MPI_Allreduce(MPI_IN_PLACE, acc, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return acc[1] > 0 ? sqrt(acc[0] / acc[1]) : sqrt(acc[0]);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    long mib = 64;
    int iters = 5;
    for (int i = 1; i < argc; ++i) {
        if (strcmp(argv[i], "--mib") == 0 && i + 1 < argc) mib = strtol(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--iters") == 0 && i + 1 < argc) iters = (int)strtol(argv[++i], NULL, 10);
        else {
            if (rank == 0)
                fprintf(stderr, "usage: %s [--mib N (default 64)] [--iters N (default 5)]\n", argv[0]);
            MPI_Finalize();
            return strcmp(argv[i], "--help") == 0 ? 0 : 2;
        }
    }
    if (mib <= 0 || mib > 4096 || iters <= 0 || iters > 1000) {
        if (rank == 0) fprintf(stderr, "cc_coll_demo: --mib must be 1..4096 and --iters 1..1000\n");
        MPI_Finalize();
        return 2;
    }

    const size_t n = (size_t)mib * 1024 * 1024 / sizeof(float);
    float *input = malloc(n * sizeof *input);
    float *ref = malloc(n * sizeof *ref);
    float *out = malloc(n * sizeof *out);
    double *times = malloc((size_t)iters * sizeof *times);
    if (!input || !ref || !out || !times) {
        fprintf(stderr, "cc_coll_demo: out of memory for %ld MiB buffers\n", mib);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    uint64_t state = 0x9e3779b97f4a7c15ULL * (uint64_t)(rank + 1);
    for (size_t i = 0; i < n; ++i) {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        input[i] = (float)((double)(state >> 11) / 9007199254740992.0 * 2.0 - 1.0);
    }

    cc_coll_comm_h comm;
    cc_coll_status_t st = cc_coll_comm_create(MPI_COMM_WORLD, &comm);
    if (st != CC_COLL_OK) die("cc_coll_comm_create", st);

    if (rank == 0) {
        printf("# libcc_coll %s demo: %d ranks, %ld MiB of f32 per rank (%zu elements), SUM, in place, "
               "median of %d\n",
               cc_coll_version_string(), size, mib, n, iters);
        printf("%-16s %12s %14s %8s %12s\n", "method", "time(ms)", "wire(bytes)", "ratio", "rel.err");
    }

    for (int it = 0; it < iters; ++it) {
        memcpy(ref, input, n * sizeof *ref);
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        MPI_Allreduce(MPI_IN_PLACE, ref, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        times[it] = MPI_Wtime() - t0;
    }
    double t_mpi = median_max(times, iters);
    if (rank == 0)
        printf("%-16s %12.2f %14zu %8.2f %12.3e\n", "MPI_Allreduce", t_mpi * 1e3, n * sizeof(float), 1.0, 0.0);

    for (int m = 0; cc_coll_method_name((cc_coll_method_t)m) != NULL; ++m) {
        /* The buffer has no tensor shape: LOWRANK's near-square view is
         * asked for explicitly (rows = cols = 0), since a LOWRANK tensor
         * without a shape is sent densely, as a 1-D tensor; the other
         * methods ignore the shape. */
        cc_coll_params_t params = {.mask = CC_COLL_PARAMS_FIELD_METHOD | CC_COLL_PARAMS_FIELD_SHAPE,
                                   .method = (cc_coll_method_t)m, .rows = 0, .cols = 0};
        cc_coll_comm_reset_stats(comm);
        for (int it = 0; it < iters; ++it) {
            memcpy(out, input, n * sizeof *out);
            if ((st = cc_coll_ef_reset_all(comm)) != CC_COLL_OK) die("cc_coll_ef_reset_all", st);
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            st = cc_coll_allreduce(out, out, n, CC_COLL_F32, CC_COLL_SUM, &params, comm, NULL);
            times[it] = MPI_Wtime() - t0;
            if (st != CC_COLL_OK) die("cc_coll_allreduce", st);
        }
        double t = median_max(times, iters);
        cc_coll_stats_t stats = {.mask = CC_COLL_STATS_FIELD_CALLS | CC_COLL_STATS_FIELD_BYTES_WIRE};
        if ((st = cc_coll_comm_get_stats(comm, &stats)) != CC_COLL_OK) die("cc_coll_comm_get_stats", st);
        double wire = stats.calls ? (double)stats.bytes_wire / (double)stats.calls : 0.0;
        double err = relative_error(out, ref, n);
        if (rank == 0) {
            char label[32];
            snprintf(label, sizeof label, "cc_coll %s", cc_coll_method_name((cc_coll_method_t)m));
            printf("%-16s %12.2f %14.0f %8.2f %12.3e\n", label, t * 1e3, wire,
                   wire > 0 ? (double)(n * sizeof(float)) / wire : 0.0, err);
        }
    }

    cc_coll_comm_destroy(comm);
    free(input);
    free(ref);
    free(out);
    free(times);
    MPI_Finalize();
    return 0;
}
