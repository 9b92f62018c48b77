#!/usr/bin/python3
"""Builds TPU v1's six applications (MLP0, MLP1, LSTM0, LSTM1, CNN0, CNN1) as topology files
from Table 1 of the ISCA 2017 paper (paper.toml) by the rules of README.md, written down
before any comparison:

1. Layers: Table 1's counts of fully connected (FC) and convolutional (conv) layers, in that
   order for CNN1 (its convolutions first, then its FC layers). Vector and pooling layers
   have no weights and are no GEMM rows.
2. Weights: Table 1's total, split evenly over the FC and conv layers.
3. FC layers are square: K = N = round(sqrt(weights per layer)).
4. Conv layers are 3 x 3, stride 1, "same" padding, as many input as output channels:
   C = round(sqrt(weights per layer / 9)); every conv layer has the same map side s, the one
   that gives the application Table 1's operations per weight byte, which the paper counts
   as multiply-adds per weight per batch (an FC layer's is its batch, as Table 1 shows for
   the MLPs and LSTMs): s = round(sqrt((ops_per_weight_byte * layers / batch - fc) / conv)).
5. Batch: Table 1's. The MLPs and LSTMs are lists of GEMMs (`Layer name, M, N, K`) with M the
   batch; the CNNs are convolution topologies run with `--batch`.

    models/tpu-v1-apps/make_apps.py            # writes the six .csv files next to it
    models/tpu-v1-apps/make_apps.py --check    # fails if a committed file differs
"""
import argparse
import math
import os
import sys
import tomllib

HERE = os.path.dirname(os.path.abspath(__file__))


def shapes(app):
    """The application's weighted layers: ('fc', K, N) or ('conv', side, C), by the rules."""
    layers = app["fc"] + app["conv"]
    per_layer = app["weights_m"] * 1e6 / layers
    out = []
    if app["conv"]:
        c = round(math.sqrt(per_layer / 9))
        side = round(math.sqrt((app["ops_per_weight_byte"] * layers / app["batch"] - app["fc"])
                               / app["conv"]))
        out += [("conv", side, c)] * app["conv"]
    width = round(math.sqrt(per_layer))
    out += [("fc", width, width)] * app["fc"]
    return out


def csv_text(app):
    rows = shapes(app)
    if not app["conv"]:
        lines = ["Layer name, M, N, K,"]
        lines += [f"fc{i}, {app['batch']}, {n}, {k}," for i, (_, k, n) in enumerate(rows, 1)]
        return "\n".join(lines) + "\n"
    lines = ["Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, Channels, "
             "Num Filter, Strides,"]
    count = {"conv": 0, "fc": 0}
    for kind, a, b in rows:
        count[kind] += 1
        name = f"{kind}{count[kind]}"
        if kind == "conv":  # a "same" 3 x 3 convolution: the padding folded into the IFMAP
            lines.append(f"{name}, {a + 2}, {a + 2}, 3, 3, {b}, {b}, 1,")
        else:  # a dense layer: a 1 x 1 IFMAP with its inputs as channels
            lines.append(f"{name}, 1, 1, 1, 1, {a}, {b}, 1,")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true",
                    help="compare the committed files with the rules' output; write nothing")
    ap.add_argument("--out", default=HERE, help="folder to write the .csv files to")
    args = ap.parse_args()
    with open(os.path.join(HERE, "paper.toml"), "rb") as f:
        table1 = tomllib.load(f)["table1"]
    stale = []
    for name, app in table1.items():
        path = os.path.join(args.out, f"{name}.csv")
        text = csv_text(app)
        if args.check:
            have = open(path).read() if os.path.exists(path) else None
            if have != text:
                stale.append(path)
            continue
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, path)
        print(f"wrote {path}")
    if stale:
        sys.exit("these files differ from models/tpu-v1-apps/make_apps.py's rules (run it "
                 "to rewrite them): " + ", ".join(stale))


if __name__ == "__main__":
    main()
