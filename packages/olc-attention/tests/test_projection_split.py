"""com.microsoft Attention split by the graph pass `attention-projection`:
MatMul(input, weights) on olc-matmul, then olc.fused::PackedQkvAttention
adding the bias as Q, K and V are used.

Each model is one Attention node with constant weights and bias (as
onnxruntime's transformer optimizer writes it). The split is checked
against the unsplit kernel (fusion off), the naive kernel of the projected
form, onnxruntime's CPU kernel and a float64 formula, for every mask_index
form, unidirectional with a past, attention_bias, padding, head sizes that
are not whole vectors, every SIMD level and the 16-bit types; the cases
the pass must leave alone keep the unsplit kernel. Where olc-matmul is not
installed the split never happens (checked by unregistering its plugin
when it is)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from at_testlib import LEVELS, MS, NP_TYPE, ONNX_TYPE, assert_close, ort_run, session
from olc_attention import passes
from olc_attention.manifest import kernel_name
from onnx import helper, numpy_helper
from test_encoder import attend, heads, merge

import olc_core
from olc_core.graph_passes import build_context
from olc_core.testing import guarded

HAS_MATMUL = any(name == "matmul" for name, _ in olc_core.plugins())
needs_matmul = pytest.mark.skipif(not HAS_MATMUL, reason="the split runs the projection on olc-matmul's MatMul")
MATMUL = "olc_matmul::MatMul"
SPLIT = [MATMUL, kernel_name("PackedQkvAttention")]
UNSPLIT = [kernel_name("MicrosoftAttention")]


def build(c):
    """One Attention node: weights and bias initializers (graph inputs with
    c["feed"] naming them), the other inputs fed. Returns (model, feeds)."""
    t = c.get("t", "float32")
    B, S, Din, N, P = c["B"], c["S"], c["Din"], c["N"], c.get("P", 0)
    dq, dk, dv = c.get("sizes", (c.get("hidden", Din),) * 3)
    rng = np.random.default_rng(sum(map(ord, str(sorted(c.items())))))
    T = P + S
    values = {"input": rng.uniform(-1, 1, (B, S, Din)),
              "weights": rng.uniform(-1, 1, (Din, dq + dk + dv)) / np.sqrt(Din)}
    if c.get("bias", True):
        values["bias"] = rng.uniform(-0.5, 0.5, (dq + dk + dv,))
    if "mask" in c:
        values["mask_index"] = np.array(c["mask"], np.int32)
    if P:
        values["past"] = rng.uniform(-1, 1, (2, B, N, P, dq // N))
    if c.get("attn_bias"):
        values["attention_bias"] = rng.uniform(-1, 1, (B, N, S, T))
    for n in values:
        if n != "mask_index":
            values[n] = values[n].astype(NP_TYPE[t])
    names = ["input", "weights", "bias", "mask_index", "past", "attention_bias"]
    ins = [n if n in values else "" for n in names]
    while not ins[-1]:
        ins.pop()
    attrs = {"num_heads": N, **c.get("attrs", {})}
    if "sizes" in c:
        attrs.setdefault("qkv_hidden_sizes", list(c["sizes"]))
    outs = ["y", "present"] if P or c.get("present") else ["y"]
    node = helper.make_node("Attention", ins, outs, name="n0", domain=MS, **attrs)
    fed = {"input", "mask_index", "past", "attention_bias", *c.get("feed", ())}
    typ = {n: ONNX_TYPE["int32" if n == "mask_index" else t] for n in values}
    shape = c.get("input_shape", ["batch", "seq", Din])
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(n, typ[n], shape if n == "input" else None) for n in names if n in values
         and n in fed],
        [helper.make_value_info(n, helper.TypeProto()) for n in outs],
        initializer=[numpy_helper.from_array(values[n], n) for n in names if n in values and n not in fed])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(MS, 1)])
    model.ir_version = 10
    return model, {n: values[n] for n in names if n in values and n in fed}


def formula(c, model, feeds):
    """float64: the projection with its bias, masks, past, causal; (Y, present)."""
    g = {i.name: numpy_helper.to_array(i).astype(np.float64) for i in model.graph.initializer}
    g.update({n: a.astype(np.float64) for n, a in feeds.items()})
    B, S, N, P = c["B"], c["S"], c["N"], c.get("P", 0)
    dq, dk, _ = c.get("sizes", (c.get("hidden", c["Din"]),) * 3)
    qkv = g["input"] @ g["weights"] + g.get("bias", 0.0)
    q, k, v = heads(qkv[..., :dq], N), heads(qkv[..., dq:dq + dk], N), heads(qkv[..., dq + dk:], N)
    if P:
        k, v = np.concatenate([g["past"][0], k], 2), np.concatenate([g["past"][1], v], 2)
    T = P + S
    add = np.zeros((B, 1, S, T))
    if "mask_index" in feeds:
        m = feeds["mask_index"]
        j = np.arange(T)
        if m.ndim == 1 and m.shape[0] == B:
            keep = (j[None] < m[:, None])[:, None]
        elif m.ndim == 1:
            keep = ((j[None] < m[:B, None]) & (j[None] >= m[B:, None]))[:, None]
        else:
            keep = m[:, None] > 0 if m.ndim == 2 else m > 0
        add = add + np.where(keep, 0.0, c.get("attrs", {}).get("mask_filter_value", -10000.0))[:, None]
    if "attention_bias" in g:
        add = add + g["attention_bias"]
    scale = c.get("attrs", {}).get("scale", 1 / np.sqrt(dq // N))
    y = attend(q, k, v, scale, add, P if c.get("attrs", {}).get("unidirectional") else None)
    return merge(y), np.stack([k, v]) if k.shape == v.shape else None


CASES = [
    {"B": 2, "S": 5, "Din": 16, "N": 2},
    {"B": 2, "S": 5, "Din": 16, "N": 2, "mask": [3, 5]},                                   # lengths (padding)
    {"B": 2, "S": 5, "Din": 16, "N": 2, "mask": [4, 5, 1, 0]},                             # end and start
    {"B": 2, "S": 5, "Din": 16, "N": 2, "mask": [[1, 1, 1, 0, 0], [1, 0, 1, 1, 1]]},       # 2-D
    {"B": 1, "S": 3, "Din": 24, "N": 2, "hidden": 16, "mask": [[[1, 0, 1], [1, 1, 0], [0, 0, 1]]],
     "attn_bias": True},                                                                   # 3-D
    {"B": 2, "S": 4, "Din": 32, "N": 4, "P": 3, "attrs": {"unidirectional": 1, "scale": 0.2}, "mask": [7, 5]},
    {"B": 2, "S": 1, "Din": 32, "N": 4, "hidden": 64, "P": 9, "attrs": {"unidirectional": 1}},
    {"B": 1, "S": 6, "Din": 32, "N": 4, "attrs": {"unidirectional": 1}, "present": True},
    {"B": 2, "S": 7, "Din": 40, "N": 2, "sizes": (32, 32, 24), "bias": False},
    {"B": 3, "S": 67, "Din": 57, "N": 3, "mask": [67, 40, 1], "attrs": {"mask_filter_value": -30.0}},  # head size 19
    {"B": 1, "S": 128, "Din": 384, "N": 12, "mask": [100]},                                 # MiniLM-L6
    {"B": 2, "S": 33, "Din": 768, "N": 12, "mask": [[1] * 33, [1] * 20 + [0] * 13]},        # BERT-base
]
IDS = [f"c{i}" for i in range(len(CASES))]


@needs_matmul
@pytest.mark.parametrize("c", CASES, ids=IDS)
def test_the_split_matches_the_unsplit_kernel_the_naive_one_onnxruntime_and_the_formula(c):
    model, feeds = build(c)
    split = session(model, threads=2)
    got = split.run(None, feeds)
    assert split.kernel_usage() == SPLIT
    plan = split.kernel_plan()
    assert [(e.node_name, e.graph_pass) for e in plan] == [("n0/projection", passes.SPLIT_PASS_NAME),
                                                           ("n0/attention", passes.SPLIT_PASS_NAME)]
    assert plan[0].prepacked_bytes > 0 and plan[1].fused_nodes == (("n0", "Attention"),)
    unsplit = session(model, threads=2, fusion=False)
    whole = unsplit.run(None, feeds)
    assert unsplit.kernel_usage() == UNSPLIT
    naive = session(model, naive=True)
    ref = naive.run(None, feeds)
    assert naive.kernel_usage() == [MATMUL, kernel_name("PackedQkvAttention", naive=True)]
    want = ort_run(model, feeds)
    y64, present64 = formula(c, model, feeds)
    for k, g in enumerate(got):
        for other, what in ((whole[k], "unsplit"), (ref[k], "naive"), (want[k], "onnxruntime"),
                            ((y64, present64)[k], "formula")):
            assert_close(g, other, "float32", f"output {k} against the {what}")


@needs_matmul
@pytest.mark.parametrize("t", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("c", [CASES[1], CASES[4], CASES[5], CASES[9]], ids=["c1", "c4", "c5", "c9"])
def test_every_level_and_type_matches_the_naive_kernel(c, t):
    model, feeds = build(dict(c, t=t))
    naive = session(model, naive=True)
    ref = naive.run(None, feeds)
    # float32: the engine's sums against float64; 16-bit: the naive kernel
    # rounds Q, K, V (product + bias) to the type, the engine adds the bias
    # to the rounded product in float32 (half an ulp of the type apart).
    tol = {"float32": (2e-5, 2e-5), "float16": (4e-3, 4e-3), "bfloat16": (3e-2, 3e-2)}[t]
    for level in LEVELS:
        s = session(model, level=level)
        got = s.run(None, feeds)
        assert s.kernel_usage() == SPLIT
        for k, (g, n) in enumerate(zip(got, ref)):
            assert_close(g, n, t, f"{level} output {k}", tol=tol)


def packed_model(c):
    """olc.fused::PackedQkvAttention alone (the node the pass makes), every input fed."""
    model, feeds = build(dict(c, feed=("weights", "bias")))
    f = dict(feeds)
    x, w = f.pop("input"), f.pop("weights")
    t = c.get("t", "float32")
    f["qkv"] = (x.astype(np.float64) @ w.astype(np.float64)).astype(NP_TYPE[t])
    node = model.graph.node[0]
    ins = ["qkv", *node.input[2:]]
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    packed = helper.make_node("PackedQkvAttention", ins, list(node.output), name="p", domain="olc.fused", **attrs)
    graph = helper.make_graph(
        [packed], "g",
        [helper.make_tensor_value_info(n, ONNX_TYPE["int32" if n == "mask_index" else t], None) for n in ins if n],
        list(model.graph.output))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("olc.fused", 1)])
    m.ir_version = 10
    return m, {n: f[n] for n in ins if n}


@pytest.mark.parametrize("at", ["end", "start"])
@pytest.mark.parametrize("c", [CASES[2], CASES[5], dict(CASES[9], t="float16"), dict(CASES[8], t="bfloat16")],
                         ids=["c2", "c5", "c9-f16", "c8-bf16"])
def test_the_projected_kernel_reads_no_byte_outside_its_inputs(c, at):
    # The node on its own, its bias fed (not a constant), inputs against guard pages.
    model, feeds = packed_model(c)
    ref = session(model, naive=True).run(None, feeds)
    g = {n: guarded(a, at=at) for n, a in feeds.items()}
    t = c.get("t", "float32")
    tol = {"float32": (2e-5, 2e-5), "float16": (4e-3, 4e-3), "bfloat16": (3e-2, 3e-2)}[t]
    for level in LEVELS:
        s = session(model, level=level)
        got = s.run(None, g)
        assert s.kernel_usage() == [kernel_name("PackedQkvAttention")]
        for k, (y, n) in enumerate(zip(got, ref)):
            assert_close(y, n, t, f"{level} output {k}", tol=tol)


# ---------------------------------------------------------------- left alone


@pytest.mark.parametrize("c", [
    dict(CASES[1], feed=("weights",)),                 # weights fed: no constant to pack
    dict(CASES[1], feed=("bias",)),                    # bias fed
    dict(CASES[8], attrs={"qkv_hidden_sizes": [32, 32, 16]}),  # sizes that do not add up to the columns (88)
], ids=["weights-fed", "bias-fed", "sizes-mismatch"])
def test_the_pass_leaves_these_to_the_unsplit_kernel(c):
    model, feeds = build(c)
    s = session(model)
    if "attrs" in c:
        assert [e.kernel for e in s.kernel_plan()] == UNSPLIT
        with pytest.raises(olc_core.OlcError, match=r"'n0' \(Attention\).*qkv_hidden_sizes add up to 80 but weights"):
            s.run(None, feeds)
        return
    got = s.run(None, feeds)
    assert s.kernel_usage() == UNSPLIT
    assert_close(got[0], ort_run(model, feeds)[0], "float32", "output")


def context(model):
    """The graph pass context a session gives the passes (types from inference)."""
    inferred = onnx.shape_inference.infer_shapes(model)
    types = {vi.name: vi.type for vi in [*inferred.graph.input, *inferred.graph.value_info, *inferred.graph.output]}
    g = model.graph
    types.update({i.name: helper.make_tensor_type_proto(i.data_type, list(i.dims)) for i in g.initializer})
    constants = {i.name: numpy_helper.to_array(i) for i in g.initializer}
    opsets = {("ai.onnx" if o.domain == "" else o.domain): o.version for o in model.opset_import}
    return build_context(g, [n.name for n in g.node], types, constants, opsets, [()] * len(g.node))


def with_attrs(model, **attrs):
    m = onnx.ModelProto()
    m.CopyFrom(model)
    m.graph.node[0].attribute.extend(helper.make_attribute(k, v) for k, v in attrs.items())
    return m


def test_the_pass_proposes_the_split_for_attributes_it_can_express():
    model, _ = build(CASES[5])
    for m in (model, with_attrs(model, do_rotary=0, rotary_embedding_dim=0, past_present_share_buffer=0)):
        (rw,) = passes.run_split(context(m))
        assert rw.replaces == ("n0",) and [b.op_type for b in rw.before] == ["MatMul"]
        assert rw.node.op_type == "PackedQkvAttention" and rw.node.domain == "olc.fused"
        assert list(rw.node.input) == [rw.before[0].output[0], "bias", "mask_index", "past"]
        assert {a.name for a in rw.node.attribute} == {"num_heads", "unidirectional", "scale"}


@pytest.mark.parametrize("change", ["none", "do_rotary", "share_buffer", "unknown_attribute", "no_num_heads",
                                    "past_sequence_length", "rank_2_input", "other_input_width",
                                    "weights_of_another_type", "columns_not_3_heads"])
def test_the_pass_leaves_attributes_and_inputs_it_cannot_express(change):
    c = dict(CASES[1])
    if change == "rank_2_input":
        c["input_shape"] = ["seq", 16]
    if change == "other_input_width":
        c["input_shape"] = ["batch", "seq", 17]
    if change == "columns_not_3_heads":
        c["attrs"] = {"qkv_hidden_sizes": [16, 16, 9]}  # 41 of the 48 columns
    model, _ = build(c)
    if change == "do_rotary":
        model = with_attrs(model, do_rotary=1)
    elif change == "share_buffer":
        model = with_attrs(model, past_present_share_buffer=1)
    elif change == "unknown_attribute":
        model = with_attrs(model, fancy=1)
    elif change == "no_num_heads":
        del model.graph.node[0].attribute[:]
    elif change == "past_sequence_length":
        node = model.graph.node[0]
        node.input.extend(["", "", "psl"])
        model.graph.input.append(helper.make_tensor_value_info("psl", ONNX_TYPE["int32"], [1]))
    elif change == "weights_of_another_type":
        w = model.graph.initializer[0]
        assert w.name == "weights"
        w.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(w).astype(np.float16), "weights"))
    assert len(passes.run_split(context(model))) == (1 if change == "none" else 0)


def test_without_olc_matmul_the_split_never_happens():
    model, feeds = build(CASES[1])
    plugin = dict(olc_core.plugins()).get("matmul")
    if plugin is not None:
        olc_core.unregister_plugin(plugin)
    try:
        s = olc_core.Session(model, record_usage=True)
        got = s.run(None, feeds)
        assert s.kernel_usage() == UNSPLIT
        assert [e.node_name for e in s.kernel_plan()] == ["n0"]
        assert_close(got[0], ort_run(model, feeds)[0], "float32", "output")
    finally:
        if plugin is not None:
            olc_core.register_plugin(plugin, name="matmul")
    if plugin is not None:
        assert olc_core.Session(model, record_usage=True).kernel_plan()[0].node_name == "n0/projection"


@needs_matmul
def test_bad_input_through_the_split_names_the_node():
    model, feeds = build(dict(CASES[1], input_shape=None))  # no declared shape: the kernels see the feeds
    s = session(model)
    bad = dict(feeds, mask_index=np.array([3, 5, 1], np.int32))
    with pytest.raises(olc_core.OlcError, match=r"n0/attention.*PackedQkvAttention.*mask_index has shape \[3\]"):
        s.run(None, bad)
    wide = dict(feeds, input=np.zeros((2, 5, 17), np.float32))
    with pytest.raises(olc_core.OlcError, match=r"n0/projection.*MatMul"):
        s.run(None, wide)
    flat = dict(feeds, input=np.zeros((5, 16), np.float32))
    with pytest.raises(olc_core.OlcError, match=r"n0/attention.*qkv must be \[batch, seq, q \+ k \+ v hidden\]"):
        s.run(None, flat)
