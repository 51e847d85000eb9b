"""olc-matmul: Gemm, MatMul and quantized matrix products for olc-core."""

from __future__ import annotations

from .manifest import BY_NAME, OPS

__all__ = ["BY_NAME", "OPS", "fma_peak_gflops", "prepacked_bytes"]
__version__ = "0.1.0"


def prepacked_bytes() -> int:
    """Total bytes of constant weights currently held packed (shared copies counted once)."""
    from . import _ext  # type: ignore[attr-defined]  # the built extension

    return int(_ext.prepacked_bytes())


def fma_peak_gflops(iters: int = 20_000_000, isa: str = "avx512") -> float:
    """Single-thread float32 FMA peak of this machine in GFLOP/s, measured
    with independent FMA chains on zmm (``isa="avx512"``) or ymm
    (``isa="avx2"``) registers; 0.0 where the CPU lacks the ISA. The
    OLC_SIMD cap does not apply: the probe measures the host."""
    import olc_core

    from . import _ext  # type: ignore[attr-defined]  # the built extension

    with olc_core.simd_cap(None):
        return float(_ext.fma_peak_gflops(iters, isa))
