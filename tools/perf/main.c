/* cc_coll_perf: allreduce benchmark of libcc_coll in the nccl-tests / OSU
 * dialect.
 *
 *   mpirun -np 4 cc_coll_perf -b 4K -e 64M -f 2 [-d f32] [-o sum] [-m topk]
 *
 * For every size from -b to -e (times -f), every in-place mode and every
 * method, rank 0 prints one line: time, algbw and busbw on the uncompressed
 * size, bytes on the wire, compression ratio, relative error against
 * MPI_Allreduce, wrong elements and the speedup over MPI_Allreduce.
 * Plain MPI_Allreduce ("mpi") is always measured first: it is the reference
 * for the error columns and the baseline of the speedup. `-J` prints one JSON
 * document instead, `-O` the OSU latency format. `--help` defines every
 * column.
 *
 * `-N` adds the overlap of the non-blocking form, measured as OSU's
 * osu_iallreduce does: the pure communication time of iallreduce + wait, then
 * iallreduce, a dummy compute of that length on the caller's thread (with
 * `-t` test calls inside it) and wait; overlap % = max(0, 100 * (1 -
 * (overall - compute) / pure)). MPI is then initialised with
 * MPI_THREAD_MULTIPLE when the MPI library provides it.
 *
 * As in nccl-tests, inputs are small integers (((rank + i) % 7) - 3), so the
 * exact sum is known and an exact method must match it bit for bit.
 *
 * The command line is options.c, the measured methods methods.c, the timed
 * loop run.c (and overlap.c for -N), the output report.c; this file sets up
 * the buffers and runs every size, mode and method.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "cc_coll.h"
#include "bench.h"
#include "data.h"
#include "methods.h"
#include "options.h"
#include "overlap.h"
#include "report.h"
#include "settings.h"

/* Element counts from -b to -e, times -f; sizes that round to the same
 * count are measured once. Returns the number of counts. */
static size_t make_counts(const options_t *o, size_t es, size_t **out)
{
    size_t n = 0, cap = 64;
    size_t *counts = malloc(cap * sizeof *counts);
    for (size_t bytes = o->min_bytes; counts;) {
        size_t count = bytes / es ? bytes / es : 1;
        if (n == 0 || counts[n - 1] != count) counts[n++] = count;
        if (bytes > o->max_bytes / o->factor) break;
        bytes *= o->factor;
        if (n == cap) {
            size_t *grown = realloc(counts, 2 * cap * sizeof *counts);
            if (!grown) free(counts);
            counts = grown;
            cap *= 2;
        }
    }
    *out = counts;
    return counts ? n : 0;
}

int main(int argc, char **argv)
{
    /* The command line first (it needs no MPI): -N asks for
     * MPI_THREAD_MULTIPLE, which the progress thread needs; the blocking
     * benchmark keeps MPI_Init. */
    options_t opt;
    char msg[512] = "";
    const int parsed = parse_options(argc, argv, &opt, msg, sizeof msg);
    int provided = MPI_THREAD_SINGLE;
    if (parsed == 0 && opt.nonblocking) MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    else MPI_Init(&argc, &argv);
    bench_t b;
    memset(&b, 0, sizeof b);
    MPI_Comm_rank(MPI_COMM_WORLD, &b.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &b.ranks);
    MPI_Query_thread(&b.thread_level);

    if (parsed != 0) {
        if (b.rank == 0) {
            if (parsed == 1) print_help();
            else fprintf(stderr, PROG ": %s (try --help)\n", msg);
        }
        MPI_Finalize();
        return parsed == 1 ? 0 : EXIT_USAGE;
    }
    b.opt = &opt;
    b.es = cc_coll_dtype_size(opt.dtype);
    const int progress = b.rank == 0 && !opt.quiet && !opt.json;

    /* Setup: every rank must agree that it worked before anyone goes on. */
    int rc = 0, ok = 1, all_ok = 0;
    cc_coll_status_t st = cc_coll_comm_create(MPI_COMM_WORLD, &b.comm);
    if (st != CC_COLL_OK) {
        fprintf(stderr, PROG ": [rank %d] cc_coll_comm_create failed: %s: %s\n", b.rank, cc_coll_status_string(st),
                cc_coll_last_error());
        b.comm = NULL;
        ok = 0;
    }
    /* -I: a library communicator per method slot (mpi's slot keeps b.comm). */
    cc_coll_comm_h slot_comms[MAX_METHODS + 1];
    for (int slot = 0; slot <= MAX_METHODS; ++slot) slot_comms[slot] = b.comm;
    for (int slot = 0; opt.interleave && ok && slot < opt.n_methods; ++slot) {
        if (!slot_wanted(&opt, slot)) continue;
        slot_comms[slot + 1] = NULL;
        if ((st = cc_coll_comm_create(MPI_COMM_WORLD, &slot_comms[slot + 1])) != CC_COLL_OK) {
            fprintf(stderr, PROG ": [rank %d] cc_coll_comm_create (-I) failed: %s: %s\n", b.rank,
                    cc_coll_status_string(st), cc_coll_last_error());
            slot_comms[slot + 1] = b.comm;
            ok = 0;
        }
    }
    size_t *counts = NULL;
    const size_t n_counts = make_counts(&opt, b.es, &counts);
    const size_t max_bytes = n_counts ? counts[n_counts - 1] * b.es : 0;
    b.input = malloc(max_bytes);
    b.send = malloc(max_bytes);
    b.recv = malloc(max_bytes);
    b.ref = malloc(max_bytes);
    if (opt.nonblocking) b.first = malloc(max_bytes);
    b.first_lossy = -1;
    b.times = malloc((size_t)opt.iters * sizeof *b.times);
    const int n_modes = opt.inplace_mode == MODE_BOTH ? 2 : 1;
    int n_wanted = 1;
    for (int i = 0; i < opt.n_methods; ++i) n_wanted += opt.want[i];
    const size_t max_results = n_counts * (size_t)n_modes * (size_t)n_wanted;
    result_t *results = calloc(max_results ? max_results : 1, sizeof *results);
    if (!counts || !b.input || !b.send || !b.recv || !b.ref || (opt.nonblocking && !b.first) || !b.times ||
        !results) {
        fprintf(stderr, PROG ": [rank %d] out of memory for %d buffers of %zu bytes\n", b.rank,
                opt.nonblocking ? 5 : 4, max_bytes);
        ok = 0;
    }
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all_ok) {
        rc = 1;
        goto done;
    }

    b.mpi_type = MPI_FLOAT;
    b.mpi_op = MPI_SUM;
    if (opt.dtype == CC_COLL_F64) b.mpi_type = MPI_DOUBLE;
    if (opt.dtype == CC_COLL_F16 || opt.dtype == CC_COLL_BF16) {
        b.mpi_type = MPI_UINT16_T;
        MPI_Op_create(opt.dtype == CC_COLL_F16 ? sum_f16 : sum_bf16, 1, &b.mpi_op);
    }
    compute_expected(&b);

    double density = 0.0;
    int ef = 0;
    effective_density_ef(&opt, &density, &ef);
    b.lowrank_rank = effective_lowrank_rank(&opt);
    if (opt.nonblocking) {
        b.progress = effective_progress(b.progress_setting, sizeof b.progress_setting);
        compute_init();
        if (b.rank == 0 && opt.json && !opt.quiet) print_progress_line(stderr, &b, PROG ": ");
    }
    if (b.rank == 0 && !opt.json && !opt.osu) {
        print_table_header(&b, density, ef);
        if (opt.check && opt.data == DATA_NORMAL)
            printf("# note: -r normal: #wrong of mpi is not checked (no exact reference)\n");
        else if (opt.check && !b.expected_exact)
            printf("# note: sums of %d ranks are not exact in %s; #wrong of mpi is not checked\n", b.ranks,
                   dtype_names[opt.dtype]);
    }

    size_t n_res = 0;
    long long total_wrong = 0;
    int sendbuf_modified = 0;
    for (size_t s = 0; s < n_counts && rc == 0; ++s) {
        const size_t count = counts[s], bytes = count * b.es;
        if (progress) {
            char human[32];
            format_bytes(bytes, human, sizeof human);
            fprintf(stderr, "[%zu/%zu] %s (%zu x %s) ...\n", s + 1, n_counts, human, count, dtype_names[opt.dtype]);
        }
        for (size_t i = 0; i < count; ++i)
            element_store(b.input, i, opt.dtype,
                  opt.data == DATA_INT ? (double)input_value(b.rank, i) : normal_value(b.rank, i));
        memcpy(b.send, b.input, bytes);

        for (int mode = 0; mode < 2 && rc == 0; ++mode) {
            const int in_place = mode == 0;
            if ((opt.inplace_mode == MODE_IN_PLACE && !in_place) || (opt.inplace_mode == MODE_OUT_OF_PLACE && in_place))
                continue;
            double t_mpi_us = 0.0;
            /* -I: every method timed in turns first, then reported below. */
            int interleaved = 0;
            if (opt.interleave) {
                int methods[MAX_METHODS + 1];
                cc_coll_comm_h comms[MAX_METHODS + 1];
                for (int slot = FIRST_SLOT; slot < opt.n_methods; ++slot) {
                    if (!slot_wanted(&opt, slot)) continue;
                    methods[interleaved] = slot_method(&opt, slot);
                    comms[interleaved++] = slot_comms[slot + 1];
                }
                if (measure_interleaved(&b, count, in_place, interleaved, methods, comms, &results[n_res]) != 0) {
                    rc = 1;
                    break;
                }
            }
            for (int slot = FIRST_SLOT; slot < opt.n_methods && rc == 0; ++slot) {
                if (!slot_wanted(&opt, slot)) continue;
                const int m = slot_method(&opt, slot);
                result_t *r = &results[n_res];
                if (!opt.interleave && (measure(&b, count, in_place, m, t_mpi_us, r) != 0 ||
                                        (opt.nonblocking && measure_nb(&b, count, in_place, m, r) != 0))) {
                    rc = 1;
                    break;
                }
                ++n_res;
                if (m == METHOD_MPI) t_mpi_us = r->time_us;
                if (r->wrong > 0) total_wrong += r->wrong;
                if (r->has_nb && r->nb_wrong > 0) total_wrong += r->nb_wrong;
                if (b.rank == 0 && !opt.json && !opt.osu) print_table_row(&b, r);

                /* An out-of-place call must leave sendbuf alone. */
                if (!in_place && opt.check) {
                    int changed = memcmp(b.send, b.input, bytes) != 0, any_changed = 0;
                    MPI_Allreduce(&changed, &any_changed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
                    if (any_changed) {
                        if (b.rank == 0)
                            fprintf(stderr, PROG ": method %s modified sendbuf (out of place, %zu bytes)\n",
                                    method_label(m), bytes);
                        memcpy(b.send, b.input, bytes);
                        sendbuf_modified = 1;
                    }
                }
            }
        }
    }

    if (b.rank == 0) {
        if (opt.json) print_json(&b, results, n_res, density, ef);
        else if (opt.osu) print_osu(&b, results, n_res);
        else print_table_footer(&b, results, n_res, total_wrong);
        fflush(stdout);
    }
    if (rc == 0 && (total_wrong > 0 || sendbuf_modified)) rc = 1;
    if (b.mpi_op != MPI_SUM && b.mpi_op != MPI_OP_NULL) MPI_Op_free(&b.mpi_op);

done:
    for (int slot = 1; slot <= MAX_METHODS; ++slot)
        if (slot_comms[slot] != b.comm) cc_coll_comm_destroy(slot_comms[slot]);
    if (b.comm) cc_coll_comm_destroy(b.comm);
    free(counts);
    free(b.input);
    free(b.send);
    free(b.recv);
    free(b.ref);
    free(b.first);
    free(b.times);
    free(results);
    MPI_Finalize();
    return rc;
}
