/*
 * An ordinary MPI program: no libcc_coll header, no libcc_coll link. The
 * preload tests run it under LD_PRELOAD=libcc_coll_preload.so with
 * CC_COLL_METHOD=half (docs/algorithms.md, section 9).
 *
 *   half_allreduce bf16|fp16     the format CC_COLL_HALF_FORMAT names
 *
 * STEPS calls of MPI_Allreduce on 1.14 MiB of floats (out of place) and
 * STEPS on 1.14 MiB of doubles (in place), the same input every step, with
 * error feedback as configured. Every call's result must be
 *   - the same bits on every rank (rank 0's, broadcast, compared);
 *   - a value of the format in every element (each rank's owner codes its
 *     summed block once more before the allgather): proof that the call
 *     went through HALF, as no exact sum of these inputs is;
 *   - within the format's rounding of the exact sum, element by element:
 *     the first call (no residual yet) within 2u (the inputs' rounding and
 *     the sum's), the later ones within 4u (error feedback adds the
 *     previous residuals and keeps the new ones: each at most 2u), u the
 *     unit roundoff (2^-8 for bf16, 2^-11 for fp16), relative to the sum
 *     of the ranks' magnitudes, plus half binary16's smallest subnormal
 *     per rounding (size + 1 of them a stage).
 * Rank 0 prints "half_allreduce: ... PASS" on stderr after MPI_Finalize
 * when every rank passed.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "preload_test.h"

static const char *const test_name = "half_allreduce";
static int rank, size, failures;

/* The format: significant bits, least normal exponent, unit roundoff. */
static int fmt_bits, fmt_emin;
static double fmt_u;

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

/* Whether x is a value of the format (finite, fmt_bits significant bits,
 * exponent at least fmt_emin or a subnormal multiple of its quantum). */
static int in_format(double x)
{
    if (x == 0) return 1;
    if (!isfinite(x)) return 0;
    int k;
    frexp(x, &k); /* |x| = m 2^k, m in [0.5, 1) */
    const int e = k - 1 > fmt_emin ? k - 1 : fmt_emin;
    const double scaled = ldexp(x, fmt_bits - 1 - e);
    return scaled == nearbyint(scaled);
}

/* Checks one call's result (as doubles) against the exact sum and the sum
 * of magnitudes, with the bound's factor of u (2 or 4). */
static void check_result(const char *what, int step, const double *got, const double *exact, const double *mags,
                         long n, double factor)
{
    long outside = 0, off_format = 0, worst = 0;
    double worst_ratio = 0;
    for (long i = 0; i < n; ++i) {
        const double bound = factor * fmt_u * (1 + 8 * fmt_u) * mags[i] + ldexp(factor * (size + 1), -25);
        const double err = fabs(got[i] - exact[i]);
        if (!(err <= bound)) ++outside;
        if (err / bound > worst_ratio) worst_ratio = err / bound, worst = i;
        if (!in_format(got[i])) ++off_format;
    }
    CHECK(outside == 0, "%s step %d: %ld of %ld elements beyond %gu of the exact sum (worst: element %ld, %.3g "
          "times the bound)", what, step, outside, n, factor, worst, worst_ratio);
    CHECK(off_format == 0, "%s step %d: %ld of %ld elements are not values of the format: not sent by HALF", what,
          step, off_format, n);
    if (rank == 0)
        printf("half_allreduce: %s step %d: largest error %.3g of the bound\n", what, step, worst_ratio);
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

static void exact_sums(long n, int salt, int as_float, double *exact, double *mags)
{
    for (long i = 0; i < n; ++i) {
        exact[i] = mags[i] = 0;
        for (int q = 0; q < size; ++q) {
            const double v = as_float ? (double)(float)gval(q, i, salt) : gval(q, i, salt);
            exact[i] += v;
            mags[i] += fabs(v);
        }
    }
}

static void check_float_out_of_place(void)
{
    float *g = malloc(N_F * sizeof *g), *r = malloc(N_F * sizeof *r);
    double *exact = malloc(N_F * sizeof *exact), *mags = malloc(N_F * sizeof *mags), *got = malloc(N_F * sizeof *got);
    for (long i = 0; i < N_F; ++i) g[i] = (float)gval(rank, i, 1);
    exact_sums(N_F, 1, 1, exact, mags);
    for (int t = 1; t <= STEPS; ++t) {
        CHECK(MPI_Allreduce(g, r, (int)N_F, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS, "allreduce");
        check_same_bits("float", t, r, N_F * sizeof *r);
        for (long i = 0; i < N_F; ++i) got[i] = r[i];
        check_result("float", t, got, exact, mags, N_F, t == 1 ? 2 : 4);
    }
    free(g), free(r), free(exact), free(mags), free(got);
}

static void check_double_in_place(void)
{
    double *buf = malloc(N_D * sizeof *buf);
    double *exact = malloc(N_D * sizeof *exact), *mags = malloc(N_D * sizeof *mags);
    exact_sums(N_D, 2, 0, exact, mags);
    for (int t = 1; t <= STEPS; ++t) {
        for (long i = 0; i < N_D; ++i) buf[i] = gval(rank, i, 2);
        CHECK(MPI_Allreduce(MPI_IN_PLACE, buf, (int)N_D, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS,
              "allreduce");
        check_same_bits("double", t, buf, N_D * sizeof *buf);
        check_result("double", t, buf, exact, mags, N_D, t == 1 ? 2 : 4);
    }
    free(buf), free(exact), free(mags);
}

int main(int argc, char **argv)
{
    if (MPI_Init(&argc, &argv) != MPI_SUCCESS) return 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc == 2 && strcmp(argv[1], "bf16") == 0) {
        fmt_bits = 8, fmt_emin = -126;
    } else if (argc == 2 && strcmp(argv[1], "fp16") == 0) {
        fmt_bits = 11, fmt_emin = -14;
    } else {
        if (rank == 0) fprintf(stderr, "usage: half_allreduce bf16|fp16\n");
        MPI_Finalize();
        return 2;
    }
    fmt_u = ldexp(1.0, -fmt_bits);

    check_float_out_of_place();
    check_double_in_place();

    int total = 0;
    MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    fflush(stdout);
    MPI_Finalize();
    if (rank == 0) {
        if (total == 0) fprintf(stderr, "half_allreduce: %d ranks, %s: PASS\n", size, argv[1]);
        else fprintf(stderr, "half_allreduce: %d ranks, %s: %d checks FAILED\n", size, argv[1], total);
    }
    return total == 0 ? 0 : 1;
}
