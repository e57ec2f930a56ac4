// Micro-benchmarks of the count sketch (docs/algorithms.md section 3) and the
// threshold ladder, single-threaded ("per core"). No MPI.
//
//   BM_sketch_encode<W>       zero the sketch, then sketch::encode of the
//                             support (random positions at the given density)
//   BM_sketch_decode<W>       sketch::decode (peeling + estimates) of that
//                             sketch; a fresh copy of the sketch is restored
//                             outside the timing before every iteration
//   BM_sketch_rows_per_table  sizing from the support bitmap
//   BM_threshold_pick<W>      threshold::pick (bisection over 64 rungs)
//   BM_threshold_collect<W>   threshold::collect at the picked threshold
//   BM_memcpy                 memcpy of n floats at the same n: the
//                             memory-bandwidth yardstick of this run
//                             (bench_common.hpp, as in cc_coll_bench_topk)
//
// bytes_per_second is input throughput: n x sizeof(W) bytes per iteration
// (the dense buffer the sketch stands for), so the GB/s columns compare with
// the top-k benchmarks. The sketch is sized with rows_per_table at load
// 0.77. Counters: k (support), m, sketch_bytes = cells x sizeof(W) + n / 8
// (the sketch plus the support bitmap, what an allreduce moves),
// dense_bytes = n x sizeof(W), ratio = sketch_bytes / dense_bytes; decode
// also reports peeled and estimated (per iteration).
// Densities are passed as per-mille integers (1, 10, 100 = 0.001, 0.01, 0.1).
//
//   ./build/bench/cc_coll_bench_sketch --benchmark_repetitions=3
//       --benchmark_report_aggregates_only=true --benchmark_min_time=0.5
//   (one command line)
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <tuple>
#include <vector>

#include "bench_common.hpp"
#include "compressors/sketch/count_sketch.hpp"
#include "compressors/threshold/threshold_ladder.hpp"

namespace {

namespace sketch = cc_coll::detail::sketch;
namespace threshold = cc_coll::detail::threshold;

using cc_coll_bench::BM_memcpy;
using cc_coll_bench::density_of;
using cc_coll_bench::kMi;
using cc_coll_bench::set_input_bytes;

constexpr double kLoad = 0.77;

// A dense buffer with normal values on a random support (each position kept
// with probability density), its ascending indices and its bitmap; built
// once per (type, n, density) and shared.
template <typename W>
struct Input {
    std::vector<W> x;
    std::vector<std::uint32_t> idx;
    std::vector<std::uint8_t> bitmap;
};

template <typename W>
const Input<W> &input(std::size_t n, double density)
{
    static std::map<std::pair<std::size_t, double>, Input<W>> cache;
    Input<W> &in = cache[{n, density}];
    if (in.x.size() != n) {
        std::mt19937_64 rng(42);
        std::uniform_real_distribution<double> u(0.0, 1.0);
        std::normal_distribution<double> normal(0.0, 1.0);
        in.x.assign(n, W(0));
        in.idx.clear();
        for (std::size_t i = 0; i < n; ++i)
            if (u(rng) < density) {
                in.idx.push_back(static_cast<std::uint32_t>(i));
                in.x[i] = static_cast<W>(normal(rng));
            }
        in.bitmap.assign(sketch::bitmap_bytes(n), 0);
        sketch::bitmap_set(in.bitmap.data(), in.idx.data(), in.idx.size());
    }
    return in;
}

template <typename W>
sketch::Layout layout_of(const Input<W> &in)
{
    sketch::Layout l;
    l.n = in.x.size();
    l.seed = 0x5eed;
    l.m = sketch::rows_per_table(in.bitmap.data(), l.n, kLoad);
    return l;
}

template <typename W>
void size_counters(benchmark::State &state, const Input<W> &in, const sketch::Layout &l)
{
    const double n = static_cast<double>(l.n);
    const double sketch_bytes = static_cast<double>(l.cells() * sizeof(W) + sketch::bitmap_bytes(l.n));
    const double dense_bytes = n * sizeof(W);
    state.counters["k"] = static_cast<double>(in.idx.size());
    state.counters["m"] = static_cast<double>(l.m);
    state.counters["sketch_bytes"] = sketch_bytes;
    state.counters["dense_bytes"] = dense_bytes;
    state.counters["ratio"] = sketch_bytes / dense_bytes;
}

template <typename W>
void BM_sketch_encode(benchmark::State &state)
{
    const std::size_t n = static_cast<std::size_t>(state.range(0));
    const Input<W> &in = input<W>(n, density_of(state));
    const sketch::Layout l = layout_of(in);
    std::vector<W> sk(l.cells(), W(0));
    for (auto _ : state) {
        std::memset(sk.data(), 0, sk.size() * sizeof(W));
        sketch::encode<W>(l, in.x.data(), in.idx.data(), in.idx.size(), sk.data());
        benchmark::DoNotOptimize(sk.data());
        benchmark::ClobberMemory();
    }
    set_input_bytes(state, n, sizeof(W));
    size_counters(state, in, l);
}

template <typename W>
void BM_sketch_decode(benchmark::State &state)
{
    const std::size_t n = static_cast<std::size_t>(state.range(0));
    const Input<W> &in = input<W>(n, density_of(state));
    const sketch::Layout l = layout_of(in);
    std::vector<W> encoded(l.cells(), W(0));
    sketch::encode<W>(l, in.x.data(), in.idx.data(), in.idx.size(), encoded.data());
    std::vector<W> sk(encoded.size());
    std::vector<W> out(n);
    sketch::DecodeScratch scratch;
    sketch::DecodeInfo info;
    double peeled = 0, estimated = 0;
    for (auto _ : state) {
        state.PauseTiming();
        std::memcpy(sk.data(), encoded.data(), sk.size() * sizeof(W));
        state.ResumeTiming();
        info = sketch::decode<W>(l, in.bitmap.data(), sk.data(), out.data(), &scratch);
        benchmark::DoNotOptimize(out.data());
        benchmark::ClobberMemory();
        peeled += static_cast<double>(info.peeled);
        estimated += static_cast<double>(info.estimated);
    }
    const double it = static_cast<double>(state.iterations());
    set_input_bytes(state, n, sizeof(W));
    size_counters(state, in, l);
    state.counters["peeled"] = peeled / it;
    state.counters["estimated"] = estimated / it;
}

void BM_sketch_rows_per_table(benchmark::State &state)
{
    const std::size_t n = static_cast<std::size_t>(state.range(0));
    const Input<float> &in = input<float>(n, density_of(state));
    std::uint32_t m = 0;
    for (auto _ : state) {
        m = sketch::rows_per_table(in.bitmap.data(), n, kLoad);
        benchmark::DoNotOptimize(m);
    }
    set_input_bytes(state, n, sizeof(float));
    state.counters["m"] = static_cast<double>(m);
}

// Normal values of widely spread magnitudes (1e-6 .. 1e0 scale), as
// gradients are.
template <typename W>
const std::vector<W> &gradient_like(std::size_t n)
{
    static std::map<std::size_t, std::vector<W>> cache;
    std::vector<W> &v = cache[n];
    if (v.size() != n) {
        std::mt19937_64 rng(7);
        std::normal_distribution<double> normal(0.0, 1.0);
        std::uniform_real_distribution<double> expo(-6.0, 0.0);
        v.resize(n);
        for (W &x : v) x = static_cast<W>(normal(rng) * std::pow(10.0, expo(rng)));
    }
    return v;
}

template <typename W>
void BM_threshold_pick(benchmark::State &state)
{
    const std::size_t n = static_cast<std::size_t>(state.range(0));
    const std::vector<W> &x = gradient_like<W>(n);
    double tau = 0;
    for (auto _ : state) {
        tau = threshold::pick(x.data(), n, 0.8);
        benchmark::DoNotOptimize(tau);
    }
    set_input_bytes(state, n, sizeof(W));
    state.counters["tau"] = tau;
}

template <typename W>
void BM_threshold_collect(benchmark::State &state)
{
    const std::size_t n = static_cast<std::size_t>(state.range(0));
    const std::vector<W> &x = gradient_like<W>(n);
    const double tau = threshold::pick(x.data(), n, 0.8);
    std::vector<std::uint32_t> idx;
    idx.reserve(n);
    for (auto _ : state) {
        idx.clear();
        threshold::collect(x.data(), n, tau, &idx);
        benchmark::DoNotOptimize(idx.data());
        benchmark::ClobberMemory();
    }
    set_input_bytes(state, n, sizeof(W));
    state.counters["kept"] = static_cast<double>(idx.size());
}

void sizes(benchmark::internal::Benchmark *b)
{
    b->ArgNames({"n", "per_mille"});
    for (std::int64_t pm : {1, 10, 100}) b->Args({16 * kMi, pm});
}

}  // namespace

BENCHMARK(BM_memcpy)->ArgName("n")->Arg(16 * kMi)->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(BM_sketch_encode, float)->Apply(sizes)->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(BM_sketch_decode, float)->Apply(sizes)->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(BM_sketch_encode, double)
    ->ArgNames({"n", "per_mille"})
    ->Args({16 * kMi, 10})
    ->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(BM_sketch_decode, double)
    ->ArgNames({"n", "per_mille"})
    ->Args({16 * kMi, 10})
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_sketch_rows_per_table)->Apply(sizes)->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(BM_threshold_pick, float)->ArgName("n")->Arg(16 * kMi)->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(BM_threshold_collect, float)->ArgName("n")->Arg(16 * kMi)->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
