/*
 * An ordinary MPI program: no libcc_coll header, no libcc_coll link. The
 * preload tests run it under LD_PRELOAD=libcc_coll_preload.so.
 *
 *   plain_allreduce compressed   eligible calls must show top-k compression
 *                                with error feedback: a large error at step
 *                                1, a running mean converging to the exact sum
 *   plain_allreduce exact        every call must be exact (no shim, or the
 *                                shim passing everything through)
 *   plain_allreduce ef-cap       only the CC_COLL_EF_MAX_BYTES=1536K check
 *                                (and MPI_Init instead of MPI_Init_thread):
 *                                a second 1.14 MiB buffer would need a new
 *                                residual beyond the cap, so its call passes
 *                                through (exact) while the first buffer's
 *                                calls stay compressed
 *
 * In the first two modes a receive buffer whose address one rank reuses
 * for a second tensor (and the others do not) must still compress or stay
 * exact, and the ineligible calls (MPI_INT, MPI_MAX, a small
 * message, derived datatypes, an inter-communicator, and an MPI_Iallreduce
 * with MPI_MAX) must give exactly the locally computed result, eligible
 * MPI_Iallreduce calls are decided as MPI_Allreduce ones, and
 * MPI_Init_thread must honour MPI_THREAD_MULTIPLE. Rank 0 prints "plain_allreduce: ... PASS" on stderr
 * after MPI_Finalize when every rank passed.
 */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "preload_test.h"

static const char *const test_name = "plain_allreduce";
static int rank, size, failures, compressed;


/* A non-integer value in (-1, 1). */
static double gval(int r, long i, int salt)
{
    const uint64_t x = mix((uint64_t)r * 0x9e3779b97f4a7c15ULL + (uint64_t)i * 0xd1b54a32d192ed03ULL +
                           (uint64_t)salt * 0x94d049bb133111ebULL);
    return (double)(x >> 11) * (2.0 / 9007199254740992.0) - 1.0;
}

/* An integer in [-1000, 1000]: sums of a few of these are exact in binary32. */
static int ival(int r, long i, int salt) { return (int)(mix((uint64_t)r * 7919u + (uint64_t)i * 104729u + (uint64_t)salt) % 2001u) - 1000; }

/* ||a - b|| / ||b||. */
static double rel_err(const double *a, const double *b, long n)
{
    double num = 0, den = 0;
    for (long i = 0; i < n; ++i) {
        num += (a[i] - b[i]) * (a[i] - b[i]);
        den += b[i] * b[i];
    }
    return sqrt(num / den);
}

/* ---- eligible binary32, out of place: convergence of the running mean ---- */
#define N_F 300000L /* 1.14 MiB of floats: above the 1 MiB default threshold */
#define STEPS 400

static void check_convergence_float(void)
{
    float *g = malloc(N_F * sizeof *g), *r = malloc(N_F * sizeof *r);
    double *exact = calloc(N_F, sizeof *exact), *acc = calloc(N_F, sizeof *acc), *mean = malloc(N_F * sizeof *mean);
    for (long i = 0; i < N_F; ++i) {
        g[i] = (float)gval(rank, i, 1);
        for (int q = 0; q < size; ++q) exact[i] += (float)gval(q, i, 1);
    }
    double err[STEPS + 1];
    for (int t = 1; t <= STEPS; ++t) {
        CHECK(MPI_Allreduce(g, r, (int)N_F, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS, "allreduce");
        for (long i = 0; i < N_F; ++i) acc[i] += r[i];
        if (t == 1 || t == 10 || t == 100 || t == STEPS) {
            for (long i = 0; i < N_F; ++i) mean[i] = acc[i] / t;
            err[t] = rel_err(mean, exact, N_F);
            if (rank == 0) printf("plain_allreduce: float out of place: step %d: running-mean error %.3e\n", t, err[t]);
        }
    }
    if (compressed) {
        CHECK(err[1] > 0.5, "float step 1 error %.3e: no compression happened", err[1]);
        CHECK(err[100] < 0.6 * err[1] && err[STEPS] < 0.4 * err[100] && err[STEPS] < 0.2,
              "float running mean does not converge: %.3e %.3e %.3e", err[1], err[100], err[STEPS]);
    } else {
        CHECK(err[1] < 1e-6 && err[STEPS] < 1e-6, "float not exact: %.3e %.3e", err[1], err[STEPS]);
    }
    free(g), free(r), free(exact), free(acc), free(mean);
}

/* ---- eligible binary64, in place ---- */
#define N_D 150000L /* 1.14 MiB of doubles */
#define STEPS_D 200

static void check_convergence_double_in_place(void)
{
    double *g = malloc(N_D * sizeof *g), *buf = malloc(N_D * sizeof *buf);
    double *exact = calloc(N_D, sizeof *exact), *acc = calloc(N_D, sizeof *acc), *mean = malloc(N_D * sizeof *mean);
    for (long i = 0; i < N_D; ++i) {
        g[i] = gval(rank, i, 2);
        for (int q = 0; q < size; ++q) exact[i] += gval(q, i, 2);
    }
    double err1 = 0, err_last = 0;
    for (int t = 1; t <= STEPS_D; ++t) {
        memcpy(buf, g, N_D * sizeof *g);
        CHECK(MPI_Allreduce(MPI_IN_PLACE, buf, (int)N_D, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS,
              "allreduce");
        for (long i = 0; i < N_D; ++i) acc[i] += buf[i];
        if (t == 1 || t == STEPS_D) {
            for (long i = 0; i < N_D; ++i) mean[i] = acc[i] / t;
            const double e = rel_err(mean, exact, N_D);
            if (t == 1) err1 = e;
            else err_last = e;
            if (rank == 0) printf("plain_allreduce: double in place: step %d: running-mean error %.3e\n", t, e);
        }
    }
    if (compressed) {
        CHECK(err1 > 0.5, "double step 1 error %.3e: no compression happened", err1);
        CHECK(err_last < 0.5 * err1, "double running mean does not converge: %.3e -> %.3e", err1, err_last);
    } else {
        CHECK(err1 < 1e-12 && err_last < 1e-12, "double not exact: %.3e %.3e", err1, err_last);
    }
    free(g), free(buf), free(exact), free(acc), free(mean);
}

/* ---- the other eligible types, one call each on a fresh buffer ---- */
static void check_type(MPI_Datatype type, const char *name, int bytes_per)
{
    const long n = (1L << 20) / bytes_per + 17;
    void *s = malloc(n * bytes_per), *r = malloc(n * bytes_per);
    double *exact = calloc(n, sizeof *exact), *got = malloc(n * sizeof *got);
    for (long i = 0; i < n; ++i) {
        if (bytes_per == 4) ((float *)s)[i] = (float)gval(rank, i, 3);
        else ((double *)s)[i] = gval(rank, i, 3);
        for (int q = 0; q < size; ++q) exact[i] += bytes_per == 4 ? (double)(float)gval(q, i, 3) : gval(q, i, 3);
    }
    CHECK(MPI_Allreduce(s, r, (int)n, type, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS, "allreduce %s", name);
    for (long i = 0; i < n; ++i) got[i] = bytes_per == 4 ? ((float *)r)[i] : ((double *)r)[i];
    const double e = rel_err(got, exact, n);
    if (compressed) CHECK(e > 0.5, "%s: error %.3e: not compressed", name, e);
    else CHECK(e < 1e-6, "%s: error %.3e: not exact", name, e);
    free(s), free(r), free(exact), free(got);
}

/* ---- a receive buffer's address reused on one rank only ----
 * Rank 0 reduces twice into one buffer, the other ranks into two: what a
 * program meets when malloc hands a freed buffer's address back on some
 * ranks only. Tensors without a key are named by their receive buffer, so
 * under LOWRANK rank 0's second call meets the first call's state (its call
 * count) and the other ranks a fresh one; both calls must still compress. */
static void check_address_reused(void)
{
    const long n = (1L << 20) / 4 + 29;
    float *s = malloc(n * sizeof *s), *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    double *exact = calloc(n, sizeof *exact), *got = malloc(n * sizeof *got);
    for (long i = 0; i < n; ++i) {
        s[i] = (float)gval(rank, i, 5);
        for (int q = 0; q < size; ++q) exact[i] += (double)(float)gval(q, i, 5);
    }
    for (int k = 0; k < 2; ++k) {
        float *r = k == 1 && rank != 0 ? b : a;
        CHECK(MPI_Allreduce(s, r, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS, "allreduce");
        for (long i = 0; i < n; ++i) got[i] = r[i];
        const double e = rel_err(got, exact, n);
        if (compressed) CHECK(e > 0.5, "address reused on rank 0 only: call %d: error %.3e: not compressed", k, e);
        else CHECK(e < 1e-6, "address reused on rank 0 only: call %d: error %.3e: not exact", k, e);
    }
    free(s), free(a), free(b), free(exact), free(got);
}

/* ---- ineligible calls: bit-identical to the exact result ---- */
#define N_I 300000L

static void fill_int_floats(float *f, long n, int r, int salt)
{
    for (long i = 0; i < n; ++i) f[i] = (float)ival(r, i, salt);
}

static void expect_float_sum(const float *got, long n, int salt, const char *what)
{
    long bad = 0;
    for (long i = 0; i < n; ++i) {
        float e = 0;
        for (int q = 0; q < size; ++q) e += (float)ival(q, i, salt);
        if (memcmp(&got[i], &e, sizeof e) != 0) ++bad;
    }
    CHECK(bad == 0, "%s: %ld of %ld elements differ from the exact sum", what, bad, n);
}

/* An eligible call's result: compressed (most elements differ from the
 * exact sum) in `compressed` mode, else exact. */
static void expect_float_sum_or_compressed(const float *got, long n, int salt, const char *what)
{
    if (!compressed) {
        expect_float_sum(got, n, salt, what);
        return;
    }
    long differ = 0;
    for (long i = 0; i < n; ++i) {
        float e = 0;
        for (int q = 0; q < size; ++q) e += (float)ival(q, i, salt);
        differ += got[i] != e;
    }
    CHECK(differ > n / 2, "%s: only %ld of %ld elements differ from the exact sum: not compressed", what, differ, n);
}

/* A user-defined sum over floats, and over the contiguous type of 4 floats. */
static void user_sum(void *in, void *inout, int *len, MPI_Datatype *type)
{
    int n = *len;
    if (*type != MPI_FLOAT) n *= 4;
    for (int i = 0; i < n; ++i) ((float *)inout)[i] += ((const float *)in)[i];
}

static void check_ineligible(void)
{
    /* MPI_INT, out of place and in place */
    {
        int *s = malloc(N_I * sizeof *s), *r = malloc(N_I * sizeof *r);
        for (long i = 0; i < N_I; ++i) s[i] = ival(rank, i, 10);
        MPI_Allreduce(s, r, (int)N_I, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        long bad = 0;
        for (long i = 0; i < N_I; ++i) {
            int e = 0;
            for (int q = 0; q < size; ++q) e += ival(q, i, 10);
            bad += r[i] != e;
        }
        CHECK(bad == 0, "MPI_INT sum: %ld elements differ", bad);
        MPI_Allreduce(MPI_IN_PLACE, s, (int)N_I, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        CHECK(memcmp(s, r, N_I * sizeof *s) == 0, "MPI_INT sum in place differs from out of place");
        free(s), free(r);
    }
    float *s = malloc(N_I * sizeof *s), *r = malloc(N_I * sizeof *r);
    /* MPI_MAX on floats */
    {
        fill_int_floats(s, N_I, rank, 11);
        MPI_Allreduce(s, r, (int)N_I, MPI_FLOAT, MPI_MAX, MPI_COMM_WORLD);
        long bad = 0;
        for (long i = 0; i < N_I; ++i) {
            float e = (float)ival(0, i, 11);
            for (int q = 1; q < size; ++q)
                if ((float)ival(q, i, 11) > e) e = (float)ival(q, i, 11);
            bad += memcmp(&r[i], &e, sizeof e) != 0;
        }
        CHECK(bad == 0, "MPI_MAX on floats: %ld elements differ", bad);
    }
    /* a small float sum (below CC_COLL_MIN_BYTES), in place and out of place */
    {
        fill_int_floats(s, 1000, rank, 12);
        MPI_Allreduce(s, r, 1000, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        expect_float_sum(r, 1000, 12, "small float sum");
        MPI_Allreduce(MPI_IN_PLACE, s, 1000, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        expect_float_sum(s, 1000, 12, "small float sum in place");
    }
    /* one element under 1 MiB: passes through; exactly 1 MiB: eligible */
    {
        const long below = (1L << 20) / 4 - 1, at = (1L << 20) / 4;
        fill_int_floats(s, below, rank, 13);
        MPI_Allreduce(s, r, (int)below, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        expect_float_sum(r, below, 13, "float sum of 1 MiB - 4 bytes");
        fill_int_floats(s, at, rank, 14);
        float *r2 = malloc(at * sizeof *r2);
        MPI_Allreduce(s, r2, (int)at, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        if (compressed) {
            long differ = 0;
            for (long i = 0; i < at; ++i) {
                float e = 0;
                for (int q = 0; q < size; ++q) e += (float)ival(q, i, 14);
                differ += r2[i] != e;
            }
            CHECK(differ > at / 2, "float sum of exactly 1 MiB: only %ld of %ld elements differ: not compressed",
                  differ, at);
        } else {
            expect_float_sum(r2, at, 14, "float sum of exactly 1 MiB");
        }
        free(r2);
    }
    /* derived datatypes. MPI's predefined ops are not defined on them (Open
     * MPI rejects MPI_SUM with MPI_ERR_OP), so: the error must be MPI's own,
     * and a user-defined sum over a contiguous type of 4 floats, and over
     * MPI_FLOAT itself, must be exact */
    {
        MPI_Datatype four, dup;
        MPI_Comm quiet;
        MPI_Op op;
        MPI_Type_contiguous(4, MPI_FLOAT, &four);
        MPI_Type_commit(&four);
        MPI_Type_dup(MPI_FLOAT, &dup);
        MPI_Op_create(user_sum, 1, &op);
        fill_int_floats(s, N_I, rank, 15);
        MPI_Allreduce(s, r, (int)(N_I / 4), four, op, MPI_COMM_WORLD);
        expect_float_sum(r, N_I, 15, "contiguous(4, MPI_FLOAT) with a user-defined sum");
        fill_int_floats(s, N_I, rank, 16);
        MPI_Allreduce(MPI_IN_PLACE, s, (int)N_I, MPI_FLOAT, op, MPI_COMM_WORLD);
        expect_float_sum(s, N_I, 16, "MPI_FLOAT with a user-defined sum, in place");
        MPI_Comm_dup(MPI_COMM_WORLD, &quiet);
        MPI_Comm_set_errhandler(quiet, MPI_ERRORS_RETURN);
        int rc = MPI_Allreduce(s, r, (int)N_I, dup, MPI_SUM, quiet), cls = -1;
        MPI_Error_class(rc, &cls);
        CHECK(cls == MPI_ERR_OP, "MPI_SUM on MPI_Type_dup(MPI_FLOAT): error class %d, expected MPI_ERR_OP", cls);
        MPI_Comm_free(&quiet);
        MPI_Op_free(&op);
        MPI_Type_free(&dup);
        MPI_Type_free(&four);
    }
    /* MPI_Iallreduce of an eligible call: decided as MPI_Allreduce is
     * (compressed in `compressed` mode, exact otherwise); the ineligible
     * MPI_MAX one is exact */
    {
        MPI_Request req;
        fill_int_floats(s, N_I, rank, 17);
        MPI_Iallreduce(s, r, (int)N_I, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        expect_float_sum_or_compressed(r, N_I, 17, "MPI_Iallreduce float sum");
        fill_int_floats(s, N_I, rank, 18);
        MPI_Iallreduce(MPI_IN_PLACE, s, (int)N_I, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        expect_float_sum_or_compressed(s, N_I, 18, "MPI_Iallreduce float sum in place");
        fill_int_floats(s, N_I, rank, 11);
        MPI_Iallreduce(s, r, (int)N_I, MPI_FLOAT, MPI_MAX, MPI_COMM_WORLD, &req);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        long bad = 0;
        for (long i = 0; i < N_I; ++i) {
            float e = (float)ival(0, i, 11);
            for (int q = 1; q < size; ++q)
                if ((float)ival(q, i, 11) > e) e = (float)ival(q, i, 11);
            bad += memcmp(&r[i], &e, sizeof e) != 0;
        }
        CHECK(bad == 0, "MPI_Iallreduce MPI_MAX on floats: %ld elements differ", bad);
    }
    /* an inter-communicator: even ranks against odd ranks */
    if (size >= 2) {
        MPI_Comm half, inter;
        MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
        MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, rank % 2 == 0 ? 1 : 0, 99, &inter);
        fill_int_floats(s, N_I, rank, 19);
        MPI_Allreduce(s, r, (int)N_I, MPI_FLOAT, MPI_SUM, inter);
        long bad = 0;
        for (long i = 0; i < N_I; ++i) {
            float e = 0;
            for (int q = 0; q < size; ++q)
                if (q % 2 != rank % 2) e += (float)ival(q, i, 19);
            bad += memcmp(&r[i], &e, sizeof e) != 0;
        }
        CHECK(bad == 0, "inter-communicator float sum: %ld elements differ", bad);
        MPI_Comm_free(&inter);
        MPI_Comm_free(&half);
    }
    free(s), free(r);
}

/* ---- MPI_THREAD_MULTIPLE: two threads, each on its own communicator ---- */
#define N_T 262144L /* exactly 1 MiB */
#define STEPS_T 30

struct thread_arg {
    MPI_Comm comm;
    int salt;
    double err1, err_last;
    int rc;
};

static void *thread_main(void *p)
{
    struct thread_arg *a = p;
    float *g = malloc(N_T * sizeof *g), *r = malloc(N_T * sizeof *r);
    double *exact = calloc(N_T, sizeof *exact), *acc = calloc(N_T, sizeof *acc), *mean = malloc(N_T * sizeof *mean);
    for (long i = 0; i < N_T; ++i) {
        g[i] = (float)gval(rank, i, a->salt);
        for (int q = 0; q < size; ++q) exact[i] += (float)gval(q, i, a->salt);
    }
    a->rc = MPI_SUCCESS;
    for (int t = 1; t <= STEPS_T; ++t) {
        const int rc = MPI_Allreduce(g, r, (int)N_T, MPI_FLOAT, MPI_SUM, a->comm);
        if (rc != MPI_SUCCESS) a->rc = rc;
        for (long i = 0; i < N_T; ++i) acc[i] += r[i];
        if (t == 1 || t == STEPS_T) {
            for (long i = 0; i < N_T; ++i) mean[i] = acc[i] / t;
            *(t == 1 ? &a->err1 : &a->err_last) = rel_err(mean, exact, N_T);
        }
    }
    free(g), free(r), free(exact), free(acc), free(mean);
    return NULL;
}

static void check_threads(void)
{
    struct thread_arg a[2];
    pthread_t th[2];
    for (int k = 0; k < 2; ++k) {
        MPI_Comm_dup(MPI_COMM_WORLD, &a[k].comm);
        a[k].salt = 20 + k;
    }
    for (int k = 0; k < 2; ++k) pthread_create(&th[k], NULL, thread_main, &a[k]);
    for (int k = 0; k < 2; ++k) pthread_join(th[k], NULL);
    for (int k = 0; k < 2; ++k) {
        CHECK(a[k].rc == MPI_SUCCESS, "thread %d: allreduce returned %d", k, a[k].rc);
        if (rank == 0)
            printf("plain_allreduce: thread %d: step 1 error %.3e, step %d error %.3e\n", k, a[k].err1, STEPS_T,
                   a[k].err_last);
        if (compressed) {
            CHECK(a[k].err1 > 0.5, "thread %d: step 1 error %.3e: not compressed", k, a[k].err1);
            CHECK(a[k].err_last < a[k].err1, "thread %d: no convergence: %.3e -> %.3e", k, a[k].err1,
                  a[k].err_last);
        } else {
            CHECK(a[k].err1 < 1e-6 && a[k].err_last < 1e-6, "thread %d: not exact", k);
        }
        /* The shim's attribute delete callback runs here. */
        MPI_Comm_free(&a[k].comm);
    }
    /* A fresh communicator after the frees: set up anew, and the freed
     * ones are destroyed at this call. */
    MPI_Comm c;
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    float *s = malloc(N_T * sizeof *s), *r = malloc(N_T * sizeof *r);
    fill_int_floats(s, N_T, rank, 30);
    CHECK(MPI_Allreduce(s, r, (int)N_T, MPI_FLOAT, MPI_SUM, c) == MPI_SUCCESS, "allreduce after comm frees");
    if (!compressed) expect_float_sum(r, N_T, 30, "float sum on a new communicator");
    MPI_Comm_free(&c);
    free(s), free(r);
}

/* ---- CC_COLL_EF_MAX_BYTES=1536K: one residual fits, a second does not ---- */
static void check_ef_cap(void)
{
    float *s = malloc(N_I * sizeof *s), *a = malloc(N_I * sizeof *a), *b = malloc(N_I * sizeof *b);
    fill_int_floats(s, N_I, rank, 40);
    for (int k = 0; k < 3; ++k) {
        float *r = k == 1 ? b : a; /* a, b, a */
        CHECK(MPI_Allreduce(s, r, (int)N_I, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS, "allreduce");
        long differ = 0;
        for (long i = 0; i < N_I; ++i) {
            float e = 0;
            for (int q = 0; q < size; ++q) e += (float)ival(q, i, 40);
            differ += memcmp(&r[i], &e, sizeof e) != 0;
        }
        if (r == a) CHECK(differ > N_I / 2, "call %d into the first buffer: not compressed", k);
        else CHECK(differ == 0, "call into the second buffer: %ld elements differ: not passed through", differ);
    }
    free(s), free(a), free(b);
}

int main(int argc, char **argv)
{
    int provided = -1, queried = -2;
    /* ef-cap starts MPI with MPI_Init, the other modes with MPI_Init_thread. */
    const int plain_init = argc == 2 && strcmp(argv[1], "ef-cap") == 0;
    if (plain_init) {
        if (MPI_Init(&argc, &argv) != MPI_SUCCESS) return 1;
    } else if (MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
        return 1;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc != 2 || (strcmp(argv[1], "compressed") != 0 && strcmp(argv[1], "exact") != 0 &&
                      strcmp(argv[1], "ef-cap") != 0)) {
        if (rank == 0) fprintf(stderr, "usage: plain_allreduce compressed|exact|ef-cap\n");
        MPI_Finalize();
        return 2;
    }
    compressed = strcmp(argv[1], "compressed") == 0;
    MPI_Query_thread(&queried);
    if (!plain_init) {
        CHECK(provided == MPI_THREAD_MULTIPLE, "MPI_Init_thread(MPI_THREAD_MULTIPLE) provided %d", provided);
        CHECK(queried == provided, "MPI_Query_thread says %d, MPI_Init_thread said %d", queried, provided);
    }

    if (strcmp(argv[1], "ef-cap") == 0) {
        check_ef_cap();
    } else {
        check_convergence_float();
        check_convergence_double_in_place();
        check_type(MPI_REAL, "MPI_REAL", 4);
        check_type(MPI_REAL4, "MPI_REAL4", 4);
        check_type(MPI_DOUBLE_PRECISION, "MPI_DOUBLE_PRECISION", 8);
        check_type(MPI_REAL8, "MPI_REAL8", 8);
        check_address_reused();
        check_ineligible();
        if (provided == MPI_THREAD_MULTIPLE) check_threads();
    }

    int total = 0;
    MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    fflush(stdout);
    MPI_Finalize();
    if (rank == 0) {
        if (total == 0) fprintf(stderr, "plain_allreduce: %d ranks, %s: PASS\n", size, argv[1]);
        else fprintf(stderr, "plain_allreduce: %d ranks, %s: %d checks FAILED\n", size, argv[1], total);
    }
    return total == 0 ? 0 : 1;
}
