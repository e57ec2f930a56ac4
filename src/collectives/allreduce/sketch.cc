// Method SKETCH: the homomorphic count-sketch allreduce of docs/algorithms.md
// section 3, on host and device buffers alike.
//
//  1. g' = g + e; each rank keeps its top k (or the threshold ladder's pick).
//  2. Global support: the support message (wire/sketch_support.hpp: a bitmap,
//     1 bit per element, plus one flag byte "this rank has NaN/Inf")
//     combined with MPI_Allreduce(MPI_BOR, MPI_UINT8_T); its tail checked
//     (sketch_support::check_tail: no bit past n, a flag of 0 or 1), and the
//     ranks compare what they found, a digest of the message, the rows and
//     the flag in the outcome exchange (collectives/common/outcome.hpp): a
//     fault on any rank is CC_COLL_ERR_MISMATCH on every rank. Or, with
//     the coded support (CC_COLL_SKETCH_SUPPORT, host buffers): the kept
//     indices gap-coded, gathered with MPI_Allgather, checked and ORed into
//     the same message on every rank.
//  3. Sketch rows sized from the global support so that its fullest column
//     stays under the load factor; every rank computes the same layout.
//  4. Each rank sketches its kept values; one MPI_Allreduce(MPI_SUM) of the
//     sketch in the work type (binary64 for F64, binary32 otherwise).
//  5. A second outcome exchange compares the digests of the summed sketch;
//     then the peeling decode over the global support (identical on every
//     rank), and median-of-3 estimates for anything that did not peel.
//  6. Residual: zero at the kept elements (sent exactly in the work type).
//
// Dense fallback, from values every rank shares after step 2: when a rank
// has NaN/Inf (a sketch cell cannot carry them without poisoning its
// neighbours), or when the sketch plus bitmap would outweigh the buffer.
#include <algorithm>
#include <climits>
#include <cstring>
#include <vector>

#include "collectives/allreduce/allreduce.hpp"
#include "compressors/sketch/sketch_backend.hpp"
#include "collectives/common/outcome.hpp"
#include "collectives/common/steps.hpp"
#include "compressors/sketch/count_sketch.hpp"
#include "core/dtype.hpp"
#include "core/error.hpp"
#include "exec/exec.hpp"
#include "transport/mpi_transport.hpp"
#include "wire/sketch_support.hpp"

namespace cc_coll::detail {

namespace {

// Step 2 with the coded support (host buffers, CC_COLL_SKETCH_SUPPORT; the
// message in wire/sketch_support.hpp): this rank's kept indices gap-coded,
// every rank's size by MPI_Allgather (all see the same sizes, so a bad one
// is an error on every rank at once), the messages by MPI_Allgather at the
// largest size, zero-padded. Every message is checked, a fault traced to its
// sender into the outcome; then the messages are ORed into `support`, which
// then holds what the bitmap's MPI_Allreduce(MPI_BOR) would have left.
template <typename W>
cc_coll_status_t coded_support(HostExec &x, const W *g, std::size_t n, const std::uint32_t *idx, std::size_t kept,
                               unsigned char *support, Outcome *outcome, StatsSnapshot *stats)
{
    Comm &comm = x.comm();
    const std::size_t P = static_cast<std::size_t>(comm.size());
    const double t0 = now_seconds();
    unsigned char *own = nullptr;
    CC_COLL_TRY(x.buffer<unsigned char>(Buf::Extra0, sketch_support::coded_capacity(kept), &own));
    std::memset(own, 0, sketch_support::coded_capacity(kept));
    const std::uint64_t bytes = sketch_support::encode_coded(idx, kept, n, host::any_nonfinite(g, n), own);
    const double t1 = now_seconds();
    stats->time_compress += t1 - t0;
    std::vector<std::uint64_t> sizes(P);
    CC_COLL_TRY(allgather_bytes(&bytes, sizeof bytes, sizes.data(), comm.mpi()));
    std::uint64_t record = 0;
    const std::uint64_t largest = sketch_support::coded_capacity(n);
    for (std::size_t r = 0; r < P; ++r) {
        if (sizes[r] < sketch_support::kCodedHeaderBytes || sizes[r] % 8 != 0 || sizes[r] > largest)
            return fail(CC_COLL_ERR_MISMATCH,
                        "cc_coll_allreduce (sketch): rank %zu announced a coded support message of %llu bytes; it "
                        "takes a multiple of 8 from %zu to %llu for count %zu",
                        r, static_cast<unsigned long long>(sizes[r]), sketch_support::kCodedHeaderBytes,
                        static_cast<unsigned long long>(largest), n);
        record = std::max(record, sizes[r]);
    }
    if (record > static_cast<std::uint64_t>(INT_MAX) / P)
        return fail(CC_COLL_ERR_COUNT_OVERFLOW,
                    "cc_coll_allreduce (sketch): %zu coded support messages of %llu bytes exceed INT_MAX; set "
                    "CC_COLL_SKETCH_SUPPORT=bitmap",
                    P, static_cast<unsigned long long>(record));
    CC_COLL_TRY(x.buffer<unsigned char>(Buf::Extra0, record, &own));  // keeps the message, pads it
    std::memset(own + bytes, 0, record - bytes);
    unsigned char *gathered = nullptr;
    CC_COLL_TRY(x.buffer<unsigned char>(Buf::RecvBytes, P * record, &gathered));
    CC_COLL_TRY(allgather_bytes(own, record, gathered, comm.mpi()));
    const double t2 = now_seconds();
    stats->time_communicate += t2 - t1;
    stats->bytes_wire += record + sizeof bytes;
    for (std::size_t r = 0; r < P; ++r) {
        sketch_support::Fault f;
        if (!sketch_support::check_coded(gathered + r * record, record, n, r, &f)) {
            outcome->fault(fail(CC_COLL_ERR_MISMATCH, "%s: %s", outcome->name(), sketch_support::describe(f).c_str()),
                           FaultKind::Payload, static_cast<std::uint32_t>(1 + r));
            return CC_COLL_OK;
        }
    }
    std::memset(support, 0, sketch_support::buffer_bytes(n));
    bool nonfinite = false;
    for (std::size_t r = 0; r < P; ++r) nonfinite = sketch_support::or_coded(gathered + r * record, support) || nonfinite;
    support[sketch_support::flag_offset(n)] = nonfinite ? 1 : 0;
    stats->time_decompress += now_seconds() - t2;
    return CC_COLL_OK;
}

template <typename X, typename W>
cc_coll_status_t sketch_allreduce(X &x, const AllreduceArgs &a, const CallParams &p, StatsSnapshot *stats)
{
    Comm &comm = x.comm();
    const std::size_t n = a.count;
    const std::size_t es = dtype_size(a.dtype);
    const double t0 = now_seconds();

    W *g = nullptr;
    Residual *res = nullptr;
    CC_COLL_TRY((load_input<X, W>(x, p, a.send, a.recv, n, a.dtype, true, &g, &res)));
    InputGuard<X, W> guard(x);
    guard.add(g, res, a.send, n, a.dtype);

    // 1-2. Select, then the global support and the non-finite flag.
    std::uint32_t *idx = nullptr;
    std::size_t kept = 0;
    CC_COLL_TRY(sketch_sparsify<W>(x, g, n, p, &idx, &kept));
    const std::size_t msg_bytes = sketch_support::message_bytes(n);
    unsigned char *support = nullptr;
    CC_COLL_TRY(x.template buffer<unsigned char>(Buf::SendBytes, sketch_support::buffer_bytes(n), &support));
    // The OR-ed message is the same on every rank, so every rank reaches the
    // same verdict on its tail (bits past n, the flag byte) and the same
    // layout; the outcome exchange checks that (a digest of the message) and
    // carries what each rank found, so that a corrupted copy on one rank is
    // an error on every rank and no rank sums a sketch of another size. A
    // device receiver checks a host copy. The coded support (host buffers)
    // builds the same message from the gathered indices, its checks' faults
    // in the same outcome.
    Outcome outcome(comm, "cc_coll_allreduce (sketch)");
    bool coded = false;
    if constexpr (!X::kDevice) coded = sketch_support_coded(n, comm.size(), p);
    if (coded) {
        stats->time_compress += now_seconds() - t0;
        if constexpr (!X::kDevice) CC_COLL_TRY(coded_support<W>(x, g, n, idx, kept, support, &outcome, stats));
    } else {
        CC_COLL_TRY(sketch_support_message<W>(x, g, n, idx, kept, support));
        CC_COLL_TRY(x.sync());
        const double t1 = now_seconds();
        stats->time_compress += t1 - t0;
        const cc_coll_status_t st = x.transport().allreduce_bor(support, msg_bytes, comm.mpi());
        stats->time_communicate += now_seconds() - t1;
        stats->bytes_wire += msg_bytes;
        if (st != CC_COLL_OK) return st;
    }

    sketch::Layout layout;
    layout.n = n;
    layout.seed = p.seed;
    bool nonfinite = false;
    std::uint64_t digest = 0;
    const unsigned char *tail = nullptr;
    std::size_t tail_stride = 0;
    if (outcome.ok() && outcome.check(x.read_records(support + sketch_support::tail_offset(n), 1,
                                                     sketch_support::kTailBytes, sketch_support::kTailBytes, &tail,
                                                     &tail_stride))) {
        sketch_support::Fault fault;
        if (!sketch_support::check_tail(tail, n, &fault))
            outcome.fault(fail(CC_COLL_ERR_MISMATCH, "%s: %s", outcome.name(), sketch_support::describe(fault).c_str()),
                      FaultKind::Support);
        else
            outcome.check(sketch_rows(x, support, n, p.load_factor, &layout.m, &nonfinite));
    }
    if (outcome.ok()) outcome.check(digest_of(x, support, msg_bytes, &digest));
    outcome.same(digest, "OR-ed SKETCH supports");
    const int rows = outcome.max(layout.m);
    const int flagged = outcome.max(nonfinite ? 1 : 0);
    CC_COLL_TRY(outcome.exchange());
    layout.m = static_cast<std::uint32_t>(outcome.max_of(rows));
    nonfinite = outcome.max_of(flagged) != 0;

    // 3. Dense when the sketch does not pay (the bitmap's bytes, whichever
    //    support went, so that the choice does not depend on the data).
    if (nonfinite || layout.cells() * sizeof(W) + msg_bytes > n * es) {
        guard.release();
        return dense_allreduce<X, W>(x, a, g, res != nullptr, stats);
    }

    // 4. Sketch this rank's kept values and sum the sketches.
    const double t2 = now_seconds();
    W *cells = nullptr;
    CC_COLL_TRY(x.template buffer<W>(Buf::Other, layout.cells(), &cells));
    CC_COLL_TRY(x.zero(cells, layout.cells() * sizeof(W)));
    CC_COLL_TRY(sketch_encode<W>(x, layout, g, idx, kept, cells));
    CC_COLL_TRY(x.sync());
    const double t3 = now_seconds();
    stats->time_compress += t3 - t2;
    CC_COLL_TRY(x.transport().allreduce_sum(cells, cells, layout.cells(), dtype_of_work<W>(), comm.mpi()));
    const double t4 = now_seconds();
    stats->time_communicate += t4 - t3;
    stats->bytes_wire += layout.cells() * sizeof(W);
    // Every rank holds the same summed sketch: its digest goes through a
    // second outcome exchange before anything is written.
    std::uint64_t cells_digest = 0;
    outcome.check(digest_of(x, cells, layout.cells() * sizeof(W), &cells_digest));
    outcome.same(cells_digest, "summed SKETCH sketches");
    CC_COLL_TRY(outcome.exchange());
    // 6. The kept values went exactly: the residual is zero there. Only now,
    //    so that a failed sum leaves the residual as it was.
    guard.release();
    if (res != nullptr) CC_COLL_TRY(x.template zero_at<W>(g, idx, kept));

    // 5. Decode into a work buffer, then round to the dtype.
    W *out = g;  // without EF, g' is no longer needed
    if (res != nullptr) CC_COLL_TRY(x.template buffer<W>(Buf::Work, n, &out));
    sketch::DecodeInfo info;
    CC_COLL_TRY(sketch_decode<W>(x, layout, support, cells, out, &info));
    CC_COLL_TRY(x.template store<W>(out, n, a.dtype, a.recv));
    if (a.op == CC_COLL_AVG) CC_COLL_TRY(x.divide(a.recv, n, a.dtype, comm.size()));
    CC_COLL_TRY(x.sync());
    stats->sketch_elements += info.support;
    stats->sketch_peeled += info.peeled;
    stats->time_decompress += now_seconds() - t4;
    return CC_COLL_OK;
}

}  // namespace

cc_coll_status_t allreduce_sketch(Comm &comm, const AllreduceArgs &args, const CallParams &params,
                                  StatsSnapshot *stats)
{
    if (args.count == 0) return CC_COLL_OK;
    return with_exec(comm, args.on_device, args.stream, [&](auto &x) {
        using X = std::remove_reference_t<decltype(x)>;
        return with_work_type(args.dtype, [&](auto w) {
            return sketch_allreduce<X, decltype(w)>(x, args, params, stats);
        });
    });
}

}  // namespace cc_coll::detail
