"""The copy of a model that whole-model type inference reads: attributes of
more than _INFERENCE_MAX_VALUES values cut to their first (a 5,000-tree
forest's node tables no longer go through inference's serialization), the
types inference gives unchanged."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from olc_core import session


def _value_types(model):
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False)
    return {vi.name: vi.type for vi in list(inferred.graph.value_info) + list(inferred.graph.output)}


def _forest(n_nodes: int, classifier: bool) -> onnx.ModelProto:
    ids = np.arange(n_nodes)
    attrs = {"nodes_treeids": ids.tolist(), "nodes_nodeids": [0] * n_nodes, "nodes_featureids": [0] * n_nodes,
                 "nodes_modes": ["LEAF"] * n_nodes, "nodes_truenodeids": [0] * n_nodes,
                 "nodes_falsenodeids": [0] * n_nodes}
    attrs["nodes_values_as_tensor"] = numpy_helper.from_array(np.zeros(n_nodes), "values")
    if classifier:
        attrs.update(class_treeids=ids.tolist(), class_nodeids=[0] * n_nodes, class_ids=[1] * n_nodes,
                     class_weights=[0.5] * n_nodes, classlabels_strings=["no", "yes", "maybe"])
        outputs = ["label", "scores"]
    else:
        attrs.update(target_treeids=ids.tolist(), target_nodeids=[0] * n_nodes, target_ids=[0] * n_nodes,
                     target_weights=[0.5] * n_nodes, n_targets=2)
        outputs = ["y"]
    op = "TreeEnsembleClassifier" if classifier else "TreeEnsembleRegressor"
    nodes = [helper.make_node(op, ["x"], outputs, domain="ai.onnx.ml", name="forest", **attrs),
             helper.make_node("Identity", [outputs[-1]], ["out"], name="after")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 3)])


def test_small_models_are_given_as_they_are():
    model = _forest(100, classifier=False)
    assert session._inference_model(model) is model


def test_large_attributes_are_cut_and_the_types_do_not_change():
    for classifier in (False, True):
        model = _forest(session._INFERENCE_MAX_VALUES + 10, classifier)
        before = model.SerializeToString()
        slim = session._inference_model(model)
        assert slim is not model
        assert model.SerializeToString() == before  # the model itself is untouched
        node = slim.graph.node[0]
        assert all(session._attribute_values(a) <= session._INFERENCE_MAX_VALUES for a in node.attribute)
        assert {a.name for a in node.attribute} == {a.name for a in model.graph.node[0].attribute}
        assert list(slim.graph.node[1].input) == list(model.graph.node[1].input)
        assert _value_types(slim) == _value_types(model)


def test_large_constants_of_other_domains_are_kept_whole():
    """A Constant (or any ai.onnx node) with a large attribute is what inference
    must see: its shape decides the shapes of every value computed from it."""
    n = session._INFERENCE_MAX_VALUES + 10
    const = helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(np.ones(n, np.float32), "c"))
    floats = helper.make_node("Constant", [], ["f"], value_floats=[1.0] * n)
    add = helper.make_node("Add", ["c", "f"], ["s"])
    mul = helper.make_node("Mul", ["x", "s"], ["y"])
    graph = helper.make_graph([const, floats, add, mul], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    assert session._inference_model(model) is model
    inferred = onnx.shape_inference.infer_shapes(session._inference_model(model))
    (y,) = [vi for vi in inferred.graph.output if vi.name == "y"]
    assert [d.dim_value for d in y.type.tensor_type.shape.dim] == [n]
