#!/usr/bin/python3
"""Exports transformer encoders from PyTorch to ONNX, unmodified, with inputs and PyTorch's
own outputs to check tpusim against (docs/transformers.md).

  encoder      torch.nn.TransformerEncoder, post-norm (PyTorch's default: LayerNorm after
               each residual add)
  encoder-pre  the same with norm_first=True (pre-norm: LayerNorm before attention and the
               feed-forward)

Each has --layers layers of width --width, --heads heads, a feed-forward of 4 x width with
GELU (--activation relu for ReLU), no dropout, batch_first=True (tpusim takes a batch of
N x T x X sequences), in eval() mode, exported at --opset (13 or 14) for a fixed
--batch x --tokens x --width input. The weights are seeded (torch.manual_seed), so the same
command writes the same files.

For each model NAME it writes OUT/NAME.onnx, OUT/NAME.inputs.npy (float32 N x T x X,
standard normal) and OUT/NAME.torch.npy (PyTorch's outputs, float32 N x T x X).

    /usr/bin/python3 models/onnx/make_transformers.py --out build/transformers
    /usr/bin/python3 models/onnx/make_transformers.py --out build/transformers --layers 4 \\
        --width 256 --heads 8 --tokens 128 --batch 4
"""
import argparse
import os

import numpy as np
import torch

MODELS = ("encoder", "encoder-pre")


def encoder(a, norm_first):
    layer = torch.nn.TransformerEncoderLayer(
        d_model=a.width, nhead=a.heads, dim_feedforward=4 * a.width, dropout=0.0,
        activation=a.activation, batch_first=True, norm_first=norm_first)
    return torch.nn.TransformerEncoder(layer, num_layers=a.layers, enable_nested_tensor=False)


def export(a, name):
    torch.manual_seed(a.seed)
    model = encoder(a, name == "encoder-pre").eval()
    x = torch.randn(a.batch, a.tokens, a.width)
    base = os.path.join(a.out, name)
    # Exported with autograd on: under torch.no_grad() PyTorch takes its fused inference
    # path (aten::_transformer_encoder_layer_fwd), which has no ONNX export.
    torch.onnx.export(model, x, base + ".onnx", opset_version=a.opset,
                      input_names=["tokens"], output_names=["out"])
    y = model(x).detach()
    np.save(base + ".inputs.npy", x.numpy())
    np.save(base + ".torch.npy", y.numpy())
    print(f"{base}.onnx: {a.layers} layers of width {a.width}, {a.heads} heads, "
          f"{a.batch} x {a.tokens} tokens")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="folder to write into (made if missing)")
    ap.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS))
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=16)
    ap.add_argument("--batch", type=int, default=3)
    ap.add_argument("--activation", choices=("gelu", "relu"), default="gelu")
    ap.add_argument("--opset", type=int, choices=(13, 14), default=13)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    if a.width % a.heads:
        ap.error(f"--width {a.width} is not a multiple of --heads {a.heads}")
    os.makedirs(a.out, exist_ok=True)
    for name in a.models:
        export(a, name)


if __name__ == "__main__":
    main()
