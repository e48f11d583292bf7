/* Partitioned ping-pong (MPI 4.1 chapter 4), written against MPI's C interface so that one
 * binary runs on MPICH and, by LD_LIBRARY_PATH, on earlybird. Ranks 0 and 1 each keep a
 * partitioned send and a partitioned receive of PARTS partitions of SIZE bytes (made once),
 * and bounce the message: every round, rank 0 starts both, readies its partitions one by one
 * and waits; rank 1 waits for the message, then readies and sends it back. The figure is half
 * a round trip, as a ping-pong's; the same exchange with a persistent send and receive of the
 * whole message (MODE plain) shows what partitioning costs.
 *
 *   partitioned [-p PARTS] [-s SIZE] [-n ITERS] [-r REPS] [-m part|plain]
 *
 * Prints one line: RESULT bench=partitioned mode=... parts=... size=... median=US min=US max=US
 * (medians over REPS batches of ITERS rounds each). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    int parts = 8, reps = 15;
    long size = 8, iters = 2000;
    int plain = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-p")) parts = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-s")) size = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "-n")) iters = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "-r")) reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-m")) plain = !strcmp(argv[i + 1], "plain");
    }
    MPI_Init(&argc, &argv);
    int rank, nranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (nranks != 2) {
        if (rank == 0) fprintf(stderr, "partitioned: run on 2 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    int peer = 1 - rank;
    long total = (long)parts * size;
    char *out = malloc(total > 0 ? total : 1), *in = malloc(total > 0 ? total : 1);
    memset(out, rank + 1, total);
    MPI_Request send, recv;
    if (plain) {
        MPI_Send_init(out, (int)total, MPI_BYTE, peer, 1, MPI_COMM_WORLD, &send);
        MPI_Recv_init(in, (int)total, MPI_BYTE, peer, 1, MPI_COMM_WORLD, &recv);
    } else {
        MPI_Psend_init(out, parts, size, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_INFO_NULL, &send);
        MPI_Precv_init(in, parts, size, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_INFO_NULL, &recv);
    }
    double *res = malloc(sizeof(double) * reps);
    for (int r = -1; r < reps; r++) { /* batch -1 warms up */
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (long i = 0; i < iters; i++) {
            if (rank == 0) {
                MPI_Start(&recv);
                MPI_Start(&send);
                if (!plain)
                    for (int p = 0; p < parts; p++) MPI_Pready(p, send);
                MPI_Wait(&send, MPI_STATUS_IGNORE);
                MPI_Wait(&recv, MPI_STATUS_IGNORE);
            } else {
                MPI_Start(&recv);
                MPI_Wait(&recv, MPI_STATUS_IGNORE);
                MPI_Start(&send);
                if (!plain)
                    for (int p = 0; p < parts; p++) MPI_Pready(p, send);
                MPI_Wait(&send, MPI_STATUS_IGNORE);
            }
        }
        double us = (MPI_Wtime() - t0) * 1e6 / iters / 2;
        if (r >= 0) res[r] = us;
    }
    if (rank == 0) {
        int bad = 0;
        for (long k = 0; k < total; k++) bad |= in[k] != 2;
        if (bad) fprintf(stderr, "partitioned: wrong data received\n");
        qsort(res, reps, sizeof(double), cmp);
        printf("RESULT bench=partitioned mode=%s parts=%d size=%ld iters=%ld reps=%d metric=half_rtt_us median=%.4f min=%.4f max=%.4f\n",
               plain ? "plain" : "part", parts, size, iters, reps, res[reps / 2], res[0], res[reps - 1]);
    }
    MPI_Request_free(&send);
    MPI_Request_free(&recv);
    free(res);
    free(out);
    free(in);
    MPI_Finalize();
    return 0;
}
