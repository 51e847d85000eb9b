"""Shape plans: the nodes whose values depend only on the feeds' shapes.

Exported graphs compute the shapes they reshape to at run time: ``Shape ->
Gather -> Unsqueeze -> Concat -> Reshape`` and the like. Those values are a
function of the feeds' shapes alone, so the session

- **folds** at construction every node whose inputs are all known then
  (initializers, Constant nodes, and ``Shape``/``Size`` of a value whose
  inferred shape is fully static): its outputs become plan constants;
- **caches** the others: the runtime keeps their outputs per feed-shape
  signature (bounded, oldest evicted) and skips those nodes on a run whose
  feeds have shapes it has seen (``Plan.set_shape_plan``).

A node qualifies only when its op is deterministic and returns tensors
(no random ops, no subgraphs, no sequences) and its domain is one whose
semantics olc knows (ai.onnx, com.microsoft, the ``olc.*`` graph-pass
domains). ``Shape`` of an intermediate value qualifies only when that value's
shape provably follows from the feeds' shapes: every op on its way is one
whose output shape depends on its inputs' shapes (and attributes) alone, or
also on the values of inputs that are themselves shape values (a Reshape's
target shape, a Slice's bounds).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

# Feed-shape signatures a session caches, and the bytes one may hold.
CACHE_CAPACITY = 8
CACHE_MAX_BYTES = 8 << 20
# Outputs larger than this are not kept as plan constants: the node runs at
# every run instead (a weight's Transpose, say, costs memory to keep twice).
FOLD_MAX_BYTES = 1 << 20

FOLDED = "folded"
CACHED = "cached"

# Output shapes follow from the inputs' shapes and the attributes alone (Dropout's too,
# though its mask may be random: it is never folded or cached, see _NEVER).
_SHAPE_FOLLOWS_SHAPES = frozenset((
    "Abs", "Acos", "Acosh", "Asin", "Asinh", "Atan", "Atanh", "BitwiseNot", "Ceil", "Celu", "Cos", "Cosh", "Elu",
    "Erf", "Exp", "Floor", "Gelu", "HardSigmoid", "HardSwish", "IsInf", "IsNaN", "LeakyRelu", "Log", "Mish", "Neg",
    "Not", "Reciprocal", "Relu", "Round", "Selu", "Shrink", "Sigmoid", "Sign", "Sin", "Sinh", "Softplus",
    "Softsign", "Sqrt", "Tan", "Tanh", "ThresholdedRelu", "Identity", "Cast", "CastLike", "Add", "Sub", "Mul",
    "Div", "Pow", "Mod", "PRelu", "Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "And", "Or", "Xor",
    "BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitShift", "Max", "Min", "Mean", "Sum", "Where", "Clip", "MatMul",
    "Gemm", "MatMulInteger", "QLinearMatMul", "MatMulNBits", "Einsum", "Conv", "ConvTranspose", "MaxPool",
    "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "LpPool", "Softmax", "LogSoftmax", "Hardmax",
    "LayerNormalization", "SimplifiedLayerNormalization", "SkipLayerNormalization",
    "SkipSimplifiedLayerNormalization", "BatchNormalization", "InstanceNormalization", "GroupNormalization",
    "RMSNormalization", "LpNormalization", "MeanVarianceNormalization", "FastGelu", "BiasGelu", "QuickGelu",
    "Transpose", "Gather", "GatherElements", "GatherND", "Concat", "Flatten", "DepthToSpace", "SpaceToDepth",
    "CumSum", "Trilu", "EyeLike", "ArgMax", "ArgMin", "ScatterElements", "ScatterND", "Shape", "Size",
    "QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "ElementwisePlan", "Dropout",
    "Attention",  # ai.onnx, com.microsoft (BERT) and the olc.fused node of encoder exports
    "PackedQkvAttention",  # olc.fused: com.microsoft Attention after its projection (olc-attention's pass)
    "MatMulAdd",  # olc.fused: MatMul with its bias Add (olc-matmul's matmul-add pass)
    "FusedConv",  # olc.fused (olc-matmul's conv-fusion pass) and com.microsoft
))

# Output shapes also depend on the values of these inputs.
_SHAPE_FROM_VALUES: dict[str, tuple[int, ...]] = {
    "Reshape": (1,), "Expand": (1,), "Tile": (1,), "Slice": (1, 2, 3, 4), "Squeeze": (1,), "Unsqueeze": (1,),
    "Pad": (1, 3), "Split": (1,), "ConstantOfShape": (0,), "Range": (0, 1, 2), "OneHot": (1,), "TopK": (1,),
    "Resize": (1, 2, 3), "Upsample": (1,), "CenterCropPad": (1,),
    **dict.fromkeys((
        "ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
        "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"
    ), (1,)),
}

# Never folded or cached: not a function of the inputs, or not tensors.
_NEVER = frozenset((
    "RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial", "Bernoulli", "Dropout",
    "If", "Loop", "Scan", "SequenceEmpty", "SequenceConstruct", "SequenceInsert", "SequenceAt", "SequenceErase",
    "SequenceLength", "SequenceMap", "ConcatFromSequence", "SplitToSequence", "Optional", "OptionalGetElement",
    "OptionalHasElement"
))


def _known_domain(domain: str) -> bool:
    return domain in ("ai.onnx", "com.microsoft") or domain.startswith("olc.")


def foldable_op(op_type: str, domain: str, has_subgraphs: bool) -> bool:
    """Whether a node of this op, its inputs all known, may be evaluated once
    at construction (deterministic, of a domain whose semantics olc knows)."""
    return _known_domain(domain) and op_type not in _NEVER and not has_subgraphs


@dataclass(frozen=True)
class StepFacts:
    """What the shape plan needs to know of one step of the plan."""

    op_type: str
    domain: str
    inputs: Sequence[int]  # slots; -1 for an absent optional input
    outputs: Sequence[int]
    has_subgraphs: bool
    shape_start: int | None = None  # Shape's start/end attributes (opset 15+)
    shape_end: int | None = None


@dataclass(frozen=True)
class ShapePlanSplit:
    """Which steps fold at construction and which are cached per signature.

    ``static_values``: Shape/Size steps whose value comes from a fully static
    inferred shape, with that value (they run no kernel at all).
    ``foldable``: the other steps whose inputs are all known at construction,
    in plan order; the session evaluates them once.
    ``cached``: steps whose values depend on the feeds' shapes only.
    """

    static_values: dict[int, np.ndarray]
    foldable: list[int]
    cached: list[int]


def shape_of_shape(dims: Sequence[int], start: int | None, end: int | None) -> np.ndarray:
    """Shape's output for an input of shape ``dims`` (start/end as opset 15 says)."""
    rank = len(dims)
    lo = 0 if start is None else start
    hi = rank if end is None else end
    lo = min(max(lo + rank if lo < 0 else lo, 0), rank)
    hi = min(max(hi + rank if hi < 0 else hi, 0), rank)
    return np.asarray(list(dims)[lo:hi], dtype=np.int64)


def split(
    steps: Sequence[StepFacts],
    constant_slots: set[int],
    feed_slots: set[int],
    static_dims: Callable[[int], tuple[int, ...] | None],
    tensor_slot: Callable[[int], bool],
) -> ShapePlanSplit:
    """Classifies the steps (in plan order) into folded, cached and the rest.

    ``constant_slots``: values fixed at construction (initializers no feed
    may replace, Constant nodes). ``feed_slots``: graph inputs (their shapes
    make the cache key). ``static_dims(slot)``: the value's inferred shape
    when every dim is a number. ``tensor_slot(slot)``: False for a value
    inference types as a sequence, map or optional.
    """
    known = set(constant_slots)  # values fixed at construction
    shape_values: set[int] = set()  # values fixed by the feeds' shapes
    determined = set(constant_slots) | set(feed_slots)  # shapes fixed by the feeds' shapes
    static_values: dict[int, np.ndarray] = {}
    foldable: list[int] = []
    cached: list[int] = []
    for index, step in enumerate(steps):
        present = [s for s in step.inputs if s >= 0]
        eligible = (
            foldable_op(step.op_type, step.domain, step.has_subgraphs)
            and all(tensor_slot(s) for s in step.outputs) and bool(present)
        )
        if eligible and step.op_type in ("Shape", "Size") and step.inputs[0] in determined | known:
            source = step.inputs[0]
            dims = static_dims(source)
            if dims is not None and step.op_type == "Shape":
                static_values[index] = shape_of_shape(dims, step.shape_start, step.shape_end)
                known.update(step.outputs)
            elif dims is not None:
                static_values[index] = np.asarray(int(np.prod(dims, dtype=np.int64)), dtype=np.int64)
                known.update(step.outputs)
            elif source in known:
                foldable.append(index)
                known.update(step.outputs)
            else:
                cached.append(index)
                shape_values.update(step.outputs)
        elif eligible and all(s in known for s in present):
            foldable.append(index)
            known.update(step.outputs)
        elif eligible and all(s in known or s in shape_values for s in present):
            cached.append(index)
            shape_values.update(step.outputs)

        outs = step.outputs
        if all(s in known or s in shape_values for s in outs):
            determined.update(outs)
        elif not _known_domain(step.domain) or not all(s in determined for s in present):
            continue
        elif step.op_type in _SHAPE_FOLLOWS_SHAPES:
            determined.update(outs)
        elif step.op_type in _SHAPE_FROM_VALUES:
            controls = [step.inputs[i] for i in _SHAPE_FROM_VALUES[step.op_type] if i < len(step.inputs)]
            if all(s < 0 or s in known or s in shape_values for s in controls):
                determined.update(outs)
    return ShapePlanSplit(static_values, foldable, cached)


def frontier(
    steps: Sequence[StepFacts], cached: Sequence[int], graph_outputs: set[int]
) -> list[int]:
    """The slots cached steps produce that a step outside the set, or the
    graph's outputs, read: what a cache hit must provide."""
    inside = set(cached)
    produced = {s for i in cached for s in steps[i].outputs}
    read_outside = {s for i, st in enumerate(steps) if i not in inside for s in st.inputs if s >= 0}
    return sorted(s for s in produced if s in read_outside or s in graph_outputs)
