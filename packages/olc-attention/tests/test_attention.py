"""ai.onnx Attention (opsets 23, 24, 25): the optimized kernel at every SIMD
level against the naive kernel, and the naive kernel against onnx.reference
(an independent numpy implementation of the schema), over head sizes 32 to
128, query / key lengths 1 to 129 (and 1000), past lengths 0, 1, 511,
batch 1 and 3, MHA / GQA / MQA, 3-D and 4-D inputs, causal or not, masks
of every rank and kind, softcap, scale, the four qk_matmul_output modes,
nonpad_kv_seqlen and local windows; float16 and bfloat16 within
manifest.TOLERANCE."""

from __future__ import annotations

import numpy as np
import pytest
from at_testlib import LEVELS, NP_TYPE, assert_close, make_model, rand, reference_run, run_checked

NAME = "Attention"


def build(c):
    """The model and feeds of case c (a dict; see CASES)."""
    t = c.get("t", "float32")
    B, Hq, Hkv, Sq, L, P, D = c["B"], c["Hq"], c["Hkv"], c["Sq"], c["L"], c.get("P", 0), c["D"]
    Dv = c.get("Dv", D)
    rank = c.get("rank", 4)
    rng = np.random.default_rng(abs(hash(tuple(sorted((k, str(v)) for k, v in c.items())))) % 2**32)
    amp = c.get("amp", 1.0)
    if rank == 4:
        q, k, v = (B, Hq, Sq, D), (B, Hkv, L, D), (B, Hkv, L, Dv)
    else:
        q, k, v = (B, Sq, Hq * D), (B, L, Hkv * D), (B, L, Hkv * Dv)
    feeds = {"q": rand(rng, q, t, -amp, amp), "k": rand(rng, k, t, -amp, amp), "v": rand(rng, v, t)}
    inputs = [("q", t), ("k", t), ("v", t)]
    T = P + L
    mask = c.get("mask")
    if mask:
        kind, shape = mask
        shape = tuple({"T": T, "Sq": Sq}.get(d, d) if isinstance(d, str) else d for d in shape)
        if kind == "bool":
            m = rng.uniform(0, 1, shape) < 0.7
            m[..., 0] = True
            feeds["mask"] = m
            inputs.append(("mask", "bool"))
        else:
            mt = kind
            feeds["mask"] = rand(rng, shape, mt, -2, 2)
            if c.get("neginf"):
                feeds["mask"][..., 1::3] = -np.inf
            inputs.append(("mask", mt))
    else:
        inputs.append(("", t))
    if P:
        feeds["pk"] = rand(rng, (B, Hkv, P, D), t, -amp, amp)
        feeds["pv"] = rand(rng, (B, Hkv, P, Dv), t)
        inputs += [("pk", t), ("pv", t)]
    else:
        inputs += [("", t), ("", t)]
    if "nonpad" in c:
        feeds["nonpad"] = np.array(c["nonpad"], np.int64)
        inputs.append(("nonpad", "int64"))
    while inputs and inputs[-1][0] == "":
        inputs.pop()
    attrs = dict(c.get("attrs", {}))
    if rank == 3:
        attrs.update(q_num_heads=Hq, kv_num_heads=Hkv)
    outputs = ["y", "pko" if c.get("present") or P else "", "pvo" if c.get("present") or P else ""]
    if c.get("qk") is not None:
        outputs.append("qk")
        attrs["qk_matmul_output_mode"] = c["qk"]
    while outputs[-1] == "":
        outputs.pop()
    model = make_model("Attention", inputs, outputs, attrs, opset=c.get("opset", 24))
    return model, feeds


def _case(**kw):
    return kw


# The shape grid: every head size with every query length, causal and
# not, batch 1 and 3, MHA and GQA, 3-D and 4-D, cross-attention lengths.
SHAPES = []
for i, D in enumerate((32, 64, 80, 96, 128)):
    for j, Sq in enumerate((1, 7, 64, 129)):
        n = i * 4 + j
        L = Sq if n % 3 else {1: 7, 7: 64, 64: 129, 129: 7}[Sq]
        SHAPES.append(_case(B=1 + 2 * (n % 2), Hq=4 if n % 4 else 2, Hkv=1 if n % 4 == 1 else 2, Sq=Sq, L=L, D=D,
                            Dv=D if n % 5 else 48, rank=4 if n % 3 else 3, attrs={"is_causal": n % 2}))
# Past lengths 1 and 511 (decode, short prefill), GQA groups of 3 and MQA.
PAST = [
    _case(B=3, Hq=6, Hkv=2, Sq=1, L=1, P=511, D=64, attrs={"is_causal": 1}),
    _case(B=1, Hq=4, Hkv=1, Sq=7, L=7, P=511, D=128, attrs={"is_causal": 1}),
    _case(B=3, Hq=4, Hkv=4, Sq=7, L=7, P=1, D=32, attrs={"is_causal": 1}, rank=3),
    _case(B=1, Hq=6, Hkv=3, Sq=1, L=1, P=1, D=96),
    _case(B=1, Hq=8, Hkv=2, Sq=64, L=64, P=511, D=80, attrs={"is_causal": 1}),
    _case(B=1, Hq=2, Hkv=2, Sq=1, L=1, P=0, D=64, present=True),
    _case(B=1, Hq=2, Hkv=1, Sq=129, L=129, P=0, D=32, present=True, attrs={"is_causal": 1}),
]
# Long sequences kept cheap: one or two heads.
LONG = [
    _case(B=1, Hq=2, Hkv=1, Sq=1, L=1, P=1000, D=64, attrs={"is_causal": 1}),
    _case(B=1, Hq=1, Hkv=1, Sq=1000, L=1000, D=32, attrs={"is_causal": 1}),
    _case(B=1, Hq=1, Hkv=1, Sq=64, L=1000, D=32),
]
# Options at small shapes (checked against onnx.reference too).
SMALL = {"B": 2, "Hq": 4, "Hkv": 2, "Sq": 5, "L": 9, "D": 16}
OPTIONS = [
    _case(**SMALL, mask=("bool", ("Sq", "T"))),
    _case(**SMALL, mask=("float32", (2, 4, 5, "T")), attrs={"is_causal": 1}),
    _case(**SMALL, mask=("float32", (2, 1, 5, "T"))),
    _case(**SMALL, mask=("float32", (4, 5, 6))),  # rank 3: (heads, q, keys), shorter than the keys
    _case(**SMALL, mask=("bool", (9,))),
    _case(**SMALL, mask=("bool", (1, 1, 1, 9)), attrs={"is_causal": 1}),
    _case(**SMALL, mask=("float32", (5, 9)), neginf=True),
    _case(**SMALL, mask=("float16", (5, 9)), t="float16"),
    _case(**SMALL, attrs={"softcap": 1.5}),
    _case(**SMALL, attrs={"softcap": 0.5, "is_causal": 1}, mask=("float32", (5, 9)), neginf=True),
    _case(**SMALL, attrs={"scale": 0.05}),
    _case(**SMALL, amp=6.0),
    _case(**SMALL, qk=0, mask=("float32", (5, 9))),
    _case(**SMALL, qk=1, attrs={"softcap": 2.0}, mask=("float32", (5, 9))),
    _case(**SMALL, qk=2, attrs={"is_causal": 1}, mask=("bool", (5, 9))),
    _case(**SMALL, qk=3, attrs={"is_causal": 1}, mask=("bool", (5, 9))),
    _case(**SMALL, qk=3, P=4, mask=("float32", (2, 1, 5, 13))),
    _case(B=2, Hq=4, Hkv=2, Sq=1, L=12, D=16, nonpad=[5, 12], attrs={"is_causal": 1}),
    _case(B=3, Hq=2, Hkv=1, Sq=3, L=8, D=16, nonpad=[2, 8, 5], attrs={"is_causal": 1}, mask=("bool", (3, 1, 3, 8))),
    _case(B=2, Hq=2, Hkv=2, Sq=4, L=8, D=16, nonpad=[2, 6], mask=("float32", (2, 2, 4, 6))),
    _case(**SMALL, attrs={"is_causal": 1, "left_window_size": 2}, opset=25),
    _case(**SMALL, attrs={"left_window_size": 1, "right_window_size": 2}, opset=25),
    _case(**SMALL, P=6, attrs={"is_causal": 1, "left_window_size": 3}, opset=25),
    _case(B=2, Hq=2, Hkv=1, Sq=3, L=8, D=16, nonpad=[4, 8], attrs={"is_causal": 1, "left_window_size": 1}, opset=25),
    _case(**SMALL, opset=23, attrs={"is_causal": 1}),
    _case(B=1, Hq=2, Hkv=2, Sq=6, L=4, D=8, attrs={"is_causal": 1}, nonpad=[3]),  # negative offset: empty rows
]
TYPED = [dict(c, t=t) for t in ("float16", "bfloat16") for c in (SHAPES[5], SHAPES[10], PAST[0], OPTIONS[1], LONG[0])]

CASES = ([pytest.param(c, id=f"shape{i}") for i, c in enumerate(SHAPES)]
         + [pytest.param(c, id=f"past{i}") for i, c in enumerate(PAST)]
         + [pytest.param(c, id=f"long{i}") for i, c in enumerate(LONG)]
         + [pytest.param(c, id=f"opt{i}") for i, c in enumerate(OPTIONS)]
         + [pytest.param(c, id=f"typed{i}-{c['t']}") for i, c in enumerate(TYPED)])


@pytest.mark.parametrize("case", CASES)
def test_optimized_matches_naive_at_every_level(case):
    model, feeds = build(case)
    t = case.get("t", "float32")
    naive = run_checked(model, NAME, feeds, naive=True)
    for level in LEVELS:
        for threads in (1, 2) if level == LEVELS[-1] else (1,):
            got = run_checked(model, NAME, feeds, level=level, threads=threads)
            assert len(got) == len(naive)
            for k, (g, n) in enumerate(zip(got, naive)):
                assert g.dtype == NP_TYPE[t]
                assert_close(g, n, t, f"{level} x{threads} output {k}")


# onnx.reference 1.23 takes the query length of a causal mask from the
# mask's own shape, so a mask broadcast over the queries (q dimension 1)
# gets every row the first row's causal frontier there; the schema (and
# this family) apply the frontier per query row.
REF_SKIP = {5}
REF_CASES = [pytest.param(c, id=f"opt{i}") for i, c in enumerate(OPTIONS) if i not in REF_SKIP] + [
    pytest.param(c, id=f"shape{i}") for i, c in enumerate(SHAPES) if c["Sq"] <= 64] + [
    pytest.param(c, id=f"past{i}") for i, c in enumerate(PAST[:4])]


@pytest.mark.parametrize("case", REF_CASES)
def test_naive_matches_onnx_reference(case):
    model, feeds = build(case)
    t = case.get("t", "float32")
    naive = run_checked(model, NAME, feeds, naive=True)
    ref = reference_run(model, feeds)
    tol = {"float32": (1e-5, 1e-5), "float16": (4e-3, 4e-3), "bfloat16": (3e-2, 3e-2)}[t]
    for k, (n, r) in enumerate(zip(naive, ref)):
        if k == 3 and case.get("qk") in (0, 1, 2):
            # Scores: excluded entries are -inf on both sides; compare the rest.
            assert np.array_equal(np.isneginf(n), np.isneginf(r))
            fin = np.isfinite(r)
            assert_close(n[fin], r[fin], t, "scores", tol=tol)
            continue
        assert_close(n, r, t, f"output {k}", tol=tol)


def test_fully_masked_rows_are_zero():
    # Row 0 sees no key (all false), row 1 sees one: Y row 0 and its probabilities are 0.
    c = _case(B=1, Hq=1, Hkv=1, Sq=2, L=3, D=8, qk=3, mask=("bool", (2, 3)))
    model, feeds = build(c)
    feeds["mask"] = np.array([[False, False, False], [True, False, False]])
    for level in LEVELS:
        y, qk = run_checked(model, NAME, feeds, level=level)
        assert np.all(y[0, 0, 0] == 0) and np.all(qk[0, 0, 0] == 0)
        np.testing.assert_allclose(y[0, 0, 1], feeds["v"][0, 0, 0], rtol=1e-6)
        np.testing.assert_allclose(qk[0, 0, 1], [1, 0, 0])


def test_nan_in_a_key_poisons_only_the_rows_that_see_it():
    c = _case(B=1, Hq=1, Hkv=1, Sq=4, L=4, D=8, attrs={"is_causal": 1})
    model, feeds = build(c)
    feeds["k"][0, 0, 2, 3] = np.nan
    for level in LEVELS:
        (y,) = run_checked(model, NAME, feeds, level=level)
        assert np.all(np.isfinite(y[0, 0, :2])) and np.all(np.isnan(y[0, 0, 2:]))
