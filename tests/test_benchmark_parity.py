"""tools/benchmark_parity.py: the report's structure in --quick mode (not timing values)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import olc_core.compare
from olc_core.compare import SETTLE_MAX_S

pytest.importorskip("onnxruntime")
pytest.importorskip("olc_core")

TOOL = Path(__file__).resolve().parents[1] / "tools" / "benchmark_parity.py"


def run_tool(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], dict, str]:
    out_json, out_md = tmp_path / "report.json", tmp_path / "report.md"
    p = subprocess.run([sys.executable, str(TOOL), "--quick", "--min-time", "0.005", "--json", str(out_json),
                        "--markdown", str(out_md), *args], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    return p, json.loads(out_json.read_text()), out_md.read_text()


def test_quick_unary_report_structure(tmp_path):
    p, report, md = run_tool(tmp_path, "--ops", "Abs,Exp", "--sizes", "4096", "--threads", "1")
    env = report["environment"]
    for key in ("cpu", "simd_level", "versions", "threads", "python"):
        assert key in env
    assert env["versions"]["onnxruntime"] and env["threads"] == [1]
    cases = report["cases"]
    assert [(c["op"], c["size"], c["threads"]) for c in cases] == [("Abs", 4096, 1), ("Exp", 4096, 1)]
    for c in cases:
        assert c["suite"] == "unary" and c["inputs"][0] == {"shape": [4096], "dtype": "float32", "constant": False,
                                                              "generator": c["inputs"][0]["generator"]}
        assert c["status"] in ("ok", "fallback", "wrong-kernel", "mismatch", "error")
        if c["status"] == "ok":
            # Raw samples kept, paired, and the ratio is ort/olc of the medians.
            assert len(c["olc_ns"]) == len(c["ort_ns"]) == c["samples"] >= 5
            assert all(isinstance(t, int) and t > 0 for t in c["olc_ns"] + c["ort_ns"])
            assert c["ratio"] == pytest.approx(c["ort_median_ns"] / c["olc_median_ns"])
            assert f"olc_elementwise::{c['op']}" in c["kernel_usage"]
            # One thread: per block, the calling thread's CPU time per run, and its ratio.
            assert len(c["olc_cpu_ns"]) == len(c["ort_cpu_ns"]) >= 1
            assert c["cpu_ratio"] == pytest.approx(c["ort_cpu_median_ns"] / c["olc_cpu_median_ns"])
        else:
            assert c["detail"]
    assert set(report["summary"]) == {"unary"}
    assert {"median_ratio", "min_ratio", "cases", "timed"} <= set(report["summary"]["unary"])
    assert any(g["name"].startswith("unary median ratio") for g in report["gates"])
    assert not any(g["enforced"] for g in report["gates"])  # --quick does not enforce
    # Markdown: the table header and one row per case.
    assert "| suite | op | size | threads | olc µs | ort µs | ratio | status |" in md
    assert sum(1 for line in md.splitlines() if line.startswith("| unary | ")) == 2
    assert "## Summary" in md and "## Gates" in md
    if report["summary"]["unary"]["timed"]:
        assert report["summary"]["unary"]["cpu_cases"] == report["summary"]["unary"]["timed"]
        assert "one thread, thread CPU time" in md
    assert "| unary | Abs | 4096 | 1 |" in p.stdout
    # The ISA: the level each case ran at, the host's features, the probes.
    import olc_core

    assert env["detected_simd_level"] in olc_core.SIMD_LEVELS
    assert "sse2" in env["cpu_features"] or env["machine"] not in ("x86_64", "AMD64")
    assert set(env["cpu_features_in_force"]) <= set(env["cpu_features"])
    assert env["host"]["copy_gbps"]["1"] > 0
    for c in cases:
        assert c["simd_level"] == env["simd_level"]
        if c["status"] == "ok":
            # Abs reads and writes 4096 float32: 32 KiB per run.
            assert c["bytes"] == 2 * 4096 * 4
            assert c["olc_gbps"] == pytest.approx(c["bytes"] / c["olc_median_ns"])
            # 32 KiB: below the footprint probes, no bandwidth efficiency.
            assert "bw_efficiency" not in c and c["olc_gbps"] > 0
            assert "flops" not in c  # the unary cases give no flops
    assert "| level | olc GFLOP/s | ort GFLOP/s | olc GB/s |" in md and "Probes: float32 FMA peak" in md


def test_quick_overhead_report_structure(tmp_path):
    _, report, md = run_tool(tmp_path, "--suite", "overhead", "--threads", "1")
    names = [c["name"] for c in report["cases"]]
    assert names == ["one_node", "chain100"]
    one, chain = report["cases"]
    assert chain["nodes"] == 100 and one["nodes"] == 1
    if one["status"] == chain["status"] == "ok":
        assert one["olc_over_ort"] == pytest.approx(one["olc_median_ns"] / one["ort_median_ns"])
        assert chain["olc_per_node_ns"] == pytest.approx((chain["olc_median_ns"] - one["olc_median_ns"]) / 99)
        gate_names = [g["name"] for g in report["gates"]]
        assert any("one-node" in n for n in gate_names) and any("per node" in n for n in gate_names)
    assert "| overhead case |" in md


def test_family_case_function(tmp_path, monkeypatch):
    # A family's case list, loaded by --cases MODULE:FUNC.
    (tmp_path / "my_cases.py").write_text(
        "def benchmark_cases(sizes):\n"
        "    return [{'op': 'Neg', 'opset': 13, 'inputs': [{'shape': [n], 'dtype': 'float32'}],\n"
        "             'expected_kernel': 'olc_elementwise::Neg', 'name': f'Neg {n}'} for n in sizes]\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])))
    _, report, _ = run_tool(tmp_path, "--cases", "my_cases:benchmark_cases", "--sizes", "8,16", "--threads", "1")
    assert [(c["name"], c["size"], c["opset"], c["suite"]) for c in report["cases"]] == [
        ("Neg 8", 8, 13, "my_cases"), ("Neg 16", 16, 13, "my_cases")]
    assert report["config"]["case_sources"] == {"my_cases:benchmark_cases": "my_cases:benchmark_cases"}


FAMILY_MODULE = '''
import numpy as np
from onnx import helper, numpy_helper, TensorProto

def _chain():
    # Two nodes and an initializer: x -> Abs -> t -> Neg -> y (the weight is unused by the
    # chain; t is an output too, so the two nodes are not fused).
    g = helper.make_graph(
        [helper.make_node("Abs", ["x"], ["t"]), helper.make_node("Neg", ["t"], ["y"])], "chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("t", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.ones(2, np.float32), "w")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 9
    return m

def benchmark_cases(sizes):
    return [
        {"op": "Neg", "opset": 13, "inputs": [{"shape": [8], "dtype": "float32", "constant": True}],
         "expected_kernel": "olc_elementwise::Neg", "name": "Neg const", "group": "a"},
        {"op": "Abs/Neg", "model": _chain, "inputs": [{"shape": [4], "dtype": "float32"}],
         "expected_kernel": "olc_elementwise::Neg", "name": "chain", "group": "b"},
    ]

def benchmark_gates():
    return [{"name": "all at least zero", "group": None, "median_at_least": 0.0, "min_at_least": 0.0},
            {"name": "group b impossibly fast", "group": "b", "median_at_least": None, "min_at_least": 1e9},
            {"name": "group c, none ran", "group": "c", "median_at_least": None, "min_at_least": 1e9}]

def benchmark_extras(threads):
    return [{"name": "answer", "value": 42.0, "unit": "units", "at_least": 40, "detail": f"threads {threads}"},
            {"name": "too small", "value": 1.0, "unit": "x", "at_least": 2.0}]
'''


def test_family_gates_extras_constants_and_models(tmp_path, monkeypatch):
    (tmp_path / "fam_cases.py").write_text(FAMILY_MODULE)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])))
    out_json = tmp_path / "r.json"
    p = subprocess.run([sys.executable, str(TOOL), "--cases", "fam_cases", "--threads", "1", "--min-time", "0.005",
                        "--json", str(out_json), "--enforce"], capture_output=True, text=True, timeout=600)
    report = json.loads(out_json.read_text())
    const, chain = report["cases"]
    # The constant input is an initializer: the model has no graph input, so the
    # node is folded at construction and the case says so rather than timing nothing.
    assert const["inputs"][0]["constant"] is True and const["nodes"] == 1
    assert const["status"] == "folded" and "olc_elementwise::Neg" in const["detail"], const
    assert chain["status"] == "ok" and chain["nodes"] == 2 and chain["group"] == "b"
    gates = {g["name"]: g for g in report["gates"]}
    assert gates["all at least zero"]["passed"]
    assert not gates["group b impossibly fast"]["passed"]
    assert "1 cases" in gates["group b impossibly fast"]["detail"]
    # A gate none of whose cases ran (left out by --ops, --sizes, --threads) is skipped, not failed.
    assert gates["group c, none ran"]["skipped"] and gates["group c, none ran"]["passed"]
    assert "SKIP group c, none ran" in p.stdout
    assert gates["answer >= 40 units"]["passed"] and not gates["too small >= 2.0 x"]["passed"]
    assert [x["name"] for x in report["extras"]] == ["answer", "too small"]
    assert report["extras"][0]["detail"] == "threads [1]"
    # Failed gates under --enforce: exit 1, each named on stderr.
    assert p.returncode == 1
    assert "gate failed: group b impossibly fast" in p.stderr and "gate failed: too small" in p.stderr


def test_groups_filter_keeps_those_cases_and_skips_other_gates(tmp_path, monkeypatch):
    (tmp_path / "fam_cases.py").write_text(FAMILY_MODULE)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])))
    out_json = tmp_path / "r.json"
    p = subprocess.run([sys.executable, str(TOOL), "--cases", "fam_cases", "--groups", "a", "--threads", "1",
                        "--min-time", "0.005", "--json", str(out_json), "--enforce"],
                       capture_output=True, text=True, timeout=600)
    report = json.loads(out_json.read_text())
    assert [c["name"] for c in report["cases"]] == ["Neg const"]
    gates = {g["name"]: g for g in report["gates"]}
    # Group b's gate would fail if its case ran; left out, it is skipped.
    assert gates["group b impossibly fast"]["skipped"] and gates["group b impossibly fast"]["passed"]
    assert "--groups" in gates["group b impossibly fast"]["detail"]
    # A narrowed run measures no extras (they time their own work for seconds).
    assert report["extras"] == []
    assert "gate failed: group b impossibly fast" not in p.stderr and "gate failed: too small" not in p.stderr


def load_tool():
    import importlib.util

    spec = importlib.util.spec_from_file_location("benchmark_parity_under_test", TOOL)
    bp = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = bp  # its dataclasses look their module up
    spec.loader.exec_module(bp)
    return bp


@pytest.mark.skipif(not os.path.exists("/proc/self/task"), reason="needs Linux /proc")
def test_settle_waits_for_spinning_threads():
    """The gap between blocks lasts until other threads stop using CPU (a
    spinning worker pool would otherwise steal a core from the next runtime)."""
    import threading
    import time

    spin_s = 0.3
    done = {}

    def spin():
        end = time.perf_counter() + spin_s
        while time.perf_counter() < end:
            pass
        done["t"] = time.perf_counter()

    th = threading.Thread(target=spin)
    th.start()
    olc_core.compare.settle()
    returned = time.perf_counter()
    th.join()
    assert returned >= done["t"], "settle returned while another thread was still spinning"
    start = time.perf_counter()
    olc_core.compare.settle()
    assert time.perf_counter() - start < SETTLE_MAX_S  # idle process: the plain gap


def test_every_block_starts_after_settle(monkeypatch):
    """Each timed block, the first one after the probe included, begins
    after a settle(): the other runtime's spinning workers must not share
    the cores with it."""
    bp = load_tool()
    events: list[str] = []
    monkeypatch.setattr(olc_core.compare, "settle", lambda: events.append("settle"))

    def run(tag: str):
        def f() -> None:
            events.append(tag)
        return f

    monkeypatch.setattr(bp, "BLOCK_NS", 1)  # one-run blocks
    a, b = bp.timed_pairs(run("a"), run("b"), 0.0, min_pairs=4, warmup=0)
    assert len(a) == len(b) == 4
    # With min_time 0 the probe is three pairs; the timed part follows it.
    assert events[:6] == ["a", "b"] * 3
    timed = events[6:]
    assert timed.count("a") == timed.count("b") == 4
    runs = [i for i, e in enumerate(timed) if e != "settle"]
    assert all(i > 0 and timed[i - 1] == "settle" for i in runs), timed


def test_thread_cpu_time_per_run_and_its_ratio(monkeypatch):
    """At one thread the runner records each block's CPU time per run of
    the calling thread: a runtime that burns twice the CPU of the other per
    run gets a CPU ratio near 0.5 whatever the wall clock did; at two
    threads (work on other threads) nothing is recorded."""
    bp = load_tool()
    monkeypatch.setattr(olc_core.compare, "settle", lambda: None)

    def burn(n: int):
        def f() -> int:
            return sum(range(n))
        return f

    runner = type("FakeRunner", (), {"run_olc": staticmethod(burn(40_000)), "run_ort": staticmethod(burn(20_000))})()
    rec = bp.timed_runner(runner, 0.05, min_pairs=8, threads=1)
    assert len(rec["olc_cpu_ns"]) == len(rec["ort_cpu_ns"]) >= 1
    assert all(t > 0 for t in rec["olc_cpu_ns"] + rec["ort_cpu_ns"])
    assert 0.3 < rec["cpu_ratio"] < 0.8, rec["cpu_ratio"]
    rec2 = bp.timed_runner(runner, 0.01, min_pairs=4, threads=2)
    assert "cpu_ratio" not in rec2 and "olc_cpu_ns" not in rec2
    # The summary gives the one-thread cases' median and minimum.
    case = {"suite": "s", "status": "ok", "name": "n", "size": 1, "threads": 1, **rec}
    summary, _ = bp.summarize([case, {**case, "threads": 2, "cpu_ratio": None}], set())
    assert summary["s"]["cpu_cases"] == 1 and summary["s"]["cpu_median_ratio"] == pytest.approx(rec["cpu_ratio"])


@pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="needs Linux /proc/stat")
def test_interference_counts_other_processes_not_this_one():
    """CPU that another process burns while a case is timed shows up in
    other_cpus; this process's own busy loop does not."""
    import subprocess
    import sys
    import time

    bp = load_tool()

    def measure(busy) -> dict:
        before, start = bp._machine_cpu_s(), time.perf_counter()
        busy()
        return bp._interference(before, bp._machine_cpu_s(), time.perf_counter() - start)

    def spin_here() -> None:
        end = time.perf_counter() + 0.5
        while time.perf_counter() < end:
            pass

    def spin_elsewhere() -> None:
        child = subprocess.Popen([sys.executable, "-c",
                                  "import time\nend = time.perf_counter() + 0.6\nwhile time.perf_counter() < end: pass"])
        time.sleep(0.5)
        child.wait()

    own = measure(spin_here)
    other = measure(spin_elsewhere)
    assert set(own) == {"other_cpus", "steal_cpus"}
    assert other["other_cpus"] > own["other_cpus"] + 0.4, (own, other)
    assert bp._interference(None, bp._machine_cpu_s(), 1.0) == {}


def test_report_lists_disturbed_cases():
    bp = load_tool()
    env = {"cpu": "x", "cpu_affinity": 2, "simd_level": "avx512", "python": "3",
           "versions": {"olc-core": "0", "onnxruntime": "0"}}
    case = {"suite": "s", "name": "Add", "size": 4, "threads": 2, "status": "ok", "olc_median_ns": 1e3,
            "ort_median_ns": 1e3, "ratio": 1.0}
    quiet = dict(case, other_cpus=0.02, steal_cpus=0.0)
    busy = dict(case, name="Mul", other_cpus=0.6, steal_cpus=0.01)
    text = bp.markdown({"environment": env, "cases": [quiet, busy], "summary": {}, "gates": []})
    disturbed = text.split("## Disturbed cases", 1)[1].split("## Summary", 1)[0]
    assert "Mul size 4 threads 2: ratio 1.00, other processes 0.60 CPUs" in disturbed
    assert "Add" not in disturbed
    assert "## Disturbed cases" not in bp.markdown({"environment": env, "cases": [quiet], "summary": {}, "gates": []})


def test_disturbed_case_timed_again_and_least_disturbed_try_kept(monkeypatch):
    """A case timed while other processes or the hypervisor took CPU is timed
    again until a try is quiet (at most --retime more); the least disturbed
    try is kept even when another try had a better ratio, and every try is
    recorded."""
    import argparse

    bp = load_tool()
    tries = iter([
        {"status": "ok", "ratio": 2.0, "other_cpus": 0.5, "steal_cpus": 0.0},
        {"status": "ok", "ratio": 0.9, "other_cpus": 0.0, "steal_cpus": 0.3},
        {"status": "ok", "ratio": 1.1, "other_cpus": 0.01, "steal_cpus": 0.02},
        {"status": "ok", "ratio": 5.0, "other_cpus": 0.0, "steal_cpus": 0.0},
    ])
    monkeypatch.setattr(bp, "run_case", lambda case, threads, args, host=None: dict(next(tries)))
    rec = bp.run_case_settled(None, 1, argparse.Namespace(retime=3))
    assert rec["ratio"] == 1.1 and [t["ratio"] for t in rec["tries"]] == [2.0, 0.9, 1.1]
    assert next(tries)["ratio"] == 5.0  # no try after the quiet one

    tries = iter([{"status": "ok", "ratio": 1.0, "other_cpus": 0.4, "steal_cpus": 0.0},
                  {"status": "ok", "ratio": 3.0, "other_cpus": 0.6, "steal_cpus": 0.0}])
    rec = bp.run_case_settled(None, 1, argparse.Namespace(retime=1))
    assert rec["ratio"] == 1.0 and len(rec["tries"]) == 2  # still disturbed: the lesser of the two

    tries = iter([{"status": "ok", "ratio": 1.0, "other_cpus": 0.4, "steal_cpus": 0.0}])
    rec = bp.run_case_settled(None, 1, argparse.Namespace(retime=0))
    assert rec["ratio"] == 1.0 and "tries" not in rec


def test_efficiency_against_the_level_that_ran():
    """GFLOP/s over the FMA peak of the case's level times its threads; GB/s
    over the copy bandwidth of its thread count."""
    bp = load_tool()
    host = {"fma_peak_gflops": {"avx2": 100.0, "avx512": 200.0}, "copy_gbps": {"1": 20.0, "2": 30.0}}
    case = bp.Case(suite="s", op="MatMul", inputs=[], flops=2e9, bytes=3e7)
    rec = {"olc_median_ns": 1e7, "threads": 2, "simd_level": "avx2"}  # 10 ms
    eff = bp.efficiency(rec, case, host)
    assert eff["olc_gflops"] == pytest.approx(200.0) and eff["peak_gflops"] == pytest.approx(200.0)
    assert eff["flops_efficiency"] == pytest.approx(1.0)
    # A host without footprint probes: the single probe of the thread count.
    assert eff["olc_gbps"] == pytest.approx(3.0) and eff["bw_efficiency"] == pytest.approx(0.1)
    # With the table: the copy of the power of two nearest half the bytes
    # (15 MB -> 16 MiB), at the case's thread count.
    host["copy_gbps_at"] = {f"2:{16 << 20}": 60.0, f"1:{16 << 20}": 6.0}
    eff = bp.efficiency(rec, case, host)
    assert eff["copy_gbps"] == 60.0 and eff["bw_efficiency"] == pytest.approx(0.05)
    # Below the footprint floor: no bandwidth efficiency, the rate still given.
    small = bp.efficiency(rec, bp.Case(suite="s", op="MatMul", inputs=[], bytes=3e6), host)
    assert small["olc_gbps"] == pytest.approx(0.3) and "bw_efficiency" not in small
    rec["simd_level"] = "avx512"
    assert bp.efficiency(rec, case, host)["flops_efficiency"] == pytest.approx(0.5)
    rec["simd_level"] = "scalar"  # no probe for the level: the rate without an efficiency
    assert "flops_efficiency" not in bp.efficiency(rec, case, host)
    # onnxruntime's rates: against the host's best peak (it picks its own
    # level) and the same copy bandwidth.
    rec.update(simd_level="avx2", ort_median_ns=2e7)
    eff = bp.efficiency(rec, case, host)
    assert eff["ort_gflops"] == pytest.approx(100.0) and eff["ort_flops_efficiency"] == pytest.approx(0.25)
    assert eff["ort_gbps"] == pytest.approx(1.5) and eff["ort_bw_efficiency"] == pytest.approx(1.5 / 60.0)
    # No bytes given: inputs plus outputs.
    case2 = bp.Case(suite="s", op="Abs", inputs=[])
    eff2 = bp.efficiency({"olc_median_ns": 1e3, "threads": 1, "input_bytes": 400, "output_bytes": 400}, case2, host)
    assert eff2["bytes"] == 800 and eff2["olc_gbps"] == pytest.approx(0.8) and "olc_gflops" not in eff2


def test_gate_marks_slow_cases_where_onnxruntime_is_at_the_limit():
    """A case under a gate's floor names onnxruntime's share of the FMA peak
    or of the copy bandwidth when that share is at least AT_LIMIT; the
    verdict itself does not change."""
    bp = load_tool()
    base = {"suite": "s", "group": "g", "status": "ok", "threads": 1}
    cases = [{**base, "name": "gemm", "ratio": 0.9, "ort_flops_efficiency": 0.93},
             {**base, "name": "copy", "ratio": 0.8, "ort_bw_efficiency": 0.88, "ort_flops_efficiency": 0.1},
             {**base, "name": "slow", "ratio": 0.7, "ort_flops_efficiency": 0.5},
             {**base, "name": "fast", "ratio": 1.5, "ort_flops_efficiency": 0.99}]
    gate = bp._family_gate("s", {"name": "n", "group": "g", "min_at_least": 0.95}, cases)
    assert not gate["passed"]
    assert "gemm/1t 0.90 (ort at 93 % of the FMA peak)" in gate["detail"]
    assert "copy/1t 0.80 (ort at 88 % of the copy bandwidth)" in gate["detail"]
    assert "slow/1t 0.70," not in gate["detail"] and gate["detail"].endswith("slow/1t 0.70")
    assert "fast" not in gate["detail"].split("below:")[1]


def test_footprint_probe_is_taken_once_per_thread_count_and_size(monkeypatch):
    """An unseen footprint is probed once (a copy of its bucket's bytes on
    its threads) and kept in the host table the report carries."""
    bp = load_tool()
    calls = []
    monkeypatch.setattr(bp, "settle", lambda: None)
    monkeypatch.setattr(bp, "copy_bandwidth", lambda t, n, reps=5: calls.append((t, n)) or 40.0)
    host = {"copy_gbps": {"1": 20.0}, "copy_gbps_at": {}}
    assert bp.footprint_bandwidth(host, 1, 32 << 20) == 40.0
    assert bp.footprint_bandwidth(host, 1, 33 << 20) == 40.0  # same bucket: no second copy
    assert bp.footprint_bandwidth(host, 2, 32 << 20) == 40.0
    assert calls == [(1, 16 << 20), (2, 16 << 20)]
    assert host["copy_gbps_at"] == {f"1:{16 << 20}": 40.0, f"2:{16 << 20}": 40.0}
    assert bp.footprint_bandwidth(host, 1, 1 << 20) is None


def test_copy_bandwidth_probe_measures_a_real_copy():
    bp = load_tool()
    for threads in (1, 2):
        assert 0.1 < bp.copy_bandwidth(threads, 8 << 20, reps=2) < 10_000


def test_composite_suite_takes_its_groups_and_their_gates(monkeypatch):
    import types

    bp = load_tool()

    def family(cases, gates):
        return types.SimpleNamespace(benchmark_cases=lambda: cases, benchmark_gates=lambda: gates,
                                     __name__="fam")

    case = {"op": "Conv", "inputs": [{"shape": [4], "dtype": "float32"}]}
    fams = {"a": family([dict(case, group="x"), dict(case, group="y", op="Gemm")],
                        [{"name": "x gate", "group": "x", "median_at_least": 1.0},
                         {"name": "y gate", "group": "y", "median_at_least": 1.0},
                         {"name": "whole suite", "group": None, "median_at_least": 1.0}]),
            "b": family([dict(case, group="z", op="MaxPool")], [{"name": "z gate", "group": "z"}])}
    monkeypatch.setattr(bp, "family_module", lambda name: fams.get(name))
    monkeypatch.setattr(bp, "COMPOSITE_SUITES", {"combo": [("a", frozenset({"x"})), ("b", frozenset({"z"})),
                                                           ("missing", frozenset({"w"}))]})
    cases, source, gates = bp.composite_cases("combo", [4096])
    assert [(c.op, c.group, c.suite) for c in cases] == [("Conv", "x", "combo"), ("MaxPool", "z", "combo")]
    # only the gates of the groups taken: not another group's, not a gate over a family's whole suite
    assert [g["name"] for g in gates.benchmark_gates()] == ["x gate", "z gate"]
    assert "groups x" in source and "groups z" in source

