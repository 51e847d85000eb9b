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
- ``Conv [-> BatchNormalization] -> Mul / Add / Sub / Div`` by constants
  of one value or one per output channel (chained): composed into ``y * s
  + t`` per channel (attributes ``channel_scale``, ``channel_shift``) and
  folded into the weights with the normalization; W and the Conv's bias
  must be constants. PP-LCNet's learnable affine after each Conv.
- ``Conv [-> BatchNormalization] [-> affine] -> Add(., R)`` (a residual connection,
  either operand order): R becomes the FusedConv's last input, added to
  each output tile as it is stored (before the activation, if any). R must
  have exactly the Add's other operand's shape (every dimension known, no
  broadcasting) and type, and the Add's output the same.
- ``Conv [-> BatchNormalization] [-> Add] -> activation``: ``Relu``,
  ``Clip`` (bounds as attributes before opset 11, constant scalar inputs
  after), ``LeakyRelu``, ``HardSigmoid``, ``Sigmoid``, ``HardSwish``,
  ``Swish`` (opset 24), and SiLU as exporters write it, ``Mul(y,
  Sigmoid(y))`` (either operand order; the Sigmoid read by the Mul alone,
  ``y`` by the two alone), taken as ``Swish`` with alpha 1, and HardSwish
  written out, ``x * Clip(x + 3, 0, 6) / 6`` and its variants
  (``_gated``): applied by the kernel to each output tile as it is stored.
- ``... -> activation -> Mul / Add / Sub / Div`` by one-value constants:
  ``y * post_scale + post_shift`` (attributes), applied after the
  activation as the tiles are stored.

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


def _is_float(c: np.ndarray) -> bool:
    """A float constant (bfloat16 is a numpy extension type, of kind "V")."""
    return c.dtype.kind == "f" or c.dtype.name == "bfloat16"


def _scalar(g: _Graph, name: str) -> float | None:
    """The value of a one-element float constant."""
    c = g.constant(name)
    if c is None or c.size != 1 or not _is_float(c):
        return None
    return float(c.astype(np.float64).reshape(()))


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
            v = _scalar(g, name)
            if v is None:
                return None
            bounds[k] = v
        return (op, bounds)
    return None


def _is_f32(v: float | None, want: float) -> bool:
    """v, read as float32, is `want` rounded to float32."""
    return v is not None and np.float32(v) == np.float32(want)


def _divides_by_6(g: _Graph, node: onnx.NodeProto, value: str) -> bool:
    """``Div(value, 6)`` or ``Mul(value, 1/6)`` (either operand order)."""
    if node.domain not in _DEFAULT or len(node.input) != 2 or len(node.output) != 1:
        return False
    if node.op_type == "Div":
        return node.input[0] == value and _is_f32(_scalar(g, node.input[1]), 6.0)
    if node.op_type == "Mul" and value in node.input:
        other = node.input[1] if node.input[0] == value else node.input[0]
        return _is_f32(_scalar(g, other), 1.0 / 6.0)
    return False


def _gate(g: _Graph, i: int, x: str) -> tuple[str, list[float], list[int], str, bool] | None:
    """The gate a ``x * gate(x)`` activation starts with at node i:
    (activation, parameters, the gate's nodes, its output, whether the
    product still needs dividing by 6)."""
    node = g.nodes[i]
    if node.domain not in _DEFAULT or len(node.output) != 1 or not node.output[0]:
        return None
    if node.op_type == "Sigmoid" and list(node.input) == [x]:
        return ("Swish", [1.0], [i], node.output[0], False)
    if node.op_type == "HardSigmoid" and list(node.input) == [x]:
        if _is_f32(float(_attr(node, "alpha", 0.2)), 1.0 / 6.0) and float(_attr(node, "beta", 0.5)) == 0.5:
            return ("HardSwish", [], [i], node.output[0], False)
        return None
    # Clip(x + 3, 0, 6), optionally divided by 6 before the product.
    if node.op_type != "Add" or len(node.input) != 2 or x not in node.input:
        return None
    three = node.input[1] if node.input[0] == x else node.input[0]
    if not _is_f32(_scalar(g, three), 3.0):
        return None
    ci = g.sole_reader(node.output[0])
    if ci is None or g.nodes[ci].op_type != "Clip" or g.nodes[ci].input[0] != node.output[0]:
        return None
    clip = _activation(g, g.nodes[ci])
    if clip is None or clip[1] != [0.0, 6.0]:
        return None
    gate_nodes, out = [i, ci], g.nodes[ci].output[0]
    di = g.sole_reader(out)
    if di is not None and _divides_by_6(g, g.nodes[di], out):
        gate_nodes.append(di)
        return ("HardSwish", [], gate_nodes, g.nodes[di].output[0], False)
    return ("HardSwish", [], gate_nodes, out, True)


def _gated(g: _Graph, value: str) -> tuple[str, list[float], list[int], str] | None:
    """An activation written as ``value * gate(value)``: (its name, its
    parameters, the nodes, the output), when `value` is read by the gate's
    first node and the product alone and every value between by the next
    node alone, none a graph output:

    - SiLU ``x * Sigmoid(x)``: Swish with alpha 1;
    - HardSwish as ``x * HardSigmoid(x)`` (alpha 1/6, beta 1/2), as
      ``x * Clip(x + 3, 0, 6) / 6`` and as ``x * (Clip(x + 3, 0, 6) / 6)``
      (the division by 6 also as a product with 1/6).
    """
    if value in g.ctx.graph_outputs:
        return None
    readers = list(g.ctx.consumers.get(value, ()))
    if len(readers) != 2:
        return None
    for gi, mi in (readers, readers[::-1]):
        gate = _gate(g, gi, value)
        mul = g.nodes[mi]
        if gate is None or mul.op_type != "Mul" or mul.domain not in _DEFAULT or len(mul.output) != 1:
            continue
        name, params, nodes, gate_out, divide = gate
        if sorted(mul.input) != sorted([value, gate_out]) or g.sole_reader(gate_out) != mi:
            continue
        nodes = nodes + [mi]
        out = mul.output[0]
        if divide:
            di = g.sole_reader(out)
            if di is None or not _divides_by_6(g, g.nodes[di], out):
                continue
            nodes.append(di)
            out = g.nodes[di].output[0]
        t = g.ctx.elem_type(value)
        if all(g.ctx.elem_type(o) == t for k in nodes for o in g.nodes[k].output) and out:
            return name, params, nodes, out
    return None


def _affine_step(g: _Graph, node: onnx.NodeProto, value: str, size: int, rank: int) -> tuple[np.ndarray, np.ndarray] | None:
    """A Mul, Add, Sub or Div of `value` and a constant as ``value * s +
    t``: (s, t) in float64, each of one value or `size` values along axis 1
    of a rank-`rank` tensor (size 1: scalars only). None when the constant
    broadcasts along another axis or would grow the result."""
    if node.op_type not in ("Mul", "Add", "Sub", "Div") or node.domain not in _DEFAULT or len(node.input) != 2:
        return None
    if len(node.output) != 1 or not node.output[0] or list(node.input).count(value) != 1:
        return None
    first = node.input[0] == value
    c = g.constant(node.input[1] if first else node.input[0])
    if c is None or not _is_float(c) or c.ndim > rank:
        return None
    dims = (1,) * (rank - c.ndim) + c.shape
    if any(d != 1 for k, d in enumerate(dims) if k != 1) or dims[1] not in (1, size):
        return None
    v = c.astype(np.float64).reshape(-1)
    if not np.all(np.isfinite(v)) or (node.op_type == "Div" and not np.all(v != 0)):
        return None  # folded into the weights, these would not give the unfused graph's infinities and NaNs
    one, zero = np.ones_like(v), np.zeros_like(v)
    if node.op_type == "Mul":
        return v, zero
    if node.op_type == "Add":
        return one, v
    if node.op_type == "Sub":
        return (one, -v) if first else (-one, v)
    return (1.0 / v, zero) if first else None  # c / value is not an affine


def _affine(g: _Graph, value: str, size: int, rank: int) -> tuple[list[int], np.ndarray, np.ndarray, str]:
    """The chain of affine steps (_affine_step) from `value`, each value
    read by the next step alone: (nodes, s, t, output), s and t composed in
    float64 (one value, or `size`); no nodes when none follows."""
    nodes: list[int] = []
    s, t = np.ones(1), np.zeros(1)
    t_type = g.ctx.elem_type(value)
    while True:
        i = g.sole_reader(value)
        if i is None:
            return nodes, s, t, value
        step = _affine_step(g, g.nodes[i], value, size, rank)
        if step is None or g.ctx.elem_type(g.nodes[i].output[0]) != t_type:
            return nodes, s, t, value
        s, t = s * step[0], t * step[0] + step[1]
        nodes.append(i)
        value = g.nodes[i].output[0]


def _rank(g: _Graph, x: str, w: Any) -> int:
    """The Conv output's rank: W's, or X's when W is fed and X's is known;
    else 3, the least a Conv has (a constant of that rank cannot grow it)."""
    if w is not None:
        return int(np.asarray(w).ndim)
    s = g.ctx.shape(x)
    return len(s) if s is not None else 3


def _floats(v: np.ndarray) -> list[float]:
    """An affine's values as a FusedConv attribute: one when all agree."""
    return [float(v[0])] if np.all(v == v[0]) else [float(x) for x in v]


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
    # BatchNormalization and affines fold into W and the bias: both constant.
    foldable = w is not None and (not bname or bname in g.ctx.constants)
    if nxt is not None and foldable:
        bn = g.nodes[nxt]
        if _batchnorm_ok(g, bn, np.asarray(w)) and bn.input[0] == out and g.ctx.elem_type(bn.output[0]) == t:
            group.append(nxt)
            inputs += list(bn.input[1:5])
            attrs["bn_epsilon"] = float(_attr(bn, "epsilon", 1e-5))
            out = bn.output[0]
            nxt = g.sole_reader(out)
    # Mul / Add / Sub / Div by per-channel constants: folded into the weights.
    if nxt is not None and foldable:
        wa = np.asarray(w)
        nodes, sc, sh, aff_out = _affine(g, out, wa.shape[0], wa.ndim)
        if nodes:
            group.extend(nodes)
            attrs["channel_scale"] = _floats(sc)
            attrs["channel_shift"] = _floats(sh)
            out = aff_out
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
    gated = _gated(g, out) if nxt is None else None
    act: tuple[str, list[float]] | None = None
    if gated is not None:
        act = (gated[0], gated[1])
        group.extend(gated[2])
        out = gated[3]
    elif nxt is not None:
        act_node = g.nodes[nxt]
        act = _activation(g, act_node)
        if act is not None and act_node.input[0] == out and g.ctx.elem_type(act_node.output[0]) == t:
            group.append(nxt)
            out = act_node.output[0]
        else:
            act = None
    if act is not None:
        attrs["activation"] = act[0]
        if act[1]:
            attrs["activation_params"] = act[1]
        # A scalar affine after the activation (PP-LCNet's blocks), applied
        # as the activated tiles are stored.
        nodes, sc, sh, aff_out = _affine(g, out, 1, _rank(g, x, w))
        if nodes:
            group.extend(nodes)
            attrs["post_scale"] = float(sc[0])
            attrs["post_shift"] = float(sh[0])
            out = aff_out
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
    description="Conv [+ BatchNormalization and constant Mul/Add folded into its weights] [+ residual Add] "
                "[+ Relu/Clip/LeakyRelu/HardSigmoid/Sigmoid/HardSwish/Swish, or x * Sigmoid(x), or HardSwish "
                "written out] [+ scalar Mul/Add] -> one olc.fused::FusedConv",
)
