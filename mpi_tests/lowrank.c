/*
 * Method LOWRANK (PowerSGD) through cc_coll_allreduce, with real ranks (run
 * with 1, 2, 3 and 4 ranks). The grouped call is tested in lowrank_group.c.
 *
 * References are built in this file, in binary64, from the documented rules
 * only (cc_coll.h, docs/algorithms.md sections 1 and 4):
 *   - the buffer is a row-major rows x cols matrix M (SHAPE; cols 0 means
 *     count / rows), or without SHAPE the near-square view r = ceil(sqrt(n)),
 *     cols = ceil(n / r), padded with zeros; the rank is min(rows, cols, rank);
 *   - a tensor is compressed once its call count reaches start_iter and when
 *     (rows + cols) r rate < rows cols; otherwise the call is a plain
 *     MPI_Allreduce, bit for bit (AVG: the sum divided by P in the type);
 *   - a compressed step with an orthonormal Q: P = sum_p M_p Q, P
 *     orthonormalised, Q = sum_p M_p^T P / W, M^ = P Q^T. So M^ is the
 *     projection of the average onto span(sum_p M_p Q): a matrix of rank
 *     r_data is recovered exactly when rank >= r_data and not when rank <
 *     r_data. AVG returns M^, SUM W M^;
 *   - error feedback: e = (g + e_prev) - M^, so per rank
 *     sum_t M^_t + e_T == sum_t g_t up to rounding.
 *
 * Tests: exact recovery (three views, f32/f64, AVG/SUM); rank 2 (Gram-
 * Schmidt) on a rank-1 sum; the EF invariant; warm start on a fixed matrix
 * with known singular values; a zero first step with warm start;
 * start_iter; min_compression_rate; NaN/Inf; F64/F16/BF16 in and out of
 * place; the low-rank state (get_state, set_q against a reference step,
 * ef_reset); argument errors; count 0. What every method owes (cross-rank
 * identity, the error-feedback invariant summed over ranks, count 0's
 * residuals, groups, non-blocking forms, reduce-scatter refused with
 * CC_COLL_ERR_NOT_SUPPORTED as the caps say, agreement) is checked for
 * LOWRANK by the conformance suite (conformance.c).
 *
 * Any failure prints the case and calls MPI_Abort (exit status non-zero).
 *
 *   mpi_lowrank [TEST...]   run all tests, or only the named ones
 */
#define _POSIX_C_SOURCE 200809L /* unsetenv */

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "cc_coll.h"
#include "check.h"
#include "test_util.h"

static uint64_t g_next_key = 0x10000;

static uint64_t next_key(void) { return g_next_key++; }

static uint64_t seed_for(int rank, int test_case)
{
    return 0x10e7a4c0ull + (uint64_t)rank * 1000003ull + (uint64_t)test_case * 7919ull;
}

/* ---- params ------------------------------------------------------------------ */

static cc_coll_params_t with_ef(cc_coll_params_t p, int ef)
{
    p.mask |= CC_COLL_PARAMS_FIELD_EF;
    p.ef = ef;
    return p;
}

static cc_coll_params_t with_warm(cc_coll_params_t p, int warm)
{
    p.mask |= CC_COLL_PARAMS_FIELD_WARM_START;
    p.warm_start = warm;
    return p;
}

static cc_coll_params_t with_start_iter(cc_coll_params_t p, uint64_t s)
{
    p.mask |= CC_COLL_PARAMS_FIELD_START_ITER;
    p.start_iter = s;
    return p;
}

static cc_coll_params_t with_rate(cc_coll_params_t p, double rate)
{
    p.mask |= CC_COLL_PARAMS_FIELD_MIN_COMPRESSION_RATE;
    p.min_compression_rate = rate;
    return p;
}

/* ---- small helpers ------------------------------------------------------------- */

static const char *op_name(cc_coll_op_t op) { return op == CC_COLL_SUM ? "SUM" : "AVG"; }

/* The work type's size: binary64 for F64, binary32 for the others. */
static size_t work_size(cc_coll_dtype_t d) { return d == CC_COLL_F64 ? 8 : 4; }

static uint64_t ef_bytes(cc_coll_comm_h h)
{
    uint64_t b = 0;
    CHECK_CC(cc_coll_ef_bytes(h, &b));
    return b;
}

static uint64_t wire_bytes(cc_coll_comm_h h)
{
    return get_stats_masked(h, CC_COLL_STATS_FIELD_BYTES_WIRE).bytes_wire;
}

/* Runs a call and dies with `desc` and the library's message when it fails. */
static void call_ok(cc_coll_status_t st, const char *desc)
{
    if (st != CC_COLL_OK) die("%s", desc, (int)st);
}

/* The call failed with `want` and a message containing `needle`. */
static void expect_error(cc_coll_status_t st, cc_coll_status_t want, const char *needle, const char *desc)
{
    if (st != want) {
        fprintf(stderr, "[rank %d] FAIL in %s: %s: got %s, expected %s (message: \"%s\")\n", g_rank, g_test, desc,
                cc_coll_status_string(st), cc_coll_status_string(want), cc_coll_last_error());
        fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    const char *msg = cc_coll_last_error();
    if (needle != NULL && strstr(msg, needle) == NULL) {
        fprintf(stderr, "[rank %d] FAIL in %s: %s: message \"%s\" does not mention \"%s\"\n", g_rank, g_test, desc,
                msg, needle);
        fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

static void to_doubles(cc_coll_dtype_t d, const void *buf, size_t n, double *out)
{
    for (size_t i = 0; i < n; ++i) out[i] = element(d, buf, i);
}

/* The reference AVG of a dense MPI_Allreduce: MPI_SUM in the type, then /P
 * in the type (binary32 for F32, binary64 for F64). */
static void mpi_reference(cc_coll_dtype_t d, cc_coll_op_t op, const void *send, void *out, size_t n)
{
    CHECK(d == CC_COLL_F32 || d == CC_COLL_F64, "mpi_reference: F32/F64 only");
    CHECK(MPI_Allreduce(send, out, (int)n, mpi_type(d), MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS,
          "reference MPI_Allreduce");
    if (op == CC_COLL_AVG)
        for (size_t i = 0; i < n; ++i) {
            if (d == CC_COLL_F32) ((float *)out)[i] = ((float *)out)[i] / (float)g_size;
            else ((double *)out)[i] = ((double *)out)[i] / (double)g_size;
        }
}

/* ---- low-rank data ---------------------------------------------------------------- */

/* The sum over the ranks of lowrank_input (computed locally, in binary64). */
static void lowrank_sum(cc_coll_dtype_t d, size_t n, size_t vrows, size_t vcols, int r, uint64_t seed, double *sum)
{
    double *x = xmalloc(n * sizeof *x);
    memset(sum, 0, n * sizeof *sum);
    for (int q = 0; q < g_size; ++q) {
        lowrank_input(d, n, vrows, vcols, r, seed, q, x);
        for (size_t i = 0; i < n; ++i) sum[i] += x[i];
    }
    free(x);
}

/* One call on this rank's x (values representable in d) with params p;
 * checks that the result is identical on every rank, that nothing is written
 * past count and that an out-of-place call leaves sendbuf alone; returns the
 * result (as doubles) in `out` and its relative error against `want`. */
static double run_call(cc_coll_comm_h h, cc_coll_dtype_t d, cc_coll_op_t op, const cc_coll_params_t *p,
                       const double *x, size_t n, int inplace, const double *want, double *out, const char *desc)
{
    const size_t es = cc_coll_dtype_size(d);
    unsigned char *send = xmalloc(n * es + 16), *recv = xmalloc(n * es + 16), *orig = xmalloc(n * es + 1);
    pack(d, x, n, send);
    memcpy(orig, send, n * es);
    if (inplace) memcpy(recv, send, n * es);
    else memset(recv, 0x5A, n * es);
    memset(recv + n * es, 0xC3, 16);
    call_ok(cc_coll_allreduce(inplace ? recv : send, recv, n, d, op, p, h, NULL), desc);
    expect_same_on_all_ranks(recv, n * es, desc);
    for (int i = 0; i < 16; ++i)
        if (recv[n * es + (size_t)i] != 0xC3) die("%s: recvbuf written past count", desc, 0);
    if (!inplace && memcmp(send, orig, n * es) != 0) die("%s: out-of-place call modified sendbuf", desc, 0);
    if (out != NULL) to_doubles(d, recv, n, out);
    const double err = want != NULL ? rel_err(d, recv, want, n) : 0.0;
    free(send);
    free(recv);
    free(orig);
    return err;
}

/* Relative error of one fresh-state call (EF off) on rank-r_data data with
 * target rank k. */
static double recovery_error(cc_coll_comm_h h, cc_coll_dtype_t d, cc_coll_op_t op, uint64_t rows, uint64_t cols,
                             size_t n, int r_data, int k, int inplace, uint64_t seed, const char *desc)
{
    size_t vr = 0, vc = 0;
    lowrank_view(n, rows, cols, &vr, &vc);
    double *x = xmalloc(n * sizeof *x), *want = xmalloc(n * sizeof *want);
    lowrank_input(d, n, vr, vc, r_data, seed, g_rank, x);
    lowrank_sum(d, n, vr, vc, r_data, seed, want);
    if (op == CC_COLL_AVG)
        for (size_t i = 0; i < n; ++i) want[i] /= (double)g_size;
    cc_coll_params_t p = keyed(with_ef(lowrank_params(rows, cols, k), 0), next_key());
    const double err = run_call(h, d, op, &p, x, n, inplace, want, NULL, desc);
    free(x);
    free(want);
    return err;
}

/* ---- 1. exact recovery of a rank-r sum ------------------------------------------ */

static double exact_tol(cc_coll_dtype_t d)
{
    switch (d) {
    case CC_COLL_F64: return 1e-10;
    case CC_COLL_F32: return 1e-4;
    case CC_COLL_F16: return 3e-3;
    default: return 2e-2;
    }
}

static void test_exact_recovery(cc_coll_comm_h h)
{
    /* A given shape, cols = 0, and the near-square default with a count that
     * is not a square (1073 -> 33 x 33, 16 elements of padding). */
    static const struct {
        uint64_t rows, cols;
        size_t n;
    } shapes[] = {{48, 40, 48 * 40}, {32, 0, 32 * 50}, {0, 0, 1073}};
    /* Data of rank r_data at target rank k: exact when k >= r_data (k = 1, 2:
     * Gram-Schmidt; k >= 3: QR, also with k > r_data). The Gram-Schmidt case
     * k > r_data is rank_above_data_gs. */
    static const struct {
        int r_data, k, exact;
    } cases[] = {{1, 1, 1}, {2, 2, 1}, {2, 4, 1}, {3, 3, 1}, {3, 5, 1}, {2, 1, 0}, {3, 2, 0}, {4, 3, 0}};
    const cc_coll_dtype_t dts[] = {CC_COLL_F32, CC_COLL_F64};
    int c = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; ++s)
        for (int di = 0; di < 2; ++di)
            for (int o = 0; o < 2; ++o)
                for (size_t k = 0; k < sizeof cases / sizeof cases[0]; ++k, ++c) {
                    const cc_coll_op_t op = o ? CC_COLL_SUM : CC_COLL_AVG;
                    char desc[200];
                    snprintf(desc, sizeof desc, "%s %s shape %llu x %llu n=%zu, data rank %d, rank %d (P=%d)",
                             dtype_name(dts[di]), op_name(op), (unsigned long long)shapes[s].rows,
                             (unsigned long long)shapes[s].cols, shapes[s].n, cases[k].r_data, cases[k].k, g_size);
                    const double err = recovery_error(h, dts[di], op, shapes[s].rows, shapes[s].cols, shapes[s].n,
                                                      cases[k].r_data, cases[k].k, c & 1, 0xabc0ull + (uint64_t)c, desc);
                    if (cases[k].exact && !(err < exact_tol(dts[di]))) {
                        fprintf(stderr, "[rank %d] %s: relative error %.3g, expected < %.1g\n", g_rank, desc, err,
                                exact_tol(dts[di]));
                        die("%s: rank >= data rank must recover the sum exactly", desc, 0);
                    }
                    if (!cases[k].exact && !(err > 0.05)) {
                        fprintf(stderr, "[rank %d] %s: relative error %.3g, expected > 0.05\n", g_rank, desc, err);
                        die("%s: rank < data rank cannot recover the sum", desc, 0);
                    }
                }
    CHECK_CC(cc_coll_ef_reset_all(h));
}

/* ---- 2. error feedback: sum_t M^_t + e_T == sum_t g_t ------------------------------ */

static void ef_invariant_case(cc_coll_comm_h h, cc_coll_dtype_t d, uint64_t rows, uint64_t cols, size_t n, int k,
                              int steps, int tc)
{
    char desc[160];
    snprintf(desc, sizeof desc, "EF invariant %s shape %llu x %llu n=%zu rank %d, %d steps (P=%d)", dtype_name(d),
             (unsigned long long)rows, (unsigned long long)cols, n, k, steps, g_size);
    cc_coll_params_t p = keyed(with_warm(with_ef(lowrank_params(rows, cols, k), 1), 1), next_key());
    ef_invariant_steps(h, &p, d, n, steps, seed_for, tc, NULL, NULL, NULL, 0, desc);
}

static void test_ef_invariant(cc_coll_comm_h h)
{
    ef_invariant_case(h, CC_COLL_F32, 40, 30, 1200, 2, 20, 1);
    ef_invariant_case(h, CC_COLL_F64, 40, 30, 1200, 2, 20, 2);
    ef_invariant_case(h, CC_COLL_F32, 0, 0, 1000, 3, 20, 3); /* 32 x 32, padded; QR */
    ef_invariant_case(h, CC_COLL_F64, 25, 0, 500, 1, 20, 4);
    CHECK_CC(cc_coll_ef_reset_all(h));
}

/* ---- 3. warm start: power iteration on a fixed matrix ------------------------------ */

/* M = U diag(s) V^T with s_i = 10 / 2^i: the best rank-k error is
 * sqrt(sum_{i >= k} s_i^2). Rank q inputs 2 (q + 1) / (P + 1) M, so the
 * average is M. Fills err[t] = ||M^_t - M||_F over `steps` calls (EF off). */
static void warm_errors(cc_coll_comm_h h, cc_coll_dtype_t d, size_t rows, size_t cols, int k, int warm, int steps,
                        double *err, double *opt)
{
    const size_t n = rows * cols, ns = rows < cols ? rows : cols;
    double *u = xmalloc(rows * ns * sizeof *u), *v = xmalloc(cols * ns * sizeof *v), *m = xcalloc(n, sizeof *m);
    gauss_fill(u, rows * ns, 0x5151ull);
    gauss_fill(v, cols * ns, 0x7272ull);
    CHECK(orthonormalize_columns(u, rows, (int)ns) == (int)ns && orthonormalize_columns(v, cols, (int)ns) == (int)ns,
          "reference: orthonormal U, V");
    double o = 0.0;
    for (size_t l = 0; l < ns; ++l) {
        const double s = 10.0 * ldexp(1.0, -(int)l);
        if (l >= (size_t)k) o += s * s;
        for (size_t i = 0; i < rows; ++i)
            for (size_t j = 0; j < cols; ++j) m[i * cols + j] += u[i * ns + l] * s * v[j * ns + l];
    }
    *opt = sqrt(o);
    double *x = xmalloc(n * sizeof *x), *avg = xcalloc(n, sizeof *avg);
    for (int q = 0; q < g_size; ++q) {
        const double c = 2.0 * (q + 1) / (g_size + 1);
        for (size_t i = 0; i < n; ++i) {
            const double xi = round_to(d, c * m[i]);
            avg[i] += xi / g_size;
            if (q == g_rank) x[i] = xi;
        }
    }
    cc_coll_params_t p = keyed(with_warm(with_ef(lowrank_params(rows, cols, k), 0), warm), next_key());
    double *out = xmalloc(n * sizeof *out);
    for (int t = 0; t < steps; ++t) {
        run_call(h, d, CC_COLL_AVG, &p, x, n, 1, NULL, out, "warm start step");
        err[t] = norm_diff(out, avg, n);
    }
    free(u);
    free(v);
    free(m);
    free(x);
    free(avg);
    free(out);
}

static void test_warm_start(cc_coll_comm_h h)
{
    enum { T = 10 };
    const struct {
        cc_coll_dtype_t d;
        int k;
    } cases[] = {{CC_COLL_F32, 2}, {CC_COLL_F64, 3}, {CC_COLL_F32, 1}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; ++c) {
        double on[T], off[T], opt = 0.0;
        warm_errors(h, cases[c].d, 60, 50, cases[c].k, 1, T, on, &opt);
        warm_errors(h, cases[c].d, 60, 50, cases[c].k, 0, T, off, &opt);
        char desc[200];
        snprintf(desc, sizeof desc, "warm start %s rank %d (P=%d): optimal error %.6g", dtype_name(cases[c].d),
                 cases[c].k, g_size, opt);
        if (getenv("CC_COLL_TEST_VERBOSE") != NULL && g_rank == 0) {
            printf("    %s\n      on :", desc);
            for (int t = 0; t < T; ++t) printf(" %.6g", on[t] / opt - 1.0);
            printf("\n      off:");
            for (int t = 0; t < T; ++t) printf(" %.6g", off[t] / opt - 1.0);
            printf("\n");
        }
        /* The first step starts from a random Q: clearly worse than optimal. */
        if (!(on[0] > 1.05 * opt)) die("%s: the first step should not be optimal already", desc, 0);
        /* Warm start: power iteration converges to the best rank-k error. */
        if (!(on[T - 1] < on[0])) die("%s: step 10's error is not below step 1's with warm start", desc, 0);
        if (!(on[T - 1] <= (1.0 + 1e-4) * opt)) {
            fprintf(stderr, "[rank %d] %s: step 10 error %.9g\n", g_rank, desc, on[T - 1]);
            die("%s: warm start did not converge to the optimal rank-k error", desc, 0);
        }
        for (int t = 1; t < T; ++t)
            if (!(on[t] <= on[t - 1] * (1.0 + 1e-6))) die("%s: the error rose from one warm step to the next", desc, 0);
        /* Without warm start every step starts again from a random Q: no
         * step comes near the optimum (measured excess: 1e-2 to 2 times the
         * optimum), and the excess of the last five steps is not a fraction
         * of the first five's as it is with warm start (1e-6 and less). */
        double first = 0.0, last = 0.0;
        for (int t = 0; t < T; ++t) {
            if (!(off[t] > (1.0 + 1e-3) * opt)) die("%s: without warm start a step came close to optimal", desc, 0);
            if (t < T / 2) first += off[t] - opt;
            else last += off[t] - opt;
        }
        if (!(last > 0.2 * first)) die("%s: without warm start the error fell systematically", desc, 0);
    }
    CHECK_CC(cc_coll_ef_reset_all(h));
}

/* ---- 4. start_iter: plain allreduces first --------------------------------------------- */

static void start_iter_case(cc_coll_comm_h h, cc_coll_dtype_t d, cc_coll_op_t op, int inplace, uint64_t s, int tc)
{
    const size_t rows = 64, cols = 48, n = rows * cols, es = cc_coll_dtype_size(d);
    const int k = 2;
    char desc[160];
    cc_coll_params_t p = keyed(with_start_iter(with_ef(lowrank_params(rows, cols, k), 1), s), next_key());
    double *x = xmalloc(n * sizeof *x), *e = xmalloc(n * sizeof *e);
    unsigned char *send = xmalloc(n * es), *recv = xmalloc(n * es), *ref = xmalloc(n * es);
    for (uint64_t t = 1; t <= s + 1; ++t) {
        snprintf(desc, sizeof desc, "start_iter %llu, call %llu: %s %s %s (P=%d)", (unsigned long long)s,
                 (unsigned long long)t, dtype_name(d), op_name(op), inplace ? "in-place" : "out-of-place", g_size);
        random_values(d, x, n, seed_for(g_rank, tc * 100 + (int)t), 6);
        pack(d, x, n, send);
        mpi_reference(d, op, send, ref, n);
        if (inplace) memcpy(recv, send, n * es);
        const uint64_t wire0 = wire_bytes(h), efb0 = ef_bytes(h);
        call_ok(cc_coll_allreduce(inplace ? recv : send, recv, n, d, op, &p, h, NULL), desc);
        const uint64_t wire = wire_bytes(h) - wire0;
        uint64_t calls = 0;
        int rank = -1;
        CHECK_CC(cc_coll_lowrank_get_state(h, &p, recv, n, d, NULL, NULL, &rank, &calls, NULL, NULL));
        if (calls != t) die("%s: get_state's call count is not the number of calls", desc, 0);
        CHECK_CC(cc_coll_ef_get_residual(h, &p, recv, n, d, e));
        if (t <= s) {
            /* Plain MPI_Allreduce: bit for bit, dense bytes, no residual. */
            expect_equal(d, recv, ref, n, desc);
            if (wire != n * es) die("%s: bytes_wire is not the dense buffer", desc, 0);
            if (ef_bytes(h) != efb0) die("%s: a call before start_iter created a residual", desc, 0);
            for (size_t i = 0; i < n; ++i)
                if (e[i] != 0.0) die("%s: a call before start_iter left a residual", desc, 0);
            if (rank != 0) die("%s: get_state reports factors before start_iter", desc, 0);
        } else {
            /* Compressed: P and Q in the work type. */
            if (wire != (rows + cols) * (size_t)k * work_size(d) || wire >= n * es) {
                fprintf(stderr, "[rank %d] %s: bytes_wire +%llu, expected +%zu\n", g_rank, desc,
                        (unsigned long long)wire, (rows + cols) * (size_t)k * work_size(d));
                die("%s: the call after start_iter is not compressed", desc, 0);
            }
            if (rank != k) die("%s: get_state's rank after the first compressed call", desc, 0);
            double diff = 0.0, norm = 0.0;
            for (size_t i = 0; i < n; ++i) {
                diff += fabs(element(d, recv, i) - element(d, ref, i));
                norm += fabs(element(d, ref, i));
            }
            if (!(diff > 1e-3 * norm)) die("%s: a rank-2 step on random data cannot be exact", desc, 0);
            if (!(norm_diff(e, NULL, n) > 0.0)) die("%s: the compressed call left no residual", desc, 0);
        }
    }
    free(x);
    free(e);
    free(send);
    free(recv);
    free(ref);
}

static void test_start_iter(cc_coll_comm_h h)
{
    start_iter_case(h, CC_COLL_F32, CC_COLL_AVG, 0, 3, 1);
    start_iter_case(h, CC_COLL_F32, CC_COLL_SUM, 1, 1, 2);
    start_iter_case(h, CC_COLL_F64, CC_COLL_AVG, 1, 2, 3);
    start_iter_case(h, CC_COLL_F64, CC_COLL_SUM, 0, 0, 4);
    CHECK_CC(cc_coll_ef_reset_all(h));
}

/* ---- 5. min_compression_rate ------------------------------------------------------------- */

static void test_min_compression_rate(cc_coll_comm_h h)
{
    /* rate 0: the field unset (default 2). */
    static const struct {
        uint64_t rows, cols;
        int rank;
        double rate;
        int compressed;
    } cases[] = {
        {8, 8, 2, 2.0, 0},     /* (8 + 8) 2 2 = 64: not < 64 */
        {8, 8, 2, 1.99, 1},    /* 63.7 < 64 */
        {4, 4, 1, 0.0, 0},     /* default rate 2: 16, not < 16 */
        {3, 100, 8, 0.0, 0},   /* r = min(3, 100, 8) = 3: 618 >= 300 */
        {100, 3, 1, 0.0, 1},   /* 206 < 300 */
        {20, 20, 4, 2.6, 0},   /* 416 >= 400 */
        {20, 20, 4, 2.4, 1},   /* 384 < 400 */
        {1, 500, 1, 1.0, 0},   /* r = 1: 501 >= 500 */
    };
    const cc_coll_dtype_t dts[] = {CC_COLL_F32, CC_COLL_F64};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; ++c)
        for (int di = 0; di < 2; ++di) {
            const cc_coll_dtype_t d = dts[di];
            const size_t n = (size_t)(cases[c].rows * cases[c].cols), es = cc_coll_dtype_size(d);
            char desc[200];
            snprintf(desc, sizeof desc, "%s %llu x %llu rank %d rate %g (P=%d)", dtype_name(d),
                     (unsigned long long)cases[c].rows, (unsigned long long)cases[c].cols, cases[c].rank,
                     cases[c].rate, g_size);
            cc_coll_params_t p = keyed(with_ef(lowrank_params(cases[c].rows, cases[c].cols, cases[c].rank), 1),
                                       next_key());
            if (cases[c].rate > 0.0) p = with_rate(p, cases[c].rate);
            double *x = xmalloc(n * sizeof *x);
            unsigned char *buf = xmalloc(n * es), *ref = xmalloc(n * es);
            random_values(d, x, n, seed_for(g_rank, 50 + (int)c), 4);
            pack(d, x, n, buf);
            mpi_reference(d, CC_COLL_AVG, buf, ref, n);
            const uint64_t wire0 = wire_bytes(h), efb0 = ef_bytes(h);
            call_ok(cc_coll_allreduce(buf, buf, n, d, CC_COLL_AVG, &p, h, NULL), desc);
            const uint64_t wire = wire_bytes(h) - wire0;
            int rank = -1;
            uint64_t calls = 0;
            CHECK_CC(cc_coll_lowrank_get_state(h, &p, buf, n, d, NULL, NULL, &rank, &calls, NULL, NULL));
            if (calls != 1) die("%s: get_state's call count", desc, 0);
            if (cases[c].compressed) {
                const size_t r = (size_t)cases[c].rank;
                if (wire != (size_t)(cases[c].rows + cases[c].cols) * r * work_size(d))
                    die("%s: expected a compressed call (bytes_wire = factor bytes)", desc, 0);
                if (rank != cases[c].rank) die("%s: get_state's rank", desc, 0);
            } else {
                expect_equal(d, buf, ref, n, desc);
                if (wire != n * es) die("%s: expected a dense call (bytes_wire = buffer bytes)", desc, 0);
                if (ef_bytes(h) != efb0) die("%s: a dense call created a residual", desc, 0);
                if (rank != 0) die("%s: a dense call stored factors", desc, 0);
            }
            free(x);
            free(buf);
            free(ref);
        }
    CHECK_CC(cc_coll_ef_reset_all(h));
}

/* ---- 8. NaN and Inf -------------------------------------------------------------------------- */

static void nonfinite_case(cc_coll_comm_h h, cc_coll_dtype_t d, cc_coll_op_t op, int tc)
{
    const size_t rows = 32, cols = 24, n = rows * cols, es = cc_coll_dtype_size(d);
    const int k = 2;
    char desc[160];
    snprintf(desc, sizeof desc, "non-finite %s %s (P=%d)", dtype_name(d), op_name(op), g_size);
    cc_coll_params_t p = keyed(with_ef(lowrank_params(rows, cols, k), 1), next_key());
    double *x = xmalloc(n * sizeof *x), *e1 = xmalloc(n * sizeof *e1), *e2 = xmalloc(n * sizeof *e2);
    double *gp = xmalloc(n * sizeof *gp), *want = xmalloc(n * sizeof *want);
    unsigned char *buf = xmalloc(n * es), *ref = xmalloc(n * es);

    /* Step 1: finite, leaves a residual. */
    gauss_fill(x, n, seed_for(g_rank, tc * 10 + 1));
    pack(d, x, n, buf);
    call_ok(cc_coll_allreduce(buf, buf, n, d, op, &p, h, NULL), desc);
    CHECK_CC(cc_coll_ef_get_residual(h, &p, buf, n, d, e1));

    /* Step 2: the last rank has a NaN and a +Inf; rank 0 a -Inf and, with
     * two or more ranks, a +Inf where the last rank has -Inf (-> NaN). */
    gauss_fill(x, n, seed_for(g_rank, tc * 10 + 2));
    if (g_rank == g_size - 1) {
        x[5] = NAN;
        x[77] = INFINITY;
        x[300] = -INFINITY;
    }
    if (g_rank == 0) {
        x[100] = -INFINITY;
        x[300] = g_size > 1 ? INFINITY : x[300];
    }
    pack(d, x, n, buf);
    for (size_t i = 0; i < n; ++i) gp[i] = element(d, buf, i) + e1[i];
    CHECK(MPI_Allreduce(MPI_IN_PLACE, gp, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS,
          "reference sum of g + e");
    for (size_t i = 0; i < n; ++i) want[i] = op == CC_COLL_AVG ? gp[i] / g_size : gp[i];
    CHECK(MPI_Allreduce(buf, ref, (int)n, mpi_type(d), MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS, "reference MPI_SUM");
    const uint64_t wire0 = wire_bytes(h);
    call_ok(cc_coll_allreduce(buf, buf, n, d, op, &p, h, NULL), desc);
    expect_nonfinite_pattern(d, buf, ref, n, desc);
    CHECK(isnan(element(d, buf, 5)) && isinf(element(d, buf, 77)) && isinf(element(d, buf, 100)), desc);
    /* The finite elements: the dense sum of g + e (the residual is sent too). */
    for (size_t i = 0; i < n; ++i) {
        if (!isfinite(want[i])) continue;
        const double g = element(d, buf, i);
        if (!(fabs(g - want[i]) <= (d == CC_COLL_F64 ? 1e-12 : 1e-5) * (fabs(want[i]) + 1.0)))
            die("%s: a finite element is not the dense sum of g + e", desc, 0);
    }
    CHECK_CC(cc_coll_ef_get_residual(h, &p, buf, n, d, e2));
    for (size_t i = 0; i < n; ++i)
        if (!isfinite(e2[i])) die("%s: a non-finite value was left in the residual", desc, 0);
    if (wire_bytes(h) - wire0 < n * es) die("%s: the non-finite step was not sent densely", desc, 0);

    /* Step 3: finite again -> compressed and finite. */
    gauss_fill(x, n, seed_for(g_rank, tc * 10 + 3));
    pack(d, x, n, buf);
    const uint64_t wire1 = wire_bytes(h);
    call_ok(cc_coll_allreduce(buf, buf, n, d, op, &p, h, NULL), desc);
    for (size_t i = 0; i < n; ++i)
        if (!isfinite(element(d, buf, i))) die("%s: a finite step after the non-finite one is not finite", desc, 0);
    if (wire_bytes(h) - wire1 != (rows + cols) * (size_t)k * work_size(d))
        die("%s: the step after the non-finite one is not compressed", desc, 0);
    free(x);
    free(e1);
    free(e2);
    free(gp);
    free(want);
    free(buf);
    free(ref);
}

static void test_nonfinite(cc_coll_comm_h h)
{
    nonfinite_case(h, CC_COLL_F32, CC_COLL_AVG, 1);
    nonfinite_case(h, CC_COLL_F64, CC_COLL_SUM, 2);
    nonfinite_case(h, CC_COLL_F32, CC_COLL_SUM, 3);
    CHECK_CC(cc_coll_ef_reset_all(h));
}

/* ---- 9. F64, F16, BF16, in place and out of place -------------------------------------------- */

/* 16-bit inputs are rank r plus their rounding, so one step from a random Q
 * at rank exactly r can amplify that noise several times (measured up to 9
 * units of rounding); one spare column (rank r + 1) keeps the error at the
 * rounding level, which the tolerances (about 6 units) check. */

static void test_dtypes(cc_coll_comm_h h)
{
    const cc_coll_dtype_t dts[] = {CC_COLL_F64, CC_COLL_F16, CC_COLL_BF16, CC_COLL_F32};
    int c = 0;
    for (int di = 0; di < 4; ++di)
        for (int inplace = 0; inplace < 2; ++inplace)
            for (int o = 0; o < 2; ++o, ++c) {
                const cc_coll_dtype_t d = dts[di];
                const cc_coll_op_t op = o ? CC_COLL_SUM : CC_COLL_AVG;
                char desc[160];
                snprintf(desc, sizeof desc, "%s %s %s 40 x 36, data rank 2, rank 3 (P=%d)", dtype_name(d),
                         op_name(op), inplace ? "in-place" : "out-of-place", g_size);
                const double err = recovery_error(h, d, op, 40, 36, 40 * 36, 2, 3, inplace, 0xd7e0ull + (uint64_t)c,
                                                  desc);
                if (!(err < exact_tol(d))) {
                    fprintf(stderr, "[rank %d] %s: relative error %.3g, expected < %.1g\n", g_rank, desc, err,
                            exact_tol(d));
                    die("%s: not recovered", desc, 0);
                }
                /* The near-square default view too. */
                snprintf(desc, sizeof desc, "%s %s %s n=700 default view, data rank 3, rank 4 (P=%d)",
                         dtype_name(d), op_name(op), inplace ? "in-place" : "out-of-place", g_size);
                const double err2 = recovery_error(h, d, op, 0, 0, 700, 3, 4, inplace, 0xd8e0ull + (uint64_t)c, desc);
                if (!(err2 < exact_tol(d))) {
                    fprintf(stderr, "[rank %d] %s: relative error %.3g, expected < %.1g\n", g_rank, desc, err2,
                            exact_tol(d));
                    die("%s: not recovered", desc, 0);
                }
            }
    CHECK_CC(cc_coll_ef_reset_all(h));
}

/* ---- 10. low-rank state ------------------------------------------------------------------------- */

static void state_case(cc_coll_comm_h h, cc_coll_dtype_t d, cc_coll_op_t op, uint64_t rows, uint64_t cols, size_t n,
                       int k, int tc)
{
    size_t vr = 0, vc = 0;
    lowrank_view(n, rows, cols, &vr, &vc);
    char desc[160];
    snprintf(desc, sizeof desc, "state %s %s shape %llu x %llu n=%zu rank %d (P=%d)", dtype_name(d), op_name(op),
             (unsigned long long)rows, (unsigned long long)cols, n, k, g_size);
    const size_t es = cc_coll_dtype_size(d);
    cc_coll_params_t p = keyed(lowrank_params(rows, cols, k), next_key());
    uint64_t r_rows = 99, r_cols = 99, calls = 99;
    int rank = 99;
    unsigned char *buf = xmalloc(n * es);
    CHECK_CC(cc_coll_lowrank_get_state(h, &p, buf, n, d, &r_rows, &r_cols, &rank, &calls, NULL, NULL));
    if (r_rows != 0 || r_cols != 0 || rank != 0 || calls != 0) die("%s: a fresh tensor has state", desc, 0);
    double *x = xmalloc(n * sizeof *x), *out = xmalloc(n * sizeof *out);
    double *pm = xmalloc(vr * (size_t)k * sizeof *pm), *qm = xmalloc(vc * (size_t)k * sizeof *qm);
    double *pq = xmalloc(vr * vc * sizeof *pq), *ptp = xmalloc((size_t)k * (size_t)k * sizeof *ptp);
    for (int t = 1; t <= 3; ++t) {
        gauss_fill(x, n, seed_for(g_rank, tc * 10 + t));
        for (size_t i = 0; i < n; ++i) x[i] = round_to(d, x[i]);
        pack(d, x, n, buf);
        call_ok(cc_coll_allreduce(buf, buf, n, d, op, &p, h, NULL), desc);
        to_doubles(d, buf, n, out);
        CHECK_CC(cc_coll_lowrank_get_state(h, &p, buf, n, d, &r_rows, &r_cols, &rank, &calls, pm, qm));
        if (r_rows != vr || r_cols != vc || rank != k || calls != (uint64_t)t) {
            fprintf(stderr, "[rank %d] %s: state %llu x %llu rank %d calls %llu, expected %zu x %zu rank %d calls %d\n",
                    g_rank, desc, (unsigned long long)r_rows, (unsigned long long)r_cols, rank,
                    (unsigned long long)calls, vr, vc, k, t);
            die("%s: get_state", desc, 0);
        }
        /* P has orthonormal columns. */
        mat_mul_atb(pm, pm, vr, (size_t)k, (size_t)k, ptp);
        for (int a = 0; a < k; ++a)
            for (int b = 0; b < k; ++b)
                if (!(fabs(ptp[a * k + b] - (a == b)) < (d == CC_COLL_F64 ? 1e-12 : 1e-5)))
                    die("%s: P's columns are not orthonormal", desc, 0);
        /* P Q^T is the AVG result (W times it for SUM). */
        mat_mul_abt(pm, qm, vr, vc, (size_t)k, pq);
        const double w = op == CC_COLL_SUM ? (double)g_size : 1.0;
        double scale = 0.0;
        for (size_t i = 0; i < n; ++i) scale = fmax(scale, fabs(out[i]));
        for (size_t i = 0; i < n; ++i)
            if (!(fabs(out[i] - w * pq[i]) <= (d == CC_COLL_F64 ? 1e-13 : 1e-6) * scale)) {
                fprintf(stderr, "[rank %d] %s: element %zu: result %.17g, P Q^T %.17g\n", g_rank, desc, i, out[i],
                        w * pq[i]);
                die("%s: P Q^T from get_state is not the last result", desc, 0);
            }
    }
    /* cc_coll_ef_reset drops the residual and the low-rank state. */
    const uint64_t efb = ef_bytes(h);
    CHECK_CC(cc_coll_ef_reset(h, &p, buf, n, d));
    CHECK_CC(cc_coll_lowrank_get_state(h, &p, buf, n, d, &r_rows, &r_cols, &rank, &calls, NULL, NULL));
    if (calls != 0 || rank != 0) die("%s: cc_coll_ef_reset kept the low-rank state", desc, 0);
    if (efb - ef_bytes(h) != n * work_size(d)) die("%s: cc_coll_ef_reset did not free the residual", desc, 0);
    double *e = xmalloc(n * sizeof *e);
    CHECK_CC(cc_coll_ef_get_residual(h, &p, buf, n, d, e));
    for (size_t i = 0; i < n; ++i)
        if (e[i] != 0.0) die("%s: residual after cc_coll_ef_reset", desc, 0);
    free(e);
    free(buf);
    free(x);
    free(out);
    free(pm);
    free(qm);
    free(pq);
    free(ptp);
}

static void test_state(cc_coll_comm_h h)
{
    state_case(h, CC_COLL_F32, CC_COLL_AVG, 40, 30, 1200, 3, 1);
    state_case(h, CC_COLL_F64, CC_COLL_SUM, 40, 30, 1200, 2, 2);
    state_case(h, CC_COLL_F32, CC_COLL_SUM, 0, 0, 1000, 1, 3); /* 32 x 32, padded */
    state_case(h, CC_COLL_F64, CC_COLL_AVG, 20, 0, 900, 4, 4);
    CHECK_CC(cc_coll_ef_reset_all(h));
}

/* The reference of one step from a given Q (any basis of the same span):
 * the projection of the average onto span(sum_p M_p Q). */
static void reference_step(const double *m_sum, size_t rows, size_t cols, const double *q, int k, double *out)
{
    double *x = xmalloc(rows * (size_t)k * sizeof *x), *xtm = xmalloc((size_t)k * cols * sizeof *xtm);
    double *qq = xmalloc(cols * (size_t)k * sizeof *qq);
    memcpy(qq, q, cols * (size_t)k * sizeof *qq);
    orthonormalize_columns(qq, cols, k);
    mat_mul_ab(m_sum, qq, rows, (size_t)k, cols, x);
    orthonormalize_columns(x, rows, k);
    mat_mul_atb(x, m_sum, rows, cols, (size_t)k, xtm);
    mat_mul_ab(x, xtm, rows, cols, (size_t)k, out);
    for (size_t i = 0; i < rows * cols; ++i) out[i] /= (double)g_size;
    free(x);
    free(xtm);
    free(qq);
}

/* cc_coll_lowrank_set_q: two communicators given the same Q produce the
 * same result, which is the reference step from that Q; a different Q gives
 * a different result. */
static void test_set_q(cc_coll_comm_h h)
{
    cc_coll_comm_h h2 = NULL;
    CHECK_CC(cc_coll_comm_create(MPI_COMM_WORLD, &h2));
    const size_t rows = 36, cols = 28, n = rows * cols;
    const int ks[] = {1, 2, 3};
    for (int ki = 0; ki < 3; ++ki) {
        const int k = ks[ki];
        for (int di = 0; di < 2; ++di) {
            const cc_coll_dtype_t d = di ? CC_COLL_F32 : CC_COLL_F64;
            const size_t es = cc_coll_dtype_size(d);
            char desc[160];
            snprintf(desc, sizeof desc, "set_q %s rank %d (P=%d)", dtype_name(d), k, g_size);
            cc_coll_params_t p = keyed(with_warm(lowrank_params(rows, cols, k), 1), next_key());
            double *x = xmalloc(n * sizeof *x), *m_sum = xmalloc(n * sizeof *m_sum), *ref = xmalloc(n * sizeof *ref);
            double *q1 = xmalloc(cols * (size_t)k * sizeof *q1), *q2 = xmalloc(cols * (size_t)k * sizeof *q2);
            double *qs = xmalloc(cols * (size_t)k * sizeof *qs);
            double *out_a = xmalloc(n * sizeof *out_a), *out_b = xmalloc(n * sizeof *out_b);
            unsigned char *a = xmalloc(n * es), *b = xmalloc(n * es);
            gauss_fill(x, n, seed_for(g_rank, 700 + ki * 2 + di));
            for (size_t i = 0; i < n; ++i) x[i] = round_to(d, x[i]);
            CHECK(MPI_Allreduce(x, m_sum, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS, "sum");
            gauss_fill(q1, cols * (size_t)k, 0x5e7a + (uint64_t)k);
            gauss_fill(q2, cols * (size_t)k, 0x5e7b + (uint64_t)k);
            for (size_t i = 0; i < cols * (size_t)k; ++i) {
                q1[i] = round_to(d, q1[i]);
                q2[i] = round_to(d, q2[i]);
            }
            const double tol = d == CC_COLL_F64 ? 1e-9 : 1e-4;

            /* Same Q on both communicators: identical results, equal to the
             * reference step from Q. */
            pack(d, x, n, a);
            pack(d, x, n, b);
            CHECK_CC(cc_coll_lowrank_set_q(h, &p, a, n, d, q1));
            CHECK_CC(cc_coll_lowrank_set_q(h2, &p, b, n, d, q1));
            uint64_t calls = 9;
            int rank = 9;
            CHECK_CC(cc_coll_lowrank_get_state(h, &p, a, n, d, NULL, NULL, &rank, &calls, NULL, qs));
            if (calls != 0 || rank != k) die("%s: get_state after set_q", desc, 0);
            for (size_t i = 0; i < cols * (size_t)k; ++i)
                if (qs[i] != q1[i]) die("%s: get_state does not return the Q set", desc, 0);
            call_ok(cc_coll_allreduce(a, a, n, d, CC_COLL_AVG, &p, h, NULL), desc);
            call_ok(cc_coll_allreduce(b, b, n, d, CC_COLL_AVG, &p, h2, NULL), desc);
            if (memcmp(a, b, n * es) != 0) die("%s: the same Q on two communicators gave different results", desc, 0);
            reference_step(m_sum, rows, cols, q1, k, ref);
            const double e1 = rel_err(d, a, ref, n);
            if (!(e1 < tol)) {
                fprintf(stderr, "[rank %d] %s: relative error %.3g against the step from Q\n", g_rank, desc, e1);
                die("%s: the call did not start from the Q set", desc, 0);
            }
            to_doubles(d, a, n, out_a);

            /* Another Q on the second communicator: another result, the
             * reference step from that Q. */
            CHECK_CC(cc_coll_ef_reset(h2, &p, b, n, d));
            pack(d, x, n, b);
            CHECK_CC(cc_coll_lowrank_set_q(h2, &p, b, n, d, q2));
            call_ok(cc_coll_allreduce(b, b, n, d, CC_COLL_AVG, &p, h2, NULL), desc);
            to_doubles(d, b, n, out_b);
            if (!(norm_diff(out_a, out_b, n) > 1e-3 * norm_diff(out_a, NULL, n)))
                die("%s: a different Q gave the same result", desc, 0);
            reference_step(m_sum, rows, cols, q2, k, ref);
            if (!(rel_err(d, b, ref, n) < tol)) die("%s: the call did not start from the second Q", desc, 0);
            free(x);
            free(m_sum);
            free(ref);
            free(q1);
            free(q2);
            free(qs);
            free(out_a);
            free(out_b);
            free(a);
            free(b);
        }
    }
    CHECK_CC(cc_coll_comm_destroy(h2));
    CHECK_CC(cc_coll_ef_reset_all(h));
}

/* ---- 7. argument errors ---------------------------------------------------------------------------- */

static void test_bad_args(cc_coll_comm_h h)
{
    float buf[100] = {0};
    double q[100] = {0};
    const uint64_t efb = ef_bytes(h);
    cc_coll_params_t p;

    p = keyed(lowrank_params(7, 0, 1), 0xbad1);
    expect_error(cc_coll_allreduce(buf, buf, 100, CC_COLL_F32, CC_COLL_AVG, &p, h, NULL), CC_COLL_ERR_INVALID_ARG,
                 "rows = 7 does not divide count = 100", "rows not dividing count");
    p = keyed(lowrank_params(10, 11, 1), 0xbad1);
    expect_error(cc_coll_allreduce(buf, buf, 100, CC_COLL_F32, CC_COLL_AVG, &p, h, NULL), CC_COLL_ERR_INVALID_ARG,
                 "10 x 11", "rows x cols != count");
    /* rows = 0 asks for the near-square view and needs cols = 0. */
    p = keyed(lowrank_params(0, 10, 1), 0xbad1);
    expect_error(cc_coll_allreduce(buf, buf, 100, CC_COLL_F32, CC_COLL_AVG, &p, h, NULL), CC_COLL_ERR_INVALID_ARG,
                 "rows = 0 with params->cols = 10", "rows = 0, cols = 10");
    expect_error(cc_coll_lowrank_set_q(h, &p, buf, 100, CC_COLL_F32, q), CC_COLL_ERR_INVALID_ARG,
                 "rows = 0 with params->cols = 10", "set_q: rows = 0, cols = 10");
    {
        float b2[10] = {0};
        void *bufs[2] = {buf, b2};
        const size_t counts[2] = {100, 10};
        const cc_coll_dtype_t dts[2] = {CC_COLL_F32, CC_COLL_F32};
        cc_coll_params_t ps[2] = {keyed(lowrank_params(10, 10, 1), 0xbad1), keyed(lowrank_params(0, 1, 1), 0xbad4)};
        expect_error(cc_coll_allreduce_group(2, NULL, bufs, counts, dts, CC_COLL_AVG, ps, h, NULL),
                     CC_COLL_ERR_INVALID_ARG, "params[1]: params->rows = 0 with params->cols = 1",
                     "group: rows = 0, cols = 1");
    }
    /* Without a shape a tensor is sent densely and has no factors to set. */
    p = keyed(lowrank_params_1d(1), 0xbad2);
    expect_error(cc_coll_lowrank_set_q(h, &p, buf, 100, CC_COLL_F32, q), CC_COLL_ERR_INVALID_ARG,
                 "sent densely", "set_q without a shape");
    expect_error(cc_coll_lowrank_set_q(h, NULL, buf, 100, CC_COLL_F32, q), CC_COLL_ERR_INVALID_ARG,
                 "CC_COLL_PARAMS_FIELD_SHAPE", "set_q with NULL params");
    p = lowrank_params(10, 10, 0);
    expect_error(cc_coll_allreduce(buf, buf, 100, CC_COLL_F32, CC_COLL_AVG, &p, h, NULL), CC_COLL_ERR_INVALID_ARG,
                 "rank", "rank 0");
    p = lowrank_params(10, 10, -3);
    expect_error(cc_coll_allreduce(buf, buf, 100, CC_COLL_F32, CC_COLL_AVG, &p, h, NULL), CC_COLL_ERR_INVALID_ARG,
                 "rank", "rank -3");
    p = lowrank_params(10, 10, 65537);
    expect_error(cc_coll_allreduce(buf, buf, 100, CC_COLL_F32, CC_COLL_AVG, &p, h, NULL), CC_COLL_ERR_INVALID_ARG,
                 "rank", "rank 65537");
    p = with_rate(lowrank_params(10, 10, 1), 0.5);
    expect_error(cc_coll_allreduce(buf, buf, 100, CC_COLL_F32, CC_COLL_AVG, &p, h, NULL), CC_COLL_ERR_INVALID_ARG,
                 "min_compression_rate", "min_compression_rate 0.5");
    p = with_rate(lowrank_params(10, 10, 1), NAN);
    expect_error(cc_coll_allreduce(buf, buf, 100, CC_COLL_F32, CC_COLL_AVG, &p, h, NULL), CC_COLL_ERR_INVALID_ARG,
                 "min_compression_rate", "min_compression_rate NaN");
    p = with_warm(lowrank_params(10, 10, 1), 2);
    expect_error(cc_coll_allreduce(buf, buf, 100, CC_COLL_F32, CC_COLL_AVG, &p, h, NULL), CC_COLL_ERR_INVALID_ARG,
                 "warm_start", "warm_start 2");
    /* The state functions resolve the shape as a call would. */
    p = keyed(lowrank_params(7, 0, 1), 0xbad2);
    expect_error(cc_coll_lowrank_set_q(h, &p, buf, 100, CC_COLL_F32, q), CC_COLL_ERR_INVALID_ARG, "does not divide",
                 "set_q: rows not dividing count");
    p = keyed(lowrank_params(10, 10, 1), 0xbad2);
    expect_error(cc_coll_lowrank_set_q(h, &p, buf, 100, CC_COLL_F32, NULL), CC_COLL_ERR_NULL_BUFFER, "q",
                 "set_q: q NULL");
    expect_error(cc_coll_lowrank_set_q(h, &p, buf, 0, CC_COLL_F32, q), CC_COLL_ERR_INVALID_ARG, "count",
                 "set_q: count 0");
    expect_error(cc_coll_lowrank_set_q(h, &p, buf, 100, (cc_coll_dtype_t)7, q), CC_COLL_ERR_INVALID_DTYPE, "dtype",
                 "set_q: bad dtype");
    expect_error(cc_coll_lowrank_get_state(NULL, &p, buf, 100, CC_COLL_F32, NULL, NULL, NULL, NULL, NULL, NULL),
                 CC_COLL_ERR_INVALID_COMM, "comm", "get_state: NULL comm");

    /* Nothing was created by the failed calls. */
    if (ef_bytes(h) != efb) die("%s", "a failed call created a residual", 0);
    uint64_t calls = 9;
    int rank = 9;
    p = keyed(lowrank_params(10, 10, 1), 0xbad1);
    CHECK_CC(cc_coll_lowrank_get_state(h, &p, buf, 100, CC_COLL_F32, NULL, NULL, &rank, &calls, NULL, NULL));
    if (calls != 0 || rank != 0) die("%s", "a failed call counted or stored factors", 0);
    p = keyed(lowrank_params(10, 10, 1), 0xbad2);
    CHECK_CC(cc_coll_lowrank_get_state(h, &p, buf, 100, CC_COLL_F32, NULL, NULL, &rank, &calls, NULL, NULL));
    if (calls != 0 || rank != 0) die("%s", "a failed set_q stored a Q", 0);

    /* A good call still works afterwards. */
    p = keyed(lowrank_params(10, 10, 1), 0xbad3);
    for (int i = 0; i < 100; ++i) buf[i] = (float)(i % 7);
    CHECK_CC(cc_coll_allreduce(buf, buf, 100, CC_COLL_F32, CC_COLL_AVG, &p, h, NULL));
    CHECK_CC(cc_coll_ef_reset_all(h));
}

/* ---- count 0 ----------------------------------------------------------------------------------- */

/* Count 0 stores no factors (its status, bytes and residuals: conformance.c). */
static void test_count_zero(cc_coll_comm_h h)
{
    cc_coll_params_t p = keyed(lowrank_params(0, 0, 2), next_key());
    CHECK_CC(cc_coll_allreduce(NULL, NULL, 0, CC_COLL_F32, CC_COLL_AVG, &p, h, NULL));
    CHECK_CC(cc_coll_allreduce(NULL, NULL, 0, CC_COLL_F64, CC_COLL_SUM, &p, h, NULL));
    int rank = 9;
    CHECK_CC(cc_coll_lowrank_get_state(h, &p, NULL, 0, CC_COLL_F32, NULL, NULL, &rank, NULL, NULL, NULL));
    CHECK(rank == 0, "count 0 stored factors");
}

/* ---- review regressions --------------------------------------------------------------------------- */

/* A rank above the data's rank must still recover the sum exactly. With
 * rank 2 (Gram-Schmidt) and a rank-1 sum, P = M Q has two parallel columns;
 * single-pass Gram-Schmidt turned the second into normalised rounding noise
 * that is not orthogonal to the first, so P Q^T = P P^T M was not M
 * (relative error 0.016 to 0.06 before f83eb56 re-orthogonalised). QR,
 * rank >= 3, is covered by exact_recovery's k > r_data cases. */
static void test_rank_above_data_gs(cc_coll_comm_h h)
{
    const cc_coll_dtype_t dts[] = {CC_COLL_F32, CC_COLL_F64};
    for (int di = 0; di < 2; ++di)
        for (int o = 0; o < 2; ++o) {
            const cc_coll_op_t op = o ? CC_COLL_SUM : CC_COLL_AVG;
            char desc[160];
            snprintf(desc, sizeof desc, "%s %s 48 x 40, data rank 1, rank 2 (P=%d)", dtype_name(dts[di]), op_name(op),
                     g_size);
            const double err = recovery_error(h, dts[di], op, 48, 40, 48 * 40, 1, 2, o, 0xb1ull + (uint64_t)(di * 2 + o),
                                              desc);
            if (!(err < exact_tol(dts[di]))) {
                fprintf(stderr, "[rank %d] %s: relative error %.3g, expected < %.1g\n", g_rank, desc, err,
                        exact_tol(dts[di]));
                die("%s: rank 2 >= data rank 1 must recover the sum exactly (Gram-Schmidt loses orthogonality on "
                    "dependent columns)",
                    desc, 0);
            }
        }
    CHECK_CC(cc_coll_ef_reset_all(h));
}

/* A tensor whose first compressed input is all zeros gets Q = M^T P = 0;
 * with warm start that zero Q was reused (Gram-Schmidt leaves zero columns
 * zero), so P = M Q = 0 for ever: nothing was transmitted again and EF only
 * accumulated (relative error 1 for ever before f83eb56 redrew such a Q).
 * The next nonzero rank-1 input must be recovered, with and without warm
 * start. */
static void test_zero_first_step(cc_coll_comm_h h)
{
    const size_t rows = 30, cols = 20, n = rows * cols;
    const cc_coll_dtype_t dts[] = {CC_COLL_F32, CC_COLL_F64, CC_COLL_BF16};
    for (int di = 0; di < 3; ++di) {
        const cc_coll_dtype_t d = dts[di];
        for (int warm = 0; warm < 2; ++warm) {
            char desc[160];
            snprintf(desc, sizeof desc, "%s rank 1 warm_start %d: zeros, then a fixed rank-1 matrix (P=%d)",
                     dtype_name(d), warm, g_size);
            cc_coll_params_t p = keyed(with_warm(with_ef(lowrank_params(rows, cols, 1), 1), warm), next_key());
            double *x = xcalloc(n, sizeof *x), *want = xmalloc(n * sizeof *want);
            run_call(h, d, CC_COLL_AVG, &p, x, n, 1, NULL, NULL, desc); /* zeros */
            lowrank_input(d, n, rows, cols, 1, 0x2e20ull, 0, x);       /* the same on every rank */
            memcpy(want, x, n * sizeof *want);
            double err = 0.0;
            for (int t = 0; t < 3; ++t) err = run_call(h, d, CC_COLL_AVG, &p, x, n, 1, want, NULL, desc);
            if (!(err < exact_tol(d))) {
                fprintf(stderr, "[rank %d] %s: relative error %.3g after 3 nonzero steps\n", g_rank, desc, err);
                die("%s: the tensor never recovers from a zero first step", desc, 0);
            }
            free(x);
            free(want);
        }
    }
    CHECK_CC(cc_coll_ef_reset_all(h));
}

/* ---- 1-D tensors and the explicit near-square view ------------------------------------------------ */

/* A LOWRANK tensor without SHAPE is 1-D (a bias): like powerSGD_hook, the
 * library sends it densely. Each call is bit-identical to MPI_Allreduce of
 * the same (integer) data, moves count x element bytes, creates no residual
 * and no factors (get_state: rank 0, rows 0, cols 0), and advances the
 * tensor's call count; set_q refuses it. Counts that the near-square view
 * would compress (1000 -> 32 x 32, 1073) included. */
static void test_one_d_dense(cc_coll_comm_h h)
{
    static const size_t counts[] = {1, 7, 1000, 1073};
    const cc_coll_dtype_t dts[] = {CC_COLL_F32, CC_COLL_F64};
    int tc = 0;
    for (size_t c = 0; c < sizeof counts / sizeof counts[0]; ++c)
        for (int di = 0; di < 2; ++di) {
            const cc_coll_dtype_t d = dts[di];
            const size_t n = counts[c], es = cc_coll_dtype_size(d);
            const int keyed_tensor = (c + (size_t)di) % 2 == 0;
            cc_coll_params_t p = with_ef(lowrank_params_1d(2), 1);
            if (keyed_tensor) p = keyed(p, next_key());
            double *x = xmalloc(n * sizeof *x);
            unsigned char *send = xmalloc(n * es), *buf = xmalloc(n * es), *ref = xmalloc(n * es);
            for (int t = 0; t < 3; ++t, ++tc) {
                const cc_coll_op_t op = t == 1 ? CC_COLL_SUM : CC_COLL_AVG;
                const int inplace = t != 2;
                char desc[200];
                snprintf(desc, sizeof desc, "1-D %s %s n=%zu, call %d, %s, %s (P=%d)", dtype_name(d), op_name(op), n,
                         t + 1, inplace ? "in place" : "out of place", keyed_tensor ? "ef_key" : "no ef_key", g_size);
                integer_values(x, n, seed_for(g_rank, 300 + tc));
                pack(d, x, n, send);
                mpi_reference(d, op, send, ref, n);
                if (inplace) memcpy(buf, send, n * es);
                const uint64_t wire0 = wire_bytes(h), efb0 = ef_bytes(h);
                call_ok(cc_coll_allreduce(inplace ? buf : send, buf, n, d, op, &p, h, NULL), desc);
                expect_equal(d, buf, ref, n, desc);
                if (wire_bytes(h) - wire0 != n * es) die("%s: bytes_wire must be the dense tensor's bytes", desc, 0);
                if (ef_bytes(h) != efb0) die("%s: a 1-D tensor got a residual", desc, 0);
                uint64_t rows = 9, cols = 9, calls = 0;
                int rank = -1;
                CHECK_CC(cc_coll_lowrank_get_state(h, &p, buf, n, d, &rows, &cols, &rank, &calls, NULL, NULL));
                if (rank != 0 || rows != 0 || cols != 0) die("%s: a 1-D tensor has factors", desc, 0);
                if (calls != (uint64_t)t + 1) die("%s: the call count must advance", desc, 0);
            }
            double q[4] = {1, 0, 0, 1};
            expect_error(cc_coll_lowrank_set_q(h, &p, buf, n, d, q), CC_COLL_ERR_INVALID_ARG, "sent densely",
                         "set_q of a 1-D tensor");
            free(x);
            free(send);
            free(buf);
            free(ref);
        }
    CHECK_CC(cc_coll_ef_reset_all(h));
}

/* SHAPE with rows = cols = 0 asks for the near-square view (what no SHAPE
 * meant before 1-D tensors were sent densely). On a square count it is the
 * same matrix as the explicit shape, so two tensors with the same data and
 * seed give the same bits, wire bytes and factors, step after step (EF and
 * warm start on); on 1073 elements it is 33 x 33 (16 elements of padding),
 * and compressing moves (33 + 33) r work-size bytes. */
static void test_near_square_explicit(cc_coll_comm_h h)
{
    const size_t n = 32 * 32;
    cc_coll_params_t pa = keyed(with_warm(with_ef(lowrank_params(0, 0, 2), 1), 1), next_key());
    cc_coll_params_t pb = keyed(with_warm(with_ef(lowrank_params(32, 32, 2), 1), 1), next_key());
    float *xa = xmalloc(n * sizeof *xa), *xb = xmalloc(n * sizeof *xb);
    double *x = xmalloc(1073 * sizeof *x);
    for (int t = 0; t < 3; ++t) {
        char desc[120];
        snprintf(desc, sizeof desc, "SHAPE 0 x 0 vs 32 x 32, step %d (P=%d)", t + 1, g_size);
        gauss_fill(x, n, seed_for(g_rank, 400 + t));
        pack(CC_COLL_F32, x, n, xa);
        memcpy(xb, xa, n * sizeof *xa);
        const uint64_t w0 = wire_bytes(h);
        call_ok(cc_coll_allreduce(xa, xa, n, CC_COLL_F32, CC_COLL_AVG, &pa, h, NULL), desc);
        const uint64_t w1 = wire_bytes(h);
        call_ok(cc_coll_allreduce(xb, xb, n, CC_COLL_F32, CC_COLL_AVG, &pb, h, NULL), desc);
        const uint64_t w2 = wire_bytes(h);
        if (memcmp(xa, xb, n * sizeof *xa) != 0) die("%s: results differ", desc, 0);
        if (w1 - w0 != (32 + 32) * 2 * sizeof(float) || w2 - w1 != w1 - w0) die("%s: bytes_wire", desc, 0);
        uint64_t ra = 0, ca = 0, rb = 0, cb = 0;
        int ka = 0, kb = 0;
        double qa[64], qb[64];
        CHECK_CC(cc_coll_lowrank_get_state(h, &pa, xa, n, CC_COLL_F32, &ra, &ca, &ka, NULL, NULL, qa));
        CHECK_CC(cc_coll_lowrank_get_state(h, &pb, xb, n, CC_COLL_F32, &rb, &cb, &kb, NULL, NULL, qb));
        if (ra != 32 || ca != 32 || ka != 2 || rb != 32 || cb != 32 || kb != 2) die("%s: the states' shapes", desc, 0);
        if (memcmp(qa, qb, sizeof qa) != 0) die("%s: the states' Q differ", desc, 0);
    }
    /* 1073 elements: 33 x 33, rank 1 data recovered exactly. */
    {
        const size_t m = 1073;
        double *want = xmalloc(m * sizeof *want), *got = xmalloc(m * sizeof *got);
        lowrank_input(CC_COLL_F32, m, 33, 33, 1, 0x5a5a, g_rank, x);
        lowrank_sum(CC_COLL_F32, m, 33, 33, 1, 0x5a5a, want);
        for (size_t i = 0; i < m; ++i) want[i] /= (double)g_size;
        cc_coll_params_t p = keyed(with_ef(lowrank_params(0, 0, 1), 0), next_key());
        const uint64_t w0 = wire_bytes(h);
        const double err = run_call(h, CC_COLL_F32, CC_COLL_AVG, &p, x, m, 1, want, got, "SHAPE 0 x 0, n = 1073");
        if (wire_bytes(h) - w0 != (33 + 33) * 1 * sizeof(float)) die("%s: bytes_wire", "SHAPE 0 x 0, n = 1073", 0);
        if (!(err < exact_tol(CC_COLL_F32))) die("%s: rank-1 data not recovered", "SHAPE 0 x 0, n = 1073", 0);
        uint64_t rows = 0, cols = 0;
        int rank = 0;
        CHECK_CC(cc_coll_lowrank_get_state(h, &p, NULL, m, CC_COLL_F32, &rows, &cols, &rank, NULL, NULL, NULL));
        if (rows != 33 || cols != 33 || rank != 1) die("%s: the state's shape", "SHAPE 0 x 0, n = 1073", 0);
        free(want);
        free(got);
    }
    free(xa);
    free(xb);
    free(x);
    CHECK_CC(cc_coll_ef_reset_all(h));
}

/* ---- main ----------------------------------------------------------------------------------------------- */

static void setup(void)
{
    unset_lowrank_settings();
}

static const NamedTest kTests[] = {
    {"exact_recovery", test_exact_recovery},
    {"rank_above_data_gs", test_rank_above_data_gs},
    {"ef_invariant", test_ef_invariant},
    {"warm_start", test_warm_start},
    {"zero_first_step", test_zero_first_step},
    {"start_iter", test_start_iter},
    {"min_compression_rate", test_min_compression_rate},
    {"nonfinite", test_nonfinite},
    {"dtypes", test_dtypes},
    {"state", test_state},
    {"set_q", test_set_q},
    {"bad_args", test_bad_args},
    {"count_zero", test_count_zero},
    {"one_d_dense", test_one_d_dense},
    {"near_square_explicit", test_near_square_explicit},
};

int main(int argc, char **argv)
{
    return run_suite(argc, argv, "lowrank", kTests, sizeof kTests / sizeof kTests[0], 1, setup);
}
