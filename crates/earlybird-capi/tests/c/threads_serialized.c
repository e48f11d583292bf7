/* MPI_THREAD_SERIALIZED: two threads of each process call MPI, never at once, taking turns
 * under a mutex. Requests started by one thread complete in the other, a datatype and a
 * communicator made by one are used and freed by the other, and a ring exchange alternates
 * threads round by round; every received value is checked. Prints "threads_serialized: ok
 * <rank>". */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define NAME "threads_serialized"
#include "check.h"

enum { ROUNDS = 200, N = 8 };
static int size, left, right, turn = 0;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static MPI_Datatype every_other;
static MPI_Comm dup;
static MPI_Request reqs[2];
static int sendbuf[2 * N], recvbuf[2 * N];

/* Wait for this thread's turn (0: main, 1: the other), run `step`, hand over. */
static void take_turn(int me, void (*step)(int), int arg) {
    pthread_mutex_lock(&mu);
    while (turn != me) pthread_cond_wait(&cv, &mu);
    step(arg);
    turn = 1 - me;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}

/* Round k of the ring, by either thread: send k to the right, receive k from the left. */
static void ring_round(int k) {
    int out[2] = {rank, k}, in[2] = {-1, -1};
    MPI_Sendrecv(out, 2, MPI_INT, right, k, in, 2, MPI_INT, left, k, dup, MPI_STATUS_IGNORE);
    CHECK(in[0] == left && in[1] == k, "round %d: got (%d, %d)", k, in[0], in[1]);
}

/* The other thread's first turn: finish what the main thread started, and make a dup. */
static void finish_started(int unused) {
    (void)unused;
    int flag = -1;
    MPI_Is_thread_main(&flag);
    CHECK(flag == 0, "MPI_Is_thread_main in the second thread: %d", flag);
    MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE);
    for (int i = 0; i < N; i++)
        CHECK(recvbuf[2 * i] == left * 100 + i && recvbuf[2 * i + 1] == -7,
              "vector element %d: %d %d", i, recvbuf[2 * i], recvbuf[2 * i + 1]);
    MPI_Type_free(&every_other);
    int sum = 0, one = 1;
    MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    CHECK(sum == size, "allreduce in the second thread: %d", sum);
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
}

static void *second(void *arg) {
    (void)arg;
    take_turn(1, finish_started, 0);
    for (int k = 1; k < ROUNDS; k += 2) take_turn(1, ring_round, k);
    return NULL;
}

static void nothing(int unused) { (void)unused; }

int main(int argc, char **argv) {
    int provided = -1, queried = -1, flag = -1;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    left = (rank + size - 1) % size;
    right = (rank + 1) % size;
    CHECK(provided == MPI_THREAD_SERIALIZED, "provided %d", provided);
    MPI_Query_thread(&queried);
    CHECK(queried == MPI_THREAD_SERIALIZED, "queried %d", queried);
    MPI_Is_thread_main(&flag);
    CHECK(flag == 1, "MPI_Is_thread_main in main: %d", flag);

    /* Started here, completed by the other thread. */
    MPI_Type_vector(N, 1, 2, MPI_INT, &every_other);
    MPI_Type_commit(&every_other);
    for (int i = 0; i < 2 * N; i++) {
        sendbuf[i] = i % 2 ? -1 : rank * 100 + i / 2;
        recvbuf[i] = -7;
    }
    MPI_Irecv(recvbuf, 1, every_other, left, 5, MPI_COMM_WORLD, &reqs[0]);
    MPI_Isend(sendbuf, 1, every_other, right, 5, MPI_COMM_WORLD, &reqs[1]);

    pthread_t t;
    pthread_create(&t, NULL, second, NULL);
    take_turn(0, nothing, 0);
    for (int k = 0; k < ROUNDS; k += 2) take_turn(0, ring_round, k);
    pthread_join(t, NULL);

    MPI_Barrier(dup);
    MPI_Comm_free(&dup);
    CHECK(dup == MPI_COMM_NULL, "dup after free");
    MPI_Finalize();
    if (failures == 0) printf("%s: ok %d\n", NAME, rank);
    return failures != 0;
}
