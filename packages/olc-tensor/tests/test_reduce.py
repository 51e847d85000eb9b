"""ReduceSum/Mean/Max/Min and ArgMax/ArgMin against numpy (float64 sums,
exact Max/Min and indices): ranks 0 to 5, every axis subset drawn at
random, keepdims, axes as attribute and as input, noop_with_empty_axes,
empty reductions, NaN, rows of 1, 7, 8, 9, 4095, 4096, 4097, one and two
threads."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from helpers import LEVELS, NP, make_model, olc_run, seed_of  # noqa: E402

import olc_core  # noqa: E402

REDUCE_TYPES = ("float32", "float64", "float16", "bfloat16", "int32", "int64", "uint32", "uint64")
AXES_INPUT_SINCE = {"ReduceSum": 13, "ReduceMean": 18, "ReduceMax": 18, "ReduceMin": 18}
FLOATS = ("float32", "float64", "float16", "bfloat16")


def oracle(op, x, axes, keepdims):
    t = x.dtype
    axes_t = tuple(range(x.ndim)) if axes is None else tuple(a % x.ndim for a in axes)
    is_float = t.kind == "f" or t == NP["bfloat16"]
    with np.errstate(all="ignore"):
        if op in ("ReduceMax", "ReduceMin"):
            if x.size == 0 or any(x.shape[a] == 0 for a in axes_t):
                shape = tuple(1 if i in axes_t else d for i, d in enumerate(x.shape)) if keepdims else \
                    tuple(d for i, d in enumerate(x.shape) if i not in axes_t)
                if is_float:
                    fill = -np.inf if op == "ReduceMax" else np.inf
                else:
                    info = np.iinfo(t)
                    fill = info.min if op == "ReduceMax" else info.max
                return np.full(shape, fill).astype(t)
            f = np.max if op == "ReduceMax" else np.min
            return f(x.astype(np.float64) if is_float else x, axis=axes_t, keepdims=bool(keepdims)).astype(t)
        if is_float:
            s = np.sum(x.astype(np.float64), axis=axes_t, keepdims=bool(keepdims))
            if op == "ReduceMean":
                cnt = int(np.prod([x.shape[a] for a in axes_t])) if axes_t else 1
                s = s / cnt if cnt else np.full(s.shape, np.nan)
            return s.astype(t)
        s = np.sum(x.astype(np.uint64) if t.kind == "u" else x.astype(np.int64), axis=axes_t, keepdims=bool(keepdims))
        if op == "ReduceMean":
            cnt = int(np.prod([x.shape[a] for a in axes_t])) if axes_t else 1
            s = (np.trunc(s.astype(np.int64) / cnt).astype(np.int64) if cnt else s * 0)  # toward zero, as onnx.reference
        return s.astype(t)


def tol(t, op, n):
    if op in ("ReduceMax", "ReduceMin") or t not in FLOATS:
        return 0.0
    return {"float32": 2**-23, "float64": 1e-14, "float16": 2**-10, "bfloat16": 2**-7}[t]


def compare(got, want, rtol, what):
    assert got.dtype == want.dtype and got.shape == want.shape, (what, got.dtype, want.dtype, got.shape, want.shape)
    if rtol == 0.0:
        g = got.astype(np.float64) if got.dtype == NP["bfloat16"] else got
        w = want.astype(np.float64) if want.dtype == NP["bfloat16"] else want
        assert np.array_equal(g, w, equal_nan=g.dtype.kind == "f"), (what, got, want)
    else:
        g, w = got.astype(np.float64), want.astype(np.float64)
        # one rounding of the output type, relative to the sum of magnitudes
        np.testing.assert_allclose(g, w, rtol=rtol * 2, atol=0, equal_nan=True, err_msg=what)


def small_values(rng, shape, t):
    if t in FLOATS:
        return rng.uniform(-4, 4, shape).astype(NP[t])
    if t.startswith("u"):
        return rng.integers(0, 50, shape).astype(NP[t])
    return rng.integers(-50, 50, shape).astype(NP[t])


def build(op, t, axes, keepdims, opset, noop=None):
    attrs = {"keepdims": keepdims}
    if noop is not None:
        attrs["noop_with_empty_axes"] = noop
    if opset >= AXES_INPUT_SINCE[op]:
        ins = [("x", t)] + ([("a", "int64")] if axes is not None else [])
        return make_model(op, ins, ["y"], opset, attrs), (None if axes is None else np.array(axes, np.int64))
    if axes is not None:
        attrs["axes"] = list(axes)
    return make_model(op, [("x", t)], ["y"], opset, attrs), None


@pytest.mark.parametrize("op", list(AXES_INPUT_SINCE))
@pytest.mark.parametrize("t", REDUCE_TYPES)
def test_reduce_random(op, t):
    rng = np.random.default_rng(seed_of(op, t))
    for rank in range(0, 6):
        for _ in range(3):
            shape = tuple(int(v) for v in rng.integers(1, 5, rank))
            x = small_values(rng, shape, t)
            k = int(rng.integers(0, rank + 1))
            axes = None if rng.random() < 0.2 else [int(a) - (rank if rng.random() < 0.5 else 0)
                                                    for a in rng.permutation(rank)[:k]]
            if axes == []:
                axes = None
            keepdims = int(rng.integers(0, 2))
            for opset in sorted({AXES_INPUT_SINCE[op] - 1, 18} | ({13} if t == "bfloat16" else {11})):
                if t == "bfloat16" and opset < 13:
                    continue
                model, a = build(op, t, axes, keepdims, opset)
                feeds = {"x": x} if a is None else {"x": x, "a": a}
                (got,) = olc_run(model, feeds, expect_kernel=f"olc_tensor::{op}")
                what = f"{op} {t} {shape} {axes} k={keepdims} o={opset}"
                want = oracle(op, x, axes, keepdims)
                if tol(t, op, x.size) == 0.0:
                    compare(got, want, 0.0, what)
                else:
                    # Error bound: one rounding of the output type relative to
                    # the sum of magnitudes (the float64 sum itself is exact
                    # to ~1e-16 of that), plus the output type's rounding.
                    mag = oracle("ReduceSum", np.abs(x.astype(np.float64)).astype(x.dtype), axes, keepdims)
                    mag = mag.astype(np.float64)
                    if op == "ReduceMean":
                        cnt = int(np.prod([x.shape[a % x.ndim] for a in axes])) if axes else x.size
                        mag = mag / max(cnt, 1)
                    err = np.abs(got.astype(np.float64) - want.astype(np.float64))
                    assert got.dtype == want.dtype and got.shape == want.shape, what
                    assert np.all(err <= 2 * tol(t, op, x.size) * mag + 1e-300), (what, got, want)


@pytest.mark.parametrize("op", list(AXES_INPUT_SINCE))
@pytest.mark.parametrize("row", (1, 7, 8, 9, 4095, 4096, 4097))
@pytest.mark.parametrize("threads", (1, 2))
def test_reduce_rows(op, row, threads):
    rng = np.random.default_rng(row)
    x = rng.standard_normal((64, row)).astype(np.float32)
    for axes in ([1], [0], [-1, 0]):
        model, a = build(op, "float32", axes, 0, 18)
        (got,) = olc_run(model, {"x": x, "a": a}, threads=threads, expect_kernel=f"olc_tensor::{op}")
        want = oracle(op, x, axes, 0)
        if op in ("ReduceSum", "ReduceMean"):
            scale = np.sum(np.abs(x.astype(np.float64)), axis=tuple(a % 2 for a in axes))
            if op == "ReduceMean":
                scale = scale / np.prod([x.shape[a % 2] for a in axes])
            assert np.all(np.abs(got.astype(np.float64) - want.astype(np.float64)) <= scale * 2**-23 + 1e-30)
        else:
            compare(got, want, 0.0, f"{op} {axes}")


def test_reduce_special_values():
    x = np.array([[1.0, np.nan, 3.0], [np.inf, -np.inf, 2.0], [-0.0, 0.0, -1.0]], np.float32)
    for op in ("ReduceMax", "ReduceMin"):
        for axes in ([0], [1], None):
            model, a = build(op, "float32", axes, 1, 18)
            (got,) = olc_run(model, {"x": x} if a is None else {"x": x, "a": a})
            compare(got, oracle(op, x, axes, 1), 0.0, f"{op} {axes}")
    model, a = build("ReduceSum", "float32", [1], 0, 13)
    (got,) = olc_run(model, {"x": x, "a": a})
    assert np.isnan(got[0]) and np.isnan(got[1]) and got[2] == -1.0


@pytest.mark.parametrize("op", list(AXES_INPUT_SINCE))
def test_reduce_empty(op):
    for t in ("float32", "int32", "uint64", "float16"):
        x = np.zeros((3, 0, 2), NP[t])
        for axes, keepdims in (([1], 1), ([1], 0), ([0], 1), (None, 0)):
            model, a = build(op, t, axes, keepdims, 18)
            (got,) = olc_run(model, {"x": x} if a is None else {"x": x, "a": a})
            compare(got, oracle(op, x, axes, keepdims), 0.0, f"{op} {t} {axes}")


@pytest.mark.parametrize("op", list(AXES_INPUT_SINCE))
def test_noop_with_empty_axes(op):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    opset = AXES_INPUT_SINCE[op]
    for noop in (0, 1):
        model = make_model(op, [("x", "float32"), ("a", "int64")], ["y"], opset, {"keepdims": 1, "noop_with_empty_axes": noop})
        (got,) = olc_run(model, {"x": x, "a": np.zeros(0, np.int64)}, expect_kernel=f"olc_tensor::{op}")
        want = x if noop else oracle(op, x, None, 1)
        compare(got, want, 0.0, f"{op} noop={noop}")
        assert not np.shares_memory(got, x)


def test_integer_sum_wraps():
    x = np.array([2**62, 2**62, 2**62, 5], np.int64)
    model, a = build("ReduceSum", "int64", [0], 0, 13)
    (got,) = olc_run(model, {"x": x, "a": a})
    assert got == np.sum(x)  # numpy wraps too
    x = np.array([np.iinfo(np.int32).max, 1], np.int32)
    (got,) = olc_run(build("ReduceSum", "int32", [0], 0, 13)[0], {"x": x, "a": np.array([0], np.int64)})
    assert got == np.iinfo(np.int32).min


# ------------------------------------------------------------- ArgMax/ArgMin

ARG_TYPES = ("float32", "float64", "float16", "bfloat16", "int8", "int16", "int32", "int64",
             "uint8", "uint16", "uint32", "uint64")


def arg_oracle(op, x, axis, keepdims, last):
    f = np.argmax if op == "ArgMax" else np.argmin
    v = x.astype(np.float64) if x.dtype == NP["bfloat16"] or x.dtype == np.float16 else x
    if last:
        r = x.shape[axis] - 1 - f(np.flip(v, axis), axis=axis)
    else:
        r = f(v, axis=axis)
    r = r.astype(np.int64)
    return np.expand_dims(r, axis) if keepdims else r


@pytest.mark.parametrize("op", ("ArgMax", "ArgMin"))
@pytest.mark.parametrize("t", ARG_TYPES)
def test_arg_random(op, t):
    rng = np.random.default_rng(seed_of(op, t))
    for rank in range(1, 5):
        shape = tuple(int(v) for v in rng.integers(1, 6, rank))
        # few distinct values: many ties
        x = rng.integers(0, 4, shape).astype(NP[t]) if t not in FLOATS else \
            rng.integers(-2, 2, shape).astype(np.float64).astype(NP[t])
        for axis in range(-rank, rank):
            for keepdims in (0, 1):
                for last in (0, 1):
                    model = make_model(op, [("x", t)], ["y"], 13,
                                       {"axis": axis, "keepdims": keepdims, "select_last_index": last})
                    (got,) = olc_run(model, {"x": x}, expect_kernel=f"olc_tensor::{op}")
                    want = arg_oracle(op, x, axis % rank, keepdims, last)
                    assert got.dtype == np.int64 and np.array_equal(got, want), (op, t, shape, axis, keepdims, last)


def test_arg_nan_and_rows():
    x = np.array([[1.0, np.nan, 3.0, np.nan], [np.inf, -np.inf, 2.0, 2.0]], np.float32)
    for op in ("ArgMax", "ArgMin"):
        for last in (0, 1):
            model = make_model(op, [("x", "float32")], ["y"], 13, {"axis": 1, "keepdims": 0, "select_last_index": last})
            (got,) = olc_run(model, {"x": x})
            assert np.array_equal(got, arg_oracle(op, x, 1, 0, last)), (op, last, got)
    rng = np.random.default_rng(3)
    for row in (1, 7, 8, 9, 4095, 4096, 4097):
        x = rng.standard_normal((33, row)).astype(np.float32)
        for axis in (0, 1):
            model = make_model("ArgMax", [("x", "float32")], ["y"], 13, {"axis": axis})
            (got,) = olc_run(model, {"x": x}, threads=2)
            assert np.array_equal(got, arg_oracle("ArgMax", x, axis, 1, 0))


def test_arg_errors():
    model = make_model("ArgMax", [("x", "float32")], ["y"], 13, {"axis": 1})
    with pytest.raises(olc_core.OlcError, match="size 0"):
        olc_run(model, {"x": np.zeros((2, 0), np.float32)})
    with pytest.raises(olc_core.OlcError, match="axis 1"):
        olc_run(model, {"x": np.zeros((2,), np.float32)})




@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("op", list(AXES_INPUT_SINCE))
@pytest.mark.parametrize("axis", (-1, 0))
def test_float32_rows_every_level(level, op, axis):
    """The float32 row kernels (axis -1) and column kernels (axis 0: a kept
    inner axis folded into float64 accumulators) (scalar, AVX2, AVX-512):
    every length around the vector widths, a NaN planted at every position
    class; across columns, signed zeros and infinities for Max/Min too."""
    rng = np.random.default_rng(21 if axis == -1 else 22)
    model, _ = build(op, "float32", [axis], 0, 18)
    with olc_core.simd_cap(level):
        sess = olc_core.Session(model, strict=True, record_usage=True)
    for n in list(range(1, 70)) + [4095, 4096, 4097]:
        x = rng.standard_normal((5, n)).astype(np.float32)
        for r, pos in enumerate((0, n // 2, n - 1)):
            if r < 3 and op in ("ReduceMax", "ReduceMin"):
                x[r + 1, pos] = np.nan
        x[4, :] = np.float32(3.0) if n > 0 else x[4, :]
        if axis == 0 and op in ("ReduceMax", "ReduceMin") and n > 3:
            x[:, -1] = [0.0, -0.0, np.inf, -np.inf, 0.0]
        (got,) = sess.run(None, {"x": x, "a": np.array([axis], np.int64)})
        want = oracle(op, x, [axis], 0)
        if op in ("ReduceMax", "ReduceMin"):
            assert np.array_equal(got, want, equal_nan=True), (level, axis, n, got, want)
        else:
            count = n if axis == -1 else 5
            scale = np.sum(np.abs(x.astype(np.float64)), axis=axis) / (count if op == "ReduceMean" else 1)
            assert np.all(np.abs(got.astype(np.float64) - want.astype(np.float64)) <= scale * 2**-23), (level, axis, n)
    if axis == 0 and op not in ("ReduceMax", "ReduceMin"):
        # the column sums take eight rows, then four, then one at a time
        for rows in (8, 12, 13, 19, 23):
            for n in (1, 3, 4, 5, 7, 9, 64, 67):
                x = rng.standard_normal((rows, n)).astype(np.float32)
                (got,) = sess.run(None, {"x": x, "a": np.array([axis], np.int64)})
                want = oracle(op, x, [axis], 0)
                scale = np.sum(np.abs(x.astype(np.float64)), axis=0) / (rows if op == "ReduceMean" else 1)
                assert np.all(np.abs(got.astype(np.float64) - want.astype(np.float64)) <= scale * 2**-23), (rows, n)
    assert f"olc_tensor::{op}" in sess.kernel_usage()


@pytest.mark.parametrize("op", ("ReduceMax", "ReduceMin"))
def test_bool_from_opset_20(op):
    """BOOL joins ReduceMax/ReduceMin at opset 20 (false < true): against
    onnx.reference over random shapes and axes, keepdims, empty reductions
    (Max of nothing is false, Min true), and not claimed at opset 18."""
    from onnx.reference import ReferenceEvaluator

    rng = np.random.default_rng(seed_of(op, "bool"))
    cases = []
    for rank in range(0, 5):
        for _ in range(4):
            shape = tuple(int(v) for v in rng.integers(1, 5, rank))
            cases.append((rng.random(shape) < rng.choice([0.1, 0.5, 0.9]), shape))
    cases += [(np.zeros((3, 0, 2), np.bool_), (3, 0, 2)), (np.ones((2, 4097), np.bool_), (2, 4097))]
    for x, shape in cases:
        rank = len(shape)
        for keepdims in (0, 1):
            k = int(rng.integers(0, rank + 1))
            axes = [int(a) for a in rng.permutation(rank)[:k]] if k else None
            model, a = build(op, "bool", axes, keepdims, 20)
            feeds = {"x": x} if a is None else {"x": x, "a": a}
            (got,) = olc_run(model, feeds, expect_kernel=f"olc_tensor::{op}")
            (want,) = ReferenceEvaluator(model).run(None, feeds)
            assert got.dtype == np.bool_ and got.shape == want.shape, (op, shape, axes, got.shape, want.shape)
            assert np.array_equal(got, want), (op, shape, axes, keepdims, got, want)
    # Max over an empty set is false, Min true (the reference agrees above
    # only where it reduces something; pin the empty case explicitly).
    model, a = build(op, "bool", [1], 0, 20)
    (got,) = olc_run(model, {"x": np.zeros((3, 0), np.bool_), "a": a})
    assert got.tolist() == [op == "ReduceMin"] * 3
    reg = [r for r in olc_core.registered_kernels() if r.op_type == op and r.family == "olc-tensor"]
    assert any("bool" in r.types["T"] and r.since_version == 20 for r in reg)
    assert not any("bool" in r.types["T"] and r.since_version < 20 for r in reg)
