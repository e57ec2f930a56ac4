// LOWRANK's steps for the algorithms, overloaded on the backend (see
// compressors/topk/topk_backend.hpp): PowerSGD's products, orthogonalisation
// and reconstruction, and the factors kept for the warm start. The host
// forms here (CBLAS/LAPACK), the device forms in lowrank_device.cc (cuBLAS,
// cuSOLVER, cuRAND; their handles in the executor's state slot).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "cc_coll.h"
#include "core/error.hpp"
#include "compressors/lowrank/lowrank_state.hpp"
#include "compressors/lowrank/powersgd.hpp"
#include "core/parallel.hpp"
#include "exec/host_exec.hpp"
#include "exec/host_kernels.hpp"
#ifdef CC_COLL_HAVE_CUDA
#include "exec/cuda_exec.hpp"
#endif

namespace cc_coll::detail {

// LOWRANK's scratch of a call: M^ on the device, and P and Q of a batch.
constexpr Buf kLowRankMhat = Buf::Extra0;
constexpr Buf kLowRankP = Buf::Extra1;
constexpr Buf kLowRankQ = Buf::Extra2;

namespace host {
// LOWRANK's decompression: M^ = P Q^T, then residual_and_store of its first
// `count` elements (e may be null), fused: the rows in blocks of about
// block_bytes of M^, split among `threads` threads (core/parallel.hpp); each
// block's product lands in a thread's scratch and is stored and subtracted
// while still in the cache. The same values as the whole product followed
// by residual_and_store (lowrank::reconstruct_rows).
template <typename W>
void reconstruct_store(const W *p, const W *q, const lowrank::Shape &s, W *e, std::size_t count, W alpha,
                       cc_coll_dtype_t dtype, void *dst, int threads, std::size_t block_bytes)
{
    const std::size_t cols = s.cols, es = dtype_size(dtype);
    const std::size_t block = std::max<std::size_t>(1, block_bytes / (cols * sizeof(W)));
    auto *out = static_cast<unsigned char *>(dst);
    parallel_for(s.rows, threads, block, [&](std::size_t r0, std::size_t r1) {
        thread_local std::vector<W> scratch;
        for (std::size_t b = r0; b < r1; b += block) {
            const std::size_t be = std::min(r1, b + block), lo = b * cols;
            if (lo >= count) break;
            const std::size_t hi = std::min(be * cols, count);
            scratch.resize((be - b) * cols);
            lowrank::reconstruct_rows<W>(p, q, s, b, be - b, W(1), scratch.data());
            residual_and_store<W>(e != nullptr ? e + lo : nullptr, scratch.data(), hi - lo, alpha, dtype,
                                  out + lo * es);
        }
    });
}
}  // namespace host

template <typename W>
cc_coll_status_t lr_start_q(HostExec &, const W *previous, std::uint64_t seed, std::uint64_t stream,
                            const lowrank::Shape &s, bool half, W *q)
{
    lowrank::start_q<W>(previous, seed, stream, s, half, q);
    return CC_COLL_OK;
}
template <typename W>
cc_coll_status_t lr_multiply_mq(HostExec &, const W *m, const lowrank::Shape &s, const W *q, W *p)
{
    lowrank::multiply_mq<W>(m, s, q, p);
    return CC_COLL_OK;
}
template <typename W>
cc_coll_status_t lr_orthogonalize(HostExec &, W *a, std::size_t rows, int r, bool half)
{
    lowrank::orthogonalize<W>(a, rows, r, half);
    return CC_COLL_OK;
}
template <typename W>
cc_coll_status_t lr_multiply_mtp(HostExec &, const W *m, const lowrank::Shape &s, const W *p, W *q)
{
    lowrank::multiply_mtp<W>(m, s, p, q);
    return CC_COLL_OK;
}
template <typename W>
cc_coll_status_t lr_scale(HostExec &, W *x, std::size_t n, W alpha)
{
    lowrank::scale<W>(x, n, alpha);
    return CC_COLL_OK;
}
// M^ = P Q^T, then residual_and_store of its first `count` elements (e may
// be null), fused in blocks of rows on the threads (host::reconstruct_store).
template <typename W>
cc_coll_status_t lr_reconstruct_store(HostExec &x, const W *p, const W *q, const lowrank::Shape &s, W *e,
                                      std::size_t count, W alpha, cc_coll_dtype_t dtype, void *dst)
{
    constexpr std::size_t kRowBlockBytes = std::size_t{1} << 18;  // a quarter of a 1 MiB L2
    host::reconstruct_store<W>(p, q, s, e, count, alpha, dtype, dst, x.threads(), kRowBlockBytes);
    return CC_COLL_OK;
}
// The stored Q of `state` for the warm start when it fits `s` in work type W
// and this backend's memory, else nullptr.
template <typename W>
const W *lr_stored_q(HostExec &, LowRankState &state, const lowrank::Shape &s)
{
    return state.has_q<W>(s.rows, s.cols, s.rank) ? state.q<W>().data() : nullptr;
}
// Keeps P and Q (backend memory) as `state`'s factors.
template <typename W>
cc_coll_status_t lr_keep_factors(HostExec &, LowRankState &state, const lowrank::Shape &s, const W *p, const W *q)
{
    state.keep_host<W>(s, p, q);
    return CC_COLL_OK;
}

#ifdef CC_COLL_HAVE_CUDA
template <typename W>
cc_coll_status_t lr_start_q(CudaExec &x, const W *previous, std::uint64_t seed, std::uint64_t stream,
                            const lowrank::Shape &s, bool half, W *q);
template <typename W>
cc_coll_status_t lr_multiply_mq(CudaExec &x, const W *m, const lowrank::Shape &s, const W *q, W *p);
template <typename W>
cc_coll_status_t lr_orthogonalize(CudaExec &x, W *a, std::size_t rows, int r, bool half);
template <typename W>
cc_coll_status_t lr_multiply_mtp(CudaExec &x, const W *m, const lowrank::Shape &s, const W *p, W *q);
template <typename W>
cc_coll_status_t lr_scale(CudaExec &x, W *v, std::size_t n, W alpha);
template <typename W>
cc_coll_status_t lr_reconstruct_store(CudaExec &x, const W *p, const W *q, const lowrank::Shape &s, W *e,
                                      std::size_t count, W alpha, cc_coll_dtype_t dtype, void *dst);
template <typename W>
const W *lr_stored_q(CudaExec &x, LowRankState &state, const lowrank::Shape &s);
template <typename W>
cc_coll_status_t lr_keep_factors(CudaExec &x, LowRankState &state, const lowrank::Shape &s, const W *p, const W *q);
#endif

}  // namespace cc_coll::detail
