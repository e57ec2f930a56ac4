// Method LOWRANK: PowerSGD (docs/algorithms.md section 4) with error
// feedback and warm start. Its per-tensor state (call counts and the factors
// of the last step) lives here, in the communicator's LOWRANK slot.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "collectives/allreduce/allreduce.hpp"
#include "collectives/common/agreement.hpp"
#include "core/comm.hpp"
#include "core/dtype.hpp"
#include "core/error.hpp"
#include "gpu/gpu.hpp"
#include "methods/lowrank_state.hpp"
#include "core/method.hpp"

namespace cc_coll::detail {

namespace {

// Both stores charge the communicator's StateBudget (CC_COLL_STATE_MAX_BYTES).
struct Stores {
    explicit Stores(StateBudget &budget) : tensors(budget), channels(budget) {}
    LowRankStore tensors;
    LowRankStore channels;
};

// The callers hold the lock of the store they use (Comm::collective_mutex
// for tensors, Comm::p2p_mutex for channels); the slot's creation has its own.
Stores &stores(Comm &comm)
{
    std::lock_guard<std::mutex> lock(comm.slot_mutex());
    std::shared_ptr<void> &slot = comm.method_slot(CC_COLL_METHOD_LOWRANK);
    if (!slot) slot = std::make_shared<Stores>(comm.state_budget());
    return *static_cast<Stores *>(slot.get());
}

// Names a tensor's state in a CC_COLL_STATE_MAX_BYTES message: a new entry
// (`fresh`), or factors of `shape` (rank 0: none) an entry grows to. Built
// only when the cap is reached.
std::string describe_state(const std::string &owner, bool fresh, const lowrank::Shape &shape,
                           cc_coll_dtype_t dtype)
{
    char text[240];
    const int bits = dtype == CC_COLL_F64 ? 64 : 32;
    if (shape.rank == 0)
        std::snprintf(text, sizeof text, "a new LOWRANK state for %s (its call count)", owner.c_str());
    else if (fresh)
        std::snprintf(text, sizeof text,
                      "a new LOWRANK state for %s (its call count, and factors P and Q of %zu x %zu at rank %d in "
                      "binary%d)",
                      owner.c_str(), shape.rows, shape.cols, shape.rank, bits);
    else
        std::snprintf(text, sizeof text,
                      "the LOWRANK state of %s, growing to factors P and Q of %zu x %zu at rank %d in binary%d",
                      owner.c_str(), shape.rows, shape.cols, shape.rank, bits);
    return text;
}

// A plan that fails gives back what this call's plans charged (the group
// then fails on this rank before communicating).
cc_coll_status_t plan_failed(LowRankStore &store, cc_coll_status_t st)
{
    store.rollback_pending();
    return st;
}

// A tensor without a shape is 1-D (a bias): it joins the dense batch, as
// powerSGD_hook sends tensors of fewer than two dimensions uncompressed. A
// tensor with a shape is compressed this step when its call count has
// reached start_iter and its shape passes the compression test; otherwise
// it joins the dense batch too. Either way its call count advances.
//
// The state is created here, charged to CC_COLL_STATE_MAX_BYTES with the
// factors this step will keep, as a pending charge that done() commits once
// the group succeeded. A new key, or factors larger than the key was
// charged for, past the cap fail the plan (CC_COLL_ERR_EF_LIMIT) and undo
// every pending charge. Collectives on a communicator run one at a time and
// plan their tensors in index order, so the pending charges are this call's
// and those of calls that failed after planning (when another rank's plan
// failed, say): at a call's first tensor they are all the latter, and are
// undone before it plans (their entries hold no call and no factors, as if
// absent).
cc_coll_status_t plan(Comm &comm, std::size_t position, const GroupTensor &t, TensorPlan *plan)
{
    const CallParams &p = t.params;
    const EfKey key = EfKey::from(p.has_ef_key, p.ef_key, t.args.recv, t.args.count, t.args.dtype);
    LowRankStore &store = stores(comm).tensors;
    if (position == 0) store.rollback_pending();
    const auto owner = [position] { return "tensor " + std::to_string(position); };
    LowRankState *st = nullptr;
    if (!p.has_shape) {
        const lowrank::Shape none;
        const cc_coll_status_t status = store.acquire(
            key, 0, true, [&](bool fresh) { return describe_state(owner(), fresh, none, t.args.dtype); }, &st);
        if (status != CC_COLL_OK) return plan_failed(store, status);
        plan->route = Route::Dense;
        plan->layout[0] = 0;  // no matrix view (a compressed tensor has rows >= 1)
        plan->layout[1] = 0;
        plan->layout[2] = 0;
        plan->layout[3] = st->calls;
        plan->state = st;
        return CC_COLL_OK;
    }
    lowrank::Shape shape;
    std::string why;
    if (!lowrank::resolve_shape(t.args.count, p.has_shape, p.rows, p.cols, p.rank, &shape, &why))
        return plan_failed(store, fail(CC_COLL_ERR_INVALID_ARG, "LOWRANK shape of tensor %zu (params rows/cols): %s",
                                       position, why.c_str()));
    LowRankState *existing = store.find(key);
    const std::uint64_t calls = existing != nullptr ? existing->calls : 0;
    const bool warm = calls >= p.start_iter;
    // PyTorch's test counts elements; F16/BF16 factors travel as binary32,
    // so they must also take fewer bytes than the tensor.
    const bool half = is_half(t.args.dtype);
    const bool worth = lowrank::should_compress(shape, p.min_compression_rate) &&
                       (!half || 2 * shape.factor_elements() < shape.elements());
    plan->route = warm && worth ? Route::Batch : Route::Dense;
    // A compressed step keeps P and Q; a dense one keeps no factors. A key
    // charged for them already (every step after its first) is used as it is.
    lowrank::Shape kept;
    if (plan->route == Route::Batch) kept = shape;
    const std::uint64_t factors = lowrank_factor_bytes(kept.rows, kept.cols, kept.rank, t.args.dtype);
    if (existing != nullptr && existing->charged >= kLowRankEntryBytes + factors) {
        st = existing;
    } else {
        const cc_coll_status_t status = store.acquire(
            key, factors, true, [&](bool fresh) { return describe_state(owner(), fresh, kept, t.args.dtype); }, &st);
        if (status != CC_COLL_OK) return plan_failed(store, status);
    }
    plan->layout[0] = shape.rows;
    plan->layout[1] = shape.cols;
    plan->layout[2] = static_cast<std::uint64_t>(shape.rank);
    plan->layout[3] = st->calls;
    plan->state = st;
    return CC_COLL_OK;
}

// The shape, the factors' rank and where Q comes from (the layout words of
// the plan add the resolved shape and the call count).
std::uint64_t agreement_params(const CallParams &p)
{
    std::uint64_t h = signature_mix(0x6c6f7772616e6bull, static_cast<std::uint64_t>(p.rank));
    h = signature_mix(h, p.has_shape ? 1 : 0);
    h = signature_mix(h, p.rows);
    h = signature_mix(h, p.cols);
    h = signature_mix(h, p.seed);
    h = signature_mix(h, p.warm_start ? 1 : 0);
    h = signature_mix(h, p.start_iter);
    return signature_mix(h, double_bits(p.min_compression_rate));
}

// The group failed before moving data: this call's charges go back now.
void abort_group(Comm &comm) { stores(comm).tensors.rollback_pending(); }

// A compressed tensor keeps what its factors missed.
bool creates_residual(bool, std::size_t, cc_coll_dtype_t, const CallParams &, int) { return true; }

void done(TensorPlan &plan)
{
    LowRankState *s = static_cast<LowRankState *>(plan.state);
    ++s->calls;
    s->commit();
}

void reset(Comm &comm, const EfKey *key)
{
    Stores &s = stores(comm);
    if (key == nullptr) {
        s.tensors.reset_all();
        s.channels.reset_all();
        return;
    }
    if (key->peer < 0) s.tensors.reset(*key);
    else s.channels.reset(*key);
}

// Copies `src` into dst[0..n) when it holds exactly n values.
template <typename W>
void copy_out(const std::vector<W> &src, std::size_t n, double *dst)
{
    if (dst != nullptr && src.size() == n) std::copy(src.begin(), src.end(), dst);
}

}  // namespace

LowRankStore &lowrank_tensor_states(Comm &comm) { return stores(comm).tensors; }
LowRankStore &lowrank_channel_states(Comm &comm) { return stores(comm).channels; }

cc_coll_status_t lowrank_get_state(Comm &comm, const EfKey &key, cc_coll_dtype_t dtype, std::uint64_t *rows,
                                   std::uint64_t *cols, int *rank, std::uint64_t *calls, double *p, double *q)
{
    LowRankState *s = stores(comm).tensors.find(key);
    if (rows) *rows = s ? s->rows : 0;
    if (cols) *cols = s ? s->cols : 0;
    if (rank) *rank = s ? s->rank : 0;
    if (calls) *calls = s ? s->calls : 0;
    if (s == nullptr || s->rank == 0) return CC_COLL_OK;
    // Only the factors of the reported shape, and only when they are held in
    // this dtype's work type; otherwise the outputs stay zero.
    const std::size_t pn = s->rows * static_cast<std::size_t>(s->rank);
    const std::size_t qn = s->cols * static_cast<std::size_t>(s->rank);
    if (p != nullptr) std::fill(p, p + pn, 0.0);
    if (q != nullptr) std::fill(q, q + qn, 0.0);
    const std::size_t work = dtype == CC_COLL_F64 ? sizeof(double) : sizeof(float);
    if (s->device != nullptr) {  // a tensor on device buffers: factors in device memory
        if (s->device_work != work) return CC_COLL_OK;
        std::vector<unsigned char> host((pn + qn) * work);
        const cc_coll_status_t st =
            gpu::copy_to_host(host.data(), s->device.get(), host.size(), "cc_coll_lowrank_get_state");
        if (st != CC_COLL_OK) return st;
        for (std::size_t i = 0; i < pn + qn; ++i) {
            double v = 0;
            if (work == sizeof(double)) {
                std::memcpy(&v, host.data() + i * work, sizeof v);
            } else {
                float f;
                std::memcpy(&f, host.data() + i * work, sizeof f);
                v = f;
            }
            double *dst = i < pn ? p : q;
            if (dst != nullptr) dst[i < pn ? i : i - pn] = v;
        }
        return CC_COLL_OK;
    }
    if (dtype == CC_COLL_F64) {
        copy_out(s->p<double>(), pn, p);
        copy_out(s->q<double>(), qn, q);
    } else {
        copy_out(s->p<float>(), pn, p);
        copy_out(s->q<float>(), qn, q);
    }
    return CC_COLL_OK;
}

cc_coll_status_t lowrank_set_q(Comm &comm, const EfKey &key, cc_coll_dtype_t dtype, std::size_t rows,
                               std::size_t cols, int rank, bool on_device, const double *q, const char *fn)
{
    const std::size_t n = cols * static_cast<std::size_t>(rank);
    lowrank::Shape shape;
    shape.rows = rows;
    shape.cols = cols;
    shape.rank = rank;
    LowRankState *found = nullptr;
    // Charged for P and Q: the next compressed step keeps both.
    const cc_coll_status_t charged = stores(comm).tensors.acquire(
        key, lowrank_factor_bytes(rows, cols, rank, dtype), false,
        [&](bool fresh) { return std::string(fn) + ": " + describe_state("this tensor", fresh, shape, dtype); },
        &found);
    if (charged != CC_COLL_OK) return charged;
    LowRankState &state = *found;
    state.rows = rows;
    state.cols = cols;
    state.rank = rank;
    state.p_f32.clear();
    state.p_f64.clear();
    state.device.reset();
    state.device_work = 0;
    if (on_device) {
        // The tensor lives on the device: so do its factors (P zero, then Q).
        state.q_f32.clear();
        state.q_f64.clear();
        const std::size_t pn = rows * static_cast<std::size_t>(rank);
        const std::size_t work = dtype == CC_COLL_F64 ? sizeof(double) : sizeof(float);
        std::vector<unsigned char> host((pn + n) * work, 0);
        for (std::size_t i = 0; i < n; ++i) {
            if (work == sizeof(double)) {
                std::memcpy(host.data() + (pn + i) * work, &q[i], work);
            } else {
                const float f = static_cast<float>(q[i]);
                std::memcpy(host.data() + (pn + i) * work, &f, work);
            }
        }
        cc_coll_status_t st = CC_COLL_OK;
        std::shared_ptr<void> dev = gpu::device_zeroed(host.size(), &st);
        if (dev == nullptr) return st;
        if ((st = gpu::copy_to_device(dev.get(), host.data(), host.size(), fn)) != CC_COLL_OK) return st;
        state.device = dev;
        state.device_work = work;
        return CC_COLL_OK;
    }
    if (dtype == CC_COLL_F64) {
        state.q_f64.assign(q, q + n);
        state.q_f32.clear();
    } else {
        state.q_f32.resize(n);
        for (std::size_t i = 0; i < n; ++i) state.q_f32[i] = static_cast<float>(q[i]);
        state.q_f64.clear();
    }
    return CC_COLL_OK;
}

const Method &lowrank_method()
{
    static const Method m = {
        CC_COLL_METHOD_LOWRANK,
        "lowrank",
        "PowerSGD with error feedback and warm start: rank-r factors P and Q summed by MPI_SUM",
        true,
        nullptr,
        nullptr,  // a single tensor runs as a group of one
        plan,
        allreduce_lowrank,
        done,
        nullptr,
        "method lowrank has no reduce-scatter (PowerSGD's factors span the whole matrix); use cc_coll_allreduce, "
        "or none, topk or sketch",
        P2pCompression::LowRank,
        nullptr,
        reset,
        agreement_params,
        creates_residual,
        abort_group,
    };
    return m;
}

}  // namespace cc_coll::detail
