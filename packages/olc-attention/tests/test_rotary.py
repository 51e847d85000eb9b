"""RotaryEmbedding of both domains. ai.onnx (23): every level against the
naive kernel, the naive against onnx.reference; com.microsoft: against
onnxruntime and the naive kernel. Split-half and interleaved, partial
rotation, rank 3 and 4, 2-D caches with position ids, 3-D caches, a start
position; float16 and bfloat16 against the naive kernel."""

from __future__ import annotations

import numpy as np
import pytest
from at_testlib import LEVELS, MS, NP_TYPE, assert_close, make_model, ort_run, reference_run, run_checked


def onnx_case(shape, rank_heads=0, rot=0, inter=0, pos=True, t="float32", cache_b=None, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-2, 2, shape)
    hd = shape[-1] if len(shape) == 4 else shape[-1] // rank_heads
    B, S = shape[0], shape[2] if len(shape) == 4 else shape[1]
    half = (rot or hd) // 2
    feeds = {"x": x.astype(NP_TYPE[t])}
    if pos:
        ang = rng.uniform(0, 6, (50, half))
        feeds["pos"] = rng.integers(0, 50, (B, S)).astype(np.int64)
    else:
        ang = rng.uniform(0, 6, (cache_b or B, S, half))
    feeds["cos"], feeds["sin"] = np.cos(ang).astype(NP_TYPE[t]), np.sin(ang).astype(NP_TYPE[t])
    attrs = {"interleaved": inter}
    if rot:
        attrs["rotary_embedding_dim"] = rot
    if rank_heads:
        attrs["num_heads"] = rank_heads
    inputs = [("x", t), ("cos", t), ("sin", t)] + ([("pos", "int64")] if pos else [])
    return make_model("RotaryEmbedding", inputs, ["y"], attrs, opset=23), feeds


ONNX_CASES = [
    {"shape": (2, 4, 3, 8)},
    {"shape": (2, 4, 3, 8), "inter": 1},
    {"shape": (2, 4, 3, 8), "rot": 4},
    {"shape": (2, 4, 3, 8), "rot": 4, "inter": 1},
    {"shape": (2, 3, 32), "rank_heads": 4},
    {"shape": (3, 7, 96), "rank_heads": 3, "rot": 16, "inter": 1},
    {"shape": (2, 4, 3, 8), "pos": False},
    {"shape": (2, 4, 3, 8), "pos": False, "inter": 1, "cache_b": 1},
    {"shape": (1, 5, 64, 128)},
    {"shape": (1, 2, 129, 80), "rot": 40},
    {"shape": (1, 0, 3, 8)},
]


@pytest.mark.parametrize("t", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("kw", ONNX_CASES, ids=[f"c{i}" for i in range(len(ONNX_CASES))])
def test_onnx_rotary(kw, t):
    model, feeds = onnx_case(t=t, **kw)
    nai = run_checked(model, "RotaryEmbedding", feeds, naive=True)[0]
    if t == "float32":
        assert_close(nai, reference_run(model, feeds)[0], t, "naive vs onnx.reference", tol=(1e-6, 1e-6))
    for level in LEVELS:
        got = run_checked(model, "RotaryEmbedding", feeds, level=level)[0]
        assert got.shape == feeds["x"].shape and got.dtype == NP_TYPE[t]
        assert_close(got, nai, t, level, tol=(1e-6, 1e-6) if t == "float32" else None)


def ms_case(shape, attrs, rot, start=False, t="float32", seed=1):
    rng = np.random.default_rng(seed)
    B, S = shape[0], shape[2] if len(shape) == 4 else shape[1]
    ang = rng.uniform(0, 6, (32, rot // 2))
    feeds = {"x": rng.uniform(-2, 2, shape).astype(NP_TYPE[t]),
             "pos": np.array([3], np.int64) if start else rng.integers(0, 32, (B, S)).astype(np.int64),
             "cos": np.cos(ang).astype(NP_TYPE[t]), "sin": np.sin(ang).astype(NP_TYPE[t])}
    model = make_model("RotaryEmbedding", [("x", t), ("pos", "int64"), ("cos", t), ("sin", t)], ["y"], attrs,
                       domain=MS)
    return model, feeds


MS_CASES = [
    ((2, 3, 64), {}, 16),
    ((2, 3, 64), {"interleaved": 1}, 16),
    ((2, 4, 3, 16), {}, 16),
    ((2, 3, 64), {"num_heads": 4, "rotary_embedding_dim": 8}, 8),
    ((1, 5, 96), {"num_heads": 3, "interleaved": 1}, 32),
    ((3, 9, 128), {}, 64),
]


@pytest.mark.parametrize("start", [False, True])
@pytest.mark.parametrize("c", MS_CASES, ids=[f"c{i}" for i in range(len(MS_CASES))])
def test_microsoft_rotary_matches_onnxruntime(c, start):
    model, feeds = ms_case(*c, start=start)
    want = ort_run(model, feeds)[0]
    for naive in (False, True):
        got = run_checked(model, "MicrosoftRotaryEmbedding", feeds, naive=naive)[0]
        assert_close(got, want, "float32", "naive" if naive else "optimized", tol=(1e-6, 1e-6))


@pytest.mark.parametrize("t", ["float16", "bfloat16"])
@pytest.mark.parametrize("c", MS_CASES[:4], ids=[f"c{i}" for i in range(4)])
def test_microsoft_rotary_16bit_every_level(c, t):
    model, feeds = ms_case(*c, t=t)
    nai = run_checked(model, "MicrosoftRotaryEmbedding", feeds, naive=True)[0]
    for level in LEVELS:
        assert_close(run_checked(model, "MicrosoftRotaryEmbedding", feeds, level=level)[0], nai, t, level)


def test_microsoft_full_width_cache_with_partial_rotation_uses_the_first_columns():
    # Caches of head_size / 2 columns with rotary_embedding_dim < head_size:
    # each cache row's first rot / 2 values, as the schema describes the
    # caches (onnxruntime 1.32 reads such a cache with the wrong row stride).
    rng = np.random.default_rng(3)
    B, S, H, hd, rot = 2, 3, 4, 16, 8
    ang = rng.uniform(0, 6, (20, hd // 2))
    feeds = {"x": rng.uniform(-1, 1, (B, S, H * hd)).astype(np.float32), "pos": np.array([[1, 2, 3], [5, 0, 7]]),
             "cos": np.cos(ang).astype(np.float32), "sin": np.sin(ang).astype(np.float32)}
    model = make_model("RotaryEmbedding", [("x", "float32"), ("pos", "int64"), ("cos", "float32"), ("sin", "float32")],
                       ["y"], {"num_heads": H, "rotary_embedding_dim": rot}, domain=MS)
    x = feeds["x"].reshape(B, S, H, hd).astype(np.float64)
    c = np.cos(ang[feeds["pos"]][:, :, None, : rot // 2])
    s = np.sin(ang[feeds["pos"]][:, :, None, : rot // 2])
    want = x.copy()
    want[..., : rot // 2] = x[..., : rot // 2] * c - x[..., rot // 2: rot] * s
    want[..., rot // 2: rot] = x[..., : rot // 2] * s + x[..., rot // 2: rot] * c
    for naive in (False, True):
        got = run_checked(model, "MicrosoftRotaryEmbedding", feeds, naive=naive)[0]
        assert_close(got, want.reshape(B, S, H * hd), "float32", "full-width cache", tol=(1e-6, 1e-6))
