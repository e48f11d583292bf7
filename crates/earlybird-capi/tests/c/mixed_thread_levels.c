/* Processes of one job at different thread levels: even ranks ask for
 * MPI_THREAD_MULTIPLE, odd ones for MPI_THREAD_SINGLE (MPI lets each process ask for its
 * own). Their blocking barriers, bcasts (from every root in turn) and allreduces (in
 * place every other round), small ones, which may run in shared memory, and large ones, on
 * MPI_COMM_WORLD and on a duplicate, must meet whatever each process's level makes of them
 * inside the library; every value is checked. Prints "mixed_thread_levels: ok <rank>". */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#define NAME "mixed_thread_levels"
#include "check.h"

enum { ROUNDS = 400, BIG = 3000 };

int main(int argc, char **argv) {
    const char *r = getenv("EARLYBIRD_RANK");
    if (!r) r = getenv("PMI_RANK");
    int want = (r && atoi(r) % 2 == 0) ? MPI_THREAD_MULTIPLE : MPI_THREAD_SINGLE, got, size;
    MPI_Init_thread(&argc, &argv, want, &got);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(want == MPI_THREAD_SINGLE || got == MPI_THREAD_MULTIPLE, "asked %d, got %d", want, got);
    MPI_Comm dup;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    static int big[BIG];
    for (int round = 0; round < ROUNDS; round++) {
        MPI_Comm c = round % 2 ? dup : MPI_COMM_WORLD;
        int root = round % size;
        int small[3] = {-1, -1, -1};
        if (rank == root) {
            for (int i = 0; i < 3; i++) small[i] = round * 10 + i;
        }
        MPI_Bcast(small, 3, MPI_INT, root, c);
        for (int i = 0; i < 3; i++) CHECK(small[i] == round * 10 + i, "round %d: small[%d] = %d", round, i, small[i]);
        if (round % 50 == 0) {
            for (int i = 0; i < BIG; i++) big[i] = rank == root ? round + i : -1;
            MPI_Bcast(big, BIG, MPI_INT, root, c);
            for (int i = 0; i < BIG; i++) {
                if (big[i] != round + i) {
                    CHECK(0, "round %d: big[%d] = %d", round, i, big[i]);
                    break;
                }
            }
        }
        int mine[3] = {rank + round, rank, 1}, sum[3] = {0, 0, 0};
        int ranks = size * (size - 1) / 2;
        if (round % 2) {
            memcpy(sum, mine, sizeof sum);
            MPI_Allreduce(MPI_IN_PLACE, sum, 3, MPI_INT, MPI_SUM, c);
        } else {
            MPI_Allreduce(mine, sum, 3, MPI_INT, MPI_SUM, c);
        }
        CHECK(sum[0] == ranks + size * round && sum[1] == ranks && sum[2] == size,
              "round %d: allreduce gave %d %d %d", round, sum[0], sum[1], sum[2]);
        if (round % 50 == 25) {
            static int total[BIG];
            for (int i = 0; i < BIG; i++) big[i] = rank + i;
            MPI_Allreduce(big, total, BIG, MPI_INT, MPI_SUM, c);
            for (int i = 0; i < BIG; i++) {
                if (total[i] != ranks + size * i) {
                    CHECK(0, "round %d: total[%d] = %d", round, i, total[i]);
                    break;
                }
            }
        }
        MPI_Barrier(c);
    }
    MPI_Comm_free(&dup);
    int bad = failures, anybad = 0;
    MPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Finalize();
    if (anybad == 0) printf("mixed_thread_levels: ok %d\n", rank);
    return anybad == 0 ? 0 : 1;
}
