"""SIMD detection against /proc/cpuinfo, and the OLC_SIMD / simd_cap caps."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from olc_core import _native, simd

IS_X86_64 = platform.machine().lower() in ("x86_64", "amd64")

# olc feature name -> /proc/cpuinfo flag (Linux spells SSE3 "pni").
CPUINFO_FLAG = {
    "sse2": "sse2",
    "sse3": "pni",
    "ssse3": "ssse3",
    "sse4_1": "sse4_1",
    "sse4_2": "sse4_2",
    "avx": "avx",
    "avx2": "avx2",
    "fma": "fma",
    "f16c": "f16c",
    "avx512f": "avx512f",
    "avx512bw": "avx512bw",
    "avx512vl": "avx512vl",
    "avx512dq": "avx512dq",
    "avx512_bf16": "avx512_bf16",
    "avx512_fp16": "avx512_fp16",
    "avx512_vnni": "avx512_vnni",
    "amx_tile": "amx_tile",
    "amx_int8": "amx_int8",
    "amx_bf16": "amx_bf16",
    "avx_vnni": "avx_vnni",
}


def _cpuinfo_flags() -> set[str] | None:
    path = Path("/proc/cpuinfo")
    if not path.exists():
        return None
    for line in path.read_text().splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return None


CPUINFO = _cpuinfo_flags()
needs_cpuinfo = pytest.mark.skipif(CPUINFO is None or not IS_X86_64, reason="needs Linux /proc/cpuinfo on x86-64")


def _run(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if k not in ("OLC_SIMD",)}
    full_env.update(env)
    return subprocess.run([sys.executable, "-c", code], env=full_env, capture_output=True, text=True, timeout=120)


@pytest.fixture(autouse=True)
def _restore_cap():
    previous = _native.simd_cap()
    yield
    _native.set_simd_cap(previous)


def test_feature_names_cover_every_abi_bit():
    assert set(simd.detected_cpu_features()) == set(CPUINFO_FLAG)
    assert simd.SIMD_LEVELS == ("scalar", "avx2", "avx512")


@needs_cpuinfo
@pytest.mark.parametrize("feature", sorted(CPUINFO_FLAG))
def test_feature_agrees_with_cpuinfo(feature):
    # Linux lists a flag only when the CPU has it and the kernel enables its
    # state, which is what olc's cpuid + xgetbv check reports too.
    assert simd.detected_cpu_features()[feature] == (CPUINFO_FLAG[feature] in CPUINFO)


@needs_cpuinfo
def test_detected_level_follows_cpuinfo():
    f = CPUINFO
    avx2 = {"avx", "avx2", "fma", "f16c"} <= f
    avx512 = avx2 and {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= f
    expected = "avx512" if avx512 else "avx2" if avx2 else "scalar"
    assert simd.detected_simd_level() == expected


def test_level_implies_features():
    feats = simd.detected_cpu_features()
    level = simd.detected_simd_level()
    if level in ("avx2", "avx512"):
        assert all(feats[k] for k in ("avx", "avx2", "fma", "f16c"))
    if level == "avx512":
        assert all(feats[k] for k in ("avx512f", "avx512bw", "avx512vl", "avx512dq"))
    if IS_X86_64:
        assert feats["sse2"]


def test_uncapped_matches_detected():
    with simd.simd_cap(None):
        assert simd.simd_level() == simd.detected_simd_level()
        assert simd.cpu_features() == simd.detected_cpu_features()
        assert simd.current_cap() is None


def test_cap_scalar_keeps_only_sse():
    detected = simd.detected_cpu_features()
    before = simd.simd_level()  # OLC_SIMD may cap the whole run
    with simd.simd_cap("scalar") as level:
        assert level == "scalar" == simd.simd_level()
        feats = simd.cpu_features()
        sse = {"sse2", "sse3", "ssse3", "sse4_1", "sse4_2"}
        for name, present in feats.items():
            assert present == (detected[name] and name in sse), name
    assert simd.simd_level() == before


@pytest.mark.skipif(not IS_X86_64 or _native.detected_simd_level() < 1, reason="needs AVX2")
def test_cap_avx2_drops_avx512_and_amx():
    with simd.simd_cap("avx2"):
        assert simd.simd_level() == "avx2"
        feats = simd.cpu_features()
        assert feats["avx2"] and feats["fma"] and feats["f16c"]
        assert not any(v for k, v in feats.items() if k.startswith(("avx512", "amx")))
        # AVX-VNNI is VEX-encoded, an AVX2-level extension: the cap keeps it.
        assert feats["avx_vnni"] == simd.detected_cpu_features()["avx_vnni"]
        # The detected view ignores the cap.
        assert simd.detected_simd_level() != "scalar"
        assert simd.detected_cpu_features()["avx2"]


def test_cap_above_detected_has_no_effect():
    with simd.simd_cap("avx512"):
        assert simd.simd_level() == simd.detected_simd_level()


def test_cap_nests_and_restores():
    before = simd.current_cap()  # OLC_SIMD may cap the whole run
    with simd.simd_cap("avx2"):
        with simd.simd_cap("scalar"):
            assert simd.simd_level() == "scalar"
        assert simd.current_cap() == "avx2"
    assert simd.current_cap() == before


def test_cap_restored_after_exception():
    before = simd.current_cap()
    with pytest.raises(RuntimeError), simd.simd_cap("scalar"):
        raise RuntimeError("boom")
    assert simd.current_cap() == before


@pytest.mark.parametrize("bad", ["avx3", "sse4", "", 7])
def test_cap_rejects_bad_levels(bad):
    if bad == "":
        with simd.simd_cap(bad):  # empty means no cap, as in OLC_SIMD
            assert simd.current_cap() is None
        return
    with pytest.raises(ValueError), simd.simd_cap(bad):
        pass


def test_native_set_cap_validates():
    with pytest.raises(ValueError):
        _native.set_simd_cap(3)
    _native.set_simd_cap(-7)
    assert _native.simd_cap() == -1


_PROBE = (
    "import json; from olc_core import simd; "
    "print(json.dumps([simd.simd_level(), simd.current_cap(), simd.cpu_features()]))"
)


@pytest.mark.parametrize(
    ("value", "cap"),
    [("scalar", "scalar"), ("SSE2", "scalar"), (" Avx2 ", "avx2"), ("AVX512", "avx512"),
     ("native", None), ("", None)],
)  # fmt: skip
def test_env_cap(value, cap):
    proc = _run(_PROBE, OLC_SIMD=value)
    assert proc.returncode == 0, proc.stderr
    level, reported_cap, feats = json.loads(proc.stdout)
    assert reported_cap == cap
    order = simd.SIMD_LEVELS
    detected = simd.detected_simd_level()
    expected = detected if cap is None else order[min(order.index(cap), order.index(detected))]
    assert level == expected
    if cap == "scalar":
        assert not feats["avx"] and not feats["avx512f"]


def test_env_cap_can_be_overridden_at_run_time():
    code = (
        "from olc_core import simd; "
        "assert simd.simd_level() == 'scalar'; "
        "ctx = simd.simd_cap(None); ctx.__enter__(); "
        "print(simd.simd_level())"
    )
    proc = _run(code, OLC_SIMD="scalar")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == simd.detected_simd_level()


def test_bad_env_value_is_a_clear_error():
    proc = _run("import olc_core.simd", OLC_SIMD="avx9000")
    assert proc.returncode != 0
    assert "ValueError" in proc.stderr
    assert "OLC_SIMD='avx9000'" in proc.stderr
    for accepted in ("scalar", "avx2", "avx512", "native"):
        assert accepted in proc.stderr


def test_bad_env_value_does_not_crash_native():
    # The extension on its own (loaded without the package, whose import
    # raises) runs uncapped and reports the problem.
    code = (
        "import importlib.machinery as m, importlib.util as u, sys; "
        "spec = u.spec_from_file_location('olc_core._native', sys.argv[1], "
        "loader=m.ExtensionFileLoader('olc_core._native', sys.argv[1])); "
        "n = u.module_from_spec(spec); spec.loader.exec_module(n); "
        "print(n.simd_cap(), n.simd_level() == n.detected_simd_level()); "
        "print(n.simd_env_error())"
    )
    env = {k: v for k, v in os.environ.items() if k != "OLC_SIMD"}
    env["OLC_SIMD"] = "bogus"
    proc = subprocess.run(
        [sys.executable, "-c", code, _native.__file__], env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    first, second = proc.stdout.splitlines()
    assert first == "-1 True"
    assert "bogus" in second


def test_data_cache_bytes_matches_sysfs():
    """The core API's cache sizes (what kernels derive their defaults from)
    are the data and unified caches that `olc info` lists from sysfs."""
    from olc_core import cli

    listed = {c["level"]: (c["bytes"], c["shared_by"]) for c in cli._cpu_caches() if c["type"] != "Instruction"}
    for level in (1, 2, 3):
        assert _native.data_cache_bytes(level) == listed.get(level, (0, 1))
    assert _native.data_cache_bytes(0) == (0, 1)
    assert _native.data_cache_bytes(4) == (0, 1)
