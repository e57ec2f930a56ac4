// Compressed point-to-point with lazy error propagation (docs/algorithms.md
// section 5, Optimus-CC's compressed backpropagation).
//
// Sender, on the channel (dest, ef_key or tag):
//  1. g' = g + e, e the channel's LEP residual (EF on), in workspace memory:
//     the residual itself is not touched until the receiver has accepted.
//  2. The message: LOWRANK (one local PowerSGD step: Q warm or seeded
//     Gaussian, orthogonalised; P = M Q, orthogonalised; Q = M^T P; P and Q
//     sent), TOPK (the k largest |g'| as (index, value) pairs) or RAW (g'
//     rounded to the dtype). A compressed kind falls back to RAW when it
//     would not be smaller than RAW, when LOWRANK's min_compression_rate
//     test fails, or when g' holds NaN/Inf that the kind cannot carry.
//  3. MPI_Send of header + payload on MPI tag 2 tag; wait for the
//     receiver's answer on 2 tag + 1.
//  4. Accepted: e = g' - what the receiver stores (compression error, or
//     only the rounding to the dtype for RAW); LOWRANK keeps Q for the warm
//     start. Rejected: CC_COLL_ERR_MISMATCH, residual and state as before.
//
// Receiver: MPI_Mprobe / MPI_Mrecv of the whole message, checks every field
// against the received size and its own count, dtype and params (method,
// shape and rank, or k from the density; every TOPK index) before using it,
// decodes only when everything agrees, and always answers
// (p2p_receive_message, p2p_receive.hpp). A malformed answer is
// CC_COLL_ERR_MISMATCH on the sender (p2p_read_ack).
#include "collectives/p2p/p2p.hpp"
#include "compressors/lowrank/lowrank_backend.hpp"
#include "collectives/p2p/p2p_receive.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "collectives/common/powersgd_step.hpp"
#include "exec/exec.hpp"
#include "exec/host_kernels.hpp"
#include "wire/p2p_wire.hpp"
#include "exec/workspace.hpp"
#include "gpu/gpu.hpp"
#include "compressors/lowrank/lowrank_state.hpp"
#include "core/method.hpp"
#include "compressors/lowrank/powersgd.hpp"
#include "wire/topk_payload.hpp"
#include "compressors/topk/topk_backend.hpp"
#include "compressors/topk/topk_select.hpp"
#include "core/dtype.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "transport/p2p_transport.hpp"

namespace cc_coll::detail {

using namespace p2p_wire;

namespace {

// The point-to-point codec of a method (its descriptor's p2p).
P2pCompression p2p_codec(cc_coll_method_t method)
{
    const Method *m = find_method(method);
    return m != nullptr ? m->p2p : P2pCompression::Refused;
}

const char *kind_name(unsigned kind)
{
    switch (kind) {
    case kRaw: return "uncompressed";
    case kTopk: return "TOPK";
    case kLowRank: return "LOWRANK";
    }
    return "unknown";
}

const char *method_name(cc_coll_method_t m)
{
    const Method *method = find_method(m);
    return method != nullptr ? method->name : "?";
}


// The Gaussian stream of a channel's initial Q: a function of the matrix
// shape and the channel's call count (the seed comes from params).
std::uint64_t q_stream(const lowrank::Shape &s, std::uint64_t calls)
{
    std::uint64_t h = 0x7032702d6c6f77ull;  // "p2p-low"
    h = h * 0x9e3779b97f4a7c15ull + s.rows;
    h = h * 0x9e3779b97f4a7c15ull + s.cols;
    h = h * 0x9e3779b97f4a7c15ull + static_cast<std::uint64_t>(s.rank);
    return h * 0x9e3779b97f4a7c15ull + calls;
}

// Bytes of a LOWRANK payload: P and Q in the work type.
std::size_t factor_bytes(const lowrank::Shape &s, cc_coll_dtype_t dtype)
{
    return s.factor_elements() * (dtype == CC_COLL_F64 ? sizeof(double) : sizeof(float));
}

// "dest 3, tag 7" or "dest 3, ef_key 42": names a channel in messages.
std::string channel_name(const char *peer_word, int peer, int tag, const CallParams &p)
{
    char text[96];
    if (p.has_ef_key)
        std::snprintf(text, sizeof text, "%s %d, tag %d, ef_key %llu", peer_word, peer, tag,
                      static_cast<unsigned long long>(p.ef_key));
    else
        std::snprintf(text, sizeof text, "%s %d, tag %d", peer_word, peer, tag);
    return text;
}

// ---- sender ------------------------------------------------------------------

struct Message {
    Kind kind = kRaw;
    lowrank::Shape shape;  // LOWRANK
    std::size_t k = 0;     // TOPK
};

// What a send of these arguments puts on the wire before looking at the
// data (the data can still turn a compressed kind into RAW).
cc_coll_status_t plan_message(const SendArgs &a, const CallParams &p, Message *m)
{
    *m = Message{};
    if (!a.compress || a.count == 0) return CC_COLL_OK;
    const std::size_t raw = a.count * dtype_size(a.dtype);
    const Method *method = find_method(p.method);
    switch (method != nullptr ? method->p2p : P2pCompression::Refused) {
    case P2pCompression::None: return CC_COLL_OK;
    case P2pCompression::Topk:
        m->k = topk::k_for(p.density, a.count);
        if (topk::payload_bytes(m->k, a.dtype) < raw) m->kind = kTopk;
        return CC_COLL_OK;
    case P2pCompression::LowRank: {
        std::string why;
        if (!lowrank::resolve_shape(a.count, p.has_shape, p.rows, p.cols, p.rank, &m->shape, &why))
            return fail(CC_COLL_ERR_INVALID_ARG, "cc_coll_send: params' LOWRANK shape: %s", why.c_str());
        if (lowrank::should_compress(m->shape, p.min_compression_rate) && factor_bytes(m->shape, a.dtype) < raw)
            m->kind = kLowRank;
        return CC_COLL_OK;
    }
    case P2pCompression::Refused: break;
    }
    return fail(CC_COLL_ERR_NOT_SUPPORTED, "cc_coll_send: method %s cannot compress point-to-point messages",
                method_name(p.method));
}

// One LOWRANK step on M (rows x cols of W, zero padded): P and Q into the
// workspace's factor buffers. Returns false when they are not finite.
template <typename W>
bool lowrank_factors(Comm &comm, Workspace &ws, const W *m, const lowrank::Shape &s, const CallParams &p,
                     cc_coll_dtype_t dtype, LowRankState *state)
{
    const std::size_t pn = s.rows * static_cast<std::size_t>(s.rank);
    const std::size_t qn = s.cols * static_cast<std::size_t>(s.rank);
    std::vector<W> &pbuf = ws.p_buffer<W>();
    std::vector<W> &qbuf = ws.q_buffer<W>();
    pbuf.resize(pn);
    qbuf.resize(qn);
    HostExec x(comm, ws);
    const W *previous = p.warm_start && state != nullptr ? lr_stored_q<W>(x, *state, s) : nullptr;
    const bool half = is_half(dtype);
    // Host steps cannot fail.
    (void)powersgd_p<HostExec, W>(x, m, s, previous, p.seed, q_stream(s, state != nullptr ? state->calls : 0), half,
                                  qbuf.data(), pbuf.data());
    (void)powersgd_q<HostExec, W>(x, m, s, half, pbuf.data(), qbuf.data());
    return !host::any_nonfinite(pbuf.data(), pn) && !host::any_nonfinite(qbuf.data(), qn);
}

// The receiver's answer: CC_COLL_OK when it took the message.
cc_coll_status_t await_ack(Comm &comm, Workspace &ws, const SendArgs &a, const CallParams &p, const WireHeader &h)
{
    std::size_t got = 0;
    cc_coll_status_t st = recv_message(a.dest, 2 * a.tag + 1, comm.mpi(), sizeof(WireAck), &ws.recv_bytes, &got);
    if (st != CC_COLL_OK) return st;
    if (got > sizeof(WireAck))
        return fail(CC_COLL_ERR_MISMATCH,
                    "cc_coll_send (%s): malformed answer: %zu bytes, not an acknowledgement of %zu; the message may "
                    "or may not have been delivered and this channel's residual is as before the call",
                    channel_name("dest", a.dest, a.tag, p).c_str(), got, sizeof(WireAck));
    std::string why;
    switch (p2p_read_ack(ws.recv_bytes.data(), ws.recv_bytes.size(), &why)) {
    case AckVerdict::Accepted: return CC_COLL_OK;
    case AckVerdict::Malformed:
        return fail(CC_COLL_ERR_MISMATCH,
                    "cc_coll_send (%s): malformed answer: %s; the message may or may not have been delivered and "
                    "this channel's residual is as before the call",
                    channel_name("dest", a.dest, a.tag, p).c_str(), why.c_str());
    case AckVerdict::Rejected: break;
    }
    return fail(CC_COLL_ERR_MISMATCH,
                "cc_coll_send (%s): the receiver rejected this %s message of %llu %s elements: %s; nothing was "
                "delivered and this channel's residual is as before the call",
                channel_name("dest", a.dest, a.tag, p).c_str(), kind_name(h.kind),
                static_cast<unsigned long long>(h.count), dtype_name(a.dtype), why.c_str());
}

template <typename W>
cc_coll_status_t send_typed(Comm &comm, const SendArgs &a, const CallParams &p)
{
    const std::size_t n = a.count;
    const std::size_t es = dtype_size(a.dtype);
    WorkspaceLease lease(comm);
    Workspace &ws = *lease;
    StatsSnapshot stats;
    const double t0 = now_seconds();

    Message m;
    cc_coll_status_t st = plan_message(a, p, &m);
    if (st != CC_COLL_OK) return st;

    // The channel's residual and LOWRANK state are read and updated under
    // the communicator's point-to-point lock, released while MPI moves the
    // message (a concurrent cc_coll_recv or cc_coll_send on another thread
    // proceeds meanwhile; a concurrent cc_coll_lep_reset takes effect before
    // or after this call's update, and no pointer into the stores is kept
    // across the wait).
    std::unique_lock<std::mutex> lock(comm.p2p_mutex());

    // The channel's residual: an existing one is used; a compressed send
    // creates one (an uncompressed send has nothing to keep but rounding,
    // and without a residual g' = g is exact in the dtype).
    const EfKey key = p2p_channel(a.dest, a.tag, p);
    Residual *res = nullptr;
    bool created = false;
    if (p.ef && n > 0) {
        const Residual *existing = comm.lep().find(key);
        if (existing != nullptr && (existing->count != n || existing->dtype != a.dtype))
            return fail(CC_COLL_ERR_MISMATCH,
                        "cc_coll_send: the LEP channel (%s) holds a residual of %zu %s elements but this call sends "
                        "%zu %s elements; use another tag or ef_key, or cc_coll_lep_reset() first",
                        channel_name("dest", a.dest, a.tag, p).c_str(), existing->count,
                        dtype_name(existing->dtype), n, dtype_name(a.dtype));
        created = existing == nullptr && m.kind != kRaw;
        if (existing != nullptr || m.kind != kRaw)
            if ((st = comm.lep().acquire(key, n, a.dtype, &res)) != CC_COLL_OK) return st;
    }
    const bool had_residual = res != nullptr;

    // The channel's LOWRANK state (call count, factors for the warm start),
    // charged to CC_COLL_STATE_MAX_BYTES before anything is sent, with room
    // for this message's factors; held pending until the receiver accepts.
    const bool lowrank = p2p_codec(p.method) == P2pCompression::LowRank;
    LowRankState *state = nullptr;
    if (lowrank) {
        const std::uint64_t fb = m.kind == kLowRank ? factor_bytes(m.shape, a.dtype) : 0;
        st = lowrank_channel_states(comm).acquire(
            key, fb, true,
            [&](bool fresh) {
                const std::string channel = "cc_coll_send (" + channel_name("dest", a.dest, a.tag, p) + "): ";
                if (fb == 0) return channel + "a new LOWRANK channel state (its call count)";
                char factors[96];
                std::snprintf(factors, sizeof factors, "factors P and Q of %zu x %zu at rank %d in binary%d",
                              m.shape.rows, m.shape.cols, m.shape.rank, a.dtype == CC_COLL_F64 ? 64 : 32);
                return channel +
                       (fresh ? "a new LOWRANK channel state (its call count) with " : "the LOWRANK channel state, "
                                                                                       "growing to ") +
                       factors;
            },
            &state);
        if (st != CC_COLL_OK) {
            if (created) comm.lep().reset(key);  // the channel is as before the call
            return st;
        }
    }

    // 1. g' = g + e in workspace memory, zero padded to the matrix for LOWRANK.
    const std::size_t mn = m.kind == kLowRank ? m.shape.elements() : n;
    W *g = ws.mat<W>(0, std::max<std::size_t>(mn, 1));
    if (res != nullptr) {
        std::memcpy(g, res->data<W>(), n * sizeof(W));
        load_as<W>(a.buf, a.dtype, n, g, true);
    } else {
        load_as<W>(a.buf, a.dtype, n, g, false);
    }
    std::fill(g + n, g + mn, W(0));

    // 2. The message.
    W *sent = nullptr;  // TOPK: the values the receiver adds
    if (m.kind == kLowRank &&
        (host::any_nonfinite(g, n) || !lowrank_factors<W>(comm, ws, g, m.shape, p, a.dtype, state)))
        m.kind = kRaw;
    const topk::Format fmt = topk_format(p);
    if (m.kind == kTopk) {
        ws.indices.resize(m.k);
        topk::select<W>(g, n, m.k, ws.indices.data(), &ws.select);
        if (topk::nonfinite_overflow<W>(g, n, ws.indices.data(), m.k) != 0) m.kind = kRaw;
        // A kept NaN/Inf has no level of the coded payload's values.
        if (fmt.value_bits != 0)
            for (std::size_t j = 0; j < m.k && m.kind == kTopk; ++j)
                if (!std::isfinite(static_cast<double>(g[ws.indices[j]]))) m.kind = kRaw;
    }
    // The coded payload (docs/wire.md), encoded before the header: its size
    // depends on the data.
    std::vector<unsigned char> coded;
    if (m.kind == kTopk && fmt.coded) {
        coded.assign(topk::coded_capacity(m.k, a.dtype, fmt), 0);
        sent = ws.work_other<W>(m.k);
        coded.resize(topk::encode_coded<W>(g, n, ws.indices.data(), m.k, 0, a.dtype, fmt, coded.data(), sent));
    }
    WireHeader h{};
    h.magic = kMagic;
    h.version = kVersion;
    h.kind = m.kind;
    h.dtype = static_cast<std::uint8_t>(a.dtype);
    h.count = n;
    switch (m.kind) {
    case kRaw: h.payload_bytes = n * es; break;
    case kTopk:
        h.rank_or_k = m.k;
        h.payload_bytes = fmt.coded ? coded.size() : topk::payload_bytes(m.k, a.dtype);
        break;
    case kLowRank:
        h.rows = m.shape.rows;
        h.cols = m.shape.cols;
        h.rank_or_k = static_cast<std::uint64_t>(m.shape.rank);
        h.payload_bytes = factor_bytes(m.shape, a.dtype);
        break;
    }
    const std::size_t bytes = sizeof h + h.payload_bytes;
    ws.send_bytes.resize(bytes);
    unsigned char *payload = ws.send_bytes.data() + sizeof h;
    std::memcpy(ws.send_bytes.data(), &h, sizeof h);
    switch (m.kind) {
    case kRaw: store_as<W>(g, n, a.dtype, payload); break;
    case kTopk:
        if (fmt.coded) {
            std::memcpy(payload, coded.data(), coded.size());
            break;
        }
        std::memset(payload, 0, h.payload_bytes);
        sent = ws.work_other<W>(m.k);
        topk::encode<W>(g, n, ws.indices.data(), m.k, 0, a.dtype, payload, sent);
        break;
    case kLowRank: {
        const std::size_t pbytes = m.shape.rows * static_cast<std::size_t>(m.shape.rank) * sizeof(W);
        std::memcpy(payload, ws.p_buffer<W>().data(), pbytes);
        std::memcpy(payload + pbytes, ws.q_buffer<W>().data(), h.payload_bytes - pbytes);
        break;
    }
    }
    const double t1 = now_seconds();
    stats.time_compress += t1 - t0;

    // 3. Send; the receiver answers. Without the lock: `res` and `state`
    // are not used after this point (a concurrent reset may free them).
    res = nullptr;
    state = nullptr;
    lock.unlock();
    st = send_bytes(ws.send_bytes.data(), bytes, a.dest, 2 * a.tag, comm.mpi());
    if (st == CC_COLL_OK) st = await_ack(comm, ws, a, p, h);
    const double t2 = now_seconds();
    stats.time_communicate += t2 - t1;
    lock.lock();
    if (st != CC_COLL_OK) {
        // The channel is as before the call.
        if (created) comm.lep().reset(key);
        if (lowrank) lowrank_channel_states(comm).rollback(key);
        return st;
    }

    // 4. The receiver has it: e = g' - what it stores. The residual is found
    // again: a cc_coll_lep_reset meanwhile has dropped it, and then there is
    // nothing to update.
    if (had_residual) {
        const Residual *r = comm.lep().find(key);
        if (r != nullptr && r->count == n && r->dtype == a.dtype && !r->on_device())
            res = const_cast<Residual *>(r);
    }
    if (res != nullptr) {
        W *e = res->data<W>();
        switch (m.kind) {
        case kRaw:
            host::round_to_dtype<W>(g, true, n, a.dtype, payload);
            std::memcpy(e, g, n * sizeof(W));
            break;
        case kTopk:
            host::keep_unsent<W>(g, 0, ws.indices.data(), sent, m.k);
            std::memcpy(e, g, n * sizeof(W));
            break;
        case kLowRank: {
            // M^ = P Q^T rounded to the dtype, as the receiver stores it.
            W *mhat = ws.work<W>(mn);
            lowrank::reconstruct<W>(ws.p_buffer<W>().data(), ws.q_buffer<W>().data(), m.shape, W(1), mhat);
            ws.recv_bytes.resize(n * es);
            store_as<W>(mhat, n, a.dtype, ws.recv_bytes.data());
            for (std::size_t i = 0; i < n; ++i) {
                const W r = g[i] - load_element<W>(ws.recv_bytes.data(), i, a.dtype);
                e[i] = host::finite(r) ? r : W(0);
            }
            break;
        }
        }
    }
    // The LOWRANK state, found again: a cc_coll_lep_reset meanwhile has
    // dropped it (and its charge), and then there is nothing to update.
    if (lowrank && (state = lowrank_channel_states(comm).find(key)) != nullptr) {
        LowRankState &s = *state;
        ++s.calls;
        s.commit();
        if (m.kind == kLowRank) {
            s.rows = m.shape.rows;
            s.cols = m.shape.cols;
            s.rank = m.shape.rank;
            s.p<W>() = ws.p_buffer<W>();
            s.q<W>() = ws.q_buffer<W>();
            s.clear_other<W>();
        }
    }
    stats.time_decompress += now_seconds() - t2;
    stats.calls = 1;
    stats.bytes_uncompressed = n * es;
    stats.bytes_wire = bytes;
    comm.stats().add(stats);
    log_message(LogLevel::Debug, "p2p send rank %d -> %d tag %d: %zu %s elements as %s, %zu bytes", comm.rank(), a.dest,
                a.tag, n, dtype_name(a.dtype), kind_name(m.kind), bytes);
    return CC_COLL_OK;
}

// ---- receiver ----------------------------------------------------------------

// Why the receiver refuses the message (printf-style into ack->reason).
bool reject(WireAck *ack, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
bool reject(WireAck *ack, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(ack->reason, sizeof ack->reason, fmt, ap);
    va_end(ap);
    ack->status = kRejected;
    return false;
}

unsigned long long ull(std::uint64_t v) { return static_cast<unsigned long long>(v); }

// a * b, false when it does not fit.
bool mul_fits(std::uint64_t a, std::uint64_t b, std::uint64_t *out) { return !__builtin_mul_overflow(a, b, out); }

// The largest r a call accepts (core/params.hpp).
constexpr std::uint64_t kMaxRank = 65536;

bool check_raw(const WireHeader &h, const RecvArgs &a, WireAck *ack)
{
    if (h.rows != 0 || h.cols != 0 || h.rank_or_k != 0)
        return reject(ack, "uncompressed message with rows %llu, cols %llu, rank_or_k %llu (all must be 0)",
                      ull(h.rows), ull(h.cols), ull(h.rank_or_k));
    std::uint64_t expect = 0;
    if (!mul_fits(a.count, dtype_size(a.dtype), &expect) || h.payload_bytes != expect)
        return reject(ack, "uncompressed message: payload_bytes %llu for %zu %s elements", ull(h.payload_bytes),
                      a.count, dtype_name(a.dtype));
    return true;
}

// A coded TOPK payload (this receiver's CC_COLL_TOPK_VALUE_BITS or
// CC_COLL_TOPK_INDEX_CODING asks for one): size, header, index stream,
// padding, as the collectives' receivers check it (docs/wire.md).
bool check_topk_coded(const WireHeader &h, const unsigned char *payload, const RecvArgs &a, const topk::Format &fmt,
                      std::size_t k, WireAck *ack)
{
    const std::size_t n = a.count;
    const std::size_t capacity = topk::coded_capacity(k, a.dtype, fmt);
    if (h.payload_bytes > capacity || h.payload_bytes % 8 != 0 || h.payload_bytes < 32)
        return reject(ack,
                      "TOPK payload_bytes %llu: a coded payload of k = %zu of %s is a multiple of 8 from 32 to %zu "
                      "(CC_COLL_TOPK_VALUE_BITS and CC_COLL_TOPK_INDEX_CODING must match the sender's)",
                      ull(h.payload_bytes), k, dtype_name(a.dtype), capacity);
    const topk::PayloadHeader ph = topk::header_of(payload);
    topk::Fault fault;
    if (!topk::check_header(ph, n, k, &fault, fmt) || (ph.flags & topk::kFlagNonFiniteOverflow) != 0) {
        if (fault.field == topk::Field::N) return reject(ack, "TOPK payload n %llu differs from count %zu", ull(ph.n), n);
        if (fault.field == topk::Field::K)
            return reject(ack, "TOPK payload k %u differs from k %zu", static_cast<unsigned>(ph.k), k);
        return reject(ack,
                      "TOPK payload flags 0x%x: not this receiver's coded format (value bits 0x%x; "
                      "CC_COLL_TOPK_VALUE_BITS and CC_COLL_TOPK_INDEX_CODING must match the sender's)",
                      static_cast<unsigned>(ph.flags), static_cast<unsigned>(topk::value_code(fmt.value_bits)));
    }
    const std::size_t record = static_cast<std::size_t>(h.payload_bytes);
    if (!topk::check_coded(payload, record, n, k, a.dtype, &fault)) {
        if (fault.field == topk::Field::IndexRange)
            return reject(ack, "TOPK index %llu at position %zu is not below count %zu", ull(fault.found),
                          fault.position, n);
        return reject(ack, "TOPK coded index stream of %llu bytes, its codes and values take %llu (truncated or "
                      "over-long)", ull(fault.found), ull(fault.expected));
    }
    topk::CodedSection cs;
    std::memcpy(&cs, payload + sizeof ph, sizeof cs);
    const std::size_t values = fmt.value_bits != 0 ? (k * fmt.value_bits + 7) / 8 : k * dtype_size(a.dtype);
    const std::size_t used = sizeof ph + sizeof cs + cs.index_bytes + values;
    for (std::size_t b = used; b < record; ++b)
        if (payload[b] != 0)
            return reject(ack, "TOPK padding byte %zu of the payload is 0x%02x, not 0", b,
                          static_cast<unsigned>(payload[b]));
    return true;
}

bool check_topk(const WireHeader &h, const unsigned char *payload, const RecvArgs &a, const CallParams &p,
                WireAck *ack)
{
    const std::size_t n = a.count;
    const std::size_t k = topk::k_for(p.density, n);
    ack->rank_or_k = k;
    if (p2p_codec(p.method) != P2pCompression::Topk)
        return reject(ack, "method differs: the sender sent TOPK (k = %llu), this receiver's method is %s",
                      ull(h.rank_or_k), method_name(p.method));
    if (n == 0) return reject(ack, "TOPK message of count 0 (a sender sends count 0 uncompressed)");
    if (h.rows != 0 || h.cols != 0)
        return reject(ack, "TOPK message with rows %llu, cols %llu (both must be 0)", ull(h.rows), ull(h.cols));
    if (h.rank_or_k != k)
        return reject(ack,
                      "density differs: the sender sent TOPK k = %llu of %zu, this receiver's density %g gives "
                      "k = %zu",
                      ull(h.rank_or_k), n, p.density, k);
    // Sizes before any byte of the payload is read.
    const topk::Format fmt = topk_format(p);
    if (fmt.coded) return check_topk_coded(h, payload, a, fmt, k, ack);
    const std::size_t bytes = topk::payload_bytes(k, a.dtype);
    if (h.payload_bytes != bytes)
        return reject(ack, "TOPK payload_bytes %llu, %zu expected for k = %zu of %s (uncoded payload: "
                      "CC_COLL_TOPK_VALUE_BITS and CC_COLL_TOPK_INDEX_CODING must match the sender's)",
                      ull(h.payload_bytes), bytes, k, dtype_name(a.dtype));
    const topk::PayloadHeader ph = topk::header_of(payload);
    if (ph.n != n) return reject(ack, "TOPK payload n %llu differs from count %zu", ull(ph.n), n);
    if (ph.k != k) return reject(ack, "TOPK payload k %u differs from k %zu", static_cast<unsigned>(ph.k), k);
    if (ph.flags != 0)
        return reject(ack, "TOPK payload flags 0x%x (a point-to-point message has none)",
                      static_cast<unsigned>(ph.flags));
    topk::Fault fault;
    if (!topk::check_indices(payload + sizeof ph, n, k, &fault)) {
        if (fault.field == topk::Field::IndexRange)
            return reject(ack, "TOPK index %llu at position %zu is not below count %zu", ull(fault.found),
                          fault.position, n);
        return reject(ack, "TOPK index %llu at position %zu does not follow %llu (indices strictly ascending)",
                      ull(fault.found), fault.position, ull(fault.expected));
    }
    const std::size_t used = sizeof ph + k * (sizeof(std::uint32_t) + dtype_size(a.dtype));
    for (std::size_t b = used; b < bytes; ++b)
        if (payload[b] != 0)
            return reject(ack, "TOPK padding byte %zu of the payload is 0x%02x, not 0", b,
                          static_cast<unsigned>(payload[b]));
    return true;
}

bool check_lowrank(const WireHeader &h, const RecvArgs &a, const CallParams &p, WireAck *ack)
{
    const std::size_t n = a.count;
    if (p2p_codec(p.method) != P2pCompression::LowRank)
        return reject(ack,
                      "method differs: the sender sent LOWRANK (%llu x %llu, rank %llu), this receiver's method "
                      "is %s",
                      ull(h.rows), ull(h.cols), ull(h.rank_or_k), method_name(p.method));
    // The sender's shape on its own, before any arithmetic on it.
    if (n == 0) return reject(ack, "LOWRANK message of count 0 (a sender sends count 0 uncompressed)");
    std::uint64_t elements = 0;
    if (h.rows == 0 || h.cols == 0)
        return reject(ack, "LOWRANK shape %llu x %llu has no elements", ull(h.rows), ull(h.cols));
    if (!mul_fits(h.rows, h.cols, &elements))
        return reject(ack, "LOWRANK shape %llu x %llu overflows", ull(h.rows), ull(h.cols));
    if (elements < n)
        return reject(ack, "LOWRANK shape %llu x %llu holds fewer than count %zu elements", ull(h.rows),
                      ull(h.cols), n);
    if (h.rank_or_k < 1 || h.rank_or_k > std::min<std::uint64_t>({h.rows, h.cols, kMaxRank}))
        return reject(ack, "LOWRANK rank %llu outside [1, min(rows %llu, cols %llu, %llu)]", ull(h.rank_or_k),
                      ull(h.rows), ull(h.cols), ull(kMaxRank));
    lowrank::Shape s;
    std::string why;
    if (!lowrank::resolve_shape(n, p.has_shape, p.rows, p.cols, p.rank, &s, &why))
        return reject(ack, "the sender sent LOWRANK %llu x %llu, rank %llu, but this receiver's shape is invalid: %s",
                      ull(h.rows), ull(h.cols), ull(h.rank_or_k), why.c_str());
    ack->rows = s.rows;
    ack->cols = s.cols;
    ack->rank_or_k = static_cast<std::uint64_t>(s.rank);
    if (h.rows != s.rows || h.cols != s.cols || h.rank_or_k != static_cast<std::uint64_t>(s.rank))
        return reject(ack,
                      "shape or rank differs: the sender sent LOWRANK %llu x %llu, rank %llu; this receiver "
                      "expects %zu x %zu, rank %d",
                      ull(h.rows), ull(h.cols), ull(h.rank_or_k), s.rows, s.cols, s.rank);
    if (h.payload_bytes != factor_bytes(s, a.dtype))
        return reject(ack, "LOWRANK payload_bytes %llu, %zu expected", ull(h.payload_bytes), factor_bytes(s, a.dtype));
    return true;
}

// Checks the message of `bytes` bytes at `msg` against the receiver's
// arguments; fills the ack (expectation, and the reason of a rejection).
// True when it can be decoded into the receiver's buffer. Each field is
// checked before it is used (docs/wire.md, "What the receiver checks").
bool check_message(const unsigned char *msg, std::size_t bytes, const RecvArgs &a, const CallParams &p,
                   WireHeader *h, WireAck *ack)
{
    *ack = WireAck{};
    ack->magic = kAckMagic;
    ack->status = kAccepted;
    ack->method = static_cast<std::uint32_t>(p.method);
    ack->dtype = static_cast<std::uint32_t>(a.dtype);
    ack->count = a.count;
    if (bytes < sizeof *h)
        return reject(ack, "a message of %zu bytes is shorter than the %zu-byte header (not from cc_coll_send)",
                      bytes, sizeof *h);
    std::memcpy(h, msg, sizeof *h);
    if (h->magic != kMagic)
        return reject(ack, "magic 0x%08x is not 0x%08x (the message is not from cc_coll_send)",
                      static_cast<unsigned>(h->magic), static_cast<unsigned>(kMagic));
    if (h->version != kVersion)
        return reject(ack, "the sender's wire format is version %u, this receiver's is %u (mixed library versions)",
                      static_cast<unsigned>(h->version), static_cast<unsigned>(kVersion));
    if (h->kind > kLowRank)
        return reject(ack, "kind %u is not 0 (RAW), 1 (TOPK) or 2 (LOWRANK)", static_cast<unsigned>(h->kind));
    if (!dtype_valid(h->dtype))
        return reject(ack, "dtype %u is not a cc_coll_dtype_t (0 to 3)", static_cast<unsigned>(h->dtype));
    if (h->payload_bytes != bytes - sizeof *h)
        return reject(ack, "payload_bytes %llu differs from the %zu bytes received after the header",
                      ull(h->payload_bytes), bytes - sizeof *h);
    const auto sdtype = static_cast<cc_coll_dtype_t>(h->dtype);
    if (h->count != a.count || sdtype != a.dtype)
        return reject(ack, "count/dtype differ: the sender sent %llu %s elements, this receiver expects %zu %s",
                      ull(h->count), dtype_name(sdtype), a.count, dtype_name(a.dtype));
    switch (h->kind) {
    case kRaw: return check_raw(*h, a, ack);
    case kTopk: return check_topk(*h, msg + sizeof *h, a, p, ack);
    case kLowRank: return check_lowrank(*h, a, p, ack);
    }
    return reject(ack, "kind %u is not 0 (RAW), 1 (TOPK) or 2 (LOWRANK)", static_cast<unsigned>(h->kind));
}

// Writes a checked message into the receiver's buffer.
template <typename W>
void decode(Workspace &ws, const WireHeader &h, const unsigned char *payload, const RecvArgs &a)
{
    const std::size_t n = a.count;
    switch (h.kind) {
    case kRaw:
        if (n > 0) std::memcpy(a.buf, payload, n * dtype_size(a.dtype));
        break;
    case kTopk:
        std::memset(a.buf, 0, n * dtype_size(a.dtype));
        topk::scatter_add(payload, a.dtype, a.buf);
        break;
    case kLowRank: {
        lowrank::Shape s;
        s.rows = h.rows;
        s.cols = h.cols;
        s.rank = static_cast<int>(h.rank_or_k);
        const std::size_t pn = s.rows * static_cast<std::size_t>(s.rank);
        const std::size_t qn = s.cols * static_cast<std::size_t>(s.rank);
        std::vector<W> &pbuf = ws.p_buffer<W>();
        std::vector<W> &qbuf = ws.q_buffer<W>();
        pbuf.resize(pn);
        qbuf.resize(qn);
        std::memcpy(pbuf.data(), payload, pn * sizeof(W));
        std::memcpy(qbuf.data(), payload + pn * sizeof(W), qn * sizeof(W));
        W *mhat = ws.work<W>(s.elements());
        lowrank::reconstruct<W>(pbuf.data(), qbuf.data(), s, W(1), mhat);
        store_as<W>(mhat, n, a.dtype, a.buf);
        break;
    }
    }
}

}  // namespace

bool p2p_receive_message(Workspace &ws, const unsigned char *msg, std::size_t bytes, const RecvArgs &a,
                         const CallParams &p, WireAck *ack)
{
    WireHeader h{};
    if (!check_message(msg, bytes, a, p, &h, ack)) return false;
    with_work_type(a.dtype, [&](auto w) {
        decode<decltype(w)>(ws, h, msg + sizeof h, a);
        return CC_COLL_OK;
    });
    return true;
}

AckVerdict p2p_read_ack(const unsigned char *bytes, std::size_t size, std::string *why)
{
    char text[128];
    WireAck ack;
    if (size != sizeof ack) {
        std::snprintf(text, sizeof text, "the receiver's answer has %zu bytes, not %zu", size, sizeof ack);
        *why = text;
        return AckVerdict::Malformed;
    }
    std::memcpy(&ack, bytes, sizeof ack);
    if (ack.magic != kAckMagic) {
        std::snprintf(text, sizeof text, "the receiver's answer has magic 0x%08x, not 0x%08x (not a cc_coll_recv answer)",
                      static_cast<unsigned>(ack.magic), static_cast<unsigned>(kAckMagic));
        *why = text;
        return AckVerdict::Malformed;
    }
    if (ack.status != kAccepted && ack.status != kRejected) {
        std::snprintf(text, sizeof text, "the receiver's answer has status %u, neither 0 (accepted) nor 1 (rejected)",
                      static_cast<unsigned>(ack.status));
        *why = text;
        return AckVerdict::Malformed;
    }
    const void *nul = std::memchr(ack.reason, '\0', sizeof ack.reason);
    if (nul == nullptr) {
        *why = "the receiver's answer has a reason without a terminating NUL";
        return AckVerdict::Malformed;
    }
    if (ack.status == kAccepted) {
        why->clear();
        return AckVerdict::Accepted;
    }
    why->assign(ack.reason, static_cast<const char *>(nul) - ack.reason);
    for (char &c : *why)
        if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) c = '?';
    return AckVerdict::Rejected;
}

int p2p_tag_ub(Comm &comm) { return (mpi_tag_ub(comm.mpi()) - 1) / 2; }

std::size_t p2p_max_count(cc_coll_dtype_t dtype)
{
    const std::size_t es = dtype_size(dtype);
    return es == 0 ? 0 : (static_cast<std::size_t>(INT_MAX) - sizeof(WireHeader)) / es;
}

namespace {

cc_coll_status_t send_host(Comm &comm, const SendArgs &args, const CallParams &params)
{
    return with_work_type(args.dtype, [&](auto w) { return send_typed<decltype(w)>(comm, args, params); });
}

cc_coll_status_t recv_host(Comm &comm, const RecvArgs &a, const CallParams &p);

}  // namespace

cc_coll_status_t p2p_send(Comm &comm, const SendArgs &args, const CallParams &params)
{
    if (args.compress) {
        const Method *m = find_method(params.method);
        if (m != nullptr && m->p2p == P2pCompression::Refused)
            return fail(CC_COLL_ERR_NOT_SUPPORTED, "cc_coll_send: compress = 1 with method %s: %s", m->name,
                        m->why_no_p2p);
    }
    if (!args.on_device) return send_host(comm, args, params);
    // Device buffer: the host algorithm on a host copy.
    const char *fn = "cc_coll_send";
    const std::size_t bytes = args.count * dtype_size(args.dtype);
    cc_coll_status_t st = gpu::synchronize(args.stream, fn);
    if (st != CC_COLL_OK) return st;
    std::vector<unsigned char> host(bytes > 0 ? bytes : 1);
    if ((st = gpu::copy_to_host(host.data(), args.buf, bytes, fn)) != CC_COLL_OK) return st;
    SendArgs h = args;
    h.buf = host.data();
    h.on_device = false;
    return send_host(comm, h, params);
}

cc_coll_status_t p2p_recv(Comm &comm, const RecvArgs &args, const CallParams &params)
{
    if (!args.on_device) return recv_host(comm, args, params);
    // Device buffer: received into host memory, which a successful receive
    // fills whole, and copied up on success (a rejected message leaves buf
    // untouched, as on the host).
    const char *fn = "cc_coll_recv";
    const std::size_t bytes = args.count * dtype_size(args.dtype);
    std::vector<unsigned char> host(bytes > 0 ? bytes : 1);
    cc_coll_status_t st = gpu::synchronize(args.stream, fn);
    if (st != CC_COLL_OK) return st;
    RecvArgs h = args;
    h.buf = host.data();
    h.on_device = false;
    if ((st = recv_host(comm, h, params)) != CC_COLL_OK) return st;
    return gpu::copy_to_device(args.buf, host.data(), bytes, fn);
}

namespace {

cc_coll_status_t recv_host(Comm &comm, const RecvArgs &a, const CallParams &p)
{
    // A receive touches no state of the communicator but its statistics
    // (locked): its own scratch, and no lock while it waits.
    WorkspaceLease lease(comm);
    Workspace &ws = *lease;
    StatsSnapshot stats;
    const double t0 = now_seconds();
    // The most this receive can take: a header and the uncompressed payload
    // (a sender never sends a compressed form larger than that).
    const std::size_t max_bytes = sizeof(WireHeader) + a.count * dtype_size(a.dtype);
    std::size_t got = 0;
    cc_coll_status_t st = recv_message(a.source, 2 * a.tag, comm.mpi(), max_bytes, &ws.recv_bytes, &got);
    if (st != CC_COLL_OK) return st;
    const double t1 = now_seconds();
    stats.time_communicate += t1 - t0;

    WireAck ack{};
    ack.magic = kAckMagic;
    const bool ok = got > max_bytes
                        ? reject(&ack, "a message of %zu bytes, more than the %zu this receive of %zu %s elements "
                                       "can take (the header and the uncompressed payload)",
                                 got, max_bytes, a.count, dtype_name(a.dtype))
                        : p2p_receive_message(ws, ws.recv_bytes.data(), ws.recv_bytes.size(), a, p, &ack);
    const double t2 = now_seconds();
    stats.time_decompress += t2 - t1;
    st = send_bytes(&ack, sizeof ack, a.source, 2 * a.tag + 1, comm.mpi());
    stats.time_communicate += now_seconds() - t2;
    // A receive is not a call of its own in the statistics (the sender
    // counts the message); its times are this rank's.
    comm.stats().add(stats);
    if (st != CC_COLL_OK) return st;
    if (!ok)
        return fail(CC_COLL_ERR_MISMATCH,
                    "cc_coll_recv (source %d, tag %d): rejected the message: %s; the buffer is untouched and the "
                    "sender gets CC_COLL_ERR_MISMATCH too",
                    a.source, a.tag, ack.reason);
    return CC_COLL_OK;
}

}  // namespace

}  // namespace cc_coll::detail
