"""tools/fuzz_models.py: counts of a tiny seeded run, and crashes and hangs reported with reproducers."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("olc_core")

TOOL = Path(__file__).resolve().parents[1] / "tools" / "fuzz_models.py"
SUMMARY = re.compile(r"models (\d+), refused at load (\d+), refused at run (\d+), ran (\d+), "
                     r"crashes (\d+), hangs (\d+)")


def fuzz(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], dict[str, int]]:
    p = subprocess.run([sys.executable, str(TOOL), "--out", str(tmp_path / "out"), *args],
                       capture_output=True, text=True, timeout=300)
    match = SUMMARY.search(p.stdout)
    assert match, p.stdout + p.stderr
    keys = ("models", "refused_load", "refused_run", "ran", "crashes", "hangs")
    return p, dict(zip(keys, map(int, match.groups())))


@pytest.fixture(scope="module")
def tool():
    sys.path.insert(0, str(TOOL.parent))
    try:
        import fuzz_models

        yield fuzz_models
    finally:
        sys.path.remove(str(TOOL.parent))


def test_seeded_run_counts_add_up(tmp_path):
    p, counts = fuzz(tmp_path, "--count", "50", "--seed", "3")
    assert p.returncode == 0, p.stdout + p.stderr
    assert counts["models"] == 50
    assert counts["refused_load"] + counts["refused_run"] + counts["ran"] == 50
    assert counts["crashes"] == counts["hangs"] == 0
    assert counts["ran"] > 0  # some mutants still run: the corpus is not refused wholesale
    assert not (tmp_path / "out").exists()


def test_worker_killed_by_a_signal_is_a_crash_with_a_reproducer(tmp_path):
    p, counts = fuzz(tmp_path, "--count", "4", "--seed", "0", "--self-test", "crash")
    assert p.returncode == 1
    assert counts["models"] == 4 and counts["crashes"] == 1 and counts["hangs"] == 0
    assert counts["refused_load"] + counts["refused_run"] + counts["ran"] == 3  # the worker was restarted
    assert "killed by signal SIGSEGV" in p.stdout
    out = tmp_path / "out"
    assert sorted(f.name for f in out.iterdir()) == ["crash-0-1.npz", "crash-0-1.onnx", "crash-0-1.txt"]
    report = (out / "crash-0-1.txt").read_text()
    assert "alone in a fresh worker: reproduces" in report
    assert "Segmentation fault" in report  # the worker's faulthandler output is kept


def test_silent_worker_is_a_hang(tmp_path):
    p, counts = fuzz(tmp_path, "--count", "3", "--seed", "0", "--self-test", "hang", "--time-limit", "1")
    assert p.returncode == 1
    assert counts["hangs"] == 1 and counts["crashes"] == 0 and counts["models"] == 3
    assert (tmp_path / "out" / "hang-0-1.onnx").is_file() and (tmp_path / "out" / "hang-0-1.npz").is_file()
    # The hung worker was stopped with SIGABRT first: faulthandler says where it was.
    assert "in run_case" in (tmp_path / "out" / "hang-0-1.txt").read_text()


def test_every_corpus_model_runs_unmutated(tool):
    import olc_core

    plugin = tool.register_test_kernels()
    try:
        for name, model in tool.build_corpus():
            feeds = tool.make_feeds(model, np.random.default_rng(0), mutate=False)
            assert tool.run_case(model.SerializeToString(), feeds, threads=1) == {"outcome": "ran"}, name
    finally:
        olc_core.unregister_plugin(plugin)


def test_cases_are_determined_by_seed_and_index(tool):
    corpus = tool.build_corpus()
    a, b = tool.make_case(corpus, 5, 17), tool.make_case(corpus, 5, 17)
    assert a[0] == b[0] and a[1] == b[1] and a[3] == b[3]
    assert a[2].keys() == b[2].keys()
    for key in a[2]:
        np.testing.assert_array_equal(a[2][key], b[2][key])


def test_feeds_round_trip_through_npz(tool, tmp_path):
    import ml_dtypes

    feeds = {"x": np.arange(3, dtype=np.float32), "b": np.ones(2, ml_dtypes.bfloat16)}
    tool.save_feeds(tmp_path / "f.npz", feeds)
    back = tool.load_feeds(tmp_path / "f.npz")
    assert back.keys() == feeds.keys() and back["b"].dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(back["x"], feeds["x"])
