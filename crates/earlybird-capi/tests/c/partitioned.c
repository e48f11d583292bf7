/* Partitioned communication (MPI 4.1 chapter 4): around a ring, a send of 8 partitions of 5
 * ints received as 4 partitions of 10, over 3 rounds, partitions readied one by one from
 * the last, by range and by list, arrival watched with MPI_Parrived; a pair through a
 * derived datatype; MPI_PROC_NULL; and the errors (a wildcard source, a partition out of
 * range or readied twice, Pready on an inactive request) with MPI_ERRORS_RETURN; MPI_ERROR of
 * the statuses of MPI_Waitall, MPI_Waitsome and MPI_Testall, and an empty message of
 * MPI_DATATYPE_NULL.
 * Prints "partitioned: ok <rank>". */
#include <mpi.h>
#define NAME "partitioned"
#include "check.h"

#define SP 8
#define RP 4
#define N 40

static int val(int round, int r, int k) { return round * 100000 + r * 1000 + k; }

int main(int argc, char **argv) {
    int size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int right = (rank + 1) % size, left = (rank + size - 1) % size;

    int out[N], in[N];
    MPI_Request reqs[2];
    MPI_Precv_init(in, RP, N / RP, MPI_INT, left, 3, MPI_COMM_WORLD, MPI_INFO_NULL, &reqs[0]);
    MPI_Psend_init(out, SP, N / SP, MPI_INT, right, 3, MPI_COMM_WORLD, MPI_INFO_NULL, &reqs[1]);
    for (int round = 0; round < 3; round++) {
        for (int k = 0; k < N; k++) {
            out[k] = val(round, rank, k);
            in[k] = -1;
        }
        MPI_Startall(2, reqs);
        if (round == 0) {
            for (int p = SP - 1; p >= 0; p--) MPI_Pready(p, reqs[1]);
        } else if (round == 1) {
            MPI_Pready_range(SP / 2, SP - 1, reqs[1]);
            MPI_Pready_range(0, SP / 2 - 1, reqs[1]);
        } else {
            int list[SP];
            for (int p = 0; p < SP; p++) list[p] = (p * 3) % SP; /* 3 is coprime with 8 */
            MPI_Pready_list(SP, list, reqs[1]);
        }
        int arrived = 0;
        while (arrived < RP) {
            arrived = 0;
            for (int p = 0; p < RP; p++) {
                int flag = 0;
                MPI_Parrived(reqs[0], p, &flag);
                if (flag) {
                    arrived++;
                    /* An arrived partition holds its data already. */
                    for (int k = p * (N / RP); k < (p + 1) * (N / RP); k++)
                        CHECK(in[k] == val(round, left, k), "round %d: partition %d element %d is %d before the wait", round, p, k, in[k]);
                }
            }
            int done;
            MPI_Test(&reqs[1], &done, MPI_STATUS_IGNORE);
        }
        MPI_Status sts[2];
        sts[0].MPI_ERROR = sts[1].MPI_ERROR = -1;
        MPI_Waitall(2, reqs, sts);
        /* As MPICH and Open MPI do, every status of a multiple completion says how its
         * request ended. */
        CHECK(sts[0].MPI_ERROR == MPI_SUCCESS && sts[1].MPI_ERROR == MPI_SUCCESS, "round %d: MPI_ERROR %d %d after Waitall", round, sts[0].MPI_ERROR, sts[1].MPI_ERROR);
        int count = -1;
        MPI_Get_count(&sts[0], MPI_INT, &count);
        CHECK(sts[0].MPI_SOURCE == left && sts[0].MPI_TAG == 3 && count == N, "round %d: status %d %d %d", round, sts[0].MPI_SOURCE, sts[0].MPI_TAG, count);
        for (int k = 0; k < N; k++)
            CHECK(in[k] == val(round, left, k), "round %d element %d: %d", round, k, in[k]);
        int flag = 0;
        MPI_Parrived(reqs[0], 0, &flag);
        CHECK(flag == 1, "Parrived on an inactive request says %d", flag);
    }
    MPI_Request_free(&reqs[0]);
    MPI_Request_free(&reqs[1]);
    CHECK(reqs[0] == MPI_REQUEST_NULL && reqs[1] == MPI_REQUEST_NULL, "freed handles not nulled");

    /* Through a derived datatype: pairs of doubles, 3 partitions of 2 pairs each way. */
    MPI_Datatype pair;
    MPI_Type_contiguous(2, MPI_DOUBLE, &pair);
    MPI_Type_commit(&pair);
    double dout[12], din[12];
    for (int k = 0; k < 12; k++) {
        dout[k] = rank + k / 100.0;
        din[k] = -1;
    }
    MPI_Request d[2];
    MPI_Psend_init(dout, 3, 2, pair, right, 4, MPI_COMM_WORLD, MPI_INFO_NULL, &d[0]);
    MPI_Precv_init(din, 2, 3, pair, left, 4, MPI_COMM_WORLD, MPI_INFO_NULL, &d[1]);
    MPI_Startall(2, d);
    /* An empty message of MPI_DATATYPE_NULL (MPICH takes it with a count of 0) while the
     * partitioned pair is active. */
    MPI_Sendrecv(NULL, 0, MPI_DATATYPE_NULL, right, 9, NULL, 0, MPI_DATATYPE_NULL, left, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Pready_range(0, 2, d[0]);
    MPI_Waitall(2, d, MPI_STATUSES_IGNORE);
    for (int k = 0; k < 12; k++)
        CHECK(din[k] == left + k / 100.0, "typed element %d: %g", k, din[k]);
    /* Waitsome and Testall fill MPI_ERROR too. */
    MPI_Startall(2, d);
    MPI_Pready_list(3, (int[]){2, 0, 1}, d[0]);
    MPI_Status some[2];
    int idx[2], outc = 0, got = 0;
    while (got < 2) {
        some[0].MPI_ERROR = some[1].MPI_ERROR = -1;
        MPI_Waitsome(2, d, &outc, idx, some);
        for (int k = 0; k < outc; k++)
            CHECK(some[k].MPI_ERROR == MPI_SUCCESS, "MPI_ERROR %d after Waitsome", some[k].MPI_ERROR);
        got += outc;
    }
    MPI_Startall(2, d);
    MPI_Pready_range(0, 2, d[0]);
    int all = 0;
    while (!all) {
        some[0].MPI_ERROR = some[1].MPI_ERROR = -1;
        MPI_Testall(2, d, &all, some);
    }
    CHECK(some[0].MPI_ERROR == MPI_SUCCESS && some[1].MPI_ERROR == MPI_SUCCESS, "MPI_ERROR %d %d after Testall", some[0].MPI_ERROR, some[1].MPI_ERROR);
    MPI_Request_free(&d[0]);
    MPI_Request_free(&d[1]);
    MPI_Type_free(&pair);

    /* MPI_PROC_NULL: both complete at once. */
    MPI_Request nul[2];
    MPI_Psend_init(out, 2, 1, MPI_INT, MPI_PROC_NULL, 5, MPI_COMM_WORLD, MPI_INFO_NULL, &nul[0]);
    MPI_Precv_init(in, 2, 1, MPI_INT, MPI_PROC_NULL, 5, MPI_COMM_WORLD, MPI_INFO_NULL, &nul[1]);
    MPI_Startall(2, nul);
    MPI_Pready_range(0, 1, nul[0]);
    MPI_Status ns[2];
    MPI_Waitall(2, nul, ns);
    CHECK(ns[1].MPI_SOURCE == MPI_PROC_NULL, "status of a receive from MPI_PROC_NULL: %d", ns[1].MPI_SOURCE);
    MPI_Request_free(&nul[0]);
    MPI_Request_free(&nul[1]);

    /* Errors. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    int cls = -1, flag = 0;
    MPI_Request bad = MPI_REQUEST_NULL;
    int rc = MPI_Precv_init(in, 2, 1, MPI_INT, MPI_ANY_SOURCE, 6, MPI_COMM_WORLD, MPI_INFO_NULL, &bad);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_RANK, "MPI_ANY_SOURCE in Precv_init: class %d", cls);
    rc = MPI_Psend_init(out, -1, 1, MPI_INT, right, 6, MPI_COMM_WORLD, MPI_INFO_NULL, &bad);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_ARG, "negative partitions: class %d", cls);
    MPI_Parrived(MPI_REQUEST_NULL, 0, &flag);
    CHECK(flag == 1, "Parrived on MPI_REQUEST_NULL says %d", flag);
    MPI_Request s, r;
    MPI_Psend_init(out, 2, 1, MPI_INT, right, 7, MPI_COMM_WORLD, MPI_INFO_NULL, &s);
    MPI_Precv_init(in, 2, 1, MPI_INT, left, 7, MPI_COMM_WORLD, MPI_INFO_NULL, &r);
    rc = MPI_Pready(0, s);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_REQUEST, "Pready on an inactive request: class %d", cls);
    MPI_Start(&s);
    MPI_Start(&r);
    rc = MPI_Pready(2, s);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_ARG, "Pready of partition 2 of 2: class %d", cls);
    MPI_Pready(1, s);
    rc = MPI_Pready(1, s);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_ARG, "Pready twice: class %d", cls);
    rc = MPI_Pready(0, r);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_REQUEST, "Pready on a receive: class %d", cls);
    MPI_Pready(0, s);
    MPI_Wait(&s, MPI_STATUS_IGNORE);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    CHECK(in[0] == val(2, left, 0) && in[1] == val(2, left, 1), "the pair after the errors: %d %d", in[0], in[1]);
    MPI_Request_free(&s);
    MPI_Request_free(&r);

    MPI_Finalize();
    if (failures == 0) printf("partitioned: ok %d\n", rank);
    return failures != 0;
}
