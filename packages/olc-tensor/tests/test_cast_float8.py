"""Cast and CastLike to and from the four float8 types (opset 19+).

Two oracles: onnx.reference (ml_dtypes underneath) byte for byte, and an
exact one written from the ONNX Cast table with Python rationals. They agree
except where ml_dtypes rounds float64 through float32 (a double rounding
olc does not do: see test_float64_is_rounded_once). float8 -> other types is
exact widening to float32 followed by the rules of test_cast.py's oracle.
"""

from __future__ import annotations

import sys
from fractions import Fraction
from pathlib import Path

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

sys.path.insert(0, str(Path(__file__).parent))
from helpers import NP, ONNX, make_model, olc_run, ref_run, seed_of  # noqa: E402
from olc_tensor import manifest  # noqa: E402
from test_cast import assert_cast_equal, inputs_for, oracle  # noqa: E402

import olc_core  # noqa: E402

# name: (numpy dtype, ONNX code, mantissa bits, bias, max, has inf, fnuz)
F8 = {
    "float8e4m3fn": (np.dtype(ml_dtypes.float8_e4m3fn), TensorProto.FLOAT8E4M3FN, 3, 7, 448.0, False, False),
    "float8e4m3fnuz": (np.dtype(ml_dtypes.float8_e4m3fnuz), TensorProto.FLOAT8E4M3FNUZ, 3, 8, 240.0, False, True),
    "float8e5m2": (np.dtype(ml_dtypes.float8_e5m2), TensorProto.FLOAT8E5M2, 2, 15, 57344.0, True, False),
    "float8e5m2fnuz": (np.dtype(ml_dtypes.float8_e5m2fnuz), TensorProto.FLOAT8E5M2FNUZ, 2, 16, 57344.0, False, True),
}
F8_NAMES = tuple(F8)
TYPES = {**NP, **{k: v[0] for k, v in F8.items()}}
CODES = {**ONNX, **{k: v[1] for k, v in F8.items()}}
OTHER = ("float32", "float16", "bfloat16", "float64", "int8", "int16", "int32", "int64",
         "uint8", "uint16", "uint32", "uint64", "bool")
LENGTHS = (0, 1, 17, 4099)


def f8_byte(v, name: str, saturate: bool) -> int:
    """The float8 byte of v (a Python float or int) per the ONNX Cast table."""
    _, _, mant, bias, mx, has_inf, fnuz = F8[name]
    if isinstance(v, float) and np.isnan(v):
        if fnuz:
            return 0x80
        sign = 0x80 if np.signbit(v) else 0
        return sign | (0x7E if has_inf else 0x7F)
    neg = np.signbit(v) if isinstance(v, float) else v < 0
    sign = 0x80 if neg else 0
    if isinstance(v, float) and np.isinf(v):
        r = None  # out of range
    else:
        a = abs(Fraction(v))
        if a == 0:
            r = Fraction(0)
        else:
            e = a.numerator.bit_length() - a.denominator.bit_length()
            if Fraction(2) ** e > a:
                e -= 1
            ulp = Fraction(2) ** (max(e, 1 - bias) - mant)
            r = round(a / ulp) * ulp  # half to even
        if r > mx:
            r = None
    if r is None:
        if saturate:
            r = Fraction(mx)
        elif has_inf:
            return sign | 0x7C
        else:
            return 0x80 if fnuz else sign | 0x7F
    if r == 0:
        return 0 if fnuz else sign
    # Exactly representable: numpy's conversion cannot round.
    return int(np.array(float(r) if not neg else -float(r), np.float64).astype(F8[name][0]).view(np.uint8))


def exact_to_f8(x: np.ndarray, name: str, saturate: bool) -> np.ndarray:
    if x.dtype == np.bool_ or x.dtype.kind in "iu":
        vals = [int(b) for b in x.reshape(-1)]
    else:
        vals = [float(b) for b in x.astype(np.float64).reshape(-1)]
    out = np.array([f8_byte(v, name, saturate) for v in vals], np.uint8)
    return out.view(F8[name][0]).reshape(x.shape)


def specials(name: str) -> np.ndarray:
    """float64 values around every boundary of the float8 type."""
    _, _, mant, bias, mx, _, _ = F8[name]
    sub = 2.0 ** (1 - bias - mant)  # smallest subnormal
    top_ulp = 2.0 ** (np.floor(np.log2(mx)) - mant)
    base = [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, mx, -mx,
            mx + top_ulp / 4, mx + top_ulp / 2, mx + top_ulp / 2 * 1.001, mx + top_ulp, 2 * mx, 1e9, 1e300,
            sub, sub / 2, sub / 2 * 1.001, sub * 1.5, sub * 2.5, sub / 4, sub * 0.75,
            2.0 ** (1 - bias), 2.0 ** (1 - bias) * (1 - 2.0 ** -(mant + 2)),
            1.0, 1.0 + 2.0 ** -(mant + 1), 1.0 + 3 * 2.0 ** -(mant + 1), 1.0 + 2.0 ** -(mant + 1) * 1.001,
            1.0 + 2.0 ** -(mant + 1) * 0.999, 0.5, 3.0, 100.0, 127.0, 255.0, 1000.0, 448.0, 464.0, 465.0, 480.0,
            240.0, 244.0, 248.0, 57344.0, 61440.0, 61439.0, 65536.0, 65504.0, 2.0 ** -9, 2.0 ** -10, 2.0 ** -17]
    v = np.array(base, np.float64)
    return np.concatenate([v, -v])


def src_values(src: str, dst: str, rng: np.random.Generator) -> np.ndarray:
    t = TYPES[src]
    if src in F8:
        return np.arange(256, dtype=np.uint8).view(t)
    if src == "bool":
        return np.array([True, False, True, True, False])
    if src in ("float32", "float64", "float16", "bfloat16"):
        _, _, mant, bias, mx, _, _ = F8[dst]
        lo = 1 - bias - mant - 2
        rnd = 2.0 ** rng.uniform(lo, np.log2(mx) + 1.5, 600) * rng.choice([-1, 1], 600)
        with np.errstate(over="ignore"):
            return np.concatenate([specials(dst).astype(t), rnd.astype(t), inputs_for(src, rng, 50)])
    info = np.iinfo(t)
    small = np.arange(max(info.min, -300), min(info.max, 300) + 1)
    edge = [info.min, info.max, 0, 1, 240, 241, 248, 448, 464, 465, 57344, 61440, 61439, 65536]
    edge = [e for e in edge if info.min <= e <= info.max]
    return np.concatenate([np.array(edge, t), small.astype(t), rng.integers(info.min, info.max, 200, dtype=t,
                                                                            endpoint=True)])


def cast_model(src: str, dst: str, saturate: int | None = 1, opset: int = 21, like: bool = False) -> onnx.ModelProto:
    attrs = {} if saturate is None else {"saturate": saturate}
    if like:
        m = make_model("CastLike", [("x", "float32"), ("t", "float32")], ["y"], opset, attrs)
    else:
        m = make_model("Cast", [("x", "float32")], ["y"], opset, {"to": CODES[dst], **attrs})
    # helpers.make_model only knows the 13 native types: set the real ones.
    m.graph.input[0].type.tensor_type.elem_type = CODES[src]
    if like:
        m.graph.input[1].type.tensor_type.elem_type = CODES[dst]
    m.graph.output[0].type.tensor_type.elem_type = CODES[dst]
    return m


def assert_bytes(got: np.ndarray, want: np.ndarray, x: np.ndarray, what: str) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype, got.shape, want.shape)
    g, w = got.reshape(-1).view(np.uint8), want.reshape(-1).view(np.uint8)
    bad = np.flatnonzero(g != w)
    if bad.size:
        i = bad[:6]
        raise AssertionError(f"{what}: {bad.size} differ; inputs {x.reshape(-1)[i]}: got {[hex(b) for b in g[i]]}, "
                             f"want {[hex(b) for b in w[i]]}")


def run_cast(model: onnx.ModelProto, feeds: dict, like: bool = False, **kw) -> np.ndarray:
    (got,) = olc_run(model, feeds, expect_kernel="olc_tensor::CastLike" if like else "olc_tensor::Cast", **kw)
    return got


# ---- to float8 -----------------------------------------------------------------


@pytest.mark.parametrize("saturate", [1, 0])
@pytest.mark.parametrize("dst", F8_NAMES)
@pytest.mark.parametrize("src", OTHER)
def test_to_float8(src, dst, saturate):
    rng = np.random.default_rng(seed_of(src, dst, saturate))
    x = src_values(src, dst, rng)
    model = cast_model(src, dst, saturate)
    got = run_cast(model, {"x": x})
    assert_bytes(got, exact_to_f8(x, dst, bool(saturate)), x, f"{src}->{dst} saturate={saturate} (exact)")
    # onnx.reference rounds float64 (and int64 beyond 2^24) through float32: compare it where that is exact.
    if src == "float64":
        with np.errstate(over="ignore"):
            keep = x.astype(np.float32).astype(np.float64) == x
        keep |= np.isnan(x)
    elif src in ("int64", "uint64"):
        keep = np.abs(x.astype(np.float64)) <= 2.0 ** 24
    else:
        keep = np.ones(x.shape, bool)
    with np.errstate(all="ignore"):
        (want,) = ref_run(model, {"x": x})
    assert_bytes(got[keep], want[keep], x[keep], f"{src}->{dst} saturate={saturate} (onnx.reference)")


@pytest.mark.parametrize("dst", F8_NAMES)
def test_default_saturate_is_1(dst):
    x = np.array([np.inf, -np.inf, 1e6, -1e6, np.nan], np.float32)
    got = run_cast(cast_model("float32", dst, saturate=None), {"x": x})
    mx = F8[dst][4]
    np.testing.assert_array_equal(got.astype(np.float32)[:4], [mx, -mx, mx, -mx])
    assert np.isnan(got.astype(np.float32)[4])


# The spec's two tables, row by row (saturate=1 and 0).
@pytest.mark.parametrize("dst", F8_NAMES)
def test_spec_table(dst):
    _, _, _, _, mx, has_inf, fnuz = F8[dst]
    x = np.array([0.0, -0.0, np.nan, -np.nan, np.inf, -np.inf, mx * 4, -mx * 4, 1.0], np.float32)
    sat = run_cast(cast_model("float32", dst, 1), {"x": x}).astype(np.float32)
    non = run_cast(cast_model("float32", dst, 0), {"x": x}).astype(np.float32)
    for got in (sat, non):
        assert got[0] == 0 and not np.signbit(got[0])
        assert got[1] == 0 and np.signbit(got[1]) != fnuz  # FNUZ has no -0
        assert np.isnan(got[2]) and np.isnan(got[3])
        assert got[8] == 1.0
    np.testing.assert_array_equal(sat[4:8], [mx, -mx, mx, -mx])
    if has_inf:
        np.testing.assert_array_equal(non[4:8], [np.inf, -np.inf, np.inf, -np.inf])
    else:
        assert np.isnan(non[4:8]).all()
    raw = run_cast(cast_model("float32", dst, 0), {"x": x}).view(np.uint8)
    if fnuz:
        assert (raw[[2, 3, 4, 5, 6, 7]] == 0x80).all()  # the single NaN
    elif not has_inf:
        assert list(raw[[2, 3, 4, 5]]) == [0x7F, 0xFF, 0x7F, 0xFF]  # E4M3FN keeps the sign
    else:
        assert list(raw[[2, 3]]) == [0x7E, 0xFE]


def test_float64_is_rounded_once():
    # Just above the midpoint of 1 and 1.125 (E4M3FN): float32 would round it
    # to the midpoint and then to even (1.0), as onnx.reference does.
    x = np.array([1 + 2.0 ** -4 + 2.0 ** -40, -(1 + 2.0 ** -4 + 2.0 ** -40), 448 + 16 + 2.0 ** -30], np.float64)
    got = run_cast(cast_model("float64", "float8e4m3fn", 0), {"x": x})
    np.testing.assert_array_equal(got.astype(np.float64)[:2], [1.125, -1.125])
    assert np.isnan(got.astype(np.float32)[2])  # above the rounding limit of max: out of range
    x = np.array([2**62 + 1, -(2**62)], np.int64)
    got = run_cast(cast_model("int64", "float8e5m2", 0), {"x": x})
    np.testing.assert_array_equal(got.astype(np.float64), [np.inf, -np.inf])


# ---- from float8 ---------------------------------------------------------------


@pytest.mark.parametrize("dst", OTHER)
@pytest.mark.parametrize("src", F8_NAMES)
def test_from_float8(src, dst):
    x = np.arange(256, dtype=np.uint8).view(TYPES[src])
    got = run_cast(cast_model(src, dst, 1), {"x": x})
    with np.errstate(all="ignore"):
        want = oracle(x.astype(np.float32), dst)
    assert_cast_equal(got, want, f"{src}->{dst}")
    if dst in ("float32", "float64", "float16", "bfloat16", "bool"):
        # onnx.reference agrees byte for byte (NaN payloads included); its
        # float -> integer conversions of NaN and out-of-range values are
        # not defined (see README), so those are left to the oracle above.
        (ref,) = ref_run(cast_model(src, dst, 1), {"x": x})
        assert_bytes(got.view(np.uint8), np.ascontiguousarray(ref).view(np.uint8), x, f"{src}->{dst} (onnx.reference)")
    else:
        f = x.astype(np.float64)
        info = np.iinfo(NP[dst])
        keep = ~np.isnan(f) & (f > info.min - 1) & (f < info.max + 1)
        (ref,) = ref_run(cast_model(src, dst, 1), {"x": x[keep]})
        np.testing.assert_array_equal(got[keep], ref)


@pytest.mark.parametrize("saturate", [1, 0])
@pytest.mark.parametrize("dst", F8_NAMES)
@pytest.mark.parametrize("src", F8_NAMES)
def test_float8_to_float8(src, dst, saturate):
    x = np.arange(256, dtype=np.uint8).view(TYPES[src])
    model = cast_model(src, dst, saturate)
    got = run_cast(model, {"x": x})
    if src == dst:
        assert_bytes(got, x, x, "same type is a copy")
        return
    assert_bytes(got, exact_to_f8(x.astype(np.float64), dst, bool(saturate)), x, f"{src}->{dst} (exact)")
    with np.errstate(all="ignore"):
        (want,) = ref_run(model, {"x": x})
    assert_bytes(got, want, x, f"{src}->{dst} saturate={saturate} (onnx.reference)")


# ---- sizes, threads, CastLike, opsets ------------------------------------------


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dst", F8_NAMES)
def test_lengths_and_threads(dst, threads):
    rng = np.random.default_rng(seed_of(dst, threads))
    pool = src_values("float32", dst, rng)
    to_model, from_model = cast_model("float32", dst, 1), cast_model(dst, "float32")
    for n in LENGTHS + (300_001,):
        x = rng.choice(pool, n) if n else pool[:0]
        got = run_cast(to_model, {"x": x}, threads=threads)
        with np.errstate(all="ignore"):
            (want,) = ref_run(to_model, {"x": x})
        assert_bytes(got, want, x, f"float32->{dst} n={n}")
        back = run_cast(from_model, {"x": got}, threads=threads)
        (want_back,) = ref_run(from_model, {"x": got})
        assert_bytes(back, want_back, got, f"{dst}->float32 n={n}")
    x = pool[:24].reshape(2, 3, 4)
    assert run_cast(to_model, {"x": x}).shape == (2, 3, 4)
    assert run_cast(to_model, {"x": np.float32(3.0)}).shape == ()


@pytest.mark.parametrize("saturate", [1, 0])
@pytest.mark.parametrize("src,dst", [("float32", "float8e4m3fn"), ("float16", "float8e5m2"),
                                     ("bfloat16", "float8e4m3fnuz"), ("int32", "float8e5m2fnuz"),
                                     ("float8e5m2", "float8e4m3fn"), ("float8e4m3fnuz", "float16"),
                                     ("float8e5m2fnuz", "int8"), ("float8e4m3fn", "bool")])
def test_castlike(src, dst, saturate):
    rng = np.random.default_rng(seed_of("like", src, dst))
    x = src_values(src, dst if dst in F8 else "float8e5m2", rng)
    if src in F8 and dst == "int8":
        x = x[np.abs(x.astype(np.float32)) < 127]  # onnx.reference: in-range values only
    model = cast_model(src, dst, saturate, opset=19, like=True)
    feeds = {"x": x, "t": np.zeros(3, TYPES[dst])}
    got = run_cast(model, feeds, like=True)
    with np.errstate(all="ignore"):
        (want,) = ref_run(model, feeds)
    assert_bytes(got.view(np.uint8), np.ascontiguousarray(want).view(np.uint8), x, f"CastLike {src}->{dst}")


@pytest.mark.parametrize("opset", [19, 21, 23, 24, 25])
def test_every_float8_schema_version(opset):
    if opset > onnx.defs.onnx_opset_version():
        pytest.skip("onnx too old")
    x = np.array([1.0, 500.0, -1e9, np.nan], np.float32)
    for like in (False, True):
        model = cast_model("float32", "float8e4m3fn", 0, opset=opset, like=like)
        feeds = {"x": x, "t": np.zeros(1, TYPES["float8e4m3fn"])} if like else {"x": x}
        got = run_cast(model, feeds, like=like)
        assert list(got.view(np.uint8)) == [0x38, 0x7F, 0xFF, 0x7F]


def test_no_float8_before_opset_19_and_e8m0_falls_back():
    x = np.array([1.0, 2.0], np.float32)
    # CastLike 15-18 does not allow float8: not claimed (onnx.reference still runs it).
    model = cast_model("float32", "float8e4m3fn", None, opset=18, like=True)
    sess = olc_core.Session(model, record_usage=True)
    sess.run(None, {"x": x, "t": np.zeros(1, TYPES["float8e4m3fn"])})
    assert "olc_tensor::CastLike" not in sess.kernel_usage()
    # Cast 13-18: a float8 'to' is declined by the registration's check.
    model = cast_model("float32", "float8e5m2", None, opset=18)
    reg = next(r for r in olc_core.registered_kernels() if r.kernel_name == "olc_tensor::Cast" and r.covers_opset(18))
    assert reg.supports(model.graph.node[0]) == "float8 targets join Cast at opset 19"
    # float8e8m0 (Cast-24) has no native kernel.
    if onnx.defs.onnx_opset_version() >= 24:
        node = helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT8E8M0)
        graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT8E8M0, None)])
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 24)])
        m.ir_version = 11
        sess = olc_core.Session(m, record_usage=True)
        sess.run(None, {"x": x})
        assert "olc_tensor::Cast" not in sess.kernel_usage()


def _schema_types(op: str, opset: int, constraint: str) -> set[str]:
    schema = onnx.defs.get_schema(op, opset)
    names = {"float": "float32", "double": "float64"}
    for c in schema.type_constraints:
        if c.type_param_str == constraint:
            return {names.get(t[7:-1], t[7:-1]) for t in c.allowed_type_strs}
    raise KeyError(constraint)


def test_registrations_claim_only_schema_types():
    regs = [r for r in olc_core.registered_kernels() if r.kernel_name in ("olc_tensor::Cast", "olc_tensor::CastLike")]
    assert regs
    top = onnx.defs.onnx_opset_version()
    for r in regs:
        op = r.op_type
        for opset in range(r.since_version, min(r.until_version, top) + 1):
            for constraint in ("T1", "T2"):
                claimed = set(r.types[constraint])
                if op == "Cast" and constraint == "T2":
                    claimed = set(manifest.cast_target_types(r.since_version))
                assert claimed <= _schema_types(op, opset, constraint), (op, opset, constraint)
            f8 = set(F8_NAMES) & set(r.types["T1"])
            assert bool(f8) == (opset >= 19), (op, opset)
