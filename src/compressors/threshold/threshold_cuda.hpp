// The threshold ladder (threshold_ladder.hpp) on the device: the same pick
// and the same collected indices as the host. Knows nothing of MPI. All
// pointers are device memory unless a comment says otherwise.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

#include "gpu/cuda_util.hpp"
#include "gpu/result.hpp"

namespace cc_coll::detail::threshold::cuda {

struct Scratch {
    gpu::DeviceArray<unsigned char> temp;      // ladder histogram, CUB temporary storage
    gpu::PinnedArray<unsigned long long> host;  // results read back by the host
};

// threshold::pick on x[0..n): one pass builds the histogram over the ladder's
// rungs on the device; the host reads it back (synchronising `stream`) and
// applies the host rule. *tau is host memory.
template <typename W>
gpu::Result pick(const W *x, std::size_t n, double zero_fraction, double *tau, Scratch *scratch,
                 cudaStream_t stream);

// threshold::collect: writes, ascending, the indices i with |x[i]| >= tau or
// x[i] NaN to idx (room for n) and their number to *count (host memory;
// synchronises `stream`). n < 2^32.
template <typename W>
gpu::Result collect(const W *x, std::size_t n, double tau, std::uint32_t *idx, std::size_t *count, Scratch *scratch,
                    cudaStream_t stream);

}  // namespace cc_coll::detail::threshold::cuda
