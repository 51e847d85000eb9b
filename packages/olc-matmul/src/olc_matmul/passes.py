"""The Conv graph pass of olc-matmul: a ``Conv`` and what follows it in one
``olc.fused::FusedConv`` kernel.

- ``Conv -> BatchNormalization`` (inference: one output, ``training_mode``
  0, ``spatial`` 1): the normalization is folded into the Conv's weights
  and bias when the kernel is created, ``W' = W f``, ``B' = (B - mean) f +
  bias`` with ``f = scale / sqrt(var + epsilon)`` per output channel, in
  float64, rounded once to float32 (the kernel packs its weights as
  float32 for every input type). W, the Conv's bias (if any) and the four
  normalization inputs must be initializers no feed can replace, each of
  the normalization's inputs of shape ``[output channels]``.
- ``Conv [-> BatchNormalization] -> Add(., R)`` (a residual connection,
  either operand order): R becomes the FusedConv's last input, added to
  each output tile as it is stored (before the activation, if any). R must
  have exactly the Add's other operand's shape (every dimension known, no
  broadcasting) and type, and the Add's output the same.
- ``Conv [-> BatchNormalization] [-> Add] -> activation``: ``Relu``,
  ``Clip`` (bounds as attributes before opset 11, constant scalar inputs
  after), ``LeakyRelu``, ``HardSigmoid``, ``Sigmoid``, ``HardSwish``,
  ``Swish`` (opset 24), and SiLU as exporters write it, ``Mul(y,
  Sigmoid(y))`` (either operand order; the Sigmoid read by the Mul alone,
  ``y`` by the two alone), taken as ``Swish`` with alpha 1: applied by the
  kernel to each output tile as it is stored.

The FusedConv's inputs: X, W, B (``""`` when absent), then the
normalization's scale, B, mean and var when one is folded in, then R when
an Add is taken in (2, 3, 4, 7 or 8 inputs).

A value between the fused nodes must be read by nothing else and be no
graph output; every value has one float type (float32, float16, bfloat16).
The session still validates each rewrite and creates its kernel before it
takes it: a kernel that refuses (a shape the weights cannot fold with, say)
leaves the original nodes to run.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import onnx
from onnx import helper

from olc_core import FUSED_DOMAIN, GraphPass, GraphPassContext, Rewrite

PASS_NAME = "conv-fusion"
FUSED_OP = "FusedConv"

_DEFAULT = ("", "ai.onnx")
_FLOAT_TYPES = {int(onnx.TensorProto.FLOAT), int(onnx.TensorProto.FLOAT16), int(onnx.TensorProto.BFLOAT16)}
_CONV_ATTRS = ("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides")
_FLT_MAX = float(np.finfo(np.float32).max)


def _attr(node: onnx.NodeProto, name: str, default: Any) -> Any:
    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


class _Graph:
    def __init__(self, ctx: GraphPassContext):
        self.ctx = ctx
        self.nodes = list(ctx.graph.node)
        self.opset = int(ctx.opsets.get("ai.onnx", ctx.opsets.get("", 0)))

    def sole_reader(self, value: str) -> int | None:
        """The one node reading `value`, when it is not a graph output."""
        if value in self.ctx.graph_outputs:
            return None
        readers = self.ctx.consumers.get(value, ())
        return readers[0] if len(readers) == 1 else None

    def constant(self, value: str) -> np.ndarray | None:
        """An initializer no feed replaces, or a Constant node's value (the
        session puts both in the context's constants)."""
        c = self.ctx.constants.get(value)
        return None if c is None else np.asarray(c)


def _activation(g: _Graph, node: onnx.NodeProto) -> tuple[str, list[float]] | None:
    """(activation name, parameters) of a node the kernel can apply, or None."""
    if node.domain not in _DEFAULT or len([o for o in node.output if o]) != 1:
        return None
    op = node.op_type
    if op in ("Relu", "Sigmoid", "HardSwish"):
        return (op, [])
    if op in ("LeakyRelu", "Swish"):
        return (op, [float(_attr(node, "alpha", 0.01 if op == "LeakyRelu" else 1.0))])
    if op == "HardSigmoid":
        return (op, [float(_attr(node, "alpha", 0.2)), float(_attr(node, "beta", 0.5))])
    if op == "Clip":
        if g.opset < 11:
            return (op, [float(_attr(node, "min", -_FLT_MAX)), float(_attr(node, "max", _FLT_MAX))])
        bounds = [-math.inf, math.inf]
        for k, name in enumerate(list(node.input[1:3])):
            if not name:
                continue
            c = g.constant(name)
            if c is None or c.size != 1:
                return None
            bounds[k] = float(c.astype(np.float64).reshape(()))
        return (op, bounds)
    return None


def _silu(g: _Graph, value: str) -> tuple[int, int] | None:
    """(Sigmoid, Mul) indices of ``Mul(value, Sigmoid(value))`` (either
    operand order) when `value` is read by those two alone and the
    Sigmoid by the Mul alone, neither a graph output."""
    if value in g.ctx.graph_outputs:
        return None
    readers = list(g.ctx.consumers.get(value, ()))
    if len(readers) != 2:
        return None
    sig = next((i for i in readers if g.nodes[i].op_type == "Sigmoid"), None)
    mul = next((i for i in readers if i != sig), None)
    if sig is None or mul is None:
        return None
    s_node, m_node = g.nodes[sig], g.nodes[mul]
    if s_node.domain not in _DEFAULT or list(s_node.input) != [value] or len(s_node.output) != 1:
        return None
    if m_node.op_type != "Mul" or m_node.domain not in _DEFAULT or sorted(m_node.input) != sorted([value, s_node.output[0]]):
        return None
    if len(m_node.output) != 1 or not m_node.output[0] or g.sole_reader(s_node.output[0]) != mul:
        return None
    t = g.ctx.elem_type(value)
    if g.ctx.elem_type(s_node.output[0]) != t or g.ctx.elem_type(m_node.output[0]) != t:
        return None
    return sig, mul


def _known_shape(g: _Graph, value: str) -> tuple[int | str, ...] | None:
    """The inferred shape when every dimension is a number or a name."""
    s = g.ctx.shape(value)
    if s is None or any(d is None for d in s):
        return None
    return tuple(d for d in s if d is not None)


def _residual(g: _Graph, add: onnx.NodeProto, out: str, t: int) -> str | None:
    """The other operand of an ``Add(out, R)`` / ``Add(R, out)`` the kernel can
    take in: R of `out`'s type and exact shape, the sum of that shape too."""
    if add.op_type != "Add" or add.domain not in _DEFAULT or len(add.input) != 2:
        return None
    if len(add.output) != 1 or not add.output[0] or list(add.input).count(out) != 1:
        return None
    r = add.input[1] if add.input[0] == out else add.input[0]
    if not r or g.ctx.elem_type(r) != t or g.ctx.elem_type(add.output[0]) != t:
        return None
    shape = _known_shape(g, out)
    if shape is None or _known_shape(g, r) != shape or _known_shape(g, add.output[0]) != shape:
        return None
    return r


def _batchnorm_ok(g: _Graph, bn: onnx.NodeProto, w: np.ndarray) -> bool:
    """An inference BatchNormalization over the Conv's channels whose inputs are constants of shape [C]."""
    if bn.op_type != "BatchNormalization" or bn.domain not in _DEFAULT or g.opset < 7 or len(bn.input) != 5:
        return False
    if len([o for o in bn.output if o]) != 1 or not bn.output[0]:
        return False
    if int(_attr(bn, "training_mode", 0)) != 0 or int(_attr(bn, "spatial", 1)) != 1:
        return False
    for name in bn.input[1:]:
        c = g.ctx.constants.get(name)
        if c is None or np.asarray(c).shape != (w.shape[0],) or g.ctx.elem_type(name) not in _FLOAT_TYPES | {
                int(onnx.TensorProto.DOUBLE)}:
            return False
    return True


def _fuse(g: _Graph, ci: int, claimed: set[int]) -> Rewrite | None:
    conv = g.nodes[ci]
    if conv.op_type != "Conv" or conv.domain not in _DEFAULT or len(conv.input) < 2 or len(conv.output) != 1:
        return None
    x, wname = conv.input[0], conv.input[1]
    bname = conv.input[2] if len(conv.input) > 2 else ""
    t = g.ctx.elem_type(x)
    if t not in _FLOAT_TYPES or g.ctx.elem_type(conv.output[0]) != t:
        return None
    group = [ci]
    inputs = [x, wname, bname]
    attrs: dict[str, Any] = {a.name: helper.get_attribute_value(a) for a in conv.attribute if a.name in _CONV_ATTRS}
    if len(attrs) != len(conv.attribute):
        return None  # an attribute this kernel does not know
    out = conv.output[0]
    nxt = g.sole_reader(out)
    w = g.ctx.constants.get(wname)
    if nxt is not None and w is not None and (not bname or bname in g.ctx.constants):
        bn = g.nodes[nxt]
        if _batchnorm_ok(g, bn, np.asarray(w)) and bn.input[0] == out and g.ctx.elem_type(bn.output[0]) == t:
            group.append(nxt)
            inputs += list(bn.input[1:5])
            attrs["bn_epsilon"] = float(_attr(bn, "epsilon", 1e-5))
            out = bn.output[0]
            nxt = g.sole_reader(out)
    residual = ""
    # An Add of two Conv branches (a projection shortcut) goes to the first
    # Conv that reaches it: the other keeps its own rewrite without it.
    if nxt is not None and nxt not in claimed:
        r = _residual(g, g.nodes[nxt], out, t)
        if r is not None:
            group.append(nxt)
            residual = r
            out = g.nodes[nxt].output[0]
            nxt = g.sole_reader(out)
    silu = _silu(g, out) if nxt is None else None
    if silu is not None:
        group.extend(silu)
        attrs["activation"] = "Swish"
        attrs["activation_params"] = [1.0]
        out = g.nodes[silu[1]].output[0]
    elif nxt is not None:
        act_node = g.nodes[nxt]
        act = _activation(g, act_node)
        if act is not None and act_node.input[0] == out and g.ctx.elem_type(act_node.output[0]) == t:
            group.append(nxt)
            attrs["activation"] = act[0]
            if act[1]:
                attrs["activation_params"] = act[1]
            out = act_node.output[0]
    if len(group) == 1:
        return None
    if len(inputs) == 3 and not bname and not residual:
        inputs = inputs[:2]
    if residual:
        inputs.append(residual)
    names = [g.ctx.node_names[i] for i in group]
    node = helper.make_node(FUSED_OP, inputs, [out], name=f"fused/{names[0]}", domain=FUSED_DOMAIN, **attrs)
    return Rewrite(node, tuple(names))


def fuse_conv(ctx: GraphPassContext) -> list[Rewrite]:
    """The pass: one rewrite per Conv with a BatchNormalization, a residual Add or an activation to take in."""
    g = _Graph(ctx)
    out = []
    claimed: set[int] = set()
    index = {name: i for i, name in enumerate(ctx.node_names)}
    for i in range(len(g.nodes)):
        rw = _fuse(g, i, claimed)
        if rw is not None:
            out.append(rw)
            claimed.update(index[n] for n in rw.replaces)
    return out


GRAPH_PASS = GraphPass(
    PASS_NAME, "olc-matmul", fuse_conv,
    # Ahead of elementwise-fusion, which would take the Add and the
    # activation after a Conv into a plan of their own first.
    order=-1,
    description="Conv [+ BatchNormalization folded into its weights] [+ residual Add] [+ Relu/Clip/LeakyRelu/"
                "HardSigmoid/Sigmoid/HardSwish/Swish, or x * Sigmoid(x)] -> one olc.fused::FusedConv",
)
