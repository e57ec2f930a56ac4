// Version queries, the header/library check, status strings, and the calls
// that must refuse to run before MPI_Init (this binary never initialises MPI).
#include <cstdio>
#include <cstring>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "cc_coll.h"

namespace {

bool contains(const std::string &haystack, const std::string &needle)
{
    return haystack.find(needle) != std::string::npos;
}

std::string version_text(int major, int minor) { return std::to_string(major) + "." + std::to_string(minor); }

// ---------------------------------------------------------------- version

TEST(Version, CheckVersionOfThisHeaderIsOk)
{
    EXPECT_EQ(cc_coll_check_version(), CC_COLL_OK);
    EXPECT_EQ(cc_coll_check_version_numbers(CC_COLL_VERSION_MAJOR, CC_COLL_VERSION_MINOR), CC_COLL_OK);
}

TEST(Version, DifferentMajorIsAMismatchNamingBothVersions)
{
    const std::string lib = cc_coll_version_string();
    for (int major : {CC_COLL_VERSION_MAJOR + 1, CC_COLL_VERSION_MAJOR - 1}) {
        EXPECT_EQ(cc_coll_check_version_numbers(major, CC_COLL_VERSION_MINOR), CC_COLL_ERR_VERSION_MISMATCH)
            << "header major " << major;
        const std::string msg = cc_coll_last_error();
        EXPECT_TRUE(contains(msg, version_text(major, CC_COLL_VERSION_MINOR))) << msg;
        EXPECT_TRUE(contains(msg, lib)) << msg;
    }
    // A lower minor does not rescue a different major.
    EXPECT_EQ(cc_coll_check_version_numbers(CC_COLL_VERSION_MAJOR + 1, 0), CC_COLL_ERR_VERSION_MISMATCH);
}

TEST(Version, NewerHeaderMinorIsAMismatch)
{
    const int minor = CC_COLL_VERSION_MINOR + 1;
    EXPECT_EQ(cc_coll_check_version_numbers(CC_COLL_VERSION_MAJOR, minor), CC_COLL_ERR_VERSION_MISMATCH);
    const std::string msg = cc_coll_last_error();
    EXPECT_TRUE(contains(msg, version_text(CC_COLL_VERSION_MAJOR, minor))) << msg;
    EXPECT_TRUE(contains(msg, cc_coll_version_string())) << msg;
    EXPECT_EQ(cc_coll_check_version_numbers(CC_COLL_VERSION_MAJOR, CC_COLL_VERSION_MINOR + 100),
              CC_COLL_ERR_VERSION_MISMATCH);
}

TEST(Version, OlderHeaderMinorIsOk)
{
    for (int minor = 0; minor <= CC_COLL_VERSION_MINOR; ++minor)
        EXPECT_EQ(cc_coll_check_version_numbers(CC_COLL_VERSION_MAJOR, minor), CC_COLL_OK) << "minor " << minor;
}

TEST(Version, GetVersionMatchesMacrosAndAcceptsNull)
{
    int major = -1, minor = -1, patch = -1;
    cc_coll_get_version(&major, &minor, &patch);
    EXPECT_EQ(major, CC_COLL_VERSION_MAJOR);
    EXPECT_EQ(minor, CC_COLL_VERSION_MINOR);
    EXPECT_EQ(patch, CC_COLL_VERSION_PATCH);

    cc_coll_get_version(nullptr, nullptr, nullptr);
    int only_minor = -1;
    cc_coll_get_version(nullptr, &only_minor, nullptr);
    EXPECT_EQ(only_minor, CC_COLL_VERSION_MINOR);
    int only_patch = -1, only_major = -1;
    cc_coll_get_version(&only_major, nullptr, &only_patch);
    EXPECT_EQ(only_major, CC_COLL_VERSION_MAJOR);
    EXPECT_EQ(only_patch, CC_COLL_VERSION_PATCH);
}

TEST(Version, VersionStringMatchesMacros)
{
    char expected[64];
    std::snprintf(expected, sizeof expected, "%d.%d.%d", CC_COLL_VERSION_MAJOR, CC_COLL_VERSION_MINOR,
                  CC_COLL_VERSION_PATCH);
    ASSERT_NE(cc_coll_version_string(), nullptr);
    EXPECT_STREQ(cc_coll_version_string(), expected);
}

TEST(Version, VersionIntegerFormula)
{
    EXPECT_EQ(CC_COLL_VERSION,
              CC_COLL_VERSION_MAJOR * 10000 + CC_COLL_VERSION_MINOR * 100 + CC_COLL_VERSION_PATCH);
    // The formula orders versions only while minor and patch stay below 100.
    static_assert(CC_COLL_VERSION_MINOR >= 0 && CC_COLL_VERSION_MINOR < 100, "minor out of range");
    static_assert(CC_COLL_VERSION_PATCH >= 0 && CC_COLL_VERSION_PATCH < 100, "patch out of range");
    EXPECT_EQ(CC_COLL_VERSION / 10000, CC_COLL_VERSION_MAJOR);
    EXPECT_EQ(CC_COLL_VERSION / 100 % 100, CC_COLL_VERSION_MINOR);
    EXPECT_EQ(CC_COLL_VERSION % 100, CC_COLL_VERSION_PATCH);
}

// ---------------------------------------------------------------- status strings

struct NamedStatus {
    cc_coll_status_t code;
    const char *name;
};

#define CC_NAMED(x) {x, #x}
const NamedStatus kAllStatuses[] = {
    CC_NAMED(CC_COLL_OK),
    CC_NAMED(CC_COLL_ERR_NULL_BUFFER),
    CC_NAMED(CC_COLL_ERR_INVALID_DTYPE),
    CC_NAMED(CC_COLL_ERR_INVALID_OP),
    CC_NAMED(CC_COLL_ERR_INVALID_METHOD),
    CC_NAMED(CC_COLL_ERR_COUNT_OVERFLOW),
    CC_NAMED(CC_COLL_ERR_INVALID_COMM),
    CC_NAMED(CC_COLL_ERR_INVALID_PARAMS),
    CC_NAMED(CC_COLL_ERR_INVALID_ARG),
    CC_NAMED(CC_COLL_ERR_MPI),
    CC_NAMED(CC_COLL_ERR_MPI_NOT_INITIALIZED),
    CC_NAMED(CC_COLL_ERR_VERSION_MISMATCH),
    CC_NAMED(CC_COLL_ERR_CONFIG),
    CC_NAMED(CC_COLL_ERR_NOT_SUPPORTED),
    CC_NAMED(CC_COLL_ERR_NO_MEMORY),
    CC_NAMED(CC_COLL_ERR_INTERNAL),
    CC_NAMED(CC_COLL_ERR_EF_LIMIT),
    CC_NAMED(CC_COLL_ERR_MISMATCH),
    CC_NAMED(CC_COLL_ERR_CUDA),
};
#undef CC_NAMED

TEST(StatusString, EveryCodeHasADistinctStringStartingWithItsName)
{
    std::set<std::string> seen;
    for (const NamedStatus &s : kAllStatuses) {
        const char *str = cc_coll_status_string(s.code);
        ASSERT_NE(str, nullptr) << s.name;
        const std::string text = str;
        // The name, then a separator: "CC_COLL_ERR_MPI" must not pass by
        // being a prefix of "CC_COLL_ERR_MPI_NOT_INITIALIZED".
        const std::string prefix = std::string(s.name) + ":";
        EXPECT_EQ(text.compare(0, prefix.size(), prefix), 0) << s.name << " -> \"" << text << "\"";
        EXPECT_GT(text.size(), prefix.size()) << s.name << " has no description";
        EXPECT_TRUE(seen.insert(text).second) << "duplicate string for " << s.name << ": " << text;
    }
}

TEST(StatusString, TableCoversEveryCodeTheLibraryNames)
{
    // Codes are 0, -1, -2, ... without gaps; the first value the library
    // calls unknown ends the enum. If this fails, a status was added to
    // cc_coll.h without being added to kAllStatuses above.
    const std::string unknown = cc_coll_status_string(static_cast<cc_coll_status_t>(-100000));
    int n = 0;
    while (n < 1000 && unknown != cc_coll_status_string(static_cast<cc_coll_status_t>(-n))) ++n;
    EXPECT_EQ(static_cast<std::size_t>(n), sizeof kAllStatuses / sizeof kAllStatuses[0]);
    for (int v = 0; v < n; ++v) {
        bool listed = false;
        for (const NamedStatus &s : kAllStatuses) listed = listed || s.code == -v;
        EXPECT_TRUE(listed) << "status " << -v << " is missing from the test's table";
    }
}

TEST(StatusString, UnknownValuesGiveANonNullStringNamingNoKnownCode)
{
    const int unknowns[] = {1, 42, -1000, -100, -100000, 2147483647, -2147483647 - 1};
    for (int v : unknowns) {
        const char *str = cc_coll_status_string(static_cast<cc_coll_status_t>(v));
        ASSERT_NE(str, nullptr) << v;
        EXPECT_STRNE(str, "") << v;
        for (const NamedStatus &s : kAllStatuses) EXPECT_STRNE(str, cc_coll_status_string(s.code)) << v;
    }
}

// ---------------------------------------------------------------- misc. C API without MPI

TEST(CApi, DtypeSizeAndMethodName)
{
    EXPECT_EQ(cc_coll_dtype_size(CC_COLL_F32), 4u);
    EXPECT_EQ(cc_coll_dtype_size(CC_COLL_F64), 8u);
    EXPECT_EQ(cc_coll_dtype_size(CC_COLL_F16), 2u);
    EXPECT_EQ(cc_coll_dtype_size(CC_COLL_BF16), 2u);
    EXPECT_EQ(cc_coll_dtype_size(static_cast<cc_coll_dtype_t>(42)), 0u);
    EXPECT_EQ(cc_coll_dtype_size(static_cast<cc_coll_dtype_t>(-1)), 0u);
    EXPECT_STREQ(cc_coll_method_name(CC_COLL_METHOD_NONE), "none");
    EXPECT_EQ(cc_coll_method_name(static_cast<cc_coll_method_t>(42)), nullptr);
}

TEST(CApi, CreateBeforeMpiInitIsRefused)
{
    int initialized = 1;
    MPI_Initialized(&initialized);
    ASSERT_EQ(initialized, 0) << "this binary must not initialise MPI";

    cc_coll_comm_h h = reinterpret_cast<cc_coll_comm_h>(0x1234);
    EXPECT_EQ(cc_coll_comm_create(MPI_COMM_WORLD, &h), CC_COLL_ERR_MPI_NOT_INITIALIZED);
    EXPECT_EQ(h, nullptr);
    EXPECT_TRUE(contains(cc_coll_last_error(), "MPI_Init")) << cc_coll_last_error();

    h = reinterpret_cast<cc_coll_comm_h>(0x1234);
    EXPECT_EQ(cc_coll_comm_create_fint(0, &h), CC_COLL_ERR_MPI_NOT_INITIALIZED);

    // The version is checked before anything else.
    EXPECT_EQ(cc_coll_comm_create_versioned(MPI_COMM_WORLD, &h, CC_COLL_VERSION_MAJOR + 1, 0),
              CC_COLL_ERR_VERSION_MISMATCH);
    EXPECT_EQ(h, nullptr);
}

TEST(CApi, BuildFlagsHaveOnlyKnownBits)
{
    EXPECT_EQ(cc_coll_build_flags() & ~static_cast<unsigned>(CC_COLL_BUILD_CUDA | CC_COLL_BUILD_FORTRAN), 0u);
}

}  // namespace
