"""Scoring dask arrays and data frames with olc sessions, one session per worker.

    from olc_core import dask as olc_dask

    y = olc_dask.score("model.onnx", x)            # x: a dask array, one row per sample
    scores = olc_dask.score(model_bytes, df, columns=["f0", "f1", "f2"])   # a dask DataFrame

A session cannot be pickled, so the model travels as a path (read by every
worker: a shared file system) or as bytes (one copy per worker). Each worker
builds one session for it on first use and keeps it for later partitions and
later computations: the sessions are held per worker (per process for
dask's local schedulers), keyed by the model's content hash and the session
options. A session's threads default to its worker's thread budget, and the
worker's tasks take turns on it, so one run at a time uses the worker's
threads and workers x threads stay within the cores the cluster was given.

``score(..., report=True)`` also returns a lazy :class:`Report` over the
same tasks (the kernel plan of the session that scored partition 0, the
sessions used, and with ``errors="collect"`` the failures of partitions
whose rows were filled instead).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import pickle
import threading
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import onnx
from onnx import helper

try:
    import dask
    import dask.array as da
except ImportError as exc:  # pragma: no cover - the extra is not installed
    raise ImportError("olc_core.dask needs dask and distributed: pip install 'olc-core[dask]'") from exc

from .errors import InvalidModelError, OlcError
from .session import PlanEntry, Session, load_model
from .threads import default_thread_count

__all__ = ["Report", "SessionInfo", "clear_sessions", "score", "session_stats"]

# The Session options a scoring job may set; threads come from threads_per_worker.
SESSION_OPTIONS = ("strict", "fusion", "naive", "participant_limit")


@dataclass(frozen=True)
class SessionInfo:
    """One cached session: the worker holding it ("" for dask's local
    schedulers), its process, its number among the sessions that process
    built (1 for the first), its threads, the model's content hash (first 16
    hex digits) and the partitions it ran (in a :class:`Report`: in that
    computation, failed ones included; from :func:`session_stats`: scored
    since it was built)."""

    worker: str
    pid: int
    serial: int
    threads: int
    model: str
    partitions: int


@dataclass(frozen=True)
class Report:
    """What a scoring computation did, beside its outputs.

    ``kernel_plan``: ``Session.kernel_plan()`` of the session that scored
    partition 0 (None if that session could not be built). ``sessions``: each
    session that scored a partition, with the partitions it scored.
    ``errors``: with ``errors="collect"``, the :class:`~olc_core.OlcError`
    of each failed partition in partition order, each with a ``partition``
    attribute (its rows are filled in the outputs); empty otherwise.
    """

    partitions: int
    kernel_plan: tuple[PlanEntry, ...] | None
    sessions: tuple[SessionInfo, ...]
    errors: tuple[OlcError, ...]

    @property
    def failed_partitions(self) -> tuple[int, ...]:
        return tuple(getattr(e, "partition", -1) for e in self.errors)


# ------------------------------------------------------------------ the model


@dataclass(frozen=True)
class _Model:
    """The model as it travels to the workers: a path or the bytes, and the content hash."""

    digest: str
    path: str | None
    data: bytes | None = None

    def __dask_tokenize__(self) -> tuple[str, str, str | None]:
        return ("olc-model", self.digest, self.path)

    def source(self) -> str | bytes:
        return self.data if self.data is not None else str(self.path)


def _model_ref(model: Any) -> tuple[_Model, onnx.ModelProto]:
    if isinstance(model, Session):
        raise TypeError("a Session cannot be sent to workers: pass the model's path or its bytes")
    if isinstance(model, onnx.ModelProto):
        model = model.SerializeToString()
    if isinstance(model, (bytes, bytearray, memoryview)):
        data = bytes(model)
        return _Model(hashlib.sha256(data).hexdigest(), None, data), load_model(data)
    if isinstance(model, (str, os.PathLike)):
        path = os.path.abspath(os.fspath(model))
        try:
            with open(path, "rb") as f:
                data = f.read()
            # The graph only: each worker loads the model, external data files included.
            proto = onnx.load_from_string(data)
        except Exception as exc:  # noqa: BLE001 - OSError, or protobuf's several types
            raise InvalidModelError(f"cannot load model {path}: {exc}") from exc
        return _Model(hashlib.sha256(data).hexdigest(), path), proto
    raise TypeError(f"model must be a path, bytes or onnx.ModelProto, not {type(model).__name__}")


# ------------------------------------------------------- sessions per worker


class _Held:
    """A cached session; runs take turns on it (each run uses its threads)."""

    def __init__(self, session: Session, worker: str, serial: int, digest: str):
        self.session = session
        self.lock = threading.Lock()
        self.worker = worker
        self.serial = serial
        self.digest = digest
        self.partitions = 0

    def info(self, partitions: int) -> SessionInfo:
        return SessionInfo(self.worker, os.getpid(), self.serial, self.session.threads, self.digest[:16], partitions)


class _ThisProcess:
    """Holds the sessions of tasks that no distributed worker runs (local schedulers)."""


_THIS_PROCESS = _ThisProcess()
# Sessions per owner (a distributed Worker, or _THIS_PROCESS), dropped with a
# worker that closes in this process (threads-only clusters).
_sessions: weakref.WeakKeyDictionary[Any, dict[tuple, _Held]] = weakref.WeakKeyDictionary()
_sessions_lock = threading.Lock()
_serial = 0


def _current_worker() -> Any:
    try:
        from distributed import get_worker
    except ImportError:
        return None
    try:
        return get_worker()
    except ValueError:  # not inside a distributed worker's task
        return None


def _thread_budget(worker: Any) -> int:
    """The threads a worker may run at once: the distributed worker's
    nthreads, or for the local threaded scheduler its pool size
    (``dask.config`` num_workers), at most the process's cores."""
    if worker is not None:
        state = getattr(worker, "state", None)
        return max(1, int(getattr(state, "nthreads", 0) or worker.nthreads))
    pool = dask.config.get("num_workers", None)
    cores = default_thread_count()
    return max(1, min(int(pool), cores)) if pool else cores


def _session_for(model: _Model, threads: int | None, options: tuple[tuple[str, Any], ...]) -> _Held:
    global _serial
    worker = _current_worker()
    owner = worker if worker is not None else _THIS_PROCESS
    threads = threads or _thread_budget(worker)
    key = (model.digest, threads, options)
    with _sessions_lock:
        held = _sessions.setdefault(owner, {}).get(key)
        if held is None:
            # Built under the lock: a worker's concurrent first tasks build one session.
            session = Session(model.source(), threads=threads, **dict(options))
            _serial += 1
            held = _Held(session, str(getattr(worker, "address", "")), _serial, model.digest)
            _sessions[owner][key] = held
    return held


def session_stats() -> list[SessionInfo]:
    """The sessions this process holds, in the order they were built.

    ``client.run(olc_core.dask.session_stats)`` asks every worker process of
    a distributed cluster.
    """
    with _sessions_lock:
        held = [h for by_key in _sessions.values() for h in by_key.values()]
    return [h.info(h.partitions) for h in sorted(held, key=lambda h: h.serial)]


def clear_sessions() -> int:
    """Drops the sessions this process holds (``client.run(...)`` for every
    worker); returns how many. The next partition builds its session anew."""
    with _sessions_lock:
        count = sum(len(by_key) for by_key in _sessions.values())
        _sessions.clear()
    return count


# -------------------------------------------------------------- the job


@dataclass(frozen=True)
class _Job:
    """What every partition task needs to know, decided once on the client."""

    model: _Model
    threads: int | None
    options: tuple[tuple[str, Any], ...]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    dtypes: tuple[np.dtype, ...]
    trailing: tuple[tuple[int | None, ...], ...]  # each output's shape after the rows (None: unknown)
    batch_rows: int | None
    errors: str
    # Data frames: the columns of each input (a name: that column as one feature
    # of a [rows, 1] input or as a [rows] input) and each output's columns.
    columns: tuple[tuple[str, ...] | str, ...] = ()
    input_ranks: tuple[int, ...] = ()
    frame_columns: tuple[tuple[str, ...], ...] = ()

    def __dask_tokenize__(self) -> tuple:
        return (self.model.digest, self.threads, self.options, self.inputs, self.outputs,
                tuple(str(d) for d in self.dtypes), self.trailing, self.batch_rows, self.errors,
                self.columns, self.input_ranks, self.frame_columns)


def _graph_inputs(proto: onnx.ModelProto) -> list[onnx.ValueInfoProto]:
    """The inputs a caller must feed (an input with an initializer of the same name has a default)."""
    initialized = {init.name for init in proto.graph.initializer}
    return [vi for vi in proto.graph.input if vi.name not in initialized]


def _tensor_dtype(vi: onnx.ValueInfoProto, what: str) -> np.dtype:
    if vi.type.WhichOneof("value") != "tensor_type" or not vi.type.tensor_type.elem_type:
        raise OlcError(f"{what} '{vi.name}' is not a typed tensor: olc_core.dask scores tensors only")
    return np.dtype(helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type))


def _output_shapes(proto: onnx.ModelProto, feed_shapes: Mapping[str, tuple[int, ...]],
                   names: Sequence[str]) -> dict[str, onnx.ValueInfoProto]:
    """Each output as shape inference sees it when the inputs have the data's
    feature dims and a symbolic row count."""
    probe = onnx.ModelProto()
    probe.CopyFrom(proto)
    for vi in probe.graph.input:
        if vi.name in feed_shapes and vi.type.WhichOneof("value") == "tensor_type":
            shape = vi.type.tensor_type.shape
            shape.ClearField("dim")
            shape.dim.add().dim_param = "olc_rows"
            for d in feed_shapes[vi.name]:
                shape.dim.add().dim_value = d
    with contextlib.suppress(Exception):  # inference is best effort; the declared outputs remain
        probe = onnx.shape_inference.infer_shapes(probe, strict_mode=False)
    found = {vi.name: vi for vi in probe.graph.output}
    return {name: found[name] for name in names}


def _describe_outputs(proto: onnx.ModelProto, feed_shapes: Mapping[str, tuple[int, ...]],
                      outputs: str | Sequence[str] | None) -> tuple[tuple[str, ...], bool]:
    declared = [o.name for o in proto.graph.output]
    if outputs is None:
        return tuple(declared), len(declared) == 1
    names = (outputs,) if isinstance(outputs, str) else tuple(outputs)
    unknown = [n for n in names if n not in declared]
    if unknown or not names:
        raise ValueError(f"outputs: the model has no output {', '.join(map(repr, unknown)) or '(none named)'} "
                         f"(its outputs: {', '.join(declared)})")
    return names, isinstance(outputs, str)


def _output_layout(vi: onnx.ValueInfoProto) -> tuple[np.dtype, tuple[int | None, ...]]:
    dtype = _tensor_dtype(vi, "output")
    tt = vi.type.tensor_type
    if not tt.HasField("shape") or len(tt.shape.dim) == 0:
        raise OlcError(f"output '{vi.name}' has {'no known shape' if not tt.HasField('shape') else 'no rows'}: "
                       "olc_core.dask scores models whose outputs have one row per input row "
                       "(declare the output's shape if shape inference cannot give it)")
    trailing = tuple(int(d.dim_value) if d.HasField("dim_value") else None for d in tt.shape.dim[1:])
    return dtype, trailing


def _check_feed(vi: onnx.ValueInfoProto, dtype: np.dtype, ndim: int) -> None:
    want = _tensor_dtype(vi, "input")
    if dtype != want:
        raise OlcError(f"feed '{vi.name}' has dtype {dtype}, the model declares {want} "
                       f"(cast the data first, e.g. .astype(np.{want}))")
    tt = vi.type.tensor_type
    if tt.HasField("shape") and len(tt.shape.dim) != ndim:
        raise OlcError(f"feed '{vi.name}' has {ndim} dimensions, the model declares {len(tt.shape.dim)}")


def _known(dims: tuple[int | None, ...]) -> tuple[int, ...]:
    """Dims the caller has checked are all known."""
    assert None not in dims, dims
    return cast(tuple[int, ...], dims)


def _fill_value(dtype: np.dtype) -> Any:
    """What the rows of a failed partition hold (errors="collect")."""
    if dtype.kind in "fc":
        return np.nan
    return None if dtype.kind == "O" else dtype.type(0)


# ------------------------------------------------------------ running a partition


def _with_partition(exc: OlcError, index: int, rows: tuple[int, int] | None) -> OlcError:
    where = f"partition {index}" + (f" (rows {rows[0]}-{rows[1] - 1})" if rows and rows[1] > rows[0] else "")
    err = type(exc)(f"{where}: {exc}")
    err.partition = index  # type: ignore[attr-defined]
    return err


def _run(held: _Held, job: _Job, feeds: dict[str, np.ndarray], rows: int) -> dict[str, np.ndarray]:
    """The job's outputs for one partition, ``batch_rows`` rows per run."""
    if rows == 0 and all(None not in t for t in job.trailing):
        return {n: np.empty((0, *_known(t)), d) for n, t, d in zip(job.outputs, job.trailing, job.dtypes)}
    step = job.batch_rows or max(rows, 1)
    pieces: dict[str, list[np.ndarray]] = {n: [] for n in job.outputs}
    with held.lock:
        for lo in range(0, max(rows, 1), step):
            batch = {n: v[lo:lo + step] for n, v in feeds.items()}
            for name, value in zip(job.outputs, held.session.run(list(job.outputs), batch)):
                pieces[name].append(np.asarray(value))
        held.partitions += 1
    out = {n: p[0] if len(p) == 1 else np.concatenate(p) for n, p in pieces.items()}
    for name, expect in zip(job.outputs, job.trailing):
        shape = out[name].shape
        if not shape or shape[0] != rows or len(shape) != len(expect) + 1 or any(
                e is not None and e != s for e, s in zip(expect, shape[1:])):
            want = ", ".join(["rows", *("?" if e is None else str(e) for e in expect)])
            raise OlcError(f"output '{name}' has shape {list(shape)} for {rows} input rows, expected [{want}]: "
                           "olc_core.dask scores models that give one output row per input row")
    return out


@dataclass
class _Part:
    """A partition's result: its outputs (filled if it failed) and what the report needs."""

    value: Any
    index: int
    error: OlcError | None
    session: SessionInfo | None
    plan: tuple[PlanEntry, ...] | None


def _filled(job: _Job, count: int) -> dict[str, np.ndarray]:
    """A failed partition's outputs (errors="collect"); every trailing dim is known then."""
    return {n: np.full((count, *_known(t)), _fill_value(d), d)
            for n, t, d in zip(job.outputs, job.trailing, job.dtypes)}


def _score(job: _Job, index: int, rows: tuple[int, int] | None, count: int, make_feeds: Any, wrap: Any) -> _Part:
    """Scores one partition: ``make_feeds()`` gives its feeds, ``wrap`` shapes the outputs."""
    held: _Held | None = None
    try:
        held = _session_for(job.model, job.threads, job.options)
        outputs = _run(held, job, make_feeds(), count)
        error = None
    except OlcError as exc:
        error = _with_partition(exc, index, rows)
        if job.errors == "raise":
            raise error from exc
        outputs = _filled(job, count)
    plan = tuple(held.session.kernel_plan()) if held is not None and index == 0 else None
    session = held.info(1) if held is not None else None
    return _Part(wrap(outputs), index, error, session, plan)


def _score_block(job: _Job, index: int, start: int, *blocks: np.ndarray) -> _Part:
    count = int(blocks[0].shape[0])

    def feeds() -> dict[str, np.ndarray]:
        return {n: np.ascontiguousarray(b) for n, b in zip(job.inputs, blocks)}

    return _score(job, index, (start, start + count), count, feeds, lambda outputs: outputs)


def _output_of(part: _Part, name: str, summary: Any = None) -> np.ndarray:
    return part.value[name]


def _score_frame(job: _Job, index: int, frame: Any) -> _Part:
    import pandas as pd

    count = len(frame)

    def feeds() -> dict[str, np.ndarray]:
        out = {}
        for name, cols, rank in zip(job.inputs, job.columns, job.input_ranks):
            try:
                values = frame[cols].to_numpy() if isinstance(cols, str) else frame[list(cols)].to_numpy()
            except KeyError as exc:  # a partition unlike the frame's meta
                raise OlcError(f"input '{name}': the partition lacks column(s) {exc}") from exc
            out[name] = np.ascontiguousarray(values.reshape(-1, 1) if isinstance(cols, str) and rank == 2 else values)
        return out

    def as_frame(outputs: dict[str, np.ndarray]) -> Any:
        data: dict[str, Any] = {}
        for name, cols in zip(job.outputs, job.frame_columns):
            values = outputs[name].reshape(count, -1)
            for j, col in enumerate(cols):
                data[col] = values[:, j]
        return pd.DataFrame(data, index=frame.index)

    return _score(job, index, None, count, feeds, as_frame)


def _frame_partition(frame: Any, job: _Job, partition_info: dict | None = None) -> Any:
    """map_partitions' function: the scores of one partition (dask passes its index in partition_info)."""
    return _score_frame(job, partition_info["number"] if partition_info else 0, frame).value


def _frame_of(part: _Part) -> Any:
    return part.value


def _summary(part: _Part) -> tuple[int, OlcError | None, SessionInfo | None, tuple[PlanEntry, ...] | None]:
    # Runs beside the partition: the report gathers these, never the outputs.
    return part.index, part.error, part.session, part.plan


def _summary_row(part: _Part) -> Any:
    import pandas as pd

    return pd.DataFrame({"summary": [base64.b64encode(pickle.dumps(_summary(part))).decode("ascii")]})


def _same(frame: Any) -> Any:
    return frame


def _report_of_rows(frame: Any) -> Report:
    summaries = [pickle.loads(base64.b64decode(s)) for s in frame["summary"]]
    return _report(len(summaries), summaries)


def _report(partitions: int, summaries: list[tuple]) -> Report:
    errors = []
    plan = None
    counts: dict[tuple[int, int], list[Any]] = {}
    for index, error, session, part_plan in sorted(summaries, key=lambda s: s[0]):
        if error is not None:
            errors.append(error)
        if index == 0:
            plan = part_plan
        if session is not None:
            entry = counts.setdefault((session.pid, session.serial), [session, 0])
            entry[1] += 1
    sessions = tuple(SessionInfo(s.worker, s.pid, s.serial, s.threads, s.model, n) for s, n in counts.values())
    return Report(partitions, plan, sessions, tuple(errors))


# ------------------------------------------------------------------- score


def score(
    model: Any,
    data: Any,
    *,
    columns: Sequence[str] | Mapping[str, Sequence[str] | str] | None = None,
    outputs: str | Sequence[str] | None = None,
    threads_per_worker: int | None = None,
    batch_rows: int | None = None,
    errors: str = "raise",
    report: bool = False,
    **session_options: Any,
) -> Any:
    """Scores every row of ``data`` with ``model``, lazily: returns dask collections.

    ``model``: a path (every worker reads it: use a shared file system),
    bytes or an ``onnx.ModelProto`` (sent as bytes, one copy per worker).

    ``data``: a ``dask.array.Array`` for a model with one input, or a dict
    of input name -> array for several (rows along axis 0; arrays are
    rechunked to whole rows, and to the first array's row chunks), giving a
    dask array per output; or a ``dask.dataframe.DataFrame`` giving a dask
    DataFrame with the same index and divisions and one column per output
    (``name_0``, ``name_1``, ... for an output of several values per row).
    ``columns`` picks a frame's feature columns, in the model's order (all
    columns by default), or maps input names to their columns (one column
    name: a ``[rows]`` or ``[rows, 1]`` input).

    ``outputs``: one output name (one collection), a list (a tuple of
    collections, for arrays) or None (every output: one collection for a
    model with one output, else a tuple in the model's order).

    ``threads_per_worker``: each session's threads (default: its worker's
    thread budget, the worker's ``nthreads``; with dask's local threaded
    scheduler, ``dask.config`` ``num_workers`` or the process's cores).
    ``batch_rows``: at most this many rows per run (bounds the memory of a
    model's intermediates); a partition is one run by default.
    ``session_options``: ``strict``, ``fusion``, ``naive``,
    ``participant_limit``, as for :class:`olc_core.Session`.

    ``errors="raise"``: computing raises the partition's
    :class:`~olc_core.OlcError` (its type and message, which name the node,
    prefixed with the partition index; ``err.partition`` holds it).
    ``errors="collect"``: a failed partition's rows are filled (NaN for
    floating outputs, zero otherwise) and the others are scored; the errors
    are in the report, so it needs ``report=True``.

    ``report=True`` returns ``(collections, report)``: ``report`` computes
    to a :class:`Report` over the same tasks (a dask ``Delayed`` for arrays,
    a dask ``Scalar`` for frames); compute both at once
    (``dask.compute(y, report)``), or the partitions run twice.
    """
    if errors not in ("raise", "collect"):
        raise ValueError(f"errors must be 'raise' or 'collect', not {errors!r}")
    if errors == "collect" and not report:
        raise ValueError("errors='collect' returns the failed partitions' errors in the report: pass report=True")
    if batch_rows is not None and (not isinstance(batch_rows, int) or batch_rows < 1):
        raise ValueError(f"batch_rows must be a positive integer, got {batch_rows!r}")
    if threads_per_worker is not None and (not isinstance(threads_per_worker, int) or threads_per_worker < 1):
        raise ValueError(f"threads_per_worker must be a positive integer, got {threads_per_worker!r}")
    unknown = sorted(set(session_options) - set(SESSION_OPTIONS))
    if unknown:
        raise TypeError(f"score() got unexpected options {', '.join(unknown)} (session options: "
                        f"{', '.join(SESSION_OPTIONS)})")
    ref, proto = _model_ref(model)
    # Hashable (a key of the worker's session cache): naive=[families] becomes a sorted tuple.
    options = tuple(sorted((k, tuple(sorted(v)) if isinstance(v, (list, tuple, set, frozenset)) else v)
                           for k, v in session_options.items()))
    common = {"model": ref, "threads": threads_per_worker, "options": options, "batch_rows": batch_rows,
              "errors": errors}
    if isinstance(data, (da.Array, Mapping)):
        result, lazy_report = _score_arrays(proto, data, outputs, common, report)
    else:
        result, lazy_report = _score_frame_collection(proto, data, columns, outputs, common, report)
    return (result, lazy_report) if report else result


def _shared(job: _Job) -> Any:
    """The job (and the model's bytes in it) as one key of the graph that every
    partition task depends on: a distributed worker receives it once, not once
    per task."""
    return dask.delayed(job, pure=True, traverse=False)


def _feed_names(proto: onnx.ModelProto, given: Sequence[str]) -> dict[str, onnx.ValueInfoProto]:
    required = {vi.name: vi for vi in _graph_inputs(proto)}
    every = {vi.name: vi for vi in proto.graph.input}
    missing = sorted(set(required) - set(given))
    extra = sorted(set(given) - set(every))
    if missing or extra:
        raise ValueError(f"the model's inputs are {', '.join(required)}; the data "
                         + (f"lacks {', '.join(missing)}" if missing else f"names no input {', '.join(extra)}"))
    return {name: every[name] for name in given}


def _score_arrays(proto: onnx.ModelProto, data: Any, outputs: Any, common: dict[str, Any],
                  report: bool) -> tuple[Any, Any]:
    if isinstance(data, Mapping):
        arrays = dict(data)
        if not arrays or not all(isinstance(a, da.Array) for a in arrays.values()):
            raise TypeError("data: a dict of input name -> dask array")
    else:
        inputs = _graph_inputs(proto)
        if len(inputs) != 1:
            raise ValueError(f"the model has inputs {', '.join(vi.name for vi in inputs)}: "
                             "pass a dict of input name -> dask array")
        arrays = {inputs[0].name: data}
    infos = _feed_names(proto, list(arrays))
    first = next(iter(arrays.values()))
    if any(a.ndim == 0 for a in arrays.values()):
        raise ValueError("data: arrays need a row axis (axis 0)")
    row_chunks = first.chunks[0]
    if any(np.isnan(c) for a in arrays.values() for c in a.chunks[0]):
        raise ValueError("data: an array's row chunks are unknown (nan): call its compute_chunk_sizes() first")
    for name, a in arrays.items():
        _check_feed(infos[name], a.dtype, a.ndim)
        if a.shape[0] != first.shape[0]:
            raise ValueError(f"input '{name}' has {a.shape[0]} rows, '{next(iter(arrays))}' has {first.shape[0]}")
        # Whole rows per block, the same row blocks for every input.
        arrays[name] = a.rechunk({0: row_chunks, **dict.fromkeys(range(1, a.ndim), -1)})
    feed_shapes = {n: tuple(int(d) for d in a.shape[1:]) for n, a in arrays.items()}
    names, single = _describe_outputs(proto, feed_shapes, outputs)
    layouts = [_output_layout(vi) for vi in _output_shapes(proto, feed_shapes, names).values()]
    job = _Job(inputs=tuple(arrays), outputs=names, dtypes=tuple(d for d, _ in layouts),
               trailing=tuple(t for _, t in layouts), **common)
    _check_collect(job)
    return _array_graph(job, list(arrays.values()), row_chunks, single, report)


def _array_graph(job: _Job, arrays: list[Any], row_chunks: tuple[int, ...], single: bool,
                 report: bool) -> tuple[Any, Any]:
    """The task graph, written as layers (one task per partition and per
    output block; building it costs microseconds per partition)."""
    from dask.base import tokenize
    from dask.core import flatten
    from dask.delayed import Delayed
    from dask.highlevelgraph import HighLevelGraph

    job_key = _shared(job)
    token = tokenize(job, *(a.name for a in arrays))
    parts, summaries = f"olc-score-{token}", f"olc-summary-{token}"
    # Block i of every input (rows only: one block along the other axes).
    blocks = [list(flatten(a.__dask_keys__())) for a in arrays]
    starts = np.concatenate([[0], np.cumsum(row_chunks)]).astype(int).tolist()
    count = len(row_chunks)

    def partition(i: int) -> tuple:
        return (_score_block, job_key.key, i, starts[i], *(b[i] for b in blocks))

    if len(job.outputs) == 1 and not report:
        # One task per partition: the output block is the partition's result.
        out, ndim = f"olc-output-{token}", 1 + len(job.trailing[0])
        layer: dict[Any, Any] = {(out, i, *([0] * (ndim - 1))): (_output_of, partition(i), job.outputs[0])
                                 for i in range(count)}
        array = da.Array(HighLevelGraph.from_collections(out, layer, dependencies=[*arrays, job_key]), out,
                         _chunks(row_chunks, job.trailing[0]), meta=np.empty((0,) * ndim, job.dtypes[0]))
        return array if single else (array,), None
    graph = HighLevelGraph.from_collections(
        parts, {(parts, i): partition(i) for i in range(count)}, dependencies=[*arrays, job_key])
    if report:
        graph = _add_layer(graph, summaries, {(summaries, i): (_summary, (parts, i)) for i in range(count)}, parts)
    collections = []
    for name, dtype, trailing in zip(job.outputs, job.dtypes, job.trailing):
        out = f"olc-output-{name}-{token}"
        ndim = 1 + len(trailing)
        # With a report, each output block also names its partition's summary:
        # the partition task then has two dependents in the array's graph, so
        # dask's linear fusion cannot fold it into the block under another key
        # (the report would then run the partition again).
        layer = {(out, i, *([0] * (ndim - 1))): (_output_of, (parts, i), name, (summaries, i) if report else None)
                 for i in range(count)}
        layer_deps = (parts, summaries) if report else (parts,)
        collections.append(da.Array(_add_layer(graph, out, layer, *layer_deps), out, _chunks(row_chunks, trailing),
                                    meta=np.empty((0,) * ndim, dtype)))
    lazy_report = None
    if report:
        key = f"olc-report-{token}"
        lazy_report = Delayed(key, _add_layer(graph, key, {key: (_report, count, [(summaries, i) for i in range(count)])},
                                              summaries))
    return (collections[0] if single else tuple(collections)), lazy_report


def _chunks(row_chunks: tuple[int, ...], trailing: tuple[int | None, ...]) -> tuple:
    """An output's chunks: the partitions' rows, one block (of unknown size: nan) along each other axis."""
    return (row_chunks, *((np.nan,) if t is None else (t,) for t in trailing))


def _add_layer(graph: Any, name: str, layer: dict, *depends_on: str) -> Any:
    """``graph`` with one more layer, whose tasks read the layers named."""
    from dask.highlevelgraph import HighLevelGraph

    return HighLevelGraph({**graph.layers, name: layer}, {**graph.dependencies, name: set(depends_on)})


def _check_collect(job: _Job) -> None:
    if job.errors == "collect":
        for name, trailing in zip(job.outputs, job.trailing):
            if None in trailing:
                raise OlcError(f"errors='collect' fills failed partitions, which needs each output's shape beyond "
                               f"the rows: shape inference leaves output '{name}' at [rows, "
                               f"{', '.join('?' if t is None else str(t) for t in trailing)}]")


def _score_frame_collection(proto: onnx.ModelProto, data: Any, columns: Any, outputs: Any,
                            common: dict[str, Any], report: bool) -> tuple[Any, Any]:
    try:
        import dask.dataframe as dd
        import pandas as pd
    except ImportError as exc:  # pragma: no cover - the extra installs them
        raise TypeError(f"data must be a dask array or DataFrame, not {type(data).__name__}") from exc
    if not isinstance(data, dd.DataFrame):
        raise TypeError(f"data must be a dask array, a dict of them, or a dask DataFrame, not {type(data).__name__}")
    if isinstance(columns, Mapping):
        chosen = {name: (cols if isinstance(cols, str) else tuple(cols)) for name, cols in columns.items()}
    else:
        inputs = _graph_inputs(proto)
        if len(inputs) != 1:
            raise ValueError(f"the model has inputs {', '.join(vi.name for vi in inputs)}: "
                             "pass columns={input name: [columns]}")
        chosen = {inputs[0].name: tuple(data.columns if columns is None else columns)}
    infos = _feed_names(proto, list(chosen))
    ranks, feed_shapes = [], {}
    for name, cols in chosen.items():
        names = [cols] if isinstance(cols, str) else list(cols)
        absent = [c for c in names if c not in data.columns]
        if absent:
            raise ValueError(f"columns: the data frame has no column {', '.join(map(repr, absent))}")
        tt = infos[name].type.tensor_type
        rank = len(tt.shape.dim) if tt.HasField("shape") else (1 if isinstance(cols, str) else 2)
        if rank not in (1, 2) or (rank == 1 and not isinstance(cols, str)):
            raise OlcError(f"input '{name}' has {rank} dimensions: a data frame feeds [rows, features] "
                           "inputs (or [rows] from one column); score a dask array instead")
        for c in names:
            _check_feed(infos[name], np.dtype(data[c].dtype), rank)
        ranks.append(rank)
        feed_shapes[name] = () if rank == 1 else (len(names),)
    out_names, _ = _describe_outputs(proto, feed_shapes, outputs)
    layouts = [_output_layout(vi) for vi in _output_shapes(proto, feed_shapes, out_names).values()]
    frame_columns = []
    for name, (_, trailing) in zip(out_names, layouts):
        if len(trailing) > 1 or None in trailing:
            raise OlcError(f"output '{name}' has shape [rows, {', '.join('?' if t is None else str(t) for t in trailing)}]"
                           ": a data frame takes outputs of a known number of values per row; score a dask array")
        width = _known(trailing)[0] if trailing else 1
        frame_columns.append((name,) if width == 1 else tuple(f"{name}_{j}" for j in range(width)))
    job = _Job(inputs=tuple(chosen), outputs=out_names, dtypes=tuple(d for d, _ in layouts),
               trailing=tuple(t for _, t in layouts), columns=tuple(chosen.values()), input_ranks=tuple(ranks),
               frame_columns=tuple(frame_columns), **common)
    meta = pd.DataFrame({c: np.empty(0, d) for cols, d in zip(frame_columns, job.dtypes) for c in cols},
                        index=data._meta.index[:0])
    job_key = _shared(job)
    if not report:
        # One task per partition, the frame's own (it fuses with the partition's read).
        return data.map_partitions(_frame_partition, job_key, meta=meta, align_dataframes=False), None
    parts = [dask.delayed(_score_frame, pure=True)(job_key, i, p) for i, p in enumerate(data.to_delayed())]
    frames = [dask.delayed(_frame_of, pure=True)(p) for p in parts]
    scores = dd.from_delayed(frames, meta=meta, divisions=data.divisions, verify_meta=False)
    # The report of a frame is a frame's reduction too: computing a delayed
    # object with a data frame would make dask materialize the frame's
    # expression (and warn). Each partition's summary travels as a string
    # (dask turns object columns into strings).
    summaries = dd.from_delayed([dask.delayed(_summary_row, pure=True)(p) for p in parts],
                                meta=pd.DataFrame({"summary": pd.Series([], dtype=str)}), verify_meta=False)
    lazy_report = summaries.reduction(chunk=_same, combine=_same, aggregate=_report_of_rows, meta=object,
                                      token="olc-report")
    return scores, lazy_report
