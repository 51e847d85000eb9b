"""The registration record a kernel family returns from its plugin hook."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

DEFAULT_DOMAIN = "ai.onnx"
MAX_OPSET = 2**31 - 1

# A family may register two implementations of an op: the production kernel
# ("optimized", the default) and a plainly written reference ("naive"), which
# a session uses only when asked (``Session(..., naive=...)``).
IMPLEMENTATIONS = ("optimized", "naive")

# Element type names used in registrations (ONNX TensorProto names, lower case).
TENSOR_TYPES = (
    "float32", "float64", "float16", "bfloat16",
    "int8", "int16", "int32", "int64",
    "uint8", "uint16", "uint32", "uint64",
    "bool", "string",
    "float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz",
    "uint4", "int4",
)


def elem_name(elem_type: int) -> str:
    """onnx's lower-case name of a TensorProto element type code ("float",
    "int64", ...); a code onnx does not know (a corrupt model) is named by
    its number instead of raising."""
    from onnx import helper

    try:
        return helper.tensor_dtype_to_string(elem_type).replace("TensorProto.", "").lower()
    except (KeyError, ValueError):
        return f"unknown element type {elem_type}"


def normalize_domain(domain: str) -> str:
    """ONNX spells the default domain as "" or "ai.onnx"; olc uses the latter."""
    return DEFAULT_DOMAIN if domain in ("", DEFAULT_DOMAIN) else domain


@dataclass(frozen=True)
class KernelRegistration:
    """One kernel for one operator over an opset range and a set of types.

    ``types`` maps a type-constraint name to the element types accepted for
    it; ``inputs`` names the constraint of each input position (``None`` for
    an input the kernel accepts with any type, positions past the tuple are
    unconstrained). All inputs sharing a constraint must have the same type.
    ``outputs`` names the constraint of each output; the session uses it to
    type the outputs when shape inference could not (custom domains).

    ``factory`` is either a PyCapsule holding a native ``olc_kernel_vtable``
    (see ``olc/kernel_abi.h``) or a Python callable ``factory(node) ->
    kernel``, where ``node`` is an :class:`olc_core.NodeInfo` and ``kernel``
    is a callable taking the input arrays and returning a sequence of
    outputs.

    Among registrations covering the same node, the highest ``priority``
    wins; two covering registrations with equal priority are a conflict
    and are reported when the dispatch table is built.

    ``supports(node) -> str | None`` may decline a node by its attributes
    (the reason); the next registration covering the node is then tried.

    ``native_attributes(node, input_shapes)``, for a native kernel of an op
    whose attributes the ABI cannot carry as they are (STRINGS, TENSOR),
    returns the node's attributes as the kernel takes them: ``(name, type
    code, value)`` tuples, INTS and FLOATS as int64 / float64 arrays.
    ``input_shapes`` holds each input's inferred dims (ints, symbolic names
    or None) or None, so facts such as a feature count can be checked at
    creation. A ``ValueError`` it raises is an OlcError naming the node.

    ``implementation`` is ``"optimized"`` (the default) or ``"naive"``: a
    naive registration is a plainly written reference of an op the family
    also registers optimized; sessions take it only for the families named
    in ``Session(..., naive=...)`` (and then before the optimized one).
    """

    domain: str
    op_type: str
    kernel_name: str
    types: Mapping[str, tuple[str, ...]]
    inputs: tuple[str | None, ...]
    factory: Any
    outputs: tuple[str | None, ...] = ()
    since_version: int = 1
    until_version: int = MAX_OPSET
    device: str = "cpu"
    priority: int = 0
    family: str = ""
    description: str = ""
    supports: Callable[[Any], str | None] | None = field(default=None, compare=False)
    implementation: str = "optimized"
    native_attributes: Callable[[Any, Sequence[Any]], Sequence[tuple[str, int, Any]]] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "domain", normalize_domain(self.domain))
        frozen_types = {k: tuple(v) for k, v in self.types.items()}
        for name, allowed in frozen_types.items():
            for t in allowed:
                if t not in TENSOR_TYPES:
                    raise ValueError(f"{self.kernel_name}: unknown element type {t!r} in constraint {name!r}")
        object.__setattr__(self, "types", MappingProxyType(frozen_types))
        object.__setattr__(self, "inputs", tuple(self.inputs))
        object.__setattr__(self, "outputs", tuple(self.outputs))
        for c in self.inputs + self.outputs:
            if c is not None and c not in frozen_types:
                raise ValueError(f"{self.kernel_name}: constraint {c!r} is not declared in types")
        if "::" not in self.kernel_name:
            raise ValueError(f"kernel_name must be library-qualified (lib::Name), got {self.kernel_name!r}")
        if self.since_version > self.until_version:
            raise ValueError(f"{self.kernel_name}: since_version > until_version")
        if self.implementation not in IMPLEMENTATIONS:
            raise ValueError(f"{self.kernel_name}: implementation must be one of {IMPLEMENTATIONS}, "
                             f"got {self.implementation!r}")

    def covers_opset(self, opset: int) -> bool:
        return self.since_version <= opset <= self.until_version

    def match_types(self, input_types: tuple[str | None, ...]) -> str | None:
        """Returns None when the input types are accepted, else the reason.

        ``input_types[i]`` is an element type name, ``""`` for an omitted
        optional input (ONNX names it ""; any constraint accepts it, the
        kernel sees OLC_DTYPE_UNDEFINED), or None when inference left it
        unknown.
        """
        bound: dict[str, str] = {}
        for i, constraint in enumerate(self.inputs):
            if constraint is None or i >= len(input_types):
                continue
            t = input_types[i]
            if t == "":
                continue
            if t is None:
                return f"type of input {i} is not known"
            if t not in self.types[constraint]:
                return f"input {i} has type {t}, kernel accepts {', '.join(self.types[constraint])}"
            if bound.setdefault(constraint, t) != t:
                return f"inputs bound to {constraint} have different types ({bound[constraint]} and {t})"
        return None

    def output_types(self, input_types: tuple[str | None, ...]) -> tuple[str | None, ...]:
        """Output element types implied by accepted input types (None where unknown)."""
        bound: dict[str, str] = {}
        for constraint, t in zip(self.inputs, input_types):
            if constraint is not None and t:
                bound.setdefault(constraint, t)
        result: list[str | None] = []
        for constraint in self.outputs:
            if constraint is None:
                result.append(None)
            elif constraint in bound:
                result.append(bound[constraint])
            elif len(self.types[constraint]) == 1:
                result.append(self.types[constraint][0])
            else:
                result.append(None)
        return tuple(result)
