// The accounting of the methods' per-tensor state other than residuals
// (core/state_budget.hpp, CC_COLL_STATE_MAX_BYTES) and LOWRANK's stores on
// it (compressors/lowrank/lowrank_state.hpp): what an entry is charged, the cap, pending
// charges and their rollback, and resets giving the bytes back. The calls
// that reach them with real ranks are in mpi_tests/state_cap.c.
#include <cstdint>
#include <string>

#include <gtest/gtest.h>

#include "cc_coll.h"
#include "compressors/lowrank/powersgd.hpp"
#include "core/state_budget.hpp"
#include "compressors/lowrank/lowrank_state.hpp"

namespace cc_coll::detail {
namespace {

EfKey key_of(std::uint64_t k) { return EfKey::from(true, k, nullptr, 0, CC_COLL_F32); }

bool contains(const std::string &text, const std::string &part) { return text.find(part) != std::string::npos; }

// describe() for LowRankStore::acquire: the state's name in messages.
std::string describe(bool fresh) { return fresh ? "a new test state" : "a growing test state"; }

TEST(StateBudget, ZeroIsNoCap)
{
    StateBudget b(0);
    EXPECT_EQ(b.reserve(std::uint64_t{1} << 60, "x"), CC_COLL_OK);
    EXPECT_EQ(b.bytes(), std::uint64_t{1} << 60);
    b.release(std::uint64_t{1} << 60);
    EXPECT_EQ(b.bytes(), 0u);
}

TEST(StateBudget, PastTheCapIsEfLimitNamingTheSettingAndTheBytes)
{
    StateBudget b(1000);
    EXPECT_EQ(b.reserve(600, "first"), CC_COLL_OK);
    EXPECT_EQ(b.reserve(400, "second"), CC_COLL_OK);  // exactly the cap
    EXPECT_EQ(b.bytes(), 1000u);
    b.release(400);
    EXPECT_EQ(b.reserve(401, "a new LOWRANK state for tensor 3"), CC_COLL_ERR_EF_LIMIT);
    const std::string msg = cc_coll_last_error();
    EXPECT_TRUE(contains(msg, "CC_COLL_STATE_MAX_BYTES = 1000")) << msg;
    EXPECT_TRUE(contains(msg, "a new LOWRANK state for tensor 3")) << msg;
    EXPECT_TRUE(contains(msg, "needs 401 bytes")) << msg;
    EXPECT_TRUE(contains(msg, "from 600 to 1001 bytes")) << msg;
    EXPECT_EQ(b.bytes(), 600u);  // nothing counted
    // A request larger than the cap itself cannot wrap around.
    EXPECT_EQ(b.reserve(UINT64_MAX, "huge"), CC_COLL_ERR_EF_LIMIT);
    EXPECT_EQ(b.bytes(), 600u);
    b.release(10000);  // more than held: clamps at zero
    EXPECT_EQ(b.bytes(), 0u);
}

TEST(LowRankStateBytes, EntryPlusFactorsInTheWorkType)
{
    EXPECT_EQ(lowrank_factor_bytes(64, 32, 2, CC_COLL_F32), (64u + 32u) * 2u * 4u);
    EXPECT_EQ(lowrank_factor_bytes(64, 32, 2, CC_COLL_F16), (64u + 32u) * 2u * 4u);  // binary32 work type
    EXPECT_EQ(lowrank_factor_bytes(64, 32, 2, CC_COLL_F64), (64u + 32u) * 2u * 8u);
    EXPECT_GE(kLowRankEntryBytes, sizeof(LowRankState) + sizeof(EfKey));
}

TEST(LowRankStore, NewKeysAreChargedUntilTheCapAndResetsGiveTheBytesBack)
{
    const std::uint64_t f = lowrank_factor_bytes(8, 8, 1, CC_COLL_F32);
    const std::uint64_t step = kLowRankEntryBytes + f;
    StateBudget b(3 * step + step / 2);
    {
        LowRankStore store(b);
        LowRankState *s = nullptr;
        for (std::uint64_t k = 1; k <= 3; ++k) {
            ASSERT_EQ(store.acquire(key_of(k), f, false, describe, &s), CC_COLL_OK);
            EXPECT_EQ(s->charged, step);
            EXPECT_EQ(b.bytes(), k * step);
        }
        // An existing key with room for its factors costs nothing more.
        ASSERT_EQ(store.acquire(key_of(2), f, false, describe, &s), CC_COLL_OK);
        ASSERT_EQ(store.acquire(key_of(2), 0, false, describe, &s), CC_COLL_OK);
        EXPECT_EQ(b.bytes(), 3 * step);
        // A fourth is refused, and not created.
        EXPECT_EQ(store.acquire(key_of(4), f, false, describe, &s), CC_COLL_ERR_EF_LIMIT);
        EXPECT_EQ(s, nullptr);
        EXPECT_TRUE(contains(cc_coll_last_error(), "a new test state")) << cc_coll_last_error();
        EXPECT_EQ(store.find(key_of(4)), nullptr);
        EXPECT_EQ(b.bytes(), 3 * step);
        store.reset(key_of(1));
        EXPECT_EQ(b.bytes(), 2 * step);
        EXPECT_EQ(store.acquire(key_of(4), f, false, describe, &s), CC_COLL_OK);
        store.reset_all();
        EXPECT_EQ(b.bytes(), 0u);
        ASSERT_EQ(store.acquire(key_of(5), f, false, describe, &s), CC_COLL_OK);
        EXPECT_EQ(b.bytes(), step);
    }
    EXPECT_EQ(b.bytes(), 0u);  // the store gives its bytes back when it goes
}

TEST(LowRankStore, GrowingFactorsAreChargedTheDifference)
{
    const std::uint64_t f = lowrank_factor_bytes(8, 8, 1, CC_COLL_F32);
    StateBudget b(kLowRankEntryBytes + f);
    LowRankStore store(b);
    LowRankState *s = nullptr;
    ASSERT_EQ(store.acquire(key_of(1), 0, false, describe, &s), CC_COLL_OK);  // a dense step: no factors
    EXPECT_EQ(b.bytes(), kLowRankEntryBytes);
    ASSERT_EQ(store.acquire(key_of(1), f, false, describe, &s), CC_COLL_OK);
    EXPECT_EQ(b.bytes(), kLowRankEntryBytes + f);
    // Twice the factors: past the cap, the entry keeps what it had.
    EXPECT_EQ(store.acquire(key_of(1), 2 * f, false, describe, &s), CC_COLL_ERR_EF_LIMIT);
    EXPECT_TRUE(contains(cc_coll_last_error(), "a growing test state")) << cc_coll_last_error();
    ASSERT_NE(store.find(key_of(1)), nullptr);
    EXPECT_EQ(store.find(key_of(1))->charged, kLowRankEntryBytes + f);
    // Smaller factors later keep the larger charge (the memory stays).
    ASSERT_EQ(store.acquire(key_of(1), f / 2, false, describe, &s), CC_COLL_OK);
    EXPECT_EQ(b.bytes(), kLowRankEntryBytes + f);
}

// A group's plans charge pending; a failed plan (or the next call's first
// plan) rolls back every pending charge: empty entries created for them go,
// growth is given back, committed entries stay.
TEST(LowRankStore, RollbackUndoesPendingCharges)
{
    const std::uint64_t f = lowrank_factor_bytes(8, 8, 1, CC_COLL_F32);
    StateBudget b(0);
    LowRankStore store(b);
    LowRankState *s = nullptr;
    ASSERT_EQ(store.acquire(key_of(1), 0, false, describe, &s), CC_COLL_OK);  // committed, no factors
    s->calls = 1;
    const std::uint64_t before = b.bytes();
    ASSERT_EQ(store.acquire(key_of(1), f, true, describe, &s), CC_COLL_OK);  // pending growth
    EXPECT_EQ(s->pending, f);
    ASSERT_EQ(store.acquire(key_of(2), f, true, describe, &s), CC_COLL_OK);  // pending new entry
    EXPECT_TRUE(s->fresh);
    EXPECT_EQ(b.bytes(), before + f + kLowRankEntryBytes + f);
    store.rollback_pending();
    EXPECT_EQ(b.bytes(), before);
    EXPECT_EQ(store.find(key_of(2)), nullptr);
    ASSERT_NE(store.find(key_of(1)), nullptr);
    EXPECT_EQ(store.find(key_of(1))->charged, kLowRankEntryBytes);
    EXPECT_EQ(store.find(key_of(1))->pending, 0u);

    // Committed charges stay.
    ASSERT_EQ(store.acquire(key_of(3), f, true, describe, &s), CC_COLL_OK);
    s->calls = 1;
    s->commit();
    const std::uint64_t committed = b.bytes();
    store.rollback_pending();
    EXPECT_EQ(b.bytes(), committed);
    ASSERT_NE(store.find(key_of(3)), nullptr);

    // A pending entry that already holds factors (a call that failed after
    // storing them) keeps them charged, and stays.
    ASSERT_EQ(store.acquire(key_of(4), f, true, describe, &s), CC_COLL_OK);
    const float p[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    lowrank::Shape shape;
    shape.rows = 8;
    shape.cols = 8;
    shape.rank = 1;
    s->keep_host<float>(shape, p, p);
    store.rollback_pending();
    ASSERT_NE(store.find(key_of(4)), nullptr);
    EXPECT_EQ(store.find(key_of(4))->charged, kLowRankEntryBytes + f);
    EXPECT_EQ(b.bytes(), committed + kLowRankEntryBytes + f);

    // One key's rollback (a point-to-point send) leaves the others pending.
    ASSERT_EQ(store.acquire(key_of(5), 0, true, describe, &s), CC_COLL_OK);
    ASSERT_EQ(store.acquire(key_of(6), 0, true, describe, &s), CC_COLL_OK);
    store.rollback(key_of(5));
    EXPECT_EQ(store.find(key_of(5)), nullptr);
    ASSERT_NE(store.find(key_of(6)), nullptr);
    EXPECT_TRUE(store.find(key_of(6))->fresh);
}

}  // namespace
}  // namespace cc_coll::detail
