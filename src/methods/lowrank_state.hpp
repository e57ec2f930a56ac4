// Method LOWRANK's per-tensor state: the call count (for start_iter) and the
// factors of the last compressed step (Q for the warm start, P for
// inspection), keyed like residuals. It belongs to the method: a
// communicator keeps it in its LOWRANK state slot (Comm::method_slot), one
// store for allreduce tensors and one for point-to-point channels.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "cc_coll.h"
#include "core/ef_store.hpp"

namespace cc_coll::detail {

struct LowRankState {
    std::uint64_t charged = 0;  // bytes reserved in the store's budget
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
    // dtype must not report stale factors).
    template <typename W>
    void clear_other()
    {
        if (sizeof(W) == sizeof(double)) {
            p_f32.clear();
            q_f32.clear();
        } else {
            p_f64.clear();
            q_f64.clear();
        }
    }
    // True when device factors of (r, c, k) in work type W are stored.
    template <typename W>
    bool has_device_q(std::size_t r, std::size_t c, int k) const
    {
        return device != nullptr && device_work == sizeof(W) && rank == k && rows == r && cols == c;
    }
    // Keeps host factors P (rows x rank) and Q (cols x rank) of shape s.
    template <typename W, typename Shape>
    void keep_host(const Shape &s, const W *pf, const W *qf)
    {
        rows = s.rows;
        cols = s.cols;
        rank = s.rank;
        p<W>().assign(pf, pf + s.rows * static_cast<std::size_t>(s.rank));
        q<W>().assign(qf, qf + s.cols * static_cast<std::size_t>(s.rank));
        clear_other<W>();
    }
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

// Bytes a state is charged: a fixed part for its entry, plus its factors
// P and Q ((rows + cols) rank elements of the work type).
constexpr std::uint64_t kLowRankStateBytes = sizeof(LowRankState) + sizeof(EfKey) + 4 * sizeof(void *);

// The states of one kind of key (allreduce tensors or point-to-point
// channels), counted against an EfStore's cap (CC_COLL_EF_MAX_BYTES): a
// communicator's residuals and LOWRANK state share it, and cc_coll_ef_bytes
// reports both.
class LowRankStore {
public:
    explicit LowRankStore(EfStore &budget) : budget_(budget) {}
    LowRankStore(const LowRankStore &) = delete;
    LowRankStore &operator=(const LowRankStore &) = delete;
    ~LowRankStore() { reset_all(); }

    // The state of `key` with room for factors of `factor_bytes`: a new key
    // reserves kLowRankStateBytes + factor_bytes from the budget, an existing
    // one whose factors grow reserves the difference. CC_COLL_ERR_EF_LIMIT
    // (nothing created) when that would pass the cap.
    cc_coll_status_t acquire(const EfKey &key, std::uint64_t factor_bytes, LowRankState **out)
    {
        *out = nullptr;
        const std::uint64_t need = kLowRankStateBytes + factor_bytes;
        auto it = states_.find(key);
        if (it != states_.end() && it->second.charged >= need) {
            *out = &it->second;
            return CC_COLL_OK;
        }
        const std::uint64_t have = it != states_.end() ? it->second.charged : 0;
        const cc_coll_status_t st = budget_.reserve(need - have, "LOWRANK state (call count and factors P, Q)");
        if (st != CC_COLL_OK) return st;
        LowRankState &s = it != states_.end() ? it->second : states_[key];
        s.charged = need;
        *out = &s;
        return CC_COLL_OK;
    }
    // The state of `key`, or nullptr.
    LowRankState *find(const EfKey &key)
    {
        auto it = states_.find(key);
        return it == states_.end() ? nullptr : &it->second;
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
    }

private:
    EfStore &budget_;
    std::unordered_map<EfKey, LowRankState, EfKeyHash> states_;
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
