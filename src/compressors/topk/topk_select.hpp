// Exact top-k selection by magnitude. Knows nothing of MPI.
//
// Order: larger |x| first; equal |x| -> lower index first, so the selection
// is a deterministic function of the input. NaN ranks above +-inf, and
// +-inf above every finite value, so non-finite elements are always kept
// first (the allreduce relies on this to propagate them like MPI_SUM).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "cc_coll.h"

namespace cc_coll::detail {
namespace topk {

// k = ceil(density * n) clamped to [0, n]; density in (0, 1].
std::size_t k_for(double density, std::size_t n);

// How the last selection went (for tests and benchmarks).
struct SelectInfo {
    bool sampled = false;        // the sampled-threshold path ran
    bool fell_back = false;      // the estimate missed: full selection ran
    std::size_t candidates = 0;  // elements at or above the estimated threshold
};

// Reusable scratch memory, so repeated selections do not allocate.
// 128-bit unsigned, for packing a 63-bit double magnitude with an index.
__extension__ typedef unsigned __int128 uint128_t;

struct SelectScratch {
    std::vector<std::uint32_t> candidates;
    std::vector<std::uint64_t> sample;
    std::vector<std::uint64_t> packed64;  // float: magnitude << 32 | ~index
    std::vector<uint128_t> packed128;     // double: magnitude << 32 | ~index
    std::vector<std::uint32_t> histogram;  // of the candidates' top key bits
    std::vector<std::uint32_t> keys32;    // the candidates' magnitude keys (float)
    std::vector<std::uint64_t> keys64;    // (double)
    // The candidate pass's ranges, threads > 1.
    std::vector<std::vector<std::uint32_t>> part_candidates;
    std::vector<std::vector<std::uint32_t>> part_keys32;
    std::vector<std::vector<std::uint64_t>> part_keys64;
};

// Writes the indices of the k largest-magnitude elements of x[0..n) in
// ascending order to idx[0..k). n must be < 2^32. Fast path: estimate the
// threshold from a deterministic random sample, collect the elements at or
// above it in one pass, select exactly among them; falls back to a full
// selection when the candidates are too few or too many. With threads > 1
// the candidate pass runs on that many threads (core/parallel.hpp), each
// over a contiguous range, and the ranges' candidates are joined in order:
// the same indices as on one thread.
template <typename W>
void select(const W *x, std::size_t n, std::size_t k, std::uint32_t *idx, SelectScratch *scratch,
            SelectInfo *info = nullptr, int threads = 1);

// g = src (accumulate false) or g += src (the error-feedback input; src in
// the dtype, g in the work type W), and the top k of the result into idx as
// select would give them, in one pass: each block of g is loaded and then
// scanned for candidates while in the cache.
// With poll set, the pass calls (*poll)() every kPollBlocks blocks on the
// calling thread (a pipelined allreduce advances its messages there).
template <typename W>
void load_select(const void *src, cc_coll_dtype_t dtype, bool accumulate, W *g, std::size_t n, std::size_t k,
                 std::uint32_t *idx, SelectScratch *scratch, int threads = 1, SelectInfo *info = nullptr,
                 const std::function<void()> *poll = nullptr);
constexpr std::size_t kPollBlocks = 64;

// The same result by a full selection over all n elements (reference path).
template <typename W>
void select_full(const W *x, std::size_t n, std::size_t k, std::uint32_t *idx, SelectScratch *scratch);

}  // namespace topk
}  // namespace cc_coll::detail
