/*
 * Error paths with real ranks (run with >= 2 ranks):
 *  - creating from MPI_COMM_NULL (C and Fortran handle) fails with
 *    CC_COLL_ERR_INVALID_ARG and leaves the output handle NULL;
 *  - an inter-communicator is rejected with CC_COLL_ERR_NOT_SUPPORTED;
 *  - every call given a destroyed handle returns CC_COLL_ERR_INVALID_COMM,
 *    and handles are not reused;
 *  - the library's duplicate of the communicator has MPI_ERRORS_RETURN while
 *    the user's communicator keeps its own error handler
 *    (MPI_ERRORS_ARE_FATAL, or a user-defined one), and destroy frees the
 *    duplicate. The duplicate is observed through the MPI profiling
 *    interface: this program defines MPI_Comm_dup / MPI_Comm_free, which the
 *    library's calls reach, and forwards them to PMPI_Comm_dup / PMPI_Comm_free.
 *  - argument errors on a live communicator give their documented codes.
 */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "cc_coll.h"
#include "fake_stream.h"


static int g_rank = 0;
static int g_failures = 0;
static int g_checks = 0;

/* ---- MPI profiling-interface wrappers -------------------------------- */

static MPI_Comm g_last_dup = MPI_COMM_NULL;
static int g_dup_calls = 0;
static MPI_Comm g_last_freed = MPI_COMM_NULL;
static int g_free_calls = 0;

int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *newcomm)
{
    int rc = PMPI_Comm_dup(comm, newcomm);
    if (rc == MPI_SUCCESS) {
        g_last_dup = *newcomm;
        ++g_dup_calls;
    }
    return rc;
}

int MPI_Comm_free(MPI_Comm *comm)
{
    MPI_Comm c = *comm;
    int rc = PMPI_Comm_free(comm);
    if (rc == MPI_SUCCESS) {
        g_last_freed = c;
        ++g_free_calls;
    }
    return rc;
}

/* ---- checks ---------------------------------------------------------- */

static void check(int cond, const char *what)
{
    ++g_checks;
    if (!cond) {
        ++g_failures;
        fprintf(stderr, "[rank %d] FAIL: %s (last error: \"%s\")\n", g_rank, what, cc_coll_last_error());
        fflush(stderr);
    }
}

static void expect_status(cc_coll_status_t got, cc_coll_status_t want, const char *what)
{
    ++g_checks;
    if (got != want) {
        ++g_failures;
        fprintf(stderr, "[rank %d] FAIL: %s: got %d (%s), expected %d (%s); last error: \"%s\"\n", g_rank, what,
                (int)got, cc_coll_status_string(got), (int)want, cc_coll_status_string(want), cc_coll_last_error());
        fflush(stderr);
    } else if (want != CC_COLL_OK) {
        /* A failed call explains itself. */
        const char *msg = cc_coll_last_error();
        check(msg != NULL && msg[0] != '\0', "a failing call left cc_coll_last_error() empty");
    }
}

static void check_errhandler(MPI_Comm comm, MPI_Errhandler want, const char *what)
{
    MPI_Errhandler eh = MPI_ERRHANDLER_NULL;
    int rc = MPI_Comm_get_errhandler(comm, &eh);
    check(rc == MPI_SUCCESS, "MPI_Comm_get_errhandler");
    check(eh == want, what);
    if (eh != MPI_ERRHANDLER_NULL) MPI_Errhandler_free(&eh);
}

static void user_errhandler(MPI_Comm *comm, int *code, ...)
{
    (void)comm;
    (void)code;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    int size = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size < 2) {
        if (g_rank == 0) fprintf(stderr, "errors: needs at least 2 ranks (got %d)\n", size);
        MPI_Finalize();
        return 1;
    }
    cc_coll_comm_h h = (cc_coll_comm_h)(uintptr_t)0x1; /* garbage: must be reset to NULL */

    /* 1. MPI_COMM_NULL. */
    expect_status(cc_coll_comm_create(MPI_COMM_NULL, &h), CC_COLL_ERR_INVALID_ARG, "create(MPI_COMM_NULL)");
    check(h == NULL, "create(MPI_COMM_NULL) left the output handle non-NULL");
    h = (cc_coll_comm_h)(uintptr_t)0x1;
    expect_status(cc_coll_comm_create_fint(MPI_Comm_c2f(MPI_COMM_NULL), &h), CC_COLL_ERR_INVALID_ARG,
                  "create_fint(MPI_Comm_c2f(MPI_COMM_NULL))");
    check(h == NULL, "create_fint(MPI_COMM_NULL) left the output handle non-NULL");
    /* Fortran handles that name no communicator: an error, not an abort. */
    {
        const MPI_Fint bogus[] = {123456, -1, 1 << 30};
        for (size_t i = 0; i < sizeof bogus / sizeof bogus[0]; ++i) {
            char what[96];
            snprintf(what, sizeof what, "create_fint(%d), no such Fortran handle", (int)bogus[i]);
            h = (cc_coll_comm_h)(uintptr_t)0x1;
            expect_status(cc_coll_comm_create_fint(bogus[i], &h), CC_COLL_ERR_INVALID_ARG, what);
            check(h == NULL, "create_fint(bogus handle) left the output handle non-NULL");
        }
    }
    expect_status(cc_coll_comm_create(MPI_COMM_WORLD, NULL), CC_COLL_ERR_INVALID_ARG, "create(WORLD, NULL)");
    expect_status(cc_coll_comm_create_versioned(MPI_COMM_WORLD, &h, CC_COLL_VERSION_MAJOR + 1, 0),
                  CC_COLL_ERR_VERSION_MISMATCH, "create with a newer header major version");
    expect_status(cc_coll_comm_create_versioned(MPI_COMM_WORLD, &h, CC_COLL_VERSION_MAJOR, CC_COLL_VERSION_MINOR + 1),
                  CC_COLL_ERR_VERSION_MISMATCH, "create with a newer header minor version");
    check(h == NULL, "failed create left the output handle non-NULL");

    /* 2. Inter-communicator between the two halves of WORLD. */
    {
        const int half = size / 2;
        const int color = g_rank < half ? 0 : 1;
        MPI_Comm local = MPI_COMM_NULL, inter = MPI_COMM_NULL;
        MPI_Comm_split(MPI_COMM_WORLD, color, g_rank, &local);
        const int remote_leader = color == 0 ? half : 0;
        int rc = MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, remote_leader, 77, &inter);
        check(rc == MPI_SUCCESS, "MPI_Intercomm_create");
        int is_inter = 0;
        MPI_Comm_test_inter(inter, &is_inter);
        check(is_inter == 1, "MPI_Intercomm_create did not give an inter-communicator");
        const int dups_before = g_dup_calls;
        h = (cc_coll_comm_h)(uintptr_t)0x1;
        expect_status(cc_coll_comm_create(inter, &h), CC_COLL_ERR_NOT_SUPPORTED, "create(inter-communicator)");
        check(h == NULL, "create(inter) left the output handle non-NULL");
        expect_status(cc_coll_comm_create_fint(MPI_Comm_c2f(inter), &h), CC_COLL_ERR_NOT_SUPPORTED,
                      "create_fint(inter-communicator)");
        check(g_dup_calls == dups_before, "a rejected inter-communicator was duplicated");
        MPI_Comm_free(&inter);
        MPI_Comm_free(&local);
    }

    /* 3. Error handlers: the user's stays, the duplicate gets MPI_ERRORS_RETURN. */
    check_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL, "MPI_COMM_WORLD's handler is not MPI_ERRORS_ARE_FATAL before create");
    int dups_before = g_dup_calls;
    h = NULL;
    expect_status(cc_coll_comm_create(MPI_COMM_WORLD, &h), CC_COLL_OK, "create(MPI_COMM_WORLD)");
    check(h != NULL, "create(WORLD) gave a NULL handle");
    check(g_dup_calls == dups_before + 1, "create did not call MPI_Comm_dup exactly once");
    const MPI_Comm lib_dup = g_last_dup;
    check(lib_dup != MPI_COMM_NULL && lib_dup != MPI_COMM_WORLD, "create's duplicate is not a new communicator");
    check_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL, "create changed MPI_COMM_WORLD's error handler");
    if (lib_dup != MPI_COMM_NULL) {
        check_errhandler(lib_dup, MPI_ERRORS_RETURN, "the library's duplicate does not use MPI_ERRORS_RETURN");
        int cmp = -1;
        MPI_Comm_compare(lib_dup, MPI_COMM_WORLD, &cmp);
        check(cmp == MPI_CONGRUENT, "the library's duplicate is not congruent with MPI_COMM_WORLD");
    }

    /* A working call before destroying. */
    {
        float v[3] = {1.0f, 2.0f, (float)g_rank};
        expect_status(cc_coll_allreduce(v, v, 3, CC_COLL_F32, CC_COLL_SUM, NULL, h, NULL), CC_COLL_OK,
                      "allreduce on a live comm");
        check(v[0] == (float)size && v[1] == 2.0f * size && v[2] == (float)(size * (size - 1) / 2),
              "allreduce on a live comm gave a wrong sum");

        /* Argument errors on a live comm. */
        float w[4] = {0};
        expect_status(cc_coll_allreduce(NULL, w, 4, CC_COLL_F32, CC_COLL_SUM, NULL, h, NULL), CC_COLL_ERR_NULL_BUFFER,
                      "allreduce(sendbuf NULL)");
        expect_status(cc_coll_allreduce(w, NULL, 4, CC_COLL_F32, CC_COLL_SUM, NULL, h, NULL), CC_COLL_ERR_NULL_BUFFER,
                      "allreduce(recvbuf NULL)");
        expect_status(cc_coll_allreduce(w, w + 1, 2, CC_COLL_F32, CC_COLL_SUM, NULL, h, NULL), CC_COLL_ERR_INVALID_ARG,
                      "allreduce(overlapping buffers)");
        expect_status(cc_coll_allreduce(w, w, 4, (cc_coll_dtype_t)7, CC_COLL_SUM, NULL, h, NULL),
                      CC_COLL_ERR_INVALID_DTYPE, "allreduce(bad dtype)");
        expect_status(cc_coll_allreduce(w, w, 4, CC_COLL_F32, (cc_coll_op_t)9, NULL, h, NULL), CC_COLL_ERR_INVALID_OP,
                      "allreduce(bad op)");
        expect_status(cc_coll_allreduce(w, w, (size_t)1 << 31, CC_COLL_F32, CC_COLL_SUM, NULL, h, NULL),
                      CC_COLL_ERR_COUNT_OVERFLOW, "allreduce(count 2^31)");
        cc_coll_params_t p;
        memset(&p, 0, sizeof p);
        p.mask = (uint64_t)1 << 40;
        expect_status(cc_coll_allreduce(w, w, 4, CC_COLL_F32, CC_COLL_SUM, &p, h, NULL), CC_COLL_ERR_INVALID_PARAMS,
                      "allreduce(params with unknown mask bit)");
        p.mask = CC_COLL_PARAMS_FIELD_METHOD;
        p.method = (cc_coll_method_t)42;
        expect_status(cc_coll_allreduce(w, w, 4, CC_COLL_F32, CC_COLL_SUM, &p, h, NULL), CC_COLL_ERR_INVALID_METHOD,
                      "allreduce(params with unknown method)");
        int dummy = 0;
        if (fake_stream_status() != CC_COLL_OK)
            expect_status(cc_coll_allreduce(w, w, 4, CC_COLL_F32, CC_COLL_SUM, NULL, h, &dummy), fake_stream_status(),
                          "allreduce(made-up stream)");
        cc_coll_stats_t s;
        memset(&s, 0, sizeof s);
        s.mask = CC_COLL_STATS_FIELD_CALLS;
        expect_status(cc_coll_comm_get_stats(h, &s), CC_COLL_OK, "get_stats");
        check(s.calls == 1, "failed calls were counted in stats (calls != 1)");
    }

    /* A user-defined handler on the user's comm also stays, and the duplicate
     * still gets MPI_ERRORS_RETURN. */
    {
        MPI_Comm user = MPI_COMM_NULL;
        MPI_Comm_split(MPI_COMM_WORLD, 0, g_rank, &user);
        MPI_Errhandler mine = MPI_ERRHANDLER_NULL;
        MPI_Comm_create_errhandler(user_errhandler, &mine);
        MPI_Comm_set_errhandler(user, mine);
        cc_coll_comm_h h2 = NULL;
        expect_status(cc_coll_comm_create(user, &h2), CC_COLL_OK, "create(comm with a user error handler)");
        check_errhandler(user, mine, "create changed the user communicator's own error handler");
        check_errhandler(g_last_dup, MPI_ERRORS_RETURN,
                         "duplicate of a comm with a user handler does not use MPI_ERRORS_RETURN");
        expect_status(cc_coll_comm_destroy(h2), CC_COLL_OK, "destroy(h2)");
        check_errhandler(user, mine, "destroy changed the user communicator's error handler");
        MPI_Errhandler_free(&mine);
        MPI_Comm_free(&user);
    }

    /* 4. Use after destroy. */
    const int frees_before = g_free_calls;
    expect_status(cc_coll_comm_destroy(h), CC_COLL_OK, "destroy(h)");
    check(g_free_calls == frees_before + 1 && g_last_freed == lib_dup, "destroy did not free the library's duplicate");
    check_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL, "destroy changed MPI_COMM_WORLD's error handler");
    {
        float v[2] = {1.0f, 2.0f};
        int r = -1;
        cc_coll_stats_t s;
        memset(&s, 0, sizeof s);
        s.mask = CC_COLL_STATS_FIELD_CALLS;
        expect_status(cc_coll_allreduce(v, v, 2, CC_COLL_F32, CC_COLL_SUM, NULL, h, NULL), CC_COLL_ERR_INVALID_COMM,
                      "allreduce after destroy");
        check(v[0] == 1.0f && v[1] == 2.0f, "allreduce after destroy touched the buffer");
        expect_status(cc_coll_allreduce(v, v, 0, CC_COLL_F32, CC_COLL_SUM, NULL, h, NULL), CC_COLL_ERR_INVALID_COMM,
                      "allreduce(count 0) after destroy");
        expect_status(cc_coll_comm_rank(h, &r), CC_COLL_ERR_INVALID_COMM, "rank after destroy");
        expect_status(cc_coll_comm_size(h, &r), CC_COLL_ERR_INVALID_COMM, "size after destroy");
        expect_status(cc_coll_comm_get_stats(h, &s), CC_COLL_ERR_INVALID_COMM, "get_stats after destroy");
        expect_status(cc_coll_comm_reset_stats(h), CC_COLL_ERR_INVALID_COMM, "reset_stats after destroy");
        expect_status(cc_coll_comm_destroy(h), CC_COLL_ERR_INVALID_COMM, "second destroy");
        expect_status(cc_coll_comm_destroy(NULL), CC_COLL_ERR_INVALID_COMM, "destroy(NULL)");
        expect_status(cc_coll_allreduce(v, v, 2, CC_COLL_F32, CC_COLL_SUM, NULL, NULL, NULL), CC_COLL_ERR_INVALID_COMM,
                      "allreduce(comm NULL)");

        /* A new comm does not revive the old handle. */
        cc_coll_comm_h h3 = NULL;
        expect_status(cc_coll_comm_create(MPI_COMM_WORLD, &h3), CC_COLL_OK, "create after destroy");
        check(h3 != NULL && h3 != h, "a destroyed handle was reused");
        expect_status(cc_coll_comm_rank(h, &r), CC_COLL_ERR_INVALID_COMM, "old handle after a new create");
        expect_status(cc_coll_comm_rank(h3, &r), CC_COLL_OK, "rank on the new comm");
        check(r == g_rank, "rank on the new comm differs from MPI_COMM_WORLD's");
        expect_status(cc_coll_comm_destroy(h3), CC_COLL_OK, "destroy(h3)");
    }

    /* 5. Counts no message carries: refused before out is written. */
    {
        cc_coll_comm_h c = NULL;
        expect_status(cc_coll_comm_create(MPI_COMM_WORLD, &c), CC_COLL_OK, "create for the count checks");
        const int peer = (g_rank + 1) % size;
        double out[4] = {7, 7, 7, 7};
        expect_status(cc_coll_lep_get_residual(c, peer, 0, NULL, (size_t)INT_MAX + 1, CC_COLL_F64, out),
                      CC_COLL_ERR_COUNT_OVERFLOW, "lep_get_residual(count INT_MAX + 1)");
        expect_status(cc_coll_lep_get_residual(c, peer, 0, NULL, SIZE_MAX, CC_COLL_F32, out),
                      CC_COLL_ERR_COUNT_OVERFLOW, "lep_get_residual(count SIZE_MAX)");
        check(out[0] == 7 && out[3] == 7, "lep_get_residual with a refused count wrote out");
        expect_status(cc_coll_lep_get_residual(c, peer, 0, NULL, 4, CC_COLL_F64, out), CC_COLL_OK,
                      "lep_get_residual(count 4) with no residual");
        check(out[0] == 0 && out[3] == 0, "lep_get_residual with no residual did not write zeros");
        expect_status(cc_coll_comm_destroy(c), CC_COLL_OK, "destroy after the count checks");
    }

    int failures = 0;
    MPI_Allreduce(&g_failures, &failures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (g_rank == 0) {
        if (failures == 0)
            printf("errors: %d ranks: all %d checks passed per rank\n", size, g_checks);
        else
            printf("errors: %d failed checks over all ranks\n", failures);
    }
    MPI_Finalize();
    return failures == 0 ? 0 : 1;
}
