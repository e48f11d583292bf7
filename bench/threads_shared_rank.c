/* threads_shared_rank.c - the "2 threads sharing one rank" side of seed 003's comparison,
 * for MPICH and Open MPI (which have no endpoints; Debian's MPICH 4.0.2 has no
 * MPIX_Stream either): one process under MPI_THREAD_MULTIPLE, two threads each pinned to
 * its own CPU, talking through the process's one rank on a communicator of their own (a
 * dup of MPI_COMM_SELF), the tag saying which way a message goes.
 *
 *   ep_pingpong_shared_rank: 8-byte ping-pong between the threads, half round trip (us).
 *   ep_msgrate_shared_rank: thread 0 sends windows of 64 MPI_Isend of 8 bytes, thread 1
 *     posts 64 MPI_Irecv, Waitall, 4-byte ack back (as bench-ref's msgrate); Mmsg/s.
 *
 * Lines as bench-ref's: RESULT bench=... metric=... median=... (11 repeats after a warm-up).
 *   mpicc.mpich -O2 -pthread bench/threads_shared_rank.c -o tsr.mpich && ./tsr.mpich
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#ifdef OPEN_MPI
#define IMPL "openmpi"
#else
#define IMPL "mpich"
#endif

enum { REPS = 11, W = 64 };
static long PP_ITERS = 20000, MR_ITERS = 2000;
static MPI_Comm comm;
static pthread_barrier_t bar;
static double pp[REPS], mr[REPS];

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
static double median(double *v) {
    qsort(v, REPS, sizeof(double), cmp);
    return v[REPS / 2];
}

static void *side(void *arg) {
    int me = (int)(long)arg;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(me % sysconf(_SC_NPROCESSORS_ONLN), &set);
    pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
    char s[8] = {0}, r[8], ack[4] = {0};
    MPI_Request reqs[W];
    for (int rep = -1; rep < REPS; rep++) {
        long n = rep < 0 ? 1000 : PP_ITERS;
        pthread_barrier_wait(&bar);
        double t0 = MPI_Wtime();
        for (long i = 0; i < n; i++) {
            if (me == 0) {
                MPI_Send(s, 8, MPI_BYTE, 0, 1, comm);
                MPI_Recv(r, 8, MPI_BYTE, 0, 2, comm, MPI_STATUS_IGNORE);
            } else {
                MPI_Recv(r, 8, MPI_BYTE, 0, 1, comm, MPI_STATUS_IGNORE);
                MPI_Send(s, 8, MPI_BYTE, 0, 2, comm);
            }
        }
        if (rep >= 0 && me == 0) pp[rep] = (MPI_Wtime() - t0) / (2.0 * n) * 1e6;
    }
    for (int rep = -1; rep < REPS; rep++) {
        long n = rep < 0 ? 200 : MR_ITERS;
        pthread_barrier_wait(&bar);
        double t0 = MPI_Wtime();
        for (long i = 0; i < n; i++) {
            if (me == 0) {
                for (int w = 0; w < W; w++) MPI_Isend(s, 8, MPI_BYTE, 0, 100, comm, &reqs[w]);
                MPI_Waitall(W, reqs, MPI_STATUSES_IGNORE);
                MPI_Recv(ack, 4, MPI_BYTE, 0, 101, comm, MPI_STATUS_IGNORE);
            } else {
                for (int w = 0; w < W; w++) MPI_Irecv(r, 8, MPI_BYTE, 0, 100, comm, &reqs[w]);
                MPI_Waitall(W, reqs, MPI_STATUSES_IGNORE);
                MPI_Send(ack, 4, MPI_BYTE, 0, 101, comm);
            }
        }
        if (rep >= 0 && me == 0) mr[rep] = (double)W * n / (MPI_Wtime() - t0) / 1e6;
    }
    return NULL;
}

int main(int argc, char **argv) {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    if (argc > 1) PP_ITERS = MR_ITERS = atol(argv[1]); /* iterations per repeat */
    if (provided < MPI_THREAD_MULTIPLE) {
        fprintf(stderr, "MPI_THREAD_MULTIPLE not provided (%d)\n", provided);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Comm_dup(MPI_COMM_SELF, &comm);
    pthread_barrier_init(&bar, NULL, 2);
    pthread_t t;
    pthread_create(&t, NULL, side, (void *)1L);
    side((void *)0L);
    pthread_join(t, NULL);
    printf("RESULT bench=ep_pingpong_shared_rank impl=%s size=8 metric=us median=%.4f\n", IMPL, median(pp));
    printf("RESULT bench=ep_msgrate_shared_rank impl=%s size=8 metric=Mmsg_per_s median=%.4f\n", IMPL, median(mr));
    MPI_Comm_free(&comm);
    MPI_Finalize();
    return 0;
}
