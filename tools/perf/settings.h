/* The library's settings in effect, for the report: what -D, -E, -R and the
 * progress mode of -N amount to when the command line leaves them to the
 * communicator. */
#ifndef CC_COLL_PERF_SETTINGS_H
#define CC_COLL_PERF_SETTINGS_H

#include <stddef.h>

#include "options.h"

/* -D / -E when given, else the communicator's defaults. */
void effective_density_ef(const options_t *o, double *density, int *ef);
/* -R when given, else the communicator's CC_COLL_LOWRANK_RANK. */
int effective_lowrank_rank(const options_t *o);
/* "thread", "caller" or "unavailable"; setting receives CC_COLL_PROGRESS as
 * set (lower case). Needs MPI initialised. */
const char *effective_progress(char *setting, size_t cap);
/* "single", "funneled", "serialized", "multiple". */
const char *thread_level_name(int level);

#endif
