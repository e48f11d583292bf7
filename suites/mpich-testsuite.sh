#!/usr/bin/env bash
# MPICH 4.0.2's own test suite (test/mpi of Debian's source package) on earlybird, by its own
# runner (runtests) with ebrun as mpiexec.
#
#   suites/mpich-testsuite.sh [DIR...]     default: pt2pt part coll comm group datatype attr
#                                          info init errhan topo rma
#
# Builds earlybird (release), installs it into target/suites/earlybird with earlybird-install,
# configures the suite against that prefix (once), builds the given directories and runs each
# with runtests at up to MAXNP ranks (default 4). Results: target/suites/results/DIR.{tap,txt};
# a summary line per directory on stdout. TIMEOUT_MULTIPLIER scales each test's time limit
# (default 0.5: 90 s for most tests).
#
# With MPICH=1 the same runs happen on Debian's MPICH (mpicc.mpich, mpiexec.mpich) in a
# configuration of its own, for the counts beside earlybird's. With EARLYBIRD_PREFIX=DIR the
# earlybird already installed there is tested (no build; the test suite's own test does this
# with the debug build), with its results under target/suites/results/<DIR's name>.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
dirs=("$@")
[ ${#dirs[@]} -gt 0 ] || dirs=(pt2pt part coll comm group datatype attr info init errhan topo rma)
maxnp=${MAXNP:-4}
src=$(suites/fetch-mpich-source.sh) || exit 1

if [ "${MPICH:-0}" = 1 ]; then
    name=mpich
    prefix=$root/target/suites/mpich-prefix
    mkdir -p "$prefix/bin"
    ln -sf "$(command -v mpicc.mpich)" "$prefix/bin/mpicc"
    # Hydra finds its proxy beside the mpiexec it was started as: start it by its own path.
    launcher=$(readlink -f "$(command -v mpiexec.mpich)")
elif [ -n "${EARLYBIRD_PREFIX:-}" ]; then
    prefix=$(cd "$EARLYBIRD_PREFIX" && pwd)
    name=$(basename "$prefix")
    launcher=$prefix/bin/mpiexec
else
    name=earlybird
    prefix=$root/target/suites/earlybird
    cargo build --release --workspace -q || exit 1
    target/release/earlybird-install "$prefix" >/dev/null || exit 1
    launcher=$prefix/bin/mpiexec
fi

# A copy of the suite per implementation, configured once against its prefix.
build=$root/target/suites/build-$name
if [ ! -f "$build/config.status" ]; then
    rm -rf "$build" && mkdir -p "$build" && cp -a "$src"/. "$build"/
    # earlybird's mpi.h declares the calls it lacks only on request; the suite's own
    # utilities call some (RMA), and a test of a missing call should fail when run, as it
    # would as a binary built against MPICH.
    cflags=""
    [ "$name" = mpich ] || cflags="-DEARLYBIRD_DECLARE_MISSING"
    (cd "$build" && CFLAGS="$cflags" ./configure --with-mpi="$prefix" --enable-strictmpi --disable-fortran \
        --disable-cxx --disable-romio --disable-spawn --disable-ft-tests --disable-perftest \
        >configure.log 2>&1) || { echo "configure failed: $build/configure.log"; exit 1; }
    make -C "$build/util" -j2 >/dev/null 2>&1 && make -C "$build/dtpools" -j2 >/dev/null 2>&1 \
        || { echo "util/dtpools did not build"; exit 1; }
fi

out=$root/target/suites/results/$name
mkdir -p "$out"
for d in "${dirs[@]}"; do
    # Build what builds (a test that does not compile or link fails in runtests as such).
    make -C "$build/$d" -k -j2 >"$out/$d.make.log" 2>&1
    (cd "$build/$d" && MPITEST_TIMEOUT_MULTIPLIER=${TIMEOUT_MULTIPLIER:-0.5} \
        "$build/runtests" -srcdir=. -tests=testlist -mpiexec="$launcher" \
        -maxnp="$maxnp" -tapfile="$out/$d.tap" >"$out/$d.txt" 2>&1)
    total=$(grep -c '^\(not \)\?ok ' "$out/$d.tap" 2>/dev/null)
    failed=$(grep -c '^not ok ' "$out/$d.tap" 2>/dev/null)
    total=${total:-0} failed=${failed:-0}
    echo "$name $d: $((total - failed)) of $total passed (details: $out/$d.tap)"
done
