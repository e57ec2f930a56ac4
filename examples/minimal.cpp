// The minimal C++ usage of libcc_coll shown in docs/cpp.md.
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

        std::vector<float> grad(1 << 20, 1.0f);
        cc_coll_params_t params{};
        params.mask = CC_COLL_PARAMS_FIELD_METHOD | CC_COLL_PARAMS_FIELD_DENSITY;
        params.method = CC_COLL_METHOD_TOPK;
        params.density = 1.0;  // keep everything: exactly MPI_Allreduce
        comm.allreduce(grad.data(), grad.size(), CC_COLL_F32, CC_COLL_AVG, &params);

        const cc_coll_stats_t s = comm.stats();
        if (comm.rank() == 0)
            std::printf("average %g, %llu call(s), %llu bytes on the wire\n", grad[0],
                        static_cast<unsigned long long>(s.calls), static_cast<unsigned long long>(s.bytes_wire));
        if (grad[0] != 1.0f) status = 1;

        params.density = 2.0;  // invalid: the wrapper throws cc_coll::Error
        try {
            comm.allreduce(grad.data(), grad.size(), CC_COLL_F32, CC_COLL_SUM, &params);
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
