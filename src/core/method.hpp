// The method registry: one descriptor per compression method (src/methods/,
// one file each), registered in one line of methods/registry.cc. Every
// dispatcher (allreduce, group, reduce-scatter, point-to-point), the name
// and parse functions, params validation and the reset of per-tensor state
// read it; nothing else switches on a method. Core declares the descriptor
// and the lookups (settings and params parse method names through them);
// the methods layer defines the table, pointing at the collectives'
// algorithms.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "cc_coll.h"
#include "core/config.hpp"
#include "core/params.hpp"
#include "core/stats.hpp"

namespace cc_coll::detail {

class Comm;
struct EfKey;
struct AllreduceArgs;
struct GroupTensor;
struct TensorPlan;
struct ReduceScatterArgs;
class StateWriter;
class StateReader;
struct StagedState;

// What cc_coll_send does with a method's compress = 1.
enum class P2pCompression {
    None,     // sends uncompressed (method NONE)
    Topk,     // (index, value) pairs, wire kind TOPK
    LowRank,  // one local PowerSGD step, wire kind LOWRANK
    Refused,  // CC_COLL_ERR_NOT_SUPPORTED, with Method::why_no_p2p
};


// A call as AUTO's selection and the cost model see it: the tensors of one
// allreduce (one) or of a group's AUTO tensors (one bucket).
struct CostTensor {
    std::size_t count = 0;
    cc_coll_dtype_t dtype = CC_COLL_F32;
    bool has_shape = false;  // the matrix view (CallParams' shape fields)
    std::uint64_t rows = 0, cols = 0;
};

// What a method's exchange moves for one tensor, as the sizes of the
// allreduces that move as many bytes (an allgather of b bytes from each of
// P ranks moves what an allreduce of P b / 2 does): added to bytes[0] and
// bytes[1] (two exchanges in sequence), with the small exchanges beside them
// in *latencies (the most any tensor needs).
struct ExchangeCost {
    double bytes[2] = {0, 0};
    double latencies = 0;
};

// Which collective a call is, for a selecting method (AUTO).
enum class CallKind { Allreduce, ReduceScatter, PointToPoint };

// A method's descriptor. Descriptors are written with designated
// initializers (.name = ...); a field left out is its default below: no
// algorithm, no state, no hook.
struct Method {
    cc_coll_method_t id{};
    const char *name = nullptr;     // "topk": settings, bindings, messages
    const char *summary = nullptr;  // one line for cc_coll_info and the settings doc
    // Payloads can be summed by MPI_SUM (the count sketch, PowerSGD's P and
    // Q, dense data); top-k pairs cannot.
    bool homomorphic = false;
    // Results may differ from MPI_Allreduce's (CC_COLL_METHOD_CAP_LOSSY).
    bool lossy = true;
    // Views a tensor as a rows x cols matrix from the params' shape fields
    // (CC_COLL_METHOD_CAP_MATRIX): the hierarchical algorithm, bindings and
    // tools pass a shape to such a method.
    bool matrix_view = false;
    // CC_COLL_AUTO_METHOD may name it: its allreduce is lossy and
    // exchange_cost predicts it.
    bool auto_candidate = false;
    // Keeps a share of the elements set by the params' density, all of them
    // at density 1 (CC_COLL_METHOD_CAP_DENSITY).
    bool takes_density = false;

    // A selecting method (AUTO) runs another method per call: `select`
    // returns it, given the call's tensors, and may rewrite the params (the
    // dispatchers then run the chosen method). Collective where it measures.
    cc_coll_status_t (*select)(Comm &comm, CallKind kind, const std::vector<CostTensor> &tensors, CallParams *p,
                               const struct Method **chosen) = nullptr;
    // Runs when a communicator is created with this method as its default
    // (CC_COLL_METHOD): collective, every rank at once (AUTO measures its
    // cost model here). May be null.
    cc_coll_status_t (*comm_created)(Comm &comm) = nullptr;
    // After the call that `select` routed (the dispatchers time it): this
    // rank's seconds in it, and its status (the same on every rank). May be
    // null.
    void (*observe)(Comm &comm, double seconds, cc_coll_status_t status) = nullptr;
    // What `select` would choose for an allreduce of `t`, with the predicted
    // seconds of NONE and of the lossy method (cc_coll_auto_predict). May
    // measure: collective. Null for a method that does not select.
    cc_coll_status_t (*predict)(Comm &comm, const CostTensor &t, const CallParams &p, cc_coll_method_t *chosen,
                                double *predicted_none, double *predicted_lossy) = nullptr;

    // The cost model (AUTO): what the allreduce of tensor `t` exchanges on
    // `ranks` ranks with params `p`, added to *cost; false when the method
    // would send the tensor densely. Set for every auto_candidate.
    bool (*exchange_cost)(const CostTensor &t, const CallParams &p, int ranks, ExchangeCost *cost) = nullptr;

    // The method's own settings (rows of the settings table, after core's:
    // cc_coll_info, CC_COLL_* variables, cc_coll_get_setting). Their apply
    // writes Config::method_options[id]; the algorithms read
    // CallParams::method_options[id].
    const SettingDef *settings = nullptr;
    std::size_t settings_count = 0;

    // Params validation beyond the generic checks of resolve_params: a
    // non-empty *why rejects the call (CC_COLL_ERR_INVALID_ARG). May be null.
    bool (*validate)(const CallParams &p, std::string *why) = nullptr;

    // allreduce of one tensor; null when the method runs single tensors as
    // a group of one (through group_batch).
    cc_coll_status_t (*allreduce)(Comm &comm, const AllreduceArgs &args, const CallParams &params,
                                  StatsSnapshot *stats) = nullptr;
    // Whether an allreduce of device buffers with these params runs through
    // host copies (collectives/allreduce/allreduce.hpp, allreduce_single:
    // the host algorithm, a host residual), as every reduce-scatter does;
    // null: never (the algorithm takes device buffers itself).
    bool (*stages_device)(const CallParams &p) = nullptr;

    // Groups. group_plan routes one tensor this step (Route in
    // collectives/allreduce/allreduce.hpp); null: Single when `allreduce`
    // is set. It is called for a call's tensors in index order (`position`
    // 0 first) and may charge the tensor's state; a plan that fails leaves
    // nothing charged (LOWRANK: methods/lowrank.cc). group_batch runs the
    // method's Batch tensors together; group_done runs on every planned
    // tensor once the group succeeded.
    cc_coll_status_t (*group_plan)(Comm &comm, std::size_t position, const GroupTensor &t, TensorPlan *plan) = nullptr;
    cc_coll_status_t (*group_batch)(Comm &comm, const std::vector<GroupTensor> &tensors,
                                    const std::vector<std::size_t> &idx, const std::vector<TensorPlan> &plans,
                                    StatsSnapshot *stats) = nullptr;
    void (*group_done)(TensorPlan &plan) = nullptr;

    // reduce-scatter (block form); null: CC_COLL_ERR_NOT_SUPPORTED with
    // why_no_reduce_scatter.
    cc_coll_status_t (*reduce_scatter)(Comm &comm, const ReduceScatterArgs &args, const CallParams &params,
                                       StatsSnapshot *stats) = nullptr;
    const char *why_no_reduce_scatter = nullptr;

    P2pCompression p2p = P2pCompression::Refused;
    const char *why_no_p2p = nullptr;

    // Forgets the method's per-tensor state of `key` (null key: all of it),
    // collectives and point-to-point channels alike. May be null.
    void (*reset_state)(Comm &comm, const EfKey *key) = nullptr;

    // Agreement (collectives/common/agreement.hpp). A hash of the params
    // that shape this method's exchange (every rank must pass the same);
    // null: none do.
    std::uint64_t (*agreement_params)(const CallParams &p) = nullptr;
    // Whether a single-tensor call (allreduce, or reduce-scatter when
    // `reduce_scatter`) with EF on creates a residual for a tensor that has
    // none, as its algorithm would; null: never.
    bool (*creates_residual)(bool reduce_scatter, std::size_t count, cc_coll_dtype_t dtype, const CallParams &p,
                             int ranks) = nullptr;
    // A group failed before any data moved (a plan, a residual check or the
    // agreement, on this rank or another): forget what group_plan charged
    // for this call. May be null.
    void (*group_abort)(Comm &comm) = nullptr;

    // Checkpoints (cc_coll_state_export / cc_coll_state_import,
    // wire/state_codec.hpp; the format in docs/wire.md, "State checkpoint").
    // A method with per-tensor state of its own sets all three; the others
    // leave them null (their residuals are core's). state_export writes the
    // payload of the method's section, in its format version state_version,
    // under both of the communicator's locks. state_parse reads a payload of
    // `version` and checks every field, into a staged state that changes
    // nothing yet (CC_COLL_ERR_INVALID_ARG for a malformed payload,
    // CC_COLL_ERR_VERSION_MISMATCH for a version it cannot read; device
    // memory, if any, is allocated here). state_install replaces the
    // method's state, reset first, with a staged one and cannot fail: the
    // import has checked its bytes against CC_COLL_STATE_MAX_BYTES.
    std::uint16_t state_version = 0;
    cc_coll_status_t (*state_export)(Comm &comm, StateWriter &out) = nullptr;
    cc_coll_status_t (*state_parse)(Comm &comm, std::uint16_t version, StateReader &in, StagedState *staged) = nullptr;
    void (*state_install)(Comm &comm, StagedState &staged) = nullptr;
};

// Every registered method, AUTO included, in id order. Ids are the public
// enumerators (stable: a new method takes the next free value, so there may
// be gaps) and below kMaxMethods (Comm keeps one state slot per id).
const std::vector<const Method *> &methods();
// The cc_coll_method_cap_t bits of a method.
unsigned method_caps(const Method &m);
// The method with this id or name, or nullptr.
const Method *find_method(int id);
const Method *find_method_by_name(const std::string &name);
// "none, topk, sketch, lowrank, auto": for settings docs and messages.
std::string method_names(const char *separator = ", ");
// The methods CC_COLL_AUTO_METHOD may name: "topk, sketch, lowrank".
std::string auto_candidate_names();

// Forgets every method's per-tensor state of `key` (null: all).
void reset_method_states(Comm &comm, const EfKey *key);

}  // namespace cc_coll::detail
