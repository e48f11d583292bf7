/* MPI 4.1 §11.2.1: the info calls work before MPI_Init and after MPI_Finalize, on objects
 * made at any of those times (MPI_Info_create_env included). Prints
 * "info_outside_init: ok <rank>". */
#include <mpi.h>
#include <string.h>
#define NAME "info_outside_init"
#include "check.h"

static void check_value(MPI_Info info, const char *key, const char *want, const char *when) {
    char v[64] = "";
    int flag = 0, len = (int)sizeof(v);
    MPI_Info_get_string(info, key, &len, v, &flag);
    CHECK(flag && strcmp(v, want) == 0, "%s: %s = '%s' (flag %d), expected '%s'", when, key, v, flag, want);
}

int main(int argc, char **argv) {
    MPI_Info early, env;
    MPI_Info_create(&early);
    MPI_Info_set(early, "made", "before");
    MPI_Info_create_env(argc, argv, &env);
    int nkeys = -1;
    MPI_Info_get_nkeys(early, &nkeys);
    CHECK(nkeys == 1, "before MPI_Init: %d keys", nkeys);

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    check_value(early, "made", "before", "after MPI_Init");
    MPI_Info_set(early, "seen", "during");
    MPI_Info during;
    MPI_Info_dup(early, &during);
    MPI_Info_free(&env);
    int bad = failures, anybad = 0;
    MPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Finalize();

    check_value(early, "seen", "during", "after MPI_Finalize");
    check_value(during, "made", "before", "a dup after MPI_Finalize");
    MPI_Info_delete(during, "made");
    MPI_Info_get_nkeys(during, &nkeys);
    CHECK(nkeys == 1, "after a delete: %d keys", nkeys);
    MPI_Info_free(&during);
    MPI_Info_free(&early);
    CHECK(early == MPI_INFO_NULL, "MPI_Info_free after MPI_Finalize leaves MPI_INFO_NULL");
    if (anybad == 0 && failures == 0) printf("%s: ok %d\n", NAME, rank);
    return anybad != 0 || failures != 0;
}
