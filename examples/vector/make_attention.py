#!/usr/bin/env python3
"""Writes the input of examples/vector/attention.asm and the output it must produce.

  attention.host.bin      host memory from 0x0: two VPU parameter sets (set 0: biases 0;
                          set 1: biases -infinity on lanes 69-127, the key positions past 197;
                          upper bounds +infinity), then from 0x1000 in 256-byte rows K (197
                          rows), Q (197 rows), a row of 0.125 (1 / sqrt(64)), V (197 rows),
                          each a bfloat16 row of 128 lanes, the 64 values in lanes 0-63
  attention.expected.bin  softmax(Q K^T / 8) V, 197 rows of 128 bfloat16 lanes (64-127: 0)

The reference is numpy in float32, step for step the program's (docs/vpu.md): the array's
column sums in its order (lane 0 first, each product exact, each sum rounded), the
accumulators' two tiles added, the activation unit's bias and rounding to bfloat16, and the
softmax of examples/vector/make_softmax.py. Deterministic (fixed seed).
Run: python3 examples/vector/make_attention.py
"""
import os

import numpy as np

from vector_ref import N, bf16_bits, from_bf16, lane_tree, fp32_exp

T, D = 197, 64
SETS_AT, DATA_AT, ROW = 0x0, 0x1000, 2 * N
rng = np.random.default_rng(197)


def bf16_values(shape, scale):
    return from_bf16(bf16_bits(rng.normal(0.0, scale, size=shape).astype(np.float32)))


def lanes(x):
    """Rows of x padded with zeros to N lanes."""
    out = np.zeros((x.shape[0], N), dtype=np.float32)
    out[:, :x.shape[1]] = x
    return out


def tile_product(a, w):
    """a (rows x N) times one weight tile w (N x N) as the array sums: down each column, lane
    0 first, every product exact in float32 and every sum rounded once."""
    s = np.zeros((a.shape[0], N), dtype=np.float32)
    for k in range(N):
        s = s + a[:, k:k + 1] * w[k:k + 1, :]
    return s


def activate(acc, bias):
    """The bf16 activation unit: acc + bias in float32, rounded to bfloat16 (no ReLU)."""
    return from_bf16(bf16_bits(acc + bias))


def param_set(bias):
    s = np.zeros(10 * N // 2, dtype=np.uint16)  # 10N bytes: 5 rows of 2N
    words = np.concatenate([bias, np.full(N, np.inf, dtype=np.float32)]).view(np.uint16)
    s[:words.size] = words
    return s


q, k, v = lanes(bf16_values((T, D), 1.0)), lanes(bf16_values((T, D), 1.0)), lanes(bf16_values((T, D), 1.0))
pad = np.zeros((2 * N - T, N), dtype=np.float32)           # the buffer rows zeroed on the chip
kp, vp = np.concatenate([k, pad]), np.concatenate([v, pad])
mask = np.where(np.arange(N) < T - N, 0, -np.inf).astype(np.float32)

qs = q * np.float32(0.125)                                 # exact: a power of two
s = [activate(tile_product(qs, kp[i * N:(i + 1) * N].T), b)
     for i, b in ((0, np.float32(0)), (1, mask))]
m = np.maximum(lane_tree(s[0], np.maximum), lane_tree(s[1], np.maximum))
e = [fp32_exp(b - m[:, None]) for b in s]
r = np.float32(1) / (lane_tree(e[0], np.add) + lane_tree(e[1], np.add))
p = [from_bf16(bf16_bits(b * r[:, None])) for b in e]
o = tile_product(p[0], vp[:N])
o = o + tile_product(p[1], vp[N:])                         # `accumulate`: one float32 add
out = activate(o, np.float32(0))
assert not np.any((out != 0) & (np.abs(out) < np.float32(2.0 ** -126))), 'a subnormal'

here = os.path.dirname(os.path.abspath(__file__))
# attention_hbm.asm: attention.asm with K, Q and V read from HBM (read_hbm) instead of over the
# host link, at the same addresses (the data file is both memories' image).
HBM_HEADER = """; The attention head of attention.asm with Q, K and V in HBM, as a layer before it would
; leave them: read_hbm brings them into the unified buffer (vector memory) at HBM's
; bandwidth instead of the host link's; only the two VPU parameter sets still come from the
; host. The same data file serves as both memories' image (the addresses are the same), so
; the expected output is attention.expected.bin. Written by make_attention.py from
; attention.asm: edit that one.
;   tpusim exec examples/vector/attention_hbm.asm -c tpu-v3 --engine fast \\
;       --host-in examples/vector/attention.host.bin \\
;       --weights-in examples/vector/attention.host.bin --host-out out.bin \\
;       --host-out-range 0x40000:50432
"""
with open(os.path.join(here, 'attention.asm')) as f:
    body = [line for line in f.read().splitlines(keepends=True) if not line.startswith(';')]
hbm = []
for line in body:
    if line.startswith('read_host host=') and 'params=' not in line:
        old = line.split(';')[0].rstrip()
        new = old.replace('read_host host=', 'read_hbm addr=')
        line = new + ' ' * (len(line.split(';')[0]) - len(new)) + ';' + line.split(';', 1)[1]
    hbm.append(line)
assert sum(line.startswith('read_hbm') for line in hbm) == 3
with open(os.path.join(here, 'attention_hbm.asm'), 'w') as f:
    f.write(HBM_HEADER + ''.join(hbm))
host = np.zeros((DATA_AT + (3 * T + 1) * ROW) // 2, dtype=np.uint16)
host[SETS_AT // 2:SETS_AT // 2 + 10 * N] = np.concatenate([param_set(np.zeros(N, np.float32)),
                                                           param_set(mask)])
rows = np.concatenate([k, q, np.full((1, N), 0.125, dtype=np.float32), v])
host[DATA_AT // 2:] = bf16_bits(rows).ravel()
host.astype('<u2').tofile(os.path.join(here, 'attention.host.bin'))
bf16_bits(out).astype('<u2').tofile(os.path.join(here, 'attention.expected.bin'))
want = (np.exp((q @ k.T)[:, :T] / 8) / np.exp((q @ k.T)[:, :T] / 8).sum(1, keepdims=True)) @ v[:T]
print('wrote attention.{host,expected}.bin, attention_hbm.asm; largest difference from plain float32 attention',
      float(np.abs(out - want).max()), 'of outputs up to', float(np.abs(want).max()))
