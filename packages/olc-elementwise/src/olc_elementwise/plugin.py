"""olc-core plugin: registers the unary kernels listed in manifest.py."""

from __future__ import annotations

from types import ModuleType

import olc_core

from . import manifest

FAMILY = "olc-elementwise"


def registrations() -> list[olc_core.KernelRegistration]:
    ext = olc_core.load_extension("olc_elementwise._ext")
    out = []
    for spec in manifest.UNARY_OPS:
        factory = ext.vtable(spec.op)
        for seg in spec.segments:
            types = {spec.input_constraint: seg.types}
            if spec.out_bool:
                types["T2"] = ("bool",)
            out.append(
                olc_core.KernelRegistration(
                    domain="",
                    op_type=spec.op,
                    kernel_name=manifest.kernel_name(spec.op),
                    types=types,
                    inputs=(spec.input_constraint,),
                    factory=factory,
                    since_version=seg.since,
                    until_version=seg.until,
                    family=FAMILY,
                    description=f"{spec.op} ({spec.cost}), scalar/AVX2/AVX-512",
                )
            )
    out.append(fused_registration(ext))
    out.extend(nary_registrations(ext))
    return out


def _variadic_supports(node) -> str | None:
    from .binary_manifest import MAX_VARIADIC_INPUTS

    if len(node.input) > MAX_VARIADIC_INPUTS:
        return f"more than {MAX_VARIADIC_INPUTS} inputs"
    return None


def nary_registrations(ext: ModuleType) -> list[olc_core.KernelRegistration]:
    """Binary, variadic, Where, Clip and SwiGLU kernels (binary_manifest.py)."""
    from . import binary_manifest as bm

    out = []
    for spec in bm.NARY_OPS:
        factory = ext.vtable(spec.op)
        # Clip's min/max are optional: only input 0 is matched here, the
        # kernel checks the bounds' types at create().
        inputs = ("T",) if spec.kind in ("clip", "variadic") else spec.inputs
        for seg in spec.segments:
            # Pow-7 has one constraint for both inputs; later versions split it.
            seg_inputs = tuple(c if c is None or c in seg.types else "T" for c in inputs)
            out.append(
                olc_core.KernelRegistration(
                    domain="",
                    op_type=spec.op,
                    kernel_name=bm.kernel_name(spec.op),
                    types=seg.types,
                    inputs=seg_inputs,
                    outputs=spec.outputs,
                    factory=factory,
                    since_version=seg.since,
                    until_version=seg.until,
                    family=FAMILY,
                    description=f"{spec.op} ({spec.kind}, broadcast plan), scalar/AVX2/AVX-512",
                    supports=_variadic_supports if spec.kind == "variadic" else None,
                )
            )
    return out


def fused_registration(ext: ModuleType) -> olc_core.KernelRegistration:
    """The fused elementwise kernel: the nodes the fusion pass makes (fusion.py)."""
    from . import fusion

    return olc_core.KernelRegistration(
        domain=fusion.FUSED_DOMAIN,
        op_type=fusion.FUSED_OP,
        kernel_name=fusion.KERNEL_NAME,
        types={"T": ("float32", "bfloat16")},
        inputs=("T",) * fusion.MAX_INPUTS,
        outputs=("T",),
        factory=ext.fused_vtable(),
        family=FAMILY,
        description="fused chain of unary/binary elementwise steps (docs/fusion.md), scalar/AVX2/AVX-512",
    )


@olc_core.hookimpl
def olc_register_kernels() -> list[olc_core.KernelRegistration]:
    return registrations()


@olc_core.hookimpl
def olc_register_graph_passes() -> list[olc_core.GraphPass]:
    from . import fusion

    return [fusion.GRAPH_PASS]
