#!/usr/bin/python3
"""A network written in PyTorch, trained on the chip: `tpusim import`, then
`tpusim train --model DIR --config tpu-v2` (docs/training.md, "A network from PyTorch").

The network has what the course's CNN does not: ResNet's stem pooling (3 x 3 max pooling of
stride 2 padded 1) and a 2 x 2 max pooling, between 3 x 3 "same" convolutions, the second
with MobileNet's ReLU6 (its weights scaled by 24, so that it bounds values at 6); a linear
layer of the 10 classes and a softmax. Two more networks go the same way: an MLP (the
images flattened into two linear layers: on the chip the first reads the images
themselves), and an average pooling (3 x 3 of stride 2 padded 1) between padded
convolutions, whose 16 x 16 map a linear layer reads whole; and a 16 x 16 x 16 map pooled
globally; and ResNet's convolutions each followed by BatchNorm2d (exported for training,
imported with --keep-batchnorm), trained on the chip and the CPU, and folded afterwards;
and ResNet-50's bottleneck block (1 x 1, 3 x 3, 1 x 1 convolutions added to its input) on
maps of 256 channels: on tpu-v2 two channel blocks of 128.
Each is exported with torch.onnx.export for an input of 1 x 1 x 32 x 32 (the
data sets' images: 28 x 28 padded by 2), imported, and its first step's
gradients (tpusim train --model DIR --gradients) compared with PyTorch's autograd of the
graph tpusim imported, from the same weights and images, by grads_vs_torch.py --model:

- on tpu-v2 at batch 4 (its unified buffer holds this step up to batch 6), with --verify
  (the step equals the CPU reference's bit for bit), through the ReLU pattern and the max
  poolings' choices of a bfloat16 forward pass, within 2e-2 of each tensor's largest;
- on the CPU (float32), plainly, within 2e-2 too (it lands within 1e-6).

And a model the trainers do not take is refused with a line naming the layer.

    tests/training/train_torch_model.py --tpusim build/tpusim
Exit 77 (skipped) without PyTorch or MNIST.
"""
import argparse
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from grads_vs_torch import GRADS, mnist_dir  # noqa: E402


def network(torch):
    nn = torch.nn
    torch.manual_seed(3)
    net = nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(),
        nn.MaxPool2d(3, stride=2, padding=1),  # 16 x 16
        nn.Conv2d(8, 8, 3, padding=1), nn.ReLU6(),
        nn.MaxPool2d(2),  # 8 x 8
        nn.Flatten(), nn.Linear(8 * 8 * 8, 10), nn.Softmax(dim=1))
    with torch.no_grad():  # so that ReLU6 bounds some of its values at 6
        net[3].weight *= 24
    return net


def mlp(torch):
    """The simplest network a user writes: the images flattened into two linear layers (the
    first reads the images themselves on the chip)."""
    nn = torch.nn
    torch.manual_seed(4)
    return nn.Sequential(nn.Flatten(), nn.Linear(32 * 32, 64), nn.ReLU(), nn.Linear(64, 10),
                         nn.Softmax(dim=1))


def averaged(torch):
    """An average pooling as torchvision writes them (3 x 3 of stride 2 padded 1, its zeros
    counted) between padded convolutions, and a linear layer reading the whole 16 x 16 map
    (more than a window's 15 x 15: on the chip in windows of whole K-tiles)."""
    nn = torch.nn
    torch.manual_seed(5)
    return nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.AvgPool2d(3, stride=2, padding=1),
        nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(),
        nn.Flatten(), nn.Linear(16 * 16 * 8, 10), nn.Softmax(dim=1))


def pooled_globally(torch):
    """A stride-2 convolution's 16 x 16 x 16 map pooled globally (AdaptiveAvgPool2d(1), more
    than a window's 15 x 15: on the chip in windows of whole K-tiles) into a linear layer."""
    nn = torch.nn
    torch.manual_seed(7)
    return nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 16, 3, stride=2, padding=1),
        nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10), nn.Softmax(dim=1))


def normalized(torch):
    """ResNet's pattern: convolutions without bias, each followed by BatchNorm2d and ReLU,
    exported for training and imported with --keep-batchnorm: trained on the CPU over each batch's statistics (the
    chip refuses it, naming the layer)."""
    nn = torch.nn
    torch.manual_seed(8)
    return nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
        nn.MaxPool2d(2), nn.Conv2d(8, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16),
        nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10), nn.Softmax(dim=1))


def bottleneck(torch):
    """ResNet-50's bottleneck block on maps of more channels than tpu-v2's 128 lanes (two
    channel blocks): a stem of two stride-2 convolutions (64, then 256 channels, 8 x 8), the
    block (1 x 1 to 128, 3 x 3, 1 x 1 back to 256 without ReLU, added to the block's input
    before the ReLU), global pooling, the 10 classes. Without batch normalization: with it
    (each convolution followed by BatchNorm2d, five deep at batch 4), the bfloat16 step's
    gradients land up to 0.2 of a tensor's largest from PyTorch's, with and without channel
    blocks alike (docs/training.md, "Channel blocks")."""
    nn = torch.nn

    def conv(c_in, c_out, k, stride=1, relu=True):
        layers = [nn.Conv2d(c_in, c_out, k, stride=stride, padding=k // 2)]
        return layers + [nn.ReLU()] if relu else layers

    class Bottleneck(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(*conv(1, 64, 3, 2), *conv(64, 256, 3, 2))
            self.block = nn.Sequential(*conv(256, 128, 1), *conv(128, 128, 3),
                                       *conv(128, 256, 1, relu=False))
            self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(256, 10),
                                      nn.Softmax(dim=1))

        def forward(self, x):
            h = self.stem(x)
            return self.head(torch.relu(h + self.block(h)))

    torch.manual_seed(9)
    return Bottleneck()


def check_bottleneck(torch, tpusim, tmp):
    """The bottleneck block's first step on tpu-v2 at batch 4 (checked bit for bit against
    the CPU reference) against PyTorch's autograd."""
    onnx_file, folder = os.path.join(tmp, "bottleneck.onnx"), os.path.join(tmp, "bottleneck")
    torch.onnx.export(bottleneck(torch), torch.zeros(1, 1, 32, 32), onnx_file, opset_version=13)
    if run([tpusim, "import", onnx_file, "--out", folder, "-q"]).returncode:
        return False
    return run([sys.executable, GRADS, "--tpusim", tpusim, "--model", folder, "--config",
                "tpu-v2", "--batch", "4"], show=True).returncode == 0


def check_batch_norm(torch, tpusim, tmp, d):
    """The batch-normalized network: its CPU gradients against PyTorch's (train mode); its
    chip's (tpu-v2, batch 4: the batch's statistics on the vector unit) too, after a step
    checked bit for bit against the CPU reference (--verify); after a short CPU training, the
    model folded (tpusim model --fold-batchnorm) classifies every test image as the unfolded
    one does."""
    net = normalized(torch)
    onnx_file, folder = os.path.join(tmp, "bn.onnx"), os.path.join(tmp, "bn")
    # A training export keeps BatchNormalization nodes (an eval one folds them into the
    # convolutions); opset 14 marks them training_mode = 1.
    torch.onnx.export(net.train(), torch.zeros(2, 1, 32, 32), onnx_file, opset_version=14,
                      training=torch.onnx.TrainingMode.TRAINING)
    if run([tpusim, "import", onnx_file, "--out", folder, "--keep-batchnorm", "-q"]).returncode:
        return False
    ok = run([sys.executable, GRADS, "--tpusim", tpusim, "--model", folder],
             show=True).returncode == 0
    ok &= run([sys.executable, GRADS, "--tpusim", tpusim, "--model", folder, "--config", "tpu-v2",
               "--batch", "4"], show=True).returncode == 0
    trained, folded = os.path.join(tmp, "bn-trained"), os.path.join(tmp, "bn-folded")
    ok &= run([tpusim, "train", "--model", folder, "--out", trained, "--data", d,
                           "--limit", "2048", "--epochs", "1", "-q"]).returncode == 0
    ok &= run([tpusim, "model", "--model", trained, "--fold-batchnorm", folded],
              show=True).returncode == 0
    predictions = []
    for m in (trained, folded):
        csv = m + ".csv"
        ok &= run([tpusim, "infer", "--model", m, "--data", d, "--backend", "cpu-fp32",
                   "--predictions", csv], show=True).returncode == 0
        with open(csv) as f:
            predictions.append(f.read())
    same = predictions[0] == predictions[1] and predictions[0].count("\n") > 10000
    print("the folded model's predictions of the test images:",
          "the same" if same else "DIFFERENT")
    return ok and same


def run(cmd, show=False):
    print("$", " ".join(cmd))
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0 or show:
        print(p.stdout, p.stderr)
    return p


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tpusim", required=True)
    args = ap.parse_args()
    try:
        import torch
    except ImportError:
        print("skipped: no PyTorch")
        return 77
    d = mnist_dir()
    if d is None:
        print("skipped: no MNIST")
        return 77
    net = network(torch)
    with tempfile.TemporaryDirectory() as tmp:
        ok = True
        for name, module in (("pooled", net), ("mlp", mlp(torch)), ("averaged", averaged(torch)),
                             ("global", pooled_globally(torch))):
            onnx_file, folder = os.path.join(tmp, name + ".onnx"), os.path.join(tmp, name)
            torch.onnx.export(module, torch.zeros(1, 1, 32, 32), onnx_file, opset_version=13)
            if run([args.tpusim, "import", onnx_file, "--out", folder, "-q"]).returncode:
                return 1
            for config in (["--config", "tpu-v2", "--batch", "4"], []):
                ok &= run([sys.executable, GRADS, "--tpusim", args.tpusim, "--model", folder]
                          + config, show=True).returncode == 0
        ok &= check_batch_norm(torch, args.tpusim, tmp, d)
        ok &= check_bottleneck(torch, args.tpusim, tmp)
        # A model the trainers do not take: refused, naming the layer, nothing written.
        bad = os.path.join(tmp, "bad.onnx")
        torch.onnx.export(torch.nn.Sequential(net[0], net[1], torch.nn.Flatten(),
                                              torch.nn.Linear(8 * 32 * 32, 7)),
                          torch.zeros(1, 1, 32, 32), bad, opset_version=13)
        run([args.tpusim, "import", bad, "--out", os.path.join(tmp, "bad"), "-q"])
        p = run([args.tpusim, "train", "--model", os.path.join(tmp, "bad"), "--out",
                 os.path.join(tmp, "never"), "--data", d])
        refused = p.returncode != 0 and "the last layer" in p.stderr and \
            not os.path.exists(os.path.join(tmp, "never"))
        print("a model of 7 classes without softmax:", "refused" if refused else "NOT refused")
        ok &= refused
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
