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
from olc_elementwise import manifest
from olc_elementwise.manifest import BY_NAME, UNARY_OPS

SIZES = (0, 1, 7, 15, 16, 17, 31, 32, 33, 255, 256, 257, 4099)
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
    elif op in ("Sin", "Cos"):
        x = rng.uniform(-100, 100, n)
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


def oracle(op, t, attrs, x):
    """Exact (float64) result, before rounding to the output type."""
    if t == "bool":
        return np.logical_not(x)
    if t not in FLOATS:
        with np.errstate(over="ignore"):
            return {"Abs": np.abs, "Neg": np.negative, "Sign": np.sign,
                    "Relu": lambda v: np.maximum(v, 0).astype(v.dtype)}[op](x)
    spec = BY_NAME[op]
    a = {at.name: at.default for at in spec.attrs}
    a.update(attrs)
    f32 = lambda v: float(np.float32(v))  # ONNX float attributes are float32  # noqa: E731
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


@pytest.mark.parametrize("op,t,attrs,why", [
    ("Gelu", "float32", {"approximate": "fast"}, "approximate"),
    ("IsInf", "float32", {"detect_positive": 2}, "detect_positive"),
    ("LeakyRelu", "float32", {"alpha": float("nan")}, "alpha"),
    ("Elu", "float32", {"alpha": float("inf")}, "alpha"),
    ("HardSigmoid", "float32", {"beta": 1}, "beta"),
    ("Relu", "float32", {"alpha": 0.5}, "alpha"),
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


@pytest.mark.parametrize("case", [c for c in cases() if c[1] in ("float32", "float16", "bfloat16")], ids=case_id)
def test_levels_bit_identical(case):
    """One algorithm per function at every level: results agree bit for bit
    (an oracle-independent cross-check of the vector tails and conversions)."""
    op, t, attrs = case
    x = random_input(op, t, 1031, np.random.default_rng(9))
    outs = {lv: session(op, t, attrs, lv).run(None, {"x": x})[0].tobytes() for lv in LEVELS}
    assert len(set(outs.values())) == 1, {lv: hash(b) for lv, b in outs.items()}
