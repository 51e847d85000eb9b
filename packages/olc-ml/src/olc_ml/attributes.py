"""Attributes of ai.onnx.ml nodes restated for the native kernels.

The kernel ABI carries INT, FLOAT, STRING, INTS and FLOATS attributes; the
ml operators also use STRINGS (``nodes_modes``), TENSOR (``*_as_tensor``,
TreeEnsemble's splits and weights) and string labels. Each function here is
a registration's ``native_attributes(node, input_shapes)`` hook: it returns
the node's attributes as the kernel reads them (modes as integer codes,
every float tensor as FLOATS in float64, so nothing is rounded), plus the
input's feature count as ``n_features`` when inference knows it, so a
branch reading a feature the input lacks is an error at session creation.
A value it cannot restate is a ValueError, which the session reports as an
OlcError naming the node.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

import olc_core
from olc_core.session import native_attribute

from . import manifest

Attribute = tuple[str, int, Any]

_INTS = onnx.AttributeProto.INTS
_FLOATS = onnx.AttributeProto.FLOATS
_INT = onnx.AttributeProto.INT


def _ext() -> Any:
    return olc_core.load_extension("olc_ml._ext")


def mode_codes(a: onnx.AttributeProto) -> np.ndarray:
    """nodes_modes (STRINGS) as Mode codes, read from the serialized
    attribute in C++ (a list of millions of Python bytes objects costs
    seconds)."""
    names = list(manifest.MODE_CODES)
    codes = np.asarray(_ext().string_codes(a.SerializeToString(), [n.encode() for n in names]), np.int64)
    bad = np.flatnonzero(codes < 0)
    if bad.size:
        mode = a.strings[int(bad[0])].decode(errors="replace")
        raise ValueError(f"nodes_modes[{int(bad[0])}] is {mode!r}, not a known mode ({', '.join(names)})")
    return np.asarray([manifest.MODE_CODES[n] for n in names], np.int64)[codes]


def _floats(name: str, values: np.ndarray) -> Attribute:
    return name, _FLOATS, np.ascontiguousarray(values, dtype=np.float64).reshape(-1)


def _n_features(shapes: Sequence[Any]) -> list[Attribute]:
    shape = shapes[0] if shapes else None
    if shape and isinstance(shape[-1], int) and shape[-1] >= 0:
        return [("n_features", _INT, int(shape[-1]))]
    return []


def tree_ensemble_v3(node: onnx.NodeProto, shapes: Sequence[Any]) -> list[Attribute]:
    """TreeEnsembleRegressor / TreeEnsembleClassifier (ai.onnx.ml 1-4)."""
    out: list[Attribute] = []
    given: dict[str, str] = {}
    for a in node.attribute:
        key = a.name
        if key in ("nodes_hitrates", "nodes_hitrates_as_tensor"):
            continue  # hints for a runtime's layout, never read
        if key == "nodes_modes":
            out.append(("nodes_modes", _INTS, mode_codes(a)))
            continue
        if key.endswith("_as_tensor"):
            base = key[: -len("_as_tensor")]
            if base not in ("nodes_values", "base_values", "target_weights", "class_weights"):
                raise ValueError(f"attribute {key!r} is not one of {node.op_type}'s")
            values = numpy_helper.to_array(a.t)
            if values.dtype.kind != "f":
                raise ValueError(f"attribute {key!r} must hold floats, not {values.dtype}")
            key = base
            entry = _floats(base, values)
        else:
            entry = native_attribute(a)
        if key in given:
            raise ValueError(f"attributes {given[key]} and {a.name} are both set")
        given[key] = a.name
        out.append(entry)
    return out + _n_features(shapes)


def tree_ensemble_v5(node: onnx.NodeProto, shapes: Sequence[Any]) -> list[Attribute]:
    """TreeEnsemble (ai.onnx.ml 5): the tensors as FLOATS (modes as INTS)."""
    out: list[Attribute] = []
    for a in node.attribute:
        if a.name == "nodes_hitrates":
            continue
        if a.type == onnx.AttributeProto.TENSOR:
            values = numpy_helper.to_array(a.t)
            if a.name == "nodes_modes":
                if values.dtype.kind not in "iu":
                    raise ValueError(f"nodes_modes must hold integers (uint8), not {values.dtype}")
                out.append(("nodes_modes", _INTS, np.ascontiguousarray(values, dtype=np.int64).reshape(-1)))
            elif a.name in ("nodes_splits", "leaf_weights", "membership_values"):
                if values.dtype.kind != "f":
                    raise ValueError(f"attribute {a.name!r} must hold floats, not {values.dtype}")
                out.append(_floats(a.name, values))
            else:
                raise ValueError(f"attribute {a.name!r} is not one of TreeEnsemble's")
        else:
            out.append(native_attribute(a))
    return out + _n_features(shapes)


def plain(node: onnx.NodeProto, shapes: Sequence[Any]) -> list[Attribute]:
    """The attributes as they are, plus ``n_features``."""
    return [native_attribute(a) for a in node.attribute] + _n_features(shapes)
