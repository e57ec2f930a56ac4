#include "dispatch/residuals.hpp"

#include "collectives/allreduce/allreduce.hpp"
#include "core/comm.hpp"
#include "core/dtype.hpp"
#include "core/error.hpp"
#include "core/method.hpp"
#include "core/topology.hpp"

namespace cc_coll::detail {

namespace {

// On a hierarchical communicator (core/topology.hpp) the residual of a host
// tensor is its shard's, kept by this rank's rail under the shard's own key:
// the rail, that key and the shard, or nullptr when there is no topology or
// this rank owns no shard of the tensor.
Comm *shard_residual(Comm &c, const CallParams &p, const void *recvbuf, std::size_t count, cc_coll_dtype_t dtype,
                     EfKey *key, HierarchicalShard *shard)
{
    const NodeTopology *t = c.topology();
    if (t == nullptr || t->rail == nullptr || count == 0) return nullptr;
    if (!hierarchical_shard(*t, count, dtype, p, t->node_rank, shard) || shard->count == 0) return nullptr;
    const char *base = static_cast<const char *>(recvbuf);
    *key = EfKey::from(p.has_ef_key, p.ef_key, base == nullptr ? nullptr : base + shard->offset * dtype_size(dtype),
                       shard->count, dtype);
    return t->rail.get();
}

}  // namespace

cc_coll_status_t read_residual(Comm &c, const CallParams &p, const EfKey &key, const void *recvbuf,
                               std::size_t count, cc_coll_dtype_t dtype, double *out, const char *fn)
{
    const Residual *r = c.ef().find(key);
    if (r == nullptr) {
        for (std::size_t i = 0; i < count; ++i) out[i] = 0.0;
        // A hierarchical tensor: its shard's residual, zero elsewhere.
        EfKey skey;
        HierarchicalShard shard;
        Comm *rail = shard_residual(c, p, recvbuf, count, dtype, &skey, &shard);
        const Residual *sr = rail != nullptr ? rail->ef().find(skey) : nullptr;
        if (sr == nullptr) return CC_COLL_OK;
        if (sr->count != shard.count || sr->dtype != dtype)
            return fail(CC_COLL_ERR_MISMATCH, "%s: the residual holds %zu %s elements, not %zu %s", fn, sr->count,
                        dtype_name(sr->dtype), shard.count, dtype_name(dtype));
        return residual_to_host(*sr, out + shard.offset, fn);
    }
    if (r->count != count || r->dtype != dtype)
        return fail(CC_COLL_ERR_MISMATCH, "%s: the residual holds %zu %s elements, not %zu %s", fn, r->count,
                    dtype_name(r->dtype), count, dtype_name(dtype));
    return residual_to_host(*r, out, fn);
}

void reset_residual(Comm &c, const CallParams &p, const EfKey &key, const void *recvbuf, std::size_t count,
                    cc_coll_dtype_t dtype)
{
    c.ef().reset(key);
    reset_method_states(c, &key);
    EfKey skey;
    HierarchicalShard shard;
    if (Comm *rail = shard_residual(c, p, recvbuf, count, dtype, &skey, &shard)) {
        rail->ef().reset(skey);
        reset_method_states(*rail, &skey);
    }
}

void reset_all_residuals(Comm &c)
{
    c.ef().reset_all();
    c.lep().reset_all();
    reset_method_states(c, nullptr);
    if (const NodeTopology *t = c.topology(); t != nullptr && t->rail != nullptr) {
        t->rail->ef().reset_all();
        reset_method_states(*t->rail, nullptr);
    }
}

}  // namespace cc_coll::detail
