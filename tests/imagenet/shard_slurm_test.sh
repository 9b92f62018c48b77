#!/usr/bin/env bash
# Four images of resnet18 on edge-32's RTL as four tasks of a Slurm job array (a sweep with a
# "shard" axis, on the one-node Slurm of tests/sweep/slurm_lib.sh); `tpusim merge` of the
# slices equals the fast engine's single run of the four: accuracy, bit-exactness, cycles
# and every per-layer sum.
#
#   tests/imagenet/shard_slurm_test.sh BUILD/tpusim EXPORT_DIR
set -euo pipefail
tpusim=$(readlink -f "$1")
dir=$(readlink -f "$2")
source "$(dirname "$0")/../sweep/slurm_lib.sh"
[ -f "$dir/resnet18.onnx" ] || skip "no $dir/resnet18.onnx (the export was skipped)"
/usr/bin/python3 -c "
import numpy as np
x = np.load('$dir/inputs.npy')
np.save('$work/inputs.npy', np.concatenate([x, x[::-1] * 0.5]))"  # four inputs
"$tpusim" import "$dir/resnet18.onnx" --out "$work/m" --quantize --synthetic 4 -q
cat > "$work/spec.json" <<SPEC
{"name": "resnet18-shards",
 "base": {"config": "edge-32", "model": "$work/m", "inputs": "$work/inputs.npy", "images": 4,
          "batch": 1, "engine": "rtl"},
 "axes": {"shard": ["0/4", "1/4", "2/4", "3/4"]}}
SPEC
"$tpusim" sweep "$work/spec.json" --out "$work/sweep" --slurm --array-size 4 --jobs 1
finish=$(python3 -c "import json; print(json.load(open('$work/sweep/slurm/jobs.json'))['finish_job'])")
WAIT_SECONDS=1200 wait_for "$finish"
"$tpusim" sweep "$work/spec.json" --out "$work/sweep" --status | grep -q '^4 points: 4 done, 0 failed' ||
  fail "not every slice ran"
"$tpusim" merge "$work/sweep/points" --json "$work/merged.json" -q || fail "merge"
"$tpusim" run --model "$work/m" --inputs "$work/inputs.npy" --images 4 --batch 1 \
  --config edge-32 --engine fast --json "$work/single.json" -q || fail "the single run"
/usr/bin/python3 - "$work/merged.json" "$work/single.json" <<'PY' || fail "the merged report differs"
import json, sys
merged, single = (json.load(open(p)) for p in sys.argv[1:])
assert merged["bit_exact"] is True and merged["images"] == 4
for r in (merged, single):
    for k in ("engine", "wall_seconds"):
        r.pop(k)
    for k in ("name", "description"):  # a sweep names its points' config "sweep point"
        r["config"].pop(k)
diff = [k for k in single if single[k] != merged[k]]
assert not diff, f"they differ in {diff}"
print(f"merged slices = single run: {merged['cycles']:,} cycles for 4 images")
PY
echo "PASS: 4 RTL slices on Slurm merged into the fast engine's single run"
