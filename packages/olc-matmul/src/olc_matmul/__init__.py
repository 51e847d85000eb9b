"""olc-matmul: Gemm, MatMul and quantized matrix products for olc-core."""

from __future__ import annotations

from .manifest import BY_NAME, OPS

__all__ = ["BY_NAME", "OPS", "fma_peak_gflops", "prepacked_bytes"]
__version__ = "0.1.0"


def prepacked_bytes() -> int:
    """Total bytes of constant weights currently held packed (shared copies counted once)."""
    from . import _ext  # type: ignore[attr-defined]  # the built extension

    return int(_ext.prepacked_bytes())


def fma_peak_gflops(iters: int = 20_000_000) -> float:
    """Single-thread float32 FMA peak of this machine in GFLOP/s (AVX-512 microbenchmark)."""
    from . import _ext  # type: ignore[attr-defined]  # the built extension

    return float(_ext.fma_peak_gflops(iters))
