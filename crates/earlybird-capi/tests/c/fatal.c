/* Under MPI's default error handler (MPI_ERRORS_ARE_FATAL) a send to a rank that does not
 * exist ends the job with a message naming the rank; the program must never get past it. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
    int rank, size, x = 1;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) MPI_Send(&x, 1, MPI_INT, size + 3, 0, MPI_COMM_WORLD);
    else MPI_Recv(&x, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    printf("fatal: rank %d got past the error\n", rank);
    MPI_Finalize();
    return 0;
}
