/* Under MPI's default error handler (MPI_ERRORS_ARE_FATAL) a send to a rank that does not
 * exist ends the job with a message naming the rank; the program must never get past it.
 * An attribute on MPI_COMM_SELF whose delete function calls MPI is left behind: the exit
 * must not run it (its process is ending, not finalizing) nor crash. */
#include <mpi.h>
#include <stdio.h>

static int delete_frees_key(MPI_Comm comm, int key, void *value, void *extra) {
    (void)comm, (void)value, (void)extra;
    MPI_Comm_free_keyval(&key);
    printf("fatal: a delete function ran at the exit\n");
    return MPI_SUCCESS;
}

int main(int argc, char **argv) {
    int rank, size, x = 1;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int key;
    MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_frees_key, &key, NULL);
    MPI_Comm_set_attr(MPI_COMM_SELF, key, NULL);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) MPI_Send(&x, 1, MPI_INT, size + 3, 0, MPI_COMM_WORLD);
    else MPI_Recv(&x, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    printf("fatal: rank %d got past the error\n", rank);
    MPI_Finalize();
    return 0;
}
