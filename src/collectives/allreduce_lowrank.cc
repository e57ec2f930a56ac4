// Method LOWRANK: PowerSGD allreduce (ALGORITHMS.md section 4, PyTorch's
// powerSGD_hook), for every compressed tensor of a group at once.
//
// Per tensor, M is the rows x cols view of g' = g + e:
//  1. Q: the previous step's Q with warm start (unless it has an all-zero
//     column), else a Gaussian drawn from (seed, shape, position, call
//     count), identical on every rank; orthogonalised.
//  2. P = M Q. Every tensor's P goes into one MPI_Allreduce(SUM).
//  3. P orthogonalised (Gram-Schmidt for r <= 2 and half dtypes, else QR);
//     Q = M^T P. Every Q goes into a second MPI_Allreduce(SUM), then / W.
//  4. M^ = P Q^T, the global average of the approximations; recvbuf gets M^
//     (times W for SUM) and the residual e = M - M^.
// Tensors of the binary32 work type (F32, F16, BF16) and of binary64 (F64)
// form two batches, each with its own pair of allreduces.
//
// A tensor whose summed P holds NaN or Inf (some rank's input was not
// finite) is allreduced densely instead, so non-finite values propagate as
// MPI_SUM would; every rank sees the same summed P and takes the same branch.
#include <cmath>
#include <cstring>

#include "collectives/allreduce.hpp"
#include "collectives/lossy_common.hpp"
#include "collectives/workspace.hpp"
#include "compressors/lowrank/powersgd.hpp"
#include "core/dtype.hpp"
#include "core/error.hpp"
#include "transport/mpi_transport.hpp"

namespace cc_coll::detail {

namespace {

struct Item {
    const GroupTensor *t = nullptr;
    lowrank::Shape shape;
    LowRankState *state = nullptr;
    Residual *res = nullptr;
    void *g = nullptr;  // g' (count elements of W): the residual or mats buffer
    void *m = nullptr;  // M (rows x cols of W): g itself unless padded
    std::size_t p_off = 0, q_off = 0;
    bool dense = false;  // non-finite: allreduced densely instead
};

template <typename W>
void undo_all(std::vector<Item> &items)
{
    for (Item &it : items)
        if (it.res != nullptr)
            undo_input<W>(static_cast<W *>(it.g), it.res, it.t->args.send, it.t->args.count, it.t->args.dtype);
}

template <typename W>
cc_coll_status_t lowrank_batch(Comm &comm, const std::vector<GroupTensor> &tensors,
                               const std::vector<std::size_t> &idx, const std::vector<lowrank::Shape> &shapes,
                               const std::vector<LowRankState *> &states, StatsSnapshot *stats)
{
    Workspace &ws = workspace_of(comm);
    const double t0 = now_seconds();
    std::vector<Item> items;
    items.reserve(idx.size());
    std::size_t p_total = 0, q_total = 0;

    // g' = g + e, the matrix view, and where each tensor's factors go.
    for (std::size_t j = 0; j < idx.size(); ++j) {
        const GroupTensor &t = tensors[idx[j]];
        const CallParams &p = t.params;
        Item it;
        it.t = &t;
        it.shape = shapes[idx[j]];
        it.state = states[idx[j]];
        if (p.ef) {
            const EfKey key = EfKey::from(p.has_ef_key, p.ef_key, t.args.recv, t.args.count, t.args.dtype);
            const cc_coll_status_t st = comm.ef().acquire(key, t.args.count, t.args.dtype, &it.res);
            if (st != CC_COLL_OK) {
                undo_all<W>(items);
                return st;
            }
        }
        const std::size_t n = t.args.count;
        const std::size_t mn = it.shape.elements();
        W *g = nullptr;
        if (it.res != nullptr) {
            g = it.res->data<W>();
            load_as<W>(t.args.send, t.args.dtype, n, g, true);
        } else {
            g = ws.mat<W>(j, mn);
            load_as<W>(t.args.send, t.args.dtype, n, g, false);
        }
        W *m = g;
        if (mn > n) {
            m = ws.mat<W>(j, mn);
            if (m != g) std::memcpy(m, g, n * sizeof(W));
            std::fill(m + n, m + mn, W(0));
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
    std::vector<W> &pbuf = ws.p_buffer<W>();
    std::vector<W> &qbuf = ws.q_buffer<W>();
    pbuf.assign(p_total, W(0));
    qbuf.assign(q_total, W(0));
    for (std::size_t j = 0; j < items.size(); ++j) {
        Item &it = items[j];
        const lowrank::Shape &s = it.shape;
        const CallParams &p = it.t->params;
        const bool half = is_half(it.t->args.dtype);
        W *q = qbuf.data() + it.q_off;
        const bool warm = p.warm_start && it.state->has_q<W>(s.rows, s.cols, s.rank);
        lowrank::start_q<W>(warm ? it.state->q<W>().data() : nullptr, p.seed, lowrank_q_stream(j, s, it.state->calls), s,
                            half, q);
        lowrank::multiply_mq<W>(static_cast<const W *>(it.m), s, q, pbuf.data() + it.p_off);
    }
    const double t1 = now_seconds();
    stats->time_compress += t1 - t0;

    const cc_coll_dtype_t wire = dtype_of_work<W>();
    cc_coll_status_t st = allreduce_sum(pbuf.data(), pbuf.data(), p_total, wire, comm.mpi());
    if (st != CC_COLL_OK) {
        undo_all<W>(items);
        return st;
    }
    const double t2 = now_seconds();
    stats->time_communicate += t2 - t1;

    // 3. Orthogonalise P; Q = M^T P.
    for (Item &it : items) {
        const lowrank::Shape &s = it.shape;
        W *p = pbuf.data() + it.p_off;
        W *q = qbuf.data() + it.q_off;
        if (any_nonfinite(p, s.rows * static_cast<std::size_t>(s.rank))) {
            it.dense = true;
            std::fill(q, q + s.cols * static_cast<std::size_t>(s.rank), W(0));
            continue;
        }
        const bool half = is_half(it.t->args.dtype);
        lowrank::orthogonalize<W>(p, s.rows, s.rank, half);
        lowrank::multiply_mtp<W>(static_cast<const W *>(it.m), s, p, q);
    }
    const double t3 = now_seconds();
    stats->time_compress += t3 - t2;

    st = allreduce_sum(qbuf.data(), qbuf.data(), q_total, wire, comm.mpi());
    if (st != CC_COLL_OK) {
        undo_all<W>(items);
        return st;
    }
    const double t4 = now_seconds();
    stats->time_communicate += t4 - t3;
    stats->bytes_wire += (p_total + q_total) * sizeof(W);
    lowrank::scale<W>(qbuf.data(), q_total, W(1) / static_cast<W>(comm.size()));

    // 4. M^ = P Q^T; recvbuf and the residual; the warm-start state.
    for (std::size_t j = 0; j < items.size(); ++j) {
        Item &it = items[j];
        if (it.dense) continue;
        const lowrank::Shape &s = it.shape;
        const AllreduceArgs &a = it.t->args;
        const std::size_t n = a.count;
        const W *p = pbuf.data() + it.p_off;
        const W *q = qbuf.data() + it.q_off;
        W *mhat = ws.work<W>(s.elements());
        lowrank::reconstruct<W>(p, q, s, W(1), mhat);
        if (it.res != nullptr) {
            W *e = static_cast<W *>(it.g);
            for (std::size_t i = 0; i < n; ++i) {
                const W r = e[i] - mhat[i];
                e[i] = std::isfinite(r) ? r : W(0);
            }
        }
        if (a.op == CC_COLL_SUM) lowrank::scale<W>(mhat, n, static_cast<W>(comm.size()));
        store_as<W>(mhat, n, a.dtype, a.recv);

        LowRankState &state = *it.state;
        state.rows = s.rows;
        state.cols = s.cols;
        state.rank = s.rank;
        state.p<W>().assign(p, p + s.rows * static_cast<std::size_t>(s.rank));
        state.q<W>().assign(q, q + s.cols * static_cast<std::size_t>(s.rank));
        state.clear_other<W>();
    }
    stats->time_decompress += now_seconds() - t4;

    // Non-finite tensors: a dense allreduce of g', as MPI_SUM would give.
    for (Item &it : items) {
        if (!it.dense) continue;
        st = dense_allreduce<W>(comm, it.t->args, static_cast<W *>(it.g), it.res != nullptr, stats);
        if (st != CC_COLL_OK) return st;
    }
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
                                   const std::vector<std::size_t> &idx, const std::vector<lowrank::Shape> &shapes,
                                   const std::vector<LowRankState *> &states, StatsSnapshot *stats)
{
    std::vector<std::size_t> single, dbl;
    for (std::size_t i : idx) (tensors[i].args.dtype == CC_COLL_F64 ? dbl : single).push_back(i);
    cc_coll_status_t st = CC_COLL_OK;
    if (!single.empty()) st = lowrank_batch<float>(comm, tensors, single, shapes, states, stats);
    if (st == CC_COLL_OK && !dbl.empty()) st = lowrank_batch<double>(comm, tensors, dbl, shapes, states, stats);
    return st;
}

}  // namespace cc_coll::detail
