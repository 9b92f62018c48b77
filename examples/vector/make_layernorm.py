#!/usr/bin/env python3
"""Writes the input of examples/vector/layernorm.asm and the output it must produce.

  layernorm.host.bin      host memory from 0x0, in 256-byte rows: x (197 x 768 bfloat16 as six
                          blocks of 128-lane rows), gamma and beta (a row per block), then
                          1 / 768 and eps as float32 rows (two rows each: the lanes' high
                          halves, then their low halves)
  layernorm.expected.bin  y = (x - mean) / sqrt(var + eps) x gamma + beta, bfloat16, in blocks

The reference is numpy in float32, step for step the program's (docs/vpu.md). Deterministic
(fixed seed). Run: python3 examples/vector/make_layernorm.py
"""
import os

import numpy as np

from vector_ref import N, blocks, bf16_bits, from_bf16, lane_tree

T, W, EPS = 197, 768, 1e-5
rng = np.random.default_rng(768)
x = from_bf16(bf16_bits(rng.normal(0.5, 2.0, size=(T, W)).astype(np.float32)))
gamma = from_bf16(bf16_bits(rng.normal(1.0, 0.2, size=(1, W)).astype(np.float32)))
beta = from_bf16(bf16_bits(rng.normal(0.0, 0.2, size=(1, W)).astype(np.float32)))
inv, eps = np.float32(1 / W), np.float32(EPS)


def fp32_row(v):
    """A float32 row of N equal lanes as two buffer rows: high halves, then low halves."""
    bits = np.full(N, v, dtype=np.float32).view(np.uint32)
    return np.stack([(bits >> 16).astype(np.uint16), (bits & 0xffff).astype(np.uint16)])


def total(rows_blocks):
    """Each row's lane sums of the blocks, added block after block."""
    s = lane_tree(rows_blocks[0], np.add)
    for b in rows_blocks[1:]:
        s = s + lane_tree(b, np.add)
    return s


xb, gb, bb = blocks(x, 0), blocks(gamma, 0), blocks(beta, 0)
mean = total(xb) * inv
d = [b - mean[:, None] for b in xb]
var = total([v * v for v in d]) * inv
r = np.float32(1) / np.sqrt(var + eps)
y = [bf16_bits((v * r[:, None]) * g + c) for v, g, c in zip(d, gb, bb)]

here = os.path.dirname(os.path.abspath(__file__))
host = np.concatenate([bf16_bits(b) for b in xb] + [bf16_bits(g) for g in gb] +
                      [bf16_bits(c) for c in bb] + [fp32_row(inv), fp32_row(eps)])
host.astype('<u2').tofile(os.path.join(here, 'layernorm.host.bin'))
np.concatenate(y).astype('<u2').tofile(os.path.join(here, 'layernorm.expected.bin'))
out = np.concatenate([from_bf16(v) for v in y], axis=1)
print('wrote layernorm.{host,expected}.bin; output mean', float(out.mean()), 'std', float(out.std()))
