"""ConstantOfShape, Range, EyeLike and Trilu (outputs generated, or sized by
input values) against numpy oracles and onnx.reference: every claimed
element type, scalar and empty shapes, negative and out-of-range k,
float ranges evaluated as the spec's pseudocode, one and two threads."""

from __future__ import annotations

import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto, numpy_helper

sys.path.insert(0, str(Path(__file__).parent))
from helpers import ALL_TYPES, NP, ONNX, assert_same, make_model, olc_run, random_array, ref_run, seed_of  # noqa: E402
from olc_tensor import manifest  # noqa: E402

import olc_core  # noqa: E402

FLOAT8 = {
    "float8e4m3fn": (TensorProto.FLOAT8E4M3FN, ml_dtypes.float8_e4m3fn),
    "float8e4m3fnuz": (TensorProto.FLOAT8E4M3FNUZ, ml_dtypes.float8_e4m3fnuz),
    "float8e5m2": (TensorProto.FLOAT8E5M2, ml_dtypes.float8_e5m2),
    "float8e5m2fnuz": (TensorProto.FLOAT8E5M2FNUZ, ml_dtypes.float8_e5m2fnuz),
}


def cos_model(value, opset):
    attrs = {} if value is None else {"value": value}
    return make_model("ConstantOfShape", [("s", "int64")], ["y"], opset, attrs)


def value_tensor(t, v):
    if t in FLOAT8:
        _, dt = FLOAT8[t]
        return numpy_helper.from_array(np.array([v], dt), "value"), np.dtype(dt)
    return numpy_helper.from_array(np.array([v], NP[t]), "value"), NP[t]


# ---------------------------------------------------------- ConstantOfShape

@pytest.mark.parametrize("t", ALL_TYPES + tuple(FLOAT8))
def test_constant_of_shape_types(t):
    rng = np.random.default_rng(seed_of("cos", t))
    opsets = [o for o in (9, 20, 21, 25) if t in manifest.BY_NAME["ConstantOfShape"][0].types_at(o)]
    assert opsets, t
    for shape in ([2, 3], [], [0], [4, 0, 2], [1, 1, 1, 7], [3, 4097]):
        if t in FLOAT8:
            v = float(rng.choice([1.5, -2.0, 0.25, 448.0 if t == "float8e4m3fn" else 8.0]))
        else:
            v = float(rng.standard_normal() * 10) if t in ("float32", "float64", "float16", "bfloat16") else \
                random_array(rng, (), t).item()
        tensor, dt = value_tensor(t, v)
        want = np.full(shape, np.array([v], dt)[0], dt)
        for opset in opsets:
            model = cos_model(tensor, opset)
            (got,) = olc_run(model, {"s": np.array(shape, np.int64)}, expect_kernel="olc_tensor::ConstantOfShape")
            assert got.dtype == dt and got.shape == tuple(shape), (t, shape, got.dtype, got.shape)
            assert got.tobytes() == want.tobytes(), (t, shape, opset)


def test_constant_of_shape_default_and_reference():
    # No value attribute: float32 zeros, run by the ai.onnx kernel itself.
    model = cos_model(None, 9)
    with olc_core.simd_cap("avx512"):
        sess = olc_core.Session(model, strict=True, record_usage=True)
    (got,) = sess.run(None, {"s": np.array([2, 5], np.int64)})
    assert_same(got, np.zeros((2, 5), np.float32))
    assert sess.kernel_usage() == ["olc_tensor::ConstantOfShape"]
    assert not sess.kernel_plan()[0].fused_nodes
    for t, v in (("float32", 1.5), ("int64", -3), ("bool", True), ("uint8", 200), ("float16", -0.0)):
        tensor, _ = value_tensor(t, v)
        model = cos_model(tensor, 21)
        feeds = {"s": np.array([3, 2], np.int64)}
        (got,) = olc_run(model, feeds, expect_kernel="olc_tensor::ConstantOfShape")
        assert_same(got, ref_run(model, feeds)[0], t)


def test_constant_of_shape_value_runs_natively_only_with_fusion():
    """The TENSOR `value` reaches the native kernel through the graph pass;
    with fusion off the node runs on the reference fallback, and says why."""
    tensor, _ = value_tensor("int32", 7)
    model = cos_model(tensor, 21)
    with olc_core.simd_cap("avx512"):
        sess = olc_core.Session(model, record_usage=True)
    (got,) = sess.run(None, {"s": np.array([2], np.int64)})
    assert_same(got, np.full((2,), 7, np.int32))
    (entry,) = sess.kernel_plan()
    assert entry.native and entry.kernel == "olc_tensor::ConstantOfShape" and entry.fused_nodes == (("node0", "ConstantOfShape"),)
    sess = olc_core.Session(model, record_usage=True, fusion=False)
    (got,) = sess.run(None, {"s": np.array([2], np.int64)})
    assert_same(got, np.full((2,), 7, np.int32))
    (entry,) = sess.kernel_plan()
    assert not entry.native and "attributes a native kernel cannot take" in entry.reason
    with pytest.raises(olc_core.OlcError, match="strict"):
        olc_core.Session(model, strict=True, fusion=False)


def test_constant_of_shape_not_claimed():
    # bfloat16 joins at opset 20: at 19 the node is left to the fallback.
    tensor, _ = value_tensor("bfloat16", 1.0)
    sess = olc_core.Session(cos_model(tensor, 19), record_usage=True)
    sess.run(None, {"s": np.array([2], np.int64)})
    assert "olc_tensor::ConstantOfShape" not in sess.kernel_usage()
    # A value of more than one element is not ConstantOfShape's.
    model = cos_model(numpy_helper.from_array(np.array([1.0, 2.0], np.float32), "value"), 21)
    reg = [r for r in olc_core.registered_kernels() if r.op_type == "ConstantOfShape" and r.domain == "ai.onnx"]
    assert all(r.supports(model.graph.node[0]) for r in reg)


@pytest.mark.parametrize("threads", (1, 2))
def test_constant_of_shape_large(threads):
    for t, v in (("float32", 2.5), ("int8", -1), ("int64", 2**40 + 3), ("float16", 0.1)):
        tensor, dt = value_tensor(t, v)
        (got,) = olc_run(cos_model(tensor, 21), {"s": np.array([513, 1029], np.int64)}, threads=threads,
                         expect_kernel="olc_tensor::ConstantOfShape")
        assert np.array_equal(got, np.full((513, 1029), np.array([v], dt)[0], dt))


# -------------------------------------------------------------------- Range

def range_oracle(start, limit, delta, t, stash=np.float32):
    """The spec: n = max(ceil((limit - start) / delta), 0), output[i] =
    start + i * delta, evaluated in T (float16/bfloat16: in the stash type)."""
    n = max(int(np.ceil((float(limit) - float(start)) / float(delta))), 0)
    if t in ("int16", "int32", "int64"):
        return np.array([int(start) + i * int(delta) for i in range(n)], NP[t])
    w = NP[t].type if t in ("float32", "float64") else stash
    s, d = w(start), w(delta)
    with np.errstate(all="ignore"):
        out = [w(s + w(w(i) * d)) for i in range(n)]
    return np.array(out, w).astype(NP[t]) if out else np.zeros(0, NP[t])


RANGE_CASES = [(0, 10, 1), (3, 9, 3), (10, 4, -2), (0, 0, 1), (5, 1, 1), (1, 5, -1), (-7, 8, 4), (2, 3, 5),
               (-100, 100, 7), (0, 4097, 1)]
FLOAT_CASES = [(0.0, 1.0, 0.1), (1.5, -2.25, -0.25), (-3.0, 3.0, 0.7), (0.0, 1.0, 2.0), (1.0, 1.0, 0.5),
               (1e6, 1e6 + 10, 0.5), (0.1, 0.75, 0.05)]


@pytest.mark.parametrize("t", ("int16", "int32", "int64", "float32", "float64", "float16", "bfloat16"))
def test_range(t):
    low = t in ("float16", "bfloat16")
    opsets = [27] if low else [11, 27]
    cases = FLOAT_CASES + RANGE_CASES if t.startswith("float") or low else RANGE_CASES
    for start, limit, delta in cases:
        if low and abs(limit) > 2000:
            continue
        for opset in opsets:
            for stash in ((1, 11) if low else (None,)):
                attrs = {} if stash is None else {"stash_type": stash}
                model = make_model("Range", [("a", t), ("b", t), ("c", t)], ["y"], opset, attrs)
                feeds = {k: np.array(v, NP[t]) for k, v in zip("abc", (start, limit, delta))}
                (got,) = olc_run(model, feeds, expect_kernel="olc_tensor::Range")
                vals = [feeds[k].astype(np.float64).item() if low else feeds[k].item() for k in "abc"]
                want = range_oracle(*vals, t, np.float64 if stash == 11 else np.float32)
                assert_same(got, want, f"{t} {start} {limit} {delta} o={opset} stash={stash}")
                ref = ref_run(model, feeds)[0]
                assert ref.shape == got.shape, (t, start, limit, delta, ref.shape, got.shape)
                np.testing.assert_allclose(got.astype(np.float64), ref.astype(np.float64), rtol=1e-2 if low else 1e-6,
                                           atol=1e-2 if low else 1e-9)


def test_range_extremes():
    # counts from the exact integer difference, no overflow anywhere
    i64 = np.iinfo(np.int64)
    model = make_model("Range", [("a", "int64"), ("b", "int64"), ("c", "int64")], ["y"], 11)
    feeds = {"a": np.array(i64.min, np.int64), "b": np.array(i64.max, np.int64), "c": np.array(2**62, np.int64)}
    (got,) = olc_run(model, feeds, expect_kernel="olc_tensor::Range")
    assert got.tolist() == [i64.min, i64.min + 2**62, 0, 2**62]
    feeds = {"a": np.array(i64.max, np.int64), "b": np.array(i64.min, np.int64), "c": np.array(i64.min, np.int64)}
    (got,) = olc_run(model, feeds)
    assert got.tolist() == [i64.max, -1]
    model = make_model("Range", [("a", "int16"), ("b", "int16"), ("c", "int16")], ["y"], 11)
    feeds = {"a": np.array(32760, np.int16), "b": np.array(32767, np.int16), "c": np.array(3, np.int16)}
    (got,) = olc_run(model, feeds)
    assert_same(got, np.array([32760, 32763, 32766], np.int16))


# ------------------------------------------------------------------ EyeLike

EYE_TYPES = tuple(t for t in ALL_TYPES)


@pytest.mark.parametrize("t", EYE_TYPES)
def test_eye_like(t):
    rng = np.random.default_rng(seed_of("eye", t))
    opset = 22 if t == "bfloat16" else 9
    for shape in ((3, 3), (2, 5), (6, 2), (0, 3), (1, 1), (4, 0)):
        x = random_array(rng, shape, t)
        for k in (0, 1, -1, 2, -3, 4, -6, 100, -100, 2**62, -(2**62)):
            for out in (None, t, "float32", "int64", "bool"):
                if out is not None and out == "bfloat16" and opset < 22:
                    continue
                attrs = {"k": k} if out is None else {"k": k, "dtype": ONNX[out]}
                model = make_model("EyeLike", [("x", t)], ["y"], opset, attrs)
                (got,) = olc_run(model, {"x": x}, expect_kernel="olc_tensor::EyeLike")
                dt = NP[out or t]
                want = np.eye(shape[0], shape[1], k=int(np.clip(k, -10, 10)), dtype=np.float64).astype(dt)
                assert_same(got, want, f"{t} {shape} k={k} dtype={out}")


def test_eye_like_reference():
    x = np.zeros((4, 6), np.int32)
    for k in (-2, 0, 3):
        model = make_model("EyeLike", [("x", "int32")], ["y"], 22, {"k": k, "dtype": TensorProto.DOUBLE})
        (got,) = olc_run(model, {"x": x}, expect_kernel="olc_tensor::EyeLike")
        assert_same(got, ref_run(model, {"x": x})[0])
    # an output type the kernel does not make is left to the fallback
    model = make_model("EyeLike", [("x", "int32")], ["y"], 22, {"dtype": TensorProto.STRING})
    reg = [r for r in olc_core.registered_kernels() if r.op_type == "EyeLike"]
    assert all(r.supports(model.graph.node[0]) for r in reg)


# -------------------------------------------------------------------- Trilu

@pytest.mark.parametrize("t", ALL_TYPES)
def test_trilu(t):
    rng = np.random.default_rng(seed_of("trilu", t))
    for shape in ((4, 4), (3, 5), (6, 2), (2, 3, 4), (2, 1, 3, 3), (0, 3), (3, 0), (2, 0, 4), (1, 1)):
        x = random_array(rng, shape, t)
        for upper in (0, 1):
            for k in (None, 0, 1, -1, 2, -3, 5, -7, 2**63 - 1, -(2**63)):
                ins = [("x", t)] + ([] if k is None else [("k", "int64")])
                model = make_model("Trilu", ins, ["y"], 14, {"upper": upper})
                feeds = {"x": x} if k is None else {"x": x, "k": np.array(k, np.int64)}
                (got,) = olc_run(model, feeds, expect_kernel="olc_tensor::Trilu")
                kk = 0 if k is None else int(np.clip(k, -100, 100))
                want = (np.triu if upper else np.tril)(x, kk)
                assert_same(got, want, f"{t} {shape} upper={upper} k={k}")
                if k is not None and abs(k) < 100 and t == "float32":
                    assert_same(got, ref_run(model, feeds)[0], f"ref {shape} {upper} {k}")


@pytest.mark.parametrize("threads", (1, 2))
def test_trilu_large(threads):
    rng = np.random.default_rng(threads)
    x = rng.standard_normal((3, 257, 301)).astype(np.float32)
    for upper in (0, 1):
        for k in (-5, 0, 17):
            model = make_model("Trilu", [("x", "float32"), ("k", "int64")], ["y"], 14, {"upper": upper})
            (got,) = olc_run(model, {"x": x, "k": np.array(k, np.int64)}, threads=threads,
                             expect_kernel="olc_tensor::Trilu")
            assert_same(got, (np.triu if upper else np.tril)(x, k))
