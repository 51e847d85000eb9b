"""olc-tensor: native kernels for ONNX data movement and type conversion.

Cast, CastLike, Gather, GatherElements, Concat, Split, Slice, Transpose,
Expand, Tile, Pad, ScatterND, NonZero, ReduceSum/Mean/Max/Min,
ArgMax/ArgMin and TopK, registered with olc-core through the ``olc.kernels``
entry point (``olc_tensor.plugin``). ``manifest.OPS`` lists what is claimed.
"""

from .manifest import OPS, kernel_name

__all__ = ["OPS", "kernel_name"]
