/*
 * Method TOPK's split algorithm (CC_COLL_TOPK_ALGORITHM=split,
 * docs/algorithms.md section 2.6) with real ranks (run with 1 to 4 ranks):
 *   - lossless when every region's reduced support fits its k_r: on sparse
 *     small-integer data whose nonzeros are the same on every rank, the
 *     result equals the allgather algorithm's (the exact sum) bit for bit,
 *     F32/F64/F16/BF16, SUM and AVG, in place and out of place, EF on/off;
 *   - on Gaussian data: every rank gets the same bits; the result has at
 *     most sum_r k_r nonzeros, fewer than the allgather's when P > 1; the
 *     error-feedback invariant over several steps, sum_t result_t +
 *     sum_ranks e_T == sum_t sum_ranks g_t (SUM), the owners' dropped sums
 *     included;
 *   - the dense fallbacks: a call whose pairs would outweigh the buffer is
 *     MPI_Allreduce bit for bit; a rank with more infinities than k makes
 *     every rank send densely, as the allgather algorithm does;
 *   - cc_coll_iallreduce equal bit for bit to the blocking call;
 *   - ranks that disagree on CC_COLL_TOPK_ALGORITHM get CC_COLL_ERR_MISMATCH
 *     on every rank, recvbuf untouched.
 * All of it three times: with the uncoded payload, with delta-coded indices
 * (CC_COLL_TOPK_INDEX_CODING=delta) and with 4-bit values
 * (CC_COLL_TOPK_VALUE_BITS=4; the lossless data is then the same on every
 * rank, so that the senders' and the owners' sums lie on their grids); the
 * coded runs send fewer wire bytes than the uncoded one on the same data.
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

/* The payload format of this pass: CC_COLL_TOPK_VALUE_BITS and
 * CC_COLL_TOPK_INDEX_CODING. */
static const char *g_value_bits = "full", *g_index_coding = "auto";

static cc_coll_comm_h comm_with(const char *algorithm)
{
    setenv("CC_COLL_TOPK_ALGORITHM", algorithm, 1);
    setenv("CC_COLL_TOPK_VALUE_BITS", g_value_bits, 1);
    setenv("CC_COLL_TOPK_INDEX_CODING", g_index_coding, 1);
    cc_coll_comm_h h = NULL;
    CHECK_CC(cc_coll_comm_create(MPI_COMM_WORLD, &h));
    setenv("CC_COLL_TOPK_ALGORITHM", "auto", 1);
    unsetenv("CC_COLL_TOPK_VALUE_BITS");
    unsetenv("CC_COLL_TOPK_INDEX_CODING");
    return h;
}

static cc_coll_params_t topk(double density, int ef, uint64_t key)
{
    return keyed(topk_params(density, ef), key);
}

/* ---- lossless: the same sparse support on every rank ---------------------------- */

static void lossless_case(cc_coll_comm_h split, cc_coll_comm_h gather, cc_coll_dtype_t d, size_t n,
                          cc_coll_op_t op, int ef, int in_place)
{
    char desc[160];
    snprintf(desc, sizeof desc, "values %s: lossless %s n=%zu %s ef=%d %s", g_value_bits, dtype_name(d), n,
             op == CC_COLL_SUM ? "sum" : "avg", ef, in_place ? "in place" : "out of place");
    /* 4-bit levels (7 a side): values 1..7 on every rank alike, so that each
     * payload's step is 1 and each region sum's is P */
    const int same = strcmp(g_value_bits, "4") == 0;
    g_test = desc;
    const double density = 0.01;
    const size_t es = cc_coll_dtype_size(d), k = k_for(density, n), P = (size_t)g_size;
    /* floor(k / P) nonzeros per region, the same positions on every rank:
     * each region's support fits its k_r = ceil(density * n / P) */
    double *x = xcalloc(n, sizeof *x);
    for (size_t r = 0; r < P; ++r) {
        const size_t lo = r * (n / P) + (r < n % P ? r : n % P);
        for (size_t j = 0; j < k / P; ++j) x[lo + 3 * j] = (double)((int)((j + r + (same ? 0 : (size_t)g_rank)) % 7) + 1);
    }
    unsigned char *send = xmalloc(n * es), *a = xmalloc(n * es), *b = xmalloc(n * es);
    pack(d, x, n, send);
    cc_coll_params_t p = topk(density, ef, 7 + (uint64_t)ef);
    expect_same_on_two_comms(send, a, b, n, d, op, &p, split, gather, in_place, "differs from the allgather algorithm's exact sum");
    if (ef) {
        CHECK_CC(cc_coll_ef_reset(split, &p, a, n, d));
        CHECK_CC(cc_coll_ef_reset(gather, &p, b, n, d));
    }
    free(x);
    free(send);
    free(a);
    free(b);
}

static void test_lossless(cc_coll_comm_h split, cc_coll_comm_h gather)
{
    const cc_coll_dtype_t dts[] = {CC_COLL_F32, CC_COLL_F64, CC_COLL_F16, CC_COLL_BF16};
    for (size_t di = 0; di < 4; ++di)
        for (int op = 0; op < 2; ++op)
            for (int ef = 0; ef < 2; ++ef)
                for (int ip = 0; ip < 2; ++ip) {
                    lossless_case(split, gather, dts[di], 10007, op ? CC_COLL_AVG : CC_COLL_SUM, ef, ip);
                    lossless_case(split, gather, dts[di], 40000, op ? CC_COLL_AVG : CC_COLL_SUM, ef, ip);
                }
}

/* ---- Gaussian data: bounded support, same bits, the EF invariant ------------------ */

static size_t nonzeros(const float *x, size_t n)
{
    size_t c = 0;
    for (size_t i = 0; i < n; ++i) c += x[i] != 0.0f;
    return c;
}

static void test_gaussian(cc_coll_comm_h split, cc_coll_comm_h gather)
{
    g_test = "gaussian";
    const size_t n = 50000, P = (size_t)g_size;
    const double density = 0.01;
    const int steps = 4;
    cc_coll_params_t p = topk(density, 1, 40), pg = topk(density, 1, 41);
    float *buf = xmalloc(n * sizeof *buf), *ref = xmalloc(n * sizeof *ref);
    double *acc = xcalloc(n, sizeof *acc), *scale = xcalloc(n, sizeof *scale), *e = xmalloc(n * sizeof *e);
    size_t bound = 0;
    for (size_t r = 0; r < P; ++r) bound += k_for(density, n / P + (r < n % P ? 1 : 0));
    uint64_t s = 0x5911ull + (uint64_t)g_rank * 104729ull;
    for (int t = 0; t < steps; ++t) {
        for (size_t i = 0; i < n; ++i) {
            const double v = (rng_uniform(&s) - 0.5) + (rng_uniform(&s) - 0.5);
            buf[i] = ref[i] = (float)v;
            acc[i] += (float)v;
            scale[i] += fabs(v) * (double)P;
        }
        CHECK_CC(cc_coll_allreduce(buf, buf, n, CC_COLL_F32, CC_COLL_SUM, &p, split, NULL));
        CHECK_CC(cc_coll_allreduce(ref, ref, n, CC_COLL_F32, CC_COLL_SUM, &pg, gather, NULL));
        expect_same_on_all_ranks(buf, n * sizeof *buf, "ranks got different bits");
        const size_t nz = nonzeros(buf, n), nz_gather = nonzeros(ref, n);
        CHECK(nz <= bound, "the result has more nonzeros than the regions' k_r");
        if (P > 1) CHECK(nz < nz_gather, "split keeps fewer nonzeros than the allgather on Gaussian data");
        for (size_t i = 0; i < n; ++i) {
            if (g_rank == 0) acc[i] -= buf[i];
            scale[i] += fabs(buf[i]);
        }
    }
    CHECK_CC(cc_coll_ef_get_residual(split, &p, buf, n, CC_COLL_F32, e));
    for (size_t i = 0; i < n; ++i) acc[i] -= e[i];
    MPI_Allreduce(MPI_IN_PLACE, acc, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, scale, (int)n, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    for (size_t i = 0; i < n; ++i)
        if (!(fabs(acc[i]) <= 2e-5 * (scale[i] + 1.0))) {
            fprintf(stderr, "[rank %d] element %zu: inputs - results - residuals = %.3g (scale %.3g)\n", g_rank, i,
                    acc[i], scale[i]);
            die("%s", "the error-feedback invariant does not hold", 0);
        }
    CHECK_CC(cc_coll_ef_reset_all(split));
    CHECK_CC(cc_coll_ef_reset_all(gather));
    free(buf);
    free(ref);
    free(acc);
    free(scale);
    free(e);
}

/* ---- the dense fallbacks: too dense a call, non-finite overflow -------------------- */

static void test_dense_fallbacks(cc_coll_comm_h split, cc_coll_comm_h gather)
{
    const size_t n = 20000;
    float *x = xmalloc(n * sizeof *x), *a = xmalloc(n * sizeof *a), *b = xmalloc(n * sizeof *b);
    for (size_t i = 0; i < n; ++i) x[i] = (float)((int)((i * 13 + (size_t)g_rank) % 11) - 5) * 0.5f;
    /* density 0.5: the pairs would outweigh the buffer, the call is dense */
    g_test = "dense call";
    cc_coll_params_t p = topk(0.5, 0, 70);
    CHECK_CC(cc_coll_allreduce(x, a, n, CC_COLL_F32, CC_COLL_SUM, &p, split, NULL));
    MPI_Allreduce(x, b, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    CHECK(memcmp(a, b, n * sizeof *a) == 0, "a dense TOPK call differs from MPI_Allreduce");
    /* rank 0 holds more infinities than k = 200: every rank falls back */
    g_test = "non-finite overflow";
    if (g_rank == 0)
        for (size_t i = 0; i < 300; ++i) x[i * 50] = INFINITY;
    p = topk(0.01, 0, 71);
    CHECK_CC(cc_coll_allreduce(x, a, n, CC_COLL_F32, CC_COLL_SUM, &p, split, NULL));
    CHECK_CC(cc_coll_allreduce(x, b, n, CC_COLL_F32, CC_COLL_SUM, &p, gather, NULL));
    CHECK(memcmp(a, b, n * sizeof *a) == 0, "the overflow fallback differs from the allgather's");
    CHECK(isinf(a[50]) && a[1] == b[1], "the dense sum carries the infinities");
    free(x);
    free(a);
    free(b);
}

/* ---- non-blocking ------------------------------------------------------------------ */

static void test_nonblocking(cc_coll_comm_h split, cc_coll_comm_h twin)
{
    g_test = "cc_coll_iallreduce";
    const size_t n = 30011;
    cc_coll_params_t p = topk(0.02, 1, 50);
    float *a = xmalloc(n * sizeof *a), *b = xmalloc(n * sizeof *b);
    uint64_t s = 0x77ull + (uint64_t)g_rank;
    for (int t = 0; t < 3; ++t) {
        for (size_t i = 0; i < n; ++i) a[i] = b[i] = (float)(rng_uniform(&s) - 0.5);
        cc_coll_request_h r = NULL;
        CHECK_CC(cc_coll_iallreduce(a, a, n, CC_COLL_F32, CC_COLL_AVG, &p, split, NULL, &r));
        CHECK_CC(cc_coll_wait(r));
        CHECK_CC(cc_coll_request_free(r));
        CHECK_CC(cc_coll_allreduce(b, b, n, CC_COLL_F32, CC_COLL_AVG, &p, twin, NULL));
        CHECK(memcmp(a, b, n * sizeof *a) == 0, "differs from the blocking call");
    }
    free(a);
    free(b);
}

/* ---- ranks that disagree on the algorithm ----------------------------------------- */

static void test_disagreement(void)
{
    if (g_size < 2) return;
    g_test = "disagreement";
    cc_coll_comm_h h = comm_with(g_rank == 0 ? "split" : "allgather");
    const size_t n = 20000;
    float *x = xmalloc(n * sizeof *x), *y = xmalloc(n * sizeof *y);
    for (size_t i = 0; i < n; ++i) x[i] = (float)i;
    memset(y, 0x3c, n * sizeof *y);
    cc_coll_params_t p = topk(0.01, 1, 60);
    const cc_coll_status_t st = cc_coll_allreduce(x, y, n, CC_COLL_F32, CC_COLL_SUM, &p, h, NULL);
    CHECK(st == CC_COLL_ERR_MISMATCH, "expected CC_COLL_ERR_MISMATCH");
    for (size_t i = 0; i < n; ++i) {
        uint32_t bits;
        memcpy(&bits, y + i, sizeof bits);
        CHECK(bits == 0x3c3c3c3cu, "recvbuf was written");
    }
    CHECK_CC(cc_coll_comm_destroy(h));
    free(x);
    free(y);
}

/* ---- the coded formats send fewer bytes ------------------------------------------- */

/* This pass's wire bytes for one split call on Gaussian data, summed over
 * the ranks. */
static unsigned long long split_wire_bytes(cc_coll_comm_h split)
{
    const size_t n = 60000;
    float *x = xmalloc(n * sizeof *x);
    uint64_t s = 0x3a11ull + (uint64_t)g_rank;
    for (size_t i = 0; i < n; ++i) x[i] = (float)(rng_uniform(&s) - 0.5);
    cc_coll_params_t p = topk(0.05, 1, 80);
    CHECK_CC(cc_coll_comm_reset_stats(split));
    CHECK_CC(cc_coll_allreduce(x, x, n, CC_COLL_F32, CC_COLL_SUM, &p, split, NULL));
    unsigned long long mine = get_stats_masked(split, CC_COLL_STATS_FIELD_BYTES_WIRE).bytes_wire, total = 0;
    MPI_Allreduce(&mine, &total, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    CHECK_CC(cc_coll_ef_reset_all(split));
    free(x);
    return total;
}

int main(int argc, char **argv)
{
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    static const char *const formats[][2] = {{"full", "auto"}, {"full", "delta"}, {"4", "auto"}};
    unsigned long long wire[3] = {0, 0, 0};
    for (int f = 0; f < 3; ++f) {
        g_value_bits = formats[f][0];
        g_index_coding = formats[f][1];
        cc_coll_comm_h split = comm_with("split"), twin = comm_with("split"), gather = comm_with("allgather");
        test_lossless(split, gather);
        test_gaussian(split, gather);
        test_dense_fallbacks(split, gather);
        test_nonblocking(split, twin);
        test_disagreement();
        wire[f] = split_wire_bytes(split);
        CHECK_CC(cc_coll_comm_destroy(split));
        CHECK_CC(cc_coll_comm_destroy(twin));
        CHECK_CC(cc_coll_comm_destroy(gather));
    }
    g_test = "wire bytes";
    if (g_size > 1) {
        /* density 0.05: an index costs about 6 bits coded, a value 4 */
        CHECK(wire[1] < wire[0] * 3 / 4, "delta-coded indices do not save a quarter of the pairs' bytes");
        CHECK(wire[2] < wire[0] / 4, "4-bit values with coded indices do not save three quarters");
    }
    if (g_rank == 0)
        printf("topk split: all tests passed on %d ranks (wire bytes: uncoded %llu, delta %llu, 4-bit %llu)\n", g_size,
               wire[0], wire[1], wire[2]);
    MPI_Finalize();
    return 0;
}
