#!/usr/bin/env python3
"""Runs a command as on an AVX2-only x86-64 host, on an AVX-512 machine.

    python tools/avx2_host.py [--check] [--] COMMAND [ARG ...]

OLC_SIMD caps olc alone; onnxruntime has no such switch, so on an AVX-512
host its AVX-512 kernels would be compared with olc's AVX2 ones. This tool
preloads tools/avx2_host/cpuid_avx2.c (compiled with the system C compiler
into build/avx2_host/ on first use) into the command: CPUID faults and
answers without the AVX-512, AMX and AVX-VNNI features, for olc,
onnxruntime's MLAS and numpy alike. Both runtimes then take their AVX2
paths on the same CPU, and the issues' AVX2-host gates can be measured
against onnxruntime directly:

    python tools/avx2_host.py -- python tools/benchmark_parity.py --suite matmul

The CPU is still the AVX-512 one (its caches, its AVX2 throughput): the
ratios are those of an AVX2 host with this core, not of a given AVX2 CPU.
Needs Linux on x86-64 with CPUID faulting (``cpuid_fault`` in
/proc/cpuinfo: Intel CPUs, and most hypervisors on them). ``--check``
prints the level olc detects and the AVX-512/AVX2 features numpy sees.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "tools" / "avx2_host" / "cpuid_avx2.c"
LIBRARY = ROOT / "build" / "avx2_host" / "cpuid_avx2.so"

CHECK = """
import olc_core
try:
    from numpy._core._multiarray_umath import __cpu_features__ as npf
except ImportError:
    from numpy.core._multiarray_umath import __cpu_features__ as npf
print("olc detected level:", olc_core.detected_simd_level())
print("numpy sees AVX512F:", bool(npf.get("AVX512F")), " AVX2:", bool(npf.get("AVX2")))
"""


def compiler() -> str | None:
    """The C compiler that builds the preloaded library, or None."""
    return shutil.which("cc") or shutil.which("gcc")


def unsupported() -> str | None:
    """Why this machine cannot run the tool, or None."""
    if sys.platform != "linux" or platform.machine() not in ("x86_64", "AMD64"):
        return "needs Linux on x86-64"
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return "cannot read /proc/cpuinfo"
    if "cpuid_fault" not in flags:
        return "this CPU (or its hypervisor) has no CPUID faulting (no cpuid_fault in /proc/cpuinfo)"
    if compiler() is None:
        return "needs a C compiler (cc or gcc) to build the preloaded library"
    return None


def library() -> Path:
    """The preloaded library, built when missing or older than its source."""
    if not LIBRARY.exists() or LIBRARY.stat().st_mtime < SOURCE.stat().st_mtime:
        LIBRARY.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([compiler() or "cc", "-O2", "-shared", "-fPIC", "-o", str(LIBRARY), str(SOURCE)], check=True)
    return LIBRARY


def environment() -> dict[str, str]:
    """os.environ with the library preloaded (before any LD_PRELOAD already set)."""
    env = dict(os.environ)
    env["LD_PRELOAD"] = " ".join(p for p in (str(library()), env.get("LD_PRELOAD", "")) if p)
    return env


def main(argv: list[str]) -> int:
    check = bool(argv) and argv[0] == "--check"
    if check:
        argv = argv[1:]
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv and not check:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    why = unsupported()
    if why:
        print(f"avx2_host: {why}", file=sys.stderr)
        return 2
    env = environment()
    if check:
        subprocess.run([sys.executable, "-c", CHECK], env=env, check=True)
        if not argv:
            return 0
    return subprocess.run(argv, env=env).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
