// Compressed point-to-point: cc_coll_send / cc_coll_recv with lazy error
// propagation (ALGORITHMS.md section 5).
#pragma once

#include <cstddef>

#include "cc_coll.h"
#include "core/comm.hpp"
#include "core/params.hpp"

namespace cc_coll::detail {

struct SendArgs {
    const void *buf;
    std::size_t count;
    cc_coll_dtype_t dtype;
    int dest;
    int tag;
    bool compress;
};

struct RecvArgs {
    void *buf;
    std::size_t count;
    cc_coll_dtype_t dtype;
    int source;
    int tag;
};

// The largest tag cc_coll_send/recv accept on comm.
int p2p_tag_ub(Comm &comm);

// Arguments already validated by the C ABI (dtype, count, buffers, peer and
// tag ranges).
cc_coll_status_t p2p_send(Comm &comm, const SendArgs &args, const CallParams &params);
cc_coll_status_t p2p_recv(Comm &comm, const RecvArgs &args, const CallParams &params);

}  // namespace cc_coll::detail
