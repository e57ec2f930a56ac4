// Shared by the Google Benchmark programs in bench/ (cc_coll_bench_topk,
// cc_coll_bench_sketch): the sizes, the density argument, deterministic
// normal data and the memcpy yardstick, so every program measures the
// memory-copy bandwidth the same way in its own run.
//
// Header-only; everything is inline or a template, so each program that
// includes it gets its own copy of the data caches. A program registers the
// yardstick under its usual name with
//
//   using cc_coll_bench::BM_memcpy;
//   BENCHMARK(BM_memcpy)->ArgName("n")->Arg(16 * cc_coll_bench::kMi)->Unit(benchmark::kMillisecond);
//
// (BENCHMARK names the benchmark after its argument's spelling, so the
// unqualified name keeps the run name BM_memcpy/n:<n>.)
#ifndef CC_COLL_BENCH_COMMON_HPP
#define CC_COLL_BENCH_COMMON_HPP

#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <utility>
#include <vector>

namespace cc_coll_bench {

constexpr std::int64_t kMi = 1 << 20;

// The density, passed as the benchmark's second argument in per mille
// (1, 10, 100 = 0.001, 0.01, 0.1).
inline double density_of(const benchmark::State &state) { return static_cast<double>(state.range(1)) / 1000.0; }

// Input throughput: n x bytes_per_element bytes per iteration.
inline void set_input_bytes(benchmark::State &state, std::size_t n, std::size_t bytes_per_element)
{
    state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                            static_cast<std::int64_t>(n * bytes_per_element));
}

// n normally distributed values (mean 0, given sigma) from a fixed seed;
// built once per (type, n, seed) and shared by every benchmark of a program.
template <typename W>
const std::vector<W> &normal_data(std::size_t n, std::uint64_t seed = 42, double sigma = 1.0)
{
    static std::map<std::pair<std::size_t, std::uint64_t>, std::vector<W>> cache;
    auto &v = cache[{n, seed}];
    if (v.size() != n) {
        std::mt19937_64 rng(seed);
        std::normal_distribution<double> dist(0.0, sigma);
        v.resize(n);
        for (auto &x : v) x = static_cast<W>(dist(rng));
    }
    return v;
}

// memcpy of n floats (the first argument) to another buffer: the
// memory-bandwidth yardstick. bytes_per_second counts 4n bytes per
// iteration (4n read, 4n written), like the fp32 input rates beside it.
inline void BM_memcpy(benchmark::State &state)
{
    const std::size_t n = static_cast<std::size_t>(state.range(0));
    const std::vector<float> &src = normal_data<float>(n);
    std::vector<float> dst(n, 0.0f);
    for (auto _ : state) {
        std::memcpy(dst.data(), src.data(), n * sizeof(float));
        benchmark::DoNotOptimize(dst.data());
        benchmark::ClobberMemory();
    }
    set_input_bytes(state, n, sizeof(float));
}

}  // namespace cc_coll_bench

#endif  // CC_COLL_BENCH_COMMON_HPP
