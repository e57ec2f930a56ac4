/*
 * Hostile collective payloads with real ranks (run with 2 or more ranks):
 * this program interposes the MPI calls that carry the TOPK and SKETCH
 * payloads (MPI's profiling interface: the library's call lands here, goes
 * on to PMPI_..., and the bytes received are then edited as if a peer had
 * sent them), so the receivers' checks (docs/wire.md, "What a TOPK receiver
 * checks", "What a SKETCH receiver checks") meet malformed bytes exactly
 * where they would arrive.
 *
 * Cases (every rank calls the collective; the edit is the same on every
 * rank where the real exchange gives every rank the same bytes):
 *   topk_index        allreduce TOPK, rank 1's last index = count
 *   topk_repeat       allreduce TOPK, rank 1's index 2 = its index 1
 *   topk_flags        allreduce TOPK, rank 1's flags = 0x4
 *   topk_rs_index     reduce-scatter TOPK, the payload from rank 1 carries
 *                     index 0xffffffff (every rank's copy)
 *   topk_coded_first  allreduce TOPK, coded payloads (CC_COLL_TOPK_VALUE_BITS=4):
 *                     rank 1's first index = count
 *   topk_coded_stream the same, rank 1's index stream length one byte more
 *   topk_coded_format the same, rank 1's value bits say 8 instead of 4
 *   split_index       allreduce TOPK, split algorithm (CC_COLL_TOPK_ALGORITHM=
 *                     split): rank 1's region's first index = 0, outside it
 *   split_coded_region the same with coded payloads (4-bit values): rank 1's
 *                     region's first index = the region's size
 *   split_coded_owner the same, rank 0 alone finds the index stream of the
 *                     pairs rank 1 sent to its region one byte longer: every
 *                     rank learns of it from the kept counts' allgather
 *   sketch_flag       allreduce SKETCH with the bitmap support
 *                     (CC_COLL_SKETCH_SUPPORT=bitmap), the OR-ed flag byte = 2
 *   sketch_padding    the same, a bit past count in the OR-ed bitmap
 *   sketch_coded_first allreduce SKETCH with the coded support
 *                     (CC_COLL_SKETCH_SUPPORT=coded): rank 1's message's
 *                     first index = count
 *   sketch_rs_tail    reduce-scatter SKETCH, only rank 0's OR-ed shard
 *                     support gets flag byte 2: rank 0 rejects it, and every
 *                     other rank learns of it through the outcome exchange
 *   sketch_rs_rows    reduce-scatter SKETCH, the outcome exchange's
 *                     maximum of the rows per table gives 2^32 + 1
 * each: CC_COLL_ERR_MISMATCH on every rank with a message naming the
 * field (and the sending rank for TOPK), recvbuf untouched, and then a
 * well-formed call of the same kind succeeds on every rank (no rank is left
 * waiting or out of step).
 *
 * Any failure prints the case and calls MPI_Abort (exit status non-zero).
 *
 *   mpi_collective_forged [TEST...]   run all tests, or only the named ones
 */
#define _POSIX_C_SOURCE 200809L /* setenv, unsetenv */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "cc_coll.h"
#include "check.h"
#include "test_util.h"

/* ---- the edits ---------------------------------------------------------------- */

enum Forge {
    kNone,
    kTopkIndex,
    kTopkRepeat,
    kTopkFlags,
    kTopkRsIndex,
    kTopkCodedFirst,
    kTopkCodedStream,
    kTopkCodedFormat,
    kSplitIndex,
    kSplitCodedRegion,
    kSplitCodedOwner,
    kSketchFlag,
    kSketchCodedFirst,
    kSketchPadding,
    kSketchRsTail,
    kSketchRsRows,
};

static enum Forge g_forge = kNone;
static int g_edits = 0;       /* edits made in the current case */
static int g_seen_rs_bor = 0; /* a reduce-scatter of bitmaps went by in this case */

/* TOPK: payloads of `bytes` bytes, header n (8), k (4), flags (4), then k
 * indices (docs/wire.md, "The TOPK payload"). */
static uint32_t get_k(const unsigned char *payload)
{
    uint32_t k;
    memcpy(&k, payload + 8, 4);
    return k;
}

static void set_u32(unsigned char *at, uint32_t v) { memcpy(at, &v, 4); }

int MPI_Allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                  MPI_Datatype recvtype, MPI_Comm comm)
{
    const int rc = PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
    /* Shorter than a payload's header: the coded format's size exchange. */
    if (rc != MPI_SUCCESS || recvtype != MPI_BYTE || recvcount < 16) return rc;
    unsigned char *p = (unsigned char *)recvbuf + (size_t)recvcount; /* rank 1's payload */
    const uint32_t k = get_k(p);
    if (g_forge == kTopkIndex && k >= 1) {
        uint64_t n;
        memcpy(&n, p, 8);
        set_u32(p + 16 + 4 * (k - 1), (uint32_t)n);
        ++g_edits;
    } else if (g_forge == kTopkRepeat && k >= 3) {
        uint32_t i1;
        memcpy(&i1, p + 16 + 4, 4);
        set_u32(p + 16 + 8, i1);
        ++g_edits;
    } else if (g_forge == kTopkFlags) {
        set_u32(p + 12, 0x4u);
        ++g_edits;
    } else if (g_forge == kSketchCodedFirst && recvcount >= 24) {
        /* The coded SKETCH support (docs/wire.md): n at 0, the first index at 20. */
        uint64_t n;
        memcpy(&n, p, 8);
        set_u32(p + 20, (uint32_t)n);
        ++g_edits;
    } else if (recvcount > 8 && g_forge >= kTopkCodedFirst && g_forge <= kTopkCodedFormat) {
        /* Coded payloads (docs/wire.md, "The coded TOPK payload"): flags at
         * 12, the stream's bytes at 16, the first index at 20; the
         * allgather of 8-byte sizes before them is left alone. */
        uint32_t v;
        if (g_forge == kTopkCodedFirst) {
            uint64_t n;
            memcpy(&n, p, 8);
            set_u32(p + 20, (uint32_t)n);
        } else if (g_forge == kTopkCodedStream) {
            memcpy(&v, p + 16, 4);
            set_u32(p + 16, v + 1);
        } else {
            memcpy(&v, p + 12, 4);
            set_u32(p + 12, (v & ~0x6u) | 0x4u); /* value bits 2 (8-bit levels) */
        }
        ++g_edits;
    }
    return rc;
}

int MPI_Alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                 MPI_Datatype recvtype, MPI_Comm comm)
{
    const int rc = PMPI_Alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
    if (rc != MPI_SUCCESS || recvtype != MPI_BYTE || g_forge != kTopkRsIndex) return rc;
    unsigned char *p = (unsigned char *)recvbuf + (size_t)recvcount; /* from rank 1 */
    if (get_k(p) >= 1) {
        set_u32(p + 16, 0xffffffffu);
        ++g_edits;
    }
    return rc;
}

/* The split algorithm's regions, in place: rank 1's block at displs[1]
 * (uncoded: its indices first; coded: a coded payload of n = the region's
 * size). */
int MPI_Allgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int *recvcounts,
                   const int *displs, MPI_Datatype recvtype, MPI_Comm comm)
{
    const int rc = PMPI_Allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm);
    if (rc != MPI_SUCCESS || recvtype != MPI_BYTE) return rc;
    unsigned char *p = (unsigned char *)recvbuf + displs[1];
    if (g_forge == kSplitIndex && recvcounts[1] >= 8) {
        set_u32(p, 0);
        ++g_edits;
    } else if (g_forge == kSplitCodedRegion && recvcounts[1] >= 32) {
        uint64_t n;
        memcpy(&n, p, 8);
        set_u32(p + 20, (uint32_t)n);
        ++g_edits;
    }
    return rc;
}

/* The split algorithm's pairs to their owners: on rank 0 only, the coded
 * payload from rank 1 gets an index stream one byte longer. */
int MPI_Alltoallv(const void *sendbuf, const int *sendcounts, const int *sdispls, MPI_Datatype sendtype, void *recvbuf,
                  const int *recvcounts, const int *rdispls, MPI_Datatype recvtype, MPI_Comm comm)
{
    const int rc =
        PMPI_Alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm);
    if (rc != MPI_SUCCESS || recvtype != MPI_BYTE || g_forge != kSplitCodedOwner || g_rank != 0) return rc;
    if (recvcounts[1] >= 32) {
        unsigned char *p = (unsigned char *)recvbuf + rdispls[1];
        uint32_t v;
        memcpy(&v, p + 16, 4);
        set_u32(p + 16, v + 1);
        ++g_edits;
    }
    return rc;
}

int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm)
{
    const int rc = PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
    if (rc != MPI_SUCCESS) return rc;
    unsigned char *b = (unsigned char *)recvbuf;
    if (op == MPI_BOR && datatype == MPI_UINT8_T && count >= 2) {
        if (g_forge == kSketchFlag) {
            b[count - 1] = 2; /* the flag byte */
            ++g_edits;
        } else if (g_forge == kSketchPadding) {
            b[count - 2] |= 0x80; /* the bitmap's last byte: count % 8 != 0 here */
            ++g_edits;
        }
    } else if (op == MPI_MAX && datatype == MPI_UINT64_T && count == 4 && g_forge == kSketchRsRows && g_seen_rs_bor) {
        /* The outcome exchange after the supports: two fault words, then the
         * rows, then the non-finite flag (docs/wire.md, "Fault containment"). */
        const uint64_t m = (1ull << 32) + 1;
        memcpy((unsigned char *)recvbuf + 16, &m, 8);
        ++g_edits;
    }
    return rc;
}

int MPI_Reduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op op,
                             MPI_Comm comm)
{
    const int rc = PMPI_Reduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm);
    if (rc != MPI_SUCCESS || op != MPI_BOR || datatype != MPI_UINT8_T) return rc;
    g_seen_rs_bor = 1;
    if (g_forge == kSketchRsTail && g_rank == 0) {
        ((unsigned char *)recvbuf)[recvcount - 1] = 2; /* this rank's shard's flag byte */
        ++g_edits;
    }
    return rc;
}

/* ---- the cases ------------------------------------------------------------------ */

enum { kCount = 20003 }; /* elements per rank's buffer (allreduce) or shard (reduce-scatter); not a multiple of 8 */

/* Runs one collective with the edit armed: CC_COLL_ERR_MISMATCH naming
 * `words` (and, where given, `words2` on the other ranks), recvbuf untouched;
 * then the same collective unarmed succeeds. */
static void forged_case(cc_coll_comm_h h, enum Forge forge, int reduce_scatter, const cc_coll_params_t *p,
                        const char *words, const char *words_elsewhere)
{
    const size_t n = reduce_scatter ? (size_t)kCount * (size_t)g_size : (size_t)kCount;
    const size_t out_n = (size_t)kCount;
    float *x = (float *)xmalloc(n * sizeof(float));
    float *out = (float *)xmalloc(out_n * sizeof(float));
    uint64_t s = 1234 + (uint64_t)g_rank;
    for (size_t i = 0; i < n; ++i) x[i] = (float)(rng_uniform(&s) - 0.5);
    memset(out, 0xa5, out_n * sizeof(float));

    g_forge = forge;
    g_edits = 0;
    g_seen_rs_bor = 0;
    const cc_coll_status_t st = reduce_scatter
                                    ? cc_coll_reduce_scatter(x, out, kCount, CC_COLL_F32, CC_COLL_SUM, p, h, NULL)
                                    : cc_coll_allreduce(x, out, kCount, CC_COLL_F32, CC_COLL_SUM, p, h, NULL);
    g_forge = kNone;
    const char *expect = (words_elsewhere != NULL && g_rank != 0) ? words_elsewhere : words;
    if (st != CC_COLL_ERR_MISMATCH || strstr(cc_coll_last_error(), expect) == NULL) {
        fprintf(stderr, "[rank %d] edits %d; got %s (%s); expected CC_COLL_ERR_MISMATCH naming \"%s\"\n", g_rank,
                g_edits, cc_coll_status_string(st), cc_coll_last_error(), expect);
        CHECK(0, "a malformed payload is CC_COLL_ERR_MISMATCH naming the field");
    }
    const unsigned char *o = (const unsigned char *)out;
    for (size_t i = 0; i < out_n * sizeof(float); ++i) CHECK(o[i] == 0xa5, "a rejected payload left recvbuf untouched");

    /* The communicator is still in step: the same call, unedited. */
    const cc_coll_status_t again = reduce_scatter
                                       ? cc_coll_reduce_scatter(x, out, kCount, CC_COLL_F32, CC_COLL_SUM, p, h, NULL)
                                       : cc_coll_allreduce(x, out, kCount, CC_COLL_F32, CC_COLL_SUM, p, h, NULL);
    CHECK_CC(again);
    free(x);
    free(out);
}

static void test_topk_index(cc_coll_comm_h h)
{
    const cc_coll_params_t p = topk_params(0.01, 1);
    forged_case(h, kTopkIndex, 0, &p, "rank 1 sent index 20003 at position 200, not below count 20003", NULL);
}

static void test_topk_repeat(cc_coll_comm_h h)
{
    const cc_coll_params_t p = topk_params(0.01, 0);
    forged_case(h, kTopkRepeat, 0, &p, "at position 2 after index", NULL);
}

static void test_topk_flags(cc_coll_comm_h h)
{
    const cc_coll_params_t p = topk_params(0.01, 0);
    forged_case(h, kTopkFlags, 0, &p, "rank 1 sent flags 0x4", NULL);
}

static void test_topk_rs_index(cc_coll_comm_h h)
{
    const cc_coll_params_t p = topk_params(0.01, 1);
    forged_case(h, kTopkRsIndex, 1, &p, "rank 1 sent index 4294967295 at position 0, not below recvcount 20003", NULL);
}

/* A communicator whose TOPK sends coded payloads of 4-bit values. */
static cc_coll_comm_h coded_comm(void)
{
    CHECK(setenv("CC_COLL_TOPK_VALUE_BITS", "4", 1) == 0, "setenv");
    cc_coll_comm_h c = NULL;
    CHECK_CC(cc_coll_comm_create(MPI_COMM_WORLD, &c));
    unsetenv("CC_COLL_TOPK_VALUE_BITS");
    return c;
}

static void coded_case(enum Forge forge, const char *words)
{
    cc_coll_comm_h c = coded_comm();
    const cc_coll_params_t p = topk_params(0.01, 1);
    forged_case(c, forge, 0, &p, words, NULL);
    CHECK_CC(cc_coll_comm_destroy(c));
}

static void test_topk_coded_first(cc_coll_comm_h h)
{
    (void)h;
    coded_case(kTopkCodedFirst, "rank 1 sent index 20003 at position 0, not below count 20003");
}

static void test_topk_coded_stream(cc_coll_comm_h h)
{
    (void)h;
    coded_case(kTopkCodedStream, "rank 1 sent a coded payload whose index stream is");
}

static void test_topk_coded_format(cc_coll_comm_h h)
{
    (void)h;
    coded_case(kTopkCodedFormat, "CC_COLL_TOPK_VALUE_BITS");
}

/* A communicator whose TOPK runs the split algorithm, with 4-bit values
 * where `coded`. */
static cc_coll_comm_h split_comm(int coded)
{
    CHECK(setenv("CC_COLL_TOPK_ALGORITHM", "split", 1) == 0, "setenv");
    if (coded) CHECK(setenv("CC_COLL_TOPK_VALUE_BITS", "4", 1) == 0, "setenv");
    cc_coll_comm_h c = NULL;
    CHECK_CC(cc_coll_comm_create(MPI_COMM_WORLD, &c));
    unsetenv("CC_COLL_TOPK_ALGORITHM");
    unsetenv("CC_COLL_TOPK_VALUE_BITS");
    return c;
}

static void split_case(int coded, enum Forge forge, const char *words)
{
    cc_coll_comm_h c = split_comm(coded);
    const cc_coll_params_t p = topk_params(0.01, 1);
    forged_case(c, forge, 0, &p, words, NULL);
    CHECK_CC(cc_coll_comm_destroy(c));
}

static void test_split_index(cc_coll_comm_h h)
{
    (void)h;
    split_case(0, kSplitIndex, "rank 1 sent index 0 outside its region");
}

static void test_split_coded_region(cc_coll_comm_h h)
{
    (void)h;
    split_case(1, kSplitCodedRegion, "in its region's block, rank 1 sent index");
}

static void test_split_coded_owner(cc_coll_comm_h h)
{
    (void)h;
    split_case(1, kSplitCodedOwner, "rank 0 received malformed pairs from rank 1");
}

/* A SKETCH case on a communicator whose CC_COLL_SKETCH_SUPPORT is `support`. */
static void support_case(const char *support, enum Forge forge, int ef, const char *words)
{
    CHECK(setenv("CC_COLL_SKETCH_SUPPORT", support, 1) == 0, "setenv");
    cc_coll_comm_h c = NULL;
    CHECK_CC(cc_coll_comm_create(MPI_COMM_WORLD, &c));
    unsetenv("CC_COLL_SKETCH_SUPPORT");
    const cc_coll_params_t p = sketch_params(0.01, ef, 0.75);
    forged_case(c, forge, 0, &p, words, NULL);
    CHECK_CC(cc_coll_comm_destroy(c));
}

static void test_sketch_flag(cc_coll_comm_h h)
{
    (void)h;
    support_case("bitmap", kSketchFlag, 1, "flag byte 0x02, not 0 or 1");
}

static void test_sketch_padding(cc_coll_comm_h h)
{
    (void)h;
    support_case("bitmap", kSketchPadding, 0, "bits set at or beyond element 20003");
}

static void test_sketch_coded_first(cc_coll_comm_h h)
{
    (void)h;
    support_case("coded", kSketchCodedFirst, 1, "rank 1 sent support index 20003 at position 0, not below count 20003");
}

static void test_sketch_rs_tail(cc_coll_comm_h h)
{
    const cc_coll_params_t p = sketch_params(0.01, 1, 0.75);
    forged_case(h, kSketchRsTail, 1, &p, "flag byte 0x02, not 0 or 1",
                "rank 0 found a malformed SKETCH support in the bytes it received");
}

static void test_sketch_rs_rows(cc_coll_comm_h h)
{
    const cc_coll_params_t p = sketch_params(0.01, 0, 0.75);
    forged_case(h, kSketchRsRows, 1, &p, "rows per table of any rank is 4294967297, outside [1, 1398101]", NULL);
}

static const NamedTest kTests[] = {
    {"topk_index", test_topk_index},         {"topk_repeat", test_topk_repeat},
    {"topk_flags", test_topk_flags},         {"topk_rs_index", test_topk_rs_index},
    {"topk_coded_first", test_topk_coded_first}, {"topk_coded_stream", test_topk_coded_stream},
    {"topk_coded_format", test_topk_coded_format},
    {"split_index", test_split_index},       {"split_coded_region", test_split_coded_region},
    {"split_coded_owner", test_split_coded_owner},
    {"sketch_flag", test_sketch_flag},       {"sketch_padding", test_sketch_padding},
    {"sketch_coded_first", test_sketch_coded_first},
    {"sketch_rs_tail", test_sketch_rs_tail}, {"sketch_rs_rows", test_sketch_rs_rows},
};

int main(int argc, char **argv)
{
    return run_suite(argc, argv, "collective_forged", kTests, sizeof kTests / sizeof kTests[0], 2, NULL);
}
