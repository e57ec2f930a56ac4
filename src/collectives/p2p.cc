#include "collectives/p2p.hpp"

#include "core/error.hpp"

namespace cc_coll::detail {

int p2p_tag_ub(Comm &) { return 0; }

cc_coll_status_t p2p_send(Comm &, const SendArgs &, const CallParams &)
{
    return fail(CC_COLL_ERR_NOT_SUPPORTED, "cc_coll_send: not implemented yet");
}

cc_coll_status_t p2p_recv(Comm &, const RecvArgs &, const CallParams &)
{
    return fail(CC_COLL_ERR_NOT_SUPPORTED, "cc_coll_recv: not implemented yet");
}

}  // namespace cc_coll::detail
