// The libcc_coll communicator the shim keeps per MPI communicator (an
// Entry, cached as an attribute): created at the communicator's first
// eligible call, queued by the attribute's delete callback when the program
// frees the communicator, and destroyed outside MPI's callbacks once its
// MPI_Iallreduce requests have completed.

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <vector>

#include <mpi.h>

#include "cc_coll.h"
#include "decision.hpp"
#include "requests.hpp"
#include "state.hpp"

namespace cc_coll_preload {

namespace {

// Destroys an entry's libcc_coll communicator (MPI_Comm_free of its private
// duplicate) and the entry; returns the wire bytes it counted. Called without
// the mutex: MPI may take its own locks in there, and delete_entry, which
// takes the mutex, runs under them.
std::uint64_t retire(Entry *e)
{
    std::uint64_t wire = 0;
    if (e->handle != nullptr) {
        cc_coll_stats_t st{};
        st.mask = CC_COLL_STATS_FIELD_BYTES_WIRE;
        if (cc_coll_comm_get_stats(e->handle, &st) == CC_COLL_OK) wire = st.bytes_wire;
        cc_coll_comm_destroy(e->handle);
    }
    if (e->pass != MPI_COMM_NULL) PMPI_Comm_free(&e->pass);
    if (e->agree != MPI_COMM_NULL) PMPI_Comm_free(&e->agree);
    delete e;
    return wire;
}


// Whether an entry has nothing of MPI_Iallreduce in flight (the user
// communicator may be freed with requests pending: they complete first).
// Under Requests::drive.
bool idle_locked(const Entry *e) { return e->in_flight.load() == 0 && e->undecided.empty(); }

}  // namespace

void retire_all(const std::vector<Entry *> &entries)
{
    std::uint64_t wire = 0;
    for (Entry *e : entries) wire += retire(e);
    State &s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    s.totals.bytes_wire += wire;
}

// Destroys the communicators whose user communicator was freed, once their
// requests have completed. Runs outside attribute callbacks.
void destroy_zombies()
{
    State &s = state();
    if (!s.have_zombies.load()) return;
    std::vector<Entry *> zombies, ready, later;
    {
        std::lock_guard<std::mutex> lock(s.mutex);
        zombies.swap(s.zombies);
        s.have_zombies = false;
    }
    {
        std::lock_guard<std::mutex> lock(requests().drive);
        for (Entry *e : zombies) (idle_locked(e) ? ready : later).push_back(e);
    }
    if (!later.empty()) {
        std::lock_guard<std::mutex> lock(s.mutex);
        s.zombies.insert(s.zombies.end(), later.begin(), later.end());
        s.have_zombies = true;
    }
    retire_all(ready);
}

// Attribute delete callback: the user freed the communicator (or the shim
// deletes the attribute at MPI_Finalize). No MPI call in here.
int delete_entry(MPI_Comm, int, void *value, void *)
{
    State &s = state();
    Entry *e = static_cast<Entry *>(value);
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.live.erase(e) == 0) return MPI_SUCCESS;  // not ours any more
    s.zombies.push_back(e);
    s.have_zombies = true;
    return MPI_SUCCESS;
}

namespace {

// AUTO's cost model on a new entry's communicator, for the predictions of
// the reports: in advice mode, and when some rank of the communicator has
// CC_COLL_STATS=1 (agreed on here, so that a rank whose setting differs
// cannot leave the others waiting). Collective, like the entry's creation:
// every rank makes this call. A failure leaves the entry without a model
// (its calls are reported without a prediction), said once by rank 0.
void measure_model(MPI_Comm comm, Entry *e)
{
    State &s = state();
    int wanted = s.advise.load() || s.cfg.stats ? 1 : 0;
    if (!s.advise.load() && PMPI_Allreduce(MPI_IN_PLACE, &wanted, 1, MPI_INT, MPI_MAX, comm) != MPI_SUCCESS) return;
    if (!wanted) return;
    const cc_coll_params_t p = prediction_params();
    const cc_coll_status_t st = cc_coll_auto_predict(e->handle, 1, CC_COLL_F32, &p, nullptr, nullptr, nullptr);
    e->model = st == CC_COLL_OK;
    static std::atomic<bool> said{false};
    if (!e->model && e->rank == 0 && !said.exchange(true))
        std::fprintf(stderr,
                     "[cc_coll] preload: cannot measure CC_COLL_METHOD=auto's cost model on a communicator: %s: %s; "
                     "its calls are reported without a predicted time (reported once)\n",
                     cc_coll_status_string(st), cc_coll_last_error());
}

}  // namespace

// The entry cached on `comm`, created at the communicator's first eligible
// call (collective: every rank makes that call). nullptr: pass through.
Entry *entry_for(MPI_Comm comm)
{
    State &s = state();
    void *value = nullptr;
    int flag = 0;
    if (PMPI_Comm_get_attr(comm, s.keyval, &value, &flag) != MPI_SUCCESS) return nullptr;
    if (flag) return static_cast<Entry *>(value);
    Entry *e = new Entry;
    e->user = comm;
    PMPI_Comm_rank(comm, &e->rank);
    PMPI_Comm_size(comm, &e->size);
    const cc_coll_status_t st = cc_coll_comm_create(comm, &e->handle);
    const char *why = nullptr;
    if (st != CC_COLL_OK) {
        e->handle = nullptr;
        why = cc_coll_last_error();
    } else if (needs_agreement(s)) {
        int rc = PMPI_Comm_dup(comm, &e->agree);
        if (rc != MPI_SUCCESS) e->agree = MPI_COMM_NULL;
        else rc = PMPI_Comm_set_errhandler(e->agree, MPI_ERRORS_RETURN);
        if (rc != MPI_SUCCESS) {
            why = "MPI_Comm_dup of the communicator failed";
            if (e->agree != MPI_COMM_NULL) PMPI_Comm_free(&e->agree);
            cc_coll_comm_destroy(e->handle);
            e->handle = nullptr;
        }
    }
    if (why != nullptr && e->rank == 0)
        std::fprintf(stderr,
                     "[cc_coll] preload: cannot set up compression on a communicator: %s; its MPI_Allreduce "
                     "calls pass through to MPI uncompressed\n",
                     why);
    if (e->handle != nullptr) measure_model(comm, e);
    {
        std::lock_guard<std::mutex> lock(s.mutex);
        s.live.insert(e);
    }
    if (PMPI_Comm_set_attr(comm, s.keyval, e) != MPI_SUCCESS) {
        {
            std::lock_guard<std::mutex> lock(s.mutex);
            s.live.erase(e);
        }
        retire_all({e});
        return nullptr;
    }
    return e;
}
}  // namespace cc_coll_preload
