/*
 * cc_coll_allreduce_group with LOWRANK (PowerSGD) and NONE tensors, with real
 * ranks (run with 1, 2, 3 and 4 ranks). Single-tensor LOWRANK is tested in
 * lowrank.c.
 *
 * What the header promises and this file checks:
 *   - a group gives the same results as its tensors reduced one by one with
 *     cc_coll_allreduce from the same state (two communicators, the same Q
 *     set on both with cc_coll_lowrank_set_q): bit for bit when every
 *     element is summed in the same order, and the same residuals, factors
 *     and statistics;
 *   - the messages: the agreement (on 2 or more ranks), one plain MPI_Allreduce per
 *     dtype for the NONE tensors and the LOWRANK tensors not compressed this
 *     step (before start_iter, or failing min_compression_rate), and one P
 *     and one Q allreduce per work type (binary64 for F64, binary32 for the
 *     others);
 *   - ranks that disagree on the group (number of tensors, counts, dtypes,
 *     op, methods, shapes, ranks, start_iter) all get CC_COLL_ERR_MISMATCH,
 *     and nothing moves or changes; argument errors name the argument.
 *
 * MPI_Allreduce is observed through the MPI profiling interface: this
 * program defines MPI_Allreduce, which libcc_coll's calls reach, counts the
 * calls and forwards them to PMPI_Allreduce. In "ordered" mode it instead
 * sums MPI_FLOAT / MPI_DOUBLE with MPI_SUM in rank order (PMPI_Allgather,
 * then ((x_0 + x_1) + x_2) + ...), so an element's sum cannot depend on where
 * it sits in a message: Open MPI's algorithms (ring, recursive doubling) may
 * add the ranks in another order for another message size or offset, which
 * with 3 or more ranks changes the last bits. The comparisons are run both
 * ways: ordered (bit for bit), and through the real MPI_Allreduce (bit for
 * bit with 1 or 2 ranks, where a + b == b + a; within rounding otherwise).
 *
 * Any failure prints the case and calls MPI_Abort (exit status non-zero). A
 * watchdog (SIGALRM) aborts a test that hangs.
 *
 *   mpi_lowrank_group [TEST...]     run every test, or only the named ones
 */
#define _POSIX_C_SOURCE 200809L /* unsetenv, sigaction */

#include <math.h>
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

/* ---- MPI_Allreduce, counted (and optionally summed in rank order) --------- */

static long g_allreduce_calls = 0;
static int g_ordered = 0;

static int ordered_sum(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Comm comm)
{
    int p = 1;
    PMPI_Comm_size(comm, &p);
    const size_t es = type == MPI_DOUBLE ? sizeof(double) : sizeof(float);
    const void *src = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
    unsigned char *all = xmalloc((size_t)p * (size_t)count * es);
    const int rc = PMPI_Allgather(src, count, type, all, count, type, comm);
    if (rc == MPI_SUCCESS) {
        for (size_t i = 0; i < (size_t)count; ++i) {
            if (type == MPI_DOUBLE) {
                const double *a = (const double *)all;
                double s = a[i];
                for (int r = 1; r < p; ++r) s += a[(size_t)r * (size_t)count + i];
                ((double *)recvbuf)[i] = s;
            } else {
                const float *a = (const float *)all;
                float s = a[i];
                for (int r = 1; r < p; ++r) s += a[(size_t)r * (size_t)count + i];
                ((float *)recvbuf)[i] = s;
            }
        }
    }
    free(all);
    return rc;
}

int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm)
{
    ++g_allreduce_calls;
    if (g_ordered && op == MPI_SUM && (datatype == MPI_FLOAT || datatype == MPI_DOUBLE) && count > 0)
        return ordered_sum(sendbuf, recvbuf, count, datatype, comm);
    return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
}

/* ---- watchdog --------------------------------------------------------------- */

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

/* ---- helpers ------------------------------------------------------------------ */

static uint64_t seed_for(int rank, int test_case)
{
    return 0x62c0ull + (uint64_t)rank * 1000003ull + (uint64_t)test_case * 7919ull;
}

static const char *mode_name(void) { return g_ordered ? "ordered sums" : "MPI_Allreduce"; }

static void call_ok(cc_coll_status_t st, const char *desc)
{
    if (st != CC_COLL_OK) die("%s", desc, (int)st);
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

static uint64_t ef_bytes(cc_coll_comm_h h)
{
    uint64_t b = 0;
    CHECK_CC(cc_coll_ef_bytes(h, &b));
    return b;
}

static cc_coll_params_t keyed_if(cc_coll_params_t p, int has_key, uint64_t key) { return has_key ? keyed(p, key) : p; }

/* ---- a group of tensors ------------------------------------------------------------- */

/* Spec.rows of a LOWRANK tensor passed without SHAPE: a 1-D tensor (a
 * bias), which the library sends densely, as powerSGD_hook does. */
#define ONE_D UINT64_MAX

typedef struct {
    cc_coll_method_t method; /* LOWRANK or NONE */
    cc_coll_dtype_t d;
    size_t n;
    uint64_t rows, cols; /* SHAPE (rows 0: the near-square view; ONE_D: no SHAPE) */
    int k;               /* RANK */
    int has_key;         /* ef_key, else (recvbuf, count, dtype) */
    uint64_t start_iter;
} Spec;

typedef struct {
    size_t nt;
    const Spec *spec;
    cc_coll_params_t *params;
    cc_coll_dtype_t *dtypes;
    size_t *counts;
    unsigned char **in;  /* this step's input, per tensor */
    unsigned char **send; /* the send buffers given (== recv: in place) */
    unsigned char **recv;
} Group;

static void group_init(Group *g, const Spec *spec, size_t nt, uint64_t key_base)
{
    g->nt = nt;
    g->spec = spec;
    g->params = xcalloc(nt, sizeof *g->params);
    g->dtypes = xcalloc(nt, sizeof *g->dtypes);
    g->counts = xcalloc(nt, sizeof *g->counts);
    g->in = xcalloc(nt, sizeof *g->in);
    g->send = xcalloc(nt, sizeof *g->send);
    g->recv = xcalloc(nt, sizeof *g->recv);
    for (size_t i = 0; i < nt; ++i) {
        const Spec *s = &spec[i];
        if (s->method == CC_COLL_METHOD_LOWRANK) {
            cc_coll_params_t p = keyed_if(s->rows == ONE_D ? lowrank_params_1d(s->k) : lowrank_params(s->rows, s->cols, s->k),
                                          s->has_key, key_base + i);
            p.mask |= CC_COLL_PARAMS_FIELD_START_ITER;
            p.start_iter = s->start_iter;
            g->params[i] = p;
        } else {
            g->params[i] = method_params(CC_COLL_METHOD_NONE);
        }
        g->dtypes[i] = s->d;
        g->counts[i] = s->n;
        const size_t bytes = s->n * cc_coll_dtype_size(s->d) + 16;
        g->in[i] = xmalloc(bytes);
        g->send[i] = xmalloc(bytes);
        g->recv[i] = xmalloc(bytes);
        memset(g->recv[i], 0x5A, bytes);
    }
}

static void group_free(Group *g)
{
    for (size_t i = 0; i < g->nt; ++i) {
        free(g->in[i]);
        free(g->send[i]);
        free(g->recv[i]);
    }
    free(g->params);
    free(g->dtypes);
    free(g->counts);
    free(g->in);
    free(g->send);
    free(g->recv);
}

/* This step's inputs: Gaussian values, or small integers (exact sums in any
 * order) when `integers`. */
static void group_inputs(Group *g, int step, int integers)
{
    for (size_t i = 0; i < g->nt; ++i) {
        const size_t n = g->counts[i];
        double *x = xmalloc((n + 1) * sizeof *x);
        const uint64_t seed = seed_for(g_rank, step * 100 + (int)i);
        if (integers) integer_values(x, n, seed);
        else {
            gauss_fill(x, n, seed);
            for (size_t j = 0; j < n; ++j) x[j] = round_to(g->dtypes[i], x[j]);
        }
        pack(g->dtypes[i], x, n, g->in[i]);
        free(x);
    }
}

/* Loads the inputs into the send buffers, or into recv for the in-place
 * tensors (`inplace_mask` bit i, or every tensor when all_inplace). */
static const void *const *group_stage(Group *g, unsigned inplace_mask, int all_inplace)
{
    for (size_t i = 0; i < g->nt; ++i) {
        const size_t bytes = g->counts[i] * cc_coll_dtype_size(g->dtypes[i]);
        if (all_inplace || (inplace_mask >> i) & 1u) memcpy(g->recv[i], g->in[i], bytes);
        else memcpy(g->send[i], g->in[i], bytes);
    }
    return (const void *const *)g->send;
}

static const void *send_of(const Group *g, size_t i, unsigned inplace_mask, int all_inplace)
{
    return all_inplace || (inplace_mask >> i) & 1u ? (const void *)g->recv[i] : (const void *)g->send[i];
}

/* The group on one communicator; returns the MPI_Allreduce calls it made. */
static long run_group(Group *g, cc_coll_op_t op, cc_coll_comm_h h, unsigned inplace_mask, int all_inplace,
                      const char *desc)
{
    group_stage(g, inplace_mask, all_inplace);
    const void **sends = xcalloc(g->nt, sizeof *sends);
    for (size_t i = 0; i < g->nt; ++i) sends[i] = send_of(g, i, inplace_mask, all_inplace);
    const long c0 = g_allreduce_calls;
    call_ok(cc_coll_allreduce_group(g->nt, all_inplace ? NULL : sends, (void *const *)g->recv, g->counts, g->dtypes,
                                    op, g->params, h, NULL),
            desc);
    const long calls = g_allreduce_calls - c0;
    free(sends);
    return calls;
}

/* The same tensors one by one with cc_coll_allreduce; returns the
 * MPI_Allreduce calls made. */
static long run_singles(Group *g, cc_coll_op_t op, cc_coll_comm_h h, unsigned inplace_mask, int all_inplace,
                        const char *desc)
{
    group_stage(g, inplace_mask, all_inplace);
    const long c0 = g_allreduce_calls;
    for (size_t i = 0; i < g->nt; ++i)
        call_ok(cc_coll_allreduce(send_of(g, i, inplace_mask, all_inplace), g->recv[i], g->counts[i], g->dtypes[i], op,
                                  &g->params[i], h, NULL),
                desc);
    return g_allreduce_calls - c0;
}

/* The Q both communicators start from: Gaussian, one per LOWRANK tensor. */
static void set_same_q(Group *a, Group *b, cc_coll_comm_h ha, cc_coll_comm_h hb, uint64_t seed)
{
    for (size_t i = 0; i < a->nt; ++i) {
        const Spec *s = &a->spec[i];
        if (s->method != CC_COLL_METHOD_LOWRANK || s->n == 0 || s->rows == ONE_D) continue;
        size_t vr = 0, vc = 0;
        lowrank_view(s->n, s->rows, s->cols, &vr, &vc);
        const size_t k = (size_t)s->k < vr ? ((size_t)s->k < vc ? (size_t)s->k : vc) : (vr < vc ? vr : vc);
        double *q = xmalloc(vc * k * sizeof *q);
        gauss_fill(q, vc * k, seed + i);
        CHECK_CC(cc_coll_lowrank_set_q(ha, &a->params[i], a->recv[i], s->n, s->d, q));
        CHECK_CC(cc_coll_lowrank_set_q(hb, &b->params[i], b->recv[i], s->n, s->d, q));
        free(q);
    }
}

/* The agreement exchange every collective starts with: one MPI_Allreduce on
 * two or more ranks, none on one. */
static long agreement_calls(void) { return g_size > 1 ? 1 : 0; }
/* The outcome exchange that ends each compressed LOWRANK batch (one per work
 * type; docs/wire.md, "Fault containment"): one MPI_Allreduce on two or more
 * ranks, none on one. */
static long outcome_calls(void) { return g_size > 1 ? 1 : 0; }

/* The MPI_Allreduce calls a group makes when every LOWRANK tensor with
 * count > 0 and a shape is compressed (or, with `dense_lowrank`, none is);
 * 1-D LOWRANK tensors are dense. */
static long expected_group_calls(const Spec *spec, size_t nt, int dense_lowrank)
{
    int dense[4] = {0, 0, 0, 0}, work[2] = {0, 0};
    for (size_t i = 0; i < nt; ++i) {
        if (spec[i].n == 0) continue;
        if (spec[i].method == CC_COLL_METHOD_NONE || dense_lowrank || spec[i].rows == ONE_D) dense[spec[i].d] = 1;
        else work[spec[i].d == CC_COLL_F64] = 1;
    }
    return agreement_calls() + dense[0] + dense[1] + dense[2] + dense[3] + (2 + outcome_calls()) * (work[0] + work[1]);
}

static long expected_single_calls(const Spec *spec, size_t nt)
{
    long c = 0;
    /* Every call: the agreement, then (count > 0) one allreduce, or P, Q and
     * the outcome for a compressed LOWRANK tensor. */
    for (size_t i = 0; i < nt; ++i)
        c += agreement_calls() + (spec[i].n == 0 ? 0
                                  : spec[i].method != CC_COLL_METHOD_LOWRANK || spec[i].rows == ONE_D
                                      ? 1
                                      : 2 + outcome_calls());
    return c;
}

/* Group a vs singles b after a step: results, residuals, factors. */
static void compare_groups(Group *a, Group *b, cc_coll_comm_h ha, cc_coll_comm_h hb, int exact, const char *desc)
{
    for (size_t i = 0; i < a->nt; ++i) {
        const Spec *s = &a->spec[i];
        const size_t n = s->n, es = cc_coll_dtype_size(s->d);
        if (n == 0) continue;
        char what[300];
        snprintf(what, sizeof what, "%s: tensor %zu (%s %s n=%zu)", desc, i,
                 s->method == CC_COLL_METHOD_LOWRANK ? "LOWRANK" : "NONE", dtype_name(s->d), n);
        double *wa = xmalloc(n * sizeof *wa), *wb = xmalloc(n * sizeof *wb);
        for (size_t j = 0; j < n; ++j) wb[j] = element(s->d, b->recv[i], j);
        if (exact) expect_equal(s->d, a->recv[i], b->recv[i], n, what);
        else {
            double scale = 0.0;
            for (size_t j = 0; j < n; ++j) scale = fmax(scale, fabs(wb[j]));
            expect_close(s->d, a->recv[i], wb, n, s->d == CC_COLL_F64 ? 1e-12 : 1e-5, scale, what);
        }
        for (int j = 0; j < 16; ++j)
            if (a->recv[i][n * es + (size_t)j] != 0x5A) die("%s: recvbuf written past count", what, 0);
        if (s->method == CC_COLL_METHOD_LOWRANK) {
            CHECK_CC(cc_coll_ef_get_residual(ha, &a->params[i], a->recv[i], n, s->d, wa));
            CHECK_CC(cc_coll_ef_get_residual(hb, &b->params[i], b->recv[i], n, s->d, wb));
            if (exact && memcmp(wa, wb, n * sizeof *wa) != 0) die("%s: the residuals differ", what, 0);
            if (!exact)
                for (size_t j = 0; j < n; ++j)
                    if (!(fabs(wa[j] - wb[j]) <= 1e-4 * (fabs(wb[j]) + 1.0))) die("%s: the residuals differ", what, 0);
            uint64_t ra = 0, ca = 0, rb = 0, cb = 0, calls_a = 0, calls_b = 0;
            int ka = 0, kb = 0;
            CHECK_CC(cc_coll_lowrank_get_state(ha, &a->params[i], a->recv[i], n, s->d, &ra, &ca, &ka, &calls_a, NULL,
                                               NULL));
            CHECK_CC(cc_coll_lowrank_get_state(hb, &b->params[i], b->recv[i], n, s->d, &rb, &cb, &kb, &calls_b, NULL,
                                               NULL));
            if (ra != rb || ca != cb || ka != kb || calls_a != calls_b) die("%s: the low-rank states differ", what, 0);
        }
        free(wa);
        free(wb);
    }
}

static void compare_stats(cc_coll_stats_t a0, cc_coll_stats_t a1, cc_coll_stats_t b0, cc_coll_stats_t b1,
                          const char *desc)
{
    if (a1.calls - a0.calls != b1.calls - b0.calls ||
        a1.bytes_uncompressed - a0.bytes_uncompressed != b1.bytes_uncompressed - b0.bytes_uncompressed ||
        a1.bytes_wire - a0.bytes_wire != b1.bytes_wire - b0.bytes_wire) {
        fprintf(stderr,
                "[rank %d] %s: group +%llu calls +%llu bytes +%llu wire; one by one +%llu calls +%llu bytes +%llu "
                "wire\n",
                g_rank, desc, (unsigned long long)(a1.calls - a0.calls),
                (unsigned long long)(a1.bytes_uncompressed - a0.bytes_uncompressed),
                (unsigned long long)(a1.bytes_wire - a0.bytes_wire), (unsigned long long)(b1.calls - b0.calls),
                (unsigned long long)(b1.bytes_uncompressed - b0.bytes_uncompressed),
                (unsigned long long)(b1.bytes_wire - b0.bytes_wire));
        die("%s: the statistics of the group and of the single calls differ", desc, 0);
    }
}

/* Runs `steps` steps of the group on a fresh communicator and of its tensors
 * one by one on another, both from the same Q, and compares everything. */
static void group_vs_singles(const Spec *spec, size_t nt, cc_coll_op_t op, int steps, const char *name)
{
    cc_coll_comm_h ha = NULL, hb = NULL;
    CHECK_CC(cc_coll_comm_create(MPI_COMM_WORLD, &ha));
    CHECK_CC(cc_coll_comm_create(MPI_COMM_WORLD, &hb));
    Group a, b;
    group_init(&a, spec, nt, 0x6000);
    group_init(&b, spec, nt, 0x6000);
    set_same_q(&a, &b, ha, hb, 0x9999);
    const int exact = g_ordered || g_size <= 2;
    for (int t = 0; t < steps; ++t) {
        char desc[200];
        snprintf(desc, sizeof desc, "%s, %s, step %d, %s (P=%d, %s)", name, op == CC_COLL_SUM ? "SUM" : "AVG", t + 1,
                 t == 1 ? "all in place" : "tensor 0 in place", g_size, mode_name());
        /* Step 1: integer data; then Gaussian. */
        group_inputs(&a, t, t == 0);
        group_inputs(&b, t, t == 0);
        const int all_inplace = t == 1;
        const cc_coll_stats_t a0 = get_stats(ha), b0 = get_stats(hb);
        const long ga = run_group(&a, op, ha, 1u, all_inplace, desc);
        const long sb = run_singles(&b, op, hb, 1u, all_inplace, desc);
        compare_stats(a0, get_stats(ha), b0, get_stats(hb), desc);
        if (ga != expected_group_calls(spec, nt, 0)) {
            fprintf(stderr, "[rank %d] %s: the group made %ld MPI_Allreduce calls, expected %ld\n", g_rank, desc, ga,
                    expected_group_calls(spec, nt, 0));
            die("%s: MPI_Allreduce calls of the group", desc, 0);
        }
        if (sb != expected_single_calls(spec, nt)) {
            fprintf(stderr, "[rank %d] %s: one by one made %ld MPI_Allreduce calls, expected %ld\n", g_rank, desc, sb,
                    expected_single_calls(spec, nt));
            die("%s: MPI_Allreduce calls one by one", desc, 0);
        }
        compare_groups(&a, &b, ha, hb, exact, desc);
        /* Out of place: the send buffers are untouched. */
        for (size_t i = 1; i < nt && !all_inplace; ++i)
            if (memcmp(a.send[i], a.in[i], spec[i].n * cc_coll_dtype_size(spec[i].d)) != 0)
                die("%s: sendbuf modified", desc, 0);
    }
    group_free(&a);
    group_free(&b);
    CHECK_CC(cc_coll_comm_destroy(ha));
    CHECK_CC(cc_coll_comm_destroy(hb));
}

/* ---- 6. group == one by one; its MPI_Allreduce calls --------------------------------- */

/* Three LOWRANK f32 tensors (a given shape with ef_key; cols = 0 keyed by
 * address; the padded near-square view, rank 3 through QR) and two small
 * NONE f32 tensors: the agreement + 1 dense batch + 1 P + 1 Q. */
static const Spec kF32Group[] = {
    {CC_COLL_METHOD_LOWRANK, CC_COLL_F32, 48 * 40, 48, 40, 2, 1, 0},
    {CC_COLL_METHOD_NONE, CC_COLL_F32, 7, 0, 0, 0, 0, 0},
    {CC_COLL_METHOD_LOWRANK, CC_COLL_F32, 30 * 20, 30, 0, 1, 0, 0},
    {CC_COLL_METHOD_NONE, CC_COLL_F32, 13, 0, 0, 0, 0, 0},
    {CC_COLL_METHOD_LOWRANK, CC_COLL_F32, 700, 0, 0, 3, 1, 0},
};

/* Every dtype: LOWRANK F32, F16 and BF16 share the binary32 P/Q pair, F64
 * LOWRANK tensors the binary64 pair; NONE tensors of three dtypes make three
 * dense batches: 1 + 3 + 2 + 2 = 8 calls. A count-0 tensor of each method. */
static const Spec kMixedGroup[] = {
    {CC_COLL_METHOD_LOWRANK, CC_COLL_F32, 40 * 30, 40, 30, 2, 1, 0},
    {CC_COLL_METHOD_LOWRANK, CC_COLL_F64, 36 * 20, 36, 20, 1, 1, 0},
    {CC_COLL_METHOD_NONE, CC_COLL_F64, 5, 0, 0, 0, 0, 0},
    {CC_COLL_METHOD_LOWRANK, CC_COLL_F16, 500, 0, 0, 2, 1, 0},
    {CC_COLL_METHOD_LOWRANK, CC_COLL_F32, 0, 0, 0, 1, 1, 0},
    {CC_COLL_METHOD_LOWRANK, CC_COLL_F64, 800, 0, 0, 3, 0, 0},
    {CC_COLL_METHOD_NONE, CC_COLL_F32, 9, 0, 0, 0, 0, 0},
    {CC_COLL_METHOD_LOWRANK, CC_COLL_BF16, 24 * 30, 24, 0, 1, 1, 0},
    {CC_COLL_METHOD_NONE, CC_COLL_F16, 6, 0, 0, 0, 0, 0},
    {CC_COLL_METHOD_NONE, CC_COLL_F64, 0, 0, 0, 0, 0, 0},
};

/* A model's gradients as DDP hands them to powerSGD_hook: weight matrices
 * with their shapes and 1-D biases without one (sent densely), f32 and
 * f64: 1 layout + 2 dense + 2 P/Q pairs = 7 calls. */
static const Spec kBiasGroup[] = {
    {CC_COLL_METHOD_LOWRANK, CC_COLL_F32, 40 * 30, 40, 30, 2, 1, 0},
    {CC_COLL_METHOD_LOWRANK, CC_COLL_F32, 40, ONE_D, 0, 2, 1, 0},
    {CC_COLL_METHOD_LOWRANK, CC_COLL_F32, 30 * 20, 30, 0, 1, 0, 0},
    {CC_COLL_METHOD_LOWRANK, CC_COLL_F32, 400, ONE_D, 0, 1, 0, 0},
    {CC_COLL_METHOD_LOWRANK, CC_COLL_F64, 36 * 20, 36, 20, 1, 1, 0},
    {CC_COLL_METHOD_LOWRANK, CC_COLL_F64, 36, ONE_D, 0, 1, 1, 0},
    {CC_COLL_METHOD_LOWRANK, CC_COLL_F32, 0, ONE_D, 0, 1, 1, 0},
};

/* Only F64 LOWRANK tensors: one binary64 pair, no dense batch: 3 calls. */
static const Spec kF64Group[] = {
    {CC_COLL_METHOD_LOWRANK, CC_COLL_F64, 32 * 32, 32, 32, 2, 1, 0},
    {CC_COLL_METHOD_LOWRANK, CC_COLL_F64, 50 * 12, 50, 12, 3, 1, 0},
};

#define NT(a) (sizeof(a) / sizeof((a)[0]))

static void test_group_vs_singles(cc_coll_comm_h h)
{
    (void)h;
    for (int mode = 1; mode >= 0; --mode) {
        g_ordered = mode;
        group_vs_singles(kF32Group, NT(kF32Group), CC_COLL_AVG, 4, "3 LOWRANK f32 + 2 NONE f32");
        group_vs_singles(kF32Group, NT(kF32Group), CC_COLL_SUM, 3, "3 LOWRANK f32 + 2 NONE f32");
        group_vs_singles(kMixedGroup, NT(kMixedGroup), CC_COLL_AVG, 3, "mixed dtypes");
        group_vs_singles(kF64Group, NT(kF64Group), CC_COLL_SUM, 3, "2 LOWRANK f64");
        group_vs_singles(kBiasGroup, NT(kBiasGroup), CC_COLL_AVG, 3, "LOWRANK weights + 1-D biases");
    }
    g_ordered = 0;
}

/* The call counts on their own, for the record: the group of 3 compressed
 * LOWRANK f32 tensors + 2 small f32 tensors is exactly 3 MPI_Allreduce calls
 * after the agreement, and the outcome exchange,
 * and the mixed f32 + f64 group one P/Q pair and outcome per work type. */
static void test_group_calls(cc_coll_comm_h h)
{
    Group g;
    group_init(&g, kF32Group, NT(kF32Group), 0x7000);
    group_inputs(&g, 0, 0);
    for (int t = 0; t < 3; ++t) {
        const long c = run_group(&g, CC_COLL_AVG, h, 0u, 0, "3 LOWRANK + 2 NONE f32");
        if (c != agreement_calls() + 3 + outcome_calls()) {
            fprintf(stderr, "[rank %d] step %d: %ld MPI_Allreduce calls, expected %ld\n", g_rank, t + 1, c,
                    agreement_calls() + 3 + outcome_calls());
            die("%s", "3 LOWRANK f32 + 2 NONE f32 must be the agreement + 1 dense + 1 P + 1 Q + the outcome", 0);
        }
    }
    group_free(&g);
    const Spec two_types[] = {
        {CC_COLL_METHOD_LOWRANK, CC_COLL_F32, 40 * 30, 40, 30, 2, 1, 0},
        {CC_COLL_METHOD_LOWRANK, CC_COLL_F64, 40 * 30, 40, 30, 2, 1, 0},
        {CC_COLL_METHOD_LOWRANK, CC_COLL_F32, 600, 0, 0, 1, 1, 0},
        {CC_COLL_METHOD_LOWRANK, CC_COLL_F64, 600, 0, 0, 1, 1, 0},
    };
    group_init(&g, two_types, NT(two_types), 0x7100);
    group_inputs(&g, 0, 0);
    const long c = run_group(&g, CC_COLL_AVG, h, 0u, 0, "f32 + f64 LOWRANK");
    if (c != agreement_calls() + 4 + 2 * outcome_calls()) {
        fprintf(stderr, "[rank %d] %ld MPI_Allreduce calls, expected %ld\n", g_rank, c,
                agreement_calls() + 4 + 2 * outcome_calls());
        die("%s", "2 f32 + 2 f64 LOWRANK must be the agreement + one P/Q pair and outcome per work type", 0);
    }
    group_free(&g);
    /* ntensors == 0 moves no data: the agreement only. */
    const long c0 = g_allreduce_calls;
    CHECK_CC(cc_coll_allreduce_group(0, NULL, NULL, NULL, NULL, CC_COLL_AVG, NULL, h, NULL));
    CHECK(g_allreduce_calls == c0 + agreement_calls(), "ntensors 0 made an MPI call besides the agreement");
    CHECK_CC(cc_coll_ef_reset_all(h));
}

/* ---- start_iter and min_compression_rate inside a group -------------------------------- */

/* A LOWRANK tensor before its start_iter, and one failing the compression
 * test, join the NONE tensor's dense batch (one MPI_Allreduce for all three):
 * bit-identical to MPI_Allreduce of each (in ordered mode the reference sums
 * in rank order too), and no residual. Once start_iter is reached the first
 * is compressed. */
static void test_group_dense_routes(cc_coll_comm_h h)
{
    (void)h;
    cc_coll_comm_h hc = NULL;
    CHECK_CC(cc_coll_comm_create(MPI_COMM_WORLD, &hc));
    const Spec spec[] = {
        {CC_COLL_METHOD_LOWRANK, CC_COLL_F32, 48 * 40, 48, 40, 2, 1, 2},
        {CC_COLL_METHOD_NONE, CC_COLL_F32, 11, 0, 0, 0, 0, 0},
        {CC_COLL_METHOD_LOWRANK, CC_COLL_F32, 8 * 8, 8, 8, 2, 1, 0}, /* (8 + 8) 2 2 = 64: dense */
    };
    Group g;
    group_init(&g, spec, NT(spec), 0x7200);
    g_ordered = 1;
    for (int t = 0; t < 3; ++t) {
        char desc[120];
        snprintf(desc, sizeof desc, "start_iter 2 in a group, call %d (P=%d)", t + 1, g_size);
        group_inputs(&g, 40 + t, 0);
        unsigned char *ref[3];
        for (size_t i = 0; i < 3; ++i) {
            ref[i] = xmalloc(spec[i].n * sizeof(float));
            CHECK(MPI_Allreduce(g.in[i], ref[i], (int)spec[i].n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS,
                  "reference");
            for (size_t j = 0; j < spec[i].n; ++j) ((float *)ref[i])[j] /= (float)g_size;
        }
        const uint64_t efb = ef_bytes(hc);
        const long c = run_group(&g, CC_COLL_AVG, hc, 0u, 0, desc);
        const long want = agreement_calls() + (t < 2 ? 1 : 3 + outcome_calls());
        if (c != want) {
            fprintf(stderr, "[rank %d] %s: %ld MPI_Allreduce calls, expected %ld\n", g_rank, desc, c, want);
            die("%s: MPI_Allreduce calls", desc, 0);
        }
        expect_equal(CC_COLL_F32, g.recv[1], ref[1], spec[1].n, desc);
        expect_equal(CC_COLL_F32, g.recv[2], ref[2], spec[2].n, desc);
        int rank = -1;
        uint64_t calls = 0;
        CHECK_CC(cc_coll_lowrank_get_state(hc, &g.params[0], g.recv[0], spec[0].n, CC_COLL_F32, NULL, NULL, &rank,
                                           &calls, NULL, NULL));
        if (calls != (uint64_t)t + 1) die("%s: call count", desc, 0);
        if (t < 2) {
            expect_equal(CC_COLL_F32, g.recv[0], ref[0], spec[0].n, desc);
            if (ef_bytes(hc) != efb || rank != 0) die("%s: a dense call left a residual or factors", desc, 0);
        } else {
            if (rank != 2) die("%s: not compressed once start_iter was reached", desc, 0);
            if (ef_bytes(hc) != efb + spec[0].n * sizeof(float)) die("%s: no residual after compressing", desc, 0);
        }
        for (size_t i = 0; i < 3; ++i) free(ref[i]);
    }
    g_ordered = 0;
    group_free(&g);
    CHECK_CC(cc_coll_comm_destroy(hc));
}

/* ---- powerSGD_hook's choice of what to compress ------------------------------------------ */

/* A small model's gradients, as DDP hands them to powerSGD_hook: conv and
 * linear weights (ndim >= 2, passed with their matrix view) and 1-D biases
 * and norm weights (passed without a shape). powerSGD_hook compresses a
 * tensor exactly when ndim >= 2 and (rows + cols) r 2 < rows cols (its
 * _should_compress with the default min_compression_rate 2); everything
 * else goes into its uncompressed allreduce. The group must make the same
 * choice: bytes_wire is the factors of the compressed tensors plus the bytes
 * of the others, the others are bit-identical to MPI_Allreduce (integer
 * data), keep no factors or residual, and every call count advances. The
 * 400-element norm weight is one the near-square view (20 x 20, rank 2)
 * would have compressed. */
static void test_group_torch_rule(cc_coll_comm_h h)
{
    (void)h;
    static const struct {
        const char *name;
        int ndim;            /* of the torch tensor */
        uint64_t rows, cols; /* its view(shape[0], -1) */
        int k;
    } model[] = {
        {"conv.weight 16x3x3x3", 4, 16, 27, 2}, /* (16 + 27) 2 2 = 172 < 432 */
        {"conv.bias", 1, 16, 1, 2},
        {"fc1.weight 32x64", 2, 32, 64, 2}, /* 384 < 2048 */
        {"fc1.bias", 1, 32, 1, 2},
        {"norm.weight", 1, 400, 1, 2},
        {"fc2.weight 10x32", 2, 10, 32, 4}, /* (10 + 32) 4 2 = 336 >= 320: dense */
        {"fc2.bias", 1, 10, 1, 4},
    };
    enum { NM = sizeof model / sizeof model[0] };
    Spec spec[NM];
    int compress[NM];
    uint64_t want_wire = 0, want_ef = 0;
    int n_dense = 0;
    for (size_t i = 0; i < NM; ++i) {
        const uint64_t r = (uint64_t)model[i].k < model[i].rows
                               ? ((uint64_t)model[i].k < model[i].cols ? (uint64_t)model[i].k : model[i].cols)
                               : (model[i].rows < model[i].cols ? model[i].rows : model[i].cols);
        const uint64_t n = model[i].rows * model[i].cols;
        compress[i] = model[i].ndim >= 2 && (model[i].rows + model[i].cols) * r * 2 < n;
        const Spec s = {CC_COLL_METHOD_LOWRANK, CC_COLL_F32, (size_t)n,
                        model[i].ndim >= 2 ? model[i].rows : ONE_D, model[i].ndim >= 2 ? model[i].cols : 0,
                        model[i].k, (int)(i & 1), 0};
        spec[i] = s;
        want_wire += compress[i] ? (model[i].rows + model[i].cols) * r * sizeof(float) : n * sizeof(float);
        want_ef += compress[i] ? n * sizeof(float) : 0;
        n_dense += !compress[i];
    }
    CHECK(compress[0] && compress[2] && !compress[4] && !compress[5] && n_dense == 5, "the model's torch choices");
    cc_coll_comm_h hc = NULL;
    CHECK_CC(cc_coll_comm_create(MPI_COMM_WORLD, &hc));
    Group g;
    group_init(&g, spec, NM, 0x7300);
    for (int t = 0; t < 3; ++t) {
        const cc_coll_op_t op = t == 1 ? CC_COLL_SUM : CC_COLL_AVG;
        char desc[160];
        snprintf(desc, sizeof desc, "weights with shapes + 1-D biases, %s, call %d (P=%d)", op == CC_COLL_SUM ? "SUM" : "AVG",
                 t + 1, g_size);
        group_inputs(&g, 60 + t, 1);
        unsigned char *ref[NM];
        for (size_t i = 0; i < NM; ++i) {
            ref[i] = xmalloc(spec[i].n * sizeof(float));
            CHECK(MPI_Allreduce(g.in[i], ref[i], (int)spec[i].n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS,
                  "reference");
            if (op == CC_COLL_AVG)
                for (size_t j = 0; j < spec[i].n; ++j) ((float *)ref[i])[j] /= (float)g_size;
        }
        const uint64_t w0 = get_stats(hc).bytes_wire;
        const long c = run_group(&g, op, hc, 0x5u, 0, desc);
        const uint64_t wire = get_stats(hc).bytes_wire - w0;
        if (c != agreement_calls() + 3 + outcome_calls()) {
            fprintf(stderr, "[rank %d] %s: %ld MPI_Allreduce calls, expected %ld\n", g_rank, desc, c,
                    agreement_calls() + 3 + outcome_calls());
            die("%s: the agreement + 1 dense + 1 P + 1 Q + the outcome", desc, 0);
        }
        if (wire != want_wire) {
            fprintf(stderr, "[rank %d] %s: bytes_wire %llu, expected %llu\n", g_rank, desc, (unsigned long long)wire,
                    (unsigned long long)want_wire);
            die("%s: bytes_wire must be the compressed factors plus the dense tensors", desc, 0);
        }
        if (ef_bytes(hc) != want_ef) die("%s: residuals other than those of the compressed tensors", desc, 0);
        for (size_t i = 0; i < NM; ++i) {
            char what[240];
            snprintf(what, sizeof what, "%s: %s", desc, model[i].name);
            uint64_t rows = 9, cols = 9, calls = 0;
            int rank = -1;
            CHECK_CC(cc_coll_lowrank_get_state(hc, &g.params[i], g.recv[i], spec[i].n, CC_COLL_F32, &rows, &cols,
                                               &rank, &calls, NULL, NULL));
            if (calls != (uint64_t)t + 1) die("%s: call count", what, 0);
            if (compress[i]) {
                if (rank <= 0 || rows != model[i].rows || cols != model[i].cols)
                    die("%s: powerSGD_hook compresses it, the group did not", what, 0);
            } else {
                expect_equal(CC_COLL_F32, g.recv[i], ref[i], spec[i].n, what);
                if (rank != 0) die("%s: powerSGD_hook sends it uncompressed, the group kept factors", what, 0);
            }
            free(ref[i]);
        }
    }
    group_free(&g);
    CHECK_CC(cc_coll_comm_destroy(hc));
}

/* ---- 7. ranks that disagree ------------------------------------------------------------- */

/* Runs a group whose layout rank 0 sees differently: every rank must get
 * CC_COLL_ERR_MISMATCH, untouched recvbufs, no counted call, no residual. */
static void expect_mismatch(cc_coll_comm_h h, const Spec *mine, size_t nt, cc_coll_op_t op, const char *desc)
{
    Group g;
    group_init(&g, mine, nt, 0x8000);
    group_inputs(&g, 1, 0);
    group_stage(&g, 0u, 0);
    const uint64_t efb = ef_bytes(h);
    const cc_coll_stats_t s0 = get_stats(h);
    alarm(30);
    const cc_coll_status_t st = cc_coll_allreduce_group(nt, (const void *const *)g.send, (void *const *)g.recv,
                                                        g.counts, g.dtypes, op, g.params, h, NULL);
    alarm(0);
    expect_error(st, CC_COLL_ERR_MISMATCH, "disagree", desc);
    for (size_t i = 0; i < nt; ++i) {
        const size_t bytes = g.counts[i] * cc_coll_dtype_size(g.dtypes[i]) + 16;
        for (size_t j = 0; j < bytes; ++j)
            if (g.recv[i][j] != 0x5A) die("%s: a mismatched group wrote a recvbuf", desc, 0);
        if (mine[i].method == CC_COLL_METHOD_LOWRANK) {
            uint64_t calls = 9;
            CHECK_CC(cc_coll_lowrank_get_state(h, &g.params[i], g.recv[i], g.counts[i], g.dtypes[i], NULL, NULL, NULL,
                                               &calls, NULL, NULL));
            if (calls != 0) die("%s: a mismatched group counted a call", desc, 0);
        }
    }
    if (ef_bytes(h) != efb) die("%s: a mismatched group created a residual", desc, 0);
    if (get_stats(h).calls != s0.calls) die("%s: a mismatched group was counted in the statistics", desc, 0);
    group_free(&g);
    CHECK_CC(cc_coll_ef_reset_all(h));
}

static void test_group_mismatch(cc_coll_comm_h h)
{
    if (g_size < 2) {
        if (g_rank == 0) printf("    (needs 2 or more ranks)\n");
        return;
    }
    const int odd = g_rank == 0;
    const Spec base[] = {
        {CC_COLL_METHOD_LOWRANK, CC_COLL_F32, 600, 30, 20, 2, 1, 0},
        {CC_COLL_METHOD_NONE, CC_COLL_F32, 9, 0, 0, 0, 0, 0},
        {CC_COLL_METHOD_LOWRANK, CC_COLL_F32, 625, 0, 0, 1, 1, 0},
    };
    Spec s[3];
    char desc[120];

    memcpy(s, base, sizeof s);
    if (odd) {
        s[0].rows = 20;
        s[0].cols = 30;
    }
    snprintf(desc, sizeof desc, "shape 20 x 30 on rank 0, 30 x 20 elsewhere (P=%d)", g_size);
    expect_mismatch(h, s, 3, CC_COLL_AVG, desc);

    memcpy(s, base, sizeof s);
    if (odd) s[0].k = 3;
    snprintf(desc, sizeof desc, "rank 3 on rank 0, 2 elsewhere (P=%d)", g_size);
    expect_mismatch(h, s, 3, CC_COLL_AVG, desc);

    memcpy(s, base, sizeof s);
    if (odd) s[2].n = 576;
    snprintf(desc, sizeof desc, "count 576 on rank 0, 625 elsewhere (P=%d)", g_size);
    expect_mismatch(h, s, 3, CC_COLL_AVG, desc);

    memcpy(s, base, sizeof s);
    if (odd) s[1].n = 10;
    snprintf(desc, sizeof desc, "NONE count 10 on rank 0, 9 elsewhere (P=%d)", g_size);
    expect_mismatch(h, s, 3, CC_COLL_AVG, desc);

    memcpy(s, base, sizeof s);
    snprintf(desc, sizeof desc, "2 tensors on rank 0, 3 elsewhere (P=%d)", g_size);
    expect_mismatch(h, s, odd ? 2 : 3, CC_COLL_AVG, desc);

    memcpy(s, base, sizeof s);
    if (odd) s[2].d = CC_COLL_F64;
    snprintf(desc, sizeof desc, "dtype F64 on rank 0, F32 elsewhere (P=%d)", g_size);
    expect_mismatch(h, s, 3, CC_COLL_AVG, desc);

    memcpy(s, base, sizeof s);
    if (odd) s[2].method = CC_COLL_METHOD_NONE;
    snprintf(desc, sizeof desc, "NONE on rank 0, LOWRANK elsewhere (P=%d)", g_size);
    expect_mismatch(h, s, 3, CC_COLL_AVG, desc);

    memcpy(s, base, sizeof s);
    if (odd) s[2].rows = ONE_D;
    snprintf(desc, sizeof desc, "no shape (1-D, dense) on rank 0, the near-square view elsewhere (P=%d)", g_size);
    expect_mismatch(h, s, 3, CC_COLL_AVG, desc);

    memcpy(s, base, sizeof s);
    if (odd) s[0].start_iter = 1;
    snprintf(desc, sizeof desc, "start_iter 1 on rank 0, 0 elsewhere (P=%d)", g_size);
    expect_mismatch(h, s, 3, CC_COLL_AVG, desc);

    memcpy(s, base, sizeof s);
    snprintf(desc, sizeof desc, "op SUM on rank 0, AVG elsewhere (P=%d)", g_size);
    expect_mismatch(h, s, 3, odd ? CC_COLL_SUM : CC_COLL_AVG, desc);

    /* cc_coll_allreduce(LOWRANK) is a group of one: the same check. */
    memcpy(s, base, sizeof s);
    if (odd) s[0].k = 1;
    snprintf(desc, sizeof desc, "cc_coll_allreduce: rank 1 on rank 0, 2 elsewhere (P=%d)", g_size);
    {
        float *buf = xcalloc(600, sizeof *buf);
        cc_coll_params_t p = keyed(lowrank_params(30, 20, s[0].k), 0x8100);
        alarm(30);
        const cc_coll_status_t st = cc_coll_allreduce(buf, buf, 600, CC_COLL_F32, CC_COLL_AVG, &p, h, NULL);
        alarm(0);
        expect_error(st, CC_COLL_ERR_MISMATCH, "disagree", desc);
        free(buf);
    }

    /* The communicator is still usable: an agreed group runs. */
    Group g;
    group_init(&g, base, 3, 0x8200);
    group_inputs(&g, 2, 0);
    alarm(30);
    run_group(&g, CC_COLL_AVG, h, 0u, 0, "an agreed group after the mismatches");
    alarm(0);
    group_free(&g);
    CHECK_CC(cc_coll_ef_reset_all(h));
}

/* ---- 7. argument errors --------------------------------------------------------------- */

static void test_group_bad_args(cc_coll_comm_h h)
{
    float a[128], b[100], c[64];
    memset(a, 0, sizeof a);
    memset(b, 0, sizeof b);
    memset(c, 0, sizeof c);
    void *recv[3] = {a, b, c};
    const void *send[3] = {a, b, c};
    size_t counts[3] = {100, 100, 64};
    cc_coll_dtype_t dtypes[3] = {CC_COLL_F32, CC_COLL_F32, CC_COLL_F32};
    cc_coll_params_t p[3];
    p[0] = keyed(lowrank_params(10, 10, 1), 0x9000);
    p[1] = keyed(lowrank_params(20, 5, 2), 0x9001);
    p[2] = method_params(CC_COLL_METHOD_NONE);
    const uint64_t efb = ef_bytes(h);
    const long c0 = g_allreduce_calls;

    expect_error(cc_coll_allreduce_group(3, send, NULL, counts, dtypes, CC_COLL_AVG, p, h, NULL),
                 CC_COLL_ERR_NULL_BUFFER, "recvbufs", "recvbufs NULL");
    expect_error(cc_coll_allreduce_group(3, send, recv, NULL, dtypes, CC_COLL_AVG, p, h, NULL),
                 CC_COLL_ERR_INVALID_ARG, "counts", "counts NULL");
    expect_error(cc_coll_allreduce_group(3, send, recv, counts, NULL, CC_COLL_AVG, p, h, NULL),
                 CC_COLL_ERR_INVALID_ARG, "dtypes", "dtypes NULL");
    expect_error(cc_coll_allreduce_group(3, send, recv, counts, dtypes, (cc_coll_op_t)5, p, h, NULL),
                 CC_COLL_ERR_INVALID_OP, "op", "bad op");
    expect_error(cc_coll_allreduce_group(3, send, recv, counts, dtypes, CC_COLL_AVG, p, NULL, NULL),
                 CC_COLL_ERR_INVALID_COMM, "comm", "NULL comm");
    int dummy_stream = 0;
    if (fake_stream_status() != CC_COLL_OK)
        expect_error(cc_coll_allreduce_group(3, send, recv, counts, dtypes, CC_COLL_AVG, p, h, &dummy_stream),
                     fake_stream_status(), "stream", "made-up stream");
    {
        void *r2[3] = {a, NULL, c};
        expect_error(cc_coll_allreduce_group(3, NULL, r2, counts, dtypes, CC_COLL_AVG, p, h, NULL),
                     CC_COLL_ERR_NULL_BUFFER, "tensor 1", "recvbufs[1] NULL");
    }
    {
        cc_coll_dtype_t d2[3] = {CC_COLL_F32, (cc_coll_dtype_t)9, CC_COLL_F32};
        expect_error(cc_coll_allreduce_group(3, send, recv, counts, d2, CC_COLL_AVG, p, h, NULL),
                     CC_COLL_ERR_INVALID_DTYPE, "tensor 1", "dtypes[1] invalid");
    }
    {
        /* recvbufs 0 and 2 overlap (c inside a), and 1 and 2 equal. */
        void *r2[3] = {a, b, a + 50};
        expect_error(cc_coll_allreduce_group(3, NULL, r2, counts, dtypes, CC_COLL_AVG, p, h, NULL),
                     CC_COLL_ERR_INVALID_ARG, "recvbufs[0] and recvbufs[2] overlap", "overlapping recvbufs");
        void *r3[3] = {a, b, b};
        expect_error(cc_coll_allreduce_group(3, NULL, r3, counts, dtypes, CC_COLL_AVG, p, h, NULL),
                     CC_COLL_ERR_INVALID_ARG, "recvbufs[1] and recvbufs[2] overlap", "equal recvbufs");
    }
    {
        cc_coll_params_t q[3] = {p[0], p[1], p[2]};
        q[1].rank = 0;
        expect_error(cc_coll_allreduce_group(3, send, recv, counts, dtypes, CC_COLL_AVG, q, h, NULL),
                     CC_COLL_ERR_INVALID_ARG, "params[1]", "params[1].rank 0");
        CHECK(strstr(cc_coll_last_error(), "rank") != NULL, "the message names the rank");
        q[1] = p[1];
        q[0].mask |= CC_COLL_PARAMS_FIELD_MIN_COMPRESSION_RATE;
        q[0].min_compression_rate = 0.5;
        expect_error(cc_coll_allreduce_group(3, send, recv, counts, dtypes, CC_COLL_AVG, q, h, NULL),
                     CC_COLL_ERR_INVALID_ARG, "min_compression_rate", "params[0].min_compression_rate 0.5");
        q[0] = p[0];
        q[1].mask |= CC_COLL_PARAMS_FIELD_WARM_START;
        q[1].warm_start = 2;
        expect_error(cc_coll_allreduce_group(3, send, recv, counts, dtypes, CC_COLL_AVG, q, h, NULL),
                     CC_COLL_ERR_INVALID_ARG, "warm_start", "params[1].warm_start 2");
        q[1] = p[1];
        q[2].mask |= (1ULL << 40);
        expect_error(cc_coll_allreduce_group(3, send, recv, counts, dtypes, CC_COLL_AVG, q, h, NULL),
                     CC_COLL_ERR_INVALID_PARAMS, "params[2]", "params[2] unknown mask bit");
        /* The argument errors above are found before any message moves. */
        if (g_allreduce_calls != c0) die("%s", "a group with bad arguments made MPI calls", 0);
        /* A shape that does not fit the count: at most the agreement
         * (which keeps ranks that disagree from waiting), no data. */
        q[2] = p[2];
        q[1] = keyed(lowrank_params(7, 0, 1), 0x9001);
        expect_error(cc_coll_allreduce_group(3, send, recv, counts, dtypes, CC_COLL_AVG, q, h, NULL),
                     CC_COLL_ERR_INVALID_ARG, "rows = 7 does not divide count = 100", "params[1]: rows 7, count 100");
        CHECK(strstr(cc_coll_last_error(), "tensor 1") != NULL, "the message names the tensor");
        if (g_allreduce_calls > c0 + 1) die("%s", "a group with an invalid shape moved data", 0);
    }
    if (ef_bytes(h) != efb) die("%s", "a group with bad arguments created a residual", 0);
    uint64_t calls = 9;
    CHECK_CC(cc_coll_lowrank_get_state(h, &p[0], a, 100, CC_COLL_F32, NULL, NULL, NULL, &calls, NULL, NULL));
    if (calls != 0) die("%s", "a group with bad arguments counted a call", 0);
    /* And the good call runs (sendbufs NULL: in place). */
    for (int i = 0; i < 100; ++i) a[i] = b[i] = (float)(i % 5);
    CHECK_CC(cc_coll_allreduce_group(3, NULL, recv, counts, dtypes, CC_COLL_AVG, p, h, NULL));
    CHECK_CC(cc_coll_ef_reset_all(h));
}

/* ---- one rank's local error ---------------------------------------------------------------- */

/* Rank 0 passes a shape that is invalid for the count (rows 7, count 100),
 * the others a valid one (rows 10). Rank 0 finds that while planning; it
 * still takes part in the agreement, so rank 0 gets its own error (or
 * MISMATCH), every other rank CC_COLL_ERR_MISMATCH, and nobody hangs (the
 * watchdog aborts after 20 s). */
static void invalid_shape_on_one_rank(cc_coll_comm_h h)
{
    if (g_size < 2) {
        if (g_rank == 0) printf("    (needs 2 or more ranks)\n");
        return;
    }
    float buf[100];
    memset(buf, 0, sizeof buf);
    cc_coll_params_t p = keyed(lowrank_params(g_rank == 0 ? 7 : 10, 0, 1), 0xa000);
    alarm(20);
    const cc_coll_status_t st = cc_coll_allreduce(buf, buf, 100, CC_COLL_F32, CC_COLL_AVG, &p, h, NULL);
    MPI_Barrier(MPI_COMM_WORLD);
    alarm(0);
    if (g_rank == 0) {
        if (st != CC_COLL_ERR_INVALID_ARG && st != CC_COLL_ERR_MISMATCH)
            die("%s", "rank 0 (invalid shape): expected CC_COLL_ERR_INVALID_ARG or CC_COLL_ERR_MISMATCH", (int)st);
    } else {
        expect_error(st, CC_COLL_ERR_MISMATCH, "disagree", "a valid shape while rank 0's is invalid");
    }
    CHECK_CC(cc_coll_ef_reset_all(h));
}

/* ---- main -------------------------------------------------------------------------------- */

static void setup(void)
{
    unset_lowrank_settings();
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sigaction(SIGALRM, &sa, NULL);

    /* The interposition works: a plain MPI_Allreduce through the library
     * reaches this program's MPI_Allreduce (checked on a communicator of its
     * own, before any test, whichever tests are selected). */
    cc_coll_comm_h h = NULL;
    CHECK_CC(cc_coll_comm_create(MPI_COMM_WORLD, &h));
    float x = 1.0f;
    cc_coll_params_t p = method_params(CC_COLL_METHOD_NONE);
    const long c0 = g_allreduce_calls;
    CHECK_CC(cc_coll_allreduce(&x, &x, 1, CC_COLL_F32, CC_COLL_SUM, &p, h, NULL));
    CHECK(g_allreduce_calls == c0 + 1 + agreement_calls(),
          "libcc_coll's MPI_Allreduce does not reach this program's definition");
    CHECK_CC(cc_coll_comm_destroy(h));
}

static const NamedTest kTests[] = {
    {"group_vs_singles", test_group_vs_singles},
    {"group_calls", test_group_calls},
    {"group_dense_routes", test_group_dense_routes},
    {"group_torch_rule", test_group_torch_rule},
    {"group_mismatch", test_group_mismatch},
    {"group_bad_args", test_group_bad_args},
    {"invalid_shape_on_one_rank", invalid_shape_on_one_rank},
};

int main(int argc, char **argv)
{
    return run_suite(argc, argv, "lowrank_group", kTests, sizeof kTests / sizeof kTests[0], 1, setup);
}
