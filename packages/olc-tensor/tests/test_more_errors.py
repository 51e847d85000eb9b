"""Bad inputs of ConstantOfShape, Range, EyeLike, Trilu, OneHot, CumSum,
GatherND, ScatterElements, the new reductions, DepthToSpace and
SpaceToDepth: an OlcError naming the node, the op and the reason, raised
before any output is written (the session stays usable), never a crash."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, numpy_helper

sys.path.insert(0, str(Path(__file__).parent))
from helpers import make_model, olc_run  # noqa: E402

import olc_core  # noqa: E402

F = "float32"


def expect_error(model, feeds, *fragments):
    with pytest.raises(olc_core.OlcError) as info:
        olc_run(model, feeds)
    msg = str(info.value)
    op = model.graph.node[0].op_type
    assert "'node0" in msg and f"({op})" in msg, msg
    for f in fragments:
        assert f in msg, msg
    return msg


def test_gather_nd_errors():
    x = np.zeros((2, 3, 4), np.float32)
    m = make_model("GatherND", [("x", F), ("i", "int64")], ["y"], 13)
    expect_error(m, {"x": x, "i": np.array([[1, 3]], np.int64)},
                 "index 3 (tuple 0, position 1) is out of range for data axis 1 of size 3")
    expect_error(m, {"x": x, "i": np.array([[0], [-3]], np.int64)}, "index -3 (tuple 1, position 0)", "size 2")
    expect_error(m, {"x": x, "i": np.zeros((1, 4), np.int64)}, "last dimension of indices (4)")
    expect_error(m, {"x": x, "i": np.zeros((1, 0), np.int64)}, "last dimension of indices (0)")
    mb = make_model("GatherND", [("x", F), ("i", "int64")], ["y"], 13, {"batch_dims": 1})
    expect_error(mb, {"x": x, "i": np.zeros((3, 1), np.int64)}, "batch dimension 0 differs")
    expect_error(mb, {"x": x, "i": np.zeros((2, 3), np.int64)}, "last dimension of indices (3)", "batch_dims = 2")
    mb3 = make_model("GatherND", [("x", F), ("i", "int64")], ["y"], 13, {"batch_dims": 3})
    expect_error(mb3, {"x": x, "i": np.zeros((2, 3, 4, 1), np.int64)}, "batch_dims 3 must be less than")


def test_scatter_elements_errors():
    x = np.zeros((3, 4), np.float32)
    m = make_model("ScatterElements", [("x", F), ("i", "int64"), ("u", F)], ["y"], 18, {"axis": 1})
    u = np.zeros((2, 2), np.float32)
    expect_error(m, {"x": x, "i": np.array([[0, 4], [1, 1]], np.int64), "u": u},
                 "index 4 (at flat position 1) is out of range for axis 1 of size 4")
    expect_error(m, {"x": x, "i": np.array([[0, -5], [1, 1]], np.int64), "u": u}, "index -5")
    expect_error(m, {"x": x, "i": np.zeros((2, 3), np.int64), "u": u}, "updates shape [2, 2] differs from indices shape [2, 3]")
    expect_error(m, {"x": x, "i": np.zeros((4, 2), np.int64), "u": np.zeros((4, 2), np.float32)},
                 "exceeds data shape", "axis 0")
    expect_error(m, {"x": x, "i": np.zeros((2,), np.int64), "u": np.zeros((2,), np.float32)}, "rank 1 differs")
    m_axis = make_model("ScatterElements", [("x", F), ("i", "int64"), ("u", F)], ["y"], 18, {"axis": 2})
    expect_error(m_axis, {"x": x, "i": np.zeros((1, 1), np.int64), "u": np.zeros((1, 1), np.float32)},
                 "axis 2 is out of range")
    # reductions only at the opsets that define them
    for opset, red in ((16, "max"), (16, "min"), (13, "add")):
        bad = make_model("ScatterElements", [("x", F), ("i", "int64"), ("u", F)], ["y"], opset,
                         {"axis": 0, "reduction": red})
        expect_error(bad, {}, f'"{red}" is not supported at opset {opset}')


def test_one_hot_errors():
    i = np.array([0, 2], np.int64)
    v = np.array([0, 1], np.float32)
    m = make_model("OneHot", [("i", "int64"), ("d", "int64"), ("v", F)], ["y"], 11)
    expect_error(m, {"i": i, "d": np.array(-3, np.int64), "v": v}, "depth must be a non-negative integer", "-3")
    expect_error(m, {"i": i, "d": np.array([3, 4], np.int64), "v": v}, "depth must be a scalar")
    expect_error(m, {"i": i, "d": np.array(3, np.int64), "v": np.zeros(3, np.float32)}, "exactly two elements")
    mf = make_model("OneHot", [("i", "int64"), ("d", F), ("v", F)], ["y"], 11)
    expect_error(mf, {"i": i, "d": np.array(np.nan, np.float32), "v": v}, "no int64 conversion")
    ma = make_model("OneHot", [("i", "int64"), ("d", "int64"), ("v", F)], ["y"], 11, {"axis": 3})
    expect_error(ma, {"i": i, "d": np.array(3, np.int64), "v": v}, "axis 3 is out of range for indices of rank 1")


def test_range_errors():
    m = make_model("Range", [("a", "int64"), ("b", "int64"), ("c", "int64")], ["y"], 11)
    one = np.array(1, np.int64)
    expect_error(m, {"a": one, "b": np.array(5, np.int64), "c": np.array(0, np.int64)}, "delta is 0")
    expect_error(m, {"a": np.array([1, 2], np.int64), "b": one, "c": one}, "input 'start' must be a scalar")
    i64 = np.iinfo(np.int64)
    expect_error(m, {"a": np.array(i64.min, np.int64), "b": np.array(i64.max, np.int64), "c": one}, "too many elements")
    mf = make_model("Range", [("a", F), ("b", F), ("c", F)], ["y"], 11)
    f = np.float32
    expect_error(mf, {"a": np.array(0, f), "b": np.array(1, f), "c": np.array(-0.0, f)}, "delta is 0")
    expect_error(mf, {"a": np.array(0, f), "b": np.array(np.inf, f), "c": np.array(1, f)}, "is not finite")
    expect_error(mf, {"a": np.array(np.nan, f), "b": np.array(1, f), "c": np.array(1, f)}, "is not finite")


def test_trilu_eyelike_cumsum_errors():
    m = make_model("Trilu", [("x", F), ("k", "int64")], ["y"], 14)
    expect_error(m, {"x": np.zeros((3,), np.float32), "k": np.array(0, np.int64)}, "rank >= 2")
    expect_error(m, {"x": np.zeros((3, 3), np.float32), "k": np.array([0, 1], np.int64)}, "input 'k' must be a scalar")
    m = make_model("EyeLike", [("x", F)], ["y"], 9)
    expect_error(m, {"x": np.zeros((2, 2, 2), np.float32)}, "must be 2-D")
    m = make_model("CumSum", [("x", F), ("a", "int64")], ["y"], 14)
    x = np.zeros((2, 3), np.float32)
    expect_error(m, {"x": x, "a": np.array(2, np.int64)}, "axis 2 is out of range for an input of rank 2")
    expect_error(m, {"x": x, "a": np.array(-3, np.int64)}, "axis -3 is out of range")
    expect_error(m, {"x": x, "a": np.array([0, 1], np.int64)}, "input 'axis' must be a scalar")


@pytest.mark.parametrize("op", ("ReduceProd", "ReduceL1", "ReduceL2", "ReduceLogSumExp", "ReduceSumSquare"))
def test_reduce_axes_errors(op):
    x = np.zeros((2, 3), np.float32)
    m = make_model(op, [("x", F), ("a", "int64")], ["y"], 18)
    expect_error(m, {"x": x, "a": np.array([2], np.int64)}, "axis 2 is out of range for an input of rank 2")
    expect_error(m, {"x": x, "a": np.array([1, -1], np.int64)}, "repeated")
    m13 = make_model(op, [("x", F)], ["y"], 13, {"axes": [-3]})
    expect_error(m13, {"x": x}, "axis -3 is out of range")


def test_depth_space_and_constant_of_shape_errors():
    m = make_model("DepthToSpace", [("x", F)], ["y"], 13, {"blocksize": 2})
    expect_error(m, {"x": np.zeros((1, 6, 2, 2), np.float32)}, "channels 6 are not a multiple of blocksize^2 = 4")
    expect_error(m, {"x": np.zeros((6, 2, 2), np.float32)}, "must be 4-D")
    m = make_model("SpaceToDepth", [("x", F)], ["y"], 13, {"blocksize": 3})
    expect_error(m, {"x": np.zeros((1, 1, 6, 4), np.float32)}, "must be multiples of blocksize 3")
    m = make_model("DepthToSpace", [("x", F)], ["y"], 13, {"blocksize": 0}, out_types=[TensorProto.FLOAT])
    expect_error(m, {}, "'blocksize' must be >= 1")
    m = make_model("DepthToSpace", [("x", F)], ["y"], 13, {"blocksize": 2, "mode": "XYZ"}, out_types=[TensorProto.FLOAT])
    expect_error(m, {}, "'mode' = \"XYZ\" is not supported")
    value = numpy_helper.from_array(np.array([1], np.int32), "value")
    for attrs in ({}, {"value": value}):
        m = make_model("ConstantOfShape", [("s", "int64")], ["y"], 21, attrs)
        expect_error(m, {"s": np.array([2, -1], np.int64)}, "shape value -1 (at position 1) is negative")
        expect_error(m, {"s": np.array([2**40, 2**40], np.int64)}, "is too large")


def test_session_usable_after_errors():
    m = make_model("GatherND", [("x", F), ("i", "int64")], ["y"], 13)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    with olc_core.simd_cap("avx512"):
        sess = olc_core.Session(m, strict=True)
    with pytest.raises(olc_core.OlcError, match="out of range"):
        sess.run(None, {"x": x, "i": np.array([[2, 0]], np.int64)})
    (y,) = sess.run(None, {"x": x, "i": np.array([[1, 2]], np.int64)})
    assert y.tolist() == [5.0]
