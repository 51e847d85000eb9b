"""The ``olc`` command line: run a model, list kernels, describe the machine.

    olc run [MODEL] [--threads N] [--compare onnxruntime|none] [--repeat K]
            [--strict] [--no-fusion] [--naive [FAMILY ...]] [--dim NAME=VALUE ...]
            [--shape INPUT=D0,D1,... ...] [--seed S]
            [--feeds FILE.npz] [--save-feeds FILE.npz] [--vocab N]
            [--float-range LO HI] [--rtol R] [--atol A] [--json PATH] [--debug]
    olc kernels [--family F] [--op OP] [--json]
    olc info [--json]

Inputs (``olc run``). Each graph input is fed by its role, decided from its
name, its element type and the nodes that read it (:func:`input_roles`):
integer ids (``input_ids``, ``*_ids``, ``tokens``, or any integer input
that indexes a Gather on an initializer, an embedding table) are drawn from
[0, rows of that table), or [0, ``--vocab``) when no table tells
(:data:`DEFAULT_VOCAB` without ``--vocab``); a name containing ``mask``
gets ones; ``position`` ids the range 0..S-1 along the last axis; token
type / segment ids zeros; other integers [0, 10); booleans 50/50; floats
N(0, 1), or uniform in [LO, HI) with ``--float-range``. ``--feeds FILE.npz``
supplies named arrays (``np.savez``) whose dtype and shape must fit the
model; their sizes bind the symbolic dimensions of the inputs still
generated. ``--save-feeds`` writes the inputs used, for reuse.

Comparison (``--compare onnxruntime``). One rule, elementwise, with olc's
value ``a`` and onnxruntime's ``b``: where both are finite they agree when
``|a - b| <= atol + rtol * |b|``; everywhere else they must be the same
non-finite value (NaN against NaN, an infinity against the infinity of the
same sign). Integer, bool and string outputs must be equal exactly. The
table prints, per output, the max abs diff and "tol used", the largest
``|a - b| / (atol + rtol * |b|)`` over the finite positions (1 or less is
within tolerance), and the NaN and infinity counts on each side. Verdicts:

    agree       the rule holds and every value is finite
    non-finite  the rule holds, but some values are NaN or infinite (at the
                same positions on both sides): those values are not checked,
                which usually means the inputs are outside the model's domain
    DIFFER      the rule fails somewhere (a value beyond tolerance, a NaN or
                infinity on one side only, a shape or dtype mismatch)

Exit status: 0 success; 1 an error (missing file, malformed model, bad
``--feeds``, a session or run error; the message is printed, the traceback
only with ``--debug``), and ``olc kernels`` when ``--op``/``--family``
match no registered kernel; 2 a usage error (bad options, including a
``--dim`` naming no symbolic dimension of the model); 3 ``--compare``: an
output is DIFFER; 4 ``--compare``: none differs but some are non-finite.
"""

from __future__ import annotations

import argparse
import difflib
import json
import logging
import math
import os
import re
import statistics
import sys
import textwrap
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_MISMATCH = 3
EXIT_NONFINITE = 4

# A symbolic or unknown dimension gets this size unless --dim (or --feeds) sets it.
DEFAULT_SYMBOLIC_DIM = 1
# The id range of an ids input when neither an embedding table nor --vocab tells it.
DEFAULT_VOCAB = 100
# Plain integer inputs: small non-negative values are valid indices, counts and
# axes in most models.
DEFAULT_INT_HIGH = 10
# Tables are cut to this width; longer cells of the last column become notes.
TABLE_WIDTH = 120

FALLBACK_LIBRARY = "onnx.reference"
NO_KERNELS_MESSAGE = "no native kernels registered (install a family such as olc-elementwise)"
CORE_ONLY_MESSAGE = ("only olc-core's own kernels (the shape views, Shape, Size); "
                     "install a family such as olc-elementwise for the rest")

VERDICT_AGREE = "agree"
VERDICT_NONFINITE = "non-finite"
VERDICT_DIFFER = "DIFFER"


class CliError(Exception):
    """An error reported to the user as one line, without a traceback."""


class CliUsageError(CliError):
    """A command line that asks for something the model does not have (exit 2)."""


def _progress(msg: str) -> None:
    print(f"olc: {msg}", file=sys.stderr, flush=True)


def _format_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], width: int | None = None,
                  notes: list[str] | None = None, wrap_last: bool = False) -> str:
    """A left-aligned text table. With ``width``, last-column cells that would
    pass it are cut and end in a ``[n]`` mark; their full text is appended to
    ``notes`` (identical texts share one mark). With ``width`` and
    ``wrap_last``, they are wrapped onto continuation lines instead."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    if width is not None and wrap_last and len(headers) > 1:
        indent = sum(widths[:-1]) + 2 * (len(headers) - 1)
        room = width - indent
        # Too little room beside the other columns (long kernel names): the
        # last column goes on its own lines under the row, indented.
        below = room < 30
        if below:
            indent, room = 4, width - 4
        lines = []
        for n, r in enumerate(cells):
            head = "  ".join(c.ljust(w) for c, w in zip(r[:-1], widths[:-1]))
            parts = textwrap.wrap(r[-1], room, break_on_hyphens=False) or [""]
            if below and n > 0:
                lines.append(head.rstrip())
                lines.extend(" " * indent + part for part in parts if part)
            else:
                lines.append(f"{head}  {parts[0]}".rstrip())
                lines.extend(" " * indent + part for part in parts[1:])
            if n == 0:
                rule = "-" * (len(r[-1]) if below else min(room, widths[-1]))
                lines.append("  ".join("-" * w for w in widths[:-1]) + "  " + rule)
        return "\n".join(lines)
    if width is not None and notes is not None and len(headers) > 1:
        room = max(40, width - sum(widths[:-1]) - 2 * (len(headers) - 1))
        for r in cells[1:]:
            text = r[-1]
            if len(text) > room:
                if text not in notes:
                    notes.append(text)
                mark = f" [{notes.index(text) + 1}]"
                r[-1] = text[: room - len(mark) - 3].rstrip() + "..." + mark
        widths[-1] = max(len(r[-1]) for r in cells)
    lines = []
    for n, r in enumerate(cells):
        lines.append("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _format_notes(notes: Sequence[str], width: int = TABLE_WIDTH) -> str:
    return "\n".join(textwrap.fill(text, width, initial_indent=f"[{i}] ", subsequent_indent="    ")
                     for i, text in enumerate(notes, 1))


def format_shape(shape: Sequence[int], dim_params: Sequence[str | None] = ()) -> str:
    """``[batch=64, 1024]``: a symbolic dimension's name beside its value."""
    params = list(dim_params) if len(dim_params) == len(shape) else [None] * len(shape)
    return "[" + ", ".join(f"{p}={v}" if p else str(v) for v, p in zip(shape, params)) + "]"


# ---------------------------------------------------------------- model input


class InputSpec(NamedTuple):
    """A graph input to feed: its dtype, concrete shape and, per dimension,
    the symbolic name the model gives it (None for a fixed or unnamed one)."""

    name: str
    dtype: np.dtype
    shape: tuple[int, ...]
    dim_params: tuple[str | None, ...]


class DeclaredInput(NamedTuple):
    name: str
    dtype: np.dtype
    dims: tuple[int | str | None, ...] | None  # None: the model gives no shape
    has_default: bool  # an initializer listed as an input: feeding it is optional

    def describe(self) -> str:
        dims = "[?]" if self.dims is None else "[" + ", ".join("?" if d is None else str(d) for d in self.dims) + "]"
        return f"{self.name}: {self.dtype} {dims}"


def _numpy_dtype(elem_type: int) -> np.dtype:
    from onnx import helper

    try:
        return np.dtype(helper.tensor_dtype_to_np_dtype(elem_type))
    except Exception as exc:  # an element type numpy (and ml_dtypes) cannot hold
        raise CliError(f"cannot generate inputs of ONNX element type {elem_type}") from exc


def parse_dims(specs: Sequence[str]) -> dict[str, int]:
    """Parses ``--dim NAME=VALUE`` options."""
    dims: dict[str, int] = {}
    for spec in specs:
        name, sep, value = spec.partition("=")
        if not sep or not name:
            raise CliUsageError(f"--dim expects NAME=VALUE, got {spec!r}")
        try:
            dims[name] = int(value)
        except ValueError:
            raise CliUsageError(f"--dim {name}: {value!r} is not an integer") from None
        if dims[name] < 0:
            raise CliUsageError(f"--dim {name}: size must be >= 0")
    return dims


def parse_shapes(specs: Sequence[str]) -> dict[str, tuple[int, ...]]:
    """Parses ``--shape INPUT=D0,D1,...`` options (``INPUT=`` for a scalar)."""
    shapes: dict[str, tuple[int, ...]] = {}
    for spec in specs:
        name, sep, value = spec.partition("=")
        if not sep or not name:
            raise CliUsageError(f"--shape expects INPUT=D0,D1,..., got {spec!r}")
        try:
            dims = tuple(int(v) for v in value.split(",")) if value.strip() else ()
        except ValueError:
            raise CliUsageError(f"--shape {name}: {value!r} is not a comma-separated list of integers") from None
        if any(d < 0 for d in dims):
            raise CliUsageError(f"--shape {name}: sizes must be >= 0")
        shapes[name] = dims
    return shapes


def dims_from_shapes(model: Any, shapes: Mapping[str, tuple[int, ...]], dims: Mapping[str, int]) -> dict[str, int]:
    """The sizes ``--shape`` gives the model's named symbolic dimensions; a
    usage error for an input the model does not have, a rank or fixed size
    the model's declaration contradicts, or a size another ``--shape`` or a
    ``--dim`` gives otherwise."""
    declared = {d.name: d for d in declared_inputs(model)}
    bound: dict[str, int] = {}
    for name, shape in shapes.items():
        d = declared.get(name)
        if d is None:
            raise CliUsageError(f"--shape: the model has no input {name!r} (its inputs: {', '.join(declared)})")
        if d.dims is None:
            continue
        if len(shape) != len(d.dims):
            raise CliUsageError(f"--shape {name}: {len(shape)} sizes given, the input has rank {len(d.dims)} "
                                f"({d.describe()})")
        for axis, (want, size) in enumerate(zip(d.dims, shape)):
            if isinstance(want, int) and want != size:
                raise CliUsageError(f"--shape {name}: axis {axis} is {size}, the model fixes it at {want}")
            if isinstance(want, str):
                other = bound.get(want, dims.get(want))
                if other is not None and other != size:
                    raise CliUsageError(f"--shape {name}: axis {axis} ({want}) is {size}, but {want} is {other} "
                                        "elsewhere")
                bound[want] = size
    return bound


def declared_inputs(model: Any) -> list[DeclaredInput]:
    """Every graph input, as the model declares it."""
    initializers = {init.name for init in model.graph.initializer}
    out = []
    for vi in model.graph.input:
        if not vi.type.HasField("tensor_type"):
            if vi.name in initializers:
                continue
            raise CliError(f"input {vi.name!r}: only tensor inputs can be fed")
        tt = vi.type.tensor_type
        dims: tuple[int | str | None, ...] | None = None
        if tt.HasField("shape"):
            dims = tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
                         if d.HasField("dim_param") else None for d in tt.shape.dim)
        out.append(DeclaredInput(vi.name, _numpy_dtype(tt.elem_type), dims, vi.name in initializers))
    return out


def symbolic_dims(model: Any) -> list[str]:
    """The dim_param names the graph inputs use, in order of first use."""
    names: list[str] = []
    for d in declared_inputs(model):
        for dim in d.dims or ():
            if isinstance(dim, str) and dim not in names:
                names.append(dim)
    return names


def check_dims(model: Any, dims: Mapping[str, int]) -> None:
    """A ``--dim`` must name a symbolic dimension of a graph input."""
    known = symbolic_dims(model)
    unknown = [n for n in dims if n not in known]
    if unknown:
        have = f"the model's symbolic dimensions: {', '.join(known)}" if known else "the model has none"
        what = ", ".join(map(repr, unknown))
        raise CliUsageError(f"--dim: no input of the model has a symbolic dimension named {what} ({have})")


def input_specs(model: Any, dims: Mapping[str, int], include_defaults: bool = False) -> list[InputSpec]:
    """Graph inputs that need a feed, with their shapes made concrete by
    ``dims`` (a symbolic dimension it does not name: DEFAULT_SYMBOLIC_DIM).
    Initializers listed as inputs have a default value: only with
    ``include_defaults``."""
    specs = []
    for d in declared_inputs(model):
        if d.has_default and not include_defaults:
            continue
        shape = tuple(v if isinstance(v, int) else dims.get(v, DEFAULT_SYMBOLIC_DIM) if v else DEFAULT_SYMBOLIC_DIM
                      for v in d.dims or ())
        specs.append(InputSpec(d.name, d.dtype, shape, tuple(v if isinstance(v, str) else None
                                                               for v in d.dims or ())))
    return specs


# ---------------------------------------------------------------- input roles


@dataclass(frozen=True)
class InputRole:
    """How an input is fed: ``kind`` is one of ids, mask, positions,
    token_types, int, bool, float, complex, file; ``label`` says it in the
    progress lines; ``high`` is the exclusive bound of generated ids."""

    kind: str
    label: str
    high: int | None = None


# Ops an id may pass through, on their first input, before it indexes a table.
_ID_PASS_THROUGH = {"Cast", "Unsqueeze", "Squeeze", "Reshape", "Flatten", "Identity"}


def _tables(model: Any) -> dict[str, tuple[int, ...]]:
    """Dims of the constant tensors a Gather may index: initializers and Constant values."""
    tables = {init.name: tuple(init.dims) for init in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx") and node.output:
            for a in node.attribute:
                if a.name == "value" and a.HasField("t"):
                    tables[node.output[0]] = tuple(a.t.dims)
    return tables


def embedding_tables(model: Any, name: str) -> list[tuple[int, str]]:
    """(rows, table) of each constant table the value ``name`` indexes as a
    Gather's indices, directly or through Cast/Unsqueeze/Squeeze/Reshape/
    Flatten/Identity; rows is the table's size along the Gather's axis."""
    consumers: dict[str, list[tuple[Any, int]]] = {}
    for node in model.graph.node:
        for i, inp in enumerate(node.input):
            consumers.setdefault(inp, []).append((node, i))
    tables = _tables(model)
    found: list[tuple[int, str]] = []
    frontier, seen = [name], {name}
    while frontier:
        value = frontier.pop()
        for node, i in consumers.get(value, ()):
            if node.domain not in ("", "ai.onnx"):
                continue
            if node.op_type == "Gather" and i == 1 and node.input[0] in tables:
                dims = tables[node.input[0]]
                axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
                if dims and -len(dims) <= axis < len(dims):
                    found.append((int(dims[axis]), node.input[0]))
            elif node.op_type in _ID_PASS_THROUGH and i == 0 and node.output and node.output[0] not in seen:
                seen.add(node.output[0])
                frontier.append(node.output[0])
    return found


def _name_words(name: str) -> list[str]:
    # input_ids, inputIds, input.ids -> ["input", "ids"]
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name)
    return [w for w in re.split(r"[^a-z0-9]+", spaced.lower()) if w]


def input_roles(model: Any, specs: Sequence[InputSpec], vocab: int | None = None,
                float_range: tuple[float, float] | None = None) -> dict[str, InputRole]:
    """The role of each input (see the module docstring), by name, dtype and graph."""
    roles = {}
    for spec in specs:
        words = _name_words(spec.name)
        joined = "_".join(words)
        integer = np.issubdtype(spec.dtype, np.integer)
        if "mask" in joined and (integer or spec.dtype == np.bool_ or spec.dtype.kind in "fV"):
            roles[spec.name] = InputRole("mask", "mask (ones)")
        elif integer and ("position" in joined or words[-1:] == ["pos"] or "pos_ids" in joined):
            last = spec.shape[-1] if spec.shape else 1
            roles[spec.name] = InputRole("positions", f"positions 0..{max(last - 1, 0)} along the last axis")
        elif integer and ("type_id" in joined or "token_type" in joined or "segment" in joined):
            roles[spec.name] = InputRole("token_types", "token types (zeros)")
        elif integer:
            tables = embedding_tables(model, spec.name)
            id_name = (words[-1:] in (["ids"], ["id"]) or "ids" in words or any(w.startswith("token") for w in words)
                       or joined.endswith("ids"))
            if tables:
                rows, table = min(tables)
                if vocab is not None and vocab < rows:
                    roles[spec.name] = InputRole("ids", f"ids < {vocab} (--vocab; table {table!r} has {rows} rows)",
                                                 vocab)
                else:
                    roles[spec.name] = InputRole("ids", f"ids < {rows} (rows of embedding table {table!r})", rows)
            elif id_name:
                high = vocab if vocab is not None else DEFAULT_VOCAB
                how = "--vocab" if vocab is not None else "default; set --vocab"
                roles[spec.name] = InputRole("ids", f"ids < {high} ({how})", high)
            else:
                roles[spec.name] = InputRole("int", f"random ints in [0, {DEFAULT_INT_HIGH})", DEFAULT_INT_HIGH)
        elif spec.dtype == np.bool_:
            roles[spec.name] = InputRole("bool", "random bool (50/50)")
        elif np.issubdtype(spec.dtype, np.complexfloating):
            roles[spec.name] = InputRole("complex", "random complex, N(0,1) parts")
        elif spec.dtype.kind in "fV":  # float16/bfloat16/float8 (ml_dtypes) are kind V
            label = f"random U[{float_range[0]:g}, {float_range[1]:g})" if float_range else "random N(0,1)"
            roles[spec.name] = InputRole("float", label)
        else:
            raise CliError(f"input {spec.name!r}: cannot generate values of type {spec.dtype}; "
                           f"pass them with --feeds FILE.npz")
    return roles


def generate_input(spec: InputSpec, role: InputRole, rng: np.random.Generator,
                   float_range: tuple[float, float] | None = None) -> np.ndarray:
    """Values for one input in its role."""
    shape, dtype = spec.shape, spec.dtype
    if role.kind == "mask":
        arr: np.ndarray = np.ones(shape, dtype=np.float32).astype(dtype)
    elif role.kind == "positions":
        last = shape[-1] if shape else 1
        arr = np.broadcast_to(np.arange(last, dtype=np.int64), shape).astype(dtype) if shape else np.zeros((), dtype)
    elif role.kind == "token_types":
        arr = np.zeros(shape, dtype)
    elif role.kind in ("ids", "int"):
        high = role.high or DEFAULT_INT_HIGH
        if np.iinfo(dtype).max < high - 1:
            high = int(np.iinfo(dtype).max) + 1
        arr = rng.integers(0, high, size=shape).astype(dtype)
    elif role.kind == "bool":
        arr = rng.random(shape) < 0.5
    elif role.kind == "complex":
        arr = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    elif role.kind == "float":
        values = rng.uniform(*float_range, size=shape) if float_range else rng.standard_normal(shape)
        arr = values.astype(np.float32).astype(dtype)  # ml_dtypes types convert from float32
    else:
        raise CliError(f"input {spec.name!r}: no generator for role {role.kind!r}")
    return np.asarray(arr, order="C")  # keeps 0-d arrays 0-d, as ascontiguousarray does not


def random_inputs(model: Any, specs: Sequence[InputSpec], seed: int, vocab: int | None = None,
                  float_range: tuple[float, float] | None = None
                  ) -> tuple[dict[str, np.ndarray], dict[str, InputRole]]:
    """Seeded feeds by role. Each input draws from its own stream, seeded by
    ``seed`` and its position, so that supplying one from a file leaves the
    others' values as they were."""
    roles = input_roles(model, specs, vocab, float_range)
    order = {d.name: i for i, d in enumerate(model.graph.input)}
    feeds = {}
    for spec in specs:
        rng = np.random.default_rng([seed, order.get(spec.name, 0)])
        feeds[spec.name] = generate_input(spec, roles[spec.name], rng, float_range)
    return feeds, roles


def load_feeds(path: str, model: Any) -> dict[str, np.ndarray]:
    """Named arrays from an ``.npz`` file, checked against the model's inputs
    (names, dtypes, ranks and fixed dimensions)."""
    if not os.path.exists(path):
        raise CliError(f"--feeds {path}: no such file")
    try:
        data = np.load(path, allow_pickle=False)
    except Exception as exc:
        raise CliError(f"--feeds {path}: not a readable .npz file ({type(exc).__name__}: {exc})") from exc
    if not isinstance(data, np.lib.npyio.NpzFile):
        raise CliError(f"--feeds {path}: holds one unnamed array; save named ones with np.savez(path, name=array)")
    declared = {d.name: d for d in declared_inputs(model)}
    listing = "; ".join(d.describe() for d in declared.values()) or "none"
    with data:
        unknown = [n for n in data.files if n not in declared]
        if unknown:
            raise CliError(f"--feeds {path}: {', '.join(map(repr, unknown))} "
                           f"{'is not an input' if len(unknown) == 1 else 'are not inputs'} of the model "
                           f"(its inputs: {listing})")
        try:
            arrays = {n: data[n] for n in data.files}
        except Exception as exc:
            raise CliError(f"--feeds {path}: cannot read its arrays ({type(exc).__name__}: {exc})") from exc
    for name, arr in list(arrays.items()):
        d = declared[name]
        if arr.dtype.kind == "V" and not arr.dtype.names and d.dtype.kind == "V" \
                and arr.dtype.itemsize == d.dtype.itemsize:
            # .npy files store bfloat16/float8 (ml_dtypes) as raw bytes: read them as the model's type.
            arrays[name] = arr = arr.view(d.dtype)
        if arr.dtype != d.dtype:
            raise CliError(f"--feeds {path}: input {name!r} is {arr.dtype} in the file, the model expects {d.dtype}")
        if d.dims is None:
            continue
        expect = "[" + ", ".join("?" if v is None else str(v) for v in d.dims) + "]"
        if arr.ndim != len(d.dims) or any(isinstance(v, int) and v != n for v, n in zip(d.dims, arr.shape)):
            raise CliError(f"--feeds {path}: input {name!r} has shape {list(arr.shape)} in the file, "
                           f"the model expects {expect}")
    return {n: np.asarray(a, order="C") for n, a in arrays.items()}


def save_feeds(path: str, feeds: Mapping[str, np.ndarray]) -> None:
    """Writes ``feeds`` as np.savez does (np.load reads it back), for any
    input name: np.savez's own keyword arguments cannot be called "file"."""
    import zipfile

    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
        for name, arr in feeds.items():
            with zf.open(f"{name}.npy", "w", force_zip64=True) as f:
                np.lib.format.write_array(f, np.asarray(arr), allow_pickle=False)


def dims_from_feeds(model: Any, feeds: Mapping[str, np.ndarray], explicit: Mapping[str, int],
                    source: str) -> dict[str, int]:
    """The sizes given arrays bind their inputs' symbolic dimensions to; an
    error when two arrays, or an array and ``--dim``, disagree."""
    bound: dict[str, tuple[int, str]] = {}
    for d in declared_inputs(model):
        if d.name not in feeds or d.dims is None:
            continue
        for param, size in zip(d.dims, feeds[d.name].shape):
            if not isinstance(param, str):
                continue
            if param in explicit and explicit[param] != size:
                raise CliError(f"--feeds {source}: input {d.name!r} has {param}={size}, but --dim {param}="
                               f"{explicit[param]}")
            if param in bound and bound[param][0] != size:
                other, first = bound[param][1], bound[param][0]
                raise CliError(f"--feeds {source}: inputs {other!r} and {d.name!r} disagree on {param} "
                               f"({first} vs {size})")
            bound.setdefault(param, (int(size), d.name))
    return {p: v for p, (v, _) in bound.items()}


# ------------------------------------------------------------------ loading


def load_model(path: str) -> Any:
    import onnx

    if not os.path.exists(path):
        raise CliError(f"{path}: no such file")
    if os.path.isdir(path):
        raise CliError(f"{path}: is a directory, expected an .onnx file")
    try:
        model = onnx.load(path)
    except Exception as exc:
        raise CliError(f"{path}: not a valid ONNX model ({type(exc).__name__}: {exc})") from exc
    if not model.graph.node and not model.graph.output:
        # protobuf parses many non-model byte strings into an empty message
        raise CliError(f"{path}: not a valid ONNX model (no graph)")
    try:
        onnx.checker.check_model(model)
    except Exception as exc:
        # The checker refuses some models that onnxruntime and olc run (IR
        # versions, contrib domains): warn and let the session decide.
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        _progress(f"warning: onnx.checker: {first}")
    return model


# ------------------------------------------------------------------ olc run


def _op_label(domain: str, op_type: str) -> str:
    return op_type if domain in ("", "ai.onnx") else f"{domain}::{op_type}"


def _path(entry: Any) -> str:
    from .session import CONSTANT_FOLDED_REASON

    if entry.native:
        return "native"
    if entry.reason == CONSTANT_FOLDED_REASON:
        return "constant"  # evaluated once at load: nothing runs per run
    return "fallback" if entry.kernel.startswith(FALLBACK_LIBRARY + "::") else "python"


def node_rows(expanded_plan: Sequence[Any], subgraph: str = "") -> list[dict[str, Any]]:
    """One row per model node from ``Session.kernel_plan(expand_fused=True)``:
    a fused node's originals each name the fused node and kernel that ran them.
    The nodes of an If, Loop or Scan's subgraphs follow their node, named
    ``node/attribute/inner`` and with ``subgraph`` set to ``node/attribute``."""
    rows: list[dict[str, Any]] = []
    for e in expanded_plan:
        rows.append({"node": f"{subgraph}/{e.node_name}" if subgraph else e.node_name, "domain": e.domain,
                     "op": e.op_type, "kernel": e.kernel, "native": bool(e.native), "path": _path(e),
                     "reason": e.reason, "fused_into": getattr(e, "fused_into", "") or None,
                     "shape_plan": getattr(e, "shape_plan", "") or None, "subgraph": subgraph or None})
        for attr, entries in getattr(e, "subgraphs", ()):
            inner = f"{subgraph}/{e.node_name}" if subgraph else e.node_name
            rows.extend(node_rows(entries, f"{inner}/{attr}"))
    return rows


# Longer node names lose their middle in the plan table (the JSON keeps them).
NODE_NAME_WIDTH = 48


def _short_name(name: str, width: int = NODE_NAME_WIDTH) -> str:
    if len(name) <= width:
        return name
    head = (width - 3) // 3
    return name[:head] + "..." + name[len(name) - (width - 3 - head):]


def plan_rows(rows: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    """Table cells per node; reasons lose what the other columns already say."""
    out = []
    for r in rows:
        reason = r["reason"] or ""
        if r["path"] == "fallback" and reason.startswith("fallback: "):
            reason = reason[len("fallback: "):]
        if reason.startswith("no kernel is registered for "):
            reason = "no kernel registered"
        # (the JSON report keeps the selection reason of these too)
        if r.get("shape_plan") == "folded":
            reason = "folded at load (shape value)"
        elif r.get("shape_plan") == "cached":
            reason = "cached per input shapes"
        out.append([_short_name(r["node"] or "(unnamed)"), _op_label(r["domain"], r["op"]), r["kernel"], r["path"],
                    reason])
    return out


def plan_summary(all_rows: Sequence[Mapping[str, Any]]) -> str:
    rows = [r for r in all_rows if not r.get("subgraph")]
    inner = [r for r in all_rows if r.get("subgraph")]
    text = _plan_summary(rows)
    if inner:
        n_native = sum(1 for r in inner if r["native"] or r["path"] in ("python", "constant"))
        text += (f"; their subgraphs: {n_native} of {len(inner)} nodes on olc kernels, "
                 f"{sum(1 for r in inner if r['path'] == 'fallback')} on the fallback")
    return text


def _plan_summary(rows: Sequence[Mapping[str, Any]]) -> str:
    n_native = sum(1 for r in rows if r["native"])
    n_python = sum(1 for r in rows if r["path"] == "python")
    folded = [r for r in rows if r["path"] == "constant"]
    per_run = [r for r in rows if r["path"] == "fallback"]
    fused = {r["fused_into"] for r in rows if r["fused_into"]}
    parts = [f"{n_native} of {len(rows)} nodes on native kernels"]
    if n_python:
        parts.append(f"{n_python} on Python kernels")
    parts.append(f"{len(per_run)} on the {FALLBACK_LIBRARY} fallback")
    if folded:
        parts.append(f"{len(folded)} Constant node{'s' if len(folded) != 1 else ''} evaluated once at load")
    shape_folded = sum(1 for r in rows if r.get("shape_plan") == "folded")
    shape_cached = sum(1 for r in rows if r.get("shape_plan") == "cached")
    if shape_folded or shape_cached:
        parts.append(f"shape values: {shape_folded} node{'s' if shape_folded != 1 else ''} folded at load, "
                     f"{shape_cached} cached per input shapes")
    text = ", ".join(parts)
    if fused:
        n_fused = sum(1 for r in rows if r["fused_into"])
        text += f"; {n_fused} of them fused into {len(fused)} kernel call{'s' if len(fused) != 1 else ''}"
    return text


def _float_view(x: np.ndarray) -> np.ndarray:
    """float64 values to compare; a complex array as its real and imaginary
    parts along a new last axis."""
    if x.dtype.kind == "c":
        return np.stack([x.real, x.imag], axis=-1).astype(np.float64)
    return x.astype(np.float64)


def _index(flat: int, shape: tuple[int, ...]) -> list[int]:
    return [int(i) for i in np.unravel_index(flat, shape)] if shape else []


def _nonfinite_counts(x: np.ndarray) -> tuple[int, int]:
    if x.dtype.kind not in "fcV":
        return 0, 0
    f = _float_view(x)
    return int(np.isnan(f).sum()), int(np.isinf(f).sum())


def _is_maps(x: Any) -> bool:
    return isinstance(x, list) and all(isinstance(d, dict) for d in x)


def _map_values(maps: Any) -> np.ndarray:
    return np.array([list(d.values()) for d in maps], dtype=np.float64).reshape(len(maps), -1)


def compare_outputs(names: Sequence[str], ours: Sequence[np.ndarray], theirs: Sequence[np.ndarray],
                    rtol: float, atol: float) -> list[dict[str, Any]]:
    """Per output, the verdict of the module docstring's rule and what it rests on.

    Keys: ``verdict`` (agree, non-finite, DIFFER), ``ok`` (verdict is
    agree), ``max_abs`` (largest |a - b| over positions finite on both
    sides; None when there is none), ``tol_used`` (largest
    |a - b| / (atol + rtol*|b|) there; None for exact comparisons),
    ``beyond`` (finite positions beyond tolerance), ``nonfinite_mismatch``
    (positions where NaN/infinity differ), ``nonfinite_same`` (positions
    non-finite alike on both sides), ``olc_nan``/``olc_inf``/``ort_nan``/
    ``ort_inf`` (counts), ``worst`` (index and both values of the worst
    position, when some position fails), ``note``.
    """
    rows = []
    for name, a, b in zip(names, ours, theirs):
        if _is_maps(a) or _is_maps(b):
            # Sequences of maps (ZipMap's output): the same keys in the same
            # order, then their values compared as an array.
            if not (_is_maps(a) and _is_maps(b) and [list(d) for d in a] == [list(d) for d in b]):
                rows.append({"output": name, "shape": [len(b)] if isinstance(b, list) else list(np.shape(b)),
                             "dtype": "map", "size": len(b) if isinstance(b, list) else int(np.size(b)),
                             "max_abs": None, "tol_used": None, "exact": True, "beyond": 0, "nonfinite_mismatch": 0,
                             "nonfinite_same": 0, "olc_nan": 0, "olc_inf": 0, "ort_nan": 0, "ort_inf": 0,
                             "worst": None, "note": "the sequences of maps differ in length or keys",
                             "verdict": VERDICT_DIFFER, "ok": False})
                continue
            a, b = _map_values(a), _map_values(b)
        a = np.asarray(a)
        b = np.asarray(b)
        olc_nan, olc_inf = _nonfinite_counts(a)
        ort_nan, ort_inf = _nonfinite_counts(b)
        row: dict[str, Any] = {"output": name, "shape": list(b.shape), "dtype": str(b.dtype), "size": int(b.size),
                               "max_abs": None, "tol_used": None, "exact": False, "beyond": 0,
                               "nonfinite_mismatch": 0, "nonfinite_same": 0, "olc_nan": olc_nan, "olc_inf": olc_inf,
                               "ort_nan": ort_nan, "ort_inf": ort_inf, "worst": None, "note": ""}
        if a.shape != b.shape or a.dtype != b.dtype:
            row["note"] = (f"olc gives shape {list(a.shape)}, onnxruntime {list(b.shape)}" if a.shape != b.shape
                           else f"olc gives {a.dtype}, onnxruntime {b.dtype}")
            row["verdict"] = VERDICT_DIFFER
        elif a.dtype.kind in "fcV":
            fa, fb = _float_view(a), _float_view(b)
            finite = np.isfinite(fa) & np.isfinite(fb)
            same = (np.isnan(fa) & np.isnan(fb)) | (np.isinf(fa) & (fa == fb))
            mismatch = ~finite & ~same
            with np.errstate(invalid="ignore", over="ignore"):
                diff = np.where(finite, np.abs(fa - fb), 0.0)
                allowed = atol + rtol * np.abs(np.where(finite, fb, 0.0))
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = np.where(diff == 0, 0.0, diff / allowed)  # allowed 0 (atol = rtol = 0): inf
            beyond = finite & (diff > allowed)
            if finite.any():
                row["max_abs"] = float(diff.max())
                row["tol_used"] = float(ratio.max())
            row["beyond"] = int(beyond.sum())
            row["nonfinite_mismatch"] = int(mismatch.sum())
            row["nonfinite_same"] = int((~finite & same).sum())
            worst = -1
            if row["nonfinite_mismatch"]:
                worst = int(np.argmax(mismatch))
            elif row["beyond"]:
                worst = int(np.argmax(np.where(finite, ratio, -1.0)))
            if worst >= 0:
                row["worst"] = {"index": _index(worst, fa.shape), "olc": float(fa.flat[worst]),
                                "ort": float(fb.flat[worst])}
            if row["beyond"] or row["nonfinite_mismatch"]:
                row["verdict"] = VERDICT_DIFFER
            elif row["nonfinite_same"]:
                row["verdict"] = VERDICT_NONFINITE
            else:
                row["verdict"] = VERDICT_AGREE
        else:
            row["exact"] = True
            unequal = a != b
            if a.dtype.kind in "biu":
                row["max_abs"] = float(np.abs(a.astype(np.float64) - b.astype(np.float64)).max()) if a.size else 0.0
            row["beyond"] = int(np.sum(unequal))
            if row["beyond"]:
                worst = int(np.argmax(unequal))
                row["worst"] = {"index": _index(worst, a.shape), "olc": a.flat[worst].item(),
                                "ort": b.flat[worst].item()}
            row["verdict"] = VERDICT_DIFFER if row["beyond"] else VERDICT_AGREE
        row["ok"] = row["verdict"] == VERDICT_AGREE
        rows.append(row)
    return rows


def _fmt_num(x: float | None) -> str:
    return "-" if x is None else f"{x:.3g}"


def comparison_table(rows: Sequence[Mapping[str, Any]], dim_params: Mapping[str, Sequence[str | None]]) -> str:
    return _format_table(
        ["output", "shape", "max abs diff", "tol used", "NaN olc/ort", "inf olc/ort", "verdict"],
        [[r["output"], format_shape(r["shape"], dim_params.get(r["output"], ())), _fmt_num(r["max_abs"]),
          "exact" if r["exact"] else _fmt_num(r["tol_used"]), f"{r['olc_nan']}/{r['ort_nan']}",
          f"{r['olc_inf']}/{r['ort_inf']}", r["verdict"]] for r in rows])


def _fmt_index(name: str, index: Sequence[int]) -> str:
    return f"{name}[{', '.join(map(str, index))}]" if index else name


def disagreement_lines(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """One line per DIFFER output saying where and by how much."""
    lines = []
    for r in rows:
        if r["verdict"] != VERDICT_DIFFER:
            continue
        if r["note"]:
            lines.append(f"{r['output']}: {r['note']}")
            continue
        w = r["worst"]
        at = f"{_fmt_index(r['output'], w['index'])}: olc {w['olc']:.6g} vs onnxruntime {w['ort']:.6g}"
        if r["nonfinite_mismatch"]:
            lines.append(f"{r['output']}: NaN/infinity differ at {r['nonfinite_mismatch']} of {r['size']} "
                         f"positions (first {at})"
                         + (f"; {r['beyond']} finite values beyond tolerance too" if r["beyond"] else ""))
        elif r["exact"]:
            lines.append(f"{r['output']}: {r['beyond']} of {r['size']} values differ (first {at})")
        else:
            lines.append(f"{r['output']}: {r['beyond']} of {r['size']} values beyond tolerance "
                         f"(worst {at}, tol used {r['tol_used']:.3g})")
    return lines


INPUT_HINT = ("the inputs may be outside the model's domain: pass real ones with --feeds FILE.npz, "
              "or try --float-range LO HI, --vocab N or another --seed")


def nonfinite_message(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The stderr lines for outputs that are NaN/infinite alike on both sides."""
    hit = [r for r in rows if r["verdict"] == VERDICT_NONFINITE]
    if not hit:
        return []
    n = sum(r["nonfinite_same"] for r in hit)
    total = sum(r["size"] for r in hit)
    names = ", ".join(r["output"] for r in hit)
    return [f"warning: the inputs produced non-finite outputs ({n} of {total} values of {names} are NaN or "
            "infinite, alike in olc and onnxruntime): the comparison cannot check those values",
            f"  {INPUT_HINT}"]


def _fmt_ms(ns: float) -> str:
    return f"{ns / 1e6:.3f} ms"


def _onnxruntime_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("onnxruntime") is not None


def _output_dim_params(session: Any, ours: Sequence[np.ndarray]) -> dict[str, tuple[str | None, ...]]:
    """The symbolic name of each output dimension, where the model (or shape
    inference) gives one and the rank matches."""
    out = {}
    for arg, value in zip(session.get_outputs(), ours):
        shape = list(arg.shape or [])
        if len(shape) == np.ndim(value):
            out[arg.name] = tuple(d if isinstance(d, str) else None for d in shape)
    return out


def _json_safe(x: Any) -> Any:
    """JSON without NaN/Infinity tokens (not JSON): non-finite floats as strings."""
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    if isinstance(x, dict):
        return {k: _json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_json_safe(v) for v in x]
    return x


def prepare_feeds(args: argparse.Namespace, model: Any, explicit: Mapping[str, int],
                  defaults: Mapping[str, int], shapes: Mapping[str, tuple[int, ...]] | None = None
                  ) -> tuple[list[InputSpec], dict[str, np.ndarray], dict[str, InputRole]]:
    """The inputs of ``olc run``: from --feeds where given, generated by role
    otherwise, in the --shape given for them (which also sizes the unnamed
    dimensions --dim cannot name)."""
    shapes = shapes or {}
    from_file: dict[str, np.ndarray] = {}
    file_dims: dict[str, int] = {}
    if args.feeds:
        from_file = load_feeds(args.feeds, model)
        both = sorted(set(from_file) & set(shapes))
        if both:
            raise CliUsageError(f"--shape {both[0]}: that input comes from --feeds {args.feeds}")
        file_dims = dims_from_feeds(model, from_file, explicit, args.feeds)
    dims = {**defaults, **file_dims, **explicit}
    has_default = {d.name: d.has_default for d in declared_inputs(model)}
    specs = [s for s in input_specs(model, dims, include_defaults=True)
             if s.name in from_file or not has_default[s.name]]
    for i, s in enumerate(specs):
        if s.name in from_file:  # the file's shape, with the model's names for its dimensions
            specs[i] = s._replace(shape=tuple(from_file[s.name].shape))
        elif s.name in shapes:
            specs[i] = s._replace(shape=shapes[s.name],
                                  dim_params=s.dim_params if len(s.dim_params) == len(shapes[s.name])
                                  else (None,) * len(shapes[s.name]))
    to_generate = [s for s in specs if s.name not in from_file]
    feeds, roles = random_inputs(model, to_generate, args.seed, args.vocab,
                                 tuple(args.float_range) if args.float_range else None)
    label = f"from {os.path.basename(args.feeds)}" if args.feeds else ""
    roles.update({n: InputRole("file", label) for n in from_file})
    feeds.update(from_file)
    for s in specs:
        role = roles[s.name]
        if role.kind == "positions":
            for rows, table in embedding_tables(model, s.name):
                if s.shape and s.shape[-1] > rows:
                    _progress(f"warning: input {s.name}: positions reach {s.shape[-1] - 1}, but table {table!r} "
                              f"has {rows} rows")
    return specs, feeds, roles


@contextmanager
def _session_warnings_as_progress() -> Iterator[None]:
    """Shows olc_core's log records as ``olc: warning: ...`` lines while the
    command runs (once each; the fallback one worded for the command line)."""

    class Handler(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            fallback = getattr(record, "olc_fallback", None)
            if fallback:
                listed = [f"{op} x{n}" for op, n in fallback["ops"].items()]
                if len(listed) > 6:  # the plan table lists every node
                    listed[5:] = [f"{len(listed) - 5} other op types"]
                ops = ", ".join(listed)
                _progress(f"warning: {fallback['count']} of {fallback['nodes']} nodes run on the "
                          f"{FALLBACK_LIBRARY} fallback: {ops} (--strict refuses them; the plan says why)")
            else:
                _progress(f"{record.levelname.lower()}: {record.getMessage()}")

    log = logging.getLogger("olc_core")
    handler = Handler(logging.WARNING)
    propagate = log.propagate
    log.addHandler(handler)
    log.propagate = False
    try:
        yield
    finally:
        log.removeHandler(handler)
        log.propagate = propagate


def cmd_run(args: argparse.Namespace) -> int:
    import olc_core

    from . import demo

    explicit = parse_dims(args.dim)
    defaults: dict[str, int] = {}
    if args.model is None:
        model = demo.build_demo_model(seed=args.seed)
        defaults = dict(demo.DEMO_DIMS)
        label = "built-in demo model"
        described = "the built-in demo model"
    else:
        _progress(f"loading {args.model}")
        model = load_model(args.model)
        label = described = args.model
    check_dims(model, explicit)
    shapes = parse_shapes(args.shape)
    explicit = {**explicit, **dims_from_shapes(model, shapes, explicit)}

    compare = args.compare
    if compare is None:
        # On by default for the demo, when onnxruntime is there to compare with.
        compare = "onnxruntime" if args.model is None and _onnxruntime_available() else "none"
        if args.model is None and compare == "none":
            _progress("onnxruntime is not installed: skipping the comparison "
                      "(pip install onnxruntime, or olc-core[compare])")
    if compare == "onnxruntime" and not _onnxruntime_available():
        raise CliError("--compare onnxruntime: onnxruntime is not installed "
                       "(pip install onnxruntime, or olc-core[compare])")

    specs, feeds, roles = prepare_feeds(args, model, explicit, defaults, shapes)
    for s in specs:
        _progress(f"input {s.name}: {s.dtype} {format_shape(s.shape, s.dim_params)}: {roles[s.name].label}")
    if args.save_feeds:
        save_feeds(args.save_feeds, feeds)
        _progress(f"inputs saved to {args.save_feeds} (reuse them with --feeds)")

    _progress(f"preparing an olc session for {described}")
    session = olc_core.Session(model, threads=args.threads, strict=args.strict, record_usage=True,
                               fusion=args.fusion, profile=args.profile,
                               naive=(args.naive or True) if args.naive is not None else False)
    threads = int(session.threads)
    output_names = [o.name for o in model.graph.output]

    _progress(f"running olc ({threads} thread{'s' if threads != 1 else ''})")
    ours = session.run(output_names, feeds)
    usage = list(session.kernel_usage())
    rows = node_rows(session.kernel_plan(expand_fused=True))

    result: dict[str, Any] = {"model": label, "threads": threads, "inputs": {
        s.name: {"dtype": str(s.dtype), "shape": list(s.shape), "dims": list(s.dim_params),
                 "role": roles[s.name].label} for s in specs}}
    print(f"model: {label}")
    print(f"threads: {threads}")
    print()
    print("kernel plan:")
    notes: list[str] = []
    print(_format_table(["node", "op", "kernel", "path", "reason"], plan_rows(rows), TABLE_WIDTH, notes))
    if notes:
        print(_format_notes(notes))
    print(plan_summary(rows))
    print(f"kernels run: {len(usage)}")
    result["plan"] = rows  # one entry per model node; fused ones name the node that ran them
    out_dims = _output_dim_params(session, ours)

    status = EXIT_OK
    if compare != "onnxruntime":
        counts = [(n, *_nonfinite_counts(np.asarray(v)), np.size(v)) for n, v in zip(output_names, ours)]
        print()
        print("outputs:")
        print(_format_table(["output", "dtype", "shape", "NaN", "inf"],
                            [[n, str(np.asarray(v).dtype), format_shape(np.shape(v), out_dims.get(n, ())), nan, inf]
                             for (n, nan, inf, _), v in zip(counts, ours)]))
        result["outputs"] = [{"output": n, "nan": nan, "inf": inf, "size": int(size)} for n, nan, inf, size in counts]
        bad = [(n, nan + inf, size) for n, nan, inf, size in counts if nan + inf]
        if bad:
            _progress(f"warning: the inputs produced non-finite outputs ({sum(b[1] for b in bad)} of "
                      f"{sum(b[2] for b in bad)} values of {', '.join(b[0] for b in bad)} are NaN or infinite)")
            _progress(f"  {INPUT_HINT}")
    else:
        from .compare import onnxruntime_session, time_in_blocks

        _progress("preparing an onnxruntime session (CPUExecutionProvider)")
        ort_sess = onnxruntime_session(model, threads)
        theirs = ort_sess.run(output_names, feeds)
        cmp_rows = compare_outputs(output_names, ours, theirs, args.rtol, args.atol)
        print()
        print(f"olc vs onnxruntime {_ort_version()} (rtol {args.rtol:g}, atol {args.atol:g}):")
        print(comparison_table(cmp_rows, out_dims))
        print("agree: |olc - ort| <= atol + rtol*|ort| where both are finite; NaN, +inf and -inf in the same places")
        print("tol used: max |olc - ort| / (atol + rtol*|ort|) over the finite values; 1 or less is within tolerance")
        result["comparison"] = [{**r, "dims": list(out_dims.get(r["output"], ()))} for r in cmp_rows]
        if any(r["verdict"] == VERDICT_DIFFER for r in cmp_rows):
            status = EXIT_MISMATCH
        elif any(r["verdict"] == VERDICT_NONFINITE for r in cmp_rows):
            status = EXIT_NONFINITE

        if args.repeat > 0:
            _progress(f"timing {args.repeat} runs each, in alternating blocks")
            # One untimed run each first: first-run allocation is not steady state.
            session.run(output_names, feeds)
            ort_sess.run(output_names, feeds)
            # Blocks of up to eight runs each, a quarter of the runs at most.
            olc_ns, ort_ns = time_in_blocks(
                [lambda: session.run(output_names, feeds), lambda: ort_sess.run(output_names, feeds)],
                args.repeat, min(8, args.repeat // 4))
            m_olc, m_ort = statistics.median(olc_ns), statistics.median(ort_ns)
            print()
            print(f"median time per run over {args.repeat} runs, {threads} thread(s):")
            print(f"  olc          {_fmt_ms(m_olc)}")
            print(f"  onnxruntime  {_fmt_ms(m_ort)}")
            print(f"  ratio onnxruntime/olc = {m_ort / m_olc:.2f} (> 1: olc is faster)")
            result["timing"] = {"repeat": args.repeat, "olc_ns": olc_ns, "ort_ns": ort_ns,
                                "olc_median_ns": m_olc, "ort_median_ns": m_ort, "ratio": m_ort / m_olc}
        if status == EXIT_MISMATCH:
            bad_names = ", ".join(r["output"] for r in cmp_rows if r["verdict"] == VERDICT_DIFFER)
            _progress(f"outputs differ from onnxruntime: {bad_names}")
            for line in disagreement_lines(cmp_rows):
                _progress(f"  {line}")
        for line in nonfinite_message(cmp_rows):
            _progress(line)
    if args.profile:
        result["profile"] = profile_runs(args, model, session, feeds, output_names, compare == "onnxruntime")
    result["status"] = status
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(_json_safe(result), f, indent=2, allow_nan=False)
    return status


# ------------------------------------------------------------------ profile

PROFILE_MIN_RUNS = 5
PROFILE_TOP_NODES = 10


def olc_profile_by(records: Sequence[Any], runs: int, key: Callable[[Any], str]) -> dict[str, float]:
    """Microseconds per run, summed by ``key(record)``, largest first."""
    totals: dict[str, float] = {}
    for r in records:
        totals[key(r)] = totals.get(key(r), 0.0) + r.duration_us
    return dict(sorted(((k, v / runs) for k, v in totals.items()), key=lambda kv: -kv[1]))


def ort_profile_by_op(path: str, skip_runs: int = 0) -> tuple[dict[str, float], int]:
    """onnxruntime's profile file: microseconds per run by op type over its
    runs after the first ``skip_runs``, and how many runs that is."""
    from .control_flow import CONTROL_FLOW_OPS

    with open(path) as f:
        events = json.load(f)
    windows = sorted((float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0))) for e in events
                     if e.get("cat") == "Session" and e.get("name") == "model_run")
    kept = windows[skip_runs:]
    totals: dict[str, float] = {}
    for e in events:
        if e.get("cat") != "Node" or not str(e.get("name", "")).endswith("_kernel_time"):
            continue
        ts = float(e.get("ts", 0))
        if not any(b <= ts <= end for b, end in kept):
            continue
        op = str(e.get("args", {}).get("op_name", "?"))
        if op in CONTROL_FLOW_OPS:
            continue  # its time is its subgraphs' nodes', listed on their own
        totals[op] = totals.get(op, 0.0) + float(e.get("dur", 0))
    runs = max(len(kept), 1)
    return dict(sorted(((k, v / runs) for k, v in totals.items()), key=lambda kv: -kv[1])), len(kept)


def _profile_node(record: Any) -> str:
    """A profiled step's node, under the path of its subgraph if it has one."""
    return f"{record.subgraph}/{record.node_name}" if record.subgraph else record.node_name


def _share(part: float, whole: float) -> str:
    return f"{100 * part / whole:.1f}" if whole > 0 else "-"


def profile_runs(args: argparse.Namespace, model: Any, session: Any, feeds: Mapping[str, np.ndarray],
                 output_names: Sequence[str], with_ort: bool) -> dict[str, Any]:
    """Profiles olc (and onnxruntime) over the same runs and prints where the time goes."""
    from .control_flow import CONTROL_FLOW_OPS

    runs = max(args.repeat, PROFILE_MIN_RUNS)
    ort_sess = None
    if with_ort:
        from .compare import onnxruntime_session

        ort_sess = onnxruntime_session(model, int(session.threads), profile=True)
        ort_sess.run(output_names, feeds)  # warm-up, left out of the figures below
    _progress(f"profiling {runs} runs{' each' if ort_sess else ''}")
    session.run(output_names, feeds)
    session.clear_profile()
    for _ in range(runs):
        session.run(output_names, feeds)
        if ort_sess is not None:
            ort_sess.run(output_names, feeds)
    # The steps that ran nodes: an If or Loop run on olc counts through its
    # subgraphs' steps (its own time is theirs), as onnxruntime's are.
    records = [r for r in session.profile_records()
               if not (r.op_type in CONTROL_FLOW_OPS and r.kernel.startswith("olc_core::"))]
    by_op = olc_profile_by(records, runs, lambda r: _op_label("ai.onnx", r.op_type))
    by_node = olc_profile_by(records, runs, _profile_node)
    olc_total = sum(by_op.values())
    ort_by_op: dict[str, float] = {}
    ort_total = 0.0
    if ort_sess is not None:
        ort_by_op, _ = ort_profile_by_op(ort_sess.end_profiling(), skip_runs=1)
        ort_total = sum(ort_by_op.values())
    print()
    head = f"profile over {runs} runs, {session.threads} thread(s): olc's nodes take {olc_total:.1f} us per run"
    if ort_sess is not None:
        head += f", onnxruntime's {ort_total:.1f} us"
    print(head + " (sum of node times)")
    cached_nodes = {r.node_name for r in records if r.cached}
    if cached_nodes:
        print(f"{len(cached_nodes)} shape node{'s' if len(cached_nodes) != 1 else ''} took their values from "
              "the shape-plan cache (0 us)")
    ops = list(by_op) + [op for op in ort_by_op if op not in by_op]
    rows = []
    for op in ops:
        row = [op, f"{by_op[op]:.1f}", _share(by_op[op], olc_total)] if op in by_op else [op, "-", "-"]
        if ort_sess is not None:
            row += [f"{ort_by_op[op]:.1f}", _share(ort_by_op[op], ort_total)] if op in ort_by_op else ["-", "-"]
        rows.append(row)
    headers = ["op type", "olc us/run", "olc %"] + (["ort us/run", "ort %"] if ort_sess is not None else [])
    print(_format_table(headers, rows))
    entries = {_profile_node(r): r for r in records}
    print()
    print(f"olc's top nodes (of {len(by_node)}):")
    print(_format_table(["node", "op", "kernel", "us/run", "%"],
                        [[_short_name(n), entries[n].op_type, entries[n].kernel, f"{t:.1f}", _share(t, olc_total)]
                         for n, t in list(by_node.items())[:PROFILE_TOP_NODES]]))
    if args.trace:
        session.write_profile(args.trace)
        _progress(f"olc's profile written to {args.trace} (Chrome trace-event JSON)")
    return {"runs": runs, "olc_us_per_run": olc_total, "olc_by_op_us": by_op, "olc_by_node_us": by_node,
            "shape_nodes_cached": len(cached_nodes),
            "ort_us_per_run": ort_total if ort_sess is not None else None,
            "ort_by_op_us": ort_by_op if ort_sess is not None else None}


def _ort_version() -> str:
    try:
        import onnxruntime

        return onnxruntime.__version__
    except Exception:
        return "?"


# -------------------------------------------------------------- olc kernels


def _opset_range(since: int, until: int) -> str:
    from .registration import MAX_OPSET

    return f"{since}+" if until >= MAX_OPSET else (str(since) if since == until else f"{since}-{until}")


def _types_label(types: Any) -> str:
    # ", " between types so that a long list wraps between them.
    return "; ".join(f"{c}: {', '.join(ts)}" for c, ts in types.items())


def _family_key(name: str) -> str:
    # "olc-elementwise", "olc_elementwise" and "elementwise" name the same family.
    key = name.strip().lower().replace("-", "_")
    return key[4:] if key.startswith("olc_") else key


def _registration_family(r: Any) -> str:
    return r.family or r.kernel_name.split("::")[0]


def _no_match_hint(args: argparse.Namespace, regs: Sequence[Any]) -> str:
    """Why nothing matched: the installed families, or ops named alike."""
    if not regs:
        return f" ({NO_KERNELS_MESSAGE})"
    families = sorted({_registration_family(r) for r in regs})
    if args.family and not any(_family_key(f) == _family_key(args.family) for f in families):
        return f" (installed families: {', '.join(families)})"
    if args.op:
        owners = sorted({_registration_family(r) for r in regs if r.op_type.lower() == args.op.lower()})
        if owners:
            return f" (op {args.op} is registered by {', '.join(owners)})"
        ops = sorted({r.op_type for r in regs})
        by_lower = {op.lower(): op for op in ops}
        close = difflib.get_close_matches(args.op.lower(), list(by_lower), n=3, cutoff=0.6)
        if close:
            names = [by_lower[c] for c in close]
            return f" (did you mean {', '.join(names[:-1]) + ' or ' if len(names) > 1 else ''}{names[-1]}?)"
    return ""


def cmd_kernels(args: argparse.Namespace) -> int:
    """Lists registrations. With --op/--family matching none: a message on
    stderr, ``[]`` on stdout with --json, and exit status 1."""
    import olc_core

    all_regs = list(olc_core.registered_kernels())
    if not all_regs and not (args.family or args.op):
        if args.json:
            print("[]")
        print(NO_KERNELS_MESSAGE, file=sys.stderr if args.json else sys.stdout)
        return EXIT_OK
    regs = all_regs
    if args.family:
        want = _family_key(args.family)
        regs = [r for r in regs if _family_key(_registration_family(r)) == want]
    if args.op:
        regs = [r for r in regs if r.op_type.lower() == args.op.lower()]
    if not regs:
        what = " and ".join(x for x in (args.family and f"family {args.family!r}", args.op and f"op {args.op!r}") if x)
        if args.json:
            print("[]")
        print(f"olc: no registered kernel matches {what}{_no_match_hint(args, all_regs)}", file=sys.stderr)
        return EXIT_ERROR
    regs.sort(key=lambda r: (r.domain, r.op_type, r.since_version, r.kernel_name))
    if args.json:
        print(json.dumps([
            {"domain": r.domain, "op_type": r.op_type, "kernel_name": r.kernel_name,
             "types": {k: list(v) for k, v in r.types.items()}, "inputs": list(r.inputs),
             "since_version": r.since_version, "until_version": r.until_version,
             "device": r.device, "priority": r.priority, "family": r.family}
            for r in regs], indent=2))
        return EXIT_OK
    # The types last, wrapped: one registration's list can be 300 characters.
    print(_format_table(
        ["domain", "op", "opset", "kernel", "family", "types"],
        [[r.domain, r.op_type, _opset_range(r.since_version, r.until_version), r.kernel_name, r.family or "-",
          _types_label(r.types)] for r in regs], width=TABLE_WIDTH, wrap_last=True))
    families = sorted({r.family or "-" for r in regs})
    print(f"{len(regs)} registration(s) from {len(families)} famil{'y' if len(families) == 1 else 'ies'}")
    return EXIT_OK


# ----------------------------------------------------------------- olc info


def _get(obj: Any, name: str, default: Any = None) -> Any:
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


def _plugins() -> list[dict[str, Any]]:
    from importlib.metadata import entry_points

    from .hookspecs import ENTRY_POINT_GROUP

    out = []
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        dist = getattr(ep, "dist", None)
        out.append({"name": ep.name, "module": ep.value,
                    "distribution": dist.metadata["Name"] if dist else None,
                    "version": dist.version if dist else None})
    return sorted(out, key=lambda p: p["name"])


def collect_info() -> dict[str, Any]:
    import platform

    import olc_core

    simd = str(olc_core.simd_level())
    features = {str(k): bool(v) for k, v in dict(olc_core.cpu_features()).items()}
    regs = list(olc_core.registered_kernels())
    per_family: dict[str, int] = {}
    for r in regs:
        per_family[r.family or r.kernel_name.split("::")[0]] = per_family.get(r.family or r.kernel_name.split("::")[0], 0) + 1
    params = []
    try:
        from . import tuning

        for p in tuning.list_params():
            params.append({k: _get(p, k) for k in
                           ("library", "kernel", "implementation", "dtype", "name", "value", "default")})
    except Exception as exc:  # keep `olc info` useful when the registry cannot be read
        params = [{"error": f"{type(exc).__name__}: {exc}"}]
    try:
        from importlib.metadata import version

        core_version = version("olc-core")
    except Exception:
        core_version = getattr(olc_core, "__version__", "unknown")
    return {
        "olc_core_version": core_version,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu": _cpu_model(),
        "simd_level": simd,
        "detected_simd_level": olc_core.detected_simd_level(),
        "olc_simd_cap": os.environ.get("OLC_SIMD") or None,
        "cpu_features": features,
        "caches": _cpu_caches(),
        "default_threads": olc_core.default_thread_count(),
        "plugins": _plugins(),
        "plugin_load_errors": [str(e) for e in getattr(olc_core, "plugin_load_errors", list)()],
        "kernels_per_family": per_family,
        "tuning": params,
    }


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine()


SYSFS_CPU0_CACHES = "/sys/devices/system/cpu/cpu0/cache"


def _cpu_caches(base: str = SYSFS_CPU0_CACHES) -> list[dict[str, Any]]:
    """CPU 0's caches as Linux reports them (sysfs): level, type, bytes and
    the logical CPUs sharing each; empty where sysfs has none. The
    families derive their cache-dependent defaults (GEMM blocking, Conv
    and elementwise streaming) from the same files, read by the core API's
    data_cache_bytes."""
    out: list[dict[str, Any]] = []
    try:
        entries = sorted(e for e in os.listdir(base) if e.startswith("index"))
    except OSError:
        return out
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}

    def read(d: str, name: str) -> str:
        with open(os.path.join(base, d, name)) as f:
            return f.read().strip()

    for e in entries:
        try:
            level, ctype, size = read(e, "level"), read(e, "type"), read(e, "size")
        except OSError:
            continue
        n = int(size[:-1]) * units[size[-1]] if size[-1:] in units else int(size)
        try:
            shared = 0
            for part in read(e, "shared_cpu_list").split(","):
                lo, _, hi = part.partition("-")
                shared += int(hi or lo) - int(lo) + 1
        except (OSError, ValueError):
            shared = 1
        out.append({"level": int(level), "type": ctype, "bytes": n, "shared_by": max(shared, 1)})
    return out


def _format_caches(caches: Sequence[dict[str, Any]]) -> str:
    def size(n: int) -> str:
        return f"{n >> 20} MiB" if n >= 1 << 20 and n % (1 << 20) == 0 else f"{n >> 10} KiB"

    parts = []
    for c in caches:
        if c["type"] == "Instruction":
            continue
        name = f"L{c['level']}" + ("d" if c["type"] == "Data" else "")
        parts.append(f"{name} {size(c['bytes'])}" + (f" (shared by {c['shared_by']})" if c["shared_by"] > 1 else ""))
    return ", ".join(parts)


def cmd_info(args: argparse.Namespace) -> int:
    info = collect_info()
    if args.json:
        print(json.dumps(info, indent=2, default=str))
        return EXIT_OK
    print(f"olc-core {info['olc_core_version']} (python {info['python']}, {info['platform']})")
    print(f"cpu: {info['cpu']}")
    print(f"simd level: {info['simd_level']} (detected: {info['detected_simd_level']}; "
          f"OLC_SIMD cap: {info['olc_simd_cap'] or 'not set'})")
    present = [k for k, v in info["cpu_features"].items() if v]
    absent = [k for k, v in info["cpu_features"].items() if not v]
    print(f"cpu features: {' '.join(present) or '(none)'}")
    if absent:
        print(f"  absent: {' '.join(absent)}")
    print(f"caches: {_format_caches(info['caches']) or 'unknown (no sysfs)'}")
    print(f"default threads: {info['default_threads']}")
    print()
    if info["plugins"]:
        print("plugins (entry-point group olc.kernels):")
        print(_format_table(["name", "module", "distribution", "version", "kernels"],
                            [[p["name"], p["module"], p["distribution"] or "-", p["version"] or "-",
                              _plugin_kernel_count(p, info["kernels_per_family"])] for p in info["plugins"]]))
    else:
        print(f"plugins: none; {CORE_ONLY_MESSAGE}")
    for err in info["plugin_load_errors"]:
        print(f"plugin load error: {err}")
    print()
    params = info["tuning"]
    if params and "error" in params[0]:
        print(f"tuning profile: unavailable ({params[0]['error']})")
    elif params:
        print("tuning profile:")
        print(_format_table(["library", "kernel", "implementation", "dtype", "name", "value", "default"],
                            [[p[k] if p[k] is not None else "-" for k in
                              ("library", "kernel", "implementation", "dtype", "name", "value", "default")]
                             for p in params]))
    else:
        print("tuning profile: no parameters declared")
    return EXIT_OK


def _plugin_kernel_count(plugin: dict[str, Any], per_family: dict[str, int]) -> str:
    keys = {_family_key(plugin["name"]), _family_key(plugin["module"].split(".")[0])}
    if plugin["distribution"]:
        keys.add(_family_key(plugin["distribution"]))
    n = sum(v for k, v in per_family.items() if _family_key(k) in keys)
    return str(n) if n else "-"


# ------------------------------------------------------------------ parser


RUN_EPILOG = f"""\
inputs:
  Each input is generated by its role, from its name, type and the nodes
  reading it (the role of each is printed as it is prepared):
    ids          integer ids (input_ids, *_ids, tokens, or any integer input
                 that indexes a Gather on an initializer, an embedding table):
                 [0, rows of that table), else [0, --vocab) (default {DEFAULT_VOCAB})
    mask         a name containing "mask": ones
    positions    an integer input named *position*: 0..S-1 along the last axis
    token types  token_type_ids, segment ids: zeros
    others       integers [0, {DEFAULT_INT_HIGH}); booleans 50/50; floats N(0,1), or
                 uniform in [LO, HI) with --float-range
  --feeds FILE.npz supplies named arrays (np.savez(FILE, name=array, ...));
  inputs it lacks are still generated, sized by the symbolic dimensions its
  arrays bind. --save-feeds writes the inputs used, to edit or reuse.

comparison (--compare onnxruntime):
  olc and onnxruntime agree elementwise where |olc - ort| <= atol + rtol*|ort|
  (both finite), and where NaN and infinities sit at the same places on both
  sides (infinities of the same sign); integer, bool and string outputs must
  be equal. "tol used" is the largest |olc - ort| / (atol + rtol*|ort|) over
  the finite values: 1 or less is within tolerance. Verdicts: agree;
  non-finite (the rule holds, but some values are NaN/inf on both sides and
  so not checked); DIFFER.

exit status:
  0 ok; 1 error; 2 usage error (bad option, a --dim the model's inputs do
  not use); 3 an output DIFFERs; 4 none differs but some are non-finite
"""


def _float_range(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="olc", description="optimized ONNX CPU kernels: run models, list kernels")
    p.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    sub = p.add_subparsers(dest="command", required=True)

    r = sub.add_parser("run", help="run a model (the built-in demo when MODEL is omitted)",
                       description=textwrap.fill(
                           "Runs MODEL (or the built-in demo) on seeded inputs chosen by each input's role, "
                           "prints the per-node kernel plan and, with --compare onnxruntime, the differences "
                           "and timing against onnxruntime.", 78),
                       epilog=RUN_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    r.add_argument("model", nargs="?", help="path to an .onnx file")
    r.add_argument("--threads", type=int, default=None, help="executor threads (default: the session's default)")
    r.add_argument("--compare", choices=["onnxruntime", "none"], default=None,
                   help="compare with onnxruntime (default: on for the demo when onnxruntime is installed)")
    r.add_argument("--repeat", type=int, default=20, help="timed runs per runtime for --compare (default 20; 0: no timing)")
    r.add_argument("--strict", action="store_true", help="refuse fallbacks (error when a node has no native kernel)")
    r.add_argument("--no-fusion", dest="fusion", action="store_false",
                   help="run every node on its own kernel (no fusion graph passes)")
    r.add_argument("--naive", nargs="*", metavar="FAMILY", default=None,
                   help="run ops on the families' naive (reference) kernels where they have one: every "
                        "family's, or only the families named")
    r.add_argument("--dim", action="append", default=[], metavar="NAME=VALUE",
                   help=f"size of a symbolic dimension of the inputs (default {DEFAULT_SYMBOLIC_DIM}; the demo's "
                        f"batch is 64); a name no input uses is an error; repeatable")
    r.add_argument("--shape", action="append", default=[], metavar="INPUT=D0,D1,...",
                   help="the whole shape of a generated input, for dimensions the model leaves unnamed "
                        "(which --dim cannot size); its named ones bind as --dim would; repeatable")
    r.add_argument("--seed", type=int, default=0, help="seed for the generated inputs (default 0)")
    r.add_argument("--feeds", metavar="FILE.npz",
                   help="take inputs from these named arrays (dtype and shape must fit the model); "
                        "the others are generated")
    r.add_argument("--save-feeds", metavar="FILE.npz", help="write the inputs used to FILE.npz")
    r.add_argument("--vocab", type=int, default=None, metavar="N",
                   help=f"generated ids are < N when no embedding table gives the bound (default {DEFAULT_VOCAB}), "
                        f"and never above a table's row count")
    r.add_argument("--float-range", type=_float_range, nargs=2, metavar=("LO", "HI"), default=None,
                   help="generate floats uniform in [LO, HI) instead of N(0,1)")
    r.add_argument("--rtol", type=float, default=1e-4,
                   help="relative tolerance (default 1e-4): olc and onnxruntime agree where "
                        "|olc - ort| <= atol + rtol*|ort| and NaN/inf match")
    r.add_argument("--atol", type=float, default=1e-5,
                   help="absolute tolerance (default 1e-5), the atol of the same rule")
    r.add_argument("--json", dest="json_out", metavar="PATH", help="also write the results as JSON to PATH")
    r.add_argument("--profile", action="store_true",
                   help="time every node over --repeat runs (at least 5) and print the op types and nodes "
                        "by share of run time; with --compare onnxruntime, onnxruntime's profile beside it")
    r.add_argument("--trace", metavar="PATH",
                   help="with --profile: write olc's profile as Chrome trace-event JSON (the format "
                        "onnxruntime's profiler writes) to PATH")
    r.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    r.set_defaults(func=cmd_run)

    k = sub.add_parser("kernels", help="list the registered kernels")
    k.add_argument("--family", help="only this family (elementwise, olc-elementwise, ...)")
    k.add_argument("--op", help="only this operator (any case)")
    k.add_argument("--json", action="store_true",
                   help="JSON output (a filter matching nothing prints [] and exits 1, as without --json)")
    k.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    k.set_defaults(func=cmd_kernels)

    i = sub.add_parser("info", help="SIMD level, CPU features, threads, plugins, tuning")
    i.add_argument("--json", action="store_true", help="JSON output")
    i.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    i.set_defaults(func=cmd_info)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "threads", None) is not None and args.threads < 1:
        parser.error("--threads must be >= 1")
    if getattr(args, "repeat", 0) < 0:
        parser.error("--repeat must be >= 0")
    if getattr(args, "seed", 0) < 0:
        parser.error("--seed must be >= 0")
    if getattr(args, "vocab", None) is not None and args.vocab < 1:
        parser.error("--vocab must be >= 1")
    if getattr(args, "float_range", None) and not args.float_range[0] < args.float_range[1]:
        parser.error("--float-range: LO must be below HI")
    if getattr(args, "rtol", 0) < 0 or getattr(args, "atol", 0) < 0:
        parser.error("--rtol and --atol must be >= 0")
    try:
        with _session_warnings_as_progress():
            return int(args.func(args))
    except CliUsageError as exc:
        print(f"olc: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("olc: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # stdout closed early (olc ... | head): not an error; keep the interpreter
        # from complaining again when it flushes stdout at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except Exception as exc:
        if args.debug:
            raise
        print(f"olc: error: {_describe(exc)}", file=sys.stderr)
        return EXIT_ERROR


def _describe(exc: BaseException) -> str:
    if isinstance(exc, CliError):
        return str(exc)
    from olc_core import OlcError  # the package is loaded: this module lives in it

    if isinstance(exc, OlcError):
        return str(exc)
    return f"{type(exc).__name__}: {exc} (run with --debug for the traceback)"


if __name__ == "__main__":
    sys.exit(main())
