#!/usr/bin/env python3
"""Writes the inputs of examples/dense_layer.asm and the output it must produce.

  dense_layer.host.bin     host memory from 0x0: x (two column blocks) and, at 0x1000,
                           one VPU parameter set
  dense_layer.weights.bin  weight memory from 0x0: W as two 16 x 16 tiles
  dense_layer.expected.bin y = relu(requantize(x W + b)), 64 x 16 int8, computed here with
                           the rounding of docs/quantization.md

Deterministic (fixed seed). Run: python3 examples/make_dense_layer.py
"""
import os
import numpy as np

N, M, K = 16, 64, 32
rng = np.random.default_rng(2026)
x = rng.integers(-128, 128, size=(M, K), dtype=np.int64)
w = rng.integers(-128, 128, size=(K, N), dtype=np.int64)
bias = rng.integers(-20000, 20000, size=N, dtype=np.int64)
mult = rng.integers(1 << 30, (1 << 31) - 1, size=N, dtype=np.int64)
shift = rng.integers(38, 42, size=N, dtype=np.int64)

host = np.zeros(0x1000 + 9 * N, dtype=np.uint8)
host[0:M * N] = x[:, 0:16].astype(np.int8).view(np.uint8).reshape(-1)
host[M * N:2 * M * N] = x[:, 16:32].astype(np.int8).view(np.uint8).reshape(-1)
params = np.concatenate([bias.astype('<i4').view(np.uint8), mult.astype('<i4').view(np.uint8),
                         shift.astype(np.uint8)])
host[0x1000:0x1000 + params.size] = params
weights = w.astype(np.int8).view(np.uint8).reshape(-1)

acc = x @ w + bias                      # int32 in hardware; no overflow at these sizes
y = (acc * mult + (1 << (shift - 1))) >> shift
y = np.clip(y, 0, 127).astype(np.int8)  # relu

here = os.path.dirname(os.path.abspath(__file__))
host.tofile(os.path.join(here, 'dense_layer.host.bin'))
weights.tofile(os.path.join(here, 'dense_layer.weights.bin'))
y.view(np.uint8).tofile(os.path.join(here, 'dense_layer.expected.bin'))
print('wrote dense_layer.{host,weights,expected}.bin;', int((y > 0).sum()), 'of', y.size,
      'outputs positive')
