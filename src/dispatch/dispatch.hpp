// The dispatch layer: below the C ABI (handle lookup, argument checks, the
// exception guard) and above the method registry. It creates communicators
// (duplicate, topology, the default method's hook), lets a selecting
// method (AUTO) choose the method a call runs, and hands each collective
// to its dispatcher (collectives/), which routes it through the method's
// descriptor. The C ABI's non-blocking forms run these same functions in
// the progress engine, in the call's turn.
#pragma once

#include <memory>
#include <vector>

#include <mpi.h>

#include "cc_coll.h"
#include "core/config.hpp"
#include "core/method.hpp"
#include "core/params.hpp"

namespace cc_coll::detail {

class Comm;
struct AllreduceArgs;
struct GroupTensor;
struct ReduceScatterArgs;

// A communicator over a duplicate of `mpi_comm`, with its topology and, for
// a default method with a comm_created hook, that hook run. Collective.
cc_coll_status_t create_comm(MPI_Comm mpi_comm, const Config &config, std::shared_ptr<Comm> *out);

// Topology discovery (dispatch/topology.cc): the node communicator, shard
// count and rail, and the kernel threads. Collective.
cc_coll_status_t build_topology(Comm &comm);

// Replaces a selecting method of *p by the method it chooses for this call
// (the tensors of an allreduce or of a group's selecting tensors; none for
// reduce-scatter and point-to-point). Other methods pass through.
cc_coll_status_t select_method(Comm &comm, CallKind kind, const std::vector<CostTensor> &tensors, CallParams *p);

cc_coll_status_t run_allreduce(Comm &comm, const AllreduceArgs &args, const CallParams &params);
cc_coll_status_t run_allreduce_group(Comm &comm, std::vector<GroupTensor> tensors);
cc_coll_status_t run_reduce_scatter(Comm &comm, const ReduceScatterArgs &args, const CallParams &params);

// The prediction of a selecting method for an allreduce of one tensor
// (cc_coll_auto_predict). Collective the first time (it may measure).
struct Prediction {
    cc_coll_method_t chosen = CC_COLL_METHOD_NONE;
    double predicted_none = 0, predicted_lossy = 0;
};
cc_coll_status_t predict_selection(Comm &comm, const CostTensor &tensor, const CallParams &p, Prediction *out);

}  // namespace cc_coll::detail
