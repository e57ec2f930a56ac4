// LOWRANK's device steps (lowrank_backend.hpp): cuBLAS, cuSOLVER and cuRAND
// on the caller's stream, their handles created on the first LOWRANK call
// on a device. Built only with CUDA.
#ifdef CC_COLL_HAVE_CUDA
#include "compressors/lowrank/lowrank_backend.hpp"

#include <memory>

#include "compressors/lowrank/powersgd_cuda.hpp"
#include "core/error.hpp"
#include "gpu/gpu.hpp"

namespace cc_coll::detail {

namespace {

constexpr const char *kFn = "cc_coll (device)";
cc_coll_status_t check(const gpu::Result &r) { return gpu::check(r, kFn); }
cudaStream_t as_stream(void *s) { return static_cast<cudaStream_t>(s); }

}  // namespace

// LOWRANK's handles on one device (CudaExec::state).
struct LowRankDeviceState {
    std::unique_ptr<lowrank::cuda::Context> blas;
};

namespace {
cc_coll_status_t blas_of(CudaExec &x, lowrank::cuda::Context **out)
{
    LowRankDeviceState *st = nullptr;
    CC_COLL_TRY(x.state(&st));
    if (!st->blas) CC_COLL_TRY(gpu::check(lowrank::cuda::Context::create(&st->blas), "LOWRANK (device)"));
    *out = st->blas.get();
    return CC_COLL_OK;
}
}  // namespace

template <typename W>
cc_coll_status_t lr_start_q(CudaExec &x, const W *previous, std::uint64_t seed, std::uint64_t stream,
                            const lowrank::Shape &s, bool half, W *q)
{
    lowrank::cuda::Context *blas = nullptr;
    CC_COLL_TRY(blas_of(x, &blas));
    return check(lowrank::cuda::start_q<W>(*blas, previous, seed, stream, s, half, q, as_stream(x.stream())));
}

template <typename W>
cc_coll_status_t lr_multiply_mq(CudaExec &x, const W *m, const lowrank::Shape &s, const W *q, W *p)
{
    lowrank::cuda::Context *blas = nullptr;
    CC_COLL_TRY(blas_of(x, &blas));
    return check(lowrank::cuda::multiply_mq<W>(*blas, m, s, q, p, as_stream(x.stream())));
}

template <typename W>
cc_coll_status_t lr_orthogonalize(CudaExec &x, W *a, std::size_t rows, int r, bool half)
{
    lowrank::cuda::Context *blas = nullptr;
    CC_COLL_TRY(blas_of(x, &blas));
    return check(lowrank::cuda::orthogonalize<W>(*blas, a, rows, r, half, as_stream(x.stream())));
}

template <typename W>
cc_coll_status_t lr_multiply_mtp(CudaExec &x, const W *m, const lowrank::Shape &s, const W *p, W *q)
{
    lowrank::cuda::Context *blas = nullptr;
    CC_COLL_TRY(blas_of(x, &blas));
    return check(lowrank::cuda::multiply_mtp<W>(*blas, m, s, p, q, as_stream(x.stream())));
}

template <typename W>
cc_coll_status_t lr_scale(CudaExec &x, W *v, std::size_t n, W alpha)
{
    lowrank::cuda::Context *blas = nullptr;
    CC_COLL_TRY(blas_of(x, &blas));
    return check(lowrank::cuda::scale<W>(*blas, v, n, alpha, as_stream(x.stream())));
}

// M^ = P Q^T into the call's M^ buffer, then residual_and_store.
template <typename W>
cc_coll_status_t lr_reconstruct_store(CudaExec &x, const W *p, const W *q, const lowrank::Shape &s, W *e,
                                      std::size_t count, W alpha, cc_coll_dtype_t dtype, void *dst)
{
    lowrank::cuda::Context *blas = nullptr;
    CC_COLL_TRY(blas_of(x, &blas));
    W *mhat = nullptr;
    CC_COLL_TRY(x.template buffer<W>(kLowRankMhat, s.elements(), &mhat));
    CC_COLL_TRY(check(lowrank::cuda::reconstruct<W>(*blas, p, q, s, W(1), mhat, as_stream(x.stream()))));
    return x.template residual_and_store<W>(e, mhat, count, alpha, dtype, dst);
}

template <typename W>
const W *lr_stored_q(CudaExec &, LowRankState &state, const lowrank::Shape &s)
{
    if (!state.has_device_q<W>(s.rows, s.cols, s.rank)) return nullptr;
    return static_cast<const W *>(state.device.get()) + s.rows * static_cast<std::size_t>(s.rank);
}

template <typename W>
cc_coll_status_t lr_keep_factors(CudaExec &x, LowRankState &state, const lowrank::Shape &s, const W *p, const W *q)
{
    const std::size_t pn = s.rows * static_cast<std::size_t>(s.rank);
    const std::size_t qn = s.cols * static_cast<std::size_t>(s.rank);
    if (!state.has_device_q<W>(s.rows, s.cols, s.rank)) {
        cc_coll_status_t st = CC_COLL_OK;
        state.device = gpu::device_zeroed((pn + qn) * sizeof(W), &st);
        if (state.device == nullptr) return st;
    }
    W *factors = static_cast<W *>(state.device.get());
    CC_COLL_TRY(x.copy(factors, p, pn * sizeof(W)));
    CC_COLL_TRY(x.copy(factors + pn, q, qn * sizeof(W)));
    state.rows = s.rows;
    state.cols = s.cols;
    state.rank = s.rank;
    state.device_work = sizeof(W);
    state.p_f32.clear();
    state.q_f32.clear();
    state.p_f64.clear();
    state.q_f64.clear();
    return CC_COLL_OK;
}

#define CC_LOWRANK_DEVICE(W)                                                                                      \
    template cc_coll_status_t lr_start_q<W>(CudaExec &, const W *, std::uint64_t, std::uint64_t,                 \
                                            const lowrank::Shape &, bool, W *);                                   \
    template cc_coll_status_t lr_multiply_mq<W>(CudaExec &, const W *, const lowrank::Shape &, const W *, W *);  \
    template cc_coll_status_t lr_orthogonalize<W>(CudaExec &, W *, std::size_t, int, bool);                      \
    template cc_coll_status_t lr_multiply_mtp<W>(CudaExec &, const W *, const lowrank::Shape &, const W *, W *); \
    template cc_coll_status_t lr_scale<W>(CudaExec &, W *, std::size_t, W);                                      \
    template cc_coll_status_t lr_reconstruct_store<W>(CudaExec &, const W *, const W *, const lowrank::Shape &,  \
                                                      W *, std::size_t, W, cc_coll_dtype_t, void *);              \
    template const W *lr_stored_q<W>(CudaExec &, LowRankState &, const lowrank::Shape &);                        \
    template cc_coll_status_t lr_keep_factors<W>(CudaExec &, LowRankState &, const lowrank::Shape &, const W *,  \
                                                 const W *);
CC_LOWRANK_DEVICE(float)
CC_LOWRANK_DEVICE(double)

}  // namespace cc_coll::detail
#endif
