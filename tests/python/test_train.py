"""tpusim.train from Python (docs/python.md): training on the chip, the weights as NumPy
arrays equal to the CLI's model folder, the CLI's report; bad input as ValueError."""

import json
import os
import subprocess

import numpy as np
import pytest

import tpusim
from tpusim import _core


def have_mnist():
    try:
        tpusim.run("models/lenet5", images=1, config="small-16", engine="fast")
        return True
    except ValueError:
        return False


@pytest.mark.skipif(not have_mnist(), reason="no MNIST data")
def test_train_gives_the_clis_weights_and_report(tmp_path):
    weights, report = tpusim.train(config="tpu-v2", limit=320, epochs=1, verify=True)
    subprocess.run([_core.cli_path(), "train", "--config", "tpu-v2", "--limit", "320", "--epochs",
                    "1", "--out", str(tmp_path / "m"), "-q"], check=True, stdin=subprocess.DEVNULL)
    assert sorted(weights) == ["fc1.bias", "fc1.weights", "fc2.bias", "fc2.weights"]
    for name, w in weights.items():
        assert w.dtype == np.float32
        np.testing.assert_array_equal(w, np.load(tmp_path / "m" / (name + ".npy")))
    epoch = report["epochs"][0]
    assert epoch["steps"] == 5 and epoch["verified_steps"] == 5
    assert report["config"] == "tpu-v2" and report["optimizer"] == "adam"
    assert [p["pass"] for p in report["passes"]][:3] == ["fc1 forward", "fc2 forward", "loss"]
    passes = sum(p["energy_pj"] for p in report["passes"])
    assert passes == pytest.approx(epoch["energy_j"] * 1e12, rel=1e-12)


def test_train_timing_only_times_a_step_without_data(tmp_path):
    none, report = tpusim.train(arch="residual", config="tpu-v2", batch=8, timing_only=True)
    _, hbm = tpusim.train(arch="residual", config="tpu-v2", batch=8, timing_only=True,
                          state_in="hbm")
    assert hbm["state_in_hbm"] and not report["state_in_hbm"]
    assert hbm["step"]["cycles"] > report["step"]["cycles"]
    _, maps = tpusim.train(arch="residual", config="tpu-v2", batch=8, timing_only=True,
                           state_in="hbm-with-maps")
    assert maps["in_hbm_too"] == "hbm-with-maps" and hbm["in_hbm_too"] == ""
    assert maps["step"]["cycles"] > hbm["step"]["cycles"]
    subprocess.run([_core.cli_path(), "train", "--config", "tpu-v2", "--arch", "residual",
                    "--batch", "8", "--timing-only", "-q", "--json", str(tmp_path / "r.json")],
                   check=True, stdin=subprocess.DEVNULL)
    with open(tmp_path / "r.json") as f:
        cli = json.load(f)
    assert none is None and report["timing_only"]
    assert report["step"]["cycles"] == cli["step"]["cycles"] > 0
    assert sum(p["counters"]["cycles"] for p in report["passes"]) == report["step"]["cycles"]


@pytest.mark.skipif(not have_mnist(), reason="no MNIST data")
def test_train_writes_a_steps_timeline(tmp_path):
    tpusim.train(config="tpu-v2", limit=256, epochs=1, timeline=tmp_path / "t.json",
                 timeline_step=3)
    t = json.load(open(tmp_path / "t.json"))
    assert t["otherData"]["step"] == 3
    tracks = {e["args"]["name"] for e in t["traceEvents"] if e["ph"] == "M" and "name" in e["args"]}
    assert "passes (forward, loss, backward, update)" in tracks


@pytest.mark.skipif(not have_mnist(), reason="no MNIST data")
def test_train_the_cnn_on_the_chip():
    weights, report = tpusim.train(arch="lenet5", batch=8, limit=16, epochs=1, verify=True)
    assert weights["conv1.weights"].shape == (3, 3, 1, 6)
    assert report["epochs"][0]["steps"] == 2 and report["epochs"][0]["verified_steps"] == 2
    assert "conv1 weight gradient" in [p["pass"] for p in report["passes"]]


@pytest.mark.skipif(not have_mnist(), reason="no MNIST data")
def test_train_a_graph_on_the_chip():
    weights, report = tpusim.train(arch="residual", batch=4, limit=8, epochs=1, verify=True)
    assert weights["block1_conv2.weights"].shape == (3, 3, 16, 16)
    assert report["epochs"][0]["verified_steps"] == 2
    passes = [p["pass"] for p in report["passes"]]
    assert "block1_add gradient" in passes and "gap forward" in passes


@pytest.mark.skipif(not have_mnist(), reason="no MNIST data")
def test_train_a_torch_network_on_the_chip():
    torch = pytest.importorskip("torch")
    torch.manual_seed(1)
    net = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3, padding=1), torch.nn.ReLU(),
                              torch.nn.MaxPool2d(3, 2, 1), torch.nn.Conv2d(4, 4, 3, 2, 1),
                              torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(256, 10),
                              torch.nn.Softmax(dim=1))
    m = tpusim.import_torch(net, torch.zeros(1, 1, 32, 32), quantize=False, dataset="mnist")
    weights, report = tpusim.train(model=m, batch=4, limit=8, epochs=1, verify=True)
    assert weights["conv1.weights"].shape == (3, 3, 1, 4)
    assert report["epochs"][0]["verified_steps"] == 2
    assert "maxpool1 gradient" in [p["pass"] for p in report["passes"]]


@pytest.mark.skipif(not have_mnist(), reason="no MNIST data")
def test_train_on_both_cores_of_tpu_v3():
    weights, report = tpusim.train(arch="lenet5", config="tpu-v3", batch=8, limit=16, epochs=1,
                                   verify=True)
    assert report["cores"] == 2 and report["epochs"][0]["verified_steps"] == 2
    assert "gradient sum" in [p["pass"] for p in report["passes"]]
    _, one = tpusim.train(arch="lenet5", config="tpu-v3", batch=8, limit=16, epochs=1, cores=1)
    assert one["cores"] == 1 and "gradient sum" not in [p["pass"] for p in one["passes"]]


def test_train_refuses_bad_input():
    with pytest.raises(ValueError, match="int8 chip"):
        tpusim.train(config="small-16")
    with pytest.raises(ValueError, match="epochs"):
        tpusim.train(epochs=0)
    with pytest.raises(ValueError, match="a --batch of at most"):
        tpusim.train(arch="lenet5", batch=200, limit=200)
    with pytest.raises(ValueError, match="engine"):
        tpusim.train(engine="gpu")
    with pytest.raises(ValueError, match="timeline_step"):
        tpusim.train(timeline="t.json", timeline_step=0)
    with pytest.raises(ValueError, match="multiple of 2"):
        tpusim.train(config="tpu-v3", batch=63)
    with pytest.raises(ValueError, match="has 1 core"):
        tpusim.train(config="tpu-v2", cores=2)


def test_train_times_torchvisions_resnet18_on_tpu_v3():
    """A network whose state and F go to HBM (docs/training.md, "The state in HBM"):
    torchvision's ResNet-18 at 32 x 32 x 3, timed on tpu-v3's two cores, no faster than its
    bound."""
    torch = pytest.importorskip("torch")
    torchvision = pytest.importorskip("torchvision")
    torch.manual_seed(0)
    net = torch.nn.Sequential(torchvision.models.resnet18(num_classes=10), torch.nn.Softmax(1))
    model = tpusim.import_torch(net, torch.zeros(1, 3, 32, 32), quantize=False)
    none, report = tpusim.train(model=model, config="tpu-v3", batch=8, timing_only=True)
    step = report["step"]
    assert none is None and report["state_in_hbm"] and report["cores"] == 2
    assert step["cycles"] >= step["bound"]["cycles"] > 0
    assert [p["pass"] for p in report["passes"]][1].endswith(" forward")
