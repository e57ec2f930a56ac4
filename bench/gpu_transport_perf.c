/*
 * cc_coll_allreduce on device buffers against host buffers, in one run.
 * Public C API and the CUDA runtime API only. Meant for mpirun -np 2 on one
 * GPU (ranks share a node's devices round-robin); any rank count works.
 *
 * For f32 tensors of 1, 4, 16 and 64 MiB and each method (NONE, TOPK and
 * SKETCH at density 0.01, LOWRANK at rank 4 on the near-square view), SUM,
 * out of place, stream NULL: the median over the timed iterations of the
 * slowest rank's call time (MPI_Barrier, call, MPI_Wtime, MPI_MAX over the
 * ranks), for
 *   - host buffers;
 *   - device buffers with CC_COLL_CUDA_TRANSPORT=staged;
 *   - device buffers with CC_COLL_CUDA_TRANSPORT=direct, only when MPI is
 *     CUDA-aware (cc_coll_mpi_cuda_aware());
 * and the ratios device / host. Each mode has its own communicator (the
 * transport is read from the environment when a communicator is created),
 * so residuals and low-rank state are separate. Rank 0 prints a markdown
 * table and whether the target holds: NONE staged within 1.3x of host
 * buffers for every size >= 16 MiB. A call that fails is reported in its
 * cell; the run goes on.
 *
 *   mpirun -np 2 cc_coll_gpu_transport_perf [-n ITERS] [-w WARMUP]
 *
 * Exit status 0 (nothing measured) without a CUDA device.
 */
#define _POSIX_C_SOURCE 200809L /* setenv */

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>
#include <mpi.h>

#include "cc_coll.h"

#define NSIZES 4
#define NMETHODS 16 /* room for every method the library registers (ids are dense from 0) */
#define NMODES 3 /* host, staged, direct */

static const size_t kMiB[NSIZES] = {1, 4, 16, 64};
/* The methods the library registers, read from it: ids 0, 1, ... until
 * cc_coll_method_name returns NULL. */
static int method_count(void)
{
    int n = 0;
    while (n < NMETHODS && cc_coll_method_name((cc_coll_method_t)n) != NULL) ++n;
    return n;
}
static const double kTargetRatio = 1.3;

static int g_rank = 0;

static void die(const char *what, const char *detail)
{
    fprintf(stderr, "[rank %d] cc_coll_gpu_transport_perf: %s: %s\n", g_rank, what, detail);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

#define CHECK_CUDA(call)                                                                               \
    do {                                                                                               \
        cudaError_t e_ = (call);                                                                       \
        if (e_ != cudaSuccess) die(#call, cudaGetErrorString(e_));                                     \
    } while (0)

static cc_coll_params_t params_for(cc_coll_method_t m)
{
    cc_coll_params_t p;
    memset(&p, 0, sizeof p);
    p.mask = CC_COLL_PARAMS_FIELD_METHOD;
    p.method = m;
    if (m == CC_COLL_METHOD_TOPK || m == CC_COLL_METHOD_SKETCH) {
        p.mask |= CC_COLL_PARAMS_FIELD_DENSITY;
        p.density = 0.01;
    }
    if (m == CC_COLL_METHOD_LOWRANK) {
        /* rank 4 on the near-square view (SHAPE rows = cols = 0) */
        p.mask |= CC_COLL_PARAMS_FIELD_RANK | CC_COLL_PARAMS_FIELD_SHAPE;
        p.rank = 4;
        p.rows = 0;
        p.cols = 0;
    }
    return p;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median over `iters` timed calls (after `warmup`) of the slowest rank's
 * time; NAN and *status set when a call fails on any rank. */
static double time_calls(const void *send, void *recv, size_t n, int mi, cc_coll_comm_h h, int iters, int warmup,
                         cc_coll_status_t *status)
{
    const cc_coll_params_t p = params_for((cc_coll_method_t)mi);
    double *t = malloc((size_t)iters * sizeof *t);
    if (t == NULL) die("malloc", "out of memory");
    *status = CC_COLL_OK;
    for (int i = 0; i < warmup + iters; ++i) {
        MPI_Barrier(MPI_COMM_WORLD);
        const double t0 = MPI_Wtime();
        const cc_coll_status_t st = cc_coll_allreduce(send, recv, n, CC_COLL_F32, CC_COLL_SUM, &p, h, NULL);
        double dt = MPI_Wtime() - t0;
        int worst = (int)st;
        MPI_Allreduce(MPI_IN_PLACE, &worst, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        if (worst != CC_COLL_OK) {
            if (st != CC_COLL_OK)
                fprintf(stderr, "[rank %d] %s, %zu elements: %s (%s)\n", g_rank, cc_coll_method_name((cc_coll_method_t)mi), n,
                        cc_coll_status_string(st), cc_coll_last_error());
            *status = (cc_coll_status_t)worst;
            free(t);
            return NAN;
        }
        MPI_Allreduce(MPI_IN_PLACE, &dt, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (i >= warmup) t[i - warmup] = dt;
    }
    qsort(t, (size_t)iters, sizeof *t, cmp_double);
    const double med = iters % 2 ? t[iters / 2] : 0.5 * (t[iters / 2 - 1] + t[iters / 2]);
    free(t);
    return med;
}

static cc_coll_comm_h comm_with_transport(const char *transport)
{
    const char *old = getenv("CC_COLL_CUDA_TRANSPORT");
    char *saved = old ? strdup(old) : NULL;
    if (transport != NULL) setenv("CC_COLL_CUDA_TRANSPORT", transport, 1);
    cc_coll_comm_h h = NULL;
    const cc_coll_status_t st = cc_coll_comm_create(MPI_COMM_WORLD, &h);
    if (st != CC_COLL_OK) die("cc_coll_comm_create", cc_coll_last_error());
    if (saved != NULL) {
        setenv("CC_COLL_CUDA_TRANSPORT", saved, 1);
        free(saved);
    } else {
        unsetenv("CC_COLL_CUDA_TRANSPORT");
    }
    return h;
}

static void cell_time(char *out, size_t len, double s, cc_coll_status_t st)
{
    if (st != CC_COLL_OK) snprintf(out, len, "error: %s", cc_coll_status_string(st));
    else if (isnan(s)) snprintf(out, len, "-");
    else snprintf(out, len, "%.3f", s * 1e3);
}

static void cell_ratio(char *out, size_t len, double num, double den)
{
    if (isnan(num) || isnan(den) || den <= 0.0) snprintf(out, len, "-");
    else snprintf(out, len, "%.2f", num / den);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int iters = 20, warmup = 3;
    for (int a = 1; a < argc; ++a) {
        if (strcmp(argv[a], "-n") == 0 && a + 1 < argc) iters = atoi(argv[++a]);
        else if (strcmp(argv[a], "-w") == 0 && a + 1 < argc) warmup = atoi(argv[++a]);
        else {
            if (g_rank == 0) fprintf(stderr, "usage: %s [-n ITERS] [-w WARMUP]\n", argv[0]);
            MPI_Finalize();
            return 2;
        }
    }
    if (iters < 1 || warmup < 0) die("arguments", "-n must be >= 1 and -w >= 0");
    if (cc_coll_check_version() != CC_COLL_OK) die("cc_coll_check_version", cc_coll_last_error());

    const int ndev = cc_coll_cuda_device_count();
    if (ndev <= 0) {
        if (g_rank == 0) printf("cc_coll_gpu_transport_perf: no CUDA device, nothing to measure\n");
        MPI_Finalize();
        return 0;
    }
    MPI_Comm node;
    int local = 0;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &local);
    MPI_Comm_free(&node);
    CHECK_CUDA(cudaSetDevice(local % ndev));

    const int cuda_aware = cc_coll_mpi_cuda_aware();
    cc_coll_comm_h comms[NMODES] = {comm_with_transport(NULL), comm_with_transport("staged"),
                                    cuda_aware ? comm_with_transport("direct") : NULL};

    const size_t max_n = kMiB[NSIZES - 1] * ((size_t)1 << 20) / sizeof(float);
    float *hsend = malloc(max_n * sizeof(float)), *hrecv = malloc(max_n * sizeof(float));
    if (hsend == NULL || hrecv == NULL) die("malloc", "out of memory");
    uint64_t s = 0x9e3779b97f4a7c15ull * (uint64_t)(g_rank + 1);
    for (size_t i = 0; i < max_n; ++i) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        hsend[i] = (float)((double)(s >> 40) / (double)(1ull << 24) * 2.0 - 1.0);
    }
    float *dsend = NULL, *drecv = NULL;
    CHECK_CUDA(cudaMalloc((void **)&dsend, max_n * sizeof(float)));
    CHECK_CUDA(cudaMalloc((void **)&drecv, max_n * sizeof(float)));
    CHECK_CUDA(cudaMemcpy(dsend, hsend, max_n * sizeof(float), cudaMemcpyHostToDevice));

    const int nmethods = method_count();
    double t[NMETHODS][NSIZES][NMODES];
    cc_coll_status_t st[NMETHODS][NSIZES][NMODES];
    for (int mi = 0; mi < nmethods; ++mi)
        for (int si = 0; si < NSIZES; ++si) {
            const size_t n = kMiB[si] * ((size_t)1 << 20) / sizeof(float);
            for (int mode = 0; mode < NMODES; ++mode) {
                st[mi][si][mode] = CC_COLL_OK;
                t[mi][si][mode] = NAN;
                if (comms[mode] == NULL) continue;
                const void *send = mode == 0 ? (const void *)hsend : (const void *)dsend;
                void *recv = mode == 0 ? (void *)hrecv : (void *)drecv;
                t[mi][si][mode] = time_calls(send, recv, n, mi, comms[mode], iters, warmup, &st[mi][si][mode]);
            }
        }

    if (g_rank == 0) {
        struct cudaDeviceProp prop;
        CHECK_CUDA(cudaGetDeviceProperties(&prop, local % ndev));
        const char *chunk = getenv("CC_COLL_CUDA_STAGING_CHUNK");
        printf("## cc_coll_allreduce: device buffers against host buffers\n\n");
        printf("- %d ranks on %d device(s) (%s); MPI CUDA-aware: %s; CC_COLL_CUDA_STAGING_CHUNK: %s\n", size, ndev,
               prop.name, cuda_aware ? "yes" : "no (direct not measured)", chunk ? chunk : "default");
        printf("- f32, SUM, out of place, stream NULL; TOPK and SKETCH at density 0.01, LOWRANK at rank 4\n");
        printf("- time: median over %d calls (after %d warm-up calls) of the slowest rank's call time\n\n", iters,
               warmup);
        printf("| method | size | host (ms) | device staged (ms) | staged / host | device direct (ms) | direct / host |\n");
        printf("| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n");
        for (int mi = 0; mi < nmethods; ++mi)
            for (int si = 0; si < NSIZES; ++si) {
                char c[5][48];
                cell_time(c[0], sizeof c[0], t[mi][si][0], st[mi][si][0]);
                cell_time(c[1], sizeof c[1], t[mi][si][1], st[mi][si][1]);
                cell_ratio(c[2], sizeof c[2], t[mi][si][1], t[mi][si][0]);
                cell_time(c[3], sizeof c[3], t[mi][si][2], st[mi][si][2]);
                cell_ratio(c[4], sizeof c[4], t[mi][si][2], t[mi][si][0]);
                printf("| %s | %zu MiB | %s | %s | %s | %s | %s |\n", cc_coll_method_name((cc_coll_method_t)mi), kMiB[si], c[0], c[1], c[2],
                       c[3], c[4]);
            }
        int met = 1, measured = 0;
        for (int si = 0; si < NSIZES; ++si) {
            if (kMiB[si] < 16) continue;
            const double h = t[0][si][0], d = t[0][si][1];
            if (isnan(h) || isnan(d)) {
                met = 0;
                continue;
            }
            ++measured;
            if (d > kTargetRatio * h) met = 0;
        }
        printf("\nTarget: NONE on device buffers (staged) within %.1fx of host buffers for sizes >= 16 MiB: %s\n",
               kTargetRatio, measured == 0 ? "not measured" : met ? "met" : "NOT met");
        fflush(stdout);
    }

    for (int mode = 0; mode < NMODES; ++mode)
        if (comms[mode] != NULL) cc_coll_comm_destroy(comms[mode]);
    CHECK_CUDA(cudaFree(dsend));
    CHECK_CUDA(cudaFree(drecv));
    free(hsend);
    free(hrecv);
    MPI_Finalize();
    return 0;
}
