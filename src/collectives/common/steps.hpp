// Steps every lossy algorithm shares, written once over the execution
// backend X (exec/host_exec.hpp) and the work type W: the error-feedback
// input g' = g + e, the guard that takes it back out of the residual when a
// call fails before its residual update, and the dense allreduce of g'.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "cc_coll.h"
#include "compressors/topk/topk_backend.hpp"
#include "collectives/allreduce/allreduce.hpp"
#include "core/dtype.hpp"
#include "core/ef_store.hpp"
#include "core/params.hpp"
#include "core/stats.hpp"
#include "exec/exec.hpp"

namespace cc_coll::detail {

// Where g' = g + e of a call's n elements goes, loaded by nothing yet: the
// residual itself when EF is on (the residual named by key_buf / n / dtype
// or params' ef_key), else the backend's work buffer. With create == false
// an absent residual is not created (for calls that transmit everything).
// *res is nullptr without a residual.
template <typename X, typename W>
cc_coll_status_t acquire_input(X &x, const CallParams &p, const void *key_buf, std::size_t n, cc_coll_dtype_t dtype,
                               bool create, W **g, Residual **res)
{
    *res = nullptr;
    if (p.ef) {
        const EfKey key = EfKey::from(p.has_ef_key, p.ef_key, key_buf, n, dtype);
        const cc_coll_status_t st = x.residual(key, n, dtype, create, res);
        if (st != CC_COLL_OK) return st;
    }
    if (*res != nullptr) {
        *g = (*res)->template data<W>();
        return CC_COLL_OK;
    }
    return x.template buffer<W>(Buf::Work, n, g);
}

// acquire_input, then g' = g + e for the n elements of `send`. With
// select_k > 0 the top select_k of g' are selected in the same pass
// (X::load_select) into idx (ascending).
template <typename X, typename W>
cc_coll_status_t load_input(X &x, const CallParams &p, const void *send, const void *key_buf, std::size_t n,
                            cc_coll_dtype_t dtype, bool create, W **g, Residual **res, std::size_t select_k = 0,
                            std::uint32_t *idx = nullptr)
{
    const cc_coll_status_t st = acquire_input<X, W>(x, p, key_buf, n, dtype, create, g, res);
    if (st != CC_COLL_OK) return st;
    if (select_k > 0) return topk_load_select<W>(x, send, dtype, n, *g, *res != nullptr, select_k, idx);
    return x.template load_input<W>(send, dtype, n, *g, *res != nullptr);
}

// Takes the inputs of a call back out of their residuals when the call
// returns before release(): a call that fails between loading g' = g + e and
// updating the residual leaves every residual as it was.
template <typename X, typename W>
class InputGuard {
public:
    explicit InputGuard(X &x) : x_(x) {}
    InputGuard(const InputGuard &) = delete;
    InputGuard &operator=(const InputGuard &) = delete;
    ~InputGuard()
    {
        if (!armed_) return;
        for (const Entry &e : entries_) x_.template undo_input<W>(e.g, e.send, e.dtype, e.n);
    }
    // Watches g (the residual `res`, which holds g' = e + send); nothing to
    // undo without a residual.
    void add(W *g, const Residual *res, const void *send, std::size_t n, cc_coll_dtype_t dtype)
    {
        if (res != nullptr) entries_.push_back(Entry{g, send, n, dtype});
    }
    void release() { armed_ = false; }

private:
    struct Entry {
        W *g;
        const void *send;
        std::size_t n;
        cc_coll_dtype_t dtype;
    };
    X &x_;
    std::vector<Entry> entries_;
    bool armed_ = true;
};

// Dense allreduce of g' (n = a.count): recv = sum over ranks of g' rounded
// to the dtype; the residual (ef) keeps the rounding.
template <typename X, typename W>
cc_coll_status_t dense_allreduce(X &x, const AllreduceArgs &a, W *g, bool ef, StatsSnapshot *stats)
{
    Comm &comm = x.comm();
    const std::size_t n = a.count;
    const double t0 = now_seconds();
    CC_COLL_TRY(x.template round_to_dtype<W>(g, ef, n, a.dtype, a.recv));
    CC_COLL_TRY(x.sync());
    const double t1 = now_seconds();
    stats->time_compress += t1 - t0;
    CC_COLL_TRY(x.transport().allreduce_sum(a.recv, a.recv, n, a.dtype, comm.mpi()));
    const double t2 = now_seconds();
    stats->time_communicate += t2 - t1;
    if (a.op == CC_COLL_AVG) CC_COLL_TRY(x.divide(a.recv, n, a.dtype, comm.size()));
    CC_COLL_TRY(x.sync());
    stats->time_decompress += now_seconds() - t2;
    stats->bytes_wire += n * dtype_size(a.dtype);
    return CC_COLL_OK;
}

}  // namespace cc_coll::detail
