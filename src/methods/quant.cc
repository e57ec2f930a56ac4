// Methods QUANT (b-bit levels per chunk: CC_COLL_QUANT_BITS, _CHUNK, _SCHEME,
// _ROUNDING) and ONEBIT (sign and mean |v| per chunk: CC_COLL_ONEBIT_CHUNK)
// (docs/algorithms.md, "Quantisation"): the element-codec allreduce and
// reduce-scatter (collectives/allreduce/element_codec.hpp) over
// compressors/quant/, one codec template for both.
#include <string>
#include <type_traits>

#include "collectives/allreduce/element_codec.hpp"
#include "collectives/common/agreement.hpp"
#include "collectives/reduce_scatter/reduce_scatter.hpp"
#include "compressors/quant/quant_codec.hpp"
#include "core/config.hpp"
#include "core/method.hpp"

namespace cc_coll::detail {

namespace {

template <typename C>
cc_coll_status_t allreduce(Comm &comm, const AllreduceArgs &a, const CallParams &p, StatsSnapshot *stats)
{
    if (a.count == 0) return CC_COLL_OK;
    return with_exec(comm, a.on_device, a.stream, [&](auto &x) {
        using X = std::remove_reference_t<decltype(x)>;
        return with_work_type(a.dtype, [&](auto w) { return codec_allreduce<C, X, decltype(w)>(x, a, p, stats); });
    });
}

template <typename C>
cc_coll_status_t reduce_scatter(Comm &comm, const ReduceScatterArgs &a, const CallParams &p, StatsSnapshot *stats)
{
    if (a.recvcount == 0) return CC_COLL_OK;
    HostExec x(comm);
    return with_work_type(a.dtype, [&](auto w) {
        return codec_reduce_scatter<C, decltype(w)>(x, a.send, a.recv, a.key(), a.recvcount, a.dtype, a.op, p, stats);
    });
}

// The options word and the parts shape the exchange: every rank must use the same.
template <cc_coll_method_t Id>
std::uint64_t agreement_params(const CallParams &p)
{
    return mix_pipeline_bytes(signature_mix(0x7175616e74000000ull + static_cast<std::uint64_t>(Id), p.method_options[Id]),
                              p);
}

// With EF on, every call keeps its coding error.
bool creates_residual(bool, std::size_t, cc_coll_dtype_t, const CallParams &, int) { return true; }

// The cost model: each rank's block coded on its own, headers included, as
// an allreduce of that many bytes per rank.
template <typename C>
bool exchange_cost(const CostTensor &t, const CallParams &p, int ranks, ExchangeCost *cost)
{
    const std::size_t P = ranks > 0 ? static_cast<std::size_t>(ranks) : 1;
    const std::size_t m = (t.count + P - 1) / P;
    cost->bytes[0] += static_cast<double>(P) * static_cast<double>(C::coded_size(p, m));
    return true;
}

// ---- settings: each writes its field of the method's options word.

std::uint32_t &word(Config *cfg, cc_coll_method_t id) { return cfg->method_options[id]; }

bool parse_chunk(const std::string &text, std::uint32_t *chunk, std::string *why)
{
    std::uint64_t v = 0;
    if (!parse_u64(text, &v) || v < 8 || v > quant::kMaxChunk || v % 8 != 0) {
        *why = "expected a multiple of 8 from 8 to " + std::to_string(quant::kMaxChunk) + " (elements per chunk)";
        return false;
    }
    *chunk = static_cast<std::uint32_t>(v);
    return true;
}

bool apply_bits(const std::string &text, Config *cfg, std::string *why)
{
    std::uint64_t v = 0;
    if (!parse_u64(text, &v) || v < 1 || v > 8) {
        *why = "expected an integer from 1 to 8 (bits per element)";
        return false;
    }
    std::uint32_t &w = word(cfg, CC_COLL_METHOD_QUANT);
    w = (w & ~quant::kBitsMask) | static_cast<std::uint32_t>(v);
    return true;
}

bool apply_quant_chunk(const std::string &text, Config *cfg, std::string *why)
{
    std::uint32_t c = 0;
    if (!parse_chunk(text, &c, why)) return false;
    std::uint32_t &w = word(cfg, CC_COLL_METHOD_QUANT);
    w = (w & ((1u << quant::kChunkShift) - 1u)) | (c << quant::kChunkShift);
    return true;
}

bool apply_scheme(const std::string &text, Config *cfg, std::string *why)
{
    static const char *const names[] = {"maxmin", "norm"};
    static const bool values[] = {false, true};
    bool norm = false;
    if (!apply_choice(text, names, values, &norm, why)) return false;
    std::uint32_t &w = word(cfg, CC_COLL_METHOD_QUANT);
    w = norm ? (w | quant::kSchemeBit) : (w & ~quant::kSchemeBit);
    return true;
}

bool apply_rounding(const std::string &text, Config *cfg, std::string *why)
{
    static const char *const names[] = {"nearest", "stochastic"};
    static const bool values[] = {false, true};
    bool stochastic = false;
    if (!apply_choice(text, names, values, &stochastic, why)) return false;
    std::uint32_t &w = word(cfg, CC_COLL_METHOD_QUANT);
    w = stochastic ? (w | quant::kRoundingBit) : (w & ~quant::kRoundingBit);
    return true;
}

bool apply_onebit_chunk(const std::string &text, Config *cfg, std::string *why)
{
    std::uint32_t c = 0;
    if (!parse_chunk(text, &c, why)) return false;
    word(cfg, CC_COLL_METHOD_ONEBIT) = c;
    return true;
}

const SettingDef kQuantSettings[] = {
    {"QUANT_BITS", "CC_COLL_QUANT_BITS", "4",
     "Method QUANT's bits per element, 1 to 8: 2^b levels per chunk. Every rank must use the same value.",
     apply_bits},
    {"QUANT_CHUNK", "CC_COLL_QUANT_CHUNK", "256",
     "Method QUANT's elements per chunk (a multiple of 8, from 8 to 16777208): each chunk of a rank's block "
     "travels with its own binary32 offset and step (8 bytes). Every rank must use the same value.",
     apply_quant_chunk},
    {"QUANT_SCHEME", "CC_COLL_QUANT_SCHEME", "maxmin",
     "Method QUANT's levels: maxmin (2^b levels from the chunk's minimum to its maximum) or norm (2^b levels "
     "spread evenly over [-max|v|, max|v|], symmetric about 0). Every rank must use the same value.",
     apply_scheme},
    {"QUANT_ROUNDING", "CC_COLL_QUANT_ROUNDING", "nearest",
     "Method QUANT's rounding to a level: nearest, or stochastic (unbiased: up or down with the probabilities "
     "that make the expected level the value; the draws are a hash of the call's seed, the stage, the element's "
     "place in its chunk and the chunk's header, so a call is reproducible). Every rank must use the same value.",
     apply_rounding},
};

const SettingDef kOnebitSettings[] = {
    {"ONEBIT_CHUNK", "CC_COLL_ONEBIT_CHUNK", "1024",
     "Method ONEBIT's elements per chunk (a multiple of 8, from 8 to 16777208): each chunk of a rank's block "
     "travels as its signs and one scale, its mean |v|. Every rank must use the same value.",
     apply_onebit_chunk},
};

}  // namespace

const Method &quant_method()
{
    static const Method m = {
        .id = CC_COLL_METHOD_QUANT,
        .name = "quant",
        .summary = "every element as one of 2^b levels of its chunk (CC_COLL_QUANT_BITS, default 4; an offset and "
                   "step per chunk), two-stage error feedback",
        .homomorphic = false,
        .auto_candidate = true,
        .exchange_cost = exchange_cost<QuantCodec>,
        .settings = kQuantSettings,
        .settings_count = sizeof kQuantSettings / sizeof kQuantSettings[0],
        .allreduce = allreduce<QuantCodec>,
        .reduce_scatter = reduce_scatter<QuantCodec>,
        .p2p = P2pCompression::Refused,
        .why_no_p2p = "method quant has no point-to-point codec (use NONE, TOPK or LOWRANK)",
        .agreement_params = agreement_params<CC_COLL_METHOD_QUANT>,
        .creates_residual = creates_residual,
    };
    return m;
}

const Method &onebit_method()
{
    static const Method m = {
        .id = CC_COLL_METHOD_ONEBIT,
        .name = "onebit",
        .summary = "every element as its sign, one scale (mean |v|) per chunk (CC_COLL_ONEBIT_CHUNK), two-stage "
                   "error feedback",
        .homomorphic = false,
        .auto_candidate = true,
        .exchange_cost = exchange_cost<OnebitCodec>,
        .settings = kOnebitSettings,
        .settings_count = sizeof kOnebitSettings / sizeof kOnebitSettings[0],
        .allreduce = allreduce<OnebitCodec>,
        .reduce_scatter = reduce_scatter<OnebitCodec>,
        .p2p = P2pCompression::Refused,
        .why_no_p2p = "method onebit has no point-to-point codec (use NONE, TOPK or LOWRANK)",
        .agreement_params = agreement_params<CC_COLL_METHOD_ONEBIT>,
        .creates_residual = creates_residual,
    };
    return m;
}

}  // namespace cc_coll::detail
