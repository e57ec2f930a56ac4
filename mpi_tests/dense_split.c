/*
 * Open MPI: a non-blocking dense sum of 64 KiB or more (method NONE's
 * cc_coll_iallreduce, which the PyTorch hooks post for every dense bucket)
 * runs as a reduce-scatter (MPI_Ialltoallv) and an allgather
 * (MPI_Iallgatherv), not as Open MPI's MPI_Iallreduce, whose default for an
 * in-place buffer or fewer than 4 ranks is a binomial tree (the whole buffer
 * up to rank 0 and back; src/transport/mpi_transport.cc).
 *
 * Seen through MPI's profiling interface (this program defines
 * MPI_Iallreduce and MPI_Ialltoallv): a request of 1001 elements still calls
 * MPI_Iallreduce (so the interposition works), one of 100003 elements
 * (F32, F64, BF16; SUM and AVG; in place and out of place) calls
 * MPI_Ialltoallv and no MPI_Iallreduce. Its sum is bit-identical to the
 * binomial tree's (rank v adds rank v + 2^(r-1)'s partial sum in round r:
 * libnbc's order, and MPI_Allreduce's on two ranks) computed here from the
 * gathered inputs; AVG is within a rounding of that sum / P; every rank holds
 * the same bits.
 *
 * Any failure prints the case and calls MPI_Abort.
 */
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "cc_coll.h"
#include "check.h"
#include "test_util.h"

static atomic_long g_big_iallreduce, g_watched_iallreduce, g_ialltoallv;
static atomic_int g_watch_count; /* MPI_Iallreduce calls of this count are the payload's */

int MPI_Iallreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                   MPI_Request *request)
{
    int size = 0;
    PMPI_Type_size(datatype, &size);
    if ((long)count * size >= 64 * 1024) atomic_fetch_add(&g_big_iallreduce, 1);
    if (count == atomic_load(&g_watch_count)) atomic_fetch_add(&g_watched_iallreduce, 1);
    return PMPI_Iallreduce(sendbuf, recvbuf, count, datatype, op, comm, request);
}

int MPI_Ialltoallv(const void *sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
                   void *recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm,
                   MPI_Request *request)
{
    atomic_fetch_add(&g_ialltoallv, 1);
    return PMPI_Ialltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm,
                           request);
}



/* The value of element i of rank r's input: F32/F64 random in [-1, 1),
 * BF16 small integers (exact in every order). */
static double value(cc_coll_dtype_t d, int r, size_t i)
{
    uint64_t s = 0x9e3779b97f4a7c15ull * (uint64_t)(r + 1) + i * 0x632be59bd9b4e019ull;
    if (d == CC_COLL_BF16) return (double)((int)(rng_next(&s) % 17) - 8);
    return rng_uniform(&s) * 2.0 - 1.0;
}

static void fill_input(cc_coll_dtype_t d, int r, size_t n, void *out)
{
    for (size_t i = 0; i < n; ++i) {
        const double v = value(d, r, i);
        if (d == CC_COLL_F32) ((float *)out)[i] = (float)v;
        else if (d == CC_COLL_F64) ((double *)out)[i] = v;
        else ((uint16_t *)out)[i] = encode16((float)v, 7, 8);
    }
}

/* Element i of the binomial tree's sum, as a double (exact for BF16's
 * small integers; F32 summed in float). */
static double tree_sum(cc_coll_dtype_t d, size_t i)
{
    double part[64];
    float partf[64];
    for (int r = 0; r < g_size; ++r) {
        part[r] = value(d, r, i);
        partf[r] = (float)part[r];
    }
    for (int step = 1; step < g_size; step *= 2)
        for (int v = 0; v + step < g_size; v += 2 * step) {
            part[v] = part[v] + part[v + step];
            partf[v] = partf[v] + partf[v + step];
        }
    return d == CC_COLL_F32 ? (double)partf[0] : part[0];
}

static double get(cc_coll_dtype_t d, const void *buf, size_t i)
{
    if (d == CC_COLL_F32) return ((const float *)buf)[i];
    if (d == CC_COLL_F64) return ((const double *)buf)[i];
    return decode16(((const uint16_t *)buf)[i], 7, 8);
}

static void run(cc_coll_comm_h h, cc_coll_dtype_t d, const char *dname, size_t n, cc_coll_op_t op, int in_place)
{
    char what[160];
    snprintf(what, sizeof what, "%s n=%zu %s %s", dname, n, op == CC_COLL_SUM ? "SUM" : "AVG",
             in_place ? "in place" : "out of place");
    const size_t es = cc_coll_dtype_size(d);
    void *send = xmalloc(n * es), *recv = xmalloc(n * es), *first = xmalloc(n * es);
    fill_input(d, g_rank, n, send);
    if (in_place) memcpy(recv, send, n * es);
    atomic_store(&g_watch_count, (int)n);
    const long big0 = atomic_load(&g_big_iallreduce), watched0 = atomic_load(&g_watched_iallreduce),
               a2a0 = atomic_load(&g_ialltoallv);
    cc_coll_params_t p;
    memset(&p, 0, sizeof p);
    p.mask = CC_COLL_PARAMS_FIELD_METHOD;
    p.method = CC_COLL_METHOD_NONE;
    cc_coll_request_h req = NULL;
    CHECK_CC(cc_coll_iallreduce(in_place ? recv : send, recv, n, d, op, &p, h, NULL, &req));
    CHECK_CC(cc_coll_wait(req));
    CHECK_CC(cc_coll_request_free(req));
    const long big = atomic_load(&g_big_iallreduce) - big0, watched = atomic_load(&g_watched_iallreduce) - watched0,
               a2a = atomic_load(&g_ialltoallv) - a2a0;
    if (n * es < 64 * 1024) {
        if (watched != 1 || a2a != 0) die("%s: expected one MPI_Iallreduce and no MPI_Ialltoallv", what, 0);
    } else {
        if (big != 0 || watched != 0) die("%s: a large request still calls MPI_Iallreduce", what, 0);
        if (a2a != 1) die("%s: expected one MPI_Ialltoallv (the reduce-scatter)", what, 0);
    }
    /* AVG: within a rounding of the dtype */
    const double tol = d == CC_COLL_F32 ? 1e-6 : d == CC_COLL_F64 ? 1e-14 : 1.0 / 128;
    for (size_t i = 0; i < n; ++i) {
        const double ref = tree_sum(d, i), got = get(d, recv, i);
        if (op == CC_COLL_SUM ? got != ref : fabs(got - ref / g_size) > tol * (1.0 + fabs(ref))) {
            fprintf(stderr, "element %zu: %.17g, expected %.17g\n", i, got, op == CC_COLL_SUM ? ref : ref / g_size);
            die("%s: wrong result", what, 0);
        }
    }
    memcpy(first, recv, n * es);
    MPI_Bcast(first, (int)(n * es), MPI_BYTE, 0, MPI_COMM_WORLD);
    if (memcmp(first, recv, n * es) != 0) die("%s: the ranks hold different bits", what, 0);
    free(send);
    free(recv);
    free(first);
}

int main(int argc, char **argv)
{
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    CHECK(g_size <= 64, "at most 64 ranks");
    g_test = "dense_split";
    cc_coll_comm_h h = NULL;
    CHECK_CC(cc_coll_comm_create(MPI_COMM_WORLD, &h));
    const cc_coll_dtype_t dtypes[] = {CC_COLL_F32, CC_COLL_F64, CC_COLL_BF16};
    const char *const names[] = {"F32", "F64", "BF16"};
    for (int di = 0; di < 3; ++di)
        for (int op = 0; op < 2; ++op)
            for (int in_place = 0; in_place < 2; ++in_place) {
                run(h, dtypes[di], names[di], 1001, (cc_coll_op_t)op, in_place);
                run(h, dtypes[di], names[di], 100003, (cc_coll_op_t)op, in_place);
            }
    CHECK_CC(cc_coll_comm_destroy(h));
    if (g_rank == 0) printf("mpi_dense_split passed on %d ranks\n", g_size);
    MPI_Finalize();
    return 0;
}
