"""Benchmark cases of olc-ml for tools/benchmark_parity.py (``--suite ml``).

Random forests (AVERAGE of trees grown to a depth, some branches stopping
early) and gradient-boosted ensembles (SUM of full trees plus a base value)
of 100 and 500 trees, depths 6 and 10, over 20 and 200 features, scored for
1 row and for 1,000 rows (and 100,000 rows for 100 trees); and whole
scikit-learn-style pipelines (imputer, scaler, one-hot encoder, a linear,
forest or SVM classifier, ZipMap) end to end at 1, 1,000 and 100,000 rows.
The trees and weights are drawn from seeded generators and written with
onnx.helper: no training, the same model on every run.
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
LARGE_BATCH = 100000
KINDS = ("rf", "gb")

# Gates: ratio = onnxruntime time / olc time.
SINGLE_ROW_MEDIAN = 1.5
BATCH_MEDIAN = 3.0
CASE_MIN = 1.5
PIPELINE_MIN = 1.5


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


# scikit-learn pipelines as skl2onnx writes them, built by hand (no
# training, no scikit-learn needed): 8 numeric columns with missing values
# (Imputer, Scaler) and 2 integer categories (OneHotEncoder over 5 values,
# reshaped), concatenated, then a classifier of 3 classes and ZipMap.
PIPELINE_NUMERIC, PIPELINE_CATEGORIES, PIPELINE_CLASSES = 8, 5, 3
PIPELINE_KINDS = ("linear", "forest", "svm")
PIPELINE_ROWS = (1, 1000, 100000)


def _classifier_node(kind: str, n_features: int, rng: np.random.Generator) -> onnx.NodeProto:
    c = PIPELINE_CLASSES
    labels = list(range(c))
    if kind == "linear":  # LogisticRegression: multinomial scores, LOGISTIC, then an L1 Normalizer
        return helper.make_node(
            "LinearClassifier", ["features"], ["label", "scores"], domain=manifest.ML_DOMAIN, name="classifier",
            coefficients=rng.normal(0, 0.5, c * n_features).astype(np.float32).tolist(),
            intercepts=rng.normal(0, 0.1, c).astype(np.float32).tolist(), classlabels_ints=labels,
            multi_class=0, post_transform="LOGISTIC")
    if kind == "svm":  # SVC(probability=True), RBF, 150 support vectors
        per_class = [60, 40, 50]
        nv = sum(per_class)
        pairs = c * (c - 1) // 2
        return helper.make_node(
            "SVMClassifier", ["features"], ["label", "probabilities"], domain=manifest.ML_DOMAIN,
            name="classifier", kernel_type="RBF", kernel_params=[0.05, 0.0, 3.0], vectors_per_class=per_class,
            support_vectors=rng.normal(size=nv * n_features).astype(np.float32).tolist(),
            coefficients=rng.normal(0, 0.5, (c - 1) * nv).astype(np.float32).tolist(),
            rho=rng.normal(0, 0.1, pairs).astype(np.float32).tolist(), prob_a=[-2.0] * pairs,
            prob_b=[0.1] * pairs, classlabels_ints=labels, post_transform="NONE")
    # RandomForestClassifier: 100 trees of depth 8, class probabilities averaged.
    attrs = random_tree_attributes("rf", 100, 8, n_features, int(rng.integers(1 << 30)))
    n_leaves = len(attrs["target_ids"])
    leaf_nodes = np.repeat(attrs["target_nodeids"], c)
    leaf_trees = np.repeat(attrs["target_treeids"], c)
    p = rng.dirichlet(np.ones(c), size=n_leaves).astype(np.float32) / 100
    node = helper.make_node("TreeEnsembleClassifier", ["features"], ["label", "probabilities"],
                            domain=manifest.ML_DOMAIN, name="classifier")
    node.attribute.extend(_attribute(k, v) for k, v in attrs.items() if k.startswith("nodes_"))
    node.attribute.extend([
        _attribute("class_treeids", leaf_trees), _attribute("class_nodeids", leaf_nodes),
        _attribute("class_ids", np.tile(np.arange(c), n_leaves)), _attribute("class_weights", p.reshape(-1)),
        _attribute("classlabels_int64s", np.arange(c)), _attribute("post_transform", "NONE")])
    return node


@functools.lru_cache(maxsize=4)
def pipeline_model(kind: str, seed: int = 0) -> onnx.ModelProto:
    """Imputer + Scaler over ``num`` [N, 8] (float32, NaN for missing),
    OneHotEncoder over ``cat`` [N, 2] (int64), Concat, a classifier
    (``linear``: LinearClassifier + Normalizer; ``forest``: 100 trees;
    ``svm``: SVMClassifier with probabilities) and ZipMap."""
    rng = np.random.default_rng(seed)
    k, n_cat = PIPELINE_NUMERIC, PIPELINE_CATEGORIES
    n_features = k + 2 * n_cat
    ml = manifest.ML_DOMAIN
    nodes = [
        helper.make_node("Imputer", ["num"], ["imputed"], domain=ml, name="imputer",
                         imputed_value_floats=rng.normal(size=k).astype(np.float32).tolist(),
                         replaced_value_float=float("nan")),
        helper.make_node("Scaler", ["imputed"], ["scaled"], domain=ml, name="scaler",
                         offset=rng.normal(size=k).astype(np.float32).tolist(),
                         scale=rng.uniform(0.5, 2, k).astype(np.float32).tolist()),
        helper.make_node("OneHotEncoder", ["cat"], ["onehot"], domain=ml, name="onehot",
                         cats_int64s=list(range(n_cat)), zeros=1),
        helper.make_node("Reshape", ["onehot", "flat"], ["onehot_flat"], name="reshape"),
        helper.make_node("Concat", ["scaled", "onehot_flat"], ["features"], axis=1, name="concat"),
        _classifier_node(kind, n_features, rng),
    ]
    probabilities = "probabilities"
    if kind == "linear":
        nodes.append(helper.make_node("Normalizer", ["scores"], ["probabilities"], domain=ml, name="normalizer",
                                      norm="L1"))
    nodes.append(helper.make_node("ZipMap", [probabilities], ["output_probability"], domain=ml, name="zipmap",
                                  classlabels_int64s=list(range(PIPELINE_CLASSES))))
    zipped = helper.make_sequence_type_proto(helper.make_map_type_proto(
        TensorProto.INT64, helper.make_tensor_type_proto(TensorProto.FLOAT, [])))
    graph = helper.make_graph(
        nodes, f"pipeline_{kind}",
        [helper.make_tensor_value_info("num", TensorProto.FLOAT, [None, k]),
         helper.make_tensor_value_info("cat", TensorProto.INT64, [None, 2])],
        [helper.make_tensor_value_info("label", TensorProto.INT64, [None]),
         helper.make_value_info("output_probability", zipped)],
        initializer=[onnx.numpy_helper.from_array(np.array([-1, 2 * n_cat], np.int64), "flat")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(ml, 1)])
    model.ir_version = 9
    return model


def _with_missing(rng: np.random.Generator, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    x = rng.normal(size=shape).astype(dtype)
    x[rng.random(shape) < 0.1] = np.nan
    return x


def _categories(rng: np.random.Generator, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    return rng.integers(0, PIPELINE_CATEGORIES + 1, size=shape).astype(dtype)  # the last value unseen


def pipeline_cases() -> list[dict[str, Any]]:
    return [{
        "op": "pipeline", "domain": manifest.ML_DOMAIN, "opset": 1,
        "name": f"pipeline {kind} x{rows}", "group": "pipeline", "size": rows,
        "inputs": [{"shape": [rows, PIPELINE_NUMERIC], "dtype": "float32", "generator": _with_missing},
                   {"shape": [rows, 2], "dtype": "int64", "generator": _categories}],
        "model": functools.partial(pipeline_model, kind),
        "expected_kernel": manifest.kernel_name("ZipMap"),
        "rtol": 1e-4, "atol": 1e-5,
    } for kind in PIPELINE_KINDS for rows in PIPELINE_ROWS]


def benchmark_cases() -> list[dict[str, Any]]:
    cases = []
    for kind in KINDS:
        for n_trees in TREES:
            for depth in DEPTHS:
                for n_features in FEATURES:
                    seed = 1000 * n_trees + 10 * depth + n_features + (kind == "gb")
                    # 100,000 rows for the 100-tree forests only: onnxruntime
                    # takes 5-15 s per run of a 500-tree one.
                    for rows in ROWS + ((LARGE_BATCH,) if n_trees == TREES[0] else ()):
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
    return cases + pipeline_cases()


def benchmark_gates() -> list[dict[str, Any]]:
    return [
        {"name": "ml/single-row", "group": "single", "median_at_least": SINGLE_ROW_MEDIAN, "min_at_least": CASE_MIN},
        {"name": "ml/batch", "group": "batch", "median_at_least": BATCH_MEDIAN, "min_at_least": CASE_MIN},
        {"name": "ml/pipeline", "group": "pipeline", "median_at_least": PIPELINE_MIN, "min_at_least": None},
    ]
