"""The built-in demo model that ``olc run`` uses when no model is given.

A small but realistic graph: a feature branch of unary and binary
elementwise ops (chains the elementwise family fuses), a dense head
(MatMul + Add, the matmul family's), and an activation tail. With only
olc-core installed every node runs on the reference fallback; each family
installed takes its nodes over, and the plan shows which. Input ``x`` has
shape ``[batch, 1024]`` float32; ``batch`` is symbolic (``olc run`` feeds
:data:`DEMO_DIMS` unless ``--dim batch=N`` says otherwise).
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

DEMO_OPSET = 20  # Gelu exists from opset 20 on
FEATURES = 1024
HIDDEN = 256
DEMO_DIMS: dict[str, int] = {"batch": 64}


def build_demo_model(seed: int = 0) -> onnx.ModelProto:
    """Returns the demo model; its weights are drawn from ``seed``."""
    rng = np.random.default_rng(seed)
    # Scaled so that the head's pre-activations stay in the informative range of Tanh.
    w = (rng.standard_normal((FEATURES, HIDDEN)) / np.sqrt(FEATURES)).astype(np.float32)
    b = (0.1 * rng.standard_normal(HIDDEN)).astype(np.float32)

    node = helper.make_node
    nodes = [
        # Feature branch: sqrt|x| * exp(-|x|) + relu(x), and tanh(log|x|).
        node("Abs", ["x"], ["abs_x"], name="abs"),
        node("Sqrt", ["abs_x"], ["sqrt_abs"], name="sqrt"),
        node("Neg", ["abs_x"], ["neg_abs"], name="neg"),
        node("Exp", ["neg_abs"], ["decay"], name="exp"),
        node("Mul", ["sqrt_abs", "decay"], ["bump"], name="mul"),
        node("Relu", ["x"], ["relu_x"], name="relu"),
        node("Add", ["bump", "relu_x"], ["features"], name="add_features"),
        node("Log", ["abs_x"], ["log_abs"], name="log"),
        node("Tanh", ["log_abs"], ["log_abs_tanh"], name="tanh_log"),
        # Dense head: gelu(x) @ W + b -> tanh -> sigmoid.
        node("Gelu", ["x"], ["gelu_x"], name="gelu", approximate="none"),
        node("MatMul", ["gelu_x", "W"], ["proj"], name="matmul"),
        node("Add", ["proj", "B"], ["proj_b"], name="add_bias"),
        node("Tanh", ["proj_b"], ["hidden"], name="tanh_head"),
        node("Sigmoid", ["hidden"], ["head"], name="sigmoid"),
    ]
    graph = helper.make_graph(
        nodes,
        "olc_demo",
        inputs=[helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", FEATURES])],
        outputs=[
            helper.make_tensor_value_info("head", TensorProto.FLOAT, ["batch", HIDDEN]),
            helper.make_tensor_value_info("features", TensorProto.FLOAT, ["batch", FEATURES]),
            helper.make_tensor_value_info("log_abs_tanh", TensorProto.FLOAT, ["batch", FEATURES]),
        ],
        initializer=[numpy_helper.from_array(w, "W"), numpy_helper.from_array(b, "B")],
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", DEMO_OPSET)],
        producer_name="olc-demo",
    )
    # onnxruntime 1.17+ reads IR 9; the newest IR is not needed for anything here.
    model.ir_version = 9
    onnx.checker.check_model(model, full_check=True)
    return model
