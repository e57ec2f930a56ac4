// Steps the lossy algorithms share: the error-feedback input g' = g + e,
// the choice of elements to send, and the dense fallbacks. Header-only
// templates over the work type W (float or double).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "collectives/allreduce.hpp"
#include "collectives/reduce_scatter.hpp"
#include "collectives/workspace.hpp"
#include "compressors/threshold/threshold_ladder.hpp"
#include "compressors/topk/topk_select.hpp"
#include "core/dtype.hpp"
#include "core/ef_store.hpp"
#include "transport/mpi_transport.hpp"

namespace cc_coll::detail {

// Runs f(W{}) with W the work type of `dtype` (double for F64, float for
// the others): the one place the lossy algorithms pick their instantiation.
template <typename F>
cc_coll_status_t with_work_type(cc_coll_dtype_t dtype, F &&f)
{
    if (dtype == CC_COLL_F64) return f(double{});
    return f(float{});
}

template <typename W>
inline bool finite(W v)
{
    return std::isfinite(v);
}

// g' = g + e for the n elements of `send`, in the residual itself when EF is
// on (the residual named by key_buf / n / dtype or params' ef_key), else in
// workspace memory. With create == false an absent residual is not created
// (for calls that transmit everything). *res is nullptr without a residual.
template <typename W>
cc_coll_status_t load_input(Comm &comm, const CallParams &p, const void *send, const void *key_buf, std::size_t n,
                            cc_coll_dtype_t dtype, bool create, W **g, Residual **res)
{
    *res = nullptr;
    if (p.ef) {
        const EfKey key = EfKey::from(p.has_ef_key, p.ef_key, key_buf, n, dtype);
        const cc_coll_status_t st =
            create ? comm.ef().acquire(key, n, dtype, res) : comm.ef().find_matching(key, n, dtype, res);
        if (st != CC_COLL_OK) return st;
    }
    if (*res != nullptr) {
        *g = (*res)->data<W>();
        load_as<W>(send, dtype, n, *g, true);
    } else {
        *g = workspace_of(comm).work<W>(n);
        load_as<W>(send, dtype, n, *g, false);
    }
    return CC_COLL_OK;
}

// Takes this call's input back out of the residual (a call that failed
// before transmitting leaves the residual as it was).
template <typename W>
void undo_input(W *g, const Residual *res, const void *send, std::size_t n, cc_coll_dtype_t dtype)
{
    if (res != nullptr)
        for (std::size_t i = 0; i < n; ++i) g[i] -= load_element<W>(send, i, dtype);
}

// True when any of the n values is NaN or infinite.
template <typename W>
bool any_nonfinite(const W *g, std::size_t n)
{
    for (std::size_t i = 0; i < n; ++i)
        if (!finite(g[i])) return true;
    return false;
}

// The elements a rank sends, ascending: the top k = ceil(density n), or the
// elements at or above the threshold ladder's pick.
template <typename W>
void sparsify(const W *g, std::size_t n, const CallParams &p, topk::SelectScratch *scratch,
              std::vector<std::uint32_t> *idx)
{
    idx->clear();
    if (p.sparsifier == CC_COLL_SPARSIFY_THRESHOLD) {
        threshold::collect<W>(g, n, threshold::pick<W>(g, n, p.zero_fraction), idx);
        return;
    }
    const std::size_t k = topk::k_for(p.density, n);
    idx->resize(k);
    topk::select<W>(g, n, k, idx->data(), scratch);
}

// The residual after a sparse send: e = g' - sent at the k kept positions
// offset + idx[j] (g' elsewhere stays); non-finite differences are dropped.
template <typename W>
void keep_unsent(W *g, std::size_t offset, const std::uint32_t *idx, const W *sent, std::size_t k)
{
    for (std::size_t j = 0; j < k; ++j) {
        W &e = g[offset + idx[j]];
        const W r = e - sent[j];
        e = finite(r) ? r : W(0);
    }
}

// Writes g' rounded to the dtype into `dst` and keeps the rounding in the
// residual (zero for F32/F64; non-finite differences are dropped).
template <typename W>
void round_to_dtype(W *g, bool ef, std::size_t n, cc_coll_dtype_t dtype, void *dst)
{
    store_as<W>(g, n, dtype, dst);
    if (!ef) return;
    for (std::size_t i = 0; i < n; ++i) {
        const W r = g[i] - load_element<W>(dst, i, dtype);
        g[i] = finite(r) ? r : W(0);
    }
}

// Dense allreduce of g' (n = a.count): recv = sum over ranks of g' rounded
// to the dtype.
template <typename W>
cc_coll_status_t dense_allreduce(Comm &comm, const AllreduceArgs &a, W *g, bool ef, StatsSnapshot *stats)
{
    const std::size_t n = a.count;
    const double t0 = now_seconds();
    round_to_dtype<W>(g, ef, n, a.dtype, a.recv);
    const double t1 = now_seconds();
    stats->time_compress += t1 - t0;
    const cc_coll_status_t st = allreduce_sum(a.recv, a.recv, n, a.dtype, comm.mpi());
    const double t2 = now_seconds();
    stats->time_communicate += t2 - t1;
    if (st != CC_COLL_OK) return st;
    if (a.op == CC_COLL_AVG) divide_in_place(a.recv, n, a.dtype, comm.size());
    stats->time_decompress += now_seconds() - t2;
    stats->bytes_wire += n * dtype_size(a.dtype);
    return CC_COLL_OK;
}

// Decodes a summed sketch into out[0..n) (work type), rounds it into `dst`
// (n elements of dtype), applies AVG over `ranks`, and records the decode.
template <typename W>
void decode_sketch_into(const sketch::Layout &layout, const std::uint8_t *support, W *cells, W *out, void *dst,
                        cc_coll_dtype_t dtype, cc_coll_op_t op, int ranks, sketch::DecodeScratch *scratch,
                        StatsSnapshot *stats)
{
    const sketch::DecodeInfo info = sketch::decode<W>(layout, support, cells, out, scratch);
    store_as<W>(out, layout.n, dtype, dst);
    if (op == CC_COLL_AVG) divide_in_place(dst, layout.n, dtype, ranks);
    stats->sketch_elements += info.support;
    stats->sketch_peeled += info.peeled;
}

// Dense reduce-scatter of g' (recvcount x P elements): this rank's shard of
// the sum over ranks of g' rounded to the dtype.
template <typename W>
cc_coll_status_t dense_reduce_scatter(Comm &comm, const ReduceScatterArgs &a, W *g, bool ef, StatsSnapshot *stats)
{
    const std::size_t n = a.recvcount * static_cast<std::size_t>(comm.size());
    const std::size_t es = dtype_size(a.dtype);
    std::vector<unsigned char> &rounded = workspace_of(comm).send_bytes;
    const double t0 = now_seconds();
    rounded.resize(n * es);
    round_to_dtype<W>(g, ef, n, a.dtype, rounded.data());
    const double t1 = now_seconds();
    stats->time_compress += t1 - t0;
    const cc_coll_status_t st = reduce_scatter_sum(rounded.data(), a.recv, a.recvcount, a.dtype, comm.mpi());
    const double t2 = now_seconds();
    stats->time_communicate += t2 - t1;
    if (st != CC_COLL_OK) return st;
    if (a.op == CC_COLL_AVG) divide_in_place(a.recv, a.recvcount, a.dtype, comm.size());
    stats->time_decompress += now_seconds() - t2;
    stats->bytes_wire += n * es;
    return CC_COLL_OK;
}

}  // namespace cc_coll::detail
