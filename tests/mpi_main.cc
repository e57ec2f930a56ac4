// main() for the unit tests that need MPI: initialise MPI around the whole
// GoogleTest run (every communicator a test creates is destroyed before
// MPI_Finalize, by the tests themselves).
#include <cstdio>

#include <gtest/gtest.h>
#include <mpi.h>

int main(int argc, char **argv)
{
    if (MPI_Init(&argc, &argv) != MPI_SUCCESS) {
        std::fprintf(stderr, "MPI_Init failed\n");
        return 1;
    }
    ::testing::InitGoogleTest(&argc, argv);
    const int rc = RUN_ALL_TESTS();
    MPI_Finalize();
    return rc;
}
