"""tpusim.run, import_onnx, import_torch, from_torch, compile, sweep and teach from Python
(docs/python.md): the CLI's reports and results, both engines, and bad input as
ValueError/TypeError naming the argument."""

import json
import os
import subprocess
import time

import numpy as np
import pytest

import tpusim
from tpusim import _core

VARYING = ("wall_seconds", "images_per_second", "engine", "revision")


def same(report):
    """A report without what differs between two runs of one program (wall time, engine)."""
    return {k: v for k, v in report.items() if k not in VARYING}


def cli(*args):
    return subprocess.run([_core.cli_path(), *args], check=True, stdout=subprocess.DEVNULL,
                          stdin=subprocess.DEVNULL)


def test_run_gives_the_clis_report_and_outputs(tmp_path):
    outputs, report = tpusim.run("models/lenet5", images=200, config="small-16")
    cli("run", "--model", os.path.join(_core.source_dir(), "models/lenet5"), "--images", "200",
        "--config", "small-16", "--engine", "fast", "--json", str(tmp_path / "r.json"),
        "--logits", str(tmp_path / "y.npy"), "--quiet")
    want = json.loads((tmp_path / "r.json").read_text())
    assert same(report) == same(want)
    assert report["bit_exact"] is True and len(report["layers"]) == 5
    # The outputs: the int8 values times their scale; raw=True gives the int8 values.
    y = np.load(tmp_path / "y.npy")
    scale = float(np.load(tmp_path / "y.scale.npy"))
    np.testing.assert_array_equal(outputs, y.astype(np.float32) * np.float32(scale))
    raw, _ = tpusim.run("models/lenet5", images=200, config="small-16", raw=True)
    np.testing.assert_array_equal(raw, y)


def test_the_rtl_engine_gives_the_fast_engines_report_again_and_again():
    cfg = tpusim.Config("small-16", array_dim=8)
    fast_y, fast = tpusim.run(images=40, batch=20, config=cfg)
    for _ in range(2):
        y, rtl = tpusim.run(images=40, batch=20, config=cfg, engine="rtl")
        assert rtl["engine"] == "rtl" and fast["engine"] == "fast"
        assert same(rtl) == same(fast)
        np.testing.assert_array_equal(y, fast_y)


def test_run_on_an_array_and_timing_only():
    model = tpusim.Model("lenet5")
    x = np.zeros((6, *model.input_chw), np.float32)  # MNIST's 28 x 28 in a zero border
    x[:, :, 2:30, 2:30] = np.random.default_rng(0).integers(0, 256, (6, 1, 28, 28)) / np.float32(255)
    y, report = tpusim.run(model, inputs=x, config="small-16", batch=3)
    assert y.shape == (6, 10) and report["inputs"] == "inputs from Python"
    assert report["images"] == 6 and report["batch"] == 3 and report["bit_exact"]
    rtl_y, rtl = tpusim.run(model, inputs=x, config="small-16", batch=3, engine="rtl")
    assert same(rtl) == same(report)
    np.testing.assert_array_equal(rtl_y, y)
    none, timing = tpusim.run(model, inputs=x, config="small-16", batch=3, timing_only=True)
    assert none is None and timing["cycles"] == report["cycles"] and not timing["checked"]


def test_ctrl_c_stops_a_long_run_between_batches():
    import _thread
    import threading

    timer = threading.Timer(0.3, _thread.interrupt_main)  # Ctrl-C, 0.3 s into the run
    timer.start()
    start = time.perf_counter()
    with pytest.raises(KeyboardInterrupt):
        tpusim.run(images=10000, batch=8, config="small-16")  # about 3 s to the end
    assert time.perf_counter() - start < 2
    timer.join()


def test_run_in_bf16_takes_the_fp32_model():
    y, report = tpusim.run("models/lenet5", images=16, config="tpu-v2")
    assert y.dtype == np.float32 and report["config"]["dtype"] == "bf16" and report["bit_exact"]


def test_import_onnx_and_compile(tmp_path):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(2, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                              torch.nn.Linear(4 * 6 * 6, 5))
    torch.onnx.export(net, torch.randn(1, 2, 8, 8), str(tmp_path / "net.onnx"), opset_version=13)
    fp32 = tpusim.import_onnx(tmp_path / "net.onnx")
    assert not fp32.quantized and fp32.input_chw == (2, 8, 8) and fp32.outputs == 5
    model = tpusim.import_onnx(tmp_path / "net.onnx", quantize=True, synthetic=16)
    assert model.quantized and model.path is None
    y, report = tpusim.run(model, synthetic=4, config="small-16", engine="rtl")
    assert report["bit_exact"] and y.shape == (4, 5)
    jobs = tpusim.compile(model, synthetic=2, config="small-16")
    assert [j["name"] for j in jobs] == ["network"]
    job = jobs[0]
    assert job["program"][:8] == b"TPUSIMP1" and len(job["program"]) == 16 + 16 * job["instructions"]
    assert job["disassembly"].count("\n") >= job["instructions"] - 1
    # The program runs on the chip as tpusim exec loads it.
    for name in ("program", "host_image", "weight_image"):
        (tmp_path / name).write_bytes(job[name])
    cli("exec", str(tmp_path / "program"), "--host-in", str(tmp_path / "host_image"),
        "--weights-in", str(tmp_path / "weight_image"), "--config", "small-16", "--quiet")
    layer_jobs = tpusim.compile(model, synthetic=2, config="small-16", host_im2col=True)
    assert [j["name"] for j in layer_jobs] == ["conv1", "fc1"]
    assert all(j["program"][:8] == b"TPUSIMP1" for j in layer_jobs)
    model.save(tmp_path / "saved")
    assert tpusim.Model(tmp_path / "saved").quantized


def test_from_torch_runs_a_module_bit_exact_on_both_formats():
    torch = pytest.importorskip("torch")
    torch.manual_seed(1)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(),
                              torch.nn.MaxPool2d(2), torch.nn.Flatten(), torch.nn.Linear(8 * 4 * 4, 6))
    x = torch.randn(4, 3, 8, 8)
    for config in ("small-16", "tpu-v2"):
        y, report = tpusim.from_torch(net, x, config=config)
        assert report["bit_exact"] and report["cycles"] > 0 and y.shape == (4, 6)
        assert report["torch"]["inputs"] == 4 and report["torch"]["top1_agree"] >= 3
    # A module on 1 x 32 x 32 inputs takes any floats, as in PyTorch (not MNIST's pixels).
    net1 = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 5, stride=4), torch.nn.ReLU(),
                               torch.nn.Flatten(), torch.nn.Linear(4 * 7 * 7, 3))
    _, report = tpusim.from_torch(net1, torch.randn(2, 1, 32, 32), config="small-16")
    assert report["bit_exact"]


@pytest.mark.parametrize("last", ["Softmax", "LogSoftmax"])
def test_from_torch_compares_a_final_softmax_as_probabilities(last):
    torch = pytest.importorskip("torch")
    torch.manual_seed(2)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(),
                              torch.nn.Flatten(), torch.nn.Linear(8 * 8 * 8, 5),
                              getattr(torch.nn, last)(dim=1))
    x = torch.randn(4, 3, 8, 8)
    # A softmax moves no probability by more than half the largest change of a logit (its
    # Jacobian's rows sum to 2p(1 - p) in absolute value), so logits within 0.1 of PyTorch's
    # give probabilities within 0.05; the logits against the probabilities were 0.718 apart.
    for config in ("tpu-v2", "small-16"):
        _, report = tpusim.from_torch(net, x, config=config)
        t = report["torch"]
        assert t["compared"] == "probabilities" and t["max_abs_output"] <= 1, t
        assert t["max_abs_diff"] < 0.05 and t["top1_agree"] >= 3, (config, t)


def test_from_torch_names_the_module_not_a_temporary_file():
    torch = pytest.importorskip("torch")
    net = torch.nn.Sequential(torch.nn.Conv1d(3, 4, 3), torch.nn.ReLU())
    with pytest.raises(ValueError) as e:
        tpusim.from_torch(net, torch.randn(2, 3, 16), config="small-16")
    assert str(e.value).startswith("the ONNX export of Sequential: node "), str(e.value)
    assert "reads 'input', the model's input sequences (NTX); tpusim reads sequences with an " \
           "LSTM node only" in str(e.value), str(e.value)


def test_from_torch_runs_a_transformer_encoder_on_a_bf16_chip():
    torch = pytest.importorskip("torch")
    torch.manual_seed(4)
    layer = torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
    encoder = torch.nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
    x = torch.randn(2, 8, 32)
    summary = tpusim.import_torch(encoder, x, quantize=False).summary()
    assert "layer_norm" in summary and "matmul" in summary and "softmax" in summary, summary
    outputs, report = tpusim.from_torch(encoder, x, config="tpu-v2")
    assert report["bit_exact"] and report["mismatches"] == 0, report
    assert outputs.shape == (2, 256) and report["torch"]["max_abs_diff"] < 0.1, report["torch"]
    with pytest.raises(ValueError) as e:
        tpusim.from_torch(encoder, x, config="tpu-v1")
    assert "no floating-point unit" in str(e.value), str(e.value)


def test_generate_gives_pytorchs_greedy_tokens():
    torch = pytest.importorskip("torch")
    import importlib.util
    import os
    spec = importlib.util.spec_from_file_location(
        "make_transformers", os.path.join(os.path.dirname(__file__), "..", "..", "models",
                                          "onnx", "make_transformers.py"))
    make = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make)
    torch.manual_seed(5)
    gpt = make.Gpt(make.parser().parse_args(["--out", "unused", "--tokens", "12"])).eval()
    model = tpusim.import_torch(gpt, torch.zeros(1, 12, dtype=torch.int64), quantize=False)
    context = [3, 1, 4, 1]
    with torch.no_grad():
        while len(context) < 12:
            context.append(int(gpt(torch.tensor([context]))[0, -1].argmax()))
    tokens, report = tpusim.generate(model, [3, 1, 4, 1], tokens=8)
    assert tokens.tolist() == context[4:] and report["context"] == 12, (tokens, context)
    # On a bf16 chip with a key/value cache: tpusim checks each position's logits against the
    # CPU bf16 reference bit for bit (RuntimeError otherwise).
    chip, report = tpusim.generate(model, [3, 1, 4, 1], tokens=8, config="tpu-v2")
    assert len(chip) == 8 and report["mismatches"] == 0 and report["checked"], report
    assert report["decode"]["images"] == 7 and report["prefill"]["cycles"] > 0
    none, timed = tpusim.generate(model, [3, 1, 4, 1], tokens=8, config="tpu-v2",
                                  timing_only=True)
    assert none is None and timed["decode"]["cycles"] == report["decode"]["cycles"]
    with pytest.raises(ValueError, match="reads 12 tokens"):
        tpusim.generate(model, [3, 1, 4, 1], tokens=9)


def lstm_classifier(torch):
    """nn.LSTM (batch first) and a Linear on its last h: where a sequence task starts."""

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = torch.nn.LSTM(5, 20, batch_first=True)
            self.fc = torch.nn.Linear(20, 4)

        def forward(self, x):
            _, (h, _) = self.lstm(x)
            return self.fc(h[-1])

    return Net().eval()


def test_from_torch_runs_an_lstm_bit_exact():
    torch = pytest.importorskip("torch")
    torch.manual_seed(3)
    net = lstm_classifier(torch)
    x = torch.randn(8, 6, 5)  # 8 sequences of 6 steps of 5 values, as the module takes them
    y, report = tpusim.from_torch(net, x, config="small-16")
    assert report["bit_exact"] and y.shape == (8, 4)
    t = report["torch"]
    assert t["top1_agree"] >= 7 and t["max_abs_diff"] < 0.1, t


def test_sweep_returns_one_row_per_point(tmp_path):
    spec = {"name": "py", "base": {"config": "small-16", "model": "models/lenet5", "images": 64,
                                   "batch": 64, "engine": "fast"},
            "axes": {"array_dim": [8, 16]}, "metrics": ["cycles_per_image", "utilization"]}
    here = os.getcwd()
    os.chdir(_core.source_dir())  # the spec's model path is relative to here
    try:
        rows = tpusim.sweep(spec, out=tmp_path / "sweep")
    finally:
        os.chdir(here)
    assert [r["array_dim"] for r in rows] == [8, 16] and all(r["status"] == "ok" for r in rows)
    assert rows[0]["cycles_per_image"] > rows[1]["cycles_per_image"] > 0
    assert (tmp_path / "sweep" / "results.csv").exists()
    spec["axes"]["array_dim"] = [1]
    with pytest.raises(ValueError, match="array_dim 1 is out of range"):
        tpusim.sweep(spec)


def test_teach_records_every_cycle_of_the_rtl(tmp_path):
    a = np.array([[1, 2], [3, 4], [5, 6]], dtype=np.int8)
    b = np.array([[1, -1, 2], [0, 3, 1]], dtype=np.int8)
    lesson = tpusim.teach(a, b, array=4, html=tmp_path / "lesson.html")
    assert lesson["bit_exact"] and lesson["dataflow"] == "ws"
    assert len(lesson["frames"]) == lesson["cycles"] > 0
    assert np.array_equal(np.array(lesson["c"]), a.astype(np.int32) @ b.astype(np.int32))
    assert (tmp_path / "lesson.html").read_text().startswith("<!doctype html>")
    both = tpusim.teach(a, b, array=4, dataflow="both")
    assert [x["dataflow"] for x in both] == ["ws", "os"]
    bf16 = tpusim.teach(a.astype(np.float32) / 2, b.astype(np.float32), array=4)
    assert bf16["dtype"] == "bf16" and bf16["bit_exact"]
    with pytest.raises(ValueError, match="output-stationary teaching array is int8 only"):
        tpusim.teach(a.astype(np.float32), b.astype(np.float32), dataflow="both")
    with pytest.raises(ValueError, match="teach records at most"):
        tpusim.teach(np.ones((400, 8), np.int8), np.ones((8, 8), np.int8), array=2)


@pytest.mark.parametrize("call, error, message", [
    (lambda: tpusim.run(engine="systemc"), ValueError, "engine must be one of fast, rtl"),
    (lambda: tpusim.run(images=0), ValueError, "images must be a whole number"),
    (lambda: tpusim.run(images=20000), ValueError, "images=20000 is more than the 10000 test images"),
    (lambda: tpusim.run(batch=0), ValueError, "batch must be a whole number"),
    (lambda: tpusim.run(inputs=[1, 2]), TypeError, "inputs must be a NumPy array"),
    (lambda: tpusim.run(inputs=np.zeros((2, 1, 32, 32))), TypeError, "inputs must be a float32"),
    (lambda: tpusim.run(inputs=np.zeros((2, 3, 32, 32), np.float32)), ValueError,
     "inputs: the inputs are 2 x 3 x 32 x 32; model 'lenet5' takes N x 1 x 32 x 32"),
    (lambda: tpusim.run(inputs=np.zeros((2, 1, 32, 64), np.float32)[:, :, :, ::2]), ValueError,
     "inputs is not C-contiguous"),
    (lambda: tpusim.run(inputs=np.zeros((2, 1, 32, 32), np.float32), synthetic=2), ValueError,
     "give one"),
    (lambda: tpusim.run(model="no-such-model"), ValueError, "cannot open no-such-model/model.json"),
    (lambda: tpusim.run(model=3), TypeError, "model must be a tpusim.Model or a model folder"),
    (lambda: tpusim.run(config="no-such-chip"), ValueError, "no-such-chip"),
    (lambda: tpusim.run(images=8, config=tpusim.Config("small-16", array_dim=5), engine="rtl"),
     ValueError, "^config 'small-16': no whole-chip RTL model for a 5 x 5 array"),
    (lambda: tpusim.import_onnx("missing.onnx"), ValueError, "missing.onnx"),
    (lambda: tpusim.teach(np.ones((2, 2)), np.ones((2, 2))), TypeError, "a is a float64 array"),
    (lambda: tpusim.sweep(3), TypeError, "spec must be a dict or a spec file"),
    # Errors name what the user gave, never the temporary files made from it.
    (lambda: tpusim.sweep({"axes": {"batch": [8]}, "nope": 1}), ValueError,
     "^the spec dict: unknown key 'nope'"),
])
def test_bad_input_names_what_is_wrong(call, error, message):
    with pytest.raises(error, match=message.replace("(", r"\(")):
        call()
