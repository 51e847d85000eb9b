"""The Conv graph pass (olc_matmul.passes) and its FusedConv kernel: Conv
with a following BatchNormalization folded into its weights and an
activation applied as tiles are stored.

Every fused result is checked against a float64 numpy statement of the
original nodes (the Conv reference of test_conv.py, then the
normalization and the activation written out here), against the same
model run by olc without fusion, and against onnxruntime; at every SIMD
level on 1 and 2 threads, for the three Conv algorithms (implicit GEMM,
pointwise GEMM, depthwise) and 1-D. The negative cases check that the pass
leaves alone what it must not fuse, and that the results stay right."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from helpers import LEVELS, NP, ONNX, OTHERS_STRICT, OUT_EPS
from onnx import TensorProto, helper, numpy_helper
from test_conv import conv_ref

import olc_core

FUSED = "olc_matmul::FusedConv"

# (X shape, W shape, Conv attributes)
GEOMS = [
    ((2, 6, 9, 11), (8, 6, 3, 3), {"pads": [1, 1, 1, 1]}),                                    # implicit GEMM
    ((1, 16, 7, 9), (12, 16, 1, 1), {}),                                                      # pointwise
    ((1, 6, 9, 7), (12, 1, 3, 3), {"group": 6, "pads": [1, 1, 1, 1], "strides": [2, 2]}),    # depthwise x2
    ((1, 4, 33), (5, 4, 3), {"pads": [1, 1]}),                                                # 1-D
    ((1, 16, 16, 15), (16, 16, 3, 3), {"pads": [1, 1, 1, 1]}),                               # Winograd
    ((1, 24, 3, 3), (64, 24, 1, 1), {}),                                                      # transposed
    ((1, 16, 10, 10), (40, 16, 1, 1), {}),                     # pointwise, a tail of 4 positions transposed
    ((2, 16, 9, 11), (32, 16, 3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]}),  # transposed, strips in place
]
GEOM_IDS = ["implicit", "pointwise", "depthwise", "1d", "winograd", "transposed", "pointwise-tail", "direct-t"]

# (op, attributes, Clip bounds given as inputs, opset)
ACTS = {
    "none": None,
    "Relu": ("Relu", {}, None, 13),
    "LeakyRelu": ("LeakyRelu", {"alpha": 0.1}, None, 13),
    "HardSigmoid": ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}, None, 13),
    "Sigmoid": ("Sigmoid", {}, None, 13),
    "HardSwish": ("HardSwish", {}, None, 14),
    "Clip": ("Clip", {}, (-0.5, 1.5), 13),
    "Clip-min": ("Clip", {}, (0.0, None), 13),
    "Clip-6": ("Clip", {"min": -1.0, "max": 0.75}, None, 10),  # bounds as attributes before opset 11
    "SiLU": ("SiLU", {}, None, 13),  # Mul(y, Sigmoid(y)), as exporters write it: the kernel's Swish
}


def act_names(act):
    """The names of the nodes activation_node() makes for act."""
    return [] if act == "none" else ["sig0", "act0"] if act == "SiLU" else ["act0"]


def act_label(act):
    """The activation as the FusedConv's usage detail names it."""
    return "Swish" if act == "SiLU" else ACTS[act][0]


def act_ref(name, y):
    """The activation in float64 and a bound on its slope."""
    if name == "none":
        return y, 1.0
    op, attrs, bounds, _ = ACTS[name]
    if op == "Relu":
        return np.maximum(y, 0), 1.0
    if op == "LeakyRelu":
        return np.where(y < 0, attrs["alpha"] * y, y), 1.0
    if op == "HardSigmoid":
        return np.clip(attrs["alpha"] * y + attrs["beta"], 0, 1), attrs["alpha"]
    if op == "Sigmoid":
        return 1 / (1 + np.exp(-y)), 0.25
    if op == "HardSwish":
        return y * np.clip(y / 6 + 0.5, 0, 1), 1.5
    if op == "SiLU":
        return y * (1 / (1 + np.exp(-y))), 1.1
    lo, hi = (attrs["min"], attrs["max"]) if bounds is None else bounds
    return np.clip(y, -np.inf if lo is None else lo, np.inf if hi is None else hi), 1.0


def bn_params(rng, c, t="float32"):
    return {"scale": (1 + 0.5 * rng.standard_normal(c)).astype(NP[t]),
            "bnb": (0.3 * rng.standard_normal(c)).astype(NP[t]),
            "mean": (0.3 * rng.standard_normal(c)).astype(NP[t]),
            "var": rng.uniform(0.2, 2.0, c).astype(NP[t])}


def activation_node(act, x, t, inits):
    """The activation ACTS[act] of x as a list of nodes, the last one act0
    (output act_out); Clip's bounds become initializers appended to inits
    (an absent one left out); SiLU is Sigmoid sig0 and the Mul act0."""
    op, a_attrs, bounds, _ = ACTS[act]
    if op == "SiLU":
        return [helper.make_node("Sigmoid", [x], ["sig_out"], name="sig0"),
                helper.make_node("Mul", [x, "sig_out"], ["act_out"], name="act0")]
    a_in = [x]
    for n, v in zip(("lo", "hi"), bounds or ()):
        if v is None:
            a_in.append("")
        else:
            inits.append(numpy_helper.from_array(np.array(v, NP[t]), n))
            a_in.append(n)
    while a_in[-1] == "":
        a_in.pop()
    return [helper.make_node(op, a_in, ["act_out"], name="act0", **a_attrs)]


def build(t, attrs, act, *, bn=None, w=None, b=None, eps=1e-3, opset=None, bn_inputs_fed=False, extra=()):
    """Conv [-> BatchNormalization] [-> activation] -> Y. w / b: initializers
    (None: fed). bn: BatchNormalization parameters (initializers unless
    bn_inputs_fed). extra: more nodes (and outputs) appended."""
    spec = ACTS[act]
    opset = opset or (10 if act == "Clip-6" else max(15, spec[3] if spec else 0))
    if t == "bfloat16":
        opset = max(opset, 22)
    inits, nodes = [], []
    inputs = [helper.make_tensor_value_info("X", ONNX[t], None)]
    if w is not None:
        inits.append(numpy_helper.from_array(w, "W"))
    else:
        inputs.append(helper.make_tensor_value_info("W", ONNX[t], None))
    conv_in = ["X", "W"]
    if b is not None:
        inits.append(numpy_helper.from_array(b, "B"))
        conv_in.append("B")
    last = "conv_out"
    nodes.append(helper.make_node("Conv", conv_in, [last], name="conv0", **attrs))
    if bn is not None:
        names = ["bn_scale", "bn_b", "bn_mean", "bn_var"]
        for n, v in zip(names, bn.values()):
            if bn_inputs_fed:
                inputs.append(helper.make_tensor_value_info(n, ONNX[t], None))
            else:
                inits.append(numpy_helper.from_array(v, n))
        bn_attrs = {"epsilon": eps} if opset >= 7 else {"epsilon": eps, "is_test": 1}
        nodes.append(helper.make_node("BatchNormalization", [last] + names, ["bn_out"], name="bn0", **bn_attrs))
        last = "bn_out"
    if spec is not None:
        nodes.extend(activation_node(act, last, t, inits))
        last = "act_out"
    nodes[-1].output[0] = "Y"
    outputs = [helper.make_tensor_value_info("Y", ONNX[t], None)]
    for n in extra:
        nodes.append(n)
        outputs += [helper.make_tensor_value_info(o, ONNX[t], None) for o in n.output if o.startswith("out_")]
    g = helper.make_graph(nodes, "g", inputs, outputs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8 if opset < 21 else 10
    return m


def reference(x, w, b, attrs, bn, eps, act):
    """(Y, bound) in float64: the Conv, the normalization, the activation;
    the bound is the Conv's float32 rounding bound (test_conv.py) times
    the normalization's factor and the activation's slope, plus a few units
    of the result."""
    y, absprod = conv_ref(x, w, b, attrs)
    k = int(np.prod(w.shape[1:]))
    err = 2.0 * (k + 4) * 2.0**-24 * absprod + 2.0**-24 * np.abs(y)
    if bn is not None:
        shp = (1, -1) + (1,) * (x.ndim - 2)
        f = (bn["scale"].astype(np.float64) / np.sqrt(bn["var"].astype(np.float64) + eps)).reshape(shp)
        y = (y - bn["mean"].astype(np.float64).reshape(shp)) * f + bn["bnb"].astype(np.float64).reshape(shp)
        err = err * np.abs(f) + 2.0**-22 * (np.abs(y) + np.abs(bn["bnb"].astype(np.float64)).reshape(shp) +
                                            np.abs(bn["mean"].astype(np.float64).reshape(shp) * f))
    r, slope = act_ref(act, y)
    return r, slope * err + 4 * 2.0**-24 * np.abs(r) + 1e-7


def assert_within(got, want, bound, what):
    got = np.asarray(got).astype(np.float64)
    bad = ~(np.abs(got - want) <= bound)
    bad &= ~(np.isnan(got) & np.isnan(want))
    assert not bad.any(), f"{what}: {int(bad.sum())} of {bad.size} out of bound, worst {np.abs(got - want)[bad].max()}"


def fused_entries(sess):
    return [e for e in sess.kernel_plan() if e.kernel == FUSED]


def ort_run(m, feeds):
    so = ort.SessionOptions()
    so.log_severity_level = 3
    return ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feeds)[0]


# ---------------------------------------------------------------- fused results


@pytest.mark.parametrize("act", list(ACTS), ids=list(ACTS))
@pytest.mark.parametrize("bn", [True, False], ids=["bn", "nobn"])
@pytest.mark.parametrize("geom", GEOMS, ids=GEOM_IDS)
def test_fused_matches_reference_unfused_and_onnxruntime(geom, bn, act):
    if act == "none" and not bn:
        pytest.skip("nothing to fuse")
    xs, ws, attrs = geom
    rng = np.random.default_rng(abs(hash((xs, bn, act))) % 2**32)
    x = rng.standard_normal(xs).astype(np.float32)
    w = (rng.standard_normal(ws) / np.sqrt(np.prod(ws[1:]))).astype(np.float32)
    b = (0.2 * rng.standard_normal(ws[0])).astype(np.float32)
    p = bn_params(rng, ws[0]) if bn else None
    eps = 1e-3
    for with_bias in (True, False):
        m = build("float32", attrs, act, bn=p, w=w, b=b if with_bias else None, eps=eps)
        feeds = {"X": x}
        want, bound = reference(x, w, b if with_bias else None, attrs, p, eps, act)
        (unfused,) = olc_core.Session(m, strict=OTHERS_STRICT, fusion=False).run(None, feeds)
        ort_y = ort_run(m, feeds)
        assert_within(unfused, want, bound, "unfused olc")
        assert_within(ort_y, want, bound, "onnxruntime")
        for level in LEVELS:
            for threads in (1, 2):
                with olc_core.simd_cap(level):
                    s = olc_core.Session(m, threads=threads, strict=OTHERS_STRICT, record_usage=True)
                (y,) = s.run(None, feeds)
                what = f"{level} t{threads} bias={with_bias}"
                assert y.shape == want.shape and y.dtype == np.float32, what
                assert s.kernel_usage() == [FUSED], (what, s.kernel_usage())
                (entry,) = fused_entries(s)
                expect = ["conv0"] + (["bn0"] if bn else []) + act_names(act)
                assert [n for n, _ in entry.fused_nodes] == expect, what
                assert_within(y, want, bound, what)
                assert_within(y, unfused.astype(np.float64), 2 * bound, what + " vs unfused")
                assert_within(y, ort_y.astype(np.float64), 2 * bound, what + " vs onnxruntime")
                detail = s.kernel_usage_details()[0]
                assert ("+BatchNormalization" in detail) == bn, detail
                path = {"winograd": "winograd", "transposed": "transposed",
                        "direct-t": "implicit-gemm-transposed-direct"}.get(GEOM_IDS[GEOMS.index(geom)])
                if path and level == "avx512":
                    assert path in detail, detail
                if act != "none":
                    assert "+" + act_label(act) in detail, detail


# (X shape, W shape, Conv attributes) of implicit-GEMM outputs written with
# non-temporal stores once stream_min_bytes is 1.
STREAM_GEOMS = [
    ((2, 3, 23, 29), (16, 3, 3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]}),  # stem: 180-value rows, some unaligned
    ((2, 3, 32, 32), (20, 3, 3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]}),  # 256-value rows; a strip tail
    ((2, 12, 16, 16), (40, 12, 1, 1), {}),    # pointwise, K <= 16: a strip at a time across the panels
    ((1, 300, 16, 16), (29, 300, 1, 1), {}),  # pointwise, two K blocks: only the last one streams
    ((1, 4, 40), (6, 4, 5), {"pads": [2, 2]}),  # 1-D
    ((2, 3, 16, 80), (16, 3, 3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]}),  # stem, B's rows read in place
]


@pytest.mark.parametrize("act", ["none", "Relu", "HardSwish", "Sigmoid"])
@pytest.mark.parametrize("geom", STREAM_GEOMS, ids=["stem", "aligned", "pointwise-k12", "pointwise-2kb", "1d",
                                                "stem-rows"])
def test_streamed_output(geom, act):
    """With stream_min_bytes 1 every float32 implicit-GEMM output is written
    with non-temporal stores (the usage detail says streamed-Y), except with
    Sigmoid, applied by a second pass over the stored tiles: the same values
    as the float64 reference on every level, one and two threads."""
    import olc_core.tuning as tuning

    xs, ws, attrs = geom
    rng = np.random.default_rng(17)
    x = rng.standard_normal(xs).astype(np.float32)
    w = (rng.standard_normal(ws) / np.sqrt(np.prod(ws[1:]))).astype(np.float32)
    b = (0.2 * rng.standard_normal(ws[0])).astype(np.float32)
    m = build("float32", attrs, act, w=w, b=b)
    want, bound = reference(x, w, b, attrs, None, 0, act)
    for level in LEVELS:
        try:
            tuning.set("olc_matmul", "Conv", "stream_min_bytes", 1, implementation=level, dtype="float32")
            for threads in (1, 2):
                with olc_core.simd_cap(level):
                    s = olc_core.Session(m, threads=threads, strict=True, record_usage=True)
                (y,) = s.run(None, {"X": x})
                detail = s.kernel_usage_details()[0]
                assert "gemm" in detail and "transposed" not in detail, detail
                assert ("streamed-Y" in detail) == (act != "Sigmoid"), detail
                assert_within(y, want, bound, f"{level} t{threads}")
        finally:
            tuning.reset("olc_matmul", "Conv", "stream_min_bytes", implementation=level, dtype="float32")


def test_stream_threshold_follows_the_l3():
    """stream_min_bytes: 3/8 of the L3 (an output that would not stay there
    beside its input), of at most 32 MiB of it (a VM may report its host's
    whole L3), at least 4 MiB, 12 MiB where the L3 is unknown; this host's
    default is the one its L3 gives."""
    from olc_matmul import _ext

    import olc_core.tuning as tuning

    M = 1 << 20
    assert _ext.conv_stream_min_bytes(32 * M) == 12 * M  # Zen 2/3/4 CCX
    assert _ext.conv_stream_min_bytes(16 * M) == 6 * M
    assert _ext.conv_stream_min_bytes(8 * M) == 4 * M
    assert _ext.conv_stream_min_bytes(0) == 12 * M
    assert _ext.conv_stream_min_bytes(480 * M) == 12 * M  # a 2-vCPU guest of a large Xeon
    want = _ext.conv_stream_min_bytes(_ext.cache_info()["l3_bytes"])
    _, ws, attrs = STREAM_GEOMS[0]
    m = build("float32", attrs, "none", w=np.ones(ws, np.float32))
    for level in LEVELS:
        with olc_core.simd_cap(level):
            olc_core.Session(m)
        assert tuning.get("olc_matmul", "Conv", "stream_min_bytes", implementation=level, dtype="float32") == want


@pytest.mark.parametrize("act", ["Relu", "Sigmoid", "HardSwish", "LeakyRelu"])
def test_activation_only_with_fed_weights(act):
    """Without a BatchNormalization the weights need not be constant."""
    xs, ws, attrs = GEOMS[0]
    rng = np.random.default_rng(3)
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float32)
    m = build("float32", attrs, act, w=None)
    want, bound = reference(x, w, None, attrs, None, 0, act)
    for level in LEVELS:
        with olc_core.simd_cap(level):
            s = olc_core.Session(m, threads=2, strict=True, record_usage=True)
        (y,) = s.run(None, {"X": x, "W": w})
        assert s.kernel_usage() == [FUSED]
        assert_within(y, want, bound, level)


def test_activation_values_nan_and_extremes():
    """NaN through every activation (each keeps it), and Sigmoid over its
    whole range: saturation at both ends and the exp below its normal
    range, against float64. 67 positions: full column panels and a tail,
    both through the microkernel's epilogue (every activation but Sigmoid)."""
    xs, ws, attrs = (1, 1, 1, 67), (1, 1, 1, 1), {}
    x = np.concatenate([np.linspace(-120, 120, 60), [np.nan, np.inf, -np.inf, 0.0, np.nan, -0.0, 1e-40]])
    x = x.astype(np.float32)
    x = x.reshape(xs)
    w = np.ones(ws, np.float32)
    for act in ACTS:
        if act == "none":
            continue
        m = build("float32", attrs, act, w=w)
        with np.errstate(invalid="ignore"):  # HardSwish(-inf) = -inf * 0: NaN
            want, _ = act_ref(act, x.astype(np.float64))
        for level in LEVELS:
            with olc_core.simd_cap(level):
                s = olc_core.Session(m, strict=True, record_usage=True)
            (y,) = s.run(None, {"X": x})
            assert s.kernel_usage() == [FUSED]
            with np.errstate(invalid="ignore"):
                ok = (np.abs(y - want) <= 4 * 2.0**-24 * np.abs(want) + 1e-37) | (np.isnan(y) & np.isnan(want)) | (
                    y == want)
            assert ok.all(), (act, level, x[~ok], y[~ok], want[~ok])


@pytest.mark.parametrize("act", ["Sigmoid", "SiLU"])
def test_sigmoid_and_swish_flush_subnormal_results(act):
    """Where the exact Sigmoid or Swish is subnormal (x below about -87),
    the fused kernel stores a zero of its sign: no subnormal reaches the
    next layer (each would cost it a microcode assist per multiply-add),
    within 2^-126 of the exact value; the normal results just above stay
    as they were (Swish at -87.46 is -9.1e-37). Implicit GEMM (the
    activation pass) and depthwise (its own pass), every level."""
    tiny = np.finfo(np.float32).tiny
    x = np.concatenate([np.linspace(-104, -86, 61), [-87.46, -90.0, -1e3, 0.5]]).astype(np.float32)
    with np.errstate(over="ignore"):  # exp(1000) in the reference: Sigmoid(-1000) = 0
        want, _ = act_ref(act, x.astype(np.float64))
    assert ((np.abs(want) < tiny) & (want != 0)).any()  # the case is there
    for group in (1, 5):
        xs = (1, 5, 1, 13)
        attrs = {"group": group}
        # y = x: the identity over channels, or unit depthwise taps
        w = np.eye(5, dtype=np.float32)[:, :, None, None] if group == 1 else np.ones((5, 1, 1, 1), np.float32)
        m = build("float32", attrs, act, w=w)
        for level in LEVELS:
            with olc_core.simd_cap(level):
                s = olc_core.Session(m, strict=True, record_usage=True)
            (y,) = s.run(None, {"X": x.reshape(xs)})
            y = y.reshape(-1)
            assert s.kernel_usage() == [FUSED]
            assert not ((np.abs(y) < tiny) & (y != 0)).any(), (act, group, level, y[(np.abs(y) < tiny) & (y != 0)])
            assert (np.abs(y - want) <= 4 * 2.0**-24 * np.abs(want) + tiny).all(), (act, group, level)
            flushed = (np.abs(want) < tiny) & (want != 0)
            assert (np.signbit(y[flushed]) == np.signbit(want[flushed])).all(), (act, group, level)


@pytest.mark.parametrize("xs", [(1, 16, 4, 4), (1, 3, 5, 67)], ids=["across-channels", "planes"])
def test_depthwise_activation_values_nan_and_clamps(xs):
    """The depthwise kernels' own activation pass (not the GEMM epilogue):
    NaN kept by every activation, infinities and values at and around the
    clamps, every level. 1x1 depthwise with unit weights: y = x (a -0
    input is +0 once the zero bias is added, so no sign reaches the
    activation). Small planes go across channels, wide rows through the
    planes."""
    rng = np.random.default_rng(3)
    n = int(np.prod(xs))
    special = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-40, -1e-40, 3.0, -3.0, 2.5, -2.5], np.float32)
    x = rng.uniform(-8, 8, n).astype(np.float32)
    x[rng.choice(n, size=n // 3, replace=False)] = rng.choice(special, size=n // 3)
    x = x.reshape(xs)
    c = xs[1]
    w = np.ones((c, 1, 1, 1), np.float32)
    for act in ACTS:
        if act == "none":
            continue
        m = build("float32", {"group": c}, act, w=w)
        with np.errstate(invalid="ignore"):
            want, _ = act_ref(act, x.astype(np.float64))
        want = want.astype(np.float32)
        for level in LEVELS:
            with olc_core.simd_cap(level):
                s = olc_core.Session(m, strict=True, record_usage=True)
            (y,) = s.run(None, {"X": x})
            assert s.kernel_usage() == [FUSED] and "depthwise" in s.kernel_usage_details()[0]
            with np.errstate(invalid="ignore"):
                # x / 6 + 0.5 and alpha x + beta cancel near the clamps: an
                # absolute bound from the rounding of x's terms
                bound = 4 * 2.0**-24 * np.abs(want) + 2.0**-22 * (1 + np.abs(x.astype(np.float64))) ** 2
                ok = (np.abs(y.astype(np.float64) - want) <= bound) | (np.isnan(y) & np.isnan(want)) | (y == want)
            assert ok.all(), (act, level, x[~ok], y[~ok], want[~ok])
            assert np.array_equal(np.isnan(y), np.isnan(want)), (act, level)


@pytest.mark.parametrize("t", ["float16", "bfloat16"])
def test_half_types(t):
    """float16 / bfloat16: the folded weights are float32, the result is
    rounded once; against float64 and the unfused olc run."""
    xs, ws, attrs = GEOMS[0]
    rng = np.random.default_rng(8)
    x = rng.standard_normal(xs).astype(NP[t])
    w = (rng.standard_normal(ws) / 8).astype(NP[t])
    b = (0.2 * rng.standard_normal(ws[0])).astype(NP[t])
    p = bn_params(rng, ws[0], t)
    for act in ("Relu", "HardSwish"):
        m = build(t, attrs, act, bn=p, w=w, b=b)
        want, bound = reference(x.astype(np.float32), w.astype(np.float32), b.astype(np.float32), attrs,
                                {k: v.astype(np.float32) for k, v in p.items()}, 1e-3, act)
        bound = bound + OUT_EPS[t] * np.abs(want)
        s = olc_core.Session(m, threads=2, strict=True, record_usage=True)
        (y,) = s.run(None, {"X": x})
        assert y.dtype == NP[t] and s.kernel_usage() == [FUSED]
        assert_within(y, want, bound, f"{t} {act}")


def test_nan_in_input_reaches_the_same_outputs():
    xs, ws, attrs = GEOMS[0]
    rng = np.random.default_rng(4)
    x = rng.standard_normal(xs).astype(np.float32)
    x[0, 2, 4, 5] = np.nan
    w = rng.standard_normal(ws).astype(np.float32)
    m = build("float32", attrs, "Relu", bn=bn_params(rng, ws[0]), w=w)
    (y,) = olc_core.Session(m, strict=OTHERS_STRICT).run(None, {"X": x})
    (u,) = olc_core.Session(m, strict=OTHERS_STRICT, fusion=False).run(None, {"X": x})
    assert np.array_equal(np.isnan(y), np.isnan(u)) and np.isnan(y).sum() == 9 * ws[0]


# ---------------------------------------------------------------- not fused


def _plan_ops(s):
    return sorted((e.op_type, e.kernel) for e in s.kernel_plan())


def _check_unfused_equal(m, feeds):
    (a,) = olc_core.Session(m, strict=False).run(None, feeds)[:1]
    (b,) = olc_core.Session(m, strict=False, fusion=False).run(None, feeds)[:1]
    np.testing.assert_array_equal(a, b)


def test_not_fused_conv_output_read_twice():
    xs, ws, attrs = GEOMS[0]
    rng = np.random.default_rng(5)
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float32)
    extra = [helper.make_node("Neg", ["conv_out"], ["out_neg"], name="neg0")]
    m = build("float32", attrs, "Relu", w=w, extra=extra)
    s = olc_core.Session(m, strict=OTHERS_STRICT)
    assert not fused_entries(s), _plan_ops(s)
    _check_unfused_equal(m, {"X": x})


def test_not_fused_conv_output_is_graph_output():
    _, ws, attrs = GEOMS[0]
    rng = np.random.default_rng(5)
    w = rng.standard_normal(ws).astype(np.float32)
    m = build("float32", attrs, "Relu", w=w)
    m.graph.output.append(helper.make_tensor_value_info("conv_out", TensorProto.FLOAT, None))
    s = olc_core.Session(m, strict=OTHERS_STRICT)
    assert not fused_entries(s)


def test_silu_fused_only_when_its_values_are_private():
    """Mul(y, Sigmoid(y)) goes into the Conv as Swish only when y is read by
    those two alone and the Sigmoid by the Mul alone, neither an output."""
    xs, ws, attrs = GEOMS[0]
    rng = np.random.default_rng(5)
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float32)
    fused = build("float32", attrs, "SiLU", w=w)
    s = olc_core.Session(fused, strict=OTHERS_STRICT)
    (entry,) = fused_entries(s)
    assert [n for n, _ in entry.fused_nodes] == ["conv0", "sig0", "act0"]
    third = build("float32", attrs, "SiLU", w=w, extra=[helper.make_node("Neg", ["conv_out"], ["out_neg"], name="n0")])
    sig_read = build("float32", attrs, "SiLU", w=w, extra=[helper.make_node("Neg", ["sig_out"], ["out_neg"], name="n0")])
    sig_out = build("float32", attrs, "SiLU", w=w)
    sig_out.graph.output.append(helper.make_tensor_value_info("sig_out", TensorProto.FLOAT, None))
    for m in (third, sig_read, sig_out):
        s = olc_core.Session(m, strict=OTHERS_STRICT)
        assert not fused_entries(s), _plan_ops(s)
        _check_unfused_equal(m, {"X": x})


def test_swish_op_fused():
    """Swish (opset 24, alpha an attribute) after a Conv and a normalization:
    one FusedConv, against the float64 reference and onnxruntime."""
    xs, ws, attrs = GEOMS[0]
    rng = np.random.default_rng(9)
    x = rng.standard_normal(xs).astype(np.float32)
    w = (rng.standard_normal(ws) / np.sqrt(np.prod(ws[1:]))).astype(np.float32)
    p = bn_params(rng, ws[0])
    m = build("float32", attrs, "none", bn=p, w=w, eps=1e-3, opset=24)
    m.graph.node[-1].output[0] = "bn_out"
    m.graph.node.append(helper.make_node("Swish", ["bn_out"], ["Y"], name="act0", alpha=0.7))
    y64, bound = reference(x, w, None, attrs, p, 1e-3, "none")
    want = y64 / (1 + np.exp(-0.7 * y64))
    for level in LEVELS:
        with olc_core.simd_cap(level):
            s = olc_core.Session(m, strict=True, record_usage=True)
        (y,) = s.run(None, {"X": x})
        assert s.kernel_usage() == [FUSED] and "+Swish" in s.kernel_usage_details()[0]
        assert_within(y, want, 1.2 * bound + 4 * 2.0**-24 * np.abs(want), level)
    assert_within(ort_run(m, {"X": x}), want, 1.2 * bound + 4 * 2.0**-24 * np.abs(want), "onnxruntime")


def test_bn_output_read_twice_folds_bn_only():
    """The normalization's output is read by the activation and by another
    node: BatchNormalization is folded, the activation runs on its own."""
    xs, ws, attrs = GEOMS[0]
    rng = np.random.default_rng(6)
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float32)
    extra = [helper.make_node("Neg", ["bn_out"], ["out_neg"], name="neg0")]
    m = build("float32", attrs, "Relu", bn=bn_params(rng, ws[0]), w=w, extra=extra)
    s = olc_core.Session(m, strict=OTHERS_STRICT)
    (entry,) = fused_entries(s)
    assert [n for n, _ in entry.fused_nodes] == ["conv0", "bn0"]
    ys = s.run(None, {"X": x})
    us = olc_core.Session(m, strict=OTHERS_STRICT, fusion=False).run(None, {"X": x})
    for a, b in zip(ys, us):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("what", ["fed-W", "fed-scale", "training"])
def test_bn_not_folded_without_constants(what):
    """A fed W or a fed normalization input cannot be folded at creation,
    and a training-mode normalization is not an affine map: the Conv runs
    unfused (the activation after the normalization cannot join it)."""
    xs, ws, attrs = GEOMS[0]
    rng = np.random.default_rng(7)
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float32)
    p = bn_params(rng, ws[0])
    m = build("float32", attrs, "Relu", bn=p, w=None if what == "fed-W" else w, bn_inputs_fed=what == "fed-scale")
    if what == "training":
        m.graph.node[1].attribute.append(helper.make_attribute("training_mode", 1))
        s = olc_core.Session(m)
        assert not fused_entries(s)
        return
    s = olc_core.Session(m, strict=OTHERS_STRICT)
    assert not fused_entries(s), _plan_ops(s)
    feeds = {"X": x} | ({"W": w} if what == "fed-W" else {}) | (
        dict(zip(["bn_scale", "bn_b", "bn_mean", "bn_var"], p.values())) if what == "fed-scale" else {})
    (y,) = s.run(None, feeds)
    want, bound = reference(x, w, None, attrs, p, 1e-3, "Relu")
    assert_within(y, want, 4 * bound + 1e-5 * np.abs(want), what)


def test_clip_with_fed_bound_not_fused():
    xs, ws, attrs = GEOMS[1]
    rng = np.random.default_rng(9)
    w = rng.standard_normal(ws).astype(np.float32)
    m = build("float32", attrs, "Clip", w=w)
    node = m.graph.node[-1]
    m.graph.initializer.remove(next(i for i in m.graph.initializer if i.name == "lo"))
    m.graph.input.append(helper.make_tensor_value_info("lo", TensorProto.FLOAT, []))
    s = olc_core.Session(m, strict=OTHERS_STRICT)
    assert not fused_entries(s) and node.op_type == "Clip"
    x = rng.standard_normal(xs).astype(np.float32)
    (y,) = s.run(None, {"X": x, "lo": np.array(-0.25, np.float32)})
    want, _ = conv_ref(x, w, None, attrs)
    np.testing.assert_allclose(y, np.clip(want, -0.25, 1.5), rtol=1e-5, atol=1e-5)


def test_float64_conv_left_alone():
    """FusedConv claims float32, float16 and bfloat16 only."""
    xs, ws, attrs = GEOMS[0]
    rng = np.random.default_rng(10)
    x = rng.standard_normal(xs)
    w = rng.standard_normal(ws)
    m = build("float32", attrs, "Relu", w=w)
    for v in list(m.graph.input) + list(m.graph.output):
        v.type.tensor_type.elem_type = TensorProto.DOUBLE
    s = olc_core.Session(m)
    assert not fused_entries(s)
    (y,) = s.run(None, {"X": x})
    np.testing.assert_allclose(y, np.maximum(conv_ref(x, w, None, attrs)[0], 0), rtol=1e-10, atol=1e-10)


# ---------------------------------------------------------------- errors


def test_error_names_the_fused_node():
    """A shape error in a fused Conv is raised naming the node (its name
    carries the Conv's), before any output is written."""
    xs, ws, attrs = GEOMS[0]
    rng = np.random.default_rng(11)
    m = build("float32", attrs, "Relu", w=None)
    s = olc_core.Session(m, strict=True)
    assert fused_entries(s)
    x = rng.standard_normal(xs).astype(np.float32)
    bad_w = rng.standard_normal((ws[0], ws[1] + 1, 3, 3)).astype(np.float32)
    with pytest.raises(olc_core.OlcError, match=r"conv0.*input channels per group"):
        s.run(None, {"X": x, "W": bad_w})


@pytest.mark.parametrize("attrs,pattern", [
    ({"activation": "Tanh"}, "unknown activation 'Tanh'"),
    ({"activation": "Clip", "activation_params": [0.0]}, "Clip takes 2 parameters"),
    ({"activation_params": [1.0]}, "without 'activation'"),
    ({"activation": "Relu", "alpha": 1.0}, "unknown attribute 'alpha'"),
])
def test_fused_node_attribute_errors(attrs, pattern):
    """A FusedConv node written directly with bad attributes is refused at
    session creation, naming the node."""
    node = helper.make_node("FusedConv", ["X", "W"], ["Y"], name="fc0", domain="olc.fused", **attrs)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, None),
                                        helper.make_tensor_value_info("W", TensorProto.FLOAT, None)],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("olc.fused", 1)])
    with pytest.raises(olc_core.OlcError, match=pattern) as ei:
        olc_core.Session(m, strict=True)
    assert "fc0" in str(ei.value)


def test_shape_of_a_fused_conv_is_cached():
    """A classifier head as exporters write it (flatten through
    Shape -> Gather -> Unsqueeze -> Concat -> Reshape of the last Conv's
    output): FusedConv's output shape follows from its input shapes, so the
    shape plan caches the Shape chain after it like after a plain Conv."""
    rng = np.random.default_rng(3)
    w = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "W")
    zero = numpy_helper.from_array(np.array([0], np.int64), "zero")
    minus1 = numpy_helper.from_array(np.array([-1], np.int64), "minus1")
    nodes = [
        helper.make_node("Conv", ["X", "W"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("Shape", ["r"], ["shape"], name="shape"),
        helper.make_node("Gather", ["shape", "zero"], ["batch"], name="batch", axis=0),
        helper.make_node("Concat", ["batch", "minus1"], ["target"], name="target", axis=0),
        helper.make_node("Reshape", ["r", "target"], ["Y"], name="flatten"),
    ]
    g = helper.make_graph(nodes, "head", [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["N", 3, 8, 8])],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)], [w, zero, minus1])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    # Gather and Concat come from olc-tensor: strict only where it is installed too
    # (not in a sanitize build of olc-matmul with olc-elementwise and olc-normalization)
    strict = OTHERS_STRICT and {"Gather", "Concat"} <= {r.op_type for r in olc_core.registered_kernels()}
    s = olc_core.Session(m, strict=strict, record_usage=True)
    plan = s.kernel_plan()
    assert [e.op_type for e in plan if e.node_name == "conv" or e.op_type == "FusedConv"] == ["FusedConv"]
    assert {e.node_name for e in plan if e.shape_plan == "cached"} >= {"shape", "batch", "target"}
    x = rng.standard_normal((2, 3, 8, 8)).astype(np.float32)
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"X": x})[0]
    for _ in range(2):
        np.testing.assert_allclose(s.run(None, {"X": x})[0], want, rtol=1e-5, atol=1e-5)
    assert s.shape_plan_stats()["hits"] == 1
