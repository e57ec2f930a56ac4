/* Prints the layout of the public structs as the C compiler sees it, one
 * "name value" pair per line; python/tests/test_package.py compares it with
 * the ctypes structures of the Python package.
 * SPDX-License-Identifier: BSD-3-Clause */
#include <stddef.h>
#include <stdio.h>

#include "cc_coll.h"

#define SIZE(T) printf("sizeof.%s %zu\n", #T, sizeof(T))
#define OFF(T, F)                                                      \
    printf("offsetof.%s.%s %zu\nsizeof.%s.%s %zu\n", #T, #F, offsetof(T, F), \
           #T, #F, sizeof(((T *)0)->F))

int main(void)
{
    SIZE(cc_coll_params_t);
    OFF(cc_coll_params_t, mask);
    OFF(cc_coll_params_t, method);
    OFF(cc_coll_params_t, density);
    OFF(cc_coll_params_t, ef);
    OFF(cc_coll_params_t, ef_key);
    OFF(cc_coll_params_t, sparsifier);
    OFF(cc_coll_params_t, zero_fraction);
    OFF(cc_coll_params_t, load_factor);
    OFF(cc_coll_params_t, seed);
    OFF(cc_coll_params_t, rows);
    OFF(cc_coll_params_t, cols);
    OFF(cc_coll_params_t, rank);
    OFF(cc_coll_params_t, warm_start);
    OFF(cc_coll_params_t, start_iter);
    OFF(cc_coll_params_t, min_compression_rate);
    SIZE(cc_coll_stats_t);
    OFF(cc_coll_stats_t, mask);
    OFF(cc_coll_stats_t, calls);
    OFF(cc_coll_stats_t, bytes_uncompressed);
    OFF(cc_coll_stats_t, bytes_wire);
    OFF(cc_coll_stats_t, time_compress);
    OFF(cc_coll_stats_t, time_communicate);
    OFF(cc_coll_stats_t, time_decompress);
    OFF(cc_coll_stats_t, sketch_elements);
    OFF(cc_coll_stats_t, sketch_peeled);
    OFF(cc_coll_stats_t, time_total);
    OFF(cc_coll_stats_t, auto_calls);
    OFF(cc_coll_stats_t, auto_lossy_calls);
    OFF(cc_coll_stats_t, auto_predicted);
    OFF(cc_coll_stats_t, auto_explored_calls);
    OFF(cc_coll_stats_t, auto_measured);
    SIZE(cc_coll_setting_t);
    OFF(cc_coll_setting_t, name);
    OFF(cc_coll_setting_t, env_var);
    OFF(cc_coll_setting_t, default_value);
    OFF(cc_coll_setting_t, value);
    OFF(cc_coll_setting_t, doc);
    OFF(cc_coll_setting_t, from_env);
    SIZE(cc_coll_method_t);
    SIZE(cc_coll_sparsifier_t);
    SIZE(cc_coll_dtype_t);
    SIZE(cc_coll_op_t);
    SIZE(cc_coll_status_t);
    SIZE(MPI_Fint);
    return 0;
}
