"""The MatMul bias pass of olc-matmul: ``MatMul(A, W) -> Add(., b)`` (either
operand order) becomes one ``olc.fused::MatMulAdd(A, W, b)``, the bias
added as the GEMM stores its output tiles instead of in a second pass over
the product (a Linear layer as exporters write it: the attention
projections of a BERT export, 18 such Adds in a MiniLM-shaped encoder).

Taken only when W is a 2-D initializer no feed replaces (so its packed
form is made once), b a constant of shape ``[N]`` with N W's last
dimension, every value of one float type, and the product read by the Add
alone and no graph output. The pass runs after the other families'
passes (``order=1``): an Add that a SkipLayerNormalization or BiasGelu
rewrite took in (the bias then rides on that kernel's own pass) is left
to it.
"""

from __future__ import annotations

import numpy as np
import onnx

from olc_core import FUSED_DOMAIN, GraphPass, GraphPassContext, Rewrite

PASS_NAME = "matmul-add"
FUSED_OP = "MatMulAdd"

_DEFAULT = ("", "ai.onnx")
_FLOAT_TYPES = {int(onnx.TensorProto.FLOAT), int(onnx.TensorProto.FLOAT16), int(onnx.TensorProto.BFLOAT16),
                int(onnx.TensorProto.DOUBLE)}


def _bias(ctx: GraphPassContext, add: onnx.NodeProto, product: str, n: int) -> str | None:
    """The Add's other operand when it is a constant [N] vector."""
    if add.op_type != "Add" or add.domain not in _DEFAULT or len(add.input) != 2 or len(add.output) != 1:
        return None
    if add.input[0] == product:
        other = add.input[1]
    elif add.input[1] == product:
        other = add.input[0]
    else:
        return None
    if other == product:
        return None  # Add(y, y)
    value = ctx.constants.get(other)
    if value is None or np.asarray(value).shape != (n,):
        return None
    return other


def fuse_matmul_add(ctx: GraphPassContext) -> list[Rewrite]:
    """One rewrite per MatMul with a constant 2-D B whose sole reader is an Add of a constant [N] bias."""
    out = []
    nodes = ctx.graph.node
    for i, node in enumerate(nodes):
        if node.op_type != "MatMul" or node.domain not in _DEFAULT or len(node.input) != 2 or len(node.output) != 1:
            continue
        a, w, y = node.input[0], node.input[1], node.output[0]
        weight = ctx.constants.get(w)
        if weight is None or np.asarray(weight).ndim != 2 or y in ctx.graph_outputs:
            continue
        readers = ctx.consumers.get(y, ())
        if len(readers) != 1:
            continue
        add = nodes[readers[0]]
        bias = _bias(ctx, add, y, int(np.asarray(weight).shape[1]))
        if bias is None:
            continue
        t = ctx.elem_type(a)
        if t not in _FLOAT_TYPES or any(ctx.elem_type(v) != t for v in (w, y, bias, add.output[0])):
            continue
        names = (ctx.node_names[i], ctx.node_names[readers[0]])
        fused = onnx.helper.make_node(FUSED_OP, [a, w, bias], [add.output[0]], name=f"fused/{names[0]}",
                                      domain=FUSED_DOMAIN)
        out.append(Rewrite(fused, names))
    return out


GRAPH_PASS = GraphPass(
    PASS_NAME, "olc-matmul", fuse_matmul_add,
    # After the other families' passes: SkipLayerNormalization and BiasGelu
    # take a bias Add into their own single pass.
    order=1,
    description="MatMul with a constant 2-D B + Add of a constant [N] bias -> one olc.fused::MatMulAdd",
)
