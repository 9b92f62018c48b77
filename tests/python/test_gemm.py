"""tpusim.gemm and tpusim.Config from Python (docs/python.md): results against NumPy, the
report, both engines, both formats, and bad input as ValueError/TypeError naming the
argument."""

import numpy as np
import pytest

import tpusim


def test_int8_gemm_equals_numpy_on_both_engines():
    rng = np.random.default_rng(1)
    a = rng.integers(-128, 128, (37, 70), dtype=np.int8)
    b = rng.integers(-128, 128, (70, 19), dtype=np.int8)
    want = a.astype(np.int32) @ b.astype(np.int32)
    reports = {}
    for engine in ("fast", "rtl"):
        c, report = tpusim.gemm(a, b, config=tpusim.Config("small-16", array_dim=4), engine=engine)
        assert c.dtype == np.int32 and c.shape == (37, 19)
        np.testing.assert_array_equal(c, want)
        assert report["matches_reference"] is True
        reports[engine] = report
    # The two engines count the same cycles (the fast engine is proven equal to the RTL).
    assert reports["fast"]["cycles"] == reports["rtl"]["cycles"] > 0


def test_the_rtl_engine_runs_again_and_again_in_one_interpreter():
    cfg = tpusim.Config("small-16", array_dim=4)
    rng = np.random.default_rng(2)
    for _ in range(20):
        a = rng.integers(-9, 10, (5, 6), dtype=np.int8)
        b = rng.integers(-9, 10, (6, 3), dtype=np.int8)
        c, _ = tpusim.gemm(a, b, config=cfg, engine="rtl")
        np.testing.assert_array_equal(c, a.astype(np.int32) @ b.astype(np.int32))


def test_bf16_gemm_takes_float32_and_gives_float32():
    a = np.array([[0.5, -1.25], [2, 3]], dtype=np.float32)
    b = np.array([[1.5, 0], [0.25, -2]], dtype=np.float32)
    c, report = tpusim.gemm(a, b, config=tpusim.Config("small-16", array_dim=4, dtype="bf16"))
    assert c.dtype == np.float32
    np.testing.assert_array_equal(c, [[0.4375, 2.5], [3.75, -6]])  # exact: halves and quarters
    assert report["matches_reference"] is True


def test_config_fields_and_errors():
    cfg = tpusim.Config("tpu-v1")
    assert cfg.array_dim == 256 and cfg.name == "tpu-v1"
    assert tpusim.Config("small-16", array_dim=8).fields["array_dim"] == 8
    with pytest.raises(ValueError, match="no_such_field"):
        tpusim.Config("small-16", no_such_field=1)
    with pytest.raises(ValueError, match="no-such-preset"):
        tpusim.Config("no-such-preset")
    with pytest.raises(AttributeError, match="no field 'nope'"):
        cfg.nope


def test_bad_arrays_name_the_argument():
    cfg = tpusim.Config("small-16", array_dim=4)
    ok = np.zeros((4, 4), dtype=np.int8)
    with pytest.raises(TypeError, match="^a is a float64 array"):
        tpusim.gemm(np.zeros((4, 4)), ok, config=cfg)
    with pytest.raises(TypeError, match="^b must be a NumPy array"):
        tpusim.gemm(ok, [[1]], config=cfg)
    with pytest.raises(ValueError, match="^a must be 2-D"):
        tpusim.gemm(np.zeros(4, dtype=np.int8), ok, config=cfg)
    with pytest.raises(ValueError, match="^b is not C-contiguous"):
        tpusim.gemm(ok, np.zeros((8, 4), dtype=np.int8)[::2], config=cfg)
    with pytest.raises(ValueError, match="a is 4 x 4 but b is 3 x 4"):
        tpusim.gemm(ok, np.zeros((3, 4), dtype=np.int8), config=cfg)
    with pytest.raises(ValueError, match=r"a\[0, 1\] is nan"):
        bad = np.zeros((2, 2), dtype=np.float32)
        bad[0, 1] = np.nan
        tpusim.gemm(bad, bad, config=tpusim.Config("small-16", array_dim=4, dtype="bf16"))
    with pytest.raises(ValueError, match="engine must be one of"):
        tpusim.gemm(ok, ok, config=cfg, engine="gpu")
    with pytest.raises(ValueError, match="no RTL model for a 5 x 5 array"):
        tpusim.gemm(ok, ok, config=tpusim.Config("small-16", array_dim=5), engine="rtl")
