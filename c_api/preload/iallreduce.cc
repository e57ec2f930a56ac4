// MPI_Iallreduce.
//
// The same decision as MPI_Allreduce (consider), but nothing in the call
// waits for the other ranks, as MPI_Iallreduce must not: where the ranks
// must agree (needs_agreement), the call posts its 4-byte agreement as an
// MPI_Iallreduce on the entry's `agree` duplicate, in the program's order,
// and returns its generalized request. Once the agreement has completed the
// call is decided, in posting order per communicator: compressed
// (cc_coll_iallreduce on the entry's libcc_coll communicator) or passed
// through (MPI_Iallreduce with the program's own arguments on the entry's
// `pass` duplicate, which only these calls use, so that their order there
// is the same on every rank whenever each rank gets to decide them). The
// first such call on a communicator makes `pass` (MPI_Comm_dup, collective:
// MPI_Comm_idup's context-id agreement, run from MPI's progress, was seen to
// hang beside the shim's own collectives on `agree`). Where nothing can
// differ between ranks there is no agreement: the call is compressed at
// once. Calls that stage 1 passes through go to PMPI_Iallreduce and the
// program gets MPI's own request.
//
// Requests advance in advance_locked: from the completion functions and
// MPI_Iallreduce, from a blocking call on the same communicator (settle),
// from MPI_Finalize (finish_requests), and under MPI_THREAD_MULTIPLE from
// the shim's progress thread, so that they also complete while the program
// waits in a call the shim does not see.

// The generalized request's callbacks. MPI may run them under its own

#include <cstdio>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <vector>

#include <mpi.h>

#include "cc_coll.h"
#include "decision.hpp"
#include "entry_points.hpp"
#include "requests.hpp"
#include "state.hpp"

namespace cc_coll_preload {

namespace {

// locks: they take none of the shim's.
int query_request(void *extra, MPI_Status *status)
{
    const ShimRequest *r = static_cast<const ShimRequest *>(extra);
    const int err = r->error.load(std::memory_order_acquire);
    // A collective's status: empty, but for the error.
    PMPI_Status_set_elements(status, MPI_BYTE, 0);
    PMPI_Status_set_cancelled(status, 0);
    status->MPI_SOURCE = MPI_ANY_SOURCE;
    status->MPI_TAG = MPI_ANY_TAG;
    status->MPI_ERROR = err;
    return err;
}

int free_request(void *extra)
{
    release(static_cast<ShimRequest *>(extra));
    return MPI_SUCCESS;
}

// A collective cannot be cancelled (the other ranks take part in it): the
// request runs to its end and its status says it was not cancelled.
int cancel_request(void *, int) { return MPI_SUCCESS; }

// A failure of one request, seen on this rank: reported, and the request's
// MPI error.
void fail_request(ShimRequest *r, int err, const char *what, const char *detail)
{
    char code[48];
    if (err == MPI_ERR_NO_MEM || err == MPI_ERR_OTHER) std::snprintf(code, sizeof code, "%s", mpi_error_name(err));
    else std::snprintf(code, sizeof code, "MPI's error code %d", err);
    std::fprintf(stderr, "[cc_coll] rank %d: compressed MPI_Iallreduce failed: %s: %s; its request completes with %s\n",
                 state().world_rank, what, detail, code);
    r->error.store(err, std::memory_order_release);
}

// Gives back the residual key a request reserved, when it does not run
// compressed.
void unreserve(ShimRequest *r)
{
    if (!r->reserved) return;
    r->reserved = false;
    std::lock_guard<std::mutex> lock(r->e->residuals_mutex);
    r->e->residuals.erase(ResidualKey{r->recv, r->n, r->dtype});
}

// Hands a request to libcc_coll. kPosted; kPassThrough: a status every
// rank sees together, so every rank passes the call through; kFailed: this
// rank's failure, libcc_coll's status in *st (its message in
// cc_coll_last_error()).
enum class Posting { kPosted, kPassThrough, kFailed };
Posting post_compressed(ShimRequest *r, cc_coll_status_t *st)
{
    const cc_coll_params_t p = compress_params();
    cc_coll_request_h h = nullptr;
    *st = cc_coll_iallreduce(r->src, r->recv, r->n, r->dtype, CC_COLL_SUM, &p, r->e->handle, nullptr, &h);
    if (*st == CC_COLL_OK) {
        r->lib = h;
        r->step = ShimRequest::Step::kCompressing;
        return Posting::kPosted;
    }
    if (failed_together(*st)) {
        report_once(*st, r->e->rank, cc_coll_status_string(*st), cc_coll_last_error());
        return Posting::kPassThrough;
    }
    return Posting::kFailed;
}

int mpi_error_of(cc_coll_status_t st) { return st == CC_COLL_ERR_NO_MEMORY ? MPI_ERR_NO_MEM : MPI_ERR_OTHER; }

// Advice mode (CC_COLL_ADVISE): counts the call when it would be compressed
// as far as this rank can tell, without an agreement (MPI_Iallreduce must
// not wait for the other ranks, and the program gets MPI's own request).
// Nothing here fails the call: a failure leaves it uncounted.
void advise_nonblocking(const void *send, void *recv, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm,
                        const void *ret) noexcept
{
    try {
        Candidate c;
        if (consider(send, recv, count, dt, op, comm, ret, &c) && agreed_to_compress(*c.e, c.local))
            count_advice(ret, c, comm);
    } catch (...) {
    }
}

}  // namespace

// Decides and posts the undecided calls of an entry whose agreement has
// completed, in order; stops at the first whose agreement has not. Failed
// requests go to *done. Returns whether a call moved. Under
// Requests::drive.
bool decide_locked(Entry *e, std::vector<ShimRequest *> *done)
{
    Requests &q = requests();
    bool moved = false;
    while (!e->undecided.empty()) {
        ShimRequest *r = e->undecided.front();
        int flag = 0;
        const int rc = PMPI_Test(&r->agree, &flag, MPI_STATUS_IGNORE);
        if (rc == MPI_SUCCESS && flag == 0) return moved;
        // Should the agreement itself fail, every rank passes the call
        // through.
        if (rc != MPI_SUCCESS) r->bits = kBitTargeting;
        moved = true;
        e->undecided.pop_front();
        if (agreed_to_compress(*e, r->bits)) {
            cc_coll_status_t st = CC_COLL_OK;
            const Posting posting = post_compressed(r, &st);
            if (posting == Posting::kPosted) {
                q.running.push_back(r);
                continue;
            }
            if (posting == Posting::kFailed) {
                fail_request(r, mpi_error_of(st), cc_coll_status_string(st), cc_coll_last_error());
                unreserve(r);
                done->push_back(r);
                continue;
            }
        }
        // Passed through, on `pass`.
        unreserve(r);
        const int err = e->pass == MPI_COMM_NULL
                            ? MPI_ERR_COMM
                            : PMPI_Iallreduce(r->send, r->recv, r->count, r->datatype, MPI_SUM, e->pass, &r->pass);
        if (err != MPI_SUCCESS) {
            fail_request(r, err, "MPI_Iallreduce",
                         e->pass == MPI_COMM_NULL ? "the shim could not duplicate the communicator"
                                                  : "MPI failed to start the uncompressed call");
            done->push_back(r);
            continue;
        }
        r->step = ShimRequest::Step::kPassing;
        q.running.push_back(r);
    }
    return moved;
}

// Whether a running request has completed (advancing libcc_coll's requests
// when the caller drives them). Under Requests::drive.
bool finished_locked(ShimRequest *r)
{
    if (r->step == ShimRequest::Step::kPassing) {
        int flag = 0;
        const int rc = PMPI_Test(&r->pass, &flag, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) {
            r->error.store(rc, std::memory_order_release);
            return true;
        }
        return flag != 0;
    }
    int done = 0;
    const cc_coll_status_t st = cc_coll_test(r->lib, &done);
    if (done == 0 && st == CC_COLL_OK) return false;
    if (st == CC_COLL_OK) {
        count_compressed(r->ret, r->n, r->dtype, r->bytes, r->comm, 0.0, true, nullptr);
    } else {
        const char *message = "";
        if (done == 0 || cc_coll_request_status(r->lib, nullptr, nullptr, &message) != CC_COLL_OK)
            message = cc_coll_last_error();
        fail_request(r, mpi_error_of(st), cc_coll_status_string(st), message);
    }
    cc_coll_request_free(r->lib);
    r->lib = nullptr;
    return true;
}

// Completes a request: MPI_Grequest_complete, then the shim lets go of it.
void complete(ShimRequest *r)
{
    Requests &q = requests();
    r->e->in_flight.fetch_sub(1);
    PMPI_Grequest_complete(r->user);
    q.pending.fetch_sub(1, std::memory_order_acq_rel);
    release(r);
}

// True when the call was handled here: *request is the program's request
// and *rc MPI_SUCCESS, or *rc an error; false: the caller passes the call to
// MPI unchanged.
bool intercept_nonblocking(const void *send, void *recv, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm,
                           const void *ret, MPI_Request *request, int *rc) noexcept
{
    State &s = state();
    if (s.advise.load() && !s.torn_down.load()) {
        advise_nonblocking(send, recv, count, dt, op, comm, ret);
        return false;
    }
    if (!s.active.load() || s.torn_down.load()) return false;
    // Until a request is handed out, a failure leaves the program none.
    *request = MPI_REQUEST_NULL;
    std::unique_ptr<ShimRequest> owned;
    try {
        Candidate c;
        if (!consider(send, recv, count, dt, op, comm, ret, &c)) return false;
        Entry *e = c.e;
        owned = std::make_unique<ShimRequest>();
        ShimRequest *r = owned.get();
        r->e = e;
        r->send = send;
        r->recv = recv;
        r->count = count;
        r->datatype = dt;
        r->src = c.src;
        r->n = c.n;
        r->dtype = c.dtype;
        r->bytes = c.bytes;
        r->ret = ret;
        if (s.cfg.stats) {
            site_for(ret);  // resolved now, for the summary
            r->comm = c.targeting ? c.name : comm_name(comm);
        }
        const bool agree = e->agree != MPI_COMM_NULL;
        if (agree && !e->pass_made) {
            // Collective, like the creation of the entry: every rank makes
            // this call, the first of its kind on the communicator.
            e->pass_made = true;
            if (PMPI_Comm_dup(e->agree, &e->pass) != MPI_SUCCESS) e->pass = MPI_COMM_NULL;
        }
        if (agree) {
            EfCheck ef;
            r->bits = c.local | local_bits(*e, c.src, recv, c.n, c.dtype, &ef, true, &r->reserved);
        } else {
            cc_coll_status_t st = CC_COLL_OK;
            const Posting posting = post_compressed(r, &st);
            if (posting == Posting::kPassThrough) return false;
            if (posting == Posting::kFailed) {
                *rc = local_failure("MPI_Iallreduce", comm, mpi_error_of(st), cc_coll_status_string(st),
                                    cc_coll_last_error());
                return true;
            }
        }
        int err = PMPI_Grequest_start(query_request, free_request, cancel_request, r, &r->user);
        if (err != MPI_SUCCESS) {
            // Nothing of it is on the wire, but for a compressed request.
            if (r->lib != nullptr) cc_coll_request_free(r->lib);
            unreserve(r);
            *rc = local_failure("MPI_Iallreduce", comm, MPI_ERR_OTHER, "MPI_Grequest_start failed",
                                "no request for the program");
            return true;
        }
        // The agreement is posted by the thread that makes the call, in the
        // program's order on the communicator (MPI has the program make a
        // communicator's collectives from one thread at a time).
        if (agree && (err = PMPI_Iallreduce(MPI_IN_PLACE, &r->bits, 1, MPI_INT, MPI_BOR, e->agree, &r->agree)) !=
                         MPI_SUCCESS) {
            // The generalized request goes back to MPI, completed and freed.
            unreserve(r);
            r->refs.store(1);
            MPI_Request user = r->user;
            PMPI_Grequest_complete(user);
            PMPI_Request_free(&user);
            (void)owned.release();  // free_request deletes it
            *rc = local_failure("MPI_Iallreduce", comm, MPI_ERR_OTHER, "the agreement failed",
                                "MPI_Iallreduce of the shim's agreement could not start");
            return true;
        }
        Requests &q = requests();
        std::lock_guard<std::mutex> lock(q.drive);
        if (agree) {
            if (e->undecided.empty()) q.deciding.push_back(e);
            e->undecided.push_back(r);
        } else {
            q.running.push_back(r);
        }
        e->in_flight.fetch_add(1);
        *request = r->user;
        owned.release();
        add_pending();
        advance_locked();
        *rc = MPI_SUCCESS;
        return true;
    } catch (const std::bad_alloc &) {
        // A generalized request already started stays MPI's (leaked).
        if (owned && owned->user != MPI_REQUEST_NULL) (void)owned.release();
        *rc = local_failure("MPI_Iallreduce", comm, MPI_ERR_NO_MEM, "out of memory", "in the LD_PRELOAD shim");
    } catch (const std::exception &ex) {
        if (owned && owned->user != MPI_REQUEST_NULL) (void)owned.release();
        *rc = local_failure("MPI_Iallreduce", comm, MPI_ERR_OTHER, "unexpected exception", ex.what());
    } catch (...) {
        if (owned && owned->user != MPI_REQUEST_NULL) (void)owned.release();
        *rc = local_failure("MPI_Iallreduce", comm, MPI_ERR_OTHER, "unexpected exception", "non-standard");
    }
    return true;
}
}  // namespace cc_coll_preload
