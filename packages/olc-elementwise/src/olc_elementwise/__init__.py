"""olc-elementwise: unary ONNX kernels (scalar, AVX2, AVX-512) for olc-core."""

from .manifest import BY_NAME, UNARY_OPS

__all__ = ["BY_NAME", "UNARY_OPS"]
__version__ = "0.1.0"
