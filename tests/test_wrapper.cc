// The header-only C++ wrapper (include/cc_coll.hpp) on one MPI rank.
//
// Only the public headers are included here: the wrapper's cc_coll::Comm and
// the library's internal cc_coll::Comm (src/core/comm.hpp) share a name, so
// they must never meet in one translation unit.
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <mpi.h>

#include "cc_coll.hpp"

namespace {

static_assert(!std::is_copy_constructible<cc_coll::Comm>::value, "Comm must not be copyable");
static_assert(!std::is_copy_assignable<cc_coll::Comm>::value, "Comm must not be copy-assignable");
static_assert(std::is_nothrow_move_constructible<cc_coll::Comm>::value, "Comm moves must not throw");
static_assert(std::is_nothrow_move_assignable<cc_coll::Comm>::value, "Comm moves must not throw");
static_assert(std::is_base_of<std::runtime_error, cc_coll::Error>::value, "Error is a std::runtime_error");

TEST(Wrapper, ConstructsAndQueries)
{
    cc_coll::Comm comm(MPI_COMM_WORLD);
    ASSERT_NE(comm.handle(), nullptr);
    EXPECT_EQ(comm.rank(), 0);
    EXPECT_EQ(comm.size(), 1);
    int size = 0;
    EXPECT_EQ(cc_coll_comm_size(comm.handle(), &size), CC_COLL_OK);  // the raw handle is live
    EXPECT_EQ(size, 1);
}

TEST(Wrapper, MoveConstructionTransfersTheHandle)
{
    cc_coll::Comm a(MPI_COMM_WORLD);
    const cc_coll_comm_h h = a.handle();
    cc_coll::Comm b(std::move(a));
    EXPECT_EQ(a.handle(), nullptr);  // NOLINT(bugprone-use-after-move): moved-from state is specified
    EXPECT_EQ(b.handle(), h);
    EXPECT_EQ(b.size(), 1);
}

TEST(Wrapper, MoveAssignmentDestroysTheOldHandle)
{
    cc_coll_comm_h old_handle = nullptr, moved_handle = nullptr;
    {
        cc_coll::Comm a(MPI_COMM_WORLD);
        cc_coll::Comm b(MPI_COMM_WORLD);
        old_handle = a.handle();
        moved_handle = b.handle();
        ASSERT_NE(old_handle, moved_handle);
        a = std::move(b);
        EXPECT_EQ(a.handle(), moved_handle);
        EXPECT_EQ(b.handle(), nullptr);  // NOLINT(bugprone-use-after-move)
        int size = 0;
        EXPECT_EQ(cc_coll_comm_size(old_handle, &size), CC_COLL_ERR_INVALID_COMM);  // freed by the assignment
        EXPECT_EQ(cc_coll_comm_size(moved_handle, &size), CC_COLL_OK);
        // Self-move leaves it intact.
        cc_coll::Comm &self = a;
        a = std::move(self);
        EXPECT_EQ(a.handle(), moved_handle);
        EXPECT_EQ(cc_coll_comm_size(moved_handle, &size), CC_COLL_OK);
    }
    // Both wrappers are gone: the handle they owned is destroyed exactly once.
    int size = 0;
    EXPECT_EQ(cc_coll_comm_size(moved_handle, &size), CC_COLL_ERR_INVALID_COMM);
}

TEST(Wrapper, DestructorDestroysTheHandle)
{
    cc_coll_comm_h h = nullptr;
    {
        cc_coll::Comm comm(MPI_COMM_WORLD);
        h = comm.handle();
    }
    int size = 0;
    EXPECT_EQ(cc_coll_comm_size(h, &size), CC_COLL_ERR_INVALID_COMM);
}

TEST(Wrapper, ConstructorErrorThrowsWithStatusAndMessage)
{
    try {
        cc_coll::Comm comm(MPI_COMM_NULL);
        FAIL() << "no exception for MPI_COMM_NULL";
    } catch (const cc_coll::Error &e) {
        EXPECT_EQ(e.status(), CC_COLL_ERR_INVALID_ARG);
        EXPECT_STREQ(e.what(), cc_coll_last_error());
        EXPECT_NE(std::string(e.what()).find("MPI_COMM_NULL"), std::string::npos) << e.what();
    }
}

TEST(Wrapper, CallErrorsThrowWithStatusAndMessage)
{
    cc_coll::Comm comm(MPI_COMM_WORLD);
    float a[2] = {1, 2}, b[2] = {};
    try {
        comm.allreduce(nullptr, b, 2, CC_COLL_F32, CC_COLL_SUM);
        FAIL() << "no exception for a NULL sendbuf";
    } catch (const cc_coll::Error &e) {
        EXPECT_EQ(e.status(), CC_COLL_ERR_NULL_BUFFER);
        EXPECT_STREQ(e.what(), cc_coll_last_error());
        EXPECT_NE(std::string(e.what()).find("sendbuf"), std::string::npos) << e.what();
    }
    try {
        comm.allreduce(a, b, 2, static_cast<cc_coll_dtype_t>(42), CC_COLL_SUM);
        FAIL() << "no exception for dtype 42";
    } catch (const cc_coll::Error &e) {
        EXPECT_EQ(e.status(), CC_COLL_ERR_INVALID_DTYPE);
        EXPECT_NE(std::string(e.what()).find("dtype"), std::string::npos) << e.what();
    }
    cc_coll_params_t params{};
    params.mask = std::uint64_t{1} << 40;
    try {
        comm.allreduce(a, 2, CC_COLL_F32, CC_COLL_SUM, &params);
        FAIL() << "no exception for unknown params bits";
    } catch (const cc_coll::Error &e) {
        EXPECT_EQ(e.status(), CC_COLL_ERR_INVALID_PARAMS);
        EXPECT_NE(std::string(e.what()).find("mask"), std::string::npos) << e.what();
    }
    EXPECT_EQ(a[0], 1.0f);  // nothing reduced by the failed calls

    // A moved-from Comm has no handle; using it throws INVALID_COMM.
    cc_coll::Comm other(std::move(comm));
    try {
        (void)comm.size();  // NOLINT(bugprone-use-after-move)
        FAIL() << "no exception for a moved-from Comm";
    } catch (const cc_coll::Error &e) {
        EXPECT_EQ(e.status(), CC_COLL_ERR_INVALID_COMM);
    }
}

TEST(Wrapper, CheckFallsBackToTheStatusName)
{
    int size = 0;
    ASSERT_EQ(cc_coll_comm_size(nullptr, &size), CC_COLL_ERR_INVALID_COMM);
    cc_coll::Comm comm(MPI_COMM_WORLD);  // a successful call clears the message
    ASSERT_STREQ(cc_coll_last_error(), "");
    try {
        cc_coll::check(CC_COLL_ERR_INTERNAL);
        FAIL() << "check() did not throw";
    } catch (const cc_coll::Error &e) {
        EXPECT_EQ(e.status(), CC_COLL_ERR_INTERNAL);
        EXPECT_STREQ(e.what(), cc_coll_status_string(CC_COLL_ERR_INTERNAL));
    }
    EXPECT_NO_THROW(cc_coll::check(CC_COLL_OK));
}

TEST(Wrapper, AllreduceWorksOnOneRank)
{
    cc_coll::Comm comm(MPI_COMM_WORLD);
    const std::size_t n = 100;
    std::vector<float> send(n), recv(n, -1.0f);
    for (std::size_t i = 0; i < n; ++i) send[i] = static_cast<float>(i) * 0.25f;
    comm.allreduce(send.data(), recv.data(), n, CC_COLL_F32, CC_COLL_SUM);
    EXPECT_EQ(recv, send);

    std::vector<double> buf(n, 3.5);
    comm.allreduce(buf.data(), n, CC_COLL_F64, CC_COLL_AVG);
    EXPECT_EQ(buf, std::vector<double>(n, 3.5));

    cc_coll_params_t params{};
    params.mask = CC_COLL_PARAMS_FIELD_METHOD;
    params.method = CC_COLL_METHOD_NONE;
    comm.allreduce(send.data(), recv.data(), n, CC_COLL_F32, CC_COLL_AVG, &params);
    EXPECT_EQ(recv, send);

    const cc_coll_stats_t s = comm.stats();
    EXPECT_EQ(s.calls, 3u);
    EXPECT_EQ(s.bytes_uncompressed, 4u * n + 8u * n + 4u * n);
    EXPECT_EQ(s.bytes_wire, s.bytes_uncompressed);
    comm.reset_stats();
    EXPECT_EQ(comm.stats().calls, 0u);
}

}  // namespace
