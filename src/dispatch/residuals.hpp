// A tensor's error-feedback state as the C ABI's residual calls see it
// (cc_coll_ef_get_residual, cc_coll_ef_reset, cc_coll_ef_reset_all): the
// communicator's own residual, or on a hierarchical communicator the shard's,
// kept by this rank's rail (collectives/allreduce/hierarchical.cc). Callers
// hold the communicator's collective lock.
#pragma once

#include <cstddef>

#include "cc_coll.h"
#include "core/ef_store.hpp"
#include "core/params.hpp"

namespace cc_coll::detail {

class Comm;

// out[0..count) = the residual of `key` (tensor `recvbuf` of count dtype
// elements with params p), zero where there is none.
cc_coll_status_t read_residual(Comm &c, const CallParams &p, const EfKey &key, const void *recvbuf,
                               std::size_t count, cc_coll_dtype_t dtype, double *out, const char *fn);
// Forgets the tensor's residual and every method's state of it.
void reset_residual(Comm &c, const CallParams &p, const EfKey &key, const void *recvbuf, std::size_t count,
                    cc_coll_dtype_t dtype);
// Forgets every residual and every method's state, the rail's included
// (under both of the communicator's locks).
void reset_all_residuals(Comm &c);

}  // namespace cc_coll::detail
