#!/usr/bin/env bash
# mpi4py's test suite on earlybird through PyPI's prebuilt mpi4py 4.1.2 wheel (built against
# MPICH's ABI elsewhere; nothing is compiled here), its library chosen by MPI4PY_LIBMPI, and the
# tests of its source distribution, under ebrun.
#
#   suites/mpi4py-wheel.sh [NP...] [-- main.py ARGS]     default: 2 ranks, the same modules as
#                                                        suites/mpi4py.sh
#
# EARLYBIRD_PREFIX: an installed earlybird (default: this build, installed into
# target/suites/earlybird). Results: target/suites/results/wheel/mpi4py-np<N>.txt; the exit
# status is main.py's of the last run.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
nps=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do nps+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
[ ${#nps[@]} -gt 0 ] || nps=(2)
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(-e spawn -e dynproc -e util_sync -e util_pool -e io -e file -e ulfm)

src=$(suites/fetch-mpi4py-source.sh) || exit 1
prefix=${EARLYBIRD_PREFIX:-}
if [ -z "$prefix" ]; then
    prefix=$root/target/suites/earlybird
    cargo build --release --workspace -q || exit 1
    target/release/earlybird-install "$prefix" >/dev/null || exit 1
fi
venv=$root/target/suites/venv-wheel
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv" || exit 1
fi
"$venv/bin/python" -c "import mpi4py" 2>/dev/null ||
    "$venv/bin/pip" install -q --only-binary :all: mpi4py==4.1.2 || exit 1
out=$root/target/suites/results/wheel
mkdir -p "$out"
rc=0
for np in "${nps[@]}"; do
    (cd "$src/test" && MPI4PY_LIBMPI=$prefix/lib/libmpi.so.12 MPIEXEC_TIMEOUT=${TIMEOUT:-600} \
        "$prefix/bin/mpiexec" -n "$np" "$venv/bin/python" main.py --no-builddir "${args[@]}" \
        >"$out/mpi4py-np$np.txt" 2>&1)
    rc=$?
    summary=$(grep -E "^Ran [0-9]+ tests|^(OK|FAILED)" "$out/mpi4py-np$np.txt" | sort -u | tr '\n' ' ')
    echo "wheel mpi4py np=$np: exit $rc, $summary(details: $out/mpi4py-np$np.txt)"
done
exit $rc
