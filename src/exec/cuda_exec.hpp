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
#include <memory>
#include <typeinfo>
#include <vector>

#include "cc_coll.h"
#include "core/comm.hpp"
#include "core/ef_store.hpp"
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

    // A compressor's scratch of type S on this device (default-constructed
    // on first use, kept with the communicator's device context): the
    // device forms of the compressors' steps keep their handles and arrays
    // here, so the executor knows none of them.
    template <typename S>
    cc_coll_status_t state(S **out)
    {
        std::shared_ptr<void> &slot = state_slot(typeid(S));
        if (!slot) slot = std::make_shared<S>();
        *out = static_cast<S *>(slot.get());
        return CC_COLL_OK;
    }

private:
    std::shared_ptr<void> &state_slot(const std::type_info &type);
    Comm *comm_ = nullptr;
    DeviceContext *ctx_ = nullptr;
    void *stream_ = nullptr;
};

}  // namespace cc_coll::detail
