/*
 * cc_coll_allreduce on CUDA device buffers, with real ranks (run with 1, 2,
 * 3 and 4 ranks, once with CC_COLL_CUDA_TRANSPORT=staged and once with
 * =direct). Public C API and the CUDA runtime API only.
 *
 * Exit status 77 (CTest: skipped) on every rank, after one line saying why:
 *   - no CUDA device (cc_coll_cuda_device_count() == 0, which includes a
 *     build without CUDA);
 *   - CC_COLL_CUDA_TRANSPORT=direct with an MPI that is not CUDA-aware
 *     (cc_coll_mpi_cuda_aware() == 0): the direct path cannot run, so the
 *     program only checks that device calls fail with
 *     CC_COLL_ERR_NOT_SUPPORTED (any other outcome fails the test) and skips
 *     the rest.
 *
 * Ranks on one node share its GPUs: rank r uses device (local rank % device
 * count). What is checked, from cc_coll.h's contract ("Device buffers and
 * streams") and the rules the host suites check (topk.c, sketch.c,
 * lowrank.c):
 *   - the same data allreduced from device buffers (communicator A) and from
 *     host buffers (communicator B, so residuals and low-rank state are
 *     separate) agree, for every method x F32/F64/F16/BF16 x SUM/AVG x in
 *     place / out of place:
 *       NONE  bit for bit (small-integer data: every sum is exact);
 *       TOPK  bit for bit, results and residuals, over several steps with
 *             error feedback (the selection, the wire and the rank-order
 *             scatter-add are specified identical);
 *       SKETCH within a small tolerance (device cells are summed with
 *             atomics), with the same support and peeled counts in the
 *             statistics;
 *       LOWRANK both recover a sum of rank-r matrices at rank >= r (F16/BF16
 *             at r + 1): to rounding on a second step from the first step's
 *             Q, to 10x that on a first step (the Gaussian start differs by
 *             design, and how well a random start meets the data is
 *             heavy-tailed);
 *     and both communicators count the same calls and wire bytes, the lossy
 *     methods fewer than the dense buffer's;
 *   - LOWRANK with CC_COLL_LOWRANK_FACTORS=bf16 and fp16: both paths within
 *     4 units of the format of a well-conditioned rank-r sum on a warm
 *     step, the same wire bytes, and the device path's EF invariant;
 *   - the error-feedback invariants on the device path over several steps:
 *     TOPK and SKETCH sum_t result_t + sum_ranks e_T == sum_t sum_ranks g_t,
 *     LOWRANK (AVG) per rank sum_t M^_t + e_T == sum_t g_t, the residual read
 *     with cc_coll_ef_get_residual;
 *   - the stream: sendbuf produced by work still queued on a non-blocking
 *     stream (a host callback that sleeps, then a copy from pinned memory, or
 *     a memset) is waited for, and the result is complete on return with
 *     nothing left pending on the stream;
 *   - argument errors: device and host buffers mixed, or a buffer on another
 *     device than the current one (CC_COLL_ERR_INVALID_ARG); NULL with a
 *     device buffer and count > 0 (CC_COLL_ERR_NULL_BUFFER); count 0 with
 *     device pointers is OK; a non-NULL stream with host buffers is OK. (An
 *     invalid stream handle is not tested: CUDA leaves its use undefined.)
 *   - 16 MiB+ tensors for every method (many staging chunks at the default
 *     CC_COLL_CUDA_STAGING_CHUNK);
 *   - cc_coll_allreduce_group on device buffers against the same group on
 *     host buffers, over two steps: dense batches of three dtypes, LOWRANK
 *     batches of both work types (and LOWRANK tensors routed to the dense
 *     batch), TOPK and SKETCH;
 *   - cc_coll_reduce_scatter on device buffers (the host algorithm on host
 *     copies): NONE, TOPK and SKETCH bit for bit, TOPK's residual too.
 *
 * Skips (exit 77) also when the device's compute mode refuses the ranks
 * that share it (prohibited, or exclusive with more ranks than devices).
 *
 * Any failure prints the case and calls MPI_Abort (exit status non-zero).
 *
 *   mpi_gpu_allreduce [TEST...]   run all tests, or only the named ones
 */
#define _POSIX_C_SOURCE 200809L /* setenv, unsetenv, nanosleep */

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>
#include <mpi.h>

#include "cc_coll.h"
#include "check.h"
#include "test_util.h"

/* CTest's SKIP_RETURN_CODE. */
#define SKIP_STATUS 77

/* Bytes after each device buffer that a call must leave alone. */
#define GUARD 64
#define GUARD_BYTE 0xC3

static const cc_coll_dtype_t kDtypes[] = {CC_COLL_F32, CC_COLL_F64, CC_COLL_F16, CC_COLL_BF16};
#define NDTYPES (sizeof kDtypes / sizeof kDtypes[0])

static uint64_t g_next_key = 0x6000;

static uint64_t next_key(void) { return g_next_key++; }

static uint64_t seed_for(int rank, int test_case)
{
    return 0x6b0d1ce5ull + (uint64_t)rank * 1000003ull + (uint64_t)test_case * 7919ull;
}

static const char *op_name(cc_coll_op_t op) { return op == CC_COLL_SUM ? "SUM" : "AVG"; }

/* The method's name as the library gives it ("topk"). */
static const char *method_name(cc_coll_method_t m)
{
    const char *name = cc_coll_method_name(m);
    return name ? name : "?";
}

/* ---- CUDA helpers --------------------------------------------------------- */

static void cuda_die(const char *call, cudaError_t e)
{
    fprintf(stderr, "[rank %d] FAIL%s%s: %s -> %s (%s)\n", g_rank, g_test[0] ? " in " : "", g_test, call,
            cudaGetErrorName(e), cudaGetErrorString(e));
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

#define CHECK_CUDA(call)                                                                               \
    do {                                                                                               \
        cudaError_t e_ = (call);                                                                       \
        if (e_ != cudaSuccess) cuda_die(#call, e_);                                                    \
    } while (0)

static void *dmalloc(size_t bytes)
{
    void *p = NULL;
    CHECK_CUDA(cudaMalloc(&p, bytes ? bytes : 1));
    return p;
}

static void to_device(void *dst, const void *src, size_t bytes)
{
    if (bytes > 0) CHECK_CUDA(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
}

static void to_host(void *dst, const void *src, size_t bytes)
{
    if (bytes > 0) CHECK_CUDA(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}

/* The guard bytes after the first `bytes` bytes of a device buffer are
 * untouched. */
static void expect_guard(const void *dbuf, size_t bytes, const char *desc)
{
    unsigned char g[GUARD];
    to_host(g, (const unsigned char *)dbuf + bytes, GUARD);
    for (int i = 0; i < GUARD; ++i)
        if (g[i] != GUARD_BYTE) die("%s: recvbuf (device) written past count", desc, 0);
}

/* ---- small helpers -------------------------------------------------------- */

static void call_ok(cc_coll_status_t st, const char *desc)
{
    if (st != CC_COLL_OK) die("%s", desc, (int)st);
}

static void expect_status(cc_coll_status_t st, cc_coll_status_t want, const char *desc)
{
    if (st != want) {
        fprintf(stderr, "[rank %d] FAIL in %s: %s: got %s, expected %s (message: \"%s\")\n", g_rank, g_test, desc,
                cc_coll_status_string(st), cc_coll_status_string(want), cc_coll_last_error());
        fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

/* A second communicator on MPI_COMM_WORLD, for the host-buffer calls. */
static cc_coll_comm_h host_comm(void)
{
    cc_coll_comm_h h = NULL;
    CHECK_CC(cc_coll_comm_create(MPI_COMM_WORLD, &h));
    return h;
}

static cc_coll_params_t with_ef(cc_coll_params_t p, int ef)
{
    p.mask |= CC_COLL_PARAMS_FIELD_EF;
    p.ef = ef;
    return p;
}

/* A method that codes every element on its own (HALF, QUANT, ONEBIT, and
 * any later one of that kind), learnt from its caps: lossy, with neither a
 * density nor a matrix view, not a selector (AUTO). */
static int element_codec(cc_coll_method_t m)
{
    const unsigned caps = cc_coll_method_caps(m);
    return (caps & CC_COLL_METHOD_CAP_LOSSY) != 0 &&
           (caps & (CC_COLL_METHOD_CAP_DENSITY | CC_COLL_METHOD_CAP_MATRIX | CC_COLL_METHOD_CAP_SELECTS)) == 0;
}

/* The params of one method for the agreement tests, under a fresh key. */
static cc_coll_params_t params_for(cc_coll_method_t m, int ef)
{
    switch (m) {
    case CC_COLL_METHOD_TOPK: return keyed(topk_params(0.01, ef), next_key());
    case CC_COLL_METHOD_SKETCH: return keyed(sketch_params(0.01, ef, 0.7), next_key());
    default: return keyed(element_codec(m) ? with_ef(method_params(m), ef) : method_params(m), next_key());
    }
}

static cc_coll_stats_t stats_of(cc_coll_comm_h h)
{
    return get_stats_masked(h, CC_COLL_STATS_FIELD_CALLS | CC_COLL_STATS_FIELD_BYTES_UNCOMPRESSED |
                                   CC_COLL_STATS_FIELD_BYTES_WIRE | CC_COLL_STATS_FIELD_SKETCH_ELEMENTS |
                                   CC_COLL_STATS_FIELD_SKETCH_PEELED);
}

/* Both communicators counted the same since the snapshots: calls, bytes
 * asked for, bytes handed to MPI, SKETCH support and peeled elements. */
static void expect_same_counts(const cc_coll_stats_t *dev0, const cc_coll_stats_t *dev1, const cc_coll_stats_t *host0,
                               const cc_coll_stats_t *host1, const char *desc)
{
    const uint64_t dv[5] = {dev1->calls - dev0->calls, dev1->bytes_uncompressed - dev0->bytes_uncompressed,
                            dev1->bytes_wire - dev0->bytes_wire, dev1->sketch_elements - dev0->sketch_elements,
                            dev1->sketch_peeled - dev0->sketch_peeled};
    const uint64_t hv[5] = {host1->calls - host0->calls, host1->bytes_uncompressed - host0->bytes_uncompressed,
                            host1->bytes_wire - host0->bytes_wire, host1->sketch_elements - host0->sketch_elements,
                            host1->sketch_peeled - host0->sketch_peeled};
    static const char *const names[5] = {"calls", "bytes_uncompressed", "bytes_wire", "sketch_elements",
                                         "sketch_peeled"};
    for (int i = 0; i < 5; ++i)
        if (dv[i] != hv[i]) {
            fprintf(stderr, "[rank %d] FAIL in %s: %s: stats %s: device buffers %llu, host buffers %llu\n", g_rank,
                    g_test, desc, names[i], (unsigned long long)dv[i], (unsigned long long)hv[i]);
            fflush(stderr);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
}

/* The device call took its compressed path: it handed MPI fewer bytes than
 * the dense buffer (a dense fallback hands over at least that many), so a
 * silent fallback on both paths cannot pass for agreement. */
static void expect_compressed(const cc_coll_stats_t *dev0, const cc_coll_stats_t *dev1, size_t dense_bytes,
                              const char *desc)
{
    const uint64_t wire = dev1->bytes_wire - dev0->bytes_wire;
    if (!(wire < (uint64_t)dense_bytes)) {
        fprintf(stderr, "[rank %d] FAIL in %s: %s: %llu wire bytes for a %zu-byte buffer: the call went dense\n",
                g_rank, g_test, desc, (unsigned long long)wire, dense_bytes);
        fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

/* ---- one call from device buffers and one from host buffers --------------- */

/* Runs cc_coll_allreduce(p, d, op) on this rank's input `x` (n elements of d,
 * packed) from device buffers on hd and from host buffers on hh, and leaves
 * both results (d buffers in host memory) in got_dev and got_host. Checks
 * that the device call wrote nothing past count and, out of place, left
 * sendbuf alone. */
static void run_both(cc_coll_comm_h hd, cc_coll_comm_h hh, const cc_coll_params_t *p, cc_coll_dtype_t d,
                     cc_coll_op_t op, int inplace, const void *x, size_t n, void *got_dev, void *got_host,
                     const char *desc)
{
    const size_t bytes = n * cc_coll_dtype_size(d);
    char what[300];

    /* host buffers */
    unsigned char *hsend = xmalloc(bytes);
    memcpy(hsend, x, bytes);
    if (inplace) memcpy(got_host, x, bytes);
    snprintf(what, sizeof what, "%s: host buffers", desc);
    call_ok(cc_coll_allreduce(inplace ? (const void *)got_host : hsend, got_host, n, d, op, p, hh, NULL), what);
    free(hsend);

    /* device buffers */
    unsigned char *dsend = dmalloc(bytes + GUARD), *drecv = dmalloc(bytes + GUARD);
    to_device(inplace ? drecv : dsend, x, bytes);
    if (!inplace) CHECK_CUDA(cudaMemset(drecv, 0x5A, bytes));
    CHECK_CUDA(cudaMemset(drecv + bytes, GUARD_BYTE, GUARD));
    snprintf(what, sizeof what, "%s: device buffers", desc);
    call_ok(cc_coll_allreduce(inplace ? (const void *)drecv : dsend, drecv, n, d, op, p, hd, NULL), what);
    to_host(got_dev, drecv, bytes);
    expect_guard(drecv, bytes, what);
    if (!inplace) {
        unsigned char *back = xmalloc(bytes);
        to_host(back, dsend, bytes);
        if (memcmp(back, x, bytes) != 0) die("%s: out-of-place call modified sendbuf (device)", what, 0);
        free(back);
    }
    CHECK_CUDA(cudaFree(dsend));
    CHECK_CUDA(cudaFree(drecv));
}

/* got_dev and got_host (d buffers) agree within tol * (|host| + max |host|). */
static void expect_close_to_host(cc_coll_dtype_t d, const void *got_dev, const void *got_host, size_t n, double tol,
                                 const char *desc)
{
    double *want = xmalloc((n ? n : 1) * sizeof *want), scale = 0.0;
    for (size_t i = 0; i < n; ++i) {
        want[i] = element(d, got_host, i);
        if (fabs(want[i]) > scale) scale = fabs(want[i]);
    }
    expect_close(d, got_dev, want, n, tol, scale, desc);
    free(want);
}

/* Device against host for SKETCH: the work type's rounding (binary32 for
 * F32/F16/BF16, binary64 for F64) plus one unit of the 16-bit formats. */
static double sketch_tol(cc_coll_dtype_t d)
{
    switch (d) {
    case CC_COLL_F64: return 1e-12;
    case CC_COLL_F32: return 1e-5;
    case CC_COLL_F16: return 2e-3;
    default: return 1.6e-2;
    }
}

/* LOWRANK against the exact sum (as lowrank.c's exact recovery), for a step
 * that starts from the previous step's Q on the same data. */
static double lowrank_tol(cc_coll_dtype_t d)
{
    switch (d) {
    case CC_COLL_F64: return 1e-10;
    case CC_COLL_F32: return 1e-4;
    case CC_COLL_F16: return 3e-3;
    default: return 2e-2;
    }
}

/* The same for a step from a Gaussian Q (a tensor's first step, or a warm
 * start from other data). Its error is the inputs' rounding amplified by
 * how badly the random Q meets the data's row space, a heavy-tailed factor:
 * over many starts (host Gaussians, standing in for cuRAND's other numbers)
 * it passes lowrank_tol now and then, up to 5x with a spare column, so a
 * fixed start on the device (cuRAND) is held to 10x: still far below what a
 * wrong product or a missed rank gives (> 5%, lowrank.c). */
static double lowrank_first_step_tol(cc_coll_dtype_t d) { return 10.0 * lowrank_tol(d); }

/* Both results (d buffers) are within tol (relative Frobenius error) of the
 * exact reduction `want`. */
static void expect_recovered(cc_coll_dtype_t d, const void *got_dev, const void *got_host, const double *want, size_t n,
                             double tol, const char *desc)
{
    const double err_dev = rel_err(d, got_dev, want, n), err_host = rel_err(d, got_host, want, n);
    if (!(err_dev < tol) || !(err_host < tol)) {
        fprintf(stderr, "[rank %d] %s: relative error device %.3g, host %.3g, expected < %.1g\n", g_rank, desc, err_dev,
                err_host, tol);
        die("%s: rank >= data rank must recover the sum on both paths", desc, 0);
    }
}

/* ---- low-rank data (as lowrank.c builds it) --------------------------------- */

/* The reduction (SUM or AVG) over the ranks of lowrank_input, in binary64. */
static void lowrank_reference(cc_coll_dtype_t d, cc_coll_op_t op, size_t n, size_t vrows, size_t vcols, int r,
                              uint64_t seed, double *want)
{
    double *x = xmalloc(n * sizeof *x);
    memset(want, 0, n * sizeof *want);
    for (int q = 0; q < g_size; ++q) {
        lowrank_input(d, n, vrows, vcols, r, seed, q, x);
        for (size_t i = 0; i < n; ++i) want[i] += x[i];
    }
    if (op == CC_COLL_AVG)
        for (size_t i = 0; i < n; ++i) want[i] /= (double)g_size;
    free(x);
}

/* ---- agreement of device and host buffers ----------------------------------- */

/* Test data for a method: small integers for NONE (exact sums), spread
 * magnitudes for TOPK and SKETCH (F16/BF16 values repeat, so the selection's
 * tie rule, lower index first, is exercised as well). */
static void method_data(cc_coll_method_t m, cc_coll_dtype_t d, double *x, size_t n, uint64_t seed)
{
    if (m == CC_COLL_METHOD_NONE) integer_values(x, n, seed);
    else random_values(d, x, n, seed, m == CC_COLL_METHOD_TOPK ? 8 : 4);
}

/* One method, every dtype x op x placement, `steps` calls per case on the
 * same tensor (TOPK: its residual compared after every step). */
static void agree_case(cc_coll_comm_h hd, cc_coll_comm_h hh, cc_coll_method_t m, cc_coll_dtype_t d, cc_coll_op_t op,
                       int inplace, size_t n, int steps, int tc)
{
    const size_t es = cc_coll_dtype_size(d);
    char desc[200];
    double *x = xmalloc(n * sizeof *x), *e_dev = xmalloc(n * sizeof *e_dev), *e_host = xmalloc(n * sizeof *e_host);
    void *packed = xmalloc(n * es), *got_dev = xmalloc(n * es), *got_host = xmalloc(n * es);
    const cc_coll_params_t p = params_for(m, 1);
    for (int t = 0; t < steps; ++t) {
        snprintf(desc, sizeof desc, "%s %s %s %s n=%zu step %d (P=%d)", method_name(m), dtype_name(d), op_name(op),
                 inplace ? "in place" : "out of place", n, t, g_size);
        method_data(m, d, x, n, seed_for(g_rank, tc * 100 + t));
        pack(d, x, n, packed);
        const cc_coll_stats_t dev0 = stats_of(hd), host0 = stats_of(hh);
        run_both(hd, hh, &p, d, op, inplace, packed, n, got_dev, got_host, desc);
        const cc_coll_stats_t dev1 = stats_of(hd), host1 = stats_of(hh);
        expect_same_counts(&dev0, &dev1, &host0, &host1, desc);
        /* Every rank gets the same bits (device decodes must not depend on
         * thread scheduling). */
        expect_same_on_all_ranks(got_dev, n * es, desc);
        expect_same_on_all_ranks(got_host, n * es, desc);
        /* HALF saves nothing on 16-bit dtypes. */
        if (m != CC_COLL_METHOD_NONE && (es > 2 || m != CC_COLL_METHOD_HALF))
            expect_compressed(&dev0, &dev1, n * es, desc);
        if (m == CC_COLL_METHOD_SKETCH) {
            CHECK(dev1.sketch_elements > dev0.sketch_elements, "test setup: SKETCH must take the sketch path");
            expect_close_to_host(d, got_dev, got_host, n, sketch_tol(d), desc);
        } else {
            expect_equal(d, got_dev, got_host, n, desc);
        }
        if (m == CC_COLL_METHOD_TOPK || element_codec(m)) {
            CHECK_CC(cc_coll_ef_get_residual(hd, &p, NULL, n, d, e_dev));
            CHECK_CC(cc_coll_ef_get_residual(hh, &p, NULL, n, d, e_host));
            for (size_t i = 0; i < n; ++i)
                if (memcmp(&e_dev[i], &e_host[i], sizeof(double)) != 0) {
                    fprintf(stderr, "[rank %d] FAIL in %s: %s: residual element %zu: device %.17g, host %.17g\n",
                            g_rank, g_test, desc, i, e_dev[i], e_host[i]);
                    fflush(stderr);
                    MPI_Abort(MPI_COMM_WORLD, 1);
                }
        }
    }
    free(x);
    free(e_dev);
    free(e_host);
    free(packed);
    free(got_dev);
    free(got_host);
}

static void agree_method(cc_coll_comm_h hd, cc_coll_method_t m, size_t n, int steps)
{
    cc_coll_comm_h hh = host_comm();
    int tc = 0;
    for (size_t di = 0; di < NDTYPES; ++di)
        for (int o = 0; o < 2; ++o)
            for (int inplace = 0; inplace < 2; ++inplace, ++tc)
                agree_case(hd, hh, m, kDtypes[di], o ? CC_COLL_AVG : CC_COLL_SUM, inplace, n, steps, tc);
    CHECK_CC(cc_coll_ef_reset_all(hd));
    CHECK_CC(cc_coll_comm_destroy(hh));
}

static void test_agree_none(cc_coll_comm_h h) { agree_method(h, CC_COLL_METHOD_NONE, 100003, 1); }

/* Sparse at every dtype and P <= 4: k = 201, payload * P well under n * es. */
static void test_agree_topk(cc_coll_comm_h h) { agree_method(h, CC_COLL_METHOD_TOPK, 20011, 3); }

static void test_agree_sketch(cc_coll_comm_h h) { agree_method(h, CC_COLL_METHOD_SKETCH, 65659, 1); }

/* TOPK's coded payload (CC_COLL_TOPK_VALUE_BITS=4): the allreduce of device
 * buffers runs through host copies (docs/algorithms.md 2.8), so it equals
 * the host call bit for bit, results and residuals, over 3 steps. */
static void test_agree_topk_coded(cc_coll_comm_h h)
{
    (void)h;
    CHECK(setenv("CC_COLL_TOPK_VALUE_BITS", "4", 1) == 0, "setenv");
    cc_coll_comm_h hd = host_comm();
    agree_method(hd, CC_COLL_METHOD_TOPK, 20011, 3); /* its host twin is created with the same setting */
    unsetenv("CC_COLL_TOPK_VALUE_BITS");
    CHECK_CC(cc_coll_comm_destroy(hd));
}

/* The element codecs (HALF, QUANT, ONEBIT at their defaults) bit for bit,
 * results and both stages' residuals, over 3 steps of error feedback; an
 * odd count, so that the ranks' blocks and the last chunk are short. */
static void test_agree_codecs(cc_coll_comm_h h)
{
    for (int i = 0; i < cc_coll_method_count(); ++i) {
        cc_coll_method_t m;
        CHECK_CC(cc_coll_method_at(i, &m));
        if (element_codec(m)) agree_method(h, m, 100003, 3);
    }
}

/* LOWRANK: both paths recover a rank-r sum at rank >= r (Gram-Schmidt at
 * rank 1 and 2, QR at 3 and 4), in three views: a given shape, cols = 0, and
 * the padded near-square default. F16/BF16 inputs are rank r plus their
 * rounding, which one step at rank exactly r can amplify several times
 * beyond the tolerance (lowrank.c's test_dtypes): they get a spare column,
 * rank r + 1, as there. */
static void test_agree_lowrank(cc_coll_comm_h hd)
{
    static const struct {
        uint64_t rows, cols;
        size_t n;
        int r_data, k;
    } cases[] = {{48, 40, 48 * 40, 1, 1}, {32, 0, 32 * 50, 2, 2}, {0, 0, 1073, 3, 4}};
    cc_coll_comm_h hh = host_comm();
    int tc = 0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; ++c)
        for (size_t di = 0; di < NDTYPES; ++di)
            for (int o = 0; o < 2; ++o)
                for (int inplace = 0; inplace < 2; ++inplace, ++tc) {
                    const cc_coll_dtype_t d = kDtypes[di];
                    const cc_coll_op_t op = o ? CC_COLL_AVG : CC_COLL_SUM;
                    const size_t n = cases[c].n, es = cc_coll_dtype_size(d);
                    const int half = d == CC_COLL_F16 || d == CC_COLL_BF16;
                    const int k = half && cases[c].k <= cases[c].r_data ? cases[c].r_data + 1 : cases[c].k;
                    char desc[200];
                    snprintf(desc, sizeof desc,
                             "LOWRANK %s %s %s shape %llu x %llu n=%zu, data rank %d, rank %d (P=%d)", dtype_name(d),
                             op_name(op), inplace ? "in place" : "out of place", (unsigned long long)cases[c].rows,
                             (unsigned long long)cases[c].cols, n, cases[c].r_data, k, g_size);
                    size_t vr = 0, vc = 0;
                    lowrank_view(n, cases[c].rows, cases[c].cols, &vr, &vc);
                    const uint64_t seed = 0x1a0c0ull + (uint64_t)tc;
                    double *x = xmalloc(n * sizeof *x), *want = xmalloc(n * sizeof *want);
                    void *packed = xmalloc(n * es), *got_dev = xmalloc(n * es), *got_host = xmalloc(n * es);
                    lowrank_input(d, n, vr, vc, cases[c].r_data, seed, g_rank, x);
                    lowrank_reference(d, op, n, vr, vc, cases[c].r_data, seed, want);
                    pack(d, x, n, packed);
                    cc_coll_params_t p =
                        keyed(with_ef(lowrank_params(cases[c].rows, cases[c].cols, k), 0), next_key());
                    p.mask |= CC_COLL_PARAMS_FIELD_WARM_START;
                    p.warm_start = 1;
                    /* Step 1 from the Gaussian start; step 2, on the same
                     * data, from step 1's Q. */
                    for (int step = 1; step <= 2; ++step) {
                        char what[240];
                        snprintf(what, sizeof what, "%s, step %d", desc, step);
                        const cc_coll_stats_t dev0 = stats_of(hd), host0 = stats_of(hh);
                        run_both(hd, hh, &p, d, op, inplace, packed, n, got_dev, got_host, what);
                        const cc_coll_stats_t dev1 = stats_of(hd), host1 = stats_of(hh);
                        expect_same_counts(&dev0, &dev1, &host0, &host1, what);
                        expect_compressed(&dev0, &dev1, n * es, what);
                        expect_same_on_all_ranks(got_dev, n * es, what);
                        expect_recovered(d, got_dev, got_host, want, n,
                                         step == 1 ? lowrank_first_step_tol(d) : lowrank_tol(d), what);
                    }
                    free(x);
                    free(want);
                    free(packed);
                    free(got_dev);
                    free(got_host);
                }
    CHECK_CC(cc_coll_ef_reset_all(hd));
    CHECK_CC(cc_coll_comm_destroy(hh));
}

/* ---- error-feedback invariants on the device path ---------------------------- */

/* TOPK and SKETCH (SUM): sum_t result_t + sum_ranks e_T == sum_t sum_ranks g_t
 * up to rounding, as topk.c and sketch.c check it on host buffers. */
static void ef_invariant_sparse(cc_coll_comm_h h, cc_coll_method_t m, cc_coll_dtype_t d, int tc)
{
    const size_t n = 4096;
    const int T = 30;
    const size_t es = cc_coll_dtype_size(d);
    char desc[160];
    snprintf(desc, sizeof desc, "EF invariant %s %s, %d steps (P=%d)", method_name(m), dtype_name(d), T, g_size);
    const cc_coll_params_t p = m == CC_COLL_METHOD_TOPK ? keyed(topk_params(0.01, 1), next_key())
                                                        : keyed(sketch_params(0.01, 1, 0.7), next_key());
    double *g = xmalloc(n * sizeof *g), *sum_g = xcalloc(n, sizeof *sum_g), *sum_res = xcalloc(n, sizeof *sum_res);
    double *e = xmalloc(n * sizeof *e), *G = xmalloc(n * sizeof *G), *E = xmalloc(n * sizeof *E);
    void *packed = xmalloc(n * es), *res = xmalloc(n * es);
    unsigned char *dsend = dmalloc(n * es), *drecv = dmalloc(n * es);
    uint64_t seed = seed_for(g_rank, tc);
    double gmax = 0.0;
    for (int t = 0; t < T; ++t) {
        for (size_t i = 0; i < n; ++i) {
            g[i] = round_to(d, (rng_uniform(&seed) * 2.0 - 1.0) * (1.0 + (double)(i % 7)));
            sum_g[i] += g[i];
            if (fabs(g[i]) > gmax) gmax = fabs(g[i]);
        }
        pack(d, g, n, packed);
        to_device(dsend, packed, n * es);
        call_ok(cc_coll_allreduce(dsend, drecv, n, d, CC_COLL_SUM, &p, h, NULL), desc);
        to_host(res, drecv, n * es);
        for (size_t i = 0; i < n; ++i) sum_res[i] += element(d, res, i);
    }
    CHECK_CC(cc_coll_ef_get_residual(h, &p, drecv, n, d, e));
    MPI_Allreduce(sum_g, G, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(e, E, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &gmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    const double eps = d == CC_COLL_F64 ? DBL_EPSILON : FLT_EPSILON;
    const double tol = 64.0 * eps * gmax * (double)T * (double)g_size;
    double worst = 0.0, without_e = 0.0;
    size_t worst_i = 0;
    for (size_t i = 0; i < n; ++i) {
        CHECK(isfinite(e[i]), "residual is not finite");
        const double err = fabs(sum_res[i] + E[i] - G[i]);
        if (err > worst) {
            worst = err;
            worst_i = i;
        }
        if (fabs(sum_res[i] - G[i]) > without_e) without_e = fabs(sum_res[i] - G[i]);
    }
    if (worst > tol) {
        fprintf(stderr,
                "[rank %d] %s: sum_t result + sum_ranks e_T != sum_t sum_ranks g_t at %zu: %.17g + %.17g vs %.17g "
                "(|diff| %.3g > tol %.3g)\n",
                g_rank, desc, worst_i, sum_res[worst_i], E[worst_i], G[worst_i], worst, tol);
        die("%s", "EF invariant", 0);
    }
    CHECK(without_e > 100 * tol, "EF invariant: residual suspiciously small");
    free(g);
    free(sum_g);
    free(sum_res);
    free(e);
    free(G);
    free(E);
    free(packed);
    free(res);
    CHECK_CUDA(cudaFree(dsend));
    CHECK_CUDA(cudaFree(drecv));
}

/* LOWRANK (AVG, in place, EF and warm start on): per rank
 * sum_t M^_t + e_T == sum_t g_t, as lowrank.c checks it. */
static void ef_invariant_lowrank(cc_coll_comm_h h, cc_coll_dtype_t d, uint64_t rows, uint64_t cols, size_t n, int k,
                                 int tc)
{
    const int steps = 10;
    char desc[160];
    snprintf(desc, sizeof desc, "EF invariant LOWRANK %s shape %llu x %llu n=%zu rank %d, %d steps (P=%d)",
             dtype_name(d), (unsigned long long)rows, (unsigned long long)cols, n, k, steps, g_size);
    cc_coll_params_t p = keyed(with_ef(lowrank_params(rows, cols, k), 1), next_key());
    p.mask |= CC_COLL_PARAMS_FIELD_WARM_START;
    p.warm_start = 1;
    void *dbuf = dmalloc(n * cc_coll_dtype_size(d));
    ef_invariant_steps(h, &p, d, n, steps, seed_for, tc, dbuf, to_device, to_host, 0, desc);
    CHECK_CUDA(cudaFree(dbuf));
}

static void test_ef_invariant(cc_coll_comm_h h)
{
    ef_invariant_sparse(h, CC_COLL_METHOD_TOPK, CC_COLL_F32, 1);
    ef_invariant_sparse(h, CC_COLL_METHOD_TOPK, CC_COLL_F64, 2);
    ef_invariant_sparse(h, CC_COLL_METHOD_SKETCH, CC_COLL_F32, 3);
    ef_invariant_sparse(h, CC_COLL_METHOD_SKETCH, CC_COLL_F64, 4);
    ef_invariant_lowrank(h, CC_COLL_F32, 40, 30, 1200, 2, 5);
    ef_invariant_lowrank(h, CC_COLL_F64, 40, 30, 1200, 2, 6);
    ef_invariant_lowrank(h, CC_COLL_F32, 0, 0, 1000, 3, 7); /* 32 x 32, padded; QR */
    CHECK_CC(cc_coll_ef_reset_all(h));
}

/* ---- LOWRANK's 16-bit factors ------------------------------------------------ */

/* A communicator created with CC_COLL_LOWRANK_FACTORS=value. */
static cc_coll_comm_h factors_comm(const char *value)
{
    setenv("CC_COLL_LOWRANK_FACTORS", value, 1);
    cc_coll_comm_h h = host_comm();
    unsetenv("CC_COLL_LOWRANK_FACTORS");
    return h;
}

/* CC_COLL_LOWRANK_FACTORS=bf16 and fp16 on device buffers against host
 * buffers (lowrank_factors.c checks the host path): on inputs of rank r
 * that are positive multiples of one well-conditioned matrix, the second
 * warm step of each path is within 4 units of the format (2^-8, 2^-11) of
 * the exact reduction, every rank holding the same bits; both paths count
 * the same wire bytes (the coded factor sums); and the device path keeps
 * the per-rank error-feedback invariant. */
static void test_lowrank_factors(cc_coll_comm_h h)
{
    (void)h;
    static const char *const formats[] = {"bf16", "fp16"};
    static const double unit[] = {0.00390625, 0.00048828125};
    static const struct {
        uint64_t rows, cols;
        size_t n;
        int r;
    } cases[] = {{48, 40, 48 * 40, 2}, {0, 0, 1073, 3}};
    int tc = 0;
    for (int f = 0; f < 2; ++f) {
        cc_coll_comm_h hd = factors_comm(formats[f]), hh = factors_comm(formats[f]);
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; ++c)
            for (int di = 0; di < 2; ++di, ++tc) {
                const cc_coll_dtype_t d = di ? CC_COLL_F64 : CC_COLL_F32;
                const size_t n = cases[c].n, es = cc_coll_dtype_size(d);
                size_t vr = 0, vc = 0;
                lowrank_view(n, cases[c].rows, cases[c].cols, &vr, &vc);
                double *x = xmalloc(n * sizeof *x), *want = xmalloc(n * sizeof *want);
                void *packed = xmalloc(n * es), *got_dev = xmalloc(n * es), *got_host = xmalloc(n * es);
                lowrank_scaled_input(d, CC_COLL_AVG, n, vr, vc, cases[c].r, 0xfac0ull + (uint64_t)tc, x, want);
                pack(d, x, n, packed);
                cc_coll_params_t p = keyed(with_ef(lowrank_params(cases[c].rows, cases[c].cols, cases[c].r), 0),
                                           next_key());
                p.mask |= CC_COLL_PARAMS_FIELD_WARM_START;
                p.warm_start = 1;
                char desc[200];
                snprintf(desc, sizeof desc, "LOWRANK %s factors %s shape %llu x %llu n=%zu rank %d (P=%d)",
                         formats[f], dtype_name(d), (unsigned long long)cases[c].rows,
                         (unsigned long long)cases[c].cols, n, cases[c].r, g_size);
                for (int step = 1; step <= 2; ++step) {
                    const cc_coll_stats_t dev0 = stats_of(hd), host0 = stats_of(hh);
                    run_both(hd, hh, &p, d, CC_COLL_AVG, step == 2, packed, n, got_dev, got_host, desc);
                    const cc_coll_stats_t dev1 = stats_of(hd), host1 = stats_of(hh);
                    expect_same_counts(&dev0, &dev1, &host0, &host1, desc);
                    expect_compressed(&dev0, &dev1, n * es, desc);
                    expect_same_on_all_ranks(got_dev, n * es, desc);
                }
                expect_recovered(d, got_dev, got_host, want, n, 4.0 * unit[f], desc);
                free(x);
                free(want);
                free(packed);
                free(got_dev);
                free(got_host);
            }
        ef_invariant_lowrank(hd, CC_COLL_F32, 40, 30, 1200, 2, 20 + f);
        ef_invariant_lowrank(hd, CC_COLL_F64, 0, 0, 1000, 3, 22 + f); /* 32 x 32, padded; QR */
        CHECK_CC(cc_coll_comm_destroy(hd));
        CHECK_CC(cc_coll_comm_destroy(hh));
    }
}

/* ---- the stream -------------------------------------------------------------- */

/* A host callback on the stream: holds back the work queued after it, so a
 * call that did not wait for the stream would read the stale sendbuf. */
static void CUDART_CB hold_stream(void *arg)
{
    (void)arg;
    const struct timespec ts = {0, 100 * 1000 * 1000};
    nanosleep(&ts, NULL);
}

/* sendbuf (device) holds a stale value; the stream then holds for 100 ms and
 * produces the real input (a copy from pinned memory, or a memset); the call
 * on that stream must see the real input, and on return the result is in
 * recvbuf and nothing is pending on the stream. The reference is the same
 * call on host buffers (hh). */
static void stream_case(cc_coll_comm_h hd, cc_coll_comm_h hh, cc_coll_method_t m, int use_memset, int inplace, int tc)
{
    const cc_coll_dtype_t d = CC_COLL_F32;
    const size_t n = m == CC_COLL_METHOD_LOWRANK ? 64 * 48 : 1u << 18, bytes = n * sizeof(float);
    char desc[200];
    snprintf(desc, sizeof desc, "stream %s, input by %s, %s (P=%d)", method_name(m),
             use_memset ? "cudaMemsetAsync" : "cudaMemcpyAsync", inplace ? "in place" : "out of place", g_size);
    double *x = xmalloc(n * sizeof *x);
    size_t vr = 0, vc = 0;
    if (use_memset) {
        /* Every byte 0x40: 3.0039215 (0x40404040), the same on every rank;
         * sums of up to 4 of them are exact. */
        const float v = 3.0039215087890625f;
        for (size_t i = 0; i < n; ++i) x[i] = v;
    } else if (m == CC_COLL_METHOD_LOWRANK) {
        lowrank_view(n, 64, 0, &vr, &vc);
        lowrank_input(d, n, vr, vc, 1, 0x57e4ull + (uint64_t)tc, g_rank, x);
    } else {
        method_data(m, d, x, n, seed_for(g_rank, 900 + tc));
    }
    float *pinned = NULL;
    CHECK_CUDA(cudaMallocHost((void **)&pinned, bytes));
    pack(d, x, n, pinned);
    if (use_memset) {
        uint32_t bits = 0;
        memcpy(&bits, pinned, sizeof bits);
        CHECK(bits == 0x40404040u, "test setup: memset value");
    }

    cc_coll_params_t p = m == CC_COLL_METHOD_LOWRANK ? keyed(with_ef(lowrank_params(64, 0, 1), 0), next_key())
                                                     : params_for(m, 1);
    float *got_host = xmalloc(bytes), *got_dev = xmalloc(bytes);
    float *hsend = xmalloc(bytes);
    memcpy(hsend, pinned, bytes);
    call_ok(cc_coll_allreduce(hsend, got_host, n, d, CC_COLL_SUM, &p, hh, NULL), desc);

    cudaStream_t s;
    CHECK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    unsigned char *dsend = dmalloc(bytes), *drecv = dmalloc(bytes);
    unsigned char *dinput = inplace ? drecv : dsend;
    CHECK_CUDA(cudaMemset(dinput, 0, bytes)); /* stale: zeros */
    if (!inplace) CHECK_CUDA(cudaMemset(drecv, 0x5A, bytes));
    CHECK_CUDA(cudaDeviceSynchronize());
    CHECK_CUDA(cudaLaunchHostFunc(s, hold_stream, NULL));
    if (use_memset) CHECK_CUDA(cudaMemsetAsync(dinput, 0x40, bytes, s));
    else CHECK_CUDA(cudaMemcpyAsync(dinput, pinned, bytes, cudaMemcpyHostToDevice, s));
    call_ok(cc_coll_allreduce(dinput, drecv, n, d, CC_COLL_SUM, &p, hd, (void *)s), desc);
    const cudaError_t q = cudaStreamQuery(s);
    if (q != cudaSuccess) {
        fprintf(stderr, "[rank %d] FAIL in %s: %s: work still pending on the stream after return (%s)\n", g_rank,
                g_test, desc, cudaGetErrorName(q));
        fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    /* cudaMemcpy runs on the legacy default stream, which does not wait for
     * a non-blocking stream: it sees only what the call finished. */
    to_host(got_dev, drecv, bytes);
    if (m == CC_COLL_METHOD_SKETCH) expect_close_to_host(d, got_dev, got_host, n, sketch_tol(d), desc);
    else if (m == CC_COLL_METHOD_LOWRANK)
        expect_close_to_host(d, got_dev, got_host, n, lowrank_first_step_tol(d), desc);
    else expect_equal(d, got_dev, got_host, n, desc);
    if (use_memset && m == CC_COLL_METHOD_NONE)
        for (size_t i = 0; i < n; ++i)
            CHECK(got_dev[i] == 3.0039215087890625f * (float)g_size, "stream: memset input summed");

    CHECK_CUDA(cudaStreamDestroy(s));
    CHECK_CUDA(cudaFree(dsend));
    CHECK_CUDA(cudaFree(drecv));
    CHECK_CUDA(cudaFreeHost(pinned));
    free(x);
    free(got_host);
    free(got_dev);
    free(hsend);
}

static void test_stream(cc_coll_comm_h hd)
{
    static const cc_coll_method_t methods[] = {CC_COLL_METHOD_NONE, CC_COLL_METHOD_TOPK, CC_COLL_METHOD_SKETCH,
                                               CC_COLL_METHOD_LOWRANK};
    cc_coll_comm_h hh = host_comm();
    int tc = 0;
    for (size_t mi = 0; mi < sizeof methods / sizeof methods[0]; ++mi)
        for (int inplace = 0; inplace < 2; ++inplace, ++tc) stream_case(hd, hh, methods[mi], 0, inplace, tc);
    stream_case(hd, hh, CC_COLL_METHOD_NONE, 1, 0, tc++);
    stream_case(hd, hh, CC_COLL_METHOD_NONE, 1, 1, tc++);
    CHECK_CC(cc_coll_ef_reset_all(hd));
    CHECK_CC(cc_coll_comm_destroy(hh));
}

/* Host buffers with a non-NULL stream: the stream is synchronised first and
 * the call runs the host path. */
static void test_host_buffers_with_stream(cc_coll_comm_h h)
{
    const size_t n = 1000;
    cudaStream_t s;
    CHECK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    float *buf = xmalloc(n * sizeof *buf);
    for (size_t i = 0; i < n; ++i) buf[i] = (float)(i % 13);
    const cc_coll_params_t p = method_params(CC_COLL_METHOD_NONE);
    call_ok(cc_coll_allreduce(buf, buf, n, CC_COLL_F32, CC_COLL_SUM, &p, h, (void *)s), "host buffers, stream");
    for (size_t i = 0; i < n; ++i) CHECK(buf[i] == (float)(i % 13) * (float)g_size, "host buffers, stream: sum");
    CHECK_CUDA(cudaStreamDestroy(s));
    free(buf);
}

/* ---- argument errors ---------------------------------------------------------- */

static void test_errors(cc_coll_comm_h h)
{
    const size_t n = 4096;
    float *dev = dmalloc(n * sizeof(float)), *dev2 = dmalloc(n * sizeof(float));
    float *host = xcalloc(n, sizeof(float));
    CHECK_CUDA(cudaMemset(dev, 0, n * sizeof(float)));
    /* Every method of the library: method values are dense from 0. */
    for (int mi = 0; cc_coll_method_name((cc_coll_method_t)mi) != NULL; ++mi) {
        const cc_coll_method_t m = (cc_coll_method_t)mi;
        const cc_coll_params_t p = params_for(m, 1);
        char desc[120];
        snprintf(desc, sizeof desc, "%s: sendbuf on the device, recvbuf on the host", method_name(m));
        expect_status(cc_coll_allreduce(dev, host, n, CC_COLL_F32, CC_COLL_SUM, &p, h, NULL), CC_COLL_ERR_INVALID_ARG,
                      desc);
        snprintf(desc, sizeof desc, "%s: sendbuf on the host, recvbuf on the device", method_name(m));
        expect_status(cc_coll_allreduce(host, dev, n, CC_COLL_F32, CC_COLL_SUM, &p, h, NULL), CC_COLL_ERR_INVALID_ARG,
                      desc);
        snprintf(desc, sizeof desc, "%s: NULL sendbuf, device recvbuf, count > 0", method_name(m));
        expect_status(cc_coll_allreduce(NULL, dev, n, CC_COLL_F32, CC_COLL_SUM, &p, h, NULL), CC_COLL_ERR_NULL_BUFFER,
                      desc);
        snprintf(desc, sizeof desc, "%s: device sendbuf, NULL recvbuf, count > 0", method_name(m));
        expect_status(cc_coll_allreduce(dev, NULL, n, CC_COLL_F32, CC_COLL_SUM, &p, h, NULL), CC_COLL_ERR_NULL_BUFFER,
                      desc);
        snprintf(desc, sizeof desc, "%s: count 0, device buffers", method_name(m));
        call_ok(cc_coll_allreduce(dev, dev2, 0, CC_COLL_F32, CC_COLL_SUM, &p, h, NULL), desc);
        snprintf(desc, sizeof desc, "%s: count 0, device buffers, in place", method_name(m));
        call_ok(cc_coll_allreduce(dev, dev, 0, CC_COLL_F32, CC_COLL_AVG, &p, h, NULL), desc);
    }
    /* A device buffer on another device than the current one. */
    int ndev = 0, cur = 0;
    CHECK_CUDA(cudaGetDeviceCount(&ndev));
    CHECK_CUDA(cudaGetDevice(&cur));
    if (ndev > 1) {
        float *other = NULL;
        CHECK_CUDA(cudaSetDevice((cur + 1) % ndev));
        other = dmalloc(n * sizeof(float));
        CHECK_CUDA(cudaSetDevice(cur));
        const cc_coll_params_t p = method_params(CC_COLL_METHOD_NONE);
        expect_status(cc_coll_allreduce(other, dev, n, CC_COLL_F32, CC_COLL_SUM, &p, h, NULL), CC_COLL_ERR_INVALID_ARG,
                      "sendbuf on another device than the current one");
        CHECK_CUDA(cudaFree(other));
    }
    CHECK_CUDA(cudaFree(dev));
    CHECK_CUDA(cudaFree(dev2));
    free(host);
    CHECK_CC(cc_coll_ef_reset_all(h));
}

/* ---- 16 MiB+ tensors ------------------------------------------------------------ */

/* 4 Mi + 1000 F32 elements (16 MiB and a partial staging chunk) per method,
 * device against host. */
static void test_large(cc_coll_comm_h hd)
{
    const size_t n = ((size_t)16 << 20) / sizeof(float) + 1000;
    const cc_coll_dtype_t d = CC_COLL_F32;
    cc_coll_comm_h hh = host_comm();
    static const cc_coll_method_t sparse[] = {CC_COLL_METHOD_NONE, CC_COLL_METHOD_TOPK, CC_COLL_METHOD_SKETCH};
    float *packed = xmalloc(n * sizeof(float)), *got_dev = xmalloc(n * sizeof(float)),
          *got_host = xmalloc(n * sizeof(float));
    double *x = xmalloc(n * sizeof *x);
    for (size_t mi = 0; mi < sizeof sparse / sizeof sparse[0]; ++mi) {
        const cc_coll_method_t m = sparse[mi];
        char desc[160];
        snprintf(desc, sizeof desc, "%s F32 SUM n=%zu (P=%d)", method_name(m), n, g_size);
        cc_coll_params_t p = params_for(m, 1);
        if (m != CC_COLL_METHOD_NONE) p.density = 0.001;
        method_data(m, d, x, n, seed_for(g_rank, 700 + (int)mi));
        pack(d, x, n, packed);
        const cc_coll_stats_t dev0 = stats_of(hd), host0 = stats_of(hh);
        run_both(hd, hh, &p, d, CC_COLL_SUM, (int)(mi & 1), packed, n, got_dev, got_host, desc);
        const cc_coll_stats_t dev1 = stats_of(hd), host1 = stats_of(hh);
        expect_same_counts(&dev0, &dev1, &host0, &host1, desc);
        if (m != CC_COLL_METHOD_NONE) expect_compressed(&dev0, &dev1, n * sizeof(float), desc);
        if (m == CC_COLL_METHOD_SKETCH) expect_close_to_host(d, got_dev, got_host, n, sketch_tol(d), desc);
        else expect_equal(d, got_dev, got_host, n, desc);
    }
    free(x);
    free(packed);
    free(got_dev);
    free(got_host);

    /* LOWRANK: 2048 x 2048 (16 MiB), data of rank 2 at rank 4 (QR). */
    {
        const size_t rows = 2048, cols = 2048, nl = rows * cols;
        char desc[160];
        snprintf(desc, sizeof desc, "LOWRANK F32 AVG %zu x %zu, data rank 2, rank 4 (P=%d)", rows, cols, g_size);
        double *xl = xmalloc(nl * sizeof *xl), *want = xmalloc(nl * sizeof *want);
        float *pk = xmalloc(nl * sizeof(float)), *gd = xmalloc(nl * sizeof(float)), *gh = xmalloc(nl * sizeof(float));
        lowrank_input(d, nl, rows, cols, 2, 0xb16ull, g_rank, xl);
        lowrank_reference(d, CC_COLL_AVG, nl, rows, cols, 2, 0xb16ull, want);
        pack(d, xl, nl, pk);
        const cc_coll_params_t p = keyed(with_ef(lowrank_params(rows, cols, 4), 1), next_key());
        const cc_coll_stats_t dev0 = stats_of(hd), host0 = stats_of(hh);
        run_both(hd, hh, &p, d, CC_COLL_AVG, 0, pk, nl, gd, gh, desc);
        const cc_coll_stats_t dev1 = stats_of(hd), host1 = stats_of(hh);
        expect_same_counts(&dev0, &dev1, &host0, &host1, desc);
        expect_compressed(&dev0, &dev1, nl * sizeof(float), desc);
        expect_recovered(d, gd, gh, want, nl, lowrank_first_step_tol(d), desc);
        free(xl);
        free(want);
        free(pk);
        free(gd);
        free(gh);
    }
    CHECK_CC(cc_coll_ef_reset_all(hd));
    CHECK_CC(cc_coll_comm_destroy(hh));
}

/* ---- groups on device buffers --------------------------------------------------- */

/* One tensor of the group test. LOWRANK: SHAPE rows x cols (rows 0: the near-square view),
 * data of rank r_data (0: small integers, for a tensor that fails the
 * compression test and joins the dense batch), RANK k, EF, START_ITER. */
typedef struct {
    cc_coll_method_t m;
    cc_coll_dtype_t d;
    size_t n;
    uint64_t rows, cols;
    int r_data, k, ef;
    uint64_t start_iter;
} GroupSpec;

/* Every route of the group plan, interleaved: dense batches of three dtypes
 * (NONE tensors and LOWRANK ones that fail the compression test or are
 * before start_iter), LOWRANK batches of both work types (Gram-Schmidt and
 * QR, padded and not, a BF16 tensor in the binary32 batch), TOPK and
 * SKETCH one by one. */
static const GroupSpec kGroup[] = {
    {CC_COLL_METHOD_NONE, CC_COLL_F32, 10007, 0, 0, 0, 0, 0, 0},
    {CC_COLL_METHOD_LOWRANK, CC_COLL_F32, 48 * 40, 48, 40, 2, 2, 1, 0},
    {CC_COLL_METHOD_TOPK, CC_COLL_F32, 20011, 0, 0, 0, 0, 0, 0},
    {CC_COLL_METHOD_NONE, CC_COLL_F16, 3001, 0, 0, 0, 0, 0, 0},
    {CC_COLL_METHOD_LOWRANK, CC_COLL_F32, 1073, 0, 0, 3, 4, 1, 0}, /* 33 x 33, padded; QR */
    {CC_COLL_METHOD_SKETCH, CC_COLL_F32, 65659, 0, 0, 0, 0, 0, 0},
    {CC_COLL_METHOD_LOWRANK, CC_COLL_F32, 64, 8, 8, 0, 4, 1, 0}, /* fails the compression test */
    {CC_COLL_METHOD_LOWRANK, CC_COLL_F64, 32 * 50, 32, 0, 1, 2, 1, 0},
    {CC_COLL_METHOD_NONE, CC_COLL_F64, 777, 0, 0, 0, 0, 0, 0},
    {CC_COLL_METHOD_LOWRANK, CC_COLL_BF16, 40 * 30, 40, 30, 2, 3, 0, 0}, /* spare column (agree_lowrank) */
    {CC_COLL_METHOD_TOPK, CC_COLL_BF16, 20011, 0, 0, 0, 0, 0, 0},
    {CC_COLL_METHOD_LOWRANK, CC_COLL_F32, 64 * 48, 64, 48, 1, 1, 1, 1}, /* dense at step 0 */
};
#define NGROUP (sizeof kGroup / sizeof kGroup[0])

/* One step of the group on device buffers (hd) and on host buffers (hh):
 * step 0 SUM, every tensor out of place; step 1 AVG, odd tensors in place.
 * NONE, TOPK (and its residual) and the integer LOWRANK tensor bit for bit,
 * SKETCH within tolerance, LOWRANK's recovery of the rank-r sum on both
 * paths; the same statistics. */
static void group_step(cc_coll_comm_h hd, cc_coll_comm_h hh, const cc_coll_params_t *params, int step)
{
    const cc_coll_op_t op = step == 0 ? CC_COLL_SUM : CC_COLL_AVG;
    size_t counts[NGROUP];
    cc_coll_dtype_t dtypes[NGROUP];
    void *x[NGROUP], *hr[NGROUP], *dr[NGROUP], *dsend[NGROUP];
    const void *hs[NGROUP], *ds[NGROUP];
    double *want[NGROUP];
    char desc[200];
    for (size_t i = 0; i < NGROUP; ++i) {
        const GroupSpec *g = &kGroup[i];
        const size_t n = g->n, es = cc_coll_dtype_size(g->d);
        const int inplace = step == 1 && (i & 1);
        counts[i] = n;
        dtypes[i] = g->d;
        double *v = xmalloc(n * sizeof *v);
        want[i] = NULL;
        if (g->m == CC_COLL_METHOD_LOWRANK && g->r_data > 0) {
            size_t vr = 0, vc = 0;
            lowrank_view(n, g->rows, g->cols, &vr, &vc);
            const uint64_t seed = 0x9a0c0ull + 16 * (uint64_t)i + (uint64_t)step;
            lowrank_input(g->d, n, vr, vc, g->r_data, seed, g_rank, v);
            want[i] = xmalloc(n * sizeof *want[i]);
            lowrank_reference(g->d, op, n, vr, vc, g->r_data, seed, want[i]);
        } else if (g->m == CC_COLL_METHOD_LOWRANK) {
            integer_values(v, n, seed_for(g_rank, 1000 + 10 * (int)i + step));
        } else {
            method_data(g->m, g->d, v, n, seed_for(g_rank, 1000 + 10 * (int)i + step));
        }
        x[i] = xmalloc(n * es);
        pack(g->d, v, n, x[i]);
        free(v);
        /* host buffers */
        hr[i] = xmalloc(n * es);
        if (inplace) memcpy(hr[i], x[i], n * es);
        hs[i] = inplace ? hr[i] : x[i];
        /* device buffers, recvbuf with guard bytes */
        dr[i] = dmalloc(n * es + GUARD);
        CHECK_CUDA(cudaMemset((unsigned char *)dr[i] + n * es, GUARD_BYTE, GUARD));
        dsend[i] = NULL;
        if (inplace) {
            to_device(dr[i], x[i], n * es);
        } else {
            dsend[i] = dmalloc(n * es);
            to_device(dsend[i], x[i], n * es);
            CHECK_CUDA(cudaMemset(dr[i], 0x5A, n * es));
        }
        ds[i] = inplace ? dr[i] : dsend[i];
    }

    snprintf(desc, sizeof desc, "group of %zu, step %d, %s (P=%d)", NGROUP, step, op_name(op), g_size);
    const cc_coll_stats_t dev0 = stats_of(hd), host0 = stats_of(hh);
    char what[240];
    snprintf(what, sizeof what, "%s: host buffers", desc);
    call_ok(cc_coll_allreduce_group(NGROUP, hs, hr, counts, dtypes, op, params, hh, NULL), what);
    snprintf(what, sizeof what, "%s: device buffers", desc);
    call_ok(cc_coll_allreduce_group(NGROUP, ds, dr, counts, dtypes, op, params, hd, NULL), what);
    const cc_coll_stats_t dev1 = stats_of(hd), host1 = stats_of(hh);
    expect_same_counts(&dev0, &dev1, &host0, &host1, desc);

    for (size_t i = 0; i < NGROUP; ++i) {
        const GroupSpec *g = &kGroup[i];
        const size_t n = g->n, es = cc_coll_dtype_size(g->d);
        snprintf(what, sizeof what, "%s: tensor %zu (%s %s n=%zu)", desc, i, method_name(g->m), dtype_name(g->d), n);
        void *got = xmalloc(n * es);
        to_host(got, dr[i], n * es);
        expect_guard(dr[i], n * es, what);
        if (dsend[i] != NULL) {
            void *back = xmalloc(n * es);
            to_host(back, dsend[i], n * es);
            if (memcmp(back, x[i], n * es) != 0) die("%s: out-of-place tensor's sendbuf modified (device)", what, 0);
            free(back);
        }
        if (g->m == CC_COLL_METHOD_SKETCH) {
            expect_close_to_host(g->d, got, hr[i], n, sketch_tol(g->d), what);
        } else if (want[i] == NULL) {
            expect_equal(g->d, got, hr[i], n, what);
        } else {
            /* Step 1 starts from step 0's Q but on other data. */
            expect_recovered(g->d, got, hr[i], want[i], n, lowrank_first_step_tol(g->d), what);
            /* Compressed this step: P and Q are the same on every rank. */
            if ((uint64_t)step >= g->start_iter) expect_same_on_all_ranks(got, n * es, what);
        }
        if (g->m == CC_COLL_METHOD_TOPK) {
            double *e_dev = xmalloc(n * sizeof *e_dev), *e_host = xmalloc(n * sizeof *e_host);
            CHECK_CC(cc_coll_ef_get_residual(hd, &params[i], NULL, n, g->d, e_dev));
            CHECK_CC(cc_coll_ef_get_residual(hh, &params[i], NULL, n, g->d, e_host));
            if (memcmp(e_dev, e_host, n * sizeof *e_dev) != 0) die("%s: residuals differ (device, host)", what, 0);
            free(e_dev);
            free(e_host);
        }
        free(got);
    }
    for (size_t i = 0; i < NGROUP; ++i) {
        free(x[i]);
        free(hr[i]);
        free(want[i]);
        CHECK_CUDA(cudaFree(dr[i]));
        if (dsend[i] != NULL) CHECK_CUDA(cudaFree(dsend[i]));
    }
}

static void test_group(cc_coll_comm_h hd)
{
    cc_coll_comm_h hh = host_comm();
    cc_coll_params_t params[NGROUP];
    for (size_t i = 0; i < NGROUP; ++i) {
        const GroupSpec *g = &kGroup[i];
        if (g->m != CC_COLL_METHOD_LOWRANK) {
            params[i] = params_for(g->m, 1);
            continue;
        }
        cc_coll_params_t p = with_ef(lowrank_params(g->rows, g->cols, g->k), g->ef);
        if (g->start_iter > 0) {
            p.mask |= CC_COLL_PARAMS_FIELD_START_ITER;
            p.start_iter = g->start_iter;
        }
        params[i] = keyed(p, next_key());
    }
    group_step(hd, hh, params, 0);
    group_step(hd, hh, params, 1);
    CHECK_CC(cc_coll_ef_reset_all(hd));
    CHECK_CC(cc_coll_comm_destroy(hh));
}

/* ---- reduce-scatter on device buffers (host algorithm on host copies) ----------- */

/* NONE, TOPK and SKETCH x F32/F16 x in place / out of place: the device
 * call's shard and residual equal the host call's bit for bit. */
static void test_reduce_scatter(cc_coll_comm_h hd)
{
    static const cc_coll_method_t methods[] = {CC_COLL_METHOD_NONE, CC_COLL_METHOD_TOPK, CC_COLL_METHOD_SKETCH};
    static const cc_coll_dtype_t dtypes[] = {CC_COLL_F32, CC_COLL_F16};
    const size_t rc = 4099, n = rc * (size_t)g_size;
    cc_coll_comm_h hh = host_comm();
    int tc = 0;
    for (size_t mi = 0; mi < sizeof methods / sizeof methods[0]; ++mi)
        for (size_t di = 0; di < sizeof dtypes / sizeof dtypes[0]; ++di)
            for (int inplace = 0; inplace < 2; ++inplace, ++tc) {
                const cc_coll_method_t m = methods[mi];
                const cc_coll_dtype_t d = dtypes[di];
                const size_t es = cc_coll_dtype_size(d);
                char desc[200];
                snprintf(desc, sizeof desc, "reduce_scatter %s %s %s recvcount %zu (P=%d)", method_name(m),
                         dtype_name(d), inplace ? "in place" : "out of place", rc, g_size);
                const cc_coll_params_t p = params_for(m, 1);
                double *v = xmalloc(n * sizeof *v);
                method_data(m, d, v, n, seed_for(g_rank, 1300 + tc));
                unsigned char *x = xmalloc(n * es), *hsend = xmalloc(n * es), *got = xmalloc(rc * es);
                pack(d, v, n, x);
                memcpy(hsend, x, n * es);
                unsigned char *hrecv = inplace ? hsend : xmalloc(rc * es);
                const cc_coll_stats_t dev0 = stats_of(hd), host0 = stats_of(hh);
                call_ok(cc_coll_reduce_scatter(hsend, hrecv, rc, d, CC_COLL_SUM, &p, hh, NULL), desc);

                unsigned char *dsend = dmalloc(n * es + GUARD), *drecv = inplace ? dsend : dmalloc(rc * es + GUARD);
                to_device(dsend, x, n * es);
                CHECK_CUDA(cudaMemset(dsend + n * es, GUARD_BYTE, GUARD));
                if (!inplace) {
                    CHECK_CUDA(cudaMemset(drecv, 0x5A, rc * es));
                    CHECK_CUDA(cudaMemset(drecv + rc * es, GUARD_BYTE, GUARD));
                }
                call_ok(cc_coll_reduce_scatter(dsend, drecv, rc, d, CC_COLL_SUM, &p, hd, NULL), desc);
                const cc_coll_stats_t dev1 = stats_of(hd), host1 = stats_of(hh);
                expect_same_counts(&dev0, &dev1, &host0, &host1, desc);
                to_host(got, drecv, rc * es);
                expect_equal(d, got, hrecv, rc, desc);
                expect_guard(drecv, inplace ? n * es : rc * es, desc);
                if (!inplace) {
                    unsigned char *back = xmalloc(n * es);
                    to_host(back, dsend, n * es);
                    if (memcmp(back, x, n * es) != 0) die("%s: out-of-place call modified sendbuf (device)", desc, 0);
                    free(back);
                }
                if (m == CC_COLL_METHOD_TOPK) {
                    double *e_dev = xmalloc(n * sizeof *e_dev), *e_host = xmalloc(n * sizeof *e_host);
                    CHECK_CC(cc_coll_ef_get_residual(hd, &p, NULL, n, d, e_dev));
                    CHECK_CC(cc_coll_ef_get_residual(hh, &p, NULL, n, d, e_host));
                    if (memcmp(e_dev, e_host, n * sizeof *e_dev) != 0)
                        die("%s: residuals differ (device, host)", desc, 0);
                    free(e_dev);
                    free(e_host);
                }
                CHECK_CUDA(cudaFree(dsend));
                if (!inplace) CHECK_CUDA(cudaFree(drecv));
                if (!inplace) free(hrecv);
                free(v);
                free(x);
                free(hsend);
                free(got);
            }
    CHECK_CC(cc_coll_ef_reset_all(hd));
    CHECK_CC(cc_coll_comm_destroy(hh));
}

/* ---- setup: the device, or why the suite skips -------------------------------- */

static void skip(const char *why)
{
    printf("gpu_allreduce: %s, skipping\n", why);
    fflush(stdout);
    MPI_Finalize();
    exit(SKIP_STATUS);
}

/* With CC_COLL_CUDA_TRANSPORT=direct and an MPI that is not CUDA-aware, every
 * method's call on device buffers is CC_COLL_ERR_NOT_SUPPORTED. */
static void check_direct_not_supported(void)
{
    g_test = "direct_without_cuda_aware_mpi";
    cc_coll_comm_h h = NULL;
    CHECK_CC(cc_coll_comm_create(MPI_COMM_WORLD, &h));
    const size_t n = 4096;
    float *dev = dmalloc(n * sizeof(float));
    CHECK_CUDA(cudaMemset(dev, 0, n * sizeof(float)));
    /* Every method of the library: method values are dense from 0. */
    for (int mi = 0; cc_coll_method_name((cc_coll_method_t)mi) != NULL; ++mi) {
        const cc_coll_method_t m = (cc_coll_method_t)mi;
        const cc_coll_params_t p = params_for(m, 1);
        char desc[120];
        snprintf(desc, sizeof desc, "%s on device buffers, CC_COLL_CUDA_TRANSPORT=direct, MPI not CUDA-aware",
                 method_name(m));
        expect_status(cc_coll_allreduce(dev, dev, n, CC_COLL_F32, CC_COLL_SUM, &p, h, NULL),
                      CC_COLL_ERR_NOT_SUPPORTED, desc);
    }
    CHECK_CUDA(cudaFree(dev));
    CHECK_CC(cc_coll_comm_destroy(h));
    MPI_Barrier(MPI_COMM_WORLD);
    g_test = "";
}

static void setup(void)
{
    /* The settings these tests rely on come from params, never from the
     * environment the test happens to run in (CC_COLL_CUDA_TRANSPORT and
     * CC_COLL_CUDA_STAGING_CHUNK are kept: they pick the path under test). */
    static const char *const vars[] = {"CC_COLL_METHOD",       "CC_COLL_DENSITY",
                                       "CC_COLL_SPARSIFIER",   "CC_COLL_ZERO_FRACTION",
                                       "CC_COLL_LOAD_FACTOR",  "CC_COLL_SEED",
                                       "CC_COLL_EF",           "CC_COLL_EF_MAX_BYTES",
                                       "CC_COLL_STATE_MAX_BYTES",
                                       "CC_COLL_LOWRANK_RANK", "CC_COLL_LOWRANK_WARM_START",
                                       "CC_COLL_LOWRANK_START_ITER", "CC_COLL_LOWRANK_MIN_COMPRESSION_RATE",
                                       "CC_COLL_LOWRANK_FACTORS", "CC_COLL_TOPK_VALUE_BITS",
                                       "CC_COLL_TOPK_INDEX_CODING"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; ++i) unsetenv(vars[i]);
    /* Device buffers send SKETCH's support as the bitmap (docs/api.md,
     * CC_COLL_SKETCH_SUPPORT), where auto may code it on host buffers: the
     * host twins send the bitmap too, so that both hand MPI the same bytes. */
    CHECK(setenv("CC_COLL_SKETCH_SUPPORT", "bitmap", 1) == 0, "setenv");

    const int ndev = cc_coll_cuda_device_count();
    if (ndev <= 0) skip("no CUDA device");

    /* Ranks on one node share its devices round-robin. */
    MPI_Comm node;
    int local = 0, local_size = 1;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &local);
    MPI_Comm_size(node, &local_size);
    MPI_Comm_free(&node);

    /* A device in a compute mode that refuses this sharing cannot run the
     * suite: every rank skips (checked before cudaSetDevice, which creates
     * the context that such a mode refuses). */
    int mode = cudaComputeModeDefault, unusable = 0;
    CHECK_CUDA(cudaDeviceGetAttribute(&mode, cudaDevAttrComputeMode, local % ndev));
    if (mode == cudaComputeModeProhibited) unusable = 1;
    if ((mode == cudaComputeModeExclusiveProcess || mode == cudaComputeModeExclusive) && local_size > ndev)
        unusable = 2;
    MPI_Allreduce(MPI_IN_PLACE, &unusable, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (unusable == 1) skip("the CUDA device is in compute mode 'prohibited'");
    if (unusable == 2)
        skip("the CUDA device is in an exclusive compute mode, so the ranks of this node cannot share it "
             "(run with at most one rank per device, or ask for compute mode 'default')");
    CHECK_CUDA(cudaSetDevice(local % ndev));

    const char *transport = getenv("CC_COLL_CUDA_TRANSPORT");
    const int direct = transport != NULL && strcmp(transport, "direct") == 0;
    if (g_rank == 0) {
        struct cudaDeviceProp prop;
        CHECK_CUDA(cudaGetDeviceProperties(&prop, local % ndev));
        printf("gpu_allreduce: %d device(s), rank 0 on %s; CC_COLL_CUDA_TRANSPORT=%s; MPI CUDA-aware: %s\n", ndev,
               prop.name, transport ? transport : "(unset: auto)", cc_coll_mpi_cuda_aware() ? "yes" : "no");
        fflush(stdout);
    }
    if (direct && !cc_coll_mpi_cuda_aware()) {
        check_direct_not_supported();
        skip("CC_COLL_CUDA_TRANSPORT=direct needs a CUDA-aware MPI (cc_coll_mpi_cuda_aware() == 0): device calls "
             "fail with CC_COLL_ERR_NOT_SUPPORTED as documented; the direct path cannot run here");
    }
}

static const NamedTest kTests[] = {
    {"agree_none", test_agree_none},
    {"agree_topk", test_agree_topk},
    {"agree_sketch", test_agree_sketch},
    {"agree_topk_coded", test_agree_topk_coded},
    {"agree_lowrank", test_agree_lowrank},
    {"agree_codecs", test_agree_codecs},
    {"ef_invariant", test_ef_invariant},
    {"lowrank_factors", test_lowrank_factors},
    {"stream", test_stream},
    {"host_buffers_with_stream", test_host_buffers_with_stream},
    {"errors", test_errors},
    {"large", test_large},
    {"group", test_group},
    {"reduce_scatter", test_reduce_scatter},
};

int main(int argc, char **argv)
{
    return run_suite(argc, argv, "gpu_allreduce", kTests, sizeof kTests / sizeof kTests[0], 1, setup);
}
