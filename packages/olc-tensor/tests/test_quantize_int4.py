"""QuantizeLinear / DequantizeLinear with uint4 and int4 (opset 21+).

olc holds 4-bit tensors one element per byte, the value in the low nibble
(two's complement for int4), as numpy holds ml_dtypes' uint4 / int4.

Oracles, as in test_quantize.py:

- a numpy oracle written from the schema text: q = x / scale in float32,
  round half to even, add the zero point, saturate to [-8, 7] / [0, 15],
  NaN to the type's minimum (the rule the 8-bit kernels follow);
- ``onnx.reference`` on the inputs where its numpy code is defined (finite
  quotients well inside int32: it converts through int32 first);
- onnxruntime where it takes the case: it reads 4-bit initializers but
  cannot exchange 4-bit tensors with numpy, so QuantizeLinear is compared
  through a QuantizeLinear -> DequantizeLinear pair, DequantizeLinear with
  its x as an initializer.

Every case checks through the kernel usage that the olc kernel ran, at
every SIMD level this CPU has.
"""

from __future__ import annotations

import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, str(Path(__file__).parent))
from helpers import LEVELS, NP, ONNX, olc_run, ref_run, seed_of  # noqa: E402

import olc_core  # noqa: E402

try:
    import onnxruntime as ort
except ImportError:  # pragma: no cover - onnxruntime is a test extra
    ort = None

Q = "olc_tensor::QuantizeLinear"
DQ = "olc_tensor::DequantizeLinear"

Q4 = {"int4": (TensorProto.INT4, np.dtype(ml_dtypes.int4), -8, 7),
      "uint4": (TensorProto.UINT4, np.dtype(ml_dtypes.uint4), 0, 15)}
ALL_NP = {**NP, **{k: v[1] for k, v in Q4.items()}}
ALL_ONNX = {**ONNX, **{k: v[0] for k, v in Q4.items()}}
LENGTHS = (0, 1, 15, 16, 17, 31, 33, 63, 64, 65, 1000)
MODES = [("tensor", 1, 0), ("axis", 1, 0), ("axis", -1, 0), ("axis", 0, 0), ("blocked", 1, 4), ("blocked", -1, 3),
         ("blocked", -1, 32), ("blocked", 0, 16)]


def model(op, inputs, opset, attrs=None, initializers=None, out_type=0):
    """One node named node0; inputs are (name, type) pairs."""
    initializers = initializers or {}
    node = helper.make_node(op, [n for n, _ in inputs], ["y"], name="node0", **(attrs or {}))
    g_in = [helper.make_tensor_value_info(n, ALL_ONNX[t], None) for n, t in inputs if n not in initializers]
    out = [helper.make_tensor_value_info("y", ALL_ONNX[out_type] if out_type else 0, None)]
    inits = [numpy_helper.from_array(v, k) for k, v in initializers.items()]
    m = helper.make_model(helper.make_graph([node], "g", g_in, out, initializer=inits),
                          opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 10
    return m


def expand(v, shape, axis, block):
    if v.size == 1:
        return v.reshape(())
    if not block:
        dims = [1] * len(shape)
        dims[axis] = v.size
        return v.reshape(dims)
    return np.repeat(v, block, axis=axis).take(range(shape[axis]), axis=axis)


def scale_shape(shape, axis, block, mode):
    if mode == "tensor":
        return ()
    if mode == "axis":
        return (shape[axis],)
    s = list(shape)
    s[axis] = -(-shape[axis] // block)
    return tuple(s)


def nibble_bytes(a: np.ndarray) -> np.ndarray:
    """The stored bytes of a 4-bit array (one element per byte)."""
    return np.ascontiguousarray(a).reshape(-1).view(np.uint8)


def same_q(got, want, what=""):
    """Same 4-bit type and shape, the same stored bytes (high nibble zero)."""
    assert got.dtype == want.dtype, f"{what}: {got.dtype} != {want.dtype}"
    assert got.shape == want.shape, f"{what}: {got.shape} != {want.shape}"
    g, w = nibble_bytes(got), nibble_bytes(want)
    assert (g >> 4 == 0).all(), f"{what}: a high nibble is set"
    if not np.array_equal(g, w):
        bad = np.flatnonzero(g != w)
        raise AssertionError(f"{what}: {bad.size} elements differ, first at {bad[:5]}: {g[bad[:5]]} vs {w[bad[:5]]}")


def same_f(got, want, what=""):
    want = np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, f"{what}: {got.dtype}{got.shape} != {want.dtype}{want.shape}"
    bits = np.dtype(f"u{got.itemsize}")
    g = np.ascontiguousarray(got).reshape(-1).view(bits)
    w = np.ascontiguousarray(want).reshape(-1).view(bits)
    assert np.array_equal(g, w), f"{what}: {np.count_nonzero(g != w)} elements differ"


def q4_oracle(x, s, zp, y_t, axis=1, block=0):
    """The schema's rule, float32 division, for float32 x and scale."""
    _, dt, lo, hi = Q4[y_t]
    sf = expand(s.astype(np.float32), x.shape, axis, block)
    with np.errstate(all="ignore"):
        q = (x.astype(np.float32) / sf).astype(np.float32)
        z = 0.0 if zp is None else expand(zp.astype(np.float64), x.shape, axis, block)
        r = np.rint(q.astype(np.float64)) + z
    r = np.where(np.isnan(r), lo, np.clip(r, lo, hi))
    return r.astype(np.int8).astype(dt)


def dq4_oracle(x, s, zp, axis=1, block=0, out_t="float32"):
    xf = x.astype(np.float32)
    z = np.float32(0) if zp is None else expand(zp.astype(np.float32), x.shape, axis, block)
    y = (xf - z) * expand(s, x.shape, axis, block).astype(np.float32)
    return y.astype(np.float32).astype(ALL_NP[out_t])


def zero_points(rng, t, shape):
    _, dt, lo, hi = Q4[t]
    lo, hi = (lo // 2, hi // 2) if lo < 0 else (lo, hi)
    return rng.integers(lo, hi, shape, endpoint=True).astype(np.int8).astype(dt).reshape(shape)


def q_values(rng, t, shape):
    _, dt, lo, hi = Q4[t]
    return rng.integers(lo, hi, shape, endpoint=True).astype(np.int8).astype(dt)


def finite_x(rng, shape):
    """Quotients around the 4-bit range (a third saturate) and exact .5 ties
    (the scale of element 0 is 0.5)."""
    n = int(np.prod(shape))
    x = rng.standard_normal(n) * 6
    if n:
        k = rng.choice(n, max(1, n // 4), replace=False)
        x[k] = (rng.integers(-24, 24, k.size) + 0.5) * 0.5
    return x.astype(np.float32).reshape(shape)


def folded_on(m, kernel, feeds=None):
    """A node on constants is computed once, when the session is built (the
    plan says 'folded'): its outputs, after checking the plan put it on
    `kernel`."""
    sess = olc_core.Session(m, strict=False)
    entries = [e for e in sess.kernel_plan() if e.op_type in ("QuantizeLinear", "DequantizeLinear")]
    assert entries and all(e.native and e.kernel == kernel for e in entries), sess.kernel_plan()
    return sess.run(None, feeds or {})


def as_inputs(m, names):
    """The model with these initializers turned into graph inputs."""
    m2 = onnx.ModelProto()
    m2.CopyFrom(m)
    keep = [i for i in m2.graph.initializer if i.name not in names]
    moved = [i for i in m2.graph.initializer if i.name in names]
    del m2.graph.initializer[:]
    m2.graph.initializer.extend(keep)
    for i in moved:
        m2.graph.input.append(helper.make_tensor_value_info(i.name, i.data_type, list(i.dims)))
    return m2


def run_levels(m, feeds, kernel):
    """The outputs at every SIMD level (each checked to run on `kernel`)."""
    return [(lv, olc_run(m, feeds, lv, expect_kernel=kernel)[0]) for lv in LEVELS]


# ------------------------------------------------------------ QuantizeLinear

@pytest.mark.parametrize("y_t", list(Q4))
@pytest.mark.parametrize("mode,axis,block", MODES)
def test_quantize_layouts(y_t, mode, axis, block):
    rng = np.random.default_rng(seed_of("q4", y_t, mode, axis, block))
    for shape in [(2, 17, 5), (3, 65), (1, 1000), (64, 33), (4, 33, 1), (2, 0, 3)]:
        ax = axis % len(shape)
        ss = scale_shape(shape, ax, block, mode)
        s = rng.uniform(0.05, 2.0, ss).astype(np.float32)
        if s.size:
            s.reshape(-1)[0] = 0.5
        zp = zero_points(rng, y_t, ss)
        x = finite_x(rng, shape)
        m = model("QuantizeLinear", [("x", "float32"), ("s", "float32"), ("z", y_t)], 21,
                  {"axis": axis} | ({"block_size": block} if block else {}))
        feeds = {"x": x, "s": s, "z": zp}
        want = q4_oracle(x, s, zp, y_t, ax, block)
        ref = ref_run(m, feeds)[0]
        same_q(ref, want, f"{shape}: the oracle against onnx.reference")
        for lv, got in run_levels(m, feeds, Q):
            same_q(got, want, f"{shape} {lv}")


@pytest.mark.parametrize("y_t", list(Q4))
@pytest.mark.parametrize("level", LEVELS)
def test_quantize_lengths_and_specials(y_t, level):
    """Every SIMD tail, uniform and per element, with NaN, +-inf, +-0, huge
    values, ties and saturation on both ends."""
    rng = np.random.default_rng(seed_of("q4s", y_t, level))
    _, _, lo, hi = Q4[y_t]
    sp = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1e30, -1e30, 3e9, -3e9, 0.5, -0.5, 1.5, -1.5, 2.5,
                   hi + 0.5, lo - 0.5, hi + 1.0, lo - 1.0, -np.nan], np.float32)
    for n in LENGTHS:
        x = (rng.standard_normal(n) * 10).astype(np.float32)
        k = min(n, sp.size)
        x[rng.choice(n, k, replace=False)] = sp[:k]
        for s_val, z_val in [(1.0, 0), (0.5, hi // 3), (3.0, lo // 2 if lo else 9)]:
            s = np.array(s_val, np.float32)
            zp = np.array(z_val, np.int8).astype(Q4[y_t][1])
            m = model("QuantizeLinear", [("x", "float32"), ("s", "float32"), ("z", y_t)], 21)
            feeds = {"x": x, "s": s, "z": zp}
            got = olc_run(m, feeds, level, expect_kernel=Q)[0]
            want = q4_oracle(x, s, zp, y_t)
            same_q(got, want, f"n={n} s={s_val}")
            fin = np.isfinite(x) & (np.abs(x) < 1e9)
            same_q(got[fin], ref_run(m, feeds)[0][fin], f"n={n} reference (finite part)")
            v = got.astype(np.int8)
            assert (v[np.isnan(x)] == lo).all()
            assert (v[x == np.inf] == hi).all() and (v[x == -np.inf] == lo).all()
        # Per element: one scale per element along the only axis.
        if n:
            s = rng.uniform(0.1, 2, n).astype(np.float32)
            zp = zero_points(rng, y_t, (n,))
            m = model("QuantizeLinear", [("x", "float32"), ("s", "float32"), ("z", y_t)], 21, {"axis": 0})
            got = olc_run(m, {"x": x, "s": s, "z": zp}, level, expect_kernel=Q)[0]
            same_q(got, q4_oracle(x, s, zp, y_t, 0), f"n={n} per element")


@pytest.mark.parametrize("y_t", list(Q4))
@pytest.mark.parametrize("x_t", ["float16", "bfloat16", "int32"])
def test_quantize_other_inputs(y_t, x_t):
    """float16 / bfloat16 x with a scale of its type (21: the division in
    that precision), int32 x with a float32 scale (23: x and the scale have
    constraints of their own)."""
    rng = np.random.default_rng(seed_of("q4x", y_t, x_t))
    for mode, axis, block in MODES:
        shape = (3, 17, 6)
        ax = axis % 3
        ss = scale_shape(shape, ax, block, mode)
        s_t = "float32" if x_t == "int32" else x_t
        s = rng.uniform(0.5, 3.0, ss).astype(NP[s_t])
        zp = zero_points(rng, y_t, ss)
        x = (rng.integers(-30, 30, shape).astype(np.int32) if x_t == "int32"
             else (rng.standard_normal(shape) * 8).astype(NP[x_t]))
        m = model("QuantizeLinear", [("x", x_t), ("s", s_t), ("z", y_t)], 23 if x_t == "int32" else 21,
                  {"axis": axis} | ({"block_size": block} if block else {}))
        feeds = {"x": x, "s": s, "z": zp}
        want = ref_run(m, feeds)[0]
        if x_t == "int32":
            same_q(want, q4_oracle(x, s, zp, y_t, ax, block), f"{mode} oracle vs reference")
        for lv, got in run_levels(m, feeds, Q):
            same_q(got, want, f"{mode} {axis} {lv} reference")


def test_quantize_output_dtype_and_precision():
    """23+: output_dtype names the 4-bit type without a zero point; the
    precision attribute rounds x, the scale and the quotient."""
    rng = np.random.default_rng(seed_of("q4_23"))
    x = finite_x(rng, (4, 50))
    s = rng.uniform(0.1, 2, (50,)).astype(np.float32)
    for y_t, (code, _, _, _) in Q4.items():
        for opset in (23, 25):
            m = model("QuantizeLinear", [("x", "float32"), ("s", "float32")], opset, {"axis": 1, "output_dtype": code})
            got = olc_run(m, {"x": x, "s": s}, expect_kernel=Q)[0]
            same_q(got, q4_oracle(x, s, None, y_t), f"{y_t} opset {opset}")
            same_q(got, ref_run(m, {"x": x, "s": s})[0], f"{y_t} opset {opset} reference")
        m = model("QuantizeLinear", [("x", "float32"), ("s", "float32"), ("z", y_t)], 23,
                  {"axis": 1, "precision": TensorProto.FLOAT16})
        feeds = {"x": x, "s": s, "z": zero_points(rng, y_t, (50,))}
        got = olc_run(m, feeds, expect_kernel=Q)[0]
        same_q(got, ref_run(m, feeds)[0], f"{y_t} precision float16 reference")


def test_quantize_4bit_needs_opset21():
    """Before 21 the schema has no 4-bit outputs: no olc kernel claims them."""
    m = model("QuantizeLinear", [("x", "float32"), ("s", "float32"), ("z", "int4")], 21)
    m.opset_import[0].version = 19
    with pytest.raises(olc_core.OlcError):
        olc_core.Session(m, strict=True)


@pytest.mark.parametrize("level", LEVELS)
def test_isa_recorded(level):
    x = np.arange(-50, 50, dtype=np.float32)
    for y_t in Q4:
        m = model("QuantizeLinear", [("x", "float32"), ("s", "float32"), ("z", y_t)], 21)
        with olc_core.simd_cap(level):
            sess = olc_core.Session(m, strict=True, record_usage=True)
        sess.run(None, {"x": x, "s": np.array(4.0, np.float32), "z": np.array(1, np.int8).astype(Q4[y_t][1])})
        assert f"{Q}[{level}]" in sess.kernel_usage_details()
        md = model("DequantizeLinear", [("x", y_t), ("s", "float32")], 21)
        with olc_core.simd_cap(level):
            sess = olc_core.Session(md, strict=True, record_usage=True)
        sess.run(None, {"x": q_values(np.random.default_rng(1), y_t, (100,)), "s": np.array(0.5, np.float32)})
        assert f"{DQ}[{level}]" in sess.kernel_usage_details()


# ---------------------------------------------------------- DequantizeLinear

@pytest.mark.parametrize("x_t", list(Q4))
@pytest.mark.parametrize("mode,axis,block", MODES)
def test_dequantize_layouts(x_t, mode, axis, block):
    rng = np.random.default_rng(seed_of("dq4", x_t, mode, axis, block))
    for shape in [(2, 17, 5), (3, 65), (1, 1000), (64, 33), (2, 0, 3)]:
        ax = axis % len(shape)
        ss = scale_shape(shape, ax, block, mode)
        s = rng.uniform(0.001, 2.0, ss).astype(np.float32)
        x = q_values(rng, x_t, shape)
        for with_zp in (True, False):
            zp = zero_points(rng, x_t, ss) if with_zp else None
            inputs = [("x", x_t), ("s", "float32")] + ([("z", x_t)] if with_zp else [])
            m = model("DequantizeLinear", inputs, 21, {"axis": axis} | ({"block_size": block} if block else {}))
            feeds = {"x": x, "s": s} | ({"z": zp} if with_zp else {})
            want = dq4_oracle(x, s, zp, ax, block)
            same_f(ref_run(m, feeds)[0], want, f"{shape}: the oracle against onnx.reference")
            for lv, got in run_levels(m, feeds, DQ):
                same_f(got, want, f"{shape} zp={with_zp} {lv}")


@pytest.mark.parametrize("x_t", list(Q4))
@pytest.mark.parametrize("level", LEVELS)
def test_dequantize_lengths(x_t, level):
    """Every tail of the uniform and the per-element loops; the extremes -8 / 7
    (0 / 15) against extreme zero points."""
    rng = np.random.default_rng(seed_of("dq4l", x_t, level))
    _, dt, lo, hi = Q4[x_t]
    for n in LENGTHS:
        x = q_values(rng, x_t, (n,))
        x[: min(n, 2)] = np.array([lo, hi][: min(n, 2)], np.int8).astype(dt)
        for z in (lo, hi, 0 if lo else 7):
            zp = np.array(z, np.int8).astype(dt)
            m = model("DequantizeLinear", [("x", x_t), ("s", "float32"), ("z", x_t)], 21)
            feeds = {"x": x, "s": np.array(0.37, np.float32), "z": zp}
            got = olc_run(m, feeds, level, expect_kernel=DQ)[0]
            same_f(got, dq4_oracle(x, feeds["s"], zp), f"n={n} z={z}")
        if n:
            s = rng.uniform(0.01, 2, n).astype(np.float32)
            zp = zero_points(rng, x_t, (n,))
            m = model("DequantizeLinear", [("x", x_t), ("s", "float32"), ("z", x_t)], 21, {"axis": 0})
            got = olc_run(m, {"x": x, "s": s, "z": zp}, level, expect_kernel=DQ)[0]
            same_f(got, dq4_oracle(x, s, zp, 0), f"n={n} per element")


@pytest.mark.parametrize("x_t", list(Q4))
@pytest.mark.parametrize("s_t", ["float16", "bfloat16"])
def test_dequantize_half_scales_and_output_dtype(x_t, s_t):
    rng = np.random.default_rng(seed_of("dq4h", x_t, s_t))
    x = q_values(rng, x_t, (6, 40))
    s = rng.uniform(0.01, 3.0, (6, 5)).astype(NP[s_t])
    zp = zero_points(rng, x_t, (6, 5))
    attrs = {"axis": 1, "block_size": 8}
    m = model("DequantizeLinear", [("x", x_t), ("s", s_t), ("z", x_t)], 21, attrs)
    feeds = {"x": x, "s": s, "z": zp}
    got = olc_run(m, feeds, expect_kernel=DQ)[0]
    same_f(got, dq4_oracle(x, s, zp, 1, 8, s_t), "oracle")
    same_f(got, ref_run(m, feeds)[0], "reference")
    for out_t in ("float32", "float16", "bfloat16"):
        m = model("DequantizeLinear", [("x", x_t), ("s", s_t), ("z", x_t)], 23, attrs | {"output_dtype": ALL_ONNX[out_t]})
        got = olc_run(m, feeds, expect_kernel=DQ)[0]
        same_f(got, dq4_oracle(x, s, zp, 1, 8, out_t), out_t)
        same_f(got, ref_run(m, feeds)[0], f"{out_t} reference")


def test_round_trip():
    """Every 4-bit value dequantizes and quantizes back to itself."""
    for t, (_, dt, lo, hi) in Q4.items():
        x = np.arange(lo, hi + 1, dtype=np.int8).astype(dt)
        s = np.array(0.75, np.float32)
        zp = np.array(lo + 3, np.int8).astype(dt)
        xd = olc_run(model("DequantizeLinear", [("x", t), ("s", "float32"), ("z", t)], 21),
                     {"x": x, "s": s, "z": zp}, expect_kernel=DQ)[0]
        back = olc_run(model("QuantizeLinear", [("x", "float32"), ("s", "float32"), ("z", t)], 21),
                       {"x": xd, "s": s, "z": zp}, expect_kernel=Q)[0]
        same_q(back, x, t)


@pytest.mark.parametrize("threads", [1, 2])
def test_threads_large(threads):
    rng = np.random.default_rng(seed_of("q4thr"))
    x = (rng.standard_normal((512, 1031)) * 4).astype(np.float32)
    s = rng.uniform(0.3, 1, (16, 1031)).astype(np.float32)
    zp = zero_points(rng, "int4", (16, 1031))
    attrs = {"axis": 0, "block_size": 32}
    m = model("QuantizeLinear", [("x", "float32"), ("s", "float32"), ("z", "int4")], 21, attrs)
    got = olc_run(m, {"x": x, "s": s, "z": zp}, threads=threads, expect_kernel=Q)[0]
    same_q(got, q4_oracle(x, s, zp, "int4", 0, 32), "blocked Q")
    md = model("DequantizeLinear", [("x", "int4"), ("s", "float32"), ("z", "int4")], 21, attrs)
    got_d = olc_run(md, {"x": got, "s": s, "z": zp}, threads=threads, expect_kernel=DQ)[0]
    same_f(got_d, dq4_oracle(got, s, zp, 0, 32), "blocked DQ")


# ------------------------------------------------------------- errors

def test_errors():
    md = model("DequantizeLinear", [("x", "int4"), ("s", "float32"), ("z", "int4")], 21, {"axis": 0, "block_size": 3})
    feeds = {"x": np.zeros((7, 2), ml_dtypes.int4), "s": np.ones((2, 2), np.float32),
             "z": np.zeros((2, 2), ml_dtypes.int4)}
    with pytest.raises(olc_core.OlcError) as info:
        olc_run(md, feeds)
    assert "node0" in str(info.value) and "needs 3 blocks" in str(info.value)
    m = model("DequantizeLinear", [("x", "int4"), ("s", "float32"), ("z", "uint4")], 21)
    with pytest.raises(olc_core.OlcError) as info:
        olc_core.Session(m, strict=True)
    assert "node0" in str(info.value)


# ------------------------------------------------------------ onnxruntime

def ort_run(m, feeds, optimize=True):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    if not optimize:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feeds)


@pytest.mark.skipif(ort is None, reason="onnxruntime is not installed")
@pytest.mark.parametrize("t", list(Q4))
@pytest.mark.parametrize("mode,axis,block", MODES)
def test_against_onnxruntime(t, mode, axis, block):
    rng = np.random.default_rng(seed_of("q4ort", t, mode, axis, block))
    shape = (4, 37, 9) if mode != "blocked" else (64, 48)
    ax = axis % len(shape)
    ss = scale_shape(shape, ax, block, mode)
    s = rng.uniform(0.05, 1.5, ss).astype(np.float32)
    zp = zero_points(rng, t, ss)
    attrs = {"axis": axis} | ({"block_size": block} if block else {})
    # DequantizeLinear: x, scale and zero point as initializers.
    xq = q_values(rng, t, shape)
    md = model("DequantizeLinear", [("x", t), ("s", "float32"), ("z", t)], 21, attrs,
               initializers={"x": xq, "s": s, "z": zp}, out_type="float32")
    want = ort_run(md, {})[0]
    same_f(folded_on(md, DQ)[0], want, "DequantizeLinear (folded) vs onnxruntime")
    got = olc_run(as_inputs(md, {"x"}), {"x": xq}, expect_kernel=DQ)[0]
    same_f(got, want, "DequantizeLinear vs onnxruntime")
    # QuantizeLinear, read back through DequantizeLinear on both runtimes.
    x = (rng.standard_normal(shape) * 5).astype(np.float32)
    x.reshape(-1)[:6] = [np.nan, np.inf, -np.inf, -0.0, 1e20, -1e20]
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], name="q", **attrs),
             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], name="dq", **attrs)]
    g = helper.make_graph(nodes, "qdq", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
                          initializer=[numpy_helper.from_array(s, "s"), numpy_helper.from_array(zp, "z")])
    mq = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    mq.ir_version = 10
    sess = olc_core.Session(mq, strict=True, record_usage=True)
    got = sess.run(None, {"x": x})[0]
    assert {Q, DQ} <= set(sess.kernel_usage()), sess.kernel_plan()
    want = ort_run(mq, {"x": x})[0]
    fin = ~np.isnan(x)  # onnxruntime's NaN handling is its own
    same_f(got[fin], want[fin], "QuantizeLinear -> DequantizeLinear vs onnxruntime")


# --------------------------------------------- 4-bit weights feeding MatMul

def weight_only_model(rng, k, n, block, t="int4"):
    """How 4-bit weight-only quantized models are exported: the weight as a
    blocked DequantizeLinear (axis 0, blocks along K) feeding MatMul."""
    _, dt, lo, hi = Q4[t]
    w = rng.standard_normal((k, n)).astype(np.float32)
    nb = -(-k // block)
    wb = np.pad(w, ((0, nb * block - k), (0, 0))).reshape(nb, block, n)
    scale = (np.abs(wb).max(axis=1) / hi).astype(np.float32)
    zp = np.zeros((nb, n), np.int8) if lo < 0 else np.full((nb, n), 8, np.int8)
    wq = q4_oracle(w, scale, zp.astype(dt), t, 0, block)
    inits = {"w_q": wq, "w_scale": scale, "w_zp": zp.astype(dt)}
    nodes = [helper.make_node("DequantizeLinear", ["w_q", "w_scale", "w_zp"], ["w"], name="dq_w", axis=0,
                              block_size=block),
             helper.make_node("MatMul", ["x", "w"], ["y"], name="matmul")]
    g = helper.make_graph(nodes, "wo", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", k])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["b", n])],
                          initializer=[numpy_helper.from_array(v, name) for name, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    m.ir_version = 10
    return m, inits


@pytest.mark.parametrize("t", list(Q4))
@pytest.mark.parametrize("k,n,block", [(256, 96, 32), (100, 33, 16), (64, 17, 128)])
def test_weight_only_matmul(t, k, n, block):
    rng = np.random.default_rng(seed_of("wo", t, k, n, block))
    m, inits = weight_only_model(rng, k, n, block, t)
    x = rng.standard_normal((8, k)).astype(np.float32)
    w = dq4_oracle(inits["w_q"], inits["w_scale"], inits["w_zp"], 0, block)
    want = x.astype(np.float64) @ w.astype(np.float64)
    tol = {"rtol": 1e-4, "atol": 1e-4 * np.abs(want).max()}
    # Constant weights: dequantized once by the olc kernel when the session is built.
    got = folded_on(m, DQ, {"x": x})[0]
    np.testing.assert_allclose(got, want, **tol)
    # The weight fed at run time: the kernel runs on each call, at every level.
    mi = as_inputs(m, {"w_q"})
    sub = model("DequantizeLinear", [("x", t), ("s", "float32"), ("z", t)], 21, {"axis": 0, "block_size": block})
    for lv in LEVELS:
        with olc_core.simd_cap(lv):
            sess = olc_core.Session(mi, strict=False, record_usage=True)
        np.testing.assert_allclose(sess.run(None, {"x": x, "w_q": inits["w_q"]})[0], want, **tol)
        assert DQ in sess.kernel_usage(), sess.kernel_plan()
        wd = olc_run(sub, {"x": inits["w_q"], "s": inits["w_scale"], "z": inits["w_zp"]}, lv, expect_kernel=DQ)[0]
        same_f(wd, w, f"{lv} dequantized weight")
    if ort is not None:
        # Unoptimized: onnxruntime otherwise rewrites the pair into a 4-bit
        # MatMul of its own, whose sums differ beyond this tolerance.
        np.testing.assert_allclose(got, ort_run(m, {"x": x}, optimize=False)[0], **tol)


# --------------------------------------- the ONNX backend suite's 4-bit cases

def backend_cases():
    from onnx.backend.test.loader import load_model_tests

    names = ("test_quantizelinear_int4", "test_quantizelinear_uint4", "test_dequantizelinear_int4",
             "test_dequantizelinear_uint4")
    return [c for c in load_model_tests(kind="node") if c.name in names]


def test_backend_suite_cases_run_native():
    """The ONNX node suite's 4-bit QuantizeLinear / DequantizeLinear cases run
    on the olc kernels (strict session) and give the suite's outputs."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = backend_cases()
    assert len(cases) == 4
    for c in cases:
        sess = olc_core.Session(c.model, strict=True, record_usage=True)
        assert c.data_sets
        for ins, outs in c.data_sets:
            feeds = {i.name: numpy_helper.to_array(v) if isinstance(v, onnx.TensorProto) else v
                     for i, v in zip(c.model.graph.input, ins)}
            got = sess.run(None, feeds)[0]
            want = outs[0]
            want = numpy_helper.to_array(want) if isinstance(want, onnx.TensorProto) else np.asarray(want)
            if want.dtype in (Q4["int4"][1], Q4["uint4"][1]):
                same_q(got, want, c.name)
            else:
                same_f(got, want, c.name)
        used = sess.kernel_usage()
        assert (Q if "quantizelinear" in c.name and "de" not in c.name else DQ) in used, (c.name, used)
