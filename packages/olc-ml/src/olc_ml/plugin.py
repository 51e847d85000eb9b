"""olc-core plugin: the tree ensemble kernels of manifest.py and the graph
pass that restates ai.onnx.ml nodes for them (passes.py)."""

from __future__ import annotations

import olc_core

from . import manifest, passes


def registrations() -> list[olc_core.KernelRegistration]:
    ext = olc_core.load_extension("olc_ml._ext")
    out = []
    for spec in manifest.ML_OPS:
        classifier = spec.op == "TreeEnsembleClassifier"
        types = {"T1": manifest.INPUT_TYPES, "TZ": ("float32",)}
        if classifier:
            types["TL"] = ("int64",)
        out.append(olc_core.KernelRegistration(
            domain=manifest.RESTATED_DOMAIN,
            op_type=spec.op,
            kernel_name=manifest.kernel_name(spec.op),
            types=types,
            inputs=("T1",),
            outputs=("TL", "TZ") if classifier else ("TZ",),
            factory=ext.vtable(spec.op),
            family=manifest.FAMILY,
            description=f"ai.onnx.ml {spec.op} (restated by the {passes.PASS_NAME} pass): compiled breadth-first "
                        "forest, row blocks, row/tree parallel",
        ))
    return out


@olc_core.hookimpl
def olc_register_kernels() -> list[olc_core.KernelRegistration]:
    return registrations()


@olc_core.hookimpl
def olc_register_graph_passes() -> list[olc_core.GraphPass]:
    return [passes.GRAPH_PASS]
