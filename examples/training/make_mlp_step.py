#!/usr/bin/env python3
"""Writes examples/training/mlp_step.asm and mlp_adam.asm, their inputs and the outputs they
must produce: two steps of SGD with momentum (mlp_step), or of Adam (mlp_adam), of a two-layer perceptron (200 inputs, 100 ReLU units, 10 classes, the
softmax cross-entropy) on one tpu-v2 core, batches of 64, every step on the chip: the
forward pass in bfloat16 with float32 sums, the loss's gradient on the vector unit, the
backward pass on the matrix unit (dX = dY W^T with W transposed on its way from the unified
buffer; dW = X^T dY with X^T made on the array by a transposed load times the identity), the
ReLU's mask on the vector unit and the update of float32 master weights and optimizer state
(SGD's momentum; Adam's two moments) kept in the unified buffer between the steps: the host
sends each step's images and labels only.

Each layer's bias is a row of its weights, multiplied by a constant 1 among the inputs
(input lane 200, hidden lane 100), so its gradient is that row's: the batch's sum of dY.

  NAME.host.bin      host memory from 0x0 in 256-byte rows (the unified buffer's rows
                     as the program first reads them: the identity, the constants, W1, W2
                     and the optimizer's state as float32 rows (two rows each: the lanes'
                     high halves, then their low halves)); 64 rows of zeros; then per step X
                     (two blocks of 64 rows, each followed by 64 zero rows) and the labels
                     (64 one-hot rows), the same batch each step; the VPU parameter set
  NAME.expected.bin  per step: each image's loss and their mean (float32 rows, every lane
                     the value: ln s - (L - m)[label], m the largest logit, s the sum of
                     exp(L - m); the chip's logarithm), then W1, W2 and the state after
                     the step (a checkpoint: tests/training/mlp_step_vs_torch.py runs each
                     step in PyTorch from the one before)
The program's header says where each is (Layout).

The reference is numpy in float32, step for step the program's (docs/training.md): the
array's sums in its order, the activation unit's rounding to bfloat16, the vector unit's
operations (examples/vector/vector_ref.py). Deterministic (fixed seed).
Run: python3 examples/training/make_mlp_step.py   (--check: fail where the committed files
are not what it writes; training_examples_are_current)
"""
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'vector'))
from vector_ref import (N, bf16, bf16_bits, lane_tree, fp32_exp,  # noqa: E402
                        fp32_log, f32_rows, write_or_check)

B, F, H, C, STEPS = 64, 200, 100, 10, 2
SGD = {'lr': 0.0625, 'momentum': 0.875}
ADAM = {'lr': 0.001, 'beta1': 0.9, 'beta2': 0.999, 'eps': 1e-7}  # the CPU trainer's (Keras's)
OPTIMIZERS = {'sgd': ('mlp_step', ('v',)), 'adam': ('mlp_adam', ('m', 's'))}
# Accumulator rows of each product.
A_Z1, A_LG, A_HT, A_DW2, A_DH, A_XT0, A_XT1, A_DW1 = 0, 64, 128, 256, 384, 448, 576, 704


def f32(x):
    return np.float32(x)


def constants(opt):
    """The float32 rows the program broadcasts (name: value): 1/B and the optimizer's
    scalars, Adam's per step (lr / (1 - beta1^t) and 1 / sqrt(1 - beta2^t), in float64 then
    rounded once)."""
    c = {'INVB': 1.0 / B}
    if opt == 'sgd':
        c.update(MU=SGD['momentum'], LR=SGD['lr'])
    else:
        b1, b2 = ADAM['beta1'], ADAM['beta2']
        c.update(B1=b1, OMB1=1 - b1, B2=b2, OMB2=1 - b2, EPS=ADAM['eps'])
        for t in range(1, STEPS + 1):
            c[f'SS{t}'] = ADAM['lr'] / (1 - b1 ** t)
            c[f'ISBC{t}'] = 1 / np.sqrt(1 - b2 ** t)
    return {k: f32(v) for k, v in c.items()}


class Layout:
    """Where everything is: unified-buffer rows (a float32 row takes two) and host rows."""

    def __init__(self, opt):
        self.opt, self.name = opt, OPTIMIZERS[opt][0]
        self.consts = constants(opt)
        self.state = ['w1', 'w2'] + [f'{k}{i}' for k in OPTIMIZERS[opt][1] for i in (1, 2)]
        at = 0

        def take(name, rows):
            nonlocal at
            setattr(self, name, at)
            at += rows
        take('ID', N)
        take('PAD', 2)
        take('E100', 1)
        take('ZERO', 1)
        for k in self.consts:
            take(k, 2)
        at = 2 * N
        for k in self.state:  # float32, 2N or N rows
            take(k.upper(), 4 * N if k.endswith('1') else 2 * N)
        self.STATE_END = at
        for name, rows in (('X0', 2 * B), ('X1', 2 * B), ('Y', B), ('W1B', 2 * N), ('W2B', N),
                           ('HID', 2 * B), ('MASK', B), ('L', B), ('M', 2 * B), ('S', 2 * B),
                           ('SM', 2 * B), ('R', 2 * B), ('PICK', 2 * B), ('LOSS', 2 * B),
                           ('MEAN', 2), ('D2B', 2 * B), ('HT', N), ('G2', N),
                           ('DH', 2 * B), ('XT0', N), ('XT1', N), ('G1', 2 * N),
                           ('TMP', 4 * N), ('TMP2', 4 * N)):
            take(name, rows)
        self.ZERO_PADS = (self.HID + B, self.D2B + B, self.DH + B)  # a transposed load reads past 64
        self.H_ZERO = self.STATE_END                  # host rows
        self.H_BATCH = self.H_ZERO + B
        self.PARAMS = self.H_BATCH + STEPS * 5 * B
        self.H_OUT = self.PARAMS + 8
        self.LOSS_ROWS = 2 * B + 2                   # each image's loss, then their mean
        self.OUT_ROWS = self.LOSS_ROWS + self.STATE_END - self.W1  # a step's: the loss, the state


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


PAD_ROW = np.where(np.arange(N) < C, 0, -np.inf).astype(np.float32)[None, :]
E100_ROW = (np.arange(N) == H).astype(np.float32)[None, :]


def gradients(w1, w2, x, y):
    """The forward and backward passes as the program computes them: each image's loss and
    their mean, and the two weight gradients (bfloat16 values)."""
    w1b, w2b = bf16(w1), bf16(w2)
    z1 = tile_product(x[:, :N], w1b[:N]) + tile_product(x[:, N:], w1b[N:])
    h = activate(z1, relu=True)
    mask = (h == 0).astype(np.float32)
    h = h + np.float32(0) + E100_ROW                   # the hidden layer's constant 1
    lg = activate(tile_product(h, w2b))
    l32 = lg + PAD_ROW
    m = lane_tree(l32, np.maximum)[:, None] * np.ones((1, N), np.float32)
    d = l32 - m
    picked = lane_tree(np.where(y != 0, d, np.float32(0)), np.add)  # (L - m) at the label
    e = fp32_exp(d)
    s = lane_tree(e, np.add)[:, None] * np.ones((1, N), np.float32)
    loss = (fp32_log(s) - picked[:, None]).astype(np.float32)       # ln s - (L - m)[label]
    mean = np.zeros((1, N), np.float32)
    for row in loss:                                                # row_sum: row after row
        mean = mean + row
    mean = mean * np.float32(1.0 / B)
    p = e * (np.float32(1) / s)
    d2b = bf16((p - y) * np.float32(1.0 / B))
    ht = activate(tile_product(np.eye(N, dtype=np.float32), padded(h, N).T))
    g2 = activate(tile_product(ht, padded(d2b, N)))
    dh = activate(tile_product(d2b, w2b.T))
    dz1 = np.where(mask != 0, np.float32(0), dh)
    xt = [activate(tile_product(np.eye(N, dtype=np.float32), padded(x[:, i * N:(i + 1) * N], N).T))
          for i in range(2)]
    g1 = np.concatenate([activate(tile_product(t, padded(dz1, N))) for t in xt])
    no_subnormal(z1, e, p, d2b, g1, g2, loss)
    return (loss, mean), (g1, g2)


def no_subnormal(*arrays):
    for a in arrays:
        assert not np.any((a != 0) & (np.abs(a) < np.float32(2.0 ** -126))), 'a subnormal'


def update(lay, state, g, i, t):
    """Tensor i's (1 or 2) weights and optimizer state after step t (from 1), as the vector
    unit computes them."""
    c, w = lay.consts, state[f'w{i}']
    if lay.opt == 'sgd':
        v = state[f'v{i}'] * c['MU'] + g
        state.update({f'v{i}': v, f'w{i}': w - v * c['LR']})
    else:
        m = state[f'm{i}'] * c['B1'] + g * c['OMB1']
        s = state[f's{i}'] * c['B2'] + (g * g) * c['OMB2']
        with np.errstate(divide='ignore'):
            root = np.float32(1) / (np.float32(1) / np.sqrt(s))  # recip(rsqrt(s)): 0 at 0
        d = np.float32(1) / (root * c[f'ISBC{t}'] + c['EPS'])
        state.update({f'm{i}': m, f's{i}': s, f'w{i}': w - (m * d) * c[f'SS{t}']})
    no_subnormal(*(state[k] for k in state if k.endswith(str(i))))


def update_lines(lay, w, g, rows, t):
    """The vector instructions of tensor w's update at step t."""
    v = lambda op, a, b, out, flags: (  # noqa: E731
        f'vector op={op} a={a}' + (f' b={b}' if b is not None else '') +
        f' out={out} rows={rows} {flags}')
    T, T2 = lay.TMP, lay.TMP2
    if lay.opt == 'sgd':
        V = getattr(lay, 'V' + w[-1])
        W = getattr(lay, w.upper())
        return [v('mul', V, lay.MU, T, 'a32 b32 o32 bcast'),
                v('add', T, g, V, 'a32 o32') + '   ; v = mu v + g',
                v('mul', V, lay.LR, T, 'a32 b32 o32 bcast'),
                v('sub', W, T, W, 'a32 b32 o32') + '   ; w = w - lr v']
    M, S, W = (getattr(lay, k + w[-1].upper()) if k != 'W' else getattr(lay, w.upper())
               for k in ('M', 'S', 'W'))
    return [v('mul', M, lay.B1, T, 'a32 b32 o32 bcast'),
            v('mul', g, lay.OMB1, T2, 'b32 o32 bcast'),
            v('add', T, T2, M, 'a32 b32 o32') + '   ; m = b1 m + (1 - b1) g',
            v('mul', S, lay.B2, T, 'a32 b32 o32 bcast'),
            v('mul', g, g, T2, 'o32'),
            v('mul', T2, lay.OMB2, T2, 'a32 b32 o32 bcast'),
            v('add', T, T2, S, 'a32 b32 o32') + '   ; s = b2 s + (1 - b2) g^2',
            v('rsqrt', S, None, T, 'a32 o32'),
            v('recip', T, None, T, 'a32 o32') + '   ; sqrt(s), 0 where s = 0',
            v('mul', T, getattr(lay, f'ISBC{t}'), T, 'a32 b32 o32 bcast'),
            v('add', T, lay.EPS, T, 'a32 b32 o32 bcast') + '   ; sqrt(s / (1 - b2^t)) + eps',
            v('recip', T, None, T, 'a32 o32'),
            v('mul', M, T, T, 'a32 b32 o32'),
            v('mul', T, getattr(lay, f'SS{t}'), T, 'a32 b32 o32 bcast'),
            v('sub', W, T, W, 'a32 b32 o32') + '   ; w = w - lr / (1 - b1^t) m / (...)']


def batch(rng):
    x = np.zeros((B, 2 * N), dtype=np.float32)
    x[:, :F] = bf16(rng.normal(0.0, 1.0, size=(B, F)).astype(np.float32))
    x[:, F] = 1.0
    y = np.zeros((B, N), dtype=np.float32)
    y[np.arange(B), rng.integers(0, C, size=B)] = 1.0
    return x, y



def program(lay):
    """The program's text, one step after another."""
    what = 'SGD steps with momentum' if lay.opt == 'sgd' else 'Adam steps'
    state = ', '.join(k.upper() for k in lay.state)
    lines = [
        f'; Two {what} of a 200-100-10 perceptron on one tpu-v2 core, batches of 64: forward,',
        '; softmax cross-entropy, backward and the update all on the chip, the master weights',
        '; and optimizer state (float32) staying in the unified buffer. Written by',
        '; make_mlp_step.py (edit that); docs/training.md walks through it.',
        f';   tpusim exec examples/training/{lay.name}.asm -c tpu-v2 --engine fast \\',
        f';       --host-in examples/training/{lay.name}.host.bin --host-out out.bin \\',
        f';       --host-out-range {lay.H_OUT * 2 * N:#x}:{STEPS * lay.OUT_ROWS * 2 * N}',
        'set_format dtype=bf16',
        f'read_host host={lay.PARAMS * 2 * N:#x} params=0 rows=1   ; set 0: bias 0, no upper bound',
        f'read_host host=0x0 ub=0 rows={lay.STATE_END}   ; identity, constants, {state}',
    ]
    for z in lay.ZERO_PADS:
        lines.append(f'read_host host={lay.H_ZERO * 2 * N:#x} ub={z} rows={B}   ; zeros a transposed load reads')
    for t in range(1, STEPS + 1):
        lines += step_lines(lay, t)
    lines.append('halt')
    return '\n'.join(lines) + '\n'


def step_lines(lay, t):
    """Step t's instructions (from 1)."""
    a = lay
    at = (a.H_BATCH + (t - 1) * 5 * B) * 2 * N
    out = (a.H_OUT + (t - 1) * a.OUT_ROWS) * 2 * N
    lines = [
        f'; ---- step {t}',
        f'read_host host={at:#x} ub={a.X0} rows={5 * B}   ; X (two blocks, zeros after each), labels',
        f'vector op=copy a={a.W1} out={a.W1B} rows={2 * N} a32   ; W1 in bfloat16',
        f'vector op=copy a={a.W2} out={a.W2B} rows={N} a32   ; W2 in bfloat16',
        f'load_weights ub={a.W1B} tiles=2',
        f'matmul ub={a.X0} acc={A_Z1} rows={B} switch',
        f'matmul ub={a.X1} acc={A_Z1} rows={B} switch accumulate   ; z1 = X W1',
        f'activate acc={A_Z1} ub={a.HID} rows={B} params=0 relu   ; h = relu(z1)',
        f'vector op=equal a={a.HID} b={a.ZERO} out={a.MASK} rows={B} bcast   ; where h = 0',
        f'vector op=add a={a.HID} b={a.E100} out={a.HID} rows={B} bcast   ; h lane 100 = 1 (the bias)',
        f'load_weights ub={a.W2B} tiles=1',
        f'matmul ub={a.HID} acc={A_LG} rows={B} switch   ; logits = h W2',
        f'activate acc={A_LG} ub={a.L} rows={B} params=0',
        f'vector op=add a={a.L} b={a.PAD} out={a.SM} rows={B} b32 o32 bcast   ; -inf past class 10',
        f'vector op=lane_max a={a.SM} out={a.M} rows={B} a32 o32',
        f'vector op=sub a={a.SM} b={a.M} out={a.SM} rows={B} a32 b32 o32   ; L - m',
        f'vector op=mul a={a.Y} b={a.ZERO} out={a.PICK} rows={B} o32 bcast   ; zeros',
        f'vector op=select a={a.Y} b={a.SM} out={a.PICK} rows={B} b32 o32   ; L - m at the label',
        f'vector op=lane_sum a={a.PICK} out={a.PICK} rows={B} a32 o32',
        f'vector op=exp a={a.SM} out={a.SM} rows={B} a32 o32',
        f'vector op=lane_sum a={a.SM} out={a.S} rows={B} a32 o32',
        f'vector op=log a={a.S} out={a.LOSS} rows={B} a32 o32',
        f'vector op=sub a={a.LOSS} b={a.PICK} out={a.LOSS} rows={B} a32 b32 o32   ; each image\'s loss',
        f'vector op=row_sum a={a.LOSS} out={a.MEAN} rows={B} a32 o32',
        f'vector op=mul a={a.MEAN} b={a.INVB} out={a.MEAN} rows=1 a32 b32 o32   ; their mean',
        f'vector op=recip a={a.S} out={a.R} rows={B} a32 o32',
        f'vector op=mul a={a.SM} b={a.R} out={a.SM} rows={B} a32 b32 o32   ; p = softmax',
        f'vector op=sub a={a.SM} b={a.Y} out={a.SM} rows={B} a32 o32   ; p - y',
        f'vector op=mul a={a.SM} b={a.INVB} out={a.D2B} rows={B} a32 b32 bcast   ; dz2 = (p - y) / 64',
        f'write_host ub={a.LOSS} host={out:#x} rows={a.LOSS_ROWS}   ; the losses',
        f'load_weights ub={a.HID} tiles=1 transpose',
        f'matmul ub={a.ID} acc={A_HT} rows={N} switch   ; h^T',
        f'activate acc={A_HT} ub={a.HT} rows={N} params=0',
        f'load_weights ub={a.D2B} tiles=1',
        f'matmul ub={a.HT} acc={A_DW2} rows={N} switch   ; dW2 = h^T dz2',
        f'activate acc={A_DW2} ub={a.G2} rows={N} params=0',
        f'load_weights ub={a.W2B} tiles=1 transpose',
        f'matmul ub={a.D2B} acc={A_DH} rows={B} switch   ; dh = dz2 W2^T',
        f'activate acc={A_DH} ub={a.DH} rows={B} params=0',
        f'vector op=select a={a.MASK} b={a.ZERO} out={a.DH} rows={B} bcast   ; dz1: 0 where h = 0',
        f'load_weights ub={a.X0} tiles=1 transpose',
        f'matmul ub={a.ID} acc={A_XT0} rows={N} switch   ; X^T, inputs 0-127',
        f'activate acc={A_XT0} ub={a.XT0} rows={N} params=0',
        f'load_weights ub={a.X1} tiles=1 transpose',
        f'matmul ub={a.ID} acc={A_XT1} rows={N} switch   ; X^T, inputs 128-255',
        f'activate acc={A_XT1} ub={a.XT1} rows={N} params=0',
        f'load_weights ub={a.DH} tiles=1',
        f'matmul ub={a.XT0} acc={A_DW1} rows={N} switch   ; dW1 = X^T dz1',
        f'matmul ub={a.XT1} acc={A_DW1 + N} rows={N}',
        f'activate acc={A_DW1} ub={a.G1} rows={2 * N} params=0',
    ]
    lines += update_lines(a, 'w1', a.G1, 2 * N, t) + update_lines(a, 'w2', a.G2, N, t)
    lines.append(f'write_host ub={a.W1} host={out + a.LOSS_ROWS * 2 * N:#x} '
                 f'rows={a.STATE_END - a.W1}   ; the weights and state after the step')
    return lines


def initial_state(lay, rng):
    w1 = np.zeros((2 * N, N), dtype=np.float32)
    w1[:F + 1, :H] = rng.normal(0.0, 0.07, size=(F + 1, H)).astype(np.float32)
    w2 = np.zeros((N, N), dtype=np.float32)
    w2[:H + 1, :C] = rng.normal(0.0, 0.1, size=(H + 1, C)).astype(np.float32)
    state = {'w1': w1, 'w2': w2}
    for k in lay.state[2:]:
        state[k] = np.zeros_like(w1 if k.endswith('1') else w2)
    return state


def write(opt, out_dir):
    """The example of optimizer opt into out_dir: its program, input and expected output."""
    lay = Layout(opt)
    rng = np.random.default_rng(74)
    state = initial_state(lay, rng)
    host = np.zeros((lay.PARAMS, N), dtype=np.uint16)
    host[lay.ID:lay.ID + N] = bf16_bits(np.eye(N, dtype=np.float32))
    host[lay.PAD:lay.PAD + 2] = f32_rows(PAD_ROW)
    host[lay.E100] = bf16_bits(E100_ROW[0])
    for k, value in lay.consts.items():
        host[getattr(lay, k):getattr(lay, k) + 2] = f32_rows(np.full((1, N), value, np.float32))
    for k in lay.state:
        host[getattr(lay, k.upper()):][:2 * state[k].shape[0]] = f32_rows(state[k])
    out = []
    x, y = batch(rng)  # the same batch each step: the loss falls
    for t in range(1, STEPS + 1):
        at = lay.H_BATCH + (t - 1) * 5 * B
        host[at:at + B] = bf16_bits(x[:, :N])
        host[at + 2 * B:at + 3 * B] = bf16_bits(x[:, N:])
        host[at + 4 * B:at + 5 * B] = bf16_bits(y)
        (loss, mean), (g1, g2) = gradients(state['w1'], state['w2'], x, y)
        update(lay, state, g1, 1, t)
        update(lay, state, g2, 2, t)
        out += [f32_rows(loss), f32_rows(mean)] + [f32_rows(state[k]) for k in lay.state]
        print(f'{lay.name} step {t}: loss {mean[0, 0]:.4f}')
    params = np.zeros(10 * N // 2, dtype=np.uint16)
    params[:4 * N] = np.concatenate([np.zeros(N, np.float32), np.full(N, np.inf, np.float32)]).view(np.uint16)
    with open(os.path.join(out_dir, lay.name + '.asm'), 'w') as f:
        f.write(program(lay))
    np.concatenate([host.ravel(), params]).astype('<u2').tofile(os.path.join(out_dir, lay.name + '.host.bin'))
    np.concatenate(out).astype('<u2').tofile(os.path.join(out_dir, lay.name + '.expected.bin'))
    print(f'wrote {lay.name}.asm, {lay.name}.{{host,expected}}.bin')


def main():
    def write_all(out_dir):
        for opt in OPTIMIZERS:
            write(opt, out_dir)
    write_or_check(write_all, HERE, 'make_mlp_step.py')


if __name__ == '__main__':
    main()
