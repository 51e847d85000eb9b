"""Naive and optimized registrations of one op: a session takes the
optimized kernel unless ``naive`` names the family (or is True), and the
plan says which ran."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import olc_core
from olc_core import KernelRegistration, hookimpl


def _twice(scale):
    def factory(node):
        return lambda x: [x * scale]
    return factory


class TwoImplementations:
    # The "optimized" kernel multiplies by 2, the naive one by 2.0 in float64
    # then casts back: the same answer, told apart by the plan and usage.
    @hookimpl
    def olc_register_kernels(self):
        common = {"domain": "test.olc", "op_type": "Twice", "types": {"T": ("float32",)}, "inputs": ("T",),
                  "outputs": ("T",), "family": "olc-naive-tests"}
        return [
            KernelRegistration(kernel_name="olc_naive_tests::Twice", factory=_twice(np.float32(2)), **common),
            KernelRegistration(kernel_name="olc_naive_tests::NaiveTwice", implementation="naive",
                               factory=lambda node: (lambda x: [(x.astype(np.float64) * 2).astype(np.float32)]),
                               **common),
            # Only a naive kernel: never taken unless asked for.
            KernelRegistration(domain="test.olc", op_type="OnlyNaive", kernel_name="olc_naive_tests::NaiveOnly",
                               types={"T": ("float32",)}, inputs=("T",), outputs=("T",), family="olc-naive-tests",
                               implementation="naive", factory=_twice(np.float32(1))),
        ]


@pytest.fixture(autouse=True)
def plugin():
    p = TwoImplementations()
    olc_core.register_plugin(p, name="olc-naive-tests")
    yield
    olc_core.unregister_plugin(p)


def model(op="Twice"):
    graph = helper.make_graph([helper.make_node(op, ["x"], ["y"], domain="test.olc", name="n")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("test.olc", 1)])
    m.ir_version = 8
    return m


@pytest.mark.parametrize("naive,kernel", [
    (False, "olc_naive_tests::Twice"), (True, "olc_naive_tests::NaiveTwice"),
    ("olc-naive-tests", "olc_naive_tests::NaiveTwice"), (["olc-naive-tests"], "olc_naive_tests::NaiveTwice"),
    ("olc-core", "olc_naive_tests::Twice"),  # another family named: this one stays optimized
])
def test_the_session_option_picks_the_implementation(naive, kernel):
    s = olc_core.Session(model(), naive=naive, record_usage=True, strict=True)
    assert [e.kernel for e in s.kernel_plan()] == [kernel]
    (y,) = s.run(None, {"x": np.array([1, 2, 3], np.float32)})
    np.testing.assert_array_equal(y, [2, 4, 6])
    assert s.kernel_usage() == [kernel]


def test_a_naive_only_kernel_is_taken_only_when_asked():
    with pytest.raises(olc_core.NoKernelError, match="OnlyNaive"):
        olc_core.Session(model("OnlyNaive"), strict=True)
    s = olc_core.Session(model("OnlyNaive"), naive=True, strict=True)
    assert [e.kernel for e in s.kernel_plan()] == ["olc_naive_tests::NaiveOnly"]


def test_an_unknown_family_is_an_error():
    with pytest.raises(ValueError, match="no installed family is named 'olc-nothing'"):
        olc_core.Session(model(), naive="olc-nothing")


def test_a_bad_implementation_name_is_refused():
    with pytest.raises(ValueError, match="implementation must be one of"):
        KernelRegistration("test.olc", "X", "t::X", {"T": ("float32",)}, ("T",), lambda n: None,
                           implementation="fast")
