"""olc_core.dask: scoring dask arrays and data frames on a process cluster
(2 workers x 1 thread), a threads-only cluster (2 workers x 1 thread in this
process) and dask's local threaded scheduler. Every result is compared with
one Session.run over the whole data; the reports show one session per
worker with the worker's threads."""

from __future__ import annotations

import hashlib
import importlib.util
import threading
import time

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import olc_core

dask = pytest.importorskip("dask", reason="olc-core[dask] is not installed")
distributed = pytest.importorskip("distributed", reason="olc-core[dask] is not installed")
dd = pytest.importorskip("dask.dataframe", reason="dask.dataframe needs pandas and pyarrow (olc-core[dask])")
import dask.array as da  # noqa: E402
import pandas as pd  # noqa: E402

from olc_core import dask as olc_dask  # noqa: E402

RNG = np.random.default_rng(11)
ROWS = 1000
CHUNK = 150  # 7 partitions, the last one short


def needs(*families):
    missing = [f for f in families if importlib.util.find_spec(f.replace("-", "_")) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed: the model's nodes would run on the onnx.reference "
                    "fallback (nox -s tests installs every family)")


def make_model(nodes, inputs, outputs, initializers=(), ml=False):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    opsets = [helper.make_opsetid("", 17)] + ([helper.make_opsetid("ai.onnx.ml", 3)] if ml else [])
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 9
    return model


def tensor(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


# ----------------------------------------------------------------- models


def tree_model(n_features=6, n_trees=8, depth=4, n_targets=2):
    """A random forest: full trees of ``depth`` levels, node i's children 2i+1 and 2i+2."""
    rng = np.random.default_rng(3)
    attrs = {k: [] for k in ("nodes_treeids", "nodes_nodeids", "nodes_featureids", "nodes_modes", "nodes_values",
                             "nodes_truenodeids", "nodes_falsenodeids", "target_treeids", "target_nodeids",
                             "target_ids", "target_weights")}
    inner = 2 ** depth - 1
    for t in range(n_trees):
        for node in range(2 * inner + 1):
            leaf = node >= inner
            attrs["nodes_treeids"].append(t)
            attrs["nodes_nodeids"].append(node)
            attrs["nodes_featureids"].append(0 if leaf else int(rng.integers(n_features)))
            attrs["nodes_modes"].append("LEAF" if leaf else "BRANCH_LEQ")
            attrs["nodes_values"].append(0.0 if leaf else float(rng.standard_normal()))
            attrs["nodes_truenodeids"].append(0 if leaf else 2 * node + 1)
            attrs["nodes_falsenodeids"].append(0 if leaf else 2 * node + 2)
            for target in range(n_targets) if leaf else ():
                attrs["target_treeids"].append(t)
                attrs["target_nodeids"].append(node)
                attrs["target_ids"].append(target)
                attrs["target_weights"].append(float(rng.standard_normal()))
    node = helper.make_node("TreeEnsembleRegressor", ["X"], ["Y"], name="forest", domain="ai.onnx.ml",
                            n_targets=n_targets, aggregate_function="AVERAGE", **attrs)
    return make_model([node], [tensor("X", TensorProto.FLOAT, ["n", n_features])],
                      [tensor("Y", TensorProto.FLOAT, ["n", n_targets])], ml=True)


def embedding_model(vocab=50, seq=8, width=16, out=8):
    """Token ids -> table rows -> mean over the sequence -> MatMul -> LayerNormalization."""
    rng = np.random.default_rng(4)
    nodes = [
        helper.make_node("Gather", ["E", "ids"], ["e"], name="gather"),
        helper.make_node("ReduceMean", ["e"], ["m"], axes=[1], keepdims=0, name="mean"),
        helper.make_node("MatMul", ["m", "W"], ["h"], name="project"),
        helper.make_node("LayerNormalization", ["h", "g", "b"], ["y"], axis=-1, epsilon=1e-5, name="norm"),
    ]
    inits = [numpy_helper.from_array(rng.standard_normal((vocab, width)).astype(np.float32), "E"),
             numpy_helper.from_array(rng.standard_normal((width, out)).astype(np.float32), "W"),
             numpy_helper.from_array(rng.uniform(0.5, 1.5, out).astype(np.float32), "g"),
             numpy_helper.from_array(rng.standard_normal(out).astype(np.float32), "b")]
    return make_model(nodes, [tensor("ids", TensorProto.INT64, ["n", seq])],
                      [tensor("y", TensorProto.FLOAT, ["n", out])], inits)


def multi_output_model(n_features=6, classes=4):
    """Logits, their softmax, the argmax label (int64, one value per row) and the row sums."""
    rng = np.random.default_rng(5)
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["z"], name="logits"),
        helper.make_node("Softmax", ["z"], ["p"], axis=1, name="softmax"),
        helper.make_node("ArgMax", ["z"], ["label"], axis=1, keepdims=0, name="argmax"),
        helper.make_node("ReduceSum", ["z", "axes"], ["total"], keepdims=1, name="sum"),
    ]
    inits = [numpy_helper.from_array(rng.standard_normal((n_features, classes)).astype(np.float32), "W"),
             numpy_helper.from_array(np.array([1], np.int64), "axes")]
    return make_model(nodes, [tensor("x", TensorProto.FLOAT, ["n", n_features])],
                      [tensor("p", TensorProto.FLOAT, None), tensor("label", TensorProto.INT64, None),
                       tensor("total", TensorProto.FLOAT, None)], inits)


def core_model():
    """Two inputs, two outputs, on olc-core's own kernels only (Flatten, Unsqueeze)."""
    nodes = [helper.make_node("Flatten", ["a"], ["flat"], axis=1, name="flatten"),
             helper.make_node("Unsqueeze", ["b", "one"], ["col"], name="unsqueeze")]
    return make_model(nodes, [tensor("a", TensorProto.FLOAT, ["n", 2, 3]), tensor("b", TensorProto.INT64, ["n"])],
                      [tensor("flat", TensorProto.FLOAT, None), tensor("col", TensorProto.INT64, None)],
                      [numpy_helper.from_array(np.array([1], np.int64), "one")])


def ids_data(rows=ROWS, vocab=50, seq=8):
    return RNG.integers(0, vocab, (rows, seq)).astype(np.int64)


def float_data(rows=ROWS, width=6):
    return RNG.standard_normal((rows, width)).astype(np.float32)


# (model, families, feeds over the whole data)
CASES = {
    "tree": (tree_model, ("olc-ml",), lambda: {"X": float_data()}),
    "embedding": (embedding_model, ("olc-tensor", "olc-matmul", "olc-normalization"), lambda: {"ids": ids_data()}),
    "multi-output": (multi_output_model, ("olc-matmul", "olc-normalization", "olc-tensor"),
                     lambda: {"x": float_data()}),
    "core-only": (core_model, (), lambda: {"a": RNG.standard_normal((ROWS, 2, 3)).astype(np.float32),
                                           "b": RNG.integers(-5, 5, ROWS).astype(np.int64)}),
}


def one_session(model, feeds):
    """The oracle: one strict Session.run over all the rows at once."""
    return olc_core.Session(model, strict=True).run(None, feeds)


# ------------------------------------------------------------- clusters


@pytest.fixture(scope="module")
def process_client():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as c, \
            distributed.Client(c, set_as_default=False) as client:
        yield client


@pytest.fixture(scope="module")
def thread_client():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0") as c, \
            distributed.Client(c, set_as_default=False) as client:
        yield client


class Where:
    """Where a test computes: ``compute(*collections)`` and each worker's thread budget."""

    def __init__(self, name, client=None):
        self.name = name
        self.client = client
        if client is not None:
            # Asked of the scheduler: scheduler_info() returns the client's cached
            # identity, which its periodic refresh replaces with one that lists no
            # workers (every worker filter then matched nothing, now and then).
            self.nthreads = dict(client.nthreads())
            assert len(self.nthreads) == 2, self.nthreads
        else:
            self.nthreads = {"": min(2, olc_core.default_thread_count())}

    def compute(self, *collections):
        if self.client is not None:
            return dask.compute(*collections, scheduler=self.client)
        with dask.config.set(num_workers=2):
            return dask.compute(*collections, scheduler="threads")


@pytest.fixture(params=["processes", "threads-cluster", "threads"])
def where(request):
    if request.param == "processes":
        return Where("processes", request.getfixturevalue("process_client"))
    if request.param == "threads-cluster":
        return Where("threads-cluster", request.getfixturevalue("thread_client"))
    return Where("threads")


def check_sessions(report, where, partitions):
    """One session per worker, each with its worker's threads; every partition counted once."""
    sessions = report.sessions
    assert sessions, report
    workers = [s.worker for s in sessions]
    assert len(set(workers)) == len(workers), f"a worker built several sessions: {sessions}"
    assert set(workers) <= set(where.nthreads), (workers, where.nthreads)
    for s in sessions:
        assert s.threads == where.nthreads[s.worker], (s, where.nthreads)
    assert sum(s.threads for s in sessions) <= sum(where.nthreads.values())
    assert sum(s.partitions for s in sessions) == partitions
    if where.name == "processes":
        assert len({s.pid for s in sessions}) == len(sessions)


# ---------------------------------------------------------------- arrays


@pytest.mark.parametrize("case", list(CASES))
def test_arrays_equal_one_session(case, where):
    build, families, make_feeds = CASES[case]
    needs(*families)
    model, feeds = build(), make_feeds()
    want = one_session(model, feeds)
    arrays = {n: da.from_array(v, chunks=(CHUNK, *v.shape[1:])) for n, v in feeds.items()}
    data = arrays if len(arrays) > 1 else next(iter(arrays.values()))
    got, report = olc_dask.score(model, data, report=True, strict=True)
    got = got if isinstance(got, tuple) else (got,)
    assert [g.dtype for g in got] == [w.dtype for w in want]
    *values, report = where.compute(*got, report)
    assert len(values) == len(want)
    for g, w in zip(values, want):
        np.testing.assert_array_equal(g, w)
    assert report.partitions == 7 and report.errors == ()
    assert report.kernel_plan and all(e.native for e in report.kernel_plan), report.kernel_plan
    check_sessions(report, where, 7)


def test_outputs_pick_and_order(where):
    needs("olc-matmul", "olc-normalization", "olc-tensor")
    model, x = multi_output_model(), float_data()
    p, label, total = one_session(model, {"x": x})
    xs = da.from_array(x, chunks=CHUNK)
    only = olc_dask.score(model, xs, outputs="label")
    pair = olc_dask.score(model, xs, outputs=["total", "p"])
    assert isinstance(only, da.Array) and isinstance(pair, tuple) and len(pair) == 2
    got_label, got_total, got_p = where.compute(only, *pair)
    np.testing.assert_array_equal(got_label, label)
    np.testing.assert_array_equal(got_total, total)
    np.testing.assert_array_equal(got_p, p)


def test_blocks_split_along_features_and_batch_rows(where):
    needs("olc-ml")
    model, x = tree_model(), float_data()
    (want,) = one_session(model, {"X": x})
    xs = da.from_array(x, chunks=(CHUNK, 4))  # split along the features too: rechunked to whole rows
    got, report = olc_dask.score(model, xs, batch_rows=32, report=True)
    got, report = where.compute(got, report)
    np.testing.assert_array_equal(got, want)
    check_sessions(report, where, 7)


def test_model_from_a_path(process_client, tmp_path):
    needs("olc-ml")
    model, x = tree_model(), float_data()
    path = tmp_path / "forest.onnx"
    path.write_bytes(model.SerializeToString())
    (want,) = one_session(model, {"X": x})
    got = olc_dask.score(str(path), da.from_array(x, chunks=CHUNK))
    np.testing.assert_array_equal(got.compute(scheduler=process_client), want)


def test_sessions_are_kept_across_computations(process_client):
    needs("olc-ml")
    model, x = tree_model(n_trees=3), float_data()
    # Other partitions the second time: other keys, which the scheduler cannot answer from memory.
    first = dask.compute(olc_dask.score(model, da.from_array(x, chunks=100), report=True)[1],
                         scheduler=process_client)[0]
    second = dask.compute(olc_dask.score(model, da.from_array(x, chunks=200), report=True)[1],
                          scheduler=process_client)[0]
    digest = first.sessions[0].model
    held = {addr: [s for s in stats if s.model == digest]
            for addr, stats in process_client.run(olc_dask.session_stats).items()}
    # Each worker process holds at most one session of this model, the one both computations used.
    assert all(len(s) <= 1 for s in held.values()), held
    assert {(s.pid, s.serial) for s in first.sessions} | {(s.pid, s.serial) for s in second.sessions} == {
        (s[0].pid, s[0].serial) for s in held.values() if s}
    assert sum(s[0].partitions for s in held.values() if s) == 10 + 5
    assert all(s[0].threads == 1 for s in held.values() if s)


def scored_so_far(where, digest):
    """Partitions the sessions of this model have scored, over every worker of ``where``."""
    if where.name == "processes":
        stats = [s for per_worker in where.client.run(olc_dask.session_stats).values() for s in per_worker]
    else:
        stats = olc_dask.session_stats()  # the threads-only cluster's workers live in this process
    return sum(s.partitions for s in stats if s.model == digest and s.worker in where.nthreads)


def digest_of(model):
    return hashlib.sha256(model.SerializeToString()).hexdigest()[:16]


def test_outputs_and_report_run_each_partition_once(where):
    model = core_model()
    feeds = CASES["core-only"][2]()
    # One output (its blocks could fuse with their partitions), several, and a reduction over one.
    # Each computation has its own row chunks (7 partitions each): keys the scheduler has not seen.
    cases = [("flat", False), ("flat", True), (None, False), (None, True)]
    for (outputs, reduce), chunk in zip(cases, range(CHUNK, CHUNK - 4, -1)):
        data = {n: da.from_array(v, chunks=chunk) for n, v in feeds.items()}
        got, report = olc_dask.score(model, data, outputs=outputs, report=True)
        got = (got,) if outputs else got
        before = scored_so_far(where, digest_of(model))
        where.compute(*((got[0].sum(),) if reduce else got), report)
        assert scored_so_far(where, digest_of(model)) - before == 7, (outputs, reduce)
    flat_model = make_model([helper.make_node("Flatten", ["x"], ["y"], axis=1, name="flatten")],
                            [tensor("x", TensorProto.FLOAT, ["n", 6])], [tensor("y", TensorProto.FLOAT, None)])
    df = dd.from_pandas(pd.DataFrame(feeds["a"].reshape(ROWS, 6)), npartitions=5)
    scores, report = olc_dask.score(flat_model, df, report=True)
    before = scored_so_far(where, digest_of(flat_model))
    where.compute(scores, report)
    assert scored_so_far(where, digest_of(flat_model)) - before == 5


def test_session_options_reach_the_sessions():
    needs("olc-elementwise")
    nodes = [helper.make_node("Exp", ["x"], ["e"], name="exp"), helper.make_node("Neg", ["e"], ["y"], name="neg")]
    model = make_model(nodes, [tensor("x", TensorProto.FLOAT, ["n", 3])], [tensor("y", TensorProto.FLOAT, None)])
    x = float_data(40, 3)
    for options in ({}, {"fusion": False, "naive": ["olc-elementwise"], "strict": True}):
        y, report = olc_dask.score(model, da.from_array(x, chunks=20), report=True, **options)
        y, report = dask.compute(y, report, scheduler="threads")
        session = olc_core.Session(model, **options)
        np.testing.assert_array_equal(y, session.run(None, {"x": x})[0])
        assert report.kernel_plan == tuple(session.kernel_plan()), options
    # The chain runs as one fused kernel by default, as two with fusion=False.
    assert len(report.kernel_plan) == 2 and len(olc_core.Session(model).kernel_plan()) == 1


def test_runs_take_turns_on_a_session(monkeypatch):
    # Two dask threads share one session of two threads: were their runs
    # concurrent, four threads would compete for two cores.
    active = peak = 0
    count = threading.Lock()
    run = olc_core.Session.run

    def counting_run(self, *args, **kwargs):
        nonlocal active, peak
        with count:
            active += 1
            peak = max(peak, active)
        try:
            time.sleep(0.002)  # a window another thread would enter
            return run(self, *args, **kwargs)
        finally:
            with count:
                active -= 1

    monkeypatch.setattr(olc_core.Session, "run", counting_run)
    model = make_model([helper.make_node("Flatten", ["x"], ["y"], axis=1, name="flatten")],
                       [tensor("x", TensorProto.FLOAT, ["n", 3])], [tensor("y", TensorProto.FLOAT, None)])
    x = float_data(400, 3)
    with dask.config.set(num_workers=2):
        y, report = olc_dask.score(model, da.from_array(x, chunks=10), threads_per_worker=2, report=True)
        y, report = dask.compute(y, report, scheduler="threads")
    np.testing.assert_array_equal(y, x)
    assert [s.threads for s in report.sessions] == [2]
    assert peak == 1


def test_threaded_scheduler_threads_follow_the_pool():
    model = core_model()
    feeds = CASES["core-only"][2]()
    data = {n: da.from_array(v, chunks=CHUNK) for n, v in feeds.items()}
    olc_dask.clear_sessions()
    with dask.config.set(num_workers=1):
        (flat, col), report = olc_dask.score(model, data, report=True)
        *_, report = dask.compute(flat, col, report, scheduler="threads")
    assert [s.threads for s in report.sessions] == [1]
    (flat, col), report = olc_dask.score(model, data, threads_per_worker=2, report=True)
    *_, report = dask.compute(flat, col, report, scheduler="threads")
    assert [s.threads for s in report.sessions] == [2]
    assert sorted(s.threads for s in olc_dask.session_stats()) == [1, 2]
    assert olc_dask.clear_sessions() == 2 and olc_dask.session_stats() == []


# ------------------------------------------------------------ data frames


def test_frames_equal_one_session(where):
    needs("olc-ml")
    model, x = tree_model(), float_data()
    (want,) = one_session(model, {"X": x})
    features = [f"f{i}" for i in range(6)]
    pdf = pd.DataFrame(x, columns=features, index=np.arange(ROWS) * 10)
    pdf.insert(2, "id", np.arange(ROWS))  # not a feature: left out by columns=
    df = dd.from_pandas(pdf, npartitions=7)
    scores, report = olc_dask.score(model, df, columns=features, report=True)
    assert list(scores.columns) == ["Y_0", "Y_1"]
    got, report = where.compute(scores, report)
    assert list(got.index) == list(pdf.index)
    np.testing.assert_array_equal(got.to_numpy(), want)
    check_sessions(report, where, 7)


def test_frame_with_several_outputs_and_inputs(where):
    needs("olc-matmul", "olc-normalization", "olc-tensor")
    model, x = multi_output_model(), float_data()
    p, label, total = one_session(model, {"x": x})
    df = dd.from_pandas(pd.DataFrame(x, columns=list("abcdef")), npartitions=4)
    got = where.compute(olc_dask.score(model, df))[0]
    assert list(got.columns) == ["p_0", "p_1", "p_2", "p_3", "label", "total"]
    assert got["label"].dtype == np.int64
    np.testing.assert_array_equal(got[["p_0", "p_1", "p_2", "p_3"]].to_numpy(), p)
    np.testing.assert_array_equal(got["label"].to_numpy(), label)
    np.testing.assert_array_equal(got["total"].to_numpy(), total[:, 0])


def test_frame_columns_per_input():
    model = core_model()
    a = RNG.standard_normal((50, 2, 3)).astype(np.float32)
    b = RNG.integers(0, 9, 50).astype(np.int64)
    flat, col = one_session(model, {"a": a, "b": b})
    # A [rows, 2, 3] input cannot come from columns; a [rows] one comes from one column.
    pdf = pd.DataFrame({"b": b, **{f"a{i}": a.reshape(50, 6)[:, i] for i in range(6)}})
    with pytest.raises(olc_core.OlcError, match="input 'a' has 3 dimensions"):
        olc_dask.score(model, dd.from_pandas(pdf, npartitions=2), columns={"a": [f"a{i}" for i in range(6)], "b": "b"})
    flat_model = make_model([helper.make_node("Flatten", ["a"], ["flat"], axis=1, name="flatten"),
                             helper.make_node("Unsqueeze", ["b", "one"], ["col"], name="unsqueeze")],
                            [tensor("a", TensorProto.FLOAT, ["n", 6]), tensor("b", TensorProto.INT64, ["n"])],
                            [tensor("flat", TensorProto.FLOAT, None), tensor("col", TensorProto.INT64, None)],
                            [numpy_helper.from_array(np.array([1], np.int64), "one")])
    got = olc_dask.score(flat_model, dd.from_pandas(pdf, npartitions=3),
                         columns={"a": [f"a{i}" for i in range(6)], "b": "b"}).compute(scheduler="threads")
    np.testing.assert_array_equal(got[[f"flat_{i}" for i in range(6)]].to_numpy(), flat)
    np.testing.assert_array_equal(got["col"].to_numpy(), col[:, 0])


# ----------------------------------------------------------------- errors


def bad_ids():
    ids = ids_data()
    ids[2 * CHUNK + 5, 3] = 99  # partition 2: past the 50-row table
    return ids


def test_a_failed_partition_raises_its_node_error(where):
    needs("olc-tensor", "olc-matmul", "olc-normalization")
    scored = olc_dask.score(embedding_model(), da.from_array(bad_ids(), chunks=(CHUNK, 8)))
    with pytest.raises(olc_core.OlcError, match=r"^partition 2 \(rows 300-449\): node 'gather' \(Gather\)") as info:
        where.compute(scored)
    assert info.value.partition == 2


def test_collected_errors_keep_the_other_partitions(where):
    needs("olc-tensor", "olc-matmul", "olc-normalization")
    model, ids = embedding_model(), bad_ids()
    good = ids.copy()
    good[2 * CHUNK + 5, 3] = 0
    (want,) = one_session(model, {"ids": good})
    got, report = olc_dask.score(model, da.from_array(ids, chunks=(CHUNK, 8)), errors="collect", report=True)
    got, report = where.compute(got, report)
    assert report.failed_partitions == (2,)
    assert "node 'gather' (Gather)" in str(report.errors[0]) and report.errors[0].partition == 2
    failed = np.zeros(ROWS, bool)
    failed[2 * CHUNK:3 * CHUNK] = True
    assert np.isnan(got[failed]).all()
    np.testing.assert_array_equal(got[~failed], want[~failed])
    assert report.kernel_plan is not None


def test_a_partition_of_another_dtype_in_a_frame(where):
    # A frame whose meta says float32 but one partition holds float64: that
    # partition's feed check fails on its worker; the others are scored.
    model = make_model([helper.make_node("Flatten", ["x"], ["y"], axis=1, name="flatten")],
                       [tensor("x", TensorProto.FLOAT, ["n", 3])], [tensor("y", TensorProto.FLOAT, None)])
    x = float_data(300, 3)
    pdf = pd.DataFrame(x, columns=["a", "b", "c"])
    parts = [dask.delayed(pdf.iloc[i * 100:(i + 1) * 100].astype, pure=True)(np.float64 if i == 1 else np.float32)
             for i in range(3)]
    df = dd.from_delayed(parts, meta=pdf.iloc[:0], verify_meta=False)
    with pytest.raises(olc_core.OlcError, match=r"^partition 1: feed 'x' .* has dtype float64, the model declares float32"):
        where.compute(olc_dask.score(model, df))
    got, report = where.compute(*olc_dask.score(model, df, errors="collect", report=True))
    assert report.failed_partitions == (1,)
    np.testing.assert_array_equal(got.iloc[:100].to_numpy(), x[:100])
    assert got.iloc[100:200].isna().all().all()
    np.testing.assert_array_equal(got.iloc[200:].to_numpy(), x[200:])


def test_a_partition_without_a_feature_column():
    model = make_model([helper.make_node("Flatten", ["x"], ["y"], axis=1, name="flatten")],
                       [tensor("x", TensorProto.FLOAT, ["n", 2])], [tensor("y", TensorProto.FLOAT, None)])
    pdf = pd.DataFrame(float_data(20, 2), columns=["a", "b"])
    parts = [dask.delayed(pdf.iloc[:10].copy, pure=True)(), dask.delayed(pdf.iloc[10:].drop, pure=True)(columns="b")]
    df = dd.from_delayed(parts, meta=pdf.iloc[:0], verify_meta=False)
    with pytest.raises(olc_core.OlcError, match=r"^partition 1: input 'x': the partition lacks column\(s\) .*'b'"):
        olc_dask.score(model, df).compute(scheduler="threads")


def test_checks_on_the_client():
    model = embedding_model()
    ids = da.from_array(ids_data(), chunks=CHUNK)
    with pytest.raises(olc_core.OlcError, match="feed 'ids' has dtype int32, the model declares int64"):
        olc_dask.score(model, ids.astype(np.int32))
    with pytest.raises(ValueError, match="no output 'z'"):
        olc_dask.score(model, ids, outputs="z")
    with pytest.raises(ValueError, match="pass report=True"):
        olc_dask.score(model, ids, errors="collect")
    with pytest.raises(ValueError, match="errors must be"):
        olc_dask.score(model, ids, errors="ignore")
    with pytest.raises(TypeError, match="cannot be sent to workers"):
        olc_dask.score(olc_core.Session(core_model()), ids)
    with pytest.raises(TypeError, match="unexpected options profile"):
        olc_dask.score(model, ids, profile=True)
    with pytest.raises(ValueError, match="lacks b"):
        olc_dask.score(core_model(), {"a": da.zeros((4, 2, 3), np.float32)})
    with pytest.raises(ValueError, match="compute_chunk_sizes"):
        olc_dask.score(model, ids[ids[:, 0] > 3])
    with pytest.raises(ValueError, match="batch_rows"):
        olc_dask.score(model, ids, batch_rows=0)
    df = dd.from_pandas(pd.DataFrame({"a": [1.0, 2.0]}), npartitions=1)
    with pytest.raises(ValueError, match="no column 'b'"):
        olc_dask.score(model, df, columns=["b"])


def test_a_model_that_is_not_row_wise(where):
    # Flatten at axis 0: one output row per partition, not per input row.
    model = make_model([helper.make_node("Flatten", ["x"], ["y"], axis=0, name="flatten")],
                       [tensor("x", TensorProto.FLOAT, ["n", 3])], [tensor("y", TensorProto.FLOAT, [1, None])])
    with pytest.raises(olc_core.OlcError, match="one output row per input row"):
        where.compute(olc_dask.score(model, da.from_array(float_data(20, 3), chunks=10)))
