#!/usr/bin/python3
"""Exports ImageNet CNNs from PyTorch to ONNX, unmodified, with inputs and PyTorch's own
outputs to check tpusim against (docs/networks.md).

  resnet18, resnet50, mobilenet_v2   torchvision's (Debian's python3-torchvision), with the
                                     random weights torchvision initializes them with
                                     (nothing is downloaded)
  darknet19                          Darknet-19 (Redmon and Farhadi, "YOLO9000", 2016,
                                     Table 6) written here in PyTorch: 3 x 3 and 1 x 1
                                     convolutions with batch normalization, 2 x 2 max
                                     pooling, a 1 x 1 convolution to 1000 classes and global
                                     average pooling. Darknet's leaky ReLU (slope 0.1) is a
                                     ReLU here: tpusim's VPU has ReLU and ReLU6.

The weights are seeded (torch.manual_seed), so the same command writes the same files. The
batch-normalization statistics are random too (a random mean and a variance near one), so
that folding them into the convolutions is tested. Every model is put in eval() mode and
exported at opset 13 for a fixed 1 x 3 x SIZE x SIZE input.

For each model NAME it writes OUT/NAME.onnx and OUT/NAME.torch.npy: PyTorch's outputs
(float32 N x 1000) for OUT/inputs.npy, N seeded inputs (float32 N x 3 x SIZE x SIZE, standard
normal: what torchvision's models take after their normalization). With --softmax each model
ends in a softmax (its outputs the probabilities), as `tpusim train` takes a classifier
(docs/training.md: ResNet-50's training step on tpu-v3).

    /usr/bin/python3 models/onnx/make_imagenet.py --out build/imagenet
    /usr/bin/python3 models/onnx/make_imagenet.py --out build/imagenet --models resnet18 --images 2
    /usr/bin/python3 models/onnx/make_imagenet.py --out build/train --models resnet50 --softmax
"""
import argparse
import os

import numpy as np
import torch
import torchvision
from torch import nn

MODELS = ("resnet18", "resnet50", "mobilenet_v2", "darknet19")


def conv_bn(cin, cout, k):
    return [nn.Conv2d(cin, cout, k, padding=k // 2, bias=False), nn.BatchNorm2d(cout),
            nn.ReLU(inplace=True)]


class Darknet19(nn.Module):
    """Darknet-19's classifier (YOLO9000, Table 6), with ReLU for leaky ReLU."""

    # (filters, kernel) per convolution, "M" for 2 x 2 max pooling of stride 2.
    LAYERS = [(32, 3), "M", (64, 3), "M", (128, 3), (64, 1), (128, 3), "M",
              (256, 3), (128, 1), (256, 3), "M",
              (512, 3), (256, 1), (512, 3), (256, 1), (512, 3), "M",
              (1024, 3), (512, 1), (1024, 3), (512, 1), (1024, 3)]

    def __init__(self, classes=1000):
        super().__init__()
        layers, cin = [], 3
        for spec in self.LAYERS:
            if spec == "M":
                layers.append(nn.MaxPool2d(2, 2))
            else:
                layers += conv_bn(cin, spec[0], spec[1])
                cin = spec[0]
        layers += [nn.Conv2d(cin, classes, 1), nn.AdaptiveAvgPool2d(1), nn.Flatten()]
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x)


def make(name):
    if name == "darknet19":
        return Darknet19()
    return getattr(torchvision.models, name)()


def randomize_batch_norm(model, gen):
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            c = m.num_features
            m.running_mean.copy_(0.1 * torch.randn(c, generator=gen))
            m.running_var.copy_(0.5 + torch.rand(c, generator=gen))
            m.weight.data.copy_(0.5 + torch.rand(c, generator=gen))
            m.bias.data.copy_(0.1 * torch.randn(c, generator=gen))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="folder to write to")
    ap.add_argument("--models", default=",".join(MODELS), help="comma separated")
    ap.add_argument("--images", type=int, default=8, help="inputs in inputs.npy")
    ap.add_argument("--size", type=int, default=224, help="input height and width")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--softmax", action="store_true",
                    help="end each model in a softmax (a classifier for tpusim train)")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    gen = torch.Generator().manual_seed(a.seed)
    x = torch.randn(a.images, 3, a.size, a.size, generator=gen)
    np.save(os.path.join(a.out, "inputs.npy"), x.numpy().astype(np.float32))
    torch.set_num_threads(2)
    for name in a.models.split(","):
        if name not in MODELS:
            ap.error(f"unknown model {name} (known: {', '.join(MODELS)})")
        torch.manual_seed(a.seed)
        model = make(name)
        with torch.no_grad():
            randomize_batch_norm(model, gen)
        if a.softmax:
            model = nn.Sequential(model, nn.Softmax(dim=1))
        model.eval()
        path = os.path.join(a.out, name + ".onnx")
        torch.onnx.export(model, x[:1], path + ".tmp", opset_version=13,
                          input_names=["input"], output_names=["output"])
        os.replace(path + ".tmp", path)
        with torch.no_grad():
            y = model(x).numpy().astype(np.float32)
        np.save(os.path.join(a.out, name + ".torch.npy"), y)
        print(f"{path}: {sum(p.numel() for p in model.parameters()):,} parameters; "
              f"outputs for {a.images} inputs in {name}.torch.npy")


if __name__ == "__main__":
    main()
