"""If, Loop, Scan and SequenceMap on the olc runtime: each subgraph becomes a
Session of its own, prepared once (its own kernel plan, native kernels and
fusion), and the node is a Python step that picks a branch or iterates the
body.

A subgraph reads values of the enclosing graphs by name; its Session takes
each of them as an extra graph input, fed by reference on every call (no
copy: a runtime buffer reaches it as an array over the same memory). Their
declared type is the element type alone: a feed may change an
initializer's shape, and the enclosing graph already checked it.

Values may be tensors or sequences of tensors (Python lists, which the
runtime passes through as objects): a loop-carried sequence is declared to
the body's Session as a sequence of that element type.

Scan-8 (batch axis, sequence_lens), and subgraphs whose enclosing values have
no known element type (or are neither tensors nor sequences), stay on the
onnx.reference fallback.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

import numpy as np
import onnx
from onnx import helper

from .errors import InvalidModelError, OlcError
from .registration import elem_name as _elem_name
from .registration import normalize_domain

CONTROL_FLOW_OPS = ("If", "Loop", "Scan", "SequenceMap")


def check_signature(node: onnx.NodeProto, label: str, opset: int | None = None) -> None:
    """If, Loop and Scan, on olc or on the fallback: the subgraphs' inputs and
    outputs must match the node's, as the schema counts them (raised at
    construction, before any run). ``opset`` is the model's ai.onnx opset
    (Scan-8 takes a sequence_lens input first, which its body does not see)."""
    if normalize_domain(node.domain) != "ai.onnx" or node.op_type not in ("If", "Loop", "Scan", "SequenceMap"):
        return
    graphs = {a.name: a.g for a in node.attribute if a.type == onnx.AttributeProto.GRAPH}
    n_out = len(node.output)

    def fail(why: str) -> NoReturn:
        raise InvalidModelError(f"{label}: {why}")

    if node.op_type == "If":
        for branch in ("then_branch", "else_branch"):
            if branch not in graphs:
                fail(f"attribute '{branch}' is missing")
            if len(graphs[branch].output) != n_out:
                fail(f"{branch} has {len(graphs[branch].output)} outputs, the node {n_out}")
    elif node.op_type == "Loop":
        body = graphs.get("body")
        if body is None:
            fail("attribute 'body' is missing")
        carried = len(node.input) - 2
        if carried < 0:
            fail("a Loop takes at least the trip count and condition inputs (either may be empty)")
        if len(body.input) != 2 + carried:
            fail(f"the body takes {len(body.input)} inputs, expected 2 + {carried} loop-carried values")
        scans = len(body.output) - 1 - carried
        if scans < 0 or n_out != carried + scans:
            fail(f"the body returns {len(body.output)} values, expected the condition, {carried} loop-carried "
                 f"value(s) and one per scan output ({n_out} node outputs)")
    elif node.op_type == "SequenceMap":
        body = graphs.get("body")
        if body is None:
            fail("attribute 'body' is missing")
        if len(body.input) != len(node.input):
            fail(f"the body takes {len(body.input)} inputs, the node gives {len(node.input)}")
        if len(body.output) != n_out:
            fail(f"the body returns {len(body.output)} values, the node has {n_out} outputs")
    else:
        body = graphs.get("body")
        m = next((a.i for a in node.attribute if a.name == "num_scan_inputs"), None)
        if body is None or m is None:
            fail("attributes 'body' and 'num_scan_inputs' are required")
        given = len(node.input) - (1 if opset is not None and opset < 9 else 0)
        if given - m < 0 or len(body.input) != given:
            fail(f"the body takes {len(body.input)} inputs, the node gives {given}"
                 + (" (after sequence_lens)" if given != len(node.input) else ""))
        if len(body.output) != n_out:
            fail(f"the body returns {len(body.output)} values, the node has {n_out} outputs")


def _elem_type(tp: onnx.TypeProto | None) -> int:
    if tp is None or tp.WhichOneof("value") != "tensor_type":
        return 0
    return int(tp.tensor_type.elem_type)


def _declared(tp: onnx.TypeProto | None) -> onnx.TypeProto | None:
    """``tp`` reduced to what a subgraph input declares for an enclosing or
    carried value: the element type of a tensor, or of a sequence's
    tensors; None when that is unknown (or the value is of another kind)."""
    if tp is None:
        return None
    kind = tp.WhichOneof("value")
    if kind == "tensor_type" and tp.tensor_type.elem_type:
        return helper.make_tensor_type_proto(tp.tensor_type.elem_type, None)
    if kind == "sequence_type":
        inner = _declared(tp.sequence_type.elem_type)
        if inner is not None and inner.WhichOneof("value") == "tensor_type":
            return helper.make_sequence_type_proto(inner)
    return None


def _known(tp: onnx.TypeProto | None) -> bool:
    return _declared(tp) is not None


def subgraph_model(model: onnx.ModelProto, graph: onnx.GraphProto, outer: Sequence[str],
                   types: Mapping[str, onnx.TypeProto],
                   input_types: Sequence[onnx.TypeProto | None] = (),
                   bound: Mapping[str, np.ndarray] | None = None) -> onnx.ModelProto | None:
    """A model of ``graph`` whose inputs are its own and then ``outer``; None
    when a type it needs is unknown (or neither a tensor nor a sequence of
    tensors). ``input_types[i]`` types the subgraph's own input i when the
    subgraph leaves it untyped (exporters often do for loop-carried values).
    An outer name in ``bound`` (an enclosing constant, which the subgraph's
    Session binds) is declared with its value's type and whole shape."""
    sub = onnx.GraphProto()
    sub.CopyFrom(graph)
    for i, vi in enumerate(sub.input):
        if _known(vi.type):
            continue
        fill = _declared(input_types[i]) if i < len(input_types) else None
        if fill is None:
            return None
        vi.type.CopyFrom(fill)
    for name in outer:
        if bound is not None and name in bound:
            elem = _elem_type(types.get(name)) or helper.np_dtype_to_tensor_dtype(bound[name].dtype)
            sub.input.append(helper.make_tensor_value_info(name, elem, list(bound[name].shape)))
            continue
        declared = _declared(types.get(name))
        if declared is None:
            return None
        sub.input.append(helper.make_value_info(name, declared))
    return helper.make_model(sub, opset_imports=list(model.opset_import), ir_version=model.ir_version,
                             functions=list(model.functions))


def _fail(message: str, cause: BaseException | None = None) -> OlcError:
    """An error the enclosing Session.run raises as it is (the runtime keeps
    only a Python step's message otherwise)."""
    from .session import _stash_failure

    error = OlcError(message)
    error.__cause__ = cause
    return _stash_failure(error)


def _run_subgraph(label: str, name: str, session: Any, feeds: Mapping[str, Any]) -> list[Any]:
    try:
        return list(session.run(None, feeds))
    except OlcError as exc:
        raise _fail(f"{label}, {name}: {exc}", exc) from exc


def _iteration_shape(tp: onnx.TypeProto | None) -> tuple[int, ...] | None:
    """The per-iteration shape of a scan output whose stacked type is ``tp``."""
    if tp is None or tp.WhichOneof("value") != "tensor_type" or not tp.tensor_type.HasField("shape"):
        return None
    dims = tp.tensor_type.shape.dim
    if len(dims) < 1 or any(not d.HasField("dim_value") for d in dims[1:]):
        return None
    return tuple(int(d.dim_value) for d in dims[1:])


def _type_text(tp: onnx.TypeProto) -> str:
    kind = tp.WhichOneof("value")
    if kind == "sequence_type":
        return f"sequence({_type_text(tp.sequence_type.elem_type)})"
    if kind != "tensor_type":
        return kind or "an unknown type"
    elem = tp.tensor_type.elem_type
    text = _elem_name(elem) if elem else "tensor"
    if tp.tensor_type.HasField("shape"):
        dims = [str(d.dim_value) if d.HasField("dim_value") else (d.dim_param or "?")
                for d in tp.tensor_type.shape.dim]
        text += "[" + ", ".join(dims) + "]"
    return text


def _contradiction(given: onnx.TypeProto | None, declared: onnx.TypeProto | None) -> str | None:
    """Why a value of type ``given`` cannot be one of type ``declared``; None
    when it can (either unknown, or ``declared`` leaves the difference open:
    no shape, a symbolic or missing dimension)."""
    if given is None or declared is None:
        return None
    kg, kd = given.WhichOneof("value"), declared.WhichOneof("value")
    if kg is None or kd is None:
        return None
    if kg != kd:
        return f"{_type_text(given)}, not the {_type_text(declared)} the node declares"
    if kg == "sequence_type":
        return _contradiction(given.sequence_type.elem_type, declared.sequence_type.elem_type)
    if kg != "tensor_type":
        return None
    g, d = given.tensor_type, declared.tensor_type
    if g.elem_type and d.elem_type and g.elem_type != d.elem_type:
        return f"{_type_text(given)}, not the {_type_text(declared)} the node declares"
    if g.HasField("shape") and d.HasField("shape"):
        gd, dd = g.shape.dim, d.shape.dim
        if len(gd) != len(dd) or any(a.HasField("dim_value") and b.HasField("dim_value") and a.dim_value != b.dim_value
                                     for a, b in zip(gd, dd)):
            return f"{_type_text(given)}, not the {_type_text(declared)} the node declares"
    return None


def _declared_types(graph: onnx.GraphProto, names: Sequence[str]) -> list[onnx.TypeProto | None]:
    """The types ``graph`` itself declares (graph outputs, value_info) for ``names``."""
    found = {vi.name: vi.type for vi in list(graph.value_info) + list(graph.output)}
    return [found.get(name) for name in names]


class _OutputCheck:
    """A declared tensor type a value computed at run time must fit: its
    element type and, where the declaration gives them, rank and fixed
    dimensions (symbolic and missing ones accept any size)."""

    def __init__(self, tp: onnx.TypeProto | None):
        self.dtype = _numpy_dtype(tp)
        self.dims: tuple[int | None, ...] | None = None
        if tp is not None and tp.WhichOneof("value") == "tensor_type" and tp.tensor_type.HasField("shape"):
            self.dims = tuple(int(d.dim_value) if d.HasField("dim_value") else None for d in tp.tensor_type.shape.dim)
        self.text = _type_text(tp) if tp is not None else ""
        # The element type and shape of the last value that fit: a branch
        # run after run returns the same, and the full check cost half a
        # microsecond per output of every If.
        self._fits: tuple[np.dtype, tuple[int, ...]] | None = None

    def why_not(self, value: Any) -> str | None:
        if self.dtype is None and self.dims is None:
            return None
        if not isinstance(value, np.ndarray):
            return f"a {type(value).__name__}, not the tensor {self.text} the node declares"
        fits = self._fits
        if fits is not None and value.dtype is fits[0] and value.shape == fits[1]:
            return None
        if self.dtype is not None and value.dtype != self.dtype:
            return f"{value.dtype} {list(value.shape)}, not the {self.text} the node declares"
        if self.dims is not None and (value.ndim != len(self.dims) or any(
                d is not None and d != s for d, s in zip(self.dims, value.shape))):
            return f"shape {list(value.shape)}, not the {self.text} the node declares"
        self._fits = (value.dtype, value.shape)
        return None


class IfKernel:
    """Runs the branch the condition picks on its prepared Session; each
    output is checked against the If's declared type (branches may differ
    in shape, even in rank, wherever that declaration leaves it open)."""

    def __init__(self, label: str, then_session: Any, else_session: Any, outer: Sequence[str],
                 declared: Sequence[onnx.TypeProto | None] = ()):
        self._label = label
        self._branches = (else_session, then_session)
        self._outer = list(outer)
        self._checks = [(k, _OutputCheck(tp)) for k, tp in enumerate(declared)
                        if tp is not None and tp.WhichOneof("value") == "tensor_type"]

    def __call__(self, cond: Any, *outer_values: Any) -> list[Any]:
        c = np.asarray(cond)
        if c.size != 1:
            raise _fail(f"{self._label}: the condition must hold one element, got shape {list(c.shape)}")
        taken = int(bool(c.item()))
        branch = ("else_branch", "then_branch")[taken]
        outs = _run_subgraph(self._label, branch, self._branches[taken], dict(zip(self._outer, outer_values)))
        for k, check in self._checks:
            why = check.why_not(outs[k])
            if why is not None:
                raise _fail(f"{self._label}: {branch} output {k} is {why}")
        return outs


class LoopKernel:
    """Iterates the body's prepared Session as the Loop schema says: the trip
    count and the condition both optional, loop-carried values passed from
    one iteration to the next, scan outputs stacked along a new first axis."""

    def __init__(self, label: str, body_session: Any, body: onnx.GraphProto, n_carried: int, outer: Sequence[str],
                 scan_types: Sequence[onnx.TypeProto | None]):
        self._label = label
        self._session = body_session
        self._iter_name = body.input[0].name
        self._cond_name = body.input[1].name
        self._carried_names = [vi.name for vi in body.input[2:2 + n_carried]]
        self._n_carried = n_carried
        self._outer = list(outer)
        # Dtype and per-iteration shape of each scan output (the enclosing
        # graph's inference types the stacked output), for a loop that runs
        # no iteration.
        self._n_scans = len(body.output) - 1 - n_carried
        self._scan_dtypes = [_numpy_dtype(tp) for tp in scan_types]
        self._scan_shapes = [_iteration_shape(tp) for tp in scan_types]

    def __call__(self, trip_count: Any, cond: Any, *rest: Any) -> list[Any]:
        carried = list(rest[:self._n_carried])
        outer = dict(zip(self._outer, rest[self._n_carried:]))
        max_trips = None if trip_count is None else int(np.asarray(trip_count).reshape(-1)[0])
        keep_going = True if cond is None else bool(np.asarray(cond).reshape(-1)[0])
        scans: list[list[Any]] = [[] for _ in range(self._n_scans)]
        i = 0
        while keep_going and (max_trips is None or i < max_trips):
            feeds = {self._iter_name: np.array(i, np.int64), self._cond_name: np.array(keep_going), **outer}
            feeds.update(zip(self._carried_names, carried))
            outs = _run_subgraph(self._label, f"body (iteration {i})", self._session, feeds)
            keep_going = bool(np.asarray(outs[0]).reshape(-1)[0])
            carried = list(outs[1:1 + self._n_carried])
            for k, value in enumerate(outs[1 + self._n_carried:]):
                scans[k].append(value)
            i += 1
        results = carried
        for k, values in enumerate(scans):
            if values:
                first = np.shape(values[0])
                if any(np.shape(v) != first for v in values):
                    raise _fail(f"{self._label}: scan output {k} changes shape between iterations")
                results.append(np.stack(values))
                continue
            shape = self._scan_shapes[k] if k < len(self._scan_shapes) else None
            dtype = self._scan_dtypes[k] if k < len(self._scan_dtypes) else None
            if shape is None or dtype is None:
                raise _fail(f"{self._label}: the loop ran no iteration and the shape of scan output {k} "
                            "is not known, so its empty value cannot be built")
            results.append(np.zeros((0, *shape), dtype))
        return results


def _numpy_dtype(tp: onnx.TypeProto | None) -> np.dtype | None:
    elem = _elem_type(tp)
    if not elem:
        return None
    try:
        return np.dtype(helper.tensor_dtype_to_np_dtype(elem))
    except Exception:  # noqa: BLE001 - an element type numpy cannot hold
        return None


def _fixed_dims(tp: onnx.TypeProto | None) -> tuple[int, ...] | None:
    """Every dimension of a tensor type, when all are fixed."""
    if tp is None or tp.WhichOneof("value") != "tensor_type" or not tp.tensor_type.HasField("shape"):
        return None
    dims = tp.tensor_type.shape.dim
    if any(not d.HasField("dim_value") for d in dims):
        return None
    return tuple(int(d.dim_value) for d in dims)


def _rank(tp: onnx.TypeProto | None) -> int | None:
    if tp is None or tp.WhichOneof("value") != "tensor_type" or not tp.tensor_type.HasField("shape"):
        return None
    return len(tp.tensor_type.shape.dim)


def _slicer(axis: int) -> tuple[slice, ...]:
    return (slice(None),) * axis


class ScanKernel:
    """Iterates the body's prepared Session over slices of the scan inputs,
    as Scan (opset 9 and later) says: the state variables carried from one
    iteration to the next, each scan input read along its axis in its
    direction, each scan output stacked along its axis in its direction.

    A slice is a view of its input (numpy basic indexing; contiguous when the
    axis is the first); each stacked output is allocated once, when the
    first iteration gives its shape, and each iteration's value is copied
    into its place."""

    def __init__(self, label: str, body_session: Any, body: onnx.GraphProto, n_state: int, n_scan: int,
                 opset: int, attrs: Mapping[str, Any], outer: Sequence[str],
                 scan_in_types: Sequence[onnx.TypeProto | None], out_types: Sequence[onnx.TypeProto | None],
                 body_out_types: Sequence[onnx.TypeProto | None]):
        self._label = label
        self._session = body_session
        self._n_state = n_state
        self._n_scan = n_scan
        self._n_out = len(body.output) - n_state
        self._state_names = [vi.name for vi in body.input[:n_state]]
        self._scan_names = [vi.name for vi in body.input[n_state:]]
        self._outer = list(outer)
        self._negative_ok = opset >= 11

        def listed(name: str, count: int, what: str) -> list[int]:
            values = [int(v) for v in attrs.get(name, [0] * count)]
            if len(values) != count:
                raise InvalidModelError(f"{label}: '{name}' has {len(values)} values, one per {what} ({count}) "
                                        "is required")
            return values

        self._in_axes = listed("scan_input_axes", n_scan, "scan input")
        self._in_dirs = listed("scan_input_directions", n_scan, "scan input")
        self._out_axes = listed("scan_output_axes", self._n_out, "scan output")
        self._out_dirs = listed("scan_output_directions", self._n_out, "scan output")
        for name, values in (("scan_input_directions", self._in_dirs), ("scan_output_directions", self._out_dirs)):
            for j, d in enumerate(values):
                if d not in (0, 1):
                    raise InvalidModelError(f"{label}: {name}[{j}] is {d}; a direction is 0 (forward) or 1 (reverse)")
        # Axes checked now where the ranks are known (again at every run).
        for j, tp in enumerate(scan_in_types):
            r = _rank(tp)
            if r is not None:
                self._axis(self._in_axes[j], r, f"scan_input_axes[{j}]", f"scan input {j}", InvalidModelError)
        # For a scan of length 0: each scan output's per-iteration dtype and
        # shape, from the body's types or else from the node's stacked type.
        self._empty: list[tuple[np.dtype | None, tuple[int, ...] | None]] = []
        for k in range(self._n_out):
            body_tp = body_out_types[k] if k < len(body_out_types) else None
            node_tp = out_types[k] if k < len(out_types) else None
            dtype = _numpy_dtype(body_tp)
            if dtype is None:  # (a dtype's truth is its field count: no `or`)
                dtype = _numpy_dtype(node_tp)
            shape = _fixed_dims(body_tp)
            stacked = _fixed_dims(node_tp)
            if shape is None and stacked is not None and stacked:
                a = self._out_axes[k] + len(stacked) if self._out_axes[k] < 0 else self._out_axes[k]
                if 0 <= a < len(stacked):
                    shape = stacked[:a] + stacked[a + 1:]
            self._empty.append((dtype, shape))

    def _axis(self, axis: int, rank: int, attr: str, what: str, error: Any = None) -> int:
        """``axis`` of a tensor of rank ``rank``, made non-negative."""
        def bad(why: str) -> NoReturn:
            message = f"{self._label}: {attr} is {axis}, {why}"
            raise error(message) if error is not None else _fail(message)

        if axis < 0 and not self._negative_ok:
            bad("negative axes need Scan opset 11 or later")
        if not -rank <= axis < rank:
            bad(f"outside [{-rank}, {rank - 1}] for {what} (rank {rank})")
        return axis + rank if axis < 0 else axis

    def __call__(self, *args: Any) -> list[Any]:
        n, m = self._n_state, self._n_scan
        states = list(args[:n])
        outer = dict(zip(self._outer, args[n + m:]))
        inputs: list[tuple[np.ndarray, tuple[slice, ...], bool]] = []
        length = -1
        for j, x in enumerate(args[n:n + m]):
            if not isinstance(x, np.ndarray):
                raise _fail(f"{self._label}: scan input {j} is a {type(x).__name__}, not a tensor")
            axis = self._axis(self._in_axes[j], x.ndim, f"scan_input_axes[{j}]", f"scan input {j}")
            if length < 0:
                length = x.shape[axis]
            elif x.shape[axis] != length:
                raise _fail(f"{self._label}: scan input {j} has {x.shape[axis]} elements along its scan axis "
                            f"{axis} (shape {list(x.shape)}), scan input 0 has {length}; all scan inputs must "
                            "have the same length")
            inputs.append((x, _slicer(axis), self._in_dirs[j] == 1))
        initial = [(np.asarray(v).dtype, np.shape(v)) for v in states]
        stacked: list[tuple[np.ndarray, tuple[slice, ...], bool, tuple[int, ...]]] = []
        for t in range(max(length, 0)):
            feeds = dict(outer)
            feeds.update(zip(self._state_names, states))
            for name, (x, prefix, reverse) in zip(self._scan_names, inputs):
                feeds[name] = x[prefix + ((length - 1 - t) if reverse else t, ...)]
            where = f"body (iteration {t})"
            outs = _run_subgraph(self._label, where, self._session, feeds)
            for j, v in enumerate(outs[:n]):
                dtype, shape = initial[j]
                if not isinstance(v, np.ndarray) or v.dtype != dtype or v.shape != shape:
                    got = f"{v.dtype} {list(v.shape)}" if isinstance(v, np.ndarray) else f"a {type(v).__name__}"
                    raise _fail(f"{self._label}, {where}: state variable {j} comes back as {got}, it entered as "
                                f"{dtype} {list(shape)}; a state variable keeps its type and shape")
            states = outs[:n]
            for k, y in enumerate(outs[n:]):
                if not isinstance(y, np.ndarray):
                    raise _fail(f"{self._label}, {where}: scan output {k} is a {type(y).__name__}, not a tensor")
                if t == 0:
                    axis = self._axis(self._out_axes[k], y.ndim + 1, f"scan_output_axes[{k}]",
                                      f"scan output {k}")
                    out = np.empty(y.shape[:axis] + (length,) + y.shape[axis:], y.dtype)
                    stacked.append((out, _slicer(axis), self._out_dirs[k] == 1, y.shape))
                out, prefix, reverse, shape = stacked[k]
                if y.shape != shape or y.dtype != out.dtype:
                    raise _fail(f"{self._label}, {where}: scan output {k} is {y.dtype} {list(y.shape)}, the first "
                                f"iteration gave {out.dtype} {list(shape)}; a scan output keeps its type and shape")
                out[prefix + ((length - 1 - t) if reverse else t,)] = y
        if length > 0:
            return list(states) + [out for out, _, _, _ in stacked]
        results = list(states)
        for k, (elem, dims) in enumerate(self._empty):
            if elem is None or dims is None:
                raise _fail(f"{self._label}: the scan inputs have length 0 and the shape of scan output {k} is "
                            "not known, so its empty value cannot be built")
            axis = self._axis(self._out_axes[k], len(dims) + 1, f"scan_output_axes[{k}]", f"scan output {k}")
            results.append(np.zeros(dims[:axis] + (0,) + dims[axis:], elem))
        return results


class SequenceMapKernel:
    """Runs the body's prepared Session once per element of the input
    sequence: each sequence input gives the body its element at that
    position, each tensor input is given as it is, and output k collects the
    body's output k of every iteration into a sequence."""

    def __init__(self, label: str, body_session: Any, body: onnx.GraphProto, outer: Sequence[str], n_inputs: int):
        self._label = label
        self._session = body_session
        self._names = [vi.name for vi in body.input]
        self._n_inputs = n_inputs
        self._n_out = len(body.output)
        self._outer = list(outer)

    def __call__(self, *args: Any) -> list[Any]:
        inputs = args[:self._n_inputs]
        outer = dict(zip(self._outer, args[self._n_inputs:]))
        if not isinstance(inputs[0], (list, tuple)):
            raise _fail(f"{self._label}: input 0 must be a sequence, got a {type(inputs[0]).__name__}")
        length = len(inputs[0])
        for j, v in enumerate(inputs[1:], 1):
            if isinstance(v, (list, tuple)) and len(v) != length:
                raise _fail(f"{self._label}: sequence input {j} has {len(v)} elements, input 0 has {length}; "
                            "every sequence input must have the same length")
        results: list[list[Any]] = [[] for _ in range(self._n_out)]
        for t in range(length):
            feeds = dict(outer)
            for name, v in zip(self._names, inputs):
                feeds[name] = v[t] if isinstance(v, (list, tuple)) else v
            outs = _run_subgraph(self._label, f"body (element {t})", self._session, feeds)
            for k, value in enumerate(outs):
                results[k].append(value)
        return results


def _element_type(tp: onnx.TypeProto | None) -> onnx.TypeProto | None:
    """A sequence type's element type; any other type as it is."""
    if tp is not None and tp.WhichOneof("value") == "sequence_type":
        return tp.sequence_type.elem_type
    return tp


def _opset(model: onnx.ModelProto) -> int:
    return next((int(o.version) for o in model.opset_import if normalize_domain(o.domain) == "ai.onnx"), 0)


def build(session_cls: Any, model: onnx.ModelProto, node: onnx.NodeProto, label: str, outer: Sequence[str],
          types: Mapping[str, onnx.TypeProto], options: Mapping[str, Any],
          constants: Mapping[str, np.ndarray] | None = None) -> tuple[Any, list[tuple[str, Any]], list[str]] | None:
    """(the step's callable, [(subgraph name, its Session)], the outer names
    it takes after the node's inputs) for an If, Loop, Scan or SequenceMap
    node, or None when a subgraph cannot run on olc (unknown types, Scan-8).

    Outer names found in ``constants`` (the enclosing Session's: initializers
    no feed replaces, Constant nodes, its own bound values) are bound to the
    subgraphs' Sessions as constants, not fed at each call: their kernels
    pack weights once. Fed, a branch's Conv weights were packed again at
    every run (Silero VAD's If-wrapped model ran its Convs 3-4x slower)."""
    graphs = {a.name: a.g for a in node.attribute if a.type == onnx.AttributeProto.GRAPH}
    opset = _opset(model)
    if node.op_type == "Scan" and opset < 9:
        return None  # Scan-8 (batch axis, sequence_lens) stays on the fallback
    # Tensors only (strings stay fed: their element type needs the declaration).
    bound = {name: constants[name] for name in outer if constants is not None and
             isinstance(constants.get(name), np.ndarray) and constants[name].dtype != object}
    outer = [name for name in outer if name not in bound]

    def session_of(name: str, input_types: Sequence[onnx.TypeProto | None] = ()) -> Any:
        sub = subgraph_model(model, graphs[name], list(outer) + list(bound), types, input_types, bound)
        if sub is None:
            return None
        try:
            return session_cls(sub, **options, _outer_constants=bound)
        except OlcError as exc:
            raise type(exc)(f"{label}, subgraph '{name}': {exc}") from exc

    def output_types(session: Any, graph: onnx.GraphProto) -> list[onnx.TypeProto | None]:
        inferred = getattr(session, "_types", {})
        declared = _declared_types(graph, [o.name for o in graph.output])
        return [inferred.get(o.name, d) for o, d in zip(graph.output, declared)]

    if node.op_type == "If":
        then_s, else_s = session_of("then_branch"), session_of("else_branch")
        if then_s is None or else_s is None:
            return None
        declared = _declared_types(model.graph, node.output)
        for branch, sub in (("then_branch", then_s), ("else_branch", else_s)):
            for k, (tp, want) in enumerate(zip(output_types(sub, graphs[branch]), declared)):
                why = _contradiction(tp, want)
                if why is not None:
                    raise InvalidModelError(f"{label}: {branch} output {k} ('{graphs[branch].output[k].name}') "
                                            f"is {why}")
        return (IfKernel(label, then_s, else_s, outer, declared),
                [("then_branch", then_s), ("else_branch", else_s)], outer)
    if node.op_type == "Scan":
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        n_scan = int(attrs["num_scan_inputs"])
        n_state = len(node.input) - n_scan
        if n_scan < 1:
            raise InvalidModelError(f"{label}: num_scan_inputs is {n_scan}; a Scan needs at least one scan input")
        # A body input left untyped takes the element type of the node's input.
        body_s = session_of("body", [types.get(name) for name in node.input])
        if body_s is None:
            return None
        kernel = ScanKernel(label, body_s, graphs["body"], n_state, n_scan, opset, attrs, outer,
                            [types.get(name) for name in node.input[n_state:]],
                            [types.get(name) for name in node.output[n_state:]],
                            output_types(body_s, graphs["body"])[n_state:])
        return kernel, [("body", body_s)], outer
    if node.op_type == "SequenceMap":
        # A body input left untyped takes the element type of the sequence
        # (or the type of the tensor) the node gives it.
        body_s = session_of("body", [_element_type(types.get(name)) for name in node.input])
        if body_s is None:
            return None
        return SequenceMapKernel(label, body_s, graphs["body"], outer, len(node.input)), [("body", body_s)], outer
    n_carried = len(node.input) - 2
    body_s = session_of("body", [None, None] + [types.get(name) for name in node.input[2:]])
    if body_s is None:
        return None
    scan_types = [types.get(name) for name in node.output[n_carried:]]
    return LoopKernel(label, body_s, graphs["body"], n_carried, outer, scan_types), [("body", body_s)], outer
