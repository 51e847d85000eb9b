"""olc-core plugin: the registrations of manifest.py."""

from __future__ import annotations

import olc_core

from . import attributes, manifest, python_kernels


def registrations() -> list[olc_core.KernelRegistration]:
    ext = olc_core.load_extension("olc_ml._ext")
    out = []
    for spec in manifest.ML_OPS:
        native = spec.kind == "native"
        out.append(olc_core.KernelRegistration(
            domain=manifest.ML_DOMAIN,
            op_type=spec.op,
            kernel_name=spec.kernel_name,
            types=spec.types,
            inputs=spec.inputs,
            outputs=spec.outputs,
            factory=ext.vtable(spec.op) if native else getattr(python_kernels, spec.python),
            since_version=spec.since,
            until_version=spec.until,
            family=manifest.FAMILY,
            description=spec.description,
            supports=spec.supports,
            priority=spec.priority,
            native_attributes=getattr(attributes, spec.attributes) if native else None,
        ))
    return out


@olc_core.hookimpl
def olc_register_kernels() -> list[olc_core.KernelRegistration]:
    return registrations()
