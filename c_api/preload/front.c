/* libcc_coll_preload.so: the part of the LD_PRELOAD shim that is preloaded
 * (core_api.h has the whole picture). It exports the interposed MPI entry
 * points and depends on no MPI library, so preloading it brings no second
 * MPI into a program: a library's DT_NEEDED MPI would otherwise come before
 * the program's own in the process's symbol scope wherever the program
 * reaches MPI through another library (Fortran's libmpi_mpifh or
 * libmpichfort, mpi4py), and take over its calls.
 *
 * At the first wrapped call it asks every MPI library in the process (each
 * object that defines PMPI_Get_library_version, callable before MPI_Init
 * and taking no handle) which MPI it is. One of another ABI than the shim's
 * own (Open MPI's handles are pointers, the MPICH ABI's integers) is the
 * program's: the shim says so on stderr (rank 0, where the launcher tells
 * the rank) and forwards every call to it untouched. Otherwise it loads
 * libcc_coll_preload_core.so from its own folder and hands every call to
 * it; should that fail, it says so and forwards every call to MPI.
 *
 * MPI_Allreduce's and MPI_Iallreduce's handles (and the request of
 * MPI_Request_get_status) arrive register-wide (uintptr_t): an Open MPI
 * handle is a pointer, an MPICH-ABI handle an int, each passed in one
 * integer register on the LP64 ABIs (x86-64, AArch64, POWER), so either
 * reaches the core or the program's MPI with every bit. No mpi.h here: its
 * prototypes would name this build's handle types. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core_api.h"

#define EXPORT __attribute__((visibility("default")))

/* ------------------------------------------------------------------------ */
/* Which MPI the process runs.                                              */

enum { ABI_UNKNOWN = 0, ABI_OPEN_MPI = 1, ABI_MPICH = 2 };

static const char *abi_name(int abi) { return abi == ABI_OPEN_MPI ? "Open MPI" : "MPICH"; }

/* The family of an MPI_Get_library_version string. */
static int abi_of(const char *version)
{
    if (strstr(version, "Open MPI") != NULL) return ABI_OPEN_MPI;
    if (strstr(version, "MPICH") != NULL || strstr(version, "MVAPICH") != NULL ||
        strstr(version, "Intel(R) MPI") != NULL)
        return ABI_MPICH;
    return ABI_UNKNOWN;
}

/* The first line of a version string, blanks squeezed, up to its first
 * comma ("Open MPI v4.1.4", "MPICH Version: 4.0.2"). */
static void short_version(const char *version, char *out, size_t size)
{
    size_t n = 0;
    for (const char *c = version; *c != '\0' && *c != '\n' && *c != ',' && n + 1 < size; ++c) {
        const int blank = *c == ' ' || *c == '\t' || *c == '\r';
        if (blank && (n == 0 || out[n - 1] == ' ')) continue;
        out[n++] = blank ? ' ' : *c;
    }
    while (n > 0 && out[n - 1] == ' ') --n;
    out[n] = '\0';
}

/* This process's rank in MPI_COMM_WORLD as the launcher tells it, or -1. */
static int launcher_rank(void)
{
    static const char *const names[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; ++i) {
        const char *v = getenv(names[i]);
        if (v != NULL && *v != '\0') return atoi(v);
    }
    return -1;
}

#define MAX_OBJECTS 1024
struct objects {
    char *names[MAX_OBJECTS];
    int n;
};

static int collect_object(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    struct objects *o = data;
    if (o->n < MAX_OBJECTS) o->names[o->n++] = strdup(info->dlpi_name != NULL ? info->dlpi_name : "");
    return 0;
}

typedef int (*get_version_fn)(char *, int *);

/* A function looked up once, from any thread: *slot caches it (NOT_FOUND
 * when there is none). */
#define NOT_FOUND ((void *)1)
static void *cached(void **slot, void *(*find)(const char *, const char *), const char *a, const char *b)
{
    void *f = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (f == NULL) {
        f = find(a, b);
        __atomic_store_n(slot, f != NULL ? f : NOT_FOUND, __ATOMIC_RELEASE);
    }
    return f == NOT_FOUND ? NULL : f;
}

static const struct cc_coll_preload_core *g_core; /* NULL: forward every call */
static void *g_program_mpi;                        /* the foreign MPI library, or NULL */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

/* Where this file's object lives: the core is beside it. */
static void core_path(char *out, size_t size)
{
    Dl_info info;
    out[0] = '\0';
    if (dladdr((void *)&core_path, &info) == 0 || info.dli_fname == NULL) return;
    const char *slash = strrchr(info.dli_fname, '/');
    const size_t dir = slash != NULL ? (size_t)(slash - info.dli_fname) + 1 : 0;
    snprintf(out, size, "%.*s%s", (int)dir, info.dli_fname, "libcc_coll_preload_core.so");
}

static void decide(void)
{
    /* Every MPI library in the process, once each. */
    struct objects objs = {.n = 0};
    dl_iterate_phdr(collect_object, &objs);
    static char version[1 << 16]; /* above every MPI_MAX_LIBRARY_VERSION_STRING */
    void *seen[MAX_OBJECTS];
    int nseen = 0, foreign = 0;
    char foreign_version[256] = "";
    for (int i = 0; i < objs.n; ++i) {
        void *h = dlopen(objs.names[i][0] != '\0' ? objs.names[i] : NULL, RTLD_LAZY | RTLD_NOLOAD);
        free(objs.names[i]);
        if (h == NULL) continue;
        void *f = dlsym(h, "PMPI_Get_library_version");
        int known = f == NULL;
        for (int k = 0; k < nseen && !known; ++k) known = seen[k] == f;
        if (!known && nseen < MAX_OBJECTS) seen[nseen++] = f;
        if (!known && !foreign) {
            int len = 0;
            version[0] = '\0';
            if (((get_version_fn)f)(version, &len) == 0) {
                version[len >= 0 && (size_t)len < sizeof version ? (size_t)len : sizeof version - 1] = '\0';
                const int abi = abi_of(version);
                if (cc_coll_preload_built_abi != ABI_UNKNOWN && abi != ABI_UNKNOWN &&
                    abi != cc_coll_preload_built_abi) {
                    foreign = abi;
                    short_version(version, foreign_version, sizeof foreign_version);
                    Dl_info info;
                    if (dladdr(f, &info) != 0 && info.dli_fname != NULL && info.dli_fname[0] != '\0')
                        g_program_mpi = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
                }
            }
        }
        dlclose(h);
    }
    if (foreign) {
        if (launcher_rank() <= 0)
            fprintf(stderr,
                    "[cc_coll] preload: libcc_coll_preload.so was built for %s (the %s ABI), but this program runs "
                    "on %s (the %s ABI), whose MPI handles the shim cannot read: it stays out of the way and every "
                    "MPI call goes to MPI unchanged (nothing is compressed). Preload the libcc_coll_preload.so "
                    "built with this program's MPI (docs/preload.md, \"Which MPI\").\n",
                    cc_coll_preload_built_mpi, abi_name(cc_coll_preload_built_abi), foreign_version,
                    abi_name(foreign));
        return;
    }

    char path[4096];
    core_path(path, sizeof path);
    void *core = path[0] != '\0' ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
    const char *why = core == NULL ? dlerror() : NULL;
    if (core != NULL) {
        const struct cc_coll_preload_core *(*get)(int) =
            (const struct cc_coll_preload_core *(*)(int))dlsym(core, "cc_coll_preload_core_get");
        g_core = get != NULL ? get(CC_COLL_PRELOAD_CORE_API) : NULL;
        if (g_core == NULL) why = "it is not the core of this libcc_coll_preload.so (another version?)";
    }
    if (g_core == NULL && launcher_rank() <= 0)
        fprintf(stderr,
                "[cc_coll] preload: cannot load %s: %s; every MPI call goes to MPI unchanged (nothing is "
                "compressed)\n",
                path[0] != '\0' ? path : "libcc_coll_preload_core.so", why != NULL ? why : "not found");
}

/* The core, or NULL when every call goes to MPI untouched. */
static const struct cc_coll_preload_core *core(void)
{
    pthread_once(&g_once, decide);
    return g_core;
}

/* The program's MPI function `name`: from the foreign MPI library found,
 * else the next definition after this object. */
static void *find_program_mpi(const char *name, const char *unused)
{
    (void)unused;
    void *f = g_program_mpi != NULL ? dlsym(g_program_mpi, name) : NULL;
    return f != NULL ? f : dlsym(RTLD_NEXT, name);
}

static void *program_mpi(void **slot, const char *name)
{
    void *f = cached(slot, find_program_mpi, name, NULL);
    if (f == NULL) {
        fprintf(stderr, "[cc_coll] preload: this program's MPI has no %s to forward the call to\n", name);
        abort();
    }
    return f;
}

/* ------------------------------------------------------------------------ */
/* C.                                                                       */

EXPORT int MPI_Init(int *argc, char ***argv)
{
    const struct cc_coll_preload_core *c = core();
    if (c != NULL) return c->init(argc, argv);
    static void *next;
    return ((int (*)(int *, char ***))program_mpi(&next, "PMPI_Init"))(argc, argv);
}

EXPORT int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    const struct cc_coll_preload_core *c = core();
    if (c != NULL) return c->init_thread(argc, argv, required, provided);
    static void *next;
    return ((int (*)(int *, char ***, int, int *))program_mpi(&next, "PMPI_Init_thread"))(argc, argv, required,
                                                                                          provided);
}

EXPORT int MPI_Finalize(void)
{
    const struct cc_coll_preload_core *c = core();
    if (c != NULL) return c->finalize();
    static void *next;
    return ((int (*)(void))program_mpi(&next, "PMPI_Finalize"))();
}

typedef int (*wide_allreduce_fn)(const void *, void *, int, uintptr_t, uintptr_t, uintptr_t);

EXPORT int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, uintptr_t datatype, uintptr_t op,
                         uintptr_t comm)
{
    const struct cc_coll_preload_core *c = core();
    if (c != NULL) return c->allreduce(sendbuf, recvbuf, count, datatype, op, comm, __builtin_return_address(0));
    static void *next;
    return ((wide_allreduce_fn)program_mpi(&next, "PMPI_Allreduce"))(sendbuf, recvbuf, count, datatype, op, comm);
}

typedef int (*wide_iallreduce_fn)(const void *, void *, int, uintptr_t, uintptr_t, uintptr_t, void *);

EXPORT int MPI_Iallreduce(const void *sendbuf, void *recvbuf, int count, uintptr_t datatype, uintptr_t op,
                          uintptr_t comm, void *request)
{
    const struct cc_coll_preload_core *c = core();
    if (c != NULL)
        return c->iallreduce(sendbuf, recvbuf, count, datatype, op, comm, request, __builtin_return_address(0));
    static void *next;
    return ((wide_iallreduce_fn)program_mpi(&next, "PMPI_Iallreduce"))(sendbuf, recvbuf, count, datatype, op, comm,
                                                                       request);
}

/* The completion functions: requests, arrays and statuses are pointers
 * whatever the ABI; MPI_Request_get_status's handle is register-wide. */
#define C_COMPLETION(name, field, params, ...)                                                                 \
    EXPORT int name params                                                                                     \
    {                                                                                                          \
        const struct cc_coll_preload_core *c = core();                                                         \
        if (c != NULL) return c->field(__VA_ARGS__);                                                           \
        static void *next;                                                                                     \
        return ((int(*) params)program_mpi(&next, "P" #name))(__VA_ARGS__);                                    \
    }

C_COMPLETION(MPI_Wait, wait, (void *request, void *status), request, status)
C_COMPLETION(MPI_Test, test, (void *request, int *flag, void *status), request, flag, status)
C_COMPLETION(MPI_Waitall, waitall, (int count, void *requests, void *statuses), count, requests, statuses)
C_COMPLETION(MPI_Testall, testall, (int count, void *requests, int *flag, void *statuses), count, requests, flag,
             statuses)
C_COMPLETION(MPI_Waitany, waitany, (int count, void *requests, int *index, void *status), count, requests, index,
             status)
C_COMPLETION(MPI_Testany, testany, (int count, void *requests, int *index, int *flag, void *status), count,
             requests, index, flag, status)
C_COMPLETION(MPI_Waitsome, waitsome, (int incount, void *requests, int *outcount, int *indices, void *statuses),
             incount, requests, outcount, indices, statuses)
C_COMPLETION(MPI_Testsome, testsome, (int incount, void *requests, int *outcount, int *indices, void *statuses),
             incount, requests, outcount, indices, statuses)
C_COMPLETION(MPI_Request_get_status, request_get_status, (uintptr_t request, int *flag, void *status), request,
             flag, status)

/* ------------------------------------------------------------------------ */
/* Fortran: mpif.h and `use mpi` in the four manglings, and mpi_f08.        */

/* The MPI's entry a Fortran wrapper forwards to: the next definition of the
 * profiling entry `pname` (Open MPI's libmpi_mpifh or libmpi_usempif08,
 * MPICH's libmpichfort), else, where the MPI has none (MPICH's mpi_f08 init
 * and finalize), the next definition of `name` itself, or NULL. */
static void *next_fortran(const char *pname, const char *name)
{
    void *f = dlsym(RTLD_NEXT, pname);
    return f != NULL ? f : dlsym(RTLD_NEXT, name);
}

__attribute__((noreturn)) static void no_fortran_entry(const char *name)
{
    fprintf(stderr, "[cc_coll] preload: %s: this program's MPI has no Fortran entry to forward the call to\n", name);
    abort();
}

/* Each Fortran wrapper looks its MPI entry up once (CACHED_FORTRAN). */
#define CACHED_FORTRAN(type, name, pname)                                                                      \
    static void *next_slot;                                                                                    \
    const type next = (type)cached(&next_slot, next_fortran, #pname, #name)

#define F_ALLREDUCE(name, pname)                                                                               \
    EXPORT void name(void *s, void *r, int *count, int *dt, int *op, int *comm, int *ierr)                    \
    {                                                                                                          \
        CACHED_FORTRAN(cc_coll_preload_f_allreduce_fn, name, pname);                                           \
        const struct cc_coll_preload_core *c = core();                                                         \
        if (c != NULL) {                                                                                       \
            c->f_allreduce(next, s, r, count, dt, op, comm, ierr, __builtin_return_address(0));                \
            return;                                                                                            \
        }                                                                                                      \
        if (next == NULL) no_fortran_entry(#name);                                                             \
        next(s, r, count, dt, op, comm, ierr);                                                                 \
    }
#define F_INIT(name, pname)                                                                                    \
    EXPORT void name(int *ierr)                                                                                \
    {                                                                                                          \
        CACHED_FORTRAN(cc_coll_preload_f_init_fn, name, pname);                                                \
        const struct cc_coll_preload_core *c = core();                                                         \
        if (c != NULL) {                                                                                       \
            c->f_init(next, ierr);                                                                             \
            return;                                                                                            \
        }                                                                                                      \
        if (next == NULL) no_fortran_entry(#name);                                                             \
        next(ierr);                                                                                            \
    }
#define F_INIT_THREAD(name, pname)                                                                             \
    EXPORT void name(int *required, int *provided, int *ierr)                                                  \
    {                                                                                                          \
        CACHED_FORTRAN(cc_coll_preload_f_init_thread_fn, name, pname);                                         \
        const struct cc_coll_preload_core *c = core();                                                         \
        if (c != NULL) {                                                                                       \
            c->f_init_thread(next, required, provided, ierr);                                                  \
            return;                                                                                            \
        }                                                                                                      \
        if (next == NULL) no_fortran_entry(#name);                                                             \
        next(required, provided, ierr);                                                                        \
    }
#define F_FINALIZE(name, pname)                                                                                \
    EXPORT void name(int *ierr)                                                                                \
    {                                                                                                          \
        CACHED_FORTRAN(cc_coll_preload_f_finalize_fn, name, pname);                                            \
        const struct cc_coll_preload_core *c = core();                                                         \
        if (c != NULL) {                                                                                       \
            c->f_finalize(next, ierr);                                                                         \
            return;                                                                                            \
        }                                                                                                      \
        if (next == NULL) no_fortran_entry(#name);                                                             \
        next(ierr);                                                                                            \
    }
#define F_IALLREDUCE(name, pname)                                                                              \
    EXPORT void name(void *s, void *r, int *count, int *dt, int *op, int *comm, int *request, int *ierr)       \
    {                                                                                                          \
        CACHED_FORTRAN(cc_coll_preload_f_iallreduce_fn, name, pname);                                          \
        const struct cc_coll_preload_core *c = core();                                                         \
        if (c != NULL) {                                                                                       \
            c->f_iallreduce(next, s, r, count, dt, op, comm, request, ierr, __builtin_return_address(0));      \
            return;                                                                                            \
        }                                                                                                      \
        if (next == NULL) no_fortran_entry(#name);                                                             \
        next(s, r, count, dt, op, comm, request, ierr);                                                        \
    }
/* A test (kind t: test, testall, testany, testsome; MPI_Request_get_status
 * has MPI_Test's type) and a wait (kind w), which also gets the MPI's test
 * of its kind (tname, tpname). */
#define F_TEST_KIND(t, name, pname, params, ...)                                                               \
    EXPORT void name params                                                                                    \
    {                                                                                                          \
        CACHED_FORTRAN(cc_coll_preload_f_##t##_fn, name, pname);                                               \
        if (next == NULL) no_fortran_entry(#name);                                                             \
        const struct cc_coll_preload_core *c = core();                                                         \
        if (c != NULL) {                                                                                       \
            c->f_##t(next, __VA_ARGS__);                                                                       \
            return;                                                                                            \
        }                                                                                                      \
        next(__VA_ARGS__);                                                                                     \
    }
#define F_WAIT_KIND(w, t, name, pname, tname, tpname, params, ...)                                             \
    EXPORT void name params                                                                                    \
    {                                                                                                          \
        CACHED_FORTRAN(cc_coll_preload_f_##w##_fn, name, pname);                                               \
        static void *test_slot;                                                                                \
        const cc_coll_preload_f_##t##_fn test =                                                                \
            (cc_coll_preload_f_##t##_fn)cached(&test_slot, next_fortran, #tpname, #tname);                     \
        if (next == NULL || test == NULL) no_fortran_entry(#name);                                             \
        const struct cc_coll_preload_core *c = core();                                                         \
        if (c != NULL) {                                                                                       \
            c->f_##w(next, test, __VA_ARGS__);                                                                 \
            return;                                                                                            \
        }                                                                                                      \
        next(__VA_ARGS__);                                                                                     \
    }

#define F_ALL(macro, lower, upper) \
    macro(lower, p##lower) macro(lower##_, p##lower##_) macro(lower##__, p##lower##__) macro(upper, P##upper)
/* The four manglings and mpi_f08's entry (Open MPI's and MPICH's names) of
 * a test, then of a wait. */
#define F_ALL_TEST(t, upper, name, params, ...)                                                                \
    F_TEST_KIND(t, name, p##name, params, __VA_ARGS__)                                                         \
    F_TEST_KIND(t, name##_, p##name##_, params, __VA_ARGS__)                                                   \
    F_TEST_KIND(t, name##__, p##name##__, params, __VA_ARGS__)                                                 \
    F_TEST_KIND(t, upper, P##upper, params, __VA_ARGS__)                                                       \
    F_TEST_KIND(t, name##_f08_, p##name##_f08_, params, __VA_ARGS__)
#define F_ALL_WAIT(w, t, upper, tupper, params, ...)                                                           \
    F_WAIT_KIND(w, t, mpi_##w, pmpi_##w, mpi_##t, pmpi_##t, params, __VA_ARGS__)                               \
    F_WAIT_KIND(w, t, mpi_##w##_, pmpi_##w##_, mpi_##t##_, pmpi_##t##_, params, __VA_ARGS__)                   \
    F_WAIT_KIND(w, t, mpi_##w##__, pmpi_##w##__, mpi_##t##__, pmpi_##t##__, params, __VA_ARGS__)               \
    F_WAIT_KIND(w, t, upper, P##upper, tupper, P##tupper, params, __VA_ARGS__)                                 \
    F_WAIT_KIND(w, t, mpi_##w##_f08_, pmpi_##w##_f08_, mpi_##t##_f08_, pmpi_##t##_f08_, params, __VA_ARGS__)

F_ALL(F_ALLREDUCE, mpi_allreduce, MPI_ALLREDUCE)
F_ALL(F_IALLREDUCE, mpi_iallreduce, MPI_IALLREDUCE)
F_ALL(F_INIT, mpi_init, MPI_INIT)
F_ALL(F_INIT_THREAD, mpi_init_thread, MPI_INIT_THREAD)
F_ALL(F_FINALIZE, mpi_finalize, MPI_FINALIZE)

F_ALL_TEST(test, MPI_TEST, mpi_test, (int *request, int *flag, void *status, int *ierr), request, flag, status, ierr)
F_ALL_TEST(test, MPI_REQUEST_GET_STATUS, mpi_request_get_status, (int *request, int *flag, void *status, int *ierr),
           request, flag, status, ierr)
F_ALL_TEST(testall, MPI_TESTALL, mpi_testall, (int *count, int *requests, int *flag, void *statuses, int *ierr),
           count, requests, flag, statuses, ierr)
F_ALL_TEST(testany, MPI_TESTANY, mpi_testany,
           (int *count, int *requests, int *index, int *flag, void *status, int *ierr), count, requests, index, flag,
           status, ierr)
F_ALL_TEST(testsome, MPI_TESTSOME, mpi_testsome,
           (int *incount, int *requests, int *outcount, int *indices, void *statuses, int *ierr), incount, requests,
           outcount, indices, statuses, ierr)
F_ALL_WAIT(wait, test, MPI_WAIT, MPI_TEST, (int *request, void *status, int *ierr), request, status, ierr)
F_ALL_WAIT(waitall, testall, MPI_WAITALL, MPI_TESTALL, (int *count, int *requests, void *statuses, int *ierr), count,
           requests, statuses, ierr)
F_ALL_WAIT(waitany, testany, MPI_WAITANY, MPI_TESTANY,
           (int *count, int *requests, int *index, void *status, int *ierr), count, requests, index, status, ierr)
F_ALL_WAIT(waitsome, testsome, MPI_WAITSOME, MPI_TESTSOME,
           (int *incount, int *requests, int *outcount, int *indices, void *statuses, int *ierr), incount, requests,
           outcount, indices, statuses, ierr)

/* mpi_f08: Open MPI's entries (handles are type(MPI_*) holding one integer,
 * MPI_VAL, passed by reference like the integer handles above; ierror is
 * optional, so it may be NULL). MPICH's mpi_f08 has the same init,
 * finalize and completion names (those are defined with the tests and
 * waits above); its MPI_Allreduce and MPI_Iallreduce reach the C entry
 * points. */
F_ALLREDUCE(mpi_allreduce_f08_, pmpi_allreduce_f08_)
F_IALLREDUCE(mpi_iallreduce_f08_, pmpi_iallreduce_f08_)
F_INIT(mpi_init_f08_, pmpi_init_f08_)
F_INIT_THREAD(mpi_init_thread_f08_, pmpi_init_thread_f08_)
F_FINALIZE(mpi_finalize_f08_, pmpi_finalize_f08_)
