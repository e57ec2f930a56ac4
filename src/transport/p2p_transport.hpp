// Point-to-point transport for cc_coll_send / cc_coll_recv: byte messages
// on a communicator, matched by (source, tag), received with a matched probe
// so that the receiver learns a message's size before taking it. Knows
// nothing of compression or of the message format.
#pragma once

#include <cstddef>
#include <vector>

#include <mpi.h>

#include "cc_coll.h"

namespace cc_coll::detail {

// The communicator's MPI_TAG_UB attribute (at least 32767 by the standard;
// 32767 when the attribute cannot be read).
int mpi_tag_ub(MPI_Comm comm);

// MPI_Send of `bytes` bytes (MPI_BYTE) to `dest` with `tag`; bytes must
// fit an int.
cc_coll_status_t send_bytes(const void *buf, std::size_t bytes, int dest, int tag, MPI_Comm comm);

// Receives the next message from `source` with `tag` into *out (resized to
// the message's size): MPI_Mprobe, MPI_Get_count on MPI_BYTE, MPI_Mrecv.
// *bytes is the message's size. A message longer than max_bytes (the most
// the receiver's own call can take) is received into scratch of the size
// MPI reports and dropped at once: *out is left empty (never resized past
// max_bytes), and the caller rejects it.
cc_coll_status_t recv_message(int source, int tag, MPI_Comm comm, std::size_t max_bytes,
                              std::vector<unsigned char> *out, std::size_t *bytes);

}  // namespace cc_coll::detail
