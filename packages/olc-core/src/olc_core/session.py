"""olc_core.Session: load a model, choose one kernel per node, run it from C++."""

from __future__ import annotations

import functools
import logging
import os
import threading
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, cast

import numpy as np
import onnx
from onnx import helper, numpy_helper

from . import _native, control_flow, shape_plan
from .errors import InvalidModelError, NoKernelError, OlcError
from .graph_passes import (
    GraphPassContext,
    build_context,
    constant_node_value,
    describe_replaced,
    graph_digest,
    inference_constants,
    is_constant_node,
    tensor_value,
    validate_rewrite,
)
from .registration import KernelRegistration, normalize_domain
from .registration import elem_name as _elem_name
from .registry import dispatch_table, graph_passes
from .threads import default_thread_count

FALLBACK_LIBRARY = "onnx.reference"

# A session whose plan runs nodes on the fallback says so once, here, at
# WARNING level (silence it with logging.getLogger("olc_core").setLevel(...)).
logger = logging.getLogger("olc_core.session")

# The reason of a Constant node that ran once on the fallback while the
# session was built: its value is a constant of the plan, not a per-run step.
CONSTANT_FOLDED_REASON = "constant, evaluated at load"

# ONNX TensorProto codes -> the type names used by registrations.
TYPE_NAMES: dict[int, str] = {
    onnx.TensorProto.FLOAT: "float32",
    onnx.TensorProto.DOUBLE: "float64",
    onnx.TensorProto.FLOAT16: "float16",
    onnx.TensorProto.BFLOAT16: "bfloat16",
    onnx.TensorProto.INT8: "int8",
    onnx.TensorProto.INT16: "int16",
    onnx.TensorProto.INT32: "int32",
    onnx.TensorProto.INT64: "int64",
    onnx.TensorProto.UINT8: "uint8",
    onnx.TensorProto.UINT16: "uint16",
    onnx.TensorProto.UINT32: "uint32",
    onnx.TensorProto.UINT64: "uint64",
    onnx.TensorProto.BOOL: "bool",
    onnx.TensorProto.STRING: "string",
    onnx.TensorProto.FLOAT8E4M3FN: "float8e4m3fn",
    onnx.TensorProto.FLOAT8E4M3FNUZ: "float8e4m3fnuz",
    onnx.TensorProto.FLOAT8E5M2: "float8e5m2",
    onnx.TensorProto.FLOAT8E5M2FNUZ: "float8e5m2fnuz",
    onnx.TensorProto.UINT4: "uint4",
    onnx.TensorProto.INT4: "int4",
}

TYPE_CODES: dict[str, int] = {v: k for k, v in TYPE_NAMES.items()}

# Attribute kinds a native kernel can receive (see olc_attribute in the ABI).
_NATIVE_ATTRIBUTE_TYPES = {
    onnx.AttributeProto.FLOAT,
    onnx.AttributeProto.INT,
    onnx.AttributeProto.STRING,
    onnx.AttributeProto.FLOATS,
    onnx.AttributeProto.INTS,
}


@dataclass(frozen=True)
class PlanEntry:
    """How one node runs: the kernel chosen and why."""

    node_name: str
    domain: str
    op_type: str
    kernel: str
    native: bool
    reason: str
    # A node made by a graph pass: (name, op_type) of each original node it
    # replaced, in graph order, and the pass that made it. Empty otherwise.
    fused_nodes: tuple[tuple[str, str], ...] = ()
    graph_pass: str = ""
    # Bytes the kernel prepared from constant inputs at creation (packed
    # weights); a buffer shared with other nodes is counted in each entry,
    # once in Session.prepacked_bytes().
    prepacked_bytes: int = 0
    # Only in kernel_plan(expand_fused=True): an original node that runs
    # inside a fused node names that node here (and its pass in graph_pass).
    fused_into: str = ""
    # If/Loop run on olc: (subgraph attribute, its kernel plan) per subgraph.
    subgraphs: tuple[tuple[str, tuple[PlanEntry, ...]], ...] = ()
    # "folded": its values depend only on what is known at construction and
    # are plan constants (it does not run); "cached": they depend only on
    # the feeds' shapes and a run whose feed shapes were seen skips it.
    shape_plan: str = ""


@dataclass(frozen=True)
class ProfileRecord:
    """One step of one profiled run (``Session(profile=True)``)."""

    run: int
    node_name: str
    op_type: str
    kernel: str
    native: bool
    start_us: float  # from the run's start
    duration_us: float
    output_shapes: tuple[tuple[int, ...], ...]
    threads: int
    fused_nodes: tuple[str, ...] = ()  # the original nodes a fused step runs
    cached: bool = False  # skipped: the shape-plan cache gave its outputs (duration 0)
    # A step of a subgraph run by an If, Loop, Scan or SequenceMap on olc:
    # the path of that node and subgraph ("cond/then_branch", nested
    # "outer/body/inner/else_branch"); its start_us counts from the
    # enclosing run's start. "" for a step of the session's own graph.
    subgraph: str = ""


@dataclass(frozen=True)
class NodeArg:
    """A graph input or output, described as onnxruntime describes it."""

    name: str
    type: str
    shape: list[int | str | None]


@dataclass(frozen=True)
class NodeInfo:
    """What a Python kernel factory receives for one node."""

    name: str
    domain: str
    op_type: str
    opset: int
    input_types: tuple[str | None, ...]
    output_types: tuple[str | None, ...]
    attributes: Mapping[str, Any]
    proto: onnx.NodeProto = field(repr=False)


def native_attribute(a: onnx.AttributeProto) -> tuple[str, int, Any]:
    """(name, type code, value) of an attribute as a native kernel's create()
    receives it: INTS and FLOATS as int64 / float64 arrays, read straight
    from the repeated fields (lists of Python numbers cost seconds for a
    large tree ensemble), STRING as str, INT and FLOAT as numbers."""
    if a.type == onnx.AttributeProto.INTS:
        return a.name, int(a.type), np.array(a.ints, dtype=np.int64)
    if a.type == onnx.AttributeProto.FLOATS:
        return a.name, int(a.type), np.array(a.floats, dtype=np.float64)
    value = helper.get_attribute_value(a)
    if a.type == onnx.AttributeProto.STRING:
        value = value.decode("utf-8", "replace") if isinstance(value, bytes) else value
    return a.name, int(a.type), value


def _label(node_name: str, op_type: str) -> str:
    return f"node '{node_name}' ({op_type})"


def _check_no_external_data(model: onnx.ModelProto) -> onnx.ModelProto:
    for init in model.graph.initializer:
        if init.data_location == onnx.TensorProto.EXTERNAL:
            raise InvalidModelError(
                f"initializer '{init.name}' refers to external data; pass the model's path so its data "
                "files can be found, or load it with onnx.load(path) first"
            )
    return model


def _printable(text: str | bytes) -> str:
    """A name as it can be printed: bytes that are not UTF-8 as \\x escapes."""
    return text.decode("utf-8", "backslashreplace") if isinstance(text, bytes) else text


def _dim_params(tp: onnx.TypeProto) -> Iterable[str | bytes]:
    kind = tp.WhichOneof("value")
    if kind in ("tensor_type", "sparse_tensor_type"):
        t = getattr(tp, kind)
        if t.HasField("shape"):
            yield from (d.dim_param for d in t.shape.dim if d.HasField("dim_param"))
    elif kind in ("sequence_type", "optional_type"):
        yield from _dim_params(getattr(tp, kind).elem_type)
    elif kind == "map_type":
        yield from _dim_params(tp.map_type.value_type)


def _check_graph_names(graph: onnx.GraphProto, where: str = "") -> None:
    """Refuses a name (of a value, node, op, domain, attribute or symbolic
    dimension) that is not valid UTF-8, naming where it is. protobuf gives
    such a string field as bytes; the runtime keys values by str names, and
    a graph pass building nodes from it would fail with a UnicodeDecodeError."""

    def check(text: str | bytes, what: str) -> None:
        if isinstance(text, bytes):
            raise InvalidModelError(f"{where}{what} '{_printable(text)}' is not valid UTF-8")

    check(graph.name, "graph name")
    for kind, infos in (("graph input", graph.input), ("graph output", graph.output),
                        ("value_info", graph.value_info)):
        for vi in infos:
            check(vi.name, f"{kind} name")
            for dim in _dim_params(vi.type):
                check(dim, f"{kind} '{_printable(vi.name)}': symbolic dimension")
    for init in graph.initializer:
        check(init.name, "initializer name")
    _check_node_names(graph.node, where)


def _check_node_names(nodes: Iterable[onnx.NodeProto], where: str) -> None:
    for index, node in enumerate(nodes):
        op_type = _printable(node.op_type)
        label = f"{where}{_label(_printable(node.name) or f'{op_type}_{index}', op_type)}"
        for what, texts in (("name", [node.name]), ("op type", [node.op_type]), ("domain", [node.domain]),
                            ("input", node.input), ("output", node.output),
                            ("attribute name", [a.name for a in node.attribute])):
            for k, text in enumerate(texts):
                if isinstance(text, bytes):
                    place = f" {k}" if what in ("input", "output") else ""
                    raise InvalidModelError(f"{label}: {what}{place} '{_printable(text)}' is not valid UTF-8")
        for a in node.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                _check_graph_names(a.g, f"{label}, subgraph '{a.name}': ")
            elif a.type == onnx.AttributeProto.GRAPHS:
                for k, sub in enumerate(a.graphs):
                    _check_graph_names(sub, f"{label}, subgraph '{a.name}[{k}]': ")


def _check_names(model: onnx.ModelProto) -> None:
    """_check_graph_names over the graph, the opset imports and the local functions."""
    for o in model.opset_import:
        if isinstance(o.domain, bytes):
            raise InvalidModelError(f"opset import domain '{_printable(o.domain)}' is not valid UTF-8")
    _check_graph_names(model.graph)
    for f in model.functions:
        where = f"function '{_printable(f.name)}'"
        for text in [f.name, f.domain, *f.input, *f.output, *f.attribute]:
            if isinstance(text, bytes):
                raise InvalidModelError(f"{where}: name '{_printable(text)}' is not valid UTF-8")
        _check_node_names(f.node, f"{where}: ")


def load_model(model: Any) -> onnx.ModelProto:
    """The ModelProto of a path (external data read beside it), serialized bytes or a proto."""
    if isinstance(model, onnx.ModelProto):
        return _check_no_external_data(model)
    if isinstance(model, (bytes, bytearray, memoryview)):
        try:
            proto = onnx.load_from_string(bytes(model))
        except Exception as exc:  # noqa: BLE001 - protobuf raises several types
            raise InvalidModelError(f"cannot parse the model bytes: {exc}") from exc
        return _check_no_external_data(proto)
    if isinstance(model, (str, os.PathLike)):
        path = os.fspath(model)
        if not os.path.exists(path):
            raise InvalidModelError(f"model file not found: {path}")
        try:
            # Loads external data files relative to the model's folder.
            return onnx.load(path, load_external_data=True)
        except Exception as exc:  # noqa: BLE001
            raise InvalidModelError(f"cannot load model {path}: {exc}") from exc
    raise TypeError(f"model must be a path, bytes or onnx.ModelProto, not {type(model).__name__}")


def _value_types(model: onnx.ModelProto) -> dict[str, onnx.TypeProto]:
    g = model.graph
    types: dict[str, onnx.TypeProto] = {}
    for vi in list(g.input) + list(g.value_info) + list(g.output):
        if vi.type.WhichOneof("value") is not None:
            types[vi.name] = vi.type
    for init in g.initializer:
        types.setdefault(init.name, helper.make_tensor_type_proto(init.data_type, list(init.dims)))
    return types


def _tensor_elem(tp: onnx.TypeProto | None) -> int:
    if tp is not None and tp.WhichOneof("value") == "tensor_type":
        return int(tp.tensor_type.elem_type)
    return 0


def _type_string(tp: onnx.TypeProto | None) -> str:
    """A value's type as onnxruntime spells it in NodeArg.type:
    ``tensor(float)``, ``seq(tensor(int64))``, ``map(string,tensor(float))``,
    ``seq(map(int64,tensor(float)))`` (ZipMap's output), ``optional(...)``."""
    if tp is None or tp.WhichOneof("value") is None:
        return "unknown"
    kind = tp.WhichOneof("value")
    if kind == "tensor_type":
        if not tp.tensor_type.elem_type:
            return "tensor(unknown)"  # declared without an element type, and inference gave none
        return f"tensor({_elem_name(tp.tensor_type.elem_type)})"
    if kind == "sequence_type":
        return f"seq({_type_string(tp.sequence_type.elem_type)})"
    if kind == "map_type":
        return f"map({_elem_name(tp.map_type.key_type)},{_type_string(tp.map_type.value_type)})"
    if kind == "optional_type":
        return f"optional({_type_string(tp.optional_type.elem_type)})"
    return kind.replace("_type", "")


def _shape_of(tp: onnx.TypeProto | None) -> list[int | str | None] | None:
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
    return dims


def _has_subgraphs(node: onnx.NodeProto) -> bool:
    return any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in node.attribute)


def _subgraph_outer_names(node: onnx.NodeProto) -> list[str]:
    """Names a node's subgraphs read from the enclosing scope (as node inputs or as their own outputs)."""
    outer: list[str] = []

    def read(name: str, local: set[str]) -> None:
        if name and name not in local and name not in outer:
            outer.append(name)

    def visit(graph: onnx.GraphProto, bound: set[str]) -> None:
        local = set(bound)
        local.update(i.name for i in graph.input)
        local.update(i.name for i in graph.initializer)
        for n in graph.node:
            for name in n.input:
                read(name, local)
            for a in n.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    visit(a.g, local)
                elif a.type == onnx.AttributeProto.GRAPHS:
                    for sub in a.graphs:
                        visit(sub, local)
            local.update(n.output)
        # A branch may return an enclosing value as it is (onnxruntime refuses
        # such a model; onnx.reference runs it).
        for o in graph.output:
            read(o.name, local)

    for a in node.attribute:
        if a.type == onnx.AttributeProto.GRAPH:
            visit(a.g, set())
        elif a.type == onnx.AttributeProto.GRAPHS:
            for sub in a.graphs:
                visit(sub, set())
    return outer


@functools.cache
def _blas_controller() -> Any:
    import threadpoolctl

    return threadpoolctl.ThreadpoolController()


# Initializers with more elements than this are typed, not given, to the
# inference the fallback checks come from: ops take shapes, axes, pads and
# counts from small constants only, and copying the weights costs memory.
_CHECK_INFERENCE_MAX_CONSTANT = 1024


# Attributes of ai.onnx.ml nodes with more values than this are cut to their
# first value in the copy of the model type inference reads
# (_inference_model). Only that domain: its ops' output types and shapes
# follow from small attributes, while a Constant's or any ai.onnx node's
# large attribute is the value inference must see (a cut Constant would give
# every value computed from it a wrong shape).
_INFERENCE_MAX_VALUES = 1 << 16
_INFERENCE_CUT_DOMAINS = frozenset({"ai.onnx.ml"})


def _attribute_values(a: onnx.AttributeProto) -> int:
    if a.type == onnx.AttributeProto.TENSOR:
        return int(np.prod(a.t.dims, dtype=np.int64))
    return max(len(a.ints), len(a.floats), len(a.strings))


def _inference_model(model: onnx.ModelProto) -> onnx.ModelProto:
    """The model whole-model inference is given: the model itself, unless an
    ai.onnx.ml node has an attribute of more than _INFERENCE_MAX_VALUES values (a tree
    ensemble's node tables, an SVM's support vectors); then a copy whose such
    attributes keep only their first value. Inference reads those ops' types
    and counts from small attributes (n_targets, class labels), while
    serializing the tables for it and parsing its result back cost seconds
    for a 5,000-tree forest."""
    graph = model.graph
    big = [n.domain in _INFERENCE_CUT_DOMAINS and any(_attribute_values(a) > _INFERENCE_MAX_VALUES
                                                      for a in n.attribute) for n in graph.node]
    if not any(big):
        return model
    slim = onnx.ModelProto()
    for field_name in ("ir_version", "producer_name", "producer_version", "domain", "model_version"):
        setattr(slim, field_name, getattr(model, field_name))
    slim.opset_import.extend(model.opset_import)
    slim.functions.extend(model.functions)
    g = slim.graph
    g.name = graph.name
    for field_name in ("input", "output", "value_info", "initializer", "sparse_initializer"):
        getattr(g, field_name).extend(getattr(graph, field_name))
    for node, cut in zip(graph.node, big):
        copy = g.node.add()
        if not cut:
            copy.CopyFrom(node)
            continue
        copy.name, copy.op_type, copy.domain = node.name, node.op_type, node.domain
        copy.input.extend(node.input)
        copy.output.extend(node.output)
        for a in node.attribute:
            if _attribute_values(a) <= _INFERENCE_MAX_VALUES:
                copy.attribute.add().CopyFrom(a)
                continue
            short = copy.attribute.add(name=a.name, type=a.type)
            if a.type == onnx.AttributeProto.TENSOR:
                short.t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(a.t).reshape(-1)[:1], a.t.name))
            else:
                short.ints.extend(a.ints[:1])
                short.floats.extend(a.floats[:1])
                short.strings.extend(a.strings[:1])
    return slim


def _fallback_check_model(model: onnx.ModelProto) -> onnx.ModelProto:
    """The model as shape inference should see it to say what a fallback node must return.

    Only facts: the declared tensor input types (feeds are checked against
    them), the nodes and the constants no feed can replace. Declared
    value_info and graph output shapes are dropped (nothing enforces them,
    and inference keeps a declared shape over the one it computes), and so
    are the values of initializers a feed may replace (inference would read
    shapes from them). Large constants become typed inputs.
    """
    g = model.graph
    input_names = {vi.name for vi in g.input}
    inputs = []
    for vi in g.input:
        if vi.type.WhichOneof("value") in (None, "tensor_type"):
            inputs.append(vi)
        else:  # feeds of sequences and optionals are not checked: their element shapes are no facts
            inputs.append(onnx.ValueInfoProto(name=vi.name))
            inputs[-1].type.CopyFrom(vi.type)
            _clear_shapes(inputs[-1].type)
    constants, typed = inference_constants(g, input_names, _CHECK_INFERENCE_MAX_CONSTANT)
    inputs += typed
    graph = helper.make_graph(
        g.node, g.name or "g", inputs, [onnx.ValueInfoProto(name=o.name) for o in g.output], initializer=constants
    )
    return helper.make_model(
        graph, opset_imports=list(model.opset_import), ir_version=model.ir_version, functions=model.functions
    )


def _clear_shapes(tp: onnx.TypeProto) -> None:
    kind = tp.WhichOneof("value")
    if kind == "tensor_type":
        tp.tensor_type.ClearField("shape")
    elif kind == "sequence_type":
        _clear_shapes(tp.sequence_type.elem_type)
    elif kind == "optional_type":
        _clear_shapes(tp.optional_type.elem_type)
    elif kind == "map_type":
        _clear_shapes(tp.map_type.value_type)


def _dtype_text(dtype: np.dtype) -> str:
    if dtype.kind in "US":
        return "string"
    try:
        return TYPE_NAMES.get(helper.np_dtype_to_tensor_dtype(dtype), str(dtype))
    except Exception:  # noqa: BLE001 - a dtype onnx has no code for
        return str(dtype)


class _TensorExpectation:
    """What a fallback output tensor must be: its element type and, where
    inference gave a rank, its rank, its fixed dims and the axes that share a
    symbolic dim. Built once per node; checked on every run."""

    __slots__ = ("all_fixed", "dims", "dtype", "fixed", "rank", "same", "string", "text")

    def __init__(self, tp: onnx.TypeProto):
        elem = _tensor_elem(tp)
        self.string = elem == onnx.TensorProto.STRING
        # Only element types the runtime names are compared; numpy spells the others variously.
        self.dtype = (np.dtype(helper.tensor_dtype_to_np_dtype(elem))
                      if elem in TYPE_NAMES and not self.string else None)
        shape = _shape_of(tp)
        self.rank = None if shape is None else len(shape)
        self.dims = tuple(shape or ())
        self.fixed = tuple((axis, d) for axis, d in enumerate(shape or ()) if isinstance(d, int))
        self.all_fixed = shape is not None and len(self.fixed) == len(shape)
        by_name: dict[str, list[int]] = {}
        for axis, d in enumerate(shape or ()):
            if isinstance(d, str):
                by_name.setdefault(d, []).append(axis)
        self.same = tuple(tuple(axes) for axes in by_name.values() if len(axes) > 1)
        dims = "" if shape is None else " [" + ", ".join("?" if d is None else str(d) for d in shape) + "]"
        self.text = (TYPE_NAMES.get(elem, "tensor") if elem else "tensor") + (dims or " of unknown shape")

    def matches(self, value: Any) -> bool:
        if type(value) is not np.ndarray:
            if not isinstance(value, np.generic):
                return False
            value = np.asarray(value)
        dtype = value.dtype
        if self.dtype is not None:
            if dtype is not self.dtype and dtype != self.dtype:
                return False
        elif self.string and dtype.kind not in "OUS":
            return False
        if self.rank is None:
            return True
        shape = value.shape
        if len(shape) != self.rank:
            return False
        if self.all_fixed:
            return shape == self.dims
        for axis, d in self.fixed:
            if shape[axis] != d:
                return False
        for axes in self.same:
            first = shape[axes[0]]
            for axis in axes[1:]:
                if shape[axis] != first:
                    return False
        return True


class _OutputExpectation:
    """A fallback output's inferred type: a tensor, a sequence of tensors or
    an optional tensor (other kinds are not checked)."""

    __slots__ = ("kind", "name", "tensor", "text")

    def __init__(self, name: str, kind: str, tensor: _TensorExpectation):
        self.name = name
        self.kind = kind
        self.tensor = tensor
        self.text = tensor.text if kind == "tensor" else f"{kind}({tensor.text})"

    @staticmethod
    def of(name: str, tp: onnx.TypeProto | None) -> _OutputExpectation | None:
        kind = tp.WhichOneof("value") if tp is not None else None
        if tp is None or kind is None:
            return None
        if kind == "tensor_type":
            return _OutputExpectation(name, "tensor", _TensorExpectation(tp))
        if kind == "sequence_type":
            inner = tp.sequence_type.elem_type
            if inner.WhichOneof("value") == "tensor_type":
                return _OutputExpectation(name, "sequence", _TensorExpectation(inner))
        if kind == "optional_type":
            inner = tp.optional_type.elem_type
            if inner.WhichOneof("value") == "tensor_type":
                return _OutputExpectation(name, "optional", _TensorExpectation(inner))
        return None

    def matches(self, value: Any) -> bool:
        if self.kind == "tensor":
            return self.tensor.matches(value)
        if self.kind == "optional":
            return value is None or self.tensor.matches(value)
        return isinstance(value, list) and all(self.tensor.matches(v) for v in value)

    @staticmethod
    def describe(value: Any) -> str:
        if isinstance(value, (np.ndarray, np.generic)):
            return f"{_dtype_text(value.dtype)} {list(np.shape(value))}"
        if value is None:
            return "no value"
        if isinstance(value, list):
            return "sequence(" + ", ".join(_OutputExpectation.describe(v) for v in value[:3]) + (
                ", ...)" if len(value) > 3 else ")")
        return f"a {type(value).__name__}"


# The OlcError a fallback node raised during the current run() on this
# thread: the runtime turns it into a message, Session.run raises it again
# with its chained cause.
_fallback_failure = threading.local()


def _stash_failure(error: OlcError) -> OlcError:
    _fallback_failure.error = error
    return error


def _take_failure() -> OlcError | None:
    error = getattr(_fallback_failure, "error", None)
    _fallback_failure.error = None
    return error


@functools.cache
def _reference_fixes() -> tuple[type, ...]:
    """Ops given to onnx.reference in place of its own where its own is wrong."""
    from onnx.reference.ops.op_loop import Loop as ReferenceLoop

    class Loop(ReferenceLoop):
        """Loop as the ONNX spec defines it. onnx.reference's (1.23) runs no
        iteration when the condition input is omitted (a for loop), stacks
        scan outputs with np.vstack (a scalar per iteration gives [N, 1]
        instead of [N], a [1, 3] one [N, 3] instead of [N, 1, 3]), fails
        with "need at least one array to concatenate" when no iteration
        runs, and lets an enclosing value hide a body input or initializer
        of the same name."""

        op_domain = ""
        # Set by OpRun from the body attribute: its evaluator and the call that runs it.
        body: Any
        _run_body: Any

        def __init__(self, onnx_node: onnx.NodeProto, run_params: dict[str, Any]):
            super().__init__(onnx_node, run_params)
            graph = next(a.g for a in onnx_node.attribute if a.name == "body")
            self._body_local = {i.name for i in graph.input} | {i.name for i in graph.initializer}
            self._scan_types = [o.type for o in graph.output[len(graph.input) - 1:]]

        def _run(self, M: Any, cond: Any, *initial: Any, context: Any = None, body: Any = None,
                 attributes: Any = None, bindings: Any = None) -> tuple[Any, ...]:
            names = self.body.input_names
            carried = list(initial)
            n_carried = len(names) - 2
            feeds = {k: v for k, v in (context or {}).items() if k not in self._body_local}
            trips = None if M is None else int(np.asarray(M).reshape(-1)[0])
            going = True if cond is None else bool(np.asarray(cond).reshape(-1)[0])
            scans: list[list[Any]] = [[] for _ in self._scan_types]
            it = 0
            while going and (trips is None or it < trips):
                feeds[names[0]] = np.array(it, dtype=np.int64)
                feeds[names[1]] = np.array(going)
                feeds.update(zip(names[2:], carried))
                outs = self._run_body(feeds, attributes=attributes, bindings=bindings)
                if cond is not None:  # without a condition input the body's is ignored
                    going = bool(np.asarray(outs[0]).reshape(-1)[0])
                carried = list(outs[1:1 + n_carried])
                for k, values in enumerate(scans):
                    values.append(outs[1 + n_carried + k])
                it += 1
            stacked = [np.stack(values) if values else self._no_iteration(k) for k, values in enumerate(scans)]
            return self._check_and_fix_outputs(tuple(carried + stacked))

        def _no_iteration(self, k: int) -> np.ndarray:
            tp = self._scan_types[k]
            dims = _shape_of(tp)
            fixed = [d for d in dims or () if isinstance(d, int)]
            elem = _tensor_elem(tp)
            if dims is None or not elem or len(fixed) != len(dims):
                raise RuntimeError(
                    f"the loop ran no iteration, so scan output {k} is empty, and its per-iteration shape is not "
                    f"known (the body gives {helper.printable_type(tp) or 'no type'})"
                )
            return np.empty([0, *fixed], dtype=helper.tensor_dtype_to_np_dtype(elem))

    return (Loop, *_reference_softmax_family(), _reference_batch_normalization())


def _reference_batch_normalization() -> type:
    """BatchNormalization in inference mode at every opset. onnx.reference's
    (1.23) opset 9-13 form normalizes with the batch's own statistics
    whenever ``momentum`` has a value, and the evaluator always passes the
    schema's default: a model's one-output (inference) node would ignore
    its mean and variance. Training mode (opset 14's ``training_mode``)
    stays onnx.reference's."""
    from onnx.reference.op_run import OpRun
    from onnx.reference.ops.op_batch_normalization import BatchNormalization_14

    class BatchNormalization(OpRun):
        op_domain = ""

        def _run(self, x: np.ndarray, scale: np.ndarray, bias: np.ndarray, mean: np.ndarray, var: np.ndarray,
                 epsilon: float | None = None, momentum: float | None = None, training_mode: int | None = None,
                 **_: Any) -> tuple[np.ndarray, ...]:
            opset = int(self.run_params["opsets"].get("", self.run_params["opsets"].get("ai.onnx", 14)))
            eps = 1e-5 if epsilon is None else float(epsilon)
            if opset >= 14 and training_mode:
                return cast(tuple[np.ndarray, ...], BatchNormalization_14._run(
                    cast(Any, self), x, scale, bias, mean, var, epsilon=eps, momentum=momentum,
                    training_mode=training_mode))
            if opset < 14 and sum(1 for o in self.onnx_node.output if o) > 1:
                raise NotImplementedError("training-mode BatchNormalization (more than one output) before opset 14")

            def per_channel(a: np.ndarray) -> np.ndarray:
                # [C] (or [C, D1, ...] with spatial=0 at opsets 7-8) against [N, C, D1, ...]
                return a.reshape(a.shape + (1,) * (x.ndim - 1 - a.ndim))

            y = (x - per_channel(mean)) / np.sqrt(per_channel(var) + eps) * per_channel(scale) + per_channel(bias)
            return (y.astype(x.dtype, copy=False),)

    return BatchNormalization


def _reference_softmax_family() -> tuple[type, ...]:
    """Softmax, LogSoftmax and Hardmax at every opset. onnx.reference's (1.23)
    apply opset 13's per-axis rule (and its default axis -1) at opsets 1-12
    too, where the input is coerced to 2-D at `axis` (default 1) and the op
    runs over the flattened trailing block; its LogSoftmax is also the log of
    a softmax, which is -inf wherever the softmax underflows."""
    from onnx.reference.ops._op import OpRunUnaryNum

    class _RowOp(OpRunUnaryNum):
        op_domain = ""

        def _along(self, x: np.ndarray, axis: int) -> np.ndarray:
            raise NotImplementedError

        def _run(self, x: np.ndarray, **attributes: Any) -> tuple[np.ndarray]:
            # The evaluator passes `axis` with the newest schema's default (-1)
            # when the node has none; the default is the node's opset's.
            if x.size == 0:
                return (x.copy(),)
            opset = int(self.run_params["opsets"].get("", self.run_params["opsets"].get("ai.onnx", 13)))
            given = [helper.get_attribute_value(a) for a in self.onnx_node.attribute if a.name == "axis"]
            axis = int(given[0]) if given else (1 if opset < 13 else -1)
            axis = axis + x.ndim if axis < 0 else axis
            if opset >= 13:
                return (self._along(x, axis).astype(x.dtype, copy=False),)
            rows = int(np.prod(x.shape[:axis], dtype=np.int64))
            flat = self._along(x.reshape(rows, -1), 1)
            return (flat.reshape(x.shape).astype(x.dtype, copy=False),)

    class Softmax(_RowOp):
        def _along(self, x: np.ndarray, axis: int) -> np.ndarray:
            e = np.exp(x - x.max(axis=axis, keepdims=True))
            return e / e.sum(axis=axis, keepdims=True)

    class LogSoftmax(_RowOp):
        def _along(self, x: np.ndarray, axis: int) -> np.ndarray:
            t = x - x.max(axis=axis, keepdims=True)
            return t - np.log(np.exp(t).sum(axis=axis, keepdims=True))

    class Hardmax(_RowOp):
        def _along(self, x: np.ndarray, axis: int) -> np.ndarray:
            y = np.zeros_like(x)
            np.put_along_axis(y, np.expand_dims(np.argmax(x, axis=axis), axis), 1, axis=axis)
            return y

    return (Softmax, LogSoftmax, Hardmax)


class _ReferenceNode:
    """Runs one node through onnx.reference (the fallback for uncovered ops).

    ``expected`` holds, per output, the type shape inference gave it; every
    run checks what the evaluator returned against it, so a reference
    implementation that gets a shape wrong fails here, naming the node,
    instead of somewhere downstream.
    """

    def __init__(
        self,
        model: onnx.ModelProto,
        node: onnx.NodeProto,
        input_names: Sequence[str],
        types: Mapping[str, onnx.TypeProto],
        label: str = "",
        expected: Mapping[str, onnx.TypeProto] | None = None,
    ):
        from onnx.reference import ReferenceEvaluator

        def value_info(name: str) -> onnx.ValueInfoProto:
            vi = onnx.ValueInfoProto(name=name)
            if name in types:
                vi.type.CopyFrom(types[name])
            return vi

        graph = helper.make_graph(
            [node],
            f"olc_fallback_{node.name or node.op_type}",
            [value_info(n) for n in input_names],
            [value_info(n) for n in node.output if n],
        )
        sub = helper.make_model(
            graph, opset_imports=list(model.opset_import), ir_version=model.ir_version, functions=model.functions
        )
        self._label = label or _label(node.name, node.op_type)
        self._input_names = list(input_names)
        self._output_names = [n for n in node.output if n]
        self._positions = [i for i, n in enumerate(node.output) if n]
        self._n_outputs = len(node.output)
        expected = expected or {}
        checks = [(i, _OutputExpectation.of(n, expected.get(n))) for i, n in enumerate(self._output_names)]
        self._checks = [(i, e) for i, e in checks if e is not None]
        self._evaluator = ReferenceEvaluator(sub, new_ops=list(_reference_fixes()))
        self._lock = threading.Lock()

    def __call__(self, *inputs: Any) -> list[Any]:
        feeds = dict(zip(self._input_names, inputs))
        try:
            # The session's pool owns the cores: numpy's BLAS threads, spinning
            # beside it, would oversubscribe them (a 50x slowdown was measured).
            with self._lock, _blas_controller().limit(limits=1, user_api="blas"):
                results = cast(list[Any], self._evaluator.run(None, feeds))
        except Exception as exc:  # noqa: BLE001 - onnx.reference and numpy raise many types
            raise _stash_failure(OlcError(
                f"{self._label}: the {FALLBACK_LIBRARY} fallback failed: {type(exc).__name__}: {exc}"
            )) from exc
        for i, expectation in self._checks:
            if not expectation.matches(results[i]):
                raise _stash_failure(OlcError(
                    f"{self._label}: the {FALLBACK_LIBRARY} fallback returned "
                    f"{expectation.describe(results[i])} for output '{expectation.name}', "
                    f"but shape inference gives {expectation.text}"
                ))
        outputs: list[Any] = [None] * self._n_outputs
        for pos, value in zip(self._positions, results):
            outputs[pos] = value
        return outputs


class Session:
    """Runs an ONNX model through olc kernels, falling back to onnx.reference.

    ``model``: a path (external data files are read from its folder), the
    serialized bytes, or an ``onnx.ModelProto``. ``threads``: the size of the
    session's thread pool (default: the physical cores available to this
    process). ``strict=True`` refuses any node that would need the fallback.
    ``record_usage=True`` records the kernels each run used
    (:meth:`kernel_usage`); it costs nothing when off.
    ``participant_limit`` caps the threads any single kernel call may use.
    ``fusion=False`` turns the fusion graph passes off (every node then runs
    on its own kernel); with it on, a group of nodes a family's pass fuses
    shows in :meth:`kernel_plan` as one entry whose ``fused_nodes`` lists
    the original nodes. ``profile=True`` records the wall time of every
    step of every run (:meth:`profile_records`, :meth:`write_profile`);
    off, it costs one branch per step. ``naive=True`` runs every op a family
    also registers as a plainly written reference kernel on that naive
    kernel (``naive="olc-x"`` or a list of family names: those families
    only), to check the optimized kernels against it on a real model;
    :meth:`kernel_plan` names the kernels chosen.
    """

    def __init__(
        self,
        model: Any,
        threads: int | None = None,
        strict: bool = False,
        record_usage: bool = False,
        participant_limit: int | None = None,
        fusion: bool = True,
        profile: bool = False,
        naive: bool | str | Iterable[str] = False,
        _executor: Any = None,
        _outer_constants: Mapping[str, np.ndarray] | None = None,
    ):
        # _executor (internal): the thread pool of the session whose If, Loop
        # or Scan this session runs a subgraph of; one pool serves them all.
        # _outer_constants (internal): that enclosing session's constants the
        # subgraph reads, bound here to graph inputs of the same names.
        proto = load_model(model)
        self._outer_constants = dict(_outer_constants or {})
        self._naive = _naive_option(naive)
        if threads is None:
            threads = default_thread_count()
        if not isinstance(threads, int) or threads < 1:
            raise ValueError(f"threads must be a positive integer, got {threads!r}")
        self._strict = bool(strict)
        self._executor = _executor if _executor is not None else _native.Executor(threads, participant_limit or 0)
        self._threads = int(self._executor.threads)
        self._fusion = bool(fusion)
        # onnx.checker is not used: it refuses models onnxruntime runs (an output
        # without a shape, say). The structural checks that matter for running
        # (defined inputs, topological order, opset imports) are made below.
        if not proto.HasField("graph"):
            raise InvalidModelError("invalid model: it has no graph")
        _check_names(proto)
        try:
            inferred = onnx.shape_inference.infer_shapes(_inference_model(proto), strict_mode=False)
        except Exception:  # noqa: BLE001 - inference is best effort; kernels validate at run time
            inferred = proto
        self._model = proto
        self._types = _value_types(inferred)
        self._plan_entries: list[PlanEntry] = []
        self._prepacked: dict[int, int] = {}  # buffer key -> bytes, over every native kernel
        # (domain, op_type) of each node that runs on the fallback at every run.
        self._fallback_nodes: list[tuple[str, str]] = []
        # Graph index of each original node name (fused entries expand by it).
        self._node_index: dict[str, int] = {}
        self._node_domains: list[str] = []
        self._check_info: tuple[Mapping[str, onnx.TypeProto], Sequence[onnx.NodeProto] | None] | None = None
        # The Sessions of the subgraphs If, Loop, Scan and SequenceMap run on
        # olc, by "node/subgraph" path; profiled when this one is.
        self._subsessions: list[tuple[str, Session]] = []
        self._profiling = bool(profile)
        self._build(proto, threads, participant_limit or 0, record_usage)
        self._profile_runs: list[tuple[list[Any], int]] = []
        # Per profiled run: its start (perf_counter_ns, at the call) and the
        # steps its subgraphs ran.
        self._profile_starts: list[int] = []
        self._profile_nested: list[list[ProfileRecord]] = []
        if self._profiling:
            self._plan.set_profiling(True)
        self._warn_fallbacks(len(proto.graph.node))

    # ------------------------------------------------------------ building

    def _build(self, model: onnx.ModelProto, threads: int, participant_limit: int, record_usage: bool) -> None:
        graph = model.graph
        if len(graph.sparse_initializer):
            raise InvalidModelError("sparse initializers are not supported")
        for index, node in enumerate(graph.node):
            self._node_index.setdefault(node.name or f"{node.op_type}_{index}", index)
            self._node_domains.append(normalize_domain(node.domain))
        opsets = {normalize_domain(o.domain): int(o.version) for o in model.opset_import}
        slots: dict[str, int] = {}

        def slot_of(name: str) -> int:
            if name not in slots:
                slots[name] = len(slots)
            return slots[name]

        initializers = {init.name: init for init in graph.initializer}
        constants: list[tuple[int, Any]] = []
        graph_inputs = {vi.name for vi in graph.input}
        # Initializers no feed can replace: kernels may pre-pack them.
        self._constants: dict[str, np.ndarray] = {}
        for name, init in initializers.items():
            try:
                value = tensor_value(init)
            except Exception as exc:  # noqa: BLE001 - onnx raises KeyError, ValueError, ... on corrupt payloads
                raise InvalidModelError(
                    f"initializer '{name}' cannot be read ({_elem_name(init.data_type)}): {type(exc).__name__}: {exc}"
                ) from exc
            constants.append((slot_of(name), value))
            if name not in graph_inputs:
                self._constants[name] = value
        # A Constant node's tensor is a constant as an initializer is: models
        # whose exporter writes every weight as one (paddle2onnx's OCR models
        # hold no initializer at all) had no weight packing and no
        # Conv + BatchNormalization folding without this.
        for index, node in enumerate(graph.node):
            if is_constant_node(node):
                try:
                    held = constant_node_value(node)
                except Exception as exc:  # noqa: BLE001 - onnx raises KeyError, ValueError, ... on corrupt payloads
                    raise InvalidModelError(
                        f"Constant node '{node.name or f'Constant_{index}'}' cannot be read: {type(exc).__name__}: {exc}"
                    ) from exc
                if held is not None:
                    self._constants.setdefault(node.output[0], held)
        # An enclosing graph's constants this subgraph reads: constants here
        # too (packed once), not inputs a caller feeds.
        bound = {vi.name for vi in graph.input if vi.name in self._outer_constants}
        for name in bound:
            constants.append((slot_of(name), self._outer_constants[name]))
            self._constants[name] = self._outer_constants[name]

        fused = self._apply_graph_passes(graph, opsets) if self._fusion else {}
        replaced = {i for _, indices, _, _ in fused.values() for i in indices}
        # A fused node stands at the position of the last node it replaces,
        # right after the nodes its rewrite runs before it.
        order: list[tuple[int, onnx.NodeProto, Any]] = []
        for index, node in enumerate(graph.node):
            if index in fused:
                rw_node, _, prepared, before = fused[index]
                order.extend((index, b_node, b_prepared) for b_node, b_prepared in before)
                order.append((index, rw_node, prepared))
            elif index not in replaced:
                order.append((index, node, None))

        first_consumer: dict[str, str] = {}
        for index, node in enumerate(graph.node):
            for name in node.input:
                first_consumer.setdefault(name, _label(node.name or f"{node.op_type}_{index}", node.op_type))

        inputs: list[tuple[int, str, int, bool, list[int] | None, bool, str]] = []
        known_elems = set(onnx.TensorProto.DataType.values())
        for vi in graph.input:
            if vi.name in bound:
                continue
            tp = vi.type
            elem = _tensor_elem(tp)
            if elem not in known_elems:
                raise InvalidModelError(f"graph input '{vi.name}' has {_elem_name(elem)}")
            dims = _shape_of(tp)
            spec_dims: list[int] | None = None if dims is None else [d if isinstance(d, int) else -1 for d in dims]
            is_tensor = tp.WhichOneof("value") == "tensor_type" or tp.WhichOneof("value") is None
            consumer = first_consumer.get(vi.name, "no node")
            inputs.append((slot_of(vi.name), vi.name, elem, is_tensor, spec_dims, vi.name in initializers, consumer))
        self._inputs = [NodeArg(vi.name, _type_string(vi.type), _shape_of(vi.type) or [])
                        for vi in graph.input if vi.name not in bound]
        self._outputs = [
            NodeArg(vi.name, _type_string(self._types.get(vi.name, vi.type)), _shape_of(self._types.get(vi.name)) or [])
            for vi in graph.output
        ]

        # Steps, in the graph's order, which ONNX requires to be topological.
        available = set(initializers) | {vi.name for vi in graph.input}
        # ONNX graphs are in single-assignment form: who defined each name.
        producer = dict.fromkeys(initializers, "an initializer")
        producer.update((vi.name, "a graph input") for vi in graph.input)
        steps: list[tuple[str, Any, list[int], list[int], str, str]] = []
        # The plan entry each step runs (appended right after the step).
        self._step_entries: list[int] = []
        step_nodes: list[onnx.NodeProto] = []

        def add_step(kind: str, obj: Any, ins: list[int], outs: list[int], label: str, kernel_name: str,
                     node: onnx.NodeProto) -> None:
            steps.append((kind, obj, ins, outs, label, kernel_name))
            step_nodes.append(node)
            self._step_entries.append(len(self._plan_entries))

        table = dispatch_table()
        # Outputs of the steps evaluated while building (step index -> values).
        early_folded: dict[int, list[Any]] = {}
        for index, node, prepared in order:
            node_name = node.name or f"{node.op_type}_{index}"
            label = _label(node_name, node.op_type)
            domain = normalize_domain(node.domain)
            for name in node.input:
                if name and name not in available:
                    raise InvalidModelError(
                        f"{label}: input '{name}' is produced by no earlier node, initializer or graph input"
                    )
            if prepared is None:  # a fused node has no subgraph and its domain needs no import
                control_flow.check_signature(node, label, opsets.get("ai.onnx"))
                outer = _subgraph_outer_names(node)
                for name in outer:
                    if name not in available:
                        raise InvalidModelError(f"{label}: subgraph reads '{name}', which is not defined before the node")
                opset = opsets.get(domain)
                if opset is None and domain not in {f.domain for f in model.functions}:
                    raise InvalidModelError(f"{label}: the model imports no opset for domain '{domain}'")
            for name in node.output:
                if name in producer:
                    raise InvalidModelError(f"{label}: output '{name}' is already produced by {producer[name]}")
                if name:
                    producer[name] = label
            in_slots = [slot_of(n) if n else -1 for n in node.input]
            out_slots = [slot_of(n) if n else slot_of(f"\0{node_name}:{i}") for i, n in enumerate(node.output)]
            available.update(n for n in node.output if n)
            if prepared is not None:
                reg, kernel, replaced_desc, pass_name, made_for = prepared
                add_step("native", kernel, in_slots, out_slots, label, reg.kernel_name, node)
                prepacked = 0
                for key, nbytes in kernel.prepacked:
                    self._prepacked[key] = nbytes
                    prepacked += nbytes
                originals = ", ".join(f"{n} ({op})" for n, op in replaced_desc)
                if made_for:  # a node a rewrite runs before its replacement node
                    entry = PlanEntry(node_name, domain, node.op_type, reg.kernel_name, True,
                                      f"made by {pass_name} from {originals}, runs before {made_for}",
                                      graph_pass=pass_name, prepacked_bytes=prepacked)
                else:
                    entry = PlanEntry(node_name, domain, node.op_type, reg.kernel_name, True,
                                      f"fused by {pass_name}: {originals}", replaced_desc, pass_name,
                                      prepacked_bytes=prepacked)
                self._plan_entries.append(entry)
                continue

            self._infer_missing_output_types(node, domain, opset or 1)
            input_types = tuple(TYPE_NAMES.get(_tensor_elem(self._types.get(n))) if n else ""
                                for n in node.input)
            reg, selection_reason = self._choose(table, node, domain, opset or 1, input_types)
            if reg is not None:
                # Type outputs that inference left unknown (ops of custom domains).
                for name, t in zip(node.output, reg.output_types(input_types)):
                    if name and t is not None and _tensor_elem(self._types.get(name)) == 0:
                        self._types[name] = helper.make_tensor_type_proto(TYPE_CODES[t], None)
                prepacked = 0
                if isinstance(reg.factory, _CAPSULE_TYPE):
                    kernel = _native.create_kernel(
                        reg.factory, self._native_node_info(node, node_name, domain, opset or 1, reg))
                    add_step("native", kernel, in_slots, out_slots, label, reg.kernel_name, node)
                    for key, nbytes in kernel.prepacked:
                        self._prepacked[key] = nbytes
                        prepacked += nbytes
                else:
                    info = NodeInfo(
                        node_name, domain, node.op_type, opset or 1, tuple(t or None for t in input_types),
                        tuple(TYPE_NAMES.get(_tensor_elem(self._types.get(n))) for n in node.output),
                        {a.name: helper.get_attribute_value(a) for a in node.attribute}, node,
                    )
                    try:
                        fn = reg.factory(info)
                    except OlcError:
                        raise
                    except Exception as exc:  # noqa: BLE001 - surfaced with the node's name
                        raise OlcError(f"{label}: kernel {reg.kernel_name} refused the node: {exc}") from exc
                    add_step("python", fn, in_slots, out_slots, label, reg.kernel_name, node)
                self._plan_entries.append(
                    PlanEntry(node_name, domain, node.op_type, reg.kernel_name, isinstance(reg.factory, _CAPSULE_TYPE),
                              selection_reason, prepacked_bytes=prepacked)
                )
                # A node of constants alone (Silero VAD's LSTM weights are
                # Unsqueezes of initializers): evaluated now, so that the
                # kernels made after it take its outputs as constants (and
                # pack them once); the shape plan folds the step as before.
                present = [n for n in node.input if n]
                if (present and all(n in self._constants for n in present)
                        and shape_plan.foldable_op(node.op_type, domain, _has_subgraphs(node))):
                    got = self._evaluate_steps(
                        len(slots), [(slot_of(n), self._constants[n]) for n in present], {}, [steps[-1]],
                        [shape_plan.StepFacts(node.op_type, domain, in_slots, out_slots, False)], [0]).get(0)
                    if got and all(isinstance(v, np.ndarray) and v.nbytes <= shape_plan.FOLD_MAX_BYTES for v in got):
                        early_folded[len(steps) - 1] = got
                        self._constants.update((n, v) for n, v in zip(node.output, got) if n)
                continue

            if domain == "ai.onnx" and node.op_type in control_flow.CONTROL_FLOW_OPS:
                built = control_flow.build(
                    Session, model, node, label, outer, self._types,
                    {"threads": self._threads, "strict": self._strict, "fusion": self._fusion, "naive": self._naive,
                     "profile": self._profiling, "_executor": self._executor},
                    self._constants,
                )
                if built is not None:
                    fn, subs, fed = built
                    self._subsessions.extend((f"{node_name}/{name}", sub) for name, sub in subs)
                    kernel_name = f"olc_core::{node.op_type}"
                    cf_slots = [slot_of(n) if n else -1 for n in node.input] + [slot_of(n) for n in fed]
                    add_step("python", fn, cf_slots, out_slots, label, kernel_name, node)
                    self._plan_entries.append(PlanEntry(
                        node_name, domain, node.op_type, kernel_name, False,
                        "subgraphs prepared once, run on olc sessions",
                        subgraphs=tuple((name, tuple(sub.kernel_plan())) for name, sub in subs),
                    ))
                    continue
            if is_constant_node(node) and not outer:
                # Read from the node's attribute once, at load (above); None
                # for the forms left to the fallback (strings, sparse_value).
                constant = self._constants.get(node.output[0])
                if constant is not None:
                    # A plan constant: nothing runs for it (strict mode accepts it).
                    constants.append((out_slots[0], constant))
                    self._plan_entries.append(
                        PlanEntry(node_name, domain, node.op_type, "olc_core::Constant", False, CONSTANT_FOLDED_REASON)
                    )
                    continue
            if self._strict:
                raise NoKernelError(
                    f"{label}: no olc kernel covers it ({selection_reason}); strict mode refuses the "
                    f"{FALLBACK_LIBRARY} fallback"
                )
            fallback_inputs = [n for n in node.input if n] + outer
            folded = node.op_type == "Constant" and domain == "ai.onnx" and not fallback_inputs
            expected: Mapping[str, onnx.TypeProto] | None = None
            if not folded:
                expected, inferred_nodes = self._fallback_checks(model)
                # The inferred copy of a node with subgraphs types their
                # outputs too (a Loop that runs no iteration needs them).
                if _has_subgraphs(node) and inferred_nodes is not None:
                    twin = inferred_nodes[index]
                    if twin.op_type == node.op_type and list(twin.output) == list(node.output):
                        node = twin
            try:
                runner = _ReferenceNode(model, node, fallback_inputs, self._types, label, expected)
            except Exception as exc:  # noqa: BLE001 - onnx.reference raises many types
                raise OlcError(f"{label}: no olc kernel covers it ({selection_reason}) and the {FALLBACK_LIBRARY} "
                               f"fallback cannot run it: {exc}") from exc
            kernel_name = f"{FALLBACK_LIBRARY}::{node.op_type}"
            fb_slots = [slot_of(n) for n in fallback_inputs]
            if folded:
                # Evaluated once here rather than on every run.
                try:
                    values = runner()
                finally:
                    _take_failure()
                for s, value in zip(out_slots, values):
                    constants.append((s, value))
                self._plan_entries.append(
                    PlanEntry(node_name, domain, node.op_type, kernel_name, False, CONSTANT_FOLDED_REASON)
                )
                continue
            add_step("python", runner, fb_slots, out_slots, label, kernel_name, node)
            self._fallback_nodes.append((domain, node.op_type))
            self._plan_entries.append(
                PlanEntry(node_name, domain, node.op_type, kernel_name, False, f"fallback: {selection_reason}")
            )

        for vi in graph.output:
            if vi.name not in available:
                raise InvalidModelError(f"graph output '{vi.name}' is produced by no node, initializer or input")

        steps, cached_steps, frontier = self._apply_shape_plan(
            graph, steps, step_nodes, constants, slots, {slots[vi.name] for vi in graph.output}, early_folded
        )

        # Last use of every value: released right after that step.
        keep = {slots[vi.name] for vi in graph.output}
        last_use: dict[int, int] = {}
        for i, (_, _, ins, outs, _, _) in enumerate(steps):
            for s in list(ins) + list(outs):
                if s >= 0:
                    last_use[s] = i
        const_slots = {s for s, _ in constants}
        release: list[list[int]] = [[] for _ in steps]
        for s, i in last_use.items():
            if s not in keep and s not in const_slots:
                release[i].append(s)

        plan = _native.Plan(len(slots), threads, participant_limit, bool(record_usage), executor=self._executor)
        for s, value in constants:
            if isinstance(value, np.ndarray):
                value.flags.writeable = False  # a Python kernel must not change them either
            plan.add_constant(s, value)
        for input_spec in inputs:
            plan.add_input(*input_spec)
        for vi in graph.output:
            plan.add_output(slots[vi.name], vi.name)
        for (kind, obj, ins, outs, label, kname), rel in zip(steps, release):
            if kind == "native":
                plan.add_native_step(obj, ins, outs, rel, label)
            else:
                plan.add_python_step(obj, ins, outs, rel, label, kname)
        if cached_steps:
            plan.set_shape_plan(cached_steps, frontier, shape_plan.CACHE_CAPACITY, shape_plan.CACHE_MAX_BYTES)
        self._plan = plan

    def _apply_shape_plan(
        self,
        graph: onnx.GraphProto,
        steps: list[tuple[str, Any, list[int], list[int], str, str]],
        step_nodes: list[onnx.NodeProto],
        constants: list[tuple[int, Any]],
        slots: dict[str, int],
        output_slots: set[int],
        evaluated: Mapping[int, list[Any]],
    ) -> tuple[list[tuple[str, Any, list[int], list[int], str, str]], list[int], list[int]]:
        """Folds the steps whose values are known at construction into plan
        constants (appended to ``constants``) and picks the steps the runtime
        caches per feed-shape signature (see shape_plan.py). Returns the
        remaining steps, the cached ones among them and the cache's frontier
        slots; plan entries say which nodes were folded or cached.
        ``evaluated``: the outputs of steps already evaluated while building."""
        name_of = {slot: name for name, slot in slots.items()}
        input_names = {vi.name for vi in graph.input}
        declared = {vi.name: _shape_of(vi.type) for vi in graph.input}
        replaceable = {init.name for init in graph.initializer} & input_names
        # An initializer a feed may replace without a static declared shape
        # leaves inference's shapes downstream of it unproven: none is used.
        trust_inferred = all(
            declared[n] is not None and all(isinstance(d, int) and d >= 0 for d in declared[n] or [])
            for n in replaceable
        )

        def static_dims(slot: int) -> tuple[int, ...] | None:
            name = name_of.get(slot, "")
            dims = declared[name] if name in declared else (_shape_of(self._types.get(name)) if trust_inferred else None)
            if dims is None or not all(isinstance(d, int) and d >= 0 for d in dims):
                return None
            return tuple(int(cast(int, d)) for d in dims)

        def tensor_slot(slot: int) -> bool:
            tp = self._types.get(name_of.get(slot, ""))
            return tp is None or tp.WhichOneof("value") in (None, "tensor_type")

        facts = []
        for (_, _, ins, outs, _, _), node in zip(steps, step_nodes):
            attrs = {a.name: a for a in node.attribute}
            facts.append(shape_plan.StepFacts(
                node.op_type, normalize_domain(node.domain), ins, outs, _has_subgraphs(node),
                attrs["start"].i if node.op_type == "Shape" and "start" in attrs else None,
                attrs["end"].i if node.op_type == "Shape" and "end" in attrs else None,
            ))
        replaceable_slots = {slots[n] for n in replaceable}
        split = shape_plan.split(
            facts, {s for s, _ in constants} - replaceable_slots, {slots[n] for n in input_names},
            static_dims, tensor_slot,
        )

        folded: dict[int, list[Any]] = {i: [v] for i, v in split.static_values.items()}
        folded.update((i, v) for i, v in evaluated.items() if i in split.foldable)
        pending = [i for i in split.foldable if i not in folded]
        if pending:
            values = self._evaluate_steps(len(slots), constants, split.static_values, steps, facts, pending)
            for i in pending:
                got = values.get(i)
                if got is not None and all(isinstance(v, np.ndarray) and v.nbytes <= shape_plan.FOLD_MAX_BYTES
                                           for v in got):
                    folded[i] = got
        if not folded and not split.cached:
            return steps, [], []

        remaining = [i for i in range(len(steps)) if i not in folded]
        read = {s for i in remaining for s in facts[i].inputs if s >= 0} | output_slots
        for i, arrays in folded.items():
            for s, v in zip(facts[i].outputs, arrays):
                if s in read:
                    constants.append((s, v if v.flags.c_contiguous and v.flags.aligned else v.copy(order="C")))
        for i in range(len(steps)):
            mark = shape_plan.FOLDED if i in folded else shape_plan.CACHED if i in split.cached else ""
            if mark:
                e = self._plan_entries[self._step_entries[i]]
                self._plan_entries[self._step_entries[i]] = replace(e, shape_plan=mark)
                if mark == shape_plan.FOLDED and not e.native and e.kernel.startswith(FALLBACK_LIBRARY):
                    self._fallback_nodes.remove((e.domain, e.op_type))
        new_index = {old: new for new, old in enumerate(remaining)}
        self._step_entries = [self._step_entries[i] for i in remaining]
        cached = [new_index[i] for i in split.cached if i in new_index]
        kept_facts = [facts[i] for i in remaining]
        return [steps[i] for i in remaining], cached, shape_plan.frontier(kept_facts, cached, output_slots)

    @staticmethod
    def _evaluate_steps(
        n_values: int,
        constants: list[tuple[int, Any]],
        static_values: Mapping[int, np.ndarray],
        steps: list[tuple[str, Any, list[int], list[int], str, str]],
        facts: list[shape_plan.StepFacts],
        indices: list[int],
    ) -> dict[int, list[Any]]:
        """Runs the given steps once, on their own one-thread plan, with the
        kernels already made for them. Empty when any fails: the nodes then
        run (and report the failure) at every run, as without folding."""
        plan = _native.Plan(n_values, 1, 0, False)
        for s, value in constants:
            plan.add_constant(s, value)
        for i, value in static_values.items():
            plan.add_constant(facts[i].outputs[0], value)
        wanted: list[int] = []
        for i in indices:
            kind, obj, ins, outs, label, kname = steps[i]
            if kind == "native":
                plan.add_native_step(obj, ins, outs, [], label)
            else:
                plan.add_python_step(obj, ins, outs, [], label, kname)
            for s in outs:
                plan.add_output(s, f"\0{s}")
                wanted.append(s)
        try:
            values = dict(zip(wanted, plan.run(None, {})))
        except Exception as exc:  # noqa: BLE001 - the same failure comes back at run time
            _take_failure()
            logger.debug("shape plan: not folding (%s)", exc)
            return {}
        return {i: [values[s] for s in facts[i].outputs] for i in indices}

    def _fallback_checks(
        self, model: onnx.ModelProto
    ) -> tuple[Mapping[str, onnx.TypeProto], Sequence[onnx.NodeProto] | None]:
        """The types fallback outputs are checked against, and the inferred nodes.

        From one more shape inference, made the first time a node falls back
        (most models never pay for it), of the model stripped of what nothing
        enforces (see _fallback_check_model): a declared shape inference would
        keep, or a shape read from an initializer a feed may replace, must not
        make a correct output fail the check.
        """
        if self._check_info is None:
            try:
                checked = onnx.shape_inference.infer_shapes(_fallback_check_model(model), strict_mode=False)
            except Exception:  # noqa: BLE001 - no inference, no checks
                self._check_info = ({}, None)
            else:
                nodes = list(checked.graph.node)
                self._check_info = (_value_types(checked), nodes if len(nodes) == len(model.graph.node) else None)
        return self._check_info

    def _apply_graph_passes(
        self, graph: onnx.GraphProto, opsets: Mapping[str, int]
    ) -> dict[int, tuple[onnx.NodeProto, list[int], Any, list[tuple[onnx.NodeProto, Any]]]]:
        """Runs the fusion passes; {index of the last replaced node: (node,
        replaced indices, prepared, [(before node, prepared), ...])}.

        A rewrite is kept only when it is well formed and registered native
        kernels accept the replacement node and every node it runs before
        it (created here, once); otherwise the original nodes run. Types
        come from whole-model inference, and where it stopped (ops of custom
        domains), from the registrations that will run the nodes.
        """
        passes = [p for p in graph_passes() if p.kind == "fusion"]
        if not passes or not len(graph.node):
            return {}
        names = [n.name or f"{n.op_type}_{i}" for i, n in enumerate(graph.node)]
        if len(set(names)) != len(names):
            return {}  # rewrites name the nodes they replace: names must be unique
        table = dispatch_table()
        self._type_values(graph, opsets, table)
        ctx: GraphPassContext = build_context(
            graph, names, self._types, self._constants, opsets, [_subgraph_outer_names(n) for n in graph.node]
        )
        taken: set[int] = set()
        result: dict[int, tuple[onnx.NodeProto, list[int], Any, list[tuple[onnx.NodeProto, Any]]]] = {}
        used_names = set(names)

        def named(node: onnx.NodeProto, name: str) -> onnx.NodeProto:
            if node.name:
                return node
            copy = onnx.NodeProto()
            copy.CopyFrom(node)
            copy.name = name
            return copy

        # Every pass sees the graph as loaded, and what the context derived
        # from it (indexes, propagated shapes) is shared: a pass that edited
        # the graph would leave both stale for the passes after it.
        digest = graph_digest(graph)
        for gp in passes:
            try:
                rewrites = list(gp.run(ctx) or ())
            except Exception as exc:  # noqa: BLE001 - a broken pass must not break the model
                raise OlcError(f"graph pass {gp.name!r} ({gp.family}) failed: {type(exc).__name__}: {exc}") from exc
            if graph_digest(graph) != digest:
                raise OlcError(f"graph pass {gp.name!r} ({gp.family}) changed the graph it was given; "
                               "a pass must return Rewrite records and leave the graph as it is")
            for rw in rewrites:
                indices, _why = validate_rewrite(ctx, rw, taken)
                if indices is None:
                    continue
                node = rw.node
                name = node.name or f"{node.op_type}_{names[indices[-1]]}"
                before_names = [b.name or f"{b.op_type}_{names[indices[-1]]}_{k}" for k, b in enumerate(rw.before)]
                all_names = [*before_names, name]
                if len(set(all_names)) != len(all_names) or used_names.intersection(all_names):
                    continue
                typed_before: list[str] = []  # before nodes' outputs typed here, untyped again on refusal
                before: list[tuple[onnx.NodeProto, Any]] = []
                desc = describe_replaced(ctx, indices)
                for b_node, b_name in zip(rw.before, before_names):
                    b_domain = normalize_domain(b_node.domain)
                    b_prepared = self._prepare_fused(table, b_node, b_name, opsets.get(b_domain, 1))
                    if b_prepared is None:
                        break
                    typed_before.extend(n for n in b_node.output if n)
                    b_reg, b_kernel = b_prepared
                    before.append((named(b_node, b_name), (b_reg, b_kernel, desc, gp.name, name)))
                prepared = self._prepare_fused(table, node, name) if len(before) == len(rw.before) else None
                if prepared is None:
                    for n in typed_before:
                        self._types.pop(n, None)
                    continue
                reg, kernel = prepared
                used_names.update(all_names)
                taken.update(indices)
                for b_name in before_names:  # expanded plans list it where it runs
                    self._node_index[b_name] = indices[-1]
                result[indices[-1]] = (named(node, name), indices, (reg, kernel, desc, gp.name, ""), before)
        return result

    def _type_values(self, graph: onnx.GraphProto, opsets: Mapping[str, int], table: Any) -> None:
        """Types the outputs whole-model inference left untyped, node by node
        in graph order, as building the plan does (per-node inference, then
        the output types of the registration that covers the node), so that
        graph passes see the values after ops of custom domains typed."""
        for node in graph.node:
            if all(not n or _tensor_elem(self._types.get(n)) for n in node.output):
                continue
            domain = normalize_domain(node.domain)
            opset = opsets.get(domain)
            if opset is None:
                continue
            self._infer_missing_output_types(node, domain, opset)
            if all(not n or _tensor_elem(self._types.get(n)) for n in node.output):
                continue
            input_types = tuple(TYPE_NAMES.get(_tensor_elem(self._types.get(n))) if n else "" for n in node.input)
            reg, _ = self._choose(table, node, domain, opset, input_types)
            if reg is None:
                continue
            for name, t in zip(node.output, reg.output_types(input_types)):
                if name and t is not None and _tensor_elem(self._types.get(name)) == 0:
                    self._types[name] = helper.make_tensor_type_proto(TYPE_CODES[t], None)

    def _prepare_fused(self, table: Any, node: onnx.NodeProto, name: str,
                       opset: int = 1) -> tuple[KernelRegistration, Any] | None:
        """The registration and created native kernel of a node a rewrite
        makes (at `opset` of its domain), or None."""
        domain = normalize_domain(node.domain)
        input_types = tuple(TYPE_NAMES.get(_tensor_elem(self._types.get(n))) if n else "" for n in node.input)
        reg, _ = self._choose(table, node, domain, opset, input_types)
        if reg is None or not isinstance(reg.factory, _CAPSULE_TYPE):
            return None
        # Outputs inference left untyped (ops it types only in part, such as
        # a tree classifier's scores) take the registration's types, as for
        # a plain node; still unknown: the original nodes run instead.
        typed: dict[str, onnx.TypeProto] = {}
        for out, t in zip(node.output, reg.output_types(input_types)):
            if out and t is not None and _tensor_elem(self._types.get(out)) == 0:
                typed[out] = helper.make_tensor_type_proto(TYPE_CODES[t], None)
        if any(_tensor_elem(typed.get(n) or self._types.get(n)) == 0 for n in node.output if n):
            return None
        saved = {n: self._types.get(n) for n in typed}
        self._types.update(typed)
        try:
            kernel = _native.create_kernel(reg.factory, self._native_node_info(node, name, domain, opset, reg))
        except Exception:  # noqa: BLE001 - the kernel refused: run the original nodes
            for n, tp in saved.items():
                if tp is None:
                    self._types.pop(n, None)
                else:
                    self._types[n] = tp
            return None
        return reg, kernel

    def _choose(
        self, table: Any, node: onnx.NodeProto, domain: str, opset: int, input_types: tuple[str | None, ...]
    ) -> tuple[KernelRegistration | None, str]:
        """The registration that runs this node, or None, and why."""
        selection = table.select(domain, node.op_type, opset, input_types, naive=self._naive, node=node)
        reg = selection.registration
        if reg is None:
            return None, selection.reason
        if isinstance(reg.factory, _CAPSULE_TYPE) and reg.native_attributes is None and any(
            a.type not in _NATIVE_ATTRIBUTE_TYPES for a in node.attribute
        ):
            return None, f"{reg.kernel_name}: node has attributes a native kernel cannot take"
        return reg, selection.reason

    def _infer_missing_output_types(self, node: onnx.NodeProto, domain: str, opset: int) -> None:
        """Per-node inference for outputs whole-model inference left untyped.

        Inference stops at the first op it has no schema for (a custom
        domain), leaving every later value untyped; inferring node by node
        from the types known so far recovers them.
        """
        if all(not n or _tensor_elem(self._types.get(n)) for n in node.output):
            return
        try:
            schema = onnx.defs.get_schema(node.op_type, opset, "" if domain == "ai.onnx" else domain)
            known = {n: self._types[n] for n in node.input if n and n in self._types}
            if len(known) < len([n for n in node.input if n]):
                return
            inferred = onnx.shape_inference.infer_node_outputs(schema, node, known)
        except Exception:  # noqa: BLE001 - best effort, as whole-model inference
            return
        for name, tp in inferred.items():
            if name and _tensor_elem(self._types.get(name)) == 0:
                self._types[name] = tp

    def _native_node_info(self, node: onnx.NodeProto, name: str, domain: str, opset: int,
                          reg: KernelRegistration | None = None) -> dict[str, Any]:
        def rank(name: str) -> int:
            dims = _shape_of(self._types.get(name)) if name else None
            return -1 if dims is None else len(dims)

        if reg is not None and reg.native_attributes is not None:
            try:
                shapes = [_shape_of(self._types.get(n)) if n else None for n in node.input]
                attributes = [(n, int(t), v) for n, t, v in reg.native_attributes(node, shapes)]
            except ValueError as exc:
                raise OlcError(f"{_label(name, node.op_type)}: {exc}") from None
        else:
            attributes = [native_attribute(a) for a in node.attribute]
        return {
            "name": name,
            "domain": domain,
            "op_type": node.op_type,
            "opset": opset,
            "input_dtypes": [_tensor_elem(self._types.get(n)) if n else 0 for n in node.input],
            "input_ranks": [rank(n) for n in node.input],
            "output_dtypes": [_tensor_elem(self._types.get(n)) if n else 0 for n in node.output],
            "attributes": attributes,
            "input_constants": [self._constants.get(n) for n in node.input],
        }

    # ------------------------------------------------------------- running

    def run(self, output_names: Sequence[str] | None, input_feed: Mapping[str, Any], run_options: Any = None) -> list:
        """Runs the model; the same call shape as onnxruntime's InferenceSession.run."""
        start = time.perf_counter_ns() if self._profiling else 0
        try:
            outputs = self._plan.run(output_names, input_feed)
        except OlcError as err:
            # The runtime reports a failed fallback node by its message only:
            # raise the node's own error again, with the exception it chains.
            failure = _take_failure()
            if failure is not None and str(failure) in str(err):
                raise failure from failure.__cause__
            raise
        if self._profiling:
            self._profile_runs.append(self._plan.last_profile())
            self._profile_starts.append(start)
            nested: list[ProfileRecord] = []
            for path, sub in self._subsessions:
                for sub_start, records in sub._take_profile_runs():
                    offset_us = (sub_start - start) / 1e3
                    nested.extend(replace(r, start_us=r.start_us + offset_us,
                                          subgraph=f"{path}/{r.subgraph}" if r.subgraph else path) for r in records)
            self._profile_nested.append(sorted(nested, key=lambda r: r.start_us))
        return outputs

    # ------------------------------------------------------------ profiling

    def profile_records(self) -> list[ProfileRecord]:
        """Per step and run, in run order (``profile=True``): the wall time of
        every step of every run since the session was made (or since
        :meth:`clear_profile`), with its node, kernel and output shapes."""
        records: list[ProfileRecord] = []
        for run, (steps, _) in enumerate(self._profile_runs):
            for step, start_ns, duration_ns, shapes, cached in steps:
                e = self._plan_entries[self._step_entries[step]]
                records.append(ProfileRecord(
                    run, e.node_name, e.op_type, e.kernel, e.native, start_ns / 1e3, duration_ns / 1e3,
                    tuple(tuple(int(d) for d in sh) for sh in shapes), self._threads,
                    tuple(name for name, _ in e.fused_nodes), bool(cached)))
            # A subgraph's steps follow the runs of the steps that ran them.
            records.extend(replace(r, run=run) for r in self._profile_nested[run])
        return records

    def _take_profile_runs(self) -> list[tuple[int, list[ProfileRecord]]]:
        """(start, records) of each run profiled since the last call, then
        forgets them: an enclosing session files them under its own run."""
        by_run: dict[int, list[ProfileRecord]] = {}
        for r in self.profile_records():
            by_run.setdefault(r.run, []).append(r)
        taken = [(start, by_run.get(run, [])) for run, start in enumerate(self._profile_starts)]
        self.clear_profile()
        return taken

    def run_times_us(self) -> list[float]:
        """Wall time of each profiled run, from its first step's start to its last step's end."""
        return [total / 1e3 for _, total in self._profile_runs]

    def clear_profile(self) -> None:
        """Forgets the runs profiled so far."""
        self._profile_runs.clear()
        self._profile_starts.clear()
        self._profile_nested.clear()

    def write_profile(self, path: str | os.PathLike[str]) -> str:
        """Writes the profile as Chrome trace-event JSON, the format
        onnxruntime's profiler writes (chrome://tracing and Perfetto open
        both): one "Session" event per run and one "Node" event per step,
        named ``<node>_kernel_time``, with the op, kernel and provider in
        ``args``. Returns the path."""
        import json

        by_run: dict[int, list[ProfileRecord]] = {}
        for r in self.profile_records():
            by_run.setdefault(r.run, []).append(r)
        pid = os.getpid()
        events: list[dict[str, Any]] = []
        offset = 0.0
        for run, total_us in enumerate(self.run_times_us()):
            events.append({"cat": "Session", "pid": pid, "tid": 0, "dur": round(total_us, 3),
                           "ts": round(offset, 3), "ph": "X", "name": "model_run", "args": {"run": run}})
            for r in by_run.get(run, []):
                args: dict[str, Any] = {"op_name": r.op_type, "kernel": r.kernel,
                                        "provider": "olc" if r.native else FALLBACK_LIBRARY,
                                        "output_shapes": [list(sh) for sh in r.output_shapes], "threads": r.threads}
                if r.fused_nodes:
                    args["fused_nodes"] = list(r.fused_nodes)
                if r.cached:
                    args["shape_plan"] = "cached"
                if r.subgraph:
                    args["subgraph"] = r.subgraph
                events.append({"cat": "Node", "pid": pid, "tid": 0, "dur": round(r.duration_us, 3),
                               "ts": round(offset + r.start_us, 3), "ph": "X", "name": f"{r.node_name}_kernel_time",
                               "args": args})
            offset += total_us + 1.0
        with open(path, "w") as f:
            json.dump(events, f)
        return str(path)

    def shape_plan_stats(self) -> dict[str, int]:
        """The shape-plan cache so far: runs that took the cached shape values
        (``hits``), runs that computed them (``misses``), and the feed-shape
        signatures held (``signatures``). All zero when no node is cached."""
        hits, misses, held = self._plan.shape_plan_stats()
        return {"hits": int(hits), "misses": int(misses), "signatures": int(held)}

    def prepacked_bytes(self) -> int:
        """Bytes the session's kernels hold prepared from constant inputs
        (packed weights), each shared buffer counted once."""
        return sum(self._prepacked.values())

    def kernel_plan(self, expand_fused: bool = False) -> list[PlanEntry]:
        """For every node, in graph order: the kernel chosen and why.

        By default a group of nodes a graph pass fused is one entry (the fused
        node, its ``fused_nodes`` naming the originals). ``expand_fused=True``
        gives one entry per node of the original graph instead, in its order:
        each fused original carries the fused node's kernel, ``fused_into``
        (the fused node's name), ``graph_pass`` and the reason
        "fused into <node> by <pass>".
        """
        if not expand_fused or not any(e.fused_nodes for e in self._plan_entries):
            return list(self._plan_entries)
        indexed: list[tuple[int, PlanEntry]] = []
        for e in self._plan_entries:
            if not e.fused_nodes:
                indexed.append((self._node_index[e.node_name], e))
                continue
            for name, op_type in e.fused_nodes:
                index = self._node_index[name]
                indexed.append((index, PlanEntry(
                    name, self._node_domains[index], op_type, e.kernel, e.native,
                    f"fused into {e.node_name} by {e.graph_pass}", graph_pass=e.graph_pass, fused_into=e.node_name,
                    shape_plan=e.shape_plan,
                )))
        return [e for _, e in sorted(indexed, key=lambda item: item[0])]

    def _warn_fallbacks(self, node_count: int) -> None:
        """One WARNING naming the nodes that run on the fallback at every run.

        Constant nodes the fallback evaluated once while building are not
        counted: their values are plan constants and cost nothing per run.
        """
        if not self._fallback_nodes:
            return
        ops = Counter(op if domain == "ai.onnx" else f"{domain}::{op}" for domain, op in self._fallback_nodes)
        listed = ", ".join(f"{op} x{n}" for op, n in ops.most_common())
        count = len(self._fallback_nodes)
        logger.warning(
            "%d of %d nodes run on the %s fallback: %s (Session(strict=True) refuses this; "
            "kernel_plan() says why each has no kernel)",
            count, node_count, FALLBACK_LIBRARY, listed,
            extra={"olc_fallback": {"count": count, "nodes": node_count, "ops": dict(ops.most_common())}},
        )

    def kernel_usage(self) -> list[str]:
        """Library-qualified names of the kernels the last run used, in order (record_usage=True)."""
        return list(self._plan.last_usage())

    def kernel_usage_details(self) -> list[str]:
        """Details kernels recorded in the last run (e.g. the ISA variant), when recording."""
        return list(self._plan.last_usage_details())

    def get_inputs(self) -> list[NodeArg]:
        return list(self._inputs)

    def get_outputs(self) -> list[NodeArg]:
        return list(self._outputs)

    @property
    def threads(self) -> int:
        return self._threads

    @property
    def strict(self) -> bool:
        return self._strict

    @property
    def fusion(self) -> bool:
        return self._fusion

    @property
    def naive(self) -> bool | frozenset[str]:
        """True, False, or the families whose naive kernels this session takes."""
        return self._naive


_CAPSULE_TYPE = type(_native._C_API)


def _naive_option(naive: bool | str | Iterable[str]) -> bool | frozenset[str]:
    """Session's ``naive`` argument: True/False, or the family names it lists
    (each one an installed family)."""
    if isinstance(naive, bool):
        return naive
    names = frozenset([naive] if isinstance(naive, str) else naive)
    from .registry import registered_kernels

    known = {r.family for r in registered_kernels()}
    unknown = sorted(names - known)
    if unknown:
        raise ValueError(f"naive: no installed family is named {', '.join(map(repr, unknown))} "
                         f"(installed: {', '.join(sorted(f for f in known if f))})")
    return names


def np_dtype_of(type_name: str) -> np.dtype:
    """numpy dtype of a registration type name: onnx's own mapping of its
    element type (bfloat16 and float8 are ml_dtypes types, string is object)."""
    return np.dtype(helper.tensor_dtype_to_np_dtype(TYPE_CODES[type_name]))
