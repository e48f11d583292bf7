/* One-sided communication through the C ABI: each window flavour (MPI_Win_allocate,
 * MPI_Win_create over the program's memory, MPI_Win_allocate_shared with shared_query,
 * MPI_Win_create_dynamic with attach/detach), each synchronisation (fence, post/start/
 * complete/wait and test, lock/unlock, lock_all with flush), each operation (put and get
 * with a strided target datatype, accumulate, get_accumulate, fetch_and_op with MPI_NO_OP,
 * compare_and_swap, the request-based forms), the window attributes, and errors returned
 * under MPI_ERRORS_RETURN. Prints "rma: ok <rank>". */
#include <mpi.h>
#include <stdint.h>
#include <stdlib.h>
#define NAME "rma"
#include "check.h"

static int deleted = 0, handled = 0;
static MPI_Win handled_win = MPI_WIN_NULL;

static int count_delete(MPI_Win win, int keyval, void *value, void *extra) {
    (void)win;
    (void)keyval;
    deleted += *(int *)value + *(int *)extra;
    return MPI_SUCCESS;
}

static void note_error(MPI_Win *win, int *code, ...) {
    handled_win = *win;
    handled = *code;
}

int main(int argc, char **argv) {
    int size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int right = (rank + 1) % size, left = (rank + size - 1) % size;

    /* Allocate + fence: each rank puts its number into its right neighbour's slot 0, and
     * every rank adds 1 to rank 0's slot 1. */
    int *mem = NULL;
    MPI_Win win;
    MPI_Win_allocate(4 * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win);
    CHECK(mem != NULL, "MPI_Win_allocate gave no memory");
    for (int i = 0; i < 4; i++) mem[i] = -1;
    mem[1] = 0;
    MPI_Win_fence(0, win);
    int one = 1;
    MPI_Put(&rank, 1, MPI_INT, right, 0, 1, MPI_INT, win);
    MPI_Accumulate(&one, 1, MPI_INT, 0, 1, 1, MPI_INT, MPI_SUM, win);
    MPI_Win_fence(0, win);
    CHECK(mem[0] == left, "fence put: slot 0 holds %d, not %d", mem[0], left);
    if (rank == 0) CHECK(mem[1] == size, "accumulate: slot 1 holds %d, not %d", mem[1], size);
    /* Get back the neighbour's slot 0 (which holds my rank). */
    int back = -1;
    MPI_Win_fence(0, win);
    MPI_Get(&back, 1, MPI_INT, right, 0, 1, MPI_INT, win);
    MPI_Win_fence(0, win);
    CHECK(back == rank, "fence get: %d, not %d", back, rank);

    /* The window's attributes. */
    void *base = NULL;
    MPI_Aint *wsize = NULL;
    int *unit = NULL, *flavor = NULL, *model = NULL, flag = 0;
    MPI_Win_get_attr(win, MPI_WIN_BASE, &base, &flag);
    CHECK(flag && base == mem, "MPI_WIN_BASE %p, not %p", base, (void *)mem);
    MPI_Win_get_attr(win, MPI_WIN_SIZE, &wsize, &flag);
    CHECK(flag && *wsize == 4 * (MPI_Aint)sizeof(int), "MPI_WIN_SIZE %ld", (long)*wsize);
    MPI_Win_get_attr(win, MPI_WIN_DISP_UNIT, &unit, &flag);
    CHECK(flag && *unit == sizeof(int), "MPI_WIN_DISP_UNIT %d", *unit);
    MPI_Win_get_attr(win, MPI_WIN_CREATE_FLAVOR, &flavor, &flag);
    CHECK(flag && *flavor == MPI_WIN_FLAVOR_ALLOCATE, "MPI_WIN_CREATE_FLAVOR %d", *flavor);
    MPI_Win_get_attr(win, MPI_WIN_MODEL, &model, &flag);
    CHECK(flag && *model == MPI_WIN_UNIFIED, "MPI_WIN_MODEL %d", *model);
    MPI_Group wg, cg;
    int cmp = -1;
    MPI_Win_get_group(win, &wg);
    MPI_Comm_group(MPI_COMM_WORLD, &cg);
    MPI_Group_compare(wg, cg, &cmp);
    CHECK(cmp == MPI_IDENT, "the window's group compares %d with the world's", cmp);
    char wname[MPI_MAX_OBJECT_NAME];
    int len = 0;
    MPI_Win_set_name(win, "halo");
    MPI_Win_get_name(win, wname, &len);
    CHECK(len == 4 && wname[0] == 'h', "window name %s", wname);

    /* Errors under MPI_ERRORS_RETURN: unlock without a lock, a bad lock type, a rank out of
     * range; the window stays usable. */
    MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
    int cls = -1, rc;
    rc = MPI_Win_unlock(right, win);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_RMA_SYNC, "unlock without lock: class %d", cls);
    rc = MPI_Win_lock(12345, right, 0, win);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_LOCKTYPE, "bad lock type: class %d", cls);
    MPI_Win_fence(0, win);
    rc = MPI_Put(&rank, 1, MPI_INT, size + 3, 0, 1, MPI_INT, win);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_RANK, "put to a bad rank: class %d", cls);
    MPI_Win_fence(0, win);
    MPI_Errhandler eh;
    MPI_Win_get_errhandler(win, &eh);
    CHECK(eh == MPI_ERRORS_RETURN, "the window's handler is %x", (unsigned)eh);
    /* The program's attributes: replaced and deleted values go through the delete function,
     * and what is left is deleted at MPI_Win_free. */
    int key = MPI_KEYVAL_INVALID, v1 = 1, v2 = 10, v3 = 100, extra = 1000;
    void *val = NULL;
    MPI_Win_create_keyval(MPI_WIN_NULL_COPY_FN, count_delete, &key, &extra);
    MPI_Win_set_attr(win, key, &v1);
    MPI_Win_get_attr(win, key, &val, &flag);
    CHECK(flag && val == &v1, "the attribute reads back as %p (flag %d), not %p", val, flag, (void *)&v1);
    MPI_Win_set_attr(win, key, &v2);
    CHECK(deleted == 1001, "replacing the attribute deleted %d", deleted);
    MPI_Win_delete_attr(win, key);
    CHECK(deleted == 2011, "deleting the attribute deleted %d", deleted);
    MPI_Win_get_attr(win, key, &val, &flag);
    CHECK(!flag, "a deleted attribute is still there");
    MPI_Win_set_attr(win, key, &v3);
    MPI_Win_free_keyval(&key);
    CHECK(key == MPI_KEYVAL_INVALID, "MPI_Win_free_keyval left the key");
    /* A handler of the program's, told the window and the code. */
    MPI_Errhandler my_eh;
    MPI_Win_create_errhandler(note_error, &my_eh);
    MPI_Win_set_errhandler(win, my_eh);
    MPI_Win_get_errhandler(win, &eh);
    CHECK(eh == my_eh, "the window handler is %x, not %x", (unsigned)eh, (unsigned)my_eh);
    rc = MPI_Win_unlock(right, win);
    CHECK(handled != MPI_SUCCESS && handled_win == win && rc == handled, "the handler saw code %d on %x; the call returned %d", handled, (unsigned)handled_win, rc);
    MPI_Errhandler_free(&my_eh);
    MPI_Group_free(&wg);
    MPI_Group_free(&cg);
    MPI_Win_free(&win);
    CHECK(win == MPI_WIN_NULL, "MPI_Win_free left the handle");
    CHECK(deleted == 3111, "MPI_Win_free deleted %d", deleted);

    /* Create over the program's memory + PSCW with a strided target: each rank writes two
     * numbers into every other column of its right neighbour's row of 4, and the neighbour
     * tests for the end of its exposure epoch. */
    int *row = calloc(4, sizeof(int));
    MPI_Win_create(row, 4 * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    MPI_Datatype every_other;
    MPI_Type_vector(2, 1, 2, MPI_INT, &every_other);
    MPI_Type_commit(&every_other);
    MPI_Group world, from, to;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    MPI_Group_incl(world, 1, &left, &from);
    MPI_Group_incl(world, 1, &right, &to);
    MPI_Win_post(from, 0, win);
    MPI_Win_start(to, 0, win);
    int two[2] = {rank * 10 + 1, rank * 10 + 2};
    MPI_Put(two, 2, MPI_INT, right, 0, 1, every_other, win);
    MPI_Win_complete(win);
    int done = 0;
    while (!done) MPI_Win_test(win, &done);
    CHECK(row[0] == left * 10 + 1 && row[1] == 0 && row[2] == left * 10 + 2 && row[3] == 0,
          "PSCW strided put: %d %d %d %d", row[0], row[1], row[2], row[3]);
    /* Lock the neighbour exclusively and read its row back with a request-based get. */
    int seen[2] = {0, 0};
    MPI_Request rq;
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, right, 0, win);
    MPI_Rget(seen, 2, MPI_INT, right, 0, 1, every_other, win, &rq);
    MPI_Wait(&rq, MPI_STATUS_IGNORE);
    MPI_Win_unlock(right, win);
    CHECK(seen[0] == rank * 10 + 1 && seen[1] == rank * 10 + 2, "Rget under lock: %d %d", seen[0], seen[1]);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_free(&win);
    free(row);

    /* Lock_all on an allocated window of counters: fetch_and_op (SUM, then NO_OP),
     * compare_and_swap, get_accumulate, all on rank 0's slots. */
    int64_t *ctr = NULL;
    MPI_Win_allocate(3 * sizeof(int64_t), sizeof(int64_t), MPI_INFO_NULL, MPI_COMM_WORLD, &ctr, &win);
    ctr[0] = ctr[1] = ctr[2] = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_lock_all(0, win);
    int64_t inc = 5, old = -1;
    MPI_Fetch_and_op(&inc, &old, MPI_INT64_T, 0, 0, MPI_SUM, win);
    MPI_Win_flush(0, win);
    CHECK(old >= 0 && old % 5 == 0 && old < 5 * size, "fetch_and_op gave %ld", (long)old);
    int64_t mine = rank + 1, expect = 0, was = -1;
    MPI_Compare_and_swap(&mine, &expect, &was, MPI_INT64_T, 0, 1, win);
    int64_t acc = 2, got = -1;
    MPI_Get_accumulate(&acc, 1, MPI_INT64_T, &got, 1, MPI_INT64_T, 0, 2, 1, MPI_INT64_T, MPI_SUM, win);
    MPI_Raccumulate(&acc, 1, MPI_INT64_T, 0, 2, 1, MPI_INT64_T, MPI_SUM, win, &rq);
    MPI_Wait(&rq, MPI_STATUS_IGNORE);
    MPI_Win_flush_all(win);
    MPI_Win_unlock_all(win);
    int won = was == 0, winners = 0;
    MPI_Allreduce(&won, &winners, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    CHECK(winners == 1, "%d ranks won the compare_and_swap", winners);
    MPI_Win_lock_all(0, win);
    int64_t total = -1, swapped = -1, summed = -1;
    MPI_Fetch_and_op(NULL, &total, MPI_INT64_T, 0, 0, MPI_NO_OP, win);
    MPI_Fetch_and_op(NULL, &swapped, MPI_INT64_T, 0, 1, MPI_NO_OP, win);
    MPI_Fetch_and_op(NULL, &summed, MPI_INT64_T, 0, 2, MPI_NO_OP, win);
    MPI_Win_unlock_all(win);
    CHECK(total == 5 * size, "the counter holds %ld, not %ld", (long)total, (long)(5 * size));
    CHECK(swapped >= 1 && swapped <= size, "the swapped slot holds %ld", (long)swapped);
    CHECK(summed == 4 * size, "the accumulated slot holds %ld, not %d", (long)summed, 4 * size);
    MPI_Win_free(&win);

    /* A shared window: every rank stores into its own part, then reads its right
     * neighbour's straight from memory. */
    double *sh = NULL;
    MPI_Win_allocate_shared(2 * sizeof(double), sizeof(double), MPI_INFO_NULL, MPI_COMM_WORLD, &sh, &win);
    MPI_Win_lock_all(0, win);
    sh[0] = rank + 0.5;
    sh[1] = rank + 0.25;
    MPI_Win_sync(win);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_sync(win);
    MPI_Aint qsize = 0;
    int qunit = 0;
    double *theirs = NULL;
    MPI_Win_shared_query(win, right, &qsize, &qunit, &theirs);
    CHECK(qsize == 2 * (MPI_Aint)sizeof(double) && qunit == sizeof(double) && theirs != NULL,
          "shared_query: %ld bytes, unit %d", (long)qsize, qunit);
    if (theirs) CHECK(theirs[0] == right + 0.5 && theirs[1] == right + 0.25, "shared load: %g %g", theirs[0], theirs[1]);
    MPI_Win_unlock_all(win);
    MPI_Win_free(&win);

    /* A dynamic window: each rank attaches a buffer, sends its address to the left, and
     * puts into its right neighbour's at the address it got. */
    MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    int *dyn = calloc(2, sizeof(int));
    MPI_Win_attach(win, dyn, 2 * sizeof(int));
    MPI_Aint mine_at, theirs_at;
    MPI_Get_address(dyn, &mine_at);
    MPI_Sendrecv(&mine_at, 1, MPI_AINT, left, 9, &theirs_at, 1, MPI_AINT, right, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Win_fence(0, win);
    int pair[2] = {rank, -rank};
    MPI_Put(pair, 2, MPI_INT, right, theirs_at, 2, MPI_INT, win);
    MPI_Win_fence(0, win);
    CHECK(dyn[0] == left && dyn[1] == -left, "dynamic put: %d %d", dyn[0], dyn[1]);
    MPI_Win_detach(win, dyn);
    MPI_Win_free(&win);
    free(dyn);

    /* Accumulates of bytes are atomic as whole operations on memory of the program's in
     * another process (MPICH's are; a linked list's next pointer is such a structure): every
     * rank replaces rank 0's pair with two copies of one number and reads it back with
     * MPI_NO_OP, and never sees a mix. */
    struct pair { int a; int pad; MPI_Aint b; } *shared_pair = NULL, mine_pair, seen_pair;
    MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    MPI_Aint pair_at = 0;
    if (rank == 0) {
        MPI_Alloc_mem(sizeof(struct pair), MPI_INFO_NULL, &shared_pair);
        shared_pair->a = -1;
        shared_pair->pad = 0;
        shared_pair->b = -1;
        MPI_Win_attach(win, shared_pair, sizeof(struct pair));
        MPI_Get_address(shared_pair, &pair_at);
    }
    MPI_Bcast(&pair_at, 1, MPI_AINT, 0, MPI_COMM_WORLD);
    MPI_Win_lock_all(0, win);
    int torn = 0;
    for (int i = 0; i < 2000; i++) {
        mine_pair.a = rank * 100000 + i;
        mine_pair.pad = 0;
        mine_pair.b = rank * 100000 + i;
        MPI_Accumulate(&mine_pair, sizeof mine_pair, MPI_BYTE, 0, pair_at, sizeof mine_pair, MPI_BYTE, MPI_REPLACE, win);
        MPI_Get_accumulate(NULL, 0, MPI_DATATYPE_NULL, &seen_pair, sizeof seen_pair, MPI_BYTE, 0, pair_at, sizeof seen_pair, MPI_BYTE, MPI_NO_OP, win);
        MPI_Win_flush(0, win);
        torn += seen_pair.a != seen_pair.b;
    }
    MPI_Win_unlock_all(win);
    CHECK(torn == 0, "%d reads of the pair saw a mix of two replacements", torn);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        MPI_Win_detach(win, shared_pair);
    }
    MPI_Win_free(&win);
    if (rank == 0) MPI_Free_mem(shared_pair);

    MPI_Type_free(&every_other);
    MPI_Group_free(&from);
    MPI_Group_free(&to);
    MPI_Group_free(&world);
    int bad = failures, anybad = 0;
    MPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Finalize();
    if (anybad == 0) printf("rma: ok %d\n", rank);
    return anybad == 0 ? 0 : 1;
}
