"""Benchmark cases of olc-contrib-microsoft for tools/benchmark_parity.py.

    python tools/benchmark_parity.py --suite contrib_microsoft --threads 1,2 --min-time 0.3 [--enforce]

Transformer shapes [1, rows, H] for rows in 1, 128, 2048 and H in 384, 768,
4096, float32: SkipLayerNormalization with gamma, beta and bias as
initializers (as BERT exports have them), BiasGelu and FastGelu (with its
bias) on the same shapes. Ungated group "other": SkipSimplifiedLayerNormalization,
QuickGelu, Gelu and FastGelu without a bias. The shapes are fixed (the
tool's --sizes does not apply).
"""

from __future__ import annotations

from typing import Any

from .manifest import DOMAIN, kernel_name

ROWS = (1, 128, 2048)
HIDDEN = (384, 768, 4096)
GROUP = "transformer"


def _case(op: str, rows: int, h: int, params: int, runtime_inputs: int = 1, group: str = GROUP,
          attributes: dict[str, Any] | None = None, label: str = "") -> dict[str, Any]:
    shape = [1, rows, h]
    inputs: list[dict[str, Any]] = [{"shape": shape, "dtype": "float32", "generator": "normal"}
                                    for _ in range(runtime_inputs)]
    inputs += [{"shape": [h], "dtype": "float32", "generator": "normal", "constant": True} for _ in range(params)]
    return {"op": op, "domain": DOMAIN, "opset": 1, "attributes": attributes or {}, "inputs": inputs,
            "outputs": ["float32"], "expected_kernel": kernel_name(op),
            "name": f"{label or op} [1, {rows}, {h}]", "size": rows * h, "rtol": 1e-4, "atol": 1e-5,
            "group": group}


def benchmark_cases() -> list[dict[str, Any]]:
    cases = []
    for h in HIDDEN:
        for rows in ROWS:
            # input, skip (runtime), gamma, beta, bias (initializers)
            cases.append(_case("SkipLayerNormalization", rows, h, params=3, runtime_inputs=2,
                               attributes={"epsilon": 1e-12}))
            cases.append(_case("BiasGelu", rows, h, params=1))
            cases.append(_case("FastGelu", rows, h, params=1))
    for rows in (128, 2048):
        h = 768
        cases.append(_case("SkipSimplifiedLayerNormalization", rows, h, params=2, runtime_inputs=2, group="other",
                           attributes={"epsilon": 1e-6}))
        cases.append(_case("QuickGelu", rows, h, params=0, group="other"))
        cases.append(_case("Gelu", rows, h, params=0, group="other"))
        cases.append(_case("FastGelu", rows, h, params=0, group="other", label="FastGelu (no bias)"))
    return cases


def benchmark_gates() -> list[dict[str, Any]]:
    return [{"name": "contrib_microsoft: transformer shapes, float32, ort/olc", "group": GROUP,
             "median_at_least": 1.3, "min_at_least": 1.0}]
