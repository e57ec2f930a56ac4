/*
 * cc_coll_reduce_scatter with real ranks (run with 1, 2, 3 and 4 ranks).
 *
 * References are built in this file from the documented rules only
 * (cc_coll.h, docs/algorithms.md section 6): rank r receives the reduction of
 * every rank's elements [r * recvcount, (r + 1) * recvcount).
 *   NONE:   MPI_Reduce_scatter_block itself, bit for bit (AVG: then / P in
 *           the element type; F16/BF16: summed in binary32, rounded to
 *           nearest even).
 *   TOPK:   each rank keeps the k = ceil(density * recvcount) largest |x| of
 *           every shard (ties: lower index); the owner adds the P payloads
 *           in rank order in the element type. When one payload outweighs a
 *           shard (e.g. density 1) the call is MPI_Reduce_scatter_block of
 *           the inputs.
 *   SKETCH: each rank keeps its k = ceil(density * recvcount * P) largest |x|
 *           over the whole buffer; lossless (load factor 0.75): the owner's
 *           shard is the sum over ranks of the kept values up to rounding.
 *           Dense (MPI_Reduce_scatter_block of the inputs) when NaN/Inf or
 *           a sketch larger than a shard; the path is read from the stats.
 *
 * Cases: NONE on MPI_COMM_WORLD and a split sub-communicator, every dtype,
 * SUM/AVG, in place and out of place, recvcount 0, 1, 1001 and 1 Mi; TOPK
 * dense fallback, sparse exactness, NaN/Inf; SKETCH lossless, NaN; argument
 * errors. The error-feedback invariant over the gathered shards (every
 * method with CC_COLL_METHOD_CAP_REDUCE_SCATTER, every dtype), the
 * non-blocking form and the refusal of methods without that cap are in the
 * conformance suite (conformance.c).
 *
 * Any failure prints the case and calls MPI_Abort (exit status non-zero).
 *
 *   mpi_reduce_scatter [TEST...]   run all tests, or only the named ones
 */
#define _POSIX_C_SOURCE 200809L /* setenv, unsetenv */

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "cc_coll.h"
#include "check.h"
#include "test_util.h"

/* ---- seeds --------------------------------------------------------------- */

static uint64_t seed_for(int rank, int test_case)
{
    return 0x4e5ca77e4ull + (uint64_t)rank * 1000003ull + (uint64_t)test_case * 7919ull;
}

/* ---- element types ------------------------------------------------------ */

/* buf[i] /= p in the element type, F32 or F64 buffers. */
static void divide_buf(cc_coll_dtype_t d, void *buf, size_t n, int p)
{
    for (size_t i = 0; i < n; ++i) {
        if (d == CC_COLL_F32) ((float *)buf)[i] = ((float *)buf)[i] / (float)p;
        else ((double *)buf)[i] = ((double *)buf)[i] / (double)p;
    }
}

/* ---- the documented rules ------------------------------------------------ */

static int topk_is_sparse(size_t rc, cc_coll_dtype_t d, double density, int p)
{
    const size_t es = cc_coll_dtype_size(d);
    const size_t b = payload_bytes(k_for(density, rc), es);
    return b <= rc * es && b * (size_t)p <= (size_t)INT_MAX;
}

/* ---- checks ---------------------------------------------------------------- */

/* MPI_Reduce_scatter_block(SUM) of this rank's packed F32/F64 buffer on
 * `comm`, out of place, then / P for AVG: the dense reference. */
static void dense_reference(MPI_Comm comm, int P, cc_coll_dtype_t d, cc_coll_op_t op, const void *send, size_t rc,
                            void *want)
{
    CHECK(MPI_Reduce_scatter_block(send, want, (int)rc, mpi_type(d), MPI_SUM, comm) == MPI_SUCCESS,
          "reference MPI_Reduce_scatter_block");
    if (op == CC_COLL_AVG) divide_buf(d, want, rc, P);
}

/* ---- 1. NONE ------------------------------------------------------------------ */

/* One NONE call on `comm` (P ranks, this rank `rank`) checked against
 * MPI_Reduce_scatter_block in the same mode (in place or not). */
static void none_case(cc_coll_comm_h h, MPI_Comm comm, int P, int rank, cc_coll_dtype_t d, cc_coll_op_t op,
                      size_t rc, int inplace, int null_params, int test_case)
{
    const size_t es = cc_coll_dtype_size(d), n = rc * (size_t)P;
    char desc[200];
    snprintf(desc, sizeof desc, "NONE %s %s recvcount=%zu %s params=%s (P=%d)", dtype_name(d),
             op == CC_COLL_SUM ? "SUM" : "AVG", rc, inplace ? "in-place" : "out-of-place",
             null_params ? "NULL" : "NONE", P);
    double *x = xmalloc(n * sizeof *x);
    if (d == CC_COLL_F32 || d == CC_COLL_F64) random_values(d, x, n, seed_for(rank, test_case), 10);
    else integer_values(x, n, seed_for(rank, test_case));
    unsigned char *send = xmalloc(n * es + 16), *orig = xmalloc(n * es + 1), *want = xmalloc(rc * es + 1);
    unsigned char *recv = xmalloc((inplace ? n : rc) * es + 16);
    pack(d, x, n, send);
    memcpy(orig, send, n * es);

    /* Reference. */
    if (d == CC_COLL_F32 || d == CC_COLL_F64) {
        if (inplace) {
            unsigned char *tmp = xmalloc(n * es + 1);
            memcpy(tmp, send, n * es);
            CHECK(MPI_Reduce_scatter_block(MPI_IN_PLACE, tmp, (int)rc, mpi_type(d), MPI_SUM, comm) == MPI_SUCCESS,
                  "reference MPI_Reduce_scatter_block (in place)");
            memcpy(want, tmp, rc * es);
            free(tmp);
            if (op == CC_COLL_AVG) divide_buf(d, want, rc, P);
        } else {
            dense_reference(comm, P, d, op, send, rc, want);
        }
    } else {
        float *f = xmalloc(n * sizeof *f), *s = xmalloc(rc * sizeof *s);
        double *acc = xmalloc(rc * sizeof *acc);
        for (size_t i = 0; i < n; ++i) f[i] = (float)x[i];
        CHECK(MPI_Reduce_scatter_block(f, s, (int)rc, MPI_FLOAT, MPI_SUM, comm) == MPI_SUCCESS,
              "reference MPI_Reduce_scatter_block (float)");
        for (size_t i = 0; i < rc; ++i) acc[i] = op == CC_COLL_AVG ? div_in(d, s[i], P) : round_to(d, s[i]);
        pack(d, acc, rc, want);
        free(f);
        free(s);
        free(acc);
    }

    const cc_coll_params_t p = method_params(CC_COLL_METHOD_NONE);
    const cc_coll_stats_t before = get_stats(h);
    cc_coll_status_t st;
    if (inplace) {
        memcpy(recv, send, n * es);
        memset(recv + n * es, 0xC3, 16);
        st = cc_coll_reduce_scatter(recv, recv, rc, d, op, null_params ? NULL : &p, h, NULL);
        for (int i = 0; i < 16; ++i) CHECK(recv[n * es + (size_t)i] == 0xC3, "in place: written past the buffer");
    } else {
        memset(recv, 0x5A, rc * es);
        memset(recv + rc * es, 0xC3, 16);
        st = cc_coll_reduce_scatter(send, recv, rc, d, op, null_params ? NULL : &p, h, NULL);
        for (int i = 0; i < 16; ++i) CHECK(recv[rc * es + (size_t)i] == 0xC3, "recvbuf written past recvcount");
        CHECK(memcmp(send, orig, n * es) == 0, "out-of-place call modified sendbuf");
    }
    if (st != CC_COLL_OK) die("%s", desc, (int)st);
    expect_equal(d, recv, want, rc, desc);
    const cc_coll_stats_t after = get_stats(h);
    if (after.calls != before.calls + 1 || after.bytes_uncompressed != before.bytes_uncompressed + n * es ||
        after.bytes_wire != before.bytes_wire + n * es) {
        fprintf(stderr, "[rank %d] %s: stats +%llu calls +%llu uncompressed +%llu wire, expected +1 +%zu +%zu\n",
                g_rank, desc, (unsigned long long)(after.calls - before.calls),
                (unsigned long long)(after.bytes_uncompressed - before.bytes_uncompressed),
                (unsigned long long)(after.bytes_wire - before.bytes_wire), n * es, n * es);
        die("%s", "NONE stats", 0);
    }
    free(x);
    free(send);
    free(orig);
    free(want);
    free(recv);
}

static void none_suite(cc_coll_comm_h h, MPI_Comm comm, const size_t *counts, size_t ncounts, int base)
{
    int P = 0, rank = 0;
    MPI_Comm_size(comm, &P);
    MPI_Comm_rank(comm, &rank);
    int c = base;
    for (size_t ci = 0; ci < ncounts; ++ci)
        for (int di = 0; di < 4; ++di)
            for (int op = 0; op < 2; ++op)
                for (int inplace = 0; inplace < 2; ++inplace) {
                    const int null_params = (c & 3) == 3;
                    none_case(h, comm, P, rank, (cc_coll_dtype_t)di, (cc_coll_op_t)op, counts[ci], inplace,
                              null_params, c);
                    ++c;
                }
}

static void test_none(cc_coll_comm_h h)
{
    static const size_t counts[] = {1, 1001, (size_t)1 << 20};
    none_suite(h, MPI_COMM_WORLD, counts, 3, 100);

    /* recvcount 0: nothing is read or written, NULL buffers are fine. */
    const cc_coll_params_t p = method_params(CC_COLL_METHOD_NONE);
    const cc_coll_stats_t before = get_stats(h);
    CHECK_CC(cc_coll_reduce_scatter(NULL, NULL, 0, CC_COLL_F32, CC_COLL_SUM, &p, h, NULL));
    CHECK_CC(cc_coll_reduce_scatter(NULL, NULL, 0, CC_COLL_BF16, CC_COLL_AVG, NULL, h, NULL));
    float untouched[2] = {1, 2};
    CHECK_CC(cc_coll_reduce_scatter(NULL, untouched, 0, CC_COLL_F32, CC_COLL_SUM, &p, h, NULL));
    CHECK_CC(cc_coll_reduce_scatter(untouched, untouched, 0, CC_COLL_F64, CC_COLL_SUM, &p, h, NULL));
    CHECK(untouched[0] == 1 && untouched[1] == 2, "recvcount 0 wrote recvbuf");
    const cc_coll_stats_t after = get_stats(h);
    CHECK(after.calls == before.calls + 4 && after.bytes_uncompressed == before.bytes_uncompressed &&
              after.bytes_wire == before.bytes_wire,
          "recvcount 0: counted, no bytes");
}

/* A sub-communicator: ranks split by parity, in reverse order. */
static void test_none_subcomm(cc_coll_comm_h world)
{
    (void)world;
    MPI_Comm sub;
    CHECK(MPI_Comm_split(MPI_COMM_WORLD, g_rank % 2, -g_rank, &sub) == MPI_SUCCESS, "MPI_Comm_split");
    cc_coll_comm_h h = NULL;
    CHECK_CC(cc_coll_comm_create(sub, &h));
    int P = 0, rank = 0, hs = 0, hr = 0;
    MPI_Comm_size(sub, &P);
    MPI_Comm_rank(sub, &rank);
    CHECK_CC(cc_coll_comm_size(h, &hs));
    CHECK_CC(cc_coll_comm_rank(h, &hr));
    CHECK(hs == P && hr == rank, "sub-communicator size/rank");
    static const size_t counts[] = {1, 1001, 4099};
    none_suite(h, sub, counts, 3, 200);
    CHECK_CC(cc_coll_comm_destroy(h));
    MPI_Comm_free(&sub);
}

/* ---- 2. TOPK ------------------------------------------------------------------ */

/* The expected shard of this rank for TOPK with zero residual (sparse path):
 * per shard, every rank's top k; the owner adds them in rank order in the
 * element type. */
static void topk_expected(cc_coll_dtype_t d, cc_coll_op_t op, const double *x, size_t rc, double density, void *want)
{
    const size_t P = (size_t)g_size, n = rc * P, k = k_for(density, rc);
    unsigned char *kept = xmalloc(n), *all_kept = xmalloc(n * P);
    for (size_t s = 0; s < P; ++s) reference_topk(x + s * rc, rc, k, kept + s * rc);
    double *all = xmalloc(n * P * sizeof *all);
    CHECK(MPI_Allgather(x, (int)n, MPI_DOUBLE, all, (int)n, MPI_DOUBLE, MPI_COMM_WORLD) == MPI_SUCCESS, "Allgather");
    CHECK(MPI_Allgather(kept, (int)n, MPI_UNSIGNED_CHAR, all_kept, (int)n, MPI_UNSIGNED_CHAR, MPI_COMM_WORLD) ==
              MPI_SUCCESS,
          "Allgather");
    double *acc = xmalloc((rc ? rc : 1) * sizeof *acc);
    const size_t off = (size_t)g_rank * rc;
    for (size_t i = 0; i < rc; ++i) {
        double a = 0.0;
        for (size_t q = 0; q < P; ++q)
            if (all_kept[q * n + off + i]) a = add_in(d, a, all[q * n + off + i]);
        acc[i] = op == CC_COLL_AVG ? div_in(d, a, g_size) : a;
    }
    pack(d, acc, rc, want);
    free(kept);
    free(all_kept);
    free(all);
    free(acc);
}

static void topk_case(cc_coll_comm_h h, cc_coll_dtype_t d, cc_coll_op_t op, const double *x, size_t rc,
                      double density, int ef, int inplace, const char *what)
{
    const size_t es = cc_coll_dtype_size(d), n = rc * (size_t)g_size;
    char desc[220];
    snprintf(desc, sizeof desc, "%s: TOPK %s %s recvcount=%zu density=%g ef=%d %s (P=%d)", what, dtype_name(d),
             op == CC_COLL_SUM ? "SUM" : "AVG", rc, density, ef, inplace ? "in-place" : "out-of-place", g_size);
    unsigned char *send = xmalloc(n * es + 1), *recv = xmalloc((inplace ? n : rc) * es + 16);
    unsigned char *want = xmalloc(rc * es + 1), *orig = xmalloc(n * es + 1);
    pack(d, x, n, send);
    memcpy(orig, send, n * es);
    const int sparse = topk_is_sparse(rc, d, density, g_size);
    if (sparse) topk_expected(d, op, x, rc, density, want);
    else dense_reference(MPI_COMM_WORLD, g_size, d, op, send, rc, want);
    const cc_coll_params_t p = topk_params(density, ef);
    const cc_coll_stats_t before = get_stats(h);
    cc_coll_status_t st;
    if (inplace) {
        memcpy(recv, send, n * es);
        st = cc_coll_reduce_scatter(recv, recv, rc, d, op, &p, h, NULL);
    } else {
        memset(recv + rc * es, 0xC3, 16);
        st = cc_coll_reduce_scatter(send, recv, rc, d, op, &p, h, NULL);
        for (int i = 0; i < 16; ++i) CHECK(recv[rc * es + (size_t)i] == 0xC3, "recvbuf written past recvcount");
        CHECK(memcmp(send, orig, n * es) == 0, "out-of-place call modified sendbuf");
    }
    if (st != CC_COLL_OK) die("%s", desc, (int)st);
    expect_equal(d, recv, want, rc, desc);
    const cc_coll_stats_t after = get_stats(h);
    const uint64_t wire = sparse ? payload_bytes(k_for(density, rc), es) * (uint64_t)g_size : n * es;
    if (after.calls != before.calls + 1 || after.bytes_uncompressed != before.bytes_uncompressed + n * es ||
        after.bytes_wire != before.bytes_wire + wire) {
        fprintf(stderr, "[rank %d] %s: stats +%llu calls +%llu uncompressed +%llu wire, expected +1 +%zu +%llu\n",
                g_rank, desc, (unsigned long long)(after.calls - before.calls),
                (unsigned long long)(after.bytes_uncompressed - before.bytes_uncompressed),
                (unsigned long long)(after.bytes_wire - before.bytes_wire), n * es, (unsigned long long)wire);
        die("%s", "TOPK stats", 0);
    }
    free(send);
    free(recv);
    free(want);
    free(orig);
}

static void test_topk_dense(cc_coll_comm_h h)
{
    static const size_t rcs[] = {1, 1001, 4096};
    int c = 0;
    for (int di = 0; di < 2; ++di)
        for (size_t ri = 0; ri < 3; ++ri) {
            const cc_coll_dtype_t d = di ? CC_COLL_F64 : CC_COLL_F32;
            const size_t rc = rcs[ri], n = rc * (size_t)g_size;
            CHECK(!topk_is_sparse(rc, d, 1.0, g_size), "test setup: density 1 must be dense");
            double *x = xmalloc(n * sizeof *x);
            random_values(d, x, n, seed_for(g_rank, 300 + c++), 20);
            for (int op = 0; op < 2; ++op)
                for (int inplace = 0; inplace < 2; ++inplace)
                    for (int ef = 0; ef < 2; ++ef)
                        topk_case(h, d, (cc_coll_op_t)op, x, rc, 1.0, ef, inplace, "density 1 (dense)");
            free(x);
        }
    CHECK_CC(cc_coll_ef_reset_all(h));
}

static void test_topk_sparse(cc_coll_comm_h h)
{
    static const size_t rcs[] = {1000, 4099};
    static const double densities[] = {0.01, 0.05};
    int c = 0;
    for (int di = 0; di < 2; ++di)
        for (size_t ri = 0; ri < 2; ++ri)
            for (size_t dd = 0; dd < 2; ++dd) {
                const cc_coll_dtype_t d = di ? CC_COLL_F64 : CC_COLL_F32;
                const size_t rc = rcs[ri], n = rc * (size_t)g_size;
                CHECK(topk_is_sparse(rc, d, densities[dd], g_size), "test setup: this case must be sparse");
                double *x = xmalloc(n * sizeof *x);
                random_values(d, x, n, seed_for(g_rank, 400 + c++), 12);
                for (int op = 0; op < 2; ++op)
                    for (int inplace = 0; inplace < 2; ++inplace)
                        topk_case(h, d, (cc_coll_op_t)op, x, rc, densities[dd], 0, inplace, "sparse exact");
                free(x);
            }
    /* k = 1 per shard, odd recvcount; and F16/BF16 small integers. */
    double *x = xmalloc(1001 * (size_t)g_size * sizeof *x);
    random_values(CC_COLL_F32, x, 1001 * (size_t)g_size, seed_for(g_rank, 450), 12);
    topk_case(h, CC_COLL_F32, CC_COLL_SUM, x, 1001, 1e-4, 0, 0, "k = 1");
    for (int di = 2; di < 4; ++di) {
        integer_values(x, 1001 * (size_t)g_size, seed_for(g_rank, 460 + di));
        topk_case(h, (cc_coll_dtype_t)di, CC_COLL_SUM, x, 1001, 0.01, 0, 1, "16-bit integers");
        topk_case(h, (cc_coll_dtype_t)di, CC_COLL_AVG, x, 1001, 0.01, 0, 0, "16-bit integers");
    }
    free(x);
}

static void test_topk_nonfinite(cc_coll_comm_h h)
{
    const size_t rc = 1000, P = (size_t)g_size, n = rc * P;
    const double density = 0.01; /* k = 10 per shard */
    for (int di = 0; di < 2; ++di) {
        const cc_coll_dtype_t d = di ? CC_COLL_F64 : CC_COLL_F32;
        const size_t es = cc_coll_dtype_size(d);
        double *x = xmalloc(n * sizeof *x), *e = xmalloc(n * sizeof *e);
        unsigned char *send = xmalloc(n * es), *recv = xmalloc(rc * es), *want = xmalloc(rc * es);
        const cc_coll_params_t p = keyed(topk_params(density, 1), 600 + (uint64_t)di);
        CHECK_CC(cc_coll_ef_reset_all(h));

        /* A NaN in shard 0 and +Inf in the last shard, on the last rank. */
        integer_values(x, n, seed_for(g_rank, 600 + di));
        if (g_rank == g_size - 1) {
            x[5] = NAN;
            x[(P - 1) * rc + 7] = INFINITY;
        }
        pack(d, x, n, send);
        topk_expected(d, CC_COLL_SUM, x, rc, density, want);
        CHECK_CC(cc_coll_reduce_scatter(send, recv, rc, d, CC_COLL_SUM, &p, h, NULL));
        expect_equal(d, recv, want, rc, "TOPK NaN/Inf within k");
        if (g_rank == 0) CHECK(isnan(element(d, recv, 5)), "NaN in shard 0 must reach rank 0's result");
        if (g_rank == g_size - 1) CHECK(element(d, recv, 7) == INFINITY, "+Inf must reach the last rank's result");
        for (size_t i = 0; i < rc; ++i)
            if (!(g_rank == 0 && i == 5) && !(g_rank == g_size - 1 && i == 7))
                CHECK(isfinite(element(d, recv, i)), "NaN/Inf spread to other elements");
        CHECK_CC(cc_coll_ef_get_residual(h, &p, recv, n, d, e));
        for (size_t i = 0; i < n; ++i) CHECK(isfinite(e[i]), "residual holds a non-finite value");
        CHECK_CC(cc_coll_ef_reset(h, &p, recv, n, d));

        /* More non-finite values than k in one shard of rank 0: dense
         * fallback, MPI_SUM's pattern and values (integer data). */
        integer_values(x, n, seed_for(g_rank, 610 + di));
        const size_t s = P - 1;
        if (g_rank == 0)
            for (size_t j = 0; j < 15; ++j)
                x[s * rc + j * 61 + 3] = j % 3 == 0 ? NAN : j % 3 == 1 ? INFINITY : -INFINITY;
        pack(d, x, n, send);
        dense_reference(MPI_COMM_WORLD, g_size, d, CC_COLL_SUM, send, rc, want);
        CHECK_CC(cc_coll_reduce_scatter(send, recv, rc, d, CC_COLL_SUM, &p, h, NULL));
        expect_nonfinite_pattern(d, recv, want, rc, "TOPK more NaN/Inf than k");
        expect_equal(d, recv, want, rc, "TOPK more NaN/Inf than k: dense fallback equals MPI_SUM");
        CHECK_CC(cc_coll_ef_get_residual(h, &p, recv, n, d, e));
        for (size_t i = 0; i < n; ++i) CHECK(isfinite(e[i]), "residual holds a non-finite value (dense)");
        CHECK_CC(cc_coll_ef_reset(h, &p, recv, n, d));
        free(x);
        free(e);
        free(send);
        free(recv);
        free(want);
    }
}

/* ---- 3. SKETCH -------------------------------------------------------------------- */

/* One SKETCH call (EF off) checked against the global top-k reference
 * (sketch path) or MPI_Reduce_scatter_block (dense path). Returns 1 when
 * the sketch path ran (on any rank: the decision is global). */
static int sketch_case(cc_coll_comm_h h, cc_coll_dtype_t d, cc_coll_op_t op, const double *x, size_t rc,
                       double density, int inplace, const char *what)
{
    const size_t es = cc_coll_dtype_size(d), n = rc * (size_t)g_size, off = (size_t)g_rank * rc;
    char desc[220];
    snprintf(desc, sizeof desc, "%s: SKETCH %s %s recvcount=%zu density=%g load=0.75 %s (P=%d)", what, dtype_name(d),
             op == CC_COLL_SUM ? "SUM" : "AVG", rc, density, inplace ? "in-place" : "out-of-place", g_size);
    unsigned char *kept = xmalloc(n), *uni = xmalloc(n);
    reference_topk(x, n, k_for(density, n), kept);
    double *mine = xmalloc(n * sizeof *mine), *ref = xmalloc(n * sizeof *ref);
    for (size_t i = 0; i < n; ++i) mine[i] = kept[i] ? x[i] : 0.0;
    CHECK(MPI_Allreduce(mine, ref, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS, "reference sum");
    CHECK(MPI_Allreduce(kept, uni, (int)n, MPI_UNSIGNED_CHAR, MPI_BOR, MPI_COMM_WORLD) == MPI_SUCCESS, "support");
    size_t support = 0;
    for (size_t i = 0; i < rc; ++i) support += uni[off + i] != 0;
    double maxabs = 0;
    for (size_t i = 0; i < n; ++i)
        if (fabs(x[i]) > maxabs) maxabs = fabs(x[i]);
    MPI_Allreduce(MPI_IN_PLACE, &maxabs, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);

    unsigned char *send = xmalloc(n * es + 1), *recv = xmalloc((inplace ? n : rc) * es + 16);
    unsigned char *dense = xmalloc(rc * es + 1);
    pack(d, x, n, send);
    dense_reference(MPI_COMM_WORLD, g_size, d, op, send, rc, dense);
    const cc_coll_params_t p = sketch_params(density, 0, 0.75);
    const cc_coll_stats_t before = get_stats(h);
    cc_coll_status_t st;
    if (inplace) {
        memcpy(recv, send, n * es);
        st = cc_coll_reduce_scatter(recv, recv, rc, d, op, &p, h, NULL);
    } else {
        memset(recv + rc * es, 0xC3, 16);
        st = cc_coll_reduce_scatter(send, recv, rc, d, op, &p, h, NULL);
        for (int i = 0; i < 16; ++i) CHECK(recv[rc * es + (size_t)i] == 0xC3, "recvbuf written past recvcount");
    }
    if (st != CC_COLL_OK) die("%s", desc, (int)st);
    const cc_coll_stats_t after = get_stats(h);
    const uint64_t elements = after.sketch_elements - before.sketch_elements;
    const uint64_t peeled = after.sketch_peeled - before.sketch_peeled;
    uint64_t any = elements;
    MPI_Allreduce(MPI_IN_PLACE, &any, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    const int sketch_path = any > 0;
    CHECK(after.calls == before.calls + 1 && after.bytes_uncompressed == before.bytes_uncompressed + n * es,
          "SKETCH stats: calls / bytes_uncompressed");
    if (sketch_path) {
        if (elements != support) {
            fprintf(stderr, "[rank %d] %s: sketch_elements +%llu, union support of this shard %zu\n", g_rank, desc,
                    (unsigned long long)elements, support);
            die("%s: sketch_elements is not the shard's union support", desc, 0);
        }
        if (peeled != elements) {
            fprintf(stderr, "[rank %d] %s: only %llu of %llu support elements of this shard peeled\n", g_rank, desc,
                    (unsigned long long)peeled, (unsigned long long)elements);
            die("%s: the sketch must be lossless (sketch_peeled == sketch_elements) at load factor 0.75", desc, 0);
        }
        double *want = xmalloc((rc ? rc : 1) * sizeof *want);
        for (size_t i = 0; i < rc; ++i)
            want[i] = op == CC_COLL_AVG ? div_in(d, round_to(d, ref[off + i]), g_size) : ref[off + i];
        expect_close(d, recv, want, rc, d == CC_COLL_F64 ? 1e-13 : 1e-5,
                     op == CC_COLL_AVG ? maxabs / g_size : maxabs, desc);
        free(want);
    } else {
        CHECK(peeled == 0 && elements == 0, "dense path must not count sketch elements");
        expect_equal(d, recv, dense, rc, desc);
    }
    free(kept);
    free(uni);
    free(mine);
    free(ref);
    free(send);
    free(recv);
    free(dense);
    return sketch_path;
}

static void test_sketch(cc_coll_comm_h h)
{
    static const size_t rcs[] = {1, 1000, 1025, 3000, 20007, 65536 + 17};
    int c = 0;
    for (int di = 0; di < 2; ++di)
        for (size_t ri = 0; ri < sizeof rcs / sizeof rcs[0]; ++ri) {
            const cc_coll_dtype_t d = di ? CC_COLL_F64 : CC_COLL_F32;
            const size_t rc = rcs[ri], n = rc * (size_t)g_size;
            double *x = xmalloc(n * sizeof *x);
            random_values(d, x, n, seed_for(g_rank, 700 + c++), 8);
            const int sk = sketch_case(h, d, CC_COLL_SUM, x, rc, 0.01, c & 1, "lossless");
            if (rc >= 20007) CHECK(sk, "test setup: recvcount >= 20007 at density 0.01 must take the sketch path");
            if (rc <= 3000) CHECK(!sk, "recvcount <= 3000 must go dense (the sketch would outweigh a shard)");
            if (rc == 65536 + 17) sketch_case(h, d, CC_COLL_AVG, x, rc, 0.01, !(c & 1), "lossless AVG");
            free(x);
        }
}

static void test_sketch_nonfinite(cc_coll_comm_h h)
{
    const size_t rc = 65536 + 17, P = (size_t)g_size, n = rc * P;
    double *x = xmalloc(n * sizeof *x);
    float *send = xmalloc(n * sizeof *send), *recv = xmalloc(rc * sizeof *recv), *want = xmalloc(rc * sizeof *want);
    integer_values(x, n, seed_for(g_rank, 800));
    if (g_rank == g_size - 1) x[5] = NAN;
    pack(CC_COLL_F32, x, n, send);
    dense_reference(MPI_COMM_WORLD, g_size, CC_COLL_F32, CC_COLL_SUM, send, rc, want);
    const cc_coll_params_t p = keyed(sketch_params(0.01, 1, 0.75), 801);
    const cc_coll_stats_t before = get_stats(h);
    CHECK_CC(cc_coll_reduce_scatter(send, recv, rc, CC_COLL_F32, CC_COLL_SUM, &p, h, NULL));
    CHECK(get_stats(h).sketch_elements == before.sketch_elements, "SKETCH with a NaN on a rank must go dense");
    if (g_rank == 0) CHECK(isnan(recv[5]), "NaN must reach the owner's result");
    expect_equal(CC_COLL_F32, recv, want, rc, "SKETCH NaN: dense fallback equals MPI_SUM");
    double *e = xmalloc(n * sizeof *e);
    CHECK_CC(cc_coll_ef_get_residual(h, &p, recv, n, CC_COLL_F32, e));
    for (size_t i = 0; i < n; ++i) CHECK(isfinite(e[i]), "SKETCH: residual holds a non-finite value");
    CHECK_CC(cc_coll_ef_reset_all(h));
    free(x);
    free(send);
    free(recv);
    free(want);
    free(e);
}

/* ---- 4. argument errors -------------------------------------------------------------- */

static void expect_status(cc_coll_status_t got, cc_coll_status_t want, const char *desc)
{
    if (got != want) {
        fprintf(stderr, "[rank %d] %s: expected %s, got %s (%s)\n", g_rank, desc, cc_coll_status_string(want),
                cc_coll_status_string(got), cc_coll_last_error());
        die("%s", desc, 0);
    }
}

static void test_errors(cc_coll_comm_h h)
{
    const cc_coll_params_t methods[] = {method_params(CC_COLL_METHOD_NONE), topk_params(0.01, 1),
                                        sketch_params(0.01, 1, 0.75)};
    const size_t P = (size_t)g_size;
    const cc_coll_stats_t before = get_stats(h);
    uint64_t efb0 = 0, efb1 = 0;
    CHECK_CC(cc_coll_ef_bytes(h, &efb0));
    const size_t rc = 100, n = rc * P;
    float *buf = xcalloc(n + 2 * rc + 8, sizeof(float));
    for (int m = 0; m < 3; ++m) {
        const cc_coll_params_t *p = &methods[m];
        /* recvcount x P past INT_MAX (in place, so no buffer is touched). */
        const size_t big = (size_t)INT_MAX / P + 1;
        expect_status(cc_coll_reduce_scatter(buf, buf, big, CC_COLL_F32, CC_COLL_SUM, p, h, NULL),
                      CC_COLL_ERR_COUNT_OVERFLOW, "recvcount x P > INT_MAX");
        expect_status(cc_coll_reduce_scatter(buf, buf, (size_t)INT_MAX + 1, CC_COLL_F64, CC_COLL_SUM, p, h, NULL),
                      CC_COLL_ERR_COUNT_OVERFLOW, "recvcount > INT_MAX");
        /* Partial overlaps: recvbuf inside sendbuf, sendbuf starting inside
         * recvbuf, recvbuf overlapping sendbuf's last element. */
        expect_status(cc_coll_reduce_scatter(buf, buf + 1, rc, CC_COLL_F32, CC_COLL_SUM, p, h, NULL),
                      CC_COLL_ERR_INVALID_ARG, "recvbuf = sendbuf + 1");
        if (strstr(cc_coll_last_error(), "overlap") == NULL) die("overlap message: %s", cc_coll_last_error(), 0);
        expect_status(cc_coll_reduce_scatter(buf, buf + n - 1, rc, CC_COLL_F32, CC_COLL_SUM, p, h, NULL),
                      CC_COLL_ERR_INVALID_ARG, "recvbuf overlapping the last element of sendbuf");
        expect_status(cc_coll_reduce_scatter(buf + rc - 1, buf, rc, CC_COLL_F32, CC_COLL_SUM, p, h, NULL),
                      CC_COLL_ERR_INVALID_ARG, "sendbuf starting inside recvbuf");
        expect_status(cc_coll_reduce_scatter(buf, (uint16_t *)(void *)buf + n - 1, rc, CC_COLL_F16, CC_COLL_SUM, p,
                                             h, NULL),
                      CC_COLL_ERR_INVALID_ARG, "F16: recvbuf overlapping sendbuf's last element");
        /* NULL buffers with recvcount > 0. */
        expect_status(cc_coll_reduce_scatter(buf, NULL, rc, CC_COLL_F32, CC_COLL_SUM, p, h, NULL),
                      CC_COLL_ERR_NULL_BUFFER, "NULL recvbuf");
        if (strstr(cc_coll_last_error(), "recvbuf") == NULL) die("NULL recvbuf message: %s", cc_coll_last_error(), 0);
        expect_status(cc_coll_reduce_scatter(NULL, buf, rc, CC_COLL_F32, CC_COLL_SUM, p, h, NULL),
                      CC_COLL_ERR_NULL_BUFFER, "NULL sendbuf");
        expect_status(cc_coll_reduce_scatter(NULL, NULL, rc, CC_COLL_F32, CC_COLL_SUM, p, h, NULL),
                      CC_COLL_ERR_NULL_BUFFER, "NULL buffers");
        /* Other arguments. */
        expect_status(cc_coll_reduce_scatter(buf, buf, rc, (cc_coll_dtype_t)9, CC_COLL_SUM, p, h, NULL),
                      CC_COLL_ERR_INVALID_DTYPE, "bad dtype");
        expect_status(cc_coll_reduce_scatter(buf, buf, rc, CC_COLL_F32, (cc_coll_op_t)5, p, h, NULL),
                      CC_COLL_ERR_INVALID_OP, "bad op");
        expect_status(cc_coll_reduce_scatter(buf, buf, rc, CC_COLL_F32, CC_COLL_SUM, p, NULL, NULL),
                      CC_COLL_ERR_INVALID_COMM, "NULL comm");
        if (fake_stream_status() != CC_COLL_OK)
            expect_status(cc_coll_reduce_scatter(buf, buf, rc, CC_COLL_F32, CC_COLL_SUM, p, h, (void *)buf),
                          fake_stream_status(), "made-up stream");
    }
    cc_coll_params_t bad = sketch_params(0.01, 1, 0.0);
    expect_status(cc_coll_reduce_scatter(buf, buf, rc, CC_COLL_F32, CC_COLL_SUM, &bad, h, NULL),
                  CC_COLL_ERR_INVALID_ARG, "load_factor 0");
    bad = topk_params(1.5, 1);
    expect_status(cc_coll_reduce_scatter(buf, buf, rc, CC_COLL_F32, CC_COLL_SUM, &bad, h, NULL),
                  CC_COLL_ERR_INVALID_ARG, "density 1.5");
    const cc_coll_stats_t after = get_stats(h);
    CHECK(after.calls == before.calls, "rejected calls must not be counted");
    CHECK_CC(cc_coll_ef_bytes(h, &efb1));
    CHECK(efb0 == efb1, "rejected calls must not create residuals");

    /* Adjacent, non-overlapping buffers are fine, either order. */
    double *x = xmalloc(n * sizeof *x);
    float *want = xmalloc(rc * sizeof *want);
    random_values(CC_COLL_F32, x, n, seed_for(g_rank, 900), 10);
    const cc_coll_params_t none = method_params(CC_COLL_METHOD_NONE);
    for (int order = 0; order < 2; ++order) {
        float *send = order ? buf + rc : buf, *recv = order ? buf : buf + n;
        pack(CC_COLL_F32, x, n, send);
        dense_reference(MPI_COMM_WORLD, g_size, CC_COLL_F32, CC_COLL_SUM, send, rc, want);
        CHECK_CC(cc_coll_reduce_scatter(send, recv, rc, CC_COLL_F32, CC_COLL_SUM, &none, h, NULL));
        expect_equal(CC_COLL_F32, recv, want, rc, order ? "recvbuf just before sendbuf" : "recvbuf just after sendbuf");
    }
    free(x);
    free(want);
    free(buf);
}

/* ---- main ------------------------------------------------------------------------ */

static void setup(void)
{
    CHECK(encode16(1.0f, 10, 5) == 0x3c00 && encode16(1.0f + 3.0f / 256, 7, 8) == 0x3f82, "16-bit self test");
    /* params NULL must mean method NONE: the environment must not say otherwise. */
    unsetenv("CC_COLL_METHOD");
    unsetenv("CC_COLL_EF_MAX_BYTES");
}

static const NamedTest kTests[] = {
    {"errors", test_errors},
    {"none", test_none},
    {"none_subcomm", test_none_subcomm},
    {"topk_dense", test_topk_dense},
    {"topk_sparse", test_topk_sparse},
    {"topk_nonfinite", test_topk_nonfinite},
    {"sketch_nonfinite", test_sketch_nonfinite},
    {"sketch", test_sketch},
};

int main(int argc, char **argv)
{
    return run_suite(argc, argv, "reduce_scatter", kTests, sizeof kTests / sizeof kTests[0], 1, setup);
}
