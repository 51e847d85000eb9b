"""olc_core.testing: guarded arrays fault on a byte past the end (or before
the start), and the every-level runner runs each level it lists."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest
from onnx import TensorProto

import olc_core
from olc_core import testing


@pytest.mark.parametrize("at", ["end", "start"])
@pytest.mark.parametrize("n", [0, 1, 7, 1024, 4097])
def test_guarded_array_holds_the_values(at, n):
    values = np.arange(n, dtype=np.float32).reshape(-1, 1) * 0.5
    g = testing.guarded(values, at=at)
    assert g.shape == values.shape and g.dtype == values.dtype and g.flags.c_contiguous and g.flags.writeable
    np.testing.assert_array_equal(g, values)
    g[...] = 3  # writable in place, up to the last byte
    assert np.all(g == 3)


@pytest.mark.parametrize("at", ["end", "start"])
@pytest.mark.parametrize("shape", [(), (0,), (3, 0, 2), (1, 1, 1)])
def test_guarded_array_keeps_its_shape(at, shape):
    values = np.full(shape, 2.5, dtype=np.float64)
    g = testing.guarded(values, at=at)
    assert g.shape == shape and g.ndim == len(shape)
    np.testing.assert_array_equal(g, values)


def _dies(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, timeout=60)


@pytest.mark.parametrize("at,index", [("end", "g.nbytes"), ("start", "-1")])
def test_touching_past_a_guarded_array_faults(at, index):
    # One byte past the end (or before the start), read through ctypes as a
    # kernel would: the child is killed by SIGSEGV, not handed garbage.
    p = _dies(f"""
        import ctypes, numpy as np
        from olc_core import testing
        g = testing.guarded(np.ones(10, np.float32), at={at!r})
        inside = ctypes.c_uint8.from_address(g.ctypes.data + (g.nbytes - 1 if {at!r} == "end" else 0)).value
        print("inside", inside, flush=True)
        ctypes.c_uint8.from_address(g.ctypes.data + {index}).value
        print("not reached", flush=True)
    """)
    assert b"inside" in p.stdout and b"not reached" not in p.stdout
    # SIGSEGV; under AddressSanitizer (abort_on_error) its SEGV report, then SIGABRT.
    assert p.returncode == -11 or (p.returncode == -6 and b"SEGV on unknown address" in p.stderr), (
        p.returncode, p.stderr[-400:])


def test_bad_placement_is_refused():
    with pytest.raises(ValueError, match="at must be"):
        testing.guarded(np.zeros(3), at="middle")


def test_every_level_runs_its_level():
    m = testing.one_node_model("Reshape", [("x", TensorProto.FLOAT, [6]), ("s", TensorProto.INT64, [2])],
                               [("y", TensorProto.FLOAT, None)])
    x = testing.guarded(np.arange(6, dtype=np.float32))
    results = testing.run_on_every_level(m, {"x": x, "s": np.array([2, 3])}, expected_kernel="olc_core::Reshape")
    assert list(results) == testing.simd_levels()
    assert testing.simd_levels()[-1] == olc_core.simd_level()
    for (y,) in results.values():
        np.testing.assert_array_equal(y, np.arange(6, dtype=np.float32).reshape(2, 3))
    with olc_core.simd_cap("scalar"):
        assert testing.simd_levels() == ["scalar"]
    with pytest.raises(AssertionError, match="expected olc_core::Flatten"):
        testing.run_on_every_level(m, {"x": x, "s": np.array([3, 2])}, expected_kernel="olc_core::Flatten")


def test_one_node_model_takes_initializers_and_other_domains():
    m = testing.one_node_model("Shape", [("x", TensorProto.FLOAT, [2, 5])], [("y", TensorProto.INT64, None)],
                               {"start": 1}, opset=21)
    assert [i.name for i in m.graph.input] == ["x"] and m.graph.node[0].attribute[0].i == 1
    (y,) = olc_core.Session(m, strict=True).run(None, {"x": np.zeros((2, 5), np.float32)})
    np.testing.assert_array_equal(y, [5])
    m = testing.one_node_model("Op", [("a", TensorProto.FLOAT, None), ("w", TensorProto.FLOAT, None)],
                               [("y", TensorProto.FLOAT, None)], domain="com.example", opset=3,
                               initializers={"w": np.ones(2, np.float32)})
    assert [i.name for i in m.graph.input] == ["a"] and [i.name for i in m.graph.initializer] == ["w"]
    assert {(o.domain, o.version) for o in m.opset_import} == {("", 21), ("com.example", 3)}
