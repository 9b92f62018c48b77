#!/usr/bin/python3
"""`tpusim import` of PyTorch's transformer encoders against PyTorch (docs/transformers.md).

Exports torch.nn.TransformerEncoder post-norm and pre-norm, with GELU and with ReLU, at
opset 13 and 14, torchvision's VisionTransformer and a GPT-style decoder
(models/onnx/make_transformers.py),
imports each unmodified, runs the fp32 model on the CPU (`tpusim infer --backend cpu-fp32`)
and checks its outputs within 1e-4 of PyTorch's (relative to the largest), and a ViT's
classes equal to PyTorch's; runs each on the bf16 CPU reference (the chip's rules) and prints
its difference; and an encoder of batch_first=False imported with --time-first. `tpusim generate` with the decoder gives PyTorch's greedy tokens,
and refuses the decoder without its causal mask. Runs each model as the chip's transformer
program on tpu-v2's fast engine, bit-exact with the bf16 rules, and a small encoder on a 4 x 4
bf16 chip's RTL and fast engines, every counter equal. Then checks that what tpusim does not
run is refused with one line and exit 2: the model on an int8 chip, and its quantization.

    tests/import/transformers.py --tpusim build/tpusim [--layers 2 --width 64 ...]

Exits 77 (ctest: skipped) when PyTorch is not installed.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import torch  # noqa: F401 (the exporter needs it)
except ImportError:
    print("transformers: PyTorch is not installed; skipped")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
MAKE = os.path.join(HERE, "..", "..", "models", "onnx", "make_transformers.py")
TOLERANCE = 1e-4


def tpusim(exe, *args):
    return subprocess.run([exe, *args], capture_output=True, text=True)


def check(exe, work, name, size_args):
    base = os.path.join(work, name)
    done = tpusim(exe, "import", base + ".onnx", "--out", base, "-q")
    if done.returncode != 0:
        return f"{name} {size_args}: import exited {done.returncode}: {done.stderr.strip()}"
    done = tpusim(exe, "infer", "--backend", "cpu-fp32", "--model", base, "--inputs",
                  base + ".inputs.npy", "--logits", base + ".tpusim.npy", "-q")
    if done.returncode != 0:
        return f"{name} {size_args}: infer exited {done.returncode}: {done.stderr.strip()}"
    want = np.load(base + ".torch.npy")
    got = np.load(base + ".tpusim.npy").reshape(want.shape)
    error = float(np.abs(got - want).max() / np.abs(want).max())
    print(f"{name} {' '.join(size_args)}: {error:.2e} of the largest output")
    if error > TOLERANCE:
        return f"{name} {size_args}: outputs differ from PyTorch's by {error:.2e}"
    if name.startswith("vit") and (got.argmax(1) != want.argmax(1)).any():
        return f"{name} {size_args}: classes {got.argmax(1)}, PyTorch's {want.argmax(1)}"
    done = tpusim(exe, "infer", "--backend", "cpu-bf16", "--array", "128", "--model", base,
                  "--inputs", base + ".inputs.npy", "--logits", base + ".bf16.npy", "-q")
    if done.returncode != 0:
        return f"{name} {size_args}: cpu-bf16 exited {done.returncode}: {done.stderr.strip()}"
    bf16 = np.load(base + ".bf16.npy").reshape(want.shape)
    print(f"{name} {' '.join(size_args)}: bf16 (the chip's rules, N = 128) "
          f"{float(np.abs(bf16 - want).max() / np.abs(want).max()):.2e} of the largest output, "
          f"top-1 {float((bf16.argmax(-1) == want.argmax(-1)).mean()):.3f} of PyTorch's")
    failure = check_chip(exe, base, name)
    if failure:
        return failure
    for refused in (["run", "--model", base, "--config", "tpu-v1", "--synthetic", "1"],
                    ["quantize", "--model", base, "--out", base + ".int8", "--inputs",
                     base + ".inputs.npy"]):
        done = tpusim(exe, *refused)
        lines = done.stderr.strip().splitlines()
        if done.returncode != 2 or len(lines) != 1 or "transformers.md" not in lines[0]:
            return f"{name}: tpusim {' '.join(refused)} exited {done.returncode}: {done.stderr}"
    return None


def chip_run(exe, base, *args):
    """`tpusim run` of a model's inputs on a chip; its JSON report, or the failure."""
    done = tpusim(exe, "run", "--model", base, "--inputs", base + ".inputs.npy", "--json",
                  base + ".chip.json", "-q", *args)
    if done.returncode != 0:
        return None, done
    with open(base + ".chip.json") as f:
        return json.load(f), done


def check_chip(exe, base, name):
    """The model as the chip's transformer program, bit-exact with the bf16 rules on
    tpu-v2's fast engine."""
    report, done = chip_run(exe, base, "--config", "tpu-v2", "--engine", "fast")
    if report is None or not report["bit_exact"] or report["mismatches"] != 0:
        return f"{name} on tpu-v2: exited {done.returncode}: {done.stderr.strip()}"
    print(f"{name} on tpu-v2 (fast engine): bit-exact, {report['cycles']} cycles for "
          f"{report['images']} inputs")
    return None


# The engines' check: a small encoder on a 4 x 4 bf16 chip (fast suite); with --rtl vit a
# small ViT on tpu-v3, with --rtl encoder the encoder (4 layers, width 256, 8 heads,
# 128 tokens, batch 4) on tpu-v2 (slow suite).
SMALL_ENCODER = (["--set", "dtype=bf16", "--config", "teach-4"],
                 ["--models", "encoder", "--layers", "1", "--width", "8", "--heads", "2",
                  "--tokens", "6", "--batch", "2"])
RTL = {
    "vit": (["--config", "tpu-v3"],
            ["--models", "vit", "--layers", "1", "--width", "128", "--heads", "2", "--image",
             "32", "--patch", "8", "--batch", "2"]),
    "encoder": (["--config", "tpu-v2"],
                ["--models", "encoder", "--layers", "4", "--width", "256", "--heads", "8",
                 "--tokens", "128", "--batch", "4"]),
}


def counters_of(report):
    """Every counter a run reports: the run's, each core's, each operation's and its cores'."""
    return (report["counters"], [c["counters"] for c in report.get("cores", [])],
            [(l["counters"], [c["counters"] for c in l.get("cores", [])])
             for l in report["layers"]])


def check_engines(exe, work, chip_args, make_args):
    """A small model on a bf16 chip's RTL and fast engines: both bit-exact with the bf16
    rules, every counter of the run and of each operation equal."""
    subprocess.run([sys.executable, MAKE, "--out", work, *make_args], check=True,
                   capture_output=True)
    name = make_args[1]
    base = os.path.join(work, name)
    done = tpusim(exe, "import", base + ".onnx", "--out", base, "-q")
    if done.returncode != 0:
        return f"small {name}: import exited {done.returncode}: {done.stderr.strip()}"
    reports = {}
    for engine in ("rtl", "fast"):
        report, done = chip_run(exe, base, *chip_args, "--engine", engine)
        if report is None or not report["bit_exact"]:
            return f"small {name}, {engine} engine: exited {done.returncode}: {done.stderr}"
        reports[engine] = report
    rtl, fast = reports["rtl"], reports["fast"]
    # On a chip of several cores, each core's counters too: the run's and each operation's.
    if counters_of(rtl) != counters_of(fast):
        return f"small {name}: the engines' counters differ"
    if len(rtl.get("cores", [])) > 1 and not all(
            c["counters"]["cycles"] > 0 for c in rtl["cores"]):
        return f"small {name}: a core of {len(rtl['cores'])} did not run"
    print(f"{name} on {' '.join(chip_args)}: both engines bit-exact, {rtl['cycles']} "
          f"cycles, every counter of {len(rtl['layers'])} operations equal")
    return None


def check_time_first(exe, work):
    """An encoder of batch_first=False (T x N x X), imported with --time-first."""
    torch.manual_seed(2)
    layer = torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=False)
    encoder = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).eval()
    x = torch.randn(8, 3, 32)  # T x N x X
    base = os.path.join(work, "time-first")
    torch.onnx.export(encoder, x, base + ".onnx", opset_version=13)
    want = encoder(x).detach().numpy().transpose(1, 0, 2)
    np.save(base + ".inputs.npy", x.numpy().transpose(1, 0, 2).copy())  # N x T x X
    done = tpusim(exe, "import", base + ".onnx", "--out", base, "--time-first", "-q")
    if done.returncode == 0:
        done = tpusim(exe, "infer", "--backend", "cpu-fp32", "--model", base, "--inputs",
                      base + ".inputs.npy", "--logits", base + ".out.npy", "-q")
    if done.returncode != 0:
        return f"time-first: exited {done.returncode}: {done.stderr.strip()}"
    error = float(np.abs(np.load(base + ".out.npy").reshape(want.shape) - want).max() /
                  np.abs(want).max())
    print(f"time-first encoder: {error:.2e} of the largest output")
    return f"time-first: outputs differ from PyTorch's by {error:.2e}" if error > TOLERANCE else None


def check_generate(exe, work, size_args):
    """Greedy tokens from half the context, against PyTorch's; the mask removed: refused."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("make_transformers", MAKE)
    make = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make)
    a = make.parser().parse_args(["--out", work, *size_args])
    torch.manual_seed(a.seed)
    model = make.Gpt(a).eval()
    prompt = list(range(1, a.tokens // 2 + 1))
    context = list(prompt)
    with torch.no_grad():
        while len(context) < a.tokens:
            context.append(int(model(torch.tensor([context]))[0, -1].argmax()))
    with open(os.path.join(work, "prompt.txt"), "w") as f:
        f.write(" ".join(map(str, prompt)))
    base = os.path.join(work, "gpt")
    done = tpusim(exe, "generate", "--model", base, "--prompt", os.path.join(work, "prompt.txt"),
                  "--tokens", str(a.tokens - len(prompt)), "--out", base + ".generated.npy", "-q")
    if done.returncode != 0:
        return f"generate exited {done.returncode}: {done.stderr.strip()}"
    got = np.load(base + ".generated.npy").tolist()
    print(f"generate: {len(got)} tokens, PyTorch's: {got == context[len(prompt):]}")
    if got != context[len(prompt):]:
        return f"generate gave {got}, PyTorch {context[len(prompt):]}"
    failure = check_generate_on_chip(exe, work, got)
    if failure:
        return failure
    for block in model.blocks:
        block.mask.zero_()
    torch.onnx.export(model, torch.tensor([context]), base + "-open.onnx", opset_version=13)
    tpusim(exe, "import", base + "-open.onnx", "--out", base + "-open", "-q")
    for chip in ([], ["--config", "tpu-v2", "--engine", "fast"]):
        done = tpusim(exe, "generate", "--model", base + "-open", "--prompt",
                      os.path.join(work, "prompt.txt"), "--tokens", "1", *chip)
        if done.returncode != 2 or "is not causal" not in done.stderr:
            return (f"generate {' '.join(chip)} without the mask exited {done.returncode}: "
                    f"{done.stderr.strip()}")
    return None


SMALL_GPT = ["--models", "gpt", "--layers", "2", "--width", "8", "--heads", "2", "--tokens", "8",
             "--batch", "1", "--vocabulary", "12"]


def generate_on_chip(exe, base, prompt, tokens, *chip_args):
    """`tpusim generate` on a chip: its JSON, or the failure."""
    done = tpusim(exe, "generate", "--model", base, "--prompt", prompt, "--tokens", str(tokens),
                  "--json", base + ".generate.json", "-q", *chip_args)
    if done.returncode != 0:
        return None, done
    with open(base + ".generate.json") as f:
        return json.load(f), done


def check_generate_on_chip(exe, work, cpu_tokens):
    """Decoding with a key/value cache on tpu-v2 (its tokens checked against the CPU bf16
    reference by tpusim itself, every position's logits bit for bit), then a small decoder
    on a 4 x 4 bf16 chip of two matrix units, RTL and fast engines: every counter of the
    prefill's and of the decode steps' operations equal."""
    base, prompt = os.path.join(work, "gpt"), os.path.join(work, "prompt.txt")
    g, done = generate_on_chip(exe, base, prompt, len(cpu_tokens), "--config", "tpu-v2",
                               "--engine", "fast")
    if g is None:
        return f"generate on tpu-v2 exited {done.returncode}: {done.stderr.strip()}"
    steps = g["decode"]["images"]
    if g["mismatches"] != 0 or len(g["tokens"]) != len(cpu_tokens) or steps != len(cpu_tokens) - 1:
        return f"generate on tpu-v2: {g['mismatches']} mismatches, {len(g['tokens'])} tokens"
    print(f"generate on tpu-v2: {len(g['tokens'])} tokens, every position's logits bit-exact; "
          f"prefill {g['prefill']['cycles']} cycles, decode {g['decode']['cycles'] // steps} "
          f"a token; the same tokens as cpu-fp32: {g['tokens'] == cpu_tokens}")
    return check_decode(exe, os.path.join(work, "small"), "small")


# Decoding: the decoder (6 layers, width 512, 8 heads, a prompt of 128, 64 new
# tokens) on tpu-v4's fast engine with values, every position bit-exact (slow suite:
# --decode goal); a small decoder on tpu-v3's RTL and fast engines (the build's RTL models
# have no tpu-v4), every counter equal (--decode rtl).
DECODE = {
    "small": (SMALL_GPT, 3, 4, ["--set", "dtype=bf16", "--set", "mxus_per_core=2", "--config",
                               "teach-4"], ["rtl", "fast"]),
    "goal": (["--models", "gpt", "--layers", "6", "--width", "512", "--heads", "8", "--tokens",
              "192", "--batch", "1"], 128, 64, ["--config", "tpu-v4"], ["fast"]),
    "rtl": (["--models", "gpt", "--layers", "1", "--width", "128", "--heads", "2", "--tokens",
             "16", "--batch", "1"], 8, 4, ["--config", "tpu-v3"], ["rtl", "fast"]),
}


def check_decode(exe, work, which):
    """`tpusim generate` (its own check: every position's logits against the CPU bf16
    reference) on each engine of DECODE[which], their counters equal."""
    make_args, prompt_len, tokens, chip, engines = DECODE[which]
    subprocess.run([sys.executable, MAKE, "--out", work, *make_args], check=True,
                   capture_output=True)
    base, prompt = os.path.join(work, "gpt"), os.path.join(work, "prompt.txt")
    done = tpusim(exe, "import", base + ".onnx", "--out", base, "-q")
    if done.returncode != 0:
        return f"decoder: import exited {done.returncode}: {done.stderr.strip()}"
    with open(prompt, "w") as f:
        f.write(" ".join(str((7 * i + 3) % 10) for i in range(prompt_len)))
    runs = {}
    for engine in engines:
        g, done = generate_on_chip(exe, base, prompt, tokens, *chip, "--engine", engine)
        if g is None or g["mismatches"] != 0 or len(g["tokens"]) != tokens:
            return f"decoder on {' '.join(chip)}, {engine} engine: exited {done.returncode}: {done.stderr}"
        runs[engine] = g
    for phase in ("prefill", "decode"):
        first, *rest = [runs[e][phase] for e in engines]
        for other in rest:
            if first["counters"] != other["counters"] or [
                    l["counters"] for l in first["layers"]] != [
                        l["counters"] for l in other["layers"]]:
                return f"decoder: the engines' {phase} counters differ"
    g = runs[engines[0]]
    steps = g["decode"]["images"]
    bound = (g["decode_bound"]["weights"] + g["decode_bound"]["cache"]) / steps
    print(f"decoder on {' '.join(chip)} ({', '.join(engines)}): {tokens} tokens after {prompt_len}, every "
          f"position bit-exact; prefill {g['prefill']['cycles']} cycles, decode "
          f"{g['decode']['cycles'] // steps} a token, {g['decode']['cycles'] / steps / bound:.2f} "
          f"x the bound of reading the weights and the cache")
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tpusim", default="build/tpusim")
    ap.add_argument("--models", nargs="+", default=["encoder", "encoder-pre", "vit", "gpt"])
    ap.add_argument("--rtl", choices=sorted(RTL),
                    help="only the engines' check: a small ViT on tpu-v3, or the issue's "
                    "encoder on tpu-v2 (slow suite)")
    ap.add_argument("--decode", choices=["goal", "rtl"],
                    help="only decoding on tpu-v4: the issue's decoder on the fast engine, or a "
                    "small one on both engines (slow suite)")
    a, sizes = ap.parse_known_args()
    if a.decode:
        with tempfile.TemporaryDirectory(prefix="tpusim-transformers-") as work:
            failure = check_decode(a.tpusim, work, a.decode)
        print("FAILED:", failure) if failure else None
        sys.exit(1 if failure else 0)
    if a.rtl:
        with tempfile.TemporaryDirectory(prefix="tpusim-transformers-") as work:
            failure = check_engines(a.tpusim, work, *RTL[a.rtl])
        print("FAILED:", failure) if failure else None
        sys.exit(1 if failure else 0)
    failures = []
    with tempfile.TemporaryDirectory(prefix="tpusim-transformers-") as work:
        for opset, activation in (("13", "gelu"), ("14", "relu")):
            size_args = sizes + ["--opset", opset, "--activation", activation]
            subprocess.run([sys.executable, MAKE, "--out", work, "--models", *a.models,
                            *size_args], check=True, capture_output=True)
            for name in a.models:
                failure = check(a.tpusim, work, name, size_args)
                if failure:
                    failures.append(failure)
            failure = check_time_first(a.tpusim, work)
            if failure:
                failures.append(failure)
            if opset == "13":
                failure = check_engines(a.tpusim, work, *SMALL_ENCODER)
                if failure:
                    failures.append(failure)
            if "gpt" in a.models:
                failure = check_generate(a.tpusim, work, size_args)
                if failure:
                    failures.append(failure)
    for f in failures:
        print("FAILED:", f)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
