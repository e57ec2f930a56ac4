/*
 * A corrupting MPI interposer for the fault-injection driver
 * (fault_driver.c). corrupt.c defines the MPI functions through which
 * libcc_coll receives data (MPI's profiling interface: the library's call
 * lands there and goes on to PMPI_...), and edits the bytes that one chosen
 * rank received from the OTHER ranks, as a faulty network, NIC or peer
 * would: bit flips, 4-byte words set to 0, -1, INT_MAX, INT_MIN or a random
 * value, runs of random bytes, and floats set to NaN, infinity or a huge
 * value; near the start of a block (headers) with some probability, at a
 * random offset otherwise.
 *
 * Only calls whose received part (the bytes that came from other ranks; for
 * reductions, the whole result) is larger than FAULT_MIN_BYTES are touched:
 * the library's small control exchanges (its 160-byte agreement, verdicts
 * and counts) are the trust anchor a receiver needs to tell the others what
 * it found, and stay intact; so do the point-to-point acknowledgements
 * (odd MPI tags). Calls on one-rank communicators receive nothing
 * from another rank and are never touched.
 *
 * Interposed: MPI_Allgather(v), MPI_Alltoall(v), MPI_Allreduce,
 * MPI_Reduce_scatter(_block), MPI_Bcast (non-roots), MPI_Reduce (the root),
 * MPI_Recv, MPI_Mrecv, MPI_Sendrecv, and the non-blocking forms
 * MPI_Iallgather(v), MPI_Ialltoall(v), MPI_Iallreduce,
 * MPI_Ireduce_scatter(_block), MPI_Ibcast, MPI_Ireduce, MPI_Irecv,
 * MPI_Imrecv: a non-blocking call's receive buffer is remembered with its
 * request and edited when MPI_Wait, MPI_Waitall, MPI_Waitany,
 * MPI_Waitsome, MPI_Test, MPI_Testall, MPI_Testany, MPI_Testsome or
 * MPI_Request_get_status reports the request complete.
 *
 * Thread-safe (one lock), so a library progress thread may make the calls.
 */
#ifndef CC_COLL_MPI_TESTS_FAULT_CORRUPT_H
#define CC_COLL_MPI_TESTS_FAULT_CORRUPT_H

#include <stddef.h>
#include <stdint.h>

/* Received parts of at most this many bytes are never edited. */
#define FAULT_MIN_BYTES 160

/* Call after MPI_Init. `corrupt_rank` is the rank in MPI_COMM_WORLD whose
 * received bytes are edited (every other rank only counts eligible calls);
 * `probability` is the chance that an eligible call is edited; `seed` seeds
 * the editing, with a different stream on every rank. */
void fault_setup(uint64_t seed, double probability, int corrupt_rank);

/* Editing happens only while enabled (initially off). */
void fault_enable(int on);

/* MPI calls of this rank whose received bytes were edited, and calls that
 * were eligible (received part above FAULT_MIN_BYTES, on a communicator of
 * two or more ranks), since fault_setup. */
unsigned long long fault_corrupted_calls(void);
unsigned long long fault_eligible_calls(void);

/* Copies the descriptions of the edits made since the last call ("MPI_Allgather:
 * word at byte 16 of the 412 bytes from rank 0 set to 0xffffffff; ...") into
 * out (cap bytes, NUL-terminated; "" when none) and forgets them. Returns the
 * number of edits described. */
int fault_take_log(char *out, size_t cap);

#endif
