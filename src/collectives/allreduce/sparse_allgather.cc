// Method TOPK: the sparse allreduce of docs/algorithms.md section 2, on host
// and device buffers alike.
//
//  1. g' = g + e (e: this tensor's residual; without EF, g' = g).
//  2. Select the k = ceil(density n) largest |g'| exactly; encode
//     (index, value) pairs in the call's dtype (wire/topk_payload.hpp).
//  3. One MPI_Allgather of the fixed-size payloads (O(k P) bytes per rank).
//  4. Every rank checks every payload's header and indices against its own
//     call (topk::check_payloads: a malformed payload is
//     CC_COLL_ERR_MISMATCH on every rank, recvbuf and the residual
//     untouched), then zeroes recvbuf and scatter-adds the P payloads in
//     rank order, so all ranks get bit-identical results; AVG divides by P.
//  5. e = g' - transmitted at the kept indices, g' elsewhere.
//
// Dense fallback, decided from values identical on every rank: when
// P x payload > n x element size (the pairs would outweigh the buffer), or
// when any rank's header says its non-finite elements did not fit in k, the
// call allreduces g' densely and the residual keeps only the rounding to the
// dtype. Non-finite elements rank above all finite ones in the selection, so
// otherwise they are all sent and propagate as MPI_SUM would; they are never
// kept in a residual.
#include <climits>

#include "collectives/allreduce/allreduce.hpp"
#include "collectives/common/steps.hpp"
#include "compressors/topk/topk_select.hpp"
#include "core/dtype.hpp"
#include "core/error.hpp"
#include "exec/exec.hpp"
#include "wire/topk_payload.hpp"

namespace cc_coll::detail {

namespace {

template <typename X, typename W>
cc_coll_status_t sparse_allgather(X &x, const AllreduceArgs &a, const CallParams &p, StatsSnapshot *stats)
{
    Comm &comm = x.comm();
    const std::size_t n = a.count;
    const std::size_t es = dtype_size(a.dtype);
    const std::size_t P = static_cast<std::size_t>(comm.size());
    const double t0 = now_seconds();

    const std::size_t k = topk::k_for(p.density, n);
    const std::size_t bytes = topk::payload_bytes(k, a.dtype);
    const bool dense_only = topk_allreduce_dense(n, a.dtype, p.density, comm.size());

    // 1. g' = g + e, and its top k. A dense F32/F64 call leaves nothing behind, so it uses
    //    an existing residual but never creates one (no memory, nothing
    //    counted against the cap).
    const bool lossless_dense = dense_only && (a.dtype == CC_COLL_F32 || a.dtype == CC_COLL_F64);
    W *g = nullptr;
    Residual *res = nullptr;
    std::uint32_t *idx = nullptr;
    if (!dense_only) CC_COLL_TRY(x.template buffer<std::uint32_t>(Buf::Indices, k, &idx));
    // Selected in the same pass unless the call is dense.
    CC_COLL_TRY((load_input<X, W>(x, p, a.send, a.recv, n, a.dtype, !lossless_dense, &g, &res, dense_only ? 0 : k,
                                  idx)));
    if (dense_only) {
        stats->time_compress += now_seconds() - t0;
        return dense_allreduce<X, W>(x, a, g, res != nullptr, stats);
    }
    // From here until the residual's update, a failure leaves the residual
    // as it was (recvbuf, which may be the input, is untouched until then).
    InputGuard<X, W> guard(x);
    guard.add(g, res, a.send, n, a.dtype);

    // 2. Encode (the selection ran with step 1).
    W *sent = nullptr;
    unsigned char *payload = nullptr, *gathered = nullptr;
    CC_COLL_TRY(x.template buffer<W>(Buf::Sent, k, &sent));
    CC_COLL_TRY(x.template buffer<unsigned char>(Buf::SendBytes, bytes, &payload));
    CC_COLL_TRY(x.template buffer<unsigned char>(Buf::RecvBytes, bytes * P, &gathered));
    CC_COLL_TRY(x.template topk_encode<W>(g, n, idx, k, a.dtype, payload, sent));
    CC_COLL_TRY(x.sync());
    const double t1 = now_seconds();
    stats->time_compress += t1 - t0;

    // 3. Gather every rank's payload.
    const cc_coll_status_t st = x.transport().allgather_bytes(payload, bytes, gathered, comm.mpi());
    const double t2 = now_seconds();
    stats->time_communicate += t2 - t1;
    if (st != CC_COLL_OK) return st;

    // Every field the decode uses is checked before it writes (a peer's
    // payload is untrusted input): every header (n, k, flags), then, unless
    // a sender flagged overflow, every payload's indices. A device receiver
    // checks a host copy of the headers and indices. Every rank holds the
    // same gathered payloads, so every rank reaches the same verdict.
    const unsigned char *records = nullptr;
    std::size_t stride = 0;
    CC_COLL_TRY(x.read_records(gathered, P, bytes, topk::checked_bytes(k), &records, &stride));
    topk::Fault fault;
    const topk::Verdict verdict = topk::check_payloads(records, P, stride, n, k, &fault);
    if (verdict == topk::Verdict::Reject)
        return fail(CC_COLL_ERR_MISMATCH, "cc_coll_allreduce (topk): %s", topk::describe(fault, "count").c_str());
    guard.release();
    if (verdict == topk::Verdict::Dense) {
        stats->bytes_wire += bytes;
        return dense_allreduce<X, W>(x, a, g, res != nullptr, stats);
    }

    // 4. Decode: scatter-add in rank order.
    CC_COLL_TRY(x.zero(a.recv, n * es));
    for (std::size_t r = 0; r < P; ++r) CC_COLL_TRY(x.topk_scatter_add(gathered + r * bytes, k, a.dtype, a.recv));
    if (a.op == CC_COLL_AVG) CC_COLL_TRY(x.divide(a.recv, n, a.dtype, comm.size()));

    // 5. Residual: what was not transmitted.
    if (res != nullptr) CC_COLL_TRY(x.template keep_unsent<W>(g, idx, sent, k));
    CC_COLL_TRY(x.sync());
    stats->time_decompress += now_seconds() - t2;
    stats->bytes_wire += bytes;
    return CC_COLL_OK;
}

}  // namespace

bool topk_allreduce_dense(std::size_t n, cc_coll_dtype_t dtype, double density, int ranks)
{
    const std::size_t bytes = topk::payload_bytes(topk::k_for(density, n), dtype);
    const std::size_t P = static_cast<std::size_t>(ranks);
    return bytes * P > n * dtype_size(dtype) || bytes * P > static_cast<std::size_t>(INT_MAX);
}

cc_coll_status_t allreduce_sparse_allgather(Comm &comm, const AllreduceArgs &args, const CallParams &params,
                                            StatsSnapshot *stats)
{
    if (args.count == 0) return CC_COLL_OK;
    return with_exec(comm, args.on_device, args.stream, [&](auto &x) {
        using X = std::remove_reference_t<decltype(x)>;
        return with_work_type(args.dtype, [&](auto w) {
            return sparse_allgather<X, decltype(w)>(x, args, params, stats);
        });
    });
}

}  // namespace cc_coll::detail
