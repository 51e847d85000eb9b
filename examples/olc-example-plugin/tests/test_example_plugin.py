"""The example plugin end to end: discovered through its entry point, chosen
by the session for com.example ScaledSoftsign, and equal to a numpy reference."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import olc_core
from olc_example_plugin import DOMAIN, KERNEL_NAME, OP_TYPE


def reference(x: np.ndarray, alpha: float = 1.0) -> np.ndarray:
    x64 = x.astype(np.float64)
    with np.errstate(invalid="ignore"):
        y = np.where(np.isinf(x64), np.sign(x64), x64 / (1.0 + np.abs(x64)))
    return (np.float32(alpha) * y.astype(np.float32)).astype(np.float32)


def make_model(shape, dtype=TensorProto.FLOAT, **attrs) -> onnx.ModelProto:
    node = helper.make_node(OP_TYPE, ["x"], ["y"], domain=DOMAIN, name="softsign", **attrs)
    graph = helper.make_graph([node], "example",
                              [helper.make_tensor_value_info("x", dtype, shape)],
                              [helper.make_tensor_value_info("y", dtype, shape)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20), helper.make_opsetid(DOMAIN, 1)])


def test_registered_through_entry_point():
    regs = [r for r in olc_core.registered_kernels() if r.kernel_name == KERNEL_NAME]
    assert len(regs) == 1
    r = regs[0]
    assert (r.domain, r.op_type, dict(r.types)) == (DOMAIN, OP_TYPE, {"T": ("float32",)})


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("shape", [[0], [1], [7], [3, 5], [2, 100_003]])
def test_plan_and_values(shape, threads):
    sess = olc_core.Session(make_model(shape), threads=threads, record_usage=True)
    plan = sess.kernel_plan()
    assert [(e.kernel, e.native) for e in plan] == [(KERNEL_NAME, True)]
    x = (np.random.default_rng(len(shape) + shape[-1]).standard_normal(shape) * 10).astype(np.float32)
    (y,) = sess.run(None, {"x": x})
    assert y.dtype == np.float32 and y.shape == x.shape
    np.testing.assert_allclose(y, reference(x), rtol=2e-7, atol=0)
    assert sess.kernel_usage() == [KERNEL_NAME]


def test_alpha_and_special_values():
    x = np.array([0.0, -0.0, 1.0, -3.0, np.inf, -np.inf, np.nan, 1e30, -1e-30], np.float32)
    (y,) = olc_core.Session(make_model([9], alpha=2.5)).run(None, {"x": x})
    expected = reference(x, 2.5)
    np.testing.assert_array_equal(np.isnan(y), np.isnan(expected))
    np.testing.assert_allclose(y[~np.isnan(y)], expected[~np.isnan(expected)], rtol=2e-7)
    assert y[4] == 2.5 and y[5] == -2.5 and np.signbit(y[1])


def test_bad_attributes_are_refused_at_creation():
    with pytest.raises(Exception, match="alpha must be a float"):
        olc_core.Session(make_model([4], alpha=2), strict=True)
    with pytest.raises(Exception, match="no attribute 'beta'"):
        olc_core.Session(make_model([4], beta=1.0), strict=True)


def test_float64_is_not_covered():
    # The registration claims float32 only: a strict session must refuse float64.
    with pytest.raises(olc_core.OlcError):
        olc_core.Session(make_model([4], dtype=TensorProto.DOUBLE), strict=True)
