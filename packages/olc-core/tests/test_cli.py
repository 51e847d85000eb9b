"""The ``olc`` command line: run (demo and files), kernels, info."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import olc_core
from olc_core import cli, demo

HAS_ORT = True
try:
    import onnxruntime  # noqa: F401
except ImportError:
    HAS_ORT = False


def _table_row(text: str, first: str) -> list[str]:
    """The cells (split on runs of two or more spaces) of the table row that starts with ``first``."""
    (line,) = [line for line in text.splitlines() if line.split("  ")[0] == first]
    return re.split(r"\s{2,}", line.strip())


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "olc_core.cli", *args], capture_output=True, text=True,
                          timeout=300, env={**os.environ, **(env or {})})


def _model(path, nodes, inputs, outputs, opset=17, initializers=()):
    m = helper.make_model(helper.make_graph(nodes, "t", inputs, outputs, initializer=list(initializers)),
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
    # Shapes name their symbolic dimensions.
    assert f"olc: input x: float32 [batch=64, {demo.FEATURES}]: random N(0,1)" in p.stderr
    result = json.loads(out_json.read_text())
    assert result["threads"] == 1
    assert result["inputs"]["x"]["shape"] == [demo.DEMO_DIMS["batch"], demo.FEATURES]
    assert result["inputs"]["x"]["dims"] == ["batch", None]
    assert len(result["plan"]) == len(demo.build_demo_model().graph.node)
    # The JSON plan is the session's expanded plan.
    expanded = olc_core.Session(demo.build_demo_model(), threads=1).kernel_plan(expand_fused=True)
    assert [(r["node"], r["kernel"], r["fused_into"]) for r in result["plan"]] == [
        (e.node_name, e.kernel, e.fused_into or None) for e in expanded]
    # Every line of the report stays readable.
    assert max(len(line) for line in p.stdout.splitlines()) <= cli.TABLE_WIDTH
    if HAS_ORT:
        assert "olc vs onnxruntime" in p.stdout and "ratio onnxruntime/olc" in p.stdout
        assert {r["output"] for r in result["comparison"]} == {"head", "features", "log_abs_tanh"}
        for r in result["comparison"]:
            assert r["ok"] and r["verdict"] == "agree" and r["max_abs"] < 1e-4, r
            assert r["tol_used"] <= 1 and r["olc_nan"] == r["ort_nan"] == r["olc_inf"] == r["ort_inf"] == 0, r
        head = _table_row(p.stdout, "head")
        assert head[1] == f"[batch=64, {demo.HIDDEN}]" and head[-1] == "agree"
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
    row = _table_row(p.stdout, "y")
    # output, shape, max abs diff, tol used, NaN olc/ort, inf olc/ort, verdict; Abs is exact
    assert row == ["y", "[n=7, 3]", "0", "0", "0/0", "0/0", "agree"]


def test_input_generation_is_seeded_and_typed():
    m = helper.make_model(helper.make_graph(
        [helper.make_node("Identity", ["a"], ["b"])], "g",
        [helper.make_tensor_value_info("a", TensorProto.INT64, ["k", 2]),
         helper.make_tensor_value_info("m", TensorProto.BOOL, [3]),
         helper.make_tensor_value_info("f", TensorProto.FLOAT16, [])],
        [helper.make_tensor_value_info("b", TensorProto.INT64, ["k", 2])]))
    specs = cli.input_specs(m, {"k": 4})
    assert [(n, str(d), s, p) for n, d, s, p in specs] == [("a", "int64", (4, 2), ("k", None)),
                                                           ("m", "bool", (3,), (None,)), ("f", "float16", (), ())]
    a, roles = cli.random_inputs(m, specs, seed=1)
    b, _ = cli.random_inputs(m, specs, seed=1)
    c, _ = cli.random_inputs(m, specs, seed=2)
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert not np.array_equal(a["a"], c["a"])
    assert a["a"].dtype == np.int64 and a["a"].min() >= 0 and a["a"].max() < cli.DEFAULT_INT_HIGH
    assert a["m"].dtype == np.bool_ and a["f"].dtype == np.float16 and a["f"].shape == ()
    assert {n: r.kind for n, r in roles.items()} == {"a": "int", "m": "bool", "f": "float"}


def test_compare_outputs_handles_nan_inf_and_mismatch():
    a = np.array([1.0, np.nan, np.inf, 0.0], np.float32)
    # NaN and inf in the same places: the finite values agree, but the verdict is not "agree".
    (row,) = cli.compare_outputs(["o"], [a], [a.copy()], rtol=1e-4, atol=1e-5)
    assert row["verdict"] == "non-finite" and not row["ok"] and row["max_abs"] == 0
    assert (row["olc_nan"], row["olc_inf"], row["ort_nan"], row["ort_inf"]) == (1, 1, 1, 1)
    assert row["nonfinite_same"] == 2 and row["nonfinite_mismatch"] == 0
    (row,) = cli.compare_outputs(["o"], [a + 1], [a], rtol=1e-4, atol=1e-5)
    assert row["verdict"] == "DIFFER" and row["max_abs"] == pytest.approx(1.0) and row["beyond"] == 2
    (row,) = cli.compare_outputs(["o"], [np.zeros(2)], [np.zeros(3)], 1e-4, 1e-5)
    assert row["verdict"] == "DIFFER" and "shape" in row["note"]
    (row,) = cli.compare_outputs(["o"], [np.zeros(2, np.float32)], [np.zeros(2)], 1e-4, 1e-5)
    assert row["verdict"] == "DIFFER" and "float32" in row["note"]


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
    p = run_cli("run", "--dim", "nonsense", "--compare", "none")
    assert p.returncode == 2 and "--dim expects NAME=VALUE" in p.stderr
    for bad in (["--seed", "-1"], ["--vocab", "0"], ["--float-range", "1", "1"], ["--rtol", "-1"]):
        assert run_cli("run", "--compare", "none", *bad).returncode == 2, bad
    assert run_cli("frobnicate").returncode == 2


def test_kernels_table_matches_registry():
    regs = olc_core.registered_kernels()
    p = run_cli("kernels")
    assert p.returncode == 0, p.stderr
    if not regs:
        assert cli.NO_KERNELS_MESSAGE in p.stdout
        return
    lines = p.stdout.splitlines()
    assert lines[0].split() == ["domain", "op", "opset", "kernel", "family", "types"]
    for r in regs:
        assert any(r.kernel_name in line and r.op_type in line for line in lines), r.kernel_name
    # Long type lists wrap under the types column instead of running on.
    assert max(len(line) for line in lines) <= 160
    types_at = lines[0].index("types")
    # Whichever families are installed: the row of one type constraint with
    # the longest list (the one most likely to wrap).
    single = [r for r in regs if len(r.types) == 1]
    assert single, "no registration with one type constraint to check the wrapping on"
    widest = max(single, key=lambda r: len(next(iter(r.types.values()))))
    row = next(i for i, line in enumerate(lines)
               if line.split()[:2] == [widest.domain, widest.op_type] and widest.kernel_name in line
               and line.split()[2].split("-")[0].rstrip("+") == str(widest.since_version))
    # The types wrap under their column, or (when long kernel names leave
    # too little room beside them) go on indented lines under the row.
    cell = [lines[row][types_at:]]
    for line in lines[row + 1:]:
        if not line.startswith(" "):
            break
        assert line.startswith("    ") and ":" not in line[:4], line  # continuation lines hold only types
        cell.append(line.strip())
    listed = [t.strip() for t in " ".join(cell).split(":", 1)[1].split(",")]
    assert listed == list(next(iter(widest.types.values())))
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
    p = run_cli("kernels", "--op", "NoSuchOp")
    assert p.returncode == 1 and p.stdout == ""
    assert "no registered kernel matches op 'NoSuchOp'" in p.stderr


def test_kernels_empty_registry(monkeypatch, capsys):
    monkeypatch.setattr(olc_core, "registered_kernels", lambda: ())
    assert cli.main(["kernels"]) == 0
    assert cli.NO_KERNELS_MESSAGE in capsys.readouterr().out


def test_core_alone_lists_only_its_own_kernels_and_still_runs_the_demo():
    env = {"OLC_DISABLE_PLUGIN_AUTOLOAD": "1"}
    p = run_cli("kernels", "--json", env=env)
    assert p.returncode == 0, p.stderr
    regs = json.loads(p.stdout)
    assert {r["family"] for r in regs} == {"olc-core"}
    assert {r["op_type"] for r in regs} == {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Dropout",
                                            "Shape", "Size", "SequenceEmpty", "SequenceConstruct", "SequenceInsert",
                                            "SequenceAt", "SequenceErase", "SequenceLength", "ConcatFromSequence",
                                            "SplitToSequence"}
    p = run_cli("run", "--compare", "none", "--repeat", "1", env=env)
    assert p.returncode == 0, p.stderr
    assert "0 of 14 nodes on native kernels, 14 on the onnx.reference fallback" in p.stdout


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


def test_info_lists_the_caches(tmp_path):
    """`olc info` shows CPU 0's caches as sysfs gives them (what the
    cache-derived defaults in its tuning table come from): the JSON per
    cache, the text as one line; none where sysfs has no cache tree."""
    info = json.loads(run_cli("info", "--json").stdout)
    sysfs = cli.SYSFS_CPU0_CACHES
    if os.path.isdir(sysfs):
        levels = set()
        for e in os.listdir(sysfs):
            if e.startswith("index"):
                with open(os.path.join(sysfs, e, "level")) as f:
                    levels.add(int(f.read()))
        assert {c["level"] for c in info["caches"]} == levels
    for c in info["caches"]:
        assert c["bytes"] > 0 and c["shared_by"] >= 1 and c["type"] in ("Data", "Instruction", "Unified")
    assert "caches: " in run_cli("info").stdout
    caches = [{"level": 1, "type": "Data", "bytes": 48 << 10, "shared_by": 2},
              {"level": 1, "type": "Instruction", "bytes": 32 << 10, "shared_by": 2},
              {"level": 2, "type": "Unified", "bytes": 2 << 20, "shared_by": 2},
              {"level": 3, "type": "Unified", "bytes": 105 << 20, "shared_by": 112}]
    assert cli._format_caches(caches) == "L1d 48 KiB (shared by 2), L2 2 MiB (shared by 2), L3 105 MiB (shared by 112)"
    # A tree shaped like sysfs, sizes with and without units, ranges of CPUs.
    for i, (level, ctype, size, shared) in enumerate([("1", "Data", "32K", "0,8"), ("2", "Unified", "1048576", "0-1"),
                                                      ("3", "Unified", "32M", "0-7,16-23")]):
        d = tmp_path / f"index{i}"
        d.mkdir()
        for name, value in (("level", level), ("type", ctype), ("size", size), ("shared_cpu_list", shared)):
            (d / name).write_text(value + "\n")
    assert cli._cpu_caches(str(tmp_path)) == [{"level": 1, "type": "Data", "bytes": 32 << 10, "shared_by": 2},
                                              {"level": 2, "type": "Unified", "bytes": 1 << 20, "shared_by": 2},
                                              {"level": 3, "type": "Unified", "bytes": 32 << 20, "shared_by": 16}]
    assert cli._cpu_caches(str(tmp_path / "absent")) == []


def test_info_reports_the_simd_cap():
    info = json.loads(run_cli("info", "--json", env={"OLC_SIMD": "scalar"}).stdout)
    assert info["olc_simd_cap"] == "scalar"
    assert info["simd_level"] == "scalar"
    uncapped = json.loads(run_cli("info", "--json", env={"OLC_SIMD": ""}).stdout)
    assert info["detected_simd_level"] == uncapped["simd_level"]


# ---------------------------------------------------------------- comparison


def _nan_model(path):
    # sqrt(-1 - |x|): NaN for every input.
    return _model(path, [helper.make_node("Abs", ["x"], ["a"], name="abs"),
                         helper.make_node("Sub", ["minus_one", "a"], ["s"], name="sub"),
                         helper.make_node("Sqrt", ["s"], ["y"], name="sqrt")],
                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])],
                  initializers=[numpy_helper.from_array(np.array(-1, np.float32), "minus_one")])


@pytest.mark.skipif(not HAS_ORT, reason="onnxruntime not installed")
def test_all_nan_outputs_are_not_called_agree(tmp_path):
    out = tmp_path / "r.json"
    p = run_cli("run", _nan_model(tmp_path / "nan.onnx"), "--compare", "onnxruntime", "--repeat", "0",
                "--dim", "batch=2", "--json", str(out))
    assert p.returncode == cli.EXIT_NONFINITE, p.stderr
    row = _table_row(p.stdout, "y")
    assert row == ["y", "[batch=2, 4]", "-", "-", "8/8", "0/0", "non-finite"]
    assert "agree" not in row and "yes" not in p.stdout
    assert "the inputs produced non-finite outputs (8 of 8 values of y are NaN or infinite" in p.stderr
    assert "--feeds FILE.npz" in p.stderr and "--vocab" in p.stderr and "--seed" in p.stderr
    (r,) = json.loads(out.read_text())["comparison"]
    assert r["verdict"] == "non-finite" and r["ok"] is False and r["max_abs"] is None
    assert (r["olc_nan"], r["ort_nan"], r["nonfinite_same"]) == (8, 8, 8)
    assert json.loads(out.read_text())["status"] == cli.EXIT_NONFINITE


@pytest.mark.skipif(not HAS_ORT, reason="onnxruntime not installed")
def test_partly_nan_outputs_count_the_nan_positions(tmp_path):
    path = _model(tmp_path / "log.onnx", [helper.make_node("Log", ["x"], ["y"], name="log")],
                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 5])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 5])])
    feeds, out = tmp_path / "feeds.npz", tmp_path / "r.json"
    p = run_cli("run", path, "--compare", "onnxruntime", "--repeat", "0", "--dim", "n=6",
                "--save-feeds", str(feeds), "--json", str(out))
    negative = int((np.load(feeds)["x"] < 0).sum())
    assert 0 < negative < 30  # N(0, 1) inputs: some negative, not all
    assert p.returncode == cli.EXIT_NONFINITE, p.stderr
    (r,) = json.loads(out.read_text())["comparison"]
    assert (r["olc_nan"], r["ort_nan"], r["verdict"]) == (negative, negative, "non-finite")
    assert f"({negative} of 30 values of y" in p.stderr
    # The finite values were compared under the rule all the same.
    assert r["max_abs"] is not None and r["tol_used"] <= 1
    # Inputs in the model's domain make the same model agree.
    p = run_cli("run", path, "--compare", "onnxruntime", "--repeat", "0", "--float-range", "0.5", "2")
    assert p.returncode == 0, p.stderr
    assert _table_row(p.stdout, "y")[-1] == "agree" and "U[0.5, 2)" in p.stderr


def test_nan_position_mismatch_is_a_disagreement():
    ours = np.array([1.0, np.nan, 3.0], np.float32)
    (r,) = cli.compare_outputs(["o"], [ours], [np.array([1.0, 2.0, 3.0], np.float32)], rtol=1e-4, atol=1e-5)
    assert r["verdict"] == "DIFFER" and r["nonfinite_mismatch"] == 1 and r["beyond"] == 0
    assert r["worst"]["index"] == [1] and np.isnan(r["worst"]["olc"]) and r["worst"]["ort"] == 2.0
    # NaN in olc where onnxruntime has NaN elsewhere: two mismatched positions.
    (r,) = cli.compare_outputs(["o"], [ours], [np.array([np.nan, 2.0, 3.0], np.float32)], 1e-4, 1e-5)
    assert r["verdict"] == "DIFFER" and r["nonfinite_mismatch"] == 2
    # Infinities must match in sign; equal ones only make the output non-finite.
    (r,) = cli.compare_outputs(["o"], [np.array([np.inf, 1.0])], [np.array([-np.inf, 1.0])], 1e-4, 1e-5)
    assert r["verdict"] == "DIFFER" and r["nonfinite_mismatch"] == 1
    (r,) = cli.compare_outputs(["o"], [np.array([-np.inf, 1.0])], [np.array([-np.inf, 1.0])], 1e-4, 1e-5)
    assert r["verdict"] == "non-finite" and r["olc_inf"] == r["ort_inf"] == 1
    # Complex outputs: a NaN in one part only is a mismatch too.
    (r,) = cli.compare_outputs(["o"], [np.array([1 + 1j, complex(1, np.nan)])], [np.array([1 + 1j, 1 + 1j])],
                               1e-4, 1e-5)
    assert r["verdict"] == "DIFFER" and r["nonfinite_mismatch"] == 1


def test_agreement_is_the_documented_rule():
    rtol, atol = 1e-3, 1e-2
    ort = np.array([100.0, -100.0, 0.0, 1e-6], np.float64)
    allowed = atol + rtol * np.abs(ort)  # 0.11, 0.11, 0.01, ~0.01
    for fraction in (0.0, 0.5, 0.99, 1.01, 3.0):
        olc = ort + fraction * allowed * np.array([1, -1, 1, -1])
        (r,) = cli.compare_outputs(["o"], [olc], [ort], rtol, atol)
        # The printed columns are the rule's own quantities.
        assert r["tol_used"] == pytest.approx(fraction)
        assert r["max_abs"] == pytest.approx(float(np.max(fraction * allowed)))
        assert (r["verdict"] == "agree") == (fraction <= 1) == (r["tol_used"] <= 1) == r["ok"]
        assert r["beyond"] == (4 if fraction > 1 else 0)
    # A large relative difference next to zero is still within atol: agree, and tol used says why.
    (r,) = cli.compare_outputs(["o"], [np.array([5e-6])], [np.array([1e-7])], rtol, atol)
    assert r["verdict"] == "agree" and r["tol_used"] < 1
    # Random data at several scales: the verdict is tol_used <= 1, always.
    rng = np.random.default_rng(0)
    for scale in (1e-6, 1.0, 1e4):
        ort = rng.standard_normal(1000) * scale
        olc = ort + rng.standard_normal(1000) * (atol + rtol * np.abs(ort)) * 0.4
        (r,) = cli.compare_outputs(["o"], [olc], [ort], rtol, atol)
        within = bool(np.all(np.abs(olc - ort) <= atol + rtol * np.abs(ort)))
        assert (r["verdict"] == "agree") == within == (r["tol_used"] <= 1)
    # atol = rtol = 0: only equality agrees.
    (r,) = cli.compare_outputs(["o"], [np.array([1.0, 2.0])], [np.array([1.0, 2.0])], 0.0, 0.0)
    assert r["verdict"] == "agree" and r["tol_used"] == 0
    (r,) = cli.compare_outputs(["o"], [np.array([1.0, 2.5])], [np.array([1.0, 2.0])], 0.0, 0.0)
    assert r["verdict"] == "DIFFER" and r["tol_used"] == np.inf


def test_integer_outputs_must_be_equal():
    (r,) = cli.compare_outputs(["o"], [np.array([1000, 7], np.int64)], [np.array([1001, 7], np.int64)],
                               rtol=0.5, atol=5.0)
    assert r["verdict"] == "DIFFER" and r["exact"] and r["max_abs"] == 1 and r["worst"]["index"] == [0]
    (r,) = cli.compare_outputs(["o"], [np.array([True, False])], [np.array([True, False])], 1e-4, 1e-5)
    assert r["verdict"] == "agree" and r["tol_used"] is None


class _FakeOrt:
    """Stands in for an onnxruntime session: ``fn(feeds)`` gives its outputs."""

    def __init__(self, fn):
        self.fn = fn

    def run(self, names, feeds):
        return self.fn(feeds)


def _fake_onnxruntime(monkeypatch, fn):
    import olc_core.compare

    monkeypatch.setattr(cli, "_onnxruntime_available", lambda: True)
    monkeypatch.setattr(olc_core.compare, "onnxruntime_session", lambda model, threads: _FakeOrt(fn))


@pytest.mark.parametrize("fraction", [0.25, 4.0])
def test_printed_columns_follow_the_rule(abs_model, monkeypatch, capsys, tmp_path, fraction):
    rtol, atol = 1e-3, 1e-2

    def ort(feeds):  # |x| + d with d = fraction * (atol + rtol * |ort|): off by `fraction` of the allowed difference
        olc = np.abs(feeds["x"]).astype(np.float64)
        return [((olc + fraction * atol) / (1 - fraction * rtol)).astype(np.float32)]

    _fake_onnxruntime(monkeypatch, ort)
    out = tmp_path / "r.json"
    status = cli.main(["run", abs_model, "--compare", "onnxruntime", "--repeat", "0", "--dim", "n=50",
                       "--rtol", str(rtol), "--atol", str(atol), "--json", str(out)])
    captured = capsys.readouterr()
    row = _table_row(captured.out, "y")
    assert row[1] == "[n=50, 3]"
    assert float(row[3]) == pytest.approx(fraction, rel=1e-3)  # tol used
    (r,) = json.loads(out.read_text())["comparison"]
    assert float(row[2]) == pytest.approx(r["max_abs"], rel=1e-2)
    if fraction <= 1:
        assert status == cli.EXIT_OK and row[-1] == "agree"
    else:
        assert status == cli.EXIT_MISMATCH and row[-1] == "DIFFER"
        assert "outputs differ from onnxruntime: y" in captured.err
        assert "150 of 150 values beyond tolerance (worst y[" in captured.err


def test_nan_in_one_runtime_only_fails_the_run(abs_model, monkeypatch, capsys):
    def ort(feeds):
        y = np.abs(feeds["x"])
        y[1, 2] = np.nan
        return [y]

    _fake_onnxruntime(monkeypatch, ort)
    status = cli.main(["run", abs_model, "--compare", "onnxruntime", "--repeat", "0", "--dim", "n=4"])
    captured = capsys.readouterr()
    assert status == cli.EXIT_MISMATCH
    assert _table_row(captured.out, "y")[4:] == ["0/1", "0/0", "DIFFER"]
    assert "y: NaN/infinity differ at 1 of 12 positions (first y[1, 2]: olc " in captured.err
    assert "vs onnxruntime nan" in captured.err


def test_without_comparison_the_outputs_still_show_nan_counts(tmp_path):
    p = run_cli("run", _nan_model(tmp_path / "nan.onnx"), "--compare", "none", "--dim", "batch=3")
    assert p.returncode == 0, p.stderr
    assert _table_row(p.stdout, "y") == ["y", "float32", "[batch=3, 4]", "12", "0"]
    assert "non-finite outputs (12 of 12 values of y are NaN or infinite)" in p.stderr


# ---------------------------------------------------------------- feeds


def _text_model(path, table_rows=37, seq_dims=("batch", "seq")):
    """input_ids -> Gather on an embedding table; attention_mask, position_ids, token_type_ids beside it."""
    rng = np.random.default_rng(0)
    n = helper.make_node
    nodes = [n("Gather", ["emb", "input_ids"], ["e"], name="word_emb"),
             n("Gather", ["pos", "position_ids"], ["p"], name="pos_emb"),
             n("Gather", ["typ", "token_type_ids"], ["t"], name="type_emb"),
             n("Add", ["e", "p"], ["ep"], name="add_pos"), n("Add", ["ep", "t"], ["ept"], name="add_type"),
             n("Cast", ["attention_mask"], ["mf"], name="mask_cast", to=TensorProto.FLOAT),
             n("Unsqueeze", ["mf", "axes"], ["mu"], name="mask_unsqueeze"),
             n("Mul", ["ept", "mu"], ["y"], name="masked")]
    inits = [numpy_helper.from_array(rng.standard_normal((table_rows, 4)).astype(np.float32), "emb"),
             numpy_helper.from_array(rng.standard_normal((64, 4)).astype(np.float32), "pos"),
             numpy_helper.from_array(rng.standard_normal((2, 4)).astype(np.float32), "typ"),
             numpy_helper.from_array(np.array([-1], np.int64), "axes")]
    inputs = [helper.make_tensor_value_info(k, TensorProto.INT64, list(seq_dims))
              for k in ("input_ids", "attention_mask", "position_ids", "token_type_ids")]
    return _model(path, nodes, inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, [*seq_dims, 4])],
                  initializers=inits)


def test_feeds_follow_each_inputs_role(tmp_path):
    model = onnx.load(_text_model(tmp_path / "text.onnx"))
    specs = cli.input_specs(model, {"batch": 3, "seq": 9})
    feeds, roles = cli.random_inputs(model, specs, seed=0)
    ids = feeds["input_ids"]
    assert ids.dtype == np.int64 and ids.shape == (3, 9)
    assert ids.min() >= 0 and ids.max() < 37 and len(np.unique(ids)) > 5
    assert roles["input_ids"].label == "ids < 37 (rows of embedding table 'emb')"
    np.testing.assert_array_equal(feeds["attention_mask"], np.ones((3, 9), np.int64))
    np.testing.assert_array_equal(feeds["position_ids"], np.tile(np.arange(9), (3, 1)))
    np.testing.assert_array_equal(feeds["token_type_ids"], np.zeros((3, 9), np.int64))
    assert {n: r.kind for n, r in roles.items()} == {"input_ids": "ids", "attention_mask": "mask",
                                                     "position_ids": "positions", "token_type_ids": "token_types"}
    # --vocab below the table's rows narrows the ids; above it, the table wins.
    feeds, roles = cli.random_inputs(model, specs, seed=0, vocab=5)
    assert feeds["input_ids"].max() < 5 and roles["input_ids"].high == 5
    assert cli.random_inputs(model, specs, seed=0, vocab=1000)[1]["input_ids"].high == 37


def test_ids_found_through_casts_and_by_name():
    n = helper.make_node
    table = numpy_helper.from_array(np.zeros((5, 2), np.float32), "table")
    model = helper.make_model(helper.make_graph(
        [n("Cast", ["tok"], ["tok64"], to=TensorProto.INT64), n("Unsqueeze", ["tok64", "ax"], ["tok2"]),
         n("Gather", ["table", "tok2"], ["e"], axis=0), n("Identity", ["word_ids"], ["w"]),
         n("Identity", ["k"], ["kk"]), n("Identity", ["pos_mask"], ["pm"])], "g",
        [helper.make_tensor_value_info("tok", TensorProto.INT32, [6]),
         helper.make_tensor_value_info("word_ids", TensorProto.INT64, [2, 3]),
         helper.make_tensor_value_info("k", TensorProto.INT64, [50]),
         helper.make_tensor_value_info("pos_mask", TensorProto.BOOL, [4])],
        [helper.make_tensor_value_info(v, TensorProto.UNDEFINED, None) for v in ("e", "w", "kk", "pm")],
        initializer=[table, numpy_helper.from_array(np.array([0], np.int64), "ax")]))
    specs = cli.input_specs(model, {})
    feeds, roles = cli.random_inputs(model, specs, seed=3)
    assert roles["tok"].label == "ids < 5 (rows of embedding table 'table')" and feeds["tok"].max() < 5
    assert feeds["tok"].dtype == np.int32
    assert roles["word_ids"].high == cli.DEFAULT_VOCAB and "set --vocab" in roles["word_ids"].label
    assert roles["k"].kind == "int" and feeds["k"].max() < cli.DEFAULT_INT_HIGH
    assert roles["pos_mask"].kind == "mask" and feeds["pos_mask"].all()
    _, roles = cli.random_inputs(model, specs, seed=3, vocab=7)
    assert roles["word_ids"].label == "ids < 7 (--vocab)"


def test_run_prints_the_roles_and_saves_the_feeds(tmp_path):
    path = _text_model(tmp_path / "text.onnx")
    saved = tmp_path / "used.npz"
    compare = "onnxruntime" if HAS_ORT else "none"
    p = run_cli("run", path, "--compare", compare, "--repeat", "0", "--dim", "batch=2", "--dim", "seq=6",
                "--save-feeds", str(saved))
    assert p.returncode == 0, p.stderr  # ids out of range would fail the Gather
    assert "olc: input input_ids: int64 [batch=2, seq=6]: ids < 37 (rows of embedding table 'emb')" in p.stderr
    assert "olc: input attention_mask: int64 [batch=2, seq=6]: mask (ones)" in p.stderr
    assert "olc: input position_ids: int64 [batch=2, seq=6]: positions 0..5 along the last axis" in p.stderr
    assert "olc: input token_type_ids: int64 [batch=2, seq=6]: token types (zeros)" in p.stderr
    used = np.load(saved)
    assert sorted(used.files) == ["attention_mask", "input_ids", "position_ids", "token_type_ids"]
    assert used["input_ids"].max() < 37 and used["position_ids"][1].tolist() == list(range(6))
    if HAS_ORT:
        assert _table_row(p.stdout, "y")[1:2] == ["[batch=2, seq=6, 4]"]


def test_feeds_file_supplies_inputs_and_binds_dims(tmp_path):
    path = _text_model(tmp_path / "text.onnx")
    given = np.array([[1, 2, 3, 4, 5]], np.int64)
    np.savez(tmp_path / "ids.npz", input_ids=given)
    saved, out = tmp_path / "used.npz", tmp_path / "r.json"
    p = run_cli("run", path, "--compare", "none", "--feeds", str(tmp_path / "ids.npz"),
                "--save-feeds", str(saved), "--json", str(out))
    assert p.returncode == 0, p.stderr
    assert "olc: input input_ids: int64 [batch=1, seq=5]: from ids.npz" in p.stderr
    # The file's sizes bind batch and seq for the generated inputs.
    assert "olc: input attention_mask: int64 [batch=1, seq=5]: mask (ones)" in p.stderr
    used = np.load(saved)
    np.testing.assert_array_equal(used["input_ids"], given)
    assert used["position_ids"].tolist() == [[0, 1, 2, 3, 4]]
    assert json.loads(out.read_text())["inputs"]["input_ids"]["role"] == "from ids.npz"


@pytest.mark.parametrize(("arrays", "expected"), [
    ({"input_idz": np.zeros((1, 2), np.int64)},
     "'input_idz' is not an input of the model (its inputs: input_ids: int64 [batch, seq]; attention_mask: "),
    ({"input_ids": np.zeros((1, 2), np.int32)}, "input 'input_ids' is int32 in the file, the model expects int64"),
    ({"input_ids": np.zeros(2, np.int64)}, "input 'input_ids' has shape [2] in the file, the model expects [batch, seq]"),
    ({"input_ids": np.zeros((1, 2), np.int64), "attention_mask": np.ones((1, 3), np.int64)},
     "inputs 'input_ids' and 'attention_mask' disagree on seq (2 vs 3)"),
], ids=["unknown-name", "dtype", "shape", "dim-conflict"])
def test_feeds_file_errors(tmp_path, arrays, expected):
    path = _text_model(tmp_path / "text.onnx")
    np.savez(tmp_path / "f.npz", **arrays)
    p = run_cli("run", path, "--compare", "none", "--feeds", str(tmp_path / "f.npz"))
    assert p.returncode == cli.EXIT_ERROR
    assert expected in p.stderr and "Traceback" not in p.stderr


def test_feeds_file_against_dim_and_missing_file(tmp_path, capsys):
    path = _text_model(tmp_path / "text.onnx")
    np.savez(tmp_path / "f.npz", input_ids=np.zeros((1, 2), np.int64))
    assert cli.main(["run", path, "--compare", "none", "--feeds", str(tmp_path / "f.npz"), "--dim", "seq=3"]) == 1
    assert "input 'input_ids' has seq=2, but --dim seq=3" in capsys.readouterr().err
    assert cli.main(["run", path, "--compare", "none", "--feeds", str(tmp_path / "none.npz")]) == 1
    assert "none.npz: no such file" in capsys.readouterr().err


# ---------------------------------------------------------------- strict command line


def test_unknown_dim_is_a_usage_error_listing_the_dims(tmp_path):
    p = run_cli("run", "--dim", "bach=3", "--compare", "none")
    assert p.returncode == cli.EXIT_USAGE
    assert "no input of the model has a symbolic dimension named 'bach' (the model's symbolic dimensions: batch)" \
        in p.stderr
    p = run_cli("run", _text_model(tmp_path / "text.onnx"), "--dim", "sequence=3", "--compare", "none")
    assert p.returncode == cli.EXIT_USAGE and "symbolic dimensions: batch, seq)" in p.stderr
    fixed = _model(tmp_path / "fixed.onnx", [helper.make_node("Abs", ["x"], ["y"])],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    p = run_cli("run", fixed, "--dim", "n=3", "--compare", "none")
    assert p.returncode == cli.EXIT_USAGE and "(the model has none)" in p.stderr


def test_kernels_filter_without_match_fails(capsys):
    regs = olc_core.registered_kernels()
    assert cli.main(["kernels", "--op", "NoSuchOp"]) == cli.EXIT_ERROR
    captured = capsys.readouterr()
    assert captured.out == "" and "no registered kernel matches op 'NoSuchOp'" in captured.err
    assert cli.main(["kernels", "--json", "--family", "no-such-family"]) == cli.EXIT_ERROR
    captured = capsys.readouterr()
    assert json.loads(captured.out) == [] and "family 'no-such-family'" in captured.err
    if regs:
        assert "installed families: " in captured.err
        op = regs[0].op_type
        assert cli.main(["kernels", "--op", op.lower() + "x"]) == cli.EXIT_ERROR
        hint = capsys.readouterr().err.partition("(did you mean ")[2]
        assert op in hint.rstrip("?)\n").replace(" or ", ", ").split(", ")
        assert cli.main(["kernels", "--op", op.upper()]) == cli.EXIT_OK  # any case matches


def test_long_reasons_move_under_the_table():
    notes: list[str] = []
    long_reason = "kernel_a covers opset 1-12, the model uses 17; kernel_b: input 0 has type int32, kernel accepts " \
                  "float32, float64, float16, bfloat16"
    table = cli._format_table(["node", "op", "reason"],
                              [["n1", "MatMul", long_reason], ["n2", "Abs", "short"], ["n3", "MatMul", long_reason]],
                              width=80, notes=notes)
    lines = table.splitlines()
    assert notes == [long_reason]
    assert max(len(line) for line in lines) <= 80
    assert lines[2].startswith("n1 ") and lines[2].endswith("... [1]") and lines[4].endswith("... [1]")
    assert lines[3].split() == ["n2", "Abs", "short"]
    assert cli._format_notes(notes, 80).replace("\n    ", " ") == f"[1] {long_reason}"


def test_fallback_warning_is_printed_once_in_the_commands_words():
    p = run_cli("run", "--compare", "none", "--repeat", "0", env={"OLC_DISABLE_PLUGIN_AUTOLOAD": "1"})
    assert p.returncode == 0, p.stderr
    warnings = [line for line in p.stderr.splitlines() if "fallback" in line]
    assert warnings == ["olc: warning: 14 of 14 nodes run on the onnx.reference fallback: Add x2, Tanh x2, Abs x1, "
                        "Sqrt x1, Neg x1, 7 other op types (--strict refuses them; the plan says why)"]
    assert "Session(strict=True)" not in p.stderr
    assert max(len(line) for line in p.stdout.splitlines()) <= cli.TABLE_WIDTH


def test_plan_lists_subgraph_nodes_under_their_node(tmp_path):
    then_g = helper.make_graph([helper.make_node("Identity", ["x"], ["t"])], "then", [],
                               [helper.make_tensor_value_info("t", TensorProto.FLOAT, [4])])
    else_g = helper.make_graph([helper.make_node("Flatten", ["x"], ["e"], axis=0)], "else", [],
                               [helper.make_tensor_value_info("e", TensorProto.FLOAT, [1, 4])])
    graph = helper.make_graph(
        [helper.make_node("If", ["c"], ["y"], name="choose", then_branch=then_g, else_branch=else_g)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4]), helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    path, out_json = tmp_path / "if.onnx", tmp_path / "r.json"
    onnx.save(m, str(path))
    p = run_cli("run", str(path), "--compare", "none", "--json", str(out_json))
    assert p.returncode == 0, p.stderr
    plan = json.loads(out_json.read_text())["plan"]
    assert [(r["node"], r["kernel"], r["subgraph"]) for r in plan] == [
        ("choose", "olc_core::If", None),
        ("choose/then_branch/Identity_0", "olc_core::Identity", "choose/then_branch"),
        ("choose/else_branch/Flatten_0", "olc_core::Flatten", "choose/else_branch")]
    assert "their subgraphs: 2 of 2 nodes on olc kernels, 0 on the fallback" in p.stdout
    assert any(line.startswith("choose/else_branch/Flatten_0 ") for line in p.stdout.splitlines())


@pytest.mark.parametrize("runs,block", [(20, 5), (3, 1), (50, 8), (7, 3)])
@pytest.mark.parametrize("nfns", [2, 3])
def test_time_in_blocks_alternates_blocks_after_settle(runs, block, nfns, monkeypatch):
    """olc_core.compare.time_in_blocks (--compare's timing and the
    benchmark's): each fn runs `runs` times in blocks of at most `block`
    back-to-back runs, each block after settle(), the fns taking turns and
    the one that goes first rotating by round; one CPU time per block."""
    import olc_core.compare

    calls: list[str] = []
    monkeypatch.setattr(olc_core.compare, "settle", lambda: calls.append("|"))
    names = "abc"[:nfns]
    cpu: list[list[float]] = [[] for _ in names]
    samples = olc_core.compare.time_in_blocks([lambda n=n: calls.append(n) for n in names], runs, block, cpu)
    assert [len(s) for s in samples] == [runs] * nfns and all(t >= 0 for s in samples for t in s)
    blocks = "".join(calls).split("|")
    assert blocks[0] == "" and all(blocks[1:]), calls  # a settle before every block, the first included
    blocks = blocks[1:]
    assert all(len(set(b)) == 1 and len(b) <= block for b in blocks), blocks
    assert len(blocks[0]) == min(block, runs)
    rounds = [blocks[i:i + nfns] for i in range(0, len(blocks), nfns)]
    full = [r for r in rounds if len(r) == nfns]
    assert [r[0][0] for r in full] == [names[i % nfns] for i in range(len(full))], blocks
    assert all(sorted(b[0] for b in r) == list(names) for r in full), blocks
    assert [len(c) for c in cpu] == [sum(1 for b in blocks if b[0] == n) for n in names]


def _anon_model(path):
    # x [n, 3, ?] and z [n]: an unnamed dimension --dim cannot size.
    return _model(path, [helper.make_node("Abs", ["x"], ["y"], name="a"), helper.make_node("Neg", ["z"], ["w"], name="b")],
                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3, None]),
                   helper.make_tensor_value_info("z", TensorProto.FLOAT, ["n"])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
                   helper.make_tensor_value_info("w", TensorProto.FLOAT, None)])


def test_shape_sizes_unnamed_dimensions_and_binds_named_ones(tmp_path, capsys):
    path = _anon_model(tmp_path / "anon.onnx")
    out = tmp_path / "r.json"
    assert cli.main(["run", path, "--shape", "x=2,3,40", "--compare", "none", "--json", str(out)]) == 0
    inputs = json.loads(out.read_text())["inputs"]
    assert inputs["x"]["shape"] == [2, 3, 40] and inputs["z"]["shape"] == [2]  # n bound by x's shape


@pytest.mark.parametrize("args,pattern", [
    (["--shape", "q=1"], r"the model has no input 'q'"),
    (["--shape", "x=2,3"], r"2 sizes given, the input has rank 3"),
    (["--shape", "x=2,4,5"], r"axis 1 is 4, the model fixes it at 3"),
    (["--shape", "x=2,3,5", "--dim", "n=3"], r"axis 0 \(n\) is 2, but n is 3 elsewhere"),
    (["--shape", "x=2,3,5", "--shape", "z=4"], r"axis 0 \(n\) is 4, but n is 2 elsewhere"),
    (["--shape", "x=2,a,5"], r"not a comma-separated list of integers"),
    (["--shape", "x"], r"--shape expects INPUT=D0,D1"),
])
def test_shape_usage_errors(tmp_path, capsys, args, pattern):
    path = _anon_model(tmp_path / "anon.onnx")
    assert cli.main(["run", path, "--compare", "none", *args]) == cli.EXIT_USAGE
    assert re.search(pattern, capsys.readouterr().err)


def test_shape_of_an_input_from_feeds_is_refused(tmp_path, capsys):
    path = _anon_model(tmp_path / "anon.onnx")
    feeds = tmp_path / "f.npz"
    np.savez(feeds, x=np.ones((2, 3, 5), np.float32))
    assert cli.main(["run", path, "--compare", "none", "--feeds", str(feeds), "--shape", "x=2,3,5"]) == cli.EXIT_USAGE
    assert "that input comes from --feeds" in capsys.readouterr().err
