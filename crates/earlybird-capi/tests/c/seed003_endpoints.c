/* Seed 003's hybrid example in C with OpenMP: every process makes one endpoint per thread
 * of its team (1, 2 or 3 by rank: uneven), each thread takes its own handle and calls MPI
 * on it as an MPI process would. Checks the ranks' order, the seed's queries, a ring, an
 * allreduce, a split by MPIX_COMM_TYPE_ENDPOINTS and the free. */
#include <mpi.h>
#include <mpi-ext.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(c)                                                                          \
    do {                                                                                  \
        if (!(c)) {                                                                       \
            fprintf(stderr, "world rank %d, thread %d: line %d: %s\n", wr,                \
                    omp_get_thread_num(), __LINE__, #c);                                  \
            exit(1);                                                                      \
        }                                                                                 \
    } while (0)

static int count_of(int r) { return 1 + r % 3; }

int main(int argc, char **argv) {
    int wr, ws, tl;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &tl);
    MPI_Comm_rank(MPI_COMM_WORLD, &wr);
    MPI_Comm_size(MPI_COMM_WORLD, &ws);
    int nt = count_of(wr), total = 0, offset = 0, shared = 0;
    for (int r = 0; r < ws; r++) {
        if (r < wr)
            offset += count_of(r);
        total += count_of(r);
        shared |= count_of(r) > 1;
    }
    MPI_Comm ep[3];
    /* A negative count is an error on every process, returned under MPI_ERRORS_RETURN. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int err = MPIX_Comm_create_endpoints(MPI_COMM_WORLD, wr == 0 ? -1 : 1, MPI_INFO_NULL, ep);
    int cls;
    MPI_Error_class(err, &cls);
    CHECK(cls == (wr == 0 ? MPI_ERR_ARG : MPIX_ERR_ENDPOINTS));

#pragma omp parallel num_threads(nt)
    {
        int tn = omp_get_thread_num();
        CHECK(omp_get_num_threads() == nt);
#pragma omp master
        CHECK(MPIX_Comm_create_endpoints(MPI_COMM_WORLD, nt, MPI_INFO_NULL, ep) == MPI_SUCCESS);
#pragma omp barrier
        int r, n, num, id, sharing;
        MPI_Comm_rank(ep[tn], &r);
        MPI_Comm_size(ep[tn], &n);
        CHECK(n == total);
        CHECK(r == offset + tn);
        MPIX_Comm_num_endpoints(ep[tn], &num, &id);
        CHECK(num == nt && id == tn);
        MPIX_Comm_has_sharing(ep[tn], &sharing);
        CHECK(sharing == shared);
        long mine = r + 1, sum = 0;
        MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, ep[tn]);
        CHECK(sum == (long)total * (total + 1) / 2);
        /* Every endpoint is driven by its thread now: another thread's handle is an error
         * (the endpoints took the parent's MPI_ERRORS_RETURN). */
        if (tn == 1) {
            int x, ecls;
            MPI_Error_class(MPI_Comm_size(ep[0], &x), &ecls);
            CHECK(ecls == MPI_ERR_COMM);
        }
        int right = (r + 1) % n, left = (r + n - 1) % n, got = -1;
        MPI_Sendrecv(&r, 1, MPI_INT, right, 5, &got, 1, MPI_INT, left, 5, ep[tn],
                     MPI_STATUS_IGNORE);
        CHECK(got == left);
        MPI_Comm same;
        MPI_Comm_split_type(ep[tn], MPIX_COMM_TYPE_ENDPOINTS, 0, MPI_INFO_NULL, &same);
        int ssize, srank;
        MPI_Comm_size(same, &ssize);
        MPI_Comm_rank(same, &srank);
        CHECK(ssize == nt && srank == tn);
        MPI_Comm dup;
        MPI_Comm_dup(ep[tn], &dup);
        int cmp;
        MPI_Comm_compare(ep[tn], dup, &cmp);
        CHECK(cmp == MPI_CONGRUENT);
        MPI_Barrier(dup);
        MPI_Comm_free(&dup);
        MPI_Comm_free(&same);
        MPI_Comm_free(&ep[tn]);
        CHECK(ep[tn] == MPI_COMM_NULL);
    }
    /* One endpoint per process: its group is the parent's. */
    MPI_Comm one;
    MPIX_Comm_create_endpoints(MPI_COMM_WORLD, 1, MPI_INFO_NULL, &one);
    int cmp;
    MPI_Comm_compare(MPI_COMM_WORLD, one, &cmp);
    CHECK(cmp == MPI_CONGRUENT);
    MPI_Comm_free(&one);
    printf("seed003_endpoints: ok %d\n", wr);
    MPI_Finalize();
    return 0;
}
