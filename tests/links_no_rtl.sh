#!/usr/bin/env bash
# Fails when a binary holds a Verilated model (its classes are named V<top>...): the
# compiler's test binaries must build and link without one (host/engine/chip_engine.h).
#   tests/links_no_rtl.sh BINARY
set -euo pipefail
found=$(nm -C "$1" | grep -cE ' (Vtpu_|verilated)' || true)
if [ "$found" -ne 0 ]; then
  echo "FAIL: $1 links $found symbols of Verilated models, e.g.:"
  nm -C "$1" | grep -E ' (Vtpu_|verilated)' | head -3
  exit 1
fi
echo "PASS: $1 links no Verilated model"
