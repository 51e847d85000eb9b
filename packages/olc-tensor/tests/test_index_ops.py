"""Pad, ScatterND, NonZero and TopK against numpy oracles (and
onnx.reference where it follows the spec): every element type, modes and
reductions, negative pads and indices, empty tensors, errors."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from helpers import ALL_TYPES, FLOATS, NP, assert_same, make_model, olc_run, random_array, ref_run, seed_of  # noqa: E402

import olc_core  # noqa: E402

NUMERIC = tuple(t for t in ALL_TYPES if t not in ("bool", "bfloat16"))


# ------------------------------------------------------------------------ Pad

def pad_oracle(x, begin, end, mode, value):
    """numpy.pad after cropping negative pads."""
    if x.ndim == 0:
        return x.copy()
    sl = tuple(slice(max(0, -b), x.shape[d] - max(0, -e)) for d, (b, e) in enumerate(zip(begin, end)))
    x = x[sl]
    widths = [(max(0, b), max(0, e)) for b, e in zip(begin, end)]
    if mode == "constant":
        return np.pad(x, widths, mode="constant", constant_values=value)
    return np.pad(x, widths, mode={"reflect": "reflect", "edge": "edge", "wrap": "wrap"}[mode])


@pytest.mark.parametrize("t", ALL_TYPES)
@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
def test_pad_modes(t, mode):
    rng = np.random.default_rng(seed_of(t, mode))
    for shape, begin, end in [((5,), [2], [3]), ((3, 4), [1, 0], [2, 3]), ((2, 3, 4), [0, 1, 2], [1, 0, 3]),
                              ((4, 6), [-1, 2], [1, -2]), ((3, 4097), [1, 1], [1, 1]), ((1, 3), [0, 2], [0, 2]),
                              ((), [], [])]:
        if mode == "reflect" and any(max(b, e) >= d for b, e, d in zip(begin, end, shape)):
            continue  # numpy reflects repeatedly; the schema leaves it open
        x = random_array(rng, shape, t)
        value = random_array(rng, (), t)
        model = make_model("Pad", [("x", t), ("p", "int64"), ("c", t)], ["y"], 19, {"mode": mode})
        (got,) = olc_run(model, {"x": x, "p": np.array(begin + end, np.int64), "c": value},
                         expect_kernel="olc_tensor::Pad", threads=2)
        assert_same(got, pad_oracle(x, begin, end, mode, value), f"{mode} {shape}")


def test_pad_forms():
    rng = np.random.default_rng(1)
    x = random_array(rng, (3, 4), "float32")
    # opset 2: pads and value as attributes
    model = make_model("Pad", [("x", "float32")], ["y"], 2, {"pads": [1, 2, 0, 1], "value": 1.5, "mode": "constant"})
    (got,) = olc_run(model, {"x": x}, expect_kernel="olc_tensor::Pad")
    assert_same(got, pad_oracle(x, [1, 2], [0, 1], "constant", np.float32(1.5)))
    # opset 11 without constant_value: zeros
    model = make_model("Pad", [("x", "float32"), ("p", "int64")], ["y"], 11)
    (got,) = olc_run(model, {"x": x, "p": np.array([0, 1, 1, 0], np.int64)}, expect_kernel="olc_tensor::Pad")
    assert_same(got, pad_oracle(x, [0, 1], [1, 0], "constant", 0))
    # opset 18 axes input (negative axis)
    model = make_model("Pad", [("x", "float32"), ("p", "int64"), ("", None), ("a", "int64")], ["y"], 18,
                       {"mode": "edge"})
    (got,) = olc_run(model, {"x": x, "p": np.array([2, 3], np.int64), "a": np.array([-1], np.int64)},
                     expect_kernel="olc_tensor::Pad")
    assert_same(got, pad_oracle(x, [0, 2], [0, 3], "edge", 0))
    want = ref_run(model, {"x": x, "p": np.array([2, 3], np.int64), "a": np.array([-1], np.int64)})[0]
    assert_same(got, want)


def test_pad_errors():
    x = np.zeros((2, 3), np.float32)
    model = make_model("Pad", [("x", "float32"), ("p", "int64")], ["y"], 13, {"mode": "constant"})
    with pytest.raises(olc_core.OlcError, match="pads has 2 values"):
        olc_run(model, {"x": x, "p": np.array([1, 1], np.int64)})
    with pytest.raises(olc_core.OlcError, match="crop more"):
        olc_run(model, {"x": x, "p": np.array([0, -4, 0, 0], np.int64)})
    model = make_model("Pad", [("x", "float32"), ("p", "int64")], ["y"], 13, {"mode": "edge"})
    with pytest.raises(olc_core.OlcError, match="nothing to repeat"):
        olc_run(model, {"x": np.zeros((0, 3), np.float32), "p": np.array([1, 0, 0, 0], np.int64)})


# ------------------------------------------------------------------ ScatterND

def scatter_oracle(x, idx, upd, reduction):
    y = x.copy()
    k = idx.shape[-1]
    flat_idx = idx.reshape(-1, k)
    flat_upd = upd.reshape((flat_idx.shape[0],) + x.shape[k:])
    for i, u in zip(flat_idx, flat_upd):
        pos = tuple(int(v) for v in i)
        if reduction == "none":
            y[pos] = u
        else:
            a = y[pos].astype(np.float64) if y.dtype == NP["bfloat16"] else y[pos]
            b = u.astype(np.float64) if y.dtype == NP["bfloat16"] else u
            with np.errstate(all="ignore"):
                if y.dtype == np.bool_:
                    r = {"add": np.logical_or, "mul": np.logical_and, "max": np.logical_or,
                         "min": np.logical_and}[reduction](a, b)
                elif y.dtype == np.float16 or y.dtype == NP["bfloat16"]:
                    f = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}[reduction]
                    r = f(np.asarray(a, np.float32), np.asarray(b, np.float32))
                else:
                    r = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}[reduction](a, b)
            y[pos] = np.asarray(r).astype(y.dtype)
    return y


@pytest.mark.parametrize("t", ALL_TYPES)
@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_scatter_nd(t, reduction):
    rng = np.random.default_rng(seed_of(t, reduction))
    x = random_array(rng, (4, 5, 3), t)
    for k, ishape in ((1, (3, 1)), (2, (2, 2, 2)), (3, (5, 3)), (1, (0, 1))):
        if reduction == "none":  # distinct positions: the order of duplicates is unspecified
            flat = rng.choice(int(np.prod(x.shape[:k])), int(np.prod(ishape[:-1])), replace=False)
            idx = np.stack(np.unravel_index(flat, x.shape[:k]), -1).reshape(ishape).astype(np.int64)
        else:
            idx = np.stack([rng.integers(0, x.shape[d], ishape[:-1]) for d in range(k)], -1).astype(np.int64)
        neg = rng.random(idx.shape) < 0.3
        idx_in = np.where(neg, idx - np.array(x.shape[:k]), idx).astype(np.int64)
        upd = random_array(rng, ishape[:-1] + x.shape[k:], t)
        attrs = {} if reduction == "none" else {"reduction": reduction}
        model = make_model("ScatterND", [("x", t), ("i", "int64"), ("u", t)], ["y"], 18, attrs)
        (got,) = olc_run(model, {"x": x, "i": idx_in, "u": upd}, expect_kernel="olc_tensor::ScatterND")
        want = scatter_oracle(x, idx, upd, reduction)
        if t in FLOATS and reduction != "none":  # NaN payloads may differ after arithmetic
            np.testing.assert_array_equal(got.astype(np.float64), want.astype(np.float64))
        else:
            assert_same(got, want, f"{reduction} k={k}")


def test_scatter_nd_errors_and_no_alias():
    x = np.zeros((3, 2), np.float32)
    model = make_model("ScatterND", [("x", "float32"), ("i", "int64"), ("u", "float32")], ["y"], 16)
    with pytest.raises(olc_core.OlcError, match=r"index 3 .* out of range"):
        olc_run(model, {"x": x, "i": np.array([[0], [3]], np.int64), "u": np.ones((2, 2), np.float32)})
    with pytest.raises(olc_core.OlcError, match="updates shape"):
        olc_run(model, {"x": x, "i": np.array([[0]], np.int64), "u": np.ones((2, 2), np.float32)})
    (y,) = olc_run(model, {"x": x, "i": np.array([[1]], np.int64), "u": np.ones((1, 2), np.float32)})
    assert not np.shares_memory(y, x) and x.sum() == 0 and y.sum() == 2


# -------------------------------------------------------------------- NonZero

@pytest.mark.parametrize("t", ALL_TYPES)
def test_nonzero(t):
    rng = np.random.default_rng(seed_of(t))
    for shape in [(7,), (3, 4), (2, 3, 4), (0, 3), (2, 1, 3, 1), (4097,)]:
        x = random_array(rng, shape, t)
        if t != "bool":
            x[rng.random(shape) < 0.5] = 0
        model = make_model("NonZero", [("x", t)], ["y"], 13)
        (got,) = olc_run(model, {"x": x}, expect_kernel="olc_tensor::NonZero")
        want = np.array(np.nonzero(x.astype(np.float64) if t == "bfloat16" else x), dtype=np.int64).reshape(len(shape), -1)
        assert_same(got, want, f"{shape}")
    x = np.array([np.nan, -0.0, 0.0, 1.0], np.float32)
    (got,) = olc_run(make_model("NonZero", [("x", "float32")], ["y"], 13), {"x": x})
    assert got.tolist() == [[0, 3]]


# ----------------------------------------------------------------------- TopK

def topk_oracle(x, k, axis, largest):
    v = x.astype(np.float64)
    idx = np.indices(x.shape)[axis]
    if largest:
        # NaN first, then descending, ties by lower index
        key = np.where(np.isnan(v), -np.inf, -v)
        nan_first = ~np.isnan(v)
        order = np.lexsort((idx, key, nan_first), axis=axis)
    else:
        key = np.where(np.isnan(v), np.inf, v)
        order = np.lexsort((idx, key, np.isnan(v)), axis=axis)
    order = np.take(order, np.arange(k), axis=axis)
    return np.take_along_axis(x, order, axis=axis), order.astype(np.int64)


@pytest.mark.parametrize("t", NUMERIC + ("bfloat16",))
def test_topk(t):
    rng = np.random.default_rng(seed_of(t))
    for shape, axis in [((10,), 0), ((3, 8), -1), ((4, 5, 6), 1), ((2, 4097), 1), ((6, 3), 0)]:
        x = (rng.integers(0, 5, shape)).astype(np.float64).astype(NP[t])  # many ties
        if t in FLOATS and x.size > 3:
            x.reshape(-1)[:2] = np.nan
        for k in (0, 1, 3, shape[axis]):
            for largest in (0, 1):
                model = make_model("TopK", [("x", t), ("k", "int64")], ["v", "i"], 13 if t == "bfloat16" else 11,
                                   {"axis": axis, "largest": largest, "sorted": 1})
                got_v, got_i = olc_run(model, {"x": x, "k": np.array([k], np.int64)}, expect_kernel="olc_tensor::TopK")
                want_v, want_i = topk_oracle(x, k, axis % x.ndim, largest)
                assert_same(got_i, want_i, f"indices {shape} k={k} largest={largest}")
                assert_same(got_v, want_v, f"values {shape} k={k} largest={largest}")


def test_topk_legacy_and_errors():
    x = np.array([[3, 1, 2, 3]], np.float32)
    model = make_model("TopK", [("x", "float32")], ["v", "i"], 1, {"k": 2})
    v, i = olc_run(model, {"x": x}, expect_kernel="olc_tensor::TopK")
    assert v.tolist() == [[3, 3]] and i.tolist() == [[0, 3]]
    model = make_model("TopK", [("x", "float32"), ("k", "int64")], ["v", "i"], 11)
    with pytest.raises(olc_core.OlcError, match="K = 5 is out of range"):
        olc_run(model, {"x": x, "k": np.array([5], np.int64)})
