#!/usr/bin/env python3
"""Writes examples/training/allreduce_core0.asm and allreduce_core1.asm, their input and the
output they must produce: the sum of two cores' gradients through HBM, as a training step
split across the two cores of a tpu-v3 chip (each core a share of the batch) adds them
before its update. TPU v2 and v3 cores sum their gradients so (Norrie et al., IEEE Micro
2021: the cores of a chip share its HBM).

Each core holds its share's gradient of a 128 x 128 weight block as 128 float32 rows (256
buffer rows: each row's high halves, then its low halves). It writes them into HBM
(`write_hbm`), waits at a barrier for the other core to have written its own, reads the
other's back (`read_hbm`) and adds the two with the vector unit in float32. IEEE addition
is commutative, so both cores hold the same sum, bit for bit, and the copies of the weights
they update stay equal. Each writes its sum back to the host.

  allreduce.host.bin      the host memory from 0x0: core 0's gradient (256 rows of 256
                          bytes), core 1's at 0x10000
  allreduce.expected.bin  the 2 x 256 rows the two cores write to 0x20000 and 0x30000: the
                          float32 sum, the same on both

Run: python3 examples/training/make_allreduce.py   (--check: fail where the committed files
are not what it writes; allreduce_example_is_current)
"""
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'vector'))
from vector_ref import N, f32_rows, write_files, write_or_check  # noqa: E402

R = 128                      # float32 rows of the gradient
ROWS = 2 * R                 # its buffer rows
ROW = 2 * N                  # bytes a buffer row
IN, OUT = 0x0, 0x20000       # core c's gradient at IN + c 0x10000, its sum at OUT + c 0x10000
HBM = 0x100000               # core c's slot in HBM at HBM + c 0x10000
STRIDE = 0x10000


def program(core):
    other = 1 - core
    return '\n'.join([
        f'; Core {core} of 2: the sum of the two cores\' gradients through HBM '
        '(make_allreduce.py).',
        'set_format dtype=bf16',
        f'read_host host={IN + core * STRIDE:#x} ub=0 rows={ROWS}   ; this core\'s gradient, '
        f'{R} float32 rows',
        f'write_hbm ub=0 addr={HBM + core * STRIDE:#x} rows={ROWS}   ; into its slot in HBM',
        'barrier cores=3   ; both written',
        f'read_hbm addr={HBM + other * STRIDE:#x} ub={ROWS} rows={ROWS}   ; the other core\'s',
        f'vector op=add a=0 b={ROWS} out={2 * ROWS} rows={R} a32 b32 o32   ; the sum, in float32',
        f'write_host ub={2 * ROWS} host={OUT + core * STRIDE:#x} rows={ROWS}',
        'halt', ''])


def images():
    """The input (host memory up to the outputs) and the expected output, as bytes."""
    rng = np.random.default_rng(76)
    g = [rng.normal(0.0, 0.01, size=(R, N)).astype(np.float32) for _ in range(2)]
    host = np.zeros(OUT, dtype=np.uint8)
    for c in range(2):
        at = IN + c * STRIDE
        host[at:at + ROWS * ROW] = f32_rows(g[c]).astype('<u2').view(np.uint8).ravel()
    total = f32_rows(g[0] + g[1]).astype('<u2').view(np.uint8).ravel()
    expected = np.zeros(2 * STRIDE, dtype=np.uint8)
    for c in range(2):
        expected[c * STRIDE:c * STRIDE + ROWS * ROW] = total
    return host.tobytes(), expected.tobytes()


def write(out_dir):
    host, expected = images()
    write_files(out_dir, {'allreduce_core0.asm': program(0), 'allreduce_core1.asm': program(1),
                          'allreduce.host.bin': host, 'allreduce.expected.bin': expected})


if __name__ == '__main__':
    write_or_check(write, HERE, 'make_allreduce.py')
