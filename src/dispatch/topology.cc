// Topology discovery at communicator creation (docs/algorithms.md
// section 7): the node communicator, the shard count, the rail
// communicator and the kernel threads.
#include "core/topology.hpp"
#include "dispatch/dispatch.hpp"

#include <cstdlib>
#include <string>
#include <vector>

#include "core/comm.hpp"
#include "core/error.hpp"
#include "core/parallel.hpp"
#include "transport/mpi_transport.hpp"

namespace cc_coll::detail {

namespace {

// The ranks on this rank's node as the launcher tells them (Open MPI,
// MPICH's Hydra, PMI), 0 when none does.
int launcher_local_ranks()
{
    for (const char *name : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "PMI_LOCAL_SIZE"}) {
        const char *v = std::getenv(name);
        if (v == nullptr) continue;
        char *end = nullptr;
        const long n = std::strtol(v, &end, 10);
        if (end != v && *end == '\0' && n >= 1 && n <= 1 << 20) return static_cast<int>(n);
    }
    return 0;
}

cc_coll_status_t build_nodes(Comm &comm, int *node_ranks)
{
    const Config &cfg = comm.config();
    if (cfg.hierarchy == HierarchyMode::Off) return CC_COLL_OK;
    std::vector<int> sizes;
    std::string why;
    if (!cfg.node_sizes.empty() && !parse_node_sizes(cfg.node_sizes, comm.size(), &sizes, &why))
        return fail(CC_COLL_ERR_CONFIG, "CC_COLL_NODES=\"%s\": %s", cfg.node_sizes.c_str(), why.c_str());
    if (comm.size() < 2) return CC_COLL_OK;
    auto topo = std::make_unique<NodeTopology>();
    cc_coll_status_t st = CC_COLL_OK;
    if (!cfg.node_sizes.empty()) {
        int color = 0;
        for (int first = 0; first + sizes[static_cast<std::size_t>(color)] <= comm.rank();)
            first += sizes[static_cast<std::size_t>(color++)];
        st = check_mpi(MPI_Comm_split(comm.mpi(), color, comm.rank(), &topo->node), "MPI_Comm_split (nodes)");
    } else {
        st = check_mpi(MPI_Comm_split_type(comm.mpi(), MPI_COMM_TYPE_SHARED, comm.rank(), MPI_INFO_NULL, &topo->node),
                       "MPI_Comm_split_type (MPI_COMM_TYPE_SHARED)");
    }
    if (st != CC_COLL_OK) return st;
    if ((st = check_mpi(MPI_Comm_rank(topo->node, &topo->node_rank), "MPI_Comm_rank")) != CC_COLL_OK ||
        (st = check_mpi(MPI_Comm_size(topo->node, &topo->node_size), "MPI_Comm_size")) != CC_COLL_OK)
        return st;
    *node_ranks = topo->node_size;
    // Two small exchanges: the number of nodes (the sum of the node
    // leaders), then the smallest and the largest node (maxima of -size and
    // size).
    int mine[3] = {topo->node_rank == 0 ? 1 : 0, -topo->node_size, topo->node_size};
    int sum_leaders = 0;
    if ((st = check_mpi(MPI_Allreduce(&mine[0], &sum_leaders, 1, MPI_INT, MPI_SUM, comm.mpi()), "MPI_Allreduce")) !=
        CC_COLL_OK)
        return st;
    int ext[2] = {mine[1], mine[2]};
    if ((st = check_mpi(MPI_Allreduce(MPI_IN_PLACE, ext, 2, MPI_INT, MPI_MAX, comm.mpi()), "MPI_Allreduce")) !=
        CC_COLL_OK)
        return st;
    topo->nodes = sum_leaders;
    topo->shards = -ext[0];
    const int largest = ext[1];
    const bool active = cfg.hierarchy == HierarchyMode::On ? largest >= 2 : (topo->nodes >= 2 && topo->shards >= 2);
    if (!active) return CC_COLL_OK;  // the flat algorithms; the node communicator is freed here

    const int color = topo->node_rank < topo->shards ? topo->node_rank : MPI_UNDEFINED;
    MPI_Comm rail = MPI_COMM_NULL;
    if ((st = check_mpi(MPI_Comm_split(comm.mpi(), color, comm.rank(), &rail), "MPI_Comm_split (rails)")) != CC_COLL_OK)
        return st;
    if (rail != MPI_COMM_NULL) {
        int rank = 0, size = 0;
        if ((st = check_mpi(MPI_Comm_set_errhandler(rail, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler")) !=
                CC_COLL_OK ||
            (st = check_mpi(MPI_Comm_rank(rail, &rank), "MPI_Comm_rank")) != CC_COLL_OK ||
            (st = check_mpi(MPI_Comm_size(rail, &size), "MPI_Comm_size")) != CC_COLL_OK) {
            MPI_Comm_free(&rail);
            return st;
        }
        Config rail_cfg = cfg;
        rail_cfg.hierarchy = HierarchyMode::Off;
        topo->rail = std::make_shared<Comm>(rail, rank, size, rail_cfg);
    }
    if ((st = check_mpi(MPI_Comm_set_errhandler(topo->node, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler")) !=
        CC_COLL_OK)
        return st;
    comm.set_topology(std::move(topo));
    return CC_COLL_OK;
}

}  // namespace

cc_coll_status_t build_topology(Comm &comm)
{
    int node_ranks = 0;
    const cc_coll_status_t st = build_nodes(comm, &node_ranks);
    if (st != CC_COLL_OK) return st;
    int threads = comm.config().threads;
    if (threads <= 0) {
        const int local = launcher_local_ranks();
        threads = default_threads(local > 0 ? local : (node_ranks > 0 ? node_ranks : 1));
    }
    comm.set_threads(threads);
    if (comm.topology() != nullptr && comm.topology()->rail) comm.topology()->rail->set_threads(threads);
    return CC_COLL_OK;
}

}  // namespace cc_coll::detail
