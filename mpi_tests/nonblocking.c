/*
 * Non-blocking collectives (docs/api.md, "Non-blocking collectives"), on
 * 1 to 4 ranks, with the progress thread (CC_COLL_PROGRESS=thread, MPI
 * initialised with MPI_THREAD_MULTIPLE) or without it (caller: requests
 * advance inside test/wait). The first argument says which: "thread" or
 * "caller"; further arguments select tests.
 *
 *   nb_matches_blocking  every method, many requests in flight on two
 *                        communicators and several residuals (iallreduce,
 *                        iallreduce_group with LOWRANK, ireduce_scatter),
 *                        completed in a rank-dependent order through
 *                        cc_coll_wait, cc_coll_test loops and
 *                        cc_coll_waitall, for three steps: every result
 *                        and residual is bit-identical to the same calls
 *                        made blocking on a second pair of communicators
 *   nb_same_key          two requests in flight on one ef_key run in
 *                        posting order: equal to the blocking sequence
 *   nb_blocking_after    a blocking call on a communicator with requests
 *                        in flight completes them first
 *   nb_misuse            recvbuf reused by a second request in flight, a
 *                        sendbuf that is another request's recvbuf, NULL
 *                        request pointer, a freed or forged handle, the
 *                        residual calls while requests are in flight: each
 *                        a specific error, nothing posted
 *   nb_order_differs     rank 0 posts TOPK then NONE, the others NONE then
 *                        TOPK: both requests fail with
 *                        CC_COLL_ERR_MISMATCH on every rank, no hang, and
 *                        recvbufs untouched
 *   nb_free_in_flight    a request freed in flight still completes (its
 *                        result lands) and cc_coll_comm_destroy waits for
 *                        it
 *
 * Any failure prints the case and calls MPI_Abort; a hang is bounded by the
 * test's TIMEOUT.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "cc_coll.h"
#include "check.h"
#include "test_util.h"

static int g_thread = 0; /* 1: CC_COLL_PROGRESS=thread */

static void expect_status(cc_coll_status_t got, cc_coll_status_t want, const char *what)
{
    if (got != want) {
        char buf[512];
        snprintf(buf, sizeof buf, "%s: expected %s, got %s (%s)", what, cc_coll_status_string(want),
                 cc_coll_status_string(got), cc_coll_last_error());
        die("%s", buf, 0);
    }
}

static void fill(float *x, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; ++i) x[i] = (float)(rng_uniform(&seed) * 2.0 - 1.0);
}

static void same_bytes(const void *a, const void *b, size_t bytes, const char *what)
{
    if (memcmp(a, b, bytes) != 0) die("%s: non-blocking result differs from the blocking one", what, 0);
}

/* Waits for requests[0..n) in an order that depends on the rank and step:
 * some by cc_coll_wait, some by cc_coll_test loops, the rest by
 * cc_coll_waitall; every status must be OK. Frees them. */
static void complete_all(cc_coll_request_h *req, size_t n, int step)
{
    size_t order[64];
    for (size_t i = 0; i < n; ++i) order[i] = i;
    uint64_t s = 0x1234u + (uint64_t)g_rank * 77u + (uint64_t)step;
    for (size_t i = n; i > 1; --i) {
        const size_t j = (size_t)(rng_next(&s) % i);
        const size_t t = order[i - 1];
        order[i - 1] = order[j];
        order[j] = t;
    }
    const size_t third = n / 3;
    for (size_t i = 0; i < third; ++i) CHECK_CC(cc_coll_wait(req[order[i]]));
    for (size_t i = third; i < 2 * third; ++i) {
        int done = 0;
        while (!done) CHECK_CC(cc_coll_test(req[order[i]], &done));
    }
    cc_coll_request_h rest[64];
    cc_coll_status_t st[64];
    size_t m = 0;
    for (size_t i = 2 * third; i < n; ++i) rest[m++] = req[order[i]];
    CHECK_CC(cc_coll_waitall(m, rest, st));
    for (size_t i = 0; i < m; ++i) CHECK(st[i] == CC_COLL_OK, "waitall status");
    for (size_t i = 0; i < n; ++i) {
        int done = 0;
        cc_coll_status_t rst = CC_COLL_ERR_INTERNAL;
        const char *msg = NULL;
        CHECK_CC(cc_coll_request_status(req[i], &done, &rst, &msg));
        CHECK(done == 1 && rst == CC_COLL_OK && msg != NULL && msg[0] == '\0', "request status after completion");
        CHECK_CC(cc_coll_request_free(req[i]));
    }
}

enum { kTensors = 4, kN = 3000, kRows = 50, kCols = 60, kSteps = 3 };

/* One step of the workload on (a, b): blocking when req == NULL, else
 * posted into req (returns how many). Buffers: x[t] inputs, y[t] outputs. */
static size_t workload(cc_coll_comm_h a, cc_coll_comm_h b, float *const *x, float *const *y, float *rs_in,
                       float *rs_out, float *const *gx, float *const *gy, cc_coll_request_h *req)
{
    size_t n = 0;
    const cc_coll_params_t p[kTensors] = {
        keyed(method_params(CC_COLL_METHOD_NONE), 1),
        keyed(topk_params(0.05, 1), 2),
        keyed(sketch_params(0.05, 1, 0.77), 3),
        keyed(topk_params(0.02, 1), 4),
    };
    for (int t = 0; t < kTensors; ++t) {
        cc_coll_comm_h c = t % 2 == 0 ? a : b;
        if (req == NULL)
            CHECK_CC(cc_coll_allreduce(x[t], y[t], kN, CC_COLL_F32, t == 1 ? CC_COLL_AVG : CC_COLL_SUM, &p[t], c,
                                       NULL));
        else
            CHECK_CC(cc_coll_iallreduce(x[t], y[t], kN, CC_COLL_F32, t == 1 ? CC_COLL_AVG : CC_COLL_SUM, &p[t], c,
                                        NULL, &req[n++]));
    }
    /* A LOWRANK group: a matrix and a 1-D tensor. */
    cc_coll_params_t gp[2] = {keyed(lowrank_params(kRows, kCols, 2), 10), keyed(lowrank_params_1d(2), 11)};
    const size_t gc[2] = {kRows * kCols, 100};
    const cc_coll_dtype_t gd[2] = {CC_COLL_F32, CC_COLL_F32};
    const void *gs[2] = {gx[0], gx[1]};
    void *gr[2] = {gy[0], gy[1]};
    if (req == NULL) CHECK_CC(cc_coll_allreduce_group(2, gs, gr, gc, gd, CC_COLL_SUM, gp, b, NULL));
    else CHECK_CC(cc_coll_iallreduce_group(2, gs, gr, gc, gd, CC_COLL_SUM, gp, b, NULL, &req[n++]));
    /* A TOPK reduce-scatter. */
    const cc_coll_params_t rp = keyed(topk_params(0.1, 1), 20);
    if (req == NULL) CHECK_CC(cc_coll_reduce_scatter(rs_in, rs_out, kN, CC_COLL_F32, CC_COLL_SUM, &rp, a, NULL));
    else CHECK_CC(cc_coll_ireduce_scatter(rs_in, rs_out, kN, CC_COLL_F32, CC_COLL_SUM, &rp, a, NULL, &req[n++]));
    return n;
}

typedef struct {
    float *x[kTensors], *y[kTensors], *rs_in, *rs_out, *gx[2], *gy[2];
} Bufs;

static void bufs_alloc(Bufs *b)
{
    for (int t = 0; t < kTensors; ++t) {
        b->x[t] = xmalloc(kN * sizeof(float));
        b->y[t] = xmalloc(kN * sizeof(float));
    }
    b->rs_in = xmalloc((size_t)kN * (size_t)g_size * sizeof(float));
    b->rs_out = xmalloc(kN * sizeof(float));
    b->gx[0] = xmalloc(kRows * kCols * sizeof(float));
    b->gy[0] = xmalloc(kRows * kCols * sizeof(float));
    b->gx[1] = xmalloc(100 * sizeof(float));
    b->gy[1] = xmalloc(100 * sizeof(float));
}

static void bufs_fill(Bufs *b, int step)
{
    const uint64_t s = 1000u * (uint64_t)step + 17u * (uint64_t)g_rank;
    for (int t = 0; t < kTensors; ++t) fill(b->x[t], kN, s + (uint64_t)t);
    fill(b->rs_in, (size_t)kN * (size_t)g_size, s + 50);
    fill(b->gx[0], kRows * kCols, s + 60);
    fill(b->gx[1], 100, s + 61);
}

static void bufs_free(Bufs *b)
{
    for (int t = 0; t < kTensors; ++t) {
        free(b->x[t]);
        free(b->y[t]);
    }
    free(b->rs_in);
    free(b->rs_out);
    for (int i = 0; i < 2; ++i) {
        free(b->gx[i]);
        free(b->gy[i]);
    }
}

static void compare_residual(cc_coll_comm_h nb, cc_coll_comm_h bl, uint64_t key, size_t n, const char *what)
{
    double *r1 = xmalloc(n * sizeof(double)), *r2 = xmalloc(n * sizeof(double));
    const cc_coll_params_t k = keyed(method_params(CC_COLL_METHOD_TOPK), key);
    CHECK_CC(cc_coll_ef_get_residual(nb, &k, NULL, n, CC_COLL_F32, r1));
    CHECK_CC(cc_coll_ef_get_residual(bl, &k, NULL, n, CC_COLL_F32, r2));
    same_bytes(r1, r2, n * sizeof(double), what);
    free(r1);
    free(r2);
}

static void nb_matches_blocking(cc_coll_comm_h h)
{
    (void)h;
    cc_coll_comm_h a, b, ra, rb;
    CHECK_CC(cc_coll_comm_create(MPI_COMM_WORLD, &a));
    CHECK_CC(cc_coll_comm_create(MPI_COMM_WORLD, &b));
    CHECK_CC(cc_coll_comm_create(MPI_COMM_WORLD, &ra));
    CHECK_CC(cc_coll_comm_create(MPI_COMM_WORLD, &rb));
    Bufs nb, bl;
    bufs_alloc(&nb);
    bufs_alloc(&bl);
    for (int step = 0; step < kSteps; ++step) {
        bufs_fill(&nb, step);
        bufs_fill(&bl, step);
        cc_coll_request_h req[16];
        const size_t n = workload(a, b, nb.x, nb.y, nb.rs_in, nb.rs_out, nb.gx, nb.gy, req);
        complete_all(req, n, step);
        workload(ra, rb, bl.x, bl.y, bl.rs_in, bl.rs_out, bl.gx, bl.gy, NULL);
        char what[64];
        for (int t = 0; t < kTensors; ++t) {
            snprintf(what, sizeof what, "step %d tensor %d", step, t);
            same_bytes(nb.y[t], bl.y[t], kN * sizeof(float), what);
        }
        same_bytes(nb.rs_out, bl.rs_out, kN * sizeof(float), "reduce-scatter");
        same_bytes(nb.gy[0], bl.gy[0], kRows * kCols * sizeof(float), "group matrix");
        same_bytes(nb.gy[1], bl.gy[1], 100 * sizeof(float), "group 1-D");
    }
    compare_residual(b, rb, 2, kN, "TOPK residual");
    compare_residual(a, ra, 3, kN, "SKETCH residual");
    compare_residual(b, rb, 10, kRows * kCols, "LOWRANK residual");
    bufs_free(&nb);
    bufs_free(&bl);
    CHECK_CC(cc_coll_comm_destroy(a));
    CHECK_CC(cc_coll_comm_destroy(b));
    CHECK_CC(cc_coll_comm_destroy(ra));
    CHECK_CC(cc_coll_comm_destroy(rb));
}

static void nb_same_key(cc_coll_comm_h h)
{
    cc_coll_comm_h ref;
    CHECK_CC(cc_coll_comm_create(MPI_COMM_WORLD, &ref));
    enum { N = 4096, K = 5 };
    float *x = xmalloc(K * N * sizeof(float)), *y = xmalloc(K * N * sizeof(float)), *z = xmalloc(K * N * sizeof(float));
    for (int i = 0; i < K; ++i) fill(x + i * N, N, 99u + (uint64_t)i + 10u * (uint64_t)g_rank);
    const cc_coll_params_t p = keyed(topk_params(0.01, 1), 77);
    cc_coll_request_h req[K];
    for (int i = 0; i < K; ++i)
        CHECK_CC(cc_coll_iallreduce(x + i * N, y + i * N, N, CC_COLL_F32, CC_COLL_SUM, &p, h, NULL, &req[i]));
    for (int i = K - 1; i >= 0; --i) CHECK_CC(cc_coll_wait(req[i]));
    for (int i = 0; i < K; ++i) {
        CHECK_CC(cc_coll_request_free(req[i]));
        CHECK_CC(cc_coll_allreduce(x + i * N, z + i * N, N, CC_COLL_F32, CC_COLL_SUM, &p, ref, NULL));
    }
    same_bytes(y, z, K * N * sizeof(float), "same ef_key in posting order");
    compare_residual(h, ref, 77, N, "shared residual");
    CHECK_CC(cc_coll_ef_reset_all(h));
    CHECK_CC(cc_coll_comm_destroy(ref));
    free(x);
    free(y);
    free(z);
}

static void nb_blocking_after(cc_coll_comm_h h)
{
    enum { N = 2048 };
    float *x = xmalloc(N * sizeof(float)), *y = xmalloc(N * sizeof(float)), *z = xmalloc(N * sizeof(float));
    float *w = xmalloc(N * sizeof(float));
    for (int i = 0; i < N; ++i) x[i] = (float)(g_rank + 1) * (float)(i % 17);
    cc_coll_request_h r;
    CHECK_CC(cc_coll_iallreduce(x, y, N, CC_COLL_F32, CC_COLL_SUM, NULL, h, NULL, &r));
    CHECK_CC(cc_coll_allreduce(x, z, N, CC_COLL_F32, CC_COLL_SUM, NULL, h, NULL));
    int done = 0;
    CHECK_CC(cc_coll_request_status(r, &done, NULL, NULL));
    CHECK(done == 1, "the blocking call completed the request in flight first");
    MPI_Allreduce(x, w, N, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    same_bytes(y, w, N * sizeof(float), "request vs MPI_Allreduce");
    same_bytes(z, w, N * sizeof(float), "blocking vs MPI_Allreduce");
    CHECK_CC(cc_coll_request_free(r));
    free(x);
    free(y);
    free(z);
    free(w);
}

/* Rank 0 posts a request that cannot complete before the other ranks post
 * theirs, which they do only after a barrier that rank 0 reaches once it
 * has checked the misuse cases against it. On one rank the request
 * completes as it is posted, and the in-flight cases are skipped. */
static void nb_misuse(cc_coll_comm_h h)
{
    enum { N = 1024 };
    float *x = xmalloc(2 * N * sizeof(float)), *y = xmalloc(2 * N * sizeof(float));
    for (int i = 0; i < 2 * N; ++i) x[i] = y[i] = 1.0f;
    cc_coll_request_h r = NULL, r2 = (cc_coll_request_h)0x1;
    const cc_coll_params_t tk = topk_params(0.1, 1);
    if (g_rank == 0) CHECK_CC(cc_coll_iallreduce(x, y, N, CC_COLL_F32, CC_COLL_SUM, &tk, h, NULL, &r));
    if (g_rank == 0 && g_size > 1) {
        int done = 1;
        CHECK_CC(cc_coll_request_status(r, &done, NULL, NULL));
        CHECK(done == 0, "in flight until the others post");
        /* recvbuf overlapping the first request's recvbuf */
        expect_status(cc_coll_iallreduce(x + N, y + N / 2, N, CC_COLL_F32, CC_COLL_SUM, NULL, h, NULL, &r2),
                      CC_COLL_ERR_INVALID_ARG, "recvbuf reused while in flight");
        CHECK(r2 == NULL, "no request on error");
        CHECK(strstr(cc_coll_last_error(), "in flight") != NULL, "message names the request in flight");
        /* sendbuf that is the first request's recvbuf */
        expect_status(cc_coll_iallreduce(y, y + N, N, CC_COLL_F32, CC_COLL_SUM, NULL, h, NULL, &r2),
                      CC_COLL_ERR_INVALID_ARG, "sendbuf is a recvbuf in flight");
        /* in place on the first request's sendbuf: writes what it reads */
        expect_status(cc_coll_iallreduce(x, x, N, CC_COLL_F32, CC_COLL_SUM, NULL, h, NULL, &r2),
                      CC_COLL_ERR_INVALID_ARG, "recvbuf is a sendbuf in flight");
        uint64_t bytes = 0;
        expect_status(cc_coll_ef_bytes(h, &bytes), CC_COLL_ERR_INVALID_ARG, "cc_coll_ef_bytes in flight");
        expect_status(cc_coll_ef_reset_all(h), CC_COLL_ERR_INVALID_ARG, "cc_coll_ef_reset_all in flight");
        expect_status(cc_coll_state_bytes(h, &bytes), CC_COLL_ERR_INVALID_ARG, "cc_coll_state_bytes in flight");
        double res[4];
        expect_status(cc_coll_ef_get_residual(h, &tk, y, N, CC_COLL_F32, res), CC_COLL_ERR_INVALID_ARG,
                      "cc_coll_ef_get_residual in flight");
        CHECK_CC(cc_coll_request_status(r, &done, NULL, NULL));
        CHECK(done == 0, "still in flight");
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (g_rank != 0) CHECK_CC(cc_coll_iallreduce(x, y, N, CC_COLL_F32, CC_COLL_SUM, &tk, h, NULL, &r));
    expect_status(cc_coll_iallreduce(x, y + N, N, CC_COLL_F32, CC_COLL_SUM, NULL, h, NULL, NULL),
                  CC_COLL_ERR_INVALID_ARG, "NULL request pointer");
    /* argument errors are reported at once */
    expect_status(cc_coll_iallreduce(x, y + N, N, (cc_coll_dtype_t)42, CC_COLL_SUM, NULL, h, NULL, &r2),
                  CC_COLL_ERR_INVALID_DTYPE, "bad dtype");
    CHECK(r2 == NULL, "no request on an argument error");
    int done = 0;
    expect_status(cc_coll_test(r, NULL), CC_COLL_ERR_INVALID_ARG, "cc_coll_test with NULL done");
    CHECK_CC(cc_coll_wait(r));
    CHECK_CC(cc_coll_wait(r)); /* waiting again is allowed: it is done */
    CHECK_CC(cc_coll_test(r, &done));
    CHECK(done == 1, "done after wait");
    uint64_t bytes = 0;
    CHECK_CC(cc_coll_ef_bytes(h, &bytes));
    CHECK(bytes > 0, "the TOPK residual exists once the request is done");
    CHECK_CC(cc_coll_request_free(r));
    expect_status(cc_coll_wait(r), CC_COLL_ERR_INVALID_ARG, "wait on a freed request");
    expect_status(cc_coll_test(r, &done), CC_COLL_ERR_INVALID_ARG, "test on a freed request");
    expect_status(cc_coll_request_free(r), CC_COLL_ERR_INVALID_ARG, "double free");
    expect_status(cc_coll_wait((cc_coll_request_h)(uintptr_t)0xdead0000u), CC_COLL_ERR_INVALID_ARG,
                  "forged handle");
    expect_status(cc_coll_wait(NULL), CC_COLL_ERR_INVALID_ARG, "NULL handle");
    cc_coll_request_h none[2] = {NULL, NULL};
    CHECK_CC(cc_coll_waitall(2, none, NULL));
    /* An error the blocking form reports through the agreement (a LOWRANK
     * shape that does not divide the count, on every rank) is the request's
     * status: the post succeeds with no last error. */
    const cc_coll_params_t bad_shape = lowrank_params(7, 0, 1);
    for (int i = 0; i < N; ++i) y[i] = 1.0f;
    CHECK_CC(cc_coll_iallreduce(x, y, N, CC_COLL_F32, CC_COLL_SUM, &bad_shape, h, NULL, &r));
    CHECK(cc_coll_last_error()[0] == '\0', "a successful post leaves no last error");
    expect_status(cc_coll_wait(r), CC_COLL_ERR_INVALID_ARG, "LOWRANK shape that does not divide the count");
    CHECK(strncmp(cc_coll_last_error(), "cc_coll_iallreduce: ", 20) == 0 &&
              strstr(cc_coll_last_error(), "does not divide") != NULL,
          "the request's message names the call and the shape");
    for (int i = 0; i < N; ++i) CHECK(y[i] == 1.0f, "recvbuf untouched by the failed request");
    CHECK_CC(cc_coll_request_free(r));
    CHECK_CC(cc_coll_ef_reset_all(h));
    free(x);
    free(y);
}

static void nb_order_differs(cc_coll_comm_h h)
{
    if (g_size < 2) return;
    enum { N = 4096 };
    float *x = xmalloc(N * sizeof(float)), *y1 = xmalloc(N * sizeof(float)), *y2 = xmalloc(N * sizeof(float));
    fill(x, N, 5u + (uint64_t)g_rank);
    for (int i = 0; i < N; ++i) y1[i] = y2[i] = -7.0f;
    const cc_coll_params_t tk = topk_params(0.05, 1), none = method_params(CC_COLL_METHOD_NONE);
    const int first_topk = g_rank == 0;
    cc_coll_request_h r[2];
    CHECK_CC(cc_coll_iallreduce(x, y1, N, CC_COLL_F32, CC_COLL_SUM, first_topk ? &tk : &none, h, NULL, &r[0]));
    CHECK_CC(cc_coll_iallreduce(x, y2, N, CC_COLL_F32, CC_COLL_SUM, first_topk ? &none : &tk, h, NULL, &r[1]));
    cc_coll_status_t st[2];
    expect_status(cc_coll_waitall(2, r, st), CC_COLL_ERR_MISMATCH, "waitall of misordered requests");
    CHECK(strstr(cc_coll_last_error(), "method") != NULL, "message names the method");
    CHECK(st[0] == CC_COLL_ERR_MISMATCH && st[1] == CC_COLL_ERR_MISMATCH, "both requests mismatch");
    const char *msg = NULL;
    cc_coll_status_t rs = CC_COLL_OK;
    CHECK_CC(cc_coll_request_status(r[1], NULL, &rs, &msg));
    CHECK(rs == CC_COLL_ERR_MISMATCH && msg != NULL && strstr(msg, "method") != NULL, "per-request message");
    for (int i = 0; i < N; ++i) CHECK(y1[i] == -7.0f && y2[i] == -7.0f, "recvbufs untouched");
    uint64_t bytes = 1;
    CHECK_CC(cc_coll_ef_bytes(h, &bytes));
    CHECK(bytes == 0, "no residual created");
    CHECK_CC(cc_coll_request_free(r[0]));
    CHECK_CC(cc_coll_request_free(r[1]));
    free(x);
    free(y1);
    free(y2);
}

static void nb_free_in_flight(cc_coll_comm_h h)
{
    (void)h;
    enum { N = 1 << 16 };
    cc_coll_comm_h c;
    CHECK_CC(cc_coll_comm_create(MPI_COMM_WORLD, &c));
    float *x = xmalloc(N * sizeof(float)), *y = xmalloc(N * sizeof(float)), *w = xmalloc(N * sizeof(float));
    for (int i = 0; i < N; ++i) x[i] = (float)((i + g_rank) % 13);
    cc_coll_request_h r;
    CHECK_CC(cc_coll_iallreduce(x, y, N, CC_COLL_F32, CC_COLL_SUM, NULL, c, NULL, &r));
    CHECK_CC(cc_coll_request_free(r));
    CHECK_CC(cc_coll_comm_destroy(c)); /* completes the freed request */
    MPI_Allreduce(x, w, N, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    same_bytes(y, w, N * sizeof(float), "freed request's result");
    free(x);
    free(y);
    free(w);
}

int main(int argc, char **argv)
{
    if (argc < 2 || (strcmp(argv[1], "thread") != 0 && strcmp(argv[1], "caller") != 0)) {
        fprintf(stderr, "usage: %s thread|caller [test...]\n", argv[0]);
        return 2;
    }
    g_thread = strcmp(argv[1], "thread") == 0;
    setenv("CC_COLL_PROGRESS", argv[1], 1);
    int provided = 0;
    MPI_Init_thread(&argc, &argv, g_thread ? MPI_THREAD_MULTIPLE : MPI_THREAD_SINGLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    if (g_thread && provided < MPI_THREAD_MULTIPLE) {
        if (g_rank == 0) printf("nonblocking: MPI has no MPI_THREAD_MULTIPLE: skipped\n");
        MPI_Finalize();
        return 77;
    }
    g_argc = argc - 1;
    g_argv = argv + 1;
    CHECK_CC(cc_coll_check_version());
    cc_coll_comm_h h = NULL;
    CHECK_CC(cc_coll_comm_create(MPI_COMM_WORLD, &h));
    if (g_rank == 0) printf("nonblocking (%s progress): %d ranks\n", argv[1], g_size);
    const NamedTest tests[] = {
        {"nb_matches_blocking", nb_matches_blocking}, {"nb_same_key", nb_same_key},
        {"nb_blocking_after", nb_blocking_after},     {"nb_misuse", nb_misuse},
        {"nb_order_differs", nb_order_differs},       {"nb_free_in_flight", nb_free_in_flight},
    };
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; ++i) run_test(tests[i].name, tests[i].fn, h);
    CHECK_CC(cc_coll_comm_destroy(h));
    if (g_rank == 0) printf("nonblocking: all tests passed\n");
    MPI_Finalize();
    return 0;
}
