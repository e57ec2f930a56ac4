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
// The owner's error joins the residual after step 4's allgather; a call that
// fails before then puts g' back (CodecUndo) and takes its input out
// (InputGuard): the residual is as before the call.
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
#include <climits>
#include <vector>

#include "collectives/allreduce/allreduce.hpp"
#include "collectives/common/steps.hpp"
#include "core/comm.hpp"
#include "core/dtype.hpp"
#include "core/stats.hpp"
#include "exec/exec.hpp"
#include "transport/mpi_transport.hpp"

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

// Step 1 on g[0..n) (m = ceil(n / P) elements per block, S coded bytes per
// block): P coded blocks into `blocks`; with `error` g keeps the coding
// errors. tail: m elements of scratch (codecs without kElementwise).
template <typename C, typename X, typename W>
cc_coll_status_t codec_encode_stage(X &x, const CallParams &p, W *g, std::size_t n, std::size_t P, std::size_t m,
                                    unsigned char *blocks, bool error, W *tail)
{
    if constexpr (C::kElementwise) {
        const std::size_t coded = C::coded_size(p, n);
        CC_COLL_TRY(x.zero(blocks + coded, P * C::coded_size(p, m) - coded));
        return C::template encode<W>(x, p, g, n, blocks, error ? g : nullptr, false);
    } else {
        return encode_blocks<C, X, W>(x, p, g, n, P, m, blocks, error, tail);
    }
}

// How many of rank r's block's m elements lie within n (the last blocks
// may be padding), and where the block starts (*start, when given).
inline std::size_t owned_elements(int r, std::size_t n, std::size_t m, std::size_t *start)
{
    const std::size_t lo = std::min(n, static_cast<std::size_t>(r) * m);
    if (start != nullptr) *start = lo;
    return std::min(n - lo, m);
}

// Step 3 for this rank's block: the P received blocks decoded and summed
// into sum (m elements), coded into mine. With own_error (m elements of
// scratch, may be null) the sum's coding error on this rank's elements of
// n is left there; codec_owner_error adds it to the residual once nothing
// can fail. It is coded as the owner's stage (accumulate: its own rounding
// stream) into a zeroed buffer, so 0 + error is the error itself.
template <typename C, typename X, typename W>
cc_coll_status_t codec_owner_stage(X &x, const CallParams &p, const unsigned char *received, std::size_t n,
                                   std::size_t P, std::size_t m, W *own_error, W *sum, unsigned char *mine)
{
    CC_COLL_TRY((C::template decode_sum<W>(x, p, received, P, m, sum)));
    // Its elements past n (the last block's padding) keep no error.
    const std::size_t len = owned_elements(x.comm().rank(), n, m, nullptr);
    if (own_error != nullptr) CC_COLL_TRY(x.zero(own_error, m * sizeof(W)));
    if constexpr (C::kElementwise) {
        const std::size_t coded = C::coded_size(p, len);
        CC_COLL_TRY((C::template encode<W>(x, p, sum, len, mine, own_error, true)));
        return C::template encode<W>(x, p, sum + len, m - len, mine + coded, nullptr, false);
    } else {
        // A padded block: its padding sums to zero; its error there is
        // dropped by codec_owner_error.
        if (len < m) CC_COLL_TRY(x.zero(sum + len, (m - len) * sizeof(W)));
        return C::template encode<W>(x, p, sum, m, mine, own_error, true);
    }
}

// The owner's stage of two-stage error feedback, once the call cannot fail:
// own_error (codec_owner_stage's) joins g over this rank's elements of n,
// so that the results and the residuals of all ranks add up to the inputs.
template <typename X, typename W>
cc_coll_status_t codec_owner_error(X &x, W *g, std::size_t n, std::size_t m, const W *own_error)
{
    std::size_t start = 0;
    const std::size_t len = owned_elements(x.comm().rank(), n, m, &start);
    if (len == 0) return CC_COLL_OK;
    return x.template load_input<W>(own_error, dtype_of_work<W>(), len, g + start, true);
}

// With error feedback, step 1 leaves the coding errors g' - decode(code(g'))
// in g. Until release(), the destructor adds every block's code, decoded,
// back to g (g' again, within rounding), so that the InputGuard made before
// it, whose destructor runs after it, takes the input out and leaves the
// residual as before the call (docs/algorithms.md 1.5). The codes must stay
// where step 1 put them until release().
template <typename C, typename X, typename W>
class CodecUndo {
public:
    // scratch: m elements (the largest m added), not needed once a call failed.
    CodecUndo(X &x, const CallParams &p, W *scratch) : x_(x), p_(p), scratch_(scratch) {}
    CodecUndo(const CodecUndo &) = delete;
    CodecUndo &operator=(const CodecUndo &) = delete;
    ~CodecUndo()
    {
        if (!armed_) return;
        for (const Entry &e : entries_) {
            const std::size_t S = C::coded_size(p_, e.m);
            for (std::size_t b = 0; b < e.P; ++b) {
                const std::size_t lo = std::min(e.n, b * e.m), len = std::min(e.n - lo, e.m);
                if (len == 0) continue;
                // Best effort (the call is failing already; on the host neither step fails).
                if (C::template decode_sum<W>(x_, p_, e.blocks + b * S, 1, e.m, scratch_) != CC_COLL_OK) continue;
                (void)x_.template load_input<W>(scratch_, dtype_of_work<W>(), len, e.g + lo, true);
            }
        }
    }
    // g[0..n), coded by step 1 into P blocks of m elements at `blocks`.
    void add(W *g, std::size_t n, std::size_t P, std::size_t m, const unsigned char *blocks)
    {
        entries_.push_back(Entry{g, n, P, m, blocks});
    }
    void release() { armed_ = false; }

private:
    struct Entry {
        W *g;
        std::size_t n, P, m;
        const unsigned char *blocks;
    };
    X &x_;
    const CallParams &p_;
    W *scratch_;
    std::vector<Entry> entries_;
    bool armed_ = true;
};

// Step 4's decoding: the P gathered coded sums of n elements into out in
// `dtype`.
template <typename C, typename X>
cc_coll_status_t codec_decode_stage(X &x, const CallParams &p, const unsigned char *gathered, std::size_t n,
                                    std::size_t P, std::size_t m, cc_coll_dtype_t dtype, void *out)
{
    if constexpr (C::kElementwise) {
        return C::decode_store(x, p, gathered, n, dtype, out);
    } else {
        const std::size_t es = dtype_size(dtype), S = C::coded_size(p, m);
        for (std::size_t b = 0; b < P; ++b) {
            const std::size_t lo = std::min(n, b * m);
            const std::size_t cnt = std::min(n - lo, m);
            if (cnt > 0)
                CC_COLL_TRY(C::decode_store(x, p, gathered + b * S, cnt, dtype, static_cast<unsigned char *>(out) + lo * es));
        }
        return CC_COLL_OK;
    }
}

// Steps 1-4 on g' = g[0..n) of the work type, already loaded: with `error`
// g is the residual and keeps the coding errors (its guard, when given, is
// released once nothing can fail on data; until then a failure puts g'
// back for it); the decoded sums (not divided) go to recv in `dtype`, which
// may be g itself.
template <typename C, typename X, typename W>
cc_coll_status_t codec_exchange(X &x, const CallParams &p, W *g, std::size_t n, bool error, cc_coll_dtype_t dtype,
                                void *recv, InputGuard<X, W> *guard, StatsSnapshot *stats)
{
    Comm &comm = x.comm();
    const std::size_t P = static_cast<std::size_t>(comm.size());
    const std::size_t m = (n + P - 1) / P;
    const std::size_t S = C::coded_size(p, m);
    const double t0 = now_seconds();
    // P coded blocks to send, P received (then gathered), the coded sum.
    unsigned char *blocks = nullptr;
    CC_COLL_TRY(x.template buffer<unsigned char>(Buf::SendBytes, std::max<std::size_t>((2 * P + 1) * S, 1), &blocks));
    unsigned char *received = blocks + P * S, *mine = blocks + 2 * P * S;
    // sum, the owner's coding error, a padded block's copy (step 1).
    W *sum = nullptr;
    CC_COLL_TRY(x.template buffer<W>(Buf::Other, std::max<std::size_t>(3 * m, 1), &sum));
    W *own_error = error ? sum + m : nullptr, *tail = sum + 2 * m;
    CodecUndo<C, X, W> undo(x, p, sum);
    CC_COLL_TRY((codec_encode_stage<C, X, W>(x, p, g, n, P, m, blocks, error, tail)));
    if (error) undo.add(g, n, P, m, blocks);
    CC_COLL_TRY(x.sync());
    const double t1 = now_seconds();
    CC_COLL_TRY(x.transport().alltoall_bytes(blocks, S, received, comm.mpi()));
    const double t2 = now_seconds();
    CC_COLL_TRY((codec_owner_stage<C, X, W>(x, p, received, n, P, m, own_error, sum, mine)));
    CC_COLL_TRY(x.sync());
    const double t3 = now_seconds();
    CC_COLL_TRY(x.transport().allgather_bytes(mine, S, received, comm.mpi()));
    const double t4 = now_seconds();
    // From here the call cannot fail on data.
    undo.release();
    if (guard != nullptr) guard->release();
    if (error) CC_COLL_TRY((codec_owner_error<X, W>(x, g, n, m, own_error)));
    CC_COLL_TRY((codec_decode_stage<C, X>(x, p, received, n, P, m, dtype, recv)));
    CC_COLL_TRY(x.sync());
    stats->time_compress += (t1 - t0) + (t3 - t2);
    stats->time_communicate += (t2 - t1) + (t4 - t3);
    stats->time_decompress += now_seconds() - t4;
    stats->bytes_wire += 2 * (P - 1) * S;
    return CC_COLL_OK;
}

// The segments of a pipelined codec allreduce (CC_COLL_PIPELINE_BYTES,
// docs/algorithms.md section 9): ceil(bytes / C) of them, 0 when the call
// runs whole (off, one segment, one rank). Agreed values only, so every
// rank decides alike.
inline std::size_t codec_segments(std::size_t n, cc_coll_dtype_t dtype, const CallParams &p, int ranks)
{
    if (p.pipeline_bytes == 0 || ranks < 2) return 0;
    const std::size_t bytes = n * dtype_size(dtype);
    const std::size_t segments = static_cast<std::size_t>((bytes + p.pipeline_bytes - 1) / p.pipeline_bytes);
    return segments < 2 ? 0 : segments;
}

// The allreduce in segments (host buffers): segment s = part_bounds(n,
// segments, s) runs steps 1-4 as a whole call on its elements would, with
// its own MPI_Ialltoall and MPI_Iallgather. Segment s + 1 is loaded and
// coded while segment s's blocks travel, then segment s's owner stage runs
// and its allgather starts; the decoding of every segment follows the last
// allgather. The order of the calls does not depend on timing, the same on
// every rank, as MPI requires of collectives.
template <typename C, typename W>
cc_coll_status_t codec_allreduce_pipelined(HostExec &x, const AllreduceArgs &a, const CallParams &p,
                                           std::size_t segments, StatsSnapshot *stats)
{
    Comm &comm = x.comm();
    const std::size_t n = a.count, es = dtype_size(a.dtype), P = static_cast<std::size_t>(comm.size());
    const double t0 = now_seconds();
    struct Segment {
        std::size_t lo, n, m, S;
        unsigned char *blocks;  // P S coded blocks to send, P S received (then gathered), S: the coded sum
        W *own_error;           // m: the owner's coding error, added to the residual at the end
    };
    std::vector<Segment> seg(segments);
    std::size_t total = 0, max_m = 1, errors = 0;
    for (std::size_t s = 0; s < segments; ++s) {
        std::size_t lo = 0, hi = 0;
        part_bounds(n, segments, s, &lo, &hi);
        const std::size_t m = (hi - lo + P - 1) / P;
        seg[s] = Segment{lo, hi - lo, m, C::coded_size(p, m), nullptr, nullptr};
        total += (2 * P + 1) * seg[s].S;
        errors += m;
        max_m = std::max(max_m, m);
    }
    if (total > static_cast<std::size_t>(INT_MAX))
        return fail(CC_COLL_ERR_COUNT_OVERFLOW, "cc_coll_allreduce (pipelined): %zu coded bytes exceed INT_MAX", total);
    W *g = nullptr;
    Residual *res = nullptr;
    CC_COLL_TRY((acquire_input<HostExec, W>(x, p, a.recv, n, a.dtype, true, &g, &res)));
    const bool error = res != nullptr;
    unsigned char *blocks = nullptr;
    W *sum = nullptr;  // max_m: a segment's sum, max_m: a padded block's copy, then every segment's own_error
    CC_COLL_TRY(x.template buffer<unsigned char>(Buf::SendBytes, total, &blocks));
    CC_COLL_TRY(x.template buffer<W>(Buf::Other, 2 * max_m + (error ? errors : 0), &sum));
    for (std::size_t s = 0, at = 0, e = 2 * max_m; s < segments; at += (2 * P + 1) * seg[s].S, e += seg[s].m, ++s) {
        seg[s].blocks = blocks + at;
        if (error) seg[s].own_error = sum + e;
    }

    // Requests in flight; a failure below completes them before returning,
    // since MPI still reads and writes the blocks until they finish.
    std::vector<MPI_Request> reqs(2 * segments, MPI_REQUEST_NULL);  // segment s: alltoall 2s, allgather 2s + 1
    RequestsDrain drain(&reqs, nullptr, "MPI_Ialltoall / MPI_Iallgather");
    double compute = 0.0;
    const auto owner = [&](std::size_t s) -> cc_coll_status_t {
        Segment &sg = seg[s];
        CC_COLL_TRY(wait_request(&reqs[2 * s], "MPI_Ialltoall"));
        const double c0 = now_seconds();
        unsigned char *mine = sg.blocks + 2 * P * sg.S;
        CC_COLL_TRY((codec_owner_stage<C, HostExec, W>(x, p, sg.blocks + P * sg.S, sg.n, P, sg.m, sg.own_error, sum,
                                                       mine)));
        compute += now_seconds() - c0;
        return start_allgather_bytes(mine, sg.S, sg.blocks + P * sg.S, comm.mpi(), &reqs[2 * s + 1]);
    };
    InputGuard<HostExec, W> guard(x);
    CodecUndo<C, HostExec, W> undo(x, p, sum);  // runs before the guard's undo
    const auto *send = static_cast<const unsigned char *>(a.send);
    for (std::size_t s = 0; s < segments; ++s) {
        Segment &sg = seg[s];
        const double c0 = now_seconds();
        CC_COLL_TRY(x.template load_input<W>(send + sg.lo * es, a.dtype, sg.n, g + sg.lo, error));
        guard.add(g + sg.lo, res, send + sg.lo * es, sg.n, a.dtype);
        CC_COLL_TRY((codec_encode_stage<C, HostExec, W>(x, p, g + sg.lo, sg.n, P, sg.m, sg.blocks, error, sum + max_m)));
        if (error) undo.add(g + sg.lo, sg.n, P, sg.m, sg.blocks);
        compute += now_seconds() - c0;
        CC_COLL_TRY(start_alltoall_bytes(sg.blocks, sg.S, sg.blocks + P * sg.S, comm.mpi(), &reqs[2 * s]));
        if (s > 0) CC_COLL_TRY(owner(s - 1));
        test_requests(reqs.data(), 2 * s + 1);
    }
    CC_COLL_TRY(owner(segments - 1));
    for (MPI_Request &q : reqs) CC_COLL_TRY(wait_request(&q, "MPI_Ialltoall / MPI_Iallgather"));
    const double t1 = now_seconds();
    // From here the call cannot fail on data.
    undo.release();
    guard.release();
    for (const Segment &sg : seg)
        if (error) CC_COLL_TRY((codec_owner_error<HostExec, W>(x, g + sg.lo, sg.n, sg.m, sg.own_error)));
    for (const Segment &sg : seg)
        CC_COLL_TRY((codec_decode_stage<C, HostExec>(x, p, sg.blocks + P * sg.S, sg.n, P, sg.m, a.dtype,
                                                     static_cast<unsigned char *>(a.recv) + sg.lo * es)));
    if (a.op == CC_COLL_AVG) CC_COLL_TRY(x.divide(a.recv, n, a.dtype, comm.size()));
    stats->time_compress += compute;
    stats->time_communicate += (t1 - t0) - compute;
    stats->time_decompress += now_seconds() - t1;
    for (const Segment &sg : seg) stats->bytes_wire += 2 * (P - 1) * sg.S;
    return CC_COLL_OK;
}

template <typename C, typename X, typename W>
cc_coll_status_t codec_allreduce(X &x, const AllreduceArgs &a, const CallParams &p, StatsSnapshot *stats)
{
    if constexpr (!X::kDevice) {
        const std::size_t segments = codec_segments(a.count, a.dtype, p, x.comm().size());
        if (segments > 0) return codec_allreduce_pipelined<C, W>(x, a, p, segments, stats);
    }
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
    CodecUndo<C, HostExec, W> undo(x, p, sum);  // runs before the guard's undo
    if constexpr (C::kElementwise)
        CC_COLL_TRY((C::template encode<W>(x, p, g, n, blocks, res != nullptr ? g : nullptr, false)));
    else
        CC_COLL_TRY((encode_blocks<C, HostExec, W>(x, p, g, n, P, m, blocks, res != nullptr, nullptr)));
    if (res != nullptr) undo.add(g, n, P, m, blocks);
    const double t1 = now_seconds();
    CC_COLL_TRY(x.transport().alltoall_bytes(blocks, S, received, comm.mpi()));
    const double t2 = now_seconds();
    undo.release();
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
