// Installed-library consumer (C++ wrapper cc_coll.hpp): version check, a
// small allreduce through cc_coll::Comm, verified, and an error surfacing as
// cc_coll::Error. Returns non-zero on any failure.
#include <cstdio>
#include <vector>

#include <mpi.h>

#include <cc_coll.hpp>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank = 0, size = 0, bad = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    if (cc_coll_check_version() != CC_COLL_OK) {
        std::fprintf(stderr, "[%d] cc_coll_check_version: %s\n", rank, cc_coll_last_error());
        bad = 1;
    }
    try {
        cc_coll::Comm comm(MPI_COMM_WORLD);
        if (comm.rank() != rank || comm.size() != size) bad = 1;
        std::vector<float> send(1000), recv(1000, -1.0f);
        for (std::size_t i = 0; i < send.size(); ++i) send[i] = static_cast<float>(i % 7) + rank;
        comm.allreduce(send.data(), recv.data(), send.size(), CC_COLL_F32, CC_COLL_AVG);
        for (std::size_t i = 0; i < recv.size(); ++i) {
            const float want = (static_cast<float>(i % 7) * size + static_cast<float>(size * (size - 1) / 2)) /
                               static_cast<float>(size);
            if (recv[i] != want) {
                std::fprintf(stderr, "[%d] element %zu: got %g, expected %g\n", rank, i, recv[i], want);
                bad = 1;
                break;
            }
        }
        if (comm.stats().calls != 1) {
            std::fprintf(stderr, "[%d] stats().calls != 1\n", rank);
            bad = 1;
        }
        bool threw = false;
        try {
            comm.allreduce(nullptr, recv.data(), 4, CC_COLL_F32, CC_COLL_SUM);
        } catch (const cc_coll::Error &e) {
            threw = e.status() == CC_COLL_ERR_NULL_BUFFER;
        }
        if (!threw) {
            std::fprintf(stderr, "[%d] a NULL sendbuf did not throw cc_coll::Error(CC_COLL_ERR_NULL_BUFFER)\n", rank);
            bad = 1;
        }
    } catch (const cc_coll::Error &e) {
        std::fprintf(stderr, "[%d] cc_coll::Error %d: %s\n", rank, static_cast<int>(e.status()), e.what());
        bad = 1;
    }

    int any_bad = 0;
    MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0)
        std::printf("consumer_cxx: libcc_coll %s, %d ranks: %s\n", cc_coll_version_string(), size,
                    any_bad ? "FAILED" : "passed");
    MPI_Finalize();
    return any_bad;
}
