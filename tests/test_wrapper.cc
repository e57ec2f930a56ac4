// The header-only C++ wrapper (include/cc_coll.hpp) on one MPI rank; the
// WrapperNonBlocking cases also run on two ranks (mpi_wrapper_nonblocking_*,
// tests/CMakeLists.txt), so they hold on any number of ranks.
//
// Only the public headers are included here: the wrapper's cc_coll::Comm and
// the library's internal cc_coll::Comm (src/core/comm.hpp) share a name, so
// they must never meet in one translation unit.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <numeric>
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
static_assert(!std::is_copy_constructible<cc_coll::Request>::value, "Request must not be copyable");
static_assert(!std::is_copy_assignable<cc_coll::Request>::value, "Request must not be copy-assignable");
static_assert(std::is_nothrow_move_constructible<cc_coll::Request>::value, "Request moves must not throw");
static_assert(std::is_nothrow_move_assignable<cc_coll::Request>::value, "Request moves must not throw");
static_assert(!std::is_convertible<cc_coll_request_h, cc_coll::Request>::value, "adopting a handle is explicit");

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

// --- non-blocking collectives ----------------------------------------------------

int world_rank()
{
    int r = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
}

int world_size()
{
    int s = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &s);
    return s;
}

// Reproducible values in [-1, 1) from a seed (splitmix64).
template <typename T>
void fill_uniform(std::vector<T> &x, std::uint64_t seed)
{
    for (T &v : x) {
        std::uint64_t z = (seed += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        v = static_cast<T>(static_cast<double>(z >> 11) * (2.0 / 9007199254740992.0) - 1.0);
    }
}

template <typename T>
bool same_bits(const std::vector<T> &a, const std::vector<T> &b)
{
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

std::vector<double> residual(const cc_coll::Comm &comm, std::uint64_t key, std::size_t count, cc_coll_dtype_t dtype)
{
    std::vector<double> out(count, -1.0);
    const cc_coll::Params p = cc_coll::Params().ef_key(key);
    cc_coll::check(cc_coll_ef_get_residual(comm.handle(), &p.c(), nullptr, count, dtype, out.data()));
    return out;
}

// The buffers of one step of the workload below.
struct Step {
    static constexpr std::size_t kN = 2000, kRows = 20, kCols = 30, kBias = 7;
    std::vector<float> topk_in, topk_out, inplace, rs_in, rs_out, matrix_in, matrix_out;
    std::vector<double> none_in, none_out, bias;

    Step(int step, int rank, int size)
        : topk_in(kN), topk_out(kN, -1.0f), inplace(kN), rs_in(kN * static_cast<std::size_t>(size)),
          rs_out(kN, -1.0f), matrix_in(kRows * kCols), matrix_out(kRows * kCols, -1.0f), none_in(kN),
          none_out(kN, -1.0), bias(kBias)
    {
        const std::uint64_t s = 1000u * static_cast<std::uint64_t>(step) + 17u * static_cast<std::uint64_t>(rank);
        fill_uniform(topk_in, s + 1);
        fill_uniform(inplace, s + 2);
        fill_uniform(rs_in, s + 3);
        fill_uniform(matrix_in, s + 4);
        fill_uniform(none_in, s + 5);
        fill_uniform(bias, s + 6);
    }
};

const cc_coll::Params kTopk = cc_coll::Params().method(CC_COLL_METHOD_TOPK).density(0.05).ef_key(1);
const cc_coll::Params kTopkInPlace = cc_coll::Params().method(CC_COLL_METHOD_TOPK).density(0.02).ef_key(2);
const cc_coll::Params kNone = cc_coll::Params().method(CC_COLL_METHOD_NONE);
const cc_coll::Params kLowRank =
    cc_coll::Params().method(CC_COLL_METHOD_LOWRANK).shape(Step::kRows, Step::kCols).rank(2).ef_key(10);
const cc_coll::Params kReduceScatter = cc_coll::Params().method(CC_COLL_METHOD_TOPK).density(0.1).ef_key(20);

// One step on two communicators (every method but SKETCH, a group and a
// reduce-scatter): blocking calls, or, with `requests`, the same calls
// posted into it.
void workload(const cc_coll::Comm &a, const cc_coll::Comm &b, Step &x, std::vector<cc_coll::Request> *requests)
{
    const std::vector<cc_coll::Tensor> group = {
        cc_coll::Tensor(x.matrix_in.data(), x.matrix_out.data(), x.matrix_in.size(), kLowRank),
        cc_coll::Tensor(x.bias.data(), x.bias.size(), kNone)};
    if (requests == nullptr) {
        a.allreduce(x.topk_in.data(), x.topk_out.data(), Step::kN, CC_COLL_F32, CC_COLL_AVG, kTopk);
        b.allreduce(x.none_in.data(), x.none_out.data(), Step::kN, CC_COLL_F64, CC_COLL_SUM, kNone);
        a.allreduce(x.inplace.data(), Step::kN, CC_COLL_F32, CC_COLL_SUM, kTopkInPlace);
        b.allreduce_group(group, CC_COLL_AVG);
        a.reduce_scatter(x.rs_in.data(), x.rs_out.data(), Step::kN, CC_COLL_F32, CC_COLL_SUM, kReduceScatter);
        return;
    }
    requests->push_back(a.iallreduce(x.topk_in.data(), x.topk_out.data(), Step::kN, CC_COLL_F32, CC_COLL_AVG, kTopk));
    requests->push_back(
        b.iallreduce(x.none_in.data(), x.none_out.data(), Step::kN, CC_COLL_F64, CC_COLL_SUM, kNone));
    requests->push_back(a.iallreduce(x.inplace.data(), Step::kN, CC_COLL_F32, CC_COLL_SUM, kTopkInPlace));
    requests->push_back(b.iallreduce_group(group, CC_COLL_AVG));
    requests->push_back(
        a.ireduce_scatter(x.rs_in.data(), x.rs_out.data(), Step::kN, CC_COLL_F32, CC_COLL_SUM, kReduceScatter));
}

// Every result, residual and LOWRANK state of requests in flight on two
// communicators, completed in a rank-dependent order (wait, test loops,
// waitall), equals that of the same calls made blocking on two others,
// bit for bit, step after step.
TEST(WrapperNonBlocking, ResultsEqualTheBlockingCallsBitForBit)
{
    const int rank = world_rank(), size = world_size();
    cc_coll::Comm a(MPI_COMM_WORLD), b(MPI_COMM_WORLD), ra(MPI_COMM_WORLD), rb(MPI_COMM_WORLD);
    for (int step = 0; step < 3; ++step) {
        Step nb(step, rank, size), bl(step, rank, size);
        std::vector<cc_coll::Request> requests;
        workload(a, b, nb, &requests);
        ASSERT_EQ(requests.size(), 5u);
        for (const cc_coll::Request &r : requests) ASSERT_TRUE(r);
        std::vector<std::size_t> order(requests.size());
        std::iota(order.begin(), order.end(), std::size_t{0});
        std::rotate(order.begin(), order.begin() + static_cast<std::ptrdiff_t>((rank + step) % 5), order.end());
        std::reverse(order.begin(), order.end());
        requests[order[0]].wait();
        requests[order[1]].wait();
        while (!requests[order[2]].test()) {
        }
        EXPECT_TRUE(requests[order[2]].done());
        std::vector<cc_coll_status_t> statuses;
        cc_coll::waitall(requests, &statuses);  // order[3], order[4], and again the others
        EXPECT_EQ(statuses, std::vector<cc_coll_status_t>(requests.size(), CC_COLL_OK));
        for (const cc_coll::Request &r : requests) {
            EXPECT_TRUE(r.done());
            EXPECT_EQ(r.status(), CC_COLL_OK);
            EXPECT_EQ(r.message(), "");
        }

        workload(ra, rb, bl, nullptr);
        EXPECT_TRUE(same_bits(nb.topk_out, bl.topk_out)) << "TOPK, step " << step;
        EXPECT_TRUE(same_bits(nb.none_out, bl.none_out)) << "NONE, step " << step;
        EXPECT_TRUE(same_bits(nb.inplace, bl.inplace)) << "TOPK in place, step " << step;
        EXPECT_TRUE(same_bits(nb.matrix_out, bl.matrix_out)) << "LOWRANK group matrix, step " << step;
        EXPECT_TRUE(same_bits(nb.bias, bl.bias)) << "group bias, step " << step;
        EXPECT_TRUE(same_bits(nb.rs_out, bl.rs_out)) << "TOPK reduce-scatter, step " << step;
        EXPECT_TRUE(same_bits(nb.topk_in, bl.topk_in)) << "sendbuf untouched, step " << step;
    }
    EXPECT_TRUE(same_bits(residual(a, 1, Step::kN, CC_COLL_F32), residual(ra, 1, Step::kN, CC_COLL_F32)));
    EXPECT_TRUE(same_bits(residual(a, 2, Step::kN, CC_COLL_F32), residual(ra, 2, Step::kN, CC_COLL_F32)));
    const std::size_t rs_count = Step::kN * static_cast<std::size_t>(size);
    EXPECT_TRUE(same_bits(residual(a, 20, rs_count, CC_COLL_F32), residual(ra, 20, rs_count, CC_COLL_F32)));
    const std::size_t m = Step::kRows * Step::kCols;
    EXPECT_TRUE(same_bits(residual(b, 10, m, CC_COLL_F32), residual(rb, 10, m, CC_COLL_F32)));
    const std::vector<float> named_by_key(m);
    const cc_coll::LowRankState s1 = b.lowrank_state(named_by_key.data(), m, CC_COLL_F32, kLowRank);
    const cc_coll::LowRankState s2 = rb.lowrank_state(named_by_key.data(), m, CC_COLL_F32, kLowRank);
    EXPECT_EQ(s1.calls, 3u);
    EXPECT_EQ(s1.rank, 2);
    EXPECT_TRUE(same_bits(s1.p, s2.p) && same_bits(s1.q, s2.q)) << "LOWRANK P and Q";
    const cc_coll_stats_t st = a.stats();
    EXPECT_EQ(st.calls, ra.stats().calls);
    EXPECT_EQ(st.bytes_wire, ra.stats().bytes_wire);
}

// A Request owns its handle: the destructor, a move assignment over it and
// free() free it; a moved-from or released Request holds none.
TEST(WrapperNonBlocking, RequestOwnsAndFreesItsHandle)
{
    cc_coll::Comm comm(MPI_COMM_WORLD);
    const std::size_t n = 64;
    std::vector<float> x(n, 1.0f), y1(n), y2(n), y3(n), y4(n);
    auto live = [](cc_coll_request_h h) {
        int done = 0;
        return cc_coll_request_status(h, &done, nullptr, nullptr) == CC_COLL_OK;
    };

    cc_coll_request_h h = nullptr;
    {
        cc_coll::Request r = comm.iallreduce(x.data(), y1.data(), n, CC_COLL_F32, CC_COLL_SUM);
        h = r.handle();
        ASSERT_NE(h, nullptr);
        r.wait();
        EXPECT_TRUE(live(h));  // completion does not free it
    }
    EXPECT_FALSE(live(h)) << "the destructor frees the handle";

    cc_coll::Request a = comm.iallreduce(x.data(), y1.data(), n, CC_COLL_F32, CC_COLL_SUM);
    const cc_coll_request_h ha = a.handle();
    cc_coll::Request b(std::move(a));
    EXPECT_EQ(a.handle(), nullptr);  // NOLINT(bugprone-use-after-move): moved-from state is specified
    EXPECT_FALSE(a);                 // NOLINT(bugprone-use-after-move)
    EXPECT_EQ(b.handle(), ha);
    EXPECT_TRUE(live(ha));
    try {
        a.wait();  // NOLINT(bugprone-use-after-move)
        ADD_FAILURE() << "no exception for a moved-from Request";
    } catch (const cc_coll::Error &e) {
        EXPECT_EQ(e.status(), CC_COLL_ERR_INVALID_ARG);
        EXPECT_STREQ(e.what(), cc_coll_last_error());
    }

    cc_coll::Request c = comm.iallreduce(x.data(), y2.data(), n, CC_COLL_F32, CC_COLL_SUM);
    const cc_coll_request_h hc = c.handle();
    c = std::move(b);  // frees c's own handle (its collective still completes)
    EXPECT_FALSE(live(hc));
    EXPECT_EQ(c.handle(), ha);
    EXPECT_EQ(b.handle(), nullptr);  // NOLINT(bugprone-use-after-move)
    cc_coll::Request &self = c;
    c = std::move(self);
    EXPECT_EQ(c.handle(), ha);
    EXPECT_TRUE(live(ha));

    c.free();
    EXPECT_FALSE(c);
    EXPECT_FALSE(live(ha));
    EXPECT_NO_THROW(c.free());  // an empty Request: nothing to free

    cc_coll::Request d = comm.iallreduce(x.data(), y3.data(), n, CC_COLL_F32, CC_COLL_SUM);
    const cc_coll_request_h hd = d.release();
    EXPECT_FALSE(d);
    EXPECT_EQ(cc_coll_wait(hd), CC_COLL_OK);
    EXPECT_EQ(cc_coll_request_free(hd), CC_COLL_OK);  // the caller's to free

    cc_coll::Request adopted(nullptr);
    EXPECT_FALSE(adopted);
    try {
        adopted.wait();
        ADD_FAILURE() << "no exception for an empty Request";
    } catch (const cc_coll::Error &e) {
        EXPECT_EQ(e.status(), CC_COLL_ERR_INVALID_ARG);
    }

    // Empty Requests are skipped by waitall; a Request destroyed in flight
    // still completes (here the blocking call completes it), its result lands.
    std::vector<cc_coll::Request> some(3);
    some[1] = comm.iallreduce(x.data(), y4.data(), n, CC_COLL_F32, CC_COLL_SUM);
    cc_coll::waitall(some);
    std::fill(y4.begin(), y4.end(), -1.0f);
    { (void)comm.iallreduce(x.data(), y4.data(), n, CC_COLL_F32, CC_COLL_SUM); }
    std::vector<float> z(n);
    comm.allreduce(x.data(), z.data(), n, CC_COLL_F32, CC_COLL_SUM);
    EXPECT_EQ(z, std::vector<float>(n, static_cast<float>(world_size())));
    for (const std::vector<float> *y : {&y1, &y2, &y3, &y4}) EXPECT_EQ(*y, z);
}

TEST(WrapperNonBlocking, ErrorsThrowWithStatusAndMessage)
{
    cc_coll::Comm comm(MPI_COMM_WORLD);
    const int rank = world_rank(), size = world_size();
    const std::size_t n = 1024;
    std::vector<float> x(2 * n, 1.0f), y(2 * n, 0.0f);

    // Argument errors throw at once and post nothing.
    try {
        (void)comm.iallreduce(nullptr, y.data(), n, CC_COLL_F32, CC_COLL_SUM);
        ADD_FAILURE() << "no exception for a NULL sendbuf";
    } catch (const cc_coll::Error &e) {
        EXPECT_EQ(e.status(), CC_COLL_ERR_NULL_BUFFER);
        EXPECT_NE(std::string(e.what()).find("sendbuf"), std::string::npos) << e.what();
    }
    const cc_coll::Params rank0 = cc_coll::Params().method(CC_COLL_METHOD_LOWRANK).shape(32).rank(0);
    try {
        (void)comm.iallreduce_group({cc_coll::Tensor(y.data(), n, kNone), cc_coll::Tensor(x.data(), n, rank0)},
                                    CC_COLL_SUM);
        ADD_FAILURE() << "no exception for a LOWRANK rank 0";
    } catch (const cc_coll::Error &e) {
        EXPECT_EQ(e.status(), CC_COLL_ERR_INVALID_ARG);
        EXPECT_NE(std::string(e.what()).find("params[1]"), std::string::npos) << e.what();
    }
    try {
        (void)comm.ireduce_scatter(x.data(), nullptr, n / 2, CC_COLL_F32, CC_COLL_SUM);
        ADD_FAILURE() << "no exception for a NULL recvbuf";
    } catch (const cc_coll::Error &e) {
        EXPECT_EQ(e.status(), CC_COLL_ERR_NULL_BUFFER);
        EXPECT_NE(std::string(e.what()).find("recvbuf"), std::string::npos) << e.what();
    }
    EXPECT_EQ(x, std::vector<float>(2 * n, 1.0f));
    EXPECT_EQ(y, std::vector<float>(2 * n, 0.0f));

    if (size < 2) return;  // the rest needs a request in flight, and ranks that disagree

    // Rank 0's request waits for the others, which post after the barrier:
    // meanwhile a second request on its receive buffer is refused.
    cc_coll::Request first;
    if (rank == 0) {
        first = comm.iallreduce(x.data(), y.data(), n, CC_COLL_F32, CC_COLL_SUM);
        EXPECT_FALSE(first.done());
        try {
            (void)comm.iallreduce(x.data() + n, y.data() + n / 2, n, CC_COLL_F32, CC_COLL_SUM);
            ADD_FAILURE() << "no exception for a recvbuf in flight";
        } catch (const cc_coll::Error &e) {
            EXPECT_EQ(e.status(), CC_COLL_ERR_INVALID_ARG);
            EXPECT_NE(std::string(e.what()).find("in flight"), std::string::npos) << e.what();
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank != 0) first = comm.iallreduce(x.data(), y.data(), n, CC_COLL_F32, CC_COLL_SUM);
    first.wait();
    EXPECT_EQ(y[0], static_cast<float>(size));

    // The ranks post TOPK and NONE in different orders: both requests fail
    // with MISMATCH on every rank; wait, test, waitall and the accessors
    // all report it, with the library's message.
    const cc_coll::Params topk = cc_coll::Params().method(CC_COLL_METHOD_TOPK).density(0.05);
    std::vector<float> y1(n, -7.0f), y2(n, -7.0f);
    std::vector<cc_coll::Request> r;
    r.push_back(comm.iallreduce(x.data(), y1.data(), n, CC_COLL_F32, CC_COLL_SUM, rank == 0 ? topk : kNone));
    r.push_back(comm.iallreduce(x.data(), y2.data(), n, CC_COLL_F32, CC_COLL_SUM, rank == 0 ? kNone : topk));
    try {
        r[1].wait();
        ADD_FAILURE() << "no exception for requests posted in different orders";
    } catch (const cc_coll::Error &e) {
        EXPECT_EQ(e.status(), CC_COLL_ERR_MISMATCH);
        EXPECT_NE(std::string(e.what()).find("method"), std::string::npos) << e.what();
        EXPECT_EQ(r[1].message(), e.what());
    }
    EXPECT_EQ(r[1].status(), CC_COLL_ERR_MISMATCH);
    try {
        (void)r[0].test();
        ADD_FAILURE() << "test() of a failed request did not throw";
    } catch (const cc_coll::Error &e) {
        EXPECT_EQ(e.status(), CC_COLL_ERR_MISMATCH);
    }
    std::vector<cc_coll_status_t> statuses;
    try {
        cc_coll::waitall(r, &statuses);
        ADD_FAILURE() << "waitall of failed requests did not throw";
    } catch (const cc_coll::Error &e) {
        EXPECT_EQ(e.status(), CC_COLL_ERR_MISMATCH);
        EXPECT_NE(std::string(e.what()).find("method"), std::string::npos) << e.what();
    }
    EXPECT_EQ(statuses, std::vector<cc_coll_status_t>(2, CC_COLL_ERR_MISMATCH));
    EXPECT_EQ(y1, std::vector<float>(n, -7.0f));
    EXPECT_EQ(y2, std::vector<float>(n, -7.0f));
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
