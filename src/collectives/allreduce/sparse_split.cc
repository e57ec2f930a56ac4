// Method TOPK, split algorithm (docs/algorithms.md section 2.6): a sparse
// reduce-scatter over regions of the index space, a top-k of each reduced
// region by its owner, and an allgather of the regions, so that the bytes a
// rank receives do not grow with the number of ranks (Ok-Topk's scheme).
// The switch-over to dense is the call-level rule of sparse_allgather.cc
// (topk_allreduce_dense): a region's payload never exceeds its k_r pairs.
// Host buffers; device buffers take the allgather algorithm.
//
//  1. g' = g + e; the k largest |g'| as (index, value) pairs, as in
//     sparse_allgather.cc (same selection, values rounded to the dtype).
//  2. One MPI_Alltoall of (count, flags) per destination, then one
//     MPI_Alltoallv of indices and one of values: rank r receives every
//     rank's pairs that fall in its region r. With a coded format
//     (wire/topk_payload.hpp): (count, flags, bytes), then one
//     MPI_Alltoallv of one coded payload per region (n = the region's size,
//     region-local indices), as are the owners' regions in step 4.
//  3. The owner checks them, adds them in sender order into its region (in
//     the work type), keeps the k_r = ceil(density m_r) largest sums of the
//     indices it received, and puts what it drops into its own residual.
//  4. One MPI_Allgather of the kept counts, a fault, the overflow flag and
//     whether the exchange of the pairs failed: every rank learns every
//     rank's, and all fail, or fall back to dense, together. Then one
//     MPI_Allgatherv of the regions' pairs.
//  5. Every rank checks every region's indices; the outcome exchange
//     (collectives/common/outcome.hpp) compares what the ranks found and a
//     digest of the regions; then the owner updates its residual and every
//     rank writes every region into recvbuf; AVG divides by P.
#include <algorithm>
#include <climits>
#include <cstring>
#include <string>
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

struct Region {
    std::size_t lo = 0, n = 0;
};

Region region_of(std::size_t n, std::size_t P, std::size_t r)
{
    const std::size_t base = n / P, rem = n % P;
    return Region{r * base + std::min(r, rem), base + (r < rem ? 1 : 0)};
}

// What each rank tells every other before the pairs move, as uint32 words:
// count (pairs for the receiver's region), flags (topk::kFlagNonFiniteOverflow);
// coded, also the coded payload's bytes (uint64, two words).
constexpr std::size_t kAnnounceWords = 2, kAnnounceWordsCoded = 4;
// After the reduction, what each owner tells every rank: count kept, fault
// (0, or 1 + the sending rank whose pairs were malformed), overflow (1: a
// sender flagged more non-finite values than k, or, coded, the region's sum
// holds one), failed (1: this rank's exchange of the pairs failed); coded,
// also the region's coded bytes (uint64, two words).
constexpr std::size_t kKeptWords = 4, kKeptWordsCoded = 6;
enum : std::size_t { kCount = 0, kFlags = 1, kFault = 1, kOverflow = 2, kFailed = 3 };

// The uint64 at words w and w + 1 of a message.
std::uint64_t get_u64(const std::uint32_t *w) { return std::uint64_t{w[0]} | std::uint64_t{w[1]} << 32; }
void put_u64(std::uint32_t *w, std::uint64_t v)
{
    w[0] = static_cast<std::uint32_t>(v);
    w[1] = static_cast<std::uint32_t>(v >> 32);
}

// Whether b bytes can be a coded payload of c pairs (0 bytes for none).
bool coded_size_ok(std::uint64_t b, std::size_t c, cc_coll_dtype_t dtype, const topk::Format &fmt)
{
    if (c == 0) return b == 0;
    return b >= sizeof(topk::PayloadHeader) + sizeof(topk::CodedSection) && b % 8 == 0 &&
           b <= topk::coded_capacity(c, dtype, fmt);
}

template <typename W>
cc_coll_status_t sparse_split(HostExec &x, const AllreduceArgs &a, const CallParams &p, StatsSnapshot *stats)
{
    Comm &comm = x.comm();
    MPI_Comm mpi = comm.mpi();
    const std::size_t n = a.count;
    const std::size_t es = dtype_size(a.dtype);
    const std::size_t P = static_cast<std::size_t>(comm.size());
    const std::size_t me = static_cast<std::size_t>(comm.rank());
    const double t0 = now_seconds();
    const std::size_t k = topk::k_for(p.density, n);
    const topk::Format fmt = topk_format(p);
    const bool coded = fmt.coded;

    // 1. g' = g + e, select, encode: one payload (wire/topk_payload.hpp
    //    layout: header, indices, values), or, coded, one coded payload per
    //    region (n = its size, region-local indices).
    W *g = nullptr;
    Residual *res = nullptr;
    CC_COLL_TRY((load_input<HostExec, W>(x, p, a.send, a.key(), n, a.dtype, true, &g, &res)));
    InputGuard<HostExec, W> guard(x);
    guard.add(g, res, a.send, n, a.dtype);
    std::uint32_t *idx = nullptr;
    W *sent = nullptr;
    CC_COLL_TRY(x.buffer<std::uint32_t>(Buf::Indices, k, &idx));
    CC_COLL_TRY(x.buffer<W>(Buf::Sent, k, &sent));
    CC_COLL_TRY(topk_select<W>(x, g, n, k, idx));
    // Pairs per region (idx is ascending): region r's are [first[r], first[r + 1]).
    std::vector<std::size_t> first(P + 1, k);
    for (std::size_t r = 0, j = 0; r < P; ++r) {
        const Region reg = region_of(n, P, r);
        first[r] = j;
        while (j < k && idx[j] < reg.lo + reg.n) ++j;
    }
    std::vector<int> sc(P), sd(P), sv(P), svd(P), rc(P), rd(P), rv(P), rvd(P);
    unsigned char *payload = nullptr;
    std::uint32_t own_flags = 0;
    if (!coded) {
        CC_COLL_TRY(x.buffer<unsigned char>(Buf::SendBytes, topk::payload_bytes(k, a.dtype), &payload));
        CC_COLL_TRY(topk_encode<W>(x, g, n, idx, k, a.dtype, payload, sent));
        own_flags = topk::header_of(payload).flags;
        for (std::size_t r = 0; r < P; ++r) {
            const std::size_t c = first[r + 1] - first[r];
            sc[r] = static_cast<int>(c * sizeof(std::uint32_t));
            sd[r] = static_cast<int>(first[r] * sizeof(std::uint32_t));
            sv[r] = static_cast<int>(c * es);
            svd[r] = static_cast<int>(first[r] * es);
        }
    } else {
        std::size_t room = 0;
        for (std::size_t r = 0; r < P; ++r)
            if (first[r + 1] > first[r]) room += topk::coded_capacity(first[r + 1] - first[r], a.dtype, fmt);
        std::uint32_t *local = nullptr;
        CC_COLL_TRY(x.buffer<unsigned char>(Buf::SendBytes, std::max<std::size_t>(room, 1), &payload));
        CC_COLL_TRY(x.buffer<std::uint32_t>(Buf::Extra1, std::max<std::size_t>(k, 1), &local));
        std::memset(payload, 0, room);
        own_flags = topk::nonfinite_overflow<W>(g, n, idx, k);
        for (std::size_t r = 0, at = 0; r < P; ++r) {
            const Region reg = region_of(n, P, r);
            const std::size_t c = first[r + 1] - first[r];
            for (std::size_t j = first[r]; j < first[r + 1]; ++j) local[j] = static_cast<std::uint32_t>(idx[j] - reg.lo);
            const std::size_t b = c == 0 ? 0
                                         : topk::encode_coded<W>(g + reg.lo, reg.n, local + first[r], c, 0, a.dtype,
                                                                 fmt, payload + at, sent + first[r]);
            if (c > 0) own_flags |= topk::header_of(payload + at).flags & topk::kFlagNonFiniteOverflow;
            sc[r] = static_cast<int>(b);
            sd[r] = static_cast<int>(at);
            at += b;
        }
    }
    const std::size_t aw = coded ? kAnnounceWordsCoded : kAnnounceWords;
    std::vector<std::uint32_t> out(P * aw, 0), in(P * aw, 0);
    for (std::size_t r = 0; r < P; ++r) {
        out[r * aw + kCount] = static_cast<std::uint32_t>(first[r + 1] - first[r]);
        out[r * aw + kFlags] = own_flags;
        if (coded) put_u64(&out[r * aw + 2], static_cast<std::uint64_t>(sc[r]));
    }
    const double t1 = now_seconds();
    stats->time_compress += t1 - t0;

    // 2. Counts and flags (coded: and sizes), then the pairs of this rank's
    //    region.
    CC_COLL_TRY(alltoall_bytes(out.data(), aw * sizeof(std::uint32_t), in.data(), mpi));
    const Region mine = region_of(n, P, me);
    const std::size_t limit = std::min(k, mine.n);
    bool overflow = false;
    std::uint32_t fault = 0;
    std::size_t total = 0, total_bytes = 0;
    std::vector<std::size_t> count(P);
    for (std::size_t s = 0; s < P; ++s) {
        const std::uint32_t *w = &in[s * aw];
        overflow = overflow || (w[kFlags] & topk::kFlagNonFiniteOverflow) != 0;
        // What the sender sends, as far as it can be believed: a count above
        // the region (which no rank that agreed on the call announces) is
        // cut, and MPI reports the truncation if the sender did send more.
        const std::size_t c = std::min<std::size_t>(w[kCount], limit);
        const bool bad_size = coded && !coded_size_ok(get_u64(w + 2), c, a.dtype, fmt);
        if (fault == 0 && ((w[kFlags] & ~topk::kFlagNonFiniteOverflow) != 0 || w[kCount] > limit || bad_size))
            fault = static_cast<std::uint32_t>(1 + s);
        count[s] = c;
        if (coded) {
            const std::size_t b = c == 0 ? 0
                                         : static_cast<std::size_t>(std::min<std::uint64_t>(
                                               get_u64(w + 2), topk::coded_capacity(c, a.dtype, fmt)));
            rc[s] = static_cast<int>(b);
            rd[s] = static_cast<int>(total_bytes);
            total_bytes += b;
        } else {
            rc[s] = static_cast<int>(c * sizeof(std::uint32_t));
            rd[s] = static_cast<int>(total * sizeof(std::uint32_t));
            rv[s] = static_cast<int>(c * es);
            rvd[s] = static_cast<int>(total * es);
            total_bytes += c * (4 + es);
        }
        total += c;
    }
    // Every rank goes on to the exchange of the pairs whatever it found (a
    // fault, a sender's overflow flag): the next decision is taken in step 4
    // from what every rank tells every other, so that no rank changes its
    // next MPI call on what it alone received.
    unsigned char *recvd = nullptr;
    CC_COLL_TRY(x.buffer<unsigned char>(Buf::RecvBytes, std::max<std::size_t>(total_bytes, 1), &recvd));
    unsigned char *rvals = recvd + total * sizeof(std::uint32_t);
    std::uint32_t failed = 0;
    if (coded) {
        if (alltoallv_bytes(payload, sc.data(), sd.data(), recvd, rc.data(), rd.data(), mpi) != CC_COLL_OK) failed = 1;
    } else {
        const unsigned char *own_idx = payload + sizeof(topk::PayloadHeader);
        const unsigned char *own_val = own_idx + k * sizeof(std::uint32_t);
        if (alltoallv_bytes(own_idx, sc.data(), sd.data(), recvd, rc.data(), rd.data(), mpi) != CC_COLL_OK) failed = 1;
        if (alltoallv_bytes(own_val, sv.data(), svd.data(), rvals, rv.data(), rvd.data(), mpi) != CC_COLL_OK)
            failed = 1;
    }
    std::string failed_why = failed != 0 ? std::string(last_error()) : std::string();
    const double t2 = now_seconds();
    stats->time_communicate += t2 - t1;

    // 3. Reduce this region: check, add in sender order, mark the support.
    W *acc = nullptr;
    unsigned char *mark = nullptr;
    CC_COLL_TRY(x.buffer<W>(Buf::Extra0, std::max<std::size_t>(mine.n, 1), &acc));
    CC_COLL_TRY(x.buffer<unsigned char>(Buf::Extra2, std::max<std::size_t>(mine.n, 1), &mark));
    std::fill(acc, acc + mine.n, W(0));
    std::memset(mark, 0, mine.n);
    if (coded && fault == 0 && failed == 0 && !overflow) {
        // Each payload checked whole (n = the region), then decoded.
        std::uint32_t *pi = nullptr;
        W *pv = nullptr;
        CC_COLL_TRY(x.buffer<std::uint32_t>(Buf::Extra1, std::max<std::size_t>(limit, 1), &pi));
        CC_COLL_TRY(x.buffer<W>(Buf::Other, std::max<std::size_t>(limit, 1), &pv));
        for (std::size_t s = 0; s < P && fault == 0; ++s) {
            if (count[s] == 0) continue;
            const unsigned char *pl = recvd + rd[s];
            topk::Fault f;
            if (!topk::check_header(topk::header_of(pl), mine.n, count[s], &f, fmt) ||
                !topk::check_coded(pl, static_cast<std::size_t>(rc[s]), mine.n, count[s], a.dtype, &f)) {
                fault = static_cast<std::uint32_t>(1 + s);
                break;
            }
            topk::decode_pairs<W>(pl, a.dtype, pi, pv);
            for (std::size_t j = 0; j < count[s]; ++j) {
                acc[pi[j]] += pv[j];
                mark[pi[j]] = 1;
            }
        }
    }
    for (std::size_t s = 0, at = 0; !coded && s < P && fault == 0 && failed == 0 && !overflow; ++s) {
        std::uint64_t before = 0;
        for (std::size_t j = 0; j < count[s]; ++j, ++at) {
            std::uint32_t i;
            std::memcpy(&i, recvd + at * sizeof i, sizeof i);
            if (i < mine.lo || i >= mine.lo + mine.n || (j > 0 && i <= before)) {
                fault = static_cast<std::uint32_t>(1 + s);
                break;
            }
            before = i;
            acc[i - mine.lo] += load_element_unaligned<W>(rvals, at, a.dtype);
            mark[i - mine.lo] = 1;
        }
    }
    // The support, and the k_r largest sums on it.
    const std::size_t kr = topk::k_for(p.density, std::max<std::size_t>(mine.n, 1));
    std::uint32_t *support = nullptr;
    W *mag = nullptr;
    CC_COLL_TRY(x.buffer<std::uint32_t>(Buf::Extra1, std::max<std::size_t>(mine.n, 1), &support));
    std::size_t u = 0;
    for (std::size_t i = 0; i < mine.n; ++i)
        if (mark[i]) support[u++] = static_cast<std::uint32_t>(i);
    const std::size_t keep = fault != 0 || failed != 0 || overflow ? 0 : std::min(u, kr);
    std::vector<std::uint32_t> chosen;  // positions in `support`, ascending
    if (keep > 0 && keep < u) {
        CC_COLL_TRY(x.buffer<W>(Buf::Other, u, &mag));
        for (std::size_t j = 0; j < u; ++j) mag[j] = acc[support[j]];
        chosen.resize(keep);
        CC_COLL_TRY(topk_select<W>(x, mag, u, keep, chosen.data()));  // the workspace's scratch
    }
    // Calls f(i, c) for every support position i of this region, c: its
    // place in the block, or kDropped.
    constexpr std::size_t kDropped = ~std::size_t{0};
    auto each_support = [&](auto &&f) {
        std::size_t c = 0;
        for (std::size_t j = 0, q = 0; j < u; ++j) {
            const bool take = keep == u || (q < chosen.size() && chosen[q] == j);
            if (take && keep != u) ++q;
            f(support[j], take ? c++ : kDropped);
        }
    };
    // Coded: the region's block now (its size goes out in step 4), over the
    // consumed send buffer; a non-finite sum cannot be a level and takes the
    // dense fallback as a sender's overflow flag does.
    unsigned char *block = nullptr;
    std::size_t block_bytes = keep * (4 + es);
    if (coded) {
        std::vector<std::uint32_t> kept_idx(keep);
        std::vector<W> kept_sent(keep);
        each_support([&](std::uint32_t i, std::size_t c) {
            if (c != kDropped) kept_idx[c] = i;
        });
        const std::size_t room = topk::coded_capacity(std::max<std::size_t>(keep, 1), a.dtype, fmt);
        CC_COLL_TRY(x.buffer<unsigned char>(Buf::SendBytes, room, &block));
        std::memset(block, 0, room);
        block_bytes = keep == 0 ? 0
                                : topk::encode_coded<W>(acc, mine.n, kept_idx.data(), keep, 0, a.dtype, fmt, block,
                                                        kept_sent.data());
        if (keep > 0 && (topk::header_of(block).flags & topk::kFlagNonFiniteOverflow) != 0) overflow = true;
    }
    const double t3 = now_seconds();
    stats->time_decompress += t3 - t2;

    // 4. Kept counts, faults and overflow flags (coded: and sizes; every
    //    rank learns every rank's), then the regions.
    const std::size_t kw = coded ? kKeptWordsCoded : kKeptWords;
    std::vector<std::uint32_t> own(kw, 0), kept(P * kw, 0);
    own[kCount] = static_cast<std::uint32_t>(keep);
    own[kFault] = fault;
    own[kOverflow] = overflow ? 1u : 0u;
    own[kFailed] = failed;
    if (coded) put_u64(&own[4], block_bytes);
    CC_COLL_TRY(allgather_bytes(own.data(), kw * sizeof(std::uint32_t), kept.data(), mpi));
    for (std::size_t r = 0; r < P; ++r) {
        const std::uint32_t *w = &kept[r * kw];
        if (w[kFailed] != 0)
            return fail(r == me ? CC_COLL_ERR_MPI : CC_COLL_ERR_MISMATCH,
                        "cc_coll_allreduce (topk, split): rank %zu could not exchange the pairs of the regions%s%s", r,
                        r == me ? ": " : " (its own error says why)", r == me ? failed_why.c_str() : "");
        if (w[kFault] != 0)
            return fail(CC_COLL_ERR_MISMATCH,
                        "cc_coll_allreduce (topk, split): rank %zu received malformed pairs from rank %u for its "
                        "region (a count above %zu, unknown flag bits, an index outside the region or out of "
                        "order, or a coded payload that fails its checks)",
                        r, w[kFault] - 1, std::min(k, region_of(n, P, r).n));
    }
    // Every rank saw every rank's flags: all fall back together, as the
    // allgather algorithm does.
    bool any_overflow = false;
    for (std::size_t r = 0; r < P; ++r) any_overflow = any_overflow || kept[r * kw + kOverflow] != 0;
    if (any_overflow) {
        guard.release();
        return dense_allreduce<HostExec, W>(x, a, g, res != nullptr, stats);
    }
    std::vector<int> gc(P), gd(P);
    std::size_t gtotal = 0;
    for (std::size_t r = 0; r < P; ++r) {
        const Region reg = region_of(n, P, r);
        const std::size_t c = kept[r * kw + kCount];
        const std::size_t kr_r = topk::k_for(p.density, std::max<std::size_t>(reg.n, 1));
        if (c > std::min(reg.n, kr_r))
            return fail(CC_COLL_ERR_MISMATCH, "cc_coll_allreduce (topk, split): rank %zu announced %zu pairs for its "
                        "region, more than its %zu", r, c, kr_r);
        const std::uint64_t b = coded ? get_u64(&kept[r * kw + 4]) : c * (4 + es);
        if (coded && !coded_size_ok(b, c, a.dtype, fmt))
            return fail(CC_COLL_ERR_MISMATCH, "cc_coll_allreduce (topk, split): rank %zu announced a coded region of "
                        "%llu bytes for %zu pairs (a multiple of 8 from 32 to %zu, or 0 for none)", r,
                        static_cast<unsigned long long>(b), c, topk::coded_capacity(std::max<std::size_t>(c, 1), a.dtype, fmt));
        gc[r] = static_cast<int>(b);
        gd[r] = static_cast<int>(gtotal);
        gtotal += b;
    }

    // This region's block, written at its place in the gathered buffer.
    unsigned char *gathered = recvd;  // the pairs are consumed
    CC_COLL_TRY(x.buffer<unsigned char>(Buf::RecvBytes, std::max<std::size_t>(gtotal, 1), &gathered));
    if (coded) {
        std::memcpy(gathered + gd[me], block, block_bytes);
    } else {
        unsigned char *bidx = gathered + gd[me], *bval = bidx + keep * sizeof(std::uint32_t);
        each_support([&](std::uint32_t i, std::size_t c) {
            if (c == kDropped) return;
            const std::uint32_t global = static_cast<std::uint32_t>(mine.lo + i);
            std::memcpy(bidx + c * sizeof global, &global, sizeof global);
            store_element_unaligned<W>(bval, c, a.dtype, acc[i]);
        });
    }
    const double t4 = now_seconds();
    stats->time_decompress += t4 - t3;
    // A failure of this exchange is recorded, not returned at once: the
    // outcome exchange below is the call's last MPI call on every rank.
    Outcome outcome(comm, "cc_coll_allreduce (topk, split)");
    const bool moved = outcome.check(allgatherv_bytes_in_place(gathered, gc.data(), gd.data(), mpi));
    const double t5 = now_seconds();
    stats->time_communicate += t5 - t4;

    // 5. Every region's indices checked, and the ranks compare what they
    //    found and a digest of the regions (every rank gathered the same
    //    bytes) in the outcome exchange, before anything is written.
    for (std::size_t r = 0; r < P && moved && outcome.ok(); ++r) {
        const Region reg = region_of(n, P, r);
        const unsigned char *b = gathered + gd[r];
        const std::size_t c = kept[r * kw + kCount];
        if (coded) {
            topk::Fault f;
            if (c > 0 && (!topk::check_header(topk::header_of(b), reg.n, c, &f, fmt) ||
                          !topk::check_coded(b, static_cast<std::size_t>(gc[r]), reg.n, c, a.dtype, &f))) {
                f.sender = r;
                outcome.fault(fail(CC_COLL_ERR_MISMATCH, "%s: in its region's block, %s", outcome.name(),
                                   topk::describe(f, "region size").c_str()),
                              FaultKind::Payload, static_cast<std::uint32_t>(1 + r));
            }
            continue;
        }
        for (std::size_t j = 0; j < c; ++j) {
            std::uint32_t i;
            std::memcpy(&i, b + j * sizeof i, sizeof i);
            if (i < reg.lo || i >= reg.lo + reg.n) {
                outcome.fault(fail(CC_COLL_ERR_MISMATCH, "%s: rank %zu sent index %u outside its region [%zu, %zu)",
                               outcome.name(), r, i, reg.lo, reg.lo + reg.n),
                          FaultKind::Payload, static_cast<std::uint32_t>(1 + r));
                break;
            }
        }
    }
    // The regions and the kept counts that laid them out (every rank
    // gathered the same).
    outcome.same(digest_bytes(gathered, gtotal), "gathered TOPK regions");
    outcome.same(digest_bytes(kept.data(), kept.size() * sizeof(std::uint32_t)), "kept counts of the TOPK regions");
    CC_COLL_TRY(outcome.exchange());
    guard.release();

    // Every region into recvbuf: its values as every rank holds them.
    std::memset(a.recv, 0, n * es);
    unsigned char *out_bytes = static_cast<unsigned char *>(a.recv);
    for (std::size_t r = 0; r < P; ++r) {
        const unsigned char *b = gathered + gd[r];
        const std::size_t c = kept[r * kw + kCount];
        if (coded) {
            if (c > 0) topk::scatter_add(b, a.dtype, out_bytes + region_of(n, P, r).lo * es);
            continue;
        }
        const unsigned char *vals = b + c * sizeof(std::uint32_t);
        for (std::size_t j = 0; j < c; ++j) {
            std::uint32_t i;
            std::memcpy(&i, b + j * sizeof i, sizeof i);
            std::memcpy(out_bytes + static_cast<std::size_t>(i) * es, vals + j * es, es);
        }
    }
    // The owner's residual: its own unsent part, then what it dropped and
    // the rounding of what it kept (the sum less what recvbuf holds).
    if (res != nullptr) {
        CC_COLL_TRY(x.keep_unsent<W>(g, idx, sent, k));
        each_support([&](std::uint32_t i, std::size_t c) {
            const W v = c == kDropped ? acc[i] : acc[i] - load_element<W>(a.recv, mine.lo + i, a.dtype);
            const W r = g[mine.lo + i] + v;
            g[mine.lo + i] = host::finite(r) ? r : W(0);
        });
    }
    if (a.op == CC_COLL_AVG) divide_in_place(a.recv, n, a.dtype, comm.size());
    stats->time_decompress += now_seconds() - t5;
    std::size_t sent_bytes = static_cast<std::size_t>(gc[me]);
    for (std::size_t r = 0; r < P; ++r)
        if (r != me) sent_bytes += static_cast<std::size_t>(sc[r]) + (coded ? 0 : static_cast<std::size_t>(sv[r]));
    stats->bytes_wire += sent_bytes;
    return CC_COLL_OK;
}

}  // namespace

bool topk_split_applies(const Comm &comm, const AllreduceArgs &a, const CallParams &p)
{
    if (a.on_device || a.count == 0 || comm.size() < 2) return false;
    if (topk_allreduce_dense(a.count, a.dtype, p.density, comm.size())) return false;
    if (a.count * dtype_size(a.dtype) > static_cast<std::size_t>(INT_MAX)) return false;
    switch (p.topk_algorithm) {
    case TopkAlgorithm::Split: return true;
    case TopkAlgorithm::Allgather: return false;
    case TopkAlgorithm::Auto: return comm.size() >= kTopkSplitAutoRanks;
    }
    return false;
}

cc_coll_status_t allreduce_sparse_split(Comm &comm, const AllreduceArgs &args, const CallParams &params,
                                        StatsSnapshot *stats)
{
    HostExec x(comm);
    return with_work_type(args.dtype, [&](auto w) { return sparse_split<decltype(w)>(x, args, params, stats); });
}

}  // namespace cc_coll::detail
