"""BiasGelu, FastGelu, QuickGelu, Gelu and BiasAdd: the optimized kernel at
every SIMD level against the naive reference, the reference against a
float64 numpy formula, and onnxruntime where it has the kernel."""

from __future__ import annotations

import math

import numpy as np
import pytest
from cm_testlib import HIDDEN, LEVELS, NP_TYPE, ROWS, TYPES, assert_close, make_model, ort_run, rand, run_checked, to64

import olc_core

ERFC = np.vectorize(math.erfc)

# op -> (input names, whether the bias is optional)
SIGNATURES = {
    "BiasGelu": ["x", "bias"],
    "FastGelu": ["x", "bias"],
    "QuickGelu": ["x"],
    "Gelu": ["x"],
    "BiasAdd": ["x", "bias", "skip"],
}
ORT_HAS = {"BiasGelu", "FastGelu", "QuickGelu", "Gelu"}


def formula(op, f, alpha=1.702):
    """float64 of the float32 sum (x + bias) + skip."""
    v = f["x"].astype(np.float32)
    if "bias" in f:
        v = v + f["bias"].astype(np.float32)
    if "skip" in f:
        v = v + f["skip"].astype(np.float32)
    v = to64(v)
    if op in ("BiasGelu", "Gelu"):
        return 0.5 * v * ERFC(-v / math.sqrt(2.0))
    if op == "FastGelu":
        return 0.5 * v * (1 + np.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v**3)))
    if op == "QuickGelu":
        return v / (1 + np.exp(-alpha * v))
    return v


def feeds_of(rng, op, t, shape, names, lo=-6.0, hi=6.0):
    H = shape[-1]
    f = {"x": rand(rng, shape, t, lo, hi)}
    if "bias" in names:
        f["bias"] = rand(rng, (H,), t, -1, 1)
    if "skip" in names:
        f["skip"] = rand(rng, shape, t, -2, 2)
    return f


def model_of(op, t, names, attrs=None):
    return make_model(op, [(n, t) for n in names], ["y"], attrs)


VARIANTS = [("BiasGelu", ["x", "bias"]), ("FastGelu", ["x", "bias"]), ("FastGelu", ["x"]), ("QuickGelu", ["x"]),
            ("Gelu", ["x"]), ("BiasAdd", ["x", "bias", "skip"])]


def check(op, t, f, opt, nai, alpha=1.702):
    ref = formula(op, f, alpha)
    naive_tol = {"float32": (1e-7, 1e-6), "float16": (5e-4, 5e-4), "bfloat16": (4e-3, 4e-3)}[t]
    assert_close(nai, ref, t, "naive vs float64", tol=naive_tol)
    if op == "BiasAdd":
        # float32 additions in the schema's order, rounded once to T: exact
        np.testing.assert_array_equal(to64(opt), to64(nai))
        np.testing.assert_array_equal(to64(nai), to64(formula(op, f).astype(np.float32).astype(NP_TYPE[t])))
    else:
        assert_close(opt, nai, t, "optimized vs naive")


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("rows", sorted(ROWS))
@pytest.mark.parametrize("H", HIDDEN)
@pytest.mark.parametrize("t", TYPES)
@pytest.mark.parametrize("op,names", VARIANTS, ids=["-".join([o] + n[1:]) for o, n in VARIANTS])
def test_matches_naive(op, names, t, H, rows, level):
    b, s = ROWS[rows]
    rng = np.random.default_rng(H * 7 + rows)
    f = feeds_of(rng, op, t, (b, s, H), names)
    m = model_of(op, t, names)
    (opt,) = run_checked(m, op, f, level)
    (nai,) = run_checked(m, op, f, level, naive=True)
    assert opt.dtype == NP_TYPE[t] and opt.shape == (b, s, H)
    check(op, t, f, opt, nai)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("n", [1, 3, 8, 15, 16, 17, 31, 33, 1023, 1025, 5000])
@pytest.mark.parametrize("op", ["Gelu", "FastGelu", "QuickGelu"])
def test_every_tail_length_flat(op, n, level):
    # Without a bias the whole tensor is one span (no row structure).
    rng = np.random.default_rng(n)
    f = {"x": rand(rng, (n,), "float32", -8, 8)}
    m = model_of(op, "float32", ["x"])
    (opt,) = run_checked(m, op, f, level)
    (nai,) = run_checked(m, op, f, level, naive=True)
    check(op, "float32", f, opt, nai)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("op", ["Gelu", "FastGelu", "QuickGelu"])
def test_tails_and_special_values(op, level):
    x = np.array([0.0, -0.0, 1e-30, -1e-30, 1e-3, -1e-3, 3.0, -3.0, 5.5, -5.5, 9.0, -9.0, 12.0, -12.0, 20.0,
                  -20.0, 80.0, -80.0, 1e30, np.inf, np.nan], np.float32)
    f = {"x": x}
    m = model_of(op, "float32", ["x"])
    (opt,) = run_checked(m, op, f, level)
    (nai,) = run_checked(m, op, f, level, naive=True)
    assert np.isnan(opt[-1]) and np.isnan(nai[-1])
    assert opt[-2] == np.inf and nai[-2] == np.inf
    if op == "Gelu":
        # the reference uses erfc: relative accuracy holds far into the tail
        assert_close(opt[:-2], nai[:-2], "float32", "special values", tol=(0.0, 2e-5))
    else:
        # the schema's tanh form rounds to 0 below about -9 where x * sigmoid
        # keeps a tiny value: absolute terms of the moderate range there
        assert_close(opt[:16], nai[:16], "float32", "moderate values")
        assert np.all(np.abs(opt[16:-2]) <= np.maximum(np.abs(x[16:-2]), 1e-30))
    # large positive inputs pass through unchanged
    assert opt[14] == pytest.approx(20.0, rel=1e-6) and opt[16] == 80.0 and opt[18] == np.float32(1e30)


@pytest.mark.parametrize("alpha", [1.702, 1.0, -0.5, 3.25])
@pytest.mark.parametrize("level", LEVELS)
def test_quickgelu_alpha(alpha, level):
    rng = np.random.default_rng(4)
    f = {"x": rand(rng, (3, 100), "float32", -10, 10)}
    m = model_of("QuickGelu", "float32", ["x"], {"alpha": alpha})
    (opt,) = run_checked(m, "QuickGelu", f, level)
    (nai,) = run_checked(m, "QuickGelu", f, level, naive=True)
    check("QuickGelu", "float32", f, opt, nai, alpha)
    assert_close(opt, ort_run(m, f)[0], "float32", "vs onnxruntime", tol=(2e-6, 1e-5))


@pytest.mark.parametrize("rows", sorted(ROWS))
@pytest.mark.parametrize("H", HIDDEN)
@pytest.mark.parametrize("t", ["float32", "float16"])
@pytest.mark.parametrize("op,names", [v for v in VARIANTS if v[0] in ORT_HAS],
                         ids=["-".join([o] + n[1:]) for o, n in VARIANTS if o in ORT_HAS])
def test_against_onnxruntime(op, names, t, H, rows):
    b, s = ROWS[rows]
    rng = np.random.default_rng(H + 3 * rows)
    f = feeds_of(rng, op, t, (b, s, H), names)
    m = model_of(op, t, names)
    (ref,) = ort_run(m, f)
    (opt,) = run_checked(m, op, f, LEVELS[-1])
    tol = {"float32": (2e-6, 1e-5), "float16": (1e-3, 2e-3)}[t]
    assert_close(opt, ref, t, "vs onnxruntime", tol=tol)


@pytest.mark.parametrize("threads", [2, 3])
@pytest.mark.parametrize("op,names", VARIANTS, ids=["-".join([o] + n[1:]) for o, n in VARIANTS])
def test_threads(op, names, threads):
    rng = np.random.default_rng(8)
    f = feeds_of(rng, op, "float32", (2, 300, 769), names)
    m = model_of(op, "float32", names)
    (one,) = run_checked(m, op, f, LEVELS[-1])
    (many,) = run_checked(m, op, f, LEVELS[-1], threads=threads)
    np.testing.assert_array_equal(one, many)


ERRORS = [
    ("BiasGelu", ["x", "bias"], "bias", (5,), r"B has shape \[5\], expected \[8\] \(the last dimension of A"),
    ("BiasGelu", ["x", "bias"], "bias", (1, 8), r"B has shape \[1, 8\], expected \[8\]"),
    ("FastGelu", ["x", "bias"], "bias", (9,), r"bias has shape \[9\], expected \[8\]"),
    ("BiasAdd", ["x", "bias", "skip"], "bias", (3,), r"bias has shape \[3\], expected \[8\]"),
    ("BiasAdd", ["x", "bias", "skip"], "skip", (2, 4, 8), r"skip has shape \[2, 4, 8\], expected the shape of X"),
    ("BiasAdd", ["x", "bias", "skip"], "x", (3, 8), r"X must have rank 3"),
]


@pytest.mark.parametrize("naive", [False, True])
@pytest.mark.parametrize("op,names,what,shape,pattern", ERRORS)
def test_shape_errors_name_the_node(op, names, what, shape, pattern, naive):
    rng = np.random.default_rng(0)
    f = feeds_of(rng, op, "float32", (2, 3, 8), names)
    f[what] = rand(rng, shape, "float32")
    s = olc_core.Session(model_of(op, "float32", names), strict=True, naive="olc-contrib-microsoft" if naive else False)
    with pytest.raises(olc_core.OlcError, match=rf"node 'n0' \({op}\): " + pattern):
        s.run(None, f)


@pytest.mark.parametrize("op", sorted(SIGNATURES))
def test_type_errors(op):
    names = SIGNATURES[op]
    ins = [(n, "float32") for n in names]
    if len(ins) > 1:
        ins[1] = (ins[1][0], "bfloat16")
        with pytest.raises(olc_core.NoKernelError, match=r"node 'n0'.*different types \(float32 and bfloat16\)"):
            olc_core.Session(make_model(op, ins, ["y"]), strict=True)
    from onnx import TensorProto, helper
    m = make_model(op, [(n, "float32") for n in names], ["y"])
    m.graph.input[0].CopyFrom(helper.make_tensor_value_info("x", TensorProto.DOUBLE, None))
    if len(names) > 1:
        for k in range(1, len(names)):
            m.graph.input[k].CopyFrom(helper.make_tensor_value_info(names[k], TensorProto.DOUBLE, None))
    with pytest.raises(olc_core.NoKernelError, match=r"input 0 has type float64, kernel accepts float32"):
        olc_core.Session(m, strict=True)


def test_unknown_attribute():
    with pytest.raises(olc_core.OlcError, match=r"node 'n0'.*unknown attribute 'approximate'"):
        olc_core.Session(model_of("Gelu", "float32", ["x"], {"approximate": "tanh"}), strict=True)
