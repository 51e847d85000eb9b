"""Whole models as exporters emit them, through olc_core.Session with every
family installed, against onnxruntime: every node native (strict mode), the
right answer, and the shape glue computed once per input shape."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import olc_core

ort = pytest.importorskip("onnxruntime")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
from model_builders import EncoderConfig, bert_encoder, encoder_feeds  # noqa: E402

SHAPE_OPS = {"Shape", "Gather", "Unsqueeze", "Concat", "Reshape", "Slice", "ConstantOfShape", "Squeeze"}


def _ort(model, threads):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])


@pytest.fixture(scope="module")
def encoder():
    config = EncoderConfig(layers=2)
    return config, bert_encoder(config)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("batch,sequence", [(1, 128), (3, 17), (2, 1)])
def test_bert_encoder_runs_natively_and_matches_onnxruntime(encoder, threads, batch, sequence):
    config, model = encoder
    s = olc_core.Session(model, threads=threads, strict=True, record_usage=True)
    feeds = encoder_feeds(config, batch, sequence, seed=batch * 100 + sequence)
    got = s.run(None, feeds)
    want = _ort(model, threads).run(None, feeds)
    assert [g.shape for g in got] == [(batch, sequence, config.hidden), (batch, config.hidden)]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=2e-5)
    usage = s.kernel_usage()
    assert usage and not any(k.startswith("onnx.reference") for k in usage)
    # One session serves every batch and sequence length (symbolic dims).
    feeds2 = encoder_feeds(config, batch + 1, sequence + 3, seed=7)
    for g, w in zip(s.run(None, feeds2), _ort(model, threads).run(None, feeds2)):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=2e-5)


def test_bert_encoder_shape_glue_is_cached(encoder):
    # The Shape -> Gather -> Unsqueeze -> Concat chains that compute the
    # Reshape targets (and the position ids and token types taken from the
    # input's shape) depend on the feeds' shapes only: the plan caches them,
    # and a run whose shapes were seen runs none of them (zero time).
    config, model = encoder
    s = olc_core.Session(model, threads=1, strict=True, profile=True)
    plan = s.kernel_plan()
    cached = {e.node_name for e in plan if e.shape_plan == "cached"}
    assert {e.node_name for e in plan if e.op_type in ("Shape", "Concat")} <= cached
    assert not any(e.shape_plan for e in plan if e.op_type in ("MatMul", "Softmax", "LayerNormalization"))
    feeds = encoder_feeds(config, 1, 128)
    want = _ort(model, 1).run(None, feeds)
    for _ in range(4):
        for g, w in zip(s.run(None, feeds), want):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=2e-5)
    assert s.shape_plan_stats() == {"hits": 3, "misses": 1, "signatures": 1}
    first = [r for r in s.profile_records() if r.run == 0]
    later = [r for r in s.profile_records() if r.run == 3]
    assert not any(r.cached for r in first)
    assert {r.node_name for r in later if r.cached} == cached
    assert all(r.duration_us == 0 for r in later if r.cached)
    # The shape ops still running each run move tensors (the hidden states'
    # Reshapes, the mask's Unsqueeze): none of them computes a shape.
    glue = [r.node_name for r in later if not r.cached and r.op_type in SHAPE_OPS and r.output_shapes
            and all(len(sh) <= 1 for sh in r.output_shapes)]
    assert glue == [], glue
    # A new batch and sequence: computed once, then cached too, and right.
    feeds2 = encoder_feeds(config, 2, 9, seed=3)
    want2 = _ort(model, 1).run(None, feeds2)
    for _ in range(2):
        for g, w in zip(s.run(None, feeds2), want2):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=2e-5)
    assert s.shape_plan_stats() == {"hits": 4, "misses": 2, "signatures": 2}


def test_bert_encoder_attention_is_fused(encoder):
    # olc-attention's graph pass turns each layer's head split, scores,
    # scale, mask Add, Softmax, context and merge into one kernel; the
    # results are those of the unfused graph (and onnxruntime's, above).
    config, model = encoder
    s = olc_core.Session(model, threads=1, strict=True)
    fused = "olc_attention::FusedAttention"
    assert [e.kernel for e in s.kernel_plan()].count(fused) == config.layers
    ops = [e.op_type for e in s.kernel_plan(expand_fused=True) if e.kernel == fused]
    assert sorted(set(ops)) == ["Add", "Div", "MatMul", "Reshape", "Softmax", "Transpose"]
    assert len(ops) == 13 * config.layers
    feeds = encoder_feeds(config, 3, 17, seed=9)
    plain = olc_core.Session(model, threads=1, fusion=False).run(None, feeds)
    for g, w in zip(s.run(None, feeds), plain):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=2e-5)
