/* Installed-library consumer (C99): version check, a small allreduce on
 * MPI_COMM_WORLD, verified. Returns non-zero on any failure. */
#include <stdio.h>

#include <mpi.h>

#include <cc_coll.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank = 0, size = 0, bad = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    if (cc_coll_check_version() != CC_COLL_OK) {
        fprintf(stderr, "[%d] cc_coll_check_version: %s\n", rank, cc_coll_last_error());
        bad = 1;
    }
    int major = -1, minor = -1, patch = -1;
    cc_coll_get_version(&major, &minor, &patch);
    if (major != CC_COLL_VERSION_MAJOR || minor != CC_COLL_VERSION_MINOR || patch != CC_COLL_VERSION_PATCH) {
        fprintf(stderr, "[%d] library version %d.%d.%d != header %d.%d.%d\n", rank, major, minor, patch,
                CC_COLL_VERSION_MAJOR, CC_COLL_VERSION_MINOR, CC_COLL_VERSION_PATCH);
        bad = 1;
    }

    cc_coll_comm_h comm = NULL;
    cc_coll_status_t st = cc_coll_comm_create(MPI_COMM_WORLD, &comm);
    if (st != CC_COLL_OK) {
        fprintf(stderr, "[%d] cc_coll_comm_create: %s\n", rank, cc_coll_last_error());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    enum { N = 257 };
    double buf[N];
    for (int i = 0; i < N; ++i) buf[i] = (double)(i + rank);
    st = cc_coll_allreduce(buf, buf, N, CC_COLL_F64, CC_COLL_SUM, NULL, comm, NULL);
    if (st != CC_COLL_OK) {
        fprintf(stderr, "[%d] cc_coll_allreduce: %s\n", rank, cc_coll_last_error());
        bad = 1;
    } else {
        for (int i = 0; i < N; ++i) {
            const double want = (double)i * size + (double)size * (size - 1) / 2;
            if (buf[i] != want) {
                fprintf(stderr, "[%d] element %d: got %g, expected %g\n", rank, i, buf[i], want);
                bad = 1;
                break;
            }
        }
    }
    if (cc_coll_comm_destroy(comm) != CC_COLL_OK) bad = 1;

    int any_bad = 0;
    MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0) printf("consumer_c: libcc_coll %s, %d ranks: %s\n", cc_coll_version_string(), size,
                          any_bad ? "FAILED" : "passed");
    MPI_Finalize();
    return any_bad;
}
