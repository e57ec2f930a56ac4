// Method HALF: every element travels as a 16-bit float (bfloat16 or IEEE
// binary16, CC_COLL_HALF_FORMAT) and is summed in the input's precision
// (docs/algorithms.md, "HALF"): the element-codec allreduce and
// reduce-scatter (collectives/allreduce/element_codec.hpp) over
// compressors/half/.
#include <string>
#include <type_traits>

#include "collectives/allreduce/element_codec.hpp"
#include "collectives/common/agreement.hpp"
#include "collectives/reduce_scatter/reduce_scatter.hpp"
#include "compressors/half/half_codec.hpp"
#include "core/config.hpp"
#include "core/method.hpp"

namespace cc_coll::detail {

namespace {

cc_coll_status_t allreduce(Comm &comm, const AllreduceArgs &a, const CallParams &p, StatsSnapshot *stats)
{
    if (a.count == 0) return CC_COLL_OK;
    return with_exec(comm, a.on_device, a.stream, [&](auto &x) {
        using X = std::remove_reference_t<decltype(x)>;
        return with_work_type(a.dtype, [&](auto w) { return codec_allreduce<HalfCodec, X, decltype(w)>(x, a, p, stats); });
    });
}

cc_coll_status_t reduce_scatter(Comm &comm, const ReduceScatterArgs &a, const CallParams &p, StatsSnapshot *stats)
{
    if (a.recvcount == 0) return CC_COLL_OK;
    HostExec x(comm);
    return with_work_type(a.dtype, [&](auto w) {
        return codec_reduce_scatter<HalfCodec, decltype(w)>(x, a.send, a.recv, a.key(), a.recvcount, a.dtype, a.op, p,
                                                           stats);
    });
}

// The format and the parts shape the exchange: every rank must use the same.
std::uint64_t agreement_params(const CallParams &p)
{
    return mix_pipeline_bytes(signature_mix(0x68616c66ull, p.method_options[CC_COLL_METHOD_HALF]), p);
}

// With EF on, every call keeps its coding error.
bool creates_residual(bool, std::size_t, cc_coll_dtype_t, const CallParams &, int) { return true; }

// The cost model: 2 bytes per element, as an allreduce of half the bytes.
bool exchange_cost(const CostTensor &t, const CallParams &, int, ExchangeCost *cost)
{
    cost->bytes[0] += 2.0 * static_cast<double>(t.count);
    return true;
}

bool apply_format(const std::string &text, Config *cfg, std::string *why)
{
    std::string s;
    for (char c : text)
        if (c != ' ' && c != '\t') s += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    if (s == "bf16" || s == "bfloat16") cfg->method_options[CC_COLL_METHOD_HALF] = 0;
    else if (s == "fp16" || s == "f16" || s == "float16") cfg->method_options[CC_COLL_METHOD_HALF] = 1;
    else {
        *why = "expected one of: bf16, fp16";
        return false;
    }
    return true;
}

const SettingDef kSettings[] = {
    {"HALF_FORMAT", "CC_COLL_HALF_FORMAT", "bf16",
     "Method HALF's 16-bit format on the wire: bf16 (bfloat16: the range of binary32, 8 significant bits) or fp16 "
     "(IEEE binary16: 11 significant bits, magnitudes up to 65504; larger ones become infinite). Every rank must "
     "use the same value.",
     apply_format},
};

}  // namespace

const Method &half_method()
{
    static const Method m = {
        .id = CC_COLL_METHOD_HALF,
        .name = "half",
        .summary = "every element as bfloat16 or binary16 (CC_COLL_HALF_FORMAT), summed in the input's precision; "
                   "error feedback optional",
        .homomorphic = false,
        .auto_candidate = true,
        .exchange_cost = exchange_cost,
        .settings = kSettings,
        .settings_count = sizeof kSettings / sizeof kSettings[0],
        .allreduce = allreduce,
        .reduce_scatter = reduce_scatter,
        .p2p = P2pCompression::Refused,
        .why_no_p2p = "method half has no point-to-point codec (use NONE, TOPK or LOWRANK)",
        .agreement_params = agreement_params,
        .creates_residual = creates_residual,
    };
    return m;
}

}  // namespace cc_coll::detail
