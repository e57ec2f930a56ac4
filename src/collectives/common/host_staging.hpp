// A device call's buffers on the host, for the algorithms that run device
// buffers through host copies (every reduce-scatter; an allreduce whose
// method stages them, Method::stages_device): sendbuf copied in once the
// caller's stream is done, room for recvbuf (sendbuf's copy itself when the
// call is in place), and recvbuf written back only when the call succeeded.
#pragma once

#include <cstddef>
#include <vector>

#include "cc_coll.h"
#include "core/error.hpp"
#include "gpu/gpu.hpp"

namespace cc_coll::detail {

class HostStaging {
public:
    cc_coll_status_t stage(const void *send, std::size_t send_bytes, const void *recv, std::size_t recv_bytes,
                           void *stream, const char *fn)
    {
        CC_COLL_TRY(gpu::synchronize(stream, fn));
        send_.resize(send_bytes > 0 ? send_bytes : 1);
        CC_COLL_TRY(gpu::copy_to_host(send_.data(), send, send_bytes, fn));
        in_place_ = send == recv;
        if (!in_place_) recv_.resize(recv_bytes > 0 ? recv_bytes : 1);
        return CC_COLL_OK;
    }
    void *send() { return send_.data(); }
    void *recv() { return in_place_ ? send_.data() : recv_.data(); }
    cc_coll_status_t write_back(void *recv, std::size_t bytes, const char *fn)
    {
        return gpu::copy_to_device(recv, this->recv(), bytes, fn);
    }

private:
    std::vector<unsigned char> send_, recv_;
    bool in_place_ = false;
};

}  // namespace cc_coll::detail
