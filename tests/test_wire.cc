// The wire formats of docs/wire.md, pinned without MPI: the point-to-point
// header and acknowledgement (sizes, offsets, magic values, version), the
// TOPK payload as topk::encode writes it for every dtype (checked byte by
// byte against images built here from the documented offsets and the IEEE
// bit patterns written out by hand), the payload size rule, the count-sketch
// support bitmap's bit order and size, and the sketch's cell indexing.
//
// Multi-byte fields travel in the sender's own byte order (docs/wire.md,
// "Conventions"); the expected images are built with put(), which writes a
// value's bytes by shifting in the host's order, so the tests hold on either
// byte order.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cc_coll.h"
#include "compressors/lowrank/powersgd.hpp"
#include "compressors/sketch/count_sketch.hpp"
#include "wire/p2p_wire.hpp"
#include "wire/topk_payload.hpp"

namespace cc_coll::detail {
namespace {

bool host_is_little_endian()
{
    const std::uint16_t one = 1;
    unsigned char first = 0;
    std::memcpy(&first, &one, 1);
    return first == 1;
}

// Writes the `size` low bytes of v at out[off ..] in the host's byte order.
void put(std::vector<unsigned char> &out, std::size_t off, std::uint64_t v, std::size_t size)
{
    const bool le = host_is_little_endian();
    for (std::size_t b = 0; b < size; ++b) {
        const std::size_t shift = 8 * (le ? b : size - 1 - b);
        out[off + b] = static_cast<unsigned char>((v >> shift) & 0xffu);
    }
}

// Byte offset of the first difference, or -1.
long first_difference(const unsigned char *a, const std::vector<unsigned char> &b, std::size_t bytes)
{
    for (std::size_t i = 0; i < bytes; ++i)
        if (a[i] != b[i]) return static_cast<long>(i);
    return -1;
}

// ================================================================ point-to-point

using p2p_wire::WireAck;
using p2p_wire::WireHeader;

TEST(WireP2p, HeaderIs48BytesWithTheDocumentedOffsets)
{
    EXPECT_EQ(sizeof(WireHeader), 48u);
    EXPECT_EQ(offsetof(WireHeader, magic), 0u);
    EXPECT_EQ(offsetof(WireHeader, version), 4u);
    EXPECT_EQ(offsetof(WireHeader, kind), 6u);
    EXPECT_EQ(offsetof(WireHeader, dtype), 7u);
    EXPECT_EQ(offsetof(WireHeader, count), 8u);
    EXPECT_EQ(offsetof(WireHeader, rows), 16u);
    EXPECT_EQ(offsetof(WireHeader, cols), 24u);
    EXPECT_EQ(offsetof(WireHeader, rank_or_k), 32u);
    EXPECT_EQ(offsetof(WireHeader, payload_bytes), 40u);
    EXPECT_EQ(sizeof(WireHeader::magic), 4u);
    EXPECT_EQ(sizeof(WireHeader::version), 2u);
    EXPECT_EQ(sizeof(WireHeader::kind), 1u);
    EXPECT_EQ(sizeof(WireHeader::dtype), 1u);
    EXPECT_EQ(sizeof(WireHeader::count), 8u);
    EXPECT_EQ(sizeof(WireHeader::rows), 8u);
    EXPECT_EQ(sizeof(WireHeader::cols), 8u);
    EXPECT_EQ(sizeof(WireHeader::rank_or_k), 8u);
    EXPECT_EQ(sizeof(WireHeader::payload_bytes), 8u);
}

TEST(WireP2p, AckIs256BytesWithTheDocumentedOffsets)
{
    EXPECT_EQ(sizeof(WireAck), 256u);
    EXPECT_EQ(p2p_wire::kReasonBytes, 208u);
    EXPECT_EQ(offsetof(WireAck, magic), 0u);
    EXPECT_EQ(offsetof(WireAck, status), 4u);
    EXPECT_EQ(offsetof(WireAck, method), 8u);
    EXPECT_EQ(offsetof(WireAck, dtype), 12u);
    EXPECT_EQ(offsetof(WireAck, count), 16u);
    EXPECT_EQ(offsetof(WireAck, rows), 24u);
    EXPECT_EQ(offsetof(WireAck, cols), 32u);
    EXPECT_EQ(offsetof(WireAck, rank_or_k), 40u);
    EXPECT_EQ(offsetof(WireAck, reason), 48u);
    EXPECT_EQ(sizeof(WireAck::magic), 4u);
    EXPECT_EQ(sizeof(WireAck::status), 4u);
    EXPECT_EQ(sizeof(WireAck::method), 4u);
    EXPECT_EQ(sizeof(WireAck::dtype), 4u);
    EXPECT_EQ(sizeof(WireAck::count), 8u);
    EXPECT_EQ(sizeof(WireAck::rows), 8u);
    EXPECT_EQ(sizeof(WireAck::cols), 8u);
    EXPECT_EQ(sizeof(WireAck::rank_or_k), 8u);
    EXPECT_EQ(sizeof(WireAck::reason), 208u);
}

TEST(WireP2p, MagicVersionKindsAndStatuses)
{
    EXPECT_EQ(p2p_wire::kMagic, 0x50324343u);
    EXPECT_EQ(p2p_wire::kAckMagic, 0x4b434143u);
    EXPECT_EQ(p2p_wire::kVersion, 1u);
    EXPECT_EQ(static_cast<unsigned>(p2p_wire::kRaw), 0u);
    EXPECT_EQ(static_cast<unsigned>(p2p_wire::kTopk), 1u);
    EXPECT_EQ(static_cast<unsigned>(p2p_wire::kLowRank), 2u);
    EXPECT_EQ(static_cast<unsigned>(p2p_wire::kAccepted), 0u);
    EXPECT_EQ(static_cast<unsigned>(p2p_wire::kRejected), 1u);
    // The magic values spell their names on little-endian hosts.
    if (host_is_little_endian()) {
        char text[5] = {0};
        std::memcpy(text, &p2p_wire::kMagic, 4);
        EXPECT_STREQ(text, "CC2P");
        std::memcpy(text, &p2p_wire::kAckMagic, 4);
        EXPECT_STREQ(text, "CACK");
    }
}

// The header's dtype byte and the ack's method and dtype words carry the C
// ABI's enumerators: their values are part of the wire format.
TEST(WireP2p, EnumeratorsCarriedOnTheWire)
{
    EXPECT_EQ(static_cast<int>(CC_COLL_F32), 0);
    EXPECT_EQ(static_cast<int>(CC_COLL_F64), 1);
    EXPECT_EQ(static_cast<int>(CC_COLL_F16), 2);
    EXPECT_EQ(static_cast<int>(CC_COLL_BF16), 3);
    EXPECT_EQ(static_cast<int>(CC_COLL_METHOD_NONE), 0);
    EXPECT_EQ(static_cast<int>(CC_COLL_METHOD_TOPK), 1);
    EXPECT_EQ(static_cast<int>(CC_COLL_METHOD_SKETCH), 2);
    EXPECT_EQ(static_cast<int>(CC_COLL_METHOD_LOWRANK), 3);
}

// A header as the sender copies it onto the wire (memcpy of the struct),
// against the image built from the documented offsets: no padding anywhere.
TEST(WireP2p, HeaderImage)
{
    WireHeader h{};
    h.magic = p2p_wire::kMagic;
    h.version = p2p_wire::kVersion;
    h.kind = p2p_wire::kLowRank;
    h.dtype = static_cast<std::uint8_t>(CC_COLL_BF16);
    h.count = 0x0102030405060708ull;
    h.rows = 0x1112131415161718ull;
    h.cols = 0x2122232425262728ull;
    h.rank_or_k = 0x3132333435363738ull;
    h.payload_bytes = 0x4142434445464748ull;
    unsigned char bytes[sizeof(WireHeader)];
    std::memcpy(bytes, &h, sizeof h);

    std::vector<unsigned char> want(48, 0xEE);
    put(want, 0, 0x50324343u, 4);
    put(want, 4, 1, 2);
    put(want, 6, 2, 1);  // kind LOWRANK
    put(want, 7, 3, 1);  // dtype BF16
    put(want, 8, 0x0102030405060708ull, 8);
    put(want, 16, 0x1112131415161718ull, 8);
    put(want, 24, 0x2122232425262728ull, 8);
    put(want, 32, 0x3132333435363738ull, 8);
    put(want, 40, 0x4142434445464748ull, 8);
    EXPECT_EQ(first_difference(bytes, want, 48), -1);
}

TEST(WireP2p, AckImage)
{
    WireAck a{};
    a.magic = p2p_wire::kAckMagic;
    a.status = p2p_wire::kRejected;
    a.method = static_cast<std::uint32_t>(CC_COLL_METHOD_TOPK);
    a.dtype = static_cast<std::uint32_t>(CC_COLL_F16);
    a.count = 0x0102030405060708ull;
    a.rows = 0x1112131415161718ull;
    a.cols = 0x2122232425262728ull;
    a.rank_or_k = 0x3132333435363738ull;
    std::memcpy(a.reason, "why", 4);
    unsigned char bytes[sizeof(WireAck)];
    std::memcpy(bytes, &a, sizeof a);

    std::vector<unsigned char> want(256, 0);
    put(want, 0, 0x4b434143u, 4);
    put(want, 4, 1, 4);   // rejected
    put(want, 8, 1, 4);   // method TOPK
    put(want, 12, 2, 4);  // dtype F16
    put(want, 16, 0x0102030405060708ull, 8);
    put(want, 24, 0x1112131415161718ull, 8);
    put(want, 32, 0x2122232425262728ull, 8);
    put(want, 40, 0x3132333435363738ull, 8);
    want[48] = 'w';
    want[49] = 'h';
    want[50] = 'y';  // then NUL and zeros to byte 255
    EXPECT_EQ(first_difference(bytes, want, 256), -1);
}

// A LOWRANK message's header fields and payload size for count 10 without a
// shape: rows = ceil(sqrt(10)) = 4, cols = ceil(10 / 4) = 3, r = min(4, 3,
// 2) = 2; P is 4 x 2 and Q is 3 x 2 work-type values.
TEST(WireP2p, LowRankShapeAndFactorElements)
{
    lowrank::Shape s;
    std::string why;
    ASSERT_TRUE(lowrank::resolve_shape(10, false, 0, 0, 2, &s, &why)) << why;
    EXPECT_EQ(s.rows, 4u);
    EXPECT_EQ(s.cols, 3u);
    EXPECT_EQ(s.rank, 2);
    EXPECT_EQ(s.factor_elements(), 14u);  // 8 of P, then 6 of Q
    // 56 payload bytes for F32/F16/BF16 (binary32), 112 for F64.
    EXPECT_EQ(s.factor_elements() * sizeof(float), 56u);
    EXPECT_EQ(s.factor_elements() * sizeof(double), 112u);
}

// ================================================================ TOPK payload

TEST(WireTopk, PayloadHeaderLayout)
{
    EXPECT_EQ(sizeof(topk::PayloadHeader), 16u);
    EXPECT_EQ(offsetof(topk::PayloadHeader, n), 0u);
    EXPECT_EQ(offsetof(topk::PayloadHeader, k), 8u);
    EXPECT_EQ(offsetof(topk::PayloadHeader, flags), 12u);
    EXPECT_EQ(topk::kFlagNonFiniteOverflow, 1u);

    // header_of reads the fields back from a hand-built image.
    std::vector<unsigned char> image(16, 0);
    put(image, 0, 0x0102030405060708ull, 8);
    put(image, 8, 0x11121314u, 4);
    put(image, 12, 0x21222324u, 4);
    const topk::PayloadHeader h = topk::header_of(image.data());
    EXPECT_EQ(h.n, 0x0102030405060708ull);
    EXPECT_EQ(h.k, 0x11121314u);
    EXPECT_EQ(h.flags, 0x21222324u);
}

// 16 + k x (4 + element size), rounded up to a multiple of 8.
TEST(WireTopk, PayloadBytes)
{
    struct Case {
        std::size_t k;
        cc_coll_dtype_t d;
        std::size_t bytes;
    };
    const Case cases[] = {
        {0, CC_COLL_F32, 16},     {0, CC_COLL_F64, 16},     {0, CC_COLL_F16, 16},   {0, CC_COLL_BF16, 16},
        {1, CC_COLL_F32, 24},     {1, CC_COLL_F64, 32},     {1, CC_COLL_F16, 24},   {1, CC_COLL_BF16, 24},
        {2, CC_COLL_F16, 32},     {3, CC_COLL_F16, 40},     {4, CC_COLL_F16, 40},   {5, CC_COLL_BF16, 48},
        {3, CC_COLL_F64, 56},     {5, CC_COLL_F64, 80},     {7, CC_COLL_F64, 104},  {5, CC_COLL_F32, 56},
        {1000, CC_COLL_F32, 8016}, {1001, CC_COLL_F16, 6024}, {1001, CC_COLL_F64, 12032},
    };
    for (const Case &c : cases)
        EXPECT_EQ(topk::payload_bytes(c.k, c.d), c.bytes) << "k " << c.k << " dtype " << c.d;

    const std::size_t element[4] = {4, 8, 2, 2};  // F32, F64, F16, BF16
    for (int d = 0; d < 4; ++d)
        for (std::size_t k = 0; k < 64; ++k) {
            const std::size_t raw = 16 + k * (4 + element[d]);
            const std::size_t want = raw % 8 == 0 ? raw : raw + (8 - raw % 8);
            ASSERT_EQ(topk::payload_bytes(k, static_cast<cc_coll_dtype_t>(d)), want) << "k " << k << " dtype " << d;
        }
}

// Five kept elements at ascending indices of a buffer of n = 10, with values
// whose bit patterns are written out below for each dtype: 1.5, -2, 0.25,
// 1 + 2^-11 (exact in binary32 and binary64; a tie that rounds to even, 1.0,
// in binary16, and below half an ulp, so 1.0, in bfloat16) and -0.
constexpr std::size_t kN = 10;
constexpr std::size_t kK = 5;
const std::uint32_t kIdx[kK] = {1, 4, 5, 8, 9};
const double kValues[kK] = {1.5, -2.0, 0.25, 1.0 + 1.0 / 2048.0, -0.0};

struct DtypeCase {
    cc_coll_dtype_t dtype;
    std::size_t element;
    std::uint64_t bits[kK];  // the values' encodings in this dtype
    double sent[kK];         // the values the receivers add
    std::size_t payload;     // payload bytes
};

const DtypeCase kCases[] = {
    {CC_COLL_F32, 4, {0x3FC00000u, 0xC0000000u, 0x3E800000u, 0x3F801000u, 0x80000000u},
     {1.5, -2.0, 0.25, 1.0 + 1.0 / 2048.0, -0.0}, 56},  // 16 + 20 + 20, no padding
    {CC_COLL_F64,
     8,
     {0x3FF8000000000000ull, 0xC000000000000000ull, 0x3FD0000000000000ull, 0x3FF0020000000000ull,
      0x8000000000000000ull},
     {1.5, -2.0, 0.25, 1.0 + 1.0 / 2048.0, -0.0},
     80},  // 16 + 20 + 40 = 76, 4 bytes of padding
    {CC_COLL_F16, 2, {0x3E00u, 0xC000u, 0x3400u, 0x3C00u, 0x8000u}, {1.5, -2.0, 0.25, 1.0, -0.0},
     48},  // 16 + 20 + 10 = 46, 2 bytes of padding
    {CC_COLL_BF16, 2, {0x3FC0u, 0xC000u, 0x3E80u, 0x3F80u, 0x8000u}, {1.5, -2.0, 0.25, 1.0, -0.0},
     48},  // 46 + 2 bytes of padding
};

// The documented image: header, indices, values, zero padding.
std::vector<unsigned char> topk_image(const DtypeCase &c, std::uint32_t flags)
{
    std::vector<unsigned char> want(c.payload, 0);
    put(want, 0, kN, 8);
    put(want, 8, kK, 4);
    put(want, 12, flags, 4);
    for (std::size_t j = 0; j < kK; ++j) put(want, 16 + 4 * j, kIdx[j], 4);
    const std::size_t values = 16 + 4 * kK;
    for (std::size_t j = 0; j < kK; ++j) put(want, values + c.element * j, c.bits[j], c.element);
    return want;  // bytes values + kK x element .. payload stay 0
}

// Encodes like the collectives and cc_coll_send do: into a zeroed buffer of
// payload_bytes (here followed by guard bytes that must stay untouched).
template <typename W>
void check_encode(const DtypeCase &c)
{
    SCOPED_TRACE(testing::Message() << "dtype " << c.dtype);
    ASSERT_EQ(topk::payload_bytes(kK, c.dtype), c.payload);
    std::vector<W> x(kN);
    for (std::size_t i = 0; i < kN; ++i) x[i] = static_cast<W>(100 + i);  // not sent
    for (std::size_t j = 0; j < kK; ++j) x[kIdx[j]] = static_cast<W>(kValues[j]);

    for (const std::uint32_t flags : {0u, topk::kFlagNonFiniteOverflow}) {
        const std::vector<unsigned char> want = topk_image(c, flags);
        std::vector<unsigned char> payload(c.payload + 8, 0);
        for (std::size_t b = c.payload; b < payload.size(); ++b) payload[b] = 0x5A;
        std::vector<W> sent(kK);
        topk::encode<W>(x.data(), kN, kIdx, kK, flags, c.dtype, payload.data(), sent.data());
        EXPECT_EQ(first_difference(payload.data(), want, c.payload), -1) << "flags " << flags;
        for (std::size_t b = c.payload; b < payload.size(); ++b) EXPECT_EQ(payload[b], 0x5A) << "byte " << b;
        for (std::size_t j = 0; j < kK; ++j) {
            EXPECT_EQ(static_cast<double>(sent[j]), c.sent[j]) << "sent " << j;
            EXPECT_EQ(std::signbit(static_cast<double>(sent[j])), std::signbit(c.sent[j])) << "sent " << j;
        }
    }

    // encode writes every header, index and value byte itself: over stale
    // memory those bytes come out the same (the padding is the caller's,
    // who zeroes the buffer first; docs/wire.md).
    {
        const std::vector<unsigned char> want = topk_image(c, 0);
        std::vector<unsigned char> payload(c.payload, 0xA5);
        std::vector<W> sent(kK);
        topk::encode<W>(x.data(), kN, kIdx, kK, 0, c.dtype, payload.data(), sent.data());
        EXPECT_EQ(first_difference(payload.data(), want, 16 + kK * (4 + c.element)), -1);
    }

    // The receiver's side reads the same offsets: scatter_add of the image
    // into zeros puts each value's bits at its index.
    {
        const std::vector<unsigned char> image = topk_image(c, 0);
        std::vector<unsigned char> out(kN * c.element, 0);
        topk::scatter_add(image.data(), c.dtype, out.data());
        std::vector<unsigned char> want(kN * c.element, 0);
        for (std::size_t j = 0; j < kK; ++j) put(want, kIdx[j] * c.element, c.bits[j], c.element);
        // 0 + (-0) is +0 in IEEE arithmetic: the last element lands as +0.
        put(want, kIdx[kK - 1] * c.element, 0, c.element);
        EXPECT_EQ(first_difference(out.data(), want, out.size()), -1);
    }
}

TEST(WireTopk, EncodeF32) { check_encode<float>(kCases[0]); }
TEST(WireTopk, EncodeF64) { check_encode<double>(kCases[1]); }
TEST(WireTopk, EncodeF16) { check_encode<float>(kCases[2]); }
TEST(WireTopk, EncodeBf16) { check_encode<float>(kCases[3]); }

// What the collectives check in the gathered payloads: n, k and flags of
// every sender against their own, the overflow flag of any sender (the
// index checks: tests/fuzz/test_collective_payloads.cc).
TEST(WireTopk, CheckPayloadsChecksNAndKAndReadsTheFlag)
{
    const std::size_t bytes = topk::payload_bytes(2, CC_COLL_F32);  // 32
    std::vector<unsigned char> gathered(3 * bytes, 0);
    auto header = [&](std::size_t r, std::uint64_t n, std::uint32_t k, std::uint32_t flags) {
        put(gathered, r * bytes + 0, n, 8);
        put(gathered, r * bytes + 8, k, 4);
        put(gathered, r * bytes + 12, flags, 4);
        put(gathered, r * bytes + 16, 3, 4);  // indices 3, 7
        put(gathered, r * bytes + 20, 7, 4);
    };
    topk::Fault f;

    for (std::size_t r = 0; r < 3; ++r) header(r, 20, 2, 0);
    EXPECT_EQ(topk::check_payloads(gathered.data(), 3, bytes, 20, 2, &f), topk::Verdict::Decode);
    EXPECT_EQ(f.field, topk::Field::None);

    header(1, 20, 2, topk::kFlagNonFiniteOverflow);
    EXPECT_EQ(topk::check_payloads(gathered.data(), 3, bytes, 20, 2, &f), topk::Verdict::Dense);

    header(1, 20, 2, 0);
    header(2, 20, 3, 0);  // another k
    EXPECT_EQ(topk::check_payloads(gathered.data(), 3, bytes, 20, 2, &f), topk::Verdict::Reject);
    EXPECT_EQ(f.field, topk::Field::K);
    EXPECT_EQ(f.sender, 2u);
    EXPECT_EQ(f.header_n, 20u);
    EXPECT_EQ(f.header_k, 3u);

    header(2, 20, 2, 0);
    header(0, 21, 2, 0);  // another n
    EXPECT_EQ(topk::check_payloads(gathered.data(), 3, bytes, 20, 2, &f), topk::Verdict::Reject);
    EXPECT_EQ(f.field, topk::Field::N);
    EXPECT_EQ(f.sender, 0u);
    EXPECT_EQ(f.header_n, 21u);
}

// ---------------------------------------------------------------- the coded payload

// Encodes x at idx in the coded format; returns the payload (capacity bytes)
// and its size in *bytes, the transmitted values in *sent.
template <typename W>
std::vector<unsigned char> encode_coded(const std::vector<W> &x, const std::vector<std::uint32_t> &idx,
                                        cc_coll_dtype_t dtype, topk::Format fmt, std::vector<W> *sent,
                                        std::size_t *bytes)
{
    std::vector<unsigned char> payload(topk::coded_capacity(idx.size(), dtype, fmt), 0);
    sent->assign(idx.size(), W(0));
    *bytes = topk::encode_coded<W>(x.data(), x.size(), idx.data(), idx.size(), 0, dtype, fmt, payload.data(),
                                   sent->data());
    return payload;
}

TEST(WireTopkCoded, FourBitValuesAndPackedGapsByteByByte)
{
    // n 20, indices 3, 4, 10 (gaps minus one: 0, 5: packed at width 3 in 6
    // bits; Rice takes no fewer), values 1, -0.5, 0.25 at 4 bits: step 1/7,
    // levels 7, -4 (-3.5 to even), 2.
    std::vector<float> x(20, 0.0f);
    x[3] = 1.0f;
    x[4] = -0.5f;
    x[10] = 0.25f;
    const std::vector<std::uint32_t> idx = {3, 4, 10};
    std::vector<float> sent;
    std::size_t bytes = 0;
    const topk::Format fmt{4, true};
    const auto payload = encode_coded<float>(x, idx, CC_COLL_F32, fmt, &sent, &bytes);
    ASSERT_EQ(bytes, 40u);  // 32 + 1 index byte + 2 value bytes, padded
    std::vector<unsigned char> want(40, 0);
    put(want, 0, 20, 8);
    put(want, 8, 3, 4);
    put(want, 12, (3u << 1) | (1u << 3) | (3u << 8), 4);  // 4-bit values, packed, width 3
    put(want, 16, 1, 4);                                  // index bytes
    put(want, 20, 3, 4);                                  // first index
    const double step = 1.0 / 7.0;
    std::uint64_t step_bits;
    std::memcpy(&step_bits, &step, 8);
    put(want, 24, step_bits, 8);
    want[32] = 5u << 3;  // gaps 0 and 5, 3 bits each
    want[33] = 0xC7;     // levels 7 and -4
    want[34] = 0x02;     // level 2
    EXPECT_EQ(first_difference(payload.data(), want, 40), -1);
    EXPECT_EQ(sent[0], static_cast<float>(7 * step));
    EXPECT_EQ(sent[1], static_cast<float>(-4 * step));
    EXPECT_EQ(sent[2], static_cast<float>(2 * step));

    // The receiver adds exactly what the sender kept in sent.
    topk::Fault f;
    ASSERT_EQ(topk::check_payloads(payload.data(), 1, bytes, 20, 3, &f, fmt, CC_COLL_F32), topk::Verdict::Decode);
    std::vector<float> out(20, 0.0f);
    topk::scatter_add(payload.data(), CC_COLL_F32, out.data());
    for (std::size_t i = 0; i < 20; ++i)
        EXPECT_EQ(out[i], i == 3 ? sent[0] : i == 4 ? sent[1] : i == 10 ? sent[2] : 0.0f) << i;
}

// A payload per value width and dtype: random ascending indices, values of
// mixed magnitude. The receiver's sums equal sent; each value is within
// half a step of the input; the size is what the widths say.
TEST(WireTopkCoded, RoundTripEveryWidthAndDtype)
{
    const cc_coll_dtype_t dtypes[] = {CC_COLL_F32, CC_COLL_F64, CC_COLL_F16, CC_COLL_BF16};
    const unsigned widths[] = {0, 16, 8, 4};
    std::uint64_t state = 12345;
    auto rnd = [&] {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        return static_cast<std::uint32_t>(state >> 33);
    };
    const std::size_t n = 5000;
    for (cc_coll_dtype_t dtype : dtypes)
        for (unsigned bits : widths) {
            std::vector<double> x(n);
            for (auto &v : x) v = (static_cast<double>(rnd() % 2001) - 1000.0) / 37.0;
            std::vector<std::uint32_t> idx;
            for (std::uint32_t i = 0; i < n; ++i)
                if (rnd() % 20 == 0) idx.push_back(i);  // density about 0.05
            const std::size_t k = idx.size();
            const topk::Format fmt{bits, true};
            std::vector<double> sent;
            std::size_t bytes = 0;
            const auto payload = encode_coded<double>(x, idx, dtype, fmt, &sent, &bytes);
            SCOPED_TRACE(testing::Message() << "dtype " << dtype << " bits " << bits);
            ASSERT_LE(bytes, payload.size());
            topk::Fault f;
            ASSERT_EQ(topk::check_payloads(payload.data(), 1, bytes, n, k, &f, fmt, dtype), topk::Verdict::Decode)
                << topk::describe(f, "count");
            // decode_pairs gives back the indices and what the receivers add;
            // so does it for the uncoded payload of the same pairs.
            std::vector<std::uint32_t> di(k);
            std::vector<double> dv(k);
            topk::decode_pairs<double>(payload.data(), dtype, di.data(), dv.data());
            EXPECT_EQ(di, idx);
            EXPECT_EQ(dv, sent);
            std::vector<unsigned char> plain(topk::payload_bytes(k, dtype), 0);
            std::vector<double> plain_sent(k);
            topk::encode<double>(x.data(), n, idx.data(), k, 0, dtype, plain.data(), plain_sent.data());
            topk::decode_pairs<double>(plain.data(), dtype, di.data(), dv.data());
            EXPECT_EQ(di, idx);
            EXPECT_EQ(dv, plain_sent);
            const auto h = topk::header_of(payload.data());
            // Gaps of mean 19: 3 to 9 bits per index, whichever code won.
            const std::size_t value_bytes = bits == 0 ? k * (dtype == CC_COLL_F64 ? 8 : dtype == CC_COLL_F32 ? 4 : 2)
                                                      : (k * bits + 7) / 8;
            EXPECT_LE(bytes, 40 + (k * 9 + 7) / 8 + value_bytes);
            EXPECT_GE(bytes, 32 + (k * 3) / 8 + value_bytes);
            double step = 0;
            std::memcpy(&step, payload.data() + 24, 8);
            double top = 0;
            for (auto i : idx) top = std::max(top, std::fabs(x[i]));
            if (bits != 0) {
                EXPECT_EQ(step, top / ((1 << (bits - 1)) - 1));
            }
            EXPECT_NE(h.flags & topk::kIndexMask, 0u);
            if (dtype == CC_COLL_F64) {
                std::vector<double> out(n, 0.0);
                topk::scatter_add(payload.data(), dtype, out.data());
                std::size_t j = 0;
                for (std::size_t i = 0; i < n; ++i) {
                    if (j < k && idx[j] == i) {
                        EXPECT_EQ(out[i], sent[j]) << i;
                        if (bits != 0) {
                            EXPECT_LE(std::fabs(sent[j] - x[i]), step / 2 * (1 + 1e-12)) << i;
                        } else {
                            EXPECT_EQ(sent[j], x[i]);
                        }
                        ++j;
                    } else {
                        EXPECT_EQ(out[i], 0.0) << i;
                    }
                }
            }
        }
}

TEST(WireTopkCoded, RiceWinsOnGeometricGapsPackedOnARun)
{
    // Gaps mostly 20 with one of 100000: packing needs 17 bits per gap,
    // Rice about 6.
    std::vector<float> x(200000, 1.0f);
    std::vector<std::uint32_t> idx;
    for (std::uint32_t i = 0; i < 2000; i += 21) idx.push_back(i);
    idx.push_back(150000);
    std::vector<float> sent;
    std::size_t bytes = 0;
    const topk::Format fmt{8, true};
    auto payload = encode_coded<float>(x, idx, CC_COLL_F32, fmt, &sent, &bytes);
    auto h = topk::header_of(payload.data());
    EXPECT_EQ((h.flags & topk::kIndexMask) >> topk::kIndexShift, topk::kIndexRice);
    topk::Fault f;
    EXPECT_EQ(topk::check_payloads(payload.data(), 1, bytes, x.size(), idx.size(), &f, fmt, CC_COLL_F32),
              topk::Verdict::Decode)
        << topk::describe(f, "count");
    // Its Rice stream one byte short or one byte long: IndexBytes.
    std::uint32_t index_bytes;
    std::memcpy(&index_bytes, &payload[16], 4);
    for (std::uint32_t wrong : {index_bytes - 1, index_bytes + 1}) {
        auto p = payload;
        std::memcpy(&p[16], &wrong, 4);
        EXPECT_EQ(topk::check_payloads(p.data(), 1, bytes, x.size(), idx.size(), &f, fmt, CC_COLL_F32),
                  topk::Verdict::Reject);
        EXPECT_EQ(f.field, topk::Field::IndexBytes) << wrong;
    }

    // A contiguous run: every gap 0, width 0, no index bytes.
    idx.clear();
    for (std::uint32_t i = 100; i < 164; ++i) idx.push_back(i);
    payload = encode_coded<float>(x, idx, CC_COLL_F32, fmt, &sent, &bytes);
    h = topk::header_of(payload.data());
    EXPECT_EQ((h.flags & topk::kIndexMask) >> topk::kIndexShift, topk::kIndexPacked);
    EXPECT_EQ((h.flags & topk::kParamMask) >> topk::kParamShift, 0u);
    EXPECT_EQ(bytes, 32u + 64u);
    EXPECT_EQ(topk::check_payloads(payload.data(), 1, bytes, x.size(), idx.size(), &f, fmt, CC_COLL_F32),
              topk::Verdict::Decode);
}

// Rice codes of every quotient from 0 to 90 ones (past one 64-bit word),
// at every bit offset, up to the stream's last byte: a reference reader,
// bit by bit, finds the indices the encoder was given, and the receiver
// adds exactly `sent` at them (its word-at-a-time reader and the
// writer's 4-byte stores agree with the bit order of wire.md).
TEST(WireTopkCoded, RiceQuotientsOfEveryLengthDecodeBitByBit)
{
    std::vector<std::uint32_t> idx;
    std::uint32_t at = 7;
    for (std::uint32_t j = 0; j < 6000; ++j) {
        idx.push_back(at);
        const std::uint32_t q = j % 40 == 39 ? (j / 40) % 91 : 0;  // a long quotient now and then
        at += 1 + (q << 4) + (j * 7u) % 16;
    }
    const std::size_t n = at + 3, k = idx.size();
    std::vector<float> x(n, 0.0f);
    for (std::size_t j = 0; j < k; ++j) x[idx[j]] = static_cast<float>(j % 13) - 6.0f;
    std::vector<float> sent;
    std::size_t bytes = 0;
    const topk::Format fmt{4, true};
    const auto payload = encode_coded<float>(x, idx, CC_COLL_F32, fmt, &sent, &bytes);
    const auto h = topk::header_of(payload.data());
    ASSERT_EQ((h.flags & topk::kIndexMask) >> topk::kIndexShift, topk::kIndexRice);
    const unsigned r = (h.flags & topk::kParamMask) >> topk::kParamShift;
    EXPECT_EQ(r, 4u);
    std::uint32_t index_bytes = 0, first = 0;
    std::memcpy(&index_bytes, &payload[16], 4);
    std::memcpy(&first, &payload[20], 4);
    ASSERT_EQ(first, idx[0]);
    std::uint64_t bit = 0;
    const auto next = [&] { const unsigned b = (payload[32 + bit / 8] >> (bit % 8)) & 1u; ++bit; return b; };
    std::uint64_t index = first;
    for (std::size_t j = 1; j < k; ++j) {
        std::uint64_t q = 0, rest = 0;
        while (next() == 1) ++q;
        for (unsigned b = 0; b < r; ++b) rest |= std::uint64_t{next()} << b;
        index += ((q << r) | rest) + 1;
        ASSERT_EQ(index, idx[j]) << j;
    }
    EXPECT_EQ((bit + 7) / 8, index_bytes);
    topk::Fault f;
    ASSERT_EQ(topk::check_payloads(payload.data(), 1, bytes, n, k, &f, fmt, CC_COLL_F32), topk::Verdict::Decode)
        << topk::describe(f, "count");
    std::vector<float> out(n, 0.0f);
    topk::scatter_add(payload.data(), CC_COLL_F32, out.data());
    std::size_t j = 0;
    for (std::size_t i = 0; i < n; ++i) {
        if (j < k && idx[j] == i) {
            ASSERT_EQ(out[i], sent[j]) << i;
            ++j;
        } else {
            ASSERT_EQ(out[i], 0.0f) << i;
        }
    }
    // Every value came back within half a step (6 / 7 / 2).
    for (std::size_t m = 0; m < k; ++m) EXPECT_LE(std::fabs(sent[m] - x[idx[m]]), 3.0 / 7.0 + 1e-6) << m;
}

TEST(WireTopkCoded, NonFiniteKeptValueSetsTheOverflowFlag)
{
    std::vector<float> x(10, 1.0f);
    x[2] = INFINITY;
    std::vector<float> sent;
    std::size_t bytes = 0;
    const topk::Format fmt{8, true};
    const auto payload = encode_coded<float>(x, {2, 5}, CC_COLL_F32, fmt, &sent, &bytes);
    EXPECT_NE(topk::header_of(payload.data()).flags & topk::kFlagNonFiniteOverflow, 0u);
    topk::Fault f;
    EXPECT_EQ(topk::check_payloads(payload.data(), 1, bytes, 10, 2, &f, fmt, CC_COLL_F32), topk::Verdict::Dense);
}

// Malformed coded payloads: each rejected with the field that is wrong.
TEST(WireTopkCoded, MalformedPayloadsAreRejected)
{
    std::vector<float> x(1000, 0.0f);
    std::vector<std::uint32_t> idx;
    for (std::uint32_t i = 7; i < 1000; i += 37) {
        idx.push_back(i);
        x[i] = static_cast<float>(i % 11) - 5.0f;
    }
    const std::size_t k = idx.size();
    const topk::Format fmt{4, true};
    std::vector<float> sent;
    std::size_t bytes = 0;
    const auto good = encode_coded<float>(x, idx, CC_COLL_F32, fmt, &sent, &bytes);
    topk::Fault f;
    ASSERT_EQ(topk::check_payloads(good.data(), 1, bytes, 1000, k, &f, fmt, CC_COLL_F32), topk::Verdict::Decode);
    auto flags_of = [](const std::vector<unsigned char> &p) { return topk::header_of(p.data()).flags; };
    auto set_u32 = [](std::vector<unsigned char> &p, std::size_t off, std::uint32_t v) { std::memcpy(&p[off], &v, 4); };
    std::uint32_t index_bytes;
    std::memcpy(&index_bytes, &good[16], 4);

    // Another value width than the receiver's: Format.
    EXPECT_EQ(topk::check_payloads(good.data(), 1, bytes, 1000, k, &f, topk::Format{8, true}, CC_COLL_F32),
              topk::Verdict::Reject);
    EXPECT_EQ(f.field, topk::Field::Format);
    EXPECT_NE(topk::describe(f, "count").find("CC_COLL_TOPK_VALUE_BITS"), std::string::npos);
    // A coded payload to an uncoded receiver: an undefined flag bit.
    EXPECT_EQ(topk::check_payloads(good.data(), 1, bytes, 1000, k, &f), topk::Verdict::Reject);
    EXPECT_EQ(f.field, topk::Field::Flags);
    // An undefined bit (5).
    auto p = good;
    set_u32(p, 12, flags_of(good) | (1u << 5));
    EXPECT_EQ(topk::check_payloads(p.data(), 1, bytes, 1000, k, &f, fmt, CC_COLL_F32), topk::Verdict::Reject);
    EXPECT_EQ(f.field, topk::Field::Flags);
    // Index code 3 (undefined).
    p = good;
    set_u32(p, 12, flags_of(good) | topk::kIndexMask);
    EXPECT_EQ(topk::check_payloads(p.data(), 1, bytes, 1000, k, &f, fmt, CC_COLL_F32), topk::Verdict::Reject);
    EXPECT_EQ(f.field, topk::Field::Format);
    // First index out of range.
    p = good;
    set_u32(p, 20, 1000);
    EXPECT_EQ(topk::check_payloads(p.data(), 1, bytes, 1000, k, &f, fmt, CC_COLL_F32), topk::Verdict::Reject);
    EXPECT_EQ(f.field, topk::Field::IndexRange);
    EXPECT_EQ(f.position, 0u);
    EXPECT_EQ(f.found, 1000u);
    // Deltas that run past n: every stream bit set.
    p = good;
    for (std::uint32_t b = 0; b < index_bytes; ++b) p[32 + b] = 0xff;
    EXPECT_EQ(topk::check_payloads(p.data(), 1, bytes, 1000, k, &f, fmt, CC_COLL_F32), topk::Verdict::Reject);
    EXPECT_TRUE(f.field == topk::Field::IndexRange || f.field == topk::Field::IndexBytes) << static_cast<int>(f.field);
    // A stream length that disagrees with the codes (one byte short, one over).
    p = good;
    set_u32(p, 16, index_bytes - 1);
    EXPECT_EQ(topk::check_payloads(p.data(), 1, bytes, 1000, k, &f, fmt, CC_COLL_F32), topk::Verdict::Reject);
    EXPECT_EQ(f.field, topk::Field::IndexBytes);
    p = good;
    set_u32(p, 16, index_bytes + 1);
    EXPECT_EQ(topk::check_payloads(p.data(), 1, bytes, 1000, k, &f, fmt, CC_COLL_F32), topk::Verdict::Reject);
    EXPECT_EQ(f.field, topk::Field::IndexBytes);
    // A stream length beyond the record, and a record cut short (the values
    // do not fit): truncated.
    p = good;
    set_u32(p, 16, 0xfffffff0u);
    EXPECT_EQ(topk::check_payloads(p.data(), 1, bytes, 1000, k, &f, fmt, CC_COLL_F32), topk::Verdict::Reject);
    EXPECT_EQ(f.field, topk::Field::IndexBytes);
    EXPECT_EQ(topk::check_payloads(good.data(), 1, bytes - 8, 1000, k, &f, fmt, CC_COLL_F32), topk::Verdict::Reject);
    EXPECT_EQ(f.field, topk::Field::IndexBytes);
    EXPECT_EQ(topk::check_payloads(good.data(), 1, 24, 1000, k, &f, fmt, CC_COLL_F32), topk::Verdict::Reject);
    EXPECT_EQ(f.field, topk::Field::IndexBytes);
}

// ================================================================ SKETCH

TEST(WireSketch, BitmapBytes)
{
    const std::size_t cases[][2] = {{0, 0},  {1, 1},  {7, 1},    {8, 1},    {9, 2},
                                    {16, 2}, {17, 3}, {1024, 128}, {1025, 129}, {65553, 8195}};
    for (const auto &c : cases) EXPECT_EQ(sketch::bitmap_bytes(c[0]), c[1]) << "n " << c[0];
}

// Element i sets bit i % 8 (value 1 << (i % 8)) of byte i / 8: least
// significant bit first.
TEST(WireSketch, BitmapBitOrder)
{
    for (std::uint32_t i = 0; i < 64; ++i) {
        std::vector<std::uint8_t> bm(8 + 4, 0);
        sketch::bitmap_set(bm.data(), &i, 1);
        for (std::size_t b = 0; b < bm.size(); ++b) {
            const unsigned want = b == i / 8 ? 1u << (i % 8) : 0u;
            ASSERT_EQ(bm[b], want) << "element " << i << " byte " << b;
        }
    }

    // n = 20: 3 bytes; elements 0, 3, 7 | 8, 15 | 19, given out of order and
    // with a repeat (the bits are OR-ed).
    const std::uint32_t idx[] = {19, 0, 8, 3, 15, 7, 3};
    std::vector<std::uint8_t> bm(sketch::bitmap_bytes(20) + 2, 0);
    sketch::bitmap_set(bm.data(), idx, sizeof idx / sizeof idx[0]);
    EXPECT_EQ(bm[0], 0x89);  // bits 0, 3, 7
    EXPECT_EQ(bm[1], 0x81);  // bits 0, 7: elements 8, 15
    EXPECT_EQ(bm[2], 0x08);  // bit 3: element 19; bits 4..7 (beyond n) zero
    EXPECT_EQ(bm[3], 0x00);
    EXPECT_EQ(bm[4], 0x00);

    // The decoders read the same order (bytes little-endian into words).
    EXPECT_EQ(sketch::bitmap_word32(bm.data(), 20, 0), 0x00088189u);
    EXPECT_EQ(sketch::bitmap_count(bm.data(), 20), 6u);
}

// The sketch: 3 sub-tables of m rows of 1024 cells, row-major, so cell
// index = row x 1024 + column; hash j's row lies in sub-table j (rows j m ..
// (j + 1) m - 1) and element i lands in the rotation group of i % 1024.
// One element of value v encodes as sign x v in exactly its three cells, in
// the work type.
template <typename W>
void check_cells(std::uint32_t m)
{
    SCOPED_TRACE(testing::Message() << "m " << m << " work bytes " << sizeof(W));
    sketch::Layout layout;
    layout.n = 5000;
    layout.m = m;
    layout.seed = 0x5eed5eedull;
    ASSERT_EQ(sketch::kBlock, 1024u);
    EXPECT_EQ(layout.rows(), 3u * m);
    EXPECT_EQ(layout.cells(), 3u * m * 1024u);
    const std::size_t group = m > 96 ? 64 : 1024;  // rotation columns
    for (const std::uint32_t i : {0u, 1u, 1023u, 1024u, 2047u, 4999u}) {
        sketch::Hit hit[3];
        sketch::hits(layout, i, hit);
        std::vector<W> cells(layout.cells(), W(0));
        const W v = W(1.5);
        std::vector<W> x(layout.n, W(0));
        x[i] = v;
        sketch::encode<W>(layout, x.data(), &i, 1, cells.data());
        for (int j = 0; j < 3; ++j) {
            const std::size_t row = hit[j].cell / 1024, column = hit[j].cell % 1024;
            EXPECT_GE(row, static_cast<std::size_t>(j) * m) << "element " << i << " hash " << j;
            EXPECT_LT(row, static_cast<std::size_t>(j + 1) * m) << "element " << i << " hash " << j;
            EXPECT_EQ(column / group, (i % 1024) / group) << "element " << i << " hash " << j;
            EXPECT_EQ(cells[hit[j].cell], hit[j].sign * v) << "element " << i << " hash " << j;
        }
        std::size_t nonzero = 0;
        for (const W c : cells) nonzero += c != W(0) ? 1 : 0;
        EXPECT_EQ(nonzero, 3u) << "element " << i;
    }
}

TEST(WireSketch, CellLayoutBinary32) { check_cells<float>(2); }
TEST(WireSketch, CellLayoutBinary64) { check_cells<double>(2); }
TEST(WireSketch, CellLayoutRotationGroups) { check_cells<float>(97); }

}  // namespace
}  // namespace cc_coll::detail
