// Checkpoints of a communicator's compression state (cc_coll_state_export,
// cc_coll_state_import) in the byte format of wire/state_codec.hpp
// (docs/wire.md, "State checkpoint"). Export writes the blob's header, the
// residual sections (the error-feedback stores are core's), each method's
// own section through its descriptor (core/method.hpp: state_export) and,
// on a hierarchical communicator, its rail's blob nested whole. Import
// checks the whole blob (every method's section through state_parse), then
// the caps, and only then replaces the state (state_install): all or
// nothing.
#pragma once

#include <cstddef>

#include "cc_coll.h"

namespace cc_coll::detail {

class Comm;

// cc_coll_state_export: the blob's size in *size; with `buf` (of *size
// bytes at least) also the blob. The caller holds Comm::collective_mutex
// and Comm::p2p_mutex.
cc_coll_status_t export_state(Comm &comm, void *buf, std::size_t *size, bool *too_small, const char *fn);
// cc_coll_state_import: checks the whole blob, then replaces every residual,
// LEP residual and method state of `comm` with the blob's; on any error
// nothing has changed. The caller holds both locks.
cc_coll_status_t import_state(Comm &comm, const void *buf, std::size_t size, const char *fn);

}  // namespace cc_coll::detail
