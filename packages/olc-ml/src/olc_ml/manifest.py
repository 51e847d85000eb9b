"""The one table of olc-ml's kernels: registration (plugin.py), the graph
pass (passes.py), the tests and the benchmarks read it.

Each operator of ai.onnx.ml is restated by the graph pass as the same
operator in ``RESTATED_DOMAIN`` with attributes the native ABI carries
(``nodes_modes`` as integer codes, ``*_as_tensor`` as float64 bit patterns);
the native kernel is registered for that domain.
"""

from __future__ import annotations

from dataclasses import dataclass

ML_DOMAIN = "ai.onnx.ml"
RESTATED_DOMAIN = "olc.ml"
FAMILY = "olc-ml"

# Comparison codes of the restated node (csrc/tree_engine.h, enum Mode).
MODE_CODES = {"BRANCH_LEQ": 0, "BRANCH_LT": 1, "BRANCH_GTE": 2, "BRANCH_GT": 3, "BRANCH_EQ": 4, "BRANCH_NEQ": 5,
              "LEAF": 6}

INPUT_TYPES = ("float32", "float64", "int64", "int32")


@dataclass(frozen=True)
class MlOp:
    op: str
    since: int        # ai.onnx.ml opsets the pass restates
    until: int
    weights: str      # prefix of the leaf weight attributes
    outputs: tuple[str, ...]


ML_OPS: tuple[MlOp, ...] = (
    MlOp("TreeEnsembleRegressor", 1, 4, "target_", ("Y",)),
    MlOp("TreeEnsembleClassifier", 1, 4, "class_", ("Y", "Z")),
)
BY_NAME = {o.op: o for o in ML_OPS}

# Scores are computed in the threshold type (float32 for float32 and integer
# inputs, float64 for float64) and written as float32; the order of the sum
# over trees changes only when trees are split over threads.
SCORE_RTOL = {"float32": 1e-5, "float64": 1e-6}


def kernel_name(op: str) -> str:
    return f"olc_ml::{op}"
