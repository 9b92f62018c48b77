#!/usr/bin/python3
"""Exports transformer encoders from PyTorch to ONNX, unmodified, with inputs and PyTorch's
own outputs to check tpusim against (docs/transformers.md).

  encoder      torch.nn.TransformerEncoder, post-norm (PyTorch's default: LayerNorm after
               each residual add)
  encoder-pre  the same with norm_first=True (pre-norm: LayerNorm before attention and the
               feed-forward)
  vit          torchvision's VisionTransformer (the class of vit_b_16) with the same layers,
               width and heads, on --batch 3 x --image x --image images in patches of
               --patch, 10 classes
  gpt          a GPT-style decoder written here: token embeddings, learned position
               embeddings, --layers pre-norm blocks of causal self-attention (the causal
               mask a buffer of 0 and -inf added to the scores, so it exports at opset 13)
               and a GELU feed-forward, a final LayerNorm and a language-model head to a
               vocabulary of --vocabulary; its input is N x T int64 token ids
  vit_b_16     torchvision's vit_b_16 itself (86 M parameters, 224 x 224, 1000 classes)

torchvision initializes a ViT's class token and classifier to zeros, which would make every
output 0 and hide any error: both are drawn from a normal distribution here.

Each has --layers layers of width --width, --heads heads, a feed-forward of 4 x width with
GELU (--activation relu for ReLU), no dropout, batch_first=True (tpusim takes a batch of
N x T x X sequences), in eval() mode, exported at --opset (13 or 14) for a fixed
--batch x --tokens x --width input. The weights are seeded (torch.manual_seed), so the same
command writes the same files.

For each model NAME it writes OUT/NAME.onnx, OUT/NAME.inputs.npy (float32, standard normal:
N x T x X sequences, or N x 3 x S x S images for a ViT; a GPT's token ids, as float32) and
OUT/NAME.torch.npy (PyTorch's outputs: N x T x X, N x classes, or a GPT's N x T x
vocabulary logits).

    /usr/bin/python3 models/onnx/make_transformers.py --out build/transformers
    /usr/bin/python3 models/onnx/make_transformers.py --out build/transformers --layers 4 \\
        --width 256 --heads 8 --tokens 128 --batch 4
"""
import argparse
import math
import os

import numpy as np
import torch
import torchvision

MODELS = ("encoder", "encoder-pre", "vit", "gpt", "vit_b_16")
DEFAULT = ("encoder", "encoder-pre", "vit", "gpt")


class Block(torch.nn.Module):
    """A pre-norm decoder block: causal self-attention and a GELU feed-forward."""

    def __init__(self, width, heads, tokens):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = torch.nn.LayerNorm(width), torch.nn.LayerNorm(width)
        self.qkv, self.proj = torch.nn.Linear(width, 3 * width), torch.nn.Linear(width, width)
        self.fc, self.out = torch.nn.Linear(width, 4 * width), torch.nn.Linear(4 * width, width)
        self.register_buffer("mask", torch.full((tokens, tokens), float("-inf")).triu(1))

    def forward(self, x):
        n, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(n, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        scores = q @ k.transpose(-2, -1) / math.sqrt(d // self.heads) + self.mask[:t, :t]
        y = (scores.softmax(-1) @ v).transpose(1, 2).reshape(n, t, d)
        x = x + self.proj(y)
        return x + self.out(torch.nn.functional.gelu(self.fc(self.ln2(x))))


class Gpt(torch.nn.Module):
    def __init__(self, a):
        super().__init__()
        self.wte = torch.nn.Embedding(a.vocabulary, a.width)
        self.wpe = torch.nn.Parameter(0.02 * torch.randn(a.tokens, a.width))
        self.blocks = torch.nn.Sequential(*(Block(a.width, a.heads, a.tokens)
                                            for _ in range(a.layers)))
        self.ln = torch.nn.LayerNorm(a.width)
        self.head = torch.nn.Linear(a.width, a.vocabulary, bias=False)

    def forward(self, tokens):
        x = self.wte(tokens) + self.wpe[:tokens.shape[1]]
        return self.head(self.ln(self.blocks(x)))


def encoder(a, norm_first):
    layer = torch.nn.TransformerEncoderLayer(
        d_model=a.width, nhead=a.heads, dim_feedforward=4 * a.width, dropout=0.0,
        activation=a.activation, batch_first=True, norm_first=norm_first)
    return torch.nn.TransformerEncoder(layer, num_layers=a.layers, enable_nested_tensor=False)


def vit(a, name):
    if name == "vit_b_16":
        model = torchvision.models.vit_b_16()
    else:
        model = torchvision.models.vision_transformer.VisionTransformer(
            image_size=a.image, patch_size=a.patch, num_layers=a.layers, num_heads=a.heads,
            hidden_dim=a.width, mlp_dim=4 * a.width, num_classes=10)
    with torch.no_grad():
        model.heads.head.weight.normal_(0, 0.02)
        model.class_token.normal_(0, 1)
    return model


def export(a, name):
    torch.manual_seed(a.seed)
    if name == "gpt":
        model = Gpt(a).eval()
        x = torch.randint(0, a.vocabulary, (a.batch, a.tokens))
    elif name.startswith("vit"):
        model = vit(a, name).eval()
        size = 224 if name == "vit_b_16" else a.image
        x = torch.randn(a.batch, 3, size, size)
    else:
        model = encoder(a, name == "encoder-pre").eval()
        x = torch.randn(a.batch, a.tokens, a.width)
    base = os.path.join(a.out, name)
    # Exported with autograd on: under torch.no_grad() PyTorch takes its fused inference
    # path (aten::_transformer_encoder_layer_fwd), which has no ONNX export.
    torch.onnx.export(model, x, base + ".onnx", opset_version=a.opset,
                      input_names=["tokens"], output_names=["out"])
    y = model(x).detach()
    np.save(base + ".inputs.npy", x.numpy().astype(np.float32))
    np.save(base + ".torch.npy", y.numpy())
    print(f"{base}.onnx: {list(x.shape)} in, {list(y.shape)} out")


def parser():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="folder to write into (made if missing)")
    ap.add_argument("--models", nargs="+", choices=MODELS, default=list(DEFAULT))
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=16)
    ap.add_argument("--batch", type=int, default=3)
    ap.add_argument("--image", type=int, default=32, help="a vit's image size")
    ap.add_argument("--patch", type=int, default=8, help="a vit's patch size")
    ap.add_argument("--vocabulary", type=int, default=100, help="a gpt's")
    ap.add_argument("--activation", choices=("gelu", "relu"), default="gelu")
    ap.add_argument("--opset", type=int, choices=(13, 14), default=13)
    ap.add_argument("--seed", type=int, default=1)
    return ap


def main():
    ap = parser()
    a = ap.parse_args()
    if a.width % a.heads:
        ap.error(f"--width {a.width} is not a multiple of --heads {a.heads}")
    os.makedirs(a.out, exist_ok=True)
    for name in a.models:
        export(a, name)


if __name__ == "__main__":
    main()
