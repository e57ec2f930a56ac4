// Reduce-scatter (block form, like MPI_Reduce_scatter_block): the
// dispatcher (core/method.hpp picks the algorithm) and one algorithm
// per file in this folder. The algorithms run on host memory; a call on
// device buffers is staged through host copies by the dispatcher.
#pragma once

#include <cstddef>

#include "cc_coll.h"
#include "core/comm.hpp"
#include "core/params.hpp"
#include "core/stats.hpp"

namespace cc_coll::detail {

// One reduce-scatter call, arguments already validated.
struct ReduceScatterArgs {
    const void *send;       // recvcount x P elements; == recv for in place
    void *recv;             // recvcount elements (recvcount x P in place)
    std::size_t recvcount;  // elements per shard
    cc_coll_dtype_t dtype;
    cc_coll_op_t op;
    bool on_device = false;  // send and recv are device memory (staged by the dispatcher)
    void *stream = nullptr;  // the caller's cudaStream_t (device buffers)
    // The address that names the residual (EfKey::from): recv unless set. A
    // call on device buffers staged through host memory names it by its
    // device recvbuf, as a direct call would.
    const void *key_buf = nullptr;
    const void *key() const { return key_buf != nullptr ? key_buf : recv; }
};

// Runs the algorithm for `params.method` and adds the call to comm's stats.
cc_coll_status_t reduce_scatter(Comm &comm, const ReduceScatterArgs &args, const CallParams &params);

// NONE: MPI_Reduce_scatter_block itself, then / P for AVG.
cc_coll_status_t reduce_scatter_passthrough(Comm &comm, const ReduceScatterArgs &args, const CallParams &params,
                                            StatsSnapshot *stats);

// TOPK: the top k of each shard as fixed-size (index, value) payloads, one
// MPI_Alltoall, scatter-add of the P payloads for this rank's shard.
// Whether a TOPK reduce-scatter of recvcount x P elements sends g' densely.
bool topk_reduce_scatter_dense(std::size_t recvcount, cc_coll_dtype_t dtype, double density, int ranks);
cc_coll_status_t reduce_scatter_sparse_alltoall(Comm &comm, const ReduceScatterArgs &args, const CallParams &params,
                                                StatsSnapshot *stats);

// SKETCH: per-shard bitmaps (one MPI_Reduce_scatter_block with MPI_BOR) and
// per-shard sketches (one with MPI_SUM), decoded shard by shard.
cc_coll_status_t reduce_scatter_sketch(Comm &comm, const ReduceScatterArgs &args, const CallParams &params,
                                       StatsSnapshot *stats);

}  // namespace cc_coll::detail
