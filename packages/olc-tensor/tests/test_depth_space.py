"""DepthToSpace (DCR and CRD) and SpaceToDepth (DCR, and CRD from opset 28)
against onnx.reference and the spec's reshape/transpose written in numpy,
byte for byte: every element type, block sizes 1 to 5, batches, empty
tensors, one and two threads (the kernels are plain loops: no SIMD level
to cap)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from helpers import ALL_TYPES, assert_same, make_model, olc_run, random_array, ref_run, seed_of  # noqa: E402


def d2s(x, bs, mode):
    b, c, h, w = x.shape
    if mode == "DCR":
        t = x.reshape(b, bs, bs, c // (bs * bs), h, w).transpose(0, 3, 4, 1, 5, 2)
    else:
        t = x.reshape(b, c // (bs * bs), bs, bs, h, w).transpose(0, 1, 4, 2, 5, 3)
    return t.reshape(b, c // (bs * bs), h * bs, w * bs)


def s2d(x, bs, mode):
    b, c, h, w = x.shape
    t = x.reshape(b, c, h // bs, bs, w // bs, bs)
    t = t.transpose(0, 3, 5, 1, 2, 4) if mode == "DCR" else t.transpose(0, 1, 3, 5, 2, 4)
    return t.reshape(b, c * bs * bs, h // bs, w // bs)


D2S_SHAPES = [((1, 4, 2, 3), 2), ((2, 8, 3, 1), 2), ((1, 9, 2, 2), 3), ((3, 16, 1, 5), 4), ((1, 3, 4, 4), 1),
              ((2, 18, 0, 3), 3), ((0, 4, 2, 2), 2), ((1, 32, 7, 9), 2)]
S2D_SHAPES = [((1, 1, 4, 6), 2), ((2, 3, 6, 3), 3), ((1, 2, 8, 8), 4), ((3, 5, 2, 2), 1), ((1, 2, 0, 4), 2),
              ((2, 7, 18, 10), 2)]


@pytest.mark.parametrize("t", ALL_TYPES)
def test_depth_to_space(t):
    rng = np.random.default_rng(seed_of("d2s", t))
    for shape, bs in D2S_SHAPES:
        x = random_array(rng, shape, t)
        for opset, mode in ((1, None), (11, "DCR"), (11, "CRD"), (13, "DCR"), (13, "CRD"), (28, "CRD")):
            if t == "bfloat16" and opset < 13:
                continue
            attrs = {"blocksize": bs} if mode is None else {"blocksize": bs, "mode": mode}
            model = make_model("DepthToSpace", [("x", t)], ["y"], opset, attrs)
            (got,) = olc_run(model, {"x": x}, expect_kernel="olc_tensor::DepthToSpace")
            assert_same(got, d2s(x, bs, mode or "DCR"), f"{t} {shape} bs={bs} {mode} o={opset}")
            if x.size and mode is not None:
                assert_same(got, ref_run(model, {"x": x})[0], f"ref {t} {shape} {mode}")


@pytest.mark.parametrize("t", ALL_TYPES)
def test_space_to_depth(t):
    rng = np.random.default_rng(seed_of("s2d", t))
    for shape, bs in S2D_SHAPES:
        x = random_array(rng, shape, t)
        for opset, mode in ((1, None), (13, None), (28, "DCR"), (28, "CRD")):
            if t == "bfloat16" and opset < 13:
                continue
            attrs = {"blocksize": bs} if mode is None else {"blocksize": bs, "mode": mode}
            model = make_model("SpaceToDepth", [("x", t)], ["y"], opset, attrs)
            (got,) = olc_run(model, {"x": x}, expect_kernel="olc_tensor::SpaceToDepth")
            assert_same(got, s2d(x, bs, mode or "DCR"), f"{t} {shape} bs={bs} {mode} o={opset}")
            if x.size:
                assert_same(got, ref_run(model, {"x": x})[0], f"ref {t} {shape} {mode}")


@pytest.mark.parametrize("t", ("float32", "float64", "int8", "float16"))
def test_block_sizes_round_trip(t):
    """Block sizes 2 and 4 (loops with the size as a constant) and the
    general loop (1, 3, 5), both modes, inverse pairs."""
    rng = np.random.default_rng(seed_of("round trip", t))
    for bs in (1, 2, 3, 4, 5):
        for n, c, h, w in ((2, 3, 2, 5), (1, 1, 7, 3), (1, 2, 4, 16)):
            x = random_array(rng, (n, c * bs * bs, h, w), t)
            for mode in ("DCR", "CRD"):
                model = make_model("DepthToSpace", [("x", t)], ["y"], 13, {"blocksize": bs, "mode": mode})
                (y,) = olc_run(model, {"x": x}, expect_kernel="olc_tensor::DepthToSpace")
                assert_same(y, d2s(x, bs, mode), f"d2s {x.shape} bs={bs} {mode}")
                back = make_model("SpaceToDepth", [("y", t)], ["z"], 28, {"blocksize": bs, "mode": mode})
                (z,) = olc_run(back, {"y": y}, expect_kernel="olc_tensor::SpaceToDepth")
                assert_same(z, x, f"round trip {x.shape} bs={bs} {mode}")


@pytest.mark.parametrize("threads", (1, 2))
def test_large(threads):
    rng = np.random.default_rng(threads)
    x = rng.standard_normal((2, 64, 96, 96)).astype(np.float32)
    for mode in ("DCR", "CRD"):
        model = make_model("DepthToSpace", [("x", "float32")], ["y"], 13, {"blocksize": 4, "mode": mode})
        (got,) = olc_run(model, {"x": x}, threads=threads, expect_kernel="olc_tensor::DepthToSpace")
        assert_same(got, d2s(x, 4, mode))
        model = make_model("SpaceToDepth", [("x", "float32")], ["y"], 28, {"blocksize": 4, "mode": mode})
        (got,) = olc_run(model, {"x": x}, threads=threads, expect_kernel="olc_tensor::SpaceToDepth")
        assert_same(got, s2d(x, 4, mode))
