// Argument checks shared by the entry points, and the resolution of a
// call's params against the communicator's configuration.
#pragma once

#include <cstddef>
#include <cstring>
#include <type_traits>

#include "cc_coll.h"
#include "core/config.hpp"

namespace cc_coll::detail {

// What a call runs with after defaults, environment and params are merged.
struct CallParams {
    cc_coll_method_t method = CC_COLL_METHOD_NONE;
    double density = 0.01;
    bool ef = true;
    bool has_ef_key = false;
    std::uint64_t ef_key = 0;
    cc_coll_sparsifier_t sparsifier = CC_COLL_SPARSIFY_TOPK;
    double zero_fraction = 0.80;
    double load_factor = 0.77;
    std::uint64_t seed = 0;
    // LOWRANK
    // Without a shape, a LOWRANK allreduce tensor is 1-D and sent densely;
    // point-to-point views it near-square.
    bool has_shape = false;
    std::uint64_t rows = 0;  // with has_shape: >= 1, or 0 (with cols 0): near-square
    std::uint64_t cols = 0;  // with has_shape: 0 = count / rows
    int rank = 1;
    bool warm_start = true;
    std::uint64_t start_iter = 0;
    double min_compression_rate = 2.0;
    // TOPK (from the configuration only; part of the agreement)
    TopkAlgorithm topk_algorithm = TopkAlgorithm::Auto;
    std::uint64_t pipeline_bytes = 0;  // TOPK, HALF, QUANT, ONEBIT (configuration only; agreed): part bytes, 0 = off
    // Each method's word of options from its settings (Config::method_options).
    std::uint32_t method_options[kMaxMethods] = {};
};

// Whether two calls' params are the same in every field (AUTO's cache of
// its decisions). A field added to CallParams must be added here: the size
// check below fails until it is.
inline bool same_params(const CallParams &a, const CallParams &b)
{
#if defined(__x86_64__) || defined(__aarch64__)
    static_assert(sizeof(CallParams) == 192, "a CallParams field is missing from same_params");
#endif
    return a.method == b.method && a.density == b.density && a.ef == b.ef && a.has_ef_key == b.has_ef_key &&
           a.ef_key == b.ef_key && a.sparsifier == b.sparsifier && a.zero_fraction == b.zero_fraction &&
           a.load_factor == b.load_factor && a.seed == b.seed && a.has_shape == b.has_shape && a.rows == b.rows &&
           a.cols == b.cols && a.rank == b.rank && a.warm_start == b.warm_start && a.start_iter == b.start_iter &&
           a.min_compression_rate == b.min_compression_rate && a.topk_algorithm == b.topk_algorithm &&
           a.pipeline_bytes == b.pipeline_bytes &&
           std::memcmp(a.method_options, b.method_options, sizeof a.method_options) == 0;
}

// The int a caller stored in an enum-typed argument or params field. A C
// caller may put any int there, and loading a value outside the enum's range
// through the C++ enum type is undefined behaviour, so entry points read the
// bytes as an int and validate that before they use the enum.
template <typename E>
inline int enum_value(const E &e)
{
    static_assert(std::is_enum_v<E> && sizeof(E) == sizeof(int), "a C enum of int size");
    int v;
    std::memcpy(&v, &e, sizeof v);
    return v;
}

// Fields a caller may set in cc_coll_params_t.mask.
constexpr std::uint64_t kKnownParamsFields = CC_COLL_PARAMS_FIELD_METHOD | CC_COLL_PARAMS_FIELD_DENSITY |
                                             CC_COLL_PARAMS_FIELD_EF | CC_COLL_PARAMS_FIELD_EF_KEY |
                                             CC_COLL_PARAMS_FIELD_SPARSIFIER | CC_COLL_PARAMS_FIELD_ZERO_FRACTION |
                                             CC_COLL_PARAMS_FIELD_LOAD_FACTOR | CC_COLL_PARAMS_FIELD_SEED |
                                             CC_COLL_PARAMS_FIELD_SHAPE | CC_COLL_PARAMS_FIELD_RANK |
                                             CC_COLL_PARAMS_FIELD_WARM_START | CC_COLL_PARAMS_FIELD_START_ITER |
                                             CC_COLL_PARAMS_FIELD_MIN_COMPRESSION_RATE;

// params may be NULL. Errors: CC_COLL_ERR_INVALID_PARAMS (unknown mask bits),
// CC_COLL_ERR_INVALID_METHOD, CC_COLL_ERR_INVALID_ARG (density outside
// (0, 1] or NaN; ef or warm_start other than 0 or 1; rows == 0 with cols != 0; rank
// outside [1, 65536]; min_compression_rate below 1 or not finite).
cc_coll_status_t resolve_params(const cc_coll_params_t *params, const Config &config, CallParams *out);

// Checks a reduction's element arguments in this order: dtype, op, count
// against MPI's count type, NULL buffers (allowed only when count == 0), and
// buffers that overlap without being identical. `fn` names the entry point
// in messages.
cc_coll_status_t validate_reduction_args(const char *fn, const void *sendbuf, const void *recvbuf,
                                         std::size_t count, int dtype, int op);

}  // namespace cc_coll::detail
