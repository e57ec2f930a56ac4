// Compressed point-to-point: cc_coll_send / cc_coll_recv with lazy error
// propagation (docs/algorithms.md section 5). The wire format is in wire/p2p_wire.hpp.
#pragma once

#include <cstddef>

#include "cc_coll.h"
#include "core/comm.hpp"
#include "core/ef_store.hpp"
#include "core/params.hpp"

namespace cc_coll::detail {

struct SendArgs {
    const void *buf;
    std::size_t count;
    cc_coll_dtype_t dtype;
    int dest;
    int tag;
    bool compress;
    bool on_device = false;  // buf is device memory (staged through host memory)
    void *stream = nullptr;  // the caller's cudaStream_t (device buffers)
};

struct RecvArgs {
    void *buf;
    std::size_t count;
    cc_coll_dtype_t dtype;
    int source;
    int tag;
    bool on_device = false;  // buf is device memory (staged through host memory)
    void *stream = nullptr;  // the caller's cudaStream_t (device buffers)
};

// The largest tag cc_coll_send/recv accept on comm: (MPI_TAG_UB - 1) / 2,
// since tag t uses MPI tags 2t (the message) and 2t + 1 (the answer).
int p2p_tag_ub(Comm &comm);

// The largest count of `dtype` one message can carry uncompressed (header
// and elements within MPI's int count of bytes).
std::size_t p2p_max_count(cc_coll_dtype_t dtype);

// The LEP channel of (peer, params' ef_key when set, else tag).
inline EfKey p2p_channel(int peer, int tag, const CallParams &params)
{
    return EfKey::channel(peer, params.has_ef_key, params.ef_key, tag);
}

// Arguments already validated by the C ABI (dtype, count, buffers, peer and
// tag ranges, compress). A method that cannot compress point-to-point
// messages (core/method.hpp) is CC_COLL_ERR_NOT_SUPPORTED with
// compress. Device buffers go through host copies.
cc_coll_status_t p2p_send(Comm &comm, const SendArgs &args, const CallParams &params);
cc_coll_status_t p2p_recv(Comm &comm, const RecvArgs &args, const CallParams &params);

}  // namespace cc_coll::detail
