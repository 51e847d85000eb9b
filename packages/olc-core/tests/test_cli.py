"""The ``olc`` command line: run (demo and files), kernels, info."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import olc_core
from olc_core import cli, demo

HAS_ORT = True
try:
    import onnxruntime  # noqa: F401
except ImportError:
    HAS_ORT = False


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "olc_core.cli", *args], capture_output=True, text=True,
                          timeout=300, env={**os.environ, **(env or {})})


def _model(path, nodes, inputs, outputs, opset=17):
    m = helper.make_model(helper.make_graph(nodes, "t", inputs, outputs),
                          opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.save(m, str(path))
    return str(path)


@pytest.fixture
def abs_model(tmp_path):
    return _model(tmp_path / "abs.onnx", [helper.make_node("Abs", ["x"], ["y"], name="the_abs")],
                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 3])])


def test_demo_model_is_valid_and_matches_reference():
    from onnx.reference import ReferenceEvaluator

    model = demo.build_demo_model()
    ops = [n.op_type for n in model.graph.node]
    for op in ("Abs", "Log", "Relu", "Sigmoid", "Tanh", "Exp", "Gelu", "Sqrt", "MatMul", "Add"):
        assert op in ops
    x = np.random.default_rng(0).standard_normal((4, demo.FEATURES)).astype(np.float32)
    head, features, lat = ReferenceEvaluator(model).run(None, {"x": x})
    assert head.shape == (4, demo.HIDDEN) and features.shape == x.shape
    assert np.all((head > 0) & (head < 1))
    expected = np.sqrt(np.abs(x)) * np.exp(-np.abs(x)) + np.maximum(x, 0)
    np.testing.assert_allclose(features, expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(lat, np.tanh(np.log(np.abs(x))), rtol=1e-5, atol=1e-6)


def test_demo_run_prints_plan_and_matches_onnxruntime(tmp_path):
    out_json = tmp_path / "run.json"
    args = ["run", "--repeat", "3", "--threads", "1", "--json", str(out_json)]
    if not HAS_ORT:
        args += ["--compare", "none"]
    p = run_cli(*args)
    assert p.returncode == 0, p.stderr
    assert "kernel plan:" in p.stdout
    # One table row per node, with its op and a native/fallback verdict.
    for node in demo.build_demo_model().graph.node:
        row = [line for line in p.stdout.splitlines() if line.startswith(node.name + " ")]
        assert row, f"no plan row for {node.name}"
        assert node.op_type in row[0] and ("native" in row[0] or "fallback" in row[0])
    assert "olc: preparing an olc session" in p.stderr  # progress goes to stderr
    result = json.loads(out_json.read_text())
    assert result["threads"] == 1
    assert result["inputs"]["x"]["shape"] == [demo.DEMO_DIMS["batch"], demo.FEATURES]
    assert len(result["plan"]) == len(demo.build_demo_model().graph.node)
    if HAS_ORT:
        assert "olc vs onnxruntime" in p.stdout and "ratio onnxruntime/olc" in p.stdout
        assert {r["output"] for r in result["comparison"]} == {"head", "features", "log_abs_tanh"}
        for r in result["comparison"]:
            assert r["ok"] and r["max_abs"] < 1e-4, r
        t = result["timing"]
        assert len(t["olc_ns"]) == len(t["ort_ns"]) == 3 and t["ratio"] > 0


def test_demo_without_onnxruntime_says_so(monkeypatch, capsys):
    monkeypatch.setattr(cli, "_onnxruntime_available", lambda: False)
    assert cli.main(["run", "--repeat", "0", "--dim", "batch=2"]) == 0
    err = capsys.readouterr().err
    assert "onnxruntime is not installed" in err
    monkeypatch.setattr(cli, "_onnxruntime_available", lambda: False)
    assert cli.main(["run", "--compare", "onnxruntime"]) == cli.EXIT_ERROR
    assert "onnxruntime is not installed" in capsys.readouterr().err


def test_run_model_file_with_symbolic_dim(abs_model, tmp_path, capsys):
    out = tmp_path / "r.json"
    assert cli.main(["run", abs_model, "--dim", "n=5", "--compare", "none", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "the_abs" in text and "Abs" in text
    result = json.loads(out.read_text())
    assert result["inputs"]["x"]["shape"] == [5, 3]
    # default for an unnamed symbolic dim
    assert cli.main(["run", abs_model, "--compare", "none", "--json", str(out)]) == 0
    assert json.loads(out.read_text())["inputs"]["x"]["shape"] == [cli.DEFAULT_SYMBOLIC_DIM, 3]


@pytest.mark.skipif(not HAS_ORT, reason="onnxruntime not installed")
def test_run_model_file_compare(abs_model):
    p = run_cli("run", abs_model, "--compare", "onnxruntime", "--repeat", "2", "--dim", "n=7")
    assert p.returncode == 0, p.stderr
    row = [line for line in p.stdout.splitlines() if line.startswith("y ")]
    assert row and "7x3" in row[0] and row[0].split()[2] == "0"  # Abs is exact


def test_input_generation_is_seeded_and_typed():
    m = helper.make_model(helper.make_graph(
        [helper.make_node("Identity", ["a"], ["b"])], "g",
        [helper.make_tensor_value_info("a", TensorProto.INT64, ["k", 2]),
         helper.make_tensor_value_info("m", TensorProto.BOOL, [3]),
         helper.make_tensor_value_info("f", TensorProto.FLOAT16, [])],
        [helper.make_tensor_value_info("b", TensorProto.INT64, ["k", 2])]))
    specs = cli.input_specs(m, {"k": 4})
    assert [(n, str(d), s) for n, d, s in specs] == [("a", "int64", (4, 2)), ("m", "bool", (3,)),
                                                     ("f", "float16", ())]
    a = cli.random_inputs(specs, seed=1)
    b = cli.random_inputs(specs, seed=1)
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert a["a"].dtype == np.int64 and a["a"].min() >= 0 and a["m"].dtype == np.bool_


def test_compare_outputs_handles_nan_inf_and_mismatch():
    a = np.array([1.0, np.nan, np.inf, 0.0], np.float32)
    rows = cli.compare_outputs(["o"], [a], [a.copy()], rtol=1e-4, atol=1e-5)
    assert rows[0]["ok"] and rows[0]["max_abs"] == 0
    rows = cli.compare_outputs(["o"], [a + 1], [a], rtol=1e-4, atol=1e-5)
    assert not rows[0]["ok"] and rows[0]["max_abs"] == pytest.approx(1.0)
    rows = cli.compare_outputs(["o"], [np.zeros(2)], [np.zeros(3)], 1e-4, 1e-5)
    assert not rows[0]["ok"]


def test_missing_file_is_a_clear_error():
    p = run_cli("run", "/nonexistent/model.onnx")
    assert p.returncode == 1
    assert "no such file" in p.stderr and "Traceback" not in p.stderr


def test_malformed_model_is_a_clear_error(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x07this is not a model\xff\xff")
    p = run_cli("run", str(bad))
    assert p.returncode == 1
    assert "not a valid ONNX model" in p.stderr or "malformed" in p.stderr
    assert "Traceback" not in p.stderr


def test_structurally_invalid_model_is_a_clear_error(tmp_path):
    # Parses, but a node reads a value nothing defines.
    path = _model(tmp_path / "dangling.onnx", [helper.make_node("Abs", ["nowhere"], ["y"], name="dangling")],
                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    p = run_cli("run", path, "--compare", "none")
    assert p.returncode == 1
    assert "olc: error:" in p.stderr and "Traceback" not in p.stderr


def test_session_error_without_and_with_debug(tmp_path):
    # A node with no implementation anywhere: olc cannot prepare it.
    path = _model(tmp_path / "unknown.onnx",
                  [helper.make_node("NoSuchOp", ["x"], ["y"], domain="com.nowhere", name="ghost")],
                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    m = onnx.load(path)
    m.opset_import.append(helper.make_opsetid("com.nowhere", 1))
    onnx.save(m, path)
    p = run_cli("run", path, "--compare", "none")
    assert p.returncode == 1
    assert p.stderr.count("olc: error:") == 1 and "Traceback" not in p.stderr
    p = run_cli("--debug", "run", path, "--compare", "none")
    assert p.returncode != 0 and "Traceback" in p.stderr


def test_strict_refuses_fallback(tmp_path):
    # MatMul has no kernel in the elementwise family.
    path = _model(tmp_path / "mm.onnx", [helper.make_node("MatMul", ["a", "b"], ["c"], name="mm")],
                  [helper.make_tensor_value_info("a", TensorProto.FLOAT, [2, 2]),
                   helper.make_tensor_value_info("b", TensorProto.FLOAT, [2, 2])],
                  [helper.make_tensor_value_info("c", TensorProto.FLOAT, [2, 2])])
    plan = olc_core.Session(path).kernel_plan()
    if plan[0].native:
        pytest.skip("a MatMul kernel is installed")
    p = run_cli("run", path, "--strict", "--compare", "none")
    assert p.returncode == 1 and "Traceback" not in p.stderr and "olc: error:" in p.stderr


def test_usage_errors():
    assert run_cli("run", "--threads", "0").returncode == 2
    assert run_cli("run", "--dim", "nonsense", "--compare", "none").returncode == 1
    assert run_cli("frobnicate").returncode == 2


def test_kernels_table_matches_registry():
    regs = olc_core.registered_kernels()
    p = run_cli("kernels")
    assert p.returncode == 0, p.stderr
    if not regs:
        assert cli.NO_KERNELS_MESSAGE in p.stdout
        return
    lines = p.stdout.splitlines()
    assert lines[0].split() == ["domain", "op", "types", "opset", "kernel", "family"]
    for r in regs:
        assert any(r.kernel_name in line and r.op_type in line for line in lines), r.kernel_name
    data = json.loads(run_cli("kernels", "--json").stdout)
    assert len(data) == len(regs)
    assert {d["kernel_name"] for d in data} == {r.kernel_name for r in regs}
    op = regs[0].op_type
    only = json.loads(run_cli("kernels", "--json", "--op", op).stdout)
    assert only and all(d["op_type"] == op for d in only)
    fam = regs[0].family
    if fam:
        by_family = json.loads(run_cli("kernels", "--json", "--family", fam).stdout)
        assert by_family and all(d["family"] == fam for d in by_family)
    assert "no registered kernel matches" in run_cli("kernels", "--op", "NoSuchOp").stdout


def test_kernels_empty_registry(monkeypatch, capsys):
    monkeypatch.setattr(olc_core, "registered_kernels", lambda: ())
    assert cli.main(["kernels"]) == 0
    assert cli.NO_KERNELS_MESSAGE in capsys.readouterr().out


def test_core_alone_lists_no_kernel_and_still_runs_the_demo():
    env = {"OLC_DISABLE_PLUGIN_AUTOLOAD": "1"}
    p = run_cli("kernels", env=env)
    assert p.returncode == 0, p.stderr
    assert cli.NO_KERNELS_MESSAGE in p.stdout
    p = run_cli("run", "--compare", "none", "--repeat", "1", env=env)
    assert p.returncode == 0, p.stderr
    assert "0 of 14 nodes on native kernels, 14 on fallbacks" in p.stdout


def test_info_text_and_json():
    p = run_cli("info")
    assert p.returncode == 0, p.stderr
    assert f"simd level: {olc_core.simd_level()}" in p.stdout
    assert "cpu features:" in p.stdout and "default threads:" in p.stdout and "tuning profile" in p.stdout
    info = json.loads(run_cli("info", "--json").stdout)
    assert info["simd_level"] == olc_core.simd_level()
    assert info["cpu_features"] == {str(k): bool(v) for k, v in olc_core.cpu_features().items()}
    assert isinstance(info["default_threads"], int) and info["default_threads"] >= 1
    assert isinstance(info["tuning"], list) and isinstance(info["plugins"], list)
    from importlib.metadata import entry_points

    assert {p["name"] for p in info["plugins"]} == {ep.name for ep in entry_points(group="olc.kernels")}


def test_info_reports_the_simd_cap():
    info = json.loads(run_cli("info", "--json", env={"OLC_SIMD": "scalar"}).stdout)
    assert info["olc_simd_cap"] == "scalar"
    assert info["simd_level"] == "scalar"
    uncapped = json.loads(run_cli("info", "--json", env={"OLC_SIMD": ""}).stdout)
    assert info["detected_simd_level"] == uncapped["simd_level"]
