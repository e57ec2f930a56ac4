// libcc_coll's MPI calls.
//
// libcc_coll's objects, linked into this core, call MPI by name: among
// others MPI_Allreduce, MPI_Iallreduce and MPI_Test, which the front
// interposes. Those calls must go straight to MPI, on any thread: the
// library's progress thread runs requests outside every wrapper of the
// shim, and a caller-driven request runs inside the program's MPI_Wait. So
// the core defines each MPI function the front interposes and the library
// may call, forwarding to PMPI. The version script (preload_core.map) keeps
// them local, so the link binds the library's references to them here and
// the dynamic linker never sends those calls to the front; the test
// preload_core_binds_locally checks that the core imports none of the
// front's symbols.

#include <mpi.h>

extern "C" {

int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm)
{
    return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
}

int MPI_Iallreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                   MPI_Request *request)
{
    return PMPI_Iallreduce(sendbuf, recvbuf, count, datatype, op, comm, request);
}

int MPI_Wait(MPI_Request *request, MPI_Status *status) { return PMPI_Wait(request, status); }

int MPI_Test(MPI_Request *request, int *flag, MPI_Status *status) { return PMPI_Test(request, flag, status); }

int MPI_Waitall(int count, MPI_Request requests[], MPI_Status statuses[])
{
    return PMPI_Waitall(count, requests, statuses);
}

int MPI_Testall(int count, MPI_Request requests[], int *flag, MPI_Status statuses[])
{
    return PMPI_Testall(count, requests, flag, statuses);
}

int MPI_Waitany(int count, MPI_Request requests[], int *index, MPI_Status *status)
{
    return PMPI_Waitany(count, requests, index, status);
}

int MPI_Testany(int count, MPI_Request requests[], int *index, int *flag, MPI_Status *status)
{
    return PMPI_Testany(count, requests, index, flag, status);
}

int MPI_Waitsome(int incount, MPI_Request requests[], int *outcount, int indices[], MPI_Status statuses[])
{
    return PMPI_Waitsome(incount, requests, outcount, indices, statuses);
}

int MPI_Testsome(int incount, MPI_Request requests[], int *outcount, int indices[], MPI_Status statuses[])
{
    return PMPI_Testsome(incount, requests, outcount, indices, statuses);
}

int MPI_Request_get_status(MPI_Request request, int *flag, MPI_Status *status)
{
    return PMPI_Request_get_status(request, flag, status);
}

}  // extern "C"
