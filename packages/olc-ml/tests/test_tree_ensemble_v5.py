"""TreeEnsemble (ai.onnx.ml 5) on strict olc sessions: random forests of
every branch mode (BRANCH_MEMBER sets included), missing-value tracking,
every aggregate and post transform, one and several targets, float32,
float64 and float16, against a plain Python reference written here from the
schema and against onnxruntime; malformed ensembles are OlcErrors naming the
node at session creation.

Two places where onnxruntime 1.32 departs from the schema, so its model is
given adjusted attributes or its answer is not compared: it reads
post_transform 1 as LOGISTIC and 2 as SOFTMAX (the schema: 1 SOFTMAX, 2
LOGISTIC), and it truncates the feature to an integer before looking it up
in a set of 31 values or more, or of values outside [0, 30] (the schema: the
value itself is looked up).
"""

from __future__ import annotations

import math

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import olc_core

KERNEL = "olc_ml::TreeEnsemble"
LEQ, LT, GTE, GT, EQ, NEQ, MEMBER = range(7)
NONE, SOFTMAX, LOGISTIC, SOFTMAX_ZERO, PROBIT = range(5)
AVERAGE, SUM, MIN, MAX = range(4)
NP = {TensorProto.FLOAT: np.float32, TensorProto.DOUBLE: np.float64, TensorProto.FLOAT16: np.float16}


def random_forest(rng, n_trees, depth, n_features, n_targets, modes, missing, big_sets=False):
    """TreeEnsemble attributes (numpy arrays and lists) of random trees:
    branches listed in a shuffled order, leaves too, so nothing depends on
    breadth-first numbering. BRANCH_MEMBER sets hold small integers (values
    of half-integers too when big_sets)."""
    branches: list[dict] = []
    leaves: list[tuple[int, float]] = []

    def grow(level):
        if level == depth or (level > 1 and rng.random() < 0.2):
            leaves.append((int(rng.integers(n_targets)), float(rng.normal(0, 1))))
            return ("leaf", len(leaves) - 1)
        mode = int(rng.choice(modes))
        b = {"feature": int(rng.integers(n_features)), "mode": mode, "split": float(rng.normal(0, 1)),
             "missing": int(rng.random() < 0.5) if missing else 0}
        if mode == MEMBER:
            pool = np.arange(0, 40, 0.5) if big_sets else np.arange(8)
            size = int(rng.integers(31, 40)) if big_sets else int(rng.integers(1, 4))
            b["set"] = sorted(rng.choice(pool, size=size, replace=False).tolist())
            b["split"] = 0.0
        branches.append(b)
        b["true"] = grow(level + 1)
        b["false"] = grow(level + 1)
        return ("node", len(branches) - 1)

    roots = [grow(0) for _ in range(n_trees)]
    node_perm = rng.permutation(len(branches))  # new index of each branch
    leaf_perm = rng.permutation(len(leaves))
    order = np.argsort(node_perm)
    ref = lambda c: (c[0], int(node_perm[c[1]]) if c[0] == "node" else int(leaf_perm[c[1]]))  # noqa: E731
    listed = [branches[i] for i in order]
    sets = []
    for b in listed:
        if b["mode"] == MEMBER:
            sets += b["set"] + [np.nan]
    leaf_list = [leaves[i] for i in np.argsort(leaf_perm)]
    for r in roots:
        assert r[0] == "node", "depth >= 1: a root is a branch"
    attrs = {
        "nodes_featureids": [b["feature"] for b in listed],
        "nodes_modes": np.array([b["mode"] for b in listed], np.uint8),
        "nodes_splits": np.array([b["split"] for b in listed]),
        "nodes_truenodeids": [ref(b["true"])[1] for b in listed],
        "nodes_trueleafs": [int(b["true"][0] == "leaf") for b in listed],
        "nodes_falsenodeids": [ref(b["false"])[1] for b in listed],
        "nodes_falseleafs": [int(b["false"][0] == "leaf") for b in listed],
        "nodes_missing_value_tracks_true": [b["missing"] for b in listed],
        "leaf_targetids": [t for t, _ in leaf_list],
        "leaf_weights": np.array([w for _, w in leaf_list]),
        "tree_roots": [ref(r)[1] for r in roots],
        "n_targets": n_targets,
    }
    if sets:
        attrs["membership_values"] = np.array(sets)
    return attrs


def make_model(attrs, elem, n_features, n_targets, **extra):
    dt = NP[elem]
    kw = {}
    for k, v in {**attrs, **extra}.items():
        if k in ("nodes_splits", "leaf_weights", "membership_values"):
            kw[k] = numpy_helper.from_array(np.asarray(v).astype(dt))
        elif k == "nodes_modes":
            kw[k] = numpy_helper.from_array(np.asarray(v, np.uint8))
        else:
            kw[k] = v
    node = helper.make_node("TreeEnsemble", ["X"], ["Y"], domain="ai.onnx.ml", name="forest", **kw)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("X", elem, [None, n_features])],
                              [helper.make_tensor_value_info("Y", elem, [None, n_targets])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("ai.onnx.ml", 5)])
    model.ir_version = 10
    return model


# ---- the reference: the schema's walk, onnxruntime's aggregation rules -----

def _erf_inv(x):
    sgn = -1.0 if x < 0 else 1.0
    x = (1.0 - x) * (1.0 + x)
    if x == 0:
        return sgn * math.inf
    lg = math.log(x)
    v = 2.0 / (math.pi * 0.147) + 0.5 * lg
    v2 = 1.0 / 0.147 * lg
    return sgn * math.sqrt(-v + math.sqrt(v * v - v2))


def reference(attrs, x, aggregate, post, dtype):
    """The model's output for rows x, computed value by value in float64
    from the dtype-rounded attributes (splits, sets and weights as the model
    stores them)."""
    modes = np.asarray(attrs["nodes_modes"])
    splits = np.asarray(attrs["nodes_splits"]).astype(dtype).astype(np.float64)
    weights = np.asarray(attrs["leaf_weights"]).astype(dtype).astype(np.float64)
    member = {}
    values = iter(np.asarray(attrs.get("membership_values", [])).astype(dtype).astype(np.float64).tolist())
    for i, m in enumerate(modes):
        if m == MEMBER:
            s = set()
            while not math.isnan(v := next(values)):
                s.add(v)
            member[i] = s
    n_targets = attrs["n_targets"]
    n_trees = len(attrs["tree_roots"])
    out = np.zeros((len(x), n_targets))
    for r, row in enumerate(x.astype(np.float64)):
        acc = [0.0] * n_targets
        has = [False] * n_targets
        for root in attrs["tree_roots"]:
            i, leaf = root, False
            while not leaf:
                v = row[attrs["nodes_featureids"][i]]
                s, m = splits[i], modes[i]
                c = {LEQ: v <= s, LT: v < s, GTE: v >= s, GT: v > s, EQ: v == s, NEQ: v != s,
                     MEMBER: v in member.get(i, ())}[int(m)]
                c = c or (bool(attrs["nodes_missing_value_tracks_true"][i]) and math.isnan(v))
                i, leaf = ((attrs["nodes_truenodeids"][i], attrs["nodes_trueleafs"][i]) if c
                           else (attrs["nodes_falsenodeids"][i], attrs["nodes_falseleafs"][i]))
            t, w = attrs["leaf_targetids"][i], weights[i]
            if aggregate in (SUM, AVERAGE):
                acc[t] += w
            elif not has[t] or (w < acc[t] if aggregate == MIN else w > acc[t]):
                acc[t] = w
            has[t] = True
        if aggregate == AVERAGE:
            acc = [a / n_trees for a in acc]
        out[r] = acc
    if n_targets == 1:  # onnxruntime: one target takes PROBIT only
        return np.vectorize(lambda v: math.sqrt(2) * _erf_inv(2 * v - 1))(out) if post == PROBIT else out
    if post == SOFTMAX:
        e = np.exp(out - out.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)
    if post == LOGISTIC:
        return 1 / (1 + np.exp(-out))
    if post == SOFTMAX_ZERO:
        nz = np.abs(out) > 1e-7
        e = np.where(nz, np.exp(out - out.max(axis=1, keepdims=True)), 0.0)
        return e / e.sum(axis=1, keepdims=True)
    if post == PROBIT:
        return np.vectorize(lambda v: math.sqrt(2) * _erf_inv(2 * v - 1))(out)
    return out


def inputs(rng, attrs, n_rows, n_features, dtype):
    """Rows mixing normal values, the splits themselves (boundaries), small
    integers and half-integers (set members and near misses) and NaN."""
    splits = np.asarray(attrs["nodes_splits"]).astype(dtype)
    kinds = rng.integers(0, 5, size=(n_rows, n_features))
    x = rng.normal(0, 1.2, size=(n_rows, n_features))
    x = np.where(kinds == 1, rng.choice(splits, size=x.shape), x)
    x = np.where(kinds == 2, rng.integers(0, 9, size=x.shape), x)
    x = np.where(kinds == 3, rng.integers(0, 18, size=x.shape) / 2, x)
    x = np.where(kinds == 4, np.nan, x)
    return x.astype(dtype)


def olc_run(model, x, threads=1):
    s = olc_core.Session(model, strict=True, record_usage=True, threads=threads)
    (y,) = s.run(None, {"X": x})
    assert s.kernel_usage() == [KERNEL]
    return y


def ort_run(model, x, post):
    if post in (SOFTMAX, LOGISTIC):  # onnxruntime's codes for these two are swapped
        model = model.__class__.FromString(model.SerializeToString())
        for a in model.graph.node[0].attribute:
            if a.name == "post_transform":
                a.i = 3 - a.i
    s = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return s.run(None, {"X": x})[0]


ALL_MODES = [LEQ, LT, GTE, GT, EQ, NEQ, MEMBER]


@pytest.mark.parametrize("elem", [TensorProto.FLOAT, TensorProto.DOUBLE])
@pytest.mark.parametrize("modes", [[LEQ], [LT], [GTE], [GT], [MEMBER, LEQ], ALL_MODES], ids=str)
@pytest.mark.parametrize("missing", [0, 1])
@pytest.mark.parametrize("n_targets", [1, 3])
def test_modes_match_reference_and_onnxruntime(elem, modes, missing, n_targets):
    rng = np.random.default_rng(len(modes) * 100 + missing * 10 + n_targets + elem)
    attrs = random_forest(rng, n_trees=9, depth=5, n_features=6, n_targets=n_targets, modes=modes, missing=missing)
    model = make_model(attrs, elem, 6, n_targets, aggregate_function=SUM)
    dt = NP[elem]
    x = inputs(rng, attrs, 45, 6, dt)
    got = olc_run(model, x)
    assert got.dtype == dt and got.shape == (45, n_targets)
    np.testing.assert_allclose(got, reference(attrs, x, SUM, NONE, dt), rtol=1e-5 if dt == np.float32 else 1e-12,
                               atol=1e-5 if dt == np.float32 else 1e-12)
    np.testing.assert_allclose(got, ort_run(model, x, NONE), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("aggregate", [AVERAGE, SUM, MIN, MAX])
@pytest.mark.parametrize("post", [NONE, SOFTMAX, LOGISTIC, SOFTMAX_ZERO, PROBIT])
@pytest.mark.parametrize("n_targets", [1, 4])
def test_aggregates_and_post_transforms(aggregate, post, n_targets):
    rng = np.random.default_rng(aggregate * 10 + post + 100 * n_targets)
    attrs = random_forest(rng, n_trees=7, depth=4, n_features=5, n_targets=n_targets, modes=ALL_MODES, missing=1)
    if post == PROBIT:  # probit wants scores in (0, 1)
        attrs["leaf_weights"] = rng.uniform(0.05, 0.95 / 7, size=len(attrs["leaf_weights"]))
    model = make_model(attrs, TensorProto.FLOAT, 5, n_targets, aggregate_function=aggregate, post_transform=post)
    x = inputs(rng, attrs, 40, 5, np.float32)
    got = olc_run(model, x)
    np.testing.assert_allclose(got, reference(attrs, x, aggregate, post, np.float32), rtol=2e-5, atol=2e-6)
    np.testing.assert_allclose(got, ort_run(model, x, post), rtol=1e-6, atol=1e-7)


def test_double_keeps_double_precision_and_transforms_round_as_onnxruntime():
    rng = np.random.default_rng(5)
    attrs = random_forest(rng, n_trees=5, depth=4, n_features=4, n_targets=3, modes=[LEQ], missing=0)
    attrs["leaf_weights"] = attrs["leaf_weights"] + 1e-9  # not representable in float32
    x = inputs(rng, attrs, 30, 4, np.float64)
    plain = olc_run(make_model(attrs, TensorProto.DOUBLE, 4, 3), x)
    np.testing.assert_allclose(plain, reference(attrs, x, SUM, NONE, np.float64), rtol=1e-13, atol=1e-13)
    for post in (SOFTMAX, LOGISTIC, PROBIT):
        model = make_model(attrs, TensorProto.DOUBLE, 4, 3, post_transform=post)
        # onnxruntime computes the transforms in float32 for float64 outputs too
        np.testing.assert_array_equal(olc_run(model, x), ort_run(model, x, post))


def test_float16_against_the_reference():
    rng = np.random.default_rng(16)
    for n_targets, aggregate in ((1, SUM), (3, AVERAGE), (2, MAX)):
        attrs = random_forest(rng, n_trees=6, depth=5, n_features=5, n_targets=n_targets, modes=ALL_MODES, missing=1)
        model = make_model(attrs, TensorProto.FLOAT16, 5, n_targets, aggregate_function=aggregate)
        x = inputs(rng, attrs, 50, 5, np.float16)
        got = olc_run(model, x)
        assert got.dtype == np.float16
        want = reference(attrs, x, aggregate, NONE, np.float16)
        # Summed in float32, rounded once to float16: within one float16 step.
        np.testing.assert_allclose(got.astype(np.float64), want, rtol=1e-3, atol=1e-3)


def test_float16_conversions_are_exact():
    import olc_core as core
    ext = core.load_extension("olc_ml._ext")
    every = np.arange(65536, dtype=np.uint16)
    widened = ext._half_to_float(every)
    np.testing.assert_array_equal(widened.view(np.uint32), every.view(np.float16).astype(np.float32).view(np.uint32))
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.normal(0, 1, 20000), rng.normal(0, 1e-5, 20000), rng.normal(0, 3e4, 20000),
                        [65504, 65519.99, 65520, 1e9, -1e9, 5.96e-8, 2.98e-8, 2.99e-8, np.inf, -np.inf, np.nan, -0.0]])
    x = x.astype(np.float32)
    got = ext._float_to_half(x).view(np.float16)
    with np.errstate(over="ignore"):
        want = x.astype(np.float16)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    np.testing.assert_array_equal(got[ok].view(np.uint16), want[ok].view(np.uint16))


def test_big_sets_are_looked_up_by_value():
    rng = np.random.default_rng(31)
    attrs = random_forest(rng, n_trees=6, depth=4, n_features=3, n_targets=2, modes=[MEMBER, LEQ], missing=1,
                          big_sets=True)
    model = make_model(attrs, TensorProto.FLOAT, 3, 2)
    x = inputs(rng, attrs, 60, 3, np.float32)
    np.testing.assert_allclose(olc_run(model, x), reference(attrs, x, SUM, NONE, np.float32), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("rows", [1, 7, 8, 9, 64, 65, 300])
def test_large_forest_row_counts_and_threads(threads, rows):
    rng = np.random.default_rng(rows)
    attrs = random_forest(rng, n_trees=120, depth=6, n_features=8, n_targets=2, modes=[LEQ, MEMBER], missing=1)
    model = make_model(attrs, TensorProto.FLOAT, 8, 2, aggregate_function=AVERAGE)
    x = inputs(rng, attrs, rows, 8, np.float32)
    np.testing.assert_allclose(olc_run(model, x, threads), ort_run(model, x, NONE), rtol=1e-5, atol=1e-6)


def test_one_dimensional_input_and_single_leaf_trees():
    # tree 0 is one leaf (its root's two branches are the same leaf: the leaf
    # numbered as the root), tree 1 a branch.
    attrs = {"nodes_featureids": [0, 1], "nodes_modes": np.array([LEQ, LEQ], np.uint8),
             "nodes_splits": np.array([0.0, 0.5]), "nodes_truenodeids": [0, 1], "nodes_trueleafs": [1, 1],
             "nodes_falsenodeids": [0, 2], "nodes_falseleafs": [1, 1], "nodes_missing_value_tracks_true": [0, 0],
             "leaf_targetids": [0, 0, 0], "leaf_weights": np.array([10.0, 1.0, 2.0]), "tree_roots": [0, 1],
             "n_targets": 1}
    model = make_model(attrs, TensorProto.FLOAT, 2, 1)
    model.graph.input[0].type.tensor_type.ClearField("shape")
    x = np.array([0.0, 0.25], np.float32)
    s = olc_core.Session(model, strict=True)
    np.testing.assert_array_equal(s.run(None, {"X": x})[0], [[11.0]])
    np.testing.assert_array_equal(s.run(None, {"X": x[None, :]})[0], ort_run(model, x[None, :], NONE))


def _single(**change):
    attrs = {"nodes_featureids": [0, 1], "nodes_modes": np.array([LEQ, LEQ], np.uint8),
             "nodes_splits": np.array([0.0, 0.5]), "nodes_truenodeids": [1, 0], "nodes_trueleafs": [0, 1],
             "nodes_falsenodeids": [1, 2], "nodes_falseleafs": [1, 1], "leaf_targetids": [0, 1, 0],
             "leaf_weights": np.array([1.0, 2.0, 3.0]), "tree_roots": [0], "n_targets": 2}
    attrs.update(change)
    return make_model(attrs, TensorProto.FLOAT, 2, 2)


@pytest.mark.parametrize("change,message", [
    ({"post_transform": 9}, "unknown post_transform 9"),
    ({"aggregate_function": 5}, "unknown aggregate_function 5"),
    ({"nodes_featureids": [0, 4]}, "reads feature 4 but the input has 2 features"),
    ({"nodes_truenodeids": [7, 0]}, "node 0: its true branch points to node 7, but there are 2 nodes"),
    ({"nodes_falsenodeids": [1, 3]}, "node 1: its false branch points to leaf 3, but there are 3 leaves"),
    ({"leaf_targetids": [0, 2, 0]}, "leaf 1 is for target 2, but n_targets is 2"),
    ({"tree_roots": [2]}, "tree_roots.0. is 2, but there are 2 nodes"),
    ({"nodes_modes": np.array([LEQ, MEMBER], np.uint8)}, "node 1 is BRANCH_MEMBER, but membership_values"),
    ({"nodes_modes": np.array([LEQ, 9], np.uint8)}, "node 1 has mode 9"),
    ({"nodes_truenodeids": [1, 0], "nodes_trueleafs": [0, 0]}, "node 1: its true branch points to itself|node 0 a second time"),
    ({"nodes_splits": np.array([0.0])}, "nodes_splits has 1 entries, expected 2"),
    ({"leaf_weights": np.array([1.0, 2.0])}, "leaf_weights has 2 entries, expected 3"),
])
def test_bad_ensembles_are_errors_at_creation(change, message):
    with pytest.raises(olc_core.OlcError, match=r"node 'forest' \(TreeEnsemble\): .*(" + message + ")"):
        olc_core.Session(_single(**change), strict=True)


def test_membership_values_for_too_many_sets():
    attrs = {"nodes_featureids": [0], "nodes_modes": np.array([MEMBER], np.uint8), "nodes_splits": np.array([0.0]),
             "nodes_truenodeids": [0], "nodes_trueleafs": [1], "nodes_falsenodeids": [1], "nodes_falseleafs": [1],
             "leaf_targetids": [0, 0], "leaf_weights": np.array([1.0, 2.0]), "tree_roots": [0], "n_targets": 1,
             "membership_values": np.array([1.0, np.nan, 2.0, np.nan])}
    with pytest.raises(olc_core.OlcError, match=r"membership_values holds 2 sets .* but 1 nodes are BRANCH_MEMBER"):
        olc_core.Session(make_model(attrs, TensorProto.FLOAT, 1, 1), strict=True)
    attrs["membership_values"] = np.array([1.0, np.nan])
    s = olc_core.Session(make_model(attrs, TensorProto.FLOAT, 1, 1), strict=True)
    np.testing.assert_array_equal(s.run(None, {"X": np.array([[1.0], [2.0], [np.nan]], np.float32)})[0],
                                  [[1.0], [2.0], [2.0]])


@pytest.fixture
def split_every_forest():
    """Few rows over many trees split the trees over the threads from this
    many node visits; 1 sends every forest of 32 trees or more down that path."""
    olc_core.tuning.set("olc_ml", "TreeEnsemble", "split_node_visits", 1, implementation="optimized", dtype="float32")
    yield
    olc_core.tuning.reset("olc_ml", "TreeEnsemble", "split_node_visits", implementation="optimized", dtype="float32")


@pytest.mark.parametrize("aggregate", [AVERAGE, SUM, MIN, MAX])
@pytest.mark.parametrize("n_trees,n_targets", [(32, 1), (37, 3), (70, 1), (50, 70)])
@pytest.mark.parametrize("rows", [1, 5, 31])
@pytest.mark.parametrize("elem", [TensorProto.FLOAT, TensorProto.DOUBLE])
def test_trees_split_over_threads_for_few_rows(split_every_forest, aggregate, n_trees, n_targets, rows, elem):
    # Each thread's partial scores merged in tree order: the same answer as
    # the plain reference whatever the split, for every aggregate, for share
    # boundaries inside and at the end of the engine's 16-tree walk, and for
    # more scores per share (70 targets x rows) than fit in a cache line.
    rng = np.random.default_rng(n_trees * 100 + rows)
    attrs = random_forest(rng, n_trees=n_trees, depth=5, n_features=6, n_targets=n_targets, modes=[LEQ, MEMBER],
                          missing=1)
    dtype = NP[elem]
    model = make_model(attrs, elem, 6, n_targets, aggregate_function=aggregate)
    x = inputs(rng, attrs, rows, 6, dtype)
    want = reference(attrs, x, aggregate, NONE, dtype)
    tol = 1e-5 if elem == TensorProto.FLOAT else 1e-12
    for threads in (1, 2):
        np.testing.assert_allclose(olc_run(model, x, threads), want, rtol=tol, atol=tol)
