"""The onnx.backend surface of olc_core.backend, beyond what the node suite exercises."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from olc_core.backend import OlcBackend, prepare, supports_device


def _model_with_initializer() -> onnx.ModelProto:
    # "w" is both a graph input and an initializer: a default, not a positional input.
    graph = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["nx"]), helper.make_node("Add", ["nx", "w"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3]),
         helper.make_tensor_value_info("w", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
        initializer=[helper.make_tensor("w", TensorProto.FLOAT, [3], [1.0, 2.0, 3.0])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_devices() -> None:
    assert supports_device("CPU")
    assert not supports_device("CUDA")
    assert not supports_device("no such device")
    with pytest.raises(NotImplementedError):
        prepare(_model_with_initializer(), device="CUDA")


@pytest.mark.parametrize("as_bytes", [False, True])
def test_prepare_run_positional_and_named(as_bytes: bool) -> None:
    model = _model_with_initializer()
    rep = prepare(model.SerializeToString() if as_bytes else model)
    x = np.array([1.0, -2.0, 0.5], np.float32)
    out = rep.run([x])
    np.testing.assert_allclose(out.y, -x + [1, 2, 3])
    np.testing.assert_allclose(out["y"], out[0])
    np.testing.assert_allclose(rep.run({"x": x})[0], out[0])
    np.testing.assert_allclose(rep.run(x)[0], out[0])  # a lone array is the first input
    assert rep.session.kernel_usage(), "usage is recorded"
    with pytest.raises(ValueError, match="inputs"):
        rep.run([x, x])


def test_run_node() -> None:
    x = np.array([-1.5, 2.0], np.float32)
    out = OlcBackend.run_node(helper.make_node("Abs", ["x"], ["y"]), [x])
    np.testing.assert_array_equal(out.y, np.abs(x))
    out = OlcBackend.run_node(helper.make_node("Sub", ["a", "b"], ["c"]), [x, x], opset_version=14)
    np.testing.assert_array_equal(out.c, np.zeros(2, np.float32))
