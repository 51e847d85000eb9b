"""Shape plans: nodes whose values depend only on the feeds' shapes are
folded at construction (static shapes) or cached per feed-shape signature.

Results are checked against numpy and onnx.reference on every run, with
shapes that repeat, change and come back, and with models built so that a
wrong cache would give a wrong answer (values that depend on data, on a
feed's value, on a replaceable initializer).
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import olc_core
from olc_core import shape_plan

F = TensorProto.FLOAT
I64 = TensorProto.INT64
n = helper.make_node


def model(nodes, inputs, outputs, initializers=(), opset=17):
    graph = helper.make_graph(nodes, "shape_plan", inputs, outputs, initializer=list(initializers))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def vi(name, elem=F, shape=None):
    return helper.make_tensor_value_info(name, elem, shape)


def ints(name, values):
    return helper.make_tensor(name, I64, [len(values)], values)


def marks(session):
    return {e.node_name: e.shape_plan for e in session.kernel_plan()}


def check_against_reference(m, session, feeds):
    want = ReferenceEvaluator(m).run(None, feeds)
    got = session.run(None, feeds)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, g.shape, w.dtype, w.shape)
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)
    return got


def flatten_by_shape_model():
    """y = reshape(x, [x.shape[0], prod(x.shape[1:])]), the shape computed
    from Shape -> Slice/Gather -> ReduceProd -> Concat, as exporters write it."""
    nodes = [
        n("Shape", ["x"], ["s"], name="shape"),
        n("Gather", ["s", "zero"], ["d0"], axis=0, name="first_dim"),
        n("Unsqueeze", ["d0", "axes0"], ["d0u"], name="unsqueeze"),
        n("Slice", ["s", "one", "big"], ["rest"], name="rest_dims"),
        n("ReduceProd", ["rest"], ["inner"], keepdims=1, name="inner"),
        n("Concat", ["d0u", "inner"], ["target"], axis=0, name="target"),
        n("Reshape", ["x", "target"], ["y"], name="apply"),
    ]
    inits = [helper.make_tensor("zero", I64, [], [0]), ints("axes0", [0]), ints("one", [1]),
             ints("big", [1 << 40])]
    return model(nodes, [vi("x", F, ["batch", "a", "b"])], [vi("y", F, None), vi("target", I64, None)], inits)


def test_shape_chain_is_cached_per_feed_shape_signature():
    m = flatten_by_shape_model()
    s = olc_core.Session(m, record_usage=True, profile=True)
    assert marks(s) == {"shape": "cached", "first_dim": "cached", "unsqueeze": "cached", "rest_dims": "cached",
                        "inner": "cached", "target": "cached", "apply": ""}
    rng = np.random.default_rng(0)
    shapes = [(2, 3, 4), (2, 3, 4), (5, 1, 7), (2, 3, 4), (5, 1, 7), (0, 3, 4)]
    for shape in shapes:
        x = rng.standard_normal(shape).astype(np.float32)
        y, _ = check_against_reference(m, s, {"x": x})
        np.testing.assert_array_equal(y, x.reshape(shape[0], shape[1] * shape[2]))
    assert s.shape_plan_stats() == {"hits": 3, "misses": 3, "signatures": 3}
    # The last run computed its shapes; the one before took them from the cache.
    assert s.kernel_usage()[-1] == "olc_core::Reshape" and len(s.kernel_usage()) == 7
    records = [r for r in s.profile_records() if r.run == 4]
    cached = {r.node_name for r in records if r.cached}
    assert cached == {"shape", "first_dim", "unsqueeze", "rest_dims", "inner", "target"}
    assert all(r.duration_us == 0 for r in records if r.cached)
    assert [r.output_shapes for r in records if r.node_name == "target"] == [((2,),)]
    assert not any(r.cached for r in s.profile_records() if r.run in (0, 2))


def test_a_shape_value_returned_as_output_is_the_callers_own_copy():
    m = flatten_by_shape_model()
    s = olc_core.Session(m)
    x = np.ones((2, 3, 4), np.float32)
    s.run(None, {"x": x})
    _, target = s.run(None, {"x": x})  # from the cache
    assert target.flags.writeable
    target[:] = -1
    _, again = s.run(None, {"x": x})
    np.testing.assert_array_equal(again, [2, 12])


def test_static_shapes_fold_at_construction():
    m = flatten_by_shape_model()
    m.graph.input[0].CopyFrom(vi("x", F, [2, 3, 4]))
    s = olc_core.Session(m, profile=True)
    assert marks(s) == {"shape": "folded", "first_dim": "folded", "unsqueeze": "folded", "rest_dims": "folded",
                        "inner": "folded", "target": "folded", "apply": ""}
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    check_against_reference(m, s, {"x": x})
    assert [r.node_name for r in s.profile_records()] == ["apply"]
    assert s.shape_plan_stats() == {"hits": 0, "misses": 0, "signatures": 0}


def test_shape_of_a_data_dependent_value_is_never_cached():
    # NonZero's output length depends on x's values: the same feed shape
    # must still give the right count every run.
    nodes = [n("NonZero", ["x"], ["nz"], name="nonzero"), n("Shape", ["nz"], ["s"], name="shape"),
             n("Gather", ["s", "one"], ["count"], axis=0, name="count")]
    m = model(nodes, [vi("x", F, ["n"])], [vi("count", I64, None)], [helper.make_tensor("one", I64, [], [1])])
    s = olc_core.Session(m)
    assert set(marks(s).values()) == {""}
    for x in ([0, 1, 2, 0], [1, 1, 1, 1], [0, 0, 0, 0]):
        (count,) = s.run(None, {"x": np.asarray(x, np.float32)})
        assert int(count) == np.count_nonzero(x)


def test_a_shape_set_by_a_feeds_value_is_never_cached():
    # r's shape comes from the values of feed `shape`: Shape(r) must follow
    # them, not the (unchanged) feed shapes.
    nodes = [n("Reshape", ["x", "shape"], ["r"], name="reshape"), n("Shape", ["r"], ["s"], name="shape_of_r")]
    m = model(nodes, [vi("x", F, [6]), vi("shape", I64, [2])], [vi("s", I64, None)])
    s = olc_core.Session(m)
    assert marks(s)["shape_of_r"] == ""
    x = np.zeros(6, np.float32)
    for target in ([2, 3], [3, 2], [1, 6]):
        (got,) = s.run(None, {"x": x, "shape": np.asarray(target, np.int64)})
        np.testing.assert_array_equal(got, target)


def test_a_replaceable_initializer_is_keyed_by_its_feed():
    # `w` is an initializer a feed may replace: its shape is part of the key.
    nodes = [n("Shape", ["w"], ["s"], name="shape"), n("Reshape", ["x", "s"], ["y"], name="apply")]
    w = onnx.numpy_helper.from_array(np.zeros((2, 3), np.float32), "w")
    m = model(nodes, [vi("x", F, [6]), vi("w", F, None)], [vi("y", F, None)], [w])
    s = olc_core.Session(m)
    assert marks(s)["shape"] == "cached"
    x = np.arange(6, dtype=np.float32)
    for feeds, want in (({}, (2, 3)), ({"w": np.zeros((3, 2), np.float32)}, (3, 2)), ({}, (2, 3)),
                        ({"w": np.zeros((6, 1), np.float32)}, (6, 1)), ({"w": np.zeros((3, 2), np.float32)}, (3, 2))):
        (y,) = s.run(None, {"x": x, **feeds})
        assert y.shape == want


def test_the_cache_holds_a_bounded_number_of_signatures():
    m = flatten_by_shape_model()
    s = olc_core.Session(m)
    for batch in range(1, shape_plan.CACHE_CAPACITY + 5):
        x = np.full((batch, 2, 2), batch, np.float32)
        (y, _) = s.run(None, {"x": x})
        np.testing.assert_array_equal(y, x.reshape(batch, 4))
    stats = s.shape_plan_stats()
    assert stats["signatures"] == shape_plan.CACHE_CAPACITY and stats["hits"] == 0
    # The oldest signatures were evicted; the newest still hit.
    s.run(None, {"x": np.ones((shape_plan.CACHE_CAPACITY + 4, 2, 2), np.float32)})
    s.run(None, {"x": np.ones((1, 2, 2), np.float32)})
    assert s.shape_plan_stats()["hits"] == 1


def test_signatures_whose_shape_values_are_too_large_run_every_node():
    # ConstantOfShape(Shape(x)) depends on x's shape only, but at this size
    # the cache would hold megabytes per signature: such runs compute it.
    side = 1 << 11  # 2048 x 2048 float32: 16 MiB, over the per-signature limit
    nodes = [n("Shape", ["x"], ["s"], name="shape"),
             n("ConstantOfShape", ["s"], ["ones"], name="ones", value=helper.make_tensor("v", F, [1], [1.0])),
             n("Add", ["x", "ones"], ["y"], name="add")]
    m = model(nodes, [vi("x", F, ["a", "b"])], [vi("y", F, None)])
    s = olc_core.Session(m)
    # (olc-tensor's graph pass, when installed, restates the node under its own name)
    assert [e.shape_plan for e in s.kernel_plan() if e.op_type == "ConstantOfShape"] == ["cached"]
    for k in range(3):
        x = np.full((side, side), k, np.float32)
        (y,) = s.run(None, {"x": x})
        assert y[0, 0] == k + 1 and y[-1, -1] == k + 1
    assert s.shape_plan_stats() == {"hits": 0, "misses": 3, "signatures": 1}
    small = np.zeros((3, 2), np.float32)
    for _ in range(2):
        (y,) = s.run(None, {"x": small})
        np.testing.assert_array_equal(y, small + 1)
    assert s.shape_plan_stats()["hits"] == 1


def test_nodes_of_constants_fold_and_large_ones_keep_running():
    # Transpose of a weight is known at construction but large: it keeps
    # running (a second copy would cost memory); the small chain folds.
    big = np.arange(600 * 600, dtype=np.float32).reshape(600, 600)
    nodes = [n("Transpose", ["w"], ["wt"], name="transpose"), n("MatMul", ["x", "wt"], ["y"], name="matmul"),
             n("Unsqueeze", ["k", "axes0"], ["ku"], name="unsqueeze"), n("Reshape", ["y", "ku"], ["z"], name="flat")]
    inits = [onnx.numpy_helper.from_array(big, "w"), helper.make_tensor("k", I64, [], [-1]), ints("axes0", [0])]
    m = model(nodes, [vi("x", F, [2, 600])], [vi("z", F, None)], inits)
    s = olc_core.Session(m)
    assert marks(s) == {"transpose": "", "matmul": "", "unsqueeze": "folded", "flat": ""}
    x = np.random.default_rng(1).standard_normal((2, 600)).astype(np.float32)
    (z,) = s.run(None, {"x": x})
    np.testing.assert_allclose(z, (x @ big.T).reshape(-1), rtol=1e-4, atol=1e-2)


def test_folding_a_failing_node_leaves_the_error_to_the_run():
    # Reshape of a 6-element constant to [4]: the failure must surface as
    # the run's clear error naming the node, not disappear while folding.
    nodes = [n("Reshape", ["c", "bad"], ["r"], name="bad_reshape"), n("Add", ["x", "r"], ["y"], name="add")]
    inits = [onnx.numpy_helper.from_array(np.zeros(6, np.float32), "c"), ints("bad", [4])]
    m = model(nodes, [vi("x", F, [4])], [vi("y", F, None)], inits)
    s = olc_core.Session(m)
    assert marks(s)["bad_reshape"] == ""
    with pytest.raises(olc_core.OlcError, match="bad_reshape"):
        s.run(None, {"x": np.zeros(4, np.float32)})
