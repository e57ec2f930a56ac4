/*
 * What a failed exchange leaves (docs/algorithms.md 1.5) for the element
 * codecs HALF, QUANT and ONEBIT with error feedback, with real ranks (run
 * with 2 to 4 ranks). This program interposes MPI_Alltoall, MPI_Ialltoall,
 * MPI_Allgather and MPI_Iallgather (MPI's profiling interface): it counts
 * them, and can make the k-th of a call fail on every rank (MPI_ERR_OTHER,
 * without reaching PMPI_..., so no rank waits for another).
 *
 * For every method, the allreduce whole and in parts (CC_COLL_PIPELINE_BYTES)
 * and the reduce-scatter, F32 and F64, and every exchange k of the call:
 *   - step 1 runs on two communicators, a and b;
 *   - step 2 on a, with exchange k failing, returns CC_COLL_ERR_MPI on every
 *     rank and leaves recvbuf untouched;
 *   - a's residual is then b's (the one from before the failed call), within
 *     a few units in the last place of the work type at the data's
 *     magnitude: the coding error that step 1 of the algorithm left in the
 *     residual, and the owner's stage, are taken back out (before the fix
 *     the residual was off by the whole input);
 *   - step 2 then succeeds on a (the allreduce: the same bits on every rank).
 * Any failure prints the case and calls MPI_Abort (exit status non-zero).
 */
#define _POSIX_C_SOURCE 200809L /* setenv */

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

/* ---- the interposed exchanges ----------------------------------------------- */

static int g_calls = 0;   /* exchanges seen since the last reset */
static int g_fail_at = 0; /* 1-based exchange that fails; 0: none */

/* 1 when this exchange is the one to fail. */
static int fails_now(void) { return ++g_calls == g_fail_at; }

int MPI_Alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                 MPI_Datatype recvtype, MPI_Comm comm)
{
    if (fails_now()) return MPI_ERR_OTHER;
    return PMPI_Alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}

int MPI_Ialltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                  MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request)
{
    if (fails_now()) {
        *request = MPI_REQUEST_NULL;
        return MPI_ERR_OTHER;
    }
    return PMPI_Ialltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request);
}

int MPI_Allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                  MPI_Datatype recvtype, MPI_Comm comm)
{
    if (fails_now()) return MPI_ERR_OTHER;
    return PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}

int MPI_Iallgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                   MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request)
{
    if (fails_now()) {
        *request = MPI_REQUEST_NULL;
        return MPI_ERR_OTHER;
    }
    return PMPI_Iallgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request);
}

/* ---- the cases ---------------------------------------------------------------- */

static int g_ranks = 1;

/* 40000 F32 elements are 3 parts of 64 KiB (F64: 5); not a multiple of 2,
 * 3 or 4 ranks' blocks' chunks, so the last block is padded. */
#define COUNT 40001u
#define PIPELINE "64K"

enum Call { kAllreduce, kReduceScatter };



/* One step of the call on h: n input elements (the reduce-scatter: n / P
 * results per rank). */
static cc_coll_status_t step(enum Call call, cc_coll_comm_h h, const cc_coll_params_t *p, const void *send, void *recv,
                             size_t n, cc_coll_dtype_t d)
{
    if (call == kAllreduce) return cc_coll_allreduce(send, recv, n, d, CC_COLL_SUM, p, h, NULL);
    return cc_coll_reduce_scatter(send, recv, n / (size_t)g_ranks, d, CC_COLL_SUM, p, h, NULL);
}

/* The exchanges of one step of the call (the same on every rank). */
static int exchanges_of(enum Call call, cc_coll_comm_h h, const cc_coll_params_t *p, const void *send, void *recv,
                        size_t n, cc_coll_dtype_t d)
{
    g_calls = 0;
    g_fail_at = 0;
    CHECK_CC(step(call, h, p, send, recv, n, d));
    return g_calls;
}

static void failed_case(cc_coll_method_t m, const char *name, enum Call call, const char *pipeline, cc_coll_dtype_t d)
{
    char desc[200];
    const size_t es = cc_coll_dtype_size(d);
    const size_t n = call == kAllreduce ? COUNT : (COUNT / (size_t)g_ranks) * (size_t)g_ranks;
    const size_t rn = call == kAllreduce ? n : n / (size_t)g_ranks;
    const double eps = d == CC_COLL_F64 ? DBL_EPSILON : FLT_EPSILON;
    cc_coll_params_t p = method_params(m);
    p.mask |= CC_COLL_PARAMS_FIELD_EF;
    p.ef = 1;
    p = keyed(p, 42);
    unsigned char *x1 = xmalloc(n * es), *x2 = xmalloc(n * es), *out = xmalloc(rn * es), *keep = xmalloc(rn * es);
    double *ea = xmalloc(n * sizeof *ea), *eb = xmalloc(n * sizeof *eb), *in2 = xmalloc(n * sizeof *in2);
    fill_uniform(d, x1, n, 1);
    fill_uniform(d, x2, n, 2);
    for (size_t i = 0; i < n; ++i) in2[i] = element(d, x2, i);
    cc_coll_comm_h a = comm_with_pipeline(pipeline), b = comm_with_pipeline(pipeline);
    CHECK_CC(step(call, b, &p, x1, out, n, d));
    const int calls = exchanges_of(call, a, &p, x1, out, n, d);
    snprintf(desc, sizeof desc, "%s %s%s %s", name, call == kAllreduce ? "allreduce" : "reduce-scatter",
             pipeline ? " in parts" : "", dtype_name(d));
    g_test = desc;
    CHECK(calls >= 1, "the call made no MPI_(I)alltoall or MPI_(I)allgather");
    CHECK_CC(cc_coll_ef_get_residual(b, &p, x1, n, d, eb));
    /* The undo adds each element's decoded code back to its coding error,
     * rounding at the code's magnitude, which is at most the largest
     * |e + x| of its chunk (max-min and sign codes decode within it). */
    double scale = 0.0;
    for (size_t i = 0; i < n; ++i) scale = fmax(scale, fabs(eb[i]) + fabs(in2[i]));
    for (int k = 1; k <= calls; ++k) {
        snprintf(desc, sizeof desc, "%s %s%s %s, exchange %d of %d fails", name,
                 call == kAllreduce ? "allreduce" : "reduce-scatter", pipeline ? " in parts" : "", dtype_name(d), k,
                 calls);
        memset(out, 0xa5, rn * es);
        memcpy(keep, out, rn * es);
        g_calls = 0;
        g_fail_at = k;
        const cc_coll_status_t st = step(call, a, &p, x2, out, n, d);
        g_fail_at = 0;
        CHECK(st == CC_COLL_ERR_MPI, "the failed exchange did not return CC_COLL_ERR_MPI");
        CHECK(strstr(cc_coll_last_error(), "MPI_") != NULL, "the message does not name the MPI call");
        CHECK(memcmp(out, keep, rn * es) == 0, "the failed call wrote recvbuf");
        CHECK_CC(cc_coll_ef_get_residual(a, &p, x1, n, d, ea));
        for (size_t i = 0; i < n; ++i) {
            const double tol = 8.0 * eps * (fabs(eb[i]) + fabs(in2[i]) + scale);
            if (!(fabs(ea[i] - eb[i]) <= tol)) {
                fprintf(stderr, "[rank %d] %s: element %zu: residual %.17g, before the call %.17g\n", g_rank, desc, i,
                        ea[i], eb[i]);
                die("%s: the failed call changed the residual", desc, 0);
            }
        }
    }
    CHECK_CC(step(call, a, &p, x2, out, n, d));
    if (call == kAllreduce) expect_same_on_all_ranks(out, rn * es, "the result after the failed calls");
    CHECK_CC(cc_coll_comm_destroy(a));
    CHECK_CC(cc_coll_comm_destroy(b));
    free(x1);
    free(x2);
    free(out);
    free(keep);
    free(ea);
    free(eb);
    free(in2);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_ranks);
    if (g_ranks < 2) {
        if (g_rank == 0) printf("codec_failed_exchange: needs 2 or more ranks\n");
        MPI_Finalize();
        return 1;
    }
    static const struct { const char *name; cc_coll_method_t m; } methods[] = {
        {"half", CC_COLL_METHOD_HALF}, {"quant", CC_COLL_METHOD_QUANT}, {"onebit", CC_COLL_METHOD_ONEBIT}};
    static const cc_coll_dtype_t dtypes[] = {CC_COLL_F32, CC_COLL_F64};
    const double t0 = MPI_Wtime();
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; ++i)
        for (size_t j = 0; j < sizeof dtypes / sizeof dtypes[0]; ++j) {
            failed_case(methods[i].m, methods[i].name, kAllreduce, NULL, dtypes[j]);
            failed_case(methods[i].m, methods[i].name, kAllreduce, PIPELINE, dtypes[j]);
            failed_case(methods[i].m, methods[i].name, kReduceScatter, NULL, dtypes[j]);
        }
    if (g_rank == 0) printf("codec_failed_exchange: %d ranks: all tests passed in %.1f s\n", g_ranks, MPI_Wtime() - t0);
    MPI_Finalize();
    return 0;
}
