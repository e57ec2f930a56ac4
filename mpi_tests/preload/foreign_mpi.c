/*
 * An ordinary MPI program that tells the preload shim it runs on the other
 * MPI ABI: it defines MPI_Get_library_version / PMPI_Get_library_version
 * (MPI's profiling interface; the program exports them) to answer with an
 * MPICH version string when built with Open MPI and an Open MPI one
 * otherwise. The shim must then say on stderr that it was built for another
 * MPI and stay out of the way: every call reaches MPI unchanged, so every
 * large float and double sum below is exact, and the shim prints no summary
 * at MPI_Finalize. (The real thing, a shim built with one MPI preloaded
 * into a program of the other, is the preload_cross_mpi_* tests.)
 *
 * Rank 0 prints "foreign_mpi: <n> ranks, exact: PASS" on stderr after
 * MPI_Finalize when every rank passed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "preload_test.h"

static const char *const test_name = "foreign_mpi";
static int rank, size, failures;

#if defined(OPEN_MPI)
static const char kOther[] = "MPICH Version:      4.0.2\nMPICH Release date: Thu Apr  7 12:34:45 CDT 2022\n";
#else
static const char kOther[] = "Open MPI v4.1.4, package: Debian OpenMPI, ident: 4.1.4, repo rev: v4.1.4, May 26, 2022";
#endif

int PMPI_Get_library_version(char *version, int *resultlen)
{
    const int n = (int)sizeof kOther - 1 < MPI_MAX_LIBRARY_VERSION_STRING - 1 ? (int)sizeof kOther - 1
                                                                              : MPI_MAX_LIBRARY_VERSION_STRING - 1;
    memcpy(version, kOther, (size_t)n);
    version[n] = '\0';
    *resultlen = n;
    return MPI_SUCCESS;
}

int MPI_Get_library_version(char *version, int *resultlen) { return PMPI_Get_library_version(version, resultlen); }

/* An integer in [-1000, 1000]: sums of these over a few ranks are exact. */
static int ival(int r, long i, int salt)
{
    return (int)(mix((uint64_t)r * 7919u + (uint64_t)i * 104729u + (uint64_t)salt) % 2001u) - 1000;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    /* 1.14 MiB of floats and of doubles: eligible for compression, were the
     * shim not out of the way (the tests run with CC_COLL_MIN_REPEATS=0). */
    enum { nf = 300000, nd = 150000, steps = 3 };
    float *f = malloc(nf * sizeof *f), *fo = malloc(nf * sizeof *fo);
    double *d = malloc(nd * sizeof *d);
    for (int step = 0; step < steps; ++step) {
        for (long i = 0; i < nf; ++i) f[i] = (float)ival(rank, i, step);
        for (long i = 0; i < nd; ++i) d[i] = (double)ival(rank, i, 100 + step);
        CHECK(MPI_Allreduce(f, fo, nf, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS, "float allreduce");
        CHECK(MPI_Allreduce(MPI_IN_PLACE, f, nf, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS,
              "float allreduce in place");
        CHECK(MPI_Allreduce(MPI_IN_PLACE, d, nd, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS,
              "double allreduce in place");
        long bad_f = 0, bad_d = 0;
        for (long i = 0; i < nf; ++i) {
            long sum = 0;
            for (int r = 0; r < size; ++r) sum += ival(r, i, step);
            bad_f += fo[i] != (float)sum || f[i] != (float)sum;
        }
        for (long i = 0; i < nd; ++i) {
            long sum = 0;
            for (int r = 0; r < size; ++r) sum += ival(r, i, 100 + step);
            bad_d += d[i] != (double)sum;
        }
        CHECK(bad_f == 0, "step %d: %ld float sums are not exact", step, bad_f);
        CHECK(bad_d == 0, "step %d: %ld double sums are not exact", step, bad_d);
    }
    free(f);
    free(fo);
    free(d);

    int total = 0;
    MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Finalize();
    if (rank == 0) {
        if (total == 0) fprintf(stderr, "%s: %d ranks, exact: PASS\n", test_name, size);
        else fprintf(stderr, "%s: %d checks FAILED\n", test_name, total);
    }
    return total == 0 ? 0 : 1;
}
