// The communicator object behind a cc_coll_comm_h, and the registry that
// turns handles into objects. Handles are registry ids, never reused, so a
// destroyed or forged handle is detected instead of dereferenced.
#pragma once

#include <memory>
#include <mutex>

#include <mpi.h>

#include "cc_coll.h"
#include "core/config.hpp"
#include "core/ef_store.hpp"
#include "core/method.hpp"
#include "core/stats.hpp"

namespace cc_coll::detail {

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
    // A method's own per-tensor state (PowerSGD's factors and call counts,
    // say), type-erased here so that core does not depend on the methods;
    // see core/method.hpp.
    std::shared_ptr<void> &method_slot(cc_coll_method_t method)
    {
        return method_state_[static_cast<unsigned>(method) % kMaxMethods];
    }
    // Scratch memory owned by the collectives layer (type-erased here so
    // that core does not depend on it); see collectives/common/workspace.hpp.
    std::shared_ptr<void> &workspace_slot() { return workspace_; }
    // The device-side counterpart (handles, transport, device scratch) for
    // calls on device buffers; see exec/cuda_exec.cc.
    std::shared_ptr<void> &device_slot() { return device_; }

private:
    MPI_Comm mpi_;
    int rank_;
    int size_;
    Config config_;
    Stats stats_;
    EfStore ef_;
    EfStore lep_;
    std::shared_ptr<void> method_state_[kMaxMethods];
    std::shared_ptr<void> workspace_;
    std::shared_ptr<void> device_;
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
