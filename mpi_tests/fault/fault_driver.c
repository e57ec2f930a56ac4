/*
 * Fault injection with real ranks (run with 2 or more ranks): a seeded
 * sequence of libcc_coll calls while corrupt.c edits the bytes ONE rank
 * receives from the others (corrupt.h: bit flips, words set to 0, -1,
 * INT_MAX, INT_MIN or random, random runs, NaN/inf/huge floats; received
 * parts above 160 bytes only, so the library's small control exchanges stay
 * intact). What the library promises under such faults: no crash, no hang,
 * and every rank returns the same status from every call, so that no rank
 * goes on while another gives up.
 *
 * The call mix covers every method and algorithm: NONE; TOPK with the
 * allgather algorithm, the split algorithm, the pipelined allgather
 * (CC_COLL_PIPELINE_BYTES) and the dense fallback at high density; SKETCH
 * (top-k and threshold sparsifiers); LOWRANK (shaped and 1-D); AUTO on a
 * given slow link; cc_coll_allreduce_group mixing methods; the hierarchical
 * allreduce and group on nodes faked with CC_COLL_NODES; cc_coll_reduce_scatter
 * (NONE, TOPK, SKETCH, AUTO); the non-blocking forms (cc_coll_iallreduce,
 * cc_coll_ireduce_scatter, cc_coll_iallreduce_group, one to three requests
 * in flight, completed by cc_coll_wait, cc_coll_test loops or
 * cc_coll_waitall); optionally (--p2p) cc_coll_send/cc_coll_recv in a ring.
 * F32 and F64 (some F16 and BF16), SUM and AVG, error feedback on and off,
 * in place and not, 200 to 20000 elements (--max-count). Every rank draws
 * the same sequence from --seed; the corruption has its own seed.
 *
 * After each call the ranks compare their statuses with an exchange that is
 * never corrupted (PMPI_Allgather on MPI_COMM_WORLD, the interposer off).
 * Statuses that differ are printed on rank 0 with the call's index and
 * description, every rank's status and cc_coll_last_error() message, and
 * the edits made during the call; the driver then drops every residual and
 * LOWRANK state (cc_coll_ef_reset_all) so that one fault does not cascade
 * (--no-resync keeps them). Calls whose statuses agree are also checked for
 * results that differ between ranks where every rank must get the same bits
 * (an undetected corruption; reported as result_differs, never a failure).
 * A crash is a signal (the handler names the call before the default
 * action); a call that has not returned after --call-timeout seconds
 * prints "HANG" with the call and exits with status 124.
 *
 *   mpirun -np 3 mpi_fault_driver [options]
 *     --calls N            calls to make (default 1000)
 *     --seed S             the call sequence (default 1)
 *     --fault-seed S       the corruption (default: --seed)
 *     --probability P      chance that an eligible MPI call is corrupted
 *                          (default 0.2)
 *     --corrupt-rank R     the rank whose received bytes are edited
 *                          (default 1 % size)
 *     --max-count N        largest tensor, in elements (default 20000)
 *     --kinds K1,K2,...    only these kinds of call (names as in the summary)
 *     --p2p                add point-to-point calls to the mix
 *     --progress MODE      caller (default) or thread (MPI_THREAD_MULTIPLE
 *                          and the library's progress thread)
 *     --call-timeout S     seconds before a call counts as a hang (default
 *                          120; 0: none)
 *     --strict             stop at the first difference in statuses
 *     --report-only        exit status 0 even with differences
 *     --no-resync          keep residuals after a difference
 *     -v                   print every call that returned an error, with
 *                          each rank's message and the edits
 *
 * Rank 0 prints "fault_driver: progress calls=.. corrupted=.. status_differs=.."
 * every 100 calls, and at the end one summary line, "fault_driver: ranks=..
 * seed=.. calls=.. corrupted=.. eligible=.. error_calls=.. status_differs=..
 * result_differs=.. seconds=..", then a table by kind. Exit status: 0, or
 * 1 when statuses differed (unless --report-only), 2 for a bad option,
 * 124 for a hang; a crash ends mpirun with the rank's signal.
 */
#define _POSIX_C_SOURCE 200809L /* setenv, sigaction */

#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mpi.h>

#include "cc_coll.h"
#include "corrupt.h"

/* ---- options and state ------------------------------------------------------- */

static int g_rank = 0, g_size = 1;
static long g_calls = 1000;
static uint64_t g_seed = 1, g_fault_seed = 0;
static int g_fault_seed_set = 0;
static double g_probability = 0.2;
static int g_corrupt_rank = -1;
static size_t g_max_count = 20000;
static int g_p2p = 0;
static int g_thread = 0;
static int g_call_timeout = 120;
static int g_strict = 0, g_report_only = 0, g_resync = 1, g_verbose = 0;
static const char *g_kinds = NULL;

/* The call now running, for the signal handlers. */
static char g_now[400];
static volatile sig_atomic_t g_in_library = 0;
static const char *volatile g_now_desc = NULL; /* the running call's description, as far as drawn */

static void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (p == NULL) {
        fprintf(stderr, "[rank %d] fault_driver: out of memory\n", g_rank);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    return p;
}

/* ---- random numbers ------------------------------------------------------------ */

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rng_next(uint64_t *s) { return mix64(*s += 0x9e3779b97f4a7c15ull); }
static double rng_uniform(uint64_t *s) { return (double)(rng_next(s) >> 11) * (1.0 / 9007199254740992.0); }
static size_t rng_below(uint64_t *s, size_t n) { return n == 0 ? 0 : (size_t)(rng_next(s) % n); }

/* ---- the kinds of call ------------------------------------------------------------ */

typedef enum {
    K_NONE,
    K_TOPK,
    K_TOPK_DENSE,
    K_TOPK_SPLIT,
    K_TOPK_PIPE,
    K_SKETCH,
    K_LOWRANK,
    K_AUTO,
    K_GROUP,
    K_HIER,
    K_HIER_GROUP,
    K_RS,
    K_NB,
    K_P2P,
    K_COUNT
} Kind;

static const char *const kKindName[K_COUNT] = {
    "none", "topk", "topk-dense", "topk-split", "topk-pipelined", "sketch", "lowrank",
    "auto", "group", "hier", "hier-group", "reduce-scatter", "nonblocking", "p2p",
};
static int g_weight[K_COUNT] = {5, 12, 4, 10, 6, 12, 10, 5, 8, 10, 4, 10, 10, 0};

/* The communicators, all over MPI_COMM_WORLD. */
enum { C_FLAT, C_SPLIT, C_PIPE, C_HIER, C_AUTO, C_COUNT };
static const char *const kCommName[C_COUNT] = {"flat", "split", "pipelined", "hierarchical", "auto"};
static cc_coll_comm_h g_comm[C_COUNT];
static char g_nodes[32];

static const size_t kSizes[] = {200, 257, 999, 1000, 3001, 4096, 10007, 20000};
enum { kNumSizes = sizeof kSizes / sizeof kSizes[0] };

static size_t size_at(size_t i)
{
    const size_t n = kSizes[i];
    return n < g_max_count ? n : g_max_count;
}

/* ---- what one call did on this rank ------------------------------------------------- */

enum { kMaxStatuses = 8 };

typedef struct {
    int32_t st[kMaxStatuses]; /* statuses of the call's library calls, in order */
    int32_t n;
    int32_t p2p;    /* 1: st[0] is the send to rank + 1, st[1] the receive from rank - 1 */
    int32_t hashed; /* hash covers results every rank must share */
    int32_t edits;  /* edits the interposer made on this rank during the call */
    uint64_t hash;
} Rec;

typedef struct {
    char desc[300];
    Rec rec;
    char msg[480];  /* this rank's first error message */
    char log[1500]; /* this rank's edits */
} Call;

static void note(Call *c, cc_coll_status_t st, const char *msg)
{
    if (c->rec.n < kMaxStatuses) c->rec.st[c->rec.n++] = (int32_t)st;
    if (st != CC_COLL_OK && c->msg[0] == '\0') snprintf(c->msg, sizeof c->msg, "%s", msg ? msg : "");
}

static void hash_in(Call *c, const void *p, size_t bytes)
{
    uint64_t h = c->rec.hashed ? c->rec.hash : 0xcbf29ce484222325ull;
    const unsigned char *b = (const unsigned char *)p;
    for (size_t i = 0; i < bytes; ++i) h = (h ^ b[i]) * 0x100000001b3ull;
    c->rec.hash = h;
    c->rec.hashed = 1;
}

static void add_desc(Call *c, const char *fmt, ...)
{
    const size_t at = strlen(c->desc);
    if (at + 1 >= sizeof c->desc) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->desc + at, sizeof c->desc - at, fmt, ap);
    va_end(ap);
}

/* "CC_COLL_ERR_MISMATCH" from the status string. */
static const char *status_name(int st, char *buf, size_t cap)
{
    const char *s = cc_coll_status_string((cc_coll_status_t)st);
    size_t n = strcspn(s, ":");
    if (n >= cap) n = cap - 1;
    memcpy(buf, s, n);
    buf[n] = '\0';
    return buf;
}

/* ---- data ------------------------------------------------------------------------ */

static const char *dtype_name(cc_coll_dtype_t d)
{
    switch (d) {
    case CC_COLL_F32: return "f32";
    case CC_COLL_F64: return "f64";
    case CC_COLL_F16: return "f16";
    default: return "bf16";
    }
}

static uint16_t to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    const uint32_t sign = (x >> 16) & 0x8000u, ef = (x >> 23) & 0xffu, m = x & 0x7fffffu;
    if (ef == 0xffu) return (uint16_t)(sign | 0x7c00u | (m ? 0x200u : 0u));
    const int e = (int)ef - 127 + 15;
    if (e >= 31) return (uint16_t)(sign | 0x7c00u);
    if (e <= 0) return (uint16_t)sign;
    return (uint16_t)(sign | ((uint32_t)e << 10) | (m >> 13));
}

static uint16_t to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    return (uint16_t)(x >> 16);
}

/* n values of d: sums of uniforms with a few large ones; with `special`,
 * rank 0's element n/3 is inf or NaN. */
static void fill(cc_coll_dtype_t d, void *buf, size_t n, uint64_t seed, int special)
{
    uint64_t s = seed ^ (0x5851f42d4c957f2dull * (uint64_t)(g_rank + 1));
    for (size_t i = 0; i < n; ++i) {
        double v = (rng_uniform(&s) - 0.5) + (rng_uniform(&s) - 0.5);
        if (rng_below(&s, 50) == 0) v *= 40.0;
        if (special && g_rank == 0 && i == n / 3) v = (special == 1) ? INFINITY : NAN;
        switch (d) {
        case CC_COLL_F32: ((float *)buf)[i] = (float)v; break;
        case CC_COLL_F64: ((double *)buf)[i] = v; break;
        case CC_COLL_F16: ((uint16_t *)buf)[i] = to_f16((float)v); break;
        default: ((uint16_t *)buf)[i] = to_bf16((float)v); break;
        }
    }
}

static cc_coll_dtype_t draw_dtype(uint64_t *r)
{
    const size_t x = rng_below(r, 20);
    if (x < 10) return CC_COLL_F32;
    if (x < 18) return CC_COLL_F64;
    return x == 18 ? CC_COLL_F16 : CC_COLL_BF16;
}

/* ---- params ------------------------------------------------------------------------ */

static void method_desc(Call *c, const cc_coll_params_t *p, size_t n, cc_coll_dtype_t d)
{
    add_desc(c, "%s %s n=%zu", cc_coll_method_name(p->method), dtype_name(d), n);
    if (p->mask & CC_COLL_PARAMS_FIELD_EF) add_desc(c, " ef=%d", p->ef);
    if (p->mask & CC_COLL_PARAMS_FIELD_SPARSIFIER)
        add_desc(c, " %s", p->sparsifier == CC_COLL_SPARSIFY_TOPK ? "topk-sparsifier" : "threshold-sparsifier");
    if (p->mask & CC_COLL_PARAMS_FIELD_DENSITY) add_desc(c, " density=%g", p->density);
    if (p->mask & CC_COLL_PARAMS_FIELD_ZERO_FRACTION) add_desc(c, " zero_fraction=%g", p->zero_fraction);
    if (p->mask & CC_COLL_PARAMS_FIELD_LOAD_FACTOR) add_desc(c, " load_factor=%g", p->load_factor);
    if (p->mask & CC_COLL_PARAMS_FIELD_SHAPE) add_desc(c, " shape=%llux%llu", (unsigned long long)p->rows,
                                                       (unsigned long long)p->cols);
    if (p->mask & CC_COLL_PARAMS_FIELD_RANK) add_desc(c, " rank=%d", p->rank);
    if (p->mask & CC_COLL_PARAMS_FIELD_START_ITER) add_desc(c, " start_iter=%llu", (unsigned long long)p->start_iter);
}

/* LOWRANK's shape for n elements: rows dividing n, else the near-square view. */
static void lowrank_shape(size_t n, uint64_t *rows, uint64_t *cols)
{
    static const uint64_t cand[] = {40, 32, 25, 20, 16, 10, 8};
    for (size_t i = 0; i < sizeof cand / sizeof cand[0]; ++i)
        if (n % cand[i] == 0 && n / cand[i] >= 2) {
            *rows = cand[i];
            *cols = 0;
            return;
        }
    *rows = 0;
    *cols = 0;
}

/* Key slots: 0 single tensors, 1..5 a group's tensors, these for the rest
 * (a reduce-scatter's residual covers recvcount x P elements). */
enum { kSlotReduceScatter = 20, kSlotP2p = 21 };

/* Params of method m for a tensor of n elements of d on communicator `comm`
 * (slot: a group's position). The residual's key and LOWRANK's settings
 * follow from (comm, method, n, d, slot, shaped), so a key always meets
 * the same count and dtype; density and the like are drawn. */
static cc_coll_params_t draw_params(cc_coll_method_t m, size_t n, cc_coll_dtype_t d, int comm, int slot, int shaped,
                                    uint64_t *r)
{
    cc_coll_params_t p;
    memset(&p, 0, sizeof p);
    p.mask = CC_COLL_PARAMS_FIELD_METHOD | CC_COLL_PARAMS_FIELD_EF | CC_COLL_PARAMS_FIELD_EF_KEY;
    p.method = m;
    p.ef = rng_below(r, 4) != 0;
    const uint64_t fields[] = {(uint64_t)comm, (uint64_t)m, (uint64_t)d, (uint64_t)slot, (uint64_t)shaped, (uint64_t)n};
    p.ef_key = 0x243f6a8885a308d3ull;
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; ++i) p.ef_key = mix64(p.ef_key ^ fields[i]);
    static const double densities[] = {0.001, 0.005, 0.01, 0.05, 0.1};
    switch (m) {
    case CC_COLL_METHOD_TOPK:
    case CC_COLL_METHOD_AUTO:
        p.mask |= CC_COLL_PARAMS_FIELD_DENSITY;
        p.density = densities[rng_below(r, 5)];
        break;
    case CC_COLL_METHOD_SKETCH: {
        static const double zf[] = {0.9, 0.99, 0.999};
        static const double lf[] = {0.5, 0.75, 1.2};
        p.mask |= CC_COLL_PARAMS_FIELD_SPARSIFIER | CC_COLL_PARAMS_FIELD_LOAD_FACTOR;
        p.load_factor = lf[rng_below(r, 3)];
        if (rng_below(r, 3) == 0) {
            p.sparsifier = CC_COLL_SPARSIFY_THRESHOLD;
            p.mask |= CC_COLL_PARAMS_FIELD_ZERO_FRACTION;
            p.zero_fraction = zf[rng_below(r, 3)];
        } else {
            p.sparsifier = CC_COLL_SPARSIFY_TOPK;
            p.mask |= CC_COLL_PARAMS_FIELD_DENSITY;
            p.density = densities[rng_below(r, 5)];
        }
        break;
    }
    case CC_COLL_METHOD_LOWRANK:
        p.mask |= CC_COLL_PARAMS_FIELD_RANK;
        p.rank = 1 + (int)((n / 7) % 4);
        if (shaped) {
            p.mask |= CC_COLL_PARAMS_FIELD_SHAPE | CC_COLL_PARAMS_FIELD_WARM_START | CC_COLL_PARAMS_FIELD_START_ITER;
            lowrank_shape(n, &p.rows, &p.cols);
            p.warm_start = (int)(n % 2);
            p.start_iter = n % 3 == 0 ? 2 : 0;
        }
        break;
    default: break;
    }
    return p;
}

static cc_coll_method_t draw_method4(uint64_t *r)
{
    static const cc_coll_method_t ms[] = {CC_COLL_METHOD_NONE, CC_COLL_METHOD_TOPK, CC_COLL_METHOD_SKETCH,
                                          CC_COLL_METHOD_LOWRANK};
    return ms[rng_below(r, 4)];
}

/* ---- the calls --------------------------------------------------------------------- */

typedef struct {
    int comm;
    cc_coll_params_t p;
    cc_coll_dtype_t d;
    cc_coll_op_t op;
    size_t n;
    int in_place;
    int special;
    uint64_t data_seed;
} One;

/* A single tensor for communicator `comm` with method m (n: 0 to draw). */
static One draw_one(int comm, cc_coll_method_t m, size_t n, int slot, uint64_t *r)
{
    One o;
    o.comm = comm;
    o.d = draw_dtype(r);
    o.op = rng_below(r, 2) ? CC_COLL_AVG : CC_COLL_SUM;
    o.n = n ? n : size_at(rng_below(r, kNumSizes));
    o.in_place = (int)rng_below(r, 2);
    o.special = rng_below(r, 50) == 0 ? 1 + (int)rng_below(r, 2) : 0;
    o.p = draw_params(m, o.n, o.d, comm, slot, m == CC_COLL_METHOD_LOWRANK ? rng_below(r, 5) != 0 : 0, r);
    o.data_seed = rng_next(r);
    return o;
}

static void one_desc(Call *c, const One *o)
{
    add_desc(c, "%s comm: ", kCommName[o->comm]);
    method_desc(c, &o->p, o->n, o->d);
    add_desc(c, " %s%s%s", o->op == CC_COLL_AVG ? "avg" : "sum", o->in_place ? " in place" : "",
             o->special ? (o->special == 1 ? " inf input" : " nan input") : "");
}

static void run_allreduce(Call *c, const One *o)
{
    const size_t bytes = o->n * cc_coll_dtype_size(o->d);
    unsigned char *send = (unsigned char *)xmalloc(bytes), *recv = (unsigned char *)xmalloc(bytes);
    fill(o->d, send, o->n, o->data_seed, o->special);
    if (o->in_place) memcpy(recv, send, bytes);
    g_in_library = 1;
    const cc_coll_status_t st =
        cc_coll_allreduce(o->in_place ? recv : send, recv, o->n, o->d, o->op, &o->p, g_comm[o->comm], NULL);
    g_in_library = 0;
    note(c, st, cc_coll_last_error());
    if (st == CC_COLL_OK) hash_in(c, recv, bytes);
    free(send);
    free(recv);
}

static void run_reduce_scatter(Call *c, const One *o)
{
    const size_t es = cc_coll_dtype_size(o->d), total = o->n * (size_t)g_size;
    unsigned char *send = (unsigned char *)xmalloc(total * es), *recv = (unsigned char *)xmalloc(total * es);
    fill(o->d, send, total, o->data_seed, o->special);
    if (o->in_place) memcpy(recv, send, total * es);
    g_in_library = 1;
    const cc_coll_status_t st =
        cc_coll_reduce_scatter(o->in_place ? recv : send, recv, o->n, o->d, o->op, &o->p, g_comm[o->comm], NULL);
    g_in_library = 0;
    note(c, st, cc_coll_last_error());
    free(send);
    free(recv);
}

/* A group of 2 to 5 tensors mixing NONE, TOPK, SKETCH and LOWRANK (shaped
 * and 1-D). */
typedef struct {
    size_t nt;
    size_t n[5];
    cc_coll_dtype_t d[5];
    cc_coll_params_t p[5];
    cc_coll_op_t op;
    int in_place;
    uint64_t data_seed;
    int comm;
    void *send[5], *recv[5];
} Group;

static void draw_group(Group *g, int comm, uint64_t *r)
{
    memset(g, 0, sizeof *g);
    g->comm = comm;
    g->nt = 2 + rng_below(r, 4);
    g->op = rng_below(r, 2) ? CC_COLL_AVG : CC_COLL_SUM;
    g->in_place = (int)rng_below(r, 2);
    for (size_t i = 0; i < g->nt; ++i) {
        const size_t pick = rng_below(r, 5);
        const cc_coll_method_t m = pick == 4 ? CC_COLL_METHOD_LOWRANK : draw_method4(r);
        g->n[i] = size_at(rng_below(r, 6)); /* up to 4096: groups stay quick */
        g->d[i] = draw_dtype(r);
        g->p[i] = draw_params(m, g->n[i], g->d[i], comm, (int)i + 1, m == CC_COLL_METHOD_LOWRANK && pick != 4, r);
    }
    g->data_seed = rng_next(r);
}

static void group_desc(Call *c, const Group *g)
{
    add_desc(c, "%s comm: group of %zu (%s%s):", kCommName[g->comm], g->nt, g->op == CC_COLL_AVG ? "avg" : "sum",
             g->in_place ? ", in place" : "");
    for (size_t i = 0; i < g->nt; ++i) {
        add_desc(c, " [");
        method_desc(c, &g->p[i], g->n[i], g->d[i]);
        add_desc(c, "]");
    }
}

static void group_alloc(Group *g)
{
    for (size_t i = 0; i < g->nt; ++i) {
        const size_t bytes = g->n[i] * cc_coll_dtype_size(g->d[i]);
        g->send[i] = xmalloc(bytes);
        g->recv[i] = xmalloc(bytes);
        fill(g->d[i], g->send[i], g->n[i], g->data_seed + i, 0);
        if (g->in_place) memcpy(g->recv[i], g->send[i], bytes);
    }
}

static void group_hash_free(Call *c, Group *g, int ok)
{
    for (size_t i = 0; i < g->nt; ++i) {
        if (ok) hash_in(c, g->recv[i], g->n[i] * cc_coll_dtype_size(g->d[i]));
        free(g->send[i]);
        free(g->recv[i]);
    }
}

static void run_group(Call *c, Group *g)
{
    group_alloc(g);
    g_in_library = 1;
    const cc_coll_status_t st =
        cc_coll_allreduce_group(g->nt, g->in_place ? NULL : (const void *const *)g->send, (void *const *)g->recv,
                                g->n, g->d, g->op, g->p, g_comm[g->comm], NULL);
    g_in_library = 0;
    note(c, st, cc_coll_last_error());
    group_hash_free(c, g, st == CC_COLL_OK);
}

/* One to three non-blocking requests in flight. */
static void run_nonblocking(Call *c, uint64_t *r)
{
    enum { kMaxReq = 3 };
    const size_t nreq = 1 + rng_below(r, kMaxReq);
    const int how = (int)rng_below(r, 3); /* 0: cc_coll_wait in order, 1: cc_coll_test loops, 2: cc_coll_waitall */
    static const char *const hows[] = {"wait", "test loops", "waitall"};
    add_desc(c, "%zu request(s), completed by %s:", nreq, hows[how]);
    cc_coll_request_h req[kMaxReq] = {NULL, NULL, NULL};
    One one[kMaxReq];
    Group grp[kMaxReq];
    int type[kMaxReq];
    unsigned char *send[kMaxReq] = {NULL, NULL, NULL}, *recv[kMaxReq] = {NULL, NULL, NULL};
    cc_coll_status_t posted[kMaxReq];
    for (size_t i = 0; i < nreq; ++i) {
        type[i] = (int)rng_below(r, 5); /* 0-2: iallreduce, 3: ireduce_scatter, 4: iallreduce_group */
        add_desc(c, " {");
        if (type[i] <= 2) {
            static const int comms[] = {C_FLAT, C_SPLIT, C_PIPE, C_HIER};
            const int comm = comms[rng_below(r, 4)];
            const cc_coll_method_t m =
                (comm == C_SPLIT || comm == C_PIPE) ? CC_COLL_METHOD_TOPK : draw_method4(r);
            one[i] = draw_one(comm, m, comm == C_PIPE ? size_at(kNumSizes - 1) : 0, 0, r);
            add_desc(c, "iallreduce ");
            one_desc(c, &one[i]);
        } else if (type[i] == 3) {
            static const cc_coll_method_t ms[] = {CC_COLL_METHOD_NONE, CC_COLL_METHOD_TOPK, CC_COLL_METHOD_SKETCH};
            const size_t n = size_at(rng_below(r, kNumSizes)) / (size_t)g_size;
            one[i] = draw_one(C_FLAT, ms[rng_below(r, 3)], n ? n : 1, kSlotReduceScatter, r);
            add_desc(c, "ireduce_scatter ");
            one_desc(c, &one[i]);
        } else {
            draw_group(&grp[i], rng_below(r, 3) == 0 ? C_HIER : C_FLAT, r);
            add_desc(c, "iallreduce_group ");
            group_desc(c, &grp[i]);
        }
        add_desc(c, "}");
    }
    for (size_t i = 0; i < nreq; ++i) {
        g_in_library = 1;
        if (type[i] <= 3) {
            const One *o = &one[i];
            const size_t total = type[i] == 3 ? o->n * (size_t)g_size : o->n;
            const size_t bytes = total * cc_coll_dtype_size(o->d);
            send[i] = (unsigned char *)xmalloc(bytes);
            recv[i] = (unsigned char *)xmalloc(bytes);
            fill(o->d, send[i], total, o->data_seed, o->special);
            if (o->in_place) memcpy(recv[i], send[i], bytes);
            const void *sb = o->in_place ? recv[i] : send[i];
            posted[i] = type[i] == 3 ? cc_coll_ireduce_scatter(sb, recv[i], o->n, o->d, o->op, &o->p,
                                                               g_comm[o->comm], NULL, &req[i])
                                     : cc_coll_iallreduce(sb, recv[i], o->n, o->d, o->op, &o->p, g_comm[o->comm],
                                                          NULL, &req[i]);
        } else {
            Group *g = &grp[i];
            group_alloc(g);
            posted[i] = cc_coll_iallreduce_group(g->nt, g->in_place ? NULL : (const void *const *)g->send,
                                                 (void *const *)g->recv, g->n, g->d, g->op, g->p, g_comm[g->comm],
                                                 NULL, &req[i]);
        }
        g_in_library = 0;
        note(c, posted[i], cc_coll_last_error());
    }
    g_in_library = 1;
    if (how == 0) {
        for (size_t i = 0; i < nreq; ++i)
            if (req[i] != NULL) (void)cc_coll_wait(req[i]);
    } else if (how == 1) {
        for (size_t k = nreq; k-- > 0;) {
            int done = 0;
            while (req[k] != NULL && !done)
                if (cc_coll_test(req[k], &done) != CC_COLL_OK) break;
        }
        for (size_t i = 0; i < nreq; ++i)
            if (req[i] != NULL) (void)cc_coll_wait(req[i]);
    } else {
        cc_coll_status_t sts[kMaxReq];
        (void)cc_coll_waitall(nreq, req, sts);
    }
    g_in_library = 0;
    for (size_t i = 0; i < nreq; ++i) {
        cc_coll_status_t st = posted[i];
        const char *msg = "";
        if (req[i] != NULL) {
            int done = 0;
            cc_coll_status_t s = CC_COLL_OK;
            const char *m = NULL;
            const cc_coll_status_t q = cc_coll_request_status(req[i], &done, &s, &m);
            st = q != CC_COLL_OK ? q : (done ? s : CC_COLL_ERR_INTERNAL);
            msg = q != CC_COLL_OK ? cc_coll_last_error() : (done ? (m ? m : "") : "the request is not done after a wait");
        }
        if (req[i] != NULL || posted[i] == CC_COLL_OK) note(c, st, msg);
        if (type[i] <= 2 && st == CC_COLL_OK) hash_in(c, recv[i], one[i].n * cc_coll_dtype_size(one[i].d));
        if (type[i] == 4) group_hash_free(c, &grp[i], st == CC_COLL_OK);
        if (req[i] != NULL) (void)cc_coll_request_free(req[i]);
        free(send[i]);
        free(recv[i]);
    }
}

/* A ring: rank r sends to r + 1 and receives from r - 1 (rank 0 sends
 * first, the others receive first). */
static void run_p2p(Call *c, uint64_t *r)
{
    const size_t which = rng_below(r, 3);
    const size_t si = rng_below(r, kNumSizes);
    const size_t n = size_at(si);
    const cc_coll_dtype_t d = rng_below(r, 2) ? CC_COLL_F64 : CC_COLL_F32;
    const cc_coll_method_t m =
        which == 0 ? CC_COLL_METHOD_NONE : (which == 1 ? CC_COLL_METHOD_TOPK : CC_COLL_METHOD_LOWRANK);
    /* A channel's residual keeps one count and dtype: the key says which.
     * (An argument error on the sender would leave the receiver waiting, as
     * with MPI.) */
    const cc_coll_params_t p = draw_params(m, n, d, C_FLAT, kSlotP2p, 0, r);
    const int compress = m != CC_COLL_METHOD_NONE && rng_below(r, 4) != 0;
    const int tag = 5 + (int)which;
    const uint64_t data_seed = rng_next(r);
    add_desc(c, "ring, compress=%d tag=%d: ", compress, tag);
    method_desc(c, &p, n, d);
    const size_t bytes = n * cc_coll_dtype_size(d);
    unsigned char *out = (unsigned char *)xmalloc(bytes), *in = (unsigned char *)xmalloc(bytes);
    fill(d, out, n, data_seed, 0);
    const int to = (g_rank + 1) % g_size, from = (g_rank + g_size - 1) % g_size;
    cc_coll_status_t s_send = CC_COLL_OK, s_recv = CC_COLL_OK;
    char m_send[480] = "", m_recv[480] = "";
    g_in_library = 1;
    for (int step = 0; step < 2; ++step) {
        const int sending = (step == 0) == (g_rank == 0);
        if (sending) {
            s_send = cc_coll_send(out, n, d, to, tag, compress, &p, g_comm[C_FLAT], NULL);
            snprintf(m_send, sizeof m_send, "send: %s", cc_coll_last_error());
        } else {
            s_recv = cc_coll_recv(in, n, d, from, tag, &p, g_comm[C_FLAT], NULL);
            snprintf(m_recv, sizeof m_recv, "recv: %s", cc_coll_last_error());
        }
    }
    g_in_library = 0;
    c->rec.p2p = 1;
    note(c, s_send, m_send);
    note(c, s_recv, m_recv);
    free(out);
    free(in);
}

static void run_call(Call *c, Kind k, uint64_t *r)
{
    switch (k) {
    case K_NONE:
    case K_TOPK:
    case K_TOPK_DENSE:
    case K_TOPK_SPLIT:
    case K_TOPK_PIPE:
    case K_SKETCH:
    case K_LOWRANK:
    case K_AUTO:
    case K_HIER: {
        int comm = C_FLAT;
        size_t n = 0;
        cc_coll_method_t m = CC_COLL_METHOD_NONE;
        if (k == K_TOPK || k == K_TOPK_DENSE) m = CC_COLL_METHOD_TOPK;
        if (k == K_TOPK_SPLIT) m = CC_COLL_METHOD_TOPK, comm = C_SPLIT;
        if (k == K_TOPK_PIPE) {
            /* above one 64 KiB chunk in every dtype where --max-count allows */
            m = CC_COLL_METHOD_TOPK, comm = C_PIPE;
            n = g_max_count < 17000 ? g_max_count : 17000 + 1000 * rng_below(r, 4);
        }
        if (k == K_SKETCH) m = CC_COLL_METHOD_SKETCH;
        if (k == K_LOWRANK) m = CC_COLL_METHOD_LOWRANK;
        if (k == K_AUTO) m = CC_COLL_METHOD_AUTO, comm = C_AUTO;
        if (k == K_HIER) m = draw_method4(r), comm = C_HIER;
        One o = draw_one(comm, m, n, 0, r);
        if (k == K_TOPK_DENSE) {
            static const double dense[] = {0.6, 0.9, 1.0};
            o.p.density = dense[rng_below(r, 3)];
        }
        one_desc(c, &o);
        run_allreduce(c, &o);
        break;
    }
    case K_GROUP:
    case K_HIER_GROUP: {
        Group g;
        draw_group(&g, k == K_HIER_GROUP ? C_HIER : C_FLAT, r);
        group_desc(c, &g);
        run_group(c, &g);
        break;
    }
    case K_RS: {
        static const cc_coll_method_t ms[] = {CC_COLL_METHOD_NONE, CC_COLL_METHOD_TOPK, CC_COLL_METHOD_SKETCH,
                                              CC_COLL_METHOD_AUTO};
        const cc_coll_method_t m = ms[rng_below(r, 4)];
        size_t n = size_at(rng_below(r, kNumSizes)) / (size_t)g_size;
        One o = draw_one(m == CC_COLL_METHOD_AUTO ? C_AUTO : C_FLAT, m, n ? n : 1, kSlotReduceScatter, r);
        add_desc(c, "reduce_scatter ");
        one_desc(c, &o);
        run_reduce_scatter(c, &o);
        break;
    }
    case K_NB: run_nonblocking(c, r); break;
    case K_P2P: run_p2p(c, r); break;
    default: break;
    }
}

/* ---- checking, after each call ------------------------------------------------------ */

typedef struct {
    long calls, error_calls, differs, result_differs, first_differ;
} Counts;

static Counts g_counts[K_COUNT];
static Counts g_total;

typedef struct {
    char msg[480];
    char log[1500];
} Messages;

static int statuses_differ(const Rec *all)
{
    if (all[0].p2p) {
        for (int q = 0; q < g_size; ++q)
            if (all[q].st[0] != all[(q + 1) % g_size].st[1]) return 1;
        return 0;
    }
    for (int q = 1; q < g_size; ++q) {
        if (all[q].n != all[0].n) return 1;
        for (int i = 0; i < all[0].n && i < kMaxStatuses; ++i)
            if (all[q].st[i] != all[0].st[i]) return 1;
    }
    return 0;
}

static void print_call(long idx, Kind k, const Call *c, const Rec *all, const Messages *msgs, const char *what)
{
    printf("call %ld (%s) %s: %s\n", idx, kKindName[k], what, c->desc);
    for (int q = 0; q < g_size; ++q) {
        printf("  rank %d:", q);
        for (int i = 0; i < all[q].n && i < kMaxStatuses; ++i) {
            char name[64];
            printf("%s %s", i ? "," : "", status_name(all[q].st[i], name, sizeof name));
        }
        if (msgs[q].msg[0]) printf(" -- %s", msgs[q].msg);
        printf("\n");
        if (msgs[q].log[0]) printf("  rank %d edited (%d): %s\n", q, all[q].edits, msgs[q].log);
    }
    fflush(stdout);
}

/* Returns 1 when the statuses differed. */
static int check_call(long idx, Kind k, Call *c)
{
    fault_enable(0);
    c->rec.edits = fault_take_log(c->log, sizeof c->log);
    Rec *all = (Rec *)xmalloc((size_t)g_size * sizeof *all);
    PMPI_Allgather(&c->rec, (int)sizeof(Rec), MPI_BYTE, all, (int)sizeof(Rec), MPI_BYTE, MPI_COMM_WORLD);
    const int differ = statuses_differ(all);
    int any_error = 0, all_hashed = 1, hash_differs = 0;
    for (int q = 0; q < g_size; ++q) {
        for (int i = 0; i < all[q].n && i < kMaxStatuses; ++i) any_error |= all[q].st[i] != CC_COLL_OK;
        all_hashed &= all[q].hashed;
        hash_differs |= all[q].hash != all[0].hash;
    }
    const int result_differs = !differ && !any_error && all_hashed && hash_differs;
    Counts *kc = &g_counts[k];
    kc->calls++;
    g_total.calls++;
    if (any_error) kc->error_calls++, g_total.error_calls++;
    if (result_differs) kc->result_differs++, g_total.result_differs++;
    if (differ) {
        if (kc->differs == 0) kc->first_differ = idx;
        kc->differs++;
        g_total.differs++;
    }
    if (differ || (g_verbose && (any_error || result_differs))) {
        Messages mine, *msgs = NULL;
        snprintf(mine.msg, sizeof mine.msg, "%s", c->msg);
        snprintf(mine.log, sizeof mine.log, "%s", c->log);
        if (g_rank == 0) msgs = (Messages *)xmalloc((size_t)g_size * sizeof *msgs);
        PMPI_Gather(&mine, (int)sizeof mine, MPI_BYTE, msgs, (int)sizeof mine, MPI_BYTE, 0, MPI_COMM_WORLD);
        if (g_rank == 0) {
            print_call(idx, k, c, all, msgs,
                       differ ? "STATUSES DIFFER" : (any_error ? "returned an error" : "results differ between ranks"));
            free(msgs);
        }
    }
    if (differ && g_resync)
        for (int i = 0; i < C_COUNT; ++i)
            if (g_comm[i] != NULL) (void)cc_coll_ef_reset_all(g_comm[i]);
    free(all);
    return differ;
}

/* ---- signals ------------------------------------------------------------------------ */

static struct sigaction g_old[32];

static void write_line(const char *head)
{
    char line[600];
    const char *desc = g_now_desc;
    const int n = snprintf(line, sizeof line, "[rank %d] fault_driver: %s %s%s%.300s\n", g_rank, head, g_now,
                           desc ? ": " : "", desc ? desc : "");
    if (n > 0) {
        ssize_t w = write(2, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
        (void)w;
    }
}

static void on_alarm(int sig)
{
    (void)sig;
    write_line(g_in_library ? "HANG: a library call has not returned in" : "HANG: the driver's check has not "
                                                                           "returned after");
    _exit(124);
}

static void on_crash(int sig)
{
    char head[64];
    snprintf(head, sizeof head, "CRASH: signal %d in", sig);
    write_line(head);
    sigaction(sig, &g_old[sig], NULL); /* the previous handler (MPI's, a sanitizer's) or the default */
    if (sig == SIGABRT) raise(sig);
}

static void install_handlers(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = on_alarm;
    sigaction(SIGALRM, &sa, NULL);
    static const int crash[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
    sa.sa_handler = on_crash;
    for (size_t i = 0; i < sizeof crash / sizeof crash[0]; ++i) sigaction(crash[i], &sa, &g_old[crash[i]]);
}

/* ---- setup ------------------------------------------------------------------------- */

static void usage_exit(const char *why)
{
    if (g_rank == 0) fprintf(stderr, "mpi_fault_driver: %s (see the header of fault_driver.c)\n", why);
    MPI_Finalize();
    exit(2);
}

static void parse(int argc, char **argv)
{
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--strict")) g_strict = 1;
        else if (!strcmp(a, "--report-only")) g_report_only = 1;
        else if (!strcmp(a, "--no-resync")) g_resync = 0;
        else if (!strcmp(a, "--p2p")) g_p2p = 1;
        else if (!strcmp(a, "-v")) g_verbose = 1;
        else if (v == NULL) usage_exit("an option is missing its value, or is unknown");
        else {
            ++i;
            char *end = NULL;
            if (!strcmp(a, "--calls")) g_calls = strtol(v, &end, 10);
            else if (!strcmp(a, "--seed")) g_seed = strtoull(v, &end, 10);
            else if (!strcmp(a, "--fault-seed")) g_fault_seed = strtoull(v, &end, 10), g_fault_seed_set = 1;
            else if (!strcmp(a, "--probability")) g_probability = strtod(v, &end);
            else if (!strcmp(a, "--corrupt-rank")) g_corrupt_rank = (int)strtol(v, &end, 10);
            else if (!strcmp(a, "--max-count")) g_max_count = (size_t)strtoull(v, &end, 10);
            else if (!strcmp(a, "--call-timeout")) g_call_timeout = (int)strtol(v, &end, 10);
            else if (!strcmp(a, "--kinds")) g_kinds = v, end = (char *)v + strlen(v);
            else if (!strcmp(a, "--progress")) {
                if (!strcmp(v, "thread")) g_thread = 1;
                else if (strcmp(v, "caller") != 0) usage_exit("--progress takes caller or thread");
                end = (char *)v + strlen(v);
            } else usage_exit("unknown option");
            if (end == NULL || *end != '\0' || end == v) usage_exit("an option has a bad value");
        }
    }
    if (g_calls < 0 || g_max_count < 16 || g_probability < 0 || g_probability > 1 || g_call_timeout < 0)
        usage_exit("a value is out of range");
    if (g_p2p) g_weight[K_P2P] = 6;
    if (g_kinds != NULL) {
        int any = 0;
        for (int k = 0; k < K_COUNT; ++k) {
            int on = 0;
            const size_t len = strlen(kKindName[k]);
            for (const char *s = g_kinds; *s;) {
                const size_t n = strcspn(s, ",");
                on |= n == len && !strncmp(s, kKindName[k], n);
                s += n + (s[n] == ',');
            }
            if (!on) g_weight[k] = 0;
            else if (g_weight[k] == 0) g_weight[k] = 1;
            any |= on;
        }
        if (!any) usage_exit("--kinds names no known kind");
    }
}

static cc_coll_comm_h make_comm(int which)
{
    setenv("CC_COLL_HIERARCHY", which == C_HIER ? "on" : "off", 1);
    setenv("CC_COLL_TOPK_ALGORITHM", which == C_SPLIT ? "split" : "allgather", 1);
    setenv("CC_COLL_PIPELINE_BYTES", which == C_PIPE ? "65536" : "0", 1);
    setenv("CC_COLL_PROGRESS", g_thread ? "thread" : "caller", 1);
    if (which == C_HIER) setenv("CC_COLL_NODES", g_nodes, 1);
    if (which == C_AUTO) setenv("CC_COLL_LINK", "0.001,100", 1);
    cc_coll_comm_h h = NULL;
    const cc_coll_status_t st = cc_coll_comm_create(MPI_COMM_WORLD, &h);
    unsetenv("CC_COLL_NODES");
    unsetenv("CC_COLL_LINK");
    if (st != CC_COLL_OK) {
        fprintf(stderr, "[rank %d] fault_driver: cc_coll_comm_create (%s) failed: %s\n", g_rank, kCommName[which],
                cc_coll_last_error());
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    return h;
}

int main(int argc, char **argv)
{
    int provided = 0;
    for (int i = 1; i + 1 < argc; ++i)
        if (!strcmp(argv[i], "--progress") && !strcmp(argv[i + 1], "thread")) g_thread = 1;
    setvbuf(stdout, NULL, _IOLBF, 0); /* what was printed survives a crash */
    MPI_Init_thread(&argc, &argv, g_thread ? MPI_THREAD_MULTIPLE : MPI_THREAD_SINGLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    parse(argc, argv);
    if (g_thread && provided < MPI_THREAD_MULTIPLE) {
        if (g_rank == 0) printf("fault_driver: MPI_THREAD_MULTIPLE is not available: progress caller\n");
        g_thread = 0;
    }
    if (g_size < 2) {
        if (g_rank == 0) printf("fault_driver: needs at least 2 ranks (nothing is received from another)\n");
        MPI_Finalize();
        return 0;
    }
    if (g_corrupt_rank < 0) g_corrupt_rank = 1 % g_size;
    if (g_corrupt_rank >= g_size) usage_exit("--corrupt-rank is not a rank");
    if (!g_fault_seed_set) g_fault_seed = g_seed;
    /* Nodes for the hierarchical communicator, by seed: where a node is
     * alone, or a rank has no peer of its local rank on another node, its
     * rail is one rank and it receives compressed data from no one, so the
     * layouts vary. 2 ranks: one node of 2; 3: 2 + 1 or 1 + 2; 4: 2 + 2,
     * 3 + 1 or 1 + 3; more: nodes of 2, or 2 + (P - 2) and 1 + (P - 1). */
    if (g_size == 2) snprintf(g_nodes, sizeof g_nodes, "2");
    else if (g_size == 4 && g_seed % 3 != 0) snprintf(g_nodes, sizeof g_nodes, g_seed % 3 == 1 ? "3,1" : "1,3");
    else if (g_size % 2 == 0) snprintf(g_nodes, sizeof g_nodes, "2");
    else snprintf(g_nodes, sizeof g_nodes, g_seed % 2 ? "1,%d" : "2,%d", g_seed % 2 ? g_size - 1 : g_size - 2);

    install_handlers();
    fault_setup(g_fault_seed, g_probability, g_corrupt_rank);
    snprintf(g_now, sizeof g_now, "(creating the communicators)");
    if (g_call_timeout > 0) alarm((unsigned)g_call_timeout);
    for (int i = 0; i < C_COUNT; ++i) g_comm[i] = make_comm(i);
    alarm(0);
    if (g_rank == 0) {
        printf("fault_driver: %d ranks, seed %llu, fault seed %llu, probability %g on rank %d, %ld calls, progress "
               "%s, hierarchical nodes %s\n",
               g_size, (unsigned long long)g_seed, (unsigned long long)g_fault_seed, g_probability, g_corrupt_rank,
               g_calls, g_thread ? "thread" : "caller", g_nodes);
        fflush(stdout);
    }

    int weight_sum = 0;
    for (int k = 0; k < K_COUNT; ++k) weight_sum += g_weight[k];
    uint64_t r = mix64(g_seed ^ 0x6a09e667f3bcc909ull);
    const double t0 = MPI_Wtime();
    for (long idx = 0; idx < g_calls; ++idx) {
        int pick = (int)rng_below(&r, (size_t)weight_sum), k = 0;
        while (pick >= g_weight[k]) pick -= g_weight[k++];
        uint64_t cr = rng_next(&r); /* this call's draws: the same on every rank */
        Call *c = (Call *)calloc(1, sizeof *c);
        if (c == NULL) MPI_Abort(MPI_COMM_WORLD, 3);
        snprintf(g_now, sizeof g_now, "call %ld (%s)", idx, kKindName[k]);
        g_now_desc = c->desc;
        if (g_call_timeout > 0) alarm((unsigned)g_call_timeout);
        fault_enable(1);
        run_call(c, (Kind)k, &cr);
        fault_enable(0);
        const int differ = check_call(idx, (Kind)k, c);
        alarm(0);
        g_now_desc = NULL;
        free(c);
        if (differ && g_strict) break;
        if ((idx + 1) % 100 == 0 && idx + 1 < g_calls) { /* progress, for runs that end before the summary */
            unsigned long long mine = fault_corrupted_calls(), sum = 0;
            PMPI_Reduce(&mine, &sum, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
            if (g_rank == 0)
                printf("fault_driver: progress calls=%ld corrupted=%llu status_differs=%ld\n", idx + 1, sum,
                       g_total.differs);
        }
    }
    const double seconds = MPI_Wtime() - t0;

    unsigned long long mine[2] = {fault_corrupted_calls(), fault_eligible_calls()}, sum[2] = {0, 0};
    PMPI_Reduce(mine, sum, 2, MPI_UNSIGNED_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (g_rank == 0) {
        printf("fault_driver: ranks=%d seed=%llu calls=%ld corrupted=%llu eligible=%llu error_calls=%ld "
               "status_differs=%ld result_differs=%ld seconds=%.1f\n",
               g_size, (unsigned long long)g_seed, g_total.calls, sum[0], sum[1], g_total.error_calls,
               g_total.differs, g_total.result_differs, seconds);
        printf("  %-16s %7s %7s %8s %15s %13s\n", "kind", "calls", "errors", "differs", "result_differs",
               "first_differ");
        for (int k = 0; k < K_COUNT; ++k) {
            const Counts *kc = &g_counts[k];
            if (kc->calls == 0) continue;
            char first[24] = "-";
            if (kc->differs) snprintf(first, sizeof first, "%ld", kc->first_differ);
            printf("  %-16s %7ld %7ld %8ld %15ld %13s\n", kKindName[k], kc->calls, kc->error_calls, kc->differs,
                   kc->result_differs, first);
        }
        fflush(stdout);
    }
    snprintf(g_now, sizeof g_now, "(destroying the communicators)");
    if (g_call_timeout > 0) alarm((unsigned)g_call_timeout);
    for (int i = 0; i < C_COUNT; ++i) (void)cc_coll_comm_destroy(g_comm[i]);
    alarm(0);
    MPI_Finalize();
    return g_total.differs > 0 && !g_report_only ? 1 : 0;
}
