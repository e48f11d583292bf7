/* Seed 000 through mpi-ext.h. Each rank pairs with rank^1 (itself when that rank does not
 * exist) and, with its partner, binds a send and a receive into channels:
 *  - slack-1 channels made by MPIX_Bind_channels, used in ready mode for 50 rounds (the
 *    receive is started before the partner's send, a zero-byte exchange says so), with the
 *    bind's status naming the partner; then unbound by MPIX_Unbind_channels, after which
 *    the persistent requests work as plain ones again;
 *  - between two distinct ranks, the single forms MPIX_Bind_channel and
 *    MPIX_Ibind_channel (completed by a wait on the in request), over a vector datatype,
 *    with the in request freed before the channel is used and unbound;
 *  - K-slack channels over a circular buffer (MPIX_Ibind_slack_channels, completed by
 *    MPI_Waitall on the in requests, the address increment given by info), K starts
 *    outstanding per end, each start moving one slot;
 *  - a bundle of a receive channel, a synchronous send channel and a persistent allreduce,
 *    started and waited as one, then freed;
 *  - the errors: MPI_Request_free on a channel, a bind of a nonpersistent request, an
 *    unbind of a plain request, a slackness of 0, one start too many on a K-slack channel.
 * Prints "channels: ok <rank>". */
#include <mpi.h>
#include <mpi-ext.h>
#include <string.h>
#define NAME "channels"
#include "check.h"

static int partner;

/* Tell the partner this rank's receives are started (ready mode), and learn the same. */
static void sync_partner(void) {
    MPI_Sendrecv(NULL, 0, MPI_BYTE, partner, 99, NULL, 0, MPI_BYTE, partner, 99, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
}

int main(int argc, char **argv) {
    int size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    partner = (rank ^ 1) < size ? rank ^ 1 : rank;

    /* Slack-1 channels, both directions, bound together. */
    double sbuf[8], rbuf[8];
    MPI_Request ins[2], chans[2];
    MPI_Recv_init(rbuf, 8, MPI_DOUBLE, partner, 1, MPI_COMM_WORLD, &ins[0]);
    MPI_Send_init(sbuf, 8, MPI_DOUBLE, partner, 1, MPI_COMM_WORLD, &ins[1]);
    int rc = MPIX_Bind_channels(ins, chans, 2, NULL);
    CHECK(rc == MPI_SUCCESS, "MPIX_Bind_channels: %d", rc);
    CHECK(chans[0] != MPI_REQUEST_NULL && chans[1] != MPI_REQUEST_NULL && chans[0] != chans[1]
              && chans[0] != ins[0] && chans[0] != ins[1],
          "channel handles %d %d", chans[0], chans[1]);
    for (int round = 0; round < 50; round++) {
        for (int i = 0; i < 8; i++) sbuf[i] = rank * 1000 + round * 10 + i;
        MPI_Start(&chans[0]);
        sync_partner();
        MPI_Start(&chans[1]);
        MPI_Status sts[2];
        MPI_Waitall(2, chans, sts);
        CHECK(chans[0] != MPI_REQUEST_NULL, "round %d: a channel's handle nulled by its wait", round);
        for (int i = 0; i < 8; i++)
            CHECK(rbuf[i] == partner * 1000 + round * 10 + i, "round %d element %d: %g", round, i, rbuf[i]);
    }
    rc = MPIX_Unbind_channels(chans, 2);
    CHECK(rc == MPI_SUCCESS && chans[0] == MPI_REQUEST_NULL && chans[1] == MPI_REQUEST_NULL,
          "MPIX_Unbind_channels: %d, handles %d %d", rc, chans[0], chans[1]);
    /* The requests work as plain persistent ones again (not in ready mode). */
    for (int i = 0; i < 8; i++) sbuf[i] = -rank - i;
    MPI_Startall(2, ins);
    MPI_Waitall(2, ins, MPI_STATUSES_IGNORE);
    for (int i = 0; i < 8; i++) CHECK(rbuf[i] == -partner - i, "after unbind, element %d: %g", i, rbuf[i]);

    /* Iunbind: bind again, unbind by request. */
    rc = MPIX_Bind_channels(ins, chans, 2, NULL);
    CHECK(rc == MPI_SUCCESS, "second bind: %d", rc);
    for (int i = 0; i < 2; i++) {
        rc = MPIX_Iunbind_channel(chans[i], MPI_INFO_NULL);
        CHECK(rc == MPI_SUCCESS, "MPIX_Iunbind_channel: %d", rc);
        rc = MPI_Wait(&chans[i], MPI_STATUS_IGNORE);
        CHECK(rc == MPI_SUCCESS && chans[i] == MPI_REQUEST_NULL, "wait on an unbind: %d %d", rc, chans[i]);
    }

    /* The single forms, between two ranks, over a vector type (every other int). */
    if (partner != rank) {
        int data[16], seen[16];
        MPI_Datatype every_other;
        MPI_Type_vector(8, 1, 2, MPI_INT, &every_other);
        MPI_Type_commit(&every_other);
        MPI_Request in, ch;
        int sender = rank < partner;
        if (sender)
            MPI_Send_init(data, 1, every_other, partner, 2, MPI_COMM_WORLD, &in);
        else
            MPI_Recv_init(seen, 1, every_other, partner, 2, MPI_COMM_WORLD, &in);
        MPI_Status st;
        if (rank % 4 < 2) {
            rc = MPIX_Bind_channel(in, &ch, MPI_INFO_NULL);
            CHECK(rc == MPI_SUCCESS, "MPIX_Bind_channel: %d", rc);
        } else {
            ch = 12345;
            rc = MPIX_Ibind_channel(in, &ch, MPI_INFO_NULL);
            CHECK(rc == MPI_SUCCESS && ch == MPI_REQUEST_NULL, "MPIX_Ibind_channel: %d, out %d", rc, ch);
            rc = MPI_Wait(&in, &st);
            CHECK(rc == MPI_SUCCESS && in != MPI_REQUEST_NULL && ch != MPI_REQUEST_NULL,
                  "wait on the bind: %d, in %d, out %d", rc, in, ch);
            CHECK(st.MPI_SOURCE == partner && st.MPI_TAG == 2, "the bind's status: source %d tag %d",
                  st.MPI_SOURCE, st.MPI_TAG);
        }
        /* The channel outlives the request it was bound from. */
        MPI_Request_free(&in);
        MPI_Type_free(&every_other);
        for (int round = 0; round < 5; round++) {
            for (int i = 0; i < 16; i++) data[i] = round * 100 + i, seen[i] = -1;
            if (!sender) MPI_Start(&ch);
            sync_partner();
            if (sender) MPI_Start(&ch);
            MPI_Wait(&ch, MPI_STATUS_IGNORE);
            if (!sender)
                for (int i = 0; i < 16; i++)
                    CHECK(seen[i] == (i % 2 ? -1 : round * 100 + i), "vector round %d element %d: %d",
                          round, i, seen[i]);
        }
        rc = MPIX_Unbind_channel(ch);
        CHECK(rc == MPI_SUCCESS, "MPIX_Unbind_channel: %d", rc);
    }

    /* K-slack channels over a circular buffer of K slots of 3 ints. */
    enum { K = 4, SLOT = 3 };
    int ring_out[K * SLOT], ring_in[K * SLOT];
    MPI_Request kin[2], kch[2];
    MPI_Recv_init(ring_in, K * SLOT, MPI_INT, partner, 3, MPI_COMM_WORLD, &kin[0]);
    MPI_Send_init(ring_out, K * SLOT, MPI_INT, partner, 3, MPI_COMM_WORLD, &kin[1]);
    MPI_Info inc;
    MPI_Info_create(&inc);
    MPI_Info_set(inc, MPIX_ADDRESS_BASE_INCREMENT, "3");
    int slacks[2] = {K, K};
    MPI_Info infos[2] = {inc, inc};
    rc = MPIX_Ibind_slack_channels(kin, kch, 2, slacks, infos);
    CHECK(rc == MPI_SUCCESS, "MPIX_Ibind_slack_channels: %d", rc);
    MPI_Info_free(&inc);
    MPI_Status bst[2];
    rc = MPI_Waitall(2, kin, bst);
    CHECK(rc == MPI_SUCCESS && kch[0] != MPI_REQUEST_NULL && kch[1] != MPI_REQUEST_NULL,
          "waitall on the binds: %d, channels %d %d", rc, kch[0], kch[1]);
    CHECK(bst[0].MPI_SOURCE == partner && bst[1].MPI_SOURCE == partner, "binds' partners %d %d",
          bst[0].MPI_SOURCE, bst[1].MPI_SOURCE);
    for (int round = 0; round < 3; round++) {
        memset(ring_in, 0xff, sizeof ring_in);
        for (int i = 0; i < K * SLOT; i++) ring_out[i] = rank * 10000 + round * 100 + i;
        for (int j = 0; j < K; j++) MPI_Start(&kch[0]);
        sync_partner();
        for (int j = 0; j < K; j++) MPI_Start(&kch[1]);
        if (round == 0) {
            MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
            MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
            rc = MPI_Start(&kch[1]);
            int cls = -1;
            MPI_Error_class(rc, &cls);
            CHECK(cls == MPI_ERR_REQUEST, "start K+1 on a %d-slack channel: class %d", K, cls);
            MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
            MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_ARE_FATAL);
        }
        for (int j = 0; j < K; j++) MPI_Wait(&kch[1], MPI_STATUS_IGNORE);
        for (int j = 0; j < K; j++) MPI_Wait(&kch[0], MPI_STATUS_IGNORE);
        for (int i = 0; i < K * SLOT; i++)
            CHECK(ring_in[i] == partner * 10000 + round * 100 + i, "ring round %d element %d: %d", round,
                  i, ring_in[i]);
    }
    rc = MPIX_Iunbind_channels(kch, 2);
    CHECK(rc == MPI_SUCCESS, "MPIX_Iunbind_channels: %d", rc);
    MPI_Waitall(2, kch, MPI_STATUSES_IGNORE);
    CHECK(kch[0] == MPI_REQUEST_NULL && kch[1] == MPI_REQUEST_NULL, "unbinds not freed by their wait");
    MPI_Request_free(&kin[0]);
    MPI_Request_free(&kin[1]);

    /* A bundle: a receive channel, a synchronous send channel, a persistent allreduce. */
    int got = -1, mine = rank, sum = -1;
    MPI_Request parts[3], bins[2], bundle;
    MPI_Recv_init(&got, 1, MPI_INT, partner, 4, MPI_COMM_WORLD, &bins[0]);
    MPI_Ssend_init(&mine, 1, MPI_INT, partner, 4, MPI_COMM_WORLD, &bins[1]);
    MPIX_Bind_channels(bins, parts, 2, NULL);
    MPI_Allreduce_init(&mine, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &parts[2]);
    rc = MPIX_Bundle_init(3, parts, MPI_INFO_NULL, &bundle);
    CHECK(rc == MPI_SUCCESS && parts[0] == MPI_REQUEST_NULL && parts[2] == MPI_REQUEST_NULL,
          "MPIX_Bundle_init: %d, members %d %d", rc, parts[0], parts[2]);
    for (int round = 0; round < 5; round++) {
        mine = rank + round;
        got = sum = -1;
        MPI_Start(&bundle);
        MPI_Wait(&bundle, MPI_STATUS_IGNORE);
        CHECK(got == partner + round, "bundle round %d: got %d", round, got);
        CHECK(sum == size * (size - 1) / 2 + size * round, "bundle round %d: sum %d", round, sum);
    }
    MPI_Request_free(&bundle);
    MPI_Request_free(&bins[0]);
    MPI_Request_free(&bins[1]);

    /* Errors. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    int cls;
    MPI_Request plain, ch;
    MPI_Irecv(rbuf, 1, MPI_DOUBLE, partner, 5, MPI_COMM_WORLD, &plain);
    rc = MPIX_Bind_channel(plain, &ch, MPI_INFO_NULL);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_REQUEST, "bind of a nonpersistent receive: class %d", cls);
    rc = MPIX_Unbind_channel(plain);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_REQUEST, "unbind of a plain request: class %d", cls);
    MPI_Send(sbuf, 1, MPI_DOUBLE, partner, 5, MPI_COMM_WORLD);
    MPI_Wait(&plain, MPI_STATUS_IGNORE);

    MPI_Recv_init(rbuf, 1, MPI_DOUBLE, partner, 6, MPI_COMM_WORLD, &ins[0]);
    MPI_Send_init(sbuf, 1, MPI_DOUBLE, partner, 6, MPI_COMM_WORLD, &ins[1]);
    int zero[2] = {0, 0};
    rc = MPIX_Bind_slack_channels(ins, chans, 2, zero, NULL);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_ARG, "slackness 0: class %d", cls);
    rc = MPIX_Bind_channels(ins, chans, 2, NULL);
    CHECK(rc == MPI_SUCCESS, "bind after a refused one: %d", rc);
    rc = MPI_Request_free(&chans[0]);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_REQUEST && chans[0] != MPI_REQUEST_NULL, "MPI_Request_free on a channel: class %d",
          cls);
    rc = MPIX_Unbind_channels(chans, 2);
    CHECK(rc == MPI_SUCCESS, "unbind after the refused free: %d", rc);
    MPI_Request_free(&ins[0]);
    MPI_Request_free(&ins[1]);

    MPI_Finalize();
    if (failures == 0) printf("%s: ok %d\n", NAME, rank);
    return failures != 0;
}
