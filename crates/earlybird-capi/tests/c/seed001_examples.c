/* The three examples of seed 001 (../shared/seeds/001_*.txt, section 1.2.4) as the seed writes
 * them, with the MPIX_ prefix for its proposed MPI_ names and MPIX_Sync for MPI_Sync, each
 * driving a Jacobi relaxation on a periodic 2-D grid of ranks (four neighbours), and each
 * grid compared bit for bit with the same relaxation whose halos travel by MPI_Sendrecv.
 *
 * What the seed's text needs to compile and to be a correct program, all in example C:
 *  - it declares to_halos_free twice and to_halos_updated never: the second is
 *    to_halos_updated;
 *  - "to_neighbor[i]" is toneighbor[i];
 *  - MPI_Start(dest_halos_free_req) and MPI_Wait(dest_halos_free_req) take the request by
 *    address (and MPI_Wait a status), as MPI_Start and MPI_Wait do;
 *  - free_req is started every iteration but never completed. A sync request signals when a
 *    wait or test completes it (section 1.2.3), and starting an active request is erroneous,
 *    so the program completes free_req (MPI_Waitall right after MPI_Startall);
 *  - the loop lacks its closing brace.
 * update(A) is a Jacobi step of the interior; converged(A) is "ITERS steps done";
 * frombuf[i] / fromtype[i] are the boundary row or column sent to neighbour i and
 * todisp[i] / totype[i] where it lands in that neighbour's halo.
 *
 * Also: MPIX_HANDLE_SYNC by MPI_Allgather, and what may not carry it (a reduction, a derived
 * datatype), MPIX_ERR_WIN_COUNTER, and MPIX_Win_change_comm to a larger and a smaller
 * communicator. Prints "seed001_examples: ok <rank>". */
#include <mpi.h>
#include <mpi-ext.h>
#include <stdlib.h>
#include <string.h>
#define NAME "seed001_examples"
#include "check.h"

#define N 12 /* interior points per side of a rank's block */
#define W (N + 2)
#define ITERS 40
#define NUMBER_OF_NEIGHBOURS 4
#define SYNCTAG 77
#define AT(a, i, j) ((a)[(i) * W + (j)])

static double *A;     /* the window: the block with its halos */
static double Anew[W * W];
static int iteration;
static int toneighbor[NUMBER_OF_NEIGHBOURS];
static MPI_Datatype fromtype[NUMBER_OF_NEIGHBOURS], totype[NUMBER_OF_NEIGHBOURS];
static double *frombuf[NUMBER_OF_NEIGHBOURS];
static MPI_Aint todisp[NUMBER_OF_NEIGHBOURS];

static void init_block(double *a, int cx, int cy) {
    for (int i = 0; i < W; i++)
        for (int j = 0; j < W; j++)
            AT(a, i, j) = (i == 0 || j == 0 || i == W - 1 || j == W - 1)
                              ? -1.0
                              : (double)((cx * N + i) * 7919 % 101) + 0.25 * ((cy * N + j) % 13);
}

static void update(double *a) {
    for (int i = 1; i <= N; i++)
        for (int j = 1; j <= N; j++)
            AT(Anew, i, j) = 0.25 * (AT(a, i - 1, j) + AT(a, i + 1, j) + AT(a, i, j - 1) + AT(a, i, j + 1));
    for (int i = 1; i <= N; i++)
        memcpy(&AT(a, i, 1), &AT(Anew, i, 1), N * sizeof(double));
    iteration++;
}

static int converged(double *a) {
    (void)a;
    return iteration >= ITERS;
}

/* Neighbour i: 0 north, 1 south, 2 west, 3 east. What I send it is my boundary next to it;
 * where it lands is its halo on my side. */
static void neighbours(MPI_Comm cart, double *a) {
    MPI_Datatype row, col;
    MPI_Type_contiguous(N, MPI_DOUBLE, &row);
    MPI_Type_vector(N, 1, W, MPI_DOUBLE, &col);
    MPI_Type_commit(&row);
    MPI_Type_commit(&col);
    MPI_Cart_shift(cart, 0, 1, &toneighbor[0], &toneighbor[1]);
    MPI_Cart_shift(cart, 1, 1, &toneighbor[2], &toneighbor[3]);
    frombuf[0] = &AT(a, 1, 1);     todisp[0] = (N + 1) * W + 1; fromtype[0] = totype[0] = row;
    frombuf[1] = &AT(a, N, 1);     todisp[1] = 1;               fromtype[1] = totype[1] = row;
    frombuf[2] = &AT(a, 1, 1);     todisp[2] = W + N + 1;       fromtype[2] = totype[2] = col;
    frombuf[3] = &AT(a, 1, N);     todisp[3] = W;               fromtype[3] = totype[3] = col;
}

/* The reference: the same relaxation, halos by MPI_Sendrecv. */
static void reference(MPI_Comm cart, double *b) {
    iteration = 0;
    while (!converged(b)) {
        update(b);
        for (int i = 0; i < NUMBER_OF_NEIGHBOURS; i++) {
            /* My boundary goes to neighbour i, into its halo at todisp[i]; the same place
             * of mine is filled by the neighbour on the other side (i ^ 1). */
            MPI_Sendrecv(b + (frombuf[i] - A), 1, fromtype[i], toneighbor[i], 5,
                         b + todisp[i], 1, totype[i], toneighbor[i ^ 1], 5, cart,
                         MPI_STATUS_IGNORE);
        }
    }
}

static void example_a(MPI_Win win) {
    int i;
    MPIX_Sync my_counters[1]; /* local counters */
    MPIX_Sync my_halos_updated;
    MPIX_Sync to_halos_updated[NUMBER_OF_NEIGHBOURS]; /* remote counters */
    MPI_Request send_req[NUMBER_OF_NEIGHBOURS], recv_req[NUMBER_OF_NEIGHBOURS];
    MPI_Request put_req[NUMBER_OF_NEIGHBOURS];
    MPI_Request my_halos_updated_req;

    MPIX_Win_alloc_sync_objects(1, my_counters, win, MPI_INFO_NULL);
    my_halos_updated = my_counters[0];
    for (i = 0; i < NUMBER_OF_NEIGHBOURS; i++) {
        MPI_Irecv(&to_halos_updated[i], 1, MPIX_HANDLE_SYNC, toneighbor[i], 1,
                  MPI_COMM_WORLD, &recv_req[i]);
        MPI_Isend(&my_halos_updated, 1, MPIX_HANDLE_SYNC, toneighbor[i], 1,
                  MPI_COMM_WORLD, &send_req[i]);
    }
    MPI_Waitall(NUMBER_OF_NEIGHBOURS, recv_req, MPI_STATUSES_IGNORE);
    MPI_Waitall(NUMBER_OF_NEIGHBOURS, send_req, MPI_STATUSES_IGNORE);
    MPIX_Win_sync_object_init(my_halos_updated, NUMBER_OF_NEIGHBOURS,
                              win, MPI_INFO_NULL, &my_halos_updated_req);
    for (i = 0; i < NUMBER_OF_NEIGHBOURS; i++) {
        MPIX_Win_sync_ops_init(toneighbor[i], MPIX_MODE_WIN_PUT, to_halos_updated[i],
                               win, MPI_INFO_NULL, &put_req[i]);
    }
    while (!converged(A)) {
        MPI_Startall(NUMBER_OF_NEIGHBOURS, put_req);
        MPI_Start(&my_halos_updated_req);
        update(A);
        /* Signal that my halo regions are free to be updated by a simple barrier. */
        MPI_Barrier(MPI_COMM_WORLD);
        /* Update halo regions */
        for (i = 0; i < NUMBER_OF_NEIGHBOURS; i++) {
            MPI_Put(frombuf[i], 1, fromtype[i], toneighbor[i],
                    todisp[i], 1, totype[i], win);
        }
        MPI_Waitall(NUMBER_OF_NEIGHBOURS, put_req, MPI_STATUSES_IGNORE);
        /* Wait that my halo regions are updated */
        MPI_Wait(&my_halos_updated_req, MPI_STATUS_IGNORE);
    }
    MPIX_Win_free_sync_objects(1, my_counters, win);
    CHECK(MPIX_SYNC_IS_NULL(my_counters[0]), "example A: the freed counter is MPIX_SYNC_NULL");
    for (i = 0; i < NUMBER_OF_NEIGHBOURS; i++) MPI_Request_free(&put_req[i]);
    MPI_Request_free(&my_halos_updated_req);
}

static void example_b(MPI_Win win) {
    int i, index;
    int dummy_buf[1];
    MPIX_Sync my_counters[1]; /* local counters */
    MPIX_Sync my_halos_updated;
    MPIX_Sync to_halos_updated[NUMBER_OF_NEIGHBOURS]; /* remote counters */
    MPI_Request send_req[NUMBER_OF_NEIGHBOURS], recv_req[NUMBER_OF_NEIGHBOURS];
    MPI_Request put_req[NUMBER_OF_NEIGHBOURS];
    MPI_Request my_halos_updated_req;

    MPIX_Win_alloc_sync_objects(1, my_counters, win, MPI_INFO_NULL);
    my_halos_updated = my_counters[0];
    for (i = 0; i < NUMBER_OF_NEIGHBOURS; i++) {
        MPI_Irecv(&to_halos_updated[i], 1, MPIX_HANDLE_SYNC, toneighbor[i], 1,
                  MPI_COMM_WORLD, &recv_req[i]);
        MPI_Isend(&my_halos_updated, 1, MPIX_HANDLE_SYNC, toneighbor[i], 1,
                  MPI_COMM_WORLD, &send_req[i]);
    }
    MPI_Waitall(NUMBER_OF_NEIGHBOURS, recv_req, MPI_STATUSES_IGNORE);
    MPI_Waitall(NUMBER_OF_NEIGHBOURS, send_req, MPI_STATUSES_IGNORE);
    MPIX_Win_sync_object_init(my_halos_updated, NUMBER_OF_NEIGHBOURS,
                              win, MPI_INFO_NULL, &my_halos_updated_req);
    for (i = 0; i < NUMBER_OF_NEIGHBOURS; i++) {
        MPIX_Win_sync_ops_init(toneighbor[i], MPIX_MODE_WIN_PUT, to_halos_updated[i],
                               win, MPI_INFO_NULL, &put_req[i]);
    }
    while (!converged(A)) {
        MPI_Startall(NUMBER_OF_NEIGHBOURS, put_req);
        MPI_Start(&my_halos_updated_req);
        update(A);
        /* Signal that my halo regions are free to be updated by a dummy message with tag
         * SYNCTAG. */
        for (i = 0; i < NUMBER_OF_NEIGHBOURS; i++) {
            MPI_Irecv(dummy_buf, 0, MPI_INT, toneighbor[i], SYNCTAG,
                      MPI_COMM_WORLD, &recv_req[i]);
            MPI_Isend(dummy_buf, 0, MPI_INT, toneighbor[i], SYNCTAG,
                      MPI_COMM_WORLD, &send_req[i]);
        }
        /* Wait that halo regions of neighbours become free to be updated by actual process
         * and update halo regions */
        for (i = 0; i < NUMBER_OF_NEIGHBOURS; i++) {
            MPI_Waitany(NUMBER_OF_NEIGHBOURS, recv_req, &index, MPI_STATUS_IGNORE);
            MPI_Put(frombuf[index], 1, fromtype[index], toneighbor[index],
                    todisp[index], 1, totype[index], win);
        }
        MPI_Waitall(NUMBER_OF_NEIGHBOURS, put_req, MPI_STATUSES_IGNORE);
        MPI_Waitall(NUMBER_OF_NEIGHBOURS, send_req, MPI_STATUSES_IGNORE);
        /* Wait that my halo regions are updated */
        MPI_Wait(&my_halos_updated_req, MPI_STATUS_IGNORE);
    }
    MPIX_Win_free_sync_objects(1, my_counters, win);
    for (i = 0; i < NUMBER_OF_NEIGHBOURS; i++) MPI_Request_free(&put_req[i]);
    MPI_Request_free(&my_halos_updated_req);
}

static void example_c(MPI_Win win) {
    int i;
    MPIX_Sync my_counters[2];
    MPIX_Sync my_halos_updated, dest_halos_free;
    MPIX_Sync to_halos_free[NUMBER_OF_NEIGHBOURS];
    MPIX_Sync to_halos_updated[NUMBER_OF_NEIGHBOURS];
    MPI_Request send_req[2 * NUMBER_OF_NEIGHBOURS], recv_req[2 * NUMBER_OF_NEIGHBOURS];
    MPI_Request put_req[NUMBER_OF_NEIGHBOURS], free_req[NUMBER_OF_NEIGHBOURS];
    MPI_Request my_halos_updated_req, dest_halos_free_req;

    MPIX_Win_alloc_sync_objects(2, my_counters, win, MPI_INFO_NULL);
    my_halos_updated = my_counters[0];
    dest_halos_free = my_counters[1];
    for (i = 0; i < NUMBER_OF_NEIGHBOURS; i++) {
        MPI_Irecv(&to_halos_updated[i], 1, MPIX_HANDLE_SYNC, toneighbor[i], 1,
                  MPI_COMM_WORLD, &recv_req[i]);
        MPI_Isend(&my_halos_updated, 1, MPIX_HANDLE_SYNC, toneighbor[i], 1,
                  MPI_COMM_WORLD, &send_req[i]);
        MPI_Irecv(&to_halos_free[i], 1, MPIX_HANDLE_SYNC, toneighbor[i], 1,
                  MPI_COMM_WORLD, &recv_req[NUMBER_OF_NEIGHBOURS + i]);
        MPI_Isend(&dest_halos_free, 1, MPIX_HANDLE_SYNC, toneighbor[i], 1,
                  MPI_COMM_WORLD, &send_req[NUMBER_OF_NEIGHBOURS + i]);
    }
    MPI_Waitall(2 * NUMBER_OF_NEIGHBOURS, recv_req, MPI_STATUSES_IGNORE);
    MPI_Waitall(2 * NUMBER_OF_NEIGHBOURS, send_req, MPI_STATUSES_IGNORE);
    MPIX_Win_sync_object_init(my_halos_updated, NUMBER_OF_NEIGHBOURS, win,
                              MPI_INFO_NULL, &my_halos_updated_req);
    MPIX_Win_sync_object_init(dest_halos_free, NUMBER_OF_NEIGHBOURS, win,
                              MPI_INFO_NULL, &dest_halos_free_req);
    for (i = 0; i < NUMBER_OF_NEIGHBOURS; i++) {
        MPIX_Win_sync_ops_init(toneighbor[i], MPIX_MODE_WIN_PUT, to_halos_updated[i],
                               win, MPI_INFO_NULL, &put_req[i]);
        MPIX_Win_sync_ops_init(toneighbor[i], 0, to_halos_free[i],
                               win, MPI_INFO_NULL, &free_req[i]);
    }
    while (!converged(A)) {
        MPI_Startall(NUMBER_OF_NEIGHBOURS, put_req);
        MPI_Start(&my_halos_updated_req);
        MPI_Start(&dest_halos_free_req);
        update(A);
        /* Signal that my halo regions are free to be updated. */
        MPI_Startall(NUMBER_OF_NEIGHBOURS, free_req);
        MPI_Waitall(NUMBER_OF_NEIGHBOURS, free_req, MPI_STATUSES_IGNORE);
        /* Wait that halo regions of neighbours become free to be updated by actual process
         * and update halo regions */
        MPI_Wait(&dest_halos_free_req, MPI_STATUS_IGNORE);
        for (i = 0; i < NUMBER_OF_NEIGHBOURS; i++) {
            MPI_Put(frombuf[i], 1, fromtype[i], toneighbor[i],
                    todisp[i], 1, totype[i], win);
        }
        MPI_Waitall(NUMBER_OF_NEIGHBOURS, put_req, MPI_STATUSES_IGNORE);
        /* Wait that my halo regions are updated */
        MPI_Wait(&my_halos_updated_req, MPI_STATUS_IGNORE);
    }
    MPIX_Win_free_sync_objects(2, my_counters, win);
    for (i = 0; i < NUMBER_OF_NEIGHBOURS; i++) {
        MPI_Request_free(&put_req[i]);
        MPI_Request_free(&free_req[i]);
    }
    MPI_Request_free(&my_halos_updated_req);
    MPI_Request_free(&dest_halos_free_req);
}

/* The handle's own rules, and a counter driven below zero. */
static void handle_rules(MPI_Win win, int size) {
    MPIX_Sync mine, *all = malloc(sizeof(MPIX_Sync) * size), out;
    int err, cls;
    MPI_Datatype bad;
    MPI_Request obj, ops;
    MPIX_Win_alloc_sync_objects(1, &mine, win, MPI_INFO_NULL);
    CHECK(!MPIX_SYNC_IS_NULL(mine), "a counter is not MPIX_SYNC_NULL");
    MPI_Allgather(&mine, 1, MPIX_HANDLE_SYNC, all, 1, MPIX_HANDLE_SYNC, MPI_COMM_WORLD);
    CHECK(memcmp(&all[rank], &mine, sizeof mine) == 0, "allgather gives back my counter");
    int tsize = 0;
    MPI_Type_size(MPIX_HANDLE_SYNC, &tsize);
    CHECK(tsize == 16, "MPIX_HANDLE_SYNC is 16 bytes (%d)", tsize);
    err = MPI_Allreduce(&mine, &out, 1, MPIX_HANDLE_SYNC, MPI_MAX, MPI_COMM_WORLD);
    MPI_Error_class(err, &cls);
    CHECK(cls == MPI_ERR_TYPE, "a reduction of MPIX_HANDLE_SYNC is MPI_ERR_TYPE (%d)", cls);
    err = MPI_Type_contiguous(2, MPIX_HANDLE_SYNC, &bad);
    MPI_Error_class(err, &cls);
    CHECK(cls == MPI_ERR_TYPE, "a derived type of MPIX_HANDLE_SYNC is MPI_ERR_TYPE (%d)", cls);
    /* Signal my own counter twice against a count of 1 started after them: -1. */
    MPIX_Win_sync_object_init(mine, 1, win, MPI_INFO_NULL, &obj);
    MPIX_Win_sync_ops_init(rank, 0, mine, win, MPI_INFO_NULL, &ops);
    for (int k = 0; k < 2; k++) {
        MPI_Start(&ops);
        MPI_Wait(&ops, MPI_STATUS_IGNORE);
    }
    MPI_Start(&obj);
    MPI_Start(&ops);
    MPI_Wait(&ops, MPI_STATUS_IGNORE);
    err = MPI_Wait(&obj, MPI_STATUS_IGNORE);
    MPI_Error_class(err, &cls);
    CHECK(cls == MPIX_ERR_WIN_COUNTER, "a counter below zero is MPIX_ERR_WIN_COUNTER (%d)", cls);
    char msg[MPI_MAX_ERROR_STRING];
    int len;
    MPI_Error_string(err, msg, &len);
    CHECK(strstr(msg, "below zero") != NULL, "the message says so: %s", msg);
    err = MPIX_Win_sync_ops_init(rank, 0, MPIX_SYNC_NULL, win, MPI_INFO_NULL, &ops);
    MPI_Error_class(err, &cls);
    CHECK(cls == MPI_ERR_ARG, "MPIX_SYNC_NULL is MPI_ERR_ARG (%d)", cls);
    MPI_Request_free(&obj);
    MPI_Request_free(&ops);
    MPIX_Win_free_sync_objects(1, &mine, win);
    /* An array of MPIX_Sync at C's 4-byte alignment (after an int): allocated and freed. */
    struct {
        int n;
        MPIX_Sync s[2];
    } packed;
    err = MPIX_Win_alloc_sync_objects(2, packed.s, win, MPI_INFO_NULL);
    CHECK(err == MPI_SUCCESS && !MPIX_SYNC_IS_NULL(packed.s[0]) && !MPIX_SYNC_IS_NULL(packed.s[1]),
          "counters into a 4-aligned array (%d)", err);
    err = MPIX_Win_free_sync_objects(2, packed.s, win);
    CHECK(err == MPI_SUCCESS && MPIX_SYNC_IS_NULL(packed.s[0]) && MPIX_SYNC_IS_NULL(packed.s[1]),
          "counters freed from a 4-aligned array (%d)", err);
    free(all);
}

/* MPIX_Win_change_comm: a window of every rank but the last grows to MPI_COMM_WORLD (the
 * last rank joins with MPI_WIN_NULL) and shrinks again (rank 1 leaves with MPI_COMM_NULL);
 * rank 0's counter, and the reference every rank received before, stay valid, and so does
 * the members' memory (read through MPI_WIN_BASE: the library's memory moved). */
static void change_comm_rules(int size) {
    if (size < 2) return;
    int last = size - 1, flag, wsize;
    MPI_Comm first, second;
    MPI_Win w = MPI_WIN_NULL;
    MPI_Group g;
    long *base = NULL;
    MPIX_Sync h = MPIX_SYNC_NULL;
    MPI_Comm_split(MPI_COMM_WORLD, rank < last ? 0 : MPI_UNDEFINED, rank, &first);
    if (rank < last) {
        MPI_Win_allocate(16 * sizeof(long), sizeof(long), MPI_INFO_NULL, first, &base, &w);
        MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, w);
        base[0] = 1000 + rank;
        MPI_Win_unlock(rank, w);
        if (rank == 0) MPIX_Win_alloc_sync_objects(1, &h, w, MPI_INFO_NULL);
    }
    MPI_Bcast(&h, 1, MPIX_HANDLE_SYNC, 0, MPI_COMM_WORLD);
    int err = MPIX_Win_change_comm(MPI_COMM_WORLD, 0, &w);
    CHECK(err == MPI_SUCCESS && w != MPI_WIN_NULL, "change_comm to the world (%d)", err);
    MPI_Win_set_errhandler(w, MPI_ERRORS_RETURN);
    MPI_Win_get_group(w, &g);
    MPI_Group_size(g, &wsize);
    MPI_Group_free(&g);
    CHECK(wsize == size, "the window has %d ranks, not %d", wsize, size);
    MPI_Request obj = MPI_REQUEST_NULL, ops;
    if (rank == 0) {
        MPIX_Win_sync_object_init(h, size, w, MPI_INFO_NULL, &obj);
        MPI_Start(&obj);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPIX_Win_sync_ops_init(0, MPIX_MODE_WIN_PUT, h, w, MPI_INFO_NULL, &ops);
    MPI_Start(&ops);
    long v = 100 + rank;
    MPI_Put(&v, 1, MPI_LONG, 0, 1 + rank, 1, MPI_LONG, w);
    MPI_Wait(&ops, MPI_STATUS_IGNORE);
    MPI_Request_free(&ops);
    if (rank == 0) {
        MPI_Wait(&obj, MPI_STATUS_IGNORE);
        MPI_Request_free(&obj);
        long *p = NULL;
        MPI_Win_get_attr(w, MPI_WIN_BASE, &p, &flag);
        CHECK(flag && p && p[0] == 1000, "rank 0's memory kept through the change");
        for (int q = 0; q < size && flag && p; q++)
            CHECK(p[1 + q] == 100 + q, "the put of rank %d after the change: %ld", q, p[1 + q]);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Comm_split(MPI_COMM_WORLD, rank != 1 ? 0 : MPI_UNDEFINED, rank, &second);
    err = MPIX_Win_change_comm(rank != 1 ? second : MPI_COMM_NULL, 0, &w);
    CHECK(err == MPI_SUCCESS, "change_comm to a smaller communicator (%d)", err);
    if (rank == 1) {
        CHECK(w == MPI_WIN_NULL, "a rank that leaves gets MPI_WIN_NULL");
    } else {
        MPI_Win_get_group(w, &g);
        MPI_Group_size(g, &wsize);
        MPI_Group_free(&g);
        CHECK(wsize == size - 1, "the window has %d ranks, not %d", wsize, size - 1);
        if (rank == 0) MPIX_Win_free_sync_objects(1, &h, w);
        MPI_Win_free(&w);
        MPI_Comm_free(&second);
    }
    if (first != MPI_COMM_NULL) MPI_Comm_free(&first);
}

int main(int argc, char **argv) {
    int size, dims[2] = {0, 0}, periods[2] = {1, 1}, coords[2];
    MPI_Comm cart;
    MPI_Win win;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Dims_create(size, 2, dims);
    /* No reordering: the examples name neighbours by their ranks in MPI_COMM_WORLD. */
    MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &cart);
    MPI_Cart_coords(cart, rank, 2, coords);
    MPI_Win_allocate(W * W * sizeof(double), sizeof(double), MPI_INFO_NULL, MPI_COMM_WORLD, &A, &win);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
    neighbours(cart, A);

    double *want = malloc(sizeof(double) * W * W);
    init_block(want, coords[0], coords[1]);
    reference(cart, want);

    void (*examples[3])(MPI_Win) = {example_a, example_b, example_c};
    for (int e = 0; e < 3; e++) {
        MPI_Win_lock_all(0, win);
        init_block(A, coords[0], coords[1]);
        MPI_Win_unlock_all(win);
        MPI_Barrier(MPI_COMM_WORLD);
        iteration = 0;
        examples[e](win);
        MPI_Barrier(MPI_COMM_WORLD);
        int same = 1;
        for (int i = 1; i <= N; i++)
            same &= memcmp(&AT(A, i, 1), &AT(want, i, 1), N * sizeof(double)) == 0;
        CHECK(same, "example %c: the grid differs from the MPI_Sendrecv relaxation", 'A' + e);
    }
    handle_rules(win, size);
    change_comm_rules(size);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_free(&win);
    MPI_Comm_free(&cart);
    free(want);
    MPI_Finalize();
    if (failures == 0) printf("%s: ok %d\n", NAME, rank);
    return failures != 0;
}
