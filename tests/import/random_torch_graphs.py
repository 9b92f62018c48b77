#!/usr/bin/python3
"""Differential test of `tpusim import` against PyTorch on random graphs.

Builds N random small networks with PyTorch (convolutions of any kernel, stride and
padding, depthwise ones, batch normalization, ReLU and ReLU6, max and average pooling with
padding, global average pooling, residual adds, concats, flatten and linear layers; and one
graph in 8 an LSTM over sequences, read at its last step as h[-1] or out[:, -1], batch
first or not, then maybe a linear layer), exports
each to ONNX (opset 13), imports it with `tpusim import`, runs the fp32 model on the CPU
(`tpusim infer --backend cpu-fp32`) on the same seeded inputs, and compares the outputs with
PyTorch's: the largest difference must be at most 1e-4 of the largest output. Every operator
the graphs draw is one docs/import.md says tpusim imports, so the bound on refusals is zero:
a graph that tpusim refuses (exit 2, with its message) fails the run like any other failure,
and keeps the graph's folder (issue 71: an importer that refused everything passed).

    tests/import/random_torch_graphs.py --tpusim build/tpusim [--graphs 200] [--seed 1] [--keep DIR]

Exits 77 (ctest: skipped) when PyTorch is not installed.
"""
import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import torch
    from torch import nn
except ImportError:
    print("SKIP: PyTorch is not installed (apt-get install python3-torch)")
    sys.exit(77)

TOLERANCE = 1e-4


class Residual(nn.Module):
    def __init__(self, body):
        super().__init__()
        self.body = body

    def forward(self, x):
        return x + self.body(x)


class Cat(nn.Module):
    def __init__(self, a, b):
        super().__init__()
        self.a, self.b = a, b

    def forward(self, x):
        return torch.cat([self.a(x), self.b(x)], 1)


def activation(rng):
    return rng.choice([[], [nn.ReLU()], [nn.ReLU6()]])


def conv_block(rng, c, h, w):
    """A convolution (maybe depthwise, maybe with batch normalization) and its output shape,
    or None when no kernel fits."""
    k = rng.randint(1, min(5, h + 2, w + 2))
    pad = rng.randint(0, k - 1)
    stride = rng.randint(1, 3)
    oh, ow = (h + 2 * pad - k) // stride + 1, (w + 2 * pad - k) // stride + 1
    if oh < 1 or ow < 1:
        return None
    depthwise = rng.random() < 0.2
    out = c if depthwise else rng.randint(1, 24)
    layers = [nn.Conv2d(c, out, k, stride=stride, padding=pad, groups=c if depthwise else 1)]
    if rng.random() < 0.3:
        layers.append(nn.BatchNorm2d(out))
    return layers + activation(rng), (out, oh, ow), f"{'dw' if depthwise else ''}conv{k}/{stride}p{pad} {out}"


def pool_block(rng, c, h, w):
    if rng.random() < 0.2:
        return [nn.AdaptiveAvgPool2d(1)], (c, 1, 1), "global avgpool"
    k = rng.randint(1, min(3, h, w))
    stride = rng.randint(1, 3)
    pad = rng.randint(0, k // 2)
    oh, ow = (h + 2 * pad - k) // stride + 1, (w + 2 * pad - k) // stride + 1
    if oh < 1 or ow < 1:
        return None
    if rng.random() < 0.5:
        return [nn.MaxPool2d(k, stride, pad)], (c, oh, ow), f"maxpool{k}/{stride}p{pad}"
    return [nn.AvgPool2d(k, stride, pad)], (c, oh, ow), f"avgpool{k}/{stride}p{pad}"


def residual_block(rng, c, h, w):
    k = rng.choice([1, 3])
    body = nn.Sequential(nn.Conv2d(c, c, k, padding=k // 2), *activation(rng))
    return [Residual(body)] + activation(rng), (c, h, w), f"residual(conv{k})"


def cat_block(rng, c, h, w):
    a, b = rng.randint(1, 12), rng.randint(1, 12)
    return ([Cat(nn.Conv2d(c, a, 1), nn.Sequential(nn.Conv2d(c, b, 3, padding=1), nn.ReLU()))],
            (a + b, h, w), f"cat({a}, {b})")


class LastStep(nn.Module):
    """nn.LSTM read at its last step, as users write it: h[-1], out[:, -1] (out[-1] when not
    batch first); then `head`."""

    def __init__(self, lstm, read, head):
        super().__init__()
        self.lstm, self.read, self.head = lstm, read, head

    def forward(self, x):
        out, (h, _) = self.lstm(x)
        if self.read == "h":
            y = h[-1]
        else:
            y = out[:, -1] if self.lstm.batch_first else out[-1]
        return self.head(y)


def sequence_graph(rng):
    """A random LSTM model, its input shape (steps, inputs), whether it takes its batch
    first, and a description."""
    steps, inputs, hidden = rng.randint(1, 12), rng.randint(1, 10), rng.randint(1, 24)
    batch_first, read = rng.random() < 0.5, rng.choice(["h", "out"])
    head = [nn.Linear(hidden, rng.randint(1, 10))] + activation(rng) if rng.random() < 0.7 else []
    model = LastStep(nn.LSTM(inputs, hidden, batch_first=batch_first), read, nn.Sequential(*head))
    text = (f"{steps} steps x {inputs} -> lstm {hidden} ({'batch first' if batch_first else 'T x N'}"
            f", {read}[-1]){' -> linear' if head else ''}")
    return model, (steps, inputs), batch_first, text


def random_graph(rng):
    """A random nn.Sequential, its input shape (c, h, w) and a description."""
    c, h, w = rng.randint(1, 8), rng.randint(2, 14), rng.randint(2, 14)
    shape, layers, text = (c, h, w), [], [f"{c}x{h}x{w}"]
    for _ in range(rng.randint(1, 5)):
        make = rng.choice([conv_block, conv_block, pool_block, residual_block, cat_block])
        block = make(rng, *shape)
        if block is None:
            continue
        more, shape, what = block
        layers += more
        text.append(what)
    if rng.random() < 0.7:
        units = rng.randint(1, 20)
        layers += [nn.Flatten(), nn.Linear(shape[0] * shape[1] * shape[2], units)]
        layers += activation(rng)
        text.append(f"linear {units}")
    if not layers:
        layers = [nn.Conv2d(c, 4, 1)]
        text.append("conv1 4")
    return nn.Sequential(*layers), (c, h, w), " -> ".join(text)


def randomize_batch_norm(model, gen):
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            n = m.num_features
            m.running_mean.copy_(torch.randn(n, generator=gen) * 0.5)
            m.running_var.copy_(torch.rand(n, generator=gen) + 0.5)
            m.weight.data.copy_(torch.rand(n, generator=gen) + 0.5)
            m.bias.data.copy_(torch.randn(n, generator=gen) * 0.2)


def check(tpusim, index, seed, work):
    """(status, text): status 'ok', 'refused' or 'failed'."""
    rng = random.Random(seed * 100003 + index)
    torch.manual_seed(seed * 100003 + index)
    gen = torch.Generator().manual_seed(seed * 100003 + index)
    if rng.random() < 0.125:
        model, (steps, inputs), batch_first, text = sequence_graph(rng)
        x = torch.randn(4, steps, inputs, generator=gen)  # tpusim's inputs: N x T x X
        torch_x = x if batch_first else x.transpose(0, 1)
        example = torch_x[:1] if batch_first else torch_x[:, :1]
    else:
        model, (c, h, w), text = random_graph(rng)
        with torch.no_grad():
            randomize_batch_norm(model, gen)
        x = torch.randn(4, c, h, w, generator=gen)
        torch_x, example = x, x[:1]
    model.eval()
    onnx = os.path.join(work, "graph.onnx")
    torch.onnx.export(model, example, onnx, opset_version=13, input_names=["input"],
                      output_names=["output"])
    with torch.no_grad():
        y = model(torch_x)
    if y.dim() == 4:  # a map: tpusim's outputs are channels last (docs/import.md, "Layout")
        y = y.permute(0, 2, 3, 1)
    want = y.reshape(4, -1).numpy()
    np.save(os.path.join(work, "inputs.npy"), x.numpy())
    np.save(os.path.join(work, "torch.npy"), want)
    imported = os.path.join(work, "model")
    done = subprocess.run([tpusim, "import", onnx, "--out", imported, "-q"],
                          capture_output=True, text=True)
    if done.returncode == 2:
        return "refused", f"{text}: refused: {done.stderr.strip().splitlines()[-1]}"
    if done.returncode != 0:
        return "failed", f"{text}: tpusim import exited {done.returncode}: {done.stderr.strip()}"
    logits = os.path.join(work, "tpusim.npy")
    done = subprocess.run([tpusim, "infer", "--backend", "cpu-fp32", "--model", imported,
                           "--inputs", os.path.join(work, "inputs.npy"), "--logits", logits, "-q"],
                          capture_output=True, text=True)
    if done.returncode != 0:
        return "failed", f"{text}: tpusim infer exited {done.returncode}: {done.stderr.strip()}"
    got = np.load(logits).reshape(4, -1)
    if got.shape != want.shape:
        return "failed", f"{text}: tpusim gives {got.shape} outputs, PyTorch {want.shape}"
    error = float(np.abs(got - want).max() / max(float(np.abs(want).max()), 1e-6))
    if error > TOLERANCE:
        return "failed", f"{text}: largest difference {error:.2e} of the largest output"
    return "ok", f"{text}: {error:.1e}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tpusim", default="build/tpusim", help="the tpusim to test")
    ap.add_argument("--graphs", type=int, default=200, help="random graphs to try")
    ap.add_argument("--seed", type=int, default=1, help="seed of the graphs")
    ap.add_argument("--keep", default="import-mismatches",
                    help="folder for the graphs that fail (each its ONNX file, inputs, outputs)")
    a = ap.parse_args()
    if not os.access(a.tpusim, os.X_OK):
        sys.exit(f"random_torch_graphs: {a.tpusim} is not an executable tpusim (--tpusim)")
    torch.set_num_threads(1)
    counts, failures = {"ok": 0, "refused": 0, "failed": 0}, []
    for i in range(a.graphs):
        with tempfile.TemporaryDirectory(prefix="tpusim-import-") as work:
            status, text = check(a.tpusim, i, a.seed, work)
            counts[status] += 1
            if status != "ok":
                keep = os.path.join(a.keep, f"seed{a.seed}-graph{i}")
                shutil.rmtree(keep, ignore_errors=True)
                shutil.copytree(work, keep)
                failures.append(f"graph {i}: {text} (kept in {keep})")
        print(f"\r{i + 1}/{a.graphs} graphs", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    print(f"random_torch_graphs: {a.graphs} graphs (seed {a.seed}): {counts['ok']} within "
          f"{TOLERANCE:g} of PyTorch, {counts['refused']} refused, {counts['failed']} failed")
    for f in failures:
        print(f"  FAILED {f}")
    return 1 if failures else 0  # refusals among them


if __name__ == "__main__":
    sys.exit(main())
