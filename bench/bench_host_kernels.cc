// The host kernels on all the threads they are given (CC_COLL_THREADS),
// against memcpy of the same bytes on the same threads: what
// docs/perf/kernels.md "Host kernels on every core" reports.
//
// Every benchmark takes (n, threads) and cuts its pass into the ranges of
// core/parallel.hpp, as HostExec does; memcpy_par is the yardstick (each
// thread copies its range). Rates count the bytes of the fp32 input
// gradient, 4n per iteration, and wall-clock time (UseRealTime), since the
// work runs on several threads. The passes:
//
//   memcpy_par        dst = src                         (4n read, 4n written)
//   ef_add            g += x, the error-feedback input  (8n read, 4n written)
//   topk_select       the top-k selection, density 0.01 (4n read)
//   topk_compress     ef_add fused with the select (load_select), encode,
//                     the residual update: TOPK's whole compress step
//   scatter_add       zero the output, add 2 payloads of k pairs (4n written)
//   residual_store    LOWRANK's e -= mhat, out = mhat   (8n read, 8n written)
//   round_store       the dense path's out = g, e = g - out
//   lowrank_unfused   LOWRANK's decompression of a 4096 x 4096 rank-4 M^ as
//                     two steps: M^ = P Q^T (one gemm), then e -= M^, out = M^
//   lowrank_fused     the same in blocks of rows on the threads
//                     (host::reconstruct_store, what the host backend runs)
//   quant4_encode     QUANT's encode at 4 bits, chunks of 256 (max-min,
//                     nearest): header, codes and the coding error
//                     (4n read, 0.53n + 4n written)
//   quant4_decode     its decode into fp32 (0.53n read, 4n written)
//   onebit_encode     ONEBIT's encode, chunks of 1024, with the error
//   onebit_decode     its decode into fp32
#include <benchmark/benchmark.h>

#include <cstdint>
#include <algorithm>
#include <cstring>
#include <vector>

#include "bench_common.hpp"
#include "compressors/lowrank/powersgd.hpp"
#include "compressors/quant/quant_codec.hpp"
#include "compressors/topk/topk_select.hpp"
#include "core/dtype.hpp"
#include "core/parallel.hpp"
#include "compressors/lowrank/lowrank_backend.hpp"
#include "exec/host_kernels.hpp"
#include "wire/topk_payload.hpp"

namespace {

using cc_coll::detail::kElementwiseGrain;
using cc_coll::detail::parallel_for;
using cc_coll_bench::kMi;
using cc_coll_bench::normal_data;
using cc_coll_bench::set_input_bytes;

constexpr double kDensity = 0.01;

int threads_of(const benchmark::State &state) { return static_cast<int>(state.range(1)); }

void BM_memcpy_par(benchmark::State &state)
{
    const std::size_t n = static_cast<std::size_t>(state.range(0));
    const std::vector<float> &src = normal_data<float>(n);
    std::vector<float> dst(n, 0.0f);
    for (auto _ : state) {
        parallel_for(n, threads_of(state), kElementwiseGrain,
                     [&](std::size_t b, std::size_t e) { std::memcpy(dst.data() + b, src.data() + b, (e - b) * 4); });
        benchmark::ClobberMemory();
    }
    set_input_bytes(state, n, sizeof(float));
}

void BM_ef_add(benchmark::State &state)
{
    const std::size_t n = static_cast<std::size_t>(state.range(0));
    const std::vector<float> &x = normal_data<float>(n);
    std::vector<float> g(normal_data<float>(n, 7));
    for (auto _ : state) {
        parallel_for(n, threads_of(state), kElementwiseGrain, [&](std::size_t b, std::size_t e) {
            cc_coll::detail::load_as<float>(x.data() + b, CC_COLL_F32, e - b, g.data() + b, true);
        });
        benchmark::ClobberMemory();
    }
    set_input_bytes(state, n, sizeof(float));
}

void BM_topk_select(benchmark::State &state)
{
    namespace topk = cc_coll::detail::topk;
    const std::size_t n = static_cast<std::size_t>(state.range(0));
    const std::vector<float> &x = normal_data<float>(n);
    const std::size_t k = topk::k_for(kDensity, n);
    std::vector<std::uint32_t> idx(k);
    topk::SelectScratch scratch;
    for (auto _ : state) {
        topk::select<float>(x.data(), n, k, idx.data(), &scratch, nullptr, threads_of(state));
        benchmark::DoNotOptimize(idx.data());
    }
    set_input_bytes(state, n, sizeof(float));
}

void BM_topk_compress(benchmark::State &state)
{
    namespace topk = cc_coll::detail::topk;
    const std::size_t n = static_cast<std::size_t>(state.range(0));
    const int t = threads_of(state);
    const std::vector<float> &x = normal_data<float>(n);
    std::vector<float> g(n, 0.0f);
    const std::size_t k = topk::k_for(kDensity, n);
    std::vector<std::uint32_t> idx(k);
    std::vector<float> sent(k);
    std::vector<unsigned char> payload(topk::payload_bytes(k, CC_COLL_F32));
    topk::SelectScratch scratch;
    for (auto _ : state) {
        topk::load_select<float>(x.data(), CC_COLL_F32, true, g.data(), n, k, idx.data(), &scratch, t);
        topk::encode<float>(g.data(), n, idx.data(), k, 0, CC_COLL_F32, payload.data(), sent.data(), t);
        parallel_for(k, t, std::size_t{1} << 14, [&](std::size_t b, std::size_t e) {
            cc_coll::detail::host::keep_unsent<float>(g.data(), 0, idx.data() + b, sent.data() + b, e - b);
        });
        benchmark::DoNotOptimize(payload.data());
    }
    set_input_bytes(state, n, sizeof(float));
}

void BM_scatter_add(benchmark::State &state)
{
    namespace topk = cc_coll::detail::topk;
    const std::size_t n = static_cast<std::size_t>(state.range(0));
    const int t = threads_of(state);
    const std::size_t k = topk::k_for(kDensity, n);
    std::vector<std::vector<unsigned char>> payloads;
    for (std::uint64_t seed : {11u, 12u}) {
        const std::vector<float> &x = normal_data<float>(n, seed);
        std::vector<std::uint32_t> idx(k);
        std::vector<float> sent(k);
        topk::SelectScratch scratch;
        topk::select<float>(x.data(), n, k, idx.data(), &scratch);
        payloads.emplace_back(topk::payload_bytes(k, CC_COLL_F32));
        topk::encode<float>(x.data(), n, idx.data(), k, 0, CC_COLL_F32, payloads.back().data(), sent.data());
    }
    std::vector<float> out(n);
    for (auto _ : state) {
        parallel_for(n, t, kElementwiseGrain,
                     [&](std::size_t b, std::size_t e) { std::memset(out.data() + b, 0, (e - b) * 4); });
        for (const auto &p : payloads)
            parallel_for(n, t, std::size_t{1} << 20, [&](std::size_t b, std::size_t e) {
                topk::scatter_add_range(p.data(), CC_COLL_F32, out.data(), b, e);
            });
        benchmark::ClobberMemory();
    }
    set_input_bytes(state, n, sizeof(float));
}

void BM_residual_store(benchmark::State &state)
{
    const std::size_t n = static_cast<std::size_t>(state.range(0));
    std::vector<float> e(normal_data<float>(n, 3)), mhat(normal_data<float>(n, 4)), out(n);
    for (auto _ : state) {
        parallel_for(n, threads_of(state), kElementwiseGrain, [&](std::size_t b, std::size_t end) {
            cc_coll::detail::host::residual_and_store<float>(e.data() + b, mhat.data() + b, end - b, 1.0f,
                                                             CC_COLL_F32, out.data() + b);
        });
        benchmark::ClobberMemory();
    }
    set_input_bytes(state, n, sizeof(float));
}

void BM_round_store(benchmark::State &state)
{
    const std::size_t n = static_cast<std::size_t>(state.range(0));
    std::vector<float> g(normal_data<float>(n, 5)), out(n);
    for (auto _ : state) {
        parallel_for(n, threads_of(state), kElementwiseGrain, [&](std::size_t b, std::size_t e) {
            cc_coll::detail::host::round_to_dtype<float>(g.data() + b, true, e - b, CC_COLL_F32, out.data() + b);
        });
        benchmark::ClobberMemory();
    }
    set_input_bytes(state, n, sizeof(float));
}

cc_coll::detail::lowrank::Shape square_rank4()
{
    cc_coll::detail::lowrank::Shape s;
    s.rows = 4096;
    s.cols = 4096;
    s.rank = 4;
    return s;
}

void BM_lowrank_unfused(benchmark::State &state)
{
    namespace lr = cc_coll::detail::lowrank;
    const lr::Shape s = square_rank4();
    const std::size_t n = s.rows * s.cols;
    const int t = threads_of(state);
    std::vector<float> p(normal_data<float>(s.rows * 4, 8)), q(normal_data<float>(s.cols * 4, 9));
    std::vector<float> e(normal_data<float>(n, 3)), mhat(n), out(n);
    for (auto _ : state) {
        lr::reconstruct<float>(p.data(), q.data(), s, 1.0f, mhat.data());
        parallel_for(n, t, kElementwiseGrain, [&](std::size_t b, std::size_t end) {
            cc_coll::detail::host::residual_and_store<float>(e.data() + b, mhat.data() + b, end - b, 2.0f,
                                                             CC_COLL_F32, out.data() + b);
        });
        benchmark::ClobberMemory();
    }
    set_input_bytes(state, n, sizeof(float));
}

void BM_lowrank_fused(benchmark::State &state)
{
    namespace lr = cc_coll::detail::lowrank;
    const lr::Shape s = square_rank4();
    const std::size_t n = s.rows * s.cols;
    const int t = threads_of(state);
    std::vector<float> p(normal_data<float>(s.rows * 4, 8)), q(normal_data<float>(s.cols * 4, 9));
    std::vector<float> e(normal_data<float>(n, 3)), out(n);
    for (auto _ : state) {
        cc_coll::detail::host::reconstruct_store<float>(p.data(), q.data(), s, e.data(), n, 2.0f, CC_COLL_F32,
                                                        out.data(), t, std::size_t{1} << 18);
        benchmark::ClobberMemory();
    }
    set_input_bytes(state, n, sizeof(float));
}

// QUANT's and ONEBIT's host loops over the threads' ranges of whole chunks,
// as the codec runs them (compressors/quant/quant.cc).
namespace quant = cc_coll::detail::quant;

void quant_encode(benchmark::State &state, const quant::Options &o)
{
    const std::size_t n = static_cast<std::size_t>(state.range(0));
    const std::vector<float> &v = normal_data<float>(n);
    std::vector<float> err(n, 0.0f);
    std::vector<unsigned char> out(quant::coded_size(n, o.chunk, o.bits));
    const std::size_t S = quant::stride(o.chunk, o.bits), chunks = (n + o.chunk - 1) / o.chunk;
    const std::size_t grain = std::max<std::size_t>(1, kElementwiseGrain / o.chunk);
    for (auto _ : state) {
        parallel_for(chunks, threads_of(state), grain, [&](std::size_t b, std::size_t e) {
            const std::size_t lo = b * o.chunk, len = std::min(n, e * o.chunk) - lo;
            quant::encode_host<float>(o, 0, 1, v.data() + lo, len, out.data() + b * S, err.data() + lo, false);
        });
        benchmark::ClobberMemory();
    }
    set_input_bytes(state, n, sizeof(float));
}

void quant_decode(benchmark::State &state, const quant::Options &o)
{
    const std::size_t n = static_cast<std::size_t>(state.range(0));
    const std::vector<float> &v = normal_data<float>(n);
    std::vector<float> dst(n, 0.0f);
    std::vector<unsigned char> in(quant::coded_size(n, o.chunk, o.bits));
    quant::encode_host<float>(o, 0, 1, v.data(), n, in.data(), static_cast<float *>(nullptr), false);
    const std::size_t S = quant::stride(o.chunk, o.bits), chunks = (n + o.chunk - 1) / o.chunk;
    const std::size_t grain = std::max<std::size_t>(1, kElementwiseGrain / o.chunk);
    for (auto _ : state) {
        parallel_for(chunks, threads_of(state), grain, [&](std::size_t b, std::size_t e) {
            const std::size_t lo = b * o.chunk, len = std::min(n, e * o.chunk) - lo;
            quant::decode_host(o, in.data() + b * S, len, dst.data() + lo);
        });
        benchmark::ClobberMemory();
    }
    set_input_bytes(state, n, sizeof(float));
}

void BM_quant4_encode(benchmark::State &state) { quant_encode(state, quant::quant_options(0)); }
void BM_quant4_decode(benchmark::State &state) { quant_decode(state, quant::quant_options(0)); }
void BM_onebit_encode(benchmark::State &state) { quant_encode(state, quant::onebit_options(0)); }
void BM_onebit_decode(benchmark::State &state) { quant_decode(state, quant::onebit_options(0)); }

// n = 16Mi (64 MiB of fp32), threads 1 .. the machine's CPUs.
void args(benchmark::internal::Benchmark *b)
{
    b->ArgNames({"n", "threads"});
    const int cpus = cc_coll::detail::default_threads(1);
    for (int t = 1; t <= cpus; t *= 2) b->Args({16 * kMi, t});
    if ((cpus & (cpus - 1)) != 0) b->Args({16 * kMi, cpus});
    b->UseRealTime()->Unit(benchmark::kMillisecond);
}

}  // namespace

BENCHMARK(BM_memcpy_par)->Apply(args);
BENCHMARK(BM_ef_add)->Apply(args);
BENCHMARK(BM_topk_select)->Apply(args);
BENCHMARK(BM_topk_compress)->Apply(args);
BENCHMARK(BM_scatter_add)->Apply(args);
BENCHMARK(BM_residual_store)->Apply(args);
BENCHMARK(BM_round_store)->Apply(args);
BENCHMARK(BM_lowrank_unfused)->Apply(args);
BENCHMARK(BM_lowrank_fused)->Apply(args);
BENCHMARK(BM_quant4_encode)->Apply(args);
BENCHMARK(BM_quant4_decode)->Apply(args);
BENCHMARK(BM_onebit_encode)->Apply(args);
BENCHMARK(BM_onebit_decode)->Apply(args);

BENCHMARK_MAIN();
