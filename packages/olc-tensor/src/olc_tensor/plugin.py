"""olc-core plugin: registers the kernels listed in manifest.py."""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

import olc_core

from . import manifest

FAMILY = "olc-tensor"


def _load_ext() -> ModuleType:
    try:
        return importlib.import_module("olc_tensor._ext")
    except ImportError as e:
        cause = e.__cause__ or e.__context__
        detail = f"{e}: {cause}" if cause is not None else str(e)
        raise ImportError(f"olc_tensor: cannot load the native extension ({detail})") from e


def _cast_supports(opset_of_node: Any = None):
    """Cast declines targets it does not convert to natively (float8, int4, string)."""

    def supports(node: Any) -> str | None:
        to = next((a for a in node.attribute if a.name == "to"), None)
        if to is None or to.type != 2:  # AttributeProto.INT
            return "attribute 'to' is missing or not an int"
        t = manifest.CODE_TO_TYPE.get(int(to.i))
        if t is None:
            return f"target type code {to.i} is not converted natively"
        return None

    return supports


def _split_supports(node: Any) -> str | None:
    return None


def registrations() -> list[olc_core.KernelRegistration]:
    ext = _load_ext()
    out = []
    for spec in manifest.OPS:
        factory = ext.vtable(spec.op)
        for seg in spec.segments:
            types = {spec.main_constraint: seg.types, **dict(spec.extra_types)}
            if spec.op == "CastLike":
                types["T2"] = seg.types
            supports = None
            if spec.op == "Cast":
                types["T2"] = manifest.cast_target_types(seg.since)
                supports = _cast_supports()
                if seg.since < 13:
                    supports = _cast_supports_until_12
            out.append(
                olc_core.KernelRegistration(
                    domain="",
                    op_type=spec.op,
                    kernel_name=manifest.kernel_name(spec.op),
                    types=types,
                    inputs=spec.inputs,
                    outputs=("T2",) if spec.op == "Cast" else (),
                    factory=factory,
                    since_version=seg.since,
                    until_version=seg.until,
                    family=FAMILY,
                    description=spec.description or spec.op,
                    supports=supports,
                )
            )
    return out


def _cast_supports_until_12(node: Any) -> str | None:
    why = _cast_supports()(node)
    if why:
        return why
    to = next(a for a in node.attribute if a.name == "to")
    if manifest.CODE_TO_TYPE[int(to.i)] == "bfloat16":
        return "bfloat16 targets join Cast at opset 13"
    return None


@olc_core.hookimpl
def olc_register_kernels() -> list[olc_core.KernelRegistration]:
    return registrations()
