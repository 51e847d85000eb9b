"""Scan on an olc sub-Session (opset 9 and later): state variables carried,
scan inputs read along any axis in either direction, scan outputs stacked
along any axis in either direction; every node on olc (strict=True),
compared with onnxruntime, a numpy model of the Scan schema, and
onnx.reference where it implements the attributes (axes 0, forward only)."""

from __future__ import annotations

import numpy as np
import pytest
from numpy_test_kernels import NumpyKernels
from onnx import TensorProto, helper, numpy_helper

import olc_core
from olc_core import KernelRegistration, hookimpl

F, D, I64 = TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.INT64
n = helper.make_node
ort = pytest.importorskip("onnxruntime")


class RaggedPlugin:
    """test.olc::Ones: a float vector of k ones (k a scalar input), a value
    whose shape changes from one iteration to the next; test.olc::ToDouble."""

    @hookimpl
    def olc_register_kernels(self):
        return [
            KernelRegistration("test.olc", "Ones", "olc_scan_test::Ones", {"T": ("int64",)}, ("T",),
                               lambda info: (lambda k: [np.ones(int(k), np.float32)]), family="olc-scan-tests"),
            KernelRegistration("test.olc", "ToDouble", "olc_scan_test::ToDouble", {"T": ("float32",)}, ("T",),
                               lambda info: (lambda x: [x.astype(np.float64)]), family="olc-scan-tests"),
        ]


@pytest.fixture(autouse=True)
def plugins():
    added = [NumpyKernels(), RaggedPlugin()]
    for k, p in enumerate(added):
        olc_core.register_plugin(p, name=f"olc-scan-tests-{k}")
    yield
    for p in added:
        olc_core.unregister_plugin(p)


def vi(name, elem=F, shape=None):
    return helper.make_tensor_value_info(name, elem, shape)


def model(nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, "scan", inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid("test.olc", 1)])
    m.ir_version = 8
    return m


def move(x, axis, to):
    return np.moveaxis(x, axis, to)


def cumsum_model(x_shape, in_axis, in_dir, out_axes, out_dirs, opset):
    """s <- s + x_t; scan outputs: s after the step, and x_t * w (w an outer value)."""
    slice_shape = [d for k, d in enumerate(x_shape) if k != in_axis % len(x_shape)]
    body = helper.make_graph(
        [n("Add", ["s_in", "x_t"], ["s_out"]), n("Identity", ["s_out"], ["y_sum"]),
         n("Mul", ["x_t", "w"], ["y_scaled"])],
        "body", [vi("s_in", F, slice_shape), vi("x_t", F, slice_shape)],
        [vi("s_out", F, slice_shape), vi("y_sum", F, slice_shape), vi("y_scaled", F, slice_shape)])
    attrs = {"num_scan_inputs": 1, "scan_input_axes": [in_axis], "scan_input_directions": [in_dir],
             "scan_output_axes": list(out_axes), "scan_output_directions": list(out_dirs)}
    return model([n("Scan", ["s0", "x"], ["s", "sums", "scaled"], name="scan", body=body, **attrs)],
                 [vi("s0", F, slice_shape), vi("x", F, list(x_shape))], [vi("s"), vi("sums"), vi("scaled")],
                 [numpy_helper.from_array(np.float32(0.5), "w")], opset=opset)


def cumsum_reference(s0, x, in_axis, in_dir, out_axes, out_dirs):
    """The Scan schema, written out: iteration t reads slice t (or L-1-t)
    and writes position t (or L-1-t) of each output, stacked at its axis."""
    xs = move(x, in_axis, 0)
    length = xs.shape[0]
    s, sums, scaled = s0, [None] * length, [None] * length
    for t in range(length):
        x_t = xs[length - 1 - t if in_dir else t]
        s = s + x_t
        for outs, value, rev in ((sums, s, out_dirs[0]), (scaled, x_t * np.float32(0.5), out_dirs[1])):
            outs[length - 1 - t if rev else t] = value
    stacked = []
    for outs, axis in ((sums, out_axes[0]), (scaled, out_axes[1])):
        a = np.stack(outs)
        stacked.append(move(a, 0, axis % a.ndim))
    return [s, *stacked]


CASES = [
    # (x shape, input axis, input direction, output axes, output directions, opset)
    ((5, 2, 3), 0, 0, (0, 0), (0, 0), 9),
    ((5, 2, 3), 0, 1, (0, 0), (1, 0), 9),
    ((2, 5, 3), 1, 0, (1, 2), (0, 1), 9),
    ((2, 3, 5), -1, 1, (-1, 0), (1, 1), 11),
    ((2, 3, 5), 2, 0, (-3, -2), (0, 1), 16),
    ((4, 3), -2, 1, (1, -1), (1, 0), 19),
    ((3, 4), 1, 0, (0, 1), (0, 0), 21),
]


@pytest.mark.parametrize("x_shape,in_axis,in_dir,out_axes,out_dirs,opset", CASES)
def test_scan_cumulative_sum_matches_onnxruntime_and_the_schema(x_shape, in_axis, in_dir, out_axes, out_dirs, opset):
    m = cumsum_model(x_shape, in_axis, in_dir, out_axes, out_dirs, opset)
    s = olc_core.Session(m, strict=True)
    rng = np.random.default_rng(7)
    x = rng.standard_normal(x_shape).astype(np.float32)
    slice_shape = move(x, in_axis, 0).shape[1:]
    s0 = rng.standard_normal(slice_shape).astype(np.float32)
    feeds = {"s0": s0, "x": x}
    got = s.run(None, feeds)
    want_ort = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    want_np = cumsum_reference(s0, x, in_axis, in_dir, out_axes, out_dirs)
    for g, w_ort, w_np in zip(got, want_ort, want_np):
        assert g.shape == w_ort.shape == w_np.shape and g.dtype == np.float32
        np.testing.assert_allclose(g, w_ort, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(g, w_np, rtol=1e-6, atol=1e-6)
    if in_axis == 0 and not in_dir and out_axes == (0, 0) and out_dirs == (0, 0):
        from onnx.reference import ReferenceEvaluator

        for g, w in zip(got, ReferenceEvaluator(m).run(None, feeds)):
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)


def test_the_plan_nests_the_body_and_every_node_is_an_olc_kernel():
    s = olc_core.Session(cumsum_model((5, 2, 3), 0, 0, (0, 0), (0, 0), 17), strict=True)
    (entry,) = s.kernel_plan()
    assert entry.kernel == "olc_core::Scan" and entry.op_type == "Scan"
    ((name, body),) = entry.subgraphs
    assert name == "body"
    assert [e.op_type for e in body] == ["Add", "Identity", "Mul"]
    assert all(not e.reason.startswith("fallback") for e in body)


def rnn_model():
    """An RNN-style body: h <- tanh(h * w + x_t + z_t); x scanned along axis
    0, z (batch-major) along axis 1 in reverse; h stacked along axis 1."""
    body = helper.make_graph(
        [n("Mul", ["h_in", "w"], ["hw"]), n("Add", ["hw", "x_t"], ["a"]), n("Add", ["a", "z_t"], ["pre"]),
         n("Tanh", ["pre"], ["h_out"]), n("Identity", ["h_out"], ["h_t"])],
        "rnn", [vi("h_in", F, [2, 3]), vi("x_t", F, [2, 3]), vi("z_t", F, [2, 3])],
        [vi("h_out", F, [2, 3]), vi("h_t", F, [2, 3])])
    return model([n("Scan", ["h0", "x", "z"], ["h", "hs"], name="rnn", body=body, num_scan_inputs=2,
                    scan_input_axes=[0, 1], scan_input_directions=[0, 1], scan_output_axes=[1])],
                 [vi("h0", F, [2, 3]), vi("x", F, [6, 2, 3]), vi("z", F, [2, 6, 3]), vi("w", F, [3])],
                 [vi("h"), vi("hs")])


def test_an_rnn_style_scan_with_two_scan_inputs_and_an_outer_feed():
    m = rnn_model()
    s = olc_core.Session(m, strict=True)
    rng = np.random.default_rng(3)
    feeds = {"h0": rng.standard_normal((2, 3)).astype(np.float32),
             "x": rng.standard_normal((6, 2, 3)).astype(np.float32),
             "z": rng.standard_normal((2, 6, 3)).astype(np.float32),
             "w": rng.standard_normal(3).astype(np.float32)}
    h, hs = s.run(None, feeds)
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    np.testing.assert_allclose(h, want[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(hs, want[1], rtol=1e-5, atol=1e-6)
    # And the recurrence written out in numpy.
    state, rows = feeds["h0"], []
    for t in range(6):
        state = np.tanh(state * feeds["w"] + feeds["x"][t] + feeds["z"][:, 5 - t])
        rows.append(state)
    np.testing.assert_allclose(hs, np.stack(rows, axis=1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(h, state, rtol=1e-5, atol=1e-6)


def test_a_scan_of_length_zero_returns_the_state_and_empty_outputs():
    m = cumsum_model((0, 2, 3), 0, 0, (0, 2), (0, 0), 17)
    s = olc_core.Session(m, strict=True)
    s0 = np.ones((2, 3), np.float32)
    state, sums, scaled = s.run(None, {"s0": s0, "x": np.zeros((0, 2, 3), np.float32)})
    np.testing.assert_array_equal(state, s0)
    # (onnxruntime 1.32 fails on a scan of length 0: nothing to compare with.)
    assert sums.shape == (0, 2, 3) and scaled.shape == (2, 3, 0) and sums.dtype == np.float32


def test_scan_8_stays_on_the_fallback():
    body = helper.make_graph([n("Add", ["s_in", "x_t"], ["s_out"]), n("Identity", ["s_out"], ["y"])], "body",
                             [vi("s_in", F, [2]), vi("x_t", F, [2])], [vi("s_out", F, [2]), vi("y", F, [2])])
    m = model([n("Scan", ["", "s0", "x"], ["s", "ys"], name="scan8", body=body, num_scan_inputs=1)],
              [vi("s0", F, [1, 2]), vi("x", F, [1, 3, 2])], [vi("s"), vi("ys")], opset=8)
    s = olc_core.Session(m)
    (entry,) = s.kernel_plan()
    assert entry.kernel == "onnx.reference::Scan"
    with pytest.raises(olc_core.NoKernelError, match="scan8"):
        olc_core.Session(m, strict=True)


# ---------------------------------------------------------------- errors


def two_input_model(x_axis=0, y_axis=0, opset=17, x_shape=None, y_shape=None):
    body = helper.make_graph([n("Add", ["x_t", "y_t"], ["z"])], "body", [vi("x_t"), vi("y_t")], [vi("z")])
    return model([n("Scan", ["x", "y"], ["zs"], name="pair", body=body, num_scan_inputs=2,
                    scan_input_axes=[x_axis, y_axis])],
                 [vi("x", F, x_shape), vi("y", F, y_shape)], [vi("zs")], opset=opset)


def test_scan_inputs_of_different_lengths_name_the_node():
    s = olc_core.Session(two_input_model(), strict=True)
    with pytest.raises(olc_core.OlcError, match=r"node 'pair' \(Scan\): scan input 1 has 4 elements along its "
                                                r"scan axis 0 .*scan input 0 has 3"):
        s.run(None, {"x": np.ones((3, 2), np.float32), "y": np.ones((4, 2), np.float32)})


def test_an_axis_outside_the_rank_is_refused_at_construction_when_the_rank_is_known():
    with pytest.raises(olc_core.InvalidModelError, match=r"node 'pair' \(Scan\): scan_input_axes\[1\] is 2, "
                                                         r"outside \[-2, 1\]"):
        olc_core.Session(two_input_model(y_axis=2, x_shape=[3, 2], y_shape=[3, 2]), strict=True)


def test_an_axis_outside_the_rank_is_refused_at_run_time_otherwise():
    s = olc_core.Session(two_input_model(y_axis=-3), strict=True)
    with pytest.raises(olc_core.OlcError, match=r"node 'pair' \(Scan\): scan_input_axes\[1\] is -3, outside"):
        s.run(None, {"x": np.ones((3, 2), np.float32), "y": np.ones((3, 2), np.float32)})


def test_negative_axes_need_opset_11():
    s = olc_core.Session(two_input_model(y_axis=-1, opset=9), strict=True)
    with pytest.raises(olc_core.OlcError, match=r"negative axes need Scan opset 11"):
        s.run(None, {"x": np.ones((2, 2), np.float32), "y": np.ones((2, 2), np.float32)})
    # The same axis from opset 11 reads y along its last axis.
    s = olc_core.Session(two_input_model(y_axis=-1, opset=11), strict=True)
    x, y = np.ones((2, 3), np.float32), np.arange(6, dtype=np.float32).reshape(3, 2)
    np.testing.assert_array_equal(s.run(None, {"x": x, "y": y})[0], x + y.T)


@pytest.mark.parametrize("attrs,match", [
    ({"scan_input_axes": [0]}, r"'scan_input_axes' has 1 values, one per scan input \(2\)"),
    ({"scan_output_directions": [0, 1]}, r"'scan_output_directions' has 2 values, one per scan output \(1\)"),
    ({"scan_input_directions": [0, 2]}, r"scan_input_directions\[1\] is 2; a direction is 0"),
])
def test_malformed_scan_attributes_name_the_node(attrs, match):
    body = helper.make_graph([n("Add", ["x_t", "y_t"], ["z"])], "body", [vi("x_t"), vi("y_t")], [vi("z")])
    m = model([n("Scan", ["x", "y"], ["zs"], name="pair", body=body, num_scan_inputs=2, **attrs)],
              [vi("x"), vi("y")], [vi("zs")])
    with pytest.raises(olc_core.InvalidModelError, match=r"node 'pair' \(Scan\): " + match):
        olc_core.Session(m, strict=True)


def test_a_scan_output_that_changes_shape_names_the_iteration():
    body = helper.make_graph([n("Ones", ["k_t"], ["y"], domain="test.olc")], "body", [vi("k_t", I64, [])],
                             [vi("y", F, None)])
    m = model([n("Scan", ["k"], ["ys"], name="ragged", body=body, num_scan_inputs=1)], [vi("k", I64, [3])],
              [vi("ys")])
    s = olc_core.Session(m, strict=True)
    np.testing.assert_array_equal(s.run(None, {"k": np.array([2, 2, 2], np.int64)})[0], np.ones((3, 2)))
    with pytest.raises(olc_core.OlcError, match=r"node 'ragged' \(Scan\), body \(iteration 1\): scan output 0 is "
                                                r"float32 \[3\], the first iteration gave float32 \[2\]"):
        s.run(None, {"k": np.array([2, 3, 2], np.int64)})


def test_a_state_variable_that_changes_type_or_shape_names_the_iteration():
    # Broadcasting turns a [1] state into [3] in iteration 0.
    body = helper.make_graph([n("Add", ["s_in", "x_t"], ["s_out"]), n("Identity", ["s_out"], ["y"])], "body",
                             [vi("s_in"), vi("x_t")], [vi("s_out"), vi("y")])
    m = model([n("Scan", ["s0", "x"], ["s", "ys"], name="grow", body=body, num_scan_inputs=1)],
              [vi("s0"), vi("x")], [vi("s"), vi("ys")])
    s = olc_core.Session(m, strict=True)
    with pytest.raises(olc_core.OlcError, match=r"node 'grow' \(Scan\), body \(iteration 0\): state variable 0 "
                                                r"comes back as float32 \[3\], it entered as float32 \[1\]"):
        s.run(None, {"s0": np.zeros(1, np.float32), "x": np.ones((2, 3), np.float32)})
    body = helper.make_graph([n("ToDouble", ["s_in"], ["s_out"], domain="test.olc"), n("Identity", ["x_t"], ["y"])],
                             "body", [vi("s_in"), vi("x_t")], [vi("s_out", D), vi("y")])
    m = model([n("Scan", ["s0", "x"], ["s", "ys"], name="retype", body=body, num_scan_inputs=1)],
              [vi("s0"), vi("x")], [vi("s"), vi("ys")])
    s = olc_core.Session(m, strict=True)
    with pytest.raises(olc_core.OlcError, match=r"node 'retype' \(Scan\), body \(iteration 0\): state variable 0 "
                                                r"comes back as float64 \[2\], it entered as float32 \[2\]"):
        s.run(None, {"s0": np.zeros(2, np.float32), "x": np.ones((2, 2), np.float32)})


def test_a_body_with_the_wrong_number_of_values_is_refused_at_construction():
    body = helper.make_graph([n("Add", ["s_in", "x_t"], ["s_out"])], "body", [vi("s_in"), vi("x_t")], [vi("s_out")])
    m = model([n("Scan", ["s0", "x"], ["s", "ys"], name="short", body=body, num_scan_inputs=1)],
              [vi("s0"), vi("x")], [vi("s"), vi("ys")])
    with pytest.raises(olc_core.InvalidModelError, match=r"node 'short' \(Scan\): the body returns 1 values, "
                                                         r"the node has 2 outputs"):
        olc_core.Session(m)


def test_an_error_inside_the_body_names_the_scan_and_the_iteration():
    body = helper.make_graph([n("Add", ["s_in", "x_t"], ["s_out"]), n("Reshape", ["s_out", "shape"], ["y"])],
                             "body", [vi("s_in", F, [4]), vi("x_t", F, [4])], [vi("s_out", F, [4]), vi("y")])
    m = model([n("Scan", ["s0", "x", "shape"][:2], ["s", "ys"], name="scan", body=body, num_scan_inputs=1)],
              [vi("s0", F, [4]), vi("x", F, [2, 4]), vi("shape", I64, [1])], [vi("s"), vi("ys")])
    s = olc_core.Session(m, strict=True)
    with pytest.raises(olc_core.OlcError, match=r"^node 'scan' \(Scan\), body \(iteration 0\): node 'Reshape_1' "
                                                r"\(Reshape\)"):
        s.run(None, {"s0": np.zeros(4, np.float32), "x": np.ones((2, 4), np.float32),
                     "shape": np.array([3], np.int64)})


def test_a_one_dimensional_scan_input_gives_the_body_zero_dimensional_tensors():
    # Each slice of a 1-D input is a 0-d tensor (not a numpy scalar) the
    # body's native Identity and Unsqueeze views take.
    body = helper.make_graph([n("Add", ["s_in", "x_t"], ["s_out"]), n("Identity", ["x_t"], ["y0"]),
                              n("Unsqueeze", ["x_t", "axis0"], ["y"])], "body",
                             [vi("s_in", F, []), vi("x_t", F, [])], [vi("s_out", F, []), vi("y", F, [1])])
    m = model([n("Scan", ["s0", "x"], ["s", "ys"], name="scan", body=body, num_scan_inputs=1,
                 scan_input_directions=[1])],
              [vi("s0", F, []), vi("x", F, [4])], [vi("s"), vi("ys")],
              [numpy_helper.from_array(np.array([0], np.int64), "axis0")])
    s = olc_core.Session(m, strict=True)
    feeds = {"s0": np.array(0.5, np.float32), "x": np.array([1, 2, 3, 4], np.float32)}
    got = s.run(None, feeds)
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_array_equal(g, w)
    np.testing.assert_array_equal(got[1], [[4], [3], [2], [1]])
