"""float8 element types (ONNX codes 17-20) through the core: the ABI
header's names and sizes, the Python type tables, feeds and outputs as
ml_dtypes arrays, through the fallback and through a native kernel."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import olc_core
from olc_core import KernelRegistration, _native, hookimpl
from olc_core.registration import TENSOR_TYPES
from olc_core.session import TYPE_CODES, TYPE_NAMES, np_dtype_of

FLOAT8 = {
    TensorProto.FLOAT8E4M3FN: ("float8e4m3fn", ml_dtypes.float8_e4m3fn),
    TensorProto.FLOAT8E4M3FNUZ: ("float8e4m3fnuz", ml_dtypes.float8_e4m3fnuz),
    TensorProto.FLOAT8E5M2: ("float8e5m2", ml_dtypes.float8_e5m2),
    TensorProto.FLOAT8E5M2FNUZ: ("float8e5m2fnuz", ml_dtypes.float8_e5m2fnuz),
}
CASES = [pytest.param(code, name, dt, id=name) for code, (name, dt) in FLOAT8.items()]


def all_bytes(dt) -> np.ndarray:
    """Every bit pattern of a one-byte type, NaNs included."""
    return np.arange(256, dtype=np.uint8).view(dt)


def model_of(nodes, elem, opset=21, extra_opsets=()):
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", elem, [256])],
                              [helper.make_tensor_value_info("y", elem, [256])])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset), *extra_opsets])
    m.ir_version = 9
    return m


def test_codes_are_appended_and_bfloat16_unchanged():
    assert [_native._dtype_info(c) for c in (16, 17, 18, 19, 20, 21, 22, 23)] == [
        ("bfloat16", 2), ("float8e4m3fn", 1), ("float8e4m3fnuz", 1), ("float8e5m2", 1), ("float8e5m2fnuz", 1),
        ("uint4", 1), ("int4", 1), ("undefined", 0)]
    assert _native._dtype_info(1) == ("float32", 4)
    assert _native._dtype_info(14) == ("undefined", 0)  # complex: never native


@pytest.mark.parametrize("code,name,dt", CASES)
def test_type_tables(code, name, dt):
    # The names are onnx's type strings ("tensor(float8e4m3fn)").
    assert TYPE_NAMES[code] == name == helper.tensor_dtype_to_string(code).split(".")[1].lower()
    assert TYPE_CODES[name] == code
    assert name in TENSOR_TYPES
    assert np_dtype_of(name) == np.dtype(dt) == np.dtype(helper.tensor_dtype_to_np_dtype(code))
    assert _native._dtype_info(code) == (name, 1)


@pytest.mark.parametrize("code,name,dt", CASES)
def test_fallback_round_trip(code, name, dt):
    x = all_bytes(dt)
    nodes = [helper.make_node("Identity", ["x"], ["t"], name="a"), helper.make_node("Identity", ["t"], ["y"], name="b")]
    s = olc_core.Session(model_of(nodes, code), record_usage=True)
    assert [a.type for a in s.get_inputs() + s.get_outputs()] == [f"tensor({name})"] * 2
    (y,) = s.run(None, {"x": x})
    assert y.dtype == np.dtype(dt)
    np.testing.assert_array_equal(y.view(np.uint8), x.view(np.uint8))


@pytest.mark.parametrize("code,name,dt", CASES)
def test_feed_of_another_dtype_is_refused(code, name, dt):
    s = olc_core.Session(model_of([helper.make_node("Identity", ["x"], ["y"], name="a")], code))
    with pytest.raises(olc_core.OlcError, match=rf"'x'.*dtype float32, the model declares {name}"):
        s.run(None, {"x": np.zeros(256, np.float32)})
    with pytest.raises(olc_core.OlcError, match=rf"'x'.*dtype uint8, the model declares {name}"):
        s.run(None, {"x": np.zeros(256, np.uint8)})


class CopyPlugin:
    @hookimpl
    def olc_register_kernels(self):
        types = tuple(name for name, _ in FLOAT8.values()) + ("bfloat16",)
        return [KernelRegistration("test.olc", "Copy", "olc_core_test::Copy", {"T": types}, ("T",),
                                   _native._test_vtable("copy"), outputs=("T",), family="olc-core-tests")]


@pytest.fixture
def copy_plugin():
    plugin = CopyPlugin()
    olc_core.register_plugin(plugin, name="olc-core-float8-tests")
    yield plugin
    olc_core.unregister_plugin(plugin)


@pytest.mark.parametrize("code,name,dt", CASES)
def test_native_kernel_round_trip(copy_plugin, code, name, dt):
    # Copy (native) -> Identity (fallback: a Python step reading a runtime
    # buffer) -> Copy (native, reading the fallback's ml_dtypes array).
    nodes = [helper.make_node("Copy", ["x"], ["a"], domain="test.olc", name="c0"),
             helper.make_node("Identity", ["a"], ["b"], name="i"),
             helper.make_node("Copy", ["b"], ["y"], domain="test.olc", name="c1")]
    model = model_of(nodes, code, extra_opsets=[helper.make_opsetid("test.olc", 1)])
    s = olc_core.Session(model, record_usage=True)
    plan = s.kernel_plan()
    assert plan[0].native and plan[2].native
    x = all_bytes(dt)
    (y,) = s.run(None, {"x": x})
    assert y.dtype == np.dtype(dt)
    np.testing.assert_array_equal(y.view(np.uint8), x.view(np.uint8))
    assert s.kernel_usage_details()[0] == f"olc_core_test::Copy[{name}:1]"
    assert s.kernel_usage_details()[-1] == f"olc_core_test::Copy[{name}:1]"
    # Empty and scalar tensors.
    graph = helper.make_graph([nodes[0]], "g", [helper.make_tensor_value_info("x", code, None)],
                              [helper.make_tensor_value_info("a", code, None)])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("test.olc", 1)])
    s2 = olc_core.Session(m, strict=True)
    for v in (x[:0], x[5:6].reshape(())):
        (got,) = s2.run(None, {"x": v})
        assert got.dtype == np.dtype(dt) and got.shape == v.shape
        np.testing.assert_array_equal(got.view(np.uint8), v.view(np.uint8))


def test_float8_initializer_reaches_a_native_kernel(copy_plugin):
    w = np.array([1.0, -2.0, 448.0], np.float32).astype(ml_dtypes.float8_e4m3fn)
    node = helper.make_node("Copy", ["w"], ["y"], domain="test.olc", name="c")
    graph = helper.make_graph([node], "g", [], [helper.make_tensor_value_info("y", TensorProto.FLOAT8E4M3FN, [3])],
                              initializer=[onnx.numpy_helper.from_array(w, "w")])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("test.olc", 1)])
    (y,) = olc_core.Session(m, strict=True).run(None, {})
    assert y.dtype == w.dtype
    np.testing.assert_array_equal(y.view(np.uint8), w.view(np.uint8))
