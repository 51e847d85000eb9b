"""Helpers for kernel tests, olc's families' and a third party's.

- :func:`guarded` copies an array into memory whose last byte (or first,
  ``at="start"``) sits against an inaccessible page: a kernel that reads or
  writes one byte past the end (or before the start) faults, and the test
  process dies instead of passing on garbage.
- :func:`simd_levels`, :func:`one_node_model` and :func:`run_on_every_level`
  run a one-node model at every SIMD level this machine has, so a test can
  compare each level with an oracle (and with each other).
"""

from __future__ import annotations

import ctypes
import mmap
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from . import simd as _simd

__all__ = ["guarded", "one_node_model", "run_on_every_level", "simd_levels"]

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
_libc.mprotect.restype = ctypes.c_int


def guarded(values: Any, dtype: Any = None, at: str = "end") -> np.ndarray:
    """A C-contiguous copy of ``values`` (any array-like; ``dtype`` converts)
    placed so that its last byte is the last byte before a ``PROT_NONE``
    page (``at="end"``) or its first byte the first after one
    (``at="start"``). An empty array gets the same placement (a kernel must
    not touch it at all). The memory lives as long as the array."""
    if at not in ("end", "start"):
        raise ValueError(f"at must be 'end' or 'start', got {at!r}")
    # np.array, not np.ascontiguousarray: that one turns a 0-d array into 1-d.
    src = np.array(values, dtype=dtype, order="C")
    page = mmap.PAGESIZE
    data_pages = max(1, -(-src.nbytes // page))
    buf = mmap.mmap(-1, (data_pages + 1) * page, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    raw = np.frombuffer(buf, dtype=np.uint8)
    base = raw.ctypes.data
    if at == "end":
        guard, offset = base + data_pages * page, data_pages * page - src.nbytes
    else:
        guard, offset = base, page
    arr = np.frombuffer(buf, dtype=src.dtype, count=src.size, offset=offset).reshape(src.shape)
    arr[...] = src
    if _libc.mprotect(guard, page, 0) != 0:
        raise OSError(ctypes.get_errno(), "mprotect failed")
    return arr


def simd_levels() -> list[str]:
    """Every SIMD level a kernel may run at on this machine, lowest first
    (levels above the detected one, or above an ``OLC_SIMD`` cap, excluded)."""
    return list(_simd.SIMD_LEVELS[: _simd.SIMD_LEVELS.index(_simd.simd_level()) + 1])


def one_node_model(
    op_type: str,
    inputs: Sequence[tuple[str, int, Sequence[int | str] | None]],
    outputs: Sequence[tuple[str, int, Sequence[int | str] | None]],
    attributes: Mapping[str, Any] | None = None,
    opset: int = 21,
    domain: str = "",
    initializers: Mapping[str, np.ndarray] | None = None,
) -> Any:
    """A model of one node: ``inputs``/``outputs`` as (name, TensorProto
    element type, shape or None); an input named in ``initializers`` becomes
    a constant; a name "" is an absent optional input."""
    import onnx
    from onnx import helper, numpy_helper

    inits = dict(initializers or {})
    node = helper.make_node(op_type, [n for n, _, _ in inputs], [n for n, _, _ in outputs], name="node",
                            domain=domain, **dict(attributes or {}))
    graph = helper.make_graph(
        [node], op_type,
        [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs if n and n not in inits],
        [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs],
        initializer=[numpy_helper.from_array(np.asarray(v), n) for n, v in inits.items()],
    )
    opsets = [helper.make_opsetid("", opset)] if domain in ("", "ai.onnx") else [
        helper.make_opsetid("", 21), helper.make_opsetid(domain, opset)]
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = min(onnx.IR_VERSION, 10)
    return model


def run_on_every_level(
    model: Any, feeds: Mapping[str, Any], threads: int = 1, strict: bool = True,
    expected_kernel: str | None = None, **session_options: Any,
) -> dict[str, list[Any]]:
    """The model's outputs at each of :func:`simd_levels` (sessions made
    under ``simd_cap``). With ``expected_kernel``, each run must have used
    that kernel (an ``AssertionError`` otherwise)."""
    from .session import Session

    results: dict[str, list[Any]] = {}
    for level in simd_levels():
        with _simd.simd_cap(level):
            session = Session(model, threads=threads, strict=strict, record_usage=True, **session_options)
            results[level] = session.run(None, dict(feeds))
        if expected_kernel is not None and expected_kernel not in session.kernel_usage():
            raise AssertionError(f"at {level}: expected {expected_kernel} to run, the run used "
                                 f"{session.kernel_usage()}")
    return results
