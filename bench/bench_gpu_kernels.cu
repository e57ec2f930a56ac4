// Throughput of libcc_coll's CUDA kernels beside the device's copy bandwidth
// measured in the same run. One GPU (device 0), one stream, no MPI. Links
// cc_coll_static to reach the internal device functions (namespace
// cc_coll::detail).
//
//   BM_gpu_copy/n                  cudaMemcpyAsync device to device of n floats:
//                                  the yardstick
//   BM_topk_select/n/per_mille     topk::cuda::select (radix select, ascending
//                                  indices)                          target 25 %
//   BM_topk_encode_scatter/n/pm    topk::cuda::encode of the selected pairs,
//                                  then scatter_add of the payload into a dense
//                                  buffer (one rank's send and receive)  50 %
//   BM_topk_compress_step/n/pm     the whole device TOPK compress step: g' = g +
//                                  e (load_input), select, encode, e = g' - sent
//                                  at the kept indices (keep_unsent); the
//                                  residual is restored untimed before every
//                                  iteration                          (report)
//   BM_sketch_encode/n/pm          zero the sketch, bitmap_set of the support,
//                                  count-sketch encode                    50 %
//   BM_sketch_decode/n/pm          peeling decode of that sketch (restored
//                                  untimed before every iteration)    (report)
//   BM_threshold_pick/n            threshold::cuda::pick at zero fraction 0.8
//   BM_threshold_collect/n         threshold::cuda::collect at that rung (report)
//   BM_ef_<kernel>/n/dtype         the element-wise kernels of gpu/elementwise.hpp
//                                  on a dtype buffer (0 F32, 2 F16, 3 BF16) and
//                                  a binary32 work buffer                 50 %
//   BM_powersgd_compress/rows/cols/rank   start_q from the previous Q
//                                  (orthogonalised), P = M Q, orthogonalise P,
//                                  Q = M^T P                          (report)
//   BM_powersgd_decompress/rows/cols/rank M^ = P Q^T                (report)
//   BM_quant4_encode/n             quant::cuda::encode, QUANT's defaults (4
//                                  bits, chunks of 256, max-min, nearest),
//                                  writing the rounding error           50 %
//   BM_quant4_decode/n             quant::cuda::decode_sum of that block into
//                                  a binary32 sum                        50 %
//   BM_onebit_encode/n, BM_onebit_decode/n   the same for ONEBIT's defaults
//                                  (sign and mean |v| per chunk)         50 %
//   BM_half_encode/n/format, BM_half_decode/n/format  HALF's encode (with
//                                  the rounding error) and decode_sum (0
//                                  bfloat16, 1 binary16)                  50 %
//
// Every benchmark times its iterations with CUDA events (UseManualTime),
// after one untimed warm-up call (scratch and workspaces grow there, not in
// a timed iteration). bytes_per_second counts the fp32 input: 4n bytes per
// iteration (rows x cols x 4 for PowerSGD; divide_in_place, which touches
// only the dtype buffer, n x its element size), and the copy of those same
// bytes (read once, written once) is the yardstick. Counters: GBps (10^9
// bytes/s of that input), copy_GBps (a device-to-device cudaMemcpyAsync of
// the same bytes, measured once per size in this run), frac_of_copy = GBps /
// copy_GBps, and target (the issue's goal for frac_of_copy, 0 when there is
// none); sparse benchmarks add k, the sketch benchmarks m and
// peeled/support.
//
//   ./build/bench/cc_coll_bench_gpu_kernels --benchmark_repetitions=3
//       --benchmark_report_aggregates_only=true --benchmark_out=gpu_kernels.json
//       --benchmark_out_format=json
//   (one command line)
#include <benchmark/benchmark.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "bench_common.hpp"
#include "cc_coll.h"
#include "compressors/lowrank/powersgd.hpp"
#include "compressors/lowrank/powersgd_cuda.hpp"
#include "compressors/half/half_cuda.hpp"
#include "compressors/quant/quant_cuda.hpp"
#include "compressors/sketch/count_sketch.hpp"
#include "compressors/sketch/count_sketch_cuda.hpp"
#include "compressors/threshold/threshold_cuda.hpp"
#include "compressors/topk/topk_cuda.hpp"
#include "wire/topk_payload.hpp"
#include "gpu/cuda_util.hpp"
#include "gpu/elementwise.hpp"
#include "gpu/result.hpp"

namespace {

namespace gpu = cc_coll::detail::gpu;
namespace topk = cc_coll::detail::topk;
namespace sketch = cc_coll::detail::sketch;
namespace threshold = cc_coll::detail::threshold;
namespace lowrank = cc_coll::detail::lowrank;
namespace quant = cc_coll::detail::quant;
namespace half = cc_coll::detail::half;

using cc_coll_bench::density_of;
using cc_coll_bench::kMi;
using cc_coll_bench::normal_data;

constexpr double kTargetSelect = 0.25;
constexpr double kTargetEncode = 0.50;
constexpr double kLoad = 0.77;

// ---- errors: a failed call ends the program (a benchmark that cannot run
//      its kernel has nothing to report) ------------------------------------

void fail(const char *what, const char *detail)
{
    std::fprintf(stderr, "cc_coll_bench_gpu_kernels: %s failed: %s\n", what, detail);
    std::exit(1);
}

void check(cudaError_t e, const char *what)
{
    if (e != cudaSuccess) fail(what, cudaGetErrorString(e));
}

void check(const gpu::Result &r, const char *what)
{
    if (!r.ok()) {
        char buf[256];
        std::snprintf(buf, sizeof buf, "%s: %s status %d%s%s", r.call, r.library ? r.library : "CUDA", r.code,
                      r.text ? ": " : "", r.text ? r.text : "");
        fail(what, buf);
    }
}

#define CUDA_OK(expr) check((expr), #expr)

// ---- the stream, events and device memory shared by all benchmarks -------

cudaStream_t bench_stream()
{
    static cudaStream_t s = [] {
        cudaStream_t t = nullptr;
        CUDA_OK(cudaStreamCreateWithFlags(&t, cudaStreamNonBlocking));
        return t;
    }();
    return s;
}

// Times one iteration: events around what `body` enqueues on the stream.
class EventTimer {
public:
    EventTimer()
    {
        CUDA_OK(cudaEventCreate(&start_));
        CUDA_OK(cudaEventCreate(&stop_));
    }
    ~EventTimer()
    {
        (void)cudaEventDestroy(start_);
        (void)cudaEventDestroy(stop_);
    }
    EventTimer(const EventTimer &) = delete;
    EventTimer &operator=(const EventTimer &) = delete;

    template <typename Body>
    double seconds(Body &&body)
    {
        CUDA_OK(cudaEventRecord(start_, bench_stream()));
        body();
        CUDA_OK(cudaEventRecord(stop_, bench_stream()));
        CUDA_OK(cudaEventSynchronize(stop_));
        float ms = 0.0f;
        CUDA_OK(cudaEventElapsedTime(&ms, start_, stop_));
        return static_cast<double>(ms) * 1e-3;
    }

    // Times `body` once per benchmark iteration (manual time), after
    // `restore()`, which runs untimed; returns the total seconds.
    template <typename Body, typename Restore>
    double iterations(benchmark::State &state, Body &&body, Restore &&restore)
    {
        double total = 0.0;
        for (auto _ : state) {
            restore();
            const double s = seconds(body);
            state.SetIterationTime(s);
            total += s;
        }
        return total;
    }
    template <typename Body>
    double iterations(benchmark::State &state, Body &&body)
    {
        return iterations(state, body, [] {});
    }

private:
    cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

// Device memory freed at exit.
template <typename T>
struct DeviceBuffer {
    T *ptr = nullptr;
    std::size_t n = 0;
    explicit DeviceBuffer(std::size_t count) : n(count) { CUDA_OK(cudaMalloc(&ptr, (count ? count : 1) * sizeof(T))); }
    ~DeviceBuffer() { (void)cudaFree(ptr); }
    DeviceBuffer(const DeviceBuffer &) = delete;
    DeviceBuffer &operator=(const DeviceBuffer &) = delete;
};

// Host memory to the device, complete on return. The benchmarks run on a
// non-blocking stream, which does not wait for the legacy default stream, and
// a cudaMemcpy from pageable memory may return before its DMA has landed.
void upload(void *dst, const void *src, std::size_t bytes)
{
    CUDA_OK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, bench_stream()));
    CUDA_OK(cudaStreamSynchronize(bench_stream()));
}

// n normal floats (bench_common.hpp's data) on the device, uploaded once per
// (n, seed) and shared.
const float *device_normal(std::size_t n, std::uint64_t seed = 42, double sigma = 1.0)
{
    static std::map<std::tuple<std::size_t, std::uint64_t, double>, std::unique_ptr<DeviceBuffer<float>>> cache;
    auto &slot = cache[{n, seed, sigma}];
    if (!slot) {
        const std::vector<float> &h = normal_data<float>(n, seed, sigma);
        slot = std::make_unique<DeviceBuffer<float>>(n);
        upload(slot->ptr, h.data(), n * sizeof(float));
    }
    return slot->ptr;
}

// ---- the yardstick -------------------------------------------------------

// Seconds of one device-to-device copy of `bytes`: median of 21 after 3
// warm-ups, measured once per size.
double copy_seconds(std::size_t bytes)
{
    static std::map<std::size_t, double> cache;
    auto it = cache.find(bytes);
    if (it != cache.end()) return it->second;
    DeviceBuffer<unsigned char> a(bytes), b(bytes);
    CUDA_OK(cudaMemsetAsync(a.ptr, 1, bytes, bench_stream()));
    EventTimer timer;
    std::vector<double> t;
    for (int i = 0; i < 24; ++i) {
        const double s = timer.seconds(
            [&] { CUDA_OK(cudaMemcpyAsync(b.ptr, a.ptr, bytes, cudaMemcpyDeviceToDevice, bench_stream())); });
        if (i >= 3) t.push_back(s);
    }
    std::sort(t.begin(), t.end());
    return cache[bytes] = t[t.size() / 2];
}

// Rates and the ratio to the copy of the same input bytes; `target` is the
// goal for frac_of_copy (0: none).
void report(benchmark::State &state, std::size_t input_bytes, double seconds_total, double target)
{
    const double iters = static_cast<double>(state.iterations());
    state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(input_bytes));
    const double rate = seconds_total > 0.0 ? iters * static_cast<double>(input_bytes) / seconds_total : 0.0;
    const double copy_rate = static_cast<double>(input_bytes) / copy_seconds(input_bytes);
    state.counters["GBps"] = rate * 1e-9;
    state.counters["copy_GBps"] = copy_rate * 1e-9;
    state.counters["frac_of_copy"] = rate / copy_rate;
    state.counters["target"] = target;
}

std::size_t size_arg(const benchmark::State &state) { return static_cast<std::size_t>(state.range(0)); }

// ---- copy ----------------------------------------------------------------

void BM_gpu_copy(benchmark::State &state)
{
    const std::size_t n = size_arg(state);
    const float *src = device_normal(n);
    DeviceBuffer<float> dst(n);
    EventTimer timer;
    const auto body = [&] {
        CUDA_OK(cudaMemcpyAsync(dst.ptr, src, n * sizeof(float), cudaMemcpyDeviceToDevice, bench_stream()));
    };
    timer.seconds(body);  // warm-up
    const double total = timer.iterations(state, body);
    report(state, n * sizeof(float), total, 0.0);
}

// ---- top-k ----------------------------------------------------------------

std::size_t k_of(double density, std::size_t n)
{
    const auto k = static_cast<std::size_t>(std::ceil(density * static_cast<double>(n)));
    return std::min(std::max<std::size_t>(k, 1), n);
}

void BM_topk_select(benchmark::State &state)
{
    const std::size_t n = size_arg(state), k = k_of(density_of(state), n);
    const float *x = device_normal(n);
    DeviceBuffer<std::uint32_t> idx(k);
    topk::cuda::SelectScratch scratch;
    EventTimer timer;
    check(topk::cuda::select(x, n, k, idx.ptr, &scratch, bench_stream()), "topk::cuda::select (warm-up)");
    const double total = timer.iterations(
        state, [&] { check(topk::cuda::select(x, n, k, idx.ptr, &scratch, bench_stream()), "select"); });
    report(state, n * sizeof(float), total, kTargetSelect);
    state.counters["k"] = static_cast<double>(k);
}

void BM_topk_encode_scatter(benchmark::State &state)
{
    const std::size_t n = size_arg(state), k = k_of(density_of(state), n);
    const float *x = device_normal(n);
    DeviceBuffer<std::uint32_t> idx(k);
    DeviceBuffer<unsigned char> payload(topk::payload_bytes(k, CC_COLL_F32));
    DeviceBuffer<float> sent(k), out(n);
    topk::cuda::SelectScratch scratch;
    check(topk::cuda::select(x, n, k, idx.ptr, &scratch, bench_stream()), "select");
    CUDA_OK(cudaMemsetAsync(out.ptr, 0, n * sizeof(float), bench_stream()));
    EventTimer timer;
    const auto body = [&] {
        check(topk::cuda::encode(x, n, idx.ptr, k, CC_COLL_F32, payload.ptr, sent.ptr, &scratch, bench_stream()),
              "encode");
        check(topk::cuda::scatter_add(payload.ptr, k, CC_COLL_F32, out.ptr, bench_stream()), "scatter_add");
    };
    timer.seconds(body);  // warm-up
    const double total = timer.iterations(state, body);
    report(state, n * sizeof(float), total, kTargetEncode);
    state.counters["k"] = static_cast<double>(k);
}

void BM_topk_compress_step(benchmark::State &state)
{
    const std::size_t n = size_arg(state), k = k_of(density_of(state), n);
    const float *g = device_normal(n);
    const float *e0 = device_normal(n, 7, 0.1);
    DeviceBuffer<float> e(n), sent(k);
    DeviceBuffer<std::uint32_t> idx(k);
    DeviceBuffer<unsigned char> payload(topk::payload_bytes(k, CC_COLL_F32));
    topk::cuda::SelectScratch scratch;
    EventTimer timer;
    const auto body = [&] {
        check(gpu::load_input<float>(g, CC_COLL_F32, n, e.ptr, true, bench_stream()), "load_input");
        check(topk::cuda::select(e.ptr, n, k, idx.ptr, &scratch, bench_stream()), "select");
        check(topk::cuda::encode(e.ptr, n, idx.ptr, k, CC_COLL_F32, payload.ptr, sent.ptr, &scratch, bench_stream()),
              "encode");
        check(gpu::keep_unsent<float>(e.ptr, idx.ptr, sent.ptr, k, bench_stream()), "keep_unsent");
    };
    CUDA_OK(cudaMemcpyAsync(e.ptr, e0, n * sizeof(float), cudaMemcpyDeviceToDevice, bench_stream()));
    timer.seconds(body);  // warm-up: the scratch grows here, not in a timed iteration
    const double total = timer.iterations(state, body, [&] {
        CUDA_OK(cudaMemcpyAsync(e.ptr, e0, n * sizeof(float), cudaMemcpyDeviceToDevice, bench_stream()));
    });
    report(state, n * sizeof(float), total, 0.0);
    state.counters["k"] = static_cast<double>(k);
}

// ---- count sketch ---------------------------------------------------------

// A random support (each position with probability density), its ascending
// indices on the device and the sketch layout sized at kLoad; built once per
// (n, density).
struct SketchInput {
    std::size_t n = 0;
    std::vector<std::uint32_t> idx_host;
    std::unique_ptr<DeviceBuffer<std::uint32_t>> idx;
    sketch::Layout layout;
};

const SketchInput &sketch_input(std::size_t n, double density)
{
    static std::map<std::pair<std::size_t, double>, std::unique_ptr<SketchInput>> cache;
    auto &slot = cache[{n, density}];
    if (!slot) {
        slot = std::make_unique<SketchInput>();
        slot->n = n;
        std::mt19937_64 rng(1234);
        std::uniform_real_distribution<double> u(0.0, 1.0);
        for (std::size_t i = 0; i < n; ++i)
            if (u(rng) < density) slot->idx_host.push_back(static_cast<std::uint32_t>(i));
        std::vector<std::uint8_t> bitmap(sketch::bitmap_bytes(n), 0);
        sketch::bitmap_set(bitmap.data(), slot->idx_host.data(), slot->idx_host.size());
        slot->layout.n = n;
        slot->layout.seed = 0x5eed;
        slot->layout.m = sketch::rows_per_table(bitmap.data(), n, kLoad);
        slot->idx = std::make_unique<DeviceBuffer<std::uint32_t>>(slot->idx_host.size());
        upload(slot->idx->ptr, slot->idx_host.data(), slot->idx_host.size() * sizeof(std::uint32_t));
    }
    return *slot;
}

std::size_t bitmap_words_bytes(std::size_t n) { return (sketch::bitmap_bytes(n) + 3) / 4 * 4; }

void BM_sketch_encode(benchmark::State &state)
{
    const std::size_t n = size_arg(state);
    const SketchInput &in = sketch_input(n, density_of(state));
    const std::size_t k = in.idx_host.size(), cells = in.layout.cells(), bm = bitmap_words_bytes(n);
    const float *x = device_normal(n);
    DeviceBuffer<float> sk(cells);
    DeviceBuffer<std::uint8_t> bitmap(bm);
    EventTimer timer;
    const auto body = [&] {
        CUDA_OK(cudaMemsetAsync(bitmap.ptr, 0, bm, bench_stream()));
        CUDA_OK(cudaMemsetAsync(sk.ptr, 0, cells * sizeof(float), bench_stream()));
        check(sketch::cuda::bitmap_set(bitmap.ptr, in.idx->ptr, k, bench_stream()), "bitmap_set");
        check(sketch::cuda::encode<float>(in.layout, x, in.idx->ptr, k, sk.ptr, bench_stream()), "encode");
    };
    timer.seconds(body);  // warm-up
    const double total = timer.iterations(state, body);
    report(state, n * sizeof(float), total, kTargetEncode);
    state.counters["k"] = static_cast<double>(k);
    state.counters["m"] = static_cast<double>(in.layout.m);
}

void BM_sketch_decode(benchmark::State &state)
{
    const std::size_t n = size_arg(state);
    const SketchInput &in = sketch_input(n, density_of(state));
    const std::size_t k = in.idx_host.size(), cells = in.layout.cells(), bm = bitmap_words_bytes(n);
    const float *x = device_normal(n);
    DeviceBuffer<float> sk(cells), sk0(cells), out(n);
    DeviceBuffer<std::uint8_t> bitmap(bm);
    CUDA_OK(cudaMemsetAsync(bitmap.ptr, 0, bm, bench_stream()));
    CUDA_OK(cudaMemsetAsync(sk0.ptr, 0, cells * sizeof(float), bench_stream()));
    check(sketch::cuda::bitmap_set(bitmap.ptr, in.idx->ptr, k, bench_stream()), "bitmap_set");
    check(sketch::cuda::encode<float>(in.layout, x, in.idx->ptr, k, sk0.ptr, bench_stream()), "encode");
    sketch::cuda::DecodeScratch scratch;
    sketch::DecodeInfo info;
    EventTimer timer;
    const auto body = [&] {
        check(sketch::cuda::decode<float>(in.layout, bitmap.ptr, sk.ptr, out.ptr, &scratch, &info, bench_stream()),
              "decode");
    };
    CUDA_OK(cudaMemcpyAsync(sk.ptr, sk0.ptr, cells * sizeof(float), cudaMemcpyDeviceToDevice, bench_stream()));
    timer.seconds(body);  // warm-up: the decoder's scratch grows here
    const double total = timer.iterations(state, body, [&] {
        CUDA_OK(cudaMemcpyAsync(sk.ptr, sk0.ptr, cells * sizeof(float), cudaMemcpyDeviceToDevice, bench_stream()));
    });
    report(state, n * sizeof(float), total, 0.0);
    state.counters["k"] = static_cast<double>(k);
    state.counters["m"] = static_cast<double>(in.layout.m);
    state.counters["peeled"] = static_cast<double>(info.peeled);
    state.counters["support"] = static_cast<double>(info.support);
}

// ---- threshold ladder ------------------------------------------------------

constexpr double kZeroFraction = 0.8;

void BM_threshold_pick(benchmark::State &state)
{
    const std::size_t n = size_arg(state);
    const float *x = device_normal(n);
    threshold::cuda::Scratch scratch;
    double tau = 0.0;
    EventTimer timer;
    const auto body = [&] {
        check(threshold::cuda::pick<float>(x, n, kZeroFraction, &tau, &scratch, bench_stream()), "pick");
    };
    timer.seconds(body);  // warm-up
    const double total = timer.iterations(state, body);
    report(state, n * sizeof(float), total, 0.0);
    state.counters["tau"] = tau;
}

void BM_threshold_collect(benchmark::State &state)
{
    const std::size_t n = size_arg(state);
    const float *x = device_normal(n);
    threshold::cuda::Scratch scratch;
    double tau = 0.0;
    check(threshold::cuda::pick<float>(x, n, kZeroFraction, &tau, &scratch, bench_stream()), "pick");
    DeviceBuffer<std::uint32_t> idx(n);
    std::size_t count = 0;
    EventTimer timer;
    const auto body = [&] {
        check(threshold::cuda::collect<float>(x, n, tau, idx.ptr, &count, &scratch, bench_stream()), "collect");
    };
    timer.seconds(body);  // warm-up
    const double total = timer.iterations(state, body);
    report(state, n * sizeof(float), total, 0.0);
    state.counters["k"] = static_cast<double>(count);
}

// ---- element-wise error-feedback kernels ------------------------------------

cc_coll_dtype_t dtype_arg(const benchmark::State &state) { return static_cast<cc_coll_dtype_t>(state.range(1)); }

// A dtype buffer of n elements holding the normal data rounded to the dtype.
struct DtypeBuffer {
    std::unique_ptr<DeviceBuffer<unsigned char>> buf;
};

const void *device_dtype_data(std::size_t n, cc_coll_dtype_t dtype)
{
    static std::map<std::pair<std::size_t, int>, DtypeBuffer> cache;
    auto &slot = cache[{n, static_cast<int>(dtype)}];
    if (!slot.buf) {
        slot.buf = std::make_unique<DeviceBuffer<unsigned char>>(n * cc_coll_dtype_size(dtype));
        check(gpu::store_scaled<float>(device_normal(n), n, 1.0f, dtype, slot.buf->ptr, bench_stream()),
              "store_scaled");
        CUDA_OK(cudaStreamSynchronize(bench_stream()));
    }
    return slot.buf->ptr;
}

// Runs `body(n, dtype, work, dst)` per iteration on a fresh copy of the
// residual-like work buffer (restored untimed).
// Rates count the binary32 work buffer (4n bytes), or with dtype_only the
// dtype buffer (n x element size), for a kernel that touches nothing else.
template <typename Body>
void ef_bench(benchmark::State &state, Body &&body, bool dtype_only = false)
{
    const std::size_t n = size_arg(state);
    const cc_coll_dtype_t dtype = dtype_arg(state);
    const float *e0 = device_normal(n, 7, 0.1);
    const void *src = device_dtype_data(n, dtype);
    DeviceBuffer<float> work(n);
    DeviceBuffer<unsigned char> dst(n * cc_coll_dtype_size(dtype));
    CUDA_OK(cudaMemcpyAsync(dst.ptr, src, n * cc_coll_dtype_size(dtype), cudaMemcpyDeviceToDevice, bench_stream()));
    EventTimer timer;
    const auto run = [&] { body(n, dtype, src, work.ptr, static_cast<void *>(dst.ptr)); };
    CUDA_OK(cudaMemcpyAsync(work.ptr, e0, n * sizeof(float), cudaMemcpyDeviceToDevice, bench_stream()));
    timer.seconds(run);  // warm-up
    const double total = timer.iterations(state, run, [&] {
        CUDA_OK(cudaMemcpyAsync(work.ptr, e0, n * sizeof(float), cudaMemcpyDeviceToDevice, bench_stream()));
    });
    report(state, dtype_only ? n * cc_coll_dtype_size(dtype) : n * sizeof(float), total, kTargetEncode);
}

void BM_ef_load_input(benchmark::State &state)
{
    ef_bench(state, [](std::size_t n, cc_coll_dtype_t d, const void *src, float *g, void *) {
        check(gpu::load_input<float>(src, d, n, g, true, bench_stream()), "load_input");
    });
}

void BM_ef_round_to_dtype(benchmark::State &state)
{
    ef_bench(state, [](std::size_t n, cc_coll_dtype_t d, const void *, float *g, void *dst) {
        check(gpu::round_to_dtype<float>(g, true, n, d, dst, bench_stream()), "round_to_dtype");
    });
}

void BM_ef_store_scaled(benchmark::State &state)
{
    ef_bench(state, [](std::size_t n, cc_coll_dtype_t d, const void *, float *g, void *dst) {
        check(gpu::store_scaled<float>(g, n, 0.25f, d, dst, bench_stream()), "store_scaled");
    });
}

void BM_ef_flag_nonfinite(benchmark::State &state)
{
    static DeviceBuffer<std::uint32_t> flag(1);
    ef_bench(state, [](std::size_t n, cc_coll_dtype_t, const void *, float *g, void *) {
        check(gpu::flag_nonfinite<float>(g, n, flag.ptr, bench_stream()), "flag_nonfinite");
    });
}

void BM_ef_residual_and_store(benchmark::State &state)
{
    const float *mhat = device_normal(size_arg(state), 11);
    ef_bench(state, [mhat](std::size_t n, cc_coll_dtype_t d, const void *, float *e, void *dst) {
        check(gpu::residual_and_store<float>(e, mhat, n, 0.5f, d, dst, bench_stream()), "residual_and_store");
    });
}

void BM_ef_divide_in_place(benchmark::State &state)
{
    ef_bench(
        state,
        [](std::size_t n, cc_coll_dtype_t d, const void *, float *, void *dst) {
            check(gpu::divide_in_place(dst, n, d, 4, bench_stream()), "divide_in_place");
        },
        true);
}

// ---- PowerSGD ------------------------------------------------------------------

lowrank::cuda::Context &lowrank_context()
{
    static std::unique_ptr<lowrank::cuda::Context> ctx = [] {
        std::unique_ptr<lowrank::cuda::Context> c;
        check(lowrank::cuda::Context::create(&c), "lowrank::cuda::Context::create");
        return c;
    }();
    return *ctx;
}

lowrank::Shape shape_arg(const benchmark::State &state)
{
    lowrank::Shape s;
    s.rows = static_cast<std::size_t>(state.range(0));
    s.cols = static_cast<std::size_t>(state.range(1));
    s.rank = static_cast<int>(std::min<std::int64_t>({state.range(2), state.range(0), state.range(1)}));
    return s;
}

void BM_powersgd_compress(benchmark::State &state)
{
    const lowrank::Shape s = shape_arg(state);
    const std::size_t r = static_cast<std::size_t>(s.rank);
    const bool gs = s.rank <= 2;  // the host's fp32 choice: Gram-Schmidt for r <= 2, else QR
    lowrank::cuda::Context &ctx = lowrank_context();
    const float *m = device_normal(s.elements());
    DeviceBuffer<float> p(s.rows * r), q(s.cols * r), q_prev(s.cols * r);
    check(lowrank::cuda::gaussian_fill<float>(ctx, 1, 0, q_prev.ptr, s.cols * r, bench_stream()), "gaussian_fill");
    EventTimer timer;
    const auto body = [&] {
        check(lowrank::cuda::start_q<float>(ctx, q_prev.ptr, 1, 0, s, gs, q.ptr, bench_stream()), "start_q");
        check(lowrank::cuda::multiply_mq<float>(ctx, m, s, q.ptr, p.ptr, bench_stream()), "multiply_mq");
        check(lowrank::cuda::orthogonalize<float>(ctx, p.ptr, s.rows, s.rank, gs, bench_stream()), "orthogonalize");
        check(lowrank::cuda::multiply_mtp<float>(ctx, m, s, p.ptr, q.ptr, bench_stream()), "multiply_mtp");
    };
    timer.seconds(body);  // warm-up: workspaces grow (cudaFree/cudaMalloc) for a new shape here
    const double total = timer.iterations(state, body);
    report(state, s.elements() * sizeof(float), total, 0.0);
    state.counters["wire_ratio"] =
        static_cast<double>(s.elements()) / static_cast<double>(s.factor_elements());
}

void BM_powersgd_decompress(benchmark::State &state)
{
    const lowrank::Shape s = shape_arg(state);
    const std::size_t r = static_cast<std::size_t>(s.rank);
    lowrank::cuda::Context &ctx = lowrank_context();
    DeviceBuffer<float> p(s.rows * r), q(s.cols * r), out(s.elements());
    check(lowrank::cuda::gaussian_fill<float>(ctx, 1, 1, p.ptr, s.rows * r, bench_stream()), "gaussian_fill");
    check(lowrank::cuda::gaussian_fill<float>(ctx, 1, 2, q.ptr, s.cols * r, bench_stream()), "gaussian_fill");
    EventTimer timer;
    const auto body = [&] {
        check(lowrank::cuda::reconstruct<float>(ctx, p.ptr, q.ptr, s, 1.0f, out.ptr, bench_stream()), "reconstruct");
    };
    timer.seconds(body);  // warm-up
    const double total = timer.iterations(state, body);
    report(state, s.elements() * sizeof(float), total, 0.0);
}

// ---- element codecs: QUANT, ONEBIT, HALF ---------------------------------------
//
// One rank's side of the element-codec allreduce on a block of n floats:
// encode (with the rounding error written, as error feedback keeps it) and
// decode_sum of one coded block into a binary32 sum. Rates count the fp32
// input (4n bytes).

// Times `body` (one warm-up call, then one per iteration) and reports 4n
// bytes of fp32 input a call against the copy, with the encode target.
template <typename Body>
void time_codec(benchmark::State &state, std::size_t n, Body &&body)
{
    EventTimer timer;
    timer.seconds(body);  // warm-up
    report(state, n * sizeof(float), timer.iterations(state, body), kTargetEncode);
}

void quant_encode_bench(benchmark::State &state, const quant::Options &o)
{
    const std::size_t n = size_arg(state);
    const float *v = device_normal(n);
    DeviceBuffer<unsigned char> out(quant::coded_size(n, o.chunk, o.bits));
    DeviceBuffer<float> err(n);
    time_codec(state, n, [&] {
        check(quant::cuda::encode<float>(o, 1, 1, v, n, out.ptr, err.ptr, false, bench_stream()), "quant encode");
    });
    state.counters["wire_ratio"] =
        static_cast<double>(n * sizeof(float)) / static_cast<double>(quant::coded_size(n, o.chunk, o.bits));
}

void quant_decode_bench(benchmark::State &state, const quant::Options &o)
{
    const std::size_t n = size_arg(state);
    const float *v = device_normal(n);
    DeviceBuffer<unsigned char> in(quant::coded_size(n, o.chunk, o.bits));
    DeviceBuffer<float> sum(n);
    check(quant::cuda::encode<float>(o, 1, 1, v, n, in.ptr, static_cast<float *>(nullptr), false, bench_stream()),
          "quant encode");
    CUDA_OK(cudaMemsetAsync(sum.ptr, 0, n * sizeof(float), bench_stream()));
    time_codec(state, n,
               [&] { check(quant::cuda::decode_sum<float>(o, in.ptr, 1, n, sum.ptr, bench_stream()), "decode"); });
}

void BM_quant4_encode(benchmark::State &state) { quant_encode_bench(state, quant::quant_options(0)); }
void BM_quant4_decode(benchmark::State &state) { quant_decode_bench(state, quant::quant_options(0)); }
void BM_onebit_encode(benchmark::State &state) { quant_encode_bench(state, quant::onebit_options(0)); }
void BM_onebit_decode(benchmark::State &state) { quant_decode_bench(state, quant::onebit_options(0)); }

half::Format format_arg(const benchmark::State &state) { return static_cast<half::Format>(state.range(1)); }

// HALF's encode (the rounding error into `work`) or, with `decode`, the
// decode_sum of that block (into `work`).
void half_bench(benchmark::State &state, bool decode)
{
    const std::size_t n = size_arg(state);
    const half::Format f = format_arg(state);
    const float *v = device_normal(n);
    DeviceBuffer<unsigned char> coded(2 * n);
    DeviceBuffer<float> work(n);
    if (!decode) {
        time_codec(state, n, [&] {
            check(half::cuda::encode<float>(v, n, f, coded.ptr, work.ptr, false, bench_stream()), "half encode");
        });
        return;
    }
    check(half::cuda::encode<float>(v, n, f, coded.ptr, static_cast<float *>(nullptr), false, bench_stream()),
          "half encode");
    CUDA_OK(cudaMemsetAsync(work.ptr, 0, n * sizeof(float), bench_stream()));
    time_codec(state, n,
               [&] { check(half::cuda::decode_sum<float>(coded.ptr, 1, n, f, work.ptr, bench_stream()), "decode"); });
}

void BM_half_encode(benchmark::State &state) { half_bench(state, false); }
void BM_half_decode(benchmark::State &state) { half_bench(state, true); }

// ---- registration ----------------------------------------------------------------

void sizes(benchmark::internal::Benchmark *b)
{
    b->ArgName("n");
    for (std::int64_t n = kMi; n <= 64 * kMi; n *= 4) b->Arg(n);
}

void sizes_density(benchmark::internal::Benchmark *b)
{
    b->ArgNames({"n", "per_mille"});
    for (std::int64_t n = kMi; n <= 64 * kMi; n *= 4)
        for (std::int64_t pm : {1, 10}) b->Args({n, pm});
}

void sizes_dtype(benchmark::internal::Benchmark *b)
{
    b->ArgNames({"n", "dtype"});
    for (std::int64_t n : {kMi, 16 * kMi, 64 * kMi})
        for (cc_coll_dtype_t d : {CC_COLL_F32, CC_COLL_F16, CC_COLL_BF16}) b->Args({n, static_cast<std::int64_t>(d)});
}

void sizes_format(benchmark::internal::Benchmark *b)
{
    b->ArgNames({"n", "format"});
    for (std::int64_t n = kMi; n <= 64 * kMi; n *= 4)
        for (half::Format f : {half::Format::Bf16, half::Format::Fp16}) b->Args({n, static_cast<std::int64_t>(f)});
}

void shapes(benchmark::internal::Benchmark *b)
{
    b->ArgNames({"rows", "cols", "rank"});
    for (auto rc : {std::pair<std::int64_t, std::int64_t>{768, 3072}, {3072, 768}, {4096, 4096}})
        for (std::int64_t r : {1, 4, 16, 32}) b->Args({rc.first, rc.second, r});
}

#define GPU_BENCH(fn, args) BENCHMARK(fn)->Apply(args)->UseManualTime()->Unit(benchmark::kMicrosecond)

GPU_BENCH(BM_gpu_copy, sizes);
GPU_BENCH(BM_topk_select, sizes_density);
GPU_BENCH(BM_topk_encode_scatter, sizes_density);
GPU_BENCH(BM_topk_compress_step, sizes_density);
GPU_BENCH(BM_sketch_encode, sizes_density);
GPU_BENCH(BM_sketch_decode, sizes_density);
GPU_BENCH(BM_threshold_pick, sizes);
GPU_BENCH(BM_threshold_collect, sizes);
GPU_BENCH(BM_ef_load_input, sizes_dtype);
GPU_BENCH(BM_ef_round_to_dtype, sizes_dtype);
GPU_BENCH(BM_ef_store_scaled, sizes_dtype);
GPU_BENCH(BM_ef_flag_nonfinite, sizes_dtype);
GPU_BENCH(BM_ef_residual_and_store, sizes_dtype);
GPU_BENCH(BM_ef_divide_in_place, sizes_dtype);
GPU_BENCH(BM_powersgd_compress, shapes);
GPU_BENCH(BM_powersgd_decompress, shapes);
GPU_BENCH(BM_quant4_encode, sizes);
GPU_BENCH(BM_quant4_decode, sizes);
GPU_BENCH(BM_onebit_encode, sizes);
GPU_BENCH(BM_onebit_decode, sizes);
GPU_BENCH(BM_half_encode, sizes_format);
GPU_BENCH(BM_half_decode, sizes_format);

}  // namespace

// Without a device there is nothing to measure: say so and exit 0 so scripts
// that run every benchmark go on (--benchmark_list_tests still lists them).
int main(int argc, char **argv)
{
    bool listing = false;  // read before Initialize, which removes the flags it knows
    for (int i = 1; i < argc; ++i) listing |= std::string(argv[i]).rfind("--benchmark_list_tests", 0) == 0;
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        if (!listing) {
            std::printf("cc_coll_bench_gpu_kernels: no CUDA device, nothing to measure\n");
            return 0;
        }
    } else {
        CUDA_OK(cudaSetDevice(0));
        cudaDeviceProp prop{};
        CUDA_OK(cudaGetDeviceProperties(&prop, 0));
        benchmark::AddCustomContext("gpu", prop.name);
        benchmark::AddCustomContext("gpu_memory_bytes", std::to_string(prop.totalGlobalMem));
        benchmark::AddCustomContext("gpu_sm_count", std::to_string(prop.multiProcessorCount));
    }
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
