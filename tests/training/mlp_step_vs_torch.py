#!/usr/bin/python3
"""The training example's arithmetic checked against PyTorch's autograd, independently.

examples/training/mlp_step.asm and mlp_adam.asm run two steps of SGD with momentum, or of
Adam, of a 200-100-10 perceptron on the chip; VectorExamplesTest holds the chip's outputs
equal, bit for bit, to their .expected.bin, which make_mlp_step.py computed with numpy as
the chip does. Both
were written from the same reading of the backward pass, so a wrong formula (a transpose,
a missing term) could be in both. This runs the same two steps in PyTorch, float32, from
the same weights and batch (read from mlp_step.host.bin), with autograd and
torch.optim.SGD or Adam, the forward pass rounded to bfloat16 where the chip rounds it (the weights,
h and the logits; the gradient passes those roundings unchanged), and compares:

- each step's loss (the batch's mean, which the chip computes with its logarithm) and
- each step's change of every weight and momentum value, PyTorch's step taken from the
  chip's state before it (the example writes the state after each step),

with bounds derived from bfloat16's precision, not from the runs: the backward pass is the
one the two differ in, the chip rounding dz2, dh and the gradients to bfloat16 (a relative
error of at most 2^-9 each), each value going through a few such roundings and sums of up
to 256 products whose cancellation can magnify a relative error a few times. (Without the
forward's roundings in PyTorch, a ReLU whose input is near 0 can be on in one and off in the
other, and that image's whole contribution to its unit's gradient differs: hidden unit 90
does so here; from one step to the next such flips add up, so each step starts from the
chip's state.) So the losses must agree within 2^-5 of their size, and every change within
2^-5 of the largest change of its tensor; a wrong formula (a missing or transposed term)
changes a gradient by its own size. Adam's weights are checked against its formula from the
chip's moments instead (adam_weights says why). Exit 77 (skipped) without PyTorch.
"""
import os
import sys

import numpy as np

try:
    import torch
except ImportError:
    print("mlp_step_vs_torch: skipped: PyTorch is not installed")
    sys.exit(77)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples", "training"))
import make_mlp_step as t  # noqa: E402 (the example's layout; writes nothing)

N = t.N


def f32(rows):
    """float32 rows from buffer rows (each row's high halves, then its low halves)."""
    r = rows.reshape(-1, 2, N).astype(np.uint32)
    return ((r[:, 0] << 16) | r[:, 1]).view(np.float32)


def bf16(rows):
    return (rows.astype(np.uint32) << 16).view(np.float32)


def rounded(x):
    """x rounded to bfloat16 (nearest even) in the forward pass, the gradient unchanged."""
    return x + (x.to(torch.bfloat16).to(torch.float32) - x).detach()


def chip_outputs(lay, out):
    """Per step: the chip's loss (the mean it computes of ln s - (L - m)[label]) and its
    state after the step."""
    B, rows = t.B, lay.OUT_ROWS
    steps = []
    for s in range(t.STEPS):
        piece = out[s * rows:(s + 1) * rows]
        loss = f32(piece[2 * B:2 * B + 2])[0, 0]
        steps.append((float(loss), split_state(lay, piece[lay.LOSS_ROWS:])))
    return steps


def split_state(lay, rows):
    """The weights and the optimizer's state from the buffer's rows W1 .. STATE_END."""
    names = lay.state + ["end"]
    at = [getattr(lay, k.upper()) - lay.W1 for k in lay.state] + [lay.STATE_END - lay.W1]
    return {k: f32(rows[at[i]:at[i + 1]]) for i, k in enumerate(names[:-1])}


# Each optimizer's state in PyTorch's names.
TORCH_STATE = {"sgd": {"v": "momentum_buffer"}, "adam": {"m": "exp_avg", "s": "exp_avg_sq"}}


def torch_step(lay, state, x, labels, step):
    """Step `step` (from 1) in PyTorch from `state`: its loss and the state after it."""
    W = [torch.tensor(state[f"w{i}"], requires_grad=True) for i in (1, 2)]
    if lay.opt == "sgd":
        opt = torch.optim.SGD(W, lr=t.SGD["lr"], momentum=t.SGD["momentum"])
    else:
        a = t.ADAM
        opt = torch.optim.Adam(W, lr=a["lr"], betas=(a["beta1"], a["beta2"]), eps=a["eps"])
    for i, w in enumerate(W, 1):  # the state so far
        for ours, theirs in TORCH_STATE[lay.opt].items():
            opt.state[w][theirs] = torch.tensor(state[f"{ours}{i}"])
        if lay.opt == "adam":
            opt.state[w]["step"] = torch.tensor(float(step - 1))
    h = rounded(torch.relu(torch.tensor(x) @ rounded(W[0])))
    h = torch.cat([h[:, :t.H], torch.ones(t.B, 1), h[:, t.H + 1:]], dim=1)  # the bias's 1
    logits = rounded(h @ rounded(W[1]))[:, :t.C]
    loss = torch.nn.functional.cross_entropy(logits, torch.tensor(labels))
    loss.backward()
    opt.step()
    after = {f"w{i}": w.detach().numpy() for i, w in enumerate(W, 1)}
    for i, w in enumerate(W, 1):
        for ours, theirs in TORCH_STATE[lay.opt].items():
            after[f"{ours}{i}"] = opt.state[w][theirs].numpy()
    return loss.item(), after


def check(opt):
    """The differences of optimizer opt's example from PyTorch, as lines (none: it agrees)."""
    lay, B = t.Layout(opt), t.B
    files = os.path.join(ROOT, "examples", "training", lay.name)
    host = np.fromfile(files + ".host.bin", "<u2").reshape(-1, N)
    out = np.fromfile(files + ".expected.bin", "<u2").reshape(-1, N)
    at = lay.H_BATCH
    x = np.concatenate([bf16(host[at:at + B]), bf16(host[at + 2 * B:at + 3 * B])], axis=1)
    labels = np.argmax(bf16(host[at + 4 * B:at + 5 * B]), axis=1)
    state = split_state(lay, host[lay.W1:lay.STATE_END])
    bad = []
    for s, (chip_loss, chip) in enumerate(chip_outputs(lay, out), 1):
        loss, ref = torch_step(lay, state, x, labels, s)
        print(f"{lay.name} step {s}: loss {chip_loss:.5f} on the chip, {loss:.5f} in PyTorch")
        if abs(chip_loss - loss) > 2.0 ** -5 * abs(loss):
            bad.append(f"{lay.name} step {s}'s loss")
        for k in lay.state:
            if lay.opt == "adam" and k.startswith("w"):
                bad += adam_weights(chip, state, k, s)
                continue
            dc, dt = chip[k] - state[k], ref[k] - state[k]
            err, size = float(np.abs(dc - dt).max()), float(np.abs(dt).max())
            print(f"  {k}: largest change {size:.3g}, largest difference of the changes "
                  f"{err:.3g} ({err / size:.2%})")
            if err > 2.0 ** -5 * size:
                bad.append(f"{lay.name} step {s}'s {k}")
        state = chip  # the next step from the chip's state, as the chip runs it
    return bad


def adam_weights(chip, before, k, step):
    """Adam's weight update from the chip's moments, against torch.optim.Adam's formula
    (w - lr / (1 - b1^t) m / (sqrt(s) / sqrt(1 - b2^t) + eps)) in float64. Not against
    PyTorch's own weights: Adam gives a weight whose gradient is near 0 a step of about lr
    with the gradient's sign, so where bfloat16 rounding flips that sign the two differ by
    2 lr (here, by up to 198 % of the largest step). The chip's chain is nine float32
    roundings of the step u (rsqrt's two, recip, multiply, add, recip, two multiplies) and
    one of the new weight: |chip - formula| <= 2^-24 (|w'| + 16 |u|) in every element."""
    a, i = t.ADAM, k[-1]
    m, s = chip["m" + i].astype(np.float64), chip["s" + i].astype(np.float64)
    u = a["lr"] / (1 - a["beta1"] ** step) * m / (
        np.sqrt(s) / np.sqrt(1 - a["beta2"] ** step) + a["eps"])
    want = before[k].astype(np.float64) - u
    err = np.abs(chip[k].astype(np.float64) - want)
    bound = 2.0 ** -24 * (np.abs(want) + 16 * np.abs(u))
    print(f"  {k}: largest step {np.abs(u).max():.3g}, largest difference from Adam's formula "
          f"{err.max():.3g} (the bound there {bound.flat[np.argmax(err)]:.3g})")
    return [f"adam step {step}'s {k}"] if np.any(err > bound) else []


def main():
    bad = check("sgd") + check("adam")
    if bad:
        sys.exit("mlp_step_vs_torch: the chip's steps are not PyTorch's: " + ", ".join(bad))


if __name__ == "__main__":
    main()
