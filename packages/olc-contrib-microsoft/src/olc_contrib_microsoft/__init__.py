"""olc-contrib-microsoft: onnxruntime's com.microsoft operators
(SkipLayerNormalization, SkipSimplifiedLayerNormalization, BiasGelu,
FastGelu, QuickGelu, Gelu, BiasAdd, EmbedLayerNormalization, BiasSoftmax,
CDist, GatherBlockQuantized, MoE, QMoE) for olc-core, optimized (scalar,
AVX2, AVX-512) and naive, and a graph pass that rewrites raw exports'
normalization and GELU subgraphs into them."""

from .manifest import BY_NAME, OPS, TOLERANCE, kernel_name

__all__ = ["BY_NAME", "OPS", "TOLERANCE", "kernel_name"]
__version__ = "0.1.0"
