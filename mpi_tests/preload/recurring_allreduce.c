/*
 * An ordinary MPI program (no libcc_coll header, no libcc_coll link) with
 * the mix of reductions that broke real applications under the shim: a
 * one-off 2 MiB histogram of doubles (like a LAMMPS fix ave/chunk over a fine
 * grid) next to a recurring gradient-like sum. Every MPI_Allreduce is
 * checked against PMPI_Allreduce of the same input (plain MPI, which the
 * shim does not intercept): "exact" means bit-identical to it, "compressed"
 * means more than half of the elements differ from it.
 *
 *   recurring_allreduce MODE N
 *
 * N is the CC_COLL_MIN_REPEATS in effect (the default is 100). Phases:
 *
 *   histogram    2 MiB of doubles on MPI_COMM_WORLD, once; then 5 more
 *                samples, each into a new buffer: always exact
 *   gradient     1.14 MiB of floats on a communicator named "gradients",
 *                the same buffers N + 20 times from gradient_step(): the
 *                first N calls exact, the 20 after them compressed
 *   disagree     1.14 MiB of floats on MPI_COMM_WORLD; even ranks always
 *                reduce into buffer A, odd ranks into A for N/2 calls and
 *                into B after that, so that the ranks' repeat counts differ:
 *                exact for N/2 + N calls (until B has recurred N times on the
 *                odd ranks), compressed for the 20 after them
 *   self         1.14 MiB of floats on MPI_COMM_SELF, N + 20 times: exact
 *   diagnostics  1.14 MiB of doubles on a communicator named "diagnostics",
 *                N + 20 times from diagnostics_step(): like gradient
 *
 * MODE says what the settings make of it:
 *   default   the above (CC_COLL_METHOD=topk and nothing else)
 *   deny      diagnostics never compressed (CC_COLL_DENY=comm:diagnostics
 *             or site:diagnostics_step)
 *   allow     only gradients compressed (CC_COLL_ALLOW=comm:gradients)
 *   exact     nothing compressed (no shim, method none, or one rank)
 *
 * Rank 0 prints "recurring_allreduce: N ranks, MODE: PASS" on stderr after
 * MPI_Finalize when every rank passed.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "preload_test.h"

static const char *const test_name = "recurring_allreduce";
static int rank, size, failures, repeats;
static const char *mode;


/* A non-integer value in (-1, 1), different on every rank. */
static double gval(long i, int salt)
{
    const uint64_t x = mix((uint64_t)rank * 0x9e3779b97f4a7c15ULL + (uint64_t)i * 0xd1b54a32d192ed03ULL +
                           (uint64_t)salt * 0x94d049bb133111ebULL);
    return (double)(x >> 11) * (2.0 / 9007199254740992.0) - 1.0;
}

/* Elements of `got` that differ bit-wise from `ref`. */
static long differing(const void *got, const void *ref, long n, int elem)
{
    long d = 0;
    for (long i = 0; i < n; ++i) d += memcmp((const char *)got + i * elem, (const char *)ref + i * elem, elem) != 0;
    return d;
}

/* Checks the result `recv` of an MPI_Allreduce (rc its return code) against
 * PMPI_Allreduce of the same input into `ref`. */
static void check_result(const char *phase, int step, int rc, const void *send, const void *recv, void *ref, long n,
                         MPI_Datatype type, MPI_Comm comm, int expect_compressed)
{
    const int elem = type == MPI_DOUBLE ? 8 : 4;
    CHECK(rc == MPI_SUCCESS, "%s: MPI_Allreduce returned %d", phase, rc);
    CHECK(PMPI_Allreduce(send, ref, (int)n, type, MPI_SUM, comm) == MPI_SUCCESS, "%s: PMPI_Allreduce", phase);
    const long d = differing(recv, ref, n, elem);
    if (expect_compressed)
        CHECK(d > n / 2, "%s: call %d: only %ld of %ld elements differ from plain MPI: not compressed", phase, step,
              d, n);
    else
        CHECK(d == 0, "%s: call %d: %ld of %ld elements differ from plain MPI: not exact", phase, step, d, n);
}

#define N_HIST (262144L) /* 2 MiB of doubles */
#define N_F 300000L      /* 1.14 MiB of floats */
#define N_D 150000L      /* 1.14 MiB of doubles */
#define EXTRA 20         /* calls after the first N */

/* The call sites of the phases: functions of their own, in the dynamic
 * symbol table (the program is linked with -rdynamic), so that
 * CC_COLL_DENY=site:diagnostics_step can name one. */
__attribute__((noinline)) void histogram_step(double *bins, double *out, double *ref, int sample)
{
    for (long i = 0; i < N_HIST; ++i) bins[i] = gval(i, 100 + sample);
    const int rc = MPI_Allreduce(bins, out, (int)N_HIST, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    check_result("histogram", sample, rc, bins, out, ref, N_HIST, MPI_DOUBLE, MPI_COMM_WORLD, 0);
}

static void histogram(void)
{
    double *bins = malloc(N_HIST * sizeof *bins), *ref = malloc(N_HIST * sizeof *ref);
    double *out[6];
    for (int k = 0; k < 6; ++k) out[k] = malloc(N_HIST * sizeof *out[k]);
    for (int k = 0; k < 6; ++k) histogram_step(bins, out[k], ref, k + 1);
    for (int k = 0; k < 6; ++k) free(out[k]);
    free(bins), free(ref);
}

__attribute__((noinline)) void gradient_step(const float *g, float *r, float *ref, int step, MPI_Comm comm,
                                             int compress)
{
    const int rc = MPI_Allreduce(g, r, (int)N_F, MPI_FLOAT, MPI_SUM, comm);
    check_result("gradient", step, rc, g, r, ref, N_F, MPI_FLOAT, comm, compress);
}

static void gradient(int compressing)
{
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_name(comm, "gradients");
    float *g = malloc(N_F * sizeof *g), *r = malloc(N_F * sizeof *r), *ref = malloc(N_F * sizeof *ref);
    for (long i = 0; i < N_F; ++i) g[i] = (float)gval(i, 1);
    for (int t = 1; t <= repeats + EXTRA; ++t) gradient_step(g, r, ref, t, comm, compressing && t > repeats);
    MPI_Comm_free(&comm);
    free(g), free(r), free(ref);
}

static void disagree(int compressing)
{
    float *g = malloc(N_F * sizeof *g), *a = malloc(N_F * sizeof *a), *b = malloc(N_F * sizeof *b);
    float *ref = malloc(N_F * sizeof *ref);
    for (long i = 0; i < N_F; ++i) g[i] = (float)gval(i, 2);
    const int switch_at = repeats / 2, ready = repeats / 2 + repeats;
    for (int t = 1; t <= ready + EXTRA; ++t) {
        float *r = rank % 2 == 1 && t > switch_at ? b : a;
        const int rc = MPI_Allreduce(g, r, (int)N_F, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        check_result("disagree", t, rc, g, r, ref, N_F, MPI_FLOAT, MPI_COMM_WORLD, compressing && t > ready);
    }
    free(g), free(a), free(b), free(ref);
}

static void self(void)
{
    float *g = malloc(N_F * sizeof *g), *r = malloc(N_F * sizeof *r), *ref = malloc(N_F * sizeof *ref);
    for (long i = 0; i < N_F; ++i) g[i] = (float)gval(i, 3);
    for (int t = 1; t <= repeats + EXTRA; ++t) {
        const int rc = MPI_Allreduce(g, r, (int)N_F, MPI_FLOAT, MPI_SUM, MPI_COMM_SELF);
        check_result("MPI_COMM_SELF", t, rc, g, r, ref, N_F, MPI_FLOAT, MPI_COMM_SELF, 0);
        if (t == 1) CHECK(differing(r, g, N_F, 4) == 0, "MPI_COMM_SELF: the sum over one rank is not the input");
    }
    free(g), free(r), free(ref);
}

__attribute__((noinline)) void diagnostics_step(const double *v, double *r, double *ref, int step, MPI_Comm comm,
                                                int compress)
{
    const int rc = MPI_Allreduce(v, r, (int)N_D, MPI_DOUBLE, MPI_SUM, comm);
    check_result("diagnostics", step, rc, v, r, ref, N_D, MPI_DOUBLE, comm, compress);
}

static void diagnostics(int compressing)
{
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_name(comm, "diagnostics");
    double *v = malloc(N_D * sizeof *v), *r = malloc(N_D * sizeof *r), *ref = malloc(N_D * sizeof *ref);
    for (long i = 0; i < N_D; ++i) v[i] = gval(i, 4);
    for (int t = 1; t <= repeats + EXTRA; ++t) diagnostics_step(v, r, ref, t, comm, compressing && t > repeats);
    MPI_Comm_free(&comm);
    free(v), free(r), free(ref);
}

int main(int argc, char **argv)
{
    if (MPI_Init(&argc, &argv) != MPI_SUCCESS) return 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *modes[] = {"default", "deny", "allow", "exact"};
    int known = 0;
    for (int k = 0; k < 4; ++k) known = known || (argc == 3 && strcmp(argv[1], modes[k]) == 0);
    repeats = argc == 3 ? atoi(argv[2]) : 0;
    if (!known || repeats < 2) {
        if (rank == 0) fprintf(stderr, "usage: recurring_allreduce default|deny|allow|exact N (N >= 2)\n");
        MPI_Finalize();
        return 2;
    }
    mode = argv[1];
    const int on = strcmp(mode, "exact") != 0 && size > 1;

    histogram();
    gradient(on);
    disagree(on && strcmp(mode, "allow") != 0);
    self();
    diagnostics(on && strcmp(mode, "default") == 0);

    int total = 0;
    MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Finalize();
    if (rank == 0) {
        if (total == 0) fprintf(stderr, "recurring_allreduce: %d ranks, %s: PASS\n", size, mode);
        else fprintf(stderr, "recurring_allreduce: %d ranks, %s: %d checks FAILED\n", size, mode, total);
    }
    return total == 0 ? 0 : 1;
}
