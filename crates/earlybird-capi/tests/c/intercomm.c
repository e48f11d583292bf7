/* Intercommunicators and user error handlers: the even and odd ranks joined by
 * Intercomm_create, remote sizes and groups, a message across, Intercomm_merge with the odd
 * side high; a user error handler told its communicator and the code, after which the call
 * returns that code. Prints "intercomm: ok <rank>". */
#include <mpi.h>
#define NAME "intercomm"
#include "check.h"

static int handled = 0, handled_class = -1;
static MPI_Comm handled_comm = MPI_COMM_NULL;
static void handler(MPI_Comm *comm, int *code, ...) {
    handled++;
    handled_comm = *comm;
    MPI_Error_class(*code, &handled_class);
}

/* MPI 4.0's constructors from groups, with no parent communicator: the world's group, then
 * the even and odd ranks' groups joined into an intercommunicator. */
static void from_groups(int size) {
    MPI_Group wg;
    MPI_Comm fg;
    MPI_Comm_group(MPI_COMM_WORLD, &wg);
    MPI_Comm_create_from_group(wg, "earlybird.test.world", MPI_INFO_NULL, MPI_ERRORS_RETURN, &fg);
    int fr = -1, fs = -1, sum = -1, one = 1;
    MPI_Comm_rank(fg, &fr);
    MPI_Comm_size(fg, &fs);
    MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, fg);
    CHECK(fr == rank && fs == size && sum == size, "create_from_group: rank %d of %d, sum %d", fr, fs, sum);
    MPI_Errhandler eh = MPI_ERRHANDLER_NULL;
    MPI_Comm_get_errhandler(fg, &eh);
    CHECK(eh == MPI_ERRORS_RETURN, "create_from_group's error handler %#x", (unsigned)eh);
    MPI_Comm_free(&fg);
    if (size >= 2) {
        int color = rank % 2, evens[64], odds[64], ne = 0, no = 0;
        for (int r = 0; r < size && r < 128; r++) {
            if (r % 2) odds[no++] = r;
            else evens[ne++] = r;
        }
        MPI_Group eg, og, rg;
        MPI_Group_incl(wg, ne, evens, &eg);
        MPI_Group_incl(wg, no, odds, &og);
        MPI_Comm inter;
        MPI_Intercomm_create_from_groups(color ? og : eg, 0, color ? eg : og, 0, "earlybird.test.inter", MPI_INFO_NULL,
                                         MPI_ERRORS_RETURN, &inter);
        int is_inter = 0, rsize = -1, v = -1;
        MPI_Comm_test_inter(inter, &is_inter);
        MPI_Comm_remote_size(inter, &rsize);
        CHECK(is_inter && rsize == (color ? ne : no), "intercomm_create_from_groups: inter %d, remote size %d", is_inter, rsize);
        MPI_Comm_remote_group(inter, &rg);
        int cmp = -1;
        MPI_Group_compare(rg, color ? eg : og, &cmp);
        CHECK(cmp == MPI_IDENT, "intercomm_create_from_groups: remote group compares %d", cmp);
        MPI_Group_free(&rg);
        /* Leader to leader across. */
        if (rank == 0) MPI_Send(&size, 1, MPI_INT, 0, 3, inter);
        if (rank == 1) {
            MPI_Recv(&v, 1, MPI_INT, 0, 3, inter, MPI_STATUS_IGNORE);
            CHECK(v == size, "across the intercommunicator from groups: %d", v);
        }
        MPI_Comm_free(&inter);
        MPI_Group_free(&eg);
        MPI_Group_free(&og);
    }
    MPI_Group_free(&wg);
}

int main(int argc, char **argv) {
    int size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    from_groups(size);
    if (size >= 2) {
        MPI_Comm half, inter, merged;
        int color = rank % 2;
        MPI_Comm_split(MPI_COMM_WORLD, color, rank, &half);
        /* Leaders: rank 0 of each half, world ranks 0 and 1. */
        MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, color ? 0 : 1, 40, &inter);
        int is_inter = 0, rsize = -1, lsize = -1;
        MPI_Comm_test_inter(inter, &is_inter);
        MPI_Comm_remote_size(inter, &rsize);
        MPI_Comm_size(inter, &lsize);
        int evens = (size + 1) / 2, odds = size / 2;
        CHECK(is_inter == 1, "test_inter %d", is_inter);
        CHECK(rsize == (color ? evens : odds) && lsize == (color ? odds : evens), "sizes local %d remote %d", lsize, rsize);
        MPI_Group rg;
        int rgs = -1;
        MPI_Comm_remote_group(inter, &rg);
        MPI_Group_size(rg, &rgs);
        CHECK(rgs == rsize, "remote group of %d", rgs);
        MPI_Group_free(&rg);
        /* Local rank 0 of each side sends its world rank to the other side's rank 0. */
        int hr;
        MPI_Comm_rank(half, &hr);
        if (hr == 0) {
            int mine = rank, theirs = -1;
            MPI_Sendrecv(&mine, 1, MPI_INT, 0, 41, &theirs, 1, MPI_INT, 0, 41, inter, MPI_STATUS_IGNORE);
            CHECK(theirs == (color ? 0 : 1), "across the intercommunicator %d", theirs);
        }
        MPI_Intercomm_merge(inter, color, &merged);
        int mr = -1, ms = -1;
        MPI_Comm_rank(merged, &mr);
        MPI_Comm_size(merged, &ms);
        CHECK(ms == size, "merged size %d", ms);
        CHECK(mr == (color ? evens + hr : hr), "merged rank %d (low side first)", mr);
        MPI_Comm_free(&merged);
        MPI_Comm_free(&inter);
        MPI_Comm_free(&half);
    }
    /* A user error handler. */
    MPI_Errhandler eh, got;
    MPI_Comm d;
    MPI_Comm_dup(MPI_COMM_WORLD, &d);
    MPI_Comm_create_errhandler(handler, &eh);
    MPI_Comm_set_errhandler(d, eh);
    MPI_Comm_get_errhandler(d, &got);
    CHECK(got == eh, "get_errhandler gave %#x, set %#x", (unsigned)got, (unsigned)eh);
    int x = 1, cls = -1;
    int rc = MPI_Send(&x, 1, MPI_INT, size + 2, 0, d);
    MPI_Error_class(rc, &cls);
    CHECK(handled == 1 && handled_comm == d && handled_class == MPI_ERR_RANK, "handler: %d calls, comm %#x, class %d",
          handled, (unsigned)handled_comm, handled_class);
    CHECK(cls == MPI_ERR_RANK, "the call returned class %d", cls);
    MPI_Comm_call_errhandler(d, MPI_ERR_OTHER);
    CHECK(handled == 2 && handled_class == MPI_ERR_OTHER, "call_errhandler: %d calls, class %d", handled, handled_class);
    /* Once each by the one-byte calls' shorter way. */
    char bytes[4] = {0};
    MPI_Request breq = MPI_REQUEST_NULL;
    rc = MPI_Send(bytes, 4, MPI_BYTE, size + 2, 0, d);
    MPI_Error_class(rc, &cls);
    CHECK(handled == 3 && handled_class == MPI_ERR_RANK && cls == MPI_ERR_RANK, "byte send: %d calls, class %d", handled, cls);
    rc = MPI_Isend(bytes, 4, MPI_BYTE, size + 2, 0, d, &breq);
    MPI_Error_class(rc, &cls);
    CHECK(handled == 4 && cls == MPI_ERR_RANK, "byte isend: %d calls, class %d", handled, cls);
    MPI_Errhandler_free(&eh);
    CHECK(eh == MPI_ERRHANDLER_NULL, "freed handler not nulled");
    MPI_Comm_free(&d);
    int bad = failures, anybad = 0;
    MPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Finalize();
    if (anybad == 0) printf("intercomm: ok %d\n", rank);
    return anybad == 0 ? 0 : 1;
}
