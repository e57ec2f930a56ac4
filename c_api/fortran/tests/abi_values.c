/* The C side of the Fortran ABI test (abi.F90): sizes and offsets of the
 * structs the cc_coll module mirrors with bind(C) types, and the values of
 * every enumerator it mirrors with parameters, as this compiler sees
 * include/cc_coll.h. abi.F90 lists the same quantities in the same order. */
#include <stddef.h>
#include <stdint.h>

#include "cc_coll.h"

int cc_coll_ftest_abi_values(int64_t *out, int capacity);

int cc_coll_ftest_abi_values(int64_t *out, int capacity)
{
    const int64_t v[] = {
        /* cc_coll_params_t */
        (int64_t)sizeof(cc_coll_params_t),
        (int64_t)offsetof(cc_coll_params_t, mask),
        (int64_t)offsetof(cc_coll_params_t, method),
        (int64_t)offsetof(cc_coll_params_t, density),
        (int64_t)offsetof(cc_coll_params_t, ef),
        (int64_t)offsetof(cc_coll_params_t, ef_key),
        (int64_t)offsetof(cc_coll_params_t, sparsifier),
        (int64_t)offsetof(cc_coll_params_t, zero_fraction),
        (int64_t)offsetof(cc_coll_params_t, load_factor),
        (int64_t)offsetof(cc_coll_params_t, seed),
        (int64_t)offsetof(cc_coll_params_t, rows),
        (int64_t)offsetof(cc_coll_params_t, cols),
        (int64_t)offsetof(cc_coll_params_t, rank),
        (int64_t)offsetof(cc_coll_params_t, warm_start),
        (int64_t)offsetof(cc_coll_params_t, start_iter),
        (int64_t)offsetof(cc_coll_params_t, min_compression_rate),
        (int64_t)sizeof(((cc_coll_params_t *)0)->method),
        (int64_t)sizeof(((cc_coll_params_t *)0)->sparsifier),
        (int64_t)sizeof(((cc_coll_params_t *)0)->rows),
        (int64_t)sizeof(((cc_coll_params_t *)0)->cols),
        (int64_t)sizeof(((cc_coll_params_t *)0)->rank),
        (int64_t)sizeof(((cc_coll_params_t *)0)->warm_start),
        (int64_t)sizeof(((cc_coll_params_t *)0)->start_iter),
        (int64_t)sizeof(((cc_coll_params_t *)0)->min_compression_rate),
        (int64_t)sizeof(cc_coll_params_t[2]),
        /* cc_coll_stats_t */
        (int64_t)sizeof(cc_coll_stats_t),
        (int64_t)offsetof(cc_coll_stats_t, mask),
        (int64_t)offsetof(cc_coll_stats_t, calls),
        (int64_t)offsetof(cc_coll_stats_t, bytes_uncompressed),
        (int64_t)offsetof(cc_coll_stats_t, bytes_wire),
        (int64_t)offsetof(cc_coll_stats_t, time_compress),
        (int64_t)offsetof(cc_coll_stats_t, time_communicate),
        (int64_t)offsetof(cc_coll_stats_t, time_decompress),
        (int64_t)offsetof(cc_coll_stats_t, sketch_elements),
        (int64_t)offsetof(cc_coll_stats_t, sketch_peeled),
        (int64_t)offsetof(cc_coll_stats_t, time_total),
        (int64_t)offsetof(cc_coll_stats_t, auto_calls),
        (int64_t)offsetof(cc_coll_stats_t, auto_lossy_calls),
        (int64_t)offsetof(cc_coll_stats_t, auto_predicted),
        (int64_t)offsetof(cc_coll_stats_t, auto_explored_calls),
        (int64_t)offsetof(cc_coll_stats_t, auto_measured),
        /* cc_coll_status_t */
        CC_COLL_OK, CC_COLL_ERR_NULL_BUFFER, CC_COLL_ERR_INVALID_DTYPE, CC_COLL_ERR_INVALID_OP,
        CC_COLL_ERR_INVALID_METHOD, CC_COLL_ERR_COUNT_OVERFLOW, CC_COLL_ERR_INVALID_COMM,
        CC_COLL_ERR_INVALID_PARAMS, CC_COLL_ERR_INVALID_ARG, CC_COLL_ERR_MPI, CC_COLL_ERR_MPI_NOT_INITIALIZED,
        CC_COLL_ERR_VERSION_MISMATCH, CC_COLL_ERR_CONFIG, CC_COLL_ERR_NOT_SUPPORTED, CC_COLL_ERR_NO_MEMORY,
        CC_COLL_ERR_INTERNAL, CC_COLL_ERR_EF_LIMIT, CC_COLL_ERR_MISMATCH, CC_COLL_ERR_CUDA,
        /* dtype, op */
        CC_COLL_F32, CC_COLL_F64, CC_COLL_F16, CC_COLL_BF16, CC_COLL_SUM, CC_COLL_AVG,
        /* every CC_COLL_METHOD_<NAME>, as the build lists them from the header */
#include "cc_coll_methods_abi_c.inc"
        /* sparsifier */
        CC_COLL_SPARSIFY_TOPK, CC_COLL_SPARSIFY_THRESHOLD,
        /* mask bits */
        (int64_t)CC_COLL_PARAMS_FIELD_METHOD, (int64_t)CC_COLL_PARAMS_FIELD_DENSITY,
        (int64_t)CC_COLL_PARAMS_FIELD_EF, (int64_t)CC_COLL_PARAMS_FIELD_EF_KEY,
        (int64_t)CC_COLL_PARAMS_FIELD_SPARSIFIER, (int64_t)CC_COLL_PARAMS_FIELD_ZERO_FRACTION,
        (int64_t)CC_COLL_PARAMS_FIELD_LOAD_FACTOR, (int64_t)CC_COLL_PARAMS_FIELD_SEED,
        (int64_t)CC_COLL_PARAMS_FIELD_SHAPE, (int64_t)CC_COLL_PARAMS_FIELD_RANK,
        (int64_t)CC_COLL_PARAMS_FIELD_WARM_START, (int64_t)CC_COLL_PARAMS_FIELD_START_ITER,
        (int64_t)CC_COLL_PARAMS_FIELD_MIN_COMPRESSION_RATE,
        (int64_t)CC_COLL_STATS_FIELD_CALLS, (int64_t)CC_COLL_STATS_FIELD_BYTES_UNCOMPRESSED,
        (int64_t)CC_COLL_STATS_FIELD_BYTES_WIRE, (int64_t)CC_COLL_STATS_FIELD_TIME_COMPRESS,
        (int64_t)CC_COLL_STATS_FIELD_TIME_COMMUNICATE, (int64_t)CC_COLL_STATS_FIELD_TIME_DECOMPRESS,
        (int64_t)CC_COLL_STATS_FIELD_SKETCH_ELEMENTS, (int64_t)CC_COLL_STATS_FIELD_SKETCH_PEELED,
        (int64_t)CC_COLL_STATS_FIELD_TIME_TOTAL, (int64_t)CC_COLL_STATS_FIELD_AUTO_CALLS,
        (int64_t)CC_COLL_STATS_FIELD_AUTO_LOSSY_CALLS, (int64_t)CC_COLL_STATS_FIELD_AUTO_PREDICTED,
        (int64_t)CC_COLL_STATS_FIELD_AUTO_EXPLORED_CALLS, (int64_t)CC_COLL_STATS_FIELD_AUTO_MEASURED,
        (int64_t)CC_COLL_BUILD_CUDA, (int64_t)CC_COLL_BUILD_FORTRAN,
        /* version of the header */
        CC_COLL_VERSION_MAJOR, CC_COLL_VERSION_MINOR, CC_COLL_VERSION_PATCH,
    };
    const int n = (int)(sizeof v / sizeof v[0]);
    for (int i = 0; i < n && i < capacity; ++i) out[i] = v[i];
    return n;
}
