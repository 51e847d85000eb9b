"""The graph pass: the unfused attention of encoder exports becomes one
olc.fused::Attention node exactly when the pattern, the shapes, the scale
and the mask allow it, and gives the unfused graph's results.

Each model is one attention block as torch.onnx writes it, Q, K and V
projections given as graph inputs: the head split (Reshape to [B, S, N, D],
Transpose), MatMul(Q, K^T), the scale (Div or Mul by a constant), the mask
Add, Softmax over the last axis, MatMul(., V), the merge (Transpose,
Reshape to [B, S, N * Dv]). Oracles: a float64 numpy formula, onnxruntime
on the raw graph (float32), and olc with fusion off. The sessions are not
strict: with only olc-core and this family installed, the unfused nodes run
on the reference fallback."""

from __future__ import annotations

import numpy as np
import pytest
from at_testlib import LEVELS, NP_TYPE, ONNX_TYPE, assert_close, ort_run
from olc_attention.manifest import kernel_name
from onnx import helper, numpy_helper

import olc_core

FUSED = kernel_name("FusedAttention")
N, D = 4, 16


def block(t="float32", scale="div", k_form="0231", mask="b11t", reshape="const", axis=-1, n=N, d=D, dv=D,
          extra=None, opset=17, mask_first=False):
    """The raw export of one attention block; returns the model."""
    nodes, inits = [], []
    elem = ONNX_TYPE[t]

    def const(name, value):
        inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def node(op, inputs, name, **attrs):
        nodes.append(helper.make_node(op, inputs, [name], name=f"n_{name}", **attrs))
        return name

    def split(x, width, tag):
        if reshape == "const":
            shape = const(f"{tag}_shape", np.array([0, 0, n, width], np.int64))
        else:  # Shape -> Gather -> Unsqueeze -> Concat, as torch.onnx writes x.size()[:-1] + (n, width)
            dims = []
            for axis_ in (0, 1):
                g = node("Gather", [node("Shape", [x], f"{tag}_shape_of{axis_}"), const(f"{tag}_i{axis_}", np.int64(axis_))],
                         f"{tag}_d{axis_}", axis=0)
                dims.append(node("Unsqueeze", [g, const(f"{tag}_ax{axis_}", np.array([0], np.int64))],
                                 f"{tag}_u{axis_}"))
            shape = node("Concat", [*dims, const(f"{tag}_nw", np.array([n, width], np.int64))], f"{tag}_shape",
                         axis=0)
        return node("Reshape", [x, shape], f"{tag}_split")

    q = node("Transpose", [split("q", d, "q")], "q_heads", perm=[0, 2, 1, 3])
    if k_form == "0231":
        kt = node("Transpose", [split("k", d, "k")], "k_heads_t", perm=[0, 2, 3, 1])
    else:
        kt = node("Transpose", [node("Transpose", [split("k", d, "k")], "k_heads", perm=[0, 2, 1, 3])], "k_heads_t",
                  perm=[0, 1, 3, 2])
    v = node("Transpose", [split("v", dv, "v")], "v_heads", perm=[0, 2, 1, 3])
    scores = node("MatMul", [q, kt], "scores")
    np_t = NP_TYPE[t]
    if scale == "div":
        scaled = node("Div", [scores, const("sqrt_d", np.array(np.sqrt(d), np_t))], "scaled")
    elif scale == "mul":
        scaled = node("Mul", [scores, const("inv_sqrt_d", np.array(1 / np.sqrt(d), np_t))], "scaled")
    elif scale == "mul_left":
        scaled = node("Mul", [const("inv_sqrt_d", np.array(1 / np.sqrt(d), np_t)), scores], "scaled")
    else:  # "input": a scale the graph is fed
        scaled = node("Div", [scores, "scale"], "scaled")
    if mask and mask_first:  # Add(bias, scores) with the bias made by a Mul, as BERT's mask is
        logits = node("Add", [node("Mul", ["mask", const("one", np.array(1.0, np_t))], "bias"), scaled], "masked")
    else:
        logits = node("Add", [scaled, "mask"], "masked") if mask else scaled
    probs = node("Softmax", [logits], "probs", axis=axis)
    ctx = node("Transpose", [node("MatMul", [probs, v], "context")], "context_t", perm=[0, 2, 1, 3])
    y = node("Reshape", [ctx, const("merge_shape", np.array([0, 0, n * dv], np.int64))], "y")
    outputs = [helper.make_tensor_value_info(y, elem, ["batch", "seq", n * dv])]
    if extra == "probs_output":
        outputs.append(helper.make_tensor_value_info(probs, elem, None))
    elif extra == "scores_read":
        nodes.append(helper.make_node("ReduceMax", [scores], ["scores_max"], name="n_scores_max", keepdims=1))
        outputs.append(helper.make_tensor_value_info("scores_max", elem, None))
    inputs = [helper.make_tensor_value_info("q", elem, ["batch", "seq", n * d]),
              helper.make_tensor_value_info("k", elem, ["batch", "kv", n * d]),
              helper.make_tensor_value_info("v", elem, ["batch", "kv", n * dv])]
    if mask:
        dims = {"b11t": ["batch", 1, 1, "kv"], "1nst": [1, n, "seq", "kv"], "st": ["seq", "kv"], "b11m": ["batch", 1, 1, "m"],
                "t": ["kv"]}[mask]
        inputs.append(helper.make_tensor_value_info("mask", elem, dims))
    if scale == "input":
        inputs.append(helper.make_tensor_value_info("scale", elem, []))
    graph = helper.make_graph(nodes, "attention_block", inputs, outputs, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def feeds_for(model, t="float32", B=2, S=5, T=7, seed=0, n=N, d=D, dv=D, mask_cols=None):
    rng = np.random.default_rng(seed)
    f = {"q": rng.uniform(-1, 1, (B, S, n * d)), "k": rng.uniform(-1, 1, (B, T, n * d)),
         "v": rng.uniform(-1, 1, (B, T, n * dv))}
    names = {i.name: i for i in model.graph.input}
    if "mask" in names:
        dims = [x.dim_param or x.dim_value for x in names["mask"].type.tensor_type.shape.dim]
        size = {"batch": B, "seq": S, "kv": T, "m": mask_cols or T}
        shape = [size.get(x, x) if isinstance(x, str) else x for x in dims]
        m = np.where(rng.random(shape) < 0.25, -10000.0, rng.uniform(-1, 1, shape))
        m[..., 0] = 0.0  # every row sees a key
        f["mask"] = m
    if "scale" in names:
        f["scale"] = np.array(np.sqrt(d))
    return {k: v.astype(NP_TYPE[t]) for k, v in f.items()}


def formula(f, n=N, scale=None, mask_broadcasts=True):
    """float64: softmax(Q K^T * scale + mask) V per head, merged."""
    q, k, v = (f[x].astype(np.float64) for x in ("q", "k", "v"))
    B, S, _ = q.shape
    T = k.shape[1]
    qh = q.reshape(B, S, n, -1).transpose(0, 2, 1, 3)
    kh = k.reshape(B, T, n, -1).transpose(0, 2, 1, 3)
    vh = v.reshape(B, T, n, -1).transpose(0, 2, 1, 3)
    s = np.einsum("bnsd,bntd->bnst", qh, kh) * (scale if scale is not None else 1 / np.sqrt(qh.shape[-1]))
    if "mask" in f:
        s = s + f["mask"].astype(np.float64)
    e = np.exp(s - s.max(-1, keepdims=True))
    y = np.einsum("bnst,bntd->bnsd", e / e.sum(-1, keepdims=True), vh)
    return y.transpose(0, 2, 1, 3).reshape(B, S, -1)


def fused_entries(s):
    return [e for e in s.kernel_plan(expand_fused=True) if e.kernel == FUSED]


def run(model, feeds, fusion=True, **kw):
    s = olc_core.Session(model, threads=kw.pop("threads", 1), fusion=fusion, record_usage=True, **kw)
    return s, s.run(None, feeds)


CASES = {
    "div, mask [B,1,1,T]": {},
    "mul": {"scale": "mul"},
    "mask Add's operands swapped": {"mask_first": True, "scale": "mul_left"},
    "mul on the left": {"scale": "mul_left"},
    "K transposed twice": {"k_form": "two"},
    "no mask": {"mask": ""},
    "mask [1,N,S,T]": {"mask": "1nst"},
    "mask [S,T]": {"mask": "st"},
    "mask [T]": {"mask": "t"},
    "shape chains": {"reshape": "chain"},
    "softmax axis 3": {"axis": 3},
    "opset 11 softmax": {"axis": 3, "opset": 11},
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_pass_fires_and_matches_onnxruntime(case):
    opts = CASES[case]
    model = block(**opts)
    feeds = feeds_for(model, seed=len(case))
    s, (y,) = run(model, feeds)
    replaced = {e.op_type for e in fused_entries(s)}
    assert {"MatMul", "Softmax", "Transpose", "Reshape"} <= replaced, replaced
    assert [e.kernel for e in s.kernel_plan() if e.op_type in ("MatMul", "Softmax")] == []
    assert FUSED in s.kernel_usage()
    assert_close(y, formula(feeds), "float32", case)
    assert_close(y, ort_run(model, feeds)[0], "float32", f"{case} vs onnxruntime")


@pytest.mark.parametrize("t", ["float16", "bfloat16"])
def test_the_pass_fires_for_16_bit_types(t):
    model = block(t=t)
    feeds = feeds_for(model, t=t)
    s, (y,) = run(model, feeds)
    assert fused_entries(s) and y.dtype == NP_TYPE[t]
    # One rounding of the inputs to the type, then float32 arithmetic: the
    # formula on the same (rounded) inputs, within the type's tolerance.
    assert_close(y, formula(feeds), t, t)


def test_cross_attention_and_another_value_head_size():
    model = block(dv=24)
    feeds = feeds_for(model, S=3, T=11, dv=24)
    s, (y,) = run(model, feeds)
    assert fused_entries(s) and y.shape == (2, 3, N * 24)
    assert_close(y, formula(feeds), "float32")


def test_one_session_serves_every_shape_and_naive_matches():
    model = block()
    s = olc_core.Session(model, threads=2)
    naive = olc_core.Session(model, naive="olc-attention", record_usage=True)
    for B, S, T in ((1, 1, 1), (3, 17, 17), (2, 64, 130)):
        feeds = feeds_for(model, B=B, S=S, T=T, seed=B + S)
        (y,) = s.run(None, feeds)
        assert_close(y, formula(feeds), "float32", f"{(B, S, T)}")
        assert_close(naive.run(None, feeds)[0], y, "float32", f"naive {(B, S, T)}")
    assert kernel_name("FusedAttention", naive=True) in naive.kernel_usage()


@pytest.mark.parametrize("level", LEVELS)
def test_every_simd_level(level):
    model = block()
    feeds = feeds_for(model, S=9, T=9)
    with olc_core.simd_cap(level):
        s, (y,) = run(model, feeds)
    assert fused_entries(s)
    assert_close(y, formula(feeds), "float32", level)


def test_a_mask_of_one_key_column_is_added_to_every_key():
    # The Add broadcast a [B, 1, 1, 1] mask over the keys (a shift softmax
    # ignores); Attention alone would read it as excluding every key but
    # the first. The fused node adds it as the Add did.
    model = block(mask="b11m")
    feeds = feeds_for(model, mask_cols=1)
    s, (y,) = run(model, feeds)
    assert fused_entries(s)
    assert_close(y, formula(feeds), "float32")
    assert_close(y, ort_run(model, feeds)[0], "float32", "vs onnxruntime")
    # A mask of another width fails, as the Add fails in the unfused graph.
    bad = feeds_for(model, mask_cols=3)
    with pytest.raises(olc_core.OlcError, match=r"n_probs/attention.*last dimension must be 1 or 7"):
        s.run(None, bad)
    with pytest.raises(Exception):  # noqa: B017 - onnxruntime's own error type
        ort_run(model, bad)


NEGATIVE = {
    "scale not constant": {"scale": "input"},
    "softmax over another axis": {"axis": 2},
    "probabilities also a graph output": {"extra": "probs_output"},
    "scores read by another node": {"extra": "scores_read"},
    "opset 11 softmax with the default axis": {"axis": 1, "opset": 11},
}


@pytest.mark.parametrize("case", sorted(NEGATIVE))
def test_the_pass_leaves_other_graphs_alone(case):
    model = block(**NEGATIVE[case])
    feeds = feeds_for(model, seed=3)
    s, got = run(model, feeds)
    assert fused_entries(s) == []
    assert FUSED not in s.kernel_usage()
    _, want = run(model, feeds, fusion=False)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    # onnx.reference (1.23) computes an opset-11 Softmax per axis (opset 13's
    # rule) instead of over the flattened trailing axes: against onnxruntime
    # only where a native kernel runs it.
    if not any(e.kernel.startswith("onnx.reference") for e in s.kernel_plan() if e.op_type == "Softmax"):
        for g, o in zip(got, ort_run(model, feeds)):
            assert_close(g, o, "float32", case)


def test_heads_that_do_not_split_the_last_axis_are_left_alone():
    # Reshape to [B * S, 1, N, D]: the same element count, but the batch and
    # sequence are merged, so the block is not per-sequence attention.
    model = block(mask="")
    for init in model.graph.initializer:
        if init.name in ("q_shape", "k_shape", "v_shape"):
            init.CopyFrom(numpy_helper.from_array(np.array([-1, 1, N, D], np.int64), init.name))
    feeds = feeds_for(model, S=4, T=4)
    s, (y,) = run(model, feeds)
    assert fused_entries(s) == []
    _, (want,) = run(model, feeds, fusion=False)
    np.testing.assert_array_equal(y, want)


def test_a_mask_that_would_enlarge_the_scores_is_left_alone():
    # One query row against a mask of two rows: the Add broadcasts the
    # scores up to two rows (the block's output has two positions), which
    # Attention cannot express.
    model = block(mask="1nst")
    for vi in model.graph.input:
        if vi.name == "q":
            vi.type.tensor_type.shape.dim[1].dim_value = 1
        if vi.name == "mask":
            vi.type.tensor_type.shape.dim[1].dim_value = 1
            vi.type.tensor_type.shape.dim[2].dim_value = 2
    rng = np.random.default_rng(4)
    feeds = {"q": rng.uniform(-1, 1, (2, 1, N * D)), "k": rng.uniform(-1, 1, (2, 7, N * D)),
             "v": rng.uniform(-1, 1, (2, 7, N * D)), "mask": rng.uniform(-1, 1, (1, 1, 2, 7))}
    feeds = {k: v.astype(np.float32) for k, v in feeds.items()}
    s, (y,) = run(model, feeds)
    assert fused_entries(s) == []
    _, (want,) = run(model, feeds, fusion=False)
    np.testing.assert_array_equal(y, want)
    assert y.shape == (2, 2, N * D)
    assert_close(y, ort_run(model, feeds)[0], "float32")
