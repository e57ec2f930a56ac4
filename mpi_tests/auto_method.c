/*
 * CC_COLL_METHOD_AUTO and its cost model (docs/algorithms.md section 8)
 * with real ranks (run with 1 to 4 ranks). The links are given with
 * CC_COLL_LINK, so the choices do not depend on this machine's network:
 *   - every rank holds the same model: cc_coll_auto_predict returns the
 *     same choice and the same predicted seconds on every rank;
 *   - on a slow link (1 Mbit/s) a large tensor is compressed (TOPK), on a
 *     fast one (10^5 Gbit/s, no latency) it is not; with one rank AUTO is
 *     always NONE (no link to save);
 *   - an AUTO call runs exactly its choice: bit for bit the explicit TOPK
 *     call on another communicator with the same history, or
 *     MPI_Allreduce's result for NONE, blocking and non-blocking, single
 *     tensors and groups; the statistics count the calls, the compressed
 *     ones and the predicted seconds (those cc_coll_auto_predict gives);
 *   - reduce-scatter with AUTO runs NONE: MPI_Reduce_scatter_block's bits;
 *   - on a hierarchical communicator (3 and 4 ranks on faked nodes) NONE is
 *     predicted on the rails, and AUTO's TOPK is the explicit call's bits;
 *   - CC_COLL_METHOD=auto names "auto"; a bad CC_COLL_AUTO_METHOD,
 *     CC_COLL_AUTO_CHECK or CC_COLL_LINK fails communicator creation with
 *     CC_COLL_ERR_CONFIG and a message naming the variable;
 *   - several candidates (CC_COLL_AUTO_METHOD=half,topk): AUTO runs one of
 *     them or NONE, bit for bit that method's call;
 *   - the online check (CC_COLL_AUTO_CHECK=on; the cases above run with it
 *     off, so that a call runs exactly the model's prediction): on one
 *     node, with the link given as 20 Mbit/s (a wrong model that favours
 *     LOWRANK) and with the link measured, AUTO ends up running NONE for
 *     4 MiB, which one node's shared memory moves ten to a hundred times
 *     faster than LOWRANK at rank 128 compresses it (2 ranks; with 3 and 4 ranks oversubscribing this
 *     machine's cores the times are not trusted here); the statistics count
 *     the calls that checked the model and their measured seconds.
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

static int g_ranks = 1;

static cc_coll_comm_h comm_on_link(const char *link)
{
    setenv("CC_COLL_LINK", link, 1);
    cc_coll_comm_h h = NULL;
    CHECK_CC(cc_coll_comm_create(MPI_COMM_WORLD, &h));
    unsetenv("CC_COLL_LINK");
    return h;
}

static cc_coll_params_t auto_params(void)
{
    cc_coll_params_t p = method_params(CC_COLL_METHOD_AUTO);
    p.mask |= CC_COLL_PARAMS_FIELD_DENSITY;
    p.density = 0.01;
    return p;
}

static cc_coll_stats_t auto_stats(cc_coll_comm_h c)
{
    cc_coll_stats_t s;
    memset(&s, 0, sizeof s);
    s.mask = CC_COLL_STATS_FIELD_AUTO_CALLS | CC_COLL_STATS_FIELD_AUTO_LOSSY_CALLS | CC_COLL_STATS_FIELD_AUTO_PREDICTED;
    CHECK_CC(cc_coll_comm_get_stats(c, &s));
    return s;
}

/* The same value on every rank (bitwise, for doubles). */
static void expect_same_everywhere(const void *v, size_t bytes, const char *what)
{
    unsigned char *all = xmalloc(bytes * (size_t)g_ranks);
    MPI_Allgather(v, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, MPI_COMM_WORLD);
    for (int r = 1; r < g_ranks; ++r) CHECK(memcmp(all, all + (size_t)r * bytes, bytes) == 0, what);
    free(all);
}

static void fill(float *x, size_t n, uint64_t seed)
{
    uint64_t s = seed * 7919u + (uint64_t)g_rank * 104729u + 1u;
    for (size_t i = 0; i < n; ++i) x[i] = (float)(rng_uniform(&s) * 2.0 - 1.0);
}

static void predictions(cc_coll_comm_h slow, cc_coll_comm_h fast)
{
    g_test = "predictions";
    const cc_coll_params_t p = auto_params();
    const size_t sizes[] = {1, 1000, 1u << 16, 1u << 20, 1u << 22};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; ++i) {
        cc_coll_method_t m_slow, m_fast;
        double t[4];
        CHECK_CC(cc_coll_auto_predict(slow, sizes[i], CC_COLL_F32, &p, &m_slow, &t[0], &t[1]));
        CHECK_CC(cc_coll_auto_predict(fast, sizes[i], CC_COLL_F32, &p, &m_fast, &t[2], &t[3]));
        expect_same_everywhere(t, sizeof t, "the predicted seconds differ between ranks");
        int m[2] = {(int)m_slow, (int)m_fast};
        expect_same_everywhere(m, sizeof m, "the choices differ between ranks");
        CHECK(t[0] >= 0 && t[2] >= 0 && t[1] >= 0 && t[3] >= 0, "a negative prediction");
        if (g_ranks == 1) {
            CHECK(m_slow == CC_COLL_METHOD_NONE && m_fast == CC_COLL_METHOD_NONE, "one rank compresses");
            CHECK(t[0] == 0 && t[2] == 0, "one rank predicts a wire time for NONE");
        } else {
            CHECK(m_fast == CC_COLL_METHOD_NONE, "a 10^5 Gbit/s link compresses");
            if (sizes[i] >= (1u << 20)) CHECK(m_slow == CC_COLL_METHOD_TOPK, "a 1 Mbit/s link does not compress 4 MiB");
            CHECK(t[0] > t[2], "NONE is predicted no slower on the slow link");
        }
        CHECK((m_slow == CC_COLL_METHOD_TOPK) == (t[1] < t[0]), "the choice is not the faster prediction");
    }
    /* Outputs may be NULL; a bad dtype is named. */
    CHECK_CC(cc_coll_auto_predict(slow, 10, CC_COLL_F64, NULL, NULL, NULL, NULL));
    CHECK(cc_coll_auto_predict(slow, 10, (cc_coll_dtype_t)9, NULL, NULL, NULL, NULL) == CC_COLL_ERR_INVALID_DTYPE,
          "a bad dtype is not CC_COLL_ERR_INVALID_DTYPE");
    CHECK(strstr(cc_coll_last_error(), "dtype") != NULL, "the message does not name the dtype");
}

/* AUTO on `a` against `method` on `b` (same settings, same history). */
static void runs_its_choice(cc_coll_comm_h a, cc_coll_comm_h b, size_t n, int nonblocking, const char *desc)
{
    g_test = desc;
    cc_coll_params_t pa = auto_params();
    cc_coll_method_t chosen;
    double t_none, t_lossy;
    CHECK_CC(cc_coll_auto_predict(a, n, CC_COLL_F32, &pa, &chosen, &t_none, &t_lossy));
    cc_coll_params_t pb = pa;
    pb.method = chosen;
    float *x = xmalloc(n * sizeof *x), *ra = xmalloc(n * sizeof *ra), *rb = xmalloc(n * sizeof *rb);
    const cc_coll_stats_t before = auto_stats(a);
    for (int step = 0; step < 3; ++step) {  /* error feedback carries over between steps */
        fill(x, n, (uint64_t)step + 11u);
        if (nonblocking) {
            cc_coll_request_h req = NULL;
            CHECK_CC(cc_coll_iallreduce(x, ra, n, CC_COLL_F32, CC_COLL_SUM, &pa, a, NULL, &req));
            CHECK_CC(cc_coll_wait(req));
            CHECK_CC(cc_coll_request_free(req));
        } else {
            CHECK_CC(cc_coll_allreduce(x, ra, n, CC_COLL_F32, CC_COLL_SUM, &pa, a, NULL));
        }
        if (chosen == CC_COLL_METHOD_NONE) MPI_Allreduce(x, rb, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        else CHECK_CC(cc_coll_allreduce(x, rb, n, CC_COLL_F32, CC_COLL_SUM, &pb, b, NULL));
        CHECK(memcmp(ra, rb, n * sizeof *ra) == 0, "AUTO's result differs from its choice's");
    }
    const cc_coll_stats_t after = auto_stats(a);
    CHECK(after.auto_calls - before.auto_calls == 3, "auto_calls did not count 3 calls");
    CHECK(after.auto_lossy_calls - before.auto_lossy_calls == (chosen == CC_COLL_METHOD_NONE ? 0u : 3u),
          "auto_lossy_calls does not match the choice");
    const double predicted = chosen == CC_COLL_METHOD_NONE ? t_none : t_lossy;
    CHECK(fabs((after.auto_predicted - before.auto_predicted) - 3 * predicted) <= 1e-9 * (1 + predicted),
          "auto_predicted is not 3 times cc_coll_auto_predict's");
    CHECK_CC(cc_coll_ef_reset_all(a));
    CHECK_CC(cc_coll_ef_reset_all(b));
    free(x);
    free(ra);
    free(rb);
}

static void group_and_reduce_scatter(cc_coll_comm_h slow)
{
    g_test = "group";
    const size_t counts[3] = {1u << 18, 1000, 1u << 17};
    void *bufs[3];
    const void *sends[3];
    cc_coll_dtype_t dtypes[3] = {CC_COLL_F32, CC_COLL_F32, CC_COLL_F32};
    cc_coll_params_t ps[3] = {auto_params(), auto_params(), auto_params()};
    float *in[3];
    for (int i = 0; i < 3; ++i) {
        in[i] = xmalloc(counts[i] * sizeof(float));
        fill(in[i], counts[i], 40u + (uint64_t)i);
        bufs[i] = xmalloc(counts[i] * sizeof(float));
        sends[i] = in[i];
    }
    const cc_coll_stats_t before = auto_stats(slow);
    CHECK_CC(cc_coll_allreduce_group(3, sends, bufs, counts, dtypes, CC_COLL_SUM, ps, slow, NULL));
    const cc_coll_stats_t after = auto_stats(slow);
    CHECK(after.auto_calls - before.auto_calls == 1, "a group is not one auto call");
    CHECK(after.auto_lossy_calls - before.auto_lossy_calls == (g_ranks > 1 ? 1u : 0u),
          "the slow link's group was not compressed");
    if (g_ranks == 1)
        for (int i = 0; i < 3; ++i) CHECK(memcmp(bufs[i], in[i], counts[i] * sizeof(float)) == 0, "one rank's NONE group changed data");
    for (int i = 0; i < 3; ++i) {
        free(in[i]);
        free(bufs[i]);
    }

    g_test = "reduce-scatter runs NONE";
    const size_t per = 1000;
    float *x = xmalloc(per * (size_t)g_ranks * sizeof *x), *got = xmalloc(per * sizeof *got),
          *want = xmalloc(per * sizeof *want);
    fill(x, per * (size_t)g_ranks, 77u);
    cc_coll_params_t p = auto_params();
    const cc_coll_stats_t rs0 = auto_stats(slow);
    CHECK_CC(cc_coll_reduce_scatter(x, got, per, CC_COLL_F32, CC_COLL_SUM, &p, slow, NULL));
    MPI_Reduce_scatter_block(x, want, (int)per, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    CHECK(memcmp(got, want, per * sizeof *got) == 0, "AUTO reduce-scatter is not MPI_Reduce_scatter_block");
    const cc_coll_stats_t rs1 = auto_stats(slow);
    CHECK(rs1.auto_calls - rs0.auto_calls == 1 && rs1.auto_lossy_calls == rs0.auto_lossy_calls,
          "reduce-scatter's AUTO was not counted as NONE");
    free(x);
    free(got);
    free(want);
}

static void settings(void)
{
    g_test = "settings";
    CHECK(strcmp(cc_coll_method_name(CC_COLL_METHOD_AUTO), "auto") == 0, "CC_COLL_METHOD_AUTO is not named auto");
    static const char *const bad[][2] = {{"CC_COLL_AUTO_METHOD", "none"},      {"CC_COLL_AUTO_METHOD", "auto"},
                                         {"CC_COLL_AUTO_METHOD", "topk,none"}, {"CC_COLL_AUTO_CHECK", "maybe"},
                                         {"CC_COLL_LINK", "fast"},             {"CC_COLL_LINK", "10"},
                                         {"CC_COLL_LINK", "-1,5"},             {"CC_COLL_LINK", "10,-1"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
        setenv(bad[i][0], bad[i][1], 1);
        cc_coll_comm_h h = NULL;
        const cc_coll_status_t st = cc_coll_comm_create(MPI_COMM_WORLD, &h);
        unsetenv(bad[i][0]);
        CHECK(st == CC_COLL_ERR_CONFIG && h == NULL, "a bad setting did not fail creation with CC_COLL_ERR_CONFIG");
        CHECK(strstr(cc_coll_last_error(), bad[i][0]) != NULL, "the message does not name the variable");
    }
    setenv("CC_COLL_AUTO_CHECK", "off", 1);
    /* CC_COLL_METHOD=auto: the default of calls without a method, measured
     * at creation (collective), then the same as params' AUTO. */
    setenv("CC_COLL_METHOD", "auto", 1);
    setenv("CC_COLL_LINK", "0.001,100", 1);
    cc_coll_comm_h h = NULL;
    CHECK_CC(cc_coll_comm_create(MPI_COMM_WORLD, &h));
    unsetenv("CC_COLL_METHOD");
    unsetenv("CC_COLL_LINK");
    const size_t n = 1u << 20;
    float *x = xmalloc(n * sizeof *x);
    fill(x, n, 5u);
    CHECK_CC(cc_coll_allreduce(x, x, n, CC_COLL_F32, CC_COLL_SUM, NULL, h, NULL));
    const cc_coll_stats_t s = auto_stats(h);
    CHECK(s.auto_calls == 1 && s.auto_lossy_calls == (g_ranks > 1 ? 1u : 0u),
          "CC_COLL_METHOD=auto did not compress 4 MiB on a 1 Mbit/s link");
    CHECK_CC(cc_coll_comm_destroy(h));
    free(x);
}

/* Several candidates: every choice is NONE or one of them, bit for bit. */
static void candidates(void)
{
    g_test = "candidates";
    setenv("CC_COLL_AUTO_METHOD", "half,topk", 1);
    cc_coll_comm_h a = comm_on_link("0.001,100"), b = comm_on_link("0.001,100");
    unsetenv("CC_COLL_AUTO_METHOD");
    const size_t sizes[] = {100, 1u << 16, 1u << 20};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; ++i) {
        const size_t n = sizes[i];
        cc_coll_params_t pa = auto_params();
        cc_coll_method_t chosen;
        double t_none, t_lossy;
        CHECK_CC(cc_coll_auto_predict(a, n, CC_COLL_F32, &pa, &chosen, &t_none, &t_lossy));
        int m = (int)chosen;
        expect_same_everywhere(&m, sizeof m, "the choices differ between ranks");
        CHECK(chosen == CC_COLL_METHOD_NONE || chosen == CC_COLL_METHOD_HALF || chosen == CC_COLL_METHOD_TOPK,
              "AUTO chose a method that is no candidate");
        if (g_ranks > 1 && n >= (1u << 20)) CHECK(chosen != CC_COLL_METHOD_NONE, "a 1 Mbit/s link does not compress 4 MiB");
        cc_coll_params_t pb = pa;
        pb.method = chosen;
        float *x = xmalloc(n * sizeof *x), *ra = xmalloc(n * sizeof *ra), *rb = xmalloc(n * sizeof *rb);
        fill(x, n, 99u + i);
        CHECK_CC(cc_coll_allreduce(x, ra, n, CC_COLL_F32, CC_COLL_SUM, &pa, a, NULL));
        if (chosen == CC_COLL_METHOD_NONE) MPI_Allreduce(x, rb, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        else CHECK_CC(cc_coll_allreduce(x, rb, n, CC_COLL_F32, CC_COLL_SUM, &pb, b, NULL));
        CHECK(memcmp(ra, rb, n * sizeof *ra) == 0, "AUTO's result differs from its choice's");
        free(x);
        free(ra);
        free(rb);
    }
    CHECK_CC(cc_coll_comm_destroy(a));
    CHECK_CC(cc_coll_comm_destroy(b));
}

/* The online check on one node: `calls` calls of 4 MiB; every call's
 * result is MPI's or the same on every rank, and the last 20 ran NONE but
 * for at most one check of the model. */
static void online_check(const char *link, const char *desc)
{
    g_test = desc;
    /* The compute made slow through the settings: LOWRANK at rank 128 on a
     * 1024 x 1024 matrix sends a quarter of the bytes, but computes for
     * ten to a hundred times as long as one node's shared memory takes to
     * move them whole. */
    setenv("CC_COLL_AUTO_CHECK", "on", 1);
    setenv("CC_COLL_AUTO_METHOD", "lowrank", 1);
    setenv("CC_COLL_LOWRANK_RANK", "128", 1);
    const size_t n = 1u << 20;
    const int calls = 60, tail = 20;
    float *x = xmalloc(n * sizeof *x), *r = xmalloc(n * sizeof *r);
    cc_coll_params_t p = method_params(CC_COLL_METHOD_AUTO);
    p.mask |= CC_COLL_PARAMS_FIELD_SHAPE;
    p.rows = 1024;
    p.cols = 1024;
    cc_coll_comm_h h = NULL;
    if (link) {
        /* LOWRANK's compute is measured, so how slow a link makes the model
         * favour it depends on this machine's speed (a sanitizer build, a
         * loaded machine): from `link` on, halve the rate until it does. As
         * the link slows, NONE's prediction grows four times as fast as
         * LOWRANK's (it sends four times the bytes), so the first such link
         * keeps NONE within ten times LOWRANK: close enough for a first look. */
        char rate_link[64];
        double gbit = atof(link);
        const char *latency = strchr(link, ',');
        for (int tries = 0;; ++tries) {
            snprintf(rate_link, sizeof rate_link, "%.9g%s", gbit, latency ? latency : "");
            h = comm_on_link(rate_link);
            cc_coll_method_t chosen;
            CHECK_CC(cc_coll_auto_predict(h, n, CC_COLL_F32, &p, &chosen, NULL, NULL));
            int favoured = chosen == CC_COLL_METHOD_LOWRANK;
            expect_same_everywhere(&favoured, sizeof favoured, "the ranks' models differ");
            if (g_ranks == 1 || favoured) break;
            CHECK(tries < 12, "the wrong model does not favour LOWRANK even on a link of 5 kbit/s");
            CHECK_CC(cc_coll_comm_destroy(h));
            gbit /= 2;
        }
    } else {
        CHECK_CC(cc_coll_comm_create(MPI_COMM_WORLD, &h));
    }
    setenv("CC_COLL_AUTO_CHECK", "off", 1);
    unsetenv("CC_COLL_AUTO_METHOD");
    unsetenv("CC_COLL_LOWRANK_RANK");
    cc_coll_stats_t before_tail, s;
    memset(&before_tail, 0, sizeof before_tail);
    for (int i = 0; i < calls; ++i) {
        if (i == calls - tail) before_tail = auto_stats(h);
        fill(x, n, 500u + (uint64_t)i);
        CHECK_CC(cc_coll_allreduce(x, r, n, CC_COLL_F32, CC_COLL_SUM, &p, h, NULL));
        expect_same_everywhere(r, n * sizeof *r, "AUTO's result differs between ranks");
    }
    memset(&s, 0, sizeof s);
    s.mask = CC_COLL_STATS_FIELD_AUTO_CALLS | CC_COLL_STATS_FIELD_AUTO_LOSSY_CALLS |
             CC_COLL_STATS_FIELD_AUTO_EXPLORED_CALLS | CC_COLL_STATS_FIELD_AUTO_MEASURED |
             CC_COLL_STATS_FIELD_AUTO_PREDICTED;
    CHECK_CC(cc_coll_comm_get_stats(h, &s));
    CHECK(s.auto_calls == (uint64_t)calls, "auto_calls did not count every call");
    CHECK(s.auto_measured > 0, "auto_measured is 0");
    CHECK(g_ranks == 1 ? s.auto_predicted == 0 : s.auto_predicted > 0, "auto_predicted is wrong");
    uint64_t counts[2] = {s.auto_lossy_calls - before_tail.auto_lossy_calls, s.auto_explored_calls};
    expect_same_everywhere(counts, sizeof counts, "the ranks' AUTO counts differ");
    if (g_ranks == 2) {
        if (counts[0] > 1 && g_rank == 0)
            fprintf(stderr, "%s: %llu of the last %d calls compressed (%llu checks in all)\n", desc,
                    (unsigned long long)counts[0], tail, (unsigned long long)s.auto_explored_calls);
        CHECK(counts[0] <= 1, "AUTO still compresses 4 MiB on one node after 40 calls");
        /* The wrong model must be checked (the measured one, right, need not). */
        CHECK(s.auto_explored_calls >= (link ? 1u : 0u) && s.auto_explored_calls <= (uint64_t)(calls / 50 + 1),
              "AUTO did not check its wrong model, or checked it more than once in 50 calls");
    }
    CHECK_CC(cc_coll_comm_destroy(h));
    free(x);
    free(r);
}

/* A hierarchical communicator (CC_COLL_NODES, 3 or 4 ranks; with 3 ranks
 * one rank owns no shard): the model predicts NONE as the node's exchanges
 * plus the rails' NONE of the largest shard on as many ranks as nodes
 * (docs/algorithms.md 8.1 and 8.2). With the rails' link given as 1 Mbit/s
 * and 100 us, NONE of 4 MiB is at least that rail's time and far below the
 * flat 3- or 4-rank link's; AUTO compresses it (TOPK on the rails), bit for
 * bit as the explicit TOPK call on the same nodes. */
static void hierarchical(void)
{
    if (g_ranks < 3) return;
    g_test = "hierarchical";
    setenv("CC_COLL_NODES", g_ranks == 3 ? "2,1" : "2", 1);
    setenv("CC_COLL_HIERARCHY", "on", 1);
    cc_coll_comm_h h = comm_on_link("0.001,100"), ref = comm_on_link("0.001,100");
    unsetenv("CC_COLL_NODES");
    unsetenv("CC_COLL_HIERARCHY");
    const size_t n = 1u << 20;
    const double shards = g_ranks == 3 ? 1 : 2, rate = 0.001e9 / 8, P = g_ranks;
    const double rail = 100e-6 + 4.0 * (double)n / shards / rate;  /* 2 nodes: 2 (P-1)/P = 1 */
    const double flat = 100e-6 + 2 * (P - 1) / P * 4.0 * (double)n / rate;
    cc_coll_params_t p = auto_params();
    cc_coll_method_t chosen;
    double t[2];
    CHECK_CC(cc_coll_auto_predict(h, n, CC_COLL_F32, &p, &chosen, &t[0], &t[1]));
    expect_same_everywhere(t, sizeof t, "the hierarchical predictions differ between ranks");
    if (g_rank == 0) printf("hierarchical: NONE of 4 MiB predicted %.3f s (rail %.3f s, flat %.3f s)\n", t[0], rail, flat);
    CHECK(t[0] >= rail && t[0] < rail + 0.25 * (flat - rail),
          "NONE is not predicted as the node's exchanges plus the rails' allreduce of the shard");
    CHECK(chosen == CC_COLL_METHOD_TOPK, "a 1 Mbit/s rail does not compress 4 MiB");
    runs_its_choice(h, ref, n, 0, "hierarchical, slow rails");
    CHECK_CC(cc_coll_comm_destroy(h));
    CHECK_CC(cc_coll_comm_destroy(ref));
}

int main(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_ranks);
    /* The exact checks below need a call to run the model's prediction. */
    setenv("CC_COLL_AUTO_CHECK", "off", 1);
    cc_coll_comm_h slow = comm_on_link("0.001,100"), fast = comm_on_link("100000,0");
    cc_coll_comm_h slow_ref = comm_on_link("0.001,100");
    predictions(slow, fast);
    runs_its_choice(slow, slow_ref, 1u << 20, 0, "slow link, blocking");
    runs_its_choice(slow, slow_ref, 1u << 20, 1, "slow link, non-blocking");
    runs_its_choice(fast, slow_ref, 1u << 20, 0, "fast link: NONE");
    runs_its_choice(slow, slow_ref, 100, 0, "slow link, 100 elements");
    group_and_reduce_scatter(slow);
    hierarchical();
    settings();
    candidates();
    online_check("0.02,100", "online check, the link given as 20 Mbit/s or slower");
    online_check(NULL, "online check, the link measured");
    CHECK_CC(cc_coll_comm_destroy(slow));
    CHECK_CC(cc_coll_comm_destroy(fast));
    CHECK_CC(cc_coll_comm_destroy(slow_ref));
    if (g_rank == 0) printf("mpi_auto_method (%d ranks): all checks passed\n", g_ranks);
    MPI_Finalize();
    return 0;
}
