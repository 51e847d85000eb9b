"""Whole models as exporters emit them, through olc_core.Session with every
family installed, against onnxruntime: every node native (strict mode), the
right answer, and the shape glue cheap."""

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


def test_bert_encoder_shape_glue_is_a_small_share_of_the_run(encoder):
    config, model = encoder
    s = olc_core.Session(model, threads=1, profile=True)
    feeds = encoder_feeds(config, 1, 128)
    for _ in range(12):
        s.run(None, feeds)
    records = [r for r in s.profile_records() if r.run >= 2]  # past the warm-up runs
    total = sum(r.duration_us for r in records)
    glue = sum(r.duration_us for r in records if r.op_type in SHAPE_OPS and r.output_shapes
               and all(len(sh) <= 1 for sh in r.output_shapes))
    assert {r.op_type for r in records} >= {"Shape", "Concat", "Reshape", "Unsqueeze"}
    # Shape-only nodes (1-D outputs: shapes and dims) cost little next to the math.
    assert glue < 0.05 * total, (glue, total)
