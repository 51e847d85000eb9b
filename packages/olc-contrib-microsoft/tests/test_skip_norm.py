"""SkipLayerNormalization and SkipSimplifiedLayerNormalization: the
optimized kernel at every SIMD level against the naive reference, both
against a float64 numpy formula and onnxruntime, every optional input and
output, the skip shapes the schema allows, and the errors."""

from __future__ import annotations

import numpy as np
import pytest
from cm_testlib import HIDDEN, LEVELS, NP_TYPE, ROWS, TYPES, assert_close, make_model, ort_run, rand, run_checked, to64

import olc_core

SKIP_LN = "SkipLayerNormalization"
SKIP_SLN = "SkipSimplifiedLayerNormalization"
OUTS = ["y", "mean", "inv", "sum"]


def inputs_of(op, t, beta=True, bias=True):
    if op == SKIP_LN:
        return [("x", t), ("skip", t), ("gamma", t), ("beta" if beta else "", t), ("bias" if bias else "", t)]
    return [("x", t), ("skip", t), ("gamma", t), ("bias" if bias else "", t)]


def feeds_of(rng, t, x_shape, skip_shape, H, beta=True, bias=True):
    f = {"x": rand(rng, x_shape, t), "skip": rand(rng, skip_shape, t), "gamma": rand(rng, (H,), t, 0.5, 1.5)}
    if beta:
        f["beta"] = rand(rng, (H,), t, -1, 1)
    if bias:
        f["bias"] = rand(rng, (H,), t, -1, 1)
    return f


def formula(op, f, eps):
    """float64: s = (x + skip) + bias in float32, then the statistics."""
    s = f["x"].astype(np.float32) + f["skip"].astype(np.float32)
    if "bias" in f:
        s = s + f["bias"].astype(np.float32)
    s64 = to64(s)
    if op == SKIP_LN:
        m = s64.mean(-1, keepdims=True)
        inv = 1 / np.sqrt(((s64 - m) ** 2).mean(-1, keepdims=True) + eps)
        y = (s64 - m) * inv * to64(f["gamma"]) + (to64(f["beta"]) if "beta" in f else 0)
    else:
        m = np.zeros(s64.shape[:-1] + (1,))
        inv = 1 / np.sqrt((s64 * s64).mean(-1, keepdims=True) + eps)
        y = s64 * inv * to64(f["gamma"])
    return y, m, inv, s


def check_pair(op, t, f, opt, nai, eps=1e-12):
    """Optimized against naive; naive against the formula; the sums exact."""
    y, m, inv, s = formula(op, f, eps)
    assert_close(nai[0], y, t, "naive y vs float64", tol={"float32": (1e-6, 2e-6), "float16": (5e-4, 5e-4),
                                                         "bfloat16": (4e-3, 4e-3)}[t])
    assert_close(opt[0], nai[0], t, "y")
    if len(opt) > 1:
        assert_close(nai[1], m, "float32", "naive mean", tol=(1e-6, 1e-6))
        assert_close(nai[2], inv, "float32", "naive inv", tol=(1e-6, 2e-6))
        assert opt[1].dtype == np.float32 and opt[2].dtype == np.float32
        assert_close(opt[1], nai[1], "float32", "mean")
        assert_close(opt[2], nai[2], "float32", "inv_std_var")
        # input_skip_bias_sum: the same float32 additions rounded once to T
        assert opt[3].dtype == NP_TYPE[t]
        np.testing.assert_array_equal(to64(opt[3]), to64(nai[3]))
        np.testing.assert_array_equal(to64(nai[3]), to64(s.astype(NP_TYPE[t])))


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("rows", sorted(ROWS))
@pytest.mark.parametrize("H", HIDDEN)
@pytest.mark.parametrize("t", TYPES)
@pytest.mark.parametrize("op", [SKIP_LN, SKIP_SLN])
def test_all_outputs_match_naive(op, t, H, rows, level):
    b, sq = ROWS[rows]
    rng = np.random.default_rng(H * 31 + rows)
    f = feeds_of(rng, t, (b, sq, H), (b, sq, H), H, beta=op == SKIP_LN)
    m = make_model(op, inputs_of(op, t), OUTS)
    opt = run_checked(m, op, f, level)
    nai = run_checked(m, op, f, level, naive=True)
    assert opt[0].shape == (b, sq, H) and opt[1].shape == (b, sq, 1) and opt[3].shape == (b, sq, H)
    check_pair(op, t, f, opt, nai)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("outs", [["y"], ["y", "mean"], ["y", "", "inv"], ["y", "", "", "sum"], OUTS])
@pytest.mark.parametrize("op,beta,bias", [(SKIP_LN, False, False), (SKIP_LN, True, False), (SKIP_LN, False, True),
                                          (SKIP_LN, True, True), (SKIP_SLN, False, False), (SKIP_SLN, False, True)])
def test_optional_inputs_and_outputs(op, beta, bias, outs, level):
    t, H = "float32", 37
    rng = np.random.default_rng(5)
    f = feeds_of(rng, t, (2, 5, H), (2, 5, H), H, beta=beta, bias=bias)
    ins = inputs_of(op, t, beta, bias)
    while ins[-1][0] == "":
        ins.pop()
    m = make_model(op, ins, outs)
    opt = run_checked(m, op, f, level)
    nai = run_checked(m, op, f, level, naive=True)
    assert len(opt) == len([o for o in outs if o])
    full = make_model(op, ins, OUTS)
    ref = run_checked(full, op, f, level, naive=True)
    for name, got_o, got_n in zip([o for o in outs if o], opt, nai):
        k = OUTS.index(name)
        assert_close(got_o, ref[k], t if k in (0, 3) else "float32", name)
        np.testing.assert_array_equal(got_n, ref[k])
    y, *_ = formula(op, f, 1e-12)
    assert_close(opt[0], y, t, "y vs float64")


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("x_shape,skip_shape", [((2, 3, 9), (1, 3, 9)), ((2, 3, 9), (3, 9)), ((6, 9), (6, 9)),
                                                ((4, 5, 20), (1, 5, 20))])
@pytest.mark.parametrize("op", [SKIP_LN, SKIP_SLN])
def test_broadcast_skip(op, x_shape, skip_shape, level):
    t, H = "float32", x_shape[-1]
    rng = np.random.default_rng(9)
    f = feeds_of(rng, t, x_shape, skip_shape, H, beta=op == SKIP_LN)
    m = make_model(op, inputs_of(op, t), OUTS)
    opt = run_checked(m, op, f, level)
    nai = run_checked(m, op, f, level, naive=True)
    full = dict(f, skip=np.broadcast_to(f["skip"], x_shape).copy())
    check_pair(op, t, full, opt, nai)


@pytest.mark.parametrize("rows", sorted(ROWS))
@pytest.mark.parametrize("H", HIDDEN)
@pytest.mark.parametrize("t", ["float32", "float16"])
@pytest.mark.parametrize("op", [SKIP_LN, SKIP_SLN])
def test_against_onnxruntime(op, t, H, rows):
    b, sq = ROWS[rows]
    rng = np.random.default_rng(H + rows)
    f = feeds_of(rng, t, (b, sq, H), (b, sq, H), H, beta=op == SKIP_LN)
    m = make_model(op, inputs_of(op, t), OUTS)
    ref = ort_run(m, f)
    opt = run_checked(m, op, f, LEVELS[-1])
    # onnxruntime computes the variance as E[s^2] - mean^2 in float32; H = 1
    # rows have no spread (y = beta), onnxruntime's rounding may leave one.
    tol = {"float32": (2e-5, 2e-5), "float16": (2e-3, 2e-3)}[t]
    assert_close(opt[0], ref[0], t, "y vs onnxruntime", tol=tol)
    assert_close(opt[2], ref[2], "float32", "inv vs onnxruntime", tol=(2e-5, 2e-5))
    np.testing.assert_array_equal(to64(opt[3]), to64(ref[3]))
    if op == SKIP_LN:
        assert_close(opt[1], ref[1], "float32", "mean vs onnxruntime", tol=(1e-6, 1e-5))


def test_epsilon_attribute():
    op, t, H = SKIP_LN, "float32", 16
    rng = np.random.default_rng(2)
    f = feeds_of(rng, t, (1, 2, H), (1, 2, H), H)
    f["x"] = np.full((1, 2, H), 2.0, np.float32) + np.arange(H, dtype=np.float32) * 1e-3
    f["skip"] = np.zeros((1, 2, H), np.float32)
    for eps in (1e-12, 1e-5, 0.5):
        m = make_model(op, inputs_of(op, t), OUTS, {"epsilon": eps})
        opt = run_checked(m, op, f, LEVELS[-1])
        y, _, inv, _ = formula(op, f, np.float32(eps))
        assert_close(opt[0], y, t, f"eps {eps}")
        assert_close(opt[2], inv, "float32", f"inv eps {eps}")
        assert_close(opt[0], ort_run(m, f)[0], t, "vs onnxruntime", tol=(2e-5, 2e-5))


def _session(op, t="float32", outs=("y",)):
    return olc_core.Session(make_model(op, inputs_of(op, t), list(outs)), strict=True)


SHAPE_ERRORS = [
    ("skip", (2, 4, 8), r"skip has shape \[2, 4, 8\]; for input \[2, 3, 8\] it must be"),
    ("skip", (3, 7), r"skip has shape \[3, 7\]"),
    ("skip", (2, 3, 1), r"skip has shape \[2, 3, 1\]"),
    ("gamma", (7,), r"gamma has shape \[7\], expected \[8\]"),
    ("gamma", (1, 8), r"gamma has shape \[1, 8\], expected \[8\]"),
    ("bias", (9,), r"bias has shape \[9\], expected \[8\]"),
    ("beta", (4,), r"beta has shape \[4\], expected \[8\]"),
    ("x", (24,), r"input must have rank 3"),
]


@pytest.mark.parametrize("naive", [False, True])
@pytest.mark.parametrize("op,what,shape,pattern", [(op, *e) for op in (SKIP_LN, SKIP_SLN) for e in SHAPE_ERRORS
                                                   if op == SKIP_LN or e[0] != "beta"])
def test_shape_errors_name_the_node(op, what, shape, pattern, naive):
    rng = np.random.default_rng(0)
    f = feeds_of(rng, "float32", (2, 3, 8), (2, 3, 8), 8, beta=op == SKIP_LN)
    f[what] = rand(rng, shape, "float32")
    m = make_model(op, inputs_of(op, "float32"), OUTS)
    s = olc_core.Session(m, strict=True, naive="olc-contrib-microsoft" if naive else False)
    with pytest.raises(olc_core.OlcError, match=r"node 'n0' \(Skip\w*LayerNormalization\): " + pattern):
        s.run(None, f)


@pytest.mark.parametrize("op", [SKIP_LN, SKIP_SLN])
def test_type_errors(op):
    ins = inputs_of(op, "float32")
    ins[2] = ("gamma", "float16")
    with pytest.raises(olc_core.NoKernelError, match=r"node 'n0'.*different types \(float32 and float16\)"):
        olc_core.Session(make_model(op, ins, ["y"]), strict=True)
    s = _session(op)
    f = {"x": np.zeros((1, 2, 4), np.float64), "skip": np.zeros((1, 2, 4), np.float32),
         "gamma": np.ones(4, np.float32)}
    if op == SKIP_LN:
        f["beta"] = np.zeros(4, np.float32)
    f["bias"] = np.zeros(4, np.float32)
    with pytest.raises(olc_core.OlcError, match=r"feed 'x' \(consumed by node 'n0'.*has dtype float64"):
        s.run(None, f)


def test_bad_attributes():
    m = make_model(SKIP_LN, inputs_of(SKIP_LN, "float32"), ["y"], {"epsilon": -1.0})
    with pytest.raises(olc_core.OlcError, match=r"node 'n0'.*epsilon.*>= 0"):
        olc_core.Session(m, strict=True)
    m = make_model(SKIP_LN, inputs_of(SKIP_LN, "float32"), ["y"], {"axis": 1})
    with pytest.raises(olc_core.OlcError, match=r"node 'n0'.*unknown attribute 'axis'"):
        olc_core.Session(m, strict=True)


@pytest.mark.parametrize("threads", [2, 3])
@pytest.mark.parametrize("op", [SKIP_LN, SKIP_SLN])
def test_threads(op, threads):
    t, H = "float32", 768
    rng = np.random.default_rng(3)
    f = feeds_of(rng, t, (4, 64, H), (1, 64, H), H, beta=op == SKIP_LN)
    m = make_model(op, inputs_of(op, t), OUTS)
    one = run_checked(m, op, f, LEVELS[-1])
    many = run_checked(m, op, f, LEVELS[-1], threads=threads)
    for a, b in zip(one, many):
        np.testing.assert_array_equal(a, b)
