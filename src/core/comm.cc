#include "core/comm.hpp"

#include <cstdint>
#include <unordered_map>

namespace cc_coll::detail {

Comm::Comm(MPI_Comm dup, int rank, int size, const Config &config)
    : mpi_(dup), rank_(rank), size_(size), config_(config), ef_(config.ef_max_bytes), lep_(config.ef_max_bytes),
      state_budget_(config.state_max_bytes)
{
}

Comm::~Comm()
{
    int finalized = 1;
    MPI_Finalized(&finalized);
    if (!finalized && mpi_ != MPI_COMM_NULL) MPI_Comm_free(&mpi_);
}

namespace {

struct Registry {
    std::mutex mutex;
    std::uintptr_t next_id = 1;
    std::unordered_map<std::uintptr_t, std::shared_ptr<Comm>> comms;
};

Registry &registry()
{
    static Registry *r = new Registry;  // never destroyed: safe during exit
    return *r;
}

std::uintptr_t id_of(cc_coll_comm_h handle) { return reinterpret_cast<std::uintptr_t>(handle); }

}  // namespace

cc_coll_comm_h register_comm(std::shared_ptr<Comm> comm)
{
    Registry &r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    const std::uintptr_t id = r.next_id++;
    r.comms.emplace(id, std::move(comm));
    return reinterpret_cast<cc_coll_comm_h>(id);
}

std::shared_ptr<Comm> find_comm(cc_coll_comm_h handle)
{
    if (handle == nullptr) return nullptr;
    Registry &r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    auto it = r.comms.find(id_of(handle));
    return it == r.comms.end() ? nullptr : it->second;
}

std::shared_ptr<Comm> unregister_comm(cc_coll_comm_h handle)
{
    if (handle == nullptr) return nullptr;
    Registry &r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    auto it = r.comms.find(id_of(handle));
    if (it == r.comms.end()) return nullptr;
    std::shared_ptr<Comm> comm = std::move(it->second);
    r.comms.erase(it);
    return comm;
}

}  // namespace cc_coll::detail
