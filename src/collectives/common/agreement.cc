#include "collectives/common/agreement.hpp"

#include <string>

#include "core/dtype.hpp"
#include "core/ef_store.hpp"
#include "core/error.hpp"
#include "core/method.hpp"
#include "transport/mpi_transport.hpp"

namespace cc_coll::detail {

namespace {

using F = CallSignature::Field;

const char *collective_name(std::uint64_t c)
{
    switch (c) {
    case static_cast<std::uint64_t>(Collective::Allreduce): return "cc_coll_allreduce";
    case static_cast<std::uint64_t>(Collective::AllreduceGroup): return "cc_coll_allreduce_group";
    case static_cast<std::uint64_t>(Collective::ReduceScatter): return "cc_coll_reduce_scatter";
    case static_cast<std::uint64_t>(Collective::AutoCheck): return "AUTO's check of its cost model";
    default: return "an unknown collective";
    }
}

const char *field_name(int f, bool group)
{
    switch (f) {
    case F::kVersion: return "the agreement format (library versions differ)";
    case F::kCollective: return "the collective";
    case F::kMethod: return group ? "the tensors' methods" : "the method";
    case F::kCount: return group ? "the number of tensors" : "the count";
    case F::kDtype: return group ? "the tensors' dtypes" : "the dtype";
    case F::kOp: return "the op";
    case F::kMemory: return "the buffers' memory kind";
    case F::kParameters: return group ? "the tensors' method parameters" : "the method's parameters";
    case F::kLayout: return "the tensors' counts, routes or LOWRANK shapes, ranks and call counts";
    default: return "?";
    }
}

// "(f16 on some ranks, bf16 on others)" for the fields whose values mean
// something on their own; empty for hashes.
std::string values(int f, bool group, std::uint64_t lo, std::uint64_t hi)
{
    char buf[160];
    auto pair = [&](const char *a, const char *b) {
        std::snprintf(buf, sizeof buf, " (%s on some ranks, %s on others)", a, b);
        return std::string(buf);
    };
    switch (f) {
    case F::kVersion:
    case F::kCount:
        std::snprintf(buf, sizeof buf, " (from %llu to %llu)", static_cast<unsigned long long>(lo),
                      static_cast<unsigned long long>(hi));
        return buf;
    case F::kCollective: return pair(collective_name(lo), collective_name(hi));
    case F::kMethod: {
        if (group) return std::string();
        const Method *a = find_method(static_cast<int>(lo)), *b = find_method(static_cast<int>(hi));
        return pair(a ? a->name : "?", b ? b->name : "?");
    }
    case F::kDtype:
        if (group) return std::string();
        return pair(dtype_name(static_cast<cc_coll_dtype_t>(lo)), dtype_name(static_cast<cc_coll_dtype_t>(hi)));
    case F::kOp: return pair(lo == CC_COLL_SUM ? "sum" : "avg", hi == CC_COLL_SUM ? "sum" : "avg");
    case F::kMemory: return pair(lo ? "device" : "host", hi ? "device" : "host");
    default: return std::string();
    }
}

}  // namespace

std::uint64_t signature_mix(std::uint64_t h, std::uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdull;
}

CallSignature CallSignature::single(Collective c, const Method &m, std::size_t count, cc_coll_dtype_t dtype,
                                    cc_coll_op_t op, bool on_device, const CallParams &p)
{
    CallSignature s;
    s.v[kVersion] = kAgreementVersion;
    s.v[kCollective] = static_cast<std::uint64_t>(c);
    s.v[kMethod] = static_cast<std::uint64_t>(m.id);
    s.v[kCount] = count;
    s.v[kDtype] = static_cast<std::uint64_t>(dtype);
    s.v[kOp] = static_cast<std::uint64_t>(op);
    s.v[kMemory] = on_device ? 1 : 0;
    s.v[kParameters] = m.agreement_params != nullptr ? m.agreement_params(p) : 0;
    s.v[kReady] = 1;
    return s;
}

CallSignature CallSignature::group(Collective c, std::size_t ntensors, cc_coll_op_t op, bool on_device)
{
    CallSignature s;
    s.v[kVersion] = kAgreementVersion;
    s.v[kCollective] = static_cast<std::uint64_t>(c);
    s.v[kCount] = ntensors;
    s.v[kOp] = static_cast<std::uint64_t>(op);
    s.v[kMemory] = on_device ? 1 : 0;
    s.v[kReady] = 1;
    return s;
}

void CallSignature::add_tensor(const Method *m, std::size_t count, cc_coll_dtype_t dtype, const CallParams &p,
                               std::uint64_t route, const std::uint64_t *layout, std::size_t layout_words)
{
    v[kMethod] = signature_mix(v[kMethod], static_cast<std::uint64_t>(p.method));
    v[kDtype] = signature_mix(v[kDtype], static_cast<std::uint64_t>(dtype));
    v[kParameters] =
        signature_mix(v[kParameters], m != nullptr && m->agreement_params != nullptr ? m->agreement_params(p) : 0);
    v[kLayout] = signature_mix(v[kLayout], count);
    v[kLayout] = signature_mix(v[kLayout], route);
    for (std::size_t i = 0; i < layout_words; ++i) v[kLayout] = signature_mix(v[kLayout], layout[i]);
}

cc_coll_status_t agree(Comm &comm, const char *fn, CallSignature sig, cc_coll_status_t local)
{
    if (comm.size() < 2) return local;
    // A local failure keeps its message for the return below.
    const std::string local_error = local == CC_COLL_OK ? std::string() : std::string(last_error());
    if (local != CC_COLL_OK) sig.v[F::kReady] = 0;
    constexpr int n = F::kFields;
    std::uint64_t words[2 * n];
    for (int i = 0; i < n; ++i) {
        words[i] = sig.v[i];
        words[n + i] = ~sig.v[i];
    }
    const cc_coll_status_t st = allreduce_max_u64(words, comm.mpi(), 2 * n);
    if (local != CC_COLL_OK) return fail(local, "%s", local_error.c_str());
    if (st != CC_COLL_OK) return st;
    std::uint64_t lo[n], hi[n];
    bool differ[n];
    for (int i = 0; i < n; ++i) {
        hi[i] = words[i];
        lo[i] = ~words[n + i];
        differ[i] = lo[i] != hi[i];
    }
    const bool group = hi[F::kCollective] == static_cast<std::uint64_t>(Collective::AllreduceGroup);
    // The root cause first: a different format or collective makes every
    // other field incomparable, and a rank that failed locally may have left
    // its other fields unfilled.
    if (differ[F::kVersion] || differ[F::kCollective]) {
        const int f = differ[F::kVersion] ? F::kVersion : F::kCollective;
        return fail(CC_COLL_ERR_MISMATCH, "%s: the ranks disagree on %s%s; every rank must make the same collective "
                    "call on a communicator, in the same order", fn, field_name(f, false),
                    values(f, false, lo[f], hi[f]).c_str());
    }
    if (differ[F::kReady])
        return fail(CC_COLL_ERR_MISMATCH, "%s: the ranks disagree on whether the call can run: another rank could not run it (its own error says "
                    "why); no rank exchanged any data", fn);
    std::string what;
    for (int f = F::kMethod; f < F::kReady; ++f) {
        if (!differ[f]) continue;
        // Different methods have different params and layouts anyway.
        if (!group && differ[F::kMethod] && (f == F::kParameters || f == F::kLayout)) continue;
        if (!what.empty()) what += ", ";
        what += field_name(f, group);
        what += values(f, group, lo[f], hi[f]);
    }
    if (!what.empty())
        return fail(CC_COLL_ERR_MISMATCH, "%s: the ranks disagree on %s; every rank must pass the same arguments "
                    "and params (see docs/api.md, \"Agreement\")", fn, what.c_str());
    return CC_COLL_OK;
}

cc_coll_status_t residual_preflight(Comm &comm, const CallParams &p, const void *key_buf, std::size_t count,
                                    cc_coll_dtype_t dtype, bool on_device, bool create)
{
    if (!p.ef || count == 0) return CC_COLL_OK;
    const EfKey key = EfKey::from(p.has_ef_key, p.ef_key, key_buf, count, dtype);
    Residual *r = nullptr;
    const cc_coll_status_t st = comm.ef().find_matching(key, count, dtype, &r, on_device);
    if (st != CC_COLL_OK || r != nullptr || !create) return st;
    return comm.ef().check_room(count, dtype);
}

}  // namespace cc_coll::detail
