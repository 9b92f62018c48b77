"""A GEMM on the simulated TPU from Python: C = A x B on small-16's 16 x 16 array, on the
fast engine and on the RTL, checked against NumPy, with the cycles the chip took; then the
calls timed (docs/python.md, docs/performance.md).

    PYTHONPATH=build/python /usr/bin/python3 examples/python/gemm.py [--calls N]
"""

import argparse
import time

import numpy as np

import tpusim


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000, help="fast-engine calls to time")
    args = parser.parse_args()

    config = tpusim.Config("small-16")
    rng = np.random.default_rng(0)
    a = rng.integers(-128, 128, (64, 64), dtype=np.int8)
    b = rng.integers(-128, 128, (64, 64), dtype=np.int8)
    want = a.astype(np.int32) @ b.astype(np.int32)
    for engine in ("fast", "rtl"):
        c, report = tpusim.gemm(a, b, config=config, engine=engine)
        assert (c == want).all(), engine
        print(f"{engine}: 64 x 64 x 64 on {config.name}: {report['cycles']} cycles, "
              f"utilization {100 * report['utilization']:.1f} %, equal to NumPy")

    start = time.perf_counter()
    for _ in range(args.calls):
        tpusim.gemm(a, b, config=config, engine="fast")
    fast = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(100):
        c, _ = tpusim.gemm(a, b, config=config, engine="rtl")
        assert (c == want).all()
    rtl = time.perf_counter() - start
    print(f"{args.calls} calls on the fast engine: {fast:.3f} s; 100 on the rtl engine: {rtl:.3f} s, "
          "every result right")


if __name__ == "__main__":
    main()
