"""Bad input: an olc_core.OlcError naming the node, the op and the reason,
raised before any output is written (at construction for attributes and
types, at run for shapes and values), for the optimized and the naive
kernels alike."""

from __future__ import annotations

import numpy as np
import pytest
from at_testlib import MS, make_model
from test_gqa import build as gqa_build

import olc_core


def run(model, feeds, naive=False):
    s = olc_core.Session(model, strict=True, naive="olc-attention" if naive else False)
    return s.run(None, feeds)


def expect(model, feeds, *words):
    for naive in (False, True):
        with pytest.raises(olc_core.OlcError) as e:
            run(model, feeds, naive)
        msg = str(e.value)
        assert "n0" in msg, msg
        for w in words:
            assert w in msg, msg


def f32(*shape):
    return np.random.default_rng(0).uniform(-1, 1, shape).astype(np.float32)


def attention(attrs=None, inputs=("q", "k", "v"), opset=24):
    return make_model("Attention", [(n, "bool" if n == "mask_b" else "int64" if n == "nonpad" else "float32") if n
                                    else ("", "float32") for n in inputs], ["y"], attrs, opset=opset)


def test_attention_head_counts():
    expect(attention(), {"q": f32(1, 3, 2, 8), "k": f32(1, 2, 4, 8), "v": f32(1, 2, 4, 8)}, "multiple", "3", "2")
    expect(attention({"q_num_heads": 4, "kv_num_heads": 3}),
           {"q": f32(1, 2, 32), "k": f32(1, 4, 24), "v": f32(1, 4, 24)}, "multiple")
    expect(attention(), {"q": f32(1, 2, 2, 8), "k": f32(1, 2, 4, 6), "v": f32(1, 2, 4, 8)}, "K")
    expect(attention(), {"q": f32(1, 2, 8), "k": f32(1, 4, 8), "v": f32(1, 4, 8)}, "q_num_heads")
    expect(attention({"q_num_heads": 2, "kv_num_heads": 2}, opset=25),
           {"q": f32(1, 2, 2, 8), "k": f32(1, 2, 4, 8), "v": f32(1, 2, 4, 8)}, "opset 25")


def test_attention_mask_shape():
    m = attention(inputs=("q", "k", "v", "mask"))
    qkv = {"q": f32(1, 2, 3, 8), "k": f32(1, 2, 4, 8), "v": f32(1, 2, 4, 8)}
    expect(m, {**qkv, "mask": f32(3, 5)}, "attn_mask", "[3, 5]")
    expect(m, {**qkv, "mask": f32(2, 4)}, "attn_mask")
    expect(m, {**qkv, "mask": f32(1, 1, 1, 1, 4)}, "attn_mask")


def test_attention_past_and_nonpad():
    m = make_model("Attention", [("q", "float32"), ("k", "float32"), ("v", "float32"), ("", "float32"),
                                 ("pk", "float32"), ("pv", "float32")], ["y", "ok", "ov"], opset=24)
    qkv = {"q": f32(1, 2, 1, 8), "k": f32(1, 2, 1, 8), "v": f32(1, 2, 1, 8)}
    expect(m, {**qkv, "pk": f32(1, 2, 5, 8), "pv": f32(1, 2, 4, 8)}, "past_key", "past_value")
    m = attention(inputs=("q", "k", "v", "", "", "", "nonpad"))
    expect(m, {"q": f32(2, 2, 1, 8), "k": f32(2, 2, 4, 8), "v": f32(2, 2, 4, 8), "nonpad": np.array([1, 5])},
           "nonpad_kv_seqlen[1] = 5")


@pytest.mark.parametrize("attrs,words", [({"is_causal": 2}, ["is_causal"]), ({"qk_matmul_output_mode": 4}, ["qk_matmul"]),
                                         ({"softmax_precision": 7}, ["softmax_precision"]), ({"bogus": 1}, ["bogus"])])
def test_attention_attributes_at_construction(attrs, words):
    with pytest.raises(olc_core.OlcError) as e:
        olc_core.Session(attention(attrs), strict=True)
    for w in words:
        assert w in str(e.value)


def test_gqa_kv_heads_must_divide_heads():
    m, _f = gqa_build({"B": 1, "S": 1, "Hq": 4, "Hkv": 2, "D": 16, "seqlens": [3], "total": 4, "P": 3})
    m.graph.node[0].attribute[1].i = 3  # kv_num_heads
    with pytest.raises(olc_core.OlcError) as e:
        olc_core.Session(m, strict=True)
    assert "multiple of kv_num_heads" in str(e.value) and "n0" in str(e.value)


def test_gqa_mismatched_head_counts():
    m, f = gqa_build({"B": 1, "S": 1, "Hq": 4, "Hkv": 2, "D": 16, "seqlens": [3], "total": 4, "P": 3})
    f["key"] = f32(1, 1, 48)
    expect(m, f, "key", "[1, 1, 32]")
    m, f = gqa_build({"B": 1, "S": 1, "Hq": 4, "Hkv": 2, "D": 16, "seqlens": [3], "total": 4, "P": 3})
    f["query"] = f32(1, 1, 62)
    expect(m, f, "query hidden size 62", "not a multiple")


def test_gqa_past_lengths_that_disagree_with_seqlens():
    m, f = gqa_build({"B": 2, "S": 1, "Hq": 4, "Hkv": 2, "D": 16, "seqlens": [3, 2], "total": 4, "P": 3})
    f["seqlens_k"] = np.array([3, 5], np.int32)
    expect(m, f, "seqlens_k[1] = 5", "total_sequence_length")
    f["seqlens_k"] = np.array([3, 0], np.int32)
    f["total_sequence_length"] = np.array(4, np.int32)
    m2, f2 = gqa_build({"B": 2, "S": 3, "Hq": 4, "Hkv": 2, "D": 16, "seqlens": [5, 4], "total": 6, "P": 3})
    f2["seqlens_k"] = np.array([5, 1], np.int32)  # past = 2 - 3 < 0
    expect(m2, f2, "seqlens_k[1] = 1", "negative")
    m3, f3 = gqa_build({"B": 1, "S": 1, "Hq": 4, "Hkv": 2, "D": 16, "seqlens": [3], "total": 9, "P": 3})
    f3["seqlens_k"] = np.array([8], np.int32)  # past 8 > the 3 rows of past_key
    expect(m3, f3, "past_key", "3 rows")


def test_gqa_caches_shorter_than_the_positions():
    m, f = gqa_build({"B": 1, "S": 1, "Hq": 4, "Hkv": 2, "D": 16, "seqlens": [20], "total": 21, "P": 20, "rot": 16, "max_pos": 10})
    expect(m, f, "cos/sin caches", "10 rows")
    m, f = gqa_build({"B": 1, "S": 1, "Hq": 4, "Hkv": 2, "D": 16, "seqlens": [3], "total": 4, "P": 3, "rot": 16, "position_ids": [[40]]})
    expect(m, f, "position 40")


def test_gqa_attention_bias_shape():
    m, f = gqa_build({"B": 2, "S": 1, "Hq": 4, "Hkv": 2, "D": 16, "seqlens": [3, 2], "total": 4, "P": 3, "bias": True})
    f["attention_bias"] = f32(2, 3, 1, 4)
    expect(m, f, "attention_bias", "[2, 3, 1, 4]")


def test_rotary_caches_and_positions():
    m = make_model("RotaryEmbedding", [("x", "float32"), ("cos", "float32"), ("sin", "float32"), ("pos", "int64")],
                   ["y"], opset=23)
    f = {"x": f32(1, 2, 3, 8), "cos": f32(4, 4), "sin": f32(4, 4), "pos": np.array([[0, 1, 4]])}
    expect(m, f, "position_ids[0, 2] = 4", "4 rows")
    f["pos"] = np.array([[0, 1, 2]])
    f["cos"] = f32(4, 3)
    expect(m, f, "cos_cache")
    m = make_model("RotaryEmbedding", [("x", "float32"), ("pos", "int64"), ("cos", "float32"), ("sin", "float32")],
                   ["y"], domain=MS)
    expect(m, {"x": f32(1, 3, 16), "pos": np.array([6]), "cos": f32(8, 8), "sin": f32(8, 8)}, "position 8")


def test_tensor_scatter_bounds():
    m = make_model("TensorScatter", [("p", "float32"), ("u", "float32"), ("i", "int64")], ["o"],
                   {"mode": "linear"}, opset=24)
    expect(m, {"p": f32(2, 4, 3), "u": f32(2, 2, 3), "i": np.array([0, 3])}, "write_indices[1] = 3")
    expect(m, {"p": f32(2, 4, 3), "u": f32(2, 2, 4), "i": np.array([0, 0])}, "update")


@pytest.mark.parametrize("op", ["Attention", "MultiHeadAttention", "MicrosoftAttention", "GroupQueryAttention"])
def test_an_unnamed_primary_output_is_still_computed_safely(op):
    # A node may leave even its first output unnamed (found by fuzzing: the
    # output was then a 0-element tensor the kernel wrote through).
    from onnx import helper

    if op == "GroupQueryAttention":
        m, f = gqa_build({"B": 1, "S": 1, "Hq": 4, "Hkv": 2, "D": 16, "seqlens": [3], "total": 4, "P": 3})
    elif op == "Attention":
        m, f = attention(), {"q": f32(1, 2, 3, 8), "k": f32(1, 2, 4, 8), "v": f32(1, 2, 4, 8)}
    elif op == "MultiHeadAttention":
        m = make_model(op, [("q", "float32"), ("k", "float32"), ("v", "float32")], ["y"], {"num_heads": 2}, domain=MS)
        f = {"q": f32(2, 3, 8), "k": f32(2, 5, 8), "v": f32(2, 5, 8)}
    else:
        m = make_model("Attention", [("x", "float32"), ("w", "float32")], ["y"], {"num_heads": 2}, domain=MS)
        f = {"x": f32(2, 3, 8), "w": f32(8, 24)}
    node = m.graph.node[0]
    node.output[0] = ""
    extra = helper.make_node("Identity", [node.input[0]], ["keep"], name="keep")
    m.graph.node.append(extra)
    del m.graph.output[:]
    m.graph.output.append(helper.make_value_info("keep", helper.TypeProto()))
    for naive in (False, True):
        s = olc_core.Session(m, strict=True, record_usage=True, naive="olc-attention" if naive else False)
        (out,) = s.run(None, f)
        assert out.shape == f[node.input[0]].shape
        assert len(s.kernel_usage()) == 2  # the attention node ran
