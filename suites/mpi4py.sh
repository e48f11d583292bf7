#!/usr/bin/env bash
# mpi4py's own test suite on earlybird: mpi4py 4.1.2 built from its PyPI source with
# earlybird's mpicc (MPI4PY_BUILD_CONFIGURE=1 probes every MPI call, so the ones earlybird
# lacks become NotImplementedError and their tests skip), then test/main.py under ebrun.
#
#   suites/mpi4py.sh [NP...] [-- main.py ARGS]     default: 1 2 3 ranks, everything but the
#                                                  excluded modules below
#
# MPICH=1 builds and runs the same against Debian's MPICH (mpicc.mpich, mpiexec.mpich), for the
# counts beside. Results: target/suites/results/<impl>/mpi4py-np<N>.txt.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
nps=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do nps+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
[ ${#nps[@]} -gt 0 ] || nps=(1 2 3)
# Dynamic processes and MPI-IO are not in earlybird; util_sync hangs on two cores under
# MPICH too; util_pool (mpi4py.futures, which calls MPI from a second thread under
# MPI_THREAD_SERIALIZED) spawns its workers at 1 rank (dynamic processes) and waits forever
# when spawn fails, so it runs alone at 2 ranks or more (`suites/mpi4py.sh 2 -- -i util_pool`:
# 20 pass, 20 skip on 2026-11-27); ulfm: mpi4py turns MPICH's fault tolerance off (mpiulfm.h)
# and uses stand-ins, on earlybird too (its mpi.h says MPICH), and its stand-in for
# MPIX_Comm_iagree (an MPI_Iallreduce on the communicator itself) makes its test post
# collectives in different orders on different ranks, which hangs at 3 ranks. (earlybird's
# own MPIX_Comm_iagree counts agreements apart and passes that order: tests/c/fault_tolerance.c.)
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(-e spawn -e dynproc -e util_sync -e util_pool -e io -e file -e ulfm)

src=$(suites/fetch-mpi4py-source.sh) || exit 1

if [ "${MPICH:-0}" = 1 ]; then
    name=mpich
    cc=$(command -v mpicc.mpich)
    launcher=$(readlink -f "$(command -v mpiexec.mpich)")
else
    name=earlybird
    prefix=$root/target/suites/earlybird
    cargo build --release --workspace -q || exit 1
    target/release/earlybird-install "$prefix" >/dev/null || exit 1
    cc=$prefix/bin/mpicc
    launcher=$prefix/bin/mpiexec
fi

venv=$root/target/suites/venv-$name
out=$root/target/suites/results/$name
mkdir -p "$out"
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv" || exit 1
fi
# Rebuilt each time, configure included: the library and header under it may have changed.
rm -rf "$src/build"
MPI4PY_BUILD_MPICC=$cc MPI4PY_BUILD_CONFIGURE=1 "$venv/bin/pip" install -q --force-reinstall \
    --no-binary mpi4py "$src" >"$out/mpi4py-build.log" 2>&1 || { echo "mpi4py did not build: $out/mpi4py-build.log"; exit 1; }

for np in "${nps[@]}"; do
    (cd "$src/test" && MPIEXEC_TIMEOUT=${TIMEOUT:-600} "$launcher" -n "$np" "$venv/bin/python" main.py "${args[@]}" \
        >"$out/mpi4py-np$np.txt" 2>&1)
    rc=$?
    summary=$(grep -E "^Ran [0-9]+ tests|^(OK|FAILED)" "$out/mpi4py-np$np.txt" | sort -u | tr '\n' ' ')
    echo "$name mpi4py np=$np: exit $rc, $summary(details: $out/mpi4py-np$np.txt)"
done
