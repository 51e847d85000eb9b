"""4-bit integers (ONNX codes 21 and 22) through the core: one element per
byte, as numpy holds ml_dtypes' uint4/int4 (value in the low 4 bits, high
bits zero), through the native views and through the fallback."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import olc_core
from olc_core import _native
from olc_core.registration import TENSOR_TYPES
from olc_core.session import TYPE_CODES, TYPE_NAMES, np_dtype_of

INT4 = [pytest.param(TensorProto.UINT4, "uint4", ml_dtypes.uint4, range(16), id="uint4"),
        pytest.param(TensorProto.INT4, "int4", ml_dtypes.int4, range(-8, 8), id="int4")]


def model_of(nodes, elem, out_elem=None, opset=21):
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", elem, [16])],
                              [helper.make_tensor_value_info("y", out_elem or elem, None)],
                              initializer=[helper.make_tensor("shape", TensorProto.INT64, [2], [4, 4])])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 10
    return m


@pytest.mark.parametrize("code,name,dt,values", INT4)
def test_type_tables(code, name, dt, values):
    assert TYPE_NAMES[code] == name and TYPE_CODES[name] == code and name in TENSOR_TYPES
    assert np_dtype_of(name) == np.dtype(dt) == np.dtype(helper.tensor_dtype_to_np_dtype(code))
    assert _native._dtype_info(code) == (name, 1)


@pytest.mark.parametrize("code,name,dt,values", INT4)
def test_views_keep_every_value(code, name, dt, values):
    x = np.array(list(values), dtype=dt)
    m = model_of([helper.make_node("Reshape", ["x", "shape"], ["r"]), helper.make_node("Identity", ["r"], ["y"])],
                 code)
    s = olc_core.Session(m, strict=True, record_usage=True)
    (y,) = s.run(None, {"x": x})
    assert y.dtype == np.dtype(dt) and y.shape == (4, 4)
    np.testing.assert_array_equal(y.reshape(-1).view(np.uint8), x.view(np.uint8))  # the same bytes
    assert s.kernel_usage() == ["olc_core::Reshape", "olc_core::Identity"]


@pytest.mark.parametrize("code,name,dt,values", INT4)
def test_fallback_reads_them(code, name, dt, values):
    # Cast to float32: whatever kernel runs it, each value is exact.
    x = np.array(list(values), dtype=dt)
    m = model_of([helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT)], code, TensorProto.FLOAT)
    (y,) = olc_core.Session(m).run(None, {"x": x})
    np.testing.assert_array_equal(y, np.array(list(values), np.float32))
    np.testing.assert_array_equal(y, ReferenceEvaluator(m).run(None, {"x": x})[0])


def test_a_feed_of_the_wrong_width_is_refused():
    m = model_of([helper.make_node("Identity", ["x"], ["y"])], TensorProto.INT4)
    with pytest.raises(olc_core.OlcError, match="has dtype int8, the model declares int4"):
        olc_core.Session(m).run(None, {"x": np.zeros(16, np.int8)})
