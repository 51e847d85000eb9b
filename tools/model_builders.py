"""Realistic test models, built with onnx.helper (no downloads).

The graphs follow what exporters emit, glue included: a BERT-style encoder
as torch.onnx exports a Hugging Face BertModel (opset 17, symbolic batch and
sequence, the shape chains Shape -> Gather -> Unsqueeze -> Concat -> Reshape
around every attention head split, the position ids sliced from a buffer,
the mask turned into an additive bias, Gelu written with Erf, Constant
nodes for the scalars). Used by tests/test_models.py and by
tools/benchmark_parity.py's ``models`` suite.
"""

from __future__ import annotations

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


def encoder_feeds(config: EncoderConfig, batch: int, sequence: int, seed: int = 0) -> dict[str, np.ndarray]:
    """Token ids below the vocabulary and a mask with padding at the end of every row but the first."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, config.vocab, size=(batch, sequence), dtype=np.int64)
    mask = np.ones((batch, sequence), np.int64)
    for b in range(1, batch):
        mask[b, sequence - b * max(1, sequence // 8):] = 0
    return {"input_ids": ids, "attention_mask": mask}


# ------------------------------------------------------------ benchmark cases


def benchmark_cases(sizes: object = None) -> list[dict[str, object]]:
    """The ``models`` suite of tools/benchmark_parity.py: the encoder at
    batch 1, sequence 128, every node native (the tool checks it)."""
    config = EncoderConfig()

    def ids(rng: np.random.Generator, shape: tuple[int, ...], dtype: object) -> np.ndarray:
        return rng.integers(0, config.vocab, size=shape, dtype=np.int64)

    def ones(rng: np.random.Generator, shape: tuple[int, ...], dtype: object) -> np.ndarray:
        return np.ones(shape, np.int64)

    return [{
        "suite": "models", "op": "BertEncoder", "name": "BERT-style encoder b1 s128", "group": "encoder",
        "model": lambda: bert_encoder(config), "size": 128,
        "inputs": [{"shape": [1, 128], "dtype": "int64", "generator": ids},
                   {"shape": [1, 128], "dtype": "int64", "generator": ones}],
        "outputs": ["float32", "float32"], "rtol": 1e-3, "atol": 1e-4,
    }]


def benchmark_gates() -> list[dict[str, object]]:
    return [{"name": "BERT-style encoder, batch 1, sequence 128: olc >= onnxruntime", "group": "encoder",
             "median_at_least": 1.0, "min_at_least": 1.0}]
