// Agreement: the first exchange of every collective call (allreduce,
// grouped allreduce, reduce-scatter) on a communicator of two or more ranks.
//
// Every rank describes its call in a fixed-size signature (CallSignature:
// one 64-bit word per field below) and the ranks take the element-wise
// maximum of {v, ~v} in one MPI_Allreduce of 2 x kFields words, so every
// rank learns the minimum and the maximum of every field. A field whose
// minimum and maximum differ is a disagreement: every rank returns
// CC_COLL_ERR_MISMATCH naming the fields, before any exchange whose size
// depends on them. The exchange has the same size and type on every rank,
// whatever the call, so the check itself cannot overflow or hang, and
// because it is the first MPI call of every collective, ranks that call
// different collectives (or the same collective with different methods) meet
// in it too.
//
// A rank that fails locally after the call was validated (a group plan it
// cannot make, a residual it cannot create, a collective its method lacks)
// still takes part, with its `ready` field 0: it returns its own error, the
// others CC_COLL_ERR_MISMATCH saying that another rank could not run the
// call. The cost and the wire format: docs/wire.md, "Agreement".
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "cc_coll.h"
#include "core/comm.hpp"
#include "core/params.hpp"

namespace cc_coll::detail {

struct Method;

// The collective a call runs. Values are part of the agreement's wire
// format (docs/wire.md).
enum class Collective : std::uint64_t {
    Allreduce = 1,
    AllreduceGroup = 2,
    ReduceScatter = 3,
    AutoCheck = 4,  // AUTO's check of its cost model (methods/auto/online.hpp)
};

struct CallSignature {
    // Field order is the wire order; kFields words travel twice (v, ~v).
    enum Field : int {
        kVersion,     // the agreement format (kAgreementVersion)
        kCollective,  // Collective
        kMethod,      // method id; a group: a hash of its tensors' methods
        kCount,       // elements (reduce-scatter: recvcount); a group: tensors
        kDtype,       // cc_coll_dtype_t; a group: a hash of its dtypes
        kOp,          // cc_coll_op_t
        kMemory,      // 0 host, 1 device
        kParameters,  // hash of the method's exchange-shaping params
        kLayout,      // a group: hash of counts, routes and method layouts
        kReady,       // 1, or 0 when this rank failed locally
        kFields
    };
    std::uint64_t v[kFields] = {};

    // A single-tensor call of `m` (allreduce or reduce-scatter).
    static CallSignature single(Collective c, const Method &m, std::size_t count, cc_coll_dtype_t dtype,
                                cc_coll_op_t op, bool on_device, const CallParams &p);
    // A group's header; fold its tensors in with add_tensor().
    static CallSignature group(Collective c, std::size_t ntensors, cc_coll_op_t op, bool on_device);
    void add_tensor(const Method *m, std::size_t count, cc_coll_dtype_t dtype, const CallParams &p,
                    std::uint64_t route, const std::uint64_t *layout, std::size_t layout_words);
};

// 2: the lossy algorithms end with the outcome exchange (outcome.hpp).
constexpr std::uint64_t kAgreementVersion = 2;

// One 64-bit mixing step for signature hashes.
std::uint64_t signature_mix(std::uint64_t h, std::uint64_t v);

// A method's signature with CC_COLL_PIPELINE_BYTES folded in when set (the
// methods that cut calls into parts; unset, the signature of earlier
// releases).
inline std::uint64_t mix_pipeline_bytes(std::uint64_t h, const CallParams &p)
{
    return p.pipeline_bytes != 0 ? signature_mix(h, 0x7069706eull ^ p.pipeline_bytes) : h;
}

// A double's bits, for hashing params.
inline std::uint64_t double_bits(double d)
{
    std::uint64_t u;
    std::memcpy(&u, &d, sizeof u);
    return u;
}

// The agreement exchange. `local` is this rank's own status so far (its
// message in cc_coll_last_error()): a failure takes part as not ready and is
// returned as it was. Otherwise CC_COLL_ERR_MISMATCH when the ranks
// disagree, with a message naming the fields; CC_COLL_OK when they agree. A
// communicator of one rank exchanges nothing.
cc_coll_status_t agree(Comm &comm, const char *fn, CallSignature sig, cc_coll_status_t local);

// Whether the call can acquire its tensor's residual (docs/api.md, error
// feedback): CC_COLL_ERR_MISMATCH when an explicit key holds a residual of
// another count, dtype or memory kind; CC_COLL_ERR_EF_LIMIT when `create`
// and a new residual would pass the cap. Local; creates nothing. Run before
// agree() so that the failure reaches the other ranks.
cc_coll_status_t residual_preflight(Comm &comm, const CallParams &p, const void *key_buf, std::size_t count,
                                    cc_coll_dtype_t dtype, bool on_device, bool create);

}  // namespace cc_coll::detail
