"""LinearRegressor, LinearClassifier, SVMRegressor and SVMClassifier on strict
olc sessions: scikit-learn models converted here (skl2onnx) against
onnxruntime (labels exactly, scores to float rounding), hand-built nodes for
every kernel, post transform and binary form against onnxruntime, the dot
and distance kernels at every SIMD level against a float64 numpy reference
over feature counts around the vector widths, guarded inputs, and bad
models as errors naming the node at creation."""

from __future__ import annotations

import warnings

import numpy as np
import onnxruntime as ort
import pytest
from ml_sessions import session
from onnx import TensorProto

import olc_core
from olc_core.testing import guarded, one_node_model, run_on_every_level

skl2onnx = pytest.importorskip("skl2onnx")
linear_model = pytest.importorskip("sklearn.linear_model")
svm = pytest.importorskip("sklearn.svm")

RNG = np.random.default_rng(3)
X = RNG.normal(size=(150, 7)).astype(np.float32)
Y2 = (X[:, 0] + X[:, 2] > 0).astype(int)
Y3 = (X[:, 0] > 0).astype(int) + (X[:, 1] > 0.5)
YR = (X @ RNG.normal(size=7) + 0.1).astype(np.float32)


def ort_run(model, feeds):
    s = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return s.run(None, feeds)


def olc_run(model, feeds, threads=1):
    return session(model, threads=threads).run(None, feeds)


def assert_matches(got, want, atol=2e-5):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape, g.dtype, w.dtype)
        if g.dtype.kind in "iuO":
            np.testing.assert_array_equal(g, w)
        else:
            # float32 sums in another order: relative to the values' scale.
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=atol * max(1.0, float(np.max(np.abs(w), initial=0))))


def sklearn_models():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield "logistic-binary", linear_model.LogisticRegression().fit(X, Y2)
        yield "logistic-multi", linear_model.LogisticRegression().fit(X, Y3)
        yield "linear", linear_model.LinearRegression().fit(X, YR)
        yield "ridge-2-targets", linear_model.Ridge().fit(X, np.c_[YR, -2 * YR])
        yield "linear-svr", svm.LinearSVR().fit(X, YR)
        for k in ("linear", "poly", "rbf", "sigmoid"):
            yield f"svc-binary-{k}", svm.SVC(kernel=k).fit(X, Y2)
            yield f"svc-multi-{k}", svm.SVC(kernel=k).fit(X, Y3)
            yield f"svc-proba-{k}", svm.SVC(kernel=k, probability=True, random_state=0).fit(X, Y3)
            yield f"svr-{k}", svm.SVR(kernel=k).fit(X, YR)
        yield "svc-binary-proba", svm.SVC(probability=True, random_state=0).fit(X, Y2)
        yield "one-class-svm", svm.OneClassSVM().fit(X)
        yield "nu-svc", svm.NuSVC(nu=0.1).fit(X, Y3)


@pytest.mark.parametrize("name,model", list(sklearn_models()), ids=lambda v: v if isinstance(v, str) else "")
def test_sklearn_models_match_onnxruntime(name, model):
    options = {id(model): {"zipmap": False}} if hasattr(model, "classes_") and "svr" not in name else None
    onx = skl2onnx.to_onnx(model, X[:1], target_opset={"": 17, "ai.onnx.ml": 3}, options=options)
    for data in (X, X[:1], X[:0]):
        assert_matches(olc_run(onx, {"X": data}), ort_run(onx, {"X": data}))


@pytest.mark.parametrize("kind", ["logistic", "svc"])
def test_string_labels(kind):
    names = np.array(["no", "yes", "maybe"])
    model = (linear_model.LogisticRegression() if kind == "logistic" else svm.SVC()).fit(X, names[Y3])
    onx = skl2onnx.to_onnx(model, X[:1], target_opset={"": 17, "ai.onnx.ml": 3},
                           options={id(model): {"zipmap": False}})
    s = session(onx)
    assert any(e.kernel.endswith("Strings") for e in s.kernel_plan())
    assert_matches(s.run(None, {"X": X}), ort_run(onx, {"X": X}))


# ---- hand-built nodes ------------------------------------------------------

def _classifier(op, attrs, n_features, elem=TensorProto.FLOAT):
    return one_node_model(op, [("x", elem, [None, n_features])],
                          [("label", TensorProto.INT64, None), ("scores", TensorProto.FLOAT, None)],
                          attrs, opset=1, domain="ai.onnx.ml")


def _regressor(op, attrs, n_features, elem=TensorProto.FLOAT):
    return one_node_model(op, [("x", elem, [None, n_features])], [("y", TensorProto.FLOAT, None)], attrs,
                          opset=1, domain="ai.onnx.ml")


POSTS = ["NONE", "SOFTMAX", "LOGISTIC", "SOFTMAX_ZERO", "PROBIT"]


@pytest.mark.parametrize("post", POSTS)
@pytest.mark.parametrize("n_classes,labels", [(3, [4, 5, 6]), (1, [4, 5])])
def test_linear_classifier_forms(post, n_classes, labels):
    f = 5
    x = RNG.normal(size=(40, f)).astype(np.float32)
    if post == "PROBIT":
        x = RNG.uniform(0, 0.15, size=(40, f)).astype(np.float32)
    attrs = {"coefficients": RNG.uniform(-0.2, 0.2, n_classes * f).tolist(),
             "intercepts": RNG.uniform(0.1, 0.2, n_classes).tolist(), "classlabels_ints": labels,
             "post_transform": post}
    model = _classifier("LinearClassifier", attrs, f)
    got, want = olc_run(model, {"x": x}), ort_run(model, {"x": x})
    np.testing.assert_array_equal(got[0], want[0])
    if n_classes == 1 and len(labels) == 2 and post == "PROBIT":
        # onnxruntime writes the probits of all rows into the first half of the
        # [N, 2] buffer and leaves the rest unset; olc writes [probit, 0] rows.
        np.testing.assert_allclose(got[1][:, 0], want[1].reshape(-1)[: len(x)], rtol=1e-5, atol=1e-6)
    else:
        assert_matches(got[1:], want[1:])


@pytest.mark.parametrize("post", POSTS)
@pytest.mark.parametrize("targets", [1, 3])
@pytest.mark.parametrize("elem", [TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.INT64, TensorProto.INT32])
def test_linear_regressor(post, targets, elem):
    f = 6
    dtype = {TensorProto.FLOAT: np.float32, TensorProto.DOUBLE: np.float64, TensorProto.INT64: np.int64,
             TensorProto.INT32: np.int32}[elem]
    x = (RNG.normal(size=(30, f)) * (3 if dtype().dtype.kind == "i" else 0.1)).astype(dtype)
    coef = RNG.uniform(-0.1, 0.1, targets * f)
    bias = RNG.uniform(0.2, 0.3, targets)
    model = _regressor("LinearRegressor", {"coefficients": coef.tolist(), "intercepts": bias.tolist(),
                                            "targets": targets, "post_transform": post}, f, elem)
    (got,) = olc_run(model, {"x": x})
    # onnxruntime takes float32 only (and the transforms of one target are
    # PROBIT alone): an independent float64 reference.
    ref = x.astype(np.float32).astype(np.float64) @ coef.astype(np.float32).reshape(targets, f).T + \
        bias.astype(np.float32)
    if targets == 1 and post != "PROBIT":
        pass
    elif post == "SOFTMAX":
        e = np.exp(ref - ref.max(axis=1, keepdims=True))
        ref = e / e.sum(axis=1, keepdims=True)
    elif post == "LOGISTIC":
        ref = 1 / (1 + np.exp(-ref))
    elif post == "SOFTMAX_ZERO":
        e = np.where(np.abs(ref) > 1e-7, np.exp(ref - ref.max(axis=1, keepdims=True)), 0)
        ref = e / e.sum(axis=1, keepdims=True)
    elif post == "PROBIT":  # the approximation of erfinv the schema's runtimes use (a = 0.147)
        t = 2 * ref - 1
        lg = np.log((1 - t) * (1 + t))
        v = 2 / (np.pi * 0.147) + 0.5 * lg
        ref = np.sqrt(2) * np.sign(t) * np.sqrt(-v + np.sqrt(v * v - lg / 0.147))
    # float32 probit loses digits near 0.5 ((1 - t)(1 + t) rounds to 1): absolute tolerance there
    np.testing.assert_allclose(got, ref, rtol=1e-4 if post == "PROBIT" else 1e-5, atol=1e-4 if post == "PROBIT" else 1e-5)
    if elem == TensorProto.FLOAT:
        assert_matches([got], ort_run(model, {"x": x}))


def _svc_attrs(kernel, n_classes, per_class, f, proba, rng):
    nv = sum(per_class)
    pairs = n_classes * (n_classes - 1) // 2
    attrs = {"kernel_type": kernel, "kernel_params": [0.3, 0.5, 3.0], "vectors_per_class": per_class,
             "support_vectors": rng.normal(size=nv * f).tolist(),
             "coefficients": rng.normal(size=(n_classes - 1) * nv).tolist(),
             "rho": rng.normal(size=pairs).tolist(), "classlabels_ints": list(range(10, 10 + n_classes))}
    if proba:
        attrs["prob_a"] = rng.uniform(-3, -1, pairs).tolist()
        attrs["prob_b"] = rng.uniform(-0.2, 0.2, pairs).tolist()
    return attrs


@pytest.mark.parametrize("kernel", ["LINEAR", "POLY", "RBF", "SIGMOID"])
@pytest.mark.parametrize("n_classes", [2, 4])
@pytest.mark.parametrize("proba", [False, True])
@pytest.mark.parametrize("post", ["NONE", "LOGISTIC", "SOFTMAX"])
def test_svm_classifier_forms(kernel, n_classes, proba, post):
    rng = np.random.default_rng(n_classes * 10 + proba)
    f = 5
    attrs = _svc_attrs(kernel, n_classes, [3, 1, 4, 2][:n_classes], f, proba, rng)
    attrs["post_transform"] = post
    model = _classifier("SVMClassifier", attrs, f)
    x = rng.normal(size=(60, f)).astype(np.float32)
    assert_matches(olc_run(model, {"x": x}), ort_run(model, {"x": x}), atol=5e-5)


@pytest.mark.parametrize("n_classes", [2, 3])
def test_svm_classifier_liblinear_form(n_classes):
    f = 4
    attrs = {"kernel_type": "LINEAR", "kernel_params": [0.0, 0.0, 0.0],
             "coefficients": RNG.normal(size=n_classes * f).tolist(), "rho": [0.1],
             "classlabels_ints": [3, 8, 9][:n_classes], "post_transform": "NONE"}
    model = _classifier("SVMClassifier", attrs, f)
    x = RNG.normal(size=(50, f)).astype(np.float32)
    assert_matches(olc_run(model, {"x": x}), ort_run(model, {"x": x}))
    attrs["coefficients"] = np.abs(attrs["coefficients"]).tolist()  # all positive: the 0.5 rule
    model = _classifier("SVMClassifier", attrs, f)
    assert_matches(olc_run(model, {"x": x}), ort_run(model, {"x": x}))


@pytest.mark.parametrize("kernel", ["LINEAR", "POLY", "RBF", "SIGMOID"])
@pytest.mark.parametrize("one_class", [0, 1])
def test_svm_regressor(kernel, one_class):
    rng = np.random.default_rng(7)
    f, nv = 6, 9
    attrs = {"kernel_type": kernel, "kernel_params": [0.2, 0.3, 2.0], "n_supports": nv,
             "support_vectors": rng.normal(size=nv * f).tolist(), "coefficients": rng.normal(size=nv).tolist(),
             "rho": [0.25], "one_class": one_class}
    model = _regressor("SVMRegressor", attrs, f)
    x = rng.normal(size=(40, f)).astype(np.float32)
    assert_matches(olc_run(model, {"x": x}), ort_run(model, {"x": x}))


@pytest.mark.parametrize("f", [1, 3, 7, 8, 9, 15, 16, 17, 31, 33])
@pytest.mark.parametrize("rows", [1, 2, 5])
@pytest.mark.parametrize("nv", [7, 16, 17, 41])
def test_dot_and_distance_kernels_at_every_level(f, rows, nv):
    """Feature counts around the 8- and 16-lane widths, row and weight-row
    counts around the 2 x 4 and 4-row blockings, 16 support vectors and more
    (the kernels over transposed vectors, whose tails are masked), inputs
    against guard pages."""
    rng = np.random.default_rng(f * 10 + rows + nv)
    sv = rng.normal(size=(nv, f)).astype(np.float32)
    coef = rng.normal(size=nv).astype(np.float32)
    x = rng.normal(size=(rows, f)).astype(np.float32)
    for kernel in ("LINEAR", "RBF"):
        attrs = {"kernel_type": kernel, "kernel_params": [0.1, 0.0, 1.0], "n_supports": nv,
                 "support_vectors": sv.ravel().tolist(), "coefficients": coef.tolist(), "rho": [0.0]}
        model = _regressor("SVMRegressor", attrs, f)
        k = x.astype(np.float64) @ sv.T.astype(np.float64) if kernel == "LINEAR" else \
            np.exp(-0.1 * ((x[:, None, :].astype(np.float64) - sv[None].astype(np.float64)) ** 2).sum(-1))
        ref = k @ coef.astype(np.float64)
        for at in ("end", "start"):
            outs = run_on_every_level(model, {"x": guarded(x, at=at)}, expected_kernel="olc_ml::SVMRegressor")
            for level, (y,) in outs.items():
                np.testing.assert_allclose(y[:, 0], ref, rtol=1e-4, atol=1e-4 * max(1.0, np.abs(ref).max()),
                                           err_msg=f"{kernel} at {level}")


def test_rbf_exp_over_its_whole_range():
    """The vectorized exp of the RBF kernel at every level against numpy's:
    squared distances from 0 to past the float range of exp (results below
    the smallest normal float are 0)."""
    nv, f = 40, 1
    sv = np.zeros((nv, f), np.float32)
    coef = np.zeros(nv, np.float32)
    coef[7] = 1.0  # y = exp(-gamma * x^2) through support vector 7
    attrs = {"kernel_type": "RBF", "kernel_params": [1.0, 0.0, 1.0], "n_supports": nv,
             "support_vectors": sv.ravel().tolist(), "coefficients": coef.tolist(), "rho": [0.0]}
    model = _regressor("SVMRegressor", attrs, f)
    d = np.concatenate([np.linspace(0, 10, 400), np.linspace(10, 95, 400)]).astype(np.float32)
    x = np.sqrt(d).reshape(-1, 1).astype(np.float32)
    d32 = (x * x)[:, 0]  # the squared distance as the kernel rounds it, in float32
    ref = np.exp(-d32.astype(np.float64))
    ref[ref < np.finfo(np.float32).tiny] = 0
    for level, (y,) in run_on_every_level(model, {"x": x}).items():
        np.testing.assert_allclose(y[:, 0], ref, rtol=4e-7, atol=0, err_msg=level)


@pytest.mark.parametrize("threads", [1, 2])
def test_large_batches_split_over_threads(threads):
    rng = np.random.default_rng(2)
    f = 20
    attrs = _svc_attrs("RBF", 3, [40, 30, 50], f, True, rng)
    model = _classifier("SVMClassifier", attrs, f)
    x = rng.normal(size=(700, f)).astype(np.float32)
    assert_matches(olc_run(model, {"x": x}, threads), ort_run(model, {"x": x}), atol=5e-5)


@pytest.mark.parametrize("op,attrs,message", [
    ("SVMClassifier", {"kernel_type": "CUBIC", "coefficients": [1.0], "rho": [0.0], "classlabels_ints": [0, 1]},
     "unknown kernel_type 'CUBIC'"),
    ("SVMClassifier", {"kernel_type": "RBF", "vectors_per_class": [1, 1], "support_vectors": [1.0, 2.0, 3.0],
                       "coefficients": [1.0, 1.0], "rho": [0.0], "classlabels_ints": [0, 1]},
     "support_vectors: 3 coefficients are not 2 rows"),
    ("SVMClassifier", {"kernel_type": "RBF", "vectors_per_class": [1, 1], "support_vectors": [1.0, 2.0, 3.0, 4.0],
                       "coefficients": [1.0], "rho": [0.0], "classlabels_ints": [0, 1]},
     "coefficients has 1 entries, 2 needed"),
    ("SVMClassifier", {"kernel_type": "RBF", "vectors_per_class": [1, 1, 1], "support_vectors": [1.0, 2.0] * 3,
                       "coefficients": [1.0] * 6, "rho": [0.0], "classlabels_ints": [0, 1, 2]},
     "rho has 1 entries for 3 class pairs"),
    ("LinearClassifier", {"coefficients": [1.0] * 5, "intercepts": [0.0, 0.0], "classlabels_ints": [0, 1],
                          "post_transform": "CUBE"}, "unknown post_transform 'CUBE'"),
    ("LinearClassifier", {"coefficients": [1.0] * 6, "intercepts": [0.0, 0.0], "classlabels_ints": [0, 1]},
     "the coefficients are for 3 features, the input has 2"),
    ("LinearClassifier", {"coefficients": [1.0] * 2, "intercepts": [0.0], "classlabels_ints": [7]},
     "one score needs two class labels"),
])
def test_bad_models_are_errors_at_creation(op, attrs, message):
    model = _classifier(op, attrs, 2)
    with pytest.raises(olc_core.OlcError, match=rf"node 'node' \({op}\): .*{message}"):
        olc_core.Session(model, strict=True)


def test_a_feature_count_known_only_at_run_time_is_checked_then():
    model = one_node_model("LinearRegressor", [("x", TensorProto.FLOAT, None)], [("y", TensorProto.FLOAT, None)],
                           {"coefficients": [1.0, 2.0], "targets": 1}, opset=1, domain="ai.onnx.ml")
    s = olc_core.Session(model, strict=True)
    np.testing.assert_allclose(s.run(None, {"x": np.array([[1.0, 1.0]], np.float32)})[0], [[3.0]])
    with pytest.raises(olc_core.OlcError, match=r"node 'node' \(LinearRegressor\): the input has 3 features"):
        s.run(None, {"x": np.ones((1, 3), np.float32)})
