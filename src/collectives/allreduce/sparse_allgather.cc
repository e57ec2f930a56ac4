// Method TOPK: the sparse allreduce of docs/algorithms.md section 2, on host
// and device buffers alike.
//
//  1. g' = g + e (e: this tensor's residual; without EF, g' = g).
//  2. Select the k = ceil(density n) largest |g'| exactly; encode
//     (index, value) pairs in the call's dtype (wire/topk_payload.hpp).
//  3. One MPI_Allgather of the fixed-size payloads (O(k P) bytes per rank).
//     Coded payloads (CC_COLL_TOPK_VALUE_BITS, CC_COLL_TOPK_INDEX_CODING;
//     host buffers; chunked: per chunk) vary in size: one MPI_Allgather of the sizes
//     first, then every payload padded to the largest.
//  4. Every rank checks every payload's header and indices against its own
//     call (topk::check_payloads), and the ranks compare what they found
//     and a digest of the payloads in the outcome exchange
//     (collectives/common/outcome.hpp): a malformed payload on any rank, or
//     payloads that differ between ranks, is CC_COLL_ERR_MISMATCH on every
//     rank, recvbuf and the residual untouched. Then every rank zeroes
//     recvbuf and scatter-adds the P payloads in rank order, so all ranks
//     get bit-identical results; AVG divides by P.
//  5. e = g' - transmitted at the kept indices, g' elsewhere.
//
// Dense fallback, decided from values identical on every rank: when
// P x payload > n x element size (the pairs would outweigh the buffer), or
// when any rank's header says its non-finite elements did not fit in k (the
// outcome exchange's maximum of that verdict), the
// call allreduces g' densely and the residual keeps only the rounding to the
// dtype. Non-finite elements rank above all finite ones in the selection, so
// otherwise they are all sent and propagate as MPI_SUM would; they are never
// kept in a residual.
#include <algorithm>
#include <climits>
#include <functional>
#include <vector>

#include "collectives/allreduce/allreduce.hpp"
#include "compressors/topk/topk_backend.hpp"
#include "collectives/common/outcome.hpp"
#include "collectives/common/steps.hpp"
#include "compressors/topk/topk_select.hpp"
#include "core/dtype.hpp"
#include "core/error.hpp"
#include "exec/exec.hpp"
#include "transport/mpi_transport.hpp"
#include "wire/topk_payload.hpp"

namespace cc_coll::detail {

namespace {

// The chunks of a pipelined call (CC_COLL_PIPELINE_BYTES): 0 when the call
// runs unchunked (off, one chunk, one rank, or a chunk that TOPK would send
// densely). A function of agreed values only, so every rank decides alike.
std::size_t pipeline_chunks(std::size_t n, cc_coll_dtype_t dtype, const CallParams &p, int ranks)
{
    if (p.pipeline_bytes == 0 || ranks < 2) return 0;
    const std::size_t bytes = n * dtype_size(dtype);
    const std::size_t chunks = static_cast<std::size_t>((bytes + p.pipeline_bytes - 1) / p.pipeline_bytes);
    if (chunks < 2) return 0;
    for (std::size_t c = 0; c < chunks; ++c) {
        std::size_t lo = 0, hi = 0;
        part_bounds(n, chunks, c, &lo, &hi);
        if (topk_allreduce_dense(hi - lo, dtype, p.density, ranks)) return 0;
    }
    return chunks;
}

// Checks P gathered payloads of `bytes` bytes each (topk::check_payloads)
// and records what this rank found in `out`: a rejected payload as its
// fault, and the digest of the checked bytes as a value every rank must
// hold alike. Every rank adds the same words to `out`, whatever it found.
// A coded format (fmt) is checked whole, in place (host buffers only).
template <typename X>
topk::Verdict check_gathered(X &x, Outcome &out, const unsigned char *gathered, std::size_t P, std::size_t bytes,
                             std::size_t n, std::size_t k, const char *count_name, const topk::Format &fmt,
                             cc_coll_dtype_t dtype)
{
    const unsigned char *records = nullptr;
    std::size_t stride = 0;
    topk::Verdict verdict = topk::Verdict::Reject;
    std::uint64_t digest = 0;
    const std::size_t record = fmt.coded ? bytes : topk::checked_bytes(k);
    if (out.check(x.read_records(gathered, P, bytes, record, &records, &stride))) {
        topk::Fault fault;
        verdict = topk::check_payloads(records, P, stride, n, k, &fault, fmt, dtype);
        if (verdict == topk::Verdict::Reject)
            out.fault(fail(CC_COLL_ERR_MISMATCH, "%s: %s", out.name(), topk::describe(fault, count_name).c_str()),
                      FaultKind::Payload, static_cast<std::uint32_t>(1 + fault.sender));
        digest = digest_bytes(records, P * stride);
    }
    out.same(digest, "gathered TOPK payloads");
    return verdict;
}

// The allgather algorithm in chunks (docs/algorithms.md 2.7): chunk c gets
// its own g' = g + e and top k_c, its own payload and its own
// MPI_Iallgather, started as soon as it is encoded; the next chunk's pass
// tests the messages in flight now and then, so that MPI moves them while
// it computes. Then, as unchunked: every payload checked, scatter-added in
// chunk and rank order, the residual updated chunk by chunk.
template <typename W>
cc_coll_status_t sparse_allgather_pipelined(HostExec &x, const AllreduceArgs &a, const CallParams &p,
                                            std::size_t chunks, StatsSnapshot *stats)
{
    Comm &comm = x.comm();
    const std::size_t n = a.count, es = dtype_size(a.dtype), P = static_cast<std::size_t>(comm.size());
    const double t0 = now_seconds();
    const topk::Format fmt = topk_format(p);
    // bytes[c]: chunk c's room (the payload, or a coded payload's capacity);
    // stride[c]: what each rank sends for it (coded: the largest size).
    std::vector<std::size_t> lo(chunks + 1), k(chunks), bytes(chunks), at_k(chunks + 1, 0), at_b(chunks + 1, 0);
    for (std::size_t c = 0; c < chunks; ++c) {
        std::size_t b = 0, e = 0;
        part_bounds(n, chunks, c, &b, &e);
        lo[c] = b;
        lo[c + 1] = e;
        k[c] = topk::k_for(p.density, e - b);
        bytes[c] = fmt.coded ? topk::coded_capacity(k[c], a.dtype, fmt) : topk::payload_bytes(k[c], a.dtype);
        at_k[c + 1] = at_k[c] + k[c];
        at_b[c + 1] = at_b[c] + bytes[c];
    }
    std::vector<std::size_t> stride(bytes);
    if (at_b[chunks] * P > static_cast<std::size_t>(INT_MAX))
        return fail(CC_COLL_ERR_COUNT_OVERFLOW, "cc_coll_allreduce (topk, pipelined): %zu gathered bytes exceed INT_MAX",
                    at_b[chunks] * P);

    // The residual (created by this call when absent), or the work buffer;
    // each chunk loads its part below.
    Residual *res = nullptr;
    W *g = nullptr;
    CC_COLL_TRY((acquire_input<HostExec, W>(x, p, a.key(), n, a.dtype, true, &g, &res)));
    std::uint32_t *idx = nullptr;
    W *sent = nullptr;
    unsigned char *payload = nullptr, *gathered = nullptr;
    CC_COLL_TRY(x.template buffer<std::uint32_t>(Buf::Indices, at_k[chunks], &idx));
    CC_COLL_TRY(x.template buffer<W>(Buf::Sent, at_k[chunks], &sent));
    CC_COLL_TRY(x.template buffer<unsigned char>(Buf::SendBytes, at_b[chunks], &payload));
    CC_COLL_TRY(x.template buffer<unsigned char>(Buf::RecvBytes, at_b[chunks] * P, &gathered));

    // Requests in flight; a failure below completes them before returning,
    // since MPI still writes into the gathered buffer (and the sizes) until
    // they finish. Coded chunks first gather their sizes (size_reqs); chunk
    // c's payloads start once chunk c + 1 is encoded (or after the last),
    // waiting for c's sizes, which were in flight meanwhile: an order that
    // does not depend on timing, the same on every rank, as MPI requires of
    // collectives.
    std::vector<MPI_Request> reqs(chunks, MPI_REQUEST_NULL), size_reqs(chunks, MPI_REQUEST_NULL);
    std::vector<std::uint64_t> own(chunks, 0), sizes(fmt.coded ? chunks * P : 0);
    RequestsDrain drain(&size_reqs, &reqs, "MPI_Iallgather");
    std::size_t started = 0, encoded = 0;
    // Coded: chunk c's sizes, checked (every rank sees the same, so every
    // rank stops at the same chunk), then its payload exchange.
    const auto start_coded = [&](std::size_t c) -> cc_coll_status_t {
        CC_COLL_TRY(wait_request(&size_reqs[c], "MPI_Iallgather"));
        stride[c] = 0;
        for (std::size_t r = 0; r < P; ++r) {
            const std::uint64_t b = sizes[c * P + r];
            if (b > bytes[c] || b % 8 != 0)
                return fail(CC_COLL_ERR_MISMATCH,
                            "cc_coll_allreduce (topk, pipelined): chunk %zu: rank %zu announced a coded payload of "
                            "%llu bytes; a payload of k %zu pairs takes at most %zu, in multiples of 8 (malformed "
                            "size)",
                            c, r, static_cast<unsigned long long>(b), k[c], bytes[c]);
            stride[c] = std::max<std::size_t>(stride[c], static_cast<std::size_t>(b));
        }
        CC_COLL_TRY(start_allgather_bytes(payload + at_b[c], stride[c], gathered + at_b[c] * P, comm.mpi(), &reqs[c]));
        started = c + 1;
        return CC_COLL_OK;
    };
    const std::function<void()> poll = [&] {
        test_requests(size_reqs.data(), encoded);
        test_requests(reqs.data(), started);
    };
    InputGuard<HostExec, W> guard(x);
    const auto *send = static_cast<const unsigned char *>(a.send);
    for (std::size_t c = 0; c < chunks; ++c) {
        const std::size_t nc = lo[c + 1] - lo[c];
        CC_COLL_TRY(topk_load_select<W>(x, send + lo[c] * es, a.dtype, nc, g + lo[c], res != nullptr, k[c],
                                              idx + at_k[c], &poll));
        guard.add(g + lo[c], res, send + lo[c] * es, nc, a.dtype);
        if (fmt.coded) {
            std::size_t size = 0;
            CC_COLL_TRY(topk_encode_coded<W>(x, g + lo[c], nc, idx + at_k[c], k[c], a.dtype, fmt, payload + at_b[c],
                                             sent + at_k[c], &size));
            if (c > 0) CC_COLL_TRY(start_coded(c - 1));
            own[c] = size;
            CC_COLL_TRY(start_allgather_bytes(&own[c], sizeof own[c], sizes.data() + c * P, comm.mpi(),
                                              &size_reqs[c]));
            encoded = c + 1;
            continue;
        }
        CC_COLL_TRY(topk_encode<W>(x, g + lo[c], nc, idx + at_k[c], k[c], a.dtype, payload + at_b[c],
                                              sent + at_k[c]));
        CC_COLL_TRY(start_allgather_bytes(payload + at_b[c], bytes[c], gathered + at_b[c] * P, comm.mpi(), &reqs[c]));
        started = c + 1;
    }
    if (fmt.coded) CC_COLL_TRY(start_coded(chunks - 1));
    const double t1 = now_seconds();
    stats->time_compress += t1 - t0;
    for (MPI_Request &q : reqs) CC_COLL_TRY(wait_request(&q, "MPI_Iallgather"));
    const double t2 = now_seconds();
    stats->time_communicate += t2 - t1;

    // Every chunk's payloads checked before anything is written, one digest
    // and one outcome exchange for the call.
    Outcome outcome(comm, "cc_coll_allreduce (topk, pipelined)");
    bool any_dense = false;
    std::uint64_t digest = 0;
    std::size_t sent_bytes = 0;
    for (std::size_t c = 0; c < chunks; ++c) {
        topk::Fault fault;
        const topk::Verdict v = topk::check_payloads(gathered + at_b[c] * P, P, stride[c], lo[c + 1] - lo[c], k[c],
                                                     &fault, fmt, a.dtype);
        if (v == topk::Verdict::Reject)
            outcome.fault(fail(CC_COLL_ERR_MISMATCH, "%s: chunk %zu of %zu: %s", outcome.name(), c, chunks,
                           topk::describe(fault, "count").c_str()),
                      FaultKind::Payload, static_cast<std::uint32_t>(1 + fault.sender));
        any_dense = any_dense || v == topk::Verdict::Dense;
        sent_bytes += stride[c] + (fmt.coded ? sizeof own[c] : 0);
        // Uncoded: the chunks fill the buffer, one digest of it all (as
        // before); coded: each chunk's used bytes.
        if (fmt.coded) digest = digest * 0x100000001b3ull ^ digest_bytes(gathered + at_b[c] * P, P * stride[c]);
    }
    if (!fmt.coded) digest = digest_bytes(gathered, at_b[chunks] * P);
    outcome.same(digest, "gathered TOPK payloads");
    const int dense = outcome.max(any_dense ? 1 : 0);
    CC_COLL_TRY(outcome.exchange());
    guard.release();
    if (outcome.max_of(dense) != 0) {  // a rank had more non-finite values than a chunk's k: as unchunked, all of it densely
        stats->bytes_wire += sent_bytes;
        return dense_allreduce<HostExec, W>(x, a, g, res != nullptr, stats);
    }
    CC_COLL_TRY(x.zero(a.recv, n * es));
    auto *out = static_cast<unsigned char *>(a.recv);
    for (std::size_t c = 0; c < chunks; ++c)
        for (std::size_t r = 0; r < P; ++r)
            CC_COLL_TRY(topk_scatter_add(x, gathered + at_b[c] * P + r * stride[c], k[c], a.dtype, out + lo[c] * es));
    if (a.op == CC_COLL_AVG) CC_COLL_TRY(x.divide(a.recv, n, a.dtype, comm.size()));
    if (res != nullptr)
        for (std::size_t c = 0; c < chunks; ++c)
            CC_COLL_TRY(x.template keep_unsent<W>(g + lo[c], idx + at_k[c], sent + at_k[c], k[c]));
    stats->time_decompress += now_seconds() - t2;
    stats->bytes_wire += sent_bytes;
    return CC_COLL_OK;
}

template <typename X, typename W>
cc_coll_status_t sparse_allgather(X &x, const AllreduceArgs &a, const CallParams &p, StatsSnapshot *stats)
{
    Comm &comm = x.comm();
    const std::size_t n = a.count;
    const std::size_t es = dtype_size(a.dtype);
    const std::size_t P = static_cast<std::size_t>(comm.size());
    const double t0 = now_seconds();

    const std::size_t k = topk::k_for(p.density, n);
    std::size_t bytes = topk::payload_bytes(k, a.dtype);
    const bool dense_only = topk_allreduce_dense(n, a.dtype, p.density, comm.size());
    const topk::Format fmt = topk_format(p);
    if constexpr (X::kDevice) {
        if (fmt.coded)
            return fail(CC_COLL_ERR_INTERNAL,
                        "cc_coll_allreduce (topk): the coded payload (CC_COLL_TOPK_VALUE_BITS / "
                        "CC_COLL_TOPK_INDEX_CODING) reached the device algorithm; its allreduce of device buffers "
                        "runs through host copies (Method::stages_device)");
    }
    if constexpr (!X::kDevice) {
        const std::size_t chunks = dense_only ? 0 : pipeline_chunks(n, a.dtype, p, comm.size());
        if (chunks > 0) return sparse_allgather_pipelined<W>(x, a, p, chunks, stats);
    }

    // 1. g' = g + e, and its top k. A dense F32/F64 call leaves nothing behind, so it uses
    //    an existing residual but never creates one (no memory, nothing
    //    counted against the cap).
    const bool lossless_dense = dense_only && (a.dtype == CC_COLL_F32 || a.dtype == CC_COLL_F64);
    W *g = nullptr;
    Residual *res = nullptr;
    std::uint32_t *idx = nullptr;
    if (!dense_only) CC_COLL_TRY(x.template buffer<std::uint32_t>(Buf::Indices, k, &idx));
    // Selected in the same pass unless the call is dense.
    CC_COLL_TRY((load_input<X, W>(x, p, a.send, a.key(), n, a.dtype, !lossless_dense, &g, &res, dense_only ? 0 : k,
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
    std::size_t size_bytes = 0;  // the coded format's exchange of sizes
    if constexpr (!X::kDevice) {
        if (fmt.coded) {
            // The coded payload's size depends on the data: the ranks
            // exchange their sizes and every rank sends the largest, zero
            // padded (docs/wire.md, "TOPK allreduce").
            const std::size_t capacity = topk::coded_capacity(k, a.dtype, fmt);
            std::size_t own = 0;
            CC_COLL_TRY(x.template buffer<unsigned char>(Buf::SendBytes, capacity, &payload));
            CC_COLL_TRY(topk_encode_coded<W>(x, g, n, idx, k, a.dtype, fmt, payload, sent, &own));
            std::vector<std::uint64_t> sizes(P);
            const std::uint64_t own64 = own;
            CC_COLL_TRY(x.transport().allgather_bytes(&own64, sizeof own64, sizes.data(), comm.mpi()));
            bytes = 0;
            for (std::size_t r = 0; r < P; ++r) {
                if (sizes[r] > capacity || sizes[r] % 8 != 0)
                    return fail(CC_COLL_ERR_MISMATCH,
                                "cc_coll_allreduce (topk): rank %zu announced a coded payload of %llu bytes; a "
                                "payload of k %zu pairs takes at most %zu, in multiples of 8 (malformed size)",
                                r, static_cast<unsigned long long>(sizes[r]), k, capacity);
                bytes = std::max<std::size_t>(bytes, static_cast<std::size_t>(sizes[r]));
            }
            if (bytes * P > static_cast<std::size_t>(INT_MAX))
                return fail(CC_COLL_ERR_COUNT_OVERFLOW, "cc_coll_allreduce (topk): %zu gathered bytes exceed INT_MAX",
                            bytes * P);
            size_bytes = sizeof own64;
        }
    }
    if (!fmt.coded) {
        CC_COLL_TRY(x.template buffer<unsigned char>(Buf::SendBytes, bytes, &payload));
        CC_COLL_TRY(topk_encode<W>(x, g, n, idx, k, a.dtype, payload, sent));
    }
    CC_COLL_TRY(x.template buffer<unsigned char>(Buf::RecvBytes, bytes * P, &gathered));
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
    // checks a host copy of the headers and indices. What this rank found,
    // the digest of the payloads (every rank gathered the same bytes) and
    // the dense fallback go through the outcome exchange, so that every rank
    // takes the same branch and returns the same status.
    Outcome out(comm, "cc_coll_allreduce (topk)");
    const topk::Verdict verdict = check_gathered(x, out, gathered, P, bytes, n, k, "count", fmt, a.dtype);
    const int dense = out.max(verdict == topk::Verdict::Dense ? 1 : 0);
    CC_COLL_TRY(out.exchange());
    guard.release();
    if (out.max_of(dense) != 0) {
        stats->bytes_wire += bytes + size_bytes;
        return dense_allreduce<X, W>(x, a, g, res != nullptr, stats);
    }

    // 4. Decode: scatter-add in rank order.
    CC_COLL_TRY(x.zero(a.recv, n * es));
    for (std::size_t r = 0; r < P; ++r) CC_COLL_TRY(topk_scatter_add(x, gathered + r * bytes, k, a.dtype, a.recv));
    if (a.op == CC_COLL_AVG) CC_COLL_TRY(x.divide(a.recv, n, a.dtype, comm.size()));

    // 5. Residual: what was not transmitted.
    if (res != nullptr) CC_COLL_TRY(x.template keep_unsent<W>(g, idx, sent, k));
    CC_COLL_TRY(x.sync());
    stats->time_decompress += now_seconds() - t2;
    stats->bytes_wire += bytes + size_bytes;
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
