// The collectives' receivers of their peers' payloads (docs/wire.md, "What
// a TOPK receiver checks" and "What a SKETCH receiver checks") case by
// case, without MPI:
//
//  - TOPK: well-formed payload sets decode to the reference sum; each
//    malformed field (n, k, flag bits, an index not below n, a repeated or
//    descending index) is a rejection naming the sender's rank, the field
//    and its value, with the receive buffer and the guard bytes around it
//    untouched; a fault in the last sender still leaves the buffer
//    untouched (every payload is checked before the first write).
//  - SKETCH: the OR-ed support message's tail (bits past n, the flag byte)
//    and the reduce-scatter's rows per table.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "collective_payloads.hpp"

namespace cc_coll::detail {
namespace {

using fuzz::Rng;

constexpr std::size_t kGuard = 32;
constexpr unsigned char kGuardByte = 0xcd;
constexpr unsigned char kFill = 0xa5;

struct Received {
    topk::Verdict verdict = topk::Verdict::Reject;
    topk::Fault fault;
    std::string text;                 // describe(fault, count_name)
    std::vector<unsigned char> body;  // the receive buffer afterwards
    bool guards_intact = true;
    bool untouched = true;  // every byte still kFill
};

// The receiver's step (fuzz::receive_topk) of `payloads`, P of `bytes`
// each, in an allocation of exactly their size, into a guarded buffer of
// n elements filled with kFill.
Received receive(const std::vector<unsigned char> &payloads, std::size_t P, std::size_t n, std::size_t k,
                 cc_coll_dtype_t dtype, const char *count_name = "count")
{
    const std::size_t bytes = topk::payload_bytes(k, dtype);
    EXPECT_EQ(payloads.size(), P * bytes);
    const std::size_t out_bytes = n * dtype_size(dtype);
    std::vector<unsigned char> area(kGuard + out_bytes + kGuard, kGuardByte);
    std::memset(area.data() + kGuard, kFill, out_bytes);
    std::vector<unsigned char> exact(payloads);
    Received r;
    r.verdict = fuzz::receive_topk(exact.data(), P, bytes, n, k, dtype, area.data() + kGuard, &r.fault);
    r.text = topk::describe(r.fault, count_name);
    for (std::size_t i = 0; i < kGuard; ++i)
        r.guards_intact = r.guards_intact && area[i] == kGuardByte && area[kGuard + out_bytes + i] == kGuardByte;
    r.body.assign(area.begin() + kGuard, area.begin() + static_cast<std::ptrdiff_t>(kGuard + out_bytes));
    for (unsigned char c : r.body) r.untouched = r.untouched && c == kFill;
    return r;
}

void expect_rejected(const Received &r, topk::Field field, std::size_t sender, const std::string &words)
{
    EXPECT_EQ(r.verdict, topk::Verdict::Reject);
    EXPECT_EQ(r.fault.field, field);
    EXPECT_EQ(r.fault.sender, sender);
    EXPECT_TRUE(r.guards_intact);
    EXPECT_TRUE(r.untouched) << "a rejected payload set wrote the receive buffer";
    EXPECT_NE(r.text.find(words), std::string::npos) << "message: " << r.text;
}

// Payload r's header fields and index j.
void put_header(std::vector<unsigned char> &p, std::size_t bytes, std::size_t r, std::uint64_t n, std::uint32_t k,
                std::uint32_t flags)
{
    std::memcpy(p.data() + r * bytes, &n, 8);
    std::memcpy(p.data() + r * bytes + 8, &k, 4);
    std::memcpy(p.data() + r * bytes + 12, &flags, 4);
}
std::uint32_t index_at(const std::vector<unsigned char> &p, std::size_t bytes, std::size_t r, std::size_t j)
{
    std::uint32_t v;
    std::memcpy(&v, p.data() + r * bytes + 16 + 4 * j, 4);
    return v;
}
void set_index(std::vector<unsigned char> &p, std::size_t bytes, std::size_t r, std::size_t j, std::uint32_t v)
{
    std::memcpy(p.data() + r * bytes + 16 + 4 * j, &v, 4);
}

// 3 senders, 40 elements, k = 4, F32: payloads of 48 bytes.
constexpr std::size_t kP = 3, kN = 40, kK = 4;
const std::size_t kBytes = topk::payload_bytes(kK, CC_COLL_F32);

std::vector<unsigned char> good_set(std::uint64_t seed = 7)
{
    Rng rng(seed);
    return fuzz::topk_payloads(CC_COLL_F32, kN, kK, kP, rng);
}

// ---------------------------------------------------------------- TOPK

TEST(CollectiveTopk, WellFormedSetsDecodeToTheReferenceSumInEveryDtype)
{
    const cc_coll_dtype_t dtypes[] = {CC_COLL_F32, CC_COLL_F64, CC_COLL_F16, CC_COLL_BF16};
    for (cc_coll_dtype_t d : dtypes) {
        for (std::size_t k : {std::size_t{0}, std::size_t{1}, std::size_t{3}, std::size_t{kN}}) {
            Rng rng(11 + k);
            const std::vector<unsigned char> p = fuzz::topk_payloads(d, kN, k, kP, rng);
            const Received r = receive(p, kP, kN, k, d);
            ASSERT_EQ(r.verdict, topk::Verdict::Decode) << r.text;
            EXPECT_EQ(r.fault.field, topk::Field::None);
            EXPECT_TRUE(r.text.empty());
            EXPECT_TRUE(r.guards_intact);
            EXPECT_EQ(r.body, fuzz::reference_topk_sum(p.data(), kP, topk::payload_bytes(k, d), kN, k, d))
                << "dtype " << d << " k " << k;
        }
    }
}

TEST(CollectiveTopk, OverflowFlagIsTheDenseFallbackWithNothingWritten)
{
    Rng rng(3);
    const std::vector<unsigned char> p = fuzz::topk_payloads(CC_COLL_F32, kN, kK, kP, rng, 1);
    const Received r = receive(p, kP, kN, kK, CC_COLL_F32);
    EXPECT_EQ(r.verdict, topk::Verdict::Dense);
    EXPECT_TRUE(r.untouched);
    EXPECT_TRUE(r.guards_intact);
}

TEST(CollectiveTopk, RejectsAnotherN)
{
    std::vector<unsigned char> p = good_set();
    put_header(p, kBytes, 1, kN + 1, kK, 0);
    expect_rejected(receive(p, kP, kN, kK, CC_COLL_F32), topk::Field::N, 1,
                    "rank 1 sent count 41 / k 4 but this rank has count 40 / k 4");
}

TEST(CollectiveTopk, RejectsAnotherK)
{
    std::vector<unsigned char> p = good_set();
    put_header(p, kBytes, 2, kN, kK - 1, 0);
    const Received r = receive(p, kP, kN, kK, CC_COLL_F32, "recvcount");
    expect_rejected(r, topk::Field::K, 2, "rank 2 sent recvcount 40 / k 3 but this rank has recvcount 40 / k 4");
}

TEST(CollectiveTopk, RejectsUndefinedFlagBits)
{
    for (std::uint32_t flags : {2u, 0x80000000u, 0x80000001u, 0xffffffffu}) {
        std::vector<unsigned char> p = good_set();
        put_header(p, kBytes, 2, kN, kK, flags);
        char words[64];
        std::snprintf(words, sizeof words, "rank 2 sent flags 0x%x", flags);
        const Received r = receive(p, kP, kN, kK, CC_COLL_F32);
        expect_rejected(r, topk::Field::Flags, 2, words);
        EXPECT_EQ(r.fault.found, flags);
    }
}

TEST(CollectiveTopk, RejectsAnIndexNotBelowN)
{
    for (std::uint32_t bad :
         {static_cast<std::uint32_t>(kN), static_cast<std::uint32_t>(kN + 1), 0x7fffffffu, 0xffffffffu}) {
        std::vector<unsigned char> p = good_set();
        set_index(p, kBytes, 1, kK - 1, bad);  // the last index: still ascending
        char words[96];
        std::snprintf(words, sizeof words, "rank 1 sent index %u at position 3, not below count 40", bad);
        const Received r = receive(p, kP, kN, kK, CC_COLL_F32);
        expect_rejected(r, topk::Field::IndexRange, 1, words);
        EXPECT_EQ(r.fault.position, kK - 1);
        EXPECT_EQ(r.fault.found, bad);
    }
}

TEST(CollectiveTopk, RejectsARepeatedIndex)
{
    std::vector<unsigned char> p = good_set();
    const std::uint32_t before = index_at(p, kBytes, 0, 1);
    set_index(p, kBytes, 0, 2, before);
    char words[96];
    std::snprintf(words, sizeof words, "rank 0 sent index %u at position 2 after index %u", before, before);
    expect_rejected(receive(p, kP, kN, kK, CC_COLL_F32), topk::Field::IndexOrder, 0, words);
}

TEST(CollectiveTopk, RejectsADescendingIndex)
{
    std::vector<unsigned char> p = good_set();
    const std::uint32_t first = index_at(p, kBytes, 2, 0);
    ASSERT_GT(index_at(p, kBytes, 2, 1), first);
    // Position 0 above position 1.
    set_index(p, kBytes, 2, 0, index_at(p, kBytes, 2, 1) + 1 < kN ? index_at(p, kBytes, 2, 1) + 1 : kN - 1);
    expect_rejected(receive(p, kP, kN, kK, CC_COLL_F32), topk::Field::IndexOrder, 2, "rank 2 sent index");
}

TEST(CollectiveTopk, AFaultInTheLastSenderLeavesTheBufferUntouched)
{
    // Senders 0 and 1 are fine; the scatter-add must not start before
    // sender 2's payload is checked.
    std::vector<unsigned char> p = good_set();
    set_index(p, kBytes, kP - 1, kK - 1, 0xffffffffu);
    expect_rejected(receive(p, kP, kN, kK, CC_COLL_F32), topk::Field::IndexRange, kP - 1, "rank 2 sent index");
}

TEST(CollectiveTopk, HeadersAreCheckedBeforeIndices)
{
    std::vector<unsigned char> p = good_set();
    set_index(p, kBytes, 0, 0, kN);      // sender 0: an index fault
    put_header(p, kBytes, 2, kN, 9, 0);  // sender 2: a header fault, reported first
    expect_rejected(receive(p, kP, kN, kK, CC_COLL_F32), topk::Field::K, 2, "rank 2 sent count 40 / k 9");
}

TEST(CollectiveTopk, WithOverflowTheIndicesAreNotUsedSoNotChecked)
{
    // Every rank falls back to the dense sum: the indices are never read.
    Rng rng(5);
    std::vector<unsigned char> p = fuzz::topk_payloads(CC_COLL_F32, kN, kK, kP, rng, 0);
    set_index(p, kBytes, 1, 0, 0xffffffffu);
    const Received r = receive(p, kP, kN, kK, CC_COLL_F32);
    EXPECT_EQ(r.verdict, topk::Verdict::Dense);
    EXPECT_TRUE(r.untouched);
}

TEST(CollectiveTopk, ValuesAreDataNotChecked)
{
    // NaN and Inf values and non-zero padding are accepted as they are.
    Rng rng(9);
    std::vector<unsigned char> p = fuzz::topk_payloads(CC_COLL_F64, kN, 3, kP, rng, ~std::size_t{0}, true);
    const std::size_t bytes = topk::payload_bytes(3, CC_COLL_F64);  // 16 + 36 -> 56: 4 padding bytes
    p[bytes - 1] = 0x7f;
    const double inf = HUGE_VAL;
    std::memcpy(p.data() + 16 + 12, &inf, 8);
    const Received r = receive(p, kP, kN, 3, CC_COLL_F64);
    ASSERT_EQ(r.verdict, topk::Verdict::Decode) << r.text;
    EXPECT_TRUE(
        fuzz::same_values(r.body, fuzz::reference_topk_sum(p.data(), kP, bytes, kN, 3, CC_COLL_F64), kN, CC_COLL_F64));
}

TEST(CollectiveTopk, CheckedBytesAreTheHeaderAndIndices)
{
    // What a device receiver copies to the host: every field the checks read.
    EXPECT_EQ(topk::checked_bytes(0), 16u);
    EXPECT_EQ(topk::checked_bytes(5), 36u);
    for (std::size_t k : {0, 1, 2, 7, 100})
        for (cc_coll_dtype_t d : {CC_COLL_F32, CC_COLL_F64, CC_COLL_F16, CC_COLL_BF16})
            EXPECT_LE(topk::checked_bytes(k), topk::payload_bytes(k, d));
    // check_payloads on records of just those bytes gives the same verdict.
    std::vector<unsigned char> p = good_set();
    set_index(p, kBytes, 1, 2, 0);
    std::vector<unsigned char> records(kP * topk::checked_bytes(kK));
    for (std::size_t r = 0; r < kP; ++r)
        std::memcpy(records.data() + r * topk::checked_bytes(kK), p.data() + r * kBytes, topk::checked_bytes(kK));
    topk::Fault a, b;
    EXPECT_EQ(topk::check_payloads(p.data(), kP, kBytes, kN, kK, &a), topk::Verdict::Reject);
    EXPECT_EQ(topk::check_payloads(records.data(), kP, topk::checked_bytes(kK), kN, kK, &b), topk::Verdict::Reject);
    EXPECT_EQ(topk::describe(a, "count"), topk::describe(b, "count"));
}

// --------------------------------------------------------------- SKETCH

sketch_support::Fault tail_fault(std::size_t n, unsigned char last, unsigned char flag, bool *ok)
{
    const unsigned char tail[2] = {last, flag};
    sketch_support::Fault f;
    *ok = sketch_support::check_tail(tail, n, &f);
    return f;
}

TEST(CollectiveSketch, EveryBitBelowNAndAFlagOfZeroOrOneAreAccepted)
{
    bool ok = false;
    for (std::size_t n : {1, 7, 8, 13, 16, 1025}) {
        const unsigned used = static_cast<unsigned>(n % 8);
        const unsigned char full = static_cast<unsigned char>(used == 0 ? 0xff : (1u << used) - 1);
        for (unsigned char flag : {0, 1}) {
            tail_fault(n, full, flag, &ok);
            EXPECT_TRUE(ok) << "n " << n;
            tail_fault(n, 0, flag, &ok);
            EXPECT_TRUE(ok) << "n " << n;
        }
    }
    // The offsets the collectives read the tail at.
    EXPECT_EQ(sketch_support::tail_offset(13), 1u);
    EXPECT_EQ(sketch_support::tail_offset(16), 1u);
    EXPECT_EQ(sketch_support::tail_offset(17), 2u);
    EXPECT_EQ(sketch_support::tail_offset(13) + sketch_support::kTailBytes, sketch_support::message_bytes(13));
}

TEST(CollectiveSketch, RejectsBitsPastN)
{
    bool ok = true;
    for (unsigned char last : {0x20, 0x80, 0xff}) {
        const sketch_support::Fault f = tail_fault(13, last, 0, &ok);  // bits 0 .. 4 of the last byte are elements
        EXPECT_FALSE(ok);
        EXPECT_EQ(f.field, sketch_support::Field::PaddingBits);
        EXPECT_EQ(f.found, last);
        EXPECT_EQ(f.expected, 0x1fu);
        EXPECT_NE(sketch_support::describe(f).find("bits set at or beyond element 13"), std::string::npos)
            << sketch_support::describe(f);
    }
    tail_fault(1, 0x02, 1, &ok);
    EXPECT_FALSE(ok);
}

TEST(CollectiveSketch, RejectsAFlagByteOtherThanZeroOrOne)
{
    bool ok = true;
    for (unsigned char flag : {2, 3, 0x80, 0xff}) {
        const sketch_support::Fault f = tail_fault(16, 0xff, flag, &ok);
        EXPECT_FALSE(ok);
        EXPECT_EQ(f.field, sketch_support::Field::Flag);
        EXPECT_EQ(f.found, flag);
        char words[32];
        std::snprintf(words, sizeof words, "flag byte 0x%02x", flag);
        EXPECT_NE(sketch_support::describe(f).find(words), std::string::npos) << sketch_support::describe(f);
    }
}

TEST(CollectiveSketch, RowsPerTableOutsideTheirRangeAreRejected)
{
    sketch_support::Fault f;
    EXPECT_TRUE(sketch_support::check_rows(1, &f));
    EXPECT_TRUE(sketch_support::check_rows(sketch::kMaxRowsPerTable, &f));
    EXPECT_EQ(sketch::kMaxRowsPerTable, 1398101u);
    for (std::uint64_t m : {std::uint64_t{0}, std::uint64_t{sketch::kMaxRowsPerTable} + 1, std::uint64_t{1} << 32,
                            (std::uint64_t{1} << 32) + 1}) {
        EXPECT_FALSE(sketch_support::check_rows(m, &f)) << m;
        EXPECT_EQ(f.field, sketch_support::Field::Rows);
        EXPECT_EQ(f.found, m);
        EXPECT_NE(sketch_support::describe(f).find("outside [1, 1398101]"), std::string::npos)
            << sketch_support::describe(f);
    }
    EXPECT_FALSE(sketch_support::check_rows(sketch_support::kRowsMalformed, &f));
    EXPECT_NE(sketch_support::describe(f).find("found the support message of its shard malformed"), std::string::npos)
        << sketch_support::describe(f);
}

TEST(CollectiveSketch, ReferenceDecoderAgreesWithTheLibraryOnAConsistentSketch)
{
    // The fuzz driver's reference, checked once here: integer values, so
    // every sum is exact and both decoders must agree bit for bit.
    Rng rng(21);
    const std::size_t n = 3000;
    const std::vector<std::uint32_t> support = fuzz::random_indices(n, 300, rng);
    std::vector<float> x(n, 0.0f);
    for (std::uint32_t i : support) x[i] = static_cast<float>(static_cast<int>(rng.below(2001)) - 1000);
    const std::vector<unsigned char> msg = fuzz::support_message(n, support, 0);
    sketch::Layout layout;
    layout.n = n;
    layout.seed = 99;
    layout.m = sketch::rows_per_table(msg.data(), n, 0.75);
    std::vector<float> cells(layout.cells(), 0.0f);
    sketch::encode<float>(layout, x.data(), support.data(), support.size(), cells.data());
    const fuzz::ReferenceDecode ref = fuzz::reference_sketch_decode<float>(layout, msg.data(), cells);
    std::vector<float> out(n, 1.0f), work(cells);
    sketch::DecodeScratch scratch;
    const sketch::DecodeInfo info = sketch::decode<float>(layout, msg.data(), work.data(), out.data(), &scratch);
    EXPECT_EQ(info.support, ref.support);
    EXPECT_EQ(info.peeled, ref.peeled);
    EXPECT_EQ(ref.support, support.size());
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(static_cast<double>(out[i]), ref.out[i]) << "element " << i;
}

}  // namespace
}  // namespace cc_coll::detail
