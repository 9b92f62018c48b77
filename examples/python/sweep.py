"""A design-space sweep from Python, drawn with matplotlib: LeNet-5 on arrays from 4 x 4
to 64 x 64 (tpusim.sweep runs each point as its own tpusim run), cycles per image and
utilization against the array size (docs/python.md).

    PYTHONPATH=build/python /usr/bin/python3 examples/python/sweep.py --out sweep.png
"""

import argparse
import os
import sys

try:
    import matplotlib
except ImportError:  # Debian's python3-matplotlib (scripts/install-deps)
    print("skipped: matplotlib is not installed (apt-get install python3-matplotlib)")
    sys.exit(77)

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import tpusim  # noqa: E402
from tpusim import _core  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="sweep.png", help="the figure (PNG, SVG, PDF)")
    parser.add_argument("--images", type=int, default=256, help="test images per point")
    args = parser.parse_args()

    spec = {
        "name": "lenet-array-python",
        "base": {"config": "tpu-v1", "model": os.path.join(_core.source_dir(), "models", "lenet5"),
                 "images": args.images, "batch": 64, "engine": "fast"},
        "axes": {"array_dim": [4, 8, 16, 32, 64]},
        "metrics": ["cycles_per_image", "utilization"],
    }
    rows = tpusim.sweep(spec)
    for r in rows:
        print(f"{r['array_dim']:>3} x {r['array_dim']:<3} {r['cycles_per_image']:>10,.0f} cycles/image"
              f"  utilization {100 * r['utilization']:5.1f} %")
    dims = [r["array_dim"] for r in rows]
    fig, left = plt.subplots(figsize=(6, 3.5))
    left.plot(dims, [r["cycles_per_image"] for r in rows], "o-", color="tab:blue")
    left.set(xscale="log", yscale="log", xlabel="array size N (N x N PEs)",
             ylabel="cycles per image", title="LeNet-5 on tpu-v1's memories")
    left.set_xticks(dims, [str(d) for d in dims])
    right = left.twinx()
    right.plot(dims, [100 * r["utilization"] for r in rows], "s--", color="tab:orange")
    right.set_ylabel("utilization (%)", color="tab:orange")
    fig.tight_layout()
    tmp = f"{args.out}.tmp{os.getpid()}{os.path.splitext(args.out)[1]}"
    fig.savefig(tmp)
    os.replace(tmp, args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
