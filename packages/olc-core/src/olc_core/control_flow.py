"""If and Loop on the olc runtime: each subgraph becomes a Session of its own,
prepared once (its own kernel plan, native kernels and fusion), and the
node is a Python step that picks a branch or iterates the body.

A subgraph reads values of the enclosing graphs by name; its Session takes
each of them as an extra graph input, fed by reference on every call (no
copy: a runtime buffer reaches it as an array over the same memory). Their
declared type is the element type alone: a feed may change an
initializer's shape, and the enclosing graph already checked it.

Scan, and subgraphs whose enclosing values have no known element type,
stay on the onnx.reference fallback.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

import numpy as np
import onnx
from onnx import helper

from .errors import InvalidModelError, OlcError
from .registration import normalize_domain

CONTROL_FLOW_OPS = ("If", "Loop")


def check_signature(node: onnx.NodeProto, label: str) -> None:
    """If, Loop and Scan, on olc or on the fallback: the subgraphs' inputs and
    outputs must match the node's, as the schema counts them (raised at
    construction, before any run)."""
    if normalize_domain(node.domain) != "ai.onnx" or node.op_type not in ("If", "Loop", "Scan"):
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
    else:
        body = graphs.get("body")
        m = next((a.i for a in node.attribute if a.name == "num_scan_inputs"), None)
        if body is None or m is None:
            fail("attributes 'body' and 'num_scan_inputs' are required")
        state = len(node.input) - m
        if state < 0 or len(body.input) != len(node.input):
            fail(f"the body takes {len(body.input)} inputs, the node gives {len(node.input)}")
        if len(body.output) != n_out:
            fail(f"the body returns {len(body.output)} values, the node has {n_out} outputs")


def _elem_type(tp: onnx.TypeProto | None) -> int:
    if tp is None or tp.WhichOneof("value") != "tensor_type":
        return 0
    return int(tp.tensor_type.elem_type)


def subgraph_model(model: onnx.ModelProto, graph: onnx.GraphProto, outer: Sequence[str],
                   types: Mapping[str, onnx.TypeProto]) -> onnx.ModelProto | None:
    """A model of ``graph`` whose inputs are its own and then ``outer``; None
    when a type it needs is unknown (or not a tensor)."""
    sub = onnx.GraphProto()
    sub.CopyFrom(graph)
    for vi in sub.input:
        if not _elem_type(vi.type):
            return None
    for name in outer:
        elem = _elem_type(types.get(name))
        if not elem:
            return None
        sub.input.append(helper.make_tensor_value_info(name, elem, None))
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


class IfKernel:
    """Runs the branch the condition picks on its prepared Session."""

    def __init__(self, label: str, then_session: Any, else_session: Any, outer: Sequence[str]):
        self._label = label
        self._branches = (else_session, then_session)
        self._outer = list(outer)

    def __call__(self, cond: Any, *outer_values: Any) -> list[Any]:
        c = np.asarray(cond)
        if c.size != 1:
            raise _fail(f"{self._label}: the condition must hold one element, got shape {list(c.shape)}")
        taken = int(bool(c.reshape(-1)[0]))
        return _run_subgraph(self._label, ("else_branch", "then_branch")[taken], self._branches[taken],
                             dict(zip(self._outer, outer_values)))


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


def build(session_cls: Any, model: onnx.ModelProto, node: onnx.NodeProto, label: str, outer: Sequence[str],
          types: Mapping[str, onnx.TypeProto], options: Mapping[str, Any]) -> tuple[Any, list[tuple[str, Any]]] | None:
    """(the step's callable, [(subgraph name, its Session)]) for an If or Loop
    node, or None when a subgraph cannot run on olc (unknown types)."""
    graphs = {a.name: a.g for a in node.attribute if a.type == onnx.AttributeProto.GRAPH}

    def session_of(name: str) -> Any:
        sub = subgraph_model(model, graphs[name], outer, types)
        if sub is None:
            return None
        try:
            return session_cls(sub, **options)
        except OlcError as exc:
            raise type(exc)(f"{label}, subgraph '{name}': {exc}") from exc

    if node.op_type == "If":
        then_s, else_s = session_of("then_branch"), session_of("else_branch")
        if then_s is None or else_s is None:
            return None
        return IfKernel(label, then_s, else_s, outer), [("then_branch", then_s), ("else_branch", else_s)]
    body_s = session_of("body")
    if body_s is None:
        return None
    n_carried = len(node.input) - 2
    scan_types = [types.get(name) for name in node.output[n_carried:]]
    return LoopKernel(label, body_s, graphs["body"], n_carried, outer, scan_types), [("body", body_s)]
