"""olc-core plugin: registers the com.microsoft kernels listed in manifest.py,
each as an optimized kernel and a naive reference, and the graph pass that
rewrites raw exports' normalization and GELU subgraphs into them
(passes.py)."""

from __future__ import annotations

import olc_core

from . import manifest

FAMILY = manifest.FAMILY


def registrations() -> list[olc_core.KernelRegistration]:
    ext = olc_core.load_extension("olc_contrib_microsoft._ext")
    out = []
    for spec in manifest.OPS:
        for naive in (False, True):
            out.append(
                olc_core.KernelRegistration(
                    domain=manifest.DOMAIN,
                    op_type=spec.op,
                    kernel_name=manifest.kernel_name(spec.op, naive),
                    types=spec.types,
                    inputs=spec.inputs,
                    outputs=spec.outputs,
                    factory=ext.vtable(spec.op, naive),
                    since_version=1,
                    family=FAMILY,
                    description=(f"{spec.op}: plain scalar reference" if naive
                                 else f"{spec.op}: {manifest.ENGINE.get(spec.op, 'one-pass row engine')}, "
                                      "scalar/AVX2/AVX-512"),
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

    return [passes.GRAPH_PASS]
