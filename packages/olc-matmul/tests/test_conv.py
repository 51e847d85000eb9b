"""Conv against independent oracles: a float64 numpy reference written
here (an einsum per kernel offset over the explicitly padded input) for
every case, and onnxruntime for float32 where it supports the attributes
(it refuses dilations with SAME auto_pad). 1-D, 2-D and 3-D; groups 1, 2
and C (depthwise, with and without a channel multiplier); strides,
dilations, explicit pads and every auto_pad; odd sizes; batch 1 and 3;
with and without bias; constant (prepacked) and fed weights; float32,
float16 and bfloat16; every SIMD level, 1 and 2 threads. Every session is
strict and its kernel usage checked, so the fallback never stands in.
Invalid attributes and shapes raise an error naming the node."""

from __future__ import annotations

import contextlib
import itertools

import numpy as np
import onnxruntime as ort
import pytest
from helpers import LEVELS, NP, check_close, model, session

import olc_core

KERNEL = "olc_matmul::Conv"
DIRECT_T = "implicit-gemm-transposed-direct"


# ---------------------------------------------------------------- reference

def ref_pads(xs, ws, attrs):
    """(begin, end) pads per spatial axis, from the ONNX Conv rules."""
    nsp = len(xs) - 2
    s = attrs.get("strides", [1] * nsp)
    d = attrs.get("dilations", [1] * nsp)
    ap = attrs.get("auto_pad", "NOTSET")
    pads = attrs.get("pads", [0] * (2 * nsp))
    out = []
    for i in range(nsp):
        n, k = xs[2 + i], ws[2 + i]
        ext = (k - 1) * d[i] + 1
        if ap in ("SAME_UPPER", "SAME_LOWER"):
            o = -(-n // s[i])
            total = max(0, (o - 1) * s[i] + ext - n)
            small = total // 2
            out.append((small, total - small) if ap == "SAME_UPPER" else (total - small, small))
        elif ap == "VALID":
            out.append((0, 0))
        else:
            out.append((pads[i], pads[nsp + i]))
    return out


def conv_ref(x, w, b, attrs):
    """Y in float64 and |X| * |W| (the magnitude the rounding scales with)."""
    x = x.astype(np.float64)
    w = w.astype(np.float64)
    nsp = x.ndim - 2
    group = attrs.get("group", 1)
    s = attrs.get("strides", [1] * nsp)
    d = attrs.get("dilations", [1] * nsp)
    pads = ref_pads(x.shape, w.shape, attrs)
    xp = np.pad(x, [(0, 0), (0, 0)] + pads)
    n, c = x.shape[:2]
    m = w.shape[0]
    ks = w.shape[2:]
    outs = [(xp.shape[2 + i] - ((ks[i] - 1) * d[i] + 1)) // s[i] + 1 for i in range(nsp)]
    cg, mg = c // group, m // group
    y = np.zeros((n, group, mg, *outs))
    a = np.zeros_like(y)
    wg = w.reshape(group, mg, cg, *ks)
    sp = "".join("xyz"[:nsp])
    eq = f"ngc{sp},gmc->ngm{sp}"
    for kk in itertools.product(*[range(k) for k in ks]):
        sl = tuple(slice(kk[i] * d[i], kk[i] * d[i] + (outs[i] - 1) * s[i] + 1, s[i]) for i in range(nsp))
        patch = xp[(slice(None), slice(None)) + sl].reshape(n, group, cg, *outs)
        wk = wg[(slice(None), slice(None), slice(None)) + kk]
        y += np.einsum(eq, patch, wk)
        a += np.einsum(eq, np.abs(patch), np.abs(wk))
    y = y.reshape(n, m, *outs)
    a = a.reshape(n, m, *outs)
    if b is not None:
        bb = b.astype(np.float64).reshape((1, m) + (1,) * nsp)
        y = y + bb
        a = a + np.abs(bb)
    return y, a


def test_reference_matches_a_direct_loop():
    """The reference itself, against a plain loop nest on a small 2-D case."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 4, 5, 6))
    w = rng.standard_normal((6, 2, 3, 2))
    b = rng.standard_normal(6)
    attrs = {"group": 2, "strides": [2, 1], "dilations": [1, 2], "pads": [1, 0, 2, 1]}
    y, _ = conv_ref(x, w, b, attrs)
    (pt, pb), (pl, pr) = ref_pads(x.shape, w.shape, attrs)
    oh = (5 + pt + pb - 3) // 2 + 1
    ow = (6 + pl + pr - 3) // 1 + 1
    loop = np.zeros((2, 6, oh, ow))
    for ni, co, i, j in itertools.product(range(2), range(6), range(oh), range(ow)):
        g = co // 3
        acc = b[co]
        for ci, ki, kj in itertools.product(range(2), range(3), range(2)):
            hi, wj = i * 2 - pt + ki, j - pl + kj * 2
            if 0 <= hi < 5 and 0 <= wj < 6:
                acc += w[co, ci, ki, kj] * x[ni, g * 2 + ci, hi, wj]
        loop[ni, co, i, j] = acc
    np.testing.assert_allclose(y, loop, rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------- cases

# (X shape, W shape, attributes)
CASES = [
    # 2-D: odd sizes, 3x5 kernels, stride 2 with padding, dilation 2
    ((1, 3, 7, 9), (4, 3, 3, 5), {}),
    ((3, 3, 7, 9), (5, 3, 3, 5), {"pads": [1, 2, 1, 2]}),
    ((1, 4, 7, 9), (6, 4, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((3, 4, 9, 7), (6, 2, 3, 3), {"group": 2, "strides": [2, 2], "pads": [1, 2, 0, 1]}),
    ((1, 3, 9, 11), (4, 3, 3, 3), {"dilations": [2, 2], "pads": [2, 1, 2, 1]}),
    ((1, 5, 9, 11), (7, 5, 3, 5), {"dilations": [2, 1], "strides": [1, 2]}),
    ((1, 3, 7, 9), (4, 3, 3, 5), {"auto_pad": "VALID"}),
    ((3, 3, 7, 9), (4, 3, 3, 5), {"auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    ((1, 3, 7, 9), (4, 3, 4, 2), {"auto_pad": "SAME_LOWER", "strides": [2, 1]}),
    ((1, 3, 7, 9), (4, 3, 3, 3), {"auto_pad": "SAME_UPPER", "dilations": [2, 2]}),
    ((1, 3, 7, 9), (4, 3, 3, 3), {"auto_pad": "NOTSET", "pads": [0, 0, 0, 0], "kernel_shape": [3, 3]}),
    # pointwise (1x1 stride 1: the GEMM on X in place) and strided 1x1
    ((1, 8, 7, 9), (5, 8, 1, 1), {}),
    ((3, 16, 5, 13), (40, 16, 1, 1), {}),
    ((1, 8, 7, 9), (6, 4, 1, 1), {"group": 2}),
    ((1, 8, 7, 9), (5, 8, 1, 1), {"strides": [2, 2]}),
    # depthwise: group == C, multiplier 1 and 2, stride 2, dilation, wide rows
    ((1, 6, 9, 7), (6, 1, 3, 3), {"group": 6, "pads": [1, 1, 1, 1]}),
    ((3, 6, 9, 7), (12, 1, 3, 5), {"group": 6, "dilations": [2, 1], "pads": [2, 2, 1, 1]}),
    ((1, 5, 11, 9), (5, 1, 3, 3), {"group": 5, "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((1, 4, 13, 150), (4, 1, 3, 3), {"group": 4, "auto_pad": "SAME_UPPER"}),
    ((1, 4, 9, 70), (4, 1, 5, 5), {"group": 4, "dilations": [2, 2], "pads": [4, 4, 4, 4]}),
    ((1, 4, 9, 7), (4, 1, 3, 3), {"group": 4, "auto_pad": "VALID"}),
    ((1, 4, 6, 5), (4, 1, 1, 1), {"group": 4, "strides": [2, 2]}),
    # 1-D (audio-like) and 3-D
    ((1, 3, 17), (4, 3, 3), {"strides": [2], "auto_pad": "SAME_LOWER"}),
    ((3, 4, 40), (6, 2, 5), {"group": 2, "dilations": [2], "pads": [3, 1]}),
    ((1, 4, 33), (4, 1, 7), {"group": 4, "pads": [3, 3]}),
    ((1, 2, 5, 6, 7), (3, 2, 3, 2, 3), {"pads": [1, 0, 1, 1, 1, 0]}),
    ((3, 4, 5, 7, 6), (4, 2, 3, 3, 3), {"group": 2, "strides": [2, 1, 2], "auto_pad": "SAME_UPPER"}),
    ((1, 3, 5, 7, 6), (3, 1, 3, 3, 3), {"group": 3, "dilations": [1, 2, 1], "pads": [1, 2, 1, 1, 2, 1]}),
    # several K blocks and channel tiles (K = 576 > kc, 40 output channels)
    ((1, 64, 12, 13), (40, 64, 3, 3), {"pads": [1, 1, 1, 1]}),
    # the padded copy's W phases: rows wider than two vectors, odd and even
    # start pads, stride 3 with dilation, rows of one and two vectors
    ((1, 3, 5, 70), (4, 3, 3, 3), {"strides": [1, 2], "pads": [1, 1, 1, 2]}),
    ((2, 3, 5, 71), (4, 3, 3, 5), {"strides": [2, 2], "pads": [0, 2, 1, 0]}),
    ((1, 2, 7, 40), (3, 2, 3, 4), {"strides": [1, 3], "pads": [1, 1, 1, 1], "dilations": [1, 2]}),
    ((1, 8, 16, 16), (12, 8, 3, 3), {"pads": [1, 1, 1, 1]}),
    ((1, 8, 8, 8), (12, 8, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    # depthwise through the phase-split buffer (strides 2 and 3, wide and
    # narrow rows, odd pads) and vectorised across channels (rows narrower
    # than a vector: 7x7, 4x4, 3-D, a channel multiplier, more channels
    # than one block)
    ((1, 4, 9, 70), (4, 1, 3, 3), {"group": 4, "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((1, 3, 9, 67), (6, 1, 3, 5), {"group": 3, "strides": [1, 3], "pads": [0, 3, 1, 0]}),
    ((2, 3, 40), (3, 1, 5), {"group": 3, "strides": [2], "pads": [2, 2]}),
    ((1, 20, 7, 7), (20, 1, 3, 3), {"group": 20, "pads": [1, 1, 1, 1]}),
    ((2, 19, 4, 4), (38, 1, 5, 5), {"group": 19, "pads": [2, 2, 2, 2]}),
    ((1, 7, 4, 4), (21, 1, 3, 3), {"group": 7, "pads": [1, 1, 1, 1]}),  # blocks start inside a channel's outputs
    ((1, 18, 8, 8), (18, 1, 5, 5), {"group": 18, "strides": [2, 2], "pads": [2, 2, 2, 2]}),
    ((1, 5, 3, 4, 5), (5, 1, 3, 3, 3), {"group": 5, "pads": [1, 1, 1, 1, 1, 1]}),
    ((1, 17, 5, 6), (17, 1, 1, 1), {"group": 17}),
    # planes too large to copy whole (rows copied as the output rows reach
    # them), rows of three vectors batched across rows, and the small
    # planes' whole copy with one-vector rows at stride 2
    ((1, 2, 70, 100), (2, 1, 3, 3), {"group": 2, "pads": [1, 1, 1, 1]}),
    ((1, 2, 61, 101), (2, 1, 3, 3), {"group": 2, "strides": [2, 2], "pads": [1, 0, 1, 1]}),
    ((1, 3, 33, 40), (3, 1, 3, 3), {"group": 3, "pads": [1, 1, 1, 1]}),
    ((1, 3, 32, 32), (3, 1, 3, 3), {"group": 3, "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    # 3-D depthwise of one input depth, padded in depth (three output
    # depths, each a run of rows): the direct loop's plane copied whole and
    # band by band, and a 5x5 one
    ((1, 2, 1, 20, 40), (2, 1, 1, 3, 3), {"group": 2, "pads": [1, 1, 1, 1, 1, 1]}),
    ((1, 2, 1, 70, 100), (2, 1, 1, 3, 3), {"group": 2, "pads": [1, 1, 1, 0, 1, 1], "strides": [1, 2, 2]}),
    ((1, 2, 1, 9, 120), (2, 1, 1, 5, 5), {"group": 2, "pads": [2, 2, 2, 1, 2, 2]}),
    # few output positions: the transposed product (positions as rows),
    # pointwise and im2col, a batch stacked, groups, a partial W^T panel
    ((1, 48, 4, 4), (64, 48, 1, 1), {}),
    ((3, 24, 3, 3), (96, 24, 3, 3), {"pads": [1, 1, 1, 1]}),
    ((2, 40, 1, 1), (70, 40, 1, 1), {}),
    ((1, 16, 4, 4), (64, 8, 3, 3), {"group": 2, "pads": [1, 1, 1, 1]}),
    ((2, 6, 7, 7), (40, 6, 3, 3), {"strides": [2, 2]}),
    # 1x1 planes in groups (K and the W^T panel with tails at every width)
    ((2, 30, 1, 1), (42, 15, 1, 1), {"group": 2}),
    # strided 1x1 without padding (the input subsampled, then pointwise):
    # odd sizes, unequal strides, groups, batch 3, 1-D and 3-D, VALID, few
    # positions (the transposed product; one position: its GEMV), and a
    # stride larger than the input (one position read)
    ((3, 6, 9, 11), (8, 3, 1, 1), {"group": 2, "strides": [2, 3]}),
    ((2, 5, 17), (7, 5, 1), {"strides": [3]}),
    ((1, 4, 5, 7, 6), (6, 4, 1, 1, 1), {"strides": [2, 2, 2]}),
    ((1, 3, 7, 9), (4, 3, 1, 1), {"strides": [2, 2], "auto_pad": "VALID"}),
    ((2, 48, 8, 8), (64, 48, 1, 1), {"strides": [2, 2]}),
    ((2, 40, 2, 2), (70, 40, 1, 1), {"strides": [2, 2]}),
    ((1, 5, 3, 3), (4, 5, 1, 1), {"strides": [4, 5]}),
    # strides past 2 with padding: the padded copy's phase-by-phase split
    # (an audio stem's stride 4; each phase starting at its own column)
    ((1, 2, 203), (6, 2, 9), {"strides": [4], "pads": [3, 4]}),
    ((1, 3, 13, 17), (5, 3, 3, 5), {"strides": [3, 4], "pads": [1, 2, 0, 3]}),
    # more phases than the copy works out per row (past 16: rows zeroed whole)
    ((2, 2, 75), (3, 2, 4), {"strides": [17], "pads": [2, 5]}),
    # 3x3 depthwise rows sharing their input loads (eight rows a pass at
    # AVX-512, four below, the rest one at a time): H stride 2 with W
    # dilation 2, and a channel multiplier at W stride 2 with uneven pads
    ((1, 3, 20, 37), (3, 1, 3, 3), {"group": 3, "dilations": [1, 2], "strides": [2, 1], "pads": [1, 2, 1, 2]}),
    ((2, 5, 19, 45), (10, 1, 3, 3), {"group": 5, "strides": [1, 2], "pads": [0, 1, 2, 1]}),
    # 7x7 planes across channels: the last of 49 positions gathered and
    # scattered (AVX-512), a channel multiplier repeating input channels
    ((2, 5, 7, 7), (10, 1, 3, 3), {"group": 5, "pads": [1, 1, 1, 1]}),
    # rows across channels in runs that share their inputs: 13 and 11
    # positions (two runs at AVX-512), H dilation with H stride 2, 1-D at
    # W stride 2 with more channels than one block
    ((1, 18, 6, 13), (18, 1, 3, 5), {"group": 18, "pads": [1, 2, 1, 2]}),
    ((1, 16, 9, 11), (16, 1, 3, 3), {"group": 16, "dilations": [2, 1], "strides": [2, 1], "pads": [2, 1, 2, 1]}),
    ((2, 17, 11), (17, 1, 3), {"group": 17, "strides": [2], "pads": [1, 1]}),
    # 3x3 at W stride 2 read straight from the input rows (AVX-512): a
    # row of 17 positions (two vectors overlapping) over 12 rows (a pass of
    # eight and one of four), one of 14 (stored in part) over 14 rows, a
    # left pad of 2 and none at the right, and H stride 1 over 7 rows
    # (passes of four, two and one)
    ((1, 3, 23, 33), (3, 1, 3, 3), {"group": 3, "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((1, 3, 28, 27), (3, 1, 3, 3), {"group": 3, "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((2, 2, 15, 64), (2, 1, 3, 3), {"group": 2, "strides": [2, 2], "pads": [0, 2, 1, 0]}),
    ((1, 2, 7, 40), (2, 1, 3, 3), {"group": 2, "strides": [1, 2], "pads": [1, 1, 1, 1]}),
    # 5x5 rows up to 96 positions wide go across channels too (PP-LCNet's
    # 12x80 planes): 83 positions, H stride 2; a 97-wide row stays direct
    ((1, 20, 7, 83), (20, 1, 5, 5), {"group": 20, "pads": [2, 2, 2, 2]}),
    ((2, 9, 9, 96), (18, 1, 5, 5), {"group": 9, "strides": [2, 1], "pads": [2, 2, 1, 2]}),
    ((1, 3, 5, 97), (3, 1, 5, 5), {"group": 3, "pads": [2, 2, 2, 2]}),
]
WIDE5 = CASES[-3:]
IDS = [f"{'x'.join(map(str, x))}-w{'x'.join(map(str, w))}-{i}" for i, (x, w, _) in enumerate(CASES)]


def conv_model(t, attrs, w_const=None, bias=True, opset=None, b_const=None):
    opset = opset or (22 if t == "bfloat16" else 11)
    inputs = [("X", t), ("W", t)] + ([("B", t)] if bias else [])
    inits = []
    if w_const is not None:
        inits.append(("W", w_const))
    if b_const is not None:
        inits.append(("B", b_const))
    return model("Conv", inputs, [("Y", t)], attrs=attrs, initializers=inits, opset=opset, name="conv0")


def make_data(rng, xs, ws, t, bias):
    x = rng.standard_normal(xs).astype(NP[t])
    w = rng.standard_normal(ws).astype(NP[t])
    b = rng.standard_normal(ws[0]).astype(NP[t]) if bias else None
    return x, w, b


def run_olc(m, feeds, level, threads=1):
    s = session(m, level, threads)
    (y,) = s.run(None, feeds)
    assert s.kernel_usage() == [KERNEL]
    return y, s


def k_of(ws, attrs):
    return int(np.prod(ws[1:]))


@pytest.mark.parametrize("const", [False, True], ids=["fed-W", "const-W"])
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_float32(case, bias, const):
    xs, ws, attrs = case
    rng = np.random.default_rng(abs(hash((xs, ws, bias, const))) % 2**32)
    x, w, b = make_data(rng, xs, ws, "float32", bias)
    m = conv_model("float32", attrs, w_const=w if const else None, bias=bias)
    feeds = {"X": x} | ({} if const else {"W": w}) | ({"B": b} if bias else {})
    ref, absprod = conv_ref(x, w, b, attrs)
    dilated_same = attrs.get("auto_pad", "").startswith("SAME") and any(v > 1 for v in attrs.get("dilations", []))
    ort_y = None
    if not dilated_same:
        ort_y = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
        assert ort_y.shape == ref.shape
    for level in LEVELS:
        for threads in (1, 2):
            y, s = run_olc(m, feeds, level, threads)
            assert y.shape == ref.shape and y.dtype == np.float32
            what = f"{level} t{threads}"
            check_close(y, ref, absprod, k_of(ws, attrs), "float32", what)
            if ort_y is not None:
                # Both within float32 rounding of the exact result.
                bound = 4 * (k_of(ws, attrs) + 2) * 2.0**-24 * absprod + 1e-30
                assert (np.abs(y.astype(np.float64) - ort_y) <= 2 * bound).all(), what
            if const and level == LEVELS[-1] and threads == 1:
                assert "prepacked-W" in s.kernel_usage_details()[0]


HALF = [0, 3, 6, 9, 11, 12, 15, 18, 21, 24, 27, 30, 33, 36, 39, 40, 45, 46]


@pytest.mark.parametrize("t", ["float16", "bfloat16"])
@pytest.mark.parametrize("case", [CASES[i] for i in HALF], ids=[IDS[i] for i in HALF])
def test_half_types(case, t):
    xs, ws, attrs = case
    rng = np.random.default_rng(11)
    for const in (False, True):
        x, w, b = make_data(rng, xs, ws, t, True)
        m = conv_model(t, attrs, w_const=w if const else None)
        feeds = {"X": x, "B": b} | ({} if const else {"W": w})
        ref, absprod = conv_ref(x, w, b, attrs)
        for level in LEVELS:
            y, _ = run_olc(m, feeds, level, 2)
            assert y.dtype == NP[t] and y.shape == ref.shape
            check_close(y, ref, absprod, k_of(ws, attrs), t, f"{t} {level} const={const}")


@pytest.mark.parametrize("opset", [1, 11, 22])
def test_opsets(opset):
    xs, ws, attrs = (1, 3, 7, 9), (4, 3, 3, 5), {"strides": [2, 1], "pads": [1, 2, 1, 2]}
    rng = np.random.default_rng(3)
    x, w, b = make_data(rng, xs, ws, "float32", True)
    m = conv_model("float32", attrs, opset=opset)
    y, _ = run_olc(m, {"X": x, "W": w, "B": b}, LEVELS[-1])
    ref, absprod = conv_ref(x, w, b, attrs)
    check_close(y, ref, absprod, k_of(ws, attrs), "float32", f"opset {opset}")


def test_constant_bias_and_repeated_runs():
    """Constant W and B; the packed weights serve every run and new inputs."""
    xs, ws, attrs = (3, 8, 11, 10), (16, 4, 3, 3), {"group": 2, "pads": [1, 1, 1, 1]}
    rng = np.random.default_rng(5)
    _, w, b = make_data(rng, xs, ws, "float32", True)
    m = conv_model("float32", attrs, w_const=w, b_const=b)
    s = session(m, LEVELS[-1], 2)
    for _ in range(3):
        x = rng.standard_normal(xs).astype(np.float32)
        (y,) = s.run(None, {"X": x})
        ref, absprod = conv_ref(x, w, b, attrs)
        check_close(y, ref, absprod, k_of(ws, attrs), "float32")
    assert s.kernel_usage() == [KERNEL]
    assert "prepacked-W" in s.kernel_usage_details()[0]


def test_depthwise_padding_survives_other_geometries():
    """The depthwise paths keep their zero-padded buffers per thread and
    zero only when the geometry changes: geometries whose padded buffers
    have the same size but different interiors (pads 1, 2 and asymmetric),
    20 channels (a partial block of channels at every vector width), run in
    turn with new inputs, match the reference every time (a stale value in
    a pad position would not)."""
    cases = [((1, 20, 7, 7), (20, 1, 3, 3), {"group": 20, "pads": [1, 1, 1, 1]}),
             ((1, 20, 5, 5), (20, 1, 5, 5), {"group": 20, "pads": [2, 2, 2, 2]}),
             ((1, 20, 6, 7), (20, 1, 3, 3), {"group": 20, "pads": [2, 1, 1, 1]}),
             ((1, 3, 5, 38), (3, 1, 3, 3), {"group": 3, "pads": [1, 1, 1, 1]}),
             ((1, 3, 3, 36), (3, 1, 5, 5), {"group": 3, "pads": [2, 2, 2, 2]})]
    rng = np.random.default_rng(17)
    for level in LEVELS:
        runs = []
        for xs, ws, attrs in cases:
            w = rng.standard_normal(ws).astype(np.float32)
            runs.append((session(conv_model("float32", attrs, w_const=w, bias=False), level, 1), xs, w, attrs))
        for rep in range(2):
            for s, xs, w, attrs in runs:
                x = (rng.standard_normal(xs) * 100).astype(np.float32)
                (y,) = s.run(None, {"X": x})
                ref, absprod = conv_ref(x, w, None, attrs)
                check_close(y, ref, absprod, k_of(w.shape, attrs), "float32", f"{level} {xs} {attrs} run {rep}")
                assert s.kernel_usage() == [KERNEL]


OWN_PAD_CASES = [
    ((1, 6, 70, 66), (10, 6, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),          # 4 tiles, cut mid-row
    ((2, 5, 61, 47), (7, 5, 3, 5), {"strides": [2, 3], "pads": [2, 1, 0, 2], "dilations": [2, 1]}),
    ((1, 3, 96, 90), (16, 3, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),          # a stem: rows read directly
    ((1, 4, 40, 80), (8, 4, 7, 7), {"strides": [2, 2], "pads": [3, 3, 3, 3]}),
]


@pytest.mark.parametrize("t", ["float32", "float16"])
@pytest.mark.parametrize("case", OWN_PAD_CASES, ids=[str(i) for i in range(len(OWN_PAD_CASES))])
def test_tasks_pad_their_own_rows(case, t):
    """On several threads each task pads the input rows its tile of output
    positions reads into a buffer of those rows only: tiles that start and
    end mid-row, strides, dilations and uneven pads give the reference's
    result on 2 and 3 threads as on one."""
    xs, ws, attrs = case
    rng = np.random.default_rng(23)
    x, w, b = make_data(rng, xs, ws, t, True)
    m = conv_model(t, attrs, w_const=w)
    ref, absprod = conv_ref(x, w, b, attrs)
    for level in LEVELS:
        for threads in (1, 2, 3):
            y, _ = run_olc(m, {"X": x, "B": b}, level, threads)
            assert y.shape == ref.shape and y.dtype == NP[t]
            check_close(y, ref, absprod, k_of(ws, attrs), t, f"{t} {level} t{threads}")


def test_transposed_product_over_chunks_of_images():
    """The transposed product stacks whole images into its rows, at most
    transposed_max_rows per chunk: several chunks give the same result."""
    import olc_core.tuning as tuning

    xs, ws, attrs = (5, 24, 3, 3), (96, 24, 3, 3), {"pads": [1, 1, 1, 1]}
    rng = np.random.default_rng(13)
    x, w, b = make_data(rng, xs, ws, "float32", True)
    m = conv_model("float32", attrs)  # W fed: the implicit GEMM (constant W would take Winograd)
    ref, absprod = conv_ref(x, w, b, attrs)
    for level in LEVELS:
        try:
            tuning.set("olc_matmul", "Conv", "transposed_max_rows", 20, implementation=level, dtype="float32")
            for threads in (1, 2):
                y, s = run_olc(m, {"X": x, "W": w, "B": b}, level, threads)
                check_close(y, ref, absprod, k_of(ws, attrs), "float32", f"{level} t{threads}")
                assert "transposed" in s.kernel_usage_details()[0]
        finally:
            tuning.reset("olc_matmul", "Conv", "transposed_max_rows", implementation=level, dtype="float32")


WINO_SEEN: set[bool] = set()
WINO_CASES = [
    ((1, 8, 16, 16), (12, 8, 3, 3), {"pads": [1, 1, 1, 1]}),
    ((2, 16, 13, 11), (24, 16, 3, 3), {"pads": [1, 0, 2, 1]}),                 # odd outputs, asymmetric pads
    ((3, 9, 10, 9), (10, 9, 3, 3), {}),                                        # no padding, small images stacked
    ((1, 32, 12, 14), (16, 16, 3, 3), {"group": 2, "auto_pad": "SAME_UPPER"}),
    ((1, 300, 6, 40), (20, 300, 3, 3), {"pads": [1, 1, 1, 1]}),                # two K blocks, long tile rows
    ((1, 8, 34, 34), (8, 8, 3, 3), {"pads": [1, 1, 1, 1]}),                    # 17 tiles per row
    ((4, 16, 8, 8), (32, 16, 3, 3), {"pads": [1, 1, 1, 1]}),                   # 8x8 planes, batch shares panels
    ((1, 32, 8, 8), (64, 32, 3, 3), {"pads": [1, 1, 1, 1]}),                   # few tiles: tiles as rows
    ((2, 24, 7, 7), (40, 24, 3, 3), {"pads": [1, 1, 1, 1]}),                   # odd planes, rows, a partial panel
    ((1, 16, 5, 6), (96, 8, 3, 3), {"group": 2, "pads": [1, 1, 1, 1]}),
    ((1, 8, 56, 56), (8, 8, 3, 3), {"pads": [1, 1, 1, 1]}),                   # 25 panels: blocks of 12 and 13
    ((5, 16, 4, 3), (48, 16, 3, 3), {"pads": [1, 1, 1, 1]}),                   # tile rows of 2: 6-8 per vector
]


@pytest.mark.parametrize("case", WINO_CASES, ids=[str(i) for i in range(len(WINO_CASES))])
def test_winograd(case):
    """3x3 stride-1 float32 convolutions with constant weights run as
    Winograd F(2x2, 3x3): against the float64 reference (the same error
    bound as the GEMM paths), and against the implicit GEMM (tuning key
    winograd = 0)."""
    import olc_core.tuning as tuning

    xs, ws, attrs = case
    rng = np.random.default_rng(17)
    x, w, b = make_data(rng, xs, ws, "float32", True)
    m = conv_model("float32", attrs, w_const=w)
    ref, absprod = conv_ref(x, w, b, attrs)
    seen = set()
    for level in LEVELS:
        for threads in (1, 2):
            y, s = run_olc(m, {"X": x, "B": b}, level, threads)
            detail = s.kernel_usage_details()[0]
            assert "winograd-f2x2-3x3" in detail, detail
            seen.add("transposed" in detail)
            check_close(y, ref, absprod, k_of(ws, attrs), "float32", f"{level} t{threads}")
        try:
            tuning.set("olc_matmul", "Conv", "winograd", 0, implementation=level, dtype="float32")
            y0, s0 = run_olc(m, {"X": x, "B": b}, level, 1)
            assert "winograd" not in s0.kernel_usage_details()[0]
        finally:
            tuning.reset("olc_matmul", "Conv", "winograd", implementation=level, dtype="float32")
        bound = 4 * (k_of(ws, attrs) + 2) * 2.0**-24 * absprod + 1e-30
        assert (np.abs(y.astype(np.float64) - y0) <= 2 * bound).all()
    WINO_SEEN.update(seen)


def test_winograd_took_both_products():
    """The cases above ran both Winograd products (tiles as columns; few
    tiles as rows)."""
    if len(WINO_SEEN) < 2:
        for case in WINO_CASES:
            test_winograd(case)
    assert {False, True} == WINO_SEEN


@pytest.mark.parametrize("ws", [(64, 300, 3, 3), (96, 300, 3, 3)], ids=["2panels", "3panels"])
def test_winograd_transposed_shares(ws):
    """The transposed Winograd product on 1 to 3 threads: its shares of the
    U^T panels each transforming the input themselves (up to two shares),
    or one V transformed by channel ranges and read by all (three); two
    blocks of tiles (six 6x6 images), two K blocks, a partial strip."""
    xs, attrs = (6, 300, 6, 6), {"pads": [1, 1, 1, 1]}
    rng = np.random.default_rng(23)
    x, w, b = make_data(rng, xs, ws, "float32", True)
    m = conv_model("float32", attrs, w_const=w)
    ref, absprod = conv_ref(x, w, b, attrs)
    for level in LEVELS:
        for threads in (1, 2, 3):
            y, s = run_olc(m, {"X": x, "B": b}, level, threads)
            # (the scalar level's 8-column panels waste less: the normal product)
            assert ("winograd-f2x2-3x3" + ("" if level == "scalar" else "-transposed")) in s.kernel_usage_details()[0]
            check_close(y, ref, absprod, k_of(ws, attrs), "float32", f"{level} t{threads}")


def test_winograd_single_panel_goes_transposed_on_threads():
    """An 8x8 output is 16 tiles: one panel of the normal product, which
    shares out only tile panels. On two threads the transposed one, whose
    shares are output channels (both threads work); on one, the normal
    product where 16 tiles fill its panel (AVX2's 16-wide panels; AVX-512's
    32-wide ones are half empty, and either form may win there); the scalar
    level's 8-wide panels make two, and stay normal."""
    xs, ws, attrs = (1, 32, 8, 8), (32, 32, 3, 3), {"pads": [1, 1, 1, 1]}
    rng = np.random.default_rng(29)
    x, w, b = make_data(rng, xs, ws, "float32", True)
    m = conv_model("float32", attrs, w_const=w)
    ref, absprod = conv_ref(x, w, b, attrs)
    for level in LEVELS:
        for threads in (1, 2):
            y, s = run_olc(m, {"X": x, "B": b}, level, threads)
            detail = s.kernel_usage_details()[0]
            if threads == 2 or level != "avx512":
                transposed = threads == 2 and level != "scalar"
                assert ("winograd-f2x2-3x3-transposed" in detail) == transposed, (level, threads, detail)
            assert "winograd-f2x2-3x3" in detail
            check_close(y, ref, absprod, k_of(ws, attrs), "float32", f"{level} t{threads}")


SPLIT_CASES = [
    # implicit GEMM, tasks padding their own rows: several tiles per image (NC 256), stride 2, odd sizes
    ((1, 5, 45, 37), (7, 5, 5, 3), {"strides": [2, 1], "pads": [2, 1, 1, 1]}, "implicit-gemm"),
    # two single-panel tiles (36 positions), dilation, asymmetric pads
    ((1, 6, 13, 13), (20, 6, 3, 3), {"strides": [2, 2], "dilations": [2, 1], "pads": [2, 1, 1, 0]}, "implicit-gemm"),
    ((3, 8, 17, 17), (16, 4, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1], "group": 2}, "implicit-gemm"),
    # 1-D: one shared padded copy
    ((2, 4, 301), (9, 4, 5), {"pads": [2, 2]}, "implicit-gemm"),
    # an image stem (3 input channels): at least four tiles per thread, cut inside the output rows
    ((1, 3, 40, 38), (20, 3, 7, 7), {"strides": [2, 2], "pads": [3, 3, 3, 3]}, "implicit-gemm"),
    # images of more than 1 MiB padded: one padded copy per image on one thread
    ((2, 4, 190, 190), (8, 4, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}, "implicit-gemm"),
    # Winograd, tiles as columns: blocks cut inside an image, and blocks spanning images
    ((1, 16, 30, 34), (24, 16, 3, 3), {"pads": [1, 1, 1, 1]}, "winograd-f2x2-3x3 "),
    ((3, 8, 15, 13), (12, 8, 3, 3), {"pads": [1, 0, 1, 2]}, "winograd-f2x2-3x3 "),
    # Winograd, tiles as rows: one block of three images' tiles
    ((3, 16, 6, 6), (128, 16, 3, 3), {"pads": [1, 1, 1, 1]}, "winograd-f2x2-3x3-transposed"),
    # Positions as rows: five panels of output channels in two shares; two groups, a share each
    ((1, 96, 3, 3), (160, 96, 1, 1), {}, "pointwise-gemm-transposed"),
    ((1, 240, 4, 4), (40, 240, 1, 1), {}, "pointwise-gemm "),  # 16 positions: half a panel, not transposed
    ((1, 64, 9, 9), (128, 32, 3, 3), {"group": 2, "strides": [2, 2], "pads": [1, 1, 1, 1]}, "implicit-gemm-transposed"),
    # One image of a 1x1 with four panel shares per thread or more: every
    # strip read in place by every share (two K blocks; two groups; shares
    # cut to 512 channels)
    ((1, 300, 5, 5), (512, 300, 1, 1), {}, "pointwise-gemm-transposed"),
    ((1, 64, 5, 5), (512, 32, 1, 1), {"group": 2}, "pointwise-gemm-transposed"),
    ((1, 16, 5, 5), (4608, 16, 1, 1), {}, "pointwise-gemm-transposed"),
    # Depthwise planes padded band by band, their rows in chunks per thread
    # (bands starting inside a plane, the last one short): 3x3 eight rows
    # a pass, stride 2, and 5x5 taps
    ((1, 2, 70, 100), (2, 1, 3, 3), {"group": 2, "pads": [1, 1, 1, 1]}, "depthwise "),
    ((1, 2, 121, 101), (2, 1, 3, 3), {"group": 2, "strides": [2, 2], "pads": [1, 0, 1, 1]}, "depthwise "),
    ((1, 3, 61, 103), (3, 1, 5, 5), {"group": 3, "strides": [2, 2], "pads": [2, 2, 2, 2]}, "depthwise "),
    # planes of 8192 values or more: each plane's rows split between the
    # threads (stride 1 and 2, eight-row passes, a short last range)
    ((1, 8, 100, 90), (8, 1, 3, 3), {"group": 8, "pads": [1, 1, 1, 1]}, "depthwise "),
    ((2, 5, 97, 95), (5, 1, 3, 3), {"group": 5, "strides": [2, 2], "pads": [1, 1, 1, 1]}, "depthwise "),
    # small planes copied whole per task: only the rows a task reads
    ((1, 3, 34, 40), (3, 1, 3, 3), {"group": 3, "strides": [2, 1], "pads": [1, 1, 1, 1]}, "depthwise "),
    ((1, 2, 23, 36), (2, 1, 5, 3), {"group": 2, "dilations": [2, 1], "pads": [4, 1, 3, 1]}, "depthwise "),
    # small planes in blocks of channels (the last one partial), each task
    # claiming its output's lines before computing them
    ((1, 40, 14, 14), (40, 1, 5, 5), {"group": 40, "pads": [2, 2, 2, 2]}, "depthwise-channels"),
    ((2, 24, 7, 7), (24, 1, 3, 3), {"group": 24, "strides": [2, 2], "pads": [1, 1, 1, 1]}, "depthwise-channels"),
]


@pytest.mark.parametrize("direct", [0, 1], ids=["direct_transposed0", "direct_transposed1"])
@pytest.mark.parametrize("case", SPLIT_CASES, ids=[str(i) for i in range(len(SPLIT_CASES))])
def test_thread_splits(case, direct):
    """Shapes whose two-thread split has tails (tiles cut inside an image,
    blocks spanning images, single-panel tiles, padded rows copied per task):
    one and two threads against the float64 reference, and against each
    other within twice the float32 rounding bound. With direct_transposed 0
    each takes the path named; with 1 (the default) an implicit GEMM may
    take the transposed product reading its strips in place instead."""
    from recurrent import tuned

    xs, ws, attrs, algo = case
    rng = np.random.default_rng(23)
    x, w, b = make_data(rng, xs, ws, "float32", True)
    m = conv_model("float32", attrs, w_const=w)
    ref, absprod = conv_ref(x, w, b, attrs)
    bound = 4 * (k_of(ws, attrs) + 2) * 2.0**-24 * absprod + 1e-30
    with tuned("Conv", direct_transposed=direct):
        for level in LEVELS:
            ys = []
            for threads in (1, 2):
                y, s = run_olc(m, {"X": x, "B": b}, level, threads)
                detail = s.kernel_usage_details()[0]
                named = algo in detail + " " and (algo.endswith("transposed") or "transposed" not in detail)
                assert named or (direct and algo.startswith("implicit-gemm") and DIRECT_T in detail), detail
                check_close(y, ref, absprod, k_of(ws, attrs), "float32", f"{level} t{threads}")
                ys.append(y.astype(np.float64))
            assert (np.abs(ys[0] - ys[1]) <= 2 * bound).all(), level


# The transposed product with four panel shares per thread or more: its
# strips built once for every task (two images stacked, a strip spanning
# both; two K blocks; two groups; an implicit GEMM's im2col strips; the
# last one past the default shared_strips_min_floats).
SHARED_STRIPS_CASES = [
    ((2, 96, 5, 5), (512, 96, 1, 1), {}, "pointwise-gemm-transposed"),
    ((2, 300, 5, 5), (256, 300, 1, 1), {}, "pointwise-gemm-transposed"),
    ((2, 64, 5, 5), (512, 32, 1, 1), {"group": 2}, "pointwise-gemm-transposed"),
    ((1, 32, 9, 9), (256, 32, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}, "implicit-gemm-transposed"),
    ((6, 512, 5, 5), (512, 512, 1, 1), {}, "pointwise-gemm-transposed"),
]


@pytest.mark.parametrize("case", SHARED_STRIPS_CASES, ids=[str(i) for i in range(len(SHARED_STRIPS_CASES))])
def test_shared_strips(case):
    """Strips built once and shared (shared_strips_min_floats 1, and the
    default for the last case) against each task building its own (the
    key past any size): the same tiles from the same strips, so the same
    bits, on 2 and 3 threads; and the float64 reference."""
    from recurrent import tuned

    xs, ws, attrs, algo = case
    rng = np.random.default_rng(29)
    x, w, b = make_data(rng, xs, ws, "float32", True)
    m = conv_model("float32", attrs, w_const=w)
    ref, absprod = conv_ref(x, w, b, attrs)
    default = case is SHARED_STRIPS_CASES[-1]
    for level in LEVELS:
        for threads in (2, 3):
            ys = []
            for floats in (None if default else 1, 1 << 60):
                with contextlib.ExitStack() as stack:
                    # (not the transposed product reading its strips in place)
                    stack.enter_context(tuned("Conv", direct_transposed=0))
                    if floats is not None:
                        stack.enter_context(tuned("Conv", shared_strips_min_floats=floats))
                    y, s = run_olc(m, {"X": x, "B": b}, level, threads)
                assert algo in s.kernel_usage_details()[0], s.kernel_usage_details()
                check_close(y, ref, absprod, k_of(ws, attrs), "float32", f"{level} t{threads} {floats}")
                ys.append(y)
            np.testing.assert_array_equal(ys[0], ys[1], err_msg=f"{level} t{threads}")


POINTWISE_SPLIT_CASES = [
    ((1, 300, 16, 24), (29, 300, 1, 1)),  # 3 tiles of 128 positions: 4 on 2 threads; two K blocks
    ((3, 40, 13, 15), (50, 40, 1, 1)),    # a column tail panel per image, 3 images
    ((1, 520, 7, 9), (70, 520, 1, 1)),    # one tile: output channels split; three K blocks
    ((2, 64, 24, 16), (24, 32, 1, 1), {"group": 2}),
    # K <= 16: a strip of rows at a time across a tile's panels; strip and
    # column tails, 3 tiles per image, groups
    ((2, 12, 17, 19), (40, 12, 1, 1)),
    ((1, 32, 9, 23), (30, 16, 1, 1), {"group": 2}),
]


@pytest.mark.parametrize("mode", [0, 1, 2, 3], ids=["im2col", "by-shape", "in-place", "row-packed"])
@pytest.mark.parametrize("case", POINTWISE_SPLIT_CASES, ids=[str(i) for i in range(len(POINTWISE_SPLIT_CASES))])
def test_pointwise_splits(case, mode):
    """A pointwise convolution's GEMM over tiles of 128 positions (tuning
    nc), X as im2col panels (pointwise_direct 0), read in place (2), copied
    row by row into a tile's panels (3) or either by shape (1): one and two
    threads (tiles added to even the threads' shares, output channels split
    for more tasks) against the float64 reference."""
    import olc_core.tuning as tuning

    xs, ws = case[0], case[1]
    attrs = case[2] if len(case) > 2 else {}
    rng = np.random.default_rng(31)
    x, w, b = make_data(rng, xs, ws, "float32", True)
    m = conv_model("float32", attrs, w_const=w)
    ref, absprod = conv_ref(x, w, b, attrs)
    for level in LEVELS:
        try:
            tuning.set("olc_matmul", "Conv", "nc", 128, implementation=level, dtype="float32")
            tuning.set("olc_matmul", "Conv", "pointwise_direct", mode, implementation=level, dtype="float32")
            for threads in (1, 2):
                y, s = run_olc(m, {"X": x, "B": b}, level, threads)
                detail = s.kernel_usage_details()[0]
                assert "pointwise-gemm" in detail and "transposed" not in detail, detail
                check_close(y, ref, absprod, k_of(ws, attrs), "float32", f"{level} t{threads}")
        finally:
            tuning.reset("olc_matmul", "Conv", "nc", implementation=level, dtype="float32")
            tuning.reset("olc_matmul", "Conv", "pointwise_direct", implementation=level, dtype="float32")


# Pointwise convolutions as the transposed product: one image, images
# stacked (a strip spanning two of them), groups, a strided 1x1 (its
# subsampled copy read as the source), K blocks, a partial W^T panel.
# Each shape takes the transposed product at every level (few positions,
# output channels that fill the W^T panels: prefer_transposed).
POINTWISE_IN_PLACE_CASES = [
    ((1, 96, 3, 3), (160, 96, 1, 1), {}),
    ((3, 40, 3, 3), (48, 40, 1, 1), {}),
    ((2, 64, 3, 3), (128, 32, 1, 1), {"group": 2}),
    ((2, 300, 3, 3), (64, 300, 1, 1), {}),
    ((1, 48, 5, 5), (80, 48, 1, 1), {"strides": [2, 2]}),
    ((1, 96, 5, 5), (512, 96, 1, 1), {}),  # one image, panel shares on two threads
]


@pytest.mark.parametrize("case", POINTWISE_IN_PLACE_CASES, ids=[str(i) for i in range(len(POINTWISE_IN_PLACE_CASES))])
def test_pointwise_strips_in_place_or_copied(case):
    """The transposed product's strips read in place from X
    (pointwise_in_place 1, the AVX-512 default) or copied (0, the AVX2
    default): the same sums in the same order, so the same bits, and the
    float64 reference; every level, one and two threads."""
    from recurrent import tuned

    xs, ws, attrs = case
    rng = np.random.default_rng(43)
    x, w, b = make_data(rng, xs, ws, "float32", True)
    m = conv_model("float32", attrs, w_const=w)
    ref, absprod = conv_ref(x, w, b, attrs)
    for level in LEVELS:
        for threads in (1, 2):
            ys = []
            for in_place in (0, 1):
                with tuned("Conv", pointwise_in_place=in_place):
                    y, s = run_olc(m, {"X": x, "B": b}, level, threads)
                assert "pointwise-gemm-transposed" in s.kernel_usage_details()[0], s.kernel_usage_details()
                check_close(y, ref, absprod, k_of(ws, attrs), "float32", f"{level} t{threads} in_place {in_place}")
                ys.append(y)
            np.testing.assert_array_equal(ys[0], ys[1], err_msg=f"{level} t{threads}")


POINTWISE_TAIL_CASES = [
    ((1, 16, 10, 10), (40, 16, 1, 1)),    # 100 positions: a last panel of 4 (2 at AVX2, 4 at the baseline)
    ((2, 64, 14, 14), (70, 64, 1, 1)),    # 196: a partial last W^T panel of channels, two images
    ((1, 300, 13, 13), (29, 300, 1, 1)),  # 169: a tail of 9 at AVX-512; two K blocks
    ((1, 64, 14, 14), (100, 64, 1, 1)),   # two threads: output channels split inside a W^T panel
]


@pytest.mark.parametrize("case", POINTWISE_TAIL_CASES, ids=[str(i) for i in range(len(POINTWISE_TAIL_CASES))])
def test_pointwise_tail(case):
    """A pointwise product's last panel of at most MR positions, with
    constant weights, runs as the transposed product (X^T's rows by the
    W^T panels); with fed weights as the normal product's column tail:
    both against the float64 reference and each other, every level, one
    and two threads."""
    xs, ws = case
    rng = np.random.default_rng(41)
    x, w, b = make_data(rng, xs, ws, "float32", True)
    ref, absprod = conv_ref(x, w, b, {})
    bound = 4 * (k_of(ws, {}) + 2) * 2.0**-24 * absprod + 1e-30
    for level in LEVELS:
        for threads in (1, 2):
            got = []
            for const in (True, False):
                m = conv_model("float32", {}, w_const=w if const else None)
                y, s = run_olc(m, {"X": x, "B": b} | ({} if const else {"W": w}), level, threads)
                assert "pointwise-gemm" in s.kernel_usage_details()[0], s.kernel_usage_details()
                check_close(y, ref, absprod, k_of(ws, {}), "float32", f"{level} t{threads} const={const}")
                got.append(y.astype(np.float64))
            assert (np.abs(got[0] - got[1]) <= 2 * bound).all(), f"{level} t{threads}"


DIRECT_ROWS_CASES = [
    # a 7x7 stride-2 stem: rows of 38 (a panel and a 6-wide tail at
    # AVX-512, 16 + 16 + 6 below)
    ((1, 3, 40, 75), (8, 3, 7, 7), {"strides": [2, 2], "pads": [3, 3, 3, 3]}),
    # two images (the first one's last rows read into the second's copy), a
    # strip tail of one output channel, uneven pads
    ((2, 3, 9, 50), (13, 3, 3, 3), {"strides": [2, 2], "pads": [1, 0, 1, 1]}),
    # W stride 3 with W dilation 2: taps in three phases
    ((1, 3, 8, 110), (4, 3, 3, 3), {"strides": [2, 3], "dilations": [1, 2], "pads": [1, 2, 1, 2]}),
    # groups of 4 channels, rows of 37
    ((1, 8, 6, 37), (6, 4, 3, 3), {"group": 2, "pads": [1, 1, 1, 1]}),
    # 1-D (one output row) and 3-D (rows of several depths)
    ((2, 4, 100), (5, 4, 5), {"dilations": [2], "pads": [2, 2]}),
    ((1, 2, 4, 5, 40), (3, 2, 3, 3, 3), {"pads": [1, 1, 1, 1, 1, 1]}),
]


@pytest.mark.parametrize("t", ["float32", "float16"])
@pytest.mark.parametrize("case", DIRECT_ROWS_CASES, ids=[str(i) for i in range(len(DIRECT_ROWS_CASES))])
def test_direct_rows(case, t):
    """An image stem's implicit GEMM reading B's rows straight from the
    padded copy (tuning direct_rows 1: the usage detail says
    implicit-gemm-rows) and building im2col panels (0): both against the
    float64 reference on every level, one and two threads (two, and one
    for taps at most three rows tall: each task pads its own rows)."""
    import olc_core.tuning as tuning

    xs, ws, attrs = case
    rng = np.random.default_rng(37)
    x, w, b = make_data(rng, xs, ws, t, True)
    m = conv_model(t, attrs, w_const=w)
    ref, absprod = conv_ref(x, w, b, attrs)
    for level in LEVELS:
        nr = {"scalar": 8, "avx2": 16, "avx512": 32}[level]
        for mode in (1, 0):
            try:
                tuning.set("olc_matmul", "Conv", "direct_rows", mode, implementation=level, dtype=t)
                for threads in (1, 2):
                    y, s = run_olc(m, {"X": x, "B": b}, level, threads)
                    detail = s.kernel_usage_details()[0]
                    assert ("implicit-gemm-rows" in detail) == (mode == 1 and ref.shape[-1] >= nr), detail
                    check_close(y, ref, absprod, k_of(ws, attrs), t, f"{level} mode {mode} t{threads}")
            finally:
                tuning.reset("olc_matmul", "Conv", "direct_rows", implementation=level, dtype=t)


def test_large_image_rows_padded_per_task():
    """A 3x3 stride-2 layer whose padded image (4.3 MB) passes 3/4 of any
    L2: on one thread too each task pads its own rows (implicit GEMM, W
    constant and fed), every level, against the float64 reference."""
    xs, ws, attrs = (1, 24, 210, 208), (8, 24, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}
    rng = np.random.default_rng(11)
    x, w, b = make_data(rng, xs, ws, "float32", True)
    ref, absprod = conv_ref(x, w, b, attrs)
    from recurrent import tuned

    for direct in (0, 1):
        with tuned("Conv", direct_transposed=direct):
            for level in LEVELS:
                for const in (True, False):
                    m = conv_model("float32", attrs, w_const=w if const else None)
                    y, s = run_olc(m, {"X": x, "B": b} | ({} if const else {"W": w}), level, 1)
                    assert "implicit-gemm" in s.kernel_usage_details()[0], s.kernel_usage_details()
                    check_close(y, ref, absprod, k_of(ws, attrs), "float32", f"{level} const={const} {direct}")


def test_large_input_uses_tiles():
    """A 3x3 convolution whose im2col matrix would be 9 times the input:
    right result on the tiled path, on more than one tile per image."""
    xs, ws, attrs = (1, 16, 64, 72), (24, 16, 3, 3), {"pads": [1, 1, 1, 1]}
    rng = np.random.default_rng(9)
    x, w, b = make_data(rng, xs, ws, "float32", True)
    m = conv_model("float32", attrs)  # W fed: the implicit GEMM (constant W would take Winograd)
    y, s = run_olc(m, {"X": x, "W": w, "B": b}, LEVELS[-1], 2)
    ref, absprod = conv_ref(x, w, b, attrs)
    check_close(y, ref, absprod, k_of(ws, attrs), "float32")
    assert "implicit-gemm" in s.kernel_usage_details()[0]


# The transposed product reading its strips in place (constant weights,
# output channels filling the W^T panels at every level, K >= 3 Mg).
DIRECT_T_CASES = [
    # ResNet-50's 3x3 stride-2 shape, narrowed: rows of 28 in strips of
    # 9 or 10 at AVX-512, 5 or 6 at AVX2; 32 + 16 output channels; two K
    # blocks
    ((1, 40, 56, 56), (48, 40, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    # rows of 12 (one strip at AVX-512, two at AVX2), three images
    ((3, 16, 24, 24), (32, 16, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    # unpadded at stride 1 (X read in place, no copy); a tile past 512 KiB:
    # several strip ranges on one thread, cut inside rows of 73
    ((1, 8, 100, 77), (64, 8, 5, 5), {}),
    # groups, dilation, asymmetric pads, strides (2, 1)
    ((1, 16, 23, 31), (32, 8, 3, 3), {"group": 2, "strides": [2, 1], "dilations": [2, 1], "pads": [2, 1, 1, 0]}),
    # 1-D, stride 2, two images: 10 positions, where the transposed product
    # is chosen (longer rows take the normal product)
    ((2, 40, 19), (32, 40, 3), {"strides": [2], "pads": [1, 1]}),
    # 3-D, rows of 10
    ((1, 6, 5, 9, 10), (16, 6, 3, 3, 3), {"strides": [1, 2, 1], "pads": [1, 1, 1, 1, 0, 1]}),
    # W^T larger than the input: on threads, tasks share out the panels
    ((1, 32, 9, 9), (128, 32, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
]


@pytest.mark.parametrize("t", ["float32", "float16"])
@pytest.mark.parametrize("case", DIRECT_T_CASES, ids=[str(i) for i in range(len(DIRECT_T_CASES))])
def test_direct_transposed(case, t):
    """The transposed product reading its strips straight from the padded
    input (tuning direct_transposed 1, the default, where the output
    channels fill the W^T panels) and the paths it replaces (0): both
    against the float64 reference on 1, 2 and 3 threads (tasks padding
    their own rows, strip ranges cut inside rows), every level."""
    from recurrent import tuned

    xs, ws, attrs = case
    rng = np.random.default_rng(31)
    x, w, b = make_data(rng, xs, ws, t, True)
    m = conv_model(t, attrs, w_const=w)
    ref, absprod = conv_ref(x, w, b, attrs)
    with contextlib.ExitStack() as stack:
        for direct in (1, 0):
            stack.enter_context(tuned("Conv", direct_transposed=direct))
            if t != "float32":  # tuned() sets float32's keys
                for level in LEVELS:
                    olc_core.tuning.set("olc_matmul", "Conv", "direct_transposed", direct, implementation=level, dtype=t)
                    stack.callback(olc_core.tuning.reset, "olc_matmul", "Conv", "direct_transposed",
                                   implementation=level, dtype=t)
            for level in LEVELS:
                for threads in (1, 2, 3):
                    y, s = run_olc(m, {"X": x, "B": b}, level, threads)
                    detail = s.kernel_usage_details()[0]
                    assert (DIRECT_T in detail) == bool(direct), (level, threads, detail)
                    assert y.shape == ref.shape and y.dtype == NP[t]
                    check_close(y, ref, absprod, k_of(ws, attrs), t, f"{t} {level} t{threads} direct {direct}")




@pytest.mark.parametrize("ow", [7, 8, 14])
def test_direct_transposed_needs_strips_of_five_rows(ow):
    """Output rows that split into strips of four positions at AVX2 (MR 6:
    7, 8 and 14 positions) take the normal implicit GEMM there, and the
    direct transposed product at AVX-512 (MR 12: one strip of 7 or 8, two
    of 7); both right."""
    xs, ws, attrs = (1, 32, 2 * ow, 2 * ow), (64, 32, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}
    rng = np.random.default_rng(ow)
    x, w, b = make_data(rng, xs, ws, "float32", True)
    m = conv_model("float32", attrs, w_const=w)
    ref, absprod = conv_ref(x, w, b, attrs)
    for level in LEVELS:
        if level not in ("avx2", "avx512"):
            continue
        for threads in (1, 2):
            y, s = run_olc(m, {"X": x, "B": b}, level, threads)
            detail = s.kernel_usage_details()[0]
            assert (DIRECT_T in detail) == (level == "avx512"), (level, threads, detail)
            assert "implicit-gemm" in detail
            check_close(y, ref, absprod, k_of(ws, attrs), "float32", f"{level} t{threads}")


TRANSPOSED = [c for c in CASES if c[1] in ((64, 48, 1, 1), (96, 24, 3, 3))]


# Planes of 9 positions fill a fraction of any level's NR-wide panel (16 at
# AVX2, 32 at AVX-512) where 64 output channels fill whole ones: transposed
# at every level (a 4x4 plane fills AVX2's panel and is not).
POINTWISE_9 = ((1, 48, 3, 3), (64, 48, 1, 1), {})
STRIDED_9 = ((2, 48, 6, 6), (64, 48, 1, 1), {"strides": [2, 2]})


@pytest.mark.parametrize("case,path", [(CASES[0], "implicit-gemm"), (CASES[11], "pointwise-gemm"),
                                       (CASES[15], "depthwise"), (POINTWISE_9, "pointwise-gemm-transposed"),
                                       (TRANSPOSED[1], "implicit-gemm-transposed"),
                                       (CASES[40], "depthwise-channels"),
                                       (CASES[14], "pointwise-gemm-subsampled"),
                                       (STRIDED_9, "pointwise-gemm-transposed-subsampled"),
                                       (WIDE5[0], "depthwise-channels"), (WIDE5[1], "depthwise-channels"),
                                       (WIDE5[2], "depthwise]")])
def test_algorithm_recorded(case, path):
    xs, ws, attrs = case
    rng = np.random.default_rng(1)
    x, w, b = make_data(rng, xs, ws, "float32", True)
    m = conv_model("float32", attrs)
    _, s = run_olc(m, {"X": x, "W": w, "B": b}, LEVELS[-1])
    assert path in s.kernel_usage_details()[0]


# ---------------------------------------------------------------- errors

def expect_error(m, feeds, pattern):
    with pytest.raises(olc_core.OlcError, match=pattern) as ei:
        s = olc_core.Session(m, strict=True)
        s.run(None, feeds)
    assert "conv0" in str(ei.value)


@pytest.mark.parametrize("xs,ws,attrs,pattern", [
    ((1, 5, 7, 7), (4, 5, 3, 3), {"group": 2}, "not divisible by group"),
    ((1, 4, 7, 7), (3, 2, 3, 3), {"group": 2}, "output channels .* not divisible by group"),
    ((1, 4, 7, 7), (4, 3, 3, 3), {}, "input channels per group"),
    ((1, 4, 7, 7), (4, 2, 3, 3), {"group": 1}, "input channels per group"),
    ((1, 3, 4, 4), (2, 3, 5, 3), {}, "larger than the padded input"),
    ((1, 3, 4, 9), (2, 3, 3, 3), {"dilations": [2, 1]}, "larger than the padded input"),
    ((1, 3, 4, 4), (2, 3, 5, 3), {"auto_pad": "VALID"}, "larger than the input"),
    ((1, 3, 7, 7), (2, 3, 3, 3), {"pads": [1, 1, 1]}, "'pads'"),
    ((1, 3, 7, 7), (2, 3, 3, 3), {"strides": [1, 1, 1]}, "'strides' has 3 values"),
    ((1, 3, 7, 7), (2, 3, 3, 3), {"dilations": [1]}, "'dilations' has 1 values"),
    ((1, 3, 7, 7), (2, 3, 3, 3), {"strides": [0, 1]}, "strides must be positive"),
    ((1, 3, 7, 7), (2, 3, 3, 3), {"strides": [1, -2]}, "strides must be positive"),
    ((1, 3, 7, 7), (2, 3, 3, 3), {"dilations": [0, 1]}, "dilations must be positive"),
    ((1, 3, 7, 7), (2, 3, 3, 3), {"pads": [1, -1, 0, 0]}, "pads must be non-negative"),
    ((1, 3, 7, 7), (2, 3, 3, 3), {"kernel_shape": [3, 2]}, "kernel_shape"),
    ((1, 3, 7, 7), (2, 3, 3, 3), {"auto_pad": "SAME"}, "auto_pad must be"),
    ((1, 3, 7, 7), (2, 3, 3, 3), {"group": 0}, "group must be >= 1"),
])
def test_errors(xs, ws, attrs, pattern):
    rng = np.random.default_rng(0)
    x, w, _ = make_data(rng, xs, ws, "float32", False)
    for const in (False, True):
        m = conv_model("float32", attrs, w_const=w if const else None, bias=False)
        expect_error(m, {"X": x} | ({} if const else {"W": w}), pattern)


def test_error_bias_shape():
    rng = np.random.default_rng(0)
    x, w, _ = make_data(rng, (1, 3, 7, 7), (2, 3, 3, 3), "float32", False)
    m = conv_model("float32", {})
    expect_error(m, {"X": x, "W": w, "B": np.zeros(3, np.float32)}, "bias B")


def test_error_rank_mismatch():
    rng = np.random.default_rng(0)
    x, w, _ = make_data(rng, (1, 3, 7, 7), (2, 3, 3), "float32", False)
    m = conv_model("float32", {}, bias=False)
    expect_error(m, {"X": x, "W": w}, "rank")


def test_depthwise_padding_buffer_between_geometries():
    """Depthwise planes of one padded extent but different input sizes, run
    one after the other on one thread: the second must see zeros where the
    first had input (the padded buffer is kept per thread)."""
    rng = np.random.default_rng(12)
    first = ((1, 4, 7, 7), (4, 1, 3, 3), {"group": 4, "pads": [1, 1, 1, 1]})
    second = ((1, 4, 6, 6), (4, 1, 3, 3), {"group": 4, "pads": [1, 1, 2, 2]})
    for level in LEVELS:
        for xs, ws, attrs in (first, second, first):
            x, w, b = make_data(rng, xs, ws, "float32", True)
            y, s = run_olc(conv_model("float32", attrs), {"X": x, "W": w, "B": b}, level, 1)
            assert "depthwise" in s.kernel_usage_details()[0]
            ref, absprod = conv_ref(x, w, b, attrs)
            check_close(y, ref, absprod, k_of(ws, attrs), "float32", f"{level} {xs}")


GUARD_CASES = [
    ((1, 8, 5, 13), (5, 8, 1, 1), {}),                                   # pointwise, column tail
    ((1, 16, 3, 37), (13, 16, 1, 1), {}),
    ((1, 3, 7, 9), (4, 3, 3, 5), {"pads": [1, 2, 1, 2]}),               # implicit GEMM
    ((1, 4, 9, 7), (6, 2, 3, 3), {"group": 2, "strides": [2, 2]}),
    ((1, 3, 4, 15), (3, 1, 3, 3), {"group": 3}),                         # depthwise rows around a vector
    ((1, 3, 4, 17), (3, 1, 3, 3), {"group": 3, "pads": [1, 1, 1, 1]}),
    ((1, 3, 4, 33), (3, 1, 3, 3), {"group": 3, "strides": [1, 2]}),
    ((1, 3, 4, 65), (6, 1, 3, 3), {"group": 3, "pads": [0, 1, 0, 1]}),
    ((1, 2, 31), (2, 1, 5), {"group": 2}),
    ((1, 20, 7, 7), (20, 1, 3, 3), {"group": 20, "pads": [1, 1, 1, 1]}),  # across channels
    ((1, 3, 5, 5), (3, 1, 3, 3), {"group": 3, "strides": [2, 2]}),
    ((1, 3, 6, 37), (4, 3, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),  # phase-split copy
]


@pytest.mark.parametrize("at", ["end", "start"])
@pytest.mark.parametrize("t", ["float32", "float16"])
def test_operands_against_guard_pages(t, at):
    """No path reads past X, W or B: each ends at (or starts after) an
    inaccessible page (olc_core.testing.guarded)."""
    from olc_core import testing

    rng = np.random.default_rng(21)
    for xs, ws, attrs in GUARD_CASES:
        x, w, b = make_data(rng, xs, ws, t, True)
        m = conv_model(t, attrs)
        feeds = {"X": testing.guarded(x, at=at), "W": testing.guarded(w, at=at), "B": testing.guarded(b, at=at)}
        ref, absprod = conv_ref(x, w, b, attrs)
        for level in LEVELS:
            y, _ = run_olc(m, feeds, level, 1)
            check_close(y, ref, absprod, k_of(ws, attrs), t, f"{xs} {level} {at}")
