"""tpusim from Python: the cycle-accurate TPU simulator with NumPy arrays and PyTorch modules.

    import numpy as np, tpusim
    c, report = tpusim.gemm(np.ones((64, 64), np.int8), np.ones((64, 64), np.int8),
                            config=tpusim.Config("small-16"), engine="fast")
    outputs, report = tpusim.run("models/lenet5", images=1000, config="small-16")
    outputs, report = tpusim.from_torch(torchvision.models.resnet18(), x, config="tpu-v1")

Bad input raises ValueError or TypeError naming the argument, with the messages of the
tpusim CLI; a chip that disagrees with its reference raises RuntimeError (MismatchError from
run, with the report). docs/python.md describes every call.
"""

import contextlib
import json
import os
import shutil
import subprocess
import tempfile

from . import _core

# tpusim.compile is left out of `from tpusim import *`, which would hide Python's compile.
__all__ = ["Config", "Model", "MismatchError", "gemm", "run", "import_onnx", "import_torch",
           "from_torch", "sweep", "teach", "train", "compare_train"]

ENGINES = ("fast", "rtl")


class MismatchError(RuntimeError):
    """A run whose chip outputs differ from the CPU reference; .report and .outputs hold it."""

    def __init__(self, message, outputs, report):
        super().__init__(message)
        self.outputs = outputs
        self.report = report


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
        self._overrides = fields
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

    def _cli_args(self):
        """The CLI's --config and --set flags for this config."""
        args = ["--config", self.name]
        for key, value in self._overrides.items():
            text = json.dumps(value) if not isinstance(value, str) else value
            args += ["--set", f"{key}={text}"]
        return args


class Model:
    """A tpusim model: a model folder (docs/model-format.md) loaded, or one imported in memory.

    Model("models/lenet5") (a relative path not found here is looked for in tpusim's source
    folder and its models/: Model("lenet5") works anywhere). .name, .quantized, .dataset, .input_chw, .outputs, .summary(),
    .save(folder).
    """

    def __init__(self, path):
        path = os.fspath(path)
        if not os.path.isdir(path) and not os.path.isabs(path):
            for ours in (os.path.join(_core.source_dir(), path),
                         os.path.join(_core.source_dir(), "models", path)):
                if os.path.isdir(ours):
                    path = ours
                    break
        self._core = _core.Model(path)
        self.path = path

    @classmethod
    def _of(cls, core):
        m = cls.__new__(cls)
        m._core, m.path = core, None
        return m

    name = property(lambda self: self._core.name)
    quantized = property(lambda self: self._core.quantized)
    dataset = property(lambda self: self._core.dataset)
    input_chw = property(lambda self: self._core.input_chw)
    outputs = property(lambda self: self._core.outputs)
    final_softmax = property(lambda self: self._core.final_softmax)

    def summary(self):
        return self._core.summary()

    def save(self, folder):
        """Writes the model folder (model.json and its tensors); later runs may name it."""
        self._core.save(os.fspath(folder))
        self.path = os.fspath(folder)

    def __repr__(self):
        kind = "int8" if self.quantized else "fp32"
        return f"tpusim.Model({self.name!r}, {kind}, input {self.input_chw}, {self.outputs} outputs)"


def _config(config):
    if config is None:
        return Config()
    if isinstance(config, str):
        return Config(config)
    if isinstance(config, Config):
        return config
    raise TypeError(f"config must be a tpusim.Config or a preset name, not {type(config).__name__}")


def _model(model):
    if model is None:
        return Model("lenet5")
    if isinstance(model, Model):
        return model
    if isinstance(model, (str, os.PathLike)):
        return Model(model)
    raise TypeError(f"model must be a tpusim.Model or a model folder, not {type(model).__name__}")


def _engine(engine):
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {', '.join(ENGINES)}, not {engine!r}")


def _count(value, name):
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a whole number of at least 1, not {value!r}")
    return value


def _inputs(inputs, images, synthetic, seed, dataset, data):
    import numpy as np

    if inputs is not None and not isinstance(inputs, np.ndarray):
        raise TypeError(f"inputs must be a NumPy array (float32 N x C x H x W), not {type(inputs).__name__}")
    if inputs is not None and synthetic:
        raise ValueError("inputs and synthetic both name the inputs; give one")
    return _core.Inputs(inputs, _count(images, "images"), _count(synthetic, "synthetic"), seed,
                        dataset or "", data or "")


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
    _engine(engine)
    for name, x in (("a", a), ("b", b)):
        if not isinstance(x, np.ndarray):
            raise TypeError(f"{name} must be a NumPy array, not {type(x).__name__}")
    c, report = _core.gemm(a, b, cfg._core, engine)
    return c, json.loads(report)


def run(model=None, inputs=None, images=None, config=None, engine="fast", batch=None,
        timing_only=False, synthetic=None, seed=1, dataset=None, data=None, host_im2col=False,
        raw=False, progress=True):
    """A model on the whole chip, every input checked against the CPU reference.

    Returns (outputs, report): outputs N x outputs (float32: an int8 chip's int8 outputs
    times their scale, or with raw=True the int8 values themselves; a bf16 chip's bfloat16
    outputs exactly), None with timing_only; report is the dict `tpusim run --json` writes,
    with its per-layer rows in report["layers"].

    model: a tpusim.Model or a model folder (default models/lenet5). inputs: a float32
    N x C x H x W array (what the exported model takes); else synthetic=N seeded inputs, else
    the test images of the model's data set (dataset=, data= as the CLI's --dataset, --data);
    images=N takes the first N. batch: inputs per program (default: the most, up to 64, that
    fit the chip's memories). engine "fast" runs in this process; "rtl" runs the whole
    chip's RTL under SystemC in a worker process (the tpusim CLI: SystemC elaborates once
    per process), with the same report. Outputs that differ from the reference raise
    MismatchError (RuntimeError) carrying the outputs and the report.
    """
    m, cfg = _model(model), _config(config)
    _engine(engine)
    spec = _inputs(inputs, images, synthetic, seed, dataset, data)
    if batch is not None:
        _count(batch, "batch")
    if engine == "fast":
        y, scale, text = _core.run_fast(m._core, cfg._core, spec, batch or 0, timing_only,
                                        host_im2col, progress)
        report = json.loads(text)
    else:
        y, scale, report = _run_worker(m, cfg, inputs, images, synthetic, seed, dataset, data,
                                       batch, timing_only, host_im2col)
    outputs = _outputs(y, scale, raw)
    if report["checked"] and report["mismatches"]:
        raise MismatchError(f"{report['mismatches']} of {report['images']} inputs differ from "
                            f"the CPU {'bf16' if cfg.dtype == 'bf16' else 'int8'} reference",
                            outputs, report)
    return outputs, report


def _outputs(y, scale, raw):
    import numpy as np

    if y is None or raw or y.dtype != np.int8:
        return y
    return y.astype(np.float32) * np.float32(scale)


def _cli():
    """The tpusim CLI: $TPUSIM_CLI, the build tree's, or the one on PATH."""
    for path in (os.environ.get("TPUSIM_CLI"), _core.cli_path(), shutil.which("tpusim")):
        if path and os.access(path, os.X_OK):
            return path
    raise RuntimeError("the tpusim CLI (the rtl engine's worker) is not built: build the target "
                       "tpusim, install it, or set TPUSIM_CLI")


def _cli_call(args):
    """Runs the CLI; its errors as Python's: usage (exit 2) ValueError, others RuntimeError."""
    done = subprocess.run([_cli()] + args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)
    message = done.stderr.strip()
    if message.startswith("tpusim: error: "):
        message = message[len("tpusim: error: "):]
    if done.returncode == 2:
        raise ValueError(message)
    return done.returncode, message


@contextlib.contextmanager
def _naming(path, what):
    """Errors that name `path`, a temporary file the user never made, name `what` instead."""
    try:
        yield
    except (ValueError, RuntimeError) as e:
        if path not in str(e):
            raise
        raise type(e)(str(e).replace(path, what)) from None


def _run_worker(m, cfg, inputs, images, synthetic, seed, dataset, data, batch, timing_only,
                host_im2col):
    import numpy as np

    with tempfile.TemporaryDirectory(prefix="tpusim-") as tmp:
        path = m.path
        if path is None:
            path = os.path.join(tmp, "model")
            m._core.save(path)
        args = ["run", "--model", path, "--engine", "rtl", "--json", os.path.join(tmp, "r.json"),
                "--quiet"] + cfg._cli_args()
        if inputs is not None:
            np.save(os.path.join(tmp, "inputs.npy"), inputs)
            args += ["--inputs", os.path.join(tmp, "inputs.npy")]
        for flag, value in (("--images", images), ("--synthetic", synthetic), ("--batch", batch),
                            ("--dataset", dataset), ("--data", data)):
            if value:
                args += [flag, str(value)]
        if synthetic:
            args += ["--seed", str(seed)]
        if timing_only:
            args.append("--timing-only")
        else:
            args += ["--logits", os.path.join(tmp, "y.npy")]
        if host_im2col:
            args.append("--host-im2col")
        rc, message = _cli_call(args)
        if not os.path.exists(os.path.join(tmp, "r.json")):
            raise RuntimeError(message or f"tpusim run exited with {rc}")
        with open(os.path.join(tmp, "r.json")) as f:
            report = json.load(f)
        if inputs is not None:
            report["inputs"] = "inputs from Python"
        y = scale = None
        if not timing_only:
            y = np.load(os.path.join(tmp, "y.npy"))
            scale_path = os.path.join(tmp, "y.scale.npy")
            scale = float(np.load(scale_path)) if os.path.exists(scale_path) else 0.0
        return y, scale, report


def import_onnx(path, name=None, quantize=False, calibration=None, synthetic=None, seed=1,
                calibration_inputs=2000, dataset=None):
    """An fp32 ONNX model as a tpusim.Model (tpusim import); quantize=True quantizes it for
    int8 chips on calibration inputs: a float32 N x C x H x W array, or synthetic=N seeded
    ones. bf16 chips run the fp32 model as it is. Not written anywhere until .save()."""
    path = os.fspath(path)
    spec = _inputs(calibration, None, synthetic, seed, None, None)
    return Model._of(_core.import_onnx(path, name or "", dataset or "", quantize, spec,
                                       calibration_inputs))


def import_torch(module, example_input, quantize=True, calibration=None, name=None,
                 dataset="none"):
    """A torch.nn.Module as a tpusim.Model: exported with torch.onnx.export (opset 13) to a
    temporary file and imported; quantize=True (for int8 chips) calibrates on `calibration`
    (default: example_input). The model takes float inputs as the module does (dataset
    "none"); dataset="mnist" or "fashion-mnist" marks a 1 x 32 x 32 classifier of that data
    set, whose inputs are pixel / 255 in a zero border (docs/import.md)."""
    import torch

    if not isinstance(module, torch.nn.Module):
        raise TypeError(f"module must be a torch.nn.Module, not {type(module).__name__}")
    if not isinstance(example_input, torch.Tensor):
        raise TypeError(f"example_input must be a torch.Tensor (N x C x H x W), not {type(example_input).__name__}")
    module.eval()
    with tempfile.TemporaryDirectory(prefix="tpusim-") as tmp:
        onnx_path = os.path.join(tmp, "model.onnx")
        # Not under torch.no_grad(): there PyTorch's transformer layers take a fused inference
        # path (aten::_transformer_encoder_layer_fwd) that has no ONNX export.
        torch.onnx.export(module, example_input, onnx_path, opset_version=13,
                          input_names=["input"], output_names=["output"])
        cal = calibration if calibration is not None else example_input
        cal = cal.detach().cpu().numpy().astype("float32") if isinstance(cal, torch.Tensor) else cal
        with _naming(onnx_path, f"the ONNX export of {type(module).__name__}"):
            return import_onnx(onnx_path, name=name or type(module).__name__.lower(),
                               quantize=quantize, calibration=cal if quantize else None,
                               dataset=dataset)


def from_torch(module, example_input, config=None, engine="fast", batch=None, calibration=None,
               timing_only=False):
    """A torch.nn.Module on the chip in one call: imported (import_torch; quantized for an
    int8 chip, calibrated on `calibration` or example_input; fp32 for a bf16 chip), run on
    example_input, checked bit for bit against the CPU reference. Returns (outputs, report);
    report["torch"] compares the outputs with the module's own: top-1 agreement and the
    largest difference."""
    import numpy as np
    import torch

    cfg = _config(config)
    model = import_torch(module, example_input, quantize=cfg.dtype != "bf16",
                         calibration=calibration)
    x = example_input.detach().cpu().numpy().astype(np.float32)
    outputs, report = run(model, inputs=x, config=cfg, engine=engine, batch=batch,
                          timing_only=timing_only)
    if outputs is not None:
        with torch.no_grad():
            ref = module(example_input).detach().cpu().numpy().reshape(outputs.shape)
        report["torch"] = _compare_with_torch(outputs, ref, model.final_softmax)
    return outputs, report


def generate(model, prompt, tokens=16, config=None, engine="fast", timing_only=False):
    """Greedy decoding with a GPT-style decoder (tpusim generate; docs/transformers.md): the
    `tokens` token ids after `prompt` (a sequence of ids), as a NumPy int32 array, and the
    report (the CLI's JSON). On the CPU in fp32; with config (a bf16 chip: "tpu-v2", ...), on
    the chip with a key/value cache, every position's logits checked bit for bit against the
    CPU bf16 reference (RuntimeError where one differs), report["prefill"] and
    report["decode"] the two phases' reports. timing_only: counters only, no tokens (None)."""
    import numpy as np

    m = _model(model)
    with tempfile.TemporaryDirectory(prefix="tpusim-") as tmp:
        path = m.path
        if path is None:
            path = os.path.join(tmp, "model")
            m._core.save(path)
        ids = np.asarray(list(prompt), dtype=np.float32).reshape(-1)
        np.save(os.path.join(tmp, "prompt.npy"), ids)
        args = ["generate", "--model", path, "--prompt", os.path.join(tmp, "prompt.npy"),
                "--tokens", str(_count(tokens, "tokens")), "--json", os.path.join(tmp, "g.json"),
                "--quiet"]
        if not timing_only:
            args += ["--out", os.path.join(tmp, "t.npy")]
        if config is not None:
            args += ["--config", config if isinstance(config, str) else config.name,
                     "--engine", engine] + (["--timing-only"] if timing_only else [])
        elif timing_only:
            raise ValueError("timing_only needs a chip: give config")
        rc, message = _cli_call(args)
        if rc != 0:
            raise RuntimeError(message or f"tpusim generate exited with {rc}")
        with open(os.path.join(tmp, "g.json")) as f:
            report = json.load(f)
        return None if timing_only else np.load(os.path.join(tmp, "t.npy")), report


def _compare_with_torch(outputs, ref, final_softmax):
    """The chip's outputs against the module's. A model ending in a softmax gives the logits
    before it, the module its probabilities (Softmax) or their logarithms (LogSoftmax, whose
    values are all at most 0): both are compared as probabilities then."""
    import numpy as np

    compared = "outputs"
    if final_softmax:
        z = outputs.astype(np.float64)
        z = np.exp(z - z.max(axis=1, keepdims=True))
        outputs = z / z.sum(axis=1, keepdims=True)
        ref = np.exp(ref.astype(np.float64)) if (ref <= 0).all() else ref
        compared = "probabilities"
    return {
        "top1_agree": int((ref.argmax(1) == outputs.argmax(1)).sum()),
        "inputs": int(outputs.shape[0]),
        "compared": compared,
        "max_abs_diff": float(np.abs(ref - outputs).max()),
        "max_abs_output": float(np.abs(ref).max()),
    }


def compile(model=None, inputs=None, images=1, config=None, synthetic=None, seed=1,
            dataset=None, data=None, host_im2col=False):
    """The TPU jobs of a quantized model for its first inputs, as tpusim run runs them
    (tpusim compile): a list of dicts, one per job ("network" where the whole network is one
    program, else one per layer): program (bytes of a program file, which tpusim exec
    runs), disassembly (text), host_image and weight_image (bytes), instructions,
    host_out_addr, host_out_bytes, summary, layer_jobs_why."""
    m, cfg = _model(model), _config(config)
    spec = _inputs(inputs, images if inputs is None else None, synthetic, seed, dataset, data)
    return _core.compile(m._core, cfg._core, spec, host_im2col)


_SPEC_PATHS = ("model", "config", "inputs", "topology", "data", "energy")


def _absolute_paths(spec):
    """A dict spec's relative paths (model, config files, ...) as this process sees them."""
    def fix(key, value):
        if key in _SPEC_PATHS and isinstance(value, str) and os.path.exists(value):
            return os.path.abspath(value)
        return value

    out = json.loads(json.dumps(spec))
    base = out.get("base", {})
    for key in list(base):
        base[key] = fix(key, base[key])
    for key, axis in out.get("axes", {}).items():
        if isinstance(axis, list):
            out["axes"][key] = [fix(key, v) for v in axis]
    return out


def sweep(spec, out=None, jobs=2):
    """A design-space sweep (tpusim sweep, docs/sweeps.md): spec is a dict or a spec file;
    each point runs as its own tpusim run, `jobs` at once. Returns the table as a list of
    dicts, one per point, as results.csv has it: the point's index and status, its axis
    values and metrics (a failed point: its error). out: the sweep's folder, kept (with
    results.json: every point's per-layer rows; resumed when run again); default a temporary
    one."""
    with tempfile.TemporaryDirectory(prefix="tpusim-sweep-") as tmp:
        if isinstance(spec, dict):
            spec_path = os.path.join(tmp, "spec.json")
            with open(spec_path, "w") as f:
                json.dump(_absolute_paths(spec), f)
        elif isinstance(spec, (str, os.PathLike)):
            spec_path = os.fspath(spec)
        else:
            raise TypeError(f"spec must be a dict or a spec file, not {type(spec).__name__}")
        folder = os.fspath(out) if out is not None else os.path.join(tmp, "sweep")
        with _naming(spec_path, "the spec dict"):
            return _sweep_in(spec_path, folder, jobs)


def _sweep_in(spec_path, folder, jobs):
    rc, message = _cli_call(["sweep", spec_path, "--out", folder, "--jobs", str(jobs),
                             "--no-plots", "--quiet"])
    results = os.path.join(folder, "results.json")
    if rc != 0 and not os.path.exists(results):
        raise RuntimeError(message or f"tpusim sweep exited with {rc}")
    with open(results) as f:
        points = json.load(f)["points"]
    if rc != 0:
        raise RuntimeError(f"{message} (the points that ran are in {folder})")
    return [_row(p) for p in points]


def _row(point):
    row = {k: v for k, v in point.items() if not isinstance(v, (dict, list)) and k != "key"}
    row.update(point.get("values", {}))
    row.update(point.get("metrics", {}))
    return row


def train(arch="mlp", config="tpu-v2", epochs=1, batch=64, optimizer="adam", lr=None,
          limit=None, seed=1, engine="fast", verify=False, dataset="mnist", data=None,
          timeline=None, timeline_step=2, cores=None, model=None, timing_only=False,
          state_in="auto"):
    """Trains a network on the chip (tpusim train --config, docs/training.md): every step a
    program on a bf16 chip, the weights kept in the chip between the steps; on a chip of two
    cores (tpu-v3, tpu-v4) each core takes half of the batch and the cores sum their
    gradients (cores=1: core 0 alone; None: the chip's).

    arch: "mlp", the course material's CNN "lenet5" or "wide" (at a batch the unified
    buffer holds: at most 86 and 68 on tpu-v2), or the graph "residual" (any batch: 11
    images a pass on tpu-v2, a larger batch in passes whose gradients are summed); model: instead of arch, a tpusim.Model or model folder to start from (its graph
    and float32 weights, e.g. import_torch(net, x, quantize=False, dataset="mnist") of an
    MLP, or of convolutions with max pooling and ReLU6); config: a bf16
    preset name or a Config; limit: train on the first images only; verify: check every step
    against the CPU reference, bit for bit; timeline: a file for the instruction timeline of
    step `timeline_step` (Chrome trace JSON, its passes on a track of their own). Returns
    (weights, report): the trained float32 weights as NumPy arrays by their model-folder names
    ("fc1.weights", "fc1.bias", ...), and the CLI's --json report (each epoch's loss,
    accuracies, cycles, simulated and wall time and modelled energy; the step's passes with
    their counters, bounds and energy; the last step's counters). timing_only: time one step
    on the fast engine without values instead (tpusim train --timing-only: synthetic batches,
    any input and classes; epochs, limit, dataset and verify do not apply): returns (None,
    report), the report that step's ("step", "passes"). state_in: where a graph's weights,
    optimizer state and gradients are ("auto", "buffer", "hbm", "hbm-with-f" or
    "hbm-with-maps", as --state-in). Bad arguments raise ValueError.
    """
    import numpy as np

    cfg = _config(config)
    for name, value in (("epochs", epochs), ("batch", batch), ("seed", seed)):
        _count(value, name)
    _engine(engine)
    start = _model(model) if model is not None else None
    args = ["train", "--batch", str(batch), "--optimizer", str(optimizer), "--seed", str(seed),
            "--engine", engine, "--state-in", str(state_in), "--quiet"] + cfg._cli_args()
    if timing_only:
        args.append("--timing-only")
    else:
        args += ["--epochs", str(epochs), "--dataset", str(dataset)]
    if lr is not None:
        args += ["--lr", str(float(lr))]
    if limit is not None:
        args += ["--limit", str(_count(limit, "limit"))]
    if data is not None:
        args += ["--data", str(data)]
    if verify:
        args.append("--verify")
    if cores is not None:
        args += ["--cores", str(_count(cores, "cores"))]
    if timeline is not None:
        args += ["--timeline", os.fspath(timeline), "--timeline-step",
                 str(_count(timeline_step, "timeline_step"))]
    with tempfile.TemporaryDirectory(prefix="tpusim-") as tmp:
        out, report_path = os.path.join(tmp, "model"), os.path.join(tmp, "r.json")
        if start is None:
            args += ["--arch", str(arch)]
        else:
            start.save(os.path.join(tmp, "start"))
            args += ["--model", os.path.join(tmp, "start")]
        with _naming(out, "the trained model"):
            rc, message = _cli_call(args + ([] if timing_only else ["--out", out]) +
                                    ["--json", report_path])
        if rc != 0 or not os.path.exists(report_path):
            raise RuntimeError(message or f"tpusim train exited with {rc}")
        with open(report_path) as f:
            report = json.load(f)
        if timing_only:
            return None, report
        with open(os.path.join(out, "model.json")) as f:
            layers = json.load(f)["layers"]
        weights = {}
        for layer in layers:
            for kind in ("weights", "bias"):
                if kind in layer:
                    weights[f"{layer['name']}.{kind}"] = np.load(os.path.join(out, layer[kind]))
        return weights, report


def compare_train(configs=("tpu-v2",), epochs=1, batch=64, optimizer="adam", limit=None,
                  seed=1, dataset="mnist", data=None):
    """The course material's experiment (tpusim compare --train, docs/training.md): the
    perceptron trained with the same hyperparameters on cpu-fp32 (Eigen, measured), cpu-bf16
    (the CPU reference of the chip's arithmetic, measured) and each bf16 preset in `configs`
    (simulated time at its clock). Returns the CLI's --json dict: "rows", one per backend,
    each with its "epochs" (seconds, wall_seconds, loss, test_accuracy, energy_j, images).
    """
    if isinstance(configs, str):
        configs = [configs]
    for name, value in (("epochs", epochs), ("batch", batch), ("seed", seed)):
        _count(value, name)
    args = ["compare", "--train", "--configs", ",".join(str(c) for c in configs), "--epochs",
            str(epochs), "--batch", str(batch), "--optimizer", str(optimizer), "--seed", str(seed),
            "--dataset", str(dataset), "--quiet"]
    if limit is not None:
        args += ["--limit", str(_count(limit, "limit"))]
    if data is not None:
        args += ["--data", str(data)]
    with tempfile.TemporaryDirectory(prefix="tpusim-") as tmp:
        path = os.path.join(tmp, "compare.json")
        rc, message = _cli_call(args + ["--json", path])
        if rc != 0 or not os.path.exists(path):
            raise RuntimeError(message or f"tpusim compare --train exited with {rc}")
        with open(path) as f:
            return json.load(f)


def teach(a, b, array=4, dataflow="ws", html=None):
    """C = A x B on a teaching build of the matrix unit, every PE read from the RTL in every
    cycle (tpusim teach): returns the lesson's data, the dict the HTML page shows (frames:
    one per cycle, with each PE's weight, activation and partial sum; the summary, C). int8
    a and b, or float32 ones for the bfloat16 lesson. dataflow "ws" (the chip's), "os" or
    "both" (then a list of two). html: also write the page to this file."""
    import numpy as np

    for name, x in (("a", a), ("b", b)):
        if not isinstance(x, np.ndarray):
            raise TypeError(f"{name} must be a NumPy array, not {type(x).__name__}")
    data, page = _core.teach(a, b, array, dataflow)
    if html is not None:
        tmp = f"{os.fspath(html)}.tmp{os.getpid()}"
        with open(tmp, "w") as f:
            f.write(page)
        os.replace(tmp, html)
    lessons = json.loads(data)
    return lessons if dataflow == "both" else lessons[0]
