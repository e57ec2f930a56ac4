// Method LOWRANK: PowerSGD (docs/algorithms.md section 4) with error
// feedback and warm start. Its per-tensor state (call counts and the factors
// of the last step) lives here, in the communicator's LOWRANK slot.
#include <algorithm>
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

struct Stores {
    LowRankStore tensors;
    LowRankStore channels;
};

// The callers hold the lock of the store they use (Comm::collective_mutex
// for tensors, Comm::p2p_mutex for channels); the slot's creation has its own.
Stores &stores(Comm &comm)
{
    std::lock_guard<std::mutex> lock(comm.slot_mutex());
    std::shared_ptr<void> &slot = comm.method_slot(CC_COLL_METHOD_LOWRANK);
    if (!slot) slot = std::make_shared<Stores>();
    return *static_cast<Stores *>(slot.get());
}

// A tensor without a shape is 1-D (a bias): it joins the dense batch, as
// powerSGD_hook sends tensors of fewer than two dimensions uncompressed. A
// tensor with a shape is compressed this step when its call count has
// reached start_iter and its shape passes the compression test; otherwise
// it joins the dense batch too. Either way its call count advances.
cc_coll_status_t plan(Comm &comm, std::size_t position, const GroupTensor &t, TensorPlan *plan)
{
    const CallParams &p = t.params;
    const EfKey key = EfKey::from(p.has_ef_key, p.ef_key, t.args.recv, t.args.count, t.args.dtype);
    if (!p.has_shape) {
        LowRankState &st = stores(comm).tensors.get(key);
        plan->route = Route::Dense;
        plan->layout[0] = 0;  // no matrix view (a compressed tensor has rows >= 1)
        plan->layout[1] = 0;
        plan->layout[2] = 0;
        plan->layout[3] = st.calls;
        plan->state = &st;
        return CC_COLL_OK;
    }
    lowrank::Shape shape;
    std::string why;
    if (!lowrank::resolve_shape(t.args.count, p.has_shape, p.rows, p.cols, p.rank, &shape, &why))
        return fail(CC_COLL_ERR_INVALID_ARG, "LOWRANK shape of tensor %zu (params rows/cols): %s", position,
                    why.c_str());
    LowRankState &st = stores(comm).tensors.get(key);
    const bool warm = st.calls >= p.start_iter;
    // PyTorch's test counts elements; F16/BF16 factors travel as binary32,
    // so they must also take fewer bytes than the tensor.
    const bool half = is_half(t.args.dtype);
    const bool worth = lowrank::should_compress(shape, p.min_compression_rate) &&
                       (!half || 2 * shape.factor_elements() < shape.elements());
    plan->route = warm && worth ? Route::Batch : Route::Dense;
    plan->layout[0] = shape.rows;
    plan->layout[1] = shape.cols;
    plan->layout[2] = static_cast<std::uint64_t>(shape.rank);
    plan->layout[3] = st.calls;
    plan->state = &st;
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

// A compressed tensor keeps what its factors missed.
bool creates_residual(bool, std::size_t, cc_coll_dtype_t, const CallParams &, int) { return true; }

void done(TensorPlan &plan) { ++static_cast<LowRankState *>(plan.state)->calls; }

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
    LowRankState &state = stores(comm).tensors.get(key);
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
    };
    return m;
}

}  // namespace cc_coll::detail
