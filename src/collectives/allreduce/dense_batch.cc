// A group's dense batch of one dtype, on host and device buffers alike: the
// tensors packed into one buffer, one MPI_Allreduce(SUM), unpacked. A tensor
// with a residual (a LOWRANK tensor compressed in earlier steps) sends
// g' = g + e and keeps only the rounding to the dtype.
#include <climits>
#include <vector>

#include "collectives/allreduce/allreduce.hpp"
#include "collectives/common/steps.hpp"
#include "core/dtype.hpp"
#include "exec/exec.hpp"

namespace cc_coll::detail {

namespace {

template <typename X, typename W>
cc_coll_status_t pack_and_sum(X &x, const std::vector<GroupTensor> &tensors, const std::vector<std::size_t> &idx,
                              cc_coll_dtype_t dtype, std::size_t total, StatsSnapshot *stats)
{
    Comm &comm = x.comm();
    const std::size_t es = dtype_size(dtype);
    const double t0 = now_seconds();
    unsigned char *pack = nullptr;
    CC_COLL_TRY(x.template buffer<unsigned char>(Buf::RecvBytes, total * es, &pack));
    // A tensor with a residual keeps g' = g + e in it until the sum has
    // succeeded, and only then just the rounding to the dtype, so a call
    // failing before (a failed sum included) takes every input back out.
    InputGuard<X, W> guard(x);
    std::vector<Residual *> residuals(idx.size(), nullptr);
    std::size_t off = 0;
    for (std::size_t j = 0; j < idx.size(); ++j) {
        const GroupTensor &t = tensors[idx[j]];
        const std::size_t n = t.args.count;
        unsigned char *dst = pack + off * es;
        Residual *res = nullptr;
        if (t.params.ef && t.params.method != CC_COLL_METHOD_NONE) {
            const EfKey key = EfKey::from(t.params.has_ef_key, t.params.ef_key, t.args.recv, n, dtype);
            CC_COLL_TRY(x.residual(key, n, dtype, false, &res));
        }
        if (res == nullptr) {
            CC_COLL_TRY(x.copy(dst, t.args.send, n * es));
        } else {
            W *g = res->template data<W>();
            CC_COLL_TRY(x.template load_input<W>(t.args.send, dtype, n, g, true));
            residuals[j] = res;
            guard.add(g, res, t.args.send, n, dtype);
            CC_COLL_TRY(x.template round_to_dtype<W>(g, false, n, dtype, dst));
        }
        off += n;
    }
    CC_COLL_TRY(x.sync());
    const double t1 = now_seconds();
    stats->time_compress += t1 - t0;
    CC_COLL_TRY(x.transport().allreduce_sum(pack, pack, total, dtype, comm.mpi()));
    const double t2 = now_seconds();
    stats->time_communicate += t2 - t1;
    guard.release();
    off = 0;
    for (std::size_t j = 0; j < idx.size(); ++j) {
        const AllreduceArgs &a = tensors[idx[j]].args;
        // Keep only the rounding to the dtype; recvbuf (overwritten next, and
        // the input is in the residual by now) is the scratch for the
        // rounded values.
        if (residuals[j] != nullptr)
            CC_COLL_TRY(x.template round_to_dtype<W>(residuals[j]->template data<W>(), true, a.count, dtype, a.recv));
        CC_COLL_TRY(x.copy(a.recv, pack + off * es, a.count * es));
        if (a.op == CC_COLL_AVG) CC_COLL_TRY(x.divide(a.recv, a.count, dtype, comm.size()));
        off += a.count;
    }
    CC_COLL_TRY(x.sync());
    stats->time_decompress += now_seconds() - t2;
    stats->bytes_wire += total * es;
    return CC_COLL_OK;
}

}  // namespace

cc_coll_status_t dense_batch(Comm &comm, const std::vector<GroupTensor> &tensors, const std::vector<std::size_t> &idx,
                             cc_coll_dtype_t dtype, StatsSnapshot *stats)
{
    std::size_t total = 0;
    for (std::size_t i : idx) total += tensors[i].args.count;
    if (total > static_cast<std::size_t>(INT_MAX) && idx.size() > 1) {
        // Too large for one MPI call: one allreduce per tensor instead.
        for (std::size_t i : idx) CC_COLL_TRY(dense_batch(comm, tensors, {i}, dtype, stats));
        return CC_COLL_OK;
    }
    const AllreduceArgs &first = tensors[idx.front()].args;
    return with_exec(comm, first.on_device, first.stream, [&](auto &x) {
        using X = std::remove_reference_t<decltype(x)>;
        return with_work_type(dtype, [&](auto w) {
            return pack_and_sum<X, decltype(w)>(x, tensors, idx, dtype, total, stats);
        });
    });
}

}  // namespace cc_coll::detail
