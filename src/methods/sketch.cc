// Method SKETCH: sparsification with error feedback, a global support by
// bitwise OR and a count sketch summed by MPI_SUM (docs/algorithms.md
// section 3).
#include <algorithm>

#include "collectives/allreduce/allreduce.hpp"
#include "collectives/reduce_scatter/reduce_scatter.hpp"
#include "collectives/common/agreement.hpp"
#include "core/dtype.hpp"
#include "core/config.hpp"
#include "core/method.hpp"
#include "compressors/sketch/sketch_backend.hpp"
#include "compressors/topk/topk_select.hpp"
#include "wire/topk_payload.hpp"

namespace cc_coll::detail {

namespace {

// The selection, the sketch's rows and its hash functions.
std::uint64_t agreement_params(const CallParams &p)
{
    std::uint64_t h = signature_mix(0x736b65746368ull, double_bits(p.density));
    h = signature_mix(h, static_cast<std::uint64_t>(enum_value(p.sparsifier)));
    h = signature_mix(h, double_bits(p.zero_fraction));
    h = signature_mix(h, double_bits(p.load_factor));
    h = signature_mix(h, p.seed);
    // The support's form (CC_COLL_SKETCH_SUPPORT), folded in unless it is
    // the bitmap that earlier releases always sent.
    if (p.method_options[CC_COLL_METHOD_SKETCH] != kSketchSupportBitmap)
        h = signature_mix(h, 0x737570706f7274ull ^ p.method_options[CC_COLL_METHOD_SKETCH]);
    return h;
}

bool creates_residual(bool, std::size_t, cc_coll_dtype_t, const CallParams &, int) { return true; }

// The cost model: the support (the bitmap's allreduce, or the coded
// messages' allgather and its exchange of sizes), then the sketch's cells.
bool exchange_cost(const CostTensor &t, const CallParams &p, int ranks, ExchangeCost *cost)
{
    const double k = static_cast<double>(topk::k_for(p.density, t.count));
    const double support = std::min(static_cast<double>(t.count), ranks * k);
    if (sketch_support_coded(t.count, ranks, p)) {
        cost->bytes[0] += ranks * sketch_support::coded_estimate(t.count, k) / 2.0;
        cost->latencies = std::max(cost->latencies, 1.0);
    } else {
        cost->bytes[0] += static_cast<double>(t.count) / 8.0 + 1.0;
    }
    cost->bytes[1] += 1.15 * support / p.load_factor * static_cast<double>(dtype_size(t.dtype));
    return true;
}


// The method's own settings (Method::settings: rows of the settings table).
bool apply_sparsifier(const std::string &text, Config *cfg, std::string *why)
{
    if (parse_sparsifier(text, &cfg->sparsifier)) return true;
    *why = "expected topk or threshold";
    return false;
}

bool apply_zero_fraction(const std::string &text, Config *cfg, std::string *why)
{
    double f = 0;
    if (parse_double(text, &f) && zero_fraction_valid(f)) {
        cfg->zero_fraction = f;
        return true;
    }
    *why = "expected a number in [0, 1)";
    return false;
}

bool apply_load_factor(const std::string &text, Config *cfg, std::string *why)
{
    double f = 0;
    if (parse_double(text, &f) && load_factor_valid(f)) {
        cfg->load_factor = f;
        return true;
    }
    *why = "expected a number in (0, 16]";
    return false;
}

bool apply_support(const std::string &text, Config *cfg, std::string *why)
{
    static const char *const names[] = {"auto", "bitmap", "coded"};
    static const std::uint32_t values[] = {kSketchSupportAuto, kSketchSupportBitmap, kSketchSupportCoded};
    return apply_choice(text, names, values, &cfg->method_options[CC_COLL_METHOD_SKETCH], why);
}

const SettingDef kSettings[] = {
    {"SPARSIFIER", "CC_COLL_SPARSIFIER", "topk",
     "SKETCH: how each rank picks the elements it sends: topk (the k = ceil(density * count) largest "
     "magnitudes) or threshold (TAGC's ladder: the largest threshold from 1e-20 to 0.5 that zeroes at "
     "most ZERO_FRACTION of the elements).",
     apply_sparsifier},
    {"ZERO_FRACTION", "CC_COLL_ZERO_FRACTION", "0.8",
     "SKETCH with the threshold sparsifier: target fraction of elements zeroed, in [0, 1).",
     apply_zero_fraction},
    {"LOAD_FACTOR", "CC_COLL_LOAD_FACTOR", "0.77",
     "SKETCH: the sketch is sized so that the union support over its cells stays at or under this "
     "load, in (0, 16]. Peeling recovers every element with high probability up to about 0.8; above "
     "(and beyond 1, where the sketch has fewer cells than elements) more elements get count-sketch "
     "estimates.",
     apply_load_factor},
    {"SKETCH_SUPPORT", "CC_COLL_SKETCH_SUPPORT", "auto",
     "SKETCH's support in the allreduce of host buffers: bitmap (1 bit per element, OR-ed by "
     "MPI_Allreduce), coded (each rank's kept indices gap-coded and gathered by MPI_Allgather, about "
     "log2(1/density) + 2 bits per index), or auto (coded where the ranks' messages are expected to take "
     "at most half the bitmap). Device buffers and the reduce-scatter send the bitmap. Every rank must "
     "use the same value.",
     apply_support},
};

}  // namespace

const Method &sketch_method()
{
    static const Method m = {
        .id = CC_COLL_METHOD_SKETCH,
        .name = "sketch",
        .summary = "count sketch with error feedback: a 1-bit support and a sketch summed by MPI_SUM, peeling decode",
        .homomorphic = true,
        .auto_candidate = true,
        .takes_density = true,
        .exchange_cost = exchange_cost,
        .settings = kSettings,
        .settings_count = sizeof kSettings / sizeof kSettings[0],
        .allreduce = allreduce_sketch,
        .reduce_scatter = reduce_scatter_sketch,
        .p2p = P2pCompression::Refused,
        .why_no_p2p =
            "SKETCH is a collective method and cannot compress a point-to-point message (use LOWRANK, TOPK or NONE)",
        .agreement_params = agreement_params,
        .creates_residual = creates_residual,
        // no state of its own to checkpoint: its residuals are core's
    };
    return m;
}

}  // namespace cc_coll::detail
