#!/usr/bin/env python3
"""Writes the inputs of examples/pool_layer.asm (teach-4) and the output it must produce.

  pool_layer.host.bin      host memory from 0x0: x (16 x 4) and, at 0x100, the VPU parameters
  pool_layer.weights.bin   weight memory from 0x0: W (4 x 4)
  pool_layer.expected.bin  y = maxpool2x2(relu(requantize(x W + b))), 4 x 4 int8, computed
                           here with the rounding of docs/quantization.md

Deterministic (fixed seed). Run: python3 examples/make_pool_layer.py
"""
import os
import numpy as np

N = 4
rng = np.random.default_rng(7)
x = rng.integers(-128, 128, size=(16, N), dtype=np.int64)
w = rng.integers(-128, 128, size=(N, N), dtype=np.int64)
bias = rng.integers(-2000, 2000, size=N, dtype=np.int64)
mult = rng.integers(1 << 30, (1 << 31) - 1, size=N, dtype=np.int64)
shift = rng.integers(37, 39, size=N, dtype=np.int64)

host = np.zeros(0x100 + 9 * N, dtype=np.uint8)
host[0:16 * N] = x.astype(np.int8).view(np.uint8).reshape(-1)
host[0x100:0x100 + 9 * N] = np.concatenate([bias.astype('<i4').view(np.uint8),
                                            mult.astype('<i4').view(np.uint8),
                                            shift.astype(np.uint8)])
acc = x @ w + bias
q = np.clip((acc * mult + (1 << (shift - 1))) >> shift, 0, 127)  # requantize + relu
y = q.reshape(4, 4, N).max(axis=1).astype(np.int8)               # 4 consecutive rows per window

here = os.path.dirname(os.path.abspath(__file__))
host.tofile(os.path.join(here, 'pool_layer.host.bin'))
w.astype(np.int8).view(np.uint8).tofile(os.path.join(here, 'pool_layer.weights.bin'))
y.view(np.uint8).tofile(os.path.join(here, 'pool_layer.expected.bin'))
print('wrote pool_layer.{host,weights,expected}.bin; y =', y.tolist())
