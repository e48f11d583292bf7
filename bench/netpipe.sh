#!/usr/bin/env bash
# NetPIPE (Debian's netpipe-mpich2: NPmpich2, built against MPICH) run unmodified on earlybird's
# libmpi.so.12 through LD_LIBRARY_PATH, interleaved with the same binary on MPICH itself.
# Prints, per round and as medians: the 1-byte half round trip (us) and the bandwidth at
# 64 KiB (Mbps). ROUNDS (default 5) launches of each.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-5}
command -v NPmpich2 >/dev/null || { apt-get update -qq && apt-get install -y -qq netpipe-mpich2; }
cargo build --release -q -p earlybird-libmpi -p ebrun
lib=$(mktemp -d)
trap 'rm -rf "$lib"' EXIT
ln -s "$PWD/target/release/libmpi.so" "$lib/libmpi.so.12"
ln -s "$PWD/target/release/libmpi.so" "$lib/libmpich.so.12"
one() { # $1: label; the rest: the launch command. Prints "label lat_us mbps_64k".
    local label=$1 out
    shift
    out=$(mktemp)
    "$@" /usr/bin/NPmpich2 -u 65536 -o "$out" >/dev/null 2>&1
    awk -v l="$label" '$1 == 1 {lat = $3 * 1e6} $1 == 65536 {bw = $2} END {printf "%s %.3f %.0f\n", l, lat, bw}' "$out"
    rm -f "$out"
}
res=$(mktemp)
for r in $(seq "$ROUNDS"); do
    one earlybird env LD_LIBRARY_PATH="$lib" target/release/ebrun -n 2 | tee -a "$res"
    one mpich mpiexec.mpich -n 2 | tee -a "$res"
done
echo "medians over $ROUNDS rounds: implementation, 1-byte half round trip (us), 64 KiB bandwidth (Mbps)"
for impl in earlybird mpich; do
    grep "^$impl " "$res" | awk '{print $2}' | sort -g | awk -v i="$impl" '{a[NR]=$1} END {printf "%s %s", i, a[int((NR+1)/2)]}'
    grep "^$impl " "$res" | awk '{print $3}' | sort -g | awk '{a[NR]=$1} END {printf " %s\n", a[int((NR+1)/2)]}'
done
rm -f "$res"
