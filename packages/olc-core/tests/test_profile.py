"""Session(profile=True), its Chrome trace and ``olc run --profile``."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import olc_core
from olc_core import cli


def _model():
    # Hardmax has no kernel anywhere: a fallback step beside native views.
    n = helper.make_node
    nodes = [n("Reshape", ["x", "flat"], ["r"], name="reshape"), n("Hardmax", ["r"], ["h"], name="hardmax"),
             n("Unsqueeze", ["h", "ax"], ["y"], name="unsqueeze")]
    graph = helper.make_graph(nodes, "p", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              initializer=[numpy_helper.from_array(np.array([6, 4], np.int64), "flat"),
                                           numpy_helper.from_array(np.array([0], np.int64), "ax")])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def test_records_every_step_of_every_run():
    s = olc_core.Session(_model(), profile=True)
    x = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    for _ in range(3):
        s.run(None, {"x": x})
    records = s.profile_records()
    assert [(r.run, r.node_name) for r in records] == [
        (run, name) for run in range(3) for name in ("reshape", "hardmax", "unsqueeze")]
    by_name = {r.node_name: r for r in records}
    assert by_name["reshape"].native and by_name["reshape"].kernel == "olc_core::Reshape"
    assert not by_name["hardmax"].native and by_name["hardmax"].kernel == "onnx.reference::Hardmax"
    assert by_name["reshape"].output_shapes == ((6, 4),) and by_name["unsqueeze"].output_shapes == ((1, 6, 4),)
    totals = s.run_times_us()
    assert len(totals) == 3
    for run in range(3):
        steps = [r for r in records if r.run == run]
        assert all(r.duration_us >= 0 for r in steps)
        # Steps run in order, inside the run's span.
        assert all(a.start_us + a.duration_us <= b.start_us + 1e-3 for a, b in itertools.pairwise(steps))
        assert steps[-1].start_us + steps[-1].duration_us <= totals[run] + 1e-3
    s.clear_profile()
    assert s.profile_records() == [] and s.run_times_us() == []


def test_off_by_default():
    s = olc_core.Session(_model())
    s.run(None, {"x": np.zeros((2, 3, 4), np.float32)})
    assert s.profile_records() == [] and s.run_times_us() == []


def test_fused_steps_name_their_nodes():
    from olc_core import demo

    s = olc_core.Session(demo.build_demo_model(), profile=True)
    s.run(None, {"x": np.ones((4, demo.FEATURES), np.float32)})
    fused = [r for r in s.profile_records() if r.fused_nodes]
    if not any(e.fused_nodes for e in s.kernel_plan()):
        pytest.skip("no family fuses the demo's chains here")
    assert {r.node_name for r in fused} == {e.node_name for e in s.kernel_plan() if e.fused_nodes}


def test_trace_is_the_event_format_onnxruntime_writes(tmp_path):
    s = olc_core.Session(_model(), profile=True)
    for _ in range(2):
        s.run(None, {"x": np.ones((2, 3, 4), np.float32)})
    path = s.write_profile(tmp_path / "trace.json")
    with open(path) as f:
        events = json.load(f)
    runs = [e for e in events if e["cat"] == "Session"]
    nodes = [e for e in events if e["cat"] == "Node"]
    assert [e["name"] for e in runs] == ["model_run", "model_run"]
    assert len(nodes) == 6 and all(e["ph"] == "X" and e["name"].endswith("_kernel_time") for e in nodes)
    assert {e["args"]["provider"] for e in nodes} == {"olc", "onnx.reference"}
    # Each node event lies inside its run's event.
    for e in nodes:
        assert any(r["ts"] <= e["ts"] and e["ts"] + e["dur"] <= r["ts"] + r["dur"] + 1e-3 for r in runs)
    # The reader of onnxruntime's files reads it, with the same totals.
    by_op, n_runs = cli.ort_profile_by_op(path)
    assert n_runs == 2
    want = cli.olc_profile_by(s.profile_records(), 2, lambda r: r.op_type)
    assert by_op.keys() == want.keys()
    for op in want:
        assert by_op[op] == pytest.approx(want[op], abs=0.01)


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "olc_core.cli", *args], capture_output=True, text=True,
                          timeout=300, env=dict(os.environ))


def _encoder_like(path):
    # Symbolic batch and sequence, int64 ids into an embedding table, a mask.
    n = helper.make_node
    rng = np.random.default_rng(3)
    emb = rng.standard_normal((50, 16)).astype(np.float32)
    w = rng.standard_normal((16, 16)).astype(np.float32)
    nodes = [n("Gather", ["emb", "input_ids"], ["e"]), n("Shape", ["e"], ["sh"]),
             n("MatMul", ["e", "w"], ["h"]), n("Cast", ["attention_mask"], ["mf"], to=TensorProto.FLOAT),
             n("Unsqueeze", ["mf", "ax"], ["m3"]), n("Mul", ["h", "m3"], ["y"])]
    graph = helper.make_graph(
        nodes, "enc",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"]),
         helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "seq"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", 16]),
         helper.make_tensor_value_info("sh", TensorProto.INT64, [3])],
        initializer=[numpy_helper.from_array(emb, "emb"), numpy_helper.from_array(w, "w"),
                     numpy_helper.from_array(np.array([-1], np.int64), "ax")])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(path))
    return str(path)


def test_olc_run_profile_on_a_model_with_symbolic_dims_and_ids(tmp_path):
    pytest.importorskip("onnxruntime")
    model = _encoder_like(tmp_path / "enc.onnx")
    out = tmp_path / "r.json"
    trace = tmp_path / "trace.json"
    p = run_cli("run", model, "--profile", "--compare", "onnxruntime", "--repeat", "5", "--json", str(out),
                "--trace", str(trace))
    assert p.returncode == 0, p.stderr
    assert "profile over 5 runs" in p.stdout and "op type" in p.stdout and "olc's top nodes" in p.stdout
    prof = json.loads(out.read_text())["profile"]
    assert prof["runs"] == 5
    assert {"Gather", "MatMul", "Shape", "Unsqueeze"} <= set(prof["olc_by_op_us"])
    assert prof["ort_by_op_us"] and prof["ort_us_per_run"] > 0  # onnxruntime's profile beside it
    assert json.loads(trace.read_text())[0]["name"] == "model_run"
