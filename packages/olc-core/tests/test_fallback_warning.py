"""A session that uses the onnx.reference fallback says so once; kernel_plan(expand_fused=True)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import olc_core
from olc_core import demo
from olc_core.session import CONSTANT_FOLDED_REASON, FALLBACK_LIBRARY

LOGGER = "olc_core.session"
OPSET = 20
# Ops no family is expected to cover; the first one without a kernel stands
# in for "a node with no kernel".
UNCOVERED_CANDIDATES = ("Hardmax", "Det")


def _has_kernel(op: str, dtype: str = "float32") -> bool:
    return any(r.domain == "ai.onnx" and r.op_type == op and r.covers_opset(OPSET) and r.match_types((dtype,)) is None
               for r in olc_core.registered_kernels())


def _uncovered_op() -> str:
    for op in UNCOVERED_CANDIDATES:
        if not _has_kernel(op):
            return op
    pytest.skip(f"every candidate op has a kernel now: {UNCOVERED_CANDIDATES}")


def _need_native(*ops: str) -> None:
    missing = [op for op in ops if not _has_kernel(op)]
    if missing:
        pytest.skip(f"no float32 kernel installed for {missing}")


def _model(nodes: list[onnx.NodeProto], shape: list[int], initializers: list[onnx.TensorProto] | None = None
           ) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              initializer=initializers or [])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 9
    return model


def _fallback_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == LOGGER and r.levelno == logging.WARNING]


def test_one_warning_names_the_count_and_op_types(caplog):
    op = _uncovered_op()
    _need_native("Abs", "Neg")
    n = helper.make_node
    model = _model([n("Abs", ["x"], ["a"], name="abs"), n(op, ["a"], ["h1"], name="first"),
                    n(op, ["h1"], ["h2"], name="second") if op == "Hardmax" else n("Abs", ["h1"], ["h2"], name="abs2"),
                    n("Neg", ["h2"], ["y"], name="neg")], [5, 5])
    expected = 2 if op == "Hardmax" else 1
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        sess = olc_core.Session(model)
    (record,) = _fallback_records(caplog)
    message = record.getMessage()
    assert message.startswith(f"{expected} of 4 nodes run on the {FALLBACK_LIBRARY} fallback: {op} x{expected}")
    assert "strict=True" in message and "kernel_plan()" in message
    assert record.olc_fallback == {"count": expected, "nodes": 4, "ops": {op: expected}}
    # The warning agrees with the plan.
    assert sum(1 for e in sess.kernel_plan() if not e.native) == expected
    # Running does not warn again.
    caplog.clear()
    sess.run(None, {"x": np.eye(5, dtype=np.float32)})
    assert _fallback_records(caplog) == []


def test_ops_are_listed_most_frequent_first(caplog):
    op = _uncovered_op()
    # A custom-domain op run through a model-local function also falls back.
    n = helper.make_node
    fn = helper.make_function("com.local", "Twice", ["a"], ["b"], [n("Add", ["a", "a"], ["b"])],
                              [helper.make_opsetid("", OPSET)])
    model = _model([n(op, ["x"], ["h"], name="h"), n("Twice", ["h"], ["t1"], domain="com.local", name="t1"),
                    n("Twice", ["t1"], ["y"], domain="com.local", name="t2")], [5, 5])
    model.opset_import.append(helper.make_opsetid("com.local", 1))
    model.functions.append(fn)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        olc_core.Session(model)
    (record,) = _fallback_records(caplog)
    assert f": com.local::Twice x2, {op} x1 (" in record.getMessage()


def test_no_warning_when_every_node_is_native(caplog):
    _need_native("Abs", "Neg")
    n = helper.make_node
    model = _model([n("Abs", ["x"], ["a"], name="abs"), n("Neg", ["a"], ["y"], name="neg")], [4])
    with caplog.at_level(logging.DEBUG, logger="olc_core"):
        sess = olc_core.Session(model)
    assert all(e.native for e in sess.kernel_plan())
    assert _fallback_records(caplog) == []


def test_a_constant_folded_at_build_is_not_a_fallback_per_run(caplog):
    # Constant has no kernel: the fallback evaluates it once, while building;
    # the per-run plan holds only native steps, so nothing is reported.
    _need_native("Add")
    n = helper.make_node
    model = _model([n("Constant", [], ["c"], name="c", value=helper.make_tensor("v", TensorProto.FLOAT, [4], [1, 2, 3, 4])),
                    n("Add", ["x", "c"], ["y"], name="add")], [4])
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        sess = olc_core.Session(model)
    plan = {e.node_name: e for e in sess.kernel_plan()}
    assert not plan["c"].native and plan["c"].reason == CONSTANT_FOLDED_REASON
    assert _fallback_records(caplog) == []
    np.testing.assert_array_equal(sess.run(None, {"x": np.zeros(4, np.float32)})[0], [1, 2, 3, 4])


def _subprocess(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "OLC_DISABLE_PLUGIN_AUTOLOAD": "1"})


def test_unconfigured_logging_prints_it_once_and_logging_silences_it():
    # Core alone: every node of the demo runs on the fallback.
    build = "import olc_core; from olc_core import demo; olc_core.Session(demo.build_demo_model())"
    p = _subprocess(build)
    assert p.returncode == 0, p.stderr
    lines = [line for line in p.stderr.splitlines() if "fallback" in line]
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith(f"14 of 14 nodes run on the {FALLBACK_LIBRARY} fallback: Add x2, Tanh x2, ")
    p = _subprocess("import logging; logging.getLogger('olc_core').setLevel(logging.ERROR); " + build)
    assert p.returncode == 0 and p.stderr == "", p.stderr


def test_expanded_plan_has_one_entry_per_original_node():
    model = demo.build_demo_model()
    sess = olc_core.Session(model, fusion=True)
    plan = sess.kernel_plan()
    groups = {e.node_name: e for e in plan if e.fused_nodes}
    if not groups:
        pytest.skip("no fusion pass fused anything in the demo (olc-elementwise not installed?)")
    expanded = sess.kernel_plan(expand_fused=True)
    assert len(plan) < len(expanded) == len(model.graph.node)
    assert [(e.node_name, e.op_type) for e in expanded] == [(n.name, n.op_type) for n in model.graph.node]
    for e in expanded:
        assert e.fused_nodes == ()
        if not e.fused_into:
            assert e in plan  # an unfused node's entry is unchanged
            continue
        group = groups[e.fused_into]
        assert (e.node_name, e.op_type) in group.fused_nodes
        assert e.kernel == group.kernel and e.native == group.native and e.graph_pass == group.graph_pass
        assert e.reason == f"fused into {group.node_name} by {group.graph_pass}"
        assert e.domain == "ai.onnx"
    assert sum(1 for e in expanded if e.fused_into) == sum(len(g.fused_nodes) for g in groups.values())
    # Without fusion both forms are the same list.
    unfused = olc_core.Session(model, fusion=False)
    assert unfused.kernel_plan(expand_fused=True) == unfused.kernel_plan()
    assert [e.node_name for e in unfused.kernel_plan()] == [e.node_name for e in expanded]
