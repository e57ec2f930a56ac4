/* The benchmark's data: elements of every dtype as doubles, the reductions
 * MPI lacks for the 16-bit types, and the input values. */
#ifndef CC_COLL_PERF_DATA_H
#define CC_COLL_PERF_DATA_H

#include <stddef.h>

#include <mpi.h>

#include "cc_coll.h"

/* Element i of buf, of type dtype, as a double; and the reverse, rounded to
 * nearest even for the 16-bit types (as libcc_coll). */
double element_load(const void *buf, size_t i, cc_coll_dtype_t dtype);
void element_store(void *buf, size_t i, cc_coll_dtype_t dtype, double v);

/* AVG after the sum, as libcc_coll documents it: divide in the element type
 * (binary32 for the 16-bit types, then round). */
void divide_by_ranks(void *buf, size_t n, cc_coll_dtype_t dtype, int ranks);

/* MPI_Op functions summing binary16 / bfloat16 pairs in binary32. */
void sum_f16(void *in, void *inout, int *len, MPI_Datatype *type);
void sum_bf16(void *in, void *inout, int *len, MPI_Datatype *type);

/* -r int: the verifiable input of nccl-tests, ((rank + i) % 7) - 3. */
int input_value(int rank, size_t i);
/* -r normal: gradient-like input, approximately standard normal. */
double normal_value(int rank, size_t i);

#endif
