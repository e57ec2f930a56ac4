/* cc_coll_perf's command line: parsing and --help. */
#include "options.h"

#include <ctype.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "methods.h"

const char *const data_names[] = {"int", "normal"};
const char *const dtype_names[] = {"f32", "f64", "f16", "bf16"};
const char *const op_names[] = {"sum", "avg"};

void print_help(void)
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
        "  -I        interleaved: the warm-up calls, then the timed calls, in\n"
        "            turns (one call of each method, then the next\n"
        "            round, the rounds' orders the rows of a balanced Latin\n"
        "            square: each method runs first and, within the rounds,\n"
        "            follows each other one equally often (the last of a\n"
        "            round and the first of the next are always the same\n"
        "            pairs); so a method that learns, auto, learns\n"
        "            under the conditions its timed calls meet),\n"
        "            each after an MPI_Barrier, every library method on\n"
        "            a communicator of its own (its own residuals, statistics\n"
        "            and, for auto, model): the methods meet the same moments\n"
        "            of a shared, noisy machine. Not with -N\n"
        "  -B CALLS  with -I: a turn is CALLS calls of a method in a row\n"
        "            (the turns rotate as the rounds do): large calls that\n"
        "            alternate slow one another, a block of them does not [1]\n"
        "  -r DATA   input data: int or normal (see below)                  [int]\n"
        "Reduction\n"
        "  -d TYPE   element type: f32, f64, f16, bf16                       [f32]\n"
        "  -o OP     sum or avg                                              [sum]\n"
        "Methods\n"
        "  -m LIST   comma-separated methods among: mpi");
    cc_coll_method_t methods[MAX_METHODS];
    const int n_methods = list_library_methods(methods, MAX_METHODS);
    for (int i = 0; i < n_methods; ++i) printf(", %s", cc_coll_method_name(methods[i]));
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
        "  -J        one JSON document on stdout instead of the table; each row\n"
        "            also gives the timed calls' median, 90th percentile and\n"
        "            slowest (time_median_us, time_p90_us, time_max_us)\n"
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
        "               MPI_Barrier before the timed loop; -I: before each call)\n"
        "  algbw(GB/s)  size / time (GB = 1e9 bytes), on the uncompressed size\n"
        "  busbw(GB/s)  algbw * 2(P-1)/P, P = ranks (the nccl-tests definition)\n"
        "  wire(B)      bytes one rank hands to MPI per call (cc_coll stats\n"
        "               bytes_wire / calls; for mpi, the size)\n"
        "  ratio        size / wire\n"
        "  relerr       ||result - MPI_Allreduce result||_2 / ||MPI_Allreduce result||_2\n"
        "               over all ranks, for the check call: one untimed call after\n"
        "               the warm-up, from reset error feedback (the one-step\n"
        "               error); the timed calls go on from its residual, so none\n"
        "               of them creates one\n"
        "  #wrong       with -c 1, elements of that result differing bit for\n"
        "               bit from the exact sum (mpi) or from the MPI_Allreduce\n"
        "               result (none), summed over ranks; '-' for lossy methods\n"
        "  speedup      time(mpi) / time(method), same size, mode and buffers\n"
        "The JSON also holds, for the library's methods, compress_us,\n"
        "communicate_us and decompress_us: the library's own phases per call\n"
        "(its statistics over the timed calls), the slowest rank's; for auto,\n"
        "auto_lossy_share (the share of its calls that ran a candidate),\n"
        "auto_explored_share (the share that ran the runner-up to check the\n"
        "model), auto_predicted_us (the model's mean predicted time of its\n"
        "choices) and auto_measured_us (their mean measured time, rank 0's)\n"
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
        "  #nbwrong     with -c 1, elements of the non-blocking check call's result\n"
        "               (an untimed iallreduce after the warm-up, from reset error\n"
        "               feedback) differing bit for bit from the blocking check\n"
        "               call's result (mpi: from the exact sum,\n"
        "               '-' when it is not exact; auto: '-' when one of the two\n"
        "               calls ran the lossy method and the other NONE, as\n"
        "               CC_COLL_AUTO_CHECK=on may choose)\n"
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

/* "mpi, <the library's methods>" into known. */
static void known_methods(const options_t *o, char *known, size_t cap)
{
    snprintf(known, cap, "mpi");
    for (int i = 0; i < o->n_methods; ++i) {
        strncat(known, ", ", cap - strlen(known) - 1);
        strncat(known, cc_coll_method_name(o->methods[i]), cap - strlen(known) - 1);
    }
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
        cc_coll_method_t method;
        if (strcmp(name, "all") == 0) {
            for (int i = 0; i < o->n_methods; ++i) o->want[i] = 1;
            found = 1;
        } else if (!found && cc_coll_method_from_name(name, &method) == CC_COLL_OK) {
            for (int i = 0; i < o->n_methods && !found; ++i)
                if (o->methods[i] == method) found = o->want[i] = 1;
        }
        if (!found) {
            char known[256];
            known_methods(o, known, sizeof known);
            return usage_error(msg, cap, "-m: unknown method '%s' (known: %s, all)", name, known);
        }
        if (!comma) return 0;
        p = comma + 1;
    }
}

int parse_options(int argc, char **argv, options_t *o, char *msg, size_t cap)
{
    memset(o, 0, sizeof *o);
    o->min_bytes = 4;
    o->max_bytes = (size_t)64 << 20;
    o->factor = 2;
    o->iters = 20;
    o->warmup = 5;
    o->block = 1;
    o->check = 1;
    o->dtype = CC_COLL_F32;
    o->op = CC_COLL_SUM;
    o->inplace_mode = MODE_BOTH;
    o->n_methods = list_library_methods(o->methods, MAX_METHODS);
    for (int i = 0; i < o->n_methods; ++i) o->want[i] = 1;

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
        if (arg[0] != '-' || arg[1] == '\0' || arg[1] == '-' || !strchr("befnwcdomDEirJOqNtRIB", arg[1]))
            return usage_error(msg, cap, "unknown option '%s'", arg);
        const char flag = arg[1];
        if (strchr("JOqNI", flag)) {
            if (arg[2] != '\0') return usage_error(msg, cap, "-%c takes no value (got '%s')", flag, arg);
            if (flag == 'J') o->json = 1;
            if (flag == 'O') o->osu = 1;
            if (flag == 'q') o->quiet = 1;
            if (flag == 'N') o->nonblocking = 1;
            if (flag == 'I') o->interleave = 1;
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
        case 'B':
            if (parse_int(val, 1, 1000000, &v) != 0)
                return usage_error(msg, cap, "-B: calls per turn must be an integer in 1..1000000 (got '%s')", val);
            o->block = (int)v;
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
    if (o->interleave && o->nonblocking) return usage_error(msg, cap, "-I and -N exclude each other");
    if (o->block > 1 && !o->interleave) return usage_error(msg, cap, "-B applies to -I only");
    return 0;
}
