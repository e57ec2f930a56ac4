/*
 * An ordinary MPI program: no libcc_coll header, no libcc_coll link. The
 * preload tests run it under LD_PRELOAD=libcc_coll_preload.so with
 * CC_COLL_METHOD=quant or onebit (docs/algorithms.md, section 10).
 *
 *   quant_allreduce quant|onebit     the method the environment names, at
 *                                    its default settings
 *
 * STEPS calls of MPI_Allreduce on 1.14 MiB of floats (out of place) and
 * STEPS on 1.14 MiB of doubles (in place), the same input every step, with
 * error feedback on (the default). Every call's result must be
 *   - the same bits on every rank (rank 0's, broadcast, compared);
 *   - at most LEVELS distinct values in each chunk of the first rank's block
 *     (16 in 256 elements for QUANT's 4 bits, 2 in 1024 for ONEBIT): the
 *     owner codes its summed block before the allgather, so the call went
 *     through the method, as no exact sum of these inputs has so few;
 *   - near the exact sum: relative L2 error below the method's bound
 *     (0.25 for QUANT at 4 bits, 2 for ONEBIT's signs: with error feedback
 *     a call also sends what earlier calls left in the residual);
 * and the mean of the STEPS results must be nearer the exact sum than the
 * first one: error feedback carries what a call did not send into the next.
 * Rank 0 prints "quant_allreduce: ... PASS" on stderr after MPI_Finalize
 * when every rank passed.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "preload_test.h"

static const char *const test_name = "quant_allreduce";
static int rank, size, failures;

static int levels;      /* distinct values a chunk may take */
static long chunk;      /* elements per chunk */
static double max_rel;  /* bound on the relative L2 error of one call */

#define N_F 300000L /* 1.14 MiB of floats: above the 1 MiB default threshold */
#define N_D 150000L /* 1.14 MiB of doubles */
#define STEPS 5

/* A non-integer value in (-1, 1). */
static double gval(int r, long i, int salt)
{
    const uint64_t x = mix((uint64_t)r * 0x9e3779b97f4a7c15ULL + (uint64_t)i * 0xd1b54a32d192ed03ULL +
                           (uint64_t)salt * 0x94d049bb133111ebULL);
    return (double)(x >> 11) * (2.0 / 9007199254740992.0) - 1.0;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double rel_error(const double *got, const double *exact, long n)
{
    double num = 0, den = 0;
    for (long i = 0; i < n; ++i) {
        num += (got[i] - exact[i]) * (got[i] - exact[i]);
        den += exact[i] * exact[i];
    }
    return sqrt(num / den);
}

/* One call's result (as doubles): distinct values per chunk of block 0
 * (elements [0, ceil(n / size))), and the error against the exact sum. */
static double check_result(const char *what, int step, const double *got, const double *exact, long n)
{
    const long block = (n + size - 1) / size;
    double *sorted = malloc((size_t)chunk * sizeof *sorted);
    long crowded = 0;
    for (long lo = 0; lo < block; lo += chunk) {
        const long len = block - lo < chunk ? block - lo : chunk;
        memcpy(sorted, got + lo, (size_t)len * sizeof *sorted);
        qsort(sorted, (size_t)len, sizeof *sorted, cmp_double);
        int distinct = 1;
        for (long i = 1; i < len; ++i) distinct += sorted[i] != sorted[i - 1];
        if (distinct > levels) ++crowded;
    }
    free(sorted);
    CHECK(crowded == 0, "%s step %d: %ld chunks hold more than %d distinct values: not sent by the method", what, step,
          crowded, levels);
    const double rel = rel_error(got, exact, n);
    CHECK(rel < max_rel, "%s step %d: relative error %.3g, not below %.3g", what, step, rel, max_rel);
    if (rank == 0) printf("quant_allreduce: %s step %d: relative error %.3g\n", what, step, rel);
    return rel;
}

/* Rank 0's bytes broadcast and compared with this rank's. */
static void check_same_bits(const char *what, int step, const void *buf, size_t bytes)
{
    unsigned char *root = malloc(bytes);
    memcpy(root, buf, bytes);
    MPI_Bcast(root, (int)bytes, MPI_BYTE, 0, MPI_COMM_WORLD);
    CHECK(memcmp(root, buf, bytes) == 0, "%s step %d: result differs from rank 0's", what, step);
    free(root);
}

static void exact_sums(long n, int salt, int as_float, double *exact)
{
    for (long i = 0; i < n; ++i) {
        exact[i] = 0;
        for (int q = 0; q < size; ++q) exact[i] += as_float ? (double)(float)gval(q, i, salt) : gval(q, i, salt);
    }
}

/* Error feedback: the mean of the results is nearer the exact sum. */
static void check_mean(const char *what, const double *sum, const double *exact, long n, double first)
{
    double *mean = malloc((size_t)n * sizeof *mean);
    for (long i = 0; i < n; ++i) mean[i] = sum[i] / STEPS;
    const double rel = rel_error(mean, exact, n);
    CHECK(rel < first, "%s: the mean of %d results (relative error %.3g) is no nearer than the first (%.3g)", what,
          STEPS, rel, first);
    if (rank == 0) printf("quant_allreduce: %s: mean of %d results: relative error %.3g\n", what, STEPS, rel);
    free(mean);
}

static void check_float_out_of_place(void)
{
    float *g = malloc(N_F * sizeof *g), *r = malloc(N_F * sizeof *r);
    double *exact = malloc(N_F * sizeof *exact), *got = malloc(N_F * sizeof *got), *sum = calloc(N_F, sizeof *sum);
    for (long i = 0; i < N_F; ++i) g[i] = (float)gval(rank, i, 1);
    exact_sums(N_F, 1, 1, exact);
    double first = 0;
    for (int t = 1; t <= STEPS; ++t) {
        CHECK(MPI_Allreduce(g, r, (int)N_F, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS, "allreduce");
        check_same_bits("float", t, r, N_F * sizeof *r);
        for (long i = 0; i < N_F; ++i) got[i] = r[i], sum[i] += r[i];
        const double rel = check_result("float", t, got, exact, N_F);
        if (t == 1) first = rel;
    }
    check_mean("float", sum, exact, N_F, first);
    free(g), free(r), free(exact), free(got), free(sum);
}

static void check_double_in_place(void)
{
    double *buf = malloc(N_D * sizeof *buf), *exact = malloc(N_D * sizeof *exact), *sum = calloc(N_D, sizeof *sum);
    exact_sums(N_D, 2, 0, exact);
    double first = 0;
    for (int t = 1; t <= STEPS; ++t) {
        for (long i = 0; i < N_D; ++i) buf[i] = gval(rank, i, 2);
        CHECK(MPI_Allreduce(MPI_IN_PLACE, buf, (int)N_D, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS,
              "allreduce");
        check_same_bits("double", t, buf, N_D * sizeof *buf);
        for (long i = 0; i < N_D; ++i) sum[i] += buf[i];
        const double rel = check_result("double", t, buf, exact, N_D);
        if (t == 1) first = rel;
    }
    check_mean("double", sum, exact, N_D, first);
    free(buf), free(exact), free(sum);
}

int main(int argc, char **argv)
{
    if (MPI_Init(&argc, &argv) != MPI_SUCCESS) return 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc == 2 && strcmp(argv[1], "quant") == 0) {
        levels = 16, chunk = 256, max_rel = 0.25;
    } else if (argc == 2 && strcmp(argv[1], "onebit") == 0) {
        levels = 2, chunk = 1024, max_rel = 2.0;
    } else {
        if (rank == 0) fprintf(stderr, "usage: quant_allreduce quant|onebit\n");
        MPI_Finalize();
        return 2;
    }

    check_float_out_of_place();
    check_double_in_place();

    int total = 0;
    MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    fflush(stdout);
    MPI_Finalize();
    if (rank == 0) {
        if (total == 0) fprintf(stderr, "quant_allreduce: %d ranks, %s: PASS\n", size, argv[1]);
        else fprintf(stderr, "quant_allreduce: %d ranks, %s: %d checks FAILED\n", size, argv[1], total);
    }
    return total == 0 ? 0 : 1;
}
