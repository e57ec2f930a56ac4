// The minimal C++ usage of libcc_coll shown in docs/cpp.md: a compressed
// gradient average, what compression saved, and an error as an exception.
#include <cstdio>
#include <vector>

#include <mpi.h>

#include "cc_coll.hpp"

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int status = 0;
    try {
        cc_coll::Comm comm(MPI_COMM_WORLD);  // destroyed before MPI_Finalize

        // TOPK: each rank sends its 1% largest elements; error feedback (on
        // by default) keeps the rest for this buffer's next call.
        std::vector<float> grad(1 << 20);
        const cc_coll::Params params = cc_coll::Params().method(CC_COLL_METHOD_TOPK).density(0.01);
        for (int step = 0; step < 10; step++) {
            for (std::size_t i = 0; i < grad.size(); i++)  // this rank's gradient
                grad[i] = static_cast<float>((static_cast<unsigned>(i) * 7919u + static_cast<unsigned>(step) * 104729u +
                                                   static_cast<unsigned>(comm.rank())) % 1000u) / 1000.0f - 0.5f;
            comm.allreduce(grad.data(), grad.size(), CC_COLL_F32, CC_COLL_AVG, params);
        }

        const cc_coll_stats_t s = comm.stats();
        if (comm.rank() == 0)
            std::printf("%llu allreduce calls: %llu bytes dense, %llu bytes sent (%.1fx less)\n",
                        static_cast<unsigned long long>(s.calls),
                        static_cast<unsigned long long>(s.bytes_uncompressed),
                        static_cast<unsigned long long>(s.bytes_wire),
                        static_cast<double>(s.bytes_uncompressed) / static_cast<double>(s.bytes_wire));
        if (s.bytes_wire >= s.bytes_uncompressed) status = 1;

        cc_coll::Params bad = params;
        bad.density(2.0);  // invalid: the wrapper throws cc_coll::Error
        try {
            comm.allreduce(grad.data(), grad.size(), CC_COLL_F32, CC_COLL_SUM, bad);
            status = 1;
        } catch (const cc_coll::Error &e) {
            if (comm.rank() == 0) std::printf("expected error %d: %s\n", e.status(), e.what());
            if (e.status() != CC_COLL_ERR_INVALID_ARG) status = 1;
        }
    } catch (const cc_coll::Error &e) {
        std::fprintf(stderr, "cc_coll error %d: %s\n", e.status(), e.what());
        status = 1;
    }
    MPI_Finalize();
    return status;
}
