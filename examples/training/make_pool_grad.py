#!/usr/bin/env python3
"""Writes examples/training/pool_grad.asm, its input and the output it must produce: the
backward pass of a 2 x 2 average pooling (stride 2) on one tpu-v2 core, as a training step
of LeNet takes it: the gradient of the pooled maps (two images of 6 x 6 pixels and 16
channels, a pixel a row) spread back over the 12 x 12 maps it was averaged from, each
pixel's value times 1/4 in the four pixels of its window, in raster order.

One `matmul window` does it: a window over the pooled gradient read `dilated` (as if a zero
lay between its pixels, across and down), kernel 2 x 2, padding 1, stride 1, so that each
output pixel's window meets exactly one pixel of the map, the one its own window was
averaged into; the weight tile holds four identities times 1/4, one for each tap (rows
16 q + c, lane c). The two images' maps lie one above the other and are read as one map of
12 x 6 pixels: the zero rows the dilation puts between the maps keep them apart. The sum in
each accumulator is one product (0.25 times a bfloat16 value: exact) and zeros, so the
result is the gradient times 1/4 exactly (docs/isa.md, "Convolution windows").

  pool_grad.host.bin      the host memory (and the weight memory, its image) from 0x0: the
                          gradient's 72 rows (256 bytes each, lanes 0-15 the channels), the
                          weight tile (128 rows of 128 bfloat16) at 0x4800, the VPU
                          parameter set (bias +0, no upper bound) at 0xc800
  pool_grad.expected.bin  the 288 rows the program writes to 0xd000 (2 x 12 x 12 pixels)

Run: python3 examples/training/make_pool_grad.py   (--check: fail where the committed files
are not what it writes; training_examples_are_current)
"""
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'vector'))
from vector_ref import N, bf16_bits, from_bf16, pooling_host, single_program_example  # noqa: E402

B, H, C = 2, 6, 16  # images, pooled map side, channels
TILE, PARAMS, OUT = 0x4800, 0xc800, 0xd000


def program():
    return '\n'.join([
        '; The gradient of a 2 x 2 average pooling, spread back (make_pool_grad.py).',
        'set_format dtype=bf16',
        f'read_host host=0x0 ub=0 rows={B * H * H}   ; dP: 2 images x 6 x 6 pixels, 16 lanes',
        f'read_host host={PARAMS:#x} params=0 rows=1   ; set 0: bias 0, no upper bound',
        f'read_weights addr={TILE:#x} tiles=1   ; four identities x 1/4, one a tap',
        f'set_window in_h={B * H} in_w={H} kh=2 kw=2 out_h={B * 2 * H} out_w={2 * H} '
        f'stride_y=1 stride_x=1 channels={C} pad_top=1 pad_left=1 pixel_bytes={N} dilated',
        f'matmul ub=0 acc=0 rows={B * 4 * H * H} ktile=0 window switch',
        f'activate acc=0 ub={B * H * H} rows={B * 4 * H * H} params=0',
        f'write_host ub={B * H * H} host={OUT:#x} rows={B * 4 * H * H}',
        'halt', ''])


def images():
    """The input (host memory up to the output) and the expected output, as bytes."""
    rng = np.random.default_rng(75)
    dp = from_bf16(bf16_bits(rng.normal(0.0, 0.01, size=(B, H, H, C)).astype(np.float32)))
    host, _ = pooling_host(dp, OUT, TILE, PARAMS)
    # Each output pixel (y, x) takes pooled pixel (y // 2, x // 2) times 1/4.
    up = dp.repeat(2, axis=1).repeat(2, axis=2) * np.float32(0.25)
    out = np.zeros((B * 4 * H * H, N), dtype=np.float32)
    out[:, :C] = up.reshape(-1, C)
    return host.tobytes(), bf16_bits(out).astype('<u2').tobytes()


if __name__ == '__main__':
    single_program_example('pool_grad', program, images, HERE, 'make_pool_grad.py')
