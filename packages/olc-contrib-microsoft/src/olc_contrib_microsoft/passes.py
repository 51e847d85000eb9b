"""Graph passes of olc-contrib-microsoft: the subgraphs raw exports write for
the transformer operators this family runs in one kernel.

- ``Add`` + ``LayerNormalization`` -> ``SkipLayerNormalization``;
  ``Add`` + ``SimplifiedLayerNormalization`` / ``RMSNormalization`` ->
  ``SkipSimplifiedLayerNormalization``. A preceding ``Add`` of a 1-D
  constant bias (``MatMul -> Add(bias) -> Add(residual)``) is folded in as
  the bias input. When the sum is read elsewhere too (the residual stream of
  pre-norm decoders), the fused node gives it as its
  ``input_skip_bias_sum`` output, and then no bias is folded: the sum keeps
  the additions of the original graph, bit for bit.
- ``x * 0.5 * (1 + erf(x / sqrt 2))`` -> ``Gelu``, and with a preceding bias
  ``Add`` -> ``BiasGelu``; ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715
  x^3)))`` -> ``FastGelu`` (with its bias input when there is one). The
  three factors of the product may come in any grouping and order, the
  cube as ``Pow(x, 3)`` or two ``Mul``; the scalars may be initializers or
  ``Constant`` nodes.

A rewrite is proposed only when the types and shapes allow it: one float
type T (float32, float16, bfloat16) throughout, the normalization over the
last axis only with a scale (and bias) of exactly [hidden], the addends of
the residual sum provably of the sum's shape (or, for the skip, [1, S, H] /
[S, H]), intermediate values read by nothing outside the group and no graph
output. Shapes come from shape inference with symbolic data propagation (so
the dimensions that Shape -> Gather -> Concat -> Reshape chains carry are
known to be equal); a dimension that stays unknown stops the rewrite.
The session still checks each rewrite and creates its kernel before taking
it; ``kernel_plan()`` lists the fused node with the nodes it replaced.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import ml_dtypes
import numpy as np
import onnx
from onnx import helper

from olc_core import GraphPass, GraphPassContext, Rewrite

from .manifest import DOMAIN

PASS_NAME = "contrib-microsoft-transformer"

_FLOAT_TYPES = {int(onnx.TensorProto.FLOAT), int(onnx.TensorProto.FLOAT16), int(onnx.TensorProto.BFLOAT16)}
_DEFAULT = ("", "ai.onnx")
_REL = 1e-4  # how close a pattern's float32 scalar must be to its constant (relative)

Dim = int | str | None


class _Graph:
    """The context with what the matchers need: producers, constants
    (initializers and Constant nodes) and shapes with data propagation (the
    context's, shared with other passes)."""

    def __init__(self, ctx: GraphPassContext):
        self.ctx = ctx
        self.nodes = list(ctx.graph.node)
        self.producer = ctx.producers
        self.shapes = ctx.propagated_shapes()
        self.claimed: set[int] = set()

    def node_of(self, value: str, op: str | Sequence[str]) -> int | None:
        """The index of the node of type `op` (ai.onnx) producing `value`, unclaimed."""
        i = self.producer.get(value)
        if i is None or i in self.claimed:
            return None
        n = self.nodes[i]
        ops = (op,) if isinstance(op, str) else tuple(op)
        return i if n.op_type in ops and n.domain in _DEFAULT else None

    def const(self, value: str) -> np.ndarray | None:
        """An initializer no feed replaces, or a Constant node's tensor."""
        c = self.ctx.constants.get(value)
        return None if c is None else np.asarray(c)

    def scalar(self, value: str, want: float) -> bool:
        """Whether `value` is a one-element constant equal to `want` (to its
        type's precision: a float16 sqrt(2) is 1.4140625)."""
        c = self.const(value)
        if c is None or c.size != 1:
            return False
        if c.dtype.kind in "iu":
            rel = 0.0
        elif c.dtype.kind == "f" or c.dtype == ml_dtypes.bfloat16:
            rel = max(_REL, float(ml_dtypes.finfo(c.dtype).eps))
        else:
            return False
        v = float(c.astype(np.float64).reshape(()))
        return math.isfinite(v) and abs(v - want) <= rel * abs(want)

    def shape(self, value: str) -> tuple[Dim, ...] | None:
        return self.shapes.get(value)

    def private(self, value: str, group: set[int]) -> bool:
        """Read only by nodes of `group`, and not a graph output."""
        if value in self.ctx.graph_outputs:
            return False
        return all(c in group for c in self.ctx.consumers.get(value, ()))

    def elem(self, value: str) -> int:
        return self.ctx.elem_type(value)

    def name(self, i: int) -> str:
        return self.ctx.node_names[i]


def _same_dim(a: Dim, b: Dim) -> bool:
    return a is not None and a == b


def _same_shape(a: tuple[Dim, ...] | None, b: tuple[Dim, ...] | None) -> bool:
    return a is not None and b is not None and len(a) == len(b) and all(_same_dim(x, y) for x, y in zip(a, b))


def _attr(node: onnx.NodeProto, name: str, default: Any) -> Any:
    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def _other(node: onnx.NodeProto, value: str) -> str | None:
    """The other input of a two-input node one of whose inputs is `value`."""
    if len(node.input) != 2:
        return None
    a, b = node.input
    if a == value:
        return b
    if b == value:
        return a
    return None


# --------------------------------------------------- residual + normalization

_NORMS = {
    # op: (fused op, whether it has a beta input before its bias)
    "LayerNormalization": ("SkipLayerNormalization", True),
    "SimplifiedLayerNormalization": ("SkipSimplifiedLayerNormalization", False),
    "RMSNormalization": ("SkipSimplifiedLayerNormalization", False),
}


def _skip_fits(g: _Graph, skip: str, full: tuple[Dim, ...]) -> bool:
    """skip may be the sum's shape, or for a 3-D sum [1, S, H] or [S, H]."""
    s = g.shape(skip)
    if _same_shape(s, full):
        return True
    if s is None or len(full) != 3:
        return False
    return (len(s) == 3 and s[0] == 1 and _same_dim(s[1], full[1]) and _same_dim(s[2], full[2])) or (
        len(s) == 2 and _same_dim(s[0], full[1]) and _same_dim(s[1], full[2]))


def _bias_add(g: _Graph, value: str, hidden: int, t: int, full: tuple[Dim, ...], group: set[int]) -> tuple[int, str,
                                                                                                             str] | None:
    """(node, other operand, bias) when `value` is Add(m, bias) of a 1-D
    constant [hidden] of type t, m of the full shape, value read only by
    `group`."""
    i = g.node_of(value, "Add")
    if i is None or not g.private(value, group):
        return None
    node = g.nodes[i]
    if len(node.input) != 2:
        return None
    for m, b in (node.input, node.input[::-1]):
        c = g.const(b)
        if c is not None and c.shape == (hidden,) and g.elem(b) == t and _same_shape(g.shape(m), full) \
                and g.elem(m) == t:
            return i, m, b
    return None


def _fuse_norm(g: _Graph, ni: int) -> Rewrite | None:
    norm = g.nodes[ni]
    spec = _NORMS.get(norm.op_type)
    if spec is None or norm.domain not in _DEFAULT or ni in g.claimed:
        return None
    fused_op, has_beta = spec
    if norm.op_type == "LayerNormalization" and g.ctx.opsets.get("ai.onnx", 0) < 17:
        return None
    if len(norm.input) < 2 or not norm.input[1] or len(norm.input) > (3 if has_beta else 2):
        return None
    if _attr(norm, "stash_type", 1) != 1 or any(o for o in norm.output[1:] if o and not g.private(o, {ni})):
        return None
    s = norm.input[0]
    full = g.shape(s)
    t = g.elem(s)
    if full is None or len(full) not in (2, 3) or not isinstance(full[-1], int) or t not in _FLOAT_TYPES:
        return None
    axis = _attr(norm, "axis", -1)
    if axis not in (-1, len(full) - 1):
        return None
    hidden = full[-1]
    params = [p for p in norm.input[1:] if p]
    if any(g.shape(p) != (hidden,) or g.elem(p) != t for p in params):
        return None
    ai = g.node_of(s, "Add")
    if ai is None:
        return None
    add = g.nodes[ai]
    if len(add.input) != 2 or any(g.elem(v) != t for v in add.input):
        return None
    # The sum is read elsewhere: the fused node gives it (output 3), with the
    # original additions (no bias folded).
    shared = not g.private(s, {ai, ni})
    group = {ai, ni}
    choice = None
    for x, skip in (add.input, add.input[::-1]):
        if not (_same_shape(g.shape(x), full) and _skip_fits(g, skip, full)):
            continue
        bias = None if shared else _bias_add(g, x, hidden, t, full, group)
        if bias is not None or choice is None:
            choice = (x, skip, bias)
        if bias is not None:
            break
    if choice is None:
        return None
    x, skip, bias = choice
    replaced = [ai, ni]
    inputs = [x, skip, norm.input[1]]
    if has_beta:
        inputs.append(norm.input[2] if len(norm.input) > 2 else "")
    if bias is not None:
        bi, m, b = bias
        replaced.insert(0, bi)
        inputs[0] = m
        inputs.append(b)
    while inputs[-1] == "":
        inputs.pop()
    outputs = [norm.output[0]] + (["", "", s] if shared else [])
    eps = float(_attr(norm, "epsilon", 1e-5))
    fused = helper.make_node(fused_op, inputs, outputs, name=f"{g.name(ni)}/{fused_op}", domain=DOMAIN, epsilon=eps)
    g.claimed.update(replaced)
    return Rewrite(fused, tuple(g.name(i) for i in replaced))


# ------------------------------------------------------------------- GELU


def _product_of_three(g: _Graph, x: str, h: str) -> tuple[list[int], str] | None:
    """y = x * h * 0.5 in any grouping and order, from the consumer of h
    (the 1 + erf(...) or 1 + tanh(...) value): (the Mul nodes, y)."""
    def only_mul(value: str) -> int | None:
        cons = g.ctx.consumers.get(value, ())
        if len(cons) != 1 or cons[0] in g.claimed:
            return None
        n = g.nodes[cons[0]]
        return cons[0] if n.op_type == "Mul" and n.domain in _DEFAULT and len(n.input) == 2 else None

    m1 = only_mul(h)
    if m1 is None:
        return None
    n1 = g.nodes[m1]
    o1 = _other(n1, h) or ""
    if o1 == x or g.scalar(o1, 0.5):
        # (x * h) * 0.5, or (h * 0.5) * x
        m2 = only_mul(n1.output[0])
        if m2 is None:
            return None
        o2 = _other(g.nodes[m2], n1.output[0]) or ""
        if (o1 == x and g.scalar(o2, 0.5)) or (o1 != x and o2 == x):
            return [m1, m2], g.nodes[m2].output[0]
        return None
    # h * (x * 0.5)
    half = g.node_of(o1, "Mul")
    if half is not None and _other(g.nodes[half], x) is not None and g.scalar(_other(g.nodes[half], x) or "", 0.5):
        return [half, m1], n1.output[0]
    return None


def _one_plus(g: _Graph, value: str) -> tuple[int, str] | None:
    """The Add node computing 1 + value (either order) and its output."""
    cons = g.ctx.consumers.get(value, ())
    if len(cons) != 1:
        return None
    i = cons[0]
    n = g.nodes[i]
    if n.op_type != "Add" or n.domain not in _DEFAULT or i in g.claimed:
        return None
    other = _other(n, value)
    return (i, n.output[0]) if other and g.scalar(other, 1.0) else None


def _gelu_rewrite(g: _Graph, x: str, nodes: list[int], y: str, approximate: bool) -> Rewrite | None:
    """Gelu / BiasGelu (erf) or FastGelu (tanh) of x replacing `nodes`."""
    group = set(nodes)
    t = g.elem(x)
    if t not in _FLOAT_TYPES or g.elem(y) != t:
        return None
    # every intermediate of the pattern read only inside it
    for i in nodes:
        for o in g.nodes[i].output:
            if o and o != y and not g.private(o, group):
                return None
    shape = g.shape(x)
    inputs = [x]
    if shape is not None and shape and isinstance(shape[-1], int):
        bias = _bias_add(g, x, shape[-1], t, shape, group)
        if bias is not None:
            bi, m, b = bias
            nodes = [bi, *nodes]
            inputs = [m, b]
    op = "FastGelu" if approximate else ("BiasGelu" if len(inputs) == 2 else "Gelu")
    last = max(nodes)
    fused = helper.make_node(op, inputs, [y], name=f"{g.name(last)}/{op}", domain=DOMAIN)
    g.claimed.update(nodes)
    return Rewrite(fused, tuple(g.name(i) for i in sorted(nodes)))


def _fuse_erf_gelu(g: _Graph, ei: int) -> Rewrite | None:
    erf = g.nodes[ei]
    if erf.domain not in _DEFAULT or len(erf.input) != 1 or ei in g.claimed:
        return None
    di = g.node_of(erf.input[0], ("Div", "Mul"))
    if di is None:
        return None
    d = g.nodes[di]
    x = None
    for a, b in (d.input, d.input[::-1]) if d.op_type == "Mul" else ((d.input[0], d.input[1]),):
        if g.scalar(b, math.sqrt(2.0) if d.op_type == "Div" else math.sqrt(0.5)):
            x = a
            break
    if x is None:
        return None
    plus = _one_plus(g, erf.output[0])
    prod = _product_of_three(g, x, plus[1]) if plus else None
    if plus is None or prod is None:
        return None
    return _gelu_rewrite(g, x, [di, ei, plus[0], *prod[0]], prod[1], approximate=False)


def _cube_of(g: _Graph, value: str) -> tuple[str, list[int]] | None:
    """(x, nodes) when value is x^3: Pow(x, 3) or Mul(x, Mul(x, x)) in either order."""
    i = g.node_of(value, ("Pow", "Mul"))
    if i is None:
        return None
    n = g.nodes[i]
    if n.op_type == "Pow":
        return (n.input[0], [i]) if len(n.input) == 2 and g.scalar(n.input[1], 3.0) else None
    for a, b in (n.input, n.input[::-1]):
        j = g.node_of(b, "Mul")
        if j is not None and list(g.nodes[j].input) == [a, a]:
            return a, [j, i]
    return None


def _fuse_tanh_gelu(g: _Graph, ti: int) -> Rewrite | None:
    tanh = g.nodes[ti]
    if tanh.domain not in _DEFAULT or len(tanh.input) != 1 or ti in g.claimed:
        return None
    ui = g.node_of(tanh.input[0], "Mul")  # sqrt(2/pi) * v
    if ui is None:
        return None
    v = next((a for a, b in (g.nodes[ui].input, g.nodes[ui].input[::-1]) if g.scalar(b, math.sqrt(2 / math.pi))),
             None)
    vi = g.node_of(v, "Add") if v else None  # x + 0.044715 x^3
    if vi is None:
        return None
    for x, w in (g.nodes[vi].input, g.nodes[vi].input[::-1]):
        wi = g.node_of(w, "Mul")
        if wi is None:
            continue
        for cube, c in (g.nodes[wi].input, g.nodes[wi].input[::-1]):
            if not g.scalar(c, 0.044715):
                continue
            cb = _cube_of(g, cube)
            if cb is None or cb[0] != x:
                continue
            plus = _one_plus(g, tanh.output[0])
            prod = _product_of_three(g, x, plus[1]) if plus else None
            if plus is None or prod is None:
                return None
            return _gelu_rewrite(g, x, [*cb[1], wi, vi, ui, ti, plus[0], *prod[0]], prod[1], approximate=True)
    return None


# ------------------------------------------------------------------- pass

_TRIGGERS = {"LayerNormalization", "SimplifiedLayerNormalization", "RMSNormalization", "Erf", "Tanh"}


def fuse_transformer_subgraphs(ctx: GraphPassContext) -> list[Rewrite]:
    if not any(n.op_type in _TRIGGERS and n.domain in _DEFAULT for n in ctx.graph.node):
        return []
    g = _Graph(ctx)
    out: list[Rewrite] = []
    for i, n in enumerate(g.nodes):
        rw = None
        if n.op_type in _NORMS:
            rw = _fuse_norm(g, i)
        elif n.op_type == "Erf":
            rw = _fuse_erf_gelu(g, i)
        elif n.op_type == "Tanh":
            rw = _fuse_tanh_gelu(g, i)
        if rw is not None:
            out.append(rw)
    return out


GRAPH_PASS = GraphPass(
    PASS_NAME, "olc-contrib-microsoft", fuse_transformer_subgraphs,
    description="Add + LayerNormalization / SimplifiedLayerNormalization / RMSNormalization -> "
                "Skip(Simplified)LayerNormalization (bias folded); erf and tanh GELU subgraphs -> "
                "Gelu / BiasGelu / FastGelu",
)

