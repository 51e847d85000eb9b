"""Realistic test models, built with onnx.helper (no downloads).

The graphs follow what exporters emit, glue included: a BERT-style encoder
as torch.onnx exports a Hugging Face BertModel (opset 17, symbolic batch and
sequence, the shape chains Shape -> Gather -> Unsqueeze -> Concat -> Reshape
around every attention head split, the position ids sliced from a buffer,
the mask turned into an additive bias, Gelu written with Erf, Constant
nodes for the scalars). Four convolutional networks at the channel counts
of real ones and small images, as torch.onnx exports them in eval mode
(Conv -> BatchNormalization -> activation, symbolic batch): a ResNet-style
stack, a MobileNetV3-style depthwise-separable stack with HardSwish and
squeeze-excite gates, a U-Net with a ConvTranspose / Resize decoder, and a
1-D audio classifier. A Llama / Qwen2-style decoder LLM in the form
onnxruntime-genai's model builder emits for CPU (GroupQueryAttention with
packed QKV, rotary and a BNSH KV cache, SkipSimplifiedLayerNormalization,
MatMulNBits or float32 MatMul). Used by tests/test_models.py,
tests/test_models_cnn.py, tests/test_models_decoder.py and by
tools/benchmark_parity.py's ``models`` suite.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


@dataclass(frozen=True)
class EncoderConfig:
    vocab: int = 1000
    max_positions: int = 512
    hidden: int = 128
    heads: int = 4
    layers: int = 2
    intermediate: int = 512
    opset: int = 17


class _Graph:
    """Accumulates nodes and initializers with unique names."""

    def __init__(self, rng: np.random.Generator):
        self.rng = rng
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.count = 0

    def name(self, base: str) -> str:
        self.count += 1
        return f"{base}_{self.count}"

    def node(self, op: str, inputs: list[str], n_out: int = 1, **attrs: Any) -> list[str]:
        outs = [self.name(f"{op.lower()}_out") for _ in range(n_out)]
        self.nodes.append(helper.make_node(op, inputs, outs, name=self.name(op), **attrs))
        return outs

    def one(self, op: str, inputs: list[str], **attrs: Any) -> str:
        return self.node(op, inputs, **attrs)[0]

    def weight(self, base: str, shape: tuple[int, ...], scale: float = 0.05) -> str:
        name = self.name(base)
        value = (scale * self.rng.standard_normal(shape)).astype(np.float32)
        self.inits.append(numpy_helper.from_array(value, name))
        return name

    def const(self, value: np.ndarray) -> str:
        """A Constant node, as torch.onnx writes scalars and small shapes."""
        out = self.name("const")
        self.nodes.append(helper.make_node("Constant", [], [out], name=self.name("Constant"),
                                           value=numpy_helper.from_array(np.asarray(value))))
        return out

    def dim(self, x: str, axis: int) -> str:
        """Shape(x)[axis] as a 1-D tensor: Shape -> Gather -> Unsqueeze."""
        d = self.one("Gather", [self.one("Shape", [x]), self.const(np.array(axis, np.int64))], axis=0)
        return self.one("Unsqueeze", [d, self.const(np.array([0], np.int64))])

    def linear(self, x: str, n_in: int, n_out: int) -> str:
        y = self.one("MatMul", [x, self.weight("w", (n_in, n_out))])
        return self.one("Add", [self.weight("b", (n_out,), 0.02), y])

    def layer_norm(self, x: str, width: int) -> str:
        gamma = self.name("ln_gamma")
        beta = self.name("ln_beta")
        self.inits.append(numpy_helper.from_array(
            (1 + 0.1 * self.rng.standard_normal(width)).astype(np.float32), gamma))
        self.inits.append(numpy_helper.from_array((0.1 * self.rng.standard_normal(width)).astype(np.float32), beta))
        return self.one("LayerNormalization", [x, gamma, beta], axis=-1, epsilon=1e-12)

    def gelu_erf(self, x: str) -> str:
        """x * 0.5 * (1 + erf(x / sqrt(2))), as exported from torch's exact gelu."""
        e = self.one("Erf", [self.one("Div", [x, self.const(np.array(1.4142135, np.float32))])])
        h = self.one("Add", [e, self.const(np.array(1.0, np.float32))])
        return self.one("Mul", [self.one("Mul", [x, h]), self.const(np.array(0.5, np.float32))])


def bert_encoder(config: EncoderConfig = EncoderConfig(), seed: int = 0) -> onnx.ModelProto:
    """Inputs ``input_ids`` and ``attention_mask`` (int64 [batch, sequence]);
    outputs ``last_hidden_state`` [batch, sequence, hidden] and
    ``pooler_output`` [batch, hidden] (Tanh over the first token)."""
    c = config
    g = _Graph(np.random.default_rng(seed))
    head_dim = c.hidden // c.heads

    # Embeddings: words + positions (sliced from a buffer) + token type 0.
    words = g.one("Gather", [g.weight("word_embeddings", (c.vocab, c.hidden), 0.5), "input_ids"])
    seq = g.dim("input_ids", 1)
    positions_buffer = g.name("position_ids")
    g.inits.append(numpy_helper.from_array(np.arange(c.max_positions, dtype=np.int64)[None, :], positions_buffer))
    position_ids = g.one("Slice", [positions_buffer, g.const(np.array([0], np.int64)), seq,
                                   g.const(np.array([1], np.int64))])
    positions = g.one("Gather", [g.weight("position_embeddings", (c.max_positions, c.hidden), 0.5), position_ids])
    token_types = g.one("Gather", [g.weight("token_type_embeddings", (2, c.hidden), 0.5),
                                   g.one("ConstantOfShape", [g.one("Shape", ["input_ids"])],
                                         value=numpy_helper.from_array(np.array([0], np.int64)))])
    x = g.layer_norm(g.one("Add", [g.one("Add", [words, token_types]), positions]), c.hidden)

    # Attention mask -> additive bias [batch, 1, 1, sequence].
    mask = g.one("Unsqueeze", [g.one("Unsqueeze", ["attention_mask", g.const(np.array([1], np.int64))]),
                               g.const(np.array([2], np.int64))])
    mask = g.one("Cast", [mask], to=TensorProto.FLOAT)
    inverted = g.one("Sub", [g.const(np.array(1.0, np.float32)), mask])
    bias = g.one("Mul", [inverted, g.const(np.array(np.finfo(np.float32).min, np.float32))])

    for _ in range(c.layers):
        batch, seq_len = g.dim(x, 0), g.dim(x, 1)
        split_shape = g.one("Concat", [batch, seq_len, g.const(np.array([c.heads], np.int64)),
                                       g.const(np.array([head_dim], np.int64))], axis=0)

        def heads(t: str, perm: list[int], shape: str = split_shape) -> str:
            return g.one("Transpose", [g.one("Reshape", [t, shape])], perm=perm)

        q = heads(g.linear(x, c.hidden, c.hidden), [0, 2, 1, 3])
        k = heads(g.linear(x, c.hidden, c.hidden), [0, 2, 3, 1])
        v = heads(g.linear(x, c.hidden, c.hidden), [0, 2, 1, 3])
        scores = g.one("Div", [g.one("MatMul", [q, k]), g.const(np.array(np.sqrt(head_dim), np.float32))])
        probs = g.one("Softmax", [g.one("Add", [scores, bias])], axis=-1)
        context = g.one("Transpose", [g.one("MatMul", [probs, v])], perm=[0, 2, 1, 3])
        merge_shape = g.one("Concat", [batch, seq_len, g.const(np.array([c.hidden], np.int64))], axis=0)
        context = g.one("Reshape", [context, merge_shape])
        x = g.layer_norm(g.one("Add", [g.linear(context, c.hidden, c.hidden), x]), c.hidden)
        ffn = g.linear(g.gelu_erf(g.linear(x, c.hidden, c.intermediate)), c.intermediate, c.hidden)
        x = g.layer_norm(g.one("Add", [ffn, x]), c.hidden)

    g.nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"], name="output_identity"))
    first = g.one("Gather", [x, g.const(np.array(0, np.int64))], axis=1)
    g.nodes.append(helper.make_node("Tanh", [g.linear(first, c.hidden, c.hidden)], ["pooler_output"], name="pooler"))

    ids = helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "sequence"])
    am = helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "sequence"])
    outputs = [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "sequence", c.hidden]),
               helper.make_tensor_value_info("pooler_output", TensorProto.FLOAT, ["batch", c.hidden])]
    graph = helper.make_graph(g.nodes, "bert_encoder", [ids, am], outputs, initializer=g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", c.opset)], producer_name="olc-tests")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


MINILM = EncoderConfig(hidden=384, heads=12, layers=6, intermediate=1536)


def optimized_bert_encoder(config: EncoderConfig = MINILM, seed: int = 0) -> onnx.ModelProto:
    """bert_encoder after onnxruntime's transformer optimizer
    (``optimize_model(..., model_type="bert")``, its Python fusions only):
    EmbedLayerNormalization, com.microsoft Attention, SkipLayerNormalization
    and BiasGelu. Needs onnxruntime and sympy."""
    import logging
    import os
    import tempfile

    from onnxruntime.transformers.optimizer import optimize_model

    logging.getLogger("onnxruntime.transformers").setLevel(logging.ERROR)  # "producer not matched: pytorch"
    with tempfile.TemporaryDirectory() as tmp:
        raw, fused = os.path.join(tmp, "raw.onnx"), os.path.join(tmp, "optimized.onnx")
        onnx.save(bert_encoder(config, seed), raw)
        optimize_model(raw, model_type="bert", num_heads=config.heads, hidden_size=config.hidden,
                       opt_level=0).save_model_to_file(fused)
        return onnx.load(fused)


def encoder_feeds(config: EncoderConfig, batch: int, sequence: int, seed: int = 0) -> dict[str, np.ndarray]:
    """Token ids below the vocabulary and a mask with padding at the end of every row but the first."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, config.vocab, size=(batch, sequence), dtype=np.int64)
    mask = np.ones((batch, sequence), np.int64)
    for b in range(1, batch):
        mask[b, sequence - b * max(1, sequence // 8):] = 0
    return {"input_ids": ids, "attention_mask": mask}


# ------------------------------------------------------------------ CNNs

CNN_OPSET = 17


class _ConvGraph(_Graph):
    """Conv blocks as torch.onnx writes them in eval mode."""

    def conv(self, x: str, c_in: int, c_out: int, k: int | tuple[int, ...], stride: int = 1, pad: int | None = None,
             group: int = 1, bias: bool = False, rank: int = 2) -> str:
        ks = (k,) * rank if isinstance(k, int) else tuple(k)
        pads = [ki // 2 for ki in ks] * 2 if pad is None else [pad] * (2 * rank)
        fan_in = (c_in // group) * int(np.prod(ks))
        w = self.weight("conv_w", (c_out, c_in // group, *ks), float(np.sqrt(2.0 / fan_in)))
        inputs = [x, w] + ([self.weight("conv_b", (c_out,), 0.02)] if bias else [])
        return self.one("Conv", inputs, kernel_shape=list(ks), strides=[stride] * rank, pads=pads,
                        dilations=[1] * rank, group=group)

    def bn(self, x: str, c: int) -> str:
        scale = self.name("bn_scale")
        bias = self.name("bn_bias")
        mean = self.name("bn_mean")
        var = self.name("bn_var")
        for name, value in ((scale, 1 + 0.1 * self.rng.standard_normal(c)), (bias, 0.1 * self.rng.standard_normal(c)),
                            (mean, 0.1 * self.rng.standard_normal(c)), (var, self.rng.uniform(0.5, 1.5, c))):
            self.inits.append(numpy_helper.from_array(value.astype(np.float32), name))
        return self.one("BatchNormalization", [x, scale, bias, mean, var], epsilon=1e-5, momentum=0.9)

    def conv_bn(self, x: str, c_in: int, c_out: int, k: int, stride: int = 1, group: int = 1, act: str | None = "Relu",
                rank: int = 2) -> str:
        y = self.bn(self.conv(x, c_in, c_out, k, stride, group=group, rank=rank), c_out)
        return self.one(act, [y]) if act else y

    def gemm_head(self, x: str, c: int, classes: int) -> str:
        flat = self.one("Flatten", [self.one("GlobalAveragePool", [x])], axis=1)
        return self.one("Gemm", [flat, self.weight("fc_w", (classes, c), float(np.sqrt(1.0 / c))),
                                 self.weight("fc_b", (classes,), 0.02)], transB=1)

    def model(self, inputs: list[onnx.ValueInfoProto], value: str, output: str, shape: list[str | int],
              name: str) -> onnx.ModelProto:
        """The graph with `value` (a node's output) as its one output, renamed `output`."""
        for n in self.nodes:
            for i, o in enumerate(n.output):
                if o == value:
                    n.output[i] = output
        graph = helper.make_graph(self.nodes, name, inputs,
                                  [helper.make_tensor_value_info(output, TensorProto.FLOAT, shape)],
                                  initializer=self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", CNN_OPSET)],
                                  producer_name="olc model_builders")
        model.ir_version = 8
        return model


def _image_input(name: str, channels: int, *spatial: int) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, ["batch", channels, *spatial])


def resnet_stack(seed: int = 0, size: int = 64, classes: int = 100) -> onnx.ModelProto:
    """ResNet-18's first stages on a size x size image: the 7x7 stride-2 stem,
    3x3 stride-2 MaxPool, two basic blocks at 64 channels, a strided block to
    128 with a 1x1 projection shortcut and one more at 128, then
    GlobalAveragePool, Flatten and Gemm. Input ``image`` [batch, 3, size,
    size], output ``logits`` [batch, classes]."""
    g = _ConvGraph(np.random.default_rng(seed))
    x = g.conv_bn("image", 3, 64, 7, stride=2)
    x = g.one("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])

    def block(x: str, c_in: int, c_out: int, stride: int) -> str:
        y = g.conv_bn(x, c_in, c_out, 3, stride)
        y = g.conv_bn(y, c_out, c_out, 3, act=None)
        short = x if stride == 1 and c_in == c_out else g.conv_bn(x, c_in, c_out, 1, stride, act=None)
        return g.one("Relu", [g.one("Add", [y, short])])

    x = block(block(x, 64, 64, 1), 64, 64, 1)
    x = block(block(x, 64, 128, 2), 128, 128, 1)
    x = g.gemm_head(x, 128, classes)
    return g.model([_image_input("image", 3, size, size)], x, "logits", ["batch", classes], "resnet_stack")


def mobilenet_stack(seed: int = 0, size: int = 64, classes: int = 100) -> onnx.ModelProto:
    """MobileNetV3-style: a 3x3 stride-2 stem with HardSwish, inverted
    residual blocks (1x1 expand, depthwise 3x3 with group = channels, 1x1
    project; HardSwish or Relu; a residual Add where shapes allow) with
    squeeze-excite gates (GlobalAveragePool -> 1x1 Conv -> Relu -> 1x1 Conv
    -> HardSigmoid -> Mul), a 1x1 Conv to 576 channels, GlobalAveragePool,
    Flatten and Gemm. Input ``image`` [batch, 3, size, size], output
    ``logits`` [batch, classes]."""
    g = _ConvGraph(np.random.default_rng(seed))
    x = g.conv_bn("image", 3, 16, 3, stride=2, act="HardSwish")

    def se(x: str, c: int) -> str:
        s = g.one("GlobalAveragePool", [x])
        s = g.one("Relu", [g.conv(s, c, max(8, c // 4), 1, bias=True)])
        s = g.one("HardSigmoid", [g.conv(s, max(8, c // 4), c, 1, bias=True)], alpha=1.0 / 6, beta=0.5)
        return g.one("Mul", [x, s])

    def inverted(x: str, c_in: int, expand: int, c_out: int, k: int, stride: int, act: str, use_se: bool) -> str:
        y = g.conv_bn(x, c_in, expand, 1, act=act) if expand != c_in else x
        y = g.conv_bn(y, expand, expand, k, stride, group=expand, act=act)
        if use_se:
            y = se(y, expand)
        y = g.conv_bn(y, expand, c_out, 1, act=None)
        return g.one("Add", [x, y]) if stride == 1 and c_in == c_out else y

    for c_in, expand, c_out, k, stride, act, use_se in (
            (16, 16, 16, 3, 2, "Relu", True), (16, 72, 24, 3, 2, "Relu", False), (24, 88, 24, 3, 1, "Relu", False),
            (24, 96, 40, 5, 2, "HardSwish", True), (40, 240, 40, 5, 1, "HardSwish", True),
            (40, 120, 48, 5, 1, "HardSwish", True), (48, 144, 48, 5, 1, "HardSwish", True)):
        x = inverted(x, c_in, expand, c_out, k, stride, act, use_se)
    x = g.conv_bn(x, 48, 576, 1, act="HardSwish")
    x = g.gemm_head(x, 576, classes)
    return g.model([_image_input("image", 3, size, size)], x, "logits", ["batch", classes], "mobilenet_stack")


def lcnet_stack(seed: int = 0, height: int = 48, width: int = 160, classes: int = 100) -> onnx.ModelProto:
    """PP-LCNetV3-style, as paddle2onnx writes the PP-OCRv4 models: every
    Conv (its branches re-parameterized into one, with a bias) is followed
    by a learnable scalar affine ``Mul(s) Add(b)``, HardSwish written out as
    ``x * Clip(x + 3, 0, 6) / 6``, and another learnable affine; depthwise
    3x3 and 5x5 and pointwise layers, squeeze-excite gates (Relu,
    HardSigmoid) in the last blocks; GlobalAveragePool, Flatten, Gemm. Its
    scalars are one-element constants. Input ``image`` [batch, 3, height,
    width] (both multiples of 16), output ``logits`` [batch, classes]."""
    g = _ConvGraph(np.random.default_rng(seed))

    def scalar(v: float) -> str:
        name = g.name("scalar")
        g.inits.append(numpy_helper.from_array(np.array([v], np.float32), name))
        return name

    def affine(x: str) -> str:
        y = g.one("Mul", [scalar(float(1 + 0.1 * g.rng.standard_normal())), x])
        return g.one("Add", [y, scalar(float(0.05 * g.rng.standard_normal()))])

    def hardswish(x: str) -> str:
        c = g.one("Clip", [g.one("Add", [x, scalar(3.0)]), g.const(np.array(0.0, np.float32)),
                           g.const(np.array(6.0, np.float32))])
        return g.one("Div", [g.one("Mul", [x, c]), scalar(6.0)])

    def layer(x: str, c_in: int, c_out: int, k: int, stride: int = 1, group: int = 1) -> str:
        return affine(hardswish(affine(g.conv(x, c_in, c_out, k, stride, group=group, bias=True))))

    def se(x: str, c: int) -> str:
        s = g.one("GlobalAveragePool", [x])
        s = g.one("Relu", [g.conv(s, c, c // 4, 1, bias=True)])
        s = g.one("HardSigmoid", [g.conv(s, c // 4, c, 1, bias=True)], alpha=0.2, beta=0.5)
        return g.one("Mul", [x, s])

    x = layer("image", 3, 16, 3, stride=2)
    for c_in, c_out, k, stride, use_se in ((16, 32, 3, 1, False), (32, 64, 3, 2, False), (64, 64, 3, 1, False),
                                           (64, 128, 3, 2, False), (128, 128, 5, 1, True), (128, 256, 5, 2, True)):
        x = layer(x, c_in, c_in, k, stride, group=c_in)
        if use_se:
            x = se(x, c_in)
        x = layer(x, c_in, c_out, 1)
    x = g.gemm_head(x, 256, classes)
    return g.model([_image_input("image", 3, height, width)], x, "logits", ["batch", classes], "lcnet_stack")


def unet(seed: int = 0, size: int = 64, classes: int = 4) -> onnx.ModelProto:
    """A U-Net at 32-64-128-256 channels: an encoder of double 3x3 Conv-BN-Relu
    stages and 2x2 MaxPools, a decoder that upsamples with ConvTranspose 2x2
    stride 2 (twice) and with Resize (bilinear, half_pixel, twice the size,
    then a 3x3 Conv), concatenating the encoder's skip features, and a 1x1
    Conv to per-pixel class scores. Input ``image`` [batch, 3, size, size]
    (size a multiple of 8), output ``mask`` [batch, classes, size, size]."""
    g = _ConvGraph(np.random.default_rng(seed))

    def double(x: str, c_in: int, c_out: int) -> str:
        return g.conv_bn(g.conv_bn(x, c_in, c_out, 3), c_out, c_out, 3)

    def pool(x: str) -> str:
        return g.one("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])

    e1 = double("image", 3, 32)
    e2 = double(pool(e1), 32, 64)
    e3 = double(pool(e2), 64, 128)
    b = double(pool(e3), 128, 256)
    up = g.one("ConvTranspose", [b, g.weight("up_w", (256, 128, 2, 2), 0.06), g.weight("up_b", (128,), 0.02)],
               kernel_shape=[2, 2], strides=[2, 2])
    d3 = double(g.one("Concat", [up, e3], axis=1), 256, 128)
    up = g.one("ConvTranspose", [d3, g.weight("up_w", (128, 64, 2, 2), 0.09), g.weight("up_b", (64,), 0.02)],
               kernel_shape=[2, 2], strides=[2, 2])
    d2 = double(g.one("Concat", [up, e2], axis=1), 128, 64)
    scales = g.name("scales")
    g.inits.append(numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), scales))
    up = g.one("Resize", [d2, "", scales], mode="linear", coordinate_transformation_mode="half_pixel")
    up = g.conv_bn(up, 64, 32, 3)
    d1 = double(g.one("Concat", [up, e1], axis=1), 64, 32)
    out = g.conv(d1, 32, classes, 1, bias=True)
    return g.model([_image_input("image", 3, size, size)], out, "mask", ["batch", classes, size, size], "unet")


def audio_stack(seed: int = 0, samples: int = 8000, classes: int = 35) -> onnx.ModelProto:
    """An M5-style keyword classifier on raw audio: a wide strided Conv1d
    (kernel 80, stride 4) and three 3-tap Conv1d stages at 64-128-256
    channels, each with BatchNormalization, Relu and a 4-wide MaxPool (the
    last an AveragePool), then GlobalAveragePool, Flatten and Gemm. Input
    ``audio`` [batch, 1, samples], output ``logits`` [batch, classes]."""
    g = _ConvGraph(np.random.default_rng(seed))
    x = g.bn(g.conv("audio", 1, 64, 80, stride=4, pad=38, rank=1), 64)
    x = g.one("MaxPool", [g.one("Relu", [x])], kernel_shape=[4], strides=[4])
    for c_in, c_out, last in ((64, 64, False), (64, 128, False), (128, 256, True)):
        x = g.conv_bn(x, c_in, c_out, 3, rank=1)
        pool = "AveragePool" if last else "MaxPool"
        x = g.one(pool, [x], kernel_shape=[4], strides=[4])
    x = g.gemm_head(x, 256, classes)
    return g.model([_image_input("audio", 1, samples)], x, "logits", ["batch", classes], "audio_stack")


# The CNNs, by name: (builder, input name, input shape at batch 1).
CNN_MODELS = {
    "resnet": (resnet_stack, "image", (1, 3, 64, 64)),
    "mobilenet": (mobilenet_stack, "image", (1, 3, 64, 64)),
    "unet": (unet, "image", (1, 3, 64, 64)),
    "audio": (audio_stack, "audio", (1, 1, 8000)),
    "lcnet": (lcnet_stack, "image", (1, 3, 48, 160)),
}
# Measured in the conv and models suites, not under the block-stack gate.
CNN_UNGATED = {"lcnet"}


# --------------------------------------------------------------- decoder LLM


@dataclass(frozen=True)
class DecoderConfig:
    """A Llama / Qwen2-style decoder. The defaults are Qwen2.5-0.5B's
    attention and MLP shapes (hidden 896, 14 query and 2 kv heads of 64,
    SwiGLU 4864, RoPE theta 1e6, q/k/v biases) with fewer layers and a
    small vocabulary."""

    vocab: int = 512
    hidden: int = 896
    heads: int = 14
    kv_heads: int = 2
    head_size: int = 64
    layers: int = 4
    intermediate: int = 4864
    max_positions: int = 2048  # rows of the cos / sin caches
    rope_theta: float = 1_000_000.0
    rms_eps: float = 1e-6
    qkv_bias: bool = True  # Qwen2 has them, Llama does not
    int4: bool = True  # MatMulNBits (4 bits, block 32, accuracy_level 4), else float32 MatMul
    block_size: int = 32
    accuracy_level: int = 4


def _quantize_int4(w: np.ndarray, block: int) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric 4-bit blockwise quantization of a [K, N] weight as
    MatMulNBits stores it without zero points (implicit 8): B [N, K / block,
    block / 2] uint8, two values a byte (low nibble first), and scales [N, K /
    block]."""
    k, n = w.shape
    blocks = w.T.reshape(n, k // block, block)
    scales = np.abs(blocks).max(axis=2) / 7.0
    scales[scales == 0] = 1.0
    q = (np.clip(np.rint(blocks / scales[..., None]), -8, 7) + 8).astype(np.uint8)
    packed = q[..., 0::2] | (q[..., 1::2] << 4)
    return packed, scales.astype(np.float32)


class _DecoderGraph:
    """Nodes, initializers and the builder's naming (``/model/layers.0/attn/...``)."""

    def __init__(self, config: DecoderConfig, rng: np.random.Generator):
        self.c = config
        self.rng = rng
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.constants: set[str] = set()

    def node(self, op: str, inputs: list[str], name: str, outputs: list[str] | None = None, domain: str = "",
             **attrs: Any) -> str:
        outs = outputs if outputs is not None else [f"{name}/output_0"]
        self.nodes.append(helper.make_node(op, inputs, outs, name=name, domain=domain, **attrs))
        return outs[0]

    def init(self, name: str, value: np.ndarray) -> str:
        self.inits.append(numpy_helper.from_array(value, name))
        return name

    def const(self, kind: str, value: Any) -> str:
        """A scalar or small constant as the builder writes it: a Constant
        node whose output is named ``/model/constants/INT64/[1]``."""
        dtype = {"INT64": np.int64, "INT32": np.int32, "FLOAT": np.float32}[kind]
        out = f"/model/constants/{kind}/{value}"
        if out not in self.constants:
            self.constants.add(out)
            self.nodes.append(helper.make_node("Constant", [], [out], name=out.replace("constants", "constant_nodes"),
                                               value=numpy_helper.from_array(np.array(value, dtype))))
        return out

    def linear(self, x: str, basename: str, weight: np.ndarray, output: str | None = None) -> str:
        """x @ weight ([K, N]) as MatMulNBits or MatMul, named as the builder names it."""
        k, n = weight.shape
        key = basename[1:].replace("/", ".")
        outputs = [output] if output else None
        if not self.c.int4:
            return self.node("MatMul", [x, self.init(f"{key}.weight", weight)], basename, outputs)
        packed, scales = _quantize_int4(weight, self.c.block_size)
        name = f"{basename}NBits"
        return self.node("MatMulNBits", [x, self.init(f"{key}.weight_Q4", packed),
                                         self.init(f"{key}.weight_scales", scales)], name, outputs,
                         domain="com.microsoft", K=k, N=n, bits=4, block_size=self.c.block_size,
                         accuracy_level=self.c.accuracy_level)

    def weight(self, k: int, n: int) -> np.ndarray:
        return (self.rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32)

    def norm_weight(self, name: str) -> str:
        return self.init(name, (1 + 0.1 * self.rng.standard_normal(self.c.hidden)).astype(np.float32))


def genai_decoder(config: DecoderConfig = DecoderConfig(), seed: int = 0) -> onnx.ModelProto:
    """A decoder in the form onnxruntime-genai's model builder emits for
    Llama / Qwen on CPU (float32 activations, GroupQueryAttention):

    - inputs ``input_ids`` and ``attention_mask`` (int64 [batch, sequence] and
      [batch, total_sequence]), ``past_key_values.{i}.key`` / ``.value``
      (float32 [batch, kv_heads, past, head_size], BNSH); outputs ``logits``
      [batch, sequence, vocab] and ``present.{i}.key`` / ``.value``;
    - ``seqlens_k`` = ReduceSum(attention_mask, axis 1) - 1 as int32 and
      ``total_sequence_length`` = Shape(attention_mask)[1] as int32, computed
      once in the graph;
    - the token embedding Gather; layer 0's input norm a
      SimplifiedLayerNormalization, every later norm a com.microsoft
      SkipSimplifiedLayerNormalization adding the residual (its output 3 the
      residual stream), the final one with output 0 only;
    - per layer the packed QKV projection (+ packed bias Add for Qwen),
      GroupQueryAttention with QKV packed in ``query`` (key / value empty),
      ``do_rotary`` with ``cos_cache`` / ``sin_cache`` [max_positions,
      head_size / 2], the o_proj, and the SwiGLU MLP (gate and up
      projections, gate * Sigmoid(gate) * up, down projection);
    - every projection and the lm_head a MatMulNBits (4 bits, block 32,
      accuracy_level 4, symmetric: no zero points) or, with ``int4=False``, a
      float32 MatMul.

    Weights are random, scaled so activations keep unit scale."""
    c = config
    g = _DecoderGraph(c, np.random.default_rng(seed))
    q_size, kv_size = c.heads * c.head_size, c.kv_heads * c.head_size

    # The attention mask's reformatting, shared by every layer.
    base = "/model/attn_mask_reformat/attn_mask_subgraph"
    total = g.node("ReduceSum", ["attention_mask", g.const("INT64", [1])], f"{base}/ReduceSum", keepdims=0)
    seqlens = g.node("Sub", [total, g.const("INT64", [1])], f"{base}/Sub")
    seqlens_k = g.node("Cast", [seqlens], f"{base}/Sub/Cast", to=TensorProto.INT32)
    mask_shape = g.node("Shape", ["attention_mask"], f"{base}/Shape")
    total_len = g.node("Gather", [mask_shape, g.const("INT64", 1)], f"{base}/Gather", axis=0)
    total_seq_len = g.node("Cast", [total_len], f"{base}/Gather/Cast", to=TensorProto.INT32)

    # RoPE caches: cos / sin of position x inverse frequency, [max_positions, head_size / 2].
    inv_freq = 1.0 / (c.rope_theta ** (np.arange(0, c.head_size, 2, dtype=np.float64) / c.head_size))
    angles = np.arange(c.max_positions, dtype=np.float64)[:, None] * inv_freq[None, :]
    cos_cache = g.init("cos_cache", np.cos(angles).astype(np.float32))
    sin_cache = g.init("sin_cache", np.sin(angles).astype(np.float32))

    embeddings = g.init("model.embed_tokens.weight", g.rng.standard_normal((c.vocab, c.hidden)).astype(np.float32))
    x = g.node("Gather", [embeddings, "input_ids"], "/model/embed_tokens/Gather")
    residual = x
    skip = ""
    for i in range(c.layers):
        lp = f"/model/layers.{i}"
        weight = g.norm_weight(f"model.layers.{i}.input_layernorm.weight")
        if i == 0:
            h = g.node("SimplifiedLayerNormalization", [x, weight], f"{lp}/input_layernorm/LayerNorm",
                       axis=-1, epsilon=c.rms_eps, stash_type=1)
        else:
            h = g.node("SkipSimplifiedLayerNormalization", [residual, skip, weight],
                       f"{lp}/input_layernorm/SkipLayerNorm",
                       [f"{lp}/input_layernorm/output_0", "", "", f"{lp}/input_layernorm/output_3"],
                       domain="com.microsoft", epsilon=c.rms_eps)
            residual = f"{lp}/input_layernorm/output_3"

        qkv = g.linear(h, f"{lp}/attn/qkv_proj/MatMul", g.weight(c.hidden, q_size + 2 * kv_size))
        if c.qkv_bias:
            bias = g.init(f"model.layers.{i}.attn.qkv_proj.Add.bias",
                          (0.1 * g.rng.standard_normal(q_size + 2 * kv_size)).astype(np.float32))
            qkv = g.node("Add", [qkv, bias], f"{lp}/attn/qkv_proj/Add")
        attn = g.node("GroupQueryAttention",
                      [qkv, "", "", f"past_key_values.{i}.key", f"past_key_values.{i}.value", seqlens_k,
                       total_seq_len, cos_cache, sin_cache],
                      f"{lp}/attn/GroupQueryAttention",
                      [f"{lp}/attn/GroupQueryAttention/output_0", f"present.{i}.key", f"present.{i}.value"],
                      domain="com.microsoft", num_heads=c.heads, kv_num_heads=c.kv_heads,
                      scale=float(1 / np.sqrt(c.head_size)), local_window_size=-1, softcap=0.0, do_rotary=1,
                      rotary_interleaved=0)
        o = g.linear(attn, f"{lp}/attn/o_proj/MatMul", g.weight(q_size, c.hidden))

        weight = g.norm_weight(f"model.layers.{i}.post_attention_layernorm.weight")
        h = g.node("SkipSimplifiedLayerNormalization", [residual, o, weight],
                   f"{lp}/post_attention_layernorm/SkipLayerNorm",
                   [f"{lp}/post_attention_layernorm/output_0", "", "", f"{lp}/post_attention_layernorm/output_3"],
                   domain="com.microsoft", epsilon=c.rms_eps)
        residual = f"{lp}/post_attention_layernorm/output_3"

        gate = g.linear(h, f"{lp}/mlp/gate_proj/MatMul", g.weight(c.hidden, c.intermediate))
        up = g.linear(h, f"{lp}/mlp/up_proj/MatMul", g.weight(c.hidden, c.intermediate))
        act = g.node("Mul", [gate, g.node("Sigmoid", [gate], f"{lp}/mlp/act_fn/Sigmoid")], f"{lp}/mlp/act_fn/Mul")
        skip = g.linear(g.node("Mul", [act, up], f"{lp}/mlp/Mul"), f"{lp}/mlp/down_proj/MatMul",
                        g.weight(c.intermediate, c.hidden))

    weight = g.norm_weight(f"model.layers.{c.layers}.final_norm_layernorm.weight")
    h = g.node("SkipSimplifiedLayerNormalization", [residual, skip, weight],
               f"/model/layers.{c.layers}/final_norm_layernorm/SkipLayerNorm", domain="com.microsoft",
               epsilon=c.rms_eps)
    # Logits of a few units: greedy choices are clear of the two runtimes' rounding.
    g.linear(h, "/lm_head/MatMul", 4 * g.weight(c.hidden, c.vocab), output="logits")

    kv_shape: list[str | int] = ["batch_size", c.kv_heads, "past_sequence_length", c.head_size]
    present_shape: list[str | int] = ["batch_size", c.kv_heads, "total_sequence_length", c.head_size]
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch_size", "sequence_length"]),
              helper.make_tensor_value_info("attention_mask", TensorProto.INT64,
                                            ["batch_size", "total_sequence_length"])]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch_size", "sequence_length", c.vocab])]
    for i in range(c.layers):
        for kind in ("key", "value"):
            inputs.append(helper.make_tensor_value_info(f"past_key_values.{i}.{kind}", TensorProto.FLOAT, kv_shape))
            outputs.append(helper.make_tensor_value_info(f"present.{i}.{kind}", TensorProto.FLOAT, present_shape))
    graph = helper.make_graph(g.nodes, "main_graph", inputs, outputs, initializer=g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)],
                              producer_name="olc model_builders")
    model.ir_version = 10
    return model


def decoder_feeds(config: DecoderConfig, tokens: np.ndarray, past: list[np.ndarray] | None = None,
                  past_length: int = 0, seed: int = 0) -> dict[str, np.ndarray]:
    """Feeds for one step: ``tokens`` [batch, sequence] after ``past`` (the
    previous step's presents, key and value per layer in output order) or,
    without it, after random caches of ``past_length`` positions (0: a first
    prompt); the attention mask all ones over past + sequence."""
    c = config
    tokens = np.asarray(tokens, np.int64)
    batch = tokens.shape[0]
    if past is None:
        rng = np.random.default_rng(seed)
        past = [rng.standard_normal((batch, c.kv_heads, past_length, c.head_size)).astype(np.float32)
                for _ in range(2 * c.layers)]
    feeds = {"input_ids": tokens,
             "attention_mask": np.ones((batch, past[0].shape[2] + tokens.shape[1]), np.int64)}
    for i in range(c.layers):
        feeds[f"past_key_values.{i}.key"] = past[2 * i]
        feeds[f"past_key_values.{i}.value"] = past[2 * i + 1]
    return feeds


# ------------------------------------------------------------ benchmark cases


def benchmark_cases(sizes: object = None) -> list[dict[str, object]]:
    """The ``models`` suite of tools/benchmark_parity.py: the encoder at
    batch 1, sequence 128 (and at all-MiniLM-L6's shapes, group
    ``encoder_minilm``, and that after onnxruntime's transformer optimizer,
    group ``encoder_optimized``), the four CNNs at batch 1 (group ``cnn``) and the
    decoder (group ``decoder``), every node native (the tool checks it)."""
    config = EncoderConfig()

    def ids(rng: np.random.Generator, shape: tuple[int, ...], dtype: object) -> np.ndarray:
        return rng.integers(0, config.vocab, size=shape, dtype=np.int64)

    def ones(rng: np.random.Generator, shape: tuple[int, ...], dtype: object) -> np.ndarray:
        return np.ones(shape, np.int64)

    cases: list[dict[str, object]] = [{
        "suite": "models", "op": "BertEncoder", "name": "BERT-style encoder b1 s128", "group": "encoder",
        "model": lambda: bert_encoder(config), "size": 128,
        "inputs": [{"shape": [1, 128], "dtype": "int64", "generator": ids},
                   {"shape": [1, 128], "dtype": "int64", "generator": ones}],
        "outputs": ["float32", "float32"], "rtol": 1e-3, "atol": 1e-4,
    }, {
        # all-MiniLM-L6's shapes (hidden 384, 12 heads, 6 layers, 1536), the raw export with olc's
        # own passes against onnxruntime's default optimizations of it
        "suite": "models", "op": "BertEncoder", "name": "BERT-style encoder MiniLM-L6 shapes b1 s128",
        "group": "encoder_minilm", "model": lambda: bert_encoder(MINILM), "size": 128,
        "inputs": [{"shape": [1, 128], "dtype": "int64", "generator": ids},
                   {"shape": [1, 128], "dtype": "int64", "generator": ones}],
        "outputs": ["float32", "float32"], "rtol": 1e-3, "atol": 1e-4,
    }, {
        # the same export after onnxruntime's transformer optimizer, both runtimes on that graph
        "suite": "models", "op": "OptimizedBert", "name": "BERT-style encoder MiniLM-L6 shapes, optimized, b1 s128",
        "group": "encoder_optimized", "model": functools.partial(optimized_bert_encoder, MINILM), "size": 128,
        "inputs": [{"shape": [1, 128], "dtype": "int64", "generator": ids},
                   {"shape": [1, 128], "dtype": "int64", "generator": ones}],
        "outputs": ["float32", "float32"], "rtol": 1e-3, "atol": 1e-4,
    }]
    labels = {"resnet": "ResNet-style stack", "mobilenet": "MobileNetV3-style stack", "unet": "U-Net",
              "audio": "M5-style audio stack", "lcnet": "PP-LCNetV3-style stack"}
    for key, (builder, _, shape) in CNN_MODELS.items():
        cases.append({
            "suite": "models", "op": key, "name": f"{labels[key]} {list(shape)}",
            "group": "cnn_more" if key in CNN_UNGATED else "cnn",
            "model": builder, "size": int(np.prod(shape)),
            "inputs": [{"shape": list(shape), "dtype": "float32", "generator": "normal"}],
            "outputs": ["float32"], "rtol": 1e-3, "atol": 1e-3,
        })
    return cases + decoder_benchmark_cases()


# The benchmarked decoder: Qwen2.5-0.5B's layer shapes, 4 layers, a
# 32,000-token vocabulary (the lm_head about a third of the weights, as in
# the real model).
BENCH_DECODERS = {"int4": DecoderConfig(vocab=32000), "fp32": DecoderConfig(vocab=32000, int4=False)}


@functools.lru_cache(maxsize=1)
def _bench_decoder(kind: str) -> onnx.ModelProto:
    return genai_decoder(BENCH_DECODERS[kind])


def decoder_benchmark_cases() -> list[dict[str, object]]:
    """The genai-shaped decoder end to end, decoding one token after a past
    of 512 positions and a first prompt of 128 tokens, batch 1. Group
    ``decoder``: 4-bit weights at accuracy_level 4, the form onnxruntime-genai
    builds for CPU, gated. Group ``decoder_fp32``: float32 weights, reported
    but not gated: its run is float32 MatMul (over 95 %), a one-row product
    that streams the weights from memory at decode and a GEMM at prefill, where
    both runtimes run at the same bandwidth and the same FMA peak."""

    def ones(rng: np.random.Generator, shape: tuple[int, ...], dtype: object) -> np.ndarray:
        return np.ones(shape, np.int64)

    cases: list[dict[str, object]] = []
    for kind, config in BENCH_DECODERS.items():
        def ids(rng: np.random.Generator, shape: tuple[int, ...], dtype: object, vocab: int = config.vocab) -> np.ndarray:
            return rng.integers(0, vocab, size=shape, dtype=np.int64)

        for phase, tokens, past in (("decode past 512", 1, 512), ("prefill 128", 128, 0)):
            kv = [{"shape": [1, config.kv_heads, past, config.head_size], "dtype": "float32", "generator": "normal"}]
            cases.append({
                "suite": "models", "op": "GenaiDecoder", "group": "decoder" if config.int4 else "decoder_fp32",
                "name": f"genai decoder {kind} ({config.layers} layers) {phase}",
                "model": functools.partial(_bench_decoder, kind), "size": tokens,
                "inputs": [{"shape": [1, tokens], "dtype": "int64", "generator": ids},
                           {"shape": [1, past + tokens], "dtype": "int64", "generator": ones}] + kv * (2 * config.layers),
                "outputs": ["float32"] * (1 + 2 * config.layers),
                # accuracy_level 4 quantizes activations to int8 in both runtimes (see tests/test_models_decoder.py)
                "rtol": 0.05 if config.int4 else 1e-3, "atol": 0.5 if config.int4 else 1e-3,
            })
    return cases


def benchmark_gates() -> list[dict[str, object]]:
    return [{"name": "BERT-style encoder, batch 1, sequence 128: olc >= onnxruntime", "group": "encoder",
             "median_at_least": 1.0, "min_at_least": 1.0},
            {"name": "genai decoder, 4-bit accuracy_level 4, end to end (decode past 512, prefill 128): "
                     "median >= 1.2 x onnxruntime",
             "group": "decoder", "median_at_least": 1.2, "min_at_least": 1.0},
            {"name": "optimized BERT (onnxruntime's transformer optimizer), b1 s128: >= 1.1 x onnxruntime",
             "group": "encoder_optimized", "median_at_least": 1.1, "min_at_least": 1.0},
            {"name": "raw MiniLM-shaped BERT export, olc's passes against onnxruntime's default optimizations, "
                     "b1 s128: >= 1.1 x onnxruntime",
             "group": "encoder_minilm", "median_at_least": 1.1, "min_at_least": 1.0},
            {"name": "CNN block stacks end to end (ResNet, MobileNetV3, U-Net, M5 audio), batch 1: "
                     "each >= 1.1 x onnxruntime",
             "group": "cnn", "median_at_least": 1.1, "min_at_least": 1.1}]
