/*
 * Hostile point-to-point input with real ranks (run with 2 ranks): one rank
 * forges bytes with raw MPI where its peer runs cc_coll_recv or cc_coll_send.
 *
 * The library talks on its duplicate of MPI_COMM_WORLD; this program learns
 * that communicator by interposing MPI_Comm_dup (MPI's profiling interface:
 * the library's call lands here and goes on to PMPI_Comm_dup), so the forged
 * bytes travel exactly where a cc_coll_send's would: MPI tag 2 tag for a
 * message, 2 tag + 1 for the answer (docs/wire.md, "Point-to-point").
 *
 * Cases (rank 0 forges, rank 1 receives with cc_coll_recv):
 *   raw_ok          a well-formed uncompressed message: accepted, bit-exact
 *   lowrank_count0  a 48-byte LOWRANK header of count 0 to a LOWRANK
 *                   receiver of count 0 without a shape
 *   topk_short      TOPK with payload_bytes 8, below the payload header
 *   topk_range      TOPK with an index equal to count
 *   topk_order      TOPK with indices out of order
 *   oversized       a 48 + 1000-byte message to a receive of 4 f32 elements
 *                   (at most 48 + 16 bytes): dropped, never decoded, and
 *                   rejected
 * each malformed one: CC_COLL_ERR_MISMATCH naming the field on the receiver,
 * the buffer untouched, and the forger gets a 256-byte answer with status 1
 * and the same reason (so a sender would not hang).
 *   bad_ack         rank 0 runs cc_coll_send; rank 1 takes the message with
 *                   raw MPI and answers with 100 bytes, a wrong magic and
 *                   status 7: each is CC_COLL_ERR_MISMATCH ("malformed
 *                   answer") on the sender, not CC_COLL_ERR_INTERNAL.
 *
 * Any failure prints the case and calls MPI_Abort (exit status non-zero).
 *
 *   mpi_p2p_forged [TEST...]   run all tests, or only the named ones
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "cc_coll.h"
#include "check.h"
#include "test_util.h"

/* ---- the library's communicator ---------------------------------------------- */

static MPI_Comm g_dup = MPI_COMM_NULL; /* the last MPI_Comm_dup's result */

int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *newcomm)
{
    const int rc = PMPI_Comm_dup(comm, newcomm);
    if (rc == MPI_SUCCESS) g_dup = *newcomm;
    return rc;
}

/* ---- the wire format (docs/wire.md) ------------------------------------------ */

typedef struct {
    uint32_t magic;
    uint16_t version;
    uint8_t kind;
    uint8_t dtype;
    uint64_t count;
    uint64_t rows;
    uint64_t cols;
    uint64_t rank_or_k;
    uint64_t payload_bytes;
} Header;

typedef struct {
    uint32_t magic;
    uint32_t status;
    uint32_t method;
    uint32_t dtype;
    uint64_t count;
    uint64_t rows;
    uint64_t cols;
    uint64_t rank_or_k;
    char reason[208];
} Ack;

enum { kRaw = 0, kTopk = 1, kLowRank = 2 };
static const uint32_t kMagic = 0x50324343u;
static const uint32_t kAckMagic = 0x4b434143u;

static Header header(int kind, cc_coll_dtype_t dtype, uint64_t count)
{
    Header h;
    memset(&h, 0, sizeof h);
    h.magic = kMagic;
    h.version = 1;
    h.kind = (uint8_t)kind;
    h.dtype = (uint8_t)dtype;
    h.count = count;
    return h;
}

/* ---- forger and receiver ----------------------------------------------------- */

/* Rank 0: sends header + payload on MPI tag 2 tag and checks the answer. */
static void forge(int tag, const Header *h, const void *payload, size_t payload_len, int expect_status,
                  const char *expect_reason)
{
    unsigned char msg[2048];
    CHECK(sizeof *h + payload_len <= sizeof msg, "forged message too long");
    memcpy(msg, h, sizeof *h);
    if (payload_len > 0) memcpy(msg + sizeof *h, payload, payload_len);
    CHECK(MPI_Send(msg, (int)(sizeof *h + payload_len), MPI_BYTE, 1, 2 * tag, g_dup) == MPI_SUCCESS,
          "forged MPI_Send");
    Ack ack;
    MPI_Status status;
    int bytes = 0;
    CHECK(MPI_Recv(&ack, (int)sizeof ack, MPI_BYTE, 1, 2 * tag + 1, g_dup, &status) == MPI_SUCCESS,
          "the forger's MPI_Recv of the answer");
    MPI_Get_count(&status, MPI_BYTE, &bytes);
    CHECK(bytes == (int)sizeof ack, "the answer has 256 bytes");
    CHECK(ack.magic == kAckMagic, "the answer has the ack magic");
    CHECK((int)ack.status == expect_status, "the answer's status");
    CHECK(memchr(ack.reason, '\0', sizeof ack.reason) != NULL, "the answer's reason is NUL-terminated");
    if (expect_reason != NULL && strstr(ack.reason, expect_reason) == NULL) {
        fprintf(stderr, "[rank 0] answer's reason: %s\n", ack.reason);
        CHECK(0, "the answer's reason names the field");
    }
}

/* Rank 1: cc_coll_recv into a buffer of 0xa5 bytes; checks the status, the
 * message and, on a rejection, that the buffer is untouched. */
static void receive(cc_coll_comm_h h, int tag, size_t count, cc_coll_dtype_t dtype, const cc_coll_params_t *p,
                    cc_coll_status_t expect, const char *expect_text, unsigned char *out)
{
    unsigned char buf[1024];
    const size_t bytes = count * cc_coll_dtype_size(dtype);
    CHECK(bytes <= sizeof buf, "receive buffer too small");
    memset(buf, 0xa5, sizeof buf);
    const cc_coll_status_t st = cc_coll_recv(buf, count, dtype, 0, tag, p, h, NULL);
    if (st != expect) {
        fprintf(stderr, "[rank 1] cc_coll_recv: %s (%s)\n", cc_coll_status_string(st), cc_coll_last_error());
        CHECK(0, "cc_coll_recv's status");
    }
    if (expect_text != NULL && strstr(cc_coll_last_error(), expect_text) == NULL) {
        fprintf(stderr, "[rank 1] cc_coll_last_error: %s\n", cc_coll_last_error());
        CHECK(0, "cc_coll_recv's message names the field");
    }
    if (st != CC_COLL_OK)
        for (size_t i = 0; i < sizeof buf; ++i) CHECK(buf[i] == 0xa5, "a rejected message left the buffer untouched");
    if (out != NULL) memcpy(out, buf, bytes);
}

static const float kValues[4] = {1.5f, -2.25f, 3.0f, 1e-3f};

static void test_raw_ok(cc_coll_comm_h h)
{
    const int tag = 11;
    if (g_rank == 0) {
        Header m = header(kRaw, CC_COLL_F32, 4);
        m.payload_bytes = sizeof kValues;
        forge(tag, &m, kValues, sizeof kValues, 0, "");
    } else if (g_rank == 1) {
        float got[4];
        receive(h, tag, 4, CC_COLL_F32, NULL, CC_COLL_OK, NULL, (unsigned char *)got);
        CHECK(memcmp(got, kValues, sizeof got) == 0, "the forged RAW message arrived bit-exact");
    }
}

static void test_lowrank_count0(cc_coll_comm_h h)
{
    const int tag = 12;
    const char *why = "LOWRANK message of count 0";
    if (g_rank == 0) {
        const Header m = header(kLowRank, CC_COLL_F32, 0);
        forge(tag, &m, NULL, 0, 1, why);
    } else if (g_rank == 1) {
        const cc_coll_params_t p = method_params(CC_COLL_METHOD_LOWRANK);
        receive(h, tag, 0, CC_COLL_F32, &p, CC_COLL_ERR_MISMATCH, why, NULL);
    }
}

/* TOPK of 100 f32 elements at density 0.1: k = 10, payload 16 + 80 bytes. */
enum { kTopkN = 100, kTopkK = 10 };

static void topk_case(cc_coll_comm_h h, int tag, int edit, const char *why)
{
    if (g_rank == 0) {
        unsigned char payload[16 + kTopkK * 8];
        memset(payload, 0, sizeof payload);
        const uint64_t n = kTopkN;
        const uint32_t k = kTopkK;
        memcpy(payload, &n, 8);
        memcpy(payload + 8, &k, 4);
        for (uint32_t j = 0; j < kTopkK; ++j) {
            uint32_t idx = 3 + 10 * j;
            const float v = 1.0f + (float)j;
            if (edit == 1 && j == 4) idx = kTopkN; /* out of range */
            if (edit == 2 && j == 4) idx = 2;      /* below its predecessor 33 */
            memcpy(payload + 16 + 4 * j, &idx, 4);
            memcpy(payload + 16 + 4 * kTopkK + 4 * j, &v, 4);
        }
        Header m = header(kTopk, CC_COLL_F32, kTopkN);
        m.rank_or_k = kTopkK;
        size_t len = sizeof payload;
        if (edit == 0) len = 8; /* payload_bytes below the 16-byte payload header */
        m.payload_bytes = len;
        forge(tag, &m, payload, len, 1, why);
    } else if (g_rank == 1) {
        const cc_coll_params_t p = topk_params(0.1, 0);
        receive(h, tag, kTopkN, CC_COLL_F32, &p, CC_COLL_ERR_MISMATCH, why, NULL);
    }
}

static void test_topk_short(cc_coll_comm_h h) { topk_case(h, 13, 0, "TOPK payload_bytes 8"); }
static void test_topk_range(cc_coll_comm_h h) { topk_case(h, 14, 1, "TOPK index 100 at position 4 is not below count 100"); }
static void test_topk_order(cc_coll_comm_h h) { topk_case(h, 15, 2, "TOPK index 2 at position 4 does not follow 33"); }

static void test_oversized(cc_coll_comm_h h)
{
    const int tag = 16;
    const char *why = "a message of 1048 bytes, more than the 64 this receive of 4 f32 elements can take";
    if (g_rank == 0) {
        static unsigned char payload[1000];
        Header m = header(kRaw, CC_COLL_F32, 250);
        m.payload_bytes = sizeof payload;
        forge(tag, &m, payload, sizeof payload, 1, why);
    } else if (g_rank == 1) {
        receive(h, tag, 4, CC_COLL_F32, NULL, CC_COLL_ERR_MISMATCH, why, NULL);
    }
}

/* Rank 0 sends with cc_coll_send; rank 1 answers with forged bytes. */
static void test_bad_ack(cc_coll_comm_h h)
{
    static const char *const kWhy[3] = {"has 100 bytes, not 256", "magic 0xdeadbeef", "status 7"};
    for (int c = 0; c < 3; ++c) {
        const int tag = 20 + c;
        if (g_rank == 0) {
            const cc_coll_status_t st = cc_coll_send(kValues, 4, CC_COLL_F32, 1, tag, 0, NULL, h, NULL);
            if (st != CC_COLL_ERR_MISMATCH || strstr(cc_coll_last_error(), "malformed answer") == NULL ||
                strstr(cc_coll_last_error(), kWhy[c]) == NULL) {
                fprintf(stderr, "[rank 0] cc_coll_send: %s (%s)\n", cc_coll_status_string(st), cc_coll_last_error());
                CHECK(0, "a malformed answer is CC_COLL_ERR_MISMATCH naming the problem");
            }
        } else if (g_rank == 1) {
            unsigned char msg[48 + sizeof kValues];
            MPI_Status status;
            int bytes = 0;
            CHECK(MPI_Recv(msg, (int)sizeof msg, MPI_BYTE, 0, 2 * tag, g_dup, &status) == MPI_SUCCESS,
                  "raw MPI_Recv of cc_coll_send's message");
            MPI_Get_count(&status, MPI_BYTE, &bytes);
            CHECK(bytes == (int)sizeof msg, "cc_coll_send's message is 48 + 16 bytes");
            Ack ack;
            memset(&ack, 0, sizeof ack);
            ack.magic = kAckMagic;
            int len = (int)sizeof ack;
            if (c == 0) len = 100;
            if (c == 1) ack.magic = 0xdeadbeefu;
            if (c == 2) ack.status = 7;
            CHECK(MPI_Send(&ack, len, MPI_BYTE, 0, 2 * tag + 1, g_dup) == MPI_SUCCESS, "forged answer");
        }
    }
}

static const NamedTest kTests[] = {
    {"raw_ok", test_raw_ok},
    {"lowrank_count0", test_lowrank_count0},
    {"topk_short", test_topk_short},
    {"topk_range", test_topk_range},
    {"topk_order", test_topk_order},
    {"oversized", test_oversized},
    {"bad_ack", test_bad_ack},
};

/* run_suite creates the communicator; the first test checks that its
 * MPI_Comm_dup was seen here. */
static void test_dup_seen(cc_coll_comm_h h)
{
    (void)h;
    CHECK(g_dup != MPI_COMM_NULL, "the library's MPI_Comm_dup went through this program's MPI_Comm_dup");
}

int main(int argc, char **argv)
{
    NamedTest tests[sizeof kTests / sizeof kTests[0] + 1];
    tests[0].name = "dup_seen";
    tests[0].fn = test_dup_seen;
    memcpy(tests + 1, kTests, sizeof kTests);
    return run_suite(argc, argv, "p2p_forged", tests, sizeof tests / sizeof tests[0], 2, NULL);
}
