"""SIMD level and CPU features as olc's kernels see them.

The level is detected once (cpuid + xgetbv: the CPU must have the
instructions and the OS must save their registers). ``OLC_SIMD`` (read once,
at first use) or :func:`simd_cap` lowers it so that every kernel path can be
tested on one machine; features above the cap are reported absent.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from . import _native

SIMD_LEVELS: tuple[str, ...] = ("scalar", "avx2", "avx512")

# Bit order of enum olc_cpu_feature in olc/kernel_abi.h.
_FEATURE_NAMES: tuple[str, ...] = (
    "sse2", "sse3", "ssse3", "sse4_1", "sse4_2",
    "avx", "avx2", "fma", "f16c",
    "avx512f", "avx512bw", "avx512vl", "avx512dq",
    "avx512_bf16", "avx512_fp16", "avx512_vnni",
    "amx_tile", "amx_int8", "amx_bf16",
    "avx_vnni",
)  # fmt: skip

# Spellings accepted for a level, as in OLC_SIMD ("sse2" is the scalar level:
# x86-64 always has it and the scalar code may use it).
_LEVEL_ALIASES = {"scalar": 0, "sse2": 0, "avx2": 1, "avx512": 2}

_env_error = _native.simd_env_error()
if _env_error:
    raise ValueError(_env_error)


def _features(bits: int) -> dict[str, bool]:
    return {name: bool(bits >> i & 1) for i, name in enumerate(_FEATURE_NAMES)}


def _level_code(level: str | int | None) -> int:
    if level is None:
        return -1
    if isinstance(level, bool):
        raise TypeError("SIMD level must be a name or None, not bool")
    if isinstance(level, int):
        if not 0 <= level < len(SIMD_LEVELS):
            raise ValueError(f"SIMD level {level} out of range 0..{len(SIMD_LEVELS) - 1}")
        return level
    key = level.strip().lower()
    if key in ("", "native"):
        return -1
    if key not in _LEVEL_ALIASES:
        raise ValueError(
            f"unknown SIMD level {level!r}; expected one of {', '.join(SIMD_LEVELS)} "
            "(or 'sse2' for scalar, 'native'/None for no cap)"
        )
    return _LEVEL_ALIASES[key]


def simd_level() -> str:
    """The level kernels use now: detected, lowered by any cap."""
    return SIMD_LEVELS[_native.simd_level()]


def detected_simd_level() -> str:
    """The level of this CPU and OS, ignoring any cap."""
    return SIMD_LEVELS[_native.detected_simd_level()]


def cpu_features() -> dict[str, bool]:
    """Features usable under the current cap (those above it read False)."""
    return _features(_native.cpu_features())


def detected_cpu_features() -> dict[str, bool]:
    """Features of this CPU and OS, ignoring any cap."""
    return _features(_native.detected_cpu_features())


def current_cap() -> str | None:
    """The cap in force (from OLC_SIMD or simd_cap), or None when uncapped."""
    cap = _native.simd_cap()
    return None if cap < 0 else SIMD_LEVELS[cap]


@contextmanager
def simd_cap(level: str | int | None) -> Iterator[str]:
    """Caps the SIMD level inside the block; restores the previous cap after.

    ``level`` is a name from SIMD_LEVELS (or "sse2"), or None for no cap.
    A cap above the detected level has no effect. The block's cap replaces
    the one in force, OLC_SIMD's included (so a test can reach every level
    whatever the environment says). Yields the level in force.
    The cap is process-wide: kernels choose their variant when they are
    created or run, so create sessions inside the block. Not for use from
    several threads at once.
    """
    code = _level_code(level)
    previous = _native.simd_cap()
    _native.set_simd_cap(code)
    try:
        yield simd_level()
    finally:
        _native.set_simd_cap(previous)


__all__ = [
    "SIMD_LEVELS",
    "cpu_features",
    "current_cap",
    "detected_cpu_features",
    "detected_simd_level",
    "simd_cap",
    "simd_level",
]
