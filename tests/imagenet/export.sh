#!/usr/bin/env bash
# The ImageNet test networks (models/onnx/make_imagenet.py): torchvision's resnet18, resnet50
# and mobilenet_v2 and the PyTorch Darknet-19, exported to ONNX with PyTorch's outputs for
# two seeded inputs, into OUT (ctest runs this once, as the fixture of the imagenet_ tests).
# Exits 77 (ctest: skipped) when PyTorch or torchvision is missing.
#
#   tests/imagenet/export.sh OUT [MODELS]
set -euo pipefail
out=$1
models=${2:-resnet18,resnet50,mobilenet_v2,darknet19}
src=$(cd "$(dirname "$0")/../.." && pwd)
/usr/bin/python3 -c "import torch, torchvision" 2>/dev/null ||
  { echo "SKIP: PyTorch and torchvision are not installed (apt-get install python3-torchvision)"; exit 77; }
/usr/bin/python3 "$src/models/onnx/make_imagenet.py" --out "$out" --models "$models" --images 2 2>&1 |
  grep -v -i "warning" || true
for m in ${models//,/ }; do [ -f "$out/$m.onnx" ] || { echo "FAIL: no $out/$m.onnx"; exit 1; }; done
echo "PASS: exported $models to $out"
