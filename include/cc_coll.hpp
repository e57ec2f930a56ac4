// libcc_coll — header-only C++ wrapper over the C ABI (cc_coll.h).
//
//   cc_coll::Comm comm(MPI_COMM_WORLD);          // throws cc_coll::Error
//   comm.allreduce(send, recv, n, CC_COLL_F32, CC_COLL_SUM);
//
// Comm is move-only and destroys its handle when it goes out of scope (which
// must happen before MPI_Finalize). Every failing call throws cc_coll::Error,
// which carries the status code and the library's message.
//
// SPDX-License-Identifier: BSD-3-Clause
#ifndef CC_COLL_HPP
#define CC_COLL_HPP

#include <stdexcept>
#include <string>
#include <utility>

#include "cc_coll.h"

namespace cc_coll {

class Error : public std::runtime_error {
public:
    Error(cc_coll_status_t status, const std::string &message)
        : std::runtime_error(message), status_(status)
    {
    }
    cc_coll_status_t status() const noexcept { return status_; }

private:
    cc_coll_status_t status_;
};

// Throws Error for any status but CC_COLL_OK, with the thread's last-error
// message (or the status name when there is none).
inline void check(cc_coll_status_t status)
{
    if (status == CC_COLL_OK) return;
    const char *why = cc_coll_last_error();
    throw Error(status, (why != nullptr && why[0] != '\0') ? std::string(why)
                                                            : std::string(cc_coll_status_string(status)));
}

class Comm {
public:
    // Collective over mpi_comm, like cc_coll_comm_create().
    explicit Comm(MPI_Comm mpi_comm) { check(cc_coll_comm_create(mpi_comm, &handle_)); }

    ~Comm()
    {
        if (handle_ != nullptr) cc_coll_comm_destroy(handle_);
    }

    Comm(const Comm &) = delete;
    Comm &operator=(const Comm &) = delete;
    Comm(Comm &&other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
    Comm &operator=(Comm &&other) noexcept
    {
        if (this != &other) {
            if (handle_ != nullptr) cc_coll_comm_destroy(handle_);
            handle_ = std::exchange(other.handle_, nullptr);
        }
        return *this;
    }

    // The raw C handle, for calls the wrapper does not cover.
    cc_coll_comm_h handle() const noexcept { return handle_; }

    int rank() const
    {
        int r = 0;
        check(cc_coll_comm_rank(handle_, &r));
        return r;
    }

    int size() const
    {
        int s = 0;
        check(cc_coll_comm_size(handle_, &s));
        return s;
    }

    void allreduce(const void *sendbuf, void *recvbuf, size_t count, cc_coll_dtype_t dtype, cc_coll_op_t op,
                   const cc_coll_params_t *params = nullptr) const
    {
        check(cc_coll_allreduce(sendbuf, recvbuf, count, dtype, op, params, handle_, nullptr));
    }

    // In place: buf holds this rank's input and receives the result.
    void allreduce(void *buf, size_t count, cc_coll_dtype_t dtype, cc_coll_op_t op,
                   const cc_coll_params_t *params = nullptr) const
    {
        allreduce(buf, buf, count, dtype, op, params);
    }

    cc_coll_stats_t stats() const
    {
        cc_coll_stats_t s{};
        s.mask = CC_COLL_STATS_FIELD_CALLS | CC_COLL_STATS_FIELD_BYTES_UNCOMPRESSED | CC_COLL_STATS_FIELD_BYTES_WIRE |
                 CC_COLL_STATS_FIELD_TIME_COMPRESS | CC_COLL_STATS_FIELD_TIME_COMMUNICATE |
                 CC_COLL_STATS_FIELD_TIME_DECOMPRESS;
        check(cc_coll_comm_get_stats(handle_, &s));
        return s;
    }

    void reset_stats() const { check(cc_coll_comm_reset_stats(handle_)); }

private:
    cc_coll_comm_h handle_ = nullptr;
};

}  // namespace cc_coll

#endif  // CC_COLL_HPP
