"""The one table of olc-elementwise's unary kernels.

Registration (plugin.py), the tests and the benchmarks all read this table;
nothing about an operator is listed twice. Each row gives the operator, its
cost class, its attributes with the ONNX defaults, and one segment per ONNX
schema version that changed the accepted types. Segments start at opset 6
for operators whose older versions carry the legacy ``consumed_inputs``
attribute; types are claimed only where that version's schema allows them.

``tolerance`` documents the accepted error of float results against an
exact (float64) oracle, per element type: ``("exact",)``, ``("ulp", n)`` or
``("abs_rel", atol, rtol)``. See README.md for the measured figures.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

MAX_OPSET = 2**31 - 1

F3 = ("float32", "float64", "float16")
F4 = F3 + ("bfloat16",)
SINT = ("int8", "int16", "int32", "int64")
UINT = ("uint8", "uint16", "uint32", "uint64")


@dataclass(frozen=True)
class Attr:
    name: str
    kind: str  # "float" | "int" | "string"
    default: Any
    allowed: tuple[Any, ...] | None = None  # None: any finite value
    # Float attributes: the kernel parameter that carries the value
    # ("alpha", "beta" or "gamma"; Shrink's lambd and bias ride in alpha and
    # beta). Empty: the attribute's own name.
    param: str = ""
    nonzero: bool = False  # 0 is refused (Celu divides by alpha)

    @property
    def slot(self) -> str:
        return self.param or self.name


@dataclass(frozen=True)
class Segment:
    since: int
    until: int
    types: tuple[str, ...]  # element types of the input (constraint T or T1)


@dataclass(frozen=True)
class UnaryOp:
    op: str
    segments: tuple[Segment, ...]
    attrs: tuple[Attr, ...] = ()
    cost: str = "cheap"  # "cheap": memory-bound; "costly": transcendental
    out_bool: bool = False  # IsNaN / IsInf: output constraint T2 = bool
    tolerance: dict[str, tuple] = field(default_factory=dict)

    @property
    def input_constraint(self) -> str:
        return "T1" if self.out_bool else "T"

    @property
    def types(self) -> tuple[str, ...]:
        """Every element type claimed at some opset."""
        seen: list[str] = []
        for s in self.segments:
            seen.extend(t for t in s.types if t not in seen)
        return tuple(seen)

    @property
    def since(self) -> int:
        return self.segments[0].since

    def types_at(self, opset: int) -> tuple[str, ...]:
        for s in self.segments:
            if s.since <= opset <= s.until:
                return s.types
        return ()


def _split(since: int, changes: dict[int, tuple[str, ...]]) -> tuple[Segment, ...]:
    """Segments from {first opset: types}; each runs until the next one."""
    starts = sorted(changes)
    assert starts[0] == since
    out = []
    for k, start in enumerate(starts):
        until = starts[k + 1] - 1 if k + 1 < len(starts) else MAX_OPSET
        out.append(Segment(start, until, changes[start]))
    return tuple(out)


EXACT = ("exact",)
# Cheap ops are exact (bit-identical to the float64 result rounded once).
_CHEAP_TOL = dict.fromkeys(F4, EXACT)


def _tol(f32: tuple, f64: tuple = ("abs_rel", 1e-15, 1e-14)) -> dict[str, tuple]:
    # float16/bfloat16 compute in f32 and round once: half an output ulp plus
    # the f32 error.
    return {"float32": f32, "float64": f64,
            "float16": ("abs_rel", 1e-6, 2.0**-10), "bfloat16": ("abs_rel", 1e-6, 2.0**-7)}


_ONE_ULP_LOWP = {"float16": ("abs_rel", 2.0**-24, 2.0**-10), "bfloat16": ("abs_rel", 2.0**-133, 2.0**-7)}

ALPHA_LEAKY = Attr("alpha", "float", 0.009999999776482582)
ALPHA_ELU = Attr("alpha", "float", 1.0)

UNARY_OPS: tuple[UnaryOp, ...] = (
    UnaryOp("Abs", _split(6, {6: SINT + UINT + F3, 13: SINT + UINT + F4}), tolerance=_CHEAP_TOL),
    UnaryOp("Neg", _split(6, {6: SINT + F3, 13: SINT + F4}), tolerance=_CHEAP_TOL),
    UnaryOp("Exp", _split(6, {6: F3, 13: F4}), cost="costly", tolerance=_tol(("ulp", 2))),
    UnaryOp("Log", _split(6, {6: F3, 13: F4}), cost="costly", tolerance=_tol(("ulp", 2))),
    UnaryOp("Sqrt", _split(6, {6: F3, 13: F4}), tolerance=_CHEAP_TOL),
    UnaryOp("Reciprocal", _split(6, {6: F3, 13: F4}), tolerance=_CHEAP_TOL),
    UnaryOp("Sigmoid", _split(6, {6: F3, 13: F4}), cost="costly", tolerance=_tol(("ulp", 4))),
    UnaryOp("HardSigmoid", _split(6, {6: F3, 22: F4}),
            attrs=(Attr("alpha", "float", 0.20000000298023224), Attr("beta", "float", 0.5)),
            # x*alpha and +beta round separately (as the ONNX reference does); the
            # result lies in [0, 1], so the error is absolute.
            tolerance=_tol(("abs_rel", 2.0**-22, 0.0), ("abs_rel", 2.0**-51, 0.0))),
    # float32: 6 ulp is the AVX2 level's rational form; the 16-piece table of
    # the scalar and AVX-512 levels keeps 2 (TANH_TABLE_ULP in test_unary.py).
    UnaryOp("Tanh", _split(6, {6: F3, 13: F4}), cost="costly", tolerance=_tol(("ulp", 6))),
    UnaryOp("Relu", _split(6, {6: F3, 13: F4, 14: F4 + SINT}), tolerance=_CHEAP_TOL),
    # float16/bfloat16: x * alpha rounds to f32, then to the output type (one
    # output ulp; alpha is f32, so the double rounding is not innocuous).
    UnaryOp("LeakyRelu", _split(6, {6: F3, 16: F4}), attrs=(ALPHA_LEAKY,),
            tolerance={"float32": EXACT, "float64": EXACT, **_ONE_ULP_LOWP}),
    UnaryOp("Elu", _split(6, {6: F3, 22: F4}), attrs=(ALPHA_ELU,), cost="costly",
            tolerance=_tol(("abs_rel", 1e-37, 4 * 2.0**-23))),
    UnaryOp("Selu", _split(6, {6: F3, 22: F4}),
            attrs=(Attr("alpha", "float", 1.6732631921768188), Attr("gamma", "float", 1.0507010221481323)),
            cost="costly", tolerance=_tol(("abs_rel", 1e-37, 4 * 2.0**-23))),
    UnaryOp("Softplus", _split(1, {1: F3, 22: F4}), cost="costly",
            tolerance=_tol(("abs_rel", 1e-37, 4 * 2.0**-23))),
    UnaryOp("Gelu", _split(20, {20: F4}), attrs=(Attr("approximate", "string", "none", ("none", "tanh")),),
            cost="costly", tolerance=_tol(("abs_rel", 2e-7, 4 * 2.0**-23))),
    UnaryOp("Erf", _split(9, {9: F3, 13: F4}), cost="costly", tolerance=_tol(("abs_rel", 2e-7, 4 * 2.0**-23))),
    UnaryOp("Floor", _split(6, {6: F3, 13: F4}), tolerance=_CHEAP_TOL),
    UnaryOp("Ceil", _split(6, {6: F3, 13: F4}), tolerance=_CHEAP_TOL),
    UnaryOp("Round", _split(11, {11: F3, 22: F4}), tolerance=_CHEAP_TOL),
    UnaryOp("Sign", _split(9, {9: SINT + UINT + F3, 13: SINT + UINT + F4}), tolerance=_CHEAP_TOL),
    UnaryOp("Sin", _split(7, {7: F3, 22: F4}), cost="costly", tolerance=_tol(("abs_rel", 2e-7, 4 * 2.0**-23))),
    UnaryOp("Cos", _split(7, {7: F3, 22: F4}), cost="costly", tolerance=_tol(("abs_rel", 2e-7, 4 * 2.0**-23))),
    UnaryOp("IsNaN", _split(9, {9: F3, 13: F4}), out_bool=True),
    UnaryOp("IsInf", _split(10, {10: ("float32", "float64"), 20: F4}), out_bool=True,
            attrs=(Attr("detect_negative", "int", 1, (0, 1)), Attr("detect_positive", "int", 1, (0, 1)))),
    UnaryOp("Not", _split(1, {1: ("bool",)})),
    # x * clip((x + 3) / 6, 0, 1): two roundings and the product.
    UnaryOp("HardSwish", _split(14, {14: F3, 22: F4}), tolerance=_tol(("ulp", 3))),
    UnaryOp("Mish", _split(18, {18: F3, 22: F4}), cost="costly", tolerance=_tol(("ulp", 5))),
    UnaryOp("Softsign", _split(1, {1: F3, 22: F4}), tolerance=_tol(("ulp", 2))),
    # x / alpha rounds before expm1 (as the formula is written).
    UnaryOp("Celu", _split(12, {12: ("float32",), 28: F4}), attrs=(Attr("alpha", "float", 1.0, nonzero=True),),
            cost="costly", tolerance=_tol(("abs_rel", 1e-37, 6 * 2.0**-23))),
    UnaryOp("ThresholdedRelu", _split(10, {10: F3, 22: F4}), attrs=(ALPHA_ELU,), tolerance=_CHEAP_TOL),
    # float16: x +- bias rounds to float32, then to float16.
    UnaryOp("Shrink", _split(9, {9: UINT + SINT + F3}),
            attrs=(Attr("bias", "float", 0.0, param="beta"), Attr("lambd", "float", 0.5, param="alpha")),
            tolerance={"float32": EXACT, "float64": EXACT, "float16": _ONE_ULP_LOWP["float16"]}),
    UnaryOp("Tan", _split(7, {7: F3, 22: F4}), cost="costly", tolerance=_tol(("ulp", 4))),
    UnaryOp("Asin", _split(7, {7: F3, 22: F4}), cost="costly", tolerance=_tol(("ulp", 3))),
    UnaryOp("Acos", _split(7, {7: F3, 22: F4}), cost="costly", tolerance=_tol(("ulp", 2))),
    UnaryOp("Atan", _split(7, {7: F3, 22: F4}), cost="costly", tolerance=_tol(("ulp", 2))),
    UnaryOp("Sinh", _split(9, {9: F3, 22: F4}), cost="costly", tolerance=_tol(("ulp", 3))),
    UnaryOp("Cosh", _split(9, {9: F3, 22: F4}), cost="costly", tolerance=_tol(("ulp", 2))),
    UnaryOp("Asinh", _split(9, {9: F3, 22: F4}), cost="costly", tolerance=_tol(("ulp", 3))),
    UnaryOp("Acosh", _split(9, {9: F3, 22: F4}), cost="costly", tolerance=_tol(("ulp", 3))),
    UnaryOp("Atanh", _split(9, {9: F3, 22: F4}), cost="costly", tolerance=_tol(("ulp", 3))),
    UnaryOp("BitwiseNot", _split(18, {18: SINT + UINT})),
)

BY_NAME: dict[str, UnaryOp] = {u.op: u for u in UNARY_OPS}


def kernel_name(op: str) -> str:
    return f"olc_elementwise::{op}"
