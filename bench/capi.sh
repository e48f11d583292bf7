#!/usr/bin/env bash
# The C ABI against the Rust API: bench-ref's C pingpong and msgrate, compiled against MPICH
# (`make -C ../shared/bench-ref/mpi pingpong.mpich msgrate.mpich`), run unmodified on
# earlybird's libmpi.so.12 (LD_LIBRARY_PATH, EARLYBIRD_BIND=core as MPICH's -bind-to core),
# interleaved with earlybird-bench latency / msgrate (the same measurements through the Rust
# API) and with the same binaries on MPICH. Also the same C sources built to ask for
# MPI_THREAD_MULTIPLE (MPI_Init made MPI_Init_thread by a forced include), to show what
# MULTIPLE's lock costs a program that calls from one thread. The same C sources on Open MPI
# too when its compiler is there (Debian's libopenmpi-dev; launched as bench-ref says).
# ROUNDS (default 5) launches of each; prints the medians of the runs' medians and the C/Rust
# ratio. RAW=FILE keeps each run's figure there.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
REF=${REF:-$ROOT/../shared/bench-ref}
ROUNDS=${ROUNDS:-5}
SIZE=${SIZE:-8}
cd "$ROOT"
cargo build --release -q -p earlybird-libmpi -p ebrun -p earlybird-bench
make -s -C "$REF/mpi" pingpong.mpich msgrate.mpich >/dev/null
ompi=
if command -v mpicc.openmpi >/dev/null && make -s -C "$REF/mpi" pingpong.openmpi msgrate.openmpi >/dev/null 2>&1; then
    ompi=1
fi
OMPI="mpirun.openmpi --allow-run-as-root -np 2 --bind-to core --map-by core --mca pml ob1 --mca btl self,vader"
lib=$(mktemp -d)
printf '#define _GNU_SOURCE\n#include <mpi.h>\nstatic inline int eb_multiple(int *c, char ***v) { int p; return MPI_Init_thread(c, v, MPI_THREAD_MULTIPLE, &p); }\n#define MPI_Init eb_multiple\n' > "$lib/multiple.h"
for b in pingpong msgrate; do
    mpicc.mpich -O2 -Wno-unused-function -Wno-stringop-overflow -include "$lib/multiple.h" -I"$REF/mpi" -o "$lib/$b.multiple" "$REF/mpi/$b.c"
done
res=$(mktemp)
trap 'rm -rf "$lib" "$res"' EXIT
ln -s "$ROOT/target/release/libmpi.so" "$lib/libmpi.so.12"
ln -s "$ROOT/target/release/libmpi.so" "$lib/libmpich.so.12"
EB="$ROOT/target/release/ebrun -n 2"
c_median() { grep -o 'median=[0-9.]*' | head -1 | cut -d= -f2; }
rust_field() { grep -o "\"$1\":[0-9.]*" | head -1 | cut -d: -f2; }
for r in $(seq "$ROUNDS"); do
    echo "capi latency $(env LD_LIBRARY_PATH="$lib" EARLYBIRD_BIND=core $EB "$REF/mpi/pingpong.mpich" -s "$SIZE" | c_median)" >> "$res"
    echo "rust latency $(env EARLYBIRD_BIND=core $EB target/release/earlybird-bench latency --sizes "$SIZE" | rust_field median_us)" >> "$res"
    echo "multiple latency $(env LD_LIBRARY_PATH="$lib" EARLYBIRD_BIND=core $EB "$lib/pingpong.multiple" -s "$SIZE" | c_median)" >> "$res"
    echo "mpich latency $(mpiexec.mpich -n 2 -bind-to core "$REF/mpi/pingpong.mpich" -s "$SIZE" | c_median)" >> "$res"
    if [ -n "$ompi" ]; then echo "openmpi latency $($OMPI "$REF/mpi/pingpong.openmpi" -s "$SIZE" 2>/dev/null | c_median)" >> "$res"; fi
    echo "capi msgrate $(env LD_LIBRARY_PATH="$lib" EARLYBIRD_BIND=core $EB "$REF/mpi/msgrate.mpich" -s "$SIZE" | c_median)" >> "$res"
    echo "rust msgrate $(env EARLYBIRD_BIND=core $EB target/release/earlybird-bench msgrate --sizes "$SIZE" | rust_field mmsg_per_s)" >> "$res"
    echo "multiple msgrate $(env LD_LIBRARY_PATH="$lib" EARLYBIRD_BIND=core $EB "$lib/msgrate.multiple" -s "$SIZE" | c_median)" >> "$res"
    echo "mpich msgrate $(mpiexec.mpich -n 2 -bind-to core "$REF/mpi/msgrate.mpich" -s "$SIZE" | c_median)" >> "$res"
    if [ -n "$ompi" ]; then echo "openmpi msgrate $($OMPI "$REF/mpi/msgrate.openmpi" -s "$SIZE" 2>/dev/null | c_median)" >> "$res"; fi
done
med() { grep "^$1 $2 " "$res" | awk '{print $3}' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo "medians over $ROUNDS rounds, $SIZE-byte messages: latency (half round trip, us), message rate (Mmsg/s)"
for m in latency msgrate; do
    c=$(med capi $m) r=$(med rust $m) p=$(med mpich $m) t=$(med multiple $m) o=$(med openmpi $m)
    echo "$m: C ABI $c, Rust API $r, MPICH $p, Open MPI ${o:-(not built)}; C ABI / Rust API = $(echo "$c $r" | awk '{printf "%.3f", $1 / $2}'); C ABI under MULTIPLE $t ($(echo "$t $c" | awk '{printf "%.3f", $1 / $2}') of the C ABI's)"
done
if [ -n "${RAW:-}" ]; then cp "$res" "$RAW"; fi
