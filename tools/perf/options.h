/* cc_coll_perf's command line: the options, their parsing and --help. */
#ifndef CC_COLL_PERF_OPTIONS_H
#define CC_COLL_PERF_OPTIONS_H

#include <stddef.h>

#include "cc_coll.h"

#define PROG "cc_coll_perf"
#define MAX_METHODS 64 /* more library methods than this are not listed */
#define EXIT_USAGE 2

enum { MODE_IN_PLACE = 0, MODE_OUT_OF_PLACE = 1, MODE_BOTH = 2 };
enum { DATA_INT = 0, DATA_NORMAL = 1 };

extern const char *const data_names[];  /* indexed by DATA_* */
extern const char *const dtype_names[]; /* indexed by cc_coll_dtype_t */
extern const char *const op_names[];    /* indexed by cc_coll_op_t */

typedef struct options {
    size_t min_bytes, max_bytes, factor;
    int iters, warmup, check;
    cc_coll_dtype_t dtype;
    cc_coll_op_t op;
    /* The library's methods in its order (cc_coll_method_at), and which of
     * them -m selected: want[i] for methods[i]. */
    cc_coll_method_t methods[MAX_METHODS];
    int want[MAX_METHODS];
    int n_methods;
    int has_density, has_ef, ef;
    double density;
    int inplace_mode;
    int has_rank, rank; /* -R: the matrix methods' target rank (params.rank) */
    int json, osu, quiet;
    int data;        /* DATA_INT or DATA_NORMAL */
    int nonblocking; /* -N: the OSU overlap measurement as well */
    int interleave;  /* -I: the methods' timed calls in turns, each on its own communicator */
    int block;       /* -B: a turn of -I is this many calls of a method in a row (default 1) */
    int test_calls;  /* -t: cc_coll_test / MPI_Test calls in the dummy compute */
} options_t;

void print_help(void);

/* Returns 0 to run, 1 for --help, EXIT_USAGE with msg filled for an error. */
int parse_options(int argc, char **argv, options_t *o, char *msg, size_t cap);

#endif
