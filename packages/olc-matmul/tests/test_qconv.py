"""QLinearConv and ConvInteger against independent oracles: an exact
integer reference written here (the float64 Conv reference of
test_conv.py on x - x_zero_point and w - w_zero_point, exact for these
magnitudes), the requantization written out as the ONNX reference
states it, onnx.reference itself and onnxruntime. Every sign mix of x, w
and y; zero points per tensor and per output channel; per-channel scales;
the int32 bias; 1-D to 3-D, groups, depthwise, strides, dilations, pads
and auto_pad; K over several blocks; every SIMD level and both AVX-512
integer kernels (vpdpbusd and vpmaddwd, the use_vnni switch); 1 and 2
threads; constant (prepacked) and fed weights; guard pages; errors."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from helpers import LEVELS, NP, ORT_U8S8_SATURATES, model
from onnx.reference import ReferenceEvaluator
from test_conv import conv_ref

import olc_core
import olc_core.tuning as tuning

# (X shape, W shape, attributes)
CASES = [
    ((1, 3, 7, 9), (4, 3, 3, 5), {}),
    ((2, 4, 7, 9), (6, 4, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((1, 4, 9, 7), (6, 2, 3, 3), {"group": 2, "strides": [2, 1], "pads": [1, 2, 0, 1]}),
    ((1, 3, 9, 11), (5, 3, 3, 3), {"dilations": [2, 2], "pads": [2, 1, 2, 1]}),
    ((1, 3, 7, 9), (4, 3, 4, 2), {"auto_pad": "SAME_LOWER", "strides": [2, 1]}),
    ((1, 3, 7, 9), (4, 3, 3, 3), {"auto_pad": "SAME_UPPER"}),
    ((1, 8, 7, 9), (5, 8, 1, 1), {}),                                     # pointwise: X read in place
    ((1, 6, 9, 7), (6, 1, 3, 3), {"group": 6, "pads": [1, 1, 1, 1]}),    # depthwise
    ((1, 6, 9, 7), (12, 1, 3, 3), {"group": 6, "pads": [1, 1, 1, 1]}),   # channel multiplier 2
    ((2, 3, 40), (5, 3, 5), {"strides": [2], "pads": [2, 1], "dilations": [2]}),
    ((1, 2, 5, 6, 7), (3, 2, 3, 2, 3), {"pads": [1, 0, 1, 1, 1, 0]}),
    ((1, 128, 5, 6), (20, 128, 3, 3), {"pads": [1, 1, 1, 1]}),           # K = 1152: two K blocks of vpdpbusd
    ((1, 16, 18, 40), (33, 16, 3, 3), {"pads": [1, 1, 1, 1]}),           # several column tiles, row strips
    ((1, 4, 5, 70), (6, 4, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 2]}),  # stride-2 rows of 70, odd pad
    # over 64 KiB of padded input per image: on threads the copy and the
    # column sums are shared out (rows and positions cut mid-row); 2 images, 2 groups
    ((2, 16, 63, 70), (8, 8, 3, 3), {"group": 2, "strides": [2, 2], "pads": [1, 1, 1, 1]}),
]
IDS = [f"{'x'.join(map(str, x))}-w{'x'.join(map(str, w))}-{i}" for i, (x, w, _) in enumerate(CASES)]
SIGNS = [("uint8", "int8", "uint8"), ("uint8", "uint8", "int8"), ("int8", "int8", "int8"), ("int8", "uint8", "uint8")]
# (level, use_vnni): every kernel this CPU has.
KERNELS = [(lv, 1) for lv in LEVELS] + ([("avx512", 0)] if "avx512" in LEVELS else [])


def rand_bytes(rng, shape, t):
    return rng.integers(0, 256, size=shape).astype(np.uint8).view(NP[t]) if t == "int8" else \
        rng.integers(0, 256, size=shape).astype(np.uint8)


def conv_int(x, w, xz, wz, attrs):
    """The exact int64 sums: the float64 Conv reference on the shifted operands
    (|sums| < 2^40 here, exact in float64)."""
    m = w.shape[0]
    wzv = np.broadcast_to(np.asarray(wz, np.int64).reshape(-1), (m,)).reshape((m,) + (1,) * (w.ndim - 1))
    y, _ = conv_ref(x.astype(np.int64) - np.int64(xz), w.astype(np.int64) - wzv, None, attrs)
    return np.rint(y).astype(np.int64)


def requantize(acc, xs, ws, ys, yz, yt):
    """The ONNX reference's requantization: float32 multiplier, float64 product."""
    m = acc.shape[1]
    ws = np.broadcast_to(np.asarray(ws, np.float32).reshape(-1), (m,))
    mult = (np.float32(xs) * ws / np.float32(ys)).astype(np.float32).astype(np.float64)
    r = acc.astype(np.float64) * mult.reshape((1, m) + (1,) * (acc.ndim - 2)) + float(yz)
    lo, hi = (0, 255) if yt == "uint8" else (-128, 127)
    return np.round(np.clip(r, lo, hi)).astype(NP[yt])


def qlinear_model(xt, wt, yt, attrs, w=None, per_channel=False, bias=True, m=None, wz=None, ws=None):
    inputs = [("x", xt), ("x_scale", "float32"), ("x_zero_point", xt), ("w", wt), ("w_scale", "float32"),
              ("w_zero_point", wt), ("y_scale", "float32"), ("y_zero_point", yt)]
    if bias:
        inputs.append(("B", "int32"))
    inits = [] if w is None else [("w", w)]
    return model("QLinearConv", inputs, [("y", yt)], attrs=attrs, initializers=inits, opset=10, name="qconv0")


def integer_model(xt, wt, attrs, w=None, zps=True):
    inputs = [("x", xt), ("w", wt)] + ([("x_zero_point", xt), ("w_zero_point", wt)] if zps else [])
    inits = [] if w is None else [("w", w)]
    return model("ConvInteger", inputs, [("y", "int32")], attrs=attrs, initializers=inits, opset=10, name="qconv0")


def run(m, feeds, level, use_vnni, threads, kernel):
    op = "QLinearConv" if kernel.endswith("QLinearConv") else "ConvInteger"
    tuning.set("olc_matmul", op, "use_vnni", use_vnni)
    try:
        with olc_core.simd_cap(level):
            s = olc_core.Session(m, threads=threads, strict=True, record_usage=True)
        (y,) = s.run(None, feeds)
    finally:
        tuning.reset("olc_matmul", op, "use_vnni")
    assert s.kernel_usage() == [kernel]
    return y, s


def qparams(rng, xs, ws, xt, wt, yt, per_channel):
    m = ws[0]
    x = rand_bytes(rng, xs, xt)
    w = rand_bytes(rng, ws, wt)
    # Zero points near the middle of the values' range (else whole channels
    # saturate); every value is reachable.
    def zp(shape, t):
        return (rng.integers(100, 156, size=shape) - (128 if t == "int8" else 0)).astype(NP[t])

    xz = zp((), xt)
    wz = zp((m,) if per_channel else (), wt)
    xsc = np.float32(rng.uniform(0.005, 0.05))
    wsc = rng.uniform(0.002, 0.02, size=(m,) if per_channel else ()).astype(np.float32)
    k = int(np.prod(ws[1:]))
    ysc = np.float32(xsc * float(np.mean(wsc)) * np.sqrt(k) * 100)
    yz = np.array(rng.integers(64, 192) if yt == "uint8" else rng.integers(-64, 64), NP[yt])
    b = rng.integers(-2000, 2000, size=m).astype(np.int32)
    return x, w, xz, wz, xsc, wsc, ysc, yz, b


@pytest.mark.parametrize("signs", SIGNS, ids=["-".join(s) for s in SIGNS])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_qlinearconv(case, signs):
    xs, ws, attrs = case
    xt, wt, yt = signs
    rng = np.random.default_rng(abs(hash((xs, ws, signs))) % 2**32)
    per_channel = ws[0] % 2 == 0
    x, w, xz, wz, xsc, wsc, ysc, yz, b = qparams(rng, xs, ws, xt, wt, yt, per_channel)
    acc = conv_int(x, w, xz, wz, attrs) + b.reshape((1, -1) + (1,) * (len(xs) - 2))
    want = requantize(acc, xsc, wsc, ysc, yz, yt)
    feeds = {"x": x, "x_scale": np.array(xsc), "x_zero_point": np.array(xz), "w_scale": np.array(wsc),
             "w_zero_point": np.array(wz), "y_scale": np.array(ysc), "y_zero_point": np.array(yz), "B": b}
    # Half the outputs neither saturate nor vanish.
    inner = (want.astype(np.int64) > np.iinfo(want.dtype).min) & (want.astype(np.int64) < np.iinfo(want.dtype).max)
    assert inner.mean() > 0.3
    for const in (False, True):
        m = qlinear_model(xt, wt, yt, attrs, w=w if const else None, per_channel=per_channel)
        f = feeds if const else feeds | {"w": w}
        for level, vnni in KERNELS:
            for threads in (1, 2):
                y, s = run(m, f, level, vnni, threads, "olc_matmul::QLinearConv")
                assert y.dtype == NP[yt] and y.shape == want.shape
                np.testing.assert_array_equal(y, want, err_msg=f"{level} vnni={vnni} t{threads} const={const}")
                if const and threads == 1:
                    assert "prepacked-W" in s.kernel_usage_details()[0]
        if len(xs) == 4:  # onnx.reference broadcasts per-channel scales for 2-D only
            (ref,) = ReferenceEvaluator(m).run(None, f)
            np.testing.assert_array_equal(ref, want)


@pytest.mark.parametrize("signs", SIGNS[:3], ids=["-".join(s) for s in SIGNS[:3]])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_conv_integer(case, signs):
    xs, ws, attrs = case
    xt, wt, _ = signs
    rng = np.random.default_rng(abs(hash((xs, ws, signs, "int"))) % 2**32)
    per_channel = ws[0] % 2 == 1
    x, w, xz, wz, *_ = qparams(rng, xs, ws, xt, wt, "uint8", per_channel)
    want = conv_int(x, w, xz, wz, attrs).astype(np.int32)
    for const in (False, True):
        m = integer_model(xt, wt, attrs, w=w if const else None)
        f = {"x": x, "x_zero_point": np.array(xz), "w_zero_point": np.array(wz)} | ({} if const else {"w": w})
        for level, vnni in KERNELS:
            for threads in (1, 2):
                y, _ = run(m, f, level, vnni, threads, "olc_matmul::ConvInteger")
                assert y.dtype == np.int32 and y.shape == want.shape
                np.testing.assert_array_equal(y, want, err_msg=f"{level} vnni={vnni} t{threads} const={const}")
        if len(xs) == 4 or not per_channel:  # onnx.reference: per-channel zero points for 2-D only
            (ref,) = ReferenceEvaluator(m).run(None, f)
            np.testing.assert_array_equal(ref, want)


def test_conv_integer_without_zero_points():
    xs, ws, attrs = CASES[1]
    rng = np.random.default_rng(3)
    x = rand_bytes(rng, xs, "uint8")
    w = rand_bytes(rng, ws, "uint8")
    m = integer_model("uint8", "uint8", attrs, zps=False)
    y, _ = run(m, {"x": x, "w": w}, LEVELS[-1], 1, 2, "olc_matmul::ConvInteger")
    np.testing.assert_array_equal(y, conv_int(x, w, 0, 0, attrs).astype(np.int32))
    so = ort.SessionOptions()
    so.log_severity_level = 3
    (o,) = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(
        None, {"x": x, "w": w})
    np.testing.assert_array_equal(y, o)


@pytest.mark.parametrize("signs", SIGNS, ids=["-".join(s) for s in SIGNS])
def test_qlinearconv_against_onnxruntime(signs):
    """onnxruntime requantizes in float32: equal up to one unit at ties."""
    xt, wt, yt = signs
    rng = np.random.default_rng(21)
    for xs, ws, attrs in (CASES[1], CASES[7], CASES[11]):
        x, w, xz, wz, xsc, wsc, ysc, yz, b = qparams(rng, xs, ws, xt, wt, yt, True)
        if ORT_U8S8_SATURATES and (xt, wt) == ("uint8", "int8"):
            x = x >> 1  # 7-bit activations: no pair of products leaves int16 (test_qlinearconv covers 8 bits)
        m = qlinear_model(xt, wt, yt, attrs, w=w, per_channel=True)
        feeds = {"x": x, "x_scale": np.array(xsc), "x_zero_point": np.array(xz), "w_scale": np.array(wsc),
                 "w_zero_point": np.array(wz), "y_scale": np.array(ysc), "y_zero_point": np.array(yz), "B": b}
        try:
            so = ort.SessionOptions()
            so.log_severity_level = 3
            (o,) = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feeds)
        except Exception as exc:  # noqa: BLE001 - a sign mix onnxruntime does not implement
            pytest.skip(f"onnxruntime: {exc}")
        y, _ = run(m, feeds, LEVELS[-1], 1, 2, "olc_matmul::QLinearConv")
        assert np.abs(y.astype(np.int64) - o.astype(np.int64)).max() <= 1


def test_operands_against_guard_pages():
    from olc_core import testing

    rng = np.random.default_rng(5)
    for xs, ws, attrs in (CASES[0], CASES[1], CASES[6], CASES[7]):
        x, w, xz, wz, xsc, wsc, ysc, yz, b = qparams(rng, xs, ws, "uint8", "int8", "uint8", True)
        want = requantize(conv_int(x, w, xz, wz, attrs) + b.reshape((1, -1, 1, 1)), xsc, wsc, ysc, yz, "uint8")
        m = qlinear_model("uint8", "int8", "uint8", attrs, per_channel=True)
        for at in ("end", "start"):
            feeds = {"x": testing.guarded(x, at=at), "x_scale": np.array(xsc), "x_zero_point": np.array(xz),
                     "w": testing.guarded(w, at=at), "w_scale": np.array(wsc), "w_zero_point": np.array(wz),
                     "y_scale": np.array(ysc), "y_zero_point": np.array(yz), "B": testing.guarded(b, at=at)}
            for level, vnni in KERNELS:
                y, _ = run(m, feeds, level, vnni, 1, "olc_matmul::QLinearConv")
                np.testing.assert_array_equal(y, want)


def test_empty_batch():
    m = integer_model("uint8", "int8", {"pads": [1, 1, 1, 1]})
    y, _ = run(m, {"x": np.zeros((0, 3, 5, 5), np.uint8), "w": np.zeros((4, 3, 3, 3), np.int8),
                   "x_zero_point": np.array(3, np.uint8), "w_zero_point": np.array(0, np.int8)},
               LEVELS[-1], 1, 1, "olc_matmul::ConvInteger")
    assert y.shape == (0, 4, 5, 5)


# ---------------------------------------------------------------- errors


def expect_error(m, feeds, pattern):
    s = olc_core.Session(m, strict=True)
    with pytest.raises(olc_core.OlcError, match=pattern) as ei:
        s.run(None, feeds)
    assert "qconv0" in str(ei.value)


def test_errors():
    rng = np.random.default_rng(9)
    x, w, xz, wz, xsc, wsc, ysc, yz, b = qparams(rng, (1, 4, 7, 7), (6, 4, 3, 3), "uint8", "int8", "uint8", True)
    base = {"x": x, "x_scale": np.array(xsc), "x_zero_point": np.array(xz), "w": w, "w_scale": np.array(wsc),
            "w_zero_point": np.array(wz), "y_scale": np.array(ysc), "y_zero_point": np.array(yz), "B": b}
    m = qlinear_model("uint8", "int8", "uint8", {"group": 2})
    expect_error(m, base | {"w": w[:, :3]}, "input channels per group")
    m = qlinear_model("uint8", "int8", "uint8", {})
    expect_error(m, base | {"w": np.zeros((6, 5, 3, 3), np.int8)}, "input channels per group")
    expect_error(m, base | {"w_scale": np.ones(5, np.float32)}, "w_scale must be a scalar or 1-D with 6")
    expect_error(m, base | {"w_zero_point": np.zeros(4, np.int8)}, "w_zero_point must be a scalar or 1-D")
    expect_error(m, base | {"x_zero_point": np.zeros(2, np.uint8)}, "x_zero_point must be a scalar")
    expect_error(m, base | {"B": np.zeros(5, np.int32)}, "bias B")
    expect_error(m, base | {"x": np.zeros((1, 4, 2, 2), np.uint8)}, "larger than the padded input")
    with pytest.raises(olc_core.OlcError, match="pads must be non-negative") as ei:
        olc_core.Session(qlinear_model("uint8", "int8", "uint8", {"pads": [0, -1, 0, 0]}), strict=True)
    assert "qconv0" in str(ei.value)


def bounded_weights(rng, ws, wt, worst=128):
    """Weights whose adjacent pairs along each output channel's K (as the s8 x
    u8 kernel sees them: int8, or uint8 less 128) have |w0| + |w1| <= worst,
    the extreme pairs planted; worst 129: one pair past the bound."""
    m, k = ws[0], int(np.prod(ws[1:]))
    v = rng.integers(-64, 65, size=(m, k), dtype=np.int64)
    extremes = [(-128, 0), (0, -128), (64, 64), (-64, -64), (127, 1), (-1, -127), (100, -28)]
    for c in range(m):
        for p in range(0, k - 1, 2):
            if (p // 2 + c) % 3 == 0:
                v[c, p], v[c, p + 1] = extremes[(p // 2 + c) % len(extremes)]
    if worst > 128 and k >= 2:
        v[m - 1, 0], v[m - 1, 1] = -128, -1
    return (v if wt == "int8" else v + 128).astype(NP[wt]).reshape(ws)


@pytest.mark.parametrize("signs", SIGNS[:3], ids=["-".join(s) for s in SIGNS[:3]])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_conv_integer_s8u8_where_weight_pairs_fit(case, signs):
    """At the AVX2 level constant weights whose adjacent pairs fit int16 run on
    the s8 x u8 vpmaddubsw kernel (the kernel detail says avx2-s8u8); one pair
    past the bound keeps the exact kernel. Inputs at their extremes (where a
    pair past the bound would saturate); exact against the int64 reference."""
    xs, ws, attrs = case
    xt, wt, _ = signs
    rng = np.random.default_rng(abs(hash((xs, ws, signs, "s8u8"))) % 2**32)
    x = rand_bytes(rng, xs, xt)
    x.reshape(-1)[::3] = np.iinfo(NP[xt]).max  # u8 255 in kernel space
    xz = np.array(rng.integers(0, 50) if xt == "uint8" else rng.integers(-20, 20), NP[xt])
    wz = np.array(rng.integers(-20, 20) + (128 if wt == "uint8" else 0), NP[wt])
    for worst in (128, 129):
        w = bounded_weights(rng, ws, wt, worst)
        want = conv_int(x, w, xz, wz, attrs).astype(np.int32)
        m = integer_model(xt, wt, attrs, w=w)
        f = {"x": x, "x_zero_point": xz, "w_zero_point": wz}
        for level in LEVELS:
            for threads in (1, 2):
                y, s = run(m, f, level, 1, threads, "olc_matmul::ConvInteger")
                np.testing.assert_array_equal(y, want, err_msg=f"{level} t{threads} worst={worst}")
                took = "[avx2-s8u8" in s.kernel_usage_details()[0]
                assert took == (level == "avx2" and worst == 128 and ws[1] * int(np.prod(ws[2:])) >= 2)


def test_qlinearconv_s8u8_per_channel():
    """QLinearConv through the s8 x u8 kernel: per-channel weight zero points
    and scales, bias, requantized output; the same bits as the reference."""
    if "avx2" not in LEVELS:
        pytest.skip("no AVX2")
    rng = np.random.default_rng(31)
    xs, ws, attrs = (1, 16, 18, 40), (33, 16, 3, 3), {"pads": [1, 1, 1, 1]}
    for xt, wt, yt in SIGNS:
        x, _, xz, wz, xsc, wsc, ysc, yz, b = qparams(rng, xs, ws, xt, wt, yt, True)
        w = bounded_weights(rng, ws, wt)
        acc = conv_int(x, w, xz, wz, attrs) + b.reshape(1, -1, 1, 1)
        want = requantize(acc, xsc, wsc, ysc, yz, yt)
        feeds = {"x": x, "x_scale": np.array(xsc), "x_zero_point": np.array(xz), "w_scale": np.array(wsc),
                 "w_zero_point": np.array(wz), "y_scale": np.array(ysc), "y_zero_point": np.array(yz), "B": b}
        for threads in (1, 2):
            y, s = run(qlinear_model(xt, wt, yt, attrs, w=w, per_channel=True), feeds, "avx2", 1, threads,
                       "olc_matmul::QLinearConv")
            np.testing.assert_array_equal(y, want)
            assert "[avx2-s8u8" in s.kernel_usage_details()[0]


def test_qlinearconv_constant_scales_and_input_of_unknown_rank():
    """x of unknown rank and the scales and zero points as initializers: the
    spatial rank comes from W (input 3), not from x_scale (input 1, rank 0)."""
    rng = np.random.default_rng(32)
    xs, ws, attrs = (1, 4, 7, 9), (6, 4, 3, 3), {"pads": [1, 1, 1, 1]}
    x, w, xz, wz, xsc, wsc, ysc, yz, b = qparams(rng, xs, ws, "uint8", "int8", "uint8", False)
    want = requantize(conv_int(x, w, xz, wz, attrs) + b.reshape(1, -1, 1, 1), xsc, wsc, ysc, yz, "uint8")
    inits = [("x_scale", np.array(xsc)), ("x_zero_point", np.array(xz)), ("w", w), ("w_scale", np.array(wsc)),
             ("w_zero_point", np.array(wz)), ("y_scale", np.array(ysc)), ("y_zero_point", np.array(yz)), ("B", b)]
    m = model("QLinearConv", [("x", "uint8"), ("x_scale", "float32"), ("x_zero_point", "uint8"), ("w", "int8"),
                              ("w_scale", "float32"), ("w_zero_point", "int8"), ("y_scale", "float32"),
                              ("y_zero_point", "uint8"), ("B", "int32")], [("y", "uint8")], attrs=attrs,
              initializers=inits, opset=10, name="qconv0")
    for level in LEVELS:
        y, _ = run(m, {"x": x}, level, 1, 1, "olc_matmul::QLinearConv")
        np.testing.assert_array_equal(y, want)


# Shapes for the AMX blocks: whole 32 x 32 blocks with K tails (ng % 16),
# several K blocks, row counts past a block, groups of 32 rows, 1-D; a
# last panel narrower than 32 positions.
AMX_CASES = [
    ((1, 16, 12, 12), (64, 16, 3, 3), {"pads": [1, 1, 1, 1]}),                    # K 144: 2 steps of 64 + tail
    ((1, 128, 6, 7), (40, 128, 3, 3), {"pads": [1, 1, 1, 1]}),                    # K 1152: two K blocks; 32 + 8 rows
    ((2, 20, 9, 11), (96, 20, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),  # K 180; 3 blocks; 30 positions
    ((1, 64, 10, 10), (64, 32, 1, 1), {"group": 2}),                              # two groups of 32 rows, K 32
    ((1, 32, 70), (33, 32, 3), {"pads": [1, 1]}),                                 # 1-D, K 96
]


@pytest.mark.parametrize("use_amx", [1, 0])
@pytest.mark.parametrize("case", AMX_CASES, ids=[str(i) for i in range(len(AMX_CASES))])
def test_qconv_amx_blocks(case, use_amx):
    """Constant weights on a CPU with AMX-INT8: 32 x 32 tiles beside the
    vpdpbusd kernel reading the weights' rows in place (K tails, partial
    row blocks, narrow last panels); use_amx 0 keeps to vpdpbusd. ConvInteger
    (the sums stored straight into the output) and QLinearConv, every sign
    mix, 1 and 2 threads: the same bits as the exact reference."""
    if "avx512" not in LEVELS:
        pytest.skip("no AVX-512")
    feats = olc_core.simd.detected_cpu_features()
    has_amx = bool(feats.get("amx_tile") and feats.get("amx_int8") and feats.get("avx512_vnni"))
    xs, ws, attrs = case
    rng = np.random.default_rng(abs(hash((xs, ws, "amx"))) % 2**32)
    try:
        for op in ("QLinearConv", "ConvInteger"):
            tuning.set("olc_matmul", op, "use_amx", use_amx)
        for xt, wt, yt in SIGNS:
            x, w, xz, wz, xsc, wsc, ysc, yz, b = qparams(rng, xs, ws, xt, wt, yt, True)
            acc = conv_int(x, w, xz, wz, attrs)
            want_q = requantize(acc + b.reshape((1, -1) + (1,) * (len(xs) - 2)), xsc, wsc, ysc, yz, yt)
            q_feeds = {"x": x, "x_scale": np.array(xsc), "x_zero_point": np.array(xz), "w_scale": np.array(wsc),
                       "w_zero_point": np.array(wz), "y_scale": np.array(ysc), "y_zero_point": np.array(yz), "B": b}
            i_feeds = {"x": x, "x_zero_point": np.array(xz), "w_zero_point": np.array(wz)}
            for m, f, want, kernel in (
                    (qlinear_model(xt, wt, yt, attrs, w=w, per_channel=True), q_feeds, want_q,
                     "olc_matmul::QLinearConv"),
                    (integer_model(xt, wt, attrs, w=w), i_feeds, acc.astype(np.int32), "olc_matmul::ConvInteger")):
                for threads in (1, 2):
                    y, s = run(m, f, "avx512", 1, threads, kernel)
                    np.testing.assert_array_equal(y, want, err_msg=f"{kernel} {xt}/{wt} t{threads}")
                    assert ("[amx+avx512vnni" in s.kernel_usage_details()[0]) == (use_amx == 1 and has_amx)
    finally:
        tuning.reset()
