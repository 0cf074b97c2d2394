#!/usr/bin/env bash
# A throwaway Slurm on this machine for tests: munged, slurmctld and slurmd, with every file
# under DIR, the node named localhost (so that Cadre's addresses stay on loopback).
#
#   local_slurm.sh start DIR CTLD_PORT SLURMD_PORT   prints SLURM_CONF=..., exit 0 when up
#   local_slurm.sh stop DIR                          stops the daemons started in DIR
#
# Exit status 77 with one line saying why when Slurm cannot run here (not root, no
# packages), so that the test skips.
set -euo pipefail
command=$1
dir=$2

stop() {
  for pid_file in "$dir/slurmd.pid" "$dir/slurmctld.pid" "$dir/munge/munged.pid"; do
    [ -f "$pid_file" ] || continue
    pid=$(cat "$pid_file")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$pid_file"
  done
}

if [ "$command" = stop ]; then
  stop
  exit 0
fi

ctld_port=$3
slurmd_port=$4
if [ "$(id -u)" -ne 0 ]; then
  echo "local Slurm: needs root (slurmd runs jobs as their users)"
  exit 77
fi
for program in /usr/sbin/munged /usr/sbin/slurmctld /usr/sbin/slurmd /usr/bin/srun; do
  if [ ! -x "$program" ]; then
    echo "local Slurm: $program is missing (apt-get install slurm-wlm munge)"
    exit 77
  fi
done

mkdir -p "$dir/state" "$dir/spool" "$dir/munge" "$dir/log"
chmod 700 "$dir/munge"
head -c 1024 /dev/urandom >"$dir/munge/munge.key"
chmod 400 "$dir/munge/munge.key"
/usr/sbin/munged --force --key-file="$dir/munge/munge.key" --socket="$dir/munge/socket" \
  --pid-file="$dir/munge/munged.pid" --log-file="$dir/log/munged.log" \
  --seed-file="$dir/munge/seed"

cat >"$dir/slurm.conf" <<EOF
ClusterName=cadre-test
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge/socket
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
ReturnToService=2
NodeName=localhost NodeHostname=$(hostname) NodeAddr=127.0.0.1 CPUs=$(nproc) State=UNKNOWN
PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE
EOF

export SLURM_CONF=$dir/slurm.conf
if ! /usr/sbin/slurmctld -f "$SLURM_CONF" -i || ! /usr/sbin/slurmd -f "$SLURM_CONF" -N localhost; then
  stop
  echo "local Slurm: the daemons did not start (see $dir/log)"
  exit 77
fi
for _ in $(seq 100); do
  if sinfo -h -o %t 2>/dev/null | grep -qx idle; then
    echo "SLURM_CONF=$SLURM_CONF"
    exit 0
  fi
  sleep 0.2
done
stop
echo "local Slurm: the node did not become idle in 20 s (see $dir/log)"
exit 77
