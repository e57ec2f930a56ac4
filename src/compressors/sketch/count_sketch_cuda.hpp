// The count sketch of count_sketch.hpp on the device: support bitmap,
// column loads for the sizing rule, encode, and the peeling decode with a
// device-side worklist and the median-of-3 fallback. The same hashing as the
// host (the hash functions are shared host/device code), so a sketch encoded
// here sums with one encoded on the host. Knows nothing of MPI. All pointers
// are device memory unless a comment says otherwise.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

#include "compressors/sketch/count_sketch.hpp"
#include "gpu/cuda_util.hpp"
#include "gpu/result.hpp"

namespace cc_coll::detail::sketch::cuda {

// Sets the bits of the k positions idx[0..k) in `bitmap` (bitmap_bytes(n)
// bytes rounded up to a multiple of 4, 4-byte aligned, zeroed by the
// caller): 32-bit atomicOr, so the bits are those of the host's bitmap_set.
gpu::Result bitmap_set(std::uint8_t *bitmap, const std::uint32_t *idx, std::size_t k, cudaStream_t stream);

// loads[t] (device, kBlock entries, zeroed here) = support elements at
// offset t of every block, the input of the sizing rule (rows_for_loads in
// count_sketch.hpp). Bits at or beyond n are ignored; `bitmap` needs no
// alignment.
gpu::Result column_loads(const std::uint8_t *bitmap, std::size_t n, std::uint32_t *loads, cudaStream_t stream);

// sketch::rows_per_table for a device bitmap: column_loads into `loads`
// (device, kBlock entries), copied to `host_loads` (host, kBlock entries,
// preferably pinned), then rows_for_loads. Synchronises `stream`.
gpu::Result rows_per_table(const std::uint8_t *bitmap, std::size_t n, double load_factor, std::uint32_t *loads,
                           std::uint32_t *host_loads, std::uint32_t *m, cudaStream_t stream);

// sketch[cell_j(i)] += sign_j(i) x[i] for the k positions idx[0..k), j = 0..2
// (`sketch`: layout.cells() elements, zeroed by the caller). Elements are
// hashed per block (a thread block hashes the blocks its run of positions
// covers once, into shared memory) and cells written with atomics, so the
// sum's rounding may differ from the host's in the last bits (and from run
// to run). Float atomics on global memory (atom.add.f32; its .noftz needs
// PTX 9.4 and sm_90) flush subnormal inputs and sums to zero of the same
// sign; double atomics do not. Ascending positions are fastest; any order
// is correct.
template <typename W>
gpu::Result encode(const Layout &layout, const W *x, const std::uint32_t *idx, std::size_t k, W *sketch,
                   cudaStream_t stream);

// Reusable decoder memory: per cell a count, a key, an owner and a worklist
// slot (16 bytes), a bit per element, a few counters.
struct DecodeScratch {
    gpu::DeviceArray<unsigned char> temp;
    gpu::PinnedArray<unsigned long long> host;  // counters read back by the host
};

// sketch::decode on the device: out[i] for i < n is the recovered value at
// support positions and 0 elsewhere; `sketch` is modified (peeled values
// subtracted). Peeling proceeds in rounds (every pure cell of a round is
// peeled at once, a device worklist feeding the next round; the host reads
// each round's worklist length, and once it is short one thread block runs
// the remaining rounds); what does not peel gets the median of its three
// signed cells. The peeled set is the host decoder's. The result is a
// function of `sketch` and `bitmap` alone (same GPU model and library
// build), whatever the thread scheduling: an element pure in several cells
// of a round is claimed by the cell of its lowest hash, and the values
// peeled in a round are subtracted from each cell one at a time, in
// ascending order of the cells that peeled them (count_sketch_hash.hpp), so
// every rank decoding the same summed sketch gets the same bits. Values may
// differ from the host decoder's in the last bits (it peels from one queue,
// in a different order after the first round). Fills *info (host memory),
// synchronising `stream` (also a few times per large round); n == 0
// returns at once.
template <typename W>
gpu::Result decode(const Layout &layout, const std::uint8_t *bitmap, W *sketch, W *out, DecodeScratch *scratch,
                   DecodeInfo *info, cudaStream_t stream);

}  // namespace cc_coll::detail::sketch::cuda
