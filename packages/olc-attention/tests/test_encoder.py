"""com.microsoft MultiHeadAttention and Attention (BERT): against
onnxruntime's CPU kernels for the forms they have, against a numpy
float64 formula written here for the packed layouts onnxruntime's CPU
lacks, and every SIMD level and the 16-bit types against the naive kernel.
Masks add mask_filter_value (-10000) to the masked keys, as onnxruntime's."""

from __future__ import annotations

import numpy as np
import pytest
from at_testlib import LEVELS, MS, NP_TYPE, assert_close, make_model, ort_run, run_checked


def heads(x, n):
    b, s, w = x.shape
    return x.reshape(b, s, n, w // n).transpose(0, 2, 1, 3)


def merge(y):
    b, n, s, h = y.shape
    return y.transpose(0, 2, 1, 3).reshape(b, s, n * h)


def attend(q, k, v, scale, add=None, causal_off=None):
    """float64: q (B, N, S, H), k (B, N, T, H), v (B, N, T, Hv)."""
    s = np.einsum("bnsh,bnth->bnst", q, k) * scale
    if add is not None:
        s = s + add
    if causal_off is not None:
        i, j = np.arange(s.shape[-2])[:, None], np.arange(s.shape[-1])[None]
        s = np.where(j > i + causal_off, -np.inf, s)
    e = np.exp(s - s.max(-1, keepdims=True))
    return np.einsum("bnst,bnth->bnsh", e / e.sum(-1, keepdims=True), v)


MHA_INPUTS = ("query", "key", "value", "bias", "key_padding_mask", "attention_bias", "past_key", "past_value")


def mha_build(c):
    t = c.get("t", "float32")
    B, S, L, N, H, Hv, P = c["B"], c["S"], c.get("L", c["S"]), c["N"], c["H"], c.get("Hv", c["H"]), c.get("P", 0)
    rng = np.random.default_rng(sum(map(ord, str(c))))
    q, k, v = rng.uniform(-1, 1, (B, S, N * H)), rng.uniform(-1, 1, (B, L, N * H)), rng.uniform(-1, 1, (B, L, N * Hv))
    f = {}
    layout = c.get("layout", "separate")
    if layout == "packed_qkv":
        f["query"] = np.stack([x.reshape(B, S, N, H) for x in (q, k, v)], 3)
    elif layout == "packed_kv":
        f["query"] = q
        f["key"] = np.stack([k.reshape(B, L, N, H), v.reshape(B, L, N, Hv)], 3)
    elif layout == "bnsh":
        f.update(query=q, key=heads(k, N).copy(), value=heads(v, N).copy())
    else:
        f.update(query=q, key=k, value=v)
    if c.get("bias"):
        f["bias"] = rng.uniform(-1, 1, (N * (2 * H + Hv),))
    T = P + L
    if "mask" in c:
        f["key_padding_mask"] = np.array(c["mask"], np.int32)
    if c.get("attn_bias"):
        f["attention_bias"] = rng.uniform(-2, 2, (c.get("ab_b", B), c.get("ab_h", N), S, T))
    if P:
        f["past_key"], f["past_value"] = rng.uniform(-1, 1, (B, N, P, H)), rng.uniform(-1, 1, (B, N, P, Hv))
    for n in f:
        if n != "key_padding_mask":
            f[n] = f[n].astype(NP_TYPE[t])
    inputs = [(n, "int32" if n == "key_padding_mask" else t) if n in f else ("", t) for n in MHA_INPUTS]
    while inputs[-1][0] == "":
        inputs.pop()
    outs = ["y", "pk", "pv"] if c.get("present", P > 0) else ["y"]
    attrs = {"num_heads": N, **c.get("attrs", {})}
    return make_model("MultiHeadAttention", inputs, outs, attrs, domain=MS), f


def mha_formula(c, f):
    """The float64 output of case c (separate biases, masks, past, causal)."""
    B, S, L, N, H = c["B"], c["S"], c.get("L", c["S"]), c["N"], c["H"]
    Hv, P = c.get("Hv", H), c.get("P", 0)
    g = {n: a.astype(np.float64) for n, a in f.items()}
    layout = c.get("layout", "separate")
    if layout == "packed_qkv":
        q, k, v = (g["query"][:, :, :, i].reshape(B, S, N * H) for i in range(3))
    elif layout == "packed_kv":
        q, k, v = g["query"], g["key"][:, :, :, 0].reshape(B, L, N * H), g["key"][:, :, :, 1].reshape(B, L, N * Hv)
    else:
        q, k, v = g["query"], g["key"], g["value"]
    b = g.get("bias")
    if b is not None:
        q = q + b[: N * H]
        if layout != "bnsh":
            k, v = k + b[N * H: 2 * N * H], v + b[2 * N * H:]
    qh = heads(q, N)
    kh, vh = (k, v) if layout == "bnsh" else (heads(k, N), heads(v, N))
    if P:
        kh, vh = np.concatenate([g["past_key"], kh], 2), np.concatenate([g["past_value"], vh], 2)
    T = P + L
    add = np.zeros((B, 1, S, T))
    if "key_padding_mask" in f:
        m = f["key_padding_mask"]
        keep = (np.arange(T)[None, None] < m[:, None, None]) if m.ndim == 1 else (m[:, None] > 0 if m.ndim == 2 else m > 0)
        add = add + np.where(keep, 0.0, c.get("attrs", {}).get("mask_filter_value", -10000.0))[:, None]
    if "attention_bias" in g:
        add = add + g["attention_bias"]
    scale = c.get("attrs", {}).get("scale", 1 / np.sqrt(H))
    y = attend(qh, kh, vh, scale, add, P if c.get("attrs", {}).get("unidirectional") else None)
    return merge(y), kh, vh


MHA_CASES = [
    {"B": 2, "S": 3, "L": 5, "N": 2, "H": 8, "bias": True},
    {"B": 2, "S": 3, "L": 5, "N": 2, "H": 16, "Hv": 8, "mask": [3, 5]},
    {"B": 2, "S": 3, "L": 5, "N": 2, "H": 8, "mask": [[1, 1, 0, 1, 0], [1, 0, 0, 0, 0]], "attrs": {"mask_filter_value": -3.0}},
    {"B": 2, "S": 3, "L": 5, "N": 2, "H": 8, "mask": np.ones((2, 3, 5), int).tolist(), "attn_bias": True},
    {"B": 1, "S": 4, "L": 4, "N": 4, "H": 32, "attn_bias": True, "ab_b": 1, "ab_h": 1, "attrs": {"scale": 0.3}},
    {"B": 2, "S": 1, "N": 2, "H": 64, "P": 7, "bias": True, "attrs": {"unidirectional": 1}},
    {"B": 2, "S": 3, "N": 2, "H": 32, "P": 4, "attrs": {"unidirectional": 1}, "mask": [5, 7]},
    {"B": 1, "S": 129, "N": 4, "H": 64, "attrs": {"unidirectional": 1}},
    {"B": 3, "S": 7, "L": 64, "N": 2, "H": 80, "layout": "bnsh", "bias": True},
    {"B": 1, "S": 1, "N": 16, "H": 64, "P": 1000, "present": True},
]
ORT_LACKS = [  # onnxruntime's CPU has no packed MultiHeadAttention
    {"B": 2, "S": 5, "N": 2, "H": 16, "layout": "packed_qkv", "bias": True},
    {"B": 2, "S": 3, "L": 6, "N": 2, "H": 16, "layout": "packed_kv", "mask": [[1, 1, 1, 0, 1, 0], [1, 1, 1, 1, 1, 1]]},
    {"B": 1, "S": 64, "N": 2, "H": 96, "layout": "packed_qkv", "attrs": {"unidirectional": 1}},
]


@pytest.mark.parametrize("c", MHA_CASES, ids=[f"c{i}" for i in range(len(MHA_CASES))])
def test_mha_matches_onnxruntime(c):
    model, f = mha_build(c)
    want = ort_run(model, f)
    y_formula = mha_formula(c, f)[0]
    assert_close(want[0], y_formula, "float32", "onnxruntime vs formula", tol=(5e-6, 5e-6))
    for naive in (False, True):
        got = run_checked(model, "MultiHeadAttention", f, naive=naive, threads=2)
        for k, (g, w) in enumerate(zip(got, want)):
            assert_close(g, w, "float32", f"{'naive' if naive else 'optimized'} output {k}")


@pytest.mark.parametrize("c", ORT_LACKS, ids=[f"c{i}" for i in range(len(ORT_LACKS))])
def test_mha_packed_layouts_match_the_formula(c):
    model, f = mha_build(c)
    y = mha_formula(c, f)[0]
    for naive in (False, True):
        assert_close(run_checked(model, "MultiHeadAttention", f, naive=naive)[0], y, "float32", "packed")


MHA_TYPED = [dict(c, t=t) for t in ("float32", "float16", "bfloat16") for c in (MHA_CASES[0], MHA_CASES[5], ORT_LACKS[1])]


@pytest.mark.parametrize("c", MHA_TYPED, ids=[f"{c['t']}-{i}" for i, c in enumerate(MHA_TYPED)])
def test_mha_every_level_matches_naive(c):
    model, f = mha_build(c)
    nai = run_checked(model, "MultiHeadAttention", f, naive=True)
    for level in LEVELS:
        for k, (g, n) in enumerate(zip(run_checked(model, "MultiHeadAttention", f, level=level), nai)):
            assert_close(g, n, c["t"], f"{level} output {k}")


ATT_INPUTS = ("input", "weights", "bias", "mask_index", "past", "attention_bias")


def att_build(c):
    t = c.get("t", "float32")
    B, S, Din, N, P = c["B"], c["S"], c["Din"], c["N"], c.get("P", 0)
    dq, dk, dv = c["sizes"] if "sizes" in c else (c["hidden"],) * 3
    rng = np.random.default_rng(sum(map(ord, str(c))))
    f = {"input": rng.uniform(-1, 1, (B, S, Din)), "weights": rng.uniform(-1, 1, (Din, dq + dk + dv)) / np.sqrt(Din)}
    if c.get("bias", True):
        f["bias"] = rng.uniform(-0.5, 0.5, (dq + dk + dv,))
    if "mask" in c:
        f["mask_index"] = np.array(c["mask"], np.int32)
    if P:
        f["past"] = rng.uniform(-1, 1, (2, B, N, P, dq // N))
    if c.get("attn_bias"):
        f["attention_bias"] = rng.uniform(-1, 1, (B, N, S, P + S))
    for n in f:
        if n != "mask_index":
            f[n] = f[n].astype(NP_TYPE[t])
    inputs = [(n, "int32" if n == "mask_index" else t) if n in f else ("", t) for n in ATT_INPUTS]
    while inputs[-1][0] == "":
        inputs.pop()
    attrs = {"num_heads": N, **c.get("attrs", {})}
    if "sizes" in c:
        attrs["qkv_hidden_sizes"] = list(c["sizes"])
    model = make_model("Attention", inputs, ["y", "present"] if P else ["y"], attrs, domain=MS)
    if c.get("const_weights"):
        from onnx import numpy_helper
        model.graph.initializer.append(numpy_helper.from_array(f.pop("weights"), "weights"))
        del model.graph.input[1]
    return model, f


ATT_CASES = [
    {"B": 2, "S": 5, "Din": 16, "N": 2, "hidden": 16},
    {"B": 2, "S": 5, "Din": 16, "N": 2, "hidden": 16, "mask": [3, 5]},
    {"B": 2, "S": 5, "Din": 16, "N": 2, "hidden": 16, "mask": [4, 5, 1, 0]},
    {"B": 2, "S": 5, "Din": 16, "N": 2, "hidden": 16, "mask": [[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]]},
    {"B": 1, "S": 3, "Din": 24, "N": 2, "hidden": 16, "mask": [[[1, 0, 1], [1, 1, 0], [0, 0, 1]]], "attn_bias": True},
    {"B": 2, "S": 1, "Din": 32, "N": 4, "hidden": 64, "P": 9, "attrs": {"unidirectional": 1}},
    {"B": 1, "S": 4, "Din": 32, "N": 4, "hidden": 64, "P": 3, "attrs": {"unidirectional": 1, "scale": 0.2}},
    {"B": 2, "S": 7, "Din": 40, "N": 2, "sizes": (32, 32, 24), "bias": False},
    {"B": 1, "S": 128, "Din": 768, "N": 12, "hidden": 768, "mask": [[1] * 100 + [0] * 28], "const_weights": True},
    {"B": 3, "S": 33, "Din": 100, "N": 5, "hidden": 80, "const_weights": True},
]


# fusion=False: the kernel with its own projection (with constant weights and
# olc-matmul installed, the graph pass splits the node; test_projection_split.py).
@pytest.mark.parametrize("c", ATT_CASES, ids=[f"c{i}" for i in range(len(ATT_CASES))])
def test_ms_attention_matches_onnxruntime(c):
    model, f = att_build(c)
    want = ort_run(model, f)
    for naive in (False, True):
        got = run_checked(model, "MicrosoftAttention", f, naive=naive, threads=2, fusion=False)
        for k, (g, w) in enumerate(zip(got, want)):
            assert_close(g, w, "float32", f"{'naive' if naive else 'optimized'} output {k}", tol=(2e-5, 2e-5))


ATT_TYPED = [dict(c, t=t) for t in ("float32", "float16", "bfloat16") for c in (ATT_CASES[1], ATT_CASES[5], ATT_CASES[7])]


@pytest.mark.parametrize("c", ATT_TYPED, ids=[f"{c['t']}-{i}" for i, c in enumerate(ATT_TYPED)])
def test_ms_attention_every_level_matches_naive(c):
    model, f = att_build(c)
    nai = run_checked(model, "MicrosoftAttention", f, naive=True, fusion=False)
    # The projection rounds Q, K, V to the type on both sides; a value next
    # to a rounding midpoint may go either way (one ulp of the type).
    tol = {"float32": (2e-5, 2e-5), "float16": (4e-3, 4e-3), "bfloat16": (3e-2, 3e-2)}[c["t"]]
    for level in LEVELS:
        for k, (g, n) in enumerate(zip(run_checked(model, "MicrosoftAttention", f, level=level, fusion=False), nai)):
            assert_close(g, n, c["t"], f"{level} output {k}", tol=tol)
