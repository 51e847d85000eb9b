"""olc-normalization: Softmax, LogSoftmax and the normalization operators
(scalar, AVX2, AVX-512) for olc-core."""

from .manifest import BY_NAME, NORM_OPS, TOLERANCE

__all__ = ["BY_NAME", "NORM_OPS", "TOLERANCE"]
__version__ = "0.1.0"
