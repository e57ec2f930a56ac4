/* Ranks that disagree (docs/api.md, "Agreement"): a matrix of collective
 * calls in which one rank's call differs from the others' in one thing that
 * shapes the exchange: the method (every pair), the collective (allreduce,
 * group, reduce-scatter), the count (including 0), the dtype, the op, the
 * density (TOPK's dense and sparse paths), the seed, LOWRANK's rank and
 * shape, the number of tensors of a group, and local failures (a residual
 * one rank cannot create or whose key it reused). Every case must end with
 * CC_COLL_ERR_MISMATCH on every rank that did not fail on its own (whose own
 * error it returns), within the watchdog's time (a hang fails the test),
 * with recvbuf and the residuals untouched; then an agreed call on the same
 * communicator must still be right (nothing of the failed call is left in
 * flight). Run with 2 and 3 ranks; the odd rank out moves with the case. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mpi.h>

#include "cc_coll.h"
#include "check.h"
#include "test_util.h"

enum Kind { ALLREDUCE, GROUP, REDUCE_SCATTER };
static const char *const kKindName[] = {"allreduce", "group", "reduce_scatter"};

typedef struct {
    enum Kind kind;
    cc_coll_method_t method;
    size_t count;  /* elements per tensor; reduce-scatter: recvcount */
    cc_coll_dtype_t dtype;
    cc_coll_op_t op;
    double density;
    uint64_t seed;
    int lr_rank;
    uint64_t rows; /* LOWRANK SHAPE rows (cols 0: count / rows); 0: near-square */
    size_t ntensors; /* GROUP */
    int has_key;
    uint64_t key;
} Call;

static Call base_call(void)
{
    Call c;
    memset(&c, 0, sizeof c);
    c.kind = ALLREDUCE;
    c.method = CC_COLL_METHOD_TOPK;
    c.count = 65536;
    c.dtype = CC_COLL_F32;
    c.op = CC_COLL_AVG;
    c.density = 0.01;
    c.seed = 7;
    c.lr_rank = 2;
    c.rows = 0;
    c.ntensors = 2;
    return c;
}

#define MAX_ELEMS (69632u * 4u)
#define MAX_TENSORS 4
static unsigned char *g_send, *g_recv, *g_guard;

static cc_coll_params_t params_of(const Call *c)
{
    cc_coll_params_t p = method_params(c->method);
    p.mask |= CC_COLL_PARAMS_FIELD_SEED;
    p.seed = c->seed;
    if (c->method == CC_COLL_METHOD_TOPK || c->method == CC_COLL_METHOD_SKETCH) {
        p.mask |= CC_COLL_PARAMS_FIELD_DENSITY;
        p.density = c->density;
    }
    if (c->method == CC_COLL_METHOD_LOWRANK) {
        p.mask |= CC_COLL_PARAMS_FIELD_RANK | CC_COLL_PARAMS_FIELD_SHAPE;
        p.rank = c->lr_rank;
        p.rows = c->rows;
        p.cols = 0;
    }
    if (c->has_key) p = keyed(p, c->key);
    return p;
}

static size_t dsize(cc_coll_dtype_t d) { return d == CC_COLL_F64 ? 8 : d == CC_COLL_F32 ? 4 : 2; }

/* The call on g_send / g_recv (out of place). */
static cc_coll_status_t run_call(const Call *c, cc_coll_comm_h h)
{
    cc_coll_params_t p = params_of(c);
    switch (c->kind) {
    case ALLREDUCE: return cc_coll_allreduce(g_send, g_recv, c->count, c->dtype, c->op, &p, h, NULL);
    case REDUCE_SCATTER: return cc_coll_reduce_scatter(g_send, g_recv, c->count, c->dtype, c->op, &p, h, NULL);
    case GROUP: {
        const void *sends[MAX_TENSORS];
        void *recvs[MAX_TENSORS];
        size_t counts[MAX_TENSORS];
        cc_coll_dtype_t dtypes[MAX_TENSORS];
        cc_coll_params_t ps[MAX_TENSORS];
        const size_t es = dsize(c->dtype);
        for (size_t i = 0; i < c->ntensors; ++i) {
            sends[i] = g_send + i * c->count * es;
            recvs[i] = g_recv + i * c->count * es;
            counts[i] = c->count;
            dtypes[i] = c->dtype;
            ps[i] = p;
            if (c->has_key) ps[i].ef_key = c->key + i;
        }
        return cc_coll_allreduce_group(c->ntensors, sends, recvs, counts, dtypes, c->op, ps, h, NULL);
    }
    }
    return CC_COLL_ERR_INTERNAL;
}

static uint64_t ef_bytes(cc_coll_comm_h h)
{
    uint64_t b = 0;
    CHECK_CC(cc_coll_ef_bytes(h, &b));
    return b;
}

static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "agreement: a disagreeing call hung (watchdog)\n";
    if (write(2, msg, sizeof msg - 1) < 0) {}
    _exit(3);
}

static void fill_inputs(void)
{
    float *f = (float *)g_send;
    for (size_t i = 0; i < MAX_ELEMS * 2; ++i) f[i] = (float)((i * 7919u + (unsigned)g_rank * 31u) % 1000u) / 1000.0f;
    memset(g_recv, 0xa5, MAX_ELEMS * 8);
    memset(g_guard, 0xa5, MAX_ELEMS * 8);
}

/* One case: `mine` on the odd rank out, `others` elsewhere. `local` is the
 * status the odd rank returns on its own (CC_COLL_ERR_MISMATCH when it has
 * no error of its own). */
static void expect_disagreement(const char *desc, const Call *others, const Call *mine, int odd,
                                cc_coll_status_t local, cc_coll_comm_h h)
{
    const Call *c = g_rank == odd ? mine : others;
    fill_inputs();
    const uint64_t efb = ef_bytes(h);
    alarm(30);
    const cc_coll_status_t st = run_call(c, h);
    alarm(0);
    const cc_coll_status_t want = g_rank == odd ? local : CC_COLL_ERR_MISMATCH;
    if (st != want) {
        fprintf(stderr, "[rank %d] %s (%s, odd rank %d): got %s, expected %s (message: \"%s\")\n", g_rank, desc,
                kKindName[c->kind], odd, cc_coll_status_string(st), cc_coll_status_string(want),
                cc_coll_last_error());
        die("%s: wrong status", desc, (int)st);
    }
    if (st == CC_COLL_ERR_MISMATCH && strstr(cc_coll_last_error(), "disagree") == NULL &&
        strstr(cc_coll_last_error(), "ef_key") == NULL) {
        fprintf(stderr, "[rank %d] %s: message \"%s\" names no disagreement\n", g_rank, desc, cc_coll_last_error());
        die("%s: message", desc, 0);
    }
    if (memcmp(g_recv, g_guard, MAX_ELEMS * 8) != 0) die("%s: recvbuf was written", desc, 0);
    if (ef_bytes(h) != efb) die("%s: a residual was created or dropped", desc, 0);
}

/* An agreed NONE allreduce and an agreed TOPK allreduce right after: the
 * NONE result equals MPI_Allreduce's, and the TOPK one is the same on every
 * rank. */
static void expect_agreed_calls_work(const char *desc, cc_coll_comm_h h)
{
    enum { N = 4096 };
    static float a[N], b[N], ref[N];
    for (int i = 0; i < N; ++i) a[i] = (float)((i * 13 + g_rank * 5) % 17);
    cc_coll_params_t p = method_params(CC_COLL_METHOD_NONE);
    alarm(30);
    CHECK_CC(cc_coll_allreduce(a, b, N, CC_COLL_F32, CC_COLL_SUM, &p, h, NULL));
    CHECK(MPI_Allreduce(a, ref, N, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS, "reference");
    if (memcmp(b, ref, sizeof b) != 0) die("%s: the agreed NONE call after it is wrong", desc, 0);
    p = topk_params(0.05, 0);
    CHECK_CC(cc_coll_allreduce(a, b, N, CC_COLL_F32, CC_COLL_SUM, &p, h, NULL));
    alarm(0);
    expect_same_on_all_ranks(b, sizeof b, desc);
}

static int g_case = 0;

static void one_case(const char *desc, const Call *others, const Call *mine, cc_coll_status_t local,
                     cc_coll_comm_h h)
{
    const int odd = g_case++ % g_size;
    expect_disagreement(desc, others, mine, odd, local, h);
    expect_agreed_calls_work(desc, h);
}

static const cc_coll_method_t kMethods[] = {CC_COLL_METHOD_NONE, CC_COLL_METHOD_TOPK, CC_COLL_METHOD_SKETCH,
                                            CC_COLL_METHOD_LOWRANK};
static const char *const kMethodName[] = {"none", "topk", "sketch", "lowrank"};

/* ---- the cases ------------------------------------------------------------------------ */

static void test_methods(cc_coll_comm_h h)
{
    for (int k = 0; k < 3; ++k)
        for (size_t a = 0; a < 4; ++a)
            for (size_t b = 0; b < 4; ++b) {
                if (a == b) continue;
                Call x = base_call(), y;
                x.kind = (enum Kind)k;
                x.method = kMethods[a];
                y = x;
                y.method = kMethods[b];
                // LOWRANK has no reduce-scatter: that rank fails on its own.
                cc_coll_status_t local = CC_COLL_ERR_MISMATCH;
                if (k == REDUCE_SCATTER && y.method == CC_COLL_METHOD_LOWRANK) local = CC_COLL_ERR_NOT_SUPPORTED;
                char desc[128];
                snprintf(desc, sizeof desc, "%s: %s against %s", kKindName[k], kMethodName[b], kMethodName[a]);
                if (k == REDUCE_SCATTER && x.method == CC_COLL_METHOD_LOWRANK) {
                    /* The others would fail on their own: swap the roles. */
                    one_case(desc, &y, &x, CC_COLL_ERR_NOT_SUPPORTED, h);
                    continue;
                }
                one_case(desc, &x, &y, local, h);
            }
}

static void test_collectives(cc_coll_comm_h h)
{
    for (size_t m = 0; m < 4; ++m)
        for (int a = 0; a < 3; ++a)
            for (int b = 0; b < 3; ++b) {
                if (a == b) continue;
                Call x = base_call(), y;
                x.method = kMethods[m];
                x.kind = (enum Kind)a;
                y = x;
                y.kind = (enum Kind)b;
                const int lr = kMethods[m] == CC_COLL_METHOD_LOWRANK;
                char desc[128];
                snprintf(desc, sizeof desc, "%s: %s against %s", kMethodName[m], kKindName[b], kKindName[a]);
                if (lr && a == REDUCE_SCATTER) {
                    one_case(desc, &y, &x, CC_COLL_ERR_NOT_SUPPORTED, h);
                    continue;
                }
                one_case(desc, &x, &y, lr && b == REDUCE_SCATTER ? CC_COLL_ERR_NOT_SUPPORTED : CC_COLL_ERR_MISMATCH,
                         h);
            }
}

/* One field changed on the odd rank, for every method and collective that
 * has it. */
typedef void (*Change)(Call *);
static void count_bigger(Call *c) { c->count = 69632; }
static void count_plus_one(Call *c) { c->count = 65537; }
static void count_zero(Call *c) { c->count = 0; }
static void dtype_f64(Call *c) { c->dtype = CC_COLL_F64; }
static void op_sum(Call *c) { c->op = CC_COLL_SUM; }
static void density_dense(Call *c) { c->density = 0.5; }
static void density_other(Call *c) { c->density = 0.02; }
static void seed_other(Call *c) { c->seed = 8; }
static void rank_other(Call *c) { c->lr_rank = 3; }
static void rows_other(Call *c) { c->rows = 128; }
static void ntensors_other(Call *c) { c->ntensors = 3; }
static void ntensors_zero(Call *c) { c->ntensors = 0; }

typedef struct {
    const char *name;
    Change change;
    unsigned methods; /* bit per kMethods index */
    unsigned kinds;   /* bit per Kind */
} FieldCase;

#define ALL_METHODS 0xfu
#define ALL_KINDS 0x7u
static const FieldCase kFields[] = {
    {"count 69632 against 65536", count_bigger, ALL_METHODS, ALL_KINDS},
    {"count 65537 against 65536", count_plus_one, ALL_METHODS, ALL_KINDS},
    {"count 0 against 65536", count_zero, ALL_METHODS, ALL_KINDS},
    {"f64 against f32", dtype_f64, ALL_METHODS, ALL_KINDS},
    {"sum against avg", op_sum, ALL_METHODS, ALL_KINDS},
    {"density 0.5 (dense) against 0.01 (sparse)", density_dense, 0x6u, ALL_KINDS},
    {"density 0.02 against 0.01", density_other, 0x6u, ALL_KINDS},
    {"seed 8 against 7", seed_other, 0xcu, ALL_KINDS},
    {"LOWRANK rank 3 against 2", rank_other, 0x8u, 0x3u},
    {"LOWRANK rows 128 against near-square", rows_other, 0x8u, 0x3u},
    {"3 tensors against 2", ntensors_other, ALL_METHODS, 0x2u},
    {"0 tensors against 2", ntensors_zero, ALL_METHODS, 0x2u},
};

static void run_fields(cc_coll_comm_h h, cc_coll_dtype_t base_dtype, cc_coll_dtype_t other_dtype)
{
    for (size_t f = 0; f < sizeof kFields / sizeof kFields[0]; ++f)
        for (size_t m = 0; m < 4; ++m)
            for (int k = 0; k < 3; ++k) {
                if (!(kFields[f].methods >> m & 1u) || !(kFields[f].kinds >> k & 1u)) continue;
                if (kMethods[m] == CC_COLL_METHOD_LOWRANK && k == REDUCE_SCATTER) continue;
                Call x = base_call(), y;
                x.method = kMethods[m];
                x.kind = (enum Kind)k;
                x.dtype = base_dtype;
                y = x;
                kFields[f].change(&y);
                if (kFields[f].change == dtype_f64) y.dtype = other_dtype;
                char desc[160];
                snprintf(desc, sizeof desc, "%s %s %s: %s", kMethodName[m], kKindName[k], dtype_name(base_dtype),
                         kFields[f].change == dtype_f64 ? (other_dtype == CC_COLL_F64 ? "f64 against f32"
                                                                                      : "bf16 against f16")
                                                        : kFields[f].name);
                one_case(desc, &x, &y, CC_COLL_ERR_MISMATCH, h);
            }
}

static void test_fields(cc_coll_comm_h h) { run_fields(h, CC_COLL_F32, CC_COLL_F64); }
static void test_fields_half(cc_coll_comm_h h) { run_fields(h, CC_COLL_F16, CC_COLL_BF16); }

/* Local failures before the exchange reach the other ranks: a residual one
 * rank cannot create (its CC_COLL_EF_MAX_BYTES is smaller) and an explicit
 * ef_key one rank already used with another count. */
static void test_local_failures(cc_coll_comm_h h)
{
    (void)h;
    const int odd = g_size - 1;
    if (g_rank == odd) setenv("CC_COLL_EF_MAX_BYTES", "1000", 1);
    cc_coll_comm_h capped = NULL;
    CHECK_CC(cc_coll_comm_create(MPI_COMM_WORLD, &capped));
    unsetenv("CC_COLL_EF_MAX_BYTES");
    for (size_t m = 1; m < 4; ++m)
        for (int k = 0; k < 3; ++k) {
            if (kMethods[m] == CC_COLL_METHOD_LOWRANK && k == REDUCE_SCATTER) continue;
            Call x = base_call();
            x.method = kMethods[m];
            x.kind = (enum Kind)k;
            char desc[128];
            snprintf(desc, sizeof desc, "%s %s: a residual over one rank's cap", kMethodName[m], kKindName[k]);
            expect_disagreement(desc, &x, &x, odd, CC_COLL_ERR_EF_LIMIT, capped);
            expect_agreed_calls_work(desc, capped);
        }
    CHECK_CC(cc_coll_comm_destroy(capped));

    /* ef_key 0x5150 holds a residual of 100 elements on the odd rank only. */
    cc_coll_comm_h keyed_comm = NULL;
    CHECK_CC(cc_coll_comm_create(MPI_COMM_WORLD, &keyed_comm));
    for (size_t m = 1; m < 3; ++m) {
        Call x = base_call();
        x.method = kMethods[m];
        x.has_key = 1;
        x.key = 0x5150;
        char desc[128];
        snprintf(desc, sizeof desc, "%s: ef_key reused with another count on one rank", kMethodName[m]);
        /* Every rank makes a 100-element call with the key together, then
         * only the odd rank keeps its residual (the others reset theirs). */
        Call small = x;
        small.count = 100;
        fill_inputs();
        CHECK_CC(run_call(&small, keyed_comm));
        cc_coll_params_t p = params_of(&x);
        if (g_rank != odd) CHECK_CC(cc_coll_ef_reset(keyed_comm, &p, g_recv, 100, CC_COLL_F32));
        expect_disagreement(desc, &x, &x, odd, CC_COLL_ERR_MISMATCH, keyed_comm);
        expect_agreed_calls_work(desc, keyed_comm);
        CHECK_CC(cc_coll_ef_reset_all(keyed_comm));
    }
    CHECK_CC(cc_coll_comm_destroy(keyed_comm));
}

/* A method's own settings shape its exchange (its options word is in the
 * agreement): one rank's communicator created with another value makes
 * every rank's allreduce and reduce-scatter (LOWRANK, which has none: group)
 * with that method CC_COLL_ERR_MISMATCH, and the next agreed call works. */
static void test_method_settings(cc_coll_comm_h h)
{
    (void)h;
    static const struct {
        cc_coll_method_t method;
        const char *var, *value;
    } cases[] = {
        {CC_COLL_METHOD_HALF, "CC_COLL_HALF_FORMAT", "fp16"},
        {CC_COLL_METHOD_QUANT, "CC_COLL_QUANT_BITS", "8"},
        {CC_COLL_METHOD_QUANT, "CC_COLL_QUANT_CHUNK", "512"},
        {CC_COLL_METHOD_QUANT, "CC_COLL_QUANT_SCHEME", "norm"},
        {CC_COLL_METHOD_QUANT, "CC_COLL_QUANT_ROUNDING", "stochastic"},
        {CC_COLL_METHOD_ONEBIT, "CC_COLL_ONEBIT_CHUNK", "256"},
        {CC_COLL_METHOD_LOWRANK, "CC_COLL_LOWRANK_FACTORS", "bf16"},
        {CC_COLL_METHOD_LOWRANK, "CC_COLL_LOWRANK_FACTORS", "fp16"},
    };
    const int odd = g_size - 1;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
        if (g_rank == odd) setenv(cases[i].var, cases[i].value, 1);
        cc_coll_comm_h other = NULL;
        CHECK_CC(cc_coll_comm_create(MPI_COMM_WORLD, &other));
        unsetenv(cases[i].var);
        for (int k = 0; k < 2; ++k) {
            Call x = base_call();
            x.method = cases[i].method;
            x.kind = k == 0 ? ALLREDUCE : cases[i].method == CC_COLL_METHOD_LOWRANK ? GROUP : REDUCE_SCATTER;
            char desc[128];
            snprintf(desc, sizeof desc, "%s=%s on one rank", cases[i].var, cases[i].value);
            expect_disagreement(desc, &x, &x, odd, CC_COLL_ERR_MISMATCH, other);
            expect_agreed_calls_work(desc, other);
        }
        CHECK_CC(cc_coll_comm_destroy(other));
    }
}

static void setup(void)
{
    static const char *const vars[] = {"CC_COLL_METHOD", "CC_COLL_EF", "CC_COLL_EF_MAX_BYTES", "CC_COLL_SEED",
                                       "CC_COLL_DENSITY"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; ++i) unsetenv(vars[i]);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sigaction(SIGALRM, &sa, NULL);
    g_send = xmalloc(MAX_ELEMS * 8);
    g_recv = xmalloc(MAX_ELEMS * 8);
    g_guard = xmalloc(MAX_ELEMS * 8);
}

static const NamedTest kTests[] = {
    {"methods", test_methods},
    {"collectives", test_collectives},
    {"fields", test_fields},
    {"fields_half", test_fields_half},
    {"local_failures", test_local_failures},
    {"method_settings", test_method_settings},
};

int main(int argc, char **argv)
{
    return run_suite(argc, argv, "agreement", kTests, sizeof kTests / sizeof kTests[0], 2, setup);
}
