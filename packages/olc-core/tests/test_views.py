"""olc-core's own kernels: the shape ops as zero-copy views, Shape and Size.

The buffer rules are checked through the core test kernels: Scale (native,
allowed to write its output into input 0's buffer) and Probe (a Python
kernel that reports the data address and writability of what it receives).
Values are checked against numpy and onnx.reference.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import olc_core
from olc_core import KernelRegistration, _native, hookimpl

F = TensorProto.FLOAT
I64 = TensorProto.INT64


def _probe(node):
    def run(*arrays):
        addresses = [a.__array_interface__["data"][0] for a in arrays]
        writeable = [int(a.flags.writeable) for a in arrays]
        return [np.array(addresses + writeable, np.int64)]
    return run


class ViewTestPlugin:
    @hookimpl
    def olc_register_kernels(self):
        return [
            KernelRegistration("test.olc", "Scale", "olc_core_test::Scale", {"T": ("float32",)}, ("T",),
                               _native._test_vtable("scale"), outputs=("T",), family="olc-view-tests"),
            KernelRegistration("test.olc", "Probe", "olc_core_test::Probe", {"T": ("float32",)}, (),
                               _probe, outputs=(None,), family="olc-view-tests"),
        ]


@pytest.fixture(autouse=True)
def view_plugin():
    plugin = ViewTestPlugin()
    olc_core.register_plugin(plugin, name="olc-view-tests")
    yield
    olc_core.unregister_plugin(plugin)


def scale(x, y, factor, name=None):
    return helper.make_node("Scale", [x], [y], domain="test.olc", factor=factor, name=name or f"scale_{y}")


def model(nodes, inputs, outputs, initializers=(), opset=17):
    graph = helper.make_graph(nodes, "views", inputs, outputs, initializer=list(initializers))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid("test.olc", 1)])
    m.ir_version = 8
    return m


def vi(name, elem=F, shape=None):
    return helper.make_tensor_value_info(name, elem, shape)


def ints(name, values):
    return helper.make_tensor(name, I64, [len(values)], values)


def probe_result(out, n):
    return out[:n].tolist(), out[n:].tolist()


# ---------------------------------------------------------------- buffers


def test_views_share_their_input_buffer():
    n = helper.make_node
    m = model(
        [scale("x", "a", 2.0),
         n("Reshape", ["a", "shape"], ["r"]), n("Identity", ["a"], ["i"]), n("Squeeze", ["a", "ax0"], ["q"]),
         n("Unsqueeze", ["a", "ax0"], ["u"]), n("Flatten", ["a"], ["f"], axis=0),
         n("Dropout", ["a"], ["d"]),
         n("Probe", ["a", "r", "i", "q", "u", "f", "d"], ["p"], domain="test.olc")],
        [vi("x", F, [1, 6])], [vi("p", I64), vi("r"), vi("q")],
        [ints("shape", [2, 3]), ints("ax0", [0])])
    s = olc_core.Session(m, record_usage=True, strict=True)
    x = np.arange(6, dtype=np.float32).reshape(1, 6)
    p, r, q = s.run(None, {"x": x})
    addresses, _ = probe_result(p, 7)
    assert len(set(addresses)) == 1, addresses  # every view reads a's bytes
    np.testing.assert_array_equal(r, (2 * x).reshape(2, 3))
    np.testing.assert_array_equal(q, (2 * x).reshape(6))
    assert s.kernel_usage()[1:7] == ["olc_core::Reshape", "olc_core::Identity", "olc_core::Squeeze",
                                     "olc_core::Unsqueeze", "olc_core::Flatten", "olc_core::Dropout"]


@pytest.mark.parametrize("source", ["feed", "initializer"])
def test_a_view_of_a_feed_or_initializer_is_never_written(source):
    n = helper.make_node
    # Scale may write into its input's buffer when that input dies at it;
    # here its input is a view of the caller's data, which must stay intact.
    nodes = [n("Reshape", ["w", "shape"], ["r"]), n("Identity", ["r"], ["i"]), scale("i", "y", 3.0),
             n("Probe", ["r", "i"], ["p"], domain="test.olc")]
    w = np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4)
    keep = w.copy()
    if source == "feed":
        m = model(nodes, [vi("w", F, [2, 4])], [vi("y"), vi("p", I64)], [ints("shape", [4, 2])])
        feeds = {"w": w}
    else:
        m = model(nodes, [], [vi("y"), vi("p", I64)], [ints("shape", [4, 2]), onnx.numpy_helper.from_array(w, "w")])
        feeds = {}
    s = olc_core.Session(m, strict=True)
    for _ in range(3):  # a written initializer would change the next run
        y, p = s.run(None, feeds)
        np.testing.assert_array_equal(y, 3 * keep.reshape(4, 2))
    np.testing.assert_array_equal(w, keep)
    _, writeable = probe_result(p, 2)
    assert writeable == [0, 0]  # a Python kernel gets them read-only


def test_a_view_outlives_its_source():
    n = helper.make_node
    # 1 MiB tensors: a freed buffer would be handed to the next allocation
    # of its size (the buffer cache), which overwrites it.
    shape = [256, 1024]
    m = model(
        [scale("x", "a", 2.0), n("Reshape", ["a", "flat"], ["r"]),  # a's last use
         scale("x", "b", 4.0), scale("b", "c", 8.0),                # fresh buffers of a's size
         n("Reshape", ["r", "back"], ["r2"]), scale("r2", "y", 1.0)],
        [vi("x", F, shape)], [vi("y"), vi("c")], [ints("flat", [-1]), ints("back", shape)])
    s = olc_core.Session(m, strict=True)
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    for _ in range(2):
        y, c = s.run(None, {"x": x})
        np.testing.assert_array_equal(y, 2 * x)
        np.testing.assert_array_equal(c, 32 * x)


def test_no_in_place_write_into_storage_a_live_view_reads():
    n = helper.make_node
    m = model(
        [scale("x", "a", 2.0), n("Reshape", ["a", "flat"], ["r"]),
         scale("a", "s", 10.0),          # a dies here: in place, unless r still reads a's bytes
         scale("r", "t", 1.0)],
        [vi("x", F, [4, 8])], [vi("s"), vi("t")], [ints("flat", [-1])])
    s = olc_core.Session(m, strict=True)
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    out_s, out_t = s.run(None, {"x": x})
    np.testing.assert_array_equal(out_s, 20 * x)
    np.testing.assert_array_equal(out_t, (2 * x).reshape(-1))


def test_outputs_sharing_storage_come_back_as_separate_arrays():
    n = helper.make_node
    m = model([scale("x", "a", 2.0), n("Reshape", ["a", "flat"], ["r"]), n("Identity", ["x"], ["xi"])],
              [vi("x", F, [2, 3])], [vi("a"), vi("r"), vi("xi")], [ints("flat", [-1])])
    s = olc_core.Session(m, strict=True)
    x = np.ones((2, 3), np.float32)
    a, r, xi = s.run(None, {"x": x})
    assert not np.shares_memory(a, r) and not np.shares_memory(xi, x)
    a[...] = 0
    xi[...] = 7
    np.testing.assert_array_equal(r, np.full(6, 2, np.float32))
    np.testing.assert_array_equal(x, np.ones((2, 3), np.float32))


def test_views_of_values_a_python_kernel_produced():
    n = helper.make_node
    # Hardmax has no kernel: its output comes from the onnx.reference
    # fallback (a numpy array), and the views borrow that array.
    m = model([n("Hardmax", ["x"], ["h"]), n("Reshape", ["h", "flat"], ["r"]), n("Identity", ["r"], ["i"]),
               scale("i", "y", 4.0)],
              [vi("x", F, [3, 5])], [vi("y"), vi("r")], [ints("flat", [-1])], opset=17)
    s = olc_core.Session(m)
    x = np.random.default_rng(1).standard_normal((3, 5)).astype(np.float32)
    want = ReferenceEvaluator(_hardmax_only(x.shape)).run(None, {"x": x})[0]
    y, r = s.run(None, {"x": x})
    np.testing.assert_array_equal(r, want.reshape(-1))
    np.testing.assert_array_equal(y, 4 * want.reshape(-1))


def _hardmax_only(shape):
    return model([helper.make_node("Hardmax", ["x"], ["h"])], [vi("x", F, list(shape))], [vi("h")])


# ---------------------------------------------------------------- semantics


def _check_against_reference(m, feeds):
    s = olc_core.Session(m, strict=True, record_usage=True)
    got = s.run(None, feeds)
    want = ReferenceEvaluator(m).run(None, feeds)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, g.shape, w.dtype, w.shape)
        np.testing.assert_array_equal(g, w)
    assert all(k.startswith("olc_core::") for k in s.kernel_usage()), s.kernel_usage()


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int64, np.bool_, np.uint8])
@pytest.mark.parametrize("target,allowzero", [([0, -1], 0), ([-1], 0), ([0, 2, -1], 0), ([2, 0, 3, 0], 1),
                                              ([6, 1, 1, 0], 0)])
def test_reshape_matches_reference(dtype, target, allowzero):
    n = helper.make_node
    shape = [3, 0, 2] if allowzero else [3, 2, 1]
    if target == [6, 1, 1, 0]:
        shape = [3, 2, 1, 1]
    elem = onnx.helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    m = model([n("Reshape", ["x", "s"], ["y"], allowzero=allowzero)], [vi("x", elem, shape)], [vi("y", elem)],
              [ints("s", target)], opset=14)
    x = (np.arange(int(np.prod(shape))) % 3).astype(dtype).reshape(shape)
    _check_against_reference(m, {"x": x})


@pytest.mark.parametrize("opset", [11, 13])
def test_squeeze_unsqueeze_flatten_shape_size(opset):
    n = helper.make_node
    if opset < 13:
        nodes = [n("Squeeze", ["x"], ["sq"], axes=[-1, 1]), n("Unsqueeze", ["x"], ["un"], axes=[0, -1])]
        inits = []
    else:
        nodes = [n("Squeeze", ["x", "sqa"], ["sq"]), n("Unsqueeze", ["x", "una"], ["un"])]
        inits = [ints("sqa", [-1, 1]), ints("una", [0, -1])]
    nodes += [n("Squeeze", ["x"], ["sq_all"]), n("Flatten", ["x"], ["fl"], axis=-2), n("Shape", ["x"], ["sh"]),
              n("Size", ["x"], ["sz"])]
    outs = [vi("sq"), vi("un"), vi("sq_all"), vi("fl"), vi("sh", I64), vi("sz", I64)]
    m = model(nodes, [vi("x", F, [2, 1, 3, 1])], outs, inits, opset=opset)
    _check_against_reference(m, {"x": np.arange(6, dtype=np.float32).reshape(2, 1, 3, 1)})


@pytest.mark.parametrize("start,end", [(None, None), (1, None), (-2, None), (0, -1), (-10, 10), (3, 1)])
def test_shape_start_end(start, end):
    attrs = {k: v for k, v in (("start", start), ("end", end)) if v is not None}
    m = model([helper.make_node("Shape", ["x"], ["y"], **attrs)], [vi("x", F, [2, 3, 4])], [vi("y", I64)], opset=15)
    _check_against_reference(m, {"x": np.zeros((2, 3, 4), np.float32)})


def test_dropout_at_inference_with_mask():
    m = model([helper.make_node("Dropout", ["x"], ["y", "mask"], ratio=0.3)], [vi("x", F, [3, 4])],
              [vi("y"), vi("mask", TensorProto.BOOL)], opset=10)
    s = olc_core.Session(m, strict=True)
    x = np.random.default_rng(2).standard_normal((3, 4)).astype(np.float32)
    y, mask = s.run(None, {"x": x})
    np.testing.assert_array_equal(y, x)
    assert mask.dtype == np.bool_ and mask.all() and mask.shape == x.shape


def test_dropout_with_a_training_mode_input_is_not_taken():
    m = model([helper.make_node("Dropout", ["x", "", "tm"], ["y"])], [vi("x", F, [3]), vi("tm", TensorProto.BOOL, [])],
              [vi("y")], opset=13)
    plan = olc_core.Session(m).kernel_plan()
    assert not plan[0].native and "training_mode" in plan[0].reason


# ---------------------------------------------------------------- errors


@pytest.mark.parametrize("op,attrs,inputs,match", [
    ("Reshape", {}, {"s": [4, 4]}, r"node 'bad' \(Reshape\): cannot reshape \[2, 3\] \(6 elements\) to \[4, 4\]"),
    ("Reshape", {}, {"s": [-1, -1]}, r"node 'bad' \(Reshape\): shape \[-1, -1\] has more than one -1"),
    ("Reshape", {}, {"s": [2, 0, 0]}, r"node 'bad' \(Reshape\): .*copies dimension 2"),
    ("Reshape", {}, {"s": [4, -1]}, r"node 'bad' \(Reshape\): cannot reshape"),
    ("Squeeze", {}, {"s": [0]}, r"node 'bad' \(Squeeze\): cannot squeeze axis 0 of \[2, 3\]"),
    ("Squeeze", {}, {"s": [2]}, r"node 'bad' \(Squeeze\): axis 2 is out of range for rank 2"),
    ("Unsqueeze", {}, {"s": [0, 0]}, r"node 'bad' \(Unsqueeze\): axis 0 is given twice"),
    ("Unsqueeze", {}, {"s": [4]}, r"node 'bad' \(Unsqueeze\): axis 4 is out of range for rank 3"),
    ("Flatten", {"axis": 3}, {}, r"node 'bad' \(Flatten\): axis 3 is out of range for rank 2"),
])
def test_bad_shapes_are_clear_errors(op, attrs, inputs, match):
    n = helper.make_node
    names = ["x"] + list(inputs)
    # The shape/axes arrive as a feed: the error comes at run time, from the kernel.
    m = model([n(op, names, ["y"], name="bad", **attrs)],
              [vi("x", F, [2, 3])] + [vi(k, I64, [len(v)]) for k, v in inputs.items()], [vi("y")], opset=14)
    s = olc_core.Session(m, strict=True)
    feeds = {"x": np.zeros((2, 3), np.float32), **{k: np.array(v, np.int64) for k, v in inputs.items()}}
    with pytest.raises(olc_core.OlcError, match=match):
        s.run(None, feeds)
