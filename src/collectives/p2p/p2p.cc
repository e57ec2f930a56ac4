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
// Receiver: MPI_Mprobe / MPI_Mrecv of the whole message, checks it against
// its own count, dtype and params (method, shape and rank, or k from the
// density), decodes only when everything agrees, and always answers.
#include "collectives/p2p/p2p.hpp"

#include <algorithm>
#include <climits>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <string>

#include "collectives/common/powersgd_step.hpp"
#include "exec/exec.hpp"
#include "exec/host_kernels.hpp"
#include "wire/p2p_wire.hpp"
#include "collectives/common/workspace.hpp"
#include "gpu/gpu.hpp"
#include "methods/lowrank_state.hpp"
#include "core/method.hpp"
#include "compressors/lowrank/powersgd.hpp"
#include "wire/topk_payload.hpp"
#include "compressors/topk/topk_select.hpp"
#include "core/dtype.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "transport/p2p_transport.hpp"

namespace cc_coll::detail {

using namespace p2p_wire;

namespace {

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
bool lowrank_factors(Comm &comm, const W *m, const lowrank::Shape &s, const CallParams &p, cc_coll_dtype_t dtype,
                     LowRankState *state)
{
    Workspace &ws = workspace_of(comm);
    const std::size_t pn = s.rows * static_cast<std::size_t>(s.rank);
    const std::size_t qn = s.cols * static_cast<std::size_t>(s.rank);
    std::vector<W> &pbuf = ws.p_buffer<W>();
    std::vector<W> &qbuf = ws.q_buffer<W>();
    pbuf.resize(pn);
    qbuf.resize(qn);
    HostExec x(comm);
    const W *previous = p.warm_start && state != nullptr ? x.lr_stored_q<W>(*state, s) : nullptr;
    const bool half = is_half(dtype);
    // Host steps cannot fail.
    (void)powersgd_p<HostExec, W>(x, m, s, previous, p.seed, q_stream(s, state != nullptr ? state->calls : 0), half,
                                  qbuf.data(), pbuf.data());
    (void)powersgd_q<HostExec, W>(x, m, s, half, pbuf.data(), qbuf.data());
    return !host::any_nonfinite(pbuf.data(), pn) && !host::any_nonfinite(qbuf.data(), qn);
}

// The receiver's answer: CC_COLL_OK when it took the message.
cc_coll_status_t await_ack(Comm &comm, const SendArgs &a, const CallParams &p, const WireHeader &h)
{
    Workspace &ws = workspace_of(comm);
    cc_coll_status_t st = recv_message(a.dest, 2 * a.tag + 1, comm.mpi(), &ws.recv_bytes);
    if (st != CC_COLL_OK) return st;
    WireAck ack;
    if (ws.recv_bytes.size() != sizeof ack)
        return fail(CC_COLL_ERR_INTERNAL, "cc_coll_send (%s): the receiver's answer has %zu bytes, not %zu",
                    channel_name("dest", a.dest, a.tag, p).c_str(), ws.recv_bytes.size(), sizeof ack);
    std::memcpy(&ack, ws.recv_bytes.data(), sizeof ack);
    if (ack.magic != kAckMagic)
        return fail(CC_COLL_ERR_INTERNAL, "cc_coll_send (%s): the receiver's answer is not a cc_coll_recv answer",
                    channel_name("dest", a.dest, a.tag, p).c_str());
    if (ack.status == kAccepted) return CC_COLL_OK;
    ack.reason[kReasonBytes - 1] = '\0';
    return fail(CC_COLL_ERR_MISMATCH,
                "cc_coll_send (%s): the receiver rejected this %s message of %llu %s elements: %s; nothing was "
                "delivered and this channel's residual is as before the call",
                channel_name("dest", a.dest, a.tag, p).c_str(), kind_name(h.kind),
                static_cast<unsigned long long>(h.count), dtype_name(a.dtype), ack.reason);
}

template <typename W>
cc_coll_status_t send_typed(Comm &comm, const SendArgs &a, const CallParams &p)
{
    const std::size_t n = a.count;
    const std::size_t es = dtype_size(a.dtype);
    Workspace &ws = workspace_of(comm);
    StatsSnapshot stats;
    const double t0 = now_seconds();

    Message m;
    cc_coll_status_t st = plan_message(a, p, &m);
    if (st != CC_COLL_OK) return st;

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
    LowRankState *state = lowrank_channel_states(comm).find(key);
    W *sent = nullptr;  // TOPK: the values the receiver adds
    if (m.kind == kLowRank && (host::any_nonfinite(g, n) || !lowrank_factors<W>(comm, g, m.shape, p, a.dtype, state)))
        m.kind = kRaw;
    if (m.kind == kTopk) {
        ws.indices.resize(m.k);
        topk::select<W>(g, n, m.k, ws.indices.data(), &ws.select);
        if (topk::nonfinite_overflow<W>(g, n, ws.indices.data(), m.k) != 0) m.kind = kRaw;
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
        h.payload_bytes = topk::payload_bytes(m.k, a.dtype);
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

    // 3. Send; the receiver answers.
    st = send_bytes(ws.send_bytes.data(), bytes, a.dest, 2 * a.tag, comm.mpi());
    if (st == CC_COLL_OK) st = await_ack(comm, a, p, h);
    const double t2 = now_seconds();
    stats.time_communicate += t2 - t1;
    if (st != CC_COLL_OK) {
        if (created) comm.lep().reset(key);  // the channel is as before the call
        return st;
    }

    // 4. The receiver has it: e = g' - what it stores.
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
    if (p.method == CC_COLL_METHOD_LOWRANK) {
        LowRankState &s = lowrank_channel_states(comm).get(key);
        ++s.calls;
        if (m.kind == kLowRank) {
            s.rows = m.shape.rows;
            s.cols = m.shape.cols;
            s.rank = m.shape.rank;
            s.p<W>() = ws.p_buffer<W>();
            s.q<W>() = ws.q_buffer<W>();
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

// Checks the message in `msg` against the receiver's arguments; fills the
// ack (expectation, and the reason of a rejection). True when it can be
// decoded into the receiver's buffer.
bool check_message(const std::vector<unsigned char> &msg, const RecvArgs &a, const CallParams &p, WireHeader *h,
                   WireAck *ack)
{
    *ack = WireAck{};
    ack->magic = kAckMagic;
    ack->status = kAccepted;
    ack->method = static_cast<std::uint32_t>(p.method);
    ack->dtype = static_cast<std::uint32_t>(a.dtype);
    ack->count = a.count;
    const char *dname = dtype_name(a.dtype);
    if (msg.size() < sizeof *h)
        return reject(ack, "a message of %zu bytes is shorter than the %zu-byte header (not from cc_coll_send)",
                      msg.size(), sizeof *h);
    std::memcpy(h, msg.data(), sizeof *h);
    if (h->magic != kMagic) return reject(ack, "the message is not from cc_coll_send (bad magic)");
    if (h->version != kVersion)
        return reject(ack, "the sender's wire format is version %u, this receiver's is %u (mixed library versions)",
                      static_cast<unsigned>(h->version), static_cast<unsigned>(kVersion));
    if (h->kind > kLowRank || !dtype_valid(h->dtype) || h->payload_bytes != msg.size() - sizeof *h)
        return reject(ack, "malformed message header (kind %u, dtype %u, payload %llu of %zu bytes)",
                      static_cast<unsigned>(h->kind), static_cast<unsigned>(h->dtype),
                      static_cast<unsigned long long>(h->payload_bytes), msg.size() - sizeof *h);
    const auto sdtype = static_cast<cc_coll_dtype_t>(h->dtype);
    if (h->count != a.count || sdtype != a.dtype)
        return reject(ack, "count/dtype differ: the sender sent %llu %s elements, this receiver expects %zu %s",
                      static_cast<unsigned long long>(h->count), dtype_name(sdtype), a.count, dname);
    const std::size_t n = a.count;
    const std::size_t es = dtype_size(a.dtype);
    switch (h->kind) {
    case kRaw:
        if (h->payload_bytes != n * es)
            return reject(ack, "malformed uncompressed message: %llu payload bytes for %zu %s elements",
                          static_cast<unsigned long long>(h->payload_bytes), n, dname);
        return true;
    case kTopk: {
        const std::size_t k = topk::k_for(p.density, n);
        ack->rank_or_k = k;
        if (p.method != CC_COLL_METHOD_TOPK)
            return reject(ack, "method differs: the sender sent TOPK (k = %llu), this receiver's method is %s",
                          static_cast<unsigned long long>(h->rank_or_k), method_name(p.method));
        if (h->rank_or_k != k)
            return reject(ack,
                          "density differs: the sender sent TOPK k = %llu of %zu, this receiver's density %g gives "
                          "k = %zu",
                          static_cast<unsigned long long>(h->rank_or_k), n, p.density, k);
        const unsigned char *payload = msg.data() + sizeof *h;
        const topk::PayloadHeader ph = topk::header_of(payload);
        bool ok = h->payload_bytes == topk::payload_bytes(k, a.dtype) && ph.n == n && ph.k == k;
        for (std::size_t j = 0; ok && j < k; ++j) {
            std::uint32_t idx;
            std::memcpy(&idx, payload + sizeof ph + j * sizeof idx, sizeof idx);
            ok = idx < n;
        }
        if (!ok) return reject(ack, "malformed TOPK payload (sizes or indices out of range)");
        return true;
    }
    case kLowRank: {
        lowrank::Shape s;
        std::string why;
        if (p.method != CC_COLL_METHOD_LOWRANK)
            return reject(ack,
                          "method differs: the sender sent LOWRANK (%llu x %llu, rank %llu), this receiver's method "
                          "is %s",
                          static_cast<unsigned long long>(h->rows), static_cast<unsigned long long>(h->cols),
                          static_cast<unsigned long long>(h->rank_or_k), method_name(p.method));
        if (!lowrank::resolve_shape(n, p.has_shape, p.rows, p.cols, p.rank, &s, &why))
            return reject(ack,
                          "the sender sent LOWRANK %llu x %llu, rank %llu, but this receiver's shape is invalid: %s",
                          static_cast<unsigned long long>(h->rows), static_cast<unsigned long long>(h->cols),
                          static_cast<unsigned long long>(h->rank_or_k), why.c_str());
        ack->rows = s.rows;
        ack->cols = s.cols;
        ack->rank_or_k = static_cast<std::uint64_t>(s.rank);
        if (h->rows != s.rows || h->cols != s.cols || h->rank_or_k != static_cast<std::uint64_t>(s.rank))
            return reject(ack,
                          "shape or rank differs: the sender sent LOWRANK %llu x %llu, rank %llu; this receiver "
                          "expects %zu x %zu, rank %d",
                          static_cast<unsigned long long>(h->rows), static_cast<unsigned long long>(h->cols),
                          static_cast<unsigned long long>(h->rank_or_k), s.rows, s.cols, s.rank);
        if (h->payload_bytes != factor_bytes(s, a.dtype))
            return reject(ack, "malformed LOWRANK payload: %llu bytes, %zu expected",
                          static_cast<unsigned long long>(h->payload_bytes), factor_bytes(s, a.dtype));
        return true;
    }
    }
    return reject(ack, "unknown message kind %u", static_cast<unsigned>(h->kind));
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
    Workspace &ws = workspace_of(comm);
    StatsSnapshot stats;
    const double t0 = now_seconds();
    cc_coll_status_t st = recv_message(a.source, 2 * a.tag, comm.mpi(), &ws.recv_bytes);
    if (st != CC_COLL_OK) return st;
    const double t1 = now_seconds();
    stats.time_communicate += t1 - t0;

    WireHeader h{};
    WireAck ack;
    const bool ok = check_message(ws.recv_bytes, a, p, &h, &ack);
    if (ok)
        with_work_type(a.dtype, [&](auto w) {
            decode<decltype(w)>(ws, h, ws.recv_bytes.data() + sizeof h, a);
            return CC_COLL_OK;
        });
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
