#!/usr/bin/env bash
# Seed 002's assertions, with and without, in one sitting: ROUNDS launches of
# `earlybird-bench assert` without assertions alternate with ROUNDS launches with the
# init-time ones (EARLYBIRD_ASSERTIONS below; the communicator ones are measured with and
# without inside every launch), interleaved with bench-ref's MPICH and Open MPI programs for
# the same points (8 B latency, 8 B message rate, 1 MiB bandwidth, allreduce), 2 ranks one per
# core. Prints the medians over rounds, each with/without pair as a ratio.
#
#   bench/assert.sh                  # ROUNDS=5; raw output in bench/raw/<stamp>-assert/
#   BASE=<rev> bench/assert.sh       # also "nothing slower": 8 B latency and msgrate, no
#                                    # assertion, of <rev> against this tree's library under
#                                    # <rev>'s own earlybird-bench (the same benchmark source
#                                    # on both sides: the loops' speed moves by some 10% with
#                                    # how LTO inlines the library into the benchmark binary,
#                                    # which new benchmark code can change), interleaved
#
# Needs: apt-get install -y mpich libmpich-dev openmpi-bin libopenmpi-dev (see bench-ref).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
REF=${REF:-$ROOT/../shared/bench-ref}
ROUNDS=${ROUNDS:-5}
OUT=$ROOT/bench/raw/$(date +%Y%m%d-%H%M%S)-assert
mkdir -p "$OUT"
INIT=no_eager_throttle,no_reduce_constraint,no_datatype_xlate,no_send_cancels,no_mixed_requests

cargo build --release -p earlybird-bench -p ebrun >/dev/null
make -s -C "$REF/mpi" pingpong.mpich pingpong.openmpi bw.mpich bw.openmpi msgrate.mpich \
    msgrate.openmpi coll.mpich coll.openmpi >/dev/null
MPICH="mpiexec.mpich -n 2 -bind-to core"
OMPI="mpirun.openmpi --allow-run-as-root -np 2 --bind-to core --map-by core --mca pml ob1 --mca btl self,vader"
EB="$ROOT/target/release/ebrun -n 2 $ROOT/target/release/earlybird-bench"

if [ -n "${BASE:-}" ]; then
    for t in base headlib; do
        rm -rf /tmp/eb-$t && git worktree prune && git worktree add -f /tmp/eb-$t "$BASE" >/dev/null
    done
    rm -rf /tmp/eb-headlib/crates/earlybird && cp -r "$ROOT/crates/earlybird" /tmp/eb-headlib/crates/
    for t in base headlib; do
        (cd /tmp/eb-$t && CARGO_TARGET_DIR=/tmp/eb-$t/target cargo build --release -p earlybird-bench -p ebrun >/dev/null)
    done
    EB_BASE="/tmp/eb-base/target/release/ebrun -n 2 /tmp/eb-base/target/release/earlybird-bench"
    EB_HEAD="/tmp/eb-headlib/target/release/ebrun -n 2 /tmp/eb-headlib/target/release/earlybird-bench"
fi

for k in $(seq 1 "$ROUNDS"); do
    echo "round $k: load $(cut -d' ' -f1-3 /proc/loadavg)"
    $EB assert >> "$OUT/eb_assert.txt"
    EARLYBIRD_ASSERTIONS=$INIT $EB assert >> "$OUT/eb_assert.txt"
    $MPICH "$REF/mpi/pingpong.mpich" -s 8 >> "$OUT/mpich_pingpong.txt" 2>&1
    $OMPI "$REF/mpi/pingpong.openmpi" -s 8 >> "$OUT/openmpi_pingpong.txt" 2>&1
    $MPICH "$REF/mpi/msgrate.mpich" -s 8 >> "$OUT/mpich_msgrate.txt" 2>&1
    $OMPI "$REF/mpi/msgrate.openmpi" -s 8 >> "$OUT/openmpi_msgrate.txt" 2>&1
    $MPICH "$REF/mpi/bw.mpich" -s 1m >> "$OUT/mpich_bw.txt" 2>&1
    $OMPI "$REF/mpi/bw.openmpi" -s 1m >> "$OUT/openmpi_bw.txt" 2>&1
    $MPICH "$REF/mpi/coll.mpich" >> "$OUT/mpich_coll.txt" 2>&1
    $OMPI "$REF/mpi/coll.openmpi" >> "$OUT/openmpi_coll.txt" 2>&1
    if [ -n "${BASE:-}" ]; then
        $EB_BASE latency --sizes 8 >> "$OUT/base_latency.txt"
        $EB_HEAD latency --sizes 8 >> "$OUT/head_latency.txt"
        $EB_BASE msgrate >> "$OUT/base_msgrate.txt"
        $EB_HEAD msgrate >> "$OUT/head_msgrate.txt"
    fi
done
if [ -n "${BASE:-}" ]; then
    git worktree remove --force /tmp/eb-base && git worktree remove --force /tmp/eb-headlib
fi

python3 - "$OUT" <<'EOF' | tee "$OUT/summary.md"
import json, sys, glob, os, statistics as st
out = sys.argv[1]
def lines(f):
    for l in open(f):
        l = l.strip()
        if l.startswith("{"):
            try:
                yield json.loads(l)
            except ValueError:
                pass
def key_fig(d):
    return d.get("mmsg_per_s") if d["bench"] == "msgrate" else d["median_us"]
pairs = {}
for d in lines(os.path.join(out, "eb_assert.txt")):
    k = (d["bench"], d["bytes"], d["assertion"])
    pairs.setdefault(k, {}).setdefault(d["with"], []).append(key_fig(d))
print("| point | assertion | without | with | ratio (gain) |")
print("|---|---|---|---|---|")
for (b, n, a), v in sorted(pairs.items()):
    wo, wi = st.median(v.get(False, [float("nan")])), st.median(v.get(True, [float("nan")]))
    unit = "M msg/s" if b == "msgrate" else "us"
    gain = wi / wo if b == "msgrate" else wo / wi
    print(f"| {b} {n} B | {a} | {wo:.4g} {unit} | {wi:.4g} {unit} | {gain:.2f}x |")
print()
print("| anchor | MPICH | Open MPI |")
print("|---|---|---|")
for prog in ["pingpong", "msgrate", "bw", "coll"]:
    figs = {}
    for impl in ["mpich", "openmpi"]:
        f = os.path.join(out, f"{impl}_{prog}.txt")
        for l in (open(f) if os.path.exists(f) else []):
            if not l.startswith("RESULT "):
                continue
            d = dict(kv.split("=", 1) for kv in l.split()[1:] if "=" in kv)
            k = (d["bench"], int(d["size"]), d["metric"])
            figs.setdefault(k, {}).setdefault(impl, []).append(float(d["median"]))
    for (b, n, metric), v in sorted(figs.items()):
        m = st.median(v.get("mpich", [float("nan")]))
        o = st.median(v.get("openmpi", [float("nan")]))
        print(f"| {b} {n} B ({metric}) | {m:.4g} | {o:.4g} |")
base = os.path.join(out, "base_latency.txt")
if os.path.exists(base):
    print()
    print("| no assertion, same benchmark source | base library | this library | this/base |")
    print("|---|---|---|---|")
    for name in ["latency", "msgrate"]:
        b = [key_fig(d) for d in lines(os.path.join(out, f"base_{name}.txt"))]
        h = [key_fig(d) for d in lines(os.path.join(out, f"head_{name}.txt"))]
        print(f"| {name} 8 B | {st.median(b):.4g} | {st.median(h):.4g} | {st.median(h)/st.median(b):.3f} |")
EOF
