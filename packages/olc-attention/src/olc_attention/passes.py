"""The graph pass of olc-attention: the unfused attention of encoder exports
as one node.

torch.onnx writes a BERT-style self-attention as::

    q = Transpose(Reshape(q_proj, [B, S, N, D]), perm=[0, 2, 1, 3])
    k = Transpose(Reshape(k_proj, [B, T, N, D]), perm=[0, 2, 3, 1])   # or [0, 2, 1, 3] then [0, 1, 3, 2]
    v = Transpose(Reshape(v_proj, [B, T, N, Dv]), perm=[0, 2, 1, 3])
    p = Softmax(Add(Div(MatMul(q, k), c), mask), axis=-1)              # or Mul(., c); the Add optional
    y = Reshape(Transpose(MatMul(p, v), perm=[0, 2, 1, 3]), [B, S, N * Dv])

The pass replaces those nodes by one ``olc.fused::Attention`` node: ai.onnx
Attention's semantics on 3-D inputs (``q_num_heads = kv_num_heads = N``,
``scale`` = 1 / c or c, the mask as ``attn_mask``) on the family's engine,
which never forms the [B, N, S, T] score tensor. It is proposed only when
everything is known to fit:

- one float type (float32, float16, bfloat16) throughout; the projections
  3-D [B, S, N * D] with a static last axis, each Reshape's output proved
  (shape inference with symbolic data propagation) to be [B, S, N, D] with
  B and S the projection's own first two dimensions (so the Reshape only
  splits the last axis), the same N for Q, K and V, and the same D for Q
  and K; the merge Reshape's output [B, S, N * Dv];
- the scale a finite, non-zero one-element constant (an initializer or a
  Constant node);
- the Softmax over the last axis;
- the mask, when there is one, of rank 4 or less, each dimension 1, the
  target's [B, N, S, T] or symbolic (the kernel checks it against the
  target when it runs, failing where the Add would have; a mask of one key
  column is added to every key, as the Add broadcast it);
- every intermediate value read by no node outside the group and no graph
  output.

Anything else leaves the graph as it is. The session still checks the
rewrite and creates the kernel before taking it; ``kernel_plan(
expand_fused=True)`` shows each replaced node with the fused one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
from onnx import helper

from olc_core import FUSED_DOMAIN, GraphPass, GraphPassContext, Rewrite

from .manifest import FAMILY

PASS_NAME = "attention-fusion"
FUSED_OP = "Attention"

_FLOATS = {int(onnx.TensorProto.FLOAT), int(onnx.TensorProto.FLOAT16), int(onnx.TensorProto.BFLOAT16)}
_DEFAULT = ("", "ai.onnx")

Dim = int | str | None
Shape = tuple[Dim, ...]


class _Graph:
    """Producers, constants (initializers and Constant nodes) and shapes with
    data propagation (the context's, shared with other passes), over the
    pass context."""

    def __init__(self, ctx: GraphPassContext):
        self.ctx = ctx
        self.nodes = list(ctx.graph.node)
        self.producer = ctx.producers
        self.shapes = ctx.propagated_shapes()

    def made_by(self, value: str, op: str) -> int | None:
        """The index of the ai.onnx `op` node producing `value`, or None."""
        i = self.producer.get(value)
        if i is None:
            return None
        n = self.nodes[i]
        return i if n.op_type == op and n.domain in _DEFAULT else None

    def const(self, value: str) -> np.ndarray | None:
        """An initializer no feed replaces, or a Constant node's tensor."""
        c = self.ctx.constants.get(value)
        return None if c is None else np.asarray(c)

    def shape(self, value: str) -> Shape | None:
        return self.shapes.get(value)

    def private(self, value: str, group: set[int]) -> bool:
        """Read only by nodes of `group`, and not a graph output."""
        return value not in self.ctx.graph_outputs and all(c in group for c in self.ctx.consumers.get(value, ()))


def _same(a: Dim, b: Dim) -> bool:
    return a is not None and a == b


def _attr(node: onnx.NodeProto, name: str, default: Any) -> Any:
    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def _perm(g: _Graph, i: int | None) -> list[int] | None:
    return None if i is None else list(_attr(g.nodes[i], "perm", []))


def _heads(g: _Graph, value: str, perms: Sequence[Sequence[int]], group: list[int]) -> tuple[str, Shape] | None:
    """`value` = Transpose(... Transpose(Reshape(x, [B, S, N, D]))) with the
    given perms, innermost last: x and the split shape (B, S, N, D), the
    nodes appended to `group`."""
    nodes = []
    for perm in perms:
        t = g.made_by(value, "Transpose")
        if t is None or _perm(g, t) != list(perm):
            return None
        nodes.append(t)
        value = g.nodes[t].input[0]
    r = g.made_by(value, "Reshape")
    if r is None:
        return None
    x = g.nodes[r].input[0]
    src, split = g.shape(x), g.shape(g.nodes[r].output[0])
    if src is None or split is None or len(src) != 3 or len(split) != 4:
        return None
    b, s, n, d = split
    if not (_same(b, src[0]) and _same(s, src[1]) and isinstance(n, int) and isinstance(d, int)
            and isinstance(src[2], int) and n > 0 and n * d == src[2]):
        return None
    group.extend([*nodes, r])
    return x, split


def _scaled_scores(g: _Graph, value: str) -> tuple[int, int, float] | None:
    """`value` = Div(MatMul(.), c) or Mul(MatMul(.), c) (either order) with c
    a finite, non-zero one-element float constant: the indices of the scale
    node and the MatMul, and the factor applied to the scores."""
    sc = g.producer.get(value)
    if sc is None or g.nodes[sc].op_type not in ("Div", "Mul") or g.nodes[sc].domain not in _DEFAULT:
        return None
    node = g.nodes[sc]
    if len(node.input) != 2:
        return None
    orders = [(0, 1)] if node.op_type == "Div" else [(0, 1), (1, 0)]
    for si, ci in orders:
        qk = g.made_by(node.input[si], "MatMul")
        c = g.const(node.input[ci])
        if qk is None or c is None or c.size != 1 or (c.dtype.kind != "f" and str(c.dtype) != "bfloat16"):
            continue
        v = float(c.astype(np.float64).reshape(()))
        if math.isfinite(v) and v != 0.0:
            return sc, qk, 1.0 / v if node.op_type == "Div" else v
    return None


def _mask_fits(mask: Shape | None, target: Shape) -> bool:
    """Whether the mask may broadcast to target [B, N, S, T] without
    enlarging it: rank 1 to 4, each dimension 1, provably the target's, or
    symbolic (the fused kernel checks it when it runs, where the Add would
    have failed on a mismatch); a fixed size that cannot fit refuses it."""
    if mask is None or not 1 <= len(mask) <= 4:
        return False
    for m, t in zip(reversed(mask), reversed(target)):
        if m == 1 or _same(m, t):
            continue
        if isinstance(m, int) and isinstance(t, int):
            return False
        if isinstance(m, int) and m > 1 and t == 1:
            return False
    return True


def _match(g: _Graph, softmax: int) -> Rewrite | None:
    sm = g.nodes[softmax]
    group = [softmax]
    probs_in = sm.input[0]
    rank = len(g.shape(probs_in) or ())
    axis = int(_attr(sm, "axis", -1 if g.ctx.opsets.get("ai.onnx", 13) >= 13 else 1))
    if rank != 4 or axis not in (-1, 3):
        return None
    # The scaled scores, after an optional mask Add (either operand order).
    mask = ""
    found = _scaled_scores(g, probs_in)
    add = g.made_by(probs_in, "Add") if found is None else None
    if add is not None:
        a, b = g.nodes[add].input
        for scaled, other in ((a, b), (b, a)):
            found = _scaled_scores(g, scaled)
            if found is not None:
                mask = other
                group.append(add)
                break
    if found is None:
        return None
    sc, qk, scale = found
    group += [sc, qk]
    q_t, k_t = g.nodes[qk].input
    q = _heads(g, q_t, [[0, 2, 1, 3]], group)
    k = _heads(g, k_t, [[0, 2, 3, 1]], group) or _heads(g, k_t, [[0, 1, 3, 2], [0, 2, 1, 3]], group)
    if q is None or k is None:
        return None
    # The output side: MatMul(probs, v) -> Transpose -> Reshape [B, S, N * Dv].
    probs = sm.output[0]
    pv = list(g.ctx.consumers.get(probs, ()))
    if len(pv) != 1 or g.nodes[pv[0]].op_type != "MatMul" or g.nodes[pv[0]].domain not in _DEFAULT \
            or g.nodes[pv[0]].input[0] != probs:
        return None
    group.append(pv[0])
    v = _heads(g, g.nodes[pv[0]].input[1], [[0, 2, 1, 3]], group)
    if v is None:
        return None
    after = g.ctx.consumers.get(g.nodes[pv[0]].output[0], ())
    merge_t = after[0] if len(after) == 1 else None
    if merge_t is None or g.nodes[merge_t].op_type != "Transpose" or _perm(g, merge_t) != [0, 2, 1, 3]:
        return None
    after = g.ctx.consumers.get(g.nodes[merge_t].output[0], ())
    merge_r = after[0] if len(after) == 1 else None
    if merge_r is None or g.nodes[merge_r].op_type != "Reshape" or g.nodes[merge_r].domain not in _DEFAULT \
            or g.nodes[merge_r].input[0] != g.nodes[merge_t].output[0]:
        return None
    group += [merge_t, merge_r]

    (xq, (b, s, n, d)), (xk, (bk, t, nk, dk)), (xv, (bv, tv, nv, dv)) = q, k, v
    merged = g.shape(g.nodes[merge_r].output[0])
    if not (nk == nv == n and dk == d and _same(bk, b) and _same(bv, b) and _same(t, tv)
            and merged is not None and len(merged) == 3 and _same(merged[0], b) and _same(merged[1], s)
            and isinstance(n, int) and isinstance(dv, int) and merged[2] == n * dv):
        return None
    if mask and not _mask_fits(g.shape(mask), (b, n, s, t)):
        return None
    values = [xq, xk, xv] + ([mask] if mask else [])
    elem = g.ctx.elem_type(xq)
    if elem not in _FLOATS or any(g.ctx.elem_type(x) != elem for x in values):
        return None
    members = set(group)
    for i in group:
        if i == merge_r:
            continue
        if not all(g.private(o, members) for o in g.nodes[i].output if o):
            return None
    out = g.nodes[merge_r].output[0]
    fused = helper.make_node(FUSED_OP, values, [out], domain=FUSED_DOMAIN, q_num_heads=n, kv_num_heads=n,
                             scale=float(scale), name=f"{g.ctx.node_names[softmax]}/attention")
    return Rewrite(fused, tuple(g.ctx.node_names[i] for i in sorted(members)))


def run(ctx: GraphPassContext) -> list[Rewrite]:
    softmaxes = [i for i, n in enumerate(ctx.graph.node) if n.op_type == "Softmax" and n.domain in _DEFAULT]
    if not softmaxes:
        return []
    g = _Graph(ctx)
    rewrites = []
    for i in softmaxes:
        rw = _match(g, i)
        if rw is not None:
            rewrites.append(rw)
    return rewrites


GRAPH_PASS = GraphPass(
    name=PASS_NAME, family=FAMILY, run=run,
    description="MatMul(Q, K^T) -> scale -> [mask Add] -> Softmax -> MatMul(., V) with the head split and "
                "merge around it -> one olc.fused::Attention (ai.onnx Attention on 3-D Q, K, V)")


# ---------------------------------------------------------------- com.microsoft Attention's projection
#
# com.microsoft Attention (BERT) projects its input by constant weights
# [D_in, q + k + v hidden] before the attention. The split pass runs that
# product as an ai.onnx MatMul (olc-matmul packs the constant weights once,
# at session creation, for its GEMM) and the rest as one
# olc.fused::PackedQkvAttention node: the same attributes, the product as
# its first input, the bias added as Q, K and V are loaded (no biased copy),
# and mask_index, past and attention_bias as Attention takes them:
#
#     Attention(input, weights, bias, mask_index, past, attention_bias)
#  -> PackedQkvAttention(MatMul(input, weights), bias, mask_index, past, attention_bias)
#
# The session takes the split only when a native kernel accepts the MatMul
# (olc-matmul installed) and the attention node; otherwise Attention runs on
# its own kernel, projection included. Proposed only when the weights are a
# 2-D constant of the input's float type, the bias is absent or a constant
# of the weights' column count, the columns split as num_heads and
# qkv_hidden_sizes say, no past_sequence_length is given and the
# attributes are ones the attention node takes (num_heads, unidirectional,
# qkv_hidden_sizes, mask_filter_value, scale; do_rotary,
# rotary_embedding_dim and past_present_share_buffer only as 0); and,
# where inference knows the input's shape, it has rank 3 and (when static)
# the weights' row count as its last dimension. Where it does not (inference
# stops at the com.microsoft ops of an optimized graph), the MatMul and the
# attention node check the shapes when they run.

SPLIT_PASS_NAME = "attention-projection"
PACKED_OP = "PackedQkvAttention"
_MS = "com.microsoft"
_PACKED_ATTRIBUTES = {"num_heads", "unidirectional", "qkv_hidden_sizes", "mask_filter_value", "scale"}
_ZERO_ONLY = {"do_rotary", "rotary_embedding_dim", "past_present_share_buffer"}


def _fresh(ctx: GraphPassContext, taken: set[str], base: str) -> str:
    """A value name no value of the graph has (nor one this pass made)."""
    if not taken:
        g = ctx.graph
        taken.update(vi.name for vi in g.input)
        taken.update(t.name for t in g.initializer)
        taken.update(n for node in g.node for n in node.output if n)
    name, k = base, 0
    while name in taken:
        k += 1
        name = f"{base}_{k}"
    taken.add(name)
    return name


def _split(ctx: GraphPassContext, index: int, taken: set[str]) -> Rewrite | None:
    node = ctx.graph.node[index]
    ins = list(node.input) + [""] * (7 - len(node.input))
    if len(node.input) > 7 or ins[6] or not ins[0] or not ins[1]:
        return None
    x, weights, bias = ins[0], ins[1], ins[2]
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    if any(k not in _PACKED_ATTRIBUTES | _ZERO_ONLY for k in attrs) or any(attrs.get(k, 0) != 0 for k in _ZERO_ONLY):
        return None
    heads = attrs.get("num_heads")
    if not isinstance(heads, int) or heads <= 0:
        return None
    elem = ctx.elem_type(x)
    w = ctx.constants.get(weights)
    if elem not in _FLOATS or ctx.elem_type(weights) != elem or w is None or w.ndim != 2:
        return None
    shape = ctx.shape(x)
    if shape is not None and (len(shape) != 3 or (isinstance(shape[2], int) and shape[2] != w.shape[0])):
        return None
    cols = int(w.shape[1])
    if bias:
        b = ctx.constants.get(bias)
        if b is None or b.shape != (cols,) or ctx.elem_type(bias) != elem:
            return None
    sizes = attrs.get("qkv_hidden_sizes")
    if sizes is not None:
        if len(sizes) != 3 or sum(sizes) != cols:
            return None
    elif cols % 3 or (cols // 3) % heads:
        return None
    name = ctx.node_names[index]
    qkv = _fresh(ctx, taken, f"{name}/qkv")
    projection = helper.make_node("MatMul", [x, weights], [qkv], name=f"{name}/projection")
    rest = ins[2:6]
    while rest and not rest[-1]:
        rest.pop()
    packed = helper.make_node(PACKED_OP, [qkv, *rest], list(node.output), domain=FUSED_DOMAIN,
                              name=f"{name}/attention",
                              **{k: v for k, v in attrs.items() if k in _PACKED_ATTRIBUTES})
    return Rewrite(packed, (name,), before=(projection,))


def run_split(ctx: GraphPassContext) -> list[Rewrite]:
    taken: set[str] = set()
    rewrites = []
    for i, n in enumerate(ctx.graph.node):
        if n.op_type == "Attention" and n.domain == _MS:
            rw = _split(ctx, i, taken)
            if rw is not None:
                rewrites.append(rw)
    return rewrites


SPLIT_PASS = GraphPass(
    name=SPLIT_PASS_NAME, family=FAMILY, run=run_split,
    description="com.microsoft Attention with constant weights -> MatMul(input, weights) on the matmul family's "
                "packed GEMM, then olc.fused::PackedQkvAttention (bias added on load); taken only where a "
                "native MatMul kernel is installed")
