/* Seed 004 (windows on persistent memory) in C: a window made by MPI_Win_allocate with the
 * seed's info keys, written through its base pointer and by a neighbour's put, committed by
 * MPI_Win_fence_pmem_persist three times; the management calls (list, names, sizes,
 * versions, timestamps, delete_version, delete) and their argument errors; a restart in
 * checkpoint mode at version 1; the seed's error classes. */
#define NAME "seed004_pmem"
#include <mpi.h>
#include <mpi-ext.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "check.h"

#define N 1000

static long value(int k, int r, int i) { return (long)k * 1000000 + r * 10000 + i; }

static int klass(int rc) {
    int c = -1;
    MPI_Error_class(rc, &c);
    return c;
}

static int alloc(const char *mode, const char *version, long **base, MPI_Win *w) {
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "pmem_is_pmem", "true");
    MPI_Info_set(info, "pmem_name", "grid");
    MPI_Info_set(info, "pmem_mode", mode);
    MPI_Info_set(info, "pmem_keep_all_checkpoints", "true");
    if (version) MPI_Info_set(info, "pmem_checkpoint_version", version);
    int rc = MPI_Win_allocate_pmem(N * sizeof(long), sizeof(long), info, MPI_COMM_WORLD, base, w);
    MPI_Info_free(&info);
    if (rc == MPI_SUCCESS) MPI_Win_set_errhandler(*w, MPI_ERRORS_RETURN);
    return rc;
}

int main(int argc, char **argv) {
    int size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    char root[MPI_PMEM_MAX_ROOT_PATH] = {0};
    if (rank == 0) {
        strcpy(root, "/tmp/eb-c-pmem-XXXXXX");
        CHECK(mkdtemp(root) != NULL, "mkdtemp");
    }
    MPI_Bcast(root, sizeof root, MPI_CHAR, 0, MPI_COMM_WORLD);
    CHECK(klass(MPI_Win_pmem_set_root_path("/no/such/dir/eb")) == MPI_ERR_PMEM_ROOT_PATH, "a missing root");
    CHECK(MPI_Win_pmem_set_root_path(root) == MPI_SUCCESS, "root %s", root);

    long *base = NULL;
    MPI_Win win;
    CHECK(alloc("expand", NULL, &base, &win) == MPI_SUCCESS, "allocate in expand mode");
    int right = (rank + 1) % size;
    MPI_Win_fence(0, win);
    for (int k = 0; k < 3; k++) {
        for (int i = 0; i < N - 1; i++) base[i] = value(k, rank, i);
        long v = 7 * k + 1;
        MPI_Put(&v, 1, MPI_LONG, right, N - 1, 1, MPI_LONG, win);
        CHECK(MPI_Win_fence_pmem_persist(0, win) == MPI_SUCCESS, "fence_persist %d", k);
    }
    CHECK(base[N - 1] == 15, "the last put: %ld", base[N - 1]);
    /* Nothing stored since: the checksums find no change, and no version is made. */
    CHECK(MPI_Win_fence_pmem_persist(0, win) == MPI_SUCCESS, "an unchanged fence_persist");
    MPI_Win_free_pmem(&win);

    MPI_Win_pmem_windows ws;
    CHECK(MPI_Win_pmem_list(&ws) == MPI_SUCCESS, "list");
    int n = -1, sz = -1, nv = -1, v = -1;
    long t = 0;
    char name[MPI_PMEM_MAX_NAME];
    MPI_Win_pmem_get_nwindows(ws, &n);
    CHECK(n == 1, "%d windows", n);
    MPI_Win_pmem_get_name(ws, 0, name);
    CHECK(strcmp(name, "grid") == 0, "name %s", name);
    MPI_Win_pmem_get_size(ws, 0, &sz);
    CHECK(sz == N * (int)sizeof(long), "size %d", sz);
    CHECK(klass(MPI_Win_pmem_get_size(ws, 3, &sz)) == MPI_ERR_PMEM_ARG, "window 3 of 1");
    MPI_Win_pmem_versions vs;
    CHECK(MPI_Win_pmem_get_versions(ws, 0, &vs) == MPI_SUCCESS, "versions");
    MPI_Win_pmem_get_nversions(vs, &nv);
    CHECK(nv == 3, "%d versions", nv);
    for (int i = 0; i < nv; i++) {
        MPI_Win_pmem_get_version(vs, i, &v);
        MPI_Win_pmem_get_version_timestamp(vs, i, &t);
        CHECK(v == i && t > 1600000000L, "version %d: %d at %ld", i, v, t);
    }
    CHECK(klass(MPI_Win_pmem_get_version(vs, 9, &v)) == MPI_ERR_PMEM_ARG, "version 9 of 3");
    MPI_Win_pmem_free_versions_list(&vs);
    CHECK(vs == NULL, "the versions list is freed");
    CHECK(klass(MPI_Win_pmem_get_nversions(vs, &nv)) == MPI_ERR_PMEM_VERSIONS, "a null list");
    MPI_Win_pmem_free_windows_list(&ws);
    CHECK(ws == NULL, "the windows list is freed");
    CHECK(klass(MPI_Win_pmem_get_nwindows(ws, &n)) == MPI_ERR_PMEM_WINDOWS, "a null list");

    /* A restart at version 1: the base pointer's stores and the put of iteration 1. */
    CHECK(alloc("checkpoint", "1", &base, &win) == MPI_SUCCESS, "allocate in checkpoint mode");
    int same = 1;
    for (int i = 0; i < N - 1; i++) same &= base[i] == value(1, rank, i);
    CHECK(same && base[N - 1] == 8, "version 1 as committed (last %ld)", base[N - 1]);
    MPI_Win_free(&win);
    CHECK(klass(alloc("checkpoint", "9", &base, &win)) == MPI_ERR_PMEM_CKPT_VER, "version 9");
    CHECK(klass(alloc("sideways", NULL, &base, &win)) == MPI_ERR_PMEM_MODE, "a bad mode");

    CHECK(MPI_Win_pmem_delete_version("grid", 0) == MPI_SUCCESS, "delete_version");
    CHECK(klass(MPI_Win_pmem_delete_version("grid", 0)) == MPI_ERR_PMEM_CKPT_VER, "deleted twice");
    CHECK(klass(MPI_Win_pmem_delete_version("../grid", 1)) == MPI_ERR_PMEM_NAME, "a path");
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(MPI_Win_pmem_delete("grid") == MPI_SUCCESS, "delete");
    CHECK(klass(MPI_Win_pmem_delete("grid")) == MPI_ERR_PMEM_NAME, "deleted twice");
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) CHECK(rmdir(root) == 0, "the root is empty again");
    if (failures == 0) printf("%s: ok %d\n", NAME, rank);
    MPI_Finalize();
    return failures != 0;
}
