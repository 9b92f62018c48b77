#!/usr/bin/env python3
"""Writes the inputs of examples/conv_window.asm (teach-4) and the output it must produce.

  conv_window.host.bin      host memory from 0x0: the 6 x 6 x 3 map, one pixel per 4-byte
                            row (the fourth byte is noise the window must skip), and, at
                            0x100, the VPU parameters
  conv_window.weights.bin   weight memory from 0x0: the 3 x 3 x 3 x 4 kernels as 7 K-tiles
                            of 4 x 4 (K = 27 rows in (ky, kx, c) order, row 27 zero)
  conv_window.expected.bin  y = maxpool2x2(relu(requantize(conv3x3_pad1(x, W) + b))),
                            3 x 3 pixels x 4 filters, int8, with the rounding of
                            docs/quantization.md

Deterministic (fixed seed). Run: python3 examples/make_conv_window.py
"""
import os
import numpy as np

N, H, W, C, F, K = 4, 6, 6, 3, 4, 3
rng = np.random.default_rng(11)
x = rng.integers(-128, 128, size=(H, W, C), dtype=np.int64)
noise = rng.integers(-128, 128, size=(H, W, 1), dtype=np.int64)
w = rng.integers(-128, 128, size=(K, K, C, F), dtype=np.int64)
bias = rng.integers(-2000, 2000, size=F, dtype=np.int64)
mult = rng.integers(1 << 30, (1 << 31) - 1, size=F, dtype=np.int64)
shift = rng.integers(39, 41, size=F, dtype=np.int64)

host = np.zeros(0x100 + 9 * N, dtype=np.uint8)
host[0:H * W * N] = np.concatenate([x, noise], axis=2).astype(np.int8).view(np.uint8).reshape(-1)
host[0x100:0x100 + 9 * N] = np.concatenate([bias.astype('<i4').view(np.uint8),
                                            mult.astype('<i4').view(np.uint8),
                                            shift.astype(np.uint8)])
rows = np.zeros((28, F), dtype=np.int64)
rows[:27] = w.reshape(27, F)                       # (ky, kx, c) order, as the window stage
tiles = rows.reshape(7, N, F)                      # K-tile kb: rows 4 kb .. 4 kb + 3

xp = np.pad(x, ((1, 1), (1, 1), (0, 0)))
acc = np.zeros((H, W, F), dtype=np.int64)
for oy in range(H):
    for ox in range(W):
        acc[oy, ox] = xp[oy:oy + K, ox:ox + K].reshape(-1) @ w.reshape(27, F)
acc += bias
q = np.clip((acc * mult + (1 << (shift - 1))) >> shift, 0, 127)  # requantize + relu
y = q.reshape(3, 2, 3, 2, F).max(axis=(1, 3)).reshape(9, F).astype(np.int8)

here = os.path.dirname(os.path.abspath(__file__))
host.tofile(os.path.join(here, 'conv_window.host.bin'))
tiles.astype(np.int8).view(np.uint8).tofile(os.path.join(here, 'conv_window.weights.bin'))
y.view(np.uint8).tofile(os.path.join(here, 'conv_window.expected.bin'))
print('wrote conv_window.{host,weights,expected}.bin; y =', y.tolist())
