#!/usr/bin/env python3
"""Writes the input of examples/vector/softmax.asm and the output it must produce.

  softmax.host.bin      host memory from 0x0: 197 rows of 197 bfloat16 scores, as two
                        blocks of 128-lane rows (the second's lanes past 197: -infinity)
  softmax.expected.bin  softmax of each row, bfloat16, in the same two blocks

The reference is numpy in float32, step for step the program's (docs/vpu.md): the lane
tree's pairs, the exponential's stated algorithm, one rounding per operation. Deterministic
(fixed seed). Run: python3 examples/vector/make_softmax.py
"""
import os

import numpy as np

from vector_ref import N, blocks, bf16_bits, from_bf16, lane_tree, fp32_exp

T, W = 197, 197
rng = np.random.default_rng(73)
x = from_bf16(bf16_bits(rng.normal(0.0, 2.0, size=(T, W)).astype(np.float32)))
xb = blocks(x, -np.inf)                        # 2 blocks of T x 128
m = np.maximum(lane_tree(xb[0], np.maximum), lane_tree(xb[1], np.maximum))
e = [fp32_exp(b - m[:, None]) for b in xb]
s = lane_tree(e[0], np.add) + lane_tree(e[1], np.add)
r = np.float32(1) / s
y = [bf16_bits(b * r[:, None]) for b in e]

here = os.path.dirname(os.path.abspath(__file__))
np.concatenate([bf16_bits(b) for b in xb]).astype('<u2').tofile(os.path.join(here, 'softmax.host.bin'))
np.concatenate(y).astype('<u2').tofile(os.path.join(here, 'softmax.expected.bin'))
print('wrote softmax.{host,expected}.bin; row sums of the output within',
      float(np.abs(np.concatenate([from_bf16(v) for v in y], axis=1).sum(axis=1) - 1).max()),
      'of 1')
