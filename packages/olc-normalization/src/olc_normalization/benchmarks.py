"""Benchmark cases of olc-normalization for tools/benchmark_parity.py.

    python tools/benchmark_parity.py --suite normalization --threads 1,2 --min-time 0.3 [--enforce]

The transformer shapes: Softmax, LayerNormalization (scale and bias as
initializers, as exported models have them) and RMSNormalization (opset 23)
on [B*S, H] for B*S in 1, 128, 2048 and H in 768, 4096, and Softmax over
attention scores [1, 16, 128, 128] and [1, 32, 512, 512]; float32.
The shapes are fixed (the tool's --sizes does not apply). Ungated groups
"middle-axis" and "other" time the column softmax and the remaining
operators (Batch/Instance/Group/MeanVariance/Lp normalization, LogSoftmax).
"""

from __future__ import annotations

from typing import Any

from .manifest import kernel_name

ROWS = (1, 128, 2048)
HIDDEN = (768, 4096)
ATTENTION = ((1, 16, 128, 128), (1, 32, 512, 512))
SEGMENTATION = (1, 21, 128, 128)
GROUP = "transformer"


def _case(op: str, opset: int, shape: list[int], params: list[list[int]], attributes: dict[str, Any],
          name: str, generators: list[str] | None = None) -> dict[str, Any]:
    inputs: list[dict[str, Any]] = [{"shape": shape, "dtype": "float32", "generator": "normal"}]
    gens = generators or ["normal"] * len(params)
    inputs += [{"shape": p, "dtype": "float32", "generator": g, "constant": True} for p, g in zip(params, gens)]
    size = 1
    for d in shape:
        size *= d
    return {"op": op, "domain": "", "opset": opset, "attributes": attributes, "inputs": inputs,
            "outputs": ["float32"], "expected_kernel": kernel_name(op), "name": name, "size": size,
            "rtol": 1e-4, "atol": 1e-5, "group": GROUP}


def benchmark_cases() -> list[dict[str, Any]]:
    cases = []
    for h in HIDDEN:
        for bs in ROWS:
            shape = [bs, h]
            cases.append(_case("Softmax", 13, shape, [], {"axis": -1}, f"Softmax [{bs}, {h}]"))
            cases.append(_case("LayerNormalization", 17, shape, [[h], [h]], {"axis": -1, "epsilon": 1e-5},
                               f"LayerNormalization [{bs}, {h}]"))
            cases.append(_case("RMSNormalization", 23, shape, [[h]], {"axis": -1, "epsilon": 1e-5},
                               f"RMSNormalization [{bs}, {h}]"))
    for scores in ATTENTION:
        cases.append(_case("Softmax", 13, list(scores), [], {"axis": -1},
                           "Softmax scores [" + ", ".join(map(str, scores)) + "]"))
    # Not gated: Softmax over the channel axis of a segmentation output
    # (a middle axis: the column path of the row engine).
    seg = _case("Softmax", 13, list(SEGMENTATION), [], {"axis": 1},
                "Softmax axis 1 [" + ", ".join(map(str, SEGMENTATION)) + "]")
    seg["group"] = "middle-axis"
    cases.append(seg)
    # Not gated: the other operators on a convolutional activation.
    act = [8, 64, 56, 56]
    other = [
        _case("BatchNormalization", 15, act, [[64]] * 4, {}, "BatchNormalization [8, 64, 56, 56]",
              ["normal", "normal", "normal", "positive"]),
        _case("InstanceNormalization", 22, act, [[64]] * 2, {}, "InstanceNormalization [8, 64, 56, 56]"),
        _case("GroupNormalization", 21, act, [[64]] * 2, {"num_groups": 8}, "GroupNormalization [8, 64, 56, 56] g=8"),
        _case("MeanVarianceNormalization", 13, act, [], {}, "MeanVarianceNormalization [8, 64, 56, 56]"),
        _case("LpNormalization", 22, [512, 768], [], {"axis": -1, "p": 2}, "LpNormalization p=2 [512, 768]"),
        _case("LpNormalization", 22, [64, 256, 64], [], {"axis": 1, "p": 2}, "LpNormalization p=2 axis 1 [64, 256, 64]"),
        _case("LogSoftmax", 13, [2048, 768], [], {"axis": -1}, "LogSoftmax [2048, 768]"),
    ]
    for c in other:
        c["group"] = "other"
    return cases + other


def benchmark_gates() -> list[dict[str, Any]]:
    return [{"name": "normalization: transformer shapes, float32, ort/olc", "group": GROUP,
             "median_at_least": 1.1, "min_at_least": 0.9}]
