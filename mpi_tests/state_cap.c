/*
 * CC_COLL_STATE_MAX_BYTES and cc_coll_state_bytes with real ranks (run with
 * 1 and 2 ranks; the point-to-point and one-rank-over-the-cap tests need 2).
 *
 * What docs/api.md promises and this file checks:
 *   - LOWRANK keeps per-tensor state (call count, P and Q) with EF off too;
 *     cc_coll_state_bytes reports it (a fixed entry size per key plus
 *     (rows + cols) x r elements of the work type), cc_coll_ef_bytes does
 *     not;
 *   - a call that would create state for a new key (or grow a key's
 *     factors) past the cap returns CC_COLL_ERR_EF_LIMIT, with a message
 *     naming CC_COLL_STATE_MAX_BYTES and the bytes in use and needed, before
 *     communicating, and changes nothing: recvbuf, residuals, other state,
 *     the state bytes (in a group, the new keys of the tensors before the
 *     one that failed are dropped again); cc_coll_lowrank_set_q too;
 *   - the same for a point-to-point LOWRANK channel (the receiver is not
 *     involved: it posts no receive for the refused send);
 *   - a group (or single) allreduce where one rank reaches the cap returns
 *     CC_COLL_ERR_EF_LIMIT there and CC_COLL_ERR_MISMATCH on the others,
 *     without hanging (a watchdog aborts after 30 s), nothing reduced;
 *   - cc_coll_ef_reset, cc_coll_lep_reset and cc_coll_ef_reset_all give the
 *     bytes back, after which a new key works.
 *
 * The per-key sizes are measured on a communicator without a cap, so the
 * test does not depend on the library's entry size.
 *
 *   mpi_state_cap [TEST...]     run every test, or only the named ones
 */
#define _POSIX_C_SOURCE 200809L /* setenv, unsetenv, sigaction */

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

enum { ROWS = 64, COLS = 64, N = ROWS * COLS };
#define SENTINEL 7.0f

/* Bytes of one key: its entry alone (a 1-D tensor, an uncompressed
 * channel), and with the factors of a compressed 64 x 64 F32 step at rank
 * 1 (collective tensor, point-to-point channel). */
static uint64_t g_entry = 0, g_step = 0, g_p2p_entry = 0, g_p2p_step = 0;

/* ---- helpers ------------------------------------------------------------------ */

static void on_alarm(int sig)
{
    (void)sig;
    char msg[200];
    const int len = snprintf(msg, sizeof msg,
                             "[rank %d] FAIL in %s: watchdog: the test hung (a collective that not every rank "
                             "entered?)\n",
                             g_rank, g_test);
    ssize_t w = write(2, msg, len > 0 ? (size_t)len : 0);
    (void)w;
    MPI_Abort(MPI_COMM_WORLD, 2);
    _exit(2);
}

/* A communicator on MPI_COMM_WORLD with CC_COLL_STATE_MAX_BYTES = cap. */
static cc_coll_comm_h comm_with_cap(uint64_t cap)
{
    char text[32];
    snprintf(text, sizeof text, "%llu", (unsigned long long)cap);
    setenv("CC_COLL_STATE_MAX_BYTES", text, 1);
    cc_coll_comm_h h = NULL;
    CHECK_CC(cc_coll_comm_create(MPI_COMM_WORLD, &h));
    unsetenv("CC_COLL_STATE_MAX_BYTES");
    return h;
}

static uint64_t state_bytes(cc_coll_comm_h h)
{
    uint64_t b = 0;
    CHECK_CC(cc_coll_state_bytes(h, &b));
    return b;
}

static uint64_t ef_bytes(cc_coll_comm_h h)
{
    uint64_t b = 0;
    CHECK_CC(cc_coll_ef_bytes(h, &b));
    return b;
}

/* LOWRANK 64 x 64 at rank 1 with `ef`, keyed. */
static cc_coll_params_t lr(uint64_t key, int ef)
{
    cc_coll_params_t p = keyed(lowrank_params(ROWS, COLS, 1), key);
    p.mask |= CC_COLL_PARAMS_FIELD_EF;
    p.ef = ef;
    return p;
}

static void fill(float *x, size_t n, float v)
{
    for (size_t i = 0; i < n; ++i) x[i] = v;
}

/* x holds (i mod 7) + 1 scaled by the rank; a matrix of full rank. */
static void inputs(float *x)
{
    for (size_t i = 0; i < N; ++i) x[i] = (float)((i * 31u) % 7u) + 1.0f + (float)g_rank;
}

static int untouched(const float *y, size_t n)
{
    for (size_t i = 0; i < n; ++i)
        if (y[i] != SENTINEL) return 0;
    return 1;
}

static cc_coll_status_t allreduce(cc_coll_comm_h h, const cc_coll_params_t *p, const float *x, float *y)
{
    return cc_coll_allreduce(x, y, N, CC_COLL_F32, CC_COLL_AVG, p, h, NULL);
}

static void expect_error(cc_coll_status_t st, cc_coll_status_t want, const char *needle, const char *desc)
{
    if (st != want) {
        fprintf(stderr, "[rank %d] FAIL in %s: %s: got %s, expected %s (message: \"%s\")\n", g_rank, g_test, desc,
                cc_coll_status_string(st), cc_coll_status_string(want), cc_coll_last_error());
        fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (needle != NULL && strstr(cc_coll_last_error(), needle) == NULL) {
        fprintf(stderr, "[rank %d] FAIL in %s: %s: message \"%s\" does not mention \"%s\"\n", g_rank, g_test, desc,
                cc_coll_last_error(), needle);
        fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

/* EF_LIMIT whose message names the setting, the bytes in use and needed. */
static void expect_cap(cc_coll_status_t st, uint64_t in_use, uint64_t needed, const char *desc)
{
    char text[64];
    expect_error(st, CC_COLL_ERR_EF_LIMIT, "CC_COLL_STATE_MAX_BYTES", desc);
    snprintf(text, sizeof text, "needs %llu bytes", (unsigned long long)needed);
    expect_error(st, CC_COLL_ERR_EF_LIMIT, text, desc);
    snprintf(text, sizeof text, "from %llu to", (unsigned long long)in_use);
    expect_error(st, CC_COLL_ERR_EF_LIMIT, text, desc);
}

static uint64_t calls_of(cc_coll_comm_h h, const cc_coll_params_t *p, const float *y, int *rank)
{
    uint64_t rows = 0, cols = 0, calls = 0;
    CHECK_CC(cc_coll_lowrank_get_state(h, p, y, N, CC_COLL_F32, &rows, &cols, rank, &calls, NULL, NULL));
    return calls;
}

/* ---- the sizes, without a cap ------------------------------------------------------ */

static void measure(void)
{
    float *x = xmalloc(N * sizeof(float)), *y = xmalloc(N * sizeof(float));
    inputs(x);
    cc_coll_comm_h h = comm_with_cap(0);
    /* A 1-D tensor: an entry without factors. */
    cc_coll_params_t p = keyed(lowrank_params_1d(1), 1);
    CHECK_CC(allreduce(h, &p, x, y));
    g_entry = state_bytes(h);
    CHECK(g_entry > 0, "a 1-D LOWRANK tensor keeps a call count with EF off, and cc_coll_state_bytes counts it");
    p = lr(2, 0);
    CHECK_CC(allreduce(h, &p, x, y));
    g_step = state_bytes(h) - g_entry;
    CHECK(g_step == g_entry + (ROWS + COLS) * 1 * sizeof(float),
          "a compressed F32 key is charged its entry plus P and Q in binary32");
    /* F64: P and Q in binary64. */
    double *xd = xmalloc(N * sizeof(double)), *yd = xmalloc(N * sizeof(double));
    for (size_t i = 0; i < N; ++i) xd[i] = x[i];
    p = lr(3, 0);
    CHECK_CC(cc_coll_allreduce(xd, yd, N, CC_COLL_F64, CC_COLL_AVG, &p, h, NULL));
    CHECK(state_bytes(h) == g_entry + g_step + g_entry + (ROWS + COLS) * 1 * sizeof(double),
          "a compressed F64 key is charged its entry plus P and Q in binary64");
    CHECK(ef_bytes(h) == 0, "EF off keeps no residual: cc_coll_ef_bytes does not count LOWRANK state");
    CHECK_CC(cc_coll_ef_reset_all(h));
    CHECK(state_bytes(h) == 0, "cc_coll_ef_reset_all gives every byte back");

    /* A point-to-point channel, rank 0 to rank 1: an uncompressed LOWRANK
     * send keeps the call count, a compressed one the factors too. The
     * receiver keeps none. */
    if (g_size >= 2 && g_rank < 2) {
        cc_coll_params_t q = lr(0, 0);
        q.mask &= ~(uint64_t)CC_COLL_PARAMS_FIELD_EF_KEY;
        if (g_rank == 0) {
            CHECK_CC(cc_coll_send(x, N, CC_COLL_F32, 1, 1, 0, &q, h, NULL));
            g_p2p_entry = state_bytes(h);
            CHECK_CC(cc_coll_send(x, N, CC_COLL_F32, 1, 2, 1, &q, h, NULL));
            g_p2p_step = state_bytes(h) - g_p2p_entry;
            CHECK(g_p2p_entry > 0, "an uncompressed LOWRANK send keeps the channel's call count");
            CHECK(g_p2p_step == g_p2p_entry + (ROWS + COLS) * 1 * sizeof(float),
                  "a compressed channel is charged its entry plus P and Q");
        } else {
            CHECK_CC(cc_coll_recv(y, N, CC_COLL_F32, 0, 1, &q, h, NULL));
            CHECK_CC(cc_coll_recv(y, N, CC_COLL_F32, 0, 2, &q, h, NULL));
            CHECK(state_bytes(h) == 0, "a receiver keeps no LOWRANK state");
        }
    }
    CHECK_CC(cc_coll_comm_destroy(h));
    free(x);
    free(y);
    free(xd);
    free(yd);
}

/* ---- collectives: every rank at the same cap --------------------------------------- */

static void collective_cap(cc_coll_comm_h unused)
{
    (void)unused;
    float *x = xmalloc(N * sizeof(float)), *y = xmalloc(N * sizeof(float)), *y2 = xmalloc(N * sizeof(float));
    inputs(x);
    /* Room for three keys. */
    cc_coll_comm_h h = comm_with_cap(3 * g_step + g_step / 2);
    cc_coll_params_t p;
    for (uint64_t k = 1; k <= 3; ++k) {
        p = lr(k, 0);
        CHECK_CC(allreduce(h, &p, x, y));
        CHECK(state_bytes(h) == k * g_step, "each new key adds its entry and factors, with EF off");
    }
    CHECK(ef_bytes(h) == 0, "EF off: no residual");

    /* A fourth key: refused before communicating, nothing changed. */
    fill(y, N, SENTINEL);
    p = lr(4, 0);
    expect_cap(allreduce(h, &p, x, y), 3 * g_step, g_step, "a fourth key past the cap");
    CHECK(untouched(y, N), "a refused call leaves recvbuf alone");
    CHECK(state_bytes(h) == 3 * g_step, "a refused call adds no state");
    int rank = -1;
    CHECK(calls_of(h, &p, y, &rank) == 0 && rank == 0, "the refused key has no state");
    /* With EF on, the residual is not created either. */
    p = lr(4, 1);
    expect_cap(allreduce(h, &p, x, y), 3 * g_step, g_step, "a fourth key with EF on");
    CHECK(untouched(y, N), "a refused call with EF on leaves recvbuf alone");
    CHECK(ef_bytes(h) == 0, "a refused call creates no residual");
    /* Existing keys still run. */
    p = lr(2, 0);
    CHECK_CC(allreduce(h, &p, x, y));
    CHECK(calls_of(h, &p, y, &rank) == 2 && rank == 1, "an existing key still runs at the cap");
    CHECK(state_bytes(h) == 3 * g_step, "an existing key costs nothing more");
    /* cc_coll_lowrank_set_q on a new key is refused too. */
    double q[COLS];
    for (size_t i = 0; i < COLS; ++i) q[i] = 1.0;
    p = lr(5, 0);
    expect_cap(cc_coll_lowrank_set_q(h, &p, y, N, CC_COLL_F32, q), 3 * g_step, g_step,
               "cc_coll_lowrank_set_q on a new key past the cap");

    /* cc_coll_ef_reset gives one key's bytes back; a new key then fits. */
    p = lr(1, 0);
    CHECK_CC(cc_coll_ef_reset(h, &p, y, N, CC_COLL_F32));
    CHECK(state_bytes(h) == 2 * g_step, "cc_coll_ef_reset gives the key's bytes back");

    /* A group of two new keys with room for one: the second fails, and the
     * first one's new state is dropped again. */
    {
        fill(y, N, SENTINEL);
        fill(y2, N, SENTINEL);
        cc_coll_params_t gp[2] = {lr(10, 1), lr(11, 1)};
        const void *send[2] = {x, x};
        void *recv[2] = {y, y2};
        const size_t counts[2] = {N, N};
        const cc_coll_dtype_t dtypes[2] = {CC_COLL_F32, CC_COLL_F32};
        expect_cap(cc_coll_allreduce_group(2, send, recv, counts, dtypes, CC_COLL_AVG, gp, h, NULL), 3 * g_step,
                   g_step, "a group whose second new key passes the cap");
        expect_error(CC_COLL_ERR_EF_LIMIT, CC_COLL_ERR_EF_LIMIT, "tensor 1", "the message names the tensor");
        CHECK(untouched(y, N) && untouched(y2, N), "a refused group leaves every recvbuf alone");
        CHECK(state_bytes(h) == 2 * g_step, "a refused group keeps no new state, not even its first tensor's");
        CHECK(ef_bytes(h) == 0, "a refused group creates no residual");
        CHECK(calls_of(h, &gp[0], y, &rank) == 0 && rank == 0, "the first tensor's key has no state");
        /* One new key fits. */
        CHECK_CC(allreduce(h, &gp[0], x, y));
        CHECK(state_bytes(h) == 3 * g_step, "one new key fits again");
    }

    /* cc_coll_ef_reset_all gives everything back. */
    CHECK_CC(cc_coll_ef_reset_all(h));
    CHECK(state_bytes(h) == 0, "cc_coll_ef_reset_all gives every byte back");
    p = lr(5, 0);
    CHECK_CC(cc_coll_lowrank_set_q(h, &p, y, N, CC_COLL_F32, q));
    CHECK(state_bytes(h) == g_step, "cc_coll_lowrank_set_q charges the key's entry and factors");
    CHECK_CC(cc_coll_comm_destroy(h));

    /* Growth: a key that starts dense (start_iter 1) holds its entry only;
     * its first compressed step needs its factors, which do not fit. */
    h = comm_with_cap(g_step - 1);
    p = lr(6, 0);
    p.mask |= CC_COLL_PARAMS_FIELD_START_ITER;
    p.start_iter = 1;
    CHECK_CC(allreduce(h, &p, x, y));
    CHECK(state_bytes(h) == g_entry, "a dense step keeps no factors");
    fill(y, N, SENTINEL);
    expect_cap(allreduce(h, &p, x, y), g_entry, g_step - g_entry, "factors growing past the cap");
    expect_error(CC_COLL_ERR_EF_LIMIT, CC_COLL_ERR_EF_LIMIT, "growing", "the message says the state grows");
    CHECK(untouched(y, N), "a refused growth leaves recvbuf alone");
    CHECK(calls_of(h, &p, y, &rank) == 1 && rank == 0, "a refused growth leaves the call count alone");
    CHECK(state_bytes(h) == g_entry, "a refused growth keeps the charge");
    CHECK_CC(cc_coll_ef_reset(h, &p, y, N, CC_COLL_F32));
    CHECK(state_bytes(h) == 0, "cc_coll_ef_reset gives the bytes back");
    CHECK_CC(cc_coll_comm_destroy(h));
    free(x);
    free(y);
    free(y2);
}

/* ---- point-to-point: rank 0 sends to rank 1 ---------------------------------------- */

static void p2p_cap(cc_coll_comm_h unused)
{
    (void)unused;
    if (g_size < 2) {
        if (g_rank == 0) printf("    (needs 2 or more ranks)\n");
        return;
    }
    float *x = xmalloc(N * sizeof(float)), *y = xmalloc(N * sizeof(float));
    inputs(x);
    cc_coll_comm_h h = comm_with_cap(2 * g_p2p_step + g_p2p_step / 2);
    cc_coll_params_t p = lr(0, 1);
    p.mask &= ~(uint64_t)CC_COLL_PARAMS_FIELD_EF_KEY;  /* channels by tag */
    if (g_rank == 0) {
        CHECK_CC(cc_coll_send(x, N, CC_COLL_F32, 1, 1, 1, &p, h, NULL));
        CHECK_CC(cc_coll_send(x, N, CC_COLL_F32, 1, 2, 1, &p, h, NULL));
        CHECK(state_bytes(h) == 2 * g_p2p_step, "two channels' state");
        const uint64_t efb = ef_bytes(h);
        CHECK(efb == 2 * N * sizeof(float), "two channels' residuals");
        /* A third channel: refused before sending (rank 1 posts no receive
         * for it), its new residual dropped again. */
        expect_cap(cc_coll_send(x, N, CC_COLL_F32, 1, 3, 1, &p, h, NULL), 2 * g_p2p_step, g_p2p_step,
                   "a third channel past the cap");
        expect_error(CC_COLL_ERR_EF_LIMIT, CC_COLL_ERR_EF_LIMIT, "tag 3", "the message names the channel");
        CHECK(state_bytes(h) == 2 * g_p2p_step, "a refused send adds no state");
        CHECK(ef_bytes(h) == efb, "a refused send keeps no new residual");
        /* An existing channel still sends. */
        CHECK_CC(cc_coll_send(x, N, CC_COLL_F32, 1, 2, 1, &p, h, NULL));
        /* cc_coll_lep_reset gives the channel's bytes back. */
        CHECK_CC(cc_coll_lep_reset(h, 1, 1, &p));
        CHECK(state_bytes(h) == g_p2p_step, "cc_coll_lep_reset gives the channel's bytes back");
        CHECK_CC(cc_coll_send(x, N, CC_COLL_F32, 1, 3, 1, &p, h, NULL));
        CHECK(state_bytes(h) == 2 * g_p2p_step, "a new channel fits again");
        CHECK_CC(cc_coll_ef_reset_all(h));
        CHECK(state_bytes(h) == 0 && ef_bytes(h) == 0, "cc_coll_ef_reset_all gives every byte back");
    } else if (g_rank == 1) {
        CHECK_CC(cc_coll_recv(y, N, CC_COLL_F32, 0, 1, &p, h, NULL));
        CHECK_CC(cc_coll_recv(y, N, CC_COLL_F32, 0, 2, &p, h, NULL));
        CHECK_CC(cc_coll_recv(y, N, CC_COLL_F32, 0, 2, &p, h, NULL));
        CHECK_CC(cc_coll_recv(y, N, CC_COLL_F32, 0, 3, &p, h, NULL));
        CHECK(state_bytes(h) == 0, "a receiver keeps no LOWRANK state");
    }
    CHECK_CC(cc_coll_comm_destroy(h));
    free(x);
    free(y);
}

/* ---- one rank over the cap: its error there, MISMATCH elsewhere, no hang ------------ */

static void one_rank_over_cap(cc_coll_comm_h unused)
{
    (void)unused;
    if (g_size < 2) {
        if (g_rank == 0) printf("    (needs 2 or more ranks)\n");
        return;
    }
    float *x = xmalloc(N * sizeof(float)), *y = xmalloc(N * sizeof(float)), *y2 = xmalloc(N * sizeof(float));
    inputs(x);
    double q[COLS];
    for (size_t i = 0; i < COLS; ++i) q[i] = 1.0;
    /* The same cap everywhere, room for two keys; rank 1 holds one more
     * (a Q set locally), so a group of two new keys passes it there only. */
    cc_coll_comm_h h = comm_with_cap(2 * g_step + g_step / 2);
    cc_coll_params_t extra = lr(100, 1);
    if (g_rank == 1) CHECK_CC(cc_coll_lowrank_set_q(h, &extra, y, N, CC_COLL_F32, q));
    const uint64_t held = g_rank == 1 ? g_step : 0;
    CHECK(state_bytes(h) == held, "rank 1 holds one key");

    cc_coll_params_t gp[2] = {lr(101, 1), lr(102, 1)};
    const void *send[2] = {x, x};
    void *recv[2] = {y, y2};
    const size_t counts[2] = {N, N};
    const cc_coll_dtype_t dtypes[2] = {CC_COLL_F32, CC_COLL_F32};
    fill(y, N, SENTINEL);
    fill(y2, N, SENTINEL);
    alarm(30);
    cc_coll_status_t st = cc_coll_allreduce_group(2, send, recv, counts, dtypes, CC_COLL_AVG, gp, h, NULL);
    alarm(0);
    if (g_rank == 1) {
        expect_cap(st, 2 * g_step, g_step, "rank 1's second new key passes its cap");
        CHECK(state_bytes(h) == held, "rank 1 keeps no new state");
    } else {
        expect_error(st, CC_COLL_ERR_MISMATCH, "disagree", "another rank's cap failure");
        CHECK(state_bytes(h) == held, "the other ranks drop the entries their plans created");
    }
    CHECK(untouched(y, N) && untouched(y2, N), "nothing reduced on any rank");
    CHECK(ef_bytes(h) == 0, "no residual created on any rank");

    /* A single allreduce is a group of one: the same. */
    fill(y, N, SENTINEL);
    if (g_rank == 1) {
        cc_coll_params_t more = lr(103, 1);
        CHECK_CC(cc_coll_lowrank_set_q(h, &more, y, N, CC_COLL_F32, q));
    }
    cc_coll_params_t single = lr(104, 1);
    alarm(30);
    st = allreduce(h, &single, x, y);
    alarm(0);
    if (g_rank == 1) expect_cap(st, 2 * g_step, g_step, "rank 1's new key passes its cap");
    else expect_error(st, CC_COLL_ERR_MISMATCH, "disagree", "another rank's cap failure (single allreduce)");
    if (g_rank != 1) CHECK(state_bytes(h) == held, "no entry left behind (single allreduce)");
    CHECK(untouched(y, N), "nothing reduced (single allreduce)");

    /* Rank 1 frees its keys; the group then runs everywhere, and every
     * rank holds the same two keys, once each. */
    if (g_rank == 1) {
        CHECK_CC(cc_coll_ef_reset(h, &extra, y, N, CC_COLL_F32));
        cc_coll_params_t more = lr(103, 1);
        CHECK_CC(cc_coll_ef_reset(h, &more, y, N, CC_COLL_F32));
        CHECK(state_bytes(h) == 0, "rank 1 gave its keys back");
    }
    alarm(30);
    CHECK_CC(cc_coll_allreduce_group(2, send, recv, counts, dtypes, CC_COLL_AVG, gp, h, NULL));
    alarm(0);
    CHECK(state_bytes(h) == 2 * g_step, "every rank holds the group's two keys, once each");
    CHECK_CC(cc_coll_ef_reset_all(h));
    CHECK(state_bytes(h) == 0, "cc_coll_ef_reset_all gives every byte back");
    CHECK_CC(cc_coll_comm_destroy(h));
    free(x);
    free(y);
    free(y2);
}

/* ---- main ----------------------------------------------------------------------------- */

static void setup(void)
{
    static const char *const vars[] = {"CC_COLL_METHOD", "CC_COLL_EF", "CC_COLL_EF_MAX_BYTES",
                                       "CC_COLL_STATE_MAX_BYTES", "CC_COLL_LOWRANK_RANK",
                                       "CC_COLL_LOWRANK_START_ITER", "CC_COLL_LOWRANK_MIN_COMPRESSION_RATE"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; ++i) unsetenv(vars[i]);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sigaction(SIGALRM, &sa, NULL);
    measure();
}

static const NamedTest kTests[] = {
    {"collective_cap", collective_cap},
    {"p2p_cap", p2p_cap},
    {"one_rank_over_cap", one_rank_over_cap},
};

int main(int argc, char **argv)
{
    return run_suite(argc, argv, "state_cap", kTests, sizeof kTests / sizeof kTests[0], 1, setup);
}
