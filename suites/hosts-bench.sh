#!/usr/bin/env bash
# Benchmarks between namespace hosts (suites/netns-hosts.sh), in one sitting, interleaved:
# the reference ping-pong and bandwidth (8 B, 64 KiB, 1 MiB) between two hosts and the reference
# collectives at 6 ranks on 3 hosts, under
#   eb    earlybird: the MPICH-built benchmark with earlybird's libmpi.so.12, by Hydra;
#   mpich MPICH 4.0.2 (ch4:ucx) over TCP (UCX_TLS=tcp,self), by Hydra;
#   ompi  Open MPI 4.1.4 over TCP (pml ob1, btl tcp,self), by mpirun.
# Without UCX_TLS, MPICH's UCX finds the namespace hosts on one kernel and uses shared
# memory between them; the comparison is over TCP between the same namespaces.
#
# Usage (root): suites/hosts-bench.sh ROUNDS OUT_DIR
#   COLL_ROUNDS  rounds that also run the collectives (default 1: at 6 ranks on 2 cores the
#                references' busy polling makes one run take minutes)
#   BENCH_DIR  the built reference benchmarks (default ../shared/bench-ref/mpi, `make` there)
#   EB_LIB     a directory with libmpi.so.12 -> target/release/libmpi.so (made if absent)
# Prints one line per run: impl bench size median (us; MB/s for bw). Raw output goes to OUT_DIR.
set -euo pipefail
rounds=${1:?rounds}
out=${2:?out dir}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
bench=${BENCH_DIR:-$root/../shared/bench-ref/mpi}
lib=${EB_LIB:-$out/eblib}
mkdir -p "$out" "$lib"
[ -e "$lib/libmpi.so.12" ] || ln -s "$root/target/release/libmpi.so" "$lib/libmpi.so.12"
[ -e "$lib/libmpich.so.12" ] || ln -s "$root/target/release/libmpi.so" "$lib/libmpich.so.12"
prefix=ebb$$
bash "$here/netns-hosts.sh" up 3 "$prefix" >/dev/null
trap 'bash "$here/netns-hosts.sh" down 3 "$prefix" >/dev/null 2>&1 || true' EXIT
export EB_NETNS_PREFIX=$prefix
ssh="$here/netns-ssh.sh"
in1=(ip netns exec "${prefix}h1")

# run IMPL NRANKS HOSTS PROGRAM ARGS...
run() {
    local impl=$1 n=$2 hosts=$3
    shift 3
    local prog=$1
    shift
    case $impl in
    eb)
        timeout 300 "${in1[@]}" env LD_LIBRARY_PATH="$lib" mpiexec.hydra -iface eth0 \
            -launcher ssh -launcher-exec "$ssh" -hosts "$hosts" -n "$n" "$bench/$prog.mpich" "$@"
        ;;
    mpich)
        timeout 300 "${in1[@]}" env UCX_TLS=tcp,self mpiexec.hydra -iface eth0 \
            -launcher ssh -launcher-exec "$ssh" -hosts "$hosts" -n "$n" "$bench/$prog.mpich" "$@"
        ;;
    ompi)
        local oh
        oh=$(echo "$hosts" | sed 's/\([0-9.]*\)/\1:2/g')
        timeout 300 "${in1[@]}" mpirun.openmpi --allow-run-as-root --bind-to none \
            --mca oob_tcp_if_include 10.77.0.0/24 --mca btl_tcp_if_include 10.77.0.0/24 \
            --mca pml ob1 --mca btl tcp,self --mca plm_rsh_agent "$ssh" \
            --map-by node --host "$oh" -n "$n" "$bench/$prog.openmpi" "$@"
        ;;
    esac
}

for k in $(seq 1 "$rounds"); do
    for impl in eb mpich ompi; do
        f="$out/$impl.pingpong.run$k.txt"
        run "$impl" 2 10.77.0.1,10.77.0.2 pingpong -s 8,64k,1m -n 4000 >"$f" 2>&1 || true
        grep '^RESULT' "$f" | sed -E "s/.*size=([0-9]+).*median=([0-9.]+).*/$impl pingpong \1 \2/"
        f="$out/$impl.bw.run$k.txt"
        run "$impl" 2 10.77.0.1,10.77.0.2 bw -s 8,64k,1m >"$f" 2>&1 || true
        grep '^RESULT' "$f" | sed -E "s/.*size=([0-9]+).*metric=MB_per_s median=([0-9.]+).*/$impl bw \1 \2/"
        [ "$k" -le "${COLL_ROUNDS:-1}" ] || continue
        f="$out/$impl.coll.run$k.txt"
        run "$impl" 6 10.77.0.1,10.77.0.2,10.77.0.3 coll -n 20 -m 5 -r 3 >"$f" 2>&1 || true
        grep '^RESULT' "$f" | grep -v persistent=1 |
            sed -E "s/.*bench=([a-z_]+) size=([0-9]+).*median=([0-9.]+).*/$impl \1 \2 \3/"
    done
done
