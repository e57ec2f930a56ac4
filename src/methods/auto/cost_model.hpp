// CC_COLL_METHOD=auto (docs/algorithms.md section 8, "The cost model"): per
// call, NONE or one of the communicator's candidates (CC_COLL_AUTO_METHOD,
// one lossy method or several), whichever the model predicts fastest, the
// prediction corrected by what the calls took (online.hpp).
//
// The model of a communicator, measured once, collectively, on a duplicate
// of the communicator itself (all its ranks at once, so that a node's ranks
// compete for cores and memory as they do in a call):
//   - the link: the library's NONE allreduce (MPI_Allreduce behind the
//     agreement) at 4 B, 4 KiB, 64 KiB, 1 MiB and two sizes that take about
//     10 and 30 ms, the median of several calls per size (or CC_COLL_LINK's
//     latency and rate);
//   - each candidate's compute (compress and decompress, from the
//     statistics' split of a call) at 4 KiB to 16 MiB of f32, 8x apart, the
//     median of three calls, the sweep stopped after a call that took over
//     40 ms (slow links: the rest extrapolated along the last segment).
// On a hierarchical communicator (two or more nodes; docs/algorithms.md
// section 7) the duplicate runs hierarchically too: the NONE curve is the
// hierarchical NONE call, and the link and the compute are measured again
// on the rails (every rail at once), where the lossy methods run on the
// shards; the node's dense exchanges are the NONE call's time less its
// rail's. CC_COLL_LINK then gives the rails' link.
// Every rank measures; the ranks take the maximum of every figure (one
// MPI_Allreduce), and each curve is made monotone in bytes, so every rank
// holds the same model and makes the same choice for the same call.
//
// Predictions, for a call of b bytes on P ranks, with link(x) the link
// curve and compute_c(b) candidate c's compute curve:
//   NONE   link(b)
//   c      compute_c(b) + its exchanges, each as the link's time for as many
//          bytes (the descriptor's exchange_cost; docs/algorithms.md
//          section 8 lists them) + the exchanges' small messages at the
//          link's latency
// Hierarchical: node(b) + the same on the rails, for the largest shard of
// b (each method's own sharding rule) on as many ranks as nodes.
// A group's tensors are one bucket: their bytes added, each exchange once.
// A call that candidate c would send densely (TOPK's payloads outweighing
// the buffer, LOWRANK under its minimum compression rate, a 1-D LOWRANK
// tensor) is predicted +inf for c.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "cc_coll.h"
#include "core/method.hpp"
#include "core/params.hpp"

namespace cc_coll::detail {

class Comm;

// The points of the compute curves: 4 KiB to 16 MiB of f32, 8x apart; of
// the link's curve: 4 B, 4 KiB, 64 KiB, 1 MiB and sizes taking ~10 and
// ~30 ms.
constexpr int kComputePoints = 5;
constexpr int kLinkPoints = 6;
// At most this many candidates besides NONE.
constexpr int kMaxCandidates = 8;

struct CandidateModel {
    cc_coll_method_t method = CC_COLL_METHOD_TOPK;
    // Compress and decompress of a call of compute_bytes[i] input bytes on
    // the communicator's ranks: interpolated between the points,
    // extrapolated along the last segment.
    double compute_bytes[kComputePoints] = {};
    double compute_seconds[kComputePoints] = {};
};

struct CostModel {
    int ranks = 1;
    // The link the exchanges cross: the communicator itself (flat), or the
    // rails of a hierarchical one. Its NONE allreduce of link_bytes[i] takes
    // link_seconds[i], interpolated like the compute curves; bandwidth is
    // the rate of its last segment (2 (P-1)/P bytes per second, P its
    // ranks: the communicator's, or the nodes).
    double link_bytes[kLinkPoints] = {};
    double link_seconds[kLinkPoints] = {};
    double bandwidth = 0;
    bool link_measured = true;  // false: CC_COLL_LINK gave the link
    // The smallest NONE call on the whole communicator: what an exchange
    // over all its ranks costs at least (the online check's agreements).
    double latency = 0;
    // Hierarchical (nodes > 1): S shards per node, and the node's dense
    // exchanges (reduce-scatter and allgather) of a call of node_bytes[i]
    // bytes, node_seconds[i].
    int nodes = 0;
    int shards = 1;
    double node_bytes[kLinkPoints] = {};
    double node_seconds[kLinkPoints] = {};
    int candidates = 0;
    CandidateModel candidate[kMaxCandidates];
};

// The model's compute seconds of candidate `c` for a call of `bytes` input bytes.
double compute_seconds(const CandidateModel &c, double bytes);
// The model's seconds of the NONE allreduce of `bytes` bytes on its link
// (the communicator, or a rail), and of the node's exchanges of a
// hierarchical call of `bytes` bytes (0 when flat).
double link_seconds(const CostModel &m, double bytes);
double node_seconds(const CostModel &m, double bytes);

struct AutoChoice {
    cc_coll_method_t method = CC_COLL_METHOD_NONE;  // NONE or the fastest candidate
    double predicted_none = 0;                      // seconds
    // Each candidate's prediction, in the model's order (+inf where it
    // would send densely), and the fastest of them.
    double predicted[kMaxCandidates] = {};
    int best_candidate = 0;
    double predicted_lossy = 0;  // predicted[best_candidate]
};

// The predictions for a call's tensors (a single allreduce: one; a group:
// all, its latencies counted once per exchange) with params `p` (whose
// method is ignored: every candidate is predicted through its descriptor's
// exchange_cost). Pure: no MPI.
AutoChoice predict(const CostModel &model, const std::vector<CostTensor> &tensors, const CallParams &p);

// Measures the communicator's model. Collective: every rank of comm must
// call it at the same point.
cc_coll_status_t calibrate(Comm &comm, CostModel *out);

// The median of a sample (0 for none): the model's and the check's robust
// figure.
double median(std::vector<double> v);

// The candidates of a Config (Config::auto_candidates), in id order.
std::vector<cc_coll_method_t> auto_candidates(std::uint32_t mask);

}  // namespace cc_coll::detail
