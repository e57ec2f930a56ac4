/*
 * CC_COLL_LOWRANK_FACTORS (docs/algorithms.md 4.3): LOWRANK's two factor sums
 * as bf16 or fp16 codes (HALF's exchange, summed in the work type) instead of
 * MPI_SUM in the work type, with real ranks (run with 1, 2 and 3 ranks). Each
 * value gets its own communicator, created with the variable set.
 *   - work: CC_COLL_LOWRANK_FACTORS=work gives the default's bits;
 *   - exact: inputs of rank r (positive multiples of one well-conditioned
 *     matrix) at rank r (Gram-Schmidt and QR), F32 and F64, SUM and AVG, one
 *     tensor and a group of two, the second step from the first's Q: every
 *     rank holds the same bits; a 16-bit result is less accurate than work's
 *     and its relative Frobenius error against the exact reduction is below
 *     kBound x 2^-8 (bf16) or x 2^-11 (fp16), the unit roundoffs;
 *   - wire_bytes: bytes_wire counts 4 (P - 1) ceil(n / P) per factor sum of
 *     n elements (docs/wire.md), whatever the work type: at two ranks half of
 *     work's bytes for F32, a quarter for F64;
 *   - ef_invariant: with EF and warm start, per rank sum_t M^_t + e_T ==
 *     sum_t g_t (the residual keeps the factors' rounding);
 *   - overflow: fp16 factor sums past 65504 send the tensor densely (the
 *     exact sum; a finite residual), where bf16 and work compress it;
 *     the next step compresses again;
 *   - bad_value: an invalid value fails cc_coll_comm_create with
 *     CC_COLL_ERR_CONFIG naming the variable, the value and what is accepted.
 * A value that differs between ranks is CC_COLL_ERR_MISMATCH on every rank
 * (agreement.c, method_settings).
 *
 *   mpi_lowrank_factors [TEST...]   run all tests, or only the named ones
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

static const char *const kFormats[] = {"bf16", "fp16"};
/* Unit roundoff of the two formats: 2^-8 (8 significant bits), 2^-11. */
static const double kUnit[] = {0.00390625, 0.00048828125};
/* A bound in those units on exact's relative error: two roundings of each
 * factor sum, through the orthogonalisation and the product; measured at
 * most 1.13 over 25 seeds at 2 to 4 ranks. */
static const double kBound = 4.0;

static uint64_t g_key = 0xfac70000;

/* A communicator created with CC_COLL_LOWRANK_FACTORS=value. */
static cc_coll_comm_h format_comm(const char *value)
{
    setenv("CC_COLL_LOWRANK_FACTORS", value, 1);
    cc_coll_comm_h h = NULL;
    CHECK_CC(cc_coll_comm_create(MPI_COMM_WORLD, &h));
    unsetenv("CC_COLL_LOWRANK_FACTORS");
    return h;
}

static cc_coll_params_t params(uint64_t rows, uint64_t cols, int k, int ef, int warm)
{
    cc_coll_params_t p = keyed(lowrank_params(rows, cols, k), g_key++);
    p.mask |= CC_COLL_PARAMS_FIELD_EF | CC_COLL_PARAMS_FIELD_WARM_START;
    p.ef = ef;
    p.warm_start = warm;
    return p;
}

static void call_ok(cc_coll_status_t st, const char *desc)
{
    if (st != CC_COLL_OK) die("%s", desc, (int)st);
}

static uint64_t wire_bytes(cc_coll_comm_h h)
{
    return get_stats_masked(h, CC_COLL_STATS_FIELD_BYTES_WIRE).bytes_wire;
}

/* One allreduce of the d buffer `in` (n elements) into `out`, in place. */
static void run(cc_coll_comm_h h, const cc_coll_params_t *p, cc_coll_dtype_t d, cc_coll_op_t op, const void *in,
                void *out, size_t n, const char *desc)
{
    memcpy(out, in, n * cc_coll_dtype_size(d));
    call_ok(cc_coll_allreduce(out, out, n, d, op, p, h, NULL), desc);
    expect_same_on_all_ranks(out, n * cc_coll_dtype_size(d), desc);
}

/* bytes_wire of one 16-bit sum of n factor elements: 4 (P - 1) ceil(n / P). */
static size_t factor_bytes16(size_t n_factor)
{
    const size_t P = (size_t)g_size;
    return 4 * (P - 1) * ((n_factor + P - 1) / P);
}

/* ---- work ----------------------------------------------------------------------------- */

static void test_work(cc_coll_comm_h h)
{
    cc_coll_comm_h hw = format_comm(" Work ");
    const size_t n = 48 * 40;
    double *x = xmalloc(n * sizeof *x);
    float *in = xmalloc(n * sizeof *in), *a = xmalloc(n * sizeof *a), *b = xmalloc(n * sizeof *b);
    for (int t = 0; t < 3; ++t) {
        gauss_fill(x, n, 0x3030ull + (uint64_t)g_rank * 7919u + (uint64_t)t);
        pack(CC_COLL_F32, x, n, in);
        /* The same key on both communicators: their states stay apart. */
        const cc_coll_params_t p = keyed(params(48, 40, 2, 1, 1), 0xfac7);
        run(h, &p, CC_COLL_F32, CC_COLL_AVG, in, a, n, "default");
        run(hw, &p, CC_COLL_F32, CC_COLL_AVG, in, b, n, "CC_COLL_LOWRANK_FACTORS=work");
        if (memcmp(a, b, n * sizeof *a) != 0) die("%s", "work differs from the default", 0);
    }
    free(x);
    free(in);
    free(a);
    free(b);
    CHECK_CC(cc_coll_comm_destroy(hw));
    CHECK_CC(cc_coll_ef_reset_all(h));
}

/* ---- exact -------------------------------------------------------------------------------- */

/* A 16-bit result: below kBound units of its format against the exact
 * reduction, and less accurate than work's (the factors were coded). */
static void check_bound(double err, double err_work, int f, const char *desc)
{
    if (!(err < kBound * kUnit[f]) || !(err > err_work)) {
        fprintf(stderr, "[rank %d] %s: relative error %.3g (work %.3g), expected above work's and below %.3g\n",
                g_rank, desc, err, err_work, kBound * kUnit[f]);
        die("%s: 16-bit factors outside their bound", desc, 0);
    }
}

/* Per case two steps on the same data with warm start, EF off: the first
 * from the Gaussian Q (every rank the same bits, finite), the second from
 * the first's Q, which meets M's row space well, held to the bound; work
 * alongside on the suite's communicator. */
static void test_exact(cc_coll_comm_h h)
{
    static const struct {
        uint64_t rows, cols;
        size_t n;
        int r;
    } cases[] = {{48, 40, 48 * 40, 1}, {32, 0, 32 * 50, 2}, {0, 0, 1073, 3}, {60, 50, 3000, 4}};
    const cc_coll_dtype_t dts[] = {CC_COLL_F32, CC_COLL_F64};
    cc_coll_comm_h hf[2] = {format_comm("bf16"), format_comm("FP16")};
    double worst[2] = {0, 0};
    int tc = 0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; ++c)
        for (int di = 0; di < 2; ++di)
            for (int o = 0; o < 2; ++o, ++tc) {
                const cc_coll_dtype_t d = dts[di];
                const cc_coll_op_t op = o ? CC_COLL_SUM : CC_COLL_AVG;
                const size_t n = cases[c].n, es = cc_coll_dtype_size(d);
                size_t vr = 0, vc = 0;
                lowrank_view(n, cases[c].rows, cases[c].cols, &vr, &vc);
                double *x = xmalloc(n * sizeof *x), *want = xmalloc(n * sizeof *want);
                unsigned char *in = xmalloc(n * es), *w = xmalloc(n * es), *got = xmalloc(n * es);
                lowrank_scaled_input(d, op, n, vr, vc, cases[c].r, 0xfa0000ull + (uint64_t)tc, x, want);
                pack(d, x, n, in);
                char desc[200];
                snprintf(desc, sizeof desc, "%s %s shape %llu x %llu n=%zu, rank %d (P=%d)", dtype_name(d),
                         o ? "SUM" : "AVG", (unsigned long long)cases[c].rows, (unsigned long long)cases[c].cols, n,
                         cases[c].r, g_size);
                const cc_coll_params_t p = params(cases[c].rows, cases[c].cols, cases[c].r, 0, 1);
                for (int step = 0; step < 2; ++step) run(h, &p, d, op, in, w, n, desc);
                const double err_work = rel_err(d, w, want, n);
                for (int f = 0; f < 2; ++f) {
                    char what[240];
                    snprintf(what, sizeof what, "%s, %s factors", desc, kFormats[f]);
                    run(hf[f], &p, d, op, in, got, n, what);
                    for (size_t i = 0; i < n; ++i)
                        if (!isfinite(element(d, got, i))) die("%s: a first step not finite", what, 0);
                    run(hf[f], &p, d, op, in, got, n, what);
                    const double err = rel_err(d, got, want, n);
                    check_bound(err, err_work, f, what);
                    worst[f] = fmax(worst[f], err / kUnit[f]);
                }
                free(x);
                free(want);
                free(in);
                free(w);
                free(got);
            }

    /* A group of two F32 tensors (one batch: their factors side by side in
     * each exchange), ranks 1 and 2, the same two steps. */
    enum { N0 = 40 * 30, N1 = 36 * 24 };
    static const size_t counts[2] = {N0, N1};
    static const uint64_t rows[2] = {40, 36};
    static const int ranks[2] = {1, 2};
    float *in[2], *buf[2], *w[2];
    double *want[2];
    cc_coll_params_t ps[2];
    cc_coll_dtype_t dtypes[2] = {CC_COLL_F32, CC_COLL_F32};
    for (int t = 0; t < 2; ++t) {
        const size_t n = counts[t];
        double *x = xmalloc(n * sizeof *x);
        in[t] = xmalloc(n * sizeof(float));
        buf[t] = xmalloc(n * sizeof(float));
        w[t] = xmalloc(n * sizeof(float));
        want[t] = xmalloc(n * sizeof(double));
        lowrank_scaled_input(CC_COLL_F32, CC_COLL_AVG, n, rows[t], n / rows[t], ranks[t], 0xfa9000ull + (uint64_t)t, x,
                     want[t]);
        pack(CC_COLL_F32, x, n, in[t]);
        free(x);
        ps[t] = params(rows[t], 0, ranks[t], 0, 1);
    }
    for (int f = -1; f < 2; ++f) {
        char desc[160];
        snprintf(desc, sizeof desc, "group of two, %s factors (P=%d)", f < 0 ? "work" : kFormats[f], g_size);
        for (int step = 0; step < 2; ++step) {
            for (int t = 0; t < 2; ++t) memcpy(buf[t], in[t], counts[t] * sizeof(float));
            call_ok(cc_coll_allreduce_group(2, (const void *const *)buf, (void *const *)buf, counts, dtypes,
                                            CC_COLL_AVG, ps, f < 0 ? h : hf[f], NULL),
                    desc);
        }
        for (int t = 0; t < 2; ++t) {
            expect_same_on_all_ranks(buf[t], counts[t] * sizeof(float), desc);
            const double err = rel_err(CC_COLL_F32, buf[t], want[t], counts[t]);
            if (f < 0) {
                memcpy(w[t], buf[t], counts[t] * sizeof(float));
            } else {
                check_bound(err, rel_err(CC_COLL_F32, w[t], want[t], counts[t]), f, desc);
                worst[f] = fmax(worst[f], err / kUnit[f]);
            }
        }
    }
    for (int t = 0; t < 2; ++t) {
        free(in[t]);
        free(buf[t]);
        free(w[t]);
        free(want[t]);
    }
    if (g_rank == 0)
        printf("    worst relative error: bf16 %.2f units of 2^-8, fp16 %.2f units of 2^-11 (bound %.0f)\n", worst[0],
               worst[1], kBound);
    for (int f = 0; f < 2; ++f) CHECK_CC(cc_coll_comm_destroy(hf[f]));
    CHECK_CC(cc_coll_ef_reset_all(h));
}

/* ---- wire_bytes ------------------------------------------------------------------------------ */

static void test_wire_bytes(cc_coll_comm_h h)
{
    cc_coll_comm_h hb = format_comm("bf16");
    const size_t rows = 48, cols = 40, n = rows * cols;
    const int k = 2;
    const size_t pn = rows * (size_t)k, qn = cols * (size_t)k;
    double *x = xmalloc(n * sizeof *x);
    unsigned char *in = xmalloc(n * 8), *out = xmalloc(n * 8);
    gauss_fill(x, n, 0x3131ull + (uint64_t)g_rank);
    for (int di = 0; di < 2; ++di) {
        const cc_coll_dtype_t d = di ? CC_COLL_F64 : CC_COLL_F32;
        const size_t ws = di ? 8 : 4;
        pack(d, x, n, in);
        const cc_coll_params_t p = params(rows, cols, k, 1, 1);
        char desc[120];
        snprintf(desc, sizeof desc, "bytes_wire %s (P=%d)", dtype_name(d), g_size);
        const uint64_t w0 = wire_bytes(h), b0 = wire_bytes(hb);
        run(h, &p, d, CC_COLL_AVG, in, out, n, desc);
        run(hb, &p, d, CC_COLL_AVG, in, out, n, desc);
        const uint64_t work = wire_bytes(h) - w0, coded = wire_bytes(hb) - b0;
        if (work != (pn + qn) * ws) die("%s: work's bytes are not (rows + cols) r x work size", desc, 0);
        if (coded != factor_bytes16(pn) + factor_bytes16(qn)) {
            fprintf(stderr, "[rank %d] %s: %llu bytes, expected %zu\n", g_rank, desc, (unsigned long long)coded,
                    factor_bytes16(pn) + factor_bytes16(qn));
            die("%s: the coded factors' bytes", desc, 0);
        }
        /* Two ranks: each rank sends half of every 2-byte block of codes. */
        if (g_size == 2 && coded * (ws / 2) != work) die("%s: not a fraction 2 / work size of work's bytes", desc, 0);
    }
    free(x);
    free(in);
    free(out);
    CHECK_CC(cc_coll_comm_destroy(hb));
    CHECK_CC(cc_coll_ef_reset_all(h));
}

/* ---- ef_invariant ------------------------------------------------------------------------------ */

/* Step x of this rank's inputs. */
static uint64_t ef_seed(int rank, int x) { return 0xef00ull + (uint64_t)rank * 1000003u + (uint64_t)x; }

static void ef_case(cc_coll_comm_h h, const char *format, cc_coll_dtype_t d, uint64_t rows, uint64_t cols, size_t n,
                    int k, int tc)
{
    const int steps = 12;
    char desc[160];
    snprintf(desc, sizeof desc, "EF invariant, %s factors, %s shape %llu x %llu n=%zu rank %d (P=%d)", format,
             dtype_name(d), (unsigned long long)rows, (unsigned long long)cols, n, k, g_size);
    const cc_coll_params_t p = params(rows, cols, k, 1, 1);
    ef_invariant_steps(h, &p, d, n, steps, ef_seed, tc, NULL, NULL, NULL, 1, desc);
}

static void test_ef_invariant(cc_coll_comm_h h)
{
    (void)h;
    for (int f = 0; f < 2; ++f) {
        cc_coll_comm_h hf = format_comm(kFormats[f]);
        ef_case(hf, kFormats[f], CC_COLL_F32, 40, 30, 1200, 2, 1);
        ef_case(hf, kFormats[f], CC_COLL_F64, 40, 30, 1200, 2, 2);
        ef_case(hf, kFormats[f], CC_COLL_F32, 0, 0, 1000, 3, 3); /* 32 x 32, padded; QR */
        CHECK_CC(cc_coll_comm_destroy(hf));
    }
}

/* ---- overflow ------------------------------------------------------------------------------------ */

/* Every element c on every rank, 4096 x 16 at rank 1: the summed P is c x
 * (the sum of the start's Q, at most 4 in magnitude) per rank, the summed Q
 * c sqrt(4096) = 64 c per rank. With c = 2000, Q's 128000 per rank is past
 * fp16's 65504 and P is not. */
static void test_overflow(cc_coll_comm_h h)
{
    const char *const values[] = {"work", "bf16", "fp16"};
    const size_t rows = 4096, cols = 16, n = rows * cols, pn = rows, qn = cols;
    float *big = xmalloc(n * sizeof *big), *buf = xmalloc(n * sizeof *buf);
    double *e64 = xmalloc(n * sizeof *e64);
    for (size_t i = 0; i < n; ++i) big[i] = 2000.0f;
    const double exact = 2000.0 * g_size;
    for (int v = 0; v < 3; ++v) {
        cc_coll_comm_h hv = v == 0 ? h : format_comm(values[v]);
        const cc_coll_params_t p = params(rows, cols, 1, 1, 1);
        char desc[120];
        snprintf(desc, sizeof desc, "constant 2000, %s factors (P=%d)", values[v], g_size);
        const uint64_t w0 = wire_bytes(hv);
        memcpy(buf, big, n * sizeof *buf);
        call_ok(cc_coll_allreduce(buf, buf, n, CC_COLL_F32, CC_COLL_SUM, &p, hv, NULL), desc);
        expect_same_on_all_ranks(buf, n * sizeof *buf, desc);
        const uint64_t wire = wire_bytes(hv) - w0;
        call_ok(cc_coll_ef_get_residual(hv, &p, buf, n, CC_COLL_F32, e64), "cc_coll_ef_get_residual");
        double err = 0.0;
        for (size_t i = 0; i < n; ++i) {
            if (!isfinite(buf[i]) || !isfinite(e64[i])) die("%s: a non-finite result or residual", desc, 0);
            err = fmax(err, fabs(buf[i] - exact) / exact);
        }
        if (v == 2) {
            /* fp16: dense, MPI's sum (exact here), after both factor sums. */
            if (err != 0.0) die("%s: the dense result is not the exact sum", desc, 0);
            if (wire != factor_bytes16(pn) + factor_bytes16(qn) + n * sizeof(float))
                die("%s: not sent densely after the factor sums", desc, 0);
        } else {
            /* Compressed: rank 1 data, recovered to the factors' rounding. */
            if (!(err < (v == 0 ? 1e-5 : kBound * kUnit[0])))
                die("%s: the compressed result is not the sum", desc, 0);
            if (wire >= n * sizeof(float)) die("%s: not compressed", desc, 0);
        }
        /* The next step, on data of magnitude 1: compressed again. */
        for (size_t i = 0; i < n; ++i) buf[i] = 1.0f;
        const uint64_t w1 = wire_bytes(hv);
        call_ok(cc_coll_allreduce(buf, buf, n, CC_COLL_F32, CC_COLL_SUM, &p, hv, NULL), desc);
        for (size_t i = 0; i < n; ++i)
            if (!isfinite(buf[i])) die("%s: the next step is not finite", desc, 0);
        if (wire_bytes(hv) - w1 >= n * sizeof(float)) die("%s: the next step is not compressed", desc, 0);
        if (v != 0) CHECK_CC(cc_coll_comm_destroy(hv));
    }
    free(big);
    free(buf);
    free(e64);
    CHECK_CC(cc_coll_ef_reset_all(h));
}

/* ---- bad_value ------------------------------------------------------------------------------------- */

static void test_bad_value(cc_coll_comm_h h)
{
    (void)h;
    static const char *const bad[] = {"fp8", "", "half"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
        setenv("CC_COLL_LOWRANK_FACTORS", bad[i], 1);
        cc_coll_comm_h other = NULL;
        const cc_coll_status_t st = cc_coll_comm_create(MPI_COMM_WORLD, &other);
        unsetenv("CC_COLL_LOWRANK_FACTORS");
        char quoted[32];
        snprintf(quoted, sizeof quoted, "\"%s\"", bad[i]);
        const char *msg = cc_coll_last_error();
        if (st != CC_COLL_ERR_CONFIG || other != NULL || strstr(msg, "CC_COLL_LOWRANK_FACTORS") == NULL ||
            strstr(msg, quoted) == NULL || strstr(msg, "work, bf16, fp16") == NULL) {
            fprintf(stderr, "[rank %d] CC_COLL_LOWRANK_FACTORS=%s: got %s, \"%s\"\n", g_rank, quoted,
                    cc_coll_status_string(st), msg);
            die("%s", "a bad value must fail cc_coll_comm_create with CC_COLL_ERR_CONFIG and say why", 0);
        }
    }
}

/* ---- main -------------------------------------------------------------------------------------------- */

static void setup(void)
{
    unset_lowrank_settings();
}

static const NamedTest kTests[] = {
    {"work", test_work},
    {"exact", test_exact},
    {"wire_bytes", test_wire_bytes},
    {"ef_invariant", test_ef_invariant},
    {"overflow", test_overflow},
    {"bad_value", test_bad_value},
};

int main(int argc, char **argv)
{
    return run_suite(argc, argv, "lowrank_factors", kTests, sizeof kTests / sizeof kTests[0], 1, setup);
}
