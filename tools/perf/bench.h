/* One benchmark run's state and results, and the timed loop of the blocking
 * form (run.c). */
#ifndef CC_COLL_PERF_BENCH_H
#define CC_COLL_PERF_BENCH_H

#include <stddef.h>

#include <mpi.h>

#include "cc_coll.h"
#include "options.h"

typedef struct result {
    size_t bytes, count;
    int method; /* METHOD_MPI or a cc_coll_method_t */
    int in_place;
    double time_us, algbw, busbw, wire, ratio, rel_err, speedup;
    /* The timed calls' median, 90th percentile and slowest (each call the
     * slowest rank's time), beside time_us, their mean: where a call now
     * and then waits for the scheduler, the mean carries those waits and
     * the median the typical call. */
    double time_median_us, time_p90_us, time_max_us;
    /* The library's own phases per call (cc_coll stats: time_compress,
     * time_communicate, time_decompress over calls), the slowest rank's;
     * -1 for mpi. */
    double compress_us, communicate_us, decompress_us;
    /* A selecting method (CC_COLL_METHOD_CAP_SELECTS, as auto): the share of
     * calls compressed and the mean predicted time; -1 otherwise. */
    double auto_lossy, auto_predicted_us, auto_explored, auto_measured_us;
    long long wrong; /* -1: not checked */
    /* -N: the non-blocking form, OSU's quantities (microseconds, averaged
     * over the timed iterations on each rank, then over the ranks). */
    int has_nb;
    double nb_pure_us, nb_init_us, nb_compute_us, nb_test_us, nb_wait_us, nb_overall_us;
    double nb_overlap_pct, nb_compute_rate_pct;
    long long nb_wrong; /* -1: not checked */
} result_t;

typedef struct bench {
    const options_t *opt;
    int rank, ranks;
    size_t es;
    cc_coll_comm_h comm;
    MPI_Datatype mpi_type;
    MPI_Op mpi_op;
    unsigned char *input, *send, *recv, *ref; /* max size each */
    unsigned char *first;                     /* -N: the method's first timed blocking result */
    int first_lossy;                          /* -N, auto: whether that call ran the lossy method
                                                 (1), NONE (0); -1 for other methods */
    double *times;                            /* one per timed iteration */
    unsigned char expected[7][8];             /* exact result of element i: expected[i % 7] */
    int expected_exact;                       /* the partial sums are integers the dtype holds */
    int lowrank_rank;                         /* -R, else CC_COLL_LOWRANK_RANK: for the report */
    int thread_level;                         /* MPI's, from MPI_Query_thread */
    const char *progress;                     /* -N: "thread", "caller" or "unavailable" */
    char progress_setting[32];                /* -N: CC_COLL_PROGRESS as set */
} bench_t;

/* The exact results of the int input (b->expected, b->expected_exact). */
void compute_expected(bench_t *b);

/* Elements of buf that differ bit for bit from the exact result. */
long long count_wrong_vs_expected(const bench_t *b, const unsigned char *buf, size_t count);
/* Elements that differ bit for bit between x and y. */
long long count_differing(const unsigned char *x, const unsigned char *y, size_t count, size_t es);

/* A failed call on this rank, on stderr. */
void report_failure(const bench_t *b, const char *call, int method, size_t count, cc_coll_status_t st);

/* Warm-up, then -n timed calls of one method (METHOD_MPI or a library
 * method) on `count` elements; t_mpi_us is mpi's time for the speedup.
 * Collective. Returns 0, or 1 on every rank when a call failed on any. */
/* auto: the lossy calls since the communicator's statistics were reset;
 * -1 for other methods. */
int auto_lossy_calls(cc_coll_comm_h comm, int method);
int measure(bench_t *b, size_t count, int in_place, int method, double t_mpi_us, result_t *res);
/* -I: n methods (methods[0] METHOD_MPI), library method j on comms[j]:
 * every method's warm-up calls, then -n rounds of one timed call of each,
 * each after an MPI_Barrier; res[j] as measure() gives. Collective. */
int measure_interleaved(bench_t *b, size_t count, int in_place, int n, const int *methods,
                        const cc_coll_comm_h *comms, result_t *res);

#endif
