// The C API on one MPI rank: argument validation (each bad input gets its own
// status and a last-error message naming the argument), handle lifetime,
// environment configuration at communicator creation, and statistics.
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <mpi.h>

#include "cc_coll.h"
#include "core/comm.hpp"

namespace {

bool contains(const char *haystack, const char *needle)
{
    return haystack != nullptr && std::strstr(haystack, needle) != nullptr;
}

// Expects `call` to return `status` with a last-error message containing `needle`.
#define EXPECT_FAILS_NAMING(call, status, needle)                                                    \
    do {                                                                                              \
        const cc_coll_status_t st_ = (call);                                                          \
        EXPECT_EQ(st_, (status)) << #call << " gave " << cc_coll_status_string(st_) << ": "           \
                                 << cc_coll_last_error();                                             \
        EXPECT_TRUE(contains(cc_coll_last_error(), (needle)))                                         \
            << #call << ": message \"" << cc_coll_last_error() << "\" does not mention \"" << (needle) \
            << "\"";                                                                                  \
    } while (0)

// Sets (or unsets, with nullptr) an environment variable for one scope.
class ScopedEnv {
public:
    ScopedEnv(const char *name, const char *value) : name_(name)
    {
        const char *old = std::getenv(name);
        had_ = old != nullptr;
        if (had_) old_ = old;
        if (value != nullptr) setenv(name, value, 1);
        else unsetenv(name);
    }
    ~ScopedEnv()
    {
        if (had_) setenv(name_.c_str(), old_.c_str(), 1);
        else unsetenv(name_.c_str());
    }
    ScopedEnv(const ScopedEnv &) = delete;
    ScopedEnv &operator=(const ScopedEnv &) = delete;

private:
    std::string name_;
    std::string old_;
    bool had_ = false;
};

class Api : public ::testing::Test {
protected:
    void SetUp() override
    {
        ASSERT_EQ(cc_coll_comm_create(MPI_COMM_WORLD, &comm_), CC_COLL_OK) << cc_coll_last_error();
        ASSERT_NE(comm_, nullptr);
        int size = 0;
        ASSERT_EQ(cc_coll_comm_size(comm_, &size), CC_COLL_OK);
        ASSERT_EQ(size, 1) << "the unit tests run on exactly one rank";
    }
    void TearDown() override
    {
        if (comm_ != nullptr) {
            EXPECT_EQ(cc_coll_comm_destroy(comm_), CC_COLL_OK) << cc_coll_last_error();
        }
    }

    // A handle that was valid once and has been destroyed.
    cc_coll_comm_h destroyed_handle()
    {
        cc_coll_comm_h h = nullptr;
        EXPECT_EQ(cc_coll_comm_create(MPI_COMM_WORLD, &h), CC_COLL_OK) << cc_coll_last_error();
        EXPECT_EQ(cc_coll_comm_destroy(h), CC_COLL_OK) << cc_coll_last_error();
        return h;
    }

    cc_coll_comm_h comm_ = nullptr;
};

// ---------------------------------------------------------------- allreduce arguments

TEST_F(Api, NullSendbufWithCount)
{
    float recv[4] = {};
    EXPECT_FAILS_NAMING(cc_coll_allreduce(nullptr, recv, 4, CC_COLL_F32, CC_COLL_SUM, nullptr, comm_, nullptr),
                        CC_COLL_ERR_NULL_BUFFER, "sendbuf");
}

TEST_F(Api, NullRecvbufWithCount)
{
    float send[4] = {};
    EXPECT_FAILS_NAMING(cc_coll_allreduce(send, nullptr, 4, CC_COLL_F32, CC_COLL_SUM, nullptr, comm_, nullptr),
                        CC_COLL_ERR_NULL_BUFFER, "recvbuf");
    // Both NULL: the first one is named.
    EXPECT_FAILS_NAMING(cc_coll_allreduce(nullptr, nullptr, 1, CC_COLL_F64, CC_COLL_AVG, nullptr, comm_, nullptr),
                        CC_COLL_ERR_NULL_BUFFER, "sendbuf");
}

TEST_F(Api, UnknownDtype)
{
    float a[4] = {}, b[4] = {};
    EXPECT_FAILS_NAMING(cc_coll_allreduce(a, b, 4, static_cast<cc_coll_dtype_t>(42), CC_COLL_SUM, nullptr, comm_,
                                          nullptr),
                        CC_COLL_ERR_INVALID_DTYPE, "dtype");
    EXPECT_FAILS_NAMING(cc_coll_allreduce(a, b, 4, static_cast<cc_coll_dtype_t>(-1), CC_COLL_SUM, nullptr, comm_,
                                          nullptr),
                        CC_COLL_ERR_INVALID_DTYPE, "dtype");
    // The dtype is checked even when there is nothing to reduce.
    EXPECT_FAILS_NAMING(cc_coll_allreduce(nullptr, nullptr, 0, static_cast<cc_coll_dtype_t>(42), CC_COLL_SUM,
                                          nullptr, comm_, nullptr),
                        CC_COLL_ERR_INVALID_DTYPE, "dtype");
}

TEST_F(Api, UnknownOp)
{
    float a[4] = {}, b[4] = {};
    EXPECT_FAILS_NAMING(cc_coll_allreduce(a, b, 4, CC_COLL_F32, static_cast<cc_coll_op_t>(42), nullptr, comm_,
                                          nullptr),
                        CC_COLL_ERR_INVALID_OP, "op = 42");
    EXPECT_FAILS_NAMING(cc_coll_allreduce(a, b, 4, CC_COLL_F32, static_cast<cc_coll_op_t>(-3), nullptr, comm_,
                                          nullptr),
                        CC_COLL_ERR_INVALID_OP, "op = -3");
}

TEST_F(Api, UnknownMethodInParams)
{
    float a[4] = {}, b[4] = {};
    cc_coll_params_t params{};
    params.mask = CC_COLL_PARAMS_FIELD_METHOD;
    params.method = static_cast<cc_coll_method_t>(42);
    EXPECT_FAILS_NAMING(cc_coll_allreduce(a, b, 4, CC_COLL_F32, CC_COLL_SUM, &params, comm_, nullptr),
                        CC_COLL_ERR_INVALID_METHOD, "method");

    // Without its mask bit the field is not read.
    params.mask = 0;
    EXPECT_EQ(cc_coll_allreduce(a, b, 4, CC_COLL_F32, CC_COLL_SUM, &params, comm_, nullptr), CC_COLL_OK)
        << cc_coll_last_error();
    // And NONE explicitly is fine.
    params.mask = CC_COLL_PARAMS_FIELD_METHOD;
    params.method = CC_COLL_METHOD_NONE;
    EXPECT_EQ(cc_coll_allreduce(a, b, 4, CC_COLL_F32, CC_COLL_SUM, &params, comm_, nullptr), CC_COLL_OK)
        << cc_coll_last_error();
}

TEST_F(Api, UnknownParamsMaskBits)
{
    float a[4] = {}, b[4] = {};
    cc_coll_params_t params{};
    params.mask = CC_COLL_PARAMS_FIELD_METHOD | (std::uint64_t{1} << 40);
    params.method = CC_COLL_METHOD_NONE;
    EXPECT_FAILS_NAMING(cc_coll_allreduce(a, b, 4, CC_COLL_F32, CC_COLL_SUM, &params, comm_, nullptr),
                        CC_COLL_ERR_INVALID_PARAMS, "mask");
    params.mask = std::uint64_t{1} << 63;
    EXPECT_FAILS_NAMING(cc_coll_allreduce(a, b, 4, CC_COLL_F32, CC_COLL_SUM, &params, comm_, nullptr),
                        CC_COLL_ERR_INVALID_PARAMS, "mask");
}

TEST_F(Api, CountBeyondIntMax)
{
    // Tiny real buffers: the count must be rejected before memory is touched.
    float a[1] = {1.0f}, b[1] = {2.0f};
    const std::size_t too_many[] = {static_cast<std::size_t>(INT_MAX) + 1, SIZE_MAX,
                                    static_cast<std::size_t>(UINT_MAX)};
    for (std::size_t count : too_many) {
        EXPECT_FAILS_NAMING(cc_coll_allreduce(a, b, count, CC_COLL_F32, CC_COLL_SUM, nullptr, comm_, nullptr),
                            CC_COLL_ERR_COUNT_OVERFLOW, "count");
        EXPECT_FAILS_NAMING(cc_coll_allreduce(a, a, count, CC_COLL_F16, CC_COLL_AVG, nullptr, comm_, nullptr),
                            CC_COLL_ERR_COUNT_OVERFLOW, "count");
    }
    EXPECT_EQ(a[0], 1.0f);
    EXPECT_EQ(b[0], 2.0f);
    // INT_MAX itself fits: with a NULL buffer it is the buffer that is refused.
    EXPECT_FAILS_NAMING(cc_coll_allreduce(nullptr, b, static_cast<std::size_t>(INT_MAX), CC_COLL_F32, CC_COLL_SUM,
                                          nullptr, comm_, nullptr),
                        CC_COLL_ERR_NULL_BUFFER, "sendbuf");
}

TEST_F(Api, PartiallyOverlappingBuffers)
{
    float buf[16] = {};
    EXPECT_FAILS_NAMING(cc_coll_allreduce(buf, buf + 1, 4, CC_COLL_F32, CC_COLL_SUM, nullptr, comm_, nullptr),
                        CC_COLL_ERR_INVALID_ARG, "overlap");
    EXPECT_FAILS_NAMING(cc_coll_allreduce(buf + 3, buf, 4, CC_COLL_F32, CC_COLL_SUM, nullptr, comm_, nullptr),
                        CC_COLL_ERR_INVALID_ARG, "overlap");
    // The overlap is measured in bytes of the dtype: 2 doubles from buf
    // reach into buf + 2 floats.
    EXPECT_FAILS_NAMING(cc_coll_allreduce(buf, buf + 2, 2, CC_COLL_F64, CC_COLL_SUM, nullptr, comm_, nullptr),
                        CC_COLL_ERR_INVALID_ARG, "overlap");
    // Adjacent buffers do not overlap; identical ones are in place.
    EXPECT_EQ(cc_coll_allreduce(buf, buf + 4, 4, CC_COLL_F32, CC_COLL_SUM, nullptr, comm_, nullptr), CC_COLL_OK)
        << cc_coll_last_error();
    EXPECT_EQ(cc_coll_allreduce(buf + 4, buf, 4, CC_COLL_F32, CC_COLL_SUM, nullptr, comm_, nullptr), CC_COLL_OK)
        << cc_coll_last_error();
    EXPECT_EQ(cc_coll_allreduce(buf, buf + 4, 2, CC_COLL_F64, CC_COLL_SUM, nullptr, comm_, nullptr), CC_COLL_OK)
        << cc_coll_last_error();
    EXPECT_EQ(cc_coll_allreduce(buf, buf, 16, CC_COLL_F32, CC_COLL_SUM, nullptr, comm_, nullptr), CC_COLL_OK)
        << cc_coll_last_error();
}

// A made-up stream: unsupported without CUDA; in a CUDA build without a GPU
// the stream cannot be synchronised. (With a GPU a made-up stream is
// undefined behaviour in CUDA itself; the GPU suite tests real streams.)
TEST_F(Api, StreamWithoutAUsableGpuFailsNamingTheStream)
{
    float a[4] = {}, b[4] = {};
    int dummy_stream = 0;
    if (!(cc_coll_build_flags() & CC_COLL_BUILD_CUDA)) {
        EXPECT_FAILS_NAMING(cc_coll_allreduce(a, b, 4, CC_COLL_F32, CC_COLL_SUM, nullptr, comm_, &dummy_stream),
                            CC_COLL_ERR_NOT_SUPPORTED, "stream");
    } else if (cc_coll_cuda_device_count() == 0) {
        EXPECT_FAILS_NAMING(cc_coll_allreduce(a, b, 4, CC_COLL_F32, CC_COLL_SUM, nullptr, comm_, &dummy_stream),
                            CC_COLL_ERR_CUDA, "stream");
    } else {
        GTEST_SKIP() << "a GPU is present: a made-up stream is undefined behaviour in CUDA";
    }
}

TEST_F(Api, CountZeroWithNullBuffersSucceeds)
{
    EXPECT_EQ(cc_coll_allreduce(nullptr, nullptr, 0, CC_COLL_F32, CC_COLL_SUM, nullptr, comm_, nullptr), CC_COLL_OK)
        << cc_coll_last_error();
    EXPECT_STREQ(cc_coll_last_error(), "");
    EXPECT_EQ(cc_coll_allreduce(nullptr, nullptr, 0, CC_COLL_BF16, CC_COLL_AVG, nullptr, comm_, nullptr),
              CC_COLL_OK)
        << cc_coll_last_error();
    float a[1] = {5.0f};
    EXPECT_EQ(cc_coll_allreduce(a, nullptr, 0, CC_COLL_F32, CC_COLL_SUM, nullptr, comm_, nullptr), CC_COLL_OK)
        << cc_coll_last_error();
    EXPECT_EQ(a[0], 5.0f);
}

// ---------------------------------------------------------------- communicator handles

TEST_F(Api, NullCommHandle)
{
    float a[4] = {}, b[4] = {};
    int v = 0;
    cc_coll_stats_t s{};
    EXPECT_FAILS_NAMING(cc_coll_allreduce(a, b, 4, CC_COLL_F32, CC_COLL_SUM, nullptr, nullptr, nullptr),
                        CC_COLL_ERR_INVALID_COMM, ": comm ");
    EXPECT_FAILS_NAMING(cc_coll_comm_rank(nullptr, &v), CC_COLL_ERR_INVALID_COMM, ": comm ");
    EXPECT_FAILS_NAMING(cc_coll_comm_size(nullptr, &v), CC_COLL_ERR_INVALID_COMM, ": comm ");
    EXPECT_FAILS_NAMING(cc_coll_comm_get_stats(nullptr, &s), CC_COLL_ERR_INVALID_COMM, ": comm ");
    EXPECT_FAILS_NAMING(cc_coll_comm_reset_stats(nullptr), CC_COLL_ERR_INVALID_COMM, ": comm ");
    EXPECT_FAILS_NAMING(cc_coll_comm_destroy(nullptr), CC_COLL_ERR_INVALID_COMM, ": comm ");
}

TEST_F(Api, DestroyedCommHandle)
{
    const cc_coll_comm_h dead = destroyed_handle();
    ASSERT_NE(dead, nullptr);
    float a[4] = {}, b[4] = {};
    int v = -7;
    cc_coll_stats_t s{};
    EXPECT_FAILS_NAMING(cc_coll_allreduce(a, b, 4, CC_COLL_F32, CC_COLL_SUM, nullptr, dead, nullptr),
                        CC_COLL_ERR_INVALID_COMM, ": comm ");
    EXPECT_FAILS_NAMING(cc_coll_comm_rank(dead, &v), CC_COLL_ERR_INVALID_COMM, ": comm ");
    EXPECT_FAILS_NAMING(cc_coll_comm_size(dead, &v), CC_COLL_ERR_INVALID_COMM, ": comm ");
    EXPECT_EQ(v, -7);
    EXPECT_FAILS_NAMING(cc_coll_comm_get_stats(dead, &s), CC_COLL_ERR_INVALID_COMM, ": comm ");
    EXPECT_FAILS_NAMING(cc_coll_comm_reset_stats(dead), CC_COLL_ERR_INVALID_COMM, ": comm ");
    // Destroying twice.
    EXPECT_FAILS_NAMING(cc_coll_comm_destroy(dead), CC_COLL_ERR_INVALID_COMM, ": comm ");
    // The live fixture communicator is unaffected.
    EXPECT_EQ(cc_coll_comm_rank(comm_, &v), CC_COLL_OK);
    EXPECT_EQ(v, 0);
}

TEST_F(Api, HandlesAreNeverReused)
{
    const cc_coll_comm_h dead = destroyed_handle();
    std::vector<cc_coll_comm_h> fresh(4, nullptr);
    for (cc_coll_comm_h &h : fresh) {
        ASSERT_EQ(cc_coll_comm_create(MPI_COMM_WORLD, &h), CC_COLL_OK) << cc_coll_last_error();
        EXPECT_NE(h, dead);
        EXPECT_NE(h, comm_);
    }
    int v = 0;
    EXPECT_EQ(cc_coll_comm_rank(dead, &v), CC_COLL_ERR_INVALID_COMM);
    for (cc_coll_comm_h h : fresh) EXPECT_EQ(cc_coll_comm_destroy(h), CC_COLL_OK);
}

TEST_F(Api, ForgedCommHandle)
{
    const cc_coll_comm_h forged[] = {reinterpret_cast<cc_coll_comm_h>(0xdeadbeef),
                                     reinterpret_cast<cc_coll_comm_h>(~std::uintptr_t{0}),
                                     reinterpret_cast<cc_coll_comm_h>(&comm_)};
    float a[4] = {}, b[4] = {};
    for (cc_coll_comm_h h : forged) {
        int v = -7;
        cc_coll_stats_t s{};
        s.mask = CC_COLL_STATS_FIELD_CALLS;
        EXPECT_FAILS_NAMING(cc_coll_allreduce(a, b, 4, CC_COLL_F32, CC_COLL_SUM, nullptr, h, nullptr),
                            CC_COLL_ERR_INVALID_COMM, ": comm ");
        EXPECT_FAILS_NAMING(cc_coll_comm_rank(h, &v), CC_COLL_ERR_INVALID_COMM, ": comm ");
        EXPECT_FAILS_NAMING(cc_coll_comm_size(h, &v), CC_COLL_ERR_INVALID_COMM, ": comm ");
        EXPECT_FAILS_NAMING(cc_coll_comm_get_stats(h, &s), CC_COLL_ERR_INVALID_COMM, ": comm ");
        EXPECT_FAILS_NAMING(cc_coll_comm_reset_stats(h), CC_COLL_ERR_INVALID_COMM, ": comm ");
        EXPECT_FAILS_NAMING(cc_coll_comm_destroy(h), CC_COLL_ERR_INVALID_COMM, ": comm ");
        EXPECT_EQ(v, -7);
    }
}

TEST_F(Api, NullOutputPointers)
{
    EXPECT_FAILS_NAMING(cc_coll_comm_create(MPI_COMM_WORLD, nullptr), CC_COLL_ERR_INVALID_ARG, "comm");
    EXPECT_FAILS_NAMING(cc_coll_comm_create_fint(MPI_Comm_c2f(MPI_COMM_WORLD), nullptr), CC_COLL_ERR_INVALID_ARG,
                        "comm");
    EXPECT_FAILS_NAMING(cc_coll_comm_rank(comm_, nullptr), CC_COLL_ERR_INVALID_ARG, "rank");
    EXPECT_FAILS_NAMING(cc_coll_comm_size(comm_, nullptr), CC_COLL_ERR_INVALID_ARG, "size");
    EXPECT_FAILS_NAMING(cc_coll_comm_get_stats(comm_, nullptr), CC_COLL_ERR_INVALID_ARG, "stats");
    EXPECT_FAILS_NAMING(cc_coll_setting_get(0, nullptr), CC_COLL_ERR_INVALID_ARG, "out");
}

TEST_F(Api, CreateWithMpiCommNull)
{
    cc_coll_comm_h h = reinterpret_cast<cc_coll_comm_h>(0x1);
    EXPECT_FAILS_NAMING(cc_coll_comm_create(MPI_COMM_NULL, &h), CC_COLL_ERR_INVALID_ARG, "MPI_COMM_NULL");
    EXPECT_EQ(h, nullptr);
    h = reinterpret_cast<cc_coll_comm_h>(0x1);
    EXPECT_FAILS_NAMING(cc_coll_comm_create_fint(MPI_Comm_c2f(MPI_COMM_NULL), &h), CC_COLL_ERR_INVALID_ARG,
                        "MPI_COMM_NULL");
    EXPECT_EQ(h, nullptr);
}

// A Fortran handle that names no communicator is an error naming the handle,
// not an MPI error on MPI_COMM_WORLD's (fatal) handler.
TEST_F(Api, CreateFromUnknownFortranHandle)
{
    for (const MPI_Fint bogus : {MPI_Fint(123456), MPI_Fint(-1), MPI_Fint(1 << 30)}) {
        cc_coll_comm_h h = reinterpret_cast<cc_coll_comm_h>(0x1);
        const std::string value = std::to_string(bogus);
        EXPECT_FAILS_NAMING(cc_coll_comm_create_fint(bogus, &h), CC_COLL_ERR_INVALID_ARG, value.c_str());
        EXPECT_TRUE(contains(cc_coll_last_error(), "mpi_comm")) << cc_coll_last_error();
        EXPECT_EQ(h, nullptr);
    }
    // A freed communicator's handle names nothing either.
    MPI_Comm dup = MPI_COMM_NULL;
    ASSERT_EQ(MPI_Comm_dup(MPI_COMM_WORLD, &dup), MPI_SUCCESS);
    const MPI_Fint freed = MPI_Comm_c2f(dup);
    ASSERT_EQ(MPI_Comm_free(&dup), MPI_SUCCESS);
    cc_coll_comm_h h = nullptr;
    EXPECT_FAILS_NAMING(cc_coll_comm_create_fint(freed, &h), CC_COLL_ERR_INVALID_ARG, "mpi_comm");
    EXPECT_EQ(h, nullptr);
}

TEST_F(Api, CreateWithNewerHeaderIsAVersionMismatch)
{
    cc_coll_comm_h h = reinterpret_cast<cc_coll_comm_h>(0x1);
    EXPECT_FAILS_NAMING(cc_coll_comm_create_versioned(MPI_COMM_WORLD, &h, CC_COLL_VERSION_MAJOR,
                                                      CC_COLL_VERSION_MINOR + 1),
                        CC_COLL_ERR_VERSION_MISMATCH, cc_coll_version_string());
    EXPECT_EQ(h, nullptr);
    EXPECT_FAILS_NAMING(cc_coll_comm_create_fint_versioned(MPI_Comm_c2f(MPI_COMM_WORLD), &h,
                                                           CC_COLL_VERSION_MAJOR + 1, CC_COLL_VERSION_MINOR),
                        CC_COLL_ERR_VERSION_MISMATCH, cc_coll_version_string());
    EXPECT_EQ(h, nullptr);
}

TEST_F(Api, CreateFromFortranHandleAndSelf)
{
    cc_coll_comm_h h = nullptr;
    ASSERT_EQ(cc_coll_comm_create_fint(MPI_Comm_c2f(MPI_COMM_WORLD), &h), CC_COLL_OK) << cc_coll_last_error();
    int rank = -1, size = -1;
    EXPECT_EQ(cc_coll_comm_rank(h, &rank), CC_COLL_OK);
    EXPECT_EQ(cc_coll_comm_size(h, &size), CC_COLL_OK);
    EXPECT_EQ(rank, 0);
    EXPECT_EQ(size, 1);
    EXPECT_EQ(cc_coll_comm_destroy(h), CC_COLL_OK);

    ASSERT_EQ(cc_coll_comm_create(MPI_COMM_SELF, &h), CC_COLL_OK) << cc_coll_last_error();
    EXPECT_EQ(cc_coll_comm_size(h, &size), CC_COLL_OK);
    EXPECT_EQ(size, 1);
    EXPECT_EQ(cc_coll_comm_destroy(h), CC_COLL_OK);
}

TEST_F(Api, CommIsADuplicateWithErrorsReturn)
{
    std::shared_ptr<cc_coll::detail::Comm> c = cc_coll::detail::find_comm(comm_);
    ASSERT_TRUE(c);
    int cmp = MPI_IDENT;
    ASSERT_EQ(MPI_Comm_compare(c->mpi(), MPI_COMM_WORLD, &cmp), MPI_SUCCESS);
    EXPECT_EQ(cmp, MPI_CONGRUENT);  // a duplicate, not MPI_COMM_WORLD itself
    MPI_Errhandler eh = MPI_ERRHANDLER_NULL;
    ASSERT_EQ(MPI_Comm_get_errhandler(c->mpi(), &eh), MPI_SUCCESS);
    EXPECT_EQ(eh, MPI_ERRORS_RETURN);
    MPI_Errhandler_free(&eh);
}

// ---------------------------------------------------------------- settings and last error

// ---------------------------------------------------------------- counts no collective accepts

// Residual and LOWRANK state calls refuse a count above INT_MAX (what every
// collective refuses) before they touch count elements of caller memory.
TEST_F(Api, ResidualAndStateCallsRefuseCountsNoCollectiveAccepts)
{
    double out[4] = {7, 7, 7, 7};
    const std::size_t over = static_cast<std::size_t>(INT_MAX) + 1;
    for (const std::size_t count : {over, SIZE_MAX}) {
        EXPECT_FAILS_NAMING(cc_coll_ef_get_residual(comm_, nullptr, out, count, CC_COLL_F64, out),
                            CC_COLL_ERR_COUNT_OVERFLOW, "count");
        EXPECT_FAILS_NAMING(cc_coll_ef_reset(comm_, nullptr, out, count, CC_COLL_F64), CC_COLL_ERR_COUNT_OVERFLOW,
                            "count");
    }
    EXPECT_EQ(out[0], 7.0);
    EXPECT_EQ(out[3], 7.0);
    // The limit itself is accepted (no residual: zeros, here for 4 elements).
    ASSERT_EQ(cc_coll_ef_get_residual(comm_, nullptr, out, 4, CC_COLL_F64, out), CC_COLL_OK) << cc_coll_last_error();
    EXPECT_EQ(out[0], 0.0);
}

// cc_coll_lowrank_set_q with a huge count: CC_COLL_ERR_COUNT_OVERFLOW (it
// used to loop for ever computing the near-square view), q untouched.
TEST_F(Api, LowrankSetQRefusesCountsNoCollectiveAccepts)
{
    cc_coll_params_t params;
    std::memset(&params, 0, sizeof params);
    params.mask = CC_COLL_PARAMS_FIELD_METHOD | CC_COLL_PARAMS_FIELD_SHAPE;
    params.method = CC_COLL_METHOD_LOWRANK;
    params.rows = params.cols = 0;  // the near-square view
    const double q[4] = {1, 2, 3, 4};
    float buf[4] = {0, 0, 0, 0};
    for (const std::size_t count : {static_cast<std::size_t>(INT_MAX) + 1, SIZE_MAX / 2, SIZE_MAX})
        EXPECT_FAILS_NAMING(cc_coll_lowrank_set_q(comm_, &params, buf, count, CC_COLL_F32, q),
                            CC_COLL_ERR_COUNT_OVERFLOW, "count");
    std::uint64_t rows = 0, cols = 0, calls = 0;
    int rank = 0;
    EXPECT_FAILS_NAMING(cc_coll_lowrank_get_state(comm_, &params, buf, SIZE_MAX, CC_COLL_F32, &rows, &cols, &rank,
                                                  &calls, nullptr, nullptr),
                        CC_COLL_ERR_COUNT_OVERFLOW, "count");
}

// A group of more tensors than a call accepts is CC_COLL_ERR_INVALID_ARG
// naming ntensors and the limit, before the arrays are read.
TEST_F(Api, AllreduceGroupRefusesHugeNtensors)
{
    float x[1] = {1};
    const void *send[1] = {x};
    void *recv[1] = {x};
    const std::size_t counts[1] = {1};
    const cc_coll_dtype_t dtypes[1] = {CC_COLL_F32};
    const std::string limit = std::to_string(INT_MAX);
    for (const std::size_t n : {SIZE_MAX, static_cast<std::size_t>(INT_MAX) + 1}) {
        EXPECT_FAILS_NAMING(cc_coll_allreduce_group(n, send, recv, counts, dtypes, CC_COLL_SUM, nullptr, comm_,
                                                    nullptr),
                            CC_COLL_ERR_INVALID_ARG, "ntensors");
        EXPECT_TRUE(contains(cc_coll_last_error(), limit.c_str())) << cc_coll_last_error();
    }
}

TEST_F(Api, SettingIndexOutOfRange)
{
    cc_coll_setting_t out{};
    const std::size_t n = cc_coll_setting_count();
    EXPECT_FAILS_NAMING(cc_coll_setting_get(n, &out), CC_COLL_ERR_INVALID_ARG, "index");
    EXPECT_FAILS_NAMING(cc_coll_setting_get(SIZE_MAX, &out), CC_COLL_ERR_INVALID_ARG, "index");
    EXPECT_EQ(cc_coll_setting_get(n - 1, &out), CC_COLL_OK) << cc_coll_last_error();
}

TEST_F(Api, SuccessfulCallClearsLastError)
{
    int v = 0;
    EXPECT_EQ(cc_coll_comm_rank(nullptr, &v), CC_COLL_ERR_INVALID_COMM);
    ASSERT_STRNE(cc_coll_last_error(), "");
    EXPECT_EQ(cc_coll_comm_rank(comm_, &v), CC_COLL_OK);
    EXPECT_STREQ(cc_coll_last_error(), "");

    float a[2] = {1, 2}, b[2] = {};
    EXPECT_EQ(cc_coll_allreduce(nullptr, b, 2, CC_COLL_F32, CC_COLL_SUM, nullptr, comm_, nullptr),
              CC_COLL_ERR_NULL_BUFFER);
    ASSERT_STRNE(cc_coll_last_error(), "");
    EXPECT_EQ(cc_coll_allreduce(a, b, 2, CC_COLL_F32, CC_COLL_SUM, nullptr, comm_, nullptr), CC_COLL_OK);
    EXPECT_STREQ(cc_coll_last_error(), "");
}

TEST_F(Api, LastErrorIsPerThread)
{
    int v = 0;
    ASSERT_EQ(cc_coll_comm_rank(nullptr, &v), CC_COLL_ERR_INVALID_COMM);
    const std::string mine = cc_coll_last_error();
    ASSERT_FALSE(mine.empty());
    std::string theirs_before, theirs_after;
    std::thread t([&] {
        theirs_before = cc_coll_last_error();
        int r = 0;
        cc_coll_comm_size(nullptr, &r);
        theirs_after = cc_coll_last_error();
    });
    t.join();
    EXPECT_EQ(theirs_before, "");
    EXPECT_TRUE(contains(theirs_after.c_str(), "cc_coll_comm_size")) << theirs_after;
    EXPECT_EQ(std::string(cc_coll_last_error()), mine);
}

// ---------------------------------------------------------------- environment at creation

TEST_F(Api, BadMethodInEnvironmentFailsCreate)
{
    ScopedEnv env("CC_COLL_METHOD", "bogus");
    cc_coll_comm_h h = reinterpret_cast<cc_coll_comm_h>(0x1);
    EXPECT_FAILS_NAMING(cc_coll_comm_create(MPI_COMM_WORLD, &h), CC_COLL_ERR_CONFIG, "CC_COLL_METHOD");
    EXPECT_TRUE(contains(cc_coll_last_error(), "bogus")) << cc_coll_last_error();
    EXPECT_EQ(h, nullptr);

    // The settings query reports the same problem and falls back to the default.
    std::size_t method_index = SIZE_MAX;
    for (std::size_t i = 0; i < cc_coll_setting_count(); ++i) {
        cc_coll_setting_t s{};
        cc_coll_setting_get(i, &s);
        if (s.name != nullptr && std::strcmp(s.name, "METHOD") == 0) method_index = i;
    }
    ASSERT_NE(method_index, SIZE_MAX);
    cc_coll_setting_t s{};
    EXPECT_FAILS_NAMING(cc_coll_setting_get(method_index, &s), CC_COLL_ERR_CONFIG, "CC_COLL_METHOD");
    EXPECT_STREQ(s.value, s.default_value);
    EXPECT_EQ(s.from_env, 0);
}

TEST_F(Api, BadLogLevelInEnvironmentFailsCreate)
{
    ScopedEnv env("CC_COLL_LOG_LEVEL", "loud");
    cc_coll_comm_h h = nullptr;
    EXPECT_FAILS_NAMING(cc_coll_comm_create(MPI_COMM_WORLD, &h), CC_COLL_ERR_CONFIG, "CC_COLL_LOG_LEVEL");
    EXPECT_TRUE(contains(cc_coll_last_error(), "loud")) << cc_coll_last_error();
    EXPECT_EQ(h, nullptr);
}

TEST_F(Api, ValidEnvironmentIsUsedAndSnapshotAtCreate)
{
    cc_coll_comm_h h = nullptr;
    {
        ScopedEnv env("CC_COLL_METHOD", " None ");
        ASSERT_EQ(cc_coll_comm_create(MPI_COMM_WORLD, &h), CC_COLL_OK) << cc_coll_last_error();
        for (std::size_t i = 0; i < cc_coll_setting_count(); ++i) {
            cc_coll_setting_t s{};
            ASSERT_EQ(cc_coll_setting_get(i, &s), CC_COLL_OK) << cc_coll_last_error();
            if (std::strcmp(s.name, "METHOD") != 0) continue;
            EXPECT_EQ(s.from_env, 1);
            EXPECT_STREQ(s.value, " None ");
        }
    }
    {
        // Later changes to the environment do not affect the communicator.
        ScopedEnv env("CC_COLL_METHOD", "bogus");
        float a[3] = {1, 2, 3}, b[3] = {};
        EXPECT_EQ(cc_coll_allreduce(a, b, 3, CC_COLL_F32, CC_COLL_SUM, nullptr, h, nullptr), CC_COLL_OK)
            << cc_coll_last_error();
        EXPECT_EQ(b[2], 3.0f);
    }
    EXPECT_EQ(cc_coll_comm_destroy(h), CC_COLL_OK);
}

// ---------------------------------------------------------------- results on one rank

TEST_F(Api, AllreduceOnOneRankIsTheIdentity)
{
    const std::size_t n = 257;
    std::vector<float> f(n), fr(n, -1.0f);
    for (std::size_t i = 0; i < n; ++i) f[i] = 0.5f * static_cast<float>(i) - 3.0f;
    ASSERT_EQ(cc_coll_allreduce(f.data(), fr.data(), n, CC_COLL_F32, CC_COLL_SUM, nullptr, comm_, nullptr),
              CC_COLL_OK);
    EXPECT_EQ(fr, f);
    std::vector<float> fin = f;
    ASSERT_EQ(cc_coll_allreduce(fin.data(), fin.data(), n, CC_COLL_F32, CC_COLL_AVG, nullptr, comm_, nullptr),
              CC_COLL_OK);
    EXPECT_EQ(fin, f);

    std::vector<double> d(n), dr(n);
    for (std::size_t i = 0; i < n; ++i) d[i] = 1.0 / static_cast<double>(i + 1);
    ASSERT_EQ(cc_coll_allreduce(d.data(), dr.data(), n, CC_COLL_F64, CC_COLL_AVG, nullptr, comm_, nullptr),
              CC_COLL_OK);
    EXPECT_EQ(dr, d);

    for (cc_coll_dtype_t dt : {CC_COLL_F16, CC_COLL_BF16}) {
        std::vector<std::uint16_t> h(n), hr(n, 0xffff);
        for (std::size_t i = 0; i < n; ++i) h[i] = static_cast<std::uint16_t>(0x3000 + 7 * i);
        ASSERT_EQ(cc_coll_allreduce(h.data(), hr.data(), n, dt, CC_COLL_SUM, nullptr, comm_, nullptr), CC_COLL_OK)
            << cc_coll_last_error();
        EXPECT_EQ(hr, h) << "dtype " << dt;
        ASSERT_EQ(cc_coll_allreduce(hr.data(), hr.data(), n, dt, CC_COLL_AVG, nullptr, comm_, nullptr), CC_COLL_OK)
            << cc_coll_last_error();
        EXPECT_EQ(hr, h) << "dtype " << dt;
    }
}

// ---------------------------------------------------------------- statistics

cc_coll_stats_t all_stats()
{
    cc_coll_stats_t s{};
    s.mask = CC_COLL_STATS_FIELD_CALLS | CC_COLL_STATS_FIELD_BYTES_UNCOMPRESSED | CC_COLL_STATS_FIELD_BYTES_WIRE |
             CC_COLL_STATS_FIELD_TIME_COMPRESS | CC_COLL_STATS_FIELD_TIME_COMMUNICATE |
             CC_COLL_STATS_FIELD_TIME_DECOMPRESS;
    return s;
}

TEST_F(Api, StatsCountOneAllreduce)
{
    cc_coll_stats_t s = all_stats();
    ASSERT_EQ(cc_coll_comm_get_stats(comm_, &s), CC_COLL_OK);
    EXPECT_EQ(s.calls, 0u);
    EXPECT_EQ(s.bytes_uncompressed, 0u);
    EXPECT_EQ(s.bytes_wire, 0u);

    const std::size_t n = 1000;
    std::vector<float> a(n, 1.0f), b(n);
    ASSERT_EQ(cc_coll_allreduce(a.data(), b.data(), n, CC_COLL_F32, CC_COLL_SUM, nullptr, comm_, nullptr),
              CC_COLL_OK);
    s = all_stats();
    ASSERT_EQ(cc_coll_comm_get_stats(comm_, &s), CC_COLL_OK);
    EXPECT_EQ(s.calls, 1u);
    EXPECT_EQ(s.bytes_uncompressed, 4u * n);
    EXPECT_EQ(s.bytes_wire, 4u * n);
    EXPECT_GE(s.time_compress, 0.0);
    EXPECT_GE(s.time_communicate, 0.0);
    EXPECT_GE(s.time_decompress, 0.0);
    EXPECT_LT(s.time_communicate, 60.0);

    // Failed calls are not counted; successful ones add up.
    EXPECT_NE(cc_coll_allreduce(nullptr, b.data(), n, CC_COLL_F32, CC_COLL_SUM, nullptr, comm_, nullptr),
              CC_COLL_OK);
    std::vector<double> d(10, 2.0);
    ASSERT_EQ(cc_coll_allreduce(d.data(), d.data(), 10, CC_COLL_F64, CC_COLL_AVG, nullptr, comm_, nullptr),
              CC_COLL_OK);
    s = all_stats();
    ASSERT_EQ(cc_coll_comm_get_stats(comm_, &s), CC_COLL_OK);
    EXPECT_EQ(s.calls, 2u);
    EXPECT_EQ(s.bytes_uncompressed, 4u * n + 80u);
    EXPECT_EQ(s.bytes_wire, 4u * n + 80u);

    // Statistics are per communicator.
    cc_coll_comm_h other = nullptr;
    ASSERT_EQ(cc_coll_comm_create(MPI_COMM_WORLD, &other), CC_COLL_OK);
    s = all_stats();
    ASSERT_EQ(cc_coll_comm_get_stats(other, &s), CC_COLL_OK);
    EXPECT_EQ(s.calls, 0u);
    EXPECT_EQ(cc_coll_comm_destroy(other), CC_COLL_OK);
}

// time_total covers the whole of every call on the communicator (failed
// ones too), so it is never less than the sum of the three phases, and a
// failed call, which adds to no phase, still adds to it.
TEST_F(Api, StatsTimeTotalCoversThePhases)
{
    ASSERT_EQ(cc_coll_comm_reset_stats(comm_), CC_COLL_OK);
    const auto read = [&] {
        cc_coll_stats_t s = all_stats();
        s.mask |= CC_COLL_STATS_FIELD_TIME_TOTAL;
        s.time_total = -1.0;
        EXPECT_EQ(cc_coll_comm_get_stats(comm_, &s), CC_COLL_OK) << cc_coll_last_error();
        return s;
    };
    cc_coll_stats_t s = read();
    EXPECT_EQ(s.time_total, 0.0);

    const std::size_t n = 4096;
    std::vector<float> a(n), b(n);
    for (std::size_t i = 0; i < n; ++i) a[i] = static_cast<float>((i * 7919) % 1000) - 500.0f;
    for (cc_coll_method_t m : {CC_COLL_METHOD_NONE, CC_COLL_METHOD_TOPK, CC_COLL_METHOD_SKETCH, CC_COLL_METHOD_LOWRANK}) {
        cc_coll_params_t p{};
        p.mask = CC_COLL_PARAMS_FIELD_METHOD;
        p.method = m;
        if (m == CC_COLL_METHOD_LOWRANK) p.mask |= CC_COLL_PARAMS_FIELD_SHAPE;  // rows = cols = 0: near-square
        ASSERT_EQ(cc_coll_allreduce(a.data(), b.data(), n, CC_COLL_F32, CC_COLL_SUM, &p, comm_, nullptr), CC_COLL_OK)
            << cc_coll_last_error();
        s = read();
        EXPECT_GT(s.time_total, 0.0) << "method " << m;
        EXPECT_GE(s.time_total, s.time_compress + s.time_communicate + s.time_decompress) << "method " << m;
    }
    const double before = s.time_total;
    const std::uint64_t calls = s.calls;
    EXPECT_NE(cc_coll_allreduce(nullptr, b.data(), n, CC_COLL_F32, CC_COLL_SUM, nullptr, comm_, nullptr), CC_COLL_OK);
    s = read();
    EXPECT_EQ(s.calls, calls);
    EXPECT_GT(s.time_total, before);
    ASSERT_EQ(cc_coll_comm_reset_stats(comm_), CC_COLL_OK);
    s = read();
    EXPECT_EQ(s.time_total, 0.0);
}

TEST_F(Api, ResetStatsZeroes)
{
    std::vector<float> a(64, 1.0f);
    ASSERT_EQ(cc_coll_allreduce(a.data(), a.data(), 64, CC_COLL_F32, CC_COLL_SUM, nullptr, comm_, nullptr),
              CC_COLL_OK);
    ASSERT_EQ(cc_coll_comm_reset_stats(comm_), CC_COLL_OK);
    cc_coll_stats_t s = all_stats();
    s.calls = s.bytes_uncompressed = s.bytes_wire = 99;
    s.time_compress = s.time_communicate = s.time_decompress = 99.0;
    ASSERT_EQ(cc_coll_comm_get_stats(comm_, &s), CC_COLL_OK);
    EXPECT_EQ(s.calls, 0u);
    EXPECT_EQ(s.bytes_uncompressed, 0u);
    EXPECT_EQ(s.bytes_wire, 0u);
    EXPECT_EQ(s.time_compress, 0.0);
    EXPECT_EQ(s.time_communicate, 0.0);
    EXPECT_EQ(s.time_decompress, 0.0);

    // Counting resumes after a reset.
    ASSERT_EQ(cc_coll_allreduce(a.data(), a.data(), 8, CC_COLL_F32, CC_COLL_SUM, nullptr, comm_, nullptr),
              CC_COLL_OK);
    s = all_stats();
    ASSERT_EQ(cc_coll_comm_get_stats(comm_, &s), CC_COLL_OK);
    EXPECT_EQ(s.calls, 1u);
    EXPECT_EQ(s.bytes_uncompressed, 32u);
}

TEST_F(Api, StatsWritesOnlyMaskedFields)
{
    std::vector<float> a(16, 1.0f);
    ASSERT_EQ(cc_coll_allreduce(a.data(), a.data(), 16, CC_COLL_F32, CC_COLL_SUM, nullptr, comm_, nullptr),
              CC_COLL_OK);
    const std::uint64_t kSentinel = 0xa5a5a5a5a5a5a5a5ull;
    const double kSentinelTime = -12345.5;
    const std::uint64_t fields[] = {CC_COLL_STATS_FIELD_CALLS,           CC_COLL_STATS_FIELD_BYTES_UNCOMPRESSED,
                                    CC_COLL_STATS_FIELD_BYTES_WIRE,      CC_COLL_STATS_FIELD_TIME_COMPRESS,
                                    CC_COLL_STATS_FIELD_TIME_COMMUNICATE, CC_COLL_STATS_FIELD_TIME_DECOMPRESS};
    // Every subset of the six fields.
    for (unsigned subset = 0; subset < 64; ++subset) {
        cc_coll_stats_t s;
        s.mask = 0;
        for (unsigned b = 0; b < 6; ++b)
            if (subset & (1u << b)) s.mask |= fields[b];
        const std::uint64_t mask = s.mask;
        s.calls = s.bytes_uncompressed = s.bytes_wire = kSentinel;
        s.time_compress = s.time_communicate = s.time_decompress = kSentinelTime;
        ASSERT_EQ(cc_coll_comm_get_stats(comm_, &s), CC_COLL_OK) << "subset " << subset;
        EXPECT_EQ(s.mask, mask);
        EXPECT_EQ(s.calls, (mask & CC_COLL_STATS_FIELD_CALLS) ? 1u : kSentinel) << subset;
        EXPECT_EQ(s.bytes_uncompressed, (mask & CC_COLL_STATS_FIELD_BYTES_UNCOMPRESSED) ? 64u : kSentinel) << subset;
        EXPECT_EQ(s.bytes_wire, (mask & CC_COLL_STATS_FIELD_BYTES_WIRE) ? 64u : kSentinel) << subset;
        EXPECT_EQ(s.time_compress == kSentinelTime, (mask & CC_COLL_STATS_FIELD_TIME_COMPRESS) == 0) << subset;
        EXPECT_EQ(s.time_communicate == kSentinelTime, (mask & CC_COLL_STATS_FIELD_TIME_COMMUNICATE) == 0)
            << subset;
        EXPECT_EQ(s.time_decompress == kSentinelTime, (mask & CC_COLL_STATS_FIELD_TIME_DECOMPRESS) == 0) << subset;
    }
}

TEST_F(Api, StatsWithUnknownMaskBits)
{
    cc_coll_stats_t s = all_stats();
    s.mask |= std::uint64_t{1} << 40;
    s.calls = 77;
    EXPECT_FAILS_NAMING(cc_coll_comm_get_stats(comm_, &s), CC_COLL_ERR_INVALID_PARAMS, "mask");
    EXPECT_EQ(s.calls, 77u);  // nothing written on failure
    s.mask = std::uint64_t{1} << 63;
    EXPECT_FAILS_NAMING(cc_coll_comm_get_stats(comm_, &s), CC_COLL_ERR_INVALID_PARAMS, "mask");
}

}  // namespace
