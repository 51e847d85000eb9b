"""BatchNormalization (inference), GroupNormalization (18 and 21),
InstanceNormalization, LpNormalization and MeanVarianceNormalization:
types, SIMD levels, threads, ranks, axes, empty tensors, bad input and the
refused forms (training mode), against float64 oracles and onnx.reference."""

from __future__ import annotations

import numpy as np
import pytest
from norm_testlib import (
    LEVELS,
    NP_TYPE,
    TYPES,
    assert_close,
    batchnorm_ref,
    groupnorm_ref,
    instancenorm_ref,
    lp_ref,
    make_model,
    mvn_ref,
    rand,
    session,
)
from onnx.reference import ReferenceEvaluator

import olc_core


def tname(a):
    return next(k for k, v in NP_TYPE.items() if v == a.dtype)


def run(op, opset, arrays, attrs=None, level="avx512", threads=1, n_out=1):
    names = [f"i{k}" for k in range(len(arrays))]
    ins = [(n, tname(a)) for n, a in zip(names, arrays)]
    outs = [("y", tname(arrays[0]))] + [(f"o{k}", tname(arrays[0])) for k in range(1, n_out)]
    m = make_model(op, ins, outs, attrs or {}, opset=opset)
    s = session(m, level, threads)
    res = s.run(None, dict(zip(names, arrays)))
    assert s.kernel_usage() == [f"olc_normalization::{op}"], s.kernel_plan()
    return res[0]


SPATIAL = [(2, 3), (2, 3, 7), (1, 4, 3, 5), (2, 2, 2, 3, 3), (1, 3, 1, 2, 2, 9), (2, 16, 33, 17)]


def bn_opsets(t):
    return (9, 14, 15) if t != "bfloat16" else (14, 15)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("t", TYPES)
def test_batchnorm(t, level, threads):
    rng = np.random.default_rng(30)
    for shape in SPATIAL:
        c = shape[1]
        x = rand(rng, shape, t)
        sc, b, mean = rand(rng, (c,), t), rand(rng, (c,), t), rand(rng, (c,), t)
        var = rand(rng, (c,), t, 0.1, 3.0)
        for opset in bn_opsets(t):
            y = run("BatchNormalization", opset, [x, sc, b, mean, var], {"epsilon": 1e-3}, level, threads)
            assert_close(y, batchnorm_ref(x, sc, b, mean, var, np.float32(1e-3)), t, f"BN-{opset} {shape}")


def test_batchnorm_mixed_types_opset15():
    rng = np.random.default_rng(31)
    x = rand(rng, (2, 3, 5), "float16")
    sc, b = rand(rng, (3,), "float32"), rand(rng, (3,), "float32")
    mean, var = rand(rng, (3,), "float64"), rand(rng, (3,), "float64", 0.5, 2)
    y = run("BatchNormalization", 15, [x, sc, b, mean, var])
    assert y.dtype == np.float16
    assert_close(y, batchnorm_ref(x, sc, b, mean, var, np.float32(1e-5)), "float16")


def test_batchnorm_matches_onnx_reference():
    rng = np.random.default_rng(32)
    x = rand(rng, (2, 3, 4, 5), "float32")
    p = [rand(rng, (3,), "float32") for _ in range(3)] + [rand(rng, (3,), "float32", 0.5, 2)]
    m = make_model("BatchNormalization", [(f"i{k}", "float32") for k in range(5)], [("y", "float32")], {}, opset=15)
    expected, = ReferenceEvaluator(m).run(None, {f"i{k}": a for k, a in enumerate([x] + p)})
    assert_close(run("BatchNormalization", 15, [x] + p), expected.astype(np.float64), "float32")


def test_batchnorm_training_mode_runs_on_fallback():
    m = make_model("BatchNormalization", [(f"i{k}", "float32") for k in range(5)],
                   [("y", "float32"), ("rm", "float32"), ("rv", "float32")], {"training_mode": 1}, opset=15)
    s = olc_core.Session(m)
    plan = s.kernel_plan()
    assert plan[0].kernel.startswith("onnx.reference"), plan
    assert "training_mode=1" in plan[0].reason
    with pytest.raises(olc_core.NoKernelError, match="training_mode=1 is not implemented"):
        olc_core.Session(m, strict=True)


def test_batchnorm_bad_input():
    x = np.zeros((2, 3, 4), np.float32)
    good = np.ones(3, np.float32)
    with pytest.raises(olc_core.OlcError, match=r"input_var must have shape \[3\]"):
        run("BatchNormalization", 15, [x, good, good, good, np.ones(4, np.float32)])
    with pytest.raises(olc_core.OlcError, match=r"rank >= 2"):
        run("BatchNormalization", 15, [np.zeros(3, np.float32), good, good, good, good])


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("t", TYPES)
def test_instancenorm(t, level):
    rng = np.random.default_rng(33)
    for shape in SPATIAL:
        c = shape[1]
        x = rand(rng, shape, t)
        sc, b = rand(rng, (c,), t), rand(rng, (c,), t)
        for opset in ((6, 22) if t != "bfloat16" else (22,)):
            for threads in (1, 2):
                y = run("InstanceNormalization", opset, [x, sc, b], {"epsilon": 1e-4}, level, threads)
                assert_close(y, instancenorm_ref(x, sc, b, np.float32(1e-4)), t, f"IN-{opset} {shape}")


def test_instancenorm_matches_onnx_reference_and_constant_rows():
    rng = np.random.default_rng(34)
    x = rand(rng, (2, 3, 4, 5), "float32")
    x[0, 1] = 2.5  # a constant channel: output = B
    sc, b = rand(rng, (3,), "float32"), rand(rng, (3,), "float32")
    m = make_model("InstanceNormalization", [("i0", "float32"), ("i1", "float32"), ("i2", "float32")],
                   [("y", "float32")], {}, opset=22)
    expected, = ReferenceEvaluator(m).run(None, {"i0": x, "i1": sc, "i2": b})
    y = run("InstanceNormalization", 22, [x, sc, b])
    assert_close(y, expected.astype(np.float64), "float32")
    assert np.all(y[0, 1] == b[1])


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("t", TYPES)
def test_groupnorm(t, level):
    rng = np.random.default_rng(35)
    for shape, groups in [((2, 4, 5), 2), ((1, 6, 3, 3), 3), ((2, 8, 17), 8), ((2, 8, 17), 1), ((1, 32, 16, 16), 8),
                          ((3, 4), 2)]:
        x = rand(rng, shape, t)
        for opset in (18, 21):
            pc = groups if opset < 21 else shape[1]
            sc, b = rand(rng, (pc,), t), rand(rng, (pc,), t)
            for threads in (1, 2):
                y = run("GroupNormalization", opset, [x, sc, b], {"num_groups": groups, "epsilon": 1e-5}, level,
                        threads)
                assert_close(y, groupnorm_ref(x, sc, b, groups, np.float32(1e-5), opset), t,
                             f"GN-{opset} {shape} g={groups}")


def test_groupnorm_bad_input():
    x = np.zeros((2, 6, 4), np.float32)
    with pytest.raises(olc_core.OlcError, match=r"not a multiple of num_groups 4"):
        run("GroupNormalization", 21, [x, np.ones(6, np.float32), np.ones(6, np.float32)], {"num_groups": 4})
    with pytest.raises(olc_core.OlcError, match=r"scale must have shape \[6\]"):
        run("GroupNormalization", 21, [x, np.ones(3, np.float32), np.ones(6, np.float32)], {"num_groups": 3})
    with pytest.raises(olc_core.OlcError, match=r"bias must have shape \[3\]"):
        run("GroupNormalization", 18, [x, np.ones(3, np.float32), np.ones(6, np.float32)], {"num_groups": 3})


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("t", TYPES)
def test_lpnorm(t, level):
    rng = np.random.default_rng(36)
    for shape in [(7,), (3, 9), (2, 3, 17), (2, 3, 4, 5), (2, 1, 3, 2, 2, 3), (4, 4097)]:
        x = rand(rng, shape, t)
        if x.ndim >= 2:
            x[0] = 0  # zero vectors along every axis through row 0: 0 / 0 = 0
        for axis in range(-len(shape), len(shape)):
            for p in (1, 2):
                for opset in ((1, 22) if t != "bfloat16" else (22,)):
                    y = run("LpNormalization", opset, [x], {"axis": axis, "p": p}, level)
                    assert_close(y, lp_ref(x, axis, p), t, f"Lp-{opset} p={p} {shape} axis={axis}")


def test_lpnorm_matches_onnx_reference_and_bad_attrs():
    rng = np.random.default_rng(37)
    x = rand(rng, (3, 4, 5), "float32")
    x[1, :, 2] = 0
    m = make_model("LpNormalization", [("i0", "float32")], [("y", "float32")], {"axis": 1, "p": 2}, opset=22)
    expected, = ReferenceEvaluator(m).run(None, {"i0": x})
    assert_close(run("LpNormalization", 22, [x], {"axis": 1, "p": 2}), expected.astype(np.float64), "float32")
    with pytest.raises(olc_core.OlcError, match=r"'p' must be 1 or 2"):
        run("LpNormalization", 22, [x], {"axis": 1, "p": 3})
    with pytest.raises(olc_core.OlcError, match=r"axis 3 is out of range"):
        run("LpNormalization", 22, [x], {"axis": 3})


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("t", TYPES)
def test_mvn(t, level):
    rng = np.random.default_rng(38)
    cases = [((2, 3, 4, 5), None), ((2, 3, 4, 5), [1]), ((2, 3, 4, 5), [-1]), ((2, 3, 4, 5), [0, -1]),
             ((2, 3, 4, 5), [2, 3]), ((3, 7), [0]), ((2, 2, 3, 2, 3), [0, 2, 4]), ((1, 3, 1, 2, 2, 5), [0, 2, 5])]
    for shape, axes in cases:
        x = rand(rng, shape, t)
        for opset in ((9, 13) if t != "bfloat16" else (13,)):
            for threads in (1, 2):
                attrs = {} if axes is None else {"axes": axes}
                y = run("MeanVarianceNormalization", opset, [x], attrs, level, threads)
                assert_close(y, mvn_ref(x, axes or [0, 2, 3]), t, f"MVN {shape} axes={axes}")


def test_mvn_matches_onnx_reference_and_bad_axes():
    rng = np.random.default_rng(39)
    x = rand(rng, (2, 3, 4, 5), "float32")
    m = make_model("MeanVarianceNormalization", [("i0", "float32")], [("y", "float32")], {}, opset=13)
    expected, = ReferenceEvaluator(m).run(None, {"i0": x})
    assert_close(run("MeanVarianceNormalization", 13, [x]), expected.astype(np.float64), "float32")
    with pytest.raises(olc_core.OlcError, match=r"axes entry 4 is out of range"):
        run("MeanVarianceNormalization", 13, [x], {"axes": [0, 4]})
    with pytest.raises(olc_core.OlcError, match=r"repeats an axis"):
        run("MeanVarianceNormalization", 13, [x], {"axes": [1, -3]})


@pytest.mark.parametrize("t", TYPES)
def test_empty_tensors(t):
    z = np.zeros
    dt = NP_TYPE[t]
    y = run("BatchNormalization", 15, [z((0, 3, 4), dt)] + [np.ones(3, dt)] * 4)
    assert y.shape == (0, 3, 4)
    y = run("InstanceNormalization", 22, [z((2, 3, 0), dt), np.ones(3, dt), np.ones(3, dt)])
    assert y.shape == (2, 3, 0)
    y = run("GroupNormalization", 21, [z((0, 4, 2), dt), np.ones(4, dt), np.ones(4, dt)], {"num_groups": 2})
    assert y.shape == (0, 4, 2)
    y = run("LpNormalization", 22, [z((3, 0), dt)], {"axis": 0})
    assert y.shape == (3, 0)
    y = run("MeanVarianceNormalization", 13, [z((2, 0, 3, 3), dt)])
    assert y.shape == (2, 0, 3, 3)
