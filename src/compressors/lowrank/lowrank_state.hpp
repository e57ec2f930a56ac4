// Method LOWRANK's per-tensor state: the call count (for start_iter) and the
// factors of the last compressed step (Q for the warm start, P for
// inspection), keyed like residuals. It belongs to the method: a
// communicator keeps it in its LOWRANK state slot (Comm::method_slot), one
// store for allreduce tensors and one for point-to-point channels. Both
// count their entries against the communicator's StateBudget
// (CC_COLL_STATE_MAX_BYTES, core/state_budget.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cc_coll.h"
#include "core/ef_store.hpp"
#include "core/state_budget.hpp"

namespace cc_coll::detail {

struct LowRankState {
    // Bytes this entry holds in the StateBudget: kLowRankEntryBytes plus the
    // largest factors it was charged for.
    std::uint64_t charged = 0;
    // The part of `charged` reserved for a call that has not completed yet
    // (a group's plan, an in-flight send); `fresh`: that call created the
    // entry. commit() makes them the entry's own once the call succeeded.
    std::uint64_t pending = 0;
    bool fresh = false;
    std::uint64_t calls = 0;  // calls seen on this tensor, compressed or not
    std::size_t rows = 0;     // shape of the stored factors; rank 0: none yet
    std::size_t cols = 0;
    int rank = 0;
    std::vector<float> p_f32, q_f32;  // binary32 work type (F32, F16, BF16)
    std::vector<double> p_f64, q_f64; // binary64 work type (F64)
    // Tensors on device buffers keep their factors in device memory instead
    // (the vectors stay empty): P then Q, in the work type of `device_work`.
    std::shared_ptr<void> device;
    std::size_t device_work = 0;  // sizeof(W) of the device factors; 0: none

    template <typename W>
    std::vector<W> &p();
    template <typename W>
    std::vector<W> &q();
    // True when the stored Q fits (rows, cols, rank) in work type W.
    template <typename W>
    bool has_q(std::size_t r, std::size_t c, int k)
    {
        return rank == k && rows == r && cols == c && q<W>().size() == c * static_cast<std::size_t>(k);
    }
    // Drops the factors of the other work type (a key reused with another
    // dtype must not report stale factors), memory included: the entry is
    // charged for the factors of one work type.
    template <typename W>
    void clear_other()
    {
        if (sizeof(W) == sizeof(double)) {
            std::vector<float>().swap(p_f32);
            std::vector<float>().swap(q_f32);
        } else {
            std::vector<double>().swap(p_f64);
            std::vector<double>().swap(q_f64);
        }
    }
    // True when device factors of (r, c, k) in work type W are stored.
    template <typename W>
    bool has_device_q(std::size_t r, std::size_t c, int k) const
    {
        return device != nullptr && device_work == sizeof(W) && rank == k && rows == r && cols == c;
    }
    // Keeps host factors P (rows x rank) and Q (cols x rank) of shape s.
    // Device factors of an earlier step on device buffers are dropped, as a
    // step on device buffers drops host ones: an entry holds the factors of
    // its last compressed step only.
    template <typename W, typename Shape>
    void keep_host(const Shape &s, const W *pf, const W *qf)
    {
        rows = s.rows;
        cols = s.cols;
        rank = s.rank;
        p<W>().assign(pf, pf + s.rows * static_cast<std::size_t>(s.rank));
        q<W>().assign(qf, qf + s.cols * static_cast<std::size_t>(s.rank));
        clear_other<W>();
        device.reset();
        device_work = 0;
    }
    // True when the entry holds nothing a call has left: no call counted,
    // no factors (it behaves as an absent one).
    bool empty() const { return calls == 0 && rank == 0 && device == nullptr; }
    void commit()
    {
        pending = 0;
        fresh = false;
    }
    // Bytes of the factors held.
    std::uint64_t bytes() const
    {
        return (p_f32.size() + q_f32.size()) * sizeof(float) + (p_f64.size() + q_f64.size()) * sizeof(double) +
               (device != nullptr ? (rows + cols) * static_cast<std::size_t>(rank) * device_work : 0);
    }
};

template <>
inline std::vector<float> &LowRankState::p<float>() { return p_f32; }
template <>
inline std::vector<double> &LowRankState::p<double>() { return p_f64; }
template <>
inline std::vector<float> &LowRankState::q<float>() { return q_f32; }
template <>
inline std::vector<double> &LowRankState::q<double>() { return q_f64; }

// Bytes an entry is charged besides its factors: the state, its key and the
// hash map node.
constexpr std::uint64_t kLowRankEntryBytes = sizeof(std::pair<const EfKey, LowRankState>) + 2 * sizeof(void *);

// Bytes of P and Q of a rows x cols matrix at rank r, in the work type of
// `dtype` (binary64 for F64, binary32 else).
inline std::uint64_t lowrank_factor_bytes(std::size_t rows, std::size_t cols, int rank, cc_coll_dtype_t dtype)
{
    return static_cast<std::uint64_t>(rows + cols) * static_cast<std::uint64_t>(rank) *
           (dtype == CC_COLL_F64 ? sizeof(double) : sizeof(float));
}

// The states of one kind of key (allreduce tensors or point-to-point
// channels), charged to the communicator's StateBudget. Not thread-safe: the
// callers hold the lock of the store they use (docs of stores() in
// lowrank.cc).
class LowRankStore {
public:
    explicit LowRankStore(StateBudget &budget) : budget_(budget) {}
    LowRankStore(const LowRankStore &) = delete;
    LowRankStore &operator=(const LowRankStore &) = delete;
    ~LowRankStore() { reset_all(); }

    // The state of `key`, with room for factors of `factor_bytes`. A new
    // entry is charged kLowRankEntryBytes + factor_bytes, an existing one
    // the factor bytes beyond those it was charged for. Past the cap:
    // CC_COLL_ERR_EF_LIMIT, nothing created or charged; describe(fresh)
    // (called only then) names the state in the message. With `pending` the
    // charge waits for LowRankState::commit(), or for rollback() or
    // rollback_pending() to undo it.
    template <typename Describe>
    cc_coll_status_t acquire(const EfKey &key, std::uint64_t factor_bytes, bool pending, Describe describe,
                             LowRankState **out)
    {
        *out = nullptr;
        const std::uint64_t need = kLowRankEntryBytes + factor_bytes;
        auto it = states_.find(key);
        const std::uint64_t have = it != states_.end() ? it->second.charged : 0;
        if (it == states_.end() || have < need) {
            const cc_coll_status_t st = budget_.reserve(need - have, describe(it == states_.end()).c_str());
            if (st != CC_COLL_OK) return st;
            if (it == states_.end()) {
                it = states_.emplace(key, LowRankState{}).first;
                it->second.fresh = pending;
            }
            it->second.charged = need;
            if (pending) {
                it->second.pending += need - have;
                note_pending(key);
            }
        }
        *out = &it->second;
        return CC_COLL_OK;
    }
    // The state of `key`, or nullptr.
    LowRankState *find(const EfKey &key)
    {
        auto it = states_.find(key);
        return it == states_.end() ? nullptr : &it->second;
    }
    // Undoes the pending charges of `key`: an entry created for them that is
    // still empty is dropped; otherwise the charge goes back down, never
    // below the entry and the factors it holds.
    void rollback(const EfKey &key)
    {
        auto it = states_.find(key);
        if (it == states_.end() || it->second.pending == 0) return;
        LowRankState &s = it->second;
        if (s.fresh && s.empty()) {
            budget_.release(s.charged);
            states_.erase(it);
            return;
        }
        // Factors a call stored before it failed stay charged.
        const std::uint64_t floor = kLowRankEntryBytes + s.bytes();
        const std::uint64_t before = s.charged - s.pending;
        const std::uint64_t target = before > floor ? before : floor;
        if (target < s.charged) {
            budget_.release(s.charged - target);
            s.charged = target;
        }
        s.commit();
    }
    // rollback() of every key with a pending charge.
    void rollback_pending()
    {
        for (const EfKey &key : pending_keys_) rollback(key);
        pending_keys_.clear();
        prune_at_ = kMinPrune;
    }
    void reset(const EfKey &key)
    {
        auto it = states_.find(key);
        if (it == states_.end()) return;
        budget_.release(it->second.charged);
        states_.erase(it);
    }
    void reset_all()
    {
        for (const auto &kv : states_) budget_.release(kv.second.charged);
        states_.clear();
        pending_keys_.clear();
        prune_at_ = kMinPrune;
    }

    // Every entry, in no particular order (a checkpoint's export).
    template <typename F>
    void for_each(F &&f) const
    {
        for (const auto &kv : states_) f(kv.first, kv.second);
    }
    // Adds an entry restored from a checkpoint, charged `state.charged`
    // bytes, whose cap check the caller has made; the key must be absent.
    void install(const EfKey &key, LowRankState state)
    {
        state.pending = 0;
        state.fresh = false;
        budget_.charge(state.charged);
        states_.emplace(key, std::move(state));
    }

private:
    static constexpr std::size_t kMinPrune = 64;

    // Remembers a key with a pending charge for rollback_pending(); keys
    // committed or dropped meanwhile are pruned now and then, at amortised
    // constant cost.
    void note_pending(const EfKey &key)
    {
        if (pending_keys_.size() >= prune_at_) {
            std::size_t kept = 0;
            for (const EfKey &k : pending_keys_) {
                auto it = states_.find(k);
                if (it != states_.end() && it->second.pending != 0) pending_keys_[kept++] = k;
            }
            pending_keys_.resize(kept);
            prune_at_ = kept * 2 > kMinPrune ? kept * 2 : kMinPrune;
        }
        pending_keys_.push_back(key);
    }

    StateBudget &budget_;
    std::unordered_map<EfKey, LowRankState, EfKeyHash> states_;
    std::vector<EfKey> pending_keys_;  // may repeat a key, or name one committed or dropped
    std::size_t prune_at_ = kMinPrune;
};

class Comm;

// The communicator's LOWRANK state: allreduce tensors and point-to-point
// channels, created on first use.
LowRankStore &lowrank_tensor_states(Comm &comm);
LowRankStore &lowrank_channel_states(Comm &comm);

// cc_coll_lowrank_get_state: the stored shape, call count and factors of
// `key` (P and Q as double, host memory, each may be null); factors only
// when held in the work type of `dtype`, zeros otherwise.
cc_coll_status_t lowrank_get_state(Comm &comm, const EfKey &key, cc_coll_dtype_t dtype, std::uint64_t *rows,
                                   std::uint64_t *cols, int *rank, std::uint64_t *calls, double *p, double *q);

// cc_coll_lowrank_set_q: sets `key`'s warm-start Q (cols x rank of shape
// s, from host doubles), in device memory when `on_device`; P is cleared.
cc_coll_status_t lowrank_set_q(Comm &comm, const EfKey &key, cc_coll_dtype_t dtype, std::size_t rows,
                               std::size_t cols, int rank, bool on_device, const double *q, const char *fn);

}  // namespace cc_coll::detail
