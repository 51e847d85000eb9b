"""olc-core plugin: registers the kernels listed in manifest.py."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import olc_core

from . import manifest

FAMILY = "olc-tensor"
_INT_ATTRIBUTE = 2  # onnx.AttributeProto.INT
_TENSOR_ATTRIBUTE = 4  # onnx.AttributeProto.TENSOR


def _cast_target(node: Any) -> tuple[str | None, str | None]:
    """(target type name, refusal reason) of a Cast node."""
    to = next((a for a in node.attribute if a.name == "to"), None)
    if to is None or to.type != _INT_ATTRIBUTE:
        return None, "attribute 'to' is missing or not an int"
    t = manifest.CODE_TO_TYPE.get(int(to.i))
    if t is None:
        return None, f"target type code {to.i} is not converted natively (int4, float4, float8e8m0, string: fallback)"
    return t, None


def _cast_supports(since: int) -> Any:
    """The `supports` check of the Cast registration segment starting at
    opset `since`: the 'to' type must be a native target at that opset."""
    allowed = set(manifest.cast_target_types(since))

    def supports(node: Any) -> str | None:
        t, why = _cast_target(node)
        if why:
            return why
        if t not in allowed:
            kind = "float8" if t in manifest.FLOAT8 else t
            joins = next(v for v in (13, 19) if t in manifest.cast_target_types(v))
            return f"{kind} targets join Cast at opset {joins}"
        return None

    return supports


def _constant_of_shape_supports(types: tuple[str, ...]) -> Callable[[Any], str | None]:
    """ConstantOfShape: the `value` tensor must be one element of a claimed type."""
    allowed = set(types)

    def supports(node: Any) -> str | None:
        value = next((a for a in node.attribute if a.name == "value"), None)
        if value is None:
            return None  # float32 zeros
        if value.type != _TENSOR_ATTRIBUTE:
            return "attribute 'value' is not a tensor"
        t = manifest.CODE_TO_TYPE.get(int(value.t.data_type))
        if t not in allowed:
            return f"value of type code {value.t.data_type} is not filled natively at this opset"
        n = 1
        for d in value.t.dims:
            n *= int(d)
        if n != 1:
            return f"attribute 'value' must hold one element, it holds {n}"
        return None

    return supports


def _eye_like_supports(types: tuple[str, ...]) -> Callable[[Any], str | None]:
    """EyeLike: a `dtype` attribute must name a claimed output type."""
    allowed = set(types)

    def supports(node: Any) -> str | None:
        dt = next((a for a in node.attribute if a.name == "dtype"), None)
        if dt is None:
            return None
        if dt.type != _INT_ATTRIBUTE:
            return "attribute 'dtype' is not an int"
        if manifest.CODE_TO_TYPE.get(int(dt.i)) not in allowed:
            return f"output type code {dt.i} is not produced natively at this opset"
        return None

    return supports


def _quantize_supports(op: str, since: int) -> Callable[[Any], str | None]:
    """QuantizeLinear / DequantizeLinear: an `output_dtype` (21+) or
    `precision` (23+) attribute must name a type the kernel produces or
    computes in; int2/uint2 and float4 have no native element type."""
    if op == "QuantizeLinear":
        allowed_out = set(manifest.Q8 + manifest.FLOAT8 + (manifest.Q16 + manifest.Q4 if since >= 21 else ()))
    else:
        allowed_out = set(manifest.QFLOAT)

    def supports(node: Any) -> str | None:
        for a in node.attribute:
            if a.name not in ("output_dtype", "precision"):
                continue
            if a.type != _INT_ATTRIBUTE:
                return f"attribute {a.name!r} is not an int"
            if a.i == 0:
                continue
            t = manifest.QUANT_CODE_TO_TYPE.get(int(a.i))
            allowed = allowed_out if a.name == "output_dtype" else set(manifest.QFLOAT)
            if t not in allowed:
                return f"{a.name} = {a.i} is not a type the kernel handles natively"
        return None

    return supports


def registrations() -> list[olc_core.KernelRegistration]:
    ext = olc_core.load_extension("olc_tensor._ext")
    out = []
    for spec in manifest.OPS:
        factory = ext.vtable(spec.op)
        for seg in spec.segments:
            types = {spec.main_constraint: seg.types, **dict(spec.extra_types)}
            for c in spec.mirrors:
                types[c] = seg.types
            supports = None
            outputs: tuple[str | None, ...] = spec.outputs
            if spec.op == "CastLike":
                types["T2"] = seg.types
            elif spec.op == "Cast":
                # The target comes from the 'to' attribute: declared as T2 for
                # output typing, checked by `supports`.
                types["T2"] = manifest.cast_target_types(seg.since)
                outputs = ("T2",)
                supports = _cast_supports(seg.since)
            elif spec.op == "ConstantOfShape" and not spec.domain:
                supports = _constant_of_shape_supports(seg.types)
            elif spec.op == "EyeLike":
                supports = _eye_like_supports(seg.types)
            elif spec.op in ("QuantizeLinear", "DequantizeLinear"):
                supports = _quantize_supports(spec.op, seg.since)
            out.append(
                olc_core.KernelRegistration(
                    domain=spec.domain,
                    op_type=spec.op,
                    kernel_name=manifest.kernel_name(spec.op),
                    types=types,
                    inputs=spec.inputs,
                    outputs=outputs,
                    factory=factory,
                    since_version=seg.since,
                    until_version=seg.until,
                    family=FAMILY,
                    description=spec.description or spec.op,
                    supports=supports,
                )
            )
    return out


@olc_core.hookimpl
def olc_register_kernels() -> list[olc_core.KernelRegistration]:
    return registrations()


@olc_core.hookimpl
def olc_register_graph_passes() -> list[olc_core.GraphPass]:
    from . import passes

    return [passes.GRAPH_PASS, passes.CONCAT_SLICES]
