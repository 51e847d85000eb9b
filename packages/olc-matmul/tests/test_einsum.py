"""Einsum against independent oracles: numpy.einsum in float64 (integers:
numpy in the wide type, wrapped to the element type), onnx.reference and,
for float32, onnxruntime. Every SIMD level, 1 and 2 threads; every ONNX
backend einsum form, implicit outputs, ellipsis with broadcasting, size-1
broadcasting of labels, repeated letters (diagonals), empty dimensions,
3+ operands and shapes around the register tiles. Each session is strict
and its kernel usage checked, so the fallback never stands in."""

from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest
from helpers import LEVELS
from onnx import helper
from onnx.reference import ReferenceEvaluator

import olc_core

KERNEL = "olc_matmul::Einsum"
FLOATS = ("float32", "float64", "float16", "bfloat16")
INTS = ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64")
NPT = {t: np.dtype(ml_dtypes.bfloat16) if t == "bfloat16" else np.dtype(t) for t in FLOATS + INTS}

# (equation, input shapes). The first block is every form of the ONNX
# backend einsum cases; the rest the forms models use and the corners.
CASES = [
    ("ij->ji", [(3, 4)]),
    ("ij->i", [(3, 4)]),
    ("...ii ->...i", [(3, 5, 5)]),
    ("i,i", [(5,), (5,)]),
    ("bij, bjk -> bik", [(5, 2, 3), (5, 3, 4)]),
    ("->", [()]),
    # batched matmul and attention
    ("bij,bjk->bik", [(4, 37, 65), (4, 65, 33)]),
    ("bhid,bhjd->bhij", [(2, 3, 29, 17), (2, 3, 31, 17)]),
    ("bhij,bhjd->bhid", [(2, 3, 29, 31), (2, 3, 31, 17)]),
    ("bhqd,bhkd->bhqk", [(1, 4, 64, 32), (1, 4, 48, 32)]),
    ("bsnh,bnhd->bsd", [(2, 9, 3, 5), (2, 3, 5, 13)]),
    ("bsnh,nhd->bsd", [(2, 9, 3, 5), (3, 5, 13)]),
    ("bij,jk->bik", [(3, 14, 20), (20, 25)]),
    ("bik,bjk->bij", [(3, 14, 20), (3, 25, 20)]),
    ("bij,bjk->bki", [(3, 20, 30), (3, 30, 40)]),
    ("bjk,bij->bik", [(3, 30, 40), (3, 20, 30)]),
    ("ij,kj->ik", [(33, 65), (17, 65)]),
    ("ji,jk->ik", [(65, 33), (65, 17)]),
    ("ji,kj->ki", [(65, 33), (17, 65)]),
    # transposes, reductions, outer products, scalars
    ("ij->ji", [(17, 33)]),
    ("ij->ji", [(70, 45)]),
    ("abc->cab", [(5, 6, 7)]),
    ("abcd->badc", [(3, 4, 5, 6)]),
    ("ij->j", [(9, 37)]),
    ("ij->", [(9, 37)]),
    ("...ij->...", [(2, 3, 9, 7)]),
    ("...ij->...j", [(2, 3, 9, 7)]),
    ("ijk->ik", [(4, 5, 6)]),
    ("i,j->ij", [(40,), (50,)]),
    ("i,j->ji", [(7,), (3,)]),
    ("ij,k->ijk", [(3, 4), (5,)]),
    (",->", [(), ()]),
    (",i->i", [(), (7,)]),
    ("i,->i", [(7,), ()]),
    ("ij,ij->ij", [(6, 7), (6, 7)]),
    ("ij,ij->", [(6, 7), (6, 7)]),
    ("bi,bi->b", [(5, 300), (5, 300)]),
    # implicit outputs, upper case, spaces
    ("ij,jk", [(4, 5), (5, 6)]),
    ("ba,cb", [(20, 30), (40, 20)]),
    ("Ab,bC", [(4, 5), (5, 6)]),
    ("aB,Ba->", [(4, 5), (5, 4)]),
    ("ij", [(3, 4)]),
    ("ji", [(3, 4)]),
    ("ii", [(4, 4)]),
    (" i j , j k -> i k ", [(4, 5), (5, 6)]),
    # ellipsis, broadcasting of size-1 dimensions
    ("...ij,...jk", [(2, 1, 20, 30), (5, 30, 40)]),
    ("...ij,...jk->...ik", [(3, 20, 30), (30, 40)]),
    ("...ij,...jk->...ik", [(1, 4, 5), (3, 5, 6)]),
    ("i...,i...->...", [(4, 2, 3), (4, 1, 3)]),
    ("...,...->...", [(2, 3), (3,)]),
    ("ij,jk->ik", [(20, 1), (3, 40)]),
    ("ij,ij->ij", [(3, 1), (3, 4)]),
    ("bij,bjk->bik", [(1, 6, 7), (4, 7, 8)]),
    ("bij,bjk->bik", [(1, 40, 30), (4, 30, 20)]),
    ("bij,bjk->bik", [(4, 40, 30), (1, 30, 20)]),
    ("...ij,...jk->...ik", [(3, 1, 20, 30), (1, 5, 30, 40)]),
    ("bhij,bhjd->bhid", [(2, 1, 33, 17), (2, 6, 17, 20)]),
    ("...i,...i", [(3, 4), (4,)]),
    ("...", [(2, 3)]),
    ("a...,...b->a...b", [(3, 2), (2, 4)]),
    # repeated letters
    ("ii->i", [(6, 6)]),
    ("iij->j", [(3, 3, 5)]),
    ("ij,jj->i", [(4, 5), (5, 5)]),
    ("bii,bij->bj", [(2, 4, 4), (2, 4, 6)]),
    ("iii->", [(3, 3, 3)]),
    ("ijji->ij", [(2, 3, 3, 2)]),
    # three or more operands
    ("ij,jk,kl->il", [(8, 9), (9, 10), (10, 11)]),
    ("i,i,i->", [(6,), (6,), (6,)]),
    ("ab,bc,cd,de->ae", [(3, 4), (4, 5), (5, 6), (6, 7)]),
    ("bn,anm,bm->ba", [(2, 5), (3, 5, 4), (2, 4)]),
    ("ij,jk,ik->", [(4, 5), (5, 6), (4, 6)]),
    # empty dimensions
    ("ij,jk->ik", [(4, 0), (0, 5)]),
    ("ij,jk->ik", [(0, 3), (3, 5)]),
    ("ij->", [(0, 3)]),
    ("ij->j", [(0, 3)]),
    ("bij,bjk->bik", [(0, 3, 4), (0, 4, 5)]),
    ("i,j->ij", [(0,), (5,)]),
]

# Shapes around the float32 register tiles (scalar 4x8, avx2 6x16, avx512 12x32).
TAIL = [1, 5, 13, 33]


def make_model(eq, n_inputs, t, opset=13, name="ein0"):
    code = helper.np_dtype_to_tensor_dtype(NPT[t])
    names = [f"x{i}" for i in range(n_inputs)]
    node = helper.make_node("Einsum", names, ["y"], equation=eq, name=name)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info(n, code, None) for n in names],
                          [helper.make_tensor_value_info("y", code, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 10
    return m


def session(m, level, threads=1):
    with olc_core.simd_cap(level):
        return olc_core.Session(m, threads=threads, strict=True, record_usage=True)


def data(rng, shapes, t):
    if t in INTS:
        info = np.iinfo(NPT[t])
        lo, hi = max(info.min, -(2**40)), min(info.max, 2**40)
        return [rng.integers(lo, hi, size=s, endpoint=True).astype(NPT[t]) for s in shapes]
    return [rng.standard_normal(s).astype(NPT[t]) for s in shapes]


def int_reference(eq, xs, t):
    wide = np.uint64 if t.startswith("u") else np.int64
    with np.errstate(over="ignore"):
        return np.asarray(np.einsum(eq, *[x.astype(wide) for x in xs])).astype(NPT[t])


def summed_terms(eq, xs):
    """Terms per output element: the product of the sizes of all labels over the output's."""
    full = np.einsum(eq, *[np.ones(x.shape) for x in xs])
    return float(full.max()) if full.size else 0.0


def check_float(eq, xs, y, t):
    ref = np.asarray(np.einsum(eq, *[x.astype(np.float64) for x in xs]))
    absprod = np.asarray(np.einsum(eq, *[np.abs(x.astype(np.float64)) for x in xs]))
    assert y.dtype == NPT[t] and y.shape == ref.shape, (eq, y.dtype, y.shape, ref.shape)
    K = summed_terms(eq, xs)
    unit = {"float64": 2.0**-52, "float32": 2.0**-23, "float16": 2.0**-10, "bfloat16": 2.0**-7}[t]
    # Storage rounding of the inputs is exact; each operand beyond the first
    # may round an intermediate to the element type (float16/bfloat16).
    inter = unit * len(xs) if t in ("float16", "bfloat16") else 0.0
    bound = unit * np.abs(ref) + (2.0 * (K + 2) * 2.0**-23 if t != "float64" else 2.0 * (K + 2) * 2.0**-52
                                  ) * absprod + inter * absprod + 1e-300
    err = np.abs(y.astype(np.float64) - ref)
    assert (err <= bound).all(), f"{eq} {t}: worst error {err.max()} (bound {bound.min()})"


def run_case(s, eq, xs):
    y = s.run(None, {f"x{i}": x for i, x in enumerate(xs)})[0]
    return np.asarray(y)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("level", LEVELS)
def test_forms_float32(level, threads):
    rng = np.random.default_rng(10)
    for eq, shapes in CASES:
        s = session(make_model(eq, len(shapes), "float32"), level, threads)
        xs = data(rng, shapes, "float32")
        check_float(eq, xs, run_case(s, eq, xs), "float32")
        assert s.kernel_usage() == [KERNEL], eq


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("t", ("float64", "float16", "bfloat16"))
def test_forms_other_floats(t, level):
    rng = np.random.default_rng(11)
    opset = 28 if t == "bfloat16" else 13
    for eq, shapes in CASES:
        s = session(make_model(eq, len(shapes), t, opset=opset), level)
        xs = data(rng, shapes, t)
        check_float(eq, xs, run_case(s, eq, xs), t)
        assert s.kernel_usage() == [KERNEL], eq


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("t", INTS)
def test_forms_integers_wrap(t, level):
    """Products and sums overflow the element type: they wrap, as numpy's do."""
    rng = np.random.default_rng(12)
    for eq, shapes in CASES:
        s = session(make_model(eq, len(shapes), t), level)
        xs = data(rng, shapes, t)
        y = run_case(s, eq, xs)
        ref = int_reference(eq, xs, t)
        assert y.dtype == NPT[t] and y.shape == ref.shape, eq
        np.testing.assert_array_equal(y, ref, err_msg=f"{eq} {t}")
        assert s.kernel_usage() == [KERNEL], eq


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("level", LEVELS)
def test_tails_around_tiles(level, threads):
    rng = np.random.default_rng(13)
    forms = ["bhid,bhjd->bhij", "bhij,bhjd->bhid", "bij,bjk->bik", "ij,kj->ik", "ji,jk->ik", "ij->ji"]
    sessions = {eq: session(make_model(eq, eq.count(",") + 1, "float32"), level, threads) for eq in forms}
    checked = 0
    for i in TAIL:
        for j in TAIL:
            for d in (1, 7, 64):
                shapes = {
                    "bhid,bhjd->bhij": [(1, 2, i, d), (1, 2, j, d)],
                    "bhij,bhjd->bhid": [(1, 2, i, j), (1, 2, j, d)],
                    "bij,bjk->bik": [(2, i, d), (2, d, j)],
                    "ij,kj->ik": [(i, d), (j, d)],
                    "ji,jk->ik": [(d, i), (d, j)],
                    "ij->ji": [(i, j * d)],
                }
                for eq, shp in shapes.items():
                    xs = data(rng, shp, "float32")
                    check_float(eq, xs, run_case(sessions[eq], eq, xs), "float32")
                    checked += 1
    assert checked == len(TAIL) ** 2 * 3 * len(forms)
    for s in sessions.values():
        assert s.kernel_usage() == [KERNEL]


def test_usage_details_name_the_gemm_path():
    """The forms models use reach the GEMM with no copy of their operands."""
    rng = np.random.default_rng(14)
    expect = {
        "bhid,bhjd->bhij": ([(1, 12, 128, 64), (1, 12, 128, 64)], "gemm[12x128x128x64 tB]"),
        "bhij,bhjd->bhid": ([(1, 12, 128, 128), (1, 12, 128, 64)], "gemm[12x128x64x128]"),
        "bij,bjk->bik": ([(8, 64, 32), (8, 32, 48)], "gemm[8x64x48x32]"),
        "bsnh,bnhd->bsd": ([(2, 16, 4, 8), (2, 4, 8, 32)], "gemm[2x16x32x32]"),
        "bij,jk->bik": ([(4, 16, 32), (32, 64)], "gemm[1x64x64x32]"),
        "ij->ij": ([(4, 5)], "view"),
        # size-1 and missing "..." dimensions broadcast as stride-0 batches (the
        # trailing space makes a second key for the same form)
        "bij,bjk->bik ": ([(1, 64, 32), (8, 32, 48)], "gemm[8x64x48x32]"),
        "...ij,...jk->...ik": ([(3, 1, 20, 30), (1, 5, 30, 40)], "gemm[15x20x40x30]"),
        "...ij,...jk": ([(2, 1, 20, 30), (5, 30, 40)], "gemm[10x20x40x30]"),
    }
    for eq, (shapes, detail) in expect.items():
        s = session(make_model(eq, len(shapes), "float32"), "avx512" if "avx512" in LEVELS else LEVELS[-1])
        xs = data(rng, shapes, "float32")
        check_float(eq, xs, run_case(s, eq, xs), "float32")
        (d,) = s.kernel_usage_details()
        assert d.startswith(KERNEL) and detail in d, (eq, d)


def test_plan_cache_follows_shapes():
    rng = np.random.default_rng(15)
    s = session(make_model("...ij,...jk->...ik", 2, "float32"), LEVELS[-1])
    for shapes in ([(2, 3, 4), (4, 5)], [(3, 4), (4, 5)], [(2, 3, 4), (4, 5)], [(6, 2, 7, 8), (2, 8, 3)],
                   [(2, 3, 4), (4, 5)]):
        xs = data(rng, shapes, "float32")
        check_float("...ij,...jk->...ik", xs, run_case(s, "...ij,...jk->...ik", xs), "float32")
    assert s.kernel_usage() == [KERNEL]


@pytest.mark.parametrize("eq,shapes", [c for c in CASES if c[1] and all(0 not in s for s in c[1])][:40])
def test_against_onnx_reference(eq, shapes):
    rng = np.random.default_rng(16)
    m = make_model(eq, len(shapes), "float64")
    xs = data(rng, shapes, "float64")
    feeds = {f"x{i}": x for i, x in enumerate(xs)}
    ref = np.asarray(ReferenceEvaluator(m).run(None, feeds)[0])
    s = session(m, LEVELS[-1])
    y = run_case(s, eq, xs)
    assert y.shape == ref.shape
    np.testing.assert_allclose(y, ref, rtol=1e-12, atol=1e-12 * max(1.0, summed_terms(eq, xs)))
    assert s.kernel_usage() == [KERNEL]


@pytest.mark.parametrize("threads", [1, 2])
def test_against_onnxruntime_float32(threads):
    ort = pytest.importorskip("onnxruntime")
    rng = np.random.default_rng(17)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    compared = 0
    for eq, shapes in CASES:
        if not all(len(s) and 0 not in s for s in shapes):
            continue  # onnxruntime's Einsum refuses some scalar and empty forms
        m = make_model(eq, len(shapes), "float32")
        xs = data(rng, shapes, "float32")
        feeds = {f"x{i}": x for i, x in enumerate(xs)}
        try:
            want = ort.InferenceSession(m.SerializeToString(), opts, providers=["CPUExecutionProvider"]).run(
                None, feeds)[0]
        except Exception:  # noqa: BLE001 - a form onnxruntime does not take
            continue
        s = session(m, LEVELS[-1], threads)
        y = run_case(s, eq, xs)
        assert y.shape == want.shape, eq
        absprod = np.asarray(np.einsum(eq, *[np.abs(x.astype(np.float64)) for x in xs]))
        np.testing.assert_array_less(np.abs(y.astype(np.float64) - want), 4e-6 * (absprod + 1) * max(
            1.0, summed_terms(eq, xs)) ** 0.5 + 1e-30, err_msg=eq)
        assert s.kernel_usage() == [KERNEL]
        compared += 1
    assert compared >= 40


@pytest.mark.parametrize("opset", [12, 13, 18, 21])
def test_opsets(opset):
    rng = np.random.default_rng(18)
    s = session(make_model("bij,bjk->bik", 2, "float32", opset=opset), LEVELS[-1])
    xs = data(rng, [(2, 8, 9), (2, 9, 10)], "float32")
    check_float("bij,bjk->bik", xs, run_case(s, "bij,bjk->bik", xs), "float32")
    assert s.kernel_usage() == [KERNEL]


BAD_EQUATIONS = [
    ("i$j->i", 1, "invalid character"),
    ("ij->ii", 1, "appears more than once"),
    ("ij->k", 1, "appears in no input"),
    ("i.j->i", 1, "'...'"),
    ("i......->i", 1, "more than one '...'"),
    ("ij->i->j", 1, "more than one '->'"),
    ("ij-i", 1, "'->'"),
    ("ij,jk->ik", 1, "2 input term"),
    ("ij", 2, "1 input term"),
]


@pytest.mark.parametrize("eq,n,msg", BAD_EQUATIONS)
def test_bad_equations_are_refused_at_creation(eq, n, msg):
    """Refused when the session prepares the node (before any run), naming
    the node and the reason."""
    m = make_model(eq, n, "float32", name="badein")
    with pytest.raises(olc_core.OlcError, match="badein.*Einsum.*invalid equation.*" + re.escape(msg)):
        session(m, LEVELS[-1])


def test_missing_equation_is_refused():
    m = make_model("ij->ji", 1, "float32", name="noeq")
    del m.graph.node[0].attribute[:]
    with pytest.raises(olc_core.OlcError, match=r"noeq.*equation"):
        session(m, LEVELS[-1])


def test_mismatched_shapes_are_refused():
    s = session(make_model("ij,jk->ik", 2, "float32", name="badshape"), LEVELS[-1])
    with pytest.raises(olc_core.OlcError, match=r"badshape.*label 'j' has size 3 in input 0"):
        s.run(None, {"x0": np.ones((2, 3), np.float32), "x1": np.ones((4, 5), np.float32)})
    with pytest.raises(olc_core.OlcError, match=r"badshape.*input 1 has rank 3"):
        s.run(None, {"x0": np.ones((2, 3), np.float32), "x1": np.ones((3, 4, 5), np.float32)})
    d = session(make_model("ii->i", 1, "float32", name="baddiag"), LEVELS[-1])
    with pytest.raises(olc_core.OlcError, match=r"baddiag.*repeated in input 0 with different sizes"):
        d.run(None, {"x0": np.ones((2, 3), np.float32)})
    e = session(make_model("...ij->ij", 1, "float32", name="badell"), LEVELS[-1])
    with pytest.raises(olc_core.OlcError, match=r"badell.*no '...'"):
        e.run(None, {"x0": np.ones((2, 3, 4), np.float32)})
    # A good run after the refusals: nothing was left half-written.
    y = s.run(None, {"x0": np.ones((2, 3), np.float32), "x1": np.ones((3, 5), np.float32)})[0]
    np.testing.assert_array_equal(y, np.full((2, 5), 3.0, np.float32))
