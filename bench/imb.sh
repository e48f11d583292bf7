#!/usr/bin/env bash
# Intel MPI Benchmarks as Intel ships them (PyPI impi-rt: IMB-P2P, IMB-MPI1, built for the
# MPICH ABI, NEEDED libmpi.so.12), run unmodified on earlybird's libmpi.so.12 and on Debian's
# MPICH (through a libmpi.so.12 -> libmpich.so.12 link), 2 ranks bound to cores, one after the
# other. Downloads the 129 MB wheel once into $IMB_DIR (default /tmp/impi).
# Usage: bench/imb.sh [IMB-P2P|IMB-MPI1] [benchmarks...]   (default: IMB-P2P PingPong)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
IMB_DIR=${IMB_DIR:-/tmp/impi}
prog=${1:-IMB-P2P}
shift || true
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(PingPong)
bin="$IMB_DIR/impi_rt-2021.19.0.data/data/bin/$prog"
if [ ! -x "$bin" ]; then
    mkdir -p "$IMB_DIR"
    pip download impi-rt==2021.19.0 --no-deps -d "$IMB_DIR" -q
    (cd "$IMB_DIR" && unzip -q -o impi_rt-*.whl 'impi_rt-2021.19.0.data/data/bin/IMB-*')
fi
cd "$ROOT"
cargo build --release -q -p earlybird-libmpi -p ebrun
eb=$(mktemp -d) mp=$(mktemp -d)
trap 'rm -rf "$eb" "$mp"' EXIT
ln -s "$ROOT/target/release/libmpi.so" "$eb/libmpi.so.12"
ln -s /usr/lib/x86_64-linux-gnu/libmpich.so.12 "$mp/libmpi.so.12"
echo "== earlybird"
env LD_LIBRARY_PATH="$eb" EARLYBIRD_BIND=core target/release/ebrun -n 2 "$bin" "${args[@]}" | grep -v '^#'
echo "== MPICH"
env LD_LIBRARY_PATH="$mp" mpiexec.mpich -n 2 -bind-to core "$bin" "${args[@]}" | grep -v '^#'
