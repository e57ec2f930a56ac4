// The host kernels' threads (CC_COLL_THREADS; docs/api.md "Host kernel threads").
//
// One pool per process, grown on demand to the largest count a communicator
// asks for. parallel_for cuts [0, n) into `parts` contiguous ranges, a pure
// function of (n, threads, grain), and runs them at once: range 0 on the
// caller, the others on pool workers. A kernel written as a loop over its
// own range therefore gives bit-identical results whatever the thread count
// when each element's result depends on that element's inputs only; the
// kernels that combine across ranges (the top-k candidate pass) concatenate
// the ranges' results in range order.
//
// A region is one at a time per process: when another thread already runs
// one (a second communicator's call from another thread, say), or when a
// range itself calls parallel_for, the new region runs every range on the
// calling thread, in order, with the same results.
#pragma once

#include <cstddef>
#include <functional>

namespace cc_coll::detail {

// The most threads a communicator may ask for (CC_COLL_THREADS).
constexpr int kMaxThreads = 256;

// The default of CC_COLL_THREADS=auto: the CPUs of this process's affinity
// mask divided among the `node_ranks` ranks of its node, at least 1.
int default_threads(int node_ranks);

// The number of ranges parallel_for cuts [0, n) into: min(threads,
// ceil(n / grain)), at least 1.
std::size_t parallel_parts(std::size_t n, int threads, std::size_t grain);

// The bounds of range `part` of `parts` over [0, n): [begin, end).
inline void part_bounds(std::size_t n, std::size_t parts, std::size_t part, std::size_t *begin, std::size_t *end)
{
    const std::size_t base = n / parts, extra = n % parts;
    *begin = part * base + (part < extra ? part : extra);
    *end = *begin + base + (part < extra ? 1 : 0);
}

// Runs body(part) for every part in [0, parts), range 0 on the calling
// thread. Returns when all have run. body must not throw.
void run_parts(std::size_t parts, const std::function<void(std::size_t part)> &body);

// f(begin, end) over the parallel_parts(n, threads, grain) ranges of [0, n).
template <typename F>
void parallel_for(std::size_t n, int threads, std::size_t grain, F &&f)
{
    if (n == 0) return;
    const std::size_t parts = parallel_parts(n, threads, grain);
    if (parts == 1) {
        f(std::size_t{0}, n);
        return;
    }
    run_parts(parts, [&](std::size_t part) {
        std::size_t b = 0, e = 0;
        part_bounds(n, parts, part, &b, &e);
        f(b, e);
    });
}

// Elements per range below which a memory-bound element-wise pass is not
// split (the cost of waking a worker is a few microseconds).
constexpr std::size_t kElementwiseGrain = std::size_t{1} << 16;

}  // namespace cc_coll::detail
