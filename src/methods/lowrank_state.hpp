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

class LowRankStore {
public:
    // The state of `key`, created empty when absent.
    LowRankState &get(const EfKey &key) { return states_[key]; }
    // The state of `key`, or nullptr.
    LowRankState *find(const EfKey &key)
    {
        auto it = states_.find(key);
        return it == states_.end() ? nullptr : &it->second;
    }
    void reset(const EfKey &key) { states_.erase(key); }
    void reset_all() { states_.clear(); }

private:
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
