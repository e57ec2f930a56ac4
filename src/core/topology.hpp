// A communicator's nodes, for the hierarchical allreduce
// (collectives/allreduce/hierarchical.cc, docs/algorithms.md
// "Hierarchical allreduce"). Built once at communicator creation when
// CC_COLL_HIERARCHY is on or auto: the ranks of each node (MPI's
// shared-memory nodes, or CC_COLL_NODES), and the "rail" communicators that
// join the ranks with the same index in their node across the nodes.
#pragma once

#include <memory>

#include <mpi.h>

#include "cc_coll.h"

namespace cc_coll::detail {

class Comm;

struct NodeTopology {
    NodeTopology() = default;
    NodeTopology(const NodeTopology &) = delete;
    NodeTopology &operator=(const NodeTopology &) = delete;
    ~NodeTopology();

    MPI_Comm node = MPI_COMM_NULL;  // the ranks of this rank's node, in communicator order
    int node_rank = 0;              // this rank's index in its node
    int node_size = 1;
    int nodes = 1;                  // how many nodes the communicator spans
    int shards = 1;                 // S: the smallest node's size; ranks 0..S-1 of every node own a shard
    // The node_rank-th rank of every node (node order), as a communicator
    // of its own with its own error-feedback and method state; null where
    // node_rank >= shards (that rank owns no shard).
    std::shared_ptr<Comm> rail;
};

// Decides, from comm's configuration (CC_COLL_HIERARCHY, CC_COLL_NODES),
// whether `comm` runs hierarchically and, if so, builds its topology and
// attaches it (Comm::topology()); resolves the kernel threads
// (CC_COLL_THREADS, Comm::threads()) from the node's ranks. Collective over comm: every rank must
// call it, at creation. CC_COLL_ERR_CONFIG when CC_COLL_NODES does not fit
// the communicator.
}  // namespace cc_coll::detail
