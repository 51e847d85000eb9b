"""The olc-tensor graph passes.

ConstantOfShape with a `value` attribute: `value` is a TENSOR attribute,
which the native kernel ABI does not carry (it passes ints, floats, strings
and their lists). The pass restates each such node as
`olc.tensor::ConstantOfShape` with the value as two INT attributes, `dtype`
(the ONNX type code) and `value_bits` (the value's bytes, little-endian, in
an int64), so the same native kernel fills it; with ``fusion=False`` these
nodes run on the onnx.reference fallback.

A Concat of Slices: a Concat whose every input is made by a chain of Slices
(constant starts, ends, axes and steps) from one tensor, each Slice's result
read by nothing else, becomes one `olc.tensor::Concat` node reading that
tensor, the Slices given as INTS attributes (`chain`: Slices per input;
`starts`, `ends`, `axes`, `steps`: theirs, input by input). Its kernel copies
each part straight from its strided view: YOLOv5's space-to-depth block
(eight Slices and a Concat) no longer writes and reads the image twice more.

Both run with the session's other fusion passes (on by default).
"""

from __future__ import annotations

import onnx
from onnx import helper, numpy_helper

from olc_core import GraphPass, GraphPassContext, Rewrite

from . import manifest

PASS_NAME = "constant_of_shape_value"
CONCAT_SLICES_PASS = "concat_of_slices"


def _value_bits(tensor: onnx.TensorProto) -> int | None:
    """The value's bytes as an int64, or None when it is not one native element."""
    if manifest.CODE_TO_TYPE.get(int(tensor.data_type)) is None:
        return None
    try:
        arr = numpy_helper.to_array(tensor)
    except Exception:  # noqa: BLE001 - a malformed tensor: leave the node alone
        return None
    if arr.size != 1:
        return None
    raw = arr.reshape(-1)[:1].astype(arr.dtype.newbyteorder("<")).tobytes()
    if arr.dtype == bool:
        raw = b"\x01" if raw != b"\x00" else b"\x00"
    return int.from_bytes(raw.ljust(8, b"\x00"), "little", signed=True)


def restate_constant_of_shape(ctx: GraphPassContext) -> list[Rewrite]:
    opset = ctx.opsets.get("ai.onnx", 0)
    claimed = set(manifest.BY_NAME["ConstantOfShape"][0].types_at(opset))
    out = []
    for i, node in enumerate(ctx.graph.node):
        if node.op_type != "ConstantOfShape" or node.domain not in ("", "ai.onnx"):
            continue
        if len(node.attribute) != 1 or node.attribute[0].name != "value":
            continue  # no value: the ai.onnx kernel takes the node as it is
        value = node.attribute[0]
        if value.type != onnx.AttributeProto.TENSOR or manifest.CODE_TO_TYPE.get(int(value.t.data_type)) not in claimed:
            continue
        bits = _value_bits(value.t)
        if bits is None:
            continue
        name = ctx.node_names[i]
        restated = helper.make_node(
            "ConstantOfShape", list(node.input), list(node.output), name=f"{name}/value",
            domain=manifest.RESTATED_DOMAIN, dtype=int(value.t.data_type), value_bits=bits,
        )
        out.append(Rewrite(restated, (name,)))
    return out


GRAPH_PASS = GraphPass(
    PASS_NAME, "olc-tensor", restate_constant_of_shape,
    description="ConstantOfShape with a value tensor -> olc.tensor::ConstantOfShape with INT attributes",
)


def _slice_params(ctx: GraphPassContext, node: onnx.NodeProto) -> list[tuple[int, int, int, int]] | None:
    """(axis, start, end, step) of each axis a Slice cuts, when all of them are
    known while the session is built (constant inputs from opset 10, or the
    attributes before), else None."""
    given: list[list[int] | None]
    if ctx.opsets.get("ai.onnx", 0) < 10:
        attrs = {a.name: [int(v) for v in a.ints] for a in node.attribute}
        given = [attrs.get("starts"), attrs.get("ends"), attrs.get("axes"), None]
    else:
        given = []
        for name in node.input[1:5]:
            v = ctx.constants.get(name) if name else None
            if name and (v is None or v.ndim != 1 or v.dtype.kind != "i"):
                return None  # known only when the model runs
            given.append([int(t) for t in v] if v is not None else None)
        given += [None] * (4 - len(given))
    starts, ends, axes_or_none, steps_or_none = given
    if starts is None or ends is None:
        return None
    axes = list(range(len(starts))) if axes_or_none is None else axes_or_none
    steps = [1] * len(starts) if steps_or_none is None else steps_or_none
    if not (len(starts) == len(ends) == len(axes) == len(steps)) or 0 in steps:
        return None
    # Axes counted from both ends may name one axis twice, which the Slice
    # kernel refuses: taken only where the rank tells them apart.
    shape = ctx.shape(node.input[0])
    if shape is not None:
        rank = len(shape)
        if any(a < -rank or a >= rank for a in axes):
            return None
        axes = [a + rank if a < 0 else a for a in axes]
    elif any(a < 0 for a in axes) and any(a >= 0 for a in axes):
        return None
    if len(set(axes)) != len(axes):
        return None
    return list(zip(axes, starts, ends, steps))


def fuse_concat_of_slices(ctx: GraphPassContext) -> list[Rewrite]:
    out = []
    taken: set[int] = set()
    for ci, concat in enumerate(ctx.graph.node):
        if concat.op_type != "Concat" or concat.domain not in ("", "ai.onnx") or len(concat.input) < 2:
            continue
        axis = next((a.i for a in concat.attribute if a.name == "axis"), None)
        if axis is None or any(not name for name in concat.input):
            continue
        # Back from each input to the tensor its Slices start from.
        roots: set[str] = set()
        chains: list[list[tuple[int, int, int, int]]] = []
        group: set[int] = set()
        for name in concat.input:
            chain: list[tuple[int, int, int, int]] = []
            value = name
            while True:
                pi = ctx.producers.get(value)
                if pi is None or pi in taken:
                    break
                node = ctx.graph.node[pi]
                if node.op_type != "Slice" or node.domain not in ("", "ai.onnx"):
                    break
                p = _slice_params(ctx, node)
                if p is None:
                    break
                chain[:0] = p
                group.add(pi)
                value = node.input[0]
            roots.add(value)
            chains.append(chain)
        if len(roots) != 1 or not all(chains):
            continue
        # Every Slice's result is read inside the group only (the Slices of
        # several inputs may share one, as a block slicing rows once for its
        # even and odd columns does).
        inside = group | {ci}
        if any(o in ctx.graph_outputs or not set(ctx.consumers.get(o, ())) <= inside
               for i in group for o in ctx.graph.node[i].output):
            continue
        taken.update(group)
        order = sorted(group)
        names = tuple(ctx.node_names[i] for i in order) + (ctx.node_names[ci],)
        params = [p for chain in chains for p in chain]
        restated = helper.make_node(
            "Concat", [roots.pop()], list(concat.output), name=f"{ctx.node_names[ci]}/slices",
            domain=manifest.RESTATED_DOMAIN, axis=int(axis), chain=[len(c) for c in chains],
            starts=[p[1] for p in params], ends=[p[2] for p in params], axes=[p[0] for p in params],
            steps=[p[3] for p in params],
        )
        out.append(Rewrite(restated, names))
    return out


CONCAT_SLICES = GraphPass(
    CONCAT_SLICES_PASS, "olc-tensor", fuse_concat_of_slices,
    description="Concat of Slices of one tensor -> olc.tensor::Concat copying each part from its view",
)
