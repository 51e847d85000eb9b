"""End-to-end models through olc_core.Session with the elementwise family installed.

The oracle is onnxruntime on the same model and inputs; olc's kernel plan
and kernel usage must show the native kernels actually ran.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import olc_core

ort = pytest.importorskip("onnxruntime")

OPSET = 20
# Ops no family is expected to cover; the first one unregistered stands in
# for "a node with no kernel" (the list keeps the test valid as families grow).
UNCOVERED_CANDIDATES = ("Hardmax", "Det")


def _registered(op: str, opset: int = OPSET, dtype: str = "float32") -> list[str]:
    return [
        r.kernel_name
        for r in olc_core.registered_kernels()
        if r.domain == "ai.onnx"
        and r.op_type == op
        and r.covers_opset(opset)
        and r.match_types((dtype,)) is None
    ]


def _model(nodes: list[onnx.NodeProto], outputs: list[str], shape: list[int]) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes,
        "olc_e2e",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 9  # onnxruntime 1.17+ reads it
    return model


def _unary_model(shape: list[int]) -> onnx.ModelProto:
    """Three branches of unary ops from one input, eleven nodes, three outputs."""
    n = helper.make_node
    nodes = [
        # sqrt|x| then exp(-.): in (0, 1]
        n("Abs", ["x"], ["a"], name="abs"),
        n("Sqrt", ["a"], ["b"], name="sqrt"),
        n("Neg", ["b"], ["c"], name="neg"),
        n("Exp", ["c"], ["out_decay"], name="exp"),
        # sigmoid(relu(tanh(x)))
        n("Tanh", ["x"], ["t"], name="tanh"),
        n("Relu", ["t"], ["r"], name="relu"),
        n("Sigmoid", ["r"], ["out_gate"], name="sigmoid"),
        # log(exp(-x)) == -x, through values shared with the first branch
        n("Neg", ["x"], ["nx"], name="neg_x"),
        n("Exp", ["nx"], ["enx"], name="exp_nx"),
        n("Log", ["enx"], ["lg"], name="log"),
        n("Abs", ["lg"], ["out_abs"], name="abs_lg"),
    ]
    return _model(nodes, ["out_decay", "out_gate", "out_abs"], shape)


def _uncovered_op() -> str:
    for op in UNCOVERED_CANDIDATES:
        if not _registered(op):
            return op
    pytest.skip(f"every candidate op has a kernel now: {UNCOVERED_CANDIDATES}")


def _model_with_uncovered(op: str) -> onnx.ModelProto:
    n = helper.make_node
    nodes = [
        n("Abs", ["x"], ["a"], name="abs"),
        n(op, ["a"], ["h"], name="no_kernel_here"),
        n("Neg", ["h"], ["y"], name="neg"),
    ]
    return _model(nodes, ["y"], [5, 5] if op == "Det" else [4, 7])


def _ort_run(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def test_elementwise_family_is_installed() -> None:
    assert olc_core.plugin_load_errors() == []
    for op in ("Abs", "Neg", "Exp", "Log", "Sqrt", "Sigmoid", "Tanh", "Relu"):
        assert _registered(op), f"no float32 kernel registered for {op} at opset {OPSET}"


# Lengths around the SIMD widths (8 and 16 float32 lanes) and one large
# enough to be split across threads.
@pytest.mark.parametrize("shape", [[1], [3, 5], [2, 17], [1 << 16, 3]], ids=str)
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("fusion", [False, True], ids=["unfused", "fused"])
def test_unary_chain_matches_onnxruntime(shape: list[int], threads: int, fusion: bool) -> None:
    model = _unary_model(shape)
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)

    sess = olc_core.Session(model, threads=threads, record_usage=True, fusion=fusion)
    got = sess.run(None, {"x": x})
    want = _ort_run(model, {"x": x})

    assert len(got) == len(want) == 3
    for name, g, w in zip(["out_decay", "out_gate", "out_abs"], got, want):
        assert g.dtype == w.dtype == np.float32, name
        assert g.shape == w.shape, name
        diff = float(np.max(np.abs(g.astype(np.float64) - w)))
        assert diff <= 1e-5, f"{name}: max abs diff {diff:.3g} against onnxruntime"

    plan = sess.kernel_plan()
    # Each original node once: as its own entry or inside a fused one.
    planned = [(f, op) for p in plan for f, op in (p.fused_nodes or ((p.node_name, p.op_type),))]
    assert planned == [(nd.name, nd.op_type) for nd in model.graph.node]
    assert any(p.fused_nodes for p in plan) == fusion
    for p in plan:
        assert p.native, f"{p.node_name} ({p.op_type}) fell back: {p.reason}"
        assert p.kernel.startswith("olc_elementwise::"), p.kernel
    # Every planned kernel is what ran; nothing on the fallback.
    used = sess.kernel_usage()
    assert sorted(used) == sorted(p.kernel for p in plan)


def test_strict_accepts_an_all_native_model() -> None:
    model = _unary_model([8])
    sess = olc_core.Session(model, strict=True)
    assert sess.strict
    x = np.linspace(-3, 3, 8, dtype=np.float32)
    out = sess.run(["out_abs"], {"x": x})
    np.testing.assert_allclose(out[0], np.abs(x), rtol=1e-5, atol=1e-6)


def test_strict_refuses_a_node_without_kernel() -> None:
    op = _uncovered_op()
    model = _model_with_uncovered(op)
    with pytest.raises(olc_core.OlcError) as info:
        olc_core.Session(model, strict=True)
    message = str(info.value)
    assert "no_kernel_here" in message, message
    assert op in message, message


def test_fallback_node_is_planned_and_runs() -> None:
    op = _uncovered_op()
    model = _model_with_uncovered(op)
    shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)

    sess = olc_core.Session(model, record_usage=True)
    plan = {p.node_name: p for p in sess.kernel_plan()}
    assert list(plan) == ["abs", "no_kernel_here", "neg"]
    assert plan["abs"].native and plan["neg"].native
    fallback = plan["no_kernel_here"]
    assert not fallback.native
    assert fallback.kernel.startswith("onnx.reference"), fallback.kernel
    assert fallback.reason, "a fallback must say why"

    got = sess.run(None, {"x": x})[0]
    want = _ort_run(model, {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert fallback.kernel in sess.kernel_usage()
