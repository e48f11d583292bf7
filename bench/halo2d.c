/* halo2d.c - the C side of `earlybird-bench halo2d`: a 2-D halo exchange on a periodic
 * Cartesian communicator, run with MPICH and Open MPI (Debian packages) as anchors.
 *
 * Build (from the project root; -Wno-stringop-overflow silences a gcc false positive on
 * MPICH's MPI_STATUSES_IGNORE, as in ../shared/bench-ref/mpi/Makefile):
 *   mpicc.mpich   -O2 -Wall -Wno-stringop-overflow -o bench/halo2d.mpich   bench/halo2d.c
 *   mpicc.openmpi -O2 -Wall -Wno-stringop-overflow -o bench/halo2d.openmpi bench/halo2d.c
 * Run (4 ranks; on a 2-core machine they share cores, two ranks per core):
 *   mpiexec.mpich -n 4 -bind-to core ./bench/halo2d.mpich
 *   mpirun.openmpi --allow-run-as-root --oversubscribe -np 4 --bind-to core:overload-allowed \
 *       --map-by core --mca pml ob1 --mca btl self,vader ./bench/halo2d.openmpi
 * (`bench/compare.sh halo2d` builds and runs both, interleaved with earlybird.)
 *
 * What it does, per rank: MPI_Dims_create(nranks, 2) and a periodic MPI_Cart_create
 * (reorder 0) give a 2-D grid (2 x 2 for 4 ranks); MPI_Cart_shift on dimension 0 gives the
 * up/down neighbours, on dimension 1 left/right. Each rank owns N x N doubles (N = 1024,
 * option -N) inside a local array of (N+2) x (N+2) doubles, row-major, whose outer ring is
 * the halo. One iteration exchanges all four halos: halo rows travel as one
 * MPI_Type_contiguous(N, MPI_DOUBLE) each, halo columns as one
 * MPI_Type_vector(N, 1, N+2, MPI_DOUBLE) each; 4 MPI_Irecv (into the halo) and 4 MPI_Isend
 * (of the owned boundary rows and columns) complete with one MPI_Waitall. Tags name the
 * direction of travel, so that on a 2 x 2 torus, where the up and down (and the left and
 * right) neighbours are the same rank, each message lands in the right halo.
 *
 * Timing: W warm-up iterations (-w, default 200), then R batches (-r, default 10) of B
 * iterations (-n ITERS total, default 2000, so B = ITERS / R); a barrier starts each batch;
 * a batch's time is the maximum over ranks of its MPI_Wtime span; its per-iteration time is
 * that divided by B. The JSON line reports the median, min and max of the R per-iteration
 * times in microseconds; "iters" is ITERS, "bytes" the size of one halo message (8 N).
 *
 * Correctness: every owned cell holds a value built from its rank and coordinates (exact in
 * a double) and the halos start at -1. After one exchange before the warm-up and again after
 * the timed batches, every halo cell must hold its neighbour's boundary value and the corners
 * must be untouched; the sum of all halo cells over all ranks must equal the expected sum.
 * Any difference is printed and the job aborts (MPI_Abort code 3). The sum is printed as
 * "checksum" (the same fill gives the same checksum in earlybird's version).
 *
 * Output: one JSON line on rank 0, e.g.
 * {"bench":"halo2d","impl":"mpich","mode":"processes","ranks":4,"bytes":8192,"iters":2000,
 *  "median_us":..,"min_us":..,"max_us":..,"checksum":...}
 * (one line in reality); -v adds a `#` line with the library version and the grid.
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef OPEN_MPI
#define IMPL_NAME "openmpi"
#elif defined(MPICH)
#define IMPL_NAME "mpich"
#else
#define IMPL_NAME "unknown"
#endif

/* Tags: the direction a message travels. */
enum { TAG_UP = 1, TAG_DOWN = 2, TAG_LEFT = 3, TAG_RIGHT = 4 };

typedef struct {
    int n;          /* owned cells per side */
    int ld;         /* leading dimension: n + 2 */
    double *u;      /* (n+2) x (n+2), row-major */
    int up, down, left, right;
    MPI_Comm cart;
    MPI_Datatype row, col;
} grid_t;

#define AT(g, i, j) ((g)->u[(size_t)(i) * (g)->ld + (j)])

/* The value rank r keeps in its owned cell (i, j), 1 <= i, j <= n: exact in a double. */
static double cell(int r, int i, int j) {
    return ((double)r * 1100.0 + (double)i) * 1100.0 + (double)j;
}

static void fill(grid_t *g, int rank) {
    for (int i = 0; i < g->ld; i++)
        for (int j = 0; j < g->ld; j++)
            AT(g, i, j) = (i == 0 || j == 0 || i == g->ld - 1 || j == g->ld - 1) ? -1.0 : cell(rank, i, j);
}

/* One halo exchange in all four directions. */
static void exchange(grid_t *g) {
    int n = g->n;
    MPI_Request rq[8];
    MPI_Irecv(&AT(g, 0, 1), 1, g->row, g->up, TAG_DOWN, g->cart, &rq[0]);       /* up's row n */
    MPI_Irecv(&AT(g, n + 1, 1), 1, g->row, g->down, TAG_UP, g->cart, &rq[1]);   /* down's row 1 */
    MPI_Irecv(&AT(g, 1, 0), 1, g->col, g->left, TAG_RIGHT, g->cart, &rq[2]);    /* left's col n */
    MPI_Irecv(&AT(g, 1, n + 1), 1, g->col, g->right, TAG_LEFT, g->cart, &rq[3]);/* right's col 1 */
    MPI_Isend(&AT(g, 1, 1), 1, g->row, g->up, TAG_UP, g->cart, &rq[4]);
    MPI_Isend(&AT(g, n, 1), 1, g->row, g->down, TAG_DOWN, g->cart, &rq[5]);
    MPI_Isend(&AT(g, 1, 1), 1, g->col, g->left, TAG_LEFT, g->cart, &rq[6]);
    MPI_Isend(&AT(g, 1, n), 1, g->col, g->right, TAG_RIGHT, g->cart, &rq[7]);
    MPI_Waitall(8, rq, MPI_STATUSES_IGNORE);
}

/* Check every halo cell; returns the number of wrong cells (printing the first few) and
 * adds this rank's halo sum and expected sum to *sum and *want. */
static long check(const grid_t *g, int rank, const char *when, double *sum, double *want) {
    int n = g->n;
    long bad = 0;
    double s = 0, w = 0;
    for (int k = 1; k <= n; k++) {
        struct { int i, j; double expect; } c[4] = {
            { 0, k, cell(g->up, n, k) },
            { n + 1, k, cell(g->down, 1, k) },
            { k, 0, cell(g->left, k, n) },
            { k, n + 1, cell(g->right, k, 1) },
        };
        for (int q = 0; q < 4; q++) {
            double got = AT(g, c[q].i, c[q].j);
            s += got;
            w += c[q].expect;
            if (got != c[q].expect && bad++ < 5)
                fprintf(stderr, "halo2d: rank %d (%s): halo cell (%d,%d) is %.1f, expected %.1f\n",
                        rank, when, c[q].i, c[q].j, got, c[q].expect);
        }
    }
    int corners[4][2] = { { 0, 0 }, { 0, n + 1 }, { n + 1, 0 }, { n + 1, n + 1 } };
    for (int q = 0; q < 4; q++)
        if (AT(g, corners[q][0], corners[q][1]) != -1.0 && bad++ < 5)
            fprintf(stderr, "halo2d: rank %d (%s): corner (%d,%d) was overwritten\n", rank, when,
                    corners[q][0], corners[q][1]);
    *sum += s;
    *want += w;
    return bad;
}

/* Check on every rank; abort the job on any error. Returns the global halo sum. */
static double verify(const grid_t *g, int rank, const char *when) {
    double local[3] = { 0, 0, 0 }, total[3];
    local[2] = (double)check(g, rank, when, &local[0], &local[1]);
    MPI_Allreduce(local, total, 3, MPI_DOUBLE, MPI_SUM, g->cart);
    if (total[2] != 0 || total[0] != total[1]) {
        if (rank == 0)
            fprintf(stderr, "halo2d: %s: %.0f wrong halo cells; checksum %.1f, expected %.1f\n",
                    when, total[2], total[0], total[1]);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    return total[0];
}

static int cmp_dbl(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int n = 1024, batches = 10, verbose = 0;
    long iters = 2000, warmup = 200;
    int c;
    while ((c = getopt(argc, argv, "N:n:r:w:v")) != -1) {
        switch (c) {
        case 'N': n = atoi(optarg); break;
        case 'n': iters = atol(optarg); break;
        case 'r': batches = atoi(optarg); break;
        case 'w': warmup = atol(optarg); break;
        case 'v': verbose = 1; break;
        default: break;
        }
    }
    if (n < 1 || batches < 1 || iters < batches || warmup < 0) {
        fprintf(stderr, "usage: halo2d [-N cells per side] [-n timed iterations] [-r batches] [-w warm-up] [-v]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }

    int nranks, wrank;
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    int dims[2] = { 0, 0 }, periods[2] = { 1, 1 };
    MPI_Dims_create(nranks, 2, dims);
    grid_t g = { .n = n, .ld = n + 2 };
    MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &g.cart);
    int rank;
    MPI_Comm_rank(g.cart, &rank);
    MPI_Cart_shift(g.cart, 0, 1, &g.up, &g.down);
    MPI_Cart_shift(g.cart, 1, 1, &g.left, &g.right);
    MPI_Type_contiguous(n, MPI_DOUBLE, &g.row);
    MPI_Type_vector(n, 1, n + 2, MPI_DOUBLE, &g.col);
    MPI_Type_commit(&g.row);
    MPI_Type_commit(&g.col);
    if (posix_memalign((void **)&g.u, 64, sizeof(double) * (size_t)g.ld * g.ld)) {
        perror("posix_memalign");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    fill(&g, rank);

    if (verbose && rank == 0) {
        char ver[MPI_MAX_LIBRARY_VERSION_STRING];
        int len;
        MPI_Get_library_version(ver, &len);
        char *nl = strchr(ver, '\n');
        if (nl) *nl = 0;
        printf("# bench=halo2d impl=%s lib=\"%s\" grid=%dx%d local=%dx%d\n", IMPL_NAME, ver,
               dims[0], dims[1], g.ld, g.ld);
    }

    exchange(&g);
    verify(&g, rank, "first exchange");
    for (long i = 0; i < warmup; i++)
        exchange(&g);

    long per = iters / batches;
    double *us = malloc(sizeof(double) * batches);
    for (int b = 0; b < batches; b++) {
        MPI_Barrier(g.cart);
        double t0 = MPI_Wtime();
        for (long i = 0; i < per; i++)
            exchange(&g);
        double t = MPI_Wtime() - t0, tmax;
        MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, g.cart);
        us[b] = tmax / (double)per * 1e6;
    }
    double checksum = verify(&g, rank, "after the timed batches");

    if (rank == 0) {
        qsort(us, batches, sizeof(double), cmp_dbl);
        double med = (batches & 1) ? us[batches / 2] : 0.5 * (us[batches / 2 - 1] + us[batches / 2]);
        printf("{\"bench\":\"halo2d\",\"impl\":\"%s\",\"mode\":\"processes\",\"ranks\":%d,"
               "\"bytes\":%zu,\"iters\":%ld,\"median_us\":%.3f,\"min_us\":%.3f,\"max_us\":%.3f,"
               "\"checksum\":%.1f}\n",
               IMPL_NAME, nranks, sizeof(double) * (size_t)n, per * batches, med, us[0],
               us[batches - 1], checksum);
        fflush(stdout);
    }
    free(us);
    free(g.u);
    MPI_Type_free(&g.row);
    MPI_Type_free(&g.col);
    MPI_Comm_free(&g.cart);
    MPI_Finalize();
    return 0;
}
