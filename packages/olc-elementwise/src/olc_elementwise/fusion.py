"""Elementwise fusion: a graph pass that turns chains of unary and binary
elementwise nodes into one ``olc.fused::ElementwisePlan`` node.

A group is a set of fusable nodes (the family's float unary ops, Add, Sub,
Mul, Div; one element type, float32 or bfloat16) connected through values
that nothing outside the group reads and that are not graph outputs. It has
one result, the output of its last node. The replacement node carries the
group as a small program (see ``csrc/fused_adapter.cc`` and docs/fusion.md):

    ops          "Sigmoid;Mul;Mul"          step ops, in graph order
    args         [0, -1, 0, 2, 3, 1]        two value indices per step
    constants    [0.125]                    folded scalar initializers
    step_floats  [alpha, beta, gamma, ...]  resolved unary attributes

Value indices count the node's inputs, then the constants, then the step
results. The session creates the kernel for the node; if it refuses, the
original nodes run.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx
from onnx import helper

import olc_core
from olc_core import GraphPass, GraphPassContext, Rewrite

from . import manifest

FUSED_OP = "ElementwisePlan"
FUSED_DOMAIN = olc_core.FUSED_DOMAIN
KERNEL_NAME = "olc_elementwise::ElementwisePlan"
PASS_NAME = "elementwise-fusion"

BINARY_OPS = ("Add", "Sub", "Mul", "Div")
# Opsets from which the binary ops broadcast multidirectionally and take no
# attributes, per element type (bfloat16 joined at opset 13).
_BINARY_SINCE = {"float32": 7, "bfloat16": 13}
_TYPES: dict[int, str] = {int(onnx.TensorProto.FLOAT): "float32", int(onnx.TensorProto.BFLOAT16): "bfloat16"}
# Unary ops the fused kernel evaluates: those with a float type (not the BOOL
# predicates, Not or the integer-only BitwiseNot).
UNARY_OPS = tuple(u.op for u in manifest.UNARY_OPS if not u.out_bool and set(u.types) & set(_TYPES.values()))
_SLOTS = ("alpha", "beta", "gamma")
MAX_INPUTS = 16
MAX_STEPS = 64


def _attr_value(node: onnx.NodeProto, name: str, default):
    for a in node.attribute:
        if a.name == name:
            v = helper.get_attribute_value(a)
            return v.decode() if isinstance(v, bytes) else v
    return default


def _step_of(node: onnx.NodeProto, opset: int, ctx: GraphPassContext) -> tuple[str, list[float]] | None:
    """(step op name, [alpha, beta, gamma]) when the node can be a step, else None."""
    if node.domain not in ("", "ai.onnx") or len(node.output) != 1 or not node.output[0]:
        return None
    types = {ctx.elem_type(n) for n in list(node.input) + list(node.output)}
    if len(types) != 1:
        return None
    tname = _TYPES.get(types.pop())
    if tname is None:
        return None
    if node.op_type in BINARY_OPS:
        if len(node.input) != 2 or not all(node.input) or node.attribute or opset < _BINARY_SINCE[tname]:
            return None
        return node.op_type, [0.0, 0.0, 0.0]
    spec = manifest.BY_NAME.get(node.op_type)
    if spec is None or node.op_type not in UNARY_OPS or len(node.input) != 1 or not node.input[0]:
        return None
    if tname not in spec.types_at(opset):
        return None
    known = {a.name for a in spec.attrs}
    if any(a.name not in known for a in node.attribute):
        return None
    values = {a.name: _attr_value(node, a.name, a.default) for a in spec.attrs}
    op = node.op_type
    if op == "Gelu":
        if values["approximate"] not in ("none", "tanh"):
            return None
        op = "GeluTanh" if values["approximate"] == "tanh" else "Gelu"
    floats = [0.0, 0.0, 0.0]
    for a in spec.attrs:
        if a.kind == "float":
            floats[_SLOTS.index(a.slot)] = float(values[a.name])
            if a.nonzero and float(np.float32(values[a.name])) == 0.0:
                return None  # left to the op's own kernel, which refuses it
    if not all(np.isfinite(floats)):
        return None
    return op, floats


def _groups(ctx: GraphPassContext) -> list[list[int]]:
    """Fusable groups (node indices in graph order) of at least two nodes."""
    opset = ctx.opsets.get("ai.onnx", 0)
    steps = {}
    for i, node in enumerate(ctx.graph.node):
        s = _step_of(node, opset, ctx)
        if s is not None:
            steps[i] = s
    group_of: dict[int, int] = {}
    # Consumers come after producers: walking backwards, a node joins the
    # group of its consumers when they are all in one group and its output
    # is read nowhere else.
    for i in sorted(steps, reverse=True):
        out = ctx.graph.node[i].output[0]
        consumers = ctx.consumers.get(out, ())
        target = None
        if out not in ctx.graph_outputs and consumers and all(c in group_of for c in consumers):
            gs = {group_of[c] for c in consumers}
            if len(gs) == 1:
                target = gs.pop()
                root_type = ctx.elem_type(ctx.graph.node[target].output[0])
                if ctx.elem_type(out) != root_type:
                    target = None
        group_of[i] = i if target is None else target
    groups: dict[int, list[int]] = {}
    for i, g in group_of.items():
        groups.setdefault(g, []).append(i)
    return [sorted(v) for v in groups.values() if len(v) >= 2]


def _scalar_constant(ctx: GraphPassContext, name: str) -> float | None:
    value = ctx.constants.get(name)
    if value is None or value.size != 1:
        return None
    return float(np.asarray(value).astype(np.float32).reshape(()))


def _rank(ctx: GraphPassContext, name: str) -> int | None:
    shape = ctx.shape(name)
    return None if shape is None else len(shape)


def _program(ctx: GraphPassContext, indices: Sequence[int]) -> Rewrite | None:
    nodes = [ctx.graph.node[i] for i in indices]
    opset = ctx.opsets.get("ai.onnx", 0)
    produced = {n.output[0]: k for k, n in enumerate(nodes)}
    outer: list[str] = []
    for n in nodes:
        for name in n.input:
            if name not in produced and name not in outer:
                outer.append(name)
    # Fold scalar constants when that cannot change the output's rank: the
    # constant's rank must not exceed that of a remaining input.
    folded: dict[str, float] = {}
    for name in outer:
        c = _scalar_constant(ctx, name)
        if c is not None:
            folded[name] = c
    inputs = [n for n in outer if n not in folded]
    if not inputs:
        return None  # all-constant chains are left to constant folding
    ranks = [_rank(ctx, n) for n in inputs]
    max_rank = None if any(r is None for r in ranks) else max(ranks)  # type: ignore[type-var]
    for name in list(folded):
        r = _rank(ctx, name)
        if max_rank is None or r is None or r > max_rank:
            del folded[name]
            inputs.append(name)
    inputs = [n for n in outer if n not in folded]
    if len(inputs) > MAX_INPUTS or len(nodes) > MAX_STEPS:
        return None
    constants = list(folded)
    index = {n: k for k, n in enumerate(inputs)}
    index.update({n: len(inputs) + k for k, n in enumerate(constants)})
    base = len(inputs) + len(constants)
    ops: list[str] = []
    args: list[int] = []
    floats: list[float] = []
    for k, node in enumerate(nodes):
        op, f = _step_of(node, opset, ctx)  # type: ignore[misc]
        ops.append(op)
        refs = [base + produced[n] if n in produced else index[n] for n in node.input]
        args.extend(refs + [-1] * (2 - len(refs)))
        floats.extend(f)
        index[node.output[0]] = base + k
    root = nodes[-1]
    names = [ctx.node_names[i] for i in indices]
    fused = helper.make_node(
        FUSED_OP, inputs, [root.output[0]], name=f"fused/{names[-1]}", domain=FUSED_DOMAIN,
        ops=";".join(ops), args=args, step_floats=floats,
    )
    if constants:
        fused.attribute.append(helper.make_attribute("constants", [folded[n] for n in constants]))
    return Rewrite(fused, tuple(names))


def fuse_elementwise(ctx: GraphPassContext) -> list[Rewrite]:
    """The pass: one rewrite per fusable group."""
    out = []
    for indices in _groups(ctx):
        # The result must be the last node in graph order (one sink).
        rw = _program(ctx, indices)
        if rw is not None:
            out.append(rw)
    return out


GRAPH_PASS = GraphPass(
    PASS_NAME, "olc-elementwise", fuse_elementwise,
    description="chains of unary/binary elementwise nodes -> one olc.fused::ElementwisePlan",
)
