"""The Conv graph pass's residual connection: ``Conv [-> BatchNormalization]
-> Add(., R) [-> activation]`` as one FusedConv that adds R to each output
tile before the activation.

Every fused result is checked against a float64 numpy statement of the
original nodes (test_conv.py's Conv reference, the normalization, the
sum, the activation), against the same model run by olc without fusion
and against onnxruntime, at every SIMD level on 1 and 2 threads, through
every path of the kernel (implicit GEMM, pointwise GEMM, the transposed
product, Winograd and its transposed product, depthwise by rows and by
channel blocks), with R fed from memory that ends (or starts) at an
inaccessible page. The negative cases check what the pass must leave
alone, and that the results stay right."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import LEVELS, NP, ONNX, OTHERS_STRICT, OUT_EPS
from onnx import TensorProto, helper, numpy_helper
from test_conv import conv_ref
from test_conv_fusion import (
    ACTS,
    act_names,
    act_ref,
    activation_node,
    assert_within,
    bn_params,
    fused_entries,
    ort_run,
    reference,
)

import olc_core
from olc_core import testing

FUSED = "olc_matmul::FusedConv"

# (id, X shape, W shape, Conv attributes, the path's words in the usage detail at avx512)
GEOMS = [
    ("implicit-b3", (3, 6, 7, 9), (8, 6, 3, 3), {"pads": [1, 1, 1, 1]}, "implicit-gemm prepacked"),
    ("stride2", (1, 6, 7, 9), (8, 6, 3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]}, "implicit-gemm prepacked"),
    ("group2", (1, 8, 7, 9), (8, 4, 3, 3), {"pads": [1, 1, 1, 1], "group": 2}, "implicit-gemm prepacked"),
    ("pointwise-b3", (3, 16, 7, 9), (12, 16, 1, 1), {}, "pointwise-gemm prepacked"),
    ("pointwise-tail", (2, 16, 10, 10), (40, 16, 1, 1), {}, "pointwise-gemm prepacked"),  # 4 positions transposed
    ("transposed", (1, 24, 3, 3), (64, 24, 1, 1), {}, "pointwise-gemm-transposed"),
    ("winograd", (1, 16, 16, 15), (16, 16, 3, 3), {"pads": [1, 1, 1, 1]}, "winograd-f2x2-3x3 prepacked"),
    ("winograd-b3", (3, 16, 7, 9), (16, 16, 3, 3), {"pads": [1, 1, 1, 1]}, "winograd-f2x2-3x3"),
    ("winograd-t", (1, 32, 4, 4), (32, 32, 3, 3), {"pads": [1, 1, 1, 1]}, "winograd-f2x2-3x3-transposed"),
    ("depthwise-rows", (3, 4, 9, 40), (4, 1, 3, 3), {"pads": [1, 1, 1, 1], "group": 4}, "depthwise prepacked"),
    ("depthwise-s2", (3, 6, 9, 7), (6, 1, 3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2], "group": 6},
     "depthwise-channels"),
    ("1d", (1, 4, 33), (5, 4, 3), {"pads": [1, 1]}, "implicit-gemm-rows prepacked"),  # B's rows read in place
    # the transposed product reading its strips in place, two images
    ("direct-t", (2, 16, 9, 11), (32, 16, 3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]},
     "implicit-gemm-transposed-direct prepacked"),
]
GEOM_IDS = [g[0] for g in GEOMS]


def out_shape(xs, ws, attrs):
    return conv_ref(np.zeros(xs), np.zeros(ws), None, attrs)[0].shape


def build(t, xs, ws, attrs, act, *, w, b=None, bn=None, eps=1e-3, swap=False, r_shape=None, shapes=True,
          extra=(), opset=None):
    """Conv [-> BatchNormalization] -> Add(., R) (Add(R, .) when swap) [->
    activation] -> Y, with X and R fed (their shapes declared unless not
    `shapes`); extra: more nodes, their outputs named out_* made graph
    outputs."""
    spec = ACTS[act]
    opset = opset or max(15, spec[3] if spec else 0)
    if t == "bfloat16":
        opset = max(opset, 22)
    ys = out_shape(xs, ws, attrs)
    r_shape = ys if r_shape is None else r_shape
    inputs = [helper.make_tensor_value_info("X", ONNX[t], xs if shapes else None),
              helper.make_tensor_value_info("R", ONNX[t], r_shape if shapes else None)]
    inits = [numpy_helper.from_array(w, "W")]
    conv_in = ["X", "W"]
    if b is not None:
        inits.append(numpy_helper.from_array(b, "B"))
        conv_in.append("B")
    nodes = [helper.make_node("Conv", conv_in, ["conv_out"], name="conv0", **attrs)]
    last = "conv_out"
    if bn is not None:
        names = ["bn_scale", "bn_b", "bn_mean", "bn_var"]
        inits += [numpy_helper.from_array(v, n) for n, v in zip(names, bn.values())]
        nodes.append(helper.make_node("BatchNormalization", [last] + names, ["bn_out"], name="bn0", epsilon=eps))
        last = "bn_out"
    nodes.append(helper.make_node("Add", ["R", last] if swap else [last, "R"], ["sum"], name="add0"))
    last = "sum"
    if spec is not None:
        nodes.extend(activation_node(act, last, t, inits))
    nodes[-1].output[0] = "Y"
    outputs = [helper.make_tensor_value_info("Y", ONNX[t], None)]
    for n in extra:
        nodes.append(n)
        outputs += [helper.make_tensor_value_info(o, ONNX[t], None) for o in n.output if o.startswith("out_")]
    g = helper.make_graph(nodes, "g", inputs, outputs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8 if opset < 21 else 10
    return m


def residual_reference(x, w, b, attrs, bn, eps, r, act):
    """(Y, bound) in float64: the Conv [and the normalization] (with
    test_conv_fusion's bound), plus R (one rounding of the sum), then the
    activation (its slope times the bound, plus a few units of Y)."""
    y, err = reference(x, w, b, attrs, bn, eps, "none")
    s = y + r.astype(np.float64)
    out, slope = act_ref(act, s)
    return out, slope * (err + 2.0**-24 * np.abs(s)) + 4 * 2.0**-24 * np.abs(out) + 1e-7


def data(rng, xs, ws, with_bn, t="float32"):
    x = rng.standard_normal(xs).astype(NP[t])
    w = (rng.standard_normal(ws) / np.sqrt(np.prod(ws[1:]))).astype(NP[t])
    b = (0.2 * rng.standard_normal(ws[0])).astype(NP[t])
    return x, w, b, (bn_params(rng, ws[0], t) if with_bn else None)


# ---------------------------------------------------------------- fused results


@pytest.mark.parametrize("act", ["none", "Relu", "HardSigmoid", "SiLU"])
@pytest.mark.parametrize("bn", [True, False], ids=["bn", "nobn"])
@pytest.mark.parametrize("geom", GEOMS, ids=GEOM_IDS)
def test_residual_matches_reference_unfused_and_onnxruntime(geom, bn, act):
    gid, xs, ws, attrs, path = geom
    rng = np.random.default_rng(abs(hash((gid, bn, act))) % 2**32)
    x, w, b, p = data(rng, xs, ws, bn)
    r = (1.5 * rng.standard_normal(out_shape(xs, ws, attrs))).astype(np.float32)
    for swap in (False, True):
        bias = b if swap else None  # without the Conv's bias, B is "" before R
        want, bound = residual_reference(x, w, bias, attrs, p, 1e-3, r, act)
        m = build("float32", xs, ws, attrs, act, w=w, b=bias, bn=p, swap=swap)
        feeds = {"X": x, "R": r}
        (unfused,) = olc_core.Session(m, strict=OTHERS_STRICT, fusion=False).run(None, feeds)
        ort_y = ort_run(m, feeds)
        assert_within(unfused, want, bound, "unfused olc")
        assert_within(ort_y, want, bound, "onnxruntime")
        expect = ["conv0"] + (["bn0"] if bn else []) + ["add0"] + act_names(act)
        for level in LEVELS:
            for threads in (1, 2):
                what = f"{gid} {level} t{threads} swap={swap}"
                with olc_core.simd_cap(level):
                    s = olc_core.Session(m, threads=threads, strict=OTHERS_STRICT, record_usage=True)
                at = "start" if threads == 2 else "end"
                (y,) = s.run(None, {"X": testing.guarded(x, at=at), "R": testing.guarded(r, at=at)})
                assert y.shape == want.shape and y.dtype == np.float32, what
                assert s.kernel_usage() == [FUSED], (what, s.kernel_usage())
                (entry,) = fused_entries(s)
                assert [n for n, _ in entry.fused_nodes] == expect, what
                plan = {e.node_name: e for e in s.kernel_plan(expand_fused=True)}
                assert plan["add0"].kernel == FUSED and plan["add0"].fused_into == entry.node_name, what
                assert_within(y, want, bound, what)
                assert_within(y, unfused.astype(np.float64), 2 * bound, what + " vs unfused")
                assert_within(y, ort_y.astype(np.float64), 2 * bound, what + " vs onnxruntime")
                detail = s.kernel_usage_details()[0]
                assert "+Add" in detail and ("+BatchNormalization" in detail) == bn, detail
                if level == "avx512":
                    assert path in detail, detail


@pytest.mark.parametrize("t", ["float16", "bfloat16"])
@pytest.mark.parametrize("geom", [g for g in GEOMS if g[0] in ("implicit-b3", "pointwise-b3", "transposed",
                                                               "depthwise-rows", "depthwise-s2", "direct-t")],
                         ids=["implicit-b3", "pointwise-b3", "transposed", "depthwise-rows", "depthwise-s2",
                              "direct-t"])
def test_residual_half_types(geom, t):
    """A 16-bit residual (converted a row at a time) against float64 and
    onnxruntime (float16; it has no bfloat16 Conv)."""
    gid, xs, ws, attrs, _ = geom
    rng = np.random.default_rng(21)
    x, w, b, p = data(rng, xs, ws, True, t)
    r = rng.standard_normal(out_shape(xs, ws, attrs)).astype(NP[t])
    m = build(t, xs, ws, attrs, "Relu", w=w, b=b, bn=p, swap=True)
    f32 = {k: v.astype(np.float32) for k, v in p.items()}
    want, bound = residual_reference(x.astype(np.float32), w.astype(np.float32), b.astype(np.float32), attrs, f32,
                                     1e-3, r, "Relu")
    bound = bound + 2 * OUT_EPS[t] * np.abs(want) + 1e-3
    for level in LEVELS:
        with olc_core.simd_cap(level):
            s = olc_core.Session(m, threads=2, strict=True, record_usage=True)
        (y,) = s.run(None, {"X": testing.guarded(x), "R": testing.guarded(r)})
        assert y.dtype == NP[t] and s.kernel_usage() == [FUSED], (level, s.kernel_usage())
        assert_within(y, want, bound, f"{t} {gid} {level}")
    if t == "float16":
        assert_within(ort_run(m, {"X": x, "R": r}), want, 2 * bound, "onnxruntime")


def test_residual_read_elsewhere_still_fused():
    """R itself may have other readers: it is only read."""
    _, xs, ws, attrs, _ = GEOMS[0]
    rng = np.random.default_rng(22)
    x, w, b, p = data(rng, xs, ws, True)
    r = rng.standard_normal(out_shape(xs, ws, attrs)).astype(np.float32)
    m = build("float32", xs, ws, attrs, "Relu", w=w, b=b, bn=p,
              extra=[helper.make_node("Neg", ["R"], ["out_neg"], name="neg0")])
    s = olc_core.Session(m, strict=OTHERS_STRICT)
    (entry,) = fused_entries(s)
    assert [n for n, _ in entry.fused_nodes] == ["conv0", "bn0", "add0", "act0"]
    y, neg = s.run(None, {"X": x, "R": r})
    want, bound = residual_reference(x, w, b, attrs, p, 1e-3, r, "Relu")
    assert_within(y, want, bound, "fused")
    np.testing.assert_array_equal(neg, -r)


# ---------------------------------------------------------------- not fused


def _fused_names(s):
    return [[n for n, _ in e.fused_nodes] for e in fused_entries(s)]


def _same_as_unfused(m, feeds):
    ys = olc_core.Session(m, strict=OTHERS_STRICT).run(None, feeds)
    us = olc_core.Session(m, strict=OTHERS_STRICT, fusion=False).run(None, feeds)
    for a, u in zip(ys, us):
        np.testing.assert_allclose(a, u, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", ["conv-read-twice", "bn-read-twice", "conv-is-output", "sum-read-twice",
                                  "sum-is-output", "broadcast-c11", "broadcast-rank", "shapes-unknown", "self-add"])
def test_residual_left_alone(case):
    """What the pass must not take in: an intermediate read by another node
    or a graph output (the Add, or what follows it, then runs on its own),
    a broadcast R, R of unknown shape, Add(conv, conv)."""
    _, xs, ws, attrs, _ = GEOMS[0]
    rng = np.random.default_rng(23)
    x, w, b, p = data(rng, xs, ws, True)
    ys = out_shape(xs, ws, attrs)
    r_shape = {"broadcast-c11": (1, ys[1], 1, 1), "broadcast-rank": ys[1:]}.get(case, ys)
    r = rng.standard_normal(r_shape).astype(np.float32)
    extra = {"conv-read-twice": [helper.make_node("Neg", ["conv_out"], ["out_neg"], name="neg0")],
             "bn-read-twice": [helper.make_node("Neg", ["bn_out"], ["out_neg"], name="neg0")],
             "sum-read-twice": [helper.make_node("Neg", ["sum"], ["out_neg"], name="neg0")]}.get(case, [])
    m = build("float32", xs, ws, attrs, "Relu", w=w, b=b, bn=p, r_shape=r_shape, shapes=case != "shapes-unknown",
              extra=extra)
    if case == "conv-is-output":
        m.graph.output.append(helper.make_tensor_value_info("conv_out", TensorProto.FLOAT, None))
    if case == "sum-is-output":
        m.graph.output.append(helper.make_tensor_value_info("sum", TensorProto.FLOAT, None))
    if case == "self-add":
        m.graph.node[2].input[1] = "bn_out"
    s = olc_core.Session(m, strict=OTHERS_STRICT)
    want = {"conv-read-twice": [], "conv-is-output": [],
            "sum-read-twice": [["conv0", "bn0", "add0"]], "sum-is-output": [["conv0", "bn0", "add0"]]}
    assert _fused_names(s) == want.get(case, [["conv0", "bn0"]]), (case, _fused_names(s))
    feeds = {"X": x} if case == "self-add" else {"X": x, "R": r}
    if case == "self-add":
        m.graph.input.pop()
    _same_as_unfused(m, feeds)
    if case != "self-add":
        y = olc_core.Session(m, strict=OTHERS_STRICT).run(None, feeds)[0]
        want_y, bound = residual_reference(x, w, b, attrs, p, 1e-3, np.broadcast_to(r, ys), "Relu")
        assert_within(y, want_y, bound, case)


# ---------------------------------------------------------------- errors


def _direct(r_type=TensorProto.FLOAT, n_inputs=4):
    names = ["X", "W", "", "R"] if n_inputs == 4 else ["X", "W", "", "s", "bb", "mu", "var", "R"]
    node = helper.make_node("FusedConv", names, ["Y"], name="fc0", domain="olc.fused", activation="Relu")
    inputs = [helper.make_tensor_value_info("X", TensorProto.FLOAT, None),
              helper.make_tensor_value_info("W", TensorProto.FLOAT, None),
              helper.make_tensor_value_info("R", r_type, None)]
    g = helper.make_graph([node], "g", inputs, [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("olc.fused", 1)])


def test_residual_shape_mismatch_is_an_error_naming_the_node():
    """A FusedConv written directly, fed an R that is not Y's shape: an
    error naming the node, the kernel broadcasts nothing."""
    s = olc_core.Session(_direct(), strict=True)
    rng = np.random.default_rng(24)
    x = rng.standard_normal((1, 3, 5, 5)).astype(np.float32)
    w = rng.standard_normal((4, 3, 1, 1)).astype(np.float32)
    for bad in [(1, 4, 1, 1), (4, 5, 5), (1, 4, 5, 6)]:
        with pytest.raises(olc_core.OlcError, match=r"fc0.*residual has shape"):
            s.run(None, {"X": x, "W": w, "R": np.zeros(bad, np.float32)})
    r = rng.standard_normal((1, 4, 5, 5)).astype(np.float32)
    (y,) = s.run(None, {"X": x, "W": w, "R": r})
    want = np.maximum(np.einsum("oc,nchw->nohw", w[:, :, 0, 0].astype(np.float64), x) + r, 0)
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)


def test_residual_type_mismatch_refused_at_creation():
    with pytest.raises(olc_core.OlcError, match=r"fc0.*residual \(input 3\) has type float16"):
        olc_core.Session(_direct(TensorProto.FLOAT16), strict=True)


def test_projection_shortcut_two_conv_branches():
    """Add(Conv-BN(x), Conv-BN(x)) -> Relu (a ResNet projection shortcut):
    the first Conv in graph order (here the shortcut's) takes the Add and
    Relu, the other keeps its own normalization; both branches checked against float64 and onnxruntime."""
    xs, ws, attrs = (3, 6, 7, 9), (8, 6, 3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]}
    ws2, attrs2 = (8, 6, 1, 1), {"strides": [2, 2]}
    rng = np.random.default_rng(25)
    x, w, b, p = data(rng, xs, ws, True)
    _, w2, _, p2 = data(rng, xs, ws2, True)
    m = build("float32", xs, ws, attrs, "Relu", w=w, b=b, bn=p)
    short = [helper.make_node("Conv", ["X", "W2"], ["c2"], name="conv1", **attrs2),
             helper.make_node("BatchNormalization", ["c2", "s2", "b2", "m2", "v2"], ["R2"], name="bn1", epsilon=1e-3)]
    for n in short[::-1]:
        m.graph.node.insert(0, n)
    m.graph.initializer.extend([numpy_helper.from_array(v, n) for n, v in
                                zip(["W2", "s2", "b2", "m2", "v2"], [w2, *p2.values()])])
    m.graph.input.pop()  # R is now the shortcut's output
    next(n for n in m.graph.node if n.name == "add0").input[1] = "R2"
    r, _ = reference(x, w2, None, attrs2, p2, 1e-3, "none")
    want, bound = residual_reference(x, w, b, attrs, p, 1e-3, r, "Relu")
    bound = bound + 4 * 2.0**-24 * np.abs(r) + 1e-6
    for level in LEVELS:
        with olc_core.simd_cap(level):
            s = olc_core.Session(m, threads=2, strict=True, record_usage=True)
        assert sorted(_fused_names(s)) == [["conv0", "bn0"], ["conv1", "bn1", "add0", "act0"]], _fused_names(s)
        (y,) = s.run(None, {"X": x})
        assert set(s.kernel_usage()) == {FUSED}
        assert_within(y, want, bound, level)
    assert_within(ort_run(m, {"X": x}), want, bound, "onnxruntime")


@pytest.mark.parametrize("act", ["none", "Relu", "HardSigmoid"])
@pytest.mark.parametrize("xs,ws,attrs", [
    ((1, 40, 1, 1), (70, 40, 1, 1), {}),                # 3 panels at avx512: shares of 1 and 2, a tail panel
    ((1, 24, 1, 1), (90, 12, 1, 1), {"group": 2}),      # a share per group and thread
    ((1, 9, 1, 1), (5, 9, 1, 1), {}),                   # one partial panel: one share
], ids=["tail", "groups", "one-panel"])
def test_gemv_shares_between_threads(xs, ws, attrs, act):
    """A 1x1 Conv of a 1x1 input (the GEMV over the W^T panels) split
    between two threads by output channels once its weights reach
    gemv_split_min_bytes (here every size): each share adds its slice of R
    and applies the activation, against the float64 reference and one
    thread's result."""
    from recurrent import tuned

    rng = np.random.default_rng(31)
    x, w, b, p = data(rng, xs, ws, True)
    r = rng.standard_normal(out_shape(xs, ws, attrs)).astype(np.float32)
    want, bound = residual_reference(x, w, b, attrs, p, 1e-3, r, act)
    m = build("float32", xs, ws, attrs, act, w=w, b=b, bn=p, swap=True)
    with tuned("Conv", gemv_split_min_bytes=1):
        for level in LEVELS:
            ys = []
            for threads in (1, 2):
                with olc_core.simd_cap(level):
                    s = olc_core.Session(m, threads=threads, strict=OTHERS_STRICT, record_usage=True)
                (y,) = s.run(None, {"X": testing.guarded(x), "R": testing.guarded(r)})
                assert "pointwise-gemm-transposed" in s.kernel_usage_details()[0], s.kernel_usage_details()
                assert_within(y, want, bound, f"{level} t{threads}")
                ys.append(y)
            np.testing.assert_array_equal(ys[0], ys[1])  # the same sums, only split


def test_gemv_split_threshold_follows_the_l2():
    """gemv_split_min_bytes: 3/4 of the L2 (weights that one core's L2 no longer
    holds; of 1 MiB where it is unknown); this host's default is the one its
    L2 gives."""
    from olc_matmul import _ext

    import olc_core.tuning as tuning

    M = 1 << 20
    assert _ext.conv_gemv_split_min_bytes(2 * M) == 3 * M // 2  # Sapphire Rapids
    assert _ext.conv_gemv_split_min_bytes(M // 2) == 3 * M // 8  # Zen 2/3
    assert _ext.conv_gemv_split_min_bytes(0) == 3 * M // 4
    want = _ext.conv_gemv_split_min_bytes(_ext.cache_info()["l2_bytes"])
    m = build("float32", (1, 8, 1, 1), (4, 8, 1, 1), {}, "none", w=np.ones((4, 8, 1, 1), np.float32))
    for level in LEVELS:
        with olc_core.simd_cap(level):
            olc_core.Session(m)
        assert tuning.get("olc_matmul", "Conv", "gemv_split_min_bytes", implementation=level, dtype="float32") == want
