/* Topologies and the collectives on them: a ring as a graph (MPI_Graph_create and its
 * queries) and as a distributed graph (adjacent and general forms, weighted), the five
 * neighbourhood collectives in their blocking, nonblocking and persistent forms, and the
 * persistent forms of the classic collectives (MPI_Allreduce_init, MPI_Bcast_init) started
 * several times with new data. Prints "neighbors: ok <rank>". */
#include <mpi.h>
#include <stdlib.h>
#define NAME "neighbors"
#include "check.h"

int main(int argc, char **argv) {
    int size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int left = (rank + size - 1) % size, right = (rank + 1) % size;

    /* A ring as a graph: node i has edges to i-1 and i+1. */
    int *index = malloc(sizeof(int) * size), *edges = malloc(sizeof(int) * 2 * size);
    for (int i = 0; i < size; i++) {
        index[i] = 2 * (i + 1);
        edges[2 * i] = (i + size - 1) % size;
        edges[2 * i + 1] = (i + 1) % size;
    }
    MPI_Comm graph;
    MPI_Graph_create(MPI_COMM_WORLD, size, index, edges, 0, &graph);
    int status, nnodes, nedges, nn, nb[2];
    MPI_Topo_test(graph, &status);
    CHECK(status == MPI_GRAPH, "topo_test %d", status);
    MPI_Graphdims_get(graph, &nnodes, &nedges);
    CHECK(nnodes == size && nedges == 2 * size, "graphdims %d %d", nnodes, nedges);
    MPI_Graph_neighbors_count(graph, rank, &nn);
    MPI_Graph_neighbors(graph, rank, 2, nb);
    CHECK(nn == 2 && nb[0] == left && nb[1] == right, "neighbors %d: %d %d", nn, nb[0], nb[1]);

    /* Neighbour allgather on the graph: from each neighbour its rank. */
    int got[2] = {-1, -1};
    MPI_Neighbor_allgather(&rank, 1, MPI_INT, got, 1, MPI_INT, graph);
    CHECK(got[0] == left && got[1] == right, "neighbor_allgather %d %d", got[0], got[1]);

    /* The same ring as a weighted distributed graph (adjacent form). */
    int srcs[2] = {left, right}, dsts[2] = {left, right}, w[2] = {1, 2};
    MPI_Comm dg;
    MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 2, srcs, w, 2, dsts, w, MPI_INFO_NULL, 0, &dg);
    int indeg, outdeg, weighted, s2[2], sw[2], d2[2], dw[2];
    MPI_Dist_graph_neighbors_count(dg, &indeg, &outdeg, &weighted);
    CHECK(indeg == 2 && outdeg == 2 && weighted, "dist_graph counts %d %d %d", indeg, outdeg, weighted);
    MPI_Dist_graph_neighbors(dg, 2, s2, sw, 2, d2, dw);
    CHECK(s2[0] == left && s2[1] == right && sw[1] == 2 && d2[1] == right, "dist_graph_neighbors");

    /* Alltoall to the neighbours, in all three forms. */
    int out[2], in[2];
    for (int form = 0; form < 3; form++) {
        out[0] = rank * 10 + form;     /* to left */
        out[1] = rank * 10 + 5 + form; /* to right */
        in[0] = in[1] = -1;
        MPI_Request req;
        if (form == 0) {
            MPI_Neighbor_alltoall(out, 1, MPI_INT, in, 1, MPI_INT, dg);
        } else if (form == 1) {
            MPI_Ineighbor_alltoall(out, 1, MPI_INT, in, 1, MPI_INT, dg, &req);
            MPI_Wait(&req, MPI_STATUS_IGNORE);
        } else {
            MPI_Neighbor_alltoall_init(out, 1, MPI_INT, in, 1, MPI_INT, dg, MPI_INFO_NULL, &req);
            MPI_Start(&req);
            MPI_Wait(&req, MPI_STATUS_IGNORE);
            MPI_Request_free(&req);
        }
        /* From the left neighbour its block for the right, and the reverse. */
        if (size > 2) {
            CHECK(in[0] == left * 10 + 5 + form && in[1] == right * 10 + form, "neighbor_alltoall form %d: %d %d", form, in[0], in[1]);
        }
    }

    /* Alltoallv and alltoallw to the neighbours. */
    int sc[2] = {1, 1}, sd[2] = {0, 1}, rc[2] = {1, 1}, rd[2] = {1, 0};
    out[0] = rank;
    out[1] = rank + 100;
    MPI_Neighbor_alltoallv(out, sc, sd, MPI_INT, in, rc, rd, MPI_INT, dg);
    if (size > 2) CHECK(in[1] == left + 100 && in[0] == right, "neighbor_alltoallv %d %d", in[0], in[1]);
    MPI_Aint sdb[2] = {0, sizeof(int)}, rdb[2] = {0, sizeof(int)};
    MPI_Datatype ts[2] = {MPI_INT, MPI_INT};
    MPI_Neighbor_alltoallw(out, sc, sdb, ts, in, rc, rdb, ts, dg);
    if (size > 2) CHECK(in[0] == left + 100 && in[1] == right, "neighbor_alltoallw %d %d", in[0], in[1]);

    /* The general distributed-graph form: every rank names its edge to the right. */
    int one = 1;
    MPI_Comm dg2;
    MPI_Dist_graph_create(MPI_COMM_WORLD, 1, &rank, &one, &right, MPI_UNWEIGHTED, MPI_INFO_NULL, 0, &dg2);
    MPI_Dist_graph_neighbors_count(dg2, &indeg, &outdeg, &weighted);
    CHECK(indeg == 1 && outdeg == 1 && !weighted, "dist_graph_create counts %d %d %d", indeg, outdeg, weighted);
    int from = -1;
    MPI_Neighbor_allgather(&rank, 1, MPI_INT, &from, 1, MPI_INT, dg2);
    CHECK(from == left, "from the left %d", from);

    /* Persistent classic collectives: started three times with new data. */
    int x = 0, sum = 0, root_val = 0;
    MPI_Request ar, br;
    MPI_Allreduce_init(&x, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &ar);
    MPI_Bcast_init(&root_val, 1, MPI_INT, 0, MPI_COMM_WORLD, MPI_INFO_NULL, &br);
    for (int round = 1; round <= 3; round++) {
        x = rank * round;
        MPI_Start(&ar);
        MPI_Wait(&ar, MPI_STATUS_IGNORE);
        CHECK(sum == round * size * (size - 1) / 2, "allreduce_init round %d: %d", round, sum);
        root_val = rank == 0 ? 77 + round : -1;
        MPI_Start(&br);
        MPI_Wait(&br, MPI_STATUS_IGNORE);
        CHECK(root_val == 77 + round, "bcast_init round %d: %d", round, root_val);
    }
    MPI_Request_free(&ar);
    MPI_Request_free(&br);

    /* MPI_IN_PLACE in allgather, and the nonblocking scan. */
    int *all = malloc(sizeof(int) * size);
    for (int i = 0; i < size; i++) all[i] = i == rank ? rank * 3 : -1;
    MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, 1, MPI_INT, MPI_COMM_WORLD);
    for (int i = 0; i < size; i++) CHECK(all[i] == i * 3, "allgather in place %d: %d", i, all[i]);
    int pre = -1;
    MPI_Request sr;
    MPI_Iscan(&rank, &pre, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &sr);
    MPI_Wait(&sr, MPI_STATUS_IGNORE);
    CHECK(pre == rank * (rank + 1) / 2, "iscan %d", pre);

    MPI_Comm_free(&graph);
    MPI_Comm_free(&dg);
    MPI_Comm_free(&dg2);
    free(all);
    free(index);
    free(edges);
    int bad = failures, anybad = 0;
    MPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Finalize();
    if (anybad == 0) printf("neighbors: ok %d\n", rank);
    return anybad == 0 ? 0 : 1;
}
