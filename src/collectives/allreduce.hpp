// Allreduce: the dispatcher that picks an algorithm from the resolved
// method, and the algorithms themselves (one file each).
#pragma once

#include <cstddef>
#include <vector>

#include "cc_coll.h"
#include "compressors/lowrank/powersgd.hpp"
#include "core/lowrank_store.hpp"
#include "core/comm.hpp"
#include "core/params.hpp"
#include "core/stats.hpp"

namespace cc_coll::detail {

// One allreduce call, arguments already validated.
struct AllreduceArgs {
    const void *send;  // == recv for in place
    void *recv;
    std::size_t count;
    cc_coll_dtype_t dtype;
    cc_coll_op_t op;
    bool on_device = false;  // send and recv are device memory
    void *stream = nullptr;  // the caller's cudaStream_t (device buffers)
};

// Runs the algorithm for `params.method` and adds the call to comm's stats.
cc_coll_status_t allreduce(Comm &comm, const AllreduceArgs &args, const CallParams &params);

// Method NONE: MPI_Allreduce(SUM), then division by the communicator size
// for AVG. Fills `stats` with this call's figures.
cc_coll_status_t allreduce_passthrough(Comm &comm, const AllreduceArgs &args, StatsSnapshot *stats);

// Method TOPK: error feedback, exact top-k per rank, one MPI_Allgather of
// fixed-size (index, value) payloads, scatter-add; dense when the pairs
// would outweigh the buffer.
cc_coll_status_t allreduce_sparse_allgather(Comm &comm, const AllreduceArgs &args, const CallParams &params,
                                            StatsSnapshot *stats);

// Method SKETCH: error feedback, sparsification, global support by bitwise
// OR, one MPI_Allreduce(SUM) of a count sketch, peeling decode.
cc_coll_status_t allreduce_sketch(Comm &comm, const AllreduceArgs &args, const CallParams &params,
                                  StatsSnapshot *stats);

// One tensor of a grouped call, arguments and params already validated.
struct GroupTensor {
    AllreduceArgs args;  // args.op is the group's op
    CallParams params;
};

// cc_coll_allreduce_group: checks that the ranks agree on the group's layout,
// packs the dense tensors (NONE, and LOWRANK tensors not compressed this
// step) into one MPI_Allreduce per dtype, runs the compressed LOWRANK tensors
// together (one P and one Q allreduce per work type), then TOPK and SKETCH
// tensors one by one. Adds the tensors to comm's stats.
cc_coll_status_t allreduce_group(Comm &comm, const std::vector<GroupTensor> &tensors);

// Method LOWRANK on the tensors `idx` of `tensors` that are compressed this
// step: shapes[i] and states[i] are tensor i's matrix view (rank >= 1, past
// the compression test) and low-rank state, as the group's plan found them.
// PowerSGD with EF and warm start, every P in one MPI_Allreduce and every Q
// in another, per work type. Fills `stats`.
cc_coll_status_t allreduce_lowrank(Comm &comm, const std::vector<GroupTensor> &tensors,
                                   const std::vector<std::size_t> &idx, const std::vector<lowrank::Shape> &shapes,
                                   const std::vector<LowRankState *> &states, StatsSnapshot *stats);

// The Gaussian stream of LOWRANK tensor `position` of a group: identical on
// every rank for the same position, shape and call count.
std::uint64_t lowrank_q_stream(std::size_t position, const lowrank::Shape &s, std::uint64_t calls);

// --- device buffers (allreduce_device.cc, builds with CUDA) -----------------
// The same algorithms as above with every O(count) step in CUDA kernels and
// the data moved by the device transport; same wire formats, same decisions.
// Each waits for the work queued on args.stream before its first transfer
// and returns with its own work on the stream finished.
cc_coll_status_t allreduce_passthrough_device(Comm &comm, const AllreduceArgs &args, StatsSnapshot *stats);
cc_coll_status_t allreduce_sparse_allgather_device(Comm &comm, const AllreduceArgs &args, const CallParams &params,
                                                   StatsSnapshot *stats);
cc_coll_status_t allreduce_sketch_device(Comm &comm, const AllreduceArgs &args, const CallParams &params,
                                         StatsSnapshot *stats);
cc_coll_status_t allreduce_lowrank_device(Comm &comm, const std::vector<GroupTensor> &tensors,
                                          const std::vector<std::size_t> &idx,
                                          const std::vector<lowrank::Shape> &shapes,
                                          const std::vector<LowRankState *> &states, StatsSnapshot *stats);
// A group's dense batch of one dtype on device buffers: packed on the
// device, one allreduce, unpacked.
cc_coll_status_t dense_batch_device(Comm &comm, const std::vector<GroupTensor> &tensors,
                                    const std::vector<std::size_t> &idx, cc_coll_dtype_t dtype, StatsSnapshot *stats);

}  // namespace cc_coll::detail
