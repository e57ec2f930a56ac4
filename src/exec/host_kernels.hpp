// The element-wise steps of the lossy algorithms on host memory: the
// error-feedback input and its undo, the choice of elements to send, the
// residual updates and the rounding to the dtype. Header-only templates over
// the work type W (float or double). HostExec (exec/host_exec.hpp) is built
// on them; the device counterparts are in gpu/elementwise.hpp.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/dtype.hpp"
#include "core/parallel.hpp"
#include "core/params.hpp"

namespace cc_coll::detail::host {

template <typename W>
inline bool finite(W v)
{
    return std::isfinite(v);
}

// g[i] -= send[i]: takes a call's input back out of its residual.
template <typename W>
void undo_input(W *g, const void *send, std::size_t n, cc_coll_dtype_t dtype)
{
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

// LOWRANK's last step: with e != nullptr, e[i] -= mhat[i] (0 when not
// finite); dst[i] = alpha mhat[i] rounded to the dtype (mhat is scaled in
// place when alpha != 1).
template <typename W>
void residual_and_store(W *e, W *mhat, std::size_t n, W alpha, cc_coll_dtype_t dtype, void *dst)
{
    if (e != nullptr)
        for (std::size_t i = 0; i < n; ++i) {
            const W r = e[i] - mhat[i];
            e[i] = finite(r) ? r : W(0);
        }
    if (alpha != W(1))
        for (std::size_t i = 0; i < n; ++i) mhat[i] *= alpha;
    store_as<W>(mhat, n, dtype, dst);
}

}  // namespace cc_coll::detail::host
