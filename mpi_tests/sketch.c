/*
 * Method SKETCH (cc_coll_allreduce) with real ranks (run with 1, 2, 3 and 4
 * ranks).
 *
 * References are built in this file from the documented rules only:
 *   - top-k sparsifier: each rank keeps k = ceil(density * count) elements,
 *     largest |x| first, equal magnitudes: lower index first;
 *   - the sketch is lossless when it is not overloaded (load_factor <= ~0.8):
 *     the result is then the sum over ranks of every rank's kept values, up
 *     to the rounding of that sum in the work type (binary32 for F32/F16/BF16,
 *     binary64 for F64), and exactly that sum on small-integer data;
 *   - when the call goes dense (NaN/Inf on a rank, or a sketch that would
 *     outweigh the buffer, e.g. density 1 or tiny counts) the result is
 *     MPI_Allreduce(MPI_SUM) of the inputs, bit for bit;
 *   - error feedback: sum_t result_t + sum_ranks e_T == sum_t sum_ranks g_t.
 * Which path a call took is read from the statistics: the sketch path adds
 * its support to sketch_elements, the dense path adds nothing.
 *
 * Cases: lossless top-k (f32/f64, counts 1 .. 1 Mi); small-integer data bit
 * for bit; hash seeds; the threshold sparsifier (with its EF invariant); an
 * overloaded sketch; zeros; density 1 (dense); NaN/Inf; convergence with and
 * without EF; F16/BF16; parameter errors; the coded support
 * (CC_COLL_SKETCH_SUPPORT=coded) against the bitmap, bit for bit. What every method owes (the
 * error-feedback invariant of the top-k sparsifier in every dtype, count 0,
 * cross-rank identity, groups, non-blocking forms, agreement) is checked
 * for SKETCH by the conformance suite (conformance.c).
 *
 * Any failure prints the case and calls MPI_Abort (exit status non-zero).
 *
 *   mpi_sketch [TEST...]   run all tests, or only the named ones
 */
#define _POSIX_C_SOURCE 200809L /* setenv, unsetenv */

#include <float.h>
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
    return 0x5ce7c4ull + (uint64_t)rank * 1000003ull + (uint64_t)test_case * 7919ull;
}

/* ---- checks ---------------------------------------------------------------- */

/* Exact sums: equal values first (the decoding is right), then equal bits
 * (an exact sum of zero is +0.0, as MPI_SUM and IEEE x + (-x) give). */
static void expect_exact(cc_coll_dtype_t d, const void *got, const void *want, size_t n, const char *desc)
{
    for (size_t i = 0; i < n; ++i) {
        const double g = element(d, got, i), w = element(d, want, i);
        if (g != w) {
            fprintf(stderr, "[rank %d] FAIL in %s: %s: element %zu of %zu: got %.17g, expected %.17g\n", g_rank, g_test,
                    desc, i, n, g, w);
            fflush(stderr);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    size_t negzero = 0, first = 0;
    for (size_t i = 0; i < n; ++i)
        if (element(d, got, i) == 0.0 && signbit(element(d, got, i)) != signbit(element(d, want, i)))
            if (negzero++ == 0) first = i;
    if (negzero > 0) {
        fprintf(stderr,
                "[rank %d] FAIL in %s: %s: %zu exact sums of zero have the wrong sign (first: element %zu is %g, "
                "expected %g)\n",
                g_rank, g_test, desc, negzero, first, element(d, got, first), element(d, want, first));
        fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    expect_equal(d, got, want, n, desc);
}

static cc_coll_params_t seeded(cc_coll_params_t p, uint64_t seed)
{
    p.mask |= CC_COLL_PARAMS_FIELD_SEED;
    p.seed = seed;
    return p;
}

static double global_max_abs(const double *x, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; ++i)
        if (fabs(x[i]) > m) m = fabs(x[i]);
    MPI_Allreduce(MPI_IN_PLACE, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return m;
}

/* Relative tolerance of the sketch's rounding in the work type. */
static double work_tol(cc_coll_dtype_t d) { return d == CC_COLL_F64 ? 1e-13 : 1e-5; }

/* ---- one lossless call, checked ------------------------------------------- */

/* Runs one SKETCH call (top-k, EF off) on this rank's x and checks it:
 *  - sketch path: every support element peeled, the support is the union of
 *    the ranks' kept sets, result == sum over ranks of the kept values (bit
 *    for bit when `exact`, else within the work type's rounding);
 *  - dense path: result == MPI_Allreduce of the inputs, bit for bit.
 * Returns 1 when the sketch path ran. */
static int run_lossless(cc_coll_comm_h h, cc_coll_dtype_t d, cc_coll_op_t op, const double *x, size_t n,
                        double density, double load_factor, int has_seed, uint64_t seed, int inplace, int exact,
                        const char *what, void *result_out)
{
    const size_t es = cc_coll_dtype_size(d);
    char desc[320];
    snprintf(desc, sizeof desc, "%s: %s %s n=%zu density=%g load=%g %s%s (P=%d)", what, dtype_name(d),
             op == CC_COLL_SUM ? "SUM" : "AVG", n, density, load_factor, inplace ? "in-place" : "out-of-place",
             has_seed ? " seeded" : "", g_size);

    /* Reference: this rank's kept values, their sum over ranks (double) and
     * the union support. */
    unsigned char *kept = xmalloc(n), *uni = xmalloc(n);
    reference_topk(x, n, k_for(density, n), kept);
    double *mine = xmalloc(n * sizeof *mine), *ref = xmalloc(n * sizeof *ref);
    for (size_t i = 0; i < n; ++i) mine[i] = kept[i] ? x[i] : 0.0;
    CHECK(MPI_Allreduce(mine, ref, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS, "reference sum");
    CHECK(MPI_Allreduce(kept, uni, (int)n, MPI_UNSIGNED_CHAR, MPI_BOR, MPI_COMM_WORLD) == MPI_SUCCESS,
          "reference support");
    size_t support = 0;
    for (size_t i = 0; i < n; ++i) support += uni[i] != 0;
    const double maxabs = global_max_abs(x, n);

    unsigned char *send = xmalloc(n * es + 16), *recv = xmalloc(n * es + 16), *orig = xmalloc(n * es + 1);
    unsigned char *dense = xmalloc(n * es + 1);
    pack(d, x, n, send);
    memcpy(orig, send, n * es);
    if (inplace) memcpy(recv, send, n * es);
    else memset(recv, 0x5A, n * es);
    memset(recv + n * es, 0xC3, 16);
    /* Dense reference (F32/F64 only; 16-bit data here is exact). */
    if (d == CC_COLL_F32 || d == CC_COLL_F64)
        CHECK(MPI_Allreduce(send, dense, (int)n, mpi_type(d), MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS,
              "reference MPI_Allreduce");

    cc_coll_params_t p = sketch_params(density, 0, load_factor);
    if (has_seed) p = seeded(p, seed);
    const cc_coll_stats_t before = get_stats(h);
    const cc_coll_status_t st = cc_coll_allreduce(inplace ? recv : send, recv, n, d, op, &p, h, NULL);
    if (st != CC_COLL_OK) die("%s", desc, (int)st);
    const cc_coll_stats_t after = get_stats(h);
    const uint64_t elements = after.sketch_elements - before.sketch_elements;
    const uint64_t peeled = after.sketch_peeled - before.sketch_peeled;
    const int sketch_path = elements > 0;

    for (int i = 0; i < 16; ++i) CHECK(recv[n * es + (size_t)i] == 0xC3, "recvbuf written past count");
    if (!inplace) CHECK(memcmp(send, orig, n * es) == 0, "out-of-place call modified sendbuf");
    CHECK(after.calls == before.calls + 1 && after.bytes_uncompressed == before.bytes_uncompressed + n * es,
          "stats: calls / bytes_uncompressed");

    if (sketch_path) {
        if (elements != support) {
            fprintf(stderr, "[rank %d] %s: sketch_elements +%llu, union support %zu\n", g_rank, desc,
                    (unsigned long long)elements, support);
            die("%s: sketch_elements is not the union support", desc, 0);
        }
        if (peeled != elements) {
            fprintf(stderr, "[rank %d] %s: only %llu of %llu support elements peeled (%llu estimated)\n", g_rank,
                    desc, (unsigned long long)peeled, (unsigned long long)elements,
                    (unsigned long long)(elements - peeled));
            die("%s: the sketch must be lossless (sketch_peeled == sketch_elements) at this load factor", desc, 0);
        }
        CHECK(after.bytes_wire - before.bytes_wire < n * es, "sketch path: wire bytes must be under the buffer");
        double *want = xmalloc(n * sizeof *want);
        for (size_t i = 0; i < n; ++i) want[i] = op == CC_COLL_AVG ? div_in(d, round_to(d, ref[i]), g_size) : ref[i];
        if (exact) {
            unsigned char *wbuf = xmalloc(n * es + 1);
            pack(d, want, n, wbuf);
            expect_exact(d, recv, wbuf, n, desc);
            free(wbuf);
        } else {
            expect_close(d, recv, want, n, work_tol(d), op == CC_COLL_AVG ? maxabs / g_size : maxabs, desc);
        }
        free(want);
    } else {
        CHECK(peeled == 0, "dense path must not count peeled elements");
        CHECK(after.bytes_wire - before.bytes_wire >= n * es, "dense path: wire bytes include the whole buffer");
        if (d == CC_COLL_F32 || d == CC_COLL_F64) {
            if (op == CC_COLL_AVG)
                for (size_t i = 0; i < n; ++i) {
                    if (d == CC_COLL_F32) ((float *)dense)[i] = ((float *)dense)[i] / (float)g_size;
                    else ((double *)dense)[i] = ((double *)dense)[i] / (double)g_size;
                }
            expect_equal(d, recv, dense, n, desc);
        } else {
            die("%s: 16-bit case unexpectedly dense", desc, 0);
        }
    }
    expect_same_on_all_ranks(recv, n * es, desc);
    if (result_out != NULL) memcpy(result_out, recv, n * es);
    free(kept);
    free(uni);
    free(mine);
    free(ref);
    free(send);
    free(recv);
    free(orig);
    free(dense);
    return sketch_path;
}

/* ---- 1. lossless top-k ------------------------------------------------------- */

static void test_lossless(cc_coll_comm_h h)
{
    static const size_t ns[] = {1, 3, 1000, 1023, 1024, 1025, 65536 + 17, (size_t)1 << 20};
    int c = 0;
    for (int di = 0; di < 2; ++di)
        for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ++ni) {
            const cc_coll_dtype_t d = di ? CC_COLL_F64 : CC_COLL_F32;
            const size_t n = ns[ni];
            double *x = xmalloc(n * sizeof *x);
            random_values(d, x, n, seed_for(g_rank, 100 + c), 8);
            const int inplace = c & 1;
            ++c;
            const int sk = run_lossless(h, d, CC_COLL_SUM, x, n, 0.01, 0.75, 0, 0, inplace, 0, "lossless", NULL);
            if (n >= 65536) CHECK(sk, "test setup: counts >= 64 Ki at density 0.01 must take the sketch path");
            if (n <= 1025) CHECK(!sk, "counts <= 1025 must go dense (the sketch would outweigh the buffer)");
            if (n == 65536 + 17) {
                run_lossless(h, d, CC_COLL_AVG, x, n, 0.01, 0.75, 0, 0, !inplace, 0, "lossless AVG", NULL);
                run_lossless(h, d, CC_COLL_SUM, x, n, 0.05, 0.75, 0, 0, inplace, 0, "lossless", NULL);
            }
            free(x);
        }
}

/* ---- 2. small-integer data: bit for bit ------------------------------------- */

static void test_integers(cc_coll_comm_h h)
{
    static const size_t ns[] = {65536 + 17, (size_t)1 << 20};
    int c = 0;
    for (int di = 0; di < 2; ++di)
        for (size_t ni = 0; ni < 2; ++ni) {
            const cc_coll_dtype_t d = di ? CC_COLL_F64 : CC_COLL_F32;
            const size_t n = ns[ni];
            double *x = xmalloc(n * sizeof *x);
            integer_values(x, n, seed_for(g_rank, 200 + c++));
            for (int op = 0; op < 2; ++op)
                CHECK(run_lossless(h, d, (cc_coll_op_t)op, x, n, 0.01, 0.75, 0, 0, op, 1, "integers", NULL),
                      "test setup: integer case must take the sketch path");
            free(x);
        }
}

/* ---- 3. seeds ------------------------------------------------------------------ */

static void test_seeds(cc_coll_comm_h h)
{
    static const uint64_t seeds[] = {1, 2, 0xdeadbeefcafef00dull, 0};
    const size_t n = 65536 + 17;
    double *x = xmalloc(n * sizeof *x);
    unsigned char *first = xmalloc(n * 8), *other = xmalloc(n * 8);
    for (int di = 0; di < 2; ++di) {
        const cc_coll_dtype_t d = di ? CC_COLL_F64 : CC_COLL_F32;
        const size_t es = cc_coll_dtype_size(d);
        integer_values(x, n, seed_for(g_rank, 300 + di));
        for (size_t s = 0; s < sizeof seeds / sizeof seeds[0]; ++s) {
            CHECK(run_lossless(h, d, CC_COLL_SUM, x, n, 0.01, 0.75, 1, seeds[s], 0, 1, "seeds, integers",
                               s == 0 ? first : other),
                  "test setup: seeds case must take the sketch path");
            if (s > 0 && memcmp(first, other, n * es) != 0)
                die("%s: integer data: another seed gave another result", dtype_name(d), 0);
        }
        /* Random data: each seed within rounding of the exact sum. */
        random_values(d, x, n, seed_for(g_rank, 310 + di), 8);
        for (size_t s = 0; s < sizeof seeds / sizeof seeds[0]; ++s)
            run_lossless(h, d, CC_COLL_SUM, x, n, 0.01, 0.75, 1, seeds[s], 1, 0, "seeds, random", NULL);
    }
    free(x);
    free(first);
    free(other);
}

/* ---- 4. threshold sparsifier ------------------------------------------------- */

/* Every rank's magnitudes follow one log-uniform pattern over [1e-6, 1e-2]
 * (4 decades, so one ladder rung, ~2x, holds ~8% of the elements) with
 * per-rank signs and a 0.1% per-rank jitter: the ranks keep nearly the same
 * elements and the union support stays small enough for the sketch. */
static void threshold_data(double *x, size_t n, int step)
{
    uint64_t shared = 0xabcdefull + (uint64_t)step * 31ull, own = seed_for(g_rank, 400 + step);
    for (size_t i = 0; i < n; ++i) {
        const double mag = pow(10.0, -6.0 + 4.0 * rng_uniform(&shared));
        const double s = (rng_next(&own) & 1) ? -1.0 : 1.0;
        x[i] = (double)(float)(s * mag * (1.0 + 0.001 * rng_uniform(&own)));
    }
}

static void test_threshold(cc_coll_comm_h h)
{
    const size_t n = (size_t)1 << 17;
    const int T = 20;
    double *x = xmalloc(n * sizeof *x), *e = xmalloc(n * sizeof *e), *mine = xmalloc(n * sizeof *mine);
    double *ref = xmalloc(n * sizeof *ref), *sum_g = xcalloc(n, sizeof(double)), *sum_r = xcalloc(n, sizeof(double));
    double *G = xmalloc(n * sizeof *G), *E = xmalloc(n * sizeof *E);
    float *send = xmalloc(n * 4), *recv = xmalloc(n * 4);
    cc_coll_params_t p = keyed(sketch_params(0.01, 1, 0.75), 0x7e5);
    p.mask |= CC_COLL_PARAMS_FIELD_ZERO_FRACTION;
    p.sparsifier = CC_COLL_SPARSIFY_THRESHOLD;
    p.zero_fraction = 0.8;
    CHECK_CC(cc_coll_ef_reset_all(h));
    double gmax = 0, rmax_sum = 0;
    for (int t = 0; t < T; ++t) {
        threshold_data(x, n, t);
        for (size_t i = 0; i < n; ++i) {
            sum_g[i] += x[i];
            if (fabs(x[i]) > gmax) gmax = fabs(x[i]);
        }
        pack(CC_COLL_F32, x, n, send);
        const cc_coll_stats_t before = get_stats(h);
        CHECK_CC(cc_coll_allreduce(send, recv, n, CC_COLL_F32, CC_COLL_SUM, &p, h, NULL));
        const cc_coll_stats_t after = get_stats(h);
        const uint64_t elements = after.sketch_elements - before.sketch_elements;
        const uint64_t peeled = after.sketch_peeled - before.sketch_peeled;
        CHECK(elements > 0, "test setup: the threshold case must take the sketch path");
        if (peeled != elements) {
            fprintf(stderr, "[rank %d] threshold step %d: %llu of %llu support elements peeled\n", g_rank, t,
                    (unsigned long long)peeled, (unsigned long long)elements);
            die("%s", "threshold: the sketch must be lossless at load factor 0.75", 0);
        }
        expect_same_on_all_ranks(recv, n * 4, "threshold");
        double rmax = 0;
        for (size_t i = 0; i < n; ++i) {
            sum_r[i] += recv[i];
            if (fabs(recv[i]) > rmax) rmax = fabs(recv[i]);
        }
        rmax_sum += rmax;
        CHECK_CC(cc_coll_ef_get_residual(h, &p, recv, n, CC_COLL_F32, e));
        /* The elements sent are those whose residual is now zero. */
        size_t sent = 0;
        for (size_t i = 0; i < n; ++i) sent += e[i] == 0.0;
        const double frac = (double)sent / (double)n;
        if (frac < 0.2 - 1e-12 || (t == 0 && frac > 0.30)) {
            fprintf(stderr, "[rank %d] threshold step %d: sent fraction %.4f\n", g_rank, t, frac);
            die("%s", "threshold: zeroed fraction must be <= 0.8 and (step 0) within one rung of it", 0);
        }
        if (t == 0) {
            /* Fresh residual: g' = x. The kept set is {|x| >= tau}; the
             * residual keeps the rest exactly; the result is the sum over
             * ranks of the kept values. */
            double min_sent = INFINITY, max_unsent = 0;
            for (size_t i = 0; i < n; ++i) {
                if (e[i] == 0.0) {
                    if (fabs(x[i]) < min_sent) min_sent = fabs(x[i]);
                    mine[i] = x[i];
                } else {
                    CHECK(e[i] == x[i], "threshold: an unsent element's residual must be its input");
                    if (fabs(x[i]) > max_unsent) max_unsent = fabs(x[i]);
                    mine[i] = 0.0;
                }
            }
            CHECK(min_sent > max_unsent, "threshold: the kept set must be every |x| at or above one threshold");
            MPI_Allreduce(mine, ref, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
            expect_close(CC_COLL_F32, recv, ref, n, 1e-5, global_max_abs(x, n), "threshold: result == sum of kept");
            if (g_rank == 0) printf("  threshold: step 0 sends %.1f%% of the elements (rank 0)\n", 100 * frac);
        }
    }
    /* EF invariant over the T steps. */
    CHECK_CC(cc_coll_ef_get_residual(h, &p, recv, n, CC_COLL_F32, e));
    MPI_Allreduce(sum_g, G, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(e, E, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &gmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    const double tol = 64.0 * FLT_EPSILON * ((double)g_size * gmax * T + rmax_sum);
    double worst = 0, carried = 0;
    for (size_t i = 0; i < n; ++i) {
        CHECK(isfinite(e[i]), "threshold: residual not finite");
        const double err = fabs(sum_r[i] + E[i] - G[i]);
        if (err > worst) worst = err;
        if (fabs(E[i]) > carried) carried = fabs(E[i]);
    }
    if (worst > tol) {
        fprintf(stderr, "[rank %d] threshold EF invariant: worst |diff| %.3g > tol %.3g\n", g_rank, worst, tol);
        die("%s", "threshold: sum_t result + sum_ranks e_T != sum_t sum_ranks g_t", 0);
    }
    CHECK(carried > 100 * tol, "threshold EF: the residual should carry far more than the tolerance");
    CHECK_CC(cc_coll_ef_reset_all(h));
    free(x);
    free(e);
    free(mine);
    free(ref);
    free(sum_g);
    free(sum_r);
    free(G);
    free(E);
    free(send);
    free(recv);
}

/* ---- 5. overloaded sketch ---------------------------------------------------- */

static void test_overloaded(cc_coll_comm_h h)
{
    static const size_t ns[] = {(size_t)1 << 16, (size_t)1 << 18};
    int overloaded_seen = 0, sketch_seen = 0, c = 0;
    for (int di = 0; di < 2; ++di)
        for (size_t ni = 0; ni < 2; ++ni) {
            const cc_coll_dtype_t d = di ? CC_COLL_F64 : CC_COLL_F32;
            const size_t n = ns[ni], es = cc_coll_dtype_size(d);
            double *x = xmalloc(n * sizeof *x), *mine = xmalloc(n * sizeof *mine), *ref = xmalloc(n * sizeof *ref);
            unsigned char *kept = xmalloc(n), *buf = xmalloc(n * es);
            random_values(d, x, n, seed_for(g_rank, 500 + c++), 4);
            reference_topk(x, n, k_for(0.3, n), kept);
            for (size_t i = 0; i < n; ++i) mine[i] = kept[i] ? x[i] : 0.0;
            MPI_Allreduce(mine, ref, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
            pack(d, x, n, buf);
            const cc_coll_params_t p = sketch_params(0.3, 0, 1.2);
            const cc_coll_stats_t before = get_stats(h);
            CHECK_CC(cc_coll_allreduce(buf, buf, n, d, CC_COLL_SUM, &p, h, NULL));
            const cc_coll_stats_t after = get_stats(h);
            const uint64_t elements = after.sketch_elements - before.sketch_elements;
            const uint64_t peeled = after.sketch_peeled - before.sketch_peeled;
            expect_same_on_all_ranks(buf, n * es, "overloaded");
            double num = 0, den = 0;
            for (size_t i = 0; i < n; ++i) {
                const double v = element(d, buf, i);
                if (!isfinite(v)) die("%s: overloaded sketch gave a non-finite element", dtype_name(d), 0);
                num += (v - ref[i]) * (v - ref[i]);
                den += ref[i] * ref[i];
            }
            const double rel = sqrt(num / den);
            if (g_rank == 0)
                printf("  overloaded %s n=%zu: %s, peeled %llu of %llu, relative L2 error %.3g\n", dtype_name(d), n,
                       elements ? "sketch" : "dense", (unsigned long long)peeled, (unsigned long long)elements, rel);
            if (elements) {
                ++sketch_seen;
                if (peeled < elements) ++overloaded_seen;
                CHECK(rel < 1.5, "overloaded: relative L2 error must stay below 1.5");
            }
            free(x);
            free(mine);
            free(ref);
            free(kept);
            free(buf);
        }
    CHECK(sketch_seen > 0, "test setup: an overloaded case must take the sketch path");
    CHECK(overloaded_seen > 0, "load factor 1.2 at density 0.3: no configuration left elements unpeeled");
}

/* ---- 6. zeros, density 1, NaN/Inf ------------------------------------------------ */

static void test_zeros(cc_coll_comm_h h)
{
    const size_t n = 65536 + 17;
    for (int di = 0; di < 2; ++di) {
        const cc_coll_dtype_t d = di ? CC_COLL_F64 : CC_COLL_F32;
        const size_t es = cc_coll_dtype_size(d);
        unsigned char *buf = xmalloc(n * es);
        double *e = xmalloc(n * sizeof *e);
        for (int ef = 0; ef < 2; ++ef) {
            const cc_coll_params_t p = keyed(sketch_params(0.01, ef, 0.75), 600 + (uint64_t)di);
            for (int step = 0; step < 3; ++step)
                for (int op = 0; op < 2; ++op) {
                    memset(buf, 0, n * es);
                    if (step == 1)
                        for (size_t i = 0; i < n; i += 2) buf[i * es + es - 1] = 0x80; /* -0.0 */
                    CHECK_CC(cc_coll_allreduce(buf, buf, n, d, (cc_coll_op_t)op, &p, h, NULL));
                    for (size_t i = 0; i < n; ++i)
                        if (!(element(d, buf, i) == 0.0))
                            die("%s: all-zero input gave a non-zero or NaN element", dtype_name(d), 0);
                }
            CHECK_CC(cc_coll_ef_get_residual(h, &p, buf, n, d, e));
            for (size_t i = 0; i < n; ++i) CHECK(e[i] == 0.0, "all-zero input left a non-zero residual");
        }
        free(buf);
        free(e);
    }
    CHECK_CC(cc_coll_ef_reset_all(h));
}

/* Density 1: the support is everything, the sketch cannot pay, the call is
 * MPI_Allreduce(SUM) of the inputs: bit-identical on random data. */
static void test_density_one(cc_coll_comm_h h)
{
    static const size_t ns[] = {1000, 65536 + 17};
    int c = 0;
    for (int di = 0; di < 2; ++di)
        for (size_t ni = 0; ni < 2; ++ni) {
            const cc_coll_dtype_t d = di ? CC_COLL_F64 : CC_COLL_F32;
            const size_t n = ns[ni], es = cc_coll_dtype_size(d);
            double *x = xmalloc(n * sizeof *x), *e = xmalloc(n * sizeof *e);
            unsigned char *send = xmalloc(n * es), *recv = xmalloc(n * es), *want = xmalloc(n * es);
            random_values(d, x, n, seed_for(g_rank, 700 + c++), 20);
            pack(d, x, n, send);
            for (int op = 0; op < 2; ++op)
                for (int inplace = 0; inplace < 2; ++inplace)
                    for (int ef = 0; ef < 2; ++ef) {
                        char desc[160];
                        snprintf(desc, sizeof desc, "density 1: %s %s n=%zu %s ef=%d", dtype_name(d),
                                 op ? "AVG" : "SUM", n, inplace ? "in-place" : "out-of-place", ef);
                        CHECK(MPI_Allreduce(send, want, (int)n, mpi_type(d), MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS,
                              "MPI_Allreduce");
                        if (op == CC_COLL_AVG)
                            for (size_t i = 0; i < n; ++i) {
                                if (d == CC_COLL_F32) ((float *)want)[i] = ((float *)want)[i] / (float)g_size;
                                else ((double *)want)[i] = ((double *)want)[i] / (double)g_size;
                            }
                        if (inplace) memcpy(recv, send, n * es);
                        const uint64_t key = 710 + (uint64_t)(2 * di) + (uint64_t)ni;
                        const cc_coll_params_t p = keyed(sketch_params(1.0, ef, 0.75), key);
                        const cc_coll_stats_t before = get_stats(h);
                        cc_coll_status_t st = cc_coll_allreduce(inplace ? recv : send, recv, n, d, (cc_coll_op_t)op,
                                                                &p, h, NULL);
                        if (st != CC_COLL_OK) die("%s", desc, (int)st);
                        const cc_coll_stats_t after = get_stats(h);
                        CHECK(after.sketch_elements == before.sketch_elements, "density 1 must take the dense path");
                        expect_equal(d, recv, want, n, desc);
                        expect_same_on_all_ranks(recv, n * es, desc);
                        if (ef) {
                            CHECK_CC(cc_coll_ef_get_residual(h, &p, recv, n, d, e));
                            for (size_t i = 0; i < n; ++i) CHECK(e[i] == 0.0, "density 1 (dense) left a residual");
                        }
                    }
            free(x);
            free(e);
            free(send);
            free(recv);
            free(want);
        }
    CHECK_CC(cc_coll_ef_reset_all(h));
}

static void test_nonfinite(cc_coll_comm_h h)
{
    const size_t n = 65536 + 17;
    for (int di = 0; di < 2; ++di) {
        const cc_coll_dtype_t d = di ? CC_COLL_F64 : CC_COLL_F32;
        const size_t es = cc_coll_dtype_size(d);
        double *x = xmalloc(n * sizeof *x), *e = xmalloc(n * sizeof *e);
        unsigned char *send = xmalloc(n * es), *recv = xmalloc(n * es), *ref = xmalloc(n * es);
        const cc_coll_params_t p = keyed(sketch_params(0.01, 1, 0.75), 800 + (uint64_t)di);
        integer_values(x, n, seed_for(g_rank, 800 + di));
        if (g_rank == g_size - 1) {
            x[17] = NAN;
            x[500] = INFINITY;
        }
        if (g_size >= 2 && g_rank == 0) x[800] = INFINITY;
        if (g_size >= 2 && g_rank == 1) x[800] = -INFINITY;
        if (g_rank == 0) x[n - 1] = -INFINITY;
        pack(d, x, n, send);
        CHECK(MPI_Allreduce(send, ref, (int)n, mpi_type(d), MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS, "MPI_Allreduce");
        const cc_coll_stats_t before = get_stats(h);
        CHECK_CC(cc_coll_allreduce(send, recv, n, d, CC_COLL_SUM, &p, h, NULL));
        const cc_coll_stats_t after = get_stats(h);
        CHECK(after.sketch_elements == before.sketch_elements, "NaN/Inf on a rank: the call must go dense");
        expect_nonfinite_pattern(d, recv, ref, n, "NaN/Inf");
        CHECK(isnan(element(d, recv, 17)) && element(d, recv, 500) == INFINITY && element(d, recv, n - 1) == -INFINITY,
              "NaN/Inf positions");
        if (g_size >= 2) CHECK(isnan(element(d, recv, 800)), "+Inf + -Inf must give NaN");
        expect_equal(d, recv, ref, n, "NaN/Inf: dense fallback equals MPI_SUM");
        expect_same_on_all_ranks(recv, n * es, "NaN/Inf");
        CHECK_CC(cc_coll_ef_get_residual(h, &p, recv, n, d, e));
        for (size_t i = 0; i < n; ++i) CHECK(isfinite(e[i]), "residual holds a non-finite value");
        /* The next call with finite data is finite everywhere. */
        integer_values(x, n, seed_for(g_rank, 810 + di));
        pack(d, x, n, send);
        CHECK_CC(cc_coll_allreduce(send, recv, n, d, CC_COLL_SUM, &p, h, NULL));
        for (size_t i = 0; i < n; ++i) CHECK(isfinite(element(d, recv, i)), "NaN/Inf leaked into the next call");
        CHECK_CC(cc_coll_ef_get_residual(h, &p, recv, n, d, e));
        for (size_t i = 0; i < n; ++i) CHECK(isfinite(e[i]), "residual not finite after the next call");
        CHECK_CC(cc_coll_ef_reset(h, &p, recv, n, d));
        free(x);
        free(e);
        free(send);
        free(recv);
        free(ref);
    }
}

/* ---- 7. convergence with and without EF ------------------------------------------ */

/* Relative RMS error of the running mean of SKETCH AVG on a fixed input,
 * at step 20 and step 200. */
static void running_mean_errors(cc_coll_comm_h h, int ef, double *err20, double *err200)
{
    const size_t n = 65536;
    const double density = 0.1;
    float *g = xmalloc(n * sizeof *g), *recv = xmalloc(n * sizeof *recv);
    double *gd = xmalloc(n * sizeof *gd), *mean = xmalloc(n * sizeof *mean), *run = xcalloc(n, sizeof(double));
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
    const cc_coll_params_t p = keyed(sketch_params(density, ef, 0.75), 4000 + (uint64_t)ef);
    uint64_t sketch_calls = 0;
    for (int t = 1; t <= 200; ++t) {
        const cc_coll_stats_t before = get_stats(h);
        CHECK_CC(cc_coll_allreduce(g, recv, n, CC_COLL_F32, CC_COLL_AVG, &p, h, NULL));
        sketch_calls += get_stats(h).sketch_elements != before.sketch_elements;
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
    /* Some steps may go dense (a support that outgrows the sketch); most
     * must not, or this would not test the sketch. */
    CHECK(sketch_calls >= 100, "test setup: most convergence steps must take the sketch path");
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
    CHECK(n200 > 0.5, "no EF: sparsification without EF should be strongly biased here");
    CHECK_CC(cc_coll_ef_reset_all(h));
}

/* ---- 8. F16 / BF16 ---------------------------------------------------------- */

static void test_half(cc_coll_comm_h h)
{
    const size_t n = 65536 + 17;
    int c = 0;
    for (int di = 2; di < 4; ++di) {
        const cc_coll_dtype_t d = (cc_coll_dtype_t)di;
        double *x = xmalloc(n * sizeof *x);
        integer_values(x, n, seed_for(g_rank, 1000 + c++));
        for (int op = 0; op < 2; ++op)
            for (int inplace = 0; inplace < 2; ++inplace)
                CHECK(run_lossless(h, d, (cc_coll_op_t)op, x, n, 0.01, 0.75, 0, 0, inplace, 1, "16-bit integers",
                                   NULL),
                      "test setup: 16-bit case must take the sketch path");
        free(x);
    }
}

/* ---- 9. parameter errors -------------------------------------------------------- */

static void expect_invalid(cc_coll_comm_h h, const cc_coll_params_t *p, const char *field, const char *desc)
{
    float buf[64];
    memset(buf, 0, sizeof buf);
    const cc_coll_status_t st = cc_coll_allreduce(buf, buf, 64, CC_COLL_F32, CC_COLL_SUM, p, h, NULL);
    if (st != CC_COLL_ERR_INVALID_ARG) die("%s: expected CC_COLL_ERR_INVALID_ARG", desc, (int)st);
    if (strstr(cc_coll_last_error(), field) == NULL) {
        fprintf(stderr, "[rank %d] %s: message \"%s\" does not name %s\n", g_rank, desc, cc_coll_last_error(), field);
        die("%s: the error message must name the field", desc, 0);
    }
}

static void test_bad_params(cc_coll_comm_h h)
{
    const cc_coll_stats_t before = get_stats(h);
    const double bad_lf[] = {0.0, 20.0, NAN, -0.5, INFINITY};
    for (size_t i = 0; i < sizeof bad_lf / sizeof bad_lf[0]; ++i) {
        const cc_coll_params_t p = sketch_params(0.01, 1, bad_lf[i]);
        expect_invalid(h, &p, "load_factor", "bad load_factor");
    }
    const double bad_zf[] = {1.0, -0.1, NAN, 2.0};
    for (size_t i = 0; i < sizeof bad_zf / sizeof bad_zf[0]; ++i) {
        cc_coll_params_t p = sketch_params(0.01, 1, 0.75);
        p.mask |= CC_COLL_PARAMS_FIELD_ZERO_FRACTION;
        p.sparsifier = CC_COLL_SPARSIFY_THRESHOLD;
        p.zero_fraction = bad_zf[i];
        expect_invalid(h, &p, "zero_fraction", "bad zero_fraction");
    }
    const int bad_sp[] = {7, -1, 2};
    for (size_t i = 0; i < sizeof bad_sp / sizeof bad_sp[0]; ++i) {
        cc_coll_params_t p = sketch_params(0.01, 1, 0.75);
        p.sparsifier = (cc_coll_sparsifier_t)bad_sp[i];
        expect_invalid(h, &p, "sparsifier", "bad sparsifier");
    }
    /* Edge values that are valid: load_factor 1, zero_fraction 0. */
    float buf[64];
    memset(buf, 0, sizeof buf);
    cc_coll_params_t p = sketch_params(0.01, 0, 1.0);
    p.mask |= CC_COLL_PARAMS_FIELD_ZERO_FRACTION;
    p.zero_fraction = 0.0;
    CHECK_CC(cc_coll_allreduce(buf, buf, 64, CC_COLL_F32, CC_COLL_SUM, &p, h, NULL));
    const cc_coll_stats_t after = get_stats(h);
    CHECK(after.calls == before.calls + 1, "rejected calls must not be counted");
    /* cc_coll_reduce_scatter checks the same fields. */
    p = sketch_params(0.01, 1, 20.0);
    const cc_coll_status_t st = cc_coll_reduce_scatter(buf, buf, 1, CC_COLL_F32, CC_COLL_SUM, &p, h, NULL);
    if (st != CC_COLL_ERR_INVALID_ARG) die("%s", "reduce_scatter with load_factor 20", (int)st);
}

/* ---- the support's two forms ------------------------------------------------------ */

static cc_coll_comm_h support_comm(const char *support)
{
    CHECK(setenv("CC_COLL_SKETCH_SUPPORT", support, 1) == 0, "setenv");
    cc_coll_comm_h c = NULL;
    CHECK_CC(cc_coll_comm_create(MPI_COMM_WORLD, &c));
    unsetenv("CC_COLL_SKETCH_SUPPORT");
    return c;
}

/* CC_COLL_SKETCH_SUPPORT=coded gives every rank the support the bitmap's OR
 * gives: the same result bits and the same residuals, for the top-k and the
 * threshold sparsifier, every dtype, with and without EF, over 3 steps; at
 * density 0.01 it sends fewer bytes (summed over the ranks). Ranks that set
 * different forms get CC_COLL_ERR_MISMATCH on every rank. */
static void test_support(cc_coll_comm_h h)
{
    (void)h;
    cc_coll_comm_h bitmap = support_comm("bitmap"), coded = support_comm("coded");
    const size_t n = 40009;
    const cc_coll_dtype_t dts[] = {CC_COLL_F32, CC_COLL_F64, CC_COLL_F16, CC_COLL_BF16};
    double *x = xmalloc(n * sizeof *x);
    unsigned char *send = xmalloc(n * 8), *a = xmalloc(n * 8), *b = xmalloc(n * 8);
    double *ea = xmalloc(n * sizeof *ea), *eb = xmalloc(n * sizeof *eb);
    unsigned long long wire[2] = {0, 0};
    for (int sparsifier = 0; sparsifier < 2; ++sparsifier)
        for (size_t di = 0; di < 4; ++di)
            for (int ef = 0; ef < 2; ++ef) {
                char desc[128];
                snprintf(desc, sizeof desc, "support: %s %s ef=%d", sparsifier ? "threshold" : "topk",
                         dtype_name(dts[di]), ef);
                g_test = desc;
                cc_coll_params_t p = keyed(sketch_params(0.01, ef, 0.75), 0x5a9 + (uint64_t)(di * 4 + ef));
                if (sparsifier) {
                    p.mask |= CC_COLL_PARAMS_FIELD_ZERO_FRACTION;
                    p.sparsifier = CC_COLL_SPARSIFY_THRESHOLD;
                    p.zero_fraction = 0.995;
                }
                uint64_t s = seed_for(g_rank, 90 + (int)di);
                const cc_coll_stats_t b0 = get_stats(bitmap), c0 = get_stats(coded);
                for (int t = 0; t < 3; ++t) {
                    /* threshold: about 1% of the elements above the ladder's top rung 0.5 */
                    for (size_t i = 0; i < n; ++i)
                        x[i] = (rng_uniform(&s) - 0.5) * (sparsifier ? (i % 97 == 0 ? 10.0 : 0.01) : 1.0 + (double)(i % 7));
                    pack(dts[di], x, n, send);
                    expect_same_on_two_comms(send, a, b, n, dts[di], t == 1 ? CC_COLL_AVG : CC_COLL_SUM, &p, bitmap,
                                             coded, t == 2, "the coded support gives other bits than the bitmap");
                }
                const cc_coll_stats_t b1 = get_stats(bitmap), c1 = get_stats(coded);
                CHECK(c1.sketch_elements - c0.sketch_elements == b1.sketch_elements - b0.sketch_elements &&
                          c1.sketch_elements > c0.sketch_elements,
                      "both forms take the sketch path with the same support");
                if (sparsifier == 0 && dts[di] == CC_COLL_F32 && ef == 1) {
                    wire[0] = b1.bytes_wire - b0.bytes_wire;
                    wire[1] = c1.bytes_wire - c0.bytes_wire;
                }
                if (ef) {
                    CHECK_CC(cc_coll_ef_get_residual(bitmap, &p, a, n, dts[di], ea));
                    CHECK_CC(cc_coll_ef_get_residual(coded, &p, b, n, dts[di], eb));
                    CHECK(memcmp(ea, eb, n * cc_coll_dtype_size(dts[di])) == 0, "the residuals differ");
                    CHECK_CC(cc_coll_ef_reset_all(bitmap));
                    CHECK_CC(cc_coll_ef_reset_all(coded));
                }
            }
    g_test = "support: wire bytes";
    unsigned long long total[2] = {0, 0};
    MPI_Allreduce(wire, total, 2, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (g_size > 1) CHECK(total[1] < total[0], "the coded support sends fewer bytes at density 0.01");
    g_test = "support: disagreement";
    if (g_size > 1) {
        cc_coll_comm_h mixed = support_comm(g_rank == 0 ? "coded" : "bitmap");
        cc_coll_params_t p = sketch_params(0.01, 0, 0.75);
        for (size_t i = 0; i < n; ++i) x[i] = (double)(i % 13);
        pack(CC_COLL_F32, x, n, send);
        memset(a, 0x3c, n * 4);
        const cc_coll_status_t st = cc_coll_allreduce(send, a, n, CC_COLL_F32, CC_COLL_SUM, &p, mixed, NULL);
        CHECK(st == CC_COLL_ERR_MISMATCH, "ranks that set different CC_COLL_SKETCH_SUPPORT get CC_COLL_ERR_MISMATCH");
        for (size_t i = 0; i < n * 4; ++i) CHECK(a[i] == 0x3c, "recvbuf was written");
        CHECK_CC(cc_coll_comm_destroy(mixed));
    }
    CHECK_CC(cc_coll_comm_destroy(bitmap));
    CHECK_CC(cc_coll_comm_destroy(coded));
    free(x);
    free(send);
    free(a);
    free(b);
    free(ea);
    free(eb);
}

/* ---- main ------------------------------------------------------------------------ */


static void setup(void)
{
    CHECK(encode16(1.0f, 10, 5) == 0x3c00 && encode16(1.0f + 3.0f / 256, 7, 8) == 0x3f82, "16-bit self test");
    /* Every setting these tests rely on comes from params. */
    unsetenv("CC_COLL_EF_MAX_BYTES");
}

static const NamedTest kTests[] = {
    {"bad_params", test_bad_params},
    {"zeros", test_zeros},
    {"density_one", test_density_one},
    {"nonfinite", test_nonfinite},
    {"overloaded", test_overloaded},
    {"lossless", test_lossless},
    {"integers", test_integers},
    {"seeds", test_seeds},
    {"half", test_half},
    {"threshold", test_threshold},
    {"convergence", test_convergence},
    {"support", test_support},
};

int main(int argc, char **argv)
{
    return run_suite(argc, argv, "sketch", kTests, sizeof kTests / sizeof kTests[0], 1, setup);
}
