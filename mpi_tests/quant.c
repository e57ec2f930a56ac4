/*
 * Methods QUANT and ONEBIT on real ranks (docs/algorithms.md section 10;
 * the block layout in docs/wire.md, "QUANT and ONEBIT blocks"), what the
 * conformance suite does not ask of every method:
 *   - chunk_exact: data constant on every chunk of every rank's block (the
 *     chunks start at each block's start, the last block padded) is sent
 *     exactly by both stages: MPI's sum, bit for bit, and no residual;
 *     every dtype, SUM and AVG, counts that leave the last block short;
 *   - nonfinite: a NaN or an infinity in one rank's input makes exactly its
 *     chunk of the result NaN on every rank (blocks and chunks as the
 *     layout cuts them), the rest finite, and no residual holds a
 *     non-finite value;
 *   - stochastic: with CC_COLL_QUANT_ROUNDING=stochastic a call is
 *     reproducible from its input and seed (same bits twice), another seed
 *     gives other bits, and nearest rounding differs from it;
 *   - wire_bytes: the statistics count 2 (P - 1) coded blocks per call, the
 *     block size of the layout.
 *
 *   mpi_quant [TEST...]   run all tests, or only the named ones
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

static const cc_coll_dtype_t kDtypes[] = {CC_COLL_F32, CC_COLL_F64, CC_COLL_F16, CC_COLL_BF16};
static const cc_coll_method_t kMethods[] = {CC_COLL_METHOD_QUANT, CC_COLL_METHOD_ONEBIT};
/* The defaults: elements per chunk, bits per element. */
static const size_t kChunk[] = {256, 1024};
static const size_t kBits[] = {4, 1};

static uint64_t g_key = 0x9a000;

static cc_coll_params_t params(cc_coll_method_t m, int ef, uint64_t seed)
{
    cc_coll_params_t p = keyed(method_params(m), g_key++);
    p.mask |= CC_COLL_PARAMS_FIELD_EF | CC_COLL_PARAMS_FIELD_SEED;
    p.ef = ef;
    p.seed = seed;
    return p;
}

/* Bytes of a block of m elements (wire.md): chunks of C, each an 8-byte
 * header and codes rounded up to 8 bytes. */
static size_t coded_size(size_t m, size_t C, size_t b)
{
    size_t bytes = 0;
    for (size_t lo = 0; lo < m; lo += C) {
        const size_t len = m - lo < C ? m - lo : C;
        bytes += 8 + ((len + 7) / 8 * b + 7) / 8 * 8;
    }
    return bytes;
}

/* The first element of the chunk holding element i, and one past its last:
 * blocks of m = ceil(n / P) from 0, chunks of C from each block's start. */
static void chunk_of(size_t i, size_t n, size_t C, size_t *lo, size_t *hi)
{
    const size_t m = (n + (size_t)g_size - 1) / (size_t)g_size;
    const size_t b = i / m, start = b * m;
    *lo = start + (i - start) / C * C;
    *hi = *lo + C;
    if (*hi > start + m) *hi = start + m;
    if (*hi > n) *hi = n;
}

static void call_ok(cc_coll_status_t st, const char *desc)
{
    if (st != CC_COLL_OK) die("%s", desc, (int)st);
}

static void test_chunk_exact(cc_coll_comm_h h)
{
    const size_t counts[] = {4096, 4099, 1000 * (size_t)g_size + 7};
    double *x = xmalloc(8192 * sizeof *x), *e = xmalloc(8192 * sizeof *e), *sum = xmalloc(8192 * sizeof *sum);
    for (size_t mi = 0; mi < 2; ++mi)
        for (size_t ci = 0; ci < 3; ++ci) {
            const size_t n = counts[ci];
            /* Small integers, one per (chunk, rank): exact sums in every
             * dtype. The chunk that ends at n is zero: the last block is
             * coded from a copy padded with zeros, and a chunk of values
             * and padding is not constant. */
            size_t last_lo, last_hi;
            chunk_of(n - 1, n, kChunk[mi], &last_lo, &last_hi);
            for (size_t i = 0; i < n; ++i) {
                size_t lo, hi;
                chunk_of(i, n, kChunk[mi], &lo, &hi);
                x[i] = lo == last_lo ? 0.0 : (double)((int)((lo * 7 + (size_t)g_rank * 3) % 11) - 5);
            }
            CHECK(MPI_Allreduce(x, sum, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS, "reference");
            for (int di = 0; di < 4; ++di)
                for (int op = 0; op < 2; ++op) {
                    const cc_coll_dtype_t d = kDtypes[di];
                    const size_t es = cc_coll_dtype_size(d);
                    unsigned char *buf = xmalloc(n * es), *ref = xmalloc(n * es);
                    double *want = xmalloc(n * sizeof *want);
                    /* AVG: the sum divided in the work type (binary32 but for F64). */
                    for (size_t i = 0; i < n; ++i)
                        want[i] = !op ? sum[i]
                                      : d == CC_COLL_F64 ? sum[i] / g_size
                                                         : (double)((float)sum[i] / (float)g_size);
                    pack(d, want, n, ref);
                    char desc[160];
                    snprintf(desc, sizeof desc, "chunk-constant data: %s n=%zu %s %s (P=%d)",
                             cc_coll_method_name(kMethods[mi]), n, dtype_name(d), op ? "AVG" : "SUM", g_size);
                    pack(d, x, n, buf);
                    const cc_coll_params_t p = params(kMethods[mi], 1, 1);
                    call_ok(cc_coll_allreduce(buf, buf, n, d, (cc_coll_op_t)op, &p, h, NULL), desc);
                    expect_equal(d, buf, ref, n, desc);
                    CHECK_CC(cc_coll_ef_get_residual(h, &p, buf, n, d, e));
                    for (size_t i = 0; i < n; ++i)
                        if (e[i] != 0.0) die("%s: a residual where the coding is exact", desc, 0);
                    CHECK_CC(cc_coll_ef_reset(h, &p, buf, n, d));
                    free(buf);
                    free(ref);
                    free(want);
                }
        }
    free(x);
    free(e);
    free(sum);
}

static void test_nonfinite(cc_coll_comm_h h)
{
    const size_t n = 3000 * (size_t)g_size + 5;
    const double bad[] = {NAN, INFINITY, -INFINITY};
    float *x = xmalloc(n * sizeof *x), *y = xmalloc(n * sizeof *y);
    double *e = xmalloc(n * sizeof *e);
    for (size_t mi = 0; mi < 2; ++mi)
        for (int bi = 0; bi < 3; ++bi) {
            uint64_t s = 77 + (uint64_t)g_rank;
            for (size_t i = 0; i < n; ++i) x[i] = (float)(rng_uniform(&s) * 2 - 1);
            /* Rank 0's element in the middle of the last block's second chunk. */
            const size_t m = (n + (size_t)g_size - 1) / (size_t)g_size;
            size_t at = (size_t)(g_size - 1) * m + kChunk[mi] + 3;
            if (at >= n) at = n - 1;
            if (g_rank == 0) x[at] = (float)bad[bi];
            size_t lo, hi;
            chunk_of(at, n, kChunk[mi], &lo, &hi);
            char desc[160];
            snprintf(desc, sizeof desc, "%s with %g at %zu (chunk [%zu, %zu), P=%d)",
                     cc_coll_method_name(kMethods[mi]), bad[bi], at, lo, hi, g_size);
            const cc_coll_params_t p = params(kMethods[mi], 1, 1);
            call_ok(cc_coll_allreduce(x, y, n, CC_COLL_F32, CC_COLL_SUM, &p, h, NULL), desc);
            expect_same_on_all_ranks(y, n * sizeof *y, desc);
            for (size_t i = 0; i < n; ++i) {
                const int in_chunk = i >= lo && i < hi;
                if (in_chunk && !isnan(y[i])) die("%s: an element of the chunk is not NaN", desc, 0);
                if (!in_chunk && !isfinite(y[i])) die("%s: an element outside the chunk is not finite", desc, 0);
            }
            CHECK_CC(cc_coll_ef_get_residual(h, &p, x, n, CC_COLL_F32, e));
            for (size_t i = 0; i < n; ++i)
                if (!isfinite(e[i])) die("%s: a residual holds a non-finite value", desc, 0);
            CHECK_CC(cc_coll_ef_reset(h, &p, x, n, CC_COLL_F32));
        }
    free(x);
    free(y);
    free(e);
}

static void test_stochastic(cc_coll_comm_h h)
{
    (void)h;
    setenv("CC_COLL_QUANT_ROUNDING", "stochastic", 1);
    cc_coll_comm_h sc = NULL;
    CHECK_CC(cc_coll_comm_create(MPI_COMM_WORLD, &sc));
    unsetenv("CC_COLL_QUANT_ROUNDING");
    const size_t n = 5000;
    float *x = xmalloc(n * sizeof *x), *a = xmalloc(n * sizeof *a), *b = xmalloc(n * sizeof *b);
    float *c = xmalloc(n * sizeof *c), *nearest = xmalloc(n * sizeof *nearest);
    uint64_t s = 99 + (uint64_t)g_rank;
    for (size_t i = 0; i < n; ++i) x[i] = (float)(rng_uniform(&s) * 2 - 1);
    cc_coll_params_t p = params(CC_COLL_METHOD_QUANT, 0, 5);
    CHECK_CC(cc_coll_allreduce(x, a, n, CC_COLL_F32, CC_COLL_SUM, &p, sc, NULL));
    CHECK_CC(cc_coll_allreduce(x, b, n, CC_COLL_F32, CC_COLL_SUM, &p, sc, NULL));
    p.seed = 6;
    CHECK_CC(cc_coll_allreduce(x, c, n, CC_COLL_F32, CC_COLL_SUM, &p, sc, NULL));
    p.seed = 5;
    CHECK_CC(cc_coll_allreduce(x, nearest, n, CC_COLL_F32, CC_COLL_SUM, &p, h, NULL));
    expect_same_on_all_ranks(a, n * sizeof *a, "stochastic rounding");
    CHECK(memcmp(a, b, n * sizeof *a) == 0, "stochastic rounding: the same seed and input gave other bits");
    CHECK(memcmp(a, c, n * sizeof *a) != 0, "stochastic rounding: another seed gave the same bits");
    CHECK(memcmp(a, nearest, n * sizeof *a) != 0, "stochastic rounding: the same bits as nearest");
    CHECK_CC(cc_coll_comm_destroy(sc));
    free(x), free(a), free(b), free(c), free(nearest);
}

static void test_wire_bytes(cc_coll_comm_h h)
{
    const size_t n = 100000;
    float *x = xcalloc(n, sizeof *x);
    for (size_t mi = 0; mi < 2; ++mi) {
        CHECK_CC(cc_coll_comm_reset_stats(h));
        const cc_coll_params_t p = params(kMethods[mi], 0, 1);
        CHECK_CC(cc_coll_allreduce(x, x, n, CC_COLL_F32, CC_COLL_SUM, &p, h, NULL));
        const cc_coll_stats_t st = get_stats_masked(h, CC_COLL_STATS_FIELD_BYTES_WIRE);
        const size_t m = (n + (size_t)g_size - 1) / (size_t)g_size;
        const uint64_t want = 2 * (uint64_t)(g_size - 1) * coded_size(m, kChunk[mi], kBits[mi]);
        if (st.bytes_wire != want) {
            fprintf(stderr, "[rank %d] %s: bytes_wire %llu, expected %llu\n", g_rank,
                    cc_coll_method_name(kMethods[mi]), (unsigned long long)st.bytes_wire,
                    (unsigned long long)want);
            die("%s", "bytes on the wire", 0);
        }
    }
    free(x);
}

static const NamedTest kTests[] = {
    {"chunk_exact", test_chunk_exact},
    {"nonfinite", test_nonfinite},
    {"stochastic", test_stochastic},
    {"wire_bytes", test_wire_bytes},
};

int main(int argc, char **argv)
{
    return run_suite(argc, argv, "quant", kTests, sizeof kTests / sizeof kTests[0], 1, NULL);
}
