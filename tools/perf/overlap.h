/* -N: the overlap of the non-blocking form, measured as OSU's
 * osu_iallreduce does (see cc_coll_perf --help). */
#ifndef CC_COLL_PERF_OVERLAP_H
#define CC_COLL_PERF_OVERLAP_H

#include <stddef.h>

#include "bench.h"

/* Sets up the dummy compute's arrays; once, before measure_nb. */
void compute_init(void);

/* The non-blocking form of `method` (METHOD_MPI: MPI_Iallreduce), after
 * measure() ran the blocking form on the same buffers; fills res's nb_
 * fields. Collective. Returns 0, or 1 on every rank when a call failed on
 * any. */
int measure_nb(bench_t *b, size_t count, int in_place, int method, result_t *res);

#endif
