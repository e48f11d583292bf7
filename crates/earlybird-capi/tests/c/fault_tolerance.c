/* Fault tolerance's calls as MPICH exports them, in a library where a failed process ends
 * the job: MPIX_Comm_agree and MPIX_Comm_iagree give the AND of every rank's flag (a
 * nonblocking agreement posted before a barrier on one rank and after it on the others
 * completes), MPIX_Comm_shrink keeps every rank, the failed groups are empty. */
#include <mpi.h>
#define NAME "fault_tolerance"
#include "check.h"

int main(int argc, char **argv) {
    int size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);

    for (int i = 0; i < 5; i++) {
        int flag = i;
        MPIX_Comm_agree(comm, &flag);
        CHECK(flag == i, "agree of %d everywhere gave %d", i, flag);
    }
    int flag = ~(1 << rank);
    MPIX_Comm_agree(comm, &flag);
    CHECK(flag == ~((1 << size) - 1), "the AND of every rank's cleared bit: %#x", flag);

    for (int root = 0; root < size; root++) {
        MPI_Request req;
        MPI_Barrier(comm);
        if (rank == root) {
            flag = 0xb;
            MPIX_Comm_iagree(comm, &flag, &req);
            int done = 1;
            MPI_Test(&req, &done, MPI_STATUS_IGNORE);
            CHECK(size == 1 || !done, "iagree complete before the others agreed");
            MPI_Barrier(comm);
        } else {
            flag = 0xd;
            MPI_Barrier(comm);
            MPIX_Comm_iagree(comm, &flag, &req);
        }
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        CHECK(flag == (size == 1 ? 0xb : 0x9), "iagree with root %d gave %#x", root, flag);
    }

    MPI_Comm shrunk;
    int srank = -1, ssize = -1, cmp = -1;
    MPIX_Comm_shrink(comm, &shrunk);
    MPI_Comm_rank(shrunk, &srank);
    MPI_Comm_size(shrunk, &ssize);
    MPI_Comm_compare(comm, shrunk, &cmp);
    CHECK(srank == rank && ssize == size && cmp == MPI_CONGRUENT, "shrink: rank %d of %d, %d",
          srank, ssize, cmp);
    MPI_Comm_free(&shrunk);

    MPI_Group failed = MPI_GROUP_NULL, acked = MPI_GROUP_NULL;
    int nacked = -1;
    MPIX_Comm_get_failed(comm, &failed);
    MPIX_Comm_ack_failed(comm, size, &nacked);
    MPIX_Comm_failure_ack(comm);
    MPIX_Comm_failure_get_acked(comm, &acked);
    CHECK(failed == MPI_GROUP_EMPTY && acked == MPI_GROUP_EMPTY && nacked == 0,
          "failed groups %#x %#x, %d acknowledged", (unsigned)failed, (unsigned)acked, nacked);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int cls = -1, rc = MPIX_Comm_agree(MPI_COMM_NULL, &flag);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_COMM, "agree on MPI_COMM_NULL: class %d", cls);
    MPI_Comm_free(&comm);

    int bad = failures, anybad = 0;
    MPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Finalize();
    if (anybad == 0) printf("fault_tolerance: ok %d\n", rank);
    return anybad == 0 ? 0 : 1;
}
