// The communicator object behind a cc_coll_comm_h, and the registry that
// turns handles into objects. Handles are registry ids, never reused, so a
// destroyed or forged handle is detected instead of dereferenced.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>

#include <mpi.h>

#include "cc_coll.h"
#include "core/config.hpp"
#include "core/ef_store.hpp"
#include "core/method.hpp"
#include "core/state_budget.hpp"
#include "core/stats.hpp"
#include "core/topology.hpp"

namespace cc_coll::detail {

// The lock of a communicator's collective state. Unlike std::mutex it may
// be released by another thread than the one that took it: a non-blocking
// collective holds it from its first step to its last, and its steps may
// run on different threads (progress/engine.hpp). BasicLockable.
class CollectiveLock {
public:
    void lock()
    {
        std::unique_lock<std::mutex> l(m_);
        cv_.wait(l, [&] { return !held_; });
        held_ = true;
    }
    bool try_lock()
    {
        std::lock_guard<std::mutex> l(m_);
        if (held_) return false;
        held_ = true;
        return true;
    }
    void unlock()
    {
        {
            std::lock_guard<std::mutex> l(m_);
            held_ = false;
        }
        cv_.notify_one();
    }

private:
    std::mutex m_;
    std::condition_variable cv_;
    bool held_ = false;
};

class Comm {
public:
    // Takes ownership of `dup` (freed in the destructor while MPI is alive).
    Comm(MPI_Comm dup, int rank, int size, const Config &config);
    ~Comm();
    Comm(const Comm &) = delete;
    Comm &operator=(const Comm &) = delete;

    MPI_Comm mpi() const { return mpi_; }
    int rank() const { return rank_; }
    int size() const { return size_; }
    const Config &config() const { return config_; }
    Stats &stats() { return stats_; }
    EfStore &ef() { return ef_; }
    // Point-to-point channels: LEP residuals, keyed by
    // EfKey::channel(peer, ...).
    EfStore &lep() { return lep_; }
    // The methods' per-tensor state other than residuals (LOWRANK's, of
    // tensors and channels), counted against CC_COLL_STATE_MAX_BYTES.
    StateBudget &state_budget() { return state_budget_; }
    // A method's own per-tensor state (PowerSGD's factors and call counts,
    // say), type-erased here so that core does not depend on the methods;
    // see core/method.hpp.
    std::shared_ptr<void> &method_slot(cc_coll_method_t method)
    {
        return method_state_[static_cast<unsigned>(method) % kMaxMethods];
    }
    // Scratch memory owned by the collectives layer (type-erased here so
    // that core does not depend on it); see exec/workspace.hpp.
    std::shared_ptr<void> &workspace_slot() { return workspace_; }
    // The device-side counterpart (handles, transport, device scratch) for
    // calls on device buffers; see exec/cuda_exec.cc.
    std::shared_ptr<void> &device_slot() { return device_; }
    // Point-to-point scratch (a pool of workspaces, one leased per call);
    // see exec/workspace.hpp.
    std::shared_ptr<void> &p2p_scratch_slot() { return p2p_scratch_; }
    // The cost model of CC_COLL_METHOD=auto, once measured; see
    // methods/auto/cost_model.hpp. Set and read under collective_mutex.
    std::shared_ptr<void> &cost_model_slot() { return cost_model_; }

    // Threads (docs/api.md, "Threads"). Three locks, never held across
    // calls:
    //  - collective_mutex: the collectives' state: ef(), the method states of
    //    tensors, the workspace and device slots. A collective holds it for
    //    its whole run; the local calls on residuals and LOWRANK state take
    //    it briefly (so they wait for a running collective).
    //  - p2p_mutex: the point-to-point state: lep(), the method states of
    //    channels. cc_coll_send holds it while it reads or updates its
    //    channel, never while it waits for MPI; the local calls on channels
    //    take it briefly.
    //  - slot_mutex: the lazy creation of the type-erased slots (method
    //    state, point-to-point scratch) and the scratch pool's list.
    // Order: collective_mutex before p2p_mutex before slot_mutex.
    CollectiveLock &collective_mutex() { return collective_mutex_; }
    std::mutex &p2p_mutex() { return p2p_mutex_; }
    std::mutex &slot_mutex() { return slot_mutex_; }
    // The nodes, where allreduces run hierarchically (core/topology.hpp);
    // null for the flat algorithms. Set once, at creation.
    const NodeTopology *topology() const { return topology_.get(); }
    void set_topology(std::unique_ptr<NodeTopology> t) { topology_ = std::move(t); }

    // Threads of the host kernels (CC_COLL_THREADS resolved at creation;
    // core/parallel.hpp).
    int threads() const { return threads_; }
    void set_threads(int t) { threads_ = t < 1 ? 1 : t; }

    // Set while a collective runs: collectives on one communicator are
    // issued one at a time (a second one meanwhile is an error).
    std::atomic<bool> &in_collective() { return in_collective_; }

private:
    MPI_Comm mpi_;
    int rank_;
    int size_;
    Config config_;
    Stats stats_;
    EfStore ef_;
    EfStore lep_;
    StateBudget state_budget_;  // outlives method_state_, whose stores charge it
    std::shared_ptr<void> method_state_[kMaxMethods];
    std::shared_ptr<void> workspace_;
    std::shared_ptr<void> device_;
    std::shared_ptr<void> p2p_scratch_;
    std::shared_ptr<void> cost_model_;
    CollectiveLock collective_mutex_;
    std::mutex p2p_mutex_;
    std::mutex slot_mutex_;
    std::atomic<bool> in_collective_{false};
    std::unique_ptr<NodeTopology> topology_;
    int threads_ = 1;
};

// Registers a communicator and returns its new handle.
cc_coll_comm_h register_comm(std::shared_ptr<Comm> comm);

// The communicator behind `handle`, or nullptr when the handle is NULL, was
// destroyed, or never existed.
std::shared_ptr<Comm> find_comm(cc_coll_comm_h handle);

// Removes `handle` from the registry and returns its communicator (nullptr if
// unknown). The object dies with its last user.
std::shared_ptr<Comm> unregister_comm(cc_coll_comm_h handle);

}  // namespace cc_coll::detail
