// The point-to-point receiver's checks (docs/wire.md, "What the receiver
// checks, in order") case by case, without MPI: well-formed messages are
// accepted and decoded; each malformed field is CC_COLL_ERR_MISMATCH's
// rejection naming the field and its value, with the receive buffer (and
// the guard bytes around it) untouched. Regression cases of hostile input:
// a 48-byte LOWRANK header of count 0 (once a division by zero), a TOPK
// message with payload_bytes below the 16-byte payload header, out-of-range,
// unsorted and repeated indices, and malformed answers on the sender's side.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "collectives/p2p/p2p_receive.hpp"
#include "p2p_messages.hpp"

namespace cc_coll::detail {
namespace {

using namespace p2p_test;
using p2p_wire::WireAck;
using p2p_wire::WireHeader;

constexpr std::size_t kGuard = 32;
constexpr unsigned char kFill = 0xa5;

struct Result {
    bool accepted = false;
    std::string reason;
    std::vector<unsigned char> body;  // the receive buffer afterwards
    bool guards_intact = true;
    bool untouched = true;  // every byte still kFill
};

Result receive(const std::vector<unsigned char> &msg, std::size_t count, cc_coll_dtype_t dtype, const CallParams &p)
{
    const std::size_t bytes = count * dtype_size(dtype);
    std::vector<unsigned char> area(kGuard + bytes + kGuard, 0xcd);
    std::memset(area.data() + kGuard, kFill, bytes);
    std::unique_ptr<unsigned char[]> exact(new unsigned char[msg.size() > 0 ? msg.size() : 1]);
    if (!msg.empty()) std::memcpy(exact.get(), msg.data(), msg.size());
    Workspace ws;
    RecvArgs a{area.data() + kGuard, count, dtype, 0, 0};
    WireAck ack;
    Result r;
    r.accepted = p2p_receive_message(ws, exact.get(), msg.size(), a, p, &ack);
    r.reason = ack.reason;
    EXPECT_EQ(ack.magic, p2p_wire::kAckMagic);
    EXPECT_EQ(ack.status, r.accepted ? p2p_wire::kAccepted : p2p_wire::kRejected);
    for (std::size_t i = 0; i < kGuard; ++i)
        r.guards_intact = r.guards_intact && area[i] == 0xcd && area[kGuard + bytes + i] == 0xcd;
    r.body.assign(area.begin() + kGuard, area.begin() + static_cast<std::ptrdiff_t>(kGuard + bytes));
    for (unsigned char c : r.body) r.untouched = r.untouched && c == kFill;
    return r;
}

// Rejected, nothing written, and the reason contains `words`.
void expect_rejected(const Result &r, const std::string &words)
{
    EXPECT_FALSE(r.accepted);
    EXPECT_TRUE(r.guards_intact);
    EXPECT_TRUE(r.untouched);
    EXPECT_NE(r.reason.find(words), std::string::npos) << "reason: " << r.reason;
}

WireHeader header_of(const std::vector<unsigned char> &msg)
{
    WireHeader h;
    std::memcpy(&h, msg.data(), sizeof h);
    return h;
}

void set_header(std::vector<unsigned char> &msg, const WireHeader &h) { std::memcpy(msg.data(), &h, sizeof h); }

// Index j of a TOPK message.
void set_index(std::vector<unsigned char> &msg, std::size_t j, std::uint32_t v)
{
    std::memcpy(msg.data() + sizeof(WireHeader) + 16 + 4 * j, &v, 4);
}

// ------------------------------------------------------------- well-formed

TEST(P2pReceive, WellFormedMessagesOfEveryKindAndDtype)
{
    Rng rng(7);
    for (int d = 0; d < 4; ++d) {
        const auto dtype = static_cast<cc_coll_dtype_t>(d);
        const Result raw = receive(raw_message(dtype, 33, rng), 33, dtype, CallParams{});
        EXPECT_TRUE(raw.accepted) << raw.reason;
        const Result topk = receive(topk_message(dtype, 100, 0.1, rng), 100, dtype, topk_params(0.1));
        EXPECT_TRUE(topk.accepted) << topk.reason;
        const CallParams lp = lowrank_params(2);
        const Result low = receive(lowrank_message(dtype, 50, lp, rng), 50, dtype, lp);
        EXPECT_TRUE(low.accepted) << low.reason;
        EXPECT_TRUE(raw.guards_intact && topk.guards_intact && low.guards_intact);
    }
    const Result empty = receive(raw_message(CC_COLL_F32, 0, rng), 0, CC_COLL_F32, lowrank_params(1));
    EXPECT_TRUE(empty.accepted) << empty.reason;
}

// ------------------------------------------------------------- regressions

// A 48-byte LOWRANK header of count 0 and no shape divided by zero in the
// near-square view; now a rejection before any shape arithmetic.
TEST(P2pReceive, LowRankHeaderOfCountZero)
{
    std::vector<unsigned char> msg(sizeof(WireHeader));
    set_header(msg, header(p2p_wire::kLowRank, CC_COLL_F32, 0));
    expect_rejected(receive(msg, 0, CC_COLL_F32, lowrank_params(1)), "LOWRANK message of count 0");
    WireHeader h = header_of(msg);
    h.rows = 3;
    h.cols = 5;
    h.rank_or_k = 1;
    set_header(msg, h);
    expect_rejected(receive(msg, 0, CC_COLL_F32, lowrank_params(4, 0, 0, true)), "count 0");
    lowrank::Shape s;
    std::string why;
    EXPECT_FALSE(lowrank::resolve_shape(0, false, 0, 0, 1, &s, &why));
    EXPECT_FALSE(lowrank::resolve_shape(0, true, 0, 0, 1, &s, &why));
}

// payload_bytes below the TOPK payload header's 16 bytes: refused before a
// byte of the payload is read (the message is allocated to its exact size).
TEST(P2pReceive, TopkPayloadShorterThanItsHeader)
{
    const std::size_t k = topk::k_for(0.1, 100);
    for (std::uint64_t pb : {0u, 8u, 15u}) {
        WireHeader h = header(p2p_wire::kTopk, CC_COLL_F32, 100);
        h.rank_or_k = k;
        h.payload_bytes = pb;
        std::vector<unsigned char> msg(sizeof h + pb, 0);
        set_header(msg, h);
        expect_rejected(receive(msg, 100, CC_COLL_F32, topk_params(0.1)),
                        "TOPK payload_bytes " + std::to_string(pb));
    }
}

TEST(P2pReceive, TopkIndexOutOfRange)
{
    Rng rng(1);
    std::vector<unsigned char> msg = topk_message(CC_COLL_F32, 100, 0.1, rng);
    set_index(msg, 9, 100);
    expect_rejected(receive(msg, 100, CC_COLL_F32, topk_params(0.1)),
                    "TOPK index 100 at position 9 is not below count 100");
    set_index(msg, 9, 0xffffffffu);
    expect_rejected(receive(msg, 100, CC_COLL_F32, topk_params(0.1)), "TOPK index 4294967295 at position 9");
}

TEST(P2pReceive, TopkIndicesUnsortedOrRepeated)
{
    Rng rng(2);
    const std::vector<std::uint32_t> idx = {1, 5, 9, 20, 30, 31, 40, 50, 60, 99};
    std::vector<unsigned char> msg = topk_message(CC_COLL_F64, 100, 0.1, rng, idx);
    EXPECT_TRUE(receive(msg, 100, CC_COLL_F64, topk_params(0.1)).accepted);
    set_index(msg, 3, 8);  // 9 then 8
    expect_rejected(receive(msg, 100, CC_COLL_F64, topk_params(0.1)),
                    "TOPK index 8 at position 3 does not follow 9");
    set_index(msg, 3, 9);  // 9 twice
    expect_rejected(receive(msg, 100, CC_COLL_F64, topk_params(0.1)),
                    "TOPK index 9 at position 3 does not follow 9");
}

TEST(P2pReceive, TopkPayloadHeaderFlagsAndPadding)
{
    Rng rng(3);
    // F16, k = 3: 16 + 3 x 6 = 34 bytes, padded to 40.
    const std::vector<unsigned char> good = topk_message(CC_COLL_F16, 30, 0.1, rng);
    ASSERT_EQ(header_of(good).payload_bytes, 40u);
    std::vector<unsigned char> msg = good;
    const std::uint64_t n = 31;
    std::memcpy(msg.data() + 48, &n, 8);
    expect_rejected(receive(msg, 30, CC_COLL_F16, topk_params(0.1)), "TOPK payload n 31 differs from count 30");
    msg = good;
    const std::uint32_t k = 4;
    std::memcpy(msg.data() + 56, &k, 4);
    expect_rejected(receive(msg, 30, CC_COLL_F16, topk_params(0.1)), "TOPK payload k 4 differs from k 3");
    msg = good;
    const std::uint32_t flags = 1;
    std::memcpy(msg.data() + 60, &flags, 4);
    expect_rejected(receive(msg, 30, CC_COLL_F16, topk_params(0.1)), "TOPK payload flags 0x1");
    msg = good;
    msg.back() = 0x42;
    expect_rejected(receive(msg, 30, CC_COLL_F16, topk_params(0.1)), "TOPK padding byte 39 of the payload is 0x42");
}

TEST(P2pReceive, LowRankShapeOfTheSender)
{
    Rng rng(4);
    const CallParams p = lowrank_params(2);
    const std::vector<unsigned char> good = lowrank_message(CC_COLL_F32, 50, p, rng);  // 8 x 7, rank 2
    auto with = [&](std::uint64_t rows, std::uint64_t cols, std::uint64_t r) {
        std::vector<unsigned char> msg = good;
        WireHeader h = header_of(msg);
        h.rows = rows;
        h.cols = cols;
        h.rank_or_k = r;
        set_header(msg, h);
        return receive(msg, 50, CC_COLL_F32, p);
    };
    expect_rejected(with(0, 7, 2), "LOWRANK shape 0 x 7 has no elements");
    expect_rejected(with(1ull << 32, 1ull << 32, 2), "LOWRANK shape 4294967296 x 4294967296 overflows");
    expect_rejected(with(7, 7, 2), "LOWRANK shape 7 x 7 holds fewer than count 50");
    expect_rejected(with(8, 7, 0), "LOWRANK rank 0 outside");
    expect_rejected(with(8, 7, 8), "LOWRANK rank 8 outside");
    expect_rejected(with(8, 7, 1ull << 40), "LOWRANK rank 1099511627776 outside");
    expect_rejected(with(10, 5, 2), "shape or rank differs");
    expect_rejected(with(8, 7, 1), "shape or rank differs");
}

// ------------------------------------------------------------- the header

TEST(P2pReceive, HeaderFieldsInOrder)
{
    Rng rng(5);
    const std::vector<unsigned char> good = raw_message(CC_COLL_F32, 10, rng);
    expect_rejected(receive(std::vector<unsigned char>(good.begin(), good.begin() + 47), 10, CC_COLL_F32, {}),
                    "a message of 47 bytes is shorter than the 48-byte header");
    auto with = [&](auto edit) {
        std::vector<unsigned char> msg = good;
        WireHeader h = header_of(msg);
        edit(h);
        set_header(msg, h);
        return receive(msg, 10, CC_COLL_F32, CallParams{});
    };
    expect_rejected(with([](WireHeader &h) { h.magic = 0x12345678; }), "magic 0x12345678 is not 0x50324343");
    expect_rejected(with([](WireHeader &h) { h.version = 2; }), "version 2");
    expect_rejected(with([](WireHeader &h) { h.kind = 3; }), "kind 3 is not");
    expect_rejected(with([](WireHeader &h) { h.dtype = 9; }), "dtype 9 is not");
    expect_rejected(with([](WireHeader &h) { h.payload_bytes = 41; }),
                    "payload_bytes 41 differs from the 40 bytes received");
    expect_rejected(with([](WireHeader &h) { h.count = 11; }), "count/dtype differ");
    expect_rejected(with([](WireHeader &h) { h.rows = 1; }), "uncompressed message with rows 1");
    expect_rejected(with([](WireHeader &h) { h.rank_or_k = 5; }), "rank_or_k 5");
    // payload_bytes matching the message but not count x 4.
    std::vector<unsigned char> longer = good;
    longer.resize(good.size() + 4, 0);
    WireHeader h = header_of(longer);
    h.payload_bytes = 44;
    set_header(longer, h);
    expect_rejected(receive(longer, 10, CC_COLL_F32, {}), "uncompressed message: payload_bytes 44 for 10 f32");
}

// ------------------------------------------------------------- the answer

std::vector<unsigned char> ack_bytes(std::uint32_t magic, std::uint32_t status, const char *reason)
{
    WireAck ack{};
    ack.magic = magic;
    ack.status = status;
    std::snprintf(ack.reason, sizeof ack.reason, "%s", reason);
    std::vector<unsigned char> out(sizeof ack);
    std::memcpy(out.data(), &ack, sizeof ack);
    return out;
}

TEST(P2pReadAck, WellFormedAnswers)
{
    std::string why = "x";
    std::vector<unsigned char> a = ack_bytes(p2p_wire::kAckMagic, 0, "");
    EXPECT_EQ(p2p_read_ack(a.data(), a.size(), &why), AckVerdict::Accepted);
    EXPECT_TRUE(why.empty());
    a = ack_bytes(p2p_wire::kAckMagic, 1, "count/dtype differ\x01");
    EXPECT_EQ(p2p_read_ack(a.data(), a.size(), &why), AckVerdict::Rejected);
    EXPECT_EQ(why, "count/dtype differ?");
}

// A malformed answer was CC_COLL_ERR_INTERNAL; it is now a Malformed verdict
// (CC_COLL_ERR_MISMATCH in cc_coll_send) naming the problem.
TEST(P2pReadAck, MalformedAnswers)
{
    std::string why;
    std::vector<unsigned char> a = ack_bytes(p2p_wire::kAckMagic, 0, "");
    EXPECT_EQ(p2p_read_ack(a.data(), 100, &why), AckVerdict::Malformed);
    EXPECT_NE(why.find("has 100 bytes, not 256"), std::string::npos) << why;
    a.push_back(0);
    EXPECT_EQ(p2p_read_ack(a.data(), a.size(), &why), AckVerdict::Malformed);
    EXPECT_NE(why.find("has 257 bytes"), std::string::npos) << why;
    a = ack_bytes(0xdeadbeef, 0, "");
    EXPECT_EQ(p2p_read_ack(a.data(), a.size(), &why), AckVerdict::Malformed);
    EXPECT_NE(why.find("magic 0xdeadbeef"), std::string::npos) << why;
    a = ack_bytes(p2p_wire::kAckMagic, 7, "");
    EXPECT_EQ(p2p_read_ack(a.data(), a.size(), &why), AckVerdict::Malformed);
    EXPECT_NE(why.find("status 7"), std::string::npos) << why;
    a = ack_bytes(p2p_wire::kAckMagic, 1, "");
    std::memset(a.data() + 48, 'x', 208);
    EXPECT_EQ(p2p_read_ack(a.data(), a.size(), &why), AckVerdict::Malformed);
    EXPECT_NE(why.find("without a terminating NUL"), std::string::npos) << why;
}

}  // namespace
}  // namespace cc_coll::detail
