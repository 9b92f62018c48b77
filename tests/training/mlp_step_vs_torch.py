#!/usr/bin/python3
"""The training example's arithmetic checked against PyTorch's autograd, independently.

examples/training/mlp_step.asm runs two SGD steps with momentum of a 200-100-10 perceptron
on the chip; VectorExamplesTest holds the chip's output equal, bit for bit, to
mlp_step.expected.bin, which make_mlp_step.py computed with numpy as the chip does. Both
were written from the same reading of the backward pass, so a wrong formula (a transpose,
a missing term) could be in both. This runs the same two steps in PyTorch, float32, from
the same weights and batch (read from mlp_step.host.bin), with autograd and
torch.optim.SGD, the forward pass rounded to bfloat16 where the chip rounds it (the weights,
h and the logits; the gradient passes those roundings unchanged), and compares:

- each step's loss (the chip's, from the pieces it writes: log(s) + m - L[label]) and
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
changes a gradient by its own size. Exit 77 (skipped) without PyTorch.
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


def chip_outputs(out, labels):
    """Per step: the chip's loss (log(s) + m - L[label], averaged) and its state after it."""
    B, rows = t.B, t.OUT_ROWS
    steps = []
    for s in range(t.STEPS):
        piece = out[s * rows:(s + 1) * rows]
        lg, m, ssum = bf16(piece[:B]), f32(piece[B:3 * B]), f32(piece[3 * B:5 * B])
        loss = np.mean(np.log(ssum[:, 0].astype(np.float64)) + m[:, 0] - lg[np.arange(B), labels])
        steps.append((loss, split_state(piece[320:])))
    return steps


def split_state(rows):
    """W1, W2, V1, V2 from the buffer's rows W1 .. STATE_END."""
    at = {k: getattr(t, k.upper()) - t.W1 for k in ("w1", "w2", "v1", "v2")}
    ends = {"w1": at["w2"], "w2": at["v1"], "v1": at["v2"], "v2": t.STATE_END - t.W1}
    return {k: f32(rows[at[k]:ends[k]]) for k in at}


def torch_step(state, x, labels):
    """One step in PyTorch from `state`: its loss and the state after it."""
    W1 = torch.tensor(state["w1"], requires_grad=True)
    W2 = torch.tensor(state["w2"], requires_grad=True)
    opt = torch.optim.SGD([W1, W2], lr=float(t.LR), momentum=float(t.MU))
    for w, v in ((W1, "v1"), (W2, "v2")):  # the momentum so far
        opt.state[w]["momentum_buffer"] = torch.tensor(state[v])
    h = rounded(torch.relu(torch.tensor(x) @ rounded(W1)))
    h = torch.cat([h[:, :t.H], torch.ones(t.B, 1), h[:, t.H + 1:]], dim=1)  # the bias's 1
    logits = rounded(h @ rounded(W2))[:, :t.C]
    loss = torch.nn.functional.cross_entropy(logits, torch.tensor(labels))
    loss.backward()
    opt.step()
    return loss.item(), {"w1": W1.detach().numpy(), "w2": W2.detach().numpy(),
                         "v1": opt.state[W1]["momentum_buffer"].numpy(),
                         "v2": opt.state[W2]["momentum_buffer"].numpy()}


def main():
    B = t.B
    host = np.fromfile(os.path.join(ROOT, "examples/training/mlp_step.host.bin"), "<u2").reshape(-1, N)
    out = np.fromfile(os.path.join(ROOT, "examples/training/mlp_step.expected.bin"), "<u2").reshape(-1, N)
    at = t.H_BATCH
    x = np.concatenate([bf16(host[at:at + B]), bf16(host[at + 2 * B:at + 3 * B])], axis=1)
    labels = np.argmax(bf16(host[at + 4 * B:at + 5 * B]), axis=1)
    state = split_state(host[t.W1:t.STATE_END])
    bad = []
    for s, (chip_loss, chip) in enumerate(chip_outputs(out, labels)):
        loss, ref = torch_step(state, x, labels)
        print(f"step {s + 1}: loss {chip_loss:.5f} on the chip, {loss:.5f} in PyTorch")
        if abs(chip_loss - loss) > 2.0 ** -5 * abs(loss):
            bad.append(f"step {s + 1}'s loss")
        for k in ("w1", "w2", "v1", "v2"):
            dc, dt = chip[k] - state[k], ref[k] - state[k]
            err, size = float(np.abs(dc - dt).max()), float(np.abs(dt).max())
            print(f"  {k}: largest change {size:.3g}, largest difference of the changes "
                  f"{err:.3g} ({err / size:.2%})")
            if err > 2.0 ** -5 * size:
                bad.append(f"step {s + 1}'s {k}")
        state = chip  # the next step from the chip's state, as the chip runs it
    if bad:
        sys.exit("mlp_step_vs_torch: the chip's step is not PyTorch's: " + ", ".join(bad))


if __name__ == "__main__":
    main()
