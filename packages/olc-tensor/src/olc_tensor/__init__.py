"""olc-tensor: native kernels for ONNX data movement and type conversion.

Cast, CastLike, Gather, GatherElements, GatherND, Concat, Split, Slice,
Transpose, Expand, Tile, Pad, ScatterND, ScatterElements, NonZero,
DepthToSpace, SpaceToDepth, ReduceSum/Mean/Max/Min/Prod/L1/L2/LogSumExp/
SumSquare, CumSum, ArgMax/ArgMin, TopK, ConstantOfShape, Range, EyeLike,
Trilu and OneHot, the quantizers, the pools, Resize / Upsample, RoiAlign,
MaxRoiPool, GridSample, Col2Im and MaxUnpool, registered with olc-core
through the ``olc.kernels`` entry point (``olc_tensor.plugin``, which also
offers the graph pass of ``olc_tensor.passes``). ``manifest.OPS`` lists
what is claimed.
"""

from .manifest import OPS, kernel_name

__all__ = ["OPS", "kernel_name"]
