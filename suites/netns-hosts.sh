#!/usr/bin/env bash
# Test "hosts" on this machine: network namespaces PREFIXh1 .. PREFIXhN, each with one
# interface eth0 at 10.77.0.K/24 on a bridge that lives in a namespace of its own (PREFIXsw),
# so that no address of theirs is routed from the root namespace and no traffic of the tests
# ever leaves the machine. Root only (ip netns). PREFIX defaults to "eb".
#
#   suites/netns-hosts.sh up N [PREFIX]     # make N hosts (callers trap `down` at once)
#   suites/netns-hosts.sh down N [PREFIX]   # remove them (quiet about those already gone)
#
# suites/netns-ssh.sh is the matching `ssh` for launchers (Hydra's -launcher-exec, ebrun's
# --launcher-exec): it runs the command in host K's namespace with its own host name and its
# own /dev/shm (unshare --uts --mount), as on a separate machine.
set -euo pipefail
cmd=${1:?up or down}
n=${2:?number of hosts}
p=${3:-eb}

down() {
    # Whatever still runs on a host (a launcher's daemon whose "ssh" was killed before it)
    # goes with it: nothing of a test is left behind.
    for ns in $(seq -f "${p}h%g" 1 "$n") "${p}sw"; do
        pids=$(ip netns pids "$ns" 2>/dev/null || true)
        [ -n "$pids" ] && kill -9 $pids 2>/dev/null || true
        ip netns del "$ns" 2>/dev/null || true
    done
}

case "$cmd" in
down) down ;;
up)
    trap 'down' ERR
    ip netns add "${p}sw"
    ip -n "${p}sw" link add br0 type bridge
    ip -n "${p}sw" link set br0 up
    for k in $(seq 1 "$n"); do
        ip netns add "${p}h$k"
        ip link add eth0 netns "${p}h$k" type veth peer name "veth$k" netns "${p}sw"
        ip -n "${p}sw" link set "veth$k" master br0
        ip -n "${p}sw" link set "veth$k" up
        ip -n "${p}h$k" addr add "10.77.0.$k/24" dev eth0
        ip -n "${p}h$k" link set eth0 up
        ip -n "${p}h$k" link set lo up
    done
    ;;
*) echo "usage: $0 up|down N [PREFIX]" >&2; exit 2 ;;
esac
