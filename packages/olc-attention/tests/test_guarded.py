"""No read or write past (or before) a tensor: every input placed against
an inaccessible page (olc_core.testing.guarded), at both ends, for head
sizes and key counts that are not whole vectors or tiles, at every SIMD
level; the results still match the naive kernel."""

from __future__ import annotations

import pytest
from at_testlib import LEVELS, assert_close, run_checked
from test_attention import build as attention_build
from test_gqa import build as gqa_build

from olc_core.testing import guarded

ATTENTION = [
    {"B": 1, "Hq": 3, "Hkv": 1, "Sq": 5, "L": 67, "D": 13, "Dv": 7, "attrs": {"is_causal": 1}},
    {"B": 2, "Hq": 2, "Hkv": 2, "Sq": 1, "L": 1, "P": 65, "D": 19, "mask": ("float16", (1, 66)), "t": "float16"},
    {"B": 1, "Hq": 4, "Hkv": 2, "Sq": 3, "L": 70, "D": 9, "rank": 3, "qk": 3, "mask": ("bool", (4, 3, 70))},
    {"B": 1, "Hq": 2, "Hkv": 1, "Sq": 9, "L": 9, "D": 33, "Dv": 17, "t": "bfloat16", "attrs": {"softcap": 1.0}},
]
GQA = [
    {"B": 1, "S": 1, "Hq": 4, "Hkv": 2, "D": 24, "seqlens": [70], "total": 71, "P": 70, "rot": 10},
    {"B": 2, "S": 3, "Hq": 2, "Hkv": 1, "D": 40, "seqlens": [2, 1], "total": 3, "packed": True, "rot": 40, "inter": 1, "t": "float16"},
]


@pytest.mark.parametrize("at", ["end", "start"])
@pytest.mark.parametrize("c", ATTENTION, ids=[f"a{i}" for i in range(len(ATTENTION))])
def test_attention_inputs_against_a_guard_page(c, at):
    model, feeds = attention_build(c)
    want = run_checked(model, "Attention", feeds, naive=True)
    g = {n: guarded(a, at=at) for n, a in feeds.items()}
    for level in LEVELS:
        got = run_checked(model, "Attention", g, level=level)
        for k, (y, w) in enumerate(zip(got, want)):
            assert_close(y, w, c.get("t", "float32"), f"{level} output {k}")


@pytest.mark.parametrize("at", ["end", "start"])
@pytest.mark.parametrize("c", GQA, ids=[f"g{i}" for i in range(len(GQA))])
def test_gqa_inputs_against_a_guard_page(c, at):
    model, feeds = gqa_build(c)
    want = run_checked(model, "GroupQueryAttention", feeds, naive=True)
    g = {n: guarded(a, at=at) for n, a in feeds.items()}
    for level in LEVELS:
        got = run_checked(model, "GroupQueryAttention", g, level=level)
        assert_close(got[0][0, :1], want[0][0, :1], c.get("t", "float32"), f"{level} output")
        assert_close(got[1], want[1], c.get("t", "float32"), f"{level} present key")
