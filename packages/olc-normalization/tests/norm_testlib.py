"""Shared helpers of the normalization tests: one-node models, cached
sessions per (model, SIMD level, threads), float64 oracles written here
(independent of the kernels), and the tolerance check of manifest.py."""

from __future__ import annotations

import ml_dtypes
import numpy as np
from olc_normalization.manifest import TOLERANCE
from onnx import TensorProto, helper

import olc_core

LEVELS = [lv for lv in ("scalar", "avx2", "avx512")
          if olc_core.SIMD_LEVELS.index(lv) <= olc_core.SIMD_LEVELS.index(olc_core.detected_simd_level())]
TYPES = ("float32", "float64", "float16", "bfloat16")

NP_TYPE = {"float32": np.dtype(np.float32), "float64": np.dtype(np.float64), "float16": np.dtype(np.float16),
           "bfloat16": np.dtype(ml_dtypes.bfloat16)}
ONNX_TYPE = {"float32": TensorProto.FLOAT, "float64": TensorProto.DOUBLE, "float16": TensorProto.FLOAT16,
             "bfloat16": TensorProto.BFLOAT16}


def make_model(op, inputs, outputs, attrs=None, opset=13, domain="", initializers=()):
    """inputs / outputs: lists of (name, type name or None for absent)."""
    node = helper.make_node(op, [n if t else "" for n, t in inputs], [n if t else "" for n, t in outputs],
                            name="n0", domain=domain, **(attrs or {}))
    init_names = {i.name for i in initializers}
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(n, ONNX_TYPE[t], None) for n, t in inputs if t and n not in init_names],
        [helper.make_tensor_value_info(n, ONNX_TYPE[t], None) for n, t in outputs if t],
        initializer=list(initializers))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 10
    return m


_sessions: dict = {}


def session(model, level, threads=1, key=None, strict=True):
    k = (key or model.SerializeToString(), level, threads)
    if k not in _sessions:
        with olc_core.simd_cap(level):
            _sessions[k] = olc_core.Session(model, threads=threads, strict=strict, record_usage=True)
    return _sessions[k]


def to64(a):
    return np.asarray(a).astype(np.float64)


def assert_close(y, ref, t, what=""):
    """y: kernel output (any float type); ref: float64 oracle."""
    y = to64(y)
    ref = np.asarray(ref, np.float64)
    assert y.shape == ref.shape, f"{what}: shape {y.shape} != {ref.shape}"
    if ref.size == 0:
        return
    # Out-of-range oracle values become inf in narrow types; compare with
    # the oracle rounded to the output type for the special values.
    with np.errstate(over="ignore"):
        ref_t = ref.astype(NP_TYPE[t]).astype(np.float64)
    nan_ref, nan_y = np.isnan(ref_t), np.isnan(y)
    assert np.array_equal(nan_ref, nan_y), f"{what}: NaN positions differ ({nan_ref.sum()} expected, {nan_y.sum()} got)"
    inf_ref = np.isinf(ref_t)
    assert np.array_equal(inf_ref, np.isinf(y)), f"{what}: inf positions differ"
    assert np.array_equal(ref_t[inf_ref], y[inf_ref]), f"{what}: inf signs differ"
    fin = ~(nan_ref | inf_ref)
    if not fin.any():
        return
    a, r = TOLERANCE[t]
    scale = float(np.max(np.abs(ref[fin]))) or 1.0
    err = np.abs(y[fin] - ref[fin])
    bound = a * scale + r * np.abs(ref[fin])
    worst = int(np.argmax(err - bound))
    assert np.all(err <= bound), (
        f"{what}: max excess at {worst}: got {y[fin][worst]!r}, expected {ref[fin][worst]!r} "
        f"(err {err[worst]:.3g} > bound {bound[worst]:.3g}; {int((err > bound).sum())} of {err.size} elements)")


# ---------------------------------------------------------------- oracles (float64)

def softmax_ref(x, axis, opset, log=False):
    x = to64(x)
    if x.size == 0:
        return x.copy()
    if opset < 13:
        a = axis + x.ndim if axis < 0 else axis
        rows = int(np.prod(x.shape[:a], dtype=np.int64))
        x2 = x.reshape(rows, -1)
        return softmax_ref(x2, 1, 13, log).reshape(x.shape)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        m = np.max(x, axis=axis, keepdims=True)
        d = x - m
        e = np.exp(d)
        s = np.sum(e, axis=axis, keepdims=True)
        return d - np.log(s) if log else e / s


def softmax_body(x, axis, opset, t, log=False):
    """Softmax / LogSoftmax as the ONNX function body evaluated in the
    16-bit type t, each operator's result rounded to t: d = x - max, e =
    exp(d), s = sum(e) (accumulated in float32, as numpy sums float16),
    e / s or d - log(s). numpy / ml_dtypes compute each operation in float32
    and round once; the explicit float32 sum also stands in for the
    reference's ReduceSum on bfloat16, which ml_dtypes accumulates in
    bfloat16 (a row of 4096 values near 0.5 sums to 256 there)."""
    T = NP_TYPE[t]
    x = np.asarray(x, T)
    if x.size == 0:
        return x.copy()
    if opset < 13:
        a = axis + x.ndim if axis < 0 else axis
        rows = int(np.prod(x.shape[:a], dtype=np.int64))
        return softmax_body(x.reshape(rows, -1), 1, 13, t, log).reshape(x.shape)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        d = (x - np.max(x, axis=axis, keepdims=True)).astype(T)
        e = np.exp(d).astype(T)
        s = np.sum(e.astype(np.float32), axis=axis, keepdims=True).astype(T)
        return (d - np.log(s).astype(T)).astype(T) if log else (e / s).astype(T)


def ulp_of(v, t):
    """The spacing of the 16-bit type t at |v| (its subnormal quantum below
    the normal range)."""
    mant, emin = {"float16": (10, -14), "bfloat16": (7, -126)}[t]
    a = np.abs(np.asarray(v, np.float64))
    with np.errstate(divide="ignore", invalid="ignore"):
        e = np.floor(np.log2(np.maximum(a, 2.0**emin)))
    return np.ldexp(1.0, (e - mant).astype(np.int64))


def assert_ulps(y, ref, t, what="", ulps=1):
    """y within `ulps` spacings of t of ref, element by element; NaN and
    inf (with sign) at the same places."""
    y, ref = to64(y), to64(ref)
    assert y.shape == ref.shape, f"{what}: shape {y.shape} != {ref.shape}"
    assert np.array_equal(np.isnan(y), np.isnan(ref)), f"{what}: NaN positions differ"
    inf = np.isinf(ref)
    assert np.array_equal(inf, np.isinf(y)) and np.array_equal(y[inf], ref[inf]), f"{what}: inf differ"
    fin = np.isfinite(ref)
    if not fin.any():
        return
    err = np.abs(y[fin] - ref[fin]) / ulp_of(ref[fin], t)
    worst = int(np.argmax(err))
    assert err[worst] <= ulps, (f"{what}: {err[worst]:g} ulps at {worst}: got {y[fin][worst]!r}, expected "
                                f"{ref[fin][worst]!r} ({int((err > ulps).sum())} of {err.size} elements)")


def layernorm_ref(x, scale, bias, axis, eps):
    x = to64(x)
    a = axis + x.ndim if axis < 0 else axis
    ax = tuple(range(a, x.ndim))
    with np.errstate(invalid="ignore", divide="ignore"):
        m = np.mean(x, axis=ax, keepdims=True)
        v = np.mean((x - m) ** 2, axis=ax, keepdims=True)
        inv = 1.0 / np.sqrt(v + eps)
        y = (x - m) * inv * to64(scale)
        if bias is not None:
            y = y + to64(bias)
    return y, m, inv


def rms_ref(x, scale, axis, eps):
    x = to64(x)
    a = axis + x.ndim if axis < 0 else axis
    ax = tuple(range(a, x.ndim))
    with np.errstate(invalid="ignore", divide="ignore"):
        inv = 1.0 / np.sqrt(np.mean(x * x, axis=ax, keepdims=True) + eps)
    return x * inv * to64(scale), inv


def channel_shape(x):
    return (1, -1) + (1,) * (x.ndim - 2)


def batchnorm_ref(x, scale, b, mean, var, eps):
    cs = channel_shape(x)
    return ((to64(x) - to64(mean).reshape(cs)) / np.sqrt(to64(var).reshape(cs) + eps) * to64(scale).reshape(cs)
            + to64(b).reshape(cs))


def instancenorm_ref(x, scale, b, eps):
    x = to64(x)
    ax = tuple(range(2, x.ndim))
    m = x.mean(axis=ax, keepdims=True)
    v = ((x - m) ** 2).mean(axis=ax, keepdims=True)
    cs = channel_shape(x)
    return (x - m) / np.sqrt(v + eps) * to64(scale).reshape(cs) + to64(b).reshape(cs)


def groupnorm_ref(x, scale, b, groups, eps, opset):
    x = to64(x)
    n, c = x.shape[:2]
    xg = x.reshape(n, groups, -1)
    m = xg.mean(axis=2, keepdims=True)
    v = ((xg - m) ** 2).mean(axis=2, keepdims=True)
    y = ((xg - m) / np.sqrt(v + eps)).reshape(x.shape)
    sc, bb = to64(scale), to64(b)
    if opset < 21:
        sc, bb = np.repeat(sc, c // groups), np.repeat(bb, c // groups)
    cs = channel_shape(x)
    return y * sc.reshape(cs) + bb.reshape(cs)


def lp_ref(x, axis, p):
    x = to64(x)
    norm = np.sum(np.abs(x), axis=axis, keepdims=True) if p == 1 else np.sqrt(np.sum(x * x, axis=axis, keepdims=True))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(norm == 0, 0.0, x / norm)


def mvn_ref(x, axes):
    x = to64(x)
    ax = tuple(a + x.ndim if a < 0 else a for a in axes)
    m = x.mean(axis=ax, keepdims=True)
    v = ((x - m) ** 2).mean(axis=ax, keepdims=True)
    return (x - m) / (np.sqrt(v) + 1e-9)


def rand(rng, shape, t, lo=-4.0, hi=4.0):
    return rng.uniform(lo, hi, shape).astype(NP_TYPE[t])


class stream_always:
    """Context: every output of `ops` is written with non-temporal stores
    (stream_min_bytes = 1 at every level), so small tests reach that path."""

    def __init__(self, *ops):
        self.keys = [(op, isa) for op in ops for isa in ("scalar", "avx2", "avx512")]

    def __enter__(self):
        for op, isa in self.keys:
            olc_core.tuning.set("olc_normalization", op, "stream_min_bytes", 1, implementation=isa, dtype="float32")
        return self

    def __exit__(self, *exc):
        for op, isa in self.keys:
            olc_core.tuning.reset("olc_normalization", op, "stream_min_bytes", implementation=isa, dtype="float32")
