#!/usr/bin/env bash
# A one-node Slurm cluster on this machine, for srun --mpi=pmi2 tests (Debian's slurmd,
# slurmctld, slurm-client and munge; root). Everything lives in a directory of its own.
#
#   suites/slurm-one-node.sh up DIR     # start munged, slurmctld and slurmd; print SLURM_CONF=...
#   SLURM_CONF=DIR/slurm.conf srun --mpi=pmi2 -n 4 prog
#   suites/slurm-one-node.sh down DIR   # stop them (also on failure: callers trap it)
set -euo pipefail
cmd=${1:?up or down}
dir=${2:?directory}
host=$(hostname)

down() {
    for p in slurmd slurmctld munged; do
        [ -f "$dir/$p.pid" ] && kill "$(cat "$dir/$p.pid")" 2>/dev/null || true
    done
    sleep 0.5
    for p in slurmd slurmctld munged; do
        [ -f "$dir/$p.pid" ] && kill -9 "$(cat "$dir/$p.pid")" 2>/dev/null || true
        rm -f "$dir/$p.pid"
    done
}

if [ "$cmd" = down ]; then
    down
    exit 0
fi

mkdir -p "$dir"/{state,spool,munge}
chown munge: "$dir/munge" 2>/dev/null || true
[ -s /etc/munge/munge.key ] || { echo "no /etc/munge/munge.key: install munge" >&2; exit 1; }
# munged refuses to run as root; its socket goes in our directory.
runuser -u munge -- /usr/sbin/munged --socket="$dir/munge/socket" \
    --pid-file="$dir/munge/munged.pid" --log-file="$dir/munge/munged.log" \
    --seed-file="$dir/munge/seed"
cp "$dir/munge/munged.pid" "$dir/munged.pid"

cat > "$dir/slurm.conf" <<CONF
ClusterName=earlybird
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge/socket
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/pgid
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
SlurmctldPort=16817
SlurmdPort=16818
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
SlurmdParameters=config_overrides
NodeName=$host CPUs=8 State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE
CONF
export SLURM_CONF="$dir/slurm.conf"
/usr/sbin/slurmctld -f "$SLURM_CONF" || { tail -n 20 "$dir/slurmctld.log" >&2; down; exit 1; }
/usr/sbin/slurmd -f "$SLURM_CONF" || { tail -n 20 "$dir/slurmd.log" >&2; down; exit 1; }
# Wait (bounded) until the node takes jobs.
for _ in $(seq 1 100); do
    if sinfo -h -o %T 2>/dev/null | grep -qE '^(idle|mixed|allocated)'; then
        echo "SLURM_CONF=$SLURM_CONF"
        exit 0
    fi
    sleep 0.2
done
echo "slurm did not come up; logs in $dir" >&2
tail -n 20 "$dir/slurmctld.log" "$dir/slurmd.log" >&2 || true
down
exit 1
