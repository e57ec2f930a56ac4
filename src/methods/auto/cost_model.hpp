// CC_COLL_METHOD=auto (docs/algorithms.md section 8, "The cost model"): per
// call, NONE or the communicator's lossy method (CC_COLL_AUTO_METHOD),
// whichever the model predicts faster.
//
// The model of a communicator: its link (MPI_Allreduce timed at five
// sizes, or CC_COLL_LINK's latency and rate), and
// the lossy method's compute on this rank's threads, measured by running
// the method itself on a one-rank communicator at five sizes from 4 KiB to
// 16 MiB (the methods switch algorithms with the size: TOPK's full
// selection below 32Ki elements, say), interpolated between them. Every rank measures; the ranks then
// take the maximum of every figure (one MPI_Allreduce), so every rank holds
// the same model and makes the same choice for the same call.
//
// Predictions, for a call of b = n e bytes (n elements of e bytes) on P
// ranks, with allreduce(x) the link curve (the measured time of an
// MPI_Allreduce of x bytes) and compute(b) the compute curve:
//   NONE   allreduce(b)
//   lossy  compute(b) + its exchanges, each as the allreduce of as many bytes
//          (the method descriptor's exchange_cost; docs/algorithms.md
//          section 8 lists them)
// A group's tensors are one bucket: their bytes added, each exchange once.
// A call that the lossy method would send densely (TOPK's payloads
// outweighing the buffer, LOWRANK under its minimum compression rate, a
// 1-D LOWRANK tensor) is predicted +inf, and auto picks NONE.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "cc_coll.h"
#include "core/method.hpp"
#include "core/params.hpp"

namespace cc_coll::detail {

class Comm;

// The points of the compute curve: 4 KiB to 16 MiB of f32, 8x apart; of
// the link's curve: 4 B, 4 KiB, 64 KiB, 1 MiB and a size taking ~30 ms.
constexpr int kComputePoints = 5;
constexpr int kLinkPoints = 5;

struct CostModel {
    cc_coll_method_t lossy = CC_COLL_METHOD_TOPK;
    int ranks = 1;
    // MPI_Allreduce on the communicator: seconds for link_bytes[i] bytes,
    // interpolated like the compute curve; latency is the smallest one's,
    // bandwidth the rate of the last segment (2 (P-1)/P bytes per second).
    double link_bytes[kLinkPoints] = {};
    double link_seconds[kLinkPoints] = {};
    double latency = 0;
    double bandwidth = 0;
    // The lossy method's compute (compress and decompress, one rank, this
    // rank's threads): seconds for a call of compute_bytes[i] input bytes;
    // interpolated between the points, extrapolated along the last segment.
    double compute_bytes[kComputePoints] = {};
    double compute_seconds[kComputePoints] = {};
    bool link_measured = true;  // false: CC_COLL_LINK gave the link
};

// The model's compute seconds for a call of `bytes` input bytes.
double compute_seconds(const CostModel &m, double bytes);

struct AutoChoice {
    cc_coll_method_t method = CC_COLL_METHOD_NONE;  // NONE or the model's lossy method
    double predicted_none = 0;   // seconds
    double predicted_lossy = 0;  // seconds; +inf when the lossy method would send densely
};

// The predictions for a call's tensors (a single allreduce: one; a group:
// all, its latencies counted once per exchange) with params `p` (whose
// method is ignored: the model's lossy one is predicted, through its
// descriptor's exchange_cost). Pure: no MPI.
AutoChoice predict(const CostModel &model, const std::vector<CostTensor> &tensors, const CallParams &p);

// The communicator's model, measured now if it has none yet. Collective:
// every rank of comm must call it at the same point (at creation when
// CC_COLL_METHOD=auto; else inside its first collective with method auto).
cc_coll_status_t ensure_cost_model(Comm &comm, const CostModel **model);

// The model if it has been measured, else nullptr.
const CostModel *cost_model_of(Comm &comm);

}  // namespace cc_coll::detail
