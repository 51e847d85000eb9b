"""Convolutional networks as exporters emit them (tools/model_builders.py),
through olc_core.Session with every family installed, against onnxruntime:
every node native (strict mode), the right answer at batch 1 and 2, one and
two threads, and at every SIMD level this CPU has.

- ResNet-style: Conv-BatchNormalization-Relu, residual Add, MaxPool,
  GlobalAveragePool, Flatten, Gemm.
- MobileNetV3-style: depthwise (group = channels) and pointwise Convs,
  HardSwish, squeeze-excite gates with HardSigmoid and Mul.
- U-Net: encoder MaxPools, decoder ConvTranspose and Resize, skip Concats.
- 1-D audio (M5-style): Conv1d, MaxPool / AveragePool over time.
- PP-LCNetV3-style (the PP-OCRv4 models as paddle2onnx writes them): each
  Conv followed by a scalar affine, HardSwish written out of Add, Clip,
  Mul and Div, and another affine; with fusion all of it is one FusedConv.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import olc_core
from olc_core.testing import run_on_every_level

ort = pytest.importorskip("onnxruntime")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
from model_builders import CNN_MODELS  # noqa: E402

# The kernels each model must run on (beyond the elementwise activations),
# without fusion and with it (olc-matmul's pass folds every
# BatchNormalization after a Conv into its weights and takes the activation
# that follows into the same FusedConv kernel).
EXPECTED = {
    "resnet": {"olc_matmul::Conv", "olc_normalization::BatchNormalization", "olc_tensor::MaxPool",
               "olc_tensor::GlobalAveragePool", "olc_matmul::Gemm"},
    "mobilenet": {"olc_matmul::Conv", "olc_elementwise::HardSwish", "olc_tensor::GlobalAveragePool",
                  "olc_matmul::Gemm"},
    "unet": {"olc_matmul::Conv", "olc_matmul::ConvTranspose", "olc_tensor::Resize", "olc_tensor::Concat",
             "olc_tensor::MaxPool"},
    "audio": {"olc_matmul::Conv", "olc_tensor::MaxPool", "olc_tensor::AveragePool", "olc_matmul::Gemm"},
    "lcnet": {"olc_matmul::Conv", "olc_tensor::GlobalAveragePool", "olc_matmul::Gemm"},
}
EXPECTED_FUSED = {
    "resnet": {"olc_matmul::FusedConv", "olc_tensor::MaxPool", "olc_tensor::GlobalAveragePool", "olc_matmul::Gemm"},
    "mobilenet": {"olc_matmul::FusedConv", "olc_tensor::GlobalAveragePool", "olc_matmul::Gemm"},
    "unet": {"olc_matmul::FusedConv", "olc_matmul::ConvTranspose", "olc_tensor::Resize", "olc_tensor::Concat",
             "olc_tensor::MaxPool"},
    "audio": {"olc_matmul::FusedConv", "olc_tensor::MaxPool", "olc_tensor::AveragePool", "olc_matmul::Gemm"},
    "lcnet": {"olc_matmul::FusedConv", "olc_tensor::GlobalAveragePool", "olc_matmul::Gemm"},
}


@pytest.fixture(scope="module", params=sorted(CNN_MODELS))
def cnn(request):
    builder, input_name, shape = CNN_MODELS[request.param]
    return request.param, builder(), input_name, shape


def _ort(model, threads):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])


def _close(got, want, what):
    # Sums of hundreds of products: agreement to float32 rounding, scaled to the output.
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(want).max())), err_msg=what)


@pytest.mark.parametrize("fusion", [True, False], ids=["fused", "unfused"])
@pytest.mark.parametrize("threads", [1, 2])
def test_cnn_runs_natively_and_matches_onnxruntime(cnn, threads, fusion):
    name, model, input_name, shape = cnn
    sess = olc_core.Session(model, threads=threads, strict=True, record_usage=True, fusion=fusion)
    ref = _ort(model, threads)
    rng = np.random.default_rng(threads)
    for batch in (1, 2):  # one session, symbolic batch
        x = rng.standard_normal((batch, *shape[1:])).astype(np.float32)
        (got,) = sess.run(None, {input_name: x})
        (want,) = ref.run(None, {input_name: x})
        assert got.shape == want.shape and got.shape[0] == batch
        _close(got, want, f"{name} batch {batch} threads {threads}")
    usage = set(sess.kernel_usage())
    assert not any(k.startswith("onnx.reference") for k in usage), usage
    expected = (EXPECTED_FUSED if fusion else EXPECTED)[name]
    assert expected <= usage, expected - usage
    # (a Constant node is evaluated once, at load)
    assert all(entry.native for entry in sess.kernel_plan() if entry.op_type != "Constant")
    if fusion:  # no BatchNormalization is left after a Conv
        assert "olc_normalization::BatchNormalization" not in usage
    if fusion and name == "lcnet":  # each affine and written-out HardSwish taken into its Conv: only SE's Mul is left
        assert {k for k in usage if k.startswith("olc_elementwise")} == {"olc_elementwise::Mul"}, usage
        assert sorted({len(e.fused_nodes) for e in sess.kernel_plan() if e.op_type == "FusedConv"}) == [2, 9]


def test_cnn_every_simd_level(cnn):
    name, model, input_name, shape = cnn
    x = np.random.default_rng(7).standard_normal(shape).astype(np.float32)
    (want,) = _ort(model, 1).run(None, {input_name: x})
    for level, (got,) in run_on_every_level(model, {input_name: x}).items():
        _close(got, want, f"{name} at {level}")


def _weights_as_constant_nodes(model):
    """The model with every initializer written as a Constant node before the
    others, as paddle2onnx exports (its OCR models hold no initializer)."""
    import onnx
    from onnx import helper

    out = onnx.ModelProto()
    out.CopyFrom(model)
    g = out.graph
    consts = [helper.make_node("Constant", [], [init.name], name=f"const_{init.name}", value=init) for init in g.initializer]
    nodes = consts + list(g.node)
    del g.initializer[:]
    del g.node[:]
    g.node.extend(nodes)
    return out


def test_weights_in_constant_nodes_are_folded_and_packed(cnn):
    """Weights held by Constant nodes are constants as initializers are: the
    BatchNormalization after each Conv is folded into it, the weights are
    packed once (prepacked-W), and the answer is onnxruntime's."""
    name, model, input_name, shape = cnn
    model = _weights_as_constant_nodes(model)
    assert not len(model.graph.initializer)
    sess = olc_core.Session(model, threads=1, strict=True, record_usage=True)
    x = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    (got,) = sess.run(None, {input_name: x})
    (want,) = _ort(model, 1).run(None, {input_name: x})
    _close(got, want, f"{name} with Constant-node weights")
    usage = set(sess.kernel_usage())
    assert EXPECTED_FUSED[name] <= usage, EXPECTED_FUSED[name] - usage
    assert "olc_normalization::BatchNormalization" not in usage
    convs = [d for d in sess.kernel_usage_details() if d.startswith("olc_matmul::FusedConv")]
    assert convs and all("prepacked-W" in d for d in convs), convs
