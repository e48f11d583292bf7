/* The sessions model beside the world model (MPI 4.1 §11.2 and §11.3): a session before
 * MPI_Init, which then joins the library at the level the session made it with; the session
 * ends first and MPI_COMM_WORLD goes on; another session, and MPI_Finalize while it is open
 * (MPI_Finalized true, MPI_Initialized still true), after which the session's communicator
 * still works until the session ends.
 * Prints "sessions_world: ok <rank>". */
#include <mpi.h>
#include <string.h>
#define NAME "sessions_world"
#include "check.h"

/* A communicator over mpi://WORLD of session `s`, and a check of an allreduce on it. */
static MPI_Comm world_of(MPI_Session s, const char *tag) {
    MPI_Group g;
    MPI_Comm c = MPI_COMM_NULL;
    int rc = MPI_Group_from_session_pset(s, "mpi://WORLD", &g);
    CHECK(rc == MPI_SUCCESS, "MPI_Group_from_session_pset: %d", rc);
    rc = MPI_Comm_create_from_group(g, tag, MPI_INFO_NULL, MPI_ERRORS_RETURN, &c);
    CHECK(rc == MPI_SUCCESS, "MPI_Comm_create_from_group: %d", rc);
    MPI_Group_free(&g);
    return c;
}

static void check_sum(MPI_Comm c, const char *when) {
    int r, n, sum = -1;
    MPI_Comm_rank(c, &r);
    MPI_Comm_size(c, &n);
    MPI_Allreduce(&r, &sum, 1, MPI_INT, MPI_SUM, c);
    CHECK(sum == n * (n - 1) / 2, "%s: allreduce %d", when, sum);
}

int main(int argc, char **argv) {
    int flag, provided, rc;
    char v[64];
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "thread_level", "MPI_THREAD_FUNNELED");
    MPI_Session s;
    rc = MPI_Session_init(info, MPI_ERRORS_RETURN, &s);
    CHECK(rc == MPI_SUCCESS, "MPI_Session_init: %d", rc);
    MPI_Info_free(&info);
    MPI_Comm c = world_of(s, "org.earlybird.test.sessions_world.1");
    MPI_Comm_rank(c, &rank);

    /* MPI_Init joins the library the session started, at the level it provides. */
    rc = MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    CHECK(rc == MPI_SUCCESS && provided == MPI_THREAD_FUNNELED, "MPI_Init_thread: %d, provided %d", rc, provided);
    MPI_Initialized(&flag);
    CHECK(flag, "MPI_Initialized after MPI_Init");
    int wrank;
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    CHECK(wrank == rank, "rank %d in MPI_COMM_WORLD, %d in the session's", wrank, rank);
    check_sum(c, "the session's communicator beside MPI_COMM_WORLD");
    check_sum(MPI_COMM_WORLD, "MPI_COMM_WORLD beside the session");

    /* The session ends first: the world model goes on. */
    MPI_Comm_free(&c);
    rc = MPI_Session_finalize(&s);
    CHECK(rc == MPI_SUCCESS, "MPI_Session_finalize: %d", rc);
    check_sum(MPI_COMM_WORLD, "MPI_COMM_WORLD after the session ended");

    /* Another session, and MPI_Finalize while it is open. */
    MPI_Session s2;
    rc = MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_RETURN, &s2);
    CHECK(rc == MPI_SUCCESS, "a second MPI_Session_init: %d", rc);
    MPI_Info got;
    MPI_Session_get_info(s2, &got);
    MPI_Info_get(got, "thread_level", sizeof v - 1, v, &flag);
    CHECK(flag && strcmp(v, "MPI_THREAD_FUNNELED") == 0, "thread_level %s", v);
    MPI_Info_free(&got);
    MPI_Comm c2 = world_of(s2, "org.earlybird.test.sessions_world.2");
    rc = MPI_Finalize();
    CHECK(rc == MPI_SUCCESS, "MPI_Finalize with a session open: %d", rc);
    MPI_Finalized(&flag);
    CHECK(flag, "MPI_Finalized after MPI_Finalize");
    MPI_Initialized(&flag);
    CHECK(flag, "MPI_Initialized after MPI_Finalize");
    check_sum(c2, "the session's communicator after MPI_Finalize");
    MPI_Comm_free(&c2);
    rc = MPI_Session_finalize(&s2);
    CHECK(rc == MPI_SUCCESS, "the last MPI_Session_finalize: %d", rc);
    if (failures == 0) printf("sessions_world: ok %d\n", rank);
    return failures != 0;
}
