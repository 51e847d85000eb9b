"""Softmax and LogSoftmax at every opset form (1, 11: 2-D coercion at
axis; 13: one axis), every type and SIMD level, 1 and 2 threads, against a
float64 oracle; onnx.reference as a second oracle for float32; float16 and
bfloat16 within one ulp of the function body evaluated in that type
(onnx.reference for float16)."""

from __future__ import annotations

import numpy as np
import pytest
from norm_testlib import (
    LEVELS,
    NP_TYPE,
    ONNX_TYPE,
    TYPES,
    assert_close,
    assert_ulps,
    make_model,
    rand,
    session,
    softmax_body,
    softmax_ref,
)
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

OPS = ("Softmax", "LogSoftmax")
NARROW = ("float16", "bfloat16")
ROW_LENGTHS = (1, 7, 8, 9, 15, 16, 17, 31, 33, 64, 65, 4095, 4096, 4097)


def model(op, t, opset, axis=None):
    attrs = {} if axis is None else {"axis": axis}
    return make_model(op, [("x", t)], [("y", t)], attrs, opset=opset)


def run(op, t, opset, x, axis=None, level="avx512", threads=1):
    s = session(model(op, t, opset, axis), level, threads)
    y, = s.run(None, {"x": x})
    assert s.kernel_usage() == [f"olc_normalization::{op}"]
    return y


def ref(op, x, axis, opset):
    if axis is None:
        axis = 1 if opset < 13 else -1
    return softmax_ref(x, axis, opset, log=op == "LogSoftmax")


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("t", TYPES)
@pytest.mark.parametrize("op", OPS)
def test_row_lengths(op, t, level):
    rng = np.random.default_rng(1)
    for n in ROW_LENGTHS:
        if t == "bfloat16" and n > 1000:  # long rows of bf16 add nothing but time
            continue
        x = rand(rng, (3, n), t, -20, 20)
        assert_close(run(op, t, 13, x, level=level), ref(op, x, -1, 13), t, f"{op} {t} {level} n={n}")


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("op", OPS)
def test_axes_and_ranks_opset13(op, level, threads):
    rng = np.random.default_rng(2)
    shapes = [(5,), (3, 4), (2, 3, 17), (2, 3, 4, 5), (1, 2, 3, 2, 5), (2, 1, 2, 3, 2, 9)]
    for shape in shapes:
        for axis in range(-len(shape), len(shape)):
            x = rand(rng, shape, "float32", -10, 10)
            assert_close(run(op, "float32", 13, x, axis, level, threads), ref(op, x, axis, 13), "float32",
                         f"{op} {shape} axis={axis}")


@pytest.mark.parametrize("opset", [1, 11])
@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("op", OPS)
def test_coerced_2d_before_13(op, opset, level):
    rng = np.random.default_rng(3)
    for shape in [(3, 4), (2, 3, 5), (2, 3, 4, 5), (1, 2, 1, 3, 2, 3)]:
        for axis in [None] + list(range(-len(shape), len(shape))):
            for t in ("float32", "float64", "float16"):
                x = rand(rng, shape, t, -8, 8)
                assert_close(run(op, t, opset, x, axis, level), ref(op, x, axis, opset), t,
                             f"{op}-{opset} {t} {shape} axis={axis}")


@pytest.mark.parametrize("op", OPS)
def test_matches_onnx_reference(op):
    rng = np.random.default_rng(4)
    for shape, axis in [((4, 33), -1), ((2, 3, 4), 1), ((2, 5, 3), 0)]:
        x = rand(rng, shape, "float32", -5, 5)
        m = model(op, "float32", 13, axis)
        expected, = ReferenceEvaluator(m).run(None, {"x": x})
        assert_close(run(op, "float32", 13, x, axis), expected.astype(np.float64), "float32", f"{op} {shape}")


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("t", TYPES)
@pytest.mark.parametrize("op", OPS)
def test_extreme_values(op, t, level):
    inf, nan = np.inf, np.nan
    big = 3e38 if t in ("float32", "bfloat16") else (1e300 if t == "float64" else 6e4)
    rows = [
        [0.0, -inf, 1.0, -inf, 2.0, 3.0, -inf, 0.5, 1.5, -2.0],   # -inf entries: probability 0
        [-inf] * 10,                                               # all -inf: NaN (x - max = -inf + inf)
        [big, -big, 0.0, big, 1.0, -big, 2.0, 3.0, -1.0, big],    # large magnitudes
        [inf, 1.0, 2.0, 0.0, -1.0, 3.0, 4.0, 5.0, 6.0, 7.0],       # +inf: NaN row
        [nan, 1.0, 2.0, 0.0, -1.0, 3.0, 4.0, 5.0, 6.0, 7.0],       # NaN: NaN row
        [5.0] * 10,                                                # constant row: uniform
        [-100.0, 0.0, -90.0, -80.0, -87.0, -88.0, -104.0, -50.0, -1000.0, -3.0],  # underflowing exps
    ]
    x = np.array(rows, np.float64).astype(NP_TYPE[t])
    y = run(op, t, 13, x, level=level)
    assert_close(y, ref(op, x, -1, 13), t, f"{op} {t} {level}")
    if t in NARROW:
        assert_ulps(y, softmax_body(x, -1, 13, t, op == "LogSoftmax"), t, f"{op} {t} {level} (function body)")
    if op == "Softmax":
        assert np.all(np.isnan(y[1].astype(np.float64)))
        assert np.all(y[0].astype(np.float64)[[1, 3, 6]] == 0.0)


@pytest.mark.parametrize("op", OPS)
def test_empty_and_scalar_like(op):
    for t in TYPES:
        for shape, axis in [((0,), -1), ((3, 0), -1), ((0, 5), -1), ((0, 5), 0), ((2, 0, 3), 1), ((1,), 0)]:
            x = np.zeros(shape, NP_TYPE[t])
            y = run(op, t, 13, x, axis)
            assert y.shape == shape and y.dtype == NP_TYPE[t]
            assert_close(y, ref(op, x, axis, 13), t)


@pytest.mark.parametrize("op", OPS)
def test_bad_axis(op):
    import olc_core
    x = np.zeros((2, 3), np.float32)
    for axis in (2, -3):
        s = session(model(op, "float32", 13, axis), "avx512")
        with pytest.raises(olc_core.OlcError, match=r"axis .* out of range"):
            s.run(None, {"x": x})
    s = session(model(op, "float32", 13, None), "avx512")
    with pytest.raises(olc_core.OlcError, match=r"out of range for an input of rank 0"):
        s.run(None, {"x": np.float32(1.0)})
    # before opset 13 too (the default axis 1 on a 1-D input included), as onnxruntime
    for opset in (1, 11):
        for axis, shape in ((2, (2, 3)), (None, (5,)), (-3, (2, 3))):
            s = session(model(op, "float32", opset, axis), "avx512")
            with pytest.raises(olc_core.OlcError, match=r"axis -?\d+ is out of range for an input of rank"):
                s.run(None, {"x": np.zeros(shape, np.float32)})


@pytest.mark.parametrize("op", OPS)
def test_parallel_large(op):
    """Attention-score shaped input across 2 threads, every level."""
    rng = np.random.default_rng(5)
    x = rand(rng, (2, 4, 64, 257), "float32", -30, 30)
    expected = ref(op, x, -1, 13)
    for level in LEVELS:
        assert_close(run(op, "float32", 13, x, level=level, threads=2), expected, "float32", f"{op} {level}")


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("op", OPS)
def test_paired_rows_same_bits_as_single_rows(op, level):
    """Short contiguous rows run two at a time (an odd last row alone), on 1
    and 2 threads (ranges starting at odd rows): every row's bits equal
    those of the same row run by itself; -inf, NaN and a constant row
    included; rows past the pairing limit (1024) too."""
    rng = np.random.default_rng(8)
    for rows, n in ((7, 9), (8, 33), (5, 128), (6, 1024), (3, 1025), (11, 1), (37, 300)):
        x = rand(rng, (rows, n), "float32", -30, 30)
        x[1, ::2] = -np.inf
        x[2 % rows, 0] = np.nan
        x[rows - 1] = 0.5
        single = np.stack([run(op, "float32", 13, x[i:i + 1], level=level)[0] for i in range(rows)])
        for threads in (1, 2):
            y = run(op, "float32", 13, x, level=level, threads=threads)
            assert y.tobytes() == single.tobytes(), (op, level, rows, n, threads)
        assert_close(y, ref(op, x, -1, 13), "float32", f"{op} {level} {rows}x{n}")


@pytest.mark.parametrize("op", OPS)
def test_non_temporal_output_path(op):
    """Rows whose starts are not vector-aligned (n = 9, 33, 4097) and tails,
    written with streaming stores; 1 and 2 threads, every level."""
    from norm_testlib import stream_always
    rng = np.random.default_rng(6)
    with stream_always(op):
        for n in (1, 9, 16, 33, 64, 4097):
            x = rand(rng, (5, n), "float32", -30, 30)
            x[1, ::3] = -np.inf
            expected = ref(op, x, -1, 13)
            for level in LEVELS:
                for threads in (1, 2):
                    s = session(model(op, "float32", 13, -1), level, threads, key=("nt", op))
                    y, = s.run(None, {"x": x})
                    want = "scalar" if level == "scalar" else f"{level},stream"
                    assert s.kernel_usage_details() == [f"olc_normalization::{op}[{want}]"]
                    assert_close(y, expected, "float32", f"{op} n={n} {level}")


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("op", OPS)
def test_middle_axis_columns(op, level):
    """Softmax over a middle axis runs down the columns, W at a time, in
    blocks of 256 columns: column counts around the vector width and the
    block size, special values down a column, float32 and float64, 1 and 2
    threads; float16 takes the gather path."""
    rng = np.random.default_rng(7)
    for shape, axis in [((2, 3, 7), 1), ((2, 5, 16), 1), ((3, 4, 17), -2), ((2, 21, 300), 1), ((1, 9, 2, 257), 1),
                        ((2, 1, 33), 1), ((4, 513), 0)]:
        for t in ("float32", "float64", "float16"):
            x = rand(rng, shape, t, -15, 15)
            x.reshape(-1)[::11] = -np.inf
            if t == "float32" and axis == 1 and x.ndim == 3:
                x[0, :, 3 % shape[2]] = -np.inf  # an all -inf column: NaN
                x[-1, 0, 2 % shape[2]] = np.nan
            for threads in (1, 2):
                assert_close(run(op, t, 13, x, axis, level, threads), ref(op, x, axis, 13), t,
                             f"{op} {t} {shape} axis={axis} threads={threads}")


# ---------------------------------------------------------------- float16 / bfloat16: the function body in T

def body_model(op, t, axis):
    """The opset-13 function body of Softmax / LogSoftmax as nodes (opset 18
    spelling of the reductions), for onnx.reference to evaluate in t."""
    n = [helper.make_node("ReduceMax", ["x", "axes"], ["m"], keepdims=1),
         helper.make_node("Sub", ["x", "m"], ["d"]),
         helper.make_node("Exp", ["d"], ["e"]),
         helper.make_node("ReduceSum", ["e", "axes"], ["s"], keepdims=1)]
    if op == "Softmax":
        n.append(helper.make_node("Div", ["e", "s"], ["y"]))
    else:
        n += [helper.make_node("Log", ["s"], ["l"]), helper.make_node("Sub", ["d", "l"], ["y"])]
    g = helper.make_graph(n, "body", [helper.make_tensor_value_info("x", ONNX_TYPE[t], None)],
                          [helper.make_tensor_value_info("y", ONNX_TYPE[t], None)],
                          initializer=[helper.make_tensor("axes", TensorProto.INT64, [1], [axis])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 10
    return m


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("t", NARROW)
@pytest.mark.parametrize("op", OPS)
def test_narrow_follows_function_body(op, t, level):
    """float16 / bfloat16 rows round x - max, the exps, their sum and the
    result to the type, as the function body evaluated in it (README,
    accuracy): within one ulp of the type. float16 against onnx.reference on
    the body's nodes and, for Softmax, on the node itself (the backend
    suite's expected data); bfloat16 against softmax_body, since the
    reference's ReduceSum accumulates bfloat16 in bfloat16."""
    rng = np.random.default_rng(8)
    log = op == "LogSoftmax"
    for n in ROW_LENGTHS:
        for lo, hi in ((-20, 20), (-3, 3)):
            x = rand(rng, (3, n), t, lo, hi)
            if n > 8:
                x[1, ::5] = -np.inf
            y = run(op, t, 13, x, level=level)
            what = f"{op} {t} {level} n={n} [{lo}, {hi}]"
            assert_ulps(y, softmax_body(x, -1, 13, t, log), t, what)
            if t == "float16":
                expected, = ReferenceEvaluator(body_model(op, t, -1)).run(None, {"x": x})
                assert_ulps(y, expected, t, what + " (onnx.reference, function body)")
                if not log:
                    expected, = ReferenceEvaluator(model(op, t, 13)).run(None, {"x": x})
                    assert_ulps(y, expected, t, what + " (onnx.reference)")


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("op", OPS)
def test_narrow_axes_and_opsets(op, level, threads):
    """The same roundings on every path a 16-bit row takes: the last axis, a
    middle or first axis (gathered rows), the 2-D coercion before opset 13
    (float16 only there), rows split across threads."""
    rng = np.random.default_rng(9)
    cases = [(13, (4, 65), -1), (13, (2, 3, 17), 1), (13, (5, 3, 17), 0), (13, (2, 21, 300), 1),
             (13, (64, 257), -1), (11, (2, 3, 5), None), (11, (2, 3, 5, 4), 2), (1, (3, 4, 9), 0)]
    for t in NARROW:
        for opset, shape, axis in cases:
            if t == "bfloat16" and opset < 13:
                continue
            x = rand(rng, shape, t, -15, 15)
            a = axis if axis is not None else (1 if opset < 13 else -1)
            y = run(op, t, opset, x, axis, level, threads)
            assert_ulps(y, softmax_body(x, a, opset, t, op == "LogSoftmax"), t,
                        f"{op}-{opset} {t} {shape} axis={axis} {level} threads={threads}")
