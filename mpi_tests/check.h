/* Failure reporting shared by the mpirun test programs: print the rank, the
 * running test's name, what failed and the library's message, then abort the
 * whole job (so one failing rank cannot leave the others hanging). */
#ifndef CC_COLL_MPI_TESTS_CHECK_H
#define CC_COLL_MPI_TESTS_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#include <mpi.h>

#include "cc_coll.h"

static int g_rank = 0;           /* this process's rank in MPI_COMM_WORLD */
static const char *g_test = "";  /* the test now running, for messages */

static void die(const char *fmt, const char *what, int status)
{
    fprintf(stderr, "[rank %d] FAIL%s%s: ", g_rank, g_test[0] ? " in " : "", g_test);
    fprintf(stderr, fmt, what);
    if (status != 0)
        fprintf(stderr, " -> %s (%s)", cc_coll_status_string((cc_coll_status_t)status), cc_coll_last_error());
    fprintf(stderr, "\n");
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

#define CHECK_CC(call)                                                                                 \
    do {                                                                                               \
        cc_coll_status_t st_ = (call);                                                                 \
        if (st_ != CC_COLL_OK) die("%s", #call, (int)st_);                                             \
    } while (0)

#define CHECK(cond, msg)                                                                               \
    do {                                                                                               \
        if (!(cond)) die("%s", msg, 0);                                                                \
    } while (0)

#endif
