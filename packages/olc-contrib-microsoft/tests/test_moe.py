"""MoE and QMoE: the optimized kernel at every SIMD level against the naive
reference (float64 products and activations of its own widened and
dequantized weights), the reference against a numpy formula, both against
onnxruntime where its CPU kernel has the case (float32; MoE with FC1 only
and interleaved SwiGLU; QMoE with renormalized routing, which its CPU kernel
always applies); every activation, SwiGLU in all three layouts with FC3,
limits, biases, k, 2-, 4- and 8-bit experts per row and per block, zero
points, router_weights, and the errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
from cm_testlib import LEVELS, NP_TYPE, TYPES, assert_close, make_model, ort_run, run_checked, session, to64

import olc_core

ACTS = ("relu", "gelu", "silu", "identity")
F32_TOL = (1e-5, 1e-5)  # float32 sums of up to a few hundred products, against float64


def routing(r, k, normalize):
    p = np.exp(r - r.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    sel = np.argsort(-r, kind="stable")[:, :k]
    w = np.take_along_axis(p, sel, -1)
    if normalize:
        w = w / w.sum(-1, keepdims=True)
    return sel, w


def activation(act, g, lin, gated, alpha=1.0, beta=0.0, limit=np.inf):
    if act == "swiglu":
        gate = np.minimum(g, limit)
        lin = np.clip(lin, -limit, limit)
        return gate / (1 + np.exp(-alpha * gate)) * (lin + beta)
    h = {"relu": lambda v: np.maximum(v, 0), "identity": lambda v: v, "silu": lambda v: v / (1 + np.exp(-v)),
         "gelu": lambda v: 0.5 * v * (1 + np.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v**3)))}[act](g)
    return h * lin if gated else h


def formula(x, r, k, normalize, act, w1, b1, w2, b2, w3=None, b3=None, layout=0, **act_attrs):
    """float64 MoE of float64 weights."""
    x = to64(x).reshape(-1, x.shape[-1])
    sel, w = routing(to64(r), k, normalize)
    out = np.zeros_like(x)
    inter = w2.shape[-1]
    for t in range(x.shape[0]):
        for i, e in enumerate(sel[t]):
            h = w1[e] @ x[t] + (b1[e] if b1 is not None else 0)
            if layout == 1:
                g, lin = h[0::2], h[1::2]
            elif layout == 2:
                g, lin = h[:inter], h[inter:]
            else:
                g = h
                lin = (w3[e] @ x[t] + (b3[e] if b3 is not None else 0)) if w3 is not None else None
            a = activation(act, g, lin, w3 is not None and act != "swiglu", **act_attrs)
            out[t] += w[t, i] * (w2[e] @ a + (b2[e] if b2 is not None else 0))
    return out


def moe_case(rng, t, T, H, inter, E, layout=0, fc3=False, bias=True, scale=0.3):
    f1 = 2 if layout else 1
    p = {"w1": rng.standard_normal((E, f1 * inter, H)) * scale / math.sqrt(H),
         "w2": rng.standard_normal((E, H, inter)) * scale / math.sqrt(inter)}
    if bias:
        p["b1"] = rng.standard_normal((E, f1 * inter)) * 0.1
        p["b2"] = rng.standard_normal((E, H)) * 0.1
    if fc3:
        p["w3"] = rng.standard_normal((E, inter, H)) * scale / math.sqrt(H)
        if bias:
            p["b3"] = rng.standard_normal((E, inter)) * 0.1
    p = {n: v.astype(NP_TYPE[t]) for n, v in p.items()}
    f = {"x": rng.standard_normal((T, H)).astype(NP_TYPE[t]), "r": rng.standard_normal((T, E)).astype(NP_TYPE[t])}
    return p, f


def moe_model(t, p, attrs):
    names = ["x", "r", "w1", "b1", "w2", "b2", "w3", "b3"]
    ins = [(n if (n in ("x", "r") or n in p) else "", t) for n in names]
    while ins[-1][0] == "":
        ins.pop()
    return make_model("MoE", ins, ["y"], attrs, initializers=p)


def check_moe(t, p, f, attrs, level, compare_ort=False):
    m = moe_model(t, p, attrs)
    (opt,) = run_checked(m, "MoE", f, level)
    (nai,) = run_checked(m, "MoE", f, level, naive=True)
    assert opt.shape == f["x"].shape and opt.dtype == NP_TYPE[t]
    layout = attrs.get("swiglu_fusion", 0)
    act_attrs = {k2: attrs[k1] for k1, k2 in (("activation_alpha", "alpha"), ("activation_beta", "beta"),
                                              ("swiglu_limit", "limit")) if k1 in attrs}
    ref = formula(f["x"], f["r"], attrs.get("k", 1), attrs.get("normalize_routing_weights", 0),
                  attrs.get("activation_type", "relu"), *(to64(p[n]) if n in p else None
                                                         for n in ("w1", "b1", "w2", "b2", "w3", "b3")),
                  layout=layout, **act_attrs).reshape(f["x"].shape)
    naive_tol = {"float32": (1e-6, 1e-6), "float16": (1e-3, 1e-3), "bfloat16": (8e-3, 8e-3)}[t]
    assert_close(nai, ref, t, "naive vs float64", tol=naive_tol)
    assert_close(opt, nai, t, "optimized vs naive", tol=F32_TOL if t == "float32" else None)
    if compare_ort:
        (theirs,) = ort_run(m, f)
        assert_close(opt, theirs, t, "vs onnxruntime", tol=F32_TOL)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("act", ACTS)
@pytest.mark.parametrize("k,normalize", [(1, 0), (2, 0), (2, 1), (4, 1)])
def test_moe_activations_and_routing(k, normalize, act, level):
    rng = np.random.default_rng(k * 10 + normalize)
    p, f = moe_case(rng, "float32", 9, 37, 21, 4)
    check_moe("float32", p, f, {"k": k, "normalize_routing_weights": normalize, "activation_type": act}, level,
              compare_ort=level == LEVELS[-1])


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("layout,fc3", [(0, True), (1, False), (2, False)])
@pytest.mark.parametrize("attrs", [{}, {"activation_alpha": 1.702, "activation_beta": 1.0, "swiglu_limit": 0.3}])
def test_moe_swiglu_layouts(attrs, layout, fc3, level):
    rng = np.random.default_rng(layout)
    p, f = moe_case(rng, "float32", 6, 40, 24, 5, layout=layout, fc3=fc3)
    a = dict(attrs, k=2, activation_type="swiglu", swiglu_fusion=layout)
    # onnxruntime's CPU kernel has the interleaved layout only, no FC3
    check_moe("float32", p, f, a, level, compare_ort=layout == 1 and level == LEVELS[-1])


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("act", ["silu", "gelu"])
def test_moe_fc3_gates_the_activation(act, level):
    rng = np.random.default_rng(3)
    p, f = moe_case(rng, "float32", 5, 33, 17, 3, fc3=True, bias=False)
    check_moe("float32", p, f, {"k": 2, "activation_type": act}, level)


@pytest.mark.parametrize("t", TYPES)
@pytest.mark.parametrize("T,H,inter", [(1, 768, 64), (40, 7, 5), (3, 64, 256)])
def test_moe_types_and_shapes(t, T, H, inter):
    rng = np.random.default_rng(H)
    p, f = moe_case(rng, t, T, H, inter, 8)
    check_moe(t, p, f, {"k": 2, "activation_type": "silu", "normalize_routing_weights": 1}, LEVELS[-1])


def test_moe_3d_input_and_threads():
    rng = np.random.default_rng(4)
    p, f = moe_case(rng, "float32", 64, 96, 64, 6)
    f["x"] = f["x"].reshape(4, 16, 96)
    m = moe_model("float32", p, {"k": 2, "activation_type": "gelu"})
    (one,) = run_checked(m, "MoE", f, LEVELS[-1])
    for threads in (2, 3):
        (many,) = run_checked(m, "MoE", f, LEVELS[-1], threads=threads)
        np.testing.assert_array_equal(one, many)
    (nai,) = run_checked(m, "MoE", f, LEVELS[-1], naive=True)
    assert one.shape == (4, 16, 96)
    assert_close(one, nai, "float32", "3-D", tol=F32_TOL)


# ------------------------------------------------------------------- QMoE


def pack_bits(q, bits):
    """Values along the last axis, low bits first."""
    if bits == 8:
        return q.astype(np.uint8)
    per = 8 // bits
    pad = (-q.shape[-1]) % per
    q = np.concatenate([q, np.zeros(q.shape[:-1] + (pad,), q.dtype)], -1) if pad else q
    out = np.zeros(q.shape[:-1] + (q.shape[-1] // per,), np.uint8)
    for c in range(per):
        out |= (q[..., c::per] << (bits * c)).astype(np.uint8)
    return out


def quantized_fc(rng, E, N, K, bits, bs, zp):
    q = rng.integers(0, 1 << bits, (E, N, K))
    sshape = (E, N, K // bs) if bs else (E, N)
    scale = rng.uniform(0.5, 1.5, sshape) / (2 ** (bits - 1) * math.sqrt(K))
    z = rng.integers(0, 1 << bits, sshape) if zp else np.full(sshape, 1 << (bits - 1))
    rep = (lambda a: np.repeat(a, bs, -1)) if bs else (lambda a: a[..., None])
    w = (q - rep(z)) * rep(scale.astype(np.float32))
    packed_z = None
    if zp:
        packed_z = pack_bits(z, bits) if bs else pack_bits(z.reshape(E, N), bits)  # per row: packed along N
    return pack_bits(q, bits), scale.astype(np.float32), packed_z, w


def qmoe_case(rng, T, H, inter, E, bits, bs, zp, layout=0, fc3=False, bias=True):
    f1 = 2 if layout else 1
    fcs = {1: (f1 * inter, H), 2: (H, inter)}
    if fc3:
        fcs[3] = (inter, H)
    inits, dense = {}, {}
    for i, (N, K) in fcs.items():
        q, s, z, w = quantized_fc(rng, E, N, K, bits, bs, zp)
        inits[f"w{i}"], inits[f"s{i}"], dense[f"w{i}"] = q, s, w
        if z is not None:
            inits[f"z{i}"] = z
        if bias:
            inits[f"b{i}"] = dense[f"b{i}"] = (0.1 * rng.standard_normal((E, N))).astype(np.float32)
    f = {"x": rng.standard_normal((T, H)).astype(np.float32), "r": rng.standard_normal((T, E)).astype(np.float32)}
    return inits, dense, f


QMOE_NAMES = ["x", "r", "w1", "s1", "b1", "w2", "s2", "b2", "w3", "s3", "b3", "z1", "z2", "z3", "rw"]


def qmoe_model(inits, attrs, router_weights=False):
    types = {"w": "uint8", "z": "uint8"}
    ins = []
    for n in QMOE_NAMES:
        present = n in ("x", "r") or n in inits or (n == "rw" and router_weights)
        ins.append((n if present else "", types.get(n[0], "float32")))
    while ins[-1][0] == "":
        ins.pop()
    return make_model("QMoE", ins, ["y"], attrs, initializers=inits)


def check_qmoe(inits, dense, f, attrs, level, compare_ort=False, router_weights=None):
    m = qmoe_model(inits, attrs, router_weights is not None)
    feeds = dict(f, rw=router_weights) if router_weights is not None else f
    (opt,) = run_checked(m, "QMoE", feeds, level)
    (nai,) = run_checked(m, "QMoE", feeds, level, naive=True)
    layout = attrs.get("swiglu_fusion", 0)
    act = attrs.get("activation_type", "relu")
    k, normalize = attrs.get("k", 1), attrs.get("normalize_routing_weights", 0)
    if router_weights is None:
        ref = formula(f["x"], f["r"], k, normalize, act, *(dense.get(n) for n in ("w1", "b1", "w2", "b2", "w3", "b3")),
                      layout=layout)
        assert_close(nai, ref, "float32", "naive vs float64", tol=(1e-6, 1e-6))
    assert_close(opt, nai, "float32", "optimized vs naive", tol=F32_TOL)
    if compare_ort:
        (theirs,) = ort_run(m, feeds)
        assert_close(opt, theirs, "float32", "vs onnxruntime", tol=F32_TOL)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("zp", [False, True])
@pytest.mark.parametrize("bs", [0, 16, 32])
@pytest.mark.parametrize("bits", [2, 4, 8])
def test_qmoe_bits_blocks_zero_points(bits, bs, zp, level):
    rng = np.random.default_rng(bits * 100 + bs + zp)
    inits, dense, f = qmoe_case(rng, 7, 64, 32, 4, bits, bs, zp)
    attrs = {"k": 2, "activation_type": "silu", "expert_weight_bits": bits, "normalize_routing_weights": 1,
             "weights_prepacked": 0}
    if bs:
        attrs["block_size"] = bs
    # onnxruntime: 4 and 8 bits; its block-wise 8-bit experts quantize the
    # activations to int8, so they are not a float32 reference
    ort_ok = level == LEVELS[-1] and bits in (4, 8) and not (bits == 8 and bs)
    check_qmoe(inits, dense, f, attrs, level, compare_ort=ort_ok)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("bits,bs", [(2, 0), (4, 0), (8, 0), (4, 16)])
@pytest.mark.parametrize("tokens", [1, 7, 12])
def test_qmoe_decode_rows_and_panels(tokens, bits, bs, level):
    """Both products of a quantized expert: up to 8 tokens per expert each
    packed weight row is dotted directly (4 tokens per pass, so 7 takes a
    second pass), above that the rows are dequantized and multiplied with
    token panels. Two experts and k = 2 send every token to both. Row
    lengths 48 and 36 (per row) leave a partial vector at every level."""
    rng = np.random.default_rng(tokens * 10 + bits + bs)
    H, inter = (48, 32) if bs else (36, 20)
    inits, dense, f = qmoe_case(rng, tokens, H, inter, 2, bits, bs, True)
    attrs = {"k": 2, "activation_type": "gelu", "expert_weight_bits": bits, "normalize_routing_weights": 1}
    if bs:
        attrs["block_size"] = bs
    check_qmoe(inits, dense, f, attrs, level)


@pytest.mark.parametrize("layout,fc3", [(0, True), (1, False), (2, False)])
def test_qmoe_swiglu_and_fc3(layout, fc3):
    rng = np.random.default_rng(layout + 7)
    inits, dense, f = qmoe_case(rng, 5, 32, 16, 3, 4, 16, True, layout=layout, fc3=fc3)
    attrs = {"k": 2, "activation_type": "swiglu", "swiglu_fusion": layout, "expert_weight_bits": 4, "block_size": 16,
             "normalize_routing_weights": 1}
    check_qmoe(inits, dense, f, attrs, LEVELS[-1], compare_ort=layout == 1)


def test_qmoe_mixed_widths_and_router_weights():
    rng = np.random.default_rng(12)
    inits, dense, f = qmoe_case(rng, 6, 32, 32, 4, 8, 0, False)
    q2, s2, _, w2 = quantized_fc(rng, 4, 32, 32, 4, 0, False)
    inits.update(w2=q2, s2=s2)
    dense["w2"] = w2
    rw = rng.uniform(0, 1, (6, 4)).astype(np.float32)
    attrs = {"k": 2, "activation_type": "relu", "expert_weight_bits": 8, "fc2_expert_weight_bits": 4}
    check_qmoe(inits, dense, f, attrs, LEVELS[-1], router_weights=rw)
    # router_weights mix the outputs; router_probs only chooses
    m = qmoe_model(inits, attrs, True)
    (got,) = run_checked(m, "QMoE", dict(f, rw=rw), LEVELS[-1])
    sel, _ = routing(to64(f["r"]), 2, 0)
    w = np.take_along_axis(to64(rw), sel, -1)
    ref = np.zeros((6, 32))
    for t in range(6):
        for i, e in enumerate(sel[t]):
            h = np.maximum(dense["w1"][e] @ to64(f["x"][t]) + dense["b1"][e], 0)
            ref[t] += w[t, i] * (dense["w2"][e] @ h + dense["b2"][e])
    assert_close(got, ref, "float32", "router_weights", tol=F32_TOL)


# ------------------------------------------------------------------ errors


def test_moe_errors_name_the_node():
    rng = np.random.default_rng(0)
    p, f = moe_case(rng, "float32", 4, 8, 6, 3)
    s = session(moe_model("float32", p, {"k": 2}), LEVELS[-1])
    with pytest.raises(olc_core.OlcError, match=r"node 'n0' \(MoE\): router_probs has shape \[5, 3\], expected "
                                               r"\[4, num_experts\]"):
        s.run(None, dict(f, r=rng.standard_normal((5, 3)).astype(np.float32)))
    with pytest.raises(olc_core.OlcError, match=r"node 'n0' \(MoE\): fc1_experts_weights has shape \[3, 6, 8\], "
                                               r"expected \[4, ..."):
        s.run(None, dict(f, r=rng.standard_normal((4, 4)).astype(np.float32)))
    s = session(moe_model("float32", p, {"k": 4}), LEVELS[-1])
    with pytest.raises(olc_core.OlcError, match=r"node 'n0' \(MoE\): k = 4 is more than the 3 experts"):
        s.run(None, f)


@pytest.mark.parametrize("attrs,pattern", [
    ({"activation_type": "tanh"}, r"activation_type 'tanh' is not supported"),
    ({"use_sparse_mixer": 1}, r"use_sparse_mixer=1 is not supported"),
    ({"activation_type": "swiglu"}, r"swiglu with swiglu_fusion=0 takes its linear half from fc3_experts_weights"),
    ({"swiglu_fusion": 1}, r"swiglu_fusion=1 needs activation_type 'swiglu'"),
    ({"k": 0}, r"attribute 'k' must be >= 1"),
])
def test_moe_attribute_errors(attrs, pattern):
    rng = np.random.default_rng(0)
    p, _ = moe_case(rng, "float32", 4, 8, 6, 3)
    with pytest.raises(olc_core.OlcError, match=r"node 'n0' \(MoE\): " + pattern):
        olc_core.Session(moe_model("float32", p, attrs), strict=True)


def test_qmoe_errors_name_the_node():
    rng = np.random.default_rng(0)
    inits, _, f = qmoe_case(rng, 4, 32, 16, 3, 4, 16, False)
    with pytest.raises(olc_core.OlcError, match=r"node 'n0' \(QMoE\): attribute 'block_size' must be a power of 2"):
        olc_core.Session(qmoe_model(inits, {"expert_weight_bits": 4, "block_size": 24}), strict=True)
    with pytest.raises(olc_core.OlcError, match=r"quant_type 'fp8' is not supported"):
        olc_core.Session(qmoe_model(inits, {"quant_type": "fp8"}), strict=True)
    s = session(qmoe_model(inits, {"expert_weight_bits": 8, "block_size": 16}), LEVELS[-1])
    with pytest.raises(olc_core.OlcError, match=r"node 'n0' \(QMoE\): fc1_experts_weights has shape \[3, 16, 16\], "
                                               r"expected \[3, 16, 32\]"):
        s.run(None, f)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("at", ["end", "start"])
def test_guard_pages(at, level):
    from olc_core.testing import guarded

    rng = np.random.default_rng(9)
    p, f = moe_case(rng, "bfloat16", 3, 19, 11, 3, layout=1)
    feeds = {**f, **p}
    ins = [(n, "bfloat16") for n in ("x", "r", "w1", "b1", "w2", "b2")]
    m = make_model("MoE", ins, ["y"], {"k": 2, "activation_type": "swiglu", "swiglu_fusion": 1})
    (want,) = run_checked(m, "MoE", feeds, level, naive=True)
    (got,) = run_checked(m, "MoE", {k: guarded(v, at=at) for k, v in feeds.items()}, level)
    assert_close(got, want, "bfloat16", "guarded MoE")
    inits, _, f = qmoe_case(rng, 3, 20, 12, 3, 4, 0, True)
    feeds = {**f, **inits}
    m = make_model("QMoE", [(n if n in feeds else "", "uint8" if n[0] in "wz" else "float32") for n in QMOE_NAMES[:13]],
                   ["y"], {"k": 2, "expert_weight_bits": 4})
    (want,) = run_checked(m, "QMoE", feeds, level, naive=True)
    (got,) = run_checked(m, "QMoE", {k: guarded(v, at=at) for k, v in feeds.items()}, level)
    assert_close(got, want, "float32", "guarded QMoE", tol=F32_TOL)
