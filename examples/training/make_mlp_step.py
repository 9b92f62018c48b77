#!/usr/bin/env python3
"""Writes examples/training/mlp_step.asm, its input and the output it must produce: two SGD
steps with momentum of a two-layer perceptron (200 inputs, 100 ReLU units, 10 classes, the
softmax cross-entropy) on one tpu-v2 core, batches of 64, every step on the chip: the
forward pass in bfloat16 with float32 sums, the loss's gradient on the vector unit, the
backward pass on the matrix unit (dX = dY W^T with W transposed on its way from the unified
buffer; dW = X^T dY with X^T made on the array by a transposed load times the identity), the
ReLU's mask on the vector unit and the update of float32 master weights and momentum kept in
the unified buffer between the steps: the host sends each step's images and labels only.

Each layer's bias is a row of its weights, multiplied by a constant 1 among the inputs
(input lane 200, hidden lane 100), so its gradient is that row's: the batch's sum of dY.

  mlp_step.host.bin      host memory from 0x0 in 256-byte rows (the unified buffer's rows
                         0-1791 as the program reads them: the identity, the constants, W1,
                         W2, V1, V2 as float32 rows (two rows each: the lanes' high halves,
                         then their low halves); 64 rows of zeros; then per step X (two
                         blocks of 64 rows, each followed by 64 zero rows) and the labels
                         (64 one-hot rows), the same batch each step; the VPU parameter
                         set at 0x9c000
  mlp_step.expected.bin  from 0x9c800, per step: the loss's pieces (the logits L, bfloat16,
                         and each row's max m and sum s of exp(L - m), float32: the loss of
                         image i is log(s_i) + m_i - L_i[label]), then W1, W2, V1, V2 after
                         the step (a checkpoint: tests/training/mlp_step_vs_torch.py runs
                         each step in PyTorch from the one before)

The reference is numpy in float32, step for step the program's (docs/training.md): the
array's sums in its order, the activation unit's rounding to bfloat16, the vector unit's
operations (examples/vector/vector_ref.py). Deterministic (fixed seed).
Run: python3 examples/training/make_mlp_step.py
"""
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'vector'))
from vector_ref import N, bf16_bits, from_bf16, lane_tree, fp32_exp  # noqa: E402

B, F, H, C, STEPS = 64, 200, 100, 10, 2
LR, MU = np.float32(0.0625), np.float32(0.875)
rng = np.random.default_rng(74)

# Unified-buffer rows (a float32 row takes two).
ID, PAD, E100, ZERO, INVB, MUR, LRR = 0, 128, 130, 131, 132, 134, 136
W1, W2, V1, V2, STATE_END = 256, 768, 1024, 1536, 1792
X0, X1, Y = 1792, 1920, 2048             # each step's batch (X blocks with 64 zero rows after)
W1B, W2B, HID, MASK = 2112, 2368, 2496, 2624
L, M, S = 2688, 2752, 2880               # the loss's pieces: 320 rows from L
SM, R, D2B, HT, G2 = 3008, 3136, 3264, 3392, 3520
DH, XT0, XT1, G1, TMP = 3648, 3776, 3904, 4032, 4288
ZERO_PADS = (HID + B, D2B + B, DH + B)   # rows a transposed load reads past 64 rows
A_Z1, A_LG, A_HT, A_DW2, A_DH, A_XT0, A_XT1, A_DW1 = 0, 64, 128, 256, 384, 448, 576, 704
# Host memory, in rows of 256 bytes.
H_ZERO, H_BATCH, PARAMS, H_OUT = 1792, 1856, 2496, 2504
OUT_ROWS = 320 + STATE_END - W1          # each step's output: the loss's pieces, the state


def f32_rows(x):
    """float32 rows (rows x N) as buffer rows: each row's high halves, then its low halves."""
    u = np.asarray(x, dtype=np.float32).view(np.uint32)
    return np.stack([(u >> 16).astype(np.uint16), (u & 0xffff).astype(np.uint16)], 1).reshape(-1, N)


def bf16(x):
    return from_bf16(bf16_bits(x))


def tile_product(a, w):
    """a (rows x N) times a tile w (N x N) as the array sums: lane 0 first, each product exact,
    each sum rounded."""
    s = np.zeros((a.shape[0], N), dtype=np.float32)
    for k in range(N):
        s = s + a[:, k:k + 1] * w[k:k + 1, :]
    return s


def padded(x, rows):
    out = np.zeros((rows, N), dtype=np.float32)
    out[:x.shape[0]] = x
    return out


def activate(acc, relu=False):
    """The bf16 activation unit with bias 0: acc + 0 in float32, the ReLU, rounded."""
    y = acc + np.float32(0)
    return bf16(np.where(y > 0, y, np.float32(0)) if relu else y)


def batch():
    x = np.zeros((B, 2 * N), dtype=np.float32)
    x[:, :F] = bf16(rng.normal(0.0, 1.0, size=(B, F)).astype(np.float32))
    x[:, F] = 1.0
    y = np.zeros((B, N), dtype=np.float32)
    y[np.arange(B), rng.integers(0, C, size=B)] = 1.0
    return x, y


def step(w1, w2, v1, v2, x, y):
    """One step as the program computes it: the loss's pieces and the new state."""
    w1b, w2b = bf16(w1), bf16(w2)
    z1 = tile_product(x[:, :N], w1b[:N]) + tile_product(x[:, N:], w1b[N:])
    h = activate(z1, relu=True)
    mask = (h == 0).astype(np.float32)
    h = h + np.float32(0) + E100_ROW                   # the hidden layer's constant 1
    lg = activate(tile_product(h, w2b))
    l32 = lg + PAD_ROW
    m = lane_tree(l32, np.maximum)[:, None] * np.ones((1, N), np.float32)
    e = fp32_exp(l32 - m)
    s = lane_tree(e, np.add)[:, None] * np.ones((1, N), np.float32)
    p = e * (np.float32(1) / s)
    d2b = bf16((p - y) * np.float32(1.0 / B))
    ht = activate(tile_product(np.eye(N, dtype=np.float32), padded(h, N).T))
    g2 = activate(tile_product(ht, padded(d2b, N)))
    dh = activate(tile_product(d2b, w2b.T))
    dz1 = np.where(mask != 0, np.float32(0), dh)
    xt = [activate(tile_product(np.eye(N, dtype=np.float32), padded(x[:, i * N:(i + 1) * N], N).T))
          for i in range(2)]
    g1 = np.concatenate([activate(tile_product(t, padded(dz1, N))) for t in xt])
    v1 = v1 * MU + g1
    v2 = v2 * MU + g2
    w1 = w1 - v1 * LR
    w2 = w2 - v2 * LR
    for a in (z1, e, p, d2b, g1, g2, v1, v2, w1, w2):
        assert not np.any((a != 0) & (np.abs(a) < np.float32(2.0 ** -126))), 'a subnormal'
    return (lg, m, s), (w1, w2, v1, v2)


def program():
    """The program's text, one step after another."""
    lines = [
        '; Two SGD steps with momentum of a 200-100-10 perceptron on one tpu-v2 core, batches of 64:',
        '; forward, softmax cross-entropy, backward and the update all on the chip, the master',
        '; weights and momentum (float32) staying in the unified buffer. Written by',
        '; make_mlp_step.py (edit that); docs/training.md walks through it.',
        ';   tpusim exec examples/training/mlp_step.asm -c tpu-v2 --engine fast \\',
        ';       --host-in examples/training/mlp_step.host.bin --host-out out.bin \\',
        f';       --host-out-range {H_OUT * 2 * N:#x}:{STEPS * OUT_ROWS * 2 * N}',
        'set_format dtype=bf16',
        f'read_host host={PARAMS * 2 * N:#x} params=0 rows=1          ; set 0: bias 0, no upper bound',
        f'read_host host=0x0 ub=0 rows={STATE_END}          ; identity, constants, W1, W2, V1, V2',
    ]
    for z in ZERO_PADS:
        lines.append(f'read_host host={H_ZERO * 2 * N:#x} ub={z} rows={B}       ; zeros a transposed load reads')
    for t in range(STEPS):
        at = (H_BATCH + t * 5 * B) * 2 * N
        out = (H_OUT + t * OUT_ROWS) * 2 * N
        lines += [
            f'; ---- step {t + 1}',
            f'read_host host={at:#x} ub={X0} rows={5 * B}   ; X (two blocks, zeros after each), labels',
            f'vector op=copy a={W1} out={W1B} rows={2 * N} a32          ; W1 in bfloat16',
            f'vector op=copy a={W2} out={W2B} rows={N} a32          ; W2 in bfloat16',
            f'load_weights ub={W1B} tiles=2',
            f'matmul ub={X0} acc={A_Z1} rows={B} switch',
            f'matmul ub={X1} acc={A_Z1} rows={B} switch accumulate   ; z1 = X W1',
            f'activate acc={A_Z1} ub={HID} rows={B} params=0 relu      ; h = relu(z1)',
            f'vector op=equal a={HID} b={ZERO} out={MASK} rows={B} bcast  ; where h = 0',
            f'vector op=add a={HID} b={E100} out={HID} rows={B} bcast     ; h lane 100 = 1 (the bias)',
            f'load_weights ub={W2B} tiles=1',
            f'matmul ub={HID} acc={A_LG} rows={B} switch                 ; logits = h W2',
            f'activate acc={A_LG} ub={L} rows={B} params=0',
            f'vector op=add a={L} b={PAD} out={SM} rows={B} b32 o32 bcast   ; -inf past class 10',
            f'vector op=lane_max a={SM} out={M} rows={B} a32 o32',
            f'vector op=sub a={SM} b={M} out={SM} rows={B} a32 b32 o32',
            f'vector op=exp a={SM} out={SM} rows={B} a32 o32',
            f'vector op=lane_sum a={SM} out={S} rows={B} a32 o32',
            f'vector op=recip a={S} out={R} rows={B} a32 o32',
            f'vector op=mul a={SM} b={R} out={SM} rows={B} a32 b32 o32     ; p = softmax',
            f'vector op=sub a={SM} b={Y} out={SM} rows={B} a32 o32         ; p - y',
            f'vector op=mul a={SM} b={INVB} out={D2B} rows={B} a32 b32 bcast ; dz2 = (p - y) / 64',
            f'write_host ub={L} host={out:#x} rows=320    ; the loss\'s pieces',
            f'load_weights ub={HID} tiles=1 transpose',
            f'matmul ub={ID} acc={A_HT} rows={N} switch                   ; h^T',
            f'activate acc={A_HT} ub={HT} rows={N} params=0',
            f'load_weights ub={D2B} tiles=1',
            f'matmul ub={HT} acc={A_DW2} rows={N} switch                  ; dW2 = h^T dz2',
            f'activate acc={A_DW2} ub={G2} rows={N} params=0',
            f'load_weights ub={W2B} tiles=1 transpose',
            f'matmul ub={D2B} acc={A_DH} rows={B} switch                  ; dh = dz2 W2^T',
            f'activate acc={A_DH} ub={DH} rows={B} params=0',
            f'vector op=select a={MASK} b={ZERO} out={DH} rows={B} bcast  ; dz1: 0 where h = 0',
            f'load_weights ub={X0} tiles=1 transpose',
            f'matmul ub={ID} acc={A_XT0} rows={N} switch                  ; X^T, inputs 0-127',
            f'activate acc={A_XT0} ub={XT0} rows={N} params=0',
            f'load_weights ub={X1} tiles=1 transpose',
            f'matmul ub={ID} acc={A_XT1} rows={N} switch                  ; X^T, inputs 128-255',
            f'activate acc={A_XT1} ub={XT1} rows={N} params=0',
            f'load_weights ub={DH} tiles=1',
            f'matmul ub={XT0} acc={A_DW1} rows={N} switch                 ; dW1 = X^T dz1',
            f'matmul ub={XT1} acc={A_DW1 + N} rows={N}',
            f'activate acc={A_DW1} ub={G1} rows={2 * N} params=0',
        ]
        for w, v, g, rows in ((W1, V1, G1, 2 * N), (W2, V2, G2, N)):
            lines += [
                f'vector op=mul a={v} b={MUR} out={TMP} rows={rows} a32 b32 o32 bcast',
                f'vector op=add a={TMP} b={g} out={v} rows={rows} a32 o32        ; v = mu v + g',
                f'vector op=mul a={v} b={LRR} out={TMP} rows={rows} a32 b32 o32 bcast',
                f'vector op=sub a={w} b={TMP} out={w} rows={rows} a32 b32 o32    ; w = w - lr v',
            ]
        lines.append(f'write_host ub={W1} host={out + 320 * 2 * N:#x} rows={STATE_END - W1}'
                     '   ; W1, W2, V1, V2 after the step')
    lines.append('halt')
    return '\n'.join(lines) + '\n'


PAD_ROW = np.where(np.arange(N) < C, 0, -np.inf).astype(np.float32)[None, :]
E100_ROW = (np.arange(N) == H).astype(np.float32)[None, :]


def main():
    w1 = np.zeros((2 * N, N), dtype=np.float32)
    w1[:F + 1, :H] = rng.normal(0.0, 0.07, size=(F + 1, H)).astype(np.float32)
    w2 = np.zeros((N, N), dtype=np.float32)
    w2[:H + 1, :C] = rng.normal(0.0, 0.1, size=(H + 1, C)).astype(np.float32)
    v1, v2 = np.zeros_like(w1), np.zeros_like(w2)

    host = np.zeros((PARAMS, N), dtype=np.uint16)
    host[ID:ID + N] = bf16_bits(np.eye(N, dtype=np.float32))
    host[PAD:PAD + 2] = f32_rows(PAD_ROW)
    host[E100] = bf16_bits(E100_ROW[0])
    host[INVB:INVB + 2] = f32_rows(np.full((1, N), 1.0 / B, np.float32))
    host[MUR:MUR + 2] = f32_rows(np.full((1, N), MU, np.float32))
    host[LRR:LRR + 2] = f32_rows(np.full((1, N), LR, np.float32))
    for at, a in ((W1, w1), (W2, w2), (V1, v1), (V2, v2)):
        host[at:at + 2 * a.shape[0]] = f32_rows(a)
    out = []
    x, y = batch()  # the same batch each step: the loss falls
    for t in range(STEPS):
        at = H_BATCH + t * 5 * B
        host[at:at + B] = bf16_bits(x[:, :N])
        host[at + 2 * B:at + 3 * B] = bf16_bits(x[:, N:])
        host[at + 4 * B:at + 5 * B] = bf16_bits(y)
        (lg, m, s), (w1, w2, v1, v2) = step(w1, w2, v1, v2, x, y)
        out += [bf16_bits(lg), f32_rows(m), f32_rows(s)] + [f32_rows(a) for a in (w1, w2, v1, v2)]
        loss = np.log(s[:, 0].astype(np.float64)) + m[:, 0] - lg[np.arange(B), np.argmax(y, 1)]
        print(f'step {t + 1}: loss {loss.mean():.4f}')
    params = np.zeros(10 * N // 2, dtype=np.uint16)
    params[:4 * N] = np.concatenate([np.zeros(N, np.float32), np.full(N, np.inf, np.float32)]).view(np.uint16)

    with open(os.path.join(HERE, 'mlp_step.asm'), 'w') as f:
        f.write(program())
    image = np.concatenate([host.ravel(), params])
    image.astype('<u2').tofile(os.path.join(HERE, 'mlp_step.host.bin'))
    np.concatenate(out).astype('<u2').tofile(os.path.join(HERE, 'mlp_step.expected.bin'))
    print('wrote mlp_step.asm, mlp_step.{host,expected}.bin')


if __name__ == '__main__':
    main()
