"""Differential tests of the binary kernels against onnx.reference: every
operator x manifest type x attribute at a few broadcast shapes on every SIMD
level, every broadcast family at a few op x type pairs (1 and 2 threads, up
to a million elements), special values, errors raised before any output,
in-place reuse, and the manifest against the onnx schemas."""

from __future__ import annotations

import contextlib
import zlib

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import olc_core
from olc_core.testing import guarded
from olc_elementwise import binary_manifest as bm

LEVELS = [lv for lv in ("scalar", "avx2", "avx512")
          if olc_core.SIMD_LEVELS.index(lv) <= olc_core.SIMD_LEVELS.index(olc_core.detected_simd_level())]

NP = {"float32": np.dtype(np.float32), "float64": np.dtype(np.float64), "float16": np.dtype(np.float16),
      "bfloat16": np.dtype(ml_dtypes.bfloat16), "bool": np.dtype(np.bool_),
      **{t: np.dtype(t) for t in bm.INT}}
ONNX = {"float32": TensorProto.FLOAT, "float64": TensorProto.DOUBLE, "float16": TensorProto.FLOAT16,
        "bfloat16": TensorProto.BFLOAT16, "bool": TensorProto.BOOL, "int8": TensorProto.INT8,
        "int16": TensorProto.INT16, "int32": TensorProto.INT32, "int64": TensorProto.INT64,
        "uint8": TensorProto.UINT8, "uint16": TensorProto.UINT16, "uint32": TensorProto.UINT32,
        "uint64": TensorProto.UINT64}
FLOATS = bm.F4
BINARY = [o for o in bm.NARY_OPS if o.kind == "binary"]
SCHEMA_SKIP = {"string", "complex64", "complex128"}

VARIANTS = {"Mod": [{"fmod": 0}, {"fmod": 1}], "BitShift": [{"direction": "LEFT"}, {"direction": "RIGHT"}]}

# Small shapes: every family once, tails around vector widths, empty.
SHAPES = [((33,), (33,)), ((), (257,)), ((31,), ()), ((7, 17), (17,)), ((5, 33), (5, 1)),
          ((2, 1, 4, 1, 3, 1), (1, 3, 1, 5, 1, 7)), ((0, 3), (3,)), ((2, 3, 4, 5), (3, 1, 1))]


def newest_opset(spec, t, constraint="T"):
    return max(s.since for s in spec.segments if t in s.types.get(constraint, ()))


def make_model(op, in_types, out_type, opset, attrs=None, names=None):
    names = names or [f"x{i}" for i in range(len(in_types))]
    node = helper.make_node(op, names, ["y"], name="node0", **(attrs or {}))
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info(n, ONNX[t], None) for n, t in zip(names, in_types)],
        [helper.make_tensor_value_info("y", ONNX[out_type], None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


_sessions: dict = {}


def session(model_key, model, level, threads=1):
    key = (model_key, level, threads)
    if key not in _sessions:
        with olc_core.simd_cap(level):
            _sessions[key] = olc_core.Session(model, threads=threads, strict=True, record_usage=True)
    return _sessions[key]


@contextlib.contextmanager
def streaming_lowered(kernels, t):
    """Lowers the streaming thresholds of `kernels` (dtype t, vector levels)
    so that runs reading 1 MiB stream, split ones too; restores the
    defaults on exit."""
    from olc_core import tuning

    names = {"stream_min_bytes": 1 << 20, "stream_parallel_min_bytes": 1}
    kernels = [kernels] if isinstance(kernels, str) else kernels
    vector_levels = [lv for lv in LEVELS if lv != "scalar"]
    for kernel in kernels:
        for name, value in names.items():
            for lv in vector_levels:
                tuning.set("olc_elementwise", kernel, name, value, implementation=lv, dtype=t)
    try:
        yield
    finally:
        for kernel in kernels:
            for name in names:
                for lv in vector_levels:
                    tuning.reset("olc_elementwise", kernel, name, implementation=lv, dtype=t)


# ---------------------------------------------------------------- inputs

def float_values(t, n, rng, lo=-100.0, hi=100.0):
    x = rng.uniform(lo, hi, n)
    x = np.where(rng.random(n) < 0.2, np.round(x), x)  # exact ties, integers
    x = x.astype(NP[t])
    sp = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5], np.float64).astype(NP[t])
    k = min(n, len(sp))
    if n:
        x[rng.choice(n, k, replace=False)] = sp[:k] if n >= len(sp) else rng.choice(sp, k, replace=False)
    return x


def int_values(t, n, rng, lo=None, hi=None):
    info = np.iinfo(NP[t])
    lo = info.min if lo is None else max(lo, info.min)
    hi = info.max if hi is None else min(hi, info.max)
    x = rng.integers(lo, hi, n, dtype=NP[t], endpoint=True)
    if n and lo == info.min and hi == info.max:
        edge = np.array([info.min, info.max, 0, 1] + ([-1] if info.min < 0 else []), NP[t])
        k = min(n, len(edge))
        x[rng.choice(n, k, replace=False)] = edge[:k]
    return x


def gen(op, attrs, t, shape, rng, role):
    """Input `role` (0: A, 1: B) of op with element type t."""
    n = int(np.prod(shape, dtype=np.int64))
    if t == "bool":
        return rng.integers(0, 2, n).astype(np.bool_).reshape(shape)
    if op == "Pow":
        if role == 0:
            x = float_values(t, n, rng, -3, 3) if t in FLOATS else int_values(t, n, rng, -4, 4)
        else:
            x = float_values(t, n, rng, -3, 3) if t in FLOATS else int_values(t, n, rng, 0, 5)
        return x.reshape(shape)
    if t in FLOATS:
        return float_values(t, n, rng).reshape(shape)
    if op == "BitShift" and role == 1:
        bits = NP[t].itemsize * 8
        return int_values(t, n, rng, -3 if t in bm.SINT else 0, bits + 3).reshape(shape)
    x = int_values(t, n, rng)
    if op in ("Div", "Mod") and role == 1:
        x[x == 0] = 3
        if op == "Div" and t in bm.SINT:
            x[x == -1] = -2  # INT_MIN / -1 is an error (tested separately)
    return x.reshape(shape)


def pow_exponent(t_base, t_exp, shape, rng):
    n = int(np.prod(shape, dtype=np.int64))
    if t_exp in FLOATS:
        x = rng.uniform(-3, 3, n)
        x = np.where(rng.random(n) < 0.3, np.round(x), x).astype(NP[t_exp])
        if t_base not in FLOATS:  # integer bases: results in range, non-negative exponents
            x = np.abs(np.round(x)).astype(NP[t_exp])
    else:
        lo = 0 if (t_base not in FLOATS or t_exp in bm.UINT) else -3
        x = int_values(t_exp, n, rng, lo, 5)
    return x.reshape(shape)


# ---------------------------------------------------------------- oracle

def reference(model, feeds):
    with np.errstate(all="ignore"):
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ReferenceEvaluator(model).run(None, feeds)[0]


def tolerance(op, t):
    if op == "Pow" and t in FLOATS:
        return {"float32": 4e-7, "float64": 1e-15, "float16": 1e-3, "bfloat16": 8e-3}[t]
    return 0.0


def check(op, y, ref, t_out, rtol=0.0, signed_zero=True):
    ref = np.asarray(ref)
    assert y.shape == ref.shape, f"shape {y.shape} != {ref.shape}"
    if t_out == "bool":
        assert y.dtype == np.bool_
        np.testing.assert_array_equal(y.view(np.uint8), ref.astype(np.uint8))
        return
    assert y.dtype == NP[t_out], f"dtype {y.dtype} != {t_out}"
    if t_out not in FLOATS:
        np.testing.assert_array_equal(y, ref.astype(NP[t_out]))
        return
    y64 = y.astype(np.float64)
    r64 = ref.astype(NP[t_out]).astype(np.float64)
    nan_y, nan_r = np.isnan(y64), np.isnan(r64)
    bad = nan_y != nan_r
    assert not bad.any(), f"{op}: NaN mismatch y={y[bad][:5]} ref={ref[bad][:5]}"
    with np.errstate(invalid="ignore"):
        ok = nan_r | (y64 == r64)
        if signed_zero:
            ok &= nan_r | (np.signbit(y64) == np.signbit(r64))
        if rtol:
            ok |= np.abs(y64 - r64) <= rtol * np.abs(r64)
    bad = ~ok
    assert not bad.any(), f"{op}: {bad.sum()} of {bad.size} differ: y={y[bad][:6]} ref={ref[bad][:6]}"


# ---------------------------------------------------------------- manifest

def test_manifest_matches_schemas():
    for spec in bm.NARY_OPS:
        assert onnx.defs.has(spec.op), spec.op
        for seg in spec.segments:
            top = min(seg.until, onnx.defs.onnx_opset_version())
            for v in range(seg.since, top + 1):
                schema = onnx.defs.get_schema(spec.op, v)
                allowed = {tc.type_param_str: {s[len("tensor("):-1] for s in tc.allowed_type_strs}
                           for tc in schema.type_constraints}
                names = {"double": "float64", "float": "float32"}
                for c, types in seg.types.items():
                    want = {names.get(x, x) for x in allowed[c]} - SCHEMA_SKIP
                    assert set(types) == want, f"{spec.op}-{v} {c}: manifest {sorted(types)} schema {sorted(want)}"
        # segments are contiguous, and the first one has broadcasting semantics
        for a, b in zip(spec.segments, spec.segments[1:]):
            assert a.until + 1 == b.since


def test_registrations_match_manifest():
    regs = [r for r in olc_core.registered_kernels() if r.kernel_name.startswith("olc_elementwise::")]
    for spec in bm.NARY_OPS:
        mine = [r for r in regs if r.op_type == spec.op]
        assert [(r.since_version, r.until_version) for r in mine] == [(s.since, s.until) for s in spec.segments]
        for r, s in zip(mine, spec.segments):
            assert {k: tuple(v) for k, v in r.types.items()} == s.types


# ---------------------------------------------------------------- every op x type

def binary_cases():
    for spec in BINARY:
        for attrs in VARIANTS.get(spec.op, [{}]):
            for t in spec.types("T"):
                if spec.op == "Pow":
                    continue
                yield spec.op, t, t, attrs
    pow_spec = bm.BY_NAME["Pow"]
    for ta in pow_spec.types("T"):
        for tb in pow_spec.types("T1"):
            yield "Pow", ta, tb, {}


def case_id(c):
    op, ta, tb, attrs = c
    return f"{op}-{ta}" + (f"-{tb}" if tb != ta else "") + "".join(f"-{k}={v}" for k, v in attrs.items())


@pytest.mark.parametrize("case", list(binary_cases()), ids=case_id)
def test_binary_differential(case):
    op, ta, tb, attrs = case
    spec = bm.BY_NAME[op]
    opset = max(newest_opset(spec, ta), newest_opset(spec, tb, "T1") if op == "Pow" else 0)
    t_out = "bool" if spec.bool_out else ta
    model = make_model(op, [ta, tb], t_out, opset, attrs)
    rng = np.random.default_rng(zlib.crc32(case_id(case).encode()))
    shapes = SHAPES if op != "Pow" or ta == tb else SHAPES[:1] + SHAPES[3:4]
    data = []
    if op == "PRelu":  # unidirectional: the slope broadcasts to X's shape
        shapes = [(sa, sb) for sa, sb in shapes if np.broadcast_shapes(sa, sb) == tuple(sa)]
    for sa, sb in shapes:
        a = gen(op, attrs, ta, sa, rng, 0)
        b = pow_exponent(ta, tb, sb, rng) if op == "Pow" else gen(op, attrs, tb, sb, rng, 1)
        data.append((a, b, reference(model, {"x0": a, "x1": b})))
    for level in LEVELS:
        sess = session(case_id(case), model, level)
        for a, b, ref in data:
            y = sess.run(None, {"x0": a, "x1": b})[0]
            assert sess.kernel_usage() == [bm.kernel_name(op)]
            check(op, y, ref, t_out, tolerance(op, ta))


# ---------------------------------------------------------------- broadcast families

FAMILIES = {
    "contiguous": ((4099,), (4099,)),
    "left_scalar": ((), (4099,)),
    "right_scalar": ((1, 1), (3, 1371)),
    "row": ((63, 65), (65,)),
    "column": ((65, 63), (65, 1)),
    "nchw": ((2, 64, 32, 32), (64, 1, 1)),
    "nhwc": ((2, 32, 32, 64), (64,)),
    "attention": ((2, 16, 128, 128), (1, 16, 1, 1)),
    "leading_rank": ((3, 1, 5, 7), (2, 1, 1, 1, 7)),
    "alternating": ((2, 1, 4, 1, 8, 1), (1, 3, 1, 5, 1, 7)),
    "outer_product": ((37, 1), (1, 41)),
    "rank8": ((2, 1, 2, 3, 1, 2, 1, 5), (1, 3, 1, 3, 2, 2, 4, 1)),
    "rank0": ((), ()),
    "empty_dim": ((3, 0, 5), (1, 5)),
    "empty_broadcast": ((0,), ()),
    "left_expands": ((5, 1), (5, 33)),
}
FAMILY_OPS = [("Add", "float32", {}), ("Mul", "bfloat16", {}), ("Sub", "int32", {}), ("Less", "float32", {}),
              ("Div", "float64", {}), ("Mod", "int16", {"fmod": 0}), ("Pow", "float32", {}), ("And", "bool", {}),
              ("Equal", "float16", {})]


@pytest.mark.parametrize("family", list(FAMILIES))
def test_broadcast_families(family):
    sa, sb = FAMILIES[family]
    for op, t, attrs in FAMILY_OPS:
        spec = bm.BY_NAME[op]
        t_out = "bool" if spec.bool_out else t
        model = make_model(op, [t, t], t_out, newest_opset(spec, t), attrs)
        rng = np.random.default_rng(zlib.crc32(f"{family}/{op}".encode()))
        pairs = []
        for xa, xb in ((sa, sb), (sb, sa)):  # both sides broadcast in turn
            a, b = gen(op, attrs, t, xa, rng, 0), gen(op, attrs, t, xb, rng, 1)
            pairs.append((a, b, reference(model, {"x0": a, "x1": b})))
        for level in LEVELS:
            for threads in (1, 2):
                sess = session((op, t, str(attrs)), model, level, threads)
                for a, b, ref in pairs:
                    y = sess.run(None, {"x0": a, "x1": b})[0]
                    check(op, y, ref, t_out, tolerance(op, t))


@pytest.mark.parametrize("family", list(FAMILIES))
def test_broadcast_families_against_guard_pages(family):
    """Both operands against an inaccessible page, after their end and then
    before their start, in every broadcast family at every level: no loop
    reads outside an operand (the tails of rows, columns and scalars)."""
    sa, sb = FAMILIES[family]
    for op, t, attrs in FAMILY_OPS[:3]:
        spec = bm.BY_NAME[op]
        model = make_model(op, [t, t], "bool" if spec.bool_out else t, newest_opset(spec, t), attrs)
        rng = np.random.default_rng(zlib.crc32(f"guard/{family}/{op}".encode()))
        a, b = gen(op, attrs, t, sa, rng, 0), gen(op, attrs, t, sb, rng, 1)
        ref = reference(model, {"x0": a, "x1": b})
        for at in ("end", "start"):
            ga, gb = guarded(a, at=at), guarded(b, at=at)
            for level in LEVELS:
                y = session((op, t, str(attrs)), model, level).run(None, {"x0": ga, "x1": gb})[0]
                check(op, y, ref, "bool" if spec.bool_out else t, tolerance(op, t))


SIZES = (0, 1, 7, 31, 32, 33, 255, 256, 257, 4096, 65536, 1048576)


@pytest.mark.parametrize("op,t", [("Add", "float32"), ("Mul", "bfloat16"), ("Greater", "float16"),
                                  ("Sub", "int64"), ("PRelu", "float32")])
def test_sizes(op, t):
    """Element counts around vector widths up to a million: contiguous, row
    broadcast and right scalar, 1 and 2 threads (the split starts at sizes
    like these)."""
    spec = bm.BY_NAME[op]
    t_out = "bool" if spec.bool_out else t
    model = make_model(op, [t, t], t_out, newest_opset(spec, t))
    rng = np.random.default_rng(zlib.crc32(f"sizes/{op}/{t}".encode()))
    for n in SIZES:
        a = gen(op, {}, t, (n,), rng, 0)
        for b in (gen(op, {}, t, (n,), rng, 1), gen(op, {}, t, (), rng, 1)):
            ref = reference(model, {"x0": a, "x1": b})
            levels = LEVELS if n <= 65536 else LEVELS[-1:]
            for level in levels:
                for threads in (1, 2):
                    y = session((op, t), model, level, threads).run(None, {"x0": a, "x1": b})[0]
                    check(op, y, ref, t_out)
        if n >= 64 and n % 64 == 0:  # row broadcast [n/64, 64] op [64]
            a2 = a.reshape(-1, 64)
            b2 = gen(op, {}, t, (64,), rng, 1)
            ref = reference(model, {"x0": a2, "x1": b2})
            for threads in (1, 2):
                check(op, session((op, t), model, LEVELS[-1], threads).run(None, {"x0": a2, "x1": b2})[0], ref, t_out)


# ---------------------------------------------------------------- semantics

@pytest.mark.parametrize("level", LEVELS)
def test_semantics_table(level):
    def run(op, a, b, t_out=None, **attrs):
        a, b = np.asarray(a), np.asarray(b)
        t = {v: k for k, v in NP.items()}[a.dtype]
        tb = {v: k for k, v in NP.items()}[b.dtype]
        spec = bm.BY_NAME[op]
        out = "bool" if spec.bool_out else t
        m = make_model(op, [t, tb], out, 28 if op in ("Mod", "BitShift") else newest_opset(spec, t), attrs)
        return session(("table", op, t, tb, str(attrs)), m, level).run(None, {"x0": a, "x1": b})[0]

    i32 = lambda *v: np.array(v, np.int32)  # noqa: E731
    f = lambda *v: np.array(v, np.float32)  # noqa: E731
    # integer Div truncates toward zero; Mod fmod=0 is Python's, fmod=1 C's
    assert run("Div", i32(7, -7, 7, -7), i32(2, 2, -2, -2)).tolist() == [3, -3, -3, 3]
    assert run("Mod", i32(7, -7, 7, -7), i32(3, 3, -3, -3), fmod=0).tolist() == [1, 2, -2, -1]
    assert run("Mod", i32(7, -7, 7, -7), i32(3, 3, -3, -3), fmod=1).tolist() == [1, -1, 1, -1]
    assert run("Mod", i32(-2**31), i32(-1), fmod=0).tolist() == [0]
    # float Mod: fmod=1 is C fmod; fmod=0 floors, zero takes the divisor's sign
    y = run("Mod", f(5.5, -5.5, 0.0, np.inf, 1.0), f(2, 2, -3, 2, 0), fmod=1)
    assert y[:3].tolist() == [1.5, -1.5, 0.0] and np.isnan(y[3:]).all()
    y = run("Mod", f(5.5, -5.5, 4.0, -4.0, 1.0), f(2, 2, -2, 2, -np.inf), fmod=0)
    assert y.tolist() == [1.5, 0.5, -0.0, 0.0, -np.inf] and np.signbit(y[2]) and not np.signbit(y[3])
    # wrap-around without UB
    assert run("Add", i32(2**31 - 1), i32(1)).tolist() == [-2**31]
    assert run("Mul", np.array([65535], np.uint16), np.array([65535], np.uint16)).tolist() == [1]
    assert run("Sub", np.array([-128], np.int8), np.array([1], np.int8)).tolist() == [127]
    # shifts outside [0, bits): the sign fill alone (opset 28)
    assert run("BitShift", np.array([1, 1, 255], np.uint8), np.array([7, 8, 9], np.uint8), direction="LEFT").tolist() == [128, 0, 0]
    assert run("BitShift", np.array([-8, -8, 8, -8], np.int16), np.array([1, 16, 16, -1], np.int16),
               direction="RIGHT").tolist() == [-4, -1, 0, -1]
    # comparisons with NaN, signed zeros
    assert run("Equal", f(np.nan, 0.0), f(np.nan, -0.0)).tolist() == [False, True]
    assert run("Less", f(np.nan, -np.inf), f(1, np.inf)).tolist() == [False, True]
    # PRelu keeps NaN and positive values
    y = run("PRelu", f(np.nan, 2.0, -2.0, -0.0), f(0.5))
    assert np.isnan(y[0]) and y[1:].tolist() == [2.0, -1.0, -0.0]
    # Pow: integer bases, negative integer exponents truncate toward zero
    assert run("Pow", i32(2, -3, 1, -1, 5), i32(10, 3, -4, -3, -1)).tolist() == [1024, -27, 1, -1, 0]


@pytest.mark.parametrize("level", LEVELS)
def test_errors_before_output(level):
    def sess(op, t, opset=14, **attrs):
        spec = bm.BY_NAME[op]
        return session(("err", op, t, str(attrs)), make_model(op, [t, t], "bool" if spec.bool_out else t, opset, attrs),
                       level)

    with pytest.raises(Exception, match=r"node0.*Div.*zero"):
        sess("Div", "int32").run(None, {"x0": np.ones(4, np.int32), "x1": np.array([1, 0, 2, 3], np.int32)})
    with pytest.raises(Exception, match=r"Mod.*zero"):
        sess("Mod", "uint8", fmod=1).run(None, {"x0": np.ones(4, np.uint8), "x1": np.zeros((), np.uint8)})
    with pytest.raises(Exception, match=r"overflow"):
        sess("Div", "int64").run(None, {"x0": np.array([[-2**63], [5]], np.int64), "x1": np.array([-1, 2], np.int64)})
    # the same values that never meet in the broadcast are fine
    y = sess("Div", "int64").run(None, {"x0": np.array([-2**63, 5], np.int64), "x1": np.array([2, -1], np.int64)})[0]
    assert y.tolist() == [-2**62, -5]
    with pytest.raises(Exception, match=r"broadcast"):
        sess("Add", "float32").run(None, {"x0": np.ones((2, 3), np.float32), "x1": np.ones((4,), np.float32)})
    with pytest.raises(Exception, match=r"unidirectional"):
        sess("PRelu", "float32", opset=16).run(None, {"x0": np.ones((3,), np.float32), "x1": np.ones((2, 3), np.float32)})
    # float division by zero is not an error
    y = sess("Div", "float32").run(None, {"x0": np.array([1, -1, 0], np.float32), "x1": np.zeros(3, np.float32)})[0]
    assert y[0] == np.inf and y[1] == -np.inf and np.isnan(y[2])


def test_bad_attributes():
    m = make_model("BitShift", ["uint8", "uint8"], "uint8", 11, {"direction": "UP"})
    with pytest.raises(Exception, match="direction"):
        olc_core.Session(m, strict=True)
    m = make_model("Mod", ["int32", "int32"], "int32", 13, {"fmod": 2})
    with pytest.raises(Exception, match="fmod"):
        olc_core.Session(m, strict=True)


# ---------------------------------------------------------------- in place

def test_output_reuse():
    """Two nodes where the intermediate dies at the second: the runtime may
    hand its buffer to the output (the kernel allows in place on a full
    input 0). Checked full, broadcast-on-input-1 and broadcast-on-input-0."""
    for sa, sb in (((64, 65), (64, 65)), ((64, 65), (65,)), ((65,), (64, 65)), ((64, 1), (64, 65))):
        nodes = [helper.make_node("Add", ["x", "c"], ["t"]), helper.make_node("Mul", ["t", "d"], ["y"]),
                 ]
        g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, None)
                                           for n in ("x", "c", "d")],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
        model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])
        rng = np.random.default_rng(5)
        x = rng.standard_normal(sa).astype(np.float32)
        c = rng.standard_normal(sa).astype(np.float32)
        d = rng.standard_normal(sb).astype(np.float32)
        for level in LEVELS:
            for threads in (1, 2):
                with olc_core.simd_cap(level):
                    s = olc_core.Session(model, threads=threads, strict=True, fusion=False)
                y = s.run(None, {"x": x, "c": c, "d": d})[0]
                np.testing.assert_array_equal(y, (x + c) * d)


# (shape of x0, shape of x1, inner block length of the broadcast plan or
# None for a single block): contiguous, both scalar sides, rows of 4,099
# elements (inner blocks that start off a 64-byte line), columns whose
# 127-element inner blocks are too short to stream, and NHWC-like [M,64] op
# [64], whose 64-element blocks are whole 256-byte streaming pieces from
# 4-byte outputs on and too short with one-byte (bool) outputs.
STREAM_SHAPES = [((2_100_003,), (2_100_003,), None), ((2_100_003,), (), None), ((), (2_100_003,), None),
                 ((513, 4099), (4099,), 4099), ((16591, 127), (16591, 1), 127), ((32768, 64), (64,), 64)]


def blocks_stream(inner, itemsize):
    """The block rule of run_streams: one block, blocks of at least 1 KiB, or
    blocks made of whole 256-byte pieces."""
    return inner is None or inner * itemsize >= 1024 or inner * itemsize % 256 == 0


@pytest.mark.parametrize("op,t", [("Add", "float32"), ("Div", "float32"), ("Mul", "float64"), ("Sub", "int32"),
                                  ("BitwiseAnd", "int64"), ("Less", "float32"), ("And", "bool")])
@pytest.mark.parametrize("threads", [1, 2])
def test_streaming_outputs(op, t, threads):
    """Runs that read at least stream_min_bytes, with inner blocks of at
    least 1 KiB or of whole 256-byte pieces, write their output with
    non-temporal stores; the values match the reference, unaligned ends
    included. Both thresholds are lowered here so that these 2M-element runs
    stream on one thread and split over two."""
    spec = bm.BY_NAME[op]
    t_out = "bool" if spec.bool_out else t
    model = make_model(op, [t, t], t_out, newest_opset(spec, t))
    rng = np.random.default_rng(9)
    with streaming_lowered(op, t):
        for sa, sb, inner in STREAM_SHAPES:
            x0, x1 = gen(op, {}, t, sa, rng, 0), gen(op, {}, t, sb, rng, 1)
            ref = reference(model, {"x0": x0, "x1": x1})
            streams = blocks_stream(inner, ref.dtype.itemsize)
            for level in LEVELS:
                sess = session((op, t, "stream"), model, level, threads)
                check(op, sess.run(None, {"x0": x0, "x1": x1})[0], ref, t_out)
                want = streams and level != "scalar"
                assert ("stream" in sess.kernel_usage_details()[-1]) == want, (level, sa, sb)


@pytest.mark.skipif(LEVELS == ["scalar"], reason="needs AVX2 or AVX-512")
def test_streaming_needs_traffic_beyond_l3():
    """With the default thresholds a run streams only when the bytes it reads
    would not stay in the L3 beside its output: from stream_min_bytes
    (12 MiB) on one thread; split over two, from stream_parallel_min_bytes
    (24 MiB) read or from stream_parallel_min_footprint (twice the host's
    L3) read and written. A scalar operand at 2M float32 elements (8 MiB
    read) stays plain, at 3M (12 MiB) it streams on one thread; two full
    inputs of 4M (32 MiB) stream on two threads; a scalar operand at 4M
    (16 MiB read, 32 MiB in all) streams on two threads only where the L3
    is at most 16 MiB."""
    l3 = olc_core._native.data_cache_bytes(3)[0]
    scalar_4m_split = 0 < 2 * l3 <= 32 << 20
    model = make_model("Add", ["float32", "float32"], "float32", 14)
    rng = np.random.default_rng(4)
    full = [rng.standard_normal(4 << 20).astype(np.float32) for _ in range(2)]
    scalar = np.float32(0.5).reshape(())
    cases = ((1, [full[0][: 2 << 20], scalar], False), (1, [full[0][: 3 << 20], scalar], True),
             (2, full, True), (2, [full[0], scalar], scalar_4m_split), (1, [full[0], scalar], True))
    for threads, feeds, streams in cases:
        sess = session(("Add", "float32", "split"), model, LEVELS[-1], threads)
        y = sess.run(None, {"x0": feeds[0], "x1": feeds[1]})[0]
        np.testing.assert_array_equal(y, feeds[0] + feeds[1])
        assert ("stream" in sess.kernel_usage_details()[-1]) == streams, (threads, feeds[0].shape, feeds[1].shape)
    # the footprint rule follows its tuning parameter
    olc_core.tuning.set("olc_elementwise", "Add", "stream_parallel_min_footprint", 8 << 20,
                        implementation=LEVELS[-1], dtype="float32")
    try:
        sess = session(("Add", "float32", "split"), model, LEVELS[-1], 2)
        sess.run(None, {"x0": full[0][: 1 << 20], "x1": scalar})  # 4 MiB read, 8 MiB in all
        assert "stream" in sess.kernel_usage_details()[-1]
    finally:
        olc_core.tuning.reset("olc_elementwise", "Add", "stream_parallel_min_footprint")


def test_olc_info_lists_the_host_thresholds_before_any_session():
    """`olc info` shows the cache-derived thresholds in force (declared when
    the extension is imported, not only once a session creates a kernel):
    Relu's and Add's float32 stream_parallel_min_footprint is twice the L3
    that the core reports, at the level in force."""
    import json
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "olc_core.cli", "info", "--json"], capture_output=True, text=True,
                          check=True, timeout=120)
    info = json.loads(proc.stdout)
    rows = {(p["kernel"], p["name"]): p for p in info["tuning"]
            if p.get("library") == "olc_elementwise" and p.get("dtype") == "float32"}
    l3 = olc_core._native.data_cache_bytes(3)[0]
    level = info["simd_level"]
    for kernel, serial_min in (("Relu", 16 << 20), ("Add", 12 << 20)):
        footprint = rows[(kernel, "stream_parallel_min_footprint")]
        assert footprint["value"] == footprint["default"] == 2 * l3
        assert footprint["implementation"] == level
        assert rows[(kernel, "stream_min_bytes")]["value"] == serial_min


def test_streaming_in_place():
    """An intermediate that dies at the next node becomes that node's output
    (in place on input 0) while the node streams: each piece of input 0 is
    read before the same bytes are written. The thresholds are lowered so
    that split runs stream too."""
    n = 2_100_003
    nodes = [helper.make_node("Add", ["x", "c"], ["t"]), helper.make_node("Mul", ["t", "d"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(v, TensorProto.FLOAT, [n]) for v in "xcd"],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n])])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])
    rng = np.random.default_rng(11)
    x, c, d = (rng.standard_normal(n).astype(np.float32) for _ in range(3))
    with streaming_lowered(["Add", "Mul"], "float32"):
        for level in LEVELS:
            for threads in (1, 2):
                with olc_core.simd_cap(level):
                    s = olc_core.Session(model, threads=threads, strict=True, fusion=False, record_usage=True)
                np.testing.assert_array_equal(s.run(None, {"x": x, "c": c, "d": d})[0], (x + c) * d)
                assert all(("stream" in u) == (level != "scalar") for u in s.kernel_usage_details())


@pytest.mark.parametrize("t", ["float32", "float16", "bfloat16"])
def test_fmod_whole_range(t):
    """Mod fmod=1 on float32 goes through double with a fmodf fix-up for huge
    quotients: exact against np.fmod over magnitudes from subnormal to max."""
    rng = np.random.default_rng(3)
    fi = ml_dtypes.finfo(NP[t]) if t == "bfloat16" else np.finfo(NP[t])
    lo, hi = np.log(float(fi.smallest_subnormal)), np.log(float(fi.max))
    n = 20_000
    a = (np.exp(rng.uniform(lo, hi, n)) * rng.choice([-1, 1], n)).astype(NP[t])
    b = (np.exp(rng.uniform(lo, hi, n)) * rng.choice([-1, 1], n)).astype(NP[t])
    b[:50] = a[:50] / 3  # quotients near small integers
    b[50:100] = a[50:100]
    a[100:110] = [np.inf, -np.inf, np.nan, 0.0, -0.0, 1.0, -1.0, 7.0, -7.0, 5.5]
    b[100:110] = [2.0, 2.0, 2.0, 3.0, 3.0, np.inf, -np.inf, 0.0, -0.0, np.nan]
    model = make_model("Mod", [t, t], t, 13, {"fmod": 1})
    ref = np.fmod(a.astype(np.float64), b.astype(np.float64)).astype(NP[t])
    for level in LEVELS:
        with np.errstate(all="ignore"):
            y = session(("fmod-range", t), model, level).run(None, {"x0": a, "x1": b})[0]
        check("Mod", y, ref, t)


def test_pow_float32_accuracy():
    """float32 Pow goes through double (2^(y log2 x)) with a powf fix-up for
    signs, zeros, non-finite values and extreme results: within 1 ulp of the
    float64 result rounded to float32, exact on exact powers, special values
    as powf."""
    rng = np.random.default_rng(4)
    n = 200_000
    x = np.exp(rng.uniform(-70, 70, n)).astype(np.float32)
    y = rng.uniform(-4, 4, n).astype(np.float32)
    x[:1000] = rng.integers(1, 50, 1000)
    y[:1000] = rng.integers(-5, 8, 1000)
    sp = np.array([0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 0.5, np.inf, -np.inf, np.nan, 1e-45, 3e38], np.float32)
    xs, ys = np.meshgrid(sp, np.concatenate([sp, np.float32([3.0, 0.5, -3.0, 200.0, -200.0])]))
    x = np.concatenate([x, xs.ravel()])
    y = np.concatenate([y, ys.ravel()])
    model = make_model("Pow", ["float32", "float32"], "float32", 15)
    with np.errstate(all="ignore"):
        exact = np.power(x.astype(np.float64), y.astype(np.float64))
        ref32 = exact.astype(np.float32)
        libm = np.power(x, y)  # powf: the special-value table
    for level in LEVELS:
        out = session(("pow-acc",), model, level).run(None, {"x0": x, "x1": y})[0]
        assert (np.isnan(out) == np.isnan(libm)).all()
        fin = np.isfinite(ref32) & np.isfinite(out)
        assert (out[~fin & ~np.isnan(out)] == libm[~fin & ~np.isnan(out)]).all()
        from test_unary import ulp_distance_f32
        d = ulp_distance_f32(out[fin], ref32[fin])
        assert d.max() <= 1, f"max ulp {d.max()} at x={x[fin][d.argmax()]} y={y[fin][d.argmax()]}"
        exact_int = fin & (exact == np.round(exact)) & (np.abs(exact) < 2 ** 24)
        np.testing.assert_array_equal(out[exact_int], ref32[exact_int])


def test_plan_cache_concurrent_runs():
    """One session run from two Python threads at once with more distinct
    shape pairs than the 8-entry plan cache holds: every result right (the
    cache is shared by the runs and guarded)."""
    import threading

    model = make_model("Add", ["float32", "float32"], "float32", 14)
    sess = olc_core.Session(model, threads=1, strict=True)
    shapes = [((k + 1, 33), (33,)) for k in range(6)] + [((5, k + 2), (5, 1)) for k in range(6)]
    rng = np.random.default_rng(8)
    data = [(rng.standard_normal(sa).astype(np.float32), rng.standard_normal(sb).astype(np.float32))
            for sa, sb in shapes]
    errors = []

    def worker(offset):
        try:
            for i in range(300):
                a, b = data[(i + offset) % len(data)]
                np.testing.assert_array_equal(sess.run(None, {"x0": a, "x1": b})[0], a + b)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    ts = [threading.Thread(target=worker, args=(k * 5,)) for k in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors[0]
