/*
 * Compressed point-to-point (cc_coll_send / cc_coll_recv) with lazy error
 * propagation, with real ranks (run with 2, 3 and 4 ranks).
 *
 * Ranks are paired 0 -> 1, 2 -> 3; with an odd number of ranks a second
 * round pairs the last rank -> 0, so every rank sends or receives. The
 * receiver rebuilds the sender's data from shared seeds; the sender's LEP
 * residual travels to the receiver over plain MPI on MPI_COMM_WORLD where a
 * check needs both.
 *
 * Expectations come from the documented rules only: the message is a
 * 48-byte header plus the payload (RAW: count elements; TOPK: 16 + k (4 +
 * element size) bytes rounded up to 8; LOWRANK: (rows + cols) r elements of
 * binary32, binary64 for F64); a compressed kind that would not be smaller
 * than RAW, or a LOWRANK matrix failing (rows + cols) r rate < rows cols,
 * goes uncompressed; the receiver of a TOPK message gets the k largest |x|
 * and zeros; of a LOWRANK message P Q^T, exact for a matrix of rank <= r.
 *
 * Cases: uncompressed bit-exact for the 4 dtypes (and count 0, NONE, the
 * LOWRANK fallback); LOWRANK recovery at rank >= r and not below; the LEP
 * invariant (LOWRANK f32 / f64 near-square / bf16, TOPK); the running-sum
 * error bounded with LEP and growing without; TOPK exact; mismatches of
 * count, dtype, method, shape, rank and density; argument errors; channels
 * by tag vs by ef_key; an uncompressed send flushing the residual.
 *
 * Any failure prints the case and calls MPI_Abort (exit status non-zero).
 *
 *   mpi_p2p [TEST...]   run all tests, or only the named ones
 */
#define _POSIX_C_SOURCE 200809L /* unsetenv */

#include <float.h>
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

enum { kHeaderBytes = 48, kSideTag = 777 };

/* ---- pairs ----------------------------------------------------------------- */

typedef void (*PairFn)(cc_coll_comm_h h, int peer, int sender);

/* Runs fn on every rank that has a partner in a round: (2i -> 2i + 1), then,
 * for an odd number of ranks, (P - 1 -> 0). */
static void each_pair(cc_coll_comm_h h, PairFn fn)
{
    if (g_rank % 2 == 0 && g_rank + 1 < g_size) fn(h, g_rank + 1, 1);
    else if (g_rank % 2 == 1) fn(h, g_rank - 1, 0);
    if (g_size % 2 == 1) {
        MPI_Barrier(MPI_COMM_WORLD);
        if (g_rank == g_size - 1) fn(h, 0, 1);
        else if (g_rank == 0) fn(h, g_size - 1, 0);
    }
}

/* The sender's rank of a pair, seen from either side. */
static int sender_rank(int peer, int sender) { return sender ? g_rank : peer; }

static uint64_t data_seed(int sender, int test, int step)
{
    return 0x5eed0000ull + (uint64_t)sender * 1000003ull + (uint64_t)test * 7919ull + (uint64_t)step * 104729ull;
}

/* Uniform values in [-scale, scale], rounded to d. */
static void uniform_values(cc_coll_dtype_t d, double *x, size_t n, uint64_t seed, double scale)
{
    for (size_t i = 0; i < n; ++i) x[i] = round_to(d, (2.0 * rng_uniform(&seed) - 1.0) * scale);
}

/* ---- side channel and library state ---------------------------------------- */

static void side_send(const double *x, size_t n, int peer)
{
    CHECK(MPI_Send(x, (int)n, MPI_DOUBLE, peer, kSideTag, MPI_COMM_WORLD) == MPI_SUCCESS, "side MPI_Send");
}

static void side_recv(double *x, size_t n, int peer)
{
    CHECK(MPI_Recv(x, (int)n, MPI_DOUBLE, peer, kSideTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE) == MPI_SUCCESS,
          "side MPI_Recv");
}

static double *residual_of(cc_coll_comm_h h, int dest, int tag, const cc_coll_params_t *p, size_t n,
                           cc_coll_dtype_t d)
{
    double *e = xmalloc(n * sizeof *e);
    CHECK_CC(cc_coll_lep_get_residual(h, dest, tag, p, n, d, e));
    return e;
}

static uint64_t ef_bytes(cc_coll_comm_h h)
{
    uint64_t b = 0;
    CHECK_CC(cc_coll_ef_bytes(h, &b));
    return b;
}

static void expect_error(cc_coll_status_t got, cc_coll_status_t want, const char *must_contain, const char *what)
{
    if (got != want) {
        fprintf(stderr, "[rank %d] FAIL in %s: %s: got %s, expected %s (%s)\n", g_rank, g_test, what,
                cc_coll_status_string(got), cc_coll_status_string(want), cc_coll_last_error());
        fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (must_contain != NULL && strstr(cc_coll_last_error(), must_contain) == NULL) {
        fprintf(stderr, "[rank %d] FAIL in %s: %s: message \"%s\" does not name \"%s\"\n", g_rank, g_test, what,
                cc_coll_last_error(), must_contain);
        fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

/* ---- params ------------------------------------------------------------------ */

/* LOWRANK with every field the tests rely on set (none from the
 * environment). rows == 0: no shape (near-square). */
static cc_coll_params_t lr_params(uint64_t rows, uint64_t cols, int rank, int ef)
{
    cc_coll_params_t p = method_params(CC_COLL_METHOD_LOWRANK);
    p.mask |= CC_COLL_PARAMS_FIELD_RANK | CC_COLL_PARAMS_FIELD_EF | CC_COLL_PARAMS_FIELD_WARM_START |
              CC_COLL_PARAMS_FIELD_SEED | CC_COLL_PARAMS_FIELD_MIN_COMPRESSION_RATE;
    p.rank = rank;
    p.ef = ef;
    p.warm_start = 1;
    p.seed = 12345;
    p.min_compression_rate = 2.0;
    if (rows != 0) {
        p.mask |= CC_COLL_PARAMS_FIELD_SHAPE;
        p.rows = rows;
        p.cols = cols;
    }
    return p;
}

/* ---- one message ---------------------------------------------------------------- */

/* Sends x (n values representable in d) and returns the status; counts
 * nothing. */
static cc_coll_status_t send_values(cc_coll_comm_h h, const double *x, size_t n, cc_coll_dtype_t d, int dest, int tag,
                                    int compress, const cc_coll_params_t *p)
{
    void *buf = xmalloc(n * cc_coll_dtype_size(d));
    pack(d, x, n, buf);
    const cc_coll_status_t st = cc_coll_send(buf, n, d, dest, tag, compress, p, h, NULL);
    free(buf);
    return st;
}

/* Receives n values of d into out (as doubles). */
static void recv_values(cc_coll_comm_h h, double *out, size_t n, cc_coll_dtype_t d, int source, int tag,
                        const cc_coll_params_t *p)
{
    void *buf = xmalloc(n * cc_coll_dtype_size(d));
    CHECK_CC(cc_coll_recv(buf, n, d, source, tag, p, h, NULL));
    for (size_t i = 0; i < n; ++i) out[i] = element(d, buf, i);
    free(buf);
}

/* =============================================================================
 * 1. Uncompressed: bit-exact for every dtype; count 0; NONE; the LOWRANK
 *    fallback for a matrix too small to compress; sender statistics.
 * ============================================================================= */

static void raw_pair(cc_coll_comm_h h, int peer, int sender)
{
    const cc_coll_dtype_t dtypes[4] = {CC_COLL_F32, CC_COLL_F64, CC_COLL_F16, CC_COLL_BF16};
    const size_t n = 1000;
    const int src = sender_rank(peer, sender);
    double *x = xmalloc(n * sizeof *x);
    for (int di = 0; di < 4; ++di) {
        const cc_coll_dtype_t d = dtypes[di];
        const size_t es = cc_coll_dtype_size(d);
        random_values(d, x, n, data_seed(src, 1, di), 12);
        x[0] = -0.0;
        x[1] = INFINITY;
        x[2] = -INFINITY;
        void *want = xmalloc(n * es), *got = xmalloc(n * es);
        pack(d, x, n, want);
        /* compress = 0, then compress = 1 with NONE, then LOWRANK on a 2 x 500
         * matrix at rank 1: (2 + 500) x 1 x 2 >= 1000, so it goes uncompressed. */
        const cc_coll_params_t none = method_params(CC_COLL_METHOD_NONE);
        const cc_coll_params_t small = lr_params(2, 0, 1, 1);
        const cc_coll_params_t *ps[3] = {NULL, &none, &small};
        for (int v = 0; v < 3; ++v) {
            const int tag = 10 + 3 * di + v;
            if (sender) {
                const uint64_t bytes0 = ef_bytes(h);
                const cc_coll_stats_t s0 = get_stats(h);
                CHECK_CC(cc_coll_send(want, n, d, peer, tag, v == 0 ? 0 : 1, ps[v], h, NULL));
                const cc_coll_stats_t s1 = get_stats(h);
                CHECK(s1.calls == s0.calls + 1, "a send counts one call");
                CHECK(s1.bytes_uncompressed - s0.bytes_uncompressed == n * es, "bytes_uncompressed = count x size");
                CHECK(s1.bytes_wire - s0.bytes_wire == kHeaderBytes + n * es,
                      "uncompressed message = 48-byte header + count elements");
                CHECK(ef_bytes(h) == bytes0, "an uncompressed send creates no residual");
            } else {
                const cc_coll_stats_t s0 = get_stats(h);
                memset(got, 0x5a, n * es);
                CHECK_CC(cc_coll_recv(got, n, d, peer, tag, ps[v], h, NULL));
                expect_equal(d, got, want, n, dtype_name(d));
                const cc_coll_stats_t s1 = get_stats(h);
                CHECK(s1.calls == s0.calls && s1.bytes_wire == s0.bytes_wire,
                      "a receive counts no call and no wire bytes");
            }
        }
        free(want);
        free(got);
    }
    /* count 0: a header-only message, buffers may be NULL, any method. */
    const cc_coll_params_t lr = lr_params(0, 0, 2, 1);
    if (sender) {
        const cc_coll_stats_t s0 = get_stats(h);
        CHECK_CC(cc_coll_send(NULL, 0, CC_COLL_F32, peer, 40, 1, &lr, h, NULL));
        CHECK(get_stats(h).bytes_wire - s0.bytes_wire == kHeaderBytes, "count 0 sends the header only");
    } else {
        CHECK_CC(cc_coll_recv(NULL, 0, CC_COLL_F32, peer, 40, &lr, h, NULL));
    }
    free(x);
}

static void test_raw(cc_coll_comm_h h) { each_pair(h, raw_pair); }

/* =============================================================================
 * 2. LOWRANK of a rank-2 matrix: recovered at rank 2 (Gram-Schmidt) and 4
 *    (QR), not at rank 1. EF off, so every send stands alone.
 * ============================================================================= */

/* M = A B^T, rows x cols, A and B uniform in [-1, 1] with `r` columns. */
static void low_rank_matrix(double *m, size_t rows, size_t cols, int r, uint64_t seed)
{
    double *a = xmalloc(rows * (size_t)r * sizeof *a), *b = xmalloc(cols * (size_t)r * sizeof *b);
    uniform_values(CC_COLL_F64, a, rows * (size_t)r, seed, 1.0);
    uniform_values(CC_COLL_F64, b, cols * (size_t)r, seed + 1, 1.0);
    for (size_t i = 0; i < rows; ++i)
        for (size_t j = 0; j < cols; ++j) {
            double s = 0;
            for (int k = 0; k < r; ++k) s += a[i * (size_t)r + (size_t)k] * b[j * (size_t)r + (size_t)k];
            m[i * cols + j] = s;
        }
    free(a);
    free(b);
}

static void lowrank_exact_pair(cc_coll_comm_h h, int peer, int sender)
{
    const size_t rows = 48, cols = 40, n = rows * cols;
    const int true_rank = 2;
    const cc_coll_dtype_t dtypes[3] = {CC_COLL_F32, CC_COLL_F64, CC_COLL_F16};
    const int ranks[3] = {1, 2, 4};
    const int src = sender_rank(peer, sender);
    double *m = xmalloc(n * sizeof *m), *got = xmalloc(n * sizeof *got);
    for (int di = 0; di < 3; ++di) {
        const cc_coll_dtype_t d = dtypes[di];
        low_rank_matrix(m, rows, cols, true_rank, data_seed(src, 2, di));
        double mmax = 0, mnorm = 0;
        for (size_t i = 0; i < n; ++i) {
            m[i] = round_to(d, m[i]);
            mmax = fmax(mmax, fabs(m[i]));
            mnorm += m[i] * m[i];
        }
        for (int ri = 0; ri < 3; ++ri) {
            const int r = ranks[ri];
            const int tag = 50 + 3 * di + ri;
            const cc_coll_params_t p = lr_params(rows, 0, r, 0);
            if (sender) {
                const cc_coll_stats_t s0 = get_stats(h);
                CHECK_CC(send_values(h, m, n, d, peer, tag, 1, &p));
                const size_t w = d == CC_COLL_F64 ? 8 : 4;
                CHECK(get_stats(h).bytes_wire - s0.bytes_wire == kHeaderBytes + (rows + cols) * (size_t)r * w,
                      "LOWRANK message = header + P and Q in the work type");
                double *e = residual_of(h, peer, tag, &p, n, d);
                for (size_t i = 0; i < n; ++i) CHECK(e[i] == 0.0, "EF off: the channel keeps no residual");
                free(e);
            } else {
                recv_values(h, got, n, d, peer, tag, &p);
                double worst = 0, err2 = 0;
                for (size_t i = 0; i < n; ++i) {
                    worst = fmax(worst, fabs(got[i] - m[i]));
                    err2 += (got[i] - m[i]) * (got[i] - m[i]);
                }
                /* f16: M rounded to f16 is only near rank 2, and one power
                 * step finds its subspace up to that noise. */
                const double tol = d == CC_COLL_F64 ? 1e-12 : d == CC_COLL_F32 ? 1e-5 : 2e-2;
                if (r >= true_rank) {
                    if (!(worst <= tol * mmax)) {
                        fprintf(stderr, "[rank %d] %s: %s rank %d: max |P Q^T - M| = %.3g > %.3g\n", g_rank, g_test,
                                dtype_name(d), r, worst, tol * mmax);
                        die("%s", "a rank-2 matrix is not recovered at rank >= 2", 0);
                    }
                } else {
                    CHECK(sqrt(err2 / mnorm) > 0.05, "a rank-2 matrix must not be recovered at rank 1");
                }
            }
        }
    }
    free(m);
    free(got);
}

static void test_lowrank_exact(cc_coll_comm_h h) { each_pair(h, lowrank_exact_pair); }

/* =============================================================================
 * 3. The LEP invariant: sum of what the receiver got + the sender's final
 *    residual == sum of what was sent, over T steps.
 * ============================================================================= */

typedef struct {
    const char *name;
    cc_coll_dtype_t d;
    cc_coll_params_t p;
    size_t n;
    size_t max_wire; /* the compressed message's size, header included */
} LepCase;

static LepCase g_lep_case;

static void lep_invariant_pair(cc_coll_comm_h h, int peer, int sender)
{
    const LepCase *c = &g_lep_case;
    const size_t n = c->n;
    const int T = 30, tag = 100;
    const int src = sender_rank(peer, sender);
    double *x = xmalloc(n * sizeof *x), *got = xmalloc(n * sizeof *got);
    double *sum_sent = calloc(n, sizeof(double)), *sum_recv = calloc(n, sizeof(double));
    CHECK(sum_sent && sum_recv, "calloc");
    double xmax = 0;
    for (int t = 0; t < T; ++t) {
        uniform_values(c->d, x, n, data_seed(src, 3, t), 1.0 + (double)(t % 3));
        for (size_t i = 0; i < n; ++i) {
            sum_sent[i] += x[i];
            xmax = fmax(xmax, fabs(x[i]));
        }
        if (sender) {
            const cc_coll_stats_t s0 = get_stats(h);
            CHECK_CC(send_values(h, x, n, c->d, peer, tag, 1, &c->p));
            CHECK(get_stats(h).bytes_wire - s0.bytes_wire <= c->max_wire, "the message was compressed");
        } else {
            recv_values(h, got, n, c->d, peer, tag, &c->p);
            for (size_t i = 0; i < n; ++i) sum_recv[i] += got[i];
        }
    }
    if (sender) {
        double *e = residual_of(h, peer, tag, &c->p, n, c->d);
        side_send(e, n, peer);
        free(e);
    } else {
        double *e = xmalloc(n * sizeof *e);
        side_recv(e, n, peer);
        const double eps = c->d == CC_COLL_F64 ? DBL_EPSILON : FLT_EPSILON;
        const double tol = 64.0 * eps * xmax * (double)T;
        double worst = 0, without_e = 0;
        size_t wi = 0;
        for (size_t i = 0; i < n; ++i) {
            CHECK(isfinite(e[i]), "residual is not finite");
            const double err = fabs(sum_recv[i] + e[i] - sum_sent[i]);
            if (err > worst) {
                worst = err;
                wi = i;
            }
            without_e = fmax(without_e, fabs(sum_recv[i] - sum_sent[i]));
        }
        if (worst > tol) {
            fprintf(stderr, "[rank %d] %s (%s): at %zu: received %.17g + residual %.17g != sent %.17g (%.3g > %.3g)\n",
                    g_rank, g_test, c->name, wi, sum_recv[wi], e[wi], sum_sent[wi], worst, tol);
            die("%s", "LEP invariant", 0);
        }
        CHECK(without_e > 100 * tol, "LEP invariant: the residual is suspiciously small (nothing was compressed?)");
        free(e);
    }
    CHECK_CC(cc_coll_lep_reset(h, peer, tag, &c->p));
    free(x);
    free(got);
    free(sum_sent);
    free(sum_recv);
}

static void test_lep_invariant(cc_coll_comm_h h)
{
    LepCase cases[4];
    /* 40 x 30 at rank 2: (40 + 30) x 2 binary32. */
    cases[0] = (LepCase){"lowrank f32 40x30", CC_COLL_F32, lr_params(40, 30, 2, 1), 1200,
                         kHeaderBytes + 70 * 2 * 4};
    /* 1000 elements with no shape: 32 x 32 with 24 zeros of padding. */
    cases[1] = (LepCase){"lowrank f64 near-square", CC_COLL_F64, lr_params(0, 0, 3, 1), 1000,
                         kHeaderBytes + 64 * 3 * 8};
    /* The bf16 rounding of P Q^T belongs in the residual too. */
    cases[2] = (LepCase){"lowrank bf16 30x40", CC_COLL_BF16, lr_params(30, 0, 2, 1), 1200,
                         kHeaderBytes + 70 * 2 * 4};
    cases[3] = (LepCase){"topk f32 0.05", CC_COLL_F32, topk_params(0.05, 1), 2000,
                         kHeaderBytes + payload_bytes(100, 4)};
    for (int i = 0; i < 4; ++i) {
        g_lep_case = cases[i];
        each_pair(h, lep_invariant_pair);
    }
}

/* =============================================================================
 * 4. With LEP the running-sum error ||sum sent - sum received|| is the
 *    residual and stays bounded; without it, the error of a persistent
 *    full-rank component piles up linearly.
 * ============================================================================= */

static double g_err[2][2]; /* [ef][t == 200] */

static void bounded_pair(cc_coll_comm_h h, int peer, int sender)
{
    const size_t rows = 32, cols = 32, n = rows * cols;
    const int T = 200;
    const int src = sender_rank(peer, sender);
    double *base = xmalloc(n * sizeof *base), *x = xmalloc(n * sizeof *x), *got = xmalloc(n * sizeof *got);
    double *diff = xmalloc(n * sizeof *diff);
    uniform_values(CC_COLL_F32, base, n, data_seed(src, 4, 0), 1.0);
    for (int ef = 0; ef <= 1; ++ef) {
        const cc_coll_params_t p = lr_params(rows, cols, 2, ef);
        const int tag = 200 + ef;
        memset(diff, 0, n * sizeof *diff);
        for (int t = 1; t <= T; ++t) {
            uniform_values(CC_COLL_F32, x, n, data_seed(src, 4, t), 0.25);
            for (size_t i = 0; i < n; ++i) x[i] = (double)(float)(base[i] + x[i]);
            if (sender) {
                CHECK_CC(send_values(h, x, n, CC_COLL_F32, peer, tag, 1, &p));
            } else {
                recv_values(h, got, n, CC_COLL_F32, peer, tag, &p);
                double s = 0;
                for (size_t i = 0; i < n; ++i) {
                    diff[i] += x[i] - got[i];
                    s += diff[i] * diff[i];
                }
                if (t == 50) g_err[ef][0] = sqrt(s);
                if (t == 200) g_err[ef][1] = sqrt(s);
            }
        }
        CHECK_CC(cc_coll_lep_reset(h, peer, tag, &p));
    }
    if (!sender) {
        const double *on = g_err[1], *off = g_err[0];
        printf("  [rank %d] running-sum error: LEP %.3g (T=50) %.3g (T=200); no LEP %.3g (T=50) %.3g (T=200)\n",
               g_rank, on[0], on[1], off[0], off[1]);
        CHECK(on[1] < 1.5 * on[0], "LEP: the running-sum error must stay bounded (T=200 vs T=50)");
        CHECK(off[1] > 3.0 * off[0], "no LEP: the running-sum error must grow about linearly (T=200 vs T=50)");
        CHECK(off[1] > 10.0 * on[1], "LEP must beat no LEP by far at T=200");
    }
    free(base);
    free(x);
    free(got);
    free(diff);
}

static void test_lep_bounded(cc_coll_comm_h h) { each_pair(h, bounded_pair); }

/* =============================================================================
 * 5. TOPK: density 1 is exact (uncompressed: the pairs would outweigh the
 *    buffer); at density 0.1 the receiver gets exactly the top k and zeros.
 * ============================================================================= */

static void topk_pair(cc_coll_comm_h h, int peer, int sender)
{
    const cc_coll_dtype_t dtypes[2] = {CC_COLL_F32, CC_COLL_F16};
    const size_t n = 3000;
    const int src = sender_rank(peer, sender);
    double *x = xmalloc(n * sizeof *x);
    unsigned char *kept = xmalloc(n);
    for (int di = 0; di < 2; ++di) {
        const cc_coll_dtype_t d = dtypes[di];
        const size_t es = cc_coll_dtype_size(d);
        random_values(d, x, n, data_seed(src, 5, di), 8);
        void *want = xmalloc(n * es), *got = xmalloc(n * es);
        const double densities[2] = {1.0, 0.1};
        for (int v = 0; v < 2; ++v) {
            const cc_coll_params_t p = topk_params(densities[v], 1);
            const int tag = 300 + 2 * di + v;
            const size_t k = k_for(densities[v], n);
            double *w = xmalloc(n * sizeof *w);
            reference_topk(x, n, k, kept);
            for (size_t i = 0; i < n; ++i) w[i] = kept[i] ? x[i] : 0.0;
            pack(d, w, n, want);
            if (sender) {
                const cc_coll_stats_t s0 = get_stats(h);
                CHECK_CC(send_values(h, x, n, d, peer, tag, 1, &p));
                const size_t wire = v == 0 ? n * es : payload_bytes(k, es);
                CHECK(get_stats(h).bytes_wire - s0.bytes_wire == kHeaderBytes + wire,
                      "TOPK message: pairs when smaller than the buffer, else uncompressed");
                /* The residual is what was not sent. */
                double *e = residual_of(h, peer, tag, &p, n, d);
                for (size_t i = 0; i < n; ++i)
                    CHECK(e[i] == (kept[i] ? 0.0 : x[i]), "TOPK residual = the unsent elements");
                free(e);
                CHECK_CC(cc_coll_lep_reset(h, peer, tag, &p));
            } else {
                memset(got, 0x33, n * es);
                CHECK_CC(cc_coll_recv(got, n, d, peer, tag, &p, h, NULL));
                expect_equal(d, got, want, n, v == 0 ? "TOPK density 1" : "TOPK density 0.1");
            }
            free(w);
        }
        free(want);
        free(got);
    }
    free(x);
    free(kept);
}

static void test_topk(cc_coll_comm_h h) { each_pair(h, topk_pair); }

/* =============================================================================
 * 6. Mismatches: the receiver's count, dtype, method, shape, rank or density
 *    differs. Both sides get CC_COLL_ERR_MISMATCH naming both values; the
 *    receive buffer is untouched, the sender's residual unchanged, and the
 *    channel works afterwards (the LEP invariant over the accepted sends).
 * ============================================================================= */

typedef struct {
    const char *what;
    size_t count;
    cc_coll_dtype_t d;
    cc_coll_params_t p;
    const char *sender_says[2];  /* substrings of the sender's message */
} Variant;

static void mismatch_pair(cc_coll_comm_h h, int peer, int sender)
{
    const size_t rows = 32, cols = 24, n = rows * cols;
    const int tag = 400;
    const int src = sender_rank(peer, sender);
    const cc_coll_params_t lr = lr_params(rows, 0, 2, 1);
    Variant v[6] = {
        {"count", n - 1, CC_COLL_F32, lr, {"768 f32", "767 f32"}},
        {"dtype", n, CC_COLL_F64, lr, {"768 f32", "768 f64"}},
        {"method", n, CC_COLL_F32, topk_params(0.1, 1), {"LOWRANK", "topk"}},
        {"shape", n, CC_COLL_F32, lr_params(24, 0, 2, 1), {"32 x 24", "24 x 32"}},
        {"rank", n, CC_COLL_F32, lr_params(rows, 0, 3, 1), {"rank 2", "rank 3"}},
        {"invalid shape", n, CC_COLL_F32, lr_params(7, 0, 2, 1), {"rows = 7", "does not divide"}},
    };
    double *x = xmalloc(n * sizeof *x), *got = xmalloc(n * sizeof *got);
    double *sum_sent = calloc(n, sizeof(double)), *sum_recv = calloc(n, sizeof(double));
    unsigned char *rbuf = xmalloc(n * 8), *sentinel = xmalloc(n * 8);
    memset(sentinel, 0xab, n * 8);
    CHECK(sum_sent && sum_recv, "calloc");
    int step = 0;
    /* An accepted send (the first gives the channel a residual). */
#define ACCEPTED_SEND()                                                                        \
    do {                                                                                       \
        uniform_values(CC_COLL_F32, x, n, data_seed(src, 6, step++), 1.0);                     \
        for (size_t i = 0; i < n; ++i) sum_sent[i] += x[i];                                    \
        if (sender) {                                                                          \
            CHECK_CC(send_values(h, x, n, CC_COLL_F32, peer, tag, 1, &lr));                    \
        } else {                                                                               \
            recv_values(h, got, n, CC_COLL_F32, peer, tag, &lr);                               \
            for (size_t i = 0; i < n; ++i) sum_recv[i] += got[i];                              \
        }                                                                                      \
    } while (0)
    ACCEPTED_SEND();
    for (int c = 0; c < 6; ++c) {
        char what[96];
        snprintf(what, sizeof what, "%s mismatch", v[c].what);
        uniform_values(CC_COLL_F32, x, n, data_seed(src, 60, c), 1.0);
        if (sender) {
            double *e0 = residual_of(h, peer, tag, &lr, n, CC_COLL_F32);
            const uint64_t b0 = ef_bytes(h);
            const cc_coll_stats_t s0 = get_stats(h);
            const cc_coll_status_t st = send_values(h, x, n, CC_COLL_F32, peer, tag, 1, &lr);
            expect_error(st, CC_COLL_ERR_MISMATCH, v[c].sender_says[0], what);
            expect_error(st, CC_COLL_ERR_MISMATCH, v[c].sender_says[1], what);
            double *e1 = residual_of(h, peer, tag, &lr, n, CC_COLL_F32);
            CHECK(memcmp(e0, e1, n * sizeof *e0) == 0, "a rejected send leaves the residual as it was");
            CHECK(ef_bytes(h) == b0, "a rejected send leaves the residual memory as it was");
            CHECK(get_stats(h).calls == s0.calls, "a rejected send is not counted");
            free(e0);
            free(e1);
        } else {
            const size_t bytes = v[c].count * cc_coll_dtype_size(v[c].d);
            memcpy(rbuf, sentinel, n * 8);
            const cc_coll_status_t st = cc_coll_recv(rbuf, v[c].count, v[c].d, peer, tag, &v[c].p, h, NULL);
            expect_error(st, CC_COLL_ERR_MISMATCH, v[c].sender_says[1], what);
            CHECK(memcmp(rbuf, sentinel, bytes) == 0, "a rejected message leaves the receive buffer untouched");
        }
        ACCEPTED_SEND(); /* the channel still works */
    }
#undef ACCEPTED_SEND
    /* Only the accepted sends count: received + residual == sent. */
    if (sender) {
        double *e = residual_of(h, peer, tag, &lr, n, CC_COLL_F32);
        side_send(e, n, peer);
        free(e);
    } else {
        double *e = xmalloc(n * sizeof *e);
        side_recv(e, n, peer);
        for (size_t i = 0; i < n; ++i)
            CHECK(fabs(sum_recv[i] + e[i] - sum_sent[i]) <= 1e-4, "LEP invariant over the accepted sends");
        free(e);
    }

    /* TOPK density mismatch on a fresh channel: the rejected first send must
     * not leave a residual behind. */
    const cc_coll_params_t tk = topk_params(0.1, 1), tk2 = topk_params(0.2, 1);
    if (sender) {
        const uint64_t b0 = ef_bytes(h);
        expect_error(send_values(h, x, n, CC_COLL_F32, peer, tag + 1, 1, &tk), CC_COLL_ERR_MISMATCH, "density",
                     "density mismatch");
        CHECK(strstr(cc_coll_last_error(), "k = 77") && strstr(cc_coll_last_error(), "k = 154"),
              "the density mismatch names both k");
        CHECK(ef_bytes(h) == b0, "a rejected first send leaves no residual");
        double *e = residual_of(h, peer, tag + 1, &tk, n, CC_COLL_F32);
        for (size_t i = 0; i < n; ++i) CHECK(e[i] == 0.0, "a rejected first send leaves no residual");
        free(e);
    } else {
        memcpy(rbuf, sentinel, n * 8);
        expect_error(cc_coll_recv(rbuf, n, CC_COLL_F32, peer, tag + 1, &tk2, h, NULL), CC_COLL_ERR_MISMATCH, "density",
                     "density mismatch");
        CHECK(memcmp(rbuf, sentinel, n * 4) == 0, "a rejected message leaves the receive buffer untouched");
    }
    CHECK_CC(cc_coll_ef_reset_all(h));
    free(x);
    free(got);
    free(sum_sent);
    free(sum_recv);
    free(rbuf);
    free(sentinel);
}

static void test_mismatch(cc_coll_comm_h h) { each_pair(h, mismatch_pair); }

/* =============================================================================
 * 7. Argument errors, detected locally before any message: every rank alone.
 * ============================================================================= */

static void test_bad_args(cc_coll_comm_h h)
{
    const int peer = (g_rank + 1) % g_size;
    float buf[16] = {0};
    const cc_coll_stats_t s0 = get_stats(h);
    int ub = 0;
    CHECK_CC(cc_coll_p2p_tag_ub(h, &ub));
    int *mpi_ub = NULL, flag = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &mpi_ub, &flag);
    CHECK(flag && ub == (*mpi_ub - 1) / 2 && ub >= 16383, "cc_coll_p2p_tag_ub = (MPI_TAG_UB - 1) / 2");
    expect_error(cc_coll_p2p_tag_ub(h, NULL), CC_COLL_ERR_INVALID_ARG, "tag_ub", "tag_ub NULL");

    const cc_coll_params_t lr = lr_params(4, 0, 1, 1);
    expect_error(cc_coll_send(buf, 16, CC_COLL_F32, peer, ub + 1, 1, &lr, h, NULL), CC_COLL_ERR_INVALID_ARG, "tag",
                 "send tag above the bound");
    expect_error(cc_coll_send(buf, 16, CC_COLL_F32, peer, -1, 1, &lr, h, NULL), CC_COLL_ERR_INVALID_ARG, "tag = -1",
                 "send tag -1");
    expect_error(cc_coll_recv(buf, 16, CC_COLL_F32, peer, ub + 1, &lr, h, NULL), CC_COLL_ERR_INVALID_ARG, "tag",
                 "recv tag above the bound");
    expect_error(cc_coll_recv(buf, 16, CC_COLL_F32, peer, MPI_ANY_TAG, &lr, h, NULL), CC_COLL_ERR_INVALID_ARG, "tag",
                 "recv MPI_ANY_TAG");
    expect_error(cc_coll_send(buf, 16, CC_COLL_F32, g_rank, 0, 1, &lr, h, NULL), CC_COLL_ERR_INVALID_ARG, "dest",
                 "send to oneself");
    expect_error(cc_coll_send(buf, 16, CC_COLL_F32, g_size, 0, 1, &lr, h, NULL), CC_COLL_ERR_INVALID_ARG, "dest",
                 "dest = size");
    expect_error(cc_coll_send(buf, 16, CC_COLL_F32, MPI_PROC_NULL, 0, 1, &lr, h, NULL), CC_COLL_ERR_INVALID_ARG,
                 "dest", "dest = MPI_PROC_NULL");
    expect_error(cc_coll_recv(buf, 16, CC_COLL_F32, MPI_ANY_SOURCE, 0, &lr, h, NULL), CC_COLL_ERR_INVALID_ARG,
                 "source = MPI_ANY_SOURCE", "recv from MPI_ANY_SOURCE");
    expect_error(cc_coll_recv(buf, 16, CC_COLL_F32, g_rank, 0, &lr, h, NULL), CC_COLL_ERR_INVALID_ARG, "source",
                 "recv from oneself");
    const cc_coll_params_t sk = method_params(CC_COLL_METHOD_SKETCH);
    expect_error(cc_coll_send(buf, 16, CC_COLL_F32, peer, 0, 1, &sk, h, NULL), CC_COLL_ERR_NOT_SUPPORTED, "sketch",
                 "SKETCH compress");
    expect_error(cc_coll_send(buf, 16, CC_COLL_F32, peer, 0, 2, &lr, h, NULL), CC_COLL_ERR_INVALID_ARG, "compress",
                 "compress = 2");
    expect_error(cc_coll_send(NULL, 16, CC_COLL_F32, peer, 0, 1, &lr, h, NULL), CC_COLL_ERR_NULL_BUFFER, "buf",
                 "NULL buffer");
    expect_error(cc_coll_recv(NULL, 16, CC_COLL_F32, peer, 0, &lr, h, NULL), CC_COLL_ERR_NULL_BUFFER, "buf",
                 "recv NULL buffer");
    expect_error(cc_coll_send(buf, 16, (cc_coll_dtype_t)9, peer, 0, 1, &lr, h, NULL), CC_COLL_ERR_INVALID_DTYPE,
                 "dtype", "bad dtype");
    expect_error(cc_coll_send(buf, (size_t)INT_MAX, CC_COLL_F32, peer, 0, 0, NULL, h, NULL), CC_COLL_ERR_COUNT_OVERFLOW,
                 "count", "count overflow");
    if (fake_stream_status() != CC_COLL_OK)
        expect_error(cc_coll_send(buf, 16, CC_COLL_F32, peer, 0, 1, &lr, h, (void *)buf), fake_stream_status(),
                     "stream", "made-up stream");
    expect_error(cc_coll_send(buf, 16, CC_COLL_F32, peer, 0, 1, &lr, NULL, NULL), CC_COLL_ERR_INVALID_COMM, "comm",
                 "NULL comm");
    const cc_coll_params_t bad_shape = lr_params(5, 0, 1, 1); /* 5 does not divide 16 */
    expect_error(cc_coll_send(buf, 16, CC_COLL_F32, peer, 0, 1, &bad_shape, h, NULL), CC_COLL_ERR_INVALID_ARG,
                 "does not divide", "LOWRANK shape");
    cc_coll_params_t unknown = lr;
    unknown.mask |= 1ull << 62;
    expect_error(cc_coll_send(buf, 16, CC_COLL_F32, peer, 0, 1, &unknown, h, NULL), CC_COLL_ERR_INVALID_PARAMS, "mask",
                 "unknown mask bits");
    double e[16];
    expect_error(cc_coll_lep_get_residual(h, g_rank, 0, NULL, 16, CC_COLL_F32, e), CC_COLL_ERR_INVALID_ARG, "dest",
                 "lep_get_residual of oneself");
    expect_error(cc_coll_lep_get_residual(h, peer, ub + 1, NULL, 16, CC_COLL_F32, e), CC_COLL_ERR_INVALID_ARG, "tag",
                 "lep_get_residual tag");
    expect_error(cc_coll_lep_reset(h, g_size, 0, NULL), CC_COLL_ERR_INVALID_ARG, "dest", "lep_reset dest");
    /* Nothing above reached the wire or the store. */
    const cc_coll_stats_t s1 = get_stats(h);
    CHECK(s1.calls == s0.calls && s1.bytes_wire == s0.bytes_wire, "argument errors send nothing");
    CHECK(ef_bytes(h) == 0, "argument errors leave no residual");
}

/* =============================================================================
 * 8. Channels: (dest, tag) and (dest, ef_key) are separate residuals even
 *    with the same number; an ef_key channel ignores the tag; interleaved
 *    sends on other channels leave a channel's LEP invariant intact;
 *    cc_coll_ef_bytes counts LEP residuals; lep_reset drops one.
 * ============================================================================= */

static void channels_pair(cc_coll_comm_h h, int peer, int sender)
{
    const size_t n = 600; /* 30 x 20 */
    const int T = 8;
    const int src = sender_rank(peer, sender);
    /* A: tag 500. B: ef_key 500 sent on tag 501. C: tag 502. */
    const cc_coll_params_t pa = lr_params(30, 0, 2, 1);
    const cc_coll_params_t pb = keyed(lr_params(30, 0, 2, 1), 500);
    const cc_coll_params_t pc = topk_params(0.05, 1);
    double *x = xmalloc(n * sizeof *x), *got = xmalloc(n * sizeof *got);
    double *sum_sent = calloc(n, sizeof(double)), *sum_recv = calloc(n, sizeof(double));
    CHECK(sum_sent && sum_recv, "calloc");
    const uint64_t b0 = ef_bytes(h);
    for (int t = 0; t < T; ++t) {
        for (int ch = 0; ch < 3; ++ch) {
            const cc_coll_params_t *p = ch == 0 ? &pa : ch == 1 ? &pb : &pc;
            const int tag = 500 + ch;
            uniform_values(CC_COLL_F32, x, n, data_seed(src, 8, 3 * t + ch), 1.0);
            if (ch == 0)
                for (size_t i = 0; i < n; ++i) sum_sent[i] += x[i];
            if (sender) {
                CHECK_CC(send_values(h, x, n, CC_COLL_F32, peer, tag, 1, p));
            } else {
                recv_values(h, got, n, CC_COLL_F32, peer, tag, p);
                if (ch == 0)
                    for (size_t i = 0; i < n; ++i) sum_recv[i] += got[i];
            }
        }
    }
    if (sender) {
        CHECK(ef_bytes(h) - b0 == 3 * n * sizeof(float), "three channels, three f32 residuals in cc_coll_ef_bytes");
        double *ea = residual_of(h, peer, 500, &pa, n, CC_COLL_F32);
        double *eb = residual_of(h, peer, 500, &pb, n, CC_COLL_F32);     /* ef_key 500: the tag is ignored */
        double *eb2 = residual_of(h, peer, 12345, &pb, n, CC_COLL_F32);
        double *ec = residual_of(h, peer, 502, NULL, n, CC_COLL_F32);    /* tag 502, no key */
        CHECK(memcmp(eb, eb2, n * sizeof *eb) == 0, "an ef_key channel does not depend on the tag");
        double na = 0, nb = 0, nab = 0, nc = 0;
        for (size_t i = 0; i < n; ++i) {
            na += ea[i] * ea[i];
            nb += eb[i] * eb[i];
            nc += ec[i] * ec[i];
            nab += (ea[i] - eb[i]) * (ea[i] - eb[i]);
        }
        CHECK(na > 0 && nb > 0 && nc > 0, "each channel holds a residual");
        CHECK(nab > 1e-3 * na, "tag 500 and ef_key 500 are different channels");
        /* A residual of another count or dtype is a mismatch. */
        expect_error(cc_coll_lep_get_residual(h, peer, 500, &pa, n - 1, CC_COLL_F32, ea), CC_COLL_ERR_MISMATCH, "600",
                     "lep_get_residual count");
        side_send(ea, n, peer);
        /* Reset drops B only. */
        CHECK_CC(cc_coll_lep_reset(h, peer, 0, &pb));
        CHECK(ef_bytes(h) - b0 == 2 * n * sizeof(float), "lep_reset frees the channel's residual");
        double *eb3 = residual_of(h, peer, 501, &pb, n, CC_COLL_F32);
        double *ea2 = residual_of(h, peer, 500, &pa, n, CC_COLL_F32);
        for (size_t i = 0; i < n; ++i) CHECK(eb3[i] == 0.0, "a reset channel has a zero residual");
        CHECK(memcmp(ea, ea2, n * sizeof *ea) == 0, "resetting one channel leaves the others");
        free(ea);
        free(eb);
        free(eb2);
        free(ec);
        free(eb3);
        free(ea2);
    } else {
        double *e = xmalloc(n * sizeof *e);
        side_recv(e, n, peer);
        for (size_t i = 0; i < n; ++i)
            CHECK(fabs(sum_recv[i] + e[i] - sum_sent[i]) <= 1e-4,
                  "LEP invariant of channel A with B and C interleaved");
        free(e);
    }
    CHECK_CC(cc_coll_ef_reset_all(h));
    free(x);
    free(got);
    free(sum_sent);
    free(sum_recv);
}

static void test_channels(cc_coll_comm_h h) { each_pair(h, channels_pair); }

/* =============================================================================
 * 9. An uncompressed send flushes the residual: the receiver gets g + e and
 *    the residual keeps only the rounding to the dtype (none for f32).
 * ============================================================================= */

static void flush_pair(cc_coll_comm_h h, int peer, int sender)
{
    const size_t n = 900; /* 30 x 30 */
    const int tag = 600;
    const int src = sender_rank(peer, sender);
    const cc_coll_dtype_t dtypes[2] = {CC_COLL_F32, CC_COLL_BF16};
    double *x = xmalloc(n * sizeof *x), *got = xmalloc(n * sizeof *got);
    double *sum_sent = xmalloc(n * sizeof *sum_sent), *sum_recv = xmalloc(n * sizeof *sum_recv);
    for (int di = 0; di < 2; ++di) {
        const cc_coll_dtype_t d = dtypes[di];
        const cc_coll_params_t p = lr_params(30, 0, 1, 1);
        memset(sum_sent, 0, n * sizeof *sum_sent);
        memset(sum_recv, 0, n * sizeof *sum_recv);
        for (int t = 0; t < 4; ++t) { /* three compressed sends, then an uncompressed one */
            const int compress = t < 3;
            uniform_values(d, x, n, data_seed(src, 9, 4 * di + t), 1.0);
            for (size_t i = 0; i < n; ++i) sum_sent[i] += x[i];
            if (sender) {
                CHECK_CC(send_values(h, x, n, d, peer, tag + di, compress, &p));
                double *e = residual_of(h, peer, tag + di, &p, n, d);
                double emax = 0;
                for (size_t i = 0; i < n; ++i) emax = fmax(emax, fabs(e[i]));
                if (compress) {
                    CHECK(emax > 0.1, "a rank-1 send of random data leaves a residual");
                } else if (d == CC_COLL_F32) {
                    CHECK(emax == 0.0, "an uncompressed f32 send empties the residual");
                } else {
                    /* |g'| < 4 here (values in [-1, 1] plus a residual under 3):
                     * the bf16 rounding is at most half an ulp, 2^-7 at 4. */
                    CHECK(emax <= ldexp(1.0, -7), "an uncompressed bf16 send keeps only the rounding");
                }
                free(e);
            } else {
                recv_values(h, got, n, d, peer, tag + di, &p);
                for (size_t i = 0; i < n; ++i) sum_recv[i] += got[i];
            }
        }
        if (!sender) {
            /* After the flush, what arrived sums to what was sent (up to the
             * rounding the residual still holds). */
            const double tol = d == CC_COLL_F32 ? 1e-5 : ldexp(1.0, -7);
            for (size_t i = 0; i < n; ++i)
                CHECK(fabs(sum_recv[i] - sum_sent[i]) <= tol, "after the flush the receiver has everything sent");
        }
    }
    CHECK_CC(cc_coll_ef_reset_all(h));
    free(x);
    free(got);
    free(sum_sent);
    free(sum_recv);
}

static void test_flush(cc_coll_comm_h h) { each_pair(h, flush_pair); }

/* =============================================================================
 * 10. Warm start: sending one matrix again and again (EF off) is subspace
 *     iteration from the previous Q, so the error falls towards the best
 *     rank-r one; a fresh Gaussian every step does not improve. After
 *     cc_coll_lep_reset the channel starts over: the first result again,
 *     bit for bit.
 * ============================================================================= */

static void warm_start_pair(cc_coll_comm_h h, int peer, int sender)
{
    const size_t rows = 32, cols = 32, n = rows * cols;
    const int T = 10, r = 2, tag = 700;
    const int src = sender_rank(peer, sender);
    /* M = A diag(s) B^T with a decaying spectrum s. */
    const double s[6] = {1.0, 0.8, 0.6, 0.4, 0.2, 0.1};
    double *a = xmalloc(rows * 6 * sizeof *a), *b = xmalloc(cols * 6 * sizeof *b), *m = xmalloc(n * sizeof *m);
    double *got = xmalloc(n * sizeof *got), *first = xmalloc(n * sizeof *first);
    uniform_values(CC_COLL_F64, a, rows * 6, data_seed(src, 10, 0), 1.0);
    uniform_values(CC_COLL_F64, b, cols * 6, data_seed(src, 10, 1), 1.0);
    double mnorm = 0;
    for (size_t i = 0; i < rows; ++i)
        for (size_t j = 0; j < cols; ++j) {
            double v = 0;
            for (int k = 0; k < 6; ++k) v += s[k] * a[i * 6 + (size_t)k] * b[j * 6 + (size_t)k];
            m[i * cols + j] = (double)(float)v;
            mnorm += m[i * cols + j] * m[i * cols + j];
        }
    double err[2][10];
    for (int warm = 0; warm <= 1; ++warm) {
        cc_coll_params_t p = lr_params(rows, cols, r, 0);
        p.warm_start = warm;
        for (int t = 0; t <= T; ++t) {
            if (t == T && sender) CHECK_CC(cc_coll_lep_reset(h, peer, tag + warm, &p));
            if (sender) {
                CHECK_CC(send_values(h, m, n, CC_COLL_F32, peer, tag + warm, 1, &p));
                continue;
            }
            recv_values(h, got, n, CC_COLL_F32, peer, tag + warm, &p);
            if (t == 0) memcpy(first, got, n * sizeof *got);
            if (t == T) {
                CHECK(memcmp(first, got, n * sizeof *got) == 0,
                      "after cc_coll_lep_reset the channel's LOWRANK state starts over");
                break;
            }
            double e2 = 0;
            for (size_t i = 0; i < n; ++i) e2 += (got[i] - m[i]) * (got[i] - m[i]);
            err[warm][t] = sqrt(e2 / mnorm);
        }
    }
    if (!sender) {
        printf("  [rank %d] rank-2 error: warm start %.4f (step 1) %.4f (step 10); fresh Q %.4f (step 1) %.4f "
               "(step 10)\n",
               g_rank, err[1][0], err[1][T - 1], err[0][0], err[0][T - 1]);
        for (int t = 1; t < T; ++t)
            CHECK(err[1][t] <= err[1][t - 1] * (1 + 1e-4), "warm start: the error does not grow step to step");
        CHECK(err[1][T - 1] < 0.9 * err[1][0], "warm start: the error falls over the steps");
        double cold_best = err[0][0];
        for (int t = 1; t < T; ++t) cold_best = fmin(cold_best, err[0][t]);
        CHECK(err[1][T - 1] < cold_best, "warm start beats every fresh-Q step");
        CHECK(err[1][0] == err[0][0], "the first step of both is the same seeded Gaussian");
    }
    free(a);
    free(b);
    free(m);
    free(got);
    free(first);
}

static void test_warm_start(cc_coll_comm_h h) { each_pair(h, warm_start_pair); }

static void setup(void)
{
    unsetenv("CC_COLL_EF_MAX_BYTES");
    unsetenv("CC_COLL_STATE_MAX_BYTES");
}

static const NamedTest kTests[] = {
    {"bad_args", test_bad_args},
    {"raw", test_raw},
    {"lowrank_exact", test_lowrank_exact},
    {"lep_invariant", test_lep_invariant},
    {"lep_bounded", test_lep_bounded},
    {"topk", test_topk},
    {"mismatch", test_mismatch},
    {"channels", test_channels},
    {"flush", test_flush},
    {"warm_start", test_warm_start},
};

int main(int argc, char **argv)
{
    return run_suite(argc, argv, "p2p", kTests, sizeof kTests / sizeof kTests[0], 2, setup);
}
