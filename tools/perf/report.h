/* cc_coll_perf's output on rank 0: the table (header, a row per result,
 * footer), the OSU format (-O) and the JSON document (-J). */
#ifndef CC_COLL_PERF_REPORT_H
#define CC_COLL_PERF_REPORT_H

#include <stddef.h>
#include <stdio.h>

#include "bench.h"

/* "4 KiB": bytes in the largest binary unit below them. */
void format_bytes(size_t bytes, char *out, size_t cap);

/* -N: which progress mode the library uses, and what decided it. */
void print_progress_line(FILE *f, const bench_t *b, const char *prefix);

void print_table_header(const bench_t *b, double density, int ef);
void print_table_row(const bench_t *b, const result_t *r);
void print_table_footer(const bench_t *b, const result_t *res, size_t n_res, long long total_wrong);
void print_osu(const bench_t *b, const result_t *res, size_t n_res);
void print_json(const bench_t *b, const result_t *res, size_t n_res, double density, int ef);

#endif
