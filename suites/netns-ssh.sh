#!/usr/bin/env bash
# `ssh [options] HOST COMMAND...` for the namespace hosts of suites/netns-hosts.sh: HOST is
# 10.77.0.K (or hostK); COMMAND runs in namespace ${EB_NETNS_PREFIX:-eb}hK under its own UTS
# and mount namespaces, with host name hostK and a private tmpfs on /dev/shm.
set -euo pipefail
while [ $# -gt 0 ]; do
    case "$1" in
    -[bcDEeFIiJLlmOopQRSWw]) shift 2 ;;   # options of ssh that take a value
    -*) shift ;;
    *) break ;;
    esac
done
host=${1:?host}
shift
k=${host##*[.t]}
case "$k" in '' | *[!0-9]*) echo "netns-ssh: unknown host $host" >&2; exit 255 ;; esac
ns="${EB_NETNS_PREFIX:-eb}h$k"
exec ip netns exec "$ns" unshare --uts --mount --propagation private sh -c \
    'hostname "$1" && mount -t tmpfs tmpfs /dev/shm && eval "$2"' sh "host$k" "$*"
