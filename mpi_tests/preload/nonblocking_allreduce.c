/*
 * An ordinary MPI program: no libcc_coll header, no libcc_coll link. The
 * preload tests run it under LD_PRELOAD=libcc_coll_preload.so.
 *
 *   nonblocking_allreduce compressed|exact multiple|single
 *
 * Every step posts MPI_Iallreduce calls on recurring buffers: eligible sums
 * (a float one out of place, a float one in place, a double one) and
 * ineligible ones (MPI_INT, MPI_MAX on floats, a small float sum), and a
 * ring of MPI_Isend/MPI_Irecv; then makes the same eligible sums with
 * blocking MPI_Allreduce into twin buffers; then completes the requests,
 * all in one array, with a different completion function at each step
 * (MPI_Wait, MPI_Test and MPI_Request_get_status loops, MPI_Waitall,
 * MPI_Waitany, MPI_Testsome, MPI_Testall, MPI_Testany, MPI_Waitsome).
 * The inputs are small whole numbers, so every sum is exact in any order.
 *
 * Checks: the ineligible calls and the messages are exact at every step.
 * Each eligible MPI_Iallreduce gives, bit for bit, what its blocking twin
 * gives (both compressed, with their own error-feedback residuals, from the
 * same step on: the shim's rule counts them alike), and every rank has the
 * same result. In `compressed` mode some eligible results differ from the
 * exact sum (they were compressed); in `exact` mode none does. In
 * `compressed` mode, where the eligible calls are the shim's requests: an
 * MPI_Iallreduce whose request the program frees (MPI_Request_free) still
 * completes, also one freed right before MPI_Finalize (both checked after
 * MPI_Finalize), and MPI_Cancel does not cancel
 * one (MPI_Test_cancelled says so, the result is right); MPI makes both
 * erroneous for its own nonblocking collectives. Under
 * MPI_THREAD_MULTIPLE two threads make such steps at once on their own
 * communicators.
 *
 * `multiple` starts MPI with MPI_Init_thread(MPI_THREAD_MULTIPLE) (the
 * shim's requests then also advance on their own), `single` with MPI_Init
 * (they advance only inside the program's MPI calls). Rank 0 prints
 * "nonblocking_allreduce: N ranks, <mode>, <init>: PASS" on stderr after
 * MPI_Finalize when every rank passed.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "preload_test.h"

static const char *const test_name = "nonblocking_allreduce";
static int rank, size, failures, compressed;
static pthread_mutex_t failures_mutex = PTHREAD_MUTEX_INITIALIZER;

/* CHECK from several threads (the condition, which may make MPI calls, is
 * evaluated before the lock is taken). */
#define TCHECK(cond, ...)                           \
    do {                                            \
        const int tcheck_ok = (cond);               \
        pthread_mutex_lock(&failures_mutex);        \
        CHECK(tcheck_ok, __VA_ARGS__);              \
        pthread_mutex_unlock(&failures_mutex);      \
    } while (0)

/* A whole number in [-1000, 1000]: sums of a few are exact as floats. */
static int ival(int r, long i, int salt)
{
    return (int)(mix((uint64_t)r * 7919u + (uint64_t)i * 104729u + (uint64_t)salt * 15485863u) % 2001u) - 1000;
}

static uint64_t hash_bytes(const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ULL;
    return h;
}

/* Whether every rank of `comm` has the same bytes. */
static int same_on_all_ranks(const void *p, size_t n, MPI_Comm comm)
{
    const uint64_t h = hash_bytes(p, n);
    uint64_t lo = 0, hi = 0;
    MPI_Allreduce(&h, &lo, 1, MPI_UINT64_T, MPI_MIN, comm);
    MPI_Allreduce(&h, &hi, 1, MPI_UINT64_T, MPI_MAX, comm);
    return lo == hi;
}

#define N_F 300000L /* 1.14 MiB of floats: above the 1 MiB threshold */
#define N_D 150000L /* 1.14 MiB of doubles */
#define N_I 300000L
#define N_SMALL 1000L
#define N_MSG 1024
#define STEPS 16
#define NREQ 8 /* 3 eligible, 3 ineligible, 2 messages */

/* What one sequence of steps reduces: its own buffers and communicator. */
struct work {
    MPI_Comm comm;
    int comm_rank, comm_size;
    int salt;
    float *a, *a_twin, *b, *b_twin, *as, *mx, *mx_in, *small, *small_in;
    double *c, *c_twin, *cs;
    int *ia, *ia_in, *msg_out, *msg_in;
    int differ; /* steps whose eligible results differ from the exact sum */
    const char *who;
};

static void work_init(struct work *w, MPI_Comm comm, int salt, const char *who)
{
    memset(w, 0, sizeof *w);
    w->comm = comm;
    w->salt = salt;
    w->who = who;
    MPI_Comm_rank(comm, &w->comm_rank);
    MPI_Comm_size(comm, &w->comm_size);
    w->a = malloc(N_F * sizeof(float)), w->a_twin = malloc(N_F * sizeof(float));
    w->b = malloc(N_F * sizeof(float)), w->b_twin = malloc(N_F * sizeof(float));
    w->as = malloc(N_F * sizeof(float));
    w->mx = malloc(N_I * sizeof(float)), w->mx_in = malloc(N_I * sizeof(float));
    w->small = malloc(N_SMALL * sizeof(float)), w->small_in = malloc(N_SMALL * sizeof(float));
    w->c = malloc(N_D * sizeof(double)), w->c_twin = malloc(N_D * sizeof(double)), w->cs = malloc(N_D * sizeof(double));
    w->ia = malloc(N_I * sizeof(int)), w->ia_in = malloc(N_I * sizeof(int));
    w->msg_out = malloc(N_MSG * sizeof(int)), w->msg_in = malloc(N_MSG * sizeof(int));
}

static void work_free(struct work *w)
{
    free(w->a), free(w->a_twin), free(w->b), free(w->b_twin), free(w->as), free(w->mx), free(w->mx_in);
    free(w->small), free(w->small_in), free(w->c), free(w->c_twin), free(w->cs), free(w->ia), free(w->ia_in);
    free(w->msg_out), free(w->msg_in);
}

/* Completes reqs[0..n) with the completion function of `variant`; every
 * request ends MPI_REQUEST_NULL. */
static void complete_all(struct work *w, MPI_Request *reqs, int n, int variant)
{
    int left = 0, rc = MPI_SUCCESS;
    MPI_Status sts[NREQ];  /* (MPI_STATUSES_IGNORE draws a false warning from gcc with MPICH's mpi.h) */
    for (int k = 0; k < n; ++k) left += reqs[k] != MPI_REQUEST_NULL;
    switch (variant) {
    case 0: /* MPI_Wait, one by one */
        for (int k = 0; k < n; ++k) rc |= MPI_Wait(&reqs[k], MPI_STATUS_IGNORE);
        break;
    case 1: /* MPI_Request_get_status on an eligible call's request, then MPI_Test loops */
        for (int flag = 0; !flag;) rc |= MPI_Request_get_status(reqs[1], &flag, MPI_STATUS_IGNORE);
        while (left > 0)
            for (int k = 0; k < n; ++k) {
                if (reqs[k] == MPI_REQUEST_NULL) continue;
                int flag = 0;
                MPI_Status st;
                rc |= MPI_Test(&reqs[k], &flag, &st);
                if (flag) --left;
            }
        break;
    case 2: /* MPI_Waitall */
        rc |= MPI_Waitall(n, reqs, sts);
        break;
    case 3: /* MPI_Waitany until none is left */
        for (;;) {
            int index = -1;
            MPI_Status st;
            rc |= MPI_Waitany(n, reqs, &index, &st);
            if (index == MPI_UNDEFINED) break;
            TCHECK(index >= 0 && index < n && reqs[index] == MPI_REQUEST_NULL, "%s: MPI_Waitany index %d", w->who,
                   index);
        }
        break;
    case 4: /* MPI_Testsome loop */
        for (;;) {
            int out = 0, idx[NREQ + 1];
            rc |= MPI_Testsome(n, reqs, &out, idx, sts);
            if (out == MPI_UNDEFINED) break;
        }
        break;
    case 5: /* MPI_Testall loop */
        for (int flag = 0; !flag;) rc |= MPI_Testall(n, reqs, &flag, sts);
        break;
    case 6: /* MPI_Testany loop */
        for (;;) {
            int index = -1, flag = 0;
            rc |= MPI_Testany(n, reqs, &index, &flag, MPI_STATUS_IGNORE);
            if (flag && index == MPI_UNDEFINED) break;
        }
        break;
    default: /* MPI_Waitsome until none is left */
        for (;;) {
            int out = 0, idx[NREQ + 1];
            rc |= MPI_Waitsome(n, reqs, &out, idx, sts);
            if (out == MPI_UNDEFINED) break;
        }
        break;
    }
    TCHECK(rc == MPI_SUCCESS, "%s: completion variant %d returned an error", w->who, variant);
    for (int k = 0; k < n; ++k)
        TCHECK(reqs[k] == MPI_REQUEST_NULL, "%s: variant %d left request %d active", w->who, variant, k);
}

/* Compares an eligible result with its twin (bit for bit) and the exact
 * sum; returns whether it differs from the exact sum. */
static int check_eligible_f(struct work *w, const float *got, const float *twin, int salt, const char *what, int t)
{
    long differ = 0;
    for (long i = 0; i < N_F; ++i) {
        float e = 0;
        for (int q = 0; q < w->comm_size; ++q) e += (float)ival(q, i, salt);
        differ += got[i] != e;
    }
    TCHECK(memcmp(got, twin, N_F * sizeof(float)) == 0, "%s: step %d: %s differs from its blocking twin", w->who, t,
           what);
    TCHECK(same_on_all_ranks(got, N_F * sizeof(float), w->comm), "%s: step %d: %s differs between ranks", w->who, t,
           what);
    return differ > 0;
}

static int check_eligible_d(struct work *w, int salt, int t)
{
    long differ = 0;
    for (long i = 0; i < N_D; ++i) {
        double e = 0;
        for (int q = 0; q < w->comm_size; ++q) e += ival(q, i, salt);
        differ += w->c[i] != e;
    }
    TCHECK(memcmp(w->c, w->c_twin, N_D * sizeof(double)) == 0, "%s: step %d: double sum differs from its twin",
           w->who, t);
    TCHECK(same_on_all_ranks(w->c, N_D * sizeof(double), w->comm), "%s: step %d: double sum differs between ranks",
           w->who, t);
    return differ > 0;
}

/* One step: post, blocking twins, complete, check. */
static void step(struct work *w, int t, int variant)
{
    const int r = w->comm_rank, salt = w->salt + 16 * t;
    for (long i = 0; i < N_F; ++i) {
        w->as[i] = (float)ival(r, i, salt);
        w->b[i] = w->b_twin[i] = (float)ival(r, i, salt + 1);
    }
    for (long i = 0; i < N_D; ++i) w->cs[i] = ival(r, i, salt + 2);
    for (long i = 0; i < N_I; ++i) {
        w->ia_in[i] = ival(r, i, salt + 3);
        w->mx_in[i] = (float)ival(r, i, salt + 4);
    }
    for (long i = 0; i < N_SMALL; ++i) w->small_in[i] = (float)ival(r, i, salt + 5);
    for (int i = 0; i < N_MSG; ++i) w->msg_out[i] = ival(r, i, salt + 6);

    MPI_Request reqs[NREQ];
    int rc = MPI_SUCCESS;
    /* The order of the array mixes shim and plain requests. */
    rc |= MPI_Irecv(w->msg_in, N_MSG, MPI_INT, (r + w->comm_size - 1) % w->comm_size, 7, w->comm, &reqs[0]);
    rc |= MPI_Iallreduce(w->as, w->a, (int)N_F, MPI_FLOAT, MPI_SUM, w->comm, &reqs[1]);
    rc |= MPI_Iallreduce(w->ia_in, w->ia, (int)N_I, MPI_INT, MPI_SUM, w->comm, &reqs[2]);
    rc |= MPI_Iallreduce(MPI_IN_PLACE, w->b, (int)N_F, MPI_FLOAT, MPI_SUM, w->comm, &reqs[3]);
    rc |= MPI_Iallreduce(w->mx_in, w->mx, (int)N_I, MPI_FLOAT, MPI_MAX, w->comm, &reqs[4]);
    rc |= MPI_Iallreduce(w->cs, w->c, (int)N_D, MPI_DOUBLE, MPI_SUM, w->comm, &reqs[5]);
    rc |= MPI_Iallreduce(w->small_in, w->small, (int)N_SMALL, MPI_FLOAT, MPI_SUM, w->comm, &reqs[6]);
    rc |= MPI_Isend(w->msg_out, N_MSG, MPI_INT, (r + 1) % w->comm_size, 7, w->comm, &reqs[7]);
    TCHECK(rc == MPI_SUCCESS, "%s: step %d: posting failed", w->who, t);

    /* The twins, blocking, while the requests are in flight. */
    rc |= MPI_Allreduce(w->as, w->a_twin, (int)N_F, MPI_FLOAT, MPI_SUM, w->comm);
    rc |= MPI_Allreduce(MPI_IN_PLACE, w->b_twin, (int)N_F, MPI_FLOAT, MPI_SUM, w->comm);
    rc |= MPI_Allreduce(w->cs, w->c_twin, (int)N_D, MPI_DOUBLE, MPI_SUM, w->comm);
    TCHECK(rc == MPI_SUCCESS, "%s: step %d: blocking twins failed", w->who, t);

    complete_all(w, reqs, NREQ, variant);

    /* Passed through: exact. */
    long bad = 0;
    for (long i = 0; i < N_I; ++i) {
        int e = 0;
        float m = (float)ival(0, i, salt + 4);
        for (int q = 0; q < w->comm_size; ++q) {
            e += ival(q, i, salt + 3);
            if ((float)ival(q, i, salt + 4) > m) m = (float)ival(q, i, salt + 4);
        }
        bad += w->ia[i] != e || memcmp(&w->mx[i], &m, sizeof m) != 0;
    }
    for (long i = 0; i < N_SMALL; ++i) {
        float e = 0;
        for (int q = 0; q < w->comm_size; ++q) e += (float)ival(q, i, salt + 5);
        bad += memcmp(&w->small[i], &e, sizeof e) != 0;
    }
    for (int i = 0; i < N_MSG; ++i) bad += w->msg_in[i] != ival((r + w->comm_size - 1) % w->comm_size, i, salt + 6);
    TCHECK(bad == 0, "%s: step %d (variant %d): %ld passed-through or message elements wrong", w->who, t, variant,
           bad);

    int d = check_eligible_f(w, w->a, w->a_twin, salt, "float sum out of place", t);
    d |= check_eligible_f(w, w->b, w->b_twin, salt + 1, "float sum in place", t);
    d |= check_eligible_d(w, salt + 2, t);
    if (!compressed) TCHECK(!d, "%s: step %d: an eligible sum is not exact", w->who, t);
    w->differ += d;
}

static void run_steps(struct work *w)
{
    for (int t = 0; t < STEPS; ++t) step(w, t, t % 8);
    if (compressed) TCHECK(w->differ > 0, "%s: no eligible MPI_Iallreduce was compressed", w->who);
}

static void *thread_main(void *p)
{
    run_steps(p);
    return NULL;
}

/* A freed request and a cancelled one. The freed request's buffer is
 * checked after MPI_Finalize; so is that of a request freed right before
 * MPI_Finalize (`last`), which MPI_Finalize completes.
 * The shim names a residual by (receive buffer address, count, type), so
 * these buffers are allocated at the start, while no buffer has been freed:
 * one allocated later could land where a step's freed buffer was and
 * inherit its residual (docs/preload.md, "Error feedback"), which its twin
 * would not. */
static float *freed, *freed_twin, *last, *last_twin, *fc_s, *fc_g, *fc_g_twin, *last_in;

static void alloc_free_and_cancel_buffers(void)
{
    freed = malloc(N_F * sizeof *freed), freed_twin = malloc(N_F * sizeof *freed_twin);
    last = malloc(N_F * sizeof *last), last_twin = malloc(N_F * sizeof *last_twin);
    fc_s = malloc(N_F * sizeof *fc_s), fc_g = malloc(N_F * sizeof *fc_g), fc_g_twin = malloc(N_F * sizeof *fc_g_twin);
    last_in = malloc(N_F * sizeof *last_in);
}

static void check_free_and_cancel(void)
{
    float *s = fc_s, *g = fc_g, *g_twin = fc_g_twin;
    for (long i = 0; i < N_F; ++i) s[i] = (float)ival(rank, i, 900);
    MPI_Request req;
    MPI_Iallreduce(s, freed, (int)N_F, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req);
    CHECK(MPI_Request_free(&req) == MPI_SUCCESS && req == MPI_REQUEST_NULL, "MPI_Request_free");
    MPI_Allreduce(s, freed_twin, (int)N_F, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);

    MPI_Iallreduce(s, g, (int)N_F, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req);
    CHECK(MPI_Cancel(&req) == MPI_SUCCESS, "MPI_Cancel returned an error");
    MPI_Status st;
    CHECK(MPI_Wait(&req, &st) == MPI_SUCCESS, "MPI_Wait after MPI_Cancel");
    int cancelled = -1;
    MPI_Test_cancelled(&st, &cancelled);
    CHECK(cancelled == 0, "MPI_Test_cancelled says a collective was cancelled");
    MPI_Allreduce(s, g_twin, (int)N_F, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    CHECK(memcmp(g, g_twin, N_F * sizeof *g) == 0, "cancelled MPI_Iallreduce differs from its twin");
}

/* `mismatch` mode (under the shim with CC_COLL_MIN_REPEATS=0): the ranks
 * pass different counts to an eligible MPI_Iallreduce, which libcc_coll
 * finds when the request runs; the request must complete with an MPI error
 * (MPI_Wait's code, MPI_Waitall's MPI_ERR_IN_STATUS and the status'
 * MPI_ERROR), and a right call afterwards must still work. */
static void check_mismatch(void)
{
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    float *s = malloc((N_F + 1) * sizeof *s), *r = malloc((N_F + 1) * sizeof *r), *twin = malloc(N_F * sizeof *twin);
    for (long i = 0; i <= N_F; ++i) s[i] = (float)ival(rank, i, 700);
    MPI_Request req[2];
    MPI_Status st[2];
    int cls = -1;
    /* MPI_Wait */
    int rc = MPI_Iallreduce(s, r, (int)N_F + (rank == 0), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req[0]);
    CHECK(rc == MPI_SUCCESS, "posting a call whose count differs between ranks: error %d", rc);
    rc = MPI_Wait(&req[0], &st[0]);
    MPI_Error_class(rc, &cls);
    CHECK(rc != MPI_SUCCESS && cls == MPI_ERR_OTHER, "MPI_Wait of a failed request: error %d (class %d)", rc, cls);
    CHECK(req[0] == MPI_REQUEST_NULL, "MPI_Wait left a failed request active");
    /* MPI_Waitall, beside a good request */
    MPI_Iallreduce(s, r, (int)N_F + (rank == 0), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req[0]);
    MPI_Iallreduce(s, twin, 1000, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req[1]);
    rc = MPI_Waitall(2, req, st);
    MPI_Error_class(st[0].MPI_ERROR, &cls);
    /* The good one completed (MPI_SUCCESS) or not yet (MPI_ERR_PENDING, as
     * MPI may say once one request has failed). */
    CHECK(rc == MPI_ERR_IN_STATUS && cls == MPI_ERR_OTHER &&
              (st[1].MPI_ERROR == MPI_SUCCESS || st[1].MPI_ERROR == MPI_ERR_PENDING),
          "MPI_Waitall with a failed request: error %d, statuses %d (class %d) %d", rc, st[0].MPI_ERROR, cls,
          st[1].MPI_ERROR);
    CHECK(req[0] == MPI_REQUEST_NULL, "MPI_Waitall left a failed request active");
    if (st[1].MPI_ERROR == MPI_ERR_PENDING) MPI_Wait(&req[1], MPI_STATUS_IGNORE);
    /* Later calls are fine. */
    MPI_Iallreduce(s, r, (int)N_F, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req[0]);
    rc = MPI_Wait(&req[0], MPI_STATUS_IGNORE);
    MPI_Allreduce(s, twin, (int)N_F, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    CHECK(rc == MPI_SUCCESS && memcmp(r, twin, N_F * sizeof *r) == 0, "a right call after the failed ones");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_ARE_FATAL);
    free(s), free(r), free(twin);
}

int main(int argc, char **argv)
{
    int provided = MPI_THREAD_SINGLE;
    const int multiple = argc == 3 && strcmp(argv[2], "multiple") == 0;
    if (multiple) {
        if (MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) return 1;
    } else if (MPI_Init(&argc, &argv) != MPI_SUCCESS) {
        return 1;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc != 3 ||
        (strcmp(argv[1], "compressed") != 0 && strcmp(argv[1], "exact") != 0 && strcmp(argv[1], "mismatch") != 0) ||
        (!multiple && strcmp(argv[2], "single") != 0)) {
        if (rank == 0) fprintf(stderr, "usage: nonblocking_allreduce compressed|exact|mismatch multiple|single\n");
        MPI_Finalize();
        return 2;
    }
    compressed = strcmp(argv[1], "compressed") == 0;
    if (multiple) CHECK(provided == MPI_THREAD_MULTIPLE, "MPI_Init_thread(MPI_THREAD_MULTIPLE) provided %d", provided);
    if (strcmp(argv[1], "mismatch") == 0) {
        check_mismatch();
        int total = 0;
        MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        MPI_Finalize();
        if (rank == 0)
            fprintf(stderr, "nonblocking_allreduce: %d ranks, mismatch, %s: %s\n", size, argv[2],
                    total == 0 ? "PASS" : "checks FAILED");
        return total == 0 ? 0 : 1;
    }

    if (compressed) alloc_free_and_cancel_buffers();
    struct work w;
    work_init(&w, MPI_COMM_WORLD, 1, "MPI_COMM_WORLD");
    run_steps(&w);
    work_free(&w);
    /* MPI makes MPI_Request_free and MPI_Cancel on a nonblocking collective
     * request erroneous; the shim's requests tolerate both. */
    if (compressed) check_free_and_cancel();

    if (provided == MPI_THREAD_MULTIPLE) {
        /* Two threads at once, each on its own communicator. */
        struct work tw[2];
        pthread_t th[2];
        MPI_Comm comms[2];
        const char *names[2] = {"thread 0", "thread 1"};
        for (int k = 0; k < 2; ++k) {
            MPI_Comm_dup(MPI_COMM_WORLD, &comms[k]);
            work_init(&tw[k], comms[k], 1000 + 500 * k, names[k]);
        }
        for (int k = 0; k < 2; ++k) pthread_create(&th[k], NULL, thread_main, &tw[k]);
        for (int k = 0; k < 2; ++k) pthread_join(th[k], NULL);
        for (int k = 0; k < 2; ++k) {
            work_free(&tw[k]);
            MPI_Comm_free(&comms[k]);
        }
    }

    if (compressed) {
        for (long i = 0; i < N_F; ++i) last_in[i] = (float)ival(rank, i, 800);
        MPI_Allreduce(last_in, last_twin, (int)N_F, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        MPI_Request req;
        MPI_Iallreduce(last_in, last, (int)N_F, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req);
        MPI_Request_free(&req);
    }
    int total = 0;
    MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    fflush(stdout);
    MPI_Finalize();
    /* The freed requests have completed by now. */
    const int freed_ok = !compressed || (memcmp(freed, freed_twin, N_F * sizeof *freed) == 0 &&
                                         memcmp(last, last_twin, N_F * sizeof *last) == 0);
    free(freed), free(freed_twin), free(last), free(last_twin), free(fc_s), free(fc_g), free(fc_g_twin);
    free(last_in);
    if (!freed_ok) fprintf(stderr, "%s: rank %d: FAIL: a freed MPI_Iallreduce differs from its twin\n", test_name, rank);
    if (rank == 0) {
        if (total == 0 && freed_ok)
            fprintf(stderr, "nonblocking_allreduce: %d ranks, %s, %s: PASS\n", size, argv[1], argv[2]);
        else
            fprintf(stderr, "nonblocking_allreduce: %d ranks, %s, %s: %d checks FAILED\n", size, argv[1], argv[2],
                    total + !freed_ok);
    }
    return total == 0 && freed_ok ? 0 : 1;
}
