/* -N: overlap of the non-blocking form, OSU osu_iallreduce's method. */
#include "overlap.h"

#include <math.h>
#include <string.h>

#include <mpi.h>

#include "cc_coll.h"
#include "data.h"
#include "methods.h"

/* OSU's dummy compute on the CPU: a DIM x DIM float kernel on the caller's
 * thread (x[i] += a[i][j] * a[j][i] + y[j]), repeated until the target
 * wall-clock time has elapsed. The arrays are global, so the work cannot be
 * optimised away. */
#define COMPUTE_DIM 25
static float compute_a[COMPUTE_DIM][COMPUTE_DIM], compute_x[COMPUTE_DIM], compute_y[COMPUTE_DIM];

void compute_init(void)
{
    for (int i = 0; i < COMPUTE_DIM; ++i) {
        compute_x[i] = compute_y[i] = 1.0f;
        for (int j = 0; j < COMPUTE_DIM; ++j) compute_a[i][j] = 2.0f;
    }
}

static void compute_kernel(void)
{
    for (int i = 0; i < COMPUTE_DIM; ++i)
        for (int j = 0; j < COMPUTE_DIM; ++j)
            compute_x[i] = compute_x[i] + compute_a[i][j] * compute_a[j][i] + compute_y[j];
}

/* OSU's do_compute_cpu: runs the kernel until the times of its runs add up
 * to `seconds`. Adds the runs to *runs and returns their time. */
static double compute_for(double seconds, long long *runs)
{
    double elapsed = 0.0;
    while (elapsed < seconds) {
        const double t1 = MPI_Wtime();
        compute_kernel();
        elapsed += MPI_Wtime() - t1;
        ++*runs;
    }
    return elapsed;
}

/* One non-blocking allreduce: cc_coll_iallreduce, or MPI_Iallreduce for mpi. */
typedef struct nb_request {
    int method;
    MPI_Request mpi;
    cc_coll_request_h cc;
} nb_request_t;

static cc_coll_status_t nb_start(bench_t *b, int method, const cc_coll_params_t *params, const void *sendbuf,
                                 void *recvbuf, size_t count, nb_request_t *req)
{
    const options_t *o = b->opt;
    req->method = method;
    req->mpi = MPI_REQUEST_NULL;
    req->cc = NULL;
    if (method != METHOD_MPI)
        return cc_coll_iallreduce(sendbuf, recvbuf, count, o->dtype, o->op, params, b->comm, NULL, &req->cc);
    MPI_Iallreduce(sendbuf == recvbuf ? MPI_IN_PLACE : sendbuf, recvbuf, (int)count, b->mpi_type, b->mpi_op,
                   MPI_COMM_WORLD, &req->mpi);
    return CC_COLL_OK;
}

/* cc_coll_test / MPI_Test: the request's status once it failed, else OK. */
static cc_coll_status_t nb_test(nb_request_t *req)
{
    int done = 0;
    if (req->method != METHOD_MPI) return cc_coll_test(req->cc, &done);
    MPI_Test(&req->mpi, &done, MPI_STATUS_IGNORE);
    return CC_COLL_OK;
}

/* cc_coll_wait / MPI_Wait; mpi's AVG divides after the sum, as the blocking
 * form does inside its timed call. */
static cc_coll_status_t nb_wait(bench_t *b, nb_request_t *req, void *recvbuf, size_t count)
{
    if (req->method != METHOD_MPI) return cc_coll_wait(req->cc);
    MPI_Wait(&req->mpi, MPI_STATUS_IGNORE);
    if (b->opt->op == CC_COLL_AVG) divide_by_ranks(recvbuf, count, b->opt->dtype, b->ranks);
    return CC_COLL_OK;
}

/* MPI_Wait frees an MPI request; a cc_coll request is freed by hand. */
static void nb_free(nb_request_t *req)
{
    if (req->cc) cc_coll_request_free(req->cc);
    req->cc = NULL;
}

/* OSU's dummy_compute (do_compute_and_probe on the CPU): with tests > 0,
 * `tests` rounds of a compute of seconds / tests followed by one test call;
 * else one compute of `seconds`. Returns the time spent in the test calls;
 * adds the kernel's runs and their time to *runs and *kernel_time; *st
 * receives the first failed test's status. */
static double dummy_compute(double seconds, int tests, nb_request_t *req, long long *runs, double *kernel_time,
                            cc_coll_status_t *st)
{
    if (tests == 0) {
        *kernel_time += compute_for(seconds, runs);
        return 0.0;
    }
    double test_time = 0.0;
    for (int n = 0; n < tests; ++n) {
        *kernel_time += compute_for(seconds / tests, runs);
        const double t1 = MPI_Wtime();
        const cc_coll_status_t s = nb_test(req);
        test_time += MPI_Wtime() - t1;
        if (s != CC_COLL_OK && *st == CC_COLL_OK) *st = s;
    }
    return test_time;
}

/* Elements of the non-blocking check call's result that differ from the
 * reference: the blocking check call's result (both calls start from a
 * reset error feedback), or for mpi the exact sum. -1: not checked. */
static long long nb_check(const bench_t *b, int method, size_t count)
{
    if (!b->opt->check) return -1;
    if (method == METHOD_MPI)
        return b->expected_exact ? count_wrong_vs_expected(b, b->recv, count) : -1;
    return count_differing(b->recv, b->first, count, b->es);
}

/* The non-blocking form of `method` measured as osu_iallreduce does (see
 * --help), after measure() ran the blocking form on the same buffers.
 * Collective. Returns 0, or 1 on every rank when a call failed on any. */
int measure_nb(bench_t *b, size_t count, int in_place, int method, result_t *res)
{
    const options_t *o = b->opt;
    const size_t bytes = count * b->es;
    const void *sendbuf = in_place ? (const void *)b->recv : (const void *)b->send;
    const cc_coll_params_t params = method_params(o, method);
    const int total = o->warmup + o->iters;
    const char *failed_call = NULL;
    cc_coll_status_t st = CC_COLL_OK;
    long long wrong = -1;
    nb_request_t req;

    /* 1. Pure communication time: iallreduce, then wait at once. After the
     * warm-up, error feedback is reset and one untimed call (the check
     * call, as the blocking form's) gives the result that is checked; the
     * timed calls go on from its residual. */
    double pure = 0.0;
    if (method != METHOD_MPI && (st = cc_coll_ef_reset_all(b->comm)) != CC_COLL_OK) failed_call = "cc_coll_ef_reset_all";
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i <= total && !failed_call; ++i) {
        const int check = i == o->warmup;
        if (check && method != METHOD_MPI && (st = cc_coll_ef_reset_all(b->comm)) != CC_COLL_OK) {
            failed_call = "cc_coll_ef_reset_all";
            break;
        }
        if (in_place) memcpy(b->recv, b->input, bytes); /* fresh input, outside the timed region */
        const int lossy_before = check ? auto_lossy_calls(b->comm, method) : -1;
        const double t0 = MPI_Wtime();
        if ((st = nb_start(b, method, &params, sendbuf, b->recv, count, &req)) != CC_COLL_OK) {
            failed_call = "cc_coll_iallreduce";
            break;
        }
        st = nb_wait(b, &req, b->recv, count);
        const double t1 = MPI_Wtime();
        nb_free(&req);
        if (st != CC_COLL_OK) {
            failed_call = "cc_coll_wait";
            break;
        }
        if (i > o->warmup) pure += t1 - t0;
        if (check) {
            /* auto: comparable with the blocking result only when both calls
             * took the same branch (CC_COLL_AUTO_CHECK=on may explore). */
            const int lossy = lossy_before < 0 ? -1 : auto_lossy_calls(b->comm, method) - lossy_before;
            if (lossy == b->first_lossy) wrong = nb_check(b, method, count);
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
    const double latency = pure / o->iters; /* this rank's pure time: the compute target, as in OSU */

    /* 2. The dummy compute alone (no request in flight, every rank computing),
     * for its work rate: at least 10 ms, for a steady rate. */
    long long alone_runs = 0;
    double alone_time = 0.0;
    if (!failed_call) {
        MPI_Barrier(MPI_COMM_WORLD);
        alone_time = compute_for(latency > 0.01 ? latency : 0.01, &alone_runs);
    }

    /* 3. iallreduce, the dummy compute for `latency`, wait. */
    double overall = 0.0, cpu = 0.0, test = 0.0, init = 0.0, wait = 0.0, kernel = 0.0;
    long long runs = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < total && !failed_call; ++i) {
        if (in_place) memcpy(b->recv, b->input, bytes);
        long long r = 0;
        double k = 0.0;
        cc_coll_status_t test_st = CC_COLL_OK;
        const double t_start = MPI_Wtime();
        double t_init = MPI_Wtime();
        st = nb_start(b, method, &params, sendbuf, b->recv, count, &req);
        t_init = MPI_Wtime() - t_init;
        if (st != CC_COLL_OK) {
            failed_call = "cc_coll_iallreduce";
            break;
        }
        double t_cpu = MPI_Wtime();
        const double t_test = dummy_compute(latency, o->test_calls, &req, &r, &k, &test_st);
        t_cpu = MPI_Wtime() - t_cpu;
        double t_wait = MPI_Wtime();
        st = nb_wait(b, &req, b->recv, count);
        t_wait = MPI_Wtime() - t_wait;
        const double t_stop = MPI_Wtime();
        nb_free(&req);
        if (st != CC_COLL_OK || test_st != CC_COLL_OK) {
            failed_call = st != CC_COLL_OK ? "cc_coll_wait" : "cc_coll_test";
            if (st == CC_COLL_OK) st = test_st;
            break;
        }
        if (i >= o->warmup) {
            overall += t_stop - t_start;
            cpu += t_cpu;
            test += t_test;
            init += t_init;
            wait += t_wait;
            kernel += k;
            runs += r;
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
    if (failed_call) report_failure(b, failed_call, method, count, st);

    int failed = failed_call != NULL, any_failed = 0;
    MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any_failed) return 1;

    /* Per rank, the averages over the timed iterations; then, as OSU does,
     * their mean over the ranks. */
    const double per = 1e6 / o->iters;
    const double alone_rate = alone_time > 0 ? (double)alone_runs / alone_time : 0.0;
    const double rate = kernel > 0 ? (double)runs / kernel : 0.0;
    double v[8] = {pure * per, overall * per, cpu * per, test * per, init * per, wait * per,
                   alone_rate > 0 ? 100.0 * rate / alone_rate : 0.0, wrong > 0 ? (double)wrong : 0.0};
    MPI_Allreduce(MPI_IN_PLACE, v, 8, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    for (int j = 0; j < 7; ++j) v[j] /= b->ranks;

    res->has_nb = 1;
    res->nb_pure_us = v[0];
    res->nb_overall_us = v[1];
    res->nb_test_us = v[3];
    res->nb_compute_us = v[2] - v[3]; /* OSU: the compute without the test calls */
    res->nb_init_us = v[4];
    res->nb_wait_us = v[5];
    res->nb_compute_rate_pct = v[6];
    /* OSU's overlap: max(0, 100 - 100 * (overall - compute) / pure). */
    res->nb_overlap_pct = v[0] > 0 ? 100.0 - 100.0 * (v[1] - res->nb_compute_us) / v[0] : NAN;
    if (res->nb_overlap_pct < 0) res->nb_overlap_pct = 0.0;
    res->nb_wrong = wrong < 0 ? -1 : (long long)v[7];
    return 0;
}
