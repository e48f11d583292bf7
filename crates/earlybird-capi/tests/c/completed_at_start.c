/* Requests of nonblocking sends and receives that complete at their start (a small send
 * whose message goes at once, a receive that matches a message already there): every call
 * that takes a request treats them as MPI says, whatever the library keeps for them. Wait,
 * test, the any/some/all forms, get_status, cancel, free, start (an error: not persistent),
 * statuses of receives, distinct handles, and a handle that names no request. Prints
 * "completed_at_start: ok <rank>". */
#include <mpi.h>
#define NAME "completed_at_start"
#include "check.h"

static void check_recv_status(const MPI_Status *st, int source, int tag, int n, const char *what) {
    int count = -1;
    MPI_Get_count(st, MPI_INT, &count);
    CHECK(st->MPI_SOURCE == source && st->MPI_TAG == tag && count == n,
          "%s: source %d tag %d count %d, expected %d %d %d", what, st->MPI_SOURCE, st->MPI_TAG,
          count, source, tag, n);
}

int main(int argc, char **argv) {
    int size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int left = (rank + size - 1) % size, right = (rank + 1) % size;
    MPI_Status st;
    int flag, idx;

    /* A send to oneself, then its receive: the message is there before the receive. */
    int v = 40 + rank, got = -1;
    MPI_Request s, r;
    MPI_Isend(&v, 1, MPI_INT, rank, 1, MPI_COMM_WORLD, &s);
    CHECK(MPI_Request_get_status(s, &flag, &st) == MPI_SUCCESS, "get_status of a send");
    MPI_Wait(&s, MPI_STATUS_IGNORE);
    CHECK(s == MPI_REQUEST_NULL, "wait leaves MPI_REQUEST_NULL");
    MPI_Irecv(&got, 1, MPI_INT, rank, 1, MPI_COMM_WORLD, &r);
    MPI_Request_get_status(r, &flag, &st);
    CHECK(flag && r != MPI_REQUEST_NULL, "get_status of a matched receive: flag %d", flag);
    check_recv_status(&st, rank, 1, 1, "get_status");
    MPI_Test(&r, &flag, &st);
    CHECK(flag && r == MPI_REQUEST_NULL && got == v, "test: flag %d got %d", flag, got);
    check_recv_status(&st, rank, 1, 1, "test");

    /* Distinct handles for requests alive together; a ring with waitall and its statuses. */
    int out[3] = {rank, rank * 2, rank * 3}, in[3] = {-1, -1, -1};
    MPI_Request reqs[5];
    MPI_Isend(&out[0], 1, MPI_INT, right, 2, MPI_COMM_WORLD, &reqs[0]);
    MPI_Isend(&out[1], 1, MPI_INT, right, 3, MPI_COMM_WORLD, &reqs[1]);
    reqs[2] = MPI_REQUEST_NULL;
    MPI_Irecv(&in[0], 1, MPI_INT, left, 2, MPI_COMM_WORLD, &reqs[3]);
    MPI_Irecv(&in[1], 1, MPI_INT, left, 3, MPI_COMM_WORLD, &reqs[4]);
    CHECK(reqs[0] != reqs[1] && reqs[3] != reqs[4], "requests alive together share a handle");
    MPI_Status sts[5];
    MPI_Waitall(5, reqs, sts);
    for (int i = 0; i < 5; i++) CHECK(reqs[i] == MPI_REQUEST_NULL, "waitall left request %d", i);
    check_recv_status(&sts[3], left, 2, 1, "waitall");
    check_recv_status(&sts[4], left, 3, 1, "waitall");
    CHECK(in[0] == left && in[1] == left * 2, "ring: %d %d", in[0], in[1]);

    /* Waitany and testsome over a mix of completed, null and pending requests. */
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Isend(&out[2], 1, MPI_INT, right, 4, MPI_COMM_WORLD, &reqs[0]);
    reqs[1] = MPI_REQUEST_NULL;
    MPI_Irecv(&in[2], 1, MPI_INT, left, 4, MPI_COMM_WORLD, &reqs[2]);
    int done = 0, seen_recv = 0;
    while (done < 2) {
        MPI_Waitany(3, reqs, &idx, &st);
        CHECK(idx == 0 || idx == 2, "waitany index %d", idx);
        if (idx == 2) {
            check_recv_status(&st, left, 4, 1, "waitany");
            seen_recv = 1;
        }
        done++;
    }
    CHECK(seen_recv && in[2] == left * 3, "waitany: receive %d value %d", seen_recv, in[2]);
    MPI_Waitany(3, reqs, &idx, &st);
    CHECK(idx == MPI_UNDEFINED, "waitany over nulls: %d", idx);
    MPI_Isend(&v, 1, MPI_INT, rank, 5, MPI_COMM_WORLD, &reqs[0]);
    int outcount = 0, indices[3];
    for (int spins = 0; spins < 1000000 && outcount == 0; spins++)
        MPI_Testsome(1, reqs, &outcount, indices, MPI_STATUSES_IGNORE);
    CHECK(outcount == 1 && indices[0] == 0 && reqs[0] == MPI_REQUEST_NULL, "testsome: %d", outcount);
    MPI_Recv(&got, 1, MPI_INT, rank, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);

    /* Cancel of a completed send has no effect; free of one lets its message arrive. */
    MPI_Isend(&v, 1, MPI_INT, rank, 6, MPI_COMM_WORLD, &s);
    MPI_Cancel(&s);
    MPI_Wait(&s, &st);
    int cancelled = -1;
    MPI_Test_cancelled(&st, &cancelled);
    got = -1;
    MPI_Recv(&got, 1, MPI_INT, rank, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    CHECK(cancelled == 0 && got == v, "cancelled %d got %d", cancelled, got);
    MPI_Isend(&v, 1, MPI_INT, rank, 7, MPI_COMM_WORLD, &s);
    MPI_Request_free(&s);
    CHECK(s == MPI_REQUEST_NULL, "free leaves MPI_REQUEST_NULL");
    got = -1;
    MPI_Recv(&got, 1, MPI_INT, rank, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    CHECK(got == v, "freed send delivered %d", got);

    /* Errors, returned: a start of a nonpersistent request, a handle that names none (an
     * error of no communicator's: MPI_COMM_SELF's handler, or MPI_COMM_WORLD's before MPI 4). */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    MPI_Isend(&v, 1, MPI_INT, rank, 8, MPI_COMM_WORLD, &s);
    int rc = MPI_Start(&s), cls = -1;
    MPI_Error_class(rc, &cls);
    CHECK(rc != MPI_SUCCESS && cls == MPI_ERR_REQUEST, "start of a nonpersistent request: class %d", cls);
    MPI_Wait(&s, MPI_STATUS_IGNORE);
    MPI_Recv(&got, 1, MPI_INT, rank, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Request bogus;
    MPI_Isend(&v, 1, MPI_INT, rank, 9, MPI_COMM_WORLD, &bogus);
    MPI_Request copy = bogus;
    MPI_Wait(&bogus, MPI_STATUS_IGNORE);
    rc = MPI_Wait(&copy, MPI_STATUS_IGNORE); /* the same request, collected already */
    MPI_Error_class(rc, &cls);
    CHECK(rc != MPI_SUCCESS && cls == MPI_ERR_REQUEST, "wait on a collected request: class %d", cls);
    MPI_Recv(&got, 1, MPI_INT, rank, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);

    MPI_Finalize();
    if (failures == 0) printf("%s: ok %d\n", NAME, rank);
    return failures != 0;
}
