"""A PyTorch module on the simulated TPU in one call: tpusim.from_torch exports it to ONNX,
imports it (quantized for an int8 chip, calibrated on the example input; fp32 for a bf16
one), runs the example input, checks every output bit for bit against the CPU reference and
compares it with the module's own (docs/python.md).

    PYTHONPATH=build/python /usr/bin/python3 examples/python/torch_module.py
    PYTHONPATH=build/python /usr/bin/python3 examples/python/torch_module.py --resnet18 --images 2
"""

import argparse
import sys
import time

try:
    import torch
except ImportError:  # Debian's python3-torch (scripts/install-deps)
    print("skipped: PyTorch is not installed (apt-get install python3-torch)")
    sys.exit(77)

import tpusim


class SmallNet(torch.nn.Module):
    """A small CNN on 3 x 32 x 32 images: two convolutions, max pooling, a residual add,
    global average pooling (of 8 x 8: the chip's window registers take kernels up to 15),
    a classifier."""

    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 16, 3, padding=1)
        self.conv2 = torch.nn.Conv2d(16, 16, 3, padding=1)
        self.pool = torch.nn.MaxPool2d(2)
        self.head = torch.nn.Linear(16, 10)

    def forward(self, x):
        x = self.pool(torch.relu(self.conv1(x)))
        x = self.pool(torch.relu(x + self.conv2(x)))
        return self.head(torch.flatten(torch.nn.functional.adaptive_avg_pool2d(x, 1), 1))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--resnet18", action="store_true",
                        help="torchvision's resnet18 (random weights) on 224 x 224 images")
    parser.add_argument("--images", type=int, default=8, help="example inputs")
    parser.add_argument("--configs", default="small-16,tpu-v2", help="chip presets, comma-separated")
    args = parser.parse_args()

    torch.manual_seed(0)
    if args.resnet18:
        import torchvision
        module, side = torchvision.models.resnet18(), 224
    else:
        module, side = SmallNet(), 32
    x = torch.randn(args.images, 3, side, side)
    for config in args.configs.split(","):
        start = time.perf_counter()
        outputs, report = tpusim.from_torch(module, x, config=config)
        seconds = time.perf_counter() - start
        t = report["torch"]
        print(f"{type(module).__name__} on {config} ({report['config']['dtype']}): "
              f"{report['cycles'] / report['images']:,.0f} cycles per input, bit-exact "
              f"{report['bit_exact']}, PyTorch's top-1 on {t['top1_agree']} of {t['inputs']}, "
              f"largest difference {t['max_abs_diff']:.4g} of {t['max_abs_output']:.4g}; "
              f"{seconds:.1f} s")
        if not report["bit_exact"]:
            raise SystemExit("the chip differs from the CPU reference")


if __name__ == "__main__":
    main()
