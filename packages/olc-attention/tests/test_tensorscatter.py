"""ai.onnx TensorScatter (24): against onnx.reference and the naive kernel,
linear and circular, every axis, every element width, and in place: when
the cache comes from an earlier node of the model (a buffer the runtime
owns), the update is written into it."""

from __future__ import annotations

import numpy as np
import pytest
from at_testlib import reference_run, run_checked
from onnx import TensorProto, helper

import olc_core

CASES = [
    ((2, 1, 4, 5), (2, 1, 1, 5), [1, 3], "linear", -2),
    ((2, 1, 4, 5), (2, 1, 2, 5), [3, 1], "circular", -2),
    ((3, 4, 5), (3, 2, 5), [0, 2, 1], "linear", 1),
    ((3, 6, 5), (3, 4, 5), [5, 0, 3], "circular", 1),
    ((2, 3, 8, 4), (2, 3, 8, 2), [1, 2], "linear", 3),
    ((2, 3, 8), (2, 3, 8), None, "linear", 2),
    ((2, 7), (2, 3), [-1, 9], "circular", 1),
    ((2, 0, 4), (2, 0, 4), [0, 0], "linear", 2),
]


@pytest.mark.parametrize("dtype", ["float32", "float16", "int64", "bool", "int8"])
@pytest.mark.parametrize("c", CASES, ids=[f"c{i}" for i in range(len(CASES))])
def test_matches_reference(c, dtype):
    shape, ushape, idx, mode, axis = c
    rng = np.random.default_rng(0)
    np_t = {"float32": np.float32, "float16": np.float16, "int64": np.int64, "bool": bool, "int8": np.int8}[dtype]
    feeds = {"past": (rng.uniform(-9, 9, shape) > 0 if dtype == "bool" else rng.uniform(-9, 9, shape)).astype(np_t),
             "upd": (rng.uniform(-9, 9, ushape) > 0 if dtype == "bool" else rng.uniform(-9, 9, ushape)).astype(np_t)}
    inputs = [("past", dtype), ("upd", dtype)]
    if idx is not None:
        feeds["idx"] = np.array(idx, np.int64)
        inputs.append(("idx", "int64"))
    model = _model(inputs, {"mode": mode, "axis": axis})
    want = reference_run(model, feeds)[0] if mode == "linear" or all(i >= 0 for i in idx) else None
    for naive in (False, True):
        (got,) = run_checked(model, "TensorScatter", feeds, naive=naive)
        if want is not None:
            np.testing.assert_array_equal(got, want)
        else:  # numpy modulo (what the schema's pseudocode means) for negative indices
            exp = feeds["past"].copy()
            for b in range(shape[0]):
                for s in range(ushape[1]):
                    exp[b, (idx[b] + s) % shape[1]] = feeds["upd"][b, s]
            np.testing.assert_array_equal(got, exp)


def _model(inputs, attrs):
    types = {"float32": TensorProto.FLOAT, "float16": TensorProto.FLOAT16, "int64": TensorProto.INT64,
             "bool": TensorProto.BOOL, "int8": TensorProto.INT8}
    node = helper.make_node("TensorScatter", [n for n, _ in inputs], ["out"], **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(n, types[t], None) for n, t in inputs],
                              [helper.make_value_info("out", helper.TypeProto())])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 24)])
    m.ir_version = 10
    return m


def test_in_place_on_a_runtime_owned_cache():
    # Three scatters in a row: the first reads the feed (never written: it
    # copies), the next two get a buffer the runtime owns and that dies at
    # them, and write only their update rows into it.
    B, M, D = 2, 6, 4
    nodes = [helper.make_node("TensorScatter", ["past", "u0", "i0"], ["c0"], mode="linear"),
             helper.make_node("TensorScatter", ["c0", "u1", "i1"], ["c1"], mode="circular"),
             helper.make_node("TensorScatter", ["c1", "u2", "i2"], ["out"], mode="linear")]
    f, i64 = TensorProto.FLOAT, TensorProto.INT64
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info("past", f, [B, M, D]),
         helper.make_tensor_value_info("u0", f, [B, 1, D]), helper.make_tensor_value_info("i0", i64, [B]),
         helper.make_tensor_value_info("u1", f, [B, 2, D]), helper.make_tensor_value_info("i1", i64, [B]),
         helper.make_tensor_value_info("u2", f, [B, 1, D]), helper.make_tensor_value_info("i2", i64, [B])],
        [helper.make_tensor_value_info("out", f, [B, M, D])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 24)])
    model.ir_version = 10
    rng = np.random.default_rng(2)
    feeds = {"past": rng.uniform(-1, 1, (B, M, D)).astype(np.float32),
             "u0": rng.uniform(-1, 1, (B, 1, D)).astype(np.float32), "i0": np.array([1, 3], np.int64),
             "u1": rng.uniform(-1, 1, (B, 2, D)).astype(np.float32), "i1": np.array([5, 2], np.int64),
             "u2": rng.uniform(-1, 1, (B, 1, D)).astype(np.float32), "i2": np.array([0, 4], np.int64)}
    past = feeds["past"].copy()
    want = reference_run(model, feeds)[0]
    for naive in (False, True):
        s = olc_core.Session(model, strict=True, record_usage=True, naive="olc-attention" if naive else False)
        for _ in range(3):
            np.testing.assert_array_equal(s.run(None, feeds)[0], want)
        assert len(s.kernel_usage()) == 3
        # The second and third scatters wrote into their input's buffer.
        name = "olc_attention::" + ("Naive" if naive else "") + "TensorScatter"
        assert s.kernel_usage_details().count(f"{name}[in place]") == 2, s.kernel_usage_details()
    np.testing.assert_array_equal(feeds["past"], past)  # the feed itself is never written
