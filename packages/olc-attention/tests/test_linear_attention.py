"""LinearAttention, ai.onnx (27) and com.microsoft: the naive kernel against
onnx.reference (ai.onnx) and onnxruntime (com.microsoft, float32), every SIMD
level of the optimized kernel against the naive one, over the four update
rules, per-head and per-key decay, per-head and scalar beta, MHA / GQA / MQA
(and onnxruntime's inverse GQA and shared key heads), batch 1 and 3, head
sizes 32 / 64 / 128, 1 / 7 / 64 / 129 tokens, with and without a past state;
16-bit types within the manifest's tolerance; inputs against guard pages;
state_window against onnxruntime run on each prefix; bad input."""

from __future__ import annotations

import numpy as np
import pytest
from at_testlib import LEVELS, MS, NP_TYPE, assert_close, make_model, ort_run, reference_run, run_checked, session

import olc_core
from olc_core.testing import guarded

RULES = ("linear", "gated", "delta", "gated_delta")
# (batch, tokens, q heads, kv heads, dk, dv)
SHAPES = [
    (1, 1, 2, 2, 32, 32),
    (3, 7, 4, 2, 64, 64),
    (1, 64, 2, 1, 128, 128),
    (3, 129, 2, 2, 32, 64),
    (1, 7, 10, 2, 32, 48),  # five query heads per kv head; 48 columns: a partial AVX-512 slab
]
F32_TOL = (2e-5, 2e-5)


def build(t, rule, hq, hkv, *, past=True, decay="head", beta="head", st=None, domain="", attrs=None):
    """One LinearAttention node; decay / beta: "head", "key" / "one", or None
    for the rule's default (absent when the rule does not read it)."""
    gated, delta = "gated" in rule, "delta" in rule
    names = [("q", t), ("k", t), ("v", t), ("past", st or t) if past else ("", t),
             ("decay", t) if gated and decay else ("", t), ("beta", t) if delta and beta else ("", t)]
    while names[-1][0] == "":
        names.pop()
    a = {"q_num_heads": hq, "kv_num_heads": hkv, "update_rule": rule, **(attrs or {})}
    return make_model("LinearAttention", names, ["y", "present"], a, domain=domain, opset=27)


def feeds(rng, t, rule, B, T, hq, hkv, dk, dv, *, past=True, decay="head", beta="head", st=None, hk=None,
          window=0):
    hk = hk or hkv
    f = {"q": rng.uniform(-1, 1, (B, T, hq * dk)), "v": rng.uniform(-1, 1, (B, T, hkv * dv))}
    k = rng.uniform(-1, 1, (B, T, hk, dk))
    if "delta" in rule:  # the delta rules expect L2-normalized keys
        k /= np.maximum(np.linalg.norm(k, axis=-1, keepdims=True), 1e-6)
    else:
        k /= np.sqrt(dk)
    f["k"] = k.reshape(B, T, hk * dk)
    if past:
        f["past"] = rng.uniform(-0.5, 0.5, ((window,) if window else ()) + (B, hkv, dk, dv))
    if "gated" in rule:
        f["decay"] = rng.uniform(-0.7, 0.0, (B, T, hkv * dk if decay == "key" else hkv))
    if "delta" in rule:
        f["beta"] = rng.uniform(0.0, 1.0, (B, T, 1 if beta == "one" else hkv))
    return {n: a.astype(NP_TYPE[(st or t) if n == "past" else t]) for n, a in f.items()}


def kinds(i):
    """The decay and beta forms a shape of the table is tested with."""
    return ("key" if i % 2 == 0 else "head"), ("one" if i % 3 == 0 else "head")


def check_levels(m, f, name, t, st=None, naive_out=None):
    ref = naive_out or run_checked(m, name, f, naive=True)
    for level in LEVELS:
        got = run_checked(m, name, f, level=level)
        assert_close(got[0], ref[0], t, f"{level} output")
        assert_close(got[1], ref[1], st or t, f"{level} present_state")
    return ref


@pytest.mark.parametrize("past", [False, True])
@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("shape", range(len(SHAPES)))
def test_onnx_float32(shape, rule, past):
    B, T, hq, hkv, dk, dv = SHAPES[shape]
    decay, beta = kinds(shape)
    rng = np.random.default_rng(shape * 97 + RULES.index(rule) * 7 + past)
    m = build("float32", rule, hq, hkv, past=past, decay=decay, beta=beta)
    f = feeds(rng, "float32", rule, B, T, hq, hkv, dk, dv, past=past, decay=decay, beta=beta)
    naive = run_checked(m, "LinearAttention", f, naive=True)
    ref = reference_run(m, f)
    assert_close(naive[0], ref[0], "float32", "naive vs onnx.reference, output", tol=F32_TOL)
    assert_close(naive[1], ref[1], "float32", "naive vs onnx.reference, present_state", tol=F32_TOL)
    check_levels(m, f, "LinearAttention", "float32", naive_out=naive)


@pytest.mark.parametrize("t,st", [("float16", None), ("bfloat16", None), ("float16", "float32"),
                                  ("bfloat16", "float32"), ("float32", "bfloat16")])
@pytest.mark.parametrize("rule", ["gated", "gated_delta"])
@pytest.mark.parametrize("shape", [0, 1, 3])
def test_onnx_16bit(shape, rule, t, st):
    """16-bit activations and/or states: float32 state math, one rounding on
    the way out; onnx.reference (float32 inside) within the type's tolerance."""
    B, T, hq, hkv, dk, dv = SHAPES[shape]
    decay, beta = kinds(shape)
    rng = np.random.default_rng(shape + 11)
    m = build(t, rule, hq, hkv, decay=decay, beta=beta, st=st)
    f = feeds(rng, t, rule, B, T, hq, hkv, dk, dv, decay=decay, beta=beta, st=st)
    naive = check_levels(m, f, "LinearAttention", t, st)
    ref = reference_run(m, f)
    assert naive[0].dtype == NP_TYPE[t] and naive[1].dtype == NP_TYPE[st or t]
    assert_close(naive[0], ref[0], t, "naive vs onnx.reference, output")
    assert_close(naive[1], ref[1], st or t, "naive vs onnx.reference, present_state")


@pytest.mark.parametrize("level", LEVELS)
def test_threads_and_splits_agree_bit_for_bit(level):
    """Each state column is computed the same way whatever the work split:
    two threads (which cut the columns of few heads into ranges) give the
    one-thread result exactly, decode and prefill."""
    rng = np.random.default_rng(5)
    for B, T in ((1, 1), (1, 40)):
        m = build("float32", "gated_delta", 4, 2, decay="key")
        f = feeds(rng, "float32", "gated_delta", B, T, 4, 2, 64, 96, decay="key")
        one = run_checked(m, "LinearAttention", f, level=level, threads=1)
        two = run_checked(m, "LinearAttention", f, level=level, threads=2)
        for a, b in zip(one, two):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("rule,decay", [("gated_delta", "head"), ("gated", "key"), ("linear", None)])
def test_one_reader_per_state(rule, decay, threads):
    """One query head per kv head and enough heads: the wide slabs (eight
    vectors on AVX-512), in place (dv 128, 256) and in the padded copy (dv
    200; a bfloat16 state)."""
    rng = np.random.default_rng(12)
    for dv, st in ((128, None), (256, None), (200, None), (128, "bfloat16")):
        m = build("float32", rule, 4, 4, decay=decay, st=st)
        f = feeds(rng, "float32", rule, 2, 9, 4, 4, 32, dv, decay=decay, st=st)
        ref = run_checked(m, "LinearAttention", f, naive=True)
        for level in LEVELS:
            got = run_checked(m, "LinearAttention", f, level=level, threads=threads)
            assert_close(got[0], ref[0], "float32", f"{level} output")
            assert_close(got[1], ref[1], st or "float32", f"{level} present_state")


@pytest.mark.parametrize("at", ["end", "start"])
@pytest.mark.parametrize("t", ["float32", "bfloat16"])
def test_guarded_inputs(t, at):
    """Head sizes that fill no vector (dk 5, dv 19 and 33): every input
    against an inaccessible page, at every level, equal to the unguarded run
    and close to the naive kernel."""
    rng = np.random.default_rng(9)
    for dv in (19, 33):
        m = build(t, "gated_delta", 3, 1, decay="key", beta="one")
        f = feeds(rng, t, "gated_delta", 2, 3, 3, 1, 5, dv, decay="key", beta="one")
        g = {n: guarded(a, at=at) for n, a in f.items()}
        ref = run_checked(m, "LinearAttention", f, naive=True)
        for level in LEVELS:
            plain = run_checked(m, "LinearAttention", f, level=level)
            got = run_checked(m, "LinearAttention", g, level=level)
            for a, b in zip(got, plain):
                np.testing.assert_array_equal(a, b)
            assert_close(got[0], ref[0], t, f"{level} output")
            assert_close(got[1], ref[1], t, f"{level} present_state")


def test_nan_and_infinities_stay_in_their_columns():
    """A NaN value poisons its state column from its token on, a decay of
    -inf clears the state: where NaN lands matches the naive kernel and
    onnx.reference."""
    rng = np.random.default_rng(2)
    m = build("float32", "gated_delta", 2, 1, decay="head")
    f = feeds(rng, "float32", "gated_delta", 1, 6, 2, 1, 32, 40, decay="head")
    f["v"][0, 2, 7] = np.nan
    f["decay"][0, 4, 0] = -np.inf
    ref = reference_run(m, f)
    assert np.isnan(ref[0]).any() and not np.isnan(ref[0]).all()
    naive = check_levels(m, f, "LinearAttention", "float32")
    assert_close(naive[0], ref[0], "float32", "naive vs onnx.reference", tol=F32_TOL)


@pytest.mark.parametrize("rule", ["gated", "gated_delta"])
@pytest.mark.parametrize("lo,hi,T", [(-40.0, -20.0, 20), (0.2, 0.5, 129)])
def test_extreme_per_head_decays(lo, hi, T, rule):
    """Per-head decays are folded lazily into one factor per state; a factor
    that leaves its range (strong decay, or growth) is folded back into the
    state: the results stay those of the definition."""
    rng = np.random.default_rng(int(abs(hi) * 10) + T)
    m = build("float32", rule, 2, 2, decay="head")
    f = feeds(rng, "float32", rule, 1, T, 2, 2, 32, 64, decay="head")
    f["decay"] = rng.uniform(lo, hi, f["decay"].shape).astype(np.float32)
    naive = check_levels(m, f, "LinearAttention", "float32")
    ref = reference_run(m, f)
    assert np.isfinite(naive[0]).all() and np.abs(naive[1]).max() > (1e15 if hi > 0 else 0)
    assert_close(naive[0], ref[0], "float32", "naive vs onnx.reference, output", tol=(1e-5, 1e-4))
    assert_close(naive[1], ref[1], "float32", "naive vs onnx.reference, present_state", tol=(1e-5, 1e-4))


def test_empty_tokens_and_batch():
    rng = np.random.default_rng(3)
    m = build("float32", "gated_delta", 2, 2)
    f = feeds(rng, "float32", "gated_delta", 2, 0, 2, 2, 8, 8)
    for naive in (False, True):
        y, present = run_checked(m, "LinearAttention", f, naive=naive)
        assert y.shape == (2, 0, 16)
        np.testing.assert_array_equal(present, f["past"])
    f = feeds(rng, "float32", "gated_delta", 0, 3, 2, 2, 8, 8)
    for naive in (False, True):
        y, present = run_checked(m, "LinearAttention", f, naive=naive)
        assert y.shape == (0, 3, 16) and present.shape == (0, 2, 8, 8)


def test_no_past_and_explicit_scale():
    """Without past_state the state starts at zero (the same as a zero
    past); scale replaces 1 / sqrt(dk)."""
    rng = np.random.default_rng(4)
    f = feeds(rng, "float32", "delta", 1, 5, 2, 2, 16, 16)
    zero = dict(f, past=np.zeros_like(f["past"]))
    with_zero = run_checked(build("float32", "delta", 2, 2), "LinearAttention", zero)
    without = run_checked(build("float32", "delta", 2, 2, past=False), "LinearAttention",
                          {n: a for n, a in f.items() if n != "past"})
    for a, b in zip(with_zero, without):
        np.testing.assert_array_equal(a, b)
    scaled = run_checked(build("float32", "delta", 2, 2, attrs={"scale": 0.5}), "LinearAttention", f)
    plain = run_checked(build("float32", "delta", 2, 2), "LinearAttention", f)
    np.testing.assert_allclose(scaled[0], plain[0] * (0.5 * 4.0), rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(scaled[1], plain[1])


@pytest.mark.parametrize("domain", ["", MS])
@pytest.mark.parametrize("unnamed", [0, 1])
def test_an_unnamed_output_is_computed_safely(unnamed, domain):
    """A node may leave either output unnamed; the other is still right."""
    rng = np.random.default_rng(13)
    full = build("float32", "gated_delta", 2, 2, domain=domain)
    f = feeds(rng, "float32", "gated_delta", 1, 5, 2, 2, 16, 16)
    want = run_checked(full, NAME_OF[domain], f, naive=True)
    m = build("float32", "gated_delta", 2, 2, domain=domain)
    m.graph.node[0].output[unnamed] = ""
    kept = m.graph.output[1 - unnamed]
    del m.graph.output[:]
    m.graph.output.append(kept)
    for naive in (False, True):
        (out,) = run_checked(m, NAME_OF[domain], f, naive=naive)
        assert_close(out, want[1 - unnamed], "float32", "the named output")


NAME_OF = {"": "LinearAttention", MS: "MicrosoftLinearAttention"}


# ------------------------------------------------------------ com.microsoft

# (q heads, kv heads, key heads)
MS_HEADS = [(4, 2, 2), (1, 1, 1), (2, 4, 4), (2, 4, 2), (4, 4, 1)]


@pytest.mark.parametrize("past", [False, True])
@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("heads", MS_HEADS)
def test_microsoft_against_onnxruntime(heads, rule, past):
    """onnxruntime 1.32's CPU kernel: GQA, inverse GQA (more kv heads than
    query heads: one output per kv head) and key heads shared by several kv
    heads."""
    hq, hkv, hk = heads
    rng = np.random.default_rng(hq * 100 + hkv * 10 + hk + RULES.index(rule) + 5 * past)
    for T, decay, beta in ((1, "head", "head"), (9, "key", "one")):
        m = build("float32", rule, hq, hkv, past=past, decay=decay, beta=beta, domain=MS)
        f = feeds(rng, "float32", rule, 2, T, hq, hkv, 32, 32, past=past, decay=decay, beta=beta, hk=hk)
        ort = ort_run(m, f)
        naive = check_levels(m, f, "MicrosoftLinearAttention", "float32")
        assert naive[0].shape == (2, T, max(hq, hkv) * 32)
        assert_close(naive[0], ort[0], "float32", "naive vs onnxruntime, output", tol=F32_TOL)
        assert_close(naive[1], ort[1], "float32", "naive vs onnxruntime, present_state", tol=F32_TOL)


@pytest.mark.parametrize("decay", ["key", "head"])
@pytest.mark.parametrize("window,T", [(1, 4), (3, 1), (3, 5), (8, 5), (8, 64)])
def test_microsoft_state_window(window, T, decay):
    """state_window: slot j holds the state after token T - W + j (zeros for
    slots before the call's first token, slot W - 1 the final state), and
    only past_state's last slot is read. The oracle: onnxruntime's kernel
    (no window) run on each prefix of the tokens from that slot."""
    rng = np.random.default_rng(window * 10 + T)
    B, hq, hkv, dk, dv = 2, 4, 2, 16, 40
    m = build("float32", "gated_delta", hq, hkv, decay=decay, domain=MS, attrs={"state_window": window})
    f = feeds(rng, "float32", "gated_delta", B, T, hq, hkv, dk, dv, decay=decay, window=window)
    plain = build("float32", "gated_delta", hq, hkv, decay=decay, domain=MS)
    ref = run_checked(m, "MicrosoftLinearAttention", f, naive=True)
    whole = ort_run(plain, dict(f, past=f["past"][-1]))
    assert_close(ref[0], whole[0], "float32", "output", tol=F32_TOL)
    assert ref[1].shape == (window, B, hkv, dk, dv)
    for j in range(window):
        n = T - window + j + 1  # tokens the slot has seen
        if j == window - 1:
            want = whole[1]
        elif n <= 0:
            want = np.zeros((B, hkv, dk, dv), np.float32)
        else:
            pre = {k: (a[:, :n] if k != "past" else a[-1]) for k, a in f.items()}
            want = ort_run(plain, pre)[1]
        assert_close(ref[1][j], want, "float32", f"slot {j}", tol=F32_TOL)
    check_levels(m, f, "MicrosoftLinearAttention", "float32", naive_out=ref)
    # The slots before the last are not read.
    other = dict(f, past=np.concatenate([np.full_like(f["past"][:-1], np.nan), f["past"][-1:]]))
    for a, b in zip(run_checked(m, "MicrosoftLinearAttention", other), run_checked(m, "MicrosoftLinearAttention", f)):
        np.testing.assert_array_equal(a, b)


def test_microsoft_16bit_and_state_type():
    rng = np.random.default_rng(8)
    for t, st in (("float16", None), ("bfloat16", "float32")):
        m = build(t, "gated_delta", 2, 4, st=st, domain=MS)
        f = feeds(rng, t, "gated_delta", 1, 17, 2, 4, 64, 64, st=st, hk=2)
        naive = check_levels(m, f, "MicrosoftLinearAttention", t, st)
        f32 = {n: a.astype(np.float32) for n, a in f.items()}
        ort = ort_run(build("float32", "gated_delta", 2, 4, domain=MS), f32)
        assert_close(naive[0], ort[0], t, "output")
        assert_close(naive[1], ort[1], st or t, "present_state")


# ------------------------------------------------------------------ errors


def expect(model, f, *words, at_run=True):
    """Both kernels refuse with an OlcError naming the node and the reason;
    the session then runs good input."""
    for naive in (False, True):
        with pytest.raises(olc_core.OlcError) as e:
            session(model, naive=naive).run(None, f) if at_run else session(model, naive=naive)
        msg = str(e.value)
        assert "n0" in msg and "LinearAttention" in msg, msg
        for w in words:
            assert w in msg, msg


def test_errors_at_run():
    rng = np.random.default_rng(0)
    m = build("float32", "gated_delta", 4, 2)
    good = feeds(rng, "float32", "gated_delta", 2, 3, 4, 2, 8, 8)
    expect(m, dict(good, past=good["past"][:, :, :, :4]), "past_state", "[2, 2, 8, 4]", "[2, 2, 8, 8]")
    expect(m, dict(good, past=good["past"][0]), "past_state")
    expect(m, dict(good, k=good["k"][:, :, :12]), "key", "kv_num_heads")
    expect(m, dict(good, q=good["q"][:, :, :30]), "q_num_heads")
    expect(m, dict(good, v=good["v"][:, :, :15]), "value", "kv_num_heads")
    expect(m, dict(good, decay=good["decay"][:, :, :1]), "decay", "[2, 3, 1]")
    expect(m, dict(good, beta=np.ones((2, 3, 3), np.float32)), "beta")
    expect(m, dict(good, v=good["v"][:, :2]), "tokens")
    expect(m, dict(good, q=good["q"][0]), "3-D")
    for naive in (False, True):  # the session is still good
        y, _ = session(m, naive=naive).run(None, good)
        assert y.shape == (2, 3, 32)


@pytest.mark.parametrize("attrs,words", [
    ({"q_num_heads": 3, "kv_num_heads": 2}, ["multiple"]),
    ({"q_num_heads": 2, "kv_num_heads": 4}, ["multiple"]),  # inverse GQA is com.microsoft's only
    ({"q_num_heads": 0, "kv_num_heads": 2}, ["positive"]),
    ({"update_rule": "softmax"}, ["update_rule", "softmax"]),
    ({"kv_num_heads": None}, ["required"]),
])
def test_errors_at_construction(attrs, words):
    a = {"q_num_heads": 2, "kv_num_heads": 2, "update_rule": "gated_delta", **attrs}
    a = {k: v for k, v in a.items() if v is not None}
    names = [("q", "float32"), ("k", "float32"), ("v", "float32"), ("", "float32"), ("d", "float32"),
             ("b", "float32")]
    m = make_model("LinearAttention", names, ["y", "present"], a, opset=27)
    for naive in (False, True):
        with pytest.raises(olc_core.OlcError) as e:
            olc_core.Session(m, strict=True, naive="olc-attention" if naive else False)
        for w in ["n0", *words]:
            assert w in str(e.value), str(e.value)


def test_errors_missing_or_extra_gates():
    for rule, names, word in (("gated", [("q", "float32"), ("k", "float32"), ("v", "float32")], "decay"),
                              ("delta", [("q", "float32"), ("k", "float32"), ("v", "float32")], "beta"),
                              ("linear", [("q", "float32"), ("k", "float32"), ("v", "float32"), ("", "float32"),
                                          ("d", "float32")], "no decay")):
        m = make_model("LinearAttention", names, ["y", "present"],
                       {"q_num_heads": 1, "kv_num_heads": 1, "update_rule": rule}, opset=27)
        with pytest.raises(olc_core.OlcError) as e:
            olc_core.Session(m, strict=True)
        assert "n0" in str(e.value) and word in str(e.value), str(e.value)


def test_microsoft_errors():
    rng = np.random.default_rng(1)
    m = build("float32", "gated_delta", 2, 4, domain=MS, attrs={"state_window": 2})
    good = feeds(rng, "float32", "gated_delta", 1, 3, 2, 4, 8, 8, hk=2, window=2)
    expect(m, dict(good, past=good["past"][0]), "past_state", "state_window")
    three = rng.uniform(-1, 1, (1, 3, 24)).astype(np.float32)  # 3 key heads of 8 for 4 kv heads
    expect(m, dict(good, k=three), "key", "divides")
    m = build("float32", "gated", 3, 2, domain=MS)
    with pytest.raises(olc_core.OlcError) as e:
        olc_core.Session(m, strict=True)
    assert "n0" in str(e.value) and "multiple" in str(e.value)
    m = build("float32", "gated", 2, 2, domain=MS, attrs={"state_window": 9})
    with pytest.raises(olc_core.OlcError) as e:
        olc_core.Session(m, strict=True)
    assert "state_window" in str(e.value)
