"""com.microsoft GroupQueryAttention: onnxruntime's CPU kernel is the
oracle (float32; it has no 16-bit CPU kernel), the naive kernel the oracle
of every SIMD level and of float16 / bfloat16. Cases: first prompts with
padded batches, decode, chunked prefill, packed and separate QKV, rotary
(split-half, interleaved, partial, position_ids), attention_bias, local
window, softcap, scale, head_sink and smooth softmax, causal=0, head sizes
32 to 128, long caches with split-KV on two threads."""

from __future__ import annotations

import numpy as np
import pytest
from at_testlib import LEVELS, MS, NP_TYPE, assert_close, make_model, ort_run, run_checked

NAME = "GroupQueryAttention"
INPUTS = ("query", "key", "value", "past_key", "past_value", "seqlens_k", "total_sequence_length", "cos_cache",
          "sin_cache", "position_ids", "attention_bias", "head_sink")


def build(c):
    t = c.get("t", "float32")
    B, S, Hq, Hkv, D = c["B"], c["S"], c["Hq"], c["Hkv"], c["D"]
    seqlens, total, P = c["seqlens"], c["total"], c.get("P", 0)
    rng = np.random.default_rng(len(str(c)) * 7919 + B * 31 + S)
    f = {}
    q = rng.uniform(-1, 1, (B, S, Hq * D))
    k = rng.uniform(-1, 1, (B, S, Hkv * D))
    v = rng.uniform(-1, 1, (B, S, Hkv * D))
    present = {}
    if c.get("packed"):
        present["query"] = np.concatenate([q, k, v], -1)
    else:
        present.update(query=q, key=k, value=v)
    if c.get("past", True):
        present["past_key"] = rng.uniform(-1, 1, (B, Hkv, P, D))
        present["past_value"] = rng.uniform(-1, 1, (B, Hkv, P, D))
    rot = c.get("rot", 0)
    if rot:
        ang = rng.uniform(0, 6, (c.get("max_pos", total + 16), rot // 2))
        present["cos_cache"], present["sin_cache"] = np.cos(ang), np.sin(ang)
    if c.get("bias"):
        present["attention_bias"] = rng.uniform(-2, 2, (c.get("bias_b", B), c.get("bias_h", Hq), S, total))
    if c.get("sink"):
        present["head_sink"] = rng.uniform(-1, 1, (Hq,))
    for name, a in present.items():
        f[name] = a.astype(NP_TYPE[t])
    f["seqlens_k"] = np.array(seqlens, np.int32)
    f["total_sequence_length"] = np.array(total, np.int32)
    if "position_ids" in c:
        f["position_ids"] = np.array(c["position_ids"], np.int64)
    types = {"seqlens_k": "int32", "total_sequence_length": "int32", "position_ids": "int64"}
    inputs = [(n, types.get(n, t)) if n in f else ("", t) for n in INPUTS]
    while inputs[-1][0] == "":
        inputs.pop()
    attrs = {"num_heads": Hq, "kv_num_heads": Hkv, **c.get("attrs", {})}
    if rot:
        attrs["do_rotary"] = 1
        attrs["rotary_interleaved"] = c.get("inter", 0)
    model = make_model("GroupQueryAttention", inputs, ["y", "pk", "pv"], attrs, domain=MS)
    return model, f


def valid_rows(c):
    """Per batch: (output rows, cache rows) that hold defined values."""
    first = c["S"] == c["total"]
    out = []
    for tl in (s + 1 for s in c["seqlens"]):
        past = 0 if first else tl - c["S"]
        out.append((min(c["S"], tl) if first else c["S"], past + c["S"]))
    return out


def _case(**kw):
    return kw


CASES = [
    _case(B=2, S=5, Hq=4, Hkv=2, D=32, seqlens=[4, 2], total=5),                       # padded first prompt
    _case(B=2, S=5, Hq=4, Hkv=2, D=32, seqlens=[4, 2], total=5, P=8),                  # with a past buffer
    _case(B=2, S=5, Hq=4, Hkv=2, D=32, seqlens=[4, 2], total=5, past=False),
    _case(B=3, S=1, Hq=4, Hkv=1, D=64, seqlens=[7, 4, 0], total=8, P=7),               # decode, MQA
    _case(B=1, S=1, Hq=8, Hkv=2, D=64, seqlens=[511], total=512, P=511),
    _case(B=2, S=1, Hq=4, Hkv=2, D=128, seqlens=[10, 4], total=11, P=16),             # buffer longer than needed
    _case(B=1, S=7, Hq=6, Hkv=2, D=80, seqlens=[517], total=518, P=511),               # chunked prefill
    _case(B=1, S=64, Hq=4, Hkv=2, D=96, seqlens=[64], total=65, P=1),
    _case(B=1, S=129, Hq=4, Hkv=4, D=64, seqlens=[128], total=129, packed=True),
    _case(B=3, S=7, Hq=4, Hkv=2, D=32, seqlens=[6, 3, 5], total=7, packed=True, rot=32),
    _case(B=2, S=1, Hq=4, Hkv=2, D=64, seqlens=[9, 4], total=10, P=9, rot=64, inter=1),
    _case(B=2, S=1, Hq=4, Hkv=2, D=64, seqlens=[9, 4], total=10, P=9, rot=32),        # partial rotary
    _case(B=1, S=3, Hq=4, Hkv=2, D=64, seqlens=[11], total=12, P=9, rot=32, inter=1),
    _case(B=2, S=1, Hq=4, Hkv=2, D=32, seqlens=[9, 4], total=10, P=9, rot=32, position_ids=[[3], [12]]),
    _case(B=2, S=3, Hq=4, Hkv=2, D=32, seqlens=[2, 1], total=3, rot=32, position_ids=[[3, 4, 5], [9, 1, 2]]),
    _case(B=2, S=1, Hq=4, Hkv=2, D=32, seqlens=[9, 4], total=10, P=9, bias=True),
    _case(B=2, S=4, Hq=4, Hkv=2, D=32, seqlens=[3, 2], total=4, bias=True, bias_b=1, bias_h=1),
    _case(B=1, S=1, Hq=4, Hkv=2, D=32, seqlens=[20], total=21, P=20, attrs={"local_window_size": 5}),
    _case(B=1, S=9, Hq=4, Hkv=2, D=32, seqlens=[8], total=9, attrs={"local_window_size": 3}, rot=16),
    _case(B=1, S=1, Hq=4, Hkv=2, D=32, seqlens=[20], total=21, P=20, attrs={"softcap": 1.5, "scale": 0.3}),
    _case(B=2, S=1, Hq=4, Hkv=2, D=32, seqlens=[9, 4], total=10, P=9, sink=True),
    _case(B=2, S=1, Hq=4, Hkv=2, D=32, seqlens=[9, 4], total=10, P=9, attrs={"smooth_softmax": 1}),
    _case(B=1, S=3, Hq=4, Hkv=2, D=32, seqlens=[8], total=9, P=6, attrs={"causal": 0}),
    _case(B=1, S=1, Hq=14, Hkv=2, D=64, seqlens=[1000], total=1001, P=1000, rot=64),  # split-KV on two threads
    _case(B=1, S=130, Hq=8, Hkv=2, D=64, seqlens=[129], total=130, rot=64, packed=True,
          attrs={"local_window_size": 50}),
]
IDS = [f"c{i}" for i in range(len(CASES))]


@pytest.mark.parametrize("c", CASES, ids=IDS)
def test_matches_onnxruntime(c):
    model, feeds = build(c)
    want = ort_run(model, feeds)
    got = run_checked(model, NAME, feeds, threads=2)
    nai = run_checked(model, NAME, feeds, naive=True)
    for out, what in ((got, "optimized"), (nai, "naive")):
        for b, (rows, cache_rows) in enumerate(valid_rows(c)):
            assert_close(out[0][b, :rows], want[0][b, :rows], "float32", f"{what} output, batch {b}")
            for k in (1, 2):
                assert_close(out[k][b, :, :cache_rows], want[k][b, :, :cache_rows], "float32",
                             f"{what} present {k}, batch {b}", tol=(1e-6, 1e-6))


TYPED = [dict(CASES[i], t=t) for t in ("float32", "float16", "bfloat16") for i in (0, 4, 9, 10, 15, 20, 23)]


@pytest.mark.parametrize("c", TYPED, ids=[f"{c['t']}-{i}" for i, c in enumerate(TYPED)])
def test_every_level_matches_naive(c):
    model, feeds = build(c)
    t = c["t"]
    nai = run_checked(model, NAME, feeds, naive=True)
    for level in LEVELS:
        got = run_checked(model, NAME, feeds, level=level)
        for b, (rows, cache_rows) in enumerate(valid_rows(c)):
            assert_close(got[0][b, :rows], nai[0][b, :rows], t, f"{level} output, batch {b}")
            for k in (1, 2):
                # The caches: copies, or one rotation rounded once on both sides.
                assert_close(got[k][b, :, :cache_rows], nai[k][b, :, :cache_rows], t, f"{level} present {k}")


def test_cache_rows_past_the_new_tokens_keep_the_past_buffer():
    # The present cache is written once: past rows, the new token, then the
    # rest of the past buffer (shared-buffer decoding keeps it), never zeroed.
    c = _case(B=2, S=1, Hq=4, Hkv=2, D=32, seqlens=[5, 2], total=6, P=12)
    model, feeds = build(c)
    for naive in (False, True):
        _, pk, pv = run_checked(model, NAME, feeds, naive=naive)
        assert pk.shape == (2, 2, 12, 32)
        np.testing.assert_array_equal(pk[1, :, 4:], feeds["past_key"][1, :, 4:])
        np.testing.assert_array_equal(pv[0, :, 7:], feeds["past_value"][0, :, 7:])


def test_one_session_runs_from_several_threads_at_once():
    # Kernel state is immutable and the engine's scratch is per thread: runs
    # of one session from four Python threads (two workers each) agree.
    from concurrent.futures import ThreadPoolExecutor

    import olc_core

    c = _case(B=1, S=1, Hq=14, Hkv=2, D=64, seqlens=[700], total=701, P=700, rot=64)
    model, feeds = build(c)
    s = olc_core.Session(model, threads=2, strict=True)
    want = s.run(None, feeds)
    variants = []
    for k in range(8):
        f = dict(feeds)
        f["query"] = (feeds["query"] * (1 + k / 8)).astype(np.float32)
        variants.append(f)
    expected = [s.run(None, f) for f in variants]
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda f: s.run(None, f), variants * 3))
    for i, g in enumerate(got):
        for a, b in zip(g, expected[i % 8]):
            np.testing.assert_array_equal(a, b)
    for a, b in zip(s.run(None, feeds), want):
        np.testing.assert_array_equal(a, b)
