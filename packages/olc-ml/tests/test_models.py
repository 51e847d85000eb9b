"""Whole models converted here (no downloads), on strict olc sessions against
onnxruntime, NaN inputs included: gradient boosting from scikit-learn
(GradientBoosting, HistGradientBoosting), XGBoost and LightGBM (through
onnxmltools), IsolationForest, and scikit-learn pipelines (imputer, scaler,
one-hot encoder, classifier, ZipMap) whose probabilities come back as the
list of dicts onnxruntime returns."""

from __future__ import annotations

import functools
import warnings

import numpy as np
import onnxruntime as ort
import pytest
from ml_sessions import EVERY_OP_ON_OLC, session

import olc_core

skl2onnx = pytest.importorskip("skl2onnx")
ensemble = pytest.importorskip("sklearn.ensemble")

RNG = np.random.default_rng(5)
X = RNG.normal(size=(300, 10)).astype(np.float32)
X_NAN = X.copy()
X_NAN[RNG.random(X.shape) < 0.15] = np.nan
Y2 = (X[:, 0] + X[:, 2] > 0).astype(int)
Y3 = (X[:, 0] > 0).astype(int) + (X[:, 1] > 0.5)
YR = X[:, 0] * 2 + np.sin(X[:, 1]) + X[:, 3] * X[:, 4]


@pytest.fixture(autouse=True)
def _bool_attributes_as_ints(monkeypatch):
    """skl2onnx 1.20 hands numpy bools to protobuf INTS fields (the missing-
    value flags of HistGradientBoosting), which current protobuf refuses:
    the test converts them to ints on their way into make_node."""
    import skl2onnx.common._container as container

    make_node = container.make_node

    def make(*args, **attrs):
        for k, v in attrs.items():
            if isinstance(v, (list, tuple)) and any(isinstance(e, (bool, np.bool_)) for e in v):
                attrs[k] = [int(e) for e in v]
        return make_node(*args, **attrs)

    monkeypatch.setattr(container, "make_node", make)


def ort_run(model, feeds):
    s = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return s.run(None, feeds)


def check(model, feeds, threads=1, strict=True):
    s = session(model, threads=threads) if strict else olc_core.Session(model, threads=threads)
    got, want = s.run(None, feeds), ort_run(model, feeds)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        if isinstance(w, list):  # ZipMap: a list of dicts
            assert type(g) is list and len(g) == len(w)
            assert [list(d) for d in g] == [list(d) for d in w]
            np.testing.assert_allclose([list(d.values()) for d in g], [list(d.values()) for d in w],
                                       rtol=1e-5, atol=1e-6)
        elif w.dtype.kind in "iuOU":
            np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5 * max(1.0, float(np.abs(w).max(initial=0))))
    return s


def _skl(model, zipmap=False):
    options = {id(model): {"zipmap": False}} if hasattr(model, "classes_") and not zipmap else None
    return skl2onnx.to_onnx(model, X[:1], target_opset={"": 17, "ai.onnx.ml": 3}, options=options)


def sklearn_boosting():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield "gb-regressor", ensemble.GradientBoostingRegressor(n_estimators=30, max_depth=3).fit(X, YR)
        yield "gb-binary", ensemble.GradientBoostingClassifier(n_estimators=20, max_depth=3).fit(X, Y2)
        yield "gb-multi", ensemble.GradientBoostingClassifier(n_estimators=10, max_depth=3).fit(X, Y3)
        yield "hgb-regressor", ensemble.HistGradientBoostingRegressor(max_iter=25).fit(X_NAN, YR)
        yield "hgb-binary", ensemble.HistGradientBoostingClassifier(max_iter=25).fit(X_NAN, Y2)
        yield "hgb-multi", ensemble.HistGradientBoostingClassifier(max_iter=15).fit(X_NAN, Y3)
        # Sixteen trees at most: olc-elementwise's Sum takes up to 16 inputs.
        yield "isolation-forest", ensemble.IsolationForest(n_estimators=12, random_state=0).fit(X)


@pytest.mark.parametrize("name,model", list(sklearn_boosting()), ids=lambda v: v if isinstance(v, str) else "")
def test_sklearn_ensembles(name, model):
    onx = _skl(model)
    for data in (X, X_NAN, X[:1]):
        check(onx, {"X": data})


@functools.cache
def _xgb_lgb_models() -> list[tuple[str, object]]:
    return list(_train_xgb_lgb())


def _train_xgb_lgb():
    xgboost = pytest.importorskip("xgboost")
    lightgbm = pytest.importorskip("lightgbm")
    yield "xgb-regressor", xgboost.XGBRegressor(n_estimators=25, max_depth=5).fit(X_NAN, YR)
    yield "xgb-binary", xgboost.XGBClassifier(n_estimators=25, max_depth=4).fit(X_NAN, Y2)
    yield "xgb-multi", xgboost.XGBClassifier(n_estimators=10, max_depth=4).fit(X_NAN, Y3)
    yield "lgb-regressor", lightgbm.LGBMRegressor(n_estimators=25, verbose=-1).fit(X_NAN, YR)
    yield "lgb-binary", lightgbm.LGBMClassifier(n_estimators=25, verbose=-1).fit(X_NAN, Y2)
    yield "lgb-multi", lightgbm.LGBMClassifier(n_estimators=10, verbose=-1).fit(X_NAN, Y3)


@pytest.mark.parametrize("index", range(6))
def test_xgboost_and_lightgbm(index):
    onnxmltools = pytest.importorskip("onnxmltools")
    from onnxmltools.convert.common.data_types import FloatTensorType

    name, model = _xgb_lgb_models()[index]
    types = [("X", FloatTensorType([None, X.shape[1]]))]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if name.startswith("xgb"):
            onx = onnxmltools.convert_xgboost(model, initial_types=types, target_opset=15)
        else:
            onx = onnxmltools.convert_lightgbm(model, initial_types=types, target_opset=15, zipmap=False)
    for data in (X, X_NAN, X[:1]):
        for threads in (1, 2):
            check(onx, {"X": data}, threads)


# ---- pipelines ---------------------------------------------------------------

def _pipeline_data(rows, seed):
    rng = np.random.default_rng(seed)
    num = rng.normal(size=(rows, 4)).astype(np.float32)
    num[rng.random(num.shape) < 0.15] = np.nan
    cat = rng.integers(0, 5, size=(rows, 2)).astype(np.int64)
    return num, cat


def _numeric_pipeline(classifier):
    from skl2onnx.common.data_types import FloatTensorType
    from sklearn.compose import ColumnTransformer
    from sklearn.impute import SimpleImputer
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    num, cat = _pipeline_data(400, 1)
    y = ((np.nan_to_num(num[:, 0]) + cat[:, 0]) > 2).astype(int) + (cat[:, 1] > 2)
    features = np.hstack([num, cat.astype(np.float32)])
    pre = ColumnTransformer([
        ("num", Pipeline([("impute", SimpleImputer()), ("scale", StandardScaler())]), [0, 1, 2, 3]),
        ("cat", OneHotEncoder(handle_unknown="ignore"), [4, 5]),
    ])
    pipe = Pipeline([("pre", pre), ("clf", classifier)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pipe.fit(features, y)
    onx = skl2onnx.to_onnx(pipe, initial_types=[("X", FloatTensorType([None, 6]))],
                           target_opset={"": 17, "ai.onnx.ml": 3})
    assert any(n.op_type == "ZipMap" for n in onx.graph.node)
    return onx


def _classifiers():
    from sklearn.linear_model import LogisticRegression
    from sklearn.svm import SVC

    yield "logistic", LogisticRegression(max_iter=300)
    yield "random-forest", ensemble.RandomForestClassifier(n_estimators=10, max_depth=6, random_state=0)
    yield "svc", SVC(probability=True, random_state=0)


@pytest.mark.parametrize("name,classifier", list(_classifiers()), ids=lambda v: v if isinstance(v, str) else "")
@pytest.mark.parametrize("threads", [1, 2])
def test_pipeline_with_zipmap(name, classifier, threads):
    """Imputer + scaler + one-hot + classifier + ZipMap, every node on olc
    (with olc-tensor installed): the labels and the list of {class:
    probability} dicts onnxruntime gives."""
    onx = _numeric_pipeline(classifier)
    num, cat = _pipeline_data(50, 9)
    cat[0, 0] = 7  # a category the encoder never saw
    features = np.hstack([num, cat.astype(np.float32)])
    for data in (features, features[:1], features[:0]):
        s = check(onx, {"X": data}, threads)
    if EVERY_OP_ON_OLC:
        plan = s.kernel_plan()
        assert all(e.kernel.startswith(("olc_", "olc_core")) for e in plan), [(e.op_type, e.kernel) for e in plan]
    assert s.get_outputs()[1].type == "seq(map(int64,tensor(float)))"


def test_pipeline_with_string_columns_and_labels():
    """String categories and string class labels: the ai.onnx.ml nodes run on
    olc-ml (the string one-hot and the labels on its Python kernels)."""
    from skl2onnx.common.data_types import FloatTensorType, StringTensorType
    from sklearn.compose import ColumnTransformer
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    rng = np.random.default_rng(4)
    num = rng.normal(size=(300, 3)).astype(np.float32)
    colors = np.array(["red", "green", "blue", "teal"], dtype=object)[rng.integers(0, 4, 300)].reshape(-1, 1)
    y = np.array(["low", "high"], dtype=object)[(num[:, 0] + (colors[:, 0] == "red") > 0.5).astype(int)]
    pd = pytest.importorskip("pandas")

    frame = pd.DataFrame({"a": num[:, 0], "b": num[:, 1], "c": num[:, 2], "color": colors[:, 0]})
    pre = ColumnTransformer([("num", StandardScaler(), ["a", "b", "c"]), ("cat", OneHotEncoder(), ["color"])])
    pipe = Pipeline([("pre", pre), ("clf", ensemble.RandomForestClassifier(n_estimators=8, random_state=0))])
    pipe.fit(frame, y)
    types = [(c, FloatTensorType([None, 1])) for c in "abc"] + [("color", StringTensorType([None, 1]))]
    onx = skl2onnx.to_onnx(pipe, initial_types=types, target_opset={"": 17, "ai.onnx.ml": 3})
    feeds = {c: num[:40, k:k + 1] for k, c in enumerate("abc")}
    feeds["color"] = colors[:40]
    s = check(onx, feeds, strict=False)
    for e in s.kernel_plan():
        if e.domain == "ai.onnx.ml":
            assert e.kernel.startswith("olc_ml::"), (e.op_type, e.kernel)
