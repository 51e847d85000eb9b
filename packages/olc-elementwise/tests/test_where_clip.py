"""Where (three-way broadcast, every fixed-width type), Clip (opset 6
attributes; 11, 12, 13 optional bound inputs) and SwiGLU (opset 28) against
onnx.reference on every SIMD level, 1 and 2 threads."""

from __future__ import annotations

import zlib

import numpy as np
import onnx
import pytest
from onnx import helper
from test_binary import (
    FLOATS,
    LEVELS,
    NP,
    ONNX,
    check,
    float_values,
    int_values,
    make_model,
    reference,
    session,
    streaming_lowered,
)

from olc_elementwise import binary_manifest as bm

WHERE_SHAPES = [((33,), (33,), (33,)), ((4, 1), (1, 33), ()), ((), (2, 3, 4), (4,)), ((2, 1, 3), (5, 1), (1, 5, 3)),
                ((0, 3), (3,), (1,)), ((2, 64, 64), (64, 1), (2, 64, 64))]


def values(t, shape, rng, lo=-50, hi=50):
    n = int(np.prod(shape, dtype=np.int64))
    if t == "bool":
        return rng.integers(0, 2, n).astype(np.bool_).reshape(shape)
    x = float_values(t, n, rng, lo, hi) if t in FLOATS else int_values(t, n, rng)
    return x.reshape(shape)


@pytest.mark.parametrize("t", bm.BY_NAME["Where"].types("T"))
def test_where(t):
    spec = bm.BY_NAME["Where"]
    opset = max(s.since for s in spec.segments if t in s.types["T"])
    model = make_model("Where", ["bool", t, t], t, opset)
    rng = np.random.default_rng(zlib.crc32(f"where/{t}".encode()))
    for sc, sx, sy in WHERE_SHAPES:
        feeds = {"x0": values("bool", sc, rng), "x1": values(t, sx, rng), "x2": values(t, sy, rng)}
        ref = reference(model, feeds)
        for level in LEVELS:
            for threads in (1, 2):
                sess = session(("Where", t), model, level, threads)
                y = sess.run(None, feeds)[0]
                assert sess.kernel_usage() == [bm.kernel_name("Where")]
                check("Where", y, ref, t)  # a copy: bit-exact, NaN and signed zeros included


# (condition, X, Y shapes; whether the run streams): a full condition and
# full values; a per-column mask against rows of 4,099 elements (inner
# blocks off a 64-byte line); a scalar Y; columns too short to stream.
WHERE_STREAM_SHAPES = [((1_050_001,), (1_050_001,), (1_050_001,), True),
                       ((1, 4099), (257, 4099), (1,), True),
                       ((8300, 1), (8300, 127), (8300, 127), False)]


@pytest.mark.parametrize("t", ["float32", "int64", "uint8"])
@pytest.mark.parametrize("threads", [1, 2])
def test_where_streaming(t, threads):
    """Where runs that read at least stream_min_bytes write with non-temporal
    stores (the binary ops' rule); the threshold is lowered to 1 MiB here
    and, on two threads, the split one too, so split runs stream."""
    spec = bm.BY_NAME["Where"]
    opset = max(s.since for s in spec.segments if t in s.types["T"])
    model = make_model("Where", ["bool", t, t], t, opset)
    rng = np.random.default_rng(zlib.crc32(f"where-stream/{t}".encode()))
    with streaming_lowered("Where", t):
        for sc, sx, sy, streams in WHERE_STREAM_SHAPES:
            feeds = {"x0": values("bool", sc, rng), "x1": values(t, sx, rng), "x2": values(t, sy, rng)}
            ref = reference(model, feeds)
            for level in LEVELS:
                sess = session(("Where", t, "stream"), model, level, threads)
                check("Where", sess.run(None, feeds)[0], ref, t)
                want = streams and level != "scalar"
                assert ("stream" in sess.kernel_usage_details()[-1]) == want, (level, sc, sx, sy)


def clip_model(t, opset, lo=None, hi=None, attrs=None):
    names = ["x", "lo" if lo is not None else "", "hi" if hi is not None else ""]
    while names and names[-1] == "":
        names.pop()
    node = helper.make_node("Clip", names, ["y"], name="node0", **(attrs or {}))
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info(n, ONNX[t], None) for n in names if n],
                          [helper.make_tensor_value_info("y", ONNX[t], None)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def clip_cases():
    spec = bm.BY_NAME["Clip"]
    for seg in spec.segments:
        for t in seg.types["T"]:
            yield seg.since, t


@pytest.mark.parametrize("opset,t", list(clip_cases()))
def test_clip(opset, t):
    rng = np.random.default_rng(zlib.crc32(f"clip/{opset}/{t}".encode()))
    x = values(t, (1031,), rng)
    if t in FLOATS:
        bounds = [(-10.0, 10.0), (5.0, -5.0), (None, 3.5), (-2.5, None), (None, None)]
    else:
        info = np.iinfo(NP[t])
        bounds = [(int(info.min) // 2, int(info.max) // 3), (10, 5), (None, 7), (0, None), (None, None)]
    for lo, hi in bounds:
        if opset < 11:
            attrs = {k: float(v) for k, v in (("min", lo), ("max", hi)) if v is not None}
            model = clip_model(t, opset, attrs=attrs)
            feeds = {"x": x}
        else:
            model = clip_model(t, opset, lo, hi)
            feeds = {"x": x}
            if lo is not None:
                feeds["lo"] = np.array(lo, NP[t])
            if hi is not None:
                feeds["hi"] = np.array(hi, NP[t])
        ref = reference(model, feeds)
        for level in LEVELS:
            sess = session(("Clip", opset, t, lo, hi), model, level)
            y = sess.run(None, feeds)[0]
            assert sess.kernel_usage() == [bm.kernel_name("Clip")]
            check("Clip", y, ref, t, signed_zero=False)


@pytest.mark.parametrize("t", ["float32", "float64", "int32", "uint8", "float16"])
@pytest.mark.parametrize("threads", [1, 2])
def test_clip_streaming(t, threads):
    """Clip streams by the binary ops' rule (thresholds lowered here so that
    a 1M-element input and split runs stream): the same values on every
    level, both bounds or one, an input that starts off a 64-byte line, and
    in place on a dying intermediate. The 16-bit floats do not stream."""
    rng = np.random.default_rng(zlib.crc32(f"clip-stream/{t}".encode()))
    x = values(t, (1_050_011,), rng)
    lo, hi = (-10, 10) if t in FLOATS or t == "int32" else (3, 200)
    streams = t != "float16"
    with streaming_lowered("Clip", t):
        for bounds in ((lo, hi), (lo, None)):
            model = clip_model(t, 13, *bounds)
            feeds = {"x": x[1:]}  # one element past the array's start: off the line
            feeds.update({k: np.array(v, NP[t]) for k, v in zip(("lo", "hi"), bounds) if v is not None})
            ref = reference(model, feeds)
            for level in LEVELS:
                sess = session(("Clip", "stream", t, bounds), model, level, threads)
                check("Clip", sess.run(None, feeds)[0], ref, t, signed_zero=False)
                assert ("stream" in sess.kernel_usage_details()[-1]) == (streams and level != "scalar"), (level, bounds)
        if t == "uint8":
            return  # no Neg for the in-place case
        # In place: Neg's output dies at Clip, which then writes over it.
        g = helper.make_graph([helper.make_node("Neg", ["x"], ["t"]), helper.make_node("Clip", ["t", "lo", "hi"], ["y"])],
                              "g", [helper.make_tensor_value_info(n, ONNX[t], None) for n in ("x", "lo", "hi")],
                              [helper.make_tensor_value_info("y", ONNX[t], None)])
        model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
        feeds = {"x": x, "lo": np.array(lo, NP[t]), "hi": np.array(hi, NP[t])}
        ref = reference(model, feeds)
        for level in LEVELS:
            sess = session(("Clip", "stream-in-place", t), model, level, threads)
            check("Clip", sess.run(None, feeds)[0], ref, t, signed_zero=False)
            assert sess.kernel_usage()[-1] == bm.kernel_name("Clip")
            assert ("stream" in sess.kernel_usage_details()[-1]) == (streams and level != "scalar")


def test_clip_bound_must_be_scalar():
    model = clip_model("float32", 13, 0.0, 1.0)
    sess = session(("Clip", "err"), model, LEVELS[-1])
    with pytest.raises(Exception, match="scalar"):
        sess.run(None, {"x": np.ones(3, np.float32), "lo": np.zeros(2, np.float32), "hi": np.ones((), np.float32)})


@pytest.mark.skipif(not onnx.defs.has("SwiGLU"), reason="this onnx has no SwiGLU")
@pytest.mark.parametrize("t", bm.BY_NAME["SwiGLU"].types("T"))
@pytest.mark.parametrize("alpha", [None, 1.702])
def test_swiglu(t, alpha):
    attrs = {} if alpha is None else {"alpha": alpha}
    model = make_model("SwiGLU", [t, t], t, 28, attrs)
    rng = np.random.default_rng(zlib.crc32(f"swiglu/{t}/{alpha}".encode()))
    # Against the float64 formula (the reference computes float16/bfloat16
    # step by step in the narrow type, where exp overflows early).
    # float32: the rounding of alpha * a (up to |34| * 2^-24) is amplified by exp
    rtol = {"float32": 4e-6, "float64": 1e-14, "float16": 2.0 ** -10, "bfloat16": 2.0 ** -7}[t]
    atol = {"float32": 1e-38, "float64": 1e-300, "float16": 6e-8, "bfloat16": 1e-38}[t]
    al = float(np.float32(1.0 if alpha is None else alpha))
    for shape in ((0,), (1,), (33,), (7, 257), (300_000,)):
        a, b = values(t, shape, rng, -20, 20), values(t, shape, rng, -5, 5)
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        with np.errstate(all="ignore"):
            exact = a64 / (1 + np.exp(-al * a64)) * b64
            if t in ("float32", "float64"):  # the reference agrees with the formula there
                ref = reference(model, {"x0": a, "x1": b}).astype(np.float64)
                assert (np.isnan(ref) == np.isnan(exact)).all()
        for level in LEVELS:
            for threads in (1, 2):
                y = session(("SwiGLU", t, alpha), model, level, threads).run(None, {"x0": a, "x1": b})[0]
                assert y.dtype == NP[t] and y.shape == a.shape
                y64 = y.astype(np.float64)
                assert (np.isnan(y64) == np.isnan(exact)).all()
                with np.errstate(invalid="ignore"):
                    ok = np.isnan(exact) | (y64 == exact) | (np.abs(y64 - exact) <= atol + 2 * rtol * np.abs(exact))
                assert ok.all(), f"y={y[~ok][:5]} exact={exact[~ok][:5]} a={a[~ok][:5]} b={b[~ok][:5]}"


def test_swiglu_needs_equal_shapes():
    sess = session(("SwiGLU", "err"), make_model("SwiGLU", ["float32"] * 2, "float32", 28), LEVELS[-1])
    with pytest.raises(Exception, match="identical shapes"):
        sess.run(None, {"x0": np.ones((2, 3), np.float32), "x1": np.ones((3,), np.float32)})
