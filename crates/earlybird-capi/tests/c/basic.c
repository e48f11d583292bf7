/* A C program written to MPI's C binding, compiled with MPICH's mpicc and run on earlybird's
 * libmpi.so.12: point-to-point (blocking, nonblocking, probe), the blocking collectives,
 * communicator management, and errors returned under MPI_ERRORS_RETURN. Every check is a
 * value computed from ranks; the program prints "basic: ok <rank>" and exits 0 only if all
 * hold. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NAME "basic"
#include "check.h"

int main(int argc, char **argv) {
    int size = 0, flag = 0, provided = -1;
    MPI_Initialized(&flag);
    if (flag) return 2;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Initialized(&flag);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(flag == 1, "MPI_Initialized after init is %d", flag);
    CHECK(provided == MPI_THREAD_FUNNELED, "provided %d", provided);
    int v, sv;
    MPI_Get_version(&v, &sv);
    CHECK(v == 4, "version %d.%d", v, sv);
    char name[MPI_MAX_PROCESSOR_NAME];
    int len = 0;
    MPI_Get_processor_name(name, &len);
    CHECK(len > 0 && (int)strlen(name) == len, "processor name of %d chars", len);
#if MPI_VERSION > 4 || (MPI_VERSION == 4 && MPI_SUBVERSION >= 1)
    /* MPI 4.1's hardware information: a new info object, with the host named as above. */
    MPI_Info hw = MPI_INFO_NULL;
    char host[MPI_MAX_INFO_VAL + 1];
    int hflag = 0;
    MPI_Get_hw_resource_info(&hw);
    CHECK(hw != MPI_INFO_NULL, "MPI_Get_hw_resource_info gave no info object");
    MPI_Info_get(hw, "earlybird_host", MPI_MAX_INFO_VAL, host, &hflag);
    CHECK(hflag && strcmp(host, name) == 0, "hardware info's host %s (flag %d), processor name %s", host, hflag, name);
    MPI_Info_free(&hw);
#endif

    int right = (rank + 1) % size, left = (rank + size - 1) % size;

    /* Blocking ring with a status. */
    double out[3] = {rank, rank * 2.0, rank * 3.0}, in[3] = {0};
    MPI_Status st;
    if (rank % 2 == 0) {
        MPI_Send(out, 3, MPI_DOUBLE, right, 7, MPI_COMM_WORLD);
        MPI_Recv(in, 3, MPI_DOUBLE, left, 7, MPI_COMM_WORLD, &st);
    } else {
        MPI_Recv(in, 3, MPI_DOUBLE, left, 7, MPI_COMM_WORLD, &st);
        MPI_Send(out, 3, MPI_DOUBLE, right, 7, MPI_COMM_WORLD);
    }
    int count = -1;
    MPI_Get_count(&st, MPI_DOUBLE, &count);
    CHECK(in[0] == left && in[2] == left * 3.0, "ring got %g %g", in[0], in[2]);
    CHECK(st.MPI_SOURCE == left && st.MPI_TAG == 7 && count == 3,
          "status source %d tag %d count %d", st.MPI_SOURCE, st.MPI_TAG, count);

    /* Nonblocking both ways, with ANY_SOURCE and waitall. */
    int sbuf[100], rbuf[100];
    for (int i = 0; i < 100; i++) sbuf[i] = rank * 1000 + i;
    MPI_Request reqs[2];
    MPI_Status sts[2];
    MPI_Irecv(rbuf, 100, MPI_INT, MPI_ANY_SOURCE, 9, MPI_COMM_WORLD, &reqs[0]);
    MPI_Isend(sbuf, 100, MPI_INT, right, 9, MPI_COMM_WORLD, &reqs[1]);
    MPI_Waitall(2, reqs, sts);
    CHECK(reqs[0] == MPI_REQUEST_NULL && reqs[1] == MPI_REQUEST_NULL, "requests not nulled");
    CHECK(sts[0].MPI_SOURCE == left, "any-source status %d", sts[0].MPI_SOURCE);
    for (int i = 0; i < 100; i++) CHECK(rbuf[i] == left * 1000 + i, "element %d: %d", i, rbuf[i]);

    /* Test until done; probe then receive; PROC_NULL. */
    MPI_Request r;
    long lv = rank;
    MPI_Isend(&lv, 1, MPI_LONG, right, 11, MPI_COMM_WORLD, &r);
    MPI_Probe(left, 11, MPI_COMM_WORLD, &st);
    MPI_Get_count(&st, MPI_LONG, &count);
    CHECK(count == 1 && st.MPI_SOURCE == left, "probe count %d source %d", count, st.MPI_SOURCE);
    long got = -1;
    MPI_Recv(&got, 1, MPI_LONG, left, 11, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    CHECK(got == left, "probed message %ld", got);
    int done = 0;
    while (!done) MPI_Test(&r, &done, MPI_STATUS_IGNORE);
    MPI_Recv(&got, 1, MPI_LONG, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &st);
    CHECK(st.MPI_SOURCE == MPI_PROC_NULL, "PROC_NULL source %d", st.MPI_SOURCE);
    MPI_Sendrecv(&lv, 1, MPI_LONG, right, 12, &got, 1, MPI_LONG, left, 12, MPI_COMM_WORLD, &st);
    CHECK(got == left, "sendrecv %ld", got);

    /* Types without a plain Rust slice behind them (pairs, complex) take the typed road. */
    int pairs[4] = {rank, 1, rank, 2}, pin[4] = {0};
    MPI_Request pr[2];
    MPI_Irecv(pin, 2, MPI_2INT, left, 13, MPI_COMM_WORLD, &pr[0]);
    MPI_Isend(pairs, 2, MPI_2INT, right, 13, MPI_COMM_WORLD, &pr[1]);
    MPI_Waitall(2, pr, MPI_STATUSES_IGNORE);
    CHECK(pin[0] == left && pin[1] == 1 && pin[3] == 2, "MPI_2INT %d %d %d", pin[0], pin[1], pin[3]);
    double cz[2] = {rank, -rank}, cin[2] = {0};
    MPI_Sendrecv(cz, 1, MPI_C_DOUBLE_COMPLEX, right, 14, cin, 1, MPI_C_DOUBLE_COMPLEX, left, 14,
                 MPI_COMM_WORLD, &st);
    MPI_Get_count(&st, MPI_C_DOUBLE_COMPLEX, &count);
    CHECK(cin[0] == left && cin[1] == -left && count == 1, "complex %g %g count %d", cin[0], cin[1], count);

    /* Collectives. */
    int root = size - 1, b = (rank == root) ? 42 : 0;
    MPI_Bcast(&b, 1, MPI_INT, root, MPI_COMM_WORLD);
    CHECK(b == 42, "bcast %d", b);
    long s = rank + 1, total = 0;
    MPI_Reduce(&s, &total, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) CHECK(total == (long)size * (size + 1) / 2, "reduce %ld", total);
    double mx = rank;
    MPI_Allreduce(MPI_IN_PLACE, &mx, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    CHECK(mx == size - 1, "allreduce in place %g", mx);
    int *all = malloc(sizeof(int) * size * 2);
    int mine[2] = {rank, -rank};
    MPI_Allgather(mine, 2, MPI_INT, all, 2, MPI_INT, MPI_COMM_WORLD);
    for (int q = 0; q < size; q++) CHECK(all[2 * q] == q && all[2 * q + 1] == -q, "allgather %d", q);
    MPI_Gather(mine, 2, MPI_INT, all, 2, MPI_INT, 0, MPI_COMM_WORLD);
    if (rank == 0)
        for (int q = 0; q < size; q++) CHECK(all[2 * q] == q, "gather %d", q);
    int piece[2] = {0};
    if (rank == 0)
        for (int q = 0; q < size; q++) all[2 * q] = q * 10, all[2 * q + 1] = q * 10 + 1;
    MPI_Scatter(all, 2, MPI_INT, piece, 2, MPI_INT, 0, MPI_COMM_WORLD);
    CHECK(piece[0] == rank * 10 && piece[1] == rank * 10 + 1, "scatter %d %d", piece[0], piece[1]);
    int *to = malloc(sizeof(int) * size), *from = malloc(sizeof(int) * size);
    for (int q = 0; q < size; q++) to[q] = rank * 100 + q;
    MPI_Alltoall(to, 1, MPI_INT, from, 1, MPI_INT, MPI_COMM_WORLD);
    for (int q = 0; q < size; q++) CHECK(from[q] == q * 100 + rank, "alltoall %d", q);
    MPI_Barrier(MPI_COMM_WORLD);

    /* Communicators: split by parity, dup, compare, free. */
    MPI_Comm half, dup;
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &half);
    int hr, hs;
    MPI_Comm_rank(half, &hr);
    MPI_Comm_size(half, &hs);
    CHECK(hs == (size - rank % 2 + 1) / 2, "half size %d", hs);
    CHECK(hr == (hs - 1) - rank / 2, "half rank %d (keys reverse the order)", hr);
    int hsum = 0, one = 1;
    MPI_Allreduce(&one, &hsum, 1, MPI_INT, MPI_SUM, half);
    CHECK(hsum == hs, "allreduce on the split %d", hsum);
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    int cmp = -1;
    MPI_Comm_compare(dup, MPI_COMM_WORLD, &cmp);
    CHECK(cmp == MPI_CONGRUENT, "compare dup %d", cmp);
    MPI_Comm_free(&dup);
    CHECK(dup == MPI_COMM_NULL, "freed handle not nulled");
    MPI_Comm none;
    MPI_Comm_split(MPI_COMM_WORLD, MPI_UNDEFINED, 0, &none);
    CHECK(none == MPI_COMM_NULL, "split with MPI_UNDEFINED");
    MPI_Comm_free(&half);

    /* Pack an int and three doubles, send the packed bytes, unpack them. */
    char packed[64];
    int pos = 0, psize = 0, pi = rank * 3, upi = -1;
    double pd[3] = {rank + 0.25, rank + 0.5, rank + 0.75}, upd[3] = {0};
    MPI_Pack_size(3, MPI_DOUBLE, MPI_COMM_WORLD, &psize);
    CHECK(psize >= 24, "pack_size %d", psize);
    MPI_Pack(&pi, 1, MPI_INT, packed, sizeof packed, &pos, MPI_COMM_WORLD);
    MPI_Pack(pd, 3, MPI_DOUBLE, packed, sizeof packed, &pos, MPI_COMM_WORLD);
    CHECK(pos == 4 + 24, "packed %d bytes", pos);
    char upacked[64];
    MPI_Sendrecv(packed, pos, MPI_PACKED, right, 15, upacked, sizeof upacked, MPI_PACKED, left, 15, MPI_COMM_WORLD, &st);
    int got_bytes = 0;
    MPI_Get_count(&st, MPI_PACKED, &got_bytes);
    pos = 0;
    MPI_Unpack(upacked, got_bytes, &pos, &upi, 1, MPI_INT, MPI_COMM_WORLD);
    MPI_Unpack(upacked, got_bytes, &pos, upd, 3, MPI_DOUBLE, MPI_COMM_WORLD);
    CHECK(upi == left * 3 && upd[0] == left + 0.25 && upd[2] == left + 0.75, "unpacked %d %g %g", upi, upd[0], upd[2]);

    /* A buffered send through an attached buffer. */
    int bsize = 1024 + MPI_BSEND_OVERHEAD;
    char *bbuf = malloc(bsize);
    MPI_Buffer_attach(bbuf, bsize);
    int bv = rank + 500, bgot = -1;
    MPI_Bsend(&bv, 1, MPI_INT, right, 16, MPI_COMM_WORLD);
    MPI_Recv(&bgot, 1, MPI_INT, left, 16, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    CHECK(bgot == left + 500, "bsend %d", bgot);
    void *back = NULL;
    int back_size = 0;
    MPI_Buffer_detach(&back, &back_size);
    CHECK(back == bbuf && back_size == bsize, "detach gave %p %d", back, back_size);
#if MPI_VERSION > 4 || (MPI_VERSION == 4 && MPI_SUBVERSION >= 1)
    /* MPI 4.1: a buffer of a communicator's own, used by its buffered sends (the process has
     * none now), flushed blocking and nonblocking, detached; an automatic one; the process's
     * flushes. */
    MPI_Comm bc;
    MPI_Comm_dup(MPI_COMM_WORLD, &bc);
    MPI_Comm_attach_buffer(bc, bbuf, bsize);
    bv = rank + 600;
    MPI_Bsend(&bv, 1, MPI_INT, right, 17, bc);
    MPI_Recv(&bgot, 1, MPI_INT, left, 17, bc, MPI_STATUS_IGNORE);
    CHECK(bgot == left + 600, "bsend on the communicator's buffer %d", bgot);
    MPI_Request fr = MPI_REQUEST_NULL;
    MPI_Comm_flush_buffer(bc);
    MPI_Comm_iflush_buffer(bc, &fr);
    MPI_Wait(&fr, MPI_STATUS_IGNORE);
    CHECK(fr == MPI_REQUEST_NULL, "MPI_Comm_iflush_buffer's request completed");
    back = NULL;
    back_size = 0;
    MPI_Comm_detach_buffer(bc, &back, &back_size);
    CHECK(back == bbuf && back_size == bsize, "communicator detach gave %p %d", back, back_size);
    MPI_Comm_set_errhandler(bc, MPI_ERRORS_RETURN);
    int brc = MPI_Comm_detach_buffer(bc, &back, &back_size), bcls = -1;
    MPI_Error_class(brc, &bcls);
    CHECK(bcls == MPI_ERR_BUFFER, "detach of no buffer: class %d", bcls);
    MPI_Comm_attach_buffer(bc, MPI_BUFFER_AUTOMATIC, 0);
    MPI_Bsend(&bv, 1, MPI_INT, right, 18, bc);
    MPI_Recv(&bgot, 1, MPI_INT, left, 18, bc, MPI_STATUS_IGNORE);
    CHECK(bgot == left + 600, "bsend on an automatic buffer %d", bgot);
    MPI_Comm_detach_buffer(bc, &back, &back_size);
    CHECK(back == MPI_BUFFER_AUTOMATIC, "detach of an automatic buffer gave %p", back);
    MPI_Comm_free(&bc);
    MPI_Buffer_attach(bbuf, bsize);
    MPI_Buffer_flush();
    MPI_Buffer_iflush(&fr);
    MPI_Wait(&fr, MPI_STATUS_IGNORE);
    MPI_Buffer_detach(&back, &back_size);
    CHECK(back == bbuf, "process detach after the flushes gave %p", back);
#endif
    free(bbuf);

    /* Info objects and names. */
    MPI_Info info, info2;
    MPI_Info_create(&info);
    MPI_Info_set(info, "color", "blue");
    MPI_Info_set(info, "size", "12345");
    int nkeys = -1, vlen = -1, found = 0;
    MPI_Info_get_nkeys(info, &nkeys);
    CHECK(nkeys == 2, "info keys %d", nkeys);
    char key[MPI_MAX_INFO_KEY + 1], val[8];
    MPI_Info_get_nthkey(info, 1, key);
    CHECK(strcmp(key, "size") == 0, "second key %s", key);
    MPI_Info_get_valuelen(info, "size", &vlen, &found);
    CHECK(found && vlen == 5, "valuelen %d", vlen);
    MPI_Info_get(info, "size", 7, val, &found);
    CHECK(found && strcmp(val, "12345") == 0, "value %s", val);
    MPI_Info_dup(info, &info2);
    MPI_Info_delete(info, "color");
    MPI_Info_get(info, "color", 7, val, &found);
    CHECK(!found, "deleted key found");
    MPI_Info_get(info2, "color", 7, val, &found);
    CHECK(found && strcmp(val, "blue") == 0, "dup lost a key: %s", val);
    MPI_Info_free(&info);
    MPI_Info_free(&info2);
    CHECK(info == MPI_INFO_NULL, "freed info not nulled");
    char cname[MPI_MAX_OBJECT_NAME];
    MPI_Comm_get_name(MPI_COMM_WORLD, cname, &len);
    CHECK(strcmp(cname, "MPI_COMM_WORLD") == 0, "world is named %s", cname);
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Comm_set_name(dup, "my dup");
    MPI_Comm_get_name(dup, cname, &len);
    CHECK(strcmp(cname, "my dup") == 0 && len == 6, "dup is named %s", cname);
    MPI_Comm_free(&dup);
    MPI_Type_get_name(MPI_DOUBLE, cname, &len);
    CHECK(strcmp(cname, "MPI_DOUBLE") == 0, "MPI_DOUBLE is named %s", cname);

    /* Errors come back under MPI_ERRORS_RETURN, each with its class. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int cls = -1, rc;
    rc = MPI_Send(out, 1, MPI_DOUBLE, size + 5, 0, MPI_COMM_WORLD);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_RANK, "bad rank gave class %d", cls);
    {
        /* The same with one-byte datatypes, which MPI_Send, MPI_Isend and MPI_Recv take by a
         * shorter way. */
        char bytes[4] = {0};
        MPI_Request breq = MPI_REQUEST_NULL;
        rc = MPI_Send(bytes, 4, MPI_BYTE, size + 5, 0, MPI_COMM_WORLD);
        MPI_Error_class(rc, &cls);
        CHECK(cls == MPI_ERR_RANK, "bad rank of a byte send gave class %d", cls);
        rc = MPI_Isend(bytes, 4, MPI_CHAR, size + 5, 0, MPI_COMM_WORLD, &breq);
        MPI_Error_class(rc, &cls);
        CHECK(cls == MPI_ERR_RANK && breq == MPI_REQUEST_NULL, "bad rank of a byte isend gave class %d", cls);
        rc = MPI_Recv(bytes, 4, MPI_BYTE, size + 5, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Error_class(rc, &cls);
        CHECK(cls == MPI_ERR_RANK, "bad rank of a byte recv gave class %d", cls);
        rc = MPI_Recv(bytes, 4, MPI_BYTE, right, -5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Error_class(rc, &cls);
        CHECK(cls == MPI_ERR_TAG, "bad tag of a byte recv gave class %d", cls);
    }
    rc = MPI_Send(out, -1, MPI_DOUBLE, right, 0, MPI_COMM_WORLD);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_COUNT, "negative count gave class %d", cls);
    rc = MPI_Send(out, 1, (MPI_Datatype)0x4c00ffff, right, 0, MPI_COMM_WORLD);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_TYPE, "bad datatype gave class %d", cls);
    rc = MPI_Barrier((MPI_Comm)0x84000123);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_COMM, "bad communicator gave class %d", cls);
    char msg[MPI_MAX_ERROR_STRING];
    MPI_Error_string(rc, msg, &len);
    CHECK(len > 0, "error string of %d chars", len);
    /* MPI_Waitall with one failed request: MPI_ERR_IN_STATUS, each status its own error, every
     * request completed. The second receive is one element short of its message. */
    {
        MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
        int two[2] = {1, 2}, got[3] = {0, 0, 0};
        MPI_Request wr[4];
        MPI_Status ws[4];
        MPI_Irecv(&got[0], 1, MPI_INT, 0, 31, MPI_COMM_SELF, &wr[0]);
        MPI_Irecv(&got[1], 1, MPI_INT, 0, 32, MPI_COMM_SELF, &wr[1]);
        MPI_Isend(&two[0], 1, MPI_INT, 0, 31, MPI_COMM_SELF, &wr[2]);
        MPI_Isend(two, 2, MPI_INT, 0, 32, MPI_COMM_SELF, &wr[3]);
        for (int i = 0; i < 4; i++) ws[i].MPI_ERROR = -1;
        rc = MPI_Waitall(4, wr, ws);
        MPI_Error_class(rc, &cls);
        CHECK(cls == MPI_ERR_IN_STATUS, "Waitall with a truncated receive gave class %d", cls);
        MPI_Error_class(ws[1].MPI_ERROR, &cls);
        CHECK(cls == MPI_ERR_TRUNCATE, "the truncated receive's status has class %d", cls);
        CHECK(ws[0].MPI_ERROR == MPI_SUCCESS && ws[2].MPI_ERROR == MPI_SUCCESS,
              "the others' statuses say %d and %d", ws[0].MPI_ERROR, ws[2].MPI_ERROR);
        CHECK(got[0] == 1 && ws[0].MPI_TAG == 31, "the good receive got %d, tag %d", got[0], ws[0].MPI_TAG);
        int nulls = 0;
        for (int i = 0; i < 4; i++) nulls += wr[i] == MPI_REQUEST_NULL;
        CHECK(nulls == 4, "%d of 4 requests are MPI_REQUEST_NULL after Waitall", nulls);
    }

    /* The data sentinels are exported, distinct, and not null. */
    CHECK(MPI_UNWEIGHTED != NULL && MPI_WEIGHTS_EMPTY != NULL && (void *)MPI_UNWEIGHTED != (void *)MPI_WEIGHTS_EMPTY,
          "MPI_UNWEIGHTED %p, MPI_WEIGHTS_EMPTY %p", (void *)MPI_UNWEIGHTED, (void *)MPI_WEIGHTS_EMPTY);
    /* Address arithmetic. */
    MPI_Aint a0, a1;
    MPI_Get_address(&to[0], &a0);
    MPI_Get_address(&to[1], &a1);
    CHECK(MPI_Aint_diff(a1, a0) == (MPI_Aint)sizeof(to[0]) && MPI_Aint_add(a0, sizeof(to[0])) == a1,
          "MPI_Aint_diff %ld, MPI_Aint_add %ld vs %ld", (long)MPI_Aint_diff(a1, a0), (long)MPI_Aint_add(a0, sizeof(to[0])), (long)a1);

    /* Error classes, codes and strings of the program's, added and removed (MPI 4.1's
     * MPI_Remove_error_*, and MPICH 4.0's names of them, MPIX_Delete_error_*, which MPICH
     * 4.0's header, an MPI 4.0 one, has alone). */
#if MPI_VERSION == 4 && MPI_SUBVERSION == 0
#define MPI_Remove_error_string MPIX_Delete_error_string
#define MPI_Remove_error_code MPIX_Delete_error_code
#define MPI_Remove_error_class MPIX_Delete_error_class
#endif
    for (int round = 0; round < 2; round++) {
        int cls, code, got = -1, len = 0;
        char text[MPI_MAX_ERROR_STRING];
        MPI_Add_error_class(&cls);
        MPI_Add_error_code(cls, &code);
        MPI_Add_error_string(code, "a code of the program's");
        MPI_Error_class(code, &got);
        MPI_Error_string(code, text, &len);
        CHECK(got == cls && strcmp(text, "a code of the program's") == 0, "added code: class %d, '%s'", got, text);
        int rs = round ? MPIX_Delete_error_string(code) : MPI_Remove_error_string(code);
        int rc = round ? MPIX_Delete_error_code(code) : MPI_Remove_error_code(code);
        int rk = round ? MPIX_Delete_error_class(cls) : MPI_Remove_error_class(cls);
        CHECK(rs == MPI_SUCCESS && rc == MPI_SUCCESS && rk == MPI_SUCCESS, "removal (round %d): %d %d %d", round, rs, rc, rk);
    }

    free(all);
    free(to);
    free(from);
    int bad = failures, anybad = 0;
    MPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Finalize();
    MPI_Finalized(&flag);
    if (anybad == 0 && flag) printf("basic: ok %d\n", rank);
    return anybad == 0 ? 0 : 1;
}
