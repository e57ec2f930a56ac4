/*
 * Method NONE must be bit-identical to MPI_Allreduce.
 *
 * For every dtype (F32, F64, F16, BF16), op (SUM, AVG), in place and out of
 * place, params NULL and params {METHOD = NONE}, counts 0, 1, 1001, 65537 and
 * a big count (BIG_COUNT below), on MPI_COMM_WORLD and on two MPI_Comm_split sub-communicators,
 * cc_coll_allreduce's output is compared byte for byte with a reference built
 * from MPI_Allreduce on the same exact-integer data:
 *   F32/F64: MPI_Allreduce(MPI_SUM) on MPI_FLOAT/MPI_DOUBLE; AVG = that sum
 *            divided by the communicator size in the same type.
 *   F16/BF16: MPI_Allreduce(MPI_SUM) on MPI_FLOAT of the same values, then
 *            rounded to the 16-bit format (nearest-even); AVG divides the
 *            float sum by the size in float first.
 * Values are integers in [-8, 8], so every partial sum over <= 4 ranks is
 * exact in every format and the reduction order cannot matter.
 *
 * Also checked: out of place leaves sendbuf unchanged; count 0 leaves recvbuf
 * untouched; cc_coll_comm_get_stats counts every call and its bytes; a comm
 * created from a Fortran handle (cc_coll_comm_create_fint) works.
 *
 * The big count runs on MPI_COMM_WORLD and on the reverse-key split (every
 * dtype/op/in-place combination, one params variant each, alternating), the
 * rank % 2 split uses the smaller counts only.
 *
 * Any failure prints the case and calls MPI_Abort (exit status non-zero).
 *
 *   mpi_passthrough [BIG_COUNT]   run the suite (BIG_COUNT defaults to 16 Mi + 3)
 *   mpi_passthrough --probe       MPI_Init + MPI_Barrier only
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "cc_coll.h"
#include "check.h"
#include "test_util.h"

#define BIG_COUNT ((size_t)16 * 1024 * 1024 + 3)

static long g_cases = 0;

/* ---- 16-bit formats: fixed encodings of the shared reference ------------ */

static uint16_t to_f16(float f) { return encode16(f, 10, 5); }
static uint16_t to_bf16(float f) { return encode16(f, 7, 8); }

static void self_test_16bit(void)
{
    /* A few fixed encodings, so a broken reference cannot silently agree
     * with a broken library. */
    CHECK(to_f16(1.0f) == 0x3c00 && to_f16(-2.0f) == 0xc000 && to_f16(0.0f) == 0x0000, "f16 basic encodings");
    CHECK(to_f16(65504.0f) == 0x7bff && to_f16(65520.0f) == 0x7c00, "f16 max / overflow");
    CHECK(to_f16(5.9604645e-08f) == 0x0001, "f16 smallest subnormal");
    CHECK(to_f16(1.0f + 1.0f / 2048) == 0x3c00, "f16 tie rounds to even (down)");
    CHECK(to_f16(1.0f + 3.0f / 2048) == 0x3c02, "f16 tie rounds to even (up)");
    CHECK(to_f16(1.0f / 3.0f) == 0x3555, "f16 1/3");
    CHECK(to_bf16(1.0f) == 0x3f80 && to_bf16(-8.0f) == 0xc100, "bf16 basic encodings");
    CHECK(to_bf16(1.0f + 1.0f / 256) == 0x3f80 && to_bf16(1.0f + 3.0f / 256) == 0x3f82, "bf16 ties to even");
    CHECK(to_bf16(1.0f / 3.0f) == 0x3eab, "bf16 1/3");
    for (int v = -40; v <= 40; ++v) {
        CHECK(decode16(to_f16((float)v), 10, 5) == v, "f16 round trip of a small integer");
        CHECK(decode16(to_bf16((float)v), 7, 8) == v, "bf16 round trip of a small integer");
    }
}

/* ---- the test -------------------------------------------------------- */

static const cc_coll_dtype_t kDtypes[] = {CC_COLL_F32, CC_COLL_F64, CC_COLL_F16, CC_COLL_BF16};
static const char *const kDtypeNames[] = {"F32", "F64", "F16", "BF16"};
static const cc_coll_op_t kOps[] = {CC_COLL_SUM, CC_COLL_AVG};
static const char *const kOpNames[] = {"SUM", "AVG"};

/* Buffers reused across counts, sized for the largest count. */
typedef struct {
    size_t cap;
    float *in_f32;      /* this rank's input as float */
    double *in_f64;     /* ... as double */
    uint16_t *in_f16;   /* ... as binary16 */
    uint16_t *in_bf16;  /* ... as bfloat16 */
    float *ref_f32;     /* MPI_Allreduce(MPI_FLOAT, MPI_SUM) */
    double *ref_f64;    /* MPI_Allreduce(MPI_DOUBLE, MPI_SUM) */
    unsigned char *expected;
    unsigned char *send;
    unsigned char *recv;
} Buffers;

static void buffers_init(Buffers *b, size_t cap)
{
    b->cap = cap;
    b->in_f32 = xmalloc(cap * sizeof(float));
    b->in_f64 = xmalloc(cap * sizeof(double));
    b->in_f16 = xmalloc(cap * sizeof(uint16_t));
    b->in_bf16 = xmalloc(cap * sizeof(uint16_t));
    b->ref_f32 = xmalloc(cap * sizeof(float));
    b->ref_f64 = xmalloc(cap * sizeof(double));
    b->expected = xmalloc(cap * sizeof(double) + 16);
    b->send = xmalloc(cap * sizeof(double) + 16);
    b->recv = xmalloc(cap * sizeof(double) + 16);
}

static void buffers_free(Buffers *b)
{
    free(b->in_f32);
    free(b->in_f64);
    free(b->in_f16);
    free(b->in_bf16);
    free(b->ref_f32);
    free(b->ref_f64);
    free(b->expected);
    free(b->send);
    free(b->recv);
}

static const void *input_of(const Buffers *b, int d)
{
    switch (d) {
    case 0: return b->in_f32;
    case 1: return b->in_f64;
    case 2: return b->in_f16;
    default: return b->in_bf16;
    }
}

/* Prints the first differing element of got vs expected and aborts. */
static void report_mismatch(const char *what, const void *got, const void *want, size_t count, int d,
                            const char *case_desc)
{
    const size_t es = cc_coll_dtype_size(kDtypes[d]);
    size_t i = 0;
    while (i < count && memcmp((const char *)got + i * es, (const char *)want + i * es, es) == 0) ++i;
    unsigned long long gb = 0, wb = 0;
    memcpy(&gb, (const char *)got + i * es, es);
    memcpy(&wb, (const char *)want + i * es, es);
    const double g = element(kDtypes[d], got, i), w = element(kDtypes[d], want, i);
    fprintf(stderr, "[rank %d] FAIL: %s: %s: first difference at index %zu: got %.9g (0x%llx), expected %.9g (0x%llx)\n",
            g_rank, case_desc, what, i, g, gb, w, wb);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

/* Calls and byte counters only (the fields this test checks). */
static cc_coll_stats_t get_byte_stats(cc_coll_comm_h h)
{
    return get_stats_masked(h, CC_COLL_STATS_FIELD_CALLS | CC_COLL_STATS_FIELD_BYTES_UNCOMPRESSED |
                                   CC_COLL_STATS_FIELD_BYTES_WIRE);
}

/* Runs every dtype/op/in-place/params case for one count on one comm. */
static void run_count(MPI_Comm mpi, cc_coll_comm_h h, const char *comm_name, size_t count, Buffers *b,
                      int both_params)
{
    int rank = 0, size = 0, wrank = 0;
    MPI_Comm_rank(mpi, &rank);
    MPI_Comm_size(mpi, &size);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);

    /* Integer values in [-8, 8], different on every rank and index. */
    for (size_t i = 0; i < count; ++i) {
        const int v = (int)((i * 7u + (size_t)rank * 5u + (size_t)wrank * 3u + count) % 17u) - 8;
        b->in_f32[i] = (float)v;
        b->in_f64[i] = (double)v;
        b->in_f16[i] = to_f16((float)v);
        b->in_bf16[i] = to_bf16((float)v);
    }
    if (count > 0) {
        if (MPI_Allreduce(b->in_f32, b->ref_f32, (int)count, MPI_FLOAT, MPI_SUM, mpi) != MPI_SUCCESS ||
            MPI_Allreduce(b->in_f64, b->ref_f64, (int)count, MPI_DOUBLE, MPI_SUM, mpi) != MPI_SUCCESS)
            die("%s", "reference MPI_Allreduce failed", 0);
    }

    cc_coll_params_t none;
    memset(&none, 0, sizeof none);
    none.mask = CC_COLL_PARAMS_FIELD_METHOD;
    none.method = CC_COLL_METHOD_NONE;

    for (int d = 0; d < 4; ++d) {
        const size_t es = cc_coll_dtype_size(kDtypes[d]);
        CHECK(es == (d == 1 ? 8u : d == 0 ? 4u : 2u), "cc_coll_dtype_size");
        const size_t bytes = count * es;
        for (int o = 0; o < 2; ++o) {
            /* Expected bytes. */
            for (size_t i = 0; i < count; ++i) {
                const float sf = b->ref_f32[i];
                switch (d) {
                case 0: ((float *)b->expected)[i] = o ? sf / (float)size : sf; break;
                case 1: ((double *)b->expected)[i] = o ? b->ref_f64[i] / (double)size : b->ref_f64[i]; break;
                case 2: ((uint16_t *)b->expected)[i] = to_f16(o ? sf / (float)size : sf); break;
                default: ((uint16_t *)b->expected)[i] = to_bf16(o ? sf / (float)size : sf); break;
                }
            }
            for (int inplace = 0; inplace < 2; ++inplace) {
                for (int pv = 0; pv < 2; ++pv) {
                    /* With one params variant per combination, alternate so
                     * each dtype still sees both variants. */
                    if (!both_params && pv != ((o + inplace) & 1)) continue;
                    const cc_coll_params_t *params = pv ? &none : NULL;
                    char desc[256];
                    snprintf(desc, sizeof desc, "dtype=%s op=%s count=%zu %s params=%s comm=%s (rank %d of %d)",
                             kDtypeNames[d], kOpNames[o], count, inplace ? "in-place" : "out-of-place",
                             pv ? "{METHOD=NONE}" : "NULL", comm_name, rank, size);

                    const cc_coll_stats_t before = get_byte_stats(h);
                    const unsigned char sentinel = (unsigned char)(0xA5 ^ (d * 16 + o * 4 + inplace * 2 + pv));
                    const void *sendp;
                    void *recvp;
                    if (count == 0 && pv == 0) {
                        /* NULL buffers are allowed when count == 0: both NULL
                         * (in place), or sendbuf NULL with a real recvbuf that
                         * must stay untouched. */
                        sendp = NULL;
                        recvp = inplace ? NULL : b->recv;
                        memset(b->recv, sentinel, 16);
                    } else if (inplace) {
                        memcpy(b->recv, input_of(b, d), bytes);
                        memset(b->recv + bytes, sentinel, 16);
                        sendp = b->recv;
                        recvp = b->recv;
                    } else {
                        memcpy(b->send, input_of(b, d), bytes);
                        memset(b->recv, sentinel, bytes + 16);
                        sendp = b->send;
                        recvp = b->recv;
                    }
                    cc_coll_status_t st = cc_coll_allreduce(sendp, recvp, count, kDtypes[d], kOps[o], params, h, NULL);
                    if (st != CC_COLL_OK) {
                        fprintf(stderr, "[rank %d] %s\n", wrank, desc);
                        die("%s", "cc_coll_allreduce", (int)st);
                    }
                    if (bytes > 0 && memcmp(recvp, b->expected, bytes) != 0)
                        report_mismatch("result differs from the MPI_Allreduce reference", recvp, b->expected,
                                        count, d, desc);
                    if (!inplace && bytes > 0 && memcmp(b->send, input_of(b, d), bytes) != 0)
                        report_mismatch("out-of-place call modified sendbuf", b->send, input_of(b, d), count, d,
                                        desc);
                    if (recvp != NULL) {
                        /* Nothing written past count elements (count 0: nothing at all). */
                        for (size_t k = 0; k < 16; ++k)
                            if (b->recv[bytes + k] != sentinel) {
                                fprintf(stderr, "[rank %d] %s\n", wrank, desc);
                                die("%s", "recvbuf written past count elements", 0);
                            }
                    }
                    const cc_coll_stats_t after = get_byte_stats(h);
                    if (after.calls != before.calls + 1 ||
                        after.bytes_uncompressed != before.bytes_uncompressed + bytes ||
                        after.bytes_wire != before.bytes_wire + bytes) {
                        fprintf(stderr,
                                "[rank %d] %s: stats calls %llu -> %llu, bytes_uncompressed %llu -> %llu, "
                                "bytes_wire %llu -> %llu (expected +1, +%zu, +%zu)\n",
                                wrank, desc, (unsigned long long)before.calls, (unsigned long long)after.calls,
                                (unsigned long long)before.bytes_uncompressed,
                                (unsigned long long)after.bytes_uncompressed, (unsigned long long)before.bytes_wire,
                                (unsigned long long)after.bytes_wire, bytes, bytes);
                        die("%s", "stats do not count the call", 0);
                    }
                    ++g_cases;
                }
            }
        }
    }
}

static void run_comm(MPI_Comm mpi, const char *name, const size_t *counts, size_t ncounts, Buffers *b,
                     size_t big_count)
{
    cc_coll_comm_h h = NULL;
    CHECK_CC(cc_coll_comm_create(mpi, &h));
    int r = -1, s = -1, mr = -2, ms = -2;
    CHECK_CC(cc_coll_comm_rank(h, &r));
    CHECK_CC(cc_coll_comm_size(h, &s));
    MPI_Comm_rank(mpi, &mr);
    MPI_Comm_size(mpi, &ms);
    CHECK(r == mr && s == ms, "cc_coll_comm_rank/size differ from MPI_Comm_rank/size");
    cc_coll_stats_t s0 = get_byte_stats(h);
    CHECK(s0.calls == 0 && s0.bytes_uncompressed == 0 && s0.bytes_wire == 0, "a new comm has non-zero stats");

    unsigned long long calls = 0;
    long cases_before = g_cases;
    for (size_t c = 0; c < ncounts; ++c) run_count(mpi, h, name, counts[c], b, 1);
    if (big_count > 0) run_count(mpi, h, name, big_count, b, 0);
    calls = (unsigned long long)(g_cases - cases_before);

    cc_coll_stats_t st = get_byte_stats(h);
    CHECK(st.calls == calls, "stats.calls != number of cc_coll_allreduce calls on the comm");
    CHECK_CC(cc_coll_comm_reset_stats(h));
    st = get_byte_stats(h);
    CHECK(st.calls == 0 && st.bytes_uncompressed == 0, "cc_coll_comm_reset_stats did not reset");
    CHECK_CC(cc_coll_comm_destroy(h));
}

/* A comm made from a Fortran handle works like one made from the C handle. */
static void run_fint(Buffers *b)
{
    cc_coll_comm_h h = NULL;
    CHECK_CC(cc_coll_comm_create_fint(MPI_Comm_c2f(MPI_COMM_WORLD), &h));
    int r = -1, s = -1, wr = -2, ws = -2;
    CHECK_CC(cc_coll_comm_rank(h, &r));
    CHECK_CC(cc_coll_comm_size(h, &s));
    MPI_Comm_rank(MPI_COMM_WORLD, &wr);
    MPI_Comm_size(MPI_COMM_WORLD, &ws);
    CHECK(r == wr && s == ws, "fint comm: rank/size differ from MPI_COMM_WORLD");
    run_count(MPI_COMM_WORLD, h, "fint(MPI_COMM_WORLD)", 1001, b, 1);
    CHECK(get_byte_stats(h).calls == 32, "fint comm: stats.calls != 32");
    CHECK_CC(cc_coll_comm_destroy(h));

    /* And from the Fortran handle of a sub-communicator. */
    MPI_Comm sub;
    MPI_Comm_split(MPI_COMM_WORLD, wr % 2, -wr, &sub);
    CHECK_CC(cc_coll_comm_create_fint(MPI_Comm_c2f(sub), &h));
    int sr = -1, ss = -1;
    MPI_Comm_rank(sub, &sr);
    MPI_Comm_size(sub, &ss);
    CHECK_CC(cc_coll_comm_rank(h, &r));
    CHECK_CC(cc_coll_comm_size(h, &s));
    CHECK(r == sr && s == ss, "fint sub-comm: rank/size differ from the MPI sub-communicator");
    run_count(sub, h, "fint(split rank%2, reversed)", 65537, b, 1);
    CHECK_CC(cc_coll_comm_destroy(h));
    MPI_Comm_free(&sub);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    for (int a = 1; a < argc; ++a)
        if (strcmp(argv[a], "--probe") == 0) {
            /* Only checks that MPI starts (used to see whether a transport works). */
            MPI_Barrier(MPI_COMM_WORLD);
            MPI_Finalize();
            return 0;
        }
    int wsize = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    const double t0 = MPI_Wtime();

    CHECK_CC(cc_coll_check_version());
    self_test_16bit();

    /* Optional argument: the big count (default 16 Mi + 3). */
    size_t big = BIG_COUNT;
    if (argc > 1 && argv[1][0] >= '0' && argv[1][0] <= '9') big = (size_t)strtoull(argv[1], NULL, 10);

    Buffers b;
    buffers_init(&b, big > 65537 ? big : 65537);

    static const size_t counts[] = {0, 1, 1001, 65537};
    const size_t ncounts = sizeof counts / sizeof counts[0];

    /* MPI_COMM_WORLD, with the big count. */
    run_comm(MPI_COMM_WORLD, "MPI_COMM_WORLD", counts, ncounts, &b, big);
    const double t_world = MPI_Wtime();

    /* Split by rank % 2 (keys in rank order). */
    MPI_Comm parity;
    MPI_Comm_split(MPI_COMM_WORLD, g_rank % 2, g_rank, &parity);
    run_comm(parity, "split(rank%2)", counts, ncounts, &b, 0);
    MPI_Comm_free(&parity);

    /* All ranks, keys in reverse order: rank i of WORLD is rank size-1-i. */
    MPI_Comm reversed;
    MPI_Comm_split(MPI_COMM_WORLD, 0, wsize - g_rank, &reversed);
    int rr = -1;
    MPI_Comm_rank(reversed, &rr);
    CHECK(rr == wsize - 1 - g_rank, "reverse-key split did not reverse ranks");
    run_comm(reversed, "split(reverse keys)", counts, ncounts, &b, big);
    MPI_Comm_free(&reversed);

    run_fint(&b);

    buffers_free(&b);

    long total = 0;
    MPI_Reduce(&g_cases, &total, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    const double t1 = MPI_Wtime();
    if (g_rank == 0)
        printf("passthrough: %d ranks: all %ld cases passed (%ld per rank; big count %zu) in %.1f s "
               "(WORLD incl. big count %.1f s)\n",
               wsize, total, g_cases, big, t1 - t0, t_world - t0);
    MPI_Finalize();
    return 0;
}
