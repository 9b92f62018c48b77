#!/usr/bin/env bash
# resnet18 (torchvision's, unmodified) on the RTL: one image on CONFIG, bit-exact against the
# CPU int8 reference, and every counter of the report equal to the fast engine's.
#
#   tests/imagenet/rtl_test.sh BUILD/tpusim EXPORT_DIR CONFIG
set -euo pipefail
tpusim=$(readlink -f "$1")
dir=$2
config=$3
[ -f "$dir/resnet18.onnx" ] || { echo "SKIP: no $dir/resnet18.onnx (the export was skipped)"; exit 77; }
work=$(mktemp -d /tmp/tpusim-imagenet-rtl.XXXXXX)
trap 'rm -rf "$work"' EXIT
"$tpusim" import "$dir/resnet18.onnx" --out "$work/m" --quantize --synthetic 4 -q
for engine in fast rtl; do
  /usr/bin/time -f "$engine engine: %e s wall, %M KB" "$tpusim" run --model "$work/m" \
    --inputs "$dir/inputs.npy" --images 1 --batch 1 --config "$config" --engine $engine \
    --json "$work/$engine.json" -q
done
/usr/bin/python3 - "$work/fast.json" "$work/rtl.json" <<'PY'
import json, sys
fast, rtl = (json.load(open(p)) for p in sys.argv[1:])
assert rtl["bit_exact"] is True, rtl["mismatches"]
for r in (fast, rtl):
    for k in ("engine", "wall_seconds"):
        r.pop(k)
diff = [k for k in fast if fast[k] != rtl[k]]
assert not diff, f"the reports differ in {diff}"
print(f"resnet18 on the RTL: bit-exact, {rtl['cycles']:,} cycles, every counter equal to the fast engine's")
PY
echo "PASS: resnet18 on $config's RTL"
