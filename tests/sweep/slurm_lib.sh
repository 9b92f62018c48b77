#!/usr/bin/env bash
# A one-node Slurm cluster for the tests, started as root in a scratch folder: munged on its
# own socket, then slurmctld and slurmd in the foreground for localhost. Sourced by the tests
# that submit jobs (tests/sweep/slurm_test.sh, tests/imagenet/shard_slurm_test.sh). Defines
# $work (the scratch folder, removed at exit), fail (prints the daemons' and jobs' logs, exits
# 1), skip (exits 77), wait_for JOB (up to WAIT_SECONDS, default 180), and stops the daemons
# it started at exit, by pid.
skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" -eq 0 ] || skip "starting slurmctld and slurmd needs root"
for p in munged slurmctld slurmd sbatch squeue scancel; do
  command -v "$p" >/dev/null || skip "$p is not installed (apt-get install slurm-wlm munge)"
done

work=$(mktemp -d /tmp/tpusim-slurm.XXXXXX)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  for f in "$work"/*.log "$work"/*/slurm/*.log; do [ -f "$f" ] && { echo "== $f"; tail -20 "$f"; }; done
  exit 1
}

# munge, on its own socket so that it cannot meet a munged that is already running.
mkdir -p "$work/munge" "$work/state" "$work/spool"
chmod 700 "$work/munge"
dd if=/dev/urandom of="$work/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$work/munge/munge.key"
munged --force --key-file="$work/munge/munge.key" --socket="$work/munge/socket" \
  --pid-file="$work/munge/munged.pid" --log-file="$work/munge.log" \
  --seed-file="$work/munge/seed" --foreground >"$work/munged.out" 2>&1 &
pids+=($!)

port=$((20000 + RANDOM % 20000))
cat > "$work/slurm.conf" <<CONF
ClusterName=tpusim-test
SlurmctldHost=localhost
SlurmctldPort=$port
SlurmdPort=$((port + 1))
AuthType=auth/munge
AuthInfo=socket=$work/munge/socket
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/slurmctld.log
SlurmdLogFile=$work/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
NodeName=localhost CPUs=$(nproc) State=UNKNOWN
PartitionName=test Nodes=localhost Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF="$work/slurm.conf"
sleep 1
slurmctld -D -i -f "$SLURM_CONF" >"$work/slurmctld.out" 2>&1 &
pids+=($!)
slurmd -D -N localhost -f "$SLURM_CONF" >"$work/slurmd.out" 2>&1 &
pids+=($!)
for _ in $(seq 60); do
  sinfo -h -o '%T' 2>/dev/null | grep -qE '^idle' && break
  sleep 0.5
done
sinfo -h -o '%T' 2>/dev/null | grep -qE '^idle' || skip "the one-node Slurm did not come up ($(tail -1 "$work/slurmctld.log" 2>/dev/null))"

wait_for() {  # the job id; up to WAIT_SECONDS (180)
  for _ in $(seq $((2 * ${WAIT_SECONDS:-180}))); do
    [ -z "$(squeue -h -j "$1" 2>/dev/null)" ] && return 0
    sleep 0.5
  done
  fail "job $1 did not finish"
}
