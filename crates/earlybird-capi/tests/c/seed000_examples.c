/* The examples of seed 000 (../shared/seeds/000_*.txt) as the seed writes them, with the
 * MPIX_ prefix for its proposed MPI_ names. Two places cannot compile as printed and read
 * as the seed's C bindings say: "MPI Bind channel(sreq1, &sreq2, sinfo, comm)" passes a
 * communicator the binding MPI_Bind_channel(Request_in, *Request_out, info) does not take
 * (it is dropped), and "MPI_Start(sreq2)" / "MPI_Wait(sreq2, ...)" take the request by
 * address, as MPI_Start and MPI_Wait do.
 *
 * Ranks pair up (0 with 1, 2 with 3, ...); an odd last rank only joins the collective.
 *  - Proposal 1: sreq1 = MPI_Send_init, rreq1 = MPI_Recv_init, bound into sreq2 and rreq2;
 *    "each start wait sequence must occur in lock step", the receiver's start before the
 *    sender's (ready property).
 *  - Proposal 3: the 5-slot circular buffer of 1024 doubles: one K-slack channel (K = 5) with
 *    ADDRESS_BASE_INCREMENT = 1024 instead of five channels, each start moving one slot.
 *  - Proposal 2: MPI_IBCAST -> MPI_BCAST_INIT (MPI 4's MPI_Bcast_init), started and waited.
 * Prints "seed000_examples: ok <rank>". */
#include <mpi.h>
#include <mpi-ext.h>
#define NAME "seed000_examples"
#include "check.h"

#define SLOTS 5
#define N 1024

int main(int argc, char **argv) {
    int size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm comm = MPI_COMM_WORLD;
    int source = rank - 1, dest = rank + 1, tag = 7;
    int sender = rank % 2 == 0 && dest < size, receiver = rank % 2 == 1;
    MPI_Info sinfo = MPI_INFO_NULL, rinfo = MPI_INFO_NULL;

    /* Proposal 1. */
    static double sbuf[N], rbuf[N];
    MPI_Request sreq1, rreq1, sreq2, rreq2;
    if (sender) {
        MPI_Send_init(sbuf, N, MPI_DOUBLE, dest, tag, comm, &sreq1);
        MPIX_Bind_channel(sreq1, &sreq2, sinfo);
        for (int t = 0; t < 20; t++) {
            for (int i = 0; i < N; i++) sbuf[i] = t * N + i;
            /* The receiver's start comes first: its empty message says so. */
            MPI_Recv(NULL, 0, MPI_BYTE, dest, 0, comm, MPI_STATUS_IGNORE);
            MPI_Start(&sreq2);
            MPI_Wait(&sreq2, MPI_STATUS_IGNORE);
        }
        MPIX_Unbind_channel(sreq2);
        /* "sreq1, rreq1 are unchanged": sreq1 still sends. */
        sbuf[0] = -1;
        MPI_Start(&sreq1);
        MPI_Wait(&sreq1, MPI_STATUS_IGNORE);
        MPI_Request_free(&sreq1);
    } else if (receiver) {
        MPI_Recv_init(rbuf, N, MPI_DOUBLE, source, tag, comm, &rreq1);
        MPIX_Bind_channel(rreq1, &rreq2, rinfo);
        for (int t = 0; t < 20; t++) {
            MPI_Start(&rreq2);
            MPI_Send(NULL, 0, MPI_BYTE, source, 0, comm);
            MPI_Wait(&rreq2, MPI_STATUS_IGNORE);
            int bad = 0;
            for (int i = 0; i < N; i++) bad += rbuf[i] != t * N + i;
            CHECK(bad == 0, "proposal 1, transfer %d: %d elements wrong", t, bad);
        }
        MPIX_Unbind_channel(rreq2);
        MPI_Start(&rreq1);
        MPI_Wait(&rreq1, MPI_STATUS_IGNORE);
        CHECK(rbuf[0] == -1, "rreq1 after the unbind: %g", rbuf[0]);
        MPI_Request_free(&rreq1);
    }

    /* Proposal 3: (SAddr + k*1024*sizeof(MPI_Double), MPI_Double, 1024) : Sreq[k], k = 0..4, 0... */
    static double SAddr[SLOTS * N], RAddr[SLOTS * N];
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, MPIX_ADDRESS_BASE_INCREMENT, "1024");
    if (sender || receiver) {
        MPI_Request in, ch;
        if (sender)
            MPI_Send_init(SAddr, SLOTS * N, MPI_DOUBLE, dest, tag, comm, &in);
        else
            MPI_Recv_init(RAddr, SLOTS * N, MPI_DOUBLE, source, tag, comm, &in);
        MPIX_Bind_slack_channel(in, &ch, SLOTS, info);
        /* "Sender may start as many as K times before first Wait", each start the next slot;
         * ready semantics: the receiver's K starts come first. */
        for (int lap = 0; lap < 3; lap++) {
            if (sender) {
                for (int i = 0; i < SLOTS * N; i++) SAddr[i] = lap * SLOTS * N + i;
                MPI_Recv(NULL, 0, MPI_BYTE, dest, 0, comm, MPI_STATUS_IGNORE);
                for (int k = 0; k < SLOTS; k++) MPI_Start(&ch);
                for (int k = 0; k < SLOTS; k++) MPI_Wait(&ch, MPI_STATUS_IGNORE);
            } else {
                for (int k = 0; k < SLOTS; k++) MPI_Start(&ch);
                MPI_Send(NULL, 0, MPI_BYTE, source, 0, comm);
                for (int k = 0; k < SLOTS; k++) {
                    MPI_Wait(&ch, MPI_STATUS_IGNORE);
                    int bad = 0;
                    for (int i = k * N; i < (k + 1) * N; i++) bad += RAddr[i] != lap * SLOTS * N + i;
                    CHECK(bad == 0, "proposal 3, lap %d slot %d: %d elements wrong", lap, k, bad);
                }
            }
        }
        MPIX_Unbind_channel(ch);
        MPI_Request_free(&in);
    }
    MPI_Info_free(&info);

    /* Proposal 2. */
    int value = 0;
    MPI_Request breq;
    MPI_Bcast_init(&value, 1, MPI_INT, 0, comm, MPI_INFO_NULL, &breq);
    for (int t = 0; t < 5; t++) {
        if (rank == 0) value = 100 + t;
        MPI_Start(&breq);
        MPI_Wait(&breq, MPI_STATUS_IGNORE);
        CHECK(value == 100 + t, "proposal 2, bcast %d: %d", t, value);
    }
    MPI_Request_free(&breq);

    MPI_Finalize();
    if (failures == 0) printf("%s: ok %d\n", NAME, rank);
    return failures != 0;
}
