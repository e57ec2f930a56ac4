/* cc_coll_perf's output: table, OSU format and JSON. */
#include "report.h"

#include <math.h>
#include <string.h>

#include "cc_coll.h"
#include "methods.h"
#include "settings.h"

void format_bytes(size_t bytes, char *out, size_t cap)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB"};
    double v = (double)bytes;
    int u = 0;
    for (; v >= 1024.0 && u < 3; ++u) v /= 1024.0;
    snprintf(out, cap, "%g %s", v, units[u]);
}

static int method_width(const options_t *o)
{
    int w = 6;
    for (int i = 0; i < o->n_methods; ++i) {
        int len = (int)strlen(cc_coll_method_name(o->methods[i]));
        if (o->want[i] && len > w) w = len;
    }
    return w;
}

void print_progress_line(FILE *f, const bench_t *b, const char *prefix)
{
    fprintf(f, "%snon-blocking: progress %s (CC_COLL_PROGRESS=%s, MPI thread level %s); %d test calls in the dummy "
           "compute\n",
           prefix, b->progress, b->progress_setting, thread_level_name(b->thread_level), b->opt->test_calls);
}

void print_table_header(const bench_t *b, double density, int ef)
{
    const options_t *o = b->opt;
    char lo[32], hi[32];
    format_bytes(o->min_bytes, lo, sizeof lo);
    format_bytes(o->max_bytes, hi, sizeof hi);
    printf("# " PROG " (libcc_coll %s): allreduce, %d ranks, %s %s, %s .. %s x%zu, %d iterations, %d warm-up, "
           "check %d\n",
           cc_coll_version_string(), b->ranks, dtype_names[o->dtype], op_names[o->op], lo, hi, o->factor, o->iters,
           o->warmup, o->check);
    printf("# topk density %g%s, error feedback %d%s, lowrank rank %d%s, input data %s\n", density,
           o->has_density ? "" : " (CC_COLL_DENSITY)", ef, o->has_ef ? "" : " (CC_COLL_EF)", b->lowrank_rank,
           o->has_rank ? "" : " (CC_COLL_LOWRANK_RANK)", data_names[o->data]);
    if (o->interleave)
        printf("# interleaved (-I): the methods' warm-up calls, then their timed calls, in turns of %d (round i starts with method i mod the "
               "methods), each after a barrier, each library method on its own communicator\n",
               o->block);
    if (o->nonblocking) {
        print_progress_line(stdout, b, "# ");
        printf("# time: blocking call, average over iterations of the slowest rank; the non-blocking columns: "
               "averages over iterations, then over ranks (OSU)\n#\n");
        printf("# %11s %11s %5s %*s %7s   %10s %7s %7s   %10s %9s %11s %9s %10s %11s %10s %8s %8s\n", "size(B)",
               "count", "dtype", method_width(o), "method", "inplace", "time(us)", "speedup", "#wrong", "pure(us)",
               "init(us)", "compute(us)", "test(us)", "wait(us)", "overall(us)", "overlap(%)", "crate(%)",
               "#nbwrong");
        fflush(stdout);
        return;
    }
    printf("# time: average over iterations of the slowest rank; algbw, busbw on the uncompressed size\n#\n");
    printf("# %11s %11s %5s %*s %7s   %10s %11s %11s   %12s %8s %10s %7s %7s\n", "size(B)", "count", "dtype",
           method_width(o), "method", "inplace", "time(us)", "algbw(GB/s)", "busbw(GB/s)", "wire(B)", "ratio",
           "relerr", "#wrong", "speedup");
    fflush(stdout);
}

void print_table_row(const bench_t *b, const result_t *r)
{
    char wrong[24] = "-";
    if (r->wrong >= 0) snprintf(wrong, sizeof wrong, "%lld", r->wrong);
    if (r->has_nb) {
        char nb_wrong[24] = "-";
        if (r->nb_wrong >= 0) snprintf(nb_wrong, sizeof nb_wrong, "%lld", r->nb_wrong);
        printf("  %11zu %11zu %5s %*s %7s   %10.2f %7.2f %7s   %10.2f %9.2f %11.2f %9.2f %10.2f %11.2f %10.2f %8.1f "
               "%8s\n",
               r->bytes, r->count, dtype_names[b->opt->dtype], method_width(b->opt), method_label(r->method),
               r->in_place ? "yes" : "no", r->time_us, r->speedup, wrong, r->nb_pure_us, r->nb_init_us,
               r->nb_compute_us, r->nb_test_us, r->nb_wait_us, r->nb_overall_us, r->nb_overlap_pct,
               r->nb_compute_rate_pct, nb_wrong);
        fflush(stdout);
        return;
    }
    printf("  %11zu %11zu %5s %*s %7s   %10.2f %11.3f %11.3f   %12.0f %8.2f %10.2e %7s %7.2f\n", r->bytes, r->count,
           dtype_names[b->opt->dtype], method_width(b->opt), method_label(r->method), r->in_place ? "yes" : "no",
           r->time_us, r->algbw, r->busbw, r->wire, r->ratio, r->rel_err, wrong, r->speedup);
    fflush(stdout);
}

void print_table_footer(const bench_t *b, const result_t *res, size_t n_res, long long total_wrong)
{
    printf("#\n# Wrong elements (mpi, none%s): %lld %s\n", b->opt->nonblocking ? "; non-blocking: every method" : "",
           total_wrong, total_wrong ? "FAILED" : "OK");
    printf("# Avg bus bandwidth (GB/s) :");
    for (int slot = FIRST_SLOT; slot < b->opt->n_methods; ++slot) {
        const int m = slot_method(b->opt, slot);
        double sum = 0.0;
        size_t n = 0;
        for (size_t i = 0; i < n_res; ++i)
            if (res[i].method == m) {
                sum += res[i].busbw;
                ++n;
            }
        if (n) printf(" %s %.3f", method_label(m), sum / (double)n);
    }
    printf("\n");
    if (!b->opt->nonblocking) return;
    printf("# Avg overlap (%%)          :");
    for (int slot = FIRST_SLOT; slot < b->opt->n_methods; ++slot) {
        const int m = slot_method(b->opt, slot);
        double sum = 0.0;
        size_t n = 0;
        for (size_t i = 0; i < n_res; ++i)
            if (res[i].method == m && res[i].has_nb) {
                sum += res[i].nb_overlap_pct;
                ++n;
            }
        if (n) printf(" %s %.1f", method_label(m), sum / (double)n);
    }
    printf("\n");
}

void print_osu(const bench_t *b, const result_t *res, size_t n_res)
{
    const options_t *o = b->opt;
    printf("# OSU MPI Allreduce Latency Test (" PROG ", libcc_coll %s)\n", cc_coll_version_string());
    printf("# Datatype: %s, op: %s, ranks: %d, iterations: %d, warm-up: %d\n", dtype_names[o->dtype],
           op_names[o->op], b->ranks, o->iters, o->warmup);
    printf("# Avg Latency: average over iterations of the slowest rank's time per call\n");
    for (int mode = 0; mode < 2; ++mode) {
        for (int slot = FIRST_SLOT; slot < o->n_methods; ++slot) {
            const int m = slot_method(o, slot);
            int header = 0;
            for (size_t i = 0; i < n_res; ++i) {
                if (res[i].method != m || res[i].in_place != (mode == 0)) continue;
                if (!header) {
                    printf("#\n# method: %s\n# in-place: %s\n", method_label(m), mode == 0 ? "yes" : "no");
                    printf("# Size       Avg Latency(us)\n");
                    header = 1;
                }
                printf("%-10zu%18.2f\n", res[i].bytes, res[i].time_us);
            }
        }
    }
    if (!o->nonblocking) return;
    /* osu_iallreduce's full output (-f): the columns of print_stats_nbc. */
    printf("#\n# OSU MPI Non-blocking Allreduce Latency Test (" PROG ", libcc_coll %s)\n", cc_coll_version_string());
    print_progress_line(stdout, b, "# ");
    printf("# Times: averages over iterations, then over ranks; Compute excludes MPI_Test\n");
    printf("# Overall = Coll. Init + Compute + MPI_Test + MPI_Wait\n");
    for (int mode = 0; mode < 2; ++mode) {
        for (int slot = FIRST_SLOT; slot < o->n_methods; ++slot) {
            const int m = slot_method(o, slot);
            int header = 0;
            for (size_t i = 0; i < n_res; ++i) {
                const result_t *r = &res[i];
                if (r->method != m || r->in_place != (mode == 0) || !r->has_nb) continue;
                if (!header) {
                    printf("#\n# method: %s (%s)\n# in-place: %s\n", method_label(m),
                           m == METHOD_MPI ? "MPI_Iallreduce, MPI_Test, MPI_Wait"
                                           : "cc_coll_iallreduce, cc_coll_test, cc_coll_wait",
                           mode == 0 ? "yes" : "no");
                    printf("%-10s%18s%18s%18s%18s%18s%18s%18s\n", "# Size", "Overall(us)", "Compute(us)",
                           "Coll. Init(us)", "MPI_Test(us)", "MPI_Wait(us)", "Pure Comm.(us)", "Overlap(%)");
                    header = 1;
                }
                printf("%-10zu%18.2f%18.2f%18.2f%18.2f%18.2f%18.2f%18.2f\n", r->bytes, r->nb_overall_us,
                       r->nb_compute_us, r->nb_init_us, r->nb_test_us, r->nb_wait_us, r->nb_pure_us, r->nb_overlap_pct);
            }
        }
    }
}

static void json_number(double v)
{
    if (isfinite(v)) printf("%.6g", v);
    else printf("null");
}

void print_json(const bench_t *b, const result_t *res, size_t n_res, double density, int ef)
{
    const options_t *o = b->opt;
    printf("{\"tool\":\"" PROG "\",\"version\":\"%s\",\"ranks\":%d,\"dtype\":\"%s\",\"op\":\"%s\","
           "\"data\":\"%s\",\"iters\":%d,\"warmup\":%d,\"density\":",
           cc_coll_version_string(), b->ranks, dtype_names[o->dtype], op_names[o->op], data_names[o->data], o->iters,
           o->warmup);
    json_number(density);
    printf(",\"ef\":%d,\"lowrank_rank\":%d,\"interleaved\":%d,\"block\":%d", ef, b->lowrank_rank, o->interleave, o->block);
    if (o->nonblocking)
        printf(",\"nonblocking\":{\"method\":\"osu_iallreduce\",\"progress\":\"%s\",\"progress_setting\":\"%s\","
               "\"thread_level\":\"%s\",\"test_calls\":%d}",
               b->progress, b->progress_setting, thread_level_name(b->thread_level), o->test_calls);
    printf(",\"results\":[");
    for (size_t i = 0; i < n_res; ++i) {
        const result_t *r = &res[i];
        printf("%s\n  {\"bytes\":%zu,\"count\":%zu,\"method\":\"%s\",\"in_place\":%s,\"time_us\":", i ? "," : "",
               r->bytes, r->count, method_label(r->method), r->in_place ? "true" : "false");
        json_number(r->time_us);
        printf(",\"time_median_us\":");
        json_number(r->time_median_us);
        printf(",\"time_p90_us\":");
        json_number(r->time_p90_us);
        printf(",\"time_max_us\":");
        json_number(r->time_max_us);
        printf(",\"algbw_GBps\":");
        json_number(r->algbw);
        printf(",\"busbw_GBps\":");
        json_number(r->busbw);
        printf(",\"wire_bytes\":");
        json_number(r->wire);
        printf(",\"ratio\":");
        json_number(r->ratio);
        printf(",\"rel_err\":");
        json_number(r->rel_err);
        if (r->wrong >= 0) printf(",\"wrong\":%lld", r->wrong);
        else printf(",\"wrong\":null");
        printf(",\"speedup\":");
        json_number(r->speedup);
        if (r->method != METHOD_MPI) {
            printf(",\"compress_us\":");
            json_number(r->compress_us);
            printf(",\"communicate_us\":");
            json_number(r->communicate_us);
            printf(",\"decompress_us\":");
            json_number(r->decompress_us);
        }
        if (method_selects(r->method) && r->auto_lossy >= 0) {
            printf(",\"auto_lossy_share\":");
            json_number(r->auto_lossy);
            printf(",\"auto_predicted_us\":");
            json_number(r->auto_predicted_us);
            printf(",\"auto_explored_share\":");
            json_number(r->auto_explored);
            printf(",\"auto_measured_us\":");
            json_number(r->auto_measured_us);
        }
        if (r->has_nb) {
            const double v[] = {r->nb_pure_us,    r->nb_init_us,    r->nb_compute_us,  r->nb_test_us,
                                r->nb_wait_us,    r->nb_overall_us, r->nb_overlap_pct, r->nb_compute_rate_pct};
            static const char *const k[] = {"pure_us", "init_us",  "compute_us",  "test_us",
                                             "wait_us", "overall_us", "overlap_pct", "compute_rate_pct"};
            printf(",\"nonblocking\":{");
            for (size_t j = 0; j < sizeof v / sizeof v[0]; ++j) {
                printf("%s\"%s\":", j ? "," : "", k[j]);
                json_number(v[j]);
            }
            if (r->nb_wrong >= 0) printf(",\"wrong\":%lld}", r->nb_wrong);
            else printf(",\"wrong\":null}");
        }
        printf("}");
    }
    printf("\n]}\n");
}
