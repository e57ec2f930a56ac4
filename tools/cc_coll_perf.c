/* cc_coll_perf: allreduce benchmark of libcc_coll in the nccl-tests / OSU
 * dialect.
 *
 *   mpirun -np 4 cc_coll_perf -b 4K -e 64M -f 2 [-d f32] [-o sum] [-m topk]
 *
 * For every size from -b to -e (times -f), every in-place mode and every
 * method, rank 0 prints one line: time, algbw and busbw on the uncompressed
 * size, bytes on the wire, compression ratio, relative error against
 * MPI_Allreduce, wrong elements and the speedup over MPI_Allreduce.
 * Plain MPI_Allreduce ("mpi") is always measured first: it is the reference
 * for the error columns and the baseline of the speedup. `-J` prints one JSON
 * document instead, `-O` the OSU latency format. `--help` defines every
 * column.
 *
 * `-N` adds the overlap of the non-blocking form, measured as OSU's
 * osu_iallreduce does: the pure communication time of iallreduce + wait, then
 * iallreduce, a dummy compute of that length on the caller's thread (with
 * `-t` test calls inside it) and wait; overlap % = max(0, 100 * (1 -
 * (overall - compute) / pure)). MPI is then initialised with
 * MPI_THREAD_MULTIPLE when the MPI library provides it.
 *
 * As in nccl-tests, inputs are small integers (((rank + i) % 7) - 3), so the
 * exact sum is known and an exact method must match it bit for bit.
 */
#include <ctype.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "cc_coll.h"

#define PROG "cc_coll_perf"
#define MAX_METHODS 64   /* more library methods than this are not listed */
#define METHOD_MPI (-1)  /* plain MPI_Allreduce, beside the cc_coll_method_t values */
#define EXIT_USAGE 2

/* ------------------------------------------------------------------------ */
/* Options                                                                   */
/* ------------------------------------------------------------------------ */

enum { MODE_IN_PLACE = 0, MODE_OUT_OF_PLACE = 1, MODE_BOTH = 2 };

typedef struct options {
    size_t min_bytes, max_bytes, factor;
    int iters, warmup, check;
    cc_coll_dtype_t dtype;
    cc_coll_op_t op;
    int want[MAX_METHODS]; /* library methods selected with -m */
    int n_methods;         /* library methods that exist */
    int has_density, has_ef, ef;
    double density;
    int inplace_mode;
    int has_rank, rank; /* -R: lowrank's target rank (params.rank) */
    int json, osu, quiet;
    int data;        /* DATA_INT or DATA_NORMAL */
    int nonblocking; /* -N: the OSU overlap measurement as well */
    int test_calls;  /* -t: cc_coll_test / MPI_Test calls in the dummy compute */
} options_t;

enum { DATA_INT = 0, DATA_NORMAL = 1 };
static const char *const data_names[] = {"int", "normal"};

static const char *const dtype_names[] = {"f32", "f64", "f16", "bf16"};
static const char *const op_names[] = {"sum", "avg"};

static const char *method_label(int method)
{
    return method == METHOD_MPI ? "mpi" : cc_coll_method_name((cc_coll_method_t)method);
}

/* Exact methods must reproduce MPI_Allreduce bit for bit; the others are
 * judged by their relative error. */
static int method_is_exact(int method)
{
    return method == METHOD_MPI || method == CC_COLL_METHOD_NONE;
}

static void print_help(void)
{
    printf(
        "usage: " PROG " [options]    (run under mpirun; rank 0 prints)\n"
        "\n"
        "Allreduce benchmark of libcc_coll beside plain MPI_Allreduce, in the nccl-tests\n"
        "dialect. Sizes are bytes per rank; K, M, G suffixes are powers of 1024.\n"
        "\n"
        "Sizes\n"
        "  -b SIZE   smallest size in bytes, >= 1                            [4]\n"
        "  -e SIZE   largest size in bytes, >= -b                            [64M]\n"
        "  -f N      multiplication factor from one size to the next, >= 2   [2]\n"
        "Measurement\n"
        "  -n N      timed iterations per size, mode and method, >= 1        [20]\n"
        "  -w N      warm-up iterations (not timed), >= 0                    [5]\n"
        "  -c 0|1    check results (#wrong column, exit status 1 if any)     [1]\n"
        "  -i 0|1|2  0 = in-place only, 1 = out-of-place only, 2 = both      [2]\n"
        "  -r DATA   input data: int or normal (see below)                  [int]\n"
        "Reduction\n"
        "  -d TYPE   element type: f32, f64, f16, bf16                       [f32]\n"
        "  -o OP     sum or avg                                              [sum]\n"
        "Methods\n"
        "  -m LIST   comma-separated methods among: mpi");
    for (int m = 0; cc_coll_method_name((cc_coll_method_t)m) != NULL; ++m)
        printf(", %s", cc_coll_method_name((cc_coll_method_t)m));
    printf(
        "; 'all' = every\n"
        "            one [all]. mpi (plain MPI_Allreduce) is always measured, listed\n"
        "            or not: it is the reference of relerr and the speedup baseline.\n"
        "  -D X      topk density (params.density), 0 < X <= 1\n"
        "  -E 0|1    error feedback of lossy methods (params.ef)\n"
        "  -R N      lowrank target rank (params.rank), N >= 1\n"
        "            lowrank views the flat buffer near-square (params SHAPE with\n"
        "            rows = cols = 0: rows = ceil(sqrt(count))); without a shape\n"
        "            the library would send it densely, as a 1-D tensor\n"
        "            -D, -E, -R unset: the communicator's CC_COLL_DENSITY /\n"
        "            CC_COLL_EF / CC_COLL_LOWRANK_RANK (see cc_coll_info); the\n"
        "            header and JSON report the value used\n"
        "Overlap of the non-blocking form (OSU osu_iallreduce's method)\n"
        "  -N, --nonblocking\n"
        "            after each blocking measurement, measure the same method with\n"
        "            cc_coll_iallreduce (mpi: MPI_Iallreduce) as osu_iallreduce\n"
        "            does; MPI is initialised with MPI_THREAD_MULTIPLE (when the\n"
        "            MPI library provides less, CC_COLL_PROGRESS=thread fails)\n"
        "  -t N, --num_test_calls N\n"
        "            cc_coll_test (mpi: MPI_Test) calls spread over the dummy\n"
        "            compute, >= 0                                          [0]\n"
        "Output\n"
        "  -J        one JSON document on stdout instead of the table\n"
        "  -O        OSU-compatible output: one '# Size  Avg Latency(us)' block per\n"
        "            method and mode\n"
        "  -q        quiet: no progress lines on stderr\n"
        "  -h, --help  this text\n"
        "\n");
    printf(
        "Columns (one line per size, method and in-place mode)\n"
        "  size(B)      bytes per rank: count x element size (uncompressed)\n"
        "  count        elements per rank: size / element size, at least 1\n"
        "  dtype, method, inplace   what was measured\n"
        "  time(us)     per call: the average over the -n timed iterations of the\n"
        "               slowest rank's time (MPI_Wtime around each call, one\n"
        "               MPI_Barrier before the timed loop)\n"
        "  algbw(GB/s)  size / time (GB = 1e9 bytes), on the uncompressed size\n"
        "  busbw(GB/s)  algbw * 2(P-1)/P, P = ranks (the nccl-tests definition)\n"
        "  wire(B)      bytes one rank hands to MPI per call (cc_coll stats\n"
        "               bytes_wire / calls; for mpi, the size)\n"
        "  ratio        size / wire\n"
        "  relerr       ||result - MPI_Allreduce result||_2 / ||MPI_Allreduce result||_2\n"
        "               over all ranks, for the first timed call (error feedback is\n"
        "               reset before the timed loop, so it is the one-step error)\n"
        "  #wrong       with -c 1, elements of that first result differing bit for\n"
        "               bit from the exact sum (mpi) or from the MPI_Allreduce\n"
        "               result (none), summed over ranks; '-' for lossy methods\n"
        "  speedup      time(mpi) / time(method), same size, mode and buffers\n"
        "The JSON also holds, for the library's methods, compress_us,\n"
        "communicate_us and decompress_us: the library's own phases per call\n"
        "(its statistics over the timed calls), the slowest rank's; for auto,\n"
        "auto_lossy_share (the share of its calls the cost model compressed) and\n"
        "auto_predicted_us (the model's mean predicted time of its choices)\n"
        "\n");
    printf(
        "With -N the table shows, instead of algbw, busbw, wire, ratio and relerr\n"
        "(the JSON keeps them), per size, method and in-place mode, time(us),\n"
        "speedup and #wrong of the blocking call as above, in the same run, then:\n"
        "  pure(us)     pure communication time: iallreduce + wait with nothing in\n"
        "               between (-w untimed, then -n timed iterations, a barrier\n"
        "               after each)\n"
        "  then -w + -n iterations of: iallreduce (init), the dummy compute for\n"
        "  the rank's own pure time with -t tests spread over it, wait; a\n"
        "  barrier after each:\n"
        "  init(us)     the iallreduce call\n"
        "  compute(us)  the dummy compute, test calls excluded\n"
        "  test(us)     the -t test calls\n"
        "  wait(us)     the wait call\n"
        "  overall(us)  init + compute + test + wait\n"
        "  overlap(%%)   max(0, 100 - 100 * (overall - compute) / pure), OSU's\n"
        "               formula: 100 when the collective completed entirely behind\n"
        "               the compute, 0 when it added its whole pure time to it\n"
        "  crate(%%)     the dummy compute's work rate during the overlapped run,\n"
        "               against its rate right before with nothing in flight: below\n"
        "               100 when the collective (the progress thread, or work done\n"
        "               inside test calls) took CPU time from the caller's thread,\n"
        "               which overlap(%%) cannot see (the compute runs for a set\n"
        "               wall-clock time, as in OSU)\n"
        "  #nbwrong     with -c 1, elements of the first timed iallreduce's result\n"
        "               (error feedback reset before it) differing bit for bit from\n"
        "               the first timed blocking result (mpi: from the exact sum,\n"
        "               '-' when it is not exact)\n"
        "  Every time is averaged over the timed iterations on each rank, then over\n"
        "  the ranks (OSU's reduction). The dummy compute is OSU's: a 25 x 25\n"
        "  float matrix kernel on the caller's thread, repeated until the target\n"
        "  wall-clock time has elapsed. The header says which progress mode the\n"
        "  library uses (CC_COLL_PROGRESS and the MPI thread level).\n"
        "\n");
    printf(
        "Inputs (-r): int (default) is ((rank + i) %% 7) - 3, so sums are exact and\n"
        "mpi is checked against them; normal is gradient-like data (approximately\n"
        "standard normal, distinct magnitudes), the realistic input for lossy\n"
        "methods: top-k of repeating small integers is all ties. With normal, mpi\n"
        "is not checked against an exact sum; none is still compared bit for bit\n"
        "with mpi. In-place runs copy a\n"
        "fresh input into the buffer before each call, outside the timed region.\n"
        "Memory: four buffers of the largest size on every rank, five with -N.\n"
        "Exit status: 0; 1 if a check failed or a cc_coll call failed; 2 for a bad\n"
        "command line.\n");
}

/* Formats a usage error into msg and returns EXIT_USAGE. */
static int usage_error(char *msg, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, cap, fmt, ap);
    va_end(ap);
    return EXIT_USAGE;
}

/* Bytes with an optional K, M or G suffix (powers of 1024). */
static int parse_size(const char *s, size_t *out)
{
    if (!isdigit((unsigned char)s[0])) return -1;
    char *end = NULL;
    unsigned long long v = strtoull(s, &end, 10);
    unsigned long long mult = 1;
    switch (toupper((unsigned char)*end)) {
    case 'K': mult = 1ULL << 10; ++end; break;
    case 'M': mult = 1ULL << 20; ++end; break;
    case 'G': mult = 1ULL << 30; ++end; break;
    default: break;
    }
    if (*end != '\0' || v == ULLONG_MAX || v > SIZE_MAX / mult) return -1;
    *out = (size_t)(v * mult);
    return 0;
}

/* A decimal integer in [lo, hi], digits only. */
static int parse_int(const char *s, long lo, long hi, long *out)
{
    if (!isdigit((unsigned char)s[0])) return -1;
    char *end = NULL;
    long v = strtol(s, &end, 10);
    if (*end != '\0' || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

static int find_name(const char *s, const char *const *names, int n)
{
    for (int i = 0; i < n; ++i)
        if (strcmp(s, names[i]) == 0) return i;
    return -1;
}

static int parse_methods(const char *list, options_t *o, char *msg, size_t cap)
{
    memset(o->want, 0, sizeof o->want);
    const char *p = list;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char name[64];
        if (len == 0 || len >= sizeof name)
            return usage_error(msg, cap, "-m: empty or overlong method name in '%s'", list);
        memcpy(name, p, len);
        name[len] = '\0';
        int found = strcmp(name, "mpi") == 0;
        if (strcmp(name, "all") == 0) {
            for (int m = 0; m < o->n_methods; ++m) o->want[m] = 1;
            found = 1;
        }
        for (int m = 0; m < o->n_methods && !found; ++m)
            if (strcmp(name, cc_coll_method_name((cc_coll_method_t)m)) == 0) found = o->want[m] = 1;
        if (!found) {
            char known[256] = "mpi";
            for (int m = 0; m < o->n_methods; ++m) {
                strncat(known, ", ", sizeof known - strlen(known) - 1);
                strncat(known, cc_coll_method_name((cc_coll_method_t)m), sizeof known - strlen(known) - 1);
            }
            return usage_error(msg, cap, "-m: unknown method '%s' (known: %s, all)", name, known);
        }
        if (!comma) return 0;
        p = comma + 1;
    }
}

/* Returns 0 to run, 1 for --help, EXIT_USAGE with msg filled for an error. */
static int parse_options(int argc, char **argv, options_t *o, char *msg, size_t cap)
{
    memset(o, 0, sizeof *o);
    o->min_bytes = 4;
    o->max_bytes = (size_t)64 << 20;
    o->factor = 2;
    o->iters = 20;
    o->warmup = 5;
    o->check = 1;
    o->dtype = CC_COLL_F32;
    o->op = CC_COLL_SUM;
    o->inplace_mode = MODE_BOTH;
    while (o->n_methods < MAX_METHODS && cc_coll_method_name((cc_coll_method_t)o->n_methods) != NULL) ++o->n_methods;
    for (int m = 0; m < o->n_methods; ++m) o->want[m] = 1;

    for (int i = 1; i < argc; ++i) {
        const char *arg = argv[i];
        if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) return 1;
        /* OSU's long names of -N and -t. */
        const char *long_val = NULL;
        if (strcmp(arg, "--nonblocking") == 0) {
            arg = "-N";
        } else if (strncmp(arg, "--num_test_calls", 16) == 0 && (arg[16] == '\0' || arg[16] == '=')) {
            long_val = arg[16] == '=' ? arg + 17 : NULL;
            arg = "-t";
        }
        if (arg[0] != '-' || arg[1] == '\0' || arg[1] == '-' || !strchr("befnwcdomDEirJOqNtR", arg[1]))
            return usage_error(msg, cap, "unknown option '%s'", arg);
        const char flag = arg[1];
        if (strchr("JOqN", flag)) {
            if (arg[2] != '\0') return usage_error(msg, cap, "-%c takes no value (got '%s')", flag, arg);
            if (flag == 'J') o->json = 1;
            if (flag == 'O') o->osu = 1;
            if (flag == 'q') o->quiet = 1;
            if (flag == 'N') o->nonblocking = 1;
            continue;
        }
        /* The value follows the flag, attached (-b8K) or as the next word. */
        const char *val = long_val ? long_val : arg[2] != '\0' ? arg + 2 : (i + 1 < argc ? argv[++i] : NULL);
        if (val == NULL) return usage_error(msg, cap, "-%c needs a value", flag);
        long v = 0;
        char *end = NULL;
        switch (flag) {
        case 'b':
        case 'e': {
            size_t *dst = flag == 'b' ? &o->min_bytes : &o->max_bytes;
            if (parse_size(val, dst) != 0)
                return usage_error(msg, cap, "-%c: '%s' is not a size in bytes (digits, optional K, M or G)", flag,
                                   val);
            break;
        }
        case 'f':
            if (parse_int(val, 2, LONG_MAX, &v) != 0)
                return usage_error(msg, cap, "-f: multiplication factor must be an integer >= 2 (got '%s')", val);
            o->factor = (size_t)v;
            break;
        case 'n':
            if (parse_int(val, 1, 1000000, &v) != 0)
                return usage_error(msg, cap, "-n: iterations must be an integer in 1..1000000 (got '%s')", val);
            o->iters = (int)v;
            break;
        case 'w':
            if (parse_int(val, 0, 1000000, &v) != 0)
                return usage_error(msg, cap, "-w: warm-up iterations must be an integer in 0..1000000 (got '%s')",
                                   val);
            o->warmup = (int)v;
            break;
        case 'c':
        case 'E':
            if (parse_int(val, 0, 1, &v) != 0) return usage_error(msg, cap, "-%c: expected 0 or 1 (got '%s')", flag, val);
            if (flag == 'c') {
                o->check = (int)v;
            } else {
                o->has_ef = 1;
                o->ef = (int)v;
            }
            break;
        case 'r': {
            int d = find_name(val, data_names, 2);
            if (d < 0) return usage_error(msg, cap, "-r: unknown input data '%s' (known: int, normal)", val);
            o->data = d;
            break;
        }
        case 'i':
            if (parse_int(val, 0, 2, &v) != 0)
                return usage_error(msg, cap, "-i: expected 0 (in-place), 1 (out-of-place) or 2 (both) (got '%s')", val);
            o->inplace_mode = (int)v;
            break;
        case 'd': {
            int d = find_name(val, dtype_names, 4);
            if (d < 0) return usage_error(msg, cap, "-d: unknown dtype '%s' (known: f32, f64, f16, bf16)", val);
            o->dtype = (cc_coll_dtype_t)d;
            break;
        }
        case 'o': {
            int op = find_name(val, op_names, 2);
            if (op < 0) return usage_error(msg, cap, "-o: unknown op '%s' (known: sum, avg)", val);
            o->op = (cc_coll_op_t)op;
            break;
        }
        case 'm':
            if (parse_methods(val, o, msg, cap) != 0) return EXIT_USAGE;
            break;
        case 't':
            if (parse_int(val, 0, 1000000, &v) != 0)
                return usage_error(msg, cap, "-t: test calls must be an integer in 0..1000000 (got '%s')", val);
            o->test_calls = (int)v;
            break;
        case 'R':
            if (parse_int(val, 1, INT_MAX, &v) != 0)
                return usage_error(msg, cap, "-R: the lowrank rank must be an integer >= 1 (got '%s')", val);
            o->has_rank = 1;
            o->rank = (int)v;
            break;
        case 'D':
            o->density = strtod(val, &end);
            if (end == val || *end != '\0' || !(o->density > 0.0 && o->density <= 1.0))
                return usage_error(msg, cap, "-D: density must be a number in (0, 1] (got '%s')", val);
            o->has_density = 1;
            break;
        }
    }

    if (o->min_bytes < 1) return usage_error(msg, cap, "-b: the smallest size must be at least 1 byte");
    if (o->min_bytes > o->max_bytes)
        return usage_error(msg, cap, "-b (%zu bytes) is larger than -e (%zu bytes)", o->min_bytes, o->max_bytes);
    if (o->max_bytes / cc_coll_dtype_size(o->dtype) > (size_t)INT_MAX)
        return usage_error(msg, cap, "-e: %zu bytes of %s are more than INT_MAX elements", o->max_bytes,
                           dtype_names[o->dtype]);
    if (o->json && o->osu) return usage_error(msg, cap, "-J and -O exclude each other");
    if (o->test_calls > 0 && !o->nonblocking) return usage_error(msg, cap, "-t applies to -N only");
    return 0;
}

/* The value of a cc_coll setting in effect (environment or default). */
static const char *setting_value(const char *name)
{
    for (size_t i = 0; i < cc_coll_setting_count(); ++i) {
        cc_coll_setting_t s;
        cc_coll_setting_get(i, &s); /* an invalid value still fills the default */
        if (strcmp(s.name, name) == 0) return s.value;
    }
    return NULL;
}

/* -D / -E when given, else the communicator's defaults for the report. */
static void effective_density_ef(const options_t *o, double *density, int *ef)
{
    const char *d = setting_value("DENSITY");
    *density = o->has_density ? o->density : (d ? strtod(d, NULL) : NAN);
    if (o->has_ef) {
        *ef = o->ef;
        return;
    }
    char v[16] = "";
    const char *e = setting_value("EF");
    size_t j = 0;
    for (; e && *e && j + 1 < sizeof v; ++e)
        if (!isspace((unsigned char)*e)) v[j++] = (char)tolower((unsigned char)*e);
    v[j] = '\0';
    *ef = strcmp(v, "1") == 0 || strcmp(v, "true") == 0 || strcmp(v, "yes") == 0 || strcmp(v, "on") == 0;
}

/* -R when given, else the communicator's CC_COLL_LOWRANK_RANK. */
static int effective_lowrank_rank(const options_t *o)
{
    if (o->has_rank) return o->rank;
    const char *r = setting_value("LOWRANK_RANK");
    return r ? atoi(r) : 0;
}

/* Who advances the non-blocking collectives, as the library decides it
 * (docs/api.md, CC_COLL_PROGRESS): caller when asked for; otherwise thread
 * under MPI_THREAD_MULTIPLE; auto without it falls back to caller, thread
 * without it fails ("unavailable"). *setting receives CC_COLL_PROGRESS as
 * set (lower case). */
static const char *effective_progress(char *setting, size_t cap)
{
    const char *p = setting_value("PROGRESS");
    size_t j = 0;
    for (; p && *p && j + 1 < cap; ++p)
        if (!isspace((unsigned char)*p)) setting[j++] = (char)tolower((unsigned char)*p);
    setting[j] = '\0';
    int provided = MPI_THREAD_SINGLE;
    MPI_Query_thread(&provided);
    if (strcmp(setting, "caller") == 0) return "caller";
    if (provided == MPI_THREAD_MULTIPLE) return "thread";
    return strcmp(setting, "thread") == 0 ? "unavailable" : "caller";
}

static const char *thread_level_name(int level)
{
    switch (level) {
    case MPI_THREAD_SINGLE: return "single";
    case MPI_THREAD_FUNNELED: return "funneled";
    case MPI_THREAD_SERIALIZED: return "serialized";
    case MPI_THREAD_MULTIPLE: return "multiple";
    default: return "unknown";
    }
}

/* ------------------------------------------------------------------------ */
/* Element types                                                             */
/* ------------------------------------------------------------------------ */

/* binary16 / bfloat16 <-> binary32, round to nearest even (as libcc_coll). */
static uint32_t float_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float bits_float(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static float bf16_to_float(uint16_t h) { return bits_float((uint32_t)h << 16); }

static uint16_t float_to_bf16(float f)
{
    const uint32_t u = float_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u); /* quiet NaN */
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

static float f16_to_float(uint16_t h)
{
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    if (exp == 0x1f) return bits_float(sign | 0x7f800000u | (mant << 13));
    if (exp != 0) return bits_float(sign | ((exp + 112u) << 23) | (mant << 13));
    if (mant == 0) return bits_float(sign);
    int e = -1; /* subnormal: normalise the mantissa */
    do {
        ++e;
        mant <<= 1;
    } while ((mant & 0x400u) == 0);
    return bits_float(sign | ((uint32_t)(112 - e) << 23) | ((mant & 0x3ffu) << 13));
}

static uint16_t float_to_f16(float f)
{
    const uint32_t u = float_bits(f);
    const uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    const uint32_t abs = u & 0x7fffffffu;
    if (abs > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));
    if (abs >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);
    if (abs >= 0x38800000u) return (uint16_t)(sign | ((abs + 0xfffu + ((abs >> 13) & 1u) - 0x38000000u) >> 13));
    if (abs < 0x33000000u) return sign;
    const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    const unsigned shift = 126u - (abs >> 23);
    uint32_t result = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1u), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (result & 1u))) ++result;
    return (uint16_t)(sign | result);
}

static double load(const void *buf, size_t i, cc_coll_dtype_t dtype)
{
    switch (dtype) {
    case CC_COLL_F32: return ((const float *)buf)[i];
    case CC_COLL_F64: return ((const double *)buf)[i];
    case CC_COLL_F16: return f16_to_float(((const uint16_t *)buf)[i]);
    case CC_COLL_BF16: return bf16_to_float(((const uint16_t *)buf)[i]);
    }
    return NAN;
}

static void store(void *buf, size_t i, cc_coll_dtype_t dtype, double v)
{
    switch (dtype) {
    case CC_COLL_F32: ((float *)buf)[i] = (float)v; break;
    case CC_COLL_F64: ((double *)buf)[i] = v; break;
    case CC_COLL_F16: ((uint16_t *)buf)[i] = float_to_f16((float)v); break;
    case CC_COLL_BF16: ((uint16_t *)buf)[i] = float_to_bf16((float)v); break;
    }
}

/* AVG after the sum, as libcc_coll documents it: divide in the element type
 * (binary32 for the 16-bit types, then round). */
static void divide_by_ranks(void *buf, size_t n, cc_coll_dtype_t dtype, int ranks)
{
    for (size_t i = 0; i < n; ++i) {
        switch (dtype) {
        case CC_COLL_F32: ((float *)buf)[i] /= (float)ranks; break;
        case CC_COLL_F64: ((double *)buf)[i] /= (double)ranks; break;
        case CC_COLL_F16: ((uint16_t *)buf)[i] = float_to_f16(f16_to_float(((uint16_t *)buf)[i]) / (float)ranks); break;
        case CC_COLL_BF16:
            ((uint16_t *)buf)[i] = float_to_bf16(bf16_to_float(((uint16_t *)buf)[i]) / (float)ranks);
            break;
        }
    }
}

/* MPI has no 16-bit float types: sum pairs in binary32 and round. */
static void sum_f16(void *in, void *inout, int *len, MPI_Datatype *type)
{
    (void)type;
    const uint16_t *a = in;
    uint16_t *b = inout;
    for (int i = 0; i < *len; ++i) b[i] = float_to_f16(f16_to_float(a[i]) + f16_to_float(b[i]));
}

static void sum_bf16(void *in, void *inout, int *len, MPI_Datatype *type)
{
    (void)type;
    const uint16_t *a = in;
    uint16_t *b = inout;
    for (int i = 0; i < *len; ++i) b[i] = float_to_bf16(bf16_to_float(a[i]) + bf16_to_float(b[i]));
}

/* The verifiable input of nccl-tests: small integers, exact in every dtype. */
static int input_value(int rank, size_t i) { return (int)(((size_t)rank + i) % 7) - 3; }

/* Gradient-like input for lossy methods (-r normal): approximately standard
 * normal (sum of four uniforms, centred and scaled), deterministic per rank
 * and element, every magnitude distinct in practice. */
static double normal_value(int rank, size_t i)
{
    uint64_t s = ((uint64_t)i * 0x9e3779b97f4a7c15ull) ^ ((uint64_t)(rank + 1) * 0xd1b54a32d192ed03ull);
    double acc = 0.0;
    for (int j = 0; j < 4; ++j) {
        s ^= s >> 30;
        s *= 0xbf58476d1ce4e5b9ull;
        s ^= s >> 27;
        s *= 0x94d049bb133111ebull;
        s ^= s >> 31;
        acc += (double)(s >> 11) / 9007199254740992.0;
    }
    return (acc - 2.0) * 1.7320508075688772;
}

/* ------------------------------------------------------------------------ */
/* Benchmark state and one measurement                                       */
/* ------------------------------------------------------------------------ */

typedef struct result {
    size_t bytes, count;
    int method; /* METHOD_MPI or a cc_coll_method_t */
    int in_place;
    double time_us, algbw, busbw, wire, ratio, rel_err, speedup;
    /* The library's own phases per call (cc_coll stats: time_compress,
     * time_communicate, time_decompress over calls), the slowest rank's;
     * -1 for mpi. */
    double compress_us, communicate_us, decompress_us;
    double auto_lossy, auto_predicted_us; /* method auto: share compressed, predicted time; -1 otherwise */
    long long wrong; /* -1: not checked */
    /* -N: the non-blocking form, OSU's quantities (microseconds, averaged
     * over the timed iterations on each rank, then over the ranks). */
    int has_nb;
    double nb_pure_us, nb_init_us, nb_compute_us, nb_test_us, nb_wait_us, nb_overall_us;
    double nb_overlap_pct, nb_compute_rate_pct;
    long long nb_wrong; /* -1: not checked */
} result_t;

typedef struct bench {
    const options_t *opt;
    int rank, ranks;
    size_t es;
    cc_coll_comm_h comm;
    MPI_Datatype mpi_type;
    MPI_Op mpi_op;
    unsigned char *input, *send, *recv, *ref; /* max size each */
    unsigned char *first;                     /* -N: the method's first timed blocking result */
    double *times;                            /* one per timed iteration */
    unsigned char expected[7][8];             /* exact result of element i: expected[i % 7] */
    int expected_exact;                       /* the partial sums are integers the dtype holds */
    int lowrank_rank;                         /* -R, else CC_COLL_LOWRANK_RANK: for the report */
    int thread_level;                         /* MPI's, from MPI_Query_thread */
    const char *progress;                     /* -N: "thread", "caller" or "unavailable" */
    char progress_setting[32];                /* -N: CC_COLL_PROGRESS as set */
} bench_t;

/* The exact allreduce result depends on i % 7 only: sum the integers, then
 * apply AVG as the baseline does. */
static void compute_expected(bench_t *b)
{
    unsigned char tmp[7 * 8];
    for (int j = 0; j < 7; ++j) {
        long sum = 0;
        for (int r = 0; r < b->ranks; ++r) sum += input_value(r, (size_t)j);
        store(tmp, (size_t)j, b->opt->dtype, (double)sum);
    }
    if (b->opt->op == CC_COLL_AVG) divide_by_ranks(tmp, 7, b->opt->dtype, b->ranks);
    for (int j = 0; j < 7; ++j) memcpy(b->expected[j], tmp + (size_t)j * b->es, b->es);
    /* |partial sums| <= 3P must be integers the type holds exactly. */
    const double exact_limit[] = {16777216.0, 9007199254740992.0, 2048.0, 256.0};
    b->expected_exact = b->opt->data == DATA_INT && 3.0 * b->ranks <= exact_limit[b->opt->dtype];
}

static long long count_wrong_vs_expected(const bench_t *b, const unsigned char *buf, size_t count)
{
    long long wrong = 0;
    for (size_t i = 0, j = 0; i < count; ++i, j = j == 6 ? 0 : j + 1)
        wrong += memcmp(buf + i * b->es, b->expected[j], b->es) != 0;
    return wrong;
}

static long long count_differing(const unsigned char *x, const unsigned char *y, size_t count, size_t es)
{
    long long wrong = 0;
    for (size_t i = 0; i < count; ++i) wrong += memcmp(x + i * es, y + i * es, es) != 0;
    return wrong;
}

static cc_coll_params_t method_params(const options_t *o, int method)
{
    cc_coll_params_t p;
    memset(&p, 0, sizeof p);
    p.mask = CC_COLL_PARAMS_FIELD_METHOD;
    p.method = (cc_coll_method_t)method;
    if (o->has_density) {
        p.mask |= CC_COLL_PARAMS_FIELD_DENSITY;
        p.density = o->density;
    }
    if (o->has_ef) {
        p.mask |= CC_COLL_PARAMS_FIELD_EF;
        p.ef = o->ef;
    }
    if (o->has_rank && method == CC_COLL_METHOD_LOWRANK) {
        p.mask |= CC_COLL_PARAMS_FIELD_RANK;
        p.rank = o->rank;
    }
    if (method == CC_COLL_METHOD_LOWRANK || method == CC_COLL_METHOD_AUTO) {
        /* A flat benchmark buffer has no tensor shape: the near-square view
         * (rows = cols = 0), so that lowrank compresses it. */
        p.mask |= CC_COLL_PARAMS_FIELD_SHAPE;
        p.rows = 0;
        p.cols = 0;
    }
    return p;
}

static cc_coll_status_t allreduce_once(bench_t *b, int method, const cc_coll_params_t *params, const void *sendbuf,
                                       void *recvbuf, size_t count)
{
    const options_t *o = b->opt;
    if (method != METHOD_MPI) return cc_coll_allreduce(sendbuf, recvbuf, count, o->dtype, o->op, params, b->comm, NULL);
    /* MPI_COMM_WORLD's default handler aborts on an MPI error. */
    MPI_Allreduce(sendbuf == recvbuf ? MPI_IN_PLACE : sendbuf, recvbuf, (int)count, b->mpi_type, b->mpi_op,
                  MPI_COMM_WORLD);
    if (o->op == CC_COLL_AVG) divide_by_ranks(recvbuf, count, o->dtype, b->ranks);
    return CC_COLL_OK;
}

/* Local part of the checks on the first timed result: acc[0] += squared
 * error, acc[1] += squared reference, acc[2] += wrong elements. The mpi
 * baseline's result becomes the reference of the other methods. */
static void check_first_result(bench_t *b, int method, size_t count, double acc[3])
{
    const cc_coll_dtype_t dt = b->opt->dtype;
    if (method == METHOD_MPI) {
        memcpy(b->ref, b->recv, count * b->es);
        if (b->opt->check && b->expected_exact) acc[2] = (double)count_wrong_vs_expected(b, b->recv, count);
        return; /* relerr 0 by definition */
    }
    for (size_t i = 0; i < count; ++i) {
        const double x = load(b->recv, i, dt), r = load(b->ref, i, dt);
        acc[0] += (x - r) * (x - r);
        acc[1] += r * r;
    }
    if (b->opt->check && method_is_exact(method)) acc[2] = (double)count_differing(b->recv, b->ref, count, b->es);
}

static void report_failure(const bench_t *b, const char *call, int method, size_t count, cc_coll_status_t st)
{
    fprintf(stderr, PROG ": [rank %d] %s (method %s, count %zu) failed: %s: %s\n", b->rank, call,
            method_label(method), count, cc_coll_status_string(st), cc_coll_last_error());
}

/* Warm-up, then `iters` timed calls of one method on `count` elements.
 * Collective. Returns 0, or 1 on every rank when a call failed on any. */
static int measure(bench_t *b, size_t count, int in_place, int method, double t_mpi_us, result_t *res)
{
    const options_t *o = b->opt;
    const size_t bytes = count * b->es;
    const void *sendbuf = in_place ? (const void *)b->recv : (const void *)b->send;
    const cc_coll_params_t params = method_params(o, method);
    const char *failed_call = NULL;
    cc_coll_status_t st = CC_COLL_OK;
    double acc[3] = {0.0, 0.0, 0.0};

    if (method != METHOD_MPI && (st = cc_coll_ef_reset_all(b->comm)) != CC_COLL_OK) failed_call = "cc_coll_ef_reset_all";
    for (int w = 0; w < o->warmup && !failed_call; ++w) {
        if (in_place) memcpy(b->recv, b->input, bytes);
        if ((st = allreduce_once(b, method, &params, sendbuf, b->recv, count)) != CC_COLL_OK)
            failed_call = "cc_coll_allreduce";
    }
    /* Fresh error feedback and counters for the timed loop. */
    if (method != METHOD_MPI && !failed_call) {
        if ((st = cc_coll_ef_reset_all(b->comm)) != CC_COLL_OK) failed_call = "cc_coll_ef_reset_all";
        else if ((st = cc_coll_comm_reset_stats(b->comm)) != CC_COLL_OK) failed_call = "cc_coll_comm_reset_stats";
    }

    MPI_Barrier(MPI_COMM_WORLD);
    for (int it = 0; it < o->iters && !failed_call; ++it) {
        if (in_place) memcpy(b->recv, b->input, bytes); /* fresh input, outside the timed region */
        const double t0 = MPI_Wtime();
        st = allreduce_once(b, method, &params, sendbuf, b->recv, count);
        b->times[it] = MPI_Wtime() - t0;
        if (st != CC_COLL_OK) {
            failed_call = "cc_coll_allreduce";
        } else if (it == 0) {
            check_first_result(b, method, count, acc);
            if (b->first) memcpy(b->first, b->recv, bytes); /* -N compares its first result with it */
            MPI_Barrier(MPI_COMM_WORLD); /* the check is not timed: line the ranks up again */
        }
    }
    if (failed_call) report_failure(b, failed_call, method, count, st);

    cc_coll_stats_t stats;
    memset(&stats, 0, sizeof stats);
    stats.mask = CC_COLL_STATS_FIELD_CALLS | CC_COLL_STATS_FIELD_BYTES_WIRE | CC_COLL_STATS_FIELD_TIME_COMPRESS |
                 CC_COLL_STATS_FIELD_TIME_COMMUNICATE | CC_COLL_STATS_FIELD_TIME_DECOMPRESS |
                 CC_COLL_STATS_FIELD_AUTO_CALLS | CC_COLL_STATS_FIELD_AUTO_LOSSY_CALLS |
                 CC_COLL_STATS_FIELD_AUTO_PREDICTED;
    if (!failed_call && method != METHOD_MPI && (st = cc_coll_comm_get_stats(b->comm, &stats)) != CC_COLL_OK)
        report_failure(b, failed_call = "cc_coll_comm_get_stats", method, count, st);

    int failed = failed_call != NULL, any_failed = 0;
    MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any_failed) return 1;

    MPI_Allreduce(MPI_IN_PLACE, b->times, o->iters, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, acc, 3, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    double phases[3] = {-1.0, -1.0, -1.0};
    if (method != METHOD_MPI && stats.calls > 0) {
        phases[0] = stats.time_compress / (double)stats.calls * 1e6;
        phases[1] = stats.time_communicate / (double)stats.calls * 1e6;
        phases[2] = stats.time_decompress / (double)stats.calls * 1e6;
    }
    MPI_Allreduce(MPI_IN_PLACE, phases, 3, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    double sum = 0.0;
    for (int it = 0; it < o->iters; ++it) sum += b->times[it];

    res->bytes = bytes;
    res->count = count;
    res->method = method;
    res->in_place = in_place;
    res->time_us = sum / o->iters * 1e6;
    res->algbw = res->time_us > 0 ? (double)bytes / (res->time_us * 1e-6) / 1e9 : 0.0;
    res->busbw = res->algbw * 2.0 * (b->ranks - 1) / b->ranks;
    res->wire = method == METHOD_MPI ? (double)bytes
                                     : (stats.calls ? (double)stats.bytes_wire / (double)stats.calls : 0.0);
    res->ratio = res->wire > 0 ? (double)bytes / res->wire : NAN;
    res->rel_err = acc[1] > 0 ? sqrt(acc[0] / acc[1]) : sqrt(acc[0]);
    res->wrong = (o->check && method_is_exact(method) && (method != METHOD_MPI || b->expected_exact))
                     ? (long long)acc[2]
                     : -1;
    res->speedup = method == METHOD_MPI ? 1.0 : t_mpi_us / res->time_us;
    res->compress_us = phases[0];
    /* auto: the share of calls the cost model compressed, and its mean
     * predicted time (rank 0's; every rank holds the same model). */
    res->auto_lossy = stats.auto_calls ? (double)stats.auto_lossy_calls / (double)stats.auto_calls : -1.0;
    res->auto_predicted_us = stats.auto_calls ? stats.auto_predicted / (double)stats.auto_calls * 1e6 : -1.0;
    res->communicate_us = phases[1];
    res->decompress_us = phases[2];
    return 0;
}

/* ------------------------------------------------------------------------ */
/* -N: overlap of the non-blocking form, OSU osu_iallreduce's method         */
/* ------------------------------------------------------------------------ */

/* OSU's dummy compute on the CPU: a DIM x DIM float kernel on the caller's
 * thread (x[i] += a[i][j] * a[j][i] + y[j]), repeated until the target
 * wall-clock time has elapsed. The arrays are global, so the work cannot be
 * optimised away. */
#define COMPUTE_DIM 25
static float compute_a[COMPUTE_DIM][COMPUTE_DIM], compute_x[COMPUTE_DIM], compute_y[COMPUTE_DIM];

static void compute_init(void)
{
    for (int i = 0; i < COMPUTE_DIM; ++i) {
        compute_x[i] = compute_y[i] = 1.0f;
        for (int j = 0; j < COMPUTE_DIM; ++j) compute_a[i][j] = 2.0f;
    }
}

static void compute_kernel(void)
{
    for (int i = 0; i < COMPUTE_DIM; ++i)
        for (int j = 0; j < COMPUTE_DIM; ++j)
            compute_x[i] = compute_x[i] + compute_a[i][j] * compute_a[j][i] + compute_y[j];
}

/* OSU's do_compute_cpu: runs the kernel until the times of its runs add up
 * to `seconds`. Adds the runs to *runs and returns their time. */
static double compute_for(double seconds, long long *runs)
{
    double elapsed = 0.0;
    while (elapsed < seconds) {
        const double t1 = MPI_Wtime();
        compute_kernel();
        elapsed += MPI_Wtime() - t1;
        ++*runs;
    }
    return elapsed;
}

/* One non-blocking allreduce: cc_coll_iallreduce, or MPI_Iallreduce for mpi. */
typedef struct nb_request {
    int method;
    MPI_Request mpi;
    cc_coll_request_h cc;
} nb_request_t;

static cc_coll_status_t nb_start(bench_t *b, int method, const cc_coll_params_t *params, const void *sendbuf,
                                 void *recvbuf, size_t count, nb_request_t *req)
{
    const options_t *o = b->opt;
    req->method = method;
    req->mpi = MPI_REQUEST_NULL;
    req->cc = NULL;
    if (method != METHOD_MPI)
        return cc_coll_iallreduce(sendbuf, recvbuf, count, o->dtype, o->op, params, b->comm, NULL, &req->cc);
    MPI_Iallreduce(sendbuf == recvbuf ? MPI_IN_PLACE : sendbuf, recvbuf, (int)count, b->mpi_type, b->mpi_op,
                   MPI_COMM_WORLD, &req->mpi);
    return CC_COLL_OK;
}

/* cc_coll_test / MPI_Test: the request's status once it failed, else OK. */
static cc_coll_status_t nb_test(nb_request_t *req)
{
    int done = 0;
    if (req->method != METHOD_MPI) return cc_coll_test(req->cc, &done);
    MPI_Test(&req->mpi, &done, MPI_STATUS_IGNORE);
    return CC_COLL_OK;
}

/* cc_coll_wait / MPI_Wait; mpi's AVG divides after the sum, as the blocking
 * form does inside its timed call. */
static cc_coll_status_t nb_wait(bench_t *b, nb_request_t *req, void *recvbuf, size_t count)
{
    if (req->method != METHOD_MPI) return cc_coll_wait(req->cc);
    MPI_Wait(&req->mpi, MPI_STATUS_IGNORE);
    if (b->opt->op == CC_COLL_AVG) divide_by_ranks(recvbuf, count, b->opt->dtype, b->ranks);
    return CC_COLL_OK;
}

/* MPI_Wait frees an MPI request; a cc_coll request is freed by hand. */
static void nb_free(nb_request_t *req)
{
    if (req->cc) cc_coll_request_free(req->cc);
    req->cc = NULL;
}

/* OSU's dummy_compute (do_compute_and_probe on the CPU): with tests > 0,
 * `tests` rounds of a compute of seconds / tests followed by one test call;
 * else one compute of `seconds`. Returns the time spent in the test calls;
 * adds the kernel's runs and their time to *runs and *kernel_time; *st
 * receives the first failed test's status. */
static double dummy_compute(double seconds, int tests, nb_request_t *req, long long *runs, double *kernel_time,
                            cc_coll_status_t *st)
{
    if (tests == 0) {
        *kernel_time += compute_for(seconds, runs);
        return 0.0;
    }
    double test_time = 0.0;
    for (int n = 0; n < tests; ++n) {
        *kernel_time += compute_for(seconds / tests, runs);
        const double t1 = MPI_Wtime();
        const cc_coll_status_t s = nb_test(req);
        test_time += MPI_Wtime() - t1;
        if (s != CC_COLL_OK && *st == CC_COLL_OK) *st = s;
    }
    return test_time;
}

/* Elements of the first timed non-blocking result that differ from the
 * reference: the method's first timed blocking result (both calls start
 * from a reset error feedback), or for mpi the exact sum. -1: not checked. */
static long long nb_check(const bench_t *b, int method, size_t count)
{
    if (!b->opt->check) return -1;
    if (method == METHOD_MPI)
        return b->expected_exact ? count_wrong_vs_expected(b, b->recv, count) : -1;
    return count_differing(b->recv, b->first, count, b->es);
}

/* The non-blocking form of `method` measured as osu_iallreduce does (see
 * --help), after measure() ran the blocking form on the same buffers.
 * Collective. Returns 0, or 1 on every rank when a call failed on any. */
static int measure_nb(bench_t *b, size_t count, int in_place, int method, result_t *res)
{
    const options_t *o = b->opt;
    const size_t bytes = count * b->es;
    const void *sendbuf = in_place ? (const void *)b->recv : (const void *)b->send;
    const cc_coll_params_t params = method_params(o, method);
    const int total = o->warmup + o->iters;
    const char *failed_call = NULL;
    cc_coll_status_t st = CC_COLL_OK;
    long long wrong = -1;
    nb_request_t req;

    /* 1. Pure communication time: iallreduce, then wait at once. Error
     * feedback is reset before the first timed iteration, whose result is
     * checked. */
    double pure = 0.0;
    if (method != METHOD_MPI && (st = cc_coll_ef_reset_all(b->comm)) != CC_COLL_OK) failed_call = "cc_coll_ef_reset_all";
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < total && !failed_call; ++i) {
        if (i == o->warmup && method != METHOD_MPI && (st = cc_coll_ef_reset_all(b->comm)) != CC_COLL_OK) {
            failed_call = "cc_coll_ef_reset_all";
            break;
        }
        if (in_place) memcpy(b->recv, b->input, bytes); /* fresh input, outside the timed region */
        const double t0 = MPI_Wtime();
        if ((st = nb_start(b, method, &params, sendbuf, b->recv, count, &req)) != CC_COLL_OK) {
            failed_call = "cc_coll_iallreduce";
            break;
        }
        st = nb_wait(b, &req, b->recv, count);
        const double t1 = MPI_Wtime();
        nb_free(&req);
        if (st != CC_COLL_OK) {
            failed_call = "cc_coll_wait";
            break;
        }
        if (i >= o->warmup) pure += t1 - t0;
        if (i == o->warmup) wrong = nb_check(b, method, count);
        MPI_Barrier(MPI_COMM_WORLD);
    }
    const double latency = pure / o->iters; /* this rank's pure time: the compute target, as in OSU */

    /* 2. The dummy compute alone (no request in flight, every rank computing),
     * for its work rate: at least 10 ms, for a steady rate. */
    long long alone_runs = 0;
    double alone_time = 0.0;
    if (!failed_call) {
        MPI_Barrier(MPI_COMM_WORLD);
        alone_time = compute_for(latency > 0.01 ? latency : 0.01, &alone_runs);
    }

    /* 3. iallreduce, the dummy compute for `latency`, wait. */
    double overall = 0.0, cpu = 0.0, test = 0.0, init = 0.0, wait = 0.0, kernel = 0.0;
    long long runs = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < total && !failed_call; ++i) {
        if (in_place) memcpy(b->recv, b->input, bytes);
        long long r = 0;
        double k = 0.0;
        cc_coll_status_t test_st = CC_COLL_OK;
        const double t_start = MPI_Wtime();
        double t_init = MPI_Wtime();
        st = nb_start(b, method, &params, sendbuf, b->recv, count, &req);
        t_init = MPI_Wtime() - t_init;
        if (st != CC_COLL_OK) {
            failed_call = "cc_coll_iallreduce";
            break;
        }
        double t_cpu = MPI_Wtime();
        const double t_test = dummy_compute(latency, o->test_calls, &req, &r, &k, &test_st);
        t_cpu = MPI_Wtime() - t_cpu;
        double t_wait = MPI_Wtime();
        st = nb_wait(b, &req, b->recv, count);
        t_wait = MPI_Wtime() - t_wait;
        const double t_stop = MPI_Wtime();
        nb_free(&req);
        if (st != CC_COLL_OK || test_st != CC_COLL_OK) {
            failed_call = st != CC_COLL_OK ? "cc_coll_wait" : "cc_coll_test";
            if (st == CC_COLL_OK) st = test_st;
            break;
        }
        if (i >= o->warmup) {
            overall += t_stop - t_start;
            cpu += t_cpu;
            test += t_test;
            init += t_init;
            wait += t_wait;
            kernel += k;
            runs += r;
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
    if (failed_call) report_failure(b, failed_call, method, count, st);

    int failed = failed_call != NULL, any_failed = 0;
    MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any_failed) return 1;

    /* Per rank, the averages over the timed iterations; then, as OSU does,
     * their mean over the ranks. */
    const double per = 1e6 / o->iters;
    const double alone_rate = alone_time > 0 ? (double)alone_runs / alone_time : 0.0;
    const double rate = kernel > 0 ? (double)runs / kernel : 0.0;
    double v[8] = {pure * per, overall * per, cpu * per, test * per, init * per, wait * per,
                   alone_rate > 0 ? 100.0 * rate / alone_rate : 0.0, wrong > 0 ? (double)wrong : 0.0};
    MPI_Allreduce(MPI_IN_PLACE, v, 8, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    for (int j = 0; j < 7; ++j) v[j] /= b->ranks;

    res->has_nb = 1;
    res->nb_pure_us = v[0];
    res->nb_overall_us = v[1];
    res->nb_test_us = v[3];
    res->nb_compute_us = v[2] - v[3]; /* OSU: the compute without the test calls */
    res->nb_init_us = v[4];
    res->nb_wait_us = v[5];
    res->nb_compute_rate_pct = v[6];
    /* OSU's overlap: max(0, 100 - 100 * (overall - compute) / pure). */
    res->nb_overlap_pct = v[0] > 0 ? 100.0 - 100.0 * (v[1] - res->nb_compute_us) / v[0] : NAN;
    if (res->nb_overlap_pct < 0) res->nb_overlap_pct = 0.0;
    res->nb_wrong = wrong < 0 ? -1 : (long long)v[7];
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Output                                                                    */
/* ------------------------------------------------------------------------ */

static void format_bytes(size_t bytes, char *out, size_t cap)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB"};
    double v = (double)bytes;
    int u = 0;
    for (; v >= 1024.0 && u < 3; ++u) v /= 1024.0;
    snprintf(out, cap, "%g %s", v, units[u]);
}

static int method_width(const options_t *o)
{
    int w = 6;
    for (int m = 0; m < o->n_methods; ++m) {
        int len = (int)strlen(cc_coll_method_name((cc_coll_method_t)m));
        if (o->want[m] && len > w) w = len;
    }
    return w;
}

/* -N: which progress mode the library uses, and what decided it. */
static void print_progress_line(FILE *f, const bench_t *b, const char *prefix)
{
    fprintf(f, "%snon-blocking: progress %s (CC_COLL_PROGRESS=%s, MPI thread level %s); %d test calls in the dummy "
           "compute\n",
           prefix, b->progress, b->progress_setting, thread_level_name(b->thread_level), b->opt->test_calls);
}

static void print_table_header(const bench_t *b, double density, int ef)
{
    const options_t *o = b->opt;
    char lo[32], hi[32];
    format_bytes(o->min_bytes, lo, sizeof lo);
    format_bytes(o->max_bytes, hi, sizeof hi);
    printf("# " PROG " (libcc_coll %s): allreduce, %d ranks, %s %s, %s .. %s x%zu, %d iterations, %d warm-up, "
           "check %d\n",
           cc_coll_version_string(), b->ranks, dtype_names[o->dtype], op_names[o->op], lo, hi, o->factor, o->iters,
           o->warmup, o->check);
    printf("# topk density %g%s, error feedback %d%s, lowrank rank %d%s, input data %s\n", density,
           o->has_density ? "" : " (CC_COLL_DENSITY)", ef, o->has_ef ? "" : " (CC_COLL_EF)", b->lowrank_rank,
           o->has_rank ? "" : " (CC_COLL_LOWRANK_RANK)", data_names[o->data]);
    if (o->nonblocking) {
        print_progress_line(stdout, b, "# ");
        printf("# time: blocking call, average over iterations of the slowest rank; the non-blocking columns: "
               "averages over iterations, then over ranks (OSU)\n#\n");
        printf("# %11s %11s %5s %*s %7s   %10s %7s %7s   %10s %9s %11s %9s %10s %11s %10s %8s %8s\n", "size(B)",
               "count", "dtype", method_width(o), "method", "inplace", "time(us)", "speedup", "#wrong", "pure(us)",
               "init(us)", "compute(us)", "test(us)", "wait(us)", "overall(us)", "overlap(%)", "crate(%)",
               "#nbwrong");
        fflush(stdout);
        return;
    }
    printf("# time: average over iterations of the slowest rank; algbw, busbw on the uncompressed size\n#\n");
    printf("# %11s %11s %5s %*s %7s   %10s %11s %11s   %12s %8s %10s %7s %7s\n", "size(B)", "count", "dtype",
           method_width(o), "method", "inplace", "time(us)", "algbw(GB/s)", "busbw(GB/s)", "wire(B)", "ratio",
           "relerr", "#wrong", "speedup");
    fflush(stdout);
}

static void print_table_row(const bench_t *b, const result_t *r)
{
    char wrong[24] = "-";
    if (r->wrong >= 0) snprintf(wrong, sizeof wrong, "%lld", r->wrong);
    if (r->has_nb) {
        char nb_wrong[24] = "-";
        if (r->nb_wrong >= 0) snprintf(nb_wrong, sizeof nb_wrong, "%lld", r->nb_wrong);
        printf("  %11zu %11zu %5s %*s %7s   %10.2f %7.2f %7s   %10.2f %9.2f %11.2f %9.2f %10.2f %11.2f %10.2f %8.1f "
               "%8s\n",
               r->bytes, r->count, dtype_names[b->opt->dtype], method_width(b->opt), method_label(r->method),
               r->in_place ? "yes" : "no", r->time_us, r->speedup, wrong, r->nb_pure_us, r->nb_init_us,
               r->nb_compute_us, r->nb_test_us, r->nb_wait_us, r->nb_overall_us, r->nb_overlap_pct,
               r->nb_compute_rate_pct, nb_wrong);
        fflush(stdout);
        return;
    }
    printf("  %11zu %11zu %5s %*s %7s   %10.2f %11.3f %11.3f   %12.0f %8.2f %10.2e %7s %7.2f\n", r->bytes, r->count,
           dtype_names[b->opt->dtype], method_width(b->opt), method_label(r->method), r->in_place ? "yes" : "no",
           r->time_us, r->algbw, r->busbw, r->wire, r->ratio, r->rel_err, wrong, r->speedup);
    fflush(stdout);
}

static void print_table_footer(const bench_t *b, const result_t *res, size_t n_res, long long total_wrong)
{
    printf("#\n# Wrong elements (mpi, none%s): %lld %s\n", b->opt->nonblocking ? "; non-blocking: every method" : "",
           total_wrong, total_wrong ? "FAILED" : "OK");
    printf("# Avg bus bandwidth (GB/s) :");
    for (int m = METHOD_MPI; m < b->opt->n_methods; ++m) {
        double sum = 0.0;
        size_t n = 0;
        for (size_t i = 0; i < n_res; ++i)
            if (res[i].method == m) {
                sum += res[i].busbw;
                ++n;
            }
        if (n) printf(" %s %.3f", method_label(m), sum / (double)n);
    }
    printf("\n");
    if (!b->opt->nonblocking) return;
    printf("# Avg overlap (%%)          :");
    for (int m = METHOD_MPI; m < b->opt->n_methods; ++m) {
        double sum = 0.0;
        size_t n = 0;
        for (size_t i = 0; i < n_res; ++i)
            if (res[i].method == m && res[i].has_nb) {
                sum += res[i].nb_overlap_pct;
                ++n;
            }
        if (n) printf(" %s %.1f", method_label(m), sum / (double)n);
    }
    printf("\n");
}

static void print_osu(const bench_t *b, const result_t *res, size_t n_res)
{
    const options_t *o = b->opt;
    printf("# OSU MPI Allreduce Latency Test (" PROG ", libcc_coll %s)\n", cc_coll_version_string());
    printf("# Datatype: %s, op: %s, ranks: %d, iterations: %d, warm-up: %d\n", dtype_names[o->dtype],
           op_names[o->op], b->ranks, o->iters, o->warmup);
    printf("# Avg Latency: average over iterations of the slowest rank's time per call\n");
    for (int mode = 0; mode < 2; ++mode) {
        for (int m = METHOD_MPI; m < o->n_methods; ++m) {
            int header = 0;
            for (size_t i = 0; i < n_res; ++i) {
                if (res[i].method != m || res[i].in_place != (mode == 0)) continue;
                if (!header) {
                    printf("#\n# method: %s\n# in-place: %s\n", method_label(m), mode == 0 ? "yes" : "no");
                    printf("# Size       Avg Latency(us)\n");
                    header = 1;
                }
                printf("%-10zu%18.2f\n", res[i].bytes, res[i].time_us);
            }
        }
    }
    if (!o->nonblocking) return;
    /* osu_iallreduce's full output (-f): the columns of print_stats_nbc. */
    printf("#\n# OSU MPI Non-blocking Allreduce Latency Test (" PROG ", libcc_coll %s)\n", cc_coll_version_string());
    print_progress_line(stdout, b, "# ");
    printf("# Times: averages over iterations, then over ranks; Compute excludes MPI_Test\n");
    printf("# Overall = Coll. Init + Compute + MPI_Test + MPI_Wait\n");
    for (int mode = 0; mode < 2; ++mode) {
        for (int m = METHOD_MPI; m < o->n_methods; ++m) {
            int header = 0;
            for (size_t i = 0; i < n_res; ++i) {
                const result_t *r = &res[i];
                if (r->method != m || r->in_place != (mode == 0) || !r->has_nb) continue;
                if (!header) {
                    printf("#\n# method: %s (%s)\n# in-place: %s\n", method_label(m),
                           m == METHOD_MPI ? "MPI_Iallreduce, MPI_Test, MPI_Wait"
                                           : "cc_coll_iallreduce, cc_coll_test, cc_coll_wait",
                           mode == 0 ? "yes" : "no");
                    printf("%-10s%18s%18s%18s%18s%18s%18s%18s\n", "# Size", "Overall(us)", "Compute(us)",
                           "Coll. Init(us)", "MPI_Test(us)", "MPI_Wait(us)", "Pure Comm.(us)", "Overlap(%)");
                    header = 1;
                }
                printf("%-10zu%18.2f%18.2f%18.2f%18.2f%18.2f%18.2f%18.2f\n", r->bytes, r->nb_overall_us,
                       r->nb_compute_us, r->nb_init_us, r->nb_test_us, r->nb_wait_us, r->nb_pure_us, r->nb_overlap_pct);
            }
        }
    }
}

static void json_number(double v)
{
    if (isfinite(v)) printf("%.6g", v);
    else printf("null");
}

static void print_json(const bench_t *b, const result_t *res, size_t n_res, double density, int ef)
{
    const options_t *o = b->opt;
    printf("{\"tool\":\"" PROG "\",\"version\":\"%s\",\"ranks\":%d,\"dtype\":\"%s\",\"op\":\"%s\","
           "\"data\":\"%s\",\"iters\":%d,\"warmup\":%d,\"density\":",
           cc_coll_version_string(), b->ranks, dtype_names[o->dtype], op_names[o->op], data_names[o->data], o->iters,
           o->warmup);
    json_number(density);
    printf(",\"ef\":%d,\"lowrank_rank\":%d", ef, b->lowrank_rank);
    if (o->nonblocking)
        printf(",\"nonblocking\":{\"method\":\"osu_iallreduce\",\"progress\":\"%s\",\"progress_setting\":\"%s\","
               "\"thread_level\":\"%s\",\"test_calls\":%d}",
               b->progress, b->progress_setting, thread_level_name(b->thread_level), o->test_calls);
    printf(",\"results\":[");
    for (size_t i = 0; i < n_res; ++i) {
        const result_t *r = &res[i];
        printf("%s\n  {\"bytes\":%zu,\"count\":%zu,\"method\":\"%s\",\"in_place\":%s,\"time_us\":", i ? "," : "",
               r->bytes, r->count, method_label(r->method), r->in_place ? "true" : "false");
        json_number(r->time_us);
        printf(",\"algbw_GBps\":");
        json_number(r->algbw);
        printf(",\"busbw_GBps\":");
        json_number(r->busbw);
        printf(",\"wire_bytes\":");
        json_number(r->wire);
        printf(",\"ratio\":");
        json_number(r->ratio);
        printf(",\"rel_err\":");
        json_number(r->rel_err);
        if (r->wrong >= 0) printf(",\"wrong\":%lld", r->wrong);
        else printf(",\"wrong\":null");
        printf(",\"speedup\":");
        json_number(r->speedup);
        if (r->method != METHOD_MPI) {
            printf(",\"compress_us\":");
            json_number(r->compress_us);
            printf(",\"communicate_us\":");
            json_number(r->communicate_us);
            printf(",\"decompress_us\":");
            json_number(r->decompress_us);
        }
        if (r->method == CC_COLL_METHOD_AUTO && r->auto_lossy >= 0) {
            printf(",\"auto_lossy_share\":");
            json_number(r->auto_lossy);
            printf(",\"auto_predicted_us\":");
            json_number(r->auto_predicted_us);
        }
        if (r->has_nb) {
            const double v[] = {r->nb_pure_us,    r->nb_init_us,    r->nb_compute_us,  r->nb_test_us,
                                r->nb_wait_us,    r->nb_overall_us, r->nb_overlap_pct, r->nb_compute_rate_pct};
            static const char *const k[] = {"pure_us", "init_us",  "compute_us",  "test_us",
                                             "wait_us", "overall_us", "overlap_pct", "compute_rate_pct"};
            printf(",\"nonblocking\":{");
            for (size_t j = 0; j < sizeof v / sizeof v[0]; ++j) {
                printf("%s\"%s\":", j ? "," : "", k[j]);
                json_number(v[j]);
            }
            if (r->nb_wrong >= 0) printf(",\"wrong\":%lld}", r->nb_wrong);
            else printf(",\"wrong\":null}");
        }
        printf("}");
    }
    printf("\n]}\n");
}

/* ------------------------------------------------------------------------ */
/* Main                                                                      */
/* ------------------------------------------------------------------------ */

/* Element counts from -b to -e, times -f; sizes that round to the same
 * count are measured once. Returns the number of counts. */
static size_t make_counts(const options_t *o, size_t es, size_t **out)
{
    size_t n = 0, cap = 64;
    size_t *counts = malloc(cap * sizeof *counts);
    for (size_t bytes = o->min_bytes; counts;) {
        size_t count = bytes / es ? bytes / es : 1;
        if (n == 0 || counts[n - 1] != count) counts[n++] = count;
        if (bytes > o->max_bytes / o->factor) break;
        bytes *= o->factor;
        if (n == cap) {
            size_t *grown = realloc(counts, 2 * cap * sizeof *counts);
            if (!grown) free(counts);
            counts = grown;
            cap *= 2;
        }
    }
    *out = counts;
    return counts ? n : 0;
}

int main(int argc, char **argv)
{
    /* The command line first (it needs no MPI): -N asks for
     * MPI_THREAD_MULTIPLE, which the progress thread needs; the blocking
     * benchmark keeps MPI_Init. */
    options_t opt;
    char msg[512] = "";
    const int parsed = parse_options(argc, argv, &opt, msg, sizeof msg);
    int provided = MPI_THREAD_SINGLE;
    if (parsed == 0 && opt.nonblocking) MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    else MPI_Init(&argc, &argv);
    bench_t b;
    memset(&b, 0, sizeof b);
    MPI_Comm_rank(MPI_COMM_WORLD, &b.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &b.ranks);
    MPI_Query_thread(&b.thread_level);

    if (parsed != 0) {
        if (b.rank == 0) {
            if (parsed == 1) print_help();
            else fprintf(stderr, PROG ": %s (try --help)\n", msg);
        }
        MPI_Finalize();
        return parsed == 1 ? 0 : EXIT_USAGE;
    }
    b.opt = &opt;
    b.es = cc_coll_dtype_size(opt.dtype);
    const int progress = b.rank == 0 && !opt.quiet && !opt.json;

    /* Setup: every rank must agree that it worked before anyone goes on. */
    int rc = 0, ok = 1, all_ok = 0;
    cc_coll_status_t st = cc_coll_comm_create(MPI_COMM_WORLD, &b.comm);
    if (st != CC_COLL_OK) {
        fprintf(stderr, PROG ": [rank %d] cc_coll_comm_create failed: %s: %s\n", b.rank, cc_coll_status_string(st),
                cc_coll_last_error());
        b.comm = NULL;
        ok = 0;
    }
    size_t *counts = NULL;
    const size_t n_counts = make_counts(&opt, b.es, &counts);
    const size_t max_bytes = n_counts ? counts[n_counts - 1] * b.es : 0;
    b.input = malloc(max_bytes);
    b.send = malloc(max_bytes);
    b.recv = malloc(max_bytes);
    b.ref = malloc(max_bytes);
    if (opt.nonblocking) b.first = malloc(max_bytes);
    b.times = malloc((size_t)opt.iters * sizeof *b.times);
    const int n_modes = opt.inplace_mode == MODE_BOTH ? 2 : 1;
    int n_wanted = 1;
    for (int m = 0; m < opt.n_methods; ++m) n_wanted += opt.want[m];
    const size_t max_results = n_counts * (size_t)n_modes * (size_t)n_wanted;
    result_t *results = calloc(max_results ? max_results : 1, sizeof *results);
    if (!counts || !b.input || !b.send || !b.recv || !b.ref || (opt.nonblocking && !b.first) || !b.times ||
        !results) {
        fprintf(stderr, PROG ": [rank %d] out of memory for %d buffers of %zu bytes\n", b.rank,
                opt.nonblocking ? 5 : 4, max_bytes);
        ok = 0;
    }
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all_ok) {
        rc = 1;
        goto done;
    }

    b.mpi_type = MPI_FLOAT;
    b.mpi_op = MPI_SUM;
    if (opt.dtype == CC_COLL_F64) b.mpi_type = MPI_DOUBLE;
    if (opt.dtype == CC_COLL_F16 || opt.dtype == CC_COLL_BF16) {
        b.mpi_type = MPI_UINT16_T;
        MPI_Op_create(opt.dtype == CC_COLL_F16 ? sum_f16 : sum_bf16, 1, &b.mpi_op);
    }
    compute_expected(&b);

    double density = 0.0;
    int ef = 0;
    effective_density_ef(&opt, &density, &ef);
    b.lowrank_rank = effective_lowrank_rank(&opt);
    if (opt.nonblocking) {
        b.progress = effective_progress(b.progress_setting, sizeof b.progress_setting);
        compute_init();
        if (b.rank == 0 && opt.json && !opt.quiet) print_progress_line(stderr, &b, PROG ": ");
    }
    if (b.rank == 0 && !opt.json && !opt.osu) {
        print_table_header(&b, density, ef);
        if (opt.check && opt.data == DATA_NORMAL)
            printf("# note: -r normal: #wrong of mpi is not checked (no exact reference)\n");
        else if (opt.check && !b.expected_exact)
            printf("# note: sums of %d ranks are not exact in %s; #wrong of mpi is not checked\n", b.ranks,
                   dtype_names[opt.dtype]);
    }

    size_t n_res = 0;
    long long total_wrong = 0;
    int sendbuf_modified = 0;
    for (size_t s = 0; s < n_counts && rc == 0; ++s) {
        const size_t count = counts[s], bytes = count * b.es;
        if (progress) {
            char human[32];
            format_bytes(bytes, human, sizeof human);
            fprintf(stderr, "[%zu/%zu] %s (%zu x %s) ...\n", s + 1, n_counts, human, count, dtype_names[opt.dtype]);
        }
        for (size_t i = 0; i < count; ++i)
            store(b.input, i, opt.dtype,
                  opt.data == DATA_INT ? (double)input_value(b.rank, i) : normal_value(b.rank, i));
        memcpy(b.send, b.input, bytes);

        for (int mode = 0; mode < 2 && rc == 0; ++mode) {
            const int in_place = mode == 0;
            if ((opt.inplace_mode == MODE_IN_PLACE && !in_place) || (opt.inplace_mode == MODE_OUT_OF_PLACE && in_place))
                continue;
            double t_mpi_us = 0.0;
            for (int m = METHOD_MPI; m < opt.n_methods && rc == 0; ++m) {
                if (m != METHOD_MPI && !opt.want[m]) continue;
                result_t *r = &results[n_res];
                if (measure(&b, count, in_place, m, t_mpi_us, r) != 0 ||
                    (opt.nonblocking && measure_nb(&b, count, in_place, m, r) != 0)) {
                    rc = 1;
                    break;
                }
                ++n_res;
                if (m == METHOD_MPI) t_mpi_us = r->time_us;
                if (r->wrong > 0) total_wrong += r->wrong;
                if (r->has_nb && r->nb_wrong > 0) total_wrong += r->nb_wrong;
                if (b.rank == 0 && !opt.json && !opt.osu) print_table_row(&b, r);

                /* An out-of-place call must leave sendbuf alone. */
                if (!in_place && opt.check) {
                    int changed = memcmp(b.send, b.input, bytes) != 0, any_changed = 0;
                    MPI_Allreduce(&changed, &any_changed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
                    if (any_changed) {
                        if (b.rank == 0)
                            fprintf(stderr, PROG ": method %s modified sendbuf (out of place, %zu bytes)\n",
                                    method_label(m), bytes);
                        memcpy(b.send, b.input, bytes);
                        sendbuf_modified = 1;
                    }
                }
            }
        }
    }

    if (b.rank == 0) {
        if (opt.json) print_json(&b, results, n_res, density, ef);
        else if (opt.osu) print_osu(&b, results, n_res);
        else print_table_footer(&b, results, n_res, total_wrong);
        fflush(stdout);
    }
    if (rc == 0 && (total_wrong > 0 || sendbuf_modified)) rc = 1;
    if (b.mpi_op != MPI_SUM && b.mpi_op != MPI_OP_NULL) MPI_Op_free(&b.mpi_op);

done:
    if (b.comm) cc_coll_comm_destroy(b.comm);
    free(counts);
    free(b.input);
    free(b.send);
    free(b.recv);
    free(b.ref);
    free(b.first);
    free(b.times);
    free(results);
    MPI_Finalize();
    return rc;
}
