"""The one table of olc-ml's kernels: registration (plugin.py), the tests and
the benchmarks read it.

Numeric operators run on native kernels (``csrc/``), registered directly for
their ai.onnx.ml nodes; attributes the kernel ABI cannot carry (STRINGS,
TENSOR) are restated by a ``native_attributes`` hook (attributes.py).
Operators over strings and maps, which a native kernel cannot see, run on
Python kernels (python_kernels.py); a classifier with string class labels
runs its native kernel on class indices inside a Python kernel that maps
them to the labels.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from olc_core.registration import MAX_OPSET

ML_DOMAIN = "ai.onnx.ml"
FAMILY = "olc-ml"

# Branch codes of the native engine (csrc/tree_engine.h, enum Mode), for
# the v1-3 nodes_modes strings.
MODE_CODES = {"BRANCH_LEQ": 0, "BRANCH_LT": 1, "BRANCH_GTE": 2, "BRANCH_GT": 3, "BRANCH_EQ": 4, "BRANCH_NEQ": 5,
              "LEAF": 7}

NUMERIC = ("float32", "float64", "int64", "int32")
FLOAT = ("float32",)


def _no_string_labels(node: Any) -> str | None:
    if any(a.name == "classlabels_strings" and len(a.strings) for a in node.attribute):
        return "string class labels (the Python kernel maps class indices to them)"
    return None


def _string_labels_only(node: Any) -> str | None:
    return None if _no_string_labels(node) else "int64 class labels (the native kernel)"


@dataclass(frozen=True)
class MlOp:
    """One registration: ``kind`` "native" (a vtable of csrc/, restated by
    the ``attributes`` hook of attributes.py) or "python" (the factory of
    python_kernels.py named ``python``)."""

    op: str
    since: int
    until: int
    kind: str
    types: Mapping[str, tuple[str, ...]]
    inputs: tuple[str | None, ...]
    outputs: tuple[str | None, ...]
    description: str
    attributes: str = "plain"        # attributes.py hook (native)
    python: str = ""                 # python_kernels.py factory (python)
    supports: Callable[[Any], str | None] | None = field(default=None, compare=False)
    priority: int = 0
    name: str = ""                   # kernel name suffix, default op

    @property
    def kernel_name(self) -> str:
        return f"olc_ml::{self.name or self.op}"


ML_OPS: tuple[MlOp, ...] = (
    MlOp("TreeEnsembleRegressor", 1, MAX_OPSET, "native", {"T": NUMERIC, "Y": FLOAT}, ("T",), ("Y",),
         "compiled breadth-first forest, row blocks, row/tree parallel", attributes="tree_ensemble_v3"),
    MlOp("TreeEnsembleClassifier", 1, MAX_OPSET, "native", {"T": NUMERIC, "L": ("int64",), "Y": FLOAT}, ("T",), ("L", "Y"),
         "compiled breadth-first forest, row blocks, row/tree parallel", attributes="tree_ensemble_v3",
         supports=_no_string_labels),
    MlOp("TreeEnsembleClassifier", 1, MAX_OPSET, "python", {"T": NUMERIC, "L": ("string",), "Y": FLOAT}, ("T",), ("L", "Y"),
         "the native forest on class indices, mapped to the string labels", python="string_labels",
         supports=_string_labels_only, priority=-1, name="TreeEnsembleClassifierStrings"),
    MlOp("TreeEnsemble", 5, MAX_OPSET, "native", {"T": ("float32", "float64", "float16")}, ("T",), ("T",),
         "compiled breadth-first forest (BRANCH_MEMBER sets), row blocks, row/tree parallel",
         attributes="tree_ensemble_v5"),
)


def kernel_name(op: str) -> str:
    return f"olc_ml::{op}"
