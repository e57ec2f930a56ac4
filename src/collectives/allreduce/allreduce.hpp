// Allreduce: the dispatcher that picks an algorithm from the method registry
// (core/method.hpp), and the algorithms themselves, one file each in
// this folder. Every algorithm runs on host and device buffers alike: it is
// written once over the execution backend (exec/exec.hpp) of the call's
// buffers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "cc_coll.h"
#include "collectives/common/agreement.hpp"
#include "compressors/lowrank/powersgd.hpp"
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
    // The buffer whose address names the residual when not recv (a call
    // through host copies: the caller's device recvbuf).
    const void *key_buf = nullptr;
    const void *key() const { return key_buf != nullptr ? key_buf : recv; }
};

// Runs the algorithm for `params.method` and adds the call to comm's stats.
cc_coll_status_t allreduce(Comm &comm, const AllreduceArgs &args, const CallParams &params);

// Whether the call's buffers (and so its residual) are device memory to
// the algorithm: device buffers unless the method stages them
// (Method::stages_device).
bool residual_on_device(const Method &m, const AllreduceArgs &args, const CallParams &params);
// The method's algorithm for one tensor, through host copies of sendbuf and
// recvbuf where the method stages device buffers (recvbuf's device address
// still names the residual, a host one); the single call and a group's
// single tensors.
cc_coll_status_t allreduce_single(Comm &comm, const Method &m, const AllreduceArgs &args, const CallParams &params,
                                  StatsSnapshot *stats);

// The hierarchical allreduce (hierarchical.cc): on communicators with a
// node topology (core/topology.hpp), single host tensors go node by node.
// One shard of a tensor: where it lies (elements), and the params its rail
// allreduce runs with (LOWRANK: the shard's rows of the matrix).
struct HierarchicalShard {
    std::size_t offset = 0;
    std::size_t count = 0;
    std::uint64_t rows = 0;
    CallParams params;
};
// Shard `shard` of an n-element tensor (count 0 for shard >= S). False when
// a block of the node's exchanges would not fit an int count of bytes (the
// call then runs flat, as it does on every rank alike).
bool hierarchical_shard(const NodeTopology &t, std::size_t n, cc_coll_dtype_t dtype, const CallParams &p, int shard,
                        HierarchicalShard *out);
// Whether this call runs hierarchically: a topology, host buffers, count > 0
// and blocks that fit. The same on every rank that agrees on the call.
bool runs_hierarchical(const Comm &comm, const AllreduceArgs &args, const CallParams &params);
struct GroupTensor;
// The same for a group: a topology, every tensor in host memory, blocks
// that fit.
bool runs_hierarchical(const Comm &comm, const std::vector<GroupTensor> &tensors);
// The algorithm for a single allreduce (kind Allreduce, one tensor) or a
// group (kind AllreduceGroup), agreement included: the rail runs the
// method's flat allreduce, or the group algorithm over the shards. Fills
// `stats`: bytes_wire counts the bytes this rank hands to MPI between nodes
// (its rail's), not the node's.
cc_coll_status_t allreduce_hierarchical(Comm &comm, const std::vector<GroupTensor> &tensors, Collective kind,
                                        StatsSnapshot *stats);
// The route word a hierarchical group folds into its agreement signature.
constexpr std::uint64_t kHierarchicalRoute = 0x68;

// Method NONE: MPI_Allreduce(SUM), then division by the communicator size
// for AVG. Fills `stats` with this call's figures.
cc_coll_status_t allreduce_passthrough(Comm &comm, const AllreduceArgs &args, const CallParams &params,
                                       StatsSnapshot *stats);

// Method TOPK: error feedback, exact top-k per rank, one MPI_Allgather of
// fixed-size (index, value) payloads, scatter-add; dense when the pairs
// would outweigh the buffer.
cc_coll_status_t allreduce_sparse_allgather(Comm &comm, const AllreduceArgs &args, const CallParams &params,
                                            StatsSnapshot *stats);

// Method TOPK's split algorithm (sparse_split.cc): regions of the index
// space, a sparse reduce-scatter, a top-k per region, an allgather of the
// regions. Host buffers.
cc_coll_status_t allreduce_sparse_split(Comm &comm, const AllreduceArgs &args, const CallParams &params,
                                        StatsSnapshot *stats);
// Whether a TOPK call runs the split algorithm (params.topk_algorithm, the
// communicator's size, host buffers, not dense): the same on every rank
// that agrees on the call.
bool topk_split_applies(const Comm &comm, const AllreduceArgs &args, const CallParams &params);
// CC_COLL_TOPK_ALGORITHM=auto takes the split algorithm from this many ranks on.
constexpr int kTopkSplitAutoRanks = 8;

// Whether a TOPK allreduce of n elements sends g' densely (the pairs would
// outweigh the buffer): identical on every rank that agrees on the call.
bool topk_allreduce_dense(std::size_t n, cc_coll_dtype_t dtype, double density, int ranks);

// Method SKETCH: error feedback, sparsification, global support by bitwise
// OR, one MPI_Allreduce(SUM) of a count sketch, peeling decode.
cc_coll_status_t allreduce_sketch(Comm &comm, const AllreduceArgs &args, const CallParams &params,
                                  StatsSnapshot *stats);

// One tensor of a grouped call, arguments and params already validated.
struct GroupTensor {
    AllreduceArgs args;  // args.op is the group's op
    CallParams params;
};

// cc_coll_allreduce_group (group.cc): each method plans its tensors
// (core/method.hpp: dense this step, in the method's batch, or one by
// one); the ranks check that they agree on the plan (one agreement
// exchange); then the dense tensors
// go in one MPI_Allreduce per dtype, each method's batch runs together, and
// the other tensors one by one. Adds the tensors to comm's stats.
// `kind` is the collective the caller made (a single LOWRANK allreduce runs
// as a group of one), for the agreement (collectives/common/agreement.hpp).
cc_coll_status_t allreduce_group(Comm &comm, const std::vector<GroupTensor> &tensors,
                                 Collective kind = Collective::AllreduceGroup);

// The dense batch of one dtype (dense_batch.cc): tensors idx packed, one
// MPI_Allreduce(SUM), unpacked. A tensor with a residual (a LOWRANK tensor
// compressed in earlier steps) sends g' = g + e and keeps only the rounding
// to the dtype.
cc_coll_status_t dense_batch(Comm &comm, const std::vector<GroupTensor> &tensors, const std::vector<std::size_t> &idx,
                             cc_coll_dtype_t dtype, StatsSnapshot *stats);

// How a group runs one of its tensors this step (core/method.hpp:
// a method's group_plan decides).
enum class Route : std::uint8_t {
    Skip,    // count 0: nothing to move
    Dense,   // in the dense batch of its dtype (dense_batch.cc)
    Batch,   // in its method's batch algorithm, with the method's other tensors
    Single,  // alone, through its method's allreduce algorithm
};

// One tensor's plan: its route, the layout words every rank must agree on
// (folded into the group's signature), and what the method's batch
// algorithm needs (`layout` and `state`, the method's own meaning).
struct TensorPlan {
    Route route = Route::Skip;
    std::uint64_t layout[4] = {0, 0, 0, 0};
    void *state = nullptr;
};

// Method LOWRANK on the tensors `idx` of `tensors` that are compressed this
// step (lowrank.cc): PowerSGD with EF and warm start, every P in one
// MPI_Allreduce and every Q in another, per work type. plans[i].layout holds
// tensor i's rows, cols and rank, plans[i].state its LowRankState. Fills
// `stats`.
cc_coll_status_t allreduce_lowrank(Comm &comm, const std::vector<GroupTensor> &tensors,
                                   const std::vector<std::size_t> &idx, const std::vector<TensorPlan> &plans,
                                   StatsSnapshot *stats);

// The Gaussian stream of LOWRANK tensor `position` of a group: identical on
// every rank for the same position, shape and call count.
std::uint64_t lowrank_q_stream(std::size_t position, const lowrank::Shape &s, std::uint64_t calls);

}  // namespace cc_coll::detail
