"""The kernels olc-core itself provides, registered through the same hook as
any family's (the plugin manager always loads this module, also with
``OLC_DISABLE_PLUGIN_AUTOLOAD``: these ops are part of the runtime).

- Reshape, Flatten, Squeeze, Unsqueeze, Identity and Dropout (inference)
  change only a tensor's shape: their output is a zero-copy view of the
  input (``view_output`` in ``olc/kernel_abi.h``).
- Shape and Size read only a shape.
- The sequence operators (``sequences.py``) are Python kernels over lists.

They live in olc-core rather than a family because every real graph has
them between the nodes a family runs (the glue that computes and applies
shapes) and because a view needs the runtime's own buffer bookkeeping.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import _native, sequences
from .hookspecs import hookimpl
from .registration import MAX_OPSET, KernelRegistration

FAMILY = "olc-core"

# Every element type a native tensor can hold: the views and Shape/Size read
# no element, so each type costs nothing.
ANY_TENSOR = (
    "float32", "float64", "float16", "bfloat16",
    "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool",
    "float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz", "uint4", "int4",
)
INT64 = ("int64",)
FLOATS = ("float32", "float64", "float16", "bfloat16")


def _dropout_supports(node: Any) -> str | None:
    # An inference Dropout is the identity; with a training_mode input the
    # node may draw a random mask, which olc does not.
    if len(node.input) >= 3 and node.input[2]:
        return "a training_mode input may ask for a random mask (inference Dropout only)"
    return None


def _reg(op: str, since: int, inputs: tuple[str | None, ...], outputs: tuple[str | None, ...],
         types: Mapping[str, tuple[str, ...]], description: str, until: int = MAX_OPSET,
         supports: Any = None) -> KernelRegistration:
    return KernelRegistration(
        domain="ai.onnx", op_type=op, kernel_name=f"olc_core::{op}", types=types, inputs=inputs,
        outputs=outputs, factory=_native._builtin_vtable(op), since_version=since, until_version=until,
        family=FAMILY, description=description, supports=supports,
    )


def registrations() -> list[KernelRegistration]:
    view = "a zero-copy view of input 0"
    t_any = {"T": ANY_TENSOR}
    return [
        _reg("Reshape", 5, ("T", "I"), ("T",), {"T": ANY_TENSOR, "I": INT64}, view),
        _reg("Flatten", 1, ("T",), ("T",), t_any, view),
        # Squeeze/Unsqueeze: axes an attribute before opset 13, an input from 13.
        _reg("Squeeze", 1, ("T",), ("T",), t_any, view, until=12),
        _reg("Squeeze", 13, ("T", "I"), ("T",), {"T": ANY_TENSOR, "I": INT64}, view),
        _reg("Unsqueeze", 1, ("T",), ("T",), t_any, view, until=12),
        _reg("Unsqueeze", 13, ("T", "I"), ("T",), {"T": ANY_TENSOR, "I": INT64}, view),
        _reg("Identity", 1, ("T",), ("T",), t_any, view),
        # From opset 10 the mask is bool; from 12 ratio and training_mode are inputs.
        _reg("Dropout", 10, ("T", None, None), ("T", "B"), {"T": FLOATS, "B": ("bool",)},
             view + "; the mask all true", supports=_dropout_supports),
        _reg("Shape", 1, ("T",), ("I",), {"T": ANY_TENSOR, "I": INT64}, "the input's shape (start/end from opset 15)"),
        _reg("Size", 1, ("T",), ("I",), {"T": ANY_TENSOR, "I": INT64}, "the input's element count"),
        *sequences.registrations(),
    ]


@hookimpl
def olc_register_kernels() -> list[KernelRegistration]:
    return registrations()
