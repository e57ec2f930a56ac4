/* results_digest.c: a fixed, seeded sequence of libcc_coll calls with one
 * method, printing a 64-bit digest of every call's results and residual on
 * every rank, so that two builds of the library can be compared bit for bit
 * (scripts/compat/compare_builds.sh).
 *
 * It uses only the C ABI of 0.6 (cc_coll.h before the method registry of
 * 0.7), so that it compiles against either header; it therefore names the
 * methods of 0.6 by their stable ids (NONE 0 ... AUTO 4) and asks the
 * library for their names.
 *
 *   mpirun -np P results_digest LABEL METHOD
 *
 * LABEL starts every line (the run's name: "auto-slow", say); METHOD is a
 * method name of 0.6 (none, topk, sketch, lowrank, auto). Settings come from
 * the environment as in any program (the script clears CC_COLL_* and sets
 * what a run needs).
 *
 * Calls, each with error feedback on, its own ef_key and three steps of
 * fresh seeded data (a digest after every step):
 *  - allreduce: F32, F64, F16, BF16 x 1000, 65536, 1<<20 elements x SUM,
 *    AVG, once as a 1-D tensor and once with a matrix shape (rows x cols,
 *    rank 2: LOWRANK compresses it, the other methods ignore the shape);
 *  - allreduce_group: four tensors (F32 256x64 rank 2, F32 1000 without a
 *    shape, F64 128x128 rank 1, BF16 64x32 rank 1), SUM and AVG;
 *  - reduce_scatter: F32, F64, F16, BF16 x 1000 and 16384 elements per rank
 *    x SUM, AVG (the status is part of the line: a method without
 *    reduce-scatter must refuse it alike in both builds).
 * Output, on rank 0, one line per (call, step, rank):
 *   LABEL CALL rRANK st=STATUS recv=DIGEST res=DIGEST
 * then one informational line per rank, starting with '#', with counters of
 * cc_coll_comm_get_stats (wire bytes, AUTO's lossy calls, SKETCH's peeled
 * elements). Exit status 0 unless the program itself failed (MPI, memory,
 * an unknown method); a call's failure is reported in its line. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cc_coll.h"

static int g_rank, g_size;
static const char *g_label;

static void die(const char *what)
{
    fprintf(stderr, "results_digest: rank %d: %s\n", g_rank, what);
    MPI_Abort(MPI_COMM_WORLD, 2);
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (p == NULL) die("out of memory");
    return p;
}

/* ---- seeded data ---------------------------------------------------- */

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* In [-1, 1), cubed: most elements small, a few large, as gradients. */
static double next_value(uint64_t *s)
{
    double u = (double)(splitmix64(s) >> 11) * 0x1.0p-53 * 2.0 - 1.0;
    return u * u * u * 4.0;
}

static uint16_t float_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    x += 0x7fffu + ((x >> 16) & 1u); /* round to nearest even; data are finite */
    return (uint16_t)(x >> 16);
}

static uint16_t float_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    uint32_t sign = (x >> 16) & 0x8000u;
    int32_t e = (int32_t)((x >> 23) & 0xff) - 127 + 15;
    uint32_t m = x & 0x7fffffu;
    if (e >= 31) return (uint16_t)(sign | 0x7c00u); /* data stay far below */
    if (e <= 0) {                                   /* subnormal or zero */
        if (e < -10) return (uint16_t)sign;
        m |= 0x800000u;
        uint32_t shift = (uint32_t)(14 - e);
        uint32_t h = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (h & 1u))) ++h;
        return (uint16_t)(sign | h);
    }
    uint32_t h = ((uint32_t)e << 10) | (m >> 13), rem = m & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h; /* may carry into the exponent */
    return (uint16_t)(sign | h);
}

static void fill(void *buf, cc_coll_dtype_t d, size_t n, uint64_t seed)
{
    uint64_t s = seed;
    for (size_t i = 0; i < n; ++i) {
        double v = next_value(&s);
        switch (d) {
        case CC_COLL_F32: ((float *)buf)[i] = (float)v; break;
        case CC_COLL_F64: ((double *)buf)[i] = v; break;
        case CC_COLL_F16: ((uint16_t *)buf)[i] = float_to_f16((float)v); break;
        case CC_COLL_BF16: ((uint16_t *)buf)[i] = float_to_bf16((float)v); break;
        }
    }
}

static uint64_t seed_of(uint64_t call, int step)
{
    return 0x5eedULL ^ (call << 20) ^ ((uint64_t)step << 8) ^ ((uint64_t)g_rank << 40);
}

/* ---- digests -------------------------------------------------------- */

static uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; ++i) {
        h ^= b[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}
#define FNV_START 0xcbf29ce484222325ULL

/* Every rank's (status, recv digest, residual digest) to rank 0, printed in
 * rank order. */
static void report(const char *call, int status, uint64_t recv, uint64_t res)
{
    uint64_t mine[3] = {(uint64_t)(int64_t)status, recv, res};
    uint64_t *all = g_rank == 0 ? xmalloc(3 * sizeof *all * (size_t)g_size) : NULL;
    if (MPI_Gather(mine, 3, MPI_UINT64_T, all, 3, MPI_UINT64_T, 0, MPI_COMM_WORLD) != MPI_SUCCESS)
        die("MPI_Gather failed");
    if (g_rank == 0) {
        for (int r = 0; r < g_size; ++r)
            printf("%s %s r%d st=%d recv=%016llx res=%016llx\n", g_label, call, r, (int)(int64_t)all[3 * r],
                   (unsigned long long)all[3 * r + 1], (unsigned long long)all[3 * r + 2]);
        free(all);
    }
}

static uint64_t residual_digest(cc_coll_comm_h h, const cc_coll_params_t *p, const void *recv, size_t n,
                                cc_coll_dtype_t d, double *scratch)
{
    cc_coll_status_t st = cc_coll_ef_get_residual(h, p, recv, n, d, scratch);
    uint64_t x = fnv1a(FNV_START, &st, sizeof st);
    return st == CC_COLL_OK ? fnv1a(x, scratch, n * sizeof *scratch) : x;
}

/* ---- the calls ------------------------------------------------------ */

static const cc_coll_dtype_t kDtypes[] = {CC_COLL_F32, CC_COLL_F64, CC_COLL_F16, CC_COLL_BF16};
static const char *const kDtypeNames[] = {"f32", "f64", "f16", "bf16"};
static const cc_coll_op_t kOps[] = {CC_COLL_SUM, CC_COLL_AVG};
static const char *const kOpNames[] = {"sum", "avg"};
enum { kSteps = 3 };

static cc_coll_params_t base_params(cc_coll_method_t m, uint64_t key)
{
    cc_coll_params_t p;
    memset(&p, 0, sizeof p);
    p.mask = CC_COLL_PARAMS_FIELD_METHOD | CC_COLL_PARAMS_FIELD_EF | CC_COLL_PARAMS_FIELD_EF_KEY |
             CC_COLL_PARAMS_FIELD_DENSITY | CC_COLL_PARAMS_FIELD_SEED;
    p.method = m;
    p.ef = 1;
    p.ef_key = key;
    p.density = 0.02;
    p.seed = 0x1234abcdULL;
    return p;
}

static void allreduces(cc_coll_comm_h h, cc_coll_method_t m, uint64_t *key)
{
    static const size_t counts[] = {1000, 65536, 1u << 20};
    static const uint64_t rows[] = {40, 256, 1024}; /* cols = count / rows */
    const size_t nmax = 1u << 20;
    void *send = xmalloc(nmax * 8), *recv = xmalloc(nmax * 8);
    double *res = xmalloc(nmax * sizeof *res);
    char call[128];
    for (int shaped = 0; shaped < 2; ++shaped)
        for (size_t di = 0; di < 4; ++di)
            for (size_t ci = 0; ci < 3; ++ci)
                for (size_t oi = 0; oi < 2; ++oi) {
                    const cc_coll_dtype_t d = kDtypes[di];
                    const size_t n = counts[ci];
                    cc_coll_params_t p = base_params(m, ++*key);
                    if (shaped) {
                        p.mask |= CC_COLL_PARAMS_FIELD_SHAPE | CC_COLL_PARAMS_FIELD_RANK;
                        p.rows = rows[ci];
                        p.cols = n / rows[ci];
                        p.rank = 2;
                    }
                    for (int step = 0; step < kSteps; ++step) {
                        fill(send, d, n, seed_of(*key, step));
                        memset(recv, 0, n * cc_coll_dtype_size(d));
                        cc_coll_status_t st = cc_coll_allreduce(send, recv, n, d, kOps[oi], &p, h, NULL);
                        snprintf(call, sizeof call, "allreduce.%s.%s.n%zu.%s.s%d", shaped ? "shaped" : "1d",
                                 kDtypeNames[di], n, kOpNames[oi], step);
                        report(call, st, fnv1a(FNV_START, recv, n * cc_coll_dtype_size(d)),
                               residual_digest(h, &p, recv, n, d, res));
                    }
                }
    free(send);
    free(recv);
    free(res);
}

static void group(cc_coll_comm_h h, cc_coll_method_t m, uint64_t *key)
{
    enum { kT = 4 };
    static const cc_coll_dtype_t dt[kT] = {CC_COLL_F32, CC_COLL_F32, CC_COLL_F64, CC_COLL_BF16};
    static const uint64_t rows[kT] = {256, 0, 128, 64}, cols[kT] = {64, 0, 128, 32};
    static const int rk[kT] = {2, 0, 1, 1};
    static const char *const tname[kT] = {"f32", "f32", "f64", "bf16"};
    static const size_t counts[kT] = {256 * 64, 1000, 128 * 128, 64 * 32};
    void *send[kT], *recv[kT];
    cc_coll_params_t p[kT];
    double *res = xmalloc(128 * 128 * sizeof *res);
    char call[128];
    for (size_t oi = 0; oi < 2; ++oi) {
        for (int t = 0; t < kT; ++t) {
            send[t] = xmalloc(counts[t] * 8);
            recv[t] = xmalloc(counts[t] * 8);
            p[t] = base_params(m, ++*key);
            if (rows[t] != 0) {
                p[t].mask |= CC_COLL_PARAMS_FIELD_SHAPE | CC_COLL_PARAMS_FIELD_RANK;
                p[t].rows = rows[t];
                p[t].cols = cols[t];
                p[t].rank = rk[t];
            }
        }
        for (int step = 0; step < kSteps; ++step) {
            for (int t = 0; t < kT; ++t) {
                fill(send[t], dt[t], counts[t], seed_of(p[t].ef_key, step));
                memset(recv[t], 0, counts[t] * cc_coll_dtype_size(dt[t]));
            }
            cc_coll_status_t st = cc_coll_allreduce_group(kT, (const void *const *)send, recv, counts, dt, kOps[oi],
                                                          p, h, NULL);
            for (int t = 0; t < kT; ++t) {
                snprintf(call, sizeof call, "group.%s.t%d.%s.s%d", kOpNames[oi], t, tname[t],
                         step);
                report(call, st, fnv1a(FNV_START, recv[t], counts[t] * cc_coll_dtype_size(dt[t])),
                       residual_digest(h, &p[t], recv[t], counts[t], dt[t], res));
            }
        }
        for (int t = 0; t < kT; ++t) {
            free(send[t]);
            free(recv[t]);
        }
    }
    free(res);
}

static void reduce_scatters(cc_coll_comm_h h, cc_coll_method_t m, uint64_t *key)
{
    static const size_t rcounts[] = {1000, 16384};
    const size_t nmax = 16384 * (size_t)g_size;
    void *send = xmalloc(nmax * 8), *recv = xmalloc(nmax * 8);
    double *res = xmalloc(nmax * sizeof *res);
    char call[128];
    for (size_t di = 0; di < 4; ++di)
        for (size_t ci = 0; ci < 2; ++ci)
            for (size_t oi = 0; oi < 2; ++oi) {
                const cc_coll_dtype_t d = kDtypes[di];
                const size_t rc = rcounts[ci], n = rc * (size_t)g_size;
                cc_coll_params_t p = base_params(m, ++*key);
                for (int step = 0; step < kSteps; ++step) {
                    fill(send, d, n, seed_of(*key, step));
                    memset(recv, 0, rc * cc_coll_dtype_size(d));
                    cc_coll_status_t st = cc_coll_reduce_scatter(send, recv, rc, d, kOps[oi], &p, h, NULL);
                    snprintf(call, sizeof call, "reduce_scatter.%s.rc%zu.%s.s%d", kDtypeNames[di], rc,
                             kOpNames[oi], step);
                    report(call, st, fnv1a(FNV_START, recv, rc * cc_coll_dtype_size(d)),
                           residual_digest(h, &p, recv, n, d, res));
                }
            }
    free(send);
    free(recv);
    free(res);
}

static void stats_line(cc_coll_comm_h h)
{
    cc_coll_stats_t s;
    memset(&s, 0, sizeof s);
    s.mask = CC_COLL_STATS_FIELD_CALLS | CC_COLL_STATS_FIELD_BYTES_UNCOMPRESSED | CC_COLL_STATS_FIELD_BYTES_WIRE |
             CC_COLL_STATS_FIELD_SKETCH_ELEMENTS | CC_COLL_STATS_FIELD_SKETCH_PEELED |
             CC_COLL_STATS_FIELD_AUTO_CALLS | CC_COLL_STATS_FIELD_AUTO_LOSSY_CALLS;
    cc_coll_status_t st = cc_coll_comm_get_stats(h, &s);
    uint64_t mine[8] = {(uint64_t)(int64_t)st, s.calls, s.bytes_uncompressed, s.bytes_wire, s.sketch_elements,
                        s.sketch_peeled, s.auto_calls, s.auto_lossy_calls};
    uint64_t *all = g_rank == 0 ? xmalloc(8 * sizeof *all * (size_t)g_size) : NULL;
    if (MPI_Gather(mine, 8, MPI_UINT64_T, all, 8, MPI_UINT64_T, 0, MPI_COMM_WORLD) != MPI_SUCCESS)
        die("MPI_Gather failed");
    if (g_rank == 0) {
        for (int r = 0; r < g_size; ++r) {
            const uint64_t *a = all + 8 * r;
            printf("# %s stats r%d st=%d calls=%llu bytes=%llu wire=%llu sketch_elements=%llu sketch_peeled=%llu "
                   "auto_calls=%llu auto_lossy=%llu\n",
                   g_label, r, (int)(int64_t)a[0], (unsigned long long)a[1], (unsigned long long)a[2],
                   (unsigned long long)a[3], (unsigned long long)a[4], (unsigned long long)a[5],
                   (unsigned long long)a[6], (unsigned long long)a[7]);
        }
        free(all);
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    if (argc != 3) {
        if (g_rank == 0) fprintf(stderr, "usage: results_digest LABEL METHOD\n");
        MPI_Finalize();
        return 2;
    }
    g_label = argv[1];
    /* The methods of 0.6, by their stable ids. */
    static const cc_coll_method_t methods[] = {CC_COLL_METHOD_NONE, CC_COLL_METHOD_TOPK, CC_COLL_METHOD_SKETCH,
                                               CC_COLL_METHOD_LOWRANK, CC_COLL_METHOD_AUTO};
    int found = -1;
    for (int i = 0; i < 5; ++i) {
        const char *name = cc_coll_method_name(methods[i]);
        if (name != NULL && strcmp(name, argv[2]) == 0) found = i;
    }
    if (found < 0) die("unknown method name");
    cc_coll_comm_h h;
    if (cc_coll_comm_create(MPI_COMM_WORLD, &h) != CC_COLL_OK) die(cc_coll_last_error());
    uint64_t key = 0;
    allreduces(h, methods[found], &key);
    group(h, methods[found], &key);
    reduce_scatters(h, methods[found], &key);
    stats_line(h);
    cc_coll_comm_destroy(h);
    MPI_Finalize();
    return 0;
}
