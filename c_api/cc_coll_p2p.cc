// The extern "C" entry points of compressed point-to-point.
#include <algorithm>
#include <cstdint>

#include <mpi.h>

#include "cc_coll.h"
#include "collectives/p2p/p2p.hpp"
#include "core/method.hpp"
#include "core/dtype.hpp"
#include "entry.hpp"

using namespace cc_coll::detail;

namespace {

// `name` (dest or source) names another rank of the communicator.
cc_coll_status_t check_peer(const char *fn, const char *name, int peer, const Comm &c)
{
    if (peer == MPI_ANY_SOURCE)
        return fail(CC_COLL_ERR_INVALID_ARG,
                    "%s: %s = MPI_ANY_SOURCE is not supported (a compressed message is checked against the "
                    "arguments of one known peer, and the LEP channel is per peer)",
                    fn, name);
    if (peer == MPI_PROC_NULL)
        return fail(CC_COLL_ERR_INVALID_ARG, "%s: %s = MPI_PROC_NULL is not supported; pass a rank in [0, %d)", fn,
                    name, c.size());
    if (peer < 0 || peer >= c.size())
        return fail(CC_COLL_ERR_INVALID_ARG, "%s: %s = %d is outside the communicator's ranks [0, %d)", fn, name,
                    peer, c.size());
    if (peer == c.rank())
        return fail(CC_COLL_ERR_INVALID_ARG, "%s: %s = %d is this rank; messages to oneself are not supported", fn,
                    name, peer);
    return CC_COLL_OK;
}

cc_coll_status_t check_tag(const char *fn, int tag, Comm &c)
{
    const int ub = p2p_tag_ub(c);
    if (tag < 0 || tag > ub)
        return fail(CC_COLL_ERR_INVALID_ARG,
                    "%s: tag = %d is outside [0, %d] (cc_coll_p2p_tag_ub: each message uses MPI tags 2 tag and "
                    "2 tag + 1)",
                    fn, tag, ub);
    return CC_COLL_OK;
}

// dtype, count against the largest message, and the buffer.
cc_coll_status_t check_elements(const char *fn, const void *buf, std::size_t count, int d)
{
    if (!dtype_valid(d))
        return fail(CC_COLL_ERR_INVALID_DTYPE, "%s: dtype = %d is not a cc_coll_dtype_t value (F32, F64, F16, BF16)",
                    fn, d);
    const auto dtype = static_cast<cc_coll_dtype_t>(d);
    const std::size_t max = p2p_max_count(dtype);
    if (count > max)
        return fail(CC_COLL_ERR_COUNT_OVERFLOW,
                    "%s: count = %zu exceeds the %zu %s elements one message can carry (MPI's int count of bytes, "
                    "header included)",
                    fn, count, max, dtype_name(dtype));
    if (count > 0 && buf == nullptr)
        return fail(CC_COLL_ERR_NULL_BUFFER, "%s: buf is NULL with count = %zu", fn, count);
    return CC_COLL_OK;
}

// The preamble of send and receive: the call's params, the buffer's
// elements, the peer and the tag.
cc_coll_status_t begin_p2p(const char *fn, cc_coll_comm_h comm, const cc_coll_params_t *params, const void *buf,
                           std::size_t count, int dtype, const char *peer_name, int peer, int tag,
                           std::shared_ptr<Comm> *c, CallParams *p)
{
    cc_coll_status_t st = begin_call(fn, comm, params, c, p);
    if (st == CC_COLL_OK) st = select_method(**c, CallKind::PointToPoint, {}, p);
    if (st != CC_COLL_OK || (st = check_elements(fn, buf, count, dtype)) != CC_COLL_OK ||
        (st = check_peer(fn, peer_name, peer, **c)) != CC_COLL_OK)
        return st;
    return check_tag(fn, tag, **c);
}

}  // namespace

extern "C" {

cc_coll_status_t cc_coll_send(const void *buf, size_t count, cc_coll_dtype_t dtype, int dest, int tag, int compress,
                              const cc_coll_params_t *params, cc_coll_comm_h comm, void *stream)
{
    return guarded("cc_coll_send", [&] {
        CallTimer timer;
        const char *fn = "cc_coll_send";
        std::shared_ptr<Comm> c;
        CallParams p;
        cc_coll_status_t st = begin_p2p(fn, comm, params, buf, count, enum_value(dtype), "dest", dest, tag, &c, &p);
        timer.attach(c);
        if (st != CC_COLL_OK) return st;
        if (compress != 0 && compress != 1)
            return fail(CC_COLL_ERR_INVALID_ARG, "%s: compress = %d must be 0 (uncompressed) or 1 (params' method)",
                        fn, compress);
        bool on_device = false;
        if ((st = locate_buffers(fn, buf, nullptr, count, stream, &on_device)) != CC_COLL_OK) return st;
        SendArgs args{buf, count, dtype, dest, tag, compress == 1};
        args.on_device = on_device;
        args.stream = stream;
        return p2p_send(*c, args, p);
    });
}

cc_coll_status_t cc_coll_recv(void *buf, size_t count, cc_coll_dtype_t dtype, int source, int tag,
                              const cc_coll_params_t *params, cc_coll_comm_h comm, void *stream)
{
    return guarded("cc_coll_recv", [&] {
        CallTimer timer;
        const char *fn = "cc_coll_recv";
        std::shared_ptr<Comm> c;
        CallParams p;
        cc_coll_status_t st = begin_p2p(fn, comm, params, buf, count, enum_value(dtype), "source", source, tag, &c, &p);
        timer.attach(c);
        bool on_device = false;
        if (st != CC_COLL_OK || (st = locate_buffers(fn, nullptr, buf, count, stream, &on_device)) != CC_COLL_OK)
            return st;
        RecvArgs args{buf, count, dtype, source, tag};
        args.on_device = on_device;
        args.stream = stream;
        return p2p_recv(*c, args, p);
    });
}

cc_coll_status_t cc_coll_p2p_tag_ub(cc_coll_comm_h comm, int *tag_ub)
{
    return guarded("cc_coll_p2p_tag_ub", [&] {
        std::shared_ptr<Comm> c;
        cc_coll_status_t st = lookup("cc_coll_p2p_tag_ub", comm, &c);
        if (st != CC_COLL_OK || (st = check_mpi_alive("cc_coll_p2p_tag_ub")) != CC_COLL_OK) return st;
        if (tag_ub == nullptr) return fail(CC_COLL_ERR_INVALID_ARG, "cc_coll_p2p_tag_ub: tag_ub is NULL");
        *tag_ub = p2p_tag_ub(*c);
        return CC_COLL_OK;
    });
}

cc_coll_status_t cc_coll_lep_get_residual(cc_coll_comm_h comm, int dest, int tag, const cc_coll_params_t *params,
                                          size_t count, cc_coll_dtype_t dtype, double *out)
{
    return guarded("cc_coll_lep_get_residual", [&] {
        const char *fn = "cc_coll_lep_get_residual";
        std::shared_ptr<Comm> c;
        CallParams p;
        cc_coll_status_t st = begin_call(fn, comm, params, &c, &p);
        if (st != CC_COLL_OK || (st = check_peer(fn, "dest", dest, *c)) != CC_COLL_OK ||
            (st = check_tag(fn, tag, *c)) != CC_COLL_OK)
            return st;
        const int d = enum_value(dtype);
        if (!dtype_valid(d)) return fail(CC_COLL_ERR_INVALID_DTYPE, "%s: dtype = %d is not a cc_coll_dtype_t value", fn, d);
        // No message carries more (check_elements), so no channel has a
        // larger residual: refuse before writing count elements of out.
        const std::size_t max = p2p_max_count(dtype);
        if (count > max)
            return fail(CC_COLL_ERR_COUNT_OVERFLOW,
                        "%s: count = %zu exceeds the %zu %s elements one message can carry", fn, count, max,
                        dtype_name(dtype));
        if (out == nullptr && count > 0)
            return fail(CC_COLL_ERR_NULL_BUFFER, "%s: out is NULL with count = %zu", fn, count);
        std::lock_guard<std::mutex> lock(c->p2p_mutex());
        const Residual *r = c->lep().find(p2p_channel(dest, tag, p));
        if (r == nullptr) {
            std::fill(out, out + count, 0.0);
            return CC_COLL_OK;
        }
        if (r->count != count || r->dtype != dtype)
            return fail(CC_COLL_ERR_MISMATCH, "%s: the channel's residual holds %zu %s elements, not %zu %s", fn,
                        r->count, dtype_name(r->dtype), count, dtype_name(dtype));
        return residual_to_host(*r, out, fn);
    });
}

cc_coll_status_t cc_coll_lep_reset(cc_coll_comm_h comm, int dest, int tag, const cc_coll_params_t *params)
{
    return guarded("cc_coll_lep_reset", [&] {
        const char *fn = "cc_coll_lep_reset";
        std::shared_ptr<Comm> c;
        CallParams p;
        cc_coll_status_t st = begin_call(fn, comm, params, &c, &p);
        if (st != CC_COLL_OK || (st = check_peer(fn, "dest", dest, *c)) != CC_COLL_OK ||
            (st = check_tag(fn, tag, *c)) != CC_COLL_OK)
            return st;
        const EfKey key = p2p_channel(dest, tag, p);
        std::lock_guard<std::mutex> lock(c->p2p_mutex());
        c->lep().reset(key);
        reset_method_states(*c, &key);
        return CC_COLL_OK;
    });
}

}  // extern "C"
