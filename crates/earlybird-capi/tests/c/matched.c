/* Point-to-point calls of the second part: matched probes and receives (MPI_Mprobe,
 * MPI_Improbe, MPI_Mrecv, MPI_Imrecv, MPI_MESSAGE_NO_PROC), MPI_Isendrecv and
 * MPI_Isendrecv_replace, the ready and buffered nonblocking and persistent sends,
 * MPI_Request_get_status, the status accessors, and MPI_Reduce_local with a C operation on
 * the program's own datatype. Prints "matched: ok <rank>". */
#include <mpi.h>
#include <stdlib.h>
#define NAME "matched"
#include "check.h"

static int greq_freed = 0;
static int greq_query(void *extra, MPI_Status *st) {
    MPI_Status_set_source(st, *(int *)extra);
    MPI_Status_set_tag(st, 21);
    MPI_Status_set_elements(st, MPI_INT, 3);
    MPI_Status_set_cancelled(st, 0);
    return MPI_SUCCESS;
}
static int greq_free(void *extra) {
    (void)extra;
    greq_freed++;
    return MPI_SUCCESS;
}
static int greq_cancel(void *extra, int complete) {
    (void)extra;
    (void)complete;
    return MPI_SUCCESS;
}

static void add_pairs(void *in, void *inout, int *len, MPI_Datatype *dt) {
    int size;
    MPI_Type_size(*dt, &size);
    int *a = in, *b = inout;
    for (int i = 0; i < *len * (size / (int)sizeof(int)); i++) b[i] += a[i];
}

int main(int argc, char **argv) {
    int size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int left = (rank + size - 1) % size, right = (rank + 1) % size;

    /* Mprobe + Mrecv: the message is taken out of matching by the probe. */
    int v = rank * 7, got = -1;
    MPI_Request sreq;
    MPI_Isend(&v, 1, MPI_INT, right, 3, MPI_COMM_WORLD, &sreq);
    MPI_Message msg;
    MPI_Status st;
    MPI_Mprobe(left, 3, MPI_COMM_WORLD, &msg, &st);
    int count = -1;
    MPI_Get_count(&st, MPI_INT, &count);
    CHECK(st.MPI_SOURCE == left && count == 1, "mprobe status %d %d", st.MPI_SOURCE, count);
    MPI_Mrecv(&got, 1, MPI_INT, &msg, &st);
    CHECK(got == left * 7 && msg == MPI_MESSAGE_NULL, "mrecv %d", got);
    MPI_Wait(&sreq, MPI_STATUS_IGNORE);

    /* Improbe + Imrecv. */
    MPI_Isend(&v, 1, MPI_INT, right, 4, MPI_COMM_WORLD, &sreq);
    int flag = 0;
    while (!flag) MPI_Improbe(left, 4, MPI_COMM_WORLD, &flag, &msg, &st);
    MPI_Request rreq;
    got = -1;
    MPI_Imrecv(&got, 1, MPI_INT, &msg, &rreq);
    MPI_Wait(&rreq, &st);
    CHECK(got == left * 7 && st.MPI_TAG == 4, "imrecv %d tag %d", got, st.MPI_TAG);
    MPI_Wait(&sreq, MPI_STATUS_IGNORE);

    /* A probe of MPI_PROC_NULL gives MPI_MESSAGE_NO_PROC, whose receive is empty. */
    MPI_Mprobe(MPI_PROC_NULL, 0, MPI_COMM_WORLD, &msg, &st);
    CHECK(msg == MPI_MESSAGE_NO_PROC, "no-proc message %#x", msg);
    MPI_Mrecv(&got, 1, MPI_INT, &msg, &st);
    CHECK(st.MPI_SOURCE == MPI_PROC_NULL, "no-proc receive from %d", st.MPI_SOURCE);

    /* Isendrecv and Isendrecv_replace around the ring. */
    int mine[2] = {rank, rank + 1}, theirs[2] = {-1, -1};
    MPI_Isendrecv(mine, 2, MPI_INT, right, 9, theirs, 2, MPI_INT, left, 9, MPI_COMM_WORLD, &rreq);
    MPI_Wait(&rreq, &st);
    CHECK(theirs[0] == left && theirs[1] == left + 1 && st.MPI_SOURCE == left, "isendrecv %d %d", theirs[0], theirs[1]);
    int buf[3] = {rank, rank, rank};
    MPI_Isendrecv_replace(buf, 3, MPI_INT, right, 10, left, 10, MPI_COMM_WORLD, &rreq);
    MPI_Wait(&rreq, MPI_STATUS_IGNORE);
    CHECK(buf[0] == left && buf[2] == left, "isendrecv_replace %d", buf[0]);

    /* A ready send to a posted receive (the barrier says it is posted), and buffered
     * sends: nonblocking and persistent. */
    got = -1;
    MPI_Irecv(&got, 1, MPI_INT, left, 11, MPI_COMM_WORLD, &rreq);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Irsend(&v, 1, MPI_INT, right, 11, MPI_COMM_WORLD, &sreq);
    MPI_Wait(&sreq, MPI_STATUS_IGNORE);
    MPI_Wait(&rreq, MPI_STATUS_IGNORE);
    CHECK(got == left * 7, "irsend %d", got);
    int bsize = 4 * (MPI_BSEND_OVERHEAD + sizeof(int));
    void *bbuf = malloc(bsize);
    MPI_Buffer_attach(bbuf, bsize);
    MPI_Request pb;
    MPI_Bsend_init(&v, 1, MPI_INT, right, 12, MPI_COMM_WORLD, &pb);
    for (int round = 0; round < 3; round++) {
        v = rank * 100 + round;
        MPI_Start(&pb);
        MPI_Wait(&pb, MPI_STATUS_IGNORE);
        MPI_Recv(&got, 1, MPI_INT, left, 12, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        CHECK(got == left * 100 + round, "bsend_init round %d: %d", round, got);
    }
    MPI_Request_free(&pb);
    MPI_Ibsend(&v, 1, MPI_INT, right, 13, MPI_COMM_WORLD, &sreq);
    MPI_Wait(&sreq, MPI_STATUS_IGNORE);
    MPI_Recv(&got, 1, MPI_INT, left, 13, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    int dsize;
    void *dbuf;
    MPI_Buffer_detach(&dbuf, &dsize);
    CHECK(dbuf == bbuf && dsize == bsize, "buffer_detach %p %d", dbuf, dsize);
    free(bbuf);

    /* Request_get_status leaves the request to a later wait. */
    got = -1;
    MPI_Irecv(&got, 1, MPI_INT, left, 14, MPI_COMM_WORLD, &rreq);
    MPI_Send(&v, 1, MPI_INT, right, 14, MPI_COMM_WORLD);
    flag = 0;
    while (!flag) MPI_Request_get_status(rreq, &flag, &st);
    CHECK(rreq != MPI_REQUEST_NULL && st.MPI_TAG == 14, "get_status left %#x tag %d", rreq, st.MPI_TAG);
    MPI_Wait(&rreq, MPI_STATUS_IGNORE);
    CHECK(rreq == MPI_REQUEST_NULL, "wait after get_status");

    /* The status accessors. */
    MPI_Status made;
    MPI_Status_set_source(&made, 3);
    MPI_Status_set_tag(&made, 44);
    MPI_Status_set_error(&made, MPI_ERR_TAG);
    MPI_Status_set_elements(&made, MPI_DOUBLE, 5);
    MPI_Status_set_cancelled(&made, 1);
    int src, tag, err, n, canc;
    MPI_Status_get_source(&made, &src);
    MPI_Status_get_tag(&made, &tag);
    MPI_Status_get_error(&made, &err);
    MPI_Get_count(&made, MPI_DOUBLE, &n);
    MPI_Test_cancelled(&made, &canc);
    CHECK(src == 3 && tag == 44 && err == MPI_ERR_TAG && n == 5 && canc, "status accessors %d %d %d %d %d", src, tag, err, n, canc);
    MPI_Get_elements(&made, MPI_INT, &n);
    CHECK(n == 10, "get_elements in ints %d", n);
    MPI_Fint fst[MPI_F_STATUS_SIZE];
    MPI_Status back;
    MPI_Status_c2f(&made, fst);
    MPI_Status_f2c(fst, &back);
    CHECK(back.MPI_SOURCE == 3 && back.MPI_TAG == 44 && back.MPI_ERROR == MPI_ERR_TAG, "status c2f/f2c %d %d", back.MPI_SOURCE, back.MPI_TAG);

    /* Reduce_local with a C operation on a contiguous type of two ints. */
    MPI_Datatype pair;
    MPI_Type_contiguous(2, MPI_INT, &pair);
    MPI_Type_commit(&pair);
    MPI_Op op;
    MPI_Op_create(add_pairs, 1, &op);
    int a[4] = {1, 2, 3, 4}, b[4] = {10, 20, 30, 40};
    MPI_Reduce_local(a, b, 2, pair, op);
    CHECK(b[0] == 11 && b[3] == 44, "reduce_local with a user op %d %d", b[0], b[3]);
    MPI_Op_free(&op);
    MPI_Type_free(&pair);

    /* A generalized request: active until completed, then its query fills the status and
     * its free function runs once. */
    MPI_Request g;
    int who = rank;
    MPI_Grequest_start(greq_query, greq_free, greq_cancel, &who, &g);
    flag = 1;
    MPI_Test(&g, &flag, MPI_STATUS_IGNORE);
    CHECK(!flag, "a generalized request completed before MPI_Grequest_complete");
    MPI_Grequest_complete(g);
    MPI_Wait(&g, &st);
    MPI_Get_count(&st, MPI_INT, &n);
    CHECK(g == MPI_REQUEST_NULL && st.MPI_SOURCE == rank && st.MPI_TAG == 21 && n == 3 && greq_freed == 1,
          "grequest: source %d tag %d count %d freed %d", st.MPI_SOURCE, st.MPI_TAG, n, greq_freed);

    /* Large-count forms: counts that fit are handed on, a larger one is MPI_ERR_COUNT. */
    MPI_Count cnt = -1, tsz = -1;
    got = -1;
    v = rank + 1000;
    MPI_Isend_c(&v, 1, MPI_INT, right, 15, MPI_COMM_WORLD, &sreq);
    MPI_Recv_c(&got, (MPI_Count)1, MPI_INT, left, 15, MPI_COMM_WORLD, &st);
    MPI_Wait(&sreq, MPI_STATUS_IGNORE);
    MPI_Get_count_c(&st, MPI_INT, &cnt);
    MPI_Type_size_c(MPI_DOUBLE, &tsz);
    CHECK(got == left + 1000 && cnt == 1 && tsz == 8, "_c forms: %d %lld %lld", got, (long long)cnt, (long long)tsz);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    int rc = MPI_Send_c(&v, -((MPI_Count)1 << 40), MPI_INT, right, 16, MPI_COMM_WORLD), cls = -1;
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_COUNT, "a count of -2^40: class %d", cls);

    /* A status holds 63 bits of count (MPICH's layout: the count's bit 62 is the sign bit of
     * the int it shares with the cancelled flag). */
    MPI_Count big[] = {60, 0x3654321f71234567LL, 0x7654321ff1234567LL}, again = -1;
    for (int i = 0; i < 3; i++) {
        MPI_Status bs;
        MPI_Status_set_cancelled(&bs, 1);
        MPI_Status_set_elements_x(&bs, MPI_BYTE, big[i]);
        int cflag = 0;
        MPI_Get_elements_x(&bs, MPI_BYTE, &again);
        MPI_Test_cancelled(&bs, &cflag);
        CHECK(again == big[i] && cflag == 1, "count %llx came back %llx (cancelled %d)",
              (long long)big[i], (long long)again, cflag);
    }

    int bad = failures, anybad = 0;
    MPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Finalize();
    if (anybad == 0) printf("matched: ok %d\n", rank);
    return anybad == 0 ? 0 : 1;
}
