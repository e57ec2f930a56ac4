/*
 * An ordinary MPI program (no libcc_coll header, no libcc_coll link) with
 * known calls, for the shim's advice mode (CC_COLL_ADVISE=1). Per rank,
 * with STEPS steps:
 *
 *   gradient_step   STEPS x MPI_Allreduce of 300000 floats (1.14 MiB), out
 *                   of place, on a communicator named "gradients"
 *   field_step      STEPS x MPI_Allreduce of 150000 doubles (1.14 MiB),
 *                   MPI_IN_PLACE, on MPI_COMM_WORLD
 *   bucket_step     STEPS x MPI_Iallreduce of 300000 floats on
 *                   "gradients", completed with MPI_Wait
 *   never eligible  STEPS x each of: an MPI_INT sum of 300000, an MPI_MAX of
 *                   300000 floats, a sum of 1000 floats, a sum of 300000
 *                   floats on MPI_COMM_SELF; and a one-off 2 MiB histogram
 *                   of doubles into 6 new buffers
 *
 * Under CC_COLL_MIN_REPEATS=R the rule would compress the last STEPS - R
 * calls of each of the first three sites and nothing else. Every input is
 * a non-integer value that differs by rank, step and element, so a
 * compressed call changes the results.
 *
 *   advise_allreduce STEPS
 *
 * Rank 0 prints, on stdout after MPI_Finalize, one line per rank with a
 * 64-bit FNV-1a checksum of every byte every call of that rank returned
 * ("advise_allreduce: rank R of N: checksum 0x..."), then
 * "advise_allreduce: N ranks: done". Runs without the shim and in advice
 * mode must print the same lines.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <mpi.h>

#include "preload_test.h"

static const char *const test_name = "advise_allreduce";
static int rank, size, failures;
static uint64_t checksum = 0xcbf29ce484222325ULL;

#define N_F 300000L      /* 1.14 MiB of floats */
#define N_D 150000L      /* 1.14 MiB of doubles */
#define N_SMALL 1000L
#define N_HIST 262144L   /* 2 MiB of doubles */

static void absorb(const void *p, long bytes)
{
    const unsigned char *b = p;
    for (long i = 0; i < bytes; ++i) checksum = (checksum ^ b[i]) * 0x100000001b3ULL;
}

/* A non-integer value in (-1, 1), different on every rank, step and element. */
static double val(long i, int step, int salt)
{
    const uint64_t x = mix((uint64_t)rank * 0x9e3779b97f4a7c15ULL + (uint64_t)i * 0xd1b54a32d192ed03ULL +
                           (uint64_t)step * 0x94d049bb133111ebULL + (uint64_t)salt * 0xbf58476d1ce4e5b9ULL);
    return (double)(x >> 11) * (2.0 / 9007199254740992.0) - 1.0;
}

/* The call sites: functions of their own, in the dynamic symbol table (the
 * program is linked with -rdynamic), so that the report names them. */
__attribute__((noinline)) void gradient_step(const float *g, float *r, MPI_Comm comm)
{
    CHECK(MPI_Allreduce(g, r, (int)N_F, MPI_FLOAT, MPI_SUM, comm) == MPI_SUCCESS, "gradient_step");
    absorb(r, N_F * (long)sizeof *r);
}

__attribute__((noinline)) void field_step(double *f)
{
    CHECK(MPI_Allreduce(MPI_IN_PLACE, f, (int)N_D, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS,
          "field_step");
    absorb(f, N_D * (long)sizeof *f);
}

__attribute__((noinline)) void bucket_step(const float *g, float *r, MPI_Comm comm)
{
    MPI_Request req;
    CHECK(MPI_Iallreduce(g, r, (int)N_F, MPI_FLOAT, MPI_SUM, comm, &req) == MPI_SUCCESS, "bucket_step");
    CHECK(MPI_Wait(&req, MPI_STATUS_IGNORE) == MPI_SUCCESS, "bucket_step: MPI_Wait");
    absorb(r, N_F * (long)sizeof *r);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const int steps = argc > 1 ? atoi(argv[1]) : 0;
    if (steps <= 0) {
        if (rank == 0) fprintf(stderr, "usage: advise_allreduce STEPS (STEPS > 0)\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_Comm grads;
    MPI_Comm_dup(MPI_COMM_WORLD, &grads);
    MPI_Comm_set_name(grads, "gradients");

    float *g = malloc(N_F * sizeof *g), *r = malloc(N_F * sizeof *r), *b = malloc(N_F * sizeof *b);
    float *small = malloc(N_SMALL * sizeof *small), *small_r = malloc(N_SMALL * sizeof *small_r);
    double *f = malloc(N_D * sizeof *f);
    int *ig = malloc(N_F * sizeof *ig), *ir = malloc(N_F * sizeof *ir);

    /* The one-off histogram, each sample into a new buffer. */
    double *bins = malloc(N_HIST * sizeof *bins);
    for (int k = 0; k < 6; ++k) {
        double *out = malloc(N_HIST * sizeof *out);
        for (long i = 0; i < N_HIST; ++i) bins[i] = val(i, k, 9);
        CHECK(MPI_Allreduce(bins, out, (int)N_HIST, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS,
              "histogram");
        absorb(out, N_HIST * (long)sizeof *out);
        free(out);
    }
    free(bins);

    for (int t = 0; t < steps; ++t) {
        for (long i = 0; i < N_F; ++i) g[i] = (float)val(i, t, 1);
        gradient_step(g, r, grads);
        for (long i = 0; i < N_D; ++i) f[i] = val(i, t, 2);
        field_step(f);
        for (long i = 0; i < N_F; ++i) g[i] = (float)val(i, t, 3);
        bucket_step(g, b, grads);

        for (long i = 0; i < N_F; ++i) ig[i] = (int)(val(i, t, 4) * 1000);
        CHECK(MPI_Allreduce(ig, ir, (int)N_F, MPI_INT, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS, "int sum");
        absorb(ir, N_F * (long)sizeof *ir);
        CHECK(MPI_Allreduce(g, r, (int)N_F, MPI_FLOAT, MPI_MAX, MPI_COMM_WORLD) == MPI_SUCCESS, "max");
        absorb(r, N_F * (long)sizeof *r);
        for (long i = 0; i < N_SMALL; ++i) small[i] = (float)val(i, t, 5);
        CHECK(MPI_Allreduce(small, small_r, (int)N_SMALL, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS,
              "small sum");
        absorb(small_r, N_SMALL * (long)sizeof *small_r);
        CHECK(MPI_Allreduce(g, r, (int)N_F, MPI_FLOAT, MPI_SUM, MPI_COMM_SELF) == MPI_SUCCESS, "MPI_COMM_SELF");
        absorb(r, N_F * (long)sizeof *r);
    }

    /* Every rank's checksum, printed by rank 0 in rank order. */
    uint64_t *all = malloc((size_t)size * sizeof *all);
    MPI_Gather(&checksum, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    int failed = 0;
    MPI_Reduce(&failures, &failed, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Comm_free(&grads);
    MPI_Finalize();
    if (rank == 0) {
        for (int q = 0; q < size; ++q)
            printf("advise_allreduce: rank %d of %d: checksum 0x%016llx\n", q, size, (unsigned long long)all[q]);
        printf("advise_allreduce: %d ranks: %s\n", size, failed == 0 ? "done" : "FAIL");
        fflush(stdout);
    }
    free(all), free(g), free(r), free(b), free(small), free(small_r), free(f), free(ig), free(ir);
    return failed == 0 ? 0 : 1;
}
