"""The manifest, the registrations and the native kernels agree: every
operator has an optimized and a naive registration, the optimized one is
the default, and ``naive=`` selects the reference."""

from __future__ import annotations

import numpy as np
import pytest
from cm_testlib import NP_TYPE, make_model
from olc_contrib_microsoft import manifest

import olc_core

# op -> one small valid call: (shape, element type) per input, "T" for the
# op's float type (parametrized), and the attributes.
SMALL = {
    "SkipLayerNormalization": ([((2, 3, 4), "T"), ((2, 3, 4), "T"), ((4,), "T"), ((4,), "T"), ((4,), "T")], {}),
    "SkipSimplifiedLayerNormalization": ([((2, 3, 4), "T"), ((2, 3, 4), "T"), ((4,), "T"), ((4,), "T")], {}),
    "BiasGelu": ([((2, 3, 4), "T"), ((4,), "T")], {}),
    "FastGelu": ([((2, 3, 4), "T"), ((4,), "T")], {}),
    "QuickGelu": ([((2, 3, 4), "T")], {}),
    "Gelu": ([((2, 3, 4), "T")], {}),
    "BiasAdd": ([((2, 3, 4), "T"), ((4,), "T"), ((2, 3, 4), "T")], {}),
    "EmbedLayerNormalization": ([((2, 3), "int32"), ((2, 3), "int32"), ((5, 4), "T"), ((3, 4), "T"), ((2, 4), "T"),
                                 ((4,), "T"), ((4,), "T")], {}),
    "BiasSoftmax": ([((2, 3, 4), "T"), ((2, 1, 4), "T")], {"axis": 2, "is_inner_broadcast": 1}),
    "CDist": ([((3, 4), "T"), ((5, 4), "T")], {}),
    "GatherBlockQuantized": ([((6, 32), "uint4"), ((2,), "int64"), ((6, 2), "T")], {"block_size": 16}),
    "MoE": ([((3, 4), "T"), ((3, 2), "T"), ((2, 5, 4), "T"), ((2, 5), "T"), ((2, 4, 5), "T")], {}),
    "QMoE": ([((3, 16), "T"), ((3, 2), "T"), ((2, 16, 8), "uint8"), ((2, 16), "T"), ((2, 16), "T"),
              ((2, 16, 8), "uint8"), ((2, 16), "T")], {"expert_weight_bits": 4}),
}


def _float_types(op):
    spec = manifest.BY_NAME[op]
    name = {"GatherBlockQuantized": "T2"}.get(op, "T")
    return spec.types[name]


CASES = [(op, t) for op in sorted(SMALL) for t in _float_types(op)]


@pytest.mark.parametrize("naive", [False, True, "olc-contrib-microsoft", ["olc-contrib-microsoft"], "olc-core"])
@pytest.mark.parametrize("op,t", CASES)
def test_the_session_option_picks_the_implementation(op, t, naive):
    shapes, attrs = SMALL[op]
    names = [f"i{k}" for k in range(len(shapes))]
    types = [t if kind == "T" else kind for _, kind in shapes]
    m = make_model(op, list(zip(names, types)), ["y"], attrs)
    s = olc_core.Session(m, strict=True, record_usage=True, naive=naive)
    want = manifest.kernel_name(op, naive is not False and naive != "olc-core")
    assert [e.kernel for e in s.kernel_plan()] == [want]
    rng = np.random.default_rng(1)
    arrays = []
    for (shape, _), ty in zip(shapes, types):
        if ty in ("int32", "int64"):
            arrays.append(rng.integers(0, 2, shape).astype(NP_TYPE[ty]))
        elif ty in ("uint4", "int4", "uint8"):
            arrays.append(rng.integers(0, 8, shape).astype(NP_TYPE[ty]))
        else:
            arrays.append(rng.uniform(0.5, 2.0, shape).astype(NP_TYPE[ty]))
    (y,) = s.run(None, dict(zip(names, arrays)))
    assert s.kernel_usage() == [want]
    out_shape = {"CDist": (3, 5), "EmbedLayerNormalization": (2, 3, 4), "GatherBlockQuantized": (2, 32)}
    assert y.shape == out_shape.get(op, shapes[0][0]) and y.dtype == NP_TYPE[t]
    assert np.all(np.isfinite(y.astype(np.float64)))


def test_benchmark_cases_name_registered_kernels():
    from olc_contrib_microsoft import benchmarks

    names = {r.kernel_name for r in olc_core.registered_kernels() if r.family == manifest.FAMILY}
    cases = benchmarks.benchmark_cases()
    grid = len(benchmarks.ROWS) * len(benchmarks.HIDDEN)
    count = {g: sum(c["group"] == g for c in cases) for g in benchmarks.GATED_GROUPS}
    assert count == {benchmarks.GROUP: 3 * grid, "embed": grid, "bias_softmax": grid, "cdist": grid,
                     "gather_block_quantized": 3 * len(benchmarks.ROWS)}
    for c in cases:
        assert c["expected_kernel"] in names and c["domain"] == manifest.DOMAIN
        assert c["op"] in manifest.BY_NAME
    assert {g["group"] for g in benchmarks.benchmark_gates()} == set(benchmarks.GATED_GROUPS)
    # every gated operator of the family appears in the gated groups
    gated_ops = {c["op"] for c in cases if c["group"] in benchmarks.GATED_GROUPS}
    assert gated_ops == {"SkipLayerNormalization", "BiasGelu", "FastGelu", "EmbedLayerNormalization", "BiasSoftmax",
                         "CDist", "GatherBlockQuantized"}
