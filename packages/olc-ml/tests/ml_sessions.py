"""Sessions for the olc-ml tests of converted models.

Converters put standard ops around the ai.onnx.ml nodes (Cast, Concat,
Gather, Reshape, elementwise arithmetic). Where olc-tensor and
olc-elementwise are installed (``nox -s tests``), those run on olc too and
the sessions are strict; with olc-core and olc-ml alone (``nox -s ml``)
they may run on the onnx.reference fallback. Either way every ai.onnx.ml
node must run on an olc-ml kernel.
"""

from __future__ import annotations

from typing import Any

import olc_core

FAMILIES = {r.family for r in olc_core.registered_kernels()}
EVERY_OP_ON_OLC = {"olc-tensor", "olc-elementwise"} <= FAMILIES


def session(model: Any, **options: Any) -> olc_core.Session:
    s = olc_core.Session(model, strict=EVERY_OP_ON_OLC, **options)
    for e in s.kernel_plan():
        if e.domain == "ai.onnx.ml":
            assert e.kernel.startswith("olc_ml::"), (e.node_name, e.op_type, e.kernel)
    return s
