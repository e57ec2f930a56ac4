#include "core/topology.hpp"

namespace cc_coll::detail {

NodeTopology::~NodeTopology()
{
    int finalized = 1;
    MPI_Finalized(&finalized);
    if (!finalized && node != MPI_COMM_NULL) MPI_Comm_free(&node);
}

}  // namespace cc_coll::detail
