// Method LOWRANK: PowerSGD (docs/algorithms.md section 4) with error
// feedback and warm start. Its per-tensor state (call counts and the factors
// of the last step) lives here, in the communicator's LOWRANK slot.
#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "collectives/allreduce/allreduce.hpp"
#include "collectives/common/agreement.hpp"
#include "core/comm.hpp"
#include "core/dtype.hpp"
#include "core/error.hpp"
#include "gpu/gpu.hpp"
#include "compressors/lowrank/lowrank_state.hpp"
#include "core/config.hpp"
#include "core/method.hpp"
#include "wire/state_codec.hpp"

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
    // PyTorch's test counts elements; F16/BF16 factors travelling as
    // binary32 must also take fewer bytes than the tensor.
    const bool half = is_half(t.args.dtype) &&
                      lowrank::factors_of(p.method_options[CC_COLL_METHOD_LOWRANK]) == lowrank::Factors::Work;
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

// The shape, the factors' rank, where Q comes from and how the factors
// travel (the layout words of the plan add the resolved shape and the call
// count). The factors' format enters only when not the work type, so the
// default's hash is unchanged.
std::uint64_t agreement_params(const CallParams &p)
{
    std::uint64_t h = signature_mix(0x6c6f7772616e6bull, static_cast<std::uint64_t>(p.rank));
    const std::uint32_t factors = p.method_options[CC_COLL_METHOD_LOWRANK];
    if (factors != 0) h = signature_mix(h, 0x666163746f7273ull ^ factors);
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

// ---- checkpoints (wire/state_codec.hpp; docs/wire.md, "State checkpoint") ----

// The payload's format version, and where an entry's factors are.
constexpr std::uint16_t kStateVersion = 1;
constexpr std::uint8_t kFactorsNone = 0;
constexpr std::uint8_t kFactorsHost = 1;
constexpr std::uint8_t kFactorsDevice = 2;
// An entry's bytes besides its factors: key, calls, rows, cols, rank,
// where, work size, reserved, P and Q lengths.
constexpr std::uint64_t kStateEntryBytes = kStateKeyBytes + 8 + 8 + 8 + 4 + 1 + 1 + 2 + 8 + 8;
// The largest r a call accepts (core/params.hpp).
constexpr std::uint64_t kMaxStateRank = 65536;

// Every entry that holds something (a call counted or factors), tensors and
// channels, in key order: per entry its key, call count, shape and rank,
// then P and Q as the entry holds them (host or device memory, binary32 or
// binary64).
cc_coll_status_t checkpoint_export(Comm &comm, StateWriter &out)
{
    Stores &s = stores(comm);
    std::vector<std::pair<EfKey, const LowRankState *>> all;
    const auto add = [&](const EfKey &k, const LowRankState &st) {
        if (!st.empty()) all.emplace_back(k, &st);
    };
    s.tensors.for_each(add);
    s.channels.for_each(add);
    std::sort(all.begin(), all.end(), [](const auto &a, const auto &b) { return state_key_less(a.first, b.first); });
    out.u64(all.size());
    for (const auto &ks : all) {
        const LowRankState &st = *ks.second;
        const bool f32 = !st.p_f32.empty() || !st.q_f32.empty();
        const bool f64 = !st.p_f64.empty() || !st.q_f64.empty();
        if (f32 && f64)
            return fail(CC_COLL_ERR_INTERNAL, "cc_coll_state_export: a LOWRANK entry holds binary32 and binary64 "
                                              "factors at once");
        const std::size_t pn = st.rows * static_cast<std::size_t>(st.rank);
        const std::size_t qn = st.cols * static_cast<std::size_t>(st.rank);
        write_state_key(out, ks.first);
        out.u64(st.calls);
        out.u64(st.rows);
        out.u64(st.cols);
        out.u32(static_cast<std::uint32_t>(st.rank));
        if (st.device != nullptr) {
            out.u8(kFactorsDevice);
            out.u8(static_cast<std::uint8_t>(st.device_work));
            out.u16(0);
            out.u64(pn);
            out.u64(qn);
            CC_COLL_TRY(out.device_values(st.device.get(), pn + qn, st.device_work, "cc_coll_state_export"));
        } else if (f32 || f64) {
            out.u8(kFactorsHost);
            out.u8(f64 ? sizeof(double) : sizeof(float));
            out.u16(0);
            out.u64(f64 ? st.p_f64.size() : st.p_f32.size());
            out.u64(f64 ? st.q_f64.size() : st.q_f32.size());
            if (f64) {
                out.values(st.p_f64.data(), st.p_f64.size());
                out.values(st.q_f64.data(), st.q_f64.size());
            } else {
                out.values(st.p_f32.data(), st.p_f32.size());
                out.values(st.q_f32.data(), st.q_f32.size());
            }
        } else {
            out.u8(kFactorsNone);
            out.u8(0);
            out.u16(0);
            out.u64(0);
            out.u64(0);
        }
    }
    return CC_COLL_OK;
}

// The entries of a payload, checked, before they replace the stores'.
struct StagedStores {
    std::unordered_map<EfKey, LowRankState, EfKeyHash> tensors;
    std::unordered_map<EfKey, LowRankState, EfKeyHash> channels;
};

template <typename W>
cc_coll_status_t read_factors(StateReader &in, std::uint64_t pn, std::uint64_t qn, LowRankState *st)
{
    CC_COLL_TRY(in.values<W>(pn, &st->p<W>(), "P"));
    return in.values<W>(qn, &st->q<W>(), "Q");
}

cc_coll_status_t checkpoint_parse(Comm &comm, std::uint16_t version, StateReader &in, StagedState *staged)
{
    if (version != kStateVersion)
        return fail(CC_COLL_ERR_VERSION_MISMATCH,
                    "%s: the state blob's LOWRANK section has version %u; this library reads version %u; nothing "
                    "was changed",
                    in.fn(), version, kStateVersion);
    const std::string section = in.context();
    std::uint64_t n = 0;
    CC_COLL_TRY(in.u64(&n, "the number of LOWRANK entries"));
    if (n > in.remaining() / kStateEntryBytes)
        return in.malformed("%llu LOWRANK entries cannot fit in the %zu bytes that remain",
                            static_cast<unsigned long long>(n), in.remaining());
    auto out = std::make_shared<StagedStores>();
    std::uint64_t bytes = 0;
    for (std::uint64_t i = 0; i < n; ++i) {
        in.set_context(section + ", entry " + std::to_string(i) + " of " + std::to_string(n));
        EfKey key;
        CC_COLL_TRY(read_state_key(in, KeyScope::Any, comm.size(), &key));
        std::uint64_t calls = 0, rows = 0, cols = 0, pn = 0, qn = 0;
        std::uint32_t rank = 0;
        std::uint8_t where = 0, work = 0;
        std::uint16_t reserved = 0;
        CC_COLL_TRY(in.u64(&calls, "call count"));
        CC_COLL_TRY(in.u64(&rows, "rows"));
        CC_COLL_TRY(in.u64(&cols, "cols"));
        CC_COLL_TRY(in.u32(&rank, "rank"));
        CC_COLL_TRY(in.u8(&where, "factor memory"));
        CC_COLL_TRY(in.u8(&work, "factor work size"));
        CC_COLL_TRY(in.u16(&reserved, "reserved field"));
        CC_COLL_TRY(in.u64(&pn, "P length"));
        CC_COLL_TRY(in.u64(&qn, "Q length"));
        if (reserved != 0) return in.malformed("reserved field is %u, not 0", reserved);
        if (where > kFactorsDevice) return in.malformed("factor memory %u is not 0, 1 or 2", where);
        if (rank == 0) {
            if (rows != 0 || cols != 0 || where != kFactorsNone || work != 0 || pn != 0 || qn != 0)
                return in.malformed("rank 0 (no factors) with rows, cols, factor memory, work size, P or Q length "
                                    "not 0");
        } else {
            if (rank > kMaxStateRank) return in.malformed("rank %u is above %llu", rank,
                                                          static_cast<unsigned long long>(kMaxStateRank));
            if (rows == 0 || cols == 0 || rows > static_cast<std::uint64_t>(INT_MAX) ||
                cols > static_cast<std::uint64_t>(INT_MAX))
                return in.malformed("shape %llu x %llu (each side 1 to %d)", static_cast<unsigned long long>(rows),
                                    static_cast<unsigned long long>(cols), INT_MAX);
            if (rank > rows || rank > cols)
                return in.malformed("rank %u above min(rows, cols) of the shape %llu x %llu", rank,
                                    static_cast<unsigned long long>(rows), static_cast<unsigned long long>(cols));
        }
        const std::uint64_t full_p = rows * rank, full_q = cols * rank;
        if (where == kFactorsNone) {
            if (work != 0 || pn != 0 || qn != 0)
                return in.malformed("no factors, but work size %u and P, Q lengths %llu, %llu", work,
                                    static_cast<unsigned long long>(pn), static_cast<unsigned long long>(qn));
        } else {
            if (work != sizeof(float) && work != sizeof(double))
                return in.malformed("factor work size %u (4 or 8)", work);
            const bool device = where == kFactorsDevice;
            if (device ? (pn != full_p || qn != full_q)
                       : ((pn != 0 && pn != full_p) || (qn != 0 && qn != full_q) || pn + qn == 0))
                return in.malformed("P and Q of %llu and %llu values for rows %llu, cols %llu at rank %u",
                                    static_cast<unsigned long long>(pn), static_cast<unsigned long long>(qn),
                                    static_cast<unsigned long long>(rows), static_cast<unsigned long long>(cols),
                                    rank);
            if (device && key.peer >= 0)
                return in.malformed("a point-to-point channel with factors in device memory (channels keep "
                                    "theirs in host memory)");
        }
        auto &map = key.peer >= 0 ? out->channels : out->tensors;
        if (map.count(key) != 0) return in.malformed("a second LOWRANK entry of the same key");
        LowRankState st;
        st.calls = calls;
        st.rows = static_cast<std::size_t>(rows);
        st.cols = static_cast<std::size_t>(cols);
        st.rank = static_cast<int>(rank);
        if (where != kFactorsNone) {
            if (work == sizeof(double)) CC_COLL_TRY(read_factors<double>(in, pn, qn, &st));
            else CC_COLL_TRY(read_factors<float>(in, pn, qn, &st));
        }
        if (where == kFactorsDevice) {
            if (gpu::device_count() == 0)
                return fail(CC_COLL_ERR_NOT_SUPPORTED,
                            "%s: the state blob holds LOWRANK factors in device memory (%s), and this process has "
                            "no usable CUDA device (a build without CUDA, or no GPU); nothing was changed",
                            in.fn(), in.context().c_str());
            const std::size_t b = static_cast<std::size_t>(pn + qn) * work;
            std::vector<unsigned char> host(b);
            if (work == sizeof(double)) {
                std::memcpy(host.data(), st.p_f64.data(), pn * work);
                std::memcpy(host.data() + pn * work, st.q_f64.data(), qn * work);
            } else {
                std::memcpy(host.data(), st.p_f32.data(), pn * work);
                std::memcpy(host.data() + pn * work, st.q_f32.data(), qn * work);
            }
            cc_coll_status_t status = CC_COLL_OK;
            st.device = gpu::device_zeroed(b, &status);
            if (st.device == nullptr) return status;
            CC_COLL_TRY(gpu::copy_to_device(st.device.get(), host.data(), b, in.fn()));
            st.device_work = work;
            std::vector<float>().swap(st.p_f32);
            std::vector<float>().swap(st.q_f32);
            std::vector<double>().swap(st.p_f64);
            std::vector<double>().swap(st.q_f64);
        }
        // Charged as a call leaves it: the entry, and P and Q of its shape
        // once it holds factors.
        st.charged = kLowRankEntryBytes + (where == kFactorsNone ? 0 : (full_p + full_q) * work);
        bytes = bytes > UINT64_MAX - st.charged ? UINT64_MAX : bytes + st.charged;
        map.emplace(key, std::move(st));
    }
    staged->state = out;
    staged->bytes = bytes;
    return CC_COLL_OK;
}

void checkpoint_install(Comm &comm, StagedState &staged)
{
    auto *in = static_cast<StagedStores *>(staged.state.get());
    if (in == nullptr) return;
    Stores &s = stores(comm);
    for (auto &kv : in->tensors) s.tensors.install(kv.first, std::move(kv.second));
    for (auto &kv : in->channels) s.channels.install(kv.first, std::move(kv.second));
    staged.state.reset();
}

// The cost model: P (rows x r) and Q (cols x r) in the work type, or at 2
// bytes each as 16-bit codes; a 1-D tensor or one under the minimum
// compression rate is sent densely.
bool exchange_cost(const CostTensor &t, const CallParams &p, int, ExchangeCost *cost)
{
    lowrank::Shape s;
    std::string why;
    if (!t.has_shape || !lowrank::resolve_shape(t.count, t.has_shape, t.rows, t.cols, p.rank, &s, &why) ||
        !lowrank::should_compress(s, p.min_compression_rate))
        return false;
    const bool coded = lowrank::factors_of(p.method_options[CC_COLL_METHOD_LOWRANK]) != lowrank::Factors::Work;
    const double wes = coded ? 2.0 : t.dtype == CC_COLL_F64 ? 8.0 : 4.0;
    cost->bytes[0] += static_cast<double>(s.rows) * s.rank * wes;
    cost->bytes[1] += static_cast<double>(s.cols) * s.rank * wes;
    return true;
}


// The method's own settings (Method::settings: rows of the settings table).
bool apply_lowrank_rank(const std::string &text, Config *cfg, std::string *why)
{
    std::uint64_t r = 0;
    if (parse_u64(text, &r) && lowrank_rank_valid(static_cast<long long>(r))) {
        cfg->lowrank_rank = static_cast<int>(r);
        return true;
    }
    *why = "expected an integer in [1, 65536]";
    return false;
}

bool apply_warm_start(const std::string &text, Config *cfg, std::string *why)
{
    if (parse_bool(text, &cfg->warm_start)) return true;
    *why = "expected 1/0, true/false, yes/no or on/off";
    return false;
}

bool apply_start_iter(const std::string &text, Config *cfg, std::string *why)
{
    if (parse_u64(text, &cfg->start_iter)) return true;
    *why = "expected an unsigned integer";
    return false;
}

bool apply_min_compression_rate(const std::string &text, Config *cfg, std::string *why)
{
    double r = 0;
    if (parse_double(text, &r) && min_compression_rate_valid(r)) {
        cfg->min_compression_rate = r;
        return true;
    }
    *why = "expected a number >= 1";
    return false;
}

bool apply_factors(const std::string &text, Config *cfg, std::string *why)
{
    static const char *const names[] = {"work", "bf16", "fp16"};
    static const lowrank::Factors values[] = {lowrank::Factors::Work, lowrank::Factors::Bf16, lowrank::Factors::Fp16};
    lowrank::Factors f = lowrank::Factors::Work;
    if (!apply_choice(text, names, values, &f, why)) return false;
    cfg->method_options[CC_COLL_METHOD_LOWRANK] = static_cast<std::uint32_t>(f);
    return true;
}

const SettingDef kSettings[] = {
    {"LOWRANK_RANK", "CC_COLL_LOWRANK_RANK", "1",
     "LOWRANK: target rank of the approximation, in [1, 65536]; a rows x cols tensor uses "
     "r = min(rows, cols, rank). PyTorch's PowerSGD advises 1 to 4, up to 32 for NLP models.",
     apply_lowrank_rank},
    {"LOWRANK_WARM_START", "CC_COLL_LOWRANK_WARM_START", "1",
     "LOWRANK: 1 starts each step from the tensor's previous Q (re-orthogonalised), 0 draws a fresh "
     "Gaussian Q every step.",
     apply_warm_start},
    {"LOWRANK_START_ITER", "CC_COLL_LOWRANK_START_ITER", "0",
     "LOWRANK: the first this-many calls on each tensor are plain allreduces (PyTorch's "
     "start_powerSGD_iter, whose default there is 1000).",
     apply_start_iter},
    {"LOWRANK_MIN_COMPRESSION_RATE", "CC_COLL_LOWRANK_MIN_COMPRESSION_RATE", "2",
     "LOWRANK: a rows x cols tensor is compressed only when (rows + cols) x r x rate < rows x cols; "
     "other tensors are allreduced densely (batched into one call in a group). At least 1.",
     apply_min_compression_rate},
    {"LOWRANK_FACTORS", "CC_COLL_LOWRANK_FACTORS", "work",
     "LOWRANK: how an allreduce's factors P and Q travel: work (the work type, binary32 or binary64), bf16 or fp16 "
     "(16-bit codes summed in the work type, as method HALF's: half of work's bytes for binary32, a quarter for "
     "binary64; fp16 sums past 65504 send the tensor densely that step). Point-to-point messages keep the work type. "
     "Every rank must use the same value.",
     apply_factors},
};

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
        .id = CC_COLL_METHOD_LOWRANK,
        .name = "lowrank",
        .summary = "PowerSGD with error feedback and warm start: rank-r factors P and Q summed by MPI_SUM, or as "
                   "16-bit codes (CC_COLL_LOWRANK_FACTORS)",
        .homomorphic = true,
        .matrix_view = true,
        .auto_candidate = true,
        .exchange_cost = exchange_cost,
        .settings = kSettings,
        .settings_count = sizeof kSettings / sizeof kSettings[0],
        .allreduce = nullptr,  // a single tensor runs as a group of one
        .group_plan = plan,
        .group_batch = allreduce_lowrank,
        .group_done = done,
        .why_no_reduce_scatter = "method lowrank has no reduce-scatter (PowerSGD's factors span the whole matrix); "
                                 "use cc_coll_allreduce, or none, topk or sketch",
        .p2p = P2pCompression::LowRank,
        .reset_state = reset,
        .agreement_params = agreement_params,
        .creates_residual = creates_residual,
        .group_abort = abort_group,
        .state_version = kStateVersion,
        .state_export = checkpoint_export,
        .state_parse = checkpoint_parse,
        .state_install = checkpoint_install,
    };
    return m;
}

}  // namespace cc_coll::detail
