"""The manifest, the registrations and the native kernels agree: every
operator has an optimized and a naive registration, the optimized one is
the default, and ``naive=`` selects the reference."""

from __future__ import annotations

import numpy as np
import pytest
from at_testlib import NP_TYPE, make_model
from olc_attention import manifest

import olc_core


def test_every_op_is_registered_twice():
    regs = [r for r in olc_core.registered_kernels() if r.family == manifest.FAMILY]
    got = {(r.domain, r.op_type, r.implementation, r.kernel_name, r.since_version) for r in regs}
    want = {(o.domain, o.op, impl, manifest.kernel_name(o.name, impl == "naive"), o.since) for o in manifest.OPS
            for impl in ("optimized", "naive")}
    assert got == want
    assert olc_core.plugin_load_errors() == []


@pytest.mark.parametrize("naive", [False, True, "olc-attention", ["olc-attention"], "olc-core"])
@pytest.mark.parametrize("t", manifest.FLOATS)
def test_the_session_option_picks_the_implementation(t, naive):
    m = make_model("Attention", [("q", t), ("k", t), ("v", t)], ["y"], {"is_causal": 1}, opset=23)
    s = olc_core.Session(m, strict=True, record_usage=True, naive=naive)
    want = manifest.kernel_name("Attention", naive is not False and naive != "olc-core")
    assert [e.kernel for e in s.kernel_plan()] == [want]
    rng = np.random.default_rng(1)
    q, k, v = (rng.uniform(-1, 1, (1, 2, 3, 8)).astype(NP_TYPE[t]) for _ in range(3))
    (y,) = s.run(None, {"q": q, "k": k, "v": v})
    assert s.kernel_usage() == [want]
    assert y.shape == (1, 2, 3, 8) and y.dtype == NP_TYPE[t]
    # Causal: the first query row sees only the first key, so it is that value row.
    np.testing.assert_allclose(y[0, :, 0].astype(np.float64), v[0, :, 0].astype(np.float64), rtol=1e-2)


def test_benchmark_cases_name_registered_kernels():
    from olc_attention import benchmarks, linear_benchmarks

    names = {r.kernel_name for r in olc_core.registered_kernels() if r.family == manifest.FAMILY}
    cases = benchmarks.benchmark_cases()
    linear = linear_benchmarks.benchmark_cases()
    ms_cases = len(benchmarks.MS_SHAPES) * 2
    assert len(cases) == (len(benchmarks.HEADS) * (len(benchmarks.PREFILL) + len(benchmarks.DECODE)) * 2
                          + ms_cases + len(linear))
    groups = (benchmarks.GROUP, benchmarks.MS_GROUP, linear_benchmarks.GROUP, linear_benchmarks.FUNCTION_GROUP)
    for c in cases:
        assert c["expected_kernel"] in names and c["group"] in groups
        if "model" in c:
            model = c["model"]()
            assert len(list(model.graph.input)) == len(c["inputs"])
        else:  # one node built by the tool from its op, attributes and inputs
            assert c["domain"] == "com.microsoft" and c["op"] == "Attention" and len(c["inputs"]) == 4
    assert sum(c["group"] == benchmarks.MS_GROUP for c in cases) == ms_cases
    assert {g["group"] for g in benchmarks.benchmark_gates()} == {benchmarks.GROUP, benchmarks.MS_GROUP,
                                                                  linear_benchmarks.GROUP}
