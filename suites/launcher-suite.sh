#!/usr/bin/env bash
# The conformance suite's process tests (2 and 3 ranks) under other launchers than ebrun:
#   suites/launcher-suite.sh [hydra hydra-port hydra-pmi2 openmpi hydra-hosts ebrun-hosts]
# (default: the first four; hydra-hosts and ebrun-hosts, root only, make three namespace
# hosts for the run and place the ranks on them, in turn under Hydra, in blocks under
# ebrun). Each mode runs `EB_LAUNCHER=MODE cargo test -p earlybird -- procs_2 procs_3` and
# prints how many tests passed and failed; the logs stay in
# target/launcher-suite/MODE.log. With EB_NETNS_SLOTS=2 the host modes place two ranks on
# each host (at 3 ranks: two share host 1, the third is on host 2).
set -uo pipefail
cd "$(dirname "$0")/.."
modes=("$@")
[ ${#modes[@]} -eq 0 ] && modes=(hydra hydra-port hydra-pmi2 openmpi)
mkdir -p target/launcher-suite
status=0
for m in "${modes[@]}"; do
    log=target/launcher-suite/$m.log
    if [ "$m" = hydra-hosts ] || [ "$m" = ebrun-hosts ]; then
        export EB_NETNS_PREFIX=ebls$$
        bash suites/netns-hosts.sh up 3 "$EB_NETNS_PREFIX" >/dev/null
    fi
    EB_LAUNCHER=$m cargo test -q -p earlybird --no-fail-fast -- procs_2 procs_3 >"$log" 2>&1 || status=1
    if [ "$m" = hydra-hosts ] || [ "$m" = ebrun-hosts ]; then
        bash suites/netns-hosts.sh down 3 "$EB_NETNS_PREFIX" >/dev/null
    fi
    # Count tests, not "test result" lines: the output of a failed job holds its ranks' own.
    total=$(cargo test -q -p earlybird -- procs_2 procs_3 --list 2>/dev/null | grep -c ': test$')
    failed=$(grep -E '^    [a-z_0-9:]+::procs_[23]$' "$log" | sort -u | wc -l)
    printf '%-11s %d passed, %d failed\n' "$m" $((total - failed)) "$failed"
done
exit $status
