/* Calls earlybird does not implement exist and say so: MPI_File_open returns (files' handler
 * is MPI_ERRORS_RETURN) an MPI_ERR_UNSUPPORTED_OPERATION code whose string names the call;
 * MPI_Comm_spawn raises it on MPI_COMM_SELF (returned here, under MPI_ERRORS_RETURN); a job
 * started by ebrun has no parent. Prints "unsupported: ok <rank>". */
/* earlybird's mpi.h declares the calls it lacks only on request. */
#define EARLYBIRD_DECLARE_MISSING 1
#include <mpi.h>
#include <string.h>
#define NAME "unsupported"
#include "check.h"

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_File fh;
    int cls = -1, len = 0;
    char msg[MPI_MAX_ERROR_STRING];
    int rc = MPI_File_open(MPI_COMM_WORLD, "/tmp/none", MPI_MODE_RDONLY, MPI_INFO_NULL, &fh);
    MPI_Error_class(rc, &cls);
    MPI_Error_string(rc, msg, &len);
    CHECK(rc != MPI_SUCCESS && cls == MPI_ERR_UNSUPPORTED_OPERATION, "MPI_File_open gave %d class %d", rc, cls);
    CHECK(strstr(msg, "MPI_File_open") != NULL, "the message does not name the call: %s", msg);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    MPI_Comm child;
    rc = MPI_Comm_spawn("true", MPI_ARGV_NULL, 1, MPI_INFO_NULL, 0, MPI_COMM_SELF, &child, MPI_ERRCODES_IGNORE);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_UNSUPPORTED_OPERATION, "MPI_Comm_spawn class %d", cls);
    MPI_Comm parent;
    MPI_Comm_get_parent(&parent);
    CHECK(parent == MPI_COMM_NULL, "a parent");
    int bad = failures, anybad = 0;
    MPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Finalize();
    if (anybad == 0) printf("unsupported: ok %d\n", rank);
    return anybad == 0 ? 0 : 1;
}
