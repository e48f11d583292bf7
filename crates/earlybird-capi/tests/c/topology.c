/* Cartesian topologies and more communicators: Dims_create, a periodic 2-D grid, ranks and
 * coordinates, shifts with a halo exchange along both dimensions, Cart_sub rows, Topo_test,
 * Comm_split_type(SHARED) (every rank of an ebrun job shares memory) and Comm_test_inter.
 * Prints "topology: ok <rank>". */
#include <mpi.h>
#define NAME "topology"
#include "check.h"

int main(int argc, char **argv) {
    int size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int dims[2] = {0, 0}, periods[2] = {1, 0};
    MPI_Dims_create(size, 2, dims);
    CHECK(dims[0] * dims[1] == size && dims[0] >= dims[1], "dims %d x %d", dims[0], dims[1]);
    MPI_Comm grid;
    MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &grid);
    int status = -1, nd = -1, gr, coords[2], back;
    MPI_Topo_test(grid, &status);
    CHECK(status == MPI_CART, "topo_test %d", status);
    MPI_Topo_test(MPI_COMM_WORLD, &status);
    CHECK(status == MPI_UNDEFINED, "world topo_test %d", status);
    MPI_Cartdim_get(grid, &nd);
    CHECK(nd == 2, "cartdim %d", nd);
    MPI_Comm_rank(grid, &gr);
    MPI_Cart_coords(grid, gr, 2, coords);
    MPI_Cart_rank(grid, coords, &back);
    CHECK(back == gr && coords[0] == gr / dims[1] && coords[1] == gr % dims[1], "coords %d %d of %d", coords[0], coords[1], gr);
    int gd[2], gp[2], gc[2];
    MPI_Cart_get(grid, 2, gd, gp, gc);
    CHECK(gd[0] == dims[0] && gp[0] == 1 && gp[1] == 0 && gc[1] == coords[1], "cart_get");
    /* Dimension 0 wraps, dimension 1 does not. */
    int up, down, left, right;
    MPI_Cart_shift(grid, 0, 1, &up, &down);
    MPI_Cart_shift(grid, 1, 1, &left, &right);
    int want_down = ((coords[0] + 1) % dims[0]) * dims[1] + coords[1];
    CHECK(down == want_down, "shift down %d, want %d", down, want_down);
    CHECK(coords[1] == 0 ? left == MPI_PROC_NULL : left == gr - 1, "shift left %d", left);
    CHECK(coords[1] == dims[1] - 1 ? right == MPI_PROC_NULL : right == gr + 1, "shift right %d", right);
    int got = -1;
    MPI_Sendrecv(&gr, 1, MPI_INT, down, 1, &got, 1, MPI_INT, up, 1, grid, MPI_STATUS_IGNORE);
    CHECK(got == up, "halo from up %d", got);
    got = -5;
    MPI_Sendrecv(&gr, 1, MPI_INT, right, 2, &got, 1, MPI_INT, left, 2, grid, MPI_STATUS_IGNORE);
    CHECK(left == MPI_PROC_NULL ? got == -5 : got == left, "halo from left %d", got);
    int remain[2] = {0, 1};
    MPI_Comm row;
    MPI_Cart_sub(grid, remain, &row);
    int rs;
    MPI_Comm_size(row, &rs);
    CHECK(rs == dims[1], "row of %d", rs);
    MPI_Comm_free(&row);
    MPI_Comm_free(&grid);
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
    int ns, inter = -1;
    MPI_Comm_size(node, &ns);
    CHECK(ns == size, "shared-memory communicator of %d", ns);
    MPI_Comm_test_inter(node, &inter);
    CHECK(inter == 0, "test_inter %d", inter);
    MPI_Comm_free(&node);
    int bad = failures, anybad = 0;
    MPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Finalize();
    if (anybad == 0) printf("topology: ok %d\n", rank);
    return anybad == 0 ? 0 : 1;
}
