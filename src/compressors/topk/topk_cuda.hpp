// Top-k on the device: exact selection by magnitude with topk::select's
// order, the wire payload of topk_payload.hpp written by a kernel, and the
// scatter-add decode. Knows nothing of MPI. All pointers are device memory
// unless a comment says otherwise; every function enqueues its work on
// `stream` and returns without synchronising it unless it says so.
//
// Selection is a radix select over order-preserving keys of |x| (NaN above
// +-inf above every finite value, ties broken by the lower index), not a
// sort: a few histogram passes find the key of the k-th element (and, when
// elements tie at it, the last index kept), then one stable compaction
// writes the k indices in ascending order. The result is the same set, in
// the same order, as topk::select on the host. The per-element rules are in
// topk_keys.hpp, shared with the host tests.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

#include "cc_coll.h"
#include "gpu/cuda_util.hpp"
#include "gpu/result.hpp"

namespace cc_coll::detail::topk::cuda {

// Device memory a selection reuses across calls (grows, never shrinks).
struct SelectScratch {
    gpu::DeviceArray<unsigned char> temp;     // histograms, prefix state, CUB temporary storage
    gpu::DeviceArray<std::uint32_t> counter;  // small device counters
};

// Writes the indices of the k largest-magnitude elements of x[0..n) in
// ascending order to idx[0..k) (device). n < 2^32, k <= n.
template <typename W>
gpu::Result select(const W *x, std::size_t n, std::size_t k, std::uint32_t *idx, SelectScratch *scratch,
                   cudaStream_t stream);

// Writes the payload of topk::encode (header {n, k, flags}, indices, values
// rounded to the dtype, zero padding up to topk::payload_bytes(k, dtype)) to
// `payload` (device), byte for byte what the host writes for the same input,
// flags included (topk::kFlagNonFiniteOverflow from the same rule as
// topk::nonfinite_overflow). sent[j] (device) is the transmitted value of
// pair j as W, for the error-feedback update.
template <typename W>
gpu::Result encode(const W *x, std::size_t n, const std::uint32_t *idx, std::size_t k, cc_coll_dtype_t dtype,
                   unsigned char *payload, W *sent, SelectScratch *scratch, cudaStream_t stream);

// out[idx[j]] += value[j] for the k pairs of one payload (device), in the
// dtype's arithmetic (binary32 then round to nearest even for F16/BF16), as
// topk::scatter_add. Indices within a payload are distinct, so no atomics;
// call once per rank, in rank order, for results identical to the host's.
gpu::Result scatter_add(const unsigned char *payload, std::size_t k, cc_coll_dtype_t dtype, void *out,
                        cudaStream_t stream);

}  // namespace cc_coll::detail::topk::cuda
