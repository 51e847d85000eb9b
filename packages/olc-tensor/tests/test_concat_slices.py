"""The Concat-of-Slices graph pass and its kernel (olc.tensor::Concat).

A Concat whose inputs are chains of Slices of one tensor runs as one node
copying each part from its view of that tensor. Checked against numpy's
slicing and onnx.reference, for the YOLOv5 space-to-depth block and for the
Slice forms the pass takes (steps of any sign, default axes and steps, the
attribute form before opset 10); graphs it must leave alone keep their
nodes, and a mismatch found at run time is an error naming the node.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

sys.path.insert(0, str(Path(__file__).parent))
from helpers import ONNX, assert_same, random_array, ref_run  # noqa: E402

import olc_core  # noqa: E402

I64_MAX = np.iinfo(np.int64).max


def _ints(name, values):
    return numpy_helper.from_array(np.array(values, np.int64), name)


class Graph:
    """A graph under construction: Slices, a Concat, maybe more."""

    def __init__(self, dtype, shape, opset=13):
        self.dtype, self.shape, self.opset = dtype, shape, opset
        self.nodes, self.inits, self.outputs = [], [], ["y"]

    def slice(self, src, starts, ends, axes=None, steps=None, name=None):
        out = f"s{len(self.nodes)}"
        name = name or f"Slice_{len(self.nodes)}"
        if self.opset < 10:
            attrs = {"starts": starts, "ends": ends}
            if axes is not None:
                attrs["axes"] = axes
            self.nodes.append(helper.make_node("Slice", [src], [out], name=name, **attrs))
            return out
        k = len(self.inits)
        inputs = [src, f"c{k}", f"c{k + 1}"]
        self.inits += [_ints(f"c{k}", starts), _ints(f"c{k + 1}", ends)]
        if axes is not None or steps is not None:
            inputs.append(f"c{k + 2}" if axes is not None else "")
            if axes is not None:
                self.inits.append(_ints(f"c{k + 2}", axes))
        if steps is not None:
            inputs.append(f"c{k + 3}")
            self.inits.append(_ints(f"c{k + 3}", steps))
        self.nodes.append(helper.make_node("Slice", inputs, [out], name=name))
        return out

    def concat(self, parts, axis, name="Concat_0"):
        self.nodes.append(helper.make_node("Concat", parts, ["y"], name=name, axis=axis))

    def model(self):
        g = helper.make_graph(self.nodes, "g", [helper.make_tensor_value_info("x", ONNX[self.dtype], None)],
                              [helper.make_tensor_value_info(o, ONNX[self.dtype], None) for o in self.outputs],
                              initializer=self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", self.opset)])
        m.ir_version = 9 if self.opset >= 10 else 7
        return m


def space_to_depth_block(dtype, shape, opset=13):
    """YOLOv5's Focus as exported: rows then columns, each from 0 or 1 by 2,
    concatenated as (0, 0), (1, 0), (0, 1), (1, 1) along the channels."""
    g = Graph(dtype, shape, opset)
    parts = {}
    for h in (0, 1):
        rows = g.slice("x", [h], [I64_MAX], [2], [2])
        for w in (0, 1):
            parts[h, w] = g.slice(rows, [w], [I64_MAX], [3], [2])
    g.concat([parts[0, 0], parts[1, 0], parts[0, 1], parts[1, 1]], axis=1)
    return g.model()


def run(model, x, threads=1):
    sess = olc_core.Session(model, threads=threads, strict=True)
    return sess, sess.run(None, {"x": x})


def fused_nodes(sess):
    return [e for e in sess.kernel_plan() if e.fused_nodes]


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int8", "int64", "bool"])
@pytest.mark.parametrize("hw", [(2, 2), (8, 10), (34, 70)])
@pytest.mark.parametrize("threads", [1, 2])
def test_space_to_depth_block(dtype, hw, threads):
    x = random_array(np.random.default_rng(3), (2, 3, *hw), dtype)
    sess, (y,) = run(space_to_depth_block(dtype, x.shape), x, threads)
    want = np.concatenate([x[:, :, 0::2, 0::2], x[:, :, 1::2, 0::2], x[:, :, 0::2, 1::2], x[:, :, 1::2, 1::2]],
                          axis=1)
    assert_same(y, want)
    (entry,) = fused_nodes(sess)
    assert entry.kernel == "olc_tensor::Concat" and len(entry.fused_nodes) == 7
    assert len(sess.kernel_plan()) == 1


def test_large_image_on_two_threads():
    x = np.random.default_rng(4).random((1, 3, 416, 416), dtype=np.float32)
    sess, (y,) = run(space_to_depth_block("float32", x.shape), x, threads=2)
    assert_same(y, np.concatenate([x[..., 0::2, 0::2], x[..., 1::2, 0::2], x[..., 0::2, 1::2], x[..., 1::2, 1::2]],
                                  axis=1))
    assert len(sess.kernel_plan()) == 1


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_slice_forms(axis):
    # Steps of both signs, default axes and steps, ends past the extent, two
    # Slices on one axis in a chain, an input used twice.
    shape = (4, 6, 11)
    x = random_array(np.random.default_rng(5), shape, "float32")
    g = Graph("float32", shape)
    a = g.slice("x", [0, 1], [4, 6])                                   # default axes, steps
    b = g.slice(g.slice("x", [-1], [-100], [2], [-2]), [1], [5], [2])  # negative step, then a cut of it
    c = g.slice("x", [3, 0], [0, 100], [0, 1], [-1, 1])
    d = g.slice("x", [1], [I64_MAX], [-1], [3])
    views = {a: x[0:4, 1:6], b: x[:, :, ::-2][:, :, 1:5], c: x[3:0:-1, 0:100], d: x[:, :, 1::3]}
    # Each part must match the others off the concat axis: cut them to a common shape.
    parts, arrays = [], []
    for name, v in views.items():
        common = [min(s[i] for s in (w.shape for w in views.values())) for i in range(3)]
        cut = [slice(None)] * 3
        starts, ends, axes = [], [], []
        for i in range(3):
            if i != (axis % 3) and v.shape[i] != common[i]:
                starts.append(0)
                ends.append(common[i])
                axes.append(i)
                cut[i] = slice(0, common[i])
        parts.append(g.slice(name, starts, ends, axes) if axes else name)
        arrays.append(v[tuple(cut)])
    parts.append(parts[1])  # the same part twice
    arrays.append(arrays[1])
    g.concat(parts, axis)
    model = g.model()
    sess, (y,) = run(model, x)
    want = np.concatenate(arrays, axis=axis)
    assert_same(y, want)
    assert_same(y, ref_run(model, {"x": x})[0])
    assert len(sess.kernel_plan()) == 1, sess.kernel_plan()


def test_attribute_slices_before_opset_10():
    x = random_array(np.random.default_rng(6), (2, 3, 9, 8), "float32")
    g = Graph("float32", x.shape, opset=9)
    g.concat([g.slice("x", [0, 1], [100, 6], [2, 3]), g.slice("x", [3], [8], [-1])], axis=1)
    sess, (y,) = run(g.model(), x)
    assert_same(y, np.concatenate([x[:, :, 0:9, 1:6], x[:, :, :, 3:8]], axis=1))
    assert len(sess.kernel_plan()) == 1


def left_alone(build):
    x = random_array(np.random.default_rng(7), (2, 4, 6), "float32")
    g = Graph("float32", x.shape)
    build(g)
    model = g.model()
    sess, got = run(model, x)
    for a, b in zip(got, ref_run(model, {"x": x})):
        assert_same(a, b)
    assert not any(e.op_type == "Concat" and e.fused_nodes for e in sess.kernel_plan()), sess.kernel_plan()


def test_slice_read_elsewhere_is_left_alone():
    def build(g):
        a = g.slice("x", [0], [2], [2])
        g.concat([a, g.slice("x", [2], [4], [2])], axis=2)
        g.nodes.append(helper.make_node("Transpose", [a], ["n"], name="reader", perm=[0, 1, 2]))
        g.outputs.append("n")
    left_alone(build)


def test_other_inputs_and_roots_are_left_alone():
    def build(g):
        g.nodes.append(helper.make_node("Transpose", ["x"], ["x2"], name="other_root", perm=[0, 1, 2]))
        g.concat([g.slice("x", [0], [2], [2]), g.slice("x2", [2], [4], [2]), "x"], axis=2)
    left_alone(build)


def test_runtime_steps_are_left_alone():
    def build(g):
        g.concat([g.slice("x", [0], [2], [2]), g.slice("x", [2], [4], [2])], axis=2)
        g.inits = [i for i in g.inits if i.name != "c0"]  # starts of the first Slice: a graph input now
    x = random_array(np.random.default_rng(8), (2, 4, 6), "float32")
    g = Graph("float32", x.shape)
    build(g)
    model = g.model()
    model.graph.input.append(helper.make_tensor_value_info("c0", onnx.TensorProto.INT64, [1]))
    sess = olc_core.Session(model, strict=True)
    (y,) = sess.run(None, {"x": x, "c0": np.array([0], np.int64)})
    assert_same(y, np.concatenate([x[..., 0:2], x[..., 2:4]], axis=2))
    assert not fused_nodes(sess)


def test_parts_that_differ_off_the_axis_fail_naming_the_node():
    # Dimensions of the feed decide the parts' shapes: x[:, 0:2] and x[:, 3:]
    # agree for a width of 5 only.
    g = Graph("float32", None)
    g.concat([g.slice("x", [0], [2], [1]), g.slice("x", [3], [I64_MAX], [1])], axis=0, name="join")
    sess = olc_core.Session(g.model(), strict=True)
    x = np.ones((2, 5), np.float32)
    (y,) = sess.run(None, {"x": x})
    assert y.shape == (4, 2)
    with pytest.raises(olc_core.OlcError, match=r"join.*differ on axis 1"):
        sess.run(None, {"x": np.ones((2, 7), np.float32)})
