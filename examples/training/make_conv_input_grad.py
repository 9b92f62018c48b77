#!/usr/bin/env python3
"""Writes examples/training/conv_input_grad.asm, its input and the output it must produce:
the input gradient of LeNet's second convolution (3 x 3, 6 channels in, 16 filters out,
valid: 15 x 15 -> 13 x 13) for two images on one tpu-v2 core, a pixel a row, in raster
order, with the weights as the forward pass holds them.

dX is a window over dZ padded by k - 1 = 2 on every side, through the flipped kernel:
dX[y, x, i] = sum over (ky, kx, o) of dZ[y + ky - 2, x + kx - 2, o] W[2 - ky, 2 - kx, i, o].
The forward pass's tile holds W as rows (ky, kx, i), lanes o; the window wants rows
(ky, kx, o), lanes i, taps flipped: W''. The program builds it on the chip, one transposed
load a tap: the N rows from tap t's first (its 6 rows of i) loaded transposed, times 16
identity rows, write rows o with lanes j = W's row 6 t + j, o: lanes 0-5 tap t's
transpose, and past them the next taps' rows, which land in lanes of dX past its 6
channels and are never read (the next operation reads 6 lanes a pixel). Each value is
exact (one product a sum). The window (16 channels a pixel, 144 lanes: two K-tiles) then
runs once an image and K-tile, the second adding into the first.

The accumulators sum as the array does (tile_product, a K-tile's sum added to the rows'
value), rounded to bfloat16 by the activation unit. The script checks its own layout
against the gradient from the convolution's definition in float64.

  conv_input_grad.host.bin      the host memory from 0x0: the identity (128 rows), W as the
                                forward tile (256 rows, 54 used) at 0x8000, dZ (338 rows)
                                at 0x18000, parameter set 0 (bias 0) at 0x2e000
  conv_input_grad.expected.bin  the 450 rows the program writes to 0x30000: dX, 2 x 15 x 15
                                pixels, lanes 0-5 its channels

Run: python3 examples/training/make_conv_input_grad.py   (--check: fail where the committed
files are not what it writes; conv_input_grad_example_is_current)
"""
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'vector'))
from vector_ref import (N, bf16, bf16_bits, param_set, result_out,  # noqa: E402
                        single_program_example)
from make_mlp_step import tile_product  # noqa: E402

B, S, K, CI, CO = 2, 15, 3, 6, 16   # images, input side, kernel side, channels in and out
Z = S - K + 1                       # the output's side: 13
TAPS = K * K
ROW = 2 * N                         # bytes a buffer row
# Host memory.
H_ID, H_W, H_DZ, H_SET0, H_OUT = 0x0, 0x8000, 0x18000, 0x2e000, 0x30000
# Unified-buffer rows (W and W'' 256 rows each: two tiles, zeros past the weights) and
# accumulator rows.
U_ID, U_W, U_W2, U_DZ, U_DX = 0, 128, 384, 640, 1024
A_W2, A_DX = 0, 256


def program():
    lines = [
        '; The input gradient of LeNet\'s second convolution, two images '
        '(make_conv_input_grad.py).',
        'set_format dtype=bf16',
        f'read_host host={H_ID:#x} ub={U_ID} rows={N}   ; the identity',
        f'read_host host={H_W:#x} ub={U_W} rows={2 * N}   ; W as the forward pass\'s tile: '
        'rows (ky, kx, i), lanes o',
        f'read_host host={H_DZ:#x} ub={U_DZ} rows={B * Z * Z}   ; dZ: 2 x 13 x 13 pixels, '
        '16 lanes',
        f'read_host host={H_SET0:#x} params=0 rows=1   ; bias 0, no bound',
        f'read_host host={H_W + N * ROW:#x} ub={U_W2 + TAPS * CO} rows={2 * N - TAPS * CO}   '
        '; zeros past W\'\'',
    ]
    for t in range(TAPS):
        lines += [f'load_weights ub={U_W + CI * t} tiles=1 transpose   ; tap {t}: its 6 rows',
                  f'matmul ub={U_ID} acc={A_W2 + CO * t} rows={CO} switch   ; ... transposed']
    for t in range(TAPS):
        lines.append(f'activate acc={A_W2 + CO * t} ub={U_W2 + CO * (TAPS - 1 - t)} rows={CO} '
                     f'params=0   ; W\'\' tap {TAPS - 1 - t}')
    lines.append(f'set_window in_h={Z} in_w={Z} kh={K} kw={K} out_h={S} out_w={S} stride_y=1 '
                 f'stride_x=1 channels={CO} pad_top={K - 1} pad_left={K - 1} pixel_bytes={N}')
    for b in range(B):
        acc = A_DX + b * S * S
        lines += [
            f'load_weights ub={U_W2} tiles=2   ; W\'\' (two K-tiles)',
            f'matmul ub={U_DZ + b * Z * Z} acc={acc} rows={S * S} ktile=0 window switch   '
            f'; image {b}',
            f'matmul ub={U_DZ + b * Z * Z} acc={acc} rows={S * S} ktile=1 window switch '
            'accumulate',
        ]
    lines += result_out(A_DX, U_DX, H_OUT, B * S * S)
    return '\n'.join(lines)


def flipped(w_rows):
    """W'' as the program builds it: row (8 - t) 16 + o, lane j = W's row 6 t + j, lane o."""
    w2 = np.zeros((2 * N, N), dtype=np.float32)
    for t in range(TAPS):
        w2[(TAPS - 1 - t) * CO:(TAPS - t) * CO] = w_rows[CI * t:CI * t + N, :CO].T
    return w2


def input_gradient(dz, w2):
    """dX as the program sums it: per image, the window's two K-tiles, the second added."""
    pad = np.zeros((B, Z + 2 * (K - 1), Z + 2 * (K - 1), CO), dtype=np.float32)
    pad[:, K - 1:K - 1 + Z, K - 1:K - 1 + Z] = dz
    f = np.zeros((B, S, S, 2 * N), dtype=np.float32)
    for ky in range(K):
        for kx in range(K):
            e = (ky * K + kx) * CO
            f[:, :, :, e:e + CO] = pad[:, ky:ky + S, kx:kx + S]
    f = f.reshape(B * S * S, 2 * N)
    acc = tile_product(f[:, :N], w2[:N]) + tile_product(f[:, N:], w2[N:])
    return bf16(acc + np.float32(0))


def check_against_definition(w, dz, dx):
    """The layout's gradient is the convolution's, in float64, within bfloat16's rounding."""
    want = np.zeros((B, S, S, CI))
    for ky in range(K):
        for kx in range(K):
            want[:, ky:ky + Z, kx:kx + Z] += np.einsum('byxo,io->byxi', dz.astype(np.float64),
                                                       w[ky, kx].astype(np.float64))
    got = dx.reshape(B, S, S, N)[..., :CI]
    err = np.abs(got - want).max() / np.abs(want).max()
    assert err < 2.0 ** -7, f'the layout is not the convolution: {err}'


def images():
    """The input (host memory up to the output) and the expected output, as bytes."""
    rng = np.random.default_rng(78)
    w = bf16(rng.normal(0.0, 0.3, size=(K, K, CI, CO)).astype(np.float32))
    dz = bf16(rng.normal(0.0, 0.01, size=(B, Z, Z, CO)).astype(np.float32))
    w_rows = np.zeros((2 * N, N), dtype=np.float32)
    w_rows[:TAPS * CI, :CO] = w.reshape(TAPS * CI, CO)
    dz_rows = np.zeros((B * Z * Z, N), dtype=np.float32)
    dz_rows[:, :CO] = dz.reshape(-1, CO)
    host = np.zeros(H_OUT, dtype=np.uint8)
    for at, rows in ((H_ID, np.eye(N, dtype=np.float32)), (H_W, w_rows), (H_DZ, dz_rows)):
        data = bf16_bits(rows).astype('<u2').view(np.uint8).ravel()
        host[at:at + data.size] = data
    host[H_SET0:H_SET0 + 9 * N] = param_set()
    dx = input_gradient(dz, flipped(w_rows))
    check_against_definition(w, dz, dx)
    return host.tobytes(), bf16_bits(dx).astype('<u2').tobytes()


if __name__ == '__main__':
    single_program_example('conv_input_grad', program, images, HERE, 'make_conv_input_grad.py')
