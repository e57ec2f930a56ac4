/*
 * libcc_coll — compressed MPI collectives.
 *
 * The public C ABI. Everything the library exports is declared here and is
 * prefixed `cc_coll_` (functions, types) or `CC_COLL_` (macros, enumerators,
 * environment variables). The header compiles as C99 and as C++.
 *
 * Conventions
 *  - Every function returns a cc_coll_status_t: 0 (CC_COLL_OK) on success, a
 *    negative code on error. cc_coll_status_string() names the code;
 *    cc_coll_last_error() gives the calling thread's message for its most
 *    recent error (which argument or which MPI call failed, and why).
 *  - Nothing aborts and no C++ exception crosses this boundary.
 *  - Structs that may grow start with a `uint64_t mask`; a field counts only
 *    when its bit is set, so fields are appended without breaking callers.
 *
 * SPDX-License-Identifier: BSD-3-Clause
 */
#ifndef CC_COLL_H
#define CC_COLL_H

#include <stddef.h>
#include <stdint.h>

#include <mpi.h>

/* ------------------------------------------------------------------------ */
/* Version                                                                   */
/* ------------------------------------------------------------------------ */

/* The single source of the version: CMake reads these three lines. */
#define CC_COLL_VERSION_MAJOR 0
#define CC_COLL_VERSION_MINOR 8
#define CC_COLL_VERSION_PATCH 0

/* One integer, ordered like the version: MAJOR*10000 + MINOR*100 + PATCH. */
#define CC_COLL_VERSION \
    (CC_COLL_VERSION_MAJOR * 10000 + CC_COLL_VERSION_MINOR * 100 + CC_COLL_VERSION_PATCH)

/* Symbol visibility: the library is built with hidden visibility and exports
 * only what carries CC_COLL_API. */
#if defined(_WIN32)
#  define CC_COLL_API
#elif defined(__GNUC__) || defined(__clang__)
#  define CC_COLL_API __attribute__((visibility("default")))
#else
#  define CC_COLL_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Status codes                                                              */
/* ------------------------------------------------------------------------ */

typedef enum cc_coll_status {
    CC_COLL_OK                     = 0,
    CC_COLL_ERR_NULL_BUFFER        = -1,  /* a buffer is NULL while count > 0        */
    CC_COLL_ERR_INVALID_DTYPE      = -2,  /* dtype is not a cc_coll_dtype_t value    */
    CC_COLL_ERR_INVALID_OP         = -3,  /* op is not a cc_coll_op_t value          */
    CC_COLL_ERR_INVALID_METHOD     = -4,  /* method is not a cc_coll_method_t value  */
    CC_COLL_ERR_COUNT_OVERFLOW     = -5,  /* count does not fit MPI's count type     */
    CC_COLL_ERR_INVALID_COMM       = -6,  /* NULL or already-destroyed comm handle   */
    CC_COLL_ERR_INVALID_PARAMS     = -7,  /* params has unknown mask bits            */
    CC_COLL_ERR_INVALID_ARG        = -8,  /* another argument is out of its domain   */
    CC_COLL_ERR_MPI                = -9,  /* an MPI call failed (message says which) */
    CC_COLL_ERR_MPI_NOT_INITIALIZED = -10, /* MPI is not initialised, or finalised   */
    CC_COLL_ERR_VERSION_MISMATCH   = -11, /* header and library versions disagree    */
    CC_COLL_ERR_CONFIG             = -12, /* a CC_COLL_* environment value is bad    */
    CC_COLL_ERR_NOT_SUPPORTED      = -13, /* valid request this build cannot serve   */
    CC_COLL_ERR_NO_MEMORY          = -14, /* an allocation failed                    */
    CC_COLL_ERR_INTERNAL           = -15, /* a bug in libcc_coll: please report it   */
    CC_COLL_ERR_EF_LIMIT           = -16, /* a new residual would pass EF_MAX_BYTES,
                                             or new method state STATE_MAX_BYTES     */
    CC_COLL_ERR_MISMATCH           = -17, /* ranks disagree on a call's arguments,
                                             or a residual's key is reused with
                                             another count or dtype              */
    CC_COLL_ERR_CUDA               = -18  /* a CUDA runtime, cuBLAS, cuSOLVER or
                                             cuRAND call failed (message says
                                             which, with the library's text)     */
} cc_coll_status_t;

/* A static string naming the status ("CC_COLL_ERR_NULL_BUFFER: ..."); never
 * NULL, also for unknown values. */
CC_COLL_API const char *cc_coll_status_string(cc_coll_status_t status);

/* The message of the calling thread's most recent cc_coll call: "" when it
 * succeeded, else which argument or MPI call failed and why. Valid until the
 * thread's next cc_coll call. */
CC_COLL_API const char *cc_coll_last_error(void);

/* ------------------------------------------------------------------------ */
/* Version queries and the header/library check                              */
/* ------------------------------------------------------------------------ */

/* The library's version at run time. Any pointer may be NULL. */
CC_COLL_API void cc_coll_get_version(int *major, int *minor, int *patch);

/* "MAJOR.MINOR.PATCH" of the library at run time. */
CC_COLL_API const char *cc_coll_version_string(void);

/* CC_COLL_OK when a program compiled against header version
 * (header_major, header_minor) can use this library: same major version and a
 * library minor version at least the header's. Otherwise
 * CC_COLL_ERR_VERSION_MISMATCH with both versions in the message. */
CC_COLL_API cc_coll_status_t cc_coll_check_version_numbers(int header_major, int header_minor);

/* Checks the header this translation unit was compiled with against the
 * library it runs with. cc_coll_comm_create() does this on every call. */
static inline cc_coll_status_t cc_coll_check_version(void)
{
    return cc_coll_check_version_numbers(CC_COLL_VERSION_MAJOR, CC_COLL_VERSION_MINOR);
}

/* ------------------------------------------------------------------------ */
/* Data types, reductions, methods                                           */
/* ------------------------------------------------------------------------ */

typedef enum cc_coll_dtype {
    CC_COLL_F32  = 0,  /* IEEE-754 binary32                          */
    CC_COLL_F64  = 1,  /* IEEE-754 binary64                          */
    CC_COLL_F16  = 2,  /* IEEE-754 binary16, summed element by element
                          in binary32 and rounded to nearest-even      */
    CC_COLL_BF16 = 3   /* bfloat16, same rule as F16                  */
} cc_coll_dtype_t;

typedef enum cc_coll_op {
    CC_COLL_SUM = 0,  /* element-wise sum over the communicator        */
    CC_COLL_AVG = 1   /* SUM divided by the communicator size, in the
                         element type (binary32 for F16/BF16)          */
} cc_coll_op_t;

typedef enum cc_coll_method {
    CC_COLL_METHOD_NONE = 0, /* no compression: MPI_Allreduce itself,
                                bit-identical to calling it directly   */
    CC_COLL_METHOD_TOPK = 1, /* top-k sparsification with error feedback,
                                (index, value) pairs gathered from every
                                rank and scatter-added                 */
    CC_COLL_METHOD_SKETCH = 2, /* sparsification with error feedback, then a
                                homomorphic count sketch summed by MPI and
                                decoded by peeling: lossless when the
                                sketch is not overloaded               */
    CC_COLL_METHOD_LOWRANK = 3, /* PowerSGD: the buffer viewed as a rows x
                                cols matrix M is sent as rank-r factors
                                P (rows x r) and Q (cols x r), one
                                MPI_Allreduce each, with error feedback
                                and a warm-started Q; an allreduce
                                tensor without a shape is 1-D and is
                                sent densely                           */
    CC_COLL_METHOD_AUTO = 4,   /* per call, NONE or the communicator's
                                lossy method (CC_COLL_AUTO_METHOD),
                                whichever its cost model predicts
                                faster from the message size, the
                                measured link and the measured
                                compute (since 0.6); reduce-scatter
                                and point-to-point calls run NONE      */
    CC_COLL_METHOD_HALF = 5,   /* every element sent as bfloat16 or
                                binary16 (CC_COLL_HALF_FORMAT) and
                                summed in the input's precision: half
                                the bytes of NONE for F32, error
                                feedback optional (since 0.7)          */
    CC_COLL_METHOD_QUANT = 6,  /* every element sent as a b-bit level
                                of its chunk (CC_COLL_QUANT_BITS, a
                                binary32 offset and step per
                                CC_COLL_QUANT_CHUNK elements), with
                                two-stage error feedback (since 0.8)   */
    CC_COLL_METHOD_ONEBIT = 7  /* every element sent as its sign, one
                                scale (mean |v|) per
                                CC_COLL_ONEBIT_CHUNK elements, with
                                two-stage error feedback (since 0.8)   */
} cc_coll_method_t;

/* How SKETCH chooses the elements it sends (cc_coll_params_t.sparsifier). */
typedef enum cc_coll_sparsifier {
    CC_COLL_SPARSIFY_TOPK      = 0, /* the k = ceil(density * count) largest */
    CC_COLL_SPARSIFY_THRESHOLD = 1  /* TAGC's ladder: the largest threshold
                                       (from 1e-20 to 0.5) that zeroes at most
                                       zero_fraction of the elements        */
} cc_coll_sparsifier_t;

/* Size in bytes of one element of dtype, or 0 for an unknown dtype. */
CC_COLL_API size_t cc_coll_dtype_size(cc_coll_dtype_t dtype);

/* Lower-case name of a method ("none"), or NULL for an unknown value. */
CC_COLL_API const char *cc_coll_method_name(cc_coll_method_t method);

/* The methods of this library (since 0.7). Method ids are stable: the
 * values above never change, and a method added later takes the next
 * unused value after CC_COLL_METHOD_AUTO, so a build may have gaps.
 * Bindings and tools list the methods and what each can do from these
 * calls rather than from their own tables. */
typedef enum cc_coll_method_cap {
    CC_COLL_METHOD_CAP_LOSSY          = 1 << 0, /* results may differ from
                                                   MPI_Allreduce's           */
    CC_COLL_METHOD_CAP_REDUCE_SCATTER = 1 << 1, /* cc_coll_reduce_scatter runs
                                                   it (else NOT_SUPPORTED)    */
    CC_COLL_METHOD_CAP_P2P            = 1 << 2, /* cc_coll_send with compress
                                                   = 1 compresses with it     */
    CC_COLL_METHOD_CAP_MATRIX         = 1 << 3, /* views a tensor as a rows x
                                                   cols matrix (params rows,
                                                   cols; a tensor without a
                                                   shape is 1-D)              */
    CC_COLL_METHOD_CAP_STATE          = 1 << 4, /* keeps per-tensor state
                                                   besides residuals, in
                                                   checkpoints               */
    CC_COLL_METHOD_CAP_SELECTS        = 1 << 5, /* picks another method per
                                                   call (AUTO)               */
    CC_COLL_METHOD_CAP_AUTO_CANDIDATE = 1 << 6, /* CC_COLL_AUTO_METHOD may
                                                   name it                   */
    CC_COLL_METHOD_CAP_DENSITY        = 1 << 7  /* takes params.density:
                                                   density 1 keeps every
                                                   element (since 0.8)       */
} cc_coll_method_cap_t;

/* Number of methods of this library, AUTO included. */
CC_COLL_API int cc_coll_method_count(void);
/* The index-th method (0 <= index < cc_coll_method_count(), in id order)
 * into *method; CC_COLL_ERR_INVALID_ARG for an index out of range or a
 * NULL method. */
CC_COLL_API cc_coll_status_t cc_coll_method_at(int index, cc_coll_method_t *method);
/* The method's cc_coll_method_cap_t bits, 0 for an unknown value. */
CC_COLL_API unsigned cc_coll_method_caps(cc_coll_method_t method);
/* One line that says what the method does, or NULL for an unknown value. */
CC_COLL_API const char *cc_coll_method_summary(cc_coll_method_t method);
/* The method named `name` ("topk", case-insensitive) into *method;
 * CC_COLL_ERR_INVALID_METHOD, with the names in the message, for a name
 * that is none of them. */
CC_COLL_API cc_coll_status_t cc_coll_method_from_name(const char *name, cc_coll_method_t *method);

/* ------------------------------------------------------------------------ */
/* Communicator                                                              */
/* ------------------------------------------------------------------------ */

typedef struct cc_coll_comm *cc_coll_comm_h;

/* Creates a libcc_coll communicator over `mpi_comm`. Collective over
 * mpi_comm. The communicator is duplicated (MPI_Comm_dup) and the duplicate
 * gets MPI_ERRORS_RETURN, so libcc_coll traffic never mixes with the caller's
 * and MPI failures come back as CC_COLL_ERR_MPI. The CC_COLL_* environment is
 * read here: later changes to it do not affect this communicator.
 * Intra-communicators only. Destroy with cc_coll_comm_destroy() before
 * MPI_Finalize. */
CC_COLL_API cc_coll_status_t cc_coll_comm_create_versioned(MPI_Comm mpi_comm, cc_coll_comm_h *comm,
                                                           int header_major, int header_minor);

/* The same from a Fortran communicator handle (MPI_Fint, as MPI_Comm_c2f
 * returns and Fortran's `integer :: comm` holds). A handle that names no
 * communicator (never one, or freed) is CC_COLL_ERR_INVALID_ARG with every
 * MPI: where handles are integers (the MPICH ABI), MPI is asked with
 * MPI_ERRORS_RETURN set on MPI_COMM_WORLD and MPI_COMM_SELF for that one
 * check, so a thread of the program that makes an erroneous MPI call at
 * that moment gets an error code instead of the usual abort. */
CC_COLL_API cc_coll_status_t cc_coll_comm_create_fint_versioned(MPI_Fint mpi_comm, cc_coll_comm_h *comm,
                                                                int header_major, int header_minor);

static inline cc_coll_status_t cc_coll_comm_create(MPI_Comm mpi_comm, cc_coll_comm_h *comm)
{
    return cc_coll_comm_create_versioned(mpi_comm, comm, CC_COLL_VERSION_MAJOR, CC_COLL_VERSION_MINOR);
}

static inline cc_coll_status_t cc_coll_comm_create_fint(MPI_Fint mpi_comm, cc_coll_comm_h *comm)
{
    return cc_coll_comm_create_fint_versioned(mpi_comm, comm, CC_COLL_VERSION_MAJOR, CC_COLL_VERSION_MINOR);
}

/* Frees the communicator and its duplicate of the MPI communicator (local,
 * not collective). Afterwards the handle is invalid: every call given it,
 * destroy included, returns CC_COLL_ERR_INVALID_COMM. Handles are never
 * reused, so a stale handle cannot reach a newer communicator. */
CC_COLL_API cc_coll_status_t cc_coll_comm_destroy(cc_coll_comm_h comm);

/* Rank and size of the communicator. */
CC_COLL_API cc_coll_status_t cc_coll_comm_rank(cc_coll_comm_h comm, int *rank);
CC_COLL_API cc_coll_status_t cc_coll_comm_size(cc_coll_comm_h comm, int *size);

/* ------------------------------------------------------------------------ */
/* Per-call parameters                                                       */
/* ------------------------------------------------------------------------ */

/* Bits of cc_coll_params_t.mask. A field is read only when its bit is set;
 * unset fields take the communicator's configuration (environment, then
 * default). Unknown bits are an error (CC_COLL_ERR_INVALID_PARAMS). */
enum cc_coll_params_field {
    CC_COLL_PARAMS_FIELD_METHOD  = (1ULL << 0),
    CC_COLL_PARAMS_FIELD_DENSITY = (1ULL << 1),
    CC_COLL_PARAMS_FIELD_EF      = (1ULL << 2),
    CC_COLL_PARAMS_FIELD_EF_KEY  = (1ULL << 3),
    CC_COLL_PARAMS_FIELD_SPARSIFIER    = (1ULL << 4),
    CC_COLL_PARAMS_FIELD_ZERO_FRACTION = (1ULL << 5),
    CC_COLL_PARAMS_FIELD_LOAD_FACTOR   = (1ULL << 6),
    CC_COLL_PARAMS_FIELD_SEED          = (1ULL << 7),
    CC_COLL_PARAMS_FIELD_SHAPE         = (1ULL << 8),
    CC_COLL_PARAMS_FIELD_RANK          = (1ULL << 9),
    CC_COLL_PARAMS_FIELD_WARM_START    = (1ULL << 10),
    CC_COLL_PARAMS_FIELD_START_ITER    = (1ULL << 11),
    CC_COLL_PARAMS_FIELD_MIN_COMPRESSION_RATE = (1ULL << 12)
};

typedef struct cc_coll_params {
    uint64_t         mask;     /* OR of cc_coll_params_field bits              */
    cc_coll_method_t method;   /* CC_COLL_PARAMS_FIELD_METHOD                  */
    double           density;  /* CC_COLL_PARAMS_FIELD_DENSITY: TOPK keeps
                                  k = ceil(density * count) elements per rank;
                                  0 < density <= 1                             */
    int              ef;       /* CC_COLL_PARAMS_FIELD_EF: 1 = error feedback
                                  on (the residual of this tensor is added to
                                  the next call's input), 0 = off              */
    uint64_t         ef_key;   /* CC_COLL_PARAMS_FIELD_EF_KEY: names the
                                  tensor's residual; without it the key is
                                  (recvbuf address, count, dtype)             */
    cc_coll_sparsifier_t sparsifier; /* CC_COLL_PARAMS_FIELD_SPARSIFIER:
                                  SKETCH's element choice                      */
    double           zero_fraction; /* CC_COLL_PARAMS_FIELD_ZERO_FRACTION:
                                  THRESHOLD's target zeroed fraction, [0, 1)  */
    double           load_factor; /* CC_COLL_PARAMS_FIELD_LOAD_FACTOR: SKETCH
                                  is sized so that support / cells stays at or
                                  under this, in (0, 16]; peeling is complete
                                  with high probability up to about 0.8, and
                                  more is left to estimates above           */
    uint64_t         seed;     /* CC_COLL_PARAMS_FIELD_SEED: SKETCH's hash
                                  seed and LOWRANK's seed for its initial
                                  Gaussian Q; identical on every rank         */
    /* LOWRANK (PowerSGD) fields. The buffer is viewed as a row-major
     * rows x cols matrix M, like torch's tensor.view(shape[0], -1).
     * cc_coll_allreduce and cc_coll_allreduce_group send a LOWRANK tensor
     * WITHOUT CC_COLL_PARAMS_FIELD_SHAPE densely, as a 1-D tensor (a bias),
     * like PyTorch's powerSGD_hook, which compresses only tensors of two or
     * more dimensions: it joins the dense batch, keeps no factors, and its
     * call count still advances. (Behaviour change of this release: such a
     * tensor used to be compressed in the near-square view; ask for that view
     * with rows = cols = 0.) cc_coll_send/recv keep the near-square view
     * without the field. */
    uint64_t         rows;     /* CC_COLL_PARAMS_FIELD_SHAPE: rows of M, >= 1;
                                  or 0 (with cols 0) for the near-square view:
                                  rows = ceil(sqrt(count)), cols = ceil(count /
                                  rows), the last row padded with zeros       */
    uint64_t         cols;     /* CC_COLL_PARAMS_FIELD_SHAPE: columns of M;
                                  rows x cols == count, or 0 for count / rows
                                  (rows must divide count); must be 0 when
                                  rows is 0                                   */
    int              rank;     /* CC_COLL_PARAMS_FIELD_RANK: the target rank,
                                  >= 1; r = min(rows, cols, rank)             */
    int              warm_start; /* CC_COLL_PARAMS_FIELD_WARM_START: 1 = start
                                  each step from the previous step's Q
                                  (re-orthogonalised), 0 = a fresh Gaussian
                                  Q every step                                */
    uint64_t         start_iter; /* CC_COLL_PARAMS_FIELD_START_ITER: the
                                  tensor's first start_iter calls are plain
                                  allreduces (no compression, no residual)    */
    double           min_compression_rate; /* CC_COLL_PARAMS_FIELD_MIN_
                                  COMPRESSION_RATE: a tensor is compressed only
                                  when (rows + cols) x r x rate < rows x cols;
                                  otherwise it is allreduced densely; >= 1    */
} cc_coll_params_t;

/* ------------------------------------------------------------------------ */
/* Collectives                                                               */
/* ------------------------------------------------------------------------ */

/* Device buffers and streams (builds with CUDA: cc_coll_build_flags() has
 * CC_COLL_BUILD_CUDA).
 *  - Every buffer may be host memory or CUDA device memory (cudaMalloc, or
 *    managed memory); each call finds out with cudaPointerGetAttributes. A
 *    call's buffers must all be in the same kind of memory, device buffers on
 *    the calling thread's current device (else CC_COLL_ERR_INVALID_ARG).
 *  - `stream` is a cudaStream_t, NULL meaning the legacy default stream. The
 *    call first waits for the work already enqueued on `stream` (so a kernel
 *    that produces sendbuf may still be queued), enqueues its own kernels on
 *    it, and returns once recvbuf holds the result: like MPI_Allreduce it is
 *    blocking, and on return none of its work is pending on `stream`. With
 *    host buffers a non-NULL stream is synchronised first; in a build without
 *    CUDA a non-NULL stream is CC_COLL_ERR_NOT_SUPPORTED.
 *  - cc_coll_allreduce and cc_coll_allreduce_group run every method on the
 *    device (CUDA kernels, cuBLAS, cuSOLVER, cuRAND); the wire format is that
 *    of host buffers, so TOPK results equal the host path's and SKETCH's
 *    agree up to the rounding of its atomically summed cells, and LOWRANK's
 *    Gaussian start comes from cuRAND (same seed rule, other numbers). Every
 *    rank must pass the same kind of memory (ranks that disagree get
 *    CC_COLL_ERR_MISMATCH from the agreement). Residuals and LOWRANK state of device
 *    calls stay on the device; a residual is used only from the kind of
 *    memory that created it (else CC_COLL_ERR_MISMATCH).
 *  - cc_coll_reduce_scatter and cc_coll_send/recv accept device buffers by
 *    copying them through host memory and running the host algorithm.
 *  - Device data reaches MPI directly when MPI is CUDA-aware
 *    (cc_coll_mpi_cuda_aware()), else staged through pinned host buffers in
 *    chunks (CC_COLL_CUDA_TRANSPORT=auto|direct|staged,
 *    CC_COLL_CUDA_STAGING_CHUNK). */

/* Allreduce of `count` elements of `dtype` with `op` over `comm`, like
 * MPI_Allreduce. In place when sendbuf == recvbuf; partially overlapping
 * buffers are an error. Buffers may be NULL when count == 0. `params` may be
 * NULL (all defaults). Every rank must pass the same count, dtype, op and
 * params (ef and ef_key excepted).
 *
 * Agreement (every collective: this one, cc_coll_allreduce_group and
 * cc_coll_reduce_scatter): on two or more ranks a call first exchanges a
 * fixed-size signature (one 160-byte MPI_Allreduce) of the collective, the
 * method, count, dtype, op, memory kind and the params that shape the
 * exchange; ranks that disagree, or a rank that cannot start the call after
 * its argument checks (a residual over the cap, say), make every rank
 * return an error (CC_COLL_ERR_MISMATCH, or that rank's own) before any data
 * moves, never a hang or wrong data. Argument errors found by the entry
 * point itself return without communicating, as in MPI.
 *
 * Buffers may be device memory and `stream` a cudaStream_t (see
 * "Device buffers and streams" above; NULL for host-only code). count must
 * fit MPI's count type (INT_MAX elements). */
CC_COLL_API cc_coll_status_t cc_coll_allreduce(const void *sendbuf, void *recvbuf, size_t count,
                                               cc_coll_dtype_t dtype, cc_coll_op_t op,
                                               const cc_coll_params_t *params, cc_coll_comm_h comm,
                                               void *stream);

/* Reduce-scatter of `recvcount` x P elements into `recvcount` per rank, like
 * MPI_Reduce_scatter_block: rank r receives the reduction of every rank's
 * elements [r * recvcount, (r + 1) * recvcount). sendbuf holds recvcount x P
 * elements. In place when sendbuf == recvbuf: the buffer holds recvcount x P
 * elements on entry and this rank's shard in its first recvcount elements on
 * return. Methods: NONE (MPI_Reduce_scatter_block itself), TOPK (top k of
 * each shard, one MPI_Alltoall of fixed-size payloads), SKETCH (per-shard
 * bitmaps and sketches, one MPI_Reduce_scatter_block with BOR and one with
 * SUM). recvcount x P must fit MPI's count type. */
CC_COLL_API cc_coll_status_t cc_coll_reduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                                                    cc_coll_dtype_t dtype, cc_coll_op_t op,
                                                    const cc_coll_params_t *params, cc_coll_comm_h comm,
                                                    void *stream);

/* Several tensors in one call: tensor i is sendbufs[i] -> recvbufs[i],
 * counts[i] elements of dtypes[i], with params[i] (params may be NULL: all
 * defaults; else an array of ntensors entries). sendbufs may be NULL (every
 * tensor in place), and sendbufs[i] == recvbufs[i] is in place for one
 * tensor. One `op` for all. Every rank must pass the same tensors in the
 * same order.
 *
 * The point is fewer, larger messages:
 *  - every LOWRANK tensor that is compressed this step contributes its P to
 *    one MPI_Allreduce and its Q to a second one (one pair per work type:
 *    binary64 for F64, binary32 for the others);
 *  - NONE tensors and the LOWRANK tensors that are not compressed this step
 *    (1-D tensors: those without CC_COLL_PARAMS_FIELD_SHAPE; tensors before
 *    their start_iter, or failing the min_compression_rate test) are packed
 *    into one plain MPI_Allreduce per dtype;
 *  - TOPK and SKETCH tensors run one after another, as cc_coll_allreduce.
 * Before moving data the ranks check (the agreement exchange, as every
 * collective) that they agree on the group's layout (counts, dtypes,
 * methods, their params, shapes, ranks, call counts); a disagreement is
 * CC_COLL_ERR_MISMATCH on every rank. ntensors == 0 moves no data but takes
 * part in the agreement (another rank's non-empty group is a mismatch).
 * cc_coll_allreduce(LOWRANK) is a group of one. */
CC_COLL_API cc_coll_status_t cc_coll_allreduce_group(size_t ntensors, const void *const *sendbufs,
                                                     void *const *recvbufs, const size_t *counts,
                                                     const cc_coll_dtype_t *dtypes, cc_coll_op_t op,
                                                     const cc_coll_params_t *params, cc_coll_comm_h comm,
                                                     void *stream);

/* ------------------------------------------------------------------------ */
/* Non-blocking collectives                                                  */
/* ------------------------------------------------------------------------ */

/* A request: one non-blocking collective in flight. Handles are ids, never
 * reused: a freed or forged handle is CC_COLL_ERR_INVALID_ARG, never a
 * crash. */
typedef struct cc_coll_request *cc_coll_request_h;

/* cc_coll_iallreduce, cc_coll_iallreduce_group and cc_coll_ireduce_scatter
 * take the arguments of their blocking forms plus `request`, check them as
 * the blocking forms' entry points do (an argument error returns at once,
 * with *request NULL and nothing posted), start the collective and return.
 * The collective gives the blocking form's result, bit for bit, and updates
 * residuals and LOWRANK state as the blocking form would. What the blocking
 * form reports through the agreement (a LOWRANK shape that does not fit the
 * count, a residual over the cap, ranks that disagree) is the request's
 * status, from cc_coll_wait or cc_coll_test.
 *
 * Rules (docs/api.md, "Non-blocking collectives"):
 *  - The buffers belong to the request until it completes: the caller must
 *    not write sendbuf, nor read or write recvbuf, meanwhile. A request
 *    whose recvbuf overlaps a buffer of a request still in flight, or whose
 *    sendbuf overlaps such a request's recvbuf, is CC_COLL_ERR_INVALID_ARG
 *    (nothing is posted). The arrays of a group (sendbufs, counts, params,
 *    ...) are copied: only the tensors' memory stays in use.
 *  - Every rank posts the collectives of a communicator, blocking and
 *    non-blocking, in the same order. They run in that order, one at a
 *    time per communicator; those of different communicators interleave.
 *    Ranks whose orders differ get CC_COLL_ERR_MISMATCH from the agreement
 *    where the two calls differ in kind, method, count, dtype, op or params.
 *  - Error feedback: requests that use the same residual (the same ef_key,
 *    or the same recvbuf/count/dtype) run in posting order, each seeing the
 *    residual the previous one left, exactly as blocking calls in that
 *    order. A request that fails leaves every residual as it was.
 *  - A blocking collective on a communicator with requests in flight first
 *    completes them. The calls that read or reset residuals and LOWRANK
 *    state (cc_coll_ef_*, cc_coll_state_bytes, cc_coll_lowrank_*) return
 *    CC_COLL_ERR_INVALID_ARG while requests are in flight on their
 *    communicator. cc_coll_comm_destroy completes them first.
 *  - Progress: with CC_COLL_PROGRESS=thread (or auto under
 *    MPI_THREAD_MULTIPLE) a library thread runs the requests' compression,
 *    MPI calls and decompression while the caller computes; otherwise they
 *    advance only inside cc_coll_test, cc_coll_wait and cc_coll_waitall
 *    (and the first step, the agreement, is started here).
 *  - Device buffers: the request's kernels are enqueued on `stream` after
 *    the work already there, by the thread that advances the request. Its
 *    completion is observed through the request (cc_coll_wait), not by
 *    stream order: wait before enqueuing work that reads recvbuf.
 *  - A request is freed by cc_coll_request_free only; completing it does
 *    not free it, so its status and message stay readable. */
CC_COLL_API cc_coll_status_t cc_coll_iallreduce(const void *sendbuf, void *recvbuf, size_t count,
                                                cc_coll_dtype_t dtype, cc_coll_op_t op,
                                                const cc_coll_params_t *params, cc_coll_comm_h comm,
                                                void *stream, cc_coll_request_h *request);
CC_COLL_API cc_coll_status_t cc_coll_ireduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                                                     cc_coll_dtype_t dtype, cc_coll_op_t op,
                                                     const cc_coll_params_t *params, cc_coll_comm_h comm,
                                                     void *stream, cc_coll_request_h *request);
CC_COLL_API cc_coll_status_t cc_coll_iallreduce_group(size_t ntensors, const void *const *sendbufs,
                                                      void *const *recvbufs, const size_t *counts,
                                                      const cc_coll_dtype_t *dtypes, cc_coll_op_t op,
                                                      const cc_coll_params_t *params, cc_coll_comm_h comm,
                                                      void *stream, cc_coll_request_h *request);

/* Sets *done to 1 when the request has completed (advancing requests first
 * when the caller drives them), else 0. Returns the request's status once
 * done (its message in cc_coll_last_error()), CC_COLL_OK while it runs, or
 * an error about the arguments (NULL done, a dead handle). */
CC_COLL_API cc_coll_status_t cc_coll_test(cc_coll_request_h request, int *done);
/* Until the request has completed; returns its status (its message in
 * cc_coll_last_error()). */
CC_COLL_API cc_coll_status_t cc_coll_wait(cc_coll_request_h request);
/* Waits for requests[0..n): returns CC_COLL_OK when all succeeded, else the
 * status of the first that failed (its message in cc_coll_last_error()).
 * `statuses`, when not NULL, receives every request's status. NULL entries
 * are skipped (CC_COLL_OK); a dead handle is CC_COLL_ERR_INVALID_ARG for its
 * entry, after the others have been waited for. */
CC_COLL_API cc_coll_status_t cc_coll_waitall(size_t n, const cc_coll_request_h *requests,
                                             cc_coll_status_t *statuses);
/* A request's state without advancing it: *done (0/1) and, once done,
 * *status and *message (a string owned by the request: "" on success, valid
 * until cc_coll_request_free). Any output pointer may be NULL. */
CC_COLL_API cc_coll_status_t cc_coll_request_status(cc_coll_request_h request, int *done, cc_coll_status_t *status,
                                                    const char **message);
/* Frees the handle. A request still in flight is not cancelled (the other
 * ranks take part in it): it runs to its end, and its buffers stay in use
 * until then (cc_coll_comm_destroy, a blocking call on its communicator,
 * or MPI_Finalize completes it). Collectives cannot be cancelled, as in
 * MPI. */
CC_COLL_API cc_coll_status_t cc_coll_request_free(cc_coll_request_h request);

/* ------------------------------------------------------------------------ */
/* Compressed point-to-point (pipeline traffic, Optimus-CC)                  */
/* ------------------------------------------------------------------------ */

/* Sends `count` elements of `dtype` to rank `dest`, like MPI_Send. With
 * compress == 1 the message is compressed with params' method: LOWRANK (one
 * PowerSGD step done locally: P and Q are sent, the receiver rebuilds P Q^T)
 * or TOPK ((index, value) pairs); NONE sends the data as it is, and SKETCH is
 * CC_COLL_ERR_NOT_SUPPORTED. compress == 0 sends the data uncompressed.
 *
 * Lazy error propagation (LEP): with EF on (the default), the sender keeps
 * one residual per channel, a channel being (dest, params->ef_key when
 * CC_COLL_PARAMS_FIELD_EF_KEY is set, else tag). Every send on a channel adds
 * its residual to the data first; a compressed send leaves the compression
 * error in it, an uncompressed send empties it (up to rounding to the dtype).
 * So the running sum of what the receiver got tracks the running sum of what
 * was sent, with a bounded difference: the residual. A send with EF off
 * neither reads nor changes the channel's residual (to carry the error only
 * to the next compressed send, pass ef = 0 on the uncompressed ones).
 *
 * The receiver checks the message against its own arguments (count, dtype,
 * and, for a compressed message, method, shape and rank or density) and
 * answers; a disagreement is CC_COLL_ERR_MISMATCH on both sides, the receive
 * buffer is left untouched and the sender's residual is as before the call.
 * The answer makes cc_coll_send return only once the receiver has the
 * message. tag must be in [0, cc_coll_p2p_tag_ub()]; count x element size +
 * 48 must fit an int. A compressed message goes uncompressed when it would
 * not be smaller, when LOWRANK's compression test fails, or when the data
 * holds NaN/Inf the method cannot carry; start_iter does not apply. Only the
 * sender counts the call in its statistics (bytes_wire: header + payload).
 * Argument errors are found before anything is sent: as with MPI, the peer
 * then keeps waiting. */
CC_COLL_API cc_coll_status_t cc_coll_send(const void *buf, size_t count, cc_coll_dtype_t dtype, int dest, int tag,
                                          int compress, const cc_coll_params_t *params, cc_coll_comm_h comm,
                                          void *stream);

/* Receives what cc_coll_send sent from rank `source` (not MPI_ANY_SOURCE)
 * with `tag`, compressed or not, into `buf`. params give what a compressed
 * message must match (method, shape, rank, density): pass the sender's. */
CC_COLL_API cc_coll_status_t cc_coll_recv(void *buf, size_t count, cc_coll_dtype_t dtype, int source, int tag,
                                          const cc_coll_params_t *params, cc_coll_comm_h comm, void *stream);

/* The largest tag cc_coll_send/recv accept on `comm` (half of MPI_TAG_UB:
 * each message uses two MPI tags). */
CC_COLL_API cc_coll_status_t cc_coll_p2p_tag_ub(cc_coll_comm_h comm, int *tag_ub);

/* Copies the LEP residual of the channel (dest, tag or params->ef_key) into
 * `out`, `count` doubles (zeros when the channel has none). */
CC_COLL_API cc_coll_status_t cc_coll_lep_get_residual(cc_coll_comm_h comm, int dest, int tag,
                                                      const cc_coll_params_t *params, size_t count,
                                                      cc_coll_dtype_t dtype, double *out);

/* Drops the LEP residual (and warm-start Q) of one channel. */
CC_COLL_API cc_coll_status_t cc_coll_lep_reset(cc_coll_comm_h comm, int dest, int tag,
                                               const cc_coll_params_t *params);

/* ------------------------------------------------------------------------ */
/* Low-rank state                                                            */
/* ------------------------------------------------------------------------ */

/* A LOWRANK tensor (named like its residual: params->ef_key, else (recvbuf,
 * count, dtype)) keeps its number of calls, the matrix shape, and the P and
 * Q of its last compressed step. This copies them out: *rows, *cols, *rank
 * (0 when the tensor has not been compressed yet, as for a tensor sent
 * without a shape, which is sent densely), *calls; then, when p / q
 * are not NULL and *rank > 0, P (rows x rank) and the warm-start Q (cols x
 * rank, already divided by the communicator size), row-major, as doubles.
 * Any output pointer may be NULL. */
CC_COLL_API cc_coll_status_t cc_coll_lowrank_get_state(cc_coll_comm_h comm, const cc_coll_params_t *params,
                                                       const void *recvbuf, size_t count, cc_coll_dtype_t dtype,
                                                       uint64_t *rows, uint64_t *cols, int *rank,
                                                       uint64_t *calls, double *p, double *q);

/* Sets the tensor's warm-start Q to `q` (cols x r, row-major, r and the
 * shape resolved from params as a call would), e.g. to restore a checkpoint
 * or to start from a Q of the caller's choice. With warm start on, the next
 * compressed call orthogonalises it and uses it in place of the seeded
 * Gaussian. Must be done alike on every rank. params must set
 * CC_COLL_PARAMS_FIELD_SHAPE: a tensor without a shape is sent densely and
 * has no factors (CC_COLL_ERR_INVALID_ARG). The state counts against
 * CC_COLL_STATE_MAX_BYTES (see cc_coll_state_bytes): a new key, or larger
 * factors, past it is CC_COLL_ERR_EF_LIMIT, nothing changed. */
CC_COLL_API cc_coll_status_t cc_coll_lowrank_set_q(cc_coll_comm_h comm, const cc_coll_params_t *params,
                                                   const void *recvbuf, size_t count, cc_coll_dtype_t dtype,
                                                   const double *q);

/* ------------------------------------------------------------------------ */
/* Error-feedback store                                                      */
/* ------------------------------------------------------------------------ */

/* Lossy methods keep, per tensor, the residual between what the caller gave
 * and what this rank transmitted, and add it to that tensor's next input.
 * Residuals belong to the communicator and die with it. A residual is named
 * the way cc_coll_allreduce names it: params->ef_key when
 * CC_COLL_PARAMS_FIELD_EF_KEY is set, else (recvbuf address, count, dtype).
 * Residuals are kept in binary64 for F64 and binary32 for the other dtypes. */

/* Bytes held by all residuals of the communicator on this rank (the
 * methods' other per-tensor state: cc_coll_state_bytes). */
CC_COLL_API cc_coll_status_t cc_coll_ef_bytes(cc_coll_comm_h comm, uint64_t *bytes);

/* Copies the residual named by (params, recvbuf, count, dtype) into `out`,
 * `count` doubles. A tensor with no residual yet copies zeros. */
CC_COLL_API cc_coll_status_t cc_coll_ef_get_residual(cc_coll_comm_h comm, const cc_coll_params_t *params,
                                                     const void *recvbuf, size_t count, cc_coll_dtype_t dtype,
                                                     double *out);

/* Drops one residual (the next call on that tensor starts from zero) and,
 * for LOWRANK, the tensor's low-rank state (call count, P, Q); a tensor with
 * neither is not an error. */
CC_COLL_API cc_coll_status_t cc_coll_ef_reset(cc_coll_comm_h comm, const cc_coll_params_t *params,
                                              const void *recvbuf, size_t count, cc_coll_dtype_t dtype);

/* Drops every residual and low-rank state of the communicator, and every
 * LEP residual of its point-to-point channels. */
CC_COLL_API cc_coll_status_t cc_coll_ef_reset_all(cc_coll_comm_h comm);

/* Bytes held by the methods' per-tensor state other than residuals on this
 * rank: LOWRANK's call count and factors P and Q of each tensor and each
 * point-to-point channel, kept with error feedback off too (each key is
 * charged a fixed entry size plus the largest P and Q it was charged for,
 * host or device memory). Bounded by CC_COLL_STATE_MAX_BYTES: creating
 * state for a new key past it is CC_COLL_ERR_EF_LIMIT. cc_coll_ef_reset,
 * cc_coll_ef_reset_all and cc_coll_lep_reset give the bytes back.
 * cc_coll_ef_bytes does not count this state. */
CC_COLL_API cc_coll_status_t cc_coll_state_bytes(cc_coll_comm_h comm, uint64_t *bytes);

/* ------------------------------------------------------------------------ */
/* Checkpointing compression state                                           */
/* ------------------------------------------------------------------------ */

/* A communicator's whole compression state on this rank as one versioned
 * byte blob (docs/wire.md, "State checkpoint"): every residual with its key,
 * every LEP residual of a point-to-point channel, and the methods' own
 * per-tensor state (LOWRANK: call counts, shapes, P and Q of tensors and
 * channels). Saved with a training checkpoint and restored into a new
 * communicator, it lets a resumed run continue bit-identically to one that
 * never stopped. Each rank exports and imports its own blob. Residuals named
 * by address (no CC_COLL_PARAMS_FIELD_EF_KEY) keep that address: they match
 * again only where the tensors lie at the same addresses, so give tensors
 * ef_keys to checkpoint them across processes. Device-memory state is copied
 * through host memory. Both calls are local (no MPI), wait for a collective
 * or a send running on the communicator, and return
 * CC_COLL_ERR_INVALID_ARG while non-blocking requests are in flight on it.
 * Since 0.5. */

/* The blob. With buf == NULL: *size = the blob's size, CC_COLL_OK. With a
 * buffer of *size bytes: the blob written and *size = its size; a buffer too
 * small is CC_COLL_ERR_INVALID_ARG with the size needed in *size, nothing
 * written. Device state that cannot be copied down is CC_COLL_ERR_CUDA. */
CC_COLL_API cc_coll_status_t cc_coll_state_export(cc_coll_comm_h comm, void *buf, size_t *size);

/* Replaces the communicator's whole compression state (residuals, LEP
 * residuals, every method's per-tensor state) with the blob's, all or
 * nothing: the whole blob is checked first, and on any error the state is
 * as before. Errors: CC_COLL_ERR_INVALID_ARG for bytes that are not a blob
 * (magic), truncated, corrupt (checksum) or malformed (any field out of its
 * domain), the message naming what and where; CC_COLL_ERR_VERSION_MISMATCH
 * for a format version or library major version this library cannot read;
 * CC_COLL_ERR_MISMATCH for a blob exported by another rank or on a
 * communicator of another size; CC_COLL_ERR_EF_LIMIT when the residuals pass
 * CC_COLL_EF_MAX_BYTES or the method state CC_COLL_STATE_MAX_BYTES;
 * CC_COLL_ERR_NOT_SUPPORTED for device-memory state in a process without a
 * usable CUDA device, or state of a method this library lacks. Device
 * state is restored into device memory on the calling thread's current
 * CUDA device. */
CC_COLL_API cc_coll_status_t cc_coll_state_import(cc_coll_comm_h comm, const void *buf, size_t size);

/* ------------------------------------------------------------------------ */
/* Statistics                                                                */
/* ------------------------------------------------------------------------ */

/* Bits of cc_coll_stats_t.mask: the caller sets the fields it wants filled. */
enum cc_coll_stats_field {
    CC_COLL_STATS_FIELD_CALLS              = (1ULL << 0),
    CC_COLL_STATS_FIELD_BYTES_UNCOMPRESSED = (1ULL << 1),
    CC_COLL_STATS_FIELD_BYTES_WIRE         = (1ULL << 2),
    CC_COLL_STATS_FIELD_TIME_COMPRESS      = (1ULL << 3),
    CC_COLL_STATS_FIELD_TIME_COMMUNICATE   = (1ULL << 4),
    CC_COLL_STATS_FIELD_TIME_DECOMPRESS    = (1ULL << 5),
    CC_COLL_STATS_FIELD_SKETCH_ELEMENTS    = (1ULL << 6),
    CC_COLL_STATS_FIELD_SKETCH_PEELED      = (1ULL << 7),
    CC_COLL_STATS_FIELD_TIME_TOTAL         = (1ULL << 8),
    CC_COLL_STATS_FIELD_AUTO_CALLS         = (1ULL << 9),
    CC_COLL_STATS_FIELD_AUTO_LOSSY_CALLS   = (1ULL << 10),
    CC_COLL_STATS_FIELD_AUTO_PREDICTED     = (1ULL << 11),
    CC_COLL_STATS_FIELD_AUTO_EXPLORED_CALLS = (1ULL << 12),
    CC_COLL_STATS_FIELD_AUTO_MEASURED      = (1ULL << 13)
};

/* Per-communicator counters, summed over this rank's calls since creation or
 * the last reset. Bytes are those of this rank: `bytes_uncompressed` is what
 * the caller asked to reduce (count x element size); `bytes_wire` is the
 * payload this rank handed to MPI (the MPI algorithm itself may move up to
 * 2(P-1)/P times that for an allreduce). Times are seconds. */
typedef struct cc_coll_stats {
    uint64_t mask;
    uint64_t calls;
    uint64_t bytes_uncompressed;
    uint64_t bytes_wire;
    double   time_compress;
    double   time_communicate;
    double   time_decompress;
    uint64_t sketch_elements;      /* SKETCH: support elements decoded       */
    uint64_t sketch_peeled;        /* SKETCH: of those, recovered exactly by
                                      peeling (the rest are estimates)       */
    double   time_total;           /* wall time inside this communicator's
                                      collective and point-to-point calls,
                                      entry to return, failed calls included:
                                      argument checks, locating the buffers
                                      and planning as well as the three
                                      phases above (since 0.4)               */
    uint64_t auto_calls;           /* calls with method AUTO (since 0.6)     */
    uint64_t auto_lossy_calls;     /* of those, how many the cost model sent
                                      with its lossy method (the rest: NONE) */
    double   auto_predicted;       /* seconds the cost model predicted for
                                      those calls' choices (as corrected by
                                      the calls before them), summed         */
    uint64_t auto_explored_calls;  /* of those, how many ran the runner-up
                                      to check the model (since 0.8)         */
    double   auto_measured;        /* seconds those calls took on this rank,
                                      as AUTO timed them: compare with
                                      auto_predicted (since 0.8)             */
} cc_coll_stats_t;

CC_COLL_API cc_coll_status_t cc_coll_comm_get_stats(cc_coll_comm_h comm, cc_coll_stats_t *stats);

/* The cost model of CC_COLL_METHOD_AUTO (docs/algorithms.md, "The cost
 * model"; since 0.6): for an allreduce of `count` elements of `dtype` with
 * `params` (may be NULL; its method is ignored, its shape and density are
 * used), what AUTO would run, *chosen (CC_COLL_METHOD_NONE or the
 * communicator's CC_COLL_AUTO_METHOD), and the predicted seconds of both,
 * *predicted_none and *predicted_lossy (+inf where the lossy method would
 * send the tensor densely). Any output pointer may be NULL. The model is
 * measured the first time it is needed (at creation under
 * CC_COLL_METHOD=auto): when the communicator has none yet this call is
 * collective, every rank must make it, and it waits for the communicator's
 * requests; afterwards it is local. Every rank holds the same model and
 * gets the same answer. */
CC_COLL_API cc_coll_status_t cc_coll_auto_predict(cc_coll_comm_h comm, size_t count, cc_coll_dtype_t dtype,
                                                  const cc_coll_params_t *params, cc_coll_method_t *chosen,
                                                  double *predicted_none, double *predicted_lossy);
CC_COLL_API cc_coll_status_t cc_coll_comm_reset_stats(cc_coll_comm_h comm);

/* ------------------------------------------------------------------------ */
/* Configuration and build information                                       */
/* ------------------------------------------------------------------------ */

/* One entry of the settings table. Each setting NAME is read from the
 * environment variable CC_COLL_NAME. */
typedef struct cc_coll_setting {
    const char *name;          /* e.g. "METHOD"                             */
    const char *env_var;       /* e.g. "CC_COLL_METHOD"                     */
    const char *default_value; /* textual default                           */
    const char *value;         /* value in effect now: environment if set
                                  and valid, else the default               */
    const char *doc;           /* one paragraph of documentation            */
    int         from_env;      /* 1 when `value` came from the environment  */
} cc_coll_setting_t;

/* Number of settings in the table. */
CC_COLL_API size_t cc_coll_setting_count(void);

/* Fills `out` with setting `index` (0 <= index < count). The strings are
 * owned by the library and stay valid until the next call of this function
 * on the same thread. If the environment holds an invalid value, `value` is
 * the default, `from_env` is 0 and CC_COLL_ERR_CONFIG is returned with the
 * reason (the entry is still filled). */
CC_COLL_API cc_coll_status_t cc_coll_setting_get(size_t index, cc_coll_setting_t *out);

/* Bits returned by cc_coll_build_flags(). */
enum cc_coll_build_flag {
    CC_COLL_BUILD_CUDA    = (1U << 0), /* built with CUDA support           */
    CC_COLL_BUILD_FORTRAN = (1U << 1)  /* Fortran enabled in the build      */
};

CC_COLL_API unsigned cc_coll_build_flags(void);

/* 1 when the MPI library reports CUDA-aware support at run time, 0 when it
 * reports none or cannot tell (no MPIX_Query_cuda_support). */
CC_COLL_API int cc_coll_mpi_cuda_aware(void);

/* The CUDA devices this process can use: 0 in a build without CUDA, or where
 * there is no driver or GPU (device buffers then cannot exist). */
CC_COLL_API int cc_coll_cuda_device_count(void);

/* Where a buffer lives, as the collectives decide it: 1 for CUDA device or
 * managed memory, 0 for host memory (always 0 in a build without CUDA, for
 * NULL, and in a process that has not loaded the CUDA driver, which this call
 * never loads), or CC_COLL_ERR_CUDA (negative) when a broken CUDA context
 * leaves it unknown. Costs tens of nanoseconds for host memory in a process
 * without CUDA. Since 0.4. */
CC_COLL_API int cc_coll_buffer_on_device(const void *ptr);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* CC_COLL_H */
