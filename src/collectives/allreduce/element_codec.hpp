// The allreduce of a dense element codec (docs/algorithms.md, "Element
// codecs"): every element travels, coded in fewer bytes (HALF's bf16 or
// fp16). A reduce-scatter then an allgather, both of coded blocks:
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
// element, against a ring MPI_Allreduce's 2 (P - 1) m e.
//
// A codec C supplies, overloaded on the backend X (HostExec, CudaExec) in its
// compressor folder:
//   static std::size_t coded_bytes(const CallParams &p);   // c
//   template <class W> static cc_coll_status_t encode(X &, const CallParams &,
//       const W *v, std::size_t n, unsigned char *out, W *error, bool accumulate);
//     codes v[0..n) into out; error (may be null, may be v) gets
//     v - decode(out), added to it when accumulate;
//   template <class W> static cc_coll_status_t decode_sum(X &, const CallParams &,
//       const unsigned char *in, std::size_t blocks, std::size_t n, W *sum);
//     sum[i] = the sum over b < blocks, in order, of decode(block b)[i]
//     (blocks of n coded elements, back to back);
//   static cc_coll_status_t decode_store(X &, const CallParams &,
//       const unsigned char *in, std::size_t n, cc_coll_dtype_t dtype, void *dst);
#pragma once

#include <algorithm>

#include "collectives/allreduce/allreduce.hpp"
#include "collectives/common/steps.hpp"
#include "core/comm.hpp"
#include "core/dtype.hpp"
#include "core/stats.hpp"
#include "exec/exec.hpp"

namespace cc_coll::detail {

template <typename C, typename X, typename W>
cc_coll_status_t codec_allreduce(X &x, const AllreduceArgs &a, const CallParams &p, StatsSnapshot *stats)
{
    Comm &comm = x.comm();
    const std::size_t n = a.count;
    const std::size_t P = static_cast<std::size_t>(comm.size());
    const std::size_t m = (n + P - 1) / P;
    const std::size_t c = C::coded_bytes(p);
    const double t0 = now_seconds();
    W *g = nullptr;
    Residual *res = nullptr;
    CC_COLL_TRY((load_input<X, W>(x, p, a.send, a.recv, n, a.dtype, true, &g, &res)));
    InputGuard<X, W> guard(x);
    guard.add(g, res, a.send, n, a.dtype);
    unsigned char *blocks = nullptr, *mine = nullptr;
    CC_COLL_TRY(x.template buffer<unsigned char>(Buf::SendBytes, 2 * P * m * c, &blocks));
    unsigned char *received = blocks + P * m * c;
    W *sum = nullptr;
    CC_COLL_TRY(x.template buffer<W>(Buf::Other, std::max<std::size_t>(m, 1), &sum));
    CC_COLL_TRY(x.zero(blocks + n * c, (P * m - n) * c));
    CC_COLL_TRY((C::template encode<W>(x, p, g, n, blocks, res != nullptr ? g : nullptr, false)));
    CC_COLL_TRY(x.sync());
    const double t1 = now_seconds();
    CC_COLL_TRY(x.transport().alltoall_bytes(blocks, m * c, received, comm.mpi()));
    const double t2 = now_seconds();
    CC_COLL_TRY((C::template decode_sum<W>(x, p, received, P, m, sum)));
    // The sent blocks are free again: the coded sum goes there. Its elements
    // past n (the last block's padding) keep no error.
    mine = blocks;
    const std::size_t start = std::min(n, static_cast<std::size_t>(comm.rank()) * m);
    const std::size_t len = std::min(n - start, m);
    CC_COLL_TRY((C::template encode<W>(x, p, sum, len, mine, res != nullptr ? g + start : nullptr, true)));
    CC_COLL_TRY((C::template encode<W>(x, p, sum + len, m - len, mine + len * c, nullptr, false)));
    CC_COLL_TRY(x.sync());
    const double t3 = now_seconds();
    CC_COLL_TRY(x.transport().allgather_bytes(mine, m * c, received, comm.mpi()));
    const double t4 = now_seconds();
    guard.release();  // from here the call cannot fail on data
    CC_COLL_TRY(C::decode_store(x, p, received, n, a.dtype, a.recv));
    if (a.op == CC_COLL_AVG) CC_COLL_TRY(x.divide(a.recv, n, a.dtype, comm.size()));
    CC_COLL_TRY(x.sync());
    stats->time_compress += (t1 - t0) + (t3 - t2);
    stats->time_communicate += (t2 - t1) + (t4 - t3);
    stats->time_decompress += now_seconds() - t4;
    stats->bytes_wire += 2 * (P - 1) * m * c;
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
    const std::size_t c = C::coded_bytes(p);
    const double t0 = now_seconds();
    W *g = nullptr;
    Residual *res = nullptr;
    CC_COLL_TRY((load_input<HostExec, W>(x, p, send, key, n, dtype, true, &g, &res)));
    InputGuard<HostExec, W> guard(x);
    guard.add(g, res, send, n, dtype);
    unsigned char *blocks = nullptr;
    CC_COLL_TRY(x.template buffer<unsigned char>(Buf::SendBytes, std::max<std::size_t>(2 * n * c, 1), &blocks));
    unsigned char *received = blocks + n * c;
    W *sum = nullptr;
    CC_COLL_TRY(x.template buffer<W>(Buf::Other, std::max<std::size_t>(m, 1), &sum));
    CC_COLL_TRY((C::template encode<W>(x, p, g, n, blocks, res != nullptr ? g : nullptr, false)));
    const double t1 = now_seconds();
    CC_COLL_TRY(x.transport().alltoall_bytes(blocks, m * c, received, comm.mpi()));
    const double t2 = now_seconds();
    guard.release();
    CC_COLL_TRY((C::template decode_sum<W>(x, p, received, P, m, sum)));
    CC_COLL_TRY(x.template store<W>(sum, m, dtype, recv));
    if (op == CC_COLL_AVG) CC_COLL_TRY(x.divide(recv, m, dtype, comm.size()));
    stats->time_compress += t1 - t0;
    stats->time_communicate += t2 - t1;
    stats->time_decompress += now_seconds() - t2;
    stats->bytes_wire += (P - 1) * m * c;
    return CC_COLL_OK;
}

}  // namespace cc_coll::detail
