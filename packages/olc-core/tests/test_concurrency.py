"""Concurrency: several Python threads on one session, several sessions at
once, nested parallel regions. Each result is checked against numpy, so a
race shows as a wrong answer here; under `nox -s tsan` (olc-core and
olc-elementwise built with ThreadSanitizer) it also shows as a report that
halts the run."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest
from onnx import TensorProto, helper

import olc_core
from olc_core import KernelRegistration, _native, hookimpl

PY_THREADS = 4


class _TestKernels:
    @hookimpl
    def olc_register_kernels(self):
        return [
            KernelRegistration("test.olc", "Scale", "olc_core_test::Scale", {"T": ("float32",)}, ("T",),
                               _native._test_vtable("scale"), outputs=("T",), family="olc-core-tests"),
        ]


@pytest.fixture
def test_kernels():
    plugin = _TestKernels()
    olc_core.register_plugin(plugin, name="olc-core-concurrency-tests")
    yield plugin
    olc_core.unregister_plugin(plugin)


def _model(nodes, inputs, outputs, opsets=(("", 21),)):
    graph = helper.make_graph(nodes, "g", inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets])
    model.ir_version = 10
    return model


def _scale_chain(n_nodes: int, factor: float):
    """x -> Scale -> ... -> Scale, every node native (core's test kernel, which splits its work on the executor)."""
    names = ["x"] + [f"y{i}" for i in range(n_nodes)]
    nodes = [helper.make_node("Scale", [names[i]], [names[i + 1]], domain="test.olc", name=f"scale{i}",
                              factor=factor) for i in range(n_nodes)]
    io = helper.make_tensor_value_info
    return _model(nodes, [io("x", TensorProto.FLOAT, ["n"])], [io(names[-1], TensorProto.FLOAT, ["n"])],
                  opsets=(("", 21), ("test.olc", 1)))


def _hammer(jobs: list[Callable[[], Any]], rounds: int) -> list[Any]:
    """Runs every job `rounds` times, the jobs interleaved on PY_THREADS Python threads started together."""
    start = threading.Barrier(PY_THREADS)

    def worker(k: int) -> list[Any]:
        start.wait()
        return [jobs[(k + r) % len(jobs)]() for r in range(rounds)]

    with ThreadPoolExecutor(PY_THREADS) as pool:
        return [out for part in pool.map(worker, range(PY_THREADS)) for out in part]


def test_python_threads_share_one_session(test_kernels):
    sess = olc_core.Session(_scale_chain(4, 1.5), threads=2, strict=True, record_usage=True)
    rng = np.random.default_rng(0)
    # Sizes above and below the kernel's parallel threshold, so some runs use the pool and some do not.
    feeds = [rng.standard_normal(n).astype(np.float32) for n in (1 << 18, 1000, 70001, 3)]

    def job(x: np.ndarray) -> Callable[[], bool]:
        def run() -> bool:
            (y,) = sess.run(None, {"x": x})
            np.testing.assert_allclose(y, x * np.float32(1.5) ** 4, rtol=1e-6)
            return True
        return run

    assert all(_hammer([job(x) for x in feeds], rounds=6))
    assert sess.kernel_usage() == ["olc_core_test::Scale"] * 4


def test_sessions_run_at_once_on_their_own_pools(test_kernels):
    sessions = [olc_core.Session(_scale_chain(3, f), threads=2, strict=True) for f in (0.5, 2.0, -1.0)]
    x = np.random.default_rng(1).standard_normal(1 << 18).astype(np.float32)

    def job(sess: olc_core.Session, f: float) -> Callable[[], bool]:
        def run() -> bool:
            (y,) = sess.run(None, {"x": x})
            np.testing.assert_allclose(y, x * np.float32(f) ** 3, rtol=1e-6)
            return True
        return run

    assert all(_hammer([job(s, f) for s, f in zip(sessions, (0.5, 2.0, -1.0))], rounds=5))


def test_nested_parallel_regions_run_inline():
    # The executor's own probe: a range that submits a nested parallel_for runs it on its own thread.
    def run() -> dict[str, Any]:
        return dict(_native.executor_probe(2, 20000, 16, 0, True))

    for probe in _hammer([run], rounds=3):
        assert probe["min_hits"] == 1 and probe["max_hits"] == 1 and not probe["nested_escaped"]


def test_if_subgraphs_share_the_pool_under_concurrent_runs(test_kernels):
    """If branches run on sub-sessions that share the enclosing session's pool;
    several Python threads entering them at once must still get their own values."""
    io = helper.make_tensor_value_info

    def branch(name: str, factor: float):
        node = helper.make_node("Scale", ["x"], [f"{name}_y"], domain="test.olc", factor=factor)
        return helper.make_graph([node], name, [], [io(f"{name}_y", TensorProto.FLOAT, ["n"])])

    nodes = [helper.make_node("If", ["c"], ["y"], then_branch=branch("then", 3.0), else_branch=branch("else", -2.0))]
    model = _model(nodes, [io("c", TensorProto.BOOL, []), io("x", TensorProto.FLOAT, ["n"])],
                   [io("y", TensorProto.FLOAT, ["n"])], opsets=(("", 21), ("test.olc", 1)))
    sess = olc_core.Session(model, threads=2, strict=True)
    x = np.random.default_rng(2).standard_normal(1 << 17).astype(np.float32)

    def job(cond: bool) -> Callable[[], bool]:
        def run() -> bool:
            (y,) = sess.run(None, {"c": np.array(cond), "x": x})
            np.testing.assert_allclose(y, x * np.float32(3.0 if cond else -2.0), rtol=1e-6)
            return True
        return run

    assert all(_hammer([job(True), job(False)], rounds=6))


def test_shape_plan_cache_under_concurrent_runs_of_different_shapes():
    """The per-shape cache of Shape -> Gather -> Concat -> Reshape chains is
    filled and read by several threads at once, each with its own shapes."""
    io = helper.make_tensor_value_info
    const = helper.make_tensor
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "i0"], ["d0"], axis=0),
        helper.make_node("Concat", ["d0", "m1"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "g", [io("x", TensorProto.FLOAT, ["a", "b", "c"])], [io("y", TensorProto.FLOAT, ["a", None])],
        initializer=[const("i0", TensorProto.INT64, [1], [0]), const("m1", TensorProto.INT64, [1], [-1])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    sess = olc_core.Session(model, threads=2)
    shapes = [(2, 3, 4), (5, 1, 7), (1, 8, 8), (3, 3, 3), (6, 2, 5)]
    rng = np.random.default_rng(3)
    feeds = [rng.standard_normal(s).astype(np.float32) for s in shapes]

    def job(x: np.ndarray) -> Callable[[], bool]:
        def run() -> bool:
            (y,) = sess.run(None, {"x": x})
            np.testing.assert_array_equal(y, x.reshape(x.shape[0], -1))
            return True
        return run

    assert all(_hammer([job(x) for x in feeds], rounds=8))


def _elementwise_installed() -> bool:
    return any(r.family == "olc-elementwise" for r in olc_core.registered_kernels())


@pytest.mark.skipif(not _elementwise_installed(), reason="olc-elementwise is not installed")
def test_fused_elementwise_chain_from_several_threads():
    """A chain fused into one ElementwisePlan kernel plus a broadcast binary
    node, large enough to be split across the pool, run from several threads."""
    io = helper.make_tensor_value_info
    nodes = [
        helper.make_node("Mul", ["x", "b"], ["t0"]),
        helper.make_node("Exp", ["t0"], ["t1"]),
        helper.make_node("Add", ["t1", "x"], ["t2"]),
        helper.make_node("Sigmoid", ["t2"], ["y"]),
    ]
    model = _model(nodes, [io("x", TensorProto.FLOAT, [256, 1024]), io("b", TensorProto.FLOAT, [1024])],
                   [io("y", TensorProto.FLOAT, [256, 1024])])
    sess = olc_core.Session(model, threads=2, strict=True)
    rng = np.random.default_rng(4)
    cases = [(rng.standard_normal((256, 1024)).astype(np.float32) * 0.5,
              rng.standard_normal(1024).astype(np.float32) * 0.5) for _ in range(3)]

    def job(x: np.ndarray, b: np.ndarray) -> Callable[[], bool]:
        expect = 1.0 / (1.0 + np.exp(-(np.exp(x.astype(np.float64) * b) + x)))

        def run() -> bool:
            (y,) = sess.run(None, {"x": x, "b": b})
            np.testing.assert_allclose(y, expect, rtol=1e-5, atol=1e-6)
            return True
        return run

    assert all(_hammer([job(x, b) for x, b in cases], rounds=4))


@pytest.mark.parametrize("offset", [1, 2, 3])
def test_misaligned_feed_reaches_kernels_aligned(test_kernels, offset):
    """A feed at an odd address (an array unpickled from a message frame, or
    np.frombuffer at an offset) is copied before a kernel reads it as floats;
    under the sanitizers UBSan would report the misaligned loads otherwise."""
    x = np.linspace(-3, 3, 1001, dtype=np.float32)
    raw = bytearray(x.nbytes + offset)
    fed = np.frombuffer(raw, dtype=np.float32, count=x.size, offset=offset)
    assert not fed.flags.aligned
    raw[offset:] = x.tobytes()
    sess = olc_core.Session(_scale_chain(2, 0.5), threads=2, strict=True)
    (y,) = sess.run(None, {"x": fed})
    np.testing.assert_array_equal(y, x * np.float32(0.25))
    np.testing.assert_array_equal(fed, x)  # the caller's buffer is left as it was
