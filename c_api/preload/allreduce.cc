// MPI_Allreduce: an eligible call the ranks agree on runs as
// cc_coll_allreduce; every other call passes through to MPI.

#include <exception>
#include <new>

#include <mpi.h>

#include "cc_coll.h"
#include "decision.hpp"
#include "entry_points.hpp"
#include "requests.hpp"
#include "state.hpp"

namespace cc_coll_preload {

// True when the call was handled here (MPI's return code in *rc); false:
// the caller passes it to MPI unchanged.
bool intercept(const void *send, void *recv, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm, const void *ret,
               int *rc) noexcept
{
    State &s = state();
    if (!(s.active.load() || s.advise.load()) || s.torn_down.load()) return false;
    try {
        Candidate c;
        if (!consider(send, recv, count, dt, op, comm, ret, &c)) return false;
        Entry *e = c.e;
        settle(e);
        EfCheck ef;
        const int bits = preflight(*e, c.src, recv, c.n, c.dtype, c.local, &ef);
        if (!agreed_to_compress(*e, bits)) return false;
        // Advice mode: the ranks agreed to compress it; MPI runs it.
        if (s.advise.load()) {
            count_advice(ret, c, comm);
            return false;
        }

        const cc_coll_params_t p = compress_params();
        const double t0 = PMPI_Wtime();
        cc_coll_status_t st = cc_coll_allreduce(c.src, recv, c.n, c.dtype, CC_COLL_SUM, &p, e->handle, nullptr);
        if (dropped_disagreeing_state(*e, p, recv, c.n, c.dtype, st))
            st = cc_coll_allreduce(c.src, recv, c.n, c.dtype, CC_COLL_SUM, &p, e->handle, nullptr);
        const double seconds = PMPI_Wtime() - t0;
        if (st == CC_COLL_OK) {
            note_residual(e, recv, c.n, c.dtype, ef);
            if (s.cfg.stats) {
                site_for(ret);  // resolved now, for the summary
                if (!c.targeting) c.name = comm_name(comm);
            }
            const Prediction prediction = predict_for(*e, c.n, c.dtype);
            count_compressed(ret, c.n, c.dtype, c.bytes, c.name, seconds, false, &prediction);
            *rc = MPI_SUCCESS;
            return true;
        }
        // Seen by every rank together: pass the call through.
        if (failed_together(st)) {
            report_once(st, e->rank, cc_coll_status_string(st), cc_coll_last_error());
            return false;
        }
        *rc = local_failure("MPI_Allreduce", comm, st == CC_COLL_ERR_NO_MEMORY ? MPI_ERR_NO_MEM : MPI_ERR_OTHER,
                            cc_coll_status_string(st), cc_coll_last_error());
        return true;
    } catch (const std::bad_alloc &) {
        *rc = local_failure("MPI_Allreduce", comm, MPI_ERR_NO_MEM, "out of memory", "in the LD_PRELOAD shim");
    } catch (const std::exception &ex) {
        *rc = local_failure("MPI_Allreduce", comm, MPI_ERR_OTHER, "unexpected exception", ex.what());
    } catch (...) {
        *rc = local_failure("MPI_Allreduce", comm, MPI_ERR_OTHER, "unexpected exception", "non-standard");
    }
    return true;
}
}  // namespace cc_coll_preload
