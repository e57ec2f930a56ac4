// The decision whether an intercepted MPI_Allreduce or MPI_Iallreduce is
// compressed (consider, then the ranks' agreement), and the pieces of a
// compressed call: its parameters, its residual under CC_COLL_EF_MAX_BYTES,
// its counting, its failures.

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <tuple>

#include <mpi.h>

#include "cc_coll.h"
#include "core/preload_settings.hpp"
#include "decision.hpp"
#include "state.hpp"

namespace cc_coll_preload {

namespace {

// ---------------------------------------------------------------------------
// The decision and the compressed call.

// A predefined binary32 or binary64 type: the dtype and its size.
bool eligible_type(MPI_Datatype dt, cc_coll_dtype_t *dtype, int *size)
{
    const bool fp = dt == MPI_FLOAT || dt == MPI_REAL || dt == MPI_REAL4 || dt == MPI_DOUBLE ||
                    dt == MPI_DOUBLE_PRECISION || dt == MPI_REAL8;
    if (!fp || PMPI_Type_size(dt, size) != MPI_SUCCESS) return false;
    if (*size == 4) *dtype = CC_COLL_F32;
    else if (*size == 8) *dtype = CC_COLL_F64;
    else return false;
    return true;
}

// Whether `p` is device (or managed) memory, as the collectives will decide
// it (cc_coll_buffer_on_device: it never starts CUDA, and costs tens of
// nanoseconds for host memory in a process without CUDA); a failure counts
// as host memory, and the library reports it on the call itself.
bool on_device(const void *p) { return cc_coll_buffer_on_device(p) == 1; }

// Bytes of a new residual for `count` elements of `dtype`: binary64 for F64,
// binary32 otherwise (cc_coll.h, "Error-feedback store").
std::uint64_t residual_bytes(std::size_t count, cc_coll_dtype_t dtype)
{
    return static_cast<std::uint64_t>(count) * (dtype == CC_COLL_F64 ? sizeof(double) : sizeof(float));
}

// This rank's residual bytes on the entry's communicator, in *held: the
// library's count, or, while MPI_Iallreduce requests are in flight on it
// (the library then does not answer), the bytes of every residual the
// shim's calls may have created (e.residuals: observed, or reserved ahead
// of a request), which is never less. *estimated says which. False when
// neither is known.
bool held_bytes(Entry &e, std::uint64_t *held, bool *estimated)
{
    *estimated = false;
    if (cc_coll_ef_bytes(e.handle, held) == CC_COLL_OK) return true;
    if (e.in_flight.load() == 0) return false;
    std::uint64_t sum = 0;
    for (const ResidualKey &k : e.residuals)
        sum += residual_bytes(std::get<1>(k), static_cast<cc_coll_dtype_t>(std::get<2>(k)));
    *held = sum;
    *estimated = true;
    return true;
}

}  // namespace

// Prints `message` once per process and status, from rank 0 of the
// communicator (the statuses reported here happen on every rank together).
void report_once(int key, int comm_rank, const char *message, const char *detail)
{
    State &s = state();
    if (comm_rank != 0) return;
    {
        std::lock_guard<std::mutex> lock(s.mutex);
        if (!s.reported.insert(key).second) return;
    }
    std::fprintf(stderr, "[cc_coll] %s: %s; this call and later ones that meet the same condition pass through "
                 "to MPI uncompressed (reported once)\n",
                 message, detail);
}

// Whether a call's second-stage conditions can differ between ranks, so that
// the ranks must agree on each call (over the entry's `agree` duplicate).
bool needs_agreement(const State &s)
{
    return s.ef_cap || s.preflight_device || s.cfg.min_repeats > 0 || !s.cfg.allow.empty() || !s.cfg.deny.empty();
}

// The object, offset and symbol of a return address (dladdr), cached.
PreloadCallSite site_for(const void *ret)
{
    State &s = state();
    {
        std::lock_guard<std::mutex> lock(s.mutex);
        const auto it = s.sites.find(ret);
        if (it != s.sites.end()) return it->second;
    }
    PreloadCallSite site;
    Dl_info info{};
    if (ret != nullptr && dladdr(ret, &info) != 0) {
        std::string path = info.dli_fname != nullptr ? info.dli_fname : "";
        if (path.empty()) {  // the main program, on some C libraries
            char exe[4096];
            const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
            if (n > 0) path.assign(exe, static_cast<std::size_t>(n));
        }
        const std::size_t slash = path.rfind('/');
        site.object = slash == std::string::npos ? path : path.substr(slash + 1);
        site.offset = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(ret) -
                                                 reinterpret_cast<std::uintptr_t>(info.dli_fbase));
        if (info.dli_sname != nullptr) site.symbol = info.dli_sname;
    }
    std::lock_guard<std::mutex> lock(s.mutex);
    return s.sites.emplace(ret, site).first->second;
}

std::string comm_name(MPI_Comm comm)
{
    char name[MPI_MAX_OBJECT_NAME] = {0};
    int len = 0;
    if (PMPI_Comm_get_name(comm, name, &len) != MPI_SUCCESS) return "";
    return std::string(name, static_cast<std::size_t>(std::max(0, std::min(len, MPI_MAX_OBJECT_NAME))));
}

// The conditions of this rank that the library would detect before any
// communication: a new residual over CC_COLL_EF_MAX_BYTES (kBitEfCap), and
// where the buffers are (kBitDevice, kBitHost). With `reserve`, a call that
// may create a residual puts its key in e.residuals at once (*reserved),
// so that the calls posted after it, before it runs, count its bytes.
int local_bits(Entry &e, const void *src, void *recv, std::size_t count, cc_coll_dtype_t dtype, EfCheck *ef,
               bool reserve, bool *reserved)
{
    const State &s = state();
    int bits = 0;
    if (s.ef_cap) {
        std::lock_guard<std::mutex> lock(e.residuals_mutex);
        const ResidualKey key{recv, count, dtype};
        if (e.residuals.count(key) == 0) {
            std::uint64_t held = 0;
            bool estimated = false;
            // Should the count be unknown, the call passes through on every rank.
            if (!held_bytes(e, &held, &estimated) || held + residual_bytes(count, dtype) > s.cfg.ef_max_bytes) {
                bits |= kBitEfCap;
            } else {
                ef->held = held;
                ef->estimated = estimated;
                if (reserve) *reserved = e.residuals.insert(key).second;
            }
        }
    }
    if (s.preflight_device) bits |= on_device(src) || on_device(recv) ? kBitDevice : kBitHost;
    return bits;
}

// Conditions that may hold on some ranks only: `bits`, the second stage of
// the decision taken by the caller (kBitTargeting, kBitRepeats), and
// local_bits'. Agreed on (MPI_BOR) over the shim's private duplicate so
// that every rank passes the call through together. Runs only when such a
// condition can arise (needs_agreement).
int preflight(Entry &e, const void *src, void *recv, std::size_t count, cc_coll_dtype_t dtype, int bits,
              EfCheck *ef)
{
    *ef = EfCheck{};
    if (e.agree == MPI_COMM_NULL) return 0;
    bits |= local_bits(e, src, recv, count, dtype, ef, false, nullptr);
    // Should the agreement itself fail, every rank passes the call through.
    if (PMPI_Allreduce(MPI_IN_PLACE, &bits, 1, MPI_INT, MPI_BOR, e.agree) != MPI_SUCCESS) return kBitTargeting;
    return bits;
}

// After a compressed call that could create a residual: remembers its key
// when it did (this rank's residual bytes grew), or may have (the count
// before it was the shim's bound).
void note_residual(Entry *e, void *recv, std::size_t count, cc_coll_dtype_t dtype, const EfCheck &ef)
{
    if (ef.held == UINT64_MAX) return;
    std::uint64_t held = 0;
    const bool known = cc_coll_ef_bytes(e->handle, &held) == CC_COLL_OK;
    if (ef.estimated || !known || held > ef.held) {
        std::lock_guard<std::mutex> lock(e->residuals_mutex);
        e->residuals.insert(ResidualKey{recv, count, dtype});
    }
}

// The verdict on agreed bits: true to compress; otherwise every rank passes
// the call through (counted, and reported once where it is a cap or the
// buffers' place).
bool agreed_to_compress(const Entry &e, int bits)
{
    State &s = state();
    if (bits & (kBitTargeting | kBitRepeats)) {
        std::lock_guard<std::mutex> lock(s.mutex);
        if (bits & kBitTargeting) s.totals.pass_targeting += 1;
        else s.totals.pass_repeats += 1;
        return false;
    }
    if (bits & kBitEfCap)
        report_once(CC_COLL_ERR_EF_LIMIT, e.rank, "CC_COLL_EF_MAX_BYTES reached",
                    "a new error-feedback residual would pass the cap on some rank");
    const bool mixed = (bits & (kBitDevice | kBitHost)) == (kBitDevice | kBitHost);
    if (mixed)
        report_once(CC_COLL_ERR_MISMATCH, e.rank, "device buffers",
                    "some ranks pass device memory and others host memory to this MPI_Allreduce");
    return (bits & kBitEfCap) == 0 && !mixed;
}

// Whether libcc_coll's status is one that every rank sees together, so that
// every rank can pass the call through (MISMATCH comes from the gathered
// headers; the others cannot happen after the agreement, but are
// consistent where they do).
bool failed_together(cc_coll_status_t st)
{
    return st == CC_COLL_ERR_MISMATCH || st == CC_COLL_ERR_EF_LIMIT || st == CC_COLL_ERR_NOT_SUPPORTED;
}

// A tensor's state besides its residual (LOWRANK's call count and
// factors) is keyed by its receive buffer, count and type: the program
// cannot give a key through MPI_Allreduce. When malloc hands a freed
// buffer's address back on some ranks only, those ranks meet another
// tensor's state there and the ranks' call counts disagree, which every
// rank sees as CC_COLL_ERR_MISMATCH before any data moves. Drops that key's
// state (and residual) on this rank, as every rank does at the same call;
// true when the call should run again from the fresh state.
bool dropped_disagreeing_state(const Entry &e, const cc_coll_params_t &p, const void *recv, std::size_t n,
                               cc_coll_dtype_t dtype, cc_coll_status_t st)
{
    if (st != CC_COLL_ERR_MISMATCH) return false;
    if (!(cc_coll_method_caps(p.method) & (CC_COLL_METHOD_CAP_STATE | CC_COLL_METHOD_CAP_SELECTS))) return false;
    return cc_coll_ef_reset(e.handle, &p, recv, n, dtype) == CC_COLL_OK;
}

// The parameters of every compressed call, from the settings.
cc_coll_params_t compress_params()
{
    const State &s = state();
    cc_coll_params_t p{};
    p.mask = CC_COLL_PARAMS_FIELD_METHOD | CC_COLL_PARAMS_FIELD_DENSITY | CC_COLL_PARAMS_FIELD_EF;
    p.method = s.cfg.method;
    p.density = s.cfg.density;
    p.ef = s.cfg.ef ? 1 : 0;
    if (cc_coll_method_caps(p.method) & (CC_COLL_METHOD_CAP_MATRIX | CC_COLL_METHOD_CAP_SELECTS)) {
        // An MPI_Allreduce buffer has no tensor shape (it is often a
        // whole bucket): a method that views a tensor as a matrix, or
        // may pick one per call, gets the near-square view (rows = cols
        // = 0), not the dense sending of a tensor without a shape.
        p.mask |= CC_COLL_PARAMS_FIELD_SHAPE;
        p.rows = 0;
        p.cols = 0;
    }
    return p;
}

cc_coll_params_t prediction_params()
{
    const State &s = state();
    cc_coll_params_t p{};
    p.mask = CC_COLL_PARAMS_FIELD_METHOD | CC_COLL_PARAMS_FIELD_DENSITY | CC_COLL_PARAMS_FIELD_EF |
             CC_COLL_PARAMS_FIELD_SHAPE;
    p.method = CC_COLL_METHOD_AUTO;  // ignored by the prediction
    p.density = s.cfg.density;
    p.ef = s.cfg.ef ? 1 : 0;
    p.rows = 0;  // the near-square view, as compress_params gives a method that takes a matrix
    p.cols = 0;
    return p;
}

// After the collective measurement when the entry was made (measure_model),
// cc_coll_auto_predict is local and gives every rank the same answer. It
// does not answer while MPI_Iallreduce requests are in flight on the
// communicator: that call then has no prediction, and the next one asks
// again.
Prediction predict_for(Entry &e, std::size_t n, cc_coll_dtype_t dtype)
{
    Prediction out;
    if (!e.model) return out;
    const std::pair<std::size_t, int> key{n, dtype};
    std::lock_guard<std::mutex> lock(e.predictions_mutex);
    const auto it = e.predictions.find(key);
    if (it != e.predictions.end()) return it->second;
    const cc_coll_params_t p = prediction_params();
    if (cc_coll_auto_predict(e.handle, n, dtype, &p, &out.chosen, &out.none, &out.lossy) != CC_COLL_OK) return out;
    out.known = true;
    e.predictions.emplace(key, out);
    return out;
}

void count_advice(const void *ret, const Candidate &c, MPI_Comm comm)
{
    State &s = state();
    site_for(ret);  // resolved now, for the report
    std::string name = c.targeting ? c.name : comm_name(comm);
    if (name.empty()) name = "an unnamed communicator";
    const Prediction prediction = predict_for(*c.e, c.n, c.dtype);
    std::lock_guard<std::mutex> lock(s.mutex);
    AdviceTotals &a = s.advice_sites[AdviceKey{ret, c.n, c.dtype, name, c.e->size}];
    a.calls += 1;
    a.bytes += c.bytes;
    if (prediction.known) a.prediction = prediction;
}

// Counts a compressed call that completed (`seconds`: its time, blocking
// calls only).
void count_compressed(const void *ret, std::size_t n, cc_coll_dtype_t dtype, std::uint64_t bytes,
                      const std::string &comm, double seconds, bool nonblocking, const Prediction *prediction)
{
    State &s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.cfg.stats) {
        SiteTotals &site = s.compressed_sites[SiteKey{ret, n, dtype}];
        site.calls += 1;
        site.bytes += bytes;
        site.comm = comm.empty() ? "an unnamed communicator" : comm;
    }
    s.totals.compressed += 1;
    s.totals.bytes_uncompressed += bytes;
    s.totals.seconds += seconds;
    if (nonblocking) s.totals.compressed_nonblocking += 1;
    if (prediction != nullptr && prediction->known) {
        s.totals.predicted_calls += 1;
        s.totals.predicted_seconds += seconds;
        s.totals.predicted_none += prediction->none;
    } else if (prediction != nullptr) {
        s.totals.unpredicted_calls += 1;
    }
}

const char *mpi_error_name(int err) { return err == MPI_ERR_NO_MEM ? "MPI_ERR_NO_MEM" : "MPI_ERR_OTHER"; }

// Reports a failure seen on this rank only and hands MPI_ERR_* to the
// communicator's error handler, as a failing MPI call would. `fn`: the MPI
// function the program called.
int local_failure(const char *fn, MPI_Comm comm, int err, const char *what, const char *detail)
{
    std::fprintf(stderr,
                 "[cc_coll] rank %d: compressed %s failed: %s: %s; returning %s through the communicator's error "
                 "handler\n",
                 state().world_rank, fn, what, detail, mpi_error_name(err));
    PMPI_Comm_call_errhandler(comm, err);
    return err;
}



// The decision up to the agreement, the same for MPI_Allreduce and
// MPI_Iallreduce: stage 1, the communicator's entry, and this rank's stage
// 2 (its key counted for CC_COLL_MIN_REPEATS). False: the call passes
// through to MPI unchanged. `ret`: the return address of the program's call
// (its call site).
bool consider(const void *send, void *recv, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm, const void *ret,
              Candidate *c)
{
    State &s = state();
    destroy_zombies();
    if (count <= 0 || op != MPI_SUM || comm == MPI_COMM_NULL) return false;
    int size = 0;
    if (!eligible_type(dt, &c->dtype, &size)) return false;
    c->bytes = static_cast<std::uint64_t>(count) * static_cast<std::uint64_t>(size);
    if (c->bytes < s.cfg.min_bytes) return false;
    if (send == MPI_BOTTOM || recv == MPI_BOTTOM) return false;
    int inter = 0;
    if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS || inter) return false;
    // One rank: nothing moves, and MPI's result is the input itself.
    int comm_size = 0;
    if (PMPI_Comm_size(comm, &comm_size) != MPI_SUCCESS || comm_size < 2) {
        std::lock_guard<std::mutex> lock(s.mutex);
        s.totals.pass_one_rank += 1;
        return false;
    }
    c->e = entry_for(comm);
    if (c->e == nullptr || c->e->handle == nullptr) return false;

    // The second stage: this rank's view, agreed on by the caller.
    c->n = static_cast<std::size_t>(count);
    c->targeting = !s.cfg.allow.empty() || !s.cfg.deny.empty();
    if (c->targeting) {
        c->name = comm_name(comm);
        const PreloadCallSite site = site_for(ret);
        if (preload_patterns_match(s.cfg.deny, c->name, site) ||
            (!s.cfg.allow.empty() && !preload_patterns_match(s.cfg.allow, c->name, site)))
            c->local |= kBitTargeting;
    }
    if (s.cfg.min_repeats > 0) {
        Entry *e = c->e;
        if (e->repeats.size() >= kMaxRepeatKeys) e->repeats.clear();
        std::uint64_t &seen_before = e->repeats[RepeatKey{ret, recv, c->n, c->dtype}];
        if (seen_before < s.cfg.min_repeats) c->local |= kBitRepeats;
        if (seen_before < UINT64_MAX) ++seen_before;
    }
    c->src = send == MPI_IN_PLACE ? recv : send;
    return true;
}
}  // namespace cc_coll_preload
