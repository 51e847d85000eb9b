"""The onnx.reference fallback is checked: outputs against shape inference,
subgraphs against the values they read from enclosing scopes, Loop against
onnxruntime, and evaluator failures become OlcError naming the node.

Oracles: onnx.reference on the whole model, onnxruntime (where installed)
and numpy.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import olc_core

OPSET = 18
n = helper.make_node


@pytest.fixture(autouse=True)
def _quiet_fallback_warning():
    logger = logging.getLogger("olc_core")
    level = logger.level
    logger.setLevel(logging.ERROR)
    yield
    logger.setLevel(level)


def tensor(name, elem=TensorProto.FLOAT, shape=None):
    return helper.make_tensor_value_info(name, elem, shape)


def const(name, value):
    return numpy_helper.from_array(np.asarray(value), name)


def make_model(nodes, inputs, outputs, initializers=(), opset=OPSET):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 9
    return model


def onnxruntime_outputs(model, feeds):
    ort = pytest.importorskip("onnxruntime")
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


def assert_same(ours, theirs, rtol=1e-5, atol=1e-6):
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, a.shape, b.dtype, b.shape)
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


def plan_kernel(sess, node_name):
    (entry,) = [e for e in sess.kernel_plan() if e.node_name == node_name]
    return entry.kernel


# ---------------------------------------------------------------- output check


def test_wrong_rank_from_the_reference_is_a_clear_error(monkeypatch):
    # Det has no olc kernel; its reference made to keep a trailing axis, as
    # onnx 1.23's GlobalMaxPool once dropped the channel axis of a rank-3
    # input (the shape a wrong-rank fallback passes on).
    _patched_det(monkeypatch, lambda x: np.linalg.det(x)[:, None].astype(x.dtype))
    model = det_model([2, 3, 3])
    sess = olc_core.Session(model)
    assert plan_kernel(sess, "det") == "onnx.reference::Det"
    with pytest.raises(olc_core.OlcError) as info:
        sess.run(None, {"m": np.ones((2, 3, 3), np.float32)})
    assert str(info.value) == (
        "node 'det' (Det): the onnx.reference fallback returned float32 [2, 1] for output 'd', "
        "but shape inference gives float32 [2]"
    )


def _use_references_own_hardmax(monkeypatch):
    """These tests make onnx.reference's Hardmax (an op no family covers)
    return wrong shapes; the fallback's own versions of reference ops (its
    Hardmax among them) stand aside."""
    from olc_core import session

    monkeypatch.setattr(session, "_reference_fixes", lambda: ())


def test_symbolic_dims_are_free_but_fixed_ones_and_rank_are_checked(monkeypatch):
    model = make_model([n("Hardmax", ["x"], ["y"], name="hm")], [tensor("x", shape=["N", 3])], [tensor("y")])
    from onnx.reference.ops import op_hardmax

    _use_references_own_hardmax(monkeypatch)

    x = np.ones((4, 3), np.float32)
    for returned, ok in (((5, 3), True), ((4, 3, 1), False), ((4, 2), False)):
        monkeypatch.setattr(op_hardmax.Hardmax, "_run",
                            lambda self, x, axis=None, shape=returned: (np.zeros(shape, x.dtype),))
        sess = olc_core.Session(model)
        if ok:  # N is symbolic: any length passes
            assert sess.run(None, {"x": x})[0].shape == returned
            continue
        shown = ", ".join(map(str, returned))
        with pytest.raises(olc_core.OlcError, match=rf"returned float32 \[{shown}\] .* gives float32 \[N, 3\]"):
            sess.run(None, {"x": x})


def test_a_correct_fallback_passes_the_check_untouched():
    # Hardmax, ReverseSequence and Det have no olc kernel, and onnx.reference
    # gets them right; SplitToSequence runs on olc-core's Python kernel.
    model = make_model(
        [n("Hardmax", ["x"], ["p"], name="hm"), n("ReverseSequence", ["z", "lens"], ["q"], name="rev"),
         n("SplitToSequence", ["z", "two"], ["seq"], name="s2s", axis=2),
         n("Det", ["m"], ["d"], name="det")],
        [tensor("x", shape=["N", 3, 4, 5]), tensor("z", shape=[2, 3, "W"]), tensor("m", shape=[2, 3, 3])],
        [tensor("p"), tensor("q"), helper.make_tensor_sequence_value_info("seq", TensorProto.FLOAT, None), tensor("d")],
        [const("two", np.array(2, np.int64)), const("lens", np.array([2, 1, 2], np.int64))],
    )
    rng = np.random.default_rng(1)
    feeds = {"x": rng.standard_normal((2, 3, 4, 5)).astype(np.float32),
             "z": rng.standard_normal((2, 3, 4)).astype(np.float32),
             "m": rng.standard_normal((2, 3, 3)).astype(np.float32)}
    sess = olc_core.Session(model)
    assert all(not e.native for e in sess.kernel_plan())
    assert sum(e.kernel.startswith("onnx.reference::") for e in sess.kernel_plan()) == 3
    p, q, seq, d = sess.run(None, feeds)
    rp, rq, rseq, rd = ReferenceEvaluator(model).run(None, feeds)
    np.testing.assert_array_equal(p, rp)
    np.testing.assert_array_equal(p, (feeds["x"] == feeds["x"].max(-1, keepdims=True)).astype(np.float32))
    np.testing.assert_array_equal(q, rq)
    assert [s.shape for s in seq] == [(2, 3, 2), (2, 3, 2)]
    for a, b in zip(seq, rseq):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(d, rd)


def _patched_det(monkeypatch, result):
    from onnx.reference.ops import op_det

    monkeypatch.setattr(op_det.Det, "_run", lambda self, x: (result(x),))


def det_model(shape):
    return make_model([n("Det", ["m"], ["d"], name="det")], [tensor("m", shape=shape)], [tensor("d")])


def test_wrong_element_type_is_a_clear_error(monkeypatch):
    _patched_det(monkeypatch, lambda x: np.linalg.det(x.astype(np.float64)))
    sess = olc_core.Session(det_model([2, 3, 3]))
    with pytest.raises(olc_core.OlcError, match=r"^node 'det' \(Det\): the onnx.reference fallback returned "
                                               r"float64 \[2\] for output 'd', but shape inference gives float32 \[2\]$"):
        sess.run(None, {"m": np.ones((2, 3, 3), np.float32)})


def test_a_symbolic_dim_used_twice_in_one_output_must_agree(monkeypatch):
    model = make_model([n("Hardmax", ["x"], ["y"], name="hm")], [tensor("x", shape=["N", "N"])], [tensor("y")])
    x = np.eye(3, dtype=np.float32)
    (y,) = olc_core.Session(model).run(None, {"x": x})
    np.testing.assert_array_equal(y, np.eye(3, dtype=np.float32))

    from onnx.reference.ops import op_hardmax

    _use_references_own_hardmax(monkeypatch)
    monkeypatch.setattr(op_hardmax.Hardmax, "_run", lambda self, x, axis=None: (np.zeros((3, 2), x.dtype),))
    with pytest.raises(olc_core.OlcError, match=r"returned float32 \[3, 2\] for output 'y', .* float32 \[N, N\]"):
        olc_core.Session(model).run(None, {"x": x})


def test_sequence_elements_are_checked(monkeypatch):
    # OptionalGetElement (on the fallback; from opset 18 it passes a
    # sequence through) over a sequence fed in, its reference
    # implementation made to return a sequence of mixed element types.
    model = make_model([n("OptionalGetElement", ["z"], ["seq"], name="s2s")],
                       [helper.make_tensor_sequence_value_info("z", TensorProto.FLOAT, None)],
                       [helper.make_tensor_sequence_value_info("seq", TensorProto.FLOAT, None)], opset=18)
    from onnx.reference.ops import op_optional_get_element

    monkeypatch.setattr(op_optional_get_element.OptionalGetElement, "_run",
                        lambda self, x, *a, **k: ([x[0], x[1].astype(np.float64)],))
    with pytest.raises(olc_core.OlcError, match=r"returned sequence\(float32 \[1, 3\], float64 \[1, 3\]\) "
                                               r"for output 'seq', but shape inference gives sequence\(float32 "):
        olc_core.Session(model).run(None, {"z": [np.ones((1, 3), np.float32)] * 2})


def test_a_feed_replacing_an_initializer_may_change_shapes():
    # Inference reads [2, 3] from the initializer; the feed may say [3, 2].
    model = make_model([n("Reshape", ["x", "shape"], ["y"], name="r")],
                       [tensor("x", shape=[6]), tensor("shape", TensorProto.INT64, [2])], [tensor("y")],
                       [const("shape", np.array([2, 3], np.int64))])
    x = np.arange(6, dtype=np.float32)
    sess = olc_core.Session(model)
    (y,) = sess.run(None, {"x": x})
    assert y.shape == (2, 3)
    feeds = {"x": x, "shape": np.array([3, 2], np.int64)}
    (y,) = sess.run(None, feeds)
    np.testing.assert_array_equal(y, ReferenceEvaluator(model).run(None, feeds)[0])
    assert y.shape == (3, 2)


def test_declared_shapes_nothing_enforces_do_not_fail_a_correct_output():
    # A wrong declared output shape and a wrong value_info: onnxruntime runs
    # such a model (with a warning), and so does olc.
    model = make_model([n("Hardmax", ["x"], ["h"], name="hm"), n("GlobalAveragePool", ["h"], ["y"], name="gap")],
                       [tensor("x", shape=[2, 3, 4])], [tensor("y", shape=[2, 3, 5])])
    model.graph.value_info.append(tensor("h", shape=[2, 7, 4]))
    x = np.random.default_rng(2).standard_normal((2, 3, 4)).astype(np.float32)
    (y,) = olc_core.Session(model).run(None, {"x": x})
    np.testing.assert_array_equal(y, ReferenceEvaluator(model).run(None, {"x": x})[0])
    assert y.shape == (2, 3, 1)


# ------------------------------- initializers, subgraphs and enclosing scopes


def test_scalar_initializers_stay_scalars():
    model = make_model([n("Gather", ["x", "i"], ["y"], name="g", axis=0), n("Hardmax", ["x"], ["h"], name="hm")],
                       [tensor("x", shape=[3, 4])], [tensor("y"), tensor("h"), tensor("s")],
                       [const("i", np.array(1, np.int64)), const("s", np.array(2.5, np.float32))])
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    y, _, s = olc_core.Session(model).run(None, {"x": x})
    ry, _, rs = ReferenceEvaluator(model).run(None, {"x": x})
    assert y.shape == ry.shape == (4,) and s.shape == rs.shape == ()
    np.testing.assert_array_equal(y, x[1])


H = 128


def vad_like_model():
    """sr -> Reshape -> Gather -> Equal -> If, each branch a small voice
    detector (Pad, Conv front end, Gather of the last frame, an LSTM cell of
    Gemm/Split/Sigmoid/Tanh/Mul/Add, MatMul head) on weights that are
    initializers of the main graph, read across the If; shared scalar
    initializers (a 0-d Gather index among them) are read by both branches.
    """
    rng = np.random.default_rng(3)

    def w(*shape, scale=0.1):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    inits = [const("minus_one", np.array([-1], np.int64)), const("zero", np.array(0, np.int64)),
             const("one", np.array(1, np.int64)), const("rate16k", np.array(16000, np.int64)),
             const("axis1", np.array([1], np.int64)), const("axis0", np.array([0], np.int64)),
             const("quarters", np.array([H, H, H, H], np.int64))]

    def branch(prefix, frame, mode):
        bins = frame // 2
        inits.extend([
            const(f"{prefix}pads", np.array([0, frame // 2, 0, frame // 2], np.int64)),
            const(f"{prefix}basis", w(2 * bins, 1, frame)),
            const(f"{prefix}enc_w", w(H, 2 * bins, 3)), const(f"{prefix}enc_b", w(H)),
            const(f"{prefix}w_ih", w(H, 4 * H)),          # Gemm B of shape [128, 512]
            const(f"{prefix}w_hh", w(4 * H, H)),          # transB=1
            const(f"{prefix}b", w(4 * H)), const(f"{prefix}head", w(H, 1)),
        ])
        p = prefix
        nodes = [
            n("Pad", ["audio", f"{p}pads"], [f"{p}padded"], mode=mode),
            n("Unsqueeze", [f"{p}padded", "axis1"], [f"{p}u"]),
            n("Conv", [f"{p}u", f"{p}basis"], [f"{p}spec"], strides=[frame // 2]),
            n("Relu", [f"{p}spec"], [f"{p}mag"]),
            n("Conv", [f"{p}mag", f"{p}enc_w", f"{p}enc_b"], [f"{p}enc"], pads=[1, 1]),
            n("Relu", [f"{p}enc"], [f"{p}feat3"]),
            n("Gather", [f"{p}feat3", "zero"], [f"{p}feat"], axis=2),     # [1, 128]: a 0-d index
            n("Gather", ["state", "zero"], [f"{p}h"], axis=0),
            n("Gather", ["state", "one"], [f"{p}c"], axis=0),
            n("Gemm", [f"{p}feat", f"{p}w_ih", f"{p}b"], [f"{p}gx"]),
            n("Gemm", [f"{p}h", f"{p}w_hh"], [f"{p}gh"], transB=1),
            n("Add", [f"{p}gx", f"{p}gh"], [f"{p}gates"]),
            n("Split", [f"{p}gates", "quarters"], [f"{p}i", f"{p}f", f"{p}g", f"{p}o"], axis=1),
            n("Sigmoid", [f"{p}i"], [f"{p}si"]), n("Sigmoid", [f"{p}f"], [f"{p}sf"]),
            n("Tanh", [f"{p}g"], [f"{p}tg"]), n("Sigmoid", [f"{p}o"], [f"{p}so"]),
            n("Mul", [f"{p}sf", f"{p}c"], [f"{p}fc"]), n("Mul", [f"{p}si", f"{p}tg"], [f"{p}ig"]),
            n("Add", [f"{p}fc", f"{p}ig"], [f"{p}c2"]), n("Tanh", [f"{p}c2"], [f"{p}tc"]),
            n("Mul", [f"{p}so", f"{p}tc"], [f"{p}h2"]),
            n("MatMul", [f"{p}h2", f"{p}head"], [f"{p}logit"]), n("Sigmoid", [f"{p}logit"], [f"{p}prob"]),
            n("Unsqueeze", [f"{p}h2", "axis0"], [f"{p}h3"]), n("Unsqueeze", [f"{p}c2", "axis0"], [f"{p}c3"]),
            n("Concat", [f"{p}h3", f"{p}c3"], [f"{p}state_out"], axis=0),
        ]
        return helper.make_graph(nodes, f"{prefix}branch", [],
                                 [tensor(f"{p}prob", shape=[1, 1]), tensor(f"{p}state_out", shape=[2, 1, H])])

    then_g = branch("k16_", 16, "reflect")
    else_g = branch("k8_", 8, "constant")
    top = [
        n("Reshape", ["sr", "minus_one"], ["sr_flat"], name="reshape"),
        n("Gather", ["sr_flat", "zero"], ["sr0"], name="gather", axis=0),
        n("Equal", ["sr0", "rate16k"], ["is16k"], name="equal"),
        n("If", ["is16k"], ["prob", "state_next"], name="rate", then_branch=then_g, else_branch=else_g),
    ]
    return make_model(top, [tensor("audio", shape=[1, 64]), tensor("state", shape=[2, 1, H]),
                            tensor("sr", TensorProto.INT64, [])],
                      [tensor("prob"), tensor("state_next")], inits)


@pytest.mark.parametrize("rate", [16000, 8000])
def test_if_reading_main_graph_initializers_matches_reference_and_onnxruntime(rate):
    model = vad_like_model()
    rng = np.random.default_rng(rate)
    feeds = {"audio": rng.standard_normal((1, 64)).astype(np.float32),
             "state": rng.standard_normal((2, 1, H)).astype(np.float32) * 0.5,
             "sr": np.array(rate, np.int64)}
    sess = olc_core.Session(model)
    assert plan_kernel(sess, "rate") == "olc_core::If"  # the branches run on olc sessions
    ours = sess.run(None, feeds)
    reference = ReferenceEvaluator(model).run(None, feeds)
    # The branches' Gemm and elementwise math run on olc kernels: not bit
    # for bit the reference's numpy.
    assert_same(ours, reference, rtol=1e-4, atol=1e-5)
    assert_same(ours, onnxruntime_outputs(model, feeds), rtol=1e-4, atol=1e-5)
    assert ours[0].shape == (1, 1) and ours[1].shape == (2, 1, H)
    # The two branches differ: the condition really chose one.
    other = dict(feeds, sr=np.array(24000 - rate, np.int64))
    assert not np.allclose(sess.run(None, other)[1], ours[1])


def test_a_branch_may_return_an_enclosing_value_as_it_is():
    # onnxruntime refuses this model (it wants an Identity); onnx.reference runs it.
    then_g = helper.make_graph([n("Neg", ["x"], ["nx"])], "then", [], [tensor("nx")])
    else_g = helper.make_graph([], "else", [], [tensor("w")])
    model = make_model([n("If", ["c"], ["y"], name="if", then_branch=then_g, else_branch=else_g)],
                       [tensor("c", TensorProto.BOOL, []), tensor("x", shape=[3])], [tensor("y")],
                       [const("w", np.array([1.0, 2.0, 3.0], np.float32))])
    sess = olc_core.Session(model)
    for c in (True, False):
        feeds = {"c": np.array(c), "x": np.array([4.0, 5.0, 6.0], np.float32)}
        (y,) = sess.run(None, feeds)
        np.testing.assert_array_equal(y, ReferenceEvaluator(model).run(None, feeds)[0])
        np.testing.assert_array_equal(y, -feeds["x"] if c else [1.0, 2.0, 3.0])


def nested_if_model():
    """If(outer) -> If(inner): the inner branches read a main-graph
    initializer and a main-graph value (two scopes up) and a value of the
    outer branch (one scope up)."""
    inner_then = helper.make_graph([n("Add", ["mid", "w"], ["it"]), n("Mul", ["it", "t"], ["it2"])], "inner_then", [],
                                   [tensor("it2")])
    inner_else = helper.make_graph([n("Sub", ["t", "w"], ["ie"])], "inner_else", [], [tensor("ie")])
    outer_then = helper.make_graph(
        [n("Mul", ["x", "w"], ["mid"]),
         n("If", ["inner"], ["ot"], then_branch=inner_then, else_branch=inner_else)], "outer_then", [], [tensor("ot")])
    outer_else = helper.make_graph([n("Neg", ["t"], ["oe"])], "outer_else", [], [tensor("oe")])
    return make_model(
        [n("Abs", ["x"], ["t"], name="abs"),
         n("If", ["outer"], ["y"], name="outer_if", then_branch=outer_then, else_branch=outer_else)],
        [tensor("outer", TensorProto.BOOL, []), tensor("inner", TensorProto.BOOL, []), tensor("x", shape=[4])],
        [tensor("y")], [const("w", np.array([0.5, -1.0, 2.0, 3.0], np.float32))])


@pytest.mark.parametrize("outer", [True, False])
@pytest.mark.parametrize("inner", [True, False])
def test_if_inside_if_reads_values_two_scopes_up(outer, inner):
    model = nested_if_model()
    x = np.array([1.0, -2.0, 3.0, -4.0], np.float32)
    feeds = {"outer": np.array(outer), "inner": np.array(inner), "x": x}
    ours = olc_core.Session(model).run(None, feeds)
    assert_same(ours, ReferenceEvaluator(model).run(None, feeds), rtol=0, atol=0)
    assert_same(ours, onnxruntime_outputs(model, feeds))
    w, t = np.array([0.5, -1.0, 2.0, 3.0], np.float32), np.abs(x)
    np.testing.assert_array_equal(ours[0], ((x * w + w) * t if inner else t - w) if outer else -t)


def test_if_inside_a_loop_body_reads_values_two_scopes_up():
    # for i in range(M): acc = acc + w if i < k else acc * s   (w: initializer, k and s: main-graph values)
    then_g = helper.make_graph([n("Add", ["acc_in", "w"], ["a1"])], "then", [], [tensor("a1")])
    else_g = helper.make_graph([n("Mul", ["acc_in", "s"], ["a2"])], "else", [], [tensor("a2")])
    body = helper.make_graph(
        [n("Identity", ["cond_in"], ["cond_out"]), n("Less", ["i", "k"], ["early"]),
         n("If", ["early"], ["acc_out"], then_branch=then_g, else_branch=else_g),
         n("Identity", ["acc_out"], ["trace"])],
        "body", [tensor("i", TensorProto.INT64, []), tensor("cond_in", TensorProto.BOOL, []), tensor("acc_in", shape=[3])],
        [tensor("cond_out", TensorProto.BOOL, []), tensor("acc_out", shape=[3]), tensor("trace", shape=[3])])
    model = make_model(
        [n("Abs", ["scale"], ["s"], name="abs"), n("Add", ["k0", "one"], ["k"], name="k"),
         n("Loop", ["M", "", "acc0"], ["acc", "traces"], name="loop", body=body)],
        [tensor("M", TensorProto.INT64, []), tensor("acc0", shape=[3]), tensor("scale", shape=[3]),
         tensor("k0", TensorProto.INT64, [])],
        [tensor("acc"), tensor("traces")],
        [const("w", np.array([1.0, 2.0, 3.0], np.float32)), const("one", np.array(1, np.int64))])
    feeds = {"M": np.array(4, np.int64), "acc0": np.zeros(3, np.float32),
             "scale": np.array([-2.0, 0.5, 1.0], np.float32), "k0": np.array(1, np.int64)}
    sess = olc_core.Session(model)
    assert plan_kernel(sess, "loop") == "olc_core::Loop"
    ours = sess.run(None, feeds)
    w, s, k = np.array([1.0, 2.0, 3.0], np.float32), np.abs(feeds["scale"]), 2
    acc, expected = feeds["acc0"], []
    for i in range(4):
        acc = acc + w if i < k else acc * s
        expected.append(acc)
    np.testing.assert_allclose(ours[0], acc, rtol=1e-6)
    np.testing.assert_allclose(ours[1], np.stack(expected), rtol=1e-6)
    assert_same(ours, onnxruntime_outputs(model, feeds))


# ------------------------------------------------------------------- Loop


def loop_model(per_iteration="vector", with_cond=True, declare_scan=True):
    """acc <- acc + x each iteration (x read from the main graph); the scan
    output records acc (a [3] vector), its sum (a scalar) or acc as [1, 3]."""
    scan_nodes = {
        "vector": [n("Identity", ["acc_out"], ["scan"])],
        "scalar": [n("ReduceSum", ["acc_out"], ["scan"], keepdims=0)],
        "row": [n("Unsqueeze", ["acc_out", "axis0"], ["scan"])],
    }[per_iteration]
    scan_shape = {"vector": [3], "scalar": [], "row": [1, 3]}[per_iteration] if declare_scan else None
    body = helper.make_graph(
        [n("Identity", ["cond_in"], ["cond_out"]), n("Add", ["acc_in", "x"], ["acc_out"]), *scan_nodes],
        "body", [tensor("i", TensorProto.INT64, []), tensor("cond_in", TensorProto.BOOL, []), tensor("acc_in", shape=[3])],
        [tensor("cond_out", TensorProto.BOOL, []), tensor("acc_out", shape=[3]), tensor("scan", shape=scan_shape)])
    inputs = [tensor("M", TensorProto.INT64, []), tensor("acc0", shape=[3]), tensor("x", shape=[3])]
    if with_cond:
        inputs.insert(1, tensor("cond", TensorProto.BOOL, []))
    return make_model([n("Loop", ["M", "cond" if with_cond else "", "acc0"], ["acc", "scans"], name="loop", body=body)],
                      inputs, [tensor("acc"), tensor("scans")], [const("axis0", np.array([0], np.int64))])


def loop_feeds(trips, cond=None):
    feeds = {"M": np.array(trips, np.int64), "acc0": np.array([1.0, 0.0, -1.0], np.float32),
             "x": np.array([0.5, 1.0, 2.0], np.float32)}
    if cond is not None:
        feeds["cond"] = np.array(cond)
    return feeds


def expected_loop(feeds, per_iteration):
    trips = int(feeds["M"]) if feeds.get("cond", True) else 0
    acc, scans = feeds["acc0"], []
    for _ in range(trips):
        acc = acc + feeds["x"]
        scans.append({"vector": acc, "scalar": acc.sum(), "row": acc[None]}[per_iteration])
    empty = {"vector": (0, 3), "scalar": (0,), "row": (0, 1, 3)}[per_iteration]
    return [acc, np.stack(scans) if scans else np.zeros(empty, np.float32)]


def test_for_loop_without_a_condition_runs_its_trip_count():
    # onnx.reference runs no iteration when cond is omitted and then fails in
    # np.vstack ("need at least one array to concatenate"); onnxruntime runs it.
    model = loop_model(with_cond=False)
    feeds = loop_feeds(3)
    with pytest.raises(ValueError, match="need at least one array to concatenate"):
        ReferenceEvaluator(model).run(None, feeds)
    ours = olc_core.Session(model).run(None, feeds)
    assert_same(ours, expected_loop(feeds, "vector"))
    assert_same(ours, onnxruntime_outputs(model, feeds))


@pytest.mark.parametrize("per_iteration", ["vector", "scalar", "row"])
@pytest.mark.parametrize(("trips", "cond"), [(3, True), (0, True), (3, False)])
def test_loop_scan_outputs_match_onnxruntime(per_iteration, trips, cond):
    model = loop_model(per_iteration)
    feeds = loop_feeds(trips, cond)
    ours = olc_core.Session(model).run(None, feeds)
    assert_same(ours, expected_loop(feeds, per_iteration))
    assert_same(ours, onnxruntime_outputs(model, feeds))


def test_loop_ended_by_its_condition():
    # while i < 2: acc += x, scanning acc; M is large.
    body = helper.make_graph(
        [n("Add", ["acc_in", "x"], ["acc_out"]), n("Less", ["i", "two"], ["cond_out"]),
         n("Identity", ["acc_out"], ["scan"])],
        "body", [tensor("i", TensorProto.INT64, []), tensor("cond_in", TensorProto.BOOL, []), tensor("acc_in", shape=[3])],
        [tensor("cond_out", TensorProto.BOOL, []), tensor("acc_out", shape=[3]), tensor("scan", shape=[3])])
    model = make_model([n("Loop", ["M", "cond", "acc0"], ["acc", "scans"], name="loop", body=body)],
                       [tensor("M", TensorProto.INT64, []), tensor("cond", TensorProto.BOOL, []),
                        tensor("acc0", shape=[3]), tensor("x", shape=[3])],
                       [tensor("acc"), tensor("scans")], [const("two", np.array(2, np.int64))])
    feeds = loop_feeds(1000, True)
    ours = olc_core.Session(model).run(None, feeds)
    x, acc0 = feeds["x"], feeds["acc0"]
    np.testing.assert_allclose(ours[1], np.stack([acc0 + x, acc0 + 2 * x, acc0 + 3 * x]), rtol=1e-6)
    assert_same(ours, onnxruntime_outputs(model, feeds))


def test_loop_without_iterations_and_an_unknown_scan_shape_is_a_clear_error():
    model = loop_model("row", declare_scan=False)
    sess = olc_core.Session(model)
    # With iterations the shape comes from the values.
    assert_same(sess.run(None, loop_feeds(2, True)), expected_loop(loop_feeds(2, True), "row"))
    with pytest.raises(olc_core.OlcError, match=r"^node 'loop' \(Loop\): the loop ran no iteration.*scan output 0"):
        sess.run(None, loop_feeds(0, True))


def shadowing_loop(loop_inputs):
    """A Loop whose body input is named like a main-graph input, "x"."""
    body = helper.make_graph(
        [n("Identity", ["cond_in"], ["cond_out"]), n("Add", ["x", "one_f"], ["x_out"])],
        "body", [tensor("i", TensorProto.INT64, []), tensor("cond_in", TensorProto.BOOL, []), tensor("x", shape=[3])],
        [tensor("cond_out", TensorProto.BOOL, []), tensor("x_out", shape=[3])])
    return n("Loop", loop_inputs, ["r"], body=body)


def test_a_loop_body_input_hides_the_enclosing_value_of_its_name():
    # r = a + M: the body's "x" is the loop-carried value, not the graph input
    # "x" (onnx.reference on the whole model lets the enclosing one win).
    loop = shadowing_loop(["M", "cond", "a"])
    loop.name = "loop"
    model = make_model([n("Neg", ["x"], ["nx"], name="neg"), loop],
                       [tensor("M", TensorProto.INT64, []), tensor("cond", TensorProto.BOOL, []), tensor("a", shape=[3]),
                        tensor("x", shape=[3])], [tensor("r"), tensor("nx")],
                       [const("one_f", np.array(1.0, np.float32))])
    feeds = {"M": np.array(2, np.int64), "cond": np.array(True), "a": np.zeros(3, np.float32),
             "x": np.full(3, 10.0, np.float32)}
    ours = olc_core.Session(model).run(None, feeds)
    np.testing.assert_array_equal(ours[0], [2.0, 2.0, 2.0])
    assert_same(ours, onnxruntime_outputs(model, feeds))
    assert not np.array_equal(ReferenceEvaluator(model).run(None, feeds)[0], ours[0])

    # The same inside an If branch that also reads the enclosing "x":
    # the If's evaluator then holds "x" in the scope the Loop runs in.
    then_g = helper.make_graph([n("Neg", ["x"], ["nx2"]), shadowing_loop(["M", "cond", "a"]),
                                n("Add", ["r", "nx2"], ["t"])], "then", [], [tensor("t")])
    else_g = helper.make_graph([n("Identity", ["a"], ["e"])], "else", [], [tensor("e")])
    model = make_model([n("If", ["cond"], ["y"], name="if", then_branch=then_g, else_branch=else_g)],
                       [tensor("M", TensorProto.INT64, []), tensor("cond", TensorProto.BOOL, []), tensor("a", shape=[3]),
                        tensor("x", shape=[3])], [tensor("y")], [const("one_f", np.array(1.0, np.float32))])
    ours = olc_core.Session(model).run(None, feeds)
    np.testing.assert_array_equal(ours[0], [-8.0, -8.0, -8.0])
    assert_same(ours, onnxruntime_outputs(model, feeds))


def test_a_loop_body_initializer_hides_the_enclosing_value_of_its_name():
    # The loop starts from the graph input "w"; the body adds its own initializer "w" (ones).
    body = helper.make_graph(
        [n("Identity", ["cond_in"], ["cond_out"]), n("Add", ["v", "w"], ["v_out"])],
        "body", [tensor("i", TensorProto.INT64, []), tensor("cond_in", TensorProto.BOOL, []), tensor("v", shape=[3])],
        [tensor("cond_out", TensorProto.BOOL, []), tensor("v_out", shape=[3])],
        initializer=[const("w", np.ones(3, np.float32))])
    model = make_model([n("Loop", ["M", "cond", "w"], ["r"], name="loop", body=body)],
                       [tensor("M", TensorProto.INT64, []), tensor("cond", TensorProto.BOOL, []), tensor("w", shape=[3])],
                       [tensor("r")])
    feeds = {"M": np.array(2, np.int64), "cond": np.array(True), "w": np.full(3, 10.0, np.float32)}
    ours = olc_core.Session(model).run(None, feeds)
    np.testing.assert_array_equal(ours[0], [12.0, 12.0, 12.0])
    assert_same(ours, onnxruntime_outputs(model, feeds))
    np.testing.assert_array_equal(ReferenceEvaluator(model).run(None, feeds)[0], [30.0, 30.0, 30.0])


# ------------------------------------------------------- evaluator failures


def test_an_evaluator_exception_is_an_olc_error_naming_the_node_with_its_cause(monkeypatch):
    # Det has no olc kernel: it runs on the fallback, made to fail here.
    from onnx.reference.ops import op_det

    def fail(self, x):
        raise ValueError("cannot take this determinant")

    monkeypatch.setattr(op_det.Det, "_run", fail)
    model = make_model([n("Det", ["x"], ["y"], name="d")], [tensor("x", shape=[2, 2])], [tensor("y")])
    sess = olc_core.Session(model)
    with pytest.raises(olc_core.OlcError) as info:
        sess.run(None, {"x": np.ones((2, 2), np.float32)})
    message = str(info.value)
    assert message.startswith("node 'd' (Det): the onnx.reference fallback failed: ValueError: ")
    assert "cannot take this determinant" in message and "At:" not in message
    assert isinstance(info.value.__cause__, ValueError)
    assert str(info.value.__cause__) in message
    # The session still runs, and a later unrelated error is reported as itself.
    with pytest.raises(olc_core.OlcError, match="missing feed for graph input 'x'") as later:
        sess.run(None, {})
    assert later.value.__cause__ is None


def test_an_exception_inside_a_branch_names_the_if_node(monkeypatch):
    class Boom(Exception):
        pass

    def fail(self, x):
        raise Boom("inner failure")

    from onnx.reference.ops import op_det

    monkeypatch.setattr(op_det.Det, "_run", fail)
    then_g = helper.make_graph([n("Det", ["m"], ["d"])], "then", [], [tensor("d")])
    else_g = helper.make_graph([n("ReduceSum", ["m"], ["d2"], keepdims=0)], "else", [], [tensor("d2")])
    model = make_model([n("If", ["c"], ["y"], name="branchy", then_branch=then_g, else_branch=else_g)],
                       [tensor("c", TensorProto.BOOL, []), tensor("m", shape=[2, 2])], [tensor("y")])
    sess = olc_core.Session(model)
    m = np.eye(2, dtype=np.float32)
    np.testing.assert_array_equal(sess.run(None, {"c": np.array(False), "m": m})[0], np.float32(2.0))
    with pytest.raises(olc_core.OlcError, match=r"^node 'branchy' \(If\), then_branch: node 'Det_0' \(Det\): "
                                               r"the onnx.reference fallback failed: Boom: inner failure$") as info:
        sess.run(None, {"c": np.array(True), "m": m})
    # The branch's own error, and under it the exception that started it.
    assert isinstance(info.value.__cause__, olc_core.OlcError)
    assert isinstance(info.value.__cause__.__cause__, Boom)


# ------------------------------------------------- Softmax family, old opsets


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax", "Hardmax"])
@pytest.mark.parametrize("opset,axis", [(11, None), (11, 0), (11, 2), (11, -1), (13, None), (13, 1), (13, -3)])
def test_softmax_family_fallback_follows_each_opsets_rule(op, opset, axis):
    """onnx.reference (1.23) applies opset 13's per-axis rule at opsets 1-12,
    where the input is coerced to 2-D at `axis`; the fallback's own ops give
    what onnxruntime gives at both rules, and LogSoftmax stays finite where a
    softmax underflows."""
    from olc_core.session import _reference_fixes

    attrs = {} if axis is None else {"axis": axis}
    x = np.random.default_rng(5).standard_normal((2, 3, 4)).astype(np.float32) * 4
    x[0, 0, 0] = 120.0  # far above the rest: every other softmax of its row underflows
    x[1, 2, 1] = x[1, 2, 3]  # a tie: Hardmax takes the first
    m = make_model([n(op, ["x"], ["y"], **attrs)], [tensor("x", shape=[2, 3, 4])], [tensor("y", shape=[2, 3, 4])],
                   opset=opset)
    ours = ReferenceEvaluator(m, new_ops=list(_reference_fixes())).run(None, {"x": x})
    assert_same(ours, onnxruntime_outputs(m, {"x": x}))


# ------------------------------------------------- BatchNormalization, inference


@pytest.mark.parametrize("opset", [7, 9, 13, 14, 15])
def test_batch_normalization_fallback_uses_the_given_statistics(opset):
    """onnx.reference (1.23) normalizes a one-output BatchNormalization of
    opsets 9-13 with the batch's own mean and variance (it reads the schema's
    default momentum as training); the fallback's own op uses the given mean
    and var at every opset, as onnxruntime does, and opset 14's training mode
    is still onnx.reference's."""
    from olc_core.session import _reference_fixes

    rng = np.random.default_rng(9)
    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    scale, bias, mean = (rng.standard_normal(3).astype(np.float32) for _ in range(3))
    var = rng.uniform(0.5, 2.0, 3).astype(np.float32)
    inits = [numpy_helper.from_array(a, k) for k, a in zip("sbmv", (scale, bias, mean, var))]
    m = make_model([n("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], epsilon=1e-3)],
                   [tensor("x", shape=[2, 3, 4, 5])], [tensor("y", shape=[2, 3, 4, 5])], inits, opset=opset)
    ours = ReferenceEvaluator(m, new_ops=list(_reference_fixes())).run(None, {"x": x})
    c = (slice(None), None, None)
    want = (x - mean[c]) / np.sqrt(var[c] + np.float32(1e-3)) * scale[c] + bias[c]
    np.testing.assert_allclose(ours[0], want, rtol=1e-5, atol=1e-5)
    assert_same(ours, onnxruntime_outputs(m, {"x": x}))
    if opset == 9:  # what onnx.reference alone gives: the batch's statistics
        theirs = ReferenceEvaluator(m).run(None, {"x": x})[0]
        assert not np.allclose(theirs, want, atol=1e-3)
    if opset >= 14:  # training mode: Y and the running statistics, as onnx.reference computes them
        t = make_model([n("BatchNormalization", ["x", "s", "b", "m", "v"], ["y", "rm", "rv"], training_mode=1)],
                       [tensor("x", shape=[2, 3, 4, 5])], [tensor("y"), tensor("rm"), tensor("rv")], inits,
                       opset=opset)
        got = ReferenceEvaluator(t, new_ops=list(_reference_fixes())).run(None, {"x": x})
        assert_same(got, ReferenceEvaluator(t).run(None, {"x": x}))
        batch_mean = x.mean(axis=(0, 2, 3))
        np.testing.assert_allclose(got[1], mean * 0.9 + batch_mean * 0.1, rtol=1e-5, atol=1e-6)
