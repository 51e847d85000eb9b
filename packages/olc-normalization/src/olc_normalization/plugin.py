"""olc-core plugin: registers the normalization kernels listed in manifest.py."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from onnx import helper

import olc_core

from . import manifest

FAMILY = "olc-normalization"


def _supports(spec: manifest.NormOp) -> Callable[[Any], str | None] | None:
    if not spec.refuse and spec.max_outputs is None:
        return None

    def supports(node: Any) -> str | None:
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        for name, only in spec.refuse:
            if name in attrs and attrs[name] != only:
                return f"{name}={attrs[name]} is not implemented (only {name}={only})"
        if spec.max_outputs is not None:
            present = sum(1 for o in node.output if o)
            if present > spec.max_outputs:
                return f"{present} outputs requested; only inference mode (one output) is implemented"
        return None

    return supports


def registrations() -> list[olc_core.KernelRegistration]:
    ext = olc_core.load_extension("olc_normalization._ext")
    out = []
    for spec in manifest.NORM_OPS:
        factory = ext.vtable(spec.op)
        for seg in spec.segments:
            inputs = manifest.BATCHNORM_INPUTS.get(seg.since, spec.inputs) if spec.op == "BatchNormalization" \
                else spec.inputs
            out.append(
                olc_core.KernelRegistration(
                    domain=spec.domain,
                    op_type=spec.op,
                    kernel_name=manifest.kernel_name(spec.op),
                    types=seg.types,
                    inputs=inputs,
                    outputs=spec.outputs,
                    factory=factory,
                    since_version=seg.since,
                    until_version=seg.until,
                    family=FAMILY,
                    description=f"{spec.op}: row engine, scalar/AVX2/AVX-512",
                    supports=_supports(spec),
                )
            )
    return out


@olc_core.hookimpl
def olc_register_kernels() -> list[olc_core.KernelRegistration]:
    return registrations()
