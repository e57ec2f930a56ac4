// The chunk codecs of methods QUANT and ONEBIT for the element-codec
// algorithms (collectives/allreduce/element_codec.hpp): per chunk of a block,
// a binary32 offset and step then b-bit codes (quant_kernels.hpp). One codec
// template over the method id, whose options word picks bits, scheme,
// rounding and chunk. Overloaded on the backend: the host forms run on the
// communicator's threads (quant.cc), the device forms are CUDA kernels on
// the caller's stream (quant_cuda.cu).
#pragma once

#include <cstddef>
#include <cstdint>

#include "cc_coll.h"
#include "compressors/quant/quant_kernels.hpp"
#include "core/params.hpp"
#include "exec/host_exec.hpp"
#ifdef CC_COLL_HAVE_CUDA
#include "exec/cuda_exec.hpp"
#endif

namespace cc_coll::detail {

template <cc_coll_method_t Id>
struct ChunkCodec {
    static_assert(Id == CC_COLL_METHOD_QUANT || Id == CC_COLL_METHOD_ONEBIT, "QUANT or ONEBIT");
    // The codec of a call (its method's word of options).
    static quant::Options options(const CallParams &p)
    {
        return Id == CC_COLL_METHOD_QUANT ? quant::quant_options(p.method_options[Id])
                                          : quant::onebit_options(p.method_options[Id]);
    }
    static constexpr bool kElementwise = false;
    static std::size_t coded_size(const CallParams &p, std::size_t n)
    {
        const quant::Options o = options(p);
        return quant::coded_size(n, o.chunk, o.bits);
    }

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

using QuantCodec = ChunkCodec<CC_COLL_METHOD_QUANT>;
using OnebitCodec = ChunkCodec<CC_COLL_METHOD_ONEBIT>;

// The host loops themselves, on one thread, for the tests and the kernel
// benchmark: encode(v[0..n)) into out (coded_size bytes), error as in the
// codec's encode; decode of the first n elements of a block into binary32.
namespace quant {
template <typename W>
void encode_host(const Options &o, std::uint64_t seed, unsigned stage, const W *v, std::size_t n, unsigned char *out,
                 W *error, bool accumulate);
void decode_host(const Options &o, const unsigned char *in, std::size_t n, float *out);
}  // namespace quant

}  // namespace cc_coll::detail
