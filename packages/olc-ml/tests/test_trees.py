"""Tree ensembles from scikit-learn (skl2onnx) and hand-built nodes, on
strict olc sessions, against onnxruntime: labels exactly, scores to float
rounding; malformed ensembles are OlcErrors at session creation."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from ml_sessions import session
from olc_ml import kernel_name
from onnx import TensorProto, helper

import olc_core

sklearn = pytest.importorskip("sklearn.ensemble")
skl2onnx = pytest.importorskip("skl2onnx")

RNG = np.random.default_rng(7)
X = RNG.standard_normal((257, 12)).astype(np.float32)
X_NAN = X.copy()
X_NAN[RNG.random(X.shape) < 0.1] = np.nan


def ort_run(model, feeds):
    s = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return s.run(None, feeds)


def olc_run(model, feeds, op, threads=1):
    s = session(model, record_usage=True, threads=threads)
    out = s.run(None, feeds)
    assert kernel_name(op) in s.kernel_usage(), s.kernel_usage()
    return out


def regressors():
    y = X[:, 0] * 2 + np.sin(X[:, 1]) + X[:, 2] * X[:, 3]
    yield "rf", sklearn.RandomForestRegressor(n_estimators=20, max_depth=8, random_state=0).fit(X, y)
    yield "et", sklearn.ExtraTreesRegressor(n_estimators=20, max_depth=8, random_state=0).fit(X, y)
    yield "gb", sklearn.GradientBoostingRegressor(n_estimators=30, max_depth=4, random_state=0).fit(X, y)
    yield "rf-nan", sklearn.RandomForestRegressor(n_estimators=20, max_depth=8, random_state=0).fit(X_NAN, y)


@pytest.mark.parametrize("name,model", list(regressors()), ids=lambda v: v if isinstance(v, str) else "")
@pytest.mark.parametrize("threads", [1, 2])
def test_sklearn_regressors_match_onnxruntime(name, model, threads):
    onx = skl2onnx.to_onnx(model, X[:1], target_opset={"": 17, "ai.onnx.ml": 3})
    for data in (X, X_NAN, X[:1]):
        want = ort_run(onx, {"X": data})[0]
        got = olc_run(onx, {"X": data}, "TreeEnsembleRegressor", threads)[0]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def classifiers():
    y3 = (X[:, 0] > 0).astype(np.int64) + (X[:, 1] > 0.3)
    y2 = (X[:, 0] + X[:, 4] > 0).astype(np.int64)
    for y, tag in ((y2, "binary"), (y3, "multi")):
        yield f"rf-{tag}", sklearn.RandomForestClassifier(n_estimators=15, max_depth=7, random_state=0).fit(X, y)
        yield f"et-{tag}", sklearn.ExtraTreesClassifier(n_estimators=15, max_depth=7, random_state=0).fit(X, y)
        yield f"gb-{tag}", sklearn.GradientBoostingClassifier(n_estimators=15, max_depth=3, random_state=0).fit(X, y)


@pytest.mark.parametrize("name,model", list(classifiers()), ids=lambda v: v if isinstance(v, str) else "")
@pytest.mark.parametrize("threads", [1, 2])
def test_sklearn_classifiers_match_onnxruntime(name, model, threads):
    # As exported: the probabilities reach the graph output through other
    # nodes, so the restated node's untyped output takes its registration's type.
    onx = skl2onnx.to_onnx(model, X[:1], target_opset={"": 17, "ai.onnx.ml": 3}, options={"zipmap": False})
    for data in (X, X_NAN, X[:1]):
        want = ort_run(onx, {"X": data})
        got = olc_run(onx, {"X": data}, "TreeEnsembleClassifier", threads)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_allclose(got[1], want[1], rtol=1e-5, atol=1e-6)


# A hand-built forest: 3 trees over 4 features, every branch mode.
def _forest(modes, missing, weights_prefix, n_out, ids_fn):
    nodes: dict[str, list] = {k: [] for k in (
        "nodes_treeids", "nodes_nodeids", "nodes_featureids", "nodes_modes", "nodes_values",
        "nodes_truenodeids", "nodes_falsenodeids", "nodes_missing_value_tracks_true")}
    w = {weights_prefix + k: [] for k in ("treeids", "nodeids", "ids", "weights")}
    for t in range(3):
        # node 0 branch -> 1 (branch) / 2 (leaf); node 1 -> 3 / 4 leaves
        for nid, (mode, f, thr, tn, fn) in enumerate([(modes[t % len(modes)], t, 0.1 * t, 1, 2),
                                                       (modes[(t + 1) % len(modes)], (t + 1) % 4, -0.2, 3, 4),
                                                       ("LEAF", 0, 0.0, 0, 0), ("LEAF", 0, 0.0, 0, 0),
                                                       ("LEAF", 0, 0.0, 0, 0)]):
            for k, v in zip(nodes, (t, nid, f, mode, thr, tn if mode != "LEAF" else 0, fn if mode != "LEAF" else 0,
                                    missing if mode != "LEAF" else 0)):
                nodes[k].append(v)
            if mode == "LEAF":
                for target in ids_fn(t, nid):
                    w[weights_prefix + "treeids"].append(t)
                    w[weights_prefix + "nodeids"].append(nid)
                    w[weights_prefix + "ids"].append(target)
                    w[weights_prefix + "weights"].append(0.25 * (nid - 2) + 0.1 * t + 0.05 * target - 0.2)
    return {**nodes, **w}


MODES = ["BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT", "BRANCH_EQ", "BRANCH_NEQ"]


def _model(op, attrs, n_out, in_type=TensorProto.FLOAT):
    outs = ([helper.make_tensor_value_info("label", TensorProto.INT64, None)] if op == "TreeEnsembleClassifier"
            else []) + [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    node = helper.make_node(op, ["x"], [o.name for o in outs], name="trees", domain="ai.onnx.ml", **attrs)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", in_type, [None, 4])], outs)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 3)])
    m.ir_version = 9
    return m


def _inputs(dtype):
    x = RNG.choice([-0.2, 0.0, 0.1, 0.2, 1.0, -1.0, np.nan], size=(40, 4)).astype(dtype)
    return x


@pytest.mark.parametrize("mode", MODES + ["mixed"])
@pytest.mark.parametrize("missing", [0, 1])
@pytest.mark.parametrize("aggregate", ["SUM", "AVERAGE", "MIN", "MAX"])
@pytest.mark.parametrize("n_targets", [1, 3])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_hand_built_regressor(mode, missing, aggregate, n_targets, dtype):
    modes = MODES if mode == "mixed" else [mode]
    attrs = _forest(modes, missing, "target_", n_targets,
                    lambda t, nid: range(n_targets) if nid != 3 else [t % n_targets])
    attrs.update(n_targets=n_targets, aggregate_function=aggregate, base_values=[0.5] * n_targets)
    m = _model("TreeEnsembleRegressor", attrs, n_targets,
               TensorProto.FLOAT if dtype == np.float32 else TensorProto.DOUBLE)
    x = _inputs(dtype)
    np.testing.assert_allclose(olc_run(m, {"x": x}, "TreeEnsembleRegressor")[0], ort_run(m, {"x": x})[0],
                               rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("post", ["NONE", "SOFTMAX", "LOGISTIC", "SOFTMAX_ZERO", "PROBIT"])
@pytest.mark.parametrize("n_targets", [1, 3])
def test_regressor_post_transforms(post, n_targets):
    attrs = _forest(["BRANCH_LEQ"], 0, "target_", n_targets, lambda t, nid: range(n_targets))
    attrs.update(n_targets=n_targets, post_transform=post)
    m = _model("TreeEnsembleRegressor", attrs, n_targets)
    x = np.clip(_inputs(np.float32), -1, 1)
    x = np.nan_to_num(x)
    np.testing.assert_allclose(olc_run(m, {"x": x}, "TreeEnsembleRegressor")[0], ort_run(m, {"x": x})[0],
                               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("post", ["NONE", "SOFTMAX", "LOGISTIC", "SOFTMAX_ZERO", "PROBIT"])
@pytest.mark.parametrize("classes,ids", [(3, "all"), (2, "all"), (2, "one"), (2, "positive-one")])
@pytest.mark.parametrize("base", [0, 1, 2])
def test_classifier_post_transforms_and_binary_forms(post, classes, ids, base):
    if base == 1 and classes != 2:
        pytest.skip("a single base value is a binary form")
    ids_fn = (lambda t, nid: range(classes)) if ids == "all" else (lambda t, nid: [0])
    attrs = _forest(["BRANCH_LEQ"], 0, "class_", classes, ids_fn)
    if ids == "positive-one":
        attrs["class_weights"] = [abs(v) for v in attrs["class_weights"]]
    attrs.update(classlabels_int64s=list(range(10, 10 + classes)), post_transform=post)
    if base:
        attrs["base_values"] = [0.3, -0.1, 0.2][: (base if classes == 2 else classes)]
    m = _model("TreeEnsembleClassifier", attrs, classes)
    x = np.nan_to_num(_inputs(np.float32))
    got, want = olc_run(m, {"x": x}, "TreeEnsembleClassifier"), ort_run(m, {"x": x})
    np.testing.assert_array_equal(got[0], want[0])
    if post == "PROBIT" and want[1].shape[1] == 2 and classes == 2 and ids != "all":
        # onnxruntime writes only the first column of a single PROBIT score
        np.testing.assert_allclose(got[1][:, 0], want[1][:, 0], rtol=1e-5, atol=1e-6)
    else:
        np.testing.assert_allclose(got[1], want[1], rtol=1e-5, atol=1e-6)


def _bad(**change):
    attrs = _forest(["BRANCH_LEQ"], 0, "target_", 1, lambda t, nid: [0])
    attrs.update(n_targets=1)
    attrs.update(change)
    return _model("TreeEnsembleRegressor", attrs, 1)


@pytest.mark.parametrize("change,message", [
    ({"post_transform": "SQUARE"}, "unknown post_transform 'SQUARE'"),
    ({"nodes_featureids": [7] + [0] * 14}, "feature 7 but the input has 4 features"),
    ({"nodes_truenodeids": [9] + [1, 0, 0, 0] + [1, 3, 0, 0, 0] * 2}, "points to node id 9, which is not in tree 0"),
    ({"target_ids": [0, 0, 5] + [0] * 6}, "target 5, but n_targets is 1"),
])
def test_bad_models_are_errors_at_creation(change, message):
    with pytest.raises(olc_core.OlcError, match=r"node 'trees' \(TreeEnsembleRegressor\).*" + message):
        olc_core.Session(_bad(**change), strict=True)


def test_class_weight_for_a_missing_class():
    attrs = _forest(["BRANCH_LEQ"], 0, "class_", 2, lambda t, nid: [0, 1])
    attrs["class_ids"][3] = 4
    attrs.update(classlabels_int64s=[0, 1])
    with pytest.raises(olc_core.OlcError, match=r"node 'trees' \(TreeEnsembleClassifier\).*class 4, but there are 2"):
        olc_core.Session(_model("TreeEnsembleClassifier", attrs, 2), strict=True)


def test_large_forest_loads_fast_and_matches():
    import time
    y = X[:, 0] * 2 + X[:, 1]
    model = sklearn.GradientBoostingRegressor(n_estimators=600, max_depth=3, random_state=0).fit(X, y)
    onx = skl2onnx.to_onnx(model, X[:1], target_opset={"": 17, "ai.onnx.ml": 3})
    t = time.perf_counter()
    s = olc_core.Session(onx, strict=True, record_usage=True, threads=2)
    created = time.perf_counter() - t
    np.testing.assert_allclose(s.run(None, {"X": X})[0], ort_run(onx, {"X": X})[0], rtol=1e-5, atol=1e-5)
    print(f"600 trees: session in {created * 1e3:.1f} ms")


@pytest.mark.parametrize("kind", ["rf", "gb"])
@pytest.mark.parametrize("threads", [1, 2])
def test_forest_larger_than_a_tree_chunk(kind, threads):
    """Hundreds of random trees (several chunks of the engine's tree blocking)
    at row counts around the row block and group sizes, single row included."""
    from olc_ml.benchmarks import forest_model
    model = forest_model(kind, 300, 7, 30, seed=3)
    rng = np.random.default_rng(11)
    for rows in (1, 3, 8, 9, 63, 64, 65, 300):
        x = rng.standard_normal((rows, 30)).astype(np.float32)
        np.testing.assert_allclose(olc_run(model, {"X": x}, "TreeEnsembleRegressor", threads)[0],
                                   ort_run(model, {"X": x})[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", ["binary", "multi"])
def test_string_class_labels(kind):
    """String labels: the native forest on class indices inside the Python
    kernel that maps them to the labels; labels equal onnxruntime's."""
    names = np.array(["cat", "dog", "émeu"])
    y = (X[:, 0] > 0).astype(int) + ((X[:, 1] > 0.3) if kind == "multi" else 0)
    for model in (sklearn.RandomForestClassifier(n_estimators=8, max_depth=6, random_state=0),
                  sklearn.GradientBoostingClassifier(n_estimators=8, max_depth=3, random_state=0)):
        model.fit(X, names[y])
        onx = skl2onnx.to_onnx(model, X[:1], target_opset={"": 17, "ai.onnx.ml": 3}, options={"zipmap": False})
        for data in (X, X_NAN, X[:1]):
            s = session(onx)
            assert s.kernel_plan()[0].kernel.endswith("TreeEnsembleClassifierStrings")
            got, want = s.run(None, {"X": data}), ort_run(onx, {"X": data})
            assert got[0].tolist() == want[0].tolist()
            np.testing.assert_allclose(got[1], want[1], rtol=1e-5, atol=1e-6)


def test_v3_forms_at_ml_opset_5():
    """Exporters still write TreeEnsembleRegressor / Classifier in models
    importing ai.onnx.ml 5 (the schema marks them deprecated there)."""
    y = X[:, 0] * 2 + X[:, 1]
    for model in (sklearn.RandomForestRegressor(n_estimators=5, max_depth=5, random_state=0).fit(X, y),
                  sklearn.RandomForestClassifier(n_estimators=5, max_depth=5, random_state=0).fit(X, y > 0)):
        options = {"zipmap": False} if hasattr(model, "classes_") else None
        onx = skl2onnx.to_onnx(model, X[:1], target_opset={"": 21, "ai.onnx.ml": 5}, options=options)
        got = session(onx).run(None, {"X": X_NAN})
        for g, w in zip(got, ort_run(onx, {"X": X_NAN})):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_native_without_fusion():
    y = X[:, 0] * 2 + X[:, 1]
    onx = skl2onnx.to_onnx(sklearn.RandomForestRegressor(n_estimators=4, max_depth=4, random_state=0).fit(X, y),
                           X[:1], target_opset={"": 17, "ai.onnx.ml": 3})
    s = olc_core.Session(onx, strict=True, fusion=False, record_usage=True)
    np.testing.assert_allclose(s.run(None, {"X": X})[0], ort_run(onx, {"X": X})[0], rtol=1e-5, atol=1e-5)
    assert s.kernel_usage() == [kernel_name("TreeEnsembleRegressor")]


@pytest.mark.parametrize("threads", [1, 2])
def test_wide_rows_in_several_row_blocks(threads):
    """Rows of 1,500 features: the engine walks every chunk of trees over one
    block of rows (about 512 KB of input) before the next block; 300 rows
    span several blocks and the forest several chunks."""
    from olc_ml.benchmarks import forest_model
    model = forest_model("gb", 150, 7, 1500, seed=5)
    x = np.random.default_rng(12).standard_normal((300, 1500)).astype(np.float32)
    np.testing.assert_allclose(olc_run(model, {"X": x}, "TreeEnsembleRegressor", threads)[0],
                               ort_run(model, {"X": x})[0], rtol=1e-5, atol=1e-5)
