"""The sequence operators (opset 11 and later) as olc-core kernels.

A sequence value is a Python list of numpy arrays; the runtime passes it
between steps as an object, like any value that is not a tensor. These
kernels are Python steps: their work is list bookkeeping, and the numeric
part (ConcatFromSequence, SplitToSequence) is one numpy call or a set of
slices. A sequence is never changed in place: SequenceInsert and
SequenceErase return a new list holding the same arrays (values are
immutable, so sharing the arrays is safe), and SplitToSequence returns
views of its input.

Errors name the node: a position outside the sequence, a tensor whose
element type differs from the sequence's, a value that is not a sequence
where one is expected, shapes ConcatFromSequence cannot join, split sizes
that do not add up.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, NoReturn

import numpy as np
from onnx import helper

from .registration import MAX_OPSET, TENSOR_TYPES, KernelRegistration

FAMILY = "olc-core"
ALL_TYPES = TENSOR_TYPES
INDEX_TYPES = ("int32", "int64")

Kernel = Callable[..., list[Any]]


def _elem(dtype: np.dtype) -> Any:
    """The ONNX element type a numpy dtype stands for: every string dtype
    (object, unicode and bytes arrays of any width) is the one string type."""
    return "string" if dtype.kind in "OUS" else dtype


class _Node:
    """The label and attributes of one node, and its error helper."""

    def __init__(self, info: Any):
        self.label = f"node '{info.name}' ({info.op_type})"
        self.attrs = dict(info.attributes)

    def fail(self, why: str) -> NoReturn:
        from .control_flow import _fail

        raise _fail(f"{self.label}: {why}")

    def sequence(self, value: Any, what: str = "input 0") -> list[Any]:
        if isinstance(value, (list, tuple)):
            return list(value)
        kind = f"a tensor of shape {list(value.shape)}" if isinstance(value, np.ndarray) else f"a {type(value).__name__}"
        self.fail(f"{what} must be a sequence, got {kind}")

    def tensor(self, value: Any, what: str) -> np.ndarray:
        if not isinstance(value, np.ndarray):
            self.fail(f"{what} must be a tensor, got a {type(value).__name__}")
        return value

    def position(self, value: Any, length: int, insert: bool) -> int:
        """A position in a sequence of ``length`` elements, made non-negative:
        in [-length, length] to insert, in [-length, length - 1] otherwise."""
        p = self.tensor(value, "the position")
        if p.size != 1 or p.dtype.kind not in "iu":
            self.fail(f"the position must be one int32 or int64 value, got {p.dtype} of shape {list(p.shape)}")
        pos = int(p.reshape(-1)[0])
        high = length if insert else length - 1
        if not -length <= pos <= high:
            if length == 0 and not insert:
                self.fail(f"position {pos} is out of range: the sequence is empty")
            self.fail(f"position {pos} is out of range for a sequence of {length} element(s) "
                      f"(valid: {-length} to {high})")
        return pos + length if pos < 0 else pos

    def same_dtype(self, items: Sequence[Any], what: str = "the sequence") -> None:
        first = None
        for k, x in enumerate(items):
            x = self.tensor(x, f"element {k} of {what}")
            if first is None:
                first = _elem(x.dtype)
            elif _elem(x.dtype) != first:
                self.fail(f"mixed element types in {what}: element 0 is {first}, element {k} is {_elem(x.dtype)}")

    def axis(self, axis: int, rank: int, what: str) -> int:
        if not -rank <= axis < rank:
            self.fail(f"axis {axis} is outside [{-rank}, {rank - 1}] for {what}")
        return axis + rank if axis < 0 else axis


def sequence_empty(info: Any) -> Kernel:
    node = _Node(info)
    elem = int(node.attrs.get("dtype", 1))
    try:
        helper.tensor_dtype_to_np_dtype(elem)
    except Exception as exc:  # noqa: BLE001 - reported with the node's name
        raise ValueError(f"attribute 'dtype' is {elem}, not a tensor element type") from exc

    def run() -> list[Any]:
        return [[]]

    return run


def sequence_construct(info: Any) -> Kernel:
    node = _Node(info)

    def run(*tensors: Any) -> list[Any]:
        items = [node.tensor(t, f"input {k}") for k, t in enumerate(tensors)]
        node.same_dtype(items, "the inputs")
        return [items]

    return run


def sequence_insert(info: Any) -> Kernel:
    node = _Node(info)

    def run(seq: Any, tensor: Any, position: Any = None) -> list[Any]:
        items = node.sequence(seq)
        t = node.tensor(tensor, "input 1 (the tensor)")
        if items:
            have = _elem(node.tensor(items[0], "element 0 of the sequence").dtype)
            if have != _elem(t.dtype):
                node.fail(f"cannot insert a {_elem(t.dtype)} tensor into a sequence of {have} tensors")
        pos = len(items) if position is None else node.position(position, len(items), insert=True)
        items.insert(pos, t)
        return [items]

    return run


def sequence_at(info: Any) -> Kernel:
    node = _Node(info)

    def run(seq: Any, position: Any) -> list[Any]:
        items = node.sequence(seq)
        return [items[node.position(position, len(items), insert=False)]]

    return run


def sequence_erase(info: Any) -> Kernel:
    node = _Node(info)

    def run(seq: Any, position: Any = None) -> list[Any]:
        items = node.sequence(seq)
        if position is None:
            if not items:
                node.fail("cannot erase from an empty sequence")
            pos = len(items) - 1
        else:
            pos = node.position(position, len(items), insert=False)
        del items[pos]
        return [items]

    return run


def sequence_length(info: Any) -> Kernel:
    node = _Node(info)

    def run(seq: Any) -> list[Any]:
        return [np.array(len(node.sequence(seq)), np.int64)]

    return run


def concat_from_sequence(info: Any) -> Kernel:
    node = _Node(info)
    if "axis" not in node.attrs:
        raise ValueError("attribute 'axis' is required")
    axis = int(node.attrs["axis"])
    new_axis = int(node.attrs.get("new_axis", 0))
    if new_axis not in (0, 1):
        raise ValueError(f"attribute 'new_axis' is {new_axis}; it is 0 or 1")

    def run(seq: Any) -> list[Any]:
        items = node.sequence(seq)
        if not items:
            node.fail("the sequence is empty: there is nothing to concatenate")
        node.same_dtype(items)
        rank = items[0].ndim
        for k, x in enumerate(items):
            if x.ndim != rank:
                node.fail(f"element {k} has rank {x.ndim}, element 0 rank {rank}")
        if new_axis:
            a = node.axis(axis, rank + 1, f"stacking rank-{rank} tensors along a new axis")
            for k, x in enumerate(items):
                if x.shape != items[0].shape:
                    node.fail(f"with new_axis=1 every element needs the same shape: element 0 is "
                              f"{list(items[0].shape)}, element {k} is {list(x.shape)}")
            return [np.stack(items, axis=a)]
        if rank == 0:
            node.fail("the elements are scalars: concatenating them needs new_axis=1")
        a = node.axis(axis, rank, f"rank-{rank} elements")
        for k, x in enumerate(items):
            if x.shape[:a] + x.shape[a + 1:] != items[0].shape[:a] + items[0].shape[a + 1:]:
                node.fail(f"element {k} has shape {list(x.shape)}, element 0 {list(items[0].shape)}: they may "
                          f"differ only along axis {a}")
        return [np.concatenate(items, axis=a)]

    return run


def split_to_sequence(info: Any) -> Kernel:
    node = _Node(info)
    axis = int(node.attrs.get("axis", 0))
    keepdims = int(node.attrs.get("keepdims", 1))

    def run(tensor: Any, split: Any = None) -> list[Any]:
        x = node.tensor(tensor, "input 0")
        if x.ndim == 0:
            node.fail("the input is a scalar: there is no axis to split")
        a = node.axis(axis, x.ndim, f"the rank-{x.ndim} input")
        dim = x.shape[a]
        prefix = (slice(None),) * a
        if split is None:
            if keepdims:
                return [[x[prefix + (slice(i, i + 1),)] for i in range(dim)]]
            return [[x[prefix + (i, ...)] for i in range(dim)]]
        s = node.tensor(split, "input 1 (split)")
        if s.dtype.kind not in "iu":
            node.fail(f"split must be int32 or int64, got {s.dtype}")
        if s.ndim == 0:
            size = int(s)
            if size <= 0:
                node.fail(f"a scalar split must be positive, got {size}")
            sizes = [size] * (dim // size) + ([dim % size] if dim % size else [])
        elif s.ndim == 1:
            sizes = [int(v) for v in s]
            if any(v < 0 for v in sizes):
                node.fail(f"split sizes must not be negative, got {sizes}")
            if sum(sizes) != dim:
                node.fail(f"split sizes {sizes} add up to {sum(sizes)}, the input has {dim} along axis {a}")
        else:
            node.fail(f"split must be a scalar or 1-D, got shape {list(s.shape)}")
        pieces, start = [], 0
        for size in sizes:
            pieces.append(x[prefix + (slice(start, start + size),)])
            start += size
        return [pieces]

    return run


def identity(info: Any) -> Kernel:
    def run(value: Any) -> list[Any]:
        return [value]

    return run


def _reg(op: str, factory: Any, inputs: tuple[str | None, ...], outputs: tuple[str | None, ...],
         types: Mapping[str, tuple[str, ...]], description: str, since: int = 11, priority: int = 0,
         name: str = "") -> KernelRegistration:
    return KernelRegistration(
        domain="ai.onnx", op_type=op, kernel_name=f"olc_core::{name or op}", types=types, inputs=inputs,
        outputs=outputs, factory=factory, since_version=since, until_version=MAX_OPSET, family=FAMILY,
        description=description, priority=priority,
    )


def registrations() -> list[KernelRegistration]:
    """Sequence inputs and outputs take no constraint (a constraint names a
    tensor element type); the kernels check what they receive."""
    t, i = {"T": ALL_TYPES}, {"I": INDEX_TYPES}
    return [
        _reg("SequenceEmpty", sequence_empty, (), (None,), {}, "an empty sequence"),
        _reg("SequenceConstruct", sequence_construct, ("T",), (None,), t, "a sequence of the inputs (no copy)"),
        _reg("SequenceInsert", sequence_insert, (None, "T", "I"), (None,), {**t, **i},
             "a new sequence with the tensor inserted (no copy)"),
        _reg("SequenceAt", sequence_at, (None, "I"), (None,), i, "the element at a position"),
        _reg("SequenceErase", sequence_erase, (None, "I"), (None,), i, "a new sequence without one element"),
        _reg("SequenceLength", sequence_length, (None,), ("L",), {"L": ("int64",)}, "the element count"),
        _reg("ConcatFromSequence", concat_from_sequence, (None,), (None,), {},
             "numpy concatenate (new_axis=0) or stack (new_axis=1)"),
        _reg("SplitToSequence", split_to_sequence, ("T", "I"), (None,), {**t, **i},
             "views of the input along the axis"),
        # Identity of a value that is not a tensor of a known element type (a
        # sequence, an optional: exported Loop bodies pass sequences through
        # Identity). Below the native view's priority, so a tensor takes that.
        _reg("Identity", identity, (None,), (None,), {}, "the input value itself (sequences, optionals)",
             since=1, priority=-1, name="IdentityValue"),
    ]
