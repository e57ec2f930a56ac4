// The header-only C++ wrapper (include/cc_coll.hpp) on one MPI rank.
//
// Only the public headers are included here: the wrapper's cc_coll::Comm and
// the library's internal cc_coll::Comm (src/core/comm.hpp) share a name, so
// they must never meet in one translation unit.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
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
static_assert(cc_coll::dtype_of<float>() == CC_COLL_F32, "float is F32");
static_assert(cc_coll::dtype_of<double>() == CC_COLL_F64, "double is F64");
static_assert(std::is_convertible<const cc_coll_params_t *, cc_coll::ParamsRef>::value, "pointers are params");
static_assert(std::is_convertible<const cc_coll::Params &, cc_coll::ParamsRef>::value, "Params are params");
static_assert(std::is_convertible<const cc_coll_params_t &, cc_coll::ParamsRef>::value, "structs are params");
static_assert(std::is_convertible<std::nullptr_t, cc_coll::ParamsRef>::value, "nullptr is params");

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

// Every setter sets its field and its mask bit, and nothing else.
TEST(WrapperParams, SettersSetTheFieldAndItsBit)
{
    const cc_coll::Params none;
    EXPECT_EQ(none.mask(), 0u);
    cc_coll_params_t zero{};
    EXPECT_EQ(std::memcmp(&none.c(), &zero, sizeof zero), 0);

    cc_coll::Params p;
    p.method(CC_COLL_METHOD_LOWRANK)
        .density(0.25)
        .ef(true)
        .ef_key(42)
        .sparsifier(CC_COLL_SPARSIFY_THRESHOLD)
        .zero_fraction(0.5)
        .load_factor(0.75)
        .seed(7)
        .shape(6, 8)
        .rank(3)
        .warm_start(false)
        .start_iter(10)
        .min_compression_rate(1.5);
    const cc_coll_params_t &c = p.c();
    EXPECT_EQ(c.mask, std::uint64_t{0x1fff});  // all 13 bits
    EXPECT_EQ(c.method, CC_COLL_METHOD_LOWRANK);
    EXPECT_EQ(c.density, 0.25);
    EXPECT_EQ(c.ef, 1);
    EXPECT_EQ(c.ef_key, 42u);
    EXPECT_EQ(c.sparsifier, CC_COLL_SPARSIFY_THRESHOLD);
    EXPECT_EQ(c.zero_fraction, 0.5);
    EXPECT_EQ(c.load_factor, 0.75);
    EXPECT_EQ(c.seed, 7u);
    EXPECT_EQ(c.rows, 6u);
    EXPECT_EQ(c.cols, 8u);
    EXPECT_EQ(c.rank, 3);
    EXPECT_EQ(c.warm_start, 0);
    EXPECT_EQ(c.start_iter, 10u);
    EXPECT_EQ(c.min_compression_rate, 1.5);

    // One at a time: exactly one bit each.
    EXPECT_EQ(cc_coll::Params().shape(5).mask(), std::uint64_t{CC_COLL_PARAMS_FIELD_SHAPE});
    EXPECT_EQ(cc_coll::Params().shape(5).c().cols, 0u);  // count / rows
    EXPECT_EQ(cc_coll::Params().rank(2).mask(), std::uint64_t{CC_COLL_PARAMS_FIELD_RANK});
    EXPECT_EQ(cc_coll::Params().warm_start(true).mask(), std::uint64_t{CC_COLL_PARAMS_FIELD_WARM_START});
    EXPECT_EQ(cc_coll::Params().warm_start(true).c().warm_start, 1);
    EXPECT_EQ(cc_coll::Params().start_iter(3).mask(), std::uint64_t{CC_COLL_PARAMS_FIELD_START_ITER});
    EXPECT_EQ(cc_coll::Params().min_compression_rate(2).mask(),
              std::uint64_t{CC_COLL_PARAMS_FIELD_MIN_COMPRESSION_RATE});
    EXPECT_EQ(cc_coll::Params().ef(false).c().ef, 0);

    // Wrapping a C struct keeps it, mask included.
    cc_coll_params_t raw{};
    raw.mask = CC_COLL_PARAMS_FIELD_DENSITY;
    raw.density = 0.5;
    const cc_coll::Params wrapped(raw);
    EXPECT_EQ(wrapped.mask(), std::uint64_t{CC_COLL_PARAMS_FIELD_DENSITY});
    EXPECT_EQ(wrapped.c().density, 0.5);
}

// Params reach the library from a Params, a struct or a pointer.
TEST(WrapperParams, EveryFormReachesTheLibrary)
{
    cc_coll::Comm comm(MPI_COMM_WORLD);
    float a[4] = {1, 2, 3, 4};
    const cc_coll::Params bad = cc_coll::Params().method(CC_COLL_METHOD_LOWRANK).rank(0);
    const cc_coll_params_t &bad_c = bad.c();
    for (int form = 0; form < 3; ++form) {
        try {
            if (form == 0) comm.allreduce(a, 4, CC_COLL_F32, CC_COLL_SUM, bad);
            if (form == 1) comm.allreduce(a, 4, CC_COLL_F32, CC_COLL_SUM, bad_c);
            if (form == 2) comm.allreduce(a, 4, CC_COLL_F32, CC_COLL_SUM, &bad_c);
            ADD_FAILURE() << "no exception for rank 0, form " << form;
        } catch (const cc_coll::Error &e) {
            EXPECT_EQ(e.status(), CC_COLL_ERR_INVALID_ARG) << form;
            EXPECT_NE(std::string(e.what()).find("rank"), std::string::npos) << e.what();
        }
    }
    comm.allreduce(a, 4, CC_COLL_F32, CC_COLL_SUM, cc_coll::Params().method(CC_COLL_METHOD_NONE));
    comm.allreduce(a, 4, CC_COLL_F32, CC_COLL_SUM, nullptr);
    EXPECT_EQ(a[3], 4.0f);
}

TEST(WrapperGroup, TensorsDeduceTheDtypeAndCopyParams)
{
    float f[3] = {};
    double d[2] = {};
    const float cf[3] = {};
    const cc_coll::Params p = cc_coll::Params().method(CC_COLL_METHOD_LOWRANK).rank(2);
    const cc_coll::Tensor a(f, 3, p);
    EXPECT_EQ(a.send, static_cast<const void *>(f));
    EXPECT_EQ(a.recv, static_cast<void *>(f));
    EXPECT_EQ(a.count, 3u);
    EXPECT_EQ(a.dtype, CC_COLL_F32);
    EXPECT_EQ(a.params.mask, p.mask());
    EXPECT_EQ(a.params.rank, 2);
    const cc_coll::Tensor b(cf, f, 3);
    EXPECT_EQ(b.send, static_cast<const void *>(cf));
    EXPECT_EQ(b.params.mask, 0u);
    const cc_coll::Tensor c(d, 2);
    EXPECT_EQ(c.dtype, CC_COLL_F64);
    std::uint16_t h[4] = {};
    const cc_coll::Tensor e(h, 4, CC_COLL_BF16);
    EXPECT_EQ(e.dtype, CC_COLL_BF16);
    EXPECT_EQ(e.send, static_cast<const void *>(h));
    const cc_coll::Tensor g(nullptr, h, 4, CC_COLL_F16, p.c());
    EXPECT_EQ(g.send, nullptr);
    EXPECT_EQ(g.params.rank, 2);
}

// On one rank a LOWRANK allreduce of an exactly rank-r matrix gives the
// matrix back; the state is the library's row-major P and Q, and the result
// is P Q^T.
TEST(WrapperGroup, LowRankGroupAndState)
{
    cc_coll::Comm comm(MPI_COMM_WORLD);
    const std::size_t rows = 12, cols = 20;
    std::vector<float> m(rows * cols), m_in;
    for (std::size_t i = 0; i < rows; ++i)
        for (std::size_t j = 0; j < cols; ++j)
            m[i * cols + j] = static_cast<float>(std::sin(0.3 * static_cast<double>(i) + 0.1) *
                                                 std::cos(0.2 * static_cast<double>(j)));
    m_in = m;
    std::vector<float> m_out(rows * cols, -1.0f);
    std::vector<double> bias(5, 2.5);
    // The near-square view (shape(0)) of 5 elements, 3 x 2 at rank 1, fails
    // the compression test: dense.
    std::vector<double> small(5, 1.25);
    // A 1-D LOWRANK tensor (no shape) is sent densely, like powerSGD_hook's biases.
    std::vector<float> bias1d(7, 0.75f);
    const cc_coll::Params lr = cc_coll::Params().method(CC_COLL_METHOD_LOWRANK).shape(rows, cols).rank(1);
    const cc_coll::Params none = cc_coll::Params().method(CC_COLL_METHOD_NONE);
    const cc_coll::Params lr_small =
        cc_coll::Params().method(CC_COLL_METHOD_LOWRANK).shape(0).rank(1).min_compression_rate(2);
    const cc_coll::Params lr_1d = cc_coll::Params().method(CC_COLL_METHOD_LOWRANK).rank(1);
    comm.reset_stats();
    comm.allreduce_group({cc_coll::Tensor(m.data(), m_out.data(), m.size(), lr),
                          cc_coll::Tensor(bias.data(), bias.size(), none),
                          cc_coll::Tensor(small.data(), small.size(), lr_small),
                          cc_coll::Tensor(bias1d.data(), bias1d.size(), lr_1d)},
                         CC_COLL_AVG);
    for (std::size_t i = 0; i < m.size(); ++i) ASSERT_NEAR(m_out[i], m_in[i], 1e-5) << i;
    EXPECT_EQ(m, m_in);  // out of place: the input is untouched
    EXPECT_EQ(bias, std::vector<double>(5, 2.5));
    EXPECT_EQ(small, std::vector<double>(5, 1.25));
    EXPECT_EQ(bias1d, std::vector<float>(7, 0.75f));
    const cc_coll_stats_t s = comm.stats();
    EXPECT_EQ(s.calls, 4u);
    EXPECT_EQ(s.bytes_uncompressed, 4u * rows * cols + 8u * 5 + 8u * 5 + 4u * 7);
    // The matrix as its factors (rows + cols) x 1 binary32, the rest dense.
    EXPECT_EQ(s.bytes_wire, 4u * (rows + cols) + 8u * 5 + 8u * 5 + 4u * 7);
    const cc_coll::LowRankState one_d = comm.lowrank_state(bias1d.data(), bias1d.size(), CC_COLL_F32, lr_1d);
    EXPECT_EQ(one_d.rank, 0);
    EXPECT_EQ(one_d.rows + one_d.cols, 0u);
    EXPECT_EQ(one_d.calls, 1u);

    const cc_coll::LowRankState st = comm.lowrank_state(m_out.data(), m_out.size(), CC_COLL_F32, lr);
    EXPECT_EQ(st.rows, rows);
    EXPECT_EQ(st.cols, cols);
    EXPECT_EQ(st.rank, 1);
    EXPECT_EQ(st.calls, 1u);
    ASSERT_EQ(st.p.size(), rows);
    ASSERT_EQ(st.q.size(), cols);
    for (std::size_t i = 0; i < rows; ++i)
        for (std::size_t j = 0; j < cols; ++j)
            ASSERT_NEAR(st.p[i] * st.q[j], m_out[i * cols + j], 1e-5) << i << ", " << j;  // P Q^T, r = 1

    const cc_coll::LowRankState bare = comm.lowrank_state(m_out.data(), m_out.size(), CC_COLL_F32, lr, false);
    EXPECT_EQ(bare.rank, 1);
    EXPECT_TRUE(bare.p.empty() && bare.q.empty());
    const cc_coll::LowRankState dense = comm.lowrank_state(small.data(), small.size(), CC_COLL_F64, lr_small);
    EXPECT_EQ(dense.rank, 0);
    EXPECT_EQ(dense.calls, 1u);
    EXPECT_TRUE(dense.p.empty() && dense.q.empty());
    const cc_coll::LowRankState unknown = comm.lowrank_state(bias.data(), bias.size(), CC_COLL_F64);
    EXPECT_EQ(unknown.rows + unknown.cols + unknown.calls, 0u);
    EXPECT_EQ(unknown.rank, 0);

    // The raw C-array form and the in-place Tensor: a second, warm-started step.
    const void *sends[1] = {m_out.data()};
    void *recvs[1] = {m_out.data()};
    const std::size_t counts[1] = {m_out.size()};
    const cc_coll_dtype_t dtypes[1] = {CC_COLL_F32};
    comm.allreduce_group(1, sends, recvs, counts, dtypes, CC_COLL_AVG, &lr.c());
    for (std::size_t i = 0; i < m.size(); ++i) ASSERT_NEAR(m_out[i], m_in[i], 1e-5) << i;
    EXPECT_EQ(comm.lowrank_state(m_out.data(), m_out.size(), CC_COLL_F32, lr, false).calls, 2u);
    comm.allreduce_group(nullptr, 0, CC_COLL_SUM);  // no tensors: a no-op
}

TEST(WrapperGroup, SetQRoundTripsAndErrorsThrow)
{
    cc_coll::Comm comm(MPI_COMM_WORLD);
    std::vector<double> buf(6 * 10, 0.5);
    const cc_coll::Params lr = cc_coll::Params().method(CC_COLL_METHOD_LOWRANK).shape(6).rank(2).ef_key(99);
    std::vector<double> q(10 * 2);
    for (std::size_t i = 0; i < q.size(); ++i) q[i] = 0.125 * static_cast<double>(i);
    comm.lowrank_set_q(buf.data(), buf.size(), CC_COLL_F64, q, lr);
    const cc_coll::LowRankState st = comm.lowrank_state(buf.data(), buf.size(), CC_COLL_F64, lr);
    EXPECT_EQ(st.rows, 6u);
    EXPECT_EQ(st.cols, 10u);
    EXPECT_EQ(st.rank, 2);
    EXPECT_EQ(st.calls, 0u);
    EXPECT_EQ(st.q, q);
    // Named by ef_key: another buffer address finds the same state.
    std::vector<double> other(buf.size());
    EXPECT_EQ(comm.lowrank_state(other.data(), other.size(), CC_COLL_F64, lr).q, q);

    try {
        comm.lowrank_set_q(buf.data(), buf.size(), CC_COLL_F64, std::vector<double>(), lr);
        ADD_FAILURE() << "no exception for an empty q";
    } catch (const cc_coll::Error &e) {
        EXPECT_EQ(e.status(), CC_COLL_ERR_NULL_BUFFER);
    }
    try {
        comm.lowrank_set_q(buf.data(), buf.size(), CC_COLL_F64, q, cc_coll::Params(lr.c()).shape(7));
        ADD_FAILURE() << "no exception for rows 7 of 60 elements";
    } catch (const cc_coll::Error &e) {
        EXPECT_EQ(e.status(), CC_COLL_ERR_INVALID_ARG);
    }
    try {  // without a shape the tensor is 1-D, sent densely: no factors to set
        comm.lowrank_set_q(buf.data(), buf.size(), CC_COLL_F64, q,
                           cc_coll::Params().method(CC_COLL_METHOD_LOWRANK).rank(2).ef_key(98));
        ADD_FAILURE() << "no exception for set_q without a shape";
    } catch (const cc_coll::Error &e) {
        EXPECT_EQ(e.status(), CC_COLL_ERR_INVALID_ARG);
        EXPECT_NE(std::string(e.what()).find("sent densely"), std::string::npos) << e.what();
    }
    try {
        (void)comm.lowrank_state(buf.data(), buf.size(), static_cast<cc_coll_dtype_t>(9));
        ADD_FAILURE() << "no exception for dtype 9";
    } catch (const cc_coll::Error &e) {
        EXPECT_EQ(e.status(), CC_COLL_ERR_INVALID_DTYPE);
    }
    try {
        comm.allreduce_group({cc_coll::Tensor(buf.data(), buf.size(), cc_coll::Params(lr.c()).shape(7))},
                             CC_COLL_SUM);
        ADD_FAILURE() << "no exception for a LOWRANK shape that does not divide the count";
    } catch (const cc_coll::Error &e) {
        EXPECT_EQ(e.status(), CC_COLL_ERR_INVALID_ARG);
        EXPECT_NE(std::string(e.what()).find("tensor 0"), std::string::npos) << e.what();
    }
    try {
        // dtype 9, as a C caller may pass it. A C++ cc_coll_dtype_t cannot
        // hold 9 (loading it is undefined behaviour, which UBSan reports), so
        // its bytes are written and the array form passes them on unread.
        cc_coll_dtype_t dtype9;
        const int nine = 9;
        std::memcpy(&dtype9, &nine, sizeof dtype9);
        const void *send[1] = {buf.data()};
        void *recv[1] = {buf.data()};
        const size_t counts[1] = {4};
        comm.allreduce_group(1, send, recv, counts, &dtype9, CC_COLL_SUM, nullptr);
        ADD_FAILURE() << "no exception for dtype 9 in a group";
    } catch (const cc_coll::Error &e) {
        EXPECT_EQ(e.status(), CC_COLL_ERR_INVALID_DTYPE);
    }
    EXPECT_EQ(buf, std::vector<double>(buf.size(), 0.5));  // nothing reduced by the failed calls
}

// On one rank there is no peer: every point-to-point call with this rank as
// the peer is refused with INVALID_ARG, thrown as Error; the tag bound is
// half of MPI's.
TEST(WrapperP2P, OneRankHasNoPeer)
{
    cc_coll::Comm comm(MPI_COMM_WORLD);
    int *mpi_ub = nullptr, flag = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &mpi_ub, &flag);
    ASSERT_TRUE(flag);
    const long long ub = comm.p2p_tag_ub();  // the largest t whose MPI tags 2t and 2t + 1 are valid
    EXPECT_GT(ub, 0);
    EXPECT_LE(2 * ub + 1, static_cast<long long>(*mpi_ub));
    EXPECT_GT(2 * (ub + 1) + 1, static_cast<long long>(*mpi_ub));
    float buf[4] = {1, 2, 3, 4};
    const cc_coll::Params topk = cc_coll::Params().method(CC_COLL_METHOD_TOPK).density(0.5);
    auto expect_invalid = [](const char *what, const std::function<void()> &call) {
        try {
            call();
            ADD_FAILURE() << "no exception for " << what;
        } catch (const cc_coll::Error &e) {
            EXPECT_EQ(e.status(), CC_COLL_ERR_INVALID_ARG) << what << ": " << e.what();
        }
    };
    expect_invalid("send to oneself", [&] { comm.send(buf, 4, CC_COLL_F32, 0, 1, true, topk); });
    expect_invalid("recv from oneself", [&] { comm.recv(buf, 4, CC_COLL_F32, 0, 1); });
    expect_invalid("send to rank 1 of 1", [&] { comm.send(buf, 4, CC_COLL_F32, 1, 1); });
    expect_invalid("a negative tag", [&] { comm.recv(buf, 4, CC_COLL_F32, 1, -1); });
    expect_invalid("lep_residual of oneself", [&] { (void)comm.lep_residual(0, 1, 4, CC_COLL_F32); });
    expect_invalid("lep_reset of oneself", [&] { comm.lep_reset(0, 1, topk); });
    EXPECT_EQ(buf[3], 4.0f);
}

// --- checkpoints --------------------------------------------------------------------

TEST(WrapperCheckpoint, ExportImportRoundTrip)
{
    std::vector<unsigned char> blob;
    std::vector<float> x(256), y(256);
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 13) - 6.5f;
    const cc_coll::Params topk = cc_coll::Params().method(CC_COLL_METHOD_TOPK).density(0.05).ef_key(11);
    {
        cc_coll::Comm a(MPI_COMM_WORLD);
        a.allreduce(x.data(), y.data(), x.size(), CC_COLL_F32, CC_COLL_SUM, topk);
        blob = a.state_export();
        EXPECT_GT(blob.size(), 48u);
    }
    cc_coll::Comm c(MPI_COMM_WORLD);
    c.state_import(blob);
    EXPECT_EQ(c.state_export(), blob);
    uint64_t ef = 0;
    ASSERT_EQ(cc_coll_ef_bytes(c.handle(), &ef), CC_COLL_OK);
    EXPECT_GT(ef, 0u);
    std::vector<unsigned char> bad = blob;
    bad.pop_back();
    try {
        c.state_import(bad);
        ADD_FAILURE() << "no exception for a truncated blob";
    } catch (const cc_coll::Error &e) {
        EXPECT_EQ(e.status(), CC_COLL_ERR_INVALID_ARG) << e.what();
    }
    EXPECT_EQ(c.state_export(), blob);
}

}  // namespace
