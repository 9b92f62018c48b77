#!/usr/bin/python3
"""Exports a small PyTorch network whose two residual adds no convolution's activate can
take (both inputs of each are read by the other add too), the measurement of
docs/compiler.md's "Adds on the vector unit": on a bf16 chip they run on the float32 vector
unit, on an int8 chip through the identity tile. Random weights (seed 0), input 3 x 28 x 28.

    /usr/bin/python3 models/onnx/make_standalone_adds.py --out adds.onnx
    tpusim import adds.onnx --out adds
    tpusim run --model adds -c tpu-v3 --engine fast --synthetic 8 --batch 8
"""
import argparse
import os

import torch
from torch import nn


class StandaloneAdds(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 64, 3, padding=1)
        self.c2 = nn.Conv2d(64, 64, 1)
        self.c3 = nn.Conv2d(64, 64, 1)
        self.c4 = nn.Conv2d(128, 128, 3, padding=1)
        self.fc = nn.Linear(128, 10)

    def forward(self, x):
        a = torch.relu(self.c1(x))
        b, c = self.c2(a), torch.relu(self.c3(a))
        d, e = b + c, torch.relu(c + b)  # each input read by both adds
        f = torch.relu(self.c4(torch.cat([d, e], 1)))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(f, 1), 1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="standalone_adds.onnx", help="the .onnx file to write")
    a = ap.parse_args()
    torch.manual_seed(0)
    model = StandaloneAdds().eval()
    torch.onnx.export(model, torch.randn(1, 3, 28, 28), a.out + ".tmp", opset_version=13)
    os.replace(a.out + ".tmp", a.out)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
