/* A helper of the test harness (cmake/cc_coll_mpi_tests.cmake) for MPICH's
 * ch4:ucx device, Debian's MPICH: it waits for a message by calling UCX's
 * ucp_worker_progress in a loop and never gives up the processor. With more
 * ranks than free cores (more ranks than the machine has, or a machine busy
 * with other work) a waiting rank then spins through its whole time slice
 * while the rank it waits for is not running, and a test of many small
 * collectives takes minutes instead of seconds (mpi_staged_transport_np4 on
 * 2 cores: over 300 s, against 3 s with this). Preloaded into the ranks of
 * every test with more than one rank under MPICH's launcher, it gives up the
 * processor after a progress call that found nothing to do, as Open MPI does
 * by itself when oversubscribed (mpi_yield_when_idle): sched_yield, and
 * after 100 idle calls in a row a sleep of a microsecond (in practice the
 * timer slack, some 50 us), which lets a rank waiting on another
 * processor's queue run too. Where nothing calls ucp_worker_progress it
 * does nothing. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <sched.h>
#include <time.h>

typedef unsigned (*progress_fn)(void *worker);

static __thread unsigned idle_calls;

__attribute__((visibility("default"))) unsigned ucp_worker_progress(void *worker)
{
    static progress_fn next;
    progress_fn f = __atomic_load_n(&next, __ATOMIC_ACQUIRE);
    if (f == 0) {
        f = (progress_fn)dlsym(RTLD_NEXT, "ucp_worker_progress");
        __atomic_store_n(&next, f, __ATOMIC_RELEASE);
    }
    const unsigned events = f(worker);
    if (events != 0) {
        idle_calls = 0;
    } else if (++idle_calls < 100) {
        sched_yield();
    } else {
        const struct timespec us = {0, 1000};
        nanosleep(&us, 0);
    }
    return events;
}
