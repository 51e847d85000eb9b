"""Session(profile=True), its Chrome trace and ``olc run --profile``."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

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


def _loop_in_if_model():
    # If (cond) -> then: a Loop of `trips` Neg steps; else: Abs. If and
    # Loop run on olc sessions (Neg and Abs natively where olc-elementwise
    # is installed, on the fallback otherwise: recorded either way).
    n = helper.make_node
    body = helper.make_graph(
        [n("Identity", ["c_in"], ["c_out"], name="keep_going"), n("Neg", ["v_in"], ["v_out"], name="negate")], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("c_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_in", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_out", TensorProto.FLOAT, [3])])
    then_g = helper.make_graph([n("Loop", ["trips", "", "x"], ["t"], name="loop", body=body)], "then", [],
                               [helper.make_tensor_value_info("t", TensorProto.FLOAT, [3])])
    else_g = helper.make_graph([n("Abs", ["x"], ["e"], name="abs")], "else", [],
                               [helper.make_tensor_value_info("e", TensorProto.FLOAT, [3])])
    graph = helper.make_graph(
        [n("If", ["c"], ["y"], name="cond", then_branch=then_g, else_branch=else_g)], "cf",
        [helper.make_tensor_value_info("c", TensorProto.BOOL, []), helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
        initializer=[numpy_helper.from_array(np.array(3, np.int64), "trips")])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def test_subgraph_steps_are_recorded_under_their_path(tmp_path):
    # The steps an If's branch and a Loop's body run are the model's work:
    # recorded with the run that ran them, under "node/subgraph" paths,
    # timed from that run's start.
    s = olc_core.Session(_loop_in_if_model(), profile=True)
    x = np.array([1.0, -2.0, 3.0], np.float32)
    np.testing.assert_array_equal(s.run(None, {"c": np.array(True), "x": x})[0], -x)  # Neg three times
    np.testing.assert_array_equal(s.run(None, {"c": np.array(False), "x": x})[0], np.abs(x))
    records = s.profile_records()
    first = [(r.subgraph, r.node_name) for r in records if r.run == 0]
    body = [("cond/then_branch/loop/body", "keep_going"), ("cond/then_branch/loop/body", "negate")]
    assert first == [("", "cond"), ("cond/then_branch", "loop")] + body * 3, first
    second = [(r.subgraph, r.node_name) for r in records if r.run == 1]
    assert second == [("", "cond"), ("cond/else_branch", "abs")]
    totals = s.run_times_us()
    for run in (0, 1):
        steps = [r for r in records if r.run == run]
        cond = steps[0]
        for r in steps[1:]:
            # Inside the If's step (the sub-run's start is taken a little
            # before the runtime's first step: a microsecond of slack).
            assert cond.start_us - 1.0 <= r.start_us and r.start_us + r.duration_us <= cond.start_us + cond.duration_us + 1.0
        assert cond.start_us + cond.duration_us <= totals[run] + 1e-3
    loop = next(r for r in records if r.node_name == "loop")
    body_steps = [r for r in records if r.subgraph.endswith("/body") and r.run == 0]
    assert all(a.start_us + a.duration_us <= b.start_us + 1e-3 for a, b in itertools.pairwise(body_steps))
    assert body_steps[0].start_us >= loop.start_us - 1.0
    path = s.write_profile(tmp_path / "trace.json")
    events = json.loads(Path(path).read_text())
    nested = [e for e in events if e.get("cat") == "Node" and e["args"].get("subgraph")]
    assert sorted({e["args"]["subgraph"] for e in nested}) == ["cond/else_branch", "cond/then_branch",
                                                                "cond/then_branch/loop/body"]
    s.clear_profile()
    assert s.profile_records() == []
    s.run(None, {"c": np.array(False), "x": x})
    assert [(r.run, r.node_name) for r in s.profile_records()] == [(0, "cond"), (0, "abs")]


def test_olc_run_profile_counts_subgraph_nodes_not_their_if(tmp_path):
    # `olc run --profile` sums the nodes that ran: the branch's and the
    # body's, not the If and Loop steps whose time is theirs.
    pytest.importorskip("onnxruntime")
    path = tmp_path / "cf.onnx"
    onnx.save(_loop_in_if_model(), str(path))
    feeds = tmp_path / "feeds.npz"
    np.savez(feeds, c=np.array(True), x=np.array([1.0, -2.0, 3.0], np.float32))
    out = tmp_path / "r.json"
    p = run_cli("run", str(path), "--feeds", str(feeds), "--profile", "--compare", "onnxruntime", "--repeat", "5",
                "--json", str(out))
    assert p.returncode == 0, p.stderr
    prof = json.loads(out.read_text())["profile"]
    assert "If" not in prof["olc_by_op_us"] and "Loop" not in prof["olc_by_op_us"]
    assert {"Neg", "Identity"} <= set(prof["olc_by_op_us"])
    assert "cond/then_branch/loop/body/negate" in prof["olc_by_node_us"]
    assert "If" not in prof["ort_by_op_us"] and "Neg" in prof["ort_by_op_us"]
