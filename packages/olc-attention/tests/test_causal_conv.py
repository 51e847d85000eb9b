"""CausalConvWithState (ai.onnx 27): the naive kernel against onnx.reference
and onnxruntime (which runs the op's function body), every SIMD level of the
optimized kernel against the naive one, over batch 1 and 3, channel counts
that fill no vector, lengths 0 / 1 / 7 / 64 / 129 (the one-token decode and
prefill), kernel sizes 1 to 7, bias, past state, SiLU and its Swish alias;
16-bit types within the manifest's tolerance; inputs against guard pages;
bad input."""

from __future__ import annotations

import numpy as np
import pytest
from at_testlib import LEVELS, NP_TYPE, assert_close, make_model, ort_run, reference_run, run_checked, session

import olc_core
from olc_core.testing import guarded

NAME = "CausalConvWithState"
# (batch, channels, length, kernel size)
SHAPES = [(1, 1, 1, 4), (3, 7, 1, 4), (1, 64, 7, 4), (3, 130, 64, 4), (1, 33, 129, 7), (3, 5, 7, 1), (1, 17, 3, 2),
          (2, 1024, 1, 4)]


def build(t, *, bias=True, past=True, activation=None):
    names = [("x", t), ("w", t), ("b", t) if bias else ("", t), ("p", t) if past else ("", t)]
    while names[-1][0] == "":
        names.pop()
    return make_model(NAME, names, ["y", "present"], {"activation": activation} if activation else None, opset=27)


def feeds(rng, t, B, C, L, K, *, bias=True, past=True):
    f = {"x": rng.uniform(-2, 2, (B, C, L)), "w": rng.uniform(-1, 1, (C, 1, K))}
    if bias:
        f["b"] = rng.uniform(-1, 1, (C,))
    if past:
        f["p"] = rng.uniform(-2, 2, (B, C, K - 1))
    return {n: a.astype(NP_TYPE[t]) for n, a in f.items()}


def with_shapes(m, f):
    """The model with its inputs' shapes declared (onnxruntime builds the
    op's context-dependent function body only from known shapes)."""
    m2 = type(m)()
    m2.CopyFrom(m)
    for vi in m2.graph.input:
        vi.type.tensor_type.shape.Clear()
        for d in f[vi.name].shape:
            vi.type.tensor_type.shape.dim.add().dim_value = d
    return m2


def check_levels(m, f, t, ref=None):
    ref = ref or run_checked(m, NAME, f, naive=True)
    for level in LEVELS:
        got = run_checked(m, NAME, f, level=level)
        assert_close(got[0], ref[0], t, f"{level} output")
        np.testing.assert_array_equal(got[1], ref[1])  # the state is moved, not computed
    return ref


@pytest.mark.parametrize("activation", [None, "silu"])
@pytest.mark.parametrize("bias,past", [(True, True), (False, False), (True, False), (False, True)])
@pytest.mark.parametrize("shape", SHAPES)
def test_float32(shape, bias, past, activation):
    B, C, L, K = shape
    rng = np.random.default_rng(B * 1000 + C + L * 7 + K)
    m = build("float32", bias=bias, past=past, activation=activation)
    f = feeds(rng, "float32", B, C, L, K, bias=bias, past=past)
    naive = check_levels(m, f, "float32")
    ref = reference_run(m, f)
    assert_close(naive[0], ref[0], "float32", "naive vs onnx.reference", tol=(1e-6, 1e-6))
    np.testing.assert_array_equal(naive[1], ref[1])
    ort = ort_run(with_shapes(m, f), f)
    assert_close(naive[0], ort[0], "float32", "naive vs onnxruntime", tol=(1e-6, 1e-6))
    np.testing.assert_array_equal(naive[1], ort[1])


@pytest.mark.parametrize("t", ["float16", "bfloat16"])
@pytest.mark.parametrize("shape", [SHAPES[1], SHAPES[3], SHAPES[4]])
def test_16bit(shape, t):
    B, C, L, K = shape
    rng = np.random.default_rng(C + L)
    m = build(t, activation="swish")
    f = feeds(rng, t, B, C, L, K)
    naive = check_levels(m, f, t)
    assert naive[0].dtype == NP_TYPE[t]
    ref = reference_run(m, f)
    assert_close(naive[0], ref[0], t, "naive vs onnx.reference")
    np.testing.assert_array_equal(naive[1], ref[1])


def test_silu_edges():
    """SiLU at the ends of the range: x * sigmoid(x) is -0 far below zero,
    x far above; infinities and NaN as ONNX writes it (x * (1 / (1 + e^-x)),
    so -inf gives NaN)."""
    x = np.array([[[-1e4, -100.0, -88.5, -20.0, -1e-30, 0.0, 1e-30, 20.0, 88.5, 100.0, 1e4, np.inf, -np.inf,
                    np.nan, 3.0, -3.0, 0.5]]], np.float32)
    w = np.ones((1, 1, 1), np.float32)
    m = build("float32", bias=False, past=False, activation="silu")
    f = {"x": x, "w": w}
    with np.errstate(all="ignore"):
        ref = reference_run(m, f)
    naive = check_levels(m, f, "float32")
    assert_close(naive[0], ref[0], "float32", "naive vs onnx.reference", tol=(1e-7, 1e-6))


@pytest.mark.parametrize("at", ["end", "start"])
@pytest.mark.parametrize("t", ["float32", "float16"])
def test_guarded_inputs(t, at):
    rng = np.random.default_rng(6)
    for B, C, L, K in ((2, 19, 1, 4), (1, 5, 37, 3), (1, 3, 2, 5)):
        m = build(t, activation="silu")
        f = feeds(rng, t, B, C, L, K)
        g = {n: guarded(a, at=at) for n, a in f.items()}
        ref = run_checked(m, NAME, f, naive=True)
        for level in LEVELS:
            plain = run_checked(m, NAME, f, level=level)
            got = run_checked(m, NAME, g, level=level)
            for a, b in zip(got, plain):
                np.testing.assert_array_equal(a, b)
            assert_close(got[0], ref[0], t, f"{level} output")


@pytest.mark.parametrize("level", LEVELS)
def test_two_threads(level):
    rng = np.random.default_rng(7)
    m = build("float32", activation="silu")
    for B, C, L, K in ((1, 4096, 1, 4), (2, 96, 300, 4)):
        f = feeds(rng, "float32", B, C, L, K)
        for a, b in zip(run_checked(m, NAME, f, level=level, threads=1), run_checked(m, NAME, f, level=level, threads=2)):
            np.testing.assert_array_equal(a, b)


def test_decode_steps_continue_the_prefill():
    """Prefill of 9 positions then 3 one-position decode steps, each feeding
    the previous present_state, equals one run over all 12 positions."""
    rng = np.random.default_rng(8)
    m = build("float32", activation="silu")
    f = feeds(rng, "float32", 2, 40, 12, 4)
    whole = run_checked(m, NAME, f)
    y, state = run_checked(m, NAME, dict(f, x=f["x"][:, :, :9]))
    ys = [y]
    for t in range(9, 12):
        y, state = run_checked(m, NAME, dict(f, x=f["x"][:, :, t:t + 1], p=state))
        ys.append(y)
    np.testing.assert_allclose(np.concatenate(ys, axis=2), whole[0], rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(state, whole[1])


@pytest.mark.parametrize("unnamed", [0, 1])
def test_an_unnamed_output_is_computed_safely(unnamed):
    rng = np.random.default_rng(11)
    f = feeds(rng, "float32", 2, 9, 6, 4)
    want = run_checked(build("float32", activation="silu"), NAME, f, naive=True)
    m = build("float32", activation="silu")
    m.graph.node[0].output[unnamed] = ""
    kept = m.graph.output[1 - unnamed]
    del m.graph.output[:]
    m.graph.output.append(kept)
    for naive in (False, True):
        (out,) = run_checked(m, NAME, f, naive=naive)
        assert_close(out, want[1 - unnamed], "float32", "the named output")


def test_empty():
    rng = np.random.default_rng(9)
    m = build("float32", activation="silu")
    for B, C, L, K in ((2, 3, 0, 4), (0, 3, 5, 4), (2, 0, 5, 4), (1, 2, 2, 1)):
        f = feeds(rng, "float32", B, C, L, K)
        for naive in (False, True):
            y, present = run_checked(m, NAME, f, naive=naive)
            assert y.shape == (B, C, L) and present.shape == (B, C, K - 1)
            if L == 0:
                np.testing.assert_array_equal(present, f["p"])


def expect(m, f, *words):
    for naive in (False, True):
        with pytest.raises(olc_core.OlcError) as e:
            session(m, naive=naive).run(None, f)
        msg = str(e.value)
        assert "n0" in msg and NAME in msg, msg
        for w in words:
            assert w in msg, msg


def test_errors():
    rng = np.random.default_rng(10)
    m = build("float32")
    good = feeds(rng, "float32", 2, 6, 5, 4)
    # a kernel longer than the carried state allows
    expect(m, dict(good, w=rng.uniform(-1, 1, (6, 1, 5)).astype(np.float32)), "past_state", "[2, 6, 3]",
           "[2, 6, 4]")
    expect(m, dict(good, p=good["p"][:, :, :2]), "past_state", "kernel of size 4 carries 3")
    expect(m, dict(good, w=good["w"][:5]), "weight", "[6, 1,")
    expect(m, dict(good, w=good["w"].reshape(6, 4, 1)), "weight")
    expect(m, dict(good, w=good["w"][:, :, :0]), "weight", ">= 1")
    expect(m, dict(good, b=good["b"][:4]), "bias", "[6]")
    expect(m, dict(good, x=good["x"][0]), "3-D")
    for naive in (False, True):
        y, p = session(m, naive=naive).run(None, good)
        assert y.shape == (2, 6, 5) and p.shape == (2, 6, 3)
    bad = make_model(NAME, [("x", "float32"), ("w", "float32")], ["y", "present"], {"activation": "relu"}, opset=27)
    with pytest.raises(olc_core.OlcError) as e:
        olc_core.Session(bad, strict=True)
    assert "n0" in str(e.value) and "activation" in str(e.value) and "relu" in str(e.value)
