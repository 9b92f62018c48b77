#!/usr/bin/python3
"""Trains and exports models/onnx/torch_cnn.onnx: a small MNIST CNN made with PyTorch, the
test model of `tpusim import` (docs/import.md).

It has what real exports have: convolutions with BatchNormalization (exported unfolded, so
the importer folds them), a depthwise 3 x 3 convolution of stride 2 with ReLU6 (Clip 0..6),
a 1 x 1 convolution, 2 x 2 max pooling, a 3 x 3 convolution of stride 2, 2 x 2 average
pooling of stride 1, Flatten of a 3 x 3 x 32 map (NCHW order, which tpusim reorders), two
Linear layers, Dropout and a final Softmax.

Inputs are what tpusim feeds a model with preprocess mnist32: the 28 x 28 image padded by 2
to 32 x 32, pixel / 255. Besides the model it writes PyTorch's own outputs for the first 100
test images (logits, float32 100 x 10, and predicted classes, int32), which the import test
compares with tpusim's fp32 network.

    /usr/bin/python3 models/onnx/make_torch_cnn.py            # about 2 minutes on 2 cores
"""
import argparse
import gzip
import os

import numpy as np
import torch
from torch import nn


def load_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def mnist32(images):
    """28 x 28 uint8 images -> N x 1 x 32 x 32 float32, as tpusim's preprocess mnist32."""
    x = np.zeros((images.shape[0], 1, 32, 32), dtype=np.float32)
    x[:, 0, 2:30, 2:30] = images.astype(np.float32) / 255.0
    return torch.from_numpy(x)


class TorchCnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
            nn.Conv2d(16, 16, 3, stride=2, padding=1, groups=16, bias=False),
            nn.BatchNorm2d(16), nn.ReLU6(),                       # 16 x 16 x 16
            nn.Conv2d(16, 32, 1), nn.BatchNorm2d(32), nn.ReLU(),  # 16 x 16 x 32
            nn.MaxPool2d(2),                                      # 8 x 8 x 32
            nn.Conv2d(32, 32, 3, stride=2, padding=1), nn.ReLU(),  # 4 x 4 x 32
            nn.AvgPool2d(2, stride=1),                            # 3 x 3 x 32
        )
        self.classifier = nn.Sequential(
            nn.Flatten(), nn.Linear(288, 64), nn.ReLU(), nn.Dropout(0.2), nn.Linear(64, 10),
            nn.Softmax(dim=1))

    def forward(self, x):
        return self.classifier(self.features(x))


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mnist", default=os.path.join(here, "../../../shared/data/mnist"),
                   help="folder with the MNIST .gz files")
    p.add_argument("--out", default=here, help="where to write the model and predictions")
    p.add_argument("--epochs", type=int, default=2)
    a = p.parse_args()
    torch.manual_seed(1)
    torch.set_num_threads(2)
    xs = mnist32(load_idx(os.path.join(a.mnist, "train-images-idx3-ubyte.gz")))
    ys = torch.from_numpy(load_idx(os.path.join(a.mnist, "train-labels-idx1-ubyte.gz")).astype(np.int64))
    xt = mnist32(load_idx(os.path.join(a.mnist, "t10k-images-idx3-ubyte.gz")))
    yt = load_idx(os.path.join(a.mnist, "t10k-labels-idx1-ubyte.gz"))
    model = TorchCnn()
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    for epoch in range(a.epochs):
        model.train()
        perm = torch.randperm(xs.shape[0])
        for i in range(0, xs.shape[0], 64):
            idx = perm[i:i + 64]
            probs = model(xs[idx])
            loss = nn.functional.nll_loss(torch.log(probs + 1e-12), ys[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
        model.eval()
        with torch.no_grad():
            pred = torch.cat([model(xt[i:i + 1000]).argmax(1) for i in range(0, 10000, 1000)])
        print(f"epoch {epoch + 1}: test accuracy {100.0 * (pred.numpy() == yt).mean():.2f} %")
    model.eval()
    # Export without PyTorch's own BatchNormalization folding, so the file holds the
    # BatchNormalization nodes a user's export has, and tpusim's importer folds them.
    torch.onnx.export(model, xt[:1], os.path.join(a.out, "torch_cnn.onnx"),
                      input_names=["image"], output_names=["probs"],
                      dynamic_axes={"image": {0: "batch"}, "probs": {0: "batch"}},
                      training=torch.onnx.TrainingMode.PRESERVE, do_constant_folding=False,
                      opset_version=13)
    with torch.no_grad():
        logits = model.classifier[:-1](model.features(xt[:100])).numpy().astype(np.float32)
    np.save(os.path.join(a.out, "torch_cnn.logits.npy"), logits)
    np.save(os.path.join(a.out, "torch_cnn.predictions.npy"), logits.argmax(1).astype(np.int32))
    print("wrote torch_cnn.onnx, torch_cnn.logits.npy, torch_cnn.predictions.npy in", a.out)


if __name__ == "__main__":
    main()
