#!/usr/bin/env python3
"""Writes examples/training/conv_grad.asm, its input and the output it must produce: the
weight gradient of LeNet's first convolution (3 x 3, one channel in, 6 filters out, valid:
32 x 32 -> 30 x 30) for two images on one tpu-v2 core, laid out as a training step takes it.

1. The receptive fields F by the window stage: each image's map (one channel, packed 128
   pixels a buffer row) through the identity, one `matmul window` per image, a row per
   output pixel (lanes 0-8 the 3 x 3 taps); the activation unit adds a parameter set whose
   bias is 1 in lane 9 and 0 elsewhere, so lane 9 is the bias input's constant 1. Every
   value is exact: each sum has one non-zero product. The forward pass is then F W, a
   dense layer over the 2 x 900 pixel rows.
2. The weight gradient dWᵀ = dZᵀ F, 6 x 10 (the 9 taps and the bias of each filter), the
   pixels the reduction: for each chunk of 128 pixel rows, a transposed load of dZ's chunk
   and 6 identity rows streamed through it write dZ's chunk transposed (6 rows, exact);
   then F's chunk is the stationary tile and those 6 rows stream through it, adding into
   the same 6 accumulator rows chunk after chunk. 6 rows stream per chunk, twice, where
   Fᵀ dZ would stream 10: few rows, two tile loads per chunk.

The accumulators sum as the array does (tile_product: lane 0 first, each product exact,
each sum rounded; a chunk's sum added to the rows' value); the result is rounded to
bfloat16 by the activation unit. The script checks its own layout against the convolution's
gradient computed from its definition in float64.

  conv_grad.host.bin      the host memory from 0x0: the identity (128 rows), the two images
                          (16 rows) at 0x8000, parameter sets 0 (bias 0) and 1 (bias 1 in
                          lane 9) at 0x9000 and 0x9800, dZ (1,920 rows: 1,800 pixels and
                          zeros) at 0x10000
  conv_grad.expected.bin  the 6 rows the program writes to 0x90000: dWᵀ, lanes 0-9

Run: python3 examples/training/make_conv_grad.py   (--check: fail where the committed files
are not what it writes; conv_grad_example_is_current)
"""
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'vector'))
from vector_ref import (N, bf16, bf16_bits, param_set, result_out,  # noqa: E402
                        single_program_example)
from make_mlp_step import tile_product  # noqa: E402

B, S, K, O = 2, 32, 3, 6          # images, map side, kernel side, filters
P = S - K + 1                      # output side: 30
PIX = B * P * P                    # pixel rows: 1,800
CHUNKS = (PIX + N - 1) // N        # 15
TAPS = K * K                       # 9; lane 9 the bias
ROW = 2 * N                        # bytes a buffer row
IMG_ROWS = S * S // N              # 8 buffer rows an image
# Host memory.
H_ID, H_IMG, H_SET0, H_SET1, H_DZ, H_OUT = 0x0, 0x8000, 0x9000, 0x9800, 0x10000, 0x90000
# Unified-buffer rows and accumulator rows.
U_ID, U_IMG, U_F, U_DZ = 0, 128, 256, 2304
U_DZT = U_DZ + CHUNKS * N          # 8 rows a chunk
U_OUT = U_DZT + 8 * CHUNKS
A_DZT, A_G = 1920, 2048           # 8 accumulator rows a chunk's dZᵀ; the gradient's 6


def program():
    """F is formed while dZ comes over the host link, which binds (dZ is what a step's layer
    above would leave in the buffer; here it comes from the host). Reading dZ chunk by
    chunk, to start the transposes earlier, costs each read the host memory's latency: more
    than the transposes save."""
    lines = [
        '; The weight gradient of LeNet\'s first convolution, two images (make_conv_grad.py).',
        'set_format dtype=bf16',
        f'read_host host={H_ID:#x} ub={U_ID} rows={N}   ; the identity',
        f'read_host host={H_IMG:#x} ub={U_IMG} rows={B * IMG_ROWS}   ; two 32 x 32 maps, '
        '128 pixels a row',
        f'read_host host={H_SET0:#x} params=0 rows=1   ; bias 0, no bound',
        f'read_host host={H_SET1:#x} params=1 rows=1   ; bias 1 in lane 9',
        f'read_host host={H_DZ + PIX * ROW:#x} ub={U_F + PIX} rows={CHUNKS * N - PIX}   '
        '; zeros past F\'s last pixel (dZ\'s)',
        f'load_weights ub={U_ID} tiles=1   ; the identity: the window\'s taps as they are',
        f'set_window in_h={S} in_w={S} kh={K} kw={K} out_h={P} out_w={P} stride_y=1 '
        'stride_x=1 channels=1 pixel_bytes=1',
        f'read_host host={H_DZ:#x} ub={U_DZ} rows={CHUNKS * N}   ; dZ: 1,800 pixel rows, '
        'zeros after',
    ]
    for b in range(B):
        flags = ' switch' if b == 0 else ''
        lines.append(f'matmul ub={U_IMG + b * IMG_ROWS} acc={b * P * P} rows={P * P} ktile=0 '
                     f'window{flags}   ; image {b}: a row a pixel, lanes 0-8 its taps')
    lines.append(f'activate acc=0 ub={U_F} rows={PIX} params=1   ; F: lane 9 = 1')
    for c in range(CHUNKS):
        lines += [
            f'load_weights ub={U_DZ + c * N} tiles=1 transpose   ; chunk {c}: dZ\'s rows',
            f'matmul ub={U_ID} acc={A_DZT + 8 * c} rows={O} switch   ; ... transposed: 6 rows',
        ]
    for c in range(CHUNKS):
        lines.append(f'activate acc={A_DZT + 8 * c} ub={U_DZT + 8 * c} rows={O} params=0')
    for c in range(CHUNKS):
        acc = ' accumulate' if c else ''
        lines += [
            f'load_weights ub={U_F + c * N} tiles=1   ; chunk {c}: F\'s rows',
            f'matmul ub={U_DZT + 8 * c} acc={A_G} rows={O} switch{acc}   ; dWᵀ += dZᵀ F',
        ]
    lines += result_out(A_G, U_OUT, H_OUT, O)
    return '\n'.join(lines)


def rows_of(x):
    out = np.zeros((x.shape[0], N), dtype=np.float32)
    out[:, :x.shape[1]] = x
    return out


def receptive_fields(x):
    """F: a row a pixel (image-major, raster), lanes 0-8 the taps (ky, kx), lane 9 a 1."""
    f = np.zeros((B, P, P, N), dtype=np.float32)
    for ky in range(K):
        for kx in range(K):
            f[:, :, :, ky * K + kx] = x[:, ky:ky + P, kx:kx + P]
    f[:, :, :, TAPS] = 1
    return f.reshape(PIX, N)


def weight_gradient(f, dz):
    """dWᵀ as the program sums it: chunk after chunk, each as the array sums a tile."""
    g = np.zeros((O, N), dtype=np.float32)
    pad = np.zeros((CHUNKS * N, N), dtype=np.float32)
    fp, dzp = pad.copy(), pad.copy()
    fp[:PIX], dzp[:PIX] = f, dz
    for c in range(CHUNKS):
        dzt = dzp[c * N:(c + 1) * N, :O].T + np.float32(0)   # exact: one product a sum
        g = g + tile_product(rows_of(dzt), fp[c * N:(c + 1) * N])
    return bf16(g + np.float32(0))


def check_against_definition(x, dz, g):
    """The layout's gradient is the convolution's: dW[o, ky, kx] = sum dZ[b, y, x, o]
    X[b, y + ky, x + kx], and the bias's sum dZ, in float64, within bfloat16's rounding."""
    d = dz[:, :O].astype(np.float64).reshape(B, P, P, O)
    want = np.zeros((O, TAPS + 1))
    for ky in range(K):
        for kx in range(K):
            want[:, ky * K + kx] = np.einsum('byxo,byx->o', d, x[:, ky:ky + P, kx:kx + P])
    want[:, TAPS] = d.sum(axis=(0, 1, 2))
    err = np.abs(g[:, :TAPS + 1] - want).max() / np.abs(want).max()
    assert err < 2.0 ** -7, f'the layout is not the convolution: {err}'


def images():
    """The input (host memory up to the output) and the expected output, as bytes."""
    rng = np.random.default_rng(77)
    x = bf16(rng.uniform(0.0, 1.0, size=(B, S, S)).astype(np.float32))
    dz = np.zeros((PIX, N), dtype=np.float32)
    dz[:, :O] = bf16(rng.normal(0.0, 0.01, size=(PIX, O)).astype(np.float32))
    host = np.zeros(H_OUT, dtype=np.uint8)

    def put(at, rows):
        data = bf16_bits(rows).astype('<u2').view(np.uint8).ravel()
        host[at:at + data.size] = data
    put(H_ID, np.eye(N, dtype=np.float32))
    put(H_IMG, x.reshape(B * IMG_ROWS, N))
    host[H_SET0:H_SET0 + 9 * N] = param_set()
    host[H_SET1:H_SET1 + 9 * N] = param_set(np.arange(N) == TAPS)
    put(H_DZ, dz)
    g = weight_gradient(receptive_fields(x), dz)
    check_against_definition(x, dz, g)
    out = np.zeros((O, N), dtype=np.float32)
    out[:, :TAPS + 1] = g[:, :TAPS + 1]
    return host.tobytes(), bf16_bits(out).astype('<u2').tobytes()


if __name__ == '__main__':
    single_program_example('conv_grad', program, images, HERE, 'make_conv_grad.py')
