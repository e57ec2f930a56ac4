// MPI_Iallreduce's requests: what a shim request is (iallreduce.cc runs
// its steps) and the table of requests in flight with what advances them
// (request_progress.cc).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <mpi.h>

#include "cc_coll.h"
#include "state.hpp"

namespace cc_coll_preload {

// ---------------------------------------------------------------------------
// MPI_Iallreduce: what a shim request is (iallreduce.cc runs its steps,
// request_progress.cc advances them).
//
// An eligible MPI_Iallreduce gives the program a generalized request
// (MPI_Grequest_start) whose extra state is a ShimRequest. The shim
// completes it (MPI_Grequest_complete) once the collective behind it has
// completed: libcc_coll's request (cc_coll_iallreduce), or, where the ranks'
// agreement passes the call through, MPI's own MPI_Iallreduce on the shim's
// duplicate `pass`. Until then the program's completion functions (MPI_Wait,
// MPI_Test, ...) advance it, as does, under MPI_THREAD_MULTIPLE, the shim's
// progress thread.

struct ShimRequest {
    enum class Step {
        kAgreeing,     // the agreement (4-byte MPI_Iallreduce on `agree`) in flight
        kPassing,      // MPI_Iallreduce on `pass` in flight
        kCompressing,  // libcc_coll's request in flight
    };
    // Two owners: MPI (until it calls the free callback) and the shim (until
    // it has called MPI_Grequest_complete); the last one deletes it.
    std::atomic<int> refs{2};
    // The request's MPI error, set before MPI_Grequest_complete and read by
    // the query callback.
    std::atomic<int> error{MPI_SUCCESS};
    MPI_Request user = MPI_REQUEST_NULL;  // the generalized request
    Step step = Step::kAgreeing;
    Entry *e = nullptr;
    // The call, as the program made it (sendbuf may be MPI_IN_PLACE) and as
    // libcc_coll takes it.
    const void *send = nullptr;
    void *recv = nullptr;
    int count = 0;
    MPI_Datatype datatype = MPI_DATATYPE_NULL;
    const void *src = nullptr;
    std::size_t n = 0;
    cc_coll_dtype_t dtype = CC_COLL_F32;
    std::uint64_t bytes = 0;
    const void *ret = nullptr;  // call site
    std::string comm;           // the communicator's name, for the summary
    int bits = 0;               // the agreement's buffer
    MPI_Request agree = MPI_REQUEST_NULL;
    MPI_Request pass = MPI_REQUEST_NULL;
    cc_coll_request_h lib = nullptr;
    bool reserved = false;  // put its residual's key in e->residuals ahead of the call
};

inline void release(ShimRequest *r)
{
    if (r->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete r;
}

struct Requests {
    // Held while advancing requests, and guards every field up to
    // `pending` and each Entry's `undecided`.
    // MPI may be called under it; the generalized requests' callbacks,
    // which MPI runs under its own locks, never take it.
    std::mutex drive;
    std::vector<Entry *> deciding;        // entries with undecided calls
    std::vector<ShimRequest *> running;   // kPassing and kCompressing
    // Requests not completed yet: while 0 the completion functions go
    // straight to MPI.
    std::atomic<std::size_t> pending{0};
    // The progress thread (MPI_THREAD_MULTIPLE only).
    std::mutex thread_mutex;
    std::condition_variable wake;
    std::thread thread;
    bool stop = false;  // under thread_mutex
};

// The table (request_progress.cc). Never destroyed: its thread may outlive
// static destructors.
Requests &requests();

inline bool shim_pending() { return requests().pending.load(std::memory_order_acquire) != 0; }

// ---------------------------------------------------------------------------
// A request's steps (iallreduce.cc), under Requests::drive.

// Decides and posts the undecided calls of an entry whose agreement has
// completed, in order; failed requests go to *done. Whether a call moved.
bool decide_locked(Entry *e, std::vector<ShimRequest *> *done);
// Whether a running request has completed.
bool finished_locked(ShimRequest *r);
// Completes a request: MPI_Grequest_complete, then the shim lets go of it.
void complete(ShimRequest *r);

// ---------------------------------------------------------------------------
// Advancing (request_progress.cc).

// Advances every request once; whether any moved. Under Requests::drive.
bool advance_locked();
// One round from a completion function, unless another thread is advancing.
bool poke();
// Before a blocking call on an entry's communicator: the MPI_Iallreduce
// calls posted on it before are decided and handed to libcc_coll or MPI
// first, so that every rank hands libcc_coll its collectives in the same
// order. Every rank posted their agreements before this call, so this waits
// for nothing that is not already on its way.
void settle(Entry *e);
// Counts a new request as pending (and wakes the progress thread).
void add_pending();
// At MPI_Finalize: every request runs to its end, the progress thread stops.
void finish_requests();

}  // namespace cc_coll_preload
