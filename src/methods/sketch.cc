// Method SKETCH: sparsification with error feedback, a global support by
// bitwise OR and a count sketch summed by MPI_SUM (docs/algorithms.md
// section 3).
#include "collectives/allreduce/allreduce.hpp"
#include "collectives/reduce_scatter/reduce_scatter.hpp"
#include "collectives/common/agreement.hpp"
#include "core/method.hpp"

namespace cc_coll::detail {

namespace {

// The selection, the sketch's rows and its hash functions.
std::uint64_t agreement_params(const CallParams &p)
{
    std::uint64_t h = signature_mix(0x736b65746368ull, double_bits(p.density));
    h = signature_mix(h, static_cast<std::uint64_t>(enum_value(p.sparsifier)));
    h = signature_mix(h, double_bits(p.zero_fraction));
    h = signature_mix(h, double_bits(p.load_factor));
    return signature_mix(h, p.seed);
}

bool creates_residual(bool, std::size_t, cc_coll_dtype_t, const CallParams &, int) { return true; }

}  // namespace

const Method &sketch_method()
{
    static const Method m = {
        CC_COLL_METHOD_SKETCH,
        "sketch",
        "count sketch with error feedback: a 1-bit support and a sketch summed by MPI_SUM, peeling decode",
        true,
        nullptr,
        allreduce_sketch,
        nullptr,
        nullptr,
        nullptr,
        reduce_scatter_sketch,
        nullptr,
        P2pCompression::Refused,
        "SKETCH is a collective method and cannot compress a point-to-point message (use LOWRANK, TOPK or NONE)",
        nullptr,
        agreement_params,
        creates_residual,
        nullptr,
        0,        // no state of its own to checkpoint: its residuals are core's
        nullptr,
        nullptr,
        nullptr,
    };
    return m;
}

}  // namespace cc_coll::detail
