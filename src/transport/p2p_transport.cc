#include "transport/p2p_transport.hpp"

#include <climits>

#include "core/error.hpp"
#include "transport/mpi_transport.hpp"

namespace cc_coll::detail {

int mpi_tag_ub(MPI_Comm comm)
{
    void *value = nullptr;
    int flag = 0;
    if (MPI_Comm_get_attr(comm, MPI_TAG_UB, &value, &flag) != MPI_SUCCESS || !flag || value == nullptr) return 32767;
    const int ub = *static_cast<int *>(value);
    return ub < 32767 ? 32767 : ub;
}

cc_coll_status_t send_bytes(const void *buf, std::size_t bytes, int dest, int tag, MPI_Comm comm)
{
    if (bytes > static_cast<std::size_t>(INT_MAX))
        return fail(CC_COLL_ERR_COUNT_OVERFLOW, "MPI_Send: a message of %zu bytes exceeds MPI's count type (int)",
                    bytes);
    return check_mpi(MPI_Send(buf, static_cast<int>(bytes), MPI_BYTE, dest, tag, comm), "MPI_Send");
}

cc_coll_status_t recv_message(int source, int tag, MPI_Comm comm, std::size_t max_bytes,
                              std::vector<unsigned char> *out, std::size_t *size)
{
    MPI_Message message = MPI_MESSAGE_NULL;
    MPI_Status status;
    *size = 0;
    out->clear();
    cc_coll_status_t st = check_mpi(MPI_Mprobe(source, tag, comm, &message, &status), "MPI_Mprobe");
    if (st != CC_COLL_OK) return st;
    int bytes = 0;
    if ((st = check_mpi(MPI_Get_count(&status, MPI_BYTE, &bytes), "MPI_Get_count")) != CC_COLL_OK) {
        MPI_Mrecv(nullptr, 0, MPI_BYTE, &message, MPI_STATUS_IGNORE);  // a matched message must be received
        return st;
    }
    if (bytes == MPI_UNDEFINED || bytes < 0) bytes = 0;
    *size = static_cast<std::size_t>(bytes);
    if (*size > max_bytes) {
        // Taken whole into scratch of its size and dropped at once: a
        // truncated MPI_Mrecv would be the portable way not to hold it, but
        // MPICH raises MPI_ERR_TRUNCATE there on MPI_COMM_WORLD's handler
        // (fatal by default), whatever the communicator's.
        std::vector<unsigned char> dropped(*size);
        return check_mpi(MPI_Mrecv(dropped.data(), bytes, MPI_BYTE, &message, MPI_STATUS_IGNORE), "MPI_Mrecv");
    }
    out->resize(*size);
    return check_mpi(MPI_Mrecv(out->data(), bytes, MPI_BYTE, &message, MPI_STATUS_IGNORE), "MPI_Mrecv");
}

}  // namespace cc_coll::detail
