"""olc-attention: attention kernels for olc-core (ai.onnx Attention,
RotaryEmbedding, TensorScatter; com.microsoft GroupQueryAttention,
MultiHeadAttention, Attention, RotaryEmbedding; the recurrent-state
LinearAttention of both domains and CausalConvWithState), optimized (one
streaming softmax engine, the linear kernels; scalar, AVX2, AVX-512) and
naive."""

from .manifest import BY_NAME, OPS, TOLERANCE, kernel_name

__all__ = ["BY_NAME", "OPS", "TOLERANCE", "kernel_name"]
__version__ = "0.1.0"
