"""Maps and sequences of maps as values: a Python kernel may return a list of
dicts (ai.onnx.ml ZipMap's output) and take a dict (DictVectorizer's input);
the session passes them through as they are and returns them to Python
exactly as onnxruntime does, its NodeArg types spelled the same way."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import olc_core
from olc_core import KernelRegistration, hookimpl


def _rows_as_dicts(info):
    labels = [int(v) for v in info.attributes["labels"]]
    return lambda x: [[dict(zip(labels, row)) for row in np.asarray(x).tolist()]]


def _dict_as_row(info):
    vocab = [v.decode() for v in info.attributes["vocab"]]
    return lambda m: [np.array([[m.get(k, 0.0) for k in vocab]], np.float32)]


class MapPlugin:
    @hookimpl
    def olc_register_kernels(self):
        return [
            KernelRegistration("test.maps", "RowsAsDicts", "map_test::RowsAsDicts", {"T": ("float32",)}, ("T",),
                               _rows_as_dicts, outputs=(None,), family="map-tests"),
            KernelRegistration("test.maps", "DictAsRow", "map_test::DictAsRow", {"T": ("float32",)}, (None,),
                               _dict_as_row, outputs=("T",), family="map-tests"),
        ]


@pytest.fixture
def plugin():
    p = MapPlugin()
    olc_core.register_plugin(p, name="map-tests")
    yield p
    olc_core.unregister_plugin(p)


def _map_type(key, value_elem):
    return helper.make_map_type_proto(key, helper.make_tensor_type_proto(value_elem, []))


def _model(nodes, inputs, outputs):
    g = helper.make_graph(nodes, "g", inputs, outputs)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("test.maps", 1)])


def test_a_sequence_of_maps_is_returned_as_a_list_of_dicts(plugin):
    node = helper.make_node("RowsAsDicts", ["x"], ["z"], domain="test.maps", labels=[7, 3])
    out = helper.make_value_info("z", helper.make_sequence_type_proto(_map_type(TensorProto.INT64, TensorProto.FLOAT)))
    s = olc_core.Session(_model([node], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 2])], [out]),
                         strict=True)
    (z,) = s.run(None, {"x": np.array([[0.25, 0.75], [1.0, 0.0]], np.float32)})
    assert z == [{7: 0.25, 3: 0.75}, {7: 1.0, 3: 0.0}]
    assert type(z) is list and all(type(d) is dict for d in z)
    assert s.get_outputs()[0].type == "seq(map(int64,tensor(float)))"
    (empty,) = s.run(None, {"x": np.zeros((0, 2), np.float32)})
    assert empty == []


def test_a_map_feed_reaches_the_kernel_as_a_dict(plugin):
    node = helper.make_node("DictAsRow", ["m"], ["y"], domain="test.maps", vocab=["a", "b", "c"])
    inp = helper.make_value_info("m", _map_type(TensorProto.STRING, TensorProto.FLOAT))
    s = olc_core.Session(_model([node], [inp], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])]),
                         strict=True)
    (y,) = s.run(None, {"m": {"c": 2.0, "a": -1.5}})
    np.testing.assert_array_equal(y, [[-1.5, 0.0, 2.0]])
    assert s.get_inputs()[0].type == "map(string,tensor(float))"


def test_type_strings_as_onnxruntime_spells_them():
    from olc_core.session import _type_string

    seq = helper.make_sequence_type_proto(helper.make_tensor_type_proto(TensorProto.INT64, None))
    assert _type_string(seq) == "seq(tensor(int64))"
    assert _type_string(helper.make_tensor_type_proto(TensorProto.DOUBLE, None)) == "tensor(double)"
    assert _type_string(helper.make_optional_type_proto(seq)) == "optional(seq(tensor(int64)))"


def test_olc_run_compares_sequences_of_maps():
    from olc_core.cli import VERDICT_AGREE, VERDICT_DIFFER, compare_outputs

    ours = [{7: 0.25, 3: 0.75}, {7: 1.0, 3: 0.0}]
    (row,) = compare_outputs(["z"], [ours], [[{7: 0.25, 3: 0.7500001}, {7: 1.0, 3: 0.0}]], 1e-4, 1e-5)
    assert row["verdict"] == VERDICT_AGREE and row["shape"] == [2, 2]
    (row,) = compare_outputs(["z"], [ours], [[{7: 0.25, 3: 0.9}, {7: 1.0, 3: 0.0}]], 1e-4, 1e-5)
    assert row["verdict"] == VERDICT_DIFFER and row["worst"]["index"] == [0, 1]
    (row,) = compare_outputs(["z"], [ours], [[{3: 0.75, 7: 0.25}, {7: 1.0, 3: 0.0}]], 1e-4, 1e-5)
    assert row["verdict"] == VERDICT_DIFFER and "keys" in row["note"]
