/*
 * Method TOPK with real ranks (run with 1, 2, 3 and 4 ranks).
 *
 * References are built in this file from the documented rules only:
 *   k = ceil(density * count) clamped to count; each rank keeps its k
 *   largest |x| (NaN above +-inf above finite; equal magnitudes: lower
 *   index first); payload = 16 + k * (4 + element size) bytes rounded up
 *   to 8; when payload * P > count * element size the call is dense
 *   (MPI_Allreduce SUM of the inputs), otherwise the result is the sum over
 *   ranks, in rank order and in the element type (binary32 rounded to
 *   nearest even per addition for F16/BF16), of every rank's kept values.
 *   AVG divides that by P in the element type.
 *
 * Cases: density 1 vs MPI_Allreduce; sparse exactness; convergence with and
 * without EF; k = 1 and the dense/sparse boundary; zeros; ties; NaN/Inf;
 * parameter errors; the EF cap, accounting, reset and keys; a residual
 * carried from the sparse into the dense path; statistics; F16 and BF16;
 * the coded payload (value widths 16, 8, 4, delta-coded indices).
 * What every method owes (the error-feedback invariant in every dtype,
 * count 0, cross-rank identity, groups, non-blocking forms, agreement) is
 * checked for TOPK by the conformance suite (conformance.c).
 *
 * Any failure prints the case and calls MPI_Abort (exit status non-zero).
 *
 *   mpi_topk [TEST...]   run all tests, or only the named ones
 */
#define _POSIX_C_SOURCE 200809L /* setenv, unsetenv */

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

static uint64_t seed_for(int rank, int test_case) { return 0x1234567ull + (uint64_t)rank * 1000003ull + (uint64_t)test_case * 7919ull; }

/* ---- 16-bit formats, written independently of the library ------------- */

static void self_test_16bit(void)
{
    CHECK(encode16(1.0f, 10, 5) == 0x3c00 && encode16(65520.0f, 10, 5) == 0x7c00, "f16 encodings");
    CHECK(encode16(1.0f + 1.0f / 2048, 10, 5) == 0x3c00 && encode16(1.0f + 3.0f / 2048, 10, 5) == 0x3c02,
          "f16 ties to even");
    CHECK(encode16(1.0f + 1.0f / 256, 7, 8) == 0x3f80 && encode16(1.0f + 3.0f / 256, 7, 8) == 0x3f82,
          "bf16 ties to even");
    CHECK(decode16(0x3555, 10, 5) == (double)(float)decode16(0x3555, 10, 5), "f16 decode");
}

/* ---- the documented rules ------------------------------------------------ */

static int is_dense(size_t n, cc_coll_dtype_t d, double density, int p)
{
    const size_t es = cc_coll_dtype_size(d);
    return payload_bytes(k_for(density, n), es) * (size_t)p > n * es;
}

/* The expected result (as a d buffer in `out`) of a TOPK call with zero
 * residual on this rank's input x (values representable in d). Dense for
 * F16/BF16 assumes exact data (the MPI order is not modelled). Returns 1 when
 * the rule says dense. */
static int expected_topk(cc_coll_dtype_t d, cc_coll_op_t op, const double *x, size_t n, double density, void *out)
{
    const size_t es = cc_coll_dtype_size(d);
    const int dense = is_dense(n, d, density, g_size);
    if (n == 0) return dense;
    if (dense) {
        if (d == CC_COLL_F32 || d == CC_COLL_F64) {
            void *tmp = xmalloc(n * es);
            pack(d, x, n, tmp);
            CHECK(MPI_Allreduce(tmp, out, (int)n, mpi_type(d), MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS,
                  "reference MPI_Allreduce");
            free(tmp);
            if (op == CC_COLL_AVG)
                for (size_t i = 0; i < n; ++i) {
                    if (d == CC_COLL_F32) ((float *)out)[i] = ((float *)out)[i] / (float)g_size;
                    else ((double *)out)[i] = ((double *)out)[i] / (double)g_size;
                }
        } else {
            float *f = xmalloc(n * sizeof *f), *s = xmalloc(n * sizeof *s);
            for (size_t i = 0; i < n; ++i) f[i] = (float)x[i];
            CHECK(MPI_Allreduce(f, s, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS,
                  "reference MPI_Allreduce");
            double *acc = xmalloc(n * sizeof *acc);
            for (size_t i = 0; i < n; ++i) {
                acc[i] = round_to(d, op == CC_COLL_AVG ? (double)(s[i] / (float)g_size) : (double)s[i]);
            }
            pack(d, acc, n, out);
            free(f);
            free(s);
            free(acc);
        }
        return 1;
    }
    const size_t k = k_for(density, n);
    unsigned char *kept = xmalloc(n);
    reference_topk(x, n, k, kept);
    double *mine = xmalloc(n * sizeof *mine);
    for (size_t i = 0; i < n; ++i) mine[i] = kept[i] ? x[i] : 0.0;
    double *all = xmalloc(n * (size_t)g_size * sizeof *all);
    CHECK(MPI_Allgather(mine, (int)n, MPI_DOUBLE, all, (int)n, MPI_DOUBLE, MPI_COMM_WORLD) == MPI_SUCCESS,
          "reference MPI_Allgather");
    double *acc = xmalloc(n * sizeof *acc);
    for (size_t i = 0; i < n; ++i) {
        double a = 0.0;
        for (int r = 0; r < g_size; ++r) a = add_in(d, a, all[(size_t)r * n + i]);
        acc[i] = op == CC_COLL_AVG ? div_in(d, a, g_size) : a;
    }
    pack(d, acc, n, out);
    free(kept);
    free(mine);
    free(all);
    free(acc);
    return 0;
}

/* ---- checks ---------------------------------------------------------------- */

/* Every rank's condition holds (collective). */
static void check_all(int ok, const char *msg)
{
    int all = 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!ok) die("%s", msg, 0);
    if (!all) die("%s (on another rank)", msg, 0);
}

static uint64_t ef_bytes(cc_coll_comm_h h)
{
    uint64_t b = 0;
    CHECK_CC(cc_coll_ef_bytes(h, &b));
    return b;
}

/* Runs one TOPK call on x and checks it against the reference: result,
 * identical on all ranks, sendbuf unchanged, stats delta. */
static void run_and_check(cc_coll_comm_h h, cc_coll_dtype_t d, cc_coll_op_t op, const double *x, size_t n,
                          double density, int ef, int inplace, const char *what)
{
    const size_t es = cc_coll_dtype_size(d);
    char desc[256];
    snprintf(desc, sizeof desc, "%s: %s %s n=%zu density=%g ef=%d %s (P=%d)", what, dtype_name(d),
             op == CC_COLL_SUM ? "SUM" : "AVG", n, density, ef, inplace ? "in-place" : "out-of-place", g_size);
    unsigned char *send = xmalloc(n * es + 16), *recv = xmalloc(n * es + 16), *want = xmalloc(n * es + 16);
    unsigned char *orig = xmalloc(n * es + 16);
    pack(d, x, n, send);
    memcpy(orig, send, n * es);
    const int dense = expected_topk(d, op, x, n, density, want);
    if (inplace) memcpy(recv, send, n * es);
    else memset(recv, 0x5A, n * es);
    memset(recv + n * es, 0xC3, 16);
    cc_coll_params_t p = topk_params(density, ef);
    const cc_coll_stats_t before = get_stats(h);
    const uint64_t efb = ef_bytes(h);
    cc_coll_status_t st = cc_coll_allreduce(inplace ? recv : send, recv, n, d, op, &p, h, NULL);
    if (st != CC_COLL_OK) die("%s", desc, (int)st);
    expect_equal(d, recv, want, n, desc);
    expect_same_on_all_ranks(recv, n * es, desc);
    for (int i = 0; i < 16; ++i) CHECK(recv[n * es + (size_t)i] == 0xC3, "recvbuf written past count");
    if (!inplace) CHECK(memcmp(send, orig, n * es) == 0, "out-of-place call modified sendbuf");
    const cc_coll_stats_t after = get_stats(h);
    const uint64_t wire = dense ? n * es : payload_bytes(k_for(density, n), es);
    if (after.calls != before.calls + 1 || after.bytes_uncompressed != before.bytes_uncompressed + n * es ||
        after.bytes_wire != before.bytes_wire + wire) {
        fprintf(stderr, "[rank %d] %s: stats +%llu calls, +%llu uncompressed, +%llu wire; expected +1, +%zu, +%llu\n",
                g_rank, desc, (unsigned long long)(after.calls - before.calls),
                (unsigned long long)(after.bytes_uncompressed - before.bytes_uncompressed),
                (unsigned long long)(after.bytes_wire - before.bytes_wire), n * es, (unsigned long long)wire);
        die("%s", "stats", 0);
    }
    if (!ef) CHECK(ef_bytes(h) == efb, "EF off changed cc_coll_ef_bytes");
    free(send);
    free(recv);
    free(want);
    free(orig);
}

/* ---- 1. density 1 == MPI_Allreduce ----------------------------------------- */

/* Density 1 keeps every element, so the pairs always outweigh the buffer and
 * the call is one MPI_Allreduce(SUM) of the input: bit-identical to the
 * reference MPI_Allreduce on the same data, also on random data where the
 * reduction order matters (both run the same MPI algorithm on a communicator
 * of the same size and the same message size). */

static void test_density_one(cc_coll_comm_h h)
{
    static const size_t ns[] = {1, 7, 1000, 65537};
    const cc_coll_dtype_t dts[] = {CC_COLL_F32, CC_COLL_F64};
    int c = 0;
    for (int di = 0; di < 2; ++di)
        for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ++ni)
            for (int data = 0; data < 2; ++data) {
                const cc_coll_dtype_t d = dts[di];
                const size_t n = ns[ni];
                double *x = xmalloc(n * sizeof *x);
                if (data == 0) integer_values(x, n, seed_for(g_rank, 100 + c));
                else random_values(d, x, n, seed_for(g_rank, 100 + c), 20);
                ++c;
                CHECK(is_dense(n, d, 1.0, g_size), "density 1 must be dense by the rule");
                for (int op = 0; op < 2; ++op)
                    for (int inplace = 0; inplace < 2; ++inplace)
                        for (int ef = 0; ef < 2; ++ef)
                            run_and_check(h, d, (cc_coll_op_t)op, x, n, 1.0, ef, inplace,
                                          data == 0 ? "density 1, integers" : "density 1, random");
                free(x);
            }
    CHECK_CC(cc_coll_ef_reset_all(h));
}

/* ---- 2. sparse path exactness ------------------------------------------------ */

static void test_sparse_exact(cc_coll_comm_h h)
{
    const size_t ns[] = {4099, 20000};
    const double densities[] = {0.001, 0.01, 0.05};
    const cc_coll_dtype_t dts[] = {CC_COLL_F32, CC_COLL_F64};
    int c = 0;
    for (int di = 0; di < 2; ++di)
        for (size_t ni = 0; ni < 2; ++ni)
            for (size_t dd = 0; dd < 3; ++dd) {
                const cc_coll_dtype_t d = dts[di];
                const size_t n = ns[ni];
                const double density = densities[dd];
                CHECK(!is_dense(n, d, density, g_size), "test setup: this case must take the sparse path");
                double *x = xmalloc(n * sizeof *x);
                random_values(d, x, n, seed_for(g_rank, 200 + c++), 12);
                for (int op = 0; op < 2; ++op)
                    for (int inplace = 0; inplace < 2; ++inplace)
                        run_and_check(h, d, (cc_coll_op_t)op, x, n, density, 0, inplace, "sparse exact");
                free(x);
            }
    /* With EF on, the first call on a fresh tensor is exact too. */
    double *x = xmalloc(20000 * sizeof *x);
    random_values(CC_COLL_F32, x, 20000, seed_for(g_rank, 299), 12);
    CHECK_CC(cc_coll_ef_reset_all(h));
    run_and_check(h, CC_COLL_F32, CC_COLL_SUM, x, 20000, 0.01, 1, 0, "sparse exact, EF on, fresh residual");
    CHECK(ef_bytes(h) == 20000 * 4, "EF on: one f32 residual of 20000 elements");
    CHECK_CC(cc_coll_ef_reset_all(h));
    free(x);
}

/* ---- 3. convergence with and without EF --------------------------------------- */

/* Relative RMS error of the running mean of T steps of TOPK AVG on a fixed
 * input, at step 20 and step 200. */
static void running_mean_errors(cc_coll_comm_h h, int ef, double *err20, double *err200)
{
    const size_t n = 200;
    const double density = 0.1; /* k = 20 of 200 significant entries */
    float *g = xmalloc(n * sizeof *g), *recv = xmalloc(n * sizeof *recv);
    double *gd = xmalloc(n * sizeof *gd), *mean = xmalloc(n * sizeof *mean), *run = calloc(n, sizeof(double));
    CHECK(run != NULL, "calloc");
    CHECK(!is_dense(n, CC_COLL_F32, density, g_size), "test setup: convergence must run sparse");
    for (size_t i = 0; i < n; ++i) {
        g[i] = (float)(1.0 + 0.5 * sin(0.37 * (double)i + 1.3 * (double)g_rank));
        gd[i] = g[i];
    }
    MPI_Allreduce(gd, mean, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    double mnorm = 0;
    for (size_t i = 0; i < n; ++i) {
        mean[i] /= g_size;
        mnorm += mean[i] * mean[i];
    }
    const cc_coll_params_t p = keyed(topk_params(density, ef), 4000 + (uint64_t)ef);
    for (int t = 1; t <= 200; ++t) {
        CHECK_CC(cc_coll_allreduce(g, recv, n, CC_COLL_F32, CC_COLL_AVG, &p, h, NULL));
        for (size_t i = 0; i < n; ++i) run[i] += recv[i];
        if (t == 20 || t == 200) {
            double s = 0;
            for (size_t i = 0; i < n; ++i) {
                const double diff = run[i] / t - mean[i];
                s += diff * diff;
            }
            *(t == 20 ? err20 : err200) = sqrt(s / mnorm);
        }
    }
    free(g);
    free(recv);
    free(gd);
    free(mean);
    free(run);
}

static void test_convergence(cc_coll_comm_h h)
{
    double e20 = 0, e200 = 0, n20 = 0, n200 = 0;
    running_mean_errors(h, 1, &e20, &e200);
    running_mean_errors(h, 0, &n20, &n200);
    if (g_rank == 0)
        printf("  convergence (P=%d): EF err(20)=%.4f err(200)=%.4f; no EF err(20)=%.4f err(200)=%.4f\n", g_size, e20,
               e200, n20, n200);
    CHECK(e200 < e20 / 5, "EF: running-mean error did not fall ~1/T (err(200) >= err(20)/5)");
    CHECK(e200 < 0.05, "EF: running-mean error after 200 steps is not small");
    CHECK(n200 > 0.5 * n20, "no EF: running-mean error should not fall");
    CHECK(n200 > 0.5, "no EF: top-k without EF should be strongly biased here");
    CHECK_CC(cc_coll_ef_reset_all(h));
}

/* ---- 4. edge cases: k = 1, boundary, zeros, ties --------------------------------- */

static void test_small_k_and_boundary(cc_coll_comm_h h)
{
    const size_t P = (size_t)g_size;
    /* (n, density) pairs around k = 1 and around the dense/sparse boundary:
     * F32 k=1 payload 24: sparse iff 24 P <= 4 n; F64 k=1 payload 32: 32 P <= 8 n. */
    const struct {
        size_t n;
        double density;
    } cases[] = {
        {3, 0.01},        {1, 0.5},           {2, 0.01},          {1000, 1e-4},       {1000, 0.001},
        {6 * P, 0.1 / P}, {6 * P - 1, 0.1 / P}, {4 * P, 0.1 / P}, {4 * P - 1, 0.1 / P}, {6 * P + 1, 0.1 / P},
        {97, 0.05},       {5000, 0.2},        {5000, 0.5},
    };
    int c = 0, sparse_seen = 0, dense_seen = 0;
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ++ci)
        for (int di = 0; di < 2; ++di) {
            const cc_coll_dtype_t d = di ? CC_COLL_F64 : CC_COLL_F32;
            const size_t n = cases[ci].n;
            double *x = xmalloc(n * sizeof *x);
            random_values(d, x, n, seed_for(g_rank, 500 + c++), 10);
            if (is_dense(n, d, cases[ci].density, g_size)) ++dense_seen;
            else ++sparse_seen;
            for (int op = 0; op < 2; ++op)
                for (int inplace = 0; inplace < 2; ++inplace)
                    run_and_check(h, d, (cc_coll_op_t)op, x, n, cases[ci].density, 0, inplace, "k=1 / boundary");
            free(x);
        }
    CHECK(sparse_seen > 0 && dense_seen > 0, "test setup: both paths must be exercised");
    /* The boundary itself: payload * P == count * size is sparse. */
    CHECK(!is_dense(6 * P, CC_COLL_F32, 0.1 / (double)P, g_size) && is_dense(6 * P - 1, CC_COLL_F32, 0.1 / (double)P, g_size),
          "test setup: F32 boundary");
}

static void test_zeros(cc_coll_comm_h h)
{
    const size_t n = 5000;
    const cc_coll_dtype_t dts[] = {CC_COLL_F32, CC_COLL_F64, CC_COLL_F16, CC_COLL_BF16};
    for (int di = 0; di < 4; ++di) {
        const cc_coll_dtype_t d = dts[di];
        const size_t es = cc_coll_dtype_size(d);
        CHECK(!is_dense(n, d, 0.01, g_size), "test setup: zeros must run sparse");
        unsigned char *buf = xmalloc(n * es);
        double *e = xmalloc(n * sizeof *e);
        const cc_coll_params_t p = keyed(topk_params(0.01, 1), 600 + (uint64_t)di);
        for (int step = 0; step < 3; ++step)
            for (int op = 0; op < 2; ++op) {
                memset(buf, 0, n * es);
                if (step == 1)
                    for (size_t i = 0; i < n; i += 2) buf[i * es + es - 1] = 0x80; /* -0.0 */
                CHECK_CC(cc_coll_allreduce(buf, buf, n, d, (cc_coll_op_t)op, &p, h, NULL));
                for (size_t i = 0; i < n; ++i) {
                    const double v = element(d, buf, i);
                    if (!(v == 0.0)) die("%s: all-zero input gave a non-zero or NaN element", dtype_name(d), 0);
                }
            }
        CHECK_CC(cc_coll_ef_get_residual(h, &p, buf, n, d, e));
        for (size_t i = 0; i < n; ++i) CHECK(e[i] == 0.0, "all-zero input left a non-zero residual");
        free(buf);
        free(e);
    }
    CHECK_CC(cc_coll_ef_reset_all(h));
}

static void test_ties(cc_coll_comm_h h)
{
    const size_t n = 3000;
    const double density = 0.01; /* k = 30 */
    const size_t k = k_for(density, n);
    for (int di = 0; di < 2; ++di) {
        const cc_coll_dtype_t d = di ? CC_COLL_F64 : CC_COLL_F32;
        double *x = xmalloc(n * sizeof *x);
        /* Equal magnitudes, signs depending on index and rank. */
        for (size_t i = 0; i < n; ++i) x[i] = ((i * 7 + (size_t)g_rank) % 3 == 0) ? -2.0 : 2.0;
        for (int inplace = 0; inplace < 2; ++inplace)
            run_and_check(h, d, CC_COLL_SUM, x, n, density, 0, inplace, "ties");
        /* And explicitly: the lowest k indices win on every rank. */
        double *col = xmalloc(n * sizeof *col);
        MPI_Allreduce(x, col, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        unsigned char *buf = xmalloc(n * 8);
        pack(d, x, n, buf);
        const cc_coll_params_t p = topk_params(density, 0);
        CHECK_CC(cc_coll_allreduce(buf, buf, n, d, CC_COLL_SUM, &p, h, NULL));
        for (size_t i = 0; i < n; ++i) {
            const double want = i < k ? col[i] : 0.0;
            if (element(d, buf, i) != want) die("%s: ties are not broken by the lower index", dtype_name(d), 0);
        }
        free(x);
        free(col);
        free(buf);
    }
}

/* ---- 5. NaN / Inf ------------------------------------------------------------ */

static void test_nonfinite(cc_coll_comm_h h)
{
    const size_t n = 1000;
    const double density = 0.01; /* k = 10 */
    for (int di = 0; di < 2; ++di) {
        const cc_coll_dtype_t d = di ? CC_COLL_F64 : CC_COLL_F32;
        const size_t es = cc_coll_dtype_size(d);
        CHECK(!is_dense(n, d, density, g_size), "test setup: NaN/Inf case must run sparse");
        double *x = xmalloc(n * sizeof *x), *e = xmalloc(n * sizeof *e);
        unsigned char *send = xmalloc(n * es), *recv = xmalloc(n * es), *ref = xmalloc(n * es);
        const cc_coll_params_t p = keyed(topk_params(density, 1), 700 + (uint64_t)di);

        /* One NaN and one +Inf on the last rank; +Inf and -Inf at one index
         * on ranks 0 and 1 (NaN in the sum). */
        integer_values(x, n, seed_for(g_rank, 700 + di));
        if (g_rank == g_size - 1) {
            x[17] = NAN;
            x[500] = INFINITY;
        }
        if (g_size >= 2 && g_rank == 0) x[800] = INFINITY;
        if (g_size >= 2 && g_rank == 1) x[800] = -INFINITY;
        if (g_rank == 0) x[999] = -INFINITY;
        pack(d, x, n, send);
        CHECK(MPI_Allreduce(send, ref, (int)n, mpi_type(d), MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS, "MPI_Allreduce");
        CHECK(isnan(element(d, ref, 17)) && isinf(element(d, ref, 500)), "test setup: reference pattern");
        const cc_coll_stats_t before = get_stats(h);
        CHECK_CC(cc_coll_allreduce(send, recv, n, d, CC_COLL_SUM, &p, h, NULL));
        const cc_coll_stats_t after = get_stats(h);
        CHECK(after.bytes_wire - before.bytes_wire == payload_bytes(k_for(density, n), es),
              "NaN/Inf within k: the sparse path must run");
        expect_nonfinite_pattern(d, recv, ref, n, "NaN/Inf within k");
        CHECK(isnan(element(d, recv, 17)) && element(d, recv, 500) == INFINITY && element(d, recv, 999) == -INFINITY,
              "NaN/Inf positions");
        if (g_size >= 2) CHECK(isnan(element(d, recv, 800)), "+Inf + -Inf must give NaN");
        expect_same_on_all_ranks(recv, n * es, "NaN/Inf within k");
        /* The residual never keeps non-finite values ... */
        CHECK_CC(cc_coll_ef_get_residual(h, &p, recv, n, d, e));
        for (size_t i = 0; i < n; ++i) CHECK(isfinite(e[i]), "residual holds a non-finite value");
        /* ... so the next call with finite data is finite everywhere. */
        integer_values(x, n, seed_for(g_rank, 710 + di));
        pack(d, x, n, send);
        CHECK_CC(cc_coll_allreduce(send, recv, n, d, CC_COLL_SUM, &p, h, NULL));
        for (size_t i = 0; i < n; ++i) CHECK(isfinite(element(d, recv, i)), "NaN/Inf leaked into the next call");
        CHECK_CC(cc_coll_ef_reset(h, &p, recv, n, d));

        /* More non-finite values than k on rank 0: every rank falls back to
         * dense, the result is MPI_SUM's exactly (integer data). */
        integer_values(x, n, seed_for(g_rank, 720 + di));
        if (g_rank == 0)
            for (size_t j = 0; j < 15; ++j) x[j * 61 + 3] = j % 3 == 0 ? NAN : j % 3 == 1 ? INFINITY : -INFINITY;
        pack(d, x, n, send);
        CHECK(MPI_Allreduce(send, ref, (int)n, mpi_type(d), MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS, "MPI_Allreduce");
        const cc_coll_stats_t b2 = get_stats(h);
        CHECK_CC(cc_coll_allreduce(send, recv, n, d, CC_COLL_SUM, &p, h, NULL));
        const cc_coll_stats_t a2 = get_stats(h);
        expect_nonfinite_pattern(d, recv, ref, n, "more NaN/Inf than k");
        expect_equal(d, recv, ref, n, "more NaN/Inf than k: dense fallback equals MPI_SUM");
        expect_same_on_all_ranks(recv, n * es, "more NaN/Inf than k");
        CHECK(a2.bytes_wire - b2.bytes_wire == payload_bytes(k_for(density, n), es) + n * es,
              "overflow fallback: wire bytes = the gathered payload + the dense buffer");
        CHECK_CC(cc_coll_ef_get_residual(h, &p, recv, n, d, e));
        for (size_t i = 0; i < n; ++i) CHECK(e[i] == 0.0, "dense fallback of exact data leaves a zero residual");
        CHECK_CC(cc_coll_ef_reset(h, &p, recv, n, d));
        free(x);
        free(e);
        free(send);
        free(recv);
        free(ref);
    }
}

/* ---- 6. errors, EF store, keys, cap -------------------------------------------- */

static void test_bad_params(cc_coll_comm_h h)
{
    const double bad[] = {0.0, -1.0, 1.5, NAN, INFINITY};
    float buf[64];
    memset(buf, 0, sizeof buf);
    const cc_coll_stats_t before = get_stats(h);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
        cc_coll_params_t p = topk_params(bad[i], 1);
        cc_coll_status_t st = cc_coll_allreduce(buf, buf, 64, CC_COLL_F32, CC_COLL_SUM, &p, h, NULL);
        if (st != CC_COLL_ERR_INVALID_ARG) die("bad density: expected CC_COLL_ERR_INVALID_ARG", "", (int)st);
        if (strstr(cc_coll_last_error(), "density") == NULL) die("last error does not name density: %s", cc_coll_last_error(), 0);
    }
    cc_coll_params_t p = topk_params(0.5, 2);
    cc_coll_status_t st = cc_coll_allreduce(buf, buf, 64, CC_COLL_F32, CC_COLL_SUM, &p, h, NULL);
    if (st != CC_COLL_ERR_INVALID_ARG) die("ef = 2: expected CC_COLL_ERR_INVALID_ARG", "", (int)st);
    CHECK(get_stats(h).calls == before.calls, "rejected calls must not be counted");
    /* The residual functions check params the same way. */
    double out[64];
    p = topk_params(-1.0, 1);
    st = cc_coll_ef_get_residual(h, &p, buf, 64, CC_COLL_F32, out);
    if (st != CC_COLL_ERR_INVALID_ARG) die("ef_get_residual with bad density", "", (int)st);
}

static void test_ef_store(cc_coll_comm_h h)
{
    CHECK_CC(cc_coll_ef_reset_all(h));
    CHECK(ef_bytes(h) == 0, "ef bytes after reset_all");
    const size_t n = 1000;
    const double density = 0.01;
    float *f32 = xmalloc(n * 4);
    double *f64 = xmalloc(n * 8), *e = xmalloc(n * sizeof *e), *e2 = xmalloc(n * sizeof *e2);
    uint16_t *f16 = xmalloc(n * 2), *bf16 = xmalloc((n + 1) * 2);
    double *x = xmalloc((n + 1) * sizeof *x);
    random_values(CC_COLL_F16, x, n + 1, seed_for(g_rank, 800), 4);
    pack(CC_COLL_F32, x, n, f32);
    pack(CC_COLL_F64, x, n / 2, f64);
    pack(CC_COLL_F16, x, n, f16);
    pack(CC_COLL_BF16, x, n + 1, bf16);
    const cc_coll_params_t on = topk_params(density, 1), off = topk_params(density, 0);

    /* Accounting: 4 bytes per element for F32/F16/BF16, 8 for F64. */
    CHECK_CC(cc_coll_allreduce(f32, f32, n, CC_COLL_F32, CC_COLL_SUM, &on, h, NULL));
    CHECK(ef_bytes(h) == 4 * n, "ef bytes: f32 residual");
    CHECK_CC(cc_coll_allreduce(f64, f64, n / 2, CC_COLL_F64, CC_COLL_SUM, &on, h, NULL));
    CHECK(ef_bytes(h) == 4 * n + 8 * (n / 2), "ef bytes: f64 residual");
    CHECK_CC(cc_coll_allreduce(f16, f16, n, CC_COLL_F16, CC_COLL_SUM, &on, h, NULL));
    CHECK(ef_bytes(h) == 8 * n + 4 * n, "ef bytes: f16 residual");
    CHECK_CC(cc_coll_allreduce(bf16, bf16, n + 1, CC_COLL_BF16, CC_COLL_SUM, &on, h, NULL));
    const uint64_t total = 12 * n + 4 * (n + 1);
    CHECK(ef_bytes(h) == total, "ef bytes: bf16 residual");
    /* Same buffers again: no new residuals. */
    CHECK_CC(cc_coll_allreduce(f32, f32, n, CC_COLL_F32, CC_COLL_SUM, &on, h, NULL));
    CHECK(ef_bytes(h) == total, "ef bytes: a second call on the same tensor");
    /* EF off leaves the store alone. */
    float *other = xmalloc(n * 4);
    pack(CC_COLL_F32, x, n, other);
    CHECK_CC(cc_coll_allreduce(other, other, n, CC_COLL_F32, CC_COLL_SUM, &off, h, NULL));
    CHECK(ef_bytes(h) == total, "EF off created a residual");
    CHECK_CC(cc_coll_ef_get_residual(h, &off, other, n, CC_COLL_F32, e));
    for (size_t i = 0; i < n; ++i) CHECK(e[i] == 0.0, "a tensor without residual reads as zeros");

    /* The f32 residual is non-zero (top-k kept only k elements). */
    CHECK_CC(cc_coll_ef_get_residual(h, &on, f32, n, CC_COLL_F32, e));
    size_t nonzero = 0;
    for (size_t i = 0; i < n; ++i) nonzero += e[i] != 0.0;
    CHECK(nonzero > n / 2, "f32 residual should hold most of the input");
    /* A residual read with another count/dtype for the same derived key is
     * another (absent) tensor. */
    CHECK_CC(cc_coll_ef_get_residual(h, &on, f32, n - 1, CC_COLL_F32, e2));
    for (size_t i = 0; i < n - 1; ++i) CHECK(e2[i] == 0.0, "another count is another tensor");

    /* reset one. */
    CHECK_CC(cc_coll_ef_reset(h, &on, f64, n / 2, CC_COLL_F64));
    CHECK(ef_bytes(h) == total - 8 * (n / 2), "ef bytes after cc_coll_ef_reset");
    CHECK_CC(cc_coll_ef_get_residual(h, &on, f64, n / 2, CC_COLL_F64, e));
    for (size_t i = 0; i < n / 2; ++i) CHECK(e[i] == 0.0, "reset residual reads as zeros");
    CHECK_CC(cc_coll_ef_reset(h, &on, f64, n / 2, CC_COLL_F64)); /* absent: not an error */
    CHECK_CC(cc_coll_ef_reset_all(h));
    CHECK(ef_bytes(h) == 0, "ef bytes after cc_coll_ef_reset_all");
    CHECK_CC(cc_coll_ef_get_residual(h, &on, f32, n, CC_COLL_F32, e));
    for (size_t i = 0; i < n; ++i) CHECK(e[i] == 0.0, "reset_all residual reads as zeros");

    /* Explicit key: two different recvbufs share one residual. */
    float *a = xmalloc(n * 4), *b = xmalloc(n * 4);
    double *g1 = xmalloc(n * sizeof *g1), *g2 = xmalloc(n * sizeof *g2), *tot = xmalloc(n * sizeof *tot);
    random_values(CC_COLL_F32, g1, n, seed_for(g_rank, 810), 6);
    random_values(CC_COLL_F32, g2, n, seed_for(g_rank, 811), 6);
    const cc_coll_params_t k99 = keyed(on, 99);
    pack(CC_COLL_F32, g1, n, a);
    CHECK_CC(cc_coll_allreduce(a, a, n, CC_COLL_F32, CC_COLL_SUM, &k99, h, NULL));
    CHECK(ef_bytes(h) == 4 * n, "explicit key: one residual");
    CHECK_CC(cc_coll_ef_get_residual(h, &k99, a, n, CC_COLL_F32, e));
    CHECK_CC(cc_coll_ef_get_residual(h, &k99, b, n, CC_COLL_F32, e2));
    CHECK(memcmp(e, e2, n * sizeof *e) == 0, "explicit key: the residual does not depend on recvbuf");
    double *res1 = xmalloc(n * sizeof *res1);
    for (size_t i = 0; i < n; ++i) res1[i] = a[i];
    pack(CC_COLL_F32, g2, n, b);
    CHECK_CC(cc_coll_allreduce(b, b, n, CC_COLL_F32, CC_COLL_SUM, &k99, h, NULL));
    CHECK(ef_bytes(h) == 4 * n, "explicit key: the second buffer reused the residual");
    /* Global invariant over the two calls proves the second call used the
     * first call's residual: res1 + res2 + sum e == sum (g1 + g2). */
    CHECK_CC(cc_coll_ef_get_residual(h, &k99, a, n, CC_COLL_F32, e));
    for (size_t i = 0; i < n; ++i) e2[i] = g1[i] + g2[i];
    MPI_Allreduce(MPI_IN_PLACE, e, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(e2, tot, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    double worst = 0;
    for (size_t i = 0; i < n; ++i) {
        const double err = fabs(res1[i] + (double)b[i] + e[i] - tot[i]);
        if (err > worst) worst = err;
    }
    CHECK(worst < 1e-3, "explicit key: sum of results + residual != sum of inputs over the two buffers");
    /* The same key with another count is a mismatch on every rank (no hang). */
    cc_coll_status_t st = cc_coll_allreduce(a, a, n - 1, CC_COLL_F32, CC_COLL_SUM, &k99, h, NULL);
    check_all(st == CC_COLL_ERR_MISMATCH, "explicit key reused with another count must be CC_COLL_ERR_MISMATCH");
    CHECK(ef_bytes(h) == 4 * n, "mismatch must not change the store");
    /* Derived keys: two buffers, two residuals. */
    CHECK_CC(cc_coll_ef_reset_all(h));
    pack(CC_COLL_F32, g1, n, a);
    pack(CC_COLL_F32, g1, n, b);
    CHECK_CC(cc_coll_allreduce(a, a, n, CC_COLL_F32, CC_COLL_SUM, &on, h, NULL));
    CHECK_CC(cc_coll_allreduce(b, b, n, CC_COLL_F32, CC_COLL_SUM, &on, h, NULL));
    CHECK(ef_bytes(h) == 8 * n, "derived keys: one residual per recvbuf");
    CHECK_CC(cc_coll_ef_get_residual(h, &on, a, n, CC_COLL_F32, e));
    CHECK_CC(cc_coll_ef_get_residual(h, &on, b, n, CC_COLL_F32, e2));
    CHECK(memcmp(e, e2, n * sizeof *e) == 0, "same input, fresh residuals: same residual");
    CHECK_CC(cc_coll_ef_reset(h, &on, a, n, CC_COLL_F32));
    CHECK(ef_bytes(h) == 4 * n, "reset of one derived key");
    CHECK_CC(cc_coll_ef_reset_all(h));

    free(f32);
    free(f64);
    free(e);
    free(e2);
    free(f16);
    free(bf16);
    free(x);
    free(other);
    free(a);
    free(b);
    free(g1);
    free(g2);
    free(tot);
    free(res1);
}

/* A tensor's residual carries over when the same tensor takes the dense path
 * (here: density 1 after a sparse call): the dense call reduces g + e. */
static void test_ef_across_paths(cc_coll_comm_h h)
{
    const size_t n = 1000;
    for (int di = 0; di < 2; ++di) {
        const cc_coll_dtype_t d = di ? CC_COLL_F64 : CC_COLL_F32;
        const size_t es = cc_coll_dtype_size(d);
        double *x = xmalloc(n * sizeof *x), *e = xmalloc(n * sizeof *e), *gp = xmalloc(n * sizeof *gp);
        unsigned char *buf = xmalloc(n * es), *want = xmalloc(n * es), *tmp = xmalloc(n * es);
        const cc_coll_params_t sparse = keyed(topk_params(0.01, 1), 1300 + (uint64_t)di);
        const cc_coll_params_t dense = keyed(topk_params(1.0, 1), 1300 + (uint64_t)di);
        CHECK(!is_dense(n, d, 0.01, g_size) && is_dense(n, d, 1.0, g_size), "test setup: sparse then dense");
        random_values(d, x, n, seed_for(g_rank, 1300 + di), 8);
        pack(d, x, n, buf);
        CHECK_CC(cc_coll_allreduce(buf, buf, n, d, CC_COLL_SUM, &sparse, h, NULL));
        CHECK_CC(cc_coll_ef_get_residual(h, &sparse, buf, n, d, e));
        size_t carried = 0;
        for (size_t i = 0; i < n; ++i) carried += e[i] != 0.0;
        CHECK(carried > n / 2, "the sparse call should leave most of its input in the residual");
        /* Dense call: expected = MPI_SUM over ranks of (g2 + e1) in the dtype. */
        random_values(d, x, n, seed_for(g_rank, 1310 + di), 8);
        for (size_t i = 0; i < n; ++i) gp[i] = add_in(d, e[i], x[i]);
        pack(d, gp, n, tmp);
        CHECK(MPI_Allreduce(tmp, want, (int)n, mpi_type(d), MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS, "MPI_Allreduce");
        pack(d, x, n, buf);
        CHECK_CC(cc_coll_allreduce(buf, buf, n, d, CC_COLL_SUM, &dense, h, NULL));
        expect_equal(d, buf, want, n, "dense call after a sparse one reduces g + e");
        CHECK_CC(cc_coll_ef_get_residual(h, &dense, buf, n, d, e));
        for (size_t i = 0; i < n; ++i) CHECK(e[i] == 0.0, "dense call of f32/f64 data leaves a zero residual");
        CHECK_CC(cc_coll_ef_reset(h, &dense, buf, n, d));
        free(x);
        free(e);
        free(gp);
        free(buf);
        free(want);
        free(tmp);
    }
}

static void test_ef_cap(void)
{
    const size_t n = 1000;
    CHECK(setenv("CC_COLL_EF_MAX_BYTES", "6000", 1) == 0, "setenv");
    cc_coll_comm_h h = NULL;
    CHECK_CC(cc_coll_comm_create(MPI_COMM_WORLD, &h));
    CHECK(unsetenv("CC_COLL_EF_MAX_BYTES") == 0, "unsetenv");
    float *a = xmalloc(n * 4), *b = xmalloc(n * 4), *want = xmalloc(n * 4);
    double *x = xmalloc(n * sizeof *x);
    random_values(CC_COLL_F32, x, n, seed_for(g_rank, 900), 6);
    const cc_coll_params_t on = topk_params(0.01, 1), off = topk_params(0.01, 0);

    pack(CC_COLL_F32, x, n, a);
    expected_topk(CC_COLL_F32, CC_COLL_SUM, x, n, 0.01, want);
    CHECK_CC(cc_coll_allreduce(a, a, n, CC_COLL_F32, CC_COLL_SUM, &on, h, NULL));
    expect_equal(CC_COLL_F32, a, want, n, "EF cap: first tensor");
    CHECK(ef_bytes(h) == 4000, "EF cap: first residual");

    /* A second tensor would need 4000 more bytes: refused on every rank. */
    pack(CC_COLL_F32, x, n, b);
    const cc_coll_status_t st = cc_coll_allreduce(b, b, n, CC_COLL_F32, CC_COLL_SUM, &on, h, NULL);
    if (st != CC_COLL_ERR_EF_LIMIT) fprintf(stderr, "[rank %d] got %s\n", g_rank, cc_coll_status_string(st));
    check_all(st == CC_COLL_ERR_EF_LIMIT, "second tensor over CC_COLL_EF_MAX_BYTES must fail with EF_LIMIT");
    if (strstr(cc_coll_last_error(), "CC_COLL_EF_MAX_BYTES") == NULL)
        die("EF_LIMIT message does not name CC_COLL_EF_MAX_BYTES: %s", cc_coll_last_error(), 0);
    CHECK(ef_bytes(h) == 4000, "EF cap: the refused residual was counted");

    /* The first tensor keeps working; the second works with EF off. */
    pack(CC_COLL_F32, x, n, a);
    CHECK_CC(cc_coll_allreduce(a, a, n, CC_COLL_F32, CC_COLL_SUM, &on, h, NULL));
    for (size_t i = 0; i < n; ++i) CHECK(isfinite(a[i]), "EF cap: first tensor's second call");
    pack(CC_COLL_F32, x, n, b);
    CHECK_CC(cc_coll_allreduce(b, b, n, CC_COLL_F32, CC_COLL_SUM, &off, h, NULL));
    expect_equal(CC_COLL_F32, b, want, n, "EF cap: EF off needs no residual");
    CHECK(ef_bytes(h) == 4000, "EF cap: EF off");
    /* After a reset the second tensor fits. */
    CHECK_CC(cc_coll_ef_reset(h, &on, a, n, CC_COLL_F32));
    pack(CC_COLL_F32, x, n, b);
    CHECK_CC(cc_coll_allreduce(b, b, n, CC_COLL_F32, CC_COLL_SUM, &on, h, NULL));
    expect_equal(CC_COLL_F32, b, want, n, "EF cap: after reset");
    CHECK(ef_bytes(h) == 4000, "EF cap: after reset");
    CHECK_CC(cc_coll_comm_destroy(h));
    free(a);
    free(b);
    free(want);
    free(x);
}

/* ---- 7. statistics --------------------------------------------------------------- */

static void test_stats(cc_coll_comm_h h)
{
    const size_t n = 10000;
    for (int di = 0; di < 4; ++di) {
        const cc_coll_dtype_t d = (cc_coll_dtype_t)di;
        const size_t es = cc_coll_dtype_size(d);
        unsigned char *buf = xmalloc(n * es);
        double *x = xmalloc(n * sizeof *x);
        integer_values(x, n, seed_for(g_rank, 1000 + di));
        pack(d, x, n, buf);
        CHECK_CC(cc_coll_comm_reset_stats(h));
        cc_coll_params_t p = topk_params(0.01, 0);
        CHECK_CC(cc_coll_allreduce(buf, buf, n, d, CC_COLL_SUM, &p, h, NULL));
        cc_coll_stats_t s = get_stats(h);
        const uint64_t pb = payload_bytes(100, es);
        CHECK(pb == ((16 + 100 * (4 + es) + 7) / 8) * 8, "payload size");
        CHECK(s.calls == 1 && s.bytes_uncompressed == n * es && s.bytes_wire == pb, "stats after one sparse call");
        CHECK(s.time_compress >= 0 && s.time_communicate >= 0 && s.time_decompress >= 0, "stats times");
        p = topk_params(1.0, 0);
        CHECK_CC(cc_coll_allreduce(buf, buf, n, d, CC_COLL_AVG, &p, h, NULL));
        s = get_stats(h);
        CHECK(s.calls == 2 && s.bytes_uncompressed == 2 * n * es && s.bytes_wire == pb + n * es,
              "stats after a dense call");
        free(buf);
        free(x);
    }
}

/* ---- 8. F16 and BF16 --------------------------------------------------------------- */

static void test_half(cc_coll_comm_h h)
{
    const size_t n = 4000;
    const double density = 0.01;
    int c = 0;
    for (int di = 2; di < 4; ++di) {
        const cc_coll_dtype_t d = (cc_coll_dtype_t)di;
        CHECK(!is_dense(n, d, density, g_size), "test setup: 16-bit case must run sparse");
        double *x = xmalloc(n * sizeof *x);
        for (int data = 0; data < 2; ++data) {
            if (data == 0) integer_values(x, n, seed_for(g_rank, 1100 + c));
            else random_values(d, x, n, seed_for(g_rank, 1100 + c), 6);
            ++c;
            for (int op = 0; op < 2; ++op)
                for (int inplace = 0; inplace < 2; ++inplace)
                    run_and_check(h, d, (cc_coll_op_t)op, x, n, density, 0, inplace,
                                  data == 0 ? "16-bit, integers" : "16-bit, random (RNE per addition)");
        }
        /* Dense (density 1) with exact data. */
        integer_values(x, n, seed_for(g_rank, 1150 + di));
        run_and_check(h, d, CC_COLL_SUM, x, n, 1.0, 0, 1, "16-bit dense");
        free(x);
    }
    CHECK_CC(cc_coll_ef_reset_all(h));
}

/* ---- main ------------------------------------------------------------------------ */

/* ---- 9. the coded payload (CC_COLL_TOPK_VALUE_BITS, CC_COLL_TOPK_INDEX_CODING) */

/* A communicator created with the TOPK payload settings in the environment. */
static cc_coll_comm_h coded_comm(const char *value_bits, const char *index_coding)
{
    CHECK(setenv("CC_COLL_TOPK_VALUE_BITS", value_bits, 1) == 0, "setenv");
    CHECK(setenv("CC_COLL_TOPK_INDEX_CODING", index_coding, 1) == 0, "setenv");
    cc_coll_comm_h c = NULL;
    CHECK_CC(cc_coll_comm_create(MPI_COMM_WORLD, &c));
    unsetenv("CC_COLL_TOPK_VALUE_BITS");
    unsetenv("CC_COLL_TOPK_INDEX_CODING");
    return c;
}

/* F32, n 20000, density 0.05, EF on, three calls per setting. Each call:
 * every rank gets the same bits; the result is the uncoded reference
 * (expected_topk of g' = x + e) within P half-steps (exactly it with full
 * values); results plus every rank's residual sum to the inputs plus the
 * residuals before (the EF invariant); bytes_wire drops against the uncoded
 * payload by at least the factor the widths give (indices about 6 bits at
 * this density, 9 at most counted). */
static void test_coded(cc_coll_comm_h h)
{
    (void)h;
    static const struct {
        const char *bits, *coding;
        int levels;      /* 0: full values */
        double factor;   /* uncoded payload / bytes_wire at least */
    } kSettings[] = {{"full", "delta", 0, 1.5}, {"16", "auto", 32767, 2.5}, {"8", "auto", 127, 4.0},
                     {"4", "auto", 7, 6.0}};
    const size_t n = 20000;
    const double density = 0.05;
    const size_t k = k_for(density, n);
    double *x = xmalloc(n * sizeof *x), *gp = xmalloc(n * sizeof *gp), *e = xmalloc(n * sizeof *e);
    double *sum_in = xmalloc(n * sizeof *sum_in), *sum_res = xmalloc(n * sizeof *sum_res);
    float *buf = xmalloc(n * 4), *want = xmalloc(n * 4);
    for (size_t si = 0; si < sizeof kSettings / sizeof kSettings[0]; ++si) {
        cc_coll_comm_h c = coded_comm(kSettings[si].bits, kSettings[si].coding);
        const cc_coll_params_t p = topk_params(density, 1);
        for (size_t i = 0; i < n; ++i) e[i] = 0.0;
        for (int call = 0; call < 3; ++call) {
            char desc[160];
            snprintf(desc, sizeof desc, "coded TOPK: value bits %s, index coding %s, call %d (P=%d)",
                     kSettings[si].bits, kSettings[si].coding, call, g_size);
            random_values(CC_COLL_F32, x, n, seed_for(g_rank, 2000 + (int)si * 10 + call), 6);
            /* g' = x + e in binary32, as the library forms it. */
            double top = 0.0;
            for (size_t i = 0; i < n; ++i) {
                gp[i] = (double)((float)x[i] + (float)e[i]);
                if (fabs(gp[i]) > top) top = fabs(gp[i]);
            }
            CHECK(MPI_Allreduce(MPI_IN_PLACE, &top, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD) == MPI_SUCCESS, "max");
            expected_topk(CC_COLL_F32, CC_COLL_SUM, gp, n, density, want);
            CHECK(MPI_Allreduce(gp, sum_in, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS, "sum");
            pack(CC_COLL_F32, x, n, buf);
            const cc_coll_stats_t before = get_stats(c);
            CHECK_CC(cc_coll_allreduce(buf, buf, n, CC_COLL_F32, CC_COLL_SUM, &p, c, NULL));
            const cc_coll_stats_t after = get_stats(c);
            expect_same_on_all_ranks(buf, n * 4, desc);
            /* Bytes: the largest rank's payload plus the 8-byte size. */
            const uint64_t wire = after.bytes_wire - before.bytes_wire;
            if ((double)payload_bytes(k, 4) < kSettings[si].factor * (double)wire || wire % 8 != 0) {
                fprintf(stderr, "[rank %d] bytes_wire %llu, uncoded payload %zu\n", g_rank, (unsigned long long)wire,
                        payload_bytes(k, 4));
                die("%s: bytes_wire is not below the uncoded payload / the expected factor", desc, 0);
            }
            /* The result against the uncoded reference. */
            const double bound =
                kSettings[si].levels ? (double)g_size * 0.5 * top / kSettings[si].levels * (1.0 + 1e-6) + 1e-30 : 0.0;
            for (size_t i = 0; i < n; ++i) {
                const double d = fabs((double)buf[i] - (double)want[i]);
                if (!(d <= bound + (kSettings[si].levels ? 1e-6 * fabs((double)want[i]) : 0.0))) {
                    fprintf(stderr, "[rank %d] element %zu: %.9g, reference %.9g\n", g_rank, i, (double)buf[i],
                            (double)want[i]);
                    die("%s: element differs from the uncoded reference by more than P half-steps", desc, 0);
                }
            }
            /* The EF invariant: sum of results (every rank's is the same) +
             * sum of residuals == sum of g'. */
            CHECK_CC(cc_coll_ef_get_residual(c, &p, buf, n, CC_COLL_F32, e));
            CHECK(MPI_Allreduce(e, sum_res, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS, "sum");
            for (size_t i = 0; i < n; ++i) {
                const double lhs = (double)buf[i] + sum_res[i];
                if (fabs(lhs - sum_in[i]) > 1e-5 * (fabs(sum_in[i]) + top)) {
                    fprintf(stderr, "[rank %d] element %zu: %.9g + %.9g vs %.9g\n", g_rank, i, (double)buf[i],
                            sum_res[i], sum_in[i]);
                    die("%s: results + residuals differ from the inputs (EF invariant)", desc, 0);
                }
            }
        }
        CHECK_CC(cc_coll_comm_destroy(c));
    }

    /* The reduce-scatter codes too: 4-bit values, bytes_wire at least 4
     * times below the uncoded payloads (the EF invariant of the coded
     * reduce-scatter: the conformance suite's run with the setting). */
    {
        cc_coll_comm_h c = coded_comm("4", "auto");
        const cc_coll_params_t p = topk_params(density, 1);
        const size_t rc = n / (size_t)g_size;
        random_values(CC_COLL_F32, x, rc * (size_t)g_size, seed_for(g_rank, 2200), 6);
        pack(CC_COLL_F32, x, rc * (size_t)g_size, buf);
        const cc_coll_stats_t before = get_stats(c);
        CHECK_CC(cc_coll_reduce_scatter(buf, want, rc, CC_COLL_F32, CC_COLL_SUM, &p, c, NULL));
        const cc_coll_stats_t after = get_stats(c);
        const uint64_t wire = after.bytes_wire - before.bytes_wire;
        const size_t uncoded = payload_bytes(k_for(density, rc), 4) * (size_t)g_size;
        if ((double)uncoded < 4.0 * (double)wire) {
            fprintf(stderr, "[rank %d] bytes_wire %llu, uncoded payloads %zu\n", g_rank, (unsigned long long)wire,
                    uncoded);
            die("%s", "coded reduce-scatter: bytes_wire not 4 times below the uncoded payloads", 0);
        }
        for (size_t i = 0; i < rc; ++i) CHECK(isfinite(want[i]), "coded reduce-scatter: finite result");
        CHECK_CC(cc_coll_comm_destroy(c));
    }

    /* Point-to-point codes too: rank 0 sends to rank 1 with 4-bit values;
     * the receiver holds the sender's top k within half a step each, zero
     * elsewhere, and the message is at least 5 times below the uncoded one.
     * A receiver without the setting rejects it naming the settings. */
    if (g_size > 1) {
        cc_coll_comm_h c = coded_comm("4", "auto");
        /* One communicator whose rank 0 codes and whose rank 1 does not. */
        cc_coll_comm_h plain = coded_comm(g_rank == 0 ? "4" : "full", "auto");
        const cc_coll_params_t p = topk_params(density, 0);
        double *y = xmalloc(n * sizeof *y);
        random_values(CC_COLL_F32, y, n, seed_for(0, 2300), 6);
        for (int round = 0; round < 2; ++round) {
            cc_coll_comm_h pc = round == 0 ? c : plain;
            if (g_rank == 0) {
                pack(CC_COLL_F32, y, n, buf);
                const cc_coll_stats_t before = get_stats(pc);
                const cc_coll_status_t st = cc_coll_send(buf, n, CC_COLL_F32, 1, 5 + round, 1, &p, pc, NULL);
                const cc_coll_stats_t after = get_stats(pc);
                if (round == 0) {
                    CHECK_CC(st);
                    const uint64_t wire = after.bytes_wire - before.bytes_wire;
                    if ((double)(48 + payload_bytes(k, 4)) < 5.0 * (double)wire) {
                        fprintf(stderr, "[rank 0] point-to-point bytes_wire %llu\n", (unsigned long long)wire);
                        die("%s", "coded point-to-point: message not 5 times below the uncoded one", 0);
                    }
                } else {
                    CHECK(st == CC_COLL_ERR_MISMATCH, "a receiver without the setting rejects the coded message");
                }
            } else if (g_rank == 1) {
                const cc_coll_status_t st = cc_coll_recv(want, n, CC_COLL_F32, 0, 5 + round, &p, pc, NULL);
                if (round == 0) {
                    CHECK_CC(st);
                    unsigned char *kept = xmalloc(n);
                    reference_topk(y, n, k, kept);
                    double top = 0.0;
                    for (size_t i = 0; i < n; ++i)
                        if (kept[i] && fabs(y[i]) > top) top = fabs(y[i]);
                    for (size_t i = 0; i < n; ++i) {
                        const double d = fabs((double)want[i] - (kept[i] ? y[i] : 0.0));
                        if (!(d <= top / 7.0 * 0.5 * (1.0 + 1e-6)))
                            die("%s", "coded point-to-point: a received value off by more than half a step", 0);
                    }
                    free(kept);
                } else {
                    if (st != CC_COLL_ERR_MISMATCH || strstr(cc_coll_last_error(), "CC_COLL_TOPK_VALUE_BITS") == NULL)
                        die("coded message to an uncoded receiver: %s", cc_coll_last_error(), (int)st);
                }
            }
        }
        free(y);
        CHECK_CC(cc_coll_comm_destroy(plain));
        CHECK_CC(cc_coll_comm_destroy(c));
    }
    MPI_Barrier(MPI_COMM_WORLD);

    /* Ranks with different widths: CC_COLL_ERR_MISMATCH on every rank. */
    if (g_size > 1) {
        cc_coll_comm_h c = coded_comm(g_rank == 0 ? "4" : "8", "auto");
        const cc_coll_params_t p = topk_params(density, 0);
        random_values(CC_COLL_F32, x, n, seed_for(g_rank, 2100), 6);
        pack(CC_COLL_F32, x, n, buf);
        const cc_coll_status_t st = cc_coll_allreduce(buf, buf, n, CC_COLL_F32, CC_COLL_SUM, &p, c, NULL);
        check_all(st == CC_COLL_ERR_MISMATCH, "different CC_COLL_TOPK_VALUE_BITS must fail with MISMATCH");
        CHECK_CC(cc_coll_comm_destroy(c));
    }
    free(x);
    free(gp);
    free(e);
    free(sum_in);
    free(sum_res);
    free(buf);
    free(want);
}

static void ef_cap(cc_coll_comm_h h)
{
    (void)h;
    test_ef_cap();
}

static void setup(void)
{
    self_test_16bit();
    /* The settings these tests rely on come from params, never from the
     * environment the test happens to run in. */
    unsetenv("CC_COLL_EF_MAX_BYTES");
    unsetenv("CC_COLL_TOPK_VALUE_BITS");
    unsetenv("CC_COLL_TOPK_INDEX_CODING");
}

static const NamedTest kTests[] = {
    {"density_one", test_density_one},
    {"sparse_exact", test_sparse_exact},
    {"convergence", test_convergence},
    {"small_k_and_boundary", test_small_k_and_boundary},
    {"zeros", test_zeros},
    {"ties", test_ties},
    {"nonfinite", test_nonfinite},
    {"bad_params", test_bad_params},
    {"ef_store", test_ef_store},
    {"ef_across_paths", test_ef_across_paths},
    {"ef_cap", ef_cap},
    {"stats", test_stats},
    {"half", test_half},
    {"coded", test_coded},
};

int main(int argc, char **argv)
{
    return run_suite(argc, argv, "topk", kTests, sizeof kTests / sizeof kTests[0], 1, setup);
}
