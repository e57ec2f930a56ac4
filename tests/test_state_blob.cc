// Checkpoints of a communicator's compression state (dispatch/checkpoint.hpp;
// docs/wire.md, "State checkpoint"), without MPI: communicators built
// directly, their residuals, LEP residuals and LOWRANK entries set through
// the stores, then exported and imported.
//
//  - the layout, byte by byte: header, sections, a residual record, a
//    LOWRANK entry, the checksum (FNV-1a 64 computed here independently);
//  - a round trip restores every value, shape, count and byte count, and
//    the re-exported blob is identical;
//  - import replaces the whole state; every truncation and every single-byte
//    change of a blob is rejected with the state untouched; malformed fields
//    under a correct checksum, other versions, another rank, the caps and
//    device state without a device each give their own status and message.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <mpi.h>

#include "core/comm.hpp"
#include "core/config.hpp"
#include "core/ef_store.hpp"
#include "core/error.hpp"
#include "dispatch/checkpoint.hpp"
#include "gpu/gpu.hpp"
#include "compressors/lowrank/lowrank_state.hpp"

namespace cc_coll::detail {
namespace {

std::shared_ptr<Comm> make_comm(int rank = 0, int size = 2, std::uint64_t ef_cap = 0, std::uint64_t state_cap = 0)
{
    Config config;
    config.ef_max_bytes = ef_cap;
    config.state_max_bytes = state_cap;
    return std::make_shared<Comm>(MPI_COMM_NULL, rank, size, config);
}

std::vector<unsigned char> blob_of(Comm &c)
{
    std::size_t size = 0;
    bool too_small = false;
    EXPECT_EQ(export_state(c, nullptr, &size, &too_small, "test"), CC_COLL_OK) << last_error();
    std::vector<unsigned char> out(size);
    EXPECT_EQ(export_state(c, out.data(), &size, &too_small, "test"), CC_COLL_OK) << last_error();
    EXPECT_EQ(size, out.size());
    return out;
}

cc_coll_status_t import_blob(Comm &c, const std::vector<unsigned char> &b)
{
    return import_state(c, b.data(), b.size(), "cc_coll_state_import");
}

// FNV-1a 64, written here apart from the library's.
std::uint64_t fnv(const unsigned char *p, std::size_t n, std::uint64_t h = 14695981039346656037ull)
{
    for (std::size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

void fix_checksum(std::vector<unsigned char> &b)
{
    std::uint64_t h = fnv(b.data(), 40);
    h = fnv(b.data() + 48, b.size() - 48, h);
    for (int i = 0; i < 8; ++i) b[40 + i] = static_cast<unsigned char>(h >> (8 * i));
}

std::uint64_t get(const std::vector<unsigned char> &b, std::size_t at, int n)
{
    std::uint64_t v = 0;
    for (int i = n - 1; i >= 0; --i) v = v << 8 | b.at(at + i);
    return v;
}

void put(std::vector<unsigned char> &b, std::size_t at, int n, std::uint64_t v)
{
    for (int i = 0; i < n; ++i) b.at(at + i) = static_cast<unsigned char>(v >> (8 * i));
}

Residual *residual(Comm &c, EfStore &store, const EfKey &k, std::size_t n, cc_coll_dtype_t d, double base)
{
    Residual *r = nullptr;
    EXPECT_EQ(store.acquire(k, n, d, &r), CC_COLL_OK) << last_error();
    (void)c;
    for (std::size_t i = 0; i < n; ++i) {
        const double v = base + 0.25 * static_cast<double>(i) - 1e-3 * static_cast<double>(i * i);
        if (d == CC_COLL_F64) r->f64[i] = v;
        else r->f32[i] = static_cast<float>(v);
    }
    return r;
}

// A LOWRANK entry with factors of (rows, cols, rank) in work type W.
template <typename W>
LowRankState *lowrank_entry(Comm &c, const EfKey &k, std::size_t rows, std::size_t cols, int rank,
                            std::uint64_t calls, bool with_p = true)
{
    LowRankStore &store = k.peer >= 0 ? lowrank_channel_states(c) : lowrank_tensor_states(c);
    LowRankState *s = nullptr;
    const std::uint64_t fb = (rows + cols) * static_cast<std::uint64_t>(rank) * sizeof(W);
    EXPECT_EQ(store.acquire(k, fb, false, [](bool) { return std::string("test"); }, &s), CC_COLL_OK);
    s->calls = calls;
    s->rows = rows;
    s->cols = cols;
    s->rank = rank;
    if (with_p) {
        s->p<W>().resize(rows * static_cast<std::size_t>(rank));
        for (std::size_t i = 0; i < s->p<W>().size(); ++i) s->p<W>()[i] = W(0.5) + W(i) / W(7);
    }
    s->q<W>().resize(cols * static_cast<std::size_t>(rank));
    for (std::size_t i = 0; i < s->q<W>().size(); ++i) s->q<W>()[i] = W(-0.25) + W(i) / W(3);
    return s;
}

// A communicator holding some of everything a checkpoint carries.
void populate(Comm &c)
{
    int x = 0;
    residual(c, c.ef(), EfKey::from(true, 101, nullptr, 5, CC_COLL_F32), 5, CC_COLL_F32, 1.0);
    residual(c, c.ef(), EfKey::from(true, 102, nullptr, 4, CC_COLL_F64), 4, CC_COLL_F64, -2.0);
    residual(c, c.ef(), EfKey::from(false, 0, &x, 6, CC_COLL_BF16), 6, CC_COLL_BF16, 0.5);
    residual(c, c.ef(), EfKey::from(true, 103, nullptr, 0, CC_COLL_F16), 0, CC_COLL_F16, 0.0);
    residual(c, c.lep(), EfKey::channel(1, false, 0, 7), 9, CC_COLL_F32, 3.0);
    residual(c, c.lep(), EfKey::channel(0, true, 99, 0), 3, CC_COLL_F64, 4.0);
    lowrank_entry<float>(c, EfKey::from(true, 201, nullptr, 0, CC_COLL_F32), 6, 4, 2, 5);
    lowrank_entry<double>(c, EfKey::from(true, 202, nullptr, 0, CC_COLL_F64), 3, 5, 1, 2);
    lowrank_entry<float>(c, EfKey::from(true, 203, nullptr, 0, CC_COLL_F32), 4, 4, 3, 0, false);  // set_q only
    LowRankState *dense = nullptr;
    ASSERT_EQ(lowrank_tensor_states(c).acquire(EfKey::from(true, 204, nullptr, 0, CC_COLL_F32), 0, false,
                                               [](bool) { return std::string("test"); }, &dense),
              CC_COLL_OK);
    dense->calls = 3;  // a 1-D tensor: a call count, no factors
    lowrank_entry<float>(c, EfKey::channel(1, false, 0, 7), 3, 3, 1, 4);
}

TEST(StateBlob, EmptyStateLayout)
{
    auto c = make_comm(1, 3);
    const std::vector<unsigned char> b = blob_of(*c);
    // header 48, residuals and LEP sections 16 + 8 each, LOWRANK section
    // 16 + 2 + 7 ("lowrank") + 8.
    ASSERT_EQ(b.size(), 48u + 24 + 24 + 33);
    EXPECT_EQ(std::string(reinterpret_cast<const char *>(b.data()), 4), "CCSS");
    EXPECT_EQ(get(b, 4, 2), 1u);    // format version
    EXPECT_EQ(get(b, 6, 2), 48u);   // header bytes
    EXPECT_EQ(get(b, 8, 2), static_cast<std::uint64_t>(CC_COLL_VERSION_MAJOR));
    EXPECT_EQ(get(b, 10, 2), static_cast<std::uint64_t>(CC_COLL_VERSION_MINOR));
    EXPECT_EQ(get(b, 12, 2), static_cast<std::uint64_t>(CC_COLL_VERSION_PATCH));
    EXPECT_EQ(get(b, 14, 2), 0u);   // flags
    EXPECT_EQ(get(b, 16, 4), 1u);   // rank
    EXPECT_EQ(get(b, 20, 4), 3u);   // communicator size
    EXPECT_EQ(get(b, 24, 8), b.size() - 48);
    EXPECT_EQ(get(b, 32, 4), 3u);   // sections
    EXPECT_EQ(get(b, 36, 4), 0u);
    std::uint64_t h = fnv(b.data(), 40);
    h = fnv(b.data() + 48, b.size() - 48, h);
    EXPECT_EQ(get(b, 40, 8), h);
    // residuals: kind 1, version 1, reserved, length 8, no records
    EXPECT_EQ(get(b, 48, 2), 1u);
    EXPECT_EQ(get(b, 50, 2), 1u);
    EXPECT_EQ(get(b, 52, 4), 0u);
    EXPECT_EQ(get(b, 56, 8), 8u);
    EXPECT_EQ(get(b, 64, 8), 0u);
    // LEP residuals: kind 2
    EXPECT_EQ(get(b, 72, 2), 2u);
    EXPECT_EQ(get(b, 74, 2), 1u);
    EXPECT_EQ(get(b, 80, 8), 8u);
    EXPECT_EQ(get(b, 88, 8), 0u);
    // the LOWRANK section: kind 3, the method's version 1, its name, no entries
    EXPECT_EQ(get(b, 96, 2), 3u);
    EXPECT_EQ(get(b, 98, 2), 1u);
    EXPECT_EQ(get(b, 104, 8), 17u);
    EXPECT_EQ(get(b, 112, 2), 7u);
    EXPECT_EQ(std::string(reinterpret_cast<const char *>(b.data()) + 114, 7), "lowrank");
    EXPECT_EQ(get(b, 121, 8), 0u);
}

TEST(StateBlob, RecordLayout)
{
    auto c = make_comm(0, 2);
    Residual *r = residual(*c, c->ef(), EfKey::from(true, 0x0102030405060708ull, nullptr, 3, CC_COLL_F32), 3,
                           CC_COLL_F32, 1.5);
    int x = 0;
    residual(*c, c->lep(), EfKey::channel(1, false, 0, 42), 1, CC_COLL_F64, -1.0);
    lowrank_entry<double>(*c, EfKey::from(false, 0, &x, 6, CC_COLL_F64), 3, 2, 1, 9);
    const std::vector<unsigned char> b = blob_of(*c);
    // residual section: one record of 24 + 16 + 3 x 4 bytes
    EXPECT_EQ(get(b, 56, 8), 8u + 24 + 16 + 12);
    EXPECT_EQ(get(b, 64, 8), 1u);
    std::size_t at = 72;
    EXPECT_EQ(get(b, at, 1), 1u);                          // key kind: tensor by ef_key
    EXPECT_EQ(get(b, at + 1, 1), 0u);                      // key dtype (by address only)
    EXPECT_EQ(get(b, at + 4, 4), 0xffffffffu);             // peer -1
    EXPECT_EQ(get(b, at + 8, 8), 0x0102030405060708ull);   // ef_key
    EXPECT_EQ(get(b, at + 16, 8), 0u);
    at += 24;
    EXPECT_EQ(get(b, at, 1), static_cast<std::uint64_t>(CC_COLL_F32));
    EXPECT_EQ(get(b, at + 1, 1), 0u);  // host memory
    EXPECT_EQ(get(b, at + 8, 8), 3u);  // count
    at += 16;
    for (int i = 0; i < 3; ++i) {
        std::uint32_t bits;
        std::memcpy(&bits, &r->f32[static_cast<std::size_t>(i)], 4);
        EXPECT_EQ(get(b, at + 4 * static_cast<std::size_t>(i), 4), bits);
    }
    at += 12;
    // LEP section: a channel by tag
    EXPECT_EQ(get(b, at, 2), 2u);
    at += 16 + 8;
    EXPECT_EQ(get(b, at, 1), 3u);       // key kind: channel by tag
    EXPECT_EQ(get(b, at + 4, 4), 1u);   // peer
    EXPECT_EQ(get(b, at + 8, 8), 42u);  // tag
    at += 24 + 16 + 8;
    // LOWRANK section: one entry keyed by address, binary64 factors on the host
    EXPECT_EQ(get(b, at, 2), 3u);
    at += 16 + 2 + 7;
    EXPECT_EQ(get(b, at, 8), 1u);
    at += 8;
    EXPECT_EQ(get(b, at, 1), 0u);  // key kind: tensor by address
    EXPECT_EQ(get(b, at + 1, 1), static_cast<std::uint64_t>(CC_COLL_F64));
    EXPECT_EQ(get(b, at + 8, 8), reinterpret_cast<std::uintptr_t>(&x));
    EXPECT_EQ(get(b, at + 16, 8), 6u);
    at += 24;
    EXPECT_EQ(get(b, at, 8), 9u);        // calls
    EXPECT_EQ(get(b, at + 8, 8), 3u);    // rows
    EXPECT_EQ(get(b, at + 16, 8), 2u);   // cols
    EXPECT_EQ(get(b, at + 24, 4), 1u);   // rank
    EXPECT_EQ(get(b, at + 28, 1), 1u);   // factors in host memory
    EXPECT_EQ(get(b, at + 29, 1), 8u);   // binary64
    EXPECT_EQ(get(b, at + 32, 8), 3u);   // P values
    EXPECT_EQ(get(b, at + 40, 8), 2u);   // Q values
    EXPECT_EQ(at + 48 + 5 * 8, b.size());
}

TEST(StateBlob, RoundTripRestoresEverything)
{
    auto a = make_comm();
    populate(*a);
    const std::vector<unsigned char> b = blob_of(*a);
    auto c = make_comm();
    ASSERT_EQ(import_blob(*c, b), CC_COLL_OK) << last_error();
    EXPECT_EQ(blob_of(*c), b);
    EXPECT_EQ(c->ef().bytes(), a->ef().bytes());
    EXPECT_EQ(c->lep().bytes(), a->lep().bytes());
    EXPECT_EQ(c->state_budget().bytes(), a->state_budget().bytes());
    for (const EfKey &k : {EfKey::from(true, 101, nullptr, 5, CC_COLL_F32), EfKey::from(true, 102, nullptr, 4,
                                                                                          CC_COLL_F64)}) {
        const Residual *ra = a->ef().find(k), *rc = c->ef().find(k);
        ASSERT_NE(rc, nullptr);
        EXPECT_EQ(rc->dtype, ra->dtype);
        EXPECT_EQ(rc->count, ra->count);
        EXPECT_EQ(rc->f32, ra->f32);
        EXPECT_EQ(rc->f64, ra->f64);
    }
    const Residual *lep = c->lep().find(EfKey::channel(1, false, 0, 7));
    ASSERT_NE(lep, nullptr);
    EXPECT_EQ(lep->f32, a->lep().find(EfKey::channel(1, false, 0, 7))->f32);
    const EfKey k201 = EfKey::from(true, 201, nullptr, 0, CC_COLL_F32);
    LowRankState *sa = lowrank_tensor_states(*a).find(k201), *sc = lowrank_tensor_states(*c).find(k201);
    ASSERT_NE(sc, nullptr);
    EXPECT_EQ(sc->calls, 5u);
    EXPECT_EQ(sc->rows, 6u);
    EXPECT_EQ(sc->cols, 4u);
    EXPECT_EQ(sc->rank, 2);
    EXPECT_EQ(sc->p_f32, sa->p_f32);
    EXPECT_EQ(sc->q_f32, sa->q_f32);
    const EfKey k203 = EfKey::from(true, 203, nullptr, 0, CC_COLL_F32);
    EXPECT_TRUE(lowrank_tensor_states(*c).find(k203)->p_f32.empty());
    EXPECT_EQ(lowrank_tensor_states(*c).find(k203)->q_f32, lowrank_tensor_states(*a).find(k203)->q_f32);
    EXPECT_EQ(lowrank_tensor_states(*c).find(EfKey::from(true, 204, nullptr, 0, CC_COLL_F32))->calls, 3u);
    EXPECT_EQ(lowrank_channel_states(*c).find(EfKey::channel(1, false, 0, 7))->calls, 4u);
    // What a call reads: the residual matches its key's count and dtype.
    Residual *found = nullptr;
    EXPECT_EQ(c->ef().find_matching(EfKey::from(true, 102, nullptr, 4, CC_COLL_F64), 4, CC_COLL_F64, &found),
              CC_COLL_OK);
    EXPECT_NE(found, nullptr);
}

TEST(StateBlob, ImportReplacesTheWholeState)
{
    auto a = make_comm();
    populate(*a);
    auto small = make_comm();
    residual(*small, small->ef(), EfKey::from(true, 7, nullptr, 2, CC_COLL_F32), 2, CC_COLL_F32, 1.0);
    const std::vector<unsigned char> b = blob_of(*small);
    ASSERT_EQ(import_blob(*a, b), CC_COLL_OK) << last_error();
    EXPECT_EQ(blob_of(*a), b);
    EXPECT_EQ(a->ef().find(EfKey::from(true, 101, nullptr, 5, CC_COLL_F32)), nullptr);
    EXPECT_EQ(a->lep().bytes(), 0u);
    EXPECT_EQ(a->state_budget().bytes(), 0u);
    // and an empty blob empties it
    ASSERT_EQ(import_blob(*a, blob_of(*make_comm())), CC_COLL_OK);
    EXPECT_EQ(a->ef().bytes(), 0u);
}

TEST(StateBlob, SizeQueryAndSmallBuffer)
{
    auto a = make_comm();
    populate(*a);
    std::size_t size = 0;
    bool too_small = false;
    ASSERT_EQ(export_state(*a, nullptr, &size, &too_small, "f"), CC_COLL_OK);
    std::vector<unsigned char> buf(size + 10, 0xee);
    std::size_t given = size - 1;
    EXPECT_EQ(export_state(*a, buf.data(), &given, &too_small, "f"), CC_COLL_ERR_INVALID_ARG);
    EXPECT_TRUE(too_small);
    EXPECT_EQ(given, size);
    EXPECT_EQ(buf[0], 0xee);  // nothing written
    given = size + 10;
    ASSERT_EQ(export_state(*a, buf.data(), &given, &too_small, "f"), CC_COLL_OK);
    EXPECT_EQ(given, size);
    EXPECT_EQ(buf[size], 0xee);
}

// Every error leaves the state as it was.
void expect_rejected(Comm &c, const std::vector<unsigned char> &bad, cc_coll_status_t status, const char *words)
{
    const std::vector<unsigned char> before = blob_of(c);
    const std::uint64_t ef = c.ef().bytes(), state = c.state_budget().bytes();
    EXPECT_EQ(import_blob(c, bad), status) << last_error();
    EXPECT_NE(std::string(last_error()).find(words), std::string::npos) << last_error();
    EXPECT_EQ(blob_of(c), before);
    EXPECT_EQ(c.ef().bytes(), ef);
    EXPECT_EQ(c.state_budget().bytes(), state);
}

TEST(StateBlob, CorruptBlobsAreCleanErrors)
{
    auto a = make_comm();
    populate(*a);
    const std::vector<unsigned char> good = blob_of(*a);
    auto c = make_comm();
    residual(*c, c->ef(), EfKey::from(true, 5, nullptr, 2, CC_COLL_F32), 2, CC_COLL_F32, 1.0);

    std::vector<unsigned char> b = good;
    b.pop_back();
    expect_rejected(*c, b, CC_COLL_ERR_INVALID_ARG, "truncated");
    b.assign(good.begin(), good.begin() + 20);
    expect_rejected(*c, b, CC_COLL_ERR_INVALID_ARG, "truncated");
    b = good;
    b.push_back(0);
    expect_rejected(*c, b, CC_COLL_ERR_INVALID_ARG, "malformed");
    b = good;
    b[b.size() / 2] ^= 0x10;
    expect_rejected(*c, b, CC_COLL_ERR_INVALID_ARG, "checksum");
    b = good;
    put(b, 4, 2, 2);
    expect_rejected(*c, b, CC_COLL_ERR_VERSION_MISMATCH, "format version 2");
    b = good;
    b[0] ^= 0xff;
    expect_rejected(*c, b, CC_COLL_ERR_INVALID_ARG, "not a libcc_coll state blob");
    b = good;
    std::reverse(b.begin(), b.begin() + 4);
    expect_rejected(*c, b, CC_COLL_ERR_INVALID_ARG, "byte-swapped");
    b = good;
    put(b, 8, 2, CC_COLL_VERSION_MAJOR + 1);
    fix_checksum(b);
    expect_rejected(*c, b, CC_COLL_ERR_VERSION_MISMATCH, "another major version");
    expect_rejected(*c, {}, CC_COLL_ERR_INVALID_ARG, "not a libcc_coll state blob");

    // Another rank's blob, or another communicator size.
    auto other = make_comm(1, 2);
    expect_rejected(*other, good, CC_COLL_ERR_MISMATCH, "rank 0 of a communicator of 2");
    auto bigger = make_comm(0, 3);
    expect_rejected(*bigger, good, CC_COLL_ERR_MISMATCH, "this is rank 0 of 3");
}

TEST(StateBlob, EveryTruncationAndByteChangeIsRejected)
{
    auto a = make_comm();
    residual(*a, a->ef(), EfKey::from(true, 1, nullptr, 3, CC_COLL_F32), 3, CC_COLL_F32, 1.0);
    residual(*a, a->lep(), EfKey::channel(1, false, 0, 2), 2, CC_COLL_F64, 2.0);
    lowrank_entry<float>(*a, EfKey::from(true, 3, nullptr, 0, CC_COLL_F32), 2, 2, 1, 1);
    const std::vector<unsigned char> good = blob_of(*a);
    auto c = make_comm();
    populate(*c);
    const std::vector<unsigned char> before = blob_of(*c);
    for (std::size_t n = 0; n < good.size(); ++n) {
        std::vector<unsigned char> b(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(n));
        ASSERT_NE(import_blob(*c, b), CC_COLL_OK) << n;
    }
    for (std::size_t i = 0; i < good.size(); ++i)
        for (unsigned delta : {0x01u, 0x80u, 0xffu}) {
            std::vector<unsigned char> b = good;
            b[i] = static_cast<unsigned char>(b[i] ^ delta);
            ASSERT_NE(import_blob(*c, b), CC_COLL_OK) << "byte " << i;
        }
    EXPECT_EQ(blob_of(*c), before);
}

// Fields out of their domain under a correct checksum: found by the
// structural checks, each named.
TEST(StateBlob, MalformedFieldsAreNamed)
{
    auto a = make_comm();
    residual(*a, a->ef(), EfKey::from(true, 1, nullptr, 3, CC_COLL_F32), 3, CC_COLL_F32, 1.0);
    lowrank_entry<float>(*a, EfKey::from(true, 3, nullptr, 0, CC_COLL_F32), 2, 2, 1, 1);
    const std::vector<unsigned char> good = blob_of(*a);
    auto c = make_comm();
    const std::size_t rec = 72;        // the residual record's key
    const std::size_t lep = 72 + 52;   // the LEP section
    const std::size_t lr = lep + 24;   // the LOWRANK section
    const std::size_t entry = lr + 16 + 2 + 7 + 8;
    struct Case {
        std::size_t at;
        int bytes;
        std::uint64_t value;
        cc_coll_status_t status;
        const char *words;
    };
    const Case cases[] = {
        {rec + 24, 1, 9, CC_COLL_ERR_INVALID_ARG, "residual dtype 9"},
        {rec + 25, 1, 2, CC_COLL_ERR_INVALID_ARG, "memory kind 2"},
        {rec + 32, 8, 4, CC_COLL_ERR_INVALID_ARG, "residual values"},
        {rec + 32, 8, 1ull << 40, CC_COLL_ERR_INVALID_ARG, "above the largest count"},
        {rec, 1, 7, CC_COLL_ERR_INVALID_ARG, "key kind 7"},
        {rec, 1, 2, CC_COLL_ERR_INVALID_ARG, "channel key"},
        {rec + 2, 2, 1, CC_COLL_ERR_INVALID_ARG, "reserved"},
        {64, 8, 1000, CC_COLL_ERR_INVALID_ARG, "cannot fit"},
        {56, 8, 1, CC_COLL_ERR_INVALID_ARG, "needs 8 bytes"},
        {56, 8, 1ull << 62, CC_COLL_ERR_INVALID_ARG, "truncated or corrupt"},
        {48, 2, 9, CC_COLL_ERR_INVALID_ARG, "unknown section kind 9"},
        {lep, 2, 1, CC_COLL_ERR_INVALID_ARG, "a second residuals section"},
        {50, 2, 2, CC_COLL_ERR_VERSION_MISMATCH, "residuals section has version 2"},
        {32, 4, 4, CC_COLL_ERR_INVALID_ARG, "a section header"},
        {32, 4, 2, CC_COLL_ERR_INVALID_ARG, "follow the last of the 2 sections"},
        {14, 2, 1, CC_COLL_ERR_INVALID_ARG, "flags"},
        {6, 2, 40, CC_COLL_ERR_INVALID_ARG, "header of 40 bytes"},
        {lr + 2, 2, 2, CC_COLL_ERR_VERSION_MISMATCH, "LOWRANK section has version 2"},
        {lr + 16 + 2, 1, 'x', CC_COLL_ERR_NOT_SUPPORTED, "\"xowrank\", which this library does not know"},
        {lr + 16, 2, 0, CC_COLL_ERR_INVALID_ARG, "method name of 0 bytes"},
        {lr + 16 + 2, 1, 0x01, CC_COLL_ERR_INVALID_ARG, "not printable"},
        {entry + 24 + 24, 4, 3, CC_COLL_ERR_INVALID_ARG, "rank 3 above min(rows, cols)"},
        {entry + 24 + 24, 4, 0, CC_COLL_ERR_INVALID_ARG, "rank 0 (no factors)"},
        {entry + 24 + 24, 4, 70000, CC_COLL_ERR_INVALID_ARG, "rank 70000 is above 65536"},
        {entry + 24 + 8, 8, 0, CC_COLL_ERR_INVALID_ARG, "shape 0 x 2"},
        {entry + 24 + 28, 1, 3, CC_COLL_ERR_INVALID_ARG, "factor memory 3"},
        {entry + 24 + 28, 1, 0, CC_COLL_ERR_INVALID_ARG, "no factors, but work size 4"},
        {entry + 24 + 29, 1, 2, CC_COLL_ERR_INVALID_ARG, "work size 2"},
        {entry + 24 + 32, 8, 3, CC_COLL_ERR_INVALID_ARG, "P and Q of 3 and 2 values"},
        {entry + 4, 4, 5, CC_COLL_ERR_INVALID_ARG, "tensor key with peer 5"},
        {lr + 16 + 2 + 7, 8, 2, CC_COLL_ERR_INVALID_ARG, "cannot fit"},
    };
    for (const Case &k : cases) {
        std::vector<unsigned char> b = good;
        put(b, k.at, k.bytes, k.value);
        fix_checksum(b);
        SCOPED_TRACE(k.words);
        expect_rejected(*c, b, k.status, k.words);
    }
    // A method that keeps no state of its own.
    std::vector<unsigned char> b = good;
    put(b, lr + 16, 2, 4);
    std::memcpy(&b[lr + 18], "topk", 4);
    fix_checksum(b);
    expect_rejected(*c, b, CC_COLL_ERR_NOT_SUPPORTED, "\"topk\", which this library keeps none of");
    // Two records of one key.
    auto d = make_comm();
    residual(*d, d->ef(), EfKey::from(true, 1, nullptr, 1, CC_COLL_F32), 1, CC_COLL_F32, 1.0);
    residual(*d, d->ef(), EfKey::from(true, 2, nullptr, 1, CC_COLL_F32), 1, CC_COLL_F32, 1.0);
    b = blob_of(*d);
    put(b, 72 + 44 + 8, 8, 1);  // the second record's ef_key
    fix_checksum(b);
    expect_rejected(*c, b, CC_COLL_ERR_INVALID_ARG, "a second residual of ef_key 1");
    // Two LOWRANK entries of one key.
    auto f = make_comm();
    lowrank_entry<float>(*f, EfKey::from(true, 1, nullptr, 0, CC_COLL_F32), 2, 2, 1, 1);
    lowrank_entry<float>(*f, EfKey::from(true, 2, nullptr, 0, CC_COLL_F32), 2, 2, 1, 1);
    b = blob_of(*f);
    const std::size_t first = 72 + 24 + 16 + 2 + 7 + 8;  // both residual sections empty
    put(b, first + 24 + 48 + 16 + 8, 8, 1);  // the second entry's ef_key
    fix_checksum(b);
    expect_rejected(*c, b, CC_COLL_ERR_INVALID_ARG, "a second LOWRANK entry of the same key");
    // Two sections of one method: the LOWRANK section repeated.
    b = blob_of(*f);
    const std::vector<unsigned char> section(b.begin() + 96, b.end());
    b.insert(b.end(), section.begin(), section.end());
    put(b, 24, 8, b.size() - 48);
    put(b, 32, 4, 4);
    fix_checksum(b);
    expect_rejected(*c, b, CC_COLL_ERR_INVALID_ARG, "a second state section of method \"lowrank\"");
    // A channel whose peer is not a rank of the communicator.
    auto e = make_comm();
    residual(*e, e->lep(), EfKey::channel(1, false, 0, 2), 1, CC_COLL_F32, 1.0);
    b = blob_of(*e);
    put(b, 72 + 24 + 4, 4, 2);
    fix_checksum(b);
    expect_rejected(*c, b, CC_COLL_ERR_INVALID_ARG, "names peer 2");
}

TEST(StateBlob, CapsAreCheckedBeforeAnythingChanges)
{
    auto a = make_comm();
    populate(*a);
    const std::vector<unsigned char> b = blob_of(*a);
    auto ef_capped = make_comm(0, 2, a->ef().bytes() - 1, 0);
    residual(*ef_capped, ef_capped->ef(), EfKey::from(true, 9, nullptr, 1, CC_COLL_F32), 1, CC_COLL_F32, 1.0);
    expect_rejected(*ef_capped, b, CC_COLL_ERR_EF_LIMIT, "collective residuals hold");
    auto state_capped = make_comm(0, 2, 0, a->state_budget().bytes() - 1);
    expect_rejected(*state_capped, b, CC_COLL_ERR_EF_LIMIT, "CC_COLL_STATE_MAX_BYTES");
    auto exact = make_comm(0, 2, a->ef().bytes(), a->state_budget().bytes());
    EXPECT_EQ(import_blob(*exact, b), CC_COLL_OK) << last_error();
    EXPECT_EQ(exact->state_budget().bytes(), a->state_budget().bytes());
    // The LEP residuals are checked against the same cap on their own.
    auto lep_only = make_comm();
    residual(*lep_only, lep_only->lep(), EfKey::channel(1, false, 0, 2), 10, CC_COLL_F64, 1.0);
    auto lep_capped = make_comm(0, 2, 79, 0);
    expect_rejected(*lep_capped, blob_of(*lep_only), CC_COLL_ERR_EF_LIMIT, "LEP residuals hold 80 bytes");
}

TEST(StateBlob, DeviceStateNeedsADevice)
{
    if (gpu::device_count() > 0) GTEST_SKIP() << "this process has a CUDA device";
    auto a = make_comm();
    residual(*a, a->ef(), EfKey::from(true, 1, nullptr, 3, CC_COLL_F32), 3, CC_COLL_F32, 1.0);
    lowrank_entry<float>(*a, EfKey::from(true, 3, nullptr, 0, CC_COLL_F32), 2, 2, 1, 1);
    const std::vector<unsigned char> good = blob_of(*a);
    auto c = make_comm();
    std::vector<unsigned char> b = good;
    put(b, 72 + 25, 1, 1);  // the residual in device memory
    fix_checksum(b);
    expect_rejected(*c, b, CC_COLL_ERR_NOT_SUPPORTED, "no usable CUDA device");
    b = good;
    put(b, 72 + 52 + 24 + 16 + 2 + 7 + 8 + 24 + 28, 1, 2);  // the factors in device memory
    fix_checksum(b);
    expect_rejected(*c, b, CC_COLL_ERR_NOT_SUPPORTED, "LOWRANK factors in device memory");
}

}  // namespace
}  // namespace cc_coll::detail
