/* The v-collectives, scans, reduce_scatter_block, nonblocking collectives completed by
 * Waitany and Testall, and MPI_TAG_UB through MPI_Comm_get_attr. Rank r contributes r + 1
 * elements where the counts vary. Prints "collectives: ok <rank>" and exits 0 only if every
 * value holds. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define NAME "collectives"
#include "check.h"

/* A user operation: element-wise b = a + b on ints, noting the datatype it was given. */
static MPI_Datatype seen_type = MPI_DATATYPE_NULL;
static void int_sum(void *in, void *inout, int *len, MPI_Datatype *dt) {
    int *a = in, *b = inout;
    seen_type = *dt;
    for (int i = 0; i < *len; i++) b[i] += a[i];
}

/* The same through MPI_Op_create_c's callback, whose length is an MPI_Count. */
static MPI_Count seen_len = -1;
static void int_sum_c(void *in, void *inout, MPI_Count *len, MPI_Datatype *dt) {
    int *a = in, *b = inout;
    seen_type = *dt;
    seen_len = *len;
    for (MPI_Count i = 0; i < *len; i++) b[i] += a[i];
}

/* A non-commutative one: 2x2 matrix product b = a * b, one matrix per element of a
 * contiguous type of 4 doubles. */
static void matmul(void *in, void *inout, int *len, MPI_Datatype *dt) {
    (void)dt;
    double *a = in, *b = inout;
    for (int k = 0; k < *len; k++, a += 4, b += 4) {
        double r[4] = {a[0] * b[0] + a[1] * b[2], a[0] * b[1] + a[1] * b[3],
                       a[2] * b[0] + a[3] * b[2], a[2] * b[1] + a[3] * b[3]};
        for (int i = 0; i < 4; i++) b[i] = r[i];
    }
}

int main(int argc, char **argv) {
    int size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int *counts = malloc(sizeof(int) * size), *displs = malloc(sizeof(int) * size);
    int total = 0;
    for (int q = 0; q < size; q++) {
        counts[q] = q + 1;
        displs[q] = total + q; /* a gap of q elements before block q */
        total = displs[q] + counts[q];
    }
    int mine[64], *all = malloc(sizeof(int) * (total + 1));
    for (int i = 0; i <= rank; i++) mine[i] = rank * 100 + i;

    /* Gatherv to the last rank, then Scatterv back from it. */
    int root = size - 1;
    for (int i = 0; i < total; i++) all[i] = -1;
    MPI_Gatherv(mine, rank + 1, MPI_INT, all, counts, displs, MPI_INT, root, MPI_COMM_WORLD);
    if (rank == root)
        for (int q = 0; q < size; q++)
            for (int i = 0; i < counts[q]; i++)
                CHECK(all[displs[q] + i] == q * 100 + i, "gatherv block %d element %d: %d", q, i, all[displs[q] + i]);
    int back[64] = {0};
    MPI_Scatterv(all, counts, displs, MPI_INT, back, rank + 1, MPI_INT, root, MPI_COMM_WORLD);
    for (int i = 0; i <= rank; i++) CHECK(back[i] == rank * 100 + i, "scatterv %d: %d", i, back[i]);

    /* Allgatherv everywhere; the gaps stay untouched. */
    for (int i = 0; i < total; i++) all[i] = -7;
    MPI_Allgatherv(mine, rank + 1, MPI_INT, all, counts, displs, MPI_INT, MPI_COMM_WORLD);
    for (int q = 0; q < size; q++) {
        for (int i = 0; i < counts[q]; i++) CHECK(all[displs[q] + i] == q * 100 + i, "allgatherv %d.%d", q, i);
        if (q > 0) CHECK(all[displs[q] - 1] == -7, "allgatherv gap before %d written", q);
    }

    /* Alltoallv: rank r sends q + 1 elements to q, receives r + 1 from each. */
    int *sc = malloc(sizeof(int) * size), *sd = malloc(sizeof(int) * size);
    int *rc = malloc(sizeof(int) * size), *rd = malloc(sizeof(int) * size);
    int st = 0, rt = 0;
    for (int q = 0; q < size; q++) {
        sc[q] = q + 1, sd[q] = st, st += sc[q];
        rc[q] = rank + 1, rd[q] = rt, rt += rc[q];
    }
    long *sb = malloc(sizeof(long) * st), *rb = malloc(sizeof(long) * rt);
    for (int q = 0; q < size; q++)
        for (int i = 0; i < sc[q]; i++) sb[sd[q] + i] = rank * 1000 + q * 10 + i;
    MPI_Alltoallv(sb, sc, sd, MPI_LONG, rb, rc, rd, MPI_LONG, MPI_COMM_WORLD);
    for (int q = 0; q < size; q++)
        for (int i = 0; i < rc[q]; i++)
            CHECK(rb[rd[q] + i] == q * 1000 + rank * 10 + i, "alltoallv from %d element %d: %ld", q, i, rb[rd[q] + i]);

    /* Scans and reduce_scatter_block. */
    int v = rank + 1, sum = 0, ex = -5;
    MPI_Scan(&v, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    CHECK(sum == (rank + 1) * (rank + 2) / 2, "scan %d", sum);
    MPI_Exscan(&v, &ex, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank > 0) CHECK(ex == rank * (rank + 1) / 2, "exscan %d", ex);
    double *blocks = malloc(sizeof(double) * 2 * size), mine2[2];
    for (int q = 0; q < size; q++) blocks[2 * q] = q, blocks[2 * q + 1] = rank;
    MPI_Reduce_scatter_block(blocks, mine2, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    CHECK(mine2[0] == (double)rank * size && mine2[1] == size * (size - 1) / 2.0,
          "reduce_scatter_block %g %g", mine2[0], mine2[1]);

    /* Nonblocking collectives, completed by Waitany and Testall. */
    MPI_Request reqs[3];
    int b = (rank == 0) ? 99 : 0;
    double x = rank, mx = -1;
    MPI_Ibarrier(MPI_COMM_WORLD, &reqs[0]);
    MPI_Ibcast(&b, 1, MPI_INT, 0, MPI_COMM_WORLD, &reqs[1]);
    MPI_Iallreduce(&x, &mx, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD, &reqs[2]);
    int done[3] = {0}, idx;
    for (int k = 0; k < 2; k++) {
        MPI_Waitany(3, reqs, &idx, MPI_STATUS_IGNORE);
        CHECK(idx >= 0 && idx < 3 && !done[idx], "waitany index %d", idx);
        if (idx >= 0 && idx < 3) done[idx] = 1;
    }
    int flag = 0;
    while (!flag) MPI_Testall(3, reqs, &flag, MPI_STATUSES_IGNORE);
    CHECK(reqs[0] == MPI_REQUEST_NULL && reqs[1] == MPI_REQUEST_NULL && reqs[2] == MPI_REQUEST_NULL,
          "requests not nulled");
    MPI_Waitany(3, reqs, &idx, MPI_STATUS_IGNORE);
    CHECK(idx == MPI_UNDEFINED, "waitany on null requests gave %d", idx);
    CHECK(b == 99 && mx == size - 1, "ibcast %d iallreduce %g", b, mx);

    /* Reduce_scatter with varying counts, Reduce_local, Sendrecv_replace, Alloc_mem. */
    int *rs_send = malloc(sizeof(int) * (size * (size + 1) / 2)), rs_recv[64];
    for (int i = 0, k = 0; i < size; i++)
        for (int j = 0; j <= i; j++, k++) rs_send[k] = rank + j;
    MPI_Reduce_scatter(rs_send, rs_recv, counts, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    for (int j = 0; j <= rank; j++)
        CHECK(rs_recv[j] == size * (size - 1) / 2 + size * j, "reduce_scatter %d: %d", j, rs_recv[j]);
    free(rs_send);
    signed char lin[3] = {-5, 7, 1}, lio[3] = {-3, 2, 1};
    MPI_Reduce_local(lin, lio, 3, MPI_SIGNED_CHAR, MPI_MIN);
    CHECK(lio[0] == -5 && lio[1] == 2 && lio[2] == 1, "reduce_local %d %d %d", lio[0], lio[1], lio[2]);
    double *mem = NULL;
    MPI_Alloc_mem(4 * sizeof(double), MPI_INFO_NULL, &mem);
    CHECK(mem != NULL, "alloc_mem");
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    for (int i = 0; i < 4; i++) mem[i] = rank + i / 10.0;
    MPI_Sendrecv_replace(mem, 4, MPI_DOUBLE, right, 21, left, 21, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    CHECK(mem[0] == left && mem[3] == left + 0.3, "sendrecv_replace %g %g", mem[0], mem[3]);
    MPI_Free_mem(mem);

    /* Groups: the odd ranks' group, translated, and a communicator made of it. */
    MPI_Group world, odd;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    int nodd = size / 2, *odds = malloc(sizeof(int) * (nodd + 1)), *back2 = malloc(sizeof(int) * (nodd + 1));
    for (int i = 0; i < nodd; i++) odds[i] = 2 * i + 1;
    MPI_Group_incl(world, nodd, odds, &odd);
    int gs = -1, gr = -2;
    MPI_Group_size(odd, &gs);
    MPI_Group_rank(odd, &gr);
    CHECK(gs == nodd, "odd group size %d", gs);
    CHECK(gr == (rank % 2 ? rank / 2 : MPI_UNDEFINED), "odd group rank %d", gr);
    int mine_in_odd[1] = {0};
    MPI_Group_translate_ranks(odd, nodd > 0 ? 1 : 0, mine_in_odd, world, back2);
    if (nodd > 0) CHECK(back2[0] == 1, "translate gave %d", back2[0]);
    MPI_Comm oddc;
    MPI_Comm_create(MPI_COMM_WORLD, odd, &oddc);
    if (rank % 2) {
        int os = -1;
        MPI_Comm_size(oddc, &os);
        CHECK(os == nodd, "odd communicator of %d", os);
        MPI_Comm_free(&oddc);
    } else {
        CHECK(oddc == MPI_COMM_NULL, "an even rank got a communicator");
    }
    MPI_Group_free(&odd);
    MPI_Group_free(&world);
    CHECK(world == MPI_GROUP_NULL, "freed group not nulled");
    free(odds);
    free(back2);

    /* User operations through C callbacks. */
    MPI_Op usum, mm;
    MPI_Op_create(int_sum, 1, &usum);
    MPI_Op_create(matmul, 0, &mm);
    int commutes = -1;
    MPI_Op_commutative(mm, &commutes);
    CHECK(commutes == 0, "matmul commutative %d", commutes);
    int uv[3] = {rank, 1, 2 * rank}, ures[3] = {0};
    MPI_Allreduce(uv, ures, 3, MPI_INT, usum, MPI_COMM_WORLD);
    CHECK(ures[0] == size * (size - 1) / 2 && ures[1] == size && ures[2] == size * (size - 1),
          "user sum %d %d %d", ures[0], ures[1], ures[2]);
    /* Not every rank applies the operation (the algorithm decides); one that did saw MPI_INT. */
    CHECK(seen_type == MPI_DATATYPE_NULL || seen_type == MPI_INT, "the user function saw datatype %#x",
          (unsigned)seen_type);
    /* MPI_Op_create_c: the same sum, told the length as an MPI_Count. */
    MPI_Op usum_c;
    MPI_Op_create_c(int_sum_c, 1, &usum_c);
    int cres[3] = {0};
    seen_len = -1;
    MPI_Allreduce(uv, cres, 3, MPI_INT, usum_c, MPI_COMM_WORLD);
    CHECK(cres[0] == ures[0] && cres[1] == ures[1] && cres[2] == ures[2], "MPI_Op_create_c sum %d %d %d",
          cres[0], cres[1], cres[2]);
    CHECK(seen_len == -1 || seen_len == 3, "MPI_Op_create_c length %lld", (long long)seen_len);
    int cin[2] = {5, 6}, cio[2] = {10, 20};
    MPI_Reduce_local(cin, cio, 2, MPI_INT, usum_c);
    CHECK(cio[0] == 15 && cio[1] == 26 && seen_len == 2, "MPI_Reduce_local with MPI_Op_create_c: %d %d (length %lld)",
          cio[0], cio[1], (long long)seen_len);
    MPI_Op_free(&usum_c);
    CHECK(usum_c == MPI_OP_NULL, "MPI_Op_free of a large-count operation");
    MPI_Datatype mat;
    MPI_Type_contiguous(4, MPI_DOUBLE, &mat);
    MPI_Type_commit(&mat);
    /* Rank r's matrix is [[1, r], [0, 1]]: the ordered product is [[1, sum r], [0, 1]]; with
     * rank 0's [[0, 1], [1, 0]] first it would differ if the order were not kept. */
    double M[4] = {1, rank, 0, 1}, P[4] = {0};
    if (rank == 0) M[0] = 0, M[1] = 1, M[2] = 1, M[3] = 0;
    MPI_Reduce(M, P, 1, mat, mm, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        /* [[0,1],[1,0]] * [[1,s],[0,1]] with s = sum of ranks 1..size-1 = [[0,1],[1,s]]. */
        double s = size * (size - 1) / 2.0;
        if (size == 1) CHECK(P[0] == 0 && P[1] == 1 && P[2] == 1 && P[3] == 0, "product alone");
        else CHECK(P[0] == 0 && P[1] == 1 && P[2] == 1 && P[3] == s, "ordered product %g %g %g %g", P[0], P[1], P[2], P[3]);
    }
    MPI_Type_free(&mat);
    MPI_Op_free(&usum);
    MPI_Op_free(&mm);
    CHECK(usum == MPI_OP_NULL, "freed op not nulled");

    /* The nonblocking forms of the others, all in flight at once, then one Waitall. */
    {
        int nroot = size - 1;
        long nsum = -1, nin = rank + 1;
        int *ng = malloc(sizeof(int) * size * 2), *nag = malloc(sizeof(int) * size), *na2a = malloc(sizeof(int) * size),
            *nto = malloc(sizeof(int) * size), *nagv = malloc(sizeof(int) * (total + 1)), *ngv = malloc(sizeof(int) * (total + 1));
        int nsc[2] = {0}, nmine = rank * 7, nscv[64] = {0}, nrs[64] = {0};
        int *nsrc = malloc(sizeof(int) * size * 2), *nrsin = malloc(sizeof(int) * (size * (size + 1) / 2 + 1));
        for (int q = 0; q < size; q++) nto[q] = rank * 100 + q, nsrc[2 * q] = q, nsrc[2 * q + 1] = -q;
        for (int i = 0, k = 0; i < size; i++)
            for (int j = 0; j <= i; j++, k++) nrsin[k] = 1;
        long *nsb = malloc(sizeof(long) * st), *nrb = malloc(sizeof(long) * rt);
        for (int q = 0; q < size; q++)
            for (int i = 0; i < sc[q]; i++) nsb[sd[q] + i] = rank * 1000 + q * 10 + i;
        MPI_Request nr[10];
        MPI_Ireduce(&nin, &nsum, 1, MPI_LONG, MPI_SUM, nroot, MPI_COMM_WORLD, &nr[0]);
        MPI_Igather(&nmine, 1, MPI_INT, ng, 1, MPI_INT, nroot, MPI_COMM_WORLD, &nr[1]);
        MPI_Iscatter(nsrc, 2, MPI_INT, nsc, 2, MPI_INT, nroot, MPI_COMM_WORLD, &nr[2]);
        MPI_Iallgather(&nmine, 1, MPI_INT, nag, 1, MPI_INT, MPI_COMM_WORLD, &nr[3]);
        MPI_Ialltoall(nto, 1, MPI_INT, na2a, 1, MPI_INT, MPI_COMM_WORLD, &nr[4]);
        MPI_Iallgatherv(mine, rank + 1, MPI_INT, nagv, counts, displs, MPI_INT, MPI_COMM_WORLD, &nr[5]);
        MPI_Igatherv(mine, rank + 1, MPI_INT, ngv, counts, displs, MPI_INT, nroot, MPI_COMM_WORLD, &nr[6]);
        MPI_Iscatterv(all, counts, displs, MPI_INT, nscv, rank + 1, MPI_INT, nroot, MPI_COMM_WORLD, &nr[7]);
        MPI_Ialltoallv(nsb, sc, sd, MPI_LONG, nrb, rc, rd, MPI_LONG, MPI_COMM_WORLD, &nr[8]);
        MPI_Ireduce_scatter(nrsin, nrs, counts, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &nr[9]);
        MPI_Waitall(10, nr, MPI_STATUSES_IGNORE);
        if (rank == nroot) {
            CHECK(nsum == (long)size * (size + 1) / 2, "ireduce %ld", nsum);
            for (int q = 0; q < size; q++) CHECK(ng[q] == q * 7, "igather %d: %d", q, ng[q]);
            for (int q = 0; q < size; q++)
                for (int i = 0; i < counts[q]; i++) CHECK(ngv[displs[q] + i] == q * 100 + i, "igatherv %d.%d", q, i);
        }
        CHECK(nsc[0] == rank && nsc[1] == -rank, "iscatter %d %d", nsc[0], nsc[1]);
        for (int q = 0; q < size; q++) {
            CHECK(nag[q] == q * 7, "iallgather %d: %d", q, nag[q]);
            CHECK(na2a[q] == q * 100 + rank, "ialltoall %d: %d", q, na2a[q]);
            for (int i = 0; i < counts[q]; i++) CHECK(nagv[displs[q] + i] == q * 100 + i, "iallgatherv %d.%d", q, i);
            for (int i = 0; i < rc[q]; i++) CHECK(nrb[rd[q] + i] == q * 1000 + rank * 10 + i, "ialltoallv %d.%d", q, i);
        }
        for (int i = 0; i <= rank; i++) {
            CHECK(nscv[i] == rank * 100 + i, "iscatterv %d: %d", i, nscv[i]);
            CHECK(nrs[i] == size, "ireduce_scatter %d: %d", i, nrs[i]);
        }
        free(ng), free(nag), free(na2a), free(nto), free(nagv), free(ngv), free(nsrc), free(nrsin), free(nsb), free(nrb);
    }

    /* The tag upper bound. */
    int *ub = NULL;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);
    CHECK(flag && ub && *ub >= 32767, "MPI_TAG_UB %d", ub ? *ub : -1);

    int bad = failures, anybad = 0;
    MPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Finalize();
    if (anybad == 0) printf("collectives: ok %d\n", rank);
    free(counts), free(displs), free(all), free(sc), free(sd), free(rc), free(rd), free(sb), free(rb), free(blocks);
    return anybad == 0 ? 0 : 1;
}
