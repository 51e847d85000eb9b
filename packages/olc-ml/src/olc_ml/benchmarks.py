"""Benchmark cases of olc-ml for tools/benchmark_parity.py (``--suite ml``).

Random forests (AVERAGE of trees grown to a depth, some branches stopping
early) and gradient-boosted ensembles (SUM of full trees plus a base value)
of 100 and 500 trees, depths 6 and 10, over 20 and 200 features, scored for
1 row and for 1,000 rows. The trees are drawn from seeded generators and
written with onnx.helper: no training, the same model on every run.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper

from . import manifest

TREES = (100, 500)
DEPTHS = (6, 10)
FEATURES = (20, 200)
ROWS = (1, 1000)
KINDS = ("rf", "gb")

# Gates: ratio = onnxruntime time / olc time.
SINGLE_ROW_MEDIAN = 1.5
BATCH_MEDIAN = 3.0
CASE_MIN = 1.5


def random_tree_attributes(kind: str, n_trees: int, depth: int, n_features: int, seed: int) -> dict[str, Any]:
    """TreeEnsembleRegressor attributes (numpy arrays) of n_trees random
    trees of at most ``depth`` levels below the root, numbered breadth-first.
    ``rf``: a node below level 3 becomes a leaf with probability 0.15, leaves
    hold values around 1 (averaged); ``gb``: full trees, small leaf values
    (summed)."""
    rng = np.random.default_rng(seed)
    tree_ids, node_ids, leaf_mask = [], [], []
    for t in range(n_trees):
        width, first = 1, 0
        for level in range(depth + 1):
            if level == depth:
                leaf = np.ones(width, dtype=bool)
            elif kind == "rf" and level > 3:
                leaf = rng.random(width) < 0.15
            else:
                leaf = np.zeros(width, dtype=bool)
            node_ids.append(np.arange(first, first + width))
            tree_ids.append(np.full(width, t))
            leaf_mask.append(leaf)
            first += width
            width = 2 * int(np.count_nonzero(~leaf))
            if width == 0:
                break
    nodes = np.concatenate(node_ids)
    trees = np.concatenate(tree_ids)
    leaf = np.concatenate(leaf_mask)
    # A branch's children follow every node of its level, in branch order.
    true_ids = np.zeros(len(nodes), dtype=np.int64)
    start = 0
    for ids, lm in zip(node_ids, leaf_mask):
        n = len(ids)
        level_end = ids[-1] + 1
        branch_rank = np.cumsum(~lm) - 1
        true_ids[start:start + n] = np.where(lm, 0, level_end + 2 * branch_rank)
        start += n
    false_ids = np.where(leaf, 0, true_ids + 1)
    features = np.where(leaf, 0, rng.integers(n_features, size=len(nodes)))
    thresholds = np.where(leaf, 0.0, rng.normal(0.0, 0.7, size=len(nodes)))
    n_leaves = int(np.count_nonzero(leaf))
    values = rng.normal(1.0, 0.5, n_leaves) if kind == "rf" else rng.normal(0.0, 0.05, n_leaves)
    attrs: dict[str, Any] = {
        "nodes_treeids": trees, "nodes_nodeids": nodes, "nodes_featureids": features,
        "nodes_modes": np.where(leaf, "LEAF", "BRANCH_LEQ"), "nodes_values": thresholds.astype(np.float32),
        "nodes_truenodeids": true_ids, "nodes_falsenodeids": false_ids,
        "target_treeids": trees[leaf], "target_nodeids": nodes[leaf], "target_ids": np.zeros(n_leaves, np.int64),
        "target_weights": values.astype(np.float32), "n_targets": 1,
    }
    if kind == "rf":
        attrs["aggregate_function"] = "AVERAGE"
    else:
        attrs["aggregate_function"] = "SUM"
        attrs["base_values"] = np.array([0.5], dtype=np.float32)
    return attrs


def _attribute(name: str, value: Any) -> onnx.AttributeProto:
    """An AttributeProto from a numpy array, int or str (helper.make_attribute
    checks element by element, slow for a million nodes)."""
    a = onnx.AttributeProto(name=name)
    if isinstance(value, str):
        a.type, a.s = onnx.AttributeProto.STRING, value.encode()
    elif isinstance(value, int):
        a.type, a.i = onnx.AttributeProto.INT, value
    elif value.dtype.kind in "US":
        a.type = onnx.AttributeProto.STRINGS
        a.strings.extend(v.encode() for v in value.tolist())
    elif value.dtype.kind == "f":
        a.type = onnx.AttributeProto.FLOATS
        a.floats.extend(value.tolist())
    else:
        a.type = onnx.AttributeProto.INTS
        a.ints.extend(value.tolist())
    return a


@functools.lru_cache(maxsize=4)
def forest_model(kind: str, n_trees: int, depth: int, n_features: int, seed: int = 0) -> onnx.ModelProto:
    """A one-node TreeEnsembleRegressor model (ai.onnx.ml 3) over input X
    [N, n_features] float32."""
    attrs = random_tree_attributes(kind, n_trees, depth, n_features, seed)
    node = helper.make_node("TreeEnsembleRegressor", ["X"], ["Y"], name="forest", domain=manifest.ML_DOMAIN)
    node.attribute.extend(_attribute(k, v) for k, v in attrs.items())
    graph = helper.make_graph([node], f"{kind}_{n_trees}_{depth}", [
        helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, n_features])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [None, 1])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid(manifest.ML_DOMAIN, 3)])
    model.ir_version = 9
    return model


def benchmark_cases() -> list[dict[str, Any]]:
    cases = []
    for kind in KINDS:
        for n_trees in TREES:
            for depth in DEPTHS:
                for n_features in FEATURES:
                    seed = 1000 * n_trees + 10 * depth + n_features + (kind == "gb")
                    for rows in ROWS:
                        cases.append({
                            "op": "TreeEnsembleRegressor", "domain": manifest.ML_DOMAIN, "opset": 3,
                            "name": f"{kind} {n_trees} trees d{depth} f{n_features} x{rows}",
                            "group": "single" if rows == 1 else "batch",
                            "size": rows,
                            "inputs": [{"shape": [rows, n_features], "dtype": "float32", "generator": "normal"}],
                            "model": functools.partial(forest_model, kind, n_trees, depth, n_features, seed),
                            "expected_kernel": manifest.kernel_name("TreeEnsembleRegressor"),
                            "rtol": 1e-4, "atol": 1e-4,
                        })
    return cases


def benchmark_gates() -> list[dict[str, Any]]:
    return [
        {"name": "ml/single-row", "group": "single", "median_at_least": SINGLE_ROW_MEDIAN, "min_at_least": CASE_MIN},
        {"name": "ml/batch", "group": "batch", "median_at_least": BATCH_MEDIAN, "min_at_least": CASE_MIN},
    ]
