/*
 * The conformance suite: every method the library lists
 * (cc_coll_method_count / cc_coll_method_at) against the properties every
 * method owes its callers, with real ranks (run with 1, 2, 3 and 4 ranks).
 * The suite keeps no list of methods and never tests a method id: what it
 * asks of a method follows from its caps (cc_coll_method_caps), so a method
 * added to the library is tested here with no edit.
 *
 * Properties, per method:
 *   - every rank's result is the same, bit for bit;
 *   - a method without CC_COLL_METHOD_CAP_LOSSY gives MPI_Allreduce's
 *     result (MPI_Reduce_scatter_block's for the reduce-scatter), bit for
 *     bit (F16/BF16: summed in binary32 and rounded, the dtype's rule);
 *   - a lossy method's error is bounded: ||result - exact sum|| <= sum over
 *     ranks of ||input|| (AVG: over W), with EF off or on a fresh tensor;
 *   - a lossy method that keeps everything is exact: density 1 on integer
 *     data (methods with CAP_DENSITY) gives MPI's result and leaves no
 *     residual; a matrix method (CAP_MATRIX) at a rank at least the data's
 *     rank recovers the sum up to rounding (a lossy method with neither, a
 *     dense codec, has no setting that keeps everything);
 *   - error feedback (docs/algorithms.md 1.2), over a few steps with SUM:
 *     sum_t result_t + sum_ranks e_T == sum_ranks sum_t g_t up to rounding,
 *     with a residual that carries more than the rounding; EF off neither
 *     creates nor changes a residual;
 *   - sendbuf is left alone out of place, nothing is written past count,
 *     count 0 moves nothing, the statistics count calls and bytes;
 *   - cc_coll_allreduce_group of several tensors of several dtypes, and
 *     the non-blocking forms (cc_coll_iallreduce, cc_coll_iallreduce_group,
 *     cc_coll_ireduce_scatter with cc_coll_wait / cc_coll_test), give the
 *     blocking results bit for bit, residuals included;
 *   - cc_coll_reduce_scatter where the caps have CAP_REDUCE_SCATTER (with
 *     the error-feedback invariant over the gathered shards), else
 *     CC_COLL_ERR_NOT_SUPPORTED on every rank with the method's name in the
 *     message;
 *   - agreement: one rank passing another method or another count makes
 *     every rank fail (CC_COLL_ERR_MISMATCH on the others), never a hang,
 *     and the next agreed call works; a selecting method (CAP_SELECTS)
 *     against the method it selects may instead succeed on every rank with
 *     the same result.
 *
 * Sizes are small (a few thousand elements) so that each run takes seconds.
 * Any failure prints the method, the case and the library's message, and
 * calls MPI_Abort (exit status non-zero).
 *
 *   mpi_conformance [TEST...]   run all tests, or only the named ones
 */
#define _POSIX_C_SOURCE 200809L /* setenv, unsetenv */

#include <float.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mpi.h>

#include "cc_coll.h"
#include "check.h"
#include "test_util.h"

/* ---- the methods, from the library --------------------------------------- */

#define MAX_METHODS 64

typedef struct {
    cc_coll_method_t id;
    unsigned caps;
    const char *name;
} Method;

static Method g_methods[MAX_METHODS];
static int g_nmethods = 0;

static void list_methods(void)
{
    const int count = cc_coll_method_count();
    CHECK(count >= 1 && count <= MAX_METHODS, "cc_coll_method_count out of range");
    for (int i = 0; i < count; ++i) {
        Method *m = &g_methods[g_nmethods++];
        CHECK_CC(cc_coll_method_at(i, &m->id));
        m->caps = cc_coll_method_caps(m->id);
        m->name = cc_coll_method_name(m->id);
        CHECK(m->name != NULL && cc_coll_method_summary(m->id) != NULL, "a listed method has a name and a summary");
        cc_coll_method_t back;
        CHECK_CC(cc_coll_method_from_name(m->name, &back));
        CHECK(back == m->id, "cc_coll_method_from_name(cc_coll_method_name(m)) == m");
    }
    cc_coll_method_t out;
    CHECK(cc_coll_method_at(count, &out) == CC_COLL_ERR_INVALID_ARG, "cc_coll_method_at(count) is INVALID_ARG");
}

static int lossy(const Method *m) { return (m->caps & CC_COLL_METHOD_CAP_LOSSY) != 0; }
static int matrix(const Method *m) { return (m->caps & CC_COLL_METHOD_CAP_MATRIX) != 0; }
static int selects(const Method *m) { return (m->caps & CC_COLL_METHOD_CAP_SELECTS) != 0; }
static int has_rs(const Method *m) { return (m->caps & CC_COLL_METHOD_CAP_REDUCE_SCATTER) != 0; }
static int takes_density(const Method *m) { return (m->caps & CC_COLL_METHOD_CAP_DENSITY) != 0; }

/* ---- params ----------------------------------------------------------------- */

/* Matrix methods see every tensor as kRows x (count / kRows) at kRank;
 * counts here are multiples of kRows. */
enum { kRows = 32, kRank = 2 };

static const double kDensity = 0.05;

static uint64_t g_key = 0xC0F0000;

static uint64_t next_key(void) { return g_key++; }

/* The method's params with a fresh ef_key: EF on or off; methods with
 * CAP_DENSITY (and selecting methods, which pass it on) get `density`,
 * matrix methods a shape and a rank. */
static cc_coll_params_t params_for(const Method *m, int ef, double density)
{
    cc_coll_params_t p = keyed(method_params(m->id), next_key());
    p.mask |= CC_COLL_PARAMS_FIELD_EF;
    p.ef = ef;
    if (matrix(m)) {
        p.mask |= CC_COLL_PARAMS_FIELD_SHAPE | CC_COLL_PARAMS_FIELD_RANK;
        p.rows = kRows;
        p.cols = 0;
        p.rank = kRank;
    } else if (takes_density(m) || selects(m)) {
        p.mask |= CC_COLL_PARAMS_FIELD_DENSITY;
        p.density = density;
    }
    return p;
}

/* ---- helpers -------------------------------------------------------------- */

static const char *op_name(cc_coll_op_t op) { return op == CC_COLL_SUM ? "SUM" : "AVG"; }

static uint64_t seed_for(int rank, int test_case)
{
    return 0xC0FFEEull + (uint64_t)rank * 1000003ull + (uint64_t)test_case * 7919ull;
}

static uint64_t ef_bytes(cc_coll_comm_h h)
{
    uint64_t b = 0;
    CHECK_CC(cc_coll_ef_bytes(h, &b));
    return b;
}

static void call_ok(cc_coll_status_t st, const Method *m, const char *desc)
{
    if (st != CC_COLL_OK) {
        fprintf(stderr, "[rank %d] method %s: %s\n", g_rank, m->name, desc);
        die("%s", desc, (int)st);
    }
}

/* Every rank's condition holds (collective). */
static void check_all(int ok, const char *msg)
{
    int all = 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!ok) die("%s", msg, 0);
    if (!all) die("%s (on another rank)", msg, 0);
}

static double work_eps(cc_coll_dtype_t d) { return d == CC_COLL_F64 ? DBL_EPSILON : FLT_EPSILON; }

/* The unit in the last place at 1 of the dtype. */
static double dtype_ulp(cc_coll_dtype_t d)
{
    switch (d) {
    case CC_COLL_F64: return DBL_EPSILON;
    case CC_COLL_F32: return FLT_EPSILON;
    case CC_COLL_F16: return ldexp(1.0, -10);
    default: return ldexp(1.0, -7);
    }
}

/* Input data of this rank: random values representable in d (spread
 * exponents), or small integers (exact sums). For matrix methods the
 * random data has full rank, which the error bound allows. */
static void input(cc_coll_dtype_t d, double *x, size_t n, int test_case, int integers)
{
    if (integers) integer_values(x, n, seed_for(g_rank, test_case));
    else random_values(d, x, n, seed_for(g_rank, test_case), 4);
}

/* Whether a case compares with MPI's result on exact-integer data: the
 * 16-bit dtypes of a method that is not lossy, whose sums of more than two
 * values may round after each addition (binary32 sums rounded to the dtype:
 * exact only where every partial sum is). */
static int exact_data(const Method *m, cc_coll_dtype_t d) { return !lossy(m) && cc_coll_dtype_size(d) == 2; }

/* AVG of an F32/F64 sum: / P in the element type, as MPI users would. */
static void divide_by_ranks(cc_coll_dtype_t d, void *out, size_t n)
{
    for (size_t i = 0; i < n; ++i) {
        if (d == CC_COLL_F32) ((float *)out)[i] = ((float *)out)[i] / (float)g_size;
        else ((double *)out)[i] = ((double *)out)[i] / (double)g_size;
    }
}

/* A 16-bit dtype's reference from MPI's binary32 sums s (count of them,
 * freed here): rounded to the dtype, or AVG divided in binary32 then
 * rounded, packed into out. */
static void finish_16bit(cc_coll_dtype_t d, cc_coll_op_t op, float *s, size_t count, void *out)
{
    double *acc = xmalloc(count * sizeof *acc);
    for (size_t i = 0; i < count; ++i) acc[i] = op == CC_COLL_AVG ? div_in(d, s[i], g_size) : round_to(d, s[i]);
    pack(d, acc, count, out);
    free(acc);
    free(s);
}

/* MPI's result in the dtype: F32/F64 MPI_Allreduce(SUM) of the packed
 * inputs, AVG then / W in the type; F16/BF16 summed as binary32 and rounded
 * (the dtype's rule). */
static void mpi_allreduce_ref(cc_coll_dtype_t d, cc_coll_op_t op, const double *x, size_t n, void *out)
{
    if (d == CC_COLL_F32 || d == CC_COLL_F64) {
        void *tmp = xmalloc(n * cc_coll_dtype_size(d));
        pack(d, x, n, tmp);
        CHECK(MPI_Allreduce(tmp, out, (int)n, mpi_type(d), MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS,
              "reference MPI_Allreduce");
        free(tmp);
        if (op == CC_COLL_AVG) divide_by_ranks(d, out, n);
        return;
    }
    float *f = xmalloc(n * sizeof *f), *s = xmalloc(n * sizeof *s);
    for (size_t i = 0; i < n; ++i) f[i] = (float)x[i];
    CHECK(MPI_Allreduce(f, s, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS, "reference MPI_Allreduce");
    finish_16bit(d, op, s, n, out);
    free(f);
}

/* The exact sum over ranks (binary64) of x; AVG divided by W. */
static void exact_ref(cc_coll_op_t op, const double *x, size_t n, double *out)
{
    CHECK(MPI_Allreduce(x, out, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS, "exact reference");
    if (op == CC_COLL_AVG)
        for (size_t i = 0; i < n; ++i) out[i] /= (double)g_size;
}

/* A lossy result's error bound: ||got - exact||_2 <= (sum over ranks of
 * ||x||_2, AVG: / W) (1 + slack), the slack covering the rounding to the
 * dtype. Every lossy method sends each rank's input or a part or projection
 * of it (docs/algorithms.md), so its error is at most what it left out. */
static void expect_bounded(const Method *m, cc_coll_dtype_t d, cc_coll_op_t op, const void *got, const double *x,
                           const double *exact, size_t n, const char *desc)
{
    double err = 0.0, xn = 0.0;
    for (size_t i = 0; i < n; ++i) {
        const double e = element(d, got, i) - exact[i];
        err += e * e;
        xn += x[i] * x[i];
    }
    err = sqrt(err);
    xn = sqrt(xn);
    double bound = 0.0;
    MPI_Allreduce(&xn, &bound, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    if (op == CC_COLL_AVG) bound /= (double)g_size;
    bound *= 1.0 + 8.0 * dtype_ulp(d);
    if (!(err <= bound)) {
        fprintf(stderr, "[rank %d] method %s: %s: ||result - exact|| = %.6g > bound %.6g\n", g_rank, m->name, desc,
                err, bound);
        die("%s: lossy error above the bound", desc, 0);
    }
}

/* ---- 1. allreduce: dtypes x ops x in place x EF --------------------------------- */

static const cc_coll_dtype_t kDtypes[] = {CC_COLL_F32, CC_COLL_F64, CC_COLL_F16, CC_COLL_BF16};

/* One allreduce of this rank's x on a fresh tensor, checked for every
 * property a single call has; the result is left in `result` (n elements of
 * d) when not NULL. */
static void one_allreduce(cc_coll_comm_h h, const Method *m, cc_coll_dtype_t d, cc_coll_op_t op, const double *x,
                          size_t n, int inplace, int ef, int integers, void *result, const char *what)
{
    const size_t es = cc_coll_dtype_size(d);
    char desc[256];
    snprintf(desc, sizeof desc, "%s: method %s %s %s n=%zu %s ef=%d%s (P=%d)", what, m->name, dtype_name(d),
             op_name(op), n, inplace ? "in-place" : "out-of-place", ef, integers ? " integers" : "", g_size);
    unsigned char *send = xmalloc(n * es), *orig = xmalloc(n * es), *recv = xmalloc(n * es + 16);
    unsigned char *want = xmalloc(n * es);
    double *exact = xmalloc(n * sizeof *exact);
    pack(d, x, n, send);
    memcpy(orig, send, n * es);
    if (inplace) memcpy(recv, send, n * es);
    else memset(recv, 0x5A, n * es);
    memset(recv + n * es, 0xC3, 16);
    const cc_coll_params_t p = params_for(m, ef, kDensity);
    const cc_coll_stats_t before = get_stats(h);
    const uint64_t efb = ef_bytes(h);
    call_ok(cc_coll_allreduce(inplace ? recv : send, recv, n, d, op, &p, h, NULL), m, desc);
    const cc_coll_stats_t after = get_stats(h);
    for (int i = 0; i < 16; ++i) CHECK(recv[n * es + (size_t)i] == 0xC3, "recvbuf written past count");
    if (!inplace) CHECK(memcmp(send, orig, n * es) == 0, "an out-of-place call modified sendbuf");
    CHECK(after.calls == before.calls + 1 && after.bytes_uncompressed == before.bytes_uncompressed + n * es,
          "stats: one call of count x element size bytes");
    if (!ef) CHECK(ef_bytes(h) == efb, "EF off changed cc_coll_ef_bytes");
    expect_same_on_all_ranks(recv, n * es, desc);
    if (!lossy(m)) {
        mpi_allreduce_ref(d, op, x, n, want);
        expect_equal(d, recv, want, n, desc);
    } else {
        exact_ref(op, x, n, exact);
        expect_bounded(m, d, op, recv, x, exact, n, desc);
    }
    if (result != NULL) memcpy(result, recv, n * es);
    free(send);
    free(orig);
    free(recv);
    free(want);
    free(exact);
}

static void test_allreduce(cc_coll_comm_h h)
{
    const size_t n = 2048;
    double *x = xmalloc(n * sizeof *x);
    int c = 0;
    for (int mi = 0; mi < g_nmethods; ++mi) {
        const Method *m = &g_methods[mi];
        for (int di = 0; di < 4; ++di)
            for (int op = 0; op < 2; ++op)
                for (int inplace = 0; inplace < 2; ++inplace)
                    for (int ef = 0; ef < 2; ++ef) {
                        const int ints = exact_data(m, kDtypes[di]);
                        input(kDtypes[di], x, n, 100 + c++, ints);
                        one_allreduce(h, m, kDtypes[di], (cc_coll_op_t)op, x, n, inplace, ef, ints, NULL,
                                      "allreduce");
                    }
        CHECK_CC(cc_coll_ef_reset_all(h));
    }
    free(x);
}

/* ---- 2. a lossy method that keeps everything is exact ---------------------------- */

static double recovery_tol(cc_coll_dtype_t d)
{
    switch (d) {
    case CC_COLL_F64: return 1e-10;
    case CC_COLL_F32: return 1e-4;
    case CC_COLL_F16: return 3e-3;
    default: return 2e-2;
    }
}

static void test_keeps_everything(cc_coll_comm_h h)
{
    const size_t n = 2048;
    double *x = xmalloc(n * sizeof *x), *e = xmalloc(n * sizeof *e), *want = xmalloc(n * sizeof *want);
    int c = 0;
    for (int mi = 0; mi < g_nmethods; ++mi) {
        const Method *m = &g_methods[mi];
        if (!lossy(m) || selects(m) || !(matrix(m) || takes_density(m))) continue;
        for (int di = 0; di < 4; ++di)
            for (int op = 0; op < 2; ++op)
                for (int ef = 0; ef < 2; ++ef) {
                    const cc_coll_dtype_t d = kDtypes[di];
                    const size_t es = cc_coll_dtype_size(d);
                    unsigned char *buf = xmalloc(n * es), *ref = xmalloc(n * es);
                    char desc[200];
                    if (!matrix(m)) {
                        /* Density 1 on integers: every sum is exact, so
                         * MPI's result whatever its order; no residual. */
                        snprintf(desc, sizeof desc, "density 1: method %s %s %s ef=%d (P=%d)", m->name,
                                 dtype_name(d), op_name((cc_coll_op_t)op), ef, g_size);
                        input(d, x, n, 200 + c++, 1);
                        const cc_coll_params_t p = params_for(m, ef, 1.0);
                        pack(d, x, n, buf);
                        mpi_allreduce_ref(d, (cc_coll_op_t)op, x, n, ref);
                        call_ok(cc_coll_allreduce(buf, buf, n, d, (cc_coll_op_t)op, &p, h, NULL), m, desc);
                        expect_equal(d, buf, ref, n, desc);
                        if (ef) {
                            CHECK_CC(cc_coll_ef_get_residual(h, &p, buf, n, d, e));
                            for (size_t i = 0; i < n; ++i) CHECK(e[i] == 0.0, "density 1 left a residual");
                        }
                    } else {
                        /* A sum of rank kRank at rank kRank: recovered. */
                        snprintf(desc, sizeof desc, "rank >= data rank: method %s %s %s ef=%d (P=%d)", m->name,
                                 dtype_name(d), op_name((cc_coll_op_t)op), ef, g_size);
                        lowrank_input(d, n, kRows, n / kRows, kRank, 0xabcull + (uint64_t)c++, g_rank, x);
                        exact_ref((cc_coll_op_t)op, x, n, want);
                        const cc_coll_params_t p = params_for(m, ef, 1.0);
                        pack(d, x, n, buf);
                        call_ok(cc_coll_allreduce(buf, buf, n, d, (cc_coll_op_t)op, &p, h, NULL), m, desc);
                        expect_same_on_all_ranks(buf, n * es, desc);
                        double num = 0.0, den = 0.0;
                        for (size_t i = 0; i < n; ++i) {
                            const double diff = element(d, buf, i) - want[i];
                            num += diff * diff;
                            den += want[i] * want[i];
                        }
                        const double rel = sqrt(num / (den > 0.0 ? den : 1.0));
                        if (!(rel < recovery_tol(d))) {
                            fprintf(stderr, "[rank %d] %s: relative error %.3g >= %.1g\n", g_rank, desc, rel,
                                    recovery_tol(d));
                            die("%s: not recovered", desc, 0);
                        }
                    }
                    free(buf);
                    free(ref);
                }
        CHECK_CC(cc_coll_ef_reset_all(h));
    }
    free(x);
    free(e);
    free(want);
}

/* ---- 3. the error-feedback invariant -------------------------------------------- */

/* Over T steps with SUM and EF on, from a zero residual: the sum of the
 * results plus the residuals summed over ranks is the sum of every rank's
 * inputs, up to the work type's rounding and, for 16-bit dtypes, the
 * rounding of each result and of a dense fallback's sums (not kept in a
 * residual). `sum_res` holds the summed results, `sum_abs` the summed
 * |result|, `sum_g` and `sum_abs_g` this rank's summed inputs and |inputs|,
 * e this rank's residual (n each). Returns the largest |sum over ranks of
 * e|. */
static double check_ef_invariant(const Method *m, cc_coll_dtype_t d, size_t n, int T, double gmax,
                                 const double *sum_res, const double *sum_abs, const double *sum_g,
                                 const double *sum_abs_g, const double *e, const char *desc)
{
    double *G = xmalloc(n * sizeof *G), *E = xmalloc(n * sizeof *E), *A = xmalloc(n * sizeof *A);
    MPI_Allreduce(sum_g, G, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(sum_abs_g, A, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(e, E, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &gmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    const double base = 64.0 * work_eps(d) * gmax * (double)T * (double)g_size;
    double e_max = 0.0;
    for (size_t i = 0; i < n; ++i) {
        CHECK(isfinite(e[i]), "residual is not finite");
        const double tol = base + dtype_ulp(d) * (4.0 * (double)g_size * sum_abs[i] + A[i]);
        const double err = fabs(sum_res[i] + E[i] - G[i]);
        if (!(err <= tol)) {
            fprintf(stderr,
                    "[rank %d] method %s: %s: element %zu: sum of results %.17g + sum of residuals %.17g - sum of "
                    "inputs %.17g = %.3g > %.3g\n",
                    g_rank, m->name, desc, i, sum_res[i], E[i], G[i], err, tol);
            die("%s: the error-feedback invariant does not hold", desc, 0);
        }
        /* How far the residual exceeds the tolerance: > 1 where leaving
         * the residual out would have failed the check. */
        if (fabs(E[i]) / tol > e_max) e_max = fabs(E[i]) / tol;
    }
    free(G);
    free(E);
    free(A);
    return e_max;
}

/* Sizes and densities at which every lossy method compresses (a sketch, for
 * one, would outweigh a smaller buffer and send it densely). */
static const size_t kEfCount = 16384;
static const double kEfDensity = 0.01;
static const size_t kEfRecvcount = 16384;
static const double kEfRsDensity = 0.01;

/* The EF invariant over T SUM steps of one collective: what every rank
 * received (the gathered shards, for the reduce-scatter) plus the residuals
 * summed over ranks are the summed inputs. */
static void ef_invariant_over(cc_coll_comm_h h, int reduce_scatter)
{
    const size_t rc = kEfRecvcount;
    const size_t n = reduce_scatter ? rc * (size_t)g_size : kEfCount;
    const int T = reduce_scatter ? 8 : 12;
    for (int mi = 0; mi < g_nmethods; ++mi) {
        const Method *m = &g_methods[mi];
        if (!lossy(m) || (reduce_scatter && !has_rs(m))) continue;
        double carried = 0.0;
        char lossy_in[64] = "";
        for (int di = 0; di < 4; ++di) {
            const cc_coll_dtype_t d = kDtypes[di];
            const size_t es = cc_coll_dtype_size(d);
            char desc[160];
            snprintf(desc, sizeof desc, "%sEF invariant: method %s %s, %d steps (P=%d)",
                     reduce_scatter ? "reduce-scatter " : "", m->name, dtype_name(d), T, g_size);
            double *g = xmalloc(n * sizeof *g), *sum_g = xcalloc(n, sizeof(double));
            double *sum_res = xcalloc(n, sizeof(double)), *sum_abs = xcalloc(n, sizeof(double));
            double *sum_abs_g = xcalloc(n, sizeof(double)), *e = xmalloc(n * sizeof *e);
            unsigned char *send = xmalloc(n * es), *recv = xmalloc(n * es), *all = xmalloc(n * es);
            const cc_coll_params_t p = params_for(m, 1, reduce_scatter ? kEfRsDensity : kEfDensity);
            uint64_t seed = seed_for(g_rank, (reduce_scatter ? 800 : 300) + 10 * mi + di);
            double gmax = 0.0;
            for (int t = 0; t < T; ++t) {
                for (size_t i = 0; i < n; ++i) {
                    g[i] = round_to(d, (rng_uniform(&seed) * 2.0 - 1.0) * (1.0 + (double)(i % (reduce_scatter ? 5 : 7))));
                    sum_g[i] += g[i];
                    sum_abs_g[i] += fabs(g[i]);
                    if (fabs(g[i]) > gmax) gmax = fabs(g[i]);
                }
                pack(d, g, n, send);
                const unsigned char *result = recv;
                if (reduce_scatter) {
                    call_ok(cc_coll_reduce_scatter(send, recv, rc, d, CC_COLL_SUM, &p, h, NULL), m, desc);
                    MPI_Allgather(recv, (int)(rc * es), MPI_BYTE, all, (int)(rc * es), MPI_BYTE, MPI_COMM_WORLD);
                    result = all;
                } else {
                    call_ok(cc_coll_allreduce(send, recv, n, d, CC_COLL_SUM, &p, h, NULL), m, desc);
                }
                for (size_t i = 0; i < n; ++i) {
                    sum_res[i] += element(d, result, i);
                    sum_abs[i] += fabs(element(d, result, i));
                }
            }
            CHECK_CC(cc_coll_ef_get_residual(h, &p, recv, n, d, e));
            const double e_max = check_ef_invariant(m, d, n, T, gmax, sum_res, sum_abs, sum_g, sum_abs_g, e, desc);
            if (e_max > carried) carried = e_max;
            if (e_max > 1.0) snprintf(lossy_in + strlen(lossy_in), sizeof lossy_in - strlen(lossy_in), " %s", dtype_name(d));
            free(g);
            free(sum_g);
            free(sum_res);
            free(sum_abs);
            free(sum_abs_g);
            free(e);
            free(send);
            free(recv);
            free(all);
        }
        /* The check has teeth: the residual held what was not sent, in
         * one dtype at least, beyond the invariant's tolerance (a method may
         * send some dtypes densely at this size, and a selecting method may
         * send everything). */
        if (!selects(m) && !(carried > 1.0)) die("method %s: the residual never carried untransmitted values", m->name, 0);
        if (g_rank == 0) printf("    %s: the residual carried untransmitted values in:%s\n", m->name, lossy_in);
        CHECK_CC(cc_coll_ef_reset_all(h));
    }
}

static void test_ef_invariant(cc_coll_comm_h h) { ef_invariant_over(h, 0); }

/* ---- 4. count 0 ----------------------------------------------------------------- */

static void test_count_zero(cc_coll_comm_h h)
{
    for (int mi = 0; mi < g_nmethods; ++mi) {
        const Method *m = &g_methods[mi];
        const cc_coll_params_t p = params_for(m, 1, kDensity);
        const cc_coll_stats_t before = get_stats(h);
        const uint64_t efb = ef_bytes(h);
        float untouched[4] = {1, 2, 3, 4};
        int calls = 0;
        for (int di = 0; di < 4; ++di, ++calls)
            call_ok(cc_coll_allreduce(NULL, NULL, 0, kDtypes[di], (cc_coll_op_t)(di & 1), &p, h, NULL), m,
                    "count 0");
        call_ok(cc_coll_allreduce(NULL, untouched, 0, CC_COLL_F32, CC_COLL_SUM, &p, h, NULL), m, "count 0, recvbuf");
        ++calls;
        if (has_rs(m)) {
            call_ok(cc_coll_reduce_scatter(NULL, untouched, 0, CC_COLL_F32, CC_COLL_SUM, &p, h, NULL), m,
                    "reduce-scatter recvcount 0");
            ++calls;
        }
        CHECK(untouched[0] == 1 && untouched[3] == 4, "count 0 wrote recvbuf");
        const cc_coll_stats_t after = get_stats(h);
        CHECK(after.calls == before.calls + (uint64_t)calls, "count 0 calls are counted");
        CHECK(after.bytes_uncompressed == before.bytes_uncompressed && after.bytes_wire == before.bytes_wire,
              "count 0 moves no bytes");
        CHECK(ef_bytes(h) == efb, "count 0 creates no residual");
    }
}

/* ---- 5. groups ------------------------------------------------------------------ */

enum { kGroup = 4 };

/* Tensor i of the group: count and dtype (counts are multiples of kRows). */
static const size_t kGroupCounts[kGroup] = {2048, 1536, 1024, 640};
static const cc_coll_dtype_t kGroupDtypes[kGroup] = {CC_COLL_F32, CC_COLL_F64, CC_COLL_BF16, CC_COLL_F16};

typedef struct {
    double *x[kGroup];
    unsigned char *send[kGroup], *recv[kGroup];
    cc_coll_params_t p[kGroup];
} Group;

static void group_init(Group *gr, const Method *m, int ef, int integers, int test_case)
{
    for (int i = 0; i < kGroup; ++i) {
        const size_t n = kGroupCounts[i], es = cc_coll_dtype_size(kGroupDtypes[i]);
        gr->x[i] = xmalloc(n * sizeof(double));
        input(kGroupDtypes[i], gr->x[i], n, test_case * kGroup + i, integers);
        gr->send[i] = xmalloc(n * es);
        gr->recv[i] = xmalloc(n * es);
        pack(kGroupDtypes[i], gr->x[i], n, gr->send[i]);
        memset(gr->recv[i], 0x5A, n * es);
        gr->p[i] = params_for(m, ef, kDensity);
    }
}

static void group_free(Group *gr)
{
    for (int i = 0; i < kGroup; ++i) {
        free(gr->x[i]);
        free(gr->send[i]);
        free(gr->recv[i]);
    }
}

static cc_coll_status_t group_call(Group *gr, cc_coll_op_t op, int inplace, int nonblocking, cc_coll_comm_h h)
{
    const void *sends[kGroup];
    void *recvs[kGroup];
    for (int i = 0; i < kGroup; ++i) {
        if (inplace) memcpy(gr->recv[i], gr->send[i], kGroupCounts[i] * cc_coll_dtype_size(kGroupDtypes[i]));
        sends[i] = gr->send[i];
        recvs[i] = gr->recv[i];
    }
    if (!nonblocking)
        return cc_coll_allreduce_group(kGroup, inplace ? NULL : sends, recvs, kGroupCounts, kGroupDtypes, op, gr->p,
                                       h, NULL);
    cc_coll_request_h req = NULL;
    cc_coll_status_t st = cc_coll_iallreduce_group(kGroup, inplace ? NULL : sends, recvs, kGroupCounts, kGroupDtypes,
                                                   op, gr->p, h, NULL, &req);
    if (st != CC_COLL_OK) return st;
    st = cc_coll_wait(req);
    CHECK_CC(cc_coll_request_free(req));
    return st;
}

static void test_group(cc_coll_comm_h h)
{
    int c = 0;
    for (int mi = 0; mi < g_nmethods; ++mi) {
        const Method *m = &g_methods[mi];
        for (int op = 0; op < 2; ++op)
            for (int inplace = 0; inplace < 2; ++inplace)
                for (int ef = 0; ef < 2; ++ef) {
                    char desc[200];
                    snprintf(desc, sizeof desc, "group of %d: method %s %s %s ef=%d (P=%d)", kGroup, m->name,
                             op_name((cc_coll_op_t)op), inplace ? "in-place" : "out-of-place", ef, g_size);
                    /* Integer data for a method that is not lossy: exact
                     * sums, so MPI's result whatever the packing. */
                    Group a, b;
                    group_init(&a, m, ef, !lossy(m), 500 + c);
                    group_init(&b, m, ef, !lossy(m), 500 + c);
                    ++c;
                    /* Blocking, then the non-blocking form on fresh
                     * tensors (their own keys), twice each: equal bits,
                     * residuals and matrix state included. */
                    for (int step = 0; step < 2; ++step) {
                        call_ok(group_call(&a, (cc_coll_op_t)op, inplace, 0, h), m, desc);
                        call_ok(group_call(&b, (cc_coll_op_t)op, inplace, 1, h), m, desc);
                        for (int i = 0; i < kGroup; ++i) {
                            const cc_coll_dtype_t d = kGroupDtypes[i];
                            const size_t n = kGroupCounts[i], es = cc_coll_dtype_size(d);
                            expect_same_on_all_ranks(a.recv[i], n * es, desc);
                            CHECK(memcmp(a.recv[i], b.recv[i], n * es) == 0,
                                  "cc_coll_iallreduce_group differs from cc_coll_allreduce_group");
                            if (step > 0) continue;
                            if (!lossy(m)) {
                                unsigned char *want = xmalloc(n * es);
                                mpi_allreduce_ref(d, (cc_coll_op_t)op, a.x[i], n, want);
                                expect_equal(d, a.recv[i], want, n, desc);
                                free(want);
                            } else {
                                double *exact = xmalloc(n * sizeof *exact);
                                exact_ref((cc_coll_op_t)op, a.x[i], n, exact);
                                expect_bounded(m, d, (cc_coll_op_t)op, a.recv[i], a.x[i], exact, n, desc);
                                free(exact);
                            }
                        }
                    }
                    group_free(&a);
                    group_free(&b);
                }
        CHECK_CC(cc_coll_ef_reset_all(h));
    }
}

/* ---- 6. non-blocking allreduce ---------------------------------------------------- */

/* Exact-integer data here: a non-blocking form reduces dense sums (NONE,
 * a dense fallback) with MPI's non-blocking collective, whose reduction
 * order may differ from the blocking one's (Open MPI with 3 and 4 ranks on
 * random data), so only exact sums are sure to be the same bits. */

static void test_nonblocking(cc_coll_comm_h h)
{
    const size_t n = 2048;
    double *x = xmalloc(n * sizeof *x);
    int c = 0;
    for (int mi = 0; mi < g_nmethods; ++mi) {
        const Method *m = &g_methods[mi];
        for (int di = 0; di < 4; ++di)
            for (int op = 0; op < 2; ++op) {
                const cc_coll_dtype_t d = kDtypes[di];
                const size_t es = cc_coll_dtype_size(d);
                char desc[200];
                snprintf(desc, sizeof desc, "non-blocking: method %s %s %s (P=%d)", m->name, dtype_name(d),
                         op_name((cc_coll_op_t)op), g_size);
                unsigned char *send = xmalloc(n * es), *a = xmalloc(n * es), *b = xmalloc(n * es);
                const cc_coll_params_t pa = params_for(m, 1, kDensity), pb = params_for(m, 1, kDensity);
                /* Three steps on two tensors with EF on: the blocking calls
                 * on one, the non-blocking ones on the other (waited for, or
                 * tested until done); equal bits every step. */
                for (int step = 0; step < 3; ++step) {
                    input(d, x, n, 600 + c++, 1);
                    pack(d, x, n, send);
                    call_ok(cc_coll_allreduce(send, a, n, d, (cc_coll_op_t)op, &pa, h, NULL), m, desc);
                    cc_coll_request_h req = NULL;
                    call_ok(cc_coll_iallreduce(send, b, n, d, (cc_coll_op_t)op, &pb, h, NULL, &req), m, desc);
                    if (step == 1) {
                        int done = 0;
                        while (!done) call_ok(cc_coll_test(req, &done), m, desc);
                    } else {
                        call_ok(cc_coll_wait(req), m, desc);
                    }
                    CHECK_CC(cc_coll_request_free(req));
                    if (memcmp(a, b, n * es) != 0) die("%s: cc_coll_iallreduce differs from cc_coll_allreduce", desc, 0);
                }
                double *ea = xmalloc(n * sizeof *ea), *eb = xmalloc(n * sizeof *eb);
                CHECK_CC(cc_coll_ef_get_residual(h, &pa, a, n, d, ea));
                CHECK_CC(cc_coll_ef_get_residual(h, &pb, b, n, d, eb));
                CHECK(memcmp(ea, eb, n * sizeof *ea) == 0, "the non-blocking residual differs from the blocking one");
                free(ea);
                free(eb);
                free(send);
                free(a);
                free(b);
            }
        CHECK_CC(cc_coll_ef_reset_all(h));
    }
    free(x);
}

/* ---- 7. reduce-scatter -------------------------------------------------------------- */

/* MPI_Reduce_scatter_block's shard in the dtype (F16/BF16 summed as
 * binary32 and rounded); in place for F32/F64 when `inplace`. */
static void mpi_rs_ref(cc_coll_dtype_t d, cc_coll_op_t op, const double *x, size_t rc, int inplace, void *out)
{
    const size_t n = rc * (size_t)g_size, es = cc_coll_dtype_size(d);
    if (d == CC_COLL_F32 || d == CC_COLL_F64) {
        unsigned char *tmp = xmalloc(n * es);
        pack(d, x, n, tmp);
        if (inplace) {
            CHECK(MPI_Reduce_scatter_block(MPI_IN_PLACE, tmp, (int)rc, mpi_type(d), MPI_SUM, MPI_COMM_WORLD) ==
                      MPI_SUCCESS,
                  "reference MPI_Reduce_scatter_block");
            memcpy(out, tmp, rc * es);
        } else {
            CHECK(MPI_Reduce_scatter_block(tmp, out, (int)rc, mpi_type(d), MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS,
                  "reference MPI_Reduce_scatter_block");
        }
        free(tmp);
        if (op == CC_COLL_AVG) divide_by_ranks(d, out, rc);
        return;
    }
    float *f = xmalloc(n * sizeof *f), *s = xmalloc(rc * sizeof *s);
    for (size_t i = 0; i < n; ++i) f[i] = (float)x[i];
    CHECK(MPI_Reduce_scatter_block(f, s, (int)rc, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS,
          "reference MPI_Reduce_scatter_block");
    finish_16bit(d, op, s, rc, out);
    free(f);
}

/* The reduce-scatter of a method without CAP_REDUCE_SCATTER: NOT_SUPPORTED
 * on every rank, naming the method, recvbuf untouched, blocking and not. */
static void rs_not_supported(cc_coll_comm_h h, const Method *m)
{
    const size_t rc = 64, n = rc * (size_t)g_size;
    float *send = xcalloc(n, sizeof *send), *recv = xmalloc(rc * sizeof *recv);
    memset(recv, 0x5A, rc * sizeof *recv);
    for (int form = 0; form < 3; ++form) {
        const cc_coll_params_t p = params_for(m, 1, kDensity);
        cc_coll_status_t st;
        char msg[512];
        if (form < 2) {
            st = cc_coll_reduce_scatter(send, form ? send : recv, rc, form ? CC_COLL_F64 : CC_COLL_F32,
                                        form ? CC_COLL_SUM : CC_COLL_AVG, &p, h, NULL);
            snprintf(msg, sizeof msg, "%s", cc_coll_last_error());
        } else {
            cc_coll_request_h req = NULL;
            st = cc_coll_ireduce_scatter(send, recv, rc, CC_COLL_F32, CC_COLL_SUM, &p, h, NULL, &req);
            snprintf(msg, sizeof msg, "%s", cc_coll_last_error());
            if (st == CC_COLL_OK) {
                st = cc_coll_wait(req);
                snprintf(msg, sizeof msg, "%s", cc_coll_last_error());
                CHECK_CC(cc_coll_request_free(req));
            }
        }
        if (st != CC_COLL_ERR_NOT_SUPPORTED || strstr(msg, m->name) == NULL) {
            fprintf(stderr, "[rank %d] method %s: reduce-scatter form %d: got %s (\"%s\"), expected %s naming it\n",
                    g_rank, m->name, form, cc_coll_status_string(st), msg,
                    cc_coll_status_string(CC_COLL_ERR_NOT_SUPPORTED));
            die("%s", "reduce-scatter of a method without CAP_REDUCE_SCATTER", 0);
        }
    }
    for (size_t i = 0; i < rc; ++i) {
        uint32_t bits;
        memcpy(&bits, &recv[i], 4);
        CHECK(bits == 0x5A5A5A5Au, "a refused reduce-scatter wrote recvbuf");
    }
    free(send);
    free(recv);
}

static void test_reduce_scatter(cc_coll_comm_h h)
{
    const size_t rc = 512, n = rc * (size_t)g_size;
    double *x = xmalloc(n * sizeof *x), *exact = xmalloc(n * sizeof *exact);
    int c = 0;
    for (int mi = 0; mi < g_nmethods; ++mi) {
        const Method *m = &g_methods[mi];
        if (!has_rs(m)) {
            rs_not_supported(h, m);
            continue;
        }
        for (int di = 0; di < 4; ++di)
            for (int op = 0; op < 2; ++op)
                for (int inplace = 0; inplace < 2; ++inplace)
                    for (int ef = 0; ef < 2; ++ef) {
                        const cc_coll_dtype_t d = kDtypes[di];
                        const size_t es = cc_coll_dtype_size(d);
                        char desc[200];
                        snprintf(desc, sizeof desc, "reduce-scatter: method %s %s %s recvcount=%zu %s ef=%d (P=%d)",
                                 m->name, dtype_name(d), op_name((cc_coll_op_t)op), rc,
                                 inplace ? "in-place" : "out-of-place", ef, g_size);
                        input(d, x, n, 700 + c++, exact_data(m, d));
                        unsigned char *send = xmalloc(n * es), *orig = xmalloc(n * es);
                        unsigned char *recv = xmalloc(n * es + 16), *want = xmalloc(rc * es);
                        pack(d, x, n, send);
                        memcpy(orig, send, n * es);
                        const size_t rbytes = (inplace ? n : rc) * es;
                        if (inplace) memcpy(recv, send, n * es);
                        else memset(recv, 0x5A, rc * es);
                        memset(recv + rbytes, 0xC3, 16);
                        const cc_coll_params_t p = params_for(m, ef, kDensity);
                        const uint64_t efb = ef_bytes(h);
                        call_ok(cc_coll_reduce_scatter(inplace ? recv : send, recv, rc, d, (cc_coll_op_t)op, &p, h,
                                                       NULL),
                                m, desc);
                        for (int i = 0; i < 16; ++i) CHECK(recv[rbytes + (size_t)i] == 0xC3, "written past recvbuf");
                        if (!inplace) CHECK(memcmp(send, orig, n * es) == 0, "an out-of-place call modified sendbuf");
                        if (!ef) CHECK(ef_bytes(h) == efb, "EF off changed cc_coll_ef_bytes");
                        if (!lossy(m)) {
                            mpi_rs_ref(d, (cc_coll_op_t)op, x, rc, inplace, want);
                            expect_equal(d, recv, want, rc, desc);
                        } else {
                            /* The shards gathered: bounded like an allreduce. */
                            unsigned char *all = xmalloc(n * es);
                            MPI_Allgather(recv, (int)(rc * es), MPI_BYTE, all, (int)(rc * es), MPI_BYTE,
                                          MPI_COMM_WORLD);
                            exact_ref((cc_coll_op_t)op, x, n, exact);
                            expect_bounded(m, d, (cc_coll_op_t)op, all, x, exact, n, desc);
                            free(all);
                        }
                        free(send);
                        free(orig);
                        free(recv);
                        free(want);
                    }
        CHECK_CC(cc_coll_ef_reset_all(h));
    }
    free(x);
    free(exact);
}

/* Error feedback through the reduce-scatter (ef_invariant_over). */
static void test_reduce_scatter_ef(cc_coll_comm_h h) { ef_invariant_over(h, 1); }

/* The non-blocking reduce-scatter gives the blocking one's bits. */
static void test_ireduce_scatter(cc_coll_comm_h h)
{
    const size_t rc = 512, n = rc * (size_t)g_size;
    double *x = xmalloc(n * sizeof *x);
    int c = 0;
    for (int mi = 0; mi < g_nmethods; ++mi) {
        const Method *m = &g_methods[mi];
        if (!has_rs(m)) continue;
        for (int di = 0; di < 4; ++di) {
            const cc_coll_dtype_t d = kDtypes[di];
            const size_t es = cc_coll_dtype_size(d);
            unsigned char *send = xmalloc(n * es), *a = xmalloc(rc * es), *b = xmalloc(rc * es);
            const cc_coll_params_t pa = params_for(m, 1, kDensity), pb = params_for(m, 1, kDensity);
            for (int step = 0; step < 2; ++step) {
                input(d, x, n, 900 + c++, 1);
                pack(d, x, n, send);
                call_ok(cc_coll_reduce_scatter(send, a, rc, d, CC_COLL_AVG, &pa, h, NULL), m, "reduce-scatter");
                cc_coll_request_h req = NULL;
                call_ok(cc_coll_ireduce_scatter(send, b, rc, d, CC_COLL_AVG, &pb, h, NULL, &req), m,
                        "ireduce-scatter");
                call_ok(cc_coll_wait(req), m, "ireduce-scatter wait");
                CHECK_CC(cc_coll_request_free(req));
                if (memcmp(a, b, rc * es) != 0)
                    die("method %s: cc_coll_ireduce_scatter differs from cc_coll_reduce_scatter", m->name, 0);
            }
            free(send);
            free(a);
            free(b);
        }
        CHECK_CC(cc_coll_ef_reset_all(h));
    }
    free(x);
}

/* ---- 8. agreement --------------------------------------------------------------------- */

static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "conformance: a disagreeing call hung (watchdog)\n";
    if (write(2, msg, sizeof msg - 1) < 0) {}
    _exit(3);
}

/* The odd rank out calls with (mine, my_count), the others with (theirs,
 * count): the others get CC_COLL_ERR_MISMATCH, the odd rank an error, no
 * rank hangs, recvbuf is untouched; then an agreed call works. */
static void disagree(cc_coll_comm_h h, const Method *theirs, const Method *mine, size_t count, size_t my_count,
                     int odd, const char *desc)
{
    const int me = g_rank == odd;
    const Method *m = me ? mine : theirs;
    const size_t n = me ? my_count : count, cap = count > my_count ? count : my_count;
    float *send = xmalloc(cap * sizeof *send), *recv = xmalloc(cap * sizeof *recv), *guard = xmalloc(cap * 4);
    for (size_t i = 0; i < cap; ++i) send[i] = (float)((i * 13 + (size_t)g_rank * 5) % 17);
    memset(recv, 0xa5, cap * 4);
    memset(guard, 0xa5, cap * 4);
    const cc_coll_params_t p = params_for(m, 0, kDensity);
    alarm(60);
    const cc_coll_status_t st = cc_coll_allreduce(send, recv, n, CC_COLL_F32, CC_COLL_SUM, &p, h, NULL);
    alarm(0);
    /* A selecting method is agreed as the method it selects for the call
     * (docs/wire.md, agreement word 2): against that very method the
     * call may succeed, on every rank alike. */
    int all_ok = 0, st_ok = st == CC_COLL_OK;
    MPI_Allreduce(&st_ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (all_ok && (selects(theirs) || selects(mine)) && count == my_count) {
        expect_same_on_all_ranks(recv, count * 4, desc);
        memcpy(recv, guard, cap * 4);
    }
    const int ok = (all_ok && (selects(theirs) || selects(mine)) && count == my_count) ||
                   (me ? st != CC_COLL_OK : st == CC_COLL_ERR_MISMATCH);
    if (!ok)
        fprintf(stderr, "[rank %d] %s (odd rank %d, my method %s): got %s (\"%s\")\n", g_rank, desc, odd, m->name,
                cc_coll_status_string(st), cc_coll_last_error());
    check_all(ok, "ranks that disagree must all fail, the others with CC_COLL_ERR_MISMATCH");
    CHECK(memcmp(recv, guard, cap * 4) == 0, "a call that failed the agreement wrote recvbuf");
    /* The next agreed call, with the odd rank's method, works. */
    const cc_coll_params_t q = params_for(mine, 0, kDensity);
    alarm(60);
    call_ok(cc_coll_allreduce(send, recv, count, CC_COLL_F32, CC_COLL_SUM, &q, h, NULL), mine, desc);
    alarm(0);
    expect_same_on_all_ranks(recv, count * 4, desc);
    free(send);
    free(recv);
    free(guard);
}

static void test_agreement(cc_coll_comm_h h)
{
    if (g_size < 2) return;
    signal(SIGALRM, on_alarm);
    const size_t n = 2048;
    int c = 0;
    for (int a = 0; a < g_nmethods; ++a) {
        for (int b = 0; b < g_nmethods; ++b) {
            if (a == b) continue;
            char desc[160];
            snprintf(desc, sizeof desc, "agreement: %s against %s", g_methods[b].name, g_methods[a].name);
            disagree(h, &g_methods[a], &g_methods[b], n, n, c++ % g_size, desc);
        }
        char desc[160];
        snprintf(desc, sizeof desc, "agreement: method %s, count %zu against %zu", g_methods[a].name,
                 (size_t)(n + kRows), n);
        disagree(h, &g_methods[a], &g_methods[a], n, n + kRows, c++ % g_size, desc);
    }
    CHECK_CC(cc_coll_ef_reset_all(h));
}

/* ---- main ------------------------------------------------------------------------------- */

static void methods(cc_coll_comm_h h)
{
    (void)h;
    if (g_rank == 0)
        for (int i = 0; i < g_nmethods; ++i)
            printf("  method %d %-8s caps 0x%02x: %s\n", (int)g_methods[i].id, g_methods[i].name, g_methods[i].caps,
                   cc_coll_method_summary(g_methods[i].id));
}

static void setup(void)
{
    /* The settings these tests rely on come from params, never from the
     * environment the test happens to run in. */
    static const char *const vars[] = {"CC_COLL_METHOD", "CC_COLL_EF", "CC_COLL_EF_MAX_BYTES", "CC_COLL_DENSITY",
                                       "CC_COLL_STATE_MAX_BYTES", "CC_COLL_LOWRANK_RANK",
                                       "CC_COLL_LOWRANK_START_ITER", "CC_COLL_LOWRANK_MIN_COMPRESSION_RATE"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; ++i) unsetenv(vars[i]);
    /* A selecting method's choice for a call must be a function of the call
     * (its forms are compared bit for bit): AUTO's online check, which runs
     * the runner-up now and then, is off here (mpi_auto_method tests it). */
    setenv("CC_COLL_AUTO_CHECK", "off", 1);
    list_methods();
}

static const NamedTest kTests[] = {
    {"methods", methods},
    {"allreduce", test_allreduce},
    {"keeps_everything", test_keeps_everything},
    {"ef_invariant", test_ef_invariant},
    {"count_zero", test_count_zero},
    {"group", test_group},
    {"nonblocking", test_nonblocking},
    {"reduce_scatter", test_reduce_scatter},
    {"reduce_scatter_ef", test_reduce_scatter_ef},
    {"ireduce_scatter", test_ireduce_scatter},
    {"agreement", test_agreement},
};

int main(int argc, char **argv)
{
    return run_suite(argc, argv, "conformance", kTests, sizeof kTests / sizeof kTests[0], 1, setup);
}
