"""The one table of olc-elementwise's multi-input kernels.

Binary operators (Add ... PRelu), variadic Sum/Mean/Min/Max, Where, Clip and
SwiGLU. Registration (plugin.py), the tests and the benchmarks all read this
table. Each row gives the operator, its kind, its attributes, and one
segment per ONNX schema version whose type constraints changed, with the
element types per type constraint as the schema lists them (a test compares
every segment with ``onnx.defs.get_schema(op, version)``); types olc does
not compute (string, complex) are left out, never added.

Segments start where the operator's broadcasting semantics begin: opset 7
for the binary operators whose older versions carry the legacy ``axis`` /
``broadcast`` attributes, opset 6 for the variadic operators (``Sum-6``
requires equal shapes, of which broadcasting is a superset) and Clip.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

MAX_OPSET = 2**31 - 1

F3 = ("float32", "float64", "float16")
F4 = F3 + ("bfloat16",)
SINT = ("int8", "int16", "int32", "int64")
UINT = ("uint8", "uint16", "uint32", "uint64")
INT = SINT + UINT
NUM3 = F3 + INT
NUM4 = F4 + INT
I32_64 = ("int32", "int64", "uint32", "uint64")
ALL_FIXED = NUM4 + ("bool",)


@dataclass(frozen=True)
class Attr:
    name: str
    kind: str  # "float" | "int" | "string"
    default: Any
    allowed: tuple[Any, ...] | None = None  # None: any finite value


@dataclass(frozen=True)
class Segment:
    since: int
    until: int
    types: dict[str, tuple[str, ...]]  # type constraint -> element types


@dataclass(frozen=True)
class NaryOp:
    op: str
    kind: str  # "binary" | "variadic" | "where" | "clip" | "swiglu"
    segments: tuple[Segment, ...]
    inputs: tuple[str | None, ...]  # constraint of each input position
    outputs: tuple[str, ...] = ("T",)
    attrs: tuple[Attr, ...] = ()
    bool_out: bool = False
    cost: str = "cheap"

    @property
    def since(self) -> int:
        return self.segments[0].since

    def types_at(self, opset: int, constraint: str = "T") -> tuple[str, ...]:
        for s in self.segments:
            if s.since <= opset <= s.until:
                return s.types.get(constraint, ())
        return ()

    def types(self, constraint: str = "T") -> tuple[str, ...]:
        seen: list[str] = []
        for s in self.segments:
            seen.extend(t for t in s.types.get(constraint, ()) if t not in seen)
        return tuple(seen)


def _split(changes: dict[int, dict[str, tuple[str, ...]]]) -> tuple[Segment, ...]:
    starts = sorted(changes)
    out = []
    for k, start in enumerate(starts):
        until = starts[k + 1] - 1 if k + 1 < len(starts) else MAX_OPSET
        out.append(Segment(start, until, dict(changes[start])))
    return tuple(out)


def _t(types, **more):
    return {"T": tuple(types), **{k: tuple(v) for k, v in more.items()}}


_ARITH = _split({7: _t(F3 + I32_64), 13: _t(F4 + I32_64), 14: _t(NUM4)})
_BOOL1 = {"T1": ("bool",)}

NARY_OPS: tuple[NaryOp, ...] = (
    NaryOp("Add", "binary", _ARITH, ("T", "T")),
    NaryOp("Sub", "binary", _ARITH, ("T", "T")),
    NaryOp("Mul", "binary", _ARITH, ("T", "T")),
    NaryOp("Div", "binary", _ARITH, ("T", "T")),
    NaryOp("Mod", "binary", _split({10: _t(NUM3), 13: _t(NUM4)}), ("T", "T"),
           attrs=(Attr("fmod", "int", 0, (0, 1)),), cost="costly"),
    NaryOp("Pow", "binary",
           _split({7: _t(F3), 12: _t(F3 + ("int32", "int64"), T1=NUM3),
                   13: _t(F4 + ("int32", "int64"), T1=NUM3),
                   15: _t(F4 + ("int32", "int64"), T1=NUM4)}),
           ("T", "T1"), cost="costly"),
    NaryOp("Equal", "binary",
           _split({7: _t(("bool", "int32", "int64"), **_BOOL1), 11: _t(("bool",) + NUM3, **_BOOL1),
                   13: _t(("bool",) + NUM4, **_BOOL1)}),
           ("T", "T"), ("T1",), bool_out=True),
    NaryOp("Greater", "binary", _split({7: _t(F3, **_BOOL1), 9: _t(NUM3, **_BOOL1), 13: _t(NUM4, **_BOOL1)}),
           ("T", "T"), ("T1",), bool_out=True),
    NaryOp("GreaterOrEqual", "binary", _split({12: _t(NUM3, **_BOOL1), 16: _t(NUM4, **_BOOL1)}),
           ("T", "T"), ("T1",), bool_out=True),
    NaryOp("Less", "binary", _split({7: _t(F3, **_BOOL1), 9: _t(NUM3, **_BOOL1), 13: _t(NUM4, **_BOOL1)}),
           ("T", "T"), ("T1",), bool_out=True),
    NaryOp("LessOrEqual", "binary", _split({12: _t(NUM3, **_BOOL1), 16: _t(NUM4, **_BOOL1)}),
           ("T", "T"), ("T1",), bool_out=True),
    NaryOp("And", "binary", _split({7: _t(("bool",), **_BOOL1)}), ("T", "T"), ("T1",), bool_out=True),
    NaryOp("Or", "binary", _split({7: _t(("bool",), **_BOOL1)}), ("T", "T"), ("T1",), bool_out=True),
    NaryOp("Xor", "binary", _split({7: _t(("bool",), **_BOOL1)}), ("T", "T"), ("T1",), bool_out=True),
    NaryOp("BitwiseAnd", "binary", _split({18: _t(INT)}), ("T", "T")),
    NaryOp("BitwiseOr", "binary", _split({18: _t(INT)}), ("T", "T")),
    NaryOp("BitwiseXor", "binary", _split({18: _t(INT)}), ("T", "T")),
    NaryOp("BitShift", "binary", _split({11: _t(UINT), 28: _t(INT)}), ("T", "T"),
           attrs=(Attr("direction", "string", None, ("LEFT", "RIGHT")),)),
    NaryOp("PRelu", "binary", _split({7: _t(F3), 9: _t(F3 + I32_64), 16: _t(F4 + I32_64)}), ("T", "T")),
    NaryOp("Sum", "variadic", _split({6: _t(F3), 13: _t(F4)}), ("T",)),
    NaryOp("Mean", "variadic", _split({6: _t(F3), 13: _t(F4)}), ("T",)),
    NaryOp("Min", "variadic", _split({6: _t(F3), 12: _t(NUM3), 13: _t(NUM4)}), ("T",)),
    NaryOp("Max", "variadic", _split({6: _t(F3), 12: _t(NUM3), 13: _t(NUM4)}), ("T",)),
    NaryOp("Where", "where",
           _split({9: {"B": ("bool",), "T": NUM3 + ("bool",)}, 16: {"B": ("bool",), "T": ALL_FIXED}}),
           ("B", "T", "T")),
    NaryOp("Clip", "clip", _split({6: _t(F3), 11: _t(F3), 12: _t(NUM3), 13: _t(NUM4)}), ("T", "T", "T"),
           attrs=(Attr("min", "float", -3.4028234663852886e38), Attr("max", "float", 3.4028234663852886e38))),
    NaryOp("SwiGLU", "swiglu", _split({28: _t(F4)}), ("T", "T"), attrs=(Attr("alpha", "float", 1.0),),
           cost="costly"),
)

BY_NAME: dict[str, NaryOp] = {o.op: o for o in NARY_OPS}

# Variadic kernels take at most this many inputs; more run on the fallback.
MAX_VARIADIC_INPUTS = 16


def kernel_name(op: str) -> str:
    return f"olc_elementwise::{op}"
