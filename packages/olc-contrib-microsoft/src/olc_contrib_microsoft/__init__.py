"""olc-contrib-microsoft: onnxruntime's com.microsoft operators
(SkipLayerNormalization, SkipSimplifiedLayerNormalization, BiasGelu,
FastGelu, QuickGelu, Gelu, BiasAdd) for olc-core, optimized (scalar, AVX2,
AVX-512) and naive."""

from .manifest import BY_NAME, OPS, TOLERANCE, kernel_name

__all__ = ["BY_NAME", "OPS", "TOLERANCE", "kernel_name"]
__version__ = "0.1.0"
