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


STRING = ("string",)
INT64 = ("int64",)
LABEL_TYPES = ("string", "int64", "float32", "int32", "int16", "float64")


def _native_and_strings(op: str, types: Mapping[str, tuple[str, ...]], description: str,
                        attributes: str = "plain") -> tuple[MlOp, MlOp]:
    """A classifier: native with int64 labels, Python with string labels."""
    return (
        MlOp(op, 1, MAX_OPSET, "native", {**types, "L": INT64}, ("T",), ("L", "Y"), description,
             attributes=attributes, supports=_no_string_labels),
        MlOp(op, 1, MAX_OPSET, "python", {**types, "L": STRING}, ("T",), ("L", "Y"),
             "the native kernel on class indices, mapped to the string labels", python="string_labels",
             supports=_string_labels_only, priority=-1, name=op + "Strings"),
    )


ML_OPS: tuple[MlOp, ...] = (
    # Tree ensembles: csrc/tree_engine.*
    MlOp("TreeEnsembleRegressor", 1, MAX_OPSET, "native", {"T": NUMERIC, "Y": FLOAT}, ("T",), ("Y",),
         "compiled breadth-first forest, row blocks, row/tree parallel", attributes="tree_ensemble_v3"),
    *_native_and_strings("TreeEnsembleClassifier", {"T": NUMERIC, "Y": FLOAT},
                         "compiled breadth-first forest, row blocks, row/tree parallel", "tree_ensemble_v3"),
    MlOp("TreeEnsemble", 5, MAX_OPSET, "native", {"T": ("float32", "float64", "float16")}, ("T",), ("T",),
         "compiled breadth-first forest (BRANCH_MEMBER sets), row blocks, row/tree parallel",
         attributes="tree_ensemble_v5"),
    # Linear models and SVMs: csrc/linear_adapter.cc on the per-ISA kernels.
    MlOp("LinearRegressor", 1, MAX_OPSET, "native", {"T": NUMERIC, "Y": FLOAT}, ("T",), ("Y",),
         "X W^T + b on per-ISA dot kernels, row parallel"),
    *_native_and_strings("LinearClassifier", {"T": NUMERIC, "Y": FLOAT},
                         "X W^T + b on per-ISA dot kernels, row parallel"),
    MlOp("SVMRegressor", 1, MAX_OPSET, "native", {"T": NUMERIC, "Y": FLOAT}, ("T",), ("Y",),
         "kernel rows on per-ISA dot / distance kernels, row parallel"),
    *_native_and_strings("SVMClassifier", {"T": NUMERIC, "Y": FLOAT},
                         "kernel rows on per-ISA dot / distance kernels, pairwise votes, probabilities"),
    # Preprocessing: csrc/preprocess_adapter.cc (numbers), python_kernels.py (strings, maps).
    MlOp("Scaler", 1, MAX_OPSET, "native", {"T": NUMERIC, "Y": FLOAT}, ("T",), ("Y",), "(x - offset) * scale"),
    MlOp("Normalizer", 1, MAX_OPSET, "native", {"T": NUMERIC, "Y": FLOAT}, ("T",), ("Y",), "rows by MAX, L1 or L2"),
    MlOp("Binarizer", 1, MAX_OPSET, "native", {"T": NUMERIC}, ("T",), ("T",), "x > threshold"),
    MlOp("Imputer", 1, MAX_OPSET, "native", {"T": NUMERIC}, ("T",), ("T",), "replaced values (or NaN) imputed"),
    MlOp("FeatureVectorizer", 1, MAX_OPSET, "native", {"Y": FLOAT}, (None,), ("Y",),
         "the inputs' columns side by side"),
    MlOp("ArrayFeatureExtractor", 1, MAX_OPSET, "native", {"T": NUMERIC, "I": INT64}, ("T", "I"), ("T",),
         "X[..., Y]"),
    MlOp("ArrayFeatureExtractor", 1, MAX_OPSET, "python", {"T": STRING, "I": INT64}, ("T", "I"), ("T",),
         "X[..., Y] over strings", python="array_feature_extractor_strings", name="ArrayFeatureExtractorStrings"),
    MlOp("OneHotEncoder", 1, MAX_OPSET, "native", {"T": NUMERIC, "Y": FLOAT}, ("T",), ("Y",),
         "a row of categories per value (numbers truncated to int64)"),
    MlOp("OneHotEncoder", 1, MAX_OPSET, "python", {"T": STRING, "Y": FLOAT}, ("T",), ("Y",),
         "a row of categories per string", python="one_hot_strings", name="OneHotEncoderStrings"),
    MlOp("LabelEncoder", 1, MAX_OPSET, "python", {"T": LABEL_TYPES}, ("T",), (None,),
         "sorted keys, lookups by binary search over whole arrays", python="label_encoder"),
    MlOp("CategoryMapper", 1, MAX_OPSET, "python", {"T": ("string", "int64")}, ("T",), (None,),
         "sorted keys, lookups by binary search over whole arrays", python="category_mapper"),
    MlOp("ZipMap", 1, MAX_OPSET, "python", {"T": FLOAT}, ("T",), (None,),
         "each row of scores as a dict {label: score} (a sequence of maps)", python="zip_map"),
    MlOp("DictVectorizer", 1, MAX_OPSET, "python", {}, (None,), (None,),
         "a map as a row of the vocabulary's values", python="dict_vectorizer"),
    MlOp("CastMap", 1, MAX_OPSET, "python", {}, (None,), (None,),
         "a map as a [1, n] tensor (DENSE or SPARSE)", python="cast_map"),
)


def kernel_name(op: str) -> str:
    return f"olc_ml::{op}"
