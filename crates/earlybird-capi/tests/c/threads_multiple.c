/* MPI_THREAD_MULTIPLE: four threads of each process call MPI at once.
 *
 * - A blocking call blocks only its thread: a thread waits in MPI_Recv (then in MPI_Ssend,
 *   MPI_Probe, MPI_Waitany, MPI_Comm_dup, the communicator constructors, MPI_Win_fence,
 *   MPI_Win_lock, MPI_Barrier) for what another thread of the same process does only
 *   later. A library that kept its lock through a blocking call would hang here (the
 *   test's runner ends the job after its time limit).
 * - Each thread has a communicator of its own and runs, concurrently with the others,
 *   rounds of nonblocking ring exchanges, sendrecv, probe and mprobe with wildcards,
 *   waitany/waitsome, allreduce, bcast, reduce and barrier on it; every value is checked.
 * - All threads also message each other's ranks on MPI_COMM_WORLD at once, each with its own
 *   tag, and every message arrives in the order its thread sent it.
 * Prints "threads_multiple: ok <rank>". */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define NAME "threads_multiple"
#include "check.h"

enum { THREADS = 4, ROUNDS = 60, STREAM = 200, N = 16 };
static int size, left, right;
static MPI_Comm comms[THREADS];
static MPI_Win wins[2];
static int *bases[2];
static pthread_barrier_t all;

/* A thread's own communicator, concurrently with the others'. */
static void rounds_on_own_comm(int t) {
    MPI_Comm c = comms[t];
    for (int k = 0; k < ROUNDS; k++) {
        int out[N], in[N], back[N];
        for (int i = 0; i < N; i++) {
            out[i] = rank * 1000 + t * 100 + k + i;
            in[i] = back[i] = -1;
        }
        MPI_Request r[2];
        MPI_Irecv(in, N, MPI_INT, left, k, c, &r[0]);
        MPI_Isend(out, N, MPI_INT, right, k, c, &r[1]);
        if (k % 2) {
            MPI_Waitall(2, r, MPI_STATUSES_IGNORE);
        } else {
            int done = 0, idx[2], n;
            while (done < 2) {
                MPI_Waitsome(2, r, &n, idx, MPI_STATUSES_IGNORE);
                done += n;
            }
        }
        for (int i = 0; i < N; i++)
            CHECK(in[i] == left * 1000 + t * 100 + k + i, "thread %d round %d ring[%d]: %d", t,
                  k, i, in[i]);

        MPI_Status st;
        MPI_Sendrecv(out, N, MPI_INT, left, 7, back, N, MPI_INT, right, 7, c, &st);
        CHECK(back[0] == right * 1000 + t * 100 + k && st.MPI_SOURCE == right,
              "thread %d round %d sendrecv: %d from %d", t, k, back[0], st.MPI_SOURCE);

        /* Wildcards: probe, then receive what was probed; mprobe and mrecv. */
        MPI_Send(&k, 1, MPI_INT, right, 8, c);
        MPI_Probe(MPI_ANY_SOURCE, 8, c, &st);
        int got = -1;
        MPI_Recv(&got, 1, MPI_INT, st.MPI_SOURCE, 8, c, MPI_STATUS_IGNORE);
        CHECK(got == k && st.MPI_SOURCE == left, "thread %d round %d probe: %d from %d", t, k,
              got, st.MPI_SOURCE);
        MPI_Send(&k, 1, MPI_INT, right, 9, c);
        MPI_Message m;
        MPI_Mprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, c, &m, &st);
        got = -1;
        MPI_Mrecv(&got, 1, MPI_INT, &m, MPI_STATUS_IGNORE);
        CHECK(got == k && st.MPI_TAG == 9, "thread %d round %d mprobe: %d tag %d", t, k, got,
              st.MPI_TAG);

        int one = rank + t + k, sum = -1;
        MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, c);
        CHECK(sum == size * (size - 1) / 2 + size * (t + k), "thread %d round %d allreduce: %d",
              t, k, sum);
        int root = k % size, v = rank == root ? 31 * k + t : -1;
        MPI_Bcast(&v, 1, MPI_INT, root, c);
        CHECK(v == 31 * k + t, "thread %d round %d bcast: %d", t, k, v);
        int mx = -1;
        MPI_Reduce(&one, &mx, 1, MPI_INT, MPI_MAX, root, c);
        CHECK(rank != root || mx == size - 1 + t + k, "thread %d round %d reduce: %d", t, k, mx);
        MPI_Barrier(c);
    }
}

/* Every thread streams to the next rank on MPI_COMM_WORLD under its own tag, all at once;
 * each stream arrives in order. */
static void streams_on_world(int t) {
    MPI_Request r[STREAM];
    int seq[STREAM];
    for (int i = 0; i < STREAM; i++) {
        seq[i] = i;
        MPI_Isend(&seq[i], 1, MPI_INT, right, 100 + t, MPI_COMM_WORLD, &r[i]);
    }
    for (int i = 0; i < STREAM; i++) {
        int got = -1;
        MPI_Recv(&got, 1, MPI_INT, left, 100 + t, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        CHECK(got == i, "thread %d stream: message %d came as %d", t, i, got);
    }
    MPI_Waitall(STREAM, r, MPI_STATUSES_IGNORE);
}

/* Blocking calls that only another thread of this process can end: thread 0 blocks, thread
 * 1 acts a little later (the others pass). `pthread_barrier_wait` lines the pairs up. The
 * delay synchronises nothing the results depend on: it only makes it likely that thread 0
 * is already blocked when thread 1 calls, which is when a library that kept its lock
 * through a blocking call would hang. */
static void blocked_until_the_other_thread(int t) {
    const useconds_t later = 20000;
    int v = -1, x = 5;
    /* A receive whose message this process's other thread sends. */
    if (t == 0) {
        MPI_Recv(&v, 1, MPI_INT, left, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        CHECK(v == 5, "recv: %d", v);
    } else if (t == 1) {
        usleep(later);
        MPI_Send(&x, 1, MPI_INT, right, 1, MPI_COMM_WORLD);
    }
    pthread_barrier_wait(&all);
    /* A synchronous send whose receive this process's other thread posts. */
    if (t == 0) {
        MPI_Ssend(&x, 1, MPI_INT, right, 2, MPI_COMM_WORLD);
    } else if (t == 1) {
        usleep(later);
        MPI_Recv(&v, 1, MPI_INT, left, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        CHECK(v == 5, "ssend: %d", v);
    }
    pthread_barrier_wait(&all);
    /* A probe, and a waitany over a receive, ended by the other thread's send. */
    if (t == 0) {
        MPI_Status st;
        MPI_Probe(left, 3, MPI_COMM_WORLD, &st);
        MPI_Recv(&v, 1, MPI_INT, left, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Request r[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
        MPI_Irecv(&v, 1, MPI_INT, left, 4, MPI_COMM_WORLD, &r[1]);
        int idx = -1;
        MPI_Waitany(2, r, &idx, MPI_STATUS_IGNORE);
        CHECK(idx == 1 && v == 6, "waitany: index %d value %d", idx, v);
    } else if (t == 1) {
        usleep(later);
        MPI_Send(&x, 1, MPI_INT, right, 3, MPI_COMM_WORLD);
        usleep(later);
        x = 6;
        MPI_Send(&x, 1, MPI_INT, right, 4, MPI_COMM_WORLD);
    }
    pthread_barrier_wait(&all);
    /* Duplicates of two communicators, by two threads, started in opposite orders on
     * neighbouring ranks: each dup waits for the other process's thread that is behind the
     * other dup there. */
    if (t < 2) {
        if (rank % 2 != t) usleep(later);
        MPI_Comm d;
        int dr = -1, one = 1, sum = -1;
        MPI_Comm_dup(comms[t], &d);
        MPI_Comm_rank(d, &dr);
        CHECK(dr == rank, "dup by thread %d: rank %d", t, dr);
        MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, d);
        CHECK(sum == size, "allreduce on the dup of thread %d: %d", t, sum);
        MPI_Comm_free(&d);
    }
    pthread_barrier_wait(&all);
    /* Communicators made from two parents by two threads in opposite orders on neighbouring
     * ranks (split, create, create_group, a Cartesian grid): each call waits for the other
     * process's thread that is behind the other call there, and the two threads' context
     * agreements run at once on each process. An allreduce of values that differ by thread
     * on each new communicator shows that no two of them took one context. */
    if (t < 2) {
        if (rank % 2 != t) usleep(later);
        MPI_Comm made[4];
        MPI_Group g;
        int peers = (size + 1 - rank % 2) / 2, sr = -1;
        MPI_Comm_split(comms[t], rank % 2, -rank, &made[0]);
        MPI_Comm_rank(made[0], &sr);
        CHECK(sr == (size - 1 - rank) / 2, "split by thread %d: rank %d of %d", t, sr, peers);
        MPI_Comm_group(comms[t], &g);
        MPI_Comm_create(comms[t], g, &made[1]);
        MPI_Comm_create_group(comms[t], g, 10 + t, &made[2]);
        MPI_Group_free(&g);
        int dims[1] = {size}, periods[1] = {1};
        MPI_Cart_create(comms[t], 1, dims, periods, 0, &made[3]);
        for (int k = 0; k < 4; k++) {
            int mine = (t + 1) * 100 + k, sum = -1, n = -1;
            MPI_Comm_size(made[k], &n);
            CHECK(n == (k == 0 ? peers : size), "communicator %d of thread %d: size %d", k, t, n);
            MPI_Allreduce(&mine, &sum, 1, MPI_INT, MPI_SUM, made[k]);
            CHECK(sum == n * mine, "allreduce on communicator %d of thread %d: %d", k, t, sum);
            MPI_Comm_free(&made[k]);
        }
    }
    pthread_barrier_wait(&all);
    /* Windows made, then freed, by two threads in opposite orders on neighbouring ranks (the
     * three flavours of window over memory, and dynamic): each creation, and each free,
     * waits for the other process's thread that is behind the other call there. */
    if (t < 2) {
        if (rank % 2 != t) usleep(later);
        int *mem = NULL, own[2] = {0, 0};
        MPI_Win w[4];
        MPI_Win_allocate(sizeof(int), sizeof(int), MPI_INFO_NULL, comms[t], &mem, &w[0]);
        MPI_Win_create(own, sizeof own, sizeof(int), MPI_INFO_NULL, comms[t], &w[1]);
        MPI_Win_create_dynamic(MPI_INFO_NULL, comms[t], &w[2]);
        int *shared = NULL;
        MPI_Win_allocate_shared(sizeof(int), sizeof(int), MPI_INFO_NULL, comms[t], &shared, &w[3]);
        *mem = -1;
        int mine = (t + 1) * 100 + rank;
        MPI_Win_fence(0, w[0]);
        MPI_Put(&mine, 1, MPI_INT, right, 0, 1, MPI_INT, w[0]);
        MPI_Win_fence(0, w[0]);
        CHECK(*mem == (t + 1) * 100 + left, "put into the window of thread %d: %d", t, *mem);
        if (rank % 2 == t) usleep(later);
        for (int k = 0; k < 4; k++) MPI_Win_free(&w[k]);
        CHECK(w[0] == MPI_WIN_NULL && w[3] == MPI_WIN_NULL, "freed windows of thread %d", t);
    }
    pthread_barrier_wait(&all);
    /* Windows synchronized by two threads in opposite orders on neighbouring ranks: each
     * fence (then each lock of the neighbour's window) waits for the other process's
     * thread that is behind the other window's there. */
    if (t < 2) {
        if (rank % 2 != t) usleep(later);
        int mine = (t + 1) * 100 + rank, one = 1;
        MPI_Win_fence(0, wins[t]);
        MPI_Put(&mine, 1, MPI_INT, right, 0, 1, MPI_INT, wins[t]);
        MPI_Win_fence(0, wins[t]);
        CHECK(bases[t][0] == (t + 1) * 100 + left, "fenced put of thread %d: %d", t, bases[t][0]);
        MPI_Win_fence(MPI_MODE_NOSUCCEED, wins[t]);
        MPI_Barrier(comms[t]);
        MPI_Win_lock(MPI_LOCK_EXCLUSIVE, right, 0, wins[t]);
        MPI_Accumulate(&one, 1, MPI_INT, right, 0, 1, MPI_INT, MPI_SUM, wins[t]);
        MPI_Win_unlock(right, wins[t]);
        MPI_Barrier(comms[t]);
        MPI_Win_lock(MPI_LOCK_SHARED, rank, 0, wins[t]);
        int v = bases[t][0];
        MPI_Win_unlock(rank, wins[t]);
        CHECK(v == (t + 1) * 100 + left + 1, "locked accumulate of thread %d: %d", t, v);
    }
    pthread_barrier_wait(&all);
    /* A barrier on thread 0's communicator that rank r's thread 0 enters only after a
     * message from rank r-1's thread 1, which that thread sends while its own thread 0 is
     * already in the barrier. */
    if (t == 0) {
        if (rank > 0) {
            MPI_Recv(&v, 1, MPI_INT, rank - 1, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            CHECK(v == 6, "before the barrier: %d", v);
        }
        MPI_Barrier(comms[0]);
    } else if (t == 1 && rank < size - 1) {
        usleep(later);
        MPI_Send(&x, 1, MPI_INT, rank + 1, 5, MPI_COMM_WORLD);
    }
    pthread_barrier_wait(&all);
}

static void *thread_main(void *arg) {
    int t = (int)(long)arg;
    int flag = -1;
    MPI_Is_thread_main(&flag);
    CHECK(flag == (t == 0), "MPI_Is_thread_main in thread %d: %d", t, flag);
    blocked_until_the_other_thread(t);
    rounds_on_own_comm(t);
    pthread_barrier_wait(&all);
    streams_on_world(t);
    return NULL;
}

int main(int argc, char **argv) {
    int provided = -1, queried = -1;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    left = (rank + size - 1) % size;
    right = (rank + 1) % size;
    CHECK(provided == MPI_THREAD_MULTIPLE, "provided %d", provided);
    MPI_Query_thread(&queried);
    CHECK(queried == MPI_THREAD_MULTIPLE, "queried %d", queried);
    for (int t = 0; t < THREADS; t++) MPI_Comm_dup(MPI_COMM_WORLD, &comms[t]);
    for (int t = 0; t < 2; t++) {
        MPI_Win_allocate(sizeof(int), sizeof(int), MPI_INFO_NULL, comms[t], &bases[t], &wins[t]);
        bases[t][0] = -1;
    }

    pthread_barrier_init(&all, NULL, THREADS);
    pthread_t th[THREADS];
    for (int t = 1; t < THREADS; t++) pthread_create(&th[t], NULL, thread_main, (void *)(long)t);
    thread_main(0);
    for (int t = 1; t < THREADS; t++) pthread_join(th[t], NULL);
    pthread_barrier_destroy(&all);

    for (int t = 0; t < 2; t++) MPI_Win_free(&wins[t]);
    for (int t = 0; t < THREADS; t++) MPI_Comm_free(&comms[t]);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    if (failures == 0) printf("%s: ok %d\n", NAME, rank);
    return failures != 0;
}
