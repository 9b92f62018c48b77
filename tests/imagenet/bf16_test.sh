#!/usr/bin/env bash
# One ImageNet network in bfloat16 (docs/bf16.md, "Networks"), as a user runs it: `tpusim
# import` of the unmodified PyTorch export, no quantization; `tpusim run` of the export's
# inputs on tpu-v2 (128 x 128, bf16; fast engine, batch 8): bit-exact against the CPU bf16
# reference on every input, no NaN or infinity, the whole network as one program, and the
# top-1 class of every input PyTorch's (fp32).
#
#   tests/imagenet/bf16_test.sh BUILD/tpusim EXPORT_DIR NAME
set -euo pipefail
tpusim=$(readlink -f "$1")
dir=$2
name=$3
[ -f "$dir/$name.onnx" ] || { echo "SKIP: no $dir/$name.onnx (the export was skipped)"; exit 77; }
work=$(mktemp -d /tmp/tpusim-imagenet-bf16.XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$tpusim" import "$dir/$name.onnx" --out "$work/fp32" -q || fail "import"
"$tpusim" run --model "$work/fp32" --inputs "$dir/inputs.npy" --config tpu-v2 --engine fast \
  --batch 8 --json "$work/run.json" --logits "$work/bf16.npy" -q || fail "run"
/usr/bin/python3 - "$work/run.json" "$work/bf16.npy" "$dir/$name.torch.npy" <<'PY' || fail "not bit-exact, or not PyTorch's classes"
import json, sys
import numpy as np
r = json.load(open(sys.argv[1]))
ours, torch = np.load(sys.argv[2]), np.load(sys.argv[3])
assert r["bit_exact"] is True and r["mismatches"] == 0, r["mismatches"]
assert r["non_finite"] is None, r["non_finite"]
assert r["plan"].startswith("whole network"), r["plan"]
assert ours.shape == torch.shape, (ours.shape, torch.shape)
rel = np.abs(ours - torch).max() / np.abs(torch).max()
print(f"tpu-v2, bf16, fast engine: bit-exact on {r['images']} inputs, "
      f"{r['cycles'] / r['images']:,.0f} cycles per image; largest difference from PyTorch's "
      f"fp32 outputs {rel:.2e} of the largest")
assert (ours.argmax(1) == torch.argmax(1)).all(), (ours.argmax(1), torch.argmax(1))
PY
# Every batch up to 8 plans on one core of tpu-v3 (resnet50 at batch 4 once failed on
# fragmentation that batch 8 escaped: the planner now tries its other segmentation).
for b in 1 2 3 4 5 6 7; do
  "$tpusim" run --model "$work/fp32" --synthetic "$b" --batch "$b" --timing-only --config tpu-v3 \
    --set cores=1 --engine fast -q || fail "batch $b on one core of tpu-v3"
done
echo "PASS: $name in bf16"
