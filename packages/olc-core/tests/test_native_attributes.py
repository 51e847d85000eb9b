"""Attributes on their way to a native kernel's create(): repeated fields as
arrays (exact, whole, fast), a registration's ``native_attributes`` hook for
attributes the ABI cannot carry, and ``supports`` passing a node on to the
next registration."""

from __future__ import annotations

import time

import numpy as np
import pytest
from onnx import AttributeProto, TensorProto, helper, numpy_helper

import olc_core
from olc_core import KernelRegistration, _native, hookimpl


def _strings_to_codes(node, shapes):
    """The test hook: a STRINGS attribute 'words' as their lengths (INTS),
    a TENSOR attribute 'table' as its values (FLOATS), the input's shape as
    INTS 'shape' (-1 for a dim that is not a number); a word 'bad' is
    refused."""
    out = []
    if shapes and shapes[0] is not None:
        out.append(("shape", AttributeProto.INTS, np.array([d if isinstance(d, int) else -1 for d in shapes[0]])))
    for a in node.attribute:
        if a.name == "words":
            if b"bad" in a.strings:
                raise ValueError("the word 'bad' is not allowed")
            out.append(("word_lengths", AttributeProto.INTS, np.array([len(w) for w in a.strings], np.int64)))
        elif a.name == "table":
            out.append(("table", AttributeProto.FLOATS, numpy_helper.to_array(a.t).astype(np.float64).ravel()))
    return out


def _mode(node):
    return next(a.i for a in node.attribute if a.name == "mode")


class AttrsPlugin:
    @hookimpl
    def olc_register_kernels(self):
        attrs = _native._test_vtable("attrs")
        return [
            KernelRegistration("test.attrs", "Attrs", "olc_core_test::Attrs", {}, (), attrs, family="attrs-tests"),
            KernelRegistration("test.attrs", "Hooked", "olc_core_test::Hooked", {}, (), attrs, family="attrs-tests",
                               native_attributes=_strings_to_codes),
            # Native for a node with mode 0; the Python kernel (lower
            # priority) takes the others.
            KernelRegistration("test.attrs", "Either", "olc_core_test::EitherNative", {}, (), attrs,
                               family="attrs-tests",
                               supports=lambda node: None if _mode(node) == 0 else "mode is not 0"),
            KernelRegistration("test.attrs", "Either", "olc_core_test::EitherPython", {}, (),
                               lambda info: (lambda: [np.array([7], np.int64), np.array([], np.float64)]),
                               family="attrs-tests", priority=-1),
        ]


@pytest.fixture
def plugin():
    p = AttrsPlugin()
    olc_core.register_plugin(p, name="attrs-tests")
    yield p
    olc_core.unregister_plugin(p)


def _model(op, **attrs):
    node = helper.make_node(op, [], ["i", "f"], domain="test.attrs", name="n", **attrs)
    graph = helper.make_graph([node], "g", [], [helper.make_tensor_value_info("i", TensorProto.INT64, None),
                                                helper.make_tensor_value_info("f", TensorProto.DOUBLE, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("test.attrs", 1)])


def test_repeated_attributes_reach_create_exactly(plugin):
    ints = [0, -1, 2**63 - 1, -(2**63), 12345678901234]
    floats = [0.1, -0.0, 3.4e38, 1e-45, float("inf")]
    s = olc_core.Session(_model("Attrs", a=ints, b=floats, c=[7], d=np.float32(2.5), e="text"), strict=True)
    i, f = s.run(None, {})
    assert i.tolist() == ints + [7]
    # FLOATS are float32 in the proto: each arrives as that float32, widened.
    np.testing.assert_array_equal(f, np.array(floats, np.float32).astype(np.float64))
    assert np.signbit(f[1])


def test_empty_repeated_attributes(plugin):
    model = _model("Attrs")
    for name, kind in (("a", AttributeProto.INTS), ("b", AttributeProto.FLOATS)):
        model.graph.node[0].attribute.append(AttributeProto(name=name, type=kind))
    i, f = olc_core.Session(model, strict=True).run(None, {})
    assert i.shape == (0,) and f.shape == (0,)


def test_large_repeated_attributes_are_not_converted_value_by_value(plugin):
    n = 3_000_000
    ints = np.arange(n, dtype=np.int64) * 3 - 5
    floats = np.linspace(-1, 1, n, dtype=np.float32)
    model = _model("Attrs")
    a = AttributeProto(name="a", type=AttributeProto.INTS)
    a.ints.extend(ints.tolist())
    b = AttributeProto(name="b", type=AttributeProto.FLOATS)
    b.floats.extend(floats.tolist())
    model.graph.node[0].attribute.extend([a, b])
    start = time.perf_counter()
    s = olc_core.Session(model, strict=True)
    created = time.perf_counter() - start
    i, f = s.run(None, {})
    np.testing.assert_array_equal(i, ints)
    np.testing.assert_array_equal(f, floats.astype(np.float64))
    # Not a timing gate (the host is shared): printed for the record.
    print(f"session with 6M attribute values: {created * 1e3:.0f} ms")


def test_native_attributes_hook(plugin):
    table = numpy_helper.from_array(np.array([[1.5, -2.0], [0.25, 8.0]], np.float32), "table")
    s = olc_core.Session(_model("Hooked", words=["ab", "", "xyz"], table=table), strict=True)
    entry = s.kernel_plan()[0]
    assert entry.native and entry.kernel == "olc_core_test::Hooked"
    i, f = s.run(None, {})
    assert i.tolist() == [2, 0, 3]
    assert f.tolist() == [1.5, -2.0, 0.25, 8.0]


def test_native_attributes_hook_sees_input_shapes(plugin):
    model = _model("Hooked", words=["abc"])
    model.graph.node[0].input.append("x")
    model.graph.input.append(helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 5]))
    i, _ = olc_core.Session(model, strict=True).run(None, {"x": np.zeros((2, 5), np.float32)})
    assert i.tolist() == [-1, 5, 3]


def test_native_attributes_hook_error_names_the_node(plugin):
    with pytest.raises(olc_core.OlcError, match=r"node 'n' \(Hooked\): the word 'bad' is not allowed"):
        olc_core.Session(_model("Hooked", words=["bad"]), strict=True)


def test_without_the_hook_strings_are_not_native(plugin):
    with pytest.raises(olc_core.NoKernelError, match="attributes a native kernel cannot take"):
        olc_core.Session(_model("Attrs", words=["ab"]), strict=True)


def test_supports_passes_the_node_to_the_next_registration(plugin):
    native = olc_core.Session(_model("Either", mode=0, a=[1, 2]), strict=True)
    assert native.kernel_plan()[0].kernel == "olc_core_test::EitherNative"
    assert native.run(None, {})[0].tolist() == [1, 2]
    other = olc_core.Session(_model("Either", mode=1, a=[1, 2]), strict=True)
    assert other.kernel_plan()[0].kernel == "olc_core_test::EitherPython"
    assert other.run(None, {})[0].tolist() == [7]
