// HALF's codec for the element-codec algorithms
// (collectives/allreduce/element_codec.hpp): two bytes per element, in the
// format of CC_COLL_HALF_FORMAT. Overloaded on the backend: the host forms
// run on the communicator's threads (half.cc), the device forms are CUDA
// kernels on the caller's stream (half_cuda.cu).
#pragma once

#include <cstddef>
#include <cstdint>

#include "cc_coll.h"
#include "compressors/half/half_kernels.hpp"
#include "core/params.hpp"
#include "exec/host_exec.hpp"
#ifdef CC_COLL_HAVE_CUDA
#include "exec/cuda_exec.hpp"
#endif

namespace cc_coll::detail {

struct HalfCodec {
    // The format of a call (its method's word of options).
    static half::Format format(const CallParams &p)
    {
        return p.method_options[CC_COLL_METHOD_HALF] == 1 ? half::Format::Fp16 : half::Format::Bf16;
    }
    // Params that make the codec use format f (for another method's buffer).
    static void set_format(CallParams *p, half::Format f)
    {
        p->method_options[CC_COLL_METHOD_HALF] = f == half::Format::Fp16 ? 1 : 0;
    }
    static constexpr bool kElementwise = true;
    static std::size_t coded_size(const CallParams &, std::size_t n) { return 2 * n; }

    template <typename W>
    static cc_coll_status_t encode(HostExec &x, const CallParams &p, const W *v, std::size_t n, unsigned char *out,
                                   W *error, bool accumulate);
    template <typename W>
    static cc_coll_status_t decode_sum(HostExec &x, const CallParams &p, const unsigned char *in, std::size_t blocks,
                                       std::size_t n, W *sum);
    static cc_coll_status_t decode_store(HostExec &x, const CallParams &p, const unsigned char *in, std::size_t n,
                                         cc_coll_dtype_t dtype, void *dst);
#ifdef CC_COLL_HAVE_CUDA
    template <typename W>
    static cc_coll_status_t encode(CudaExec &x, const CallParams &p, const W *v, std::size_t n, unsigned char *out,
                                   W *error, bool accumulate);
    template <typename W>
    static cc_coll_status_t decode_sum(CudaExec &x, const CallParams &p, const unsigned char *in, std::size_t blocks,
                                       std::size_t n, W *sum);
    static cc_coll_status_t decode_store(CudaExec &x, const CallParams &p, const unsigned char *in, std::size_t n,
                                         cc_coll_dtype_t dtype, void *dst);
#endif
};

}  // namespace cc_coll::detail
