/* Derived datatypes through the C ABI: a matrix column (vector), rows picked by indexed and
 * hindexed types, a struct sent from MPI_BOTTOM with absolute addresses, a resized type
 * used with a count, sizes and extents, MPI_Get_count on a derived type, a broadcast of a
 * derived type, and Fortran's and C++'s predefined types. Prints "datatypes: ok <rank>" and exits 0 only if every value holds. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#define NAME "datatypes"
#include "check.h"

#define ROWS 5
#define COLS 4

struct particle {
    double x[3];
    int id;
    char tag;
};

int main(int argc, char **argv) {
    int size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    MPI_Status st;
    int count;

    /* Column 2 of a ROWS x COLS matrix of doubles, to a contiguous row at the neighbour. */
    double m[ROWS][COLS], col[ROWS];
    for (int i = 0; i < ROWS; i++)
        for (int j = 0; j < COLS; j++) m[i][j] = rank * 100 + i * 10 + j;
    MPI_Datatype column;
    MPI_Type_vector(ROWS, 1, COLS, MPI_DOUBLE, &column);
    MPI_Type_commit(&column);
    int tsize;
    MPI_Aint lb, extent, tlb, textent;
    MPI_Type_size(column, &tsize);
    MPI_Type_get_extent(column, &lb, &extent);
    MPI_Type_get_true_extent(column, &tlb, &textent);
    CHECK(tsize == ROWS * 8, "vector size %d", tsize);
    CHECK(lb == 0 && extent == ((ROWS - 1) * COLS + 1) * 8, "vector extent %ld %ld", (long)lb, (long)extent);
    CHECK(tlb == 0 && textent == extent, "vector true extent %ld %ld", (long)tlb, (long)textent);
    MPI_Sendrecv(&m[0][2], 1, column, right, 1, col, ROWS, MPI_DOUBLE, left, 1, MPI_COMM_WORLD, &st);
    for (int i = 0; i < ROWS; i++) CHECK(col[i] == left * 100 + i * 10 + 2, "column element %d: %g", i, col[i]);
    /* And back into a column of a zeroed matrix, through a nonblocking receive. */
    double back[ROWS][COLS];
    memset(back, 0, sizeof back);
    MPI_Request r[2];
    MPI_Irecv(&back[0][1], 1, column, right, 2, MPI_COMM_WORLD, &r[0]);
    MPI_Isend(col, ROWS, MPI_DOUBLE, left, 2, MPI_COMM_WORLD, &r[1]);
    MPI_Waitall(2, r, MPI_STATUSES_IGNORE);
    for (int i = 0; i < ROWS; i++) {
        CHECK(back[i][1] == rank * 100 + i * 10 + 2, "column back %d: %g", i, back[i][1]);
        CHECK(back[i][0] == 0 && back[i][2] == 0, "neighbours of the column touched in row %d", i);
    }

    /* Rows 0 and 3 by indexed (in doubles) and by hindexed (in bytes): the same data. */
    int bl[2] = {COLS, COLS}, disp[2] = {0, 3 * COLS};
    MPI_Aint hdisp[2] = {0, 3 * COLS * (MPI_Aint)sizeof(double)};
    MPI_Datatype rows, hrows;
    MPI_Type_indexed(2, bl, disp, MPI_DOUBLE, &rows);
    MPI_Type_create_hindexed(2, bl, hdisp, MPI_DOUBLE, &hrows);
    MPI_Type_commit(&rows);
    MPI_Type_commit(&hrows);
    double got[2 * COLS], got2[2 * COLS];
    MPI_Sendrecv(m, 1, rows, right, 3, got, 2 * COLS, MPI_DOUBLE, left, 3, MPI_COMM_WORLD, &st);
    MPI_Get_count(&st, MPI_DOUBLE, &count);
    CHECK(count == 2 * COLS, "indexed count %d", count);
    MPI_Sendrecv(m, 1, hrows, right, 4, got2, 2 * COLS, MPI_DOUBLE, left, 4, MPI_COMM_WORLD, &st);
    for (int j = 0; j < COLS; j++) {
        CHECK(got[j] == left * 100 + j && got[COLS + j] == left * 100 + 30 + j, "indexed %d", j);
        CHECK(got2[j] == got[j] && got2[COLS + j] == got[COLS + j], "hindexed %d", j);
    }

    /* A struct with padding, described by addresses and sent from MPI_BOTTOM. */
    struct particle p = {{rank + 0.5, rank + 1.5, rank + 2.5}, rank * 7, (char)('a' + rank)}, q;
    memset(&q, 0, sizeof q);
    int sbl[3] = {3, 1, 1};
    MPI_Aint sdisp[3], base;
    MPI_Datatype stypes[3] = {MPI_DOUBLE, MPI_INT, MPI_CHAR}, ptype, pabs;
    MPI_Get_address(&p, &base);
    MPI_Get_address(p.x, &sdisp[0]);
    MPI_Get_address(&p.id, &sdisp[1]);
    MPI_Get_address(&p.tag, &sdisp[2]);
    MPI_Type_create_struct(3, sbl, sdisp, stypes, &pabs); /* absolute addresses */
    MPI_Type_commit(&pabs);
    for (int i = 0; i < 3; i++) sdisp[i] -= base; /* relative, for the receive */
    MPI_Type_create_struct(3, sbl, sdisp, stypes, &ptype);
    MPI_Type_commit(&ptype);
    MPI_Type_size(ptype, &tsize);
    CHECK(tsize == 3 * 8 + 4 + 1, "struct size %d", tsize);
    MPI_Sendrecv(MPI_BOTTOM, 1, pabs, right, 5, &q, 1, ptype, left, 5, MPI_COMM_WORLD, &st);
    MPI_Get_count(&st, ptype, &count);
    CHECK(count == 1, "struct count %d", count);
    CHECK(q.x[0] == left + 0.5 && q.x[2] == left + 2.5 && q.id == left * 7 && q.tag == 'a' + left,
          "struct %g %g %d %c", q.x[0], q.x[2], q.id, q.tag);

    /* Every other int, by a resized type used with a count; broadcast of it. */
    int ev[8], evin[8];
    MPI_Datatype one, every2;
    MPI_Type_contiguous(1, MPI_INT, &one);
    MPI_Type_create_resized(one, 0, 2 * sizeof(int), &every2);
    MPI_Type_commit(&every2);
    MPI_Type_get_extent(every2, &lb, &extent);
    CHECK(extent == 8, "resized extent %ld", (long)extent);
    for (int i = 0; i < 8; i++) ev[i] = (rank == 0) ? 100 + i : -1;
    MPI_Bcast(ev, 4, every2, 0, MPI_COMM_WORLD);
    for (int i = 0; i < 8; i++)
        CHECK(ev[i] == ((rank == 0 || i % 2 == 0) ? 100 + i : -1), "bcast resized %d: %d", i, ev[i]);
    for (int i = 0; i < 8; i++) evin[i] = ev[i];
    (void)evin;

    MPI_Type_free(&column);
    CHECK(column == MPI_DATATYPE_NULL, "freed type not nulled");
    MPI_Type_free(&rows);
    MPI_Type_free(&hrows);
    MPI_Type_free(&pabs);
    MPI_Type_free(&ptype);
    MPI_Type_free(&one);
    MPI_Type_free(&every2);

    /* A freed handle names nothing any more. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    int cls = -1, rc = MPI_Send(m, 1, column, right, 6, MPI_COMM_WORLD);
    MPI_Error_class(rc, &cls);
    CHECK(rc != MPI_SUCCESS && cls == MPI_ERR_TYPE, "send of a freed type: class %d", cls);

    /* Fortran's and C++'s predefined types, as C holds them: sizes, names, a reduction. */
    struct { MPI_Datatype t; int size; const char *name; } other[] = {
        {MPI_INTEGER, 4, "MPI_INTEGER"}, {MPI_REAL, 4, "MPI_REAL"},
        {MPI_DOUBLE_PRECISION, 8, "MPI_DOUBLE_PRECISION"}, {MPI_LOGICAL, 4, "MPI_LOGICAL"},
        {MPI_CHARACTER, 1, "MPI_CHARACTER"}, {MPI_COMPLEX, 8, "MPI_COMPLEX"},
        {MPI_DOUBLE_COMPLEX, 16, "MPI_DOUBLE_COMPLEX"}, {MPI_2INTEGER, 8, "MPI_2INTEGER"},
        {MPI_INTEGER1, 1, "MPI_INTEGER1"}, {MPI_INTEGER2, 2, "MPI_INTEGER2"},
        {MPI_INTEGER4, 4, "MPI_INTEGER4"}, {MPI_INTEGER8, 8, "MPI_INTEGER8"},
        {MPI_REAL4, 4, "MPI_REAL4"}, {MPI_REAL8, 8, "MPI_REAL8"},
        {MPI_COMPLEX8, 8, "MPI_COMPLEX8"}, {MPI_COMPLEX16, 16, "MPI_COMPLEX16"},
        {MPI_CXX_BOOL, 1, "MPI_CXX_BOOL"}, {MPI_CXX_FLOAT_COMPLEX, 8, "MPI_CXX_FLOAT_COMPLEX"},
        {MPI_CXX_DOUBLE_COMPLEX, 16, "MPI_CXX_DOUBLE_COMPLEX"},
    };
    for (size_t i = 0; i < sizeof(other) / sizeof(other[0]); i++) {
        int sz = -1, nlen = 0;
        char nm[MPI_MAX_OBJECT_NAME] = "";
        MPI_Type_size(other[i].t, &sz);
        MPI_Type_get_name(other[i].t, nm, &nlen);
        CHECK(sz == other[i].size && strcmp(nm, other[i].name) == 0, "%s: size %d, name '%s'",
              other[i].name, sz, nm);
    }
    /* MPI_Type_create_f90_*: the kind SELECTED_REAL_KIND or SELECTED_INT_KIND names, the
     * same handle for the same arguments, decoded as what made it, not to be freed. */
    MPI_Datatype f1, f2, fi, fc;
    int fsz = 0, isz = 0, csz = 0, ni = -1, na = -1, nd = -1, comb = -1, fints[2] = {0, 0};
    MPI_Type_create_f90_real(7, MPI_UNDEFINED, &f1);
    MPI_Type_create_f90_real(7, MPI_UNDEFINED, &f2);
    MPI_Type_size(f1, &fsz);
    MPI_Type_get_envelope(f1, &ni, &na, &nd, &comb);
    MPI_Type_get_contents(f1, 2, 0, 0, fints, NULL, NULL);
    CHECK(f1 == f2 && fsz == 8 && comb == MPI_COMBINER_F90_REAL && ni == 2 && na == 0 &&
              nd == 0 && fints[0] == 7 && fints[1] == MPI_UNDEFINED,
          "f90 real (7, undefined): size %d, combiner %d, %d ints (%d, %d)", fsz, comb, ni,
          fints[0], fints[1]);
    MPI_Type_create_f90_integer(5, &fi);
    MPI_Type_size(fi, &isz);
    MPI_Type_get_envelope(fi, &ni, &na, &nd, &comb);
    CHECK(isz == 4 && comb == MPI_COMBINER_F90_INTEGER && ni == 1, "f90 integer (5): size %d",
          isz);
    MPI_Type_create_f90_complex(3, 10, &fc);
    MPI_Type_size(fc, &csz);
    CHECK(csz == 8, "f90 complex (3, 10): size %d", csz);
    double fsum_in = rank + 0.5, fsum_out = 0;
    MPI_Allreduce(&fsum_in, &fsum_out, 1, f1, MPI_SUM, MPI_COMM_WORLD);
    CHECK(fsum_out == size * size / 2.0, "allreduce of an f90 real: %g", fsum_out);
    int frc = MPI_Type_create_f90_real(40, 10, &f2), fcls = -1;
    MPI_Error_class(frc, &fcls);
    CHECK(fcls == MPI_ERR_ARG, "f90 real of precision 40: class %d", fcls);
    frc = MPI_Type_free(&f1);
    MPI_Error_class(frc, &fcls);
    CHECK(fcls == MPI_ERR_TYPE, "freeing an f90 type: class %d", fcls);

    char given[MPI_MAX_OBJECT_NAME] = "";
    int glen = 0;
    MPI_Type_set_name(MPI_LONG, "my long");
    MPI_Type_get_name(MPI_LONG, given, &glen);
    CHECK(strcmp(given, "my long") == 0 && glen == 7, "a predefined type's given name: '%s'", given);
    int fint = rank + 1, fsum = 0;
    MPI_Allreduce(&fint, &fsum, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD);
    CHECK(fsum == size * (size + 1) / 2, "allreduce of MPI_INTEGER: %d", fsum);

    int bad = failures, anybad = 0;
    MPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Finalize();
    if (anybad == 0) printf("datatypes: ok %d\n", rank);
    return anybad == 0 ? 0 : 1;
}
