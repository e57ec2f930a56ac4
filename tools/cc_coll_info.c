/* cc_coll_info: prints libcc_coll's version, build options, methods and every
 * setting with its documentation and current value (like ucc_info -caf).
 *
 *   cc_coll_info            everything
 *   cc_coll_info -v         version only
 *   cc_coll_info -s         settings only
 *   cc_coll_info --markdown the settings as a Markdown table (variable, default,
 *                           description): the table of docs/api.md, rewritten by
 *                           scripts/docs/settings_table.cmake
 *   mpirun ... cc_coll_info --auto
 *                           CC_COLL_METHOD=auto's cost model on MPI_COMM_WORLD
 *                           (measured by every rank, docs/algorithms.md section
 *                           8): per size from 4 KiB to 256 MiB of f32, what
 *                           AUTO would run and both predicted times
 *
 * --markdown prints the built-in defaults, not the values in effect, so its
 * output does not depend on the environment; it runs without MPI (no
 * MPI_Init), like cc_coll_setting_get itself.
 */
#include <stdio.h>
#include <string.h>

#include <mpi.h>

#include "cc_coll.h"

static void print_wrapped(const char *text, const char *indent, int width)
{
    int col = 0;
    const char *p = text;
    printf("%s", indent);
    while (*p) {
        const char *word_end = p;
        while (*word_end && *word_end != ' ') ++word_end;
        int len = (int)(word_end - p);
        if (col > 0 && col + 1 + len > width) {
            printf("\n%s", indent);
            col = 0;
        } else if (col > 0) {
            putchar(' ');
            ++col;
        }
        printf("%.*s", len, p);
        col += len;
        p = word_end;
        while (*p == ' ') ++p;
    }
    putchar('\n');
}

static int print_settings(void)
{
    int bad = 0;
    size_t n = cc_coll_setting_count();
    printf("# Settings (environment variable, default, value in effect)\n");
    for (size_t i = 0; i < n; ++i) {
        cc_coll_setting_t s;
        cc_coll_status_t st = cc_coll_setting_get(i, &s);
        printf("#\n");
        print_wrapped(s.doc, "# ", 76);
        printf("%s=%s", s.env_var, s.value);
        if (st != CC_COLL_OK) {
            printf("    (default; environment value rejected: %s)", cc_coll_last_error());
            bad = 1;
        } else if (s.from_env) {
            printf("    (from environment; default %s)", s.default_value);
        }
        printf("\n");
    }
    return bad;
}

static int is_word_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* Text in a cell of a GitHub-flavoured Markdown table: `|` would end the cell
 * (even inside a code span) and \ * ` < could start markup, so each is
 * escaped with a backslash, and so is `_` where it could open or close
 * emphasis (not inside a word such as MPI_Allreduce, where it cannot); a line
 * break would end the row, so it becomes a space. */
static void print_md_text(const char *text)
{
    if (text == NULL) return;
    for (const char *p = text; *p; ++p) {
        if (*p == '\n' || *p == '\r') {
            putchar(' ');
            continue;
        }
        if (strchr("\\|*`<", *p) != NULL ||
            (*p == '_' && !(p > text && is_word_char(p[-1]) && is_word_char(p[1]))))
            putchar('\\');
        putchar(*p);
    }
}

/* A value as a code span; `|` is still escaped (GitHub splits the row on it
 * before reading code spans, and drops the backslash). */
static void print_md_code(const char *text)
{
    if (text == NULL) text = "";
    if (text[0] == '\0' || strchr(text, '`') != NULL || strchr(text, '\n') != NULL) {
        print_md_text(text[0] == '\0' ? "(empty)" : text);
        return;
    }
    putchar('`');
    for (const char *p = text; *p; ++p) {
        if (*p == '|') putchar('\\');
        putchar(*p);
    }
    putchar('`');
}

/* The settings table in Markdown: one row per setting, in the library's
 * order, with the built-in default (an invalid environment value changes
 * nothing here). */
static void print_settings_markdown(void)
{
    size_t n = cc_coll_setting_count();
    printf("| environment variable | default | description |\n");
    printf("| --- | --- | --- |\n");
    for (size_t i = 0; i < n; ++i) {
        cc_coll_setting_t s;
        (void)cc_coll_setting_get(i, &s); /* fills the entry even when it fails */
        printf("| ");
        print_md_code(s.env_var);
        printf(" | ");
        print_md_code(s.default_value);
        printf(" | ");
        print_md_text(s.doc);
        printf(" |\n");
    }
}

static void print_version(void)
{
    int major, minor, patch;
    cc_coll_get_version(&major, &minor, &patch);
    printf("# libcc_coll version %s (header %d.%d.%d)%s\n", cc_coll_version_string(), CC_COLL_VERSION_MAJOR,
           CC_COLL_VERSION_MINOR, CC_COLL_VERSION_PATCH,
           cc_coll_check_version() == CC_COLL_OK ? "" : "  ** header/library mismatch **");
}

static void print_build(void)
{
    unsigned flags = cc_coll_build_flags();
    char mpi_version[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(mpi_version, &len);
    char *nl = strchr(mpi_version, '\n');
    if (nl) *nl = '\0';
    printf("# Build options\n");
    printf("#   CUDA support        : %s\n", (flags & CC_COLL_BUILD_CUDA) ? "on" : "off");
    printf("#   Fortran             : %s\n", (flags & CC_COLL_BUILD_FORTRAN) ? "on" : "off");
    /* The library's methods, as it lists and names them (ids may have gaps). */
    printf("#   Methods             :");
    for (int i = 0, listed = 0; i < cc_coll_method_count(); ++i) {
        cc_coll_method_t m;
        if (cc_coll_method_at(i, &m) != CC_COLL_OK || cc_coll_method_name(m) == NULL) continue;
        printf("%s %s", listed++ > 0 ? "," : "", cc_coll_method_name(m));
    }
    printf("\n");
    printf("#   MPI library         : %s\n", mpi_version);
    printf("#   MPI is CUDA-aware   : %s\n", cc_coll_mpi_cuda_aware() ? "yes" : "no");
    printf("#   CUDA devices        : %d\n", cc_coll_cuda_device_count());
}

/* What CC_COLL_METHOD=auto would run on MPI_COMM_WORLD, size by size, with
 * the communicator's own settings (CC_COLL_AUTO_METHOD, CC_COLL_LINK,
 * CC_COLL_DENSITY, ...); rank 0 prints. LOWRANK views each size near-square. */
static int print_auto(void)
{
    cc_coll_comm_h comm = NULL;
    cc_coll_status_t st = cc_coll_comm_create(MPI_COMM_WORLD, &comm);
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (st != CC_COLL_OK) {
        fprintf(stderr, "cc_coll_info: cc_coll_comm_create: %s (%s)\n", cc_coll_status_string(st),
                cc_coll_last_error());
        return 1;
    }
    cc_coll_params_t p;
    memset(&p, 0, sizeof p);
    p.mask = CC_COLL_PARAMS_FIELD_SHAPE; /* rows = cols = 0: near-square, for LOWRANK */
    int rc = 0;
    for (size_t bytes = 4096; bytes <= ((size_t)256 << 20) && rc == 0; bytes *= 4) {
        cc_coll_method_t chosen = CC_COLL_METHOD_NONE;
        double t_none = 0, t_lossy = 0;
        st = cc_coll_auto_predict(comm, bytes / 4, CC_COLL_F32, &p, &chosen, &t_none, &t_lossy);
        if (st != CC_COLL_OK) {
            fprintf(stderr, "cc_coll_info: cc_coll_auto_predict: %s (%s)\n", cc_coll_status_string(st),
                    cc_coll_last_error());
            rc = 1;
            break;
        }
        if (rank != 0) continue;
        if (bytes == 4096)
            printf("CC_COLL_METHOD=auto on MPI_COMM_WORLD (%d ranks): predicted seconds per allreduce of f32\n"
                   "(the model as measured: a new communicator's calls have not corrected it yet)\n"
                   "%14s  %-8s  %14s  %14s\n",
                   size, "bytes", "auto runs", "none", "best candidate");
        printf("%14zu  %-8s  %14.6g  %14.6g\n", bytes, cc_coll_method_name(chosen), t_none, t_lossy);
    }
    cc_coll_comm_destroy(comm);
    return rc;
}

int main(int argc, char **argv)
{
    int want_version = 0, want_settings = 0, want_markdown = 0, want_auto = 0;
    for (int i = 1; i < argc; ++i) {
        if (strcmp(argv[i], "-v") == 0) want_version = 1;
        else if (strcmp(argv[i], "-s") == 0) want_settings = 1;
        else if (strcmp(argv[i], "--markdown") == 0) want_markdown = 1;
        else if (strcmp(argv[i], "--auto") == 0) want_auto = 1;
        else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            printf("usage: %s [-v] [-s] | --markdown | --auto\n  -v          version only\n  -s          settings only\n"
                   "  --markdown  the settings as a Markdown table (variable, built-in default,\n"
                   "              description), without MPI\n"
                   "  --auto      under mpirun: what CC_COLL_METHOD=auto would run on\n"
                   "              MPI_COMM_WORLD for 4 KiB .. 256 MiB of f32, with both\n"
                   "              predicted times (its cost model, measured by every rank)\n"
                   "With no option: version, build options (methods included) and settings.\n",
                   argv[0]);
            return 0;
        } else {
            fprintf(stderr, "%s: unknown option '%s' (try --help)\n", argv[0], argv[i]);
            return 2;
        }
    }
    if (want_markdown) {
        if (want_version || want_settings) {
            fprintf(stderr, "%s: --markdown takes no other option\n", argv[0]);
            return 2;
        }
        print_settings_markdown();
        return fflush(stdout) == 0 && !ferror(stdout) ? 0 : 1;
    }
    if (want_auto && (want_version || want_settings)) {
        fprintf(stderr, "%s: --auto takes no other option\n", argv[0]);
        return 2;
    }
    if (want_auto) {
        MPI_Init(&argc, &argv);
        const int rc = print_auto();
        MPI_Finalize();
        return rc;
    }
    if (!want_version && !want_settings) want_version = want_settings = 2;
    MPI_Init(&argc, &argv);
    int rc = 0;
    if (want_version) print_version();
    if (want_version == 2) print_build();
    if (want_settings) rc = print_settings();
    MPI_Finalize();
    return rc;
}
