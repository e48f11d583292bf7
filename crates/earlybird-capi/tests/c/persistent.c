/* Persistent point-to-point: Send_init / Recv_init around a ring, started 10 times with
 * Startall and completed with Waitall (the handles stay valid and the send buffer is read
 * at each start), a synchronous persistent send completed by Test, then Request_free; a
 * cancelled receive; Testany, Waitsome and Testsome over a window of requests. Prints
 * "persistent: ok <rank>". */
#include <mpi.h>
#define NAME "persistent"
#include "check.h"

int main(int argc, char **argv) {
    int size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    double out[4], in[4];
    MPI_Request reqs[2];
    MPI_Recv_init(in, 4, MPI_DOUBLE, left, 5, MPI_COMM_WORLD, &reqs[0]);
    MPI_Send_init(out, 4, MPI_DOUBLE, right, 5, MPI_COMM_WORLD, &reqs[1]);
    for (int round = 0; round < 10; round++) {
        for (int i = 0; i < 4; i++) out[i] = rank * 1000 + round * 10 + i;
        MPI_Startall(2, reqs);
        MPI_Status sts[2];
        MPI_Waitall(2, reqs, sts);
        CHECK(reqs[0] != MPI_REQUEST_NULL && reqs[1] != MPI_REQUEST_NULL, "round %d: persistent handles nulled", round);
        CHECK(sts[0].MPI_SOURCE == left && sts[0].MPI_TAG == 5, "round %d: status %d %d", round, sts[0].MPI_SOURCE, sts[0].MPI_TAG);
        for (int i = 0; i < 4; i++)
            CHECK(in[i] == left * 1000 + round * 10 + i, "round %d element %d: %g", round, i, in[i]);
    }
    MPI_Request_free(&reqs[0]);
    MPI_Request_free(&reqs[1]);
    CHECK(reqs[0] == MPI_REQUEST_NULL, "freed handle not nulled");

    int token = rank, got = -1, flag = 0;
    MPI_Request s, r;
    MPI_Ssend_init(&token, 1, MPI_INT, right, 6, MPI_COMM_WORLD, &s);
    MPI_Recv_init(&got, 1, MPI_INT, left, 6, MPI_COMM_WORLD, &r);
    MPI_Start(&r);
    MPI_Start(&s);
    while (!flag) MPI_Test(&s, &flag, MPI_STATUS_IGNORE);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    CHECK(got == left, "ssend_init token %d", got);
    /* Waiting on an inactive persistent request returns at once. */
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    MPI_Request_free(&s);
    MPI_Request_free(&r);

    /* Cancel a receive nobody matches; Testany, Testsome and Waitsome over a window. */
    int never;
    MPI_Request c;
    MPI_Irecv(&never, 1, MPI_INT, left, 999, MPI_COMM_WORLD, &c);
    MPI_Cancel(&c);
    MPI_Status cs;
    MPI_Wait(&c, &cs);
    int cancelled = -1;
    MPI_Test_cancelled(&cs, &cancelled);
    CHECK(cancelled == 1, "cancelled receive says %d", cancelled);
    int vals[4], ins[4] = {0}, idx = -1, outc = -1, inds[8];
    MPI_Request win[8];
    for (int k = 0; k < 4; k++) {
        vals[k] = rank * 10 + k;
        MPI_Irecv(&ins[k], 1, MPI_INT, left, 30 + k, MPI_COMM_WORLD, &win[k]);
    }
    for (int k = 0; k < 4; k++) MPI_Isend(&vals[k], 1, MPI_INT, right, 30 + k, MPI_COMM_WORLD, &win[4 + k]);
    int seen = 0, first = 1;
    while (seen < 8) {
        if (first) {
            flag = 0;
            MPI_Testany(8, win, &idx, &flag, MPI_STATUS_IGNORE);
            if (flag && idx != MPI_UNDEFINED) seen++, first = 0;
            continue;
        }
        MPI_Waitsome(8, win, &outc, inds, MPI_STATUSES_IGNORE);
        CHECK(outc != MPI_UNDEFINED && outc > 0, "waitsome gave %d", outc);
        for (int k = 0; k < outc; k++) CHECK(win[inds[k]] == MPI_REQUEST_NULL, "completed %d not nulled", inds[k]);
        seen += outc;
    }
    MPI_Testsome(8, win, &outc, inds, MPI_STATUSES_IGNORE);
    CHECK(outc == MPI_UNDEFINED, "testsome on null requests %d", outc);
    for (int k = 0; k < 4; k++) CHECK(ins[k] == left * 10 + k, "window %d: %d", k, ins[k]);

    int bad = failures, anybad = 0;
    MPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Finalize();
    if (anybad == 0) printf("persistent: ok %d\n", rank);
    return anybad == 0 ? 0 : 1;
}
