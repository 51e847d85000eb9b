"""tools/avx2_host.py: under it olc and numpy see an AVX2-only CPU, and a
command's exit status comes back; on machines without CPUID faulting it
says why and runs nothing."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("olc_core")

TOOL = Path(__file__).resolve().parents[1] / "tools" / "avx2_host.py"
_spec = importlib.util.spec_from_file_location("avx2_host", TOOL)
avx2_host = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(avx2_host)
WHY = avx2_host.unsupported()


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(TOOL), *args], capture_output=True, text=True, timeout=300)


@pytest.mark.skipif(WHY is not None, reason=f"avx2_host: {WHY}")
def test_olc_and_numpy_see_avx2_only():
    p = run("--check")
    assert p.returncode == 0, p.stderr
    assert "olc detected level: avx2" in p.stdout, p.stdout
    assert "numpy sees AVX512F: False" in p.stdout, p.stdout


@pytest.mark.skipif(WHY is not None, reason=f"avx2_host: {WHY}")
def test_command_runs_masked_and_keeps_its_status(tmp_path):
    script = tmp_path / "probe.py"
    script.write_text("import sys, olc_core\n"
                      "features = olc_core.simd.detected_cpu_features()\n"
                      "sys.exit(3 if features['avx2'] and not features['avx512f'] else 4)\n")
    assert run("--", sys.executable, str(script)).returncode == 3


@pytest.mark.skipif(WHY is None, reason="this machine can run the tool")
def test_refuses_with_a_reason():
    p = run("--check")
    assert p.returncode == 2 and "avx2_host:" in p.stderr
