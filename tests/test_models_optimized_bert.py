"""The BERT-style encoder (tools/model_builders.py, all-MiniLM-L6's shapes)
after onnxruntime's transformer optimizer (``optimize_model(...,
model_type="bert")``), the form most BERT models are deployed in on CPU:
one EmbedLayerNormalization, one com.microsoft Attention per layer (merged
QKV weights, 1-D mask_index), two SkipLayerNormalization and one BiasGelu
per layer. olc runs every node natively (strict) and matches onnxruntime on
the same optimized graph."""

from __future__ import annotations

import collections
import sys
from pathlib import Path

import numpy as np
import pytest

import olc_core

pytest.importorskip("onnxruntime")
pytest.importorskip("sympy")  # the optimizer's symbolic shape inference
optimizer = pytest.importorskip("onnxruntime.transformers.optimizer")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
from model_builders import MINILM, encoder_feeds, optimized_bert_encoder  # noqa: E402

# Per op of the optimized graph, the kernel that runs it (the Attention
# nodes: split by olc-attention's pass into a MatMul on olc-matmul, then
# the attention on its product, olc.fused::PackedQkvAttention).
KERNELS = {"Attention": "olc_attention::PackedQkvAttention",
           "EmbedLayerNormalization": "olc_contrib_microsoft::EmbedLayerNormalization",
           "SkipLayerNormalization": "olc_contrib_microsoft::SkipLayerNormalization",
           "BiasGelu": "olc_contrib_microsoft::BiasGelu"}


@pytest.fixture(scope="module")
def optimized():
    return optimized_bert_encoder(MINILM)


def _ort(model, threads):
    from olc_core.compare import onnxruntime_session

    return onnxruntime_session(model, threads)


def test_the_optimizer_made_the_fused_graph(optimized):
    ops = collections.Counter(n.op_type for n in optimized.graph.node)
    layers = MINILM.layers
    assert ops["EmbedLayerNormalization"] == 1
    assert ops["Attention"] == layers and ops["BiasGelu"] == layers
    assert ops["SkipLayerNormalization"] == 2 * layers
    assert not {"Softmax", "LayerNormalization", "Erf", "Transpose"} & set(ops)
    attention = next(n for n in optimized.graph.node if n.op_type == "Attention")
    assert attention.domain == "com.microsoft" and len(attention.input) == 4  # input, weights, bias, mask_index


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("batch,sequence", [(1, 128), (3, 17), (2, 1)])
def test_optimized_bert_runs_natively_and_matches_onnxruntime(optimized, threads, batch, sequence):
    s = olc_core.Session(optimized, threads=threads, strict=True, record_usage=True)
    plan = {e.op_type: e.kernel for e in s.kernel_plan(expand_fused=True)}
    for op, kernel in KERNELS.items():
        assert plan[op] == kernel, op
    projections = [e for e in s.kernel_plan() if e.graph_pass == "attention-projection" and e.op_type == "MatMul"]
    assert len(projections) == MINILM.layers and all(e.kernel == "olc_matmul::MatMul" for e in projections)
    # Padding at the end of every row but the first (mask_index lengths).
    feeds = encoder_feeds(MINILM, batch, sequence, seed=batch + sequence)
    got = s.run(None, feeds)
    want = _ort(optimized, threads).run(None, feeds)
    assert [g.shape for g in got] == [(batch, sequence, MINILM.hidden), (batch, MINILM.hidden)]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=2e-5)
    assert set(KERNELS.values()) <= set(s.kernel_usage())


@pytest.mark.parametrize("batch,sequence", [(1, 128), (3, 17)])
def test_the_attention_split_matches_the_unsplit_kernel(optimized, batch, sequence):
    # fusion=False: com.microsoft Attention on its own kernel, projection
    # included (and ConstantOfShape on the reference fallback: not strict).
    feeds = encoder_feeds(MINILM, batch, sequence, seed=11)
    split = olc_core.Session(optimized, threads=2, strict=True).run(None, feeds)
    whole = olc_core.Session(optimized, threads=2, fusion=False, record_usage=True)
    assert "olc_attention::MicrosoftAttention" in [e.kernel for e in whole.kernel_plan()]
    for g, w in zip(split, whole.run(None, feeds)):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=2e-5)


def test_optimized_bert_naive_kernels_agree(optimized):
    feeds = encoder_feeds(MINILM, 2, 33, seed=5)
    naive = olc_core.Session(optimized, strict=True, naive=True).run(None, feeds)
    for g, w in zip(naive, _ort(optimized, 1).run(None, feeds)):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=2e-5)


def test_optimized_bert_is_the_raw_exports_function(optimized):
    # The optimizer's rewrite and olc's own passes on the raw export compute
    # the same function: two independent routes to the fused kernels.
    from model_builders import bert_encoder

    feeds = encoder_feeds(MINILM, 2, 40, seed=8)
    raw = olc_core.Session(bert_encoder(MINILM), strict=True).run(None, feeds)
    fused = olc_core.Session(optimized, strict=True).run(None, feeds)
    for r, f in zip(raw, fused):
        np.testing.assert_allclose(f, r, rtol=1e-4, atol=5e-5)
