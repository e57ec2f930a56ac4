/* Helpers shared by the mpirun test programs (topk.c, sketch.c,
 * reduce_scatter.c, lowrank.c, lowrank_group.c, p2p.c, passthrough.c):
 * allocation, random data, the 16-bit formats and element access written
 * independently of the library, the reference top-k, element-wise checks,
 * params builders, the stats getter, the test runner (run_test) and a
 * program's whole main (run_suite). Everything is `static inline`, so a
 * program that uses only part of it gets no unused-function warnings.
 * Include after check.h. */
#ifndef CC_COLL_MPI_TESTS_TEST_UTIL_H
#define CC_COLL_MPI_TESTS_TEST_UTIL_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "cc_coll.h"
#include "fake_stream.h"
#include "check.h"

/* ---- allocation ---------------------------------------------------------- */

static inline void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (p == NULL) die("%s", "malloc failed", 0);
    return p;
}

static inline void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (p == NULL) die("%s", "calloc failed", 0);
    return p;
}

/* ---- random numbers ----------------------------------------------------- */

static inline uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [0, 1). */
static inline double rng_uniform(uint64_t *s) { return (double)(rng_next(s) >> 11) * (1.0 / 9007199254740992.0); }

/* ---- 16-bit formats, written independently of the library ------------- */

/* Rounds a float to a binary format with `mbits` stored mantissa bits and
 * `ebits` exponent bits, round to nearest, ties to even (rint in the default
 * rounding mode). Handles zero, subnormals, overflow to infinity and NaN. */
static inline uint16_t encode16(float f, int mbits, int ebits)
{
    const int bias = (1 << (ebits - 1)) - 1;
    const int emin = 1 - bias;
    const uint16_t sign = signbit(f) ? (uint16_t)0x8000u : (uint16_t)0;
    const uint16_t expmask = (uint16_t)(((1u << ebits) - 1u) << mbits);
    if (isnan(f)) return (uint16_t)(sign | expmask | (1u << (mbits - 1)));
    double a = fabs((double)f);
    if (a == 0.0) return sign;
    if (isinf(f)) return (uint16_t)(sign | expmask);
    int e2 = 0;
    (void)frexp(a, &e2); /* a = fr * 2^e2, fr in [0.5, 1): floor(log2 a) = e2 - 1 */
    int e = e2 - 1;
    if (e < emin) e = emin;
    double m = rint(ldexp(a, mbits - e)); /* significand in units of 2^(e - mbits) */
    if (m >= ldexp(1.0, mbits + 1)) {     /* rounded up to the next binade */
        m = ldexp(m, -1);
        ++e;
    }
    if (e > bias) return (uint16_t)(sign | expmask);
    const uint32_t mi = (uint32_t)m;
    if (mi < (1u << mbits)) return (uint16_t)(sign | mi); /* subnormal (e == emin) */
    return (uint16_t)(sign | ((uint32_t)(e + bias) << mbits) | (mi - (1u << mbits)));
}

static inline double decode16(uint16_t h, int mbits, int ebits)
{
    const int bias = (1 << (ebits - 1)) - 1;
    const uint32_t emax_field = (1u << ebits) - 1u;
    const double s = (h & 0x8000u) ? -1.0 : 1.0;
    const uint32_t ef = (h >> mbits) & emax_field;
    const uint32_t mf = h & ((1u << mbits) - 1u);
    if (ef == emax_field) return mf ? NAN : s * INFINITY;
    if (ef == 0) return s * ldexp((double)mf, 1 - bias - mbits);
    return s * ldexp((double)(mf | (1u << mbits)), (int)ef - bias - mbits);
}

/* ---- element types ------------------------------------------------------ */

static inline const char *dtype_name(cc_coll_dtype_t d)
{
    switch (d) {
    case CC_COLL_F32: return "F32";
    case CC_COLL_F64: return "F64";
    case CC_COLL_F16: return "F16";
    default: return "BF16";
    }
}

/* Rounds v to the dtype (nearest even) and returns it as a double. */
static inline double round_to(cc_coll_dtype_t d, double v)
{
    switch (d) {
    case CC_COLL_F32: return (double)(float)v;
    case CC_COLL_F64: return v;
    case CC_COLL_F16: return decode16(encode16((float)v, 10, 5), 10, 5);
    default: return decode16(encode16((float)v, 7, 8), 7, 8);
    }
}

/* Writes the values (exactly representable in d) as a d buffer. */
static inline void pack(cc_coll_dtype_t d, const double *x, size_t n, void *buf)
{
    for (size_t i = 0; i < n; ++i) {
        switch (d) {
        case CC_COLL_F32: ((float *)buf)[i] = (float)x[i]; break;
        case CC_COLL_F64: ((double *)buf)[i] = x[i]; break;
        case CC_COLL_F16: ((uint16_t *)buf)[i] = encode16((float)x[i], 10, 5); break;
        default: ((uint16_t *)buf)[i] = encode16((float)x[i], 7, 8); break;
        }
    }
}

static inline double element(cc_coll_dtype_t d, const void *buf, size_t i)
{
    switch (d) {
    case CC_COLL_F32: return ((const float *)buf)[i];
    case CC_COLL_F64: return ((const double *)buf)[i];
    case CC_COLL_F16: return decode16(((const uint16_t *)buf)[i], 10, 5);
    default: return decode16(((const uint16_t *)buf)[i], 7, 8);
    }
}

/* acc + v in the element type's arithmetic (binary32 for the 16-bit formats,
 * then rounded to the format). */
static inline double add_in(cc_coll_dtype_t d, double acc, double v)
{
    if (d == CC_COLL_F64) return acc + v;
    return round_to(d, (double)((float)acc + (float)v));
}

/* acc / p in the element type (binary32 for the 16-bit formats, then rounded). */
static inline double div_in(cc_coll_dtype_t d, double acc, int p)
{
    if (d == CC_COLL_F64) return acc / (double)p;
    return round_to(d, (double)((float)acc / (float)p));
}

static inline MPI_Datatype mpi_type(cc_coll_dtype_t d) { return d == CC_COLL_F64 ? MPI_DOUBLE : MPI_FLOAT; }

/* ---- the documented rules ------------------------------------------------ */

/* k = ceil(density * n), clamped to n. */
static inline size_t k_for(double density, size_t n)
{
    if (n == 0) return 0;
    const double k = ceil(density * (double)n);
    return k >= (double)n ? n : (size_t)k;
}

/* TOPK payload: 16 + k * (4 + element size) bytes, rounded up to 8. */
static inline size_t payload_bytes(size_t k, size_t es) { return (16 + k * (4 + es) + 7) & ~(size_t)7; }

/* Magnitude order: class (NaN 2, inf 1, finite 0), then |x|, then index. */
static const double *g_sort_x;

static inline int cmp_magnitude(const void *pa, const void *pb)
{
    const uint32_t a = *(const uint32_t *)pa, b = *(const uint32_t *)pb;
    const double xa = g_sort_x[a], xb = g_sort_x[b];
    const int ca = isnan(xa) ? 2 : isinf(xa) ? 1 : 0;
    const int cb = isnan(xb) ? 2 : isinf(xb) ? 1 : 0;
    if (ca != cb) return ca > cb ? -1 : 1;
    if (ca == 0 && fabs(xa) != fabs(xb)) return fabs(xa) > fabs(xb) ? -1 : 1;
    return a < b ? -1 : a > b ? 1 : 0;
}

/* kept[i] = 1 for the k largest-magnitude elements of x. */
static inline void reference_topk(const double *x, size_t n, size_t k, unsigned char *kept)
{
    uint32_t *order = xmalloc(n * sizeof *order);
    for (size_t i = 0; i < n; ++i) order[i] = (uint32_t)i;
    g_sort_x = x;
    qsort(order, n, sizeof *order, cmp_magnitude);
    memset(kept, 0, n);
    for (size_t j = 0; j < k && j < n; ++j) kept[order[j]] = 1;
    free(order);
}

/* ---- data ----------------------------------------------------------------- */

/* Random values with spread exponents, exactly representable in d:
 * sign * (1 + u) * 2^e, e in [-e_span, e_span]. */
static inline void random_values(cc_coll_dtype_t d, double *x, size_t n, uint64_t seed, int e_span)
{
    for (size_t i = 0; i < n; ++i) {
        const double u = rng_uniform(&seed);
        const int e = (int)(rng_next(&seed) % (uint64_t)(2 * e_span + 1)) - e_span;
        const double s = (rng_next(&seed) & 1) ? -1.0 : 1.0;
        x[i] = round_to(d, s * ldexp(1.0 + u, e));
    }
}

/* Small integers in [-8, 8]: every sum over <= 4 ranks is exact. */
static inline void integer_values(double *x, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; ++i) x[i] = (double)((int)(rng_next(&seed) % 17u) - 8);
}

/* ---- checks ---------------------------------------------------------------- */

/* Element-wise: equal bits, or both NaN. */
static inline void expect_equal(cc_coll_dtype_t d, const void *got, const void *want, size_t n, const char *desc)
{
    const size_t es = cc_coll_dtype_size(d);
    for (size_t i = 0; i < n; ++i) {
        const double g = element(d, got, i), w = element(d, want, i);
        if (isnan(g) && isnan(w)) continue;
        if (memcmp((const char *)got + i * es, (const char *)want + i * es, es) != 0) {
            fprintf(stderr, "[rank %d] FAIL in %s: %s: element %zu of %zu: got %.17g, expected %.17g (bits differ)\n",
                    g_rank, g_test, desc, i, n, g, w);
            fflush(stderr);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
}

/* |got - want| <= tol * (|want| + scale) element-wise; want in double. */
static inline void expect_close(cc_coll_dtype_t d, const void *got, const double *want, size_t n, double tol,
                                double scale, const char *desc)
{
    for (size_t i = 0; i < n; ++i) {
        const double g = element(d, got, i);
        const double bound = tol * (fabs(want[i]) + scale);
        if (!(fabs(g - want[i]) <= bound)) {
            fprintf(stderr,
                    "[rank %d] FAIL in %s: %s: element %zu of %zu: got %.17g, expected %.17g (|diff| %.3g > %.3g)\n",
                    g_rank, g_test, desc, i, n, g, want[i], fabs(g - want[i]), bound);
            fflush(stderr);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
}

/* The buffer is byte-identical to rank 0's (collective on MPI_COMM_WORLD). */
static inline void expect_same_on_all_ranks(const void *buf, size_t bytes, const char *desc)
{
    if (bytes == 0) return;
    unsigned char *root = xmalloc(bytes);
    memcpy(root, buf, bytes);
    MPI_Bcast(root, (int)bytes, MPI_BYTE, 0, MPI_COMM_WORLD);
    if (memcmp(root, buf, bytes) != 0) die("%s: result differs from rank 0's", desc, 0);
    free(root);
}

/* The same allreduce of the n elements of `send` (dtype d) on two
 * communicators, in place or not, into fresh buffers: each must equal the
 * other bit for bit (desc names the comparison). The results are left in
 * a and b (n x element size bytes each). */
static inline void expect_same_on_two_comms(const void *send, void *a, void *b, size_t n, cc_coll_dtype_t d,
                                            cc_coll_op_t op, const cc_coll_params_t *p, cc_coll_comm_h c1,
                                            cc_coll_comm_h c2, int in_place, const char *desc)
{
    const size_t bytes = n * cc_coll_dtype_size(d);
    if (in_place) {
        memcpy(a, send, bytes);
        memcpy(b, send, bytes);
        CHECK_CC(cc_coll_allreduce(a, a, n, d, op, p, c1, NULL));
        CHECK_CC(cc_coll_allreduce(b, b, n, d, op, p, c2, NULL));
    } else {
        memset(a, 0xa5, bytes);
        memset(b, 0x5a, bytes);
        CHECK_CC(cc_coll_allreduce(send, a, n, d, op, p, c1, NULL));
        CHECK_CC(cc_coll_allreduce(send, b, n, d, op, p, c2, NULL));
    }
    CHECK(memcmp(a, b, bytes) == 0, desc);
}

/* NaN where MPI_SUM gives NaN, inf (same sign) where it gives inf, finite
 * where it is finite. */
static inline void expect_nonfinite_pattern(cc_coll_dtype_t d, const void *got, const void *mpi_sum, size_t n,
                                            const char *desc)
{
    for (size_t i = 0; i < n; ++i) {
        const double g = element(d, got, i), w = element(d, mpi_sum, i);
        const int ok = (isnan(g) != 0) == (isnan(w) != 0) && (isinf(g) != 0) == (isinf(w) != 0) &&
                       (!isinf(g) || signbit(g) == signbit(w));
        if (!ok) {
            fprintf(stderr, "[rank %d] FAIL in %s: %s: element %zu is %g, MPI_SUM gives %g\n", g_rank, g_test, desc, i,
                    g, w);
            fflush(stderr);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
}

/* Uniform values in [-2, 2) as a d buffer, from seed and this rank. */
static inline void fill_uniform(cc_coll_dtype_t d, void *buf, size_t n, uint64_t seed)
{
    uint64_t s = seed * 7919u + (uint64_t)g_rank * 104729u + 1u;
    double *x = (double *)xmalloc(n * sizeof *x);
    for (size_t i = 0; i < n; ++i) x[i] = rng_uniform(&s) * 4.0 - 2.0;
    pack(d, x, n, buf);
    free(x);
}

/* A communicator of MPI_COMM_WORLD created with CC_COLL_PIPELINE_BYTES =
 * bytes (NULL: unset). */
static inline cc_coll_comm_h comm_with_pipeline(const char *bytes)
{
    if (bytes) setenv("CC_COLL_PIPELINE_BYTES", bytes, 1);
    cc_coll_comm_h h = NULL;
    CHECK_CC(cc_coll_comm_create(MPI_COMM_WORLD, &h));
    unsetenv("CC_COLL_PIPELINE_BYTES");
    return h;
}

/* ---- params and stats ------------------------------------------------------ */

static inline cc_coll_params_t method_params(cc_coll_method_t m)
{
    cc_coll_params_t p;
    memset(&p, 0, sizeof p);
    p.mask = CC_COLL_PARAMS_FIELD_METHOD;
    p.method = m;
    return p;
}

static inline cc_coll_params_t topk_params(double density, int ef)
{
    cc_coll_params_t p = method_params(CC_COLL_METHOD_TOPK);
    p.mask |= CC_COLL_PARAMS_FIELD_DENSITY | CC_COLL_PARAMS_FIELD_EF;
    p.density = density;
    p.ef = ef;
    return p;
}

/* SKETCH with the top-k sparsifier. */
static inline cc_coll_params_t sketch_params(double density, int ef, double load_factor)
{
    cc_coll_params_t p = method_params(CC_COLL_METHOD_SKETCH);
    p.mask |= CC_COLL_PARAMS_FIELD_DENSITY | CC_COLL_PARAMS_FIELD_EF | CC_COLL_PARAMS_FIELD_SPARSIFIER |
              CC_COLL_PARAMS_FIELD_LOAD_FACTOR;
    p.density = density;
    p.ef = ef;
    p.sparsifier = CC_COLL_SPARSIFY_TOPK;
    p.load_factor = load_factor;
    return p;
}

static inline cc_coll_params_t keyed(cc_coll_params_t p, uint64_t key)
{
    p.mask |= CC_COLL_PARAMS_FIELD_EF_KEY;
    p.ef_key = key;
    return p;
}

/* The communicator's statistics: the fields named in `mask`. */
static inline cc_coll_stats_t get_stats_masked(cc_coll_comm_h h, uint64_t mask)
{
    cc_coll_stats_t s;
    memset(&s, 0, sizeof s);
    s.mask = mask;
    CHECK_CC(cc_coll_comm_get_stats(h, &s));
    return s;
}

/* Every statistics field. */
static inline cc_coll_stats_t get_stats(cc_coll_comm_h h)
{
    return get_stats_masked(h, CC_COLL_STATS_FIELD_CALLS | CC_COLL_STATS_FIELD_BYTES_UNCOMPRESSED |
                                   CC_COLL_STATS_FIELD_BYTES_WIRE | CC_COLL_STATS_FIELD_TIME_COMPRESS |
                                   CC_COLL_STATS_FIELD_TIME_COMMUNICATE | CC_COLL_STATS_FIELD_TIME_DECOMPRESS |
                                   CC_COLL_STATS_FIELD_SKETCH_ELEMENTS | CC_COLL_STATS_FIELD_SKETCH_PEELED);
}

/* ---- test runner ------------------------------------------------------------ */

typedef void (*TestFn)(cc_coll_comm_h);

/* Test names given on the command line select tests (default: all);
 * run_suite sets these, and the size of MPI_COMM_WORLD. */
static int g_argc = 0;
static char **g_argv = NULL;
static int g_size = 1;

static inline void run_test(const char *name, TestFn fn, cc_coll_comm_h h)
{
    if (g_argc > 1) {
        int selected = 0;
        for (int a = 1; a < g_argc; ++a) selected |= strcmp(g_argv[a], name) == 0;
        if (!selected) return;
    }
    g_test = name;
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    fn(h);
    MPI_Barrier(MPI_COMM_WORLD);
    if (g_rank == 0) {
        printf("  %-22s ok (%.2f s)\n", name, MPI_Wtime() - t0);
        fflush(stdout);
    }
}

typedef struct {
    const char *name;
    TestFn fn;
} NamedTest;

/* A test program's whole main: MPI_Init, the version check, then with fewer
 * than min_ranks ranks "<program>: needs at least K ranks" and exit status 0;
 * otherwise setup (NULL: none), a communicator on MPI_COMM_WORLD, the tests
 * in table order (those named on the command line, or all), and
 * MPI_Finalize. Returns main's exit status. */
static inline int run_suite(int argc, char **argv, const char *program, const NamedTest *tests, size_t ntests,
                            int min_ranks, void (*setup)(void))
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    g_argc = argc;
    g_argv = argv;
    const double t0 = MPI_Wtime();
    CHECK_CC(cc_coll_check_version());
    if (g_size < min_ranks) {
        if (g_rank == 0) printf("%s: needs at least %d ranks\n", program, min_ranks);
        MPI_Finalize();
        return 0;
    }
    if (setup != NULL) setup();

    cc_coll_comm_h h = NULL;
    CHECK_CC(cc_coll_comm_create(MPI_COMM_WORLD, &h));
    if (g_rank == 0) printf("%s: %d ranks\n", program, g_size);
    for (size_t i = 0; i < ntests; ++i) run_test(tests[i].name, tests[i].fn, h);
    CHECK_CC(cc_coll_comm_destroy(h));
    if (g_rank == 0) printf("%s: %d ranks: all tests passed in %.1f s\n", program, g_size, MPI_Wtime() - t0);
    MPI_Finalize();
    return 0;
}

/* ---- dense binary64 linear algebra (LOWRANK references) --------------------- */

/* A standard normal value (Box-Muller on the rng above). */
static inline double rng_gauss(uint64_t *s)
{
    const double u1 = ((double)(rng_next(s) >> 11) + 1.0) * (1.0 / 9007199254740992.0); /* (0, 1] */
    const double u2 = rng_uniform(s);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

static inline void gauss_fill(double *x, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; ++i) x[i] = rng_gauss(&seed);
}

/* c (m x n) = a (m x k) times b^T, b being n x k; row-major. */
static inline void mat_mul_abt(const double *a, const double *b, size_t m, size_t n, size_t k, double *c)
{
    for (size_t i = 0; i < m; ++i)
        for (size_t j = 0; j < n; ++j) {
            double s = 0.0;
            for (size_t l = 0; l < k; ++l) s += a[i * k + l] * b[j * k + l];
            c[i * n + j] = s;
        }
}

/* c (m x n) = a (m x k) times b (k x n); row-major. */
static inline void mat_mul_ab(const double *a, const double *b, size_t m, size_t n, size_t k, double *c)
{
    for (size_t i = 0; i < m; ++i)
        for (size_t j = 0; j < n; ++j) {
            double s = 0.0;
            for (size_t l = 0; l < k; ++l) s += a[i * k + l] * b[l * n + j];
            c[i * n + j] = s;
        }
}

/* c (k x n) = a^T times b, a being m x k and b m x n; row-major. */
static inline void mat_mul_atb(const double *a, const double *b, size_t m, size_t n, size_t k, double *c)
{
    for (size_t i = 0; i < k; ++i)
        for (size_t j = 0; j < n; ++j) {
            double s = 0.0;
            for (size_t l = 0; l < m; ++l) s += a[l * k + i] * b[l * n + j];
            c[i * n + j] = s;
        }
}

/* Orthonormalises the k columns of the row-major m x k matrix a in place:
 * modified Gram-Schmidt with a second pass ("twice is enough"); a column
 * left with less than 1e-10 of its norm after the projections (dependent on
 * the ones before it) becomes zero. Returns the number of nonzero columns. */
static inline int orthonormalize_columns(double *a, size_t m, int k)
{
    int kept = 0;
    for (int i = 0; i < k; ++i) {
        double n0 = 0.0;
        for (size_t r = 0; r < m; ++r) n0 += a[r * (size_t)k + (size_t)i] * a[r * (size_t)k + (size_t)i];
        n0 = sqrt(n0);
        for (int pass = 0; pass < 2; ++pass)
            for (int j = 0; j < i; ++j) {
                double d = 0.0;
                for (size_t r = 0; r < m; ++r) d += a[r * (size_t)k + (size_t)j] * a[r * (size_t)k + (size_t)i];
                for (size_t r = 0; r < m; ++r) a[r * (size_t)k + (size_t)i] -= d * a[r * (size_t)k + (size_t)j];
            }
        double n1 = 0.0;
        for (size_t r = 0; r < m; ++r) n1 += a[r * (size_t)k + (size_t)i] * a[r * (size_t)k + (size_t)i];
        n1 = sqrt(n1);
        const int zero = !(n1 > 1e-10 * n0);
        for (size_t r = 0; r < m; ++r) a[r * (size_t)k + (size_t)i] = zero ? 0.0 : a[r * (size_t)k + (size_t)i] / n1;
        kept += !zero;
    }
    return kept;
}

/* Frobenius norm of x - y over n values (y NULL: of x). */
static inline double norm_diff(const double *x, const double *y, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; ++i) {
        const double d = x[i] - (y ? y[i] : 0.0);
        s += d * d;
    }
    return sqrt(s);
}

/* Relative Frobenius error of a d buffer against a binary64 reference. */
static inline double rel_err(cc_coll_dtype_t d, const void *got, const double *want, size_t n)
{
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < n; ++i) {
        const double e = element(d, got, i) - want[i];
        num += e * e;
        den += want[i] * want[i];
    }
    return den > 0.0 ? sqrt(num / den) : sqrt(num);
}

/* The per-rank error-feedback invariant after several steps of a lossy
 * method on this rank's inputs: the sum of the results plus the residual e
 * equals the sum of the inputs, within tol x (scale[i] + |e[i]|), scale being
 * the accumulated |input| + |result|; and the residual holds a real part of
 * the last input (norm above 5% of g_norm), as a lossy step on random
 * full-rank data must leave. F64 tolerance 1e-14, else 2e-6. */
static inline void check_rank_ef_sums(const char *desc, cc_coll_dtype_t d, size_t n, const double *sum_g,
                                      const double *sum_out, const double *scale, const double *e, double g_norm)
{
    const double tol = d == CC_COLL_F64 ? 1e-14 : 2e-6;
    for (size_t i = 0; i < n; ++i) {
        const double diff = fabs(sum_out[i] + e[i] - sum_g[i]);
        if (!(diff <= tol * (scale[i] + fabs(e[i]) + 1e-30))) {
            fprintf(stderr,
                    "[rank %d] %s: element %zu: sum of results %.17g + residual %.17g - sum of inputs %.17g = %.3g "
                    "(bound %.3g)\n",
                    g_rank, desc, i, sum_out[i], e[i], sum_g[i], diff, tol * scale[i]);
            die("%s: the invariant does not hold", desc, 0);
        }
    }
    if (!(norm_diff(e, NULL, n) > 0.05 * g_norm)) die("%s: the residual should hold what was not sent", desc, 0);
}

/* Copies between the host buffer of packed elements and the buffer the
 * calls run on (a device buffer). */
typedef void (*ef_copy_fn)(void *dst, const void *src, size_t bytes);

/* `steps` in-place AVG allreduces through p of fresh Gaussian inputs
 * (step t's from seed(g_rank, tc * 1000 + t), rounded to d), then the
 * per-rank invariant of check_rank_ef_sums on the tensor's residual. The
 * calls run on call_buf through to_call and from_call, or on a host buffer
 * when call_buf is NULL; with same_bits every rank must hold the same
 * result after each step. */
static inline void ef_invariant_steps(cc_coll_comm_h h, const cc_coll_params_t *p, cc_coll_dtype_t d, size_t n,
                                      int steps, uint64_t (*seed)(int, int), int tc, void *call_buf,
                                      ef_copy_fn to_call, ef_copy_fn from_call, int same_bits, const char *desc)
{
    const size_t es = cc_coll_dtype_size(d);
    unsigned char *buf = (unsigned char *)xmalloc(n * es);
    void *target = call_buf != NULL ? call_buf : buf;
    double *g = (double *)xmalloc(n * sizeof *g), *sum_g = (double *)xcalloc(n, sizeof *sum_g);
    double *sum_out = (double *)xcalloc(n, sizeof *sum_out), *scale = (double *)xcalloc(n, sizeof *scale);
    double *e = (double *)xmalloc(n * sizeof *e);
    double g_norm = 0.0;
    for (int t = 0; t < steps; ++t) {
        gauss_fill(g, n, seed(g_rank, tc * 1000 + t));
        for (size_t i = 0; i < n; ++i) g[i] = round_to(d, g[i]);
        pack(d, g, n, buf);
        if (call_buf != NULL) to_call(call_buf, buf, n * es);
        const cc_coll_status_t st = cc_coll_allreduce(target, target, n, d, CC_COLL_AVG, p, h, NULL);
        if (st != CC_COLL_OK) die("%s", desc, (int)st);
        if (call_buf != NULL) from_call(buf, call_buf, n * es);
        if (same_bits) expect_same_on_all_ranks(buf, n * es, desc);
        for (size_t i = 0; i < n; ++i) {
            const double out = element(d, buf, i);
            sum_g[i] += g[i];
            sum_out[i] += out;
            scale[i] += fabs(g[i]) + fabs(out);
        }
        g_norm = norm_diff(g, NULL, n);
    }
    CHECK_CC(cc_coll_ef_get_residual(h, p, target, n, d, e));
    check_rank_ef_sums(desc, d, n, sum_g, sum_out, scale, e, g_norm);
    free(buf);
    free(g);
    free(sum_g);
    free(sum_out);
    free(scale);
    free(e);
}

/* Unsets the settings of the library's core and of LOWRANK, so that the
 * settings a test relies on come from params, never from the environment
 * it happens to run in. */
static inline void unset_lowrank_settings(void)
{
    static const char *const vars[] = {"CC_COLL_METHOD", "CC_COLL_EF", "CC_COLL_EF_MAX_BYTES", "CC_COLL_SEED",
                                       "CC_COLL_STATE_MAX_BYTES", "CC_COLL_LOWRANK_RANK", "CC_COLL_LOWRANK_WARM_START",
                                       "CC_COLL_LOWRANK_START_ITER", "CC_COLL_LOWRANK_MIN_COMPRESSION_RATE",
                                       "CC_COLL_LOWRANK_FACTORS"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; ++i) unsetenv(vars[i]);
}

/* ---- LOWRANK params and matrix view ----------------------------------------- */

/* Rank q's input: the first n elements of the vrows x vcols matrix A B_q^T,
 * rounded to d. A (vrows x r) is shared by every rank and B_q (vcols x r) is
 * rank q's, so the sum over ranks is A (sum_q B_q)^T, of rank r. When the
 * view is padded, A's last row is zero, so the padded matrix keeps rank r. */
static inline void lowrank_input(cc_coll_dtype_t d, size_t n, size_t vrows, size_t vcols, int r, uint64_t seed, int q,
                                 double *x)
{
    double *a = xmalloc(vrows * (size_t)r * sizeof *a), *b = xmalloc(vcols * (size_t)r * sizeof *b);
    gauss_fill(a, vrows * (size_t)r, seed);
    if (vrows * vcols > n)
        for (int k = 0; k < r; ++k) a[(vrows - 1) * (size_t)r + (size_t)k] = 0.0;
    gauss_fill(b, vcols * (size_t)r, seed ^ (0x9e3779b97f4a7c15ull * (uint64_t)(q + 1)));
    for (size_t i = 0; i < n; ++i) {
        const size_t row = i / vcols, col = i % vcols;
        double s = 0.0;
        for (int k = 0; k < r; ++k) s += a[row * (size_t)r + (size_t)k] * b[col * (size_t)r + (size_t)k];
        x[i] = round_to(d, s);
    }
    free(a);
    free(b);
}


/* This rank's input x: c_q M with c_q = 2 (q + 1) / (P + 1) (so the average
 * is M), rounded to d, where M = U diag(s) V^T (the first n elements of its
 * vr x vc view) has r singular values from 1.5 down to 1 and orthonormal U,
 * V (U's last row zero when the view is padded). Every rank's factors point
 * the same way, so their sums cancel nothing, and M is well conditioned: a
 * LOWRANK step at rank r from a Q that meets M's row space loses little more
 * than the factors' rounding (lowrank_factors.c). want: the exact reduction
 * (SUM or AVG) of the rounded inputs. */
static inline void lowrank_scaled_input(cc_coll_dtype_t d, cc_coll_op_t op, size_t n, size_t vr, size_t vc, int r,
                                        uint64_t seed, double *x, double *want)
{
    double *u = xmalloc(vr * (size_t)r * sizeof *u), *v = xmalloc(vc * (size_t)r * sizeof *v);
    gauss_fill(u, vr * (size_t)r, seed);
    gauss_fill(v, vc * (size_t)r, seed ^ 0x5a5a5a5aull);
    if (vr * vc > n)
        for (int k = 0; k < r; ++k) u[(vr - 1) * (size_t)r + (size_t)k] = 0.0;
    CHECK(orthonormalize_columns(u, vr, r) == r && orthonormalize_columns(v, vc, r) == r, "orthonormal U, V");
    memset(want, 0, n * sizeof *want);
    for (size_t i = 0; i < n; ++i) {
        const size_t row = i / vc, col = i % vc;
        double m = 0.0;
        for (int k = 0; k < r; ++k) {
            const double s = 1.5 - 0.5 * k / (r > 1 ? r - 1 : 1);
            m += u[row * (size_t)r + (size_t)k] * s * v[col * (size_t)r + (size_t)k];
        }
        for (int q = 0; q < g_size; ++q) {
            const double xq = round_to(d, 2.0 * (q + 1) / (g_size + 1) * m);
            want[i] += op == CC_COLL_AVG ? xq / g_size : xq;
            if (q == g_rank) x[i] = xq;
        }
    }
    free(u);
    free(v);
}

/* LOWRANK with RANK = rank and SHAPE = rows x cols (cols 0: count / rows);
 * rows = cols = 0 is the explicit near-square view. */
static inline cc_coll_params_t lowrank_params(uint64_t rows, uint64_t cols, int rank)
{
    cc_coll_params_t p = method_params(CC_COLL_METHOD_LOWRANK);
    p.mask |= CC_COLL_PARAMS_FIELD_RANK | CC_COLL_PARAMS_FIELD_SHAPE;
    p.rank = rank;
    p.rows = rows;
    p.cols = cols;
    return p;
}

/* LOWRANK with RANK = rank and no SHAPE: an allreduce sends the tensor
 * densely, as a 1-D tensor (a bias); point-to-point views it near-square. */
static inline cc_coll_params_t lowrank_params_1d(int rank)
{
    cc_coll_params_t p = method_params(CC_COLL_METHOD_LOWRANK);
    p.mask |= CC_COLL_PARAMS_FIELD_RANK;
    p.rank = rank;
    return p;
}

/* The documented matrix view of `count` elements: rows x cols, cols 0
 * meaning count / rows; rows 0 (SHAPE 0 x 0): the smallest r with r * r >=
 * count, and cols = ceil(count / r). */
static inline void lowrank_view(size_t count, uint64_t rows, uint64_t cols, size_t *vrows, size_t *vcols)
{
    if (rows > 0) {
        *vrows = (size_t)rows;
        *vcols = cols > 0 ? (size_t)cols : count / (size_t)rows;
        return;
    }
    size_t r = 1;
    while (r * r < count) ++r;
    *vrows = r;
    *vcols = (count + r - 1) / r;
}

#endif
