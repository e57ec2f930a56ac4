// Seeded mutation fuzzing of the point-to-point receiver's check and decode
// (p2p_receive_message) and of the sender's reading of the answer
// (p2p_read_ack), without MPI and without libFuzzer.
//
// Each input: a well-formed message (RAW, TOPK or LOWRANK, every dtype,
// counts from 0 to 2000; p2p_messages.hpp), a receiver call that matches it
// or differs in one argument, and 0 to 4 mutations: bit flips, random bytes,
// header fields and TOPK payload fields (n, k, flags, one index, a padding
// byte) set to boundary values, truncation, extension; half the time
// payload_bytes is then fixed up to the new size so that the mutation
// reaches the later checks. The message is copied into an allocation of
// exactly its size and decoded twice, into a buffer filled with 0xa5 and
// then with 0x5a, each with 64 guard bytes on both sides. Asserted:
//   - the guard bytes are never written;
//   - accepted: both decodes are byte-identical (every byte of the buffer
//     was written, deterministically) and the answer's reason is empty;
//     an unmutated message to a matching call is always accepted, and RAW
//     and TOPK decode to exactly what was sent;
//   - rejected: the buffer is untouched (still the fill pattern) and the
//     answer has status 1 and a non-empty, NUL-terminated reason;
//   - both decodes agree on the verdict; the answer has the ack magic, and
//     zeros after the reason's NUL.
// Every fourth input also fuzzes an answer: p2p_read_ack says Malformed
// exactly when the size is not 256, the magic or status is wrong, or the
// reason has no NUL, and a rejection's reason is printable.
//
//   cc_coll_fuzz_p2p_recv [--inputs N] [--seed S] [--verbose]
//
// Exit status 0 when every input passed; else 1 after printing the input's
// number, the seed and the message in hex.
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "collectives/p2p/p2p_receive.hpp"
#include "p2p_messages.hpp"

using namespace cc_coll::detail;
using namespace cc_coll::detail::p2p_test;
using p2p_wire::WireAck;
using p2p_wire::WireHeader;

namespace {

constexpr std::size_t kGuard = 64;
constexpr unsigned char kGuardByte = 0xcd;

std::uint64_t g_seed = 1;
std::uint64_t g_input = 0;

[[noreturn]] void failed(const char *what, const std::vector<unsigned char> &msg, const std::string &reason)
{
    fuzz::report_failure(g_input, g_seed, what, "reason", reason, "message", msg, 256);
}

const std::size_t kCounts[] = {0, 1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 64, 100, 255, 256, 1000};
const double kDensities[] = {0.001, 0.01, 0.1, 0.25, 0.5, 0.9, 1.0};

std::size_t pick_count(Rng &rng)
{
    if (rng.chance(70)) return kCounts[rng.below(sizeof kCounts / sizeof kCounts[0])];
    return static_cast<std::size_t>(rng.below(2001));
}

// A boundary value for a 64-bit field whose well-formed value is `v`.
std::uint64_t boundary(Rng &rng, std::uint64_t v)
{
    const std::uint64_t values[] = {0,
                                    1,
                                    2,
                                    v - 1,
                                    v + 1,
                                    v * 2,
                                    v / 2,
                                    0xffffffffull,
                                    0x100000000ull,
                                    0x7fffffffull,
                                    0x80000000ull,
                                    ~0ull,
                                    ~0ull / 2,
                                    (~0ull / 2) + 1,
                                    0xffffffffull * 0xffffffffull,
                                    rng.next()};
    return values[rng.below(sizeof values / sizeof values[0])];
}

struct Input {
    std::vector<unsigned char> msg;
    std::size_t count = 0;
    cc_coll_dtype_t dtype = CC_COLL_F32;
    CallParams params;  // the receiver's
    bool matching = true;  // the receiver's call is the sender's
    int mutations = 0;
};

Input make_input(Rng &rng)
{
    Input in;
    in.dtype = static_cast<cc_coll_dtype_t>(rng.below(4));
    const unsigned kind = static_cast<unsigned>(rng.below(3));
    in.count = pick_count(rng);
    if (kind == p2p_wire::kRaw || in.count == 0) {
        in.msg = raw_message(in.dtype, in.count, rng);
        const cc_coll_method_t methods[] = {CC_COLL_METHOD_NONE, CC_COLL_METHOD_TOPK, CC_COLL_METHOD_LOWRANK};
        in.params.method = methods[rng.below(3)];
    } else if (kind == p2p_wire::kTopk) {
        in.params = topk_params(kDensities[rng.below(sizeof kDensities / sizeof kDensities[0])]);
        in.msg = topk_message(in.dtype, in.count, in.params.density, rng);
    } else {
        const int rank = 1 + static_cast<int>(rng.below(5));
        if (rng.chance(30)) {
            // rows x cols = count exactly: rows a divisor of count.
            std::uint64_t rows = 1 + rng.below(in.count);
            while (in.count % rows != 0) --rows;
            in.params = lowrank_params(rank, rows, rng.chance(50) ? 0 : in.count / rows, true);
        } else {
            in.params = lowrank_params(rank);
        }
        in.msg = lowrank_message(in.dtype, in.count, in.params, rng);
    }
    // The receiver's call: the sender's, or one argument differs.
    if (rng.chance(15)) {
        in.matching = false;
        switch (rng.below(6)) {
        case 0: in.count = in.count + 1; break;
        case 1: in.count = in.count > 0 ? in.count - 1 : 0; break;
        case 2: in.dtype = static_cast<cc_coll_dtype_t>((in.dtype + 1 + rng.below(3)) % 4); break;
        case 3: in.params.method = static_cast<cc_coll_method_t>(rng.below(4)); break;
        case 4: in.params.density = kDensities[rng.below(sizeof kDensities / sizeof kDensities[0])]; break;
        case 5:
            in.params.rank = 1 + static_cast<int>(rng.below(6));
            if (rng.chance(50)) in.params.has_shape = false;
            break;
        }
    }
    return in;
}

void put64(std::vector<unsigned char> &m, std::size_t off, std::uint64_t v)
{
    if (off + 8 <= m.size()) std::memcpy(m.data() + off, &v, 8);
}
void put32(std::vector<unsigned char> &m, std::size_t off, std::uint32_t v)
{
    if (off + 4 <= m.size()) std::memcpy(m.data() + off, &v, 4);
}
std::uint64_t get64(const std::vector<unsigned char> &m, std::size_t off)
{
    std::uint64_t v = 0;
    if (off + 8 <= m.size()) std::memcpy(&v, m.data() + off, 8);
    return v;
}
std::uint32_t get32(const std::vector<unsigned char> &m, std::size_t off)
{
    std::uint32_t v = 0;
    if (off + 4 <= m.size()) std::memcpy(&v, m.data() + off, 4);
    return v;
}

void mutate(std::vector<unsigned char> &m, Rng &rng)
{
    const std::size_t size = m.size();
    switch (rng.below(9)) {
    case 0:  // bit flips
        if (size > 0)
            for (std::uint64_t b = 1 + rng.below(8); b > 0; --b) m[rng.below(size)] ^= 1u << rng.below(8);
        break;
    case 1:  // random bytes, biased towards the header and the TOPK header
        for (std::uint64_t b = 1 + rng.below(4); b > 0 && size > 0; --b) {
            const std::size_t at = rng.chance(60) ? rng.below(std::min<std::size_t>(size, 64)) : rng.below(size);
            const unsigned char values[] = {0, 1, 0x7f, 0x80, 0xff, static_cast<unsigned char>(rng.next())};
            m[at] = values[rng.below(sizeof values)];
        }
        break;
    case 2: {  // a 64-bit header field (count, rows, cols, rank_or_k, payload_bytes)
        const std::size_t off = 8 * (1 + rng.below(5));
        put64(m, off, boundary(rng, get64(m, off)));
        break;
    }
    case 3:  // magic, version, kind or dtype
        switch (rng.below(4)) {
        case 0: put32(m, 0, static_cast<std::uint32_t>(boundary(rng, get32(m, 0)))); break;
        case 1:
            if (size >= 6) {
                const std::uint16_t v = static_cast<std::uint16_t>(rng.below(4));
                std::memcpy(m.data() + 4, &v, 2);
            }
            break;
        case 2:
            if (size >= 7) m[6] = static_cast<unsigned char>(rng.chance(70) ? rng.below(4) : rng.next());
            break;
        case 3:
            if (size >= 8) m[7] = static_cast<unsigned char>(rng.chance(70) ? rng.below(5) : rng.next());
            break;
        }
        break;
    case 4: {  // TOPK payload header: n, k, flags
        const std::size_t p = sizeof(WireHeader);
        switch (rng.below(3)) {
        case 0: put64(m, p, boundary(rng, get64(m, p))); break;
        case 1: put32(m, p + 8, static_cast<std::uint32_t>(boundary(rng, get32(m, p + 8)))); break;
        case 2: put32(m, p + 12, rng.chance(50) ? 1u : static_cast<std::uint32_t>(rng.next())); break;
        }
        break;
    }
    case 5: {  // one TOPK index: out of range, equal to or below its neighbour
        const std::size_t first = sizeof(WireHeader) + 16;
        const std::uint64_t k = get32(m, sizeof(WireHeader) + 8);
        if (k == 0 || first + 4 > size) break;
        const std::size_t j = rng.below(std::min<std::uint64_t>(k, (size - first) / 4));
        const std::uint32_t n = static_cast<std::uint32_t>(get64(m, sizeof(WireHeader)));
        const std::uint32_t here = get32(m, first + 4 * j);
        const std::uint32_t before = j > 0 ? get32(m, first + 4 * (j - 1)) : 0;
        const std::uint32_t values[] = {n, n + 1, n - 1, 0, before, before - 1, here + 1, here - 1, 0xffffffffu,
                                        0x80000000u};
        put32(m, first + 4 * j, values[rng.below(sizeof values / sizeof values[0])]);
        break;
    }
    case 6:  // the last byte (TOPK padding, the last value or factor)
        if (size > 0) m[size - 1 - rng.below(std::min<std::size_t>(size, 8))] = static_cast<unsigned char>(1 + rng.below(255));
        break;
    case 7: {  // truncation
        std::size_t to;
        switch (rng.below(4)) {
        case 0: to = rng.below(sizeof(WireHeader) + 1); break;
        case 1: to = sizeof(WireHeader) + rng.below(24); break;
        case 2: to = size > 0 ? size - 1 - rng.below(std::min<std::size_t>(size, 8)) : 0; break;
        default: to = rng.below(size + 1); break;
        }
        if (to < size) m.resize(to);
        break;
    }
    case 8:  // extension
        for (std::uint64_t b = 1 + (rng.chance(50) ? rng.below(8) : rng.below(100)); b > 0; --b)
            m.push_back(rng.chance(50) ? 0 : static_cast<unsigned char>(rng.next()));
        break;
    }
    if (m.size() >= sizeof(WireHeader) && rng.chance(50)) put64(m, 40, m.size() - sizeof(WireHeader));
}

struct Outcome {
    bool accepted = false;
    std::vector<unsigned char> body;
    std::string reason;
};

// One decode into a guarded buffer filled with `fill`.
Outcome run_once(Workspace &ws, const Input &in, const std::vector<unsigned char> &msg, unsigned char fill)
{
    const std::size_t bytes = in.count * dtype_size(in.dtype);
    std::vector<unsigned char> area(kGuard + bytes + kGuard, kGuardByte);
    std::memset(area.data() + kGuard, fill, bytes);
    // The message in an allocation of exactly its size.
    std::unique_ptr<unsigned char[]> exact(new unsigned char[msg.size() > 0 ? msg.size() : 1]);
    if (!msg.empty()) std::memcpy(exact.get(), msg.data(), msg.size());

    RecvArgs a{area.data() + kGuard, in.count, in.dtype, 0, 0};
    WireAck ack;
    std::memset(&ack, 0xee, sizeof ack);
    Outcome out;
    out.accepted = p2p_receive_message(ws, exact.get(), msg.size(), a, in.params, &ack);

    for (std::size_t i = 0; i < kGuard; ++i)
        if (area[i] != kGuardByte || area[kGuard + bytes + i] != kGuardByte)
            failed("a guard byte around the receive buffer was written", msg, "");
    if (ack.magic != p2p_wire::kAckMagic) failed("the answer lacks the ack magic", msg, "");
    const void *nul = std::memchr(ack.reason, '\0', sizeof ack.reason);
    if (nul == nullptr) failed("the answer's reason has no NUL", msg, "");
    const std::size_t len = static_cast<std::size_t>(static_cast<const char *>(nul) - ack.reason);
    out.reason.assign(ack.reason, len);
    for (std::size_t i = len; i < sizeof ack.reason; ++i)
        if (ack.reason[i] != 0) failed("the answer has non-zero bytes after the reason's NUL", msg, out.reason);
    if (out.accepted) {
        if (ack.status != p2p_wire::kAccepted || len != 0)
            failed("accepted, but the answer says otherwise", msg, out.reason);
    } else {
        if (ack.status != p2p_wire::kRejected || len == 0)
            failed("rejected without status 1 and a reason", msg, out.reason);
        for (std::size_t i = 0; i < bytes; ++i)
            if (area[kGuard + i] != fill) failed("rejected, but the receive buffer was written", msg, out.reason);
    }
    out.body.assign(area.begin() + kGuard, area.begin() + static_cast<std::ptrdiff_t>(kGuard + bytes));
    return out;
}

// RAW and TOPK: what an accepted unmutated message must decode to.
void check_content(const Input &in, const std::vector<unsigned char> &msg, const std::vector<unsigned char> &body)
{
    WireHeader h;
    std::memcpy(&h, msg.data(), sizeof h);
    const unsigned char *payload = msg.data() + sizeof h;
    const std::size_t es = dtype_size(in.dtype);
    if (h.kind == p2p_wire::kRaw) {
        if (in.count > 0 && std::memcmp(body.data(), payload, in.count * es) != 0)
            failed("a RAW message decoded to other bytes than it carries", msg, "");
    } else if (h.kind == p2p_wire::kTopk) {
        const std::size_t k = static_cast<std::size_t>(h.rank_or_k);
        std::vector<unsigned char> expect(in.count * es, 0);
        for (std::size_t j = 0; j < k; ++j) {
            std::uint32_t idx;
            std::memcpy(&idx, payload + 16 + 4 * j, 4);
            std::memcpy(expect.data() + idx * es, payload + 16 + 4 * k + j * es, es);
        }
        if (expect != body) failed("a TOPK message decoded to other values than it carries", msg, "");
    }
}

// The answer: Malformed exactly for the documented defects.
void fuzz_ack(Rng &rng, std::map<std::string, std::uint64_t> *verdicts)
{
    WireAck ack{};
    ack.magic = p2p_wire::kAckMagic;
    ack.status = static_cast<std::uint32_t>(rng.below(2));
    if (ack.status == p2p_wire::kRejected) std::snprintf(ack.reason, sizeof ack.reason, "count/dtype differ");
    std::vector<unsigned char> m(sizeof ack);
    std::memcpy(m.data(), &ack, sizeof ack);
    for (std::uint64_t n = rng.below(4); n > 0; --n) {
        switch (rng.below(5)) {
        case 0: m[rng.below(m.size())] ^= static_cast<unsigned char>(1u << rng.below(8)); break;
        case 1: put32(m, 4, static_cast<std::uint32_t>(boundary(rng, 1))); break;
        case 2: m.resize(rng.below(m.size())); break;
        case 3: m.push_back(static_cast<unsigned char>(rng.next())); break;
        case 4:  // fill the reason: no NUL, or non-printable bytes
            if (m.size() == sizeof ack)
                for (std::size_t i = 48; i < m.size(); ++i) m[i] = static_cast<unsigned char>(rng.chance(50) ? 'x' : 1 + rng.below(255));
            break;
        }
    }
    std::unique_ptr<unsigned char[]> exact(new unsigned char[m.size() > 0 ? m.size() : 1]);
    if (!m.empty()) std::memcpy(exact.get(), m.data(), m.size());
    std::string why;
    const AckVerdict v = p2p_read_ack(exact.get(), m.size(), &why);
    bool malformed = m.size() != sizeof ack;
    if (!malformed) {
        WireAck got;
        std::memcpy(&got, m.data(), sizeof got);
        malformed = got.magic != p2p_wire::kAckMagic || got.status > 1 ||
                    std::memchr(got.reason, '\0', sizeof got.reason) == nullptr;
    }
    if ((v == AckVerdict::Malformed) != malformed) failed("p2p_read_ack misjudged an answer", m, why);
    if (v == AckVerdict::Malformed && why.empty()) failed("a malformed answer without an explanation", m, why);
    if (v == AckVerdict::Rejected)
        for (char c : why)
            if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e)
                failed("a rejection's reason with a non-printable byte", m, why);
    ++(*verdicts)[v == AckVerdict::Accepted ? "accepted" : v == AckVerdict::Rejected ? "rejected" : "malformed"];
}

// The reason without its numbers: "TOPK index N at position N is not below count N".
std::string reason_class(const std::string &reason)
{
    std::string out;
    for (std::size_t i = 0; i < reason.size() && out.size() < 60; ++i) {
        const char c = reason[i];
        if ((c >= '0' && c <= '9') || (c == 'x' && i > 0 && reason[i - 1] == '0')) {
            if (out.empty() || out.back() != 'N') out += 'N';
        } else if (!(out.size() > 0 && out.back() == 'N' && ((c >= 'a' && c <= 'f') || c == '.'))) {
            out += c;
        }
    }
    return out;
}

}  // namespace

int main(int argc, char **argv)
{
    fuzz::DriverArgs args;
    args.inputs = 20000;
    if (!fuzz::parse_driver_args(argc, argv, &args)) return 2;
    g_seed = args.seed;
    const std::uint64_t inputs = args.inputs;
    const bool verbose = args.verbose;
    Rng rng(g_seed);
    Workspace ws;
    std::uint64_t accepted = 0, rejected = 0, unmutated = 0;
    std::map<std::string, std::uint64_t> reasons, acks;
    for (g_input = 0; g_input < inputs; ++g_input) {
        Input in = make_input(rng);
        const std::vector<unsigned char> original = in.msg;
        in.mutations = rng.chance(10) ? 0 : 1 + static_cast<int>(rng.below(4));
        for (int i = 0; i < in.mutations; ++i) mutate(in.msg, rng);
        const bool pristine = in.msg == original && in.matching;

        const Outcome a = run_once(ws, in, in.msg, 0xa5);
        const Outcome b = run_once(ws, in, in.msg, 0x5a);
        if (a.accepted != b.accepted || a.reason != b.reason)
            failed("two decodes of one message disagree", in.msg, a.reason + " / " + b.reason);
        if (a.accepted) {
            if (a.body != b.body) failed("accepted, but not every byte of the buffer was written", in.msg, "");
            ++accepted;
        } else {
            ++rejected;
            ++reasons[reason_class(a.reason)];
        }
        if (pristine) {
            ++unmutated;
            if (!a.accepted) failed("a well-formed message to a matching call was rejected", in.msg, a.reason);
            check_content(in, in.msg, a.body);
        }
        if (g_input % 4 == 0) fuzz_ack(rng, &acks);
    }
    std::printf("cc_coll_fuzz_p2p_recv: seed %" PRIu64 ", %" PRIu64 " messages: %" PRIu64 " accepted (%" PRIu64
                " unmutated to a matching call), %" PRIu64 " rejected with %zu kinds of reason; %" PRIu64
                " answers: %" PRIu64 " accepted, %" PRIu64 " rejected, %" PRIu64 " malformed; no failure\n",
                g_seed, inputs, accepted, unmutated, rejected, reasons.size(),
                acks["accepted"] + acks["rejected"] + acks["malformed"], acks["accepted"], acks["rejected"],
                acks["malformed"]);
    if (verbose)
        for (const auto &r : reasons) std::printf("  %8" PRIu64 "  %s\n", r.second, r.first.c_str());
    return 0;
}
