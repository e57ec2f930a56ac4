// Method TOPK: the k = ceil(density n) largest elements as (index, value)
// pairs, with error feedback (docs/algorithms.md section 2).
#include "collectives/allreduce/allreduce.hpp"
#include "collectives/reduce_scatter/reduce_scatter.hpp"
#include "core/method.hpp"

namespace cc_coll::detail {

const Method &topk_method()
{
    static const Method m = {
        CC_COLL_METHOD_TOPK,
        "topk",
        "top-k sparsification with error feedback: (index, value) pairs, sparse allgather",
        false,
        nullptr,
        allreduce_sparse_allgather,
        nullptr,
        nullptr,
        nullptr,
        reduce_scatter_sparse_alltoall,
        nullptr,
        P2pCompression::Topk,
        nullptr,
        nullptr,
    };
    return m;
}

}  // namespace cc_coll::detail
