"""The manifest, the registrations and the native kernels agree: every
operator, opset segment and element type the manifest claims runs on the
olc kernel (strict session), with the output type of the schema; refused
attribute values fall back with the reason."""

from __future__ import annotations

import numpy as np
import pytest
from norm_testlib import NP_TYPE, make_model
from olc_normalization import manifest

import olc_core

# Per operator: (input shapes, attributes) of a small valid node.
NODES = {
    "Softmax": ([(2, 5)], {}),
    "LogSoftmax": ([(2, 5)], {}),
    "LayerNormalization": ([(2, 5), (5,), (5,)], {}),
    "RMSNormalization": ([(2, 5), (5,)], {}),
    "SimplifiedLayerNormalization": ([(2, 5), (5,)], {}),
    "BatchNormalization": ([(2, 3, 4), (3,), (3,), (3,), (3,)], {}),
    "GroupNormalization": ([(2, 4, 3), None, None], {"num_groups": 2}),
    "InstanceNormalization": ([(2, 3, 4), (3,), (3,)], {}),
    "LpNormalization": ([(2, 5)], {}),
    "MeanVarianceNormalization": ([(2, 3, 4, 5)], {}),
}


def cases():
    for spec in manifest.NORM_OPS:
        for seg in spec.segments:
            for opset in sorted({seg.since, min(seg.until, 23)}):
                for t in seg.types[spec.inputs[0]]:
                    yield pytest.param(spec.op, opset, t, id=f"{spec.op}-{opset}-{t}")


@pytest.mark.parametrize("op,opset,t", list(cases()))
def test_claimed_forms_run_native(op, opset, t):
    spec = manifest.BY_NAME[op]
    shapes, attrs = NODES[op]
    if op == "GroupNormalization":
        pc = 2 if opset < 21 else 4
        shapes = [shapes[0], (pc,), (pc,)]
    rng = np.random.default_rng(60)
    arrays = [rng.uniform(0.5, 2.0, s).astype(NP_TYPE[t]) for s in shapes]
    names = [f"i{k}" for k in range(len(arrays))]
    m = make_model(op, [(n, t) for n in names], [("y", t)], attrs, opset=opset)
    s = olc_core.Session(m, strict=True, record_usage=True)
    y, = s.run(None, dict(zip(names, arrays)))
    assert s.kernel_usage() == [manifest.kernel_name(op)]
    assert y.dtype == NP_TYPE[t] and y.shape == shapes[0]
    assert np.all(np.isfinite(y.astype(np.float64)))
    assert spec.segment_at(opset) is not None


def test_refused_stash_type_falls_back():
    m = make_model("LayerNormalization", [("x", "float32"), ("s", "float32")], [("y", "float32")],
                   {"stash_type": 11}, opset=17)
    plan = olc_core.Session(m).kernel_plan()
    assert not plan[0].kernel.startswith("olc_normalization"), plan
    assert "stash_type=11 is not implemented" in plan[0].reason


def test_every_operator_registered():
    regs = {r.op_type for r in olc_core.registered_kernels() if r.kernel_name.startswith("olc_normalization::")}
    assert regs == {o.op for o in manifest.NORM_OPS}


def test_an_optional_bias_of_another_type_is_refused_like_a_required_input():
    # LayerNormalization's bias shares X's type constraint T: a float16 bias
    # with float32 X is refused at construction, naming the node and both
    # types, exactly as a float16 scale is; an absent bias still runs native.
    for inputs in ([("x", "float32"), ("s", "float32"), ("b", "float16")],
                   [("x", "float32"), ("s", "float16"), ("b", "float32")]):
        m = make_model("LayerNormalization", inputs, [("y", "float32")], opset=17)
        with pytest.raises(olc_core.NoKernelError, match=r"node 'n0' \(LayerNormalization\).*float32 and float16"):
            olc_core.Session(m, strict=True)
        entry = olc_core.Session(m).kernel_plan()[0]
        assert not entry.kernel.startswith("olc_normalization") and "float32 and float16" in entry.reason
    m = make_model("LayerNormalization", [("x", "float32"), ("s", "float32"), ("b", None)], [("y", "float32")],
                   opset=17)
    s = olc_core.Session(m, strict=True, record_usage=True)
    x = np.arange(10, dtype=np.float32).reshape(2, 5)
    (y,) = s.run(None, {"x": x, "s": np.ones(5, np.float32)})
    assert s.kernel_usage() == [manifest.kernel_name("LayerNormalization")]
    want = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)
