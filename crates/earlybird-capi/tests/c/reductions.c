/* The predefined types whose reductions C computes in ways Rust has no type for, checked
 * against the C compiler's own arithmetic: MPI_LONG_DOUBLE (x87 80-bit) sums, products, min
 * and max, with values that need more than a double's 53 bits; MPI_C_FLOAT_COMPLEX,
 * MPI_C_DOUBLE_COMPLEX and MPI_C_LONG_DOUBLE_COMPLEX sums and products; MPI_C_BOOL's logical
 * operations; MPI_LONG_DOUBLE_INT and MPI_SHORT_INT with MAXLOC and MINLOC; the same through
 * MPI_Reduce_local; and MPI_Alltoallw over MPI_BOTTOM with absolute addresses in the types.
 * Prints "reductions: ok <rank>". */
#include <complex.h>
#include <mpi.h>
#include <stdbool.h>
#include <string.h>
#define NAME "reductions"
#include "check.h"

#define N 4

/* |z|^2, without libm. */
static long double norm2(long double complex z) { return creall(z) * creall(z) + cimagl(z) * cimagl(z); }

int main(int argc, char **argv) {
    int size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    /* Long double: 2^62 + rank needs 63 bits; the sum and product below are what C gets
     * adding and multiplying the ranks' values in rank order. */
    long double ld[N], ldsum[N], ldprod[N], ldmax[N], ldmin[N];
    for (int i = 0; i < N; i++) ld[i] = (i == 0 ? 0x1p62L : 1.0L / 3 + i) + rank * (i + 1);
    MPI_Allreduce(ld, ldsum, N, MPI_LONG_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(ld, ldprod, N, MPI_LONG_DOUBLE, MPI_PROD, MPI_COMM_WORLD);
    MPI_Allreduce(ld, ldmax, N, MPI_LONG_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(ld, ldmin, N, MPI_LONG_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
    for (int i = 0; i < N; i++) {
        long double s = 0, p = 1, v;
        for (int r = 0; r < size; r++) {
            v = (i == 0 ? 0x1p62L : 1.0L / 3 + i) + r * (i + 1);
            s += v;
            p *= v;
        }
        long double hi = (i == 0 ? 0x1p62L : 1.0L / 3 + i) + (size - 1) * (i + 1);
        long double lo = (i == 0 ? 0x1p62L : 1.0L / 3 + i);
        /* The sum of the 2^62 column is exact; the others may round in another order. */
        if (i == 0) CHECK(ldsum[i] == s, "long double sum %d: %La, want %La", i, ldsum[i], s);
        else CHECK(ldsum[i] - s < 1e-15L && s - ldsum[i] < 1e-15L, "long double sum %d: %La", i, ldsum[i]);
        CHECK(size > 2 || ldprod[i] == p, "long double product %d: %La, want %La", i, ldprod[i], p);
        CHECK(ldmax[i] == hi && ldmin[i] == lo, "long double max/min %d: %La %La", i, ldmax[i], ldmin[i]);
    }

    /* Complex sums and products. */
    float complex fc = (1 + rank) + 2.0f * I, fcs, fcp;
    double complex dc = 0.5 + (rank - 1.0) * I, dcs, dcp;
    long double complex lc = 0.25L + (rank + 1) * I, lcs, lcp;
    MPI_Allreduce(&fc, &fcs, 1, MPI_C_FLOAT_COMPLEX, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&fc, &fcp, 1, MPI_C_FLOAT_COMPLEX, MPI_PROD, MPI_COMM_WORLD);
    MPI_Allreduce(&dc, &dcs, 1, MPI_C_DOUBLE_COMPLEX, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&dc, &dcp, 1, MPI_C_DOUBLE_COMPLEX, MPI_PROD, MPI_COMM_WORLD);
    MPI_Allreduce(&lc, &lcs, 1, MPI_C_LONG_DOUBLE_COMPLEX, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&lc, &lcp, 1, MPI_C_LONG_DOUBLE_COMPLEX, MPI_PROD, MPI_COMM_WORLD);
    float complex wfs = 0, wfp = 1;
    double complex wds = 0, wdp = 1;
    long double complex wls = 0, wlp = 1;
    for (int r = 0; r < size; r++) {
        wfs += (1 + r) + 2.0f * I, wfp *= (1 + r) + 2.0f * I;
        wds += 0.5 + (r - 1.0) * I, wdp *= 0.5 + (r - 1.0) * I;
        wls += 0.25L + (r + 1) * I, wlp *= 0.25L + (r + 1) * I;
    }
    CHECK(fcs == wfs && norm2(fcp - wfp) <= 1e-10L * norm2(wfp), "float complex: %g%+gi, %g%+gi",
          crealf(fcs), cimagf(fcs), crealf(fcp), cimagf(fcp));
    CHECK(dcs == wds && norm2(dcp - wdp) <= 1e-24L * norm2(wdp), "double complex: %g%+gi, %g%+gi",
          creal(dcs), cimag(dcs), creal(dcp), cimag(dcp));
    CHECK(lcs == wls && norm2(lcp - wlp) <= 1e-30L * norm2(wlp), "long double complex: %Lg%+Lgi, %Lg%+Lgi",
          creall(lcs), cimagl(lcs), creall(lcp), cimagl(lcp));

    /* C_BOOL: rank 0 alone is true. */
    bool b = rank == 0, bor, band, bxor;
    MPI_Allreduce(&b, &bor, 1, MPI_C_BOOL, MPI_LOR, MPI_COMM_WORLD);
    MPI_Allreduce(&b, &band, 1, MPI_C_BOOL, MPI_LAND, MPI_COMM_WORLD);
    MPI_Allreduce(&b, &bxor, 1, MPI_C_BOOL, MPI_LXOR, MPI_COMM_WORLD);
    CHECK(bor && band == (size == 1) && bxor, "C_BOOL: or %d and %d xor %d", bor, band, bxor);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int rc = MPI_Allreduce(&b, &bor, 1, MPI_C_BOOL, MPI_SUM, MPI_COMM_WORLD), cls = -1;
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_OP, "MPI_SUM on MPI_C_BOOL: class %d", cls);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);

    /* Pair types with padding. */
    struct { long double v; int i; } lp = {(long double)(rank % 2), rank}, lmax, lmin;
    MPI_Allreduce(&lp, &lmax, 1, MPI_LONG_DOUBLE_INT, MPI_MAXLOC, MPI_COMM_WORLD);
    MPI_Allreduce(&lp, &lmin, 1, MPI_LONG_DOUBLE_INT, MPI_MINLOC, MPI_COMM_WORLD);
    CHECK(lmax.v == (size > 1) && lmax.i == (size > 1) && lmin.v == 0 && lmin.i == 0,
          "LONG_DOUBLE_INT: max %Lg at %d, min %Lg at %d", lmax.v, lmax.i, lmin.v, lmin.i);
    struct { short v; int i; } sp = {(short)(-rank), rank}, smin;
    MPI_Allreduce(&sp, &smin, 1, MPI_SHORT_INT, MPI_MINLOC, MPI_COMM_WORLD);
    CHECK(smin.v == -(size - 1) && smin.i == size - 1, "SHORT_INT min %d at %d", smin.v, smin.i);

    /* Reduce_local on the same types. */
    long double la[2] = {0x1p63L, 1}, lb[2] = {1, 0x1p-70L};
    MPI_Reduce_local(la, lb, 2, MPI_LONG_DOUBLE, MPI_SUM);
    /* 2^63 + 1 is exact in 64 bits; 1 + 2^-70 is not, and rounds to 1. */
    CHECK(lb[0] == 0x1p63L + 1 && lb[1] == 1, "Reduce_local long double: %La %La", lb[0], lb[1]);
    double complex ca = 1 + 2 * I, cb = 3 - I;
    MPI_Reduce_local(&ca, &cb, 1, MPI_C_DOUBLE_COMPLEX, MPI_PROD);
    CHECK(cb == (1 + 2 * I) * (3 - I), "Reduce_local double complex: %g%+gi", creal(cb), cimag(cb));

    /* Alltoallw over MPI_BOTTOM: each block a struct type at its absolute address. */
    int sbuf[64], rbuf[64];
    MPI_Datatype st[64], rt[64];
    int counts[64], displs[64];
    for (int r = 0; r < size; r++) {
        sbuf[r] = rank * 100 + r;
        rbuf[r] = -1;
        MPI_Aint sa, ra;
        MPI_Get_address(&sbuf[r], &sa);
        MPI_Get_address(&rbuf[r], &ra);
        int one = 1;
        MPI_Datatype in = MPI_INT;
        MPI_Type_create_struct(1, &one, &sa, &in, &st[r]);
        MPI_Type_create_struct(1, &one, &ra, &in, &rt[r]);
        MPI_Type_commit(&st[r]);
        MPI_Type_commit(&rt[r]);
        counts[r] = 1;
        displs[r] = 0;
    }
    MPI_Alltoallw(MPI_BOTTOM, counts, displs, st, MPI_BOTTOM, counts, displs, rt, MPI_COMM_WORLD);
    for (int r = 0; r < size; r++) {
        CHECK(rbuf[r] == r * 100 + rank, "alltoallw over MPI_BOTTOM, from %d: %d", r, rbuf[r]);
        MPI_Type_free(&st[r]);
        MPI_Type_free(&rt[r]);
    }

    MPI_Finalize();
    if (failures == 0) printf("%s: ok %d\n", NAME, rank);
    return failures != 0;
}
