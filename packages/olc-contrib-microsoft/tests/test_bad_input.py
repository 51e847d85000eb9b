"""Bad input, as a model meets it: the node that refuses is the second of a
graph (the first ran), the error names that node, its op and the reason,
and the session stays usable: the next good run gives the right answer.
Every kernel checks its inputs before it allocates an output, so a refused
run writes nothing (the per-op tests check each message at both
implementations)."""

from __future__ import annotations

import numpy as np
import pytest
from cm_testlib import LEVELS
from onnx import TensorProto, helper, numpy_helper

import olc_core

H = 8


def two_nodes(second, inputs, initializers):
    """Relu(x) -> com.microsoft `second`(relu output, then `inputs`: float32
    feeds unless given in `initializers`)."""
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="first"),
             helper.make_node(second, ["r", *inputs], ["y"], name="second", domain="com.microsoft")]
    feeds = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ["x", *inputs]
             if n not in initializers]
    g = helper.make_graph(nodes, "g", feeds, [helper.make_value_info("y", helper.TypeProto())],
                          initializer=[numpy_helper.from_array(v, k) for k, v in initializers.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 10
    return m


def check_refused_then_good(m, good, bad, pattern, naive):
    # not strict: without olc-elementwise and olc-tensor the first nodes run on the fallback
    with olc_core.simd_cap(LEVELS[-1]):
        s = olc_core.Session(m, naive="olc-contrib-microsoft" if naive else False)
    want = s.run(None, good)
    with pytest.raises(olc_core.OlcError, match=pattern):
        s.run(None, bad)
    for got, w in zip(s.run(None, good), want):
        np.testing.assert_array_equal(got, w)


@pytest.mark.parametrize("naive", [False, True])
def test_skip_of_the_wrong_shape(naive):
    rng = np.random.default_rng(0)
    inits = {"gamma": np.ones(H, np.float32), "beta": np.zeros(H, np.float32)}
    m = two_nodes("SkipLayerNormalization", ["skip", "gamma", "beta"], inits)
    x = rng.standard_normal((2, 3, H)).astype(np.float32)
    good = {"x": x, "skip": rng.standard_normal((2, 3, H)).astype(np.float32)}
    bad = {"x": x, "skip": rng.standard_normal((2, 4, H)).astype(np.float32)}
    check_refused_then_good(m, good, bad, r"node 'second' \(SkipLayerNormalization\): skip has shape \[2, 4, 8\]; "
                                          r"for input \[2, 3, 8\] it must be \[2, 3, 8\], \[1, 3, 8\] or \[3, 8\]", naive)


@pytest.mark.parametrize("naive", [False, True])
def test_gamma_longer_than_the_hidden_size(naive):
    rng = np.random.default_rng(1)
    m = two_nodes("SkipSimplifiedLayerNormalization", ["skip", "gamma"], {})
    x = rng.standard_normal((4, H)).astype(np.float32)
    good = {"x": x, "skip": x, "gamma": np.ones(H, np.float32)}
    bad = {"x": x, "skip": x, "gamma": np.ones(H + 1, np.float32)}
    check_refused_then_good(m, good, bad, r"node 'second' \(SkipSimplifiedLayerNormalization\): gamma has shape "
                                          r"\[9\], expected \[8\] \(the hidden size", naive)


@pytest.mark.parametrize("naive", [False, True])
def test_ids_out_of_the_embedding_range(naive):
    # the ids come from a Cast of the first node's output: a model computing them
    rng = np.random.default_rng(2)
    words = rng.standard_normal((10, H)).astype(np.float32)
    inits = {"word": words, "pos": rng.standard_normal((6, H)).astype(np.float32),
             "gamma": np.ones(H, np.float32), "beta": np.zeros(H, np.float32)}
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="first"),
             helper.make_node("Cast", ["r"], ["ids"], name="cast", to=TensorProto.INT64),
             helper.make_node("EmbedLayerNormalization", ["ids", "", "word", "pos", "", "gamma", "beta"], ["y"],
                              name="embed", domain="com.microsoft")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
                          [helper.make_value_info("y", helper.TypeProto())],
                          initializer=[numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 10
    good = {"x": np.array([[1, 2, 9], [0, 3, 4]], np.float32)}
    bad = {"x": np.array([[1, 2, 9], [0, 10, 4]], np.float32)}
    check_refused_then_good(m, good, bad, r"node 'embed' \(EmbedLayerNormalization\): input_ids\[1, 1\] = 10 is out "
                                          r"of range: word_embedding has 10 rows", naive)


@pytest.mark.parametrize("naive", [False, True])
@pytest.mark.parametrize("block_size", [24, 8, 0])
def test_block_size_not_a_power_of_two(block_size, naive):
    data = np.zeros((4, 32), np.uint8)
    inits = {"data": data, "scales": np.ones((4, 2), np.float32)}
    node = helper.make_node("GatherBlockQuantized", ["data", "idx", "scales"], ["y"], name="gbq",
                            domain="com.microsoft", block_size=block_size, bits=8)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("idx", TensorProto.INT64, None)],
                          [helper.make_value_info("y", helper.TypeProto())],
                          initializer=[numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 10
    # refused when the session is made: the attribute is known then
    with pytest.raises(olc_core.OlcError, match=rf"node 'gbq' \(GatherBlockQuantized\): attribute 'block_size' must "
                                               rf"be a power of 2 and at least 16, got {block_size}"):
        olc_core.Session(m, strict=True, naive="olc-contrib-microsoft" if naive else False)
