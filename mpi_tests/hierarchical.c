/*
 * The hierarchical allreduce (CC_COLL_HIERARCHY, docs/algorithms.md
 * "Hierarchical allreduce") with node boundaries faked by CC_COLL_NODES, on
 * every layout of the job's ranks the test knows (run with 1 to 4 ranks):
 * one node of P, nodes of 2, nodes of 1, and 3 + 1.
 *
 * For each layout, on a communicator created with CC_COLL_HIERARCHY=on:
 *   - NONE on small-integer data, SUM and AVG, in place and out of place,
 *     F32/F64/F16/BF16, counts that split unevenly: bit for bit equal to
 *     the flat communicator's result (exact sums, so any summation order
 *     gives the same bits);
 *   - TOPK (its allgather and split algorithms on the rails), SKETCH and
 *     LOWRANK on Gaussian data: every rank gets the same
 *     bits; the error-feedback invariant over several steps,
 *     sum_t result_t + sum_ranks e_T == sum_t sum_ranks g_t (SUM), with
 *     the residuals read through cc_coll_ef_get_residual (each rank's is
 *     its shard's, zero elsewhere); cc_coll_ef_reset forgets them;
 *   - cc_coll_allreduce_group with every method and a tensor of count 0:
 *     NONE tensors equal the flat group's, every tensor the same bits on
 *     every rank, the EF invariant for the lossy ones;
 *   - cc_coll_iallreduce equal bit for bit to the blocking call on a twin
 *     communicator of the same layout;
 *   - statistics: a TOPK call counts fewer wire bytes than the tensor;
 *   - a checkpoint (cc_coll_state_export) restored into a twin of the same
 *     layout (cc_coll_state_import): the next steps and the residuals are
 *     bit-identical;
 *   - cc_coll_lowrank_get_state (shard-shaped state) refuses with
 *     CC_COLL_ERR_NOT_SUPPORTED;
 * and CC_COLL_NODES sizes that do not add up to the communicator's size are
 * CC_COLL_ERR_CONFIG from cc_coll_comm_create on every rank.
 *
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

static cc_coll_comm_h make_comm(const char *hierarchy, const char *nodes)
{
    setenv("CC_COLL_HIERARCHY", hierarchy, 1);
    setenv("CC_COLL_NODES", nodes, 1);
    cc_coll_comm_h h = NULL;
    CHECK_CC(cc_coll_comm_create(MPI_COMM_WORLD, &h));
    setenv("CC_COLL_HIERARCHY", "off", 1);
    setenv("CC_COLL_NODES", "", 1);
    return h;
}

static cc_coll_params_t hier_params(cc_coll_method_t m, uint64_t key)
{
    cc_coll_params_t p = keyed(method_params(m), key);
    p.mask |= CC_COLL_PARAMS_FIELD_EF;
    p.ef = 1;
    if (m == CC_COLL_METHOD_TOPK || m == CC_COLL_METHOD_SKETCH) {
        p.mask |= CC_COLL_PARAMS_FIELD_DENSITY;
        p.density = 0.05;
    }
    if (m == CC_COLL_METHOD_LOWRANK) {
        p.mask |= CC_COLL_PARAMS_FIELD_SHAPE | CC_COLL_PARAMS_FIELD_RANK;
        p.rows = 60;
        p.cols = 0;
        p.rank = 2;
    }
    return p;
}

/* Every rank holds the same `bytes` bytes as rank 0. */
/* ---- NONE: exact sums equal the flat communicator's, bit for bit --------------- */

static void none_case(cc_coll_comm_h hier, cc_coll_comm_h flat, cc_coll_dtype_t d, size_t n, cc_coll_op_t op,
                      int in_place)
{
    char desc[160];
    snprintf(desc, sizeof desc, "NONE %s n=%zu %s %s", dtype_name(d), n, op == CC_COLL_SUM ? "sum" : "avg",
             in_place ? "in place" : "out of place");
    g_test = desc;
    const size_t es = cc_coll_dtype_size(d);
    double *x = xmalloc(n * sizeof *x);
    for (size_t i = 0; i < n; ++i) x[i] = (double)((int)((i * 7 + (size_t)g_rank * 3) % 9) - 4);
    unsigned char *send = xmalloc(n * es), *a = xmalloc(n * es), *b = xmalloc(n * es);
    pack(d, x, n, send);
    cc_coll_params_t p = hier_params(CC_COLL_METHOD_NONE, 1);
    expect_same_on_two_comms(send, a, b, n, d, op, &p, hier, flat, in_place, "the hierarchical result differs from the flat one");
    free(x);
    free(send);
    free(a);
    free(b);
}

static void test_none(cc_coll_comm_h hier, cc_coll_comm_h flat)
{
    const cc_coll_dtype_t dts[] = {CC_COLL_F32, CC_COLL_F64, CC_COLL_F16, CC_COLL_BF16};
    const size_t counts[] = {1, 2, 3, 7, 1000, 100003};
    for (size_t di = 0; di < 4; ++di)
        for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ++ci)
            for (int op = 0; op < 2; ++op)
                for (int ip = 0; ip < 2; ++ip)
                    none_case(hier, flat, dts[di], counts[ci], op ? CC_COLL_AVG : CC_COLL_SUM, ip);
}

/* ---- lossy methods: same bits everywhere, the EF invariant ------------------------ */

static void lossy_case(cc_coll_comm_h hier, cc_coll_method_t m, cc_coll_dtype_t d, size_t n, int steps,
                       uint64_t key)
{
    char desc[160];
    snprintf(desc, sizeof desc, "%s %s n=%zu, %d steps", cc_coll_method_name(m), dtype_name(d), n, steps);
    g_test = desc;
    const size_t es = cc_coll_dtype_size(d);
    cc_coll_params_t p = hier_params(m, key);
    unsigned char *buf = xmalloc(n * es);
    double *g = xmalloc(n * sizeof *g), *acc = xcalloc(n, sizeof *acc), *scale = xcalloc(n, sizeof *scale);
    double *e = xmalloc(n * sizeof *e);
    uint64_t s = 0x41e7ull + (uint64_t)g_rank * 7919ull + key;
    for (int t = 0; t < steps; ++t) {
        for (size_t i = 0; i < n; ++i) {
            /* Gaussian-ish data with a few large elements, rounded to the dtype */
            double v = (rng_uniform(&s) - 0.5) + (rng_uniform(&s) - 0.5) + (rng_uniform(&s) - 0.5);
            if (i % 97 == (size_t)t) v *= 20.0;
            g[i] = round_to(d, v);
        }
        pack(d, g, n, buf);
        CHECK_CC(cc_coll_allreduce(buf, buf, n, d, CC_COLL_SUM, &p, hier, NULL));
        expect_same_on_all_ranks(buf, n * es, "ranks got different bits");
        for (size_t i = 0; i < n; ++i) {
            acc[i] += g[i];  /* this rank's inputs; summed over ranks below */
            scale[i] += fabs(g[i]) * g_size + fabs(element(d, buf, i));
        }
        /* results are the same on every rank: take them once, on rank 0 */
        if (g_rank == 0)
            for (size_t i = 0; i < n; ++i) acc[i] -= element(d, buf, i);
    }
    CHECK_CC(cc_coll_ef_get_residual(hier, &p, buf, n, d, e));
    double own = 0.0;
    for (size_t i = 0; i < n; ++i) {
        acc[i] -= e[i];  /* sum_t g - [sum_t result] - e_T, this rank's share */
        own += fabs(e[i]);
    }
    MPI_Allreduce(MPI_IN_PLACE, acc, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, scale, (int)n, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    const double tol = d == CC_COLL_F64 ? 1e-9 : (d == CC_COLL_F32 ? 2e-5 : 2e-2);
    for (size_t i = 0; i < n; ++i)
        if (!(fabs(acc[i]) <= tol * (scale[i] + 1.0))) {
            fprintf(stderr, "[rank %d] %s: element %zu: sum of inputs - results - residuals = %.3g (scale %.3g)\n",
                    g_rank, desc, i, acc[i], scale[i]);
            die("%s: the error-feedback invariant does not hold", desc, 0);
        }
    /* TOPK and LOWRANK leave a residual somewhere (SKETCH may send small
     * tensors densely). */
    double total = 0.0;
    MPI_Allreduce(&own, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    CHECK(m == CC_COLL_METHOD_SKETCH || total > 0.0, "no rank kept a residual");
    /* cc_coll_ef_reset forgets this rank's shard residual */
    CHECK_CC(cc_coll_ef_reset(hier, &p, buf, n, d));
    CHECK_CC(cc_coll_ef_get_residual(hier, &p, buf, n, d, e));
    for (size_t i = 0; i < n; ++i) CHECK(e[i] == 0.0, "a residual survived cc_coll_ef_reset");
    free(buf);
    free(g);
    free(acc);
    free(scale);
    free(e);
}

static void test_lossy(cc_coll_comm_h hier, cc_coll_comm_h hier_split)
{
    /* the rails run TOPK's split algorithm where they have two or more ranks */
    lossy_case(hier_split, CC_COLL_METHOD_TOPK, CC_COLL_F32, 10007, 4, 18);
    lossy_case(hier_split, CC_COLL_METHOD_TOPK, CC_COLL_F64, 3001, 3, 19);
    lossy_case(hier, CC_COLL_METHOD_TOPK, CC_COLL_F32, 10007, 4, 11);
    lossy_case(hier, CC_COLL_METHOD_TOPK, CC_COLL_F64, 3001, 3, 12);
    lossy_case(hier, CC_COLL_METHOD_TOPK, CC_COLL_BF16, 4096, 3, 13);
    lossy_case(hier, CC_COLL_METHOD_SKETCH, CC_COLL_F32, 20000, 3, 14);
    lossy_case(hier, CC_COLL_METHOD_SKETCH, CC_COLL_F64, 5003, 3, 15);
    lossy_case(hier, CC_COLL_METHOD_LOWRANK, CC_COLL_F32, 60 * 50, 4, 16);
    lossy_case(hier, CC_COLL_METHOD_LOWRANK, CC_COLL_F64, 60 * 31, 3, 17);
}

/* ---- non-blocking: equal to the blocking call on a twin ------------------------- */

static void test_nonblocking(cc_coll_comm_h hier, cc_coll_comm_h twin)
{
    const cc_coll_method_t ms[] = {CC_COLL_METHOD_NONE, CC_COLL_METHOD_TOPK, CC_COLL_METHOD_SKETCH,
                                   CC_COLL_METHOD_LOWRANK};
    const size_t n = 60 * 40;
    for (size_t mi = 0; mi < 4; ++mi) {
        char desc[96];
        snprintf(desc, sizeof desc, "cc_coll_iallreduce %s", cc_coll_method_name(ms[mi]));
        g_test = desc;
        cc_coll_params_t p = hier_params(ms[mi], 100 + mi);
        float *a = xmalloc(n * sizeof *a), *b = xmalloc(n * sizeof *b);
        uint64_t s = 0x77ull + (uint64_t)g_rank;
        for (int t = 0; t < 3; ++t) {
            /* exact sums: MPI's blocking and non-blocking reduce-scatters
             * may add in different orders */
            for (size_t i = 0; i < n; ++i) a[i] = b[i] = (float)((int)(rng_next(&s) % 17) - 8) * 0.25f;
            cc_coll_request_h r = NULL;
            CHECK_CC(cc_coll_iallreduce(a, a, n, CC_COLL_F32, CC_COLL_AVG, &p, hier, NULL, &r));
            CHECK_CC(cc_coll_wait(r));
            CHECK_CC(cc_coll_request_free(r));
            CHECK_CC(cc_coll_allreduce(b, b, n, CC_COLL_F32, CC_COLL_AVG, &p, twin, NULL));
            CHECK(memcmp(a, b, n * sizeof *a) == 0, "differs from the blocking call");
        }
        free(a);
        free(b);
    }
}

/* ---- groups: every method in one cc_coll_allreduce_group ----------------------------- */

enum { kGroup = 6 };

/* Tensors: NONE f32 and NONE bf16 on small integers (exact), TOPK f32,
 * LOWRANK f32 (60 x 40), SKETCH f64, and one of count 0. The NONE tensors
 * equal the flat communicator's group bit for bit; every tensor's result is
 * the same on every rank; the lossy ones keep the EF invariant over the
 * steps, their residuals read per tensor. */
static void test_group(cc_coll_comm_h hier, cc_coll_comm_h flat)
{
    g_test = "group";
    const cc_coll_method_t ms[kGroup] = {CC_COLL_METHOD_NONE, CC_COLL_METHOD_NONE,   CC_COLL_METHOD_TOPK,
                                         CC_COLL_METHOD_LOWRANK, CC_COLL_METHOD_SKETCH, CC_COLL_METHOD_TOPK};
    const cc_coll_dtype_t ds[kGroup] = {CC_COLL_F32, CC_COLL_BF16, CC_COLL_F32, CC_COLL_F32, CC_COLL_F64, CC_COLL_F32};
    const size_t ns[kGroup] = {1003, 17, 5000, 60 * 40, 6000, 0};
    cc_coll_params_t ps[kGroup];
    void *buf[kGroup], *ref[kGroup];
    double *acc[kGroup], *scale[kGroup];
    size_t cnt[kGroup];
    cc_coll_dtype_t dt[kGroup];
    for (int i = 0; i < kGroup; ++i) {
        ps[i] = hier_params(ms[i], 700 + (uint64_t)i);
        const size_t es = cc_coll_dtype_size(ds[i]);
        buf[i] = xmalloc(ns[i] * es + 1);
        ref[i] = xmalloc(ns[i] * es + 1);
        acc[i] = xcalloc(ns[i] + 1, sizeof(double));
        scale[i] = xcalloc(ns[i] + 1, sizeof(double));
        cnt[i] = ns[i];
        dt[i] = ds[i];
    }
    uint64_t s = 0x6e0ull + (uint64_t)g_rank * 31ull;
    for (int t = 0; t < 3; ++t) {
        for (int i = 0; i < kGroup; ++i) {
            double *x = xmalloc((ns[i] + 1) * sizeof *x);
            for (size_t j = 0; j < ns[i]; ++j) {
                x[j] = ms[i] == CC_COLL_METHOD_NONE ? (double)((int)(rng_next(&s) % 9) - 4)
                                                    : round_to(ds[i], rng_uniform(&s) - 0.5);
                acc[i][j] += x[j];
                scale[i][j] += fabs(x[j]) * g_size;
            }
            pack(ds[i], x, ns[i], buf[i]);
            pack(ds[i], x, ns[i], ref[i]);
            free(x);
        }
        CHECK_CC(cc_coll_allreduce_group(kGroup, NULL, buf, cnt, dt, CC_COLL_SUM, ps, hier, NULL));
        CHECK_CC(cc_coll_allreduce_group(2, NULL, ref, cnt, dt, CC_COLL_SUM, ps, flat, NULL));
        for (int i = 0; i < kGroup; ++i) {
            const size_t bytes = ns[i] * cc_coll_dtype_size(ds[i]);
            if (bytes > 0) expect_same_on_all_ranks(buf[i], bytes, "ranks got different bits for a group tensor");
            if (i < 2) CHECK(memcmp(buf[i], ref[i], bytes) == 0, "a NONE group tensor differs from the flat group");
            for (size_t j = 0; j < ns[i]; ++j) {
                if (g_rank == 0) acc[i][j] -= element(ds[i], buf[i], j);
                scale[i][j] += fabs(element(ds[i], buf[i], j));
            }
        }
    }
    for (int i = 2; i < 5; ++i) {
        double *e = xmalloc(ns[i] * sizeof *e);
        CHECK_CC(cc_coll_ef_get_residual(hier, &ps[i], buf[i], ns[i], ds[i], e));
        for (size_t j = 0; j < ns[i]; ++j) acc[i][j] -= e[j];
        MPI_Allreduce(MPI_IN_PLACE, acc[i], (int)ns[i], MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        MPI_Allreduce(MPI_IN_PLACE, scale[i], (int)ns[i], MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        for (size_t j = 0; j < ns[i]; ++j)
            if (!(fabs(acc[i][j]) <= 2e-5 * (scale[i][j] + 1.0))) {
                fprintf(stderr, "[rank %d] group tensor %d element %zu: %.3g (scale %.3g)\n", g_rank, i, j, acc[i][j],
                        scale[i][j]);
                die("%s", "the error-feedback invariant does not hold for a group tensor", 0);
            }
        free(e);
    }
    CHECK_CC(cc_coll_ef_reset_all(hier));
    CHECK_CC(cc_coll_ef_reset_all(flat));
    for (int i = 0; i < kGroup; ++i) {
        free(buf[i]);
        free(ref[i]);
        free(acc[i]);
        free(scale[i]);
    }
}

/* ---- statistics and refusals ------------------------------------------------------ */

static cc_coll_stats_t one_topk_call(cc_coll_comm_h h, size_t n)
{
    float *x = xmalloc(n * sizeof *x);
    for (size_t i = 0; i < n; ++i) x[i] = (float)((i * 31 + (size_t)g_rank) % 1000) - 500.0f;
    CHECK_CC(cc_coll_comm_reset_stats(h));
    cc_coll_params_t p = hier_params(CC_COLL_METHOD_TOPK, 300);
    p.density = 0.01;
    CHECK_CC(cc_coll_allreduce(x, x, n, CC_COLL_F32, CC_COLL_SUM, &p, h, NULL));
    cc_coll_stats_t st;
    memset(&st, 0, sizeof st);
    st.mask = CC_COLL_STATS_FIELD_CALLS | CC_COLL_STATS_FIELD_BYTES_UNCOMPRESSED | CC_COLL_STATS_FIELD_BYTES_WIRE;
    CHECK_CC(cc_coll_comm_get_stats(h, &st));
    CHECK_CC(cc_coll_ef_reset(h, &p, x, n, CC_COLL_F32));
    free(x);
    return st;
}

/* Statistics tell the algorithms apart: a hierarchical TOPK call compresses
 * this rank's shard (1/S of the tensor, fewer pairs) and counts the bytes
 * its rail hands to MPI; a layout that runs flat counts what the flat
 * communicator does. */
static void test_stats_and_refusals(cc_coll_comm_h hier, cc_coll_comm_h flat, int hierarchical)
{
    g_test = "statistics";
    const size_t n = 100000;
    const cc_coll_stats_t st = one_topk_call(hier, n), fl = one_topk_call(flat, n);
    CHECK(st.calls == 1 && st.bytes_uncompressed == n * sizeof(float), "calls or bytes_uncompressed");
    CHECK(st.bytes_wire < n * sizeof(float), "a TOPK call counts fewer wire bytes than its tensor");
    if (hierarchical) {
        /* over all ranks (a rank beyond the smallest node's size owns no
         * shard and sends nothing; with one shard per node its owner sends
         * as much as a flat rank) */
        unsigned long long mine[2] = {st.bytes_wire, fl.bytes_wire}, total[2] = {0, 0};
        MPI_Allreduce(mine, total, 2, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
        CHECK(total[0] < total[1], "a hierarchical TOPK call sends less than the flat one");
    } else {
        CHECK(st.bytes_wire == fl.bytes_wire, "a layout that runs flat sends what the flat call sends");
    }
    uint64_t bytes = 0;
    CHECK_CC(cc_coll_ef_bytes(hier, &bytes));

    if (!hierarchical) return;  /* a layout that runs flat refuses nothing */
    g_test = "refusals";
    cc_coll_params_t lp = hier_params(CC_COLL_METHOD_LOWRANK, 16);
    uint64_t rows = 0, cols = 0, calls = 0;
    int rank = 0;
    float probe[60];
    const cc_coll_status_t ls =
        cc_coll_lowrank_get_state(hier, &lp, probe, 60, CC_COLL_F32, &rows, &cols, &rank, &calls, NULL, NULL);
    CHECK(ls == CC_COLL_ERR_NOT_SUPPORTED, "cc_coll_lowrank_get_state on a hierarchical communicator");
    CHECK(strstr(cc_coll_last_error(), "CC_COLL_HIERARCHY") != NULL, "the message names the setting");
}

/* A checkpoint of a hierarchical communicator (its shards' residuals in a
 * nested rail section) restored into a twin of the same layout: the next
 * steps are bit-identical on both. */
static void test_checkpoint(cc_coll_comm_h hier, cc_coll_comm_h twin)
{
    g_test = "checkpoint";
    const size_t n = 20000;
    float *x = xmalloc(n * sizeof *x), *a = xmalloc(n * sizeof *a), *b = xmalloc(n * sizeof *b);
    cc_coll_params_t p = hier_params(CC_COLL_METHOD_TOPK, 500);
    uint64_t s = 0x99ull + (uint64_t)g_rank;
    for (int t = 0; t < 5; ++t) {
        for (size_t i = 0; i < n; ++i) x[i] = (float)(rng_uniform(&s) - 0.5);
        if (t == 2) {  /* checkpoint hier, restore it into twin */
            size_t size = 0;
            CHECK_CC(cc_coll_state_export(hier, NULL, &size));
            unsigned char *blob = xmalloc(size);
            CHECK_CC(cc_coll_state_export(hier, blob, &size));
            CHECK_CC(cc_coll_state_import(twin, blob, size));
            free(blob);
        }
        CHECK_CC(cc_coll_allreduce(x, a, n, CC_COLL_F32, CC_COLL_AVG, &p, hier, NULL));
        if (t >= 2) {
            CHECK_CC(cc_coll_allreduce(x, b, n, CC_COLL_F32, CC_COLL_AVG, &p, twin, NULL));
            CHECK(memcmp(a, b, n * sizeof *a) == 0, "the restored communicator's step differs");
        }
    }
    double *ea = xmalloc(n * sizeof *ea), *eb = xmalloc(n * sizeof *eb);
    CHECK_CC(cc_coll_ef_get_residual(hier, &p, a, n, CC_COLL_F32, ea));
    CHECK_CC(cc_coll_ef_get_residual(twin, &p, b, n, CC_COLL_F32, eb));
    CHECK(memcmp(ea, eb, n * sizeof *ea) == 0, "the residuals differ after the restore");
    CHECK_CC(cc_coll_ef_reset_all(hier));
    CHECK_CC(cc_coll_ef_reset_all(twin));
    free(x);
    free(a);
    free(b);
    free(ea);
    free(eb);
}

static void test_bad_nodes(void)
{
    g_test = "CC_COLL_NODES that do not add up";
    char nodes[32];
    snprintf(nodes, sizeof nodes, "%d,1", g_size);
    setenv("CC_COLL_HIERARCHY", "on", 1);
    setenv("CC_COLL_NODES", nodes, 1);
    cc_coll_comm_h h = NULL;
    const cc_coll_status_t st = cc_coll_comm_create(MPI_COMM_WORLD, &h);
    setenv("CC_COLL_HIERARCHY", "off", 1);
    setenv("CC_COLL_NODES", "", 1);
    CHECK(st == CC_COLL_ERR_CONFIG && h == NULL, "expected CC_COLL_ERR_CONFIG and no communicator");
    CHECK(strstr(cc_coll_last_error(), "CC_COLL_NODES") != NULL, "the message names CC_COLL_NODES");
}

int main(int argc, char **argv)
{
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);

    /* Layouts: one node of P, nodes of 2, nodes of 1, 3 + 1. */
    char layouts[4][16];
    int nlayouts = 0;
    snprintf(layouts[nlayouts++], 16, "%d", g_size);
    if (g_size > 2) snprintf(layouts[nlayouts++], 16, "2");
    if (g_size > 1) snprintf(layouts[nlayouts++], 16, "1");
    if (g_size == 4) snprintf(layouts[nlayouts++], 16, "3,1");

    cc_coll_comm_h flat = make_comm("off", "");
    for (int l = 0; l < nlayouts; ++l) {
        cc_coll_comm_h hier = make_comm("on", layouts[l]);
        cc_coll_comm_h twin = make_comm("on", layouts[l]);
        setenv("CC_COLL_TOPK_ALGORITHM", "split", 1);
        cc_coll_comm_h hier_split = make_comm("on", layouts[l]);
        setenv("CC_COLL_TOPK_ALGORITHM", "auto", 1);
        test_none(hier, flat);
        test_lossy(hier, hier_split);
        test_nonblocking(hier, twin);
        test_group(hier, flat);
        /* nodes of one rank, or one rank in all: nothing to do inside a node, flat */
        test_stats_and_refusals(hier, flat, g_size > 1 && strcmp(layouts[l], "1") != 0);
        test_checkpoint(hier, twin);
        CHECK_CC(cc_coll_comm_destroy(twin));
        CHECK_CC(cc_coll_comm_destroy(hier_split));
        CHECK_CC(cc_coll_comm_destroy(hier));
        if (g_rank == 0) printf("hierarchical: layout CC_COLL_NODES=%s passed\n", layouts[l]);
    }
    test_bad_nodes();
    CHECK_CC(cc_coll_comm_destroy(flat));
    if (g_rank == 0) printf("hierarchical: all tests passed on %d ranks\n", g_size);
    MPI_Finalize();
    return 0;
}
