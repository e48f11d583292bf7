#!/usr/bin/env bash
# Same-sitting comparison of earlybird with the anchors of ../shared/bench-ref (MPICH and
# Open MPI, Debian packages), 2 ranks one per core, interleaved over ROUNDS launches so that
# background noise spreads over all of them. Run on a quiet machine.
#
#   bench/compare.sh            # ROUNDS=3 by default; raw output in bench/raw/<stamp>/
#   ROUNDS=5 bench/compare.sh
#
# Needs: apt-get install -y mpich libmpich-dev openmpi-bin libopenmpi-dev (see bench-ref).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
REF=${REF:-$ROOT/../shared/bench-ref}
ROUNDS=${ROUNDS:-3}
OUT=$ROOT/bench/raw/$(date +%Y%m%d-%H%M%S)
mkdir -p "$OUT"

cargo build --release --workspace >/dev/null
make -s -C "$REF/mpi" pingpong.mpich pingpong.openmpi pingpong_persist.mpich pingpong_persist.openmpi \
    bw.mpich bw.openmpi msgrate.mpich msgrate.openmpi >/dev/null

MPICH="mpiexec.mpich -n 2 -bind-to core"
OMPI="mpirun.openmpi --allow-run-as-root -np 2 --bind-to core --map-by core --mca pml ob1 --mca btl self,vader"
EB="$ROOT/target/release/ebrun -n 2 $ROOT/target/release/earlybird-bench"

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
python3 "$ROOT/bench/summarize.py" "$OUT" | tee "$OUT/summary.md"
