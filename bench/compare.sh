#!/usr/bin/env bash
# Same-sitting comparison of earlybird with the anchors of ../shared/bench-ref (MPICH and
# Open MPI, Debian packages), 2 ranks one per core, interleaved over ROUNDS launches so that
# background noise spreads over all of them. Run on a quiet machine.
#
#   bench/compare.sh            # ROUNDS=3 by default; raw output in bench/raw/<stamp>/
#   ROUNDS=5 bench/compare.sh
#   bench/compare.sh halo2d     # instead: the 4-rank 2-D halo exchange (bench/halo2d.c
#                               # against `earlybird-bench halo2d`), same rounds and output
#   bench/compare.sh channel    # instead: bound channels (earlybird-bench channel) against
#                               # the anchors' persistent ping-pong and 64 KiB bandwidth
#   bench/compare.sh coll       # instead: collectives (bench-ref coll.c against
#                               # `earlybird-bench coll`), 2 ranks, plus earlybird at 4 and 8
#   bench/compare.sh rma        # instead: one-sided communication (bench/rma.c against
#                               # `earlybird-bench rma`), 2 ranks: halo by fence / PSCW /
#                               # lock_all, put+flush, fetch_and_op, accumulate rate, and the
#                               # 64 KiB memcpy floor of the fence halo
#   SKIP_BUILD=1 bench/compare.sh   # any mode, without the `cargo build` step first
#
# Every mode ends with bench/summarize.py (summary.md) and bench/plot.py (one PNG per
# benchmark) on the run's directory.
#
# Needs: apt-get install -y mpich libmpich-dev openmpi-bin libopenmpi-dev python3-matplotlib
# (see bench-ref).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
REF=${REF:-$ROOT/../shared/bench-ref}
ROUNDS=${ROUNDS:-3}
OUT=$ROOT/bench/raw/$(date +%Y%m%d-%H%M%S)
mkdir -p "$OUT"

if [ "${SKIP_BUILD:-}" != 1 ]; then
    cargo build --release --workspace >/dev/null
fi

# The run's summary, then its figures: plot.py runs on the Debian python3, which
# python3-matplotlib installs into (a python3 earlier in PATH, e.g. pyenv's, may lack it).
report() {
    python3 "$ROOT/bench/summarize.py" "$OUT" | tee "$OUT/summary.md"
    /usr/bin/python3 "$ROOT/bench/plot.py" "$OUT"
}

# Two ranks, one per core, as bench-ref launches them.
MPICH="mpiexec.mpich -n 2 -bind-to core"
OMPI="mpirun.openmpi --allow-run-as-root -np 2 --bind-to core --map-by core --mca pml ob1 --mca btl self,vader"
EB="$ROOT/target/release/ebrun -n 2 $ROOT/target/release/earlybird-bench"

if [ "${1:-}" = halo2d ]; then
    # 4 ranks on this machine's cores (two per core on 2 cores): each library binds them
    # round robin to cores, as earlybird-bench pins rank r to CPU r % ncpus.
    CFLAGS="-O2 -Wall -Wno-stringop-overflow"
    mpicc.mpich $CFLAGS -o "$OUT/halo2d.mpich" "$ROOT/bench/halo2d.c"
    mpicc.openmpi $CFLAGS -o "$OUT/halo2d.openmpi" "$ROOT/bench/halo2d.c"
    for k in $(seq 1 "$ROUNDS"); do
        echo "round $k: load $(cut -d' ' -f1-3 /proc/loadavg)"
        mpiexec.mpich -n 4 -bind-to core "$OUT/halo2d.mpich" >> "$OUT/mpich_halo2d.txt"
        mpirun.openmpi --allow-run-as-root --oversubscribe -np 4 --bind-to core:overload-allowed \
            --map-by core --mca pml ob1 --mca btl self,vader "$OUT/halo2d.openmpi" >> "$OUT/openmpi_halo2d.txt"
        if ! "$ROOT/target/release/ebrun" -n 4 "$ROOT/target/release/earlybird-bench" halo2d \
                >> "$OUT/eb_halo2d.txt"; then
            echo "earlybird-bench halo2d failed (not there yet?); its column stays empty"
        fi
    done
    report
    exit 0
fi

if [ "${1:-}" = channel ]; then
    # Bound channels (seed 000): earlybird-bench channel against the anchors' persistent
    # ping-pong (8 B) and windowed bandwidth (64 KiB), with the floor of the same binary.
    make -s -C "$REF/mpi" pingpong_persist.mpich pingpong_persist.openmpi bw.mpich bw.openmpi >/dev/null
    for k in $(seq 1 "$ROUNDS"); do
        echo "round $k: load $(cut -d' ' -f1-3 /proc/loadavg)"
        $EB floor >> "$OUT/eb_floor.txt"
        $MPICH "$REF/mpi/pingpong_persist.mpich" -s 8 >> "$OUT/mpich_pingpong_persist.txt" 2>&1
        $OMPI "$REF/mpi/pingpong_persist.openmpi" -s 8 >> "$OUT/openmpi_pingpong_persist.txt" 2>&1
        $MPICH "$REF/mpi/bw.mpich" -s 64k >> "$OUT/mpich_bw.txt" 2>&1
        $OMPI "$REF/mpi/bw.openmpi" -s 64k >> "$OUT/openmpi_bw.txt" 2>&1
        $EB channel >> "$OUT/eb_channel.txt"
    done
    report
    exit 0
fi

if [ "${1:-}" = coll ]; then
    # bench-ref's coll.c on both anchors at 2 ranks (one per core), earlybird-bench coll at
    # 2 ranks and, oversubscribed, at 4 and 8.
    make -s -C "$REF/mpi" coll.mpich coll.openmpi >/dev/null
    for k in $(seq 1 "$ROUNDS"); do
        echo "round $k: load $(cut -d' ' -f1-3 /proc/loadavg)"
        mpiexec.mpich -n 2 -bind-to core "$REF/mpi/coll.mpich" >> "$OUT/mpich_coll.txt" 2>&1
        mpirun.openmpi --allow-run-as-root -np 2 --bind-to core --map-by core --mca pml ob1 \
            --mca btl self,vader "$REF/mpi/coll.openmpi" >> "$OUT/openmpi_coll.txt" 2>&1
        "$ROOT/target/release/ebrun" -n 2 "$ROOT/target/release/earlybird-bench" coll >> "$OUT/eb_coll2.txt"
    done
    for n in 4 8; do
        "$ROOT/target/release/ebrun" -n $n "$ROOT/target/release/earlybird-bench" coll --reps 5 >> "$OUT/eb_coll$n.txt"
    done
    report
    exit 0
fi

if [ "${1:-}" = rma ]; then
    # bench/rma.c (common.h from bench-ref) on both anchors against earlybird-bench rma,
    # 2 ranks one per core, interleaved.
    CFLAGS="-O2 -Wall -I$REF/mpi"
    mpicc.mpich $CFLAGS -o "$OUT/rma.mpich" "$ROOT/bench/rma.c"
    mpicc.openmpi $CFLAGS -o "$OUT/rma.openmpi" "$ROOT/bench/rma.c"
    for k in $(seq 1 "$ROUNDS"); do
        echo "round $k: load $(cut -d' ' -f1-3 /proc/loadavg)"
        $MPICH "$OUT/rma.mpich" >> "$OUT/mpich_rma.txt"
        $OMPI "$OUT/rma.openmpi" >> "$OUT/openmpi_rma.txt"
        if ! $EB rma >> "$OUT/eb_rma.txt"; then
            echo "earlybird-bench rma failed (not there yet?); its column stays empty"
        fi
    done
    report
    exit 0
fi

make -s -C "$REF/mpi" pingpong.mpich pingpong.openmpi pingpong_persist.mpich pingpong_persist.openmpi \
    bw.mpich bw.openmpi msgrate.mpich msgrate.openmpi >/dev/null


for k in $(seq 1 "$ROUNDS"); do
    echo "round $k: load $(cut -d' ' -f1-3 /proc/loadavg)"
    $EB floor >> "$OUT/eb_floor.txt"
    for pair in "pingpong latency 0,8,64,1k" "pingpong_persist persistent-latency 0,8,64,1k" \
                "bw bw 8,1k,16k,64k,1m,4m" "msgrate msgrate 8"; do
        set -- $pair
        $MPICH "$REF/mpi/$1.mpich" -s "$3" >> "$OUT/mpich_$1.txt" 2>&1
        $OMPI "$REF/mpi/$1.openmpi" -s "$3" >> "$OUT/openmpi_$1.txt" 2>&1
        $EB "$2" --sizes "$3" >> "$OUT/eb_$2.txt"
    done
done
report
