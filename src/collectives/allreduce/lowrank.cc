// Method LOWRANK: PowerSGD allreduce (docs/algorithms.md section 4, PyTorch's
// powerSGD_hook), for every compressed tensor of a group at once, on host and
// device buffers alike.
//
// Per tensor, M is the rows x cols view of g' = g + e:
//  1. Q: the previous step's Q with warm start (unless it has an all-zero
//     column), else a Gaussian drawn from (seed, shape, position, call
//     count), identical on every rank; orthogonalised.
//  2. P = M Q. Every tensor's P goes into one MPI_Allreduce(SUM), or with
//     CC_COLL_LOWRANK_FACTORS bf16/fp16 into one exchange of HALF's codec
//     (element_codec.hpp, no error feedback: the residual M - M^ takes the
//     factors' rounding).
//  3. P orthogonalised (Gram-Schmidt for r <= 2 and half dtypes, else QR);
//     Q = M^T P. Every Q goes into a second sum of the same kind, then / W.
//  4. M^ = P Q^T, the global average of the approximations; recvbuf gets M^
//     (times W for SUM) and the residual e = M - M^.
// Tensors of the binary32 work type (F32, F16, BF16) and of binary64 (F64)
// form two batches, each with its own pair of allreduces.
//
// A tensor whose summed P holds NaN or Inf (some rank's input was not
// finite) is allreduced densely instead, so non-finite values propagate as
// MPI_SUM would; every rank sees the same summed P and takes the same branch.
// With 16-bit factors so is a tensor whose summed Q holds NaN or Inf (fp16
// overflows past 65504).
// The outcome exchange after the sum of Q checks that (digests of the summed
// P and Q) and what each rank found: a fault on any rank is an error on
// every rank, with recvbuf, the residuals and the warm-start state as before
// the call.
#include <vector>

#include "collectives/allreduce/allreduce.hpp"
#include "collectives/allreduce/element_codec.hpp"
#include "compressors/half/half_codec.hpp"
#include "compressors/lowrank/lowrank_backend.hpp"
#include "collectives/common/outcome.hpp"
#include "collectives/common/powersgd_step.hpp"
#include "collectives/common/steps.hpp"
#include "compressors/lowrank/powersgd.hpp"
#include "core/dtype.hpp"
#include "compressors/lowrank/lowrank_state.hpp"
#include "exec/exec.hpp"

namespace cc_coll::detail {

namespace {

struct Item {
    const GroupTensor *t = nullptr;
    lowrank::Shape shape;
    LowRankState *state = nullptr;
    Residual *res = nullptr;
    void *g = nullptr;  // g' (count elements of W): the residual or a matrix buffer
    void *m = nullptr;  // M (rows x cols of W): g itself unless padded
    std::size_t p_off = 0, q_off = 0;
    bool dense = false;  // non-finite: allreduced densely instead
};

lowrank::Shape shape_of(const TensorPlan &plan)
{
    lowrank::Shape s;
    s.rows = static_cast<std::size_t>(plan.layout[0]);
    s.cols = static_cast<std::size_t>(plan.layout[1]);
    s.rank = static_cast<int>(plan.layout[2]);
    return s;
}

// The sum over the ranks of n factor elements, in place: MPI_SUM in the
// work type, or HALF's codec exchange (the same bits on every rank).
template <typename X, typename W>
cc_coll_status_t sum_factors(X &x, lowrank::Factors f, W *buf, std::size_t n, StatsSnapshot *stats)
{
    if (f == lowrank::Factors::Work) {
        const double t0 = now_seconds();
        CC_COLL_TRY(x.transport().allreduce_sum(buf, buf, n, dtype_of_work<W>(), x.comm().mpi()));
        stats->time_communicate += now_seconds() - t0;
        stats->bytes_wire += n * sizeof(W);
        return CC_COLL_OK;
    }
    CallParams codec;
    HalfCodec::set_format(&codec, f == lowrank::Factors::Fp16 ? half::Format::Fp16 : half::Format::Bf16);
    return codec_exchange<HalfCodec, X, W>(x, codec, buf, n, false, dtype_of_work<W>(), buf, nullptr, stats);
}

template <typename X, typename W>
cc_coll_status_t lowrank_batch(X &x, const std::vector<GroupTensor> &tensors, const std::vector<std::size_t> &idx,
                               const std::vector<TensorPlan> &plans, StatsSnapshot *stats)
{
    Comm &comm = x.comm();
    const double t0 = now_seconds();
    std::vector<Item> items;
    items.reserve(idx.size());
    std::size_t p_total = 0, q_total = 0;
    // Until the residuals' update, a failure takes every input back out.
    InputGuard<X, W> guard(x);

    // g' = g + e, the matrix view, and where each tensor's factors go.
    for (std::size_t j = 0; j < idx.size(); ++j) {
        const GroupTensor &t = tensors[idx[j]];
        const CallParams &p = t.params;
        const std::size_t n = t.args.count;
        Item it;
        it.t = &t;
        it.shape = shape_of(plans[idx[j]]);
        it.state = static_cast<LowRankState *>(plans[idx[j]].state);
        const std::size_t mn = it.shape.elements();
        if (p.ef) {
            const EfKey key = EfKey::from(p.has_ef_key, p.ef_key, t.args.recv, n, t.args.dtype);
            CC_COLL_TRY(x.residual(key, n, t.args.dtype, true, &it.res));
        }
        // The tensor's matrix buffer only where it is used: g' without a
        // residual, or the zero-padded view.
        W *mat = nullptr;
        if (it.res == nullptr || mn > n) CC_COLL_TRY(x.template matrix<W>(j, mn, &mat));
        W *g = it.res != nullptr ? it.res->template data<W>() : mat;
        CC_COLL_TRY(x.template load_input<W>(t.args.send, t.args.dtype, n, g, it.res != nullptr));
        guard.add(g, it.res, t.args.send, n, t.args.dtype);
        W *m = mn > n ? mat : g;  // zero-padded matrix view
        if (mn > n) {
            CC_COLL_TRY(x.copy(m, g, n * sizeof(W)));
            CC_COLL_TRY(x.zero(m + n, (mn - n) * sizeof(W)));
        }
        it.g = g;
        it.m = m;
        it.p_off = p_total;
        it.q_off = q_total;
        p_total += it.shape.rows * static_cast<std::size_t>(it.shape.rank);
        q_total += it.shape.cols * static_cast<std::size_t>(it.shape.rank);
        items.push_back(it);
    }

    // 1-2. Q (warm or seeded Gaussian), orthogonalised; P = M Q.
    W *pbuf = nullptr, *qbuf = nullptr;
    CC_COLL_TRY(x.template buffer<W>(kLowRankP, p_total, &pbuf));
    CC_COLL_TRY(x.template buffer<W>(kLowRankQ, q_total, &qbuf));
    for (std::size_t j = 0; j < items.size(); ++j) {
        Item &it = items[j];
        const lowrank::Shape &s = it.shape;
        const CallParams &p = it.t->params;
        const W *previous = p.warm_start ? lr_stored_q<W>(x, *it.state, s) : nullptr;
        W *q = qbuf + it.q_off;
        CC_COLL_TRY((powersgd_p<X, W>(x, static_cast<const W *>(it.m), s, previous, p.seed,
                                      lowrank_q_stream(j, s, it.state->calls), is_half(it.t->args.dtype), q,
                                      pbuf + it.p_off)));
    }
    CC_COLL_TRY(x.sync());
    const double t1 = now_seconds();
    stats->time_compress += t1 - t0;

    // One setting for the batch (a communicator's): the first tensor's.
    const lowrank::Factors factors = lowrank::factors_of(items.front().t->params);
    CC_COLL_TRY((sum_factors<X, W>(x, factors, pbuf, p_total, stats)));
    const double t2 = now_seconds();

    // From here on no rank leaves or changes its next MPI call on what it
    // found alone: a failing step is recorded in the outcome and the rank
    // carries on with zeros (collectives/common/outcome.hpp). Every rank
    // holds the same summed P: its digest goes into the outcome exchange.
    Outcome out(comm, "cc_coll_allreduce (lowrank)");
    std::uint64_t p_digest = 0, q_digest = 0;
    out.check(digest_of(x, pbuf, p_total * sizeof(W), &p_digest));

    // 3. Non-finite P -> dense; else orthogonalise P and Q = M^T P.
    std::vector<const W *> ps(items.size());
    std::vector<std::size_t> pn(items.size());
    for (std::size_t j = 0; j < items.size(); ++j) {
        ps[j] = pbuf + items[j].p_off;
        pn[j] = items[j].shape.rows * static_cast<std::size_t>(items[j].shape.rank);
    }
    std::vector<std::uint8_t> flags;
    if (!out.check(x.template nonfinite<W>(ps, pn, &flags))) flags.assign(items.size(), 0);
    for (std::size_t j = 0; j < items.size(); ++j) {
        Item &it = items[j];
        const lowrank::Shape &s = it.shape;
        W *p = pbuf + it.p_off;
        W *q = qbuf + it.q_off;
        it.dense = flags[j] != 0;
        if (it.dense || !out.ok() ||
            !out.check(powersgd_q<X, W>(x, static_cast<const W *>(it.m), s, is_half(it.t->args.dtype), p, q)))
            out.check(x.zero(q, s.cols * static_cast<std::size_t>(s.rank) * sizeof(W)));
    }
    out.check(x.sync());
    const double t3 = now_seconds();
    stats->time_compress += t3 - t2;

    CC_COLL_TRY((sum_factors<X, W>(x, factors, qbuf, q_total, stats)));
    const double t4 = now_seconds();
    // 16-bit factors: a tensor whose summed Q is not finite goes dense too.
    if (factors != lowrank::Factors::Work && out.ok()) {
        std::vector<const W *> qs(items.size());
        std::vector<std::size_t> qn(items.size());
        for (std::size_t j = 0; j < items.size(); ++j) {
            qs[j] = qbuf + items[j].q_off;
            qn[j] = items[j].shape.cols * static_cast<std::size_t>(items[j].shape.rank);
        }
        std::vector<std::uint8_t> qflags;
        if (out.check(x.template nonfinite<W>(qs, qn, &qflags)))
            for (std::size_t j = 0; j < items.size(); ++j) items[j].dense = items[j].dense || qflags[j] != 0;
    }
    // The outcome: what each rank found, and the digests of the summed
    // factors (which decide the dense tensors too), before anything is
    // written.
    out.check(digest_of(x, qbuf, q_total * sizeof(W), &q_digest));
    out.same(p_digest, "summed LOWRANK P factors");
    out.same(q_digest, "summed LOWRANK Q factors");
    CC_COLL_TRY(out.exchange());
    guard.release();
    CC_COLL_TRY(lr_scale<W>(x, qbuf, q_total, W(1) / static_cast<W>(comm.size())));

    // 4. M^ = P Q^T; recvbuf and the residual; the warm-start state.
    for (Item &it : items) {
        if (it.dense) continue;
        const lowrank::Shape &s = it.shape;
        const AllreduceArgs &a = it.t->args;
        const W *p = pbuf + it.p_off;
        const W *q = qbuf + it.q_off;
        const W alpha = a.op == CC_COLL_SUM ? static_cast<W>(comm.size()) : W(1);
        CC_COLL_TRY(lr_reconstruct_store<W>(x, p, q, s, it.res != nullptr ? static_cast<W *>(it.g) : nullptr,
                                                       a.count, alpha, a.dtype, a.recv));
        CC_COLL_TRY(lr_keep_factors<W>(x, *it.state, s, p, q));
        // Each tensor's M^ buffer is reused by the next: finish this one first.
        CC_COLL_TRY(x.sync());
    }
    stats->time_decompress += now_seconds() - t4;

    // Non-finite tensors: a dense allreduce of g', as MPI_SUM would give.
    for (Item &it : items)
        if (it.dense) CC_COLL_TRY((dense_allreduce<X, W>(x, it.t->args, static_cast<W *>(it.g), it.res != nullptr, stats)));
    return CC_COLL_OK;
}

}  // namespace

std::uint64_t lowrank_q_stream(std::size_t position, const lowrank::Shape &s, std::uint64_t calls)
{
    std::uint64_t h = 0x6c6f7772616e6bull;  // "lowrank"
    for (std::uint64_t v : {static_cast<std::uint64_t>(position), static_cast<std::uint64_t>(s.rows),
                            static_cast<std::uint64_t>(s.cols), static_cast<std::uint64_t>(s.rank), calls})
        h = (h ^ v) * 0x100000001b3ull + (h >> 29);
    return h;
}

cc_coll_status_t allreduce_lowrank(Comm &comm, const std::vector<GroupTensor> &tensors,
                                   const std::vector<std::size_t> &idx, const std::vector<TensorPlan> &plans,
                                   StatsSnapshot *stats)
{
    std::vector<std::size_t> single, dbl;
    for (std::size_t i : idx) (tensors[i].args.dtype == CC_COLL_F64 ? dbl : single).push_back(i);
    // One stream for the batch: the first tensor's (a group passes one).
    const AllreduceArgs &first = tensors[idx.front()].args;
    return with_exec(comm, first.on_device, first.stream, [&](auto &x) {
        using X = std::remove_reference_t<decltype(x)>;
        if (!single.empty()) CC_COLL_TRY((lowrank_batch<X, float>(x, tensors, single, plans, stats)));
        if (!dbl.empty()) CC_COLL_TRY((lowrank_batch<X, double>(x, tensors, dbl, plans, stats)));
        return CC_COLL_OK;
    });
}

}  // namespace cc_coll::detail
