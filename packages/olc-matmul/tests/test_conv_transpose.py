"""ConvTranspose against independent oracles: a float64 numpy reference
written here (each input position scattered through every kernel offset
into the unpadded output, then cropped by the pads) for every case, and
onnxruntime for float32. 1-D, 2-D and 3-D; groups 1, 2 and C; strides,
dilations, pads, output_padding, output_shape and SAME auto_pad; batch 1
and 3; with and without bias; constant (prepacked) and fed weights;
float32, float16 and bfloat16; every SIMD level, 1 and 2 threads; strict
sessions with the kernel usage checked."""

from __future__ import annotations

import itertools

import numpy as np
import onnxruntime as ort
import pytest
from helpers import LEVELS, NP, check_close, model, session

import olc_core

KERNEL = "olc_matmul::ConvTranspose"


def ref_geometry(xs, ws, attrs):
    """Per spatial axis: (pad at the start, output size), from the ONNX rules."""
    nsp = len(xs) - 2
    s = attrs.get("strides", [1] * nsp)
    d = attrs.get("dilations", [1] * nsp)
    op = attrs.get("output_padding", [0] * nsp)
    ap = attrs.get("auto_pad", "NOTSET")
    pads = attrs.get("pads", [0] * (2 * nsp))
    oshape = attrs.get("output_shape")
    out = []
    for i in range(nsp):
        full = s[i] * (xs[2 + i] - 1) + op[i] + (ws[2 + i] - 1) * d[i] + 1
        if oshape is not None or ap in ("SAME_UPPER", "SAME_LOWER"):
            o = oshape[-nsp + i] if oshape is not None else xs[2 + i] * s[i]
            total = full - o
            head = total // 2 if ap == "SAME_UPPER" else total - total // 2
            if ap not in ("SAME_UPPER", "SAME_LOWER") and total < 0:
                head = 0  # an output_shape past the full extent: the extra positions at the end
            out.append((head, o))
        else:
            out.append((pads[i], full - pads[i] - pads[nsp + i]))
    return out


def convt_ref(x, w, b, attrs):
    x = x.astype(np.float64)
    w = w.astype(np.float64)
    nsp = x.ndim - 2
    group = attrs.get("group", 1)
    s = attrs.get("strides", [1] * nsp)
    d = attrs.get("dilations", [1] * nsp)
    op = attrs.get("output_padding", [0] * nsp)
    n, c = x.shape[:2]
    cg, mg = c // group, w.shape[1]
    ks = w.shape[2:]
    ins = x.shape[2:]
    full = [s[i] * (ins[i] - 1) + op[i] + (ks[i] - 1) * d[i] + 1 for i in range(nsp)]
    y = np.zeros((n, group, mg, *full))
    a = np.zeros_like(y)
    xg = x.reshape(n, group, cg, *ins)
    wg = w.reshape(group, cg, mg, *ks)
    sp = "xyz"[:nsp]
    eq = f"ngc{sp},gcm->ngm{sp}"
    for kk in itertools.product(*[range(k) for k in ks]):
        sl = tuple(slice(kk[i] * d[i], kk[i] * d[i] + (ins[i] - 1) * s[i] + 1, s[i]) for i in range(nsp))
        wk = wg[(slice(None), slice(None), slice(None)) + kk]
        y[(slice(None),) * 3 + sl] += np.einsum(eq, xg, wk)
        a[(slice(None),) * 3 + sl] += np.einsum(eq, np.abs(xg), np.abs(wk))
    geo = ref_geometry(x.shape, w.shape, attrs)
    outs = [o for _, o in geo]
    yo = np.zeros((n, group, mg, *outs))
    ao = np.zeros_like(yo)
    dst, src = [], []
    for i, (head, o) in enumerate(geo):
        lo, hi = max(0, -head), min(o, full[i] - head)
        dst.append(slice(lo, max(lo, hi)))
        src.append(slice(lo + head, max(lo, hi) + head))
    yo[(slice(None),) * 3 + tuple(dst)] = y[(slice(None),) * 3 + tuple(src)]
    ao[(slice(None),) * 3 + tuple(dst)] = a[(slice(None),) * 3 + tuple(src)]
    m = group * mg
    yo = yo.reshape(n, m, *outs)
    ao = ao.reshape(n, m, *outs)
    if b is not None:
        bb = b.astype(np.float64).reshape((1, m) + (1,) * nsp)
        yo = yo + bb
        ao = ao + np.abs(bb)
    return yo, ao


# (X shape, W shape [C, M/group, k...], attributes)
CASES = [
    ((1, 3, 7, 9), (3, 4, 3, 5), {}),
    ((3, 4, 5, 7), (4, 3, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((1, 4, 5, 7), (4, 2, 3, 3), {"strides": [2, 3], "output_padding": [1, 2], "pads": [0, 1, 1, 0]}),
    ((1, 4, 5, 7), (4, 3, 3, 3), {"group": 2, "dilations": [2, 2]}),
    ((3, 6, 5, 7), (6, 1, 3, 3), {"group": 6, "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((1, 3, 5, 6), (3, 2, 3, 3), {"strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    ((1, 3, 5, 6), (3, 2, 4, 3), {"strides": [2, 2], "auto_pad": "SAME_LOWER"}),
    ((1, 3, 5, 6), (3, 2, 3, 3), {"strides": [3, 2], "output_shape": [16, 13]}),
    ((1, 3, 5, 6), (3, 2, 3, 3), {"strides": [3, 2], "output_shape": [15, 12], "output_padding": [1, 1]}),
    # output_shape past the full extent (15 x 13 and 22 here): positions of
    # bias alone at the end.
    ((1, 3, 5, 6), (3, 2, 3, 3), {"strides": [3, 2], "output_shape": [17, 14]}),
    ((2, 4, 8), (4, 2, 1), {"strides": [3], "output_shape": [24]}),
    ((1, 16, 9, 11), (16, 24, 2, 2), {"strides": [2, 2]}),
    ((1, 64, 6, 7), (64, 8, 4, 4), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((1, 3, 17), (3, 4, 5), {"strides": [3], "pads": [1, 2]}),
    ((3, 4, 20), (4, 2, 3), {"group": 2, "dilations": [2], "output_padding": [1], "strides": [2]}),
    ((1, 2, 3, 4, 5), (2, 3, 3, 2, 3), {"strides": [2, 1, 2], "pads": [1, 0, 1, 0, 1, 1]}),
    ((1, 4, 3, 4, 3), (4, 1, 3, 3, 3), {"group": 4}),
    # Stride 2 along W with rows wider than a vector: kernel columns added in
    # interleaved pairs (odd kernel widths leave one alone), edges clipped.
    ((1, 8, 5, 37), (8, 4, 4, 4), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((2, 6, 4, 40), (6, 3, 3, 3), {"strides": [2, 2], "pads": [1, 0, 1, 2], "output_padding": [1, 1]}),
    ((1, 4, 70), (4, 2, 5), {"strides": [2], "pads": [3, 2]}),
    # Kernels that tile the output (kernel == stride, no pads): each output
    # stored once, input positions split across threads; then the same
    # kernels with output_padding, which leaves outputs to the bias alone.
    ((2, 32, 12, 10), (32, 16, 2, 2), {"strides": [2, 2]}),
    ((1, 8, 6, 7), (8, 3, 2, 2), {"group": 2, "strides": [2, 2]}),
    ((2, 8, 13), (8, 5, 3), {"strides": [3]}),
    ((1, 4, 3, 4, 5), (4, 3, 2, 2, 2), {"strides": [2, 2, 2]}),
    ((1, 5, 4, 6), (5, 7, 1, 1), {}),
    ((1, 16, 9, 11), (16, 4, 2, 2), {"strides": [2, 2], "output_padding": [1, 0]}),
]
IDS = [f"{'x'.join(map(str, x))}-w{'x'.join(map(str, w))}-{i}" for i, (x, w, _) in enumerate(CASES)]


def convt_model(t, attrs, w_const=None, bias=True):
    opset = 22 if t == "bfloat16" else 11
    inputs = [("X", t), ("W", t)] + ([("B", t)] if bias else [])
    inits = [("W", w_const)] if w_const is not None else []
    return model("ConvTranspose", inputs, [("Y", t)], attrs=attrs, initializers=inits, opset=opset, name="convt0")


def run_olc(m, feeds, level, threads):
    s = session(m, level, threads)
    (y,) = s.run(None, feeds)
    assert s.kernel_usage() == [KERNEL]
    return y, s


# (X shape, W shape, output_shape): the full extent is 15 x 13 and 22;
# onnxruntime takes outputs up to a stride past it (17 x 14, 24).
PAST_FULL = [
    ((1, 3, 5, 6), (3, 2, 3, 3), [16, 14]),
    ((1, 3, 5, 6), (3, 2, 3, 3), [17, 14]),
    ((1, 3, 5, 6), (3, 2, 3, 3), [19, 18]),
    ((2, 4, 8), (4, 2, 1), [24]),
    ((1, 4, 8), (4, 2, 1), [27]),
]


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("xs,ws,oshape", PAST_FULL, ids=[str(o) for _, _, o in PAST_FULL])
def test_output_shape_past_full_extent(xs, ws, oshape, level):
    """An output_shape larger than the transposed convolution's full extent
    without auto_pad: the extra positions, bias alone, all come after the
    others, as onnxruntime gives them up to a stride past the extent (it
    rejects more) and onnx.reference where it runs (it rejects some). The
    spec's pad formula, read literally, would put half of them before the
    first position."""
    from onnx.reference import ReferenceEvaluator

    rng = np.random.default_rng(5)
    nsp = len(xs) - 2
    strides = [3, 2][:nsp]
    attrs = {"strides": strides, "output_shape": oshape}
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float32)
    b = rng.standard_normal(ws[1]).astype(np.float32)
    m = convt_model("float32", attrs, w_const=w)
    feeds = {"X": x, "B": b}
    y, _ = run_olc(m, feeds, level, 1)
    assert y.shape == (xs[0], ws[1], *oshape)
    want, _ = convt_ref(x, w, b, attrs)
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)
    full = [strides[i] * (xs[2 + i] - 1) + ws[2 + i] for i in range(nsp)]
    tail = y[(slice(None), slice(None), slice(full[0], None))]
    np.testing.assert_array_equal(tail, np.broadcast_to(b.reshape((1, -1) + (1,) * nsp), tail.shape))
    if all(oshape[i] - full[i] < strides[i] for i in range(nsp)):
        (want_ort,) = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
        np.testing.assert_allclose(y, want_ort, rtol=1e-5, atol=1e-5)
    try:
        (want_ref,) = ReferenceEvaluator(m).run(None, feeds)
    except ValueError:  # onnx.reference's col2im step rejects the larger extensions
        return
    np.testing.assert_allclose(y, want_ref, rtol=1e-5, atol=1e-5)


def test_reference_matches_onnx_reference():
    """The reference itself, against onnx.reference on a strided, padded case."""
    from onnx.reference import ReferenceEvaluator

    rng = np.random.default_rng(2)
    attrs = {"strides": [2, 3], "pads": [1, 0, 0, 2], "output_padding": [1, 1], "dilations": [1, 2]}
    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    w = rng.standard_normal((3, 2, 3, 2)).astype(np.float32)
    m = convt_model("float32", attrs, bias=False)
    (want,) = ReferenceEvaluator(m).run(None, {"X": x, "W": w})
    y, _ = convt_ref(x, w, None, attrs)
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("const", [False, True], ids=["fed-W", "const-W"])
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_float32(case, bias, const):
    xs, ws, attrs = case
    rng = np.random.default_rng(abs(hash((xs, ws, bias, const))) % 2**32)
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float32)
    b = rng.standard_normal(ws[1] * attrs.get("group", 1)).astype(np.float32) if bias else None
    m = convt_model("float32", attrs, w_const=w if const else None, bias=bias)
    feeds = {"X": x} | ({} if const else {"W": w}) | ({"B": b} if bias else {})
    ref, absprod = convt_ref(x, w, b, attrs)
    ort_y = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    assert ort_y.shape == ref.shape
    K = xs[1] // attrs.get("group", 1)
    for level in LEVELS:
        for threads in (1, 2):
            y, s = run_olc(m, feeds, level, threads)
            assert y.shape == ref.shape and y.dtype == np.float32
            check_close(y, ref, absprod, K, "float32", f"{level} t{threads}")
            bound = 4 * (K + 2) * 2.0**-24 * absprod + 1e-30
            assert (np.abs(y.astype(np.float64) - ort_y) <= 2 * bound).all()
            if const and threads == 1:
                assert "prepacked-W" in s.kernel_usage_details()[0]


@pytest.mark.parametrize("t", ["float16", "bfloat16"])
@pytest.mark.parametrize("case", CASES[::2], ids=IDS[::2])
def test_half_types(case, t):
    xs, ws, attrs = case
    rng = np.random.default_rng(4)
    x = rng.standard_normal(xs).astype(NP[t])
    w = rng.standard_normal(ws).astype(NP[t])
    b = rng.standard_normal(ws[1] * attrs.get("group", 1)).astype(NP[t])
    ref, absprod = convt_ref(x, w, b, attrs)
    for const in (False, True):
        m = convt_model(t, attrs, w_const=w if const else None)
        feeds = {"X": x, "B": b} | ({} if const else {"W": w})
        for level in LEVELS:
            y, _ = run_olc(m, feeds, level, 2)
            assert y.dtype == NP[t]
            check_close(y, ref, absprod, xs[1] // attrs.get("group", 1), t, f"{t} {level}")


@pytest.mark.parametrize("xs,ws,attrs,pattern", [
    ((1, 5, 7, 7), (5, 2, 3, 3), {"group": 2}, "not divisible by group"),
    ((1, 4, 7, 7), (3, 2, 3, 3), {}, "must have 4 rows"),
    ((1, 3, 2, 2), (3, 2, 3, 3), {"pads": [3, 3, 3, 3]}, "not positive"),
    ((1, 3, 7, 7), (3, 2, 3, 3), {"output_padding": [1]}, "'output_padding'"),
    ((1, 3, 7, 7), (3, 2, 3, 3), {"strides": [0, 1]}, "strides must be positive"),
    ((1, 3, 7, 7), (3, 2, 3, 3), {"pads": [1, 1]}, "'pads'"),
])
def test_errors(xs, ws, attrs, pattern):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float32)
    m = convt_model("float32", attrs, bias=False)
    with pytest.raises(olc_core.OlcError, match=pattern) as ei:
        s = olc_core.Session(m, strict=True)
        s.run(None, {"X": x, "W": w})
    assert "convt0" in str(ei.value)


@pytest.mark.parametrize("at", ["end", "start"])
def test_operands_against_guard_pages(at):
    """No path reads past X, W or B (olc_core.testing.guarded pages)."""
    from olc_core import testing

    rng = np.random.default_rng(8)
    for xs, ws, attrs in [CASES[0], CASES[2], CASES[9], CASES[11]]:
        x = rng.standard_normal(xs).astype(np.float32)
        w = rng.standard_normal(ws).astype(np.float32)
        b = rng.standard_normal(ws[1] * attrs.get("group", 1)).astype(np.float32)
        m = convt_model("float32", attrs)
        feeds = {"X": testing.guarded(x, at=at), "W": testing.guarded(w, at=at), "B": testing.guarded(b, at=at)}
        ref, absprod = convt_ref(x, w, b, attrs)
        for level in LEVELS:
            y, _ = run_olc(m, feeds, level, 1)
            check_close(y, ref, absprod, xs[1] // attrs.get("group", 1), "float32", f"{xs} {level} {at}")
