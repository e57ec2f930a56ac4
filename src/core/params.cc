#include <algorithm>
#include <iterator>
#include "core/params.hpp"

#include <climits>
#include <cstdint>
#include <string>

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "core/method.hpp"

namespace cc_coll::detail {

cc_coll_status_t resolve_params(const cc_coll_params_t *params, const Config &config, CallParams *out)
{
    CallParams p;
    p.method = config.method;
    std::copy(std::begin(config.method_options), std::end(config.method_options), std::begin(p.method_options));
    p.density = config.density;
    p.ef = config.ef;
    p.sparsifier = config.sparsifier;
    p.zero_fraction = config.zero_fraction;
    p.load_factor = config.load_factor;
    p.seed = config.seed;
    p.rank = config.lowrank_rank;
    p.warm_start = config.warm_start;
    p.start_iter = config.start_iter;
    p.min_compression_rate = config.min_compression_rate;
    p.topk_algorithm = config.topk_algorithm;
    p.pipeline_bytes = config.pipeline_bytes;
    if (params != nullptr) {
        const std::uint64_t unknown = params->mask & ~kKnownParamsFields;
        if (unknown != 0)
            return fail(CC_COLL_ERR_INVALID_PARAMS,
                        "cc_coll: params->mask has unknown bits 0x%llx (this library knows 0x%llx); was the "
                        "caller built against a newer cc_coll.h?",
                        static_cast<unsigned long long>(unknown),
                        static_cast<unsigned long long>(kKnownParamsFields));
        if (params->mask & CC_COLL_PARAMS_FIELD_METHOD) {
            const int m = enum_value(params->method);
            if (find_method(m) == nullptr)
                return fail(CC_COLL_ERR_INVALID_METHOD, "params->method = %d is not a cc_coll_method_t value", m);
            p.method = static_cast<cc_coll_method_t>(m);
        }
        if (params->mask & CC_COLL_PARAMS_FIELD_DENSITY) {
            if (!density_valid(params->density))
                return fail(CC_COLL_ERR_INVALID_ARG, "params->density = %g is outside (0, 1]", params->density);
            p.density = params->density;
        }
        if (params->mask & CC_COLL_PARAMS_FIELD_EF) {
            if (params->ef != 0 && params->ef != 1)
                return fail(CC_COLL_ERR_INVALID_ARG, "params->ef = %d must be 0 (off) or 1 (on)", params->ef);
            p.ef = params->ef == 1;
        }
        if (params->mask & CC_COLL_PARAMS_FIELD_SPARSIFIER) {
            const int s = enum_value(params->sparsifier);
            if (s != CC_COLL_SPARSIFY_TOPK && s != CC_COLL_SPARSIFY_THRESHOLD)
                return fail(CC_COLL_ERR_INVALID_ARG,
                            "params->sparsifier = %d is not a cc_coll_sparsifier_t value (TOPK, THRESHOLD)", s);
            p.sparsifier = static_cast<cc_coll_sparsifier_t>(s);
        }
        if (params->mask & CC_COLL_PARAMS_FIELD_ZERO_FRACTION) {
            if (!zero_fraction_valid(params->zero_fraction))
                return fail(CC_COLL_ERR_INVALID_ARG, "params->zero_fraction = %g is outside [0, 1)",
                            params->zero_fraction);
            p.zero_fraction = params->zero_fraction;
        }
        if (params->mask & CC_COLL_PARAMS_FIELD_LOAD_FACTOR) {
            if (!load_factor_valid(params->load_factor))
                return fail(CC_COLL_ERR_INVALID_ARG, "params->load_factor = %g is outside (0, 16]",
                            params->load_factor);
            p.load_factor = params->load_factor;
        }
        if (params->mask & CC_COLL_PARAMS_FIELD_SEED) p.seed = params->seed;
        if (params->mask & CC_COLL_PARAMS_FIELD_SHAPE) {
            // rows = 0 (with cols = 0) asks for LOWRANK's near-square view.
            if (params->rows == 0 && params->cols != 0)
                return fail(CC_COLL_ERR_INVALID_ARG,
                            "params->rows = 0 with params->cols = %llu: rows = 0 asks for LOWRANK's near-square "
                            "view and needs cols = 0; pass rows >= 1 for a rows x cols matrix",
                            static_cast<unsigned long long>(params->cols));
            p.has_shape = true;
            p.rows = params->rows;
            p.cols = params->cols;
        }
        if (params->mask & CC_COLL_PARAMS_FIELD_RANK) {
            if (!lowrank_rank_valid(params->rank))
                return fail(CC_COLL_ERR_INVALID_ARG, "params->rank = %d is outside [1, %d]", params->rank,
                            kMaxLowRank);
            p.rank = params->rank;
        }
        if (params->mask & CC_COLL_PARAMS_FIELD_WARM_START) {
            if (params->warm_start != 0 && params->warm_start != 1)
                return fail(CC_COLL_ERR_INVALID_ARG, "params->warm_start = %d must be 0 (off) or 1 (on)",
                            params->warm_start);
            p.warm_start = params->warm_start == 1;
        }
        if (params->mask & CC_COLL_PARAMS_FIELD_START_ITER) p.start_iter = params->start_iter;
        if (params->mask & CC_COLL_PARAMS_FIELD_MIN_COMPRESSION_RATE) {
            if (!min_compression_rate_valid(params->min_compression_rate))
                return fail(CC_COLL_ERR_INVALID_ARG, "params->min_compression_rate = %g must be finite and >= 1",
                            params->min_compression_rate);
            p.min_compression_rate = params->min_compression_rate;
        }
        if (params->mask & CC_COLL_PARAMS_FIELD_EF_KEY) {
            p.has_ef_key = true;
            p.ef_key = params->ef_key;
        }
    }
    // A selecting method's (AUTO's) params must suit every candidate it may
    // choose.
    const Method *m = find_method(p.method);
    std::string why;
    if (m != nullptr && m->select != nullptr) {
        for (const Method *c : methods())
            if ((config.auto_candidates >> static_cast<unsigned>(c->id) & 1u) && c->validate != nullptr &&
                !c->validate(p, &why))
                return fail(CC_COLL_ERR_INVALID_ARG, "cc_coll: params for method %s: %s", c->name, why.c_str());
    } else if (m != nullptr && m->validate != nullptr && !m->validate(p, &why)) {
        return fail(CC_COLL_ERR_INVALID_ARG, "cc_coll: params for method %s: %s", m->name, why.c_str());
    }
    *out = p;
    return CC_COLL_OK;
}

cc_coll_status_t validate_reduction_args(const char *fn, const void *sendbuf, const void *recvbuf,
                                         std::size_t count, int dtype, int op)
{
    if (!dtype_valid(dtype))
        return fail(CC_COLL_ERR_INVALID_DTYPE, "%s: dtype = %d is not a cc_coll_dtype_t value (F32, F64, F16, BF16)",
                    fn, dtype);
    if (!op_valid(op))
        return fail(CC_COLL_ERR_INVALID_OP, "%s: op = %d is not a cc_coll_op_t value (SUM, AVG)", fn, op);
    if (count > static_cast<std::size_t>(INT_MAX))
        return fail(CC_COLL_ERR_COUNT_OVERFLOW,
                    "%s: count = %zu exceeds MPI's count type (int, at most %d elements per call)", fn, count,
                    INT_MAX);
    if (count == 0) return CC_COLL_OK;
    if (sendbuf == nullptr) return fail(CC_COLL_ERR_NULL_BUFFER, "%s: sendbuf is NULL with count = %zu", fn, count);
    if (recvbuf == nullptr) return fail(CC_COLL_ERR_NULL_BUFFER, "%s: recvbuf is NULL with count = %zu", fn, count);
    if (sendbuf != recvbuf) {
        const std::size_t bytes = count * dtype_size(static_cast<cc_coll_dtype_t>(dtype));
        const auto s = reinterpret_cast<std::uintptr_t>(sendbuf);
        const auto r = reinterpret_cast<std::uintptr_t>(recvbuf);
        if (s < r + bytes && r < s + bytes)
            return fail(CC_COLL_ERR_INVALID_ARG,
                        "%s: sendbuf and recvbuf overlap without being equal (pass the same pointer for "
                        "in-place)",
                        fn);
    }
    return CC_COLL_OK;
}

}  // namespace cc_coll::detail
