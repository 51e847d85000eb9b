"""olc-core plugin: registers the kernels listed in manifest.py, each as an
optimized kernel and a naive reference, and the graph passes (passes.py):
one fuses the unfused attention of encoder exports, the other runs
com.microsoft Attention's projection as a MatMul on the matmul family."""

from __future__ import annotations

import olc_core

from . import manifest

FAMILY = manifest.FAMILY


def registrations() -> list[olc_core.KernelRegistration]:
    ext = olc_core.load_extension("olc_attention._ext")
    out = []
    for spec in manifest.OPS:
        for naive in (False, True):
            out.append(
                olc_core.KernelRegistration(
                    domain=spec.domain,
                    op_type=spec.op,
                    kernel_name=manifest.kernel_name(spec.name, naive),
                    types=spec.types,
                    inputs=spec.inputs,
                    outputs=spec.outputs,
                    factory=ext.vtable(spec.domain, spec.op, naive),
                    since_version=spec.since,
                    family=FAMILY,
                    description=(f"{spec.op}: plain float64 reference" if naive
                                 else f"{spec.op}: {spec.summary}"),
                    implementation="naive" if naive else "optimized",
                )
            )
    return out


@olc_core.hookimpl
def olc_register_kernels() -> list[olc_core.KernelRegistration]:
    return registrations()


@olc_core.hookimpl
def olc_register_graph_passes() -> list[olc_core.GraphPass]:
    from . import passes

    return [passes.GRAPH_PASS, passes.SPLIT_PASS]
