// Grouped allreduce: several tensors in one call, in as few messages as the
// methods allow (see cc_coll_allreduce_group in cc_coll.h).
//
//  1. Plan: each LOWRANK tensor is compressed this step when its call count
//     has reached start_iter and its shape passes the compression test;
//     otherwise it joins the dense batch, as NONE tensors do.
//  2. One 16-byte MPI_Allreduce checks that every rank has the same plan
//     (counts, dtypes, methods, shapes, ranks, call counts, op).
//  3. The dense batch: one MPI_Allreduce per dtype over the packed tensors.
// Groups on device buffers take the same plan and the same steps with the
// device algorithms (allreduce_device.cc).
//  4. The compressed LOWRANK tensors together (allreduce_lowrank).
//  5. TOPK and SKETCH tensors one by one.
#include <climits>
#include <cstring>
#include <string>

#include "collectives/allreduce.hpp"
#include "collectives/lossy_common.hpp"
#include "collectives/workspace.hpp"
#include "compressors/lowrank/powersgd.hpp"
#include "core/dtype.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "transport/mpi_transport.hpp"

namespace cc_coll::detail {

namespace {

enum class Route { Skip, Dense, LowRank, Other };

struct Plan {
    std::vector<Route> route;
    std::vector<lowrank::Shape> shape;
    std::vector<LowRankState *> state;
    std::uint64_t signature = 0;
};

std::uint64_t mix(std::uint64_t h, std::uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdull;
}

cc_coll_status_t make_plan(Comm &comm, const std::vector<GroupTensor> &tensors, Plan *plan)
{
    const std::size_t n = tensors.size();
    plan->route.assign(n, Route::Skip);
    plan->shape.assign(n, lowrank::Shape{});
    plan->state.assign(n, nullptr);
    std::uint64_t h = mix(0x67726f7570ull, n);  // "group"
    for (std::size_t i = 0; i < n; ++i) {
        const GroupTensor &t = tensors[i];
        const CallParams &p = t.params;
        h = mix(h, t.args.count);
        h = mix(h, static_cast<std::uint64_t>(t.args.dtype));
        h = mix(h, static_cast<std::uint64_t>(t.args.op));
        h = mix(h, static_cast<std::uint64_t>(p.method));
        h = mix(h, t.args.on_device ? 1u : 0u);
        if (t.args.count == 0) continue;
        if (p.method == CC_COLL_METHOD_NONE) {
            plan->route[i] = Route::Dense;
        } else if (p.method == CC_COLL_METHOD_LOWRANK) {
            std::string why;
            if (!lowrank::resolve_shape(t.args.count, p.has_shape, p.rows, p.cols, p.rank, &plan->shape[i], &why))
                return fail(CC_COLL_ERR_INVALID_ARG, "LOWRANK shape of tensor %zu (params rows/cols): %s", i,
                            why.c_str());
            const EfKey key = EfKey::from(p.has_ef_key, p.ef_key, t.args.recv, t.args.count, t.args.dtype);
            LowRankState &st = comm.lowrank().get(key);
            plan->state[i] = &st;
            const bool warm = st.calls >= p.start_iter;
            // PyTorch's test counts elements; F16/BF16 factors travel as
            // binary32, so they must also take fewer bytes than the tensor.
            const lowrank::Shape &sh = plan->shape[i];
            const bool half = is_half(t.args.dtype);
            const bool worth = lowrank::should_compress(sh, p.min_compression_rate) &&
                               (!half || 2 * sh.factor_elements() < sh.elements());
            plan->route[i] = warm && worth ? Route::LowRank : Route::Dense;
            h = mix(h, plan->shape[i].rows);
            h = mix(h, plan->shape[i].cols);
            h = mix(h, static_cast<std::uint64_t>(plan->shape[i].rank));
            h = mix(h, st.calls);
            h = mix(h, static_cast<std::uint64_t>(plan->route[i]));
        } else {
            plan->route[i] = Route::Other;
        }
    }
    plan->signature = h;
    return CC_COLL_OK;
}

// The dense batch of one dtype: packed, one MPI_Allreduce(SUM), unpacked.
// A tensor with a residual (a LOWRANK tensor compressed in earlier steps)
// sends g' = g + e and keeps only the rounding to the dtype.
cc_coll_status_t dense_batch(Comm &comm, const std::vector<GroupTensor> &tensors, const std::vector<std::size_t> &idx,
                             cc_coll_dtype_t dtype, StatsSnapshot *stats)
{
    const std::size_t es = dtype_size(dtype);
    std::size_t total = 0;
    for (std::size_t i : idx) total += tensors[i].args.count;
    if (total > static_cast<std::size_t>(INT_MAX)) {
        // Too large for one MPI call: one allreduce per tensor instead.
        for (std::size_t i : idx) {
            std::vector<std::size_t> one{i};
            const cc_coll_status_t st = dense_batch(comm, tensors, one, dtype, stats);
            if (st != CC_COLL_OK) return st;
        }
        return CC_COLL_OK;
    }
    const double t0 = now_seconds();
    std::vector<unsigned char> &pack = workspace_of(comm).send_bytes;
    pack.resize(total * es);
    std::size_t off = 0;
    std::vector<Residual *> residuals(idx.size(), nullptr);
    // A failure before the sum has finished leaves every residual as it was:
    // a residual holds g' = g + e until then, so taking g back out restores e.
    const auto undo = [&] {
        for (std::size_t j = 0; j < idx.size(); ++j) {
            if (residuals[j] == nullptr) continue;
            const GroupTensor &t = tensors[idx[j]];
            with_work_type(dtype, [&](auto w) {
                using W = decltype(w);
                W *e = residuals[j]->data<W>();
                for (std::size_t i = 0; i < t.args.count; ++i) e[i] -= load_element<W>(t.args.send, i, dtype);
                return CC_COLL_OK;
            });
        }
    };
    for (std::size_t j = 0; j < idx.size(); ++j) {
        const GroupTensor &t = tensors[idx[j]];
        const std::size_t n = t.args.count;
        unsigned char *dst = pack.data() + off * es;
        Residual *res = nullptr;
        if (t.params.ef && t.params.method != CC_COLL_METHOD_NONE) {
            const EfKey key = EfKey::from(t.params.has_ef_key, t.params.ef_key, t.args.recv, n, dtype);
            const cc_coll_status_t st = comm.ef().find_matching(key, n, dtype, &res);
            if (st != CC_COLL_OK) {
                undo();
                return st;
            }
        }
        if (res == nullptr) {
            std::memcpy(dst, t.args.send, n * es);
        } else {
            residuals[j] = res;
            with_work_type(dtype, [&](auto w) {
                using W = decltype(w);
                W *g = res->data<W>();
                load_as<W>(t.args.send, dtype, n, g, true);
                round_to_dtype<W>(g, false, n, dtype, dst);
                return CC_COLL_OK;
            });
        }
        off += n;
    }
    const double t1 = now_seconds();
    stats->time_compress += t1 - t0;
    const cc_coll_status_t st = allreduce_sum(pack.data(), pack.data(), total, dtype, comm.mpi());
    const double t2 = now_seconds();
    stats->time_communicate += t2 - t1;
    if (st != CC_COLL_OK) {
        undo();
        return st;
    }
    off = 0;
    for (std::size_t j = 0; j < idx.size(); ++j) {
        const AllreduceArgs &a = tensors[idx[j]].args;
        if (residuals[j] != nullptr) {
            // Keep only the rounding to the dtype; recv (whose input is in
            // the residual by now) is the scratch for the rounded values.
            with_work_type(dtype, [&](auto w) {
                using W = decltype(w);
                round_to_dtype<W>(residuals[j]->data<W>(), true, a.count, dtype, a.recv);
                return CC_COLL_OK;
            });
        }
        std::memcpy(a.recv, pack.data() + off * es, a.count * es);
        if (a.op == CC_COLL_AVG) divide_in_place(a.recv, a.count, dtype, comm.size());
        off += a.count;
    }
    stats->time_decompress += now_seconds() - t2;
    stats->bytes_wire += total * es;
    return CC_COLL_OK;
}

}  // namespace

cc_coll_status_t allreduce_group(Comm &comm, const std::vector<GroupTensor> &tensors)
{
    log_message(LogLevel::Debug, "allreduce_group rank %d/%d: %zu tensors", comm.rank(), comm.size(), tensors.size());
    if (tensors.empty()) return CC_COLL_OK;
    Plan plan;
    const cc_coll_status_t plan_st = make_plan(comm, tensors, &plan);
    // A rank whose layout is invalid still takes part in the agreement, with
    // a signature no valid plan has, so the other ranks get MISMATCH instead
    // of waiting for it for ever; it returns its own error.
    const std::string plan_error = plan_st == CC_COLL_OK ? std::string() : std::string(last_error());
    bool agree = false;
    cc_coll_status_t st =
        signatures_agree(plan_st == CC_COLL_OK ? plan.signature : mix(plan.signature, 0x696e76616c6964ull),
                         comm.mpi(), &agree);
    if (plan_st != CC_COLL_OK) return fail(plan_st, "%s", plan_error.c_str());
    if (st != CC_COLL_OK) return st;
    if (!agree)
        return fail(CC_COLL_ERR_MISMATCH,
                    "cc_coll_allreduce_group: the ranks disagree on the group (number of tensors, counts, dtypes, "
                    "op, methods, LOWRANK shapes, ranks or call counts); every rank must pass the same tensors "
                    "in the same order");

    StatsSnapshot call;
    // Every tensor of a group is in the same kind of memory (the C API checks).
    const bool on_device = tensors.front().args.on_device;
    // 3. Dense batch, one allreduce per dtype.
    for (int d = CC_COLL_F32; d <= CC_COLL_BF16; ++d) {
        std::vector<std::size_t> idx;
        for (std::size_t i = 0; i < tensors.size(); ++i)
            if (plan.route[i] == Route::Dense && tensors[i].args.dtype == d) idx.push_back(i);
        if (idx.empty()) continue;
        const cc_coll_dtype_t dt = static_cast<cc_coll_dtype_t>(d);
        st = on_device ? dense_batch_device(comm, tensors, idx, dt, &call) : dense_batch(comm, tensors, idx, dt, &call);
        if (st != CC_COLL_OK) return st;
    }
    // 4. Compressed LOWRANK tensors.
    std::vector<std::size_t> low;
    for (std::size_t i = 0; i < tensors.size(); ++i)
        if (plan.route[i] == Route::LowRank) low.push_back(i);
    if (!low.empty()) {
        st = on_device ? allreduce_lowrank_device(comm, tensors, low, plan.shape, plan.state, &call)
                       : allreduce_lowrank(comm, tensors, low, plan.shape, plan.state, &call);
        if (st != CC_COLL_OK) return st;
    }
    for (std::size_t i = 0; i < tensors.size(); ++i)
        if (plan.state[i] != nullptr) ++plan.state[i]->calls;
    // 5. TOPK and SKETCH, one by one.
    for (std::size_t i = 0; i < tensors.size(); ++i) {
        if (plan.route[i] != Route::Other) continue;
        const GroupTensor &t = tensors[i];
        if (t.params.method == CC_COLL_METHOD_TOPK)
            st = on_device ? allreduce_sparse_allgather_device(comm, t.args, t.params, &call)
                           : allreduce_sparse_allgather(comm, t.args, t.params, &call);
        else
            st = on_device ? allreduce_sketch_device(comm, t.args, t.params, &call)
                           : allreduce_sketch(comm, t.args, t.params, &call);
        if (st != CC_COLL_OK) return st;
    }
    for (const GroupTensor &t : tensors) {
        call.calls += 1;
        call.bytes_uncompressed += t.args.count * dtype_size(t.args.dtype);
    }
    comm.stats().add(call);
    return CC_COLL_OK;
}

}  // namespace cc_coll::detail
