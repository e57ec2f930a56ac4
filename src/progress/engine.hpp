// The progress engine of non-blocking collectives (docs/api.md,
// "Non-blocking collectives").
//
// A request is one collective, run as a fiber (progress/fiber.hpp) whose
// body is the blocking algorithm. Inside a fiber every MPI operation of the
// transport is started non-blocking and awaited by suspending (await()), so
// one thread interleaves any number of requests. A communicator's requests
// run one after another in the order they were posted (every rank posts
// them in the same order, so MPI matches them as it matches blocking
// collectives); the requests of different communicators interleave.
//
// Two drivers, chosen per communicator by CC_COLL_PROGRESS:
//  - Thread: one library thread per process resumes the fibers while the
//    caller computes (needs MPI_THREAD_MULTIPLE); the compression and
//    decompression run on it, off the caller's thread.
//  - Caller: no thread. post() runs a request until its first MPI wait;
//    cc_coll_test resumes every pending request once; cc_coll_wait resumes
//    them until its request completes. Resuming all of them, not only the
//    one waited for, keeps ranks that complete requests of different
//    communicators in different orders from waiting on each other.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include <mpi.h>

#include "cc_coll.h"

namespace cc_coll::detail {
class Comm;
}

namespace cc_coll::detail::progress {

// A byte range [lo, hi) a request reads or writes until it completes.
struct Range {
    std::uintptr_t lo = 0, hi = 0;
};

// Posts a request: `body` runs the collective (as the blocking entry point
// would after its argument checks) and returns its status, recording a
// message with fail() on failure. `reads` and `writes` are the caller's
// buffers the request uses; a write range that overlaps a range of a
// request still in flight (any communicator), or a read range that overlaps
// one's write range, is CC_COLL_ERR_INVALID_ARG and nothing is posted.
// On success *out is the new handle.
cc_coll_status_t post(const char *fn, const std::shared_ptr<Comm> &comm, std::vector<Range> reads,
                      std::vector<Range> writes, std::function<cc_coll_status_t()> body, cc_coll_request_h *out);

// *done = 1 once the request has completed, after advancing the engine
// once (caller mode). Returns the request's status once done, else
// CC_COLL_OK; a failed request's message becomes the calling thread's last
// error.
cc_coll_status_t test(const char *fn, cc_coll_request_h request, int *done);
// Until the request has completed; returns its status (its message as the
// last error).
cc_coll_status_t wait(const char *fn, cc_coll_request_h request);
// done (0/1) and, once done, the status and message of a request.
cc_coll_status_t query(const char *fn, cc_coll_request_h request, int *done, cc_coll_status_t *status,
                       const char **message);
// Forgets the handle. A request still in flight keeps running to its end
// (the other ranks take part in it); its buffers stay in use until then.
cc_coll_status_t release(const char *fn, cc_coll_request_h request);

// Requests posted on `comm` that have not completed (freed ones included).
std::size_t in_flight(const Comm &comm);
// Completes every request of `comm` (freed ones included), advancing the
// engine as wait() does. Returns CC_COLL_OK: a request's failure belongs to
// its handle.
void drain(const Comm &comm);

// Inside a fiber: starts nothing, waits for `*request` by suspending the
// fiber between MPI_Test calls. Outside a fiber: MPI_Wait. Returns MPI's
// error code.
int await(MPI_Request *request);
// Whether the calling thread runs inside a request (its MPI operations are
// then non-blocking ones).
bool in_request();

// At the start of MPI_Finalize: completes every request and stops the
// progress thread.
void at_finalize();

}  // namespace cc_coll::detail::progress
