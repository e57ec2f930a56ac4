// libcc_coll — header-only C++ wrapper over the C ABI (cc_coll.h).
//
//   cc_coll::Comm comm(MPI_COMM_WORLD);          // throws cc_coll::Error
//   comm.allreduce(send, recv, n, CC_COLL_F32, CC_COLL_SUM);
//   comm.allreduce(buf, n, CC_COLL_F32, CC_COLL_AVG,
//                  cc_coll::Params().method(CC_COLL_METHOD_LOWRANK).shape(rows, cols).rank(4));
//
// Comm is move-only and destroys its handle when it goes out of scope (which
// must happen before MPI_Finalize). Every failing call throws cc_coll::Error,
// which carries the status code and the library's message. Params builds a
// cc_coll_params_t: each setter sets the field and its mask bit.
//
// Non-blocking collectives return a cc_coll::Request (move-only; its
// destructor frees the handle):
//
//   cc_coll::Request r = comm.iallreduce(send, recv, n, CC_COLL_F32, CC_COLL_SUM);
//   ...                                          // compute; leave send/recv alone
//   r.wait();                                    // throws the collective's error
//
// SPDX-License-Identifier: BSD-3-Clause
#ifndef CC_COLL_HPP
#define CC_COLL_HPP

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "cc_coll.h"

// Dropping a Request frees it at once (the collective still runs, with no
// way left to see it complete): the calls that return one say so.
#if __cplusplus >= 201703L
#define CC_COLL_HPP_NODISCARD [[nodiscard]]
#else
#define CC_COLL_HPP_NODISCARD
#endif

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

// The cc_coll_dtype_t of a C++ element type: dtype_of<float>() is
// CC_COLL_F32, dtype_of<double>() CC_COLL_F64 (F16 and BF16 data have no
// C++ type here: pass the dtype explicitly).
template <typename T>
struct DtypeOf;
template <>
struct DtypeOf<float> {
    static constexpr cc_coll_dtype_t value = CC_COLL_F32;
};
template <>
struct DtypeOf<double> {
    static constexpr cc_coll_dtype_t value = CC_COLL_F64;
};
template <typename T>
constexpr cc_coll_dtype_t dtype_of() noexcept
{
    return DtypeOf<T>::value;
}

// A cc_coll_params_t built field by field: every setter sets the field and
// its CC_COLL_PARAMS_FIELD_* bit, and returns *this for chaining. A default
// Params (mask 0) means "all defaults". c() is the C struct.
class Params {
public:
    Params() noexcept : p_() {}
    // Wraps an existing C struct (its mask included).
    explicit Params(const cc_coll_params_t &p) noexcept : p_(p) {}

    Params &method(cc_coll_method_t m) noexcept { return set(CC_COLL_PARAMS_FIELD_METHOD, p_.method, m); }
    Params &density(double d) noexcept { return set(CC_COLL_PARAMS_FIELD_DENSITY, p_.density, d); }
    Params &ef(bool on) noexcept { return set(CC_COLL_PARAMS_FIELD_EF, p_.ef, on ? 1 : 0); }
    Params &ef_key(std::uint64_t key) noexcept { return set(CC_COLL_PARAMS_FIELD_EF_KEY, p_.ef_key, key); }
    Params &sparsifier(cc_coll_sparsifier_t s) noexcept { return set(CC_COLL_PARAMS_FIELD_SPARSIFIER, p_.sparsifier, s); }
    Params &zero_fraction(double f) noexcept { return set(CC_COLL_PARAMS_FIELD_ZERO_FRACTION, p_.zero_fraction, f); }
    Params &load_factor(double f) noexcept { return set(CC_COLL_PARAMS_FIELD_LOAD_FACTOR, p_.load_factor, f); }
    Params &seed(std::uint64_t s) noexcept { return set(CC_COLL_PARAMS_FIELD_SEED, p_.seed, s); }
    // LOWRANK: the buffer viewed as a row-major rows x cols matrix (C order,
    // like torch's tensor.view(rows, -1)); cols = 0 means count / rows;
    // shape(0) (rows = cols = 0) is the near-square view. Without a shape an
    // allreduce sends the tensor densely (a 1-D tensor, as powerSGD_hook).
    Params &shape(std::uint64_t rows, std::uint64_t cols = 0) noexcept
    {
        p_.rows = rows;
        return set(CC_COLL_PARAMS_FIELD_SHAPE, p_.cols, cols);
    }
    // LOWRANK: the target rank r (a rows x cols tensor uses min(rows, cols, r)).
    Params &rank(int r) noexcept { return set(CC_COLL_PARAMS_FIELD_RANK, p_.rank, r); }
    Params &warm_start(bool on) noexcept { return set(CC_COLL_PARAMS_FIELD_WARM_START, p_.warm_start, on ? 1 : 0); }
    Params &start_iter(std::uint64_t n) noexcept { return set(CC_COLL_PARAMS_FIELD_START_ITER, p_.start_iter, n); }
    Params &min_compression_rate(double r) noexcept
    {
        return set(CC_COLL_PARAMS_FIELD_MIN_COMPRESSION_RATE, p_.min_compression_rate, r);
    }

    const cc_coll_params_t &c() const noexcept { return p_; }
    std::uint64_t mask() const noexcept { return p_.mask; }

private:
    template <typename F, typename V>
    Params &set(std::uint64_t bit, F &field, V value) noexcept
    {
        field = static_cast<F>(value);
        p_.mask |= bit;
        return *this;
    }

    cc_coll_params_t p_;
};

// What a call takes as its params: nothing or nullptr (all defaults), a
// pointer to or a cc_coll_params_t, or a Params. It only refers to the
// caller's object, for the duration of the call: not a type to store.
class ParamsRef {
public:
    ParamsRef(const cc_coll_params_t *p = nullptr) noexcept : p_(p) {}  // NOLINT: implicit on purpose
    ParamsRef(const cc_coll_params_t &p) noexcept : p_(&p) {}           // NOLINT
    ParamsRef(const Params &p) noexcept : p_(&p.c()) {}                 // NOLINT
    const cc_coll_params_t *get() const noexcept { return p_; }

private:
    const cc_coll_params_t *p_;
};

// One tensor of a grouped allreduce (Comm::allreduce_group): `count`
// elements of `dtype` from `send` into `recv`, with `params`. send ==
// nullptr or send == recv: in place.
struct Tensor {
    const void *send = nullptr;
    void *recv = nullptr;
    std::size_t count = 0;
    cc_coll_dtype_t dtype = CC_COLL_F32;
    cc_coll_params_t params{};  // mask 0: the communicator's defaults

    Tensor() = default;
    Tensor(const void *send_, void *recv_, std::size_t count_, cc_coll_dtype_t dtype_, ParamsRef params_ = {})
        : send(send_), recv(recv_), count(count_), dtype(dtype_)
    {
        if (params_.get() != nullptr) params = *params_.get();
    }
    // In place.
    Tensor(void *buf, std::size_t count_, cc_coll_dtype_t dtype_, ParamsRef params_ = {})
        : Tensor(buf, buf, count_, dtype_, params_)
    {
    }
    // float or double buffers: the dtype follows the element type.
    template <typename T>
    Tensor(const T *send_, T *recv_, std::size_t count_, ParamsRef params_ = {})
        : Tensor(static_cast<const void *>(send_), static_cast<void *>(recv_), count_, dtype_of<T>(), params_)
    {
    }
    template <typename T>
    Tensor(T *buf, std::size_t count_, ParamsRef params_ = {})
        : Tensor(static_cast<const void *>(buf), static_cast<void *>(buf), count_, dtype_of<T>(), params_)
    {
    }
};

// The LOWRANK state of a tensor (Comm::lowrank_state): the matrix shape of
// its last compressed step, r (0 before the first), its number of calls,
// and, when asked for, P (rows x rank) and the warm-start Q (cols x rank,
// already divided by the communicator size), row-major, as doubles.
struct LowRankState {
    std::uint64_t rows = 0;
    std::uint64_t cols = 0;
    int rank = 0;
    std::uint64_t calls = 0;
    std::vector<double> p;
    std::vector<double> q;
};

// A non-blocking collective in flight (cc_coll_request_h), as Comm's
// iallreduce, ireduce_scatter and iallreduce_group return it. Move-only; the
// destructor (and free()) frees the handle with cc_coll_request_free. Freeing
// does not cancel: a request freed in flight still runs to its end, and its
// buffers stay in use until then (until a blocking call on its communicator,
// the communicator's destruction or MPI_Finalize completes it), so wait()
// before the buffers go away. Completion does not free the handle: status()
// and message() stay readable until it is freed.
//
// wait() and test() throw Error with the collective's status and message
// when it failed (and, like every call given a freed or moved-from Request,
// CC_COLL_ERR_INVALID_ARG for a dead handle).
class Request {
public:
    Request() noexcept = default;
    // Takes ownership of a handle from the C API (nullptr: an empty Request).
    explicit Request(cc_coll_request_h handle) noexcept : handle_(handle) {}

    ~Request()
    {
        if (handle_ != nullptr) cc_coll_request_free(handle_);
    }

    Request(const Request &) = delete;
    Request &operator=(const Request &) = delete;
    Request(Request &&other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
    Request &operator=(Request &&other) noexcept
    {
        if (this != &other) {
            if (handle_ != nullptr) cc_coll_request_free(handle_);
            handle_ = std::exchange(other.handle_, nullptr);
        }
        return *this;
    }

    // The raw C handle (nullptr when empty, moved from or freed).
    cc_coll_request_h handle() const noexcept { return handle_; }
    explicit operator bool() const noexcept { return handle_ != nullptr; }

    // Gives up ownership: the caller frees the returned handle.
    cc_coll_request_h release() noexcept { return std::exchange(handle_, nullptr); }

    // Frees the handle now (cc_coll_request_free); the Request is then empty.
    void free()
    {
        if (handle_ == nullptr) return;
        check(cc_coll_request_free(std::exchange(handle_, nullptr)));
    }

    // Until the collective has completed (cc_coll_wait); throws its error.
    // Waiting again returns (or throws) at once.
    void wait() { check(cc_coll_wait(handle_)); }

    // Whether it has completed (cc_coll_test; with caller-driven progress
    // this advances the requests in flight first). Throws its error once it
    // has completed with one.
    bool test()
    {
        int done = 0;
        check(cc_coll_test(handle_, &done));
        return done != 0;
    }

    // The request's state, without advancing it (cc_coll_request_status).
    bool done() const
    {
        int d = 0;
        check(cc_coll_request_status(handle_, &d, nullptr, nullptr));
        return d != 0;
    }

    // Its status once done (CC_COLL_OK while it runs).
    cc_coll_status_t status() const
    {
        cc_coll_status_t st = CC_COLL_OK;
        check(cc_coll_request_status(handle_, nullptr, &st, nullptr));
        return st;
    }

    // Its error message once done ("" on success and while it runs).
    std::string message() const
    {
        const char *m = nullptr;
        check(cc_coll_request_status(handle_, nullptr, nullptr, &m));
        return m != nullptr ? std::string(m) : std::string();
    }

private:
    cc_coll_request_h handle_ = nullptr;
};

// Waits for requests[0..n) (cc_coll_waitall); empty Requests are skipped.
// Once all have completed, throws Error with the status and message of the
// first that failed. statuses, when not nullptr, receives each request's
// status (n entries).
inline void waitall(Request *requests, size_t n, cc_coll_status_t *statuses = nullptr)
{
    std::vector<cc_coll_request_h> handles(n);
    for (size_t i = 0; i < n; ++i) handles[i] = requests[i].handle();
    check(cc_coll_waitall(n, handles.data(), statuses));
}

inline void waitall(std::vector<Request> &requests, std::vector<cc_coll_status_t> *statuses = nullptr)
{
    if (statuses != nullptr) statuses->assign(requests.size(), CC_COLL_OK);
    waitall(requests.data(), requests.size(), statuses != nullptr ? statuses->data() : nullptr);
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

    // --- collectives ----------------------------------------------------------

    void allreduce(const void *sendbuf, void *recvbuf, size_t count, cc_coll_dtype_t dtype, cc_coll_op_t op,
                   ParamsRef params = {}) const
    {
        check(cc_coll_allreduce(sendbuf, recvbuf, count, dtype, op, params.get(), handle_, nullptr));
    }

    // In place: buf holds this rank's input and receives the result.
    void allreduce(void *buf, size_t count, cc_coll_dtype_t dtype, cc_coll_op_t op, ParamsRef params = {}) const
    {
        allreduce(buf, buf, count, dtype, op, params);
    }

    // cc_coll_allreduce_group on C arrays, as in C (sendbufs and params may
    // be nullptr).
    void allreduce_group(size_t ntensors, const void *const *sendbufs, void *const *recvbufs, const size_t *counts,
                         const cc_coll_dtype_t *dtypes, cc_coll_op_t op, const cc_coll_params_t *params) const
    {
        check(cc_coll_allreduce_group(ntensors, sendbufs, recvbufs, counts, dtypes, op, params, handle_, nullptr));
    }

    // Several tensors in one call: LOWRANK tensors share two MPI_Allreduce
    // calls, dense ones are packed into one per dtype (see
    // cc_coll_allreduce_group). Every rank passes the same tensors in the
    // same order.
    void allreduce_group(const Tensor *tensors, size_t ntensors, cc_coll_op_t op) const
    {
        const GroupArrays g(tensors, ntensors);
        allreduce_group(ntensors, g.send.data(), g.recv.data(), g.counts.data(), g.dtypes.data(), op,
                        g.params.data());
    }

    void allreduce_group(const std::vector<Tensor> &tensors, cc_coll_op_t op) const
    {
        allreduce_group(tensors.data(), tensors.size(), op);
    }

    // Reduce-scatter, like MPI_Reduce_scatter_block (cc_coll_reduce_scatter):
    // sendbuf holds recvcount x size() elements, this rank receives the
    // reduction of every rank's block rank() in recvbuf (recvcount elements).
    // sendbuf == recvbuf: in place, the shard lands in the buffer's first
    // recvcount elements.
    void reduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount, cc_coll_dtype_t dtype,
                        cc_coll_op_t op, ParamsRef params = {}) const
    {
        check(cc_coll_reduce_scatter(sendbuf, recvbuf, recvcount, dtype, op, params.get(), handle_, nullptr));
    }

    // --- non-blocking collectives ---------------------------------------------
    //
    // The same calls, started and returned at once as a Request; the result
    // is the blocking call's, bit for bit. Argument errors throw here (nothing
    // is posted). The buffers belong to the request until it completes: do
    // not write the send buffer, nor touch the receive buffer, meanwhile.
    // Every rank posts the collectives of a communicator, blocking and
    // non-blocking, in the same order. The group's arrays (and the Tensors)
    // are copied: only the tensors' memory stays in use.

    CC_COLL_HPP_NODISCARD Request iallreduce(const void *sendbuf, void *recvbuf, size_t count,
                                             cc_coll_dtype_t dtype, cc_coll_op_t op, ParamsRef params = {}) const
    {
        cc_coll_request_h r = nullptr;
        check(cc_coll_iallreduce(sendbuf, recvbuf, count, dtype, op, params.get(), handle_, nullptr, &r));
        return Request(r);
    }

    // In place.
    CC_COLL_HPP_NODISCARD Request iallreduce(void *buf, size_t count, cc_coll_dtype_t dtype, cc_coll_op_t op,
                                             ParamsRef params = {}) const
    {
        return iallreduce(buf, buf, count, dtype, op, params);
    }

    CC_COLL_HPP_NODISCARD Request ireduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                                                  cc_coll_dtype_t dtype, cc_coll_op_t op,
                                                  ParamsRef params = {}) const
    {
        cc_coll_request_h r = nullptr;
        check(cc_coll_ireduce_scatter(sendbuf, recvbuf, recvcount, dtype, op, params.get(), handle_, nullptr, &r));
        return Request(r);
    }

    CC_COLL_HPP_NODISCARD Request iallreduce_group(size_t ntensors, const void *const *sendbufs,
                                                   void *const *recvbufs, const size_t *counts,
                                                   const cc_coll_dtype_t *dtypes, cc_coll_op_t op,
                                                   const cc_coll_params_t *params) const
    {
        cc_coll_request_h r = nullptr;
        check(cc_coll_iallreduce_group(ntensors, sendbufs, recvbufs, counts, dtypes, op, params, handle_, nullptr,
                                       &r));
        return Request(r);
    }

    CC_COLL_HPP_NODISCARD Request iallreduce_group(const Tensor *tensors, size_t ntensors,
                                                   cc_coll_op_t op) const
    {
        const GroupArrays g(tensors, ntensors);
        return iallreduce_group(ntensors, g.send.data(), g.recv.data(), g.counts.data(), g.dtypes.data(), op,
                                g.params.data());
    }

    CC_COLL_HPP_NODISCARD Request iallreduce_group(const std::vector<Tensor> &tensors, cc_coll_op_t op) const
    {
        return iallreduce_group(tensors.data(), tensors.size(), op);
    }

    // --- compressed point-to-point ----------------------------------------------

    // Sends `count` elements to `dest` with `tag` (0 <= tag <= p2p_tag_ub()).
    // compress: with params' method (LOWRANK, TOPK; NONE sends as is), with
    // lazy error propagation on the channel (dest, ef_key or tag). Returns
    // once the receiver has the message.
    void send(const void *buf, size_t count, cc_coll_dtype_t dtype, int dest, int tag, bool compress = false,
              ParamsRef params = {}) const
    {
        check(cc_coll_send(buf, count, dtype, dest, tag, compress ? 1 : 0, params.get(), handle_, nullptr));
    }

    // Receives from `source` what send() sent with `tag`; for a compressed
    // message params must match the sender's (method, shape, rank, density).
    void recv(void *buf, size_t count, cc_coll_dtype_t dtype, int source, int tag, ParamsRef params = {}) const
    {
        check(cc_coll_recv(buf, count, dtype, source, tag, params.get(), handle_, nullptr));
    }

    // The largest tag send() and recv() accept.
    int p2p_tag_ub() const
    {
        int ub = 0;
        check(cc_coll_p2p_tag_ub(handle_, &ub));
        return ub;
    }

    // The LEP residual of the channel (dest, params' ef_key or tag): `count`
    // doubles, zeros when the channel has none.
    std::vector<double> lep_residual(int dest, int tag, size_t count, cc_coll_dtype_t dtype,
                                     ParamsRef params = {}) const
    {
        std::vector<double> out(count);
        check(cc_coll_lep_get_residual(handle_, dest, tag, params.get(), count, dtype, out.data()));
        return out;
    }

    // Drops the channel's LEP residual and warm-start Q.
    void lep_reset(int dest, int tag, ParamsRef params = {}) const
    {
        check(cc_coll_lep_reset(handle_, dest, tag, params.get()));
    }

    // --- LOWRANK state -------------------------------------------------------------

    // The state of the LOWRANK tensor named by (params' ef_key, else recvbuf,
    // count, dtype): pass the arguments of its calls. With factors, also P
    // and Q (empty while rank is 0).
    LowRankState lowrank_state(const void *recvbuf, size_t count, cc_coll_dtype_t dtype, ParamsRef params = {},
                               bool factors = true) const
    {
        LowRankState s;
        check(cc_coll_lowrank_get_state(handle_, params.get(), recvbuf, count, dtype, &s.rows, &s.cols, &s.rank,
                                        &s.calls, nullptr, nullptr));
        if (factors && s.rank > 0) {
            s.p.assign(static_cast<size_t>(s.rows) * static_cast<size_t>(s.rank), 0.0);
            s.q.assign(static_cast<size_t>(s.cols) * static_cast<size_t>(s.rank), 0.0);
            check(cc_coll_lowrank_get_state(handle_, params.get(), recvbuf, count, dtype, &s.rows, &s.cols, &s.rank,
                                            &s.calls, s.p.data(), s.q.data()));
        }
        return s;
    }

    // Sets the tensor's warm-start Q (cols x r, row-major, with the shape and
    // r the tensor's params resolve to), e.g. to restore a checkpoint. Do it
    // alike on every rank.
    void lowrank_set_q(const void *recvbuf, size_t count, cc_coll_dtype_t dtype, const double *q,
                       ParamsRef params = {}) const
    {
        check(cc_coll_lowrank_set_q(handle_, params.get(), recvbuf, count, dtype, q));
    }

    void lowrank_set_q(const void *recvbuf, size_t count, cc_coll_dtype_t dtype, const std::vector<double> &q,
                       ParamsRef params = {}) const
    {
        lowrank_set_q(recvbuf, count, dtype, q.empty() ? nullptr : q.data(), params);
    }

    // --- checkpoints -----------------------------------------------------------------

    // This rank's whole compression state as a blob (cc_coll_state_export):
    // residuals, LEP residuals, LOWRANK state. Save it with the training
    // checkpoint; state_import() on a new Comm of the same rank restores it.
    std::vector<unsigned char> state_export() const
    {
        size_t size = 0;
        check(cc_coll_state_export(handle_, nullptr, &size));
        std::vector<unsigned char> blob(size);
        check(cc_coll_state_export(handle_, blob.data(), &size));
        blob.resize(size);
        return blob;
    }

    // Replaces the whole compression state with a blob of state_export(), all
    // or nothing (cc_coll_state_import); a bad blob throws and changes nothing.
    void state_import(const void *blob, size_t size) const { check(cc_coll_state_import(handle_, blob, size)); }

    void state_import(const std::vector<unsigned char> &blob) const
    {
        state_import(blob.empty() ? nullptr : blob.data(), blob.size());
    }

    // --- statistics ------------------------------------------------------------------

    cc_coll_stats_t stats() const
    {
        cc_coll_stats_t s{};
        s.mask = CC_COLL_STATS_FIELD_CALLS | CC_COLL_STATS_FIELD_BYTES_UNCOMPRESSED | CC_COLL_STATS_FIELD_BYTES_WIRE |
                 CC_COLL_STATS_FIELD_TIME_COMPRESS | CC_COLL_STATS_FIELD_TIME_COMMUNICATE |
                 CC_COLL_STATS_FIELD_TIME_DECOMPRESS | CC_COLL_STATS_FIELD_TIME_TOTAL;
        check(cc_coll_comm_get_stats(handle_, &s));
        return s;
    }

    void reset_stats() const { check(cc_coll_comm_reset_stats(handle_)); }

private:
    // The C arrays of a group of Tensors.
    struct GroupArrays {
        std::vector<const void *> send;
        std::vector<void *> recv;
        std::vector<size_t> counts;
        std::vector<cc_coll_dtype_t> dtypes;
        std::vector<cc_coll_params_t> params;

        GroupArrays(const Tensor *tensors, size_t n) : send(n), recv(n), counts(n), dtypes(n), params(n)
        {
            for (size_t i = 0; i < n; ++i) {
                const Tensor &t = tensors[i];
                send[i] = t.send != nullptr ? t.send : t.recv;
                recv[i] = t.recv;
                counts[i] = t.count;
                dtypes[i] = t.dtype;
                params[i] = t.params;
            }
        }
    };

    cc_coll_comm_h handle_ = nullptr;
};

}  // namespace cc_coll

#undef CC_COLL_HPP_NODISCARD

#endif  // CC_COLL_HPP
