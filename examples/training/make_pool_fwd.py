#!/usr/bin/env python3
"""Writes examples/training/pool_fwd.asm, its input and the output it must produce: the
forward pass of a 2 x 2 average pooling (stride 2) on one tpu-v2 core, as a training step
of LeNet takes it: two images' 30 x 30 maps of 6 channels (the first convolution's ReLU
output, a pixel a row) pooled to 15 x 15, in raster order.

One `matmul window` does it: kernel 2 x 2, stride 2, through a tile of four identities
times 1/4, one a tap (rows 6 q + c, lane c). Each sum is the array's: the four products
(each exact) added in the taps' order in float32, then rounded to bfloat16 by the
activation unit. The raster order is what the next convolution's window and the pooling's
gradient (pool_grad.asm) read; the activation unit's own pooling (`activate pool=avg`)
would need the conv's rows window by window. The two images' maps lie one above the other
and are read as one map of 60 x 30 pixels: a window never crosses from one to the other
(30 is even).

  pool_fwd.host.bin      the host memory (and the weight memory, its image) from 0x0: the
                         maps' 1,800 rows (lanes 0-5 the channels), the weight tile (128
                         rows) at 0x70800, the VPU parameter set (bias +0) at 0x78800
  pool_fwd.expected.bin  the 450 rows the program writes to 0x79000 (2 x 15 x 15 pixels)

Run: python3 examples/training/make_pool_fwd.py   (--check: fail where the committed files
are not what it writes; pool_fwd_example_is_current)
"""
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'vector'))
from vector_ref import (N, bf16, bf16_bits, pooling_host, result_out,  # noqa: E402
                        single_program_example)
from make_mlp_step import tile_product  # noqa: E402

B, S, C = 2, 30, 6   # images, map side, channels
P = S // 2           # the pooled side
TILE, PARAMS, OUT = 0x70800, 0x78800, 0x79000


def program():
    return '\n'.join([
        '; A 2 x 2 average pooling, raster order (make_pool_fwd.py).',
        'set_format dtype=bf16',
        f'read_host host=0x0 ub=0 rows={B * S * S}   ; 2 images x 30 x 30 pixels, 6 lanes',
        f'read_host host={PARAMS:#x} params=0 rows=1   ; set 0: bias 0, no upper bound',
        f'read_weights addr={TILE:#x} tiles=1   ; four identities x 1/4, one a tap',
        f'set_window in_h={B * S} in_w={S} kh=2 kw=2 out_h={B * P} out_w={P} stride_y=2 '
        f'stride_x=2 channels={C} pixel_bytes={N}',
        f'matmul ub=0 acc=0 rows={B * P * P} ktile=0 window switch',
    ] + result_out(0, B * S * S, OUT, B * P * P))


def images():
    """The input (host memory up to the output) and the expected output, as bytes."""
    rng = np.random.default_rng(79)
    h = bf16(np.maximum(rng.normal(0.0, 1.0, size=(B, S, S, C)), 0).astype(np.float32))
    host, tile = pooling_host(h, OUT, TILE, PARAMS)
    window = np.zeros((B, P, P, N), dtype=np.float32)  # lane q C + c: tap q = (qy, qx)
    for q in range(4):
        window[..., q * C:(q + 1) * C] = h[:, q // 2::2, q % 2::2]
    out = bf16(tile_product(window.reshape(-1, N), tile) + np.float32(0))
    mean = h.reshape(B, P, 2, P, 2, C).astype(np.float64).mean(axis=(2, 4)).reshape(-1, C)
    assert np.abs(out[:, :C] - mean).max() <= 2.0 ** -8 * np.abs(mean).max(), 'not the mean'
    return host.tobytes(), bf16_bits(out).astype('<u2').tobytes()


if __name__ == '__main__':
    single_program_example('pool_fwd', program, images, HERE, 'make_pool_fwd.py')
