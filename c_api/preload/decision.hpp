// The decision whether an intercepted call is compressed, shared by
// MPI_Allreduce (allreduce.cc) and MPI_Iallreduce (iallreduce.cc), and
// the pieces of a compressed call both use (decision.cc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include <mpi.h>

#include "cc_coll.h"
#include "state.hpp"

namespace cc_coll_preload {

// What the shim knows of a call's residual under CC_COLL_EF_MAX_BYTES.
struct EfCheck {
    std::uint64_t held = UINT64_MAX;  // this rank's residual bytes before the call; UINT64_MAX: no new residual
    bool estimated = false;           // held is the shim's bound (held_bytes)
};

// A call that passed stage 1 and has its entry, with this rank's stage 2.
struct Candidate {
    Entry *e = nullptr;
    const void *src = nullptr;  // sendbuf, or recvbuf for MPI_IN_PLACE
    std::size_t n = 0;
    cc_coll_dtype_t dtype = CC_COLL_F32;
    std::uint64_t bytes = 0;
    int local = 0;           // kBitTargeting, kBitRepeats on this rank
    bool targeting = false;  // CC_COLL_ALLOW or CC_COLL_DENY set
    std::string name;        // the communicator's name when targeting
};

// The decision up to the agreement: stage 1, the communicator's entry, and
// this rank's stage 2. False: the call passes through to MPI unchanged.
bool consider(const void *send, void *recv, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm, const void *ret,
              Candidate *c);
// Whether a call's second-stage conditions can differ between ranks.
bool needs_agreement(const State &s);
// This rank's conditions the library would detect before communicating.
int local_bits(Entry &e, const void *src, void *recv, std::size_t count, cc_coll_dtype_t dtype, EfCheck *ef,
               bool reserve, bool *reserved);
// `bits` and local_bits', agreed on (MPI_BOR) over the entry's duplicate.
int preflight(Entry &e, const void *src, void *recv, std::size_t count, cc_coll_dtype_t dtype, int bits,
              EfCheck *ef);
// The verdict on agreed bits: true to compress.
bool agreed_to_compress(const Entry &e, int bits);
// After a compressed call that could create a residual: remembers its key.
void note_residual(Entry *e, void *recv, std::size_t count, cc_coll_dtype_t dtype, const EfCheck &ef);
// Whether libcc_coll's status is one every rank sees together.
bool failed_together(cc_coll_status_t st);
// After CC_COLL_ERR_MISMATCH on a method with per-tensor state: drops the
// call's key on this rank (every rank does); true to run the call again.
bool dropped_disagreeing_state(const Entry &e, const cc_coll_params_t &p, const void *recv, std::size_t n,
                               cc_coll_dtype_t dtype, cc_coll_status_t st);
// The parameters of every compressed call, from the settings.
cc_coll_params_t compress_params();
// Counts a compressed call that completed; `prediction`: AUTO's cost model
// on the call (blocking calls, whose `seconds` are measured; nullptr for
// MPI_Iallreduce).
void count_compressed(const void *ret, std::size_t n, cc_coll_dtype_t dtype, std::uint64_t bytes,
                      const std::string &comm, double seconds, bool nonblocking, const Prediction *prediction);
// The parameters of the shim's predictions (cc_coll_auto_predict): the
// settings' density, the near-square matrix view.
cc_coll_params_t prediction_params();
// AUTO's cost model on a call of `n` x `dtype` on the entry's communicator,
// cached; not known where the entry has no model (Entry::model).
Prediction predict_for(Entry &e, std::size_t n, cc_coll_dtype_t dtype);
// Advice mode (CC_COLL_ADVISE): counts a call that would be compressed.
void count_advice(const void *ret, const Candidate &c, MPI_Comm comm);
// Prints `message` once per process and status, from rank 0 of the communicator.
void report_once(int key, int comm_rank, const char *message, const char *detail);
// The object, offset and symbol of a return address (dladdr), cached.
PreloadCallSite site_for(const void *ret);
// MPI_Comm_get_name, "" when it fails.
std::string comm_name(MPI_Comm comm);
// "MPI_ERR_NO_MEM" or "MPI_ERR_OTHER".
const char *mpi_error_name(int err);
// Reports a failure seen on this rank only and hands `err` to the
// communicator's error handler; returns `err`.
int local_failure(const char *fn, MPI_Comm comm, int err, const char *what, const char *detail);

}  // namespace cc_coll_preload
