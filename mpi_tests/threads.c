/*
 * Threads on one communicator under MPI_THREAD_MULTIPLE (docs/api.md,
 * "Threads"), with 2 ranks.
 *
 *   mpi_threads p2p          on each rank one thread sends and another
 *                            receives on the same communicator, TOPK (tag 1)
 *                            and uncompressed (tag 2) messages alternately;
 *                            every message is checked exactly
 *   mpi_threads local        one thread calls cc_coll_ef_reset,
 *                            cc_coll_ef_get_residual, cc_coll_ef_bytes and
 *                            cc_coll_comm_get_stats in a loop while the main
 *                            thread runs TOPK allreduces, with EF on and
 *                            off, on data whose result and residual are exact
 *   mpi_threads collectives  two threads issue an allreduce on one
 *                            communicator at once: one gets
 *                            CC_COLL_ERR_INVALID_ARG, the other completes
 *
 * Without MPI_THREAD_MULTIPLE the program exits with 77 (ctest: skipped).
 * Any failure prints the case and calls MPI_Abort. A hang is bounded by the
 * test's TIMEOUT.
 */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "cc_coll.h"
#include "check.h"
#include "test_util.h"

/* ---- p2p: a sending and a receiving thread --------------------------------- */

enum { kMessages = 2000, kCount = 1000, kNonzeros = 7 };
static const double kDensity = 0.05; /* k = 50 >= kNonzeros */

/* Message i from rank `from`: for a TOPK message kNonzeros nonzero integers
 * (so the k largest are all of them and the receiver gets the vector
 * exactly, and the LEP residual stays zero); for an uncompressed one every
 * element set. */
static void message(float *x, int from, int i, int sparse)
{
    uint64_t s = 0x9e3779b97f4a7c15ull * (uint64_t)(from + 1) + (uint64_t)i * 7919u + 1;
    if (sparse) {
        memset(x, 0, kCount * sizeof *x);
        for (int j = 0; j < kNonzeros; ++j) {
            const size_t at = (size_t)(rng_next(&s) % kCount);
            x[at] = (float)(1 + (int)(rng_next(&s) % 1000)) * (rng_next(&s) & 1 ? 1.0f : -1.0f);
        }
    } else {
        for (int j = 0; j < kCount; ++j) x[j] = (float)(rng_uniform(&s) * 2.0 - 1.0);
    }
}

struct P2pArgs {
    cc_coll_comm_h h;
    int peer;
};

static void *sender(void *arg)
{
    const struct P2pArgs *a = arg;
    float *x = xmalloc(kCount * sizeof *x);
    const cc_coll_params_t topk = topk_params(kDensity, 1);
    for (int i = 0; i < kMessages; ++i) {
        const int sparse = i % 2 == 0;
        message(x, g_rank, i, sparse);
        CHECK_CC(cc_coll_send(x, kCount, CC_COLL_F32, a->peer, sparse ? 1 : 2, sparse, sparse ? &topk : NULL, a->h,
                              NULL));
    }
    free(x);
    return NULL;
}

static void *receiver(void *arg)
{
    const struct P2pArgs *a = arg;
    float *got = xmalloc(kCount * sizeof *got);
    float *want = xmalloc(kCount * sizeof *want);
    const cc_coll_params_t topk = topk_params(kDensity, 1);
    for (int i = 0; i < kMessages; ++i) {
        const int sparse = i % 2 == 0;
        message(want, a->peer, i, sparse);
        CHECK_CC(cc_coll_recv(got, kCount, CC_COLL_F32, a->peer, sparse ? 1 : 2, sparse ? &topk : NULL, a->h, NULL));
        if (memcmp(got, want, kCount * sizeof *got) != 0) {
            char what[96];
            snprintf(what, sizeof what, "message %d (%s) from rank %d differs from what was sent", i,
                     sparse ? "TOPK" : "uncompressed", a->peer);
            die("%s", what, 0);
        }
    }
    free(got);
    free(want);
    return NULL;
}

static void test_p2p(cc_coll_comm_h h)
{
    g_test = "p2p";
    struct P2pArgs a = {h, 1 - g_rank};
    pthread_t s, r;
    CHECK(pthread_create(&s, NULL, sender, &a) == 0, "pthread_create");
    CHECK(pthread_create(&r, NULL, receiver, &a) == 0, "pthread_create");
    pthread_join(s, NULL);
    pthread_join(r, NULL);
    /* The TOPK channel's residual stayed zero: every nonzero was sent. */
    double *e = xmalloc(kCount * sizeof *e);
    const cc_coll_params_t topk = topk_params(kDensity, 1);
    CHECK_CC(cc_coll_lep_get_residual(h, 1 - g_rank, 1, &topk, kCount, CC_COLL_F32, e));
    for (int j = 0; j < kCount; ++j) CHECK(e[j] == 0.0, "the TOPK channel's residual is zero");
    free(e);
}

/* ---- local calls during allreduces ----------------------------------------- */

enum { kBig = 1 << 20, kBigNonzeros = 1000, kRounds = 60 };

struct LocalArgs {
    cc_coll_comm_h h;
    float *recv; /* the allreduce's recvbuf: its residual's key */
    volatile int done;
    pthread_mutex_t mutex;
    long calls;
};

static void *local_caller(void *arg)
{
    struct LocalArgs *a = arg;
    double *e = xmalloc((size_t)kBig * sizeof *e);
    const cc_coll_params_t topk = topk_params(0.01, 1);
    long n = 0;
    for (;;) {
        pthread_mutex_lock(&a->mutex);
        const int done = a->done;
        pthread_mutex_unlock(&a->mutex);
        if (done) break;
        CHECK_CC(cc_coll_ef_get_residual(a->h, &topk, a->recv, kBig, CC_COLL_F32, e));
        for (size_t j = 0; j < (size_t)kBig; j += 4099) CHECK(e[j] == 0.0, "the residual is zero");
        CHECK_CC(cc_coll_ef_reset(a->h, &topk, a->recv, kBig, CC_COLL_F32));
        uint64_t bytes = 0;
        CHECK_CC(cc_coll_ef_bytes(a->h, &bytes));
        CHECK(bytes == 0 || bytes == (uint64_t)kBig * sizeof(float), "cc_coll_ef_bytes: no residual or one");
        cc_coll_stats_t st;
        memset(&st, 0, sizeof st);
        st.mask = CC_COLL_STATS_FIELD_CALLS;
        CHECK_CC(cc_coll_comm_get_stats(a->h, &st));
        ++n;
    }
    a->calls = n;
    free(e);
    return NULL;
}

static void test_local(cc_coll_comm_h h)
{
    g_test = "local";
    float *send = xmalloc((size_t)kBig * sizeof *send);
    float *recv = xmalloc((size_t)kBig * sizeof *recv);
    float *want = xmalloc((size_t)kBig * sizeof *want);
    struct LocalArgs a;
    memset(&a, 0, sizeof a);
    a.h = h;
    a.recv = recv;
    pthread_mutex_init(&a.mutex, NULL);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, local_caller, &a) == 0, "pthread_create");
    for (int round = 0; round < kRounds; ++round) {
        /* Every rank's kBigNonzeros integers at positions shared by all
         * ranks (k = 10486 of each rank's tensor is more than enough): the
         * sum is exact, and with EF on the residual stays zero. */
        memset(send, 0, (size_t)kBig * sizeof *send);
        memset(want, 0, (size_t)kBig * sizeof *want);
        uint64_t s = 0x5eedull + (uint64_t)round;
        for (int j = 0; j < kBigNonzeros; ++j) {
            const size_t at = (size_t)(rng_next(&s) % kBig);
            const float v = (float)(1 + (int)(rng_next(&s) % 100));
            send[at] = v * (float)(g_rank + 1);
            want[at] = v * (float)(g_size * (g_size + 1) / 2);
        }
        const cc_coll_params_t p = topk_params(0.01, round % 2);
        CHECK_CC(cc_coll_allreduce(send, recv, kBig, CC_COLL_F32, CC_COLL_SUM, &p, h, NULL));
        if (memcmp(recv, want, (size_t)kBig * sizeof *recv) != 0) die("%s", "allreduce result is exact", 0);
    }
    pthread_mutex_lock(&a.mutex);
    a.done = 1;
    pthread_mutex_unlock(&a.mutex);
    pthread_join(t, NULL);
    pthread_mutex_destroy(&a.mutex);
    if (g_rank == 0) printf("local: %d allreduces, %ld rounds of local calls meanwhile\n", kRounds, a.calls);
    free(send);
    free(recv);
    free(want);
}

/* ---- two collectives at once on one communicator --------------------------- */

enum { kCollCount = 1000, kTokenTag = 4242 };

struct CollArgs {
    cc_coll_comm_h h;
    float *send, *recv;
    cc_coll_status_t status;
    char error[256];
    int returned;
    pthread_mutex_t *mutex;
    pthread_cond_t *cond;
};

static void *one_allreduce(void *arg)
{
    struct CollArgs *a = arg;
    const cc_coll_params_t p = topk_params(0.05, 0);
    const cc_coll_status_t st = cc_coll_allreduce(a->send, a->recv, kCollCount, CC_COLL_F32, CC_COLL_SUM, &p, a->h,
                                                  NULL);
    pthread_mutex_lock(a->mutex);
    a->status = st;
    snprintf(a->error, sizeof a->error, "%s", cc_coll_last_error());
    a->returned = 1;
    pthread_cond_broadcast(a->cond);
    pthread_mutex_unlock(a->mutex);
    return NULL;
}

/* Rank `doubled` issues two allreduces on two threads; the other rank one,
 * once the first of the two has returned. The first entrant on `doubled`
 * cannot complete before the other rank joins, so the second one runs
 * while it is in the collective and must be refused. */
static void round_of_two(cc_coll_comm_h h, int doubled)
{
    float send[kCollCount], want[kCollCount];
    for (int j = 0; j < kCollCount; ++j) {
        send[j] = j % 40 == 0 ? (float)(j + 1) : 0.0f; /* 25 nonzeros, k = 50: exact */
        want[j] = send[j] * (float)g_size;
    }
    if (g_rank != doubled) {
        int token = 0;
        MPI_Recv(&token, 1, MPI_INT, doubled, kTokenTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        float recv[kCollCount];
        const cc_coll_params_t p = topk_params(0.05, 0);
        CHECK_CC(cc_coll_allreduce(send, recv, kCollCount, CC_COLL_F32, CC_COLL_SUM, &p, h, NULL));
        CHECK(memcmp(recv, want, sizeof recv) == 0, "the single allreduce's result");
        return;
    }
    pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
    static float recv[2][kCollCount];
    struct CollArgs a[2];
    pthread_t t[2];
    for (int i = 0; i < 2; ++i) {
        memset(&a[i], 0, sizeof a[i]);
        a[i].h = h;
        a[i].send = send;
        a[i].recv = recv[i];
        a[i].mutex = &mutex;
        a[i].cond = &cond;
        CHECK(pthread_create(&t[i], NULL, one_allreduce, &a[i]) == 0, "pthread_create");
    }
    pthread_mutex_lock(&mutex);
    while (!a[0].returned && !a[1].returned) pthread_cond_wait(&cond, &mutex);
    const int refused = a[0].returned ? 0 : 1;
    pthread_mutex_unlock(&mutex);
    if (a[refused].status != CC_COLL_ERR_INVALID_ARG) {
        fprintf(stderr, "[rank %d] the first allreduce to return gave %s (%s)\n", g_rank,
                cc_coll_status_string(a[refused].status), a[refused].error);
        die("%s", "the second concurrent allreduce is CC_COLL_ERR_INVALID_ARG", 0);
    }
    CHECK(strstr(a[refused].error, "another thread is in a collective on this communicator") != NULL,
          "the refusal's message names the other thread's collective");
    int token = 1;
    MPI_Send(&token, 1, MPI_INT, 1 - doubled, kTokenTag, MPI_COMM_WORLD);
    pthread_join(t[0], NULL);
    pthread_join(t[1], NULL);
    const int ran = 1 - refused;
    if (a[ran].status != CC_COLL_OK) {
        fprintf(stderr, "[rank %d] %s\n", g_rank, a[ran].error);
        die("%s", "the allreduce that ran completes", 0);
    }
    CHECK(memcmp(recv[ran], want, sizeof want) == 0, "the allreduce that ran: its result");
}

static void test_collectives(cc_coll_comm_h h)
{
    g_test = "collectives";
    for (int round = 0; round < 20; ++round) {
        round_of_two(h, round % 2);
        /* The communicator works as before afterwards. */
        float x[16], y[16];
        for (int j = 0; j < 16; ++j) x[j] = (float)j;
        CHECK_CC(cc_coll_allreduce(x, y, 16, CC_COLL_F32, CC_COLL_SUM, NULL, h, NULL));
        for (int j = 0; j < 16; ++j) CHECK(y[j] == (float)(j * g_size), "an allreduce after the refusal");
    }
}

int main(int argc, char **argv)
{
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    if (provided < MPI_THREAD_MULTIPLE) {
        if (g_rank == 0)
            printf("SKIP: this MPI provides thread level %d, not MPI_THREAD_MULTIPLE (%d)\n", provided,
                   MPI_THREAD_MULTIPLE);
        MPI_Finalize();
        return 77;
    }
    CHECK(g_size == 2, "run with 2 ranks");
    CHECK(argc == 2, "usage: mpi_threads p2p|local|collectives");
    cc_coll_comm_h h = NULL;
    CHECK_CC(cc_coll_comm_create(MPI_COMM_WORLD, &h));
    if (strcmp(argv[1], "p2p") == 0) test_p2p(h);
    else if (strcmp(argv[1], "local") == 0) test_local(h);
    else if (strcmp(argv[1], "collectives") == 0) test_collectives(h);
    else CHECK(0, "usage: mpi_threads p2p|local|collectives");
    CHECK_CC(cc_coll_comm_destroy(h));
    MPI_Barrier(MPI_COMM_WORLD);
    if (g_rank == 0) printf("mpi_threads %s: OK\n", argv[1]);
    MPI_Finalize();
    return 0;
}
