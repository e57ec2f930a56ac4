// Method SKETCH: sparsification with error feedback, a global support by
// bitwise OR and a count sketch summed by MPI_SUM (docs/algorithms.md
// section 3).
#include "collectives/allreduce/allreduce.hpp"
#include "collectives/reduce_scatter/reduce_scatter.hpp"
#include "core/method.hpp"

namespace cc_coll::detail {

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
    };
    return m;
}

}  // namespace cc_coll::detail
