"""Graph passes: rewrites a kernel family offers before kernels are chosen.

A family returns :class:`GraphPass` records from the
``olc_register_graph_passes`` hook. When a session is created with
``fusion=True`` (the default), each pass is called once with a
:class:`GraphPassContext` (the graph after loading and type/shape inference)
and returns :class:`Rewrite` records: one replacement node standing for a
group of original nodes (and, when a pass splits a node, the nodes that run
before it). The session, not the pass, decides whether a rewrite is
applied: it checks the rewrite is well formed (see :func:`validate_rewrite`)
and that registered native kernels accept every node it makes (their
``create()`` succeeds); otherwise the original nodes run as if the pass had
not been there.

Passes never mutate the graph: every pass of a session gets the same context,
over the graph as loaded, and a rewrite takes effect only when the plan is
built after the last pass. So what the context derives from the graph (the
consumer and producer indexes, :meth:`GraphPassContext.propagated_shapes`)
is computed at most once and stays valid for every pass; the session checks
after each pass that the graph is unchanged and refuses a pass that changed
it.

Replacement nodes use a domain of their own (the elementwise family uses
``olc.fused``); the session runs them at opset 1 of that domain without the
model importing it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from .registration import normalize_domain

# The domain of replacement nodes made by the passes shipped with olc.
FUSED_DOMAIN = "olc.fused"
# Initializers up to this many elements keep their values for the shape
# inference of propagated_shapes (Reshape targets, axes); larger ones are
# given as typed inputs, so inference does not copy the weights.
_INFERENCE_MAX_CONSTANT = 1024
# onnx's data propagation holds one symbolic value per element of a 1-D
# tensor an op such as Cast, Add or Squeeze reads, whatever its length
# (0.3 s for 3M elements; a declared [2**40] input exhausted memory). Shape
# tensors are a few elements long and real 1-D weights (vocabulary biases)
# well under this: a graph with a longer 1-D value is inferred without it.
_DATA_PROP_MAX_1D = 1 << 20

Dim = int | str | None


@dataclass(frozen=True)
class Rewrite:
    """One replacement node and the names of the original nodes it replaces.

    ``node.output`` must be outputs of the replaced nodes; every other output
    of a replaced node must be read by no node outside the group and must
    not be a graph output. ``node.input`` must be values the group reads
    from outside itself, or outputs of ``before``.

    ``before``: nodes that run first, in order, when a pass splits a node
    rather than fusing several (com.microsoft Attention as a MatMul on the
    matmul family's kernel, then the attention on its result). Their
    outputs are new values: names no value of the graph has, each made
    once. Their inputs are values the group reads from outside itself or
    outputs of earlier ``before`` nodes. Each must run on a registered
    native kernel, at the model's opset of its domain (opset 1 of a domain
    the model does not import), or the session keeps the original nodes.
    """

    node: onnx.NodeProto
    replaces: tuple[str, ...]
    before: tuple[onnx.NodeProto, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "replaces", tuple(self.replaces))
        object.__setattr__(self, "before", tuple(self.before))


@dataclass(frozen=True)
class GraphPassContext:
    """What a pass sees: the graph, types, consumers, outputs and constants.

    ``node_names[i]`` is the name the session uses for ``graph.node[i]``
    (its own name, or ``f"{op_type}_{i}"`` when it has none).
    ``consumers[value]`` lists the indices of the nodes reading ``value``
    (subgraph reads of outer values included), ``producers[value]`` the
    index of the node making it. ``constants`` holds the initializers no
    feed can replace and the tensors of the graph's ``Constant`` nodes. The
    graph is read-only (see the module's docstring).
    """

    graph: onnx.GraphProto
    node_names: tuple[str, ...]
    value_types: Mapping[str, onnx.TypeProto]
    graph_outputs: frozenset[str]
    consumers: Mapping[str, tuple[int, ...]]
    constants: Mapping[str, np.ndarray]
    opsets: Mapping[str, int]
    producers: Mapping[str, int]
    # What the accessors computed, shared by every pass given this context.
    _cache: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    def elem_type(self, name: str) -> int:
        """The ONNX element type code of a value, 0 when not known."""
        tp = self.value_types.get(name)
        if tp is not None and tp.WhichOneof("value") == "tensor_type":
            return int(tp.tensor_type.elem_type)
        return 0

    def shape(self, name: str) -> tuple[int | str | None, ...] | None:
        """The inferred shape (ints, symbolic names or None per dimension), or None."""
        tp = self.value_types.get(name)
        if tp is None or tp.WhichOneof("value") != "tensor_type" or not tp.tensor_type.HasField("shape"):
            return None
        dims: list[int | str | None] = []
        for d in tp.tensor_type.shape.dim:
            if d.HasField("dim_value"):
                dims.append(int(d.dim_value))
            elif d.HasField("dim_param"):
                dims.append(d.dim_param)
            else:
                dims.append(None)
        return tuple(dims)

    def propagated_shapes(self) -> Mapping[str, tuple[Dim, ...]]:
        """Shapes from onnx shape inference with data propagation, by value name.

        Data propagation carries the dimensions that ``Shape -> Gather ->
        Concat -> Reshape`` chains compute, so a Reshape's output gets the
        graph inputs' symbolic dimensions (``("batch", "sequence", 12, 32)``)
        where :meth:`shape` has none. A value inference leaves unshaped
        keeps the context's shape. Computed on the first call and shared by
        every pass of the session (inference of a large graph takes
        milliseconds; the graph does not change while passes run).
        """
        shapes = self._cache.get("propagated_shapes")
        if shapes is None:
            shapes = MappingProxyType(_propagated_shapes(self))
            self._cache["propagated_shapes"] = shapes
        return shapes


def inference_constants(graph: onnx.GraphProto, skip: set[str],
                        max_elements: int) -> tuple[list[onnx.TensorProto], list[onnx.ValueInfoProto]]:
    """The initializers as shape inference should get them: those of at
    most max_elements elements as constants, the larger ones as typed inputs
    (their values would only cost inference time); names in skip (the graph
    inputs a feed may replace them by) left out."""
    constants, typed = [], []
    for init in graph.initializer:
        if init.name in skip:
            continue
        if int(np.prod(init.dims, dtype=np.int64)) <= max_elements:
            constants.append(init)
        else:
            typed.append(helper.make_tensor_value_info(init.name, init.data_type, list(init.dims)))
    return constants, typed


def _propagated_shapes(ctx: GraphPassContext) -> dict[str, tuple[Dim, ...]]:
    """The context's shapes, overlaid with those of inference with data
    propagation over the graph (initializers over _INFERENCE_MAX_CONSTANT
    elements given as typed inputs; no propagation where a 1-D value is
    longer than _DATA_PROP_MAX_1D)."""
    g = ctx.graph
    small, typed = inference_constants(g, {vi.name for vi in g.input}, _INFERENCE_MAX_CONSTANT)
    inputs = list(g.input) + typed
    out: dict[str, tuple[Dim, ...]] = {}
    for name in ctx.value_types:
        s = ctx.shape(name)
        if s is not None:
            out[name] = s
    graph = helper.make_graph(g.node, g.name or "g", inputs, [onnx.ValueInfoProto(name=o.name) for o in g.output],
                              initializer=small)
    opsets = [helper.make_opsetid("" if d == "ai.onnx" else d, v) for d, v in ctx.opsets.items()]
    data_prop = not any(len(s) == 1 and isinstance(s[0], int) and s[0] > _DATA_PROP_MAX_1D for s in out.values())
    try:
        inferred = onnx.shape_inference.infer_shapes(helper.make_model(graph, opset_imports=opsets),
                                                     strict_mode=False, data_prop=data_prop)
    except Exception:  # noqa: BLE001 - inference is best effort: the context's shapes stay
        return out
    for vi in list(inferred.graph.value_info) + list(inferred.graph.input) + list(inferred.graph.output):
        t = vi.type
        if t.WhichOneof("value") != "tensor_type" or not t.tensor_type.HasField("shape"):
            continue
        out[vi.name] = tuple(int(d.dim_value) if d.HasField("dim_value") else (d.dim_param or None)
                             for d in t.tensor_type.shape.dim)
    return out


def graph_digest(graph: onnx.GraphProto) -> bytes:
    """A digest of what a pass could change and the context derives from:
    the nodes, the graph's inputs and outputs, and the initializers' names,
    types and shapes (not their data). Cheap: a fraction of a millisecond
    for a few hundred nodes."""
    h = hashlib.blake2b(digest_size=16)
    for part in (graph.node, graph.input, graph.output):
        h.update(len(part).to_bytes(8, "little"))
        for item in part:
            data = item.SerializeToString()
            h.update(len(data).to_bytes(8, "little"))
            h.update(data)
    for init in graph.initializer:
        h.update(repr((init.name, init.data_type, tuple(init.dims))).encode())
    return h.digest()


@dataclass(frozen=True)
class GraphPass:
    """A named rewrite function offered by a family.

    ``run(context) -> Sequence[Rewrite]``. ``kind`` says what turns the pass
    on: ``"fusion"`` passes run only when the session's ``fusion`` is on.

    Passes run in ``(order, family, name)`` order, and a node a rewrite
    took is not offered to a later pass: a pass that takes in the
    elementwise nodes after its own anchor op (a Conv's residual Add and
    activation) runs with a negative ``order``, ahead of the generic
    elementwise fusion that would otherwise take those nodes first.
    """

    name: str
    family: str
    run: Callable[[GraphPassContext], Sequence[Rewrite]] = field(compare=False)
    kind: str = "fusion"
    description: str = ""
    order: int = 0

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("a graph pass needs a name")
        if self.kind != "fusion":
            raise ValueError(f"graph pass {self.name!r}: unknown kind {self.kind!r} (only 'fusion' exists)")


def is_constant_node(node: onnx.NodeProto) -> bool:
    """Whether node is an ai.onnx Constant with its one output: the nodes
    whose tensors the session and the graph passes take as constants."""
    return node.op_type == "Constant" and normalize_domain(node.domain) == "ai.onnx" and len(node.output) == 1


# A tensor this large gets memory of its own. numpy_helper.to_array gives a
# view of the bytes the protobuf hands out: 4 KiB pages that no huge-page
# advice reaches, where numpy advises its own allocations of 4 MiB and more
# to be huge pages. An embedding Gather of 128 random rows of a [30522, 768]
# float32 table read 2.3x slower from the view (Zen 3, one thread: 43-48
# against 19 us; onnxruntime, which copies its initializers, 32).
OWN_MEMORY_MIN_BYTES = 4 << 20


def tensor_value(t: onnx.TensorProto) -> np.ndarray:
    """A TensorProto's value as a C-contiguous array, in memory of its own
    from OWN_MEMORY_MIN_BYTES on."""
    value = np.asarray(numpy_helper.to_array(t), order="C")
    if value.nbytes >= OWN_MEMORY_MIN_BYTES and not value.flags.owndata:
        value = value.copy()
        value.setflags(write=False)  # read-only, as the view was
    return value


def constant_node_value(node: onnx.NodeProto) -> np.ndarray | None:
    """The tensor a ``Constant`` node holds, or None for the forms it does
    not give one for (sparse_value, strings). A malformed tensor raises
    what onnx raises."""
    if len(node.attribute) != 1:
        return None
    a = node.attribute[0]
    if a.name == "value" and a.type == onnx.AttributeProto.TENSOR:
        if a.t.data_type == onnx.TensorProto.STRING:
            return None
        return tensor_value(a.t)
    scalars = {"value_float": np.float32, "value_int": np.int64}
    lists = {"value_floats": np.float32, "value_ints": np.int64}
    if a.name in scalars:
        return np.asarray(helper.get_attribute_value(a), scalars[a.name])
    if a.name in lists:
        return np.asarray(list(helper.get_attribute_value(a)), lists[a.name])
    return None


def _with_constant_nodes(graph: onnx.GraphProto, constants: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """`constants` and the tensors of the graph's ai.onnx Constant nodes
    (exporters such as paddle2onnx write every weight as one)."""
    out = dict(constants)
    for node in graph.node:
        if not is_constant_node(node) or node.output[0] in out:
            continue
        try:
            value = constant_node_value(node)
        except Exception:  # noqa: BLE001 - a malformed tensor is no constant; its node reports it when it runs
            continue
        if value is not None:
            out[node.output[0]] = value
    return out


def build_context(
    graph: onnx.GraphProto,
    node_names: Sequence[str],
    value_types: Mapping[str, onnx.TypeProto],
    constants: Mapping[str, np.ndarray],
    opsets: Mapping[str, int],
    subgraph_reads: Sequence[Sequence[str]],
) -> GraphPassContext:
    """The context of one graph; ``subgraph_reads[i]`` are the outer names node i's subgraphs read.
    ``constants``: the initializers no feed can replace; the graph's Constant
    nodes are added to them."""
    consumers: dict[str, list[int]] = {}
    producers: dict[str, int] = {}
    for index, node in enumerate(graph.node):
        for name in list(node.input) + list(subgraph_reads[index]):
            if name:
                lst = consumers.setdefault(name, [])
                if not lst or lst[-1] != index:
                    lst.append(index)
        for name in node.output:
            if name:
                producers[name] = index
    return GraphPassContext(
        graph=graph,
        node_names=tuple(node_names),
        value_types=MappingProxyType(dict(value_types)),
        graph_outputs=frozenset(vi.name for vi in graph.output),
        consumers=MappingProxyType({k: tuple(v) for k, v in consumers.items()}),
        constants=MappingProxyType(_with_constant_nodes(graph, constants)),
        opsets=MappingProxyType(dict(opsets)),
        producers=MappingProxyType(producers),
    )


def validate_rewrite(ctx: GraphPassContext, rewrite: Rewrite, taken: set[int]) -> tuple[list[int] | None, str]:
    """The indices of the replaced nodes (sorted), or None and why the rewrite is refused.

    ``taken`` holds the indices already replaced by accepted rewrites.
    """
    index_of = {n: i for i, n in enumerate(ctx.node_names)}
    if not isinstance(rewrite, Rewrite):
        return None, f"expected a Rewrite, got {type(rewrite).__name__}"
    if not rewrite.replaces:
        return None, "it replaces no node"
    indices: list[int] = []
    for name in rewrite.replaces:
        i = index_of.get(name)
        if i is None:
            return None, f"node '{name}' is not in the graph"
        if i in taken or i in indices:
            return None, f"node '{name}' is already replaced"
        indices.append(i)
    indices.sort()
    group = set(indices)
    produced: set[str] = set()
    for i in indices:
        produced.update(n for n in ctx.graph.node[i].output if n)
    new_outputs = [n for n in rewrite.node.output if n]
    if not new_outputs:
        return None, "the replacement node has no output"
    for n in new_outputs:
        if n not in produced:
            return None, f"output '{n}' is not produced by the replaced nodes"
    for n in produced - set(new_outputs):
        if n in ctx.graph_outputs:
            return None, f"'{n}' is a graph output the replacement would drop"
        if any(c not in group for c in ctx.consumers.get(n, ())):
            return None, f"'{n}' is read by a node outside the group"
    for n in rewrite.node.input:
        if n and n in produced:
            return None, f"input '{n}' is produced inside the group"
    # Inside the group, a value is read only after the node making it.
    made: set[str] = set()
    for i in indices:
        node = ctx.graph.node[i]
        if normalize_domain(node.domain) not in ctx.opsets:
            return None, f"node '{ctx.node_names[i]}' has a domain the model does not import"
        for n in node.input:
            if n and n in produced and n not in made:
                return None, f"node '{ctx.node_names[i]}' reads '{n}' before the group makes it"
        made.update(n for n in node.output if n)
    # Every input must exist before the last replaced node runs: either an
    # outer input of some replaced node, or a value defined before it (an
    # output of an earlier `before` node).
    outer_inputs = {n for i in indices for n in ctx.graph.node[i].input if n and n not in produced}
    existing = {vi.name for vi in ctx.graph.input} | {t.name for t in ctx.graph.initializer}
    existing.update(n for node in ctx.graph.node for n in node.output if n)
    made_before: set[str] = set()
    for k, node in enumerate(rewrite.before):
        if not isinstance(node, onnx.NodeProto):
            return None, f"before[{k}] is not a node"
        for n in node.input:
            if n and n not in outer_inputs and n not in made_before:
                return None, f"input '{n}' of before[{k}] is not read by the replaced nodes nor made before it"
        outs = list(node.output)
        if not outs or any(not n for n in outs):
            return None, f"before[{k}] must name every output"
        for n in outs:
            if n in existing or n in made_before:
                return None, f"output '{n}' of before[{k}] is not a new value"
            made_before.add(n)
    for n in rewrite.node.input:
        if n and n not in outer_inputs and n not in made_before:
            return None, f"input '{n}' is not read by the replaced nodes"
    for node in (*rewrite.before, rewrite.node):
        for a in node.attribute:
            if a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS):
                return None, "a replacement node may not hold subgraphs"
    return indices, ""


def describe_replaced(ctx: GraphPassContext, indices: Sequence[int]) -> tuple[tuple[str, str], ...]:
    """(name, op_type) of each replaced node, in graph order."""
    return tuple((ctx.node_names[i], ctx.graph.node[i].op_type) for i in indices)
