// Micro-benchmarks of PowerSGD's linear algebra (docs/algorithms.md section 4,
// src/compressors/lowrank/powersgd.cc) on fp32, single-threaded ("per
// core": run with OPENBLAS_NUM_THREADS=1, one MPI rank per core). No MPI.
//
//   BM_lowrank_compress<float>/rows/cols/rank    what one rank computes
//       between receiving the tensor and its second allreduce: restore the
//       warm-start Q (a memcpy of cols x r), orthogonalise Q, P = M Q,
//       orthogonalise P, Q = M^T P. (In the library the first allreduce
//       sums P between the two products; here nothing sits between them.)
//   BM_lowrank_decompress<float>/rows/cols/rank  M^ = P Q^T (rows x cols)
//   BM_memcpy/n                                 memcpy of the same M bytes
//       (n = rows x cols floats) in the same run: the memory-bandwidth
//       yardstick (bench_common.hpp, as in cc_coll_bench_topk and _sketch)
//
// Shapes 768 x 3072, 3072 x 768 (a transformer's MLP weights, both ways
// round) and 4096 x 4096; ranks 1, 4, 16, 32. Orthogonalisation is the
// library's choice for fp32: Gram-Schmidt for r <= 2, Householder QR
// (LAPACK geqrf + orgqr) above.
//
// bytes_per_second counts the M bytes, rows x cols x 4 per iteration, for
// compress, decompress and memcpy alike, so the three compare directly.
// Counters: rows, cols, rank; dense_bytes = rows x cols x 4; wire_bytes =
// (rows + cols) x r x 4 (P and Q, what the two allreduces move);
// wire_ratio = rows x cols / ((rows + cols) x r) = dense / wire;
// blas_threads (OpenBLAS's thread count as the run saw it; -1 when the BLAS
// is not OpenBLAS). The JSON's context gets cc_coll_blas (OpenBLAS's build
// configuration and core type) and cc_coll_openblas_num_threads (the
// environment variable, or "unset").
//
//   OPENBLAS_NUM_THREADS=1 ./build/bench/cc_coll_bench_lowrank
//       --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
//       --benchmark_min_time=0.2
//   (one command line; scripts/perf/perf_lowrank.sh runs exactly this)
#include <benchmark/benchmark.h>

#include <cblas.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench_common.hpp"
#include "compressors/lowrank/powersgd.hpp"

namespace {

namespace lowrank = cc_coll::detail::lowrank;

using cc_coll_bench::BM_memcpy;
using cc_coll_bench::normal_data;
using cc_coll_bench::set_input_bytes;

double blas_threads()
{
#ifdef OPENBLAS_VERSION
    return static_cast<double>(openblas_get_num_threads());
#else
    return -1.0;
#endif
}

lowrank::Shape shape_of(const benchmark::State &state)
{
    lowrank::Shape s;
    s.rows = static_cast<std::size_t>(state.range(0));
    s.cols = static_cast<std::size_t>(state.range(1));
    s.rank = static_cast<int>(state.range(2));
    return s;
}

void counters(benchmark::State &state, const lowrank::Shape &s)
{
    const double dense = static_cast<double>(s.elements()) * sizeof(float);
    const double wire = static_cast<double>(s.factor_elements()) * sizeof(float);
    set_input_bytes(state, s.elements(), sizeof(float));
    state.counters["rows"] = static_cast<double>(s.rows);
    state.counters["cols"] = static_cast<double>(s.cols);
    state.counters["rank"] = s.rank;
    state.counters["dense_bytes"] = dense;
    state.counters["wire_bytes"] = wire;
    state.counters["wire_ratio"] = dense / wire;
    state.counters["blas_threads"] = blas_threads();
}

// M: rows x cols normal values (the same buffer for 768 x 3072 and
// 3072 x 768, viewed both ways; bench_common's cache, generated untimed).
const std::vector<float> &matrix(const lowrank::Shape &s) { return normal_data<float>(s.elements()); }

template <typename W>
void BM_lowrank_compress(benchmark::State &state)
{
    const lowrank::Shape s = shape_of(state);
    const std::vector<W> &m = matrix(s);
    const std::size_t r = static_cast<std::size_t>(s.rank);
    std::vector<W> q0(s.cols * r), q(s.cols * r), p(s.rows * r);
    lowrank::gaussian_fill<W>(42, 1, q0.data(), q0.size());
    for (auto _ : state) {
        std::memcpy(q.data(), q0.data(), q.size() * sizeof(W));
        lowrank::orthogonalize<W>(q.data(), s.cols, s.rank, false);
        lowrank::multiply_mq<W>(m.data(), s, q.data(), p.data());
        lowrank::orthogonalize<W>(p.data(), s.rows, s.rank, false);
        lowrank::multiply_mtp<W>(m.data(), s, p.data(), q.data());
        benchmark::DoNotOptimize(q.data());
        benchmark::ClobberMemory();
    }
    counters(state, s);
}

template <typename W>
void BM_lowrank_decompress(benchmark::State &state)
{
    const lowrank::Shape s = shape_of(state);
    const std::size_t r = static_cast<std::size_t>(s.rank);
    std::vector<W> p(s.rows * r), q(s.cols * r), out(s.elements());
    lowrank::gaussian_fill<W>(42, 2, p.data(), p.size());
    lowrank::gaussian_fill<W>(42, 3, q.data(), q.size());
    for (auto _ : state) {
        lowrank::reconstruct<W>(p.data(), q.data(), s, W(1), out.data());
        benchmark::DoNotOptimize(out.data());
        benchmark::ClobberMemory();
    }
    counters(state, s);
}

void shapes(benchmark::internal::Benchmark *b)
{
    b->ArgNames({"rows", "cols", "rank"});
    const std::int64_t dims[][2] = {{768, 3072}, {3072, 768}, {4096, 4096}};
    for (const auto &d : dims)
        for (std::int64_t r : {1, 4, 16, 32}) b->Args({d[0], d[1], r});
}

}  // namespace

BENCHMARK(BM_memcpy)->ArgName("n")->Arg(768 * 3072)->Arg(4096 * 4096)->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(BM_lowrank_compress, float)->Apply(shapes)->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(BM_lowrank_decompress, float)->Apply(shapes)->Unit(benchmark::kMillisecond);

int main(int argc, char **argv)
{
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
#ifdef OPENBLAS_VERSION
    benchmark::AddCustomContext("cc_coll_blas", std::string(openblas_get_config()) + " (core " +
                                                    openblas_get_corename() + ")");
#else
    benchmark::AddCustomContext("cc_coll_blas", "not OpenBLAS");
#endif
    const char *threads = std::getenv("OPENBLAS_NUM_THREADS");
    benchmark::AddCustomContext("cc_coll_openblas_num_threads", threads != nullptr ? threads : "unset");
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
