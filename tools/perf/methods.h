/* The methods cc_coll_perf measures: plain MPI_Allreduce ("mpi") and the
 * library's methods as it lists them. Nothing here knows a method by its id:
 * what the tool does differently per method follows from the method's caps. */
#ifndef CC_COLL_PERF_METHODS_H
#define CC_COLL_PERF_METHODS_H

#include "cc_coll.h"
#include "options.h"

#define METHOD_MPI (-1) /* plain MPI_Allreduce, beside the cc_coll_method_t values */

/* The library's methods in its order into out (at most cap); returns how
 * many. */
int list_library_methods(cc_coll_method_t *out, int cap);

/* Slots, in measuring and reporting order: slot -1 is mpi, slot i >= 0 the
 * library's o->methods[i]. */
#define FIRST_SLOT (-1)
int slot_method(const options_t *o, int slot); /* METHOD_MPI or a cc_coll_method_t */
int slot_wanted(const options_t *o, int slot); /* mpi always; the others per -m */

/* "mpi" or the library's name of the method. */
const char *method_label(int method);

/* Exact methods (mpi and those without CC_COLL_METHOD_CAP_LOSSY) must
 * reproduce MPI_Allreduce bit for bit; the others are judged by their
 * relative error. */
int method_is_exact(int method);

/* Methods that pick another method per call (CC_COLL_METHOD_CAP_SELECTS):
 * their results report the share of calls compressed and the predicted
 * time. */
int method_selects(int method);

/* The params of one benchmark call of a library method: -D, -E as given;
 * -R for methods with a matrix view; the near-square shape for those and
 * for methods that select one. */
cc_coll_params_t method_params(const options_t *o, int method);

#endif
