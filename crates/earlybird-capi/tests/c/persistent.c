/* Persistent point-to-point: Send_init / Recv_init around a ring, started 10 times with
 * Startall and completed with Waitall (the handles stay valid and the send buffer is read
 * at each start), a synchronous persistent send completed by Test, then Request_free.
 * Prints "persistent: ok <rank>". */
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

    int bad = failures, anybad = 0;
    MPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Finalize();
    if (anybad == 0) printf("persistent: ok %d\n", rank);
    return anybad == 0 ? 0 : 1;
}
