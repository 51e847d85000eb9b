"""QuantizeLinear, DequantizeLinear and DynamicQuantizeLinear.

Three independent oracles:

- ``onnx.reference`` (ReferenceEvaluator), on the inputs where its numpy
  code is well defined: it converts ``rint(x / scale)`` to int32 before
  clipping, which on x86 turns NaN, infinities and quotients beyond 2^31
  into INT32_MIN (so +inf quantizes to qmin there);
- a numpy oracle written here from the schema text (round half to even,
  saturate to the type's range, NaN to qmin, +-inf saturating: the rule
  onnxruntime follows too), for every input including those;
- onnxruntime, where it implements the case.

Every case checks through the kernel usage that the olc kernel ran, at
every SIMD level this CPU has (``olc_core.simd_cap``).
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
DYN = "olc_tensor::DynamicQuantizeLinear"

F8 = {
    "float8e4m3fn": (TensorProto.FLOAT8E4M3FN, ml_dtypes.float8_e4m3fn),
    "float8e4m3fnuz": (TensorProto.FLOAT8E4M3FNUZ, ml_dtypes.float8_e4m3fnuz),
    "float8e5m2": (TensorProto.FLOAT8E5M2, ml_dtypes.float8_e5m2),
    "float8e5m2fnuz": (TensorProto.FLOAT8E5M2FNUZ, ml_dtypes.float8_e5m2fnuz),
}
ALL_NP = {**NP, **{k: np.dtype(v[1]) for k, v in F8.items()}}
ALL_ONNX = {**ONNX, **{k: v[0] for k, v in F8.items()}}
INT_Q = ("uint8", "int8", "uint16", "int16")
LENGTHS = (0, 1, 15, 16, 17, 31, 33, 63, 64, 65, 1000)


# ----------------------------------------------------------------- helpers

def model(op: str, inputs, opset: int, attrs=None, out_type: str | None = None, initializers=None,
          n_out: int = 1) -> onnx.ModelProto:
    """One node; inputs are (name, type) pairs ('' name: absent)."""
    initializers = initializers or {}
    node = helper.make_node(op, [n for n, _ in inputs], [f"y{i}" for i in range(n_out)], name="node0",
                            **(attrs or {}))
    g_in = [helper.make_tensor_value_info(n, ALL_ONNX[t], None) for n, t in inputs if n and n not in initializers]
    outs = [helper.make_tensor_value_info(f"y{i}", ALL_ONNX[out_type] if out_type and i != 1 else
                                          (TensorProto.FLOAT if n_out == 3 else 0), None) for i in range(n_out)]
    inits = [numpy_helper.from_array(v, k) for k, v in initializers.items()]
    ops = [helper.make_opsetid("", opset)]
    m = helper.make_model(helper.make_graph([node], "g", g_in, outs, initializer=inits), opset_imports=ops)
    m.ir_version = max(8, helper.find_min_ir_version_for(ops))
    return m


def expand(v: np.ndarray, shape, axis: int, block: int) -> np.ndarray:
    """A scale / zero point broadcast to x's shape (the schema's layouts)."""
    if v.size == 1:
        return v.reshape(())
    if not block:
        dims = [1] * len(shape)
        dims[axis] = v.size
        return v.reshape(dims)
    return np.repeat(v, block, axis=axis).take(range(shape[axis]), axis=axis)


def to_precision(v: np.ndarray, p: str) -> np.ndarray:
    return v.astype(np.float32).astype(ALL_NP[p]).astype(np.float32)


def f8_saturate(v: np.ndarray, t: str) -> np.ndarray:
    """float32 -> float8 with saturation: finite overflow and +-inf to +-max."""
    big = float(ml_dtypes.finfo(ALL_NP[t]).max)
    return np.where(np.isnan(v), v, np.clip(v, -big, big)).astype(ALL_NP[t])


def q_oracle(x, s, zp, y_t, axis=1, block=0, precision=None, saturate=True):
    p = precision or ("float32" if s.dtype == np.float32 else next(k for k, d in NP.items() if d == s.dtype))
    xs = to_precision(x.astype(np.float32) if x.dtype == np.int32 else x, p)
    sf = to_precision(expand(s, x.shape, axis, block), p)
    with np.errstate(all="ignore"):
        q = to_precision(xs / sf, p)
    z = np.zeros((), np.float64) if zp is None else expand(zp.astype(np.float64), x.shape, axis, block)
    if y_t in F8:
        with np.errstate(all="ignore"):
            v = np.where(z != 0, q + z.astype(np.float32), q).astype(np.float32)
        return f8_saturate(v, y_t) if saturate else v.astype(ALL_NP[y_t])
    info = np.iinfo(NP[y_t])
    with np.errstate(all="ignore"):
        r = np.rint(q.astype(np.float64)) + z
    r = np.where(np.isnan(r), info.min, np.clip(r, info.min, info.max))
    return r.astype(NP[y_t])


def dq_oracle(x, s, zp, out_t, axis=1, block=0):
    xf = x.astype(np.float32)
    z = np.float32(0) if zp is None else expand(zp.astype(np.float32), x.shape, axis, block)
    y = (xf - z) * expand(s, x.shape, axis, block).astype(np.float32)
    return y.astype(np.float32).astype(ALL_NP[out_t])


def same_bits(got: np.ndarray, want: np.ndarray, what: str = "") -> None:
    want = np.asarray(want)
    assert got.dtype == want.dtype, f"{what}: {got.dtype} != {want.dtype}"
    assert got.shape == want.shape, f"{what}: {got.shape} != {want.shape}"
    bits = np.dtype(f"u{got.itemsize}")
    g = np.ascontiguousarray(got).reshape(-1).view(bits)
    w = np.ascontiguousarray(want).reshape(-1).view(bits)
    if not np.array_equal(g, w):
        bad = np.flatnonzero(g != w)
        raise AssertionError(f"{what}: {bad.size} elements differ, first at {bad[:5]}: "
                             f"{got.reshape(-1)[bad[:5]]} vs {want.reshape(-1)[bad[:5]]}")


def usage_isa(m, feeds, level):
    with olc_core.simd_cap(level):
        sess = olc_core.Session(m, strict=True, record_usage=True)
    sess.run(None, feeds)
    return sess.kernel_usage_details()


def ort_run(m: onnx.ModelProto, feeds, fuse_qdq: bool = True):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    if not fuse_qdq:
        so.add_session_config_entry("session.disable_quant_qdq", "1")
    return ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feeds)


def scale_shape(shape, axis, block, mode):
    if mode == "tensor":
        return ()
    if mode == "axis":
        return (shape[axis],)
    s = list(shape)
    s[axis] = -(-shape[axis] // block)
    return tuple(s)


def int_zero_points(rng, t, shape):
    info = np.iinfo(NP[t])
    lo, hi = (info.min // 2, info.max // 2) if info.min < 0 else (0, info.max)
    return rng.integers(lo, hi, shape, endpoint=True).astype(NP[t]).reshape(shape)


def finite_x(rng, shape, scale_mag, t="float32", halves=True):
    """Values inside the int32 range of quotients; some exact .5 ties."""
    n = int(np.prod(shape))
    x = rng.standard_normal(n) * 60 * scale_mag
    if halves and n:
        k = rng.choice(n, max(1, n // 4), replace=False)
        x[k] = (rng.integers(-300, 300, k.size) + 0.5) * 0.5  # ties when the scale is 0.5
    return x.astype(ALL_NP[t]).reshape(shape)


# ------------------------------------------------------- QuantizeLinear int

MODES = [("tensor", 1, 0), ("axis", 1, 0), ("axis", -1, 0), ("axis", 0, 0), ("blocked", 1, 4), ("blocked", -1, 3),
         ("blocked", -1, 32)]


@pytest.mark.parametrize("y_t", INT_Q)
@pytest.mark.parametrize("mode,axis,block", MODES)
@pytest.mark.parametrize("level", LEVELS)
def test_quantize_int_layouts(y_t, mode, axis, block, level):
    rng = np.random.default_rng(seed_of("q", y_t, mode, axis, block, level))
    opset = 21 if (block or y_t in ("uint16", "int16")) else 13
    for shape in [(2, 17, 5), (3, 65), (1, 1000), (4, 33, 1), (2, 0, 3)]:
        ax = axis % len(shape)
        ss = scale_shape(shape, ax, block, mode)
        s = rng.uniform(0.05, 2.0, ss).astype(np.float32)
        if s.size:
            s.reshape(-1)[0] = 0.5
        zp = int_zero_points(rng, y_t, ss)
        x = finite_x(rng, shape, 1.0)
        m = model("QuantizeLinear", [("x", "float32"), ("s", "float32"), ("z", y_t)], opset,
                  {"axis": axis} | ({"block_size": block} if block else {}))
        feeds = {"x": x, "s": s, "z": zp}
        got = olc_run(m, feeds, level, expect_kernel=Q)[0]
        want = q_oracle(x, s, zp, y_t, ax, block)
        same_bits(got, want, f"{shape} oracle")
        same_bits(got, ref_run(m, feeds)[0], f"{shape} onnx.reference")


@pytest.mark.parametrize("y_t", INT_Q)
@pytest.mark.parametrize("level", LEVELS)
def test_quantize_int_lengths_and_specials(y_t, level):
    """Every SIMD tail, with NaN, +-inf, +-0, huge values and saturation."""
    rng = np.random.default_rng(seed_of("qs", y_t, level))
    opset = 21 if y_t in ("uint16", "int16") else 13
    info = np.iinfo(NP[y_t])
    for n in LENGTHS:
        x = (rng.standard_normal(n) * (info.max - info.min) * 0.4).astype(np.float32)
        sp = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1e30, -1e30, 3e9, -3e9, 2.5, -2.5, 3.5,
                       info.max + 0.5, info.min - 0.5, info.max + 1.0, info.min - 1.0], np.float32)
        k = min(n, sp.size)
        x[rng.choice(n, k, replace=False)] = sp[:k] if n else sp[:0]
        for s_val, z_val in [(1.0, 0), (0.5, info.max // 3), (3.0, info.min // 2 if info.min else 7)]:
            s = np.array(s_val, np.float32)
            zp = np.array(z_val, NP[y_t])
            m = model("QuantizeLinear", [("x", "float32"), ("s", "float32"), ("z", y_t)], opset)
            feeds = {"x": x, "s": s, "z": zp}
            got = olc_run(m, feeds, level, expect_kernel=Q)[0]
            same_bits(got, q_oracle(x, s, zp, y_t), f"n={n} s={s_val}")
            fin = np.isfinite(x) & (np.abs(x) < 1e9)
            same_bits(got[fin], ref_run(m, feeds)[0][fin], f"n={n} reference (finite part)")
            assert (got[np.isnan(x)] == info.min).all()
            assert (got[x == np.inf] == info.max).all() and (got[x == -np.inf] == info.min).all()


@pytest.mark.parametrize("level", LEVELS)
def test_quantize_isa_recorded(level):
    x = np.arange(100, dtype=np.float32)
    m = model("QuantizeLinear", [("x", "float32"), ("s", "float32"), ("z", "uint8")], 13)
    details = usage_isa(m, {"x": x, "s": np.array(0.5, np.float32), "z": np.array(3, np.uint8)}, level)
    assert f"{Q}[{level}]" in details, details
    md = model("DequantizeLinear", [("x", "int8"), ("s", "float32")], 13)
    details = usage_isa(md, {"x": np.arange(-50, 50, dtype=np.int8), "s": np.array(0.5, np.float32)}, level)
    assert f"{DQ}[{level}]" in details, details


def test_quantize_without_zero_point_and_opset10():
    rng = np.random.default_rng(seed_of("q10"))
    x = finite_x(rng, (3, 40), 1.0)
    for opset in (10, 13, 19, 21, 23, 25):
        m = model("QuantizeLinear", [("x", "float32"), ("s", "float32")], opset)
        feeds = {"x": x, "s": np.array(0.25, np.float32)}
        got = olc_run(m, feeds, expect_kernel=Q)[0]
        assert got.dtype == np.uint8
        same_bits(got, q_oracle(x, feeds["s"], None, "uint8"), f"opset {opset}")
        same_bits(got, ref_run(m, feeds)[0], f"opset {opset} reference")


def test_one_element_scale_is_per_tensor():
    """A one-element scale of rank 0 or 1 is per tensor, with block_size too
    (as onnx.reference reads it)."""
    rng = np.random.default_rng(seed_of("q1"))
    x = finite_x(rng, (3, 8), 1.0)
    for s_shape, attrs in [((1,), {"axis": 0}), ((), {"axis": 1, "block_size": 4}), ((1,), {"block_size": 8})]:
        s = np.full(s_shape, 0.5, np.float32)
        zp = np.full(s_shape, 7, np.int8)
        m = model("QuantizeLinear", [("x", "float32"), ("s", "float32"), ("z", "int8")], 21, attrs)
        got = olc_run(m, {"x": x, "s": s, "z": zp}, expect_kernel=Q)[0]
        same_bits(got, q_oracle(x, s.reshape(()), zp.reshape(()), "int8"), f"{s_shape} {attrs}")
        same_bits(got, ref_run(m, {"x": x, "s": s, "z": zp})[0], f"{s_shape} {attrs} reference")


@pytest.mark.parametrize("x_t", ["float16", "bfloat16", "int32"])
@pytest.mark.parametrize("level", LEVELS)
def test_quantize_other_inputs(x_t, level):
    """float16 / bfloat16 x with a scale of the same type (19, 21: the
    division is in that precision), int32 x with a float32 scale (13)."""
    rng = np.random.default_rng(seed_of("qx", x_t, level))
    for mode, axis, block in MODES:
        if x_t == "int32" and block:
            continue
        shape = (3, 17, 6)
        ax = axis % 3
        ss = scale_shape(shape, ax, block, mode)
        s_t = "float32" if x_t == "int32" else x_t
        s = rng.uniform(0.1, 3.0, ss).astype(NP[s_t])
        zp = int_zero_points(rng, "int8", ss)
        x = (rng.integers(-400, 400, shape).astype(np.int32) if x_t == "int32"
             else finite_x(rng, shape, 1.0, x_t))
        opset = 13 if x_t == "int32" else (21 if block else 19)
        m = model("QuantizeLinear", [("x", x_t), ("s", s_t), ("z", "int8")], opset,
                  {"axis": axis} | ({"block_size": block} if block else {}))
        feeds = {"x": x, "s": s, "z": zp}
        got = olc_run(m, feeds, level, expect_kernel=Q)[0]
        same_bits(got, q_oracle(x, s, zp, "int8", ax, block), f"{mode} {axis} oracle")
        same_bits(got, ref_run(m, feeds)[0], f"{mode} {axis} reference")


def test_quantize_opset23_output_dtype_and_precision():
    rng = np.random.default_rng(seed_of("q23"))
    x = finite_x(rng, (4, 50), 1.0)
    s = rng.uniform(0.1, 2, (50,)).astype(np.float32)
    for y_t in ("int8", "uint16", "float8e4m3fn"):
        m = model("QuantizeLinear", [("x", "float32"), ("s", "float32")], 23,
                  {"axis": 1, "output_dtype": ALL_ONNX[y_t]})
        got = olc_run(m, {"x": x, "s": s}, expect_kernel=Q)[0]
        same_bits(got, q_oracle(x, s, None, y_t), y_t)
        same_bits(got, ref_run(m, {"x": x, "s": s})[0], f"{y_t} reference")
    # precision: x and the scale are rounded to it, then the quotient.
    for p in ("float16", "bfloat16"):
        m = model("QuantizeLinear", [("x", "float32"), ("s", "float32"), ("z", "uint8")], 23,
                  {"axis": 1, "precision": ALL_ONNX[p]})
        feeds = {"x": x, "s": s, "z": np.full((50,), 100, np.uint8)}
        got = olc_run(m, feeds, expect_kernel=Q)[0]
        same_bits(got, q_oracle(x, s, feeds["z"], "uint8", precision=p), p)
        same_bits(got, ref_run(m, feeds)[0], f"{p} reference")
    # float16 x, float32 scale (distinct constraints from 23): float32 division.
    xh = x.astype(np.float16)
    m = model("QuantizeLinear", [("x", "float16"), ("s", "float32"), ("z", "int8")], 25, {"axis": 1})
    feeds = {"x": xh, "s": s, "z": np.zeros(50, np.int8)}
    got = olc_run(m, feeds, expect_kernel=Q)[0]
    same_bits(got, q_oracle(xh, s, feeds["z"], "int8"), "f16 x / f32 scale")
    same_bits(got, ref_run(m, feeds)[0], "f16 x / f32 scale reference")


# ----------------------------------------------------- QuantizeLinear float8

@pytest.mark.parametrize("y_t", list(F8))
@pytest.mark.parametrize("saturate", [1, 0])
@pytest.mark.parametrize("x_t", ["float32", "float16", "bfloat16"])
def test_quantize_float8(y_t, saturate, x_t):
    rng = np.random.default_rng(seed_of("q8", y_t, saturate, x_t))
    for mode, axis, block in [("tensor", 1, 0), ("axis", -1, 0), ("blocked", 0, 2)]:
        shape = (5, 33)
        ax = axis % 2
        ss = scale_shape(shape, ax, block, mode)
        s = rng.uniform(0.01, 4.0, ss).astype(NP[x_t])
        x = (rng.standard_normal(shape) * 300).astype(NP[x_t])
        sp = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 6e4, -6e4, 1e-6, -1e-6], NP[x_t])
        x.reshape(-1)[: sp.size] = sp
        zp = np.zeros(ss, ALL_NP[y_t])
        m = model("QuantizeLinear", [("x", x_t), ("s", x_t), ("z", y_t)], 21,
                  {"axis": axis, "saturate": saturate} | ({"block_size": block} if block else {}))
        feeds = {"x": x, "s": s, "z": zp}
        got = olc_run(m, feeds, expect_kernel=Q)[0]
        same_bits(got, q_oracle(x, s, zp, y_t, ax, block, saturate=bool(saturate)), f"{mode} oracle")
        same_bits(got, ref_run(m, feeds)[0], f"{mode} reference")


def test_quantize_float8_nonzero_zero_point():
    """The schema's formula adds the zero point for float8 too."""
    x = np.array([1.0, -2.0, 0.0, -0.0, 100.0], np.float32)
    zp = np.array(1.5, ml_dtypes.float8_e4m3fn)
    m = model("QuantizeLinear", [("x", "float32"), ("s", "float32"), ("z", "float8e4m3fn")], 19)
    got = olc_run(m, {"x": x, "s": np.array(2.0, np.float32), "z": zp}, expect_kernel=Q)[0]
    same_bits(got, q_oracle(x, np.array(2.0, np.float32), zp, "float8e4m3fn"), "zp 1.5")
    assert float(got[0]) == 2.0 and float(got[1]) == 0.5


# ------------------------------------------------------- DequantizeLinear

DQ_IN = ("uint8", "int8", "uint16", "int16", "int32") + tuple(F8)


def dq_values(rng, t, shape):
    if t in F8:
        v = rng.integers(0, 256, shape).astype(np.uint8).view(ALL_NP[t])
        return v
    info = np.iinfo(NP[t])
    if t == "int32":
        return rng.integers(-(1 << 20), 1 << 20, shape).astype(np.int32)
    return rng.integers(info.min, info.max, shape, endpoint=True).astype(NP[t])


@pytest.mark.parametrize("x_t", DQ_IN)
@pytest.mark.parametrize("mode,axis,block", MODES)
@pytest.mark.parametrize("level", LEVELS)
def test_dequantize_layouts(x_t, mode, axis, block, level):
    rng = np.random.default_rng(seed_of("dq", x_t, mode, axis, block, level))
    opset = 21 if (block or x_t in ("uint16", "int16")) else (19 if x_t in F8 else 13)
    for shape in [(2, 17, 5), (3, 65), (1, 1000), (2, 0, 3)]:
        ax = axis % len(shape)
        ss = scale_shape(shape, ax, block, mode)
        s = rng.uniform(0.001, 2.0, ss).astype(np.float32)
        x = dq_values(rng, x_t, shape)
        with_zp = x_t not in ("int32",)
        zp = (np.zeros(ss, ALL_NP[x_t]) if x_t in F8 else int_zero_points(rng, x_t, ss)) if with_zp else None
        inputs = [("x", x_t), ("s", "float32")] + ([("z", x_t)] if with_zp else [])
        m = model("DequantizeLinear", inputs, opset, {"axis": axis} | ({"block_size": block} if block else {}))
        feeds = {"x": x, "s": s} | ({"z": zp} if with_zp else {})
        got = olc_run(m, feeds, level, expect_kernel=DQ)[0]
        same_bits(got, dq_oracle(x, s, zp, "float32", ax, block), f"{shape} oracle")
        if x_t in F8 and zp.size == 0:
            continue  # onnx.reference takes the min of the empty zero point
        mr = model("DequantizeLinear", inputs, max(opset, 19),
                   {"axis": axis} | ({"block_size": block} if block else {}))
        same_bits(got, ref_run(mr, feeds)[0], f"{shape} reference")


@pytest.mark.parametrize("level", LEVELS)
def test_dequantize_lengths(level):
    rng = np.random.default_rng(seed_of("dql", level))
    for t in ("uint8", "int8", "int16", "uint16", "int32"):
        for n in LENGTHS:
            x = dq_values(rng, t, (n,))
            zp = np.array(0 if t == "int32" else int_zero_points(rng, t, ()), NP[t])
            m = model("DequantizeLinear", [("x", t), ("s", "float32"), ("z", t)], 21)
            feeds = {"x": x, "s": np.array(0.37, np.float32), "z": zp}
            got = olc_run(m, feeds, level, expect_kernel=DQ)[0]
            same_bits(got, dq_oracle(x, feeds["s"], zp, "float32"), f"{t} n={n}")


@pytest.mark.parametrize("s_t", ["float16", "bfloat16"])
@pytest.mark.parametrize("x_t", ["int8", "uint8", "float8e5m2"])
def test_dequantize_half_outputs(s_t, x_t):
    rng = np.random.default_rng(seed_of("dqh", s_t, x_t))
    x = dq_values(rng, x_t, (6, 40))
    s = rng.uniform(0.01, 3.0, (40,)).astype(NP[s_t])
    m = model("DequantizeLinear", [("x", x_t), ("s", s_t)], 19, {"axis": 1})
    got = olc_run(m, {"x": x, "s": s}, expect_kernel=DQ)[0]
    same_bits(got, dq_oracle(x, s, None, s_t, 1), "oracle")
    same_bits(got, ref_run(m, {"x": x, "s": s})[0], "reference")
    # 23+: output_dtype picks another float type; float32 arithmetic, one rounding.
    for out_t in ("float32", "float16", "bfloat16"):
        m = model("DequantizeLinear", [("x", x_t), ("s", s_t)], 23, {"axis": 1, "output_dtype": ALL_ONNX[out_t]})
        got = olc_run(m, {"x": x, "s": s}, expect_kernel=DQ)[0]
        same_bits(got, dq_oracle(x, s, None, out_t, 1), out_t)
        same_bits(got, ref_run(m, {"x": x, "s": s})[0], f"{out_t} reference")


# ------------------------------------------------ DynamicQuantizeLinear

def dyn_oracle(x: np.ndarray):
    """The schema's formulas in float32; NaN left out of the range; an
    all-zero input has scale 1 (onnxruntime's rule)."""
    fin = x[~np.isnan(x)]
    mx = np.float32(max(0.0, float(fin.max()) if fin.size else 0.0))
    mn = np.float32(min(0.0, float(fin.min()) if fin.size else 0.0))
    scale = np.float32(1.0) if mx == mn else np.float32(mx - mn) / np.float32(255)
    zp = np.float32(np.clip(np.float32(0) - mn / scale, 0, 255))
    zpi = np.rint(zp)
    y = q_oracle(x, np.array(scale, np.float32), np.array(zpi, np.uint8), "uint8")
    return [y, np.array(scale, np.float32), np.array(zpi.astype(np.uint8))]


@pytest.mark.parametrize("level", LEVELS)
def test_dynamic_quantize(level):
    rng = np.random.default_rng(seed_of("dyn", level))
    m = model("DynamicQuantizeLinear", [("x", "float32")], 11, n_out=3, out_type="uint8")
    for n in LENGTHS[1:] + (70000,):
        for shift in (0.0, 5.0, -5.0):  # mixed signs, all positive, all negative
            x = (rng.standard_normal(n) + shift).astype(np.float32).reshape(-1, 1 if n % 2 else 2)
            got = olc_run(m, {"x": x}, level, expect_kernel=DYN)
            want = dyn_oracle(x)
            for g, w, name in zip(got, want, ("y", "scale", "zero point")):
                same_bits(g, w, f"n={n} {name} oracle")
            ref = ref_run(m, {"x": x})
            for g, w, name in zip(got, ref, ("y", "scale", "zero point")):
                same_bits(g, w, f"n={n} {name} reference")


@pytest.mark.parametrize("level", LEVELS)
def test_dynamic_quantize_specials(level):
    m = model("DynamicQuantizeLinear", [("x", "float32")], 11, n_out=3, out_type="uint8")
    cases = [np.zeros(20, np.float32), np.array([], np.float32), np.array([1.0, np.nan, -2.0] * 11, np.float32),
             np.array([-0.0, 0.0, 2.5, -7.25], np.float32)]
    for x in cases:
        got = olc_run(m, {"x": x}, level, expect_kernel=DYN)
        for g, w in zip(got, dyn_oracle(x)):
            same_bits(g, w, f"{x[:4]}")
        # onnxruntime's range with NaN depends on where the NaN falls in its
        # vectors (3 elements: ignored; 33: the whole output 0): not compared.
        if ort is not None and not np.isnan(x).any():
            for g, w in zip(got, ort_run(m, {"x": x})):
                same_bits(g, w, f"{x[:4]} onnxruntime")


# ------------------------------------------------------------- threads

@pytest.mark.parametrize("threads", [1, 2])
def test_threads_large(threads):
    rng = np.random.default_rng(seed_of("thr"))
    x = (rng.standard_normal((256, 4099)) * 50).astype(np.float32)
    s = rng.uniform(0.1, 1, (4099,)).astype(np.float32)
    zp = rng.integers(-20, 20, (4099,)).astype(np.int8)
    m = model("QuantizeLinear", [("x", "float32"), ("s", "float32"), ("z", "int8")], 13, {"axis": 1})
    got = olc_run(m, {"x": x, "s": s, "z": zp}, threads=threads, expect_kernel=Q)[0]
    same_bits(got, q_oracle(x, s, zp, "int8", 1), "per-axis Q")
    md = model("DequantizeLinear", [("x", "int8"), ("s", "float32"), ("z", "int8")], 13, {"axis": 1})
    got_d = olc_run(md, {"x": got, "s": s, "z": zp}, threads=threads, expect_kernel=DQ)[0]
    same_bits(got_d, dq_oracle(got, s, zp, "float32", 1), "per-axis DQ")
    xt = x.reshape(-1)[: 1 << 20]
    mt = model("QuantizeLinear", [("x", "float32"), ("s", "float32"), ("z", "uint8")], 13)
    feeds = {"x": xt, "s": np.array(0.3, np.float32), "z": np.array(128, np.uint8)}
    same_bits(olc_run(mt, feeds, threads=threads, expect_kernel=Q)[0], q_oracle(xt, feeds["s"], feeds["z"], "uint8"),
              "per-tensor Q")
    mdyn = model("DynamicQuantizeLinear", [("x", "float32")], 11, n_out=3, out_type="uint8")
    for g, w in zip(olc_run(mdyn, {"x": xt}, threads=threads, expect_kernel=DYN), dyn_oracle(xt)):
        same_bits(g, w, "dynamic")


# --------------------------------------------------------- onnxruntime

@pytest.mark.skipif(ort is None, reason="onnxruntime is not installed")
@pytest.mark.parametrize("y_t", ["uint8", "int8"])
@pytest.mark.parametrize("mode,axis", [("tensor", 1), ("axis", 1), ("axis", -1)])
def test_against_onnxruntime(y_t, mode, axis):
    rng = np.random.default_rng(seed_of("ort", y_t, mode, axis))
    shape = (4, 37, 9)
    ss = scale_shape(shape, axis % 3, 0, mode)
    s = rng.uniform(0.05, 1.5, ss).astype(np.float32)
    zp = int_zero_points(rng, y_t, ss)
    x = (rng.standard_normal(shape) * 80).astype(np.float32)
    x.reshape(-1)[:6] = [np.nan, np.inf, -np.inf, -0.0, 1e20, -1e20]
    m = model("QuantizeLinear", [("x", "float32"), ("s", "float32"), ("z", y_t)], 13, {"axis": axis}, out_type=y_t)
    feeds = {"x": x, "s": s, "z": zp}
    got = olc_run(m, feeds, expect_kernel=Q)[0]
    same_bits(got, ort_run(m, feeds)[0], "QuantizeLinear vs onnxruntime")
    md = model("DequantizeLinear", [("x", y_t), ("s", "float32"), ("z", y_t)], 13, {"axis": axis},
               out_type="float32")
    feeds_d = {"x": got, "s": s, "z": zp}
    same_bits(olc_run(md, feeds_d, expect_kernel=DQ)[0], ort_run(md, feeds_d)[0], "DequantizeLinear vs onnxruntime")


# ---------------------------------------------------------------- errors

def expect_error(m, feeds, *fragments):
    with pytest.raises(olc_core.OlcError) as info:
        olc_run(m, feeds)
    msg = str(info.value)
    assert "node0" in msg, msg
    for f in fragments:
        assert f in msg, msg


def test_errors():
    x = np.zeros((4, 6), np.float32)
    m = model("QuantizeLinear", [("x", "float32"), ("s", "float32"), ("z", "uint8")], 21, {"axis": 1})
    expect_error(m, {"x": x, "s": np.ones(5, np.float32), "z": np.zeros(5, np.uint8)}, "y_scale has 5 elements",
                 "axis 1")
    expect_error(m, {"x": x, "s": np.ones(6, np.float32), "z": np.zeros(3, np.uint8)}, "y_zero_point shape [3]",
                 "y_scale shape [6]")
    expect_error(m, {"x": x, "s": np.ones((2, 3), np.float32), "z": np.zeros((2, 3), np.uint8)}, "scalar or 1-D")
    mb = model("QuantizeLinear", [("x", "float32"), ("s", "float32"), ("z", "uint8")], 21,
               {"axis": 1, "block_size": 4})
    expect_error(mb, {"x": x, "s": np.ones((4, 3), np.float32), "z": np.zeros((4, 3), np.uint8)},
                 "block_size 4 does not fit", "needs 2 blocks")
    expect_error(mb, {"x": x, "s": np.ones((3, 2), np.float32), "z": np.zeros((3, 2), np.uint8)},
                 "except on axis 1")
    ma = model("QuantizeLinear", [("x", "float32"), ("s", "float32")], 13, {"axis": 2})
    expect_error(ma, {"x": x, "s": np.ones(6, np.float32)}, "axis 2 is out of range")
    m10 = model("QuantizeLinear", [("x", "float32"), ("s", "float32")], 10)
    expect_error(m10, {"x": x, "s": np.ones(6, np.float32)}, "must be a scalar at opset 10")
    md = model("DequantizeLinear", [("x", "float8e4m3fn"), ("s", "float32"), ("z", "float8e4m3fn")], 19)
    expect_error(md, {"x": np.zeros(3, ml_dtypes.float8_e4m3fn), "s": np.array(1, np.float32),
                      "z": np.array(1, ml_dtypes.float8_e4m3fn)}, "must be zero for float8")
    mdb = model("DequantizeLinear", [("x", "int8"), ("s", "float32")], 21, {"axis": 0, "block_size": 3})
    expect_error(mdb, {"x": np.zeros((7, 2), np.int8), "s": np.ones((2, 2), np.float32)}, "needs 3 blocks")


def test_error_zero_point_type_mismatch():
    """output_dtype disagreeing with the zero point's type: refused when the
    session is built (an OlcError naming the node), nothing run."""
    m = model("QuantizeLinear", [("x", "float32"), ("s", "float32"), ("z", "uint8")], 23,
              {"output_dtype": TensorProto.INT8})
    with pytest.raises(olc_core.OlcError) as info:
        olc_core.Session(m, strict=True)
    assert "node0" in str(info.value)


def test_error_zero_point_dtype_differs_from_x():
    """DequantizeLinear's x and x_zero_point share a constraint: a strict
    session names the node and the mismatch."""
    m = model("DequantizeLinear", [("x", "int8"), ("s", "float32"), ("z", "uint8")], 13)
    with pytest.raises(olc_core.OlcError) as info:
        olc_core.Session(m, strict=True)
    msg = str(info.value)
    assert "node0" in msg and "different types (int8 and uint8)" in msg, msg


def test_unsupported_output_falls_back():
    """int2 has no native element type: the registration declines it."""
    m = model("QuantizeLinear", [("x", "float32"), ("s", "float32")], 25, {"output_dtype": TensorProto.INT2})
    sess = olc_core.Session(m, strict=False, record_usage=True)
    plan = sess.kernel_plan()
    assert plan[0].kernel.startswith("onnx.reference"), plan


# ------------------------------------------------------- Q/DQ model

def qdq_model(rng, k=64, n=48):
    """The shape onnxruntime's static quantizer emits: activations through
    QuantizeLinear -> DequantizeLinear (uint8, per tensor), weights as int8
    initializers with a per-channel DequantizeLinear (axis 1), MatMul, Add
    with a float bias, and the output quantized and dequantized again."""
    w = rng.standard_normal((k, n)).astype(np.float32)
    w_scale = (np.abs(w).max(axis=0) / 127).astype(np.float32)
    w_q = np.clip(np.rint(w / w_scale), -127, 127).astype(np.int8)
    bias = rng.standard_normal(n).astype(np.float32)
    inits = {
        "x_scale": np.array(0.02, np.float32), "x_zp": np.array(128, np.uint8),
        "w_q": w_q, "w_scale": w_scale, "w_zp": np.zeros(n, np.int8), "bias": bias,
        "y_scale": np.array(0.05, np.float32), "y_zp": np.array(120, np.uint8),
    }
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "x_scale", "x_zp"], ["xq"], name="q_x"),
        helper.make_node("DequantizeLinear", ["xq", "x_scale", "x_zp"], ["xd"], name="dq_x"),
        helper.make_node("DequantizeLinear", ["w_q", "w_scale", "w_zp"], ["wd"], name="dq_w", axis=1),
        helper.make_node("MatMul", ["xd", "wd"], ["mm"], name="matmul"),
        helper.make_node("Add", ["mm", "bias"], ["a"], name="add"),
        helper.make_node("QuantizeLinear", ["a", "y_scale", "y_zp"], ["aq"], name="q_y"),
        helper.make_node("DequantizeLinear", ["aq", "y_scale", "y_zp"], ["y"], name="dq_y"),
    ]
    g = helper.make_graph(nodes, "qdq", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", k])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["b", n])],
                          initializer=[numpy_helper.from_array(v, name) for name, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m


@pytest.mark.skipif(ort is None, reason="onnxruntime is not installed")
def test_qdq_model_against_onnxruntime():
    """Tolerance: one output quantization step (y_scale). Both runtimes
    quantize the same activations exactly (checked bit for bit above), but
    the MatMul sums in a different order, so a sum that lands within
    rounding distance of a .5 step can go either way once; anything beyond
    one step would be a real error. onnxruntime runs the graph as written:
    fused into its integer QLinearMatMul, its uint8 x int8 kernel on x86
    CPUs without VNNI (AVX2's vpmaddubsw) saturates pairs of products in
    int16 and is off by many steps there."""
    rng = np.random.default_rng(seed_of("qdq"))
    m = qdq_model(rng)
    x = rng.standard_normal((32, 64)).astype(np.float32)
    try:
        sess = olc_core.Session(m, strict=True, record_usage=True)
    except olc_core.OlcError as e:  # MatMul / Add live in other families
        pytest.skip(f"a family this model needs is not installed: {e}")
    got = sess.run(None, {"x": x})[0]
    used = sess.kernel_usage()
    assert Q in used and DQ in used, used
    want = ort_run(m, {"x": x}, fuse_qdq=False)[0]
    step = 0.05
    diff = np.abs(got - want)
    assert diff.max() <= step * 1.001, diff.max()
    assert (diff == 0).mean() > 0.95, (diff == 0).mean()
    # And against a float computation: quantization error only.
    w_f = (numpy_helper.to_array(m.graph.initializer[2]).astype(np.float32)
           * numpy_helper.to_array(m.graph.initializer[3]))
    xd = (np.clip(np.rint(x / np.float32(0.02)) + 128, 0, 255) - 128) * np.float32(0.02)
    y_f = xd @ w_f + numpy_helper.to_array(m.graph.initializer[5])
    assert np.abs(got - np.clip(y_f, (0 - 120) * step, (255 - 120) * step)).max() <= step / 2 + 1e-3
