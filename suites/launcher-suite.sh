#!/usr/bin/env bash
# The conformance suite's process tests (2 and 3 ranks) under other launchers than ebrun:
#   suites/launcher-suite.sh [hydra hydra-port hydra-pmi2 openmpi hydra-hosts]
# (default: the first four; hydra-hosts, root only, makes three namespace hosts for the run
# and places the ranks on them in turn). Each mode runs `EB_LAUNCHER=MODE cargo test -p
# earlybird -- procs_2 procs_3` and prints how many tests passed and failed; the logs stay in
# target/launcher-suite/MODE.log.
set -uo pipefail
cd "$(dirname "$0")/.."
modes=("$@")
[ ${#modes[@]} -eq 0 ] && modes=(hydra hydra-port hydra-pmi2 openmpi)
mkdir -p target/launcher-suite
status=0
for m in "${modes[@]}"; do
    log=target/launcher-suite/$m.log
    if [ "$m" = hydra-hosts ]; then
        export EB_NETNS_PREFIX=ebls$$
        bash suites/netns-hosts.sh up 3 "$EB_NETNS_PREFIX" >/dev/null
    fi
    EB_LAUNCHER=$m cargo test -q -p earlybird --no-fail-fast -- procs_2 procs_3 >"$log" 2>&1 || status=1
    if [ "$m" = hydra-hosts ]; then
        bash suites/netns-hosts.sh down 3 "$EB_NETNS_PREFIX" >/dev/null
    fi
    awk -v m="$m" '/^test result/ {p += $4; f += $6} END {printf "%-11s %d passed, %d failed\n", m, p, f}' "$log"
done
exit $status
