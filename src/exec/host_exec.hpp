// HostExec: the execution backend of the collective algorithms for host
// buffers. Every algorithm in collectives/ is written once, as a template
// over an execution backend X (HostExec here, CudaExec in exec/cuda_exec.hpp)
// and the work type W; the backend supplies the memory, the element-wise
// steps, the compressor kernels and the transport, with the same names and
// the same contracts on both sides:
//
//  - every step returns a cc_coll_status_t (a failure has set the message);
//  - buffers come from buffer() / matrix() and live as long as the
//    communicator (contents are not kept across calls);
//  - pointers handed to the steps are in the backend's memory (host here,
//    device for CudaExec), except where a step says "host memory";
//  - sync() finishes the queued work (a no-op on the host), and the
//    algorithms call it before reading a clock, so the statistics time work,
//    not its enqueueing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <atomic>
#include <cstring>
#include <functional>
#include <vector>

#include "cc_coll.h"
#include "exec/workspace.hpp"
#include "core/comm.hpp"
#include "core/dtype.hpp"
#include "core/ef_store.hpp"
#include "core/params.hpp"
#include "core/parallel.hpp"
#include "exec/host_kernels.hpp"
#include "transport/transport.hpp"

namespace cc_coll::detail {

// Scratch buffers of a backend: Work (g' without a residual), Other, Sent,
// three more a method names for itself (LOWRANK: M^, P, Q), Indices and
// byte buffers for what is sent and received.
enum class Buf { Work, Other, Sent, Extra0, Extra1, Extra2, Indices, SendBytes, RecvBytes, Count };

class HostExec {
public:
    static constexpr bool kDevice = false;
    explicit HostExec(Comm &comm) : comm_(comm), ws_(workspace_of(comm)), threads_(comm.threads()) {}
    // Over the given scratch (a point-to-point call's own workspace).
    HostExec(Comm &comm, Workspace &ws) : comm_(comm), ws_(ws), threads_(comm.threads()) {}

    Comm &comm() { return comm_; }
    Transport &transport() { return transport_; }
    cc_coll_status_t sync() { return CC_COLL_OK; }

    // --- memory ---------------------------------------------------------------
    template <typename T>
    cc_coll_status_t buffer(Buf b, std::size_t n, T **out)
    {
        std::vector<unsigned char> &v = ws_.slots[static_cast<int>(b)];
        if (v.size() < n * sizeof(T)) v.resize(n * sizeof(T));
        *out = reinterpret_cast<T *>(v.data());
        return CC_COLL_OK;
    }
    // Matrix buffer j of a batch (one per tensor), at least n elements.
    template <typename W>
    cc_coll_status_t matrix(std::size_t j, std::size_t n, W **out)
    {
        *out = ws_.mat<W>(j, n);
        return CC_COLL_OK;
    }
    cc_coll_status_t zero(void *buf, std::size_t bytes)
    {
        each(bytes, kByteGrain, [&](std::size_t b, std::size_t e) { std::memset(at(buf, b), 0, e - b); });
        return CC_COLL_OK;
    }
    cc_coll_status_t copy(void *dst, const void *src, std::size_t bytes)
    {
        if (dst == src) return CC_COLL_OK;
        each(bytes, kByteGrain, [&](std::size_t b, std::size_t e) { std::memcpy(at(dst, b), at(src, b), e - b); });
        return CC_COLL_OK;
    }
    // `count` records of `record` bytes, `stride` bytes apart from `src`, in
    // host memory: *host (contiguous records, `record` bytes apart). Host
    // buffers are read where they are.
    cc_coll_status_t read_records(const unsigned char *src, std::size_t count, std::size_t stride,
                                  std::size_t record, const unsigned char **host, std::size_t *host_stride)
    {
        (void)count;
        (void)record;
        *host = src;
        *host_stride = stride;
        return CC_COLL_OK;
    }

    // --- residuals --------------------------------------------------------------
    // The residual of `key` (EfStore::acquire when create, else
    // EfStore::find_matching), in host memory.
    cc_coll_status_t residual(const EfKey &key, std::size_t n, cc_coll_dtype_t dtype, bool create, Residual **res)
    {
        return create ? comm_.ef().acquire(key, n, dtype, res) : comm_.ef().find_matching(key, n, dtype, res);
    }

    // --- element-wise steps -------------------------------------------------------
    // g = src (accumulate == false) or g += src (the error-feedback input).
    template <typename W>
    cc_coll_status_t load_input(const void *src, cc_coll_dtype_t dtype, std::size_t n, W *g, bool accumulate)
    {
        const std::size_t es = dtype_size(dtype);
        each(n, kElementwiseGrain,
             [&](std::size_t b, std::size_t e) { load_as<W>(at(src, b * es), dtype, e - b, g + b, accumulate); });
        return CC_COLL_OK;
    }
    // g -= src; cannot fail on the host (on the device: best effort).
    template <typename W>
    void undo_input(W *g, const void *src, cc_coll_dtype_t dtype, std::size_t n)
    {
        const std::size_t es = dtype_size(dtype);
        each(n, kElementwiseGrain,
             [&](std::size_t b, std::size_t e) { host::undo_input<W>(g + b, at(src, b * es), e - b, dtype); });
    }
    template <typename W>
    cc_coll_status_t round_to_dtype(W *g, bool ef, std::size_t n, cc_coll_dtype_t dtype, void *dst)
    {
        const std::size_t es = dtype_size(dtype);
        each(n, kElementwiseGrain,
             [&](std::size_t b, std::size_t e) { host::round_to_dtype<W>(g + b, ef, e - b, dtype, at(dst, b * es)); });
        return CC_COLL_OK;
    }
    template <typename W>
    cc_coll_status_t store(const W *src, std::size_t n, cc_coll_dtype_t dtype, void *dst)
    {
        const std::size_t es = dtype_size(dtype);
        each(n, kElementwiseGrain,
             [&](std::size_t b, std::size_t e) { store_as<W>(src + b, e - b, dtype, at(dst, b * es)); });
        return CC_COLL_OK;
    }
    cc_coll_status_t divide(void *buf, std::size_t n, cc_coll_dtype_t dtype, int divisor)
    {
        const std::size_t es = dtype_size(dtype);
        each(n, kElementwiseGrain,
             [&](std::size_t b, std::size_t e) { divide_in_place(at(buf, b * es), e - b, dtype, divisor); });
        return CC_COLL_OK;
    }
    template <typename W>
    cc_coll_status_t keep_unsent(W *g, const std::uint32_t *idx, const W *sent, std::size_t k)
    {
        each(k, kPairGrain, [&](std::size_t b, std::size_t e) { host::keep_unsent<W>(g, 0, idx + b, sent + b, e - b); });
        return CC_COLL_OK;
    }
    template <typename W>
    cc_coll_status_t zero_at(W *g, const std::uint32_t *idx, std::size_t k)
    {
        for (std::size_t j = 0; j < k; ++j) g[idx[j]] = W(0);
        return CC_COLL_OK;
    }
    template <typename W>
    cc_coll_status_t residual_and_store(W *e, W *mhat, std::size_t n, W alpha, cc_coll_dtype_t dtype, void *dst)
    {
        const std::size_t es = dtype_size(dtype);
        each(n, kElementwiseGrain, [&](std::size_t b, std::size_t end) {
            host::residual_and_store<W>(e != nullptr ? e + b : nullptr, mhat + b, end - b, alpha, dtype,
                                        at(dst, b * es));
        });
        return CC_COLL_OK;
    }
    // flags[j] (host memory) = whether bufs[j][0..ns[j]) holds NaN or Inf.
    template <typename W>
    cc_coll_status_t nonfinite(const std::vector<const W *> &bufs, const std::vector<std::size_t> &ns,
                               std::vector<std::uint8_t> *flags)
    {
        flags->assign(bufs.size(), 0);
        for (std::size_t j = 0; j < bufs.size(); ++j) {
            std::atomic<bool> any{false};
            each(ns[j], kElementwiseGrain, [&](std::size_t b, std::size_t e) {
                if (host::any_nonfinite(bufs[j] + b, e - b)) any.store(true, std::memory_order_relaxed);
            });
            (*flags)[j] = any.load() ? 1 : 0;
        }
        return CC_COLL_OK;
    }

    int threads() const { return threads_; }
    // The host scratch the compressors' host steps use (their backend forms
    // in src/compressors/<name>/).
    Workspace &workspace() { return ws_; }

private:
    // Bytes per range below which memset and memcpy are not split.
    static constexpr std::size_t kByteGrain = std::size_t{1} << 18;
    // Pairs per range of the residual's update at k scattered positions.
    static constexpr std::size_t kPairGrain = std::size_t{1} << 14;
    static void *at(void *p, std::size_t bytes) { return static_cast<unsigned char *>(p) + bytes; }
    static const void *at(const void *p, std::size_t bytes) { return static_cast<const unsigned char *>(p) + bytes; }
    // f(begin, end) over the ranges of [0, n) on this communicator's threads.
    template <typename F>
    void each(std::size_t n, std::size_t grain, F &&f)
    {
        parallel_for(n, threads_, grain, f);
    }

    Comm &comm_;
    Workspace &ws_;
    HostTransport transport_;
    int threads_;
};

}  // namespace cc_coll::detail
