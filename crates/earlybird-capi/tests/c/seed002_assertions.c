/* Seed 002 (init-time assertions) in C: MPIX_Init_thread_assertions (the seed's
 * MPI_Init_thread_xxx) with a bad bit, then with four assertions; MPIX_Query_assertions;
 * each broken promise (ANY_TAG, a message shorter than its buffer, a send cancel, a window)
 * returning MPIX_ERR_ASSERTION under MPI_ERRORS_RETURN;
 * MPI 4's mpi_assert_no_any_source key on one duplicate only. */
#define NAME "seed002_assertions"
#include <mpi.h>
#include <mpi-ext.h>
#include <string.h>
#include "check.h"

static int klass(int rc) {
    int c = -1;
    MPI_Error_class(rc, &c);
    return c;
}

int main(int argc, char **argv) {
    int provided = -1, size, flag = 1, a = -1, q = -1;
    int want = MPIX_NO_SEND_CANCELS | MPIX_NO_ANY_TAG | MPIX_EXACT_LENGTH | MPIX_NO_RMA;
    int rc = MPIX_Init_thread_assertions(&argc, &argv, MPI_THREAD_SINGLE, &provided, 0x40000000);
    CHECK(rc == MPI_ERR_ARG, "a bit that is no assertion: rc %d", rc);
    MPI_Initialized(&flag);
    CHECK(!flag, "MPI is not initialised by a failed init");
    rc = MPIX_Init_thread_assertions(&argc, &argv, MPI_THREAD_MULTIPLE, &provided, want);
    CHECK(rc == MPI_SUCCESS, "init: rc %d", rc);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(provided == MPI_THREAD_MULTIPLE, "provided %d", provided);
    MPI_Query_thread(&q);
    CHECK(q == provided, "query_thread %d", q);
    MPIX_Query_assertions(&a);
    CHECK((a & want) == want, "assertions in force %#x", a);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    /* Errors of calls on a request alone (MPI_Cancel) also pass MPI_COMM_SELF's handler. */
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);

    int x = 0;
    MPI_Status st;
    rc = MPI_Recv(&x, 1, MPI_INT, 0, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
    CHECK(klass(rc) == MPIX_ERR_ASSERTION, "ANY_TAG: rc %d", rc);

    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    int out[4] = {rank, rank, rank, rank}, in[8] = {-1, -1, -1, -1, -1, -1, -1, -1};
    rc = MPI_Sendrecv(out, 4, MPI_INT, next, 1, in, 4, MPI_INT, prev, 1, MPI_COMM_WORLD, &st);
    CHECK(rc == MPI_SUCCESS && in[0] == prev, "exact length: rc %d, got %d", rc, in[0]);
    in[0] = -1;
    rc = MPI_Sendrecv(out, 4, MPI_INT, next, 2, in, 8, MPI_INT, prev, 2, MPI_COMM_WORLD, &st);
    CHECK(klass(rc) == MPIX_ERR_ASSERTION, "short: rc %d", rc);
    CHECK(in[0] == prev && in[3] == prev && in[4] == -1, "a short message is delivered all the same");

    MPI_Info info;
    MPI_Comm d;
    MPI_Info_create(&info);
    MPI_Info_set(info, "mpi_assert_no_any_source", "true");
    MPI_Comm_dup_with_info(MPI_COMM_WORLD, info, &d);
    MPI_Comm_set_errhandler(d, MPI_ERRORS_RETURN);
    rc = MPI_Iprobe(MPI_ANY_SOURCE, 0, d, &flag, &st);
    CHECK(klass(rc) == MPIX_ERR_ASSERTION, "key on the dup: rc %d", rc);
    rc = MPI_Iprobe(MPI_ANY_SOURCE, 0, MPI_COMM_WORLD, &flag, &st);
    CHECK(rc == MPI_SUCCESS, "no key on the world: rc %d", rc);
    MPI_Info out_info;
    char v[MPI_MAX_INFO_VAL];
    MPI_Comm_get_info(d, &out_info);
    MPI_Info_get(out_info, "mpi_assert_no_any_source", MPI_MAX_INFO_VAL, v, &flag);
    CHECK(flag && strcmp(v, "true") == 0, "get_info returns the key");
    MPI_Info_free(&out_info);

    MPI_Request r;
    MPI_Isend(out, 4, MPI_INT, next, 3, MPI_COMM_WORLD, &r);
    rc = MPI_Cancel(&r);
    CHECK(klass(rc) == MPIX_ERR_ASSERTION, "send cancel: rc %d", rc);
    MPI_Wait(&r, &st);
    rc = MPI_Recv(in, 4, MPI_INT, prev, 3, MPI_COMM_WORLD, &st);
    CHECK(rc == MPI_SUCCESS && in[0] == prev, "the send went on: rc %d", rc);

    void *base = NULL;
    MPI_Win w;
    rc = MPI_Win_allocate(64, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &w);
    CHECK(klass(rc) == MPIX_ERR_ASSERTION, "window: rc %d", rc);

    MPI_Comm_free(&d);
    MPI_Info_free(&info);
    MPI_Finalize();
    if (failures == 0) printf("%s: ok %d\n", NAME, rank);
    return failures != 0;
}
