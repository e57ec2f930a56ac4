// Micro-benchmarks of the top-k compressor's CPU work, single-threaded
// ("per core"). No MPI: nothing here calls MPI_Init.
//
//   BM_memcpy                 memcpy of n floats: the memory-bandwidth yardstick
//                             (bench_common.hpp, shared with cc_coll_bench_sketch)
//   BM_topk_select<W>         topk::select (sampled threshold, one candidate
//                             pass, exact select; full selection on a miss)
//   BM_topk_select_full<W>    topk::select_full (the fallback) for comparison
//   BM_topk_sparse_encode<W>  the allreduce's compress step without MPI:
//                             g' = g + e, select, encode, EF update
//
// bytes_per_second is input throughput: n x sizeof(W) bytes per iteration
// (n x 4 for float and for memcpy), so the GB/s columns compare directly.
// Rates use CPU time (Google Benchmark's default), which is the per-core
// cost even when other processes share the machine; the console prints
// them in binary units (G/s = GiB/s).
// Densities are passed as per-mille integers (1, 10, 100 = 0.001, 0.01, 0.1).
//
//   ./build/bench/cc_coll_bench_topk --benchmark_repetitions=3
//       --benchmark_report_aggregates_only=true --benchmark_min_time=0.5
//   (one command line)
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "bench_common.hpp"
#include "cc_coll.h"
#include "wire/topk_payload.hpp"
#include "compressors/topk/topk_select.hpp"
#include "core/dtype.hpp"

namespace {

namespace topk = cc_coll::detail::topk;

using cc_coll_bench::BM_memcpy;
using cc_coll_bench::density_of;
using cc_coll_bench::kMi;
using cc_coll_bench::normal_data;
using cc_coll_bench::set_input_bytes;

template <typename W>
struct DtypeOf;
template <>
struct DtypeOf<float> {
    static constexpr cc_coll_dtype_t value = CC_COLL_F32;
};
template <>
struct DtypeOf<double> {
    static constexpr cc_coll_dtype_t value = CC_COLL_F64;
};

template <typename W>
void BM_topk_select(benchmark::State &state)
{
    const std::size_t n = static_cast<std::size_t>(state.range(0));
    const std::size_t k = topk::k_for(density_of(state), n);
    const std::vector<W> &x = normal_data<W>(n);
    std::vector<std::uint32_t> idx(k, 0);
    topk::SelectScratch scratch;
    topk::SelectInfo info;
    double sampled = 0, fell_back = 0, candidates = 0;
    for (auto _ : state) {
        topk::select<W>(x.data(), n, k, idx.data(), &scratch, &info);
        benchmark::DoNotOptimize(idx.data());
        benchmark::ClobberMemory();
        sampled += info.sampled ? 1 : 0;
        fell_back += info.fell_back ? 1 : 0;
        candidates += static_cast<double>(info.candidates);
    }
    const double it = static_cast<double>(state.iterations());
    set_input_bytes(state, n, sizeof(W));
    state.counters["k"] = static_cast<double>(k);
    state.counters["sampled"] = sampled / it;      // 1: the sampled-threshold path ran
    state.counters["fell_back"] = fell_back / it;  // 1: the estimate missed, full selection ran
    state.counters["candidates"] = candidates / it;
}

template <typename W>
void BM_topk_select_full(benchmark::State &state)
{
    const std::size_t n = static_cast<std::size_t>(state.range(0));
    const std::size_t k = topk::k_for(density_of(state), n);
    const std::vector<W> &x = normal_data<W>(n);
    std::vector<std::uint32_t> idx(k, 0);
    topk::SelectScratch scratch;
    for (auto _ : state) {
        topk::select_full<W>(x.data(), n, k, idx.data(), &scratch);
        benchmark::DoNotOptimize(idx.data());
        benchmark::ClobberMemory();
    }
    set_input_bytes(state, n, sizeof(W));
    state.counters["k"] = static_cast<double>(k);
}

// Mirrors steps 1, 2 and 5 of collectives/allreduce/sparse_allgather.cc (EF on): the
// residual e becomes g' = g + e in place, the top k of g' are selected and
// encoded, and the residual keeps g' - sent at the kept indices. The
// residual is reset to the same e0 before every iteration (outside the
// timing) so every iteration does the same work.
template <typename W>
void BM_topk_sparse_encode(benchmark::State &state)
{
    const cc_coll_dtype_t dtype = DtypeOf<W>::value;
    const std::size_t n = static_cast<std::size_t>(state.range(0));
    const std::size_t k = topk::k_for(density_of(state), n);
    const std::vector<W> &g = normal_data<W>(n);                    // this step's gradient
    const std::vector<W> &e0 = normal_data<W>(n, 7, 0.1);           // the residual before it
    std::vector<W> e(e0);
    std::vector<std::uint32_t> indices;
    std::vector<unsigned char> send_bytes;
    topk::SelectScratch scratch;
    const std::size_t bytes = topk::payload_bytes(k, dtype);
    for (auto _ : state) {
        state.PauseTiming();
        std::memcpy(e.data(), e0.data(), n * sizeof(W));
        state.ResumeTiming();

        // 1. g' = g + e, in the residual.
        cc_coll::detail::load_as<W>(g.data(), dtype, n, e.data(), true);
        // 2. Select and encode.
        indices.resize(k);
        topk::select<W>(e.data(), n, k, indices.data(), &scratch);
        send_bytes.resize(bytes);
        std::vector<W> sent(k);
        std::memset(send_bytes.data(), 0, bytes);
        topk::encode<W>(e.data(), n, indices.data(), k, 0, dtype, send_bytes.data(), sent.data());
        // 5. Residual: what was not transmitted (all values here are finite).
        for (std::size_t j = 0; j < k; ++j) {
            const std::uint32_t i = indices[j];
            e[i] = e[i] - sent[j];
        }
        benchmark::DoNotOptimize(send_bytes.data());
        benchmark::DoNotOptimize(e.data());
        benchmark::ClobberMemory();
    }
    set_input_bytes(state, n, sizeof(W));
    state.counters["k"] = static_cast<double>(k);
    state.counters["payload_B"] = static_cast<double>(bytes);
}

void sizes(benchmark::internal::Benchmark *b)
{
    b->ArgNames({"n", "per_mille"});
    for (std::int64_t n : {1 * kMi, 16 * kMi})
        for (std::int64_t pm : {1, 10, 100}) b->Args({n, pm});
}

}  // namespace

BENCHMARK(BM_memcpy)->ArgName("n")->Arg(1 * kMi)->Arg(16 * kMi)->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(BM_topk_select, float)->Apply(sizes)->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(BM_topk_select, double)->Apply(sizes)->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(BM_topk_select_full, float)
    ->ArgNames({"n", "per_mille"})
    ->Args({16 * kMi, 10})
    ->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(BM_topk_select_full, double)
    ->ArgNames({"n", "per_mille"})
    ->Args({16 * kMi, 10})
    ->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(BM_topk_sparse_encode, float)->Apply(sizes)->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(BM_topk_sparse_encode, double)
    ->ArgNames({"n", "per_mille"})
    ->Args({16 * kMi, 10})
    ->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
