// CudaExec: the execution backend of the collective algorithms for CUDA
// device buffers, with the contracts of HostExec (exec/host_exec.hpp): the
// same steps under the same names, run by CUDA kernels and cuBLAS /
// cuSOLVER / cuRAND on the caller's stream, data moved by the device
// transport (direct or staged), residuals and LOWRANK factors in device
// memory. Steps enqueue work on the stream; sync() finishes it, and every
// step that hands a value to the host (read_records, nonfinite,
// sparsify's count, sketch_rows, sketch_decode's info) synchronises itself.
//
// No CUDA header here: the algorithms that instantiate CudaExec are plain
// C++ translation units. Defined in cuda_exec.cc, built only with CUDA.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "cc_coll.h"
#include "compressors/lowrank/powersgd.hpp"
#include "compressors/sketch/count_sketch.hpp"
#include "core/comm.hpp"
#include "core/ef_store.hpp"
#include "compressors/lowrank/lowrank_state.hpp"
#include "core/params.hpp"
#include "exec/host_exec.hpp"
#include "transport/transport.hpp"

namespace cc_coll::detail {

struct DeviceContext;

class CudaExec {
public:
    static constexpr bool kDevice = true;
    // The communicator's device context on the current device (created on
    // first use); `stream` is the caller's cudaStream_t.
    static cc_coll_status_t create(Comm &comm, void *stream, CudaExec *out);
    CudaExec() = default;

    Comm &comm() { return *comm_; }
    // The caller's cudaStream_t: a new compressor's device steps, written as
    // free functions overloaded on the backend in its own folder, enqueue
    // their kernels on it.
    void *stream() const { return stream_; }
    Transport &transport();
    cc_coll_status_t sync();

    template <typename T>
    cc_coll_status_t buffer(Buf b, std::size_t n, T **out);
    template <typename W>
    cc_coll_status_t matrix(std::size_t j, std::size_t n, W **out);
    cc_coll_status_t zero(void *buf, std::size_t bytes);
    cc_coll_status_t copy(void *dst, const void *src, std::size_t bytes);
    cc_coll_status_t read_records(const unsigned char *src, std::size_t count, std::size_t stride,
                                  std::size_t record, const unsigned char **host, std::size_t *host_stride);

    cc_coll_status_t residual(const EfKey &key, std::size_t n, cc_coll_dtype_t dtype, bool create, Residual **res);

    template <typename W>
    cc_coll_status_t load_input(const void *src, cc_coll_dtype_t dtype, std::size_t n, W *g, bool accumulate);
    // load_input, then topk_select (two kernels on the device).
    template <typename W>
    cc_coll_status_t load_select(const void *src, cc_coll_dtype_t dtype, std::size_t n, W *g, bool accumulate,
                                 std::size_t k, std::uint32_t *idx)
    {
        const cc_coll_status_t st = load_input<W>(src, dtype, n, g, accumulate);
        return st != CC_COLL_OK ? st : topk_select<W>(g, n, k, idx);
    }
    template <typename W>
    void undo_input(W *g, const void *src, cc_coll_dtype_t dtype, std::size_t n);
    template <typename W>
    cc_coll_status_t round_to_dtype(W *g, bool ef, std::size_t n, cc_coll_dtype_t dtype, void *dst);
    template <typename W>
    cc_coll_status_t store(const W *src, std::size_t n, cc_coll_dtype_t dtype, void *dst);
    cc_coll_status_t divide(void *buf, std::size_t n, cc_coll_dtype_t dtype, int divisor);
    template <typename W>
    cc_coll_status_t keep_unsent(W *g, const std::uint32_t *idx, const W *sent, std::size_t k);
    template <typename W>
    cc_coll_status_t zero_at(W *g, const std::uint32_t *idx, std::size_t k);
    template <typename W>
    cc_coll_status_t residual_and_store(W *e, W *mhat, std::size_t n, W alpha, cc_coll_dtype_t dtype, void *dst);
    template <typename W>
    cc_coll_status_t nonfinite(const std::vector<const W *> &bufs, const std::vector<std::size_t> &ns,
                               std::vector<std::uint8_t> *flags);

    template <typename W>
    cc_coll_status_t topk_select(const W *g, std::size_t n, std::size_t k, std::uint32_t *idx);
    template <typename W>
    cc_coll_status_t topk_encode(const W *g, std::size_t n, const std::uint32_t *idx, std::size_t k,
                                 cc_coll_dtype_t dtype, unsigned char *payload, W *sent);
    cc_coll_status_t topk_scatter_add(const unsigned char *payload, std::size_t k, cc_coll_dtype_t dtype, void *out);

    template <typename W>
    cc_coll_status_t sparsify(const W *g, std::size_t n, const CallParams &p, std::uint32_t **idx, std::size_t *kept);
    template <typename W>
    cc_coll_status_t support_message(const W *g, std::size_t n, const std::uint32_t *idx, std::size_t kept,
                                     unsigned char *msg);
    cc_coll_status_t sketch_rows(const unsigned char *msg, std::size_t n, double load_factor, std::uint32_t *m,
                                 bool *nonfinite);
    template <typename W>
    cc_coll_status_t sketch_encode(const sketch::Layout &layout, const W *g, const std::uint32_t *idx,
                                   std::size_t kept, W *cells);
    template <typename W>
    cc_coll_status_t sketch_decode(const sketch::Layout &layout, const unsigned char *support, W *cells, W *out,
                                   sketch::DecodeInfo *info);

    template <typename W>
    cc_coll_status_t lr_start_q(const W *previous, std::uint64_t seed, std::uint64_t stream, const lowrank::Shape &s,
                                bool half, W *q);
    template <typename W>
    cc_coll_status_t lr_multiply_mq(const W *m, const lowrank::Shape &s, const W *q, W *p);
    template <typename W>
    cc_coll_status_t lr_orthogonalize(W *a, std::size_t rows, int r, bool half);
    template <typename W>
    cc_coll_status_t lr_multiply_mtp(const W *m, const lowrank::Shape &s, const W *p, W *q);
    template <typename W>
    cc_coll_status_t lr_scale(W *x, std::size_t n, W alpha);
    template <typename W>
    cc_coll_status_t lr_reconstruct(const W *p, const W *q, const lowrank::Shape &s, W *out);
    // lr_reconstruct into the Mhat buffer, then residual_and_store.
    template <typename W>
    cc_coll_status_t lr_reconstruct_store(const W *p, const W *q, const lowrank::Shape &s, W *e, std::size_t count,
                                          W alpha, cc_coll_dtype_t dtype, void *dst)
    {
        W *mhat = nullptr;
        cc_coll_status_t st = buffer<W>(Buf::Mhat, s.elements(), &mhat);
        if (st == CC_COLL_OK) st = lr_reconstruct<W>(p, q, s, mhat);
        return st != CC_COLL_OK ? st : residual_and_store<W>(e, mhat, count, alpha, dtype, dst);
    }
    template <typename W>
    const W *lr_stored_q(LowRankState &state, const lowrank::Shape &s);
    template <typename W>
    cc_coll_status_t lr_keep_factors(LowRankState &state, const lowrank::Shape &s, const W *p, const W *q);

private:
    Comm *comm_ = nullptr;
    DeviceContext *ctx_ = nullptr;
    void *stream_ = nullptr;
};

}  // namespace cc_coll::detail
