"""Differential tests of the unary kernels: every op x type x SIMD level
against an independent float64 oracle (numpy / math), at lengths around
every vector tile, with special values planted. Tolerances come from
manifest.py (see README.md for the measured accuracy)."""

from __future__ import annotations

import math
import zlib

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import olc_core
from olc_core.testing import guarded
from olc_elementwise import manifest
from olc_elementwise.manifest import BY_NAME, UNARY_OPS

# Every length up to 70 (each tail of the 8- and 16-lane tiles and of the
# 4-vector unrolled bodies), then a few larger ones.
SIZES = tuple(range(71)) + (255, 256, 257, 4099)
LARGE = 1_000_003
LEVELS = [lv for lv in ("scalar", "avx2", "avx512")
          if olc_core.SIMD_LEVELS.index(lv) <= olc_core.SIMD_LEVELS.index(olc_core.detected_simd_level())]

NP_TYPE = {
    "float32": np.dtype(np.float32), "float64": np.dtype(np.float64), "float16": np.dtype(np.float16),
    "bfloat16": np.dtype(ml_dtypes.bfloat16), "bool": np.dtype(np.bool_),
    **{t: np.dtype(t) for t in manifest.SINT + manifest.UINT},
}
ONNX_TYPE = {
    "float32": TensorProto.FLOAT, "float64": TensorProto.DOUBLE, "float16": TensorProto.FLOAT16,
    "bfloat16": TensorProto.BFLOAT16, "bool": TensorProto.BOOL, "int8": TensorProto.INT8,
    "int16": TensorProto.INT16, "int32": TensorProto.INT32, "int64": TensorProto.INT64,
    "uint8": TensorProto.UINT8, "uint16": TensorProto.UINT16, "uint32": TensorProto.UINT32,
    "uint64": TensorProto.UINT64,
}
FLOATS = manifest.F4

# Attribute variants tested besides the defaults.
VARIANTS = {
    "LeakyRelu": [{"alpha": 0.1}, {"alpha": -0.5}],
    "Elu": [{"alpha": 0.5}],
    "Selu": [{"alpha": 2.0, "gamma": 0.5}],
    "HardSigmoid": [{"alpha": 0.5, "beta": 0.25}],
    "Gelu": [{"approximate": "tanh"}],
    "IsInf": [{"detect_positive": 0}, {"detect_negative": 0}, {"detect_positive": 0, "detect_negative": 0}],
    "Celu": [{"alpha": 0.5}, {"alpha": 3.0}, {"alpha": -2.0}],
    "ThresholdedRelu": [{"alpha": 0.5}, {"alpha": -1.0}, {"alpha": 0.0}],
    "Shrink": [{"lambd": 1.0, "bias": 0.5}, {"lambd": 0.0}, {"lambd": 2.0, "bias": -1.25},
               {"lambd": -1.0, "bias": 0.3}],
}


def cases():
    for spec in UNARY_OPS:
        for attrs in [{}] + VARIANTS.get(spec.op, []):
            for t in spec.types:
                yield spec.op, t, attrs


def case_id(c):
    op, t, attrs = c
    extra = ",".join(f"{k}={v}" for k, v in attrs.items())
    return f"{op}-{t}" + (f"-{extra}" if extra else "")


def opset_for(op: str, t: str) -> int:
    """The newest schema version claiming t (a model at that opset)."""
    return max(s.since for s in BY_NAME[op].segments if t in s.types)


def make_model(op, t, attrs, opset=None, name="node0"):
    spec = BY_NAME[op]
    out_t = "bool" if spec.out_bool else t
    node = helper.make_node(op, ["x"], ["y"], name=name, **attrs)
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", ONNX_TYPE[t], None)],
        [helper.make_tensor_value_info("y", ONNX_TYPE[out_t], None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset or opset_for(op, t))])


_sessions: dict = {}


def session(op, t, attrs, level, threads=1):
    key = (op, t, tuple(sorted(attrs.items())), level, threads)
    if key not in _sessions:
        with olc_core.simd_cap(level):
            _sessions[key] = olc_core.Session(make_model(op, t, attrs), threads=threads, strict=True,
                                              record_usage=True)
    return _sessions[key]


# ---------------------------------------------------------------- inputs

def finfo(t):
    return ml_dtypes.finfo(NP_TYPE[t]) if t == "bfloat16" else np.finfo(NP_TYPE[t])


def specials(t):
    fi = finfo(t)
    tiny, maxv = float(fi.smallest_normal), float(fi.max)
    sub = float(fi.smallest_subnormal)
    vals = [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, sub, -sub, tiny - sub, tiny, -tiny, maxv, -maxv,
            1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5, 3.5, 1e-3, -1e-3, 8.0, -8.0]
    if t in ("float32", "float64", "bfloat16"):
        vals += [1e30, -1e30]
    return np.array(vals, np.float64).astype(NP_TYPE[t])


def log_uniform(rng, t, n, lo_exp=None):
    fi = finfo(t)
    lo = math.log(float(fi.smallest_subnormal)) if lo_exp is None else lo_exp
    hi = math.log(float(fi.max))
    return np.exp(rng.uniform(lo, hi, n))


def random_input(op, t, n, rng):
    np_t = NP_TYPE[t]
    if t == "bool":
        return rng.integers(0, 2, n).astype(np.bool_)
    if t not in FLOATS:
        info = np.iinfo(np_t)
        x = rng.integers(info.min, info.max, n, dtype=np_t, endpoint=True)
        edge = np.array([info.min, info.max, 0, 1] + ([-1] if info.min < 0 else []), np_t)
        k = min(n, len(edge))
        x[rng.choice(n, k, replace=False)] = edge[:k]
        return x
    fi = finfo(t)
    lnmax = math.log(float(fi.max))
    if op == "Exp":
        x = rng.uniform(-1.15 * lnmax, 1.02 * lnmax, n)
    elif op in ("Log", "Sqrt", "Reciprocal"):
        x = log_uniform(rng, t, n) * np.where(rng.random(n) < 0.1, -1, 1)
    elif op in ("Sin", "Cos", "Tan"):
        x = rng.uniform(-100, 100, n)
    elif op in ("Asin", "Acos", "Atanh"):
        # the domain [-1, 1], a little beyond, and the last ulps before +-1
        near_one = 1 - np.exp(rng.uniform(math.log(float(fi.eps)) - 1, 0, n))
        x = np.where(rng.random(n) < 0.7, rng.uniform(-1.05, 1.05, n), near_one * np.where(rng.random(n) < 0.5, -1, 1))
    elif op == "Acosh":
        x = 1 + log_uniform(rng, t, n, lo_exp=math.log(float(fi.eps)) - 2)
        x = np.where(rng.random(n) < 0.1, rng.uniform(-2, 1, n), x)
    elif op in ("Sinh", "Cosh"):
        # past the overflow of e^x (and of the result, ln 2 later)
        x = rng.uniform(-1.05, 1.05, n) * (lnmax + 0.7)
    elif op == "Mish":
        # the x e^x tail, down to where it rounds to -0
        x = np.where(rng.random(n) < 0.15, rng.uniform(-115, -75, n),
                     np.where(rng.random(n) < 0.8, rng.uniform(-25, 25, n),
                              log_uniform(rng, t, n) * np.where(rng.random(n) < 0.5, -1, 1)))
    else:
        x = np.where(rng.random(n) < 0.75, rng.uniform(-12, 12, n),
                     log_uniform(rng, t, n) * np.where(rng.random(n) < 0.5, -1, 1))
    x = x.astype(np_t)
    sp = specials(t)
    if op in ("Sin", "Cos"):
        sp = sp[~(np.abs(sp.astype(np.float64)) > 1e4)]  # huge arguments: see README
    k = min(n, len(sp))
    x[rng.choice(n, k, replace=False)] = sp[:k] if n >= len(sp) else rng.choice(sp, k, replace=False)
    return x


# ---------------------------------------------------------------- oracle

def _erf(a):
    return np.frompyfunc(math.erf, 1, 1)(a).astype(np.float64)


def _erfc(a):
    return np.frompyfunc(math.erfc, 1, 1)(a).astype(np.float64)


def wrap_trunc(r, np_t):
    """trunc(r) for finite float64 r, reduced modulo 2^bits into np_t (what an
    integer result outside its type becomes)."""
    m = np.fmod(np.trunc(r), 2.0**64)  # exact
    m = np.where(m >= 2.0**63, m - 2.0**64, np.where(m < -(2.0**63), m + 2.0**64, m))
    return m.astype(np.int64).astype(np_t)


def shrink_int(x, lambd, bias):
    """Integer Shrink as onnx.reference evaluates it (x and the attributes as
    float64, the result truncated), with wrap-around where it leaves the type."""
    v = x.astype(np.float64)
    r = np.where(v < -lambd, v + bias, np.where(v > lambd, v - bias, 0.0))
    return wrap_trunc(r, x.dtype)


def oracle(op, t, attrs, x):
    """Exact (float64) result, before rounding to the output type."""
    spec = BY_NAME[op]
    a = {at.name: at.default for at in spec.attrs}
    a.update(attrs)
    f32 = lambda v: float(np.float32(v))  # ONNX float attributes are float32  # noqa: E731
    if t == "bool":
        return np.logical_not(x)
    if t not in FLOATS:
        if op == "Shrink":
            return shrink_int(x, f32(a["lambd"]), f32(a["bias"]))
        with np.errstate(over="ignore"):
            return {"Abs": np.abs, "Neg": np.negative, "Sign": np.sign, "BitwiseNot": np.invert,
                    "Relu": lambda v: np.maximum(v, 0).astype(v.dtype)}[op](x)
    v = x.astype(np.float64)
    with np.errstate(all="ignore"):
        if op == "Abs": return np.abs(v)
        if op == "Neg": return -v
        if op == "Exp": return np.exp(v)
        if op == "Log": return np.log(v)
        if op == "Sqrt": return np.sqrt(v)
        if op == "Reciprocal": return 1.0 / v
        if op == "Sigmoid": return np.where(v >= 0, 1 / (1 + np.exp(-v)), np.exp(v) / (1 + np.exp(v)))
        if op == "Tanh": return np.tanh(v)
        if op == "Erf": return _erf(v)
        if op == "Sin": return np.sin(v)
        if op == "Cos": return np.cos(v)
        if op == "Floor": return np.floor(v)
        if op == "Ceil": return np.ceil(v)
        if op == "Round": return np.round(v)  # half to even
        if op == "Sign": return np.sign(v) + 0.0
        if op == "Relu": return np.maximum(v, 0.0)
        if op == "HardSigmoid":
            return np.clip(v * f32(a["alpha"]) + f32(a["beta"]), 0.0, 1.0)
        if op == "LeakyRelu": return v * np.where(v > 0, 1.0, f32(a["alpha"]))
        if op == "Elu": return np.where(v > 0, v, f32(a["alpha"]) * np.expm1(v))
        if op == "Selu": return np.where(v > 0, v, f32(a["alpha"]) * np.expm1(v)) * f32(a["gamma"])
        if op == "Softplus": return np.logaddexp(0.0, v)
        if op == "Gelu":
            if a["approximate"] == "tanh":
                u = math.sqrt(2 / math.pi) * (v + 0.044715 * v ** 3)
                r = v / (1 + np.exp(-2 * u))  # = 0.5 v (1 + tanh(u)), no cancellation
            else:
                r = 0.5 * v * _erfc(-v / math.sqrt(2))
            return np.where(v == -np.inf, 0.0, r)  # the limit, where the formula gives -inf * 0
        if op == "HardSwish":
            return np.where(v == -np.inf, -0.0, v * np.clip(v / 6 + 0.5, 0.0, 1.0))  # -inf: the limit
        if op == "Mish":
            return np.where(v == -np.inf, -0.0, v * np.tanh(np.log1p(np.exp(v))))  # -inf: the limit
        if op == "Softsign": return np.where(np.isinf(v), np.sign(v), v / (1 + np.abs(v)))  # +-inf: the limit
        if op == "Celu": return np.where(v > 0, v, f32(a["alpha"]) * np.expm1(v / f32(a["alpha"])))
        if op == "ThresholdedRelu": return np.where((v > f32(a["alpha"])) | np.isnan(v), v, 0.0)
        if op == "Shrink":
            lam, b = f32(a["lambd"]), f32(a["bias"])
            return np.where((v < -lam) | np.isnan(v), v + b, np.where(v > lam, v - b, 0.0))
        if op == "Tan": return np.tan(v)
        if op == "Asin": return np.arcsin(v)
        if op == "Acos": return np.arccos(v)
        if op == "Atan": return np.arctan(v)
        if op == "Sinh": return np.sinh(v)
        if op == "Cosh": return np.cosh(v)
        if op == "Asinh": return np.arcsinh(v)
        if op == "Acosh": return np.arccosh(v)
        if op == "Atanh": return np.arctanh(v)
        if op == "IsNaN": return np.isnan(v)
        if op == "IsInf":
            return (np.isposinf(v) & bool(a["detect_positive"])) | (np.isneginf(v) & bool(a["detect_negative"]))
    raise AssertionError(op)


def ulp_distance_f32(y, ref32):
    yi = y.view(np.int32).astype(np.int64)
    ri = ref32.view(np.int32).astype(np.int64)
    yi = np.where(yi < 0, -(yi & 0x7FFFFFFF), yi)
    ri = np.where(ri < 0, -(ri & 0x7FFFFFFF), ri)
    return np.abs(yi - ri)


def check(op, t, attrs, x, y):
    spec = BY_NAME[op]
    ref = oracle(op, t, attrs, x)
    if spec.out_bool or t == "bool":
        assert y.dtype == np.bool_
        np.testing.assert_array_equal(y.view(np.uint8), ref.astype(np.uint8))
        return
    assert y.dtype == x.dtype and y.shape == x.shape
    if t not in FLOATS:
        np.testing.assert_array_equal(y, ref)
        return
    np_t = NP_TYPE[t]
    y64 = y.astype(np.float64)
    with np.errstate(over="ignore"):
        ref_t = ref.astype(np_t)  # the exact result rounded once
    nan_ref = np.isnan(ref)
    bad = np.isnan(y64) != nan_ref
    assert not bad.any(), f"NaN mismatch at x={x[bad][:5]} y={y[bad][:5]} ref={ref[bad][:5]}"
    tol = spec.tolerance.get(t, ("exact",))
    ok = nan_ref.copy()
    if tol[0] == "exact":
        same = (y64 == ref_t.astype(np.float64)) & (np.signbit(y64) == np.signbit(ref_t.astype(np.float64)))
        ok |= same
    elif tol[0] == "ulp":
        assert t == "float32"
        ok |= ulp_distance_f32(y, ref_t) <= tol[1]
    else:
        _, atol, rtol = tol
        with np.errstate(invalid="ignore"):
            r64 = ref_t.astype(np.float64)
            close = np.abs(y64 - ref) <= atol + rtol * np.abs(ref)
            ok |= close | (y64 == r64)  # equal after rounding (covers infinities)
    bad = ~ok
    assert not bad.any(), (
        f"{op} {t} {attrs}: {bad.sum()} of {bad.size} out of tolerance {tol}; "
        f"x={x[bad][:6]} y={y[bad][:6]} ref={ref[bad][:6]}")


# ---------------------------------------------------------------- tests

@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("case", list(cases()), ids=case_id)
def test_differential(case, level):
    op, t, attrs = case
    sess = session(op, t, attrs, level)
    rng = np.random.default_rng(zlib.crc32(f"{op}/{t}/{level}".encode()))
    for n in SIZES:
        x = random_input(op, t, n, rng)
        y = sess.run(None, {"x": x})[0]
        assert sess.kernel_usage() == [manifest.kernel_name(op)]
        check(op, t, attrs, x, y)
    # a 2-D shape goes through the same flat loop
    x = random_input(op, t, 3 * 37, rng).reshape(3, 37)
    check(op, t, attrs, x.ravel(), sess.run(None, {"x": x})[0].ravel())


@pytest.mark.parametrize("case", list(cases()), ids=case_id)
def test_large(case):
    """Every kernel and type at about a million elements on every level, on
    two threads, the whole output checked: the parallel split and the
    streaming stores only start at sizes like this."""
    op, t, attrs = case
    rng = np.random.default_rng(zlib.crc32(f"large/{op}/{t}".encode()))
    x = random_input(op, t, LARGE, rng)
    for level in LEVELS:
        sess = session(op, t, attrs, level, threads=2)
        y = sess.run(None, {"x": x})[0]
        assert sess.kernel_usage() == [manifest.kernel_name(op)]
        check(op, t, attrs, x, y)


@pytest.mark.parametrize("level", LEVELS)
def test_exp_log_float32_ulp(level):
    """float32 Exp and Log within 2 ULP of the float64 result rounded to
    float32 over their whole range, subnormal results kept."""
    rng = np.random.default_rng(11)
    x = np.concatenate([np.linspace(-103.97, 88.72, 200_001), rng.uniform(-110, 90, 100_000)]).astype(np.float32)
    y = session("Exp", "float32", {}, level).run(None, {"x": x})[0]
    with np.errstate(all="ignore"):
        d = ulp_distance_f32(y, np.exp(x.astype(np.float64)).astype(np.float32))
    assert d.max() <= 2, f"Exp max ulp {d.max()} at x={x[d.argmax()]}"
    x = np.concatenate([np.exp(rng.uniform(-103, 88.7, 200_000)), rng.uniform(0.5, 2, 100_000),
                        np.float32(2.0) ** -np.arange(127, 150)]).astype(np.float32)
    y = session("Log", "float32", {}, level).run(None, {"x": x})[0]
    d = ulp_distance_f32(y, np.log(x.astype(np.float64)).astype(np.float32))
    assert d.max() <= 2, f"Log max ulp {d.max()} at x={x[d.argmax()]}"


@pytest.mark.parametrize("level", LEVELS)
def test_semantics_table(level):
    """Hand-checked values: signed zeros, infinities, NaN, wrap-around."""
    def run(op, x, **attrs):
        x = np.asarray(x)
        t = {np.dtype(v): k for k, v in NP_TYPE.items()}[x.dtype]
        return session(op, t, attrs, level).run(None, {"x": x})[0]

    f = lambda *v: np.array(v, np.float32)  # noqa: E731
    bits = lambda a: a.view(np.uint32).tolist()  # noqa: E731
    assert bits(run("Neg", f(0.0))) == bits(f(-0.0))
    assert bits(run("Abs", f(-0.0))) == bits(f(0.0))
    assert bits(run("Relu", f(-0.0, -1.0))) == bits(f(0.0, 0.0))
    assert bits(run("Sqrt", f(-0.0))) == bits(f(-0.0))
    assert bits(run("Sign", f(-0.0, 0.0))) == bits(f(0.0, 0.0))
    assert np.isnan(run("Sign", f(np.nan))).all() and np.isnan(run("Relu", f(np.nan))).all()
    assert run("Exp", f(-np.inf, np.inf)).tolist() == [0.0, np.inf]
    y = run("Log", f(0.0, -1.0, np.inf))
    assert y[0] == -np.inf and np.isnan(y[1]) and y[2] == np.inf
    assert run("Reciprocal", f(0.0, -0.0)).tolist() == [np.inf, -np.inf]
    assert run("Round", f(0.5, 1.5, 2.5, -0.5, -2.5)).tolist() == [0.0, 2.0, 2.0, -0.0, -2.0]
    assert run("HardSigmoid", f(-100, 100, 0)).tolist() == [0.0, 1.0, 0.5]
    assert run("Softplus", f(100.0, -100.0)).tolist()[0] == 100.0
    for it in (np.int8, np.int16, np.int32, np.int64):
        m = np.iinfo(it).min
        assert run("Abs", np.array([m, -1, 5], it)).tolist() == [m, 1, 5]
        assert run("Neg", np.array([m, 1], it)).tolist() == [m, -1]
    nb = np.array([0, 1, 2, 255], np.uint8).view(np.bool_)
    assert run("Not", nb).view(np.uint8).tolist() == [1, 0, 0, 0]


def _dense(lo, hi, n):
    return np.linspace(lo, hi, n, dtype=np.float64)


# float32 sweeps: (op, inputs, max ulp) where the max is the manifest's bound;
# each sweep holds the edges (domain limits, the reductions' switch points,
# overflow of e^x, the x e^x tail of Mish).
ULP_SWEEPS = {
    "HardSwish": lambda r: np.concatenate([_dense(-3.5, 3.5, 100_001), -3 + np.exp(r.uniform(-40, 0, 50_000)),
                                           r.uniform(-1e4, 1e4, 50_000)]),
    "Softsign": lambda r: np.concatenate([_dense(-20, 20, 100_001), np.exp(r.uniform(-100, 80, 100_000))]),
    "Mish": lambda r: np.concatenate([_dense(-115, 25, 200_001), r.uniform(-10, 10, 100_000)]),
    "Tan": lambda r: np.concatenate([_dense(-7, 7, 200_001), r.uniform(-1e4, 1e4, 100_000),
                                     (np.arange(1, 2000) * (math.pi / 2))]),
    "Asin": lambda r: np.concatenate([_dense(-1, 1, 200_001), 1 - np.exp(r.uniform(-17, 0, 100_000))]),
    "Acos": lambda r: np.concatenate([_dense(-1, 1, 200_001), 1 - np.exp(r.uniform(-17, 0, 50_000)),
                                      np.exp(r.uniform(-17, 0, 50_000)) - 1]),
    "Atan": lambda r: np.concatenate([_dense(-4, 4, 200_001), np.exp(r.uniform(-100, 88, 100_000))]),
    "Sinh": lambda r: np.concatenate([_dense(-89.5, 89.5, 200_001), np.exp(r.uniform(-100, 0, 100_000))]),
    "Cosh": lambda r: _dense(-89.5, 89.5, 300_001),
    "Asinh": lambda r: np.concatenate([_dense(-10, 10, 100_001), np.exp(r.uniform(-100, 88, 200_000))]),
    "Acosh": lambda r: np.concatenate([_dense(1, 10, 100_001), 1 + np.exp(r.uniform(-17, 0, 100_000)),
                                       np.exp(r.uniform(0, 88, 100_000))]),
    "Atanh": lambda r: np.concatenate([_dense(-1, 1, 200_001), 1 - np.exp(r.uniform(-17, 0, 100_000))]),
}


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("op", sorted(ULP_SWEEPS))
def test_float32_ulp_sweeps(op, level):
    """float32 within the manifest's ULP bound of the float64 result rounded
    to float32 over each op's whole range and its edges (the measured maxima
    are in README.md)."""
    x = ULP_SWEEPS[op](np.random.default_rng(zlib.crc32(op.encode()))).astype(np.float32)
    y = session(op, "float32", {}, level).run(None, {"x": x})[0]
    with np.errstate(all="ignore"):
        ref = oracle(op, "float32", {}, x).astype(np.float32)
    finite = np.isfinite(ref)
    assert (np.isnan(y) == np.isnan(ref)).all() and (y[~finite] == ref[~finite])[~np.isnan(ref[~finite])].all()
    d = ulp_distance_f32(y[finite], ref[finite])
    bound = BY_NAME[op].tolerance["float32"][1]
    assert d.max() <= bound, f"{op} max ulp {d.max()} at x={x[finite][d.argmax()]!r}"


def _reference_eval(model, x):
    from onnx.reference import ReferenceEvaluator

    with np.errstate(all="ignore"):
        return ReferenceEvaluator(model).run(None, {"x": x})[0]


@pytest.mark.parametrize("op,t,attrs", [
    (op, t, attrs) for op in ("Celu", "ThresholdedRelu", "Shrink", "HardSwish", "Softsign", "Mish")
    for attrs in [{}] + VARIANTS.get(op, [])
    for t in ("float32",) + (("int8", "uint8", "int32", "int64") if op == "Shrink" else ())
], ids=lambda v: str(v))
def test_attribute_semantics_match_onnx_reference(op, t, attrs):
    """The attribute ops against onnx.reference itself on finite inputs
    (where the two ways of writing the formulas agree): Shrink and
    ThresholdedRelu bit for bit, the others within float32 rounding."""
    rng = np.random.default_rng(zlib.crc32(f"ref/{op}/{t}/{attrs}".encode()))
    if t == "float32":
        x = np.concatenate([rng.uniform(-6, 6, 3000), rng.normal(0, 50, 1000), [0.0, 0.5, -0.5, 1.0, -1.0, 3.0, -3.0]])
        x = x.astype(np.float32)
    else:  # a range where x +- bias stays in the type (the reference's float -> int cast is undefined outside)
        x = rng.integers(-100 if t[0] == "i" else 0, 100, 4000).astype(NP_TYPE[t])
    ours = session(op, t, attrs, LEVELS[-1]).run(None, {"x": x})[0]
    ref = _reference_eval(make_model(op, t, attrs), x)
    assert ours.dtype == ref.dtype
    if op in ("Shrink", "ThresholdedRelu"):
        np.testing.assert_array_equal(ours, ref)
    else:
        # HardSwish runs as its function body there (alpha 1/6 as float32)
        np.testing.assert_allclose(ours, ref, rtol=4e-7, atol=1e-7)


@pytest.mark.parametrize("level", LEVELS)
def test_limits_domains_and_signed_zeros(level):
    """Hand-checked values of the activations, the hyperbolic and inverse
    trigonometric functions and BitwiseNot: limits where the literal formula
    gives NaN, domain edges, overflow points, signed zeros, wrap-around."""
    def run(op, x, **attrs):
        x = np.asarray(x)
        t = {np.dtype(v): k for k, v in NP_TYPE.items()}[x.dtype]
        return session(op, t, attrs, level).run(None, {"x": x})[0]

    f = lambda *v: np.array(v, np.float32)  # noqa: E731
    bits = lambda a: np.asarray(a, np.float32).view(np.uint32).tolist()  # noqa: E731
    inf, nan = np.inf, np.nan
    half_pi, pi = float(np.float32(math.pi / 2)), float(np.float32(math.pi))
    assert bits(run("HardSwish", f(-inf, -3, -4, -0.0, 3, inf))) == bits(f(-0.0, -0.0, -0.0, -0.0, 3, inf))
    assert bits(run("Mish", f(-inf, -200, -0.0, 0, inf))) == bits(f(-0.0, -0.0, -0.0, 0, inf))
    assert bits(run("Softsign", f(inf, -inf, -0.0, 1e30))) == bits(f(1, -1, -0.0, 1))
    assert bits(run("Celu", f(-0.0, -inf, inf))) == bits(f(-0.0, -1, inf))
    assert bits(run("Celu", f(-0.0, -inf), alpha=2.0)) == bits(f(-0.0, -2))
    assert bits(run("ThresholdedRelu", f(1, np.nextafter(np.float32(1), np.float32(2)), -5))) == \
        bits(f(0, np.nextafter(np.float32(1), np.float32(2)), 0))
    assert bits(run("ThresholdedRelu", f(-0.0), alpha=-1.0)) == bits(f(-0.0))
    assert bits(run("Shrink", f(0.5, -0.5, 0.75, -0.75))) == bits(f(0, 0, 0.75, -0.75))
    assert bits(run("Shrink", f(2.0, -2.0, 1.0, 1.5), lambd=1.0, bias=1.5)) == bits(f(0.5, -0.5, 0, 0))
    assert bits(run("Tan", f(-0.0, 0.0))) == bits(f(-0.0, 0.0))
    assert bits(run("Asin", f(1, -1, -0.0))) == bits(f(half_pi, -half_pi, -0.0))
    assert bits(run("Acos", f(1, -1, 0, -0.0))) == bits(f(0, pi, half_pi, half_pi))
    assert bits(run("Atan", f(inf, -inf, -0.0))) == bits(f(half_pi, -half_pi, -0.0))
    y = run("Sinh", f(-0.0, 89.4, 89.42, -89.42, -inf))
    assert bits(y[[0, 2, 3, 4]]) == bits(f(-0.0, inf, -inf, -inf)) and np.isfinite(y[1])
    y = run("Cosh", f(0, -0.0, -inf, 89.4, 89.42))
    assert y[:3].tolist() == [1, 1, inf] and np.isfinite(y[3]) and y[4] == inf
    y = run("Asinh", f(-0.0, -inf, inf, 3e38))
    assert bits(y[:3]) == bits(f(-0.0, -inf, inf)) and abs(y[3] - math.asinh(3e38)) < 1e-5
    assert bits(run("Acosh", f(1, inf))) == bits(f(0, inf))
    assert bits(run("Atanh", f(1, -1, -0.0))) == bits(f(inf, -inf, -0.0))
    # out of the domain: NaN
    for op, x in [("Asin", f(1.0000001, -2, inf)), ("Acos", f(-1.0000001, 2, -inf)), ("Acosh", f(0.99999994, 0, -inf)),
                  ("Atanh", f(1.0000001, -3, inf)), ("Tan", f(inf, -inf))]:
        assert np.isnan(run(op, x)).all(), op
    # NaN in, NaN out: ThresholdedRelu and Shrink keep it too (the literal
    # where() formulas of the reference give 0)
    for op in ("HardSwish", "Mish", "Softsign", "Celu", "ThresholdedRelu", "Shrink", "Tan", "Asin", "Acos", "Atan",
               "Sinh", "Cosh", "Asinh", "Acosh", "Atanh"):
        assert np.isnan(run(op, f(nan, -nan))).all(), op
    assert run("BitwiseNot", np.array([0, 255, 0x5A], np.uint8)).tolist() == [255, 0, 0xA5]
    i64 = np.iinfo(np.int64)
    assert run("BitwiseNot", np.array([0, -1, i64.min], np.int64)).tolist() == [-1, 0, i64.max]
    # integer Shrink: x +- bias truncated toward zero, wrapping outside the type
    assert run("Shrink", np.array([127, -128, 3, -3, 0], np.int8), lambd=0.0, bias=-5.0).tolist() == \
        [(132 + 128) % 256 - 128, (-133 + 128) % 256 - 128, 8, -8, 0]
    assert run("Shrink", np.array([0, 1, 2, 255], np.uint8), lambd=1.0, bias=2.5).tolist() == [0, 0, 0, 252]
    assert run("Shrink", np.array([0, 7], np.uint8), lambd=-1.0, bias=-2.0).tolist() == [254, 9]


@pytest.mark.parametrize("level", LEVELS)
def test_in_place_chain(level):
    """Relu -> Neg -> Abs: intermediates may be reused in place."""
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="r"), helper.make_node("Neg", ["a"], ["b"], name="n"),
             helper.make_node("Exp", ["b"], ["y"], name="e")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    with olc_core.simd_cap(level):
        s = olc_core.Session(m, strict=True)
    for n in (17, 4099, 300_001):
        x = np.random.default_rng(n).uniform(-5, 5, n).astype(np.float32)
        y = s.run(None, {"x": x})[0]
        np.testing.assert_allclose(y, np.exp(-np.maximum(x, 0)), rtol=3e-7)


@pytest.mark.parametrize("fusion", [False, True])
@pytest.mark.parametrize("level", LEVELS)
def test_in_place_chain_of_activations(level, fusion):
    """A chain through the activations and the hyperbolic / inverse
    trigonometric ops, its intermediates reused in place (or fused): the
    same bits as each op run on its own into a fresh buffer (the chain is
    far too ill-conditioned for a float64 oracle; each op's accuracy is
    checked above)."""
    chain = [("Softsign", {}), ("Asin", {}), ("Sinh", {}), ("Atan", {}), ("Mish", {}), ("HardSwish", {}),
             ("Celu", {"alpha": 0.5}), ("Shrink", {"lambd": 0.01, "bias": -0.5}), ("Cosh", {}), ("Acosh", {}),
             ("Asinh", {}), ("Tanh", {}), ("Atanh", {}), ("ThresholdedRelu", {"alpha": -0.5}), ("Tan", {}), ("Acos", {})]
    names = ["x"] + [f"v{k}" for k in range(len(chain) - 1)] + ["y"]
    nodes = [helper.make_node(op, [names[k]], [names[k + 1]], name=f"n{k}", **a) for k, (op, a) in enumerate(chain)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 22)])
    with olc_core.simd_cap(level):
        s = olc_core.Session(m, strict=True, record_usage=True, fusion=fusion)
    for n in (17, 4099, 300_001):
        x = np.random.default_rng(n).uniform(-5, 5, n).astype(np.float32)
        y = s.run(None, {"x": x})[0]
        used = s.kernel_usage()
        if fusion:
            assert used == ["olc_elementwise::ElementwisePlan"], used
        else:
            assert sorted(set(used)) == sorted({manifest.kernel_name(op) for op, _ in chain}), used
        v = x
        for op, a in chain:
            v = session(op, "float32", a, level).run(None, {"x": v.copy()})[0]
        np.testing.assert_array_equal(y, v)


@pytest.mark.parametrize("op,t", [("Relu", "float32"), ("Exp", "float32"), ("Tanh", "float32"),
                                  ("Sigmoid", "float16"), ("Abs", "float64"), ("Gelu", "bfloat16")])
def test_threads_identical(op, t):
    rng = np.random.default_rng(3)
    x = random_input(op, t, 2_000_003, rng)
    one = session(op, t, {}, LEVELS[-1], threads=1).run(None, {"x": x})[0]
    two = session(op, t, {}, LEVELS[-1], threads=2).run(None, {"x": x})[0]
    assert one.tobytes() == two.tobytes()


# ---------------------------------------------------------------- errors

def test_unsupported_type_is_an_error():
    with pytest.raises(olc_core.OlcError, match=r"node0.*Exp"):
        olc_core.Session(make_model("Exp", "int32", {}, opset=13), strict=True)
    # bfloat16 is not in HardSigmoid's schema before opset 22
    with pytest.raises(olc_core.OlcError, match=r"node0.*HardSigmoid"):
        olc_core.Session(make_model("HardSigmoid", "bfloat16", {}, opset=21), strict=True)
    # Celu-12 is float32 only; Shrink-9 has no bfloat16; BitwiseNot is integer only
    for op, t, opset in [("Celu", "float64", 12), ("Shrink", "bfloat16", 22), ("BitwiseNot", "float32", 18)]:
        with pytest.raises(olc_core.OlcError, match=rf"node0.*{op}"):
            olc_core.Session(make_model(op, t, {}, opset=opset), strict=True)


@pytest.mark.parametrize("op,t,attrs,why", [
    ("Gelu", "float32", {"approximate": "fast"}, "approximate"),
    ("IsInf", "float32", {"detect_positive": 2}, "detect_positive"),
    ("LeakyRelu", "float32", {"alpha": float("nan")}, "alpha"),
    ("Elu", "float32", {"alpha": float("inf")}, "alpha"),
    ("HardSigmoid", "float32", {"beta": 1}, "beta"),
    ("Relu", "float32", {"alpha": 0.5}, "alpha"),
    ("Celu", "float32", {"alpha": 0.0}, "alpha"),
    ("Shrink", "int32", {"lambd": float("inf")}, "lambd"),
    ("ThresholdedRelu", "float16", {"beta": 1.0}, "beta"),
])
def test_bad_attribute_is_an_error(op, t, attrs, why):
    with pytest.raises(olc_core.OlcError) as ei:
        olc_core.Session(make_model(op, t, attrs, name="bad_node"), strict=False)
    msg = str(ei.value)
    assert "bad_node" in msg and op in msg and why in msg, msg


# ---------------------------------------------------------------- manifest

def test_manifest_matches_onnx_schemas():
    for spec in UNARY_OPS:
        for seg in spec.segments:
            schema = onnx.defs.get_schema(spec.op, seg.since)
            assert schema.since_version == seg.since, (spec.op, seg.since)
            assert "consumed_inputs" not in schema.attributes, (spec.op, seg.since)
            allowed = {c.type_param_str: c.allowed_type_strs for c in schema.type_constraints}
            names = {"float32": "float", "float64": "double"}
            for typ in seg.types:
                assert f"tensor({names.get(typ, typ)})" in allowed[spec.input_constraint], (spec.op, seg.since, typ)
            if seg.until < manifest.MAX_OPSET:
                assert onnx.defs.get_schema(spec.op, seg.until + 1).since_version == seg.until + 1
        latest = onnx.defs.get_schema(spec.op)
        assert {a.name for a in spec.attrs} == set(latest.attributes), spec.op


def test_attribute_defaults_agree():
    from olc_elementwise import _ext
    for spec in UNARY_OPS:
        schema = onnx.defs.get_schema(spec.op)
        native = _ext.attribute_defaults(spec.op)
        for at in spec.attrs:
            d = schema.attributes[at.name].default_value
            onnx_default = {"float": d.f, "int": d.i, "string": d.s.decode()}[at.kind]
            assert at.default == onnx_default == native[at.name], (spec.op, at.name)
    assert sorted(_ext.ops()) == sorted(s.op for s in UNARY_OPS)


def test_registrations():
    # The family also registers binary/variadic kernels (binary_manifest.py)
    # and the fused kernel; this test covers the unary table.
    regs = [r for r in olc_core.registered_kernels()
            if r.family == "olc-elementwise" and r.domain == "ai.onnx" and r.op_type in BY_NAME]
    assert {r.op_type for r in regs} == {s.op for s in UNARY_OPS}
    assert all(r.kernel_name == manifest.kernel_name(r.op_type) for r in regs)
    assert len(regs) == sum(len(s.segments) for s in UNARY_OPS)


# ---------------------------------------------------------------- every length, across levels

@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("op,t", [("Exp", "float32"), ("Relu", "float16"), ("Sigmoid", "bfloat16"),
                                  ("IsNaN", "float32"), ("Abs", "int64"), ("Not", "bool")])
def test_every_length(op, t, level):
    """Each length 0..130 (every tail of every tile): no over-read, exact tails."""
    sess = session(op, t, {}, level)
    rng = np.random.default_rng(1)
    for n in range(131):
        x = random_input(op, t, n, rng)
        check(op, t, {}, x, sess.run(None, {"x": x})[0])


@pytest.mark.parametrize("op,t", sorted({(op, t) for op, t, _ in cases()}))
def test_inputs_ending_at_a_guard_page(op, t):
    """Every length 0..70 at every level with the input's last element just
    before an inaccessible page, and its first just after one: no path reads
    past either end."""
    rng = np.random.default_rng(zlib.crc32(f"guard/{op}/{t}".encode()))
    sessions = [session(op, t, {}, lv) for lv in LEVELS]
    for n in range(71):
        for at in ("end", "start"):
            x = guarded(random_input(op, t, n, rng), at=at)
            for sess in sessions:
                check(op, t, {}, x, sess.run(None, {"x": x})[0])


# Levels whose algorithm for an op differs from the scalar one (so not bit
# for bit): Tanh and Erf at AVX2 are rational forms without table lookups,
# and so is Gelu's R(a) there (their accuracy: test_vmath_accuracy's AVX2
# sweep).
OWN_ALGORITHM = {("Tanh", "avx2"), ("Erf", "avx2"), ("Gelu", "avx2")}
# float32 ulp bounds of the odd saturating functions per form: (the levels
# that evaluate the 16-piece table, the AVX2 rational form); docs/accuracy.md.
ODD_FN_ULP = {"Tanh": (2, 6), "Erf": (3, 7)}
_ODD_REF = {"Tanh": np.tanh, "Erf": np.vectorize(math.erf, otypes=[np.float64])}
_ODD_EDGE = {"Tanh": (8, 9.5), "Erf": (3.5, 4.5)}


@pytest.mark.parametrize("case", [c for c in cases() if c[1] in ("float32", "float16", "bfloat16")], ids=case_id)
def test_levels_bit_identical(case):
    """One algorithm per function at every level: results agree bit for bit
    (an oracle-independent cross-check of the vector tails and conversions)."""
    op, t, attrs = case
    x = random_input(op, t, 1031, np.random.default_rng(9))
    levels = [lv for lv in LEVELS if (op, lv) not in OWN_ALGORITHM]
    outs = {lv: session(op, t, attrs, lv).run(None, {"x": x})[0].tobytes() for lv in levels}
    assert len(set(outs.values())) == 1, {lv: hash(b) for lv, b in outs.items()}


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("op", sorted(ODD_FN_ULP))
def test_odd_saturating_by_level(op, level):
    """float32 Tanh and Erf per level, table or rational form, within their
    ulp bounds over a dense sweep of [-10, 10], the small and subnormal
    range, the saturation edge and the special values (odd: f(-x) = -f(x)
    bit for bit, -0 kept)."""
    rng = np.random.default_rng(21)
    x = np.concatenate([_dense(-10, 10, 400_001), rng.uniform(*_ODD_EDGE[op], 50_000),
                        np.exp(rng.uniform(-104, 0, 50_000)), np.float32([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45])])
    x = np.concatenate([x, -x]).astype(np.float32)
    y = session(op, "float32", {}, level).run(None, {"x": x})[0]
    ref = _ODD_REF[op](x.astype(np.float64)).astype(np.float32)
    assert (np.isnan(y) == np.isnan(ref)).all()
    ok = ~np.isnan(ref)
    assert (np.signbit(y[ok]) == np.signbit(ref[ok])).all()
    bound = ODD_FN_ULP[op][1 if (op, level) in OWN_ALGORITHM else 0]
    d = ulp_distance_f32(y[ok], ref[ok])
    assert d.max() <= bound, (level, d.max(), x[ok][d.argmax()])
    half = x.size // 2
    flipped = y[half:].view(np.uint32) ^ np.uint32(0x80000000)
    assert (y[:half].view(np.uint32) == flipped)[ok[:half]].all()
