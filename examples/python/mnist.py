"""MNIST on the simulated TPU from Python: LeNet-5 on small-16's 16 x 16 array, the test
images checked bit for bit against the CPU int8 reference, with the accuracy, cycles and
energy; then the same run by the tpusim CLI, whose JSON report must be the same, and the two
times (docs/python.md, docs/performance.md).

    PYTHONPATH=build/python /usr/bin/python3 examples/python/mnist.py [--images N]
"""

import argparse
import json
import os
import subprocess
import tempfile
import time

import tpusim
from tpusim import _core

# What two runs of one program may differ in.
VARYING = ("wall_seconds", "images_per_second", "revision")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=10000, help="test images (default all)")
    parser.add_argument("--config", default="small-16", help="chip preset")
    args = parser.parse_args()

    start = time.perf_counter()
    outputs, report = tpusim.run("lenet5", images=args.images, config=args.config, engine="fast")
    python_s = time.perf_counter() - start
    print(f"{report['images']} images on {args.config}: accuracy {100 * report['accuracy']:.2f} %, "
          f"bit-exact {report['bit_exact']}, {report['cycles'] / report['images']:,.0f} cycles and "
          f"{report['energy_per_image_pj'] / 1e6:.2f} uJ per image, outputs {outputs.shape}")
    for row in report["layers"]:
        print(f"  {row['name']:<12} {row['cycles']:>10,} cycles  utilization "
              f"{100 * row['utilization']:5.1f} %")

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "r.json")
        start = time.perf_counter()
        subprocess.run([_core.cli_path(), "run", "--model",
                        os.path.join(_core.source_dir(), "models", "lenet5"), "--images",
                        str(args.images), "--config", args.config, "--engine", "fast", "--json",
                        path, "--quiet"], check=True, stdin=subprocess.DEVNULL)
        cli_s = time.perf_counter() - start
        with open(path) as f:
            cli = json.load(f)
    mine = {k: v for k, v in report.items() if k not in VARYING}
    theirs = {k: v for k, v in cli.items() if k not in VARYING}
    if mine != theirs:
        differ = sorted(k for k in set(mine) | set(theirs) if mine.get(k) != theirs.get(k))
        raise SystemExit(f"the Python report differs from the CLI's in {differ}")
    print(f"the same report as `tpusim run --json`; Python {python_s:.2f} s, CLI {cli_s:.2f} s "
          f"({python_s / cli_s:.2f} x)")


if __name__ == "__main__":
    main()
