"""Benchmark cases of olc-tensor for ``tools/benchmark_parity.py --suite tensor``.

The shapes are those of a BERT-base / GPT-2 layer: head transposes, an
embedding gather from a [30522, 768] table (a constant initializer, as in a
real model), the QKV concat and split along the last axis, and the float32
to float16/bfloat16 casts of mixed-precision graphs at 1 and 4 million
elements; per-tensor QuantizeLinear / DequantizeLinear between float32
and uint8 / int8 at 64K and 1M elements; the pooling and Resize layers of
a ResNet-50 / U-Net style CNN (MaxPool 3x3 stride 2 on [1,64,112,112], the
global average pools of [1,512,7,7] and [8,2048,7,7], a 3x3 AveragePool,
bilinear and nearest 2x upsampling of [1,64,128,128]) and the small ones of
the CNN model stacks (MaxPool 3x3 stride 2 of [1,64,32,32], the U-Net's 2x2
pools and bilinear 2x of [1,64,32,32], the audio stack's 1-D pools); the detection and
warping ops: RoiAlign and MaxRoiPool of 100 boxes into 7x7 bins from a
stride-16 [1,256,50,68] feature map (Faster / Mask R-CNN heads), GridSample
of [1,32,64,64] on a 64x64 grid (a spatial transformer), Col2Im folding a
3x3 unfold of [1,64,56,56] back, MaxUnpool of a 2x2 MaxPool of
[1,64,112,112] (SegNet); the reductions of real graphs: column sums (axis
0 of [1024, 1024]), mean pooling over the tokens of [8, 512, 768], the
row means of a decomposed LayerNorm ([128, 768]) and a global max pool of
[8, 256, 14, 14] (float64 sums in olc, float32 in onnxruntime: compared
within 1e-5 relative, 1e-3 absolute). ``benchmark_gates()`` states the targets (ratio =
onnxruntime time / olc time, same inputs and threads).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .manifest import kernel_name

OPSET = 18
QUANTIZE_SIZES = (1 << 16, 1 << 20)
VOCAB, HIDDEN = 30522, 768


def _token_ids(rng: np.random.Generator, shape: Sequence[int], dtype: Any) -> np.ndarray:
    return rng.integers(0, VOCAB, size=shape).astype(dtype)


def _f32(shape: Sequence[int], constant: bool = False, generator: Any = "normal") -> dict[str, Any]:
    return {"shape": list(shape), "dtype": "float32", "generator": generator, "constant": constant}


def _i64_const(values: Sequence[int]) -> dict[str, Any]:
    arr = np.asarray(values, np.int64)

    def gen(rng: np.random.Generator, shape: Sequence[int], dtype: Any) -> np.ndarray:
        return arr.astype(dtype)

    return {"shape": [len(values)], "dtype": "int64", "generator": gen, "constant": True}


def _case(op: str, name: str, inputs: list[dict[str, Any]], group: str, attributes: dict[str, Any] | None = None,
          outputs: list[str] | None = None, size: int | None = None) -> dict[str, Any]:
    return {
        "op": op, "domain": "", "opset": OPSET, "attributes": attributes or {}, "inputs": inputs,
        "outputs": outputs or ["float32"], "expected_kernel": kernel_name(op), "name": name,
        "size": size if size is not None else int(np.prod(inputs[0]["shape"])), "group": group,
        "rtol": 0.0, "atol": 0.0,
    }


def benchmark_cases(sizes: Sequence[int] | None = None) -> list[dict[str, Any]]:
    """The gated cases; ``sizes`` (element counts) replaces the Cast sizes."""
    default = [1 << 20, 1 << 22]
    # The runner passes its own default sizes when --sizes is not given; the
    # Cast cases keep their 1M / 4M sizes then.
    cast_sizes = default if not sizes or tuple(sizes) == (4096, 65536, 1048576, 4194304) else list(sizes)
    cases = [
        _case("Transpose", "Transpose [1,128,12,64] perm 0,2,1,3", [_f32([1, 128, 12, 64])], "transpose",
              {"perm": [0, 2, 1, 3]}),
        _case("Transpose", "Transpose [32,2048] -> [2048,32]", [_f32([32, 2048])], "transpose", {"perm": [1, 0]}),
        _case("Gather", "Gather 128 rows of [30522,768]",
              [_f32([VOCAB, HIDDEN], constant=True),
               {"shape": [1, 128], "dtype": "int64", "generator": _token_ids}],
              "gather", {"axis": 0}, size=128 * HIDDEN),
        _case("Concat", "Concat 3x[1,128,768] -> [1,128,2304]", [_f32([1, 128, 768])] * 3, "concat", {"axis": -1},
              size=128 * 2304),
        _case("Split", "Split [1,128,2304] -> 3x[1,128,768]", [_f32([1, 128, 2304]), _i64_const([768, 768, 768])],
              "split", {"axis": -1}, outputs=["float32"] * 3),
    ]
    for n in cast_sizes:
        cases.append(_case("Cast", f"Cast float32 -> float16 {n}", [_f32([n])], "cast", {"to": 10},
                           outputs=["float16"]))
        # onnxruntime's Python API cannot return bfloat16 arrays: the case
        # casts there and back (two olc Cast kernels against two of its own).
        case = _case("Cast", f"Cast float32 -> bfloat16 -> float32 {n}", [_f32([n])], "cast")
        case["model"] = _bf16_round_trip(n)
        cases.append(case)
    return cases + _quantize_cases(QUANTIZE_SIZES) + _cnn_cases() + _sampling_cases() + _reduce_cases()


def _reduce_cases() -> list[dict[str, Any]]:
    cases = []
    for op, name, shape, axes, keepdims in (
            ("ReduceSum", "ReduceSum axis 0 of [1024,1024]", [1024, 1024], [0], 0),
            ("ReduceMean", "ReduceMean axis 1 of [8,512,768]", [8, 512, 768], [1], 0),
            ("ReduceMean", "ReduceMean axis -1 of [128,768]", [128, 768], [-1], 1),
            ("ReduceMax", "ReduceMax axes 2,3 of [8,256,14,14]", [8, 256, 14, 14], [2, 3], 1)):
        case = _case(op, name, [_f32(shape), _i64_const(axes)], "reduce", {"keepdims": keepdims})
        case.update(rtol=1e-5, atol=1e-3)
        cases.append(case)
    return cases


def _f32_const(values: Sequence[float]) -> dict[str, Any]:
    arr = np.asarray(values, np.float32)

    def gen(rng: np.random.Generator, shape: Sequence[int], dtype: Any) -> np.ndarray:
        return arr.astype(dtype)

    return {"shape": [len(values)], "dtype": "float32", "generator": gen, "constant": True}


def _cnn_cases() -> list[dict[str, Any]]:
    """Pooling and Resize as a CNN runs them (NCHW float32, constant scales)."""
    pool3 = {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}
    pool2 = {"kernel_shape": [2, 2], "strides": [2, 2]}
    up2 = _f32_const([1, 1, 2, 2])
    cases = [
        _case("MaxPool", "MaxPool 3x3 s2 [1,64,112,112]", [_f32([1, 64, 112, 112])], "pool", pool3),
        _case("AveragePool", "AveragePool 3x3 s2 [1,64,112,112]", [_f32([1, 64, 112, 112])], "pool", pool3),
        _case("AveragePool", "AveragePool 3x3 s1 pad 1 [1,256,28,28]", [_f32([1, 256, 28, 28])], "pool",
              {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "count_include_pad": 0}),
        _case("GlobalAveragePool", "GlobalAveragePool [1,512,7,7]", [_f32([1, 512, 7, 7])], "pool"),
        _case("GlobalAveragePool", "GlobalAveragePool [8,2048,7,7]", [_f32([8, 2048, 7, 7])], "pool"),
        _case("Resize", "Resize bilinear 2x [1,64,128,128]",
              [_f32([1, 64, 128, 128]), {"shape": [0], "dtype": "float32", "generator": "normal", "constant": True},
               up2], "resize", {"mode": "linear"}),
        _case("Resize", "Resize nearest 2x [1,64,128,128]",
              [_f32([1, 64, 128, 128]), {"shape": [0], "dtype": "float32", "generator": "normal", "constant": True},
               up2], "resize", {"mode": "nearest"}),
        # The small nodes of the CNN model stacks (tools/model_builders.py):
        # ResNet's stem pool, the U-Net's 2x2 pools and bilinear upsampling,
        # the M5 audio stack's 1-D pools.
        _case("MaxPool", "MaxPool 3x3 s2 [1,64,32,32]", [_f32([1, 64, 32, 32])], "pool", pool3),
        _case("MaxPool", "MaxPool 2x2 s2 [1,32,64,64]", [_f32([1, 32, 64, 64])], "pool", pool2),
        _case("MaxPool", "MaxPool 2x2 s2 [1,128,16,16]", [_f32([1, 128, 16, 16])], "pool", pool2),
        _case("MaxPool", "MaxPool 4 s4 [1,64,2000]", [_f32([1, 64, 2000])], "pool",
              {"kernel_shape": [4], "strides": [4]}),
        _case("AveragePool", "AveragePool 4 s4 [1,256,31]", [_f32([1, 256, 31])], "pool",
              {"kernel_shape": [4], "strides": [4]}),
        _case("Resize", "Resize bilinear half_pixel 2x [1,64,32,32]",
              [_f32([1, 64, 32, 32]), {"shape": [0], "dtype": "float32", "generator": "normal", "constant": True},
               up2], "resize", {"mode": "linear", "coordinate_transformation_mode": "half_pixel"}),
    ]
    for c in cases:
        # Sums: the order differs from onnxruntime's (and olc multiplies by
        # the reciprocal of the count): agreement to float32 rounding.
        if c["op"] in ("AveragePool", "GlobalAveragePool") or c["attributes"].get("mode") == "linear":
            c["rtol"], c["atol"] = 1e-5, 1e-6
    return cases


def _boxes(rng: np.random.Generator, shape: Sequence[int], dtype: Any) -> np.ndarray:
    """Boxes [x1, y1, x2, y2] (or [batch, x1, y1, x2, y2]) of 16 to 300 pixels
    in an 800 x 1088 image (the [50, 68] map at stride 16)."""
    n, cols = shape
    lo = rng.uniform(0, 780, (n, 2))
    boxes = np.concatenate([lo, lo + rng.uniform(16, 300, (n, 2))], 1)
    if cols == 5:
        boxes = np.concatenate([np.zeros((n, 1)), boxes], 1)
    return boxes.astype(dtype)


def _zeros(rng: np.random.Generator, shape: Sequence[int], dtype: Any) -> np.ndarray:
    return np.zeros(shape, dtype)


def _unit(rng: np.random.Generator, shape: Sequence[int], dtype: Any) -> np.ndarray:
    return rng.uniform(-1, 1, shape).astype(dtype)


def _pool_indices(rng: np.random.Generator, shape: Sequence[int], dtype: Any) -> np.ndarray:
    """What a 2x2 stride-2 MaxPool's Indices output holds for an input of
    twice the spatial size: one position of each window, flat over the input."""
    n, c, h, w = shape
    rows = 2 * np.arange(h)[:, None] + rng.integers(0, 2, (n, c, h, w))
    cols = 2 * np.arange(w)[None, :] + rng.integers(0, 2, (n, c, h, w))
    plane = np.arange(n * c).reshape(n, c, 1, 1) * (4 * h * w)
    return (plane + rows * (2 * w) + cols).astype(dtype)


def _sampling_cases() -> list[dict[str, Any]]:
    """RoiAlign, MaxRoiPool, GridSample, Col2Im and MaxUnpool at the sizes of
    the models that use them."""
    fmap = _f32([1, 256, 50, 68])
    cases = []
    for sr in (2, 0):
        c = _case("RoiAlign", f"RoiAlign 100 boxes 7x7 sampling_ratio {sr} [1,256,50,68]",
                  [fmap, {"shape": [100, 4], "dtype": "float32", "generator": _boxes},
                   {"shape": [100], "dtype": "int64", "generator": _zeros}], "sampling",
                  {"output_height": 7, "output_width": 7, "sampling_ratio": sr, "spatial_scale": 1 / 16},
                  size=100 * 256 * 49)
        c["opset"] = 16
        cases.append(c)
    cases.append(_case("MaxRoiPool", "MaxRoiPool 100 boxes 7x7 [1,256,50,68]",
                       [fmap, {"shape": [100, 5], "dtype": "float32", "generator": _boxes}], "sampling",
                       {"pooled_shape": [7, 7], "spatial_scale": 1 / 16}, size=100 * 256 * 49))
    for mode in ("linear", "cubic"):
        c = _case("GridSample", f"GridSample {mode} [1,32,64,64] grid 64x64",
                  [_f32([1, 32, 64, 64]), {"shape": [1, 64, 64, 2], "dtype": "float32", "generator": _unit}],
                  "sampling", {"mode": mode}, size=32 * 64 * 64)
        c["opset"] = 20
        cases.append(c)
    image = {"shape": [2], "dtype": "int64", "generator": lambda rng, shape, dt: np.array([56, 56], dt),
             "constant": True}
    block = {"shape": [2], "dtype": "int64", "generator": lambda rng, shape, dt: np.array([3, 3], dt),
             "constant": True}
    cases.append(_case("Col2Im", "Col2Im 3x3 pad 1 [1,576,3136] -> [1,64,56,56]",
                       [_f32([1, 64 * 9, 56 * 56]), image, block], "sampling", {"pads": [1, 1, 1, 1]}))
    cases.append(_case("MaxUnpool", "MaxUnpool 2x2 s2 [1,64,56,56] -> [1,64,112,112]",
                       [_f32([1, 64, 56, 56]), {"shape": [1, 64, 56, 56], "dtype": "int64",
                                                "generator": _pool_indices}], "sampling",
                       {"kernel_shape": [2, 2], "strides": [2, 2]}))
    for c in cases:
        if c["op"] in ("RoiAlign", "GridSample", "Col2Im"):
            c["rtol"], c["atol"] = 1e-5, 1e-5
    return cases


def _const(value: float, dtype: str) -> dict[str, Any]:
    """A 0-d initializer (a per-tensor scale or zero point, as in a real Q/DQ model)."""

    def gen(rng: np.random.Generator, shape: Sequence[int], dt: Any) -> np.ndarray:
        return np.asarray(value, dtype=dt)

    return {"shape": [], "dtype": dtype, "generator": gen, "constant": True}


def _quantized(dtype: str) -> dict[str, Any]:
    def gen(rng: np.random.Generator, shape: Sequence[int], dt: Any) -> np.ndarray:
        info = np.iinfo(dt)
        return rng.integers(info.min, info.max, size=shape, endpoint=True).astype(dt)

    return {"dtype": dtype, "generator": gen}


def _quantize_cases(sizes: Sequence[int]) -> list[dict[str, Any]]:
    """Per-tensor QuantizeLinear / DequantizeLinear between float32 and
    uint8 / int8 (activations of an onnxruntime-quantized model)."""
    cases = []
    for n in sizes:
        for q_t, zp in (("uint8", 128), ("int8", 0)):
            cases.append(_case("QuantizeLinear", f"QuantizeLinear float32 -> {q_t} {n}",
                               [_f32([n], generator="wide"), _const(0.0125, "float32"), _const(zp, q_t)],
                               "quantize", outputs=[q_t]))
            cases.append(_case("DequantizeLinear", f"DequantizeLinear {q_t} -> float32 {n}",
                               [{"shape": [n], **_quantized(q_t)}, _const(0.0125, "float32"), _const(zp, q_t)],
                               "quantize"))
    return cases


def _bf16_round_trip(n: int) -> Any:
    def build() -> Any:
        from onnx import TensorProto, helper

        nodes = [helper.make_node("Cast", ["x"], ["h"], to=TensorProto.BFLOAT16, name="to_bf16"),
                 helper.make_node("Cast", ["h"], ["y"], to=TensorProto.FLOAT, name="to_f32")]
        graph = helper.make_graph(nodes, "bf16_round_trip",
                                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n])],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n])])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
        model.ir_version = 9
        return model

    return build


def benchmark_gates() -> list[dict[str, Any]]:
    return [{"name": "tensor: median ratio >= 1.0, every case >= 0.85", "group": None,
             "median_at_least": 1.0, "min_at_least": 0.85}]
