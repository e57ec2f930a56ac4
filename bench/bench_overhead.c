/* Per-call overhead of libcc_coll against plain MPI, where the data is too
 * small for anything but the call itself to matter:
 *
 *   8-byte call   MPI_Allreduce of 2 floats  vs  cc_coll_allreduce (NONE)
 *   54 tensors    54 MPI_Allreduce calls, one MPI_Allreduce of the packed
 *                 tensors, and one cc_coll_allreduce_group (NONE), of 54
 *                 tiny float tensors (16 .. 1024 elements)
 *
 * The variants alternate round by round (A B A B ...) so that a busy machine
 * slows them alike; each line gives the median over the rounds of the mean
 * time per call, and the ratio to plain MPI in the same rounds. The library's
 * own statistics give its overhead: time_total minus the three phases, per
 * call. Every result is checked (integer-valued data, exact sums); a wrong
 * one is exit status 1.
 *
 *   mpirun -np 2 cc_coll_bench_overhead [-n calls] [-g groups] [-r rounds]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "cc_coll.h"

#define NTENSORS 54

static int g_rank = 0, g_size = 1;

static void die(const char *what, cc_coll_status_t st)
{
    fprintf(stderr, "[rank %d] %s: %s (%s)\n", g_rank, what, cc_coll_status_string(st), cc_coll_last_error());
    MPI_Abort(MPI_COMM_WORLD, 2);
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static size_t tensor_count(int i) { return (size_t)16 << (i % 7); } /* 16 .. 1024 */

/* The library's overhead per call so far: time_total minus the phases. */
static double overhead_per_call(cc_coll_comm_h comm)
{
    cc_coll_stats_t s;
    memset(&s, 0, sizeof s);
    s.mask = CC_COLL_STATS_FIELD_CALLS | CC_COLL_STATS_FIELD_TIME_COMPRESS | CC_COLL_STATS_FIELD_TIME_COMMUNICATE |
             CC_COLL_STATS_FIELD_TIME_DECOMPRESS | CC_COLL_STATS_FIELD_TIME_TOTAL;
    cc_coll_status_t st = cc_coll_comm_get_stats(comm, &s);
    if (st != CC_COLL_OK) die("cc_coll_comm_get_stats", st);
    if (s.calls == 0) return 0.0;
    return (s.time_total - s.time_compress - s.time_communicate - s.time_decompress) / (double)s.calls;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    int calls = 20000, groups = 2000, rounds = 7;
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "-n") && i + 1 < argc) calls = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-g") && i + 1 < argc) groups = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-r") && i + 1 < argc) rounds = atoi(argv[++i]);
        else {
            if (g_rank == 0) fprintf(stderr, "usage: %s [-n calls] [-g groups] [-r rounds]\n", argv[0]);
            MPI_Finalize();
            return 2;
        }
    }
    if (calls < 1 || groups < 1 || rounds < 1 || rounds > 99) {
        if (g_rank == 0) fprintf(stderr, "-n, -g must be >= 1 and -r in [1, 99]\n");
        MPI_Finalize();
        return 2;
    }

    cc_coll_comm_h comm8 = NULL, commg = NULL;
    cc_coll_status_t st = cc_coll_comm_create(MPI_COMM_WORLD, &comm8);
    if (st != CC_COLL_OK || (st = cc_coll_comm_create(MPI_COMM_WORLD, &commg)) != CC_COLL_OK)
        die("cc_coll_comm_create", st);
    cc_coll_params_t none;
    memset(&none, 0, sizeof none);
    none.mask = CC_COLL_PARAMS_FIELD_METHOD;
    none.method = CC_COLL_METHOD_NONE;

    /* The 54 tensors, contiguous so that the packed MPI variant needs no copy. */
    size_t total = 0, off[NTENSORS];
    for (int i = 0; i < NTENSORS; ++i) {
        off[i] = total;
        total += tensor_count(i);
    }
    float *send = malloc(total * sizeof *send), *recv = malloc(total * sizeof *recv);
    if (send == NULL || recv == NULL) die("malloc", CC_COLL_ERR_NO_MEMORY);
    for (size_t j = 0; j < total; ++j) send[j] = (float)(g_rank + 1 + (int)(j % 5));
    const void *sendbufs[NTENSORS];
    void *recvbufs[NTENSORS];
    size_t counts[NTENSORS];
    cc_coll_dtype_t dtypes[NTENSORS];
    for (int i = 0; i < NTENSORS; ++i) {
        sendbufs[i] = send + off[i];
        recvbufs[i] = recv + off[i];
        counts[i] = tensor_count(i);
        dtypes[i] = CC_COLL_F32;
    }
    cc_coll_params_t group_params[NTENSORS];
    for (int i = 0; i < NTENSORS; ++i) group_params[i] = none;

    double t_mpi8[99], t_cc8[99], t_each[99], t_packed[99], t_group[99];
    float x[2] = {(float)(g_rank + 1), 2.0f}, y[2];
    int wrong = 0;
    const float ranks_sum = (float)g_size * (float)(g_size + 1) / 2.0f;
    for (int r = -1; r < rounds; ++r) { /* round -1 warms up */
        const int n8 = r < 0 ? calls / 10 + 1 : calls, ng = r < 0 ? groups / 10 + 1 : groups;
        double t0;
        MPI_Barrier(MPI_COMM_WORLD);
        t0 = MPI_Wtime();
        for (int k = 0; k < n8; ++k) MPI_Allreduce(x, y, 2, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        const double a = (MPI_Wtime() - t0) / n8;
        wrong += y[0] != ranks_sum || y[1] != 2.0f * (float)g_size;

        MPI_Barrier(MPI_COMM_WORLD);
        t0 = MPI_Wtime();
        for (int k = 0; k < n8 && st == CC_COLL_OK; ++k)
            st = cc_coll_allreduce(x, y, 2, CC_COLL_F32, CC_COLL_SUM, &none, comm8, NULL);
        const double b = (MPI_Wtime() - t0) / n8;
        if (st != CC_COLL_OK) die("cc_coll_allreduce", st);
        wrong += y[0] != ranks_sum || y[1] != 2.0f * (float)g_size;

        MPI_Barrier(MPI_COMM_WORLD);
        t0 = MPI_Wtime();
        for (int k = 0; k < ng; ++k)
            for (int i = 0; i < NTENSORS; ++i)
                MPI_Allreduce(sendbufs[i], recvbufs[i], (int)counts[i], MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        const double c = (MPI_Wtime() - t0) / ng;

        MPI_Barrier(MPI_COMM_WORLD);
        t0 = MPI_Wtime();
        for (int k = 0; k < ng; ++k) MPI_Allreduce(send, recv, (int)total, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        const double d = (MPI_Wtime() - t0) / ng;

        memset(recv, 0, total * sizeof *recv);
        MPI_Barrier(MPI_COMM_WORLD);
        t0 = MPI_Wtime();
        for (int k = 0; k < ng && st == CC_COLL_OK; ++k)
            st = cc_coll_allreduce_group(NTENSORS, sendbufs, recvbufs, counts, dtypes, CC_COLL_SUM, group_params,
                                         commg, NULL);
        const double e = (MPI_Wtime() - t0) / ng;
        if (st != CC_COLL_OK) die("cc_coll_allreduce_group", st);
        for (size_t j = 0; j < total; ++j)
            wrong += recv[j] != ranks_sum + (float)g_size * (float)(j % 5);
        if (r < 0) {
            cc_coll_comm_reset_stats(comm8);
            cc_coll_comm_reset_stats(commg);
            continue;
        }
        t_mpi8[r] = a, t_cc8[r] = b, t_each[r] = c, t_packed[r] = d, t_group[r] = e;
    }
    const double over8 = overhead_per_call(comm8), overg = overhead_per_call(commg);
    int all_wrong = 0;
    MPI_Allreduce(&wrong, &all_wrong, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);

    /* Ratios per round, then medians. */
    double r8[99], rg_each[99], rg_packed[99];
    for (int r = 0; r < rounds; ++r) {
        r8[r] = t_cc8[r] / t_mpi8[r];
        rg_each[r] = t_group[r] / t_each[r];
        rg_packed[r] = t_group[r] / t_packed[r];
    }
    if (g_rank == 0) {
        double load[3] = {0, 0, 0};
        FILE *f = fopen("/proc/loadavg", "r");
        if (f != NULL) {
            if (fscanf(f, "%lf %lf %lf", &load[0], &load[1], &load[2]) != 3) load[0] = load[1] = load[2] = 0;
            fclose(f);
        }
        const unsigned flags = cc_coll_build_flags();
        printf("# cc_coll_bench_overhead: %d ranks, %d rounds, %d 8-byte calls and %d groups per round; "
               "libcc_coll %s, CUDA build: %s, CUDA devices: %d; load average %.2f %.2f %.2f\n",
               g_size, rounds, calls, groups, cc_coll_version_string(), (flags & CC_COLL_BUILD_CUDA) ? "yes" : "no",
               cc_coll_cuda_device_count(), load[0], load[1], load[2]);
        printf("| call | time per call (µs, median of rounds) | ratio to plain MPI (median of rounds) | "
               "library overhead per call (µs, time_total - phases) |\n");
        printf("| --- | --- | --- | --- |\n");
        printf("| `MPI_Allreduce`, 2 floats | %.2f | 1 | |\n", 1e6 * median(t_mpi8, rounds));
        printf("| `cc_coll_allreduce` NONE, 2 floats | %.2f | %.2f | %.2f |\n", 1e6 * median(t_cc8, rounds),
               median(r8, rounds), 1e6 * over8);
        printf("| 54 × `MPI_Allreduce` (%zu floats in all) | %.2f | 1 | |\n", total, 1e6 * median(t_each, rounds));
        printf("| one `MPI_Allreduce` of the 54 packed | %.2f | %.2f | |\n", 1e6 * median(t_packed, rounds),
               median(t_packed, rounds) / median(t_each, rounds));
        printf("| `cc_coll_allreduce_group` NONE, 54 tensors | %.2f | %.2f (vs packed: %.2f) | %.2f |\n",
               1e6 * median(t_group, rounds), median(rg_each, rounds), median(rg_packed, rounds),
               1e6 * overg * NTENSORS);
        if (all_wrong) printf("# %d wrong results\n", all_wrong);
    }
    free(send);
    free(recv);
    cc_coll_comm_destroy(comm8);
    cc_coll_comm_destroy(commg);
    MPI_Finalize();
    return all_wrong ? 1 : 0;
}
