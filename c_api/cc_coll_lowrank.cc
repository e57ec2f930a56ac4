// The extern "C" entry points of grouped allreduce and LOWRANK state.
#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cc_coll.h"
#include "collectives/allreduce/allreduce.hpp"
#include "compressors/lowrank/lowrank_state.hpp"
#include "compressors/lowrank/powersgd.hpp"
#include "core/dtype.hpp"
#include "gpu/gpu.hpp"
#include "entry.hpp"

using namespace cc_coll::detail;

namespace {

// The most tensors one cc_coll_allreduce_group call takes, the bound a
// tensor's count has too (INT_MAX); the per-tensor tables of a larger group
// would not fit in memory anyway.
constexpr std::size_t kMaxGroupTensors = static_cast<std::size_t>(INT_MAX);

// The LOWRANK shape a call with these params would use for `count`.
cc_coll_status_t shape_of(const char *fn, const CallParams &p, std::size_t count, lowrank::Shape *s)
{
    if (count == 0) return fail(CC_COLL_ERR_INVALID_ARG, "%s: count is 0 (an empty tensor has no factors)", fn);
    if (!p.has_shape)
        return fail(CC_COLL_ERR_INVALID_ARG,
                    "%s: params has no CC_COLL_PARAMS_FIELD_SHAPE: a LOWRANK tensor without a shape is 1-D and "
                    "is sent densely, so it has no factors; pass its shape (rows >= 1, or rows = cols = 0 for "
                    "the near-square view)",
                    fn);
    std::string why;
    if (!lowrank::resolve_shape(count, p.has_shape, p.rows, p.cols, p.rank, s, &why))
        return fail(CC_COLL_ERR_INVALID_ARG, "%s: params' LOWRANK shape: %s", fn, why.c_str());
    return CC_COLL_OK;
}

// [begin, end) of a tensor's recvbuf or sendbuf.
struct Span {
    std::uintptr_t begin, end;
    std::size_t tensor;
};

bool overlap(const void *x, std::size_t xb, const void *y, std::size_t yb)
{
    const auto a = reinterpret_cast<std::uintptr_t>(x), b = reinterpret_cast<std::uintptr_t>(y);
    return a < b + yb && b < a + xb;
}

// Whether two recvbufs overlap or a sendbuf overlaps another tensor's
// recvbuf: O(n log n), so that a group of many small tensors does not pay
// n^2 comparisons on every call.
bool any_overlap(const std::vector<GroupTensor> &tensors)
{
    std::vector<Span> recv;
    recv.reserve(tensors.size());
    for (std::size_t i = 0; i < tensors.size(); ++i) {
        const AllreduceArgs &a = tensors[i].args;
        if (a.count == 0) continue;
        const auto r = reinterpret_cast<std::uintptr_t>(a.recv);
        recv.push_back(Span{r, r + a.count * dtype_size(a.dtype), i});
    }
    std::sort(recv.begin(), recv.end(), [](const Span &x, const Span &y) { return x.begin < y.begin; });
    for (std::size_t k = 1; k < recv.size(); ++k)
        if (recv[k].begin < recv[k - 1].end) return true;  // disjoint and sorted from here on
    for (std::size_t i = 0; i < tensors.size(); ++i) {
        const AllreduceArgs &a = tensors[i].args;
        if (a.count == 0) continue;
        const auto s = reinterpret_cast<std::uintptr_t>(a.send);
        const std::uintptr_t e = s + a.count * dtype_size(a.dtype);
        // The first recvbuf that ends after s, and those after it that
        // start before e, are the ones [s, e) overlaps.
        auto it = std::upper_bound(recv.begin(), recv.end(), s,
                                   [](std::uintptr_t v, const Span &x) { return v < x.end; });
        for (; it != recv.end() && it->begin < e; ++it)
            if (it->tensor != i) return true;
    }
    return false;
}

// The first overlap in the order the checks name them (i, then j).
cc_coll_status_t report_overlap(const char *fn, const std::vector<GroupTensor> &tensors)
{
    const std::size_t n = tensors.size();
    for (std::size_t i = 0; i < n; ++i)
        for (std::size_t j = 0; j < n; ++j) {
            const AllreduceArgs &a = tensors[i].args, &b = tensors[j].args;
            if (i == j || a.count == 0 || b.count == 0) continue;
            const std::size_t ab = a.count * dtype_size(a.dtype), bb = b.count * dtype_size(b.dtype);
            if (i < j && overlap(a.recv, ab, b.recv, bb))
                return fail(CC_COLL_ERR_INVALID_ARG, "%s: recvbufs[%zu] and recvbufs[%zu] overlap", fn, i, j);
            if (overlap(a.send, ab, b.recv, bb))
                return fail(CC_COLL_ERR_INVALID_ARG, "%s: sendbufs[%zu] overlaps recvbufs[%zu]", fn, i, j);
        }
    return fail(CC_COLL_ERR_INTERNAL, "%s: overlapping buffers found but not named", fn);
}


cc_coll_status_t group_entry(const char *fn, size_t ntensors, const void *const *sendbufs, void *const *recvbufs,
                             const size_t *counts, const cc_coll_dtype_t *dtypes, const cc_coll_op_t &op,
                             const cc_coll_params_t *params, cc_coll_comm_h comm, void *stream,
                             cc_coll_request_h *request)
{
    std::shared_ptr<Comm> c;
    CallTimer timer;
    CallParams defaults;
    cc_coll_status_t st = begin_call(fn, comm, nullptr, &c, &defaults, &timer);
    if (st != CC_COLL_OK) return st;
    Comm *raw = c.get();
    if (ntensors == 0) {
        // Nothing to move, but the other ranks may have tensors: the
        // agreement tells them (CC_COLL_ERR_MISMATCH) instead of a hang.
        return launch(fn, c, timer, request, {}, {}, -1, [raw] { return allreduce_group(*raw, {}); });
    }
    if (ntensors > kMaxGroupTensors)
        return fail(CC_COLL_ERR_INVALID_ARG, "%s: ntensors = %zu exceeds the limit of %zu tensors per group", fn,
                    ntensors, kMaxGroupTensors);
    if (recvbufs == nullptr) return fail(CC_COLL_ERR_NULL_BUFFER, "%s: recvbufs is NULL with ntensors = %zu", fn, ntensors);
    if (counts == nullptr) return fail(CC_COLL_ERR_INVALID_ARG, "%s: counts is NULL with ntensors = %zu", fn, ntensors);
    if (dtypes == nullptr) return fail(CC_COLL_ERR_INVALID_ARG, "%s: dtypes is NULL with ntensors = %zu", fn, ntensors);
    const int o = enum_value(op);
    if (!op_valid(o)) return fail(CC_COLL_ERR_INVALID_OP, "%s: op = %d is not a cc_coll_op_t value (SUM, AVG)", fn, o);
    std::vector<GroupTensor> tensors(ntensors);
    bool on_device = false, located = false;
    int device = -1;
    for (std::size_t i = 0; i < ntensors; ++i) {
        CallParams p;
        if ((st = resolve_params(params == nullptr ? nullptr : &params[i], c->config(), &p)) != CC_COLL_OK) {
            const std::string why = cc_coll_last_error();
            return fail(st, "%s: params[%zu]: %s", fn, i, why.c_str());
        }
        const void *send = sendbufs == nullptr ? recvbufs[i] : sendbufs[i];
        bool dev = false;
        const int d = enum_value(dtypes[i]);
        if (validate_reduction_args(fn, send, recvbufs[i], counts[i], d, o) != CC_COLL_OK ||
            locate_buffers(fn, send, recvbufs[i], counts[i], stream, &dev) != CC_COLL_OK) {
            // Only on failure: the same checks again, naming the tensor.
            char what[96];
            std::snprintf(what, sizeof what, "%s (tensor %zu)", fn, i);
            if ((st = validate_reduction_args(what, send, recvbufs[i], counts[i], d, o)) != CC_COLL_OK)
                return st;
            return locate_buffers(what, send, recvbufs[i], counts[i], stream, &dev);
        }
        if (counts[i] > 0) {
            if (located && dev != on_device)
                return fail(CC_COLL_ERR_INVALID_ARG,
                            "%s: tensor %zu is in %s memory but an earlier tensor is in %s memory; a group's "
                            "tensors must all be host or all be device memory",
                            fn, i, dev ? "device" : "host", on_device ? "device" : "host");
            on_device = dev;
            located = true;
            if (dev) device = gpu::device_of(recvbufs[i]);
        }
        tensors[i] = GroupTensor{AllreduceArgs{send, recvbufs[i], counts[i], dtypes[i], op, dev, stream}, p};
    }
    for (GroupTensor &t : tensors) t.args.on_device = on_device;
    // A tensor writing memory another tensor reads or writes would make
    // the result depend on the order in which the group runs them.
    if (any_overlap(tensors)) return report_overlap(fn, tensors);
    std::vector<progress::Range> reads, writes;
    for (const GroupTensor &t : tensors) {
        const std::size_t bytes = t.args.count * dtype_size(t.args.dtype);
        if (t.args.send != t.args.recv) reads.push_back(byte_range(t.args.send, bytes));
        writes.push_back(byte_range(t.args.recv, bytes));
    }
    return launch(fn, c, timer, request, std::move(reads), std::move(writes), device,
                  [raw, tensors = std::move(tensors)] { return run_allreduce_group(*raw, tensors); });
}

}  // namespace

extern "C" {

cc_coll_status_t cc_coll_allreduce_group(size_t ntensors, const void *const *sendbufs, void *const *recvbufs,
                                         const size_t *counts, const cc_coll_dtype_t *dtypes, cc_coll_op_t op,
                                         const cc_coll_params_t *params, cc_coll_comm_h comm, void *stream)
{
    return guarded("cc_coll_allreduce_group", [&] {
        return group_entry("cc_coll_allreduce_group", ntensors, sendbufs, recvbufs, counts, dtypes, op, params, comm,
                           stream, nullptr);
    });
}

cc_coll_status_t cc_coll_iallreduce_group(size_t ntensors, const void *const *sendbufs, void *const *recvbufs,
                                          const size_t *counts, const cc_coll_dtype_t *dtypes, cc_coll_op_t op,
                                          const cc_coll_params_t *params, cc_coll_comm_h comm, void *stream,
                                          cc_coll_request_h *request)
{
    return guarded("cc_coll_iallreduce_group", [&] {
        const char *fn = "cc_coll_iallreduce_group";
        CC_COLL_TRY(check_request_out(fn, request));
        return group_entry(fn, ntensors, sendbufs, recvbufs, counts, dtypes, op, params, comm, stream, request);
    });
}

cc_coll_status_t cc_coll_lowrank_get_state(cc_coll_comm_h comm, const cc_coll_params_t *params, const void *recvbuf,
                                           size_t count, cc_coll_dtype_t dtype, uint64_t *rows, uint64_t *cols,
                                           int *rank, uint64_t *calls, double *p, double *q)
{
    return guarded("cc_coll_lowrank_get_state", [&] {
        const char *fn = "cc_coll_lowrank_get_state";
        std::shared_ptr<Comm> c;
        EfKey key;
        cc_coll_status_t st = lookup(fn, comm, &c);
        if (st != CC_COLL_OK || (st = ef_key_of(fn, *c, params, recvbuf, count, dtype, &key)) != CC_COLL_OK)
            return st;
        CC_COLL_TRY(refuse_hierarchical(fn, *c));
        CC_COLL_TRY(check_no_requests(fn, *c));
        std::lock_guard<CollectiveLock> lock(c->collective_mutex());
        return lowrank_get_state(*c, key, dtype, rows, cols, rank, calls, p, q);
    });
}

cc_coll_status_t cc_coll_lowrank_set_q(cc_coll_comm_h comm, const cc_coll_params_t *params, const void *recvbuf,
                                       size_t count, cc_coll_dtype_t dtype, const double *q)
{
    return guarded("cc_coll_lowrank_set_q", [&] {
        const char *fn = "cc_coll_lowrank_set_q";
        std::shared_ptr<Comm> c;
        EfKey key;
        CallParams p;
        cc_coll_status_t st = lookup(fn, comm, &c);
        if (st != CC_COLL_OK || (st = ef_key_of(fn, *c, params, recvbuf, count, dtype, &key)) != CC_COLL_OK ||
            (st = resolve_params(params, c->config(), &p)) != CC_COLL_OK)
            return st;
        CC_COLL_TRY(refuse_hierarchical(fn, *c));
        lowrank::Shape s;
        if ((st = shape_of(fn, p, count, &s)) != CC_COLL_OK) return st;
        if (q == nullptr) return fail(CC_COLL_ERR_NULL_BUFFER, "%s: q is NULL", fn);
        CC_COLL_TRY(check_no_requests(fn, *c));
        std::lock_guard<CollectiveLock> lock(c->collective_mutex());
        return lowrank_set_q(*c, key, dtype, s.rows, s.cols, s.rank,
                             count > 0 && gpu::locate(recvbuf) == gpu::Location::Device, q, fn);
    });
}

}  // extern "C"
