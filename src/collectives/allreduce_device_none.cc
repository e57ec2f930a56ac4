// Builds without CUDA: no buffer is ever device memory (gpu::locate says
// Host), so these are never reached; they exist so the dispatchers link and
// answer plainly if they were.
#include "collectives/allreduce.hpp"
#include "core/error.hpp"

namespace cc_coll::detail {

namespace {
cc_coll_status_t no_cuda()
{
    return fail(CC_COLL_ERR_NOT_SUPPORTED, "device buffers: this build of libcc_coll has no CUDA support");
}
}  // namespace

cc_coll_status_t allreduce_passthrough_device(Comm &, const AllreduceArgs &, StatsSnapshot *) { return no_cuda(); }
cc_coll_status_t allreduce_sparse_allgather_device(Comm &, const AllreduceArgs &, const CallParams &, StatsSnapshot *)
{
    return no_cuda();
}
cc_coll_status_t allreduce_sketch_device(Comm &, const AllreduceArgs &, const CallParams &, StatsSnapshot *)
{
    return no_cuda();
}
cc_coll_status_t allreduce_lowrank_device(Comm &, const std::vector<GroupTensor> &, const std::vector<std::size_t> &,
                                          const std::vector<lowrank::Shape> &, const std::vector<LowRankState *> &,
                                          StatsSnapshot *)
{
    return no_cuda();
}
cc_coll_status_t dense_batch_device(Comm &, const std::vector<GroupTensor> &, const std::vector<std::size_t> &,
                                    cc_coll_dtype_t, StatsSnapshot *)
{
    return no_cuda();
}

}  // namespace cc_coll::detail
