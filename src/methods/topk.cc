// Method TOPK: the k = ceil(density n) largest elements as (index, value)
// pairs, with error feedback (docs/algorithms.md section 2).
#include <algorithm>
#include <cmath>

#include "collectives/allreduce/allreduce.hpp"
#include "collectives/reduce_scatter/reduce_scatter.hpp"
#include "collectives/common/agreement.hpp"
#include "core/config.hpp"
#include "core/dtype.hpp"
#include "core/method.hpp"
#include "compressors/topk/topk_backend.hpp"
#include "compressors/topk/topk_select.hpp"
#include "wire/topk_payload.hpp"

namespace cc_coll::detail {

namespace {

// k (and so every payload's size) follows from the density; the algorithm
// from CC_COLL_TOPK_ALGORITHM and the chunks from CC_COLL_PIPELINE_BYTES
// (each folded in unless at its default, so that the default's signature
// is that of earlier releases).
std::uint64_t agreement_params(const CallParams &p)
{
    std::uint64_t h = signature_mix(0x746f706bull, double_bits(p.density));
    if (p.topk_algorithm != TopkAlgorithm::Auto) h = signature_mix(h, static_cast<std::uint64_t>(p.topk_algorithm));
    h = mix_pipeline_bytes(h, p);
    if (p.method_options[CC_COLL_METHOD_TOPK] != 0)
        h = signature_mix(h, 0x636f6465ull ^ p.method_options[CC_COLL_METHOD_TOPK]);
    return h;
}

// The allreduce: split or allgather (docs/algorithms.md 2.3 and 2.6), each
// with the coded format (CC_COLL_TOPK_VALUE_BITS, CC_COLL_TOPK_INDEX_CODING)
// where it is set.
cc_coll_status_t allreduce_topk(Comm &comm, const AllreduceArgs &args, const CallParams &params, StatsSnapshot *stats)
{
    if (topk_split_applies(comm, args, params)) return allreduce_sparse_split(comm, args, params, stats);
    return allreduce_sparse_allgather(comm, args, params, stats);
}

// The coded payload's allreduce of device buffers runs through host copies
// (docs/algorithms.md 2.8): the host algorithm, with a host residual.
bool codes_payloads(const CallParams &p) { return topk_format(p).coded; }

// A dense F32/F64 call transmits g' exactly and keeps no residual.
bool creates_residual(bool reduce_scatter, std::size_t count, cc_coll_dtype_t dtype, const CallParams &p, int ranks)
{
    const bool dense = reduce_scatter ? topk_reduce_scatter_dense(count / static_cast<std::size_t>(ranks), dtype,
                                                                  p.density, ranks)
                                      : topk_allreduce_dense(count, dtype, p.density, ranks);
    return !(dense && (dtype == CC_COLL_F32 || dtype == CC_COLL_F64));
}

// The cost model: an allgather of the payloads, or the split algorithm's
// pairs to their owners and regions to everyone (about 2 payloads received
// per rank, two count exchanges); coded: the payloads' estimated size, and
// the allgather's exchange of sizes (the split's travel with its counts).
bool exchange_cost(const CostTensor &t, const CallParams &p, int ranks, ExchangeCost *cost)
{
    if (topk_allreduce_dense(t.count, t.dtype, p.density, ranks)) return false;
    const double P = ranks;
    const std::size_t k = topk::k_for(p.density, t.count);
    const topk::Format fmt = topk_format(p);
    const bool split = p.topk_algorithm == TopkAlgorithm::Split ||
                       (p.topk_algorithm == TopkAlgorithm::Auto && ranks >= kTopkSplitAutoRanks);
    double payload = static_cast<double>(topk::payload_bytes(k, t.dtype));
    if (fmt.coded) {
        // The coded payload (docs/wire.md): 32 bytes of header and section,
        // about log2(1/density) + 2 bits per index (Rice-coded gaps of mean
        // 1/density), the values' bits, 4 bytes of padding on average; the
        // exchange of sizes beside it.
        const double index_bits = std::max(1.0, std::log2(1.0 / std::max(p.density, 1e-12)) + 2.0);
        const double value_bits = fmt.value_bits != 0 ? fmt.value_bits : 8.0 * dtype_size(t.dtype);
        payload = 36.0 + static_cast<double>(k) * (index_bits + value_bits) / 8.0;
        cost->latencies = std::max(cost->latencies, 1.0);
    }
    if (split) {
        cost->bytes[0] += P / (P - 1.0) * payload;
        cost->latencies = std::max(cost->latencies, 2.0);
    } else {
        cost->bytes[0] += P * payload / 2.0;
    }
    return true;
}


// The method's own settings (Method::settings: rows of the settings table).
bool apply_topk_algorithm(const std::string &text, Config *cfg, std::string *why)
{
    static const char *const names[] = {"auto", "allgather", "split"};
    static const TopkAlgorithm values[] = {TopkAlgorithm::Auto, TopkAlgorithm::Allgather, TopkAlgorithm::Split};
    return apply_choice(text, names, values, &cfg->topk_algorithm, why);
}

bool apply_value_bits(const std::string &text, Config *cfg, std::string *why)
{
    static const char *const names[] = {"full", "16", "8", "4"};
    static const std::uint32_t values[] = {0, 16, 8, 4};
    std::uint32_t bits = 0;
    if (!apply_choice(text, names, values, &bits, why)) return false;
    std::uint32_t &w = cfg->method_options[CC_COLL_METHOD_TOPK];
    w = (w & ~kTopkOptionValueBits) | bits;
    return true;
}

bool apply_index_coding(const std::string &text, Config *cfg, std::string *why)
{
    static const char *const names[] = {"auto", "delta"};
    static const std::uint32_t values[] = {0, kTopkOptionDelta};
    std::uint32_t delta = 0;
    if (!apply_choice(text, names, values, &delta, why)) return false;
    std::uint32_t &w = cfg->method_options[CC_COLL_METHOD_TOPK];
    w = (w & ~kTopkOptionDelta) | delta;
    return true;
}

const SettingDef kSettings[] = {
    {"TOPK_ALGORITHM", "CC_COLL_TOPK_ALGORITHM", "auto",
     "TOPK's allreduce of host buffers: allgather (every rank's pairs to every rank: exact sum of "
     "the selected pairs, bytes received grow with the ranks), split (each rank owns a region of "
     "the index space: sparse reduce-scatter, the owner keeps the largest sums of its region and "
     "feeds the rest back into its residual, allgather of the regions: bytes received stay about "
     "constant as ranks grow), or auto (split from 8 ranks on, else allgather). Device buffers "
     "use allgather, except with TOPK_VALUE_BITS or TOPK_INDEX_CODING set, when they run through host copies "
     "and this setting applies. Every rank must use the same value.",
     apply_topk_algorithm},
    {"TOPK_VALUE_BITS", "CC_COLL_TOPK_VALUE_BITS", "full",
     "TOPK's values on the wire: full (the call's dtype; the uncoded payload) or 16, 8, 4 (signed levels of "
     "one step per payload, rounded to nearest; the rounding error stays in the residual with error feedback), "
     "with delta-coded indices: the coded payload of docs/wire.md (the allreduce of device buffers runs "
     "through host copies). Every rank must use the same value.",
     apply_value_bits},
    {"TOPK_INDEX_CODING", "CC_COLL_TOPK_INDEX_CODING", "auto",
     "TOPK's indices on the wire: auto (delta-coded when CC_COLL_TOPK_VALUE_BITS is not full, else uint32) or "
     "delta (the coded payload with full values too: gaps bit-packed or Rice-coded, whichever is smaller). "
     "Every rank must use the same value.",
     apply_index_coding},
};

}  // namespace

const Method &topk_method()
{
    static const Method m = {
        .id = CC_COLL_METHOD_TOPK,
        .name = "topk",
        .summary = "top-k sparsification with error feedback: (index, value) pairs, sparse allgather or split",
        .homomorphic = false,
        .auto_candidate = true,
        .takes_density = true,
        .exchange_cost = exchange_cost,
        .settings = kSettings,
        .settings_count = sizeof kSettings / sizeof kSettings[0],
        .allreduce = allreduce_topk,
        .stages_device = codes_payloads,
        .reduce_scatter = reduce_scatter_sparse_alltoall,
        .p2p = P2pCompression::Topk,
        .agreement_params = agreement_params,
        .creates_residual = creates_residual,
        // no state of its own to checkpoint: its residuals are core's
    };
    return m;
}

}  // namespace cc_coll::detail
