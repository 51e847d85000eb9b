"""The Conv graph pass on PP-LCNet-style blocks: a Conv [-> BatchNormalization]
followed by Mul / Add / Sub / Div by constants (folded into the weights),
an activation written out of elementwise nodes (HardSwish as
``x * Clip(x + 3, 0, 6) / 6`` and its variants), and a scalar affine after
the activation (applied as the tiles are stored): one FusedConv.

Each fused result is checked against a float64 numpy statement of the
original nodes, against the same model run by olc without fusion and
against onnxruntime, at every SIMD level on 1 and 2 threads and for each
Conv algorithm. The negative cases check what the pass must leave alone."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from helpers import LEVELS, NP, ONNX, OTHERS_STRICT, OUT_EPS
from onnx import TensorProto, helper, numpy_helper
from test_conv import conv_ref
from test_conv_fusion import GEOM_IDS, GEOMS, assert_within, bn_params, fused_entries, ort_run

import olc_core

FUSED = "olc_matmul::FusedConv"

# Affines before the activation: (op, constant kind, constant) steps; kind
# "s" a one-value constant, "c" one per channel shaped [C, 1, ...], "c4"
# shaped [1, C, 1, ...]; "first" puts the constant as the first operand.
PRE = {
    "none": [],
    "scalar": [("Mul", "s", 1.3, True), ("Add", "s", -0.2, False)],   # PP-LCNet's learnable affine
    "channel": [("Mul", "c", None, False), ("Add", "c4", None, True)],
    "sub-div": [("Sub", "c", None, False), ("Div", "s", 0.8, False)],
}
# Affines after the activation (one-value constants only).
POST = {
    "none": [],
    "scalar": [("Mul", "s", 0.9, True), ("Add", "s", 0.05, False)],
    "rsub": [("Sub", "s", 0.5, True), ("Mul", "s", -1.25, False)],    # (0.5 - y) * -1.25
}
# HardSwish as exporters write it, out of elementwise nodes.
GATES = ["hswish-div", "hswish-mul6", "hswish-div-first", "hardsigmoid", "silu"]


def const(name, kind, value, c, rank, t, rng, inits):
    """A constant of `kind` for a rank-`rank` output with c channels."""
    if kind == "s":
        v = np.array([value], NP[t])
    else:
        v = (1 + 0.4 * rng.standard_normal(c)).astype(NP[t])
        v = v.reshape((c,) + (1,) * (rank - 2)) if kind == "c" else v.reshape((1, c) + (1,) * (rank - 2))
    inits.append(numpy_helper.from_array(v, name))
    return v


def affine_nodes(prefix, steps, x, c, rank, t, rng, inits):
    """The nodes of `steps` from x: (nodes, names, output, the step list as
    (op, constant in float64, constant first))."""
    nodes, names, done = [], [], []
    for k, (op, kind, value, first) in enumerate(steps):
        cname, out = f"{prefix}_c{k}", f"{prefix}_{k}"
        v = const(cname, kind, value, c, rank, t, rng, inits)
        nodes.append(helper.make_node(op, [cname, x] if first else [x, cname], [out], name=f"{prefix}{k}"))
        names.append(f"{prefix}{k}")
        done.append((op, v.astype(np.float64), first))
        x = out
    return nodes, names, x, done


def affine_ref(y, steps):
    """The steps in float64 and a bound on the rounding they add."""
    err = np.zeros_like(y)
    for op, v, first in steps:
        if op == "Mul":
            y = y * v
        elif op == "Add":
            y = y + v
        elif op == "Sub":
            y = v - y if first else y - v
        else:
            y = v / y if first else y / v
        err = err * (np.abs(v) if op in ("Mul", "Div") else 1.0) + 2.0**-23 * (np.abs(y) + np.abs(v))
    return y, err


def gate_nodes(gate, x, out, t, inits, opset):
    """x * gate(x) as the nodes exporters write, ending in `out`; their names."""
    def c(name, v):
        inits.append(numpy_helper.from_array(np.array([v], NP[t]), name))
        return name

    if gate == "silu":
        nodes = [helper.make_node("Sigmoid", [x], ["g_s"], name="g0"),
                 helper.make_node("Mul", [x, "g_s"], [out], name="g1")]
    elif gate == "hardsigmoid":
        nodes = [helper.make_node("HardSigmoid", [x], ["g_h"], name="g0", alpha=1.0 / 6, beta=0.5),
                 helper.make_node("Mul", ["g_h", x], [out], name="g1")]
    else:
        if opset < 11:
            clip = helper.make_node("Clip", ["g_a"], ["g_c"], name="g1", min=0.0, max=6.0)
        else:
            inits.append(numpy_helper.from_array(np.array(0, NP[t]), "g_lo"))
            inits.append(numpy_helper.from_array(np.array(6, NP[t]), "g_hi"))
            clip = helper.make_node("Clip", ["g_a", "g_lo", "g_hi"], ["g_c"], name="g1")
        nodes = [helper.make_node("Add", [c("g_3", 3.0), x] if gate == "hswish-mul6" else [x, c("g_3", 3.0)],
                                  ["g_a"], name="g0"), clip]
        if gate == "hswish-div":
            nodes += [helper.make_node("Mul", [x, "g_c"], ["g_m"], name="g2"),
                      helper.make_node("Div", ["g_m", c("g_6", 6.0)], [out], name="g3")]
        elif gate == "hswish-mul6":
            nodes += [helper.make_node("Mul", ["g_c", x], ["g_m"], name="g2"),
                      helper.make_node("Mul", [c("g_6", 1.0 / 6), "g_m"], [out], name="g3")]
        else:
            nodes += [helper.make_node("Div", ["g_c", c("g_6", 6.0)], ["g_d"], name="g2"),
                      helper.make_node("Mul", [x, "g_d"], [out], name="g3")]
    return nodes, [n.name for n in nodes]


def gate_ref(gate, y):
    """The activation in float64 and a bound on its slope."""
    if gate == "silu":
        return y / (1 + np.exp(-y)), 1.1
    return y * np.clip(y / 6 + 0.5, 0, 1), 1.5


def block(t, xs, ws, attrs, pre, gate, post, *, bn=False, residual=False, opset=17, seed=0):
    """Conv [-> BN] -> PRE[pre] [-> + R] -> gate -> POST[post] -> Y: (model,
    feeds, float64 result, bound, the names of the nodes fused)."""
    rng = np.random.default_rng(seed)
    rank, c = len(xs), ws[0]
    x = rng.standard_normal(xs).astype(NP[t])
    w = (rng.standard_normal(ws) / np.sqrt(np.prod(ws[1:]))).astype(NP[t])
    b = (0.2 * rng.standard_normal(c)).astype(NP[t])
    inits = [numpy_helper.from_array(w, "W"), numpy_helper.from_array(b, "B")]
    inputs = [helper.make_tensor_value_info("X", ONNX[t], list(xs))]
    nodes = [helper.make_node("Conv", ["X", "W", "B"], ["conv_out"], name="conv0", **attrs)]
    names, last = ["conv0"], "conv_out"
    y, absprod = conv_ref(x.astype(np.float32), w.astype(np.float32), b.astype(np.float32), attrs)
    k = int(np.prod(ws[1:]))
    err = 2.0 * (k + 4) * 2.0**-24 * absprod + 2.0**-24 * np.abs(y)
    if t != "float32":  # the Conv's own output rounded to t before the next node
        err = err + OUT_EPS[t] * np.abs(y)
    shp = (1, -1) + (1,) * (rank - 2)
    if bn:
        p = bn_params(rng, c, t)
        for n, v in zip(("s", "bb", "m", "v"), p.values()):
            inits.append(numpy_helper.from_array(v, "bn_" + n))
        nodes.append(helper.make_node("BatchNormalization", ["conv_out", "bn_s", "bn_bb", "bn_m", "bn_v"], ["bn_out"],
                                      name="bn0", epsilon=1e-3))
        names.append("bn0")
        last = "bn_out"
        f = (p["scale"].astype(np.float64) / np.sqrt(p["var"].astype(np.float64) + 1e-3)).reshape(shp)
        y = (y - p["mean"].astype(np.float64).reshape(shp)) * f + p["bnb"].astype(np.float64).reshape(shp)
        err = err * np.abs(f) + 2.0**-22 * (np.abs(y) + 1.0)
    pn, pnames, last, psteps = affine_nodes("pre", PRE[pre], last, c, rank, t, rng, inits)
    nodes += pn
    names += pnames
    y, aerr = affine_ref(y, psteps)
    scale = np.ones_like(y)
    for op, v, _ in psteps:
        scale = scale * (np.abs(v) if op == "Mul" else 1 / np.abs(v) if op == "Div" else 1.0)
    err = err * scale + aerr
    feeds = {"X": x}
    if residual:
        r = rng.standard_normal(y.shape).astype(NP[t])
        inputs.append(helper.make_tensor_value_info("R", ONNX[t], list(r.shape)))
        nodes.append(helper.make_node("Add", ["R", last], ["res_out"], name="res0"))
        names.append("res0")
        last = "res_out"
        feeds["R"] = r
        y = y + r.astype(np.float64)
        err = err + 2.0**-24 * np.abs(y)
    gn, gnames = gate_nodes(gate, last, "gate_out", t, inits, opset)
    nodes += gn
    names += gnames
    y, slope = gate_ref(gate, y)
    err = slope * err + 8 * 2.0**-24 * np.abs(y)
    qn, qnames, last, qsteps = affine_nodes("post", POST[post], "gate_out", c, rank, t, rng, inits)
    nodes += qn
    names += qnames
    y, qerr = affine_ref(y, qsteps)
    for op, v, _ in qsteps:
        err = err * (np.abs(v) if op == "Mul" else 1.0)
    err = err + qerr + 1e-7 + OUT_EPS[t] * np.abs(y)
    nodes[-1].output[0] = "Y"
    g = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info("Y", ONNX[t], None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m, feeds, y, err, names


def check(m, feeds, want, bound, names, levels=LEVELS, post=True):
    """Fused into one FusedConv at every level and 1 and 2 threads, each
    result within bound of the float64 one and of the unfused olc and
    onnxruntime ones."""
    (unfused,) = olc_core.Session(m, strict=OTHERS_STRICT, fusion=False).run(None, feeds)
    ort_y = ort_run(m, feeds)
    assert_within(unfused, want, bound, "unfused olc")
    assert_within(ort_y, want, bound, "onnxruntime")
    for level, threads in itertools.product(levels, (1, 2)):
        with olc_core.simd_cap(level):
            s = olc_core.Session(m, threads=threads, strict=OTHERS_STRICT, record_usage=True)
        (y,) = s.run(None, feeds)
        what = f"{level} t{threads}"
        assert s.kernel_usage() == [FUSED], (what, s.kernel_usage())
        (entry,) = fused_entries(s)
        assert [n for n, _ in entry.fused_nodes] == names, what
        assert_within(y, want, bound, what)
        assert_within(y, unfused.astype(np.float64), 2 * bound, what + " vs unfused")
        assert_within(y, ort_y.astype(np.float64), 2 * bound, what + " vs onnxruntime")
        assert ("+affine" in s.kernel_usage_details()[0]) == post, s.kernel_usage_details()


# Every before-affine, gate and after-affine on the implicit GEMM; then each
# geometry with one combination of each kind, BatchNormalization on every
# other one.
CASES = [(0, pre, gate, post, False) for pre, gate, post in itertools.product(PRE, GATES, POST)]
CASES += [(g, list(PRE)[g % 4], GATES[g % 5], list(POST)[g % 3], g % 2 == 1) for g in range(1, len(GEOMS))]


@pytest.mark.parametrize("geom,pre,gate,post,bn", CASES,
                         ids=[f"{GEOM_IDS[c[0]]}-{c[1]}-{c[2]}-{c[3]}{'-bn' if c[4] else ''}" for c in CASES])
def test_block_fused(geom, pre, gate, post, bn):
    xs, ws, attrs = GEOMS[geom]
    m, feeds, want, bound, names = block("float32", xs, ws, attrs, pre, gate, post, bn=bn, seed=geom)
    check(m, feeds, want, bound, names, post=pre != "none" or post != "none")


def test_block_with_residual_and_clip_attributes():
    """An affine, then a residual Add, then HardSwish with Clip's bounds as
    attributes (opset 10): the affine is folded before the residual."""
    xs, ws, attrs = GEOMS[1]
    m, feeds, want, bound, names = block("float32", xs, ws, attrs, "channel", "hswish-div", "scalar", residual=True,
                                         opset=10)
    check(m, feeds, want, bound, names)


@pytest.mark.parametrize("t", ["float16", "bfloat16"])
def test_block_half_types(t):
    xs, ws, attrs = GEOMS[0]
    m, feeds, want, bound, names = block(t, xs, ws, attrs, "scalar", "hswish-div", "scalar", bn=True,
                                         opset=22 if t == "bfloat16" else 17)
    # The unfused graph rounds every node's output to t: a few units of t
    # per node on top of the float32 bound.
    bound = bound + 8 * OUT_EPS[t] * (np.abs(want) + 1.0)
    (unfused,) = olc_core.Session(m, strict=False, fusion=False).run(None, feeds)
    assert_within(unfused, want, bound, "unfused olc")
    for level in LEVELS:
        with olc_core.simd_cap(level):
            s = olc_core.Session(m, strict=False, record_usage=True)
        (y,) = s.run(None, feeds)
        assert y.dtype == NP[t] and FUSED in s.kernel_usage(), s.kernel_usage()
        assert [n for n, _ in fused_entries(s)[0].fused_nodes] == names
        assert_within(y, want, bound, level)


def test_nan_and_infinities_as_unfused():
    """NaN and infinite inputs: the fused block gives the unfused graph's
    NaNs and infinities (x * Clip(x + 3, 0, 6) / 6 at -inf is NaN, at +inf
    +inf, then the affine)."""
    xs, ws, attrs = (1, 4, 6, 6), (8, 4, 1, 1), {}
    m, feeds, _, _, _ = block("float32", xs, ws, attrs, "scalar", "hswish-div", "scalar")
    x = feeds["X"].copy()
    x[0, :, 0, 0] = np.nan
    x[0, :, 1, 1] = np.inf
    x[0, :, 2, 2] = -np.inf
    x[0, 0, 3, 3] = 1e30
    for level in LEVELS:
        with olc_core.simd_cap(level):
            (a,) = olc_core.Session(m, strict=OTHERS_STRICT).run(None, {"X": x})
        (b,) = olc_core.Session(m, strict=OTHERS_STRICT, fusion=False).run(None, {"X": x})
        assert np.array_equal(np.isnan(a), np.isnan(b)), level
        assert np.array_equal(np.isposinf(a), np.isposinf(b)) and np.array_equal(np.isneginf(a), np.isneginf(b)), level
        fin = np.isfinite(b)
        np.testing.assert_allclose(a[fin], b[fin], rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- left alone


def _names(s):
    (entry,) = fused_entries(s)
    return [n for n, _ in entry.fused_nodes]


def _replace_init(m, name, value):
    for i, init in enumerate(m.graph.initializer):
        if init.name == name:
            m.graph.initializer[i].CopyFrom(numpy_helper.from_array(value, name))
            return
    raise KeyError(name)


def _same_as_unfused(m, feeds):
    a = olc_core.Session(m, strict=OTHERS_STRICT).run(None, feeds)[0]
    b = olc_core.Session(m, strict=OTHERS_STRICT, fusion=False).run(None, feeds)[0]
    np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-6)


def test_affine_along_another_axis_not_folded():
    """A Mul whose constant varies along W (not the channels) is no channel
    affine: the Conv keeps nothing after it."""
    xs, ws, attrs = GEOMS[1]
    m, feeds, _, _, _ = block("float32", xs, ws, attrs, "scalar", "hswish-div", "none")
    _replace_init(m, "pre_c0", np.linspace(0.5, 1.5, xs[3]).astype(np.float32))
    s = olc_core.Session(m, strict=OTHERS_STRICT)
    assert not fused_entries(s)
    _same_as_unfused(m, feeds)


@pytest.mark.parametrize("value", [0.0, np.inf, np.nan])
def test_affine_with_special_constants_not_folded(value):
    """Division by zero, or an infinite or NaN factor, folded into the
    weights would not give the unfused graph's values: the Div is left
    apart (the Sub before it is folded), and the activation after it."""
    xs, ws, attrs = GEOMS[1]
    m, feeds, _, _, _ = block("float32", xs, ws, attrs, "sub-div", "hswish-div", "none")
    _replace_init(m, "pre_c1", np.array([value], np.float32))
    assert _names(olc_core.Session(m, strict=OTHERS_STRICT)) == ["conv0", "pre0"]
    (a,) = olc_core.Session(m, strict=OTHERS_STRICT).run(None, feeds)
    (b,) = olc_core.Session(m, strict=OTHERS_STRICT, fusion=False).run(None, feeds)
    np.testing.assert_array_equal(a, b)


def test_post_affine_per_channel_left_out():
    """After the activation only one-value constants are taken: a
    per-channel Mul there stays a node of its own."""
    xs, ws, attrs = GEOMS[1]
    m, feeds, _, _, _ = block("float32", xs, ws, attrs, "scalar", "hswish-div", "scalar")
    _replace_init(m, "post_c0", np.full((ws[0], 1, 1), 0.9, np.float32))
    s = olc_core.Session(m, strict=OTHERS_STRICT)
    assert _names(s) == ["conv0", "pre0", "pre1", "g0", "g1", "g2", "g3"]
    _same_as_unfused(m, feeds)


@pytest.mark.parametrize("what", ["alpha", "three", "six", "clip"])
def test_not_hardswish_left_alone(what):
    """Near misses of HardSwish are not taken for it: HardSigmoid with
    alpha 0.2, x + 2, a division by 5, Clip(., 0, 5)."""
    xs, ws, attrs = GEOMS[1]
    gate = "hardsigmoid" if what == "alpha" else "hswish-div"
    m, feeds, _, _, _ = block("float32", xs, ws, attrs, "scalar", gate, "none")
    if what == "alpha":
        next(n for n in m.graph.node if n.op_type == "HardSigmoid").attribute[0].f = 0.2
    elif what == "three":
        _replace_init(m, "g_3", np.array([2.0], np.float32))
    elif what == "six":
        _replace_init(m, "g_6", np.array([5.0], np.float32))
    else:
        _replace_init(m, "g_hi", np.array(5.0, np.float32))
    s = olc_core.Session(m, strict=OTHERS_STRICT)
    assert _names(s) == ["conv0", "pre0", "pre1"]
    _same_as_unfused(m, feeds)


def test_gate_value_read_elsewhere_left_alone():
    """The Clip's output also read by another node: no HardSwish taken."""
    xs, ws, attrs = GEOMS[1]
    m, feeds, _, _, _ = block("float32", xs, ws, attrs, "scalar", "hswish-div", "none")
    m.graph.node.append(helper.make_node("Neg", ["g_c"], ["out_neg"], name="n0"))
    m.graph.output.append(helper.make_tensor_value_info("out_neg", TensorProto.FLOAT, None))
    s = olc_core.Session(m, strict=OTHERS_STRICT)
    assert _names(s) == ["conv0", "pre0", "pre1"]
    _same_as_unfused(m, feeds)


def test_fed_weights_keep_the_affine_apart():
    """With W fed, nothing can be folded: the affine and what follows run
    as their own nodes, with the right result."""
    xs, ws, attrs = GEOMS[1]
    m, feeds, _, _, _ = block("float32", xs, ws, attrs, "scalar", "hswish-div", "scalar")
    w = numpy_helper.to_array(next(i for i in m.graph.initializer if i.name == "W"))
    m.graph.initializer.remove(next(i for i in m.graph.initializer if i.name == "W"))
    m.graph.input.append(helper.make_tensor_value_info("W", TensorProto.FLOAT, None))
    feeds = dict(feeds, W=w)
    assert not fused_entries(olc_core.Session(m, strict=OTHERS_STRICT))
    _same_as_unfused(m, feeds)


@pytest.mark.parametrize("attrs,pattern", [
    ({"post_scale": 2.0}, "need an 'activation'"),
    ({"activation": "Relu", "post_shift": [1.0, 2.0]}, "'post_shift' must be a float"),
    ({"channel_scale": [1.0, 2.0, 3.0]}, r"'channel_scale' has 3 values: 1 or one per output channel \(4\)"),
    ({"channel_shift": 1.0}, "'channel_shift' must be one or more floats"),
])
def test_affine_attribute_errors(attrs, pattern):
    """A FusedConv written with bad affine attributes is refused at session
    creation, naming the node."""
    node = helper.make_node("FusedConv", ["X", "W"], ["Y"], name="fc0", domain="olc.fused", **attrs)
    w = numpy_helper.from_array(np.ones((4, 2, 1, 1), np.float32), "W")
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 2, 3, 3])],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)], [w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("olc.fused", 1)])
    with pytest.raises(olc_core.OlcError, match=pattern) as ei:
        olc_core.Session(m, strict=True)
    assert "fc0" in str(ei.value)
