"""tpusim from Python: the cycle-accurate TPU simulator with NumPy arrays.

    import numpy as np, tpusim
    c, report = tpusim.gemm(np.ones((64, 64), np.int8), np.ones((64, 64), np.int8),
                            config=tpusim.Config("small-16"), engine="fast")

Bad input raises ValueError or TypeError naming the argument, with the messages of the
tpusim CLI; a chip that disagrees with its reference raises RuntimeError. docs/python.md
lists what is here and what is still to come.
"""

import json

from . import _core

__all__ = ["Config", "gemm"]

ENGINES = ("fast", "rtl")


class Config:
    """A chip: a preset of configs/ (or a config file) with fields replaced.

    Config("tpu-v1"), Config("small-16", array_dim=4, dtype="bf16"). Unknown fields and
    invalid values raise ValueError, as in a config file. Fields read as attributes
    (config.array_dim) and as a dict (config.fields).
    """

    def __init__(self, name="small-16", **fields):
        if not isinstance(name, str):
            raise TypeError(f"name must be a preset name or a config file path, not {type(name).__name__}")
        try:
            overrides = json.dumps(fields)
        except TypeError as e:
            raise TypeError(f"config fields must be numbers, strings or booleans: {e}") from None
        self._core = _core.Config(name, overrides)
        self.fields = json.loads(self._core.json())

    @property
    def name(self):
        return self._core.name

    def __getattr__(self, field):
        fields = self.__dict__.get("fields", {})
        if field in fields:
            return fields[field]
        raise AttributeError(f"a config has no field '{field}'")

    def __repr__(self):
        return f"tpusim.Config({self.name!r}, array_dim={self.fields['array_dim']}, dtype={self.fields['dtype']!r})"


def _config(config):
    if config is None:
        return Config()
    if isinstance(config, str):
        return Config(config)
    if isinstance(config, Config):
        return config
    raise TypeError(f"config must be a tpusim.Config or a preset name, not {type(config).__name__}")


def gemm(a, b, config=None, engine="fast"):
    """C = A x B on the chip's matrix unit: returns (C, report).

    int8 chips take int8 arrays and give int32 C (wrapping as the hardware does); bf16 chips
    (Config("tpu-v2")) take float32 arrays, rounded to bfloat16, and give float32 C, added
    in the array's order (docs/bf16.md). engine: "fast" (the C++ model) or "rtl" (the
    Verilated RTL, a fresh model each call). The report is the dict `tpusim gemm --json`
    writes: cycles, utilization, the RTL's counters, matches_reference.
    """
    import numpy as np

    cfg = _config(config)
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {', '.join(ENGINES)}, not {engine!r}")
    for name, x in (("a", a), ("b", b)):
        if not isinstance(x, np.ndarray):
            raise TypeError(f"{name} must be a NumPy array, not {type(x).__name__}")
    c, report = _core.gemm(a, b, cfg._core, engine)
    return c, json.loads(report)
