"""Optional inputs are typed by the registrations like required ones.

Gemm's C, MatMulInteger's zero points and MatMulNBits' zero points and
g_idx carry the schema's type constraint: a present one of another type is
refused when the session is built (strict: NoKernelError naming the node
and both types; otherwise the plan says why the olc kernel was not taken),
exactly as a mismatched required input is. Absent ones still run native.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import model

import olc_core


def refused(m, *reason_parts):
    with pytest.raises(olc_core.NoKernelError, match=r"node 'mm0'") as err:
        olc_core.Session(m, strict=True)
    for part in reason_parts:
        assert part in str(err.value), str(err.value)
    try:
        entry = olc_core.Session(m).kernel_plan()[0]
    except olc_core.OlcError as exc:  # no fallback either (a com.microsoft op): the same reason, raised
        reason = str(exc)
        assert "node 'mm0'" in reason and "fallback cannot run it" in reason, reason
    else:
        assert not entry.kernel.startswith("olc_matmul"), entry
        reason = entry.reason
    for part in reason_parts:
        assert part in reason, reason


def test_gemm_c_of_another_type_is_refused_like_b():
    refused(model("Gemm", [("a", "float32"), ("b", "float32"), ("c", "float16")], [("y", "float32")]),
            "float32 and float16")
    refused(model("Gemm", [("a", "float32"), ("b", "float16"), ("c", "float32")], [("y", "float32")]),
            "float32 and float16")


def test_gemm_without_c_runs_native():
    m = model("Gemm", [("a", "float32"), ("b", "float32")], [("y", "float32")], {"transB": 1})
    s = olc_core.Session(m, strict=True, record_usage=True)
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((3, 5)).astype(np.float32), rng.standard_normal((4, 5)).astype(np.float32)
    (y,) = s.run(None, {"a": a, "b": b})
    assert s.kernel_usage() == ["olc_matmul::Gemm"]
    np.testing.assert_allclose(y, a.astype(np.float64) @ b.T.astype(np.float64), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("zero_points,reason", [
    ((("az", "int8"), ("bz", "int8")), "uint8 and int8"),  # a_zero_point must have A's type
    ((("az", "uint8"), ("bz", "uint8")), "int8 and uint8"),  # b_zero_point must have B's type
    ((("", None), ("bz", "uint8")), "int8 and uint8"),  # absent a_zero_point, wrong b_zero_point
])
def test_matmulinteger_zero_point_of_another_type_is_refused(zero_points, reason):
    inputs = [("a", "uint8"), ("b", "int8"), *zero_points]
    refused(model("MatMulInteger", inputs, [("y", "int32")]), reason)


def test_matmulinteger_with_matching_zero_points_runs_native():
    inputs = [("a", "uint8"), ("b", "int8"), ("", None), ("bz", "int8")]
    s = olc_core.Session(model("MatMulInteger", inputs, [("y", "int32")]), strict=True, record_usage=True)
    rng = np.random.default_rng(4)
    a = rng.integers(0, 256, (3, 7)).astype(np.uint8)
    b = rng.integers(-128, 128, (7, 5)).astype(np.int8)
    bz = np.asarray(-3, np.int8)
    (y,) = s.run(None, {"a": a, "b": b, "bz": bz})
    assert s.kernel_usage() == ["olc_matmul::MatMulInteger"]
    np.testing.assert_array_equal(y, a.astype(np.int64) @ (b.astype(np.int64) - int(bz)))


NBITS_ATTRS = {"K": 32, "N": 8, "bits": 4, "block_size": 32}


def nbits_model(inputs):
    return model("MatMulNBits", inputs, [("y", "float32")], NBITS_ATTRS, domain="com.microsoft",
                 extra_opsets=[("com.microsoft", 1)])


def test_matmulnbits_zero_points_and_g_idx_are_typed():
    base = [("a", "float32"), ("b", "uint8"), ("s", "float32")]
    refused(nbits_model([*base, ("zp", "int32")]), "input 3 has type int32", "uint8, float32, float16, bfloat16")
    refused(nbits_model([*base, ("", None), ("g", "float32")]), "input 4 has type float32", "int32")
