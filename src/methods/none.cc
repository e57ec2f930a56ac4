// Method NONE: no compression; a passthrough to MPI_Allreduce and
// MPI_Reduce_scatter_block, bit-identical to them.
#include "collectives/allreduce/allreduce.hpp"
#include "collectives/reduce_scatter/reduce_scatter.hpp"
#include "core/method.hpp"

namespace cc_coll::detail {

namespace {

cc_coll_status_t plan(Comm &, std::size_t, const GroupTensor &, TensorPlan *plan)
{
    plan->route = Route::Dense;
    return CC_COLL_OK;
}

}  // namespace

const Method &none_method()
{
    static const Method m = {
        .id = CC_COLL_METHOD_NONE,
        .name = "none",
        .summary = "no compression: exactly MPI_Allreduce / MPI_Reduce_scatter_block",
        .homomorphic = true,
        .lossy = false,
        .allreduce = allreduce_passthrough,
        .group_plan = plan,
        .reduce_scatter = reduce_scatter_passthrough,
        .p2p = P2pCompression::None,
        // no params shape a dense exchange, no residual, no state of its own
    };
    return m;
}

}  // namespace cc_coll::detail
