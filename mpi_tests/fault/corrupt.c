/*
 * The corrupting MPI interposer of the fault-injection driver: see
 * corrupt.h for what it edits and when. Each MPI function defined here
 * calls its PMPI_ form, then, on the chosen rank only, may edit the bytes
 * that came from other ranks. The program must export these definitions
 * (cc_coll_mpi_profiling_program in mpi_tests/CMakeLists.txt) for
 * libcc_coll's calls to reach them.
 */
#include "corrupt.h"

#include <float.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

/* ---- state ------------------------------------------------------------------ */

enum ElemKind { kBytes, kF32, kF64, kHalf };

/* `len` bytes at recvbuf + `off` that came from rank `src` (-1: a reduction's
 * result, made of every rank's contribution). */
typedef struct {
    size_t off, len;
    int src;
} Seg;

/* A non-blocking receive in flight: its buffer and what it will hold. */
typedef struct {
    MPI_Request req;
    const char *call;
    unsigned char *buf;
    int kind;     /* enum ElemKind */
    int p2p;      /* 1: one segment, cut to the bytes the status reports */
    int self;     /* p2p: this rank's rank in the communicator */
    int nseg;
    Seg *segs;
} Pending;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static int g_active = 0;  /* this rank edits */
static int g_enabled = 0; /* fault_enable */
static double g_probability = 0.0;
static uint64_t g_rng = 0;
static unsigned long long g_corrupted = 0, g_eligible = 0;
static char g_log[2048];
static size_t g_log_len = 0;
static int g_log_edits = 0;
static Pending *g_pending = NULL;
static int g_npending = 0, g_cap_pending = 0;

void fault_setup(uint64_t seed, double probability, int corrupt_rank)
{
    int rank = 0;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    pthread_mutex_lock(&g_mu);
    g_active = rank == corrupt_rank;
    g_probability = probability;
    g_rng = seed * 0x9e3779b97f4a7c15ull ^ (0xd1b54a32d192ed03ull * (uint64_t)(rank + 1));
    g_corrupted = g_eligible = 0;
    g_log[0] = '\0';
    g_log_len = 0;
    g_log_edits = 0;
    pthread_mutex_unlock(&g_mu);
}

void fault_enable(int on)
{
    pthread_mutex_lock(&g_mu);
    g_enabled = on;
    pthread_mutex_unlock(&g_mu);
}

unsigned long long fault_corrupted_calls(void)
{
    pthread_mutex_lock(&g_mu);
    const unsigned long long n = g_corrupted;
    pthread_mutex_unlock(&g_mu);
    return n;
}

unsigned long long fault_eligible_calls(void)
{
    pthread_mutex_lock(&g_mu);
    const unsigned long long n = g_eligible;
    pthread_mutex_unlock(&g_mu);
    return n;
}

int fault_take_log(char *out, size_t cap)
{
    pthread_mutex_lock(&g_mu);
    const int n = g_log_edits;
    if (cap > 0) snprintf(out, cap, "%s", g_log);
    g_log[0] = '\0';
    g_log_len = 0;
    g_log_edits = 0;
    pthread_mutex_unlock(&g_mu);
    return n;
}

/* ---- the edits (called with g_mu held) ---------------------------------------- */

static uint64_t rnd(void)
{
    uint64_t z = (g_rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double uniform(void) { return (double)(rnd() >> 11) * (1.0 / 9007199254740992.0); }

static size_t below(size_t n) { return n == 0 ? 0 : (size_t)(rnd() % n); }

static void log_edit(const char *fmt, ...)
{
    ++g_log_edits;
    if (g_log_len + 8 >= sizeof g_log) return;
    if (g_log_len > 0) g_log_len += (size_t)snprintf(g_log + g_log_len, sizeof g_log - g_log_len, "; ");
    va_list ap;
    va_start(ap, fmt);
    const int n = vsnprintf(g_log + g_log_len, sizeof g_log - g_log_len, fmt, ap);
    va_end(ap);
    if (n > 0) g_log_len += (size_t)n;
    if (g_log_len >= sizeof g_log) {
        g_log_len = sizeof g_log - 1;
        memcpy(g_log + sizeof g_log - 4, "...", 4);
    }
}

static void put32(unsigned char *at, uint32_t v) { memcpy(at, &v, 4); }

/* One edit at byte `off` of segment s. */
static void edit_at(const char *call, unsigned char *buf, const Seg *s, size_t off, int kind)
{
    unsigned char *b = buf + s->off;
    const size_t len = s->len;
    char where[96];
    if (s->src >= 0)
        snprintf(where, sizeof where, "of the %zu bytes from rank %d", len, s->src);
    else
        snprintf(where, sizeof where, "of the %zu-byte result", len);
    /* a 4-byte word at or before off, inside the segment */
    size_t w = off & ~(size_t)3;
    if (len >= 4 && w + 4 > len) w = len - 4;
    const size_t r = below(100);
    if (len < 4 || r < 20) {
        const int bit = (int)below(8);
        b[off] ^= (unsigned char)(1u << bit);
        log_edit("%s: bit %d of byte %zu %s flipped", call, bit, off, where);
    } else if (r < 66) {
        static const char *const names[] = {"0", "0xffffffff", "INT_MAX", "INT_MIN", "random"};
        uint32_t v;
        int which;
        if (r < 30) {
            which = 0, v = 0u;
        } else if (r < 40) {
            which = 1, v = 0xffffffffu;
        } else if (r < 48) {
            which = 2, v = (uint32_t)INT_MAX;
        } else if (r < 56) {
            which = 3, v = (uint32_t)INT_MAX + 1u; /* INT_MIN's bits */
        } else {
            which = 4, v = (uint32_t)rnd();
        }
        put32(b + w, v);
        log_edit("%s: word at byte %zu %s set to %s (0x%08x)", call, w, where, names[which], (unsigned)v);
    } else if (r < 80) {
        size_t n = 1 + below(64);
        if (n > len - off) n = len - off;
        for (size_t i = 0; i < n; ++i) b[off + i] = (unsigned char)rnd();
        log_edit("%s: bytes %zu..%zu %s randomised", call, off, off + n - 1, where);
    } else if (kind == kF64 && len >= 8) {
        static const double vals[] = {NAN, INFINITY, -INFINITY, 1e300, -DBL_MAX};
        static const char *const names[] = {"NaN", "inf", "-inf", "1e300", "-DBL_MAX"};
        size_t d = off & ~(size_t)7;
        if (d + 8 > len) d = len - 8;
        const size_t i = below(5);
        memcpy(b + d, &vals[i], 8);
        log_edit("%s: double at byte %zu %s set to %s", call, d, where, names[i]);
    } else if (kind == kHalf && len >= 2) {
        static const uint16_t vals[] = {0x7e00u, 0x7c00u, 0xfc00u, 0x7bffu};
        static const char *const names[] = {"NaN", "inf", "-inf", "0x7bff"};
        size_t h = off & ~(size_t)1;
        if (h + 2 > len) h = len - 2;
        const size_t i = below(4);
        memcpy(b + h, &vals[i], 2);
        log_edit("%s: 16-bit float at byte %zu %s set to %s", call, h, where, names[i]);
    } else {
        static const float vals[] = {NAN, INFINITY, -INFINITY, 3e38f, -1e30f};
        static const char *const names[] = {"NaN", "inf", "-inf", "3e38", "-1e30"};
        const size_t i = below(5);
        memcpy(b + w, &vals[i], 4);
        log_edit("%s: float at byte %zu %s set to %s", call, w, where, names[i]);
    }
}

/* The received part of one call: counts it, and on the chosen rank may edit
 * it. Called with g_mu held. */
static void edit_locked(const char *call, unsigned char *buf, const Seg *segs, int nseg, int kind)
{
    size_t total = 0;
    int nonempty = 0;
    for (int i = 0; i < nseg; ++i) {
        total += segs[i].len;
        nonempty += segs[i].len > 0;
    }
    if (total <= FAULT_MIN_BYTES || buf == NULL) return;
    ++g_eligible;
    if (!g_active || !g_enabled || !(uniform() < g_probability)) return;
    ++g_corrupted;
    const int edits = uniform() < 0.25 ? 2 + (int)below(3) : 1;
    for (int e = 0; e < edits; ++e) {
        const Seg *s = NULL;
        size_t off = 0;
        if (uniform() < 0.4) { /* the first bytes of a block: headers */
            size_t pick = below((size_t)nonempty);
            for (int i = 0; i < nseg; ++i)
                if (segs[i].len > 0 && pick-- == 0) {
                    s = &segs[i];
                    break;
                }
            off = below(s->len < 32 ? s->len : 32);
        } else {
            size_t at = below(total);
            for (int i = 0; i < nseg; ++i) {
                if (at < segs[i].len) {
                    s = &segs[i];
                    off = at;
                    break;
                }
                at -= segs[i].len;
            }
        }
        edit_at(call, buf, s, off, kind);
    }
}

static void edit(const char *call, void *buf, const Seg *segs, int nseg, int kind)
{
    pthread_mutex_lock(&g_mu);
    edit_locked(call, (unsigned char *)buf, segs, nseg, kind);
    pthread_mutex_unlock(&g_mu);
}

/* ---- what a call receives ------------------------------------------------------ */

static int kind_of(MPI_Datatype t)
{
    if (t == MPI_FLOAT) return kF32;
    if (t == MPI_DOUBLE) return kF64;
    if (t == MPI_UINT16_T) return kHalf;
    return kBytes;
}

static size_t extent_of(MPI_Datatype t)
{
    if (t == MPI_DATATYPE_NULL) return 0;
    MPI_Aint lb = 0, extent = 0;
    if (PMPI_Type_get_extent(t, &lb, &extent) != MPI_SUCCESS || extent < 0) return 0;
    return (size_t)extent;
}

static int size_of(MPI_Comm c)
{
    int n = 1;
    if (PMPI_Comm_size(c, &n) != MPI_SUCCESS) return 1;
    return n;
}

static int rank_of(MPI_Comm c)
{
    int r = 0;
    if (PMPI_Comm_rank(c, &r) != MPI_SUCCESS) return 0;
    return r;
}

/* Blocks of `block` bytes every `stride` bytes, one per rank, this rank's
 * left out. Returns the number of segments (malloc'ed into *out). */
static int blocks_uniform(MPI_Comm c, size_t block, size_t stride, Seg **out)
{
    const int P = size_of(c), me = rank_of(c);
    *out = NULL;
    if (P < 2) return 0;
    Seg *s = (Seg *)malloc((size_t)P * sizeof *s);
    if (s == NULL) return 0;
    int n = 0;
    for (int i = 0; i < P; ++i)
        if (i != me) s[n++] = (Seg){(size_t)i * stride, block, i};
    *out = s;
    return n;
}

static int blocks_v(MPI_Comm c, const int *counts, const int *displs, size_t extent, Seg **out)
{
    const int P = size_of(c), me = rank_of(c);
    *out = NULL;
    if (P < 2) return 0;
    Seg *s = (Seg *)malloc((size_t)P * sizeof *s);
    if (s == NULL) return 0;
    int n = 0;
    for (int i = 0; i < P; ++i)
        if (i != me && counts[i] > 0 && displs[i] >= 0)
            s[n++] = (Seg){(size_t)displs[i] * extent, (size_t)counts[i] * extent, i};
    *out = s;
    return n;
}

/* A reduction's result of `bytes` bytes, on a communicator of two or more. */
static int whole(MPI_Comm c, size_t bytes, Seg **out)
{
    *out = NULL;
    if (size_of(c) < 2) return 0;
    Seg *s = (Seg *)malloc(sizeof *s);
    if (s == NULL) return 0;
    *s = (Seg){0, bytes, -1};
    *out = s;
    return 1;
}

static void edit_now(const char *call, void *buf, Seg *segs, int nseg, int kind)
{
    if (nseg > 0) edit(call, buf, segs, nseg, kind);
    free(segs);
}

/* ---- requests in flight --------------------------------------------------------- */

/* Takes ownership of segs. */
static void remember(MPI_Request req, const char *call, void *buf, Seg *segs, int nseg, int kind, int p2p, int self)
{
    if (nseg == 0 || req == MPI_REQUEST_NULL) {
        free(segs);
        return;
    }
    pthread_mutex_lock(&g_mu);
    for (int i = 0; i < g_npending; ++i)
        if (g_pending[i].req == req) { /* a stale entry: the handle was reused */
            free(g_pending[i].segs);
            g_pending[i] = g_pending[--g_npending];
            break;
        }
    if (g_npending == g_cap_pending) {
        const int cap = g_cap_pending ? 2 * g_cap_pending : 16;
        Pending *p = (Pending *)realloc(g_pending, (size_t)cap * sizeof *p);
        if (p == NULL) {
            pthread_mutex_unlock(&g_mu);
            free(segs);
            return;
        }
        g_pending = p;
        g_cap_pending = cap;
    }
    g_pending[g_npending++] = (Pending){req, call, (unsigned char *)buf, kind, p2p, self, nseg, segs};
    pthread_mutex_unlock(&g_mu);
}

/* The request that was `req` has completed with status *st. */
static void completed(MPI_Request req, const MPI_Status *st)
{
    if (req == MPI_REQUEST_NULL) return;
    pthread_mutex_lock(&g_mu);
    for (int i = 0; i < g_npending; ++i) {
        if (g_pending[i].req != req) continue;
        Pending p = g_pending[i];
        g_pending[i] = g_pending[--g_npending];
        if (p.p2p) {
            int bytes = 0;
            /* As edit_message: never an acknowledgement (odd tag). */
            if (st == NULL || st->MPI_SOURCE == p.self || (st->MPI_TAG & 1) != 0 ||
                PMPI_Get_count(st, MPI_BYTE, &bytes) != MPI_SUCCESS || bytes == MPI_UNDEFINED || bytes < 0)
                bytes = 0;
            if ((size_t)bytes < p.segs[0].len) p.segs[0].len = (size_t)bytes;
            if (st != NULL) p.segs[0].src = st->MPI_SOURCE;
        }
        edit_locked(p.call, p.buf, p.segs, p.nseg, p.kind);
        free(p.segs);
        break;
    }
    pthread_mutex_unlock(&g_mu);
}

static int any_pending(void)
{
    pthread_mutex_lock(&g_mu);
    const int n = g_npending;
    pthread_mutex_unlock(&g_mu);
    return n > 0;
}

/* Room for `count` handles and statuses, on the stack up to kLocal. */
enum { kLocal = 16 };
typedef struct {
    MPI_Request req_local[kLocal];
    MPI_Status st_local[kLocal];
    MPI_Request *req;
    MPI_Status *st;
} Copies;

static int copies_init(Copies *c, int count, const MPI_Request *reqs, MPI_Status *statuses)
{
    c->req = c->req_local;
    c->st = statuses != MPI_STATUSES_IGNORE ? statuses : c->st_local;
    if (count > kLocal) {
        c->req = (MPI_Request *)malloc((size_t)count * sizeof *c->req);
        if (statuses == MPI_STATUSES_IGNORE) c->st = (MPI_Status *)malloc((size_t)count * sizeof *c->st);
        if (c->req == NULL || c->st == NULL) {
            free(c->req);
            if (c->st != statuses) free(c->st);
            return 0;
        }
    }
    memcpy(c->req, reqs, (size_t)count * sizeof *reqs);
    return 1;
}

static void copies_free(Copies *c, MPI_Status *statuses)
{
    if (c->req != c->req_local) free(c->req);
    if (c->st != c->st_local && c->st != statuses) free(c->st);
}

/* ---- collectives ------------------------------------------------------------------ */

/* After a collective returned rc: the segments it received, edited now
 * (request NULL) or when *request completes. Takes ownership of segs. */
static int received(int rc, const char *call, void *buf, Seg *segs, int nseg, MPI_Datatype type,
                    const MPI_Request *request)
{
    if (rc != MPI_SUCCESS) {
        free(segs);
        return rc;
    }
    if (request == NULL)
        edit_now(call, buf, segs, nseg, kind_of(type));
    else
        remember(*request, call, buf, segs, nseg, kind_of(type), 0, 0);
    return rc;
}

/* Every other rank's block of `count` elements (allgather, alltoall). */
static int per_rank(int rc, const char *call, void *buf, int count, MPI_Datatype type, MPI_Comm comm,
                    const MPI_Request *request)
{
    Seg *s = NULL;
    const size_t block = (size_t)count * extent_of(type);
    const int n = rc == MPI_SUCCESS ? blocks_uniform(comm, block, block, &s) : 0;
    return received(rc, call, buf, s, n, type, request);
}

/* Every other rank's block at its displacement (allgatherv, alltoallv). */
static int varying(int rc, const char *call, void *buf, const int *counts, const int *displs, MPI_Datatype type,
                   MPI_Comm comm, const MPI_Request *request)
{
    Seg *s = NULL;
    const int n = rc == MPI_SUCCESS ? blocks_v(comm, counts, displs, extent_of(type), &s) : 0;
    return received(rc, call, buf, s, n, type, request);
}

/* A whole result of `count` elements: a reduction's (src -1: every rank's
 * contribution) or a broadcast's (src: the root). */
static int result(int rc, const char *call, void *buf, int count, MPI_Datatype type, MPI_Comm comm, int src,
                  const MPI_Request *request)
{
    Seg *s = NULL;
    const int n = rc == MPI_SUCCESS ? whole(comm, (size_t)count * extent_of(type), &s) : 0;
    if (n > 0) s[0].src = src;
    return received(rc, call, buf, s, n, type, request);
}

int MPI_Allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                  MPI_Datatype recvtype, MPI_Comm comm)
{
    return per_rank(PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm),
                    "MPI_Allgather", recvbuf, recvcount, recvtype, comm, NULL);
}

int MPI_Iallgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                   MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request)
{
    return per_rank(PMPI_Iallgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request),
                    "MPI_Iallgather", recvbuf, recvcount, recvtype, comm, request);
}

int MPI_Allgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                   const int displs[], MPI_Datatype recvtype, MPI_Comm comm)
{
    return varying(PMPI_Allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm),
                   "MPI_Allgatherv", recvbuf, recvcounts, displs, recvtype, comm, NULL);
}

int MPI_Iallgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                    const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm,
                    MPI_Request *request)
{
    return varying(
        PMPI_Iallgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm, request),
        "MPI_Iallgatherv", recvbuf, recvcounts, displs, recvtype, comm, request);
}

int MPI_Alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                 MPI_Datatype recvtype, MPI_Comm comm)
{
    return per_rank(PMPI_Alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm),
                    "MPI_Alltoall", recvbuf, recvcount, recvtype, comm, NULL);
}

int MPI_Ialltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                  MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request)
{
    return per_rank(PMPI_Ialltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request),
                    "MPI_Ialltoall", recvbuf, recvcount, recvtype, comm, request);
}

int MPI_Alltoallv(const void *sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
                  void *recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm)
{
    return varying(
        PMPI_Alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm),
        "MPI_Alltoallv", recvbuf, recvcounts, rdispls, recvtype, comm, NULL);
}

int MPI_Ialltoallv(const void *sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
                   void *recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm,
                   MPI_Request *request)
{
    return varying(PMPI_Ialltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype,
                                   comm, request),
                   "MPI_Ialltoallv", recvbuf, recvcounts, rdispls, recvtype, comm, request);
}

int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm)
{
    return result(PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm), "MPI_Allreduce", recvbuf, count,
                  datatype, comm, -1, NULL);
}

int MPI_Iallreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                   MPI_Request *request)
{
    return result(PMPI_Iallreduce(sendbuf, recvbuf, count, datatype, op, comm, request), "MPI_Iallreduce", recvbuf,
                  count, datatype, comm, -1, request);
}

int MPI_Reduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op op,
                             MPI_Comm comm)
{
    return result(PMPI_Reduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm),
                  "MPI_Reduce_scatter_block", recvbuf, recvcount, datatype, comm, -1, NULL);
}

int MPI_Ireduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op op,
                              MPI_Comm comm, MPI_Request *request)
{
    return result(PMPI_Ireduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm, request),
                  "MPI_Ireduce_scatter_block", recvbuf, recvcount, datatype, comm, -1, request);
}

int MPI_Reduce_scatter(const void *sendbuf, void *recvbuf, const int recvcounts[], MPI_Datatype datatype, MPI_Op op,
                       MPI_Comm comm)
{
    return result(PMPI_Reduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm), "MPI_Reduce_scatter",
                  recvbuf, recvcounts[rank_of(comm)], datatype, comm, -1, NULL);
}

int MPI_Ireduce_scatter(const void *sendbuf, void *recvbuf, const int recvcounts[], MPI_Datatype datatype, MPI_Op op,
                        MPI_Comm comm, MPI_Request *request)
{
    return result(PMPI_Ireduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm, request),
                  "MPI_Ireduce_scatter", recvbuf, recvcounts[rank_of(comm)], datatype, comm, -1, request);
}

int MPI_Bcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm)
{
    const int rc = PMPI_Bcast(buffer, count, datatype, root, comm);
    return rank_of(comm) == root ? rc : result(rc, "MPI_Bcast", buffer, count, datatype, comm, root, NULL);
}

int MPI_Ibcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm, MPI_Request *request)
{
    const int rc = PMPI_Ibcast(buffer, count, datatype, root, comm, request);
    return rank_of(comm) == root ? rc : result(rc, "MPI_Ibcast", buffer, count, datatype, comm, root, request);
}

int MPI_Reduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root,
               MPI_Comm comm)
{
    const int rc = PMPI_Reduce(sendbuf, recvbuf, count, datatype, op, root, comm);
    return rank_of(comm) != root ? rc : result(rc, "MPI_Reduce", recvbuf, count, datatype, comm, -1, NULL);
}

int MPI_Ireduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root,
                MPI_Comm comm, MPI_Request *request)
{
    const int rc = PMPI_Ireduce(sendbuf, recvbuf, count, datatype, op, root, comm, request);
    return rank_of(comm) != root ? rc : result(rc, "MPI_Ireduce", recvbuf, count, datatype, comm, -1, request);
}

/* ---- point-to-point --------------------------------------------------------------- */

/* One message into buf, as its status reports it. */
/* A point-to-point message: edited unless it is an acknowledgement. The
 * library answers a message on MPI tag 2 t with its 256-byte acknowledgement
 * on tag 2 t + 1 (docs/wire.md, "Point-to-point"); like the collectives'
 * small exchanges, the answer is the channel's control message and the
 * anchor of its outcome, so it is not edited. */
static void edit_message(const char *call, void *buf, const MPI_Status *st, int self)
{
    int bytes = 0;
    if (st->MPI_SOURCE == self || (st->MPI_TAG & 1) != 0 || PMPI_Get_count(st, MPI_BYTE, &bytes) != MPI_SUCCESS ||
        bytes == MPI_UNDEFINED || bytes <= 0)
        return;
    Seg s = {0, (size_t)bytes, st->MPI_SOURCE};
    edit(call, buf, &s, 1, kBytes);
}

static Seg *one_seg(size_t bytes)
{
    Seg *s = (Seg *)malloc(sizeof *s);
    if (s != NULL) *s = (Seg){0, bytes, -1};
    return s;
}

int MPI_Recv(void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm, MPI_Status *status)
{
    MPI_Status local;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &local : status;
    const int rc = PMPI_Recv(buf, count, datatype, source, tag, comm, st);
    if (rc == MPI_SUCCESS) edit_message("MPI_Recv", buf, st, rank_of(comm));
    return rc;
}

int MPI_Sendrecv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag, void *recvbuf,
                 int recvcount, MPI_Datatype recvtype, int source, int recvtag, MPI_Comm comm, MPI_Status *status)
{
    MPI_Status local;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &local : status;
    const int rc = PMPI_Sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source,
                                 recvtag, comm, st);
    if (rc == MPI_SUCCESS) edit_message("MPI_Sendrecv", recvbuf, st, rank_of(comm));
    return rc;
}

int MPI_Mrecv(void *buf, int count, MPI_Datatype type, MPI_Message *message, MPI_Status *status)
{
    MPI_Status local;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &local : status;
    const int rc = PMPI_Mrecv(buf, count, type, message, st);
    /* A matched probe's message comes from another rank: MPI_Mprobe with
     * MPI_PROC_NULL gives MPI_MESSAGE_NO_PROC and an MPI_PROC_NULL source. */
    if (rc == MPI_SUCCESS && st->MPI_SOURCE != MPI_PROC_NULL) edit_message("MPI_Mrecv", buf, st, -1);
    return rc;
}

int MPI_Irecv(void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm, MPI_Request *request)
{
    const int rc = PMPI_Irecv(buf, count, datatype, source, tag, comm, request);
    if (rc != MPI_SUCCESS || source == MPI_PROC_NULL) return rc;
    Seg *s = one_seg((size_t)count * extent_of(datatype));
    remember(*request, "MPI_Irecv", buf, s, s != NULL, kBytes, 1, rank_of(comm));
    return rc;
}

int MPI_Imrecv(void *buf, int count, MPI_Datatype type, MPI_Message *message, MPI_Request *request)
{
    const int rc = PMPI_Imrecv(buf, count, type, message, request);
    if (rc != MPI_SUCCESS) return rc;
    Seg *s = one_seg((size_t)count * extent_of(type));
    remember(*request, "MPI_Imrecv", buf, s, s != NULL, kBytes, 1, -1);
    return rc;
}

/* ---- completion --------------------------------------------------------------------- */

int MPI_Wait(MPI_Request *request, MPI_Status *status)
{
    const MPI_Request h = *request;
    MPI_Status local;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &local : status;
    const int rc = PMPI_Wait(request, st);
    if (rc == MPI_SUCCESS && h != MPI_REQUEST_NULL && any_pending()) completed(h, st);
    return rc;
}

int MPI_Test(MPI_Request *request, int *flag, MPI_Status *status)
{
    const MPI_Request h = *request;
    MPI_Status local;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &local : status;
    const int rc = PMPI_Test(request, flag, st);
    if (rc == MPI_SUCCESS && *flag && h != MPI_REQUEST_NULL && any_pending()) completed(h, st);
    return rc;
}

int MPI_Request_get_status(MPI_Request request, int *flag, MPI_Status *status)
{
    MPI_Status local;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &local : status;
    const int rc = PMPI_Request_get_status(request, flag, st);
    if (rc == MPI_SUCCESS && *flag && request != MPI_REQUEST_NULL && any_pending()) completed(request, st);
    return rc;
}

int MPI_Waitall(int count, MPI_Request array_of_requests[], MPI_Status *array_of_statuses)
{
    Copies c;
    if (count <= 0 || !any_pending() || !copies_init(&c, count, array_of_requests, array_of_statuses))
        return PMPI_Waitall(count, array_of_requests, array_of_statuses);
    const int rc = PMPI_Waitall(count, array_of_requests, c.st);
    if (rc == MPI_SUCCESS)
        for (int i = 0; i < count; ++i) completed(c.req[i], &c.st[i]);
    copies_free(&c, array_of_statuses);
    return rc;
}

int MPI_Testall(int count, MPI_Request array_of_requests[], int *flag, MPI_Status array_of_statuses[])
{
    Copies c;
    if (count <= 0 || !any_pending() || !copies_init(&c, count, array_of_requests, array_of_statuses))
        return PMPI_Testall(count, array_of_requests, flag, array_of_statuses);
    const int rc = PMPI_Testall(count, array_of_requests, flag, c.st);
    if (rc == MPI_SUCCESS && *flag)
        for (int i = 0; i < count; ++i) completed(c.req[i], &c.st[i]);
    copies_free(&c, array_of_statuses);
    return rc;
}

int MPI_Waitany(int count, MPI_Request array_of_requests[], int *index, MPI_Status *status)
{
    Copies c;
    if (count <= 0 || !any_pending() || !copies_init(&c, count, array_of_requests, MPI_STATUSES_IGNORE))
        return PMPI_Waitany(count, array_of_requests, index, status);
    MPI_Status local;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &local : status;
    const int rc = PMPI_Waitany(count, array_of_requests, index, st);
    if (rc == MPI_SUCCESS && *index != MPI_UNDEFINED && *index >= 0 && *index < count) completed(c.req[*index], st);
    copies_free(&c, MPI_STATUSES_IGNORE);
    return rc;
}

int MPI_Testany(int count, MPI_Request array_of_requests[], int *index, int *flag, MPI_Status *status)
{
    Copies c;
    if (count <= 0 || !any_pending() || !copies_init(&c, count, array_of_requests, MPI_STATUSES_IGNORE))
        return PMPI_Testany(count, array_of_requests, index, flag, status);
    MPI_Status local;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &local : status;
    const int rc = PMPI_Testany(count, array_of_requests, index, flag, st);
    if (rc == MPI_SUCCESS && *flag && *index != MPI_UNDEFINED && *index >= 0 && *index < count)
        completed(c.req[*index], st);
    copies_free(&c, MPI_STATUSES_IGNORE);
    return rc;
}

/* After MPI_Waitsome or MPI_Testsome returned rc: the completed requests'
 * buffers edited, the copies freed. */
static int some_done(int rc, Copies *c, const int *outcount, const int *indices, MPI_Status *statuses)
{
    if (rc == MPI_SUCCESS && *outcount != MPI_UNDEFINED)
        for (int j = 0; j < *outcount; ++j) completed(c->req[indices[j]], &c->st[j]);
    copies_free(c, statuses);
    return rc;
}

int MPI_Waitsome(int incount, MPI_Request array_of_requests[], int *outcount, int array_of_indices[],
                 MPI_Status array_of_statuses[])
{
    Copies c;
    if (incount <= 0 || !any_pending() || !copies_init(&c, incount, array_of_requests, array_of_statuses))
        return PMPI_Waitsome(incount, array_of_requests, outcount, array_of_indices, array_of_statuses);
    return some_done(PMPI_Waitsome(incount, array_of_requests, outcount, array_of_indices, c.st), &c, outcount,
                     array_of_indices, array_of_statuses);
}

int MPI_Testsome(int incount, MPI_Request array_of_requests[], int *outcount, int array_of_indices[],
                 MPI_Status array_of_statuses[])
{
    Copies c;
    if (incount <= 0 || !any_pending() || !copies_init(&c, incount, array_of_requests, array_of_statuses))
        return PMPI_Testsome(incount, array_of_requests, outcount, array_of_indices, array_of_statuses);
    return some_done(PMPI_Testsome(incount, array_of_requests, outcount, array_of_indices, c.st), &c, outcount,
                     array_of_indices, array_of_statuses);
}
