"""The olc-tensor graph pass: ConstantOfShape with a `value` attribute.

`value` is a TENSOR attribute, which the native kernel ABI does not carry
(it passes ints, floats, strings and their lists). The pass restates each
such node as `olc.tensor::ConstantOfShape` with the value as two INT
attributes, `dtype` (the ONNX type code) and `value_bits` (the value's
bytes, little-endian, in an int64), so the same native kernel fills it. It
runs with the session's other fusion passes (on by default); with
``fusion=False`` these nodes run on the onnx.reference fallback.
"""

from __future__ import annotations

import onnx
from onnx import helper, numpy_helper

from olc_core import GraphPass, GraphPassContext, Rewrite

from . import manifest

PASS_NAME = "constant_of_shape_value"


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
