#!/usr/bin/env python3
"""Writes row_softmax.host.bin (8 rows of 4 bfloat16 scores for row_softmax.asm) and
row_softmax.expected.bin (their softmax, bfloat16, as the program computes it: numpy in
float32, step for step). Run: python3 examples/vector/make_row_softmax.py"""
import os

import numpy as np

from vector_ref import bf16_bits, from_bf16, lane_tree, fp32_exp

x = from_bf16(bf16_bits(np.random.default_rng(4).normal(0.0, 2.0, size=(8, 4)).astype(np.float32)))
e = fp32_exp(x - lane_tree(x, np.maximum)[:, None])
y = bf16_bits(e * (np.float32(1) / lane_tree(e, np.add))[:, None])
here = os.path.dirname(os.path.abspath(__file__))
bf16_bits(x).astype('<u2').tofile(os.path.join(here, 'row_softmax.host.bin'))
y.astype('<u2').tofile(os.path.join(here, 'row_softmax.expected.bin'))
print('wrote row_softmax.{host,expected}.bin')
