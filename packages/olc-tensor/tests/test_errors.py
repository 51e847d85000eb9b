"""Bad inputs: a clear error naming the node and the reason, raised before
any output is written, never a crash."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from helpers import make_model, olc_run  # noqa: E402

import olc_core  # noqa: E402

F = "float32"


def expect_error(model, feeds, *fragments):
    with pytest.raises(olc_core.OlcError) as info:
        olc_run(model, feeds)
    msg = str(info.value)
    assert "node0" in msg, msg
    for f in fragments:
        assert f in msg, msg
    return msg


def test_gather_index_out_of_range():
    x = np.zeros((4, 3), np.float32)
    m = make_model("Gather", [("x", F), ("i", "int64")], ["y"], 13, {"axis": 0})
    expect_error(m, {"x": x, "i": np.array([0, 4], np.int64)}, "index 4", "out of range", "size 4")
    expect_error(m, {"x": x, "i": np.array([[0], [-5]], np.int64)}, "index -5", "out of range")
    m32 = make_model("Gather", [("x", F), ("i", "int32")], ["y"], 13, {"axis": -1})
    expect_error(m32, {"x": x, "i": np.array([3], np.int32)}, "index 3", "out of range")
    m_axis = make_model("Gather", [("x", F), ("i", "int64")], ["y"], 13, {"axis": 2})
    expect_error(m_axis, {"x": x, "i": np.array([0], np.int64)}, "axis 2")


def test_gather_elements_errors():
    x = np.zeros((4, 3), np.float32)
    m = make_model("GatherElements", [("x", F), ("i", "int64")], ["y"], 13, {"axis": 1})
    expect_error(m, {"x": x, "i": np.full((4, 3), 3, np.int64)}, "index 3", "out of range")
    expect_error(m, {"x": x, "i": np.zeros((3,), np.int64)}, "rank")


def test_concat_mismatched_shapes():
    m = make_model("Concat", [("a", F), ("b", F)], ["y"], 13, {"axis": 1})
    expect_error(m, {"a": np.zeros((2, 3), np.float32), "b": np.zeros((3, 3), np.float32)},
                 "input 1 has shape [3, 3]", "input 0 has shape [2, 3]", "differ on axis 0")
    expect_error(m, {"a": np.zeros((2, 3), np.float32), "b": np.zeros((2, 3, 1), np.float32)}, "rank")
    m_axis = make_model("Concat", [("a", F), ("b", F)], ["y"], 13, {"axis": 2})
    expect_error(m_axis, {"a": np.zeros((2, 3), np.float32), "b": np.zeros((2, 3), np.float32)}, "axis 2")


def test_split_invalid_sizes():
    x = np.zeros((2, 6), np.float32)
    m = make_model("Split", [("x", F), ("s", "int64")], ["a", "b"], 13, {"axis": 1})
    expect_error(m, {"x": x, "s": np.array([2, 3], np.int64)}, "invalid split sizes", "[2, 3] do not add up to", "size 6")
    expect_error(m, {"x": x, "s": np.array([7, -1], np.int64)}, "invalid split sizes", "negative")
    expect_error(m, {"x": x, "s": np.array([6], np.int64)}, "invalid split sizes", "1 sizes for 2 outputs")
    m_eq = make_model("Split", [("x", F)], ["a", "b", "c", "d"], 13, {"axis": 1})
    expect_error(m_eq, {"x": x}, "does not divide")
    m18 = make_model("Split", [("x", F)], ["a", "b", "c", "d", "e"], 18, {"axis": 1, "num_outputs": 5})
    expect_error(m18, {"x": x}, "cannot be cut")


def test_slice_errors():
    x = np.zeros((4, 5), np.float32)
    names = [("x", F), ("s", "int64"), ("e", "int64"), ("a", "int64"), ("st", "int64")]
    m = make_model("Slice", names, ["y"], 13)
    one = np.array([1], np.int64)
    expect_error(m, {"x": x, "s": one, "e": one, "a": np.array([0], np.int64), "st": np.array([0], np.int64)}, "step")
    expect_error(m, {"x": x, "s": one, "e": one, "a": np.array([2], np.int64), "st": one}, "axis 2")
    expect_error(m, {"x": x, "s": np.array([0, 0], np.int64), "e": np.array([1, 1], np.int64),
                     "a": np.array([1, -1], np.int64), "st": np.array([1, 1], np.int64)}, "repeated")
    expect_error(m, {"x": x, "s": np.array([0, 0], np.int64), "e": one, "a": one, "st": one}, "starts has 2")


def test_expand_tile_transpose_errors():
    x = np.zeros((2, 3), np.float32)
    m = make_model("Expand", [("x", F), ("s", "int64")], ["y"], 13)
    expect_error(m, {"x": x, "s": np.array([4, 3, 2], np.int64)}, "cannot be broadcast")
    m = make_model("Tile", [("x", F), ("r", "int64")], ["y"], 13)
    expect_error(m, {"x": x, "r": np.array([2], np.int64)}, "repeats has 1 values")
    expect_error(m, {"x": x, "r": np.array([2, -1], np.int64)}, "negative")
    m = make_model("Transpose", [("x", F)], ["y"], 13, {"perm": [0, 0]})
    expect_error(m, {"x": x}, "not a permutation")


def test_session_still_usable_after_error():
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    m = make_model("Gather", [("x", F), ("i", "int64")], ["y"], 13, {"axis": 0})
    with olc_core.simd_cap("avx512"):
        sess = olc_core.Session(m, strict=True)
    with pytest.raises(olc_core.OlcError):
        sess.run(None, {"x": x, "i": np.array([9], np.int64)})
    (y,) = sess.run(None, {"x": x, "i": np.array([1], np.int64)})
    assert np.array_equal(y, x[[1]])
