#!/usr/bin/python3
"""The chip's first training step against PyTorch's float32 autograd (issue 74's goal).

Runs `tpusim train --config tpu-v2 --gradients DIR` (--arch mlp: the perceptron of 1024
inputs, 256 ReLU units, 10 classes, batch 64; --arch lenet5: the course material's CNN,
conv 3 x 3 (6) + ReLU, 2 x 2 average pooling, conv 3 x 3 (16) + ReLU, pooling, dense 120,
84, 10; Adam, batch 64) and computes the same step in PyTorch
from the weights it wrote (NAME.*.initial.npy) on the same images (indices.npy, read from
the MNIST files and padded to 32 x 32 as tpusim does), in float32 with no rounding to
bfloat16 anywhere, and compares each gradient the chip computed (NAME.weights.npy,
NAME.bias.npy) with PyTorch's, relative to the largest of that tensor's, and the losses.

The chip rounds the weights, the inputs, the hidden activations, the logits and the backward
pass's tensors to bfloat16 (2^-9 relative each, a few of them on each path, sums of up to
1024 products): that moves a gradient by well under 1e-2 of its tensor's largest. But a
hidden unit whose input lies within that rounding of 0 can be on in the chip and off in
float32 (or the reverse), and then that image's whole part of the unit's gradient differs:
one image of 64 can be several percent of the largest gradient. So the check (the goal, 2e-2,
and 1e-2 for the loss) takes PyTorch's float32 backward pass through the ReLU pattern of a
bfloat16 forward pass (the inputs, weights and biases rounded, the sums in float32), and
prints the plain float32 comparison and the number of units that differ beside it. A wrong
formula (a transposed or missing term) moves a gradient by its own size.

--arch residual (a graph: two residual blocks of 3 x 3 "same" convolutions, global average
pooling) is compared with PyTorch's float32 autograd of the same graph, built from the
model.json tpusim wrote: with --config tpu-v2, the chip's first step at batch 8 (tpu-v2's
unified buffer holds its step up to batch 11) through the ReLU pattern of a bfloat16 forward
pass, as above; without it, the CPU's float32 step (`tpusim train --gradients` without
--config), plainly.

    tests/training/grads_vs_torch.py --tpusim build/tpusim [--arch lenet5|residual [--config tpu-v2]]
Exit 77 (skipped) without PyTorch or MNIST.
"""
import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GRADS = os.path.abspath(__file__)  # this script, for others to run
GOAL, LOSS_GOAL = 2e-2, 1e-2


def mnist_dir():
    for d in (os.environ.get("TPUSIM_DATA", ""), os.path.join(ROOT, "..", "shared", "data", "mnist"),
              os.path.join(ROOT, "data", "mnist")):
        if d and os.path.exists(os.path.join(d, "train-images-idx3-ubyte.gz")):
            return d
    return None


def images(d, indices):
    with gzip.open(os.path.join(d, "train-images-idx3-ubyte.gz")) as f:
        raw = np.frombuffer(f.read(), dtype=np.uint8, offset=16).reshape(-1, 28, 28)
    x = np.zeros((len(indices), 32, 32), dtype=np.float32)
    x[:, 2:30, 2:30] = raw[indices] / np.float32(255)
    with gzip.open(os.path.join(d, "train-labels-idx1-ubyte.gz")) as f:
        labels = np.frombuffer(f.read(), dtype=np.uint8, offset=8)[indices]
    return x.reshape(len(indices), -1), labels.astype(np.int64)


def layer(torch, h, w, b, kind, r):
    """One weighted layer's pre-activation: a valid convolution of NCHW maps (w as tpusim
    keeps it, kh x kw x c_in x c_out) or a dense layer, r applied to its operands."""
    if kind == "conv":
        return torch.nn.functional.conv2d(r(h), r(w).permute(3, 2, 0, 1), r(b))
    return r(h) @ r(w) + r(b)


def between(torch, h, i, kinds, r):
    """What follows weighted layer i's ReLU up to the next: the CNN's 2 x 2 average pooling
    (an odd side's last row and column left out) and, before the first dense layer, the
    flatten in (y, x, c) order, as tpusim's network has it."""
    if kinds[i] == "conv":
        h = r(torch.nn.functional.avg_pool2d(h, 2))
        if kinds[i + 1] == "dense":
            h = h.permute(0, 2, 3, 1).reshape(h.shape[0], -1)
    return h


def pre_activations(torch, x, params, kinds, rounded=False):
    """The hidden layers' inputs, in float32 (or with every operand and result rounded to
    bfloat16, the sums in float32)."""
    r = (lambda t: t.to(torch.bfloat16).to(torch.float32)) if rounded else (lambda t: t)  # noqa: E731
    h, zs = torch.tensor(x), []
    with torch.no_grad():
        for i, (w, b) in enumerate(params[:-1]):
            z = layer(torch, h, w, b, kinds[i], r)
            zs.append(z)
            h = between(torch, r(torch.relu(z)), i, kinds, r)
    return zs


def relu_masks(torch, x, params, kinds):
    return [z > 0 for z in pre_activations(torch, x, params, kinds, rounded=True)]


def step(torch, x, y, params, kinds, masks):
    """The loss; the parameters' gradients into .grad (through `masks` where given)."""
    for w, b in params:
        w.grad = b.grad = None
    h = torch.tensor(x)
    same = lambda t: t  # noqa: E731
    for i, (w, b) in enumerate(params):
        h = layer(torch, h, w, b, kinds[i], same)
        if i + 1 < len(params):
            h = h * masks[i].float() if masks is not None else torch.relu(h)
            h = between(torch, h, i, kinds, same)
    loss = torch.nn.functional.cross_entropy(h, torch.tensor(y))
    loss.backward()
    return loss.item()


def graph_layer(torch, l, h, p):
    """Layer l of a model.json (NCHW maps) on its inputs h (a list), its parameters p."""
    f = torch.nn.functional
    t = l["type"]
    if t in ("conv2d", "depthwise_conv2d"):
        w = p[0].permute(3, 2, 0, 1)
        groups = 1
        if t == "depthwise_conv2d":
            w, groups = p[0].permute(2, 3, 0, 1), h[0].shape[1]
        kh, kw = l["kernel"]
        pads = pooling_pads(l, h[0], kh, kw, l.get("stride", 1))
        return f.conv2d(f.pad(h[0], pads), w, p[1], stride=l.get("stride", 1), groups=groups)
    if t == "maxpool2d":
        return max_pool(torch, l, h[0])[0]
    if t == "avgpool2d":
        kh, kw = pool_size(l)
        pads = pooling_pads(l, h[0], kh, kw, l.get("stride", 2))
        return f.avg_pool2d(f.pad(h[0], pads), (kh, kw), l.get("stride", 2))
    if t == "global_avgpool2d":
        return h[0].mean(dim=(2, 3), keepdim=True)
    if t == "add":
        return h[0] + h[1]
    if t == "concat":
        return torch.cat(h, dim=1)
    if t == "flatten":
        return h[0]
    if t == "batch_norm":  # in training: the batch's statistics
        return f.batch_norm(h[0], None, None, p[0], p[1], training=True, eps=l["epsilon"])
    if t == "dense":  # the input flattened in (y, x, c) order, as tpusim's network has it
        x = h[0].permute(0, 2, 3, 1).reshape(h[0].shape[0], -1) if h[0].dim() == 4 else h[0]
        return x @ p[0] + p[1]
    sys.exit(f"grads_vs_torch: no PyTorch form for layer type {t}")


def pool_size(l):
    size = l.get("size", 2)
    return (size, size) if isinstance(size, int) else size


def max_pool(torch, l, x, route=None):
    """A max pooling of x (its padding -infinity) and the index in the padded map of each
    maximum PyTorch chose (the first); with `route`, each output the value at that index
    instead, so that its gradient goes where `route` says."""
    f = torch.nn.functional
    kh, kw = pool_size(l)
    padded = f.pad(x, pooling_pads(l, x, kh, kw, l.get("stride", 2)), value=-float("inf"))
    y, index = f.max_pool2d(padded, (kh, kw), l.get("stride", 2), return_indices=True)
    if route is None:
        return y, index
    return padded.flatten(2).gather(2, route.flatten(2)).view(route.shape), route


def pooling_pads(l, x, kh, kw, stride):
    """F.pad's (left, right, top, bottom) of a layer's padding in model.json: "same" (the
    extra row and column bottom and right, as TensorFlow), a list [top, left, bottom, right],
    or none."""
    pad = l.get("padding", "valid")
    if isinstance(pad, list):
        return (pad[1], pad[3], pad[0], pad[2])
    if pad != "same":
        return (0, 0, 0, 0)
    ph = max(0, (-(-x.shape[2] // stride) - 1) * stride + kh - x.shape[2])
    pw = max(0, (-(-x.shape[3] // stride) - 1) * stride + kw - x.shape[3])
    return (pw // 2, pw - pw // 2, ph // 2, ph - ph // 2)


def graph_loss(torch, model, x, y, params, masks=None, rounded=False):
    """The mean cross-entropy of a model.json's graph on images x (NCHW), params by layer;
    each ReLU through masks[layer] and each max pooling's gradient routed by masks[layer]
    where given. With `rounded`, every operand and result rounded to bfloat16 (the sums in
    float32). The pattern is returned too: the ReLUs' (z > 0), ReLU6's (0, 1 between 0 and 6,
    2 at 6 and above), the max poolings' choices."""
    r = (lambda t: t.to(torch.bfloat16).to(torch.float32)) if rounded else (lambda t: t)  # noqa: E731
    outs, pattern = {"input": r(torch.tensor(x))}, {}
    last = "input"
    for l in model["layers"]:
        p = [r(t) for t in params[l["name"]]] if l["name"] in params else None
        h = [outs[i] for i in l.get("inputs", [last])]  # a chain's layer reads the one before
        last = l["name"]
        if l["type"] == "maxpool2d":
            h, pattern[l["name"]] = max_pool(torch, l, h[0], masks and masks[l["name"]])
        else:
            h = r(graph_layer(torch, l, h, p))
        if l.get("activation") == "relu":
            pattern[l["name"]] = h > 0
            h = h * masks[l["name"]].float() if masks is not None else torch.relu(h)
        elif l.get("activation") == "relu6":  # the pattern: 0, 1 where it passes, 2 at 6
            pattern[l["name"]] = (h > 0).long() + (h >= 6).long()
            if masks is None:
                h = torch.nn.functional.relu6(h)
            else:
                m = masks[l["name"]]
                h = torch.where(m == 1, h, torch.where(m == 2, torch.full_like(h, 6), 0 * h))
        outs[l["name"]] = h
    logits = outs[model["layers"][-1]["name"]].reshape(x.shape[0], -1)
    return torch.nn.functional.cross_entropy(logits, torch.tensor(y)), pattern


def zero_gradients(model):
    """(layer, "bias") of each layer of a model.json that only batch_norm layers read."""
    readers, last = {}, "input"
    for l in model["layers"]:
        for i in l.get("inputs", [last]):
            readers.setdefault(i, []).append(l["type"])
        last = l["name"]
    return {(name, "bias") for name, kinds in readers.items()
            if kinds and all(k == "batch_norm" for k in kinds)}


def check_graph(torch, a, d, batch, config):
    """A graph's first step on the chip of `config` (or, None, on the CPU in float32: tpusim
    train --gradients) against PyTorch's float32 autograd of the same graph, built from its
    model.json: the chip's through the ReLU pattern of a bfloat16 forward pass (as the chains'
    above), the CPU's plainly."""
    with tempfile.TemporaryDirectory() as work:
        g, m = os.path.join(work, "grads"), os.path.join(work, "m")
        chip = ["--config", config] if config else []
        chip += ["--verify"] if config else []
        start = ["--model", a.model] if a.model else ["--arch", a.arch]
        subprocess.run([a.tpusim, "train", "--batch", str(batch), "--limit", str(batch),
                        "--epochs", "1", "--gradients", g, "--out", m, "-q"] + start + chip,
                       check=True)
        with open(os.path.join(g, "gradients.json")) as f:
            manifest = json.load(f)
        with open(os.path.join(m, "model.json")) as f:
            model = json.load(f)
        load = lambda name: np.load(os.path.join(g, name))  # noqa: E731
        x, y = images(d, load(manifest["indices"]))
        params = {l: [torch.tensor(load(manifest["initial"][l][k]), requires_grad=True)
                      for k in ("weights", "bias")] for l in manifest["initial"]}
        ours = {(l, k): load(manifest["gradients"][l][k]) for l in params
                for k in ("weights", "bias")}
        our_loss = float(load(manifest["loss"])[0])
    x = x.reshape(-1, 1, 32, 32)
    masks = None
    if config:
        with torch.no_grad():
            masks = graph_loss(torch, model, x, y, params, rounded=True)[1]
        plain = graph_loss(torch, model, x, y, params)[1]
        flips = sum(int((plain[k] != masks[k]).sum()) for k in masks)
        print(f"ReLUs on in float32 and off in bfloat16 or the reverse, and max poolings' "
              f"choices that differ: {flips} of {sum(v.numel() for v in masks.values())}")
        for l in model["layers"]:
            if l.get("activation") == "relu6":
                print(f"{l['name']}: ReLU6 bounds {int((masks[l['name']] == 2).sum())} of "
                      f"{masks[l['name']].numel()} values at 6")
    loss = graph_loss(torch, model, x, y, params, masks)[0]
    loss.backward()
    where = f"the chip's ({config}), through the bfloat16 ReLU pattern" if config else "the CPU's"
    print(f"float32: loss: {where} {our_loss:.6f}, PyTorch {loss.item():.6f}")
    worst = 0.0
    # The bias of a layer that only a batch normalization reads has a gradient of zero in
    # exact arithmetic (the normalization subtracts its channel's mean): both hold rounding
    # noise, measured against the largest gradient of the whole model instead of its own.
    largest = max(float(np.max(np.abs(t.grad.numpy()))) for p in params.values() for t in p)
    zero = zero_gradients(model)
    for l, (w, b) in params.items():
        for kind, t in (("weights", w), ("bias", b)):
            want = t.grad.numpy()
            scale, of = float(np.max(np.abs(want))), "the largest gradient"
            if (l, kind) in zero:
                scale, of = largest, "the model's largest gradient (zero in exact arithmetic)"
            err = float(np.max(np.abs(ours[l, kind] - want)) / scale)
            worst = max(worst, err)
            print(f"  {l}.{kind}: largest difference {err:.2e} of {of}")
    loss_err = abs(our_loss - loss.item()) / abs(loss.item())
    if worst > GOAL or loss_err > LOSS_GOAL:
        sys.exit(f"grads_vs_torch: beyond the goal ({worst:.2e} > {GOAL} or loss "
                 f"{loss_err:.2e} > {LOSS_GOAL})")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tpusim", default=os.path.join(ROOT, "build", "tpusim"))
    ap.add_argument("--arch", default="mlp", choices=["mlp", "lenet5", "residual"])
    ap.add_argument("--model", help="a model folder (a graph) to start from instead of --arch")
    ap.add_argument("--config", help="a graph: the chip (tpu-v2); without it, the CPU")
    ap.add_argument("--batch", type=int, help="a graph's batch (default: 8 on the chip, 64)")
    a = ap.parse_args()
    batch = 64
    try:
        import torch
    except ImportError:
        print("grads_vs_torch: skipped: PyTorch is not installed")
        sys.exit(77)
    d = mnist_dir()
    if d is None:
        print("grads_vs_torch: skipped: no MNIST data")
        sys.exit(77)
    if a.arch == "residual" or a.model:  # a graph: on the CPU, or the chip at a batch it holds
        return check_graph(torch, a, d, a.batch or (8 if a.config else batch), a.config)
    with tempfile.TemporaryDirectory() as work:
        g = os.path.join(work, "grads")
        subprocess.run([a.tpusim, "train", "--config", "tpu-v2", "--arch", a.arch, "--batch",
                        str(batch), "--limit", str(batch), "--epochs", "1", "--gradients", g,
                        "--out", os.path.join(work, "m"), "-q"], check=True)
        with open(os.path.join(g, "gradients.json")) as f:
            manifest = json.load(f)
        load = lambda name: np.load(os.path.join(g, name))  # noqa: E731
        x, y = images(d, load(manifest["indices"]))
        layers = list(manifest["initial"])
        kinds = ["conv" if load(manifest["initial"][l]["weights"]).ndim == 4 else "dense"
                 for l in layers]
        if kinds[0] == "conv":
            x = x.reshape(-1, 1, 32, 32)
        params = [(torch.tensor(load(manifest["initial"][l]["weights"]), requires_grad=True),
                   torch.tensor(load(manifest["initial"][l]["bias"]), requires_grad=True))
                  for l in layers]
        chip_loss = float(load(manifest["loss"])[0])
        grads = {(l, k): load(manifest["gradients"][l][k]) for l in layers
                 for k in ("weights", "bias")}
    masks = relu_masks(torch, x, params, kinds)
    worst, loss_err = 0.0, 0.0
    for name, mask in (("float32", None), ("float32 through the bf16 ReLU pattern", masks)):
        loss = step(torch, x, y, params, kinds, mask)
        print(f"{name}: loss: chip {chip_loss:.6f}, PyTorch {loss:.6f}")
        errs = {}
        for l, (w, b) in zip(layers, params):
            for kind, t in (("weights", w), ("bias", b)):
                want = t.grad.numpy()
                errs[l, kind] = float(np.max(np.abs(grads[l, kind] - want)) / np.max(np.abs(want)))
                print(f"  {l}.{kind}: largest difference {errs[l, kind]:.2e} of the largest gradient")
        if mask is not None:
            worst, loss_err = max(errs.values()), abs(chip_loss - loss) / abs(loss)
        else:
            flips = sum(int(((z > 0) != m).sum())
                        for z, m in zip(pre_activations(torch, x, params, kinds), masks))
            print(f"  ReLUs on in one and off in the other: {flips} of "
                  f"{sum(m.numel() for m in masks)}")
    if worst > GOAL or loss_err > LOSS_GOAL:
        sys.exit(f"grads_vs_torch: beyond the goal ({worst:.2e} > {GOAL} or loss "
                 f"{loss_err:.2e} > {LOSS_GOAL})")


if __name__ == "__main__":
    main()
