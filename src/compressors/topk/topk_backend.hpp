// TOPK's steps for the algorithms, overloaded on the backend: the host forms
// on the communicator's threads and workspace, the device forms (CUDA
// builds: topk_device.cc) on the caller's stream with their scratch in the
// executor's state slot of TopkDeviceState. The executors know no method.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>

#include "cc_coll.h"
#include "core/error.hpp"
#include "compressors/topk/topk_select.hpp"
#include "core/params.hpp"
#include "exec/host_exec.hpp"
#include "wire/topk_payload.hpp"
#ifdef CC_COLL_HAVE_CUDA
#include "exec/cuda_exec.hpp"
#endif

namespace cc_coll::detail {

// The payload format of TOPK's settings (CC_COLL_TOPK_VALUE_BITS,
// CC_COLL_TOPK_INDEX_CODING; methods/topk.cc writes the word): bits 0-7
// the value bits (0: the dtype's element), bit 8 delta-coded indices
// (implied by value bits). The default word 0 is the uncoded payload.
constexpr std::uint32_t kTopkOptionValueBits = 0xffu, kTopkOptionDelta = 0x100u;
inline topk::Format topk_format(const CallParams &p)
{
    const std::uint32_t w = p.method_options[CC_COLL_METHOD_TOPK];
    topk::Format f;
    f.value_bits = w & kTopkOptionValueBits;
    f.coded = f.value_bits != 0 || (w & kTopkOptionDelta) != 0;
    return f;
}

// idx (ascending) = the k largest |g| of n.
template <typename W>
cc_coll_status_t topk_select(HostExec &x, const W *g, std::size_t n, std::size_t k, std::uint32_t *idx)
{
    topk::select<W>(g, n, k, idx, &x.workspace().select, nullptr, x.threads());
    return CC_COLL_OK;
}
// g = src (or g += src when accumulate), and the top k of g into idx, in
// one pass on the host; with poll set, the pass calls it now and then.
template <typename W>
cc_coll_status_t topk_load_select(HostExec &x, const void *src, cc_coll_dtype_t dtype, std::size_t n, W *g,
                                  bool accumulate, std::size_t k, std::uint32_t *idx,
                                  const std::function<void()> *poll = nullptr)
{
    topk::load_select<W>(src, dtype, accumulate, g, n, k, idx, &x.workspace().select, x.threads(), nullptr, poll);
    return CC_COLL_OK;
}
// The payload of the k pairs at idx (wire/topk_payload.hpp, flags from the
// non-finite rule) and the transmitted values as W in sent.
template <typename W>
cc_coll_status_t topk_encode(HostExec &x, const W *g, std::size_t n, const std::uint32_t *idx, std::size_t k,
                             cc_coll_dtype_t dtype, unsigned char *payload, W *sent)
{
    const std::uint32_t flags = topk::nonfinite_overflow<W>(g, n, idx, k);
    std::memset(payload, 0, topk::payload_bytes(k, dtype));
    topk::encode<W>(g, n, idx, k, flags, dtype, payload, sent, x.threads());
    return CC_COLL_OK;
}
// The coded payload (topk::encode_coded) into payload (zeroed here up to
// topk::coded_capacity); *bytes its size.
template <typename W>
cc_coll_status_t topk_encode_coded(HostExec &, const W *g, std::size_t n, const std::uint32_t *idx, std::size_t k,
                                   cc_coll_dtype_t dtype, const topk::Format &fmt, unsigned char *payload, W *sent,
                                   std::size_t *bytes)
{
    const std::uint32_t flags = topk::nonfinite_overflow<W>(g, n, idx, k);
    std::memset(payload, 0, topk::coded_capacity(k, dtype, fmt));
    *bytes = topk::encode_coded<W>(g, n, idx, k, flags, dtype, fmt, payload, sent);
    return CC_COLL_OK;
}
// out (dtype elements) += the payload's pairs.
inline cc_coll_status_t topk_scatter_add(HostExec &x, const unsigned char *payload, std::size_t k,
                                         cc_coll_dtype_t dtype, void *out)
{
    (void)k;
    // A coded payload decodes from its start: one pass.
    if (topk::is_coded(topk::header_of(payload).flags)) {
        topk::scatter_add(payload, dtype, out);
        return CC_COLL_OK;
    }
    constexpr std::size_t kScatterGrain = std::size_t{1} << 20;  // output elements per range
    const std::uint64_t n = topk::header_of(payload).n;
    parallel_for(static_cast<std::size_t>(n), x.threads(), kScatterGrain,
                 [&](std::size_t b, std::size_t e) { topk::scatter_add_range(payload, dtype, out, b, e); });
    return CC_COLL_OK;
}

#ifdef CC_COLL_HAVE_CUDA
template <typename W>
cc_coll_status_t topk_select(CudaExec &x, const W *g, std::size_t n, std::size_t k, std::uint32_t *idx);
template <typename W>
cc_coll_status_t topk_load_select(CudaExec &x, const void *src, cc_coll_dtype_t dtype, std::size_t n, W *g,
                                  bool accumulate, std::size_t k, std::uint32_t *idx)
{
    const cc_coll_status_t st = x.template load_input<W>(src, dtype, n, g, accumulate);
    return st != CC_COLL_OK ? st : topk_select<W>(x, g, n, k, idx);
}
template <typename W>
cc_coll_status_t topk_encode(CudaExec &x, const W *g, std::size_t n, const std::uint32_t *idx, std::size_t k,
                             cc_coll_dtype_t dtype, unsigned char *payload, W *sent);
cc_coll_status_t topk_scatter_add(CudaExec &x, const unsigned char *payload, std::size_t k, cc_coll_dtype_t dtype,
                                  void *out);
#endif

}  // namespace cc_coll::detail
