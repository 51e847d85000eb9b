"""GatherND, ScatterElements and OneHot against onnx.reference (byte for
byte) and numpy oracles: every element type, batch_dims, negative indices
and axes, duplicate indices with every reduction at the opsets that allow
it, out-of-range one-hot indices, empty tensors, one and two threads."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from helpers import ALL_TYPES, NP, assert_same, make_model, olc_run, random_array, ref_run, seed_of  # noqa: E402

FLOATS = ("float32", "float64", "float16", "bfloat16")
NUMERIC = tuple(t for t in ALL_TYPES if t not in ("bool", "bfloat16"))


def opset_for(t, base):
    return max(base, 13) if t == "bfloat16" else base


# ------------------------------------------------------------------ GatherND

def gather_nd_cases(rng):
    """(data shape, indices shape without the last dim, k, batch_dims)."""
    yield (5,), (3,), 1, 0
    yield (4, 3), (2,), 2, 0
    yield (4, 3), (2, 2), 1, 0
    yield (2, 3, 4), (), 3, 0
    yield (2, 3, 4), (5,), 2, 0
    yield (2, 3, 4), (0,), 1, 0
    yield (3, 4, 5), (3, 2), 1, 1
    yield (3, 4, 5), (3,), 2, 1
    yield (2, 3, 4, 5), (2, 3, 2), 1, 2
    yield (2, 3, 4, 5), (2, 3), 2, 2
    yield (2, 0, 3), (2, 4), 1, 1
    for _ in range(6):
        r = int(rng.integers(1, 5))
        b = int(rng.integers(0, r))
        k = int(rng.integers(1, r - b + 1))
        dshape = tuple(int(v) for v in rng.integers(1, 5, r))
        ishape = dshape[:b] + tuple(int(v) for v in rng.integers(1, 4, int(rng.integers(0, 3))))
        yield dshape, ishape, k, b


def random_tuples(rng, dshape, ishape, k, b):
    dims = np.array(dshape[b:b + k], np.int64)
    shape = tuple(ishape) + (k,)
    if 0 in dims:
        return np.zeros(shape, np.int64)
    v = rng.integers(0, 1 << 30, shape) % np.maximum(dims, 1)
    neg = rng.random(shape) < 0.3
    return np.where(neg, v - dims, v).astype(np.int64)


@pytest.mark.parametrize("t", ALL_TYPES)
def test_gather_nd(t):
    rng = np.random.default_rng(seed_of("gathernd", t))
    for dshape, ishape, k, b in gather_nd_cases(rng):
        x = random_array(rng, dshape, t)
        idx = random_tuples(rng, dshape, ishape, k, b)
        if 0 in dshape[b:b + k] and idx.size:
            continue
        for opset in ((11, 12, 13) if b == 0 else (12, 13)):
            opset = opset_for(t, opset)
            model = make_model("GatherND", [("x", t), ("i", "int64")], ["y"], opset,
                               {"batch_dims": b} if b else {})
            feeds = {"x": x, "i": idx}
            (got,) = olc_run(model, feeds, expect_kernel="olc_tensor::GatherND")
            if idx.size:
                assert_same(got, ref_run(model, feeds)[0], f"{t} {dshape} {idx.shape} b={b}")
            else:
                assert got.shape == tuple(ishape) + tuple(dshape[b + k:]) and got.dtype == x.dtype


@pytest.mark.parametrize("threads", (1, 2))
def test_gather_nd_large(threads):
    rng = np.random.default_rng(threads)
    for dshape, ishape, k, b in (((64, 128, 96), (3000,), 2, 0), ((64, 128, 96), (500,), 1, 0),
                                 ((8, 256, 200), (8, 700), 1, 1)):
        x = rng.standard_normal(dshape).astype(np.float32)
        idx = random_tuples(rng, dshape, ishape, k, b)
        model = make_model("GatherND", [("x", "float32"), ("i", "int64")], ["y"], 13, {"batch_dims": b})
        (got,) = olc_run(model, {"x": x, "i": idx}, threads=threads, expect_kernel="olc_tensor::GatherND")
        assert_same(got, ref_run(model, {"x": x, "i": idx})[0])


# ----------------------------------------------------------- ScatterElements

REDUCTIONS = {11: ("none",), 13: ("none",), 16: ("none", "add", "mul"), 18: ("none", "add", "mul", "max", "min")}


def scatter_oracle(x, idx, upd, axis, reduction):
    """In flat order of indices; max/min propagate NaN."""
    y = x.copy()
    for pos in np.ndindex(idx.shape):
        at = list(pos)
        at[axis] = int(idx[pos]) % x.shape[axis]
        at = tuple(at)
        a, u = y[at], upd[pos]
        with np.errstate(all="ignore"):
            if reduction == "add":
                y[at] = a + u if x.dtype != np.bool_ else (a or u)
            elif reduction == "mul":
                y[at] = a * u if x.dtype != np.bool_ else (a and u)
            elif reduction in ("max", "min"):
                # NaN propagates (the NaN operand); a tie (+0 and -0) keeps
                # the current value, as Python's max/min in onnx.reference.
                real = x.dtype.kind == "f" or x.dtype == NP["bfloat16"]
                if real and np.isnan(a):
                    continue
                if (real and np.isnan(u)) or ((u > a) if reduction == "max" else (u < a)):
                    y[at] = u
            else:
                y[at] = u
    return y


@pytest.mark.parametrize("t", ALL_TYPES)
def test_scatter_elements(t):
    rng = np.random.default_rng(seed_of("scatter_elements", t))
    for dshape, ishape, axis in (((5,), (3,), 0), ((4, 3), (2, 3), 0), ((4, 3), (4, 5), 1), ((3, 4, 5), (2, 4, 1), -1),
                                 ((3, 4, 5), (3, 2, 5), 1), ((2, 3), (0, 3), 0), ((3, 2, 2), (7, 1, 2), -3)):
        x = random_array(rng, dshape, t)
        ax = axis % len(dshape)
        n = dshape[ax]
        v = rng.integers(0, n, ishape)
        idx = np.where(rng.random(ishape) < 0.3, v - n, v)  # duplicates are frequent: few values
        upd = random_array(rng, ishape, t)
        for opset, reds in REDUCTIONS.items():
            if t == "bfloat16" and opset < 13:
                continue
            for red in reds:
                for itype in ("int64", "int32"):
                    attrs = {"axis": axis} if red == "none" and opset < 16 else {"axis": axis, "reduction": red}
                    model = make_model("ScatterElements", [("x", t), ("i", itype), ("u", t)], ["y"], opset, attrs)
                    feeds = {"x": x, "i": idx.astype(NP[itype]), "u": upd}
                    (got,) = olc_run(model, feeds, expect_kernel="olc_tensor::ScatterElements")
                    what = f"{t} {dshape} {ishape} axis={axis} o={opset} {red}"
                    assert_same(got, scatter_oracle(x, idx, upd, ax, red), what)
                    finite = t not in FLOATS or not (np.isnan(x.astype(np.float64)).any() or
                                                     np.isnan(upd.astype(np.float64)).any())
                    if finite and red in ("none", "add", "mul") and t != "bool":
                        with np.errstate(all="ignore"):
                            assert_same(got, ref_run(model, feeds)[0], "ref " + what)


def test_scatter_elements_reference_reductions():
    """onnx.reference on finite floats for every reduction, with duplicates."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((4, 6)).astype(np.float32)
    idx = np.array([[0, 1, 1, -1], [3, 3, 3, 0]], np.int64)
    upd = rng.standard_normal((2, 4)).astype(np.float32)
    for red in ("none", "add", "mul", "max", "min"):
        model = make_model("ScatterElements", [("x", "float32"), ("i", "int64"), ("u", "float32")], ["y"], 18,
                           {"axis": 1, "reduction": red})
        feeds = {"x": x, "i": idx, "u": upd}
        (got,) = olc_run(model, feeds, expect_kernel="olc_tensor::ScatterElements")
        assert_same(got, ref_run(model, feeds)[0], red)


@pytest.mark.parametrize("threads", (1, 2))
def test_scatter_elements_large(threads):
    rng = np.random.default_rng(threads)
    x = rng.standard_normal((300, 700)).astype(np.float32)
    idx = rng.integers(-300, 300, (40, 700))
    upd = rng.standard_normal((40, 700)).astype(np.float32)
    model = make_model("ScatterElements", [("x", "float32"), ("i", "int64"), ("u", "float32")], ["y"], 18,
                       {"axis": 0, "reduction": "add"})
    (got,) = olc_run(model, {"x": x, "i": idx, "u": upd}, threads=threads,
                     expect_kernel="olc_tensor::ScatterElements")
    assert_same(got, scatter_oracle(x, idx, upd, 0, "add"))


# ------------------------------------------------------------------- OneHot

def one_hot_oracle(indices, depth, values, axis, negative):
    v = indices.astype(np.float64)
    v = np.where(np.isnan(v) | (np.abs(v) >= 2.0**63), -(2.0**70), np.trunc(v))
    if negative:
        v = np.where((v < 0) & (v >= -depth), v + depth, v)
    a = axis % (indices.ndim + 1)
    classes = np.arange(depth, dtype=np.float64).reshape((1,) * a + (depth,) + (1,) * (indices.ndim - a))
    hit = np.expand_dims(v, a) == classes
    return np.where(hit, values[1], values[0]).astype(values.dtype)


@pytest.mark.parametrize("vt", ALL_TYPES)
def test_one_hot_value_types(vt):
    rng = np.random.default_rng(seed_of("onehot", vt))
    opset = 28 if vt == "bfloat16" else 11
    values = random_array(rng, (2,), vt)
    for shape in ((5,), (2, 3), (2, 3, 4), (), (0, 3)):
        depth = int(rng.integers(1, 7))
        idx = rng.integers(-depth - 2, depth + 2, shape).astype(np.int64)
        for axis in range(-len(shape) - 1, len(shape) + 1):
            model = make_model("OneHot", [("i", "int64"), ("d", "int64"), ("v", vt)], ["y"], opset, {"axis": axis})
            feeds = {"i": idx, "d": np.array(depth, np.int64), "v": values}
            (got,) = olc_run(model, feeds, expect_kernel="olc_tensor::OneHot")
            assert_same(got, one_hot_oracle(idx, depth, values, axis, True), f"{vt} {shape} axis={axis}")


@pytest.mark.parametrize("it", NUMERIC)
def test_one_hot_index_and_depth_types(it):
    rng = np.random.default_rng(seed_of("onehot_i", it))
    for dt in ("int64", "float32", "int8", "uint16", "float16"):
        depth = 5
        if it in FLOATS:
            idx = np.array([[0, 1.7, -1.2, 4.9], [np.nan, np.inf, -6.0, 5.0]]).astype(NP[it])
        elif it.startswith("u"):
            idx = rng.integers(0, 8, (2, 4)).astype(NP[it])
        else:
            idx = rng.integers(-7, 8, (2, 4)).astype(NP[it])
        values = np.array([-1.0, 3.0], np.float32)
        for opset in (9, 11):
            model = make_model("OneHot", [("i", it), ("d", dt), ("v", "float32")], ["y"], opset)
            feeds = {"i": idx, "d": np.array([depth], NP[dt]), "v": values}
            (got,) = olc_run(model, feeds, expect_kernel="olc_tensor::OneHot")
            assert_same(got, one_hot_oracle(idx, depth, values, -1, opset >= 11), f"{it} {dt} o={opset}")
            if it not in FLOATS and opset >= 11 and dt == "int64":
                # onnx.reference takes depth as a scalar only
                assert_same(got, ref_run(model, {**feeds, "d": np.array(depth, np.int64)})[0], f"ref {it} {dt}")


def test_one_hot_reference_and_large():
    rng = np.random.default_rng(2)
    idx = rng.integers(-12, 12, (64, 200)).astype(np.int64)
    values = np.array([0, 1], np.int64)
    for axis in (-1, 0, 1):
        model = make_model("OneHot", [("i", "int64"), ("d", "int64"), ("v", "int64")], ["y"], 11, {"axis": axis})
        feeds = {"i": idx, "d": np.array(10, np.int64), "v": values}
        for threads in (1, 2):
            (got,) = olc_run(model, feeds, threads=threads, expect_kernel="olc_tensor::OneHot")
            assert_same(got, ref_run(model, feeds)[0], f"axis={axis}")
    # depth 0: an empty one-hot axis
    model = make_model("OneHot", [("i", "int64"), ("d", "int64"), ("v", "float32")], ["y"], 11)
    (got,) = olc_run(model, {"i": np.array([0, 1], np.int64), "d": np.array(0, np.int64),
                             "v": np.array([0, 1], np.float32)})
    assert got.shape == (2, 0)
