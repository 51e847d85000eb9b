"""LayerNormalization (17), RMSNormalization (23) and onnxruntime's
SimplifiedLayerNormalization: every type (and X/scale type pair where the
types are independent), SIMD level, 1 and 2 threads, axes, broadcast
scales, optional outputs, constant rows, empty tensors and bad input,
against float64 oracles (and onnx.reference for float32)."""

from __future__ import annotations

import numpy as np
import pytest
from norm_testlib import LEVELS, NP_TYPE, TYPES, assert_close, layernorm_ref, make_model, rand, rms_ref, session
from onnx import numpy_helper
from onnx.reference import ReferenceEvaluator

import olc_core

ROW_LENGTHS = (1, 7, 8, 9, 17, 33, 768, 4095, 4096, 4097)


def ln_model(t, axis=-1, eps=None, bias=True, outputs=1, stat_t="float32", scale_const=None):
    attrs = {"axis": axis}
    if eps is not None:
        attrs["epsilon"] = eps
    outs = [("y", t), ("mean", stat_t if outputs > 1 else None), ("inv", stat_t if outputs > 2 else None)]
    outs = outs[:max(outputs, 1)]
    inits = [numpy_helper.from_array(scale_const, "s")] if scale_const is not None else []
    return make_model("LayerNormalization", [("x", t), ("s", t), ("b", t if bias else None)], outs, attrs,
                      opset=17, initializers=inits)


def run_ln(x, s, b, axis=-1, level="avx512", threads=1, outputs=1, eps=None):
    t = next(k for k, v in NP_TYPE.items() if v == x.dtype)
    sess = session(ln_model(t, axis, eps, b is not None, outputs), level, threads)
    feeds = {"x": x, "s": s}
    if b is not None:
        feeds["b"] = b
    res = sess.run(None, feeds)
    assert sess.kernel_usage() == ["olc_normalization::LayerNormalization"]
    return res


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("t", TYPES)
def test_layernorm_rows(t, level):
    rng = np.random.default_rng(10)
    for n in ROW_LENGTHS:
        x = rand(rng, (3, n), t, -3, 5)
        s, b = rand(rng, (n,), t), rand(rng, (n,), t)
        y, mean, inv = run_ln(x, s, b, level=level, outputs=3)
        ry, rm, ri = layernorm_ref(x, s, b, -1, 1e-5)
        assert_close(y, ry, t, f"Y {t} {level} n={n}")
        assert mean.dtype == np.float32 and mean.shape == (3, 1)
        assert_close(mean, rm, "float32", "Mean")
        assert_close(inv, ri, "float32", "InvStdDev")


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("level", LEVELS)
def test_layernorm_axes_ranks_broadcast(level, threads):
    rng = np.random.default_rng(11)
    for shape in [(5,), (4, 6), (2, 3, 40), (2, 3, 4, 5), (2, 1, 3, 2, 4, 3), (64, 300)]:
        r = len(shape)
        for axis in range(-r, r):
            a = axis + r if axis < 0 else axis
            norm_shape = shape[a:]
            x = rand(rng, shape, "float32")
            # full scale, scale with a leading 1, and a broadcast scale/bias
            scales = [norm_shape] + ([(1,) + norm_shape] if len(norm_shape) < r else [])
            if len(norm_shape) >= 2:
                scales.append((1,) * (len(norm_shape) - 1) + norm_shape[-1:])
            for ss in scales:
                s = rand(rng, ss, "float32")
                b = rand(rng, norm_shape[-1:], "float32")
                y, = run_ln(x, s, b, axis, level, threads)
                assert_close(y, layernorm_ref(x, s, b, axis, 1e-5)[0], "float32", f"{shape} axis={axis} scale={ss}")


def test_layernorm_matches_onnx_reference():
    rng = np.random.default_rng(12)
    x = rand(rng, (4, 5, 33), "float32")
    s, b = rand(rng, (5, 33), "float32"), rand(rng, (5, 33), "float32")
    m = ln_model("float32", 1, 1e-3, True, 3)
    expected = ReferenceEvaluator(m).run(None, {"x": x, "s": s, "b": b})
    got = run_ln(x, s, b, 1, outputs=3, eps=1e-3)
    for g, e in zip(got, expected):
        assert_close(g, e.astype(np.float64), "float32")


@pytest.mark.parametrize("level", LEVELS)
def test_layernorm_constant_rows_and_no_bias(level):
    # Exactly representable constants: the mean is exact, Y = 0 * scale.
    for n in (1, 8, 9, 4097):
        x = np.empty((4, n), np.float32)
        x[0], x[1], x[2], x[3] = 3.0, -1.5, 0.0, 1024.0
        s = np.linspace(-2, 2, n).astype(np.float32)
        y, mean, inv = run_ln(x, s, None, level=level, outputs=3)
        assert np.all(y == 0.0)
        assert np.array_equal(mean.ravel(), np.array([3.0, -1.5, 0.0, 1024.0], np.float32))
        assert_close(inv, np.full((4, 1), 1 / np.sqrt(np.float32(1e-5))), "float32")


def test_layernorm_constant_scale_initializer():
    rng = np.random.default_rng(13)
    s = rand(rng, (64,), "float32")
    m = ln_model("float32", bias=False, scale_const=s)
    sess = session(m, "avx512", 1)
    x = rand(rng, (8, 64), "float32")
    y, = sess.run(None, {"x": x})
    assert_close(y, layernorm_ref(x, s, None, -1, 1e-5)[0], "float32")


def test_layernorm_empty():
    for shape, axis in [((0, 8), -1), ((3, 0), -1), ((2, 0, 4), -1)]:
        x = np.zeros(shape, np.float32)
        s = np.ones(shape[axis:] if axis != -1 else shape[-1:], np.float32)
        y, mean, _inv = run_ln(x, s, None, axis, outputs=3)
        assert y.shape == shape and mean.shape == shape[:-1] + (1,)
        if shape[-1] == 0 and mean.size:
            assert np.all(np.isnan(mean))  # mean of an empty row: 0 / 0


def test_layernorm_bad_input():
    x = np.zeros((2, 3, 4), np.float32)
    with pytest.raises(olc_core.OlcError, match=r"scale shape \[5\] does not broadcast to the normalized shape \[4\]"):
        run_ln(x, np.ones(5, np.float32), None)
    with pytest.raises(olc_core.OlcError, match=r"B shape \[3, 4\] does not broadcast"):
        run_ln(x, np.ones(4, np.float32), np.ones((3, 4), np.float32))
    with pytest.raises(olc_core.OlcError, match=r"axis 3 is out of range"):
        run_ln(x, np.ones(4, np.float32), None, axis=3)
    with pytest.raises(olc_core.OlcError, match=r"more dimensions than X"):
        run_ln(x, np.ones((1, 1, 1, 4), np.float32), None)


# ---------------------------------------------------------------- RMS / Simplified

def rms_model(op, xt, st, axis=-1, eps=None, inv_out=None):
    attrs = {"axis": axis}
    if eps is not None:
        attrs["epsilon"] = eps
    outs = [("y", st)] + ([("inv", inv_out)] if inv_out else [])
    return make_model(op, [("x", xt), ("s", st)], outs, attrs, opset=23 if op == "RMSNormalization" else 17)


def run_rms(op, x, s, axis=-1, level="avx512", threads=1, inv_out=None, eps=None):
    xt = next(k for k, v in NP_TYPE.items() if v == x.dtype)
    st = next(k for k, v in NP_TYPE.items() if v == s.dtype)
    sess = session(rms_model(op, xt, st, axis, eps, inv_out), level, threads)
    res = sess.run(None, {"x": x, "s": s})
    assert sess.kernel_usage() == [f"olc_normalization::{op}"]
    return res


RMS_OPS = ("RMSNormalization", "SimplifiedLayerNormalization")
TYPE_PAIRS = [(a, b) for a in TYPES for b in TYPES if (a == "float64") == (b == "float64") or a == b] + \
    [("float32", "float64")]


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("xt,st", TYPE_PAIRS)
@pytest.mark.parametrize("op", RMS_OPS)
def test_rms_types_rows(op, xt, st, level):
    rng = np.random.default_rng(20)
    for n in (1, 7, 8, 9, 64, 4095, 4097):
        x, s = rand(rng, (3, n), xt), rand(rng, (n,), st)
        y, = run_rms(op, x, s, level=level)
        assert y.dtype == NP_TYPE[st]
        assert_close(y, rms_ref(x, s, -1, 1e-5)[0], st, f"{op} {xt}/{st} {level} n={n}")


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("op", RMS_OPS)
def test_rms_axes(op, threads):
    rng = np.random.default_rng(21)
    for shape in [(7,), (3, 5), (2, 3, 4, 5), (2, 2, 1, 3, 2, 5), (128, 96)]:
        r = len(shape)
        for axis in range(-r, r):
            a = axis + r if axis < 0 else axis
            x, s = rand(rng, shape, "float32"), rand(rng, shape[a:], "float32")
            for level in LEVELS:
                y, = run_rms(op, x, s, axis, level, threads)
                assert_close(y, rms_ref(x, s, axis, 1e-5)[0], "float32", f"{op} {shape} axis={axis} {level}")


def test_rms_matches_onnx_reference():
    rng = np.random.default_rng(22)
    x, s = rand(rng, (4, 3, 33), "float32"), rand(rng, (3, 33), "float32")
    m = rms_model("RMSNormalization", "float32", "float32", 1, 1e-4)
    expected, = ReferenceEvaluator(m).run(None, {"x": x, "s": s})
    y, = run_rms("RMSNormalization", x, s, 1, eps=1e-4)
    assert_close(y, expected.astype(np.float64), "float32")


@pytest.mark.parametrize("xt,st", [("float32", "float32"), ("float16", "float32"), ("float32", "float16"),
                                   ("float16", "float16"), ("float64", "float64")])
def test_simplified_matches_onnxruntime(xt, st):
    """onnxruntime's own kernel as an oracle, on the type pairs it registers."""
    ort = pytest.importorskip("onnxruntime")
    rng = np.random.default_rng(23)
    x, s = rand(rng, (5, 3, 96), xt), rand(rng, (96,), st)
    m = rms_model("SimplifiedLayerNormalization", xt, st, -1, 1e-6, inv_out="float32")
    so = ort.SessionOptions()
    so.log_severity_level = 3
    expected = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(
        None, {"x": x, "s": s})
    got = run_rms("SimplifiedLayerNormalization", x, s, eps=1e-6, inv_out="float32")
    assert got[0].dtype == expected[0].dtype and got[1].dtype == expected[1].dtype
    assert got[1].shape == expected[1].shape == (5, 3, 1)
    assert_close(got[0], expected[0].astype(np.float64), st, "Y vs onnxruntime")
    assert_close(got[1], expected[1].astype(np.float64), "float32", "inv_std_var vs onnxruntime")
    # and the float64 oracle
    ry, ri = rms_ref(x, s, -1, 1e-6)
    assert_close(got[0], ry, st)
    assert_close(got[1], ri, "float32")


@pytest.mark.parametrize("op", RMS_OPS)
def test_rms_zero_rows_and_empty(op):
    x = np.zeros((3, 9), np.float32)
    y, = run_rms(op, x, np.ones(9, np.float32))
    assert np.all(y == 0)
    for shape in [(0, 9), (4, 0)]:
        y, = run_rms(op, np.zeros(shape, np.float32), np.ones(shape[-1:], np.float32))
        assert y.shape == shape


@pytest.mark.parametrize("op", RMS_OPS)
def test_rms_bad_input(op):
    x = np.zeros((2, 8), np.float32)
    with pytest.raises(olc_core.OlcError, match=r"scale shape \[4\] does not broadcast"):
        run_rms(op, x, np.ones(4, np.float32))
    with pytest.raises(olc_core.OlcError, match=r"axis -3 is out of range"):
        run_rms(op, x, np.ones(8, np.float32), axis=-3)


def test_non_temporal_output_path():
    from norm_testlib import stream_always
    rng = np.random.default_rng(24)
    with stream_always("LayerNormalization", "RMSNormalization", "SimplifiedLayerNormalization"):
        for n in (1, 9, 16, 33, 4097):
            x, s, b = rand(rng, (5, n), "float32"), rand(rng, (n,), "float32"), rand(rng, (n,), "float32")
            for level in LEVELS:
                for threads in (1, 2):
                    sess = session(ln_model("float32"), level, threads, key=("nt-ln",))
                    y, = sess.run(None, {"x": x, "s": s, "b": b})
                    want = "scalar" if level == "scalar" else f"{level},stream"
                    assert sess.kernel_usage_details() == [f"olc_normalization::LayerNormalization[{want}]"]
                    assert_close(y, layernorm_ref(x, s, b, -1, 1e-5)[0], "float32", f"LN n={n} {level}")
                    for op in RMS_OPS:
                        sess = session(rms_model(op, "float32", "float32"), level, threads, key=("nt", op))
                        y, = sess.run(None, {"x": x, "s": s})
                        assert_close(y, rms_ref(x, s, -1, 1e-5)[0], "float32", f"{op} n={n} {level}")
