/* The sessions model (MPI 4.1 §11.3) alone, without MPI_Init: a session at the thread level
 * its info asks for (MPI_Initialized false meanwhile), its info, its process sets (names,
 * lengths, a truncated name, their info, one out of range), communicators over mpi://WORLD
 * and mpi://self (names compared without regard to case) from their groups, collectives and
 * a ring on them; errors (a process set that does not exist, an invalid session handle) with
 * MPI_ERRORS_RETURN and through a handler of the program's, told the session's handle and
 * the code; buffered sends through the session's buffer; a second session beside; the last
 * MPI_Session_finalize ends MPI (MPI_Finalized stays false: the world model never began),
 * and a session cannot start it again.
 * Prints "sessions: ok <rank>". */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>
#define NAME "sessions"
#include "check.h"

static int handler_calls = 0, seen_code = 0;
static MPI_Session seen = MPI_SESSION_NULL;

static void on_error(MPI_Session *s, int *code, ...) {
    handler_calls++;
    seen = *s;
    seen_code = *code;
}

/* A communicator over process set `pset` of session `s`, made with string tag `tag`. */
static MPI_Comm comm_of(MPI_Session s, const char *pset, const char *tag) {
    MPI_Group g;
    MPI_Comm c = MPI_COMM_NULL;
    int rc = MPI_Group_from_session_pset(s, pset, &g);
    CHECK(rc == MPI_SUCCESS, "MPI_Group_from_session_pset(%s): %d", pset, rc);
    rc = MPI_Comm_create_from_group(g, tag, MPI_INFO_NULL, MPI_ERRORS_RETURN, &c);
    CHECK(rc == MPI_SUCCESS, "MPI_Comm_create_from_group(%s): %d", pset, rc);
    MPI_Group_free(&g);
    return c;
}

static int class_of(int code) {
    int c;
    MPI_Error_class(code, &c);
    return c;
}

int main(void) {
    int flag, n, len, size, rc;
    char v[64];
    MPI_Initialized(&flag);
    CHECK(!flag, "MPI_Initialized is true before anything");

    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "thread_level", "MPI_THREAD_SERIALIZED");
    MPI_Session s;
    rc = MPI_Session_init(info, MPI_ERRORS_RETURN, &s);
    CHECK(rc == MPI_SUCCESS && s != MPI_SESSION_NULL, "MPI_Session_init: %d", rc);
    MPI_Info_free(&info);
    MPI_Initialized(&flag);
    CHECK(!flag, "MPI_Initialized is true under the sessions model alone");

    MPI_Info got;
    MPI_Session_get_info(s, &got);
    MPI_Info_get(got, "thread_level", sizeof v - 1, v, &flag);
    CHECK(flag && strcmp(v, "MPI_THREAD_SERIALIZED") == 0, "thread_level %s", flag ? v : "(none)");
    MPI_Info_free(&got);

    /* Process sets. */
    MPI_Session_get_num_psets(s, MPI_INFO_NULL, &n);
    CHECK(n == 2, "%d process sets", n);
    int world_size = -1, found_world = 0, found_self = 0;
    for (int i = 0; i < n; i++) {
        len = 0;
        MPI_Session_get_nth_pset(s, MPI_INFO_NULL, i, &len, NULL);
        char *name = malloc(len > 0 ? len : 1);
        MPI_Session_get_nth_pset(s, MPI_INFO_NULL, i, &len, name);
        CHECK((int)strlen(name) + 1 == len, "process set %d: \"%s\" with length %d", i, name, len);
        MPI_Session_get_pset_info(s, name, &got);
        MPI_Info_get(got, "mpi_size", sizeof v - 1, v, &flag);
        CHECK(flag && atoi(v) > 0, "mpi_size of %s: %s", name, flag ? v : "(none)");
        if (strcmp(name, "mpi://WORLD") == 0) {
            found_world = 1;
            world_size = atoi(v);
        }
        if (strcmp(name, "mpi://SELF") == 0) {
            found_self = 1;
            CHECK(atoi(v) == 1, "mpi_size of mpi://SELF is %s", v);
        }
        MPI_Info_free(&got);
        free(name);
    }
    CHECK(found_world && found_self, "mpi://WORLD %d, mpi://SELF %d", found_world, found_self);
    char small[5];
    len = sizeof small;
    MPI_Session_get_nth_pset(s, MPI_INFO_NULL, 0, &len, small);
    CHECK(strcmp(small, "mpi:") == 0 && len == (int)strlen("mpi://WORLD") + 1,
          "a name into 5 chars: \"%s\", length %d", small, len);
    rc = MPI_Session_get_nth_pset(s, MPI_INFO_NULL, 2, &len, small);
    CHECK(class_of(rc) == MPI_ERR_ARG, "process set 2 of 2: class %d", class_of(rc));

    /* Communicators over the process sets. */
    MPI_Comm c = comm_of(s, "mpi://WORLD", "org.earlybird.test.sessions");
    MPI_Comm_rank(c, &rank);
    MPI_Comm_size(c, &size);
    CHECK(size == world_size, "size %d, mpi_size %d", size, world_size);
    int sum = 0;
    MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, c);
    CHECK(sum == size * (size - 1) / 2, "allreduce: %d", sum);
    int right = (rank + 1) % size, left = (rank + size - 1) % size, in = -1;
    MPI_Sendrecv(&rank, 1, MPI_INT, right, 1, &in, 1, MPI_INT, left, 1, c, MPI_STATUS_IGNORE);
    CHECK(in == left, "ring: %d from %d", in, left);

    MPI_Comm me = comm_of(s, "MPI://self", "org.earlybird.test.sessions.self");
    int mine = 7 + rank, back = -1;
    MPI_Comm_size(me, &n);
    CHECK(n == 1, "size of the SELF communicator %d", n);
    MPI_Sendrecv(&mine, 1, MPI_INT, 0, 2, &back, 1, MPI_INT, 0, 2, me, MPI_STATUS_IGNORE);
    CHECK(back == mine, "self: %d", back);

    /* Errors. */
    MPI_Group g;
    rc = MPI_Group_from_session_pset(s, "mpi://nowhere", &g);
    CHECK(class_of(rc) == MPI_ERR_ARG, "an unknown process set: class %d", class_of(rc));
    MPI_Errhandler eh, eh_back;
    MPI_Session_create_errhandler(on_error, &eh);
    MPI_Session_set_errhandler(s, eh);
    MPI_Session_get_errhandler(s, &eh_back);
    CHECK(eh_back == eh, "MPI_Session_get_errhandler");
    rc = MPI_Session_get_pset_info(s, "mpi://none", &got);
    CHECK(handler_calls == 1 && seen == s && seen_code == rc && class_of(rc) == MPI_ERR_ARG,
          "the handler: %d calls, session %s, code %d against %d", handler_calls,
          seen == s ? "right" : "wrong", seen_code, rc);
    rc = MPI_Session_call_errhandler(s, MPI_ERR_OTHER);
    CHECK(rc == MPI_SUCCESS && handler_calls == 2 && class_of(seen_code) == MPI_ERR_OTHER,
          "MPI_Session_call_errhandler: %d, %d calls", rc, handler_calls);
    MPI_Session_set_errhandler(s, MPI_ERRORS_RETURN);
    MPI_Errhandler_free(&eh);
    CHECK(eh == MPI_ERRHANDLER_NULL, "MPI_Errhandler_free left the handle");

#if MPI_VERSION > 4 || (MPI_VERSION == 4 && MPI_SUBVERSION >= 1)
    /* Buffered sends through the session's buffer (MPI 4.1: not in MPICH 4.0's mpi.h). */
    int bytes = 4 * (MPI_BSEND_OVERHEAD + (int)sizeof(int));
    char *buf = malloc(bytes);
    rc = MPI_Session_attach_buffer(s, buf, bytes);
    CHECK(rc == MPI_SUCCESS, "MPI_Session_attach_buffer: %d", rc);
    rc = MPI_Session_attach_buffer(s, buf, bytes);
    CHECK(class_of(rc) == MPI_ERR_BUFFER, "a second attach: class %d", class_of(rc));
    for (int k = 0; k < 3; k++) {
        int x = 100 * rank + k;
        MPI_Bsend(&x, 1, MPI_INT, right, 3, c);
    }
    MPI_Session_flush_buffer(s);
    for (int k = 0; k < 3; k++) {
        MPI_Recv(&in, 1, MPI_INT, left, 3, c, MPI_STATUS_IGNORE);
        CHECK(in == 100 * left + k, "buffered send %d: %d", k, in);
    }
    void *was;
    int was_size;
    rc = MPI_Session_detach_buffer(s, &was, &was_size);
    CHECK(rc == MPI_SUCCESS && was == buf && was_size == bytes, "MPI_Session_detach_buffer: %d", rc);
    free(buf);
#endif

    /* A second session beside the first: the library's level, its own handle. */
    MPI_Session s2;
    rc = MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_RETURN, &s2);
    CHECK(rc == MPI_SUCCESS && s2 != s, "a second MPI_Session_init: %d", rc);
    MPI_Session_get_info(s2, &got);
    MPI_Info_get(got, "thread_level", sizeof v - 1, v, &flag);
    CHECK(flag && strcmp(v, "MPI_THREAD_SERIALIZED") == 0, "second session's thread_level %s", v);
    MPI_Info_free(&got);
    MPI_Session_finalize(&s2);
    CHECK(s2 == MPI_SESSION_NULL, "MPI_Session_finalize left the handle");
    rc = MPI_Session_get_num_psets(s2, MPI_INFO_NULL, &n);
    CHECK(class_of(rc) == MPI_ERR_SESSION, "MPI_SESSION_NULL: class %d", class_of(rc));

    MPI_Comm_free(&me);
    MPI_Comm_free(&c);
    rc = MPI_Session_finalize(&s);
    CHECK(rc == MPI_SUCCESS && s == MPI_SESSION_NULL, "MPI_Session_finalize: %d", rc);
    MPI_Finalized(&flag);
    CHECK(!flag, "MPI_Finalized is true though MPI_Init was never called");
    rc = MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_RETURN, &s);
    CHECK(rc != MPI_SUCCESS, "a session after MPI ended");
    if (failures == 0) printf("sessions: ok %d\n", rank);
    return failures != 0;
}
