// with_exec: runs an algorithm on the backend of a call's buffers. The
// algorithms are templates over the backend (exec/host_exec.hpp), written
// once; this is the one place that picks HostExec or CudaExec.
#pragma once

#include "cc_coll.h"
#include "core/comm.hpp"
#include "core/error.hpp"
#include "exec/host_exec.hpp"
#ifdef CC_COLL_HAVE_CUDA
#include "exec/cuda_exec.hpp"
#endif

namespace cc_coll::detail {

// f(HostExec &) for host buffers, f(CudaExec &) for device buffers (the
// caller's cudaStream_t in `stream`); device buffers in a build without CUDA
// are CC_COLL_ERR_NOT_SUPPORTED (unreachable in practice: without CUDA no
// buffer is located in device memory).
template <typename F>
cc_coll_status_t with_exec(Comm &comm, bool on_device, void *stream, F &&f)
{
    if (!on_device) {
        HostExec x(comm);
        return f(x);
    }
#ifdef CC_COLL_HAVE_CUDA
    CudaExec x;
    const cc_coll_status_t st = CudaExec::create(comm, stream, &x);
    if (st != CC_COLL_OK) return st;
    return f(x);
#else
    (void)stream;
    return fail(CC_COLL_ERR_NOT_SUPPORTED, "device buffers: this build of libcc_coll has no CUDA support");
#endif
}

// Runs f(W{}) with W the work type of `dtype` (double for F64, float for
// the others): the one place the lossy algorithms pick their instantiation.
template <typename F>
cc_coll_status_t with_work_type(cc_coll_dtype_t dtype, F &&f)
{
    if (dtype == CC_COLL_F64) return f(double{});
    return f(float{});
}

}  // namespace cc_coll::detail
