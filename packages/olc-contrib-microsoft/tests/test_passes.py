"""The graph pass: raw-export-shaped models built with onnx.helper, the
rewrite taken (kernel_plan shows the fused node and the nodes it replaced),
results against onnxruntime and against the same session without fusion;
and the cases where it must not fire."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
from cm_testlib import NP_TYPE, ONNX_TYPE, assert_close
from olc_contrib_microsoft import passes
from onnx import helper, numpy_helper

import olc_core

B, S, H = 2, 5, 48


class G:
    """A graph under construction: nodes, initializers, Constant nodes."""

    def __init__(self, t="float32", seed=0):
        self.t = t
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits, self.inputs = [], [], []
        self.n = 0

    def name(self, base):
        self.n += 1
        return f"{base}_{self.n}"

    def input(self, name, shape, t=None):
        self.inputs.append(helper.make_tensor_value_info(name, ONNX_TYPE[t or self.t], shape))
        return name

    def init(self, shape, scale=0.5, base="w"):
        name = self.name(base)
        self.inits.append(numpy_helper.from_array((scale * self.rng.standard_normal(shape)).astype(NP_TYPE[self.t]),
                                                  name))
        return name

    def scalar(self, value, as_node=True):
        """A scalar as torch.onnx writes it (a Constant node) or as an initializer."""
        name = self.name("c")
        arr = np.array(value, NP_TYPE[self.t])
        if as_node:
            self.nodes.append(helper.make_node("Constant", [], [name], name=self.name("Constant"),
                                               value=numpy_helper.from_array(arr)))
        else:
            self.inits.append(numpy_helper.from_array(arr, name))
        return name

    def op(self, op, inputs, n_out=1, **attrs):
        outs = [self.name(op.lower()) for _ in range(n_out)]
        self.nodes.append(helper.make_node(op, inputs, outs, name=self.name(op), **attrs))
        return outs[0] if n_out == 1 else outs

    def model(self, outputs, opset=17, extra_opsets=()):
        g = helper.make_graph(self.nodes, "g", self.inputs,
                              [helper.make_tensor_value_info(o, ONNX_TYPE[self.t], None) for o in outputs],
                              initializer=self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset), *extra_opsets])
        m.ir_version = 10
        return m


def feeds(m, rng=None):
    rng = rng or np.random.default_rng(1)
    out = {}
    for vi in m.graph.input:
        dims = [d.dim_value if d.HasField("dim_value") else {"batch": B, "seq": S}[d.dim_param]
                for d in vi.type.tensor_type.shape.dim]
        out[vi.name] = rng.standard_normal(dims).astype(helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type))
    return out


def fused_entries(s):
    return [e for e in s.kernel_plan() if e.fused_nodes and e.graph_pass == passes.PASS_NAME]


def run_both(m, f, t="float32", ort=True, unfused=True):
    """olc with the pass, olc without fusion, onnxruntime: all agree. Not
    strict: with only this family installed, MatMul and LayerNormalization
    run on the onnx.reference fallback."""
    s = olc_core.Session(m, record_usage=True)
    got = s.run(None, f)
    tol = {"float32": (2e-5, 2e-5), "float16": (3e-3, 3e-3), "bfloat16": (2e-2, 2e-2)}[t]
    if unfused:
        plain = olc_core.Session(m, fusion=False).run(None, f)
        for a, b in zip(got, plain):
            assert_close(a, b, t, "fused vs unfused", tol=tol)
    if ort:
        import onnxruntime as rt

        so = rt.SessionOptions()
        so.log_severity_level = 3
        want = rt.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, f)
        for a, b in zip(got, want):
            assert_close(a, b, t, "fused vs onnxruntime", tol=tol)
    return s


def residual_block(g, x, bias=True, skip_shape=None, norm="LayerNormalization", beta=True, eps=1e-5, **norm_attrs):
    """x @ W (+ b) + residual -> norm, as an exporter writes a post-norm block."""
    res = g.input("res", skip_shape or ["batch", "seq", H])
    y = g.op("MatMul", [x, g.init((H, H), 0.2)])
    if bias:
        y = g.op("Add", [g.init((H,), base="b"), y])
    s = g.op("Add", [y, res])
    ins = [s, g.init((H,), 0.2, "gamma")] + ([g.init((H,), base="beta")] if beta else [])
    return g.op(norm, ins, epsilon=eps, **norm_attrs)


@pytest.mark.parametrize("t", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("bias", [True, False])
def test_add_layernorm_becomes_skip_layernorm(bias, t):
    g = G(t)
    x = g.input("x", ["batch", "seq", H])
    y = residual_block(g, x, bias=bias, eps=1e-12)
    m = g.model([y])
    s = run_both(m, feeds(m), t, ort=t != "bfloat16")
    (e,) = fused_entries(s)
    assert e.op_type == "SkipLayerNormalization" and e.kernel == "olc_contrib_microsoft::SkipLayerNormalization"
    assert [op for _, op in e.fused_nodes] == (["Add", "Add", "LayerNormalization"] if bias
                                              else ["Add", "LayerNormalization"])
    assert "olc_contrib_microsoft::SkipLayerNormalization" in s.kernel_usage()


@pytest.mark.parametrize("skip_shape", [[1, "seq", H], ["seq", H]])
def test_broadcast_skip(skip_shape):
    g = G()
    x = g.input("x", ["batch", "seq", H])
    m = g.model([residual_block(g, x, skip_shape=skip_shape)])
    s = run_both(m, feeds(m))
    assert [e.op_type for e in fused_entries(s)] == ["SkipLayerNormalization"]


def test_sum_read_elsewhere_comes_from_the_fused_node():
    # pre-norm residual stream: the sum feeds the norm and the next residual
    g = G()
    x = g.input("x", ["batch", "seq", H])
    y = g.op("Add", [g.op("MatMul", [x, g.init((H, H), 0.2)]), g.init((H,), base="b")])
    s = g.op("Add", [x, y])
    n = g.op("LayerNormalization", [s, g.init((H,), 0.2, "gamma"), g.init((H,), base="beta")], epsilon=1e-5)
    out = g.op("Add", [s, g.op("MatMul", [n, g.init((H, H), 0.2)])])
    m = g.model([out])
    sess = run_both(m, feeds(m))
    (e,) = fused_entries(sess)
    # the bias Add stays: the sum keeps the original additions
    assert [op for _, op in e.fused_nodes] == ["Add", "LayerNormalization"]
    fused_node = next(p for p in sess.kernel_plan() if p.node_name == e.node_name)
    assert fused_node.op_type == "SkipLayerNormalization"
    got = sess.run(None, feeds(m))[0]
    plain = olc_core.Session(m, fusion=False).run(None, feeds(m))[0]
    assert_close(got, plain, "float32", "residual stream", tol=(2e-6, 1e-5))


@pytest.mark.parametrize("norm,opset,extra", [("SimplifiedLayerNormalization", 17, {}),
                                              ("RMSNormalization", 23, {})])
@pytest.mark.parametrize("bias", [True, False])
def test_add_rms_norm_becomes_skip_simplified(norm, opset, extra, bias):
    g = G()
    x = g.input("x", ["batch", "seq", H])
    y = residual_block(g, x, bias=bias, norm=norm, beta=False, eps=1e-6, **extra)
    m = g.model([y], opset=opset)
    # onnx.reference has no SimplifiedLayerNormalization (an onnxruntime
    # contrib op): unfused, it needs olc-normalization
    unfused = norm != "SimplifiedLayerNormalization" or importlib.util.find_spec("olc_normalization") is not None
    s = run_both(m, feeds(m), unfused=unfused)
    (e,) = fused_entries(s)
    assert e.op_type == "SkipSimplifiedLayerNormalization"
    assert [op for _, op in e.fused_nodes][-1] == norm


def erf_gelu(g, x, grouping="xh_half", div=True, as_node=True):
    d = (g.op("Div", [x, g.scalar(1.4142135, as_node)]) if div
         else g.op("Mul", [g.scalar(0.70710678, as_node), x]))
    h = g.op("Add", [g.scalar(1.0, as_node), g.op("Erf", [d])])
    return product(g, x, h, grouping, as_node)


def product(g, x, h, grouping, as_node=True):
    if grouping == "xh_half":
        return g.op("Mul", [g.op("Mul", [x, h]), g.scalar(0.5, as_node)])
    if grouping == "xhalf_h":
        return g.op("Mul", [h, g.op("Mul", [g.scalar(0.5, as_node), x])])
    return g.op("Mul", [x, g.op("Mul", [h, g.scalar(0.5, as_node)])])  # x * (h * 0.5)


def tanh_gelu(g, x, grouping="xhalf_h", cube="pow", as_node=True):
    if cube == "pow":
        c = g.op("Pow", [x, g.scalar(3.0, as_node)])
    else:
        c = g.op("Mul", [x, g.op("Mul", [x, x])])
    inner = g.op("Add", [x, g.op("Mul", [g.scalar(0.044715, as_node), c])])
    t = g.op("Tanh", [g.op("Mul", [g.scalar(0.7978845608, as_node), inner])])
    return product(g, x, g.op("Add", [g.scalar(1.0, as_node), t]), grouping, as_node)


def ffn_input(g, bias):
    x = g.input("x", ["batch", "seq", H])
    y = g.op("MatMul", [x, g.init((H, 2 * H), 0.3)])
    return g.op("Add", [y, g.init((2 * H,), base="b")]) if bias else y


@pytest.mark.parametrize("t", ["float32", "float16"])
@pytest.mark.parametrize("grouping", ["xh_half", "xhalf_h", "x_hhalf"])
@pytest.mark.parametrize("div,as_node", [(True, True), (False, False)])
@pytest.mark.parametrize("bias", [True, False])
def test_erf_gelu(bias, div, as_node, grouping, t):
    g = G(t)
    y = erf_gelu(g, ffn_input(g, bias), grouping, div, as_node)
    m = g.model([y])
    s = run_both(m, feeds(m), t)
    (e,) = fused_entries(s)
    assert e.op_type == ("BiasGelu" if bias else "Gelu")
    ops = sorted(op for _, op in e.fused_nodes)
    assert ops.count("Erf") == 1 and ops.count("Mul") == (3 if not div else 2) and len(ops) == 5 + bias


@pytest.mark.parametrize("grouping", ["xh_half", "xhalf_h", "x_hhalf"])
@pytest.mark.parametrize("cube", ["pow", "mul"])
@pytest.mark.parametrize("bias", [True, False])
def test_tanh_gelu(bias, cube, grouping):
    g = G()
    y = tanh_gelu(g, ffn_input(g, bias), grouping, cube)
    m = g.model([y])
    s = run_both(m, feeds(m))
    (e,) = fused_entries(s)
    assert e.op_type == "FastGelu" and e.kernel == "olc_contrib_microsoft::FastGelu"
    # Pow (or two Mul), Mul, Add, Mul, Tanh, Add, two Mul (+ the bias Add)
    assert len(e.fused_nodes) == (8 if cube == "pow" else 9) + bias


def test_naive_session_runs_the_naive_fused_kernels():
    g = G()
    h = erf_gelu(g, ffn_input(g, True))
    y = residual_block(g, g.op("MatMul", [h, g.init((2 * H, H), 0.2)]))
    m = g.model([y])
    s = olc_core.Session(m, record_usage=True, naive="olc-contrib-microsoft")
    s.run(None, feeds(m))
    kernels = {e.kernel for e in fused_entries(s)}
    assert kernels == {"olc_contrib_microsoft::NaiveBiasGelu", "olc_contrib_microsoft::NaiveSkipLayerNormalization"}


# ------------------------------------------------------------ must not fire


def no_fusion(m, f=None, ort=True):
    s = run_both(m, f or feeds(m), ort=ort)
    assert fused_entries(s) == []
    return s


def test_layernorm_over_two_axes():
    g = G()
    x = g.input("x", ["batch", S, H])
    s = g.op("Add", [x, g.input("res", ["batch", S, H])])
    y = g.op("LayerNormalization", [s, g.init((S, H), 0.2), g.init((S, H))], axis=1)
    no_fusion(g.model([y]))


def test_layernorm_other_axis():
    g = G()
    x = g.input("x", ["batch", H, H])
    s = g.op("Add", [x, g.input("res", ["batch", H, H])])
    y = g.op("LayerNormalization", [s, g.init((H, H), 0.2), g.init((H, H))], axis=-2)
    no_fusion(g.model([y]))


def test_layernorm_stash_type_0():
    # statistics in the input type: neither olc nor onnx.reference runs it;
    # the plan alone shows the pass left it
    g = G()
    x = g.input("x", ["batch", "seq", H])
    s = g.op("Add", [x, g.input("res", ["batch", "seq", H])])
    y = g.op("LayerNormalization", [s, g.init((H,), 0.2), g.init((H,))], stash_type=0)
    assert fused_entries(olc_core.Session(g.model([y]))) == []


def test_sum_with_an_unprovable_shape():
    # the residual's dims are unrelated symbols: either operand might be the broadcast one
    g = G()
    x = g.input("x", ["batch", "seq", H])
    s = g.op("Add", [x, g.input("res", ["other", "dims", H])])
    y = g.op("LayerNormalization", [s, g.init((H,), 0.2), g.init((H,))])
    m = g.model([y])
    rng = np.random.default_rng(0)
    f = {"x": rng.standard_normal((B, S, H)).astype(np.float32),
         "res": rng.standard_normal((1, S, H)).astype(np.float32)}
    no_fusion(m, f)


def test_layernorm_mean_output_used():
    g = G()
    x = g.input("x", ["batch", "seq", H])
    s = g.op("Add", [x, g.input("res", ["batch", "seq", H])])
    y, mean = g.op("LayerNormalization", [s, g.init((H,), 0.2), g.init((H,))], n_out=2)
    no_fusion(g.model([y, mean]), ort=False)


def test_bias_not_folded_when_it_cannot_be():
    # fed bias, 2-D bias, bias Add read elsewhere: the residual still fuses, without the bias
    for variant in ("fed", "2d", "shared"):
        g = G()
        x = g.input("x", ["batch", "seq", H])
        y = g.op("MatMul", [x, g.init((H, H), 0.2)])
        b = g.input("bias", [H]) if variant == "fed" else g.init((1, H) if variant == "2d" else (H,), base="b")
        yb = g.op("Add", [y, b])
        s = g.op("Add", [yb, g.input("res", ["batch", "seq", H])])
        n = g.op("LayerNormalization", [s, g.init((H,), 0.2), g.init((H,))])
        outs = [n, yb] if variant == "shared" else [n]
        m = g.model(outs)
        sess = run_both(m, feeds(m))
        (e,) = fused_entries(sess)
        assert [op for _, op in e.fused_nodes] == ["Add", "LayerNormalization"], variant


def test_gelu_intermediate_read_elsewhere():
    g = G()
    x = ffn_input(g, True)
    d = g.op("Div", [x, g.scalar(1.4142135)])
    e = g.op("Erf", [d])
    h = g.op("Add", [e, g.scalar(1.0)])
    y = g.op("Mul", [g.op("Mul", [x, h]), g.scalar(0.5)])
    no_fusion(g.model([y, e]))


def test_gelu_bias_read_elsewhere_keeps_the_bias_add():
    g = G()
    x = ffn_input(g, True)
    y = erf_gelu(g, x)
    m = g.model([y, x])
    s = run_both(m, feeds(m))
    (e,) = fused_entries(s)
    assert e.op_type == "Gelu" and "Add" in [op for _, op in e.fused_nodes]  # the 1 + erf Add only
    assert len(e.fused_nodes) == 5


@pytest.mark.parametrize("which,value", [("sqrt2", 1.5), ("one", 2.0), ("half", 0.25), ("cubic", 0.05),
                                         ("slope", 0.8)])
def test_gelu_with_other_constants(which, value):
    g = G()
    x = ffn_input(g, False)
    if which in ("sqrt2", "one", "half"):
        d = g.op("Div", [x, g.scalar(value if which == "sqrt2" else 1.4142135)])
        h = g.op("Add", [g.op("Erf", [d]), g.scalar(value if which == "one" else 1.0)])
        y = g.op("Mul", [g.op("Mul", [x, h]), g.scalar(value if which == "half" else 0.5)])
    else:
        c = g.op("Pow", [x, g.scalar(3.0)])
        inner = g.op("Add", [x, g.op("Mul", [g.scalar(value if which == "cubic" else 0.044715), c])])
        t = g.op("Tanh", [g.op("Mul", [g.scalar(value if which == "slope" else 0.7978845608), inner])])
        y = g.op("Mul", [g.op("Mul", [g.scalar(0.5), x]), g.op("Add", [t, g.scalar(1.0)])])
    no_fusion(g.model([y]))


def test_float64_is_left_alone():
    g = G("float64")
    x = g.input("x", ["batch", "seq", H])
    y = erf_gelu(g, x)
    no_fusion(g.model([y]), ort=False)


def test_fusion_off():
    g = G()
    m = g.model([erf_gelu(g, ffn_input(g, True))])
    s = olc_core.Session(m, fusion=False)
    assert fused_entries(s) == []
    assert fused_entries(olc_core.Session(m)) != []


def test_pass_is_registered():
    assert any(p.name == passes.PASS_NAME and p.family == "olc-contrib-microsoft" for p in olc_core.graph_passes())


# ------------------------------------------------------- a BERT-style export

_TOOLS = Path(__file__).resolve().parents[3] / "tools"


def _all_families() -> bool:
    return all(importlib.util.find_spec(f"olc_{f}") for f in ("elementwise", "matmul", "normalization", "tensor"))


@pytest.mark.skipif(not (_TOOLS / "model_builders.py").exists(), reason="needs the repository's tools/")
@pytest.mark.skipif(not _all_families(), reason="every node native needs the other families installed")
@pytest.mark.parametrize("threads", [1, 2])
def test_bert_export_fuses_and_matches_onnxruntime(threads):
    sys.path.insert(0, str(_TOOLS))
    try:
        from model_builders import EncoderConfig, bert_encoder, encoder_feeds
    finally:
        sys.path.remove(str(_TOOLS))
    import onnxruntime as rt

    config = EncoderConfig(layers=2)
    m = bert_encoder(config)
    s = olc_core.Session(m, threads=threads, strict=True, record_usage=True)
    ops = [e.op_type for e in fused_entries(s)]
    # per layer: the attention output and the FFN output norms, the FFN GELU
    assert ops.count("SkipLayerNormalization") == 2 * config.layers and ops.count("BiasGelu") == config.layers
    for batch, seq in ((1, 128), (3, 17)):
        f = encoder_feeds(config, batch, seq, seed=batch)
        got = s.run(None, f)
        want = rt.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, f)
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=2e-5)
    assert not any(k.startswith("onnx.reference") for k in s.kernel_usage())

