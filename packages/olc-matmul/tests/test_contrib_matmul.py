"""The com.microsoft matrix products of olc-matmul: FusedMatMul,
MatMulIntegerToFloat and DynamicQuantizeMatMul, against numpy references
written here (float64 for FusedMatMul; exact int64 sums for the integer
ones, DynamicQuantizeLinear written out for DynamicQuantizeMatMul) and
against onnxruntime's own kernels, at every SIMD level, 1 and 2 threads,
constant and fed weights, every type of the schemas; bad inputs raise
errors naming the node."""

from __future__ import annotations

import zlib

import numpy as np
import onnxruntime as ort
import pytest
from helpers import LEVELS, NP, ONNX, OUT_EPS, check_close, ort_u8s8_exact
from onnx import helper, numpy_helper

import olc_core

F32 = np.float32


def ms_model(op, inputs, attrs=None, out_type="float32", const=(), name="cm0"):
    """inputs: [(name, array or None)]; names in `const` become initializers."""
    names, vis, inits = [], [], []
    for n, a in inputs:
        if a is None:
            names.append("")
            continue
        names.append(n)
        if n in const:
            inits.append(numpy_helper.from_array(np.asarray(a), n))
        else:
            vis.append(helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(np.asarray(a).dtype), None))
    node = helper.make_node(op, names, ["y"], name=name, domain="com.microsoft", **(attrs or {}))
    g = helper.make_graph([node], "g", vis, [helper.make_tensor_value_info("y", ONNX[out_type], None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 10
    feeds = {n: np.asarray(a) for n, a in inputs if a is not None and n not in const}
    return m, feeds


def olc_run(m, feeds, level="avx512", threads=1, kernel=None):
    with olc_core.simd_cap(level):
        s = olc_core.Session(m, threads=threads, strict=True, record_usage=True)
    y = s.run(None, feeds)[0]
    if kernel:
        assert s.kernel_usage() == [f"olc_matmul::{kernel}"]
    return y


def ort_run(m, feeds):
    return ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]


def ort_run_if_covered(m, feeds):
    """onnxruntime's output, or None where its CPU provider has no kernel for these types."""
    try:
        sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    except Exception as e:  # onnxruntime raises its own NotImplemented class
        if "NOT_IMPLEMENTED" in str(e):
            return None
        raise
    return sess.run(None, feeds)[0]


# ------------------------------------------------------------ FusedMatMul


def fused_ref(a, b, ta, tb, tba, tbb, alpha):
    """The schema's definition: transBatch moves the first axis before the
    last ([d1, ..., dr-2, d0, dr-1]); trans swaps the last two; rank-1
    operands ignore both; then numpy matmul, times alpha."""
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)

    def prep(x, t, tb_):
        if x.ndim == 1:
            return x
        if tb_:
            x = np.moveaxis(x, 0, -2)
        return np.swapaxes(x, -1, -2) if t else x

    pa, pb = prep(a, ta, tba), prep(b, tb, tbb)
    return alpha * np.matmul(pa, pb), np.abs(alpha) * np.matmul(np.abs(pa), np.abs(pb)), pa.shape[-1]


FUSED = [  # (A shape, B shape, transA, transB, transBatchA, transBatchB, alpha)
    ((7, 5), (5, 9), 0, 0, 0, 0, 1.0), ((5, 7), (9, 5), 1, 1, 0, 0, 0.5), ((1, 33), (33, 40), 0, 0, 0, 0, -2.0),
    ((33,), (33, 17), 1, 0, 0, 0, 1.0), ((40, 33), (33,), 0, 1, 0, 0, 0.25), ((33,), (33,), 0, 0, 0, 0, 3.0),
    ((2, 13, 17), (17, 19), 0, 0, 0, 0, 1.0), ((2, 17, 13), (2, 19, 17), 1, 1, 0, 0, 0.125),
    ((3, 1, 12, 64), (4, 64, 12), 0, 0, 0, 0, 0.125), ((3, 4, 12, 64), (3, 4, 40, 64), 0, 1, 0, 0, 0.125),
    ((6, 4, 17), (4, 17, 9), 0, 0, 1, 0, 1.0), ((6, 4, 17), (9, 4, 17), 0, 1, 1, 1, 0.5),
    ((17, 3, 2, 6), (6, 3, 2, 17), 1, 1, 1, 1, 2.0), ((5, 3, 1, 8), (8, 1, 2, 11), 0, 0, 1, 1, 1.0),
    ((130, 70), (70, 200), 0, 0, 0, 0, 1.5), ((2, 64, 130), (64, 2, 100), 1, 0, 0, 1, 1.0),
]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("level", LEVELS)
def test_fused_matmul_reference(level, threads):
    rng = np.random.default_rng(zlib.crc32(f"fmm/{level}/{threads}".encode()))
    for sa, sb, ta, tb, tba, tbb, alpha in FUSED:
        a = rng.standard_normal(sa).astype(F32)
        b = rng.standard_normal(sb).astype(F32)
        attrs = {"transA": ta, "transB": tb, "transBatchA": tba, "transBatchB": tbb, "alpha": alpha}
        ref, absprod, k = fused_ref(a, b, ta, tb, tba, tbb, alpha)
        for const in ((), ("b",)):
            m, feeds = ms_model("FusedMatMul", [("a", a), ("b", b)], attrs, const=const)
            y = olc_run(m, feeds, level, threads, "FusedMatMul")
            assert y.shape == ref.shape, (sa, sb, attrs)
            check_close(y, ref, absprod, k, "float32", f"FusedMatMul {sa} {sb} {attrs} const={const}")


@pytest.mark.parametrize("t", ["float64", "float16", "bfloat16"])
def test_fused_matmul_types(t):
    rng = np.random.default_rng(zlib.crc32(t.encode()))
    for sa, sb, ta, tb, tba, tbb, alpha in FUSED:
        a = rng.standard_normal(sa).astype(NP[t])
        b = rng.standard_normal(sb).astype(NP[t])
        attrs = {"transA": ta, "transB": tb, "transBatchA": tba, "transBatchB": tbb, "alpha": alpha}
        m, feeds = ms_model("FusedMatMul", [("a", a), ("b", b)], attrs, out_type=t)
        y = olc_run(m, feeds, LEVELS[-1], 2, "FusedMatMul")
        assert y.dtype == NP[t]
        ref, absprod, k = fused_ref(a, b, ta, tb, tba, tbb, alpha)
        check_close(y, ref, absprod, k, t, f"FusedMatMul {t} {sa} {sb} {attrs}")


@pytest.mark.parametrize("t", ["float32", "float16", "float64"])
def test_fused_matmul_against_onnxruntime(t):
    rng = np.random.default_rng(zlib.crc32(f"ort/{t}".encode()))
    for sa, sb, ta, tb, tba, tbb, alpha in FUSED:
        a = rng.standard_normal(sa).astype(NP[t])
        b = rng.standard_normal(sb).astype(NP[t])
        attrs = {"transA": ta, "transB": tb, "transBatchA": tba, "transBatchB": tbb, "alpha": alpha}
        m, feeds = ms_model("FusedMatMul", [("a", a), ("b", b)], attrs, out_type=t)
        y, yo = olc_run(m, feeds, threads=2), ort_run(m, feeds)
        assert y.shape == yo.shape and y.dtype == yo.dtype
        _, absprod, k = fused_ref(a, b, ta, tb, tba, tbb, alpha)
        tol = 4.0 * (k + 2) * {"float32": 2.0**-24, "float16": 2.0**-11, "float64": 2.0**-53}[t] * absprod
        assert (np.abs(y.astype(np.float64) - yo.astype(np.float64)) <= tol + 1e-30).all(), (sa, sb, attrs)


def test_fused_matmul_errors():
    a, b = np.ones((4, 5), F32), np.ones((5, 6), F32)
    m, feeds = ms_model("FusedMatMul", [("a", a), ("b", b)], {"transBatchA": 1}, name="fbad")
    with pytest.raises(olc_core.OlcError, match=r"fbad.*FusedMatMul.*same rank, at least 3"):
        olc_run(m, feeds)
    m, feeds = ms_model("FusedMatMul", [("a", a), ("b", np.ones((4, 6), F32))], name="fbad")
    with pytest.raises(olc_core.OlcError, match=r"fbad.*inner dimensions differ"):
        olc_run(m, feeds)
    m, feeds = ms_model("FusedMatMul", [("a", np.ones((2, 4, 5), F32)), ("b", np.ones((3, 5, 6), F32))], name="fbad")
    with pytest.raises(olc_core.OlcError, match=r"fbad.*cannot be broadcast"):
        olc_run(m, feeds)
    m, feeds = ms_model("FusedMatMul", [("a", a), ("b", b)], {"transA": 2}, name="fbad")
    with pytest.raises(olc_core.OlcError, match=r"fbad.*must be 0 or 1"):
        olc_run(m, feeds)


# ------------------------------------------------------------ integer products

I8 = {"uint8": (0, 256), "int8": (-128, 128)}


def rand_q(rng, shape, t):
    lo, hi = I8[t]
    return rng.integers(lo, hi, size=shape).astype(NP[t])


def int_product(a, b, za, zb):
    """sum_k (a - za)(b - zb) in int64 with numpy matmul broadcasting; zb scalar or [N]."""
    return np.matmul(a.astype(np.int64) - np.int64(za), b.astype(np.int64) - np.asarray(zb, np.int64))


def check_float_out(y, ref, mag, t, what):
    """float32 rounding of acc * (sa * sb) (+ bias): a few ulps of the terms."""
    y64 = np.asarray(y).astype(np.float64)
    bound = 4 * 2.0**-24 * mag + OUT_EPS[t] * np.abs(ref) + 1e-30
    bad = ~(np.abs(y64 - ref) <= bound)
    assert not bad.any(), f"{what}: {int(bad.sum())} bad; worst {np.abs(y64 - ref)[bad].max()}"


MIF = [  # (A shape, B shape, b_scale per column, a_zp, b_zp per column (None: absent), bias)
    ((5, 16), (16, 24), False, None, None, False), ((7, 33), (33, 65), True, 3, 1, True),
    ((1, 300), (300, 40), True, None, 0, True), ((2, 9, 64), (64, 31), False, 7, None, False),
    ((2, 3, 40), (2, 40, 17), True, None, 1, True), ((129, 70), (70, 130), True, 2, 1, True),
]


def mif_case(rng, sa, sb, ta, tb, per_col, azp, bzp, bias, st="float32"):
    a, b = rand_q(rng, sa, ta), rand_q(rng, sb, tb)
    n = sb[-1]
    a_scale = np.array(rng.uniform(0.01, 0.1), NP[st])
    b_scale = (rng.uniform(0.01, 0.1, n) if per_col else np.array(rng.uniform(0.01, 0.1))).astype(NP[st])
    a_zp = None if azp is None else np.array(azp, NP[ta])
    b_zp = None
    if bzp is not None:
        b_zp = rand_q(rng, (n,), tb) if bzp else np.array(rand_q(rng, (), tb), NP[tb])
    bv = rng.standard_normal(n).astype(NP[st]) if bias else None
    return a, b, a_scale, b_scale, a_zp, b_zp, bv


def mif_ref(a, b, a_scale, b_scale, a_zp, b_zp, bias):
    acc = int_product(a, b, 0 if a_zp is None else a_zp, 0 if b_zp is None else b_zp).astype(np.float64)
    mult = (a_scale.astype(F32) * b_scale.astype(F32)).astype(np.float64)  # one float32 product, as both runtimes
    ref = acc * mult
    mag = np.abs(ref)
    if bias is not None:
        ref = ref + bias.astype(np.float64)
        mag = mag + np.abs(bias.astype(np.float64))
    return ref, mag


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("level", LEVELS)
def test_matmul_integer_to_float_reference(level, threads):
    rng = np.random.default_rng(zlib.crc32(f"mif/{level}/{threads}".encode()))
    for ta in ("uint8", "int8"):
        for tb in ("uint8", "int8"):
            for sa, sb, per_col, azp, bzp, bias in MIF:
                a, b, a_scale, b_scale, a_zp, b_zp, bv = mif_case(rng, sa, sb, ta, tb, per_col, azp, bzp, bias)
                ins = [("a", a), ("b", b), ("a_scale", a_scale), ("b_scale", b_scale), ("a_zp", a_zp),
                       ("b_zp", b_zp), ("bias", bv)]
                while ins[-1][1] is None:
                    ins.pop()
                ref, mag = mif_ref(a, b, a_scale, b_scale, a_zp, b_zp, bv)
                for const in ((), ("b", "b_scale", "b_zp", "bias")):
                    m, feeds = ms_model("MatMulIntegerToFloat", ins, const=const)
                    y = olc_run(m, feeds, level, threads, "MatMulIntegerToFloat")
                    check_float_out(y, ref, mag, "float32", f"MatMulIntegerToFloat {ta} {tb} {sa} {sb} {const}")


@pytest.mark.parametrize("st", ["float32", "float16"])
def test_matmul_integer_to_float_against_onnxruntime(st):
    rng = np.random.default_rng(zlib.crc32(f"mif-ort/{st}".encode()))
    compared = 0
    for ta in ("uint8", "int8"):
        for tb in ("uint8", "int8"):
            for sa, sb, per_col, azp, bzp, bias in MIF:
                if len(sb) > 2:
                    # onnxruntime takes per-column zero points of a batched B
                    # only as [batch, 1, N], and drops the bias of a batched B.
                    bzp, bias = (0 if bzp else bzp), False
                a, b, a_scale, b_scale, a_zp, b_zp, bv = mif_case(rng, sa, sb, ta, tb, per_col, azp, bzp, bias, st)
                ins = [("a", a), ("b", b), ("a_scale", a_scale), ("b_scale", b_scale), ("a_zp", a_zp),
                       ("b_zp", b_zp), ("bias", bv)]
                while ins[-1][1] is None:
                    ins.pop()
                m, feeds = ms_model("MatMulIntegerToFloat", ins, out_type=st, const=("b",))
                yo = ort_run_if_covered(m, feeds)
                if yo is None:
                    continue
                compared += 1
                y = olc_run(m, feeds, threads=2)
                assert y.dtype == yo.dtype == NP[st] and y.shape == yo.shape
                ref, mag = mif_ref(a, b, a_scale, b_scale, a_zp, b_zp, bv)
                check_float_out(y, ref, mag, st, "olc")
                # onnxruntime: the same float32 steps (float16 outputs within a rounding),
                # where its kernel is exact on this host.
                tol = 4 * 2.0**-24 * mag + 2 * OUT_EPS[st] * np.abs(ref) + 1e-30
                close = np.abs(y.astype(np.float64) - yo.astype(np.float64)) <= tol
                assert close[ort_u8s8_exact(a, b)].all(), (ta, tb, sa, sb)
    assert compared >= len(MIF)


def dql_ref(x):
    """DynamicQuantizeLinear (uint8), in float32 as its definition states;
    a range of 0 takes scale 1 (onnxruntime's choice; the definition would
    divide by 0)."""
    x = np.asarray(x, F32)
    lo, hi = min(F32(0), x.min()), max(F32(0), x.max())
    scale = F32(1) if hi == lo else F32((hi - lo) / F32(255))
    zp = np.rint(np.clip(F32(0) - lo / scale, 0, 255))
    q = np.clip(np.rint(x / scale) + zp, 0, 255).astype(np.int64)
    return q, scale, int(zp)


DQ = [  # (A shape, B shape, b_scale per column, b_zp per column (None: absent), bias)
    ((5, 16), (16, 24), False, None, False), ((7, 33), (33, 65), True, True, True),
    ((1, 768), (768, 96), True, None, True), ((2, 9, 64), (64, 31), False, False, False),
    ((2, 3, 40), (2, 40, 17), True, True, True), ((129, 70), (70, 130), True, False, True),
    # 77,100 values of A: on two threads its range and quantization run in
    # chunks, the last one partial.
    ((300, 257), (257, 40), True, None, True),
]


def dq_case(rng, sa, sb, tb, per_col, bzp, bias):
    a = (rng.standard_normal(sa) * rng.uniform(0.5, 4)).astype(F32)
    b = rand_q(rng, sb, tb)
    n = sb[-1]
    b_scale = (rng.uniform(0.01, 0.1, n) if per_col else np.array(rng.uniform(0.01, 0.1))).astype(F32)
    b_zp = None if bzp is None else (rand_q(rng, (n,), tb) if bzp else np.array(rand_q(rng, (), tb), NP[tb]))
    bv = rng.standard_normal(n).astype(F32) if bias else None
    return a, b, b_scale, b_zp, bv


def dq_ref(a, b, b_scale, b_zp, bias):
    q, sa, za = dql_ref(a)
    acc = int_product(q, b, za, 0 if b_zp is None else b_zp).astype(np.float64)
    ref = acc * (F32(sa) * b_scale.astype(F32)).astype(np.float64)
    mag = np.abs(ref)
    if bias is not None:
        ref, mag = ref + bias, mag + np.abs(bias)
    return ref, mag, sa


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("level", LEVELS)
def test_dynamic_quantize_matmul_reference(level, threads):
    rng = np.random.default_rng(zlib.crc32(f"dq/{level}/{threads}".encode()))
    for tb in ("uint8", "int8"):
        for sa, sb, per_col, bzp, bias in DQ:
            a, b, b_scale, b_zp, bv = dq_case(rng, sa, sb, tb, per_col, bzp, bias)
            ins = [("a", a), ("b", b), ("b_scale", b_scale), ("b_zp", b_zp), ("bias", bv)]
            while ins[-1][1] is None:
                ins.pop()
            ref, mag, sa_ = dq_ref(a, b, b_scale, b_zp, bv)
            for const in ((), ("b", "b_scale", "b_zp", "bias")):
                m, feeds = ms_model("DynamicQuantizeMatMul", ins, const=const)
                y = olc_run(m, feeds, level, threads, "DynamicQuantizeMatMul")
                check_float_out(y, ref, mag, "float32", f"DynamicQuantizeMatMul {tb} {sa} {sb} {const}")
            # Against the float product: each a is off by at most half a step.
            zb = 0 if b_zp is None else b_zp
            w = (b.astype(np.float64) - np.asarray(zb, np.float64)) * b_scale.astype(np.float64)
            exact = np.matmul(a.astype(np.float64), w) + (0 if bv is None else bv)
            bound = sa_ / 2 * np.matmul(np.ones_like(a, np.float64), np.abs(w)) + 1e-5 * (np.abs(exact) + 1)
            assert (np.abs(y - exact) <= bound).all()


def test_dynamic_quantize_matmul_against_onnxruntime():
    rng = np.random.default_rng(41)
    for tb in ("uint8", "int8"):
        for sa, sb, per_col, bzp, bias in DQ:
            if len(sb) > 2:
                # onnxruntime takes per-column zero points of a batched B only
                # as [batch, 1, N], and drops the bias of a batched B.
                bzp, bias = (False if bzp else bzp), False
            a, b, b_scale, b_zp, bv = dq_case(rng, sa, sb, tb, per_col, bzp, bias)
            ins = [("a", a), ("b", b), ("b_scale", b_scale), ("b_zp", b_zp), ("bias", bv)]
            while ins[-1][1] is None:
                ins.pop()
            m, feeds = ms_model("DynamicQuantizeMatMul", ins, const=("b",))
            y, yo = olc_run(m, feeds, threads=2), ort_run(m, feeds)
            _, mag, _ = dq_ref(a, b, b_scale, b_zp, bv)
            close = np.abs(y.astype(np.float64) - yo) <= 4 * 2.0**-24 * mag + 1e-30
            assert close[ort_u8s8_exact(dql_ref(a)[0].astype(np.uint8), b)].all(), (tb, sa, sb)


def test_dynamic_quantize_matmul_edges():
    rng = np.random.default_rng(42)
    b = rand_q(rng, (16, 8), "int8")
    bias = rng.standard_normal(8).astype(F32)
    m, _ = ms_model("DynamicQuantizeMatMul", [("a", np.zeros((3, 16), F32)), ("b", b), ("b_scale", np.array(0.1, F32)),
                                              ("b_zp", None), ("bias", bias)], const=("b", "b_scale", "bias"))
    for level in LEVELS:
        # All zeros: the range is 0 (scale 1): the output is the bias.
        assert np.array_equal(olc_run(m, {"a": np.zeros((3, 16), F32)}, level), np.broadcast_to(bias, (3, 8)))
        # NaN or an infinity in A: no quantization exists, every output is NaN.
        a = rng.standard_normal((3, 16)).astype(F32)
        a[1, 3] = np.inf
        assert np.isnan(olc_run(m, {"a": a}, level)).all()
        assert olc_run(m, {"a": np.zeros((0, 16), F32)}, level).shape == (0, 8)
    # The same on two threads, where A's passes run in chunks: the one
    # value outside [0, 0] (or the NaN) in the last chunk only.
    b = rand_q(rng, (256, 64), "int8")
    m, _ = ms_model("DynamicQuantizeMatMul", [("a", np.zeros((300, 256), F32)), ("b", b),
                                              ("b_scale", np.array(0.1, F32))], const=("b", "b_scale"))
    for level in LEVELS:
        a = np.zeros((300, 256), F32)
        a[-1, -1] = -2.5
        q, sa, za = dql_ref(a)
        ref = (int_product(q, b, za, 0) * (F32(sa) * F32(0.1))).astype(F32)
        assert np.allclose(olc_run(m, {"a": a}, level, threads=2), ref, rtol=1e-6, atol=0)
        a[-1, -1] = np.nan
        assert np.isnan(olc_run(m, {"a": a}, level, threads=2)).all()


def test_integer_to_float_errors():
    rng = np.random.default_rng(43)
    a, b = rand_q(rng, (4, 8), "uint8"), rand_q(rng, (8, 5), "int8")
    s = np.array(0.1, F32)
    cases = [
        ([("a", a), ("b", b), ("a_scale", np.full(8, 0.1, F32)), ("b_scale", s)], r"a_scale of shape \[8\] must be a scalar"),
        ([("a", a), ("b", b), ("a_scale", s), ("b_scale", np.full(4, 0.1, F32))], r"b_scale of shape \[4\] must be"),
        ([("a", a), ("b", b), ("a_scale", s), ("b_scale", s), ("a_zp", np.full(4, 1, np.uint8))],
         r"a_zero_point of shape \[4\] must be a scalar"),
        ([("a", a), ("b", b), ("a_scale", s), ("b_scale", s), ("a_zp", None), ("b_zp", None),
          ("bias", np.ones(4, F32))], r"bias of shape \[4\] must be 1-D with N = 5"),
        ([("a", a), ("b", rand_q(rng, (7, 5), "int8")), ("a_scale", s), ("b_scale", s)], r"inner dimensions differ"),
    ]
    for ins, msg in cases:
        m, feeds = ms_model("MatMulIntegerToFloat", ins, name="ibad")
        with pytest.raises(olc_core.OlcError, match=r"ibad.*MatMulIntegerToFloat.*" + msg):
            olc_run(m, feeds)
    m, feeds = ms_model("MatMulIntegerToFloat", [("a", a), ("b", b), ("a_scale", s.astype(np.float16)), ("b_scale", s)],
                        name="ibad")
    with pytest.raises(olc_core.OlcError, match=r"ibad.*inputs bound to T3 have different types"):
        olc_run(m, feeds)
    m, feeds = ms_model("DynamicQuantizeMatMul", [("a", np.ones((4, 8), F32)), ("b", b), ("b_scale", np.ones(3, F32))],
                        name="dbad")
    with pytest.raises(olc_core.OlcError, match=r"dbad.*DynamicQuantizeMatMul.*b_scale of shape \[3\]"):
        olc_run(m, feeds)
