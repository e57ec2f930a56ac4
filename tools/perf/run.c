/* The timed loop of the blocking form: one method, one size, one mode. */
#include "bench.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data.h"
#include "methods.h"
#include "order.h"

/* The exact allreduce result depends on i % 7 only: sum the integers, then
 * apply AVG as the baseline does. */
void compute_expected(bench_t *b)
{
    unsigned char tmp[7 * 8];
    for (int j = 0; j < 7; ++j) {
        long sum = 0;
        for (int r = 0; r < b->ranks; ++r) sum += input_value(r, (size_t)j);
        element_store(tmp, (size_t)j, b->opt->dtype, (double)sum);
    }
    if (b->opt->op == CC_COLL_AVG) divide_by_ranks(tmp, 7, b->opt->dtype, b->ranks);
    for (int j = 0; j < 7; ++j) memcpy(b->expected[j], tmp + (size_t)j * b->es, b->es);
    /* |partial sums| <= 3P must be integers the type holds exactly. */
    const double exact_limit[] = {16777216.0, 9007199254740992.0, 2048.0, 256.0};
    b->expected_exact = b->opt->data == DATA_INT && 3.0 * b->ranks <= exact_limit[b->opt->dtype];
}

long long count_wrong_vs_expected(const bench_t *b, const unsigned char *buf, size_t count)
{
    long long wrong = 0;
    for (size_t i = 0, j = 0; i < count; ++i, j = j == 6 ? 0 : j + 1)
        wrong += memcmp(buf + i * b->es, b->expected[j], b->es) != 0;
    return wrong;
}

long long count_differing(const unsigned char *x, const unsigned char *y, size_t count, size_t es)
{
    long long wrong = 0;
    for (size_t i = 0; i < count; ++i) wrong += memcmp(x + i * es, y + i * es, es) != 0;
    return wrong;
}

static cc_coll_status_t allreduce_once(bench_t *b, cc_coll_comm_h comm, int method, const cc_coll_params_t *params,
                                       const void *sendbuf, void *recvbuf, size_t count)
{
    const options_t *o = b->opt;
    if (method != METHOD_MPI) return cc_coll_allreduce(sendbuf, recvbuf, count, o->dtype, o->op, params, comm, NULL);
    /* MPI_COMM_WORLD's default handler aborts on an MPI error. */
    MPI_Allreduce(sendbuf == recvbuf ? MPI_IN_PLACE : sendbuf, recvbuf, (int)count, b->mpi_type, b->mpi_op,
                  MPI_COMM_WORLD);
    if (o->op == CC_COLL_AVG) divide_by_ranks(recvbuf, count, o->dtype, b->ranks);
    return CC_COLL_OK;
}

/* Local part of the checks on the check call's result: acc[0] += squared
 * error, acc[1] += squared reference, acc[2] += wrong elements. The mpi
 * baseline's result becomes the reference of the other methods. */
static void check_first_result(bench_t *b, int method, size_t count, double acc[3])
{
    const cc_coll_dtype_t dt = b->opt->dtype;
    if (method == METHOD_MPI) {
        memcpy(b->ref, b->recv, count * b->es);
        if (b->opt->check && b->expected_exact) acc[2] = (double)count_wrong_vs_expected(b, b->recv, count);
        return; /* relerr 0 by definition */
    }
    for (size_t i = 0; i < count; ++i) {
        const double x = element_load(b->recv, i, dt), r = element_load(b->ref, i, dt);
        acc[0] += (x - r) * (x - r);
        acc[1] += r * r;
    }
    if (b->opt->check && method_is_exact(method)) acc[2] = (double)count_differing(b->recv, b->ref, count, b->es);
}

void report_failure(const bench_t *b, const char *call, int method, size_t count, cc_coll_status_t st)
{
    fprintf(stderr, PROG ": [rank %d] %s (method %s, count %zu) failed: %s: %s\n", b->rank, call,
            method_label(method), count, cc_coll_status_string(st), cc_coll_last_error());
}

static int compare_double(const void *x, const void *y)
{
    const double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* The q-quantile (0..1) of n > 0 sorted values, the nearest rank's. */
static double sorted_quantile(const double *sorted, int n, double q)
{
    int k = (int)ceil(q * n) - 1;
    if (k < 0) k = 0;
    if (k > n - 1) k = n - 1;
    return sorted[k];
}

/* One method's measurement at one size and mode: its library communicator,
 * its timed calls' times and the checks of its first result. */
typedef struct timing {
    int method;
    cc_coll_params_t params;
    cc_coll_comm_h comm;
    double *times; /* -n */
    double acc[3];
    const char *failed_call;
    cc_coll_status_t st;
} timing_t;

static void timing_init(bench_t *b, timing_t *t, int method, cc_coll_comm_h comm, double *times)
{
    memset(t, 0, sizeof *t);
    t->method = method;
    t->params = method_params(b->opt, method);
    t->comm = comm;
    t->times = times;
}

/* For a method that selects (auto): how many of the communicator's calls
 * since its statistics were reset ran the lossy method; -1 for other
 * methods or when the statistics cannot be read. */
int auto_lossy_calls(cc_coll_comm_h comm, int method)
{
    if (!method_selects(method)) return -1;
    cc_coll_stats_t stats;
    memset(&stats, 0, sizeof stats);
    stats.mask = CC_COLL_STATS_FIELD_AUTO_LOSSY_CALLS;
    if (cc_coll_comm_get_stats(comm, &stats) != CC_COLL_OK) return -1;
    return (int)stats.auto_lossy_calls;
}

/* One call of the measurement: fresh input (in place), then the call, timed
 * into *seconds when given; a failure is kept in t. Returns 0 when it ran. */
static int timing_call(bench_t *b, timing_t *t, size_t count, int in_place, double *seconds)
{
    const void *sendbuf = in_place ? (const void *)b->recv : (const void *)b->send;
    if (in_place) memcpy(b->recv, b->input, count * b->es); /* outside the timed region */
    const double t0 = MPI_Wtime();
    t->st = allreduce_once(b, t->comm, t->method, &t->params, sendbuf, b->recv, count);
    if (seconds) *seconds = MPI_Wtime() - t0;
    if (t->st == CC_COLL_OK) return 0;
    t->failed_call = "cc_coll_allreduce";
    return 1;
}

/* The warm-up's start: fresh error feedback. */
static void warm_up_start(timing_t *t)
{
    if (t->method != METHOD_MPI && (t->st = cc_coll_ef_reset_all(t->comm)) != CC_COLL_OK)
        t->failed_call = "cc_coll_ef_reset_all";
}

/* The warm-up's end, after its calls: the check call, one untimed call
 * from a reset residual (the one-step error), whose result the checks read
 * and -N compares with; then fresh counters for the timed calls, which go
 * on from the check call's residual. So no timed call creates a residual:
 * at 256 MiB that zeroes a quarter GiB of new pages, which took from 0.1 to
 * 0.7 s in one call (docs/perf/auto.md). */
static void warm_up_finish(bench_t *b, timing_t *t, size_t count, int in_place)
{
    const int lib = t->method != METHOD_MPI;
    if (lib && !t->failed_call) {
        if ((t->st = cc_coll_ef_reset_all(t->comm)) != CC_COLL_OK) t->failed_call = "cc_coll_ef_reset_all";
        else if ((t->st = cc_coll_comm_reset_stats(t->comm)) != CC_COLL_OK) t->failed_call = "cc_coll_comm_reset_stats";
    }
    if (!t->failed_call && timing_call(b, t, count, in_place, NULL) == 0) {
        check_first_result(b, t->method, count, t->acc);
        if (b->first) { /* -N compares its check call with this one */
            memcpy(b->first, b->recv, count * b->es);
            b->first_lossy = auto_lossy_calls(t->comm, t->method);
        }
    }
    if (lib && !t->failed_call && (t->st = cc_coll_comm_reset_stats(t->comm)) != CC_COLL_OK)
        t->failed_call = "cc_coll_comm_reset_stats";
}

/* The warm-up calls (in a row) from fresh error feedback, then the check
 * call. */
static void timing_warm_up(bench_t *b, timing_t *t, size_t count, int in_place)
{
    warm_up_start(t);
    for (int w = 0; w < b->opt->warmup && !t->failed_call; ++w) timing_call(b, t, count, in_place, NULL);
    warm_up_finish(b, t, count, in_place);
}

/* Timed call `it`. A rank whose earlier call failed skips it (and every
 * rank learns of the failure in timing_finish). */
static void timed_call(bench_t *b, timing_t *t, size_t count, int in_place, int it)
{
    if (!t->failed_call) timing_call(b, t, count, in_place, &t->times[it]);
}

/* The statistics and the result of a finished measurement. Collective.
 * Returns 0, or 1 on every rank when a call failed on any. */
static int timing_finish(bench_t *b, timing_t *t, size_t count, int in_place, double t_mpi_us, result_t *res)
{
    const options_t *o = b->opt;
    const size_t bytes = count * b->es;
    const int method = t->method;
    const char *failed_call = t->failed_call;
    cc_coll_status_t st = t->st;
    double *acc = t->acc;
    if (failed_call) report_failure(b, failed_call, method, count, st);

    cc_coll_stats_t stats;
    memset(&stats, 0, sizeof stats);
    stats.mask = CC_COLL_STATS_FIELD_CALLS | CC_COLL_STATS_FIELD_BYTES_WIRE | CC_COLL_STATS_FIELD_TIME_COMPRESS |
                 CC_COLL_STATS_FIELD_TIME_COMMUNICATE | CC_COLL_STATS_FIELD_TIME_DECOMPRESS |
                 CC_COLL_STATS_FIELD_AUTO_CALLS | CC_COLL_STATS_FIELD_AUTO_LOSSY_CALLS |
                 CC_COLL_STATS_FIELD_AUTO_PREDICTED | CC_COLL_STATS_FIELD_AUTO_EXPLORED_CALLS |
                 CC_COLL_STATS_FIELD_AUTO_MEASURED;
    if (!failed_call && method != METHOD_MPI && (st = cc_coll_comm_get_stats(t->comm, &stats)) != CC_COLL_OK)
        report_failure(b, failed_call = "cc_coll_comm_get_stats", method, count, st);

    int failed = failed_call != NULL, any_failed = 0;
    MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any_failed) return 1;

    MPI_Allreduce(MPI_IN_PLACE, t->times, o->iters, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, acc, 3, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    double phases[3] = {-1.0, -1.0, -1.0};
    if (method != METHOD_MPI && stats.calls > 0) {
        phases[0] = stats.time_compress / (double)stats.calls * 1e6;
        phases[1] = stats.time_communicate / (double)stats.calls * 1e6;
        phases[2] = stats.time_decompress / (double)stats.calls * 1e6;
    }
    MPI_Allreduce(MPI_IN_PLACE, phases, 3, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    double sum = 0.0;
    for (int it = 0; it < o->iters; ++it) sum += t->times[it];
    qsort(t->times, (size_t)o->iters, sizeof *t->times, compare_double);
    /* The median of an even count is the mean of its middle two. */
    const int mid = o->iters / 2;
    res->time_median_us =
        (o->iters % 2 ? t->times[mid] : 0.5 * (t->times[mid - 1] + t->times[mid])) * 1e6;
    res->time_p90_us = sorted_quantile(t->times, o->iters, 0.9) * 1e6;
    res->time_max_us = t->times[o->iters - 1] * 1e6;

    res->bytes = bytes;
    res->count = count;
    res->method = method;
    res->in_place = in_place;
    res->time_us = sum / o->iters * 1e6;
    res->algbw = res->time_us > 0 ? (double)bytes / (res->time_us * 1e-6) / 1e9 : 0.0;
    res->busbw = res->algbw * 2.0 * (b->ranks - 1) / b->ranks;
    res->wire = method == METHOD_MPI ? (double)bytes
                                     : (stats.calls ? (double)stats.bytes_wire / (double)stats.calls : 0.0);
    res->ratio = res->wire > 0 ? (double)bytes / res->wire : NAN;
    res->rel_err = acc[1] > 0 ? sqrt(acc[0] / acc[1]) : sqrt(acc[0]);
    res->wrong = (o->check && method_is_exact(method) && (method != METHOD_MPI || b->expected_exact))
                     ? (long long)acc[2]
                     : -1;
    res->speedup = method == METHOD_MPI ? 1.0 : t_mpi_us / res->time_us;
    res->compress_us = phases[0];
    /* auto: the share of calls the cost model compressed, and its mean
     * predicted time (rank 0's; every rank holds the same model). */
    res->auto_lossy = stats.auto_calls ? (double)stats.auto_lossy_calls / (double)stats.auto_calls : -1.0;
    res->auto_predicted_us = stats.auto_calls ? stats.auto_predicted / (double)stats.auto_calls * 1e6 : -1.0;
    res->auto_explored = stats.auto_calls ? (double)stats.auto_explored_calls / (double)stats.auto_calls : -1.0;
    res->auto_measured_us = stats.auto_calls ? stats.auto_measured / (double)stats.auto_calls * 1e6 : -1.0;
    res->communicate_us = phases[1];
    res->decompress_us = phases[2];
    return 0;
}

/* Warm-up, then `iters` timed calls of one method on `count` elements.
 * Collective. Returns 0, or 1 on every rank when a call failed on any. */
int measure(bench_t *b, size_t count, int in_place, int method, double t_mpi_us, result_t *res)
{
    timing_t t;
    timing_init(b, &t, method, b->comm, b->times);
    timing_warm_up(b, &t, count, in_place);
    MPI_Barrier(MPI_COMM_WORLD);
    for (int it = 0; it < b->opt->iters; ++it) timed_call(b, &t, count, in_place, it);
    return timing_finish(b, &t, count, in_place, t_mpi_us, res);
}

/* -I: `total` calls of each of the n methods in rounds (of `block` calls
 * per method, -B), each round running the methods in the order of row r of
 * a balanced Latin square, so that within the rounds every method follows
 * every other equally often (not from one round to the next: the last of
 * a round and the first of the next are always the same pairs; on a shaped link one method's call drains the bucket the
 * next one meets; on one node it leaves the caches to the next); each call
 * after a barrier, and timed when `timed`. */
static void run_rounds(bench_t *b, timing_t *t, int n, size_t count, int in_place, int total, int timed)
{
    const int block = b->opt->block > 0 ? b->opt->block : 1;
    for (int it = 0, round = 0; it < total; it += block, ++round) {
        const int calls = total - it < block ? total - it : block;
        for (int s = 0; s < n; ++s) {
            timing_t *m = &t[round_order(n, round, s)];
            for (int c = 0; c < calls; ++c) {
                MPI_Barrier(MPI_COMM_WORLD);
                if (timed) timed_call(b, m, count, in_place, it + c);
                else if (!m->failed_call) timing_call(b, m, count, in_place, NULL);
            }
        }
    }
}

int measure_interleaved(bench_t *b, size_t count, int in_place, int n, const int *methods,
                        const cc_coll_comm_h *comms, result_t *res)
{
    const int iters = b->opt->iters;
    timing_t *t = calloc((size_t)n, sizeof *t);
    double *times = calloc((size_t)n * (size_t)iters, sizeof *times);
    int failed = t == NULL || times == NULL, any_failed = 0;
    MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any_failed) {
        if (failed) fprintf(stderr, PROG ": [rank %d] out of memory for the interleaved timings\n", b->rank);
        free(t);
        free(times);
        return 1;
    }
    /* The warm-up calls run in rounds as the timed calls do, so that a
     * method that learns from its calls (auto) learns under the conditions
     * its timed calls meet: on a shaped link a call that follows other
     * methods' cheaper calls finds the shaper's bucket fuller than a call
     * in a row does (docs/perf/auto.md). */
    for (int j = 0; j < n; ++j) {
        timing_init(b, &t[j], methods[j], comms[j], times + (size_t)j * (size_t)iters);
        warm_up_start(&t[j]);
    }
    run_rounds(b, t, n, count, in_place, b->opt->warmup, 0);
    for (int j = 0; j < n; ++j) warm_up_finish(b, &t[j], count, in_place);
    run_rounds(b, t, n, count, in_place, iters, 1);
    /* The reference of relerr and the speedup is mpi's, which runs first. */
    int rc = 0;
    double t_mpi_us = 0.0;
    for (int j = 0; j < n && rc == 0; ++j) {
        rc = timing_finish(b, &t[j], count, in_place, t_mpi_us, &res[j]);
        if (rc == 0 && methods[j] == METHOD_MPI) t_mpi_us = res[j].time_us;
    }
    free(t);
    free(times);
    return rc;
}
