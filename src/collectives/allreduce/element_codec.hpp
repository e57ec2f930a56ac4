// The allreduce of a dense element codec (docs/algorithms.md sections 9
// and 10): every element travels, coded in fewer bytes (HALF's bf16 or
// fp16, QUANT's and ONEBIT's chunks). A reduce-scatter then an allgather,
// both of coded blocks:
//   1. g' = g + e (error feedback, optional), coded into P blocks of
//      m = ceil(n / P) elements, the last padded with zeros; with EF the
//      coding error g' - decode(code(g')) is the new residual;
//   2. alltoall: rank r receives block r of every rank;
//   3. rank r decodes the P blocks and sums them in the work type, in rank
//      order (the same order on every rank), and codes its sum; with EF the
//      sum's coding error is added to rank r's residual in its block (the
//      owner's stage of two-stage error feedback), so that the results and
//      the residuals of all ranks add up to the inputs;
//   4. allgather of the coded sums; every rank decodes all P into recvbuf
//      (AVG: then / P), so every rank holds the same bits.
// Each rank sends and receives 2 (P - 1) m c bytes for c coded bytes per
// element, against a ring MPI_Allreduce's 2 (P - 1) m e. codec_exchange
// runs steps 1-4 on a buffer already in the work type, with or without
// error feedback; codec_allreduce loads g' for it and divides for AVG.
//
// A codec C supplies, overloaded on the backend X (HostExec, CudaExec) in its
// compressor folder:
//   static std::size_t coded_size(const CallParams &p, std::size_t n);
//     bytes of n coded elements (a multiple of 8 when the codec reads
//     aligned words from a block);
//   static constexpr bool kElementwise;
//     true when every element codes alone into coded_size(p, 1) bytes
//     (HALF): the buffer is then coded in one pass and padded with zero
//     bytes; false (per-chunk scales, QUANT): every block of m elements is
//     coded on its own, the last ones from a copy padded with zeros;
//   template <class W> static cc_coll_status_t encode(X &, const CallParams &,
//       const W *v, std::size_t n, unsigned char *out, W *error, bool accumulate);
//     codes v[0..n) into out (coded_size(p, n) bytes); error (may be null,
//     may be v) gets v - decode(out), added to it when accumulate;
//   template <class W> static cc_coll_status_t decode_sum(X &, const CallParams &,
//       const unsigned char *in, std::size_t blocks, std::size_t n, W *sum);
//     sum[i] = the sum over b < blocks, in order, of decode(block b)[i]
//     (blocks of n coded elements, coded_size(p, n) bytes each, back to back);
//   static cc_coll_status_t decode_store(X &, const CallParams &,
//       const unsigned char *in, std::size_t n, cc_coll_dtype_t dtype, void *dst);
//     the first n elements of a block coded from n or more, into dst.
#pragma once

#include <algorithm>

#include "collectives/allreduce/allreduce.hpp"
#include "collectives/common/steps.hpp"
#include "core/comm.hpp"
#include "core/dtype.hpp"
#include "core/stats.hpp"
#include "exec/exec.hpp"

namespace cc_coll::detail {

// Stage 1 of a codec without kElementwise: block b of g (elements [b m,
// b m + len_b)) coded into `blocks` + b S, S = coded_size(p, m); a block
// shorter than m from a copy padded with zeros (tail, m elements), whose
// coding error on its first len_b elements goes back to g when error.
template <typename C, typename X, typename W>
cc_coll_status_t encode_blocks(X &x, const CallParams &p, W *g, std::size_t n, std::size_t blocks_count, std::size_t m,
                               unsigned char *blocks, bool error, W *tail)
{
    const std::size_t S = C::coded_size(p, m);
    for (std::size_t b = 0; b < blocks_count; ++b) {
        const std::size_t lo = std::min(n, b * m);
        const std::size_t len = std::min(n - lo, m);
        unsigned char *out = blocks + b * S;
        if (len == m) {
            CC_COLL_TRY((C::template encode<W>(x, p, g + lo, m, out, error ? g + lo : nullptr, false)));
            continue;
        }
        if (len > 0) CC_COLL_TRY(x.copy(tail, g + lo, len * sizeof(W)));
        CC_COLL_TRY(x.zero(tail + len, (m - len) * sizeof(W)));
        CC_COLL_TRY((C::template encode<W>(x, p, tail, m, out, error ? tail : nullptr, false)));
        if (error && len > 0) CC_COLL_TRY(x.copy(g + lo, tail, len * sizeof(W)));
    }
    return CC_COLL_OK;
}

// Steps 1-4 on g' = g[0..n) of the work type, already loaded: with `error`
// g is the residual and keeps the coding errors (its guard, when given, is
// released once nothing can fail on data); the decoded sums (not divided)
// go to recv in `dtype`, which may be g itself.
template <typename C, typename X, typename W>
cc_coll_status_t codec_exchange(X &x, const CallParams &p, W *g, std::size_t n, bool error, cc_coll_dtype_t dtype,
                                void *recv, InputGuard<X, W> *guard, StatsSnapshot *stats)
{
    Comm &comm = x.comm();
    const std::size_t P = static_cast<std::size_t>(comm.size());
    const std::size_t m = (n + P - 1) / P;
    const std::size_t S = C::coded_size(p, m);
    const double t0 = now_seconds();
    unsigned char *blocks = nullptr, *mine = nullptr;
    CC_COLL_TRY(x.template buffer<unsigned char>(Buf::SendBytes, std::max<std::size_t>(2 * P * S, 1), &blocks));
    unsigned char *received = blocks + P * S;
    // sum, then (codecs without kElementwise) a padded block's copy.
    W *sum = nullptr;
    const std::size_t scratch = C::kElementwise ? m : 2 * m;
    CC_COLL_TRY(x.template buffer<W>(Buf::Other, std::max<std::size_t>(scratch, 1), &sum));
    W *tail = sum + m;
    if constexpr (C::kElementwise) {
        const std::size_t coded = C::coded_size(p, n);
        CC_COLL_TRY(x.zero(blocks + coded, P * S - coded));
        CC_COLL_TRY((C::template encode<W>(x, p, g, n, blocks, error ? g : nullptr, false)));
    } else {
        CC_COLL_TRY((encode_blocks<C, X, W>(x, p, g, n, P, m, blocks, error, tail)));
    }
    CC_COLL_TRY(x.sync());
    const double t1 = now_seconds();
    CC_COLL_TRY(x.transport().alltoall_bytes(blocks, S, received, comm.mpi()));
    const double t2 = now_seconds();
    CC_COLL_TRY((C::template decode_sum<W>(x, p, received, P, m, sum)));
    // The sent blocks are free again: the coded sum goes there. Its elements
    // past n (the last block's padding) keep no error.
    mine = blocks;
    const std::size_t start = std::min(n, static_cast<std::size_t>(comm.rank()) * m);
    const std::size_t len = std::min(n - start, m);
    W *own_error = error ? g + start : nullptr;
    if constexpr (C::kElementwise) {
        const std::size_t coded = C::coded_size(p, len);
        CC_COLL_TRY((C::template encode<W>(x, p, sum, len, mine, own_error, true)));
        CC_COLL_TRY((C::template encode<W>(x, p, sum + len, m - len, mine + coded, nullptr, false)));
    } else if (len == m || own_error == nullptr) {
        if (len < m) CC_COLL_TRY(x.zero(sum + len, (m - len) * sizeof(W)));
        CC_COLL_TRY((C::template encode<W>(x, p, sum, m, mine, own_error, true)));
    } else {
        // A padded block: its padding sums to zero and keeps no error; the
        // error of the first len elements joins this rank's residual there.
        CC_COLL_TRY(x.zero(sum + len, (m - len) * sizeof(W)));
        if (len > 0) CC_COLL_TRY(x.copy(tail, own_error, len * sizeof(W)));
        CC_COLL_TRY(x.zero(tail + len, (m - len) * sizeof(W)));
        CC_COLL_TRY((C::template encode<W>(x, p, sum, m, mine, tail, true)));
        if (len > 0) CC_COLL_TRY(x.copy(own_error, tail, len * sizeof(W)));
    }
    CC_COLL_TRY(x.sync());
    const double t3 = now_seconds();
    CC_COLL_TRY(x.transport().allgather_bytes(mine, S, received, comm.mpi()));
    const double t4 = now_seconds();
    if (guard != nullptr) guard->release();  // from here the call cannot fail on data
    if constexpr (C::kElementwise) {
        CC_COLL_TRY(C::decode_store(x, p, received, n, dtype, recv));
    } else {
        const std::size_t es = dtype_size(dtype);
        for (std::size_t b = 0; b < P; ++b) {
            const std::size_t lo = std::min(n, b * m);
            const std::size_t cnt = std::min(n - lo, m);
            if (cnt > 0)
                CC_COLL_TRY(C::decode_store(x, p, received + b * S, cnt, dtype,
                                            static_cast<unsigned char *>(recv) + lo * es));
        }
    }
    CC_COLL_TRY(x.sync());
    stats->time_compress += (t1 - t0) + (t3 - t2);
    stats->time_communicate += (t2 - t1) + (t4 - t3);
    stats->time_decompress += now_seconds() - t4;
    stats->bytes_wire += 2 * (P - 1) * S;
    return CC_COLL_OK;
}

template <typename C, typename X, typename W>
cc_coll_status_t codec_allreduce(X &x, const AllreduceArgs &a, const CallParams &p, StatsSnapshot *stats)
{
    const double t0 = now_seconds();
    W *g = nullptr;
    Residual *res = nullptr;
    CC_COLL_TRY((load_input<X, W>(x, p, a.send, a.recv, a.count, a.dtype, true, &g, &res)));
    InputGuard<X, W> guard(x);
    guard.add(g, res, a.send, a.count, a.dtype);
    stats->time_compress += now_seconds() - t0;
    CC_COLL_TRY((codec_exchange<C, X, W>(x, p, g, a.count, res != nullptr, a.dtype, a.recv, &guard, stats)));
    if (a.op == CC_COLL_AVG) {
        const double t1 = now_seconds();
        CC_COLL_TRY(x.divide(a.recv, a.count, a.dtype, x.comm().size()));
        CC_COLL_TRY(x.sync());
        stats->time_decompress += now_seconds() - t1;
    }
    return CC_COLL_OK;
}

// The reduce-scatter of the same codec (host buffers: the dispatcher stages
// device ones): steps 1-3, rank r's decoded sum of its block (recvcount
// elements, no padding) into recvbuf in the input's dtype.
template <typename C, typename W>
cc_coll_status_t codec_reduce_scatter(HostExec &x, const void *send, void *recv, const void *key, std::size_t recvcount,
                                      cc_coll_dtype_t dtype, cc_coll_op_t op, const CallParams &p,
                                      StatsSnapshot *stats)
{
    Comm &comm = x.comm();
    const std::size_t P = static_cast<std::size_t>(comm.size());
    const std::size_t m = recvcount, n = m * P;
    const std::size_t S = C::coded_size(p, m);
    const double t0 = now_seconds();
    W *g = nullptr;
    Residual *res = nullptr;
    CC_COLL_TRY((load_input<HostExec, W>(x, p, send, key, n, dtype, true, &g, &res)));
    InputGuard<HostExec, W> guard(x);
    guard.add(g, res, send, n, dtype);
    unsigned char *blocks = nullptr;
    CC_COLL_TRY(x.template buffer<unsigned char>(Buf::SendBytes, std::max<std::size_t>(2 * P * S, 1), &blocks));
    unsigned char *received = blocks + P * S;
    W *sum = nullptr;
    CC_COLL_TRY(x.template buffer<W>(Buf::Other, std::max<std::size_t>(m, 1), &sum));
    if constexpr (C::kElementwise)
        CC_COLL_TRY((C::template encode<W>(x, p, g, n, blocks, res != nullptr ? g : nullptr, false)));
    else
        CC_COLL_TRY((encode_blocks<C, HostExec, W>(x, p, g, n, P, m, blocks, res != nullptr, nullptr)));
    const double t1 = now_seconds();
    CC_COLL_TRY(x.transport().alltoall_bytes(blocks, S, received, comm.mpi()));
    const double t2 = now_seconds();
    guard.release();
    CC_COLL_TRY((C::template decode_sum<W>(x, p, received, P, m, sum)));
    CC_COLL_TRY(x.template store<W>(sum, m, dtype, recv));
    if (op == CC_COLL_AVG) CC_COLL_TRY(x.divide(recv, m, dtype, comm.size()));
    stats->time_compress += t1 - t0;
    stats->time_communicate += t2 - t1;
    stats->time_decompress += now_seconds() - t2;
    stats->bytes_wire += (P - 1) * S;
    return CC_COLL_OK;
}

}  // namespace cc_coll::detail
