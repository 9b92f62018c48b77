#!/usr/bin/env bash
# tpusim sweep --slurm on a real one-node Slurm cluster: starts munged, slurmctld and slurmd
# (as root, configured for localhost, in a scratch folder), runs a 9-point sweep as a job
# array of 3 tasks, kills one task while it runs, reruns the sweep on Slurm, and checks
# that the table equals the same sweep run locally. Stops the daemons it started.
# Exits 77 (ctest: skipped) with the reason when Slurm cannot run here.
#
#   tests/sweep/slurm_test.sh BUILD/tpusim
set -euo pipefail
tpusim=$(readlink -f "$1")
source "$(dirname "$0")/slurm_lib.sh"
if ! err=$("$tpusim" run --images 1 --engine fast --timing-only -q 2>&1); then
  case "$err" in *"MNIST not found"*) skip "no MNIST data";; esac
  echo "$err"; exit 1
fi

cat > "$work/spec.json" <<SPEC
{"name": "slurm-test",
 "base": {"config": "small-16", "images": 2000, "batch": 16, "engine": "fast"},
 "axes": {"array_dim": [8, 16, 32], "host_mem_bytes_per_cycle": [8, 16, 64]},
 "metrics": ["cycles_per_image", "utilization", "energy_per_image_pj", "accuracy"]}
SPEC

out=$("$tpusim" sweep "$work/spec.json" --out "$work/sweep" --slurm --array-size 3 --jobs 1)
echo "$out"
array=$(python3 -c "import json; print(json.load(open('$work/sweep/slurm/jobs.json'))['array_job'])")
finish=$(python3 -c "import json; print(json.load(open('$work/sweep/slurm/jobs.json'))['finish_job'])")
# Kill task 1 as soon as it runs: its three points take seconds, so most are left undone.
for _ in $(seq 240); do
  state=$(squeue -h -j "${array}_1" -o '%T' 2>/dev/null || true)
  [ "$state" = RUNNING ] && break
  [ -z "$state" ] && fail "task 1 ended before it could be killed"
  sleep 0.25
done
sleep 0.5
scancel "${array}_1"
wait_for "$array"
wait_for "$finish"
status=$("$tpusim" sweep "$work/spec.json" --out "$work/sweep" --status)
echo "$status"
echo "$status" | grep -qE '^9 points: [0-9]+ done, 0 failed, [1-9] to run' || fail "no points were left by the killed task ($status)"
[ -f "$work/sweep/results.csv" ] || fail "the plot job wrote no table"

# Rerun on Slurm: only the missing points run; then the whole table.
"$tpusim" sweep "$work/spec.json" --out "$work/sweep" --slurm --array-size 3 --jobs 1
finish=$(python3 -c "import json; print(json.load(open('$work/sweep/slurm/jobs.json'))['finish_job'])")
wait_for "$finish"
"$tpusim" sweep "$work/spec.json" --out "$work/sweep" --status | grep -q '^9 points: 9 done, 0 failed, 0 to run' ||
  fail "the rerun did not finish the sweep"
[ -f "$work/sweep/plots/pareto.svg" ] || fail "the plot job drew no plots"

# The same sweep on this machine gives the same table.
"$tpusim" sweep "$work/spec.json" --out "$work/local" --no-plots -q
cmp "$work/sweep/results.csv" "$work/local/results.csv" || fail "the Slurm table differs from the local one"
echo "PASS: 9 points on Slurm, one task killed and rerun, table equal to the local run"
