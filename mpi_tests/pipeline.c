/*
 * The pipelined allreduce (CC_COLL_PIPELINE_BYTES) with real ranks (run with
 * 1 to 4 ranks), of TOPK's allgather (docs/algorithms.md section 2.7) or,
 * with CC_T_PIPELINE_METHOD=half|quant|onebit, of that element codec
 * (section 9):
 *   - a pipelined call equals, bit for bit, calls of the same method on
 *     each of its parts (the same bounds, each part with its own residual),
 *     over several steps of error feedback, F32/F64/F16/BF16, SUM and AVG,
 *     in place and out of place, and its residual is the parts' residuals
 *     side by side; every rank gets the same bits;
 *   - cc_coll_iallreduce equals the blocking call;
 *   - a single part, one rank, or (TOPK) a call whose parts TOPK would send
 *     densely runs uncut: the same bits as on a communicator without the
 *     setting;
 *   - ranks that disagree on CC_COLL_PIPELINE_BYTES get CC_COLL_ERR_MISMATCH
 *     on every rank, recvbuf untouched; a bad value fails creation with
 *     CC_COLL_ERR_CONFIG naming the variable.
 * Any failure prints the case and calls MPI_Abort (exit status non-zero).
 */
#define _POSIX_C_SOURCE 200809L /* setenv */

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "cc_coll.h"
#include "check.h"
#include "test_util.h"

#define CHUNK_BYTES (64u << 10)

static int g_ranks = 1;
static cc_coll_method_t g_method = CC_COLL_METHOD_TOPK;
static const char *g_method_name = "topk";

/* The method's params with error feedback; TOPK at density `density`. */
static cc_coll_params_t params_with(double density, uint64_t key)
{
    if (g_method == CC_COLL_METHOD_TOPK) return keyed(topk_params(density, 1), key);
    cc_coll_params_t p = method_params(g_method);
    p.mask |= CC_COLL_PARAMS_FIELD_EF;
    p.ef = 1;
    return keyed(p, key);
}


/* The library's chunk bounds: ceil(bytes / CHUNK_BYTES) chunks, n split as
 * evenly as possible, the first n % chunks one element longer. */
static size_t chunk_count(size_t n, size_t es) { return (n * es + CHUNK_BYTES - 1) / CHUNK_BYTES; }
static void chunk_bounds(size_t n, size_t chunks, size_t c, size_t *lo, size_t *hi)
{
    const size_t base = n / chunks, extra = n % chunks;
    *lo = c * base + (c < extra ? c : extra);
    *hi = *lo + base + (c < extra ? 1 : 0);
}


static void chunked_case(cc_coll_comm_h piped, cc_coll_comm_h plain, cc_coll_dtype_t d, cc_coll_op_t op,
                         int in_place, int nonblocking)
{
    char desc[160];
    snprintf(desc, sizeof desc, "%s %s %s%s", dtype_name(d), op == CC_COLL_SUM ? "sum" : "avg",
             in_place ? "in place" : "out of place", nonblocking ? " non-blocking" : "");
    g_test = desc;
    const size_t es = cc_coll_dtype_size(d);
    const size_t n = (3 * CHUNK_BYTES) / es + 37; /* four chunks, the last one short of nothing: even split */
    const size_t chunks = chunk_count(n, es);
    CHECK(chunks == 4, "the test's size does not give four chunks");
    const cc_coll_params_t whole = params_with(0.01, 1);
    unsigned char *send = xmalloc(n * es), *a = xmalloc(n * es), *b = xmalloc(n * es);
    for (int step = 0; step < 3; ++step) {
        fill_uniform(d, send, n, (uint64_t)step + 3u);
        if (in_place) memcpy(a, send, n * es);
        else memset(a, 0xa5, n * es);
        const void *src = in_place ? (const void *)a : (const void *)send;
        if (nonblocking) {
            cc_coll_request_h req = NULL;
            CHECK_CC(cc_coll_iallreduce(src, a, n, d, op, &whole, piped, NULL, &req));
            CHECK_CC(cc_coll_wait(req));
            CHECK_CC(cc_coll_request_free(req));
        } else {
            CHECK_CC(cc_coll_allreduce(src, a, n, d, op, &whole, piped, NULL));
        }
        if (g_ranks == 1) {  /* one rank: nothing to overlap, the call runs unchunked */
            CHECK_CC(cc_coll_allreduce(send, b, n, d, op, &whole, plain, NULL));
        } else {
            for (size_t c = 0; c < chunks; ++c) {
                size_t lo, hi;
                chunk_bounds(n, chunks, c, &lo, &hi);
                const cc_coll_params_t part = params_with(0.01, 100 + c);
                CHECK_CC(cc_coll_allreduce(send + lo * es, b + lo * es, hi - lo, d, op, &part, plain, NULL));
            }
        }
        CHECK(memcmp(a, b, n * es) == 0, "the pipelined call differs from the method on each part");
        expect_same_on_all_ranks(a, n * es, "pipelined result");
    }
    /* The residual is the chunks' residuals side by side. */
    double *ra = xmalloc(n * sizeof *ra), *rb = xmalloc(n * sizeof *rb);
    CHECK_CC(cc_coll_ef_get_residual(piped, &whole, a, n, d, ra));
    if (g_ranks == 1) CHECK_CC(cc_coll_ef_get_residual(plain, &whole, b, n, d, rb));
    for (size_t c = 0; c < chunks && g_ranks > 1; ++c) {
        size_t lo, hi;
        chunk_bounds(n, chunks, c, &lo, &hi);
        const cc_coll_params_t part = params_with(0.01, 100 + c);
        CHECK_CC(cc_coll_ef_get_residual(plain, &part, b + lo * es, hi - lo, d, rb + lo));
    }
    CHECK(memcmp(ra, rb, n * sizeof *ra) == 0, "the residual is not the chunks' residuals");
    CHECK_CC(cc_coll_ef_reset_all(piped));
    CHECK_CC(cc_coll_ef_reset_all(plain));
    free(ra);
    free(rb);
    free(send);
    free(a);
    free(b);
}

/* Dense chunks, or one chunk: the unchunked algorithm. */
static void unchunked_cases(cc_coll_comm_h piped, cc_coll_comm_h plain)
{
    g_test = "unchunked";
    const size_t n = 3 * CHUNK_BYTES / 4;
    float *send = xmalloc(n * sizeof *send), *a = xmalloc(n * sizeof *a), *b = xmalloc(n * sizeof *b);
    fill_uniform(CC_COLL_F32, send, n, 9);
    cc_coll_params_t p;
    if (g_method == CC_COLL_METHOD_TOPK) {
        /* density 0.6: every chunk's payloads would outweigh it on 2+ ranks */
        p = params_with(0.6, 5);
        expect_same_on_two_comms(send, a, b, n, CC_COLL_F32, CC_COLL_SUM, &p, piped, plain, 0,
                                 "dense chunks: not the unchunked call");
    }
    /* one chunk */
    p = params_with(0.01, 6);
    expect_same_on_two_comms(send, a, b, CHUNK_BYTES / 4, CC_COLL_F32, CC_COLL_SUM, &p, piped, plain, 0,
                             "one chunk: not the unchunked call");
    CHECK_CC(cc_coll_ef_reset_all(piped));
    CHECK_CC(cc_coll_ef_reset_all(plain));
    free(send);
    free(a);
    free(b);
}

static void disagreement(void)
{
    g_test = "settings";
    setenv("CC_COLL_PIPELINE_BYTES", "1k", 1);
    cc_coll_comm_h bad = NULL;
    const cc_coll_status_t st = cc_coll_comm_create(MPI_COMM_WORLD, &bad);
    unsetenv("CC_COLL_PIPELINE_BYTES");
    CHECK(st == CC_COLL_ERR_CONFIG && bad == NULL, "CC_COLL_PIPELINE_BYTES=1k was accepted");
    CHECK(strstr(cc_coll_last_error(), "CC_COLL_PIPELINE_BYTES") != NULL, "the message does not name the variable");
    if (g_ranks < 2) return;
    g_test = "ranks disagree";
    cc_coll_comm_h h = comm_with_pipeline(g_rank == 0 ? "64K" : NULL);
    const size_t n = 3 * CHUNK_BYTES / 4;
    float *x = xmalloc(n * sizeof *x), *keep = xmalloc(n * sizeof *keep);
    fill_uniform(CC_COLL_F32, x, n, 11);
    memcpy(keep, x, n * sizeof *x);
    const cc_coll_params_t p = params_with(0.01, 7);
    const cc_coll_status_t got = cc_coll_allreduce(x, x, n, CC_COLL_F32, CC_COLL_SUM, &p, h, NULL);
    CHECK(got == CC_COLL_ERR_MISMATCH, "ranks with different CC_COLL_PIPELINE_BYTES did not get CC_COLL_ERR_MISMATCH");
    CHECK(memcmp(x, keep, n * sizeof *x) == 0, "a refused call changed recvbuf");
    CHECK_CC(cc_coll_comm_destroy(h));
    free(x);
    free(keep);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_ranks);
    const char *method = getenv("CC_T_PIPELINE_METHOD");
    if (method != NULL) {
        static const struct { const char *name; cc_coll_method_t m; } known[] = {
            {"topk", CC_COLL_METHOD_TOPK}, {"half", CC_COLL_METHOD_HALF},
            {"quant", CC_COLL_METHOD_QUANT}, {"onebit", CC_COLL_METHOD_ONEBIT}};
        size_t i = 0;
        while (i < sizeof known / sizeof known[0] && strcmp(known[i].name, method) != 0) ++i;
        CHECK(i < sizeof known / sizeof known[0], "CC_T_PIPELINE_METHOD is not topk, half, quant or onebit");
        g_method = known[i].m;
        g_method_name = known[i].name;
    }
    cc_coll_comm_h piped = comm_with_pipeline("64K"), plain = comm_with_pipeline(NULL);
    const cc_coll_dtype_t dtypes[] = {CC_COLL_F32, CC_COLL_F64, CC_COLL_F16, CC_COLL_BF16};
    for (size_t i = 0; i < 4; ++i)
        for (int op = 0; op < 2; ++op)
            for (int in_place = 0; in_place < 2; ++in_place)
                chunked_case(piped, plain, dtypes[i], (cc_coll_op_t)op, in_place, 0);
    chunked_case(piped, plain, CC_COLL_F32, CC_COLL_SUM, 0, 1);
    unchunked_cases(piped, plain);
    disagreement();
    CHECK_CC(cc_coll_comm_destroy(piped));
    CHECK_CC(cc_coll_comm_destroy(plain));
    if (g_rank == 0) printf("mpi_pipeline %s (%d ranks): all checks passed\n", g_method_name, g_ranks);
    MPI_Finalize();
    return 0;
}
