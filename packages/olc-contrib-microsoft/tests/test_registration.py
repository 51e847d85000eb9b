"""The manifest, the registrations and the native kernels agree: every
operator has an optimized and a naive registration, the optimized one is
the default, and ``naive=`` selects the reference."""

from __future__ import annotations

import numpy as np
import pytest
from cm_testlib import NP_TYPE, make_model
from olc_contrib_microsoft import manifest

import olc_core

SMALL = {
    "SkipLayerNormalization": [(2, 3, 4), (2, 3, 4), (4,), (4,), (4,)],
    "SkipSimplifiedLayerNormalization": [(2, 3, 4), (2, 3, 4), (4,), (4,)],
    "BiasGelu": [(2, 3, 4), (4,)],
    "FastGelu": [(2, 3, 4), (4,)],
    "QuickGelu": [(2, 3, 4)],
    "Gelu": [(2, 3, 4)],
    "BiasAdd": [(2, 3, 4), (4,), (2, 3, 4)],
}


def test_every_op_is_registered_twice():
    regs = [r for r in olc_core.registered_kernels() if r.family == manifest.FAMILY]
    got = {(r.op_type, r.implementation, r.kernel_name) for r in regs}
    want = {(o.op, impl, manifest.kernel_name(o.op, impl == "naive")) for o in manifest.OPS
            for impl in ("optimized", "naive")}
    assert got == want
    assert all(r.domain == "com.microsoft" for r in regs)
    assert set(SMALL) == set(manifest.BY_NAME)


@pytest.mark.parametrize("naive", [False, True, "olc-contrib-microsoft", ["olc-contrib-microsoft"], "olc-core"])
@pytest.mark.parametrize("t", manifest.TYPES)
@pytest.mark.parametrize("op", sorted(SMALL))
def test_the_session_option_picks_the_implementation(op, t, naive):
    shapes = SMALL[op]
    names = [f"i{k}" for k in range(len(shapes))]
    m = make_model(op, [(n, t) for n in names], ["y"])
    s = olc_core.Session(m, strict=True, record_usage=True, naive=naive)
    want = manifest.kernel_name(op, naive is not False and naive != "olc-core")
    assert [e.kernel for e in s.kernel_plan()] == [want]
    rng = np.random.default_rng(1)
    arrays = [rng.uniform(0.5, 2.0, sh).astype(NP_TYPE[t]) for sh in shapes]
    (y,) = s.run(None, dict(zip(names, arrays)))
    assert s.kernel_usage() == [want]
    assert y.shape == shapes[0] and y.dtype == arrays[0].dtype
    assert np.all(np.isfinite(y.astype(np.float64)))


def test_benchmark_cases_name_registered_kernels():
    from olc_contrib_microsoft import benchmarks

    names = {r.kernel_name for r in olc_core.registered_kernels() if r.family == manifest.FAMILY}
    cases = benchmarks.benchmark_cases()
    gated = [c for c in cases if c["group"] == benchmarks.GROUP]
    assert len(gated) == len(benchmarks.ROWS) * len(benchmarks.HIDDEN) * 3
    for c in cases:
        assert c["expected_kernel"] in names and c["domain"] == manifest.DOMAIN
        assert c["inputs"][0]["shape"][-1] in (384, 768, 4096)
    assert {g["group"] for g in benchmarks.benchmark_gates()} == {benchmarks.GROUP}
