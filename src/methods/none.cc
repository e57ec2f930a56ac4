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
        CC_COLL_METHOD_NONE,
        "none",
        "no compression: exactly MPI_Allreduce / MPI_Reduce_scatter_block",
        true,
        nullptr,
        allreduce_passthrough,
        plan,
        nullptr,
        nullptr,
        reduce_scatter_passthrough,
        nullptr,
        P2pCompression::None,
        nullptr,
        nullptr,
        nullptr,  // no params shape a dense exchange
        nullptr,  // keeps no residual
        nullptr,
        0,        // no state of its own to checkpoint: its residuals are core's
        nullptr,
        nullptr,
        nullptr,
    };
    return m;
}

}  // namespace cc_coll::detail
