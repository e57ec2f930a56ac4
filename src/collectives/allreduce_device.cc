// cc_coll_allreduce on device buffers: the algorithms of
// allreduce_passthrough.cc, allreduce_sparse_allgather.cc,
// allreduce_sketch.cc, allreduce_lowrank.cc and the group's dense batch,
// step for step, with the O(count) work in CUDA kernels (src/gpu,
// src/compressors/*/..._cuda) and the data moved by the device transport.
// Wire formats and every decision (dense fallbacks, header checks, sizing)
// are the host's, so ranks decide alike and results agree with the host
// path. Residuals and LOWRANK factors stay in device memory.
//
// Streams: kernels go on the caller's stream, so they follow the work that
// produced sendbuf; the stream is synchronised before each transfer (MPI
// reads the data from the host's side) and before returning.
#include <climits>
#include <cstring>
#include <memory>
#include <vector>

#include <cuda_runtime_api.h>

#include "collectives/allreduce.hpp"
#include "collectives/lossy_common.hpp"
#include "compressors/lowrank/powersgd_cuda.hpp"
#include "compressors/sketch/count_sketch_cuda.hpp"
#include "compressors/threshold/threshold_cuda.hpp"
#include "compressors/topk/topk_cuda.hpp"
#include "wire/topk_payload.hpp"
#include "compressors/topk/topk_select.hpp"
#include "core/dtype.hpp"
#include "core/error.hpp"
#include "gpu/cuda_util.hpp"
#include "gpu/elementwise.hpp"
#include "gpu/gpu.hpp"
#include "transport/device_transport.hpp"

namespace cc_coll::detail {

namespace {

// Device scratch of one work type.
template <typename W>
struct TypedScratch {
    gpu::DeviceArray<W> work, other, sent, p, q, mhat;
    std::vector<std::unique_ptr<gpu::DeviceArray<W>>> mats;
};

// What a communicator keeps for its calls on device buffers, on one device.
struct DeviceContext {
    int device = -1;
    std::unique_ptr<DeviceTransport> transport;
    std::unique_ptr<lowrank::cuda::Context> blas;  // created on the first LOWRANK call
    topk::cuda::SelectScratch select;
    threshold::cuda::Scratch threshold;
    sketch::cuda::DecodeScratch decode;
    gpu::DeviceArray<std::uint32_t> indices, flags, loads;
    gpu::DeviceArray<unsigned char> send_bytes, recv_bytes;
    gpu::PinnedArray<unsigned char> host_bytes;
    TypedScratch<float> f32;
    TypedScratch<double> f64;

    template <typename W>
    TypedScratch<W> &typed();
};
template <>
TypedScratch<float> &DeviceContext::typed<float>() { return f32; }
template <>
TypedScratch<double> &DeviceContext::typed<double>() { return f64; }

// The context of `comm` on the current device, created on first use (and
// again when the caller moved to another device).
cc_coll_status_t context_of(Comm &comm, DeviceContext **out)
{
    std::shared_ptr<void> &slot = comm.device_slot();
    const int dev = gpu::current_device();
    auto *ctx = static_cast<DeviceContext *>(slot.get());
    if (ctx == nullptr || ctx->device != dev) {
        auto fresh = std::make_shared<DeviceContext>();
        fresh->device = dev;
        DeviceTransportMode mode = DeviceTransportMode::Staged;
        cc_coll_status_t st = resolve_device_transport(comm.config().cuda_transport, &mode);
        if (st != CC_COLL_OK) return st;
        st = DeviceTransport::create(mode, comm.config().cuda_chunk_bytes, &fresh->transport);
        if (st != CC_COLL_OK) return st;
        slot = fresh;
        ctx = fresh.get();
    }
    *out = ctx;
    return CC_COLL_OK;
}

cc_coll_status_t lowrank_context(DeviceContext &ctx, lowrank::cuda::Context **out)
{
    if (!ctx.blas) {
        const cc_coll_status_t st = gpu::check(lowrank::cuda::Context::create(&ctx.blas), "LOWRANK (device)");
        if (st != CC_COLL_OK) return st;
    }
    *out = ctx.blas.get();
    return CC_COLL_OK;
}

// *out = a.data() with room for n elements.
template <typename T>
cc_coll_status_t room(gpu::DeviceArray<T> &a, std::size_t n, T **out)
{
    const cc_coll_status_t st = gpu::check(a.reserve(n), "device workspace");
    *out = a.data();
    return st;
}

cudaStream_t stream_of(const AllreduceArgs &a) { return static_cast<cudaStream_t>(a.stream); }

#define CC_TRY(expr)                                  \
    do {                                              \
        const cc_coll_status_t cc_st_ = (expr);       \
        if (cc_st_ != CC_COLL_OK) return cc_st_;      \
    } while (0)
#define CC_GPU(expr, fn) CC_TRY(gpu::check((expr), (fn)))
#define CC_CUDA(expr, fn) CC_GPU(gpu::cuda_result((expr), #expr), (fn))
// The same, passing a failure through undo_if (a lambda in scope that takes
// the call's input back out of the residuals) first: for the steps between
// loading g' = g + e and the residual's update, so that a call failing there
// (out of device memory for scratch, say) leaves the residual as it was.
#define CC_TRY_UNDO(expr) CC_TRY(undo_if(expr))
#define CC_GPU_UNDO(expr, fn) CC_TRY_UNDO(gpu::check((expr), (fn)))
#define CC_CUDA_UNDO(expr, fn) CC_GPU_UNDO(gpu::cuda_result((expr), #expr), (fn))

// g' = g + e on the device: in the device residual when EF is on, else in
// scratch; *res is nullptr without a residual (see load_input on the host).
template <typename W>
cc_coll_status_t load_input_device(Comm &comm, DeviceContext &ctx, const CallParams &p, const AllreduceArgs &a,
                                   bool create, W **g, Residual **res)
{
    const std::size_t n = a.count;
    *res = nullptr;
    if (p.ef) {
        const EfKey key = EfKey::from(p.has_ef_key, p.ef_key, a.recv, n, a.dtype);
        CC_TRY(create ? comm.ef().acquire(key, n, a.dtype, res, gpu::device_zeroed)
                      : comm.ef().find_matching(key, n, a.dtype, res, true));
    }
    if (*res != nullptr) *g = (*res)->data<W>();
    else CC_TRY(room(ctx.typed<W>().work, n, g));
    CC_GPU(gpu::load_input<W>(a.send, a.dtype, n, *g, *res != nullptr, stream_of(a)), "allreduce (device)");
    return CC_COLL_OK;
}

// Takes the input back out of the residual after a failed transfer.
template <typename W>
void undo_input_device(W *g, const Residual *res, const AllreduceArgs &a)
{
    if (res == nullptr) return;
    (void)gpu::undo_input<W>(g, a.send, a.dtype, a.count, stream_of(a));
    (void)cudaStreamSynchronize(stream_of(a));
}

// recv = sum over ranks of g' rounded to the dtype (dense_allreduce).
template <typename W>
cc_coll_status_t dense_allreduce_device(Comm &comm, DeviceContext &ctx, const AllreduceArgs &a, W *g, bool ef,
                                        StatsSnapshot *stats)
{
    const std::size_t n = a.count;
    const cudaStream_t s = stream_of(a);
    const double t0 = now_seconds();
    CC_GPU(gpu::round_to_dtype<W>(g, ef, n, a.dtype, a.recv, s), "allreduce (device)");
    CC_TRY(gpu::synchronize(s, "allreduce (device)"));
    const double t1 = now_seconds();
    stats->time_compress += t1 - t0;
    CC_TRY(ctx.transport->allreduce_sum(a.recv, a.recv, n, a.dtype, comm.mpi()));
    const double t2 = now_seconds();
    stats->time_communicate += t2 - t1;
    if (a.op == CC_COLL_AVG) CC_GPU(gpu::divide_in_place(a.recv, n, a.dtype, comm.size(), s), "allreduce (device)");
    CC_TRY(gpu::synchronize(s, "allreduce (device)"));
    stats->time_decompress += now_seconds() - t2;
    stats->bytes_wire += n * dtype_size(a.dtype);
    return CC_COLL_OK;
}

// --- TOPK ---------------------------------------------------------------------

template <typename W>
cc_coll_status_t sparse_allgather_device(Comm &comm, DeviceContext &ctx, const AllreduceArgs &a, const CallParams &p,
                                         StatsSnapshot *stats)
{
    const std::size_t n = a.count;
    const std::size_t es = dtype_size(a.dtype);
    const std::size_t P = static_cast<std::size_t>(comm.size());
    const cudaStream_t s = stream_of(a);
    const char *fn = "cc_coll_allreduce (topk, device)";
    const double t0 = now_seconds();

    const std::size_t k = topk::k_for(p.density, n);
    const std::size_t bytes = topk::payload_bytes(k, a.dtype);
    const bool dense_only = bytes * P > n * es || bytes * P > static_cast<std::size_t>(INT_MAX);
    const bool lossless_dense = dense_only && (a.dtype == CC_COLL_F32 || a.dtype == CC_COLL_F64);
    W *g = nullptr;
    Residual *res = nullptr;
    CC_TRY(load_input_device<W>(comm, ctx, p, a, !lossless_dense, &g, &res));
    if (dense_only) {
        stats->time_compress += now_seconds() - t0;
        return dense_allreduce_device<W>(comm, ctx, a, g, res != nullptr, stats);
    }

    // Select and encode on the device.
    const auto undo_if = [&](cc_coll_status_t st) {
        if (st != CC_COLL_OK) undo_input_device<W>(g, res, a);
        return st;
    };
    std::uint32_t *idx = nullptr;
    W *sent = nullptr;
    unsigned char *payload = nullptr, *gathered = nullptr;
    CC_TRY_UNDO(room(ctx.indices, k, &idx));
    CC_TRY_UNDO(room(ctx.typed<W>().sent, k, &sent));
    CC_TRY_UNDO(room(ctx.send_bytes, bytes, &payload));
    CC_TRY_UNDO(room(ctx.recv_bytes, bytes * P, &gathered));
    CC_GPU_UNDO(topk::cuda::select<W>(g, n, k, idx, &ctx.select, s), fn);
    CC_GPU_UNDO(topk::cuda::encode<W>(g, n, idx, k, a.dtype, payload, sent, &ctx.select, s), fn);
    CC_TRY_UNDO(gpu::synchronize(s, fn));
    const double t1 = now_seconds();
    stats->time_compress += t1 - t0;

    cc_coll_status_t st = ctx.transport->allgather_bytes(payload, bytes, gathered, comm.mpi());
    const double t2 = now_seconds();
    stats->time_communicate += t2 - t1;
    if (st != CC_COLL_OK) {
        undo_input_device<W>(g, res, a);
        return st;
    }

    // Every rank's header, read back in one strided copy.
    const std::size_t hb = sizeof(topk::PayloadHeader);
    CC_GPU_UNDO(ctx.host_bytes.reserve(hb * P), fn);
    CC_CUDA_UNDO(cudaMemcpy2DAsync(ctx.host_bytes.data(), hb, gathered, bytes, hb, P, cudaMemcpyDeviceToHost, s), fn);
    CC_TRY_UNDO(gpu::synchronize(s, fn));
    bool overflow = false;
    std::size_t bad = 0;
    topk::PayloadHeader h{};
    if (!topk::headers_agree(ctx.host_bytes.data(), P, hb, n, k, &bad, &h, &overflow)) {
        undo_input_device<W>(g, res, a);
        return fail(CC_COLL_ERR_MISMATCH,
                    "cc_coll_allreduce (topk): rank %zu sent count %llu / k %u but this rank has count %zu / "
                    "k %zu; every rank must pass the same count, dtype and density",
                    bad, static_cast<unsigned long long>(h.n), h.k, n, k);
    }
    if (overflow) {
        stats->bytes_wire += bytes;
        return dense_allreduce_device<W>(comm, ctx, a, g, res != nullptr, stats);
    }

    // Scatter-add in rank order, then the residual.
    CC_CUDA(cudaMemsetAsync(a.recv, 0, n * es, s), fn);
    for (std::size_t r = 0; r < P; ++r) CC_GPU(topk::cuda::scatter_add(gathered + r * bytes, k, a.dtype, a.recv, s), fn);
    if (a.op == CC_COLL_AVG) CC_GPU(gpu::divide_in_place(a.recv, n, a.dtype, comm.size(), s), fn);
    if (res != nullptr) CC_GPU(gpu::keep_unsent<W>(g, idx, sent, k, s), fn);
    CC_TRY(gpu::synchronize(s, fn));
    stats->time_decompress += now_seconds() - t2;
    stats->bytes_wire += bytes;
    return CC_COLL_OK;
}

// --- SKETCH -------------------------------------------------------------------

template <typename W>
cc_coll_status_t sketch_device(Comm &comm, DeviceContext &ctx, const AllreduceArgs &a, const CallParams &p,
                               StatsSnapshot *stats)
{
    const std::size_t n = a.count;
    const std::size_t es = dtype_size(a.dtype);
    const cudaStream_t s = stream_of(a);
    const char *fn = "cc_coll_allreduce (sketch, device)";
    const double t0 = now_seconds();

    W *g = nullptr;
    Residual *res = nullptr;
    CC_TRY(load_input_device<W>(comm, ctx, p, a, true, &g, &res));
    const auto undo_if = [&](cc_coll_status_t st) {
        if (st != CC_COLL_OK) undo_input_device<W>(g, res, a);
        return st;
    };

    // 1. Select on the device.
    std::uint32_t *idx = nullptr;
    std::size_t kept = 0;
    if (p.sparsifier == CC_COLL_SPARSIFY_THRESHOLD) {
        double tau = 0;
        CC_TRY_UNDO(room(ctx.indices, n, &idx));
        CC_GPU_UNDO(threshold::cuda::pick<W>(g, n, p.zero_fraction, &tau, &ctx.threshold, s), fn);
        CC_GPU_UNDO(threshold::cuda::collect<W>(g, n, tau, idx, &kept, &ctx.threshold, s), fn);
    } else {
        kept = topk::k_for(p.density, n);
        CC_TRY_UNDO(room(ctx.indices, kept, &idx));
        CC_GPU_UNDO(topk::cuda::select<W>(g, n, kept, idx, &ctx.select, s), fn);
    }

    // 2. Support bitmap plus the non-finite flag byte, OR-ed over the ranks.
    const std::size_t bb = sketch::bitmap_bytes(n);
    const std::size_t padded = (bb + 1 + 3) / 4 * 4;
    unsigned char *support = nullptr;
    std::uint32_t *flag = nullptr, *loads = nullptr;
    CC_TRY_UNDO(room(ctx.send_bytes, padded, &support));
    CC_TRY_UNDO(room(ctx.flags, 1, &flag));
    CC_TRY_UNDO(room(ctx.loads, sketch::kBlock, &loads));
    CC_CUDA_UNDO(cudaMemsetAsync(support, 0, padded, s), fn);
    CC_CUDA_UNDO(cudaMemsetAsync(flag, 0, sizeof(std::uint32_t), s), fn);
    CC_GPU_UNDO(sketch::cuda::bitmap_set(support, idx, kept, s), fn);
    CC_GPU_UNDO(gpu::flag_nonfinite<W>(g, n, flag, s), fn);
    CC_CUDA_UNDO(cudaMemcpyAsync(support + bb, flag, 1, cudaMemcpyDeviceToDevice, s), fn);  // little-endian low byte
    CC_TRY_UNDO(gpu::synchronize(s, fn));
    const double t1 = now_seconds();
    stats->time_compress += t1 - t0;
    cc_coll_status_t st = ctx.transport->allreduce_bor(support, bb + 1, comm.mpi());
    stats->time_communicate += now_seconds() - t1;
    stats->bytes_wire += bb + 1;
    if (st != CC_COLL_OK) {
        undo_input_device<W>(g, res, a);
        return st;
    }

    // 3. Layout from the global support (column loads read back), as the host.
    CC_GPU_UNDO(sketch::cuda::column_loads(support, n, loads, s), fn);
    CC_GPU_UNDO(ctx.host_bytes.reserve(sketch::kBlock * sizeof(std::uint32_t) + 1), fn);
    unsigned char *host = ctx.host_bytes.data();
    CC_CUDA_UNDO(cudaMemcpyAsync(host, loads, sketch::kBlock * sizeof(std::uint32_t), cudaMemcpyDeviceToHost, s), fn);
    CC_CUDA_UNDO(
        cudaMemcpyAsync(host + sketch::kBlock * sizeof(std::uint32_t), support + bb, 1, cudaMemcpyDeviceToHost, s), fn);
    CC_TRY_UNDO(gpu::synchronize(s, fn));
    std::vector<std::uint32_t> column(sketch::kBlock);
    std::memcpy(column.data(), host, sketch::kBlock * sizeof(std::uint32_t));
    const bool nonfinite = host[sketch::kBlock * sizeof(std::uint32_t)] != 0;
    sketch::Layout layout;
    layout.n = n;
    layout.m = sketch::rows_for_loads(column.data(), p.load_factor);
    layout.seed = p.seed;
    if (nonfinite || layout.cells() * sizeof(W) + bb + 1 > n * es)
        return dense_allreduce_device<W>(comm, ctx, a, g, res != nullptr, stats);

    // 4. Sketch this rank's kept values and sum the sketches.
    const double t2 = now_seconds();
    W *cells = nullptr;
    CC_TRY_UNDO(room(ctx.typed<W>().other, layout.cells(), &cells));
    CC_CUDA_UNDO(cudaMemsetAsync(cells, 0, layout.cells() * sizeof(W), s), fn);
    CC_GPU_UNDO(sketch::cuda::encode<W>(layout, g, idx, kept, cells, s), fn);
    if (res != nullptr) CC_GPU(gpu::zero_at<W>(g, idx, kept, s), fn);  // sent exactly
    CC_TRY(gpu::synchronize(s, fn));
    const double t3 = now_seconds();
    stats->time_compress += t3 - t2;
    st = ctx.transport->allreduce_sum(cells, cells, layout.cells(), dtype_of_work<W>(), comm.mpi());
    const double t4 = now_seconds();
    stats->time_communicate += t4 - t3;
    stats->bytes_wire += layout.cells() * sizeof(W);
    if (st != CC_COLL_OK) return st;

    // 5. Peeling decode on the device, then round to the dtype.
    W *out = g;  // without EF, g' is no longer needed
    if (res != nullptr) CC_TRY(room(ctx.typed<W>().work, n, &out));
    sketch::DecodeInfo info;
    CC_GPU(sketch::cuda::decode<W>(layout, support, cells, out, &ctx.decode, &info, s), fn);
    CC_GPU(gpu::store_scaled<W>(out, n, W(1), a.dtype, a.recv, s), fn);
    if (a.op == CC_COLL_AVG) CC_GPU(gpu::divide_in_place(a.recv, n, a.dtype, comm.size(), s), fn);
    CC_TRY(gpu::synchronize(s, fn));
    stats->sketch_elements += info.support;
    stats->sketch_peeled += info.peeled;
    stats->time_decompress += now_seconds() - t4;
    return CC_COLL_OK;
}

// --- LOWRANK ------------------------------------------------------------------

struct LowRankItem {
    const GroupTensor *t = nullptr;
    lowrank::Shape shape;
    LowRankState *state = nullptr;
    Residual *res = nullptr;
    void *g = nullptr;  // g' (count elements of W): the residual or a matrix buffer
    void *m = nullptr;  // M (rows x cols of W): g itself unless padded
    std::size_t p_off = 0, q_off = 0;
    bool dense = false;
};

template <typename W>
void undo_items(std::vector<LowRankItem> &items)
{
    for (LowRankItem &it : items) undo_input_device<W>(static_cast<W *>(it.g), it.res, it.t->args);
}

template <typename W>
cc_coll_status_t lowrank_batch_device(Comm &comm, DeviceContext &ctx, const std::vector<GroupTensor> &tensors,
                                      const std::vector<std::size_t> &idx, const std::vector<lowrank::Shape> &shapes,
                                      const std::vector<LowRankState *> &states, StatsSnapshot *stats)
{
    const char *fn = "cc_coll_allreduce (lowrank, device)";
    TypedScratch<W> &ts = ctx.typed<W>();
    lowrank::cuda::Context *blas = nullptr;
    CC_TRY(lowrank_context(ctx, &blas));
    // One stream for the batch: the first tensor's (a group passes one).
    const cudaStream_t s = stream_of(tensors[idx.front()].args);
    const double t0 = now_seconds();
    std::vector<LowRankItem> items;
    items.reserve(idx.size());
    std::size_t p_total = 0, q_total = 0;
    const auto undo_if = [&](cc_coll_status_t st) {
        if (st != CC_COLL_OK) undo_items<W>(items);
        return st;
    };

    if (ts.mats.size() < idx.size()) ts.mats.resize(idx.size());
    for (std::size_t j = 0; j < idx.size(); ++j) {
        const GroupTensor &t = tensors[idx[j]];
        const CallParams &p = t.params;
        LowRankItem it;
        it.t = &t;
        it.shape = shapes[idx[j]];
        it.state = states[idx[j]];
        const std::size_t n = t.args.count;
        const std::size_t mn = it.shape.elements();
        cc_coll_status_t st = CC_COLL_OK;
        if (p.ef) {
            const EfKey key = EfKey::from(p.has_ef_key, p.ef_key, t.args.recv, n, t.args.dtype);
            st = comm.ef().acquire(key, n, t.args.dtype, &it.res, gpu::device_zeroed);
        }
        if (!ts.mats[j]) ts.mats[j] = std::make_unique<gpu::DeviceArray<W>>();
        W *mat = nullptr;
        if (st == CC_COLL_OK) st = room(*ts.mats[j], mn, &mat);
        CC_TRY_UNDO(st);
        W *g = it.res != nullptr ? it.res->data<W>() : mat;
        CC_GPU_UNDO(gpu::load_input<W>(t.args.send, t.args.dtype, n, g, it.res != nullptr, s), fn);
        W *m = mn > n ? mat : g;  // zero-padded matrix view
        it.g = g;
        it.m = m;
        it.p_off = p_total;
        it.q_off = q_total;
        p_total += it.shape.rows * static_cast<std::size_t>(it.shape.rank);
        q_total += it.shape.cols * static_cast<std::size_t>(it.shape.rank);
        items.push_back(it);  // from here a failure takes its input back out too
        if (mn > n) {
            if (m != g) CC_CUDA_UNDO(cudaMemcpyAsync(m, g, n * sizeof(W), cudaMemcpyDeviceToDevice, s), fn);
            CC_CUDA_UNDO(cudaMemsetAsync(m + n, 0, (mn - n) * sizeof(W), s), fn);
        }
    }

    // 1-2. Q (warm or seeded Gaussian), orthogonalised; P = M Q.
    W *pbuf = nullptr, *qbuf = nullptr;
    std::uint32_t *flags = nullptr;
    CC_TRY_UNDO(room(ts.p, p_total, &pbuf));
    CC_TRY_UNDO(room(ts.q, q_total, &qbuf));
    CC_TRY_UNDO(room(ctx.flags, items.size(), &flags));
    for (std::size_t j = 0; j < items.size(); ++j) {
        LowRankItem &it = items[j];
        const lowrank::Shape &sh = it.shape;
        const CallParams &p = it.t->params;
        const bool half = is_half(it.t->args.dtype);
        W *q = qbuf + it.q_off;
        const bool warm = p.warm_start && it.state->has_device_q<W>(sh.rows, sh.cols, sh.rank);
        const W *previous =
            warm ? static_cast<const W *>(it.state->device.get()) + sh.rows * static_cast<std::size_t>(sh.rank)
                 : nullptr;
        CC_GPU_UNDO(lowrank::cuda::start_q<W>(*blas, previous, p.seed, lowrank_q_stream(j, sh, it.state->calls), sh,
                                              half, q, s),
                    fn);
        CC_GPU_UNDO(lowrank::cuda::multiply_mq<W>(*blas, static_cast<const W *>(it.m), sh, q, pbuf + it.p_off, s), fn);
    }
    CC_TRY_UNDO(gpu::synchronize(s, fn));
    const double t1 = now_seconds();
    stats->time_compress += t1 - t0;

    const cc_coll_dtype_t wire = dtype_of_work<W>();
    CC_TRY_UNDO(ctx.transport->allreduce_sum(pbuf, pbuf, p_total, wire, comm.mpi()));
    const double t2 = now_seconds();
    stats->time_communicate += t2 - t1;

    // 3. Non-finite P -> dense; else orthogonalise P and Q = M^T P.
    CC_CUDA_UNDO(cudaMemsetAsync(flags, 0, items.size() * sizeof(std::uint32_t), s), fn);
    for (std::size_t j = 0; j < items.size(); ++j)
        CC_GPU_UNDO(
            gpu::flag_nonfinite<W>(pbuf + items[j].p_off, items[j].shape.rows * items[j].shape.rank, flags + j, s), fn);
    std::vector<std::uint32_t> host_flags(items.size());
    CC_CUDA_UNDO(
        cudaMemcpyAsync(host_flags.data(), flags, items.size() * sizeof(std::uint32_t), cudaMemcpyDeviceToHost, s), fn);
    CC_TRY_UNDO(gpu::synchronize(s, fn));
    for (std::size_t j = 0; j < items.size(); ++j) {
        LowRankItem &it = items[j];
        const lowrank::Shape &sh = it.shape;
        W *p = pbuf + it.p_off;
        W *q = qbuf + it.q_off;
        if (host_flags[j] != 0) {
            it.dense = true;
            CC_CUDA_UNDO(cudaMemsetAsync(q, 0, sh.cols * static_cast<std::size_t>(sh.rank) * sizeof(W), s), fn);
            continue;
        }
        CC_GPU_UNDO(lowrank::cuda::orthogonalize<W>(*blas, p, sh.rows, sh.rank, is_half(it.t->args.dtype), s), fn);
        CC_GPU_UNDO(lowrank::cuda::multiply_mtp<W>(*blas, static_cast<const W *>(it.m), sh, p, q, s), fn);
    }
    CC_TRY_UNDO(gpu::synchronize(s, fn));
    const double t3 = now_seconds();
    stats->time_compress += t3 - t2;

    CC_TRY_UNDO(ctx.transport->allreduce_sum(qbuf, qbuf, q_total, wire, comm.mpi()));
    const double t4 = now_seconds();
    stats->time_communicate += t4 - t3;
    stats->bytes_wire += (p_total + q_total) * sizeof(W);
    CC_GPU(lowrank::cuda::scale<W>(*blas, qbuf, q_total, W(1) / static_cast<W>(comm.size()), s), fn);

    // 4. M^ = P Q^T; recvbuf, the residual and the warm-start factors.
    for (LowRankItem &it : items) {
        if (it.dense) continue;
        const lowrank::Shape &sh = it.shape;
        const AllreduceArgs &a = it.t->args;
        const W *p = pbuf + it.p_off;
        const W *q = qbuf + it.q_off;
        W *mhat = nullptr;
        CC_TRY(room(ts.mhat, sh.elements(), &mhat));
        CC_GPU(lowrank::cuda::reconstruct<W>(*blas, p, q, sh, W(1), mhat, s), fn);
        const W alpha = a.op == CC_COLL_SUM ? static_cast<W>(comm.size()) : W(1);
        CC_GPU(gpu::residual_and_store<W>(it.res != nullptr ? static_cast<W *>(it.g) : nullptr, mhat, a.count, alpha,
                                          a.dtype, a.recv, s),
               fn);
        LowRankState &state = *it.state;
        const std::size_t pn = sh.rows * static_cast<std::size_t>(sh.rank);
        const std::size_t qn = sh.cols * static_cast<std::size_t>(sh.rank);
        if (!state.has_device_q<W>(sh.rows, sh.cols, sh.rank)) {
            cc_coll_status_t st = CC_COLL_OK;
            state.device = gpu::device_zeroed((pn + qn) * sizeof(W), &st);
            if (state.device == nullptr) return st;
        }
        W *factors = static_cast<W *>(state.device.get());
        CC_CUDA(cudaMemcpyAsync(factors, p, pn * sizeof(W), cudaMemcpyDeviceToDevice, s), fn);
        CC_CUDA(cudaMemcpyAsync(factors + pn, q, qn * sizeof(W), cudaMemcpyDeviceToDevice, s), fn);
        state.rows = sh.rows;
        state.cols = sh.cols;
        state.rank = sh.rank;
        state.device_work = sizeof(W);
        state.p_f32.clear();
        state.q_f32.clear();
        state.p_f64.clear();
        state.q_f64.clear();
        // Each tensor's mhat buffer is reused by the next: finish this one first.
        CC_TRY(gpu::synchronize(s, fn));
    }
    stats->time_decompress += now_seconds() - t4;

    for (LowRankItem &it : items) {
        if (!it.dense) continue;
        CC_TRY(dense_allreduce_device<W>(comm, ctx, it.t->args, static_cast<W *>(it.g), it.res != nullptr, stats));
    }
    return CC_COLL_OK;
}

}  // namespace

cc_coll_status_t allreduce_passthrough_device(Comm &comm, const AllreduceArgs &a, StatsSnapshot *stats)
{
    if (a.count == 0) return CC_COLL_OK;
    DeviceContext *ctx = nullptr;
    CC_TRY(context_of(comm, &ctx));
    const cudaStream_t s = stream_of(a);
    const char *fn = "cc_coll_allreduce (device)";
    CC_TRY(gpu::synchronize(s, fn));
    const double t0 = now_seconds();
    CC_TRY(ctx->transport->allreduce_sum(a.send, a.recv, a.count, a.dtype, comm.mpi()));
    const double t1 = now_seconds();
    if (a.op == CC_COLL_AVG) {
        CC_GPU(gpu::divide_in_place(a.recv, a.count, a.dtype, comm.size(), s), fn);
        CC_TRY(gpu::synchronize(s, fn));
    }
    stats->time_communicate = t1 - t0;
    stats->time_decompress = now_seconds() - t1;
    stats->bytes_wire = a.count * dtype_size(a.dtype);
    return CC_COLL_OK;
}

cc_coll_status_t allreduce_sparse_allgather_device(Comm &comm, const AllreduceArgs &args, const CallParams &params,
                                                   StatsSnapshot *stats)
{
    if (args.count == 0) return CC_COLL_OK;
    DeviceContext *ctx = nullptr;
    CC_TRY(context_of(comm, &ctx));
    return with_work_type(args.dtype, [&](auto w) {
        return sparse_allgather_device<decltype(w)>(comm, *ctx, args, params, stats);
    });
}

cc_coll_status_t allreduce_sketch_device(Comm &comm, const AllreduceArgs &args, const CallParams &params,
                                         StatsSnapshot *stats)
{
    if (args.count == 0) return CC_COLL_OK;
    DeviceContext *ctx = nullptr;
    CC_TRY(context_of(comm, &ctx));
    return with_work_type(args.dtype,
                          [&](auto w) { return sketch_device<decltype(w)>(comm, *ctx, args, params, stats); });
}

cc_coll_status_t allreduce_lowrank_device(Comm &comm, const std::vector<GroupTensor> &tensors,
                                          const std::vector<std::size_t> &idx,
                                          const std::vector<lowrank::Shape> &shapes,
                                          const std::vector<LowRankState *> &states, StatsSnapshot *stats)
{
    DeviceContext *ctx = nullptr;
    CC_TRY(context_of(comm, &ctx));
    std::vector<std::size_t> single, dbl;
    for (std::size_t i : idx) (tensors[i].args.dtype == CC_COLL_F64 ? dbl : single).push_back(i);
    if (!single.empty()) CC_TRY(lowrank_batch_device<float>(comm, *ctx, tensors, single, shapes, states, stats));
    if (!dbl.empty()) CC_TRY(lowrank_batch_device<double>(comm, *ctx, tensors, dbl, shapes, states, stats));
    return CC_COLL_OK;
}

cc_coll_status_t dense_batch_device(Comm &comm, const std::vector<GroupTensor> &tensors,
                                    const std::vector<std::size_t> &idx, cc_coll_dtype_t dtype, StatsSnapshot *stats)
{
    DeviceContext *ctx = nullptr;
    CC_TRY(context_of(comm, &ctx));
    const char *fn = "cc_coll_allreduce_group (device)";
    const std::size_t es = dtype_size(dtype);
    const cudaStream_t s = stream_of(tensors[idx.front()].args);
    std::size_t total = 0;
    for (std::size_t i : idx) total += tensors[i].args.count;
    if (total > static_cast<std::size_t>(INT_MAX) && idx.size() > 1) {
        for (std::size_t i : idx) CC_TRY(dense_batch_device(comm, tensors, {i}, dtype, stats));
        return CC_COLL_OK;
    }
    const double t0 = now_seconds();
    unsigned char *pack = nullptr;
    CC_TRY(room(ctx->recv_bytes, total * es, &pack));
    // A tensor with a residual keeps g' = g + e in it until the sum has
    // succeeded, and only then just the rounding to the dtype, so a call
    // failing before (a failed sum included) can take every input back out.
    std::vector<Residual *> residuals(idx.size(), nullptr);
    const auto undo_if = [&](cc_coll_status_t st) {
        for (std::size_t j = 0; st != CC_COLL_OK && j < idx.size(); ++j) {
            if (residuals[j] == nullptr) continue;
            with_work_type(dtype, [&](auto w) {
                using W = decltype(w);
                undo_input_device<W>(residuals[j]->data<W>(), residuals[j], tensors[idx[j]].args);
                return CC_COLL_OK;
            });
        }
        return st;
    };
    std::size_t off = 0;
    for (std::size_t j = 0; j < idx.size(); ++j) {
        const GroupTensor &t = tensors[idx[j]];
        const std::size_t n = t.args.count;
        unsigned char *dst = pack + off * es;
        Residual *res = nullptr;
        if (t.params.ef && t.params.method != CC_COLL_METHOD_NONE) {
            const EfKey key = EfKey::from(t.params.has_ef_key, t.params.ef_key, t.args.recv, n, dtype);
            CC_TRY_UNDO(comm.ef().find_matching(key, n, dtype, &res, true));
        }
        if (res == nullptr) {
            CC_CUDA_UNDO(cudaMemcpyAsync(dst, t.args.send, n * es, cudaMemcpyDeviceToDevice, s), fn);
        } else {
            CC_TRY_UNDO(with_work_type(dtype, [&](auto w) {
                using W = decltype(w);
                W *g = res->data<W>();
                CC_GPU(gpu::load_input<W>(t.args.send, dtype, n, g, true, s), fn);
                residuals[j] = res;
                CC_GPU(gpu::round_to_dtype<W>(g, false, n, dtype, dst, s), fn);
                return CC_COLL_OK;
            }));
        }
        off += n;
    }
    CC_TRY_UNDO(gpu::synchronize(s, fn));
    const double t1 = now_seconds();
    stats->time_compress += t1 - t0;
    CC_TRY_UNDO(ctx->transport->allreduce_sum(pack, pack, total, dtype, comm.mpi()));
    const double t2 = now_seconds();
    stats->time_communicate += t2 - t1;
    off = 0;
    for (std::size_t j = 0; j < idx.size(); ++j) {
        const AllreduceArgs &a = tensors[idx[j]].args;
        if (residuals[j] != nullptr) {
            // e = g' - g' rounded, as the host; recvbuf (overwritten next, and
            // the input is no longer needed) takes the rounded values.
            CC_TRY(with_work_type(dtype, [&](auto w) {
                using W = decltype(w);
                CC_GPU(gpu::round_to_dtype<W>(residuals[j]->data<W>(), true, a.count, dtype, a.recv, s), fn);
                return CC_COLL_OK;
            }));
        }
        CC_CUDA(cudaMemcpyAsync(a.recv, pack + off * es, a.count * es, cudaMemcpyDeviceToDevice, s), fn);
        if (a.op == CC_COLL_AVG) CC_GPU(gpu::divide_in_place(a.recv, a.count, dtype, comm.size(), s), fn);
        off += a.count;
    }
    CC_TRY(gpu::synchronize(s, fn));
    stats->time_decompress += now_seconds() - t2;
    stats->bytes_wire += total * es;
    return CC_COLL_OK;
}

}  // namespace cc_coll::detail
