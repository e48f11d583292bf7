/* rma.c - the C side of `earlybird-bench rma`: MPI one-sided communication (RMA), run with
 * MPICH and Open MPI (Debian packages) as anchors, 2 ranks.
 *
 * Build (from the project root; common.h comes from ../shared/bench-ref/mpi):
 *   mpicc.mpich   -O2 -Wall -I ../shared/bench-ref/mpi -o /tmp/rma.mpich   bench/rma.c
 *   mpicc.openmpi -O2 -Wall -I ../shared/bench-ref/mpi -o /tmp/rma.openmpi bench/rma.c
 * Run (2 ranks, one per core, as bench-ref launches them):
 *   mpiexec.mpich -n 2 -bind-to core /tmp/rma.mpich
 *   mpirun.openmpi --allow-run-as-root -np 2 --bind-to core --map-by core --mca pml ob1 \
 *       --mca btl self,vader /tmp/rma.openmpi
 * (`bench/compare.sh rma` builds and runs both, interleaved with earlybird.)
 *
 * Points (one `RESULT bench=... size=... iters=... reps=... metric=... median=... min=...
 * max=... check=ok|FAIL` line each, the format of bench-ref's rma_halo.c):
 *   rma_halo_fence, rma_halo_pscw, rma_halo_lock (sizes of -s, default 8 and 64 KiB):
 *     the three modes of bench-ref's rma_halo.c (fence / passive renamed lock), same window
 *     layout [counter 8 B | pad to 64 | left halo | right halo], disp_unit 1. Each rank puts
 *     `size` bytes (a stamp in the first 8) into the right halo of its left neighbour and
 *     the left halo of its right neighbour, per iteration:
 *       fence : Put L; Put R; MPI_Win_fence(0)
 *       pscw  : Post(nbrs); Start(nbrs); Put L; Put R; Complete; Wait
 *       lock  : (lock_all(NOCHECK) once per size) Put L; Put R; flush_all; Accumulate(+1 long,
 *               SUM) on the counter of L and of R; flush_all; poll own counter with
 *               Fetch_and_op(NO_OP) + flush(self) until it has grown by 2.
 *     metric us_per_iter (max over ranks). check: each halo holds a stamp of the right
 *     neighbour (stamp / 1e9 == neighbour rank + 1).
 *   rma_put_flush (8 B): rank 0, inside one lock_all(NOCHECK), per op MPI_Put of one long
 *     to rank 1 + MPI_Win_flush(1); rank 1 makes no MPI call meanwhile (it waits in the
 *     barrier that ends the repeat). metric us_per_op. check: after unlock_all + barrier,
 *     rank 1's element holds the last value put.
 *   rma_fetch_and_op (8 B): rank 0, inside lock_all(NOCHECK), per op MPI_Fetch_and_op(+1,
 *     MPI_LONG, SUM) on rank 1's element 0 + MPI_Win_flush(1). metric us_per_op. check: the
 *     counter equals the number of increments (warm-up included) and the last fetched value
 *     is that number minus one.
 *   rma_acc_rate (8 B): rank 0, inside lock_all(NOCHECK), batches of W = 256
 *     MPI_Accumulate(1 long, SUM) to one element of rank 1, then one MPI_Win_flush(1).
 *     metric mmsg_per_s (million accumulates per second over the timed batches of a repeat);
 *     "iters" is the number of accumulates per repeat. check: the counter equals the number
 *     issued (warm-up included).
 *   memcpy (64 KiB): rank 0 copies 64 KiB between two malloc'd buffers (warm). metric
 *     us_per_op. The floor of the 64 KiB fence halo (two 64 KiB puts per iteration).
 * The op benches use a second window (MPI_Win_allocate, 8 longs, disp_unit 8): element 0
 * fetch_and_op counter, element 1 accumulate counter, element 2 put target.
 *
 * Timing (common.h): -n base iterations (default 10000), scaled down by the byte budget -B
 * (256 MiB per repeat) for big halos, at least -m (50); -r repeats (11); -w warm-up
 * iterations (200) before the timed repeats. The line gives median / min / max over the
 * repeats. rma_acc_rate runs 16 x that many accumulates (rounded to whole batches).
 * -M LIST runs only the points whose name contains one of the comma separated words
 * (e.g. -M fence,acc_rate); the default runs all.
 */
#include "common.h"

#define HALO_OFF 64
#define ACC_W 256
enum { E_FAO = 0, E_ACC = 1, E_PUT = 2 };

static int rank, nranks, left, right;
static MPI_Win hwin, ow;
static char *hbase;
static long *obase;
static size_t maxs;
static MPI_Group nbr_group;
static long expected = 0; /* notifications received so far (lock mode) */
static opts_t o;
static double *res;

/* -M filter: parse_opts' default mode list means "everything". */
static int want(const char *name) {
    if (strcmp(o.modes, "fence,pscw,passive") == 0) return 1;
    char *dup = strdup(o.modes), *save = NULL;
    int hit = 0;
    for (char *t = strtok_r(dup, ",", &save); t; t = strtok_r(NULL, ",", &save))
        if (*t && strstr(name, t)) hit = 1;
    free(dup);
    return hit;
}

/* rank 0: sorts res, prints the line; ok is this rank's verdict (AND over ranks). */
static void report(const char *bench, int size, long iters, const char *metric, int ok) {
    int allok;
    MPI_Reduce(&ok, &allok, 1, MPI_INT, MPI_LAND, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        double med = median(res, o.reps);
        printf("RESULT bench=%s size=%d iters=%ld reps=%d metric=%s median=%.4f min=%.4f max=%.4f check=%s\n",
               bench, size, iters, o.reps, metric, med, res[0], res[o.reps - 1], allok ? "ok" : "FAIL");
        fflush(stdout);
    }
}

static void halo_iter(int mode, char *sbuf, int n, long stamp) {
    long one = 1;
    ((long *)sbuf)[0] = stamp;
    MPI_Aint offL = HALO_OFF + maxs; /* into the left neighbour's RIGHT halo */
    MPI_Aint offR = HALO_OFF;        /* into the right neighbour's LEFT halo */
    if (mode == 0) {
        MPI_Put(sbuf, n, MPI_BYTE, left, offL, n, MPI_BYTE, hwin);
        MPI_Put(sbuf, n, MPI_BYTE, right, offR, n, MPI_BYTE, hwin);
        MPI_Win_fence(0, hwin);
    } else if (mode == 1) {
        MPI_Win_post(nbr_group, 0, hwin);
        MPI_Win_start(nbr_group, 0, hwin);
        MPI_Put(sbuf, n, MPI_BYTE, left, offL, n, MPI_BYTE, hwin);
        MPI_Put(sbuf, n, MPI_BYTE, right, offR, n, MPI_BYTE, hwin);
        MPI_Win_complete(hwin);
        MPI_Win_wait(hwin);
    } else {
        MPI_Put(sbuf, n, MPI_BYTE, left, offL, n, MPI_BYTE, hwin);
        MPI_Put(sbuf, n, MPI_BYTE, right, offR, n, MPI_BYTE, hwin);
        MPI_Win_flush_all(hwin);
        MPI_Accumulate(&one, 1, MPI_LONG, left, 0, 1, MPI_LONG, MPI_SUM, hwin);
        MPI_Accumulate(&one, 1, MPI_LONG, right, 0, 1, MPI_LONG, MPI_SUM, hwin);
        MPI_Win_flush_all(hwin);
        expected += 2;
        long v;
        do {
            MPI_Fetch_and_op(NULL, &v, MPI_LONG, rank, 0, MPI_NO_OP, hwin);
            MPI_Win_flush(rank, hwin);
        } while (v < expected);
    }
}

static void bench_halo(int mode) {
    static const char *name[] = {"rma_halo_fence", "rma_halo_pscw", "rma_halo_lock"};
    static long stamp = 0;
    if (!want(name[mode])) return;
    char *sbuf = xalloc(maxs);
    for (int si = 0; si < o.nsizes; si++) {
        int n = (int)o.sizes[si];
        if (n < 8) n = 8;
        long iters = iters_for(&o, 2 * (size_t)n);
        if (mode == 0) MPI_Win_fence(0, hwin);
        if (mode == 2) MPI_Win_lock_all(MPI_MODE_NOCHECK, hwin);
        for (int rep = -1; rep < o.reps; rep++) {
            long it_here = rep < 0 ? (o.warmup < iters ? o.warmup : iters) : iters;
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            for (long i = 0; i < it_here; i++)
                halo_iter(mode, sbuf, n, (rank + 1) * 1000000000L + (++stamp));
            double t = max_over_ranks(MPI_Wtime() - t0, MPI_COMM_WORLD);
            if (rep >= 0) res[rep] = t / iters * 1e6;
        }
        if (mode == 0) MPI_Win_fence(MPI_MODE_NOSUCCEED, hwin);
        if (mode == 2) MPI_Win_unlock_all(hwin);
        MPI_Barrier(MPI_COMM_WORLD);
        long lh = *(long *)(hbase + HALO_OFF), rh = *(long *)(hbase + HALO_OFF + maxs);
        int ok = (lh / 1000000000L == left + 1) && (rh / 1000000000L == right + 1);
        report(name[mode], n, iters, "us_per_iter", ok);
    }
    free(sbuf);
}

/* Rank 1's view of one element of ow, read inside a shared lock on itself. */
static long own_elem(int e) {
    MPI_Win_lock(MPI_LOCK_SHARED, rank, 0, ow);
    MPI_Win_sync(ow);
    long v = obase[e];
    MPI_Win_unlock(rank, ow);
    return v;
}

/* Op benches: rank 0 issues, every other rank sits in the barrier ending each repeat.
 * kind 0 put_flush, 1 fetch_and_op, 2 acc_rate. */
static void bench_op(int kind) {
    static const char *name[] = {"rma_put_flush", "rma_fetch_and_op", "rma_acc_rate"};
    if (!want(name[kind])) return;
    long iters = iters_for(&o, 8), warm = o.warmup < iters ? o.warmup : iters;
    if (kind == 2) { /* in batches of ACC_W accumulates */
        iters = (16 * iters + ACC_W - 1) / ACC_W;
        warm = (16 * warm + ACC_W - 1) / ACC_W;
    }
    long one = 1, val = 0, old = -1, issued = 0;
    if (rank == 0) MPI_Win_lock_all(MPI_MODE_NOCHECK, ow);
    for (int rep = -1; rep < o.reps; rep++) {
        long n = rep < 0 ? warm : iters;
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 0) {
            double t0 = MPI_Wtime();
            if (kind == 0) {
                for (long i = 0; i < n; i++) {
                    ++val;
                    MPI_Put(&val, 1, MPI_LONG, 1, E_PUT, 1, MPI_LONG, ow);
                    MPI_Win_flush(1, ow);
                }
            } else if (kind == 1) {
                for (long i = 0; i < n; i++) {
                    MPI_Fetch_and_op(&one, &old, MPI_LONG, 1, E_FAO, MPI_SUM, ow);
                    MPI_Win_flush(1, ow);
                }
            } else {
                for (long i = 0; i < n; i++) {
                    for (int j = 0; j < ACC_W; j++)
                        MPI_Accumulate(&one, 1, MPI_LONG, 1, E_ACC, 1, MPI_LONG, MPI_SUM, ow);
                    MPI_Win_flush(1, ow);
                }
            }
            double t = MPI_Wtime() - t0;
            if (rep >= 0)
                res[rep] = kind == 2 ? (double)n * ACC_W / t / 1e6 : t / n * 1e6;
        }
        issued += kind == 2 ? n * ACC_W : n;
        MPI_Barrier(MPI_COMM_WORLD);
    }
    if (rank == 0) MPI_Win_unlock_all(ow);
    MPI_Barrier(MPI_COMM_WORLD);
    int ok = 1;
    if (rank == 1) ok = own_elem(kind == 0 ? E_PUT : kind == 1 ? E_FAO : E_ACC) == issued;
    if (rank == 0 && kind == 0) ok = val == issued;
    if (rank == 0 && kind == 1) ok = old == issued - 1;
    report(name[kind], 8, kind == 2 ? iters * ACC_W : iters, kind == 2 ? "mmsg_per_s" : "us_per_op", ok);
}

static void bench_memcpy(void) {
    if (!want("memcpy")) return;
    const size_t n = 65536;
    long iters = iters_for(&o, n);
    char *src = malloc(n), *dst = malloc(n);
    if (!src || !dst) MPI_Abort(MPI_COMM_WORLD, 1);
    for (size_t i = 0; i < n; i++) src[i] = (char)(i * 7 + 1);
    memset(dst, 0, n);
    for (int rep = -1; rep < o.reps; rep++) {
        long it_here = rep < 0 ? (o.warmup < iters ? o.warmup : iters) : iters;
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 0) {
            double t0 = MPI_Wtime();
            for (long i = 0; i < it_here; i++) {
                memcpy(dst, src, n);
                __asm__ __volatile__("" : : "r"(dst), "r"(src) : "memory");
            }
            double t = MPI_Wtime() - t0;
            if (rep >= 0) res[rep] = t / iters * 1e6;
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
    int ok = rank != 0 || memcmp(dst, src, n) == 0;
    free(src);
    free(dst);
    report("memcpy", (int)n, iters, "us_per_op", ok);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (nranks < 2) {
        if (rank == 0) fprintf(stderr, "rma: needs 2 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    parse_opts(argc, argv, &o, "8,64k", 10000, 50, 256.0 * 1024 * 1024, 11, 200);
    print_affinity(MPI_COMM_WORLD, "rma");
    left = (rank - 1 + nranks) % nranks;
    right = (rank + 1) % nranks;
    maxs = 0;
    for (int i = 0; i < o.nsizes; i++) if (o.sizes[i] > maxs) maxs = o.sizes[i];
    if (maxs < 8) maxs = 8;
    MPI_Win_allocate(HALO_OFF + 2 * maxs, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &hbase, &hwin);
    memset(hbase, 0, HALO_OFF + 2 * maxs);
    MPI_Win_allocate(8 * sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &obase, &ow);
    memset(obase, 0, 8 * sizeof(long));
    MPI_Barrier(MPI_COMM_WORLD);
    {
        MPI_Group world;
        MPI_Comm_group(MPI_COMM_WORLD, &world);
        int nb[2] = {left, right}, nn = (left == right) ? 1 : 2;
        MPI_Group_incl(world, nn, nb, &nbr_group);
        MPI_Group_free(&world);
    }
    res = malloc(sizeof(double) * o.reps);
    for (int mode = 0; mode < 3; mode++) bench_halo(mode);
    for (int kind = 0; kind < 3; kind++) bench_op(kind);
    bench_memcpy();
    MPI_Group_free(&nbr_group);
    MPI_Win_free(&ow);
    MPI_Win_free(&hwin);
    free(res);
    MPI_Finalize();
    return 0;
}
