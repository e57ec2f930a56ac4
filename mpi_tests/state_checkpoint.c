/*
 * Checkpoints of a communicator's compression state (cc_coll_state_export,
 * cc_coll_state_import) with real ranks (run with 2 ranks; any even number
 * works).
 *
 * What the header promises and this file checks:
 *   - resume: N steps of TOPK (keyed by ef_key and by address), SKETCH (F32,
 *     F16), a LOWRANK group (shapes of binary32, binary64 and bfloat16
 *     tensors and a 1-D bias, warm start, start_iter 2) and compressed
 *     point-to-point messages (a LOWRANK channel by tag, a TOPK channel by
 *     ef_key, now and then sent uncompressed), then export, destroy the
 *     communicator, create a new one, import, and M more steps: every result
 *     of those M steps is bit-identical to the same steps of an
 *     uninterrupted run of N + M steps on another communicator, and so are
 *     the blobs (after N steps and at the end), cc_coll_ef_bytes and
 *     cc_coll_state_bytes; a new communicator that runs the M steps without
 *     the import gives other results (the state matters);
 *   - corrupt blobs (truncated, a flipped byte, another format version,
 *     another magic, another major version under a correct checksum),
 *     another rank's blob and argument errors each give their status and
 *     message, and leave the state as it was (the blob exported afterwards
 *     is the same);
 *   - CC_COLL_EF_MAX_BYTES and CC_COLL_STATE_MAX_BYTES below the blob's
 *     state: CC_COLL_ERR_EF_LIMIT, nothing imported;
 *   - both calls while a non-blocking request is in flight:
 *     CC_COLL_ERR_INVALID_ARG.
 *
 * Any failure prints the case and calls MPI_Abort.
 *
 *   mpi_state_checkpoint [TEST...]     run every test, or only the named ones
 */
#define _POSIX_C_SOURCE 200809L /* setenv, unsetenv */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "cc_coll.h"
#include "check.h"
#include "test_util.h"

#define N_STEPS 4
#define M_STEPS 4

/* ---- the training step ------------------------------------------------------ */

enum { T_TOPK_KEY, T_TOPK_ADDR, T_SKETCH, T_SKETCH_F16, T_LR_A, T_LR_B, T_LR_BIAS, T_LR_D, NT };
enum { P_LOWRANK, P_TOPK, NP };

static const size_t kCount[NT] = {1000, 700, 4096, 2000, 64 * 48, 40 * 30, 30, 32 * 32};
static const cc_coll_dtype_t kDtype[NT] = {CC_COLL_F32, CC_COLL_F64, CC_COLL_F32,  CC_COLL_F16,
                                           CC_COLL_F32, CC_COLL_F64, CC_COLL_F32, CC_COLL_BF16};
static const size_t kP2pCount[NP] = {600, 300};
static const cc_coll_dtype_t kP2pDtype[NP] = {CC_COLL_F32, CC_COLL_F64};

/* The buffers, the same for every communicator: TOPK's second tensor is
 * named by its recvbuf's address. */
static void *g_send[NT], *g_recv[NT], *g_p2p_send[NP], *g_p2p_recv[NP];

static void alloc_buffers(void)
{
    for (int t = 0; t < NT; ++t) {
        g_send[t] = xmalloc(kCount[t] * cc_coll_dtype_size(kDtype[t]));
        g_recv[t] = xmalloc(kCount[t] * cc_coll_dtype_size(kDtype[t]));
    }
    for (int t = 0; t < NP; ++t) {
        g_p2p_send[t] = xmalloc(kP2pCount[t] * cc_coll_dtype_size(kP2pDtype[t]));
        g_p2p_recv[t] = xmalloc(kP2pCount[t] * cc_coll_dtype_size(kP2pDtype[t]));
    }
}

static void fill(void *buf, size_t n, cc_coll_dtype_t d, uint64_t seed)
{
    double *x = (double *)xmalloc(n * sizeof(double));
    random_values(d, x, n, seed, 4);
    pack(d, x, n, buf);
    free(x);
}

static uint64_t seed_of(int step, int tensor)
{
    return 0x5eedull * 1000003u + (uint64_t)g_rank * 7919u + (uint64_t)step * 104729u + (uint64_t)tensor;
}

/* What one step produced on this rank: every received buffer, in order. */
typedef struct {
    unsigned char *bytes;
    size_t size;
} Result;

static void append(Result *r, const void *p, size_t n)
{
    r->bytes = (unsigned char *)realloc(r->bytes, r->size + n);
    if (r->bytes == NULL) die("%s", "realloc failed", 0);
    memcpy(r->bytes + r->size, p, n);
    r->size += n;
}

static cc_coll_params_t lowrank_tensor(uint64_t rows, uint64_t cols, int rank, uint64_t key)
{
    cc_coll_params_t p = rows > 0 ? lowrank_params(rows, cols, rank) : lowrank_params_1d(rank);
    p.mask |= CC_COLL_PARAMS_FIELD_WARM_START | CC_COLL_PARAMS_FIELD_START_ITER;
    p.warm_start = 1;
    p.start_iter = 2;
    return keyed(p, key);
}

/* A point-to-point exchange with the partner rank (rank ^ 1): even ranks
 * send then receive, odd ranks the reverse. */
static void p2p_exchange(cc_coll_comm_h h, int step, Result *out)
{
    const int peer = g_rank ^ 1;
    const cc_coll_params_t lr = lowrank_params_1d(2); /* near-square view */
    const cc_coll_params_t tk = keyed(topk_params(0.1, 1), 77);
    const int tag[NP] = {7, 8};
    const cc_coll_params_t *ps[NP] = {&lr, &tk};
    /* every third step the TOPK channel goes uncompressed (its residual
     * emptied up to rounding) */
    const int compress[NP] = {1, step % 3 != 2};
    for (int t = 0; t < NP; ++t) fill(g_p2p_send[t], kP2pCount[t], kP2pDtype[t], seed_of(step, 100 + t));
    for (int phase = 0; phase < 2; ++phase) {
        const int sending = (phase == 0) == (g_rank % 2 == 0);
        for (int t = 0; t < NP; ++t) {
            if (sending)
                CHECK_CC(cc_coll_send(g_p2p_send[t], kP2pCount[t], kP2pDtype[t], peer, tag[t], compress[t], ps[t], h,
                                      NULL));
            else
                CHECK_CC(cc_coll_recv(g_p2p_recv[t], kP2pCount[t], kP2pDtype[t], peer, tag[t], ps[t], h, NULL));
        }
    }
    for (int t = 0; t < NP; ++t) append(out, g_p2p_recv[t], kP2pCount[t] * cc_coll_dtype_size(kP2pDtype[t]));
}

static void step(cc_coll_comm_h h, int s, Result *out)
{
    for (int t = 0; t < NT; ++t) fill(g_send[t], kCount[t], kDtype[t], seed_of(s, t));

    const cc_coll_params_t topk_key = keyed(topk_params(0.05, 1), 101);
    const cc_coll_params_t topk_addr = topk_params(0.03, 1);
    const cc_coll_params_t sketch = keyed(sketch_params(0.02, 1, 0.77), 202);
    const cc_coll_params_t sketch16 = keyed(sketch_params(0.05, 1, 0.77), 203);
    CHECK_CC(cc_coll_allreduce(g_send[T_TOPK_KEY], g_recv[T_TOPK_KEY], kCount[T_TOPK_KEY], kDtype[T_TOPK_KEY],
                               CC_COLL_AVG, &topk_key, h, NULL));
    /* in place: the residual is named by (recvbuf, count, dtype) */
    memcpy(g_recv[T_TOPK_ADDR], g_send[T_TOPK_ADDR], kCount[T_TOPK_ADDR] * cc_coll_dtype_size(kDtype[T_TOPK_ADDR]));
    CHECK_CC(cc_coll_allreduce(g_recv[T_TOPK_ADDR], g_recv[T_TOPK_ADDR], kCount[T_TOPK_ADDR], kDtype[T_TOPK_ADDR],
                               CC_COLL_SUM, &topk_addr, h, NULL));
    CHECK_CC(cc_coll_allreduce(g_send[T_SKETCH], g_recv[T_SKETCH], kCount[T_SKETCH], kDtype[T_SKETCH], CC_COLL_AVG,
                               &sketch, h, NULL));
    CHECK_CC(cc_coll_allreduce(g_send[T_SKETCH_F16], g_recv[T_SKETCH_F16], kCount[T_SKETCH_F16],
                               kDtype[T_SKETCH_F16], CC_COLL_AVG, &sketch16, h, NULL));

    const cc_coll_params_t lr[4] = {lowrank_tensor(64, 48, 4, 301), lowrank_tensor(40, 30, 2, 302),
                                    lowrank_tensor(0, 0, 2, 303), lowrank_tensor(32, 32, 2, 304)};
    const void *sends[4] = {g_send[T_LR_A], g_send[T_LR_B], g_send[T_LR_BIAS], g_send[T_LR_D]};
    void *recvs[4] = {g_recv[T_LR_A], g_recv[T_LR_B], g_recv[T_LR_BIAS], g_recv[T_LR_D]};
    const size_t counts[4] = {kCount[T_LR_A], kCount[T_LR_B], kCount[T_LR_BIAS], kCount[T_LR_D]};
    const cc_coll_dtype_t dtypes[4] = {kDtype[T_LR_A], kDtype[T_LR_B], kDtype[T_LR_BIAS], kDtype[T_LR_D]};
    CHECK_CC(cc_coll_allreduce_group(4, sends, recvs, counts, dtypes, CC_COLL_AVG, lr, h, NULL));

    for (int t = 0; t < NT; ++t) append(out, g_recv[t], kCount[t] * cc_coll_dtype_size(kDtype[t]));
    p2p_exchange(h, s, out);
}

/* ---- blobs ------------------------------------------------------------------ */

typedef struct {
    unsigned char *bytes;
    size_t size;
} Blob;

static Blob export_blob(cc_coll_comm_h h)
{
    Blob b = {NULL, 0};
    CHECK_CC(cc_coll_state_export(h, NULL, &b.size));
    CHECK(b.size >= 48, "a blob holds at least its 48-byte header");
    b.bytes = (unsigned char *)xmalloc(b.size);
    size_t size = b.size;
    CHECK_CC(cc_coll_state_export(h, b.bytes, &size));
    CHECK(size == b.size, "export writes the size the query gave");
    return b;
}

static int same_blob(Blob a, Blob b) { return a.size == b.size && memcmp(a.bytes, b.bytes, a.size) == 0; }

static uint64_t ef_bytes(cc_coll_comm_h h)
{
    uint64_t n = 0;
    CHECK_CC(cc_coll_ef_bytes(h, &n));
    return n;
}

static uint64_t state_bytes(cc_coll_comm_h h)
{
    uint64_t n = 0;
    CHECK_CC(cc_coll_state_bytes(h, &n));
    return n;
}

/* FNV-1a 64 over every byte but the checksum's (docs/wire.md), to forge a
 * blob whose checksum is right. */
static void fix_checksum(Blob *b)
{
    uint64_t h = 14695981039346656037ull;
    for (size_t i = 0; i < b->size; ++i) {
        if (i >= 40 && i < 48) continue;
        h = (h ^ b->bytes[i]) * 1099511628211ull;
    }
    for (int i = 0; i < 8; ++i) b->bytes[40 + i] = (unsigned char)(h >> (8 * i));
}

static void expect_status(cc_coll_status_t got, cc_coll_status_t want, const char *words, const char *what)
{
    if (got != want) {
        fprintf(stderr, "[rank %d] %s: %s, expected %s (%s)\n", g_rank, what, cc_coll_status_string(got),
                cc_coll_status_string(want), cc_coll_last_error());
        die("%s", what, 0);
    }
    if (words != NULL && strstr(cc_coll_last_error(), words) == NULL) {
        fprintf(stderr, "[rank %d] %s: message \"%s\" lacks \"%s\"\n", g_rank, what, cc_coll_last_error(), words);
        die("%s", what, 0);
    }
}

/* ---- tests -------------------------------------------------------------------- */

static cc_coll_comm_h create(void)
{
    cc_coll_comm_h c = NULL;
    CHECK_CC(cc_coll_comm_create(MPI_COMM_WORLD, &c));
    return c;
}

static void test_resume(cc_coll_comm_h unused)
{
    (void)unused;
    Result whole[N_STEPS + M_STEPS], first[N_STEPS], resumed[M_STEPS], fresh[M_STEPS];
    memset(whole, 0, sizeof whole);
    memset(first, 0, sizeof first);
    memset(resumed, 0, sizeof resumed);
    memset(fresh, 0, sizeof fresh);

    /* The uninterrupted run. */
    cc_coll_comm_h a = create();
    Blob at_n = {NULL, 0};
    for (int s = 0; s < N_STEPS + M_STEPS; ++s) {
        step(a, s, &whole[s]);
        if (s == N_STEPS - 1) at_n = export_blob(a);
    }
    const Blob a_end = export_blob(a);
    CHECK_CC(cc_coll_comm_destroy(a));

    /* Stopped after N steps... */
    cc_coll_comm_h b = create();
    for (int s = 0; s < N_STEPS; ++s) step(b, s, &first[s]);
    const Blob saved = export_blob(b);
    const uint64_t b_ef = ef_bytes(b), b_state = state_bytes(b);
    CHECK_CC(cc_coll_comm_destroy(b));
    CHECK(b_ef > 0 && b_state > 0, "the checkpoint holds residuals and LOWRANK state");
    CHECK(same_blob(saved, at_n), "the same state gives the same blob");
    for (int s = 0; s < N_STEPS; ++s)
        CHECK(first[s].size == whole[s].size && memcmp(first[s].bytes, whole[s].bytes, first[s].size) == 0,
              "the first N steps are identical on both communicators");

    /* ...and resumed on a new communicator. */
    cc_coll_comm_h c = create();
    CHECK_CC(cc_coll_state_import(c, saved.bytes, saved.size));
    CHECK(ef_bytes(c) == b_ef, "cc_coll_ef_bytes after the import");
    CHECK(state_bytes(c) == b_state, "cc_coll_state_bytes after the import");
    const Blob restored = export_blob(c);
    CHECK(same_blob(restored, saved), "the imported state exports as the blob it came from");
    for (int s = 0; s < M_STEPS; ++s) {
        step(c, N_STEPS + s, &resumed[s]);
        const Result *want = &whole[N_STEPS + s];
        if (resumed[s].size != want->size || memcmp(resumed[s].bytes, want->bytes, want->size) != 0) {
            size_t i = 0;
            while (i < want->size && resumed[s].bytes[i] == want->bytes[i]) ++i;
            fprintf(stderr, "[rank %d] step %d: first differing byte %zu of %zu\n", g_rank, N_STEPS + s, i,
                    want->size);
            die("%s", "a resumed step is not bit-identical to the uninterrupted run", 0);
        }
    }
    const Blob c_end = export_blob(c);
    CHECK(same_blob(c_end, a_end), "the resumed run ends in the uninterrupted run's state");
    CHECK_CC(cc_coll_comm_destroy(c));

    /* Without the import the same steps give other results. */
    cc_coll_comm_h d = create();
    int differs = 0;
    for (int s = 0; s < M_STEPS; ++s) {
        step(d, N_STEPS + s, &fresh[s]);
        differs |= memcmp(fresh[s].bytes, whole[N_STEPS + s].bytes, fresh[s].size) != 0;
    }
    CHECK(differs, "a communicator without the checkpoint diverges (the state matters)");
    CHECK_CC(cc_coll_comm_destroy(d));

    for (int s = 0; s < N_STEPS + M_STEPS; ++s) free(whole[s].bytes);
    for (int s = 0; s < N_STEPS; ++s) free(first[s].bytes);
    for (int s = 0; s < M_STEPS; ++s) {
        free(resumed[s].bytes);
        free(fresh[s].bytes);
    }
    free(at_n.bytes);
    free(a_end.bytes);
    free(saved.bytes);
    free(restored.bytes);
    free(c_end.bytes);
}

/* Imports `bad` and expects (status, words), then the state as before. */
static void expect_rejected(cc_coll_comm_h h, const Blob *good, const Blob *bad, cc_coll_status_t status,
                            const char *words, const char *what)
{
    expect_status(cc_coll_state_import(h, bad->bytes, bad->size), status, words, what);
    Blob now = export_blob(h);
    CHECK(same_blob(now, *good), "a rejected import leaves the state as it was");
    free(now.bytes);
}

static Blob copy_of(const Blob *b)
{
    Blob c = {(unsigned char *)xmalloc(b->size), b->size};
    memcpy(c.bytes, b->bytes, b->size);
    return c;
}

static void test_corrupt(cc_coll_comm_h h)
{
    Result scratch = {NULL, 0};
    step(h, 0, &scratch);
    step(h, 1, &scratch);
    const Blob good = export_blob(h);

    Blob b = copy_of(&good);
    b.size = good.size - 1;
    expect_rejected(h, &good, &b, CC_COLL_ERR_INVALID_ARG, "truncated", "a blob one byte short");
    b.size = 30;
    expect_rejected(h, &good, &b, CC_COLL_ERR_INVALID_ARG, "truncated", "a blob cut inside its header");
    b.size = good.size;

    b.bytes[good.size / 2] ^= 0x04;
    expect_rejected(h, &good, &b, CC_COLL_ERR_INVALID_ARG, "checksum", "a flipped bit in the body");
    memcpy(b.bytes, good.bytes, good.size);

    b.bytes[4] = 2; /* format version */
    expect_rejected(h, &good, &b, CC_COLL_ERR_VERSION_MISMATCH, "format version 2", "format version 2");
    memcpy(b.bytes, good.bytes, good.size);

    b.bytes[0] ^= 0xff; /* magic */
    expect_rejected(h, &good, &b, CC_COLL_ERR_INVALID_ARG, "not a libcc_coll state blob", "wrong magic");
    memcpy(b.bytes, good.bytes, good.size);

    b.bytes[8] = (unsigned char)(CC_COLL_VERSION_MAJOR + 1); /* library major version, checksum fixed up */
    fix_checksum(&b);
    expect_rejected(h, &good, &b, CC_COLL_ERR_VERSION_MISMATCH, "another major version", "another major version");
    memcpy(b.bytes, good.bytes, good.size);

    /* The partner rank's blob. */
    const int peer = g_rank ^ 1;
    unsigned long long mine = good.size, theirs = 0;
    MPI_Sendrecv(&mine, 1, MPI_UNSIGNED_LONG_LONG, peer, 0, &theirs, 1, MPI_UNSIGNED_LONG_LONG, peer, 0,
                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    Blob other = {(unsigned char *)xmalloc((size_t)theirs), (size_t)theirs};
    MPI_Sendrecv(good.bytes, (int)good.size, MPI_BYTE, peer, 1, other.bytes, (int)theirs, MPI_BYTE, peer, 1,
                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    expect_rejected(h, &good, &other, CC_COLL_ERR_MISMATCH, "every rank restores the blob it exported",
                    "another rank's blob");
    free(other.bytes);

    /* Arguments. */
    expect_status(cc_coll_state_import(h, NULL, 10), CC_COLL_ERR_NULL_BUFFER, "buf is NULL", "import NULL buffer");
    expect_status(cc_coll_state_import(NULL, good.bytes, good.size), CC_COLL_ERR_INVALID_COMM, NULL,
                  "import NULL comm");
    expect_status(cc_coll_state_export(h, b.bytes, NULL), CC_COLL_ERR_INVALID_ARG, "size is NULL",
                  "export NULL size");
    size_t small = good.size - 1;
    memset(b.bytes, 0xab, good.size);
    expect_status(cc_coll_state_export(h, b.bytes, &small), CC_COLL_ERR_INVALID_ARG, "too small",
                  "export into a small buffer");
    CHECK(small == good.size, "a small buffer gets the size needed");
    CHECK(b.bytes[0] == 0xab, "nothing is written into a small buffer");

    /* The communicator still works, from the state it had. */
    CHECK_CC(cc_coll_state_import(h, good.bytes, good.size));
    step(h, 2, &scratch);
    free(scratch.bytes);
    free(b.bytes);
    free(good.bytes);
}

static void test_caps(cc_coll_comm_h h)
{
    Result scratch = {NULL, 0};
    CHECK_CC(cc_coll_ef_reset_all(h));
    for (int s = 0; s < 3; ++s) step(h, s, &scratch);
    free(scratch.bytes);
    const Blob good = export_blob(h);
    const char *vars[2] = {"CC_COLL_EF_MAX_BYTES", "CC_COLL_STATE_MAX_BYTES"};
    const uint64_t need[2] = {ef_bytes(h), state_bytes(h)};
    for (int v = 0; v < 2; ++v) {
        char value[32];
        snprintf(value, sizeof value, "%llu", (unsigned long long)(need[v] / 2));
        setenv(vars[v], value, 1);
        cc_coll_comm_h c = create();
        unsetenv(vars[v]);
        expect_status(cc_coll_state_import(c, good.bytes, good.size), CC_COLL_ERR_EF_LIMIT, vars[v],
                      "a blob over the cap");
        CHECK(ef_bytes(c) == 0 && state_bytes(c) == 0, "nothing was imported");
        CHECK_CC(cc_coll_comm_destroy(c));
    }
    free(good.bytes);
}

static void test_in_flight(cc_coll_comm_h h)
{
    enum { N = 512 };
    float *x = (float *)xcalloc(N, sizeof(float)), *y = (float *)xcalloc(N, sizeof(float));
    for (int i = 0; i < N; ++i) x[i] = (float)(i % 17) - 8.0f;
    const Blob good = export_blob(h);
    const cc_coll_params_t p = keyed(topk_params(0.1, 1), 909);
    cc_coll_request_h r = NULL;
    /* Rank 0 posts first; its request cannot complete before rank 1 posts
     * too, after the barrier. */
    if (g_rank == 0) {
        CHECK_CC(cc_coll_iallreduce(x, y, N, CC_COLL_F32, CC_COLL_SUM, &p, h, NULL, &r));
        expect_status(cc_coll_state_import(h, good.bytes, good.size), CC_COLL_ERR_INVALID_ARG, "in flight",
                      "import with a request in flight");
        size_t size = 0;
        expect_status(cc_coll_state_export(h, NULL, &size), CC_COLL_ERR_INVALID_ARG, "in flight",
                      "export with a request in flight");
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (g_rank != 0) CHECK_CC(cc_coll_iallreduce(x, y, N, CC_COLL_F32, CC_COLL_SUM, &p, h, NULL, &r));
    CHECK_CC(cc_coll_wait(r));
    CHECK_CC(cc_coll_request_free(r));
    /* Completed: both work again. */
    const Blob after = export_blob(h);
    CHECK(!same_blob(after, good), "the request's residual is in the state");
    CHECK_CC(cc_coll_state_import(h, good.bytes, good.size));
    free(after.bytes);
    free(good.bytes);
    free(x);
    free(y);
}

int main(int argc, char **argv)
{
    alloc_buffers();
    static const NamedTest tests[] = {
        {"resume", test_resume},
        {"corrupt", test_corrupt},
        {"caps", test_caps},
        {"in_flight", test_in_flight},
    };
    const int rc = run_suite(argc, argv, "mpi_state_checkpoint", tests, sizeof tests / sizeof tests[0], 2, NULL);
    for (int t = 0; t < NT; ++t) {
        free(g_send[t]);
        free(g_recv[t]);
    }
    for (int t = 0; t < NP; ++t) {
        free(g_p2p_send[t]);
        free(g_p2p_recv[t]);
    }
    return rc;
}
