// main() for the unit tests that need MPI: initialise MPI around the whole
// GoogleTest run (every communicator a test creates is destroyed before
// MPI_Finalize, by the tests themselves). With CC_COLL_PROGRESS=thread in
// the environment MPI is initialised with MPI_THREAD_MULTIPLE, which the
// library's progress thread needs; an MPI without it makes the run a skip
// (exit status 77).
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <gtest/gtest.h>
#include <mpi.h>

int main(int argc, char **argv)
{
    const char *progress = std::getenv("CC_COLL_PROGRESS");
    const bool multiple = progress != nullptr && std::strcmp(progress, "thread") == 0;
    int provided = MPI_THREAD_SINGLE;
    const int rc = multiple ? MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided) : MPI_Init(&argc, &argv);
    if (rc != MPI_SUCCESS) {
        std::fprintf(stderr, "MPI_Init failed\n");
        return 1;
    }
    if (multiple && provided < MPI_THREAD_MULTIPLE) {
        std::printf("CC_COLL_PROGRESS=thread, but MPI has no MPI_THREAD_MULTIPLE: skipped\n");
        MPI_Finalize();
        return 77;
    }
    ::testing::InitGoogleTest(&argc, argv);
    const int failed = RUN_ALL_TESTS();
    MPI_Finalize();
    return failed;
}
