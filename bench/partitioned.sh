#!/usr/bin/env bash
# Partitioned communication on earlybird beside MPICH: bench/partitioned.c compiled once
# against MPICH (mpicc.mpich), run unmodified on earlybird's libmpi.so.12 (LD_LIBRARY_PATH,
# EARLYBIRD_BIND=core as MPICH's -bind-to core) and on MPICH, launches interleaved, ROUNDS
# (default 5) of each per case; prints the median of the runs' medians (half a round trip, us)
# and earlybird/MPICH. Cases: PARTS x SIZE bytes, partitioned and as one persistent message.
# (Open MPI 4.1, Debian's, has no partitioned communication.) RAW=FILE keeps every figure.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
ROUNDS=${ROUNDS:-5}
CASES=${CASES:-"8x8 64x8 8x8192 16x65536"}
cd "$ROOT"
cargo build --release -q -p earlybird-libmpi -p ebrun
work=$(mktemp -d)
res=${RAW:-$work/raw}
trap 'rm -rf "$work"' EXIT
mpicc.mpich -O2 -o "$work/partitioned" bench/partitioned.c
ln -s "$ROOT/target/release/libmpi.so" "$work/libmpi.so.12"
ln -s "$ROOT/target/release/libmpi.so" "$work/libmpich.so.12"
median() { grep -o 'median=[0-9.]*' | head -1 | cut -d= -f2; }
: > "$res"
for r in $(seq "$ROUNDS"); do
    for c in $CASES; do
        p=${c%x*} s=${c#*x}
        n=$(( s >= 65536 ? 200 : 2000 ))
        for m in part plain; do
            args=(-p "$p" -s "$s" -n "$n" -m "$m")
            echo "earlybird $m $c $(env LD_LIBRARY_PATH="$work" EARLYBIRD_BIND=core target/release/ebrun -n 2 "$work/partitioned" "${args[@]}" | median)" >> "$res"
            echo "mpich $m $c $(mpiexec.mpich -n 2 -bind-to core "$work/partitioned" "${args[@]}" | median)" >> "$res"
        done
    done
done
python3 - "$res" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    impl, mode, case, v = line.split()
    runs.setdefault((mode, case, impl), []).append(float(v))
print(f"{'case':>10} {'mode':>6} {'earlybird us':>13} {'MPICH us':>10} {'ratio':>6}")
for (mode, case) in sorted({(m, c) for (m, c, _) in runs}, key=lambda k: (k[1], k[0])):
    e = statistics.median(runs[(mode, case, 'earlybird')])
    m = statistics.median(runs[(mode, case, 'mpich')])
    print(f"{case:>10} {mode:>6} {e:13.3f} {m:10.3f} {e / m:6.2f}")
PY
